/* test_mma_sync.c -- templates/mma_sync.lua, the tensor-core (mma.sync) f16/bf16 family: its
 * space (counted again here from the rules), default, constraints and their reasons,
 * `requires` per layout and access width, the launch description and instructions of every
 * config, NVRTC compiles of the default in every layout and dtype (sm_80, sm_90) and of a
 * seeded sample (CPU), and results on ragged shapes against a CPU reference (GPU; skipped
 * without). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dep_chain.h"
#include "gemm_check.h"
#include "gen.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "rt_driver.h"
#include "tmpl_check.h"

#define TEMPLATES MMT_SOURCE_TEMPLATE_DIR
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- the space, written out again ---------------------------------------------------------- */

enum { P_BM, P_BN, P_BK, P_WM, P_WN, P_STAGES, P_VEC, P_SWZ, P_GROUP, P_SPLIT, P_COUNT };
static const char *const k_names[P_COUNT] = {"bm",     "bn",  "bk",  "wm",    "wn",
                                             "stages", "vec", "swz", "group", "split"};
static const char *const k_macros[P_COUNT] = {"BM",     "BN",  "BK",  "WM",    "WN",
                                              "STAGES", "VEC", "SWZ", "GROUP", "SPLIT"};
static const int64_t v_bm[] = {16, 32, 64, 128, 256};
static const int64_t v_bn[] = {64, 128, 256};
static const int64_t v_bk[] = {32, 64};
static const int64_t v_wm[] = {16, 32, 64};
static const int64_t v_wn[] = {32, 64};
static const int64_t v_stages[] = {2, 3, 4, 5};
static const int64_t v_vec[] = {0, 1, 2, 8};
static const int64_t v_swz[] = {0, 1};
static const int64_t v_group[] = {1, 8};
static const int64_t v_split[] = {1, 4, 16};
static const int64_t *const k_lists[P_COUNT] = {v_bm,     v_bn,  v_bk,  v_wm,    v_wn,
                                                v_stages, v_vec, v_swz, v_group, v_split};
static const int k_counts[P_COUNT] = {COUNT(v_bm),    COUNT(v_bn),     COUNT(v_bk),  COUNT(v_wm),
                                      COUNT(v_wn),    COUNT(v_stages), COUNT(v_vec), COUNT(v_swz),
                                      COUNT(v_group), COUNT(v_split)};
static const char *const k_layouts[] = {"nn", "nt", "tn", "tt"};
static const char *const k_dtypes[] = {"f16", "bf16"};
/* Valid configs; pinned so that a change of the rules is a visible change of this number. */
#define VALID_COUNT 3568
#define VALID_SPLIT1 2780

typedef struct {
  int64_t bm, bn, bk, wm, wn, stages, vec, swz, group, split;
} cfg;

static cfg cfg_of(const gen_config *c) {
  return (cfg){c->v[P_BM],     c->v[P_BN],  c->v[P_BK],  c->v[P_WM],    c->v[P_WN],
               c->v[P_STAGES], c->v[P_VEC], c->v[P_SWZ], c->v[P_GROUP], c->v[P_SPLIT]};
}

static int64_t threads_of(const cfg *p) { return (p->bm / p->wm) * (p->bn / p->wn) * 32; }

/* Elements of a shared tile of rows x cols: dense when swizzled, rows padded by 8 otherwise. */
static int64_t tile_elems(const cfg *p, int64_t rows, int64_t cols) {
  return rows * (p->swz ? cols : cols + 8);
}

/* Dynamic shared memory of the kernel for layout (A's letter first; 't': stored transposed).
 * VEC = 0: two swizzled stages, and STAGES raw ones whose rows have one 16-byte chunk more. */
static int64_t shared_bytes_of(const cfg *p, const char *layout) {
  const int64_t a = layout[0] == 't' ? tile_elems(p, p->bk, p->bm) : tile_elems(p, p->bm, p->bk);
  const int64_t b = layout[1] == 't' ? tile_elems(p, p->bn, p->bk) : tile_elems(p, p->bk, p->bn);
  if (p->vec != 0) return p->stages * (a + b) * 2;
  const int64_t ra = layout[0] == 't' ? p->bk * (p->bm + 8) : p->bm * (p->bk + 8);
  const int64_t rb = layout[1] == 't' ? p->bn * (p->bk + 8) : p->bk * (p->bn + 8);
  return (2 * (a + b) + p->stages * (ra + rb)) * 2;
}

/* The template's constraints (problem-free part), restated. */
static bool rules_valid(const cfg *p) {
  if (p->wm > p->bm || (p->wm == 16 && p->bm > 32)) return false; /* 16-row warps: decode */
  const int64_t t = threads_of(p);
  if (t < 64 || t > 512) return false;
  if (p->vec == 1 && p->stages != 2) return false; /* registers: double buffer only */
  if (p->vec == 0 && (p->stages < 3 || p->swz != 1)) return false; /* raw ring, swizzled */
  const int64_t unit = p->vec == 8 || p->vec == 0 ? 8 : 2; /* elements per copy */
  const int64_t a = p->bm * p->bk / unit, b = p->bn * p->bk / unit;
  if (a % t || a < t || b % t || b < t) return false; /* whole copies per thread */
  int64_t worst = 0; /* shared memory, in the layout that needs most (padding) */
  for (int l = 0; l < COUNT(k_layouts); l++) {
    const int64_t s = shared_bytes_of(p, k_layouts[l]);
    worst = s > worst ? s : worst;
  }
  if (worst > 227 * 1024) return false;
  /* registers: accumulators, two k-steps of fragments, addresses, and the tile in flight
   * (5/4 register per element for VEC = 1, about one per two copies for cp.async, 12 more
   * for VEC = 0's realign) */
  const int64_t in_flight = p->vec == 1   ? (5 * (p->bm + p->bn) * p->bk / t + 3) / 4
                            : p->vec == 0 ? (a / t + b / t) / 2 + 12
                                          : (a / t + b / t) / 2;
  const int64_t regs = p->wm * p->wn / 32 + 2 * (p->wm / 4 + p->wn / 4) + 32 + in_flight;
  const int64_t limit = 65536 / t < 240 ? 65536 / t : 240;
  if (regs > limit) return false;
  /* split-K: one pipeline per block shape and width */
  return p->split == 1 || (p->stages <= 3 && p->swz == 1 && p->group == 1);
}

