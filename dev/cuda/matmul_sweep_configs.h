/*
dev/cuda/matmul_sweep_configs.h: the tile configurations that only dev/cuda's sweeps run, added to the
lists of kernels/fast/configs.cuh through its hooks, and every configuration built for every product
and precision. dev/cuda's Makefile compiles kernels/fast/matmul_fast*.cu with this file
(nvcc -include), into objects of its own; the trainer never sees it.

The IDs continue the lists' (FP32 0-4, 8 and TF32 0-4, 7, 9, 10, 11, 13 are the trainer's), so a
sweep's CSV names every configuration the same way in every build. Same columns as there; EFF 0: the cost model never
picks them (to try one in the model, give it EFF, FILL, OCC from dev/cuda/fit_plan.py).
The 128x128 tiles with 256 threads (8 warps, one block per SM) were tried for the batch-256 shapes:
too few warps per SM to hide the latency; 128x64 and 64x128 came out level with the smaller tiles
(dev/NOTES.md). On the big model's shapes (batch 1024, 4096 wide) they are the fastest, and the
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
// (6: the tuned table's pick for dinp 1024 -> 1024 on TF32 values, version 11's)
#define MF_EXTRA_MMA_CONFIGS(X)                      \
    X(5, 32, 64, 16, 16, 32, 4, 0.0f, 0.0f, 1, 0)    \
    X(6, 32, 64, 32, 16, 16, 3, 0.0f, 0.0f, 1, 0)    \
    X(8, 128, 64, 16, 32, 32, 4, 0.0f, 0.0f, 1, 0)

// X(ID, WGS, NB, ST, EFF, FILL, OCC, BUILT)
#define MF_EXTRA_WGMMA_CONFIGS(X)          \
    X(12, 1, 1, 6, 0.0f, 0.0f, 1, 0)       \
    X(14, 2, 1, 4, 0.0f, 0.0f, 1, 0)

#endif  // MLP_DEV_MATMUL_SWEEP_CONFIGS_H
