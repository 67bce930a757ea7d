/*
kernels/fast/matmul/ffma.cuh: the FP32 matmul kernel, on the CUDA cores (FFMA), with register tiles.

What: a block computes a BM x BN tile of C(M, N) = A . B; its operand tiles come through the
cp.async pipeline (kernels/fast/matmul/pipeline.cuh) BK k at a time; each of its threads owns a TM x TN
block of the tile and keeps it in registers (acc). Per 4 k, a thread reads from a k-contiguous tile
one float4 per row, from the other one float4 of 4 rows per k, and does 4 * TM * TN FFMAs.
Why: the naive kernel (kernels/matmul.cuh) loads two floats from memory per multiply-add. Here an
element of A in shared memory serves TN multiply-adds and one of B serves TM, so the arithmetic, not
the loads, sets the pace (dev/cuda/matmul_forward.cu has the progression, version by version).

A thread's rows: from a k-contiguous A, ty + i * (BM/TM) (a quarter-warp reads 8 different rows,
whose padded starts fall in 8 different bank groups); from a d-contiguous A, float4 groups
ty*4 + {0..3} + g * (BM*4/TM) (a warp reads neighbouring float4s). Columns likewise with tx.
*/
#ifndef MLP_FAST_FFMA_CUH
#define MLP_FAST_FFMA_CUH

#include "epilogue.cuh"    // mf_epilogue, mf_epi_identity, mf_cluster_reduce, MF_SPLIT_*
#include "../ops/pdl.cuh"  // pdl_wait
#include "pipeline.cuh"    // MfTile, mf_mainloop, mf_smem_floats

// C (M, N) = epilogue(A . B). Block tile BM x BN, K in steps of BK through ST stages, each thread a
// TM x TN register block. A_KC: A is (M, K) row-major, else (K, M). B_KC: B is (N, K) row-major, else
// (K, N). blockIdx.z is the K slice, added up as `split` says (MF_SPLIT_CLUSTER: in its cluster;
// MF_SPLIT_RAW: slice z writes C + z * M * N, which is C itself without a split).
template<int BM, int BN, int BK, int TM, int TN, int ST, bool A_KC, bool B_KC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
matmul_fast_fp32_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                        int M, int N, int K, int kchunk, int vec, int split, MatmulFastEpi epi) {
    constexpr int NT = (BM / TM) * (BN / TN);
    typedef MfTile<BM, BK, NT, A_KC, 4> TA;
    typedef MfTile<BN, BK, NT, B_KC, 4> TB;
    constexpr int RM = BM * 4 / TM, RN = BN * 4 / TN;   // stride between a thread's float4 groups
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "TM, TN, BK must be multiples of 4");
    // dynamic: mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 4) floats, ST stages of (A tile, B tile); the
    // cluster reduction reuses it. Dynamic because the large tiles need more than the static 48 KB.
    extern __shared__ __align__(16) float smem[];

    pdl_wait();   // with PDL (the forward product): the previous kernel's output is visible from here on
    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    const int ntiles = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
    const int lda = A_KC ? K : M, ldb = B_KC ? K : N;

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

    mf_mainloop<BM, BN, BK, ST, TA, TB>(smem, A, B, M, N, lda, ldb, m0, n0, kbeg, kend, ntiles, tid, vec != 0,
        [&](const float* as, const float* bs) {
        #pragma unroll
        for (int k4 = 0; k4 < BK; k4 += 4) {
            float a[4][TM], b[4][TN];
            #pragma unroll
            for (int i = 0; i < (A_KC ? TM : TM / 4); i++) {
                if constexpr (A_KC) {
                    const float4 v = *reinterpret_cast<const float4*>(&as[(ty + i * (BM / TM)) * TA::LD + k4]);
                    a[0][i] = v.x; a[1][i] = v.y; a[2][i] = v.z; a[3][i] = v.w;
                } else {
                    #pragma unroll
                    for (int kk = 0; kk < 4; kk++) {
                        const float4 v = *reinterpret_cast<const float4*>(&as[(k4 + kk) * TA::LD + i * RM + ty * 4]);
                        a[kk][i * 4 + 0] = v.x; a[kk][i * 4 + 1] = v.y; a[kk][i * 4 + 2] = v.z; a[kk][i * 4 + 3] = v.w;
                    }
                }
            }
            #pragma unroll
            for (int j = 0; j < (B_KC ? TN : TN / 4); j++) {
                if constexpr (B_KC) {
                    const float4 v = *reinterpret_cast<const float4*>(&bs[(tx + j * (BN / TN)) * TB::LD + k4]);
                    b[0][j] = v.x; b[1][j] = v.y; b[2][j] = v.z; b[3][j] = v.w;
                } else {
                    #pragma unroll
                    for (int kk = 0; kk < 4; kk++) {
                        const float4 v = *reinterpret_cast<const float4*>(&bs[(k4 + kk) * TB::LD + j * RN + tx * 4]);
                        b[kk][j * 4 + 0] = v.x; b[kk][j * 4 + 1] = v.y; b[kk][j * 4 + 2] = v.z; b[kk][j * 4 + 3] = v.w;
                    }
                }
            }
            #pragma unroll
            for (int kk = 0; kk < 4; kk++)
                #pragma unroll
                for (int i = 0; i < TM; i++)
                    #pragma unroll
                    for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[kk][i], b[kk][j], acc[i][j]);
        }
    });

    // the tile coordinates of acc[i][j]
    #define MF_ROW(i) (A_KC ? ty + (i) * (BM / TM) : ((i) / 4) * RM + ty * 4 + ((i) % 4))
    #define MF_COL(j) (B_KC ? tx + (j) * (BN / TN) : ((j) / 4) * RN + tx * 4 + ((j) % 4))
    if (split == MF_SPLIT_CLUSTER) {   // gridDim.z blocks of one cluster share this tile: reduce in shared memory
        #pragma unroll
        for (int i = 0; i < TM; i++)
            #pragma unroll
            for (int j = 0; j < TN; j++) smem[MF_ROW(i) * BN + MF_COL(j)] = acc[i][j];
        mf_cluster_reduce<BM, BN, NT>(C, smem, m0, n0, M, N, vec != 0, epi);
        return;
    }
    float* Cz = C + (size_t)blockIdx.z * M * N;   // (else MF_SPLIT_RAW, or no split: z = 0)
    const bool id = mf_epi_identity(epi);   // the sums as they are: no mf_epilogue call per output
    #pragma unroll
    for (int i = 0; i < TM; i++) {
        const int m = m0 + MF_ROW(i);
        if (m >= M) continue;
        if (!B_KC && vec) {   // 4 neighbouring columns, N % 4 == 0: all four in range or none
            #pragma unroll
            for (int g = 0; g < TN / 4; g++) {
                const int n = n0 + g * RN + tx * 4;
                if (n < N) {
                    float v[4];
                    #pragma unroll
                    for (int j = 0; j < 4; j++)
                        v[j] = id ? acc[i][g * 4 + j] : mf_epilogue(acc[i][g * 4 + j], m, n + j, N, epi);
                    *reinterpret_cast<float4*>(&Cz[(size_t)m * N + n]) = make_float4(v[0], v[1], v[2], v[3]);
                }
            }
        } else {
            #pragma unroll
            for (int j = 0; j < TN; j++) {
                const int n = n0 + MF_COL(j);
                if (n < N) Cz[(size_t)m * N + n] = id ? acc[i][j] : mf_epilogue(acc[i][j], m, n, N, epi);
            }
        }
    }
    #undef MF_ROW
    #undef MF_COL
}

#endif  // MLP_FAST_FFMA_CUH
