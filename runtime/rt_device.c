/* rt_device.c -- see rt_device.h.  Device info, primary context, kernel load and launch. */
#include "rt_device.h"

#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dynamic shared memory above this needs CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES. */
#define RT_DEFAULT_SHARED_LIMIT (48 * 1024)

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" as nvidia-smi prints it. */
static void format_uuid(const CUuuid *u, char *out, size_t outlen) {
  const unsigned char *b = (const unsigned char *)u->bytes;
  snprintf(out, outlen, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
           b[14], b[15]);
}

static mmt_status get_attr(const rt_cu *cu, CUdevice dev, CUdevice_attribute a, const char *what,
                           int *out, ut_err *err) {
  CUresult r = cu->cuDeviceGetAttribute(out, a, dev);
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, what, r);
  return MMT_OK;
}

/* The limits templates check their configs against (gen_device, mmt.device), the device's
 * own. */
static mmt_status read_limits(const rt_cu *cu, rt_device *d, ut_err *err) {
  gen_device *l = &d->limits;
  static const struct {
    CUdevice_attribute attr;
    size_t offset;
    const char *what;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, offsetof(gen_device, sm_count), "SM count"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, offsetof(gen_device, max_shared),
       "shared memory opt-in"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, offsetof(gen_device, max_shared_static),
       "shared memory per block"},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, offsetof(gen_device, sm_shared),
       "shared memory per SM"},
      {CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, offsetof(gen_device, reserved_shared),
       "reserved shared memory"},
      {CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, offsetof(gen_device, regs_per_sm),
       "registers per SM"},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, offsetof(gen_device, max_threads_sm),
       "threads per SM"},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, offsetof(gen_device, max_grid[0]), "grid x"},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, offsetof(gen_device, max_grid[1]), "grid y"},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, offsetof(gen_device, max_grid[2]), "grid z"},
  };
  mmt_status rc = MMT_OK;
  l->cc = d->info.cc_major * 10 + d->info.cc_minor;
  for (size_t i = 0; i < sizeof attrs / sizeof attrs[0] && !rc; i++)
    rc = get_attr(cu, d->dev, attrs[i].attr, attrs[i].what, (int *)((char *)l + attrs[i].offset),
                  err);
  return rc;
}

/* Name, UUID, compute capability, SM count, driver version, memory, shared-memory limit. */
static mmt_status read_info(const rt_cu *cu, rt_device *d, ut_err *err) {
  mmt_status rc = MMT_OK;
  CUuuid uuid;
  db_device *info = &d->info;
  RT_CU_CHECK(cu, cuDeviceGetName(info->name, (int)sizeof info->name, d->dev));
  RT_CU_CHECK(cu, cuDeviceGetUuid(&uuid, d->dev));
  format_uuid(&uuid, info->uuid, sizeof info->uuid);
  if ((rc = get_attr(cu, d->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "cc major",
                     &info->cc_major, err)) ||
      (rc = get_attr(cu, d->dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "cc minor",
                     &info->cc_minor, err)) ||
      (rc = get_attr(cu, d->dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "SM count",
                     &info->sm_count, err)) ||
      (rc = get_attr(cu, d->dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                     "shared memory opt-in", &d->max_shared_optin, err)))
    goto cleanup;
  if ((rc = read_limits(cu, d, err))) goto cleanup;
  RT_CU_CHECK(cu, cuDriverGetVersion(&info->driver_version));
  RT_CU_CHECK(cu, cuDeviceTotalMem(&d->total_mem, d->dev));
  rc = ut_snprintf(d->arch, sizeof d->arch, err, "sm_%d%d", info->cc_major, info->cc_minor);
cleanup:
  return rc;
}

/* The scratch pool, on a device that has memory pools.  Its release threshold is the largest
 * size: a pool's default (0) returns its memory at every synchronization, so each unaligned
 * call would map fresh device memory again. */
static mmt_status create_scratch(const rt_cu *cu, rt_device *d, ut_err *err) {
  mmt_status rc = MMT_OK;
  int pools = 0;
  if ((rc = get_attr(cu, d->dev, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, "memory pools",
                     &pools, err)) || !pools)
    return rc;
  CUmemPoolProps props;
  memset(&props, 0, sizeof props);
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = d->ordinal;
  RT_CU_CHECK(cu, cuMemPoolCreate(&d->scratch, &props));
  cuuint64_t keep_all = UINT64_MAX;
  RT_CU_CHECK(cu,
              cuMemPoolSetAttribute(d->scratch, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_all));
cleanup:
  return rc;
}

