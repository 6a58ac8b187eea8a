#!/usr/bin/env bash
# test_ab_compare.sh PYTHON: bench/ab_compare.py on the runs docs/history/split-k.md quotes
# (docs/data/narrow-ab*-h100-2026-12-07.csv.xz: the tree without the four-slice 64 x 32 tile,
# "old", against the tree with it, "new", four and two passes) must print that note's figures;
# malformed files must exit 2 with one line naming the problem.  Prints "N passed, N failed".
set -u
py=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/mmt_ab_XXXXXX)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
ok() { passed=$((passed + 1)); }
bad() { failed=$((failed + 1)); echo "FAILED: $1"; }
# run NAME FILE (under docs/data) LINE...: the file's figures; each LINE a regular expression
# that one whole line of the output must match
run() {
  local name=$1 file=$2 out line; shift 2
  xz -dc "$here/../docs/data/$file" > "$tmp/$name.csv"
  if ! out=$("$py" "$here/ab_compare.py" "$tmp/$name.csv" --a old --b new 2>&1); then
    bad "$name: exit $?"; echo "$out" | tail -n 3; return
  fi
  for line in "$@"; do
    echo "$out" | grep -qx "$line" || { bad "$name: no line '$line'"; echo "$out" | tail -n 3; return; }
  done
  ok
}
run four-passes narrow-ab-h100-2026-12-07.csv.xz \
  "36 cases: new over old 1.028x geomean; 12 changed kernels, 1.089x over those, 10 faster" \
  "over the peer: old 0.862x (min 0.700x), new 0.886x (min 0.717x)" \
  "linear *64x1024x8192 k70_proj *old 0.0182 new 0.0147 ms  new/old speedup 1.242 .*changed: .*"
run two-passes narrow-ab2-h100-2026-12-07.csv.xz \
  "60 cases: new over old 1.035x geomean; 30 changed kernels, 1.071x over those, 22 faster" \
  "over the peer: old 0.959x (min 0.698x), new 0.993x (min 0.716x)"
one_line_exit2() { # name, expected text, then the file's content
  local name=$1 want=$2; shift 2
  printf '%s\n' "$@" > "$tmp/$name.csv"
  local o r
  o=$("$py" "$here/ab_compare.py" "$tmp/$name.csv" 2>&1); r=$?
  if [ $r -eq 2 ] && [ "$(echo "$o" | wc -l)" -eq 1 ] && echo "$o" | grep -q "^ab_compare: .*$want"; then
    ok
  else
    bad "$name (rc $r): $o"
  fi
}
row='linear,f16,64x1024x8192 k,0.0182,0.0139,0.76,0,ok,"default wgmma x"'
one_line_exit2 tag "tag 'c1' is not a or b" "a1,$row" "c1,$row"
one_line_exit2 one_build "was not run by both builds" "a1,$row" "a2,$row"
one_line_exit2 fields "1 fields, not 10" "a1,$row" "b1"
one_line_exit2 time "a time that is not positive" "a1,$row" "b1,linear,f16,c,0,0.01,1,0,ok,k"
one_line_exit2 number "a time that is not a number" "a1,$row" "b1,linear,f16,c,fast,0.01,1,0,ok,k"
one_line_exit2 empty "no rows" "a1,family,dtype,case,mmtune_ms,peer_ms,ratio,rel_diff,check,kernel"
o=$("$py" "$here/ab_compare.py" "$tmp/absent.csv" 2>&1); r=$?
if [ $r -eq 2 ] && [ "$(echo "$o" | wc -l)" -eq 1 ] && echo "$o" | grep -q "^ab_compare: cannot read '$tmp/absent.csv'"; then
  ok
else
  bad "absent (rc $r): $o"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
