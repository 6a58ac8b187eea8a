/*
 * sweep.c -- mmtune-sweep: the standing out-of-bounds sweep.  Runs every planned case
 * (sweep_plan.h: each template family, dtype, layout, the default and random configs and every
 * value of vec/split/repack/persist, on small ragged problems with padded pitches and
 * misaligned bases; and each op twin's epilogue and batch forms, sweep_op.h) once, each operand in its own exact-size allocation, so that
 * compute-sanitizer's memcheck sees any access past [ptr, ptr + extent) of A, B or C.  Each
 * result is checked against a float64 CPU reference, and C's row padding and the bytes before
 * its base against a sentinel.  scripts/gpu-check.sh's memcheck step runs it under the
 * sanitizer.
 *
 * Without a GPU: --list prints the plan, --compile-only fills the cubin cache with NVRTC (carry
 * the cache to the GPU machine so the run there compiles nothing).  With no driver or device
 * anything else prints one line and exits 77 (the automake "skipped" code).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "half16.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "rt_driver.h"
#include "sweep_op.h"
#include "sweep_plan.h"
#include "cli/args.h"
#include "gpu/pool.h"
#include "gpu/ref.h"

#define EXIT_NO_GPU 77
#define DEFAULT_TEMPLATES "naive,smem_tiled,reg_tiled,mma_sync,wgmma,skinny,skinny_mma"
#define SENTINEL32 0xdeadbeefu /* C's padding and prefix: a pattern no kernel computes */
#define SENTINEL16 0xdeadu

typedef struct {
  char **names;
  int ntemplates;
  sw_opts plan;
  bool list, compile_only, verbose;
  char arch[16];
  char cache[4096];
  int device, sample, jobs;
  int64_t only_case; /* -1: all (subject to sample) */
} options;

typedef struct {
  const sw_plan *plan;
  gen_template *const *templates;
  const options *o;
  const rt_cu *cu;
  rt_device dev;
  int *run, *failed, *skipped; /* per template */
  int passed, nfailed;
  bool dead; /* a sticky CUDA error: the context cannot run anything more */
} sweep;

typedef enum { CASE_PASS, CASE_FAIL } verdict;

static void usage(FILE *f) {
  fputs("usage: mmtune-sweep [options]\n"
        "Runs every template kernel of the plan once on small ragged problems, each operand in\n"
        "its own exact-size allocation (for compute-sanitizer memcheck), and checks C against a\n"
        "float64 reference and its padding against a sentinel.\n"
        "  --templates a,b     templates (default " DEFAULT_TEMPLATES ")\n"
        "  --configs N         random valid configs per template, dtype and layout (default 3)\n"
        "  --problems P        problems per config (default 2)\n"
        "  --seed S            plan seed (default 1)\n"
        "  --list              print the plan, one line per case (no GPU)\n"
        "  --compile-only      compile every planned kernel into the cubin cache (no GPU)\n"
        "  --arch A            architecture for --compile-only (default sm_90)\n"
        "  --cache DIR         cubin cache (default $MMTUNE_CACHE_DIR or ~/.cache/mmtune/cubin)\n"
        "  --device N          GPU ordinal (default 0)\n"
        "  --sample K          run only every K-th case (racecheck, synccheck)\n"
        "  --case I            run only case I (as numbered by --list)\n"
        "  --jobs N            compile threads (default: online CPUs, at most 16)\n"
        "  --verbose           print each case before it runs (a hang names its case)\n"
        "Exit: 0 all passed, 1 a case failed, 2 bad arguments, 77 no GPU.\n",
        f);
}

/* ---- arguments ----------------------------------------------------------------------------- */

/* The value of option argv[*i] ("--x v" or "--x=v"); NULL when it takes none or is not `name`. */
static const char *opt_value(int argc, char **argv, int *i, const char *name, bool *missing) {
  const size_t len = strlen(name);
  if (strncmp(argv[*i], name, len) != 0) return NULL;
  if (argv[*i][len] == '=') return argv[*i] + len + 1;
  if (argv[*i][len] != '\0') return NULL;
  if (*i + 1 >= argc) {
    *missing = true;
    return NULL;
  }
  return argv[++*i];
}