static gen_template *load_mma(void) { return tc_load(TEMPLATES "/mma_sync.lua"); }

/* ---- declaration, space, default ----------------------------------------------------------- */

static void test_declaration(void **state) {
  (void)state;
  gen_template *t = load_mma();
  assert_string_equal(gen_name(t), "mma_sync");
  assert_true(strlen(gen_description(t)) > 0);
  assert_int_equal(gen_dtype_count(t), 2);
  assert_string_equal(gen_dtype(t, 0), "f16");
  assert_string_equal(gen_dtype(t, 1), "bf16");
  assert_false(gen_supports_dtype(t, "f32"));
  for (int l = 0; l < COUNT(k_layouts); l++) assert_true(gen_supports_layout(t, k_layouts[l]));
  const uint64_t size = tc_params_are(t, k_names, k_lists, k_counts, P_COUNT);
  assert_int_equal(size, 34560);
  gen_free(t);
}

static void test_space_count(void **state) {
  (void)state;
  gen_template *t = load_mma();
  int valid_count = 0, split1 = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    char why[200];
    gen_config_at(t, idx, &c);
    const cfg p = cfg_of(&c);
    const bool valid = tc_check(t, &c, NULL, why, sizeof why), want = rules_valid(&p);
    if (valid != want) {
      char text[256];
      gen_config_format(t, &c, text, sizeof text, NULL);
      fprintf(stderr, "%s: template says %d (%s), rules say %d\n", text, valid, why, want);
    }
    assert_int_equal(valid, want);
    if (!valid) assert_true(strlen(why) > 0); /* always says why */
    valid_count += valid;
    split1 += valid && p.split == 1;
  }
  print_message("mma_sync: %d valid configs of %llu (%d without split-K)\n", valid_count,
                (unsigned long long)gen_space_size(t), split1);
  assert_int_equal(valid_count, VALID_COUNT);
  assert_int_equal(split1, VALID_SPLIT1);
  gen_free(t);
}

static void test_default(void **state) {
  (void)state;
  gen_template *t = load_mma();
  gen_config c;
  char text[256];
  gen_config_default(t, &c);
  assert_int_equal(gen_config_format(t, &c, text, sizeof text, NULL), MMT_OK);
  assert_string_equal(text, "bm=128,bn=128,bk=32,wm=64,wn=64,stages=4,vec=8,swz=1,group=8,split=1");
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  const gen_problem big = {"f16", "nn", 8192, 8192, 8192, 8192, 8192, 8192, 16, NULL, 1};
  assert_true(tc_check(t, &c, &big, NULL, 0));
  gen_kernel k, k2;
  tc_emit_ok(t, &c, "f16", "nn", &k);
  assert_string_equal(k.kernel_name, "mmt_mma_sync_f16_nn_m128_n128_k32_wm64_wn64_s4_v8_z1_g8");
  assert_int_equal(k.block[0], 128); /* 4 warps of 64 x 64 */
  assert_int_equal(k.shared_bytes, 4 * (128 * 32 + 32 * 128) * 2);
  assert_int_equal(k.requires.n_multiple, 8);
  assert_int_equal(k.requires.k_multiple, 8);
  assert_int_equal(k.requires.m_multiple, 1);
  assert_int_equal(k.requires.align_bytes, 16);
  assert_false(k.exclusive);
  assert_true(gen_requires_met(&k.requires, &big));
  assert_non_null(strstr(k.source, "#define SPLIT 1\n")); /* no split-K */
  tc_emit_ok(t, &c, "f16", "nn", &k2);
  assert_string_equal(k.source, k2.source); /* deterministic: the cubin cache is keyed by it */
  gen_kernel_clear(&k2);
  tc_emit_ok(t, &c, "bf16", "nn", &k2); /* the dtype is in the name: one module may hold both */
  assert_string_equal(k2.kernel_name, "mmt_mma_sync_bf16_nn_m128_n128_k32_wm64_wn64_s4_v8_z1_g8");
  gen_kernel_clear(&k);
  gen_kernel_clear(&k2);
  gen_free(t);
}

/* ---- constraints and their reasons --------------------------------------------------------- */

