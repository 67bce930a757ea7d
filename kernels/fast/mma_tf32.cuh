/*
kernels/fast/mma_tf32.cuh: the TF32 matmul kernel on the tensor cores, through mma.sync (sm_80+).

What: the same block tiles and cp.async pipeline as the FP32 kernel (kernels/fast/fp32_tiles.cuh,
kernels/fast/pipeline.cuh), but each warp owns a WM x WN block of C made of 16x8 tiles, each the
result of mma.sync.m16n8k8: a warp-wide instruction that multiplies a 16x8 by an 8x8 matrix of TF32
values and adds to a 16x8 FP32 accumulator. The warp loads its operand fragments from shared memory
into registers first (ldmatrix for a k-contiguous tile, element by element for the other).
Why: one mma.sync does 16 x 8 x 8 = 1024 multiply-adds, 32 per thread of the warp, where the FP32
kernel issues an FFMA per multiply-add; the price is a precision of 10 mantissa bits per operand
(TF32), with FP32 sums.
TF32 is opt-in (-x 1): the results differ from FP32 in the 3rd or 4th digit.
Rounding: the tensor cores read the top 19 bits of each float as they find them (truncation), so
every element is rounded to nearest (cvt.rna, round_tf32) as it is loaded into a fragment, unless
the operands are TF32 values already (RND = false, for MF_TF32_EXACT).

Fragment layouts (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, q = lane % 4:
  a0 (g, q) a1 (g+8, q) a2 (g, q+4) a3 (g+8, q+4)        A is 16 x 8 (row, k)
  b0 (k=q, n=g) b1 (k=q+4, n=g)                           B is 8 x 8 (k, n)
  c0 (g, 2q) c1 (g, 2q+1) c2 (g+8, 2q) c3 (g+8, 2q+1)    C is 16 x 8
Shared rows: k-contiguous tiles have BK + 4 floats, the others BD + 8 (S[q][g]: bank 8q + g, all 32
differ). A k-contiguous tile is read with ldmatrix: its 8x8 matrices of 16-bit elements are 8 rows x
4 floats here, and lane l receives row l/4, float l%4 of each, which is exactly (g, q); one ldmatrix.x4
loads an A fragment (a0..a3) or the B fragments of two neighbouring n tiles (8 rows 16 bytes each,
at BK + 4 floats apart: no bank conflicts). The others are read element by element.
*/
#ifndef MLP_FAST_MMA_TF32_CUH
#define MLP_FAST_MMA_TF32_CUH

#include <stdint.h>

#include "epilogue.cuh"  // mf_store_pair, mf_cluster_reduce, MF_SPLIT_*
#include "pdl.cuh"       // pdl_wait
#include "pipeline.cuh"  // MfTile, mf_mainloop
#include "tf32.cuh"      // round_tf32

// x rounded to TF32, as the bits an mma.sync operand register takes
__device__ __forceinline__ uint32_t mf_to_tf32(float x) { return __float_as_uint(round_tf32(x)); }

