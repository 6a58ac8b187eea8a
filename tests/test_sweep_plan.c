/* test_sweep_plan.c -- the plan of mmtune-sweep (sweep_plan.h) on the real templates (CPU
 * only): every family, dtype and layout is planned or skipped for the template's own reason;
 * default configs are there; every value of vec, split, repack and persist is; every problem
 * is one its config accepts (constraints and the kernel's requires, emitted again here);
 * offsets 1..7 reach every operand of mma_sync; extents; determinism; the size stays one that
 * memcheck gets through in minutes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen.h"
#include "sweep_plan.h"

#define TEMPLATES MMT_SOURCE_TEMPLATE_DIR
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const k_names[] = {"naive", "smem_tiled", "reg_tiled", "mma_sync", "wgmma"};
enum { NT = COUNT(k_names) };

typedef struct {
  gen_template *t[NT];
  sw_opts opts;
  sw_plan plan; /* the default sweep: 3 random configs, 2 problems, seed 1 */
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  ut_err err;
  if (!f) return -1;
  *state = f;
  for (int i = 0; i < NT; i++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.lua", TEMPLATES, k_names[i]);
    if (gen_load(path, &f->t[i], &err)) {
      fprintf(stderr, "%s\n", err.msg);
      return -1;
    }
  }
  f->opts = (sw_opts){.configs = 3, .problems = 2, .seed = 1};
  if (sw_plan_build(f->t, NT, &f->opts, &f->plan, &err)) {
    fprintf(stderr, "%s\n", err.msg);
    return -1;
  }
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  sw_plan_free(&f->plan);
  for (int i = 0; i < NT; i++) gen_free(f->t[i]);
  free(f);
  return 0;
}

static bool same_config(const gen_config *a, const gen_config *b) {
  return a->n == b->n && memcmp(a->v, b->v, sizeof a->v[0] * (size_t)a->n) == 0;
}

static int param_index(gen_template *t, const char *name) {
  for (int p = 0; p < gen_param_count(t); p++)
    if (strcmp(gen_param_name(t, p), name) == 0) return p;
  return -1;
}

static bool pair_planned(const sw_plan *plan, int tmpl, const char *dtype, const char *layout) {
  for (int k = 0; k < plan->nkernels; k++) {
    const sw_kernel *sk = &plan->kernels[k];
    if (sk->tmpl == tmpl && !strcmp(sk->dtype, dtype) && !strcmp(sk->layout, layout)) return true;
  }
  return false;
}

/* Every template x dtype x declared layout is planned, or skipped as a whole because no config
 * of the template takes a plain aligned problem there (the default's reason recorded).  Only
 * wgmma's tf32 tn is, today. */
