#!/usr/bin/env bash
# Private one-node Slurm cluster (munged + slurmctld + slurmd) for tests that
# submit real sbatch jobs.  Everything lives in DIR; nothing touches /etc, /var
# or /run, so several clusters can coexist and no root-owned system state leaks.
#
#   eval "$(tests/slurm_cluster.sh start DIR)"   # prints: export SLURM_CONF=...
#   tests/slurm_cluster.sh stop DIR               # idempotent
#
# Exit 77 (CTest skip) when slurm-wlm / munge are not installed or not root.
set -euo pipefail

die() { echo "slurm_cluster: $*" >&2; exit 1; }
[[ $# -eq 2 && ( $1 == start || $1 == stop ) ]] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
action=$1
[[ $action == stop && ! -d $2 ]] && exit 0   # nothing was ever started there
mkdir -p "$2"
DIR=$(cd "$2" && pwd)   # absolute: the paths end up in slurm.conf and pid files
DAEMONS=(slurmd slurmctld munged)

# A daemon orphaned by our exit may linger as a zombie until PID 1 reaps it
# (some container inits are slow at that); count zombies as exited.
running() { local s; s=$(sed 's/.*) \(.\).*/\1/' "/proc/$1/stat" 2>/dev/null) && [[ $s != Z ]]; }

# Our own pid files (from $!), separate from the ones the daemons write, so that
# stop works even when a daemon died before writing (or already removed) its own.
stop_all() {
    local name pid i pids=()
    for name in "${DAEMONS[@]}"; do
        [[ -s $DIR/$name.bgpid ]] || continue
        pid=$(<"$DIR/$name.bgpid")
        # Guard against pid reuse: only signal the process if it is still ours.
        if grep -qa "$name" "/proc/$pid/cmdline" 2>/dev/null; then
            kill "$pid" 2>/dev/null && pids+=("$pid")
        fi
    done
    # TERM all at once (shutdown order does not matter here), wait up to 10 s.
    for _ in $(seq 100); do
        [[ ${#pids[@]} -eq 0 ]] && break
        for i in "${!pids[@]}"; do running "${pids[i]}" || unset 'pids[i]'; done
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    for name in "${DAEMONS[@]}"; do rm -f "$DIR/$name.bgpid"; done
}

if [[ $action == stop ]]; then stop_all; exit 0; fi

for bin in munged mungekey slurmctld slurmd sbatch sinfo scontrol; do
    command -v "$bin" >/dev/null || {
        echo "slurm_cluster: slurm-wlm and munge are not installed" >&2; exit 77; }
done
[[ $(id -u) -eq 0 ]] || { echo "slurm_cluster: must run as root" >&2; exit 77; }
for name in "${DAEMONS[@]}"; do
    [[ -s $DIR/$name.bgpid ]] && running "$(<"$DIR/$name.bgpid")" &&
        die "$name already running for $DIR (run stop first)"
done

# On any failure below, tear down whatever was started (the trap also covers
# set -e exits) and report one line with the tail of the daemon log involved.
trap '[[ $? -eq 0 ]] || stop_all' EXIT
fail() {
    local msg=$1 log=${2:-}
    [[ -n $log && -s $log ]] && msg+="; tail of $log: $(tail -n 5 "$log" | tr '\n' '|')"
    die "$msg"
}
launch() {   # launch NAME OUTFILE CMD... : run a foreground daemon in the background
    local name=$1 out=$2; shift 2
    : >"$out"   # then append: munged may also open its --log-file, in append mode
    "$@" >>"$out" 2>&1 </dev/null &
    echo $! >"$DIR/$name.bgpid"
}
alive() { running "$(<"$DIR/$1.bgpid")"; }

# munged wants the socket dir traversable by all but writable only by its owner.
chmod 0711 "$DIR"
mkdir -p "$DIR/state" "$DIR/spool"
rm -f "$DIR/munge.socket" "$DIR/munge.socket.lock"
[[ -s $DIR/munge.key ]] || mungekey --create --keyfile="$DIR/munge.key" >/dev/null
chmod 0400 "$DIR/munge.key"
# --force: downgrade munged's permission checks on DIR's parents to warnings
# (e.g. DIR inside a group-writable build tree); the key stays 0400 anyway.
# --origin: skip resolving the hostname (it need not be in DNS or /etc/hosts).
# In foreground mode munged logs to stderr, i.e. to the same munged.log.
launch munged "$DIR/munged.log" munged --foreground --force --origin=127.0.0.1 \
    --socket="$DIR/munge.socket" --key-file="$DIR/munge.key" --pid-file="$DIR/munged.pid" \
    --log-file="$DIR/munged.log" --seed-file="$DIR/munged.seed"
for _ in $(seq 50); do [[ -S $DIR/munge.socket ]] && break; alive munged || break; sleep 0.1; done
munge -S "$DIR/munge.socket" -n 2>/dev/null | unmunge -S "$DIR/munge.socket" >/dev/null 2>&1 ||
    fail "munged did not start" "$DIR/munged.log"

# Ports derived from our PID, then bumped until nothing answers on them, so
# parallel test runs don't collide with each other or with a system slurm.
port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=$((20000 + ($$ % 20000) * 2))
until port_free "$port" && port_free $((port + 1)); do port=$((port + 2)); done

host=$(hostname -s)
cpus=$(nproc)
mem=$(free -m | awk '/^Mem:/ { print int($2 * 0.9) }')  # slurmd drains the node if config > actual
# Empty plugstack: keep /etc/slurm/plugstack.conf.d (SPANK plugins) out of it.
: >"$DIR/plugstack.conf"
# cgroup.conf is read from slurm.conf's directory.  slurmd 22.05 always loads a
# cgroup plugin; the default (autodetect) picks cgroup/v2 on v2 hosts, which
# wants systemd/dbus and fails in containers.  cgroup/v1's init() touches no
# cgroupfs and nothing we configure uses cgroups, so it is a no-op stand-in;
# the mountpoint is a path that does not exist so nothing can be mounted.
printf 'CgroupPlugin=cgroup/v1\nCgroupMountpoint=%s\n' "$DIR/no-cgroup" >"$DIR/cgroup.conf"
# NodeAddr/SlurmctldHost addr pinned to 127.0.0.1 so only the short hostname has
# to match (slurmd -N), not DNS resolution of it.
cat >"$DIR/slurm.conf" <<EOF
ClusterName=testcluster
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge.socket
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
PlugStackConfig=$DIR/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
# sbatch --wait polls every 2 s instead of 32 once a job ends (finished jobs are forgotten
# after 5 s: nothing here asks about them later)
MinJobAge=5
SlurmctldDebug=info
SlurmdDebug=info
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$DIR/slurm.conf

# -c: drop job state left in DIR by an earlier run, so start is reproducible.
launch slurmctld "$DIR/slurmctld.log" slurmctld -D -c -f "$SLURM_CONF"
launch slurmd "$DIR/slurmd.log" slurmd -D -N "$host" -f "$SLURM_CONF"

state=""
for _ in $(seq 60); do
    for name in slurmctld slurmd; do
        alive "$name" || fail "$name exited during startup" "$DIR/$name.log"
    done
    state=$(sinfo -h -n "$host" -o %T 2>/dev/null) || true
    [[ $state == idle ]] && break
    sleep 0.5
done
[[ $state == idle ]] ||
    fail "node $host not idle after 30 s (state: ${state:-no answer from slurmctld})" \
        "$DIR/slurmd.log"
echo "export SLURM_CONF=$SLURM_CONF"