mmt_status rt_device_open(int ordinal, rt_device *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = NULL;
  int count = 0;
  rt_device d;
  memset(&d, 0, sizeof d);
  memset(out, 0, sizeof *out);
  d.ordinal = ordinal;
  if ((rc = rt_driver(&cu, err))) goto cleanup;
  RT_CU_CHECK(cu, cuDeviceGetCount(&count));
  if (ordinal < 0 || ordinal >= count) {
    rc = ut_fail(err, MMT_ERR_NO_DEVICE, "device %d requested but %d CUDA device(s) present",
                 ordinal, count);
    goto cleanup;
  }
  RT_CU_CHECK(cu, cuDeviceGet(&d.dev, ordinal));
  if ((rc = read_info(cu, &d, err))) goto cleanup;
  RT_CU_CHECK(cu, cuDevicePrimaryCtxRetain(&d.ctx, d.dev));
  RT_CU_CHECK(cu, cuCtxSetCurrent(d.ctx));
  if ((rc = create_scratch(cu, &d, err))) goto cleanup;
  *out = d;
  d.ctx = NULL;
  d.scratch = NULL;
cleanup:
  if (d.scratch) cu->cuMemPoolDestroy(d.scratch);
  if (d.ctx) cu->cuDevicePrimaryCtxRelease(d.dev);
  return rc;
}

void rt_device_close(rt_device *d) {
  const rt_cu *cu = NULL;
  if (!d) return;
  if (d->ctx && rt_driver(&cu, NULL) == MMT_OK) {
    CUcontext cur = NULL;
    /* Leave no dangling current context on this thread. */
    if (cu->cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == d->ctx) cu->cuCtxSetCurrent(NULL);
    if (d->scratch) cu->cuMemPoolDestroy(d->scratch);
    cu->cuDevicePrimaryCtxRelease(d->dev);
  }
  memset(d, 0, sizeof *d);
}

/* Makes ctx current unless it already is. */
static mmt_status bind_ctx(const rt_cu *cu, CUcontext ctx, ut_err *err) {
  mmt_status rc = MMT_OK;
  CUcontext cur = NULL;
  if (!ctx) return ut_fail(err, MMT_ERR_INVALID_ARG, "device is not open");
  RT_CU_CHECK(cu, cuCtxGetCurrent(&cur));
  if (cur != ctx) RT_CU_CHECK(cu, cuCtxSetCurrent(ctx));
cleanup:
  return rc;
}

mmt_status rt_device_bind(const rt_device *d, ut_err *err) {
  const rt_cu *cu = NULL;
  mmt_status rc = rt_driver(&cu, err);
  if (rc) return rc;
  return bind_ctx(cu, d ? d->ctx : NULL, err);
}

static mmt_status func_attr(const rt_cu *cu, CUfunction fn, CUfunction_attribute a,
                            const char *what, int *out, ut_err *err) {
  CUresult r = cu->cuFuncGetAttribute(out, a, fn);
  if (r != CUDA_SUCCESS) return rt_cu_fail(err, what, r);
  return MMT_OK;
}

static mmt_status read_func_attrs(const rt_cu *cu, rt_kernel *k, ut_err *err) {
  mmt_status rc;
  if ((rc = func_attr(cu, k->fn, CU_FUNC_ATTRIBUTE_NUM_REGS, "registers", &k->regs, err)) ||
      (rc = func_attr(cu, k->fn, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, "static shared memory",
                      &k->static_shared_bytes, err)) ||
      (rc = func_attr(cu, k->fn, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, "local memory",
                      &k->local_bytes, err)) ||
      (rc = func_attr(cu, k->fn, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads",
                      &k->max_threads, err)))
    return rc;
  return MMT_OK;
}

/* Block size and shared memory against the kernel's and the device's limits; raises the
 * dynamic shared-memory limit when the total exceeds the default 48 KiB. */
static mmt_status fit_limits(const rt_cu *cu, const rt_device *d, rt_kernel *k, ut_err *err) {
  mmt_status rc = MMT_OK;
  uint64_t threads = (uint64_t)k->block[0] * k->block[1] * k->block[2];
  if (threads > (uint64_t)k->max_threads)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "needs %llu threads but kernel allows %d (%s)",
                   (unsigned long long)threads, k->max_threads,
                   k->max_threads < 1024 ? "registers or launch bounds" : "device limit");
  uint64_t shared = (uint64_t)k->static_shared_bytes + k->shared_bytes;
  if (shared > (uint64_t)d->max_shared_optin)
    return ut_fail(err, MMT_ERR_UNSUPPORTED,
                   "needs %llu bytes of shared memory per block (%d static + %u dynamic) but "
                   "the device allows %d",
                   (unsigned long long)shared, k->static_shared_bytes, k->shared_bytes,
                   d->max_shared_optin);
  if (shared > RT_DEFAULT_SHARED_LIMIT)
    RT_CU_CHECK(cu, cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                       (int)k->shared_bytes));
cleanup:
  return rc;
}