static void test_every_pair(void **state) {
  fixture *f = *state;
  int skipped = 0;
  for (int t = 0; t < NT; t++)
    for (int d = 0; d < gen_dtype_count(f->t[t]); d++)
      for (int l = 0; l < GEN_LAYOUTS; l++) {
        const char *dtype = gen_dtype(f->t[t], d), *layout = gen_layout_name(l);
        if (!gen_supports_layout(f->t[t], layout)) continue;
        if (pair_planned(&f->plan, t, dtype, layout)) continue;
        bool recorded = false;
        for (int s = 0; s < f->plan.nskips; s++) {
          const sw_skip *k = &f->plan.skips[s];
          recorded = recorded || (k->tmpl == t && !strcmp(k->dtype, dtype) &&
                                  !strcmp(k->layout, layout) && !strcmp(k->what, "all configs") &&
                                  k->why[0]);
        }
        if (!recorded) fprintf(stderr, "%s %s %s: not planned\n", k_names[t], dtype, layout);
        assert_true(recorded);
        gen_config def;
        int64_t ld[3];
        bool valid = true;
        gen_config_default(f->t[t], &def);
        gen_min_ld(layout, 256, 256, 256, ld);
        const gen_problem p = {dtype, layout, 256, 256, 256, ld[0], ld[1], ld[2], 16, NULL, 1};
        assert_int_equal(gen_check(f->t[t], &def, &p, &valid, NULL, 0, NULL), MMT_OK);
        assert_false(valid);
        skipped++;
      }
  assert_int_equal(skipped, 7); /* wgmma tf32 tn; e4m3 and e5m2 but in nt */
  assert_true(pair_planned(&f->plan, 4, "tf32", "nt"));
  assert_true(pair_planned(&f->plan, 4, "tf32", "nn")); /* swap configs */
  assert_true(pair_planned(&f->plan, 4, "tf32", "tt"));
  /* No other skip but of single wgmma tf32 configs in nn and tt, which the template refuses
   * there (no swap in nn, swap in tt) or takes on no problem (A's fragments do not fit): every
   * other config of these templates has a kernel in every layout, and a problem
   * (test_refused_config: one a template refuses in a layout) */
  int config_skips = 0;
  for (int s = 0; s < f->plan.nskips; s++) {
    const sw_skip *k = &f->plan.skips[s];
    assert_int_equal(k->tmpl, 4);
    if (gen_dtype_fp8(k->dtype)) { /* a layout FP8 wgmma has no kernel for, as a whole */
      assert_string_equal(k->what, "all configs");
      assert_non_null(strstr(k->why, "layout nt only"));
      continue;
    }
    assert_string_equal(k->dtype, "tf32");
    assert_true(!strcmp(k->layout, "nn") || !strcmp(k->layout, "tt") || !strcmp(k->layout, "tn"));
    assert_true(k->why[0]);
    config_skips += strcmp(k->what, "all configs") != 0;
  }
  assert_int_equal(config_skips, f->plan.nskips - 7);
  assert_true(config_skips > 0);
}

/* A config that a template refuses in one layout (emit's error; skinny's lanes < 32 where W is
 * K-contiguous is one, but the sweep's problems are not skinny) is a skip with the template's
 * reason, not a failed plan; the same config is planned in the layouts that take it.
 * tests/templates_sweep/refuses_tn.lua refuses wide = 1 where A is stored transposed. */
static void test_refused_config(void **state) {
  (void)state;
  gen_template *t = NULL;
  ut_err err;
  assert_int_equal(gen_load(MMT_TEST_DIR "/templates_sweep/refuses_tn.lua", &t, &err), MMT_OK);
  sw_opts o = {.configs = 3, .problems = 2, .seed = 1};
  sw_plan plan;
  if (sw_plan_build(&t, 1, &o, &plan, &err)) fail_msg("sw_plan_build: %s", err.msg);
  const int wide = gen_param_index(t, "wide");
  int refused = 0, planned_wide = 0;
  for (int s = 0; s < plan.nskips; s++) {
    const sw_skip *k = &plan.skips[s];
    assert_string_not_equal(k->what, "all configs");
    assert_int_equal(k->layout[0], 't');
    assert_non_null(strstr(k->why, "test refusal: wide = 1 needs A stored M rows of K"));
    refused++;
  }
  for (int k = 0; k < plan.nkernels; k++) {
    const sw_kernel *sk = &plan.kernels[k];
    if (sk->cfg.v[wide] != 1) continue;
    assert_int_equal(sk->layout[0], 'n');
    planned_wide++;
  }
  assert_true(refused > 0);     /* the default config and 3 random ones of 4 meet wide = 1 */
  assert_true(planned_wide > 0); /* in nn and nt */
  sw_plan_free(&plan);
  gen_free(t);
}

/* Each planned pair but FP8's has the template's default config (where it takes a plain
 * problem: not wgmma's in tf32 nn and tt), and `configs` random ones. */
