/*
kernels/fast/matmul/kmajor_tf32.cu: -x 1's large products on K-major TF32 copies of their operands
(the interface: kernels/fast/matmul/matmul_fast.h's last section). wgmma reads 32-bit operands from
shared memory K-major only, so the trainer keeps such copies of the operands that are not; the
kernels are kernels/fast/matmul/wgmma_kmajor.cuh's with T = float (and its persistent form) and the
TMA kernel of kernels/fast/matmul/wgmma_tma.cuh. sm_90a only (MF_WGMMA); another build has the
functions, which say there is no such kernel. Compiled once, linked into the fast trainer, test_mlp
and dev/cuda's benchmarks.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "launch.cuh"        // mf_launch_smem
#include "matmul_fast.h"
#include "planner.cuh"       // mf_num_sms
#include "wgmma_kmajor.cuh"  // matmul_wgmma_ops_kernel, matmul_wgmma_tf32p_kernel
#include "wgmma_tma.cuh"     // matmul_wgmma_tma_kernel, mf_tma_launch

// The configurations (ID, warpgroups, BN, stages of 32 k, P). All three products take the TMA one in
// clusters of two, 4, the fastest of them on the trainer's products (doc/fast.md); where the driver
// gives no way to make its tensor maps, the forward and dinp products take the first and dweight the
// persistent one, 3 (matmul_fast_tf32k_cfg). test_mlp runs every one (matmul_fast_tf32k_run_cfg).
// P = 1: the persistent kernel (matmul_wgmma_tf32p_kernel: the epilogue beside the next tile's
// products, one block an SM; 2 warpgroups of products, WGS unused). Its 128 x 128 tiles read a third
// more from L2 than 128 x 256 ones, which costs the forward and dinp products more than the overlap
// gains them; dweight's SGD epilogue, six floats a weight, gains more. P = 2: the TMA kernel in
// clusters of two blocks that share the B tile (matmul_wgmma_tma_kernel); P = 3 the same without
// clusters.
#define MF_TF32K_CONFIGS(X) \
    X(0, 2, 256, 4, 0)   /* 128 x 256, 193 KB: one block an SM */ \
    X(1, 2, 128, 3, 0)   /* 128 x 128, 97 KB: two blocks an SM, one's epilogue beside the other's products */ \
    X(2, 1, 128, 4, 0)   /* 64 x 128, 97 KB: two blocks an SM */ \
    X(3, 2, 128, 4, 1)   /* 128 x 128 persistent, 197 KB, the epilogue in warpgroups of its own */ \
    X(4, 2, 256, 4, 2)   /* 128 x 256 by TMA, two blocks sharing B, 193 KB */ \
    X(5, 2, 256, 4, 3)   /* the same without clusters: each block brings its own B */

// the least share of the GPU's SMs the tiles must fill to be taken (matmul_fast_tf32k_fits); tests set
// it to 0 to run these kernels on small shapes
static float mf_tf32k_min_fill = 0.5f;

// the persistent configuration's grid: at most this many blocks (0: one an SM); tests set it low so that
// each block takes several tiles
static int mf_tf32k_grid_cap = 0;

int matmul_fast_tf32k_set_grid_cap(int blocks) {
    const int old = mf_tf32k_grid_cap;
    mf_tf32k_grid_cap = blocks > 0 ? blocks : 0;
    return old;
}

float matmul_fast_tf32k_set_min_fill(float min_fill) {
    const float old = mf_tf32k_min_fill;
    mf_tf32k_min_fill = min_fill;
    return old;
}

void matmul_fast_tf32k_tile(int cfg, int *bm, int *bn) {
#define MF_TILE(ID, WGS, BN, ST, P) if (cfg == ID) *bm = 64 * WGS, *bn = BN;
    MF_TF32K_CONFIGS(MF_TILE)
#undef MF_TILE
}

// the fill counts the first configuration's 128 x 256 tiles, whichever the product takes
int matmul_fast_tf32k_fits(int M, int N, int K) {
#if defined(MF_WGMMA)
    if (M <= 0 || N <= 0 || K <= 0 || K % 4 != 0 || !matmul_fast_target()->wgmma) return 0;
    const long tiles = (long)mf_ceil_div(M, 128) * mf_ceil_div(N, 256);
    return (float)tiles >= mf_tf32k_min_fill * (float)mf_num_sms();
#else
    (void)M, (void)N, (void)K;
    return 0;
#endif
}

int matmul_fast_tf32k_persistent_cfg(void) {
#define MF_PERSISTENT(ID, WGS, BN, ST, P) if (P == 1) return ID;
    MF_TF32K_CONFIGS(MF_PERSISTENT)
#undef MF_PERSISTENT
    return -1;
}

int matmul_fast_tf32k_num_cfgs(void) {
    int n = 0;
#define MF_COUNT(ID, WGS, BN, ST, P) n++;
    MF_TF32K_CONFIGS(MF_COUNT)
#undef MF_COUNT
    return n;
}

// the TMA configuration in clusters of two, where the driver can make its tensor maps; else -1
static int mf_tf32k_tma_cfg(void) {
#if defined(MF_WGMMA)
    if (!matmul_fast_target()->tma) return -1;
#define MF_TMA(ID, WGS, BN, ST, P) if (P == 2) return ID;
    MF_TF32K_CONFIGS(MF_TMA)
#undef MF_TMA
#endif
    return -1;
}

// the picks (forward, dinp, dweight): the TMA configuration for all three, or without it 0, 0 and the
// persistent configuration
typedef struct { int cfg[3]; } MfTf32kPicks;
static MfTf32kPicks mf_tf32k_picks(void) {
    const int tma = mf_tf32k_tma_cfg();
    MfTf32kPicks p = {{0, 0, matmul_fast_tf32k_persistent_cfg()}};
    if (tma >= 0) p = {{tma, tma, tma}};
    return p;
}