static mmt_status check_spec(const rt_device *d, const rt_cubin *cubin, const gen_kernel *spec,
                             ut_err *err) {
  if (!d || !d->ctx) return ut_fail(err, MMT_ERR_INVALID_ARG, "device is not open");
  if (!cubin || !cubin->data || cubin->size == 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "empty cubin");
  if (!spec || !spec->kernel_name || !*spec->kernel_name)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "kernel has no name");
  if (spec->block[0] == 0 || spec->block[1] == 0 || spec->block[2] == 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "kernel '%s' has an empty block (%u x %u x %u)",
                   spec->kernel_name, spec->block[0], spec->block[1], spec->block[2]);
  if (spec->shared_bytes > (unsigned)INT_MAX)
    return ut_fail(err, MMT_ERR_UNSUPPORTED, "kernel '%s' asks for %u bytes of shared memory",
                   spec->kernel_name, spec->shared_bytes);
  char arch[16];
  mmt_status rc = rt_kernel_arch(d->arch, spec->arch, arch, err);
  if (!rc && spec->ntensor_maps > 0 && d->info.cc_major < 9)
    rc = ut_fail(err, MMT_ERR_UNSUPPORTED, "tensor maps (TMA) need sm_90 or newer; the device is %s",
                 d->arch);
  if (!rc && spec->requires.repack && !d->scratch)
    rc = ut_fail(err, MMT_ERR_UNSUPPORTED,
                 "repack needs stream-ordered allocation (memory pools), which the device lacks");
  if (!rc && spec->ntensor_maps > 0 && gen_dtype_size(spec->dtype) == 0)
    rc = ut_fail(err, MMT_ERR_INVALID_ARG, "tensor maps over an unknown dtype '%s'", spec->dtype);
  if (rc) ut_err_prefix(err, "kernel '%s'", spec->kernel_name);
  return rc;
}

/* What of spec decides a launch's grid (rt_launch_grid), into k. */
static void launch_shape(const gen_kernel *spec, int sm_count, rt_kernel *k) {
  memcpy(k->grid, spec->grid, sizeof k->grid);
  k->sm_count = sm_count;
  k->epilogue = spec->op[0] != '\0';
  k->walks_experts = spec->walks_experts;
}

mmt_status rt_kernel_load(const rt_device *d, const rt_cubin *cubin, const gen_kernel *spec,
                          rt_kernel *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = NULL;
  rt_kernel k;
  memset(&k, 0, sizeof k);
  memset(out, 0, sizeof *out);
  if ((rc = check_spec(d, cubin, spec, err))) goto cleanup;
  if ((rc = rt_driver(&cu, err))) goto cleanup;
  if ((rc = bind_ctx(cu, d->ctx, err))) goto cleanup;
  k.ctx = d->ctx;
  memcpy(k.block, spec->block, sizeof k.block);
  launch_shape(spec, d->info.sm_count, &k);
  k.shared_bytes = spec->shared_bytes;
  k.requires = spec->requires;
  memcpy(k.dtype, spec->dtype, sizeof k.dtype);
  memcpy(k.layout, spec->layout, sizeof k.layout);
  k.ntensor_maps = spec->ntensor_maps;
  if (spec->requires.repack) k.scratch = d->scratch;
  k.dependent_launch = spec->dependent_launch && d->info.cc_major >= 9;
  memcpy(k.tensor_maps, spec->tensor_maps, sizeof k.tensor_maps);
  RT_CU_CHECK(cu, cuModuleLoadData(&k.module, cubin->data));
  CUresult r = cu->cuModuleGetFunction(&k.fn, k.module, spec->kernel_name);
  if (r != CUDA_SUCCESS) {
    rc = rt_cu_fail(err, "cuModuleGetFunction", r);
    ut_err_prefix(err, "kernel '%s' not in the module", spec->kernel_name);
    goto cleanup;
  }
  if (spec->requires.repack) {
    k.copy_dependent = d->info.cc_major >= 9;
    r = cu->cuModuleGetFunction(&k.copy_fn, k.module, GEN_COPY_ROWS_KERNEL);
    if (r != CUDA_SUCCESS) {
      rc = rt_cu_fail(err, "cuModuleGetFunction", r);
      ut_err_prefix(err, "repack kernel '%s': its module has no %s (the copy_rows snippet)",
                    spec->kernel_name, GEN_COPY_ROWS_KERNEL);
      goto cleanup;
    }
  }
  if ((rc = read_func_attrs(cu, &k, err))) goto cleanup;
  if (spec->exclusive) {
    RT_CU_CHECK(cu, cuEventCreate(&k.last_launch, CU_EVENT_DISABLE_TIMING));
    if (!(k.trail = calloc(1, sizeof *k.trail))) {
      rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
      goto cleanup;
    }
  }
  k.workspace_per_block = spec->workspace_per_block;
  if (k.workspace_per_block && !(k.ws = calloc(1, sizeof *k.ws))) {
    rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory");
    goto cleanup;
  }
  if ((rc = fit_limits(cu, d, &k, err))) {
    ut_err_prefix(err, "kernel '%s'", spec->kernel_name);
    goto cleanup;
  }
  *out = k;
  k.module = NULL;
  k.last_launch = NULL;
  k.trail = NULL;
  k.ws = NULL;
cleanup:
  free(k.ws);
  free(k.trail);
  if (k.last_launch) cu->cuEventDestroy(k.last_launch);
  if (k.module) cu->cuModuleUnload(k.module);
  return rc;
}

