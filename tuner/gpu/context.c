/*
 * gpu/context.c -- the device context a measurement runs in (gpu/measure.h): opening the
 * device and loading the helper kernels (gpu/helper_kernels.h), the problem's device buffers
 * and the input copies timing rotates over, and closing.
 */
#include "gpu/measure_int.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/helper_kernels.h"
#include "gpu/ref.h"

const rt_device *tn_gpu_device(const tn_gpu *g) { return &g->dev; }

const char *tn_gpu_guard_note(const tn_gpu *g) { return g->gran ? NULL : g->guard_note; }

static mmt_status load_helpers(tn_gpu *g, const char *cache_dir, ut_err *err) {
  mmt_status rc = MMT_OK;
  rt_cubin cubin = {0};
  char *source = tn_gpu_helpers_source();
  if (!source) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  if ((rc = rt_compile_cached(cache_dir, source, "mmtune_helpers", g->dev.arch, &cubin, NULL, NULL,
                              err)))
    goto cleanup;
  const rt_cu *cu = g->cu;
  RT_CU_CHECK(cu, cuModuleLoadData(&g->helpers, cubin.data));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->fill_fn, g->helpers, "mmt_fill_uniform"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->widen_fn, g->helpers, "mmt_widen_16"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->widen8_fn, g->helpers, "mmt_widen_8"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->block_scale_fn, g->helpers, "mmt_block_scale"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->ref_fn, g->helpers, TN_REF_GPU_KERNEL));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->check_fn, g->helpers, "mmt_check_f32"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->read_fn, g->helpers, "mmt_read_bytes"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->epi_ref_fn, g->helpers, "mmt_epilogue_f64"));
  RT_CU_CHECK(cu, cuModuleGetFunction(&g->swiglu_fn, g->helpers, "mmt_swiglu_16"));
  RT_CU_CHECK(cu, cuMemAlloc(&g->stats, sizeof(check_stats)));
cleanup:
  rt_cubin_free(&cubin);
  free(source);
  return rc;
}

mmt_status tn_gpu_open(int ordinal, const char *cache_dir, tn_gpu **out, ut_err *err) {
  mmt_status rc = MMT_OK;
  *out = NULL;
  tn_gpu *g = calloc(1, sizeof *g);
  if (!g) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  if ((rc = rt_device_open(ordinal, &g->dev, err))) goto cleanup;
  if ((rc = rt_driver(&g->cu, err))) goto cleanup;
  const rt_cu *cu = g->cu;
  RT_CU_CHECK(cu,
              cuDeviceGetAttribute(&g->l2_bytes, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, g->dev.dev));
  RT_CU_CHECK(cu, cuDeviceGetAttribute(&g->limits.regs_per_block,
                                       CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, g->dev.dev));
  g->limits.shared_per_block = g->dev.max_shared_optin;
  for (int i = 0; i <= TIME_BATCH; i++) RT_CU_CHECK(cu, cuEventCreate(&g->ev[i], CU_EVENT_DEFAULT));
  if ((rc = load_helpers(g, cache_dir, err))) goto cleanup;
  ut_err guard_err = {{0}};
  mmt_status grc = tn_guard_probe(cu, g->dev.dev, &g->gran, &guard_err);
  if (grc == MMT_ERR_UNSUPPORTED) {
    g->gran = 0;
    ut_copy(g->guard_note, sizeof g->guard_note, "verification without guard pages: ");
    size_t used = strlen(g->guard_note);
    ut_copy(g->guard_note + used, sizeof g->guard_note - used, guard_err.msg);
  } else if (grc) {
    rc = ut_fail(err, grc, "%s", guard_err.msg);
    goto cleanup;
  }
  *out = g;
  g = NULL;
cleanup:
  tn_gpu_close(g);
  return rc;
}

static void free_device_buffers(tn_gpu *g) {
  if (g->a) g->cu->cuMemFree(g->a);
  if (g->ref) g->cu->cuMemFree(g->ref);
  if (g->wa) g->cu->cuMemFree(g->wa);
  if (g->vec) g->cu->cuMemFree(g->vec);
  if (g->routings) g->cu->cuMemFree(g->routings);
  g->routings = g->group_error = 0;
  g->routings_cap = 0;
  g->a = g->b = g->c = g->ref = g->wa = g->wb = g->wc = g->vec = 0;
  g->cap_bytes = g->ref_cap_bytes = g->wide_cap_bytes = g->vec_cap = 0;
}

