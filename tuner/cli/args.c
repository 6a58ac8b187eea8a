/* cli/args.c -- see cli/args.h.  Strict parsing: what is accepted is exactly what is documented. */
#include "cli/args.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Longest piece of user text quoted in a message; longer text is cut and ends in "...". */
#define QUOTE_MAX 80

/* Copies text into buf for quoting in a one-line message: a tab becomes a space, other
 * control characters (a newline, a carriage return) become '?', and long text is cut. */
static const char *quote(const char *text, char *buf, size_t size) {
  size_t n = 0;
  if (!text) text = "(null)";
  for (; text[n] && n + 4 < size && n < QUOTE_MAX; n++) {
    unsigned char ch = (unsigned char)text[n];
    buf[n] = ch == '\t' ? ' ' : (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
  }
  if (text[n]) {
    memcpy(buf + n, "...", 3);
    n += 3;
  }
  buf[n] = '\0';
  return buf;
}

static bool is_digit(char ch) { return ch >= '0' && ch <= '9'; }

mmt_status tn_parse_i64(const char *text, const char *what, int64_t min, int64_t max, int64_t *out,
                        ut_err *err) {
  char q[QUOTE_MAX + 8];
  const char *fmt = "%s must be an integer in [%lld, %lld], got '%s'%s";
  /* strtoll alone would skip leading spaces and take a '+' or a '-': only digits, and a '-'
   * when negative values are allowed, may start the text. */
  bool sign_ok = min < 0 && text && text[0] == '-' && is_digit(text[1]);
  if (!text || !(is_digit(text[0]) || sign_ok))
    return ut_fail(err, MMT_ERR_INVALID_ARG, fmt, what, (long long)min, (long long)max,
                   quote(text, q, sizeof q), "");
  char *end = NULL;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (*end != '\0')
    return ut_fail(err, MMT_ERR_INVALID_ARG, fmt, what, (long long)min, (long long)max,
                   quote(text, q, sizeof q), "");
  /* Too large a number has valid digits, so the message says why it is refused. */
  if (errno == ERANGE || v > max)
    return ut_fail(err, MMT_ERR_INVALID_ARG, fmt, what, (long long)min, (long long)max,
                   quote(text, q, sizeof q), " (out of range)");
  if (v < min)
    return ut_fail(err, MMT_ERR_INVALID_ARG, fmt, what, (long long)min, (long long)max,
                   quote(text, q, sizeof q), "");
  *out = (int64_t)v;
  return MMT_OK;
}

/* tn_parse_seconds and tn_parse_positive; `kind` completes "must be a positive ...". */
static mmt_status parse_positive(const char *text, const char *what, const char *kind, double max,
                                 double *out, ut_err *err) {
  char q[QUOTE_MAX + 8];
  const char *fmt = "%s must be a positive %s, got '%s'";
  /* Plain decimal only ("2", "0.5", "1e3"): strtod would also take spaces, signs, "inf",
   * "nan" and hexadecimal. */
  bool ok = text && (is_digit(text[0]) || (text[0] == '.' && is_digit(text[1])));
  for (const char *p = text; ok && *p; p++)
    ok = is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E' ||
         ((*p == '+' || *p == '-') && (p[-1] == 'e' || p[-1] == 'E'));
  if (!ok) return ut_fail(err, MMT_ERR_INVALID_ARG, fmt, what, kind, quote(text, q, sizeof q));
  char *end = NULL;
  errno = 0;
  double v = strtod(text, &end);
  /* An underflow ("1e-999") is not positive either; an overflow ("1e999", the only way to
   * get infinity past the check above) is out of range. */
  if (*end != '\0' || !(v > 0.0) || (errno == ERANGE && v < 1.0))
    return ut_fail(err, MMT_ERR_INVALID_ARG, fmt, what, kind, quote(text, q, sizeof q));
  if (errno == ERANGE || !isfinite(v) || v > max)
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "%s must be a positive %s, at most %g, got '%s' "
                   "(out of range)",
                   what, kind, max, quote(text, q, sizeof q));
  *out = v;
  return MMT_OK;
}

