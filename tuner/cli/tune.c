/*
 * cli/tune.c -- `mmtune [tune] --device N`, the main job: its options, the default shape suite,
 * and the passes it runs -- one per layout of the shapes' canonical forms, and for the main job
 * a second part, the Linear layers in nt.  Each pass is the tune loop's (engine/tune_loop.h);
 * several GPUs are engine/multi.h's.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "engine/multi.h"
#include "engine/tune_loop.h"
#include "gpu/measure.h"
#include "rt_driver.h"
#include "rt_gemm.h"

/* Per problem (shape and dtype), for the strategies that sample.  The model strategy mostly
 * stops earlier, when it predicts no further gain. */
#define DEFAULT_BUDGET_S 35
#define MODEL_BUDGET_S 5

/* The default shape suite: the public benchmark shapes (shared/bench/shapes.txt) plus small
 * and ragged ones where launch overhead and tails dominate, and the matrix-vector end (M or
 * N = 1, the GEMVs of decoding), where the skinny family streams the weights: without rows
 * there, the model predicts GEMVs from the M = 16 rows, whose kernels behave otherwise.  Each
 * GEMV side is tuned at two sizes (a weight of 32 MiB in f32, under the L2, and one of 256
 * MiB, streamed from DRAM), so that a GEMV of another size has rows of its own kind on
 * either side of it: with one, the model had nothing but the 16-wide rows to go by for any
 * GEMV of the other size (leave-one-shape-out served 4096x1x4096 at 0.44 of its best).  The
 * Mx1xK ones are tuned in their canonical form (rt_gemm.h), 1xMxK nt: the dot body's rows,
 * as the 1xNxK ones in nn are the axpy body's.  And rows that are neither 16-byte aligned nor
 * odd: 300x300x6000, whose 600-byte rows in 16 bits take the 4-byte loads (mma_sync vec=2)
 * that 1000x999x1001's 2-byte alignment refuses, with few tiles and a long K; without rows of
 * such configs the model served untuned 8-byte-aligned problems element-wise realigned or
 * repacked kernels at 0.2-0.6x cuBLAS where tuning found 4-byte ones at 1.0-1.1x.  And two
 * mid-size ones of 4-byte-aligned rows, 1202^3 (100 tiles of 128 x 128) and 2002x3002x258 (a
 * short K): with 300x300x6000's few-tile rows alone, mid-size problems of such rows were
 * served wgmma with both operands repacked at 0.52-0.87x, where mma_sync's 4-byte loads ran
 * at cuBLAS's speed or better.  And a GEMV whose weight has odd rows, 1x8193x4095 (its twin in
 * nt, 1x4095x8193, is among the Linear layers below): without rows of skinny's element loads
 * the model served such calls wgmma repacking the whole weight, at 0.24-0.43x cuBLAS. */
static const tn_shape DEFAULT_SHAPES[] = {
    {1024, 1024, 1024}, {2048, 2048, 2048}, {4096, 4096, 4096}, {8192, 8192, 8192},
    {3000, 3000, 3000}, {16, 4096, 4096},   {4096, 16, 4096},   {4096, 4096, 64},
    {8192, 8192, 128},  {512, 512, 16384},  {128, 128, 128},    {1000, 999, 1001},
    {1, 4096, 4096},    {4096, 1, 4096},    {1, 8192, 8192},    {8192, 1, 8192},
    {300, 300, 6000},   {1202, 1202, 1202}, {2002, 3002, 258},  {1, 8193, 4095},
};

/* The main job (no --shapes, no --layout) tunes DEFAULT_SHAPES in layout nn, then the decode
 * end of a Linear layer, x * W^T, in layout nt: the skinny kernels' bodies differ by layout (a
 * dot product along K against an axpy over N), and mma_sync's small blocks stream W in another
 * order, so their rows in nn say little about the layout applications call at batch 1 to 32.
 * Batch 16 on a weight of twice the L2 (112 MiB in 16 bits): what streaming W from DRAM costs
 * each kernel, which a 32 MiB weight (batch 1 here) partly hides in the L2.  And batch 8 on a
 * 5120-wide weight: 80 column tiles of 64, fewer than the SMs, where split-K (more blocks
 * streaming W) decides the speed of every narrow layer.  And a prefill-size batch, 384, on the
 * same weight: 120 tiles of 128 x 128, the mid-size nt problems where without nt rows of
 * their own the model had only the decode rows' small blocks to go by.  And batch 128
 * between them (batch 16 to 384 is a gap of 24x): 40 tiles of 128 x 128 on a weight above the
 * H100's L2, where the decode rows' 32-row blocks re-read W four times and a 128-row block
 * reads it once (without it an untuned 128x11008x4096 f16 was served 32-row blocks at 0.39x
 * cuBLAS on an H200).  And the ends of the decode range on wide weights, batch 4 on 12288
 * columns and batch 32 on a 128 MiB weight: with rows at batch 8 and 16 alone, the model
 * took the 64-row wgmma tiles' speed at batch 128 for theirs at batch 4 to 16 (0.74-0.81x
 * cuBLAS at 4-16x11008x4096) and had no row of skinny_mma's 32-row blocks.  And batch 1 on
 * a weight of odd rows (K = 8193): skinny's dot body with element loads.  And batches 4 and
 * 16 on a narrow weight with a long K (a down projection, 4096 x 14336: 112 MiB in 64 column
 * tiles of 64): skinny's and skinny_mma's blocks of fewer rows than the batch read W once per
 * block row, which their rows at batch 1 and 8 and at short K do not show; without rows here
 * the model served them at 4 and 16 x 4096 x 11008 (0.042 ms, 0.89x and 0.93x cuBLAS) where
 * wgmma's swap runs 0.037. */
