/*
 * cli/explain.c -- `mmtune explain M N K`: which kernel an application's mmt_gemm call would
 * get, and the verification record the choice relies on.  With --device it asks the GPU's
 * context (mmt_explain); with --device-name it makes the same choice for that GPU model from
 * the database alone, without a GPU (rt_explain).  Either way the kernel is emitted, not
 * compiled, to print the grid its launch gets (rt_spec_launch_grid).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "gen.h"
#include "mmtune.h"
#include "rt_choose.h"
#include "rt_device.h"
#include "rt_gemm.h"

/* The SMs a launch line assumes for a GPU model no row describes (an H100's; the performance
 * model assumes as many). */
#define EXPLAIN_SMS 132

static const tn_opt EXPLAIN_OPTS[] = {
    {"device", 'd', "N", "CUDA device ordinal (default 0)"},
    {"device-name", 0, "NAME", "GPU model to explain for, from the database alone (no GPU needed)"},
    {"arch", 0, "sm_XY", "with --device-name: its architecture (default: its rows', else any)"},
    {"db", 0, "PATH", "results database (default as for tune); it must exist unless --defaults"},
    {"defaults", 0, NULL,
     "answer without a database: the built-in defaults and the model's "
     "analytic ranking (what an untuned GPU gets)"},
    {"dtype", 0, "DTYPE", "f32 (default), tf32, f16, bf16; e4m3 or e5m2 (FP8: with --epilogue)"},
    {"order", 0, "row|col", "storage order of A, B and C (default row)"},
    {"trans-a", 0, NULL, "op(A) = A^T"},
    {"trans-b", 0, NULL, "op(B) = B^T"},
    {"lda", 0, "N", "leading dimension of A (default: the smallest allowed)"},
    {"ldb", 0, "N", "leading dimension of B (default: the smallest allowed)"},
    {"ldc", 0, "N", "leading dimension of C (default: the smallest allowed)"},
    {"epilogue", 'e', "OP",
     "mmt_matmul's call with this epilogue (out=f32|f16|bf16|e4m3|e5m2, bias=col|row, "
     "bias_type=f32, "
     "scale=row|col|row+col|tensor|block, act=..., gated, fast_accum, mixed, residual: as "
     "mmtune emit --help says; bias=col is a vector over D's columns; residual: beta 1, C apart "
     "from D); N is D's"},
    {"batch", 0, "N", "with --epilogue: problems of the call (packed one after another)"},
    {"group-tokens", 0, "N",
     "with --epilogue group=...: the rows all experts have together, the call's group_tokens "
     "hint the kernel is chosen for (default 0: not known)"},
    {"top", 0, "N",
     "with --device-name: also the first N candidates as the model ranks them (predicted and "
     "analytic ms, rows used), and why any of them is not usable"},
};

static const tn_cmd_spec EXPLAIN_SPEC = {
    "explain", "M N K [--device N | --device-name NAME] [--dtype D] [--order row|col] [options]",
    "Prints the kernel mmt_gemm would use for C = op(A) op(B) with these sizes (matrices from\n"
    "cudaMalloc): whether it was tuned for exactly this shape (exact), the config verified on\n"
    "other shapes that the performance model predicts fastest (predicted), or a default or\n"
    "built-in config never measured on this GPU model (default); the template and parameters;\n"
    "the expected time (measured, or the model's prediction and how many rows it used); and\n"
    "the measurement it relies on (shape, time, errors against the float64 reference, date,\n"
    "NVRTC and template source hash); and the launch it makes (the grid and what each of\n"
    "its dimensions counts: tiles, split-K slices, a batch's problems, experts; threads and\n"
    "shared memory).  With --epilogue (and --batch), the same for an mmt_matmul call: the op\n"
    "kernel it would launch.",
    EXPLAIN_OPTS, (int)(sizeof EXPLAIN_OPTS / sizeof EXPLAIN_OPTS[0])};

/* --epilogue and --batch: an mmt_matmul descriptor for p (*has false without --epilogue).  Its
 * pointers are placeholders (explain reads none), its batches packed. */
