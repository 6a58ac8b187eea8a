/*
 * cli/opts.c -- the option parser and option helpers shared by the CLI's commands (cli/opts.h),
 * and tn_usage_error / tn_fail.
 */
#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/opts.h"
#include "mmtune.h"

/* ---- messages ------------------------------------------------------------------------- */

/* Prints "mmtune[ cmd]: message" as one line (newlines in the message become spaces). */
static void print_line_v(const char *cmd, const char *fmt, va_list ap) {
  char msg[2048];
  vsnprintf(msg, sizeof msg, fmt, ap);
  for (char *c = msg; *c; c++)
    if (*c == '\n' || *c == '\r') *c = ' ';
  size_t len = strlen(msg);
  while (len > 0 && msg[len - 1] == ' ') msg[--len] = '\0';
  fflush(stdout);
  if (cmd)
    fprintf(stderr, "mmtune %s: %s\n", cmd, msg);
  else
    fprintf(stderr, "mmtune: %s\n", msg);
}

int tn_usage_error(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  print_line_v(cmd, fmt, ap);
  va_end(ap);
  return TN_EXIT_USAGE;
}

int tn_fail(const char *cmd, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  print_line_v(cmd, fmt, ap);
  va_end(ap);
  return TN_EXIT_FAIL;
}

/* ---- option parsing ------------------------------------------------------------------- */

static int find_long(const tn_cmd_spec *s, const char *name, size_t len) {
  for (int i = 0; i < s->nopts; i++)
    if (strlen(s->opts[i].name) == len && strncmp(s->opts[i].name, name, len) == 0) return i;
  return -1;
}

static int find_short(const tn_cmd_spec *s, char c) {
  for (int i = 0; i < s->nopts; i++)
    if (s->opts[i].short_name == c) return i;
  return -1;
}

static bool is_positional(const char *a) {
  return a[0] != '-' || a[1] == '\0' || isdigit((unsigned char)a[1]);
}

/* argv[*i] is "--name[=value]". */
static int parse_long(const tn_cmd_spec *s, int argc, char **argv, int *i, tn_opts *o) {
  const char *name = argv[*i] + 2;
  const char *eq = strchr(name, '=');
  size_t len = eq ? (size_t)(eq - name) : strlen(name);
  int idx = find_long(s, name, len);
  if (idx < 0)
    return tn_usage_error(s->name, "unknown option '--%.*s' (see mmtune %s --help)", (int)len, name,
                          s->name);
  const char *full = s->opts[idx].name;
  if (!s->opts[idx].arg) {
    if (eq) return tn_usage_error(s->name, "option '--%s' takes no value", full);
    o->value[idx] = "";
  } else if (eq) {
    o->value[idx] = eq + 1;
  } else if (*i + 1 < argc) {
    o->value[idx] = argv[++*i];
  } else {
    return tn_usage_error(s->name, "option '--%s' needs a value (%s)", full, s->opts[idx].arg);
  }
  return TN_EXIT_OK;
}

/* argv[*i] is "-x", "-x VALUE" or "-xVALUE". */
static int parse_short(const tn_cmd_spec *s, int argc, char **argv, int *i, tn_opts *o) {
  const char *a = argv[*i];
  int idx = find_short(s, a[1]);
  if (idx < 0 || (!s->opts[idx].arg && a[2] != '\0'))
    return tn_usage_error(s->name, "unknown option '%s' (see mmtune %s --help)", a, s->name);
  if (!s->opts[idx].arg)
    o->value[idx] = "";
  else if (a[2] != '\0')
    o->value[idx] = a + 2;
  else if (*i + 1 < argc)
    o->value[idx] = argv[++*i];
  else
    return tn_usage_error(s->name, "option '-%c' needs a value (%s)", a[1], s->opts[idx].arg);
  return TN_EXIT_OK;
}

int tn_opts_parse(const tn_cmd_spec *spec, int argc, char **argv, tn_opts *out) {
  memset(out, 0, sizeof *out);
  out->spec = spec;
  out->pos = calloc(argc > 0 ? (size_t)argc : 1, sizeof *out->pos);
  if (!out->pos) return tn_fail(spec->name, "out of memory");
  bool only_pos = false;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (only_pos || is_positional(a)) {
      out->pos[out->npos++] = argv[i];
    } else if (strcmp(a, "--") == 0) {
      only_pos = true;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      out->help = true;
      tn_opts_print_help(spec);
      return TN_EXIT_OK;
    } else {
      int rc = a[1] == '-' ? parse_long(spec, argc, argv, &i, out)
                           : parse_short(spec, argc, argv, &i, out);
      if (rc != TN_EXIT_OK) return rc;
    }
  }
  return TN_EXIT_OK;
}

