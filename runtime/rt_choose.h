/*
 * rt_choose.h -- which kernel a GEMM problem gets: the dispatcher's choice logic.  Prefix rt_.  Needs no GPU and no driver (CI tests it).
 *
 * Given the results database (may be NULL), a GPU model name and a problem, rt_choose() picks:
 *   1. EXACT:     the ok rows of exactly this (device name, dtype, layout, m, n, k), fastest
 *                 first; the first row that is usable for the problem (see below).
 *   2. PREDICTED / DEFAULT: the candidates ranked by the performance model (rt_model.h),
 *                 lowest predicted time first; the first usable one.  The candidates
 *                 (rt_rank) are every config of this GPU model and dtype the database has
 *                 verified (on any shape, in any layout), each template's default config
 *                 (RT_DEFAULTS) and the architecture's built-in list (RT_BUILTIN).  The kind is
 *                 PREDICTED when the winner has rows of its own (its record is the row
 *                 nearest the problem), DEFAULT when it was never measured on this GPU model.
 *   None usable -> MMT_ERR_UNSUPPORTED, the message saying why each default was refused.
 *   A problem with an op (gen_problem.op: mmt_matmul's epilogues) finds EXACT rows of that op
 *   and batch (the database keys rows by them, db.h); without one, the model ranks the
 *   candidates whose template has epilogues and whose constraints take the op and batch: it is
 *   fitted on the rows of plain GEMMs and of ops (any, less their epilogues' term), its
 *   analytic time counting the batch's work and D's type, and the op's epilogue added.
 *   A tf32 problem is also chosen as f32 (tf32 only permits tensor-core rounding; fp32
 *   kernels answer it more precisely): the f32 choice serves it where no tf32 kernel does,
 *   or where that choice's template computes tf32 too (skinny: the same kernel in both) and
 *   it is expected faster than a tf32 choice that is not EXACT (its row's time, or the
 *   model's, against the model's).
 * A row or candidate is usable when: its template loads; for rows, the template still emits
 * the kernel the row measured (rt_provenance.h: its kernel_hash, or for a row from before
 * kernel hashes its template_hash), and for the model's configs, their rows did; the
 * template supports the dtype; the params parse; the template's constraints
 * pass for THIS problem; the device can run the kernel's arch; the emitted kernel's
 * requirements are met (gen_requires_met: multiples, alignment, leading dimensions); and its
 * grid for the problem is within the hardware limits and not empty.
 *
 * The chooser keeps the model it fitted for a GPU model and fits again when the database's
 * rows change (db_data_version), so a choice costs one pass over the rows of the dtype, a sort and
 * an emit or two.
 *
 * Thread-safety: an rt_chooser (it caches loaded templates and the model) is used by one
 * thread at a time.
 */
#ifndef MMT_RT_CHOOSE_H
#define MMT_RT_CHOOSE_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "gen.h"
#include "rt_model.h"
#include "util.h"

/* Every template's default config ("name=value,..." over the template's default; NULL: the
 * default), candidates on every architecture.  wgmma (sm_90a, TMA: 16-byte aligned rows)
 * serves f16/bf16 and tf32 on Hopper; mma_sync (tensor cores, sm_80+) f16/bf16 elsewhere, its
 * realigned-copy variant (vec=0) the problems whose rows are not 16-byte aligned; reg_tiled
 * f32 (vec=1: any alignment); smem_tiled and naive serve f32 where nothing else is valid
 * (their priors rank them last).
 *
 * An entry ending in 1 (RT_OFFER_UNALIGNED, here and in RT_BUILTIN) is for problems
 * whose rows are not 16-byte aligned only: mma_sync's realigned copy (vec=0), reg_tiled's
 * scalar loads (vec=1), skinny's element loads (vec=0).  Never measured on the GPU model,
 * such a config is no candidate for an aligned problem: the model does not see load widths,
 * and ranked these variants above the aligned ones of their templates (on an empty database,
 * f32 nn of bench/unseen_shapes.txt served reg_tiled vec=1 on aligned shapes at 0.58-0.70x
 * cuBLAS, skinny vec=0 at 0.25x).  Once measured, it is a candidate like any other row. */
#define RT_DEFAULTS                                                                         \
  {{"wgmma", NULL, 0},                                                                      \
   {"mma_sync", NULL, 0},                                                                   \
   {"mma_sync", "bm=64,bn=64,wm=32,wn=32,stages=5,vec=0,group=1", 1},                       \
   {"reg_tiled", NULL, 0},                                                                  \
   {"reg_tiled", "bm=64,bn=64,bk=16,tm=8,tn=4,vec=1,stages=2,pad=4", 1},                    \
   {"smem_tiled", NULL, 0},                                                                 \
   {"naive", NULL, 0}}

