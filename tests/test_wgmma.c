/* test_wgmma.c -- templates/wgmma.lua, the Hopper (sm_90a) wgmma + TMA family for f16, bf16 and
 * tf32: its space (counted again here from the rules), default, constraints and their
 * reasons, the launch description, tensor maps and instructions of every config, tf32's
 * single layout, NVRTC compiles for sm_90a of the default (with and without split-K) in every
 * dtype and layout and of a seeded sample (CPU), and results on ragged shapes against a CPU
 * reference, split-K kernels twice in a row (GPU of compute capability 9.0; skipped
 * otherwise). */
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
#include "half16.h"
#include "rt_compile.h"
#include "rt_device.h"
#include "rt_driver.h"
#include "tmpl_check.h"

#define TEMPLATES MMT_SOURCE_TEMPLATE_DIR
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- the space, written out again ---------------------------------------------------------- */

enum {
  P_BM,
  P_BN,
  P_STAGES,
  P_CONSUMERS,
  P_BLOCKS,
  P_GROUP,
  P_REPACK,
  P_SPLIT,
  P_PERSIST,
  P_SWAP,
  P_CLUSTER,
  P_PROMOTE,
  P_COUNT
};
static const char *const k_names[P_COUNT] = {"bm",      "bn",    "stages",  "consumers",
                                             "blocks",  "group", "repack",  "split",
                                             "persist", "swap",  "cluster", "promote"};
static const char *const k_macros[P_COUNT] = {"BM",      "BN",    "STAGES",  "CONSUMERS",
                                              "BLOCKS",  "GROUP", "REPACK",  "SPLIT",
                                              "PERSIST", "SWAP",  "CLUSTER", "PROMOTE"};
static const int64_t v_bm[] = {64, 128, 256};
static const int64_t v_bn[] = {16, 32, 64, 128, 192, 256};
static const int64_t v_stages[] = {2, 3, 4, 5, 6, 8, 12, 16};
static const int64_t v_consumers[] = {1, 2};
static const int64_t v_blocks[] = {1, 2};
static const int64_t v_group[] = {1, 8, 16};
static const int64_t v_repack[] = {0, 1};
static const int64_t v_split[] = {1, 2, 4, 8};
static const int64_t v_persist[] = {0, 1, 2};
static const int64_t v_swap[] = {0, 1};
static const int64_t v_cluster[] = {1, 2};
static const int64_t v_promote[] = {0, 1, 2, 4};
static const int64_t *const k_lists[P_COUNT] = {v_bm,      v_bn,    v_stages,  v_consumers,
                                                v_blocks,  v_group, v_repack,  v_split,
                                                v_persist, v_swap,  v_cluster, v_promote};
static const int k_counts[P_COUNT] = {COUNT(v_bm),        COUNT(v_bn),      COUNT(v_stages),
                                      COUNT(v_consumers), COUNT(v_blocks),  COUNT(v_group),
                                      COUNT(v_repack),    COUNT(v_split),   COUNT(v_persist),
                                      COUNT(v_swap),      COUNT(v_cluster), COUNT(v_promote)};
static const char *const k_layouts[] = {"nn", "nt", "tn", "tt"};
/* The (dtype, layout) pairs every config serves: every layout for the 16-bit types, nt for
 * tf32 (its wgmma reads a K-major B only from shared memory; an MN-major A it takes through
 * registers: tt, and nn with swap, which test_emit_all and k_gpu_rs add by config). */
static const struct {
  const char *dtype, *layout;
} k_pairs[] = {{"f16", "nn"},  {"f16", "nt"},  {"f16", "tn"},  {"f16", "tt"},  {"bf16", "nn"},
               {"bf16", "nt"}, {"bf16", "tn"}, {"bf16", "tt"}, {"tf32", "nt"}};
/* Configs valid for at least one dtype and layout; pinned so that a change of the rules is a
 * visible change of this number (swap with bn > 64, persist or repack is tf32 nn's alone).
 * split is checked against problems only: a config counts once per split value with persist
 * = 0, once (split = 1) with persist = 1 or 2 (ping-pong: two consumers, each a whole tile).
 * Deep rings (8 to 16 stages) fit small tiles only. */
#define VALID_COUNT 9693
/* split > 1 only for problems with fewer tiles of C than this (two waves of 132 SMs) */
#define SPLIT_MAX_TILES 264

typedef struct {
  int64_t bm, bn, stages, consumers, blocks, group, repack, split, persist, swap, cluster, promote;
} cfg;

static cfg cfg_of(const gen_config *c) {
  return (cfg){c->v[P_BM],      c->v[P_BN],    c->v[P_STAGES],  c->v[P_CONSUMERS],
               c->v[P_BLOCKS],  c->v[P_GROUP], c->v[P_REPACK],  c->v[P_SPLIT],
               c->v[P_PERSIST], c->v[P_SWAP],  c->v[P_CLUSTER], c->v[P_PROMOTE]};
}

/* With swap the kernel computes C^T: its A is op(B)^T, its B op(A)^T.  Whether its A is
 * MN-major and its B K-major (the template's A_T and B_T) in a layout. */
static bool kernel_a_t(const cfg *p, const char *layout) {
  return p->swap ? layout[1] == 'n' : layout[0] == 't';
}
static bool kernel_b_t(const cfg *p, const char *layout) {
  return p->swap ? layout[0] == 'n' : layout[1] == 't';
}
/* The row width of the kernel's B in shared memory: an MN-major B narrower than 128 bytes (bn
 * = 32 or 16 in 16 bits) has rows of bn elements, under the swizzle of that width; else 128. */
static unsigned b_row_bytes(const cfg *p, const char *dtype, const char *layout) {
  const int64_t row = p->bn * gen_dtype_size(dtype);
  return kernel_b_t(p, layout) || row >= 128 ? 128u : (unsigned)row;
}

static int64_t threads_of(const cfg *p) { return 128 * (p->consumers + 1); }
/* Rows of the tile a consumer computes: BM / CONSUMERS, or with ping-pong (persist 2) BM. */
static int64_t wg_m_of(const cfg *p) { return p->persist == 2 ? p->bm : p->bm / p->consumers; }
/* fp32 accumulators per consumer thread: its rows times BN over 128 threads. */
static int64_t acc_of(const cfg *p) { return wg_m_of(p) * p->bn / 128; }
/* Stages of 128-byte rows of A and B, their mbarriers, and 1024 bytes of alignment slack;
 * with repack in 16 bits (dtype NULL: as if), the epilogue's stage for a misaligned C: 16
 * rows of min(bn, 32) + 4 floats a consumer warp, and 16 bytes to align it. */
static int64_t shared_bytes_of(const cfg *p, const char *dtype) {
  const bool staged = p->repack && !(dtype && strcmp(dtype, "tf32") == 0);
  const int64_t sc = p->bn < 32 ? p->bn : 32;
  const int64_t stage = staged ? p->consumers * 4 * 16 * (sc + 4) * 4 + 16 : 0;
  return p->stages * (p->bm + p->bn) * 128 + 16 * p->stages + 1024 + stage;
}
/* Registers a thread at launch: what __launch_bounds__(THREADS, BLOCKS) leaves, rounded down
 * to 8, at most 255; ptxas compiles the whole kernel within it. */
static int64_t launch_regs_of(const cfg *p) {
  const int64_t r = 65536 / (threads_of(p) * p->blocks) / 8 * 8;
  return r < 255 ? r : 255;
}
/* setmaxnreg: the consumers' share once the producer keeps 24 (0: no exchange). */
static int64_t consumer_regs_of(const cfg *p) {
  if (p->consumers == 1 && p->blocks == 1) return 0;
  const int64_t r = (launch_regs_of(p) * threads_of(p) - 128 * 24) / (128 * p->consumers) / 8 * 8;
  return r < 240 ? r : 240;
}

/* tf32 with the kernel's A MN-major takes A through registers (RS): a stage's fragments, 16
 * registers a 64-row block, on top of the accumulators. */
static bool rs_fits(const cfg *p) {
  return acc_of(p) + 40 + 16 * (wg_m_of(p) / 64) <= launch_regs_of(p);
}

/* rules_valid for one dtype and layout: the shared memory of the dtype; swap's small-M limits
 * (bn <= 64, no persist, no repack) but for tf32 nn; tf32 only where the kernel's B is K-major,
 * its MN-major A through registers (rs_fits). */
static bool rules_valid_for(const cfg *p, const char *dtype, const char *layout) {
  /* the template's constraints without a problem, restated; split has none but persist */
  const bool tf32 = strcmp(dtype, "tf32") == 0;
  const int64_t shared = shared_bytes_of(p, dtype);
  if (shared > 227 * 1024 || p->blocks * (shared + 1024) > 228 * 1024) return false;
  if (p->persist && p->split > 1) return false;
  if (!p->swap && p->bn < 32) return false;
  if (p->cluster > 1 && (p->persist || p->swap || p->repack || p->bn < 64)) return false;
  if (wg_m_of(p) < 64 || acc_of(p) > 128 || acc_of(p) + 40 > launch_regs_of(p)) return false;
  if (p->persist == 2 && (p->consumers != 2 || p->swap || p->repack)) return false;
  if (p->swap && !(tf32 && strcmp(layout, "nn") == 0) && (p->bn > 64 || p->persist || p->repack))
    return false;
  if (tf32 && !kernel_b_t(p, layout)) return false;
  if (p->promote != 1) return false; /* FP8's alone, whose kernels are op kernels only */
  return !(tf32 && kernel_a_t(p, layout)) || rs_fits(p);
}

/* The (dtype, layout) pair a config valid for some pair is emitted in: the first valid one
 * from pair `from` of k_all_pairs on. */