mmt_status tn_parse_seconds(const char *text, const char *what, double max, double *out,
                            ut_err *err) {
  return parse_positive(text, what, "number of seconds", max, out, err);
}

mmt_status tn_parse_positive(const char *text, const char *what, double max, double *out,
                             ut_err *err) {
  return parse_positive(text, what, "number", max, out, err);
}

/* Parses the three fields of a shape; fields[i] are NUL-terminated. */
static mmt_status parse_dims(char *const fields[3], tn_shape *out, ut_err *err) {
  static const char *const names[3] = {"M", "N", "K"};
  int64_t v[3];
  for (int i = 0; i < 3; i++) {
    mmt_status rc = tn_parse_i64(fields[i], names[i], 1, TN_DIM_MAX, &v[i], err);
    if (rc != MMT_OK) return rc;
  }
  out->m = v[0];
  out->n = v[1];
  out->k = v[2];
  return MMT_OK;
}

mmt_status tn_parse_shape(const char *text, tn_shape *out, ut_err *err) {
  char q[QUOTE_MAX + 8];
  if (!text)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "shape must be MxNxK (e.g. 1024x1024x1024), got ''");
  char *copy = strdup(text);
  if (!copy) return ut_fail(err, MMT_ERR_NOMEM, "out of memory parsing shape");
  char *fields[3] = {copy, NULL, NULL};
  int nfields = 1;
  for (char *p = copy; *p; p++) {
    if (*p != 'x') continue;
    if (nfields == 3) {
      nfields = 4; /* too many */
      break;
    }
    *p = '\0';
    fields[nfields++] = p + 1;
  }
  mmt_status rc;
  if (nfields != 3) {
    rc = ut_fail(err, MMT_ERR_INVALID_ARG, "shape must be MxNxK (e.g. 1024x1024x1024), got '%s'",
                 quote(text, q, sizeof q));
  } else {
    rc = parse_dims(fields, out, err);
    if (rc != MMT_OK) ut_err_prefix(err, "shape '%s'", quote(text, q, sizeof q));
  }
  free(copy);
  return rc;
}

/* Appends one shape to a growing array. */
static mmt_status push_shape(tn_shape **shapes, int *count, int *cap, tn_shape s, ut_err *err) {
  if (*count == *cap) {
    if (*cap > (1 << 28)) return ut_fail(err, MMT_ERR_INVALID_ARG, "too many shapes");
    int ncap = *cap ? *cap * 2 : 16;
    tn_shape *p = realloc(*shapes, (size_t)ncap * sizeof *p);
    if (!p) return ut_fail(err, MMT_ERR_NOMEM, "out of memory reading shapes");
    *shapes = p;
    *cap = ncap;
  }
  (*shapes)[(*count)++] = s;
  return MMT_OK;
}

/* One line of a shapes file, its comment already cut off: blank, "M N K" or "MxNxK", then
 * (extra non-NULL) "epilogue=OP" and "batch=N".  *found says whether it held a shape. */
static mmt_status parse_shape_line(char *line, tn_shape *out, tn_shape_extra *extra, bool *found,
                                   ut_err *err) {
  static const char *const space = " \t\r\v\f";
  char shown[QUOTE_MAX + 8];
  line += strspn(line, space);
  quote(line, shown, sizeof shown); /* before strtok_r cuts the line */
  char *fields[3] = {NULL, NULL, NULL};
  int nfields = 0;
  char *save = NULL;
  *found = false;
  if (extra) memset(extra, 0, sizeof *extra);
  for (char *tok = strtok_r(line, space, &save); tok; tok = strtok_r(NULL, space, &save)) {
    if (!strncmp(tok, "epilogue=", 9) || !strncmp(tok, "batch=", 6)) {
      if (!extra)
        return ut_fail(err, MMT_ERR_INVALID_ARG, "'%.*s' is for mmtune tune's shapes files only",
                       (int)strcspn(tok, "="), tok);
      if (tok[0] == 'e' && (strlen(tok + 9) == 0 || strlen(tok + 9) >= TN_SHAPE_OP_MAX))
        return ut_fail(err, MMT_ERR_INVALID_ARG, "epilogue= must be an op of 1 to %d characters",
                       TN_SHAPE_OP_MAX - 1);
      if (tok[0] == 'e') {
        snprintf(extra->op, sizeof extra->op, "%s", tok + 9);
      } else {
        mmt_status rc = tn_parse_i64(tok + 6, "batch", 1, 65535, &extra->batch, err);
        if (rc) return rc;
      }
      continue;
    }
    if (nfields < 3) fields[nfields] = tok;
    nfields++;
  }
  if (nfields == 0) {
    if (extra && (extra->op[0] || extra->batch))
      return ut_fail(err, MMT_ERR_INVALID_ARG, "epilogue= or batch= without a shape in '%s'",
                     shown);
    return MMT_OK;
  }
  *found = true;
  if (nfields == 1 && strchr(fields[0], 'x')) return tn_parse_shape(fields[0], out, err);
  if (nfields == 3) return parse_dims(fields, out, err);
  return ut_fail(err, MMT_ERR_INVALID_ARG, "expected 'M N K' or 'MxNxK', got '%s'", shown);
}