static void test_constraints(void **state) {
  (void)state;
  gen_template *t = load_mma();
  /* config-level */
  tc_rejects(t, "bm=256,bn=256,wm=32,wn=32", NULL, "64 warps: 2048 threads, outside 64..512");
  tc_rejects(t, "bm=64,bn=64,wm=64,wn=64", NULL, "1 warps: 32 threads, outside 64..512");
  tc_rejects(t, "bm=16,wm=32", NULL, "wm=32 is more than bm=16");
  tc_rejects(t, "bm=64,wm=16", NULL, "wm=16 only with bm of 16 or 32");
  tc_rejects(t, "vec=1,stages=3", NULL, "vec=1 loads through registers: stages=2 only");
  tc_rejects(t, "vec=0,stages=2", NULL, "vec=0 copies STAGES - 1 raw tiles ahead of the realigned");
  tc_rejects(t, "vec=0,swz=0", NULL, "vec=0 realigns into swizzled tiles: swz=1");
  /* VEC = 0 with 64 x 64 warps: up to 8 units per thread (128 x 128 x 32, 128 x 256 x 32);
   * 10 (64 x 256 x 32, 4 warps) or 16 (128 x 128 x 64) would spill */
  tc_rejects(t, "vec=0,bm=64,bn=256", NULL, "registers per thread (limit 240): would spill");
  tc_rejects(t, "vec=0,bk=64,stages=3", NULL, "registers per thread (limit 240): would spill");
  /* 16 warps, 64 x 32 of A: 256 copies of 16 bytes for 512 threads */
  tc_rejects(t, "bm=64,bn=256,wm=32,wn=32", NULL, "the A tile does not split evenly");
  tc_rejects(t, "bm=256,bn=64,wm=32,wn=32", NULL, "the B tile does not split evenly");
  /* 4 stages of 256 x 64 and 64 x 256: 256 KiB */
  tc_rejects(t, "bm=256,bn=256,bk=64,stages=4", NULL,
          "262144 bytes of shared memory (more than 227 KiB)");
  /* 256 x 256 x 32, 16 warps of 64 x 64: 128 accumulators, but 128 registers a thread */
  tc_rejects(t, "bm=256,bn=256,stages=3", NULL, "registers per thread (limit 128): would spill");
  /* VEC = 1 holds the next tile in registers, one per element */
  tc_rejects(t, "vec=1,stages=2", NULL, "registers per thread");
  tc_rejects(t, "split=4", NULL, "split > 1 only with stages 2 or 3, swz=1, group=1");
  tc_rejects(t, "split=4,group=1", NULL, "split > 1 only");           /* stages 4 */
  tc_rejects(t, "split=4,group=1,stages=3,swz=0", NULL, "split > 1"); /* padded */
  gen_config c;
  tc_parse_ok(t, "split=4,group=1,stages=3", &c);
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  tc_parse_ok(t, "vec=1,stages=2,wn=32", &c); /* the unaligned path of the default's shape */
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  static const char *const realigned[] = {"vec=0", "vec=0,bm=128,bn=256,stages=3",
                                          "vec=0,bm=256,bn=128,stages=3", "vec=0,stages=5"};
  for (int i = 0; i < COUNT(realigned); i++) { /* the realigned path of the big shapes */
    tc_parse_ok(t, realigned[i], &c);
    assert_true(tc_check(t, &c, NULL, NULL, 0));
  }

  /* problem-level: grid.y, split-K depth and tile count */
  gen_problem p = {"f16", "nn", 65535LL * 128, 64, 64, 64, 64, 64, 16, NULL, 1};
  tc_parse_ok(t, "", &c);
  assert_true(tc_check(t, &c, &p, NULL, 0));
  p.m++;
  tc_rejects(t, "", &p, "M needs more than 65535 blocks along grid y");
  gen_problem sp = {"f16", "tn", 16, 4096, 4 * 2 * 32, 16, 4096, 4096, 16, NULL, 1};
  tc_parse_ok(t, "split=4,group=1,stages=3", &c);
  assert_true(tc_check(t, &c, &sp, NULL, 0)); /* K = 2 * split * bk */
  sp.k--;
  tc_rejects(t, "split=4,group=1,stages=3", &sp, "split-K slices of less than 2 steps");
  sp.k = 0;
  tc_rejects(t, "split=4,group=1,stages=3", &sp, "split-K slices of less than 2 steps");
  tc_parse_ok(t, "group=1,stages=3", &c); /* split = 1 takes any K */
  assert_true(tc_check(t, &c, &sp, NULL, 0));
  /* a workspace of at most 64 MiB: 256 tiles of 128 x 128 with split 4 */
  gen_problem big = {"bf16", "nn", 16 * 128, 16 * 128, 512, 512, 16 * 128, 16 * 128, 16, NULL, 1};
  tc_parse_ok(t, "split=4,group=1,stages=3", &c);
  assert_true(tc_check(t, &c, &big, NULL, 0)); /* exactly 64 MiB */
  big.n++;
  tc_rejects(t, "split=4,group=1,stages=3", &big, "workspace over 64 MiB");
  /* dtype and layout */
  gen_problem f32 = {"f32", "nn", 64, 64, 64, 64, 64, 64, 16, NULL, 1};
  tc_parse_ok(t, "", &c);
  assert_false(tc_check(t, &c, &f32, NULL, 0));
  gen_free(t);
}

/* ---- requires, per layout and access width ------------------------------------------------- */