static const char *const k_all_pairs[][2] = {
    {"f16", "nn"},  {"f16", "nt"},  {"f16", "tn"},  {"f16", "tt"},  {"bf16", "nn"}, {"bf16", "nt"},
    {"bf16", "tn"}, {"bf16", "tt"}, {"tf32", "nn"}, {"tf32", "nt"}, {"tf32", "tn"}, {"tf32", "tt"}};
static int valid_pair(gen_template *t, const gen_config *c, int from) {
  for (int i = 0; i < COUNT(k_all_pairs); i++) {
    const int q = (from + i) % COUNT(k_all_pairs);
    if (tc_check_for(t, c, k_all_pairs[q][0], k_all_pairs[q][1], NULL, 0)) return q;
  }
  fail_msg("a config valid for no dtype and layout");
  return 0;
}

/* The split-K and cluster rules of a problem, restated: split = 1 always; split > 1 with at
 * least one whole K tile (128 bytes of K) a slice and fewer than SPLIT_MAX_TILES tiles of C; a
 * cluster of 2 with two tile rows or more, where A's or B's rows are not whole 32-byte
 * sectors. */
static bool split_valid(const cfg *p, const gen_problem *prob) {
  const int64_t elem = gen_dtype_size(prob->dtype);
  if (p->cluster > 1 && ((prob->m + p->bm - 1) / p->bm < p->cluster ||
                         (prob->lda * elem % 32 == 0 && prob->ldb * elem % 32 == 0)))
    return false;
  if (p->split == 1) return true;
  const int64_t bk = 128 / gen_dtype_size(prob->dtype);
  const int64_t rows = p->swap ? prob->n : prob->m, cols = p->swap ? prob->m : prob->n;
  const int64_t tiles = (rows + p->bm - 1) / p->bm * ((cols + p->bn - 1) / p->bn);
  return prob->k >= p->split * bk && tiles < SPLIT_MAX_TILES;
}

static gen_template *load_wgmma(void) { return tc_load(TEMPLATES "/wgmma.lua"); }

/* The TMA boxes of the kernel for layout: a K-major operand (A 'n', B 't') in one box of 128
 * bytes of K by its rows, an MN-major one in boxes of 128 bytes (64 elements) by BK, or for a
 * narrow B (b_row_bytes) of its rows' width, under a swizzle of that width; in the kernel's
 * order (tmA, tmB): with swap, B's map first.  With a cluster, B's box is a cluster block's
 * part: its rows (K-major) or its BK (MN-major) over the cluster's blocks. */
static void expect_maps(const gen_kernel *k, const cfg *p, const char *dtype, const char *layout) {
  const unsigned elem = (unsigned)gen_dtype_size(dtype), bk = 128u / elem;
  const unsigned b_row = b_row_bytes(p, dtype, layout);
  assert_int_equal(k->ntensor_maps, 2);
  assert_int_equal(k->tensor_maps[0].operand, p->swap ? 'B' : 'A');
  assert_int_equal(k->tensor_maps[1].operand, p->swap ? 'A' : 'B');
  assert_int_equal(k->tensor_maps[0].box[0], bk);
  assert_int_equal(k->tensor_maps[0].box[1], kernel_a_t(p, layout) ? bk : (unsigned)p->bm);
  assert_int_equal(k->tensor_maps[1].box[0], kernel_b_t(p, layout) ? bk : b_row / elem);
  assert_int_equal(k->tensor_maps[1].box[1],
                   (kernel_b_t(p, layout) ? (unsigned)p->bn : bk) / (unsigned)p->cluster);
  assert_int_equal(k->tensor_maps[0].swizzle, 128);
  assert_int_equal(k->tensor_maps[1].swizzle, b_row);
}

/* ---- declaration, space, default ----------------------------------------------------------- */

static void test_declaration(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  assert_string_equal(gen_name(t), "wgmma");
  assert_true(strlen(gen_description(t)) > 0);
  assert_int_equal(gen_dtype_count(t), 5);
  assert_string_equal(gen_dtype(t, 0), "f16");
  assert_string_equal(gen_dtype(t, 1), "bf16");
  assert_string_equal(gen_dtype(t, 2), "tf32");
  assert_string_equal(gen_dtype(t, 3), "e4m3");
  assert_string_equal(gen_dtype(t, 4), "e5m2");
  assert_false(gen_supports_dtype(t, "f32"));
  for (int l = 0; l < COUNT(k_layouts); l++) assert_true(gen_supports_layout(t, k_layouts[l]));
  const uint64_t size = tc_params_are(t, k_names, k_lists, k_counts, P_COUNT);
  assert_int_equal(size, 663552);
  gen_free(t);
}

static void test_space_count(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  int valid_count = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    char why[200];
    gen_config_at(t, idx, &c);
    const cfg p = cfg_of(&c);
    bool want = false; /* valid for at least one dtype and layout */
    for (int q = 0; q < COUNT(k_all_pairs); q++)
      want = want || rules_valid_for(&p, k_all_pairs[q][0], k_all_pairs[q][1]);
    const bool valid = tc_check(t, &c, NULL, why, sizeof why);
    if (valid != want) {
      char text[256];
      gen_config_format(t, &c, text, sizeof text, NULL);
      fprintf(stderr, "%s: template says %d (%s), rules say %d\n", text, valid, why, want);
    }
    assert_int_equal(valid, want);
    if (!valid) assert_true(strlen(why) > 0); /* always says why */
    valid_count += valid;
  }
  print_message("wgmma: %d valid configs of %llu\n", valid_count,
                (unsigned long long)gen_space_size(t));
  assert_int_equal(valid_count, VALID_COUNT);
  gen_free(t);
}

static void test_default(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  gen_config c;
  char text[256];
  gen_config_default(t, &c);
  assert_int_equal(gen_config_format(t, &c, text, sizeof text, NULL), MMT_OK);
  assert_string_equal(text, "bm=128,bn=256,stages=4,consumers=2,blocks=1,group=8,repack=0,split=1,"
                            "persist=0,swap=0,cluster=1,promote=1");
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  const gen_problem big = {"f16", "nn", 8192, 8192, 8192, 8192, 8192, 8192, 16, NULL, 1};
  assert_true(tc_check(t, &c, &big, NULL, 0));
  gen_kernel k, k2;
  tc_emit_ok(t, &c, "f16", "nn", &k);
  assert_string_equal(k.kernel_name, "mmt_wgmma_f16_nn_m128_n256_s4_c2_b1_g8_r0_k1_p0");
  assert_string_equal(k.arch, "sm_90a");
  assert_int_equal(k.block[0], 384); /* a producer and 2 consumer warpgroups */
  assert_int_equal(k.shared_bytes, 4 * (128 + 256) * 128 + 4 * 16 + 1024);
  assert_int_equal(k.requires.m_multiple, 1);
  assert_int_equal(k.requires.n_multiple, 1);
  assert_int_equal(k.requires.k_multiple, 1);
  assert_int_equal(k.requires.align_bytes, 16);
  assert_false(k.exclusive);
  assert_true(gen_requires_met(&k.requires, &big));
  /* 4097^3 (2-byte rows): only through repack, which an aligned problem never takes. */
  const gen_problem odd = {"f16", "nn", 4097, 4097, 4097, 4097, 4097, 4097, 2, NULL, 1};
  assert_false(gen_requires_met(&k.requires, &odd));
  tc_rejects(t, "repack=1", &big, "16-byte aligned already");
  gen_config r;
  gen_kernel kr;
  tc_parse_ok(t, "repack=1", &r);
  assert_true(tc_check(t, &r, &odd, NULL, 0));
  tc_emit_ok(t, &r, "f16", "nn", &kr);
  assert_true(kr.requires.repack);
  assert_true(gen_requires_met(&kr.requires, &odd));
  gen_kernel_clear(&kr);
  /* split-K: grid.z slices meeting in a workspace (a tile's fp32 sums a block), exclusive
   * (module counters); it combines with repack */
  tc_parse_ok(t, "split=4,repack=1", &r);
  assert_true(tc_check(t, &r, &odd, NULL, 0) == false); /* 33 x 17 tiles of C: too many */
  const gen_problem odd_few = {"f16", "nn", 512, 512, 4097, 4097, 513, 513, 2, NULL, 1};
  assert_true(tc_check(t, &r, &odd_few, NULL, 0));
  tc_emit_ok(t, &r, "f16", "nn", &kr);
  assert_string_equal(kr.kernel_name, "mmt_wgmma_f16_nn_m128_n256_s4_c2_b1_g8_r1_k4_p0");
  assert_true(kr.exclusive);
  assert_true(kr.requires.repack);
  assert_int_equal(kr.grid[2].tile, 4);
  assert_int_equal(kr.workspace_per_block, 128 * 256 * 4);
  gen_kernel_clear(&kr);
  /* persist: a per-SM grid; not with split-K */
  tc_rejects(t, "persist=1,split=2", NULL, "no split-K");
  tc_rejects(t, "bn=128,persist=2,split=2", NULL, "no split-K");
  /* ping-pong: two consumers taking whole tiles, not with swap or repack */
  tc_rejects(t, "bm=64,bn=128,consumers=1,persist=2", NULL, "two consumers (ping-pong)");
  tc_rejects(t, "bm=128,bn=64,consumers=2,persist=2,repack=1", NULL, "not with swap or repack");
  tc_parse_ok(t, "bm=64,bn=256,consumers=2,persist=2", &r); /* 64 x 256 a consumer */
  assert_true(tc_check(t, &r, NULL, NULL, 0));
  tc_parse_ok(t, "bm=128,bn=128,consumers=2,persist=2", &r);
  tc_emit_ok(t, &r, "f16", "nn", &kr);
  assert_true(kr.epilogue_overlap);
  assert_int_equal(kr.grid[0].dim, 'S');
  assert_non_null(strstr(kr.source, "#define WG_M BM "));
  gen_kernel_clear(&kr);
  tc_parse_ok(t, "persist=1,blocks=1", &r);
  tc_emit_ok(t, &r, "f16", "nn", &kr);
  assert_int_equal(kr.grid[0].dim, 'S');
  assert_int_equal(kr.grid[0].tile, 1);
  assert_false(kr.exclusive);
  assert_int_equal(kr.workspace_per_block, 0);
  gen_kernel_clear(&kr);
  const cfg p = cfg_of(&c);
  expect_maps(&k, &p, "f16", "nn");
  /* 128 accumulators a consumer thread: setmaxnreg 24 / 240 within 168 x 384 registers */
  assert_non_null(strstr(k.source, "#define PRODUCER_REGS 24\n"));
  assert_non_null(strstr(k.source, "#define CONSUMER_REGS 240\n"));
  tc_emit_ok(t, &c, "f16", "nn", &k2);
  assert_string_equal(k.source, k2.source); /* deterministic: the cubin cache is keyed by it */
  gen_kernel_clear(&k2);
  tc_emit_ok(t, &c, "bf16", "nn", &k2); /* the dtype is in the name: one module may hold both */
  assert_string_equal(k2.kernel_name, "mmt_wgmma_bf16_nn_m128_n256_s4_c2_b1_g8_r0_k1_p0");
  gen_kernel_clear(&k);
  gen_kernel_clear(&k2);
  gen_free(t);
}