void rt_kernel_unload(rt_kernel *k) {
  const rt_cu *cu = NULL;
  if (!k) return;
  if (k->module && rt_driver(&cu, NULL) == MMT_OK && bind_ctx(cu, k->ctx, NULL) == MMT_OK) {
    if (k->ws) {
      if (k->ws->ptr) cu->cuMemFree(k->ws->ptr);
      for (int i = 0; i < k->ws->retired_count; i++) cu->cuMemFree(k->ws->retired[i]);
    }
    if (k->last_launch) cu->cuEventDestroy(k->last_launch);
    cu->cuModuleUnload(k->module);
  }
  free(k->ws);
  free(k->trail);
  memset(k, 0, sizeof *k);
}

/* Sizes must be >= 0 and fit the kernel ABI's int. */
static mmt_status check_int(const char *what, int64_t v, ut_err *err) {
  if (v < 0 || v > INT_MAX)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s = %lld is outside the kernel ABI's range 0..%d",
                   what, (long long)v, INT_MAX);
  return MMT_OK;
}

static mmt_status check_args(const rt_gemm_args *a, ut_err *err) {
  mmt_status rc;
  if ((rc = check_int("M", a->m, err)) || (rc = check_int("N", a->n, err)) ||
      (rc = check_int("K", a->k, err)) || (rc = check_int("lda", a->lda, err)) ||
      (rc = check_int("ldb", a->ldb, err)) || (rc = check_int("ldc", a->ldc, err)))
    return rc;
  return MMT_OK;
}

CUtensorMapL2promotion rt_tma_l2_promotion(uint64_t base, uint64_t pitch) {
  return (base | pitch) % 128 == 0 ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B
                                   : CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
}

/* Encodes tm over the operand it names, as stored (gen.h's gen_tensor_map): dimension 0 the
 * contiguous one, 1 the rows.  A zero size (K == 0) becomes 1: the kernel loads nothing then,
 * but the driver rejects empty maps, and addresses off 16 bytes: at K == 0 (alpha == 0 too)
 * A and B are not read, so their pointers and pitches may be anything (misaligned, NULL); the
 * map is then made at one of the call's 16-byte boundaries with a pitch of whole 16 bytes,
 * and never used. */
static mmt_status encode_map(const rt_cu *cu, const rt_kernel *k, const gen_tensor_map *tm,
                             const rt_gemm_args *a, CUtensorMap *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  int is_b = tm->operand == 'B';
  int64_t width[3], rows[3];
  gen_min_ld(k->layout, a->m, a->n, a->k, width);
  gen_stored_rows(k->layout, a->m, a->n, a->k, rows);
  int64_t dim0 = width[is_b], dim1 = rows[is_b];
  int elem = gen_dtype_size(k->dtype);
  /* FP8: raw bytes (TMA copies them; only wgmma reads them as e4m3 or e5m2) */
  CUtensorMapDataType type = elem == 1 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                             : elem == 2
                                 ? (strcmp(k->dtype, "bf16") == 0 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                                  : CU_TENSOR_MAP_DATA_TYPE_FLOAT16)
                                 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  cuuint64_t dims[3] = {(cuuint64_t)(dim0 > 0 ? dim0 : 1), (cuuint64_t)(dim1 > 0 ? dim1 : 1), 1};
  CUdeviceptr base = is_b ? a->b : a->a;
  cuuint64_t strides[2] = {(cuuint64_t)((is_b ? a->ldb : a->lda) * elem), 0};
  const bool unread = a->k == 0; /* the map is never used: any aligned place, pitch, one matrix */
  if (unread) {
    if (!base) base = a->c ? a->c : a->epi ? a->epi->d : 0;
    base &= ~(CUdeviceptr)15;
    strides[0] = (dims[0] * (cuuint64_t)elem + 15) / 16 * 16;
  }
  cuuint32_t box[3] = {tm->box[0], tm->box[1], 1}, element_strides[3] = {1, 1, 1};
  /* An op kernel's maps are 3-D, dimension 2 the batch (gen.h): one matrix where the operand
   * is shared (stride 0) or the batch is 1, its stride a multiple of 16 anyway. */
  const unsigned rank = k->epilogue ? 3 : 2;
  if (k->epilogue) {
    const int64_t stride = is_b ? a->epi->batch_b : a->epi->batch_a;
    if (stride > 0 && a->batch > 1 && !unread) {
      dims[2] = (cuuint64_t)a->batch;
      strides[1] = (cuuint64_t)stride * (cuuint64_t)elem;
    } else {
      strides[1] = (strides[0] * dims[1] + 15) / 16 * 16;
    }
  }
  CUtensorMapSwizzle swizzle = tm->swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : tm->swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                               : tm->swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                   : CU_TENSOR_MAP_SWIZZLE_NONE;
  CUresult r = cu->cuTensorMapEncodeTiled(out, type, rank, (void *)(uintptr_t)base, dims, strides,
                                          box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                          swizzle, rt_tma_l2_promotion(base, strides[0]),
                                          CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    rc = rt_cu_fail(err, "cuTensorMapEncodeTiled", r);
    ut_err_prefix(err, "tensor map of %c (%llu x %llu, pitch %llu bytes)", tm->operand,
                  (unsigned long long)dims[1], (unsigned long long)dims[0],
                  (unsigned long long)strides[0]);
  }
  return rc;
}