int64_t tn_measure_out_cols(const tn_measure_opts *o) {
  gen_op op;
  ut_err e;
  if (!o->op[0] || gen_op_parse(o->op, o->dtype, &op, &e) != MMT_OK || !op.gated) return o->n;
  return o->n / 2;
}

mmt_status tn_gpu_host_reserve(void **buf, size_t *cap, size_t bytes, ut_err *err) {
  if (*cap >= bytes) return MMT_OK;
  void *p = realloc(*buf, bytes);
  if (!p) return ut_fail(err, MMT_ERR_NOMEM, "out of host memory (%zu bytes)", bytes);
  *buf = p;
  *cap = bytes;
  return MMT_OK;
}

/* Grows a device buffer to at least `bytes` (its contents not kept). */
static mmt_status device_reserve(const tn_gpu *g, CUdeviceptr *buf, size_t *cap, size_t bytes,
                                 ut_err *err) {
  mmt_status rc = MMT_OK;
  if (*cap >= bytes) return MMT_OK;
  if (*buf) g->cu->cuMemFree(*buf);
  *buf = 0;
  *cap = 0;
  RT_CU_CHECK(g->cu, cuMemAlloc(buf, bytes));
  *cap = bytes;
cleanup:
  return rc;
}

/* The op and batch of o's problem into g (none: the plain GEMM, batch 1). */
static mmt_status set_op(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  g->has_op = o->op[0] != '\0';
  g->batch = o->batch > 1 ? o->batch : 1;
  g->out_elem = g->elem;
  g->out_bf16 = g->bf16;
  g->out_e5m2 = 0;
  g->n_out = o->n;
  memset(&g->op, 0, sizeof g->op);
  if (!g->has_op && gen_dtype_fp8(o->dtype))
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "%s inputs need an op (D is f32, f16 or bf16: there is no plain FP8 GEMM)",
                   o->dtype);
  if (!g->has_op) {
    if (g->batch > 1)
      return ut_fail(err, MMT_ERR_INVALID_ARG,
                     "a batch of %lld without an op: the plain GEMM "
                     "runs one problem",
                     (long long)g->batch);
    return MMT_OK;
  }
  mmt_status rc = gen_op_parse(o->op, o->dtype, &g->op, err);
  if (rc) return rc;
  if (!gen_op_valid(&g->op, o->dtype))
    return ut_fail(err, MMT_ERR_INVALID_ARG, "op '%s' is not one for %s inputs", o->op, o->dtype);
  if (g->op.gated && o->n % 2)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "a gated op needs an even N, got %lld",
                   (long long)o->n);
  g->out_elem = gen_dtype_size(g->op.out);
  g->out_bf16 = strcmp(g->op.out, "bf16") == 0;
  g->out_e5m2 = strcmp(g->op.out, "e5m2") == 0;
  g->n_out = g->op.gated ? o->n / 2 : o->n;
  return MMT_OK;
}

int64_t tn_gpu_planes(const tn_gpu *g) { return tn_gpu_grouped(g) ? 1 : g->batch; }

/* The floats of a by-column vector: N, a grouped op's experts one each. */
static size_t column_len(const tn_gpu *g, const tn_measure_opts *o) {
  return (size_t)o->n * (size_t)(tn_gpu_routed(g) ? g->batch : 1);
}

/* The floats of a by-row vector: M, a masked op's G blocks of M (A's rows as stored). */
static size_t row_len(const tn_gpu *g, const tn_measure_opts *o) {
  return (size_t)o->m * (size_t)(tn_gpu_masked(g) ? g->batch : 1);
}

size_t tn_gpu_scale_len(const tn_gpu *g, const tn_measure_opts *o, int side) {
  const size_t kb = (size_t)(o->k + 127) / 128, nb = (size_t)(o->n + 127) / 128;
  if (g->op.scale_block) return side ? nb * kb : kb * (size_t)o->m;
  if (g->op.scale_tensor) /* A's one float; B's one a weight (a grouped op's experts') */
    return side && tn_gpu_routed(g) ? (size_t)g->batch : 1;
  return side ? column_len(g, o) : row_len(g, o);
}

size_t tn_gpu_bias_len(const tn_gpu *g, const tn_measure_opts *o) {
  return g->op.bias == 'r' ? row_len(g, o) : column_len(g, o);
}

