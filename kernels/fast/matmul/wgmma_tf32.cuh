/*
kernels/fast/matmul/wgmma_tf32.cuh: the TF32 matmul kernel through wgmma, Hopper's warpgroup tensor-core
instructions (sm_90a only: built where MF_WGMMA is defined, which the Makefiles do for GPU_ARCH=90).

What: instead of each warp loading fragments from shared memory into registers (the mma.sync kernel,
kernels/fast/matmul/mma_tf32.cuh, spends most of its instructions there), the tensor cores read both tiles
from shared memory themselves, through a 64-bit "matrix descriptor": the tile's address, the byte
distance between groups of 8 rows (1024 here) and a swizzle mode. One wgmma.m64n64k8 is 64 x 64 x 8
multiply-adds, issued by a warpgroup (4 warps, 128 threads) together, and runs asynchronously while
the threads prepare the next tile; a block has WGS warpgroups, each 64 rows of the tile.
Why here: the trainer's -x 1 forward products take their operands as TF32 values (MF_TF32_EXACT),
so this kernel needs no rounding pass over its tiles, and is then the fastest on most forward shapes
of a batch of 128 rows or more (the cost model of kernels/fast/matmul/planner.cuh weighs it). With a
rounding pass it is no faster than mma.sync, so it is built for MF_TF32_EXACT's forward product only.

Shared layout: wgmma takes 32-bit operands k-major only (it cannot transpose them), in the
"128-byte swizzle" mode here: a tile row is BK = 32 floats = 128 bytes, 8 rows make a 1024-byte
atom, and within an atom the 16-byte chunk c of row r is stored at chunk c ^ r, so the 8 rows'
chunk c fall in 8 different bank groups. A k-step of 8 moves the descriptor's address 32 bytes
along the row; the hardware applies the XOR on the address bits, so atoms start 1024-byte aligned.
A k-contiguous operand is copied in as it is (16-byte cp.async, mf_wg_load); a d-contiguous one
(the weight in dinp, both operands of dweight) goes to a staging tile and is transposed from there
(mf_wg_transpose).
Rounding: the tensor cores would use the top 19 bits of each float as they find them (rounding
toward zero), so every tile is rounded to nearest first (cvt.rna, as in the mma.sync kernel): each
thread rounds the chunks it copied (mf_wg_round), or rounds while it transposes. RND = false (for
MF_TF32_EXACT: operands that are TF32 values already) leaves the k-contiguous tiles as they are.
Pipeline: copies run ST - 2 tiles ahead through a ring of ST stages. At tile t each thread waits for
its copies of tile t, rounds them, and fence.proxy.async makes its stores visible to the tensor
cores (which read through the async proxy); after the barrier the stage of tile t - 2 is refilled
(every thread has passed wgmma.wait_group 1 at tile t - 1, so tile t - 2's products are complete,
while tile t - 1's may still be running, on their own stage), transposed operands are transposed
into one of 2 k-major tiles (a second barrier), and tile t's wgmmas are issued.
*/
#ifndef MLP_FAST_WGMMA_TF32_CUH
#define MLP_FAST_WGMMA_TF32_CUH

#include <stdint.h>

#include "configs.cuh"       // mf_wg_smem_floats
#include "epilogue.cuh"      // mf_store_pair, mf_cluster_reduce, MF_SPLIT_*
#include "../ops/pdl.cuh"    // pdl_wait
#include "pipeline.cuh"      // MfTile, mf_cp16, mf_cp4, mf_cp_wait, mf_prefetch
#include "../ops/round.cuh"  // round_tf32, mf_round_tf32

