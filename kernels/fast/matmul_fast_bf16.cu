/*
kernels/fast/matmul_fast_bf16.cu: the kernels on copies of the operands: the BF16-operand kernel's
configurations, planner and launch (kernels/fast/mma_bf16.cuh, wgmma_bf16.cuh), and the same wgmma
kernel on K-major TF32 copies (the interface is kernels/fast/matmul_fast.h's last two sections).
Compiled once, linked into the fast trainer, test_mlp and dev/cuda's benchmarks.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "matmul_fast.h"
#include "mma_bf16.cuh"    // matmul_bf16_kernel, MF_BF16OPS_CONFIGS
#include "planner.cuh"     // mf_num_sms
#include "wgmma_bf16.cuh"  // matmul_wgmma_ops_kernel
#include "wgmma_tma.cuh"   // matmul_wgmma_tf32tma_kernel, mf_tma_encoder, mf_tensor_map

// The wgmma configurations (ID, WGS, BN, ST, EFF, OCC): WGS warpgroups of 64 rows, BN columns, ST
// stages of BK = 64; built for sm_90a only (MF_WGMMA), where they are the planner's first choice.
#if defined(MF_WGMMA)
#define MF_BF16WG_CONFIGS(X)          \
    X(10, 2, 256, 4, 3.0f, 1)         \
    X(11, 2, 128, 4, 2.6f, 1)
#else
#define MF_BF16WG_CONFIGS(X)
#endif

#define MF_ROW_BF16OPS(ID, BM, BN, BK, WM, WN, ST, EFF, OCC)                                                   \
    {ID, MF_KIND_BF16_OPS, BM, BN, BK, WM, WN, ST, EFF, 2.0f, OCC, 0, (BM / WM) * (BN / WN) * 32,               \
     "BF16 operands " #BM "x" #BN "x" #BK " w" #WM "x" #WN " s" #ST},
#define MF_ROW_BF16WG(ID, WGS, BN, ST, EFF, OCC)                                                               \
    {ID, MF_KIND_BF16_OPS, 64 * WGS, BN, 64, 64, BN, ST, EFF, 2.0f, OCC, 0, 128 * WGS,                          \
     "BF16 operands, wgmma " #WGS " warpgroups x 64x" #BN " s" #ST},
static const MatmulFastCfg mf_bf16ops_cfgs[] = {MF_BF16OPS_CONFIGS(MF_ROW_BF16OPS) MF_BF16WG_CONFIGS(MF_ROW_BF16WG)};
#undef MF_ROW_BF16OPS
#undef MF_ROW_BF16WG
#define MF_NUM_BF16OPS_CFGS ((int)(sizeof(mf_bf16ops_cfgs) / sizeof(mf_bf16ops_cfgs[0])))

#ifndef MF_BF16_MIN_FILL   // the default (a -D at build time for comparisons)
#define MF_BF16_MIN_FILL 0.5f
#endif
static float mf_bf16_min_fill = MF_BF16_MIN_FILL;

static __global__ void mf_bf16_copy_kernel(unsigned short *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = mf_bf16_bits(src[i]);
}

void matmul_fast_bf16_copy(__nv_bfloat16 *dst, const float *src, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    const size_t blocks = (n + 255) / 256;
    mf_bf16_copy_kernel<<<(int)(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(reinterpret_cast<unsigned short *>(dst),
                                                                                 src, n);
    cudaCheck(cudaGetLastError());
}

void matmul_fast_bf16_set_min_fill(float min_fill) { mf_bf16_min_fill = min_fill; }

const MatmulFastCfg *matmul_fast_bf16_configs(int *count) {
    *count = MF_NUM_BF16OPS_CFGS;
    return mf_bf16ops_cfgs;
}

// The 16-byte copies need the operands' contiguous widths to be multiples of 8 elements: forward A
// (M, K) and B (N, K): K; dinp A (M, K): K, B (K, N): N; dweight A (K, M): M, B (K, N): N. And the
// output's rows (N) too, for the paired stores of its BF16 copy.
int matmul_fast_bf16_fits(MfProduct prod, int M, int N, int K) {
    if (M <= 0 || N <= 0 || K <= 0 || N % 8 != 0) return 0;
    return prod == MF_DWEIGHT ? M % 8 == 0 : K % 8 == 0;
}

// Blocks run in waves of OCC per SM, and blocks that share an SM share its time: a configuration costs
// (waves x OCC) x its tile x (K steps + FILL), over EFF. It is a candidate only where its tiles fill at
// least min_fill of the first wave; below that the FP32-operand kernels' K splits win (the wide model
// at batch 256: 8 to 32 tiles of these sizes on 132 SMs).
int matmul_fast_bf16_plan(MfProduct prod, int M, int N, int K) {
    if (!matmul_fast_bf16_fits(prod, M, N, K)) return -1;
    int best = -1;
    float best_cost = 0.0f;
    for (int i = 0; i < MF_NUM_BF16OPS_CFGS; i++) {
        const MatmulFastCfg *c = &mf_bf16ops_cfgs[i];
        const long tiles = (long)mf_ceil_div(M, c->bm) * mf_ceil_div(N, c->bn);
        const long slots = (long)mf_num_sms() * c->occ;
        if ((float)tiles < mf_bf16_min_fill * (float)slots) continue;
        const long waves = (tiles + slots - 1) / slots;
        const float cost =
            (float)(waves * c->occ) * c->bm * c->bn * ((float)(mf_ceil_div(K, c->bk) * c->bk) + c->fill * 32) / c->eff;
        if (best < 0 || cost < best_cost) {
            best = c->id;
            best_cost = cost;
        }
    }
    return best;
}

// the launch of one kernel; ARGS after the grid: the kernel's own (the wgmma kernel's end with its
// out_bf16, which the mma.sync kernel does not take)
template <auto KERNEL, typename... Args>
static void mf_bf16_launch(dim3 grid, int threads, int smem, int pdl, cudaStream_t stream, Args... args) {
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

// true: out_bf16 was written by the kernel (wgmma); false: the caller copies it
template <bool A_KC, bool B_KC>
static bool mf_bf16_launch_layout(int cfg, dim3 grid, int pdl, cudaStream_t stream, float *C, const __nv_bfloat16 *A,
                                  const __nv_bfloat16 *B, int M, int N, int K, int vec, const MatmulFastEpi &epi,
                                  __nv_bfloat16 *out_bf16) {
    switch (cfg) {
#define MF_CASE(ID, BM, BN, BK, WM, WN, ST, EFF, OCC)                                                           \
    case ID:                                                                                                    \
        mf_bf16_launch<matmul_bf16_kernel<BM, BN, BK, WM, WN, ST, A_KC, B_KC>>(                                 \
            grid, (BM / WM) * (BN / WN) * 32, mf_b16_smem_bytes(BM, BN, BK, ST, A_KC, B_KC), pdl, stream, C, A, \
            B, M, N, K, vec, epi);                                                                              \
        return false;
        MF_BF16OPS_CONFIGS(MF_CASE)
#undef MF_CASE
#define MF_CASE(ID, WGS, BN, ST, EFF, OCC)                                                                      \
    case ID:                                                                                                    \
        mf_bf16_launch<matmul_wgmma_ops_kernel<__nv_bfloat16, WGS, BN, ST, A_KC, B_KC>>(                       \
            grid, 128 * WGS, mf_wgb16_smem_bytes(WGS, BN, ST), pdl, stream, C, A, B, M, N, K, vec, epi, out_bf16, \
            (float *)NULL);                                                                                     \
        return true;
        MF_BF16WG_CONFIGS(MF_CASE)
#undef MF_CASE
    }
    return false;
}

void matmul_fast_bf16_run(MfProduct prod, int cfg, float *C, const __nv_bfloat16 *A, const __nv_bfloat16 *B, int M,
                          int N, int K, const MatmulFastEpi *epi, __nv_bfloat16 *out_bf16, int pdl,
                          cudaStream_t stream) {
    if (M <= 0 || N <= 0) return;
    static const char *const names[] = {"forward", "dinp", "dweight"};
    const MatmulFastCfg *c = NULL;
    for (int i = 0; i < MF_NUM_BF16OPS_CFGS; i++)
        if (mf_bf16ops_cfgs[i].id == cfg) c = &mf_bf16ops_cfgs[i];
    if (c == NULL || !matmul_fast_bf16_fits(prod, M, N, K) || ((uintptr_t)A & 15) || ((uintptr_t)B & 15) ||
        ((uintptr_t)out_bf16 & 7)) {
        fprintf(stderr, "error: matmul_fast_bf16_run: the %s product of %d x %d x %d with configuration %d: %s\n",
                names[prod], M, N, K, cfg, c == NULL ? "no such configuration" :
                "the operands' widths must be multiples of 8 and the pointers 16-byte aligned");
        exit(EXIT_FAILURE);
    }
    const int vec = N % 4 == 0 && ((uintptr_t)C & 15) == 0;
    const dim3 grid(mf_ceil_div(N, c->bn), mf_ceil_div(M, c->bm));
    bool copied;
    if (prod == MF_FWD)
        copied = mf_bf16_launch_layout<true, true>(cfg, grid, pdl, stream, C, A, B, M, N, K, vec, *epi, out_bf16);
    else if (prod == MF_DINP)
        copied = mf_bf16_launch_layout<true, false>(cfg, grid, pdl, stream, C, A, B, M, N, K, vec, *epi, out_bf16);
    else
        copied = mf_bf16_launch_layout<false, false>(cfg, grid, pdl, stream, C, A, B, M, N, K, vec, *epi, out_bf16);
    cudaCheck(cudaGetLastError());
    if (!copied && out_bf16 != NULL) matmul_fast_bf16_copy(out_bf16, C, (size_t)M * N, stream);   // (mma.sync)
}

// ----------------------------------------------------------------------------
// -x 1's large products on K-major TF32 copies: matmul_wgmma_ops_kernel with T = float, in one of the
// configurations below (ID, warpgroups, BN, stages of 32 k, P). All three products take the TMA one
// in clusters of two, 4 (the fastest measured: dev/NOTES.md; where the driver gives no way to make its
// tensor maps, the forward and dinp products take the first and dweight the persistent one, 3), unless
// MLP_TF32K_CFGS says otherwise ("F,D,W": the forward, dinp and dweight products' IDs, for comparisons
// without a rebuild; matmul_fast_tf32k_cfg).
// P = 1: the persistent kernel (matmul_wgmma_tf32p_kernel: the epilogue beside the next tile's
// products, one block an SM; 2 warpgroups of products, WGS unused). Its 128 x 128 tiles read a third
// more from L2 than 128 x 256 ones, which costs the forward and dinp products more than the overlap
// gains them; dweight's SGD epilogue, six floats a weight, gains more. P = 2: the TMA kernel in
// clusters of two blocks that share the B tile (matmul_wgmma_tf32tma_kernel, kernels/fast/wgmma_tma.cuh);
// P = 3 the same without clusters.
#define MF_TF32K_CONFIGS(X) \
    X(0, 2, 256, 4, 0)   /* 128 x 256, 193 KB: one block an SM */ \
    X(1, 2, 128, 3, 0)   /* 128 x 128, 97 KB: two blocks an SM, one's epilogue beside the other's products */ \
    X(2, 1, 128, 4, 0)   /* 64 x 128, 97 KB: two blocks an SM */ \
    X(3, 2, 128, 4, 1)   /* 128 x 128 persistent, 197 KB, the epilogue in warpgroups of its own */ \
    X(4, 2, 256, 4, 2)   /* 128 x 256 by TMA, two blocks sharing B, 193 KB */ \
    X(5, 2, 256, 4, 3)   /* the same without clusters: each block brings its own B */

