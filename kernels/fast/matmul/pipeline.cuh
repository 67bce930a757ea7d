/*
kernels/fast/matmul/pipeline.cuh: how the fast matmul kernels feed their operand tiles from global to shared
memory, overlapped with the arithmetic: asynchronous copies (cp.async, sm_80+) through a ring of
shared-memory stages. All the kernels of kernels/fast/ (FP32 tiles, mma.sync, wgmma) and dev/cuda's
experiments build on it.

The generic product: C(M, N) = sum_k A(m, k) B(k, n), each operand either k-contiguous ("KC": A is
(M, K) row-major, B is (N, K)) or d-contiguous (A is (K, M), B is (K, N)); kernels/fast/matmul/matmul_fast.h
says which layout each product of a linear layer is.

Why: a tile that is copied while the previous one is multiplied costs no waiting. While tile t is
computed, the copies of tiles t+1 .. t+ST-1 are in flight (mf_mainloop). Shared memory keeps each
operand's global layout (a k-contiguous operand as S[row][k], the other as S[k][row]), rows padded
against bank conflicts; each kernel's compute loop reads each layout the way that suits it.
Copies are 16 bytes where the widths and the pointers allow it (vec), else 4 bytes with bounds
checks; out-of-range elements are written as 0 by the copy itself (a source size of 0), so tails
need no branch in the arithmetic.
*/
#ifndef MLP_FAST_PIPELINE_CUH
#define MLP_FAST_PIPELINE_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "configs.cuh"  // mf_tile_floats

static inline int mf_ceil_div(int a, int b) { return (a + b - 1) / b; }

// ----------------------------------------------------------------------------
// asynchronous copies global -> shared (sm_80+): cp.async with a source size, so that an
// out-of-range element is written as 0 without a branch around the copy. Before sm_80 the same
// functions are plain loads and stores (the pipeline then simply has no overlap).

__device__ __forceinline__ void mf_cp16(float* s, const float* g, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(sa), "l"(g), "r"(ok ? 16 : 0) : "memory");
#else
    *reinterpret_cast<float4*>(s) = ok ? *reinterpret_cast<const float4*>(g) : make_float4(0.f, 0.f, 0.f, 0.f);
#endif
}

// the same with the shared-memory address as the 32-bit address cp.async takes
__device__ __forceinline__ void mf_cp16(unsigned sa, const float* g, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(sa), "l"(g), "r"(ok ? 16 : 0) : "memory");
#endif
}

__device__ __forceinline__ void mf_cp4(float* s, const float* g, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned sa = (unsigned)__cvta_generic_to_shared(s);
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(sa), "l"(g), "r"(ok ? 4 : 0) : "memory");
#else
    *s = ok ? *g : 0.0f;
#endif
}

// the same with the shared-memory address as the 32-bit address cp.async takes
__device__ __forceinline__ void mf_cp4(unsigned sa, const float* g, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(sa), "l"(g), "r"(ok ? 4 : 0) : "memory");
#endif
}

__device__ __forceinline__ void mf_cp_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// wait until at most N committed groups of this thread are still in flight
template<int N>
__device__ __forceinline__ void mf_cp_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("cp.async.wait_group %0;\n" :: "n"(N) : "memory");
#endif
}

// The pipeline's prologue: tiles 0 .. N-1 (those that exist) are put in flight, one commit group per
// tile slot even past the last tile, so that the wait_group counts of the main loop stay uniform.
template<int N, class F>
__device__ __forceinline__ void mf_prefetch(int ntiles, F&& load_tile) {
    #pragma unroll
    for (int s = 0; s < N; s++) {
        if (s < ntiles) load_tile(s);
        mf_cp_commit();
    }
}

