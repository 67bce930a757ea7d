/*
kernels/fast/matmul/planner.cuh: which tile configuration, and how many K splits, for a product of a given
shape (mf_plan). Host code, included by kernels/fast/matmul/matmul_fast.cu.

Why it matters: the trainer's products are small (a batch of 64 x 784 -> 128 is 6 MFLOP), so a
fixed tile either leaves most of the GPU's multiprocessors idle (too few tiles) or runs many short
waves. The planner picks, per shape, the tile size and a K split so that the grid fills the SMs:
  - the cost model (mf_cost) estimates every candidate configuration x split (1, 2, 4, 8) and takes
    the cheapest; its per-configuration numbers were fitted to measured timings (dev/cuda's sweep and
    fit_plan.py), so they rank configurations, they do not simulate them;
  - the tuned table (mf_tuned) overrides it on the few shapes that dominate the wide model's step,
    with the fastest configuration measured there, on a GPU with the SM count it was measured on;
  - products larger than those of the table take the big model's large tiles (mf_large).
K splits run as thread-block clusters where the compiled code and the GPU have them (sm_90), else
only where the caller gives scratch for the partial sums (the weight gradient).
*/
#ifndef MLP_FAST_PLANNER_CUH
#define MLP_FAST_PLANNER_CUH

#include <stddef.h>

#include "configs.cuh"    // the lists, mf_wg_smem_floats
#include "epilogue.cuh"   // matmul_fast_splitk_reduce_kernel (what was compiled: mf_has_clusters)
#include "matmul_fast.h"  // MatmulFastCfg, MatmulFastPlan
#include "pipeline.cuh"   // mf_ceil_div

// ----------------------------------------------------------------------------
// the configurations of this build: the rows of configs.cuh's lists, each named by its tile