/* Parses the text of a shapes file (modified in place). */
static mmt_status parse_shapes_text(const char *path, char *data, tn_shape **shapes,
                                    tn_shape_extra **extra, int *count, ut_err *err) {
  char q[QUOTE_MAX + 8];
  int cap = 0;
  int lineno = 0;
  char *line = data;
  while (line) {
    char *next = strchr(line, '\n');
    if (next) *next++ = '\0';
    lineno++;
    char *hash = strchr(line, '#');
    if (hash) *hash = '\0';
    tn_shape s;
    tn_shape_extra x;
    bool found = false;
    const int before = cap;
    mmt_status rc = parse_shape_line(line, &s, extra ? &x : NULL, &found, err);
    if (rc == MMT_OK && found) rc = push_shape(shapes, count, &cap, s, err);
    if (rc == MMT_OK && found && extra) {
      if (cap != before || !*extra) { /* keep the extras' capacity with the shapes' */
        tn_shape_extra *p = realloc(*extra, (size_t)cap * sizeof *p);
        if (!p)
          rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory reading shapes");
        else
          *extra = p;
      }
      if (rc == MMT_OK) (*extra)[*count - 1] = x;
    }
    if (rc != MMT_OK) {
      ut_err_prefix(err, "shapes file '%s' line %d", quote(path, q, sizeof q), lineno);
      return rc;
    }
    line = next;
  }
  if (*count == 0)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "shapes file '%s' has no shapes",
                   quote(path, q, sizeof q));
  return MMT_OK;
}

static mmt_status parse_shapes_file(const char *path, tn_shape **shapes, tn_shape_extra **extra,
                                    int *count, ut_err *err) {
  char q[QUOTE_MAX + 8];
  char *data = NULL;
  size_t len = 0;
  mmt_status rc = ut_read_file(path, &data, &len, err);
  if (rc != MMT_OK) goto cleanup;
  if (strlen(data) != len) {
    rc = ut_fail(err, MMT_ERR_INVALID_ARG, "shapes file '%s' is not text (it holds NUL bytes)",
                 quote(path, q, sizeof q));
    goto cleanup;
  }
  rc = parse_shapes_text(path, data, shapes, extra, count, err);
cleanup:
  free(data);
  return rc;
}

static mmt_status parse_shapes_list(const char *arg, tn_shape **shapes, int *count, ut_err *err) {
  char **items = NULL;
  int n = 0;
  int cap = 0;
  mmt_status rc = tn_split_list(arg, "shapes list", &items, &n, err);
  for (int i = 0; rc == MMT_OK && i < n; i++) {
    tn_shape s;
    rc = tn_parse_shape(items[i], &s, err);
    if (rc == MMT_OK) rc = push_shape(shapes, count, &cap, s, err);
  }
  tn_list_free(items, n);
  return rc;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}

mmt_status tn_parse_shapes(const char *arg, tn_shape **shapes, int *count, ut_err *err) {
  return tn_parse_shapes_extra(arg, shapes, NULL, count, err);
}

