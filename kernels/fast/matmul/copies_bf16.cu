/*
kernels/fast/matmul/copies_bf16.cu: -x 2's products on BF16 copies of their operands
(MatmulFastBf16): the configurations of the BF16-operand kernels (mma.sync, kernels/fast/matmul/mma_bf16.cuh;
wgmma on sm_90a, kernels/fast/matmul/wgmma_kmajor.cuh with T = __nv_bfloat16, and its TMA form,
kernels/fast/matmul/wgmma_tma.cuh), the planner that picks
one (or none: then the FP32-operand kernels run) and the launch; and the copy kernel that rounds an
FP32 buffer to BF16. The interface is kernels/fast/matmul/matmul_fast.h's BF16 section. Why copies:
the large products are bound by the bytes they read, and a BF16 operand is half an FP32 one.
Compiled once, linked into the fast trainer, test_mlp and dev/cuda's benchmarks.
*/
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "launch.cuh"        // mf_launch_smem
#include "matmul_fast.h"
#include "mma_bf16.cuh"      // matmul_bf16_kernel, MF_BF16OPS_CONFIGS
#include "planner.cuh"       // mf_num_sms
#include "wgmma_kmajor.cuh"  // matmul_wgmma_ops_kernel
#include "wgmma_tma.cuh"     // mf_tma_launch

// The wgmma configurations (ID, WGS, BN, ST, EFF, OCC): WGS warpgroups of 64 rows, BN columns, ST
// stages of BK = 64; built for sm_90a only (MF_WGMMA), where they are the planner's first choice.
// MF_BF16WG_CONFIGS: matmul_wgmma_ops_kernel (the threads copy the tiles); MF_BF16TMA_CONFIGS:
// matmul_wgmma_tma_kernel (the TMA copies them, clusters of two blocks share the B tile), where the
// driver can make its tensor maps. 64 x 128 fills the GPU where 128-row tiles leave it half idle (a
// batch of 512 on 2048 outputs: 128 tiles against 64); the TMA kernel's 192- and 128-wide tiles fill
// the last wave where 256-wide ones leave it part idle (4096 x 1536: 192 tiles of 128 x 256 on 132 SMs
// are 1.45 waves, 256 of 128 x 192 are 1.94). EFF of every row (and of
// mma_bf16.cuh's) fitted to each configuration's time on the products of a spread of models on an
// H200 (dev/bin/tune_check --families; doc/fast.md): the planner's pick is within 4 % of the fastest
// on each of them.
#if defined(MF_WGMMA)
#define MF_BF16WG_CONFIGS(X)          \
    X(10, 2, 256, 4, 3.5f, 1)         \
    X(11, 2, 128, 4, 2.6f, 1)         \
    X(12, 1, 128, 4, 2.0f, 1)
#define MF_BF16TMA_CONFIGS(X)         \
    X(14, 2, 256, 4, 4.5f, 1)         \
    X(15, 2, 192, 5, 4.5f, 1)         \
    X(16, 2, 128, 6, 4.5f, 1)
#else
#define MF_BF16WG_CONFIGS(X)
#define MF_BF16TMA_CONFIGS(X)
#endif

