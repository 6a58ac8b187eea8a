#!/usr/bin/env bash
# Runs on a GPU machine over a build made on a development machine (same CUDA) and carried
# as ./build.  Test binaries have the dev machine's source path baked in, so that path is
# linked to this checkout.  Usage: scripts/gpu-check.sh [tests|tune|main|unseen|suite|decode|fewtile|node|versus|bench|
# kernels|memcheck|compare|matmul|online|ab|coldstart|tuned-linear|tuned-attention ...]; logs to $OUT.
# build/extra-lib must hold libcmocka.so.0 (tests) and liblua5.4.so.0, libsqlite3.so.0 (what
# links libmmtune.so), copied from the dev machine: the GPU machine has none of them.
set -uo pipefail
here=$(pwd)
src=/work/main
if [ "$here" != "$src" ]; then mkdir -p /work && rm -rf "$src" && ln -s "$here" "$src"; fi
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/cuda/lib64:$here/build/extra-lib:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
export XDG_CACHE_HOME=/tmp/mmtune-cache
out=${OUT:-/tmp/out}
mkdir -p "$out"
# A database carried in .gpu/ (from an earlier tune step's $OUT) is the one every step uses.
[ -f .gpu/mmtune.db ] && [ ! -f /tmp/mmtune.db ] && cp .gpu/mmtune.db /tmp/mmtune.db
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
for step in "$@"; do
  case "$step" in
    tests)
      # Every program's whole output in $OUT/tests-full.log (one file: a remote run
      # brings back few), the summary lines in tests.log.  The GPU suite (CTest label gpu) unless
      # TESTS="a b" picks programs (TESTS=all: every one); JOBS (default 4) run at once --
      # most of their time is NVRTC on the CPU, not the GPU.
      rm -rf /tmp/tlogs && mkdir -p /tmp/tlogs
      start=$SECONDS
      gpu_suite=$(sed -nE 's/^set_tests_properties\(\[=\[(test_[a-z0-9_]+)\]=\].* LABELS "[^"]*gpu.*/\1/p' \
        build/tests/CTestTestfile.cmake)
      [ "${TESTS:-}" = all ] && TESTS=$(cd build/tests && ls test_*)
      for t in ${TESTS:-$gpu_suite}; do
        [ -x "build/tests/$t" ] && echo "$t"
      done | xargs -P "${JOBS:-4}" -I{} bash -c \
        's=$SECONDS; build/tests/{} > /tmp/tlogs/{}.log 2>&1; echo "== {} exit $? ($((SECONDS - s)) s)" > /tmp/tlogs/{}.rc'
      for f in /tmp/tlogs/*.rc; do
        t=$(basename "$f" .rc)
        { echo "== $t"; cat "/tmp/tlogs/$t.log"; } >> "$out/tests-full.log"
        cat "$f"
        grep -E "^\[  (PASSED|FAILED|SKIPPED) |^\[  ERROR|^\[   LINE" "/tmp/tlogs/$t.log"
      done 2>&1 | tee "$out/tests.log"
      echo "tests wall $((SECONDS - start)) s" | tee -a "$out/tests.log" ;;
    tune)
      # The database comes and goes with $OUT/mmtune.db (carry it back in .gpu/ to resume).
      /usr/bin/time -f "tune wall %e s" timeout -s INT "${TUNE_LIMIT:-400}" \
        ./build/tuner/mmtune --device 0 --db /tmp/mmtune.db > "$out/tune.log" 2>&1
      echo "tune exit $?"; tail -n 20 "$out/tune.log"; cp /tmp/mmtune.db "$out/mmtune.db" ;;
    bench*)
      shape=${step#bench}; shape=${shape:-4096x4096x4096}
      ./build/tuner/mmtune bench ${shape//x/ } --device 0 --db /tmp/mmtune.db 2>&1 | tee -a "$out/bench.log" ;;
    shapes)
      # The dispatcher's choice vs cuBLAS on the public benchmark suite, side by side.
      ./build/tuner/mmtune bench --shapes tests/data/shapes.txt --device 0 --db /tmp/mmtune.db \
        --csv "$out/shapes.csv" 2>&1 | tee "$out/shapes.log" ;;
    again)
      # One shape with the default strategy and budget on a fresh database (the issue's "<= 60 s
      # a shape"), then the same command again: the budget is spent, so it measures and
      # compiles nothing.
      rm -f /tmp/again.db*
      for run in first second; do
        /usr/bin/time -f "$run run wall %e s" ./build/tuner/mmtune --device 0 --seed 7 --dtype f32 \
          --shapes 4096x4096x4096 --db /tmp/again.db 2>&1 |
          grep -E "kernels compiled|wall|candidates in" | sed "s/^/$run: /"
      done 2>&1 | tee "$out/again.log" ;;
    explain)
      # What the dispatcher would run, asked of the device (not just the database's name).
      for d in f32 f16; do
        ./build/tuner/mmtune explain 4096 4096 4096 --dtype $d --device 0 --db /tmp/mmtune.db
      done 2>&1 | tee "$out/explain.log" ;;
    dispatch)
      # Warm dispatch overhead vs a bare cuLaunchKernel, and cold start in fresh processes, on
      # DB (default /tmp/mmtune.db, the tune or main step's; a missing file: the defaults):
      # SHAPES (default 1024^3, a shape the main job tunes, and 777x1333x555, one it never
      # does, which its database has served a split-K kernel: exclusive, ordered by an event).
      for sh in ${SHAPES:-1024x1024x1024 777x1333x555}; do
        ./build/bench/mmtune-dispatch-bench --device 0 --db "${DB:-/tmp/mmtune.db}" --runs 5 ${sh//x/ }
      done 2>&1 | tee "$out/dispatch.log" ;;
    calls)
      # Per-call time of the dispatcher and cuBLAS (host enqueue, back to back, events between,
      # CUDA graph replay): SHAPES (default 1000^3), DTYPE (f16), LAYOUT (nn), DB.
      for sh in $(echo "${SHAPES:-1000x1000x1000}" | tr , ' '); do
        ./build/bench/mmtune-calls-bench --device 0 --db "${DB:-/tmp/mmtune.db}" \
          --dtype "${DTYPE:-f16}" --layout "${LAYOUT:-nn}" ${sh//x/ } 2>&1
      done | tee -a "$out/calls.log" ;;
    tuned-linear)
      # The Linear-type ops tuned for exactly themselves (the weights of bench/llm_layers.txt's
      # block WEIGHTS, default 8B, but gate_up, at M BATCHES, default "1 16 128 2048 8192";
      # model strategy, BUDGET seconds a problem, database $OUT/linear.db), then their bench on
      # that database and on none (untuned), each against its cuBLASLt peer in its own run.
      # EPILOGUES (default bias + tanh GELU; e.g. "out=f16,residual out=f32" for the residual
      # and f32out families) are tuned in turn, FAMILIES (default linear) benched.  A
      # .gpu/linear.db carried in is where tuning resumes (its rows kept); TUNE_LIMIT bounds
      # each epilogue's tune (s).
      batches=${BATCHES:-1 16 128 2048 8192}
      awk -v b="^# ${WEIGHTS:-8B}" '$0 ~ b {on=1; next} /^#/{on=0} on && NF && $3 != "gate_up_proj"' \
        bench/llm_layers.txt > /tmp/linear-weights.txt
      # the largest M first: a TUNE_LIMIT cut leaves the decode shapes, where the ops lose least
      for m in $batches; do awk -v m=$m '{print m, $1, $2}' /tmp/linear-weights.txt; done |
        sort -u | sort -s -k1,1nr > /tmp/linear-shapes.txt
      rm -f /tmp/linear.db*
      [ -f .gpu/linear.db ] && cp .gpu/linear.db /tmp/linear.db
      for epi in ${EPILOGUES:-bias=col,act=gelu_tanh}; do
        /usr/bin/time -f "tune $epi wall %e s" timeout -s INT "${TUNE_LIMIT:-3600}" \
          ./build/tuner/mmtune tune --device 0 --db /tmp/linear.db \
          --dtype "${DTYPE:-f16}" --layout nt --epilogue "$epi" \
          --shapes /tmp/linear-shapes.txt --budget "${BUDGET:-4}" >> "$out/tuned-linear.log" 2>&1
        tail -n 2 "$out/tuned-linear.log"
      done
      cp /tmp/linear.db "$out/linear.db"
      for db in /tmp/linear.db /tmp/none.db; do
        ./build/bench/mmtune-matmul-bench --device 0 --db "$db" --dtype "${DTYPE:-f16}" \
          --family "${FAMILIES:-linear}" --weights /tmp/linear-weights.txt --batches "${batches// /,}" \
          --cold 2>&1 | tee -a "$out/tuned-linear.log"
      done ;;
    tuned-attention)
      # Attention's strided-batch GEMMs tuned for exactly themselves: the bench's 42 calls
      # (x32, x128, x512; seq 128-4096; head dim 64, 128; Q K^T nt as "S S D batch=H", P V nn
      # as "S D S batch=H"; those whose operands pass 6 GiB left out, as the bench does),
      # BUDGET (default 2) seconds a problem into $OUT/attention.db, then the family on that
      # database and on none (untuned).
      rm -f /tmp/attention.db* /tmp/qk.txt /tmp/pv.txt
      for h in 32 128 512; do for s in 128 512 1024 4096; do for d in 64 128; do
        [ $((4 * h * s * d + 4 * h * s * s)) -le $((6 << 30)) ] && echo "$s $s $d batch=$h" >> /tmp/qk.txt
        [ $((2 * h * s * s + 6 * h * s * d)) -le $((6 << 30)) ] && echo "$s $d $s batch=$h" >> /tmp/pv.txt
      done; done; done
      for l in nt nn; do
        shapes=/tmp/qk.txt; [ "$l" = nn ] && shapes=/tmp/pv.txt
        /usr/bin/time -f "tune $l wall %e s" ./build/tuner/mmtune tune --device 0 \
          --db /tmp/attention.db --dtype "${DTYPE:-f16}" --layout "$l" --epilogue "out=${DTYPE:-f16}" \
          --shapes "$shapes" --budget "${BUDGET:-2}" >> "$out/tuned-attention.log" 2>&1
        tail -n 2 "$out/tuned-attention.log"
      done
      cp /tmp/attention.db "$out/attention.db"
      for db in /tmp/attention.db /tmp/none.db; do
        ./build/bench/mmtune-matmul-bench --device 0 --db "$db" --dtype "${DTYPE:-f16}" \
          --family attention --cold --runs 10 2>&1 | tee -a "$out/tuned-attention.log"
      done ;;
    coldstart)
      # A model's start-up: the first calls of the Linear family's 80 layers on an empty cubin
      # cache, one by one and after mmt_matmul_prepare (bench/matmul_coldstart.c); NVRTC's and
      # the driver's own cache off, or every pass after the first compiles nothing.
      CUDA_CACHE_DISABLE=1 ./build/bench/mmtune-matmul-bench --device 0 --db "${DB:-/tmp/mmtune.db}" \
        --dtype "${DTYPE:-f16}" --family coldstart 2>&1 | tee -a "$out/coldstart.log" ;;
    matmul)
      # mmt_matmul against its peers (bench/matmul.c): cuBLASLt's epilogues (linear: bias +
      # GELU; residual: D apart from C; f32out), cuBLAS + an elementwise SwiGLU (swiglu),
      # cublasGemmStridedBatchedEx (attention), host time a call (host); DTYPE (f16), DB,
      # MATMUL_ARGS (e.g. --family linear --batches 16,2048 --cold).  CSV in $OUT/matmul.csv.
      ./build/bench/mmtune-matmul-bench --device 0 --db "${DB:-/tmp/mmtune.db}" \
        --dtype "${DTYPE:-f16}" --csv "$out/matmul-${DTYPE:-f16}.csv" ${MATMUL_ARGS:-} 2>&1 |
        tee -a "$out/matmul.log" ;;
    online)
      # Never-tuned Linear layers in a loop while online tuning tunes them beside it
      # (bench/matmul_online.c): the loop's speed meanwhile, when each is served EXACT.
      # ONLINE_ARGS (e.g. --online-shapes 50 --online-budget 2 --online-limit 300).
      MMTUNE_TUNER=$here/build/tuner/mmtune ./build/bench/mmtune-matmul-bench --device 0 \
        --dtype "${DTYPE:-f16}" --family online ${ONLINE_ARGS:-} 2>&1 | tee -a "$out/online.log" ;;
    ab)
      # Two builds of mmtune-matmul-bench alternated PASSES times (default 4) in one run, so
      # that a change's speed-up is not a run's spread: A_BENCH (default this build's) and
      # B_BENCH (another build's, carried in .gpu/), each with MATMUL_ARGS on DB (default
      # /tmp/none.db: the untuned picks).  Every pass's CSV rows, tagged a1, b1, a2, ..., in
      # $OUT/ab.csv; bench/ab_compare.py's medians and ratios in $OUT/ab.log.
      if [ -z "${B_BENCH:-}" ]; then echo "ab: B_BENCH (the second build's bench) is not set"; continue; fi
      rm -f "$out/ab.csv"
      for pass in $(seq "${PASSES:-4}"); do for v in a b; do
        bin=${A_BENCH:-build/bench/mmtune-matmul-bench}; [ "$v" = b ] && bin=$B_BENCH
        rm -f /tmp/ab-pass.csv
        "$bin" --device 0 --db "${DB:-/tmp/none.db}" ${MATMUL_ARGS:-} --csv /tmp/ab-pass.csv \
          > /tmp/ab-pass.log 2>&1 || { echo "ab: $v$pass failed:"; tail -n 3 /tmp/ab-pass.log; }
        [ -f /tmp/ab-pass.csv ] && sed "s/^/$v$pass,/" /tmp/ab-pass.csv >> "$out/ab.csv"
      done; done
      python3 bench/ab_compare.py "$out/ab.csv" 2>&1 | tee "$out/ab.log" ;;
    layouts)
      # The dispatcher's choice vs cuBLAS at 4096^3 in every layout (tune first).
      for l in nn nt tn tt; do
        ./build/tuner/mmtune bench 4096 4096 4096 --layout "$l" --device 0 --db /tmp/mmtune.db \
          2>&1 | tee -a "$out/layouts.log" | grep -E "^tuned|^cuBLAS|x on"
      done ;;
    f16|bf16|tf32)
      # The tensor-core families on the issue's shapes: tune (BUDGET s a shape, default 35),
      # then vs cuBLAS.  SHAPES, TEMPLATES, LAYOUT and DB override (tf32: layout nt).
      s=${SHAPES:-8192x8192x8192,4097x4097x4097,1000x1000x1000}
      l=${LAYOUT:-nn}; [ "$step" = tf32 ] && l=${LAYOUT:-nt}
      ./build/tuner/mmtune --device 0 --dtype "$step" --layout "$l" \
        --templates "${TEMPLATES:-wgmma,mma_sync}" --shapes "$s" --budget "${BUDGET:-35}" \
        --db "${DB:-/tmp/mmtune.db}" > "$out/$step-tune.log" 2>&1
      echo "$step tune exit $?"; grep -E "candidates in" "$out/$step-tune.log"
      grep -E "verify_failed|fault|launch_error|timeout:" "$out/$step-tune.log" | head -5
      ./build/tuner/mmtune bench --shapes "$s" --dtype "$step" --layout "$l" --device 0 \
        --db "${DB:-/tmp/mmtune.db}" 2>&1 | tee "$out/$step-bench.log" ;;
    suite-f16|suite-bf16|suite-tf32)
      # One dtype over the public suite: tune every shape (BUDGET s each, default 12), then
      # the dispatcher's choice vs cuBLAS side by side, with the geomean.  tf32 runs in layout
      # nt (its tensor-core kernels read K-major operands only); LAYOUT overrides.
      d=${step#suite-}; l=${LAYOUT:-nn}; [ "$d" = tf32 ] && l=${LAYOUT:-nt}
      ./build/tuner/mmtune --device 0 --dtype "$d" --layout "$l" --shapes tests/data/shapes.txt \
        --budget "${BUDGET:-12}" --db /tmp/mmtune.db > "$out/suite-$d-tune.log" 2>&1
      echo "suite $d $l tune exit $?"; tail -n 3 "$out/suite-$d-tune.log"
      ./build/tuner/mmtune bench --shapes tests/data/shapes.txt --dtype "$d" --layout "$l" \
        --device 0 --db /tmp/mmtune.db 2>&1 | tee "$out/suite-$d.log" ;;
    kernels)
      # Kernel durations by Nsight Compute (no launch gaps; caches flushed per kernel) of the
      # dispatcher's choice and cuBLAS's kernel, median per kernel over bench's launches:
      # SHAPES (default 1000^3), DTYPE (f16), DB (the tune step's).
      timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum \
        -k regex:'mmt_|nvjet|gemm|xmma|cutlass' ./build/tuner/mmtune bench \
        --shapes "${SHAPES:-1000x1000x1000}" --dtype "${DTYPE:-f16}" --device 0 \
        --db "${DB:-/tmp/mmtune.db}" > "$out/kernels-raw.txt" 2>&1
      echo "ncu exit $?"
      grep -E "^  [a-zA-Z_].*\(|gpu__time_duration" "$out/kernels-raw.txt" | paste - - |
        awk '{print $1, $NF}' | grep -vE "mmt_(ref_gemm|fill|widen|check)" | python3 -c '
import sys, statistics, itertools
rows = [l.split() for l in sys.stdin if l.strip()]
for name, g in itertools.groupby(rows, key=lambda r: r[0]):
    v = [float(r[1]) for r in g]
    print(f"{len(v):4d} launches  median {statistics.median(v):9.2f} us  {name}")
' | tee "$out/kernels.log" ;;
    memcheck)
      # The out-of-bounds sweep (build/tests/mmtune-sweep, tests/sweep.c: every template
      # family, dtype and layout, default, random and every vec/split/repack/persist value, on
      # ragged problems with padded pitches and misaligned bases, each operand in its own
      # exact-size allocation) under compute-sanitizer: memcheck over every case, then
      # racecheck and synccheck over every SAMPLE-th case (default 8).  Each tool's whole log
      # is $OUT/<tool>.log; printed here: the exit codes (9: the sanitizer found errors; 1: a
      # case failed), the sanitizer's summary and the sweep's last lines.  TOOLS picks tools
      # (TOOLS=memcheck); SWEEP_ARGS replaces the sweep's options (default --configs 12
      # --problems 4: 12 random configs and 4 problems each, 4x the program's default; add
      # --templates, --seed); SWEEP_LIMIT bounds each tool (s, default 540).  Cubins come from
      # .gpu/cubin when carried (fill it on the dev machine: build/tests/mmtune-sweep
      # --compile-only --arch sm_90 --cache .gpu/cubin); what is missing is compiled first,
      # outside the sanitizer.  On an H100 the program's default sweep (442 cases) took 3 s under
      # memcheck, racecheck 6 s, synccheck 1 s; --configs 12 --problems 4 (1928 cases) memcheck
      # 10 s.
      cache=/tmp/mmtune-cache/mmtune/cubin
      [ -d .gpu/cubin ] && cache=$here/.gpu/cubin
      cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -n 1 | tr -d .)
      build/tests/mmtune-sweep --compile-only --arch "sm_$cc" --cache "$cache" ${SWEEP_ARGS:---configs 12 --problems 4} |
        tail -n 1
      for tool in ${TOOLS:-memcheck racecheck synccheck}; do
        sample=""; [ "$tool" != memcheck ] && sample="--sample ${SAMPLE:-8}"
        start=$SECONDS
        timeout "${SWEEP_LIMIT:-540}" compute-sanitizer --tool "$tool" --error-exitcode 9 \
          build/tests/mmtune-sweep --verbose --cache "$cache" $sample ${SWEEP_ARGS:---configs 12 --problems 4} \
          > "$out/$tool.log" 2>&1
        echo "$tool exit $? after $((SECONDS - start)) s"
        grep -E "^========= .*SUMMARY" "$out/$tool.log"
        grep -E "^========= (Invalid|Race|Barrier|Error)" "$out/$tool.log" | sort | uniq -c |
          head -n 5
        grep -vE "^=========|^run " "$out/$tool.log" | tail -n 9
      done 2>&1 | tee "$out/sanitize.log"
      # mmt_matmul's op kernels (every epilogue, output type, batch form, order and
      # transpose, misaligned pointers; the kernels the dispatcher picks) under memcheck:
      # MATMUL_CASES random descriptors of tests/test_matmul_gpu.c (default 60) and
      # GROUPED_CASES grouped ones (default 40).
      start=$SECONDS
      MMT_MATMUL_CASES=${MATMUL_CASES:-60} MMT_GROUPED_CASES=${GROUPED_CASES:-40} timeout "${SWEEP_LIMIT:-540}" compute-sanitizer \
        --tool memcheck --error-exitcode 9 build/tests/test_matmul_gpu > "$out/matmul-memcheck.log" 2>&1
      echo "matmul memcheck exit $? after $((SECONDS - start)) s" | tee -a "$out/sanitize.log"
      grep -E "^========= .*SUMMARY|PASSED|FAILED" "$out/matmul-memcheck.log" | tee -a "$out/sanitize.log" ;;
    compare)
      # One template's configs timed before and after a change, alternated (mmtune measure):
      # OLD, a folder holding the template file as it was (git show REV:templates/T.lua >
      # .gpu/old/T.lua on the dev machine, carried); TEMPLATE (mma_sync); CONFIGS, param
      # lists separated by ';' (the template's default); SHAPES; DTYPE (f16); REPS (2).
      for cfg in $(echo "${CONFIGS:-default}" | tr ';' ' '); do
        params=${cfg#default}
        for sh in $(echo "${SHAPES:-4097x4097x4097,1000x999x1001}" | tr , ' '); do
          for rep in $(seq "${REPS:-2}"); do
            for v in before after; do
              tp=""; [ $v = before ] && tp=$(cd "${OLD:-.gpu/old}" && pwd)
              MMTUNE_TEMPLATE_PATH=$tp ./build/tuner/mmtune measure "${TEMPLATE:-mma_sync}" \
                ${params//,/ } --shape "$sh" --dtype "${DTYPE:-f16}" --device 0 > /tmp/m.txt 2>&1
              echo "$v $rep $sh $cfg $(grep -E '^(status|time)' /tmp/m.txt | tr -s ' ' |
                tr '\n' ' ')"
            done
          done
        done
      done 2>&1 | tee "$out/compare.log" ;;
    main)
      # The main job as a user runs it (model strategy, default budget) on a fresh database
      # (DB, default /tmp/mmtune.db), timed; the database comes back as $OUT/mmtune.db.
      db=${DB:-/tmp/mmtune.db}
      /usr/bin/time -f "main job wall %e s" ./build/tuner/mmtune --device 0 --db "$db" \
        > "$out/main.log" 2>&1
      echo "main exit $?"; grep -E "wall|candidates in" "$out/main.log" | tail -n 40
      tail -n 3 "$out/main.log"; cp "$db" "$out/mmtune.db" ;;
    unseen)
      # bench/unseen_shapes.txt (shapes the main job never tunes) vs cuBLAS for DTYPES (f32
      # f16 bf16) in LAYOUTS (nt nn), on DB (default /tmp/mmtune.db; a missing file: the
      # defaults): the geomean and the lowest ratio per run; CSVs in $OUT.
      for d in ${DTYPES:-f32 f16 bf16}; do for l in ${LAYOUTS:-nt nn}; do
        ./build/tuner/mmtune bench --shapes bench/unseen_shapes.txt --dtype "$d" --layout "$l" \
          --device 0 --db "${DB:-/tmp/mmtune.db}" --csv "$out/unseen-${TAG:-}$d-$l.csv" \
          > /tmp/u.log 2>&1
        echo "$d $l exit $?: $(grep -E '^geometric' /tmp/u.log)"
        cat /tmp/u.log >> "$out/unseen-${TAG:-}bench.log"
      done; done ;;
    decode)
      # Skinny problems (issue 14): tune DECODE_TEMPLATES (skinny, skinny_mma, mma_sync, wgmma;
      # model strategy, BUDGET s, default 5; 0: no tuning, DB as it is)
      # on a few decode shapes per dtype (TUNE_SHAPES), then bench/decode_shapes.txt (layout
      # nt) for DTYPES (f16 bf16) and f32 GEMV (1xNxK and Mx1xK, every layout) vs cuBLAS, on DB.
      db=${DB:-/tmp/mmtune.db}
      for d in ${DTYPES:-f16 bf16}; do
        if [ "${BUDGET:-5}" != 0 ]; then
          ./build/tuner/mmtune --device 0 --dtype "$d" --layout nt \
            --templates "${DECODE_TEMPLATES:-skinny,skinny_mma,mma_sync,wgmma}" \
            --shapes "${TUNE_SHAPES:-1x4096x4096,8x11008x4096,16x4096x4096,32x4096x11008}" \
            --budget "${BUDGET:-5}" --db "$db" > "$out/decode-$d-tune.log" 2>&1
          echo "$d decode tune exit $?: $(grep -cE '^\[[0-9]+/[0-9]+\] ' "$out/decode-$d-tune.log") problems tuned"
        fi
        ./build/tuner/mmtune bench --shapes bench/decode_shapes.txt --dtype "$d" --layout nt \
          --cold --device 0 --db "$db" --csv "$out/decode-$d.csv" > /tmp/u.log 2>&1
        echo "$d decode exit $?: $(grep -E '^geometric' /tmp/u.log)"
        cat /tmp/u.log >> "$out/decode-bench.log"
      done
      for l in nn nt tn tt; do
        ./build/tuner/mmtune bench --shapes 1x4096x4096,4096x1x4096,1x11008x4096,11008x1x4096 \
          --cold --dtype f32 --layout "$l" --device 0 --db "$db" > /tmp/u.log 2>&1
        echo "f32 gemv $l exit $?: $(grep -E '^geometric' /tmp/u.log)"
        cat /tmp/u.log >> "$out/decode-bench.log"
      done ;;
    splitk)
      # Split-K through the workspace against the serial split-K before it (issue 14): each
      # config of bench/splitk_configs.txt measured with the templates of this tree and with
      # those in $OLD_TEMPLATES (default .gpu/old-templates: the tree before the change).
      # CONFIGS picks another list (bench/wgmma_splitk_configs.txt: wgmma's split-K against
      # its serial split-K).
      old=${OLD_TEMPLATES:-$here/.gpu/old-templates}
      grep -v '^#' "${CONFIGS:-bench/splitk_configs.txt}" | while read -r tmpl dtype layout shape params; do
        [ -n "$tmpl" ] || continue
        for which in new old; do
          tp=; [ "$which" = old ] && tp=$old
          MMTUNE_TEMPLATE_PATH=$tp ./build/tuner/mmtune measure "$tmpl" ${params//,/ } \
            --shape "$shape" --dtype "$dtype" --layout "$layout" --device 0 > /tmp/m.log 2>&1
          echo "== $which $tmpl $dtype $layout $shape $params exit $?"
          cat /tmp/m.log
        done
      done 2>&1 | tee "$out/splitk.log" ;;
    suite)
      # The public suite (tests/data/shapes.txt) vs cuBLAS, --cold, for DTYPES (f32 tf32 f16
      # bf16) in layout nn on DB (default /tmp/mmtune.db): issue 14's suite geomeans.
      for d in ${DTYPES:-f32 tf32 f16 bf16}; do
        ./build/tuner/mmtune bench --shapes tests/data/shapes.txt --dtype "$d" --cold --device 0 \
          --db "${DB:-/tmp/mmtune.db}" --csv "$out/suite-${TAG:-}$d.csv" > /tmp/u.log 2>&1
        echo "$d exit $?: $(grep -E '^geometric' /tmp/u.log)"
        cat /tmp/u.log >> "$out/suite-${TAG:-}bench.log"
      done ;;
    fewtile)
      # Few-tile and short-K shapes (issue 14): SHAPES tuned in each of LAYOUTS and DTYPES for
      # BUDGET s (default 6) a shape on a fresh database, then bench --cold against cuBLAS; the
      # bests' configs follow in the log.
      db=/tmp/fewtile.db
      rm -f "$db"*
      shapes=${SHAPES:-128x11008x4096,512x512x16384,100x100x10000,1024x1408x8192,8192x8192x128,4096x4096x64}
      for d in ${DTYPES:-f16}; do
        for l in ${LAYOUTS:-nn nt}; do
          ./build/tuner/mmtune --device 0 --dtype "$d" --layout "$l" --shapes "$shapes" \
            --budget "${BUDGET:-6}" --db "$db" > "$out/fewtile-$d-$l-tune.log" 2>&1
          echo "fewtile $d $l tune exit $?"
          ./build/tuner/mmtune bench --shapes "$shapes" --dtype "$d" --layout "$l" --cold \
            --device 0 --db "$db" 2>&1
        done
      done 2>&1 | tee "$out/fewtile.log"
      ./build/tuner/mmtune show --db "$db" >> "$out/fewtile.log" 2>&1 ;;
    multi)
      # --device all (issue 15) on whatever GPUs the machine has: a run to the end, then one
      # whose worker is killed mid-run (SIGKILL): the parent reports it, merges what was
      # measured, exits 1; the same command again completes the plan.
      rm -f /tmp/multi.db*
      args=(--device all --shapes 512x512x512,1024x1024x1024,777x333x999 --dtype f32
            --budget 2 --db /tmp/multi.db)
      /usr/bin/time -f "multi wall %e s" ./build/tuner/mmtune "${args[@]}" > "$out/multi.log" 2>&1
      echo "multi exit $?: $(grep -cE '^\[gpu' "$out/multi.log") worker lines, $(ls /tmp/multi.db.gpu* 2>/dev/null | wc -l) part files left"
      grep -E "GPU|merged|wall" "$out/multi.log" | tail -5
      ./build/tuner/mmtune db check /tmp/multi.db
      # The kill run starts from an empty database with a longer budget, so that the worker is
      # killed with shapes still to do (the first run above took about 7 s in all).
      rm -f /tmp/multi.db*
      args=(--device all --dtype f32 --budget 4 --db /tmp/multi.db)
      ./build/tuner/mmtune "${args[@]}" --shapes 512x512x512,1024x1024x1024,777x333x999,2048x2048x2048 \
        > "$out/multi-kill.log" 2>&1 &
      parent=$!
      # Killed once the worker has finished a problem (its progress line says so), so that
      # there are measurements to keep and problems left.
      for _ in $(seq 600); do grep -q '^\[gpu 0\] \[1/4 problems' "$out/multi-kill.log" && break; sleep 0.1; done
      pkill -KILL -f -- "--shard 0/1 --db /tmp/multi.db.gpu0.db"; wait $parent
      echo "killed run exit $? ($(grep -c 'worker failed' "$out/multi-kill.log") failure reported)"
      grep -E "failed|merged|unfinished" "$out/multi-kill.log" | tail -4
      n1=$(./build/tuner/mmtune db check /tmp/multi.db)
      ./build/tuner/mmtune "${args[@]}" --shapes 512x512x512,1024x1024x1024,777x333x999,2048x2048x2048 \
        > "$out/multi-rerun.log" 2>&1
      echo "rerun exit $?; rows after the kill $n1, after the rerun: $(./build/tuner/mmtune db check /tmp/multi.db)"
      ./build/tuner/mmtune show --db /tmp/multi.db | head -8 ;;
    versus)
      # Model-guided tuning against anneal (issue 13): SHAPES (default six of the public suite)
      # in DTYPE (f32) tuned by anneal for BUDGET s (35) a shape from an empty database; then
      # both that database's kernels and DB's (a main job's: model strategy, 5 s) timed by
      # bench in this run.  CSVs in $OUT (tuned_ms per shape).
      s=${SHAPES:-1024x1024x1024,2048x2048x2048,4096x4096x4096,3000x3000x3000,4096x4096x64,512x512x16384}
      d=${DTYPE:-f32}
      rm -f /tmp/anneal.db*
      /usr/bin/time -f "anneal wall %e s" ./build/tuner/mmtune --device 0 --strategy anneal \
        --budget "${BUDGET:-35}" --dtype "$d" --shapes "$s" --db /tmp/anneal.db \
        > "$out/anneal-$d.log" 2>&1
      echo "anneal exit $?: $(tail -n 1 "$out/anneal-$d.log")"
      for which in anneal model; do
        db=/tmp/anneal.db; [ $which = model ] && db=${DB:-/tmp/mmtune.db}
        ./build/tuner/mmtune bench --shapes "$s" --dtype "$d" --device 0 --db "$db" \
          --csv "$out/versus-$which-$d.csv" > /tmp/v.log 2>&1
        echo "$which bench exit $?: $(grep -E '^geometric' /tmp/v.log)"
      done ;;
    node)
      # Issue 15's targets on a machine with two GPUs (nvidia-h100-x2): the main job on GPU 0
      # alone, then with --device all, then as two --shard processes (one per GPU) merged, each
      # from an empty database and cubin cache, with one seed; the bests of the first two that
      # differ re-timed on both GPUs; then a worker killed, and the parent killed, mid-run.
      # Databases, logs and CSVs in $OUT/node.tgz (bench/node_compare.py reads them).
      n=/tmp/node; rm -rf "$n"; mkdir -p "$n"
      mm=./build/tuner/mmtune
      /usr/bin/time -f %e -o "$n/t-one" $mm --device 0 --seed 7 --db "$n/one.db" --cache-dir "$n/c-one" \
        > "$n/one.log" 2>&1; echo "one GPU exit $?, wall $(cat "$n/t-one") s"
      /usr/bin/time -f %e -o "$n/t-all" $mm --device all --seed 7 --db "$n/all.db" --cache-dir "$n/c-all" \
        > "$n/all.log" 2>&1; echo "--device all exit $?, wall $(cat "$n/t-all") s"
      grep -E "GPUs:|merged|failed" "$n/all.log"
      for i in 0 1; do
        /usr/bin/time -f %e -o "$n/t-s$i" $mm --device $i --seed 7 --shard $i/2 --db "$n/s$i.db" \
          --cache-dir "$n/c-shards" > "$n/s$i.log" 2>&1 &
      done; wait
      echo "shards wall $(cat "$n/t-s0") s and $(cat "$n/t-s1") s"
      $mm db merge "$n/s0.db" "$n/s1.db" --into "$n/shards.db"
      for d in one all shards; do echo "$d: $($mm db check "$n/$d.db")"; done
      python3 bench/node_compare.py rows "$n/all.db" "$n/shards.db"
      python3 bench/node_compare.py best "$n/one.db" "$n/all.db" "$n" | tail -n 20
      # A = one.db, B = all.db; GPU 0 times A's bests while GPU 1 times B's, then the other way.
      for round in 0 1; do
        for f in "$n"/retime-*.txt; do
          [ -f "$f" ] || continue
          dl=${f#"$n"/retime-}; dl=${dl%.txt}; d=${dl%-*}; l=${dl#*-}
          for side in a b; do
            g=$round; db=one; [ $side = b ] && g=$((1 - round)) db=all
            $mm bench --shapes "$f" --dtype "$d" --layout "$l" --device $g --db "$n/$db.db" \
              --cache-dir "$n/c-$db" --csv "$n/retime-$side-gpu$g-$dl.csv" > /dev/null 2>&1 &
          done; wait
        done
      done
      python3 bench/node_compare.py retime "$n"
      # A worker killed (SIGKILL) once it has finished a problem: its part goes to the other GPU.
      args=(--device all --dtype f32 --budget 3 --cache-dir "$n/c-all"
            --shapes 512x512x512,1024x1024x1024,777x333x999,2048x2048x2048,1536x768x640,640x1536x768)
      $mm "${args[@]}" --db "$n/kill.db" > "$n/kill.log" 2>&1 &
      parent=$!
      for _ in $(seq 600); do grep -q '^\[gpu 1\] \[1/' "$n/kill.log" && break; sleep 0.1; done
      pkill -KILL -f -- "--db $n/kill.db.gpu1.db"; wait $parent
      echo "worker killed: exit $?, $(grep -c 'worker failed' "$n/kill.log") failure reported; $($mm db check "$n/kill.db")"
      grep -E "failed|merged|unfinished|part " "$n/kill.log" | tail -n 6
      python3 bench/node_compare.py kept "$n/kill.log" "$n/kill.db"
      # The parent killed (SIGKILL): its workers die with it; the same command resumes and merges.
      $mm "${args[@]}" --db "$n/pkill.db" > "$n/pkill.log" 2>&1 &
      parent=$!
      for _ in $(seq 600); do grep -q '^\[gpu 1\] \[1/' "$n/pkill.log" && break; sleep 0.1; done
      kill -KILL $parent; wait $parent 2>/dev/null; sleep 1
      echo "parent killed: $(pgrep -fc -- "--db $n/pkill.db" || true) workers left running"
      $mm "${args[@]}" --db "$n/pkill.db" > "$n/pkill-rerun.log" 2>&1
      echo "rerun exit $?: $($mm db check "$n/pkill.db")"
      cat "$n/pkill.log" "$n/pkill-rerun.log" > "$n/pkill-both.log"
      python3 bench/node_compare.py kept "$n/pkill-both.log" "$n/pkill.db"
      python3 bench/node_compare.py rows "$n/kill.db" "$n/pkill.db"
      (cd "$n" && tar czf "$out/node.tgz" --exclude='c-*' .) ;;
    interfaces)
      # Issue 16 on the GPU: libmmtune_blas's CTests (netlib's programs and reference BLAS from
      # build/extra-blas where the machine lacks Debian's libblas-test), SGEMM on host memory through the shim
      # against the machine's CPU BLAS (CPU_BLAS, default OpenBLAS), the Python package's tests
      # against torch.matmul and its per-call overhead (the FP8 operators' too).
      d=/usr/lib/x86_64-linux-gnu/blas
      [ -x "$d/xblat3s" ] || { mkdir -p "$d" && cp build/extra-blas/* "$d/"; }
      ctest --test-dir build -R blas --output-on-failure > "$out/blas-ctest.log" 2>&1
      echo "blas ctest exit $?: $(grep -E 'tests passed|tests failed' "$out/blas-ctest.log")"
      grep -E "mmtune_blas: summary" "$out/blas-ctest.log" | cut -c1-100
      MMTUNE_BLAS_CPU_LIBRARY=${CPU_BLAS:-/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3} \
        ./build/blas/mmtune-blas-bench 2>&1 | tee "$out/blas-bench.log"
      export MMTUNE_LIBRARY=$here/build/runtime/libmmtune.so PYTHONPATH=$here/python
      python3 -m unittest discover -s python/tests -p 'test_*.py' > "$out/python-tests.log" 2>&1
      echo "python tests exit $?: $(tail -n 3 "$out/python-tests.log" | tr '\n' ' ')"
      python3 python/bench_overhead.py --fp8 2>&1 | tee "$out/python-overhead.log" ;;
    *) echo "unknown step $step" ;;
  esac
done