/* ---- constraints and their reasons --------------------------------------------------------- */

static void test_constraints(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  tc_rejects(t, "bm=64,consumers=2", NULL, "bm/consumers = 32 rows per consumer: wgmma needs 64");
  /* 128 rows of 256 columns for one warpgroup */
  tc_rejects(t, "bm=128,bn=256,consumers=1", NULL,
          "256 accumulators per consumer thread (more than 128)");
  tc_rejects(t, "bm=256,bn=256,consumers=2", NULL, "256 accumulators per consumer thread");
  /* 5 stages of 384 rows of 128 bytes */
  tc_rejects(t, "stages=5", NULL, "246864 bytes of shared memory (more than 227 KiB)");
  tc_rejects(t, "bm=128,bn=64,stages=6,blocks=2", NULL,
          "2 blocks of 148576 bytes of shared memory do not fit an SM");
  /* two blocks of 384 threads: 80 registers, 64 accumulators */
  tc_rejects(t, "bm=128,bn=128,stages=2,blocks=2", NULL,
          "about 104 registers per consumer thread (limit 80): would spill");
  gen_config c;
  tc_parse_ok(t, "bm=128,bn=64,stages=3,blocks=2", &c);
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  tc_parse_ok(t, "bm=64,bn=128,stages=3,consumers=1,blocks=2", &c);
  assert_true(tc_check(t, &c, NULL, NULL, 0));

  /* problem-level: grid.y, and tf32's layouts: nt; nn with swap, tt (A through registers,
   * where they fit: not the default's 128 accumulators); never tn */
  gen_problem p = {"f16", "tn", 65535LL * 128, 64, 64, 65535LL * 128, 64, 64, 16, NULL, 1};
  tc_parse_ok(t, "", &c);
  assert_true(tc_check(t, &c, &p, NULL, 0));
  p.m++;
  p.lda++;
  tc_rejects(t, "", &p, "M needs more than 65535 blocks along grid y");
  for (int l = 0; l < COUNT(k_layouts); l++) {
    int64_t ld[3];
    gen_min_ld(k_layouts[l], 100, 100, 100, ld);
    const gen_problem tf = {"tf32", k_layouts[l], 100, 100, 100, ld[0], ld[1], ld[2], 16, NULL, 1};
    const char *layout = k_layouts[l];
    if (strcmp(layout, "nt") == 0) {
      assert_true(tc_check(t, &c, &tf, NULL, 0));
    } else if (strcmp(layout, "tn") == 0) {
      tc_rejects(t, "", &tf, "tf32 wgmma needs one operand K-major: layout tn has none");
      tc_rejects(t, "bn=64,swap=1", &tf, "layout tn has none (nt, tt, or nn with swap)");
    } else if (strcmp(layout, "nn") == 0) {
      tc_rejects(t, "", &tf, "tf32 wgmma reads its B K-major only: layout nn needs swap = 1");
      tc_rejects(t, "bm=128,bn=256,consumers=2,swap=1", &tf,
                 "about 184 registers per consumer thread with A's fragments (limit 168)");
      gen_config rs;
      tc_parse_ok(t, "bm=128,bn=192,consumers=2,swap=1,persist=1", &rs);
      assert_true(tc_check(t, &rs, &tf, NULL, 0)); /* swap: any tile, persist too */
    } else {
      tc_rejects(t, "bn=64,swap=1", &tf, "layout tt needs swap = 0");
      tc_rejects(t, "", &tf, "about 184 registers per consumer thread with A's fragments");
      gen_config rs;
      tc_parse_ok(t, "bm=128,bn=192,consumers=2", &rs);
      assert_true(tc_check(t, &rs, &tf, NULL, 0));
    }
  }
  /* problem-level split-K: a whole K tile a slice (64 f16 or 32 tf32 elements), fewer than
   * 264 tiles of C; split = 1 takes any problem */
  const gen_problem deep = {"f16", "nn", 512, 512, 512, 512, 512, 512, 16, NULL, 1};
  tc_parse_ok(t, "bm=128,bn=128,split=8", &c);
  assert_true(tc_check(t, &c, &deep, NULL, 0)); /* K = 8 * 64, 16 tiles */
  gen_problem sp = deep;
  sp.k = 511;
  tc_rejects(t, "bm=128,bn=128,split=8", &sp,
             "split-K slices of less than one step of 64 (K < 512)");
  sp.k = 0;
  tc_rejects(t, "bm=128,bn=128,split=2", &sp, "split-K slices of less than one step of 64");
  tc_parse_ok(t, "bm=128,bn=128", &c);
  assert_true(tc_check(t, &c, &sp, NULL, 0));
  const gen_problem tf = {"tf32", "nt", 512, 512, 256, 512, 512, 512, 16, NULL, 1};
  tc_parse_ok(t, "bm=128,bn=128,split=8", &c);
  assert_true(tc_check(t, &c, &tf, NULL, 0)); /* K = 8 * 32 */
  sp = tf;
  sp.k = 255;
  tc_rejects(t, "bm=128,bn=128,split=8", &sp, "split-K slices of less than one step of 32");
  /* 263 tiles of C (263 x 1): split-K; 264: not */
  const gen_problem wide = {"f16", "nt", 128, 263 * 128, 4096, 4096, 4096, 263 * 128, 16, NULL, 1};
  tc_parse_ok(t, "bm=128,bn=128,split=2", &c);
  assert_true(tc_check(t, &c, &wide, NULL, 0));
  sp = wide;
  sp.n += 1;
  sp.ldc += 8;
  tc_rejects(t, "bm=128,bn=128,split=2", &sp, "split-K: 264 tiles of C fill the GPU (264 or more)");
  tc_parse_ok(t, "bm=128,bn=128", &c);
  assert_true(tc_check(t, &c, &sp, NULL, 0));
  /* swap (C^T): M in tiles of at most 64, and bn = 16 only there; not with persist or repack
   * (but tf32 nn, above: any tile, persist too); grid y and the tiles of C count N's blocks */
  const gen_problem decode = {"f16", "nt", 32, 4096, 4096, 4096, 4096, 4096, 16, NULL, 1};
  tc_rejects(t, "bn=128,swap=1", &decode,
             "swap: for a small M, at most 64 of it a tile (bn <= 64; tf32 nn: any)");
  tc_rejects(t, "bm=128,bn=32,persist=1,swap=1", &decode, "swap: not with persist (tf32 nn");
  const gen_problem odd_decode = {"f16", "nt", 32, 4095, 4095, 4095, 4095, 4095, 2, NULL, 1};
  tc_rejects(t, "bm=128,bn=32,repack=1,swap=1", &odd_decode, "swap: not with repack (tf32 nn");
  tc_rejects(t, "bm=128,bn=16", NULL, "bn = 16 only with swap (the epilogues store 32 columns");
  tc_parse_ok(t, "bm=128,bn=32", &c); /* 32 columns: the epilogues' unit */
  assert_true(tc_check(t, &c, NULL, NULL, 0));
  tc_parse_ok(t, "bm=64,bn=16,stages=16,consumers=1,swap=1", &c);
  assert_true(tc_check(t, &c, &decode, NULL, 0));
  const gen_problem decode_tn = {"f16", "tn", 32, 4096, 4096, 32, 4096, 4096, 16, NULL, 1};
  tc_parse_ok(t, "bm=64,bn=16,stages=16,consumers=1,swap=1", &c);
  assert_true(tc_check(t, &c, &decode_tn, NULL, 0)); /* A stored K rows of M: 32-byte rows */
  tc_parse_ok(t, "bm=64,bn=64,consumers=1,swap=1", &c);
  assert_true(tc_check(t, &c, &decode_tn, NULL, 0));
  gen_problem tall = {"f16", "nt", 16, 65535LL * 128 + 1, 64, 64, 64, 65535LL * 128 + 8,
                      16,    NULL, 1};
  tc_rejects(t, "bm=128,bn=16,swap=1", &tall, "N needs more than 65535 blocks along grid y");
  /* 32 x 4096: 32 tiles of 128 x 32 (C^T), split-K allowed; 264 such tiles: not */
  tc_parse_ok(t, "bm=128,bn=32,split=4,swap=1", &c);
  assert_true(tc_check(t, &c, &decode, NULL, 0));
  const gen_problem many = {"f16", "nt", 32, 264 * 128, 4096, 4096, 4096, 264 * 128, 16, NULL, 1};
  tc_rejects(t, "bm=128,bn=32,split=4,swap=1", &many, "split-K: 264 tiles of C fill the GPU");
  /* cluster: plain large tiles (not with persist, swap or repack; bn >= 64), two tile rows or
   * more; grid y counts whole clusters */
  tc_rejects(t, "persist=1,cluster=2", NULL, "cluster: not with persist, swap or repack");
  tc_rejects(t, "bm=128,bn=32,swap=1,cluster=2", NULL, "cluster: not with persist, swap");
  tc_rejects(t, "repack=1,cluster=2", NULL, "cluster: not with persist, swap or repack");
  tc_rejects(t, "bm=128,bn=32,cluster=2", NULL, "cluster: bn >= 64");
  /* ... and only where A's or B's rows straddle 32-byte sectors (3000 f16: 6000 bytes) */
  const gen_problem odd = {"f16", "nn", 3000, 3000, 3000, 3000, 3000, 3000, 16, NULL, 1};
  tc_parse_ok(t, "bm=128,bn=192,cluster=2", &c);
  assert_true(tc_check(t, &c, &odd, NULL, 0));
  gen_problem padded = odd;
  padded.lda = padded.ldb = 3008;
  tc_rejects(t, "bm=128,bn=192,cluster=2", &padded,
             "cluster: A's and B's rows are whole 32-byte sectors");
  padded.ldb = 3000; /* B's alone straddle */
  assert_true(tc_check(t, &c, &padded, NULL, 0));
  tc_rejects(t, "bm=128,bn=128,split=4,cluster=2", &deep, "whole 32-byte sectors");
  const gen_problem few = {"f16", "nn", 520, 520, 520, 520, 520, 520, 16, NULL, 1};
  tc_parse_ok(t, "bm=128,bn=128,split=4,cluster=2", &c);
  assert_true(tc_check(t, &c, &few, NULL, 0)); /* 5 x 5 tiles, 1040-byte rows */
  const gen_problem one_row = {"f16", "nn", 128, 4000, 520, 520, 4000, 4000, 16, NULL, 1};
  tc_rejects(t, "bm=128,bn=128,cluster=2", &one_row,
             "cluster: fewer tile rows (1) than blocks in a cluster");
  gen_problem rows = {"f16", "tn", 65535LL * 128, 72, 72, 65535LL * 128, 72, 72, 16, NULL, 1};
  tc_parse_ok(t, "bm=128,bn=128", &c);
  assert_true(tc_check(t, &c, &rows, NULL, 0));
  tc_rejects(t, "bm=128,bn=128,cluster=2", &rows, "M needs more than 65535 blocks along grid y");
  tc_parse_ok(t, "", &c);
  gen_problem f32 = {"f32", "nn", 64, 64, 64, 64, 64, 64, 16, NULL, 1};
  assert_false(tc_check(t, &c, &f32, NULL, 0));
  gen_free(t);
}

