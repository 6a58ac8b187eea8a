/*
 * gen_lineage.c -- gen_emits_as: whether a row measured with an earlier version of a template
 * measured the kernel the template emits now, from the template folder's lineage.txt (the
 * format is gen.h's).
 *
 * The file comes from the template's folder, so it is read as untrusted text: lines of at most
 * LINEAGE_LINE_MAX bytes, the file's first LINEAGE_FILE_MAX bytes, each field checked; anything
 * else is skipped.  Only the lines of this template and its current hash are kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_int.h"

#define LINEAGE_FILE_NAME "lineage.txt"
#define LINEAGE_LINE_MAX 4096
#define LINEAGE_FILE_MAX (16L << 20)
#define LINEAGE_FIELDS 6
#define HASH_HEX 16

/* One line of this template and current hash: params NULL for a whole-template line. */
typedef struct {
  char earlier[HASH_HEX + 1];
  char dtype[GEN_DTYPE_MAX];
  char layout[4];
  char *params;
} lineage_line;

struct gen_lineage {
  int count, cap;
  lineage_line *lines;
};

static bool is_hash(const char *s) {
  if (strlen(s) != HASH_HEX) return false;
  return strspn(s, "0123456789abcdef") == HASH_HEX;
}

/* Splits line at spaces and tabs into at most max fields; returns the count, max + 1 when
 * there are more. */
static int split_fields(char *line, char *field[], int max) {
  int n = 0;
  char *save = NULL;
  for (char *f = strtok_r(line, " \t\r\n", &save); f; f = strtok_r(NULL, " \t\r\n", &save)) {
    if (n == max) return max + 1;
    field[n++] = f;
  }
  return n;
}

/* Keeps the line when it is well formed and t's; false only when out of memory. */
static bool keep_line(gen_lineage *g, const gen_template *t, char *text) {
  char *f[LINEAGE_FIELDS];
  const int n = split_fields(text, f, LINEAGE_FIELDS);
  if (n != 3 && n != LINEAGE_FIELDS) return true; /* blank, a comment, or malformed */
  if (f[0][0] == '#' || strcmp(f[0], t->name) != 0 || !is_hash(f[1]) || !is_hash(f[2]) ||
      strcmp(f[2], t->hash) != 0)
    return true;
  lineage_line l = {0};
  memcpy(l.earlier, f[1], HASH_HEX + 1);
  if (n == LINEAGE_FIELDS) {
    if (gen_dtype_index(f[3]) < 0 || gen_layout_index(f[4]) < 0) return true;
    snprintf(l.dtype, sizeof l.dtype, "%s", f[3]);
    snprintf(l.layout, sizeof l.layout, "%s", f[4]);
    if (!(l.params = strdup(f[5]))) return false;
  }
  if (g->count == g->cap) {
    int cap = g->cap ? 2 * g->cap : 16;
    lineage_line *grown = realloc(g->lines, (size_t)cap * sizeof *grown);
    if (!grown) {
      free(l.params);
      return false;
    }
    g->lines = grown;
    g->cap = cap;
  }
  g->lines[g->count++] = l;
  return true;
}

void gen_lineage_free(gen_lineage *g) {
  if (!g) return;
  for (int i = 0; i < g->count; i++) free(g->lines[i].params);
  free(g->lines);
  free(g);
}

/* <folder of path>/lineage.txt into out; false when it does not fit. */
static bool lineage_path(const char *template_path, char *out, size_t outlen) {
  const char *slash = strrchr(template_path, '/');
  int dir_len = slash ? (int)(slash - template_path) : 1;
  const char *dir = slash ? template_path : ".";
  int n = snprintf(out, outlen, "%.*s/%s", dir_len, dir, LINEAGE_FILE_NAME);
  return n > 0 && (size_t)n < outlen;
}

/* Reads t's lines of its folder's lineage.txt: an empty lineage when there is none (or it
 * cannot be read), NULL when out of memory. */
static gen_lineage *lineage_read(const gen_template *t) {
  gen_lineage *g = calloc(1, sizeof *g);
  char path[4096], line[LINEAGE_LINE_MAX + 2];
  if (!g || !t->path || !lineage_path(t->path, path, sizeof path)) return g;
  FILE *f = fopen(path, "r");
  if (!f) return g;
  bool ok = true, skipping = false; /* skipping: the rest of a line over the limit */
  long total = 0;
  while (ok && total < LINEAGE_FILE_MAX && fgets(line, sizeof line, f)) {
    const size_t len = strlen(line);
    const bool whole = len > 0 && line[len - 1] == '\n';
    total += (long)len;
    if (skipping || (!whole && len > LINEAGE_LINE_MAX)) {
      skipping = !whole;
      continue;
    }
    ok = keep_line(g, t, line);
  }
  fclose(f);
  if (ok) return g;
  gen_lineage_free(g);
  return NULL;
}

bool gen_emits_as(gen_template *t, const char *earlier_hash, const char *dtype, const char *layout,
                  const char *params) {
  if (!t || !earlier_hash || !dtype || !layout || !params) return false;
  if (strcmp(earlier_hash, t->hash) == 0) return true;
  if (!t->lineage_read) {
    t->lineage = lineage_read(t); /* NULL (out of memory): no lineage, and not tried again */
    t->lineage_read = true;
  }
  const gen_lineage *g = t->lineage;
  bool listed = false;
  for (int i = 0; g && i < g->count; i++) {
    const lineage_line *l = &g->lines[i];
    if (strcmp(l->earlier, earlier_hash) != 0) continue;
    if (!l->params) {
      listed = true;
    } else if (strcmp(l->dtype, dtype) == 0 && strcmp(l->layout, layout) == 0 &&
               strcmp(l->params, params) == 0) {
      return false; /* an exception: this config's kernel changed */
    }
  }
  return listed;
}