static void test_requires(void **state) {
  (void)state;
  gen_template *t = load_mma();
  static const char *const texts[] = {"vec=8", "vec=2", "vec=1,stages=2,wn=32", "vec=0"};
  static const int64_t units[] = {8, 2, 1, 1}; /* what the width requires: 1 for none */
  for (int v = 0; v < COUNT(texts); v++)
    for (int l = 0; l < COUNT(k_layouts); l++)
      for (int d = 0; d < COUNT(k_dtypes); d++) {
        const char *layout = k_layouts[l];
        const bool ta = layout[0] == 't', tb = layout[1] == 't';
        const int64_t u = units[v];
        gen_config c;
        gen_kernel k;
        tc_parse_ok(t, texts[v], &c);
        tc_emit_ok(t, &c, k_dtypes[d], layout, &k);
        /* the contiguous dimension of A (K, or M when transposed) and of B (N, or K when
         * transposed) in whole copies; N even for the pair stores of C */
        const int64_t pair = u > 1 ? 2 : 1;
        assert_int_equal(k.requires.m_multiple, ta ? u : 1);
        assert_int_equal(k.requires.k_multiple, !ta || tb ? u : 1);
        assert_int_equal(k.requires.n_multiple, tb ? pair : u);
        assert_int_equal(k.requires.align_bytes, u == 1 ? 2 : 2 * u);
        /* the 4097 target: all odd, 2-byte aligned, only VEC = 1 and 0 take it */
        int64_t ld[3];
        gen_min_ld(layout, 4097, 4097, 4097, ld);
        const gen_problem odd = {k_dtypes[d], layout, 4097, 4097, 4097, ld[0],
                                 ld[1],       ld[2],  2,    NULL, 1};
        assert_int_equal(gen_requires_met(&k.requires, &odd), u == 1);
        /* 1000 x 1000 x 1000: 16-byte rows, every width takes it */
        gen_min_ld(layout, 1000, 1000, 1000, ld);
        const gen_problem even = {k_dtypes[d], layout, 1000, 1000, 1000, ld[0],
                                  ld[1],       ld[2],  16,   NULL, 1};
        assert_true(gen_requires_met(&k.requires, &even));
        /* 1002: 4-byte rows */
        gen_min_ld(layout, 1002, 1002, 1002, ld);
        const gen_problem four = {k_dtypes[d], layout, 1002, 1002, 1002, ld[0],
                                  ld[1],       ld[2],  4,    NULL, 1};
        assert_int_equal(gen_requires_met(&k.requires, &four), u <= 2);
        gen_kernel_clear(&k);
      }
  /* Only the contiguous dimensions count: vec=8 in nt takes M odd (A's rows, B's rows) */
  gen_config c;
  gen_kernel k;
  tc_parse_ok(t, "vec=8", &c);
  tc_emit_ok(t, &c, "f16", "nt", &k);
  const gen_problem nt = {"f16", "nt", 1001, 998, 1024, 1024, 1024, 1000, 16, NULL, 1};
  assert_true(gen_requires_met(&k.requires, &nt));
  gen_kernel_clear(&k);
  tc_emit_ok(t, &c, "f16", "tn", &k); /* tn: A's rows are M wide, B's N wide; K is free */
  const gen_problem tn = {"f16", "tn", 1000, 1000, 1001, 1000, 1000, 1000, 16, NULL, 1};
  assert_true(gen_requires_met(&k.requires, &tn));
  gen_kernel_clear(&k);
  gen_free(t);
}

/* ---- every config: name, launch description, instructions ---------------------------------- */

