/* cli/rekey.c -- see cli/rekey.h: kernel hashes for rows measured before they were recorded. */
#include "cli/rekey.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "gen.h"
#include "rt_provenance.h"

/* The templates loaded so far (t NULL: the name does not load here). */
typedef struct {
  char name[GEN_NAME_MAX];
  gen_template *t;
} loaded;

typedef struct {
  loaded *v;
  int n, cap;
  int64_t left;
} rekey_ctx;

static mmt_status template_of(rekey_ctx *c, const char *name, gen_template **t, ut_err *err) {
  for (int i = 0; i < c->n; i++)
    if (!strcmp(c->v[i].name, name)) {
      *t = c->v[i].t;
      return MMT_OK;
    }
  loaded *v = ut_grow(c->v, &c->cap, c->n + 1, sizeof *v);
  if (!v) return ut_fail(err, MMT_ERR_NOMEM, "out of memory");
  c->v = v;
  ut_err e;
  *t = NULL;
  mmt_status rc = gen_load_named(name, t, &e);
  if (rc == MMT_ERR_NOMEM) return ut_fail(err, rc, "%s", e.msg);
  ut_copy(v[c->n].name, sizeof v[c->n].name, name);
  v[c->n++].t = rc ? NULL : *t;
  return MMT_OK;
}

/* The row's kernel, emitted for the limits of its GPU (its architecture's and SM count), as
 * the tuner emitted it, when its template says it is still the one measured. */
static mmt_status rekey_row(const db_result *r, char hash[17], void *user, ut_err *err) {
  rekey_ctx *c = user;
  gen_template *t = NULL;
  gen_device dev;
  gen_config cfg;
  gen_kernel k = {0};
  char arch[16];
  bool current = false;
  c->left++;
  mmt_status rc = template_of(c, r->template_name, &t, err);
  if (rc || !t) return rc;
  const rt_row_kernel rk = {.template_hash = r->template_hash,
                            .kernel_hash = "",
                            .params = r->params,
                            .dtype = r->problem.dtype,
                            .layout = r->problem.layout};
  if ((rc = rt_row_current(t, &rk, NULL, &current, err)) || !current) return rc;
  snprintf(arch, sizeof arch, "sm_%d%d", r->device.cc_major, r->device.cc_minor);
  ut_err e;
  if (gen_device_defaults(arch, &dev, &e)) return MMT_OK; /* an architecture unknown here */
  if (r->device.sm_count > 0) dev.sm_count = r->device.sm_count;
  rc = gen_set_device(t, &dev, &e);
  if (!rc) rc = gen_config_parse(t, r->params, &cfg, &e);
  if (!rc) rc = gen_emit(t, &cfg, r->problem.dtype, r->problem.layout, &k, &e);
  if (rc == MMT_ERR_NOMEM) return ut_fail(err, rc, "%s", e.msg);
  if (rc) return MMT_OK;
  rt_kernel_hash(&k, hash);
  gen_kernel_clear(&k);
  c->left--;
  return MMT_OK;
}

mmt_status tn_rekey(const char *path, int64_t *rekeyed, int64_t *left, ut_err *err) {
  db_handle *db = NULL;
  rekey_ctx c = {0};
  *rekeyed = *left = 0;
  mmt_status rc = db_open(path, false, &db, err);
  if (!rc) rc = db_rekey(db, rekey_row, &c, rekeyed, err);
  db_close(db);
  for (int i = 0; i < c.n; i++) gen_free(c.v[i].t);
  free(c.v);
  *left = rc ? 0 : c.left;
  return rc;
}