static void test_default_and_random(void **state) {
  fixture *f = *state;
  for (int t = 0; t < NT; t++) {
    gen_config def;
    gen_config_default(f->t[t], &def);
    for (int d = 0; d < gen_dtype_count(f->t[t]); d++)
      for (int l = 0; l < GEN_LAYOUTS; l++) {
        const char *dtype = gen_dtype(f->t[t], d), *layout = gen_layout_name(l);
        int defaults = 0, randoms = 0;
        for (int k = 0; k < f->plan.nkernels; k++) {
          const sw_kernel *sk = &f->plan.kernels[k];
          if (sk->tmpl != t || strcmp(sk->dtype, dtype) || strcmp(sk->layout, layout)) continue;
          if (sk->origin == SW_DEFAULT) {
            assert_true(same_config(&sk->cfg, &def));
            defaults++;
          }
          randoms += sk->origin == SW_RANDOM;
        }
        /* FP8: the bf16 configs' op kernels (test_fp8) */
        if (!pair_planned(&f->plan, t, dtype, layout) || gen_dtype_fp8(dtype)) continue;
        int64_t ld[3];
        bool takes = false;
        gen_min_ld(layout, 256, 256, 256, ld);
        const gen_problem plain = {dtype, layout, 256, 256, 256, ld[0], ld[1], ld[2], 16, NULL, 1};
        assert_int_equal(gen_check(f->t[t], &def, &plain, &takes, NULL, 0, NULL), MMT_OK);
        assert_int_equal(defaults, takes);
        assert_int_equal(randoms, f->opts.configs);
      }
  }
}

/* Every value of vec, split, repack and persist is planned (with cases) for each template that
 * has the parameter, in every planned layout of its first dtype. */
static void test_swept_values(void **state) {
  fixture *f = *state;
  static const char *const swept[] = SW_SWEPT_PARAMS;
  int checked = 0;
  for (int t = 0; t < NT; t++)
    for (int s = 0; s < COUNT(swept); s++) {
      const int p = param_index(f->t[t], swept[s]);
      if (p < 0) continue;
      for (int j = 0; j < gen_param_value_count(f->t[t], p); j++) {
        const int64_t value = gen_param_value(f->t[t], p, j);
        bool seen = false;
        for (int i = 0; i < f->plan.ncases && !seen; i++) {
          const sw_kernel *sk = &f->plan.kernels[f->plan.cases[i].kernel];
          seen = sk->tmpl == t && sk->cfg.v[p] == value;
        }
        if (!seen)
          fprintf(stderr, "%s: %s=%lld never planned\n", k_names[t], swept[s], (long long)value);
        assert_true(seen);
        checked++;
      }
    }
  /* reg_tiled vec 2 + split 5; mma_sync vec 4 + split 3; wgmma repack 2 + split 4 + persist 3
   * + swap 2 */
  assert_int_equal(checked, 7 + 7 + 11);
  /* split == 1 and split > 1 both, per template with split */
  for (int t = 0; t < NT; t++) {
    const int p = param_index(f->t[t], "split");
    bool one = false, more = false;
    if (p < 0) continue;
    for (int k = 0; k < f->plan.nkernels; k++) {
      const sw_kernel *sk = &f->plan.kernels[k];
      if (sk->tmpl != t) continue;
      one = one || sk->cfg.v[p] == 1;
      more = more || sk->cfg.v[p] > 1;
    }
    assert_true(one && more);
  }
}

/* Every case is valid for its config: the constraints on the problem, and the requires of the
 * kernel emitted again here (not the plan's copy).  Sizes, pads and offsets in range. */
