/*
 * db_row.c -- what a row from outside must be before it enters a database (db_internal.h):
 * every column of a results or searches row checked for its type, range, length and
 * characters, whether it comes from a JSON export or another file.  Merge, import and check
 * all read rows through here, so one rule decides what a database may hold.
 *
 * The ranges are what the rest of mmtune can compute with: sizes as the dispatcher accepts
 * them (0 .. 2^31 - 1), launch figures a kernel can have, times that are finite.  Text is
 * valid UTF-8 without control characters (a newline or tab is allowed in an error message
 * only), short enough for db_result's arrays, and keys (template, dtype, params, op) use only
 * the characters mmtune itself writes there.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"

/* What characters a text column takes. */
typedef enum {
  TX_LABEL,   /* printable UTF-8: a device name, a version, a search's candidates */
  TX_MESSAGE, /* printable UTF-8 and newlines, tabs: an error message */
  TX_NAME,    /* [A-Za-z0-9_], not empty: a template name, a dtype */
  TX_HEX,     /* [0-9a-f]: a template or kernel hash */
  TX_PARAMS,  /* "name=integer,..." (or empty): a config */
  TX_LAYOUT,  /* nn, nt, tn or tt */
  TX_STATUS,  /* a db_status name */
  TX_ORIGIN,  /* [0-9a-z-], not empty: a search time's origin */
  TX_OP,      /* [a-z0-9_=,+.] (or empty): an op's canonical text (gen_op_format) */
} text_class;

typedef enum { K_TEXT, K_INT, K_REAL } col_kind;

typedef struct {
  const char *name;
  col_kind kind;
  text_class text;  /* K_TEXT */
  size_t cap;       /* K_TEXT: bytes including the NUL (the db_result array's size) */
  bool required;    /* K_TEXT: not empty */
  bool absent_ok;   /* a missing member reads as "" (K_TEXT) or absent_int (K_INT): a column
                       newer than the export */
  int64_t min, max; /* K_INT */
  int64_t absent_int; /* K_INT with absent_ok */
  bool nullable;    /* K_REAL: NULL (NaN) allowed; a real is always >= 0 */
  bool inf_ok;      /* K_REAL: +inf allowed (a zero-time row's TFLOP/s, a failed one's error) */
  size_t offset;    /* into db_result (results) or db_search_row (searches) */
  size_t size;      /* K_INT: 4 (int) or 8 (int64_t) */
} col_spec;

#define R_(f) offsetof(db_result, f)
#define TEXT_(nm, cls, f, req)                                                         \
  {.name = nm, .kind = K_TEXT, .text = cls, .cap = sizeof(((db_result *)0)->f),       \
   .offset = R_(f), .required = req}
#define INT_(nm, f, lo, hi)                                                            \
  {.name = nm, .kind = K_INT, .min = lo, .max = hi, .offset = R_(f),                  \
   .size = sizeof(((db_result *)0)->f)}
/* A real >= 0: finite (inf_ok 0) or also +inf (inf_ok 1). */
#define REAL_(nm, f, inf)                                                              \
  {.name = nm, .kind = K_REAL, .inf_ok = inf, .nullable = true, .offset = R_(f)}

#define SIZE_MAX_ INT32_MAX        /* kernels take int sizes (rt_gemm_check_problem) */
#define TIME_MAX_ INT64_C(253402300799) /* 9999-12-31: a Unix time that means a date */