/* tf32: nt reads both operands from shared memory; tt, and nn with swap, take the kernel's
 * MN-major A through registers (RS); tn, and a layout with the wrong swap, is no kernel: the
 * constraints say why. */
static void test_tf32_layouts(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  gen_config c;
  gen_kernel k;
  gen_config_default(t, &c);
  static const struct {
    const char *layout, *config, *why;
  } refused[] = {
      {"tn", "", "layout tn has none (nt, tt, or nn with swap)"},
      {"tn", "bn=64,swap=1", "layout tn has none"},
      {"nn", "", "tf32 wgmma reads its B K-major only: layout nn needs swap = 1"},
      {"tt", "bn=64,swap=1", "tf32 wgmma reads its B K-major only: layout tt needs swap = 0"},
  };
  for (int i = 0; i < COUNT(refused); i++) {
    char why[256];
    tc_parse_ok(t, refused[i].config, &c);
    assert_false(tc_check_for(t, &c, "tf32", refused[i].layout, why, sizeof why));
    assert_non_null(strstr(why, refused[i].why));
  }
  gen_config_default(t, &c);
  tc_emit_ok(t, &c, "tf32", "nt", &k);
  assert_non_null(strstr(k.source, "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32"));
  assert_non_null(strstr(k.source, "const float* __restrict__ A, int lda"));
  assert_non_null(strstr(k.source, "#define BK (128 / ELEM_BYTES)"));
  assert_non_null(strstr(k.source, "#define ELEM_BYTES 4\n"));
  assert_non_null(strstr(k.source, "#define RS 0 "));
  assert_null(strstr(k.source, "tnsp")); /* no transpose immediates for tf32 */
  cfg p = cfg_of(&c);
  expect_maps(&k, &p, "tf32", "nt"); /* boxes of 32 floats (128 bytes) */
  gen_kernel_clear(&k);
  /* RS: A's boxes of 32 (M) x 32 (K) floats, 4 per 128 rows; its fragments loaded from them,
   * the registers after the accumulators in the wgmma's operands; none left in flight */
  static const char *const rs_lines[] = {
      "#define RS 1 ",
      "for (int c = 0; c < BM / A_CHUNK; ++c)",
      "asm volatile(\"ld.shared.b32 %0, [%1];\\n\" : \"=r\"(a[v]) : \"r\"(block + off));",
      "wgmma_rs(acc[i], af[kk][i], db + ((kk * B_KSTEP_BYTES) >> 4));",
      " {%96, %97, %98, %99}, %100, p, 1, 1;",
      "      wgmma_wait<0>();\n      if (lane == 0) release_stage(empty + 8 * s);",
  };
  static const char *const rs_layouts[][2] = {{"nn", "bm=128,bn=192,consumers=2,swap=1"},
                                              {"tt", "bm=128,bn=192,consumers=2"}};
  gen_kernel rs[2];
  for (int i = 0; i < 2; i++) {
    tc_parse_ok(t, rs_layouts[i][1], &c);
    tc_emit_ok(t, &c, "tf32", rs_layouts[i][0], &rs[i]);
    tc_source_has(&rs[i], rs_lines, COUNT(rs_lines));
    p = cfg_of(&c);
    expect_maps(&rs[i], &p, "tf32", rs_layouts[i][0]);
  }
  tc_compile_all(rs, NULL, 2, NULL); /* NVRTC takes them (the GPU test runs them) */
  gen_kernel_clear(&rs[0]);
  gen_kernel_clear(&rs[1]);
  gen_free(t);
}

/* ---- every config: launch description, tensor maps, instructions --------------------------- */