#define MF_ROW_BF16OPS(ID, BM, BN, BK, WM, WN, ST, EFF, OCC)                                                   \
    {ID, MF_KIND_BF16_OPS, BM, BN, BK, WM, WN, ST, EFF, 0.0f, OCC, 0, (BM / WM) * (BN / WN) * 32,               \
     "BF16 operands " #BM "x" #BN "x" #BK " w" #WM "x" #WN " s" #ST},
#define MF_ROW_BF16WG(ID, WGS, BN, ST, EFF, OCC)                                                               \
    {ID, MF_KIND_BF16_OPS, 64 * WGS, BN, 64, 64, BN, ST, EFF, 2.0f, OCC, 0, 128 * WGS,                          \
     "BF16 operands, wgmma " #WGS " warpgroups x 64x" #BN " s" #ST},
#define MF_ROW_BF16TMA(ID, WGS, BN, ST, EFF, OCC)                                                              \
    {ID, MF_KIND_BF16_OPS, 64 * WGS, BN, 64, 64, BN, ST, EFF, 2.0f, OCC, 0, 128 * WGS + 128,                    \
     "BF16 operands, wgmma " #WGS " warpgroups x 64x" #BN " s" #ST " by TMA, clusters of two"},
static const MatmulFastCfg mf_bf16ops_cfgs[] = {MF_BF16OPS_CONFIGS(MF_ROW_BF16OPS) MF_BF16WG_CONFIGS(MF_ROW_BF16WG)
                                                MF_BF16TMA_CONFIGS(MF_ROW_BF16TMA)};
#undef MF_ROW_BF16OPS
#undef MF_ROW_BF16WG
#undef MF_ROW_BF16TMA

int matmul_fast_bf16_tma(int cfg) {
#define MF_IS_TMA(ID, WGS, BN, ST, EFF, OCC) if (cfg == ID) return 1;
    MF_BF16TMA_CONFIGS(MF_IS_TMA)
#undef MF_IS_TMA
    (void)cfg;
    return 0;
}
#define MF_NUM_BF16OPS_CFGS ((int)(sizeof(mf_bf16ops_cfgs) / sizeof(mf_bf16ops_cfgs[0])))

// the least share of the GPU's first wave of blocks the BF16-operand tiles must fill to be taken
// (matmul_fast_bf16_plan); tests set it to 0 to run these kernels on small shapes. (The FP32-operand
// kernels' K splits win at 0.42: a batch of 448 on 1024 outputs, 56 tiles of 64 x 128 on 132 SMs;
// the 128 x 128 TMA tiles win at 0.48: 512 on 2048, 64 tiles. doc/fast.md.)
static float mf_bf16_min_fill = 0.45f;

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
        if (c->bk == 64 && !matmul_fast_target()->wgmma) continue;   // (the wgmma rows: MF_ROW_BF16WG)
        if (matmul_fast_bf16_tma(c->id) && !matmul_fast_target()->tma) continue;
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

// true: out_bf16 was written by the kernel (wgmma); false: the caller copies it
template <bool A_KC, bool B_KC>
static bool mf_bf16_launch_layout(int cfg, dim3 grid, int pdl, cudaStream_t stream, float *C, const __nv_bfloat16 *A,
                                  const __nv_bfloat16 *B, int M, int N, int K, int vec, const MatmulFastEpi &epi,
                                  __nv_bfloat16 *out_bf16) {
    switch (cfg) {
#define MF_CASE(ID, BM, BN, BK, WM, WN, ST, EFF, OCC)                                                           \
    case ID:                                                                                                    \
        mf_launch_smem<matmul_bf16_kernel<BM, BN, BK, WM, WN, ST, A_KC, B_KC>>(                                 \
            grid, (BM / WM) * (BN / WN) * 32, mf_b16_smem_bytes(BM, BN, BK, ST, A_KC, B_KC), pdl, stream, C, A, \
            B, M, N, K, vec, epi);                                                                              \
        return false;
        MF_BF16OPS_CONFIGS(MF_CASE)
#undef MF_CASE
#define MF_CASE(ID, WGS, BN, ST, EFF, OCC)                                                                      \
    case ID:                                                                                                    \
        mf_launch_smem<matmul_wgmma_ops_kernel<__nv_bfloat16, WGS, BN, ST, A_KC, B_KC>>(                       \
            grid, 128 * WGS, mf_wgb16_smem_bytes(WGS, BN, ST), pdl, stream, C, A, B, M, N, K, vec, epi, out_bf16, \
            (float *)NULL);                                                                                     \
        return true;
        MF_BF16WG_CONFIGS(MF_CASE)
#undef MF_CASE
#define MF_CASE(ID, WGS, BN, ST, EFF, OCC)                                                                      \
    case ID:                                                                                                    \
        static_assert(WGS == 2, "the TMA kernel's tiles are 128 rows");                                         \
        mf_tma_launch<__nv_bfloat16, BN, ST, 1, A_KC, B_KC>(pdl, stream, C, A, B, M, N, K, vec, epi,            \
                                                            (float *)NULL, out_bf16);                           \
        return true;
        MF_BF16TMA_CONFIGS(MF_CASE)
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
    const int sgd = epi->kind == MF_EPI_SGD;
    if (C == NULL && !(sgd && vec && c->bk == 64)) {   // (the wgmma rows: 64-deep k steps)
        fprintf(stderr, "error: matmul_fast_bf16_run: the %s product of %d x %d x %d: no output (C NULL) is for "
                "the wgmma kernels' SGD epilogue on N a multiple of 4 only\n", names[prod], M, N, K);
        exit(EXIT_FAILURE);
    }
    // With the SGD epilogue, out_bf16 takes the new W: the wgmma kernels store it on their float4 path
    // (vec); elsewhere the kernel gets none and the copy follows it. Without, out_bf16 takes C.
    __nv_bfloat16 *kernel_out = sgd && !vec ? NULL : out_bf16;
    const dim3 grid(mf_ceil_div(N, c->bn), mf_ceil_div(M, c->bm));
    bool copied;
    if (prod == MF_FWD)
        copied = mf_bf16_launch_layout<true, true>(cfg, grid, pdl, stream, C, A, B, M, N, K, vec, *epi, kernel_out);
    else if (prod == MF_DINP)
        copied = mf_bf16_launch_layout<true, false>(cfg, grid, pdl, stream, C, A, B, M, N, K, vec, *epi, kernel_out);
    else
        copied = mf_bf16_launch_layout<false, false>(cfg, grid, pdl, stream, C, A, B, M, N, K, vec, *epi, kernel_out);
    cudaCheck(cudaGetLastError());
    if ((!copied || kernel_out == NULL) && out_bf16 != NULL)   // (mma.sync, or the SGD epilogue's !vec)
        matmul_fast_bf16_copy(out_bf16, sgd ? epi->sgd.param : C, (size_t)M * N, stream);
}