#define MF_ROW_FP32(ID, BM, BN, BK, TM, TN, ST, EFF, FILL, OCC, BUILT)                                        \
    {ID, MF_KIND_FP32, BM, BN, BK, TM, TN, ST, EFF, FILL, OCC, MF_BUILT_HERE(BUILT), (BM / TM) * (BN / TN),   \
     #BM "x" #BN "x" #BK " t" #TM "x" #TN " s" #ST},
#define MF_ROW_MMA(ID, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, BUILT)                                          \
    {ID, MF_KIND_MMA, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, MF_BUILT_HERE(BUILT), (BM / WM) * (BN / WN) * 32, \
     #BM "x" #BN "x" #BK " w" #WM "x" #WN " s" #ST},
#define MF_ROW_WGMMA(ID, WGS, NB, ST, EFF, FILL, OCC, BUILT)                                                   \
    {ID, MF_KIND_WGMMA, 64 * WGS, 64 * NB, 32, 64, 64 * NB, ST, EFF, FILL, OCC, MF_BUILT_HERE(BUILT), 128 * WGS, \
     "wgmma " #WGS "x" #NB " warpgroups x 64-blocks s" #ST},
#define MF_ROW_3XTF32(ID, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, BUILT)                                        \
    {ID, MF_KIND_3XTF32, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, MF_BUILT_HERE(BUILT), (BM / WM) * (BN / WN) * 32, \
     "3xTF32 " #BM "x" #BN "x" #BK " w" #WM "x" #WN " s" #ST},
static const MatmulFastCfg mf_fp32_cfgs[] = {MF_ALL_FP32_CONFIGS(MF_ROW_FP32) MF_ALL_3XTF32_CONFIGS(MF_ROW_3XTF32)};
static const MatmulFastCfg mf_tf32_cfgs[] = {MF_ALL_MMA_CONFIGS(MF_ROW_MMA) MF_ALL_WGMMA_CONFIGS(MF_ROW_WGMMA)};
#undef MF_ROW_FP32
#undef MF_ROW_MMA
#undef MF_ROW_WGMMA
#undef MF_ROW_3XTF32
#define MF_NUM_FP32_CFGS ((int)(sizeof(mf_fp32_cfgs) / sizeof(mf_fp32_cfgs[0])))
#define MF_NUM_TF32_CFGS ((int)(sizeof(mf_tf32_cfgs) / sizeof(mf_tf32_cfgs[0])))

// configuration `id` of a precision, or NULL
static const MatmulFastCfg *mf_cfg(int tf32, int id) {
    const MatmulFastCfg *cfgs = tf32 ? mf_tf32_cfgs : mf_fp32_cfgs;
    const int n = tf32 ? MF_NUM_TF32_CFGS : MF_NUM_FP32_CFGS;
    for (int i = 0; i < n; i++)
        if (cfgs[i].id == id) return &cfgs[i];
    return NULL;
}

// whether configuration c can run product prod in precision tf32 here: compiled for it, and for a
// wgmma configuration a build for sm_90a whose shared memory (more with the staging tiles of
// d-contiguous operands) fits in a block's 227 KB
static int mf_cfg_usable(const MatmulFastCfg *c, MfProduct prod, int tf32) {
    if (!(c->built & MF_BUILT(prod, tf32))) return 0;
    if (c->kind != MF_KIND_WGMMA) return 1;
    if (tf32 == MF_BF16) return 0;   // the wgmma kernel is TF32 only (dev/cuda builds every row with every bit)
    const bool a_kc = prod != MF_DWEIGHT, b_kc = prod == MF_FWD;
    return MF_HAVE_WGMMA &&
           (size_t)mf_wg_smem_floats(c->bm / 64, c->bn / 64, c->st, a_kc, b_kc) * sizeof(float) <= 227 * 1024;
}

// MF_TF32_EXACT where this build has no kernel that takes TF32 values as they are: the rounding
// kernels, which give the same products on such operands
static int mf_tf32_here(MfProduct prod, int tf32) {
    if (tf32 != MF_TF32_EXACT) return tf32;
    for (int i = 0; i < MF_NUM_TF32_CFGS; i++)
        if (mf_cfg_usable(&mf_tf32_cfgs[i], prod, MF_TF32_EXACT)) return MF_TF32_EXACT;
    return MF_TF32_ROUND;
}

// ----------------------------------------------------------------------------
// what the GPU and the compiled code offer

static int mf_num_sms(void) {
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    return sms;
}

// Clusters need sm_90 in the code that runs, not only in the GPU: a build for an older target
// compiles the cluster reduction out (mf_cluster_reduce), and would silently drop the partial sums.
// So ask what was compiled: the PTX target (__CUDA_ARCH__ when the kernels were compiled) and the
// machine code of the kernels that will run on this GPU.
static int mf_has_clusters(void) {
    static int has = -1;
    if (has < 0) {
        cudaFuncAttributes fa;
        cudaCheck(cudaFuncGetAttributes(&fa, matmul_fast_splitk_reduce_kernel<true>));
        has = fa.ptxVersion >= 90 && fa.binaryVersion >= 90;
    }
    return has;
}

// ----------------------------------------------------------------------------
// the cost model

// Cost of a (tile, split) choice: blocks run in waves of occ per SM; each block walks its K slice in
// BK steps plus a fixed cost of `fill` steps (pipeline fill, epilogue, the cluster reduction), at a
// relative speed eff. A model, not a simulation: its numbers are whatever ranks the measured
// configurations best (eff and fill trade off against each other), so refit them with the sweep on
// another GPU (dev/cuda/fit_plan.py). The cheapest choice wins.
static float mf_cost(const MatmulFastCfg *c, int M, int N, int K, int splits) {
    const long tiles = (long)mf_ceil_div(M, c->bm) * mf_ceil_div(N, c->bn);
    const long slots = (long)mf_num_sms() * c->occ;
    const long waves = (tiles * splits + slots - 1) / slots;
    const int steps = mf_ceil_div(mf_ceil_div(K, splits), c->bk);
    const float eff = c->eff > 0.0f ? c->eff : 1.0f;   // configurations outside the model, when fixed
    return (float)waves * c->bm * c->bn * c->bk * ((float)steps + c->fill) / eff;
}

// ----------------------------------------------------------------------------
// the tuned table

// Measured picks for the shapes that dominate the wide model's step (784 -> 1024 -> 1024 at batch
// 256), the big model's (784 -> 4096 -> 4096 at batch 1024) and the small model's FP32 products,
// where the cost model's pick ran below the fastest configuration measured: the fastest one, from
// dev/cuda's `matmul_forward sweep CSV wide` (TF32) on an H200 and the other sweeps named below on an
// H100, both of 132 SMs (the sweep prints this table from its own timings). Used only on a GPU with
// the same number of SMs, and where the configuration is built; anywhere else, and for every other
// shape, the cost model decides.
// The FP32 rows are 3xTF32 configurations. The sweep's FP32 picks on the CUDA cores, each fastest
// alone, had made the wide model's step slower: inside the step, the backward kernels of two streams
// run side by side, and the cost model's smaller picks shared the SMs better; the 3xTF32 picks make
// it faster.
// The trainer passes MF_TF32_EXACT for its forward products only (-x 1); the other MF_TF32_EXACT
// rows are dev/cuda's version 11 picks (dev/cuda/matmul_forward.cu), the forward MF_TF32_ROUND rows version 10's.
typedef struct { MfProduct prod; int M, N, K, tf32, cfg, splits; } MatmulFastTuned;
#define MF_TUNED_SMS 132
static const MatmulFastTuned mf_tuned[] = {
    {MF_FWD, 256, 1024, 784, MF_TF32_EXACT, 11, 4},
    {MF_FWD, 256, 1024, 1024, MF_TF32_EXACT, 11, 4},
    {MF_DINP, 256, 784, 1024, MF_TF32_EXACT, 4, 4},
    {MF_DINP, 256, 1024, 1024, MF_TF32_EXACT, 6, 2},
    {MF_DWEIGHT, 1024, 784, 256, MF_TF32_EXACT, 9, 1},
    {MF_DWEIGHT, 1024, 1024, 256, MF_TF32_EXACT, 9, 1},
    {MF_FWD, 256, 1024, 784, MF_TF32_ROUND, 11, 2},
    {MF_FWD, 256, 1024, 1024, MF_TF32_ROUND, 11, 2},
    {MF_DINP, 256, 784, 1024, MF_TF32_ROUND, 9, 8},
    {MF_DINP, 256, 1024, 1024, MF_TF32_ROUND, 0, 8},
    {MF_DWEIGHT, 1024, 784, 256, MF_TF32_ROUND, 4, 1},
    {MF_DWEIGHT, 1024, 1024, 256, MF_TF32_ROUND, 4, 1},
    // FP32 at batch 256 (3xTF32 configurations), from `matmul_forward sweep CSV wide fp32` on an H100,
    // but for the second layer's dW: alone, 64 x 64 tiles (22, 256 blocks) are its fastest, but in the
    // step it runs on the side stream beside dinp, the critical path, and with 128 x 128 tiles (21, 64
    // blocks) it leaves dinp more of the SMs: the trainer's epoch is faster
    {MF_FWD, 256, 1024, 784, 0, 28, 2},
    {MF_DINP, 256, 784, 1024, 0, 21, 8},
    {MF_DWEIGHT, 1024, 784, 256, 0, 22, 1},
    {MF_FWD, 256, 1024, 1024, 0, 28, 2},
    {MF_DINP, 256, 1024, 1024, 0, 28, 2},
    {MF_DWEIGHT, 1024, 1024, 256, 0, 21, 1},
    // and the small model's (784 -> 128 at batch 64; the head is its own kernel), from `... sweep CSV
    // all fp32` on an H100
    {MF_FWD, 64, 128, 784, 0, 24, 8},
    {MF_DWEIGHT, 128, 784, 64, 0, 24, 1},
    // the big model (784 -> 4096 -> 4096 at batch 1024), from `matmul_forward sweep CSV big tf32` and
    // `... big bf16` on an H100
    {MF_FWD, 1024, 4096, 784, MF_TF32_EXACT, 13, 1},
    {MF_DINP, 1024, 784, 4096, MF_TF32_EXACT, 7, 4},
    {MF_DWEIGHT, 4096, 784, 1024, MF_TF32_EXACT, 19, 1},
    {MF_FWD, 1024, 4096, 4096, MF_TF32_EXACT, 13, 1},
    {MF_DINP, 1024, 4096, 4096, MF_TF32_EXACT, 7, 1},
    {MF_DWEIGHT, 4096, 4096, 1024, MF_TF32_EXACT, 19, 1},
    {MF_FWD, 1024, 4096, 784, MF_TF32_ROUND, 7, 1},
    {MF_DINP, 1024, 784, 4096, MF_TF32_ROUND, 7, 4},
    {MF_DWEIGHT, 4096, 784, 1024, MF_TF32_ROUND, 19, 1},
    {MF_FWD, 1024, 4096, 4096, MF_TF32_ROUND, 19, 1},
    {MF_DINP, 1024, 4096, 4096, MF_TF32_ROUND, 19, 1},
    {MF_DWEIGHT, 4096, 4096, 1024, MF_TF32_ROUND, 19, 1},
    // BF16 there, mma.m16n8k16 on the same tiles
    {MF_FWD, 1024, 4096, 784, MF_BF16, 19, 1},
    {MF_DINP, 1024, 784, 4096, MF_BF16, 7, 4},
    {MF_DWEIGHT, 4096, 784, 1024, MF_BF16, 19, 1},
    {MF_FWD, 1024, 4096, 4096, MF_BF16, 19, 1},
    {MF_DINP, 1024, 4096, 4096, MF_BF16, 19, 1},
    {MF_DWEIGHT, 4096, 4096, 1024, MF_BF16, 19, 1},
    // and FP32 there: 3xTF32 on the tensor cores (configurations 20 and 21: MF_TF32X3, kernels/fast/
    // matmul_fast.h), the same tiles as TF32's picks: the fastest FP32 configurations of
    // `matmul_forward sweep CSV big fp32` on an H100, level with cuBLAS's SGEMM or ahead of it, where
    // FP32 on the CUDA cores is behind
    {MF_FWD, 1024, 4096, 784, 0, 20, 1},
    {MF_DINP, 1024, 784, 4096, 0, 21, 2},
    {MF_DWEIGHT, 4096, 784, 1024, 0, 21, 1},
    {MF_FWD, 1024, 4096, 4096, 0, 20, 1},
    {MF_DINP, 1024, 4096, 4096, 0, 21, 1},
    {MF_DWEIGHT, 4096, 4096, 1024, 0, 21, 1},
};

// the tuned table's entry for this product, if it has one, this GPU is the one it was measured on,
// and the configuration can run here
static const MatmulFastTuned *mf_tuned_pick(MfProduct prod, int M, int N, int K, int tf32) {
    if (mf_num_sms() != MF_TUNED_SMS) return NULL;
    for (size_t i = 0; i < sizeof(mf_tuned) / sizeof(mf_tuned[0]); i++) {
        const MatmulFastTuned *t = &mf_tuned[i];
        if (t->prod != prod || t->M != M || t->N != N || t->K != K || t->tf32 != tf32) continue;
        const MatmulFastCfg *c = mf_cfg(tf32, t->cfg);
        return c && mf_cfg_usable(c, prod, tf32) ? t : NULL;
    }
    return NULL;
}

// ----------------------------------------------------------------------------
// large products

// The big model's measured picks (the tuned table's last rows: 128 x 256 and 128 x 128 tiles, the
// 64 x 128 wgmma tile for the forward products on TF32 values) carried to products at least as large
// as its own, which the table does not hold: wider layers, larger batches. The cost model, fitted to
// the small tiles' timings, never picks these tiles, and on such shapes its picks ran at a fraction of
// them. A product takes its precision's row here when its tiles make at least half a
// wave over the SMs, one K slice each, and K is at least MF_LARGE_MIN_K (the shortest measured: the
// batch of 256 in a weight gradient; the cost model keeps shorter ones).
typedef struct { MfProduct prod; int tf32, cfg; } MatmulFastLarge;
static const MatmulFastLarge mf_large[] = {
    {MF_FWD, MF_TF32_EXACT, 13}, {MF_DINP, MF_TF32_ROUND, 19}, {MF_DWEIGHT, MF_TF32_ROUND, 19},
    {MF_FWD, MF_BF16, 19},       {MF_DINP, MF_BF16, 19},       {MF_DWEIGHT, MF_BF16, 19},
    {MF_FWD, 0, 20},             {MF_DINP, 0, 21},             {MF_DWEIGHT, 0, 21},
};
#define MF_LARGE_MIN_K 256

// the large-product configuration of this product and precision, if it has one that can run here
static const MatmulFastCfg *mf_large_cfg(MfProduct prod, int tf32) {
    for (size_t i = 0; i < sizeof(mf_large) / sizeof(mf_large[0]); i++) {
        if (mf_large[i].prod != prod || mf_large[i].tf32 != tf32) continue;
        const MatmulFastCfg *c = mf_cfg(tf32, mf_large[i].cfg);
        return c != NULL && mf_cfg_usable(c, prod, tf32) ? c : NULL;
    }
    return NULL;
}

// ... if this product is large enough for it (see above)
static const MatmulFastCfg *mf_large_pick(MfProduct prod, int M, int N, int K, int tf32) {
    const MatmulFastCfg *c = K >= MF_LARGE_MIN_K ? mf_large_cfg(prod, tf32) : NULL;
    if (c == NULL) return NULL;
    const long tiles = (long)mf_ceil_div(M, c->bm) * mf_ceil_div(N, c->bn);
    return 2 * tiles >= mf_num_sms() ? c : NULL;
}

// ----------------------------------------------------------------------------
// the plan

// p.cfg with p.splits K slices as the launch carries them out: the slice length a whole number of
// BK steps; with clusters every split a block of the cluster (trailing ones may get an empty slice),
// without them only as many slices as the length gives
static void mf_plan_slices(MatmulFastPlan *p, int K, int bk, int cluster) {
    if (p->splits > 1) {
        const int chunk = mf_ceil_div(mf_ceil_div(K, p->splits), bk) * bk;
        if (!cluster) p->splits = mf_ceil_div(K, chunk);
        p->kchunk = chunk;
        p->cluster = cluster;
    }
    if (p->splits <= 1) {
        p->splits = 1;
        p->kchunk = K;
        p->cluster = 0;
    }
}

// the planner's choice (the tuned table's, else the cost model's cheapest candidate); tf32 as
// mf_tf32_here gives it. cfg -1: nothing built for this product and precision.
static MatmulFastPlan mf_plan(MfProduct prod, int M, int N, int K, int tf32, int have_scratch) {
    const MatmulFastCfg *cfgs = tf32 ? mf_tf32_cfgs : mf_fp32_cfgs;
    const int ncfg = tf32 ? MF_NUM_TF32_CFGS : MF_NUM_FP32_CFGS;
    const int cluster = mf_has_clusters();
    const int can_split = cluster || have_scratch;
    MatmulFastPlan p = {-1, 1, K, 0};
    const MatmulFastTuned *tuned = cluster ? mf_tuned_pick(prod, M, N, K, tf32) : NULL;
    const MatmulFastCfg *large = tuned ? NULL : mf_large_pick(prod, M, N, K, tf32);
    if (tuned) {   // a measured pick: no cost model
        p.cfg = tuned->cfg;
        p.splits = tuned->splits;
    } else if (large) {   // a large product: the big model's tile, no K split
        p.cfg = large->id;
        p.splits = 1;
    } else {
        float best = 1e30f;
        for (int c = 0; c < ncfg; c++) {
            if (cfgs[c].eff <= 0.0f || !mf_cfg_usable(&cfgs[c], prod, tf32)) continue;
            for (int s = 1; s <= 8; s *= 2) {
                if (s > 1 && (!can_split || K / s < cfgs[c].bk)) continue;   // every split at least one BK step
                const float cost = mf_cost(&cfgs[c], M, N, K, s);
                if (cost < best) {
                    best = cost;
                    p.cfg = cfgs[c].id;
                    p.splits = s;
                }
            }
        }
        if (p.cfg < 0) return p;
    }
    mf_plan_slices(&p, K, mf_cfg(tf32, p.cfg)->bk, cluster);
    return p;
}

// configuration cfg with `splits` slices, if that is possible here (see matmul_fast_plan_fixed)
static int mf_plan_fixed(MatmulFastPlan *out, MfProduct prod, int M, int N, int K, int tf32, int have_scratch, int cfg,
                         int splits) {
    (void)M;
    (void)N;
    const MatmulFastCfg *c = mf_cfg(tf32, cfg);
    if (c == NULL || !mf_cfg_usable(c, prod, tf32) || splits < 1) return 0;
    const int cluster = mf_has_clusters();
    if (splits > 1 && (!(cluster || have_scratch) || K / splits < c->bk)) return 0;
    MatmulFastPlan p = {cfg, splits, K, 0};
    mf_plan_slices(&p, K, c->bk, cluster);
    *out = p;
    return 1;
}

#endif  // MLP_FAST_PLANNER_CUH
