/*
 * cli/inspect.h -- what the template commands (templates, space, emit, compile, show) share:
 * walking a template's valid configs, the template a command names with the dtype and layout
 * options it must support, and the widths of one-line text.  Prefix tn_.
 */
#ifndef MMT_TN_CLI_INSPECT_H
#define MMT_TN_CLI_INSPECT_H

#include "cli/opts.h"
#include "gen.h"

/* What tn_each_valid calls for each config it visits; a status other than MMT_OK stops the
 * walk and is returned. */
typedef mmt_status (*tn_config_fn)(gen_template *t, const gen_config *cfg, void *user, ut_err *e);

/* Which configs tn_each_valid visits: those valid for a problem, for a dtype and layout (any
 * problem), or for any of the template's dtypes and layouts (both NULL). */
typedef struct {
  const gen_problem *problem;
  const char *dtype, *layout;
  const gen_op *op; /* with dtype: valid for this epilogue (NULL: the plain GEMM) */
} tn_space_filter;

/* Calls fn for each config of t, in index order, that passes the constraints as f says.
 * Errors: the constraints' (gen_check), or fn's. */
mmt_status tn_each_valid(gen_template *t, const tn_space_filter *f, tn_config_fn fn, void *user,
                         ut_err *e);

/* Loads one template named on the command line into *t (owned: gen_free; NULL on failure);
 * an exit code as tn_load_templates. */
int tn_load_template(const char *cmd, char *name, gen_template **t);
/* The --layout option of a command (tn_opt_layout), which template t must support: exit 2
 * naming both otherwise. */
int tn_template_layout(const char *cmd, const tn_opts *o, const gen_template *t,
                       const char **layout);
/* The --dtype option of a command (tn_opt_dtype), which template t must support: exit 2
 * naming both otherwise. */
int tn_template_dtype(const char *cmd, const tn_opts *o, const gen_template *t, const char **dtype);

/* Length of the first line of s (messages are shown one line each). */
int tn_first_line_len(const char *s);
/* The larger of w and the length of s: a column's width. */
int tn_width_of(int w, const char *s);

#endif /* MMT_TN_CLI_INSPECT_H */