static mmt_status parse_number(const char *text, const char *what, int64_t min, int64_t max,
                               int *out, ut_err *err) {
  int64_t v = 0;
  mmt_status rc = tn_parse_i64(text, what, min, max, &v, err);
  if (!rc) *out = (int)v;
  return rc;
}

/* One option at argv[*i]; *known false when it is none of these. */
static mmt_status parse_valued(int argc, char **argv, int *i, options *o, bool *known,
                               ut_err *err) {
  bool missing = false;
  const char *v;
  int64_t seed = 0;
  *known = true;
  if ((v = opt_value(argc, argv, i, "--templates", &missing))) {
    tn_list_free(o->names, o->ntemplates);
    o->names = NULL;
    return tn_split_list(v, "--templates", &o->names, &o->ntemplates, err);
  }
  if ((v = opt_value(argc, argv, i, "--configs", &missing)))
    return parse_number(v, "--configs", 0, 1000, &o->plan.configs, err);
  if ((v = opt_value(argc, argv, i, "--problems", &missing)))
    return parse_number(v, "--problems", 1, 1000, &o->plan.problems, err);
  if ((v = opt_value(argc, argv, i, "--seed", &missing))) {
    mmt_status rc = tn_parse_i64(v, "--seed", 0, INT64_MAX, &seed, err);
    o->plan.seed = (uint64_t)seed;
    return rc;
  }
  if ((v = opt_value(argc, argv, i, "--arch", &missing)))
    return ut_snprintf(o->arch, sizeof o->arch, err, "%s", v);
  if ((v = opt_value(argc, argv, i, "--cache", &missing)))
    return ut_snprintf(o->cache, sizeof o->cache, err, "%s", v);
  if ((v = opt_value(argc, argv, i, "--device", &missing)))
    return parse_number(v, "--device", 0, 1023, &o->device, err);
  if ((v = opt_value(argc, argv, i, "--sample", &missing)))
    return parse_number(v, "--sample", 1, INT32_MAX, &o->sample, err);
  if ((v = opt_value(argc, argv, i, "--case", &missing)))
    return tn_parse_i64(v, "--case", 0, INT32_MAX, &o->only_case, err);
  if ((v = opt_value(argc, argv, i, "--jobs", &missing)))
    return parse_number(v, "--jobs", 1, 256, &o->jobs, err);
  *known = false;
  if (missing) return ut_fail(err, MMT_ERR_INVALID_ARG, "%s needs a value", argv[*i]);
  return MMT_OK;
}

static mmt_status parse_args(int argc, char **argv, options *o, bool *help, ut_err *err) {
  mmt_status rc = MMT_OK;
  *help = false;
  if ((rc = tn_split_list(DEFAULT_TEMPLATES, "--templates", &o->names, &o->ntemplates, err)))
    return rc;
  for (int i = 1; i < argc; i++) {
    bool known = true;
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) *help = true;
    else if (strcmp(argv[i], "--list") == 0) o->list = true;
    else if (strcmp(argv[i], "--compile-only") == 0) o->compile_only = true;
    else if (strcmp(argv[i], "--verbose") == 0 || strcmp(argv[i], "-v") == 0) o->verbose = true;
    else if ((rc = parse_valued(argc, argv, &i, o, &known, err))) return rc;
    if (!known) return ut_fail(err, MMT_ERR_INVALID_ARG, "unknown option '%s'", argv[i]);
  }
  if (o->list && o->compile_only)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "--list and --compile-only exclude each other");
  char checked[16];
  if (o->compile_only && (rc = rt_kernel_arch(o->arch, NULL, checked, err))) {
    ut_err_prefix(err, "--arch");
    return MMT_ERR_INVALID_ARG;
  }
  if (!o->cache[0]) rc = ut_default_cubin_dir(o->cache, sizeof o->cache, err);
  return rc;
}