/* Whether operand i (0 A, 1 B, 2 C) of the call meets the kernel's alignment where it is: its
 * base address and row pitch.  C always does for a kernel that stores it at any alignment. */
static bool operand_aligned(const rt_kernel *k, const rt_gemm_args *a, int i) {
  if (i == 2 && k->requires.c_any_align) return true;
  const uint64_t elem = (uint64_t)gen_dtype_size(k->dtype);
  const CUdeviceptr ptr[3] = {a->a, a->b, a->c};
  const int64_t ld[3] = {a->lda, a->ldb, a->ldc};
  const uint64_t v[] = {ptr[i], (uint64_t)ld[i] * elem};
  return gen_align_bytes(v, 2) >= k->requires.align_bytes;
}

/* Whether the call's operands meet the kernel's alignment as they are. */
static bool aligned_enough(const rt_kernel *k, const rt_gemm_args *a) {
  return operand_aligned(k, a, 0) && operand_aligned(k, a, 1) && operand_aligned(k, a, 2);
}

/* One matrix as stored: `rows` rows of `width` bytes, `pitch` bytes apart. */
typedef struct {
  CUdeviceptr ptr;
  uint64_t rows, width, pitch;
} rt_rows;

/* The copy_rows snippet's argument (templates/snippets/copy_rows.cu, struct mmt_copy_jobs):
 * the same members in the same order, so the same layout. */
#define RT_COPY_JOBS 3
typedef struct {
  uint64_t src[RT_COPY_JOBS], dst[RT_COPY_JOBS];
  uint64_t src_pitch[RT_COPY_JOBS], dst_pitch[RT_COPY_JOBS];
  uint64_t width[RT_COPY_JOBS], rows[RT_COPY_JOBS];
  int njobs;
} rt_copy_jobs;

/* Adds the copy of src's rows to dst's to jobs (nothing for an empty matrix). */
static void add_copy(rt_copy_jobs *jobs, const rt_rows *dst, const rt_rows *src) {
  if (src->rows == 0 || src->width == 0) return;
  int j = jobs->njobs++;
  jobs->src[j] = src->ptr, jobs->dst[j] = dst->ptr;
  jobs->src_pitch[j] = src->pitch, jobs->dst_pitch[j] = dst->pitch;
  jobs->width[j] = src->width, jobs->rows[j] = src->rows;
}

/* One launch of k's copy kernel over jobs, on stream: a warp a segment of a row, at most the
 * 2 blocks of 256 threads an SM holds (the kernel's launch bounds; its grid-stride loop does
 * the rest).  On sm_90 and newer as a programmatic dependent of the kernel before it (it
 * waits for that kernel's writes first: griddepcontrol.wait), so that its launch overlaps
 * that kernel's last blocks. */
static mmt_status launch_copies(const rt_cu *cu, const rt_kernel *k, rt_copy_jobs *jobs,
                                CUstream stream, ut_err *err) {
  mmt_status rc = MMT_OK;
  if (jobs->njobs == 0) return MMT_OK;
  uint64_t warps = 0; /* a warp a segment of 4 KiB of a row (the snippet's MMT_COPY_SEGS) */
  for (int j = 0; j < jobs->njobs; j++) warps += jobs->rows[j] * ((jobs->width[j] + 30) / 4096 + 1);
  uint64_t cap = (uint64_t)(k->sm_count > 0 ? k->sm_count : 1) * 2, blocks = (warps + 7) / 8;
  void *params[] = {jobs};
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
  attr.value.programmaticStreamSerializationAllowed = 1;
  const CUlaunchConfig config = {(unsigned)(blocks < cap ? blocks : cap), 1, 1, 256, 1, 1, 0,
                                 stream, &attr, k->copy_dependent ? 1u : 0u};
  RT_CU_CHECK(cu, cuLaunchKernelEx(&config, k->copy_fn, params, NULL));
cleanup:
  return rc;
}

static mmt_status launch_direct(const rt_cu *cu, const rt_kernel *k, const rt_gemm_args *args,
                                const unsigned grid[3], CUstream stream, ut_err *err);

/* A repack kernel on a call that is not 16-byte aligned: each operand that is not (C only
 * when beta reads it) copied into one buffer from the scratch pool with every row padded to a
 * multiple of 16 bytes, the kernel run there, a copied C copied back, the buffer freed, all in
 * stream order.  The copies are k's copy kernel (the copy_rows snippet): one launch for what
 * goes in, one for C coming out.  Aligned operands stay where they are: a misaligned A costs
 * a copy of A only, not of a C that may be a hundred times larger. */
