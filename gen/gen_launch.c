/*
 * gen_launch.c -- a kernel's launch description as text (gen_kernel_launch_text in gen.h).
 *
 * It reads only the public gen_kernel, so scripts/lineage/emit_all.c compiles this file against
 * an earlier tree's gen.h too (whose gen_kernel has the same fields) and describes the
 * kernels of both versions the same way.
 */
#include <stdarg.h>
#include <stdio.h>

#include "gen.h"

/* Appends to out[0..outlen) at *used; *used becomes outlen when it does not fit. */
__attribute__((format(printf, 4, 5))) static void append(char *out, size_t outlen, size_t *used,
                                                         const char *fmt, ...) {
  if (*used >= outlen) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out + *used, outlen - *used, fmt, ap);
  va_end(ap);
  *used = n < 0 || (size_t)n >= outlen - *used ? outlen : *used + (size_t)n;
}

mmt_status gen_kernel_launch_text(const gen_kernel *k, char *out, size_t outlen, ut_err *err) {
  if (!k || !out || outlen == 0 || !k->kernel_name)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "gen_kernel_launch_text: NULL argument");
  const gen_requires *r = &k->requires;
  size_t used = 0;
  append(out, outlen, &used, "%s block=%u,%u,%u shared=%u", k->kernel_name, k->block[0],
         k->block[1], k->block[2], k->shared_bytes);
  for (int i = 0; i < 3; i++)
    append(out, outlen, &used, " grid%d=%d:%lld:%d", i, k->grid[i].dim, (long long)k->grid[i].tile,
           k->grid[i].cluster);
  append(out, outlen, &used, " req=%lld,%lld,%lld,%d,%d,%d excl=%d ws=%u dep=%d arch=%s maps=%d",
         (long long)r->m_multiple, (long long)r->n_multiple, (long long)r->k_multiple,
         r->align_bytes, r->repack, r->c_any_align, k->exclusive, k->workspace_per_block,
         k->dependent_launch, k->arch, k->ntensor_maps);
  for (int i = 0; i < k->ntensor_maps && i < GEN_MAX_TENSOR_MAPS; i++) {
    const gen_tensor_map *m = &k->tensor_maps[i];
    append(out, outlen, &used, " %c:%u:%u:%u", m->operand, m->box[0], m->box[1], m->swizzle);
  }
  if (k->walks_experts) append(out, outlen, &used, " walk=1"); /* only then: earlier texts hold */
  if (used < outlen) return MMT_OK;
  out[0] = '\0';
  return ut_fail(err, MMT_ERR_INVALID_ARG, "launch description of '%.64s' over %zu bytes",
                 k->kernel_name, outlen);
}