static bool selected(const options *o, int i) {
  return o->only_case >= 0 ? i == o->only_case : i % o->sample == 0;
}

/* ---- host data ----------------------------------------------------------------------------- */

/* One case's buffers.  host[i] is operand i's whole allocation as uploaded (offset elements,
 * then the extent); val[i] the values from its base as the kernel reads them (rounded to the
 * dtype), what the reference multiplies. */
typedef struct {
  int64_t rows[3], width[3], extent[3];
  size_t elem, count[3]; /* elements per allocation: offset + extent */
  unsigned char *host[3], *got;
  float *val[3], *c_out;
  double *want;
  CUdeviceptr dev[3];
} case_data;

static void put_elem(const char *dtype, size_t elem, unsigned char *p, size_t i, float v) {
  if (elem == 4) {
    memcpy(p + 4 * i, &v, 4);
    return;
  }
  uint16_t h = strcmp(dtype, "bf16") == 0 ? th_f32_to_bf16(v) : th_f32_to_f16(v);
  memcpy(p + 2 * i, &h, 2);
}

static float get_elem(const char *dtype, size_t elem, const unsigned char *p, size_t i) {
  float v;
  uint16_t h;
  if (elem == 4) {
    memcpy(&v, p + 4 * i, 4);
    return v;
  }
  memcpy(&h, p + 2 * i, 2);
  return strcmp(dtype, "bf16") == 0 ? th_bf16_to_f32(h) : th_f16_to_f32(h);
}

static void put_sentinel(size_t elem, unsigned char *p, size_t i) {
  const uint32_t s32 = SENTINEL32;
  const uint16_t s16 = SENTINEL16;
  memcpy(p + elem * i, elem == 4 ? (const void *)&s32 : (const void *)&s16, elem);
}

static bool is_sentinel(size_t elem, const unsigned char *p, size_t i) {
  const uint32_t s32 = SENTINEL32;
  const uint16_t s16 = SENTINEL16;
  return memcmp(p + elem * i, elem == 4 ? (const void *)&s32 : (const void *)&s16, elem) == 0;
}

/* Whether element e of C's allocation lies outside what the problem addresses: before the
 * base, or in a row's padding (columns width..ld-1 of every row but the last). */
static bool c_outside(const sw_case *c, const case_data *d, size_t e, int64_t *row, int64_t *col) {
  const int64_t off = c->offset[2];
  if ((int64_t)e < off) {
    *row = -1, *col = (int64_t)e - off;
    return true;
  }
  *row = ((int64_t)e - off) / c->ld[2], *col = ((int64_t)e - off) % c->ld[2];
  return *col >= d->width[2];
}

static void case_data_free(case_data *d) {
  for (int i = 0; i < 3; i++) {
    free(d->host[i]);
    free(d->val[i]);
  }
  free(d->got);
  free(d->c_out);
  free(d->want);
}

/* Fills the host buffers: A and B random non-zero in the dtype (offset elements included), C
 * NaN (beta == 0: it must not be read) or random, its padding and prefix the sentinel. */