static void test_emit_all(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  int emitted = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    gen_config_at(t, idx, &c);
    if (!tc_check(t, &c, NULL, NULL, 0)) continue;
    const cfg p = cfg_of(&c);
    /* each config in one (dtype, layout) pair it is valid for, rotating, so every pair is
     * covered many times */
    const int q = valid_pair(t, &c, (int)(idx % COUNT(k_all_pairs)));
    const char *dtype = k_all_pairs[q][0], *layout = k_all_pairs[q][1];
    const bool tf32 = strcmp(dtype, "tf32") == 0;
    gen_kernel k;
    tc_emit_ok(t, &c, dtype, layout, &k);
    char name[160], line[192];
    snprintf(name, sizeof name,
             "mmt_wgmma_%s_%s_m%lld_n%lld_s%lld_c%lld_b%lld_g%lld_r%lld_k%lld_p%lld%s%s", dtype,
             layout, (long long)p.bm, (long long)p.bn, (long long)p.stages,
             (long long)p.consumers, (long long)p.blocks, (long long)p.group,
             (long long)p.repack, (long long)p.split, (long long)p.persist,
             p.swap ? "_w1" : "", p.cluster > 1 ? "_q2" : "");
    assert_string_equal(k.kernel_name, name);
    /* the grid: a tile a block (swap: BN of M, BM of N), split-K slices along z; or persist:
     * BLOCKS a multiprocessor */
    if (p.persist)
      tc_grid_is(&k, 'S', p.blocks, 0, 1, 0, 1);
    else if (p.swap)
      tc_grid_is(&k, 'M', p.bn, 'N', p.bm, 0, p.split);
    else
      tc_grid_is(&k, 'N', p.bn, 'M', p.bm, 0, p.split);
    /* cluster: (1, CLUSTER, 1), tile rows that share B; B's parts multicast */
    assert_int_equal(k.grid[0].cluster, 1);
    assert_int_equal(k.grid[1].cluster, (int)p.cluster);
    assert_int_equal(k.grid[2].cluster, 1);
    assert_int_equal(gen_kernel_cluster_blocks(&k), (int)p.cluster);
    if (p.cluster > 1) {
      assert_non_null(strstr(k.source, "\n#define CLUSTER 2\n"));
      snprintf(line, sizeof line, "(BN / CLUSTER * 128)");
      assert_non_null(strstr(k.source, line));
    }
    assert_int_equal(k.requires.repack, p.repack == 1);
    assert_int_equal(k.requires.c_any_align, p.repack == 1);
    assert_non_null(strstr(k.source, "#if REPACK\n/* snippet copy_rows")); /* the copies */
    assert_non_null(strstr(k.source, name));
    assert_non_null(
        strstr(k.source, "extern \"C\" __global__ void __launch_bounds__(THREADS, BLOCKS)"));
    assert_non_null(strstr(k.source, "Parameters:"));
    assert_null(strstr(k.source, "#include"));
    assert_null(strstr(k.source, "${"));
    /* each parameter is defined and documented; PROMOTE in FP8 kernels only */
    assert_null(strstr(k.source, "PROMOTE"));
    for (int i = 0; i < P_PROMOTE; i++) {
      snprintf(line, sizeof line, "#define %s %lld\n", k_macros[i], (long long)c.v[i]);
      assert_non_null(strstr(k.source, line));
      snprintf(line, sizeof line, " *   %-9s = %lld", k_macros[i], (long long)c.v[i]);
      assert_non_null(strstr(k.source, line));
    }
    snprintf(line, sizeof line, "#define A_T %d ", kernel_a_t(&p, layout));
    assert_non_null(strstr(k.source, line));
    snprintf(line, sizeof line, "#define B_T %d ", kernel_b_t(&p, layout));
    assert_non_null(strstr(k.source, line));
    snprintf(line, sizeof line, "#define RS %d ", tf32 && kernel_a_t(&p, layout));
    assert_non_null(strstr(k.source, line));
    /* B's rows in shared memory and the descriptor's swizzle mode for them (1, 2, 3: 128, 64,
     * 32 bytes) */
    const unsigned b_row = b_row_bytes(&p, dtype, layout);
    snprintf(line, sizeof line, "#define B_ROW_BYTES %u\n#define B_CHUNK (B_ROW_BYTES / ELEM_BYTES)",
             b_row);
    assert_non_null(strstr(k.source, line));
    snprintf(line, sizeof line, "#define B_SWIZZLE %d ", b_row == 128 ? 1 : b_row == 64 ? 2 : 3);
    assert_non_null(strstr(k.source, line));
    /* the ABI, with the two tensor maps after it */
    snprintf(line, sizeof line, "const %s* __restrict__ A, int lda",
             tf32 ? "float" : strcmp(dtype, "f16") == 0 ? "__half" : "__nv_bfloat16");
    assert_non_null(strstr(k.source, line));
    assert_non_null(strstr(k.source, "float beta, "));
    const bool split = p.split > 1; /* the slices of a tile meet in WS */
    assert_non_null(strstr(k.source, "int ldc,\n"
                                     "        const __grid_constant__ mmt_tensor_map tmA,\n"
                                     "        const __grid_constant__ mmt_tensor_map tmB"));
    assert_non_null(strstr(k.source, "mmt_tensor_map tmB\n#if SPLIT > 1\n"
                                     "        , float* __restrict__ WS\n#endif\n        )"));
    assert_non_null(strstr(k.source, "struct __align__(64) mmt_tensor_map "
                                     "{ unsigned long long opaque[16]; };"));
    /* the Hopper core: wgmma of m64 x BN fed by TMA through mbarriers, warp-specialized */
    snprintf(line, sizeof line, "wgmma.mma_async.sync.aligned.m64n%lldk%d.f32.%s.%s",
             (long long)p.bn, tf32 ? 8 : 16, dtype, dtype);
    assert_non_null(strstr(k.source, line));
    if (!tf32) { /* transpose immediates: the kernel's A MN-major (A stored 't'), its B */
      snprintf(line, sizeof line, "p, 1, 1, %d, %d;", kernel_a_t(&p, layout),
               !kernel_b_t(&p, layout));
      assert_non_null(strstr(k.source, line));
    }
    /* the register list ends with accumulator BN / 2 - 1 */
    snprintf(line, sizeof line, "\"+f\"(d[%lld])", (long long)(p.bn / 2 - 1));
    assert_non_null(strstr(k.source, line));
    snprintf(line, sizeof line, "\"+f\"(d[%lld])", (long long)(p.bn / 2));
    assert_null(strstr(k.source, line));
    static const char *const ptx[] = {
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "mbarrier.arrive.shared::cta.b64",
        "fence.mbarrier_init.release.cluster",
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned",
        "setmaxnreg.dec.sync.aligned.u32",
        "setmaxnreg.inc.sync.aligned.u32",
        "prefetch.tensormap",
        /* clusters (compiled where CLUSTER > 1) */
        ".multicast::cluster",
        "mapa.shared::cluster.u32",
        "mbarrier.arrive.shared::cluster.b64",
        "barrier.cluster.arrive.release",
        "barrier.cluster.wait.acquire",
        "mov.u32 %0, %%cluster_ctarank;",
    };
    for (int i = 0; i < COUNT(ptx); i++) assert_non_null(strstr(k.source, ptx[i]));
    /* the epilogue, chosen by #if: whole tiles with beta == 0 take a loop of their own,
     * without tests (tf32: pairs of lanes swap pairs of columns and store 16 bytes, where
     * registers allow); 16-bit types exchange within quads and store 16 bytes, masked at the
     * edges; both store element by element where C is not aligned for that (c_vec); swap
     * stores the tile transposed, an element at a time */
    assert_non_null(strstr(k.source, "#if SWAP\n    /* Epilogue (SWAP)"));
    assert_non_null(strstr(k.source, "#elif ELEM_BYTES == 2\n    /* Epilogue: C = alpha"));
    assert_non_null(strstr(k.source, "#if !SWAP && ELEM_BYTES == 2\n/* ---- epilogue: 16-byte"));
    if (p.swap) {
      assert_non_null(strstr(k.source, "elem_t* const c_col = Cg + row0 + r;"));
      assert_non_null(strstr(k.source, "elem_t* const p = c_col + (col0 + c) * (long long)ldc;"));
      assert_non_null(strstr(k.source, "  const int MK = N, NK = M;\n#else"));
    } else if (tf32) {
      assert_non_null(strstr(k.source, "const bool c_vec = "));
      assert_non_null(
          strstr(k.source, "if (m_left >= BM && n_left >= BN && beta == 0.0f && c_vec16) {"));
      assert_non_null(strstr(k.source, "__shfl_xor_sync(0xffffffffu, odd ? e0 : o0, 1);"));
      assert_non_null(strstr(k.source, "*p = make_float2(v0, v1);"));
    } else {
      assert_non_null(strstr(k.source, "const bool c_vec = "));
      assert_non_null(
          strstr(k.source, "if (m_left >= BM && n_left >= BN && c_vec && beta == 0.0f) {"));
      assert_non_null(
          strstr(k.source, "*reinterpret_cast<uint4*>(c_row + g * 32 + q * 8) = quad_transpose"));
      assert_non_null(strstr(k.source, "const uint4 v = quad_transpose(p, lane);"));
      assert_non_null(strstr(k.source, "*reinterpret_cast<uint4*>(c_row + c) = v;"));
      assert_non_null(strstr(k.source, "if (c_vec && c + 8 <= n_left) {"));
      /* a C under 8-byte alignment (repack kernels only: #if REPACK) goes through the
       * shared-memory stage */
      assert_non_null(strstr(k.source, "#if REPACK\n    } else if ((c_low & 7) != 0) {"));
    }
    snprintf(line, sizeof line, "#define PRODUCER_REGS %d\n",
             consumer_regs_of(&p) ? 24 : 0);
    assert_non_null(strstr(k.source, line));
    snprintf(line, sizeof line, "#define CONSUMER_REGS %lld\n", (long long)consumer_regs_of(&p));
    assert_non_null(strstr(k.source, line));
    /* the exchange stays within the block's registers at launch, and gives the consumers
     * at least what they had */
    if (consumer_regs_of(&p)) {
      assert_true(128 * 24 + 128 * p.consumers * consumer_regs_of(&p) <=
                  launch_regs_of(&p) * threads_of(&p));
      assert_true(consumer_regs_of(&p) >= launch_regs_of(&p));
    }
    /* launch */
    assert_string_equal(k.arch, "sm_90a");
    assert_int_equal(k.block[0], threads_of(&p));
    assert_int_equal(k.block[1], 1);
    assert_int_equal(k.block[2], 1);
    /* split-K: module counters and a workspace, launches never overlap */
    assert_int_equal(k.exclusive, split);
    assert_int_equal(k.dependent_launch, !split); /* the others may start early */
    assert_int_equal(k.workspace_per_block, (unsigned)(split ? p.bm * p.bn * 4 : 0));
    static const char *const pdl[] = {
        "  asm volatile(\"griddepcontrol.wait;\\n\" ::: \"memory\");\n",
        "  pdl_wait(tid == 0);\n"};
    tc_source_has(&k, pdl, 2); /* the wait that dependent_launch promises, called */
    /* the slices, and the meeting (the split_k snippet, with the consumers' barrier) compiled
     * in by SPLIT > 1 */
    static const char *const split_lines[] = {
        "const int kt0 = k_tiles * (int)blockIdx.z / SPLIT;",
        "const int kt1 = k_tiles * ((int)blockIdx.z + 1) / SPLIT;",
        "#if SPLIT > 1\n"
        "    /* Split-K: the slices of this tile meet in the workspace; the last to arrive goes "
        "on with\n",
        "if (!splitk_reduce<MI * ACC, 128 * CONSUMERS>(&acc[0][0], WS,\n"
        "                                                  row0 / BM * grid_n + col0 / BN, tid - 128))\n"
        "      continue;",
    };
    tc_source_has(&k, split_lines, COUNT(split_lines));
    /* the split_k snippet and its barrier, for SPLIT > 1 alone */
    assert_non_null(strstr(k.source, "\n#if SPLIT > 1\n/* Barrier `id` among `count` threads"));
    assert_non_null(strstr(k.source,
                           "#define SPLITK_SYNC() named_bar(CONSUMER_BAR, "
                           "128 * CONSUMERS)\n#endif\n#if SPLIT > 1\n/* snippet split_k"));
    assert_int_equal(k.shared_bytes, shared_bytes_of(&p, dtype));
    assert_int_equal(k.requires.align_bytes, 16);
    assert_int_equal(k.requires.m_multiple * k.requires.n_multiple * k.requires.k_multiple, 1);
    expect_maps(&k, &p, dtype, layout);
    gen_kernel_clear(&k);
    emitted++;
  }
  assert_int_equal(emitted, VALID_COUNT);
  gen_free(t);
}

/* The block-order swizzle is the tile_order snippet (test_templates.c runs it), applied to
 * the tile index (the launch index, or a persistent block's tiles; with a cluster, the
 * cluster's tile of CLUSTER * BM rows, and the block's rows in it); here, that the same lines
 * are in the source. */
static void test_shared_lines(void **state) {
  (void)state;
  static const char *const lines[] = {
      "const long long first_tile = (long long)(blockIdx.y / CLUSTER) * grid_n + blockIdx.x;",
      "static __device__ __forceinline__ void mmt_tile_of(long long pid, long long grid_m,",
      "mmt_tile_of(pid, grid_m, grid_n, GROUP, &tile_row, &tile_col);",
      "row0 = tile_row * (BM * CLUSTER) + rank * BM;",
      "col0 = tile_col * BN;",
  };
  gen_template *t = load_wgmma();
  gen_config c;
  gen_kernel k;
  tc_parse_ok(t, "group=16", &c);
  tc_emit_ok(t, &c, "bf16", "tt", &k);
  tc_source_has(&k, lines, COUNT(lines));
  gen_kernel_clear(&k);
  gen_free(t);
}