/* The columns of `results` but id, in db_cols order. */
static const col_spec k_result_cols[DB_NCOLS] = {
    TEXT_("device_name", TX_LABEL, device.name, 1),
    TEXT_("device_uuid", TX_LABEL, device.uuid, 0),
    INT_("cc_major", device.cc_major, 1, 99),
    INT_("cc_minor", device.cc_minor, 0, 99),
    INT_("sm_count", device.sm_count, 0, 65535),
    INT_("driver_version", device.driver_version, 0, INT32_MAX),
    TEXT_("nvrtc_version", TX_LABEL, nvrtc_version, 0),
    TEXT_("template_name", TX_NAME, template_name, 1),
    TEXT_("template_hash", TX_HEX, template_hash, 1),
    TEXT_("params", TX_PARAMS, params, 0),
    TEXT_("dtype", TX_NAME, problem.dtype, 1),
    TEXT_("layout", TX_LAYOUT, problem.layout, 1),
    INT_("m", problem.m, 0, SIZE_MAX_),
    INT_("n", problem.n, 0, SIZE_MAX_),
    INT_("k", problem.k, 0, SIZE_MAX_),
    /* absent from exports before version 4: the plain GEMM ("", 1) */
    {.name = "op",
     .kind = K_TEXT,
     .text = TX_OP,
     .cap = DB_OP_MAX,
     .absent_ok = true,
     .offset = R_(problem.op)},
    {.name = "batch",
     .kind = K_INT,
     .min = 1,
     .max = SIZE_MAX_,
     .absent_ok = true,
     .absent_int = 1,
     .offset = R_(problem.batch),
     .size = sizeof(int64_t)},
    {.name = "status",
     .kind = K_TEXT,
     .text = TX_STATUS,
     .cap = 16,
     .required = true,
     .offset = R_(status)},
    TEXT_("error", TX_MESSAGE, error, 0),
    REAL_("ms_min", ms_min, 0),
    REAL_("ms_median", ms_median, 0),
    REAL_("ms_max", ms_max, 0),
    INT_("runs", runs, 0, INT32_MAX),
    REAL_("tflops", tflops, 1),
    REAL_("rel_err", rel_err, 1),
    REAL_("max_err", max_err, 1),
    INT_("regs", regs, -1, 65535),
    INT_("shared_bytes", shared_bytes, -1, INT32_MAX),
    INT_("local_bytes", local_bytes, -1, INT32_MAX),
    INT_("created_at", created_at, 0, TIME_MAX_),
    /* a launch shape the performance model can multiply without overflow */
    INT_("tile_m", launch.tile_m, 0, 65536),
    INT_("tile_n", launch.tile_n, 0, 65536),
    INT_("slices", launch.slices, 0, 65536),
    INT_("threads", launch.threads, 0, 4096),
    INT_("per_sm", launch.per_sm, 0, 1024),
    /* absent from exports before version 3 and files before schema 6: "" (not known) */
    {.name = "kernel_hash",
     .kind = K_TEXT,
     .text = TX_HEX,
     .cap = 17,
     .absent_ok = true,
     .offset = R_(kernel_hash)},
};
#undef R_
#undef TEXT_
#undef INT_
#undef REAL_

#define S_(f) offsetof(db_search_row, f)
static const col_spec k_search_cols[DB_SEARCH_NCOLS] = {
    {.name = "device_name",
     .kind = K_TEXT,
     .text = TX_LABEL,
     .cap = 128,
     .required = true,
     .offset = S_(device_name)},
    {.name = "dtype",
     .kind = K_TEXT,
     .text = TX_NAME,
     .cap = 8,
     .required = true,
     .offset = S_(dtype)},
    {.name = "layout",
     .kind = K_TEXT,
     .text = TX_LAYOUT,
     .cap = 8,
     .required = true,
     .offset = S_(layout)},
    {.name = "m", .kind = K_INT, .min = 0, .max = SIZE_MAX_, .offset = S_(m), .size = 8},
    {.name = "n", .kind = K_INT, .min = 0, .max = SIZE_MAX_, .offset = S_(n), .size = 8},
    {.name = "k", .kind = K_INT, .min = 0, .max = SIZE_MAX_, .offset = S_(k), .size = 8},
    {.name = "op",
     .kind = K_TEXT,
     .text = TX_OP,
     .cap = DB_OP_MAX,
     .absent_ok = true,
     .offset = S_(op)},
    {.name = "batch",
     .kind = K_INT,
     .min = 1,
     .max = SIZE_MAX_,
     .absent_ok = true,
     .absent_int = 1,
     .offset = S_(batch),
     .size = 8},
    {.name = "candidates",
     .kind = K_TEXT,
     .text = TX_LABEL,
     .cap = DB_CANDIDATES_MAX,
     .required = true,
     .offset = S_(candidates)},
    {.name = "seconds", .kind = K_REAL, .offset = S_(seconds)},
    {.name = "updated_at",
     .kind = K_INT,
     .min = 0,
     .max = TIME_MAX_,
     .offset = S_(updated_at),
     .size = 8},
    {.name = "origin",
     .kind = K_TEXT,
     .text = TX_ORIGIN,
     .cap = DB_ORIGIN_MAX,
     .required = true,
     .offset = S_(origin)},
};
#undef S_

const char *db_col_name(int i) { return i >= 0 && i < DB_NCOLS ? k_result_cols[i].name : NULL; }
const char *db_search_col_name(int i) {
  return i >= 0 && i < DB_SEARCH_NCOLS ? k_search_cols[i].name : NULL;
}

/* ---- text ---------------------------------------------------------------------------------- */