static mmt_status fill_host(const sw_plan *plan, const sw_case *c, case_data *d, ut_err *err) {
  const char *dtype = plan->kernels[c->kernel].dtype;
  uint64_t seed = 0x5eedull * (uint64_t)(c - plan->cases + 1); /* the same data every run */
  sw_operand_shape(plan, c, d->rows, d->width, d->extent);
  d->elem = (size_t)gen_dtype_size(dtype);
  for (int i = 0; i < 3; i++) {
    const size_t off = (size_t)c->offset[i];
    d->count[i] = off + (size_t)d->extent[i];
    d->host[i] = malloc(d->count[i] * d->elem);
    d->val[i] = malloc(d->count[i] * sizeof(float));
    if (!d->host[i] || !d->val[i]) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
    tn_fill_random(d->val[i], d->count[i], &seed); /* the draws, then what the kernel reads */
    for (size_t e = 0; e < d->count[i]; e++) {
      int64_t row, col;
      if (i == 2 && c_outside(c, d, e, &row, &col)) {
        put_sentinel(d->elem, d->host[i], e);
        continue;
      }
      put_elem(dtype, d->elem, d->host[i], e, i == 2 && c->beta == 0.0f ? NAN : d->val[i][e]);
      d->val[i][e] = get_elem(dtype, d->elem, d->host[i], e);
    }
    memmove(d->val[i], d->val[i] + off, (size_t)d->extent[i] * sizeof(float)); /* from the base */
  }
  d->got = malloc(d->count[2] * d->elem);
  d->c_out = malloc((size_t)d->extent[2] * sizeof(float));
  d->want = malloc((size_t)(c->m * c->n) * sizeof(double));
  if (!d->got || !d->c_out || !d->want) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  return MMT_OK;
}

static int ref_threads(void) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  return cpus > 8 ? 8 : cpus > 0 ? (int)cpus : 1;
}

/* want = alpha * op(A) op(B) + beta * C0, in float64 from the rounded inputs (row stride n). */
static mmt_status reference(const sw_plan *plan, const sw_case *c, case_data *d, ut_err *err) {
  double *out = d->want;
  mmt_status rc = tn_ref_gemm_layout(plan->kernels[c->kernel].layout, c->m, c->n, c->k,
                                     d->val[0], c->ld[0], d->val[1], c->ld[1], out, c->n,
                                     ref_threads(), err);
  if (rc) return rc;
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t j = 0; j < c->n; j++) {
      double *x = &out[i * c->n + j];
      const double c0 = c->beta != 0.0f ? (double)c->beta * d->val[2][i * c->ld[2] + j] : 0.0;
      *x = (double)c->alpha * *x + c0;
    }
  return MMT_OK;
}

/* ---- checks -------------------------------------------------------------------------------- */

/* The sentinels outside C's rows (its row padding, the elements before its base) are
 * untouched; also converts the downloaded C to floats for check_values. */
static verdict check_sentinels(const sw_plan *plan, const sw_case *c, case_data *d, char *why,
                               size_t whylen) {
  const char *dtype = plan->kernels[c->kernel].dtype;
  int64_t written = 0, first_row = 0, first_col = 0;
  for (size_t e = 0; e < d->count[2]; e++) {
    int64_t row, col;
    if (c_outside(c, d, e, &row, &col) && !is_sentinel(d->elem, d->got, e) && written++ == 0)
      first_row = row, first_col = col;
    if (e >= (size_t)c->offset[2])
      d->c_out[e - (size_t)c->offset[2]] = get_elem(dtype, d->elem, d->got, e);
  }
  if (!written) return CASE_PASS;
  snprintf(why, whylen, "%lld elements outside C's rows written (first: %s %lld, column %lld)",
           (long long)written, first_row < 0 ? "before the base, element" : "row",
           (long long)(first_row < 0 ? first_col : first_row), (long long)first_col);
  return CASE_FAIL;
}

