/*
kernels/fast/matmul/mma_tf32.cuh: the TF32 and BF16 matmul kernel on the tensor cores, through mma.sync (sm_80+).

What: the same block tiles and cp.async pipeline as the FP32 kernel (kernels/fast/matmul/ffma.cuh,
kernels/fast/matmul/pipeline.cuh), but each warp owns a WM x WN block of C made of 16x8 tiles, each the
result of mma.sync: a warp-wide instruction that multiplies a 16xk by a kx8 matrix and adds to a
16x8 FP32 accumulator. TF32: m16n8k8, 10 mantissa bits per operand. BF16: m16n8k16, 7 mantissa bits
per operand and twice the multiply-adds per instruction (and per cycle). The warp loads its operand
fragments from shared memory into registers first (ldmatrix for a k-contiguous tile, element by
element for the other). The operands stay FP32 in memory either way: they are rounded as they enter
the registers.
Why: one mma.sync.m16n8k8 does 16 x 8 x 8 = 1024 multiply-adds, 32 per thread of the warp, where
the FP32 kernel issues an FFMA per multiply-add; the price is the operands' precision, with FP32 sums.
TF32 is opt-in (-x 1): the results differ from FP32 in the 3rd or 4th digit; BF16 (-x 2) in the 2nd
or 3rd. The same kernel also computes FP32 as 3xTF32 (MF_TF32X3, kernels/fast/matmul/matmul_fast.h: each
operand split into a TF32 value and the TF32 rest, three TF32 products), which the planner uses for
FP32 products large enough that three tensor-core products cost less than one on the CUDA cores.
Rounding: the tensor cores read the top 19 bits of each float as they find them (truncation), so
every element is rounded to nearest (as round_tf32 does: mf_to_tf32) as it is loaded into a fragment, unless
the operands are TF32 values already (PREC MF_TF32_EXACT). BF16: two floats are rounded to nearest
(ties away from zero) and packed into one register (mf_pack_bf16).

Fragment layouts (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, q = lane % 4:
  a0 (g, q) a1 (g+8, q) a2 (g, q+4) a3 (g+8, q+4)        A is 16 x 8 (row, k)
  b0 (k=q, n=g) b1 (k=q+4, n=g)                           B is 8 x 8 (k, n)
  c0 (g, 2q) c1 (g, 2q+1) c2 (g+8, 2q) c3 (g+8, 2q+1)    C is 16 x 8
and for mma.m16n8k16 .bf16 each register holds two elements, k and k+1 (the lower k in the low half):
  a01 (g, 2q..) a23 (g+8, 2q..) a45 (g, 2q+8..) a67 (g+8, 2q+8..)          A is 16 x 16
  b01 (k=2q.., n=g) b23 (k=2q+8.., n=g)                                     B is 16 x 8
A dot product does not care in which order its k run, as long as A and B agree. So the BF16 kernel
loads the TF32 fragments of k 0-7 and 8-15 exactly as the TF32 kernel does, and pairs each element
with the one 4 further along k: its register "k = 2q, 2q+1" holds k = q and q + 4 of the tile, for A
and for B alike. The products and their sum are the same; no new shared-memory layout is needed.
Shared rows: k-contiguous tiles have BK + 4 floats, the others BD + 8 (S[q][g]: bank 8q + g, all 32
differ). A k-contiguous tile is read with ldmatrix: its 8x8 matrices of 16-bit elements are 8 rows x
4 floats here, and lane l receives row l/4, float l%4 of each, which is exactly (g, q); one ldmatrix.x4
loads an A fragment (a0..a3) or the B fragments of two neighbouring n tiles (8 rows 16 bytes each,
at BK + 4 floats apart: no bank conflicts). The others are read element by element.
*/
#ifndef MLP_FAST_MMA_TF32_CUH
#define MLP_FAST_MMA_TF32_CUH

#include <stdint.h>

#include "epilogue.cuh"      // mf_store_pair, mf_cluster_reduce, MF_SPLIT_*
#include "../ops/pdl.cuh"    // pdl_wait
#include "pipeline.cuh"      // MfTile, mf_mainloop
#include "../ops/round.cuh"  // round_tf32
#include "matmul_fast.h"     // MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16

// x rounded to TF32, as the bits an mma.sync operand register takes: to nearest, ties away from zero,
// as round_tf32 (cvt.rna) rounds, but in two integer instructions: add half of the 13 dropped bits'
// range, then clear them. (Unlike round_tf32 it does not keep every NaN a NaN: an operand that is
// not finite makes the products' outputs non-finite either way.)
__device__ __forceinline__ uint32_t mf_to_tf32(float x) { return (__float_as_uint(x) + 0x1000u) & 0xFFFFE000u; }