static bool is_name_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* "name=integer" pairs joined by commas: what gen_config_format writes. */
static bool params_syntax(const char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    size_t name = i;
    while (i < n && is_name_char((unsigned char)s[i])) i++;
    if (i == name || i >= n || s[i++] != '=') return false;
    if (i < n && s[i] == '-') i++;
    size_t digits = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == digits || i - digits > 18) return false;
    if (i < n && s[i++] != ',') return false;
    if (i == n && s[n - 1] == ',') return false;
  }
  return true;
}

/* Whether s[0..n) belongs to class cls: NULL, or why not. */
static const char *text_refusal(text_class cls, const char *s, size_t n) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < n;) {
    size_t len = ut_utf8_len(u + i, n - i);
    if (!len) return "is not valid UTF-8";
    unsigned char c = u[i];
    if (c == 0) return "holds a NUL character";
    bool control = c < 0x20 || c == 0x7f;
    if (control && !(cls == TX_MESSAGE && (c == '\n' || c == '\t' || c == '\r')))
      return "holds a control character";
    i += len;
  }
  switch (cls) {
  case TX_NAME:
    for (size_t i = 0; i < n; i++)
      if (!is_name_char(u[i])) return "holds a character other than letters, digits and _";
    return NULL;
  case TX_HEX:
    for (size_t i = 0; i < n; i++)
      if (!((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'f')))
        return "is not lower-case hexadecimal";
    return NULL;
  case TX_ORIGIN:
    for (size_t i = 0; i < n; i++)
      if (!((u[i] >= '0' && u[i] <= '9') || (u[i] >= 'a' && u[i] <= 'z') || u[i] == '-'))
        return "holds a character other than 0-9, a-z and -";
    return NULL;
  case TX_OP:
    for (size_t i = 0; i < n; i++)
      if (!((u[i] >= 'a' && u[i] <= 'z') || (u[i] >= '0' && u[i] <= '9') ||
            (u[i] && strchr("_=,+.", u[i]))))
        return "holds a character other than a-z, 0-9 and _=,+.";
    return NULL;
  case TX_PARAMS: return params_syntax(s, n) ? NULL : "is not of the form name=integer,...";
  case TX_LAYOUT:
    return n == 2 && (s[0] == 'n' || s[0] == 't') && (s[1] == 'n' || s[1] == 't')
               ? NULL
               : "is not one of nn, nt, tn, tt";
  default: return NULL;
  }
}

/* ---- one column ---------------------------------------------------------------------------- */

static const char *kind_refusal(const col_spec *c, const db_cell *v) {
  if (v->type == DB_CELL_MISSING) return "is missing";
  switch (c->kind) {
  case K_TEXT: return v->type == DB_CELL_TEXT ? NULL : "is not a string";
  case K_INT:
    if (v->type == DB_CELL_INT) return NULL;
    return v->type == DB_CELL_REAL && v->overflow ? "is out of range" : "is not an integer";
  case K_REAL:
    if (v->type == DB_CELL_INT || v->type == DB_CELL_REAL) return NULL;
    if (v->type == DB_CELL_NULL && c->nullable) return NULL;
    return c->nullable ? "is not a number or null" : "is not a number";
  }
  return "has an unknown kind";
}

/* Stores integer x into field, a K_INT column's int or int64_t. */
static void store_int(const col_spec *c, char *field, int64_t x) {
  if (c->size == sizeof(int))
    *(int *)(void *)field = (int)x;
  else
    *(int64_t *)(void *)field = x;
}

/* Checks value v of column c and stores it into the struct at base; false with a message. */
static bool take_cell(const col_spec *c, const db_cell *v, void *base, char *why, size_t whylen) {
  char *field = (char *)base + c->offset;
  if (v->type == DB_CELL_MISSING && c->absent_ok) {
    if (c->kind == K_INT)
      store_int(c, field, c->absent_int);
    else
      field[0] = '\0';
    return true;
  }
  const char *no = kind_refusal(c, v);
  if (!no && c->kind == K_TEXT) {
    if (v->len >= c->cap) {
      snprintf(why, whylen, "'%s' is longer than %zu bytes", c->name, c->cap - 1);
      return false;
    }
    if (c->required && v->len == 0) no = "is empty";
    if (!no) no = text_refusal(c->text, v->text, v->len);
    if (!no && c->text == TX_STATUS) {
      char name[16];
      memcpy(name, v->text, v->len);
      name[v->len] = '\0';
      int s = db_status_parse(name);
      if (s < 0) no = "is not a status mmtune knows";
      else *(db_status *)(void *)field = (db_status)s;
    } else if (!no) {
      memcpy(field, v->text, v->len);
      field[v->len] = '\0';
    }
  } else if (!no && c->kind == K_INT) {
    if (v->i < c->min || v->i > c->max) {
      snprintf(why, whylen, "'%s' = %" PRId64 " is outside %" PRId64 " .. %" PRId64, c->name,
               v->i, c->min, c->max);
      return false;
    }
    store_int(c, field, v->i);
  } else if (!no) {
    double x = v->type == DB_CELL_NULL ? NAN : v->type == DB_CELL_INT ? (double)v->i : v->r;
    if (!isnan(x) && (x < 0 || (isinf(x) && !c->inf_ok))) {
      snprintf(why, whylen, "'%s' = %g is not %s", c->name, x,
               c->inf_ok ? "a number >= 0" : "a finite number >= 0");
      return false;
    }
    *(double *)(void *)field = x;
  }
  if (no) snprintf(why, whylen, "'%s' %s", c->name, no);
  return no == NULL;
}

