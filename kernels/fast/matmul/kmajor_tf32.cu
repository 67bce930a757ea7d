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

// The configurations (ID, warpgroups, BN, stages of 32 k, P, EFF). The products take the TMA kernel in
// clusters of two (P = 2), the fastest of them on the trainer's products (doc/fast.md), in the width
// whose tiles cost least (mf_tf32k_tma_pick: waves of 128 x BN tiles x BN / EFF); where the driver
// gives no way to make its tensor maps, the forward and dinp products take the first and dweight the
// persistent one, 3 (matmul_fast_tf32k_cfg). test_mlp runs every one (matmul_fast_tf32k_run_cfg).
// P = 1: the persistent kernel (matmul_wgmma_tf32p_kernel: the epilogue beside the next tile's
// products, one block an SM; 2 warpgroups of products, WGS unused). Its 128 x 128 tiles read a third
// more from L2 than 128 x 256 ones, which costs the forward and dinp products more than the overlap
// gains them; dweight's SGD epilogue, six floats a weight, gains more. P = 2: the TMA kernel in
// clusters of two blocks that share the B tile (matmul_wgmma_tma_kernel); P = 3 the same without
// clusters. EFF: the TMA tiles' relative speed a column, fitted to each one's time alone on the
// products of a spread of models (dev/bin/tune_check --families; doc/fast.md): a narrower tile reads
// more of the operands from L2 per product, and fills the last wave better.
#define MF_TF32K_CONFIGS(X) \
    X(0, 2, 256, 4, 0, 0.0f)   /* 128 x 256, 193 KB: one block an SM */ \
    X(1, 2, 128, 3, 0, 0.0f)   /* 128 x 128, 97 KB: two blocks an SM, one's epilogue beside the other's products */ \
    X(2, 1, 128, 4, 0, 0.0f)   /* 64 x 128, 97 KB: two blocks an SM */ \
    X(3, 2, 128, 4, 1, 0.0f)   /* 128 x 128 persistent, 197 KB, the epilogue in warpgroups of its own */ \
    X(4, 2, 256, 4, 2, 1.0f)   /* 128 x 256 by TMA, two blocks sharing B, 193 KB */ \
    X(5, 2, 256, 4, 3, 0.0f)   /* the same without clusters: each block brings its own B */ \
    X(6, 2, 192, 5, 2, 0.97f)  /* 128 x 192 by TMA, two blocks sharing B, 201 KB */ \
    X(7, 2, 128, 6, 2, 0.88f)  /* 128 x 128 by TMA, two blocks sharing B, 193 KB */

// the least share of the GPU's SMs the tiles must fill to be taken (matmul_fast_tf32k_fits); tests set
// it to 0 to run these kernels on small shapes. (At 0.42, 56 tiles of 128 x 128 for the weight
// gradient of 1000 x 784 over a batch of 8192, this kernel is still well ahead of the FP32-operand
// kernels' K splits: doc/fast.md.)
static float mf_tf32k_min_fill = 0.4f;

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

// the table's rows as data, for the functions that choose among them
typedef struct { int id, wgs, bn, p; float eff; } MfTf32kRow;
static const MfTf32kRow mf_tf32k_rows[] = {
#define MF_ROW(ID, WGS, BN, ST, P, EFF) {ID, WGS, BN, P, EFF},
    MF_TF32K_CONFIGS(MF_ROW)
#undef MF_ROW
};
#define MF_TF32K_NUM_ROWS ((int)(sizeof(mf_tf32k_rows) / sizeof(mf_tf32k_rows[0])))

void matmul_fast_tf32k_tile(int cfg, int *bm, int *bn) {
    for (int i = 0; i < MF_TF32K_NUM_ROWS; i++)
        if (mf_tf32k_rows[i].id == cfg) *bm = 64 * mf_tf32k_rows[i].wgs, *bn = mf_tf32k_rows[i].bn;
}

static int mf_tf32k_tma_pick(int M, int N);

// the fill counts the tiles of the configuration the product takes (the TMA kernel's pick), or without
// the TMA the first configuration's, 128 x 256
int matmul_fast_tf32k_fits(int M, int N, int K) {
#if defined(MF_WGMMA)
    if (M <= 0 || N <= 0 || K <= 0 || K % 4 != 0 || !matmul_fast_target()->wgmma) return 0;
    const int pick = mf_tf32k_tma_pick(M, N);
    int bm = 128, bn = 256;
    if (pick >= 0) matmul_fast_tf32k_tile(pick, &bm, &bn);
    const long tiles = (long)mf_ceil_div(M, bm) * mf_ceil_div(N, bn);
    return (float)tiles >= mf_tf32k_min_fill * (float)mf_num_sms();
#else
    (void)M, (void)N, (void)K;
    return 0;
#endif
}

int matmul_fast_tf32k_persistent_cfg(void) {
    for (int i = 0; i < MF_TF32K_NUM_ROWS; i++)
        if (mf_tf32k_rows[i].p == 1) return mf_tf32k_rows[i].id;
    return -1;
}

int matmul_fast_tf32k_num_cfgs(void) { return MF_TF32K_NUM_ROWS; }

// The TMA configuration in clusters of two whose tiles cost least for C (M, N), where the driver can
// make its tensor maps; else -1. One block an SM: a configuration costs its waves of tiles x BN / EFF
// (the tiles are all 128 rows, and K is the same for each).
static int mf_tf32k_tma_pick(int M, int N) {
    int best = -1;
#if defined(MF_WGMMA)
    if (!matmul_fast_target()->tma) return -1;
    float best_cost = 0.0f;
    const long sms = mf_num_sms();
    for (int i = 0; i < MF_TF32K_NUM_ROWS; i++) {
        const MfTf32kRow *r = &mf_tf32k_rows[i];
        if (r->p != 2) continue;
        const long tiles = (long)mf_ceil_div(M, 64 * r->wgs) * mf_ceil_div(N, r->bn);
        const float cost = (float)((tiles + sms - 1) / sms) * (float)r->bn / r->eff;
        if (best < 0 || cost < best_cost) best = r->id, best_cost = cost;
    }
#else
    (void)M, (void)N;
#endif
    return best;
}

// the pick for product prod of C (M, N): the TMA kernel's, or without it 0 for forward and dinp and
// the persistent configuration for dweight
int matmul_fast_tf32k_cfg(MfProduct prod, int M, int N) {
    const int tma = mf_tf32k_tma_pick(M, N);
    if (tma >= 0) return tma;
    return prod == MF_DWEIGHT ? matmul_fast_tf32k_persistent_cfg() : 0;
}

#if defined(MF_WGMMA)
// one configuration's launch: the persistent kernel (P = 1) on at most one block an SM (or the test's
// cap), the TMA kernel (P = 2) in clusters of two, else a block a tile
template <int WGS, int BN, int ST, int P>
static void mf_tf32k_launch(int pdl, cudaStream_t stream, float *C, const float *A, const float *B, int M, int N, int K,
                            int vec, const MatmulFastEpi &epi, float *param_t) {
    if constexpr (P >= 2) {
        static_assert(WGS == 2, "the TMA kernel's tiles are 128 rows");
        mf_tma_launch<float, BN, ST, P == 2, true, true>(pdl, stream, C, A, B, M, N, K, vec, epi, param_t, nullptr);
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
#define MF_CASE(ID, WGS, BN, ST, P, EFF)                                                                         \
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
    matmul_fast_tf32k_run_cfg(matmul_fast_tf32k_cfg(prod, M, N), C, A, B, M, N, K, epi, param_t, pdl, stream);
}
