/*
 * test_emit_golden.c -- what the built-in templates emit stays what it was: a sample of
 * configs of every template, dtype and layout, each with a hash of its source and of its launch
 * description (tests/data/emit_golden.txt), emitted again and compared.
 *
 * A change to a template or to the sandbox that changes a kernel by accident shows up here;
 * a change made on purpose comes with its NVRTC/SASS comparison and a new golden file, written
 * by `test_emit_golden --update FILE` (the sample is chosen again: every k-th valid config of
 * each template, dtype and layout, up to GOLDEN_PER, and the default).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"

#define GOLDEN_FILE MMT_TEST_DIR "/data/emit_golden.txt"
/* Configs sampled per template, dtype and layout (the default comes on top). */
#define GOLDEN_PER 40
#define LINE_MAX_LEN 2048

/* The two hashes of a config's kernel, as 16 hex digits each; false when it does not emit. */
static bool kernel_hashes(gen_template *t, const gen_config *c, const char *dtype,
                          const char *layout, char src[17], char launch[17], ut_err *e) {
  gen_kernel k = {0};
  if (gen_emit(t, c, dtype, layout, &k, e) != MMT_OK) return false;
  char text[GEN_LAUNCH_TEXT_MAX];
  assert_int_equal(gen_kernel_launch_text(&k, text, sizeof text, e), MMT_OK);
  ut_hash64_hex(ut_hash64(k.source, strlen(k.source)), src);
  ut_hash64_hex(ut_hash64(text, strlen(text)), launch);
  gen_kernel_clear(&k);
  return true;
}

/* Whether the space calls c valid for dtype and layout. */
static bool valid_for(gen_template *t, const gen_config *c, const char *dtype, const char *layout) {
  bool valid = false;
  ut_err e;
  assert_int_equal(gen_check_for(t, c, dtype, layout, &valid, NULL, 0, &e), MMT_OK);
  return valid;
}

static gen_template *load_builtin(const char *name) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  mmt_status rc = gen_load_named(name, &t, &e);
  if (rc) fprintf(stderr, "load %s: %s\n", name, e.msg);
  assert_int_equal(rc, MMT_OK);
  return t;
}

/* ---- writing the golden file ---------------------------------------------------------------- */

/* Appends one line for config c, or nothing where it does not emit; returns whether it did. */
static bool write_line(FILE *f, gen_template *t, const gen_config *c, const char *dtype,
                       const char *layout) {
  char params[1024], src[17], launch[17];
  ut_err e;
  if (!kernel_hashes(t, c, dtype, layout, src, launch, &e)) return false;
  assert_int_equal(gen_config_format(t, c, params, sizeof params, &e), MMT_OK);
  fprintf(f, "%s %s %s %s %s %s\n", gen_name(t), dtype, layout, params, src, launch);
  return true;
}

/* Every k-th valid config of t for dtype and layout (a config that does not emit passes its
 * turn to the next), GOLDEN_PER at most, then the default where it is valid and not taken. */
static void write_sample(FILE *f, gen_template *t, const char *dtype, const char *layout) {
  const uint64_t size = gen_space_size(t);
  uint64_t valid = 0;
  for (uint64_t idx = 0; idx < size; idx++) {
    gen_config c;
    gen_config_at(t, idx, &c);
    valid += valid_for(t, &c, dtype, layout);
  }
  const uint64_t step = valid > GOLDEN_PER ? (valid + GOLDEN_PER - 1) / GOLDEN_PER : 1;
  gen_config def;
  gen_config_default(t, &def);
  bool def_taken = false, due = false;
  int taken = 0;
  for (uint64_t idx = 0, seen = 0; idx < size && taken < GOLDEN_PER; idx++) {
    gen_config c;
    gen_config_at(t, idx, &c);
    if (!valid_for(t, &c, dtype, layout)) continue;
    due = due || seen++ % step == 0;
    if (!due || !write_line(f, t, &c, dtype, layout)) continue;
    due = false;
    taken++;
    def_taken = def_taken || memcmp(c.v, def.v, sizeof c.v[0] * (size_t)c.n) == 0;
  }
  if (!def_taken && valid_for(t, &def, dtype, layout)) write_line(f, t, &def, dtype, layout);
}

static int update(const char *path) {
  char **names = NULL;
  int count = 0;
  ut_err e;
  FILE *f = fopen(path, "w");
  if (!f || gen_list(&names, &count, &e) != MMT_OK) {
    fprintf(stderr, "cannot write %s or list the templates\n", path);
    if (f) fclose(f);
    return 1;
  }
  fprintf(f, "# template dtype layout params source-hash launch-hash (test_emit_golden.c)\n");
  for (int i = 0; i < count; i++) {
    gen_template *t = load_builtin(names[i]);
    for (int d = 0; d < gen_dtype_count(t); d++)
      for (int l = 0; l < GEN_LAYOUTS; l++)
        if (gen_supports_layout(t, gen_layout_name(l)))
          write_sample(f, t, gen_dtype(t, d), gen_layout_name(l));
    gen_free(t);
  }
  gen_names_free(names, count);
  return fclose(f) == 0 ? 0 : 1;
}

/* ---- checking against it ------------------------------------------------------------------- */

typedef struct {
  char tmpl[GEN_NAME_MAX], dtype[16], layout[8], params[1024], src[17], launch[17];
} golden_line;

static bool parse_line(const char *s, golden_line *g) {
  return sscanf(s, "%63s %15s %7s %1023s %16s %16s", g->tmpl, g->dtype, g->layout, g->params,
                g->src, g->launch) == 6;
}

