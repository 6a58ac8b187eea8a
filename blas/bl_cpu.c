/* bl_cpu.c -- see bl.h: the CPU path.  The system BLAS is loaded with dlopen, never linked,
 * so that LD_PRELOAD of this library works whatever BLAS the program was linked with, and
 * so that this library's own sgemm_ is never found instead of the CPU BLAS's: dlsym on the
 * library's handle searches that library (and its dependencies) first. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "bl.h"

/* The Fortran GEMM ABI shared by sgemm_, sbgemm_ and shgemm_ (A and B as untyped). */
typedef void (*f77_gemm_fn)(const char *, const char *, const int *, const int *, const int *,
                            const float *, const void *, const int *, const void *, const int *,
                            const float *, float *, const int *, size_t, size_t);

/* Written once by bl_cpu_load (under bl_blas.c's pthread_once), read-only afterwards. */
static struct {
  void *handle;
  f77_gemm_fn gemm[3]; /* indexed by bl_elem: sgemm_, sbgemm_, shgemm_ */
} g_cpu;

static void *symbol_of(void *handle, const char *name) {
  dlerror();
  return dlsym(handle, name);
}

/* True when sym lies in this very library (MMTUNE_BLAS_CPU_LIBRARY naming it would recurse). */
static bool is_own(void *sym) {
  Dl_info self, other;
  void *anchor;
  int (*own)(const bl_config *) = bl_cpu_load; /* any function of this library */
  memcpy(&anchor, &own, sizeof anchor);
  return dladdr(anchor, &self) && dladdr(sym, &other) && self.dli_fbase == other.dli_fbase;
}

int bl_cpu_load(const bl_config *cfg) {
  static const char *const names[3] = {"sgemm_", "sbgemm_", "shgemm_"};
  void *handle = dlopen(cfg->cpu_library, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    bl_say("CPU BLAS %s not loaded (%s); the built-in loop computes CPU calls (slow)",
           cfg->cpu_library, why ? why : "dlopen failed");
    return -1;
  }
  void *sgemm = symbol_of(handle, "sgemm_");
  if (!sgemm || is_own(sgemm)) {
    bl_say("CPU BLAS %s %s; the built-in loop computes CPU calls (slow)", cfg->cpu_library,
           sgemm ? "is libmmtune_blas itself" : "has no sgemm_");
    dlclose(handle);
    return -1;
  }
  g_cpu.handle = handle;
  for (int e = 0; e < 3; e++) {
    void *sym = symbol_of(handle, names[e]);
    if (sym && !is_own(sym)) memcpy(&g_cpu.gemm[e], &sym, sizeof sym);
  }
  if (cfg->verbose)
    bl_say("CPU BLAS %s loaded (sbgemm_ %s, shgemm_ %s)", cfg->cpu_library,
           g_cpu.gemm[BL_BF16] ? "forwarded" : "converted to fp32",
           g_cpu.gemm[BL_F16] ? "forwarded" : "converted to fp32");
  return 1;
}

void *bl_cpu_symbol(const char *name) {
  return g_cpu.handle ? symbol_of(g_cpu.handle, name) : NULL;
}

void bl_cpu_gemm(const bl_gemm *g) {
  f77_gemm_fn f = g_cpu.gemm[g->elem];
  /* alpha or K zero: C = beta * C, A and B unread, as reference BLAS defines it.  Some CPU
   * BLAS (OpenBLAS 0.3) multiply anyway, so NaN in A or B reaches C: computed here instead. */
  if (f && bl_reads_ab(g)) {
    char ta = g->trans_a ? 'T' : 'N', tb = g->trans_b ? 'T' : 'N';
    f(&ta, &tb, &g->m, &g->n, &g->k, &g->alpha, g->a, &g->lda, g->b, &g->ldb, &g->beta, g->c,
      &g->ldc, 1, 1);
    return;
  }
  if (g->elem != BL_F32 && g_cpu.gemm[BL_F32] && bl_reads_ab(g)) {
    bl_gemm f32;
    float *bufs = NULL;
    if (bl_to_f32(g, &f32, &bufs)) {
      bl_cpu_gemm(&f32);
      free(bufs);
      return;
    }
  }
  bl_ref_gemm(g);
}