static int parse_matmul(const tn_opts *o, const mmt_problem *p, mmt_matmul_desc *d, bool *has) {
  gen_op op;
  int ex = tn_opt_epilogue("explain", o, mmt_dtype_name(p->dtype), &op, has);
  int64_t batch = 1;
  const char *v = tn_opts_get(o, "batch");
  if (!ex && v) ex = tn_opt_i64("explain", v, "--batch", 1, INT32_MAX, &batch);
  int64_t tokens = 0;
  const char *t = tn_opts_get(o, "group-tokens");
  if (!ex && t) ex = tn_opt_i64("explain", t, "--group-tokens", 0, INT64_MAX, &tokens);
  if (ex) return ex;
  if (!*has) return v ? tn_usage_error("explain", "--batch goes with --epilogue") : TN_EXIT_OK;
  if (t && !op.group)
    return tn_usage_error("explain", "--group-tokens goes with a grouped --epilogue (group=...)");
  static const char *const outs[5] = {"f32", "f16", "bf16", "e4m3", "e5m2"};
  static const mmt_dtype types[5] = {MMT_F32, MMT_F16, MMT_BF16, MMT_E4M3, MMT_E5M2};
  mmt_dtype out = MMT_F32;
  for (int i = 0; i < 5; i++)
    if (!strcmp(op.out, outs[i])) out = types[i];
  const void *some = (const void *)(uintptr_t)0x100000; /* aligned for every type */
  const int64_t np = op.gated ? 2 * p->n : p->n;
  const bool row = p->order == MMT_ROW_MAJOR;
  *d = (mmt_matmul_desc){
      .order = p->order,
      .trans_a = p->trans_a,
      .trans_b = p->trans_b,
      .m = p->m,
      .n = p->n,
      .k = p->k,
      .in_type = p->dtype,
      .out_type = out,
      .alpha = 1,
      /* a residual: C apart from D (in place, with no other op, it is the plain GEMM's beta) */
      .beta = op.residual ? 1.0f : 0.0f,
      .c = op.residual ? (const void *)(uintptr_t)0x200000 : NULL,
      .ldc = p->ldc,
      .a = some,
      .lda = p->lda,
      .b = some,
      .ldb = p->ldb,
      .d = (void *)(uintptr_t)some,
      .ldd = p->ldc,
      .batch = batch,
      .bias_mode = op.bias == 'c'   ? MMT_BIAS_COL
                   : op.bias == 'r' ? MMT_BIAS_ROW
                                    : MMT_BIAS_NONE,
      .bias = op.bias ? some : NULL,
      .bias_type = op.bias_f32 ? MMT_F32 : out,
      .scale_mode = op.scale_block    ? MMT_SCALE_BLOCK
                    : op.scale_tensor ? MMT_SCALE_TENSOR
                                      : MMT_SCALE_VECTORS,
      .fast_accum = op.fast_accum,
      /* mixed: --dtype is A's, B the other FP8 type */
      .b_type = !op.mixed_fp8          ? MMT_F32
                : p->dtype == MMT_E4M3 ? MMT_E5M2
                                       : MMT_E4M3,
      .scale_row = op.scale_row || op.scale_tensor || op.scale_block ? some : NULL,
      .scale_col = op.scale_col || op.scale_tensor || op.scale_block ? some : NULL,
      .act = (mmt_activation)op.act,
      .gated = op.gated,
      /* grouped: the batch is the experts (contiguous: one A and D; masked: blocks of M) */
      .group_mode = op.group == 'c'   ? MMT_GROUP_CONTIGUOUS
                    : op.group == 'm' ? MMT_GROUP_MASKED
                                      : MMT_GROUP_NONE,
      .group_rows = op.group ? some : NULL,
      .group_tokens = tokens};
  if (batch > 1) { /* packed: each matrix after the one before */
    const bool a_rows = row != (p->trans_a == MMT_TRANS), b_rows = row != (p->trans_b == MMT_TRANS);
    d->stride_a = (a_rows ? p->m : p->k) * p->lda;
    d->stride_b = (b_rows ? p->k : np) * p->ldb;
    d->stride_d = (row ? p->m : p->n) * p->ldc;
    d->stride_c = op.residual ? d->stride_d : 0;
    if (op.group == 'c') d->stride_a = d->stride_c = d->stride_d = 0;
  }
  if (op.gated && !tn_opts_get(o, "ldb")) { /* the default B of a gated call: 2N columns */
    mmt_problem q = *p;
    q.n = np;
    int64_t min[3];
    const char *what[3];
    rt_gemm_min_ld(&q, min, what);
    d->ldb = min[1] > 1 ? min[1] : 1;
  }
  return TN_EXIT_OK;
}

