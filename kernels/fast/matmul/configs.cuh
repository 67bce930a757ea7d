/*
kernels/fast/matmul/configs.cuh: the tile configurations of the fast matmul kernels, in one list from which
everything else is made: the planner's table (kernels/fast/matmul/planner.cuh) and the launch switch that
instantiates the kernels (kernels/fast/matmul/launch.cuh). Adding a configuration is one line here.

Each is a row of an X-macro list: MF_FP32_CONFIGS (kernels/fast/matmul/ffma.cuh), MF_MMA_CONFIGS
(mma.sync, kernels/fast/matmul/mma_tf32.cuh), MF_3XTF32_CONFIGS (FP32 through the same mma.sync kernel)
and MF_WGMMA_CONFIGS (wgmma, kernels/fast/matmul/wgmma_tf32.cuh):
    ID             the configuration's name in plans and in the autotune's cache (unique per precision:
                   the FP32 and 3xTF32 lists together, and the mma.sync and wgmma lists together)
    the tile       FP32: block BM x BN, K step BK, TM x TN per thread, ST pipeline stages;
                   mma.sync and 3xTF32: block BM x BN, K step BK, WM x WN per warp, ST stages;
                   wgmma: WGS warpgroups (BM = 64 WGS), NB 64-column blocks (BN = 64 NB), ST stages
    EFF, FILL, OCC the cost model (planner.cuh mf_cost); EFF 0: the cost model never picks it
    BUILT          the products and precisions it is compiled for (MF_BUILT bits): a kernel is one
                   instantiation per product layout and precision, and compiling one costs seconds,
                   so the trainer's build compiles only what its planner can pick for what the
                   trainer passes (kernels/fast/matmul/matmul_fast.h).

These lists hold what the trainer's planner can pick, each row built for the products and precisions
where it can be fastest. EFF, FILL and OCC of the trainer's rows are fitted to the GPU's timings of
every plan of every product of a spread of models (`dev/bin/tune_check --times` times them, `python3
dev/cuda/fit_plan.py --times` fits them; doc/fast.md has the data): a ranking, so the numbers need not
look physical. dev/cuda adds the configurations only its sweeps run through the MF_EXTRA_*_CONFIGS hooks below, and builds every
configuration for every product and precision (MF_BUILD_ALL), from the same sources
(dev/cuda/matmul_sweep_configs.h).
*/
#ifndef MLP_FAST_CONFIGS_CUH
#define MLP_FAST_CONFIGS_CUH

#include "matmul_fast.h"  // MF_FWD, MF_DINP, MF_DWEIGHT, MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16

// the BUILT bit of product prod (MfProduct) in precision tf32 (0, MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16)
#define MF_BUILT(prod, tf32) (1 << ((prod) * 4 + (tf32)))
#define MF_BUILT_FP32 (MF_BUILT(MF_FWD, 0) | MF_BUILT(MF_DINP, 0) | MF_BUILT(MF_DWEIGHT, 0))
// what the trainer passes in TF32: its forward products' operands are TF32 values (-x 1)
#define MF_BUILT_TRAINER_TF32 \
    (MF_BUILT(MF_FWD, MF_TF32_EXACT) | MF_BUILT(MF_DINP, MF_TF32_ROUND) | MF_BUILT(MF_DWEIGHT, MF_TF32_ROUND))
// and in BF16 (-x 2): every product rounds its FP32 operands
#define MF_BUILT_TRAINER_BF16 (MF_BUILT(MF_FWD, MF_BF16) | MF_BUILT(MF_DINP, MF_BF16) | MF_BUILT(MF_DWEIGHT, MF_BF16))
#define MF_BUILT_EVERYWHERE 0xFFF