#if defined(MF_WGMMA)
// the matrix descriptor of a K-major tile with 128-byte swizzle at shared address sa (PTX ISA,
// "matrix descriptor"): bits 0-13 address / 16; 16-29 leading byte offset / 16 (unused with this
// swizzle: one k-step stays inside a row; 1 by convention); 32-45 stride byte offset / 16 (1024 bytes
// from one 8-row atom to the next); 62-63 swizzle mode (1 = 128 bytes)
__device__ __forceinline__ uint64_t mf_wg_desc(unsigned sa) {
    return (uint64_t)((sa & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

// a thread's accumulators of a wgmma 16 (64 x 32), 32 (64 x 64) wide, ...: their operand list in the
// assembly (%0 ..), and the asm statement's outputs d[0] .. (larger ones: kernels/fast/matmul/wgmma_kmajor.cuh)
#define MF_WG_REGS16 "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15"
#define MF_WG_OUTS16 \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
#define MF_WG_REGS32 MF_WG_REGS16 ",%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define MF_WG_OUTS32 \
    MF_WG_OUTS16, \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])

// d (64 x 64 of the warpgroup's C, 32 per thread) += A (64 x 8) . B (64 x 8)^T, both from shared memory
__device__ __forceinline__ void mf_wgmma_n64(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 {" MF_WG_REGS32 "}, %32, %33, p, 1, 1;\n}\n"
                 : MF_WG_OUTS32
                 : "l"(da), "l"(db));
}
__device__ __forceinline__ void mf_wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void mf_wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template<int N>
__device__ __forceinline__ void mf_wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(N) : "memory"); }
__device__ __forceinline__ void mf_fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// keeps the compiler from moving accesses to an accumulator across the asynchronous products
__device__ __forceinline__ void mf_wg_pin(float& x) { asm volatile("" : "+f"(x) :: "memory"); }
#endif

// rows d0 .. d0+ROWS-1 of X (k-contiguous, X(d, k) = X[d * ld + k]), k in [k0, k0 + 32) clipped to kend,
// into the swizzled tile at shared address sa; out of range: 0
template<int ROWS, int NT, bool VEC>
__device__ __forceinline__ void mf_wg_load(unsigned sa, const float* __restrict__ X, int D, int ld, int d0, int k0,
                                           int kend, int tid) {
    static_assert(ROWS * 8 % NT == 0, "whole chunks per thread");
    #pragma unroll
    for (int i = 0; i < ROWS * 8 / NT; i++) {
        const int c = tid + i * NT;
        const int r = c / 8, kc = c % 8;          // row, 16-byte chunk of the row (a warp reads 4 rows x 128 bytes)
        const unsigned s = sa + (unsigned)(r * 128 + ((kc ^ (r & 7)) << 4));
        const int gd = d0 + r, gk = k0 + kc * 4;
        if constexpr (VEC) {   // widths % 4 == 0, K slices % 32 == 0: a chunk is all in range or all out
            const bool ok = gd < D && gk < kend;
            mf_cp16(s, ok ? X + (size_t)gd * ld + gk : X, ok);
        } else {
            #pragma unroll
            for (int j = 0; j < 4; j++) {
                const bool ok = gd < D && gk + j < kend;
                mf_cp4(s + 4 * j, ok ? X + (size_t)gd * ld + gk + j : X, ok);
            }
        }
    }
}

// Rounds to TF32 (cvt.rna, as the mma.sync kernel does) the chunks this thread copied with
// mf_wg_load into the k-major tile at km, once they have landed: the tensor cores would otherwise
// truncate, and truncation's error does not average out (test_mlp caught it: the bias gradient of the
// output layer, a mean over the batch, drifted far from the CPU's without the rounding).
// All loads first, then all stores: one shared-memory latency instead of one per chunk (the compiler
// cannot tell that a store does not feed the next chunk's load).
template<int ROWS, int NT>
__device__ __forceinline__ void mf_wg_round(char* km, int tid) {
    constexpr int NC = ROWS * 8 / NT;   // chunks per thread
    float4* p[NC];
    float4 v[NC];
    #pragma unroll
    for (int i = 0; i < NC; i++) {
        const int c = tid + i * NT;
        const int r = c / 8, kc = c % 8;   // as in mf_wg_load
        p[i] = reinterpret_cast<float4*>(km + r * 128 + ((kc ^ (r & 7)) << 4));
        v[i] = *p[i];
    }
    #pragma unroll
    for (int i = 0; i < NC; i++) *p[i] = mf_round_tf32(v[i]);
}