/* ---- NVRTC (no GPU needed) ----------------------------------------------------------------- */

/* The default, and the default with split=4, in every (dtype, layout) pair, for sm_90a; plain
 * sm_90 has no wgmma. */
static void test_nvrtc_default(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  gen_config c;
  gen_config_default(t, &c);
  gen_kernel kernels[2 * COUNT(k_pairs)];
  for (int i = 0; i < COUNT(k_pairs); i++) {
    gen_kernel *k = &kernels[2 * i], *ks = &kernels[2 * i + 1];
    tc_emit_ok(t, &c, k_pairs[i].dtype, k_pairs[i].layout, k);
    gen_config sc = c; /* and with split-K */
    sc.v[P_SPLIT] = 4;
    tc_emit_ok(t, &sc, k_pairs[i].dtype, k_pairs[i].layout, ks);
    assert_true(ks->exclusive);
    if (i == 0) {
      rt_cubin cubin;
      ut_err e;
      assert_int_equal(rt_compile(k->source, k->kernel_name, "sm_90", &cubin, NULL, &e),
                       MMT_ERR_COMPILE);
    }
  }
  tc_compile_all(kernels, NULL, COUNT(kernels), NULL);
  for (int i = 0; i < COUNT(kernels); i++) gen_kernel_clear(&kernels[i]);
  gen_free(t);
}

/* A deterministic spread of 12 valid configs, picked by a fixed LCG (split > 1 among them);
 * the (dtype, layout) pair rotates.  All compile for sm_90a. */
static void test_nvrtc_sample(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  gen_config *valid = malloc(sizeof *valid * gen_space_size(t));
  assert_non_null(valid);
  int count = 0;
  for (uint64_t idx = 0; idx < gen_space_size(t); idx++) {
    gen_config c;
    gen_config_at(t, idx, &c);
    if (tc_check(t, &c, NULL, NULL, 0)) valid[count++] = c;
  }
  assert_int_equal(count, VALID_COUNT);
  uint64_t seed = 20250601u;
  int compiled = 0, split = 0, kinds[2][2] = {{0, 0}, {0, 0}};
  gen_kernel kernels[12];
  for (int i = 0; i < 12; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    const gen_config *c = &valid[(seed >> 33) % (uint64_t)count];
    const int q = valid_pair(t, c, i % COUNT(k_all_pairs));
    tc_emit_ok(t, c, k_all_pairs[q][0], k_all_pairs[q][1], &kernels[i]);
    kinds[c->v[P_CONSUMERS] - 1][c->v[P_BLOCKS] - 1]++;
    split += c->v[P_SPLIT] > 1;
    compiled++;
  }
  assert_int_equal(compiled, 12);
  tc_compile_all(kernels, NULL, compiled, NULL);
  for (int i = 0; i < compiled; i++) gen_kernel_clear(&kernels[i]);
  print_message("sample: consumers x blocks 1x1 %d, 1x2 %d, 2x1 %d, 2x2 %d; split-K %d\n",
                kinds[0][0], kinds[0][1], kinds[1][0], kinds[1][1], split);
  assert_true(split > 0);
  free(valid);
  gen_free(t);
}

/* ---- GPU: results on ragged shapes (skipped without a compute capability 9.0 device) ------- */

/* Shapes as op(A) M x K times op(B) K x N.  Each stored row (A, B, C) is padded to a multiple
 * of 16 bytes (TMA and `requires`), plus `pad` more 16-byte units; `big` shapes run only for
 * the first configs (the CPU reference of 1000^3 takes a second). */
typedef struct {
  int64_t m, n, k;
  float alpha, beta;
  int pad;
  bool big;
  int odd; /* operands (ODD_A | ODD_B | ODD_C) whose rows are one element longer than they hold
              and whose bases are one element past 16-byte alignment: only repack kernels
              take these */
} gemm_shape;

enum { ODD_A = 1, ODD_B = 2, ODD_C = 4, ODD_ALL = 7, C_8 = 8 /* C's pitch 8 bytes past 16 */ };

static const gemm_shape k_shapes[] = {
    {1, 1, 1, 1.0f, 0.0f, 0, false, 0},       {17, 33, 65, 1.5f, 0.5f, 1, false, 0},
    {127, 257, 1023, 1.0f, 0.0f, 0, false, 0}, {300, 520, 64, -0.5f, 2.0f, 2, false, 0},
    {129, 200, 136, 2.0f, -1.0f, 0, false, 0}, {5, 3, 0, 1.0f, 0.5f, 0, false, 0},
    {40, 24, 0, 1.0f, 0.0f, 1, false, 0},      {64, 8, 200, 1.0f, 0.0f, 0, false, 0},
    /* whole tiles up to 256 x 256 with beta == 0: the epilogue's path without tests */
    {512, 256, 96, 1.0f, 0.0f, 0, false, 0},   {1000, 1000, 1000, 0.75f, 0.0f, 0, true, 0},
};

/* Unaligned shapes for repack kernels: odd pitches, bases off by one element; every operand,
 * then C alone (the kernel stores it in place: through its shared-memory stage in 16 bits),
 * then A or B alone (only that one is copied). */
static const gemm_shape k_odd_shapes[] = {
    {1, 1, 1, 1.0f, 0.0f, 0, false, ODD_ALL},      {17, 33, 65, 1.5f, 0.5f, 0, false, ODD_ALL},
    {127, 257, 1023, 1.0f, 0.0f, 2, false, ODD_ALL}, {300, 520, 64, -0.5f, 2.0f, 0, false, ODD_ALL},
    {5, 3, 0, 1.0f, 0.5f, 0, false, ODD_ALL},        {130, 200, 72, 1.0f, 0.0f, 0, false, ODD_C},
    {131, 67, 129, -1.5f, 0.5f, 1, false, ODD_C},    {70, 130, 96, 1.0f, 0.0f, 0, false, ODD_A},
    {66, 129, 200, 0.5f, 2.0f, 0, false, ODD_B},     {136, 260, 64, 1.0f, 0.0f, 0, false, C_8},
    {129, 70, 80, 0.5f, -1.0f, 0, false, C_8},
    /* large Cs of 2-byte rows, through the epilogue's stage (beta == 0 and != 0) */
    {600, 520, 72, 1.0f, 0.0f, 0, false, ODD_C},    {520, 600, 40, 0.5f, -1.0f, 1, false, ODD_ALL},
};

/* Row pitch in elements of the operand `which` (ODD_A, ODD_B or ODD_C): width rounded up to 16
 * bytes, plus pad units of 16 bytes; for an odd operand, width + 1 + pad; for C with C_8, a
 * multiple of 8 bytes that is not one of 16 (base aligned: 8-byte stores serve it). */
static int64_t shape_pitch(const gemm_shape *s, int which, int64_t width, int bytes) {
  const int64_t unit = 16 / bytes;
  const int64_t w = width > 0 ? width : 1;
  if (s->odd & which) return w + 1 + s->pad;
  if (which == ODD_C && (s->odd & C_8)) {
    const int64_t half = 8 / bytes, p = (w + half - 1) / half * half;
    return p % unit ? p : p + half;
  }
  return (w + unit - 1) / unit * unit + s->pad * unit;
}

/* Configs covering both consumer counts and register splits, 1, 2 and 4 wgmma per k-step,
 * every BN (MN-major B in 1 to 4 boxes), ring depths 2 to 6, each block order, split-K
 * (alone and with repack) and persistent grids.  Every config runs every shape, split-K ones
 * too where the tuner's constraints would not choose them (K == 0, K < split * BK: empty
 * slices). */
static const char *const k_gpu_configs[] = {
    "",
    "bm=128,bn=128,stages=5,consumers=2,group=1",
    "bm=128,bn=128,stages=4,consumers=2,repack=1", /* on aligned shapes: runs as is */
    "bm=64,bn=192,stages=3,consumers=1,group=16",
    "bm=256,bn=128,stages=3,consumers=2",
    "bm=256,bn=64,stages=5,consumers=1,group=1",
    "bm=128,bn=64,stages=4,consumers=1,group=1", /* two 64-row blocks a consumer, 64 sums */
    "bm=128,bn=64,stages=2,consumers=2,blocks=2",
    "bm=64,bn=128,stages=3,consumers=1,blocks=2",
    "bm=128,bn=128,stages=4,consumers=2,split=4", /* split-K: slices of 0 to 4 K tiles */
    "bm=64,bn=64,stages=6,consumers=1,blocks=2,split=8,repack=1",
    /* persistent: blocks walking several tiles each (edges, K = 0 and 1, repack included) */
    "bm=128,bn=128,stages=3,consumers=2,persist=1",
    "bm=64,bn=128,stages=4,consumers=1,blocks=2,group=8,persist=1,repack=1",
    /* ping-pong: the two consumers taking tiles in turn (one tile: the second has none) */
    "bm=128,bn=128,stages=4,consumers=2,persist=2",
    "bm=64,bn=256,stages=3,consumers=2,group=1,persist=2",
    /* swap (C^T): op(B) as wgmma's 64-row side, M in tiles of 16 to 64, split-K too */
    "bm=128,bn=32,stages=6,consumers=2,group=1,split=4,swap=1",
    "bm=64,bn=16,stages=6,consumers=1,blocks=2,swap=1",
    "bm=128,bn=64,stages=4,consumers=2,swap=1",
    /* narrow B tiles: MN-major rows of 32 bytes (swap, A stored K rows of M: layout tt here)
     * and 64 bytes (bn = 32: nn, and tn with swap), K-major ones (nt) */
    "bm=64,bn=16,stages=12,consumers=1,swap=1",
    "bm=64,bn=32,stages=12,consumers=1,group=1",
    "bm=128,bn=32,stages=8,consumers=2,split=2",
    "bm=128,bn=32,stages=6,consumers=2,split=2,swap=1",
    /* clusters of two tile rows sharing B (multicast): a last cluster half past M on the
     * ragged shapes, split-K, two blocks an SM, 1 and 2 wgmma a k-step */
    "bm=128,bn=128,stages=4,consumers=2,cluster=2",
    "bm=64,bn=64,stages=6,consumers=1,group=1,split=4,cluster=2",
    "bm=64,bn=128,stages=4,consumers=1,blocks=2,cluster=2",
    "bm=256,bn=64,stages=4,consumers=2,group=16,cluster=2",
};