static void test_problems_valid(void **state) {
  fixture *f = *state;
  for (int i = 0; i < f->plan.ncases; i++) {
    const sw_case *c = &f->plan.cases[i];
    const sw_kernel *sk = &f->plan.kernels[c->kernel];
    gen_template *t = f->t[sk->tmpl];
    gen_kernel k;
    char why[256] = "", line[1024];
    bool valid = false;
    assert_int_equal(
        gen_emit_op(t, &sk->cfg, sk->dtype, sk->layout, sk->has_op ? &sk->op : NULL, &k, NULL),
        MMT_OK);
    assert_int_equal(sk->has_op, sk->origin == SW_OP);
    assert_true(c->batch == 1 || (sk->has_op && c->batch == 2));
    const gen_problem p = sw_gen_problem(&f->plan, c);
    assert_int_equal(gen_check(t, &sk->cfg, &p, &valid, why, sizeof why, NULL), MMT_OK);
    const bool met = gen_requires_met(&k.requires, &p);
    if (!valid || !met) {
      sw_case_format(&f->plan, f->t, i, line, sizeof line);
      fprintf(stderr, "%s: %s%s\n", line, why, met ? "" : "requires not met");
    }
    assert_true(valid && met);
    assert_string_equal(k.kernel_name, sk->spec.kernel_name);
    /* a repack kernel always gets a problem it must repack */
    if (k.requires.repack) assert_true(p.align_bytes < 16);
    const int64_t elem = gen_dtype_size(sk->dtype);
    const int64_t unit = k.requires.repack ? 1 : k.requires.align_bytes / elem;
    int64_t w[3];
    gen_min_ld(sk->layout, c->m, c->n, c->k, w);
    for (int o = 0; o < 3; o++) {
      assert_in_range(c->offset[o], 0, SW_OFFSET_MAX);
      assert_in_range(c->ld[o] - w[o], 0, SW_PAD_MAX + unit - 1);
    }
    assert_true(c->m >= 1 && c->n >= 1 && c->k >= 1 && c->k <= 2 * SW_K_MAX + 16);
    assert_true(c->alpha != 0.0f);
    gen_kernel_clear(&k);
  }
}

/* Cases come grouped by kernel in kernel order (the sweep runs a kernel's cases together),
 * each kernel has 1..problems of them, and both beta == 0 and beta != 0 occur per template;
 * an op kernel that does not read C (no residual) is given beta == 0 alone, and residual op
 * kernels are planned with beta != 0. */
static void test_grouping(void **state) {
  fixture *f = *state;
  int *count = calloc((size_t)f->plan.nkernels, sizeof *count);
  int beta0[NT] = {0}, beta1[NT] = {0}, residual_beta = 0;
  assert_non_null(count);
  for (int i = 0; i < f->plan.ncases; i++) {
    const sw_case *c = &f->plan.cases[i];
    if (i > 0) assert_true(c->kernel == f->plan.cases[i - 1].kernel ||
                           c->kernel == f->plan.cases[i - 1].kernel + 1);
    count[c->kernel]++;
    const int t = f->plan.kernels[c->kernel].tmpl;
    (c->beta == 0.0f ? beta0 : beta1)[t]++;
    const sw_kernel *k = &f->plan.kernels[c->kernel];
    if (k->has_op && !k->op.residual) assert_true(c->beta == 0.0f);
    if (k->has_op && k->op.residual && c->beta != 0.0f) residual_beta++;
  }
  for (int k = 0; k < f->plan.nkernels; k++) assert_in_range(count[k], 1, f->opts.problems);
  for (int t = 0; t < NT; t++) assert_true(beta0[t] > 0 && beta1[t] > 0);
  assert_true(residual_beta > 0);
  free(count);
}

/* mma_sync takes any alignment with vec=0 and vec=1: every offset 1..7 reaches each operand. */
static void test_mma_offsets(void **state) {
  fixture *f = *state;
  unsigned seen[3] = {0, 0, 0};
  for (int i = 0; i < f->plan.ncases; i++) {
    const sw_case *c = &f->plan.cases[i];
    if (f->plan.kernels[c->kernel].tmpl != 3) continue;
    for (int o = 0; o < 3; o++) seen[o] |= 1u << c->offset[o];
  }
  for (int o = 0; o < 3; o++) assert_int_equal(seen[o] & 0xfe, 0xfe);
}

