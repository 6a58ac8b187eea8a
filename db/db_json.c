/*
 * db_json.c -- a small JSON reader for `mmtune db import` (db_import_json): the whole text
 * into a tree, numbers kept as their text (so an integer stays exact and a double read back
 * from "%.17g" is the same bits).  RFC 8259 strictly: no comments, no trailing commas; \u
 * escapes become UTF-8 (a surrogate pair one code point).  Nesting is limited to
 * DB_JSON_MAX_DEPTH.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db_internal.h"

#define DB_JSON_MAX_DEPTH 32

typedef struct {
  const char *p, *start;
  char *why;
  size_t whylen;
} jparser;

static bool jfail(jparser *ps, const char *what) {
  snprintf(ps->why, ps->whylen, "%s at byte %zu", what, (size_t)(ps->p - ps->start));
  return false;
}

static void skip_ws(jparser *ps) {
  while (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r') ps->p++;
}

/* Appends code point c as UTF-8. */
static size_t put_utf8(char *o, unsigned c) {
  if (c < 0x80) return o[0] = (char)c, 1;
  if (c < 0x800) return o[0] = (char)(0xc0 | c >> 6), o[1] = (char)(0x80 | (c & 0x3f)), 2;
  if (c < 0x10000) {
    o[0] = (char)(0xe0 | c >> 12), o[1] = (char)(0x80 | (c >> 6 & 0x3f));
    o[2] = (char)(0x80 | (c & 0x3f));
    return 3;
  }
  o[0] = (char)(0xf0 | c >> 18), o[1] = (char)(0x80 | (c >> 12 & 0x3f));
  o[2] = (char)(0x80 | (c >> 6 & 0x3f)), o[3] = (char)(0x80 | (c & 0x3f));
  return 4;
}

static bool hex4(jparser *ps, unsigned *out) {
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = *ps->p++;
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return jfail(ps, "bad \\u escape");
    v = v * 16 + (unsigned)d;
  }
  *out = v;
  return true;
}

/* A string at ps->p (the opening quote) into *out (owned), its length (a \u0000 included)
 * into *len. */
static bool parse_string(jparser *ps, char **out, size_t *len) {
  const char *q = ++ps->p;
  size_t cap = 1;
  while (*q && *q != '"') cap += *q == '\\' ? (q++, 4) : 1, q += *q != '\0';
  char *s = malloc(cap + 4), *o = s;
  if (!s) return jfail(ps, "out of memory");
  while (*ps->p != '"') {
    unsigned char c = (unsigned char)*ps->p;
    if (c == '\0') return free(s), jfail(ps, "unterminated string");
    if (c < 0x20) return free(s), jfail(ps, "control character in a string");
    ps->p++;
    if (c != '\\') {
      *o++ = (char)c;
      continue;
    }
    char e = *ps->p++;
    const char *simple = strchr("\"\\/bfnrt", e);
    if (e && simple) {
      *o++ = "\"\\/\b\f\n\r\t"[simple - "\"\\/bfnrt"];
    } else if (e == 'u') {
      unsigned c1, c2;
      if (!hex4(ps, &c1)) return free(s), false;
      if (c1 >= 0xd800 && c1 < 0xdc00) {
        if (ps->p[0] != '\\' || ps->p[1] != 'u') return free(s), jfail(ps, "lone surrogate");
        ps->p += 2;
        if (!hex4(ps, &c2) || c2 < 0xdc00 || c2 >= 0xe000)
          return free(s), jfail(ps, "bad surrogate pair");
        c1 = 0x10000 + ((c1 - 0xd800) << 10) + (c2 - 0xdc00);
      } else if (c1 >= 0xdc00 && c1 < 0xe000) {
        return free(s), jfail(ps, "lone surrogate");
      }
      o += put_utf8(o, c1);
    } else {
      return free(s), jfail(ps, "bad escape");
    }
  }
  ps->p++;
  *o = '\0';
  *out = s;
  if (len) *len = (size_t)(o - s);
  return true;
}

