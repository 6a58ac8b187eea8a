/* test_gen_lineage.c -- gen_emits_as: a template's own hash, and the earlier hashes its
 * folder's lineage.txt lists for it, less the configs listed as exceptions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

#define EARLIER "0123456789abcdef"
#define OTHER "fedcba9876543210"
/* gen.h: lines over 4 KiB are ignored.  A line of this many bytes and more: its first
 * 4 KiB + 1 fill gen_lineage.c's buffer exactly, so the tail is read as a piece of its own. */
#define LINE_TOO_LONG (4096 + 1)

static const char template_text[] =
    "return {name = \"ln\", description = \"lineage\", dtypes = {\"f32\", \"f16\"},\n"
    "  params = {{name = \"x\", values = {1, 2}}},\n"
    "  emit = function() return {source = \"s\", kernel = \"k\"} end}\n";

typedef struct {
  char dir[64];
  char path[128]; /* the template file */
  char hash[17];  /* its gen_source_hash */
} scratch;

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void write_text(const scratch *s, const char *file, const char *text) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", s->dir, file);
  assert_int_equal(ut_write_file_atomic(path, text, strlen(text), NULL), MMT_OK);
}

static gen_template *load(const scratch *s) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  mmt_status rc = gen_load(s->path, &t, &e);
  if (rc) fprintf(stderr, "load %s: %s\n", s->path, e.msg);
  assert_int_equal(rc, MMT_OK);
  return t;
}

/* A scratch folder with template ln and no lineage.txt. */
static int setup(void **state) {
  scratch *s = calloc(1, sizeof *s);
  if (!s) return -1;
  strcpy(s->dir, "/tmp/mmt_lineage_XXXXXX");
  if (!mkdtemp(s->dir)) return -1;
  snprintf(s->path, sizeof s->path, "%s/ln.lua", s->dir);
  setenv("MMTUNE_TEMPLATE_PATH", "", 1);
  write_text(s, "ln.lua", template_text);
  gen_template *t = load(s);
  ut_copy(s->hash, sizeof s->hash, gen_source_hash(t));
  gen_free(t);
  *state = s;
  return 0;
}

static int teardown(void **state) {
  scratch *s = *state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", s->dir);
  int rc = system(cmd);
  free(s);
  return rc == 0 ? 0 : -1;
}

/* Without lineage.txt: the template's own hash only. */
static void test_own_hash_and_missing_file(void **state) {
  gen_template *t = load(*state);
  assert_true(gen_emits_as(t, gen_source_hash(t), "f32", "nn", "x=1"));
  assert_false(gen_emits_as(t, EARLIER, "f32", "nn", "x=1"));
  assert_false(gen_emits_as(t, NULL, "f32", "nn", "x=1"));
  assert_false(gen_emits_as(t, gen_source_hash(t), NULL, "nn", "x=1"));
  assert_false(gen_emits_as(t, gen_source_hash(t), "f32", "nn", NULL));
  assert_false(gen_emits_as(NULL, EARLIER, "f32", "nn", "x=1"));
  gen_free(t);
}

/* The lineage.txt of scratch s: lines, each "%s" replaced by the template's hash. */
static void write_lineage(const scratch *s, const char *const *lines, int n) {
  char text[8192] = "", line[512];
  for (int i = 0; i < n; i++) {
    snprintf(line, sizeof line, lines[i], s->hash);
    strncat(text, line, sizeof text - strlen(text) - 1);
  }
  write_text(s, "lineage.txt", text);
}

/* An earlier hash listed for the current one: every config but the exceptions. */
static void test_listed_and_exceptions(void **state) {
  const scratch *s = *state;
  static const char *const lines[] = {
      "# ln refactored: the same kernels\n", /* a comment */
      "ln " EARLIER " %s\n",                 /* every config */
      "ln " EARLIER " %s f16 nn x=2\n",      /* but this one */
      "ln\t" OTHER "\t%s\tf32\tnn\tx=1\n",   /* an exception without its line: nothing */
  };
  write_lineage(s, lines, COUNT(lines));
  gen_template *t = load(s);
  assert_true(gen_emits_as(t, EARLIER, "f32", "nn", "x=1"));
  assert_true(gen_emits_as(t, EARLIER, "f32", "nn", "x=2"));
  assert_true(gen_emits_as(t, EARLIER, "f16", "nn", "x=1"));
  assert_false(gen_emits_as(t, EARLIER, "f16", "nn", "x=2")); /* the exception */
  assert_false(gen_emits_as(t, OTHER, "f32", "nn", "x=2"));
  assert_false(gen_emits_as(t, OTHER, "f32", "nn", "x=1"));
  assert_true(gen_emits_as(t, s->hash, "f16", "nn", "x=2")); /* its own hash: no exceptions */
  /* read once: a later change of the file is seen by the next load */
  write_text(s, "lineage.txt", "");
  assert_true(gen_emits_as(t, EARLIER, "f32", "nn", "x=1"));
  gen_free(t);
  t = load(s);
  assert_false(gen_emits_as(t, EARLIER, "f32", "nn", "x=1"));
  gen_free(t);
}

