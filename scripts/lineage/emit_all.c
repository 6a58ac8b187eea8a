/*
 * emit_all.c -- every kernel the templates on the search path emit, one line each:
 *   template dtype layout params source-hash launch-hash
 * (the line of tests/data/emit_golden.txt: the hash of the source and of
 * gen_kernel_launch_text), for every valid config of every template, each dtype it declares
 * and each layout it supports.  Before a template's lines, "# template NAME HASH PATH" (its
 * gen_source_hash and file) and "# default NAME PARAMS" (its default config); after them, "# count NAME ..." (configs, kernels, seconds).
 *
 * scripts/lineage.sh builds this file twice, against this tree's gen and an earlier commit's,
 * and compares the two outputs.  So it uses only what both gen.h have: gen_list,
 * gen_load_named, gen_space_size, gen_config_at, gen_config_default, gen_config_format,
 * gen_check, gen_emit,
 * gen_source_hash, gen_supports_layout, gen_dtype_count, gen_dtype.  Two things differ:
 *  - whether a config is valid for a dtype and layout: gen_check_for where the tree has it
 *    (the driver compiles with -DEMIT_ALL_CHECK_FOR=1), else, as an earlier tree's tuner did,
 *    the config alone (gen_check without a problem) and whatever emit then accepts;
 *  - gen_kernel_launch_text: an earlier gen.h lacks it, so the driver compiles this tree's
 *    gen/gen_launch.c in, against this tree's gen.h (a quoted include looks beside the file
 *    first): it reads only the fields both trees' gen_kernel have, at the same offsets, which
 *    compare.py checks (the structs' text the same, or this tree's with fields appended).
 * Templates are emitted with gen's default device (GEN_DEFAULT_ARCH's limits where the tree has
 * them: 132 SMs, 227 KiB shared memory a block, an H100's and an H200's).
 *
 * Usage: emit_all [--every N | --hashes] [TEMPLATE...]   (no names: every template gen_list
 *                                                       finds)
 *   --every N  emit only the configs whose canonical params text hashes to 0 modulo N: a sample
 *              that both trees draw alike where a template's params did not change.
 *   --hashes   only the "# template" lines: a tree's gen_source_hash of each template (what its
 *              tuner wrote into a row's template_hash).
 * Exit status 0, or 1 when a template does not load or a valid config fails to emit.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen.h"

#ifndef GEN_LAUNCH_TEXT_MAX
/* An earlier gen.h: gen_launch.c of this tree is linked in (see above). */
#define GEN_LAUNCH_TEXT_MAX 1024
mmt_status gen_kernel_launch_text(const gen_kernel *k, char *out, size_t outlen, ut_err *err);
#endif

#define PARAMS_MAX 2048

typedef struct {
  uint64_t every;     /* 1: every config */
  uint64_t n_configs; /* of the template's space (after --every) */
  uint64_t n_kernels; /* lines written */
  uint64_t n_refused; /* valid configs whose emit failed (an earlier tree: not a kernel) */
} emit_counts;

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Each of these is 1 (valid), 0 (not) or -1 (the check failed, said on stderr). */

/* The config alone, in an earlier tree: valid for every dtype and layout emit accepts. */
static int valid_alone(gen_template *t, const gen_config *c, const char *params) {
#if EMIT_ALL_CHECK_FOR
  (void)t, (void)c, (void)params;
  return 1; /* valid_for checks each dtype and layout */
#else
  bool valid = false;
  ut_err e;
  if (gen_check(t, c, NULL, &valid, NULL, 0, &e) == MMT_OK) return valid;
  fprintf(stderr, "emit_all: %s %s: %s\n", gen_name(t), params, e.msg);
  return -1;
#endif
}

/* c, valid alone, for dtype and layout. */
static int valid_for(gen_template *t, const gen_config *c, const char *params, const char *dtype,
                     const char *layout) {
#if EMIT_ALL_CHECK_FOR
  bool valid = false;
  ut_err e;
  if (gen_check_for(t, c, dtype, layout, &valid, NULL, 0, &e) == MMT_OK) return valid;
  fprintf(stderr, "emit_all: %s %s %s %s: %s\n", gen_name(t), dtype, layout, params, e.msg);
  return -1;
#else
  (void)t, (void)c, (void)params, (void)dtype, (void)layout;
  return 1;
#endif
}