// A d-contiguous operand (X(d, k) = X[k * ld + d]: the weight of dinp, both operands of dweight) is
// copied as it is, 16 bytes at a time, into a staging tile S[k][d] (MfTile, as in the other kernels),
// and the threads transpose it from there into the swizzled k-major tile: each takes 4 k x 4 d, four
// 16-byte loads and four 16-byte stores (faster than 4-byte cp.async copies straight into the k-major
// tile, element by element). The staging rows are padded by 4
// floats, which keeps the loads free of bank conflicts (a quarter-warp reads 64 bytes of two rows 4
// apart); the stores conflict two ways.
template<int BD, int NT>
__device__ __forceinline__ void mf_wg_transpose(char* km, const float* S, int tid) {
    constexpr int LD = BD + 4;                      // MfTile<BD, 32, NT, false, 4>::LD
    static_assert(BD % (NT / 2) == 0 || (NT / 2) % BD == 0, "NT threads transpose NT / 2 rows d at a time");
    const int u = tid % 8, qw = tid / 8;            // a quarter-warp: 4 d-blocks x 2 k-blocks
    const int kb = 2 * (qw % 4) + u / 4;            // k 4kb .. 4kb+3
    #pragma unroll
    for (int pass = 0; pass < (BD + NT / 2 - 1) / (NT / 2); pass++) {
        const int db = pass * (NT / 8) + 4 * (qw / 4) + u % 4;   // d 4db .. 4db+3
        if (BD < NT / 2 && db >= BD / 4) break;                  // more threads than the tile needs
        float4 v[4];
        #pragma unroll
        for (int j = 0; j < 4; j++)   // rounded to TF32 on the way (see mf_wg_round)
            v[j] = mf_round_tf32(*reinterpret_cast<const float4*>(&S[(4 * kb + j) * LD + 4 * db]));
        const float4 w[4] = {make_float4(v[0].x, v[1].x, v[2].x, v[3].x), make_float4(v[0].y, v[1].y, v[2].y, v[3].y),
                             make_float4(v[0].z, v[1].z, v[2].z, v[3].z), make_float4(v[0].w, v[1].w, v[2].w, v[3].w)};
        #pragma unroll
        for (int j = 0; j < 4; j++) {   // row d, k-chunk kb of the k-major tile, swizzled
            const int d = 4 * db + j;
            *reinterpret_cast<float4*>(km + d * 128 + ((kb ^ (d & 7)) << 4)) = w[j];
        }
    }
}

