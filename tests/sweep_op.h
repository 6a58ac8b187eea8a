/*
 * sweep_op.h -- mmtune-sweep's cases of op kernels (sweep_plan.h: a template's op twins):
 * each operand, the op's bias and scale vectors each in an exact-size allocation (A, B and D
 * hold the batch's problems one after another), D (in C's place, the op's type) checked against
 * the whole expression in float64 and its row padding and prefix against a sentinel.  Prefix
 * sw_.
 */
#ifndef MMT_TESTS_SWEEP_OP_H
#define MMT_TESTS_SWEEP_OP_H

#include <stdbool.h>
#include <stddef.h>

#include "rt_device.h"
#include "rt_driver.h"
#include "sweep_plan.h"

/* Runs case i of plan (an op kernel's, loaded as k): *pass, or why not.  *dead: the context
 * is lost (a sticky error).  Errors of the host or the driver are returned (why says them). */
mmt_status sw_run_op_case(const rt_cu *cu, const rt_kernel *k, const sw_plan *plan, int i,
                          bool *pass, bool *dead, char *why, size_t whylen);

#endif /* MMT_TESTS_SWEEP_OP_H */