/* C matches the reference within the dtype's tolerance (tn_compare, as the tuner verifies). */
static verdict check_values(const sw_plan *plan, const sw_case *c, case_data *d, char *why,
                            size_t whylen) {
  const char *dtype = plan->kernels[c->kernel].dtype;
  tn_check chk;
  double rel_tol = 0, max_tol = 0;
  tn_tolerance(dtype, &rel_tol, &max_tol);
  tn_compare(c->m, c->n, d->c_out, c->ld[2], d->want, c->n, dtype, &chk);
  if (chk.pass) return CASE_PASS;
  if (chk.bad_count) {
    snprintf(why, whylen, "wrong C: %lld NaN/Inf elements (first at row %lld, column %lld)",
             (long long)chk.bad_count, (long long)chk.bad_row, (long long)chk.bad_col);
    return CASE_FAIL;
  }
  /* where it is worst: a tail or an edge tile points at the guilty index */
  int64_t wi = 0, wj = 0;
  for (int64_t i = 0; i < c->m; i++)
    for (int64_t j = 0; j < c->n; j++)
      if (fabs(d->c_out[i * c->ld[2] + j] - d->want[i * c->n + j]) >
          fabs(d->c_out[wi * c->ld[2] + wj] - d->want[wi * c->n + wj]))
        wi = i, wj = j;
  snprintf(why, whylen,
           "wrong C: rel_err %.3g (tol %.0e), max_err %.3g (tol %.0e), worst at row %lld, "
           "column %lld: %.6g, want %.6g",
           chk.rel_err, rel_tol, chk.max_err, max_tol, (long long)wi, (long long)wj,
           (double)d->c_out[wi * c->ld[2] + wj], d->want[wi * c->n + wj]);
  return CASE_FAIL;
}

/* ---- one case on the GPU ------------------------------------------------------------------- */

/* Allocates each operand exactly (offset + extent elements: memcheck flags the first byte
 * past it), uploads, launches, synchronizes and downloads C.  Every driver call is checked.
 * After a failure, *dead says whether the context is lost (a sticky error: illegal address,
 * launch failure), in which case nothing is freed: every later call would fail too, and each
 * would be one more error in the sanitizer's log. */
static mmt_status launch_case(const rt_cu *cu, const rt_kernel *k, const sw_case *c,
                              case_data *d, bool *dead, ut_err *err) {
  mmt_status rc = MMT_OK;
  for (int i = 0; i < 3; i++) {
    RT_CU_CHECK(cu, cuMemAlloc(&d->dev[i], d->count[i] * d->elem));
    RT_CU_CHECK(cu, cuMemcpyHtoD(d->dev[i], d->host[i], d->count[i] * d->elem));
  }
  const rt_gemm_args args = {.m = c->m,
                             .n = c->n,
                             .k = c->k,
                             .alpha = c->alpha,
                             .beta = c->beta,
                             .a = d->dev[0] + (CUdeviceptr)(c->offset[0] * (int64_t)d->elem),
                             .b = d->dev[1] + (CUdeviceptr)(c->offset[1] * (int64_t)d->elem),
                             .c = d->dev[2] + (CUdeviceptr)(c->offset[2] * (int64_t)d->elem),
                             .lda = c->ld[0],
                             .ldb = c->ld[1],
                             .ldc = c->ld[2]};
  if ((rc = rt_kernel_launch(k, &args, NULL, err))) goto cleanup;
  RT_CU_CHECK(cu, cuCtxSynchronize());
  RT_CU_CHECK(cu, cuMemcpyDtoH(d->got, d->dev[2], d->count[2] * d->elem));
cleanup:
  *dead = rc && cu->cuCtxSynchronize() != CUDA_SUCCESS;
  for (int i = 0; i < 3 && !*dead; i++) {
    CUresult r = d->dev[i] ? cu->cuMemFree(d->dev[i]) : CUDA_SUCCESS;
    if (!rc && r != CUDA_SUCCESS) rc = rt_cu_fail(err, "cuMemFree", r);
    d->dev[i] = 0;
  }
  return rc;
}

static verdict run_case(sweep *s, const rt_kernel *k, int i, char *why, size_t whylen) {
  const sw_case *c = &s->plan->cases[i];
  case_data d;
  ut_err err = {{0}};
  verdict v = CASE_FAIL;
  memset(&d, 0, sizeof d);
  if (s->plan->kernels[c->kernel].has_op) { /* an op twin: its own buffers and reference */
    bool pass = false;
    if (sw_run_op_case(s->cu, k, s->plan, i, &pass, &s->dead, why, whylen)) return CASE_FAIL;
    return pass ? CASE_PASS : CASE_FAIL;
  }
  if (fill_host(s->plan, c, &d, &err) || reference(s->plan, c, &d, &err)) {
    snprintf(why, whylen, "host: %s", err.msg);
    goto cleanup;
  }
  if (launch_case(s->cu, k, c, &d, &s->dead, &err)) {
    snprintf(why, whylen, "%s", err.msg);
    goto cleanup;
  }
  v = check_sentinels(s->plan, c, &d, why, whylen);
  if (v == CASE_PASS) v = check_values(s->plan, c, &d, why, whylen);
cleanup:
  case_data_free(&d);
  return v;
}

