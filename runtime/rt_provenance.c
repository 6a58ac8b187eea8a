/* rt_provenance.c -- see rt_provenance.h: the kernel a row measured, and whether it is still
 * the kernel its template emits. */
#include "rt_provenance.h"

#include <string.h>

#include "rt_compile.h"

/* Adds text and its NUL to the hash (so "ab","c" and "a","bc" differ). */
static uint64_t more_text(uint64_t h, const char *text) {
  return ut_hash64_more(h, text ? text : "", text ? strlen(text) + 1 : 1);
}

void rt_kernel_hash(const gen_kernel *k, char out[17]) {
  const char *const *opts = NULL;
  int nopts = rt_compile_fixed_options(&opts);
  char launch[GEN_LAUNCH_TEXT_MAX];
  (void)gen_kernel_launch_text(k, launch, sizeof launch, NULL); /* always fits: "" otherwise */
  uint64_t h = more_text(ut_hash64("", 0), k->source);
  h = more_text(h, launch); /* names the arch, from which the architecture option follows */
  for (int i = 0; i < nopts; i++) h = more_text(h, opts[i]);
  ut_hash64_hex(h, out);
}

/* A row from before schema 6: current while its template is as measured, or an earlier
 * version that its lineage says emits the same kernel. */
static bool legacy_current(gen_template *t, const rt_row_kernel *r) {
  return gen_emits_as(t, r->template_hash, r->dtype, r->layout, r->params);
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