static const tn_shape LINEAR_NT_SHAPES[] = {
    {1, 4096, 4096},  {16, 14336, 4096}, {8, 5120, 5120}, {128, 5120, 5120}, {384, 5120, 5120},
    {4, 12288, 4096}, {32, 8192, 8192},  {1, 4095, 8193}, {4, 4096, 14336},  {16, 4096, 14336}};

/* The main job's third part: a few fused and batched problems of mmt_matmul (gen.h,
 * "Epilogues"), each a pass of its own with a short budget, so that the op kernels have rows
 * of their own where an epilogue or a batch changes what is fastest: a Linear layer's bias and
 * GELU at prefill size (the epilogue's share of a short main loop), the gated up projection of
 * a Llama-class MLP at prefill and at decode size (N is the product's: gate and up), an f32
 * output from 16-bit inputs (twice D's bytes), a residual added (C read beside D's write: what
 * a ping-pong kernel's overlapped epilogue hides), and attention's two batched GEMMs, Q K^T (nt)
 * and P V (nn), 32 batch x heads of 1024 tokens and head dimension 128.  N counts the
 * product's columns, as the kernels see it. */
typedef struct {
  tn_shape shape;
  const char *layout, *dtype, *op;
  int64_t batch;
} op_problem;
static const op_problem MAIN_OP_PROBLEMS[] = {
    {{2048, 4096, 4096}, "nt", "f16", "out=f16,bias=col,act=gelu_tanh", 1},
    {{2048, 28672, 4096}, "nt", "bf16", "out=bf16,act=silu,gated", 1},
    {{16, 28672, 4096}, "nt", "bf16", "out=bf16,act=silu,gated", 1},
    {{2048, 4096, 4096}, "nt", "f16", "out=f32", 1},
    {{2048, 4096, 4096}, "nt", "f16", "out=f16,residual", 1},
    {{1024, 1024, 128}, "nt", "f16", "out=f16", 32},
    {{1024, 128, 1024}, "nn", "f16", "out=f16", 32},
    /* FP8 (sm_90 on: tune_op_problems skips them elsewhere): per-tensor e4m3 -> bf16, the
     * serving recipe, at prefill and at decode size (batch 16, and batch 1: skinny_mma's FP8
     * blocks, whose configs the model cannot tell apart there -- they differ in how fast they
     * read the weight, 70-92% of a plain read on an H100), and with fast accumulation at a
     * larger size (the tiles without promotion, which no other problem measures) */
    {{2048, 4096, 4096}, "nt", "e4m3", "out=bf16,scale=tensor", 1},
    {{16, 14336, 4096}, "nt", "e4m3", "out=bf16,scale=tensor", 1},
    {{1, 4096, 4096}, "nt", "e4m3", "out=bf16,scale=tensor", 1},
    {{4096, 8192, 8192}, "nt", "e4m3", "out=bf16,scale=tensor,fast_accum", 1},
};
#define MAIN_OP_BUDGET_S 3
/* The main job's --limit: five minutes on one GPU, less what the passes' setups (a worker, a
 * plan) add past their shares (on an H100, fresh database and cubin cache: 293 s in all at a
 * limit of 270 before the plan ran on threads; 205-208 s for 100 problems at 255 since). */
#define MAIN_JOB_LIMIT_S 255

