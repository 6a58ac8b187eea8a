/*
 * cli/templates.c -- `mmtune templates`: every template on the search path, with its dtypes,
 * layouts, parameters and their values, and how many configs of its space are valid.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "cli/cli.h"
#include "cli/inspect.h"
#include "cli/opts.h"
#include "gen.h"

/* Counts the configs it is called for into *(uint64_t *)user. */
static mmt_status count_one(gen_template *t, const gen_config *cfg, void *user, ut_err *e) {
  (void)t, (void)cfg, (void)e;
  (*(uint64_t *)user)++;
  return MMT_OK;
}

static const tn_cmd_spec templates_spec = {
    "templates", "",
    "Lists every template on the search path ($MMTUNE_TEMPLATE_PATH, <prefix>/share/mmtune/\n"
    "templates, the source tree): its dtypes, parameters with their values, the size of its\n"
    "space and how many configs pass its constraints, and its file.  A template that fails\n"
    "to load is listed with its error; the exit code is then 1.",
    NULL, 0};

/* Prints text with every line indented by `indent` spaces. */
static void print_indented(const char *text, int indent) {
  while (*text) {
    int len = tn_first_line_len(text);
    printf("%*s%.*s\n", indent, "", len, text);
    text += len;
    if (*text == '\r') text++;
    if (*text == '\n') text++;
  }
}

static bool describe_template(gen_template *t) {
  printf("%s: %s\n  path:    %s\n  dtypes: ", gen_name(t), gen_description(t), gen_path(t));
  for (int i = 0; i < gen_dtype_count(t); i++) printf(" %s", gen_dtype(t, i));
  printf("\n  layouts:");
  for (int i = 0; i < GEN_LAYOUTS; i++)
    if (gen_supports_layout(t, gen_layout_name(i))) printf(" %s", gen_layout_name(i));
  printf("\n");
  for (int i = 0; i < gen_param_count(t); i++) {
    printf("  %-8s %s =", i == 0 ? "params:" : "", gen_param_name(t, i));
    for (int j = 0; j < gen_param_value_count(t, i); j++)
      printf("%s %lld", j ? "," : "", (long long)gen_param_value(t, i, j));
    printf("\n");
  }
  uint64_t valid = 0;
  ut_err e;
  const tn_space_filter any = {NULL, NULL, NULL, NULL};
  if (tn_each_valid(t, &any, count_one, &valid, &e) != MMT_OK) {
    printf("  space:   %llu configs; constraints failed:\n", (unsigned long long)gen_space_size(t));
    print_indented(e.msg, 4);
    return false;
  }
  printf("  space:   %llu configs, %llu valid\n", (unsigned long long)gen_space_size(t),
         (unsigned long long)valid);
  return true;
}

int tn_cmd_templates(int argc, char **argv) {
  tn_opts o;
  int rc = tn_opts_parse(&templates_spec, argc, argv, &o);
  if (rc == TN_EXIT_OK && !o.help && o.npos > 0)
    rc = tn_usage_error("templates", "unexpected argument '%s'", o.pos[0]);
  tn_opts_free(&o);
  if (rc != TN_EXIT_OK || o.help) return rc;

  char **names = NULL;
  int n = 0;
  ut_err e;
  if (gen_list(&names, &n, &e) != MMT_OK) return tn_fail("templates", "%s", e.msg);
  if (n == 0) rc = tn_fail("templates", "no templates on the search path (MMTUNE_TEMPLATE_PATH)");
  for (int i = 0; i < n; i++) {
    gen_template *t = NULL;
    if (i > 0) printf("\n");
    if (gen_load_named(names[i], &t, &e) != MMT_OK) {
      printf("%s: failed to load\n", names[i]);
      print_indented(e.msg, 4);
      rc = TN_EXIT_FAIL;
    } else if (!describe_template(t)) {
      rc = TN_EXIT_FAIL;
    }
    gen_free(t);
  }
  gen_names_free(names, n);
  return rc;
}