/* The extent is (rows - 1) * ld + width of each operand as stored. */
static void test_extent(void **state) {
  fixture *f = *state;
  sw_plan plan = f->plan; /* borrowed, with one hand-made case on its first tn kernel */
  int kidx = -1;
  for (int k = 0; k < plan.nkernels && kidx < 0; k++)
    if (!strcmp(plan.kernels[k].layout, "tn")) kidx = k;
  assert_true(kidx >= 0);
  sw_case c = {.kernel = kidx, .m = 5, .n = 3, .k = 7, .ld = {9, 4, 6}, .offset = {1, 2, 3}};
  int64_t rows[3], width[3], extent[3];
  sw_operand_shape(&plan, &c, rows, width, extent);
  /* tn: A is K rows of M, B is K rows of N, C is M rows of N */
  assert_int_equal(rows[0], 7);
  assert_int_equal(width[0], 5);
  assert_int_equal(extent[0], 6 * 9 + 5);
  assert_int_equal(rows[1], 7);
  assert_int_equal(width[1], 3);
  assert_int_equal(extent[1], 6 * 4 + 3);
  assert_int_equal(rows[2], 5);
  assert_int_equal(width[2], 3);
  assert_int_equal(extent[2], 4 * 6 + 3);
  /* alignment from offsets and pitches in bytes: 1 * 4 bytes for an f32 kernel's A */
  if (gen_dtype_size(plan.kernels[kidx].dtype) == 4)
    assert_int_equal(sw_gen_problem(&plan, &c).align_bytes, 4);
}

/* Field by field: structs have padding that memcmp would read. */
static bool same_case(const sw_case *a, const sw_case *b) {
  bool same = a->kernel == b->kernel && a->m == b->m && a->n == b->n && a->k == b->k &&
              a->alpha == b->alpha && a->beta == b->beta;
  for (int o = 0; o < 3; o++) same = same && a->ld[o] == b->ld[o] && a->offset[o] == b->offset[o];
  return same;
}

static bool same_plan(const sw_plan *a, const sw_plan *b) {
  if (a->ncases != b->ncases || a->nkernels != b->nkernels) return false;
  for (int k = 0; k < a->nkernels; k++)
    if (!same_config(&a->kernels[k].cfg, &b->kernels[k].cfg) ||
        strcmp(a->kernels[k].spec.source, b->kernels[k].spec.source))
      return false;
  for (int i = 0; i < a->ncases; i++)
    if (!same_case(&a->cases[i], &b->cases[i])) return false;
  return true;
}

/* The same seed gives the same plan, another seed another; a template's part does not depend
 * on the other templates planned. */
static void test_deterministic(void **state) {
  fixture *f = *state;
  sw_plan again, other, alone;
  sw_opts o2 = f->opts;
  o2.seed = 2;
  assert_int_equal(sw_plan_build(f->t, NT, &f->opts, &again, NULL), MMT_OK);
  assert_true(same_plan(&f->plan, &again));
  assert_int_equal(sw_plan_build(f->t, NT, &o2, &other, NULL), MMT_OK);
  assert_false(same_plan(&f->plan, &other));
  assert_int_equal(sw_plan_build(&f->t[3], 1, &f->opts, &alone, NULL), MMT_OK);
  int first = 0;
  while (f->plan.kernels[f->plan.cases[first].kernel].tmpl != 3) first++;
  for (int i = 0; i < alone.ncases; i++) {
    sw_case a = alone.cases[i], b = f->plan.cases[first + i];
    assert_true(same_config(&alone.kernels[a.kernel].cfg, &f->plan.kernels[b.kernel].cfg));
    a.kernel = b.kernel = 0;
    assert_true(same_case(&a, &b));
  }
  sw_plan_free(&again);
  sw_plan_free(&other);
  sw_plan_free(&alone);
}

/* The default sweep must get through memcheck in minutes on an H100: a few hundred kernels
 * and launches of small problems.  Grows only by a deliberate change of these bounds (the op
 * twins of the templates with epilogues about doubled them; wgmma's ping-pong configs added
 * 2%). */
static void test_size(void **state) {
  fixture *f = *state;
  double macs = 0;
  for (int i = 0; i < f->plan.ncases; i++) {
    const sw_case *c = &f->plan.cases[i];
    macs += (double)c->m * (double)c->n * (double)c->k;
  }
  print_message("default sweep: %d cases, %d kernels, %.3g multiply-adds\n", f->plan.ncases,
                f->plan.nkernels, macs);
  assert_in_range(f->plan.nkernels, 300, 550);
  assert_in_range(f->plan.ncases, 600, 1100);
  assert_true(macs < 4.5e9);
}