/* The built-in list: configs that measured well across shapes on an architecture (sm_90: the
 * H100 databases of docs/history/performance-model.md), candidates for it even on an empty
 * database: large and small tiles, wgmma's 128 x 128 ping-pong (persist=2: an op's epilogue
 * under the other consumer's main loop, where each SM has two tiles or more; untuned, only
 * gated ops at 3-4 tiles an SM pick it, but it starts every search), split-K for few tiles and
 * long K (wgmma's 128 x 64 split 4 with 8 stages: 2-9%
 * faster than 6 on 11 of 12 few-tile problems from 384x640x12288 to 640x256x20000, H100),
 * wgmma's 64 x 64 tiles two blocks an SM, and the same persistent for batches of many rounds
 * of small tiles, which a search then starts from (the model ties them with 128 x 128
 * persistent there; H100, f16 attention batches: Q K^T x512 seq 128 d 64 0.0177 ms against
 * 0.0208 and 0.0228 not persistent, P V x128 seq 512 d 64 0.0329 against 0.0367 and 0.0341;
 * in one round the persistent walk costs 2-15%: 96 x 4096 x 4096 bias + GELU 0.0253 against
 * 0.0228), wgmma's swapped 64 x 32 tiles in four slices with 8 stages beside the two-slice
 * one, for 8-128 rows of a weight at most 1024 wide, where the two-slice grid leaves most SMs
 * idle (H100, no database, alternated runs: 64 x 1024 x 8192 bias + GELU 0.0182 -> 0.0147
 * ms; of the 42 calls whose pick it changed, from the two-slice tile or from skinny_mma's
 * 8-row blocks, 32 ran faster, up to 1.27x, and 10 slower, 0.84-0.96x, where those blocks
 * had served 24-48 rows of a weight at most 4096 deep; docs/history/split-k.md), blocks of 16
 * and 32 rows for decode-size
 * batches (mma_sync, skinny_mma and wgmma's swap: tensor cores where skinny computes on the
 * CUDA cores; skinny_mma's 8-row blocks with one 16-row tile of W a warp: two a warp ran
 * 1.2-1.6x slower on every 1-16 row bf16 and f16 problem of docs/data's H100 databases, and
 * read FP8 weights at 70-74% of a plain read's speed where one read at 89-92%), wgmma's
 * swap in large tiles, persistent and repacked (tf32 in layout nn, which its tensor cores
 * serve only so: the other problems refuse such swap configs), skinny's GEMVs
 * with W L-contiguous in blocks of 16 warps that split K among them (the axpy body's fastest
 * for 1 x 4096, three parameters away from the split-K configs a search polishes), the dot
 * body's fastest at batch 1 (layout nt, and every GEMV with A as is: Mx1xK in its canonical
 * form too) in f32 (8 warps, 8 slices of K, unroll 8) and in 16 bits (4 warps, 4 slices, unroll
 * 4: 5-11% faster than the default from 4096 to 14336 wide; three parameters away), and each of
 * these for rows that are not 16-byte aligned (mma_sync vec=0, wgmma repack=1, reg_tiled
 * vec=1), which a suite of aligned shapes never tunes; for 16-bit rows that are 4- or 8-byte
 * aligned, mma_sync's 4-byte loads (vec=2) in the tiles that an anneal search of them found
 * fastest (H100: 128 x 128 at 1202^3 and 64 x 128 with bk=32 at 2002x3002x258, 1.0-2.3x
 * cuBLAS where the repacked wgmma ran 0.63-1.6x; 64 x 64 split 4 at 402x698x3000, the few-tile
 * end; and the 4-byte twin of the split-16 entry above); for batch 1 on a weight whose rows
 * are odd, skinny's element loads in the blocks an anneal search found fastest (H100, f16: the
 * axpy body at 1x8193x4095 nn, 16 warps, 0.0331 ms; the dot body at 1x4095x8193 nt, 4 rows a
 * warp, 0.0304 ms; wgmma repacking the weight ran 0.3x cuBLAS there); and for FP8 ops that
 * allow fast accumulation, wgmma's 128 x 256 without promotion, persistent and not (H100, e4m3
 * -> bf16 per tensor: 4096^3 0.1026 ms persistent against 0.1127 not and 0.1184 promoting,
 * 2048 x 14336 x 4096 0.1914 against 0.2054 and 0.2066; 8192^3 0.8694 against 0.8632 and
 * 0.9172; the main job's tune measured the one not persistent fastest at 4096 x 8192 x 8192,
 * 0.3685 ms against 0.4072 for the best promoting) and its ping-pong 128 x 128 (1,339
 * TFLOP/s against 1,288 at 128 x 256 cooperative, 8192^3, once its tensor scales stopped
 * spilling); for the promoting ones the two 128 x 256
 * entries above (their partial sums half the columns at a time: 1,148-1,155 TFLOP/s at
 * 4096^3 e4m3 -> bf16 per tensor against 1,079-1,082 for 128 x 192 persistent, 936-952
 * against 797-853 for 128 x 128 with block scales, H100) and (RT_OFFER_FP8: the 16-bit types
 * have 128 x 256) 128 x 192, the largest tile whose partial sums fit whole (H100, e4m3 ->
 * bf16 per tensor: 8192^3 1,185-1,240 TFLOP/s against 1,177-1,195 by halves and 1,007 at
 * 128 x 128, 4096 x 7168 x 16384 1,178-1,219 against 1,051).  skinny_mma's 16- and 32-row
 * blocks of X are no candidates where wgmma serves (RT_OFFER_NO_WGMMA: Hopper, aligned rows,
 * not grouped; the 16-row one stays for 16-bit gated ops, RT_OFFER_NO_SWAP: 0.0874 ms against
 * wgmma's 64 x 64 0.0966 at 16 x 28672 x 4096, even at 24 rows), nor those of W for FP8
 * (RT_OFFER_NO_FP8_SWAP): unmeasured, the model ranked them first at 12-64 rows, and wgmma's
 * tiles ran faster on every such problem measured (H100, cold, no database, against the tree
 * before): FP8 decode, the swapped tiles on six problems of 16-64 rows 1.08-2.6x (e4m3 -> bf16
 * per tensor: 32 x 14336 x 4096 0.0254 ms against 0.0532; the main job's FP8 tune picked them
 * at 16 rows too); f16 bias + GELU at 16-64 rows of seven 8B and 70B weights 0.77-0.79x ->
 * 0.98-0.99x cuBLASLt geomean, two runs (64 x 14336 x 4096 0.0907 -> 0.0496 ms; worst, the 70B
 * gate weight at 16-32 rows, 0.91-0.93x -> 0.79-0.88x); the gated up projections there, wgmma's
 * 64 x 64, 0.85x -> 0.99x (64 x 57344 x 8192: skinny_mma's 32-row blocks in 4 slices 0.6289 ms,
 * 64 x 64 0.3116).  The 16-bit mirrored problems (N of 16-32) keep skinny_mma's blocks of W:
 * swapped tiles ran 0.83-0.97x as fast there on four of six.  min_cc: the compute capability
 * they are for (and newer). */