/* A number's text, checked against the JSON grammar. */
static bool parse_number(jparser *ps, char **out) {
  const char *b = ps->p, *p = ps->p;
  if (*p == '-') p++;
  if (*p == '0') p++;
  else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
  else return jfail(ps, "bad number");
  if (*p == '.') {
    if (!(*++p >= '0' && *p <= '9')) return jfail(ps, "bad number");
    while (*p >= '0' && *p <= '9') p++;
  }
  if (*p == 'e' || *p == 'E') {
    p++;
    if (*p == '+' || *p == '-') p++;
    if (!(*p >= '0' && *p <= '9')) return jfail(ps, "bad number");
    while (*p >= '0' && *p <= '9') p++;
  }
  *out = strndup(b, (size_t)(p - b));
  ps->p = p;
  return *out ? true : jfail(ps, "out of memory");
}

static bool parse_value(jparser *ps, db_json *v, int depth);

/* An array or object: items (and keys) until `close`. */
static bool parse_list(jparser *ps, db_json *v, char close, int depth) {
  ps->p++;
  skip_ws(ps);
  if (*ps->p == close) return ps->p++, true;
  for (int cap = 0;;) {
    if (v->n == cap) {
      cap = cap ? 2 * cap : 8;
      db_json *items = realloc(v->items, (size_t)cap * sizeof *items);
      char **keys = close == '}' ? realloc(v->keys, (size_t)cap * sizeof *keys) : NULL;
      if (items) v->items = items;
      if (keys) v->keys = keys;
      if (!items || (close == '}' && !keys)) return jfail(ps, "out of memory");
    }
    memset(&v->items[v->n], 0, sizeof v->items[v->n]);
    if (close == '}') {
      skip_ws(ps);
      if (*ps->p != '"') return jfail(ps, "expected a key");
      if (!parse_string(ps, &v->keys[v->n], NULL)) return false;
      skip_ws(ps);
      if (*ps->p++ != ':') return v->n++, jfail(ps, "expected ':'"); /* key owned by v */
    }
    v->n++;
    if (!parse_value(ps, &v->items[v->n - 1], depth + 1)) return false;
    skip_ws(ps);
    if (*ps->p == ',') {
      ps->p++;
      continue;
    }
    if (*ps->p == close) return ps->p++, true;
    return jfail(ps, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
  }
}

static bool parse_value(jparser *ps, db_json *v, int depth) {
  if (depth > DB_JSON_MAX_DEPTH) return jfail(ps, "nested too deep");
  skip_ws(ps);
  char c = *ps->p;
  if (c == '{') return v->type = DB_JSON_OBJECT, parse_list(ps, v, '}', depth);
  if (c == '[') return v->type = DB_JSON_ARRAY, parse_list(ps, v, ']', depth);
  if (c == '"') return v->type = DB_JSON_STRING, parse_string(ps, &v->text, &v->len);
  if (c == '-' || (c >= '0' && c <= '9')) return v->type = DB_JSON_NUMBER, parse_number(ps, &v->text);
  static const struct {
    const char *word;
    db_json_type type;
  } words[] = {{"null", DB_JSON_NULL}, {"true", DB_JSON_TRUE}, {"false", DB_JSON_FALSE}};
  for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
    if (!strncmp(ps->p, words[i].word, strlen(words[i].word))) {
      ps->p += strlen(words[i].word);
      v->type = words[i].type;
      return true;
    }
  return jfail(ps, c ? "unexpected character" : "unexpected end");
}

void db_json_free(db_json *v) {
  if (!v) return;
  for (int i = 0; i < v->n; i++) {
    db_json_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->text);
  memset(v, 0, sizeof *v);
}

bool db_json_parse(const char *text, db_json *out, char *why, size_t whylen) {
  jparser ps = {text, text, why, whylen};
  memset(out, 0, sizeof *out);
  bool ok = parse_value(&ps, out, 0);
  if (ok) {
    skip_ws(&ps);
    if (*ps.p) ok = jfail(&ps, "text after the value");
  }
  if (!ok) db_json_free(out);
  return ok;
}

/* A member whose value is an array, at ps->p (the '['): its items handed to fn one at a time,
 * and an empty array kept in *slot so the caller sees the list was there. */
static bool stream_list(jparser *ps, const char *key, db_json *slot, const db_json *top,
                        db_json_item_fn fn, void *user) {
  slot->type = DB_JSON_ARRAY;
  ps->p++;
  skip_ws(ps);
  if (*ps->p == ']') return ps->p++, true;
  for (int index = 0;; index++) {
    db_json item;
    memset(&item, 0, sizeof item);
    bool ok = parse_value(ps, &item, 1);
    if (ok && !fn(key, index, &item, top, user)) {
      db_json_free(&item);
      snprintf(ps->why, ps->whylen, "%s", "");
      return false;
    }
    db_json_free(&item);
    if (!ok) return false;
    skip_ws(ps);
    if (*ps->p == ',') {
      ps->p++;
      continue;
    }
    if (*ps->p == ']') return ps->p++, true;
    return jfail(ps, "expected ',' or ']'");
  }
}

/* The top-level object of db_json_stream: members kept in top, arrays streamed. */
static bool stream_object(jparser *ps, db_json *top, db_json_item_fn fn, void *user) {
  skip_ws(ps);
  if (*ps->p != '{') return jfail(ps, *ps->p ? "expected an object" : "unexpected end");
  top->type = DB_JSON_OBJECT;
  ps->p++;
  skip_ws(ps);
  if (*ps->p == '}') return ps->p++, true;
  for (int cap = 0;;) {
    if (top->n == cap) {
      cap = cap ? 2 * cap : 8;
      db_json *items = realloc(top->items, (size_t)cap * sizeof *items);
      if (items) top->items = items;
      char **keys = items ? realloc(top->keys, (size_t)cap * sizeof *keys) : NULL;
      if (keys) top->keys = keys;
      if (!items || !keys) return jfail(ps, "out of memory");
    }
    db_json *slot = &top->items[top->n];
    memset(slot, 0, sizeof *slot);
    skip_ws(ps);
    if (*ps->p != '"') return jfail(ps, "expected a key");
    if (!parse_string(ps, &top->keys[top->n], NULL)) return false;
    top->n++; /* the key is top's to free from here */
    skip_ws(ps);
    if (*ps->p++ != ':') return jfail(ps, "expected ':'");
    skip_ws(ps);
    bool ok = *ps->p == '[' ? stream_list(ps, top->keys[top->n - 1], slot, top, fn, user)
                            : parse_value(ps, slot, 1);
    if (!ok) return false;
    skip_ws(ps);
    if (*ps->p == ',') {
      ps->p++;
      continue;
    }
    if (*ps->p == '}') return ps->p++, true;
    return jfail(ps, "expected ',' or '}'");
  }
}

bool db_json_stream(const char *text, size_t len, db_json *top, db_json_item_fn fn, void *user,
                    char *why, size_t whylen) {
  jparser ps = {text, text, why, whylen};
  memset(top, 0, sizeof *top);
  const char *nul = memchr(text, '\0', len);
  if (nul) {
    ps.p = nul;
    return jfail(&ps, "a NUL byte");
  }
  bool ok = stream_object(&ps, top, fn, user); /* stops at text[len], the NUL */
  if (ok) {
    skip_ws(&ps);
    if (*ps.p) ok = jfail(&ps, "text after the value");
  }
  if (!ok) db_json_free(top);
  return ok;
}

const db_json *db_json_get(const db_json *obj, const char *key) {
  if (!obj || obj->type != DB_JSON_OBJECT) return NULL;
  for (int i = 0; i < obj->n; i++)
    if (!strcmp(obj->keys[i], key)) return &obj->items[i];
  return NULL;
}
