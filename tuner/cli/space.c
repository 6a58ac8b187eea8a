/*
 * cli/space.c -- `mmtune space TEMPLATE`: the configs of a template that pass its
 * constraints, one a line; with --problem, those valid for a problem and its kernel's
 * requirements.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/inspect.h"
#include "cli/opts.h"
#include "gen.h"

static const tn_opt space_opts[] = {
    {"problem", 'p', "MxNxK",
     "only configs valid for this problem (lda=K, ldb=N, ldc=N, 16-byte aligned)"},
    {"dtype", 0, "DTYPE", "element type the kernels are emitted for with --problem (default f32)"},
    {"layout", 'l', "LAYOUT", "with --problem: nn (default), nt, tn or tt (t: stored transposed)"},
    {"count", 'c', NULL, "print only the number of configs"},
};
static const tn_cmd_spec space_spec = {
    "space", "TEMPLATE [--problem MxNxK] [--count]",
    "Prints each config of TEMPLATE that passes its constraints, one per line in canonical\n"
    "form (name=value,...).  With --problem, also the problem constraints and the kernel's\n"
    "requirements (multiples of M/N/K, alignment).",
    space_opts, 4};

typedef struct {
  const gen_problem *problem; /* NULL: configs alone */
  bool count_only;
  uint64_t count;
} space_walk;

static mmt_status space_visit(gen_template *t, const gen_config *cfg, void *user, ut_err *e) {
  space_walk *w = user;
  if (w->problem) {
    gen_kernel k;
    mmt_status rc = gen_emit(t, cfg, w->problem->dtype, w->problem->layout, &k, e);
    if (rc != MMT_OK) return rc;
    bool met = gen_requires_met(&k.requires, w->problem);
    gen_kernel_clear(&k);
    if (!met) return MMT_OK;
  }
  w->count++;
  if (w->count_only) return MMT_OK;
  char text[1024];
  mmt_status rc = gen_config_format(t, cfg, text, sizeof text, e);
  if (rc == MMT_OK) printf("%s\n", text);
  return rc;
}

/* The --problem of space as a gen_problem (packed rows in its layout, 16-byte aligned). */
static int space_problem(const tn_opts *o, const gen_template *t, gen_problem *p) {
  const char *text = tn_opts_get(o, "problem");
  tn_shape s;
  ut_err e;
  int rc = tn_template_dtype("space", o, t, &p->dtype);
  if (rc != TN_EXIT_OK) return rc;
  if ((rc = tn_template_layout("space", o, t, &p->layout)) != TN_EXIT_OK) return rc;
  if (tn_parse_shape(text, &s, &e) != MMT_OK)
    return tn_usage_error("space", "--problem: %s", e.msg);
  int64_t ld[3];
  gen_min_ld(p->layout, s.m, s.n, s.k, ld);
  p->m = s.m, p->n = s.n, p->k = s.k;
  p->lda = ld[0], p->ldb = ld[1], p->ldc = ld[2];
  p->align_bytes = 16;
  return TN_EXIT_OK;
}

int tn_cmd_space(int argc, char **argv) {
  tn_opts o;
  gen_template *t = NULL;
  gen_problem problem = {0};
  space_walk w = {NULL, false, 0};
  int rc = tn_opts_parse(&space_spec, argc, argv, &o);
  if (rc != TN_EXIT_OK || o.help) goto cleanup;
  if (o.npos != 1) {
    rc = o.npos == 0 ? tn_usage_error("space", "missing TEMPLATE (see mmtune templates)")
                     : tn_usage_error("space", "unexpected argument '%s'", o.pos[1]);
    goto cleanup;
  }
  if ((rc = tn_load_template("space", o.pos[0], &t)) != TN_EXIT_OK) goto cleanup;
  if (tn_opts_has(&o, "problem")) {
    if ((rc = space_problem(&o, t, &problem)) != TN_EXIT_OK) goto cleanup;
    w.problem = &problem;
  } else if (tn_opts_has(&o, "dtype") || tn_opts_has(&o, "layout")) {
    rc = tn_usage_error("space", "--%s needs --problem",
                        tn_opts_has(&o, "dtype") ? "dtype" : "layout");
    goto cleanup;
  }
  w.count_only = tn_opts_has(&o, "count");
  ut_err e;
  const tn_space_filter filter = {w.problem, NULL, NULL, NULL};
  if (tn_each_valid(t, &filter, space_visit, &w, &e) != MMT_OK) {
    rc = tn_fail("space", "%s", e.msg);
    goto cleanup;
  }
  if (w.count_only) printf("%llu\n", (unsigned long long)w.count);
cleanup:
  gen_free(t);
  tn_opts_free(&o);
  return rc;
}