static void test_emit_all(void **state) {
  (void)state;
  gen_template *t = load_mma();
  int emitted = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    gen_config_at(t, idx, &c);
    if (!tc_check(t, &c, NULL, NULL, 0)) continue;
    const cfg p = cfg_of(&c);
    /* each config in one layout and dtype, rotating, so every pair is covered many times */
    const char *layout = k_layouts[idx % 4], *dtype = k_dtypes[idx / 4 % 2];
    gen_kernel k;
    tc_emit_ok(t, &c, dtype, layout, &k);
    char name[160], line[192];
    int len = snprintf(name, sizeof name,
                       "mmt_mma_sync_%s_%s_m%lld_n%lld_k%lld_wm%lld_wn%lld_s%lld_v%lld_z%lld_g%lld",
                       dtype, layout, (long long)p.bm, (long long)p.bn, (long long)p.bk,
                       (long long)p.wm, (long long)p.wn, (long long)p.stages, (long long)p.vec,
                       (long long)p.swz, (long long)p.group);
    if (p.split > 1)
      snprintf(name + len, sizeof name - (size_t)len, "_split%lld", (long long)p.split);
    assert_string_equal(k.kernel_name, name);
    assert_non_null(strstr(k.source, name));
    assert_non_null(strstr(k.source, "extern \"C\" __global__"));
    assert_non_null(strstr(k.source, "Parameters:"));
    assert_null(strstr(k.source, "#include"));
    assert_null(strstr(k.source, "${"));
    for (int i = 0; i < P_COUNT; i++) { /* each parameter is defined and documented */
      snprintf(line, sizeof line, "#define %s %lld\n", k_macros[i], (long long)c.v[i]);
      assert_non_null(strstr(k.source, line));
      snprintf(line, sizeof line, " *   %-6s = %lld", k_macros[i], (long long)c.v[i]);
      assert_non_null(strstr(k.source, line));
    }
    snprintf(line, sizeof line, "#define A_T %d ", layout[0] == 't');
    assert_non_null(strstr(k.source, line));
    snprintf(line, sizeof line, "#define B_T %d ", layout[1] == 't');
    assert_non_null(strstr(k.source, line));
    /* the ABI types, declared by the kernel (no headers under NVRTC) */
    const bool f16 = strcmp(dtype, "f16") == 0;
    assert_non_null(strstr(k.source, f16 ? "const __half* __restrict__ A, int lda"
                                         : "const __nv_bfloat16* __restrict__ A, int lda"));
    assert_non_null(
        strstr(k.source, f16 ? "struct __align__(2) __half { unsigned short x; };"
                             : "struct __align__(2) __nv_bfloat16 { unsigned short x; };"));
    /* the tensor-core core: mma.sync of the dtype fed by ldmatrix (both forms: the operand
     * stored with K strided is read with .trans) */
    snprintf(line, sizeof line, "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32 ", dtype, dtype);
    assert_non_null(strstr(k.source, line));
    assert_non_null(strstr(k.source, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
    assert_non_null(strstr(k.source, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
    assert_non_null(strstr(k.source, "ldsm_x4<A_T>("));
    assert_non_null(strstr(k.source, "ldsm_x4<!B_T>("));
    /* global -> shared, chosen by #if VEC: cp.async (16 or 4 bytes) unless VEC = 1
     * (registers); VEC = 0 copies raw 16-byte chunks (partial ones zero-filled) and realigns
     * them into the tiles, reading the chunks that straddle an operand's ends element by
     * element; stores of C in pairs unless VEC <= 1 (unaligned C) */
    static const char *const variants[] = {
        "#if VEC != 1\n/* cp.async (sm_80+)",
        "cp.async.cg.shared.global [%0], [%1], 16, %2;",
        "#if VEC == 0\n/* VEC = 0: a raw stage",
        "#if VEC == 0\n\n  /* VEC = 0 (copy_raw_tile, realign).",
        "if (n) copy_chunk(dst, chunk_of(p), n, lo, hi);",
        "realign_part(raw_next, (kt + 1) & 1, kk);",
        "#if VEC == 1\n\n  /* The next tile in flight, in registers",
        "#elif VEC == 1\n  /* Two stages: tile kt + 1 is loaded into registers",
        "cp_async<2 * UNIT>(",
        "#if VEC <= 1\n        elem_t* const p = c_row + c;",
        "pack2(v0, v1)",
    };
    tc_source_has(&k, variants, COUNT(variants));
    /* launch */
    assert_int_equal(k.block[0], threads_of(&p));
    assert_int_equal(k.block[1], 1);
    assert_int_equal(k.block[2], 1);
    tc_grid_is(&k, 'N', p.bn, 'M', p.bm, 0, p.split);
    assert_int_equal(k.exclusive, p.split > 1);
    assert_int_equal(k.dependent_launch, p.split == 1); /* the others may start early */
    static const char *const pdl[] = {
        "  asm volatile(\"griddepcontrol.wait;\\n\" ::: \"memory\");\n",
        "  pdl_wait(tid == 0);\n"};
    tc_source_has(&k, pdl, 2); /* the wait that dependent_launch promises (sm_90 on), called */
    assert_int_equal(k.shared_bytes, shared_bytes_of(&p, layout));
    /* split-K: the split_k snippet's counters (#if SPLIT > 1), a block tile of fp32
     * workspace per block */
    const bool split = p.split > 1;
    assert_non_null(strstr(k.source, "\n#if SPLIT > 1\n/* snippet split_k"));
    assert_int_equal(k.workspace_per_block, split ? (unsigned)(p.bm * p.bn * 4) : 0u);
    gen_kernel_clear(&k);
    emitted++;
  }
  assert_int_equal(emitted, VALID_COUNT);
  gen_free(t);
}

/* The block-order swizzle (the tile_order snippet) and split-K slicing are reg_tiled's
 * (test_templates.c checks their arithmetic); here, that the same lines are in the source. */
static void test_shared_lines(void **state) {
  (void)state;
  static const char *const lines[] = {
      "static __device__ __forceinline__ void mmt_tile_of(long long pid, long long grid_m,",
      "const long long pid = (long long)blockIdx.y * grid_n + blockIdx.x;",
      "mmt_tile_of(pid, grid_m, grid_n, GROUP, &tile_row, &tile_col);",
      "const long long row0 = tile_row * BM, col0 = tile_col * BN;",
      "const long long k0 = splitk_slice<SPLIT, BK>(K);",
      "Ag += A_T ? k0 * lda : k0;",
      "Bg += B_T ? k0 : k0 * ldb;",
      "if (!splitk_reduce<sizeof acc / sizeof(float), THREADS>((float*)acc, WS, pid, tid)) return;",
  };
  gen_template *t = load_mma();
  gen_config c;
  gen_kernel k;
  tc_parse_ok(t, "split=16,group=1,stages=3", &c);
  tc_emit_ok(t, &c, "bf16", "tt", &k);
  tc_source_has(&k, lines, COUNT(lines));
  gen_kernel_clear(&k);
  gen_free(t);
}

/* ---- NVRTC (no GPU needed) ----------------------------------------------------------------- */

/* The default, and the unaligned (both paths) and split-K variants of its shape, in every
 * layout and dtype, for sm_80 (the oldest architecture with cp.async, ldmatrix and bf16 mma)
 * and sm_90. */
static void test_nvrtc_default(void **state) {
  (void)state;
  static const char *const texts[] = {"", "vec=1,stages=2,wn=32", "vec=2,stages=3,group=1,split=4",
                                      "vec=0", "vec=0,bm=128,bn=256,stages=3,group=1,split=4"};
  static const char *const archs[] = {"sm_80", "sm_90"};
  enum { MAX = COUNT(texts) * COUNT(k_layouts) * COUNT(k_dtypes) * COUNT(archs) };
  gen_template *t = load_mma();
  gen_kernel kernels[MAX];
  const char *kernel_archs[MAX];
  int n = 0;
  for (int i = 0; i < COUNT(texts); i++)
    for (int l = 0; l < COUNT(k_layouts); l++)
      for (int d = 0; d < COUNT(k_dtypes); d++)
        for (int a = 0; a < COUNT(archs); a++) {
          /* the variants once per layout (dtype and arch rotating), the default in all */
          if (i > 0 && (d + a) % 2 != l % 2) continue;
          gen_config c;
          tc_parse_ok(t, texts[i], &c);
          assert_true(tc_check(t, &c, NULL, NULL, 0));
          tc_emit_ok(t, &c, k_dtypes[d], k_layouts[l], &kernels[n]);
          kernel_archs[n++] = archs[a];
        }
  tc_compile_all(kernels, kernel_archs, n, NULL);
  for (int i = 0; i < n; i++) gen_kernel_clear(&kernels[i]);
  gen_free(t);
}

/* A deterministic spread of 32 valid configs: per access width, 6 without split-K and 2 with,
 * picked by a fixed LCG; layout and dtype rotate.  All compile for sm_90. */
static void test_nvrtc_sample(void **state) {
  (void)state;
  gen_template *t = load_mma();
  gen_config *group = malloc(sizeof *group * gen_space_size(t));
  assert_non_null(group);
  uint64_t seed = 20250101u;
  int compiled = 0;
  gen_kernel kernels[32];
  for (int v = 0; v < COUNT(v_vec); v++)
    for (int sk = 0; sk < 2; sk++) {
      int count = 0;
      for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
        gen_config c;
        gen_config_at(t, idx, &c);
        if (c.v[P_VEC] == v_vec[v] && (c.v[P_SPLIT] > 1) == sk && tc_check(t, &c, NULL, NULL, 0))
          group[count++] = c;
      }
      /* MMTUNE_LONG_TESTS=1: 6 and 2 configs a group, else 3 and 1 */
      const int per = (sk ? 1 : 3) * (tc_long_tests() ? 2 : 1);
      assert_true(count >= per);
      for (int i = 0; i < per; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        const gen_config *c = &group[(seed >> 33) % (uint64_t)count];
        tc_emit_ok(t, c, k_dtypes[compiled % 2], k_layouts[compiled / 2 % 4], &kernels[compiled]);
        compiled++;
      }
    }
  assert_int_equal(compiled, tc_long_tests() ? 32 : 16);
  tc_compile_all(kernels, NULL, compiled, NULL);
  for (int i = 0; i < compiled; i++) gen_kernel_clear(&kernels[i]);
  free(group);
  gen_free(t);
}

/* ---- GPU: results on ragged shapes (skipped without a driver and device) ------------------- */

typedef struct {
  int64_t m, n, k, lda, ldb, ldc; /* lda, ldb: as for nn; in_layout adapts them */
  float alpha, beta;
} gemm_shape;

/* Ragged shapes with odd pitches (VEC <= 1 only; lda = K + 1 and the like), then ones whose
 * pitches and contiguous dimensions are even (VEC = 2), then multiples of 8 (all), then deep
 * ones of each kind for split-K.  Each config runs those its requirements and constraints
 * allow (at least 3). */
static const gemm_shape k_shapes[] = {
    {1, 1, 1, 1, 1, 1, 1.0f, 0.0f},
    {17, 33, 65, 66, 34, 35, 1.5f, 0.5f},
    {127, 257, 1023, 1024, 257, 259, 0.75f, 0.0f},
    {300, 301, 517, 518, 302, 301, -0.5f, 2.0f},
    {37, 53, 29, 31, 54, 59, 1.5f, 0.5f},
    {130, 67, 257, 261, 67, 71, 1.0f, 0.0f},
    {300, 261, 41, 41, 263, 261, -0.5f, 2.0f},
    {5, 3, 0, 1, 3, 3, 1.0f, 0.5f},
    {129, 1, 9, 9, 1, 1, 2.0f, 0.0f},
    {38, 54, 30, 32, 54, 56, 1.5f, 0.5f},
    {130, 66, 258, 262, 66, 70, 1.0f, 0.0f},
    {2, 2, 2, 2, 2, 2, 1.0f, 0.0f},
    {300, 264, 48, 56, 272, 264, -0.5f, 2.0f},
    {40, 56, 24, 32, 56, 64, 1.5f, 0.5f},
    {136, 64, 264, 264, 72, 64, 1.0f, 0.0f},
    {8, 8, 0, 8, 8, 8, 1.0f, 0.5f},
    {257, 200, 1032, 1040, 200, 208, 0.75f, 0.0f},
    /* deep K for split-K (K >= 2 * split * bk): odd, even, multiples of 8 */
    {33, 45, 1100, 1101, 47, 45, 1.0f, 0.5f},
    {34, 46, 1102, 1104, 46, 48, -1.5f, 0.0f},
    {64, 72, 2048, 2048, 72, 72, 1.0f, 0.0f},
    {16, 304, 1040, 1048, 304, 312, -1.5f, 0.5f},
    {120, 24, 1536, 1544, 24, 32, 0.5f, 0.0f},
};

/* Shape s (given for nn) in layout: a transposed operand keeps its padding past the row. */
static gemm_shape in_layout(const gemm_shape *s, const char *layout) {
  gemm_shape t = *s;
  if (layout[0] == 't') t.lda = s->m + (s->lda - s->k);
  if (layout[1] == 't') t.ldb = s->k + (s->ldb - s->n);
  return t;
}

/* Configs covering each access width and pipeline depth, both shared layouts and block
 * orders, 64 to 512 threads, both warp tiles and K steps, and split-K with each width. */
static const char *const k_gpu_configs[] = {
    "",
    "vec=1,stages=2,wn=32",
    "vec=2,stages=3",
    "bm=128,bn=128,wm=32,wn=32,stages=2,swz=0,group=1",
    "stages=5,bk=64,bm=64,bn=128,wm=64,wn=64",
    "bm=256,bn=128,wm=64,wn=64,stages=3",
    "bm=64,bn=64,wm=32,wn=32,vec=1,stages=2,swz=0",
    "bm=128,bn=256,bk=32,wm=64,wn=64,vec=2,stages=3,swz=0",
    "bm=256,bn=64,wm=64,wn=32,stages=2,vec=1,group=1",
    "bm=64,bn=256,wm=32,wn=64,stages=4,vec=8,group=1",
    "stages=3,group=1,split=4",
    "vec=1,stages=2,wn=32,group=1,split=16",
    "vec=2,stages=2,bm=64,bn=64,wm=32,wn=32,group=1,split=4",
    /* the realigned unaligned path: the shapes expected to win on 4097^3, 512 threads (rows of
     * last chunks fewer than threads), bk=64, 64 x 64 blocks, split-K */
    "vec=0",
    "vec=0,bm=128,bn=256,stages=3",
    "vec=0,bm=256,bn=128,stages=4,group=1",
    "vec=0,bm=128,bn=128,wm=32,wn=32,stages=3",
    "vec=0,bk=64,bm=64,bn=128,wm=32,wn=64,stages=3",
    "vec=0,bm=64,bn=64,wm=32,wn=32,stages=5,group=1",
    "vec=0,stages=3,group=1,split=4",
    "vec=0,bm=64,bn=64,wm=32,wn=32,stages=3,group=1,split=16",
    /* decode-size blocks: 16 and 32 rows, 16-row warps, each width, split-K */
    "bm=16,bn=128,bk=64,wm=16,wn=32,stages=4",
    "bm=32,bn=128,bk=64,wm=32,wn=32,stages=3,group=1,split=4",
    "vec=0,bm=16,bn=64,bk=64,wm=16,wn=32,stages=3,group=1,split=4",
    "vec=1,stages=2,bm=16,bn=64,bk=32,wm=16,wn=32",
    "vec=2,bm=32,bn=64,bk=32,wm=16,wn=32,stages=3",
};

/* Whether config c (emitted as spec) runs shape j of k_shapes in layout: its requirements and
 * constraints allow it.  *s, *p, *offset receive the shape in layout, the problem and the
 * base offset in elements (VEC <= 1: 1 to 7 by shape, 2-byte-aligned bases). */
static bool shape_runs(gen_template *t, const gen_config *c, const gen_kernel *spec,
                       const char *dtype, const char *layout, int j, gemm_shape *s, gen_problem *p,
                       int *offset) {
  *s = in_layout(&k_shapes[j], layout);
  const bool p2 = s->lda % 2 == 0 && s->ldb % 2 == 0 && s->ldc % 2 == 0;
  const bool p8 = s->lda % 8 == 0 && s->ldb % 8 == 0 && s->ldc % 8 == 0;
  *offset = c->v[P_VEC] <= 1 ? 1 + j % 7 : 0;
  *p = (gen_problem){
      dtype, layout, s->m, s->n, s->k, s->lda, s->ldb, s->ldc, *offset ? 2 : p8 ? 16 : p2 ? 4 : 2,
      NULL,  1};
  return gen_requires_met(&spec->requires, p) && tc_check(t, c, p, NULL, 0);
}

/* The GPU test's configs are valid and each runs at least 3 shapes in every layout: checked
 * here without a GPU. */
static void test_gpu_configs(void **state) {
  (void)state;
  gen_template *t = load_mma();
  for (int i = 0; i < COUNT(k_gpu_configs); i++)
    for (int l = 0; l < COUNT(k_layouts); l++) {
      gen_config c;
      gen_kernel spec;
      tc_parse_ok(t, k_gpu_configs[i], &c);
      assert_true(tc_check(t, &c, NULL, NULL, 0));
      tc_emit_ok(t, &c, "f16", k_layouts[l], &spec);
      int runs = 0;
      for (int j = 0; j < COUNT(k_shapes); j++) {
        gemm_shape s;
        gen_problem p;
        int offset;
        runs += shape_runs(t, &c, &spec, "f16", k_layouts[l], j, &s, &p, &offset);
      }
      if (runs < 3) fprintf(stderr, "%s in %s: %d shapes\n", k_gpu_configs[i], k_layouts[l], runs);
      assert_true(runs >= 3);
      gen_kernel_clear(&spec);
    }
  gen_free(t);
}

/* One GPU test run: a config in a dtype and layout, emitted and compiled ahead. */
typedef struct {
  const char *text, *dtype, *layout;
  gen_config c;
} gpu_run;

static void run_config(const rt_device *d, const rt_cu *cu, gen_template *t, const gpu_run *r,
                       gen_kernel *spec, rt_cubin *cubin) {
  rt_kernel k;
  ut_err e;
  mmt_status rc = rt_kernel_load(d, cubin, spec, &k, &e);
  if (rc) fprintf(stderr, "%s: %s\n", spec->kernel_name, e.msg);
  assert_int_equal(rc, MMT_OK);
  print_message("%s: %d registers, %d bytes local\n", spec->kernel_name, k.regs, k.local_bytes);
  assert_int_equal(k.local_bytes, 0); /* no spills */
  /* A split-K kernel runs each shape twice from the same C: the second run finds the
   * arrival counters as the first left them, and must give the same bits (the slices are
   * added in slice order).  Element bound, the same whatever the split (the slices meet in
   * fp32, C is rounded once): tol * (1 + |want|) plus the output type's unit roundoff times
   * the sum of |alpha * a * b| over K, the classic bound on what rounding a partial sum can
   * lose. */
  const int64_t split = r->c.v[P_SPLIT];
  const double tol = strcmp(r->dtype, "f16") == 0 ? 1e-3 : 8e-3;
  for (int j = 0; j < COUNT(k_shapes); j++) {
    gemm_shape s;
    gen_problem p;
    int offset;
    if (!shape_runs(t, &r->c, spec, r->dtype, r->layout, j, &s, &p, &offset)) continue;
    const gc_case gc = {.label = spec->kernel_name,
                        .dtype = r->dtype,
                        .layout = r->layout,
                        .m = s.m,
                        .n = s.n,
                        .k = s.k,
                        .lda = s.lda,
                        .ldb = s.ldb,
                        .ldc = s.ldc,
                        .alpha = s.alpha,
                        .beta = s.beta,
                        .offset = {offset, offset, offset},
                        .runs = split > 1 ? 2 : 1,
                        .rtol = tol,
                        .atol = tol,
                        .unit = gc_roundoff(r->dtype)};
    gc_run(cu, &k, &gc);
  }
  rt_kernel_unload(&k);
}

/* Opens device 0 and returns the driver, or skips the test without a GPU or before sm_80. */
static const rt_cu *open_sm80_or_skip(rt_device *d) {
  const rt_cu *cu = tc_open_gpu_or_skip(d);
  if (d->info.cc_major < 8) {
    print_message("mma_sync needs sm_80 or newer; device is %s\n", d->arch);
    rt_device_close(d);
    skip();
  }
  return cu;
}

static void test_gpu_results(void **state) {
  (void)state;
  rt_device d;
  const rt_cu *cu = open_sm80_or_skip(&d);
  gen_template *t = load_mma();
  /* every config in every layout with MMTUNE_LONG_TESTS=1; else each config in one layout,
   * in turn (every layout and dtype still run) */
  enum { MAX = COUNT(k_gpu_configs) * COUNT(k_layouts) };
  gpu_run runs[MAX];
  gen_kernel specs[MAX];
  rt_cubin cubins[MAX];
  const char *archs[MAX];
  int n = 0;
  for (int i = 0; i < COUNT(k_gpu_configs); i++)
    for (int l = 0; l < COUNT(k_layouts); l++)
      if (tc_long_tests() || l == i % COUNT(k_layouts)) {
        gpu_run *r = &runs[n];
        *r = (gpu_run){k_gpu_configs[i], k_dtypes[(i + l) % 2], k_layouts[l], {0}};
        tc_parse_ok(t, r->text, &r->c);
        assert_true(tc_check(t, &r->c, NULL, NULL, 0));
        tc_emit_ok(t, &r->c, r->dtype, r->layout, &specs[n]);
        archs[n++] = d.arch;
      }
  tc_compile_all(specs, archs, n, cubins);
  for (int i = 0; i < n; i++) {
    run_config(&d, cu, t, &runs[i], &specs[i], &cubins[i]);
    rt_cubin_free(&cubins[i]);
    gen_kernel_clear(&specs[i]);
  }
  gen_free(t);
  rt_device_close(&d);
}

/* Back-to-back launches that may start early (dependent_launch, sm_90 on) on a chain of
 * dependent products (tests/dep_chain.h). */
static void test_gpu_dependent_chain(void **state) {
  (void)state;
  rt_device d;
  const rt_cu *cu = open_sm80_or_skip(&d);
  gen_template *t = load_mma();
  gen_config c;
  gen_kernel spec;
  rt_cubin cubin;
  rt_kernel k;
  ut_err e;
  tc_parse_ok(t, "bm=64,bn=128,bk=64,wm=64,wn=32,stages=5,vec=8", &c);
  assert_int_equal(gen_emit(t, &c, "f16", "nn", &spec, &e), MMT_OK);
  assert_int_equal(rt_compile(spec.source, spec.kernel_name, d.arch, &cubin, NULL, &e), MMT_OK);
  assert_int_equal(rt_kernel_load(&d, &cubin, &spec, &k, &e), MMT_OK);
  assert_int_equal(k.dependent_launch, d.info.cc_major >= 9);
  dc_dependent_chain(cu, &k);
  rt_kernel_unload(&k);
  rt_cubin_free(&cubin);
  gen_kernel_clear(&spec);
  gen_free(t);
  rt_device_close(&d);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_declaration),  cmocka_unit_test(test_space_count),
      cmocka_unit_test(test_default),      cmocka_unit_test(test_constraints),
      cmocka_unit_test(test_requires),     cmocka_unit_test(test_emit_all),
      cmocka_unit_test(test_shared_lines), cmocka_unit_test(test_nvrtc_default),
      cmocka_unit_test(test_nvrtc_sample), cmocka_unit_test(test_gpu_configs),
      cmocka_unit_test(test_gpu_results),  cmocka_unit_test(test_gpu_dependent_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