// X(ID, BM, BN, BK, TM, TN, ST, EFF, FILL, OCC, BUILT)
// (8: the fastest FFMA tile on the big model's forward and dinp products, batch 1024; 3xTF32 is
// faster there: built only in dev/cuda, where its sweeps time it beside 3xTF32. On an H200 the
// 3xTF32 rows below are faster than these on all but the smallest products.)
#define MF_FP32_CONFIGS(X)                                        \
    X(0, 64, 128, 16, 8, 8, 3, 0.026f, 133.5f, 1, MF_BUILT_FP32)   \
    X(1, 64, 64, 16, 4, 4, 4, 0.554f, 5.2f, 4, MF_BUILT_FP32)    \
    X(2, 32, 64, 32, 4, 4, 3, 1.864f, 32.2f, 1, MF_BUILT_FP32)    \
    X(3, 32, 32, 32, 4, 4, 4, 0.014f, 115.3f, 2, MF_BUILT_FP32)     \
    X(4, 32, 64, 16, 4, 4, 4, 0.014f, 21.3f, 2, MF_BUILT_FP32)    \
    X(8, 128, 128, 16, 8, 8, 3, 0.00f, 0.0f, 1, 0)

// X(ID, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, BUILT)
// (9 and 7 are built for dinp alone, 19 for the backward products and BF16: where they were fastest.
// The BF16 kernels are the same tiles with mma.m16n8k16: the cost model's numbers, fitted to TF32,
// rank them too, but for BF16's large products: 19, mf_large)
#define MF_MMA_CONFIGS(X)                                                                              \
    X(0, 64, 64, 16, 32, 32, 4, 0.542f, 9.6f, 4, MF_BUILT_TRAINER_TF32 | MF_BUILT_TRAINER_BF16)        \
    X(1, 32, 64, 32, 16, 32, 3, 1.060f, 13.8f, 2, MF_BUILT_TRAINER_TF32 | MF_BUILT_TRAINER_BF16)        \
    X(2, 32, 32, 32, 16, 16, 4, 0.578f, 10.8f, 3, MF_BUILT_TRAINER_TF32 | MF_BUILT_TRAINER_BF16)         \
    X(3, 64, 128, 16, 32, 64, 3, 1.045f, 15.9f, 3, MF_BUILT_TRAINER_TF32 | MF_BUILT_TRAINER_BF16)       \
    X(4, 64, 64, 16, 32, 16, 4, 0.797f, 9.6f, 2, MF_BUILT_TRAINER_TF32 | MF_BUILT_TRAINER_BF16)         \
    X(9, 64, 128, 16, 32, 32, 4, 1.609f, 17.7f, 3, MF_BUILT(MF_DINP, MF_TF32_ROUND))                      \
    X(7, 128, 128, 16, 64, 32, 4, 0.863f, 70.0f, 4, MF_BUILT(MF_DINP, MF_TF32_ROUND) | MF_BUILT(MF_DINP, MF_BF16)) \
    X(19, 128, 256, 32, 64, 64, 3, 4.741f, 71.4f, 2, \
      MF_BUILT(MF_DINP, MF_TF32_ROUND) | MF_BUILT(MF_DWEIGHT, MF_TF32_ROUND) | MF_BUILT_TRAINER_BF16)

// FP32 on the tensor cores as 3xTF32 (MF_TF32X3, kernels/fast/matmul/matmul_fast.h): the mma.sync kernel's
// tiles, but FP32 configurations (tf32 0): their IDs continue the FP32 list's, and the cost model weighs
// them against the FFMA rows: three TF32 products cost less than one FP32 product on the CUDA cores
// on all but the smallest products. The first layer's forward and dW on them take the batch as pixel
// bytes (MF_FP32_PIXELS): two TF32 products instead of three.
// X(ID, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, BUILT)
#define MF_3XTF32_CONFIGS(X)                                                                     \
    X(20, 128, 128, 16, 64, 32, 4, 0.976f, 14.2f, 4, MF_BUILT(MF_FWD, 0))                          \
    X(21, 128, 128, 32, 64, 32, 3, 1.877f, 8.8f, 4, MF_BUILT(MF_DINP, 0) | MF_BUILT(MF_DWEIGHT, 0)) \
    X(22, 64, 64, 16, 32, 32, 4, 2.341f, 16.0f, 3, MF_BUILT(MF_DWEIGHT, 0))                         \
    X(24, 32, 32, 32, 16, 16, 4, 0.957f, 4.1f, 3, MF_BUILT(MF_FWD, 0) | MF_BUILT(MF_DWEIGHT, 0))          \
    X(28, 32, 64, 32, 16, 16, 3, 1.511f, 8.6f, 2, MF_BUILT(MF_FWD, 0) | MF_BUILT(MF_DINP, 0))