static mmt_status launch_repacked(const rt_cu *cu, const rt_kernel *k, const rt_gemm_args *args,
                                  const unsigned grid[3], CUstream stream, ut_err *err) {
  mmt_status rc = MMT_OK;
  uint64_t elem = (uint64_t)gen_dtype_size(k->dtype);
  int64_t width[3], rows[3];
  gen_min_ld(k->layout, args->m, args->n, args->k, width);
  gen_stored_rows(k->layout, args->m, args->n, args->k, rows);
  const CUdeviceptr ptr[3] = {args->a, args->b, args->c};
  const int64_t ld[3] = {args->lda, args->ldb, args->ldc};
  rt_rows src[3], dst[3];
  uint64_t offset[3], total = 0;
  bool copied[3];
  for (int i = 0; i < 3; i++) {
    src[i] = (rt_rows){ptr[i], (uint64_t)rows[i], (uint64_t)width[i] * elem,
                       (uint64_t)ld[i] * elem};
    copied[i] = !operand_aligned(k, args, i);
    uint64_t pitch = (src[i].width + 15) / 16 * 16;
    dst[i] = copied[i] ? (rt_rows){0, src[i].rows, src[i].width, pitch ? pitch : 16} : src[i];
    offset[i] = total; /* each copy starts 16-byte aligned: pitches are multiples of 16 */
    if (copied[i]) total += dst[i].rows * dst[i].pitch;
  }
  CUdeviceptr buf = 0;
  RT_CU_CHECK(cu, cuMemAllocFromPoolAsync(&buf, total ? total : 16, k->scratch, stream));
  for (int i = 0; i < 3; i++)
    if (copied[i]) dst[i].ptr = buf + offset[i];
  rt_copy_jobs in = {0};
  for (int i = 0; i < 3; i++)
    if (copied[i] && (i < 2 || args->beta != 0.0f)) add_copy(&in, &dst[i], &src[i]);
  if ((rc = launch_copies(cu, k, &in, stream, err))) goto cleanup;
  rt_gemm_args inner = *args;
  inner.a = dst[0].ptr, inner.b = dst[1].ptr, inner.c = dst[2].ptr;
  inner.lda = (int64_t)(dst[0].pitch / elem), inner.ldb = (int64_t)(dst[1].pitch / elem);
  inner.ldc = (int64_t)(dst[2].pitch / elem);
  if ((rc = launch_direct(cu, k, &inner, grid, stream, err))) goto cleanup;
  if (copied[2]) {
    rt_copy_jobs out = {0};
    add_copy(&out, &src[2], &dst[2]);
    rc = launch_copies(cu, k, &out, stream, err);
  }
cleanup:
  if (buf) {
    CUresult r = cu->cuMemFreeAsync(buf, stream);
    if (!rc && r != CUDA_SUCCESS) rc = rt_cu_fail(err, "cuMemFreeAsync", r);
  }
  return rc;
}

/* An op kernel's grid.z: the batch where its rule is the constant 1.  A persistent kernel's
 * per-SM grid.x is then shared among the batch's problems, so that the launch stays about one
 * resident wave (a full per-SM grid for every problem queued a batch's worth of blocks that
 * mostly had no tile to do): its gridDim.x * gridDim.z blocks walk the tiles of every problem
 * in turn (wgmma's batch walk; a masked grouped kernel's gridDim.x blocks walk their expert's
 * tiles).  Rounded down, so that no block waits for a second wave while the batch fits one.
 * A masked kernel that walks the experts gets a slice of them per block of grid.z: as many
 * slices as the call's rows can hit experts (its group_tokens; G without it), so that a decode
 * step's few rows among many experts launch no blocks for the empty ones. */
static mmt_status batch_grid(const rt_kernel *k, const rt_gemm_args *args, unsigned grid[3],
                             ut_err *err) {
  const int64_t batch = args->batch > 1 ? args->batch : 1;
  if (!k->epilogue) return MMT_OK;
  if (!args->epi)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "an op kernel launched without its epilogue");
  if (batch == 1) return MMT_OK;
  if (k->grid[2].dim != 0 || k->grid[2].tile != 1)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "a batch of %lld for a kernel whose grid.z is its own (split-K)",
                   (long long)batch);
  if (batch > 65535)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "a batch of %lld in one launch (at most 65535)",
                   (long long)batch);
  if (args->group == 'c') {
    /* More tile rows for the experts' last, partial tiles: one an expert with rows, and at
     * most M of the G have any (a decode step's few tokens: a launch of G more tile rows was
     * mostly blocks that found no expert, 0.027 ms for one token of 128 experts' 768 x 2048
     * where one expert's GEMM took 0.005) */
    if (k->grid[0].dim == 'S') return MMT_OK; /* persistent: its blocks walk them all */
    const int64_t partial = batch < args->m ? batch : args->m;
    for (int i = 0; i < 3; i++)
      if (k->grid[i].dim == 'M') {
        const int64_t rows = (int64_t)grid[i] + partial;
        if (rows > (i ? 65535 : INT32_MAX))
          return ut_fail(err, MMT_ERR_UNSUPPORTED, "%lld tile rows of a grouped call in one launch",
                         (long long)rows);
        grid[i] = (unsigned)rows;
        return MMT_OK;
      }
    return ut_fail(err, MMT_ERR_INVALID_ARG, "a grouped kernel whose grid has no M dimension");
  }
  if (grid[2]) grid[2] = (unsigned)batch;
  if (args->group == 'm' && k->walks_experts && args->tokens > 0 && args->tokens < batch)
    grid[2] = (unsigned)args->tokens;
  if (k->grid[0].dim == 'S' && grid[0] > 1) {
    const int64_t share = grid[0] / batch;
    grid[0] = share > 1 ? (unsigned)share : 1u;
  }
  return MMT_OK;
}