static const tn_opt TUNE_OPTS[] = {
    {"device", 'd', "N|all|I,J,...",
     "CUDA device ordinal (default 0); all or a list: one worker per GPU, the plan split among "
     "the GPUs of each model, results merged into --db"},
    {"shapes", 's', "FILE|MxNxK,...",
     "shapes to tune (default: the built-in suite in --layout; without --layout too, then "
     "1x4096x4096, 16x14336x4096, 8x5120x5120, 128x5120x5120, 384x5120x5120, 4x12288x4096, "
     "32x8192x8192, 1x4095x8193, 4x4096x14336 and 16x4096x14336 in nt: Linear layers)"},
    {"templates", 't', "A,B", "templates to tune (default: all on the search path)"},
    {"dtype", 0, "DTYPE", "element type (default: every dtype each template supports)"},
    {"layout", 'l', "LAYOUT", "nn (default), nt, tn or tt: how A and B are stored (t: transposed)"},
    {"epilogue", 'e', "OP",
     "tune mmt_matmul's op kernels of this epilogue (out=..., bias=col|row, bias_type=f32, "
     "scale=..., act=..., gated: see mmtune emit --help); N is the product's columns; needs "
     "--shapes"},
    {"batch", 0, "N", "with --epilogue: problems of one call (default 1)"},
    {"recorded", 0, NULL,
     "tune the problems applications recorded in --db for this GPU model (mmt_options.record) "
     "instead of shapes: a pass for each dtype, layout, epilogue and batch among them; --dtype "
     "and --layout narrow them"},
    {"strategy", 0, "NAME", "model (default), anneal, random or exhaustive: see above"},
    {"budget", 'b', "SECONDS",
     "search time per shape and dtype, counted across runs, or 'none' (default: model 5, "
     "anneal and random 35, exhaustive none)"},
    {"limit", 0, "SECONDS",
     "the whole run's time, or 'none': each problem's budget is at most an even share of the "
     "time left among the problems left, and at least 1 s (default: 255 for the main job, "
     "none otherwise)"},
    {"seed", 0, "N", "seed of anneal and random (default: from the clock, printed)"},
    {"db", 0, "PATH", "results database (default $MMTUNE_DB or ~/.cache/mmtune/mmtune.db)"},
    {"cache-dir", 0, "DIR", "cubin cache (default ~/.cache/mmtune/cubin)"},
    {"jobs", 'j', "N", "compile threads (default: CPU count)"},
    {"watchdog", 'w', "SECONDS", "a candidate with no result after this is killed (default 60)"},
    {"force", 'f', NULL, "measure again configs already in the database"},
    {"shard", 0, "I/N",
     "only part I of N of the plan (its problems, shapes x dtypes, cut into N blocks with each "
     "dtype's problems together): N processes (a Slurm array's tasks) cover it once; merge "
     "their databases with mmtune db merge"},
};

static const tn_cmd_spec TUNE_SPEC = {
    "tune", "[--device N] [--shapes FILE|MxNxK,...] [--templates A,B] [options]",
    "Tunes every shape: a search over the valid configs of every template picks configs,\n"
    "each is compiled, verified against a float64 reference on fresh random inputs, timed,\n"
    "and stored in the database.  Strategies (--strategy):\n"
    "  model       the performance model (fitted on the database) ranks every config; the\n"
    "              best predicted are measured first, each result correcting the predictions\n"
    "              of similar configs; stops when no config is predicted to beat the best\n"
    "  anneal      simulated annealing over neighbouring configs (one parameter one value\n"
    "              apart) with restarts, from each template's default config and the best\n"
    "              configs of the shapes tuned before\n"
    "  random      configs in random order: random sampling under a budget\n"
    "  exhaustive  every config in order (one slower than 2x the best is timed once)\n"
    "Any strategy but model measures every config when its budget allows.  A run that is\n"
    "interrupted\n"
    "(Ctrl-C) resumes where it stopped: configs in the database are not measured again, and\n"
    "the budget counts the time earlier runs spent on the problem, so running the same\n"
    "command again measures nothing once every problem has had its budget (a larger\n"
    "--budget searches further; --force starts again from nothing).  With --epilogue (and\n"
    "--batch) the problems are mmt_matmul's: the op kernels of the templates that have\n"
    "epilogues, verified against the whole expression, stored as rows of that op and batch;\n"
    "a line of a --shapes file may name its own (M N K epilogue=OP batch=N), each epilogue\n"
    "and batch then a pass of its own.\n"
    "The main job ends with a few such problems (fused Linear layers, a gated MLP, f32\n"
    "output, attention's batched GEMMs).",
    TUNE_OPTS, (int)(sizeof TUNE_OPTS / sizeof TUNE_OPTS[0])};

/* ---- options ------------------------------------------------------------------------------ */

/* The run's --limit as a time (tune_run.deadline; 0: none): set once by tn_cmd_tune, read by
 * every pass's options (a pass parses them again). */
static double g_deadline;

/* --limit, or the main job's default: the run's deadline from now into g_deadline. */
static int parse_limit(const tn_opts *o, bool main_job) {
  const char *v = tn_opts_get(o, "limit");
  double limit = main_job ? MAIN_JOB_LIMIT_S : 0;
  ut_err err;
  if (v && !strcmp(v, "none"))
    limit = 0;
  else if (v && tn_parse_seconds(v, "--limit", 1e7, &limit, &err))
    return tn_usage_error("tune", "%s", err.msg);
  g_deadline = limit > 0 ? ut_now_seconds() + limit : 0;
  return TN_EXIT_OK;
}