mmt_status tn_parse_shapes_extra(const char *arg, tn_shape **shapes, tn_shape_extra **extra,
                                 int *count, ut_err *err) {
  char q[QUOTE_MAX + 8];
  struct stat st;
  mmt_status rc;
  *shapes = NULL;
  if (extra) *extra = NULL;
  *count = 0;
  if (!arg || !arg[0])
    return ut_fail(err, MMT_ERR_INVALID_ARG,
                   "shapes must be a file or a comma-separated list of MxNxK, got ''");
  int stat_errno = stat(arg, &st) == 0 ? 0 : errno;
  if (stat_errno == 0) {
    if (S_ISREG(st.st_mode))
      rc = parse_shapes_file(arg, shapes, extra, count, err);
    else
      rc = ut_fail(err, MMT_ERR_IO, "shapes file '%s' is not a regular file",
                   quote(arg, q, sizeof q));
  } else if (strchr(arg, '/') || ends_with(arg, ".txt")) {
    if (stat_errno == ENOENT || stat_errno == ENOTDIR)
      rc = ut_fail(err, MMT_ERR_IO, "shapes file '%s' not found", quote(arg, q, sizeof q));
    else
      rc = ut_fail(err, MMT_ERR_IO, "shapes file '%s': %s", quote(arg, q, sizeof q),
                   strerror(stat_errno));
  } else {
    rc = parse_shapes_list(arg, shapes, count, err);
    if (rc == MMT_OK && extra && !(*extra = calloc((size_t)*count, sizeof **extra)))
      rc = ut_fail(err, MMT_ERR_NOMEM, "out of memory reading shapes");
  }
  if (rc != MMT_OK) {
    free(*shapes);
    *shapes = NULL;
    if (extra) {
      free(*extra);
      *extra = NULL;
    }
    *count = 0;
  }
  return rc;
}

mmt_status tn_split_list(const char *arg, const char *what, char ***items, int *count,
                         ut_err *err) {
  char q[QUOTE_MAX + 8];
  *items = NULL;
  *count = 0;
  if (!arg || !arg[0])
    return ut_fail(err, MMT_ERR_INVALID_ARG, "%s must be a comma-separated list, got ''", what);
  size_t n = 1;
  for (const char *p = arg; *p; p++) n += *p == ',';
  if (n > (1u << 28)) return ut_fail(err, MMT_ERR_INVALID_ARG, "%s has too many items", what);
  char **list = calloc(n, sizeof *list);
  if (!list) return ut_fail(err, MMT_ERR_NOMEM, "out of memory splitting %s", what);
  const char *start = arg;
  for (size_t i = 0; i < n; i++) {
    size_t len = strcspn(start, ",");
    if (len == 0) {
      tn_list_free(list, (int)i);
      return ut_fail(err, MMT_ERR_INVALID_ARG, "%s has an empty item in '%s'", what,
                     quote(arg, q, sizeof q));
    }
    list[i] = strndup(start, len);
    if (!list[i]) {
      tn_list_free(list, (int)i);
      return ut_fail(err, MMT_ERR_NOMEM, "out of memory splitting %s", what);
    }
    start += len + 1;
  }
  *items = list;
  *count = (int)n;
  return MMT_OK;
}

void tn_list_free(char **items, int count) {
  if (!items) return;
  for (int i = 0; i < count; i++) free(items[i]);
  free(items);
}

mmt_status tn_parse_shard(const char *text, tn_shard *out, ut_err *err) {
  const char *slash = text ? strchr(text, '/') : NULL;
  char index[32];
  int64_t i = 0, n = 0;
  if (!slash || slash == text || (size_t)(slash - text) >= sizeof index)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bad --shard '%s': expected I/N, e.g. 0/4",
                   text ? text : "");
  memcpy(index, text, (size_t)(slash - text));
  index[slash - text] = '\0';
  ut_err e;
  if (tn_parse_i64(slash + 1, "N", 1, TN_SHARD_MAX, &n, &e) != MMT_OK ||
      tn_parse_i64(index, "I", 0, n - 1, &i, &e) != MMT_OK)
    return ut_fail(err, MMT_ERR_INVALID_ARG, "bad --shard '%s': %s", text, e.msg);
  *out = (tn_shard){(int)i, (int)n};
  return MMT_OK;
}