/* Templates with epilogues get op twins: in every planned pair, every op of SW_OPS that the
 * family can carry turns up (the rotation), gated ones included, and batches of 2 where the
 * config's grid.z is free; templates without epilogues get none. */
static void test_op_twins(void **state) {
  fixture *f = *state;
  static const char *const ops[] = SW_OPS;
  for (int t = 0; t < NT; t++) {
    int twins = 0, batched = 0, gated = 0, seen[COUNT(ops)] = {0};
    for (int k = 0; k < f->plan.nkernels; k++) {
      const sw_kernel *sk = &f->plan.kernels[k];
      if (sk->tmpl != t || !sk->has_op) continue;
      twins++;
      gated += sk->op.gated;
      for (int o = 0; o < COUNT(ops); o++) {
        gen_op op;
        seen[o] += gen_op_parse(ops[o], sk->dtype, &op, NULL) == MMT_OK &&
                   !memcmp(&op, &sk->op, sizeof op);
      }
      for (int i = 0; i < f->plan.ncases; i++)
        batched += f->plan.cases[i].kernel == k && f->plan.cases[i].batch == 2;
    }
    if (!gen_has_epilogues(f->t[t])) {
      assert_int_equal(twins, 0);
      continue;
    }
    int kinds = 0;
    for (int o = 0; o < COUNT(ops); o++) kinds += seen[o] > 0;
    print_message("%s: %d op twins, %d kinds of op, %d gated, %d batched cases\n", k_names[t],
                  twins, kinds, gated, batched);
    assert_true(twins > 0 && batched > 0 && gated > 0);
    assert_true(kinds >= COUNT(ops) - 1);
  }
}

/* FP8 (wgmma's e4m3 and e5m2, op kernels only): planned in nt from the bf16 nt configs, with
 * promotion at each interval (1, 2, 4) and fast accumulation (0, for an op that allows it),
 * and batches. */
static void test_fp8(void **state) {
  fixture *f = *state;
  const int wgmma = 4;
  assert_string_equal(k_names[wgmma], "wgmma");
  for (int d = 0; d < 2; d++) {
    const char *dtype = d ? "e5m2" : "e4m3";
    assert_true(pair_planned(&f->plan, wgmma, dtype, "nt"));
    const int promote = gen_param_index(f->t[wgmma], "promote");
    int by_promote[5] = {0}, batched = 0, block = 0, block256 = 0;
    for (int k = 0; k < f->plan.nkernels; k++) {
      const sw_kernel *sk = &f->plan.kernels[k];
      if (sk->tmpl != wgmma || strcmp(sk->dtype, dtype)) continue;
      assert_true(sk->has_op && gen_op_valid(&sk->op, dtype));
      assert_string_equal(sk->layout, "nt");
      const int64_t p = sk->cfg.v[promote];
      assert_true(p == 0 || p == 1 || p == 2 || p == 4);
      assert_true(p > 0 || sk->op.fast_accum);
      by_promote[p]++;
      block += sk->op.scale_block;
      for (int i = 0; i < f->plan.ncases; i++) {
        const bool two = f->plan.cases[i].kernel == k && f->plan.cases[i].batch == 2;
        batched += two;
        assert_false(two && sk->op.scale_block); /* block scales: one problem a call */
      }
      if (sk->op.scale_block) {
        const int64_t bn = sk->cfg.v[gen_param_index(f->t[wgmma], "bn")];
        assert_true(p == 1 && (bn <= 128 || bn == 256)); /* 256: by halves, a block each */
        block256 += bn == 256;
      }
    }
    print_message("%s: %d, %d, %d, %d kernels promoting every 0 (fast), 1, 2, 4 K tiles (%d with "
                  "block scales); %d batched cases\n",
                  dtype, by_promote[0], by_promote[1], by_promote[2], by_promote[4], block,
                  batched);
    assert_true(block > 0 && block256 > 0);
    assert_true(by_promote[0] > 0 && by_promote[1] + by_promote[2] + by_promote[4] > 0);
    assert_true(batched > 0);
  }
}

