/* gpu_context.h -- the fixture of the tests that call the public API on the GPU: a context on
 * device 0 with no database and a cubin cache in a fresh temporary folder (removed after),
 * and the driver table for the tests' own copies.  Prefix gc_. */
#ifndef MMT_TESTS_GPU_CONTEXT_H
#define MMT_TESTS_GPU_CONTEXT_H

#include "mmtune.h"
#include "rt_driver.h"

typedef struct {
  char dir[64]; /* the cubin cache */
  const rt_cu *cu;
  mmt_context *ctx;
} gc_fixture;

/* cmocka setup and teardown: *state is a gc_fixture. */
int gc_setup(void **state);
int gc_teardown(void **state);

/* Opens f->ctx, or skip()s without a driver or device, or on a device of compute capability
 * below min_cc (e.g. 89). */
void gc_open_or_skip(gc_fixture *f, int min_cc);

#endif /* MMT_TESTS_GPU_CONTEXT_H */