static int parse_search(tune_run *r, const tn_opts *o) {
  const char *v;
  int64_t x;
  ut_err err;
  r->strategy = TN_STRATEGY_DEFAULT;
  if ((v = tn_opts_get(o, "strategy")) && !tn_strategy_parse(v, &r->strategy))
    return tn_usage_error("tune", "--strategy must be one of %s, got '%s'", TN_STRATEGY_NAMES, v);
  r->budget_s = r->strategy == TN_STRATEGY_EXHAUSTIVE ? 0
                : r->strategy == TN_STRATEGY_MODEL    ? MODEL_BUDGET_S
                                                      : DEFAULT_BUDGET_S;
  if ((v = tn_opts_get(o, "budget"))) {
    if (!strcmp(v, "none"))
      r->budget_s = 0;
    else if (tn_parse_seconds(v, "--budget", 1e6, &r->budget_s, &err))
      return tn_usage_error("tune", "%s", err.msg);
  }
  r->deadline = g_deadline;
  r->seed = (uint64_t)ut_unix_time() * 1000003u ^ (uint64_t)getpid();
  if ((v = tn_opts_get(o, "seed"))) {
    if (tn_opt_i64("tune", v, "--seed", 0, INT64_MAX, &x)) return TN_EXIT_USAGE;
    r->seed = (uint64_t)x;
  }
  return TN_EXIT_OK;
}

static int parse_numbers(tune_run *r, const tn_opts *o) {
  const char *v;
  int64_t x;
  /* several GPUs (all, or a list) are engine/multi.c's; it checks the list against the devices */
  if ((v = tn_opts_get(o, "device")) && !tn_multi_wanted(v) && tn_opt_device("tune", v, &r->device))
    return TN_EXIT_USAGE;
  if ((v = tn_opts_get(o, "jobs"))) {
    if (tn_opt_i64("tune", v, "--jobs", 1, 1024, &x)) return TN_EXIT_USAGE;
    r->jobs = (int)x;
  }
  ut_err err;
  r->watchdog_s = 60;
  if ((v = tn_opts_get(o, "watchdog")) &&
      tn_parse_seconds(v, "--watchdog", 1e6, &r->watchdog_s, &err))
    return tn_usage_error("tune", "%s", err.msg);
  return parse_search(r, o);
}

/* An op must be one for every dtype of the run.  The exit code. */
static int check_op(const tune_run *r, const char *text, const char *what) {
  static const char *const all[] = {"f32", "tf32", "f16", "bf16", "e4m3", "e5m2"};
  for (int i = 0; i < 6; i++) {
    if (r->dtype ? strcmp(r->dtype, all[i]) != 0 : !strcmp(all[i], "tf32") || gen_dtype_fp8(all[i]))
      continue;
    gen_op op;
    ut_err err;
    if (gen_op_parse(text, all[i], &op, &err) != MMT_OK)
      return tn_usage_error("tune", "%s: %s", what, err.msg);
    if (!gen_op_valid(&op, all[i]))
      return tn_usage_error("tune", "%s '%s' is not one for %s inputs", what, text, all[i]);
  }
  return TN_EXIT_OK;
}

/* A grouped op is served row-major with A as stored (layout n?): else the exit code of a
 * usage error. */
static int check_grouped(const char *text, const char *layout, const char *dtype) {
  gen_op op;
  ut_err err;
  if (!text || gen_op_parse(text, dtype ? dtype : "f16", &op, &err) || !op.group) return TN_EXIT_OK;
  if (layout && layout[0] == 't')
    return tn_usage_error("tune",
                          "epilogue '%s' in layout %s: a grouped op's A is its experts' "
                          "rows as stored (layout nn or nt)",
                          text, layout);
  return TN_EXIT_OK;
}

/* --epilogue and --batch: the op must be one for every dtype of the run. */
static int parse_epilogue(tune_run *r, const tn_opts *o) {
  const char *v = tn_opts_get(o, "batch");
  r->batch = 1;
  if (v && tn_opt_i64("tune", v, "--batch", 1, 65535, &r->batch)) return TN_EXIT_USAGE;
  r->epilogue = tn_opts_get(o, "epilogue");
  if (!r->epilogue) {
    if (v) return tn_usage_error("tune", "--batch goes with --epilogue (a batch runs op kernels)");
    return TN_EXIT_OK;
  }
  if (!tn_opts_has(o, "shapes"))
    return tn_usage_error("tune", "--epilogue needs --shapes (the main job tunes its own op "
                                  "problems)");
  return check_op(r, r->epilogue, "--epilogue");
}