#define RT_BUILTIN                                                                                 \
  {                                                                                                \
    {9, "wgmma", "bm=128,bn=256,stages=4,consumers=2,blocks=1,group=16,persist=1", 0},             \
        {9, "wgmma", "bm=128,bn=256,stages=4,consumers=2,blocks=1,group=8", 0},                    \
        {9, "wgmma", "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,persist=1", 0},          \
        {9, "wgmma", "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,persist=2", 0},          \
        {9, "wgmma", "bm=128,bn=64,stages=6,consumers=2,blocks=1,group=8", 0},                     \
        {9, "wgmma", "bm=64,bn=64,stages=6,consumers=1,blocks=2,group=1", 0},                      \
        {9, "wgmma", "bm=64,bn=64,stages=6,consumers=1,blocks=2,group=1,persist=1", 0},            \
        {9, "wgmma", "bm=64,bn=128,stages=4,consumers=1,blocks=2,group=8,repack=1,persist=1", 0},  \
        {9, "wgmma", "bm=128,bn=64,stages=8,consumers=2,blocks=1,group=1,split=4", 0},             \
        {9, "wgmma", "bm=64,bn=64,stages=6,consumers=1,blocks=2,group=8,split=2", 0},              \
        {9, "wgmma", "bm=64,bn=32,stages=6,consumers=1,blocks=2,group=1,split=2,swap=1", 0},       \
        {9, "wgmma", "bm=64,bn=32,stages=8,consumers=1,blocks=2,group=1,split=4,swap=1", 0},       \
        {9, "wgmma", "bm=128,bn=32,stages=6,consumers=2,blocks=1,group=1,swap=1", 0},              \
        {9, "wgmma", "bm=64,bn=32,stages=12,consumers=1,blocks=1,group=1,swap=1", 0},              \
        {9, "wgmma", "bm=64,bn=16,stages=16,consumers=1,blocks=1,group=1,swap=1", 0},              \
        {9, "wgmma", "bm=128,bn=192,stages=4,consumers=2,blocks=1,group=8,persist=1,swap=1", 0},   \
        {9, "wgmma", "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,swap=1", 0},             \
        {9, "wgmma", "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=1,split=4,swap=1", 0},     \
        {9, "wgmma", "bm=128,bn=128,stages=5,consumers=2,blocks=1,group=8,repack=1,swap=1", 0},    \
        {9, "wgmma", "bm=128,bn=256,stages=4,consumers=2,blocks=1,group=8,promote=0", 0},          \
        {9, "wgmma", "bm=128,bn=256,stages=4,consumers=2,blocks=1,group=16,persist=1,promote=0",   \
         0},                                                                                       \
        {9, "wgmma", "bm=128,bn=128,stages=5,consumers=2,group=8,persist=2,promote=0", 0},         \
        {9, "wgmma", "bm=128,bn=192,stages=5,consumers=2,blocks=1,group=16", RT_OFFER_FP8},        \
        {8, "mma_sync", "bm=64,bn=64,bk=64,wm=32,wn=32,stages=5,vec=8,swz=1,group=8", 0},          \
        {8, "mma_sync", "bm=128,bn=128,bk=32,wm=64,wn=64,stages=4,vec=8,swz=1,group=8", 0},        \
        {8, "mma_sync", "bm=64,bn=64,bk=64,wm=32,wn=32,stages=3,vec=8,swz=1,group=1,split=16", 0}, \
        {8, "mma_sync", "bm=64,bn=64,wm=32,wn=32,stages=3,vec=0,swz=1,group=1,split=4", 1},        \
        {8, "mma_sync", "bm=64,bn=64,wm=32,wn=32,stages=3,vec=0,swz=1,group=1,split=16", 1},       \
        {8, "mma_sync", "bm=128,bn=128,bk=64,wm=64,wn=32,stages=3,vec=2,swz=1,group=1", 1},        \
        {8, "mma_sync", "bm=64,bn=128,bk=32,wm=64,wn=32,stages=4,vec=2,swz=0,group=1", 1},         \
        {8, "mma_sync", "bm=64,bn=64,bk=64,wm=32,wn=32,stages=2,vec=2,swz=1,group=1,split=4", 1},  \
        {8, "mma_sync", "bm=64,bn=64,bk=64,wm=32,wn=32,stages=3,vec=2,swz=1,group=1,split=16", 1}, \
        {8, "mma_sync", "bm=16,bn=64,bk=64,wm=16,wn=32,stages=3,vec=8,swz=1,group=1,split=4", 0},  \
        {8, "mma_sync", "bm=16,bn=128,bk=64,wm=16,wn=32,stages=4,vec=8,swz=1,group=1", 0},         \
        {8, "mma_sync", "bm=32,bn=64,bk=64,wm=32,wn=32,stages=3,vec=8,swz=1,group=1,split=4", 0},  \
        {8, "mma_sync", "bm=32,bn=128,bk=64,wm=32,wn=32,stages=4,vec=8,swz=1,group=1", 0},         \
        {0, "reg_tiled", "bm=128,bn=128,bk=8,tm=16,tn=8,vec=4,stages=2,pad=4,group=8", 0},         \
        {0, "reg_tiled", "bm=64,bn=128,bk=8,tm=8,tn=8,vec=4,stages=2,pad=4", 0},                   \
        {0, "reg_tiled", "bm=64,bn=128,bk=8,tm=8,tn=8,vec=4,stages=2,pad=4,group=1,split=2", 0},   \
        {0, "reg_tiled", "bm=32,bn=128,bk=32,tm=8,tn=4,vec=4,stages=3,pad=4,group=1,split=4", 0},  \
        {0, "reg_tiled", "bm=32,bn=128,bk=16,tm=8,tn=4,vec=4,stages=3,pad=4,group=1,split=16", 0}, \
        {0, "reg_tiled", "bm=64,bn=32,bk=16,tm=4,tn=4,vec=4,stages=3,pad=4,group=1,split=4", 0},   \
        {0, "reg_tiled", "bm=128,bn=32,bk=16,tm=4,tn=8,vec=1,stages=2,pad=4", 1},                  \
        {0, "reg_tiled", "bm=128,bn=128,bk=8,tm=16,tn=8,vec=1,stages=2,pad=4,group=8", 1},         \
        {0, "reg_tiled", "bm=64,bn=128,bk=8,tm=8,tn=8,vec=1,stages=2,pad=4,group=1", 1},           \
        {0, "reg_tiled", "bm=64,bn=64,bk=16,tm=4,tn=8,vec=1,stages=2,pad=4,group=1", 1},           \
        {0, "reg_tiled", "bm=64,bn=64,bk=16,tm=4,tn=4,vec=1,stages=2,pad=4,group=1,split=2", 1},   \
        {0, "reg_tiled", "bm=32,bn=128,bk=16,tm=8,tn=4,vec=1,stages=3,pad=4,group=1,split=4", 1},  \
        {0, "reg_tiled", "bm=32,bn=64,bk=16,tm=4,tn=4,vec=1,stages=3,pad=4,group=1,split=16", 1},  \
        {0, "skinny", "side=0,bs=1,rl=2,warps=4,kw=1,unroll=2,vec=1", 0},                          \
        {0, "skinny", "side=0,bs=2,rl=2,warps=8,kw=2,unroll=2,vec=1", 0},                          \
        {0, "skinny", "side=0,bs=4,rl=2,warps=8,kw=1,unroll=2,vec=1", 0},                          \
        {0, "skinny", "side=0,bs=8,rl=1,warps=4,kw=1,unroll=2,vec=1", 0},                          \
        {0, "skinny", "side=0,bs=16,rl=1,warps=4,kw=1,unroll=2,vec=1", 0},                         \
        {0, "skinny", "side=0,bs=4,rl=1,warps=8,kw=4,unroll=2,vec=0", 1},                          \
        {0, "skinny", "side=0,bs=1,rl=1,lanes=8,warps=16,kw=16,unroll=2,vec=0", 1},                \
        {0, "skinny", "side=0,bs=1,rl=4,warps=8,kw=4,unroll=2,vec=0", 1},                          \
        {0, "skinny", "side=1,bs=1,rl=2,warps=4,kw=1,unroll=2,vec=1", 0},                          \
        {0, "skinny", "side=1,bs=2,rl=2,warps=8,kw=2,unroll=2,vec=1", 0},                          \
        {0, "skinny", "side=1,bs=4,rl=2,warps=8,kw=1,unroll=2,vec=1", 0},                          \
        {0, "skinny", "side=1,bs=8,rl=1,warps=4,kw=1,unroll=2,vec=1", 0},                          \
        {0, "skinny", "side=1,bs=16,rl=1,warps=4,kw=1,unroll=2,vec=1", 0},                         \
        {0, "skinny", "side=0,bs=1,rl=1,warps=4,kw=1,unroll=4,vec=1,split=16", 0},                 \
        {0, "skinny", "side=0,bs=4,rl=1,warps=4,kw=1,unroll=2,vec=1,split=4", 0},                  \
        {0, "skinny", "side=1,bs=1,rl=1,warps=4,kw=1,unroll=4,vec=1,split=16", 0},                 \
        {0, "skinny", "side=1,bs=4,rl=1,warps=4,kw=1,unroll=2,vec=1,split=4", 0},                  \
        {0, "skinny", "side=0,bs=1,rl=1,warps=4,kw=1,unroll=4,vec=1,split=64", 0},                 \
        {0, "skinny", "side=1,bs=1,rl=1,warps=4,kw=1,unroll=4,vec=1,split=64", 0},                 \
        {0, "skinny", "side=0,bs=1,rl=1,lanes=8,warps=16,kw=16,unroll=8,vec=1", 0},                \
        {0, "skinny", "side=1,bs=1,rl=1,lanes=8,warps=16,kw=16,unroll=4,vec=1", 0},                \
        {0, "skinny", "side=0,bs=1,rl=1,warps=8,kw=8,unroll=8,vec=1", 0},                          \
        {0, "skinny", "side=0,bs=1,rl=1,warps=4,kw=4,unroll=4,vec=1", 0},                          \
        {0, "skinny", "side=1,bs=4,rl=1,warps=8,kw=4,unroll=2,vec=0", 1},                          \
        {0, "skinny", "side=1,bs=1,rl=2,warps=8,kw=2,unroll=2,vec=0", 1},                          \
        {8, "skinny_mma", "side=0,bs=8,rl=1,warps=8,kw=8,unroll=2", 0},                            \
        {8, "skinny_mma", "side=0,bs=16,rl=1,warps=8,kw=8,unroll=4", RT_OFFER_NO_SWAP},            \
        {8, "skinny_mma", "side=0,bs=32,rl=1,warps=8,kw=8,unroll=4", RT_OFFER_NO_WGMMA},           \
        {8, "skinny_mma", "side=0,bs=32,rl=2,warps=8,kw=4,unroll=2,split=4", RT_OFFER_NO_WGMMA},   \
        {8, "skinny_mma", "side=1,bs=8,rl=1,warps=8,kw=8,unroll=2", 0},                            \
        {8, "skinny_mma", "side=1,bs=16,rl=1,warps=8,kw=8,unroll=4", RT_OFFER_NO_FP8_SWAP}, {      \
      8, "skinny_mma", "side=1,bs=32,rl=1,warps=8,kw=8,unroll=4", RT_OFFER_NO_FP8_SWAP             \
    }                                                                                              \
  }