void tn_opts_free(tn_opts *o) {
  free(o->pos);
  o->pos = NULL;
  o->npos = 0;
}

const char *tn_opts_get(const tn_opts *o, const char *name) {
  int idx = find_long(o->spec, name, strlen(name));
  return idx < 0 ? NULL : o->value[idx];
}

bool tn_opts_has(const tn_opts *o, const char *name) { return tn_opts_get(o, name) != NULL; }

/* "-j, --jobs N" into buf. */
static void format_opt(const tn_opt *opt, char *buf, size_t len) {
  char shrt[8] = "    ";
  if (opt->short_name) snprintf(shrt, sizeof shrt, "-%c, ", opt->short_name);
  snprintf(buf, len, "%s--%s%s%s", shrt, opt->name, opt->arg ? " " : "", opt->arg ? opt->arg : "");
}

/* How --help prints: text for a terminal, or Markdown for docs/cli.md (mmtune help
 * --markdown), from the same tables so the two never drift. */
static bool g_markdown;

void tn_opts_help_markdown(bool on) { g_markdown = on; }

/* s with '|' escaped, for a Markdown table cell. */
static void put_cell(const char *s) {
  for (; *s; s++) {
    if (*s == '|') putchar('\\');
    putchar(*s);
  }
}

static void print_help_markdown(const tn_cmd_spec *spec, const tn_opt *help_opt) {
  char buf[128];
  /* the body keeps its line breaks and aligned lists as --help prints them */
  printf("## mmtune %s\n\n```\nmmtune %s %s\n\n%s\n```\n\n| option | meaning |\n| --- | --- |\n",
         spec->name, spec->name, spec->usage, spec->about);
  for (int i = 0; i <= spec->nopts; i++) {
    const tn_opt *opt = i < spec->nopts ? &spec->opts[i] : help_opt;
    format_opt(opt, buf, sizeof buf);
    const char *text = buf;
    while (*text == ' ') text++; /* the column a short name would take */
    printf("| `%s` | ", text);
    put_cell(opt->help);
    printf(" |\n");
  }
  printf("\n");
}

void tn_opts_print_help(const tn_cmd_spec *spec) {
  static const tn_opt help_opt = {"help", 'h', NULL, "print this help"};
  if (g_markdown) {
    print_help_markdown(spec, &help_opt);
    return;
  }
  char buf[128];
  int width = (int)strlen("-h, --help");
  for (int i = 0; i < spec->nopts; i++) {
    format_opt(&spec->opts[i], buf, sizeof buf);
    if ((int)strlen(buf) > width) width = (int)strlen(buf);
  }
  printf("usage: mmtune %s %s\n\n%s\n\noptions:\n", spec->name, spec->usage, spec->about);
  for (int i = 0; i <= spec->nopts; i++) {
    const tn_opt *opt = i < spec->nopts ? &spec->opts[i] : &help_opt;
    format_opt(opt, buf, sizeof buf);
    printf("  %-*s  %s\n", width, buf, opt->help);
  }
}

/* ---- shared option values ------------------------------------------------------------- */

int tn_opt_i64(const char *cmd, const char *text, const char *what, int64_t min, int64_t max,
               int64_t *out) {
  ut_err e;
  if (tn_parse_i64(text, what, min, max, out, &e) != MMT_OK)
    return tn_usage_error(cmd, "%s", e.msg);
  return TN_EXIT_OK;
}

int tn_opt_device(const char *cmd, const char *text, int *out) {
  int64_t v = 0;
  int rc = tn_opt_i64(cmd, text, "--device", 0, INT_MAX, &v);
  if (rc == TN_EXIT_OK) *out = (int)v;
  return rc;
}

int tn_opt_shard(const char *cmd, const char *text, tn_shard *out) {
  *out = (tn_shard){0, 1};
  ut_err e;
  if (text && tn_parse_shard(text, out, &e) != MMT_OK) return tn_usage_error(cmd, "%s", e.msg);
  return TN_EXIT_OK;
}

int tn_opt_dtype(const char *cmd, const char *text, const char **out) {
  if (!text) text = "f32";
  if (gen_dtype_size(text) == 0) return tn_usage_error(cmd, "unknown dtype '%s'", text);
  *out = text;
  return TN_EXIT_OK;
}