static int parse_options(tune_run *r, const tn_opts *o) {
  int ex;
  if (o->npos > 0) return tn_usage_error("tune", "unexpected argument '%s'", o->pos[0]);
  if ((ex = parse_numbers(r, o))) return ex;
  const char *v = tn_opts_get(o, "shapes");
  if (v) { /* a file's lines may name their own epilogue and batch: tune_grouped's */
    tn_shape_extra *extra = NULL;
    ut_err e;
    if (tn_parse_shapes_extra(v, &r->shapes, &extra, &r->nshapes, &e) != MMT_OK)
      return tn_usage_error("tune", "--shapes: %s", e.msg);
    free(extra);
  } else {
    r->nshapes = (int)(sizeof DEFAULT_SHAPES / sizeof DEFAULT_SHAPES[0]);
    r->shapes = malloc(sizeof DEFAULT_SHAPES);
    if (!r->shapes) return TN_EXIT_FAIL;
    memcpy(r->shapes, DEFAULT_SHAPES, sizeof DEFAULT_SHAPES);
  }
  if ((v = tn_opts_get(o, "dtype")) && (ex = tn_opt_dtype("tune", v, &r->dtype))) return ex;
  if (r->dtype && !tn_measure_supports(r->dtype))
    return tn_usage_error("tune",
                          "dtype %s cannot be measured yet (f32, tf32, f16, bf16, e4m3 "
                          "and e5m2 can)",
                          r->dtype);
  if ((ex = tn_opt_layout("tune", tn_opts_get(o, "layout"), &r->layout))) return ex;
  if ((ex = parse_epilogue(r, o))) return ex;
  if ((ex = check_grouped(r->epilogue, r->layout, r->dtype))) return ex;
  if (r->dtype && gen_dtype_fp8(r->dtype) && !r->epilogue && !tn_opts_has(o, "recorded"))
    return tn_usage_error("tune", "%s inputs need --epilogue (D is f32, f16 or bf16)", r->dtype);
  if ((ex = tn_opt_shard("tune", tn_opts_get(o, "shard"), &r->shard))) return ex;
  if ((ex = tn_opt_templates("tune", tn_opts_get(o, "templates"), &r->ts, &r->nts))) return ex;
  if ((ex = tn_opt_db_path("tune", tn_opts_get(o, "db"), r->db_path, sizeof r->db_path))) return ex;
  ut_err err;
  v = tn_opts_get(o, "cache-dir");
  if (v ? ut_snprintf(r->cache_dir, sizeof r->cache_dir, &err, "%s", v)
        : ut_default_cubin_dir(r->cache_dir, sizeof r->cache_dir, &err))
    return tn_usage_error("tune", "%s", err.msg);
  r->force = tn_opts_has(o, "force");
  return TN_EXIT_OK;
}

/* ---- the command -------------------------------------------------------------------------- */

/* Tunes shapes (packed, in layout) from r, parsed from o: a pass for each layout of their
 * canonical forms (rt_gemm_canonical_packed), the problems mmt_gemm serves them as, so that
 * the rows land where calls look (a GEMV Mx1xK is tuned as 1xMxK); one pass when nothing
 * changes.  later: shapes of passes after these, later_problems their problems of one dtype
 * each, for the ETA and --limit's shares.  The exit code. */
static int tune_canonical(tune_run *r, const tn_opts *o, const tn_shape *shapes, int n,
                          const char *layout, int later, int later_problems) {
  tn_shape *forms = malloc((size_t)(n > 0 ? n : 1) * sizeof *forms);
  int *form_layout = malloc((size_t)(n > 0 ? n : 1) * sizeof *form_layout);
  int ex = forms && form_layout ? TN_EXIT_OK : TN_EXIT_FAIL;
  for (int i = 0; !ex && i < n; i++) {
    rt_gemm_kernel_problem kp;
    rt_gemm_canonical_packed(layout, shapes[i].m, shapes[i].n, shapes[i].k, &kp);
    forms[i] = (tn_shape){kp.m, kp.n, kp.k};
    form_layout[i] = gen_layout_index(kp.layout);
    if (strcmp(kp.layout, layout) != 0 || kp.m != shapes[i].m)
      printf("mmtune: %lldx%lldx%lld %s is tuned as %lldx%lldx%lld %s, the form mmt_gemm "
             "serves it in (%s)\n",
             (long long)shapes[i].m, (long long)shapes[i].n, (long long)shapes[i].k, layout,
             (long long)kp.m, (long long)kp.n, (long long)kp.k, kp.layout,
             kp.transposed ? "C^T = op(B)^T op(A)^T" : "a unit-stride column as a row");
  }
  int first = gen_layout_index(layout), left = n;
  for (int pass = 0; !ex && pass < 4; pass++) {
    int li = pass == 0 ? first : pass <= first ? pass - 1 : pass; /* layout's own pass first */
    tn_shape *group = malloc((size_t)(n > 0 ? n : 1) * sizeof *group);
    int count = 0;
    for (int i = 0; group && i < n; i++) {
      bool seen = form_layout[i] != li;
      for (int j = 0; !seen && j < count; j++) seen = !memcmp(&group[j], &forms[i], sizeof *group);
      if (!seen) group[count++] = forms[i];
    }
    for (int i = 0; i < n; i++) left -= form_layout[i] == li;
    if (!group || count == 0) {
      free(group);
      ex = group ? TN_EXIT_OK : TN_EXIT_FAIL;
      continue;
    }
    if (r->db) { /* a pass ran in r (its setup opens the database first): parse again */
      tn_tune_free(r);
      memset(r, 0, sizeof *r);
      if ((ex = parse_options(r, o))) {
        free(group);
        break;
      }
    }
    free(r->shapes);
    r->shapes = group;
    r->nshapes = count;
    r->layout = gen_layout_name(li);
    r->later_shapes = left + later;
    r->later_problems = later_problems;
    ex = tn_tune_pass(r);
  }
  free(forms);
  free(form_layout);
  return ex;
}

