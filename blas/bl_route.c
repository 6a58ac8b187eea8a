/* bl_route.c -- see bl.h: the environment, which path a call takes, and where the GPU path
 * puts its matrices.  Pure: no CUDA, no globals. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bl.h"

/* Appends one "NAME=VALUE is ...; using ..." line to warn. */
static void warn_line(char *warn, size_t warn_len, const char *name, const char *value,
                      const char *why) {
  if (!warn || warn_len == 0) return;
  size_t used = strnlen(warn, warn_len - 1);
  snprintf(warn + used, warn_len - used, "%s=\"%s\" ignored: %s\n", name, value, why);
}

/* A whole string as a double, or false. */
static bool parse_double(const char *s, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end != '\0') return false;
  *out = v;
  return true;
}

/* A whole string as a non-negative int, or false. */
static bool parse_int(const char *s, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end != '\0' || v < 0 || v > INT_MAX) return false;
  *out = (int)v;
  return true;
}

int bl_config_parse(bl_config *cfg, const char *threshold, const char *device,
                    const char *verbose, const char *cpu_library, const char *staging,
                    char *warn, size_t warn_len) {
  int bad = 0;
  if (warn && warn_len) warn[0] = '\0';
  cfg->threshold = BL_DEFAULT_THRESHOLD;
  cfg->device = 0;
  cfg->staging = BL_STAGE_PANELS;
  cfg->verbose = 0;
  snprintf(cfg->cpu_library, sizeof cfg->cpu_library, "%s", BL_DEFAULT_CPU_LIBRARY);

  double t;
  if (threshold && *threshold) {
    if (parse_double(threshold, &t) && isfinite(t) && t >= 0) {
      cfg->threshold = t;
    } else {
      warn_line(warn, warn_len, "MMTUNE_BLAS_THRESHOLD", threshold,
                "not a number of flops >= 0; using the default 33554432");
      bad++;
    }
  }
  if (device && *device && !parse_int(device, &cfg->device)) {
    warn_line(warn, warn_len, "MMTUNE_BLAS_DEVICE", device,
              "not a device ordinal >= 0; using device 0");
    cfg->device = 0;
    bad++;
  }
  int v;
  if (staging && *staging) {
    if (parse_int(staging, &v) && v <= BL_STAGE_PANELS) {
      cfg->staging = (bl_staging)v;
    } else {
      warn_line(warn, warn_len, "MMTUNE_BLAS_STAGING", staging, "not 0, 1 or 2; using 2");
      bad++;
    }
  }
  if (verbose && *verbose) {
    if (parse_int(verbose, &v)) {
      cfg->verbose = v > 2 ? 2 : v;
    } else {
      warn_line(warn, warn_len, "MMTUNE_BLAS_VERBOSE", verbose, "not 0, 1 or 2; using 0");
      bad++;
    }
  }
  if (cpu_library && *cpu_library) {
    if (strlen(cpu_library) < sizeof cfg->cpu_library) {
      memcpy(cfg->cpu_library, cpu_library, strlen(cpu_library) + 1);
    } else {
      warn_line(warn, warn_len, "MMTUNE_BLAS_CPU_LIBRARY", "...",
                "path too long; using " BL_DEFAULT_CPU_LIBRARY);
      bad++;
    }
  }
  return bad;
}

bool bl_is_noop(const bl_gemm *g) {
  return g->m == 0 || g->n == 0 || ((g->alpha == 0.0f || g->k == 0) && g->beta == 1.0f);
}

bool bl_reads_ab(const bl_gemm *g) {
  return g->m > 0 && g->n > 0 && g->k > 0 && g->alpha != 0.0f;
}

double bl_flops(const bl_gemm *g) {
  return bl_reads_ab(g) ? 2.0 * g->m * (double)g->n * (double)g->k : 0.0;
}

bool bl_wants_gpu(const bl_gemm *g, double threshold) {
  return !bl_is_noop(g) && bl_flops(g) >= threshold;
}

/* Places one operand at *offset (advanced past it, 256-byte aligned); false on overflow or a
 * pitch the driver may refuse. */
static bool place(bl_operand *op, bool used, size_t rows, size_t cols, size_t host_ld,
                  size_t *offset) {
  size_t dev_ld = rows > 0 ? rows : 1, bytes;
  /* An operand not read still gets a leading dimension mmt_gemm accepts. */
  *op = (bl_operand){
      .used = used, .rows = rows, .cols = cols, .host_ld = host_ld, .dev_ld = dev_ld};
  if (!used) return true;
  dev_ld = (dev_ld + 3) / 4 * 4;
  if (dev_ld > BL_MAX_PITCH / sizeof(float) || host_ld > BL_MAX_PITCH / sizeof(float))
    return false;
  if (__builtin_mul_overflow(dev_ld * sizeof(float), cols, &bytes)) return false;
  if (__builtin_add_overflow(bytes, (size_t)255, &bytes)) return false;
  bytes &= ~(size_t)255;
  op->dev_ld = dev_ld;
  op->dev_offset = *offset;
  return !__builtin_add_overflow(*offset, bytes, offset);
}

bool bl_plan_gpu(const bl_gemm *g, bl_plan *p) {
  size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k, off = 0;
  bool ab = bl_reads_ab(g);
  memset(p, 0, sizeof *p);
  if (g->elem != BL_F32) return false;
  if (!place(&p->a, ab, g->trans_a ? k : m, g->trans_a ? m : k, (size_t)g->lda, &off))
    return false;
  if (!place(&p->b, ab, g->trans_b ? n : k, g->trans_b ? k : n, (size_t)g->ldb, &off))
    return false;
  if (!place(&p->c, true, m, n, (size_t)g->ldc, &off)) return false;
  p->upload_c = g->beta != 0.0f;
  p->bytes = off;
  return true;
}
