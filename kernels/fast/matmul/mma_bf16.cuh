/*
kernels/fast/matmul/mma_bf16.cuh: the BF16 matmul on BF16 copies of its operands (-x 2's large products).

What: C (M, N) = epilogue(A . B) on mma.sync.m16n8k16 (BF16 operands, FP32 sums), where A and B are
arrays of BF16 values in memory, laid out as the FP32 operands of kernels/fast/matmul/matmul_fast.h (A_KC /
B_KC: k-contiguous or not). The trainer keeps such copies next to the FP32 tensors with -x 2
(train_mlp_fast.cu, model_forward_layers): each is written once, where its FP32 value is written (the
BF16-operand kernels' epilogues, the head, the SGD step; a copy kernel elsewhere), rounded as
mf_pack_bf16 rounds. This kernel leaves its output's copy to its launcher (a copy kernel after it).
Why: the mma.sync kernel of kernels/fast/matmul/mma_tf32.cuh reads FP32 operands, and rounds and packs every
element as it enters a fragment register, once per warp that reads it; a d-contiguous tile is read
element by element. On the big model's products it ran at about a sixth of the tensor cores' BF16
rate. Here the tiles arrive as BF16 (half the bytes through L2 and shared memory), each fragment is
one ldmatrix, and the d-contiguous tiles are no harder: ldmatrix.trans transposes 16-bit 8 x 8
matrices on the way to the registers (there is no such instruction for 32-bit elements, which is
why TF32 cannot do the same).
Fragment layouts (PTX ISA, mma.m16n8k16 .bf16), g = lane / 4, q = lane % 4; each register holds two
elements, the lower k in the low half:
  a0 (g, 2q..) a1 (g+8, 2q..) a2 (g, 2q+8..) a3 (g+8, 2q+8..)       A is 16 x 16 (row, k)
  b0 (k=2q.., n=g) b1 (k=2q+8.., n=g)                                B is 16 x 8 (k, n)
ldmatrix.x4 loads four 8 x 8 matrices of 16-bit elements; lane l gives the address of row l % 8 of
matrix l / 8 and receives, of each matrix, row l / 4, elements 2 (l % 4) and 2 (l % 4) + 1, which is
(g, 2q..) above; with .trans it receives the same of the transposed matrix. So a tile stored with k
along its rows (A_KC: S[m][k]) gives A's fragments as they are, and one stored with k across its rows
(S[k][m]) gives them through .trans; the same for B (S[n][k] as it is, S[k][n] transposed).
Shared memory: per stage the two tiles, S[d][k] rows of BK + 8 elements or S[k][d] rows of BD + 8:
the 8 row addresses of an ldmatrix are then 16 bytes apart in bank terms (80 or 272 bytes apart), all
32 banks once. Tiles arrive by cp.async in 16-byte chunks (8 elements), so the operands' leading
dimensions must be multiples of 8 (matmul_fast_bf16_fits); a chunk outside the matrix is written as 0.
Sums run in a fixed order (no K split, no atomics): the same bits every run.
*/
#ifndef MLP_FAST_MMA_BF16_CUH
#define MLP_FAST_MMA_BF16_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "epilogue.cuh"    // mf_store_pair
#include "mma_tf32.cuh"    // mf_mma_bf16
#include "../ops/pdl.cuh"  // pdl_wait
#include "pipeline.cuh"    // mf_cp_commit, mf_cp_wait, mf_prefetch

// The configurations (ID, BM, BN, BK, WM, WN, ST, EFF, OCC): block tile BM x BN, K step BK, warps of
// WM x WN, ST stages; EFF and OCC for the planner (copies_bf16.cu: blocks per SM it assumes, and
// a relative speed per tile element). 128 x 256 moves the fewest bytes per multiply-add; 128 x 128
// gives twice the tiles where the larger one would leave SMs idle. On sm_90 the wgmma rows
// (copies_bf16.cu) are faster but for short K (the weight gradient of a batch of about 128 rows),
// where these, with no fixed cost a tile in the planner's fit, win.
#define MF_BF16OPS_CONFIGS(X)                     \
    X(0, 128, 256, 32, 64, 64, 4, 2.6f, 1)        \
    X(1, 128, 128, 32, 64, 64, 4, 3.0f, 2)

// elements of one operand tile in shared memory (see the top of the file)
constexpr int mf_b16_tile_elems(int BD, int BK, bool KC) { return KC ? BD * (BK + 8) : BK * (BD + 8); }
// bytes of dynamic shared memory of a configuration
constexpr int mf_b16_smem_bytes(int BM, int BN, int BK, int ST, bool A_KC, bool B_KC) {
    return ST * (mf_b16_tile_elems(BM, BK, A_KC) + mf_b16_tile_elems(BN, BK, B_KC)) * 2;
}

// 16 bytes global -> shared, asynchronously; ok false writes 16 zero bytes (a source size of 0)
__device__ __forceinline__ void mf_cp16_b16(unsigned sa, const void* g, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(sa), "l"(g), "r"(ok ? 16 : 0) : "memory");
#endif
}