/* The line's config emitted now: 0 when it matches, else 1 (said on stderr). */
static int check_line(gen_template *t, const golden_line *g) {
  gen_config c;
  char src[17], launch[17];
  ut_err e;
  if (gen_config_parse(t, g->params, &c, &e) != MMT_OK || !valid_for(t, &c, g->dtype, g->layout)) {
    fprintf(stderr, "%s %s %s %s: no longer a valid config\n", g->tmpl, g->dtype, g->layout,
            g->params);
    return 1;
  }
  if (!kernel_hashes(t, &c, g->dtype, g->layout, src, launch, &e)) {
    fprintf(stderr, "%s %s %s %s: emit failed: %s\n", g->tmpl, g->dtype, g->layout, g->params,
            e.msg);
    return 1;
  }
  const bool same_src = strcmp(src, g->src) == 0, same_launch = strcmp(launch, g->launch) == 0;
  if (!same_src || !same_launch)
    fprintf(stderr, "%s %s %s %s: %s%s changed\n", g->tmpl, g->dtype, g->layout, g->params,
            same_src ? "" : "source ", same_launch ? "" : "launch");
  return !same_src || !same_launch;
}

/* A template, dtype and layout without lines has no config that is valid and emits. */
static void covers(gen_template *t, const char *dtype, const char *layout,
                   char (*covered)[GEN_NAME_MAX + 24], int ncovered) {
  char key[GEN_NAME_MAX + 24];
  snprintf(key, sizeof key, "%s %s %s", gen_name(t), dtype, layout);
  for (int i = 0; i < ncovered; i++)
    if (strcmp(covered[i], key) == 0) return;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    gen_kernel k = {0};
    ut_err e;
    gen_config_at(t, idx, &c);
    if (!valid_for(t, &c, dtype, layout) || gen_emit(t, &c, dtype, layout, &k, &e) != MMT_OK)
      continue;
    gen_kernel_clear(&k);
    fail_msg("%s has kernels but no golden lines (test_emit_golden --update)", key);
  }
}

/* Every line of the golden file emits as it did; every template, dtype and layout has lines. */
static void test_golden(void **state) {
  (void)state;
  FILE *f = fopen(GOLDEN_FILE, "r");
  assert_non_null(f);
  char line[LINE_MAX_LEN], covered[64][GEN_NAME_MAX + 24];
  int lines = 0, changed = 0, ncovered = 0;
  gen_template *t = NULL;
  while (fgets(line, sizeof line, f)) {
    golden_line g;
    if (line[0] == '#') continue;
    assert_true(parse_line(line, &g));
    if (!t || strcmp(gen_name(t), g.tmpl) != 0) {
      gen_free(t);
      t = load_builtin(g.tmpl);
    }
    changed += check_line(t, &g);
    lines++;
    char key[GEN_NAME_MAX + 24];
    snprintf(key, sizeof key, "%s %s %s", g.tmpl, g.dtype, g.layout);
    if (ncovered == 0 || strcmp(covered[ncovered - 1], key) != 0) {
      assert_true(ncovered < 64);
      memcpy(covered[ncovered++], key, sizeof key);
    }
  }
  gen_free(t);
  fclose(f);
  fprintf(stderr, "%d golden kernels, %d changed\n", lines, changed);
  assert_int_equal(changed, 0);
  /* the file covers what the templates declare (a new dtype or layout needs its lines) */
  char **names = NULL;
  int count = 0;
  ut_err e;
  assert_int_equal(gen_list(&names, &count, &e), MMT_OK);
  for (int i = 0; i < count; i++) {
    t = load_builtin(names[i]);
    for (int d = 0; d < gen_dtype_count(t); d++)
      for (int l = 0; l < GEN_LAYOUTS; l++)
        if (gen_supports_layout(t, gen_layout_name(l)))
          covers(t, gen_dtype(t, d), gen_layout_name(l), covered, ncovered);
    gen_free(t);
  }
  gen_names_free(names, count);
}

/* Valid configs emitted a template, dtype and layout, at most (every k-th of them). */
#define EMIT_PER 200

/* The space is what emits: a config valid for a dtype and layout emits for them (the checks
 * are the constraints', not emit's).  Every k-th valid config of every template, dtype and
 * layout. */
static void test_valid_configs_emit(void **state) {
  (void)state;
  char **names = NULL;
  int count = 0, failed = 0;
  ut_err e;
  assert_int_equal(gen_list(&names, &count, &e), MMT_OK);
  for (int i = 0; i < count; i++) {
    gen_template *t = load_builtin(names[i]);
    const uint64_t size = gen_space_size(t);
    for (int d = 0; d < gen_dtype_count(t); d++)
      for (int l = 0; l < GEN_LAYOUTS; l++) {
        const char *dtype = gen_dtype(t, d), *layout = gen_layout_name(l);
        if (!gen_supports_layout(t, layout)) continue;
        uint64_t valid = 0;
        for (uint64_t idx = 0; idx < size; idx++) {
          gen_config c;
          gen_config_at(t, idx, &c);
          if (!valid_for(t, &c, dtype, layout) || valid++ % (size / EMIT_PER / 4 + 1)) continue;
          gen_kernel k = {0};
          if (gen_emit(t, &c, dtype, layout, &k, &e) != MMT_OK) {
            fprintf(stderr, "%s %s %s: %s\n", names[i], dtype, layout, e.msg);
            failed++;
          }
          gen_kernel_clear(&k);
        }
      }
    gen_free(t);
  }
  gen_names_free(names, count);
  assert_int_equal(failed, 0);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--update") == 0) return update(argv[2]);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_golden),
      cmocka_unit_test(test_valid_configs_emit),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