// 3xTF32's split of the FP32 fragment register v (its bits): v becomes big = tf32(x), small gets
// x - big. That difference is exact, and at most 2^-11 |x|: passed as it is, the tensor cores
// truncate it to TF32, an error of at most 2^-21 |x|, of either sign.
__device__ __forceinline__ void mf_split_tf32(uint32_t& v, uint32_t& small) {
    const float x = __uint_as_float(v);
    v = mf_to_tf32(x);
    small = __float_as_uint(x - __uint_as_float(v));
}

__device__ __forceinline__ void mf_mma_tf32(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d = a . b, from zero (the accumulator's registers are only written)
__device__ __forceinline__ void mf_mma_tf32_from0(float* d, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

// two floats rounded to BF16 in one register, lo in the low half, hi in the high: to nearest, ties
// away from zero (add half of the 16 dropped bits' range), then the two high halves side by side
// (one byte permute). Three integer instructions, where cvt.rn.bf16x2.f32 (ties to even) is one
// conversion: the same values except on exact ties. (Like mf_to_tf32, it may turn a NaN into an Inf.)
__device__ __forceinline__ uint32_t mf_pack_bf16(float lo, float hi) {
    return __byte_perm(__float_as_uint(lo) + 0x8000u, __float_as_uint(hi) + 0x8000u, 0x7632);
}

__device__ __forceinline__ void mf_mma_bf16(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
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

// a float from shared memory at shared-window address sa (an address the caller computes, where a
// pointer would cost a 64-bit register pair: kernels/fast/fused/fused_deep.cuh's dinp tiles)
__device__ __forceinline__ float mf_lds_f32(unsigned sa) {
    float v;
    asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(sa) : "memory");
    return v;
}

// The sums of one block tile: acc (the warp's (WM/16) x (WN/8) mma tiles, the fragment layout above)
// = A . B over k in [kbeg, kend) for the BM x BN tile at (m0, n0), A_KC / B_KC as in the FP32 kernel.
// PREC: MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16, MF_TF32X3 or MF_FP32_PIXELS (kernels/fast/matmul/matmul_fast.h). smem:
// mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 8) floats; free again when it returns. Every thread of
// the block calls it. The kernel below runs one tile a block; the fused step of deeper models
// (kernels/fast/fused/fused_deep.cuh) runs many, one after another.
template<int BM, int BN, int BK, int WM, int WN, int ST, bool A_KC, bool B_KC, int PREC>
__device__ __forceinline__ void mf_mma_sums(float (&acc)[WM / 16][WN / 8][4], float* smem, const float* __restrict__ A,
                                            const float* __restrict__ B, int M, int N, int K, int m0, int n0,
                                            int kbeg, int kend, bool vec) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int MI = WM / 16, NI = WN / 8;
    typedef MfTile<BM, BK, NT, A_KC, 8> TA;
    typedef MfTile<BN, BK, NT, B_KC, 8> TB;
    constexpr bool BF16 = PREC == MF_BF16, RND = PREC == MF_TF32_ROUND;
    // FP32 as 3xTF32; with MF_FP32_PIXELS one operand holds pixel bytes (exact TF32 values): the
    // forward product's A (the batch), the weight gradient's B (the batch again)
    constexpr bool PIX = PREC == MF_FP32_PIXELS, X3 = PREC == MF_TF32X3 || PIX;
    constexpr bool PIX_A = PIX && A_KC && B_KC, PIX_B = PIX && !A_KC && !B_KC;
    static_assert(BK % (BF16 ? 16 : 8) == 0 && WM % 16 == 0 && WN % 16 == 0,
                  "BK % 8 (BF16: % 16), WM % 16, WN % 16 (ldmatrix: n tiles in pairs)");
    static_assert(!PIX || PIX_A || PIX_B, "MF_FP32_PIXELS: the forward and weight-gradient layouts only");
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int g = lane / 4, q = lane % 4;
    const int ntiles = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;
    const int lda = A_KC ? K : M, ldb = B_KC ? K : N;
    // acc: the sums. 3xTF32 sums each BK step of K on the tensor cores (tile) and adds that to acc with
    // FADD: the tensor cores' FP32 sums round toward zero at every mma.sync, an error that grows with
    // the size of the running sum and, being one-sided, with K (at the big model's K = 4096, one
    // running sum breaks FP32's tolerances); a BK step's sum is small and short, and
    // FADD rounds to nearest, so the sum over K carries FP32's own error, as on the CUDA cores.
    float tile[X3 ? MI : 1][X3 ? NI : 1][4];
    #pragma unroll
    for (int i = 0; i < MI; i++)
        #pragma unroll
        for (int j = 0; j < NI; j++)
            #pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.0f;

    // a fragment element: rounded to TF32 (cvt.rna), or, when the operands are TF32 values already
    // (MF_TF32_EXACT), its bits as they are: the tensor cores read them exactly. For BF16 the bits as
    // they are too: the pairs are rounded as they are packed (mf_pack_bf16).
    auto frag = [](float x) -> uint32_t { if constexpr (RND) return mf_to_tf32(x); else return __float_as_uint(x); };
    // A(row, k) and B(k, col) of the tile in shared memory, whatever the layout
    #define MF_SA(r, k) (A_KC ? as[(r) * TA::LD + (k)] : as[(k) * TA::LD + (r)])
    #define MF_SB(k, c) (B_KC ? bs[(c) * TB::LD + (k)] : bs[(k) * TB::LD + (c)])
    // the TF32 fragments (m16n8k8 layout) of the warp's A rows and B columns at k step kk
    auto load_frags = [&](const float* as, const float* bs, int kk, uint32_t (&af)[MI][4], uint32_t (&bf)[NI][2]) {
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
    };
    mf_mainloop<BM, BN, BK, ST, TA, TB>(smem, A, B, M, N, lda, ldb, m0, n0, kbeg, kend, ntiles, tid, vec,
        [&](const float* as, const float* bs) {
        if constexpr (BF16) {
            #pragma unroll
            for (int kk = 0; kk < BK; kk += 16) {
                uint32_t a0[MI][4], b0[NI][2], a1[MI][4], b1[NI][2];
                load_frags(as, bs, kk, a0, b0);       // k 0-7 of this step: (g, q) and (g, q + 4)
                load_frags(as, bs, kk + 8, a1, b1);   // k 8-15
                // pair each element with the one 4 further along k (see the top of this file)
                uint32_t af[MI][4], bf[NI][2];
                #pragma unroll
                for (int i = 0; i < MI; i++) {
                    af[i][0] = mf_pack_bf16(__uint_as_float(a0[i][0]), __uint_as_float(a0[i][2]));   // row g
                    af[i][1] = mf_pack_bf16(__uint_as_float(a0[i][1]), __uint_as_float(a0[i][3]));   // row g + 8
                    af[i][2] = mf_pack_bf16(__uint_as_float(a1[i][0]), __uint_as_float(a1[i][2]));
                    af[i][3] = mf_pack_bf16(__uint_as_float(a1[i][1]), __uint_as_float(a1[i][3]));
                }
                #pragma unroll
                for (int j = 0; j < NI; j++) {
                    bf[j][0] = mf_pack_bf16(__uint_as_float(b0[j][0]), __uint_as_float(b0[j][1]));
                    bf[j][1] = mf_pack_bf16(__uint_as_float(b1[j][0]), __uint_as_float(b1[j][1]));
                }
                #pragma unroll
                for (int i = 0; i < MI; i++)
                    #pragma unroll
                    for (int j = 0; j < NI; j++) mf_mma_bf16(acc[i][j], af[i], bf[j]);
            }
        } else if constexpr (X3) {   // FP32 as three TF32 products (MF_TF32X3, kernels/fast/matmul/matmul_fast.h)
            #pragma unroll
            for (int kk = 0; kk < BK; kk += 8) {
                uint32_t ab[MI][4], bb[NI][2], asm_[MI][4], bsm[NI][2];
                load_frags(as, bs, kk, ab, bb);   // the FP32 bits, split below into big + small
                // Pixels: a byte 0..255 is a TF32 value, so its small part is 0 and the product with
                // it is one term shorter; its 1/255 goes to the other operand before that one is
                // split (x/255 * w = x * (w/255): within FP32's rounding of the CPU's pixel / 255)
                constexpr float PIXEL = 1.0f / 255.0f;
                #pragma unroll
                for (int i = 0; i < MI; i++)
                    #pragma unroll
                    for (int r = 0; r < 4; r++) {
                        if constexpr (PIX_A) continue;
                        if constexpr (PIX_B) ab[i][r] = __float_as_uint(__uint_as_float(ab[i][r]) * PIXEL);
                        mf_split_tf32(ab[i][r], asm_[i][r]);
                    }
                #pragma unroll
                for (int j = 0; j < NI; j++)
                    #pragma unroll
                    for (int r = 0; r < 2; r++) {
                        if constexpr (PIX_B) continue;
                        if constexpr (PIX_A) bb[j][r] = __float_as_uint(__uint_as_float(bb[j][r]) * PIXEL);
                        mf_split_tf32(bb[j][r], bsm[j][r]);
                    }
                // the small cross terms first (the first of the BK step starts the tile's sums from 0)
                #pragma unroll
                for (int i = 0; i < MI; i++)
                    #pragma unroll
                    for (int j = 0; j < NI; j++) {
                        if constexpr (!PIX_A) {   // A's small part times B (none where A is pixels)
                            if (kk == 0) mf_mma_tf32_from0(tile[i][j], asm_[i], bb[j]);
                            else mf_mma_tf32(tile[i][j], asm_[i], bb[j]);
                        }
                        if constexpr (!PIX_B) {   // A times B's small part (none where B is pixels)
                            if (kk == 0 && PIX_A) mf_mma_tf32_from0(tile[i][j], ab[i], bsm[j]);
                            else mf_mma_tf32(tile[i][j], ab[i], bsm[j]);
                        }
                        mf_mma_tf32(tile[i][j], ab[i], bb[j]);
                    }
            }
            #pragma unroll
            for (int i = 0; i < MI; i++)
                #pragma unroll
                for (int j = 0; j < NI; j++)
                    #pragma unroll
                    for (int r = 0; r < 4; r++) acc[i][j][r] += tile[i][j][r];
        } else {
            #pragma unroll
            for (int kk = 0; kk < BK; kk += 8) {
                uint32_t af[MI][4], bf[NI][2];
                load_frags(as, bs, kk, af, bf);
                #pragma unroll
                for (int i = 0; i < MI; i++)
                    #pragma unroll
                    for (int j = 0; j < NI; j++) mf_mma_tf32(acc[i][j], af[i], bf[j]);
            }
        }
    });
    #undef MF_SA
    #undef MF_SB
}

// the block's sums (mf_mma_sums) into shared memory, red[r * BN + c] for the tile's row r, column c
template<int BM, int BN, int WM, int WN>
__device__ __forceinline__ void mf_mma_stage(const float (&acc)[WM / 16][WN / 8][4], float* red) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int g = lane / 4, q = lane % 4;
    #pragma unroll
    for (int i = 0; i < WM / 16; i++)
        #pragma unroll
        for (int h = 0; h < 2; h++)
            #pragma unroll
            for (int j = 0; j < WN / 8; j++)
                *reinterpret_cast<float2*>(&red[(wm + i * 16 + g + h * 8) * BN + wn + j * 8 + 2 * q]) =
                    make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
}

// the block's sums (mf_mma_sums' layout) through the epilogue into C, rows below M
template<int BM, int BN, int WM, int WN>
__device__ __forceinline__ void mf_mma_store(float* C, const float (&acc)[WM / 16][WN / 8][4], int m0, int n0, int M,
                                             int N, bool vec, const MatmulFastEpi& epi) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int g = lane / 4, q = lane % 4;
    #pragma unroll
    for (int i = 0; i < WM / 16; i++) {
        #pragma unroll
        for (int h = 0; h < 2; h++) {   // h = 0: row g (c0, c1), h = 1: row g + 8 (c2, c3)
            const int m = m0 + wm + i * 16 + g + h * 8;
            if (m < M) {
                #pragma unroll
                for (int j = 0; j < WN / 8; j++)
                    mf_store_pair(C, acc[i][j][2 * h], acc[i][j][2 * h + 1], m, n0 + wn + j * 8 + 2 * q, N, vec, epi);
            }
        }
    }
}