int matmul_fast_tf32k_cfg(MfProduct prod) {
    return mf_tf32k_picks().cfg[prod];
}

#if defined(MF_WGMMA)
// one configuration's launch: the persistent kernel (P = 1) on at most one block an SM (or the test's
// cap), the TMA kernel (P = 2) in clusters of two, else a block a tile
template <int WGS, int BN, int ST, int P>
static void mf_tf32k_launch(int pdl, cudaStream_t stream, float *C, const float *A, const float *B, int M, int N, int K,
                            int vec, const MatmulFastEpi &epi, float *param_t) {
    if constexpr (P >= 2) {
        static_assert(WGS == 2 && BN == 256, "the TMA kernel's tile is 128 x 256");
        mf_tma_launch<float, ST, P == 2, true, true>(pdl, stream, C, A, B, M, N, K, vec, epi, param_t, nullptr);
    } else if constexpr (P == 1) {
        const int tiles = mf_ceil_div(N, BN) * mf_ceil_div(M, 128);
        const int cap = mf_tf32k_grid_cap > 0 ? mf_tf32k_grid_cap : mf_num_sms();
        mf_launch_smem<matmul_wgmma_tf32p_kernel<BN, ST>>(dim3(tiles < cap ? tiles : cap), 512,
                                                          mf_wgtp_smem_bytes(BN, ST), pdl, stream, C, A, B, M, N, K,
                                                          vec, epi, param_t);
    } else {
        mf_launch_smem<matmul_wgmma_ops_kernel<float, WGS, BN, ST, true, true>>(
            dim3(mf_ceil_div(N, BN), mf_ceil_div(M, 64 * WGS)), 128 * WGS, mf_wgb16_smem_bytes(WGS, BN, ST), pdl,
            stream, C, A, B, M, N, K, vec, epi, (__nv_bfloat16 *)NULL, param_t);
    }
}
#endif

void matmul_fast_tf32k_run_cfg(int cfg, float *C, const float *A, const float *B, int M, int N, int K,
                               const MatmulFastEpi *epi, float *param_t, int pdl, cudaStream_t stream) {
    if (M <= 0 || N <= 0) return;
#if defined(MF_WGMMA)
    if (K <= 0 || K % 4 != 0 || ((uintptr_t)A & 15) || ((uintptr_t)B & 15) || cfg < 0 ||
        cfg >= matmul_fast_tf32k_num_cfgs()) {
        fprintf(stderr, "error: matmul_fast_tf32k_run: %d x %d x %d, configuration %d: K must be a multiple of 4, the "
                "operands 16-byte aligned, the configuration one of 0 to %d\n", M, N, K, cfg,
                matmul_fast_tf32k_num_cfgs() - 1);
        exit(EXIT_FAILURE);
    }
    // float4 stores; for the SGD epilogue, float4 loads and stores of W, its momentum and its TF32
    // copies; for the transposed copy (SGD or dinp), also M % 4 == 0 (kernels/fast/matmul/wgmma_kmajor.cuh,
    // mf_wg_tf32_store4)
    const MatmulFastSgd &sg = epi->sgd;
    const int t_kind = epi->kind == MF_EPI_SGD || epi->kind == MF_EPI_DINP;
    const int vec = N % 4 == 0 && ((uintptr_t)C & 15) == 0 &&   // (C NULL: the SGD epilogue's gradient unstored)
                    (epi->kind != MF_EPI_SGD || (((uintptr_t)sg.param | (uintptr_t)sg.mbuf |
                                                  (uintptr_t)sg.param_tf32) & 15) == 0) &&
                    (epi->kind != MF_EPI_DINP || param_t == NULL || ((uintptr_t)epi->aux & 15) == 0) &&
                    (param_t == NULL || (M % 4 == 0 && ((uintptr_t)param_t & 15) == 0));
    if ((param_t != NULL && (!t_kind || !vec)) || (C == NULL && (epi->kind != MF_EPI_SGD || !vec))) {
        fprintf(stderr, "error: matmul_fast_tf32k_run: a transposed copy (of the SGD step's weights or dinp), or no "
                "gradient (SGD), needs N and M multiples of 4 and 16-byte aligned pointers (%d x %d)\n", M, N);
        exit(EXIT_FAILURE);
    }
    switch (cfg) {
#define MF_CASE(ID, WGS, BN, ST, P)                                                                              \
    case ID:                                                                                                     \
        mf_tf32k_launch<WGS, BN, ST, P>(pdl, stream, C, A, B, M, N, K, vec, *epi, param_t);                      \
        break;
        MF_TF32K_CONFIGS(MF_CASE)
#undef MF_CASE
    }
    cudaCheck(cudaGetLastError());
#else
    (void)cfg, (void)C, (void)A, (void)B, (void)K, (void)epi, (void)param_t, (void)pdl, (void)stream;
    fprintf(stderr, "error: matmul_fast_tf32k_run: this build has no wgmma kernel (GPU_ARCH=90 builds it)\n");
    exit(EXIT_FAILURE);
#endif
}

void matmul_fast_tf32k_run(MfProduct prod, float *C, const float *A, const float *B, int M, int N, int K,
                           const MatmulFastEpi *epi, float *param_t, int pdl, cudaStream_t stream) {
    matmul_fast_tf32k_run_cfg(matmul_fast_tf32k_cfg(prod), C, A, B, M, N, K, epi, param_t, pdl, stream);
}
