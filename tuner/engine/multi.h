/*
 * engine/multi.h -- `mmtune tune --device all|I,J,...`: one worker process per GPU, fed from one
 * plan, results merged into the main database by the parent (engine/multi.c says how).
 */
#ifndef MMT_TN_ENGINE_MULTI_H
#define MMT_TN_ENGINE_MULTI_H

#include <stdbool.h>

#include "cli/args.h"

#define TN_MULTI_MAX_GPUS 64

/* Whether a --device value asks for several GPUs ("all", or a list with a comma). */
bool tn_multi_wanted(const char *device);

/* Runs the tune command over the GPUs `devices` names: argc/argv are tune's (argv[0] the
 * command), parsed and checked already; shard is the process's --shard, db_path its
 * database.  Returns the exit code: 0, 1 (a part unfinished, a merge failed), 2 (a bad
 * device list), 130 (interrupted; what was measured is merged). */
int tn_tune_multi(int argc, char **argv, const char *devices, tn_shard shard, const char *db_path);

/* For tests.  "all" (the count devices present) or "I,J,..." (distinct ordinals below count,
 * count < 0: unchecked) into out[0..*n-1]; else prints one line and returns exit 2. */
int tn_multi_parse_devices(const char *text, int count, int *out, int *n);
/* argv[1..argc-1] without --device/-d, --shard and --db (and their values, in either "--opt
 * VALUE" or "--opt=VALUE" form): what each worker gets before its own.  Owned array (free),
 * strings borrowed; NULL when out of memory. */
char **tn_multi_worker_args(int argc, char **argv, int *n);

#endif /* MMT_TN_ENGINE_MULTI_H */