// C (M, N) = epilogue(A . B), A_KC / B_KC as in the FP32 kernel; block tile BM x BN, warps of WM x WN,
// each warp (WM/16) x (WN/8) mma tiles; blockIdx.z the K slice, added up as `split` says. PREC:
// MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16, MF_TF32X3 or MF_FP32_PIXELS (kernels/fast/matmul/matmul_fast.h).
// Dynamic shared memory: mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 8) floats.
template<int BM, int BN, int BK, int WM, int WN, int ST, bool A_KC, bool B_KC, int PREC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
matmul_fast_mma_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                        int M, int N, int K, int kchunk, int vec, int split, MatmulFastEpi epi) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int MI = WM / 16, NI = WN / 8;
    extern __shared__ __align__(16) float smem[];   // mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 8) floats

    pdl_wait();   // as in the FP32 kernel
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int g = lane / 4, q = lane % 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    float acc[MI][NI][4];
    mf_mma_sums<BM, BN, BK, WM, WN, ST, A_KC, B_KC, PREC>(acc, smem, A, B, M, N, K, m0, n0, kbeg, kend, vec != 0);

    if (split == MF_SPLIT_CLUSTER) {   // gridDim.z blocks of one cluster share this tile: reduce in shared memory
        mf_mma_stage<BM, BN, WM, WN>(acc, smem);
        mf_cluster_reduce<BM, BN, NT>(C, smem, m0, n0, M, N, vec != 0, epi);
        return;
    }

    // (the same stores as mf_mma_store, which the BF16-operand kernel calls, written out here as this
    // kernel had them before that function existed: the change that shared them came with a slower FP32
    // epoch of the wide model, and the shared form was never shown not to be the cause)
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