/* The problem from the command line.  Exit code. */
static int parse_problem(const tn_opts *o, mmt_problem *p) {
  int64_t v[3];
  static const char *const names[3] = {"M", "N", "K"};
  if (o->npos != 3)
    return tn_usage_error("explain", o->npos < 3 ? "expected M N K" : "unexpected argument '%s'",
                          o->npos > 3 ? o->pos[3] : "");
  /* the sizes mmt_gemm launches a kernel for: an empty product has nothing to explain */
  for (int i = 0; i < 3; i++)
    if (tn_opt_i64("explain", o->pos[i], names[i], 1, INT32_MAX, &v[i])) return TN_EXIT_USAGE;
  *p = (mmt_problem){MMT_ROW_MAJOR, MMT_NO_TRANS, MMT_NO_TRANS, v[0], v[1], v[2], 0, 0, 0, MMT_F32};
  const char *s = tn_opts_get(o, "dtype");
  if (s && tn_opt_served_dtype("explain", s, &p->dtype)) return TN_EXIT_USAGE;
  if ((s = tn_opts_get(o, "order"))) {
    if (strcmp(s, "row") && strcmp(s, "col"))
      return tn_usage_error("explain", "--order must be row or col, not '%s'", s);
    p->order = strcmp(s, "col") ? MMT_ROW_MAJOR : MMT_COL_MAJOR;
  }
  p->trans_a = tn_opts_has(o, "trans-a") ? MMT_TRANS : MMT_NO_TRANS;
  p->trans_b = tn_opts_has(o, "trans-b") ? MMT_TRANS : MMT_NO_TRANS;
  /* Default leading dimensions: the smallest mmt_gemm allows. */
  int64_t def[3];
  const char *what[3];
  rt_gemm_min_ld(p, def, what);
  int64_t *ld[3] = {&p->lda, &p->ldb, &p->ldc};
  static const char *const ld_names[3] = {"lda", "ldb", "ldc"};
  for (int i = 0; i < 3; i++) {
    *ld[i] = def[i] > 1 ? def[i] : 1;
    if ((s = tn_opts_get(o, ld_names[i])) &&
        tn_opt_i64("explain", s, ld_names[i], 1, INT64_MAX, ld[i]))
      return TN_EXIT_USAGE;
  }
  return TN_EXIT_OK;
}

static void print_choice(const mmt_problem *p, const char *device, const mmt_choice *c) {
  printf("%s %c%c %lldx%lldx%lld %s (lda %lld, ldb %lld, ldc %lld) on %s\n",
         p->order == MMT_ROW_MAJOR ? "row-major" : "column-major",
         p->trans_a == MMT_TRANS ? 't' : 'n', p->trans_b == MMT_TRANS ? 't' : 'n', (long long)p->m,
         (long long)p->n, (long long)p->k, mmt_dtype_name(p->dtype), (long long)p->lda,
         (long long)p->ldb, (long long)p->ldc, device);
  if (!c->template_name[0]) {
    printf("  nothing to launch (M or N is 0)\n");
    return;
  }
  if (c->epilogue[0])
    printf("  epilogue:  %s, batch %lld (mmt_matmul's op kernel)\n", c->epilogue,
           (long long)c->batch);
  printf("  choice:    %s\n", mmt_choice_kind_name(c->kind));
  printf("  kernel:    %s %s\n", c->template_name, c->params);
  rt_gemm_kernel_problem kp;
  rt_gemm_map(p, &kp);
  printf("  computes:  row-major %lldx%lldx%lld, layout %s%s%s\n", (long long)c->kernel_m,
         (long long)c->kernel_n, (long long)c->kernel_k, c->layout,
         p->order == MMT_COL_MAJOR ? " (column-major: A and B, M and N swapped)" : "",
         kp.transposed ? " (a GEMV with a contiguous C: computed as C^T = op(B)^T op(A)^T)" : "");
  if (c->kind == MMT_CHOICE_DEFAULT) {
    printf("  expected:  %.4f ms predicted by the model (this config was never measured on this "
           "GPU model; run mmtune to tune)\n",
           c->expected_ms);
    if (strstr(c->epilogue, "fast_accum") && strstr(c->params, "promote=0"))
      printf("             (fast_accum: a promote=0 config is predicted from the rows of the "
             "same config promoting, where there are some, less the promotions)\n");
    return;
  }
  char when[32] = "?";
  time_t t = (time_t)c->measured_at;
  struct tm tm;
  if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
  if (c->kind == MMT_CHOICE_PREDICTED)
    printf("  expected:  %.4f ms predicted by the model from %d row%s of this config on other "
           "shapes\n",
           c->expected_ms, c->model_rows, c->model_rows == 1 ? "" : "s");
  else
    printf("  expected:  %.4f ms (measured)\n", c->expected_ms);
  printf("  record:    #%lld, %lldx%lldx%lld on %s: %.4f ms median, %.2f TFLOP/s\n",
         (long long)c->record_id, (long long)c->tuned_m, (long long)c->tuned_n,
         (long long)c->tuned_k, c->device_name, c->tuned_ms, c->tuned_tflops);
  printf("  verified:  rel err %.1e, max err %.1e against float64; %s, NVRTC %s, template %s, "
         "kernel %s\n",
         c->rel_err, c->max_err, when, c->nvrtc_version, c->template_hash,
         c->kernel_hash[0] ? c->kernel_hash : "not recorded");
}