/* The model's correction (rt_model.h) for a template with no rows on the GPU model: ln of
 * how much slower than the analytic part its configs ran, the median over the rows of an
 * H100 main job (2026-11-25: wgmma 0.11-0.18, mma_sync 0.60-1.00, reg_tiled 0.64).
 * smem_tiled and naive are set above anything measured so that they come last, where nothing
 * else is valid.  A template not listed gets RT_MODEL_UNKNOWN. */
#define RT_PRIORS                                                                           \
  {{"wgmma", 0.15}, {"mma_sync", 0.8}, {"reg_tiled", 0.65}, {"skinny", 0.0},              \
   {"skinny_mma", 0.0}, {"smem_tiled", 2.5}, {"naive", 3.0}}

/* A chooser: caches every template it loaded (and every load that failed) by name, so a
 * choice runs no Lua file load after the first. */
typedef struct rt_chooser rt_chooser;

/* Creates an empty chooser for a device of device_arch ("sm_90"): kernels it cannot run (an
 * sm_90a kernel elsewhere: rt_kernel_arch) are refused.  NULL or "": any architecture (e.g.
 * `mmtune explain --device-name`, answered from the database alone; the built-in list is then
 * sm_90's).  sm_count: the device's multiprocessors (0: unknown, the rows' count).
 * Errors: MMT_ERR_NOMEM. */
