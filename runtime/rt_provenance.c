/* rt_provenance.c -- see rt_provenance.h: the kernel a row measured, and whether it is still
 * the kernel its template emits. */
#include "rt_provenance.h"

#include <stdio.h>
#include <string.h>

#include "rt_compile.h"

/* Adds text and its NUL to the hash (so "ab","c" and "a","bc" differ). */
static uint64_t more_text(uint64_t h, const char *text) {
  return ut_hash64_more(h, text ? text : "", text ? strlen(text) + 1 : 1);
}

void rt_kernel_hash(const gen_kernel *k, char out[17]) {
  const char *const *opts = NULL;
  int nopts = rt_compile_fixed_options(&opts);
  uint64_t h = ut_hash64(k->source ? k->source : "", k->source ? strlen(k->source) + 1 : 1);
  h = more_text(h, k->arch); /* the architecture option follows from it and the device's */
  for (int i = 0; i < nopts; i++) h = more_text(h, opts[i]);
  /* the launch description as text: the same on every host, whatever the struct's padding */
  char text[512];
  const gen_requires *r = &k->requires;
  snprintf(text, sizeof text,
           "block=%u,%u,%u shared=%u excl=%d ws=%u dep=%d req=%lld,%lld,%lld,%d,%d,%d maps=%d",
           k->block[0], k->block[1], k->block[2], k->shared_bytes, k->exclusive,
           k->workspace_per_block, k->dependent_launch, (long long)r->m_multiple,
           (long long)r->n_multiple, (long long)r->k_multiple, r->align_bytes, r->repack,
           r->c_any_align, k->ntensor_maps);
  h = more_text(h, k->kernel_name);
  h = more_text(h, text);
  for (int i = 0; i < 3; i++) {
    snprintf(text, sizeof text, "grid%d=%d:%lld:%d", i, k->grid[i].dim, (long long)k->grid[i].tile,
             k->grid[i].cluster);
    h = more_text(h, text);
  }
  for (int i = 0; i < k->ntensor_maps && i < GEN_MAX_TENSOR_MAPS; i++) {
    const gen_tensor_map *m = &k->tensor_maps[i];
    snprintf(text, sizeof text, "map=%c:%u:%u:%u", m->operand, m->box[0], m->box[1], m->swizzle);
    h = more_text(h, text);
  }
  ut_hash64_hex(h, out);
}

/* A row from before schema 6: current while its template is as measured. */
static bool legacy_current(gen_template *t, const rt_row_kernel *r) {
  return strcmp(r->template_hash, gen_source_hash(t)) == 0;
}

mmt_status rt_row_current(gen_template *t, const rt_row_kernel *r, const gen_kernel *now,
                          bool *current, ut_err *err) {
  *current = false;
  if (!r->kernel_hash[0]) {
    *current = legacy_current(t, r);
    return MMT_OK;
  }
  if (!now && !strcmp(r->template_hash, gen_source_hash(t))) {
    *current = true;
    return MMT_OK;
  }
  gen_kernel k = {0};
  ut_err e = {{0}};
  gen_config cfg;
  mmt_status rc = MMT_OK;
  if (!now) {
    rc = gen_config_parse(t, r->params, &cfg, &e);
    if (!rc) rc = gen_emit(t, &cfg, r->dtype, r->layout, &k, &e);
    if (rc == MMT_ERR_NOMEM) return ut_fail(err, rc, "%s", e.msg);
    if (rc) return MMT_OK; /* no longer this template's config, or it does not emit */
    now = &k;
  }
  char hash[17];
  rt_kernel_hash(now, hash);
  *current = !strcmp(hash, r->kernel_hash);
  gen_kernel_clear(&k);
  return MMT_OK;
}
