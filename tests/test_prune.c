/* test_prune.c -- tn_prune on known register and shared-memory figures (sm_90 limits). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "gpu/prune.h"

static const tn_device_limits H100 = {.regs_per_block = 65536, .shared_per_block = 232448};

static void test_keeps_healthy_kernels(void **state) {
  (void)state;
  char why[128] = "x";
  /* reg_tiled's default: 256 threads, 128 registers, 16.5 KiB (+1 KiB reserved). */
  tn_kernel_figures k = {.regs = 128, .local_bytes = 0, .threads = 256, .shared_bytes = 16896};
  assert_false(tn_prune(&k, &H100, why, sizeof why));
  assert_string_equal(why, "");
  /* 1024 threads at 64 registers use the whole register file: still launchable. */
  k = (tn_kernel_figures){.regs = 64, .threads = 1024, .shared_bytes = 0};
  assert_false(tn_prune(&k, &H100, NULL, 0));
  /* exactly the opt-in shared-memory maximum */
  k = (tn_kernel_figures){.regs = 32, .threads = 128, .shared_bytes = 232448};
  assert_false(tn_prune(&k, &H100, NULL, 0));
}

static void test_prunes_spills(void **state) {
  (void)state;
  char why[128];
  /* a reg_tiled config that hit the register cap: 16 bytes of spills */
  tn_kernel_figures k = {.regs = 128, .local_bytes = 16, .threads = 256, .shared_bytes = 25344};
  assert_true(tn_prune(&k, &H100, why, sizeof why));
  assert_string_equal(why, "spills: 16 bytes of local memory per thread (128 registers)");
}

static void test_prunes_unlaunchable(void **state) {
  (void)state;
  char why[128];
  /* 1024 threads x 72 registers (rounded to 72) = 73728 > 65536 */
  tn_kernel_figures k = {.regs = 72, .threads = 1024, .shared_bytes = 0};
  assert_true(tn_prune(&k, &H100, why, sizeof why));
  assert_non_null(strstr(why, "exceed the 65536 registers a block"));
  /* 65 registers round up to 72 per thread */
  k = (tn_kernel_figures){.regs = 65, .threads = 1024, .shared_bytes = 0};
  assert_true(tn_prune(&k, &H100, NULL, 0));
  k = (tn_kernel_figures){.regs = 32, .threads = 256, .shared_bytes = 232449};
  assert_true(tn_prune(&k, &H100, why, sizeof why));
  assert_string_equal(why, "232449 bytes of shared memory exceed the 232448 a block may have");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keeps_healthy_kernels),
      cmocka_unit_test(test_prunes_spills),
      cmocka_unit_test(test_prunes_unlaunchable),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