/* tf32 with the kernel's A through registers (RS), in the layouts that take it: nn with swap
 * (tiles of any width, persistent, split-K) and tt (one and two consumers, split-K,
 * persistent). */
static const struct {
  const char *config, *layout;
} k_gpu_rs[] = {
    {"bm=128,bn=192,stages=4,consumers=2,swap=1", "nn"},
    {"bm=128,bn=128,stages=5,consumers=2,group=1,swap=1,persist=1", "nn"},
    {"bm=64,bn=256,stages=4,consumers=1,group=16,swap=1", "nn"},
    {"bm=128,bn=64,stages=6,consumers=2,split=4,swap=1", "nn"},
    {"bm=64,bn=16,stages=8,consumers=1,blocks=2,swap=1", "nn"},
    {"bm=128,bn=128,stages=4,consumers=2,repack=1,swap=1", "nn"}, /* odd shapes: copies */
    {"bm=128,bn=192,stages=4,consumers=2", "tt"},
    {"bm=64,bn=128,stages=4,consumers=1,blocks=2,persist=1", "tt"},
    {"bm=128,bn=128,stages=4,consumers=2,split=4", "tt"},
};

/* The problem of shape s in a (dtype, layout) pair, as the GPU test lays it out. */
static gen_problem shape_problem(const gemm_shape *s, const char *dtype, const char *layout) {
  const int bytes = gen_dtype_size(dtype);
  const bool ta = layout[0] == 't', tb = layout[1] == 't';
  return (gen_problem){dtype,
                       layout,
                       s->m,
                       s->n,
                       s->k,
                       shape_pitch(s, ODD_A, ta ? s->m : s->k, bytes),
                       shape_pitch(s, ODD_B, tb ? s->k : s->n, bytes),
                       shape_pitch(s, ODD_C, s->n, bytes),
                       s->odd ? bytes : 16,
                       NULL,
                       1};
}

/* Runs k on shape s in dtype and layout (gemm_check.h), `runs` times from the same C.
 * Element bound: tol * (1 + |want|) plus 2^-20 times the sum of |alpha * a * b| over K (the
 * tensor cores' fp32 accumulation), whatever the split: the parts of a tile add in fp32 and C
 * is rounded once.  tf32 is stored as f32; the values are exact in it. */
static void check_shape(const rt_cu *cu, const rt_kernel *k, const char *label, const char *dtype,
                        const char *layout, const gemm_shape *s, int runs, double tol) {
  const gen_problem p = shape_problem(s, dtype, layout);
  /* an odd operand's base: one element past 16-byte alignment */
  const int64_t off_a = s->odd & ODD_A ? 1 : 0, off_b = s->odd & ODD_B ? 1 : 0,
                off_c = s->odd & ODD_C ? 1 : 0;
  const gc_case gc = {.label = label,
                      .dtype = dtype,
                      .layout = layout,
                      .m = s->m,
                      .n = s->n,
                      .k = s->k,
                      .lda = p.lda,
                      .ldb = p.ldb,
                      .ldc = p.ldc,
                      .alpha = s->alpha,
                      .beta = s->beta,
                      .offset = {off_a, off_b, off_c},
                      .runs = runs,
                      .rtol = tol,
                      .atol = tol,
                      .unit = 0x1p-20};
  gc_run(cu, k, &gc);
}

/* The GPU test's configs are valid and run every shape (no requirement turns one away; a
 * repack config is left to the odd shapes by its constraint, and runs the aligned ones as a
 * plain kernel; a split-K config is left to the problems the split-K rules take, and must
 * still be right on the others; a cluster config, to the shapes whose rows straddle sectors,
 * in some of the pairs): checked here without a GPU. */
static void test_gpu_configs(void **state) {
  (void)state;
  gen_template *t = load_wgmma();
  for (int i = 0; i < COUNT(k_gpu_configs); i++) {
    int cluster_taken = 0;
    for (int q = 0; q < COUNT(k_pairs); q++) {
      gen_config c;
      gen_kernel spec;
      tc_parse_ok(t, k_gpu_configs[i], &c);
      assert_true(tc_check(t, &c, NULL, NULL, 0));
      const cfg cp = cfg_of(&c);
      tc_emit_ok(t, &c, k_pairs[q].dtype, k_pairs[q].layout, &spec);
      int taken = 0; /* shapes the split-K rules take: split-K also runs where it is chosen */
      for (int j = 0; j < COUNT(k_shapes); j++) {
        const gen_problem p = shape_problem(&k_shapes[j], k_pairs[q].dtype, k_pairs[q].layout);
        const bool split_ok = split_valid(&cp, &p);
        assert_true(gen_requires_met(&spec.requires, &p));
        assert_true(tc_check(t, &c, &p, NULL, 0) == (!spec.requires.repack && split_ok));
        taken += split_ok;
      }
      for (int j = 0; j < COUNT(k_odd_shapes); j++) {
        const gen_problem p =
            shape_problem(&k_odd_shapes[j], k_pairs[q].dtype, k_pairs[q].layout);
        const bool split_ok = split_valid(&cp, &p);
        assert_true(gen_requires_met(&spec.requires, &p) == spec.requires.repack);
        if (spec.requires.repack) assert_true(tc_check(t, &c, &p, NULL, 0) == split_ok);
        taken += split_ok && spec.requires.repack;
      }
      if (cp.cluster > 1)
        cluster_taken += taken;
      else
        assert_true(taken >= 2);
      gen_kernel_clear(&spec);
    }
    assert_true(cluster_taken >= 2 || !strstr(k_gpu_configs[i], "cluster=2"));
  }
  for (int i = 0; i < COUNT(k_gpu_rs); i++) { /* the same, in tf32 and its layout */
    gen_config c;
    tc_parse_ok(t, k_gpu_rs[i].config, &c);
    const cfg cp = cfg_of(&c);
    assert_true(rs_fits(&cp));
    int taken = 0;
    for (int j = 0; j < COUNT(k_shapes); j++) {
      const gen_problem p = shape_problem(&k_shapes[j], "tf32", k_gpu_rs[i].layout);
      const bool split_ok = split_valid(&cp, &p);
      assert_true(tc_check(t, &c, &p, NULL, 0) == (!cp.repack && split_ok));
      taken += split_ok;
    }
    for (int j = 0; j < COUNT(k_odd_shapes) && cp.repack; j++) {
      const gen_problem p = shape_problem(&k_odd_shapes[j], "tf32", k_gpu_rs[i].layout);
      assert_true(tc_check(t, &c, &p, NULL, 0) == split_valid(&cp, &p));
    }
    assert_true(taken >= 2);
  }
  gen_free(t);
}

/* Emits config (text) of t for dtype and layout, compiles it for d and loads it. */
static void load_config(const rt_device *d, gen_template *t, const char *config,
                        const char *dtype, const char *layout, gen_config *c, gen_kernel *spec,
                        rt_cubin *cubin, rt_kernel *k) {
  char arch[16];
  ut_err e;
  tc_parse_ok(t, config, c);
  assert_true(tc_check(t, c, NULL, NULL, 0));
  assert_int_equal(gen_emit(t, c, dtype, layout, spec, &e), MMT_OK);
  assert_int_equal(rt_kernel_arch(d->arch, spec->arch, arch, &e), MMT_OK);
  assert_int_equal(rt_compile(spec->source, spec->kernel_name, arch, cubin, NULL, &e), MMT_OK);
  mmt_status rc = rt_kernel_load(d, cubin, spec, k, &e);
  if (rc) fprintf(stderr, "%s: %s\n", spec->kernel_name, e.msg);
  assert_int_equal(rc, MMT_OK);
}

/* One GPU test run: a config (k_gpu_configs[index], or k_gpu_rs's) in a dtype and layout,
 * compiled ahead; big: the big shapes too. */
typedef struct {
  const char *config;
  bool big;
  const char *dtype, *layout;
  gen_config c;
  char arch[16]; /* compiled for */
} gpu_run;

static void run_config(const rt_device *d, const rt_cu *cu, const gpu_run *r,
                       const gen_kernel *spec, const rt_cubin *cubin) {
  rt_kernel k;
  ut_err e;
  mmt_status rc = rt_kernel_load(d, cubin, spec, &k, &e);
  if (rc) fprintf(stderr, "%s: %s\n", spec->kernel_name, e.msg);
  assert_int_equal(rc, MMT_OK);
  print_message("%s: %d registers, %d bytes local\n", spec->kernel_name, k.regs, k.local_bytes);
  assert_int_equal(k.local_bytes, 0); /* no spills */
  const char *dtype = r->dtype, *layout = r->layout;
  const double tol = strcmp(dtype, "f16") == 0 ? 1e-3 : strcmp(dtype, "bf16") == 0 ? 8e-3 : 1e-5;
  /* split-K kernels run each shape twice in a row: the arrival counters must be left at 0,
   * and the second run gives the same bits */
  const bool split = r->c.v[P_SPLIT] > 1;
  const int runs = split ? 2 : 1;
  for (int j = 0; j < COUNT(k_shapes); j++)
    if (!k_shapes[j].big || r->big || split)
      check_shape(cu, &k, spec->kernel_name, dtype, layout, &k_shapes[j], runs, tol);
  if (spec->requires.repack) /* and on problems that need the copies */
    for (int j = 0; j < COUNT(k_odd_shapes); j++)
      check_shape(cu, &k, spec->kernel_name, dtype, layout, &k_odd_shapes[j], runs, tol);
  rt_kernel_unload(&k);
}