__device__ __forceinline__ void mf_mma_tf32(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// four 8x8 matrices of 16-bit elements (here 8 rows x 4 floats); lane l gives the address of row l % 8
// of matrix l / 8 (16-byte aligned) and receives in r[i] its (row l / 4, float l % 4) of matrix i
__device__ __forceinline__ void mf_ldsm_x4(uint32_t* r, const float* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// C (M, N) = epilogue(A . B), A_KC / B_KC as in the FP32 kernel; block tile BM x BN, warps of WM x WN,
// each warp (WM/16) x (WN/8) mma.m16n8k8 tiles; blockIdx.z the K slice, added up as `split` says.
// Dynamic shared memory: mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 8) floats.
template<int BM, int BN, int BK, int WM, int WN, int ST, bool A_KC, bool B_KC, bool RND>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
matmul_fast_tf32_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                        int M, int N, int K, int kchunk, int vec, int split, MatmulFastEpi epi) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int MI = WM / 16, NI = WN / 8;
    typedef MfTile<BM, BK, NT, A_KC, 8> TA;
    typedef MfTile<BN, BK, NT, B_KC, 8> TB;
    static_assert(BK % 8 == 0 && WM % 16 == 0 && WN % 16 == 0, "BK % 8, WM % 16, WN % 16 (ldmatrix: n tiles in pairs)");
    extern __shared__ __align__(16) float smem[];   // mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 8) floats

    pdl_wait();   // as in the FP32 kernel
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int g = lane / 4, q = lane % 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    const int ntiles = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
    const int lda = A_KC ? K : M, ldb = B_KC ? K : N;

    float acc[MI][NI][4];
    #pragma unroll
    for (int i = 0; i < MI; i++)
        #pragma unroll
        for (int j = 0; j < NI; j++)
            #pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.0f;

    // a fragment element: rounded to TF32 (cvt.rna), or, when the operands are TF32 values already
    // (RND = false, for MF_TF32_EXACT), its bits as they are: the tensor cores read them exactly
    auto frag = [](float x) -> uint32_t { if constexpr (RND) return mf_to_tf32(x); else return __float_as_uint(x); };
    // A(row, k) and B(k, col) of the tile in shared memory, whatever the layout
    #define MF_SA(r, k) (A_KC ? as[(r) * TA::LD + (k)] : as[(k) * TA::LD + (r)])
    #define MF_SB(k, c) (B_KC ? bs[(c) * TB::LD + (k)] : bs[(k) * TB::LD + (c)])
    mf_mainloop<BM, BN, BK, ST, TA, TB>(smem, A, B, M, N, lda, ldb, m0, n0, kbeg, kend, ntiles, tid, vec != 0,
        [&](const float* as, const float* bs) {
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            uint32_t af[MI][4], bf[NI][2];
            #pragma unroll
            for (int i = 0; i < MI; i++) {
                if constexpr (A_KC) {   // lanes 0-7: rows 0-7, k 0-3; 8-15: rows 8-15; 16-31: the same at k 4-7
                    mf_ldsm_x4(af[i], &as[(wm + i * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * TA::LD + kk + (lane >> 4) * 4]);
                    #pragma unroll
                    for (int r = 0; r < 4; r++) af[i][r] = frag(__uint_as_float(af[i][r]));
                } else {
                    const int r = wm + i * 16 + g;
                    af[i][0] = frag(MF_SA(r, kk + q));
                    af[i][1] = frag(MF_SA(r + 8, kk + q));
                    af[i][2] = frag(MF_SA(r, kk + q + 4));
                    af[i][3] = frag(MF_SA(r + 8, kk + q + 4));
                }
            }
            #pragma unroll
            for (int j = 0; j < NI; j += 2) {
                if constexpr (B_KC) {   // lanes 0-7: tile j, k 0-3; 8-15: tile j, k 4-7; 16-31: tile j + 1
                    mf_ldsm_x4(&bf[j][0], &bs[(wn + j * 8 + (lane & 7) + (lane >> 4) * 8) * TB::LD + kk + ((lane >> 3) & 1) * 4]);
                    #pragma unroll
                    for (int r = 0; r < 4; r++) (&bf[j][0])[r] = frag(__uint_as_float((&bf[j][0])[r]));
                } else {
                    #pragma unroll
                    for (int jj = j; jj < j + 2; jj++) {
                        const int c = wn + jj * 8 + g;
                        bf[jj][0] = frag(MF_SB(kk + q, c));
                        bf[jj][1] = frag(MF_SB(kk + q + 4, c));
                    }
                }
            }
            #pragma unroll
            for (int i = 0; i < MI; i++)
                #pragma unroll
                for (int j = 0; j < NI; j++) mf_mma_tf32(acc[i][j], af[i], bf[j]);
        }
    });
    #undef MF_SA
    #undef MF_SB

    if (split == MF_SPLIT_CLUSTER) {   // gridDim.z blocks of one cluster share this tile: reduce in shared memory
        #pragma unroll
        for (int i = 0; i < MI; i++)
            #pragma unroll
            for (int h = 0; h < 2; h++)
                #pragma unroll
                for (int j = 0; j < NI; j++)
                    *reinterpret_cast<float2*>(&smem[(wm + i * 16 + g + h * 8) * BN + wn + j * 8 + 2 * q]) =
                        make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        mf_cluster_reduce<BM, BN, NT>(C, smem, m0, n0, M, N, vec != 0, epi);
        return;
    }

    float* Cz = C + (size_t)blockIdx.z * M * N;
    #pragma unroll
    for (int i = 0; i < MI; i++) {
        #pragma unroll
        for (int h = 0; h < 2; h++) {   // h = 0: row g (c0, c1), h = 1: row g + 8 (c2, c3)
            const int m = m0 + wm + i * 16 + g + h * 8;
            if (m < M) {
                #pragma unroll
                for (int j = 0; j < NI; j++)
                    mf_store_pair(Cz, acc[i][j][2 * h], acc[i][j][2 * h + 1], m, n0 + wn + j * 8 + 2 * q, N, vec != 0, epi);
            }
        }
    }
}

#endif  // MLP_FAST_MMA_TF32_CUH