mmt_status rt_chooser_new(const char *device_arch, int sm_count, rt_chooser **out, ut_err *err);
/* Frees the chooser and its templates.  rt_chooser_free(NULL) is a no-op. */
void rt_chooser_free(rt_chooser *ch);

_Static_assert(MMT_PARAMS_MAX == DB_PARAMS_MAX, "a choice's params are its row's (db.h)");
/* A choice.  Zero-initialize before rt_choose; free with rt_choice_clear. */
typedef struct {
  mmt_choice_kind kind;
  char template_name[GEN_NAME_MAX];
  char params[MMT_PARAMS_MAX]; /* canonical "name=value,..." (gen_config_format) */
  bool has_record;   /* false for DEFAULT */
  db_result record;  /* the measured row the choice relies on, when has_record */
  double predicted_ms; /* PREDICTED, DEFAULT: the model's time (0 when there was no model) */
  int model_rows;      /* PREDICTED: rows of the config the prediction used */
  gen_template *tmpl; /* borrowed from the chooser: valid until rt_chooser_free */
  gen_config cfg;
  gen_kernel spec;    /* owned: the emitted kernel for the problem's dtype, ready to compile */
} rt_choice;

/*
 * Chooses a kernel for problem p on GPU model device_name (db_device.name), by the rules at
 * the top of this file.  db may be NULL (no tuning data: DEFAULT).  out must be zeroed (or
 * cleared); it is filled only on success.
 * Errors: MMT_ERR_UNSUPPORTED (nothing usable; the message says why), MMT_ERR_DB (a query
 * failed), MMT_ERR_INVALID_ARG (dtype/layout text too long for the database), MMT_ERR_NOMEM.
 * Broken templates and rows are skipped, not errors.
 */