/* ---- rows ---------------------------------------------------------------------------------- */

static bool policy_refuses(const db_row_policy *pol, const char *dtype, const db_result *r,
                           char *why, size_t whylen) {
  if (!pol) return false;
  if (pol->dtype_known && !pol->dtype_known(dtype, pol->user)) {
    snprintf(why, whylen, "'dtype' '%s' is not an element type mmtune knows", dtype);
    return true;
  }
  if (r && pol->params_ok &&
      !pol->params_ok(r->template_name, r->template_hash, r->params, pol->user, why, whylen))
    return true;
  return false;
}

bool db_row_take(const db_cell cells[DB_NCOLS], const db_row_policy *pol, db_result *out,
                 char *why, size_t whylen) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < DB_NCOLS; i++)
    if (!take_cell(&k_result_cols[i], &cells[i], out, why, whylen)) return false;
  if (out->status == DB_OK && isnan(out->ms_median)) {
    snprintf(why, whylen, "'ms_median' is null in an ok row");
    return false;
  }
  return !policy_refuses(pol, out->problem.dtype, out, why, whylen);
}

bool db_search_take(const db_cell cells[DB_SEARCH_NCOLS], const db_row_policy *pol,
                    db_search_row *out, char *why, size_t whylen) {
  memset(out, 0, sizeof *out);
  for (int i = 0; i < DB_SEARCH_NCOLS; i++)
    if (!take_cell(&k_search_cols[i], &cells[i], out, why, whylen)) return false;
  return !policy_refuses(pol, out->dtype, NULL, why, whylen);
}

/* ---- cells from SQLite and from JSON --------------------------------------------------------- */

void db_cell_of_column(sqlite3_stmt *st, int col, db_cell *out) {
  memset(out, 0, sizeof *out);
  switch (sqlite3_column_type(st, col)) {
  case SQLITE_NULL: out->type = DB_CELL_NULL; break;
  case SQLITE_INTEGER:
    out->type = DB_CELL_INT;
    out->i = sqlite3_column_int64(st, col);
    break;
  case SQLITE_FLOAT:
    out->type = DB_CELL_REAL;
    out->r = sqlite3_column_double(st, col);
    break;
  case SQLITE_TEXT:
    out->type = DB_CELL_TEXT;
    out->text = (const char *)sqlite3_column_text(st, col);
    out->len = (size_t)sqlite3_column_bytes(st, col);
    if (!out->text) out->text = "", out->len = 0;
    break;
  default: out->type = DB_CELL_OTHER; break; /* a BLOB: never a column mmtune writes */
  }
}

void db_cell_of_json(const db_json *v, db_cell *out) {
  memset(out, 0, sizeof *out);
  if (!v) {
    out->type = DB_CELL_MISSING;
    return;
  }
  switch (v->type) {
  case DB_JSON_NULL: out->type = DB_CELL_NULL; break;
  case DB_JSON_STRING:
    out->type = DB_CELL_TEXT;
    out->text = v->text;
    out->len = v->len;
    break;
  case DB_JSON_NUMBER: {
    bool integral = !strpbrk(v->text, ".eE");
    char *end;
    errno = 0;
    if (integral) {
      long long x = strtoll(v->text, &end, 10);
      if (errno != ERANGE) {
        out->type = DB_CELL_INT;
        out->i = x;
        break;
      }
      errno = 0;
    }
    /* a fraction, an exponent, or an integer past int64: a real (1e999 reads as inf) */
    out->type = DB_CELL_REAL;
    out->r = strtod(v->text, &end);
    out->overflow = integral;
    break;
  }
  default: out->type = DB_CELL_OTHER; break;
  }
}