/* ---- kernels ------------------------------------------------------------------------------- */

static void describe_kernel(const sweep *s, int kidx, char *out, size_t outlen) {
  const sw_kernel *k = &s->plan->kernels[kidx];
  char cfg[512];
  if (gen_config_format(s->templates[k->tmpl], &k->cfg, cfg, sizeof cfg, NULL))
    ut_copy(cfg, 4, "?");
  snprintf(out, outlen, "%s %s %s %s", gen_name(s->templates[k->tmpl]), k->dtype, k->layout, cfg);
}

/* Every selected case of kernel kidx fails with `why`, or is skipped (skip). */
static void all_cases(sweep *s, int kidx, bool skip, const char *why) {
  char line[1024], text[768];
  int n = 0;
  for (int i = 0; i < s->plan->ncases; i++) {
    if (s->plan->cases[i].kernel != kidx || !selected(s->o, i)) continue;
    n++;
    if (skip) continue;
    sw_case_format(s->plan, s->templates, i, line, sizeof line);
    printf("FAIL %s: %s\n", line, why);
    s->failed[s->plan->kernels[kidx].tmpl]++, s->run[s->plan->kernels[kidx].tmpl]++;
    s->nfailed++;
  }
  if (!skip) return;
  describe_kernel(s, kidx, text, sizeof text);
  printf("skip %s: %s (%d cases)\n", text, why, n);
  s->skipped[s->plan->kernels[kidx].tmpl] += n;
}

/* Loads the compiled kernel and runs its selected cases. */
static void run_kernel(sweep *s, int kidx, tn_pool_result *res) {
  const sw_kernel *sk = &s->plan->kernels[kidx];
  rt_kernel k;
  ut_err err = {{0}};
  char why[1200], line[1024];
  memset(&k, 0, sizeof k);
  if (res->rc) { /* not for this device (sm_90a elsewhere): a note; else a compile failure */
    all_cases(s, kidx, res->rc == MMT_ERR_UNSUPPORTED, res->error);
    return;
  }
  mmt_status rc = rt_kernel_load(&s->dev, &res->cubin, &sk->spec, &k, &err);
  if (rc) { /* unsupported: more shared memory or threads than this device has */
    all_cases(s, kidx, rc == MMT_ERR_UNSUPPORTED, err.msg);
    return;
  }
  for (int i = 0; i < s->plan->ncases && !s->dead; i++) {
    if (s->plan->cases[i].kernel != kidx || !selected(s->o, i)) continue;
    sw_case_format(s->plan, s->templates, i, line, sizeof line);
    if (s->o->verbose) printf("run %s\n", line);
    fflush(stdout); /* a hang or a crash shows how far the sweep got */
    s->run[sk->tmpl]++;
    if (run_case(s, &k, i, why, sizeof why) == CASE_PASS) {
      s->passed++;
      continue;
    }
    printf("FAIL %s: %s\n", line, why);
    s->failed[sk->tmpl]++, s->nfailed++;
    if (s->dead) printf("mmtune-sweep: the CUDA context is lost after case #%d: stopping\n", i);
  }
  if (!s->dead) rt_kernel_unload(&k); /* a lost context refuses it (one more sanitizer error) */
}

static int default_jobs(const options *o) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (o->jobs > 0) return o->jobs;
  return cpus > 16 ? 16 : cpus > 0 ? (int)cpus : 1;
}

