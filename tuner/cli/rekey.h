/*
 * cli/rekey.h -- `mmtune db rekey`: gives the rows measured before kernel hashes were recorded
 * (schema < 6) the hash of the kernel they measured, where this machine's templates still
 * emit it (rt_provenance.h), so those rows outlive the next template edit.  Prefix tn_.
 */
#ifndef MMT_CLI_REKEY_H
#define MMT_CLI_REKEY_H

#include <stdint.h>

#include "util.h"

/* Rekeys the database at path (opened for writing, upgraded to the current schema) in one
 * transaction.  *rekeyed: rows given a kernel hash; *left: rows without one still (their
 * template is gone or was changed since, beyond its lineage).  Errors: db_open's, SQLite's,
 * MMT_ERR_NOMEM. */
mmt_status tn_rekey(const char *path, int64_t *rekeyed, int64_t *left, ut_err *err);

#endif /* MMT_CLI_REKEY_H */
