/*
kernels/fast/matmul/launch.cuh: the launch of one fast matmul kernel, chosen by product, precision and tile
configuration. The switch over configurations is generated from the lists of kernels/fast/matmul/configs.cuh,
so it cannot drift from the planner's table, and it instantiates a kernel only where the list says it
is built: each kernels/fast/matmul_fast_<product>.cu compiles the kernels of one product layout.
*/
#ifndef MLP_FAST_LAUNCH_CUH
#define MLP_FAST_LAUNCH_CUH

#include <stdio.h>
#include <stdlib.h>

#include "configs.cuh"     // the lists
#include "ffma.cuh"        // matmul_fast_fp32_kernel
#include "mma_tf32.cuh"    // matmul_fast_mma_kernel
#include "../ops/pdl.cuh"  // pdl_available
#include "wgmma_tf32.cuh"  // matmul_fast_wgmma_kernel

// what every matmul kernel takes, after the grid: C (M, N), A, B, the K slice length, whether the
// shapes allow 16-byte accesses, how the slices add up (MF_SPLIT_*) and the epilogue
typedef struct {
    float *C;
    const float *A, *B;
    int M, N, K, kchunk, vec, split;
    MatmulFastEpi epi;
} MfArgs;

// One launch of KERNEL: a cluster of the K slices for MF_SPLIT_CLUSTER, programmatic dependent launch
// when pdl (kernels/fast/ops/pdl.cuh). Above 48 KB of dynamic shared memory a kernel must be allowed it
// once (cudaFuncSetAttribute; a host-side setting, fine during graph capture): `allowed` is one flag
// per kernel.
template <auto KERNEL>
static void mf_launch_kernel(dim3 grid, int threads, int smem_floats, int pdl, cudaStream_t stream, const MfArgs &a) {
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[2];
    lc.gridDim = grid;
    lc.stream = stream;
    lc.attrs = attr;
    if (a.split == MF_SPLIT_CLUSTER) {
        attr[lc.numAttrs].id = cudaLaunchAttributeClusterDimension;
        attr[lc.numAttrs].val.clusterDim.x = 1;
        attr[lc.numAttrs].val.clusterDim.y = 1;
        attr[lc.numAttrs].val.clusterDim.z = grid.z;
        lc.numAttrs++;
    }
    if (pdl && pdl_available()) {
        attr[lc.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[lc.numAttrs].val.programmaticStreamSerializationAllowed = 1;
        lc.numAttrs++;
    }
    static bool allowed = false;
    lc.blockDim = dim3(threads);
    lc.dynamicSmemBytes = (size_t)smem_floats * sizeof(float);
    if (!allowed && lc.dynamicSmemBytes > 48 * 1024) {
        cudaCheck(cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)lc.dynamicSmemBytes));
        allowed = true;
    }
    cudaCheck(cudaLaunchKernelEx(&lc, KERNEL, a.C, a.A, a.B, a.M, a.N, a.K, a.kchunk, a.vec, a.split, a.epi));
}

// The launch of a kernel on operand copies (copies_bf16.cu, kmajor_tf32.cu), whose arguments differ
// from MfArgs: ARGS after the grid are the kernel's own. pdl and the 48 KB rule as mf_launch_kernel.
template <auto KERNEL, typename... Args>
static void mf_launch_smem(dim3 grid, int threads, int smem, int pdl, cudaStream_t stream, Args... args) {
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[1];
    lc.gridDim = grid;
    lc.blockDim = dim3(threads);
    lc.dynamicSmemBytes = (size_t)smem;
    lc.stream = stream;
    lc.attrs = attr;
    if (pdl && pdl_available()) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        lc.numAttrs = 1;
    }
    static bool allowed = false;   // above 48 KB a kernel must be allowed it, once
    if (!allowed && smem > 48 * 1024) {
        cudaCheck(cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        allowed = true;
    }
    cudaCheck(cudaLaunchKernelEx(&lc, KERNEL, args...));
}


// Launches configuration cfg of product PROD in precision TF32 (0, MF_TF32_ROUND, MF_TF32_EXACT,
// MF_BF16, MF_FP32_PIXELS); false when this build has no such kernel. The operands' layouts follow from the product:
// forward A (M, K) and B (N, K) "NT", dinp A (M, K) and B (K, N) "NN", dweight (K, M) and (K, N) "TN".
// MF_TF32_EXACT takes the mma.sync kernels without their rounding and, for the forward layout only,
// the wgmma kernel without its rounding pass; elsewhere the wgmma kernel rounds (the same products on
// TF32 values: rounding one changes nothing). MF_BF16 is the mma.sync kernels' only (wgmma takes its
// operands from shared memory, where they are FP32 here).
// a case of the switch below for an mma.sync configuration, in precision MMA_PREC (a macro defined
// where it is expanded)
#define MF_MMA_CASE(ID, BM, BN, BK, WM, WN, ST, EFF, FILL, OCC, BUILT)                                             \
        case ID:                                                                                                   \
            if constexpr ((MF_BUILT_HERE(BUILT) & bit) != 0) {                                                     \
                mf_launch_kernel<matmul_fast_mma_kernel<BM, BN, BK, WM, WN, ST, A_KC, B_KC, MMA_PREC>>(           \
                    grid, (BM / WM) * (BN / WN) * 32, mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 8), pdl, stream, \
                    a);                                                                                            \
                return true;                                                                                       \
            }                                                                                                      \
            return false;

