/*
kernels/fast/matmul/planner.cuh: which tile configuration, and how many K splits, for a product of a given
shape (mf_plan). Host code, included by kernels/fast/matmul/matmul_fast.cu.

Why it matters: the trainer's products are small (a batch of 64 x 784 -> 128 is 6 MFLOP), so a
fixed tile either leaves most of the GPU's multiprocessors idle (too few tiles) or runs many short
waves. The planner picks, per shape, the tile size and a K split so that the grid fills the SMs:
  - the cost model (mf_cost) estimates every candidate configuration x split (1, 2, 4, 8) and takes
    the cheapest; its per-configuration numbers were fitted to every plan of every product of a
    spread of models, timed on the GPU (dev/bin/tune_check --times, dev/cuda/fit_plan.py --times), so
    they rank configurations, they do not simulate them;
  - BF16's large products take the large tile measured fastest on the big model's (mf_large);
  - where neither is good enough, the trainer's autotune (-A 1) times every candidate on the GPU, and
    its cache overrides both (kernels/fast/matmul/tune.h).
Every choice is a function of the shape and of the GPU planned for (matmul_fast_target).
K splits run as thread-block clusters where the compiled code and the GPU have them (sm_90), else
only where the caller gives scratch for the partial sums (the weight gradient).
*/
#ifndef MLP_FAST_PLANNER_CUH
#define MLP_FAST_PLANNER_CUH

#include <stddef.h>

#include "configs.cuh"    // the lists, mf_wg_smem_floats
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
    return MF_HAVE_WGMMA && matmul_fast_target()->wgmma &&
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
// what the GPU and the compiled code offer: the target (MfTarget, matmul_fast.h), the current
// device's unless a caller set another (matmul_fast_set_target): the planners below never ask a
// device themselves, so a host-only test can plan for any GPU it describes

const MfTarget *matmul_fast_target(void);
static int mf_num_sms(void) { return matmul_fast_target()->sms; }
static int mf_has_clusters(void) { return matmul_fast_target()->clusters; }

// ----------------------------------------------------------------------------
// the cost model

// Cost of a (tile, split) choice: blocks run in waves of occ per SM; each block walks its K slice in
// BK steps plus a fixed cost of `fill` steps (pipeline fill, epilogue, the cluster reduction), at a
// relative speed eff. A model, not a simulation: its numbers are whatever ranks the measured
// configurations best (eff and fill trade off against each other), so refit them on another GPU
// (dev/bin/tune_check --times, dev/cuda/fit_plan.py --times). The cheapest choice wins.
static float mf_cost(const MatmulFastCfg *c, int M, int N, int K, int splits) {
    const long tiles = (long)mf_ceil_div(M, c->bm) * mf_ceil_div(N, c->bn);
    const long slots = (long)mf_num_sms() * c->occ;
    const long waves = (tiles * splits + slots - 1) / slots;
    const int steps = mf_ceil_div(mf_ceil_div(K, splits), c->bk);
    const float eff = c->eff > 0.0f ? c->eff : 1.0f;   // configurations outside the model, when fixed
    return (float)waves * c->bm * c->bn * c->bk * ((float)steps + c->fill) / eff;
}

// ----------------------------------------------------------------------------
// large products

// BF16's large tile (128 x 256), measured fastest on the big model's products (784 -> 4096 -> 4096 at
// batch 1024) on the operands' FP32 values, for every product at least about that large: wider
// layers, larger batches. (FP32 and TF32 have none: their cost model is fitted to large products as
// well as small ones, and picks their large tiles where they are fastest, K split or not.) A product
// takes it when its tiles make at least half a wave over the SMs, one K slice each, and K is at least
// MF_LARGE_MIN_K (the shortest measured: the batch of 256 in a weight gradient).
typedef struct { MfProduct prod; int tf32, cfg; } MatmulFastLarge;
static const MatmulFastLarge mf_large[] = {{MF_FWD, MF_BF16, 19}, {MF_DINP, MF_BF16, 19}, {MF_DWEIGHT, MF_BF16, 19}};
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

// the planner's choice (a BF16 large product's tile, else the cost model's cheapest candidate); tf32 as
// mf_tf32_here gives it. Where the cost model is not good enough, the trainer's autotune times the
// candidates on the device (kernels/fast/matmul/tune.h) and its cache overrides this. cfg -1: nothing built for this product and precision.
static MatmulFastPlan mf_plan(MfProduct prod, int M, int N, int K, int tf32, int have_scratch) {
    const MatmulFastCfg *cfgs = tf32 ? mf_tf32_cfgs : mf_fp32_cfgs;
    const int ncfg = tf32 ? MF_NUM_TF32_CFGS : MF_NUM_FP32_CFGS;
    const int cluster = mf_has_clusters();
    const int can_split = cluster || have_scratch;
    MatmulFastPlan p = {-1, 1, K, 0};
    const MatmulFastCfg *large = mf_large_pick(prod, M, N, K, tf32);
    if (large) {   // a BF16 large product: the big model's tile, no K split
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