int tn_opt_served_dtype(const char *cmd, const char *text, mmt_dtype *out) {
  int d = 0;
  while (mmt_dtype_name((mmt_dtype)d) && strcmp(mmt_dtype_name((mmt_dtype)d), text)) d++;
  if (!mmt_dtype_name((mmt_dtype)d))
    return tn_usage_error(cmd, "unknown dtype '%s' (f32, tf32, f16, bf16, e4m3 or e5m2)", text);
  *out = (mmt_dtype)d;
  return TN_EXIT_OK;
}

int tn_opt_layout(const char *cmd, const char *text, const char **out) {
  if (!text) text = "nn";
  if (gen_layout_index(text) < 0)
    return tn_usage_error(cmd, "unknown layout '%s' (nn, nt, tn or tt: A's letter first, t = "
                               "stored transposed)", text);
  *out = text;
  return TN_EXIT_OK;
}

int tn_opt_db_path(const char *cmd, const char *text, char *out, size_t outlen) {
  ut_err e;
  mmt_status rc =
      text ? ut_snprintf(out, outlen, &e, "%s", text) : ut_default_db_path(out, outlen, &e);
  if (rc == MMT_OK) return TN_EXIT_OK;
  return text ? tn_usage_error(cmd, "--db: %s", e.msg) : tn_fail(cmd, "%s", e.msg);
}

int tn_opt_shapes(const char *cmd, const char *text, tn_shape **shapes, int *count) {
  ut_err e;
  if (tn_parse_shapes(text, shapes, count, &e) != MMT_OK)
    return tn_usage_error(cmd, "--shapes: %s", e.msg);
  return TN_EXIT_OK;
}

int tn_load_templates(const char *cmd, char **names, int nnames, gen_template ***ts, int *count) {
  *ts = calloc(nnames > 0 ? (size_t)nnames : 1, sizeof **ts);
  *count = 0;
  if (!*ts) return tn_fail(cmd, "out of memory");
  for (int i = 0; i < nnames; i++) {
    ut_err e;
    mmt_status rc = gen_load_named(names[i], &(*ts)[i], &e);
    if (rc != MMT_OK) {
      tn_templates_free(*ts, i);
      *ts = NULL;
      if (rc == MMT_ERR_NOT_FOUND || rc == MMT_ERR_INVALID_ARG)
        return tn_usage_error(cmd, "unknown template '%s' (see mmtune templates)", names[i]);
      fflush(stdout);
      fprintf(stderr, "mmtune %s: %s\n", cmd, e.msg); /* gen's message names the template */
      return TN_EXIT_FAIL;
    }
    *count = i + 1;
  }
  return TN_EXIT_OK;
}

int tn_opt_templates(const char *cmd, const char *list, gen_template ***ts, int *count) {
  ut_err e;
  char **names = NULL;
  int n = 0;
  if (list) {
    if (tn_split_list(list, "--templates", &names, &n, &e) != MMT_OK)
      return tn_usage_error(cmd, "%s", e.msg);
  } else if (gen_list(&names, &n, &e) != MMT_OK) {
    return tn_fail(cmd, "%s", e.msg);
  } else if (n == 0) {
    gen_names_free(names, n);
    return tn_fail(cmd, "no templates on the search path (MMTUNE_TEMPLATE_PATH)");
  }
  int rc = tn_load_templates(cmd, names, n, ts, count);
  if (list)
    tn_list_free(names, n);
  else
    gen_names_free(names, n);
  return rc;
}

void tn_templates_free(gen_template **ts, int count) {
  if (!ts) return;
  for (int i = 0; i < count; i++) gen_free(ts[i]);
  free(ts);
}

int tn_opt_epilogue(const char *cmd, const tn_opts *o, const char *dtype, gen_op *op, bool *has) {
  const char *text = tn_opts_get(o, "epilogue");
  *has = text != NULL;
  if (!text) return TN_EXIT_OK;
  ut_err e;
  if (gen_op_parse(text, dtype, op, &e) != MMT_OK) return tn_usage_error(cmd, "%s", e.msg);
  if (!gen_op_valid(op, dtype))
    return tn_usage_error(cmd, "--epilogue '%s' is not one for %s inputs", text, dtype);
  return TN_EXIT_OK;
}

int tn_opt_measured_epilogue(const char *cmd, const tn_opts *o, const char *dtype, gen_op *op,
                             bool *has) {
  const int ex = tn_opt_epilogue(cmd, o, dtype, op, has);
  if (ex || !op->group) return ex;
  return tn_usage_error(cmd,
                        "--epilogue '%s': grouped ops are not measured here (`tune` measures "
                        "contiguous ones over drawn routings; mmtune-matmul-bench --family "
                        "grouped benches them against cuBLAS)",
                        tn_opts_get(o, "epilogue"));
}