#ifndef MF_TF32K_MIN_FILL   // the default (a -D at build time for comparisons)
#define MF_TF32K_MIN_FILL 0.5f
#endif
static float mf_tf32k_min_fill = MF_TF32K_MIN_FILL;

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

// the fill counts the first configuration's 128 x 256 tiles, whichever the product takes
int matmul_fast_tf32k_fits(int M, int N, int K) {
#if defined(MF_WGMMA)
    if (M <= 0 || N <= 0 || K <= 0 || K % 4 != 0) return 0;
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
    if (mf_tma_encoder() == NULL) return -1;
#define MF_TMA(ID, WGS, BN, ST, P) if (P == 2) return ID;
    MF_TF32K_CONFIGS(MF_TMA)
#undef MF_TMA
#endif
    return -1;
}

// the picks (forward, dinp, dweight): the TMA configuration for all three (or 0, 0 and the persistent
// configuration without it), or MLP_TF32K_CFGS's
typedef struct { int cfg[3]; } MfTf32kPicks;
static MfTf32kPicks mf_tf32k_read_picks(void) {
    const int tma = mf_tf32k_tma_cfg();
    MfTf32kPicks p = {{0, 0, matmul_fast_tf32k_persistent_cfg()}};
    if (tma >= 0) p = {{tma, tma, tma}};
    const char *env = getenv("MLP_TF32K_CFGS");
    if (env == NULL) return p;
    const int n = matmul_fast_tf32k_num_cfgs();
    int f, d, w;
    if (sscanf(env, "%d,%d,%d", &f, &d, &w) != 3 || f < 0 || d < 0 || w < 0 || f >= n || d >= n || w >= n) {
        fprintf(stderr, "error: MLP_TF32K_CFGS=%s: three configuration IDs from 0 to %d, as F,D,W\n", env, n - 1);
        exit(EXIT_FAILURE);
    }
    p.cfg[MF_FWD] = f, p.cfg[MF_DINP] = d, p.cfg[MF_DWEIGHT] = w;
    return p;
}

