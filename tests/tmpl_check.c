/* tmpl_check.c -- see tmpl_check.h. */
#include "tmpl_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