/* FP8 twins of a 192-wide tile: half of it (96) is no tile side of wgmma's, so the twins take
 * the allowed side below (64 for the partial sums by halves' sake, 128 for block scales).  With
 * 6 random configs and 3 problems, seed 1, the plan draws a 192-wide bf16 nt config; it failed
 * to plan whole ("bn=96 is not one of its values") before. */
static void test_fp8_192(void **state) {
  fixture *f = *state;
  const int wgmma = 4;
  sw_opts o = {.configs = 6, .problems = 3, .seed = 1};
  sw_plan plan;
  ut_err err;
  if (sw_plan_build(&f->t[wgmma], 1, &o, &plan, &err)) fail_msg("sw_plan_build: %s", err.msg);
  const gen_template *t = f->t[wgmma];
  const int bn = gen_param_index(t, "bn");
  int wide = 0;
  for (int k = 0; k < plan.nkernels; k++) {
    const sw_kernel *sk = &plan.kernels[k];
    bool allowed = false;
    for (int j = 0; j < gen_param_value_count(t, bn); j++)
      allowed = allowed || gen_param_value(t, bn, j) == sk->cfg.v[bn];
    assert_true(allowed);
    wide += !sk->has_op && !strcmp(sk->dtype, "bf16") && !strcmp(sk->layout, "nt") &&
            sk->cfg.v[bn] == 192;
  }
  assert_true(wide > 0); /* the case this test is for was planned */
  sw_plan_free(&plan);
}

/* FP8 on a template without a promotion parameter (skinny_mma promotes at every MMA): its bf16
 * nt configs are planned for FP8 ops as they are, both FP8 types, FP8 D among them. */
static void test_fp8_skinny_mma(void **state) {
  (void)state;
  gen_template *t = NULL;
  ut_err err;
  assert_int_equal(gen_load(TEMPLATES "/skinny_mma.lua", &t, &err), MMT_OK);
  sw_opts o = {.configs = 3, .problems = 2, .seed = 1};
  sw_plan plan;
  if (sw_plan_build(&t, 1, &o, &plan, &err)) fail_msg("sw_plan_build: %s", err.msg);
  for (int s = 0; s < plan.nskips; s++)
    if (gen_dtype_fp8(plan.skips[s].dtype))
      fail_msg("%s skipped: %s", plan.skips[s].dtype, plan.skips[s].why);
  int fp8[2] = {0}, out8 = 0;
  for (int k = 0; k < plan.nkernels; k++) {
    const sw_kernel *sk = &plan.kernels[k];
    if (!gen_dtype_fp8(sk->dtype)) continue;
    assert_true(sk->has_op && gen_op_valid(&sk->op, sk->dtype));
    assert_false(sk->op.scale_block);
    fp8[!strcmp(sk->dtype, "e5m2")]++;
    out8 += gen_dtype_fp8(sk->op.out);
  }
  print_message("skinny_mma: %d e4m3 and %d e5m2 kernels, %d with an FP8 D\n", fp8[0], fp8[1],
                out8);
  assert_true(fp8[0] > 0 && fp8[1] > 0);
  sw_plan_free(&plan);
  gen_free(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_pair),     cmocka_unit_test(test_refused_config),
      cmocka_unit_test(test_op_twins),       cmocka_unit_test(test_default_and_random),
      cmocka_unit_test(test_swept_values),   cmocka_unit_test(test_problems_valid),
      cmocka_unit_test(test_grouping),       cmocka_unit_test(test_mma_offsets),
      cmocka_unit_test(test_extent),         cmocka_unit_test(test_deterministic),
      cmocka_unit_test(test_size),           cmocka_unit_test(test_fp8),
      cmocka_unit_test(test_fp8_skinny_mma), cmocka_unit_test(test_fp8_192),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