/* --shapes whose lines name epilogues or batches of their own: a pass for each (epilogue,
 * batch) in their order of first appearance, a line without either taking --epilogue and
 * --batch (the plain GEMM's lines: canonical forms, as without any).  The exit code. */
static int tune_grouped(tune_run *r, const tn_opts *o, const tn_shape *shapes,
                        const tn_shape_extra *extra, int n) {
  const char *cli_op = tn_opts_get(o, "epilogue");
  const int64_t cli_batch = r->batch > 1 ? r->batch : 1;
  tn_shape *group = malloc((size_t)n * sizeof *group);
  bool *done = calloc((size_t)n, sizeof *done);
  int ex = group && done ? TN_EXIT_OK : TN_EXIT_FAIL;
  for (int i = 0; !ex && i < n; i++) {
    if (done[i]) continue;
    const char *op = extra[i].op[0] ? extra[i].op : cli_op;
    const int64_t batch = extra[i].batch ? extra[i].batch : cli_batch;
    int count = 0, later = 0;
    for (int j = i; j < n; j++) {
      const char *oj = extra[j].op[0] ? extra[j].op : cli_op;
      const int64_t bj = extra[j].batch ? extra[j].batch : cli_batch;
      if (done[j] || bj != batch || (op ? !oj || strcmp(op, oj) : oj != NULL)) continue;
      done[j] = true;
      group[count++] = shapes[j];
    }
    for (int j = i + 1; j < n; j++) later += !done[j];
    if (!op && batch > 1) {
      ex = tn_usage_error("tune", "batch=%lld without an epilogue (a batch runs op kernels)",
                          (long long)batch);
      break;
    }
    tn_tune_free(r);
    memset(r, 0, sizeof *r);
    if ((ex = parse_options(r, o))) break;
    if (op &&
        ((ex = check_op(r, op, "epilogue=")) || (ex = check_grouped(op, r->layout, r->dtype))))
      break;
    if (!op) {
      ex = tune_canonical(r, o, group, count, r->layout, later, 0);
      continue;
    }
    free(r->shapes);
    if (!(r->shapes = malloc((size_t)count * sizeof *r->shapes))) {
      ex = TN_EXIT_FAIL;
      break;
    }
    memcpy(r->shapes, group, (size_t)count * sizeof *group);
    r->nshapes = count;
    r->later_shapes = later;
    r->epilogue = op;
    r->batch = batch;
    ex = tn_tune_pass(r);
  }
  free(group);
  free(done);
  return ex;
}

/* ---- --recorded ---- */

typedef struct {
  db_recorded *v;
  int n, cap;
  const char *dtype, *layout; /* NULL: any */
  bool oom;
} recorded_queue;

static int queue_push(const char *device_name, const db_recorded *r, void *user) {
  recorded_queue *q = user;
  (void)device_name;
  if ((q->dtype && strcmp(q->dtype, r->problem.dtype)) ||
      (q->layout && strcmp(q->layout, r->problem.layout)))
    return 0;
  if (q->n == q->cap) {
    int cap = q->cap ? 2 * q->cap : 64;
    db_recorded *v = realloc(q->v, (size_t)cap * sizeof *v);
    if (!v) return q->oom = true;
    q->v = v, q->cap = cap;
  }
  q->v[q->n++] = *r;
  return 0;
}

/* Sets *user (a bool) and stops at the first recorded problem. */
static int note_any(const char *device_name, const db_recorded *r, void *user) {
  (void)device_name, (void)r;
  return *(bool *)user = true;
}

/* fn over the recorded problems of device_name (NULL: every device) in r's database (none
 * there: no call).  The exit code. */
static int read_recorded(const tune_run *r, const char *device_name, db_recorded_fn fn,
                         void *user) {
  ut_err e;
  db_handle *db = NULL;
  mmt_status rc = db_open(r->db_path, true, &db, &e);
  if (rc == MMT_ERR_NOT_FOUND) return TN_EXIT_OK; /* no database: nothing recorded */
  if (!rc) rc = db_each_recorded(db, device_name, fn, user, &e);
  db_close(db);
  return rc ? tn_fail("tune", "--recorded: %s", e.msg) : TN_EXIT_OK;
}