mmt_status rt_choose(rt_chooser *ch, db_handle *db, const char *device_name, const gen_problem *p,
                     rt_choice *out, ut_err *err);
/*
 * rt_choose for a masked grouped problem p (p->m the bucket of the mean rows an expert has, its
 * regime) whose blocks hold block_m rows each: a row of the regime is served as rt_choose
 * serves it; without one, the choice is the model's for blocks of block_m rows, which holds
 * the fullest expert whatever the routing (rt_choose.c says why).  Any other problem, or
 * block_m <= p->m: rt_choose.  Errors: rt_choose's.
 */
mmt_status rt_choose_blocks(rt_chooser *ch, db_handle *db, const char *device_name,
                            const gen_problem *p, int64_t block_m, rt_choice *out, ut_err *err);
/* Frees the emitted kernel and zeroes the choice.  Safe on a zeroed struct. */
void rt_choice_clear(rt_choice *c);
/* The public description of choice c made for problem p (the record's fields are 0 / ""
 * for DEFAULT; expected_ms: see mmtune.h). */
void rt_choice_describe(const rt_choice *c, const gen_problem *p, mmt_choice *out);

/* One candidate of a problem, as the model ranks it. */
typedef struct {
  char template_name[GEN_NAME_MAX];
  char template_hash[17]; /* "": the template as it is now (a default or built-in config) */
  char params[MMT_PARAMS_MAX];
  int config;             /* its index in the model; -1 when the model has no rows of it */
  bool other_layout;      /* a model config with no rows in the problem's layout, predicted
                             with its rows' launch shape (rt_rank emits the first ones') */
  rt_prediction pred;
} rt_candidate;