// four 8 x 8 matrices of 16-bit elements, as they are or transposed (see the top of the file)
template <bool TRANS>
__device__ __forceinline__ void mf_ldsm_x4_b16(uint32_t* r, const __nv_bfloat16* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    if constexpr (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

// One operand tile: rows d0 .. d0+BD-1 of X, k in [k0, k0 + BK), outside the matrix 0.
// KC: X(d, k) = X[d * ld + k], shared S[d][k]; else X(d, k) = X[k * ld + d], shared S[k][d].
// The contiguous width is a multiple of 8 (K for KC, D otherwise), so a 16-byte chunk lies wholly
// inside the matrix or wholly outside.
template <int BD, int BK, int NT, bool KC>
struct MfTileB16 {
    static constexpr int LD = KC ? BK + 8 : BD + 8;
    static constexpr int ELEMS = mf_b16_tile_elems(BD, BK, KC);
    static constexpr int ROW_CHUNKS = (KC ? BK : BD) / 8;   // 16-byte chunks along a shared row
    static constexpr int PER = BD * BK / 8 / NT;             // chunks per thread
    static_assert(PER >= 1 && PER * NT * 8 == BD * BK, "the tile splits evenly into 16-byte chunks per thread");

    __device__ __forceinline__ static void load(__nv_bfloat16* S, const __nv_bfloat16* __restrict__ X, int D, int K,
                                                int ld, int d0, int k0, int tid) {
        #pragma unroll
        for (int i = 0; i < PER; i++) {
            const int c = tid + i * NT;
            const int r = c / ROW_CHUNKS, e = (c % ROW_CHUNKS) * 8;   // shared row, element in it
            const int d = KC ? d0 + r : d0 + e, k = KC ? k0 + e : k0 + r;
            const bool ok = d < D && k < K;
            const __nv_bfloat16* g = ok ? (KC ? X + (size_t)d * ld + k : X + (size_t)k * ld + d) : X;
            mf_cp16_b16((unsigned)__cvta_generic_to_shared(S + r * LD + e), g, ok);
        }
    }
};

// C (M, N) = epi(A . B) for the BM x BN tile of this block, the whole of K. A_KC: A is (M, K), else
// (K, M); B_KC: B is (N, K), else (K, N) (the products' layouts, kernels/fast/matmul/matmul_fast.h).
template <int BM, int BN, int BK, int WM, int WN, int ST, bool A_KC, bool B_KC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
matmul_bf16_kernel(float* __restrict__ C, const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                   int M, int N, int K, int vec, MatmulFastEpi epi) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int MI = WM / 16, NI = WN / 8;
    static_assert(BK % 16 == 0 && WM % 16 == 0 && WN % 16 == 0, "BK, WM, WN multiples of 16");
    typedef MfTileB16<BM, BK, NT, A_KC> TA;
    typedef MfTileB16<BN, BK, NT, B_KC> TB;
    extern __shared__ __align__(16) unsigned char mf_b16_smem[];
    __nv_bfloat16* smem = reinterpret_cast<__nv_bfloat16*>(mf_b16_smem);

    pdl_wait();   // launched with PDL: A or B may be the previous kernel's output (pdl.cuh)
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int ntiles = (K + BK - 1) / BK;
    const int lda = A_KC ? K : M, ldb = B_KC ? K : N;
    auto load_tile = [&](int t) {
        __nv_bfloat16* s = smem + (t % ST) * (TA::ELEMS + TB::ELEMS);
        TA::load(s, A, M, K, lda, m0, t * BK, tid);
        TB::load(s + TA::ELEMS, B, N, K, ldb, n0, t * BK, tid);
    };

    float acc[MI][NI][4];
    #pragma unroll
    for (int i = 0; i < MI; i++)
        #pragma unroll
        for (int j = 0; j < NI; j++)
            #pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.0f;

    // lane l's row of its ldmatrix matrix (l % 8) and which matrix (l / 8): A's four are (rows 0-7,
    // k 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): a0..a3; B's are (n 0-7, k 0-7), (0-7, 8-15),
    // (8-15, 0-7), (8-15, 8-15): b0, b1 of two neighbouring n tiles
    const int lr = lane & 7, mat = lane >> 3;
    const int a_row = (mat & 1) * 8, a_k = (mat >> 1) * 8;
    const int b_row = (mat >> 1) * 8, b_k = (mat & 1) * 8;

    mf_prefetch<ST - 1>(ntiles, load_tile);
    for (int t = 0; t < ntiles; t++) {
        mf_cp_wait<ST - 2>();   // tile t has arrived (this thread's copies) ...
        __syncthreads();        // ... everyone's; and tile t - 1's stage is free again
        if (t + ST - 1 < ntiles) load_tile(t + ST - 1);
        mf_cp_commit();
        const __nv_bfloat16* as = smem + (t % ST) * (TA::ELEMS + TB::ELEMS);
        const __nv_bfloat16* bs = as + TA::ELEMS;
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            uint32_t af[MI][4], bf[NI][2];
            #pragma unroll
            for (int i = 0; i < MI; i++) {
                const int m = wm + i * 16 + a_row, k = kk + a_k;
                if constexpr (A_KC) mf_ldsm_x4_b16<false>(af[i], as + (m + lr) * TA::LD + k);
                else mf_ldsm_x4_b16<true>(af[i], as + (k + lr) * TA::LD + m);
            }
            #pragma unroll
            for (int j = 0; j < NI; j += 2) {
                const int n = wn + j * 8 + b_row, k = kk + b_k;
                if constexpr (B_KC) mf_ldsm_x4_b16<false>(&bf[j][0], bs + (n + lr) * TB::LD + k);
                else mf_ldsm_x4_b16<true>(&bf[j][0], bs + (k + lr) * TB::LD + n);
            }
            #pragma unroll
            for (int i = 0; i < MI; i++)
                #pragma unroll
                for (int j = 0; j < NI; j++) mf_mma_bf16(acc[i][j], af[i], bf[j]);
        }
    }

    mf_mma_store<BM, BN, WM, WN>(C, acc, m0, n0, M, N, vec != 0, epi);
}

#endif  // MLP_FAST_MMA_BF16_CUH
