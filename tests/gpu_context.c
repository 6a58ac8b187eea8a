/* gpu_context.c -- see gpu_context.h. */
#include "gpu_context.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "rt_device.h"

int gc_setup(void **state) {
  gc_fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  snprintf(f->dir, sizeof f->dir, "/tmp/mmt_gpu_test_XXXXXX");
  assert_non_null(mkdtemp(f->dir));
  *state = f;
  return 0;
}

int gc_teardown(void **state) {
  gc_fixture *f = *state;
  mmt_close(f->ctx);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", f->dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", f->dir);
  free(f);
  return 0;
}

void gc_open_or_skip(gc_fixture *f, int min_cc) {
  rt_device dev;
  ut_err e;
  mmt_status rc = rt_device_open(0, &dev, &e);
  if (rc == MMT_ERR_NO_DRIVER || rc == MMT_ERR_NO_DEVICE) skip();
  assert_int_equal(rc, MMT_OK);
  const int cc = atoi(dev.arch + 3);
  rt_device_close(&dev);
  if (cc < min_cc) skip();
  assert_int_equal(rt_driver(&f->cu, &e), MMT_OK);
  mmt_options o = {.db_path = "", .cache_dir = f->dir};
  rc = mmt_open(&f->ctx, 0, &o);
  if (rc) fail_msg("mmt_open: %s: %s", mmt_status_name(rc), mmt_errmsg(f->ctx));
}