size_t tn_gpu_vector_len(const tn_gpu *g, const tn_measure_opts *o) {
  size_t len = row_len(g, o) > column_len(g, o) ? row_len(g, o) : column_len(g, o);
  for (int side = 0; side < 2; side++)
    if (tn_gpu_scale_len(g, o, side) > len) len = tn_gpu_scale_len(g, o, side);
  return len;
}

/* The op's vectors (bias, scale_row, scale_col) and their float copies, allocated once for
 * the problem (each as long as the longest: tn_gpu_vector_len). */
static mmt_status reserve_vectors(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  g->bias = g->scale_row = g->scale_col = g->vec_wide = 0;
  if (!g->has_op) return MMT_OK;
  const size_t len = tn_gpu_vector_len(g, o);
  /* three vectors and their floats, then an FP8 D's scale and amax */
  const size_t bytes = 4 * tn_round_up(len, 64) * 6 + 256;
  if ((rc = device_reserve(g, &g->vec, &g->vec_cap, bytes, err))) return rc;
  const size_t step = 4 * tn_round_up(len, 64);
  g->bias = g->vec;
  g->scale_row = g->vec + step;
  g->scale_col = g->vec + 2 * step;
  g->vec_wide = g->vec + 3 * step;
  g->d_scale = g->d_amax = 0;
  if (gen_dtype_fp8(g->op.out)) { /* D stored as is (scale 1): the check reads its values */
    const float one = 1.0f;
    g->d_scale = g->vec + 6 * step;
    g->d_amax = g->d_scale + 128;
    RT_CU_CHECK(g->cu, cuMemcpyHtoD(g->d_scale, &one, sizeof one));
  }
  g->use_bias = g->bias, g->use_scale_row = g->scale_row, g->use_scale_col = g->scale_col;
  /* verification's copies flush against unmapped memory: the vectors' exact lengths */
  const size_t bias_bytes =
      tn_gpu_bias_len(g, o) * (size_t)(g->op.bias_f32 || g->out_elem == 4 ? 4 : 2);
  const size_t bytes_of[3] = {bias_bytes, 4 * tn_gpu_scale_len(g, o, 0),
                              4 * tn_gpu_scale_len(g, o, 1)};
  for (int i = 0; g->gran && i < 3; i++)
    if ((rc = tn_guard_reserve(g->cu, g->dev.dev, g->gran, &g->guard[3 + i], bytes_of[i], err)))
      return rc;
cleanup:
  return rc;
}

/* Routing r (0 .. TN_ROUTINGS - 1) of `rows` rows over the g experts of o's problem into
 * counts, drawn from the problem's shape so that every candidate is timed over the same ones;
 * routing 0, the one verified, sparse, so that some experts are empty.  cdf: g doubles. */
static void draw_routing(const tn_measure_opts *o, int64_t g, int64_t rows, int r, double *cdf,
                         int *counts) {
  const tn_route_kind kind = (tn_route_kind)((r + TN_ROUTE_SPARSE) % TN_ROUTE_KINDS);
  const uint64_t seed = (uint64_t)rows * 1000003u + (uint64_t)o->n * 8191u + (uint64_t)o->k * 131u +
                        (uint64_t)g * 7u + (uint64_t)r;
  tn_route(kind, g, rows, seed, cdf, counts);
}

/* The TN_ROUTINGS routings of `rows` rows over g experts: counts[r * g + z]. */
static mmt_status draw_routings(const tn_measure_opts *o, int64_t g, int64_t rows, int **counts,
                                ut_err *err) {
  double *cdf = malloc((size_t)g * sizeof *cdf);
  *counts = malloc((size_t)TN_ROUTINGS * (size_t)g * sizeof **counts);
  if (!cdf || !*counts) {
    free(cdf);
    free(*counts);
    *counts = NULL;
    return ut_fail(err, MMT_ERR_NOMEM, "out of host memory drawing routings");
  }
  for (int r = 0; r < TN_ROUTINGS; r++) draw_routing(o, g, rows, r, cdf, *counts + (size_t)r * g);
  free(cdf);
  return MMT_OK;
}