/* Opens device 0 and returns the driver, or skips the test without a GPU or on one other
 * than sm_90. */
static const rt_cu *open_sm90_or_skip(rt_device *d) {
  const rt_cu *cu = tc_open_gpu_or_skip(d);
  if (d->info.cc_major != 9 || d->info.cc_minor != 0) {
    print_message("wgmma needs sm_90a (compute capability 9.0); device is %s\n", d->arch);
    rt_device_close(d);
    skip();
  }
  return cu;
}

static void test_gpu_results(void **state) {
  (void)state;
  rt_device d;
  const rt_cu *cu = open_sm90_or_skip(&d);
  gen_template *t = load_wgmma();
  enum { MAX = COUNT(k_gpu_configs) * (COUNT(k_layouts) + 1) + COUNT(k_gpu_rs) };
  gpu_run *runs = calloc(MAX, sizeof *runs);
  gen_kernel *specs = calloc(MAX, sizeof *specs);
  rt_cubin *cubins = calloc(MAX, sizeof *cubins);
  const char *archs[MAX];
  assert_true(runs && specs && cubins);
  int n = 0;
  for (int i = 0; i < COUNT(k_gpu_configs); i++) {
    /* f16 and bf16 alternate over the layouts; every layout with MMTUNE_LONG_TESTS=1, else
     * one in turn, and tf32 for every other config */
    for (int l = 0; l < COUNT(k_layouts); l++)
      if (tc_long_tests() || l == i % COUNT(k_layouts))
        runs[n++] = (gpu_run){.config = k_gpu_configs[i], .big = i < 2,
                              .dtype = (i + l) % 2 ? "bf16" : "f16", .layout = k_layouts[l]};
    if (tc_long_tests() || i % 2 == 0)
      runs[n++] = (gpu_run){.config = k_gpu_configs[i], .big = i < 2, .dtype = "tf32",
                            .layout = "nt"};
  }
  for (int i = 0; i < COUNT(k_gpu_rs); i++)
    runs[n++] = (gpu_run){.config = k_gpu_rs[i].config, .big = i == 0, .dtype = "tf32",
                          .layout = k_gpu_rs[i].layout};
  for (int i = 0; i < n; i++) {
    gpu_run *r = &runs[i];
    ut_err e;
    tc_parse_ok(t, r->config, &r->c);
    assert_true(tc_check(t, &r->c, NULL, NULL, 0));
    tc_emit_ok(t, &r->c, r->dtype, r->layout, &specs[i]);
    assert_int_equal(rt_kernel_arch(d.arch, specs[i].arch, r->arch, &e), MMT_OK);
    archs[i] = r->arch;
  }
  tc_compile_all(specs, archs, n, cubins);
  for (int i = 0; i < n; i++) {
    run_config(&d, cu, &runs[i], &specs[i], &cubins[i]);
    rt_cubin_free(&cubins[i]);
    gen_kernel_clear(&specs[i]);
  }
  free(runs);
  free(specs);
  free(cubins);
  gen_free(t);
  rt_device_close(&d);
}

/* One config of wgmma loaded on device 0 (the test skipped where there is none). */
typedef struct {
  rt_device d;
  const rt_cu *cu;
  gen_template *t;
  gen_config c;
  gen_kernel spec;
  rt_cubin cubin;
  rt_kernel k;
} loaded_kernel;

static void load_one(loaded_kernel *l, const char *config, const char *dtype,
                     const char *layout) {
  l->cu = open_sm90_or_skip(&l->d);
  l->t = load_wgmma();
  load_config(&l->d, l->t, config, dtype, layout, &l->c, &l->spec, &l->cubin, &l->k);
}

static void unload_one(loaded_kernel *l) {
  rt_kernel_unload(&l->k);
  rt_cubin_free(&l->cubin);
  gen_kernel_clear(&l->spec);
  gen_free(l->t);
  rt_device_close(&l->d);
}

/* Device memory free now, after the device has finished all work. */
static size_t free_memory(const rt_cu *cu) {
  size_t free_bytes = 0, total = 0;
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemGetInfo(&free_bytes, &total), CUDA_SUCCESS);
  return free_bytes;
}

/* A repack kernel's scratch stays reserved between calls (the dispatcher's per-call path
 * allocates nothing once warm): the first unaligned call takes device memory for the
 * copies, the next one of the same size takes none, across synchronizations.  The call also
 * runs from a CUDA graph.  C = A B over ones is K everywhere (exact in f16 for K <= 2048). */
static void test_gpu_repack_scratch_kept(void **state) {
  (void)state;
  loaded_kernel l;
  load_one(&l, "bm=128,bn=128,stages=4,consumers=2,repack=1", "f16", "nn");
  const rt_cu *cu = l.cu;
  const rt_kernel *k = &l.k;
  ut_err e;
  const int64_t n = 1537, ld = n + 1; /* rows of 3074 bytes, bases 2 bytes past 16 */
  const size_t elems = (size_t)(n * ld) + 2, bytes = elems * 2;
  CUdeviceptr a = 0, b = 0, cc = 0;
  assert_int_equal(cu->cuMemAlloc(&a, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&b, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemAlloc(&cc, bytes), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemsetD32(a, 0x3c003c00u, bytes / 4), CUDA_SUCCESS); /* f16 1.0 */
  assert_int_equal(cu->cuMemsetD32(b, 0x3c003c00u, bytes / 4), CUDA_SUCCESS);
  const rt_gemm_args odd = {.m = n, .n = n, .k = n, .alpha = 1, .beta = 0, .a = a + 2,
                            .b = b + 2, .c = cc + 2, .lda = ld, .ldb = ld, .ldc = ld};
  rt_gemm_args aligned = odd; /* runs in place: loads the module's code before the count */
  aligned.a = a, aligned.b = b, aligned.c = cc, aligned.lda = aligned.ldb = aligned.ldc = 1544;
  aligned.m = aligned.n = aligned.k = 64;
  assert_int_equal(rt_kernel_launch(k, &aligned, NULL, &e), MMT_OK);
  const size_t before = free_memory(cu);
  assert_int_equal(rt_kernel_launch(k, &odd, NULL, &e), MMT_OK);
  const size_t after_first = free_memory(cu);
  assert_int_equal(rt_kernel_launch(k, &odd, NULL, &e), MMT_OK);
  const size_t after_second = free_memory(cu);
  print_message("free device memory: %zu, after a repack call %zu, after another %zu\n",
                before, after_first, after_second);
  assert_true(before - after_first >= 2 * (size_t)(n * n) * 2); /* A and B copies at least */
  assert_true(after_second == after_first);
  /* The same call captured into a CUDA graph (the scratch becomes the graph's own allocation)
   * and replayed twice into a poisoned C. */
  CUstream st = NULL;
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  assert_int_equal(cu->cuStreamCreate(&st, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
  assert_int_equal(cu->cuMemsetD32(cc, 0x7e007e00u, bytes / 4), CUDA_SUCCESS); /* f16 NaN */
  assert_int_equal(cu->cuCtxSynchronize(), CUDA_SUCCESS); /* st is not ordered after it */
  assert_int_equal(cu->cuStreamBeginCapture(st, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                   CUDA_SUCCESS);
  assert_int_equal(rt_kernel_launch(k, &odd, st, &e), MMT_OK);
  assert_int_equal(cu->cuStreamEndCapture(st, &graph), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphInstantiate(&exec, graph, 0), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphLaunch(exec, st), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphLaunch(exec, st), CUDA_SUCCESS);
  assert_int_equal(cu->cuStreamSynchronize(st), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphExecDestroy(exec), CUDA_SUCCESS);
  assert_int_equal(cu->cuGraphDestroy(graph), CUDA_SUCCESS);
  assert_int_equal(cu->cuStreamDestroy(st), CUDA_SUCCESS);
  unsigned short *host = malloc(bytes);
  assert_non_null(host);
  assert_int_equal(cu->cuMemcpyDtoH(host, cc, bytes), CUDA_SUCCESS);
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++)
      if (th_f16_to_f32(host[1 + i * ld + j]) != (float)n)
        fail_msg("C[%lld][%lld] = %g, want %lld", (long long)i, (long long)j,
                 th_f16_to_f32(host[1 + i * ld + j]), (long long)n);
  free(host);
  cu->cuMemFree(a), cu->cuMemFree(b), cu->cuMemFree(cc);
  unload_one(&l);
}

/* Back-to-back launches that may start early (dependent_launch) on a chain of dependent
 * products (tests/dep_chain.h); 16 blocks a launch leave most multiprocessors free for the
 * next launch to start on. */
static void test_gpu_dependent_chain(void **state) {
  (void)state;
  loaded_kernel l;
  load_one(&l, "bm=128,bn=128,stages=4,consumers=2", "f16", "nn");
  assert_true(l.k.dependent_launch);
  dc_dependent_chain(l.cu, &l.k);
  unload_one(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_declaration),   cmocka_unit_test(test_space_count),
      cmocka_unit_test(test_default),       cmocka_unit_test(test_constraints),
      cmocka_unit_test(test_tf32_layouts),  cmocka_unit_test(test_emit_all),
      cmocka_unit_test(test_shared_lines),  cmocka_unit_test(test_nvrtc_default),
      cmocka_unit_test(test_nvrtc_sample),  cmocka_unit_test(test_gpu_configs),
      cmocka_unit_test(test_gpu_results),   cmocka_unit_test(test_gpu_repack_scratch_kept),
      cmocka_unit_test(test_gpu_dependent_chain),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