mmt_status rt_launch_grid(const rt_kernel *k, const rt_gemm_args *args, unsigned grid[3],
                          ut_err *err) {
  mmt_status rc = gen_grid_eval(k->grid, args->m, args->n, args->k, k->sm_count, grid, err);
  return rc ? rc : batch_grid(k, args, grid, err);
}

mmt_status rt_spec_launch_grid(const gen_kernel *spec, int sm_count, const rt_gemm_args *args,
                               unsigned grid[3], ut_err *err) {
  rt_kernel k;
  memset(&k, 0, sizeof k);
  launch_shape(spec, sm_count, &k);
  return rt_launch_grid(&k, args, grid, err);
}

mmt_status rt_kernel_launch(const rt_kernel *k, const rt_gemm_args *args, CUstream stream,
                            ut_err *err) {
  mmt_status rc = MMT_OK;
  const rt_cu *cu = NULL;
  unsigned grid[3];
  if (!k || !k->fn || !args) return ut_fail(err, MMT_ERR_INVALID_ARG, "kernel is not loaded");
  if ((rc = check_args(args, err))) return rc;
  if ((rc = rt_launch_grid(k, args, grid, err))) return rc;
  if (grid[0] == 0 || grid[1] == 0 || grid[2] == 0) return MMT_OK;
  if ((rc = rt_driver(&cu, err))) return rc;
  if ((rc = bind_ctx(cu, k->ctx, err))) return rc;
  if (k->requires.repack && !aligned_enough(k, args)) {
    if (k->epilogue) /* the copies know C only, not D nor C of another type */
      return ut_fail(err, MMT_ERR_UNSUPPORTED, "an op kernel that needs its operands repacked");
    return launch_repacked(cu, k, args, grid, stream, err);
  }
  return launch_direct(cu, k, args, grid, stream, err);
}

size_t rt_workspace_grow_size(size_t need, size_t have) {
  if (need <= have) return 0;
  const size_t unit = RT_WORKSPACE_MIN_BYTES;
  size_t size = need > SIZE_MAX - unit ? need : (need + unit - 1) / unit * unit;
  if (have <= SIZE_MAX / 2 && 2 * have > size) size = 2 * have;
  return size;
}

/* The workspace a launch of k on this grid needs: a block's bytes times the blocks. */
static size_t workspace_bytes(const rt_kernel *k, const unsigned grid[3]) {
  return (size_t)grid[0] * grid[1] * grid[2] * k->workspace_per_block;
}

mmt_status rt_workspace_need(const rt_kernel *k, const rt_gemm_args *args, size_t *bytes,
                             ut_err *err) {
  unsigned grid[3];
  *bytes = 0;
  if (!k->workspace_per_block) return MMT_OK;
  mmt_status rc = gen_grid_eval(k->grid, args->m, args->n, args->k, k->sm_count, grid, err);
  if (!rc) *bytes = workspace_bytes(k, grid);
  return rc;
}

/* k's workspace, grown to `need` bytes if it is smaller (the buffer it outgrows retired). */
static mmt_status workspace_ready(const rt_cu *cu, const rt_kernel *k, size_t need,
                                  CUstream stream, CUdeviceptr *out, ut_err *err) {
  mmt_status rc = MMT_OK;
  rt_workspace *ws = k->ws;
  size_t size = rt_workspace_grow_size(need, ws->bytes);
  if (size) {
    if (ws->ptr && ws->retired_count == RT_WORKSPACE_RETIRED)
      return ut_fail(err, MMT_ERR_NOMEM, "workspace grown %d times", RT_WORKSPACE_RETIRED);
    CUdeviceptr p = 0;
    CUresult r = cu->cuMemAlloc(&p, size);
    if (r != CUDA_SUCCESS) {
      CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
      rc = rt_cu_fail(err, "cuMemAlloc", r);
      if (cu->cuStreamIsCapturing(stream, &capture) == CUDA_SUCCESS &&
          capture != CU_STREAM_CAPTURE_STATUS_NONE)
        ut_err_prefix(err, "split-K workspace of %zu bytes, asked inside a stream capture (make "
                           "this call once before capturing, so the workspace exists)",
                      size);
      else
        ut_err_prefix(err, "split-K workspace of %zu bytes", size);
      return rc;
    }
    if (ws->ptr) ws->retired[ws->retired_count++] = ws->ptr;
    ws->ptr = p;
    ws->bytes = size;
    ws->allocs++;
  }
  *out = ws->ptr;
  return rc;
}