mmt_status tn_gpu_masked_blocks(tn_gpu *g, tn_measure_opts *o, ut_err *err) {
  gen_op op;
  g->routed_rows = 0;
  if (!o->op[0] || gen_op_parse(o->op, o->dtype, &op, err) || op.group != 'm')
    return MMT_OK; /* not masked (a bad op: set_op says so) */
  const int64_t experts = o->batch > 1 ? o->batch : 1;
  if (o->m > INT32_MAX / experts)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "a masked problem of %lld experts of %lld rows: more than 2^31 rows in all",
                   (long long)experts, (long long)o->m);
  int *counts;
  mmt_status rc = draw_routings(o, experts, experts * o->m, &counts, err);
  if (rc) return rc;
  int most = 1;
  for (size_t i = 0; i < (size_t)TN_ROUTINGS * (size_t)experts; i++)
    if (counts[i] > most) most = counts[i];
  free(counts);
  g->routed_rows = experts * o->m;
  o->m = most;
  return MMT_OK;
}

/* A grouped problem's routings (tn_gpu's `routings`): contiguous, of its M rows, as offsets;
 * masked, of its routed_rows, as counts and their sum; then the error word (zero). */
static mmt_status reserve_routings(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  const size_t per = (size_t)g->batch + 1, count = TN_ROUTINGS * per;
  const size_t bytes = tn_round_up(4 * count, 256) + 256;
  const bool masked = tn_gpu_masked(g);
  int *counts = NULL;
  if ((rc = draw_routings(o, g->batch, masked ? g->routed_rows : o->m, &counts, err))) return rc;
  if ((rc = tn_gpu_host_reserve((void **)&g->host_offsets, &g->host_offsets_cap,
                                count * sizeof *g->host_offsets, err)))
    goto cleanup;
  for (int r = 0; r < TN_ROUTINGS; r++) {
    const int *c = counts + (size_t)r * (size_t)g->batch;
    int32_t *out = g->host_offsets + (size_t)r * per;
    if (!masked) {
      tn_route_offsets(g->batch, c, out);
      continue;
    }
    out[g->batch] = 0;
    for (int64_t z = 0; z < g->batch; z++) out[g->batch] += out[z] = c[z];
  }
  if ((rc = device_reserve(g, &g->routings, &g->routings_cap, bytes, err))) goto cleanup;
  g->group_error = g->routings + tn_round_up(4 * count, 256);
  g->routing = 0;
  RT_CU_CHECK(g->cu, cuMemcpyHtoD(g->routings, g->host_offsets, 4 * count));
  RT_CU_CHECK(g->cu, cuMemsetD32(g->group_error, 0, 1));
cleanup:
  free(counts);
  return rc;
}

size_t tn_gpu_timed_copies(const tn_gpu *g, size_t set_bytes, bool cold) {
  if (cold) return ((size_t)COLD_L2_COVER * (size_t)g->l2_bytes + set_bytes - 1) / set_bytes + 1;
  size_t want = ((size_t)L2_COVER * (size_t)g->l2_bytes + set_bytes - 1) / set_bytes;
  return want < 1 ? 1 : want > MAX_COPIES ? MAX_COPIES : want;
}

void tn_gpu_close(tn_gpu *g) {
  if (!g) return;
  if (g->cu && g->dev.ctx) {
    g->cu->cuCtxSetCurrent(g->dev.ctx);
    free_device_buffers(g);
    for (int i = 0; i < (int)(sizeof g->guard / sizeof g->guard[0]); i++)
      tn_guard_free(g->cu, &g->guard[i]);
    for (int i = 0; i <= TIME_BATCH; i++)
      if (g->ev[i]) g->cu->cuEventDestroy(g->ev[i]);
    if (g->helpers) g->cu->cuModuleUnload(g->helpers);
    if (g->stats) g->cu->cuMemFree(g->stats);
    if (g->read_buf) g->cu->cuMemFree(g->read_buf);
  }
  rt_device_close(&g->dev);
  free(g->host_a);
  free(g->host_b);
  free(g->host_ref);
  free(g->host_offsets);
  free(g);
}