static bool same_pass(const db_problem *a, const db_problem *b) {
  return !strcmp(a->dtype, b->dtype) && !strcmp(a->layout, b->layout) && !strcmp(a->op, b->op) &&
         a->batch == b->batch;
}

/* --recorded: the queue of r's GPU model, narrowed by --dtype and --layout, a pass for each
 * (dtype, layout, op, batch) in its order (db_each_recorded's).  Each is the kernel problem
 * a call was served as, so it is tuned as it is (no canonical form).  The exit code. */
static int tune_recorded(tune_run *r, const tn_opts *o) {
  if (tn_opts_has(o, "shapes") || tn_opts_has(o, "epilogue") || tn_opts_has(o, "batch"))
    return tn_usage_error("tune", "--recorded tunes the recorded problems: not with --shapes, "
                                  "--epilogue or --batch");
  bool any = false;
  int ex = read_recorded(r, NULL, note_any, &any); /* none at all: no GPU needed to say so */
  if (!ex && !any) printf("mmtune: nothing recorded in %s\n", r->db_path);
  if (ex || !any) return ex;
  const rt_cu *cu = NULL;
  CUdevice dev;
  char model[128];
  ut_err e;
  if (rt_driver(&cu, &e)) return tn_fail("tune", "%s", e.msg);
  if (cu->cuDeviceGet(&dev, r->device) != CUDA_SUCCESS ||
      cu->cuDeviceGetName(model, sizeof model, dev) != CUDA_SUCCESS)
    return tn_fail("tune", "cannot query device %d", r->device);
  recorded_queue q = {.dtype = r->dtype, .layout = tn_opts_has(o, "layout") ? r->layout : NULL};
  if (!(ex = read_recorded(r, model, queue_push, &q)) && q.oom)
    ex = tn_fail("tune", "--recorded: out of memory");
  if (ex) goto done;
  printf("mmtune: %d recorded problems of %s in %s%s%s%s%s\n", q.n, model, r->db_path,
         q.dtype ? ", dtype " : "", q.dtype ? q.dtype : "", q.layout ? ", layout " : "",
         q.layout ? q.layout : "");
  for (int i = 0, j; i < q.n && !ex; i = j) {
    for (j = i; j < q.n && same_pass(&q.v[i].problem, &q.v[j].problem); j++) continue;
    tn_tune_free(r);
    memset(r, 0, sizeof *r);
    if ((ex = parse_options(r, o))) break;
    const db_problem *p = &q.v[i].problem;
    free(r->shapes);
    if (!(r->shapes = malloc((size_t)(j - i) * sizeof *r->shapes))) {
      ex = TN_EXIT_FAIL;
      break;
    }
    for (int k = i; k < j; k++)
      r->shapes[k - i] = (tn_shape){q.v[k].problem.m, q.v[k].problem.n, q.v[k].problem.k};
    r->nshapes = j - i;
    r->later_shapes = q.n - j;
    r->dtype = p->dtype;
    r->layout = p->layout;
    r->epilogue = p->op[0] ? p->op : NULL;
    r->batch = p->batch > 1 ? p->batch : 1;
    if (r->epilogue && (ex = check_op(r, r->epilogue, "recorded epilogue"))) break;
    ex = tn_tune_pass(r);
  }
done:
  free(q.v);
  return ex;
}

/* The compute capability (major) of device `ordinal`; 0 when it cannot be read (the pass
 * that needs the device then says why). */
static int device_cc_major(int ordinal) {
  const rt_cu *cu = NULL;
  CUdevice dev;
  int major = 0;
  ut_err e;
  if (rt_driver(&cu, &e) || cu->cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
      cu->cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) !=
          CUDA_SUCCESS)
    return 0;
  return major;
}

/* Whether the main job tunes op problem q: of --dtype if given, FP8 on a device of FP8
 * tensor cores (fp8) only. */
static bool main_op_wanted(const op_problem *q, const tn_opts *o, bool fp8) {
  /* --dtype: its problems alone.  The option, not a pass's r->dtype: each pass sets that to
   * its problem's, which skipped every later problem of another type. */
  const char *only = tn_opts_get(o, "dtype");
  return (!only || !strcmp(only, q->dtype)) && (fp8 || !gen_dtype_fp8(q->dtype));
}

/* The main job's op problems (MAIN_OP_PROBLEMS) it tunes, from index `from` on. */
static int main_op_count(const tn_opts *o, bool fp8, int from) {
  const int n = (int)(sizeof MAIN_OP_PROBLEMS / sizeof MAIN_OP_PROBLEMS[0]);
  int count = 0;
  for (int i = from; i < n; i++) count += main_op_wanted(&MAIN_OP_PROBLEMS[i], o, fp8);
  return count;
}

