#!/usr/bin/env python3
"""ab_compare.py: two builds of mmtune-matmul-bench, A and B, alternated in one run
(`scripts/gpu-check.sh ab`), compared case by case.

  ab_compare.py CSV [--a LABEL] [--b LABEL]

CSV holds the bench's --csv rows of every pass, each prefixed with the pass's tag: the build's
label and the pass number ("a1,linear,f16,64x1024x8192 k_proj,0.0182,...").  A header row
("a1,family,...") may open each pass.  For each case (family and case), the median of its
mmtune times over each build's passes, B's speedup over A (A's median over B's), and both
over the peer (the peer's median over all passes); a case whose kernel differs between the
builds is marked.  Last, the geometric means over every case and over the changed ones, and
each build's geomean and minimum over the peer.  Exit 2 with one line on a malformed file.
"""
import argparse
import csv
import math
import re
import statistics
import sys

COLUMNS = ["family", "dtype", "case", "mmtune_ms", "peer_ms", "ratio", "rel_diff", "check",
           "kernel"]


def fail(msg):
    print(f"ab_compare: {msg}", file=sys.stderr)
    sys.exit(2)


def read(path, labels):
    """{(family, case): {label: [ms...]}}, {(family, case): [peer ms...]}, kernels."""
    times, peer, kernel = {}, {}, {}
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        fail(f"cannot read '{path}': {e}")
    for line, row in enumerate(rows, 1):
        if len(row) != 1 + len(COLUMNS):
            fail(f"{path}:{line}: {len(row)} fields, not {1 + len(COLUMNS)} (a tag, then the "
                 "bench's columns)")
        tag, rec = row[0], dict(zip(COLUMNS, row[1:]))
        if rec["family"] == "family":
            continue
        m = re.fullmatch(r"([A-Za-z_]+)[0-9]*", tag)
        if not m or m.group(1) not in labels:
            fail(f"{path}:{line}: tag '{tag}' is not {labels[0]} or {labels[1]} and a pass number")
        try:
            ms, pms = float(rec["mmtune_ms"]), float(rec["peer_ms"])
        except ValueError:
            fail(f"{path}:{line}: a time that is not a number")
        if not (ms > 0 and pms > 0 and math.isfinite(ms) and math.isfinite(pms)):
            fail(f"{path}:{line}: a time that is not positive")
        key = (rec["family"], rec["case"])
        times.setdefault(key, {}).setdefault(m.group(1), []).append(ms)
        peer.setdefault(key, []).append(pms)
        kernel.setdefault(key, {})[m.group(1)] = rec["kernel"]
    if not times:
        fail(f"{path}: no rows")
    return times, peer, kernel


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("csv")
    ap.add_argument("--a", default="a", help="build A's label (default a)")
    ap.add_argument("--b", default="b", help="build B's label (default b)")
    args = ap.parse_args()
    labels = (args.a, args.b)
    times, peer, kernel = read(args.csv, labels)
    speedup, changed, over_a, over_b = [], [], [], []
    for key in sorted(times):
        t = times[key]
        if args.a not in t or args.b not in t:
            fail(f"case '{key[0]} {key[1]}' was not run by both builds")
        a, b, p = (statistics.median(t[args.a]), statistics.median(t[args.b]),
                   statistics.median(peer[key]))
        diff = kernel[key][args.a] != kernel[key][args.b]
        speedup.append(a / b)
        over_a.append(p / a)
        over_b.append(p / b)
        if diff:
            changed.append(a / b)
        print(f"{key[0]:10s} {key[1]:28s} {args.a} {a:.4f} {args.b} {b:.4f} ms  "
              f"{args.b}/{args.a} speedup {a / b:.3f}  peer {p:.4f}"
              + (f"  changed: {kernel[key][args.b]}" if diff else ""))
    print(f"{len(speedup)} cases: {args.b} over {args.a} {geomean(speedup):.3f}x geomean; "
          f"{len(changed)} changed kernels"
          + (f", {geomean(changed):.3f}x over those, {sum(s > 1 for s in changed)} faster"
             if changed else ""))
    print(f"over the peer: {args.a} {geomean(over_a):.3f}x (min {min(over_a):.3f}x), "
          f"{args.b} {geomean(over_b):.3f}x (min {min(over_b):.3f}x)")


if __name__ == "__main__":
    main()
