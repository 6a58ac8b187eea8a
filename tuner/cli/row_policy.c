/*
 * cli/row_policy.c -- what the tuner knows of a row from elsewhere and db/ does not
 * (db_row_policy, db.h): the element types mmtune has, and each template's parameters.
 */
#include "cli/row_policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool dtype_known(const char *dtype, void *user) {
  (void)user;
  return gen_dtype_index(dtype) >= 0;
}

/* The template of that name on the search path, loaded once; NULL when this machine has
 * none (or it does not load: its rows are then never served here either). */
static gen_template *template_named(tn_row_policy *p, const char *name) {
  for (int i = 0; i < p->ntemplates; i++)
    if (!strcmp(p->templates[i].name, name)) return p->templates[i].t;
  if (p->ntemplates == TN_POLICY_TEMPLATES) return NULL; /* a file of many foreign names */
  gen_template *t = NULL;
  ut_err e;
  if (gen_load_named(name, &t, &e) != MMT_OK) t = NULL;
  snprintf(p->templates[p->ntemplates].name, sizeof p->templates[0].name, "%s", name);
  p->templates[p->ntemplates++].t = t;
  return t;
}

/* A row of this machine's version of a template (same hash) must name a config of it, in
 * the canonical form the tuner writes: otherwise the dispatcher would build a kernel the
 * tuner never measured.  Rows of another version are kept as they are (they are stale here:
 * the dispatcher skips them), as are rows of templates this machine lacks. */
static bool params_ok(const char *template_name, const char *template_hash, const char *params,
                      void *user, char *why, size_t whylen) {
  gen_template *t = template_named(user, template_name);
  if (!t || strcmp(gen_source_hash(t), template_hash) != 0) return true;
  gen_config cfg;
  char canonical[DB_PARAMS_MAX];
  ut_err e;
  mmt_status rc = gen_config_parse(t, params, &cfg, &e);
  if (!rc) rc = gen_config_format(t, &cfg, canonical, sizeof canonical, &e);
  if (!rc && strcmp(canonical, params) != 0)
    rc = ut_fail(&e, MMT_ERR_INVALID_ARG, "not in canonical form ('%s')", canonical);
  if (rc) snprintf(why, whylen, "'params' '%s' is not a config of template %s: %s", params,
                   template_name, e.msg);
  return rc == MMT_OK;
}

void tn_row_policy_init(tn_row_policy *p) {
  memset(p, 0, sizeof *p);
  p->policy = (db_row_policy){.dtype_known = dtype_known, .params_ok = params_ok, .user = p};
}

void tn_row_policy_free(tn_row_policy *p) {
  if (!p) return;
  for (int i = 0; i < p->ntemplates; i++) gen_free(p->templates[i].t);
  p->ntemplates = 0;
}