/* What grid dimension g of kernel k counts, for a launch with args (its grid.z a split-K
 * kernel's slices, a batch's problems or a masked call's experts); a gated op's N counts B's
 * 2N columns. */
static const char *grid_dim_text(const gen_kernel *k, int g, const rt_gemm_args *args, bool gated,
                                 char *out, size_t n) {
  const gen_grid_dim *d = &k->grid[g];
  if (d->dim == 'M')
    snprintf(out, n, "tile rows of %lld%s", (long long)d->tile,
             args->group == 'c' ? ", the experts' partial ones too" : "");
  else if (d->dim == 'N')
    snprintf(out, n, "tile columns of %lld%s", (long long)d->tile,
             gated ? " (B's gate and up columns together)" : "");
  else if (d->dim == 'K')
    snprintf(out, n, "slices of %lld of K", (long long)d->tile);
  else if (d->dim == 'S' && args->batch > 1 && args->group != 'c')
    /* batch_grid (rt_device.c) shares the per-SM grid among grid.z's problems or experts */
    snprintf(out, n, "blocks walking each %s's tiles (%lld per SM, shared among z)",
             args->group == 'm' ? "expert" : "problem", (long long)d->tile);
  else if (d->dim == 'S')
    snprintf(out, n, "%lld per SM (persistent)", (long long)d->tile);
  else if (g != 2) /* a constant dimension; only grid.z takes a batch or split-K slices */
    return NULL;
  else if (args->batch > 1 && args->group == 'm' && k->walks_experts)
    snprintf(out, n, "slices of the %lld experts, each walking its share", (long long)args->batch);
  else if (args->batch > 1 && args->group == 'm')
    snprintf(out, n, "the experts");
  else if (args->batch > 1 && args->group != 'c')
    snprintf(out, n, "the batch's problems");
  else if (d->tile > 1)
    snprintf(out, n, "split-K slices");
  else
    return NULL;
  return out;
}

/* The launch of c's kernel (emitted, not compiled) on a device of sm_count SMs: its grid,
 * what each dimension counts, its threads and shared memory.  p and d: the call explained (d
 * NULL for mmt_gemm's). */
static void print_launch(const mmt_problem *p, const mmt_matmul_desc *d, const mmt_choice *c,
                         int sm_count, const char *sms_from) {
  if (!c->template_name[0]) return;
  gen_template *t = NULL;
  gen_config cfg;
  gen_op op;
  gen_kernel k;
  memset(&k, 0, sizeof k);
  memset(&op, 0, sizeof op);
  ut_err e = {{0}};
  const char *dtype = mmt_dtype_name(p->dtype);
  mmt_status rc = gen_load_named(c->template_name, &t, &e);
  if (!rc) rc = gen_config_parse(t, c->params, &cfg, &e);
  if (!rc && c->epilogue[0]) rc = gen_op_parse(c->epilogue, dtype, &op, &e);
  if (!rc) rc = gen_emit_op(t, &cfg, dtype, c->layout, c->epilogue[0] ? &op : NULL, &k, &e);
  const rt_epilogue epi = {0};
  /* a grouped call launches its own M (all rows, or the experts' blocks), not its key's */
  const rt_gemm_args args = {.m = op.group ? p->m : c->kernel_m,
                             .n = c->kernel_n,
                             .k = c->kernel_k,
                             .epi = &epi,
                             .batch = c->batch,
                             .group = op.group,
                             .tokens = d ? d->group_tokens : 0};
  unsigned grid[3] = {0, 0, 0};
  if (!rc) rc = rt_spec_launch_grid(&k, sm_count, &args, grid, &e);
  if (rc) {
    printf("  launch:    not known (%s)\n", e.msg);
  } else {
    printf("  launch:    grid %u x %u x %u of %u threads, %u bytes of dynamic shared memory "
           "(%d SMs: %s)\n",
           grid[0], grid[1], grid[2], k.block[0] * k.block[1] * k.block[2], k.shared_bytes,
           sm_count, sms_from);
    static const char axis[3] = {'x', 'y', 'z'};
    for (int g = 0; g < 3; g++) {
      char text[128];
      if (grid_dim_text(&k, g, &args, op.gated, text, sizeof text))
        printf("             %c: %u, %s\n", axis[g], grid[g], text);
    }
  }
  gen_kernel_clear(&k);
  gen_free(t);
}