// C (M, N) = epilogue(A . B) in the layout given by A_KC / B_KC (see the top of the file); grid, K split,
// cluster reduction and epilogue as in the other kernels. WGS warpgroups of 128 threads, each 64 rows of
// the tile (BM = 64 * WGS, B's tile is shared), NB: 64-column blocks of the tile (BN = 64 * NB).
// Shared memory (from a 1024-byte aligned start): the k-major tiles of A (a ring of ST if A is
// k-contiguous, else 2 that the transposes fill in turn), those of B likewise, then the staging rings
// (ST tiles) of the d-contiguous operands.
template<int WGS, int NB, int ST, bool A_KC, bool B_KC, bool RND>
__global__ void __launch_bounds__(128 * WGS)
matmul_fast_wgmma_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                         int M, int N, int K, int kchunk, int vec, int split, MatmulFastEpi epi) {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    constexpr int BM = 64 * WGS, BN = 64 * NB, BK = 32, NT = 128 * WGS;
    typedef MfTile<BM, BK, NT, false, 4> SA;   // the staging tiles of d-contiguous operands
    typedef MfTile<BN, BK, NT, false, 4> SB;
    constexpr int A_KM = BM * BK * 4, B_KM = BN * BK * 4;   // bytes of a k-major tile, multiples of 1024
    constexpr int B_OFF = (A_KC ? ST : 2) * A_KM, SA_OFF = B_OFF + (B_KC ? ST : 2) * B_KM;
    constexpr int SB_OFF = SA_OFF + (A_KC ? 0 : ST * SA::FLOATS * 4);
    static_assert(ST >= 3, "copies run ST - 2 tiles ahead");
    extern __shared__ __align__(16) float smem[];   // mf_wg_smem_floats(WGS, NB, ST, A_KC, B_KC) floats
    const unsigned sraw = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned pad = (1024u - (sraw & 1023u)) & 1023u;   // atoms start 1024-byte aligned
    const unsigned sbase = sraw + pad;
    char* const gbase = reinterpret_cast<char*>(smem) + pad;  // the same place, as a pointer

    pdl_wait();   // as in the other kernels
    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32, g = lane / 4, q = lane % 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    const int ntiles = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;

    // thread (warp w of the block, g, q) holds, of each 64-column block nb, rows 16w + g (+8) and columns
    // 8c + 2q (+1) (a warpgroup's wgmma gives its warp w % 4 rows 16 (w % 4) + ..., and its A tile starts at row
    // 64 (w / 4)):
    // acc[nb][c * 4 + h * 2 + e] is row 16w + g + 8h, column nb * 64 + 8c + 2q + e
    float acc[NB][32];
    #pragma unroll
    for (int nb = 0; nb < NB; nb++)
        #pragma unroll
        for (int i = 0; i < 32; i++) acc[nb][i] = 0.0f;

    typename SA::Chunks ca;   // the staging copies' addresses, worked out once (MfTile)
    typename SB::Chunks cb;
    if constexpr (!A_KC) { if (vec) SA::chunks(ca, M, M, m0, kbeg, tid); }
    if constexpr (!B_KC) { if (vec) SB::chunks(cb, N, N, n0, kbeg, tid); }
    auto load_tile = [&](int t) {   // tile t into stage t % ST (of the k-major ring, or of the staging ring)
        const int st = t % ST, k0 = kbeg + t * BK;
        if constexpr (A_KC) {
            if (vec) mf_wg_load<BM, NT, true>(sbase + st * A_KM, A, M, K, m0, k0, kend, tid);
            else mf_wg_load<BM, NT, false>(sbase + st * A_KM, A, M, K, m0, k0, kend, tid);
        } else {
            if (vec) SA::load_vec(sbase + SA_OFF + st * SA::FLOATS * 4, ca, A, M, t, kend);
            else SA::load(reinterpret_cast<float*>(gbase + SA_OFF) + st * SA::FLOATS, A, M, M, m0, k0, kend, tid, false);
        }
        if constexpr (B_KC) {
            if (vec) mf_wg_load<BN, NT, true>(sbase + B_OFF + st * B_KM, B, N, K, n0, k0, kend, tid);
            else mf_wg_load<BN, NT, false>(sbase + B_OFF + st * B_KM, B, N, K, n0, k0, kend, tid);
        } else {
            if (vec) SB::load_vec(sbase + SB_OFF + st * SB::FLOATS * 4, cb, B, N, t, kend);
            else SB::load(reinterpret_cast<float*>(gbase + SB_OFF) + st * SB::FLOATS, B, N, N, n0, k0, kend, tid, false);
        }
    };
    mf_prefetch<ST - 2>(ntiles, load_tile);   // (ST - 2 tiles ahead: see above)
    for (int t = 0; t < ntiles; t++) {
        mf_cp_wait<ST - 3>();     // tile t has landed (this thread's copies) ...
        if constexpr (A_KC && RND) mf_wg_round<BM, NT>(gbase + (t % ST) * A_KM, tid);   // ... rounded ...
        if constexpr (B_KC && RND) mf_wg_round<BN, NT>(gbase + B_OFF + (t % ST) * B_KM, tid);
        if constexpr (A_KC && B_KC) mf_fence_proxy_async();   // ... visible to the tensor cores ...
        __syncthreads();          // ... everybody's; and every thread is past tile t - 1's wait
        if (t + ST - 2 < ntiles) load_tile(t + ST - 2);   // into the stage of tile t - 2
        mf_cp_commit();
        const unsigned a_km = sbase + (A_KC ? t % ST : t % 2) * A_KM;
        const unsigned b_km = sbase + B_OFF + (B_KC ? t % ST : t % 2) * B_KM;
        if constexpr (!A_KC || !B_KC) {   // transposes into k-major tile t % 2: its products of tile t - 2
            if constexpr (!A_KC)          // are complete (the waits at tile t - 1)
                mf_wg_transpose<BM, NT>(gbase + (a_km - sbase), reinterpret_cast<const float*>(gbase + SA_OFF) + (t % ST) * SA::FLOATS, tid);
            if constexpr (!B_KC)
                mf_wg_transpose<BN, NT>(gbase + (b_km - sbase), reinterpret_cast<const float*>(gbase + SB_OFF) + (t % ST) * SB::FLOATS, tid);
            mf_fence_proxy_async();   // the stores (and the copies of a k-contiguous operand) -> tensor cores
            __syncthreads();
        }
        mf_wg_fence();
        #pragma unroll
        for (int ks = 0; ks < BK / 8; ks++) {
            const uint64_t da = mf_wg_desc(a_km + (tid / 128) * 64 * 128 + ks * 32);   // this warpgroup's rows
            #pragma unroll
            for (int nb = 0; nb < NB; nb++)
                mf_wgmma_n64(acc[nb], da, mf_wg_desc(b_km + nb * 64 * 128 + ks * 32));
        }
        mf_wg_commit();
        mf_wg_wait<1>();          // tile t - 1's products are done
    }
    mf_wg_wait<0>();
    mf_cp_wait<0>();
    #pragma unroll
    for (int nb = 0; nb < NB; nb++)
        #pragma unroll
        for (int i = 0; i < 32; i++) mf_wg_pin(acc[nb][i]);
    __syncthreads();   // the shared memory may be reused (cluster reduction)

    float* red = reinterpret_cast<float*>(gbase);
    if (split == MF_SPLIT_CLUSTER) {   // gridDim.z blocks of one cluster share this tile: reduce in shared memory
        #pragma unroll
        for (int nb = 0; nb < NB; nb++)
            #pragma unroll
            for (int c = 0; c < 8; c++)
                #pragma unroll
                for (int h = 0; h < 2; h++)
                    *reinterpret_cast<float2*>(&red[(warp * 16 + g + h * 8) * BN + nb * 64 + c * 8 + 2 * q]) =
                        make_float2(acc[nb][c * 4 + h * 2], acc[nb][c * 4 + h * 2 + 1]);
        mf_cluster_reduce<BM, BN, NT>(C, red, m0, n0, M, N, vec != 0, epi);
        return;
    }
    float* Cz = C + (size_t)blockIdx.z * M * N;
    #pragma unroll
    for (int h = 0; h < 2; h++) {
        const int m = m0 + warp * 16 + g + h * 8;
        if (m >= M) continue;
        #pragma unroll
        for (int nb = 0; nb < NB; nb++)
            #pragma unroll
            for (int c = 0; c < 8; c++)
                mf_store_pair(Cz, acc[nb][c * 4 + h * 2], acc[nb][c * 4 + h * 2 + 1], m, n0 + nb * 64 + c * 8 + 2 * q,
                              N, vec != 0, epi);
    }
#endif
}

#endif  // MLP_FAST_WGMMA_TF32_CUH
