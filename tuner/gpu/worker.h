/*
 * gpu/worker.h -- containment: candidates run on the GPU in a worker process.  Prefix tn_.
 *
 * The tuner never touches the GPU itself.  It starts `mmtune __worker` (the same binary,
 * exec'd fresh) connected by two pipes, sends one candidate at a time and waits with a
 * watchdog.  A kernel that faults kills the worker's CUDA context: the worker reports `fault`
 * and exits.  A kernel that hangs past the watchdog gets the worker killed and is recorded as
 * `timeout`.  Either way the next request starts a new worker and tuning goes on.
 */
#ifndef MMT_TN_GPU_WORKER_H
#define MMT_TN_GPU_WORKER_H

#include "db.h"
#include "gen.h"
#include "gpu/measure.h"
#include "rt_compile.h"

typedef struct tn_worker tn_worker;

/* Starts a worker on device `ordinal`; fills *info and arch[16] from it.  watchdog_s bounds
 * every request.  Errors: the worker's own failure (no driver, no device) with its message. */
mmt_status tn_worker_start(int ordinal, const char *cache_dir, double watchdog_s, tn_worker **out,
                           db_device *info, char arch[16], ut_err *err);

/* Measures one candidate in the worker.  A fault or a timeout is a result (out->status
 * DB_FAULT / DB_TIMEOUT, MMT_OK returned) and the worker is replaced.  Errors only when no
 * worker can be started or the worker hit a failure that is not the candidate's. */
mmt_status tn_worker_measure(tn_worker *w, const rt_cubin *cubin, const gen_kernel *spec,
                             const tn_measure_opts *opts, tn_measurement *out, ut_err *err);

/* Asks the worker to exit (kills it if it does not) and frees.  NULL is a no-op. */
void tn_worker_stop(tn_worker *w);
/* The worker's tn_gpu_guard_note: NULL when its verification launches have guard pages. */
const char *tn_worker_guard_note(const tn_worker *w);

#endif /* MMT_TN_GPU_WORKER_H */
