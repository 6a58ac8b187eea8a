/* tmpl_check.c -- see tmpl_check.h. */
#include "tmpl_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rt_compile.h"

gen_template *tc_load(const char *path) {
  gen_template *t = NULL;
  ut_err e = {{0}};
  mmt_status rc = gen_load(path, &t, &e);
  if (rc) fprintf(stderr, "load %s: %s\n", path, e.msg);
  assert_int_equal(rc, MMT_OK);
  return t;
}

void tc_parse_ok(gen_template *t, const char *text, gen_config *c) {
  ut_err e;
  mmt_status rc = gen_config_parse(t, text, c, &e);
  if (rc) fprintf(stderr, "%s: %s\n", text, e.msg);
  assert_int_equal(rc, MMT_OK);
}

bool tc_check(gen_template *t, const gen_config *c, const gen_problem *p, char *why, size_t whylen) {
  bool valid = false;
  ut_err e;
  assert_int_equal(gen_check(t, c, p, &valid, why, whylen, &e), MMT_OK);
  return valid;
}

bool tc_check_for(gen_template *t, const gen_config *c, const char *dtype, const char *layout,
                  char *why, size_t whylen) {
  bool valid = false;
  ut_err e;
  assert_int_equal(gen_check_for(t, c, dtype, layout, &valid, why, whylen, &e), MMT_OK);
  return valid;
}

void tc_rejects(gen_template *t, const char *text, const gen_problem *p, const char *why) {
  gen_config c;
  char reason[200] = "";
  tc_parse_ok(t, text, &c);
  const bool valid = tc_check(t, &c, p, reason, sizeof reason);
  if (valid || !strstr(reason, why))
    fprintf(stderr, "%s: valid %d, reason '%s', expected '%s'\n", text, valid, reason, why);
  assert_false(valid);
  assert_non_null(strstr(reason, why));
}

void tc_source_has(const gen_kernel *k, const char *const *lines, int count) {
  for (int i = 0; i < count; i++) {
    if (!strstr(k->source, lines[i])) fprintf(stderr, "missing: %s\n", lines[i]);
    assert_non_null(strstr(k->source, lines[i]));
  }
}

void tc_grid_is(const gen_kernel *k, char x_dim, int64_t x_tile, char y_dim, int64_t y_tile,
                char z_dim, int64_t z_tile) {
  const char dims[3] = {x_dim, y_dim, z_dim};
  const int64_t tiles[3] = {x_tile, y_tile, z_tile};
  for (int i = 0; i < 3; i++) {
    assert_int_equal(k->grid[i].dim, dims[i]);
    assert_int_equal(k->grid[i].tile, tiles[i]);
  }
}

uint64_t tc_params_are(const gen_template *t, const char *const *names,
                       const int64_t *const *lists, const int *counts, int count) {
  assert_int_equal(gen_param_count(t), count);
  uint64_t size = 1;
  for (int i = 0; i < count; i++) {
    assert_string_equal(gen_param_name(t, i), names[i]);
    assert_int_equal(gen_param_value_count(t, i), counts[i]);
    for (int j = 0; j < counts[i]; j++) assert_int_equal(gen_param_value(t, i, j), lists[i][j]);
    size *= (uint64_t)counts[i];
  }
  assert_int_equal(gen_space_size(t), size);
  return size;
}

void tc_emit_ok(gen_template *t, const gen_config *c, const char *dtype, const char *layout,
                gen_kernel *k) {
  ut_err e;
  mmt_status rc = gen_emit(t, c, dtype, layout, k, &e);
  if (rc) fprintf(stderr, "emit %s %s: %s\n", dtype, layout, e.msg);
  assert_int_equal(rc, MMT_OK);
}

void tc_compile_ok(const gen_kernel *k, const char *arch) {
  rt_cubin cubin;
  char *log = NULL;
  ut_err e;
  mmt_status rc = rt_compile(k->source, k->kernel_name, arch, &cubin, &log, &e);
  if (rc) fprintf(stderr, "%s (%s): %s\n%s\n", k->kernel_name, arch, e.msg, log ? log : "");
  assert_int_equal(rc, MMT_OK);
  assert_true(cubin.size > 4 && memcmp(cubin.data, "\177ELF", 4) == 0);
  if (log && *log) fprintf(stderr, "%s (%s): %s\n", k->kernel_name, arch, log);
  assert_true(!log || !*log); /* not even a warning */
  free(log);
  rt_cubin_free(&cubin);
}

/* Compiled on rt_compile_batch's threads, checked here: cmocka's assertions are not
 * thread-safe. */
void tc_compile_all(const gen_kernel *kernels, const char *const *archs, int count,
                    rt_cubin *cubins) {
  rt_compile_job *jobs = calloc((size_t)(count > 0 ? count : 1), sizeof *jobs);
  assert_non_null(jobs);
  for (int i = 0; i < count; i++) {
    jobs[i] = (rt_compile_job){.source = kernels[i].source, .name = kernels[i].kernel_name};
    ut_copy(jobs[i].arch, sizeof jobs[i].arch,
            archs                ? archs[i]
            : kernels[i].arch[0] ? kernels[i].arch
                                 : "sm_90");
  }
  rt_compile_batch(NULL, jobs, count, 0);
  for (int i = 0; i < count; i++) {
    rt_compile_job *j = &jobs[i];
    if (j->rc)
      fprintf(stderr, "%s (%s): %s\n%s\n", j->name, j->arch, j->err.msg, j->log ? j->log : "");
    assert_int_equal(j->rc, MMT_OK);
    assert_true(j->cubin.size > 4 && memcmp(j->cubin.data, "\177ELF", 4) == 0);
    if (j->log && *j->log) fprintf(stderr, "%s (%s): %s\n", j->name, j->arch, j->log);
    assert_true(!j->log || !*j->log); /* not even a warning */
    free(j->log);
    if (cubins)
      cubins[i] = j->cubin;
    else
      rt_cubin_free(&j->cubin);
  }
  free(jobs);
}

const rt_cu *tc_open_gpu_or_skip(rt_device *d) {
  ut_err e;
  const rt_cu *cu = NULL;
  mmt_status rc = rt_device_open(0, d, &e);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE || rc == MMT_ERR_CUDA) {
    print_message("no GPU: %s: %s\n", mmt_status_name(rc), e.msg);
    skip();
  }
  assert_int_equal(rc, MMT_OK);
  assert_int_equal(rt_driver(&cu, &e), MMT_OK);
  return cu;
}

bool tc_long_tests(void) {
  const char *v = getenv("MMTUNE_LONG_TESTS");
  return v && v[0] && strcmp(v, "0") != 0;
}