/* Lines for another current hash (an earlier edit's) or another template do nothing; an edit
 * of the template makes its own lines inert. */
static void test_inert_lines(void **state) {
  const scratch *s = *state;
  static const char *const lines[] = {
      "ln " EARLIER " " OTHER "\n",
      "naive " OTHER " %s\n",
      "ln " OTHER " %s\n",
  };
  write_lineage(s, lines, COUNT(lines));
  gen_template *t = load(s);
  assert_false(gen_emits_as(t, EARLIER, "f32", "nn", "x=1"));
  assert_true(gen_emits_as(t, OTHER, "f32", "nn", "x=1"));
  gen_free(t);
  char edited[sizeof template_text + 16];
  snprintf(edited, sizeof edited, "-- edited\n%s", template_text);
  write_text(s, "ln.lua", edited);
  t = load(s);
  assert_string_not_equal(gen_source_hash(t), s->hash);
  assert_false(gen_emits_as(t, OTHER, "f32", "nn", "x=1"));
  assert_true(gen_emits_as(t, gen_source_hash(t), "f32", "nn", "x=1"));
  gen_free(t);
}

/* Malformed lines are skipped, and the good ones among them still count; a line over the
 * limit is skipped whole, even where its tail would read as a line. */
static void test_garbage_lines(void **state) {
  const scratch *s = *state;
  static const char *const lines[] = {
      "\n",
      "   \t \n",
      "ln\n",
      "ln " OTHER "\n",
      "ln " OTHER " %s f32\n",              /* 4 fields */
      "ln " OTHER " %s f32 nn\n",           /* 5 */
      "ln " OTHER " %s f32 nn x=1 extra\n", /* 7 */
      "ln 0123456789ABCDEF %s\n",           /* upper case */
      "ln 0123456789abcde %s\n",            /* 15 digits */
      "ln 0123456789abcdefa %s\n",          /* 17 */
      "ln 0123456789abcdeg %s\n",           /* not hex */
      "ln " EARLIER " %s f8 nn x=1\n",      /* unknown dtype: not an exception */
      "ln " EARLIER " %s f32 ntt x=1\n",    /* unknown layout */
      "#ln " OTHER " %s\n",                 /* a comment */
      "ln " EARLIER " %s\n",
      "\x01\xff\xfe garbage \x80 %s\n",
  };
  write_lineage(s, lines, COUNT(lines));
  /* then a line over the limit whose tail is a well-formed line, and a last line that
   * ends without a newline */
  char path[128], tail[64];
  snprintf(path, sizeof path, "%s/lineage.txt", s->dir);
  FILE *f = fopen(path, "a");
  assert_non_null(f);
  for (int i = 0; i < LINE_TOO_LONG; i++) fputc('x', f);
  snprintf(tail, sizeof tail, "ln %s %s\n", OTHER, s->hash);
  fputs(tail, f);
  fprintf(f, "ln %s %s f32 nn x=2", EARLIER, s->hash);
  assert_int_equal(fclose(f), 0);
  gen_template *t = load(s);
  assert_false(gen_emits_as(t, OTHER, "f32", "nn", "x=1"));
  assert_true(gen_emits_as(t, EARLIER, "f32", "nn", "x=1"));
  assert_false(gen_emits_as(t, EARLIER, "f32", "nn", "x=2")); /* the last line */
  assert_true(gen_emits_as(t, EARLIER, "f16", "nn", "x=2"));
  gen_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_own_hash_and_missing_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_listed_and_exceptions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_inert_lines, setup, teardown),
      cmocka_unit_test_setup_teardown(test_garbage_lines, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
