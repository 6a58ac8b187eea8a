/*
 * rt_provenance.h -- which kernel a stored row measured, so that a row is trusted exactly as
 * long as the templates still emit that kernel.  Prefix rt_.  Needs no GPU.
 *
 * A row's kernel_hash (schema 6) names what was compiled and how it was launched: the emitted
 * source, the NVRTC options (the kernel's own architecture request and mmtune's fixed
 * options) and the launch description (entry point, block, grid formula, shared memory,
 * exclusivity, workspace, dependent launch, requirements, tensor maps).  So an edit of a
 * template, of a library it loads or of the sandbox that emits the same kernels keeps every
 * row, and one that changes a kernel makes exactly that kernel's rows stale.  The NVRTC
 * version is kept beside it (the row's nvrtc_version): a row measured under another NVRTC
 * still serves the dispatcher, and the tuner measures its candidates again under its own.
 *
 * A row from before schema 6 has no kernel_hash ("").  It is current while its template_hash
 * names the template as it is, or an earlier version that the template's lineage says emits
 * the same kernel for it (gen_emits_as); `mmtune db rekey` then records its kernel_hash, so
 * that it outlives the next template edit.
 */
#ifndef MMT_RT_PROVENANCE_H
#define MMT_RT_PROVENANCE_H

#include <stdbool.h>

#include "gen.h"
#include "util.h"

/* 16 hex digits and a NUL: the hash of what kernel k is (see the top of this file). */
void rt_kernel_hash(const gen_kernel *k, char out[17]);

/* What a row says of the kernel it measured. */
typedef struct {
  const char *template_hash; /* gen_source_hash of the template as measured */
  const char *kernel_hash;   /* rt_kernel_hash of the kernel measured; "" before schema 6 */
  const char *params, *dtype, *layout;
} rt_row_kernel;

/*
 * Whether row r measured the kernel template t (of the row's name) emits now for the row's
 * params, dtype and layout.  now: that kernel when the caller has emitted it (NULL: emitted
 * here when needed).  Without `now`, a row with a kernel_hash whose template_hash is t's own
 * is current without emitting (the same template text emits the same kernel unless the
 * sandbox itself changed; a caller about to launch passes `now` and gets the exact answer).
 * *current false for a config that no longer parses or emits.  Errors: MMT_ERR_NOMEM only.
 */
mmt_status rt_row_current(gen_template *t, const rt_row_kernel *r, const gen_kernel *now,
                          bool *current, ut_err *err);

#endif /* MMT_RT_PROVENANCE_H */