// ----------------------------------------------------------------------------
// one operand tile in shared memory: rows d0 .. d0+BD-1 of X, k in [k0, k0 + BK) clipped to kend,
// d clipped to D (outside: 0).
// KC: X is k-contiguous, X(d, k) = X[d * ld + k]; shared S[d][k], rows of LD = BK + 4 floats.
// otherwise X is d-contiguous, X(d, k) = X[k * ld + d]; shared S[k][d], rows of LD = BD + PADD.
// vec: the contiguous width and the pointer allow 16-byte copies (a run-time flag, uniform over
// the grid: one kernel serves aligned and odd shapes, which halves the kernels to compile).

template<int BD, int BK, int NT, bool KC, int PADD>
struct MfTile {
    static constexpr int LD = KC ? BK + 4 : BD + PADD;
    static constexpr int FLOATS = mf_tile_floats(BD, BK, KC, PADD);
    static constexpr int NV = BD * BK / 4 / NT;   // 4-float chunks per thread
    static_assert(NV >= 1 && NV * 4 * NT == BD * BK, "tile must split evenly into 4-float chunks per thread");

    // The 16-byte copies (vec) of every tile of a d-contiguous operand, with the addresses worked out
    // once: a thread copies the same chunks of every tile, to the same places in shared memory, from
    // global addresses BK rows apart. Worked out afresh for each tile (load(), below), the row offset
    // k * ld costs a 64-bit multiply per copy. A k-contiguous operand keeps load(): its row offset
    // d * ld stays the same from tile to tile, and holding 64-bit offsets per chunk for it too costs
    // those kernels registers, and more time than it saves.
    static constexpr bool PRE = !KC;   // use chunks() and load_vec() (only then)
    struct Chunks {
        size_t off[NV];   // the chunk's element offset in X in the first tile
        unsigned s[NV];   // its byte offset in the shared tile
        int k[NV];        // its k (the 4 elements share it)
        bool in[NV];      // its 4 rows d are in range (D % 4 == 0 with vec: all or none)
    };
    __device__ __forceinline__ static void chunks(Chunks& ch, int D, int ld, int d0, int kbeg, int tid) {
        static_assert(!KC, "chunks() is for d-contiguous operands");
        #pragma unroll
        for (int i = 0; i < NV; i++) {
            const int c = tid + i * NT;
            const int k = c / (BD / 4), d = (c % (BD / 4)) * 4;   // as in load()
            ch.off[i] = (size_t)(kbeg + k) * ld + d0 + d;
            ch.s[i] = (unsigned)(k * LD + d) * 4u;
            ch.k[i] = kbeg + k;
            ch.in[i] = d0 + d < D;
        }
    }
    // tile t (k from kbeg + t * BK) into the shared tile at shared address sa
    __device__ __forceinline__ static void load_vec(unsigned sa, const Chunks& ch, const float* __restrict__ X,
                                                    int ld, int t, int kend) {
        const size_t step = (size_t)t * BK * ld;
        #pragma unroll
        for (int i = 0; i < NV; i++) {
            const bool ok = ch.in[i] && ch.k[i] + t * BK < kend;
            mf_cp16(sa + ch.s[i], ok ? X + ch.off[i] + step : X, ok);
        }
    }

    __device__ __forceinline__ static void load(float* S, const float* __restrict__ X, int D, int ld, int d0,
                                                int k0, int kend, int tid, bool vec) {
        #pragma unroll
        for (int i = 0; i < NV; i++) {
            const int c = tid + i * NT;
            int d, k;   // first of the chunk's 4 elements (4 k when KC, else 4 d); contiguous in S
            if (KC) { d = c / (BK / 4); k = (c % (BK / 4)) * 4; }
            else    { k = c / (BD / 4); d = (c % (BD / 4)) * 4; }
            float* s = KC ? S + d * LD + k : S + k * LD + d;
            const int gd = d0 + d, gk = k0 + k;
            if (vec) {   // a chunk is all in range or all out (widths % 4 == 0, k splits % BK == 0)
                const bool ok = gd < D && gk < kend;
                mf_cp16(s, ok ? X + (KC ? (size_t)gd * ld + gk : (size_t)gk * ld + gd) : X, ok);
            } else {
                #pragma unroll
                for (int j = 0; j < 4; j++) {
                    const int dd = KC ? gd : gd + j, kk = KC ? gk + j : gk;
                    const bool ok = dd < D && kk < kend;
                    mf_cp4(s + j, ok ? X + (KC ? (size_t)dd * ld + kk : (size_t)kk * ld + dd) : X, ok);
                }
            }
        }
    }
};