/* Emits c for dtype and layout and prints its line; false when emit refused it. */
static bool emit_line(gen_template *t, const gen_config *c, const char *params, const char *dtype,
                      const char *layout, ut_err *e) {
  gen_kernel k = {0};
  char launch[GEN_LAUNCH_TEXT_MAX], src_hex[17], launch_hex[17];
  if (gen_emit(t, c, dtype, layout, &k, e) != MMT_OK) return false;
  mmt_status rc = gen_kernel_launch_text(&k, launch, sizeof launch, e);
  if (!rc) {
    ut_hash64_hex(ut_hash64(k.source, strlen(k.source)), src_hex);
    ut_hash64_hex(ut_hash64(launch, strlen(launch)), launch_hex);
    printf("%s %s %s %s %s %s\n", gen_name(t), dtype, layout, params, src_hex, launch_hex);
  }
  gen_kernel_clear(&k);
  return rc == MMT_OK;
}

/* Every kernel of one config: each dtype and supported layout it is valid for. */
static int emit_config(gen_template *t, const gen_config *c, const char *params, emit_counts *n) {
  ut_err e;
  const int alone = valid_alone(t, c, params);
  if (alone <= 0) return alone < 0;
  int failed = 0;
  for (int d = 0; d < gen_dtype_count(t); d++)
    for (int l = 0; l < GEN_LAYOUTS; l++) {
      const char *dtype = gen_dtype(t, d), *layout = gen_layout_name(l);
      if (!gen_supports_layout(t, layout)) continue;
      const int valid = valid_for(t, c, params, dtype, layout);
      failed |= valid < 0;
      if (valid <= 0) continue;
      if (emit_line(t, c, params, dtype, layout, &e)) {
        n->n_kernels++;
        continue;
      }
      n->n_refused++;
#if EMIT_ALL_CHECK_FOR
      /* here the space is what emits: a valid config that fails is a template bug */
      fprintf(stderr, "emit_all: %s %s %s %s: %s\n", gen_name(t), dtype, layout, params, e.msg);
      failed = 1;
#endif
    }
  return failed;
}

/* hashes_only: the "# template" line alone (--hashes). */
static int emit_template(const char *name, uint64_t every, bool hashes_only) {
  gen_template *t = NULL;
  ut_err e;
  if (gen_load_named(name, &t, &e) != MMT_OK) {
    fprintf(stderr, "emit_all: %s\n", e.msg);
    return 1;
  }
  const double start = now_seconds();
  emit_counts n = {.every = every};
  int failed = 0;
  printf("# template %s %s %s\n", gen_name(t), gen_source_hash(t), gen_path(t));
  if (hashes_only) {
    gen_free(t);
    return 0;
  }
  { /* what a config text that does not name a parameter means (compare.py: a later tree's
       added parameters) */
    gen_config c;
    char params[PARAMS_MAX];
    gen_config_default(t, &c);
    if (gen_config_format(t, &c, params, sizeof params, &e) != MMT_OK) {
      fprintf(stderr, "emit_all: %s: %s\n", name, e.msg);
      gen_free(t);
      return 1;
    }
    printf("# default %s %s\n", gen_name(t), params);
  }
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    char params[PARAMS_MAX];
    gen_config_at(t, idx, &c);
    if (gen_config_format(t, &c, params, sizeof params, &e) != MMT_OK) {
      fprintf(stderr, "emit_all: %s: %s\n", name, e.msg);
      failed = 1;
      break;
    }
    if (every > 1 && ut_hash64(params, strlen(params)) % every != 0) continue;
    n.n_configs++;
    failed |= emit_config(t, &c, params, &n);
  }
  printf("# count %s configs=%llu kernels=%llu refused=%llu every=%llu seconds=%.1f\n", gen_name(t),
         (unsigned long long)n.n_configs, (unsigned long long)n.n_kernels,
         (unsigned long long)n.n_refused, (unsigned long long)n.every, now_seconds() - start);
  fflush(stdout);
  gen_free(t);
  return failed;
}

int main(int argc, char **argv) {
  uint64_t every = 1;
  int first = 1;
  const bool hashes_only = argc > 1 && strcmp(argv[1], "--hashes") == 0;
  if (hashes_only) {
    first = 2;
  } else if (argc > 2 && strcmp(argv[1], "--every") == 0) {
    char *end = NULL;
    every = strtoull(argv[2], &end, 10);
    if (!end || *end || every < 1) {
      fprintf(stderr, "emit_all: --every takes a count >= 1\n");
      return 2;
    }
    first = 3;
  }
  int failed = 0;
  if (first < argc) {
    for (int i = first; i < argc; i++) failed |= emit_template(argv[i], every, hashes_only);
    return failed;
  }
  char **names = NULL;
  int count = 0;
  ut_err e;
  if (gen_list(&names, &count, &e) != MMT_OK) {
    fprintf(stderr, "emit_all: %s\n", e.msg);
    return 1;
  }
  for (int i = 0; i < count; i++) failed |= emit_template(names[i], every, hashes_only);
  gen_names_free(names, count);
  return failed;
}