mmt_status tn_gpu_reserve_problem(tn_gpu *g, const tn_measure_opts *o, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = g->cu;
  /* Each copy starts 256-byte aligned, like a cudaMalloc'd buffer, as the tuner assumes. */
  int64_t rows[3], width[3]; /* as stored */
  gen_stored_rows(o->layout, o->m, o->n, o->k, rows);
  gen_min_ld(o->layout, o->m, o->n, o->k, width);
  g->a_elems = tn_round_up((size_t)rows[0] * (size_t)o->lda, 64);
  g->b_elems = tn_round_up((size_t)rows[1] * (size_t)o->ldb, 64);
  g->c_elems = tn_round_up((size_t)rows[2] * (size_t)o->ldc, 64);
  g->a_extent = (size_t)((rows[0] - 1) * o->lda + width[0]);
  g->b_extent = (size_t)((rows[1] - 1) * o->ldb + width[1]);
  g->c_extent = (size_t)((rows[2] - 1) * o->ldc + width[2]);
  g->elem = gen_dtype_size(o->dtype);
  g->bf16 = strcmp(o->dtype, "bf16") == 0;
  g->e5m2 = strcmp(o->dtype, "e5m2") == 0;
  if (!tn_measure_supports(o->dtype))
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "measuring dtype %s is not supported", o->dtype);
  if ((rc = set_op(g, o, err))) return rc;
  g->b_e5m2 = g->e5m2 ^ (g->has_op && g->op.mixed_fp8);
  /* D (in C's place): n_out columns of the op's type.  A batch: each operand's problems one
   * after another within a copy, a_stride ... apart. */
  g->c_elems = tn_round_up((size_t)rows[2] * (size_t)o->ldc, 64);
  g->c_extent = (size_t)((rows[2] - 1) * o->ldc + g->n_out);
  g->a_stride = g->a_elems, g->b_stride = g->b_elems, g->c_stride = g->c_elems;
  const size_t nb = (size_t)g->batch;
  g->b_extent += (nb - 1) * g->b_stride;
  g->b_elems *= nb;
  if (tn_gpu_grouped(g)) { /* one A and D: the experts' rows */
    g->a_stride = g->c_stride = 0;
  } else {
    g->a_extent += (nb - 1) * g->a_stride;
    g->c_extent += (nb - 1) * g->c_stride;
    g->a_elems *= nb, g->c_elems *= nb;
  }
  /* The tuner's buffers start 256-byte aligned: the pitches decide (gen_packed_problem). */
  uint64_t pitches[] = {256, (uint64_t)(o->lda * g->elem), (uint64_t)(o->ldb * g->elem),
                        (uint64_t)(o->ldc * g->out_elem)};
  g->align = (unsigned)gen_align_bytes(pitches, 4);
  const size_t extents[3] = {g->a_extent * (size_t)g->elem, g->b_extent * (size_t)g->elem,
                             g->c_extent * (size_t)g->out_elem};
  for (int i = 0; g->gran && i < 3; i++)
    if ((rc = tn_guard_reserve(cu, g->dev.dev, g->gran, &g->guard[i], extents[i], err))) return rc;
  const bool residual = g->has_op && g->op.residual;
  if (residual && g->gran &&
      (rc = tn_guard_reserve(cu, g->dev.dev, g->gran, &g->guard[6], extents[2], err)))
    return rc;
  /* a residual's C beside D: twice C's bytes a set */
  size_t set_bytes = (size_t)g->elem * (g->a_elems + g->b_elems) +
                     (size_t)g->out_elem * g->c_elems * (residual ? 2 : 1);
  /* Cold: one copy more for the untimed runs. */
  const size_t want = tn_gpu_timed_copies(g, set_bytes, o->cold) + (o->cold ? 1 : 0);
  if (o->cold && want > MAX_COLD_COPIES)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "--cold: the problem is too small to rotate over twice the L2 (%zu copies)",
                   want);
  g->copies = (int)want;
  size_t bytes = set_bytes * (size_t)g->copies;
  /* the reference lives on the device: the products, then (an op) D's */
  size_t ref_bytes =
      8 * (size_t)tn_gpu_planes(g) * (size_t)o->m * (size_t)(o->n + (g->has_op ? g->n_out : 0));
  if (bytes > g->cap_bytes || ref_bytes > g->ref_cap_bytes) {
    free_device_buffers(g);
    RT_CU_CHECK(cu, cuMemAlloc(&g->a, bytes));
    g->cap_bytes = bytes;
    RT_CU_CHECK(cu, cuMemAlloc(&g->ref, ref_bytes));
    g->ref_cap_bytes = ref_bytes;
  }
  /* Layout: all A copies, then all B copies, then all C copies. */
  g->b = g->a + (size_t)g->elem * g->a_elems * (size_t)g->copies;
  g->c = g->b + (size_t)g->elem * g->b_elems * (size_t)g->copies;
  g->c_in = residual ? g->c + (size_t)g->out_elem * g->c_elems * (size_t)g->copies : 0;
  if ((rc = reserve_vectors(g, o, err))) goto cleanup;
  if (tn_gpu_routed(g) && (rc = reserve_routings(g, o, err))) goto cleanup;
  size_t wide_bytes =
      g->elem == 4 && g->out_elem == 4 ? 0 : 4 * (g->a_elems + g->b_elems + g->c_elems);
  if ((rc = device_reserve(g, &g->wa, &g->wide_cap_bytes, wide_bytes, err))) goto cleanup;
  g->wb = g->wa + 4 * g->a_elems;
  g->wc = g->wb + 4 * g->b_elems;