/* The first `top` candidates of the ranking of p's call (d's with an epilogue): what the
 * choice was made from. */
static mmt_status print_ranking(rt_chooser *ch, db_handle *db, const char *device,
                                const mmt_problem *p, const mmt_matmul_desc *d, int64_t top,
                                ut_err *err) {
  if (p->m == 0 || p->n == 0) return MMT_OK;
  gen_op op;
  gen_problem gp = d ? rt_explain_matmul_problem(d, &op) : rt_explain_problem(p);
  rt_candidate *cands = NULL;
  int n = 0;
  mmt_status rc = rt_rank(ch, db, device, &gp, NULL, &cands, &n, err);
  if (rc) return rc;
  printf("  ranking:   %d candidates, the first %d (predicted ms, the analytic part, rows of the "
         "config / of its template that weighed in%s)\n",
         n, top < n ? (int)top : n,
         gp.op ? "; +E: of the prediction, the op's epilogue after each tile's main loop" : "");
  for (int i = 0; i < n && i < top && !rc; i++) {
    const rt_candidate *c = &cands[i];
    rt_choice use = {0};
    ut_err why = {{0}};
    mmt_status u = rt_choose_candidate(ch, c, &gp, &use, &why);
    rt_choice_clear(&use);
    if (u == MMT_ERR_NOMEM) rc = ut_fail(err, u, "%s", why.msg);
    char epi[32] = "";
    if (c->pred.epilogue_ms > 0) snprintf(epi, sizeof epi, "  +E %.4f", c->pred.epilogue_ms);
    printf("  %4d  %9.4f %9.4f %4d/%-4d %s %s%s%s%s\n", i + 1, c->pred.ms, c->pred.analytic_ms,
           c->pred.rows, c->pred.template_rows, c->template_name, c->params, epi,
           u ? "  -- not usable: " : "", u ? why.msg : "");
  }
  free(cands);
  return rc;
}

/* db_each_best callback: the device that measured the first row (its architecture and
 * SMs). */
static int first_device(const db_result *r, void *user) {
  *(db_device *)user = r->device;
  return 1;
}

/* --device-name: the choice from the database alone (kernels for the architecture its rows
 * were measured on; any architecture for a device name without rows). */
static int explain_offline(const tn_opts *o, const mmt_problem *p, const mmt_matmul_desc *d,
                           const char *device) {
  char path[4096];
  int64_t top = 0;
  const char *t = tn_opts_get(o, "top");
  int ex = tn_opt_db_path("explain", tn_opts_get(o, "db"), path, sizeof path);
  if (!ex && t) ex = tn_opt_i64("explain", t, "--top", 1, 1000000, &top);
  if (ex) return ex;
  ut_err err;
  db_handle *db = NULL;
  rt_chooser *ch = NULL;
  mmt_choice c;
  mmt_status rc = tn_opts_has(o, "defaults") ? MMT_OK : db_open(path, true, &db, &err);
  if (rc == MMT_ERR_NOT_FOUND)
    return tn_usage_error("explain", "%s (tune first, or --defaults for the built-in choice)",
                          err.msg);
  char arch[16] = "";
  const char *given = tn_opts_get(o, "arch");
  int cc = 0;
  if (given && (sscanf(given, "sm_%d", &cc) != 1 || cc < 10 || strlen(given) >= sizeof arch)) {
    db_close(db);
    return tn_usage_error("explain", "--arch must be sm_XY (e.g. sm_90), not '%s'", given);
  }
  db_device measured = {0};
  if (!rc && db) rc = db_each_best(db, device, NULL, NULL, first_device, &measured, &err);
  if (given)
    snprintf(arch, sizeof arch, "%s", given);
  else if (measured.cc_major > 0)
    snprintf(arch, sizeof arch, "sm_%d%d", measured.cc_major, measured.cc_minor);
  if (!rc) rc = rt_chooser_new(arch, 0, &ch, &err);
  char fits[4096];
  ut_err no_cache; /* no cache folder (no HOME): the model is fitted, as without one */
  if (!rc && !ut_default_cubin_dir(fits, sizeof fits, &no_cache))
    rc = rt_chooser_set_fit_cache(ch, fits, &err);
  if (!rc)
    rc = d ? rt_explain_matmul(ch, db, device, d, &c, &err)
           : rt_explain(ch, db, device, p, &c, &err);
  if (!rc) {
    print_choice(p, device, &c);
    if (measured.sm_count > 0)
      print_launch(p, d, &c, measured.sm_count, "the GPU model's rows");
    else
      print_launch(p, d, &c, EXPLAIN_SMS, "assumed: no row gives the GPU model's");
  }
  if (!rc && top > 0) rc = print_ranking(ch, db, device, p, d, top, &err);
  rt_chooser_free(ch);
  db_close(db);
  if (rc == MMT_ERR_INVALID_ARG) return tn_usage_error("explain", "%s", err.msg);
  return rc ? tn_fail("explain", "%s", err.msg) : TN_EXIT_OK;
}

