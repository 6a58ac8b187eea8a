/* dep_chain.h -- a GPU check the template tests share: back-to-back launches of one kernel
 * with no host synchronization, each reading what the launch before it wrote and writing what
 * that launch read.  Launches that may start early (dependent_launch) must still get exact
 * results.  Prefix dc_.  cmocka assertions; the device's context must be current. */
#ifndef MMT_TESTS_DEP_CHAIN_H
#define MMT_TESTS_DEP_CHAIN_H

#include "rt_device.h"
#include "rt_driver.h"

/* k: a loaded f16 kernel of layout "nn" that computes 512^3 problems (alpha 1, beta 0).
 * P = X B, Q = P B, P = Q B, ... 16 times, B a permutation matrix, so every step moves exact
 * values: after s steps C[i][n] = X[i][perm^-s(n)], checked exactly on the host. */
void dc_dependent_chain(const rt_cu *cu, const rt_kernel *k);

#endif /* MMT_TESTS_DEP_CHAIN_H */
