/*
dev/cuda/matmul_sweep_configs.h: the tile configurations that only dev/cuda's sweeps run, added to the
lists of kernels/fast/matmul/configs.cuh through its hooks, and every configuration built for every product
and precision. dev/cuda's Makefile compiles the .cu files of kernels/fast/matmul/ with this file
(nvcc -include), into objects of its own; the trainer never sees it.

The IDs continue the lists' (FP32 0-4, 8, 3xTF32 20-22, 24, 28 and TF32 0-4, 7, 9, 11, 13, 19 are
the trainer's), so a sweep's CSV names every configuration the same way in every build. Same columns as
there; EFF 0: the cost model never picks them (to try one in the model, time it with dev/bin/tune_check --times and fit it with dev/cuda/fit_plan.py --times).
The 128x128 tiles with 256 threads (8 warps, one block per SM) were tried for the batch-256 shapes:
too few warps per SM to hide the latency; 128x64 and 64x128 came out level with the smaller tiles.
On the big model's shapes (batch 1024, 4096 wide) they are the fastest, and the
trainer's lists now hold them for those.
*/
#ifndef MLP_DEV_MATMUL_SWEEP_CONFIGS_H
#define MLP_DEV_MATMUL_SWEEP_CONFIGS_H

#define MF_BUILD_ALL 1

// X(ID, BM, BN, BK, TM, TN, ST, EFF, FILL, OCC, BUILT)
#define MF_EXTRA_FP32_CONFIGS(X)                  \
    X(5, 64, 64, 16, 8, 4, 4, 0.0f, 0.0f, 1, 0)   \
    X(6, 32, 128, 16, 4, 8, 3, 0.0f, 0.0f, 1, 0)  \
    X(7, 32, 64, 16, 4, 4, 2, 0.0f, 0.0f, 1, 0)   \
    X(9, 128, 64, 16, 8, 4, 4, 0.0f, 0.0f, 1, 0)  \
    X(10, 64, 128, 16, 4, 8, 4, 0.0f, 0.0f, 1, 0) \
    X(11, 128, 128, 8, 8, 8, 4, 0.0f, 0.0f, 1, 0)

// X(ID, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, BUILT)
// (6: the fastest for dinp 1024 -> 1024 on TF32 values in version 11's sweep. 10: the big model's
// TF32 and BF16 dweight pick before 19. 15-18, with the trainer's 19: larger tiles and K steps for
// the big model's shapes, where BF16's m16n8k16 takes a whole BK 16 step in one instruction per
// fragment: 128 x 128 with BK 32 and 4 stages, 128 x 256 and 256 x 128 with 64 x 64 per warp, and
// 8 warps of 32 x 64)
#define MF_EXTRA_MMA_CONFIGS(X)                       \
    X(5, 32, 64, 16, 16, 32, 4, 0.0f, 0.0f, 1, 0)     \
    X(6, 32, 64, 32, 16, 16, 3, 0.0f, 0.0f, 1, 0)     \
    X(8, 128, 64, 16, 32, 32, 4, 0.0f, 0.0f, 1, 0)    \
    X(10, 128, 128, 32, 64, 32, 3, 0.0f, 0.0f, 1, 0)  \
    X(15, 128, 128, 32, 64, 32, 4, 0.0f, 0.0f, 1, 0)  \
    X(16, 128, 256, 16, 64, 64, 3, 0.0f, 0.0f, 1, 0)  \
    X(17, 256, 128, 16, 64, 64, 3, 0.0f, 0.0f, 1, 0)  \
    X(18, 128, 128, 32, 32, 64, 3, 0.0f, 0.0f, 1, 0)

// X(ID, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, BUILT)
// FP32 as 3xTF32 on the mma.sync kernel's small tiles (with the trainer's 22, 24 and 28: the TF32
// list's 0-6 and 9 in that order), for the batch-256 and batch-64 shapes
#define MF_EXTRA_3XTF32_CONFIGS(X)                   \
    X(23, 32, 64, 32, 16, 32, 3, 0.0f, 0.0f, 1, 0)   \
    X(25, 64, 128, 16, 32, 64, 3, 0.0f, 0.0f, 1, 0)  \
    X(26, 64, 64, 16, 32, 16, 4, 0.0f, 0.0f, 1, 0)   \
    X(27, 32, 64, 16, 16, 32, 4, 0.0f, 0.0f, 1, 0)   \
    X(29, 64, 128, 16, 32, 32, 4, 0.0f, 0.0f, 1, 0)

// X(ID, WGS, NB, ST, EFF, FILL, OCC, BUILT)
#define MF_EXTRA_WGMMA_CONFIGS(X)          \
    X(12, 1, 1, 6, 0.0f, 0.0f, 1, 0)       \
    X(14, 2, 1, 4, 0.0f, 0.0f, 1, 0)

#endif  // MLP_DEV_MATMUL_SWEEP_CONFIGS_H