/* rt_rank emits the kernels of at most this many of the first candidates for the problem's
 * layout where their rows were measured in others only. */
#define RT_RANK_RELAUNCH 8

/*
 * The candidates of problem p (see the top of this file), lowest predicted time first, before
 * any usability check.  hide (may be NULL): rows of exactly this shape are left out of the
 * model's sums (leave-one-shape-out; `mmtune model evaluate`).  *out: owned by the caller
 * (free); *count of them.  Errors: the model's fit, MMT_ERR_NOMEM.
 */
mmt_status rt_rank(rt_chooser *ch, db_handle *db, const char *device_name, const gen_problem *p,
                   const int64_t *hide, rt_candidate **out, int *count, ut_err *err);

/* Whether candidate c (from rt_rank) is usable for p (see the top of this file): MMT_OK with
 * *out filled (kind DEFAULT, the prediction; the caller sets kind and record), or
 * MMT_ERR_UNSUPPORTED with the reason in err.  Other errors: MMT_ERR_NOMEM. */
mmt_status rt_choose_candidate(rt_chooser *ch, const rt_candidate *c, const gen_problem *p,
                               rt_choice *out, ut_err *err);

/* RT_PRIORS' correction for template tname; NaN when it is not listed. */
double rt_template_prior(const char *tname);

/* The chooser's model of GPU model device_name (fitted on first use, again when the
 * database's rows changed, or read from the fit cache); borrowed: valid until the next call
 * on the chooser.  db NULL: an empty model. */
mmt_status rt_chooser_model(rt_chooser *ch, db_handle *db, const char *device_name,
                            rt_model **out, ut_err *err);

/*
 * Keeps the chooser's fits on disk in folder dir (created when missing; NULL or "": none, the
 * default), so that a new process reads a fit instead of redoing it (10^5 rows: about 90 ms
 * to fit, a few to read).  One file per database file and GPU model,
 * <dir>/fit-<16 hex>.model, holds what the fit was made from (the rows' stamp,
 * db_rows_stamp; the GPU model; the device the chooser was made for) and rt_model_pack's
 * bytes; a fit whose stamp differs is redone and the file replaced.  A file that does not
 * read back (another build's, truncated) is refitted too, and failing to write one costs
 * only the next process's fit: neither is an error.  The file serves kernel choices only,
 * never results: at worst a stale one ranks candidates as the rows it was fitted on did.
 * Errors: MMT_ERR_NOMEM.
 */
mmt_status rt_chooser_set_fit_cache(rt_chooser *ch, const char *dir, ut_err *err);
/* The limits the templates' configs are checked against (mmt.device), for templates loaded
 * from now on: the device's own (rt_device's limits); until then its architecture's defaults
 * (gen_device_defaults) with its SM count.  Copied. */
void rt_chooser_set_device(rt_chooser *ch, const gen_device *dev);

/* Does ahead what a first choice would: reads (or fits) the model of device_name and loads the
 * templates of the built-in and default configs and of the model's configs, so that a choice
 * is a ranking (mmt_open calls it: a cold call then costs about 1 ms at 10^5 rows, not 10).
 * A template that does not load or a fit that fails is left for the choice to meet and
 * report.  Errors: MMT_ERR_NOMEM. */
mmt_status rt_chooser_prepare(rt_chooser *ch, db_handle *db, const char *device_name,
                              ut_err *err);