/* The main job's op problems (MAIN_OP_PROBLEMS), a pass each.  The exit code. */
static int tune_op_problems(tune_run *r, const tn_opts *o, bool fp8) {
  const int n = (int)(sizeof MAIN_OP_PROBLEMS / sizeof MAIN_OP_PROBLEMS[0]);
  int ex = TN_EXIT_OK;
  for (int i = 0; i < n && !ex; i++) {
    const op_problem *q = &MAIN_OP_PROBLEMS[i];
    if (!main_op_wanted(q, o, fp8)) continue;
    tn_tune_free(r);
    memset(r, 0, sizeof *r);
    if ((ex = parse_options(r, o))) break;
    free(r->shapes);
    r->shapes = malloc(sizeof *r->shapes);
    if (!r->shapes) return TN_EXIT_FAIL;
    r->shapes[0] = q->shape;
    r->nshapes = 1;
    r->later_problems = main_op_count(o, fp8, i + 1);
    r->layout = q->layout;
    r->dtype = q->dtype;
    r->epilogue = q->op;
    r->batch = q->batch;
    if (!tn_opts_get(o, "budget")) r->budget_s = MAIN_OP_BUDGET_S;
    ex = tn_tune_pass(r);
  }
  return ex;
}

int tn_cmd_tune(int argc, char **argv) {
  tn_opts o;
  tune_run r;
  memset(&r, 0, sizeof r);
  int ex = tn_opts_parse(&TUNE_SPEC, argc, argv, &o);
  if (ex || o.help) goto done;
  const bool main_job = !tn_opts_has(&o, "shapes") && !tn_opts_has(&o, "layout");
  if ((ex = parse_limit(&o, main_job && !tn_opts_has(&o, "recorded")))) goto done;
  if ((ex = parse_options(&r, &o))) goto done;
  const char *devices = tn_opts_get(&o, "device");
  if (tn_multi_wanted(devices)) {
    ex = tn_tune_multi(argc, argv, devices, r.shard, r.db_path);
    goto done;
  }
  struct sigaction sa = {.sa_handler = tn_tune_on_sigint}, old_sa;
  sigaction(SIGINT, &sa, &old_sa);
  if (tn_opts_has(&o, "recorded")) {
    ex = tune_recorded(&r, &o);
    sigaction(SIGINT, &old_sa, NULL);
    goto done;
  }
  /* the main job's op problems, FP8 ones on a device of FP8 tensor cores (sm_90 on) */
  const bool fp8 = main_job && device_cc_major(r.device) >= 9;
  const int nops = main_job ? main_op_count(&o, fp8, 0) : 0;
  const int nlinear = (int)(sizeof LINEAR_NT_SHAPES / sizeof LINEAR_NT_SHAPES[0]);
  /* r's own shapes go with its first pass */
  tn_shape *shapes = malloc((size_t)(r.nshapes > 0 ? r.nshapes : 1) * sizeof *shapes);
  if (!shapes)
    ex = TN_EXIT_FAIL;
  else
    memcpy(shapes, r.shapes, (size_t)r.nshapes * sizeof *shapes);
  tn_shape_extra *extra = NULL;
  int nextra = 0;
  tn_shape *again = NULL; /* the shapes once more, with their lines' extras */
  ut_err e;
  if (!ex && tn_opts_has(&o, "shapes") &&
      tn_parse_shapes_extra(tn_opts_get(&o, "shapes"), &again, &extra, &nextra, &e) != MMT_OK)
    ex = tn_usage_error("tune", "--shapes: %s", e.msg);
  bool own = false; /* lines with an epilogue or batch of their own */
  for (int i = 0; !ex && i < nextra; i++) own = own || extra[i].op[0] || extra[i].batch;
  if (!ex && own)
    ex = tune_grouped(&r, &o, again, extra, nextra);
  else if (!ex && r.epilogue)
    ex = tn_tune_pass(&r); /* an op's problem has no canonical form: launched as it is */
  else if (!ex)
    ex = tune_canonical(&r, &o, shapes, r.nshapes, r.layout, main_job ? nlinear : 0, nops);
  free(again);
  free(extra);
  free(shapes);
  if (!ex && main_job) {
    printf("\nmain job, second part: the decode end of a Linear layer (x * W^T), layout nt\n");
    ex = tune_canonical(&r, &o, LINEAR_NT_SHAPES, nlinear, "nt", 0, nops);
  }
  if (!ex && main_job) {
    printf("\nmain job, third part: fused and batched problems of mmt_matmul\n");
    ex = tune_op_problems(&r, &o, fp8);
  }
  sigaction(SIGINT, &old_sa, NULL);
done:
  tn_tune_free(&r);
  tn_opts_free(&o);
  return ex;
}