/* Queues the kernels that have a selected case; returns how many. */
static mmt_status submit_kernels(const sweep *s, tn_pool *pool, int *count, ut_err *err) {
  mmt_status rc = MMT_OK;
  *count = 0;
  for (int kidx = 0, i = 0; kidx < s->plan->nkernels; kidx++) {
    bool any = false;
    for (; i < s->plan->ncases && s->plan->cases[i].kernel == kidx; i++)
      any = any || selected(s->o, i);
    if (!any) continue;
    const gen_kernel *spec = &s->plan->kernels[kidx].spec;
    if ((rc = tn_pool_submit(pool, spec->source, spec->kernel_name, spec->arch,
                             (void *)(intptr_t)kidx, err)))
      return rc;
    ++*count;
  }
  return MMT_OK;
}

/* ---- modes --------------------------------------------------------------------------------- */

static int print_list(const sweep *s) {
  char line[1024];
  double macs = 0;
  for (int i = 0; i < s->plan->ncases; i++) {
    const sw_case *c = &s->plan->cases[i];
    sw_case_format(s->plan, s->templates, i, line, sizeof line);
    puts(line);
    macs += (double)c->m * (double)c->n * (double)c->k;
  }
  for (int i = 0; i < s->plan->nskips; i++) {
    const sw_skip *k = &s->plan->skips[i];
    printf("skip %s %s %s %s: %s\n", gen_name(s->templates[k->tmpl]), k->dtype, k->layout, k->what,
           k->why);
  }
  printf("%d cases, %d kernels, %.3g multiply-adds, seed %llu\n", s->plan->ncases,
         s->plan->nkernels, macs, (unsigned long long)s->o->plan.seed);
  return 0;
}

static int compile_only(const sweep *s) {
  tn_pool *pool = NULL;
  ut_err err = {{0}};
  int submitted = 0, hits = 0, failed = 0, unsupported = 0;
  const double t0 = ut_now_seconds();
  char text[768];
  if (tn_pool_start(default_jobs(s->o), s->o->arch, s->o->cache, &pool, &err) ||
      submit_kernels(s, pool, &submitted, &err)) {
    fprintf(stderr, "mmtune-sweep: %s\n", err.msg);
    tn_pool_free(pool);
    return 1;
  }
  tn_pool_result res;
  while (tn_pool_next(pool, &res)) {
    describe_kernel(s, (int)(intptr_t)res.tag, text, sizeof text);
    if (res.rc == MMT_ERR_UNSUPPORTED) unsupported++;
    else if (res.rc) printf("compile FAIL %s: %s\n", text, res.error), failed++;
    hits += res.rc == MMT_OK && res.cache_hit;
    if (s->o->verbose)
      printf("compiled %s%s in %.2f s\n", text, res.cache_hit ? " (cache)" : "", res.seconds);
    rt_cubin_free(&res.cubin);
  }
  tn_pool_free(pool);
  printf("compiled %d kernels for %s in %.1f s into %s: %d from the cache, %d not for %s, "
         "%d failed\n",
         submitted - unsupported, s->o->arch, ut_now_seconds() - t0, s->o->cache, hits,
         unsupported, s->o->arch, failed);
  return failed ? 1 : 0;
}

static void print_summary(const sweep *s) {
  for (int t = 0; t < s->o->ntemplates; t++)
    printf("%-12s %5d cases run, %d failed, %d skipped\n", gen_name(s->templates[t]), s->run[t],
           s->failed[t], s->skipped[t]);
  printf("%d passed, %d failed\n", s->passed, s->nfailed);
}

