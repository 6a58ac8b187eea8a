/*
 * tmpl_check.h -- test helper shared by the template tests (test_templates, test_mma_sync,
 * test_wgmma): load, parse, check, emit and NVRTC-compile with cmocka assertions that print
 * gen's or NVRTC's message before failing.
 */
#ifndef MMT_TESTS_TMPL_CHECK_H
#define MMT_TESTS_TMPL_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gen.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "rt_driver.h"

/* Loads the template file at path; fails the test when it does not load. */
gen_template *tc_load(const char *path);
/* Parses "name=value,..." (over the default) into c. */
void tc_parse_ok(gen_template *t, const char *text, gen_config *c);
/* The constraints' verdict for c (and p when not NULL); why receives the reason. */
bool tc_check(gen_template *t, const gen_config *c, const gen_problem *p, char *why, size_t whylen);
/* The constraints' verdict for c alone in dtype and layout (gen_check_for). */
bool tc_check_for(gen_template *t, const gen_config *c, const char *dtype, const char *layout,
                  char *why, size_t whylen);
/* The config "name=value,..." is invalid (for p when not NULL), for a reason containing why. */
void tc_rejects(gen_template *t, const char *text, const gen_problem *p, const char *why);
/* Asserts that each of the `count` lines occurs in the kernel's source (a missing one is named
 * on stderr first). */
void tc_source_has(const gen_kernel *k, const char *const *lines, int count);
/* Asserts the kernel's grid rule, axis by axis: (dim, tile) as in gen_grid_dim. */
void tc_grid_is(const gen_kernel *k, char x_dim, int64_t x_tile, char y_dim, int64_t y_tile,
                char z_dim, int64_t z_tile);
/* The template declares exactly these `count` parameters, in order, each with exactly its
 * list of values; returns the space size, which gen_space_size must equal. */
uint64_t tc_params_are(const gen_template *t, const char *const *names,
                       const int64_t *const *lists, const int *counts, int count);
/* Emits c for dtype and layout into k. */
void tc_emit_ok(gen_template *t, const gen_config *c, const char *dtype, const char *layout,
                gen_kernel *k);
/* NVRTC-compiles k for arch: an ELF cubin and not even a warning in the log. */
void tc_compile_ok(const gen_kernel *k, const char *arch);
/* tc_compile_ok for `count` kernels at once, kernels[i] for archs[i] (NULL: each kernel's own
 * gen_kernel.arch, else sm_90), on one thread per CPU: NVRTC is most of the template tests'
 * time.  cubins (may be NULL) receives each cubin, for the caller to free. */
void tc_compile_all(const gen_kernel *kernels, const char *const *archs, int count,
                    rt_cubin *cubins);
/* Opens device 0 into *d and returns the driver, or skips the test where there is no driver
 * or device. */
const rt_cu *tc_open_gpu_or_skip(rt_device *d);
/* Whether the long GPU sweeps run (MMTUNE_LONG_TESTS set and not 0): by default each GPU
 * test runs a sample that still covers every config and every layout, so the GPU suite fits
 * in a few minutes. */
bool tc_long_tests(void);

#endif /* MMT_TESTS_TMPL_CHECK_H */