// MF_FP32_PIXELS (the forward and weight-gradient products only) launches the 3xTF32 configurations
// built for FP32 in their pixel form; the FP32 ones on the CUDA cores have none.
template <int PROD, int TF32>
static bool mf_launch_mode(int cfg, dim3 grid, int pdl, cudaStream_t stream, const MfArgs &a) {
    constexpr bool A_KC = PROD != MF_DWEIGHT, B_KC = PROD == MF_FWD;
    constexpr bool PIX = TF32 == MF_FP32_PIXELS;
    constexpr int bit = MF_BUILT(PROD, PIX ? 0 : TF32);
    if constexpr (PIX && PROD == MF_DINP) {
        return false;
    } else if constexpr (TF32 == 0 || PIX) {
        switch (cfg) {
#define MF_CASE(ID, BM, BN, BK, TM, TN, ST, EFF, FILL, OCC, BUILT)                                                 \
        case ID:                                                                                                   \
            if constexpr (!PIX && (MF_BUILT_HERE(BUILT) & bit) != 0) {                                             \
                mf_launch_kernel<matmul_fast_fp32_kernel<BM, BN, BK, TM, TN, ST, A_KC, B_KC>>(                     \
                    grid, (BM / TM) * (BN / TN), mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 4), pdl, stream, a);  \
                return true;                                                                                       \
            }                                                                                                      \
            return false;
            MF_ALL_FP32_CONFIGS(MF_CASE)
#undef MF_CASE
#define MMA_PREC (PIX ? MF_FP32_PIXELS : MF_TF32X3)   // FP32 as 3xTF32 (kernels/fast/matmul/matmul_fast.h)
            MF_ALL_3XTF32_CONFIGS(MF_MMA_CASE)
#undef MMA_PREC
        }
    } else {
        constexpr bool RND_WG = !(TF32 == MF_TF32_EXACT && A_KC && B_KC);
        switch (cfg) {
#define MMA_PREC TF32
            MF_ALL_MMA_CONFIGS(MF_MMA_CASE)
#undef MMA_PREC
#define MF_CASE(ID, WGS, NB, ST, EFF, FILL, OCC, BUILT)                                                            \
        case ID:                                                                                                   \
            if constexpr (MF_HAVE_WGMMA && TF32 != MF_BF16 && (MF_BUILT_HERE(BUILT) & bit) != 0) {                 \
                mf_launch_kernel<matmul_fast_wgmma_kernel<WGS, NB, ST, A_KC, B_KC, RND_WG>>(                       \
                    grid, 128 * WGS, mf_wg_smem_floats(WGS, NB, ST, A_KC, B_KC), pdl, stream, a);                  \
                return true;                                                                                       \
            }                                                                                                      \
            return false;
            MF_ALL_WGMMA_CONFIGS(MF_CASE)
#undef MF_CASE
        }
    }
    return false;
}

// the launch for any precision; a configuration this build does not have stops the program
template <int PROD>
static void mf_launch_product(int tf32, int cfg, dim3 grid, int pdl, cudaStream_t stream, const MfArgs &a) {
    const bool done = tf32 == 0                ? mf_launch_mode<PROD, 0>(cfg, grid, pdl, stream, a)
                      : tf32 == MF_TF32_ROUND  ? mf_launch_mode<PROD, MF_TF32_ROUND>(cfg, grid, pdl, stream, a)
                      : tf32 == MF_TF32_EXACT  ? mf_launch_mode<PROD, MF_TF32_EXACT>(cfg, grid, pdl, stream, a)
                      : tf32 == MF_FP32_PIXELS ? mf_launch_mode<PROD, MF_FP32_PIXELS>(cfg, grid, pdl, stream, a)
                                               : mf_launch_mode<PROD, MF_BF16>(cfg, grid, pdl, stream, a);
    if (!done) {
        static const char *const names[] = {"forward", "dinp", "dweight"};
        fprintf(stderr, "error: matmul_fast: no kernel for configuration %d of the %s product with precision %d in this "
                        "build ---> try: the lists of kernels/fast/matmul/configs.cuh\n", cfg, names[PROD], tf32);
        exit(EXIT_FAILURE);
    }
    cudaCheck(cudaGetLastError());
}

// the launches of each product, one per kernels/fast/matmul_fast_<product>.cu
void mf_launch_forward(int tf32, int cfg, dim3 grid, int pdl, cudaStream_t stream, const MfArgs &a);
void mf_launch_dinp(int tf32, int cfg, dim3 grid, int pdl, cudaStream_t stream, const MfArgs &a);
void mf_launch_dweight(int tf32, int cfg, dim3 grid, int pdl, cudaStream_t stream, const MfArgs &a);

#endif  // MLP_FAST_LAUNCH_CUH