mmt_status rt_workspace_reserve(const rt_kernel *k, const rt_gemm_args *args, ut_err *err) {
  size_t need = 0;
  const rt_cu *cu = NULL;
  CUdeviceptr ws;
  mmt_status rc = k->ws ? rt_workspace_need(k, args, &need, err) : MMT_OK;
  if (rc || !need) return rc;
  if (!(rc = rt_driver(&cu, err)) && !(rc = bind_ctx(cu, k->ctx, err)))
    rc = workspace_ready(cu, k, need, NULL, &ws, err);
  return rc;
}

static mmt_status launch_direct(const rt_cu *cu, const rt_kernel *k, const rt_gemm_args *args,
                                const unsigned grid[3], CUstream stream, ut_err *err) {
  mmt_status rc = MMT_OK;
  /* The ABI (gen.h): int M, N, K; float alpha; A; int lda; B; int ldb; float beta; C; ldc. */
  int m = (int)args->m, n = (int)args->n, kk = (int)args->k;
  int lda = (int)args->lda, ldb = (int)args->ldb, ldc = (int)args->ldc;
  float alpha = args->alpha, beta = args->beta;
  CUdeviceptr a = args->a, b = args->b, c = args->c;
  void *params[13 + GEN_MAX_TENSOR_MAPS] = {&m, &n,   &kk,   &alpha, &a,  &lda,
                                            &b, &ldb, &beta, &c,     &ldc};
  int np = 11;
  rt_epilogue epi;
  if (k->epilogue) { /* the op ABI: the epilogue right after ldc */
    epi = *args->epi;
    params[np++] = &epi;
  }
  CUtensorMap maps[GEN_MAX_TENSOR_MAPS];
  for (int i = 0; i < k->ntensor_maps; i++) {
    if ((rc = encode_map(cu, k, &k->tensor_maps[i], args, &maps[i], err))) return rc;
    params[np++] = &maps[i];
  }
  CUdeviceptr ws = 0;
  if (k->ws) {
    if ((rc = workspace_ready(cu, k, workspace_bytes(k, grid), stream, &ws, err))) return rc;
    params[np++] = &ws;
  }
  /* An exclusive kernel waits for its previous launch and records its own.  Inside a stream
   * capture both become the graph's external event nodes: a plain wait on an event recorded
   * outside the capture is refused (CUDA_ERROR_STREAM_CAPTURE_ISOLATION), and each replay
   * must order itself after the launches before it, eager or captured, and before those
   * after it.  On the stream of the previous launch, with nothing ever captured, stream order
   * is the wait (rt_launch_trail). */
  unsigned wait_flags = 0, record_flags = 0;
  if (k->last_launch) {
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    RT_CU_CHECK(cu, cuStreamIsCapturing(stream, &capture));
    unsigned long long id = 0;
    if (capture == CU_STREAM_CAPTURE_STATUS_NONE) {
      RT_CU_CHECK(cu, cuStreamGetId(stream, &id));
    } else {
      k->trail->captured = true;
      if (capture == CU_STREAM_CAPTURE_STATUS_ACTIVE)
        wait_flags = CU_EVENT_WAIT_EXTERNAL, record_flags = CU_EVENT_RECORD_EXTERNAL;
    }
    if (k->trail->captured || id != k->trail->stream_id) {
      RT_CU_CHECK(cu, cuStreamWaitEvent(stream, k->last_launch, wait_flags));
      k->trail->waits++;
    }
    k->trail->stream_id = id; /* 0 inside a capture; unused once captured */
  }
  /* Launch attributes: programmatic dependent launch, thread-block clusters (the grid is
   * whole clusters already: gen_grid_eval). */
  CUlaunchAttribute attrs[2];
  unsigned nattrs = 0;
  memset(attrs, 0, sizeof attrs);
  if (k->dependent_launch) {
    attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[nattrs++].value.programmaticStreamSerializationAllowed = 1;
  }
  const unsigned cluster[3] = {(unsigned)gen_grid_cluster(&k->grid[0]),
                               (unsigned)gen_grid_cluster(&k->grid[1]),
                               (unsigned)gen_grid_cluster(&k->grid[2])};
  if (cluster[0] * cluster[1] * cluster[2] > 1) {
    attrs[nattrs].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[nattrs].value.clusterDim.x = cluster[0];
    attrs[nattrs].value.clusterDim.y = cluster[1];
    attrs[nattrs++].value.clusterDim.z = cluster[2];
  }
  if (nattrs > 0) {
    const CUlaunchConfig config = {grid[0], grid[1], grid[2], k->block[0], k->block[1],
                                   k->block[2], k->shared_bytes, stream, attrs, nattrs};
    RT_CU_CHECK(cu, cuLaunchKernelEx(&config, k->fn, params, NULL));
  } else {
    RT_CU_CHECK(cu, cuLaunchKernel(k->fn, grid[0], grid[1], grid[2], k->block[0], k->block[1],
                                   k->block[2], k->shared_bytes, stream, params, NULL));
  }
  if (k->last_launch)
    RT_CU_CHECK(cu, cuEventRecordWithFlags(k->last_launch, stream, record_flags));
cleanup:
  return rc;
}