#ifdef MF_PROF_LOOP
// dev/fused_profile.cu's tile profile only (built with -DMF_PROF_LOOP): the cycles thread 0 of each
// block spends in mf_mainloop waiting for its tiles (and the other warps), and for its first tile
static __device__ long long mf_prof_wait[1024], mf_prof_first[1024];
#endif

// ----------------------------------------------------------------------------
// the pipeline the FP32 and mma.sync kernels share (the wgmma kernel runs its own, on the same
// copies): tiles t = 0 .. ntiles-1 of this block's K slice go through a ring
// of ST shared-memory stages; compute(as, bs) is called once per tile, in order, with the tile ready.
// One __syncthreads per tile: after it, every thread has finished tile t-1, so its stage can be refilled.

template<int BM, int BN, int BK, int ST, class TA, class TB, class F>
__device__ __forceinline__ void mf_mainloop(float* smem, const float* __restrict__ A, const float* __restrict__ B,
                                            int M, int N, int lda, int ldb, int m0, int n0, int kbeg, int kend,
                                            int ntiles, int tid, bool vec, F&& compute) {
    constexpr int STAGE = TA::FLOATS + TB::FLOATS;
    typename TA::Chunks ca;
    typename TB::Chunks cb;
    // Worked out with or without vec (only load_vec uses them): computed only under `if (vec)`, they
    // were miscompiled by nvcc 13.0, which reused their shared-memory offsets, never set, in load()'s
    // copies of odd shapes too (wrong results; compute-sanitizer's racecheck sees every thread of a row
    // copy to one address).
    if constexpr (TA::PRE) TA::chunks(ca, M, lda, m0, kbeg, tid);
    if constexpr (TB::PRE) TB::chunks(cb, N, ldb, n0, kbeg, tid);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
    auto load_tile = [&](int t) {   // tile t into stage t % ST
        const int s = t % ST;
        if (TA::PRE && vec) TA::load_vec(sbase + (unsigned)(s * STAGE) * 4u, ca, A, lda, t, kend);
        else TA::load(smem + s * STAGE, A, M, lda, m0, kbeg + t * BK, kend, tid, vec);
        if (TB::PRE && vec) TB::load_vec(sbase + (unsigned)(s * STAGE + TA::FLOATS) * 4u, cb, B, ldb, t, kend);
        else TB::load(smem + s * STAGE + TA::FLOATS, B, N, ldb, n0, kbeg + t * BK, kend, tid, vec);
    };
    mf_prefetch<ST - 1>(ntiles, load_tile);
    for (int t = 0; t < ntiles; t++) {
#ifdef MF_PROF_LOOP
        const long long pw = clock64();
#endif
        mf_cp_wait<ST - 2>();   // tile t has landed (this thread's copies) ...
        __syncthreads();        // ... and everybody's; and tile t-1's stage is free
#ifdef MF_PROF_LOOP
        if (threadIdx.x == 0) {
            const long long d = clock64() - pw;
            mf_prof_wait[blockIdx.x] += d;
            if (t == 0) mf_prof_first[blockIdx.x] += d;
        }
#endif
        if (t + ST - 1 < ntiles) load_tile(t + ST - 1);
        mf_cp_commit();
        const float* st = smem + (t % ST) * STAGE;
        compute(st, st + TA::FLOATS);
    }
    mf_cp_wait<0>();
    __syncthreads();   // the shared memory may be reused (cluster reduction)
}

#endif  // MLP_FAST_PIPELINE_CUH