static int run_gpu(sweep *s) {
  ut_err err = {{0}};
  tn_pool *pool = NULL;
  int submitted = 0;
  /* No driver, a driver that cannot start (the toolkit's stub), no device or not this one. */
  mmt_status rc = rt_driver(&s->cu, &err);
  if (!rc) rc = rt_device_open(s->o->device, &s->dev, &err);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE || (rc == MMT_ERR_CUDA && !s->cu)) {
    printf("mmtune-sweep: no GPU: %s\n", err.msg);
    return EXIT_NO_GPU;
  }
  if (rc) goto cleanup;
  printf("mmtune-sweep: %d cases, %d kernels on %s (%s), seed %llu, cache %s\n",
         s->plan->ncases, s->plan->nkernels, s->dev.info.name, s->dev.arch,
         (unsigned long long)s->o->plan.seed, s->o->cache);
  const double t0 = ut_now_seconds();
  if ((rc = tn_pool_start(default_jobs(s->o), s->dev.arch, s->o->cache, &pool, &err)) ||
      (rc = submit_kernels(s, pool, &submitted, &err)))
    goto cleanup;
  tn_pool_result res;
  while (!s->dead && tn_pool_next(pool, &res)) {
    run_kernel(s, (int)(intptr_t)res.tag, &res);
    rt_cubin_free(&res.cubin);
  }
  printf("%d kernels in %.1f s\n", submitted, ut_now_seconds() - t0);
cleanup:
  tn_pool_free(pool);
  if (rc) {
    printf("mmtune-sweep: %s\n", err.msg);
    s->nfailed++;
  }
  if (!s->dead) rt_device_close(&s->dev); /* the process exits: the driver reclaims it */
  print_summary(s);
  return s->nfailed ? 1 : 0;
}

/* ---- main ---------------------------------------------------------------------------------- */

static mmt_status load_templates(const options *o, gen_template **templates, ut_err *err) {
  for (int i = 0; i < o->ntemplates; i++) {
    mmt_status rc = gen_load_named(o->names[i], &templates[i], err);
    if (rc) {
      ut_err_prefix(err, "--templates: %s", o->names[i]);
      return rc;
    }
  }
  return MMT_OK;
}

int main(int argc, char **argv) {
  options o = {.plan = {.configs = 3, .problems = 2, .seed = 1}, .arch = "sm_90", .sample = 1,
               .only_case = -1};
  sw_plan plan = {0};
  sweep s = {.plan = &plan, .o = &o};
  gen_template **templates = NULL;
  ut_err err = {{0}};
  bool help = false;
  int code = 2; /* until the arguments (templates and --case included) are known good */
  mmt_status rc = parse_args(argc, argv, &o, &help, &err);
  if (rc || help) {
    if (help) usage(stdout), code = 0;
    goto cleanup;
  }
  templates = calloc((size_t)o.ntemplates, sizeof *templates);
  s.run = calloc((size_t)o.ntemplates * 3, sizeof *s.run);
  if (!templates || !s.run) {
    rc = ut_fail(&err, MMT_ERR_NOMEM, "out of memory");
    goto cleanup;
  }
  s.failed = s.run + o.ntemplates, s.skipped = s.run + 2 * o.ntemplates;
  s.templates = templates;
  if ((rc = load_templates(&o, templates, &err))) {
    if (rc != MMT_ERR_NOT_FOUND && rc != MMT_ERR_INVALID_ARG) code = 1; /* a broken template */
    goto cleanup;
  }
  if ((rc = sw_plan_build(templates, o.ntemplates, &o.plan, &plan, &err))) {
    code = 1;
    goto cleanup;
  }
  if (o.only_case >= plan.ncases) {
    rc = ut_fail(&err, MMT_ERR_INVALID_ARG, "--case %lld: the plan has %d cases",
                 (long long)o.only_case, plan.ncases);
    goto cleanup;
  }
  code = o.list ? print_list(&s) : o.compile_only ? compile_only(&s) : run_gpu(&s);
cleanup:
  if (rc) fprintf(stderr, "mmtune-sweep: %s\n", err.msg);
  sw_plan_free(&plan);
  for (int i = 0; templates && i < o.ntemplates; i++) gen_free(templates[i]);
  free(templates);
  free(s.run);
  tn_list_free(o.names, o.ntemplates);
  return code;
}
