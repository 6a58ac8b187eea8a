#!/usr/bin/env bash
# Submits the whole recipe: compile on CPU nodes, tune on N GPUs, merge.  Each stage starts
# when the one before has succeeded (afterok).  Usage:
#   MMTUNE_OUT=/shared/mmtune examples/slurm/submit.sh [N_GPU_TASKS] [N_CPU_TASKS]
# Extra sbatch options (partition, account) go in SBATCH_COMPILE, SBATCH_TUNE, SBATCH_MERGE.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
: "${MMTUNE_OUT:?set MMTUNE_OUT to a folder every node sees}"
gpus=${1:-4}
cpus=${2:-4}
compile=$(sbatch --parsable --array=0-$((cpus - 1)) ${SBATCH_COMPILE:-} \
  --export=ALL "$here/compile-array.sbatch")
tune=$(sbatch --parsable --array=0-$((gpus - 1)) --dependency=afterok:"$compile" \
  ${SBATCH_TUNE:-} --export=ALL "$here/tune-array.sbatch")
merge=$(sbatch --parsable --dependency=afterok:"$tune" ${SBATCH_MERGE:-} --export=ALL \
  "$here/merge.sbatch")
echo "compile array $compile, tune array $tune, merge $merge; result: $MMTUNE_OUT/mmtune.db"