int matmul_fast_tf32k_cfg(MfProduct prod) {
    static const MfTf32kPicks picks = mf_tf32k_read_picks();   // (read once, safely from -g's threads too)
    return picks.cfg[prod];
}

#if defined(MF_WGMMA)
// the TMA kernel: tiles of 128 x 256, clusters of two blocks along M (grid.y even)
template <int ST, int MC>
static void mf_tf32k_launch_tma(int pdl, cudaStream_t stream, float *C, const float *A, const float *B, int M, int N,
                                int K, int vec, const MatmulFastEpi &epi, float *param_t) {
    CUtensorMap ta, tb;
    mf_tensor_map(&ta, A, M, K, 128);
    mf_tensor_map(&tb, B, N, K, 128);
    const int smem = mf_wgtma_smem_bytes(ST);
    static bool allowed = false;
    if (!allowed) {
        cudaCheck(cudaFuncSetAttribute(matmul_wgmma_tf32tma_kernel<ST, MC>,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        allowed = true;
    }
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[2];
    lc.gridDim = dim3(mf_ceil_div(N, 256), MC ? (mf_ceil_div(M, 128) + 1) / 2 * 2 : mf_ceil_div(M, 128));
    lc.blockDim = dim3(384);
    lc.dynamicSmemBytes = (size_t)smem;
    lc.stream = stream;
    lc.attrs = attr;
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = 1, attr[0].val.clusterDim.y = 2, attr[0].val.clusterDim.z = 1;
    lc.numAttrs = MC ? 1 : 0;
    if (pdl && pdl_available()) {
        attr[lc.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[lc.numAttrs].val.programmaticStreamSerializationAllowed = 1;
        lc.numAttrs++;
    }
    cudaCheck(cudaLaunchKernelEx(&lc, matmul_wgmma_tf32tma_kernel<ST, MC>, ta, tb, C, M, N, K, vec, epi, param_t));
}

// one configuration's launch: the persistent kernel (P = 1) on at most one block an SM (or the test's
// cap), the TMA kernel (P = 2) in clusters of two, else a block a tile
template <int WGS, int BN, int ST, int P>
static void mf_tf32k_launch(int pdl, cudaStream_t stream, float *C, const float *A, const float *B, int M, int N, int K,
                            int vec, const MatmulFastEpi &epi, float *param_t) {
    if constexpr (P >= 2) {
        static_assert(WGS == 2 && BN == 256, "the TMA kernel's tile is 128 x 256");
        mf_tf32k_launch_tma<ST, P == 2>(pdl, stream, C, A, B, M, N, K, vec, epi, param_t);
    } else if constexpr (P == 1) {
        const int tiles = mf_ceil_div(N, BN) * mf_ceil_div(M, 128);
        const int cap = mf_tf32k_grid_cap > 0 ? mf_tf32k_grid_cap : mf_num_sms();
        mf_bf16_launch<matmul_wgmma_tf32p_kernel<BN, ST>>(dim3(tiles < cap ? tiles : cap), 512,
                                                          mf_wgtp_smem_bytes(BN, ST), pdl, stream, C, A, B, M, N, K,
                                                          vec, epi, param_t);
    } else {
        mf_bf16_launch<matmul_wgmma_ops_kernel<float, WGS, BN, ST, true, true>>(
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
    // copies; for the transposed copy (SGD or dinp), also M % 4 == 0 (kernels/fast/wgmma_bf16.cuh,
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