/* How many models the chooser fitted from rows, and how many it read from the fit cache. */
void rt_chooser_fit_counts(const rt_chooser *ch, int *fitted, int *read);

/* mmt_explain without a context or a GPU: the choice for p (checked as mmt_gemm checks it,
 * pointers as from cudaMalloc) on GPU model device_name from db (may be NULL).  The same
 * mapping and choice as mmt_explain's (runtime/mmtune.c); `mmtune explain --device-name`
 * uses it.  Errors: rt_gemm_check's and rt_choose's. */
mmt_status rt_explain(rt_chooser *ch, db_handle *db, const char *device_name, const mmt_problem *p,
                      mmt_choice *out, ut_err *err);
/* The kernel problem rt_explain chooses for (p mapped as mmt_gemm maps it: row-major, the
 * layout from the transposes, pointers as from cudaMalloc), for rt_rank.  p must have passed
 * rt_gemm_check and have M and N > 0. */
gen_problem rt_explain_problem(const mmt_problem *p);
/* rt_explain for an mmt_matmul descriptor (mmt_explain_matmul's choice, for a GPU model from
 * the database alone): its pointers may be NULL.  Errors: rt_matmul_check_fields's, and
 * rt_choose's. */
mmt_status rt_explain_matmul(rt_chooser *ch, db_handle *db, const char *device_name,
                             const mmt_matmul_desc *d, mmt_choice *out, ut_err *err);
/* The kernel problem rt_explain_matmul chooses for, for rt_rank: an op descriptor's (op
 * points to its op) or a plain one's (rt_explain_problem's).  d must have passed
 * rt_matmul_check_fields and have M and N > 0. */
gen_problem rt_explain_matmul_problem(const mmt_matmul_desc *d, gen_op *op);

/* Which problems a default or built-in entry is a candidate for until it is measured (the
 * last number of an RT_DEFAULTS or RT_BUILTIN entry). */
typedef enum {
  RT_OFFER_ALL = 0,         /* every problem its template takes */
  RT_OFFER_UNALIGNED = 1,   /* problems whose rows are not 16-byte aligned (RT_DEFAULTS) */
  RT_OFFER_FP8 = 2,         /* FP8 problems (a tile that fits their promotion, RT_BUILTIN) */
  RT_OFFER_NO_FP8_SWAP = 3, /* problems that are not FP8, or grouped: where wgmma's swapped
                               FP8 tiles, faster than the entry, do not serve */
  RT_OFFER_NO_WGMMA = 4,    /* problems that wgmma's few-row tiles (swapped, or 64 x 64 for a
                               gated op), faster than the entry, do not serve: before sm_90,
                               rows not 16-byte aligned (TMA), grouped calls */
  RT_OFFER_NO_SWAP = 5      /* as RT_OFFER_NO_WGMMA, and 16-bit gated ops (whose 64 x 64
                               tiles the entry beats at 16 rows); FP8 as RT_OFFER_NO_FP8_SWAP */
} rt_offer;

/* The built-in list (RT_BUILTIN) as data, for the dispatcher's candidates and the tuner's
 * starting points: *count entries. */
typedef struct {
  int min_cc; /* the compute capability the entry is for, and newer */
  const char *name, *params;
  rt_offer offer;
} rt_builtin;
const rt_builtin *rt_builtins(int *count);
/* Whether built-in entry b is a candidate for problem p on a device of compute capability
 * cc_major (min_cc, and its offer): the dispatcher's rule, which the tuner's starting points
 * follow. */
bool rt_builtin_offered(const rt_builtin *b, int cc_major, const gen_problem *p);

/* Dispatcher figures of a context (mmtune.c), for tests and diagnostics. */
typedef struct {
  uint64_t launches; /* mmt_gemm calls that launched a kernel */
  uint64_t hits;     /* ... of which found their problem in the context's cache */
  uint64_t misses;   /* ... of which chose, compiled and loaded (or reused a loaded module) */
  int problems;      /* problems in the cache */
  int kernels;       /* loaded modules (distinct template + params) */
  uint64_t workspace_allocs; /* split-K workspace allocations of the loaded modules, ever */
  uint64_t workspace_bytes;  /* ... and what they hold now (retired buffers not counted) */
  uint64_t exclusive_waits;  /* exclusive launches that waited for the one before (another
                                stream's, or anything once a launch was captured) */
} rt_dispatch_stats;
/* Fills *out from ctx (zeroes when ctx is NULL). */
void rt_dispatch_get_stats(const mmt_context *ctx, rt_dispatch_stats *out);

#endif /* MMT_RT_CHOOSE_H */