// X(ID, WGS, NB, ST, EFF, FILL, OCC, BUILT)
// (the forward products on TF32 values: 64 x 64 and 64 x 128 tiles)
#define MF_WGMMA_CONFIGS(X)                                         \
    X(11, 1, 1, 4, 1.457f, 9.3f, 3, MF_BUILT(MF_FWD, MF_TF32_EXACT)) \
    X(13, 1, 2, 4, 1.987f, 36.2f, 4, MF_BUILT(MF_FWD, MF_TF32_EXACT))

// dev/cuda's hooks: more rows (with IDs of their own), and every row built everywhere
#ifndef MF_EXTRA_FP32_CONFIGS
#define MF_EXTRA_FP32_CONFIGS(X)
#endif
#ifndef MF_EXTRA_MMA_CONFIGS
#define MF_EXTRA_MMA_CONFIGS(X)
#endif
#ifndef MF_EXTRA_3XTF32_CONFIGS
#define MF_EXTRA_3XTF32_CONFIGS(X)
#endif
#ifndef MF_EXTRA_WGMMA_CONFIGS
#define MF_EXTRA_WGMMA_CONFIGS(X)
#endif
#ifndef MF_BUILD_ALL
#define MF_BUILD_ALL 0
#endif
#define MF_ALL_FP32_CONFIGS(X) MF_FP32_CONFIGS(X) MF_EXTRA_FP32_CONFIGS(X)
#define MF_ALL_MMA_CONFIGS(X) MF_MMA_CONFIGS(X) MF_EXTRA_MMA_CONFIGS(X)
#define MF_ALL_3XTF32_CONFIGS(X) MF_3XTF32_CONFIGS(X) MF_EXTRA_3XTF32_CONFIGS(X)
#define MF_ALL_WGMMA_CONFIGS(X) MF_WGMMA_CONFIGS(X) MF_EXTRA_WGMMA_CONFIGS(X)
// a row's BUILT bits in this build
#define MF_BUILT_HERE(BUILT) (MF_BUILD_ALL ? MF_BUILT_EVERYWHERE : (BUILT))

// whether this build has the wgmma kernel (sm_90a)
#if defined(MF_WGMMA)
#define MF_HAVE_WGMMA 1
#else
#define MF_HAVE_WGMMA 0
#endif

// ----------------------------------------------------------------------------
// the shared memory a configuration needs

// floats of one operand tile in shared memory (MfTile, kernels/fast/matmul/pipeline.cuh): a k-contiguous one
// as S[d][k] with rows of BK + 4 floats, the other as S[k][d] with rows of BD + PADD (4 FP32, 8 TF32)
__host__ __device__ constexpr int mf_tile_floats(int BD, int BK, bool KC, int PADD) {
    return KC ? BD * (BK + 4) : BK * (BD + PADD);
}
// floats of the FP32 or mma.sync kernel's shared memory: ST stages of (A tile, B tile), or the BM x BN
// partial tile of the cluster reduction if that is larger
__host__ __device__ constexpr int mf_smem_floats(int BM, int BN, int BK, int ST, bool A_KC, bool B_KC, int PADD) {
    return ST * (mf_tile_floats(BM, BK, A_KC, PADD) + mf_tile_floats(BN, BK, B_KC, PADD)) > BM * BN
         ? ST * (mf_tile_floats(BM, BK, A_KC, PADD) + mf_tile_floats(BN, BK, B_KC, PADD)) : BM * BN;
}
// floats of the wgmma kernel's shared memory (kernels/fast/matmul/wgmma_tf32.cuh: k-major tiles, staging
// tiles, or the BM x BN partial tile of the cluster reduction if that is larger), + 1024 bytes for
// the alignment
__host__ __device__ constexpr int mf_wg_smem_floats(int WGS, int NB, int ST, bool A_KC, bool B_KC) {
    const int BM = 64 * WGS, BN = 64 * NB;
    const int tiles = (A_KC ? ST : 2) * BM * 32 + (B_KC ? ST : 2) * BN * 32 + (A_KC ? 0 : ST * 32 * (BM + 4))
                    + (B_KC ? 0 : ST * 32 * (BN + 4));
    return (tiles > BM * BN ? tiles : BM * BN) + 256;
}

#endif  // MLP_FAST_CONFIGS_CUH