int tn_cmd_explain(int argc, char **argv) {
  tn_opts o;
  mmt_problem p;
  int ex = tn_opts_parse(&EXPLAIN_SPEC, argc, argv, &o);
  if (ex || o.help) goto done;
  if ((ex = parse_problem(&o, &p))) goto done;
  mmt_matmul_desc d;
  bool has_op = false;
  if ((ex = parse_matmul(&o, &p, &d, &has_op))) goto done;
  const char *name = tn_opts_get(&o, "device-name");
  if (name && !*name) {
    ex = tn_usage_error("explain", "--device-name is empty");
    goto done;
  }
  if (name) {
    if (tn_opts_has(&o, "device")) {
      ex = tn_usage_error("explain", "--device and --device-name exclude each other");
      goto done;
    }
    ex = explain_offline(&o, &p, has_op ? &d : NULL, name);
    goto done;
  }
  if (tn_opts_has(&o, "arch")) {
    ex = tn_usage_error("explain", "--arch goes with --device-name (a device has its own)");
    goto done;
  }
  if (tn_opts_has(&o, "top")) {
    ex = tn_usage_error("explain", "--top goes with --device-name (the ranking is made from the "
                                   "database, without a GPU)");
    goto done;
  }
  int device = 0;
  const char *v = tn_opts_get(&o, "device");
  if (v && (ex = tn_opt_device("explain", v, &device))) goto done;
  char path[4096];
  if ((ex = tn_opt_db_path("explain", tn_opts_get(&o, "db"), path, sizeof path))) goto done;
  /* a database that is not there answers from the defaults: only when asked for */
  if (!tn_opts_has(&o, "defaults") && access(path, F_OK) != 0) {
    ex = tn_usage_error("explain",
                        "no database at '%s' (tune first, or --defaults for the "
                        "built-in choice)",
                        path);
    goto done;
  }
  if (tn_opts_has(&o, "defaults") && tn_opts_get(&o, "db")) {
    ex = tn_usage_error("explain", "--defaults and --db exclude each other");
    goto done;
  }
  mmt_options mo = {.db_path = tn_opts_has(&o, "defaults") ? "" : path};
  mmt_context *ctx = NULL;
  mmt_choice c;
  mmt_status rc = mmt_open(&ctx, device, &mo);
  if (!rc) rc = has_op ? mmt_explain_matmul(ctx, &d, &c) : mmt_explain(ctx, &p, &c);
  if (!rc) {
    char dev[160];
    snprintf(dev, sizeof dev, "device %d", device);
    print_choice(&p, dev, &c);
    rt_device gpu;
    ut_err e;
    if (rt_device_open(device, &gpu, &e) == MMT_OK)
      print_launch(&p, has_op ? &d : NULL, &c, gpu.info.sm_count, "the device's");
    else
      printf("  launch:    not known (%s)\n", e.msg);
    rt_device_close(&gpu);
  }
  ex = rc == MMT_OK ? TN_EXIT_OK
       : rc == MMT_ERR_INVALID_ARG
           ? tn_usage_error("explain", "%s", mmt_errmsg(ctx))
           : tn_fail("explain", "%s: %s", mmt_status_name(rc), mmt_errmsg(ctx));
  mmt_close(ctx);
done:
  tn_opts_free(&o);
  return ex;
}
