/* cli/inspect.c -- see cli/inspect.h. */
#include "cli/inspect.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

mmt_status tn_each_valid(gen_template *t, const tn_space_filter *f, tn_config_fn fn, void *user,
                         ut_err *e) {
  uint64_t size = gen_space_size(t);
  for (uint64_t idx = 0; idx < size; idx++) {
    gen_config cfg;
    bool valid = false;
    gen_config_at(t, idx, &cfg);
    mmt_status rc = f->dtype
                        ? gen_check_op_for(t, &cfg, f->dtype, f->layout, f->op, &valid, NULL, 0, e)
                        : gen_check(t, &cfg, f->problem, &valid, NULL, 0, e);
    if (rc == MMT_OK && valid) rc = fn(t, &cfg, user, e);
    if (rc != MMT_OK) return rc;
  }
  return MMT_OK;
}

int tn_load_template(const char *cmd, char *name, gen_template **t) {
  gen_template **ts = NULL;
  int n = 0;
  int rc = tn_load_templates(cmd, &name, 1, &ts, &n);
  *t = rc == TN_EXIT_OK ? ts[0] : NULL;
  free(ts);
  return rc;
}

int tn_template_layout(const char *cmd, const tn_opts *o, const gen_template *t,
                       const char **layout) {
  int rc = tn_opt_layout(cmd, tn_opts_get(o, "layout"), layout);
  if (rc == TN_EXIT_OK && !gen_supports_layout(t, *layout))
    rc = tn_usage_error(cmd, "template '%s' does not support layout '%s'", gen_name(t), *layout);
  return rc;
}

int tn_template_dtype(const char *cmd, const tn_opts *o, const gen_template *t,
                      const char **dtype) {
  int rc = tn_opt_dtype(cmd, tn_opts_get(o, "dtype"), dtype);
  if (rc == TN_EXIT_OK && !gen_supports_dtype(t, *dtype))
    rc = tn_usage_error(cmd, "template '%s' does not support dtype '%s'", gen_name(t), *dtype);
  return rc;
}

int tn_first_line_len(const char *s) { return (int)strcspn(s, "\r\n"); }

int tn_width_of(int w, const char *s) { return (int)strlen(s) > w ? (int)strlen(s) : w; }