cleanup:
  if (rc) free_device_buffers(g);
  return rc;
}

rt_gemm_args tn_gpu_copy_args(const tn_gpu *g, const tn_measure_opts *o, int copy) {
  rt_gemm_args a = {.m = o->m,
                    .n = o->n,
                    .k = o->k,
                    .alpha = 1.0f,
                    .beta = 0.0f,
                    .lda = o->lda,
                    .ldb = o->ldb,
                    .ldc = o->ldc};
  a.a = g->a + (size_t)g->elem * g->a_elems * (size_t)copy;
  a.b = g->b + (size_t)g->elem * g->b_elems * (size_t)copy;
  a.c = g->c + (size_t)g->out_elem * g->c_elems * (size_t)copy;
  a.batch = g->batch;
  a.group = tn_gpu_routed(g) ? g->op.group : 0;
  a.tokens = g->routed_rows; /* masked: the routings' rows, as a call says them */
  if (g->has_op && g->op.residual) a.beta = 1.0f; /* C: tn_gpu_residual_c(a.c) */
  return a;
}

uint64_t tn_gpu_residual_c(const tn_gpu *g, uint64_t d) {
  const size_t span = (size_t)g->out_elem * g->c_elems * (size_t)g->copies;
  return d >= g->c && d - g->c < span ? g->c_in + (d - g->c) : g->use_c;
}

rt_epilogue tn_gpu_epilogue(const tn_gpu *g, const rt_gemm_args *args) {
  return tn_gpu_epilogue_of(g, args);
}

void tn_gpu_aligned_scales(const tn_gpu *g, uint64_t *scale_row, uint64_t *scale_col) {
  *scale_row = g->scale_row, *scale_col = g->scale_col;
}

/* Whether the op reads scale_row (scale_col): a vector, a per-tensor scale or block scales. */
static bool scales_a(const gen_op *op) {
  return op->scale_row || op->scale_tensor || op->scale_block;
}
static bool scales_b(const gen_op *op) {
  return op->scale_col || op->scale_tensor || op->scale_block;
}

rt_epilogue tn_gpu_epilogue_of(const tn_gpu *g, const rt_gemm_args *args) {
  const bool many = g->batch > 1; /* contiguous: A's and D's strides are 0, B's the weights' */
  const bool grouped = tn_gpu_routed(g);
  return (rt_epilogue){
      .d = args->c,
      .ldd = args->ldc,
      .bias = g->op.bias ? g->use_bias : 0,
      .scale_row = scales_a(&g->op) ? g->use_scale_row : 0,
      .scale_col = scales_b(&g->op) ? g->use_scale_col : 0,
      .batch_a = many ? (int64_t)g->a_stride : 0,
      .batch_b = many ? (int64_t)g->b_stride : 0,
      .batch_c = many ? (int64_t)g->c_stride : 0,
      .batch_d = many ? (int64_t)g->c_stride : 0,
      .scale_d = g->d_scale,
      .amax = g->d_amax,
      .group_rows = grouped ? g->routings + 4 * (size_t)g->routing * ((size_t)g->batch + 1) : 0,
      .group_error = grouped ? g->group_error : 0,
      .groups = grouped ? g->batch : 0};
}

bool tn_gpu_is_sticky(CUresult r) {
  return r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED ||
         r == CUDA_ERROR_MISALIGNED_ADDRESS || r == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
         r == CUDA_ERROR_HARDWARE_STACK_ERROR || r == CUDA_ERROR_INVALID_PC ||
         r == CUDA_ERROR_ASSERT || r == CUDA_ERROR_LAUNCH_TIMEOUT ||
         r == CUDA_ERROR_ECC_UNCORRECTABLE;
}
