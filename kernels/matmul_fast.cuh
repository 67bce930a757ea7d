/*
kernels/matmul_fast.cuh: the fast matmuls of a linear layer, FP32 (FFMA) or opt-in TF32 tensor cores.

Key: B batch, IN input features, OUT output features. Everything is row-major.
    inp (B, IN), weight (OUT, IN) as PyTorch's nn.Linear stores it, bias (OUT), out (B, OUT)

The three products of a linear layer, and the generic matmul each one is:
    forward: out(B,OUT)     = act( inp(B,IN) . weight(OUT,IN)^T + bias(OUT) )
             "NT": C[m][n] = sum_k A[m][k] * B[n][k]     M = B,   N = OUT, K = IN
    dinp:    dinp(B,IN)     = ( dout(B,OUT) . weight(OUT,IN) ) * act'(inp_act(B,IN))
             "NN": C[m][n] = sum_k A[m][k] * B[k][n]     M = B,   N = IN,  K = OUT
    dweight: dweight(OUT,IN) = dout(B,OUT)^T . inp(B,IN)             (overwrites)
             "TN": C[m][n] = sum_k A[k][m] * B[k][n]     M = OUT, N = IN,  K = B

act codes (the trainer's enum): 0 sigmoid, 1 relu, 2 tanh, 3 none. act' is computed from the
activation OUTPUT y: sigmoid' = y(1-y), relu' = (y > 0), tanh' = 1 - y^2, none' = 1.

How it works (dev/cuda/matmul_forward.cu has the progression from the naive kernel to this one):
- One tiled kernel serves all three layouts. Operand tiles go from global to shared memory with
  cp.async (16-byte copies when the widths allow it, 4-byte ones with bounds checks otherwise;
  out-of-range elements are zero-filled), in a ring of STAGES buffers: while tile t is computed, the
  copies of tiles t+1 .. t+STAGES-1 are in flight. Shared memory keeps each operand's global layout
  (a k-contiguous operand as S[row][k], the other as S[k][row]), rows padded against bank conflicts;
  the compute loop reads each layout the way that suits it. A thread copies the same chunks of every
  tile; for a d-contiguous operand their addresses are worked out once per block (MfTile::Chunks).
- FP32: each thread owns a TM x TN block of C (register blocking) and takes 4 k at a time: from a
  k-contiguous tile one float4 per row, from the other one float4 of 4 rows per k.
- TF32 (tf32=1): each warp owns a WM x WN block of C made of 16x8 mma.sync.m16n8k8 tiles; fragments
  of a k-contiguous tile come from shared memory by ldmatrix, those of the other layout element by
  element (both conflict-free with the padding), and are rounded to TF32 with cvt.rna on the way.
- TF32 with wgmma (sm_90a builds only, configurations 11-14): the tensor cores read both tiles from
  shared memory themselves. Rounding its tiles to TF32 (which it needs, see there) costs what it
  gains (dev/cuda/README.md, run 13), so the trainer picks it only for forward products whose operands
  are TF32 values already (MF_TF32_EXACT): there it skips the rounding.
- The tile size and the K split are chosen per shape (mf_plan) so the grid fills the GPU's
  multiprocessors. Where the output is small, K is split: on sm_90 the K slices of a tile run as one
  thread-block cluster and add their partial tiles through distributed shared memory. FP32 forward and
  dinp products given a fixup workspace (MfSplitK; built with MF_FIXUP_KERNELS, dev/cuda's MF_FIXUP=1,
  not the trainer: run 17 in dev/cuda/README.md) write their partial tiles there instead, where the
  grid has a block per SM, and the last block of each tile to finish adds them up. Either way in the
  order 0, 1, .., S-1.
  Whether clusters are used is decided from what was compiled (the kernels' PTX version), not from
  the GPU alone. (dweight splits K through partial buffers in `scratch` and a reduce kernel where
  there are no clusters.) The only atomic is the fixup's count of finished blocks per tile, which says
  who adds up, not in what order: results are bitwise reproducible.
- Any sizes work (B = 1, widths like 37): tails are bounds-checked, out-of-range inputs read as 0.
- The launchers only enqueue kernels (no allocation, no synchronisation), so they can be captured
  into a CUDA graph. Every launch is checked with cudaCheck(cudaGetLastError()).
*/
#pragma once
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include "activation.cuh"   // activation_apply, activation_grad_from_output (the epilogues)
#include "common.cuh"   // cudaCheck: one-line errors with a hint
#include "sgd.cuh"      // sgd_one, for the SGD fused into dweight's epilogue

// ----------------------------------------------------------------------------
// utilities

static inline int mf_ceil_div(int a, int b) { return (a + b - 1) / b; }

// x rounded to TF32 (common.cuh), as the bits an mma.sync operand register takes
__device__ __forceinline__ uint32_t mf_to_tf32(float x) { return __float_as_uint(round_tf32(x)); }
// the four floats rounded to TF32, kept as floats (for tiles the tensor cores read as they are)
__device__ __forceinline__ float4 mf_round_tf32(float4 v) {
    return make_float4(round_tf32(v.x), round_tf32(v.y), round_tf32(v.z), round_tf32(v.w));
}

// The launchers' tf32 argument: 0 FP32; MF_TF32_ROUND: TF32 tensor cores, the kernels round every
// operand to TF32 on the way in; MF_TF32_EXACT: the same, for operands that are TF32 values already
// (round_tf32 applied by whoever wrote them: in -x 1 the trainer's gather, its forward epilogues and
// its optimizer keep the forward products' inputs so), which the kernels then take as they are: the
// wgmma kernel without its rounding pass (dev/cuda/README.md, run 13d: that pass is a fifth of the
// kernel's time), the mma.sync kernel without a cvt per fragment element (RND = false; run 15: 7-12%
// faster), for the layouts they are compiled for (mf_launch_kernel). Rounding a TF32 value again
// changes nothing, so they give the same products on such operands as MF_TF32_ROUND.
enum { MF_TF32_ROUND = 1, MF_TF32_EXACT = 2 };
#ifndef MF_EXACT_ALL_LAYOUTS
#define MF_EXACT_ALL_LAYOUTS 0   // 1: mma.sync kernels without the rounding for every layout (see mf_launch_kernel)
#endif
#ifndef MF_FIXUP_KERNELS
#define MF_FIXUP_KERNELS 0   // 1: the FP32 kernels of MF_SPLIT_FIXUP (dev/cuda's Makefile; the trainer uses none)
#endif

// what happens to an output element after its sum is complete
enum { MF_EPI_RAW = 0, MF_EPI_FORWARD = 1, MF_EPI_DINP = 2, MF_EPI_SGD = 3 };

// SGD fused into the weight gradient's epilogue (kernels/sgd.cuh): once dW[i] is complete, the same
// thread updates the parameter and its momentum, param[i] and mbuf[i], laid out like dW.
typedef struct {
    float* param;        // (M, N) the weights W, updated in place
    float* mbuf;         // (M, N) their momentum buffer
    float lr, mu, wd;
    float* param_tf32;   // NULL, or (M, N): the updated weights rounded to TF32 are also stored here
} MatmulFastSgd;

typedef struct {
    int kind;            // MF_EPI_*
    int act;             // activation code 0..3
    const float* bias;   // (N) for MF_EPI_FORWARD, may be NULL
    const float* aux;    // (M, N) activation output for MF_EPI_DINP, may be NULL when act == 3
    MatmulFastSgd sgd;   // for MF_EPI_SGD
    int round_out;       // MF_EPI_FORWARD: store the output rounded to TF32 (the next MF_TF32_EXACT product's input)
} MatmulFastEpi;

// How the K slices of a split product (gridDim.z > 1) are added up (the kernels' `split` argument):
//   MF_SPLIT_RAW: each slice z writes its partial sums raw to C + z * M * N (scratch; a reduce kernel adds them)
//   MF_SPLIT_CLUSTER: the slices of a tile are one thread-block cluster and add up in distributed shared memory
//   MF_SPLIT_FIXUP (the FP32 kernel for forward and dinp only): each slice writes its partial tile to
//       MfSplitK::part; the last block of the tile to finish (a counter per tile) adds the S partials in
//       the order 0 .. S-1 and stores the result. A workspace in global memory instead of a cluster: the blocks are scheduled like any
//       others, over all the SMs. Clusters of 4 left SMs without work (ncu: sm__cycles_active.min 0 on
//       an H200); alone, the dinp product 1024 -> 1024 at batch 256 takes 0.0246 ms this way against
//       0.0263 through clusters, but the trainer's wide FP32 epoch got slower (dev/cuda/README.md, run 17),
//       so the trainer passes no workspace.
enum { MF_SPLIT_RAW = 0, MF_SPLIT_CLUSTER = 1, MF_SPLIT_FIXUP = 2 };
// the workspace of MF_SPLIT_FIXUP (matmul_fast_fixup_alloc). Kernels that use one workspace must run one
// after another (one stream): the counters are shared.
typedef struct {
    float* part;          // partial tiles: S * (tiles of the grid) * BM * BN floats
    unsigned* count;      // one counter per output tile, 0 between launches (the last block resets it)
    size_t part_floats;   // the sizes of part and count; a product that needs more splits K through
    size_t tiles;         // clusters instead (or not at all)
} MfSplitK;

// The epilogue of output (m, n) in two halves: mf_epi_load reads what it needs from memory (the bias,
// the activation output, the weight and its momentum), mf_epi_apply computes the value to store (and
// stores the SGD step). Apart, so that the cluster reduction (mf_cluster_reduce) can have the loads of several
// outputs in flight at once: one at a time, each output waited a full memory latency for its load.
typedef struct { float a, b; } MfEpiIn;
__device__ __forceinline__ MfEpiIn mf_epi_load(int m, int n, int N, const MatmulFastEpi& epi) {
    MfEpiIn in = {0.0f, 0.0f};
    const size_t i = (size_t)m * N + n;
    if (epi.kind == MF_EPI_FORWARD && epi.bias != NULL) in.a = epi.bias[n];
    else if (epi.kind == MF_EPI_DINP && epi.act != 3) in.a = epi.aux[i];
    else if (epi.kind == MF_EPI_SGD) { in.a = epi.sgd.param[i]; in.b = epi.sgd.mbuf[i]; }
    return in;
}
__device__ __forceinline__ float mf_epi_apply(float v, MfEpiIn in, int m, int n, int N, const MatmulFastEpi& epi) {
    if (epi.kind == MF_EPI_FORWARD) {
        v = activation_apply(v + in.a, epi.act);   // (in.a is 0 without a bias)
        return epi.round_out ? round_tf32(v) : v;
    }
    if (epi.kind == MF_EPI_DINP && epi.act != 3) return v * activation_grad_from_output(in.a, epi.act);
    if (epi.kind == MF_EPI_SGD) {   // v is dW[m][n], complete: the gradient is stored, and W steps
        const size_t i = (size_t)m * N + n;
        sgd_one(in.a, v, in.b, epi.sgd.lr, epi.sgd.mu, epi.sgd.wd);
        epi.sgd.param[i] = in.a;
        epi.sgd.mbuf[i] = in.b;
        if (epi.sgd.param_tf32 != NULL) epi.sgd.param_tf32[i] = round_tf32(in.a);
    }
    return v;
}

// whether the epilogue leaves the sums as they are (the weight gradient; a product without bias,
// activation or rounding): then the register-tile stores skip mf_epilogue, whose call per output cost
// the weight gradient 10-20% (dev/cuda/README.md, run 15)
__device__ __forceinline__ bool mf_epi_identity(const MatmulFastEpi& epi) {
    return epi.kind == MF_EPI_RAW || (epi.kind == MF_EPI_FORWARD && epi.bias == NULL && epi.act == 3 && !epi.round_out)
        || (epi.kind == MF_EPI_DINP && epi.act == 3);
}

// both halves, for one output. Not inlined: the epilogue runs once per output, and its inlined copies
// kept the compiler from unrolling the store loops (the accumulators then went to local memory)
__device__ __noinline__ float mf_epilogue(float v, int m, int n, int N, const MatmulFastEpi epi) {
    return mf_epi_apply(v, mf_epi_load(m, n, N, epi), m, n, N, epi);
}

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

// floats of one operand tile in shared memory (see MfTile), and of a kernel's whole shared memory:
// ST stages of (A tile, B tile), or the BM x BN partial tile of the cluster reduction if that is larger
__host__ __device__ constexpr int mf_tile_floats(int BD, int BK, bool KC, int PADD) {
    return KC ? BD * (BK + 4) : BK * (BD + PADD);
}
__host__ __device__ constexpr int mf_smem_floats(int BM, int BN, int BK, int ST, bool A_KC, bool B_KC, int PADD) {
    return ST * (mf_tile_floats(BM, BK, A_KC, PADD) + mf_tile_floats(BN, BK, B_KC, PADD)) > BM * BN
         ? ST * (mf_tile_floats(BM, BK, A_KC, PADD) + mf_tile_floats(BN, BK, B_KC, PADD)) : BM * BN;
}

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
    // d * ld stays the same from tile to tile, and holding 64-bit offsets per chunk for it too raised
    // those kernels' registers and made the forward product 10-15% slower, while the products with
    // d-contiguous operands got 3-7% faster (dev/cuda/README.md, "Addresses once per block").
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

// ----------------------------------------------------------------------------
// split-K inside a thread-block cluster (Hopper, sm_90): the S blocks of a cluster compute the same
// output tile over S slices of K, each leaves its partial tile in its own shared memory (red, BM x BN),
// then block r adds up elements [r*BM*BN/S, (r+1)*BM*BN/S) over the S partials, always in the order
// 0, 1, ..., S-1, through distributed shared memory, and applies the epilogue. No scratch in global
// memory, no atomics: the result is the same every run. A thread takes a float4 at a time, with the
// epilogue's loads for the four in flight together with the partials' (mf_epi_load): the dinp
// product 1024 -> 1024 of the wide TF32 step went from 18.1-18.8 to 15.4-15.9 us that way (ncu, H200),
// against one mf_epilogue call after another. (Two or four float4s per round, all their loads first, cost the
// kernels registers, 80 -> 90-128 per thread in the TF32 ones: fewer blocks per SM.)
// The register-tile epilogue (mf_store_pair and the like) still calls mf_epilogue output by output,
// each waiting for its own loads: fine for the bias and the activation, but the SGD step there is
// latency-bound (the first layer's dweight with its step: 34 us, 13-15 without, ncu, wide TF32 step),
// so the trainer fuses it only for small layers (train_mlp.cu FUSED_SGD_MAX_WEIGHTS).

template<int BM, int BN, int NT>
__device__ __forceinline__ void mf_cluster_reduce(float* C, float* red, int m0, int n0, int M, int N, bool vec,
                                                  const MatmulFastEpi& epi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    static_assert(BN % 4 == 0, "a float4 of the partial tile stays in one row");
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();   // every partial tile is in shared memory
    const int S = (int)cluster.num_blocks(), r = (int)cluster.block_rank();
    const float4* parts[8];            // the S partial tiles, in distributed shared memory
    #pragma unroll
    for (int z = 0; z < 8; z++) parts[z] = reinterpret_cast<const float4*>(cluster.map_shared_rank(red, z < S ? z : 0));
    const int per = BM * BN / 4 / S;   // float4s this block adds up (S is 2, 4 or 8: BM * BN / 4 divides)
    for (int e4 = r * per + (int)threadIdx.x; e4 < (r + 1) * per; e4 += NT) {
        const int m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
        MfEpiIn in[4];   // the epilogue's loads first, all four in flight ...
        #pragma unroll
        for (int j = 0; j < 4; j++) in[j] = m < M && n + j < N ? mf_epi_load(m, n + j, N, epi) : MfEpiIn{0.0f, 0.0f};
        float4 p[8];     // ... and the S partial sums', then added in the order 0 .. S-1
        #pragma unroll
        for (int z = 0; z < 8; z++) if (z < S) p[z] = parts[z][e4];
        float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
        #pragma unroll
        for (int z = 0; z < 8; z++)
            if (z < S) { v.x += p[z].x; v.y += p[z].y; v.z += p[z].z; v.w += p[z].w; }
        if (m >= M) continue;
        float o[4] = {v.x, v.y, v.z, v.w};
        #pragma unroll   // only in range: past column N - 1 the index m * N + n is the next row's
        for (int j = 0; j < 4; j++) if (n + j < N) o[j] = mf_epi_apply(o[j], in[j], m, n + j, N, epi);
        if (vec && n < N) {   // N % 4 == 0 and C 16-byte aligned: the four are in range together
            *reinterpret_cast<float4*>(&C[(size_t)m * N + n]) = make_float4(o[0], o[1], o[2], o[3]);
        } else {
            #pragma unroll
            for (int j = 0; j < 4; j++) if (n + j < N) C[(size_t)m * N + n + j] = o[j];
        }
    }
    cluster.sync();   // no block leaves while another still reads its shared memory
#endif
}

// ----------------------------------------------------------------------------
// the pipeline both kernels share: tiles t = 0 .. ntiles-1 of this block's K slice go through a ring
// of ST shared-memory stages; compute(as, bs) is called once per tile, in order, with the tile ready.
// One __syncthreads per tile: after it, every thread has finished tile t-1, so its stage can be refilled.

template<int BM, int BN, int BK, int ST, class TA, class TB, class F>
__device__ __forceinline__ void mf_mainloop(float* smem, const float* __restrict__ A, const float* __restrict__ B,
                                            int M, int N, int lda, int ldb, int m0, int n0, int kbeg, int kend,
                                            int ntiles, int tid, bool vec, F&& compute) {
    constexpr int STAGE = TA::FLOATS + TB::FLOATS;
    typename TA::Chunks ca;
    typename TB::Chunks cb;
    // Worked out with or without vec (only load_vec uses them): computed under `if (vec)`, nvcc 13.0
    // reused their shared-memory offsets in load()'s copies of an odd shape too, where they were never
    // set (SASS of the 128x64 t8x4 dinp kernel; compute-sanitizer racecheck: every thread of a row
    // copying to one address; dev/cuda/README.md, run 17).
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
        mf_cp_wait<ST - 2>();   // tile t has landed (this thread's copies) ...
        __syncthreads();        // ... and everybody's; and tile t-1's stage is free
        if (t + ST - 1 < ntiles) load_tile(t + ST - 1);
        mf_cp_commit();
        const float* st = smem + (t % ST) * STAGE;
        compute(st, st + TA::FLOATS);
    }
    mf_cp_wait<0>();
    __syncthreads();   // the shared memory may be reused (cluster reduction)
}

// ----------------------------------------------------------------------------
// FP32 kernel: block tile BM x BN, K in steps of BK through ST stages, each thread a TM x TN register
// block. A_KC: A is (M, K) row-major, else (K, M). B_KC: B is (N, K) row-major, else (K, N).
// C is (M, N); blockIdx.z is the K slice, added up as `split` says (MF_SPLIT_*: with MF_SPLIT_RAW it
// writes C + z * M * N).
// A thread's rows: from a k-contiguous A, ty + i * (BM/TM) (a quarter-warp reads 8 different rows,
// whose padded starts fall in 8 different bank groups); from a row-contiguous A, float4 groups
// ty*4 + {0..3} + g * (BM*4/TM) (a warp reads neighbouring float4s). Columns likewise with tx.

// FIXUP: the kernel for split == MF_SPLIT_FIXUP (a template argument, not only the run-time one: compiled
// into every kernel, that path raised the others' registers, 80 -> 101 in the 32x64 tiles, and made the
// cluster split 10% slower; run 17).
template<int BM, int BN, int BK, int TM, int TN, int ST, bool A_KC, bool B_KC, bool FIXUP>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
matmul_fast_fp32_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                        int M, int N, int K, int kchunk, int vec, int split, MatmulFastEpi epi, MfSplitK sk) {
    constexpr int NT = (BM / TM) * (BN / TN);
    typedef MfTile<BM, BK, NT, A_KC, 4> TA;
    typedef MfTile<BN, BK, NT, B_KC, 4> TB;
    constexpr int RM = BM * 4 / TM, RN = BN * 4 / TN;   // stride between a thread's float4 groups
    static_assert(TM % 4 == 0 && TN % 4 == 0 && BK % 4 == 0, "TM, TN, BK must be multiples of 4");
    // dynamic: mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 4) floats, ST stages of (A tile, B tile); the
    // cluster reduction reuses it. Dynamic because the large tiles need more than the static 48 KB.
    extern __shared__ __align__(16) float smem[];

    pdl_wait();   // with PDL (forward, dinp): the previous kernel's output is visible from here on (common.cuh)
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
    if (!FIXUP && split == MF_SPLIT_CLUSTER) {   // gridDim.z blocks of one cluster share this tile: reduce in shared memory
        #pragma unroll
        for (int i = 0; i < TM; i++)
            #pragma unroll
            for (int j = 0; j < TN; j++) smem[MF_ROW(i) * BN + MF_COL(j)] = acc[i][j];
        mf_cluster_reduce<BM, BN, NT>(C, smem, m0, n0, M, N, vec != 0, epi);
        return;
    }
    if constexpr (FIXUP) {   // gridDim.z blocks share this tile: the last one to finish adds up
        // Every block of the tile keeps the same outputs in the same threads, so each thread writes its
        // partial sums in its own order (its e-th at e * NT + tid: coalesced), and in the last block each
        // thread reads back exactly the outputs it holds, all of a slice's loads in flight together.
        const int S = (int)gridDim.z;
        const unsigned tile = blockIdx.y * gridDim.x + blockIdx.x;
        float* part = sk.part + (size_t)tile * S * (TM * TN * NT);
        #pragma unroll
        for (int i = 0; i < TM; i++)
            #pragma unroll
            for (int j = 0; j < TN; j++) __stcg(&part[((size_t)blockIdx.z * TM * TN + i * TN + j) * NT + tid], acc[i][j]);
        int& is_last = *reinterpret_cast<int*>(smem);   // the stages are free now (mf_mainloop's last barrier)
        __threadfence();   // this block's partial tile is visible GPU-wide before its count
        __syncthreads();
        if (tid == 0) is_last = atomicAdd(&sk.count[tile], 1u) == (unsigned)S - 1;
        __syncthreads();
        if (!is_last) return;
        __threadfence();   // the other blocks' partial tiles are read after their counts
        float sum[TM][TN];
        #pragma unroll
        for (int i = 0; i < TM; i++)
            #pragma unroll
            for (int j = 0; j < TN; j++) sum[i][j] = 0.0f;
        for (int z = 0; z < S; z++) {   // in the order 0 .. S-1, like the cluster reduction: the same bits
            const float* pz = part + (size_t)z * TM * TN * NT;
            #pragma unroll
            for (int i = 0; i < TM; i++)
                #pragma unroll
                for (int j = 0; j < TN; j++)
                    sum[i][j] += z == (int)blockIdx.z ? acc[i][j] : __ldcg(&pz[(i * TN + j) * NT + tid]);
        }
        if (tid == 0) sk.count[tile] = 0;   // every block of the tile has counted: ready for the next launch
        // The epilogue here, its loads up to 16 at a time in flight (the stores below then take the values
        // as they are): output by output through mf_epilogue, each waiting for its own load, the wide FP32
        // step's forward and dinp products came out 3-6% slower than through clusters (ncu, run 17).
        constexpr int R = TN >= 16 ? 1 : 16 / TN;   // rows per round
        static_assert(TM % R == 0, "whole rounds of rows");
        #pragma unroll
        for (int i0 = 0; i0 < TM; i0 += R) {
            MfEpiIn in[R][TN];
            #pragma unroll
            for (int i = 0; i < R; i++)
                #pragma unroll
                for (int j = 0; j < TN; j++) {
                    const int m = m0 + MF_ROW(i0 + i), n = n0 + MF_COL(j);
                    in[i][j] = m < M && n < N ? mf_epi_load(m, n, N, epi) : MfEpiIn{0.0f, 0.0f};
                }
            #pragma unroll
            for (int i = 0; i < R; i++)
                #pragma unroll
                for (int j = 0; j < TN; j++) {
                    const int m = m0 + MF_ROW(i0 + i), n = n0 + MF_COL(j);
                    if (m < M && n < N) acc[i0 + i][j] = mf_epi_apply(sum[i0 + i][j], in[i][j], m, n, N, epi);
                }
        }
    }

    float* Cz = FIXUP ? C : C + (size_t)blockIdx.z * M * N;   // (else MF_SPLIT_RAW, or no split: z = 0)
    const bool id = FIXUP || mf_epi_identity(epi);   // the sums as they are: no mf_epilogue call per output
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

// ----------------------------------------------------------------------------
// TF32 kernel: block tile BM x BN, warps of WM x WN, each warp (WM/16) x (WN/8) mma.m16n8k8 tiles.
// Fragment layouts (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, q = lane % 4:
//   a0 (g, q) a1 (g+8, q) a2 (g, q+4) a3 (g+8, q+4)        A is 16 x 8 (row, k)
//   b0 (k=q, n=g) b1 (k=q+4, n=g)                           B is 8 x 8 (k, n)
//   c0 (g, 2q) c1 (g, 2q+1) c2 (g+8, 2q) c3 (g+8, 2q+1)    C is 16 x 8
// Shared rows: k-contiguous tiles have BK + 4 floats, the others BD + 8 (S[q][g]: bank 8q + g, all 32
// differ). A k-contiguous tile is read with ldmatrix: its 8x8 matrices of 16-bit elements are 8 rows x
// 4 floats here, and lane l receives row l/4, float l%4 of each, which is exactly (g, q); one ldmatrix.x4
// loads an A fragment (a0..a3) or the B fragments of two neighbouring n tiles (8 rows 16 bytes each,
// at BK + 4 floats apart: no bank conflicts). The others are read element by element. Every element
// is rounded to TF32 (cvt.rna) as it is used, unless the operands are TF32 values already (RND = false,
// MF_TF32_EXACT).

// an accumulator pair of a tensor-core tile, C[m][n] and C[m][n + 1] (n even), through the epilogue
__device__ __forceinline__ void mf_store_pair(float* Cz, float v0, float v1, int m, int n, int N, bool vec,
                                              const MatmulFastEpi& epi) {
    if (vec) {
        if (n < N) {   // N % 4 == 0 and n even: both in range, 8-byte aligned
            if (!mf_epi_identity(epi)) {   // (else the sums go out as they are, without a call per output)
                v0 = mf_epilogue(v0, m, n, N, epi);
                v1 = mf_epilogue(v1, m, n + 1, N, epi);
            }
            *reinterpret_cast<float2*>(&Cz[(size_t)m * N + n]) = make_float2(v0, v1);
        }
    } else {
        // only in range: past column N - 1 the index m * N + n is the next row's (the SGD epilogue would
        // step a weight of the next row)
        const bool id = mf_epi_identity(epi);
        if (n < N)     Cz[(size_t)m * N + n]     = id ? v0 : mf_epilogue(v0, m, n, N, epi);
        if (n + 1 < N) Cz[(size_t)m * N + n + 1] = id ? v1 : mf_epilogue(v1, m, n + 1, N, epi);
    }
}

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

template<int BM, int BN, int BK, int WM, int WN, int ST, bool A_KC, bool B_KC, bool RND>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
matmul_fast_tf32_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                        int M, int N, int K, int kchunk, int vec, int split, MatmulFastEpi epi, MfSplitK sk) {
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

// ----------------------------------------------------------------------------
// TF32 with wgmma (Hopper, sm_90a; built only when MF_WGMMA is defined, which both Makefiles do for
// GPU_ARCH=90). Instead of each warp loading fragments from shared memory into registers (the
// mma.sync kernel above: ~19 instructions per mma), the tensor cores read both tiles from shared
// memory themselves, through a 64-bit "matrix descriptor": the tile's address, the byte distance
// between groups of 8 rows (1024 here) and a swizzle mode. One wgmma.m64n64k8 is 64 x 64 x 8
// multiply-adds, issued by a warpgroup (4 warps, 128 threads) together; a block has WGS warpgroups,
// each 64 rows of the tile.
// Shared layout: wgmma takes 32-bit operands k-major only (it cannot transpose them), in the
// "128-byte swizzle" mode here: a tile row is BK = 32 floats = 128 bytes, 8 rows make a 1024-byte
// atom, and within an atom the 16-byte chunk c of row r is stored at chunk c ^ r, so the 8 rows'
// chunk c fall in 8 different bank groups. A k-step of 8 moves the descriptor's address 32 bytes
// along the row; the hardware applies the XOR on the address bits, so atoms start 1024-byte aligned.
// A k-contiguous operand is copied in as it is (16-byte cp.async, mf_wg_load); a d-contiguous one
// (the weight in dinp, both operands of dweight) goes to a staging tile and is transposed from there
// (mf_wg_transpose).
// Rounding: the tensor cores would use the top 19 bits of each float as they find them (rounding
// toward zero), so every tile is rounded to nearest first (cvt.rna, as in the mma.sync kernel): each
// thread rounds the chunks it copied (mf_wg_round), or rounds while it transposes. RND = false (for
// MF_TF32_EXACT: operands that are TF32 values already) leaves the k-contiguous tiles as they are.
// Pipeline: copies run ST - 2 tiles ahead through a ring of ST stages. At tile t each thread waits for
// its copies of tile t, rounds them, and fence.proxy.async makes its stores visible to the tensor
// cores (which read through the async proxy); after the barrier the stage of tile t - 2 is refilled
// (every thread has passed wgmma.wait_group 1 at tile t - 1, so tile t - 2's products are complete,
// while tile t - 1's may still be running, on their own stage), transposed operands are transposed
// into one of 2 k-major tiles (a second barrier), and tile t's wgmmas are issued.
// (Preparing tile t + 1 while tile t's products run, with one barrier per tile, was tried: no faster,
// dev/cuda/README.md.)

// floats of the wgmma kernel's shared memory (see there: k-major tiles, staging tiles, or the
// BM x BN partial tile of the cluster reduction if that is larger), + 1024 bytes for the alignment
__host__ __device__ constexpr int mf_wg_smem_floats(int WGS, int NB, int ST, bool A_KC, bool B_KC) {
    const int BM = 64 * WGS, BN = 64 * NB;
    const int tiles = (A_KC ? ST : 2) * BM * 32 + (B_KC ? ST : 2) * BN * 32 + (A_KC ? 0 : ST * 32 * (BM + 4))
                    + (B_KC ? 0 : ST * 32 * (BN + 4));
    return (tiles > BM * BN ? tiles : BM * BN) + 256;
}

#if defined(MF_WGMMA)
// the matrix descriptor of a K-major tile with 128-byte swizzle at shared address sa (PTX ISA,
// "matrix descriptor"): bits 0-13 address / 16; 16-29 leading byte offset / 16 (unused with this
// swizzle: one k-step stays inside a row; 1 by convention); 32-45 stride byte offset / 16 (1024 bytes
// from one 8-row atom to the next); 62-63 swizzle mode (1 = 128 bytes)
__device__ __forceinline__ uint64_t mf_wg_desc(unsigned sa) {
    return (uint64_t)((sa & 0x3FFFF) >> 4) | ((uint64_t)1 << 16) | ((uint64_t)(1024 >> 4) << 32) | ((uint64_t)1 << 62);
}

// d (64 x 64 of the warpgroup's C, 32 per thread) += A (64 x 8) . B (64 x 8)^T, both from shared memory
__device__ __forceinline__ void mf_wgmma_n64(float* d, uint64_t da, uint64_t db) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
                 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
                 "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
                   "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
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
// output layer, a mean over the batch, 20 times further from the CPU's than with rounding).
// All loads first, then all stores: one shared-memory latency instead of one per chunk (the compiler
// cannot tell that a store does not feed the next chunk's load).
#ifndef MF_WG_ROUND
#define MF_WG_ROUND 1   // dev only, to measure what rounding costs: 0 leaves the k-contiguous tiles unrounded
#endif                  // (truncation), 2 rounds only B's (as if A arrived rounded)
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
// copied as it is, 16 bytes at a time, into a staging tile S[k][d] (MfTile, as in the kernels above),
// and the threads transpose it from there into the swizzled k-major tile: each takes 4 k x 4 d, four
// 16-byte loads and four 16-byte stores. (Copying element by element with 4-byte cp.async straight
// into the k-major tile was tried first: 1.2-2x slower, dev/cuda/README.md.) The staging rows are
// padded by 4 floats, which keeps the loads free of bank conflicts (a quarter-warp reads 64 bytes of
// two rows 4 apart); the stores conflict two ways.
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
// cluster reduction and epilogue as in the kernels above. WGS warpgroups of 128 threads, each 64 rows of
// the tile (BM = 64 * WGS, B's tile is shared), NB: 64-column blocks of the tile (BN = 64 * NB).
// Shared memory (from a 1024-byte aligned start): the k-major tiles of A (a ring of ST if A is
// k-contiguous, else 2 that the transposes fill in turn), those of B likewise, then the staging rings
// (ST tiles) of the d-contiguous operands.
template<int WGS, int NB, int ST, bool A_KC, bool B_KC, bool RND>
__global__ void __launch_bounds__(128 * WGS)
matmul_fast_wgmma_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                         int M, int N, int K, int kchunk, int vec, int split, MatmulFastEpi epi, MfSplitK sk) {
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

    pdl_wait();   // as in the kernels above
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
        if constexpr (A_KC && RND) { if (MF_WG_ROUND == 1) mf_wg_round<BM, NT>(gbase + (t % ST) * A_KM, tid); }  // ... rounded ...
        if constexpr (B_KC && RND) { if (MF_WG_ROUND != 0) mf_wg_round<BN, NT>(gbase + B_OFF + (t % ST) * B_KM, tid); }
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

// ----------------------------------------------------------------------------
// split-K reduce (only without clusters): C[i] = epilogue( part[0][i] + part[1][i] + ... ), always in
// this order. part is (splits, M, N). 4 elements per thread when N % 4 == 0 (VEC), else 1.

template<bool VEC>
__global__ void matmul_fast_splitk_reduce_kernel(float* __restrict__ C, const float* __restrict__ part,
                                                 int splits, int M, int N, MatmulFastEpi epi) {
    const size_t MN = (size_t)M * N;
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * (VEC ? 4 : 1);
    if (i >= MN) return;
    const int m = (int)(i / N), n = (int)(i % N);
    if (VEC) {
        float4 s = *reinterpret_cast<const float4*>(&part[i]);
        for (int z = 1; z < splits; z++) {
            float4 p = *reinterpret_cast<const float4*>(&part[z * MN + i]);
            s.x += p.x; s.y += p.y; s.z += p.z; s.w += p.w;
        }
        s.x = mf_epilogue(s.x, m, n + 0, N, epi);
        s.y = mf_epilogue(s.y, m, n + 1, N, epi);
        s.z = mf_epilogue(s.z, m, n + 2, N, epi);
        s.w = mf_epilogue(s.w, m, n + 3, N, epi);
        *reinterpret_cast<float4*>(&C[i]) = s;
    } else {
        float s = part[i];
        for (int z = 1; z < splits; z++) s += part[z * MN + i];
        C[i] = mf_epilogue(s, m, n, N, epi);
    }
}

// ----------------------------------------------------------------------------
// planning: which tile, how many K splits

// the tile configurations (keep in step with the switch in mf_launch_kernel); dev/cuda/matmul_forward.cu
// can force one through matmul_fast_force_cfg / matmul_fast_force_splits.
// tm x tn: FP32, the thread's register block; TF32, the warp's tile. st: pipeline stages.
// eff, fill, occ: the cost model of mf_cost (below), fitted to the timings of every tile x split on the
// trainer's 24 shapes by `dev/cuda/matmul_forward sweep` on an H200 (dev/cuda/fit_plan.py over
// dev/cuda/results/sweep_h200_run3.csv); measured again (results/sweep_h200.csv), the pick runs at
// 81-100% of the speed of the fastest configuration on each shape, 87-97% on the batch-256 wide ones.
typedef struct { int bm, bn, bk, tm, tn, st; float eff, fill; int occ; const char* name; int wg; } MatmulFastCfg;
// wg = 1: the wgmma kernel (TF32; sm_90a builds only: mf_cfg_usable)
// Configurations with eff = 0 are never picked by the cost model: candidates that only the sweep runs,
// or that only the tuned table below names. The 128x128 tiles with 256 threads (8 warps, one block
// per SM) were tried for the batch-256 shapes and measured 1.1-4x slower than the smaller tiles: too
// few warps per SM to hide the latency; 128x64 and 64x128 came out level with them, within noise
// (dev/cuda/results/sweep_wide_h200.csv, dev/cuda/README.md).
#define MF_NUM_FP32_CFGS 12
#define MF_NUM_TF32_CFGS 15
static const MatmulFastCfg mf_fp32_cfgs[MF_NUM_FP32_CFGS] = {
    { 64, 128, 16, 8, 8, 3, 0.63f, 11.0f, 1, "64x128x16 t8x8 s3 128thr"},
    { 64,  64, 16, 4, 4, 4, 0.61f, 19.0f, 3, "64x64x16 t4x4 s4 256thr"},
    { 32,  64, 32, 4, 4, 3, 0.52f, 30.0f, 3, "32x64x32 t4x4 s3 128thr"},
    { 32,  32, 32, 4, 4, 4, 0.50f,  1.5f, 4, "32x32x32 t4x4 s4 64thr"},
    { 32,  64, 16, 4, 4, 4, 3.00f, 13.0f, 4, "32x64x16 t4x4 s4 128thr"},
    { 64,  64, 16, 8, 4, 4, 0.00f,  0.0f, 1, "64x64x16 t8x4 s4 128thr (sweep only)"},
    { 32, 128, 16, 4, 8, 3, 0.00f,  0.0f, 1, "32x128x16 t4x8 s3 128thr (sweep only)"},
    { 32,  64, 16, 4, 4, 2, 0.00f,  0.0f, 1, "32x64x16 t4x4 s2 128thr (sweep only)"},
    {128, 128, 16, 8, 8, 3, 0.00f,  0.0f, 1, "128x128x16 t8x8 s3 256thr (sweep only)"},
    {128,  64, 16, 8, 4, 4, 0.00f,  0.0f, 1, "128x64x16 t8x4 s4 256thr (sweep only)"},
    { 64, 128, 16, 4, 8, 4, 0.00f,  0.0f, 1, "64x128x16 t4x8 s4 256thr (sweep only)"},
    {128, 128,  8, 8, 8, 4, 0.00f,  0.0f, 1, "128x128x8 t8x8 s4 256thr (sweep only)"},
};
static const MatmulFastCfg mf_tf32_cfgs[MF_NUM_TF32_CFGS] = {
    { 64,  64, 16, 32, 32, 4, 0.07f, 65.0f, 1, "64x64x16 w32x32 s4 128thr"},
    { 32,  64, 32, 16, 32, 3, 0.86f, 14.0f, 4, "32x64x32 w16x32 s3 128thr"},
    { 32,  32, 32, 16, 16, 4, 0.89f,  1.0f, 1, "32x32x32 w16x16 s4 128thr"},
    { 64, 128, 16, 32, 64, 3, 0.75f, 47.0f, 3, "64x128x16 w32x64 s3 128thr"},
    { 64,  64, 16, 32, 16, 4, 1.40f,  4.0f, 1, "64x64x16 w32x16 s4 256thr"},
    { 32,  64, 16, 16, 32, 4, 0.00f,  0.0f, 1, "32x64x16 w16x32 s4 128thr (sweep only)"},
    { 32,  64, 32, 16, 16, 3, 0.00f,  0.0f, 1, "32x64x32 w16x16 s3 256thr (tuned table)"},
    {128, 128, 16, 64, 32, 4, 0.00f,  0.0f, 1, "128x128x16 w64x32 s4 256thr (sweep only)"},
    {128,  64, 16, 32, 32, 4, 0.00f,  0.0f, 1, "128x64x16 w32x32 s4 256thr (sweep only)"},
    { 64, 128, 16, 32, 32, 4, 0.00f,  0.0f, 1, "64x128x16 w32x32 s4 256thr (tuned table)"},
    {128, 128, 32, 64, 32, 3, 0.00f,  0.0f, 1, "128x128x32 w64x32 s3 256thr (sweep only)"},
    { 64,  64, 32, 64,  64, 4, 0.00f,  0.0f, 1, "64x64x32 wgmma s4 128thr (sweep only)", 1},
    { 64,  64, 32, 64,  64, 6, 0.00f,  0.0f, 1, "64x64x32 wgmma s6 128thr (sweep only)", 1},
    { 64, 128, 32, 64, 128, 4, 0.00f,  0.0f, 1, "64x128x32 wgmma s4 128thr (sweep only)", 1},
    {128,  64, 32, 64,  64, 4, 0.00f,  0.0f, 1, "128x64x32 wgmma s4 256thr (sweep only)", 1},
};
// whether configuration c can run here: the wgmma kernel needs a build for sm_90a, and its shared
// memory (more with staging tiles for d-contiguous operands) must fit in a block's 227 KB
static int mf_cfg_usable(const MatmulFastCfg* c, int a_kc, int b_kc) {
    if (!c->wg) return 1;
#if defined(MF_WGMMA)
    return (size_t)mf_wg_smem_floats(c->bm / 64, c->bn / 64, c->st, a_kc != 0, b_kc != 0) * sizeof(float) <= 227 * 1024;
#else
    (void)a_kc; (void)b_kc;
    return 0;
#endif
}
static int matmul_fast_force_cfg = -1;     // dev only: -1 = choose by shape
static int matmul_fast_force_splits = 0;   // dev only: 0 = choose by shape

// splits > 1: K is cut in splits chunks of kchunk; cluster = 1: the splits of a tile form a thread-block
// cluster and reduce in distributed shared memory (sm_90); cluster = 0: each split writes a partial
// buffer in scratch and matmul_fast_splitk_reduce_kernel adds them (only dweight has a scratch).
// mf_matmul may instead add them through a fixup workspace (MF_SPLIT_FIXUP), where it has one.
typedef struct { int cfg; int splits; int kchunk; int cluster; } MatmulFastPlan;

static int mf_num_sms(void) {
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    return sms;
}

// Clusters need sm_90 in the code that runs, not only in the GPU: a build for an older target
// compiles the cluster reduction out (mf_cluster_reduce), and would silently drop the partial sums.
// So ask what was compiled: the PTX target (__CUDA_ARCH__ when the kernels were compiled) and the
// machine code of the kernels that will run on this GPU.
static int mf_has_clusters(void) {
    static int has = -1;
    if (has < 0) {
        cudaFuncAttributes fa;
        cudaCheck(cudaFuncGetAttributes(&fa, matmul_fast_splitk_reduce_kernel<true>));
        has = fa.ptxVersion >= 90 && fa.binaryVersion >= 90;
    }
    return has;
}

// Cost of a (tile, split) choice: blocks run in waves of occ per SM; each block walks its K slice in
// BK steps plus a fixed cost of `fill` steps (pipeline fill, epilogue, the cluster reduction), at a
// relative speed eff. A model, not a simulation: its numbers are whatever ranks the measured
// configurations best (eff and fill trade off against each other), so refit them with the sweep on
// another GPU. The cheapest choice wins.
static float mf_cost(const MatmulFastCfg* c, int M, int N, int K, int splits) {
    const long tiles = (long)mf_ceil_div(M, c->bm) * mf_ceil_div(N, c->bn);
    const long slots = (long)mf_num_sms() * c->occ;
    const long waves = (tiles * splits + slots - 1) / slots;
    const int steps = mf_ceil_div(mf_ceil_div(K, splits), c->bk);
    const float eff = c->eff > 0.0f ? c->eff : 1.0f;   // sweep-only configurations (eff 0) when forced
    return (float)waves * c->bm * c->bn * c->bk * ((float)steps + c->fill) / eff;
}

// Measured picks for the shapes that dominate the wide model's step (784->1024->1024 at batch 256):
// on these the cost model's pick ran at 73-100% of the speed of the fastest configuration, and they
// are most of the step's time, so the fastest one measured is written down here. Source: the
// sweep `matmul_forward sweep CSV wide` on an H200 (132 SMs), dev/cuda/results/run15_h200_sweep_wide.csv
// (run 15); the sweep prints the same table from its own timings ("tuned table from this sweep"). Used
// only on a GPU with the same number of SMs; anywhere else, and for every other shape, the model decides.
typedef struct { int a_kc, b_kc, M, N, K, tf32, cfg, splits; } MatmulFastTuned;
#define MF_TUNED_SMS 132
// TF32 only: the FP32 picks of the same sweep, each fastest alone, made the FP32 step slower (36.8
// against 35.3 ms per epoch, same run, dev/results/ab_pdl_streams_h200.log): inside the step, the
// backward kernels of two streams run side by side, and the cost model's smaller picks share the
// SMs better.
// The wgmma picks (configurations 11-14) apply where the wgmma kernel is built (sm_90a); elsewhere the
// cost model decides. The trainer passes MF_TF32_EXACT for its forward products only (-x 1); the
// backward entries on TF32 values are the picks of dev/cuda's version 7.
static const MatmulFastTuned mf_tuned[] = {
    {1, 1,  256, 1024,  784, 2, 11, 4},  // forward on TF32 values (MF_TF32_EXACT; -x 1's forward pass)
    {1, 1,  256, 1024, 1024, 2, 11, 4},
    {1, 0,  256,  784, 1024, 2, 4, 4},   // dinp and dweight on TF32 values
    {1, 0,  256, 1024, 1024, 2, 6, 2},
    {0, 0, 1024,  784,  256, 2, 9, 1},
    {0, 0, 1024, 1024,  256, 2, 9, 1},
    {1, 1,  256, 1024,  784, 1, 11, 2},  // forward, "NT", rounding its tiles (MF_TF32_ROUND)
    {1, 1,  256, 1024, 1024, 1, 11, 2},
    {1, 0,  256,  784, 1024, 1, 9, 8},   // dinp, "NN"
    {1, 0,  256, 1024, 1024, 1, 0, 8},
    {0, 0, 1024,  784,  256, 1, 4, 1},   // dweight, "TN"
    {0, 0, 1024, 1024,  256, 1, 4, 1},
};

// the tuned table's entry for this product, if it has one and this GPU is the one it was measured on
static const MatmulFastTuned* mf_tuned_pick(int M, int N, int K, int a_kc, int b_kc, int tf32) {
    if (mf_num_sms() != MF_TUNED_SMS) return NULL;
    for (size_t i = 0; i < sizeof(mf_tuned) / sizeof(mf_tuned[0]); i++) {
        const MatmulFastTuned* t = &mf_tuned[i];
        if (t->a_kc == a_kc && t->b_kc == b_kc && t->M == M && t->N == N && t->K == K && t->tf32 == tf32) return t;
    }
    return NULL;
}

// a_kc, b_kc: the operands' layouts (A (M, K) row-major, else (K, M); B (N, K), else (K, N))
static MatmulFastPlan mf_plan(int M, int N, int K, int a_kc, int b_kc, int tf32, int have_scratch) {
    const MatmulFastCfg* cfgs = tf32 ? mf_tf32_cfgs : mf_fp32_cfgs;
    const int ncfg = tf32 ? MF_NUM_TF32_CFGS : MF_NUM_FP32_CFGS;
    const int cluster = mf_has_clusters();
    const int can_split = cluster || have_scratch;
    MatmulFastPlan p = {0, 1, K, 0};
    float best = 1e30f;
    const MatmulFastTuned* tuned = matmul_fast_force_cfg < 0 && matmul_fast_force_splits <= 0 && cluster
                                 ? mf_tuned_pick(M, N, K, a_kc, b_kc, tf32) : NULL;
    if (tuned && !mf_cfg_usable(&cfgs[tuned->cfg], a_kc, b_kc)) tuned = NULL;   // a wgmma pick, not built
    if (tuned) {   // a measured pick: no cost model
        p.cfg = tuned->cfg;
        p.splits = tuned->splits;
        best = 0.0f;
    }
    for (int c = 0; c < ncfg && !tuned; c++) {
        if (matmul_fast_force_cfg >= 0 ? c != matmul_fast_force_cfg : cfgs[c].eff <= 0.0f) continue;
        if (!mf_cfg_usable(&cfgs[c], a_kc, b_kc)) continue;
        for (int s = 1; s <= 8; s *= 2) {
            if (matmul_fast_force_splits > 0 && s != matmul_fast_force_splits) continue;
            if (s > 1 && (!can_split || K / s < cfgs[c].bk)) continue;   // every split at least one BK step
            const float cost = mf_cost(&cfgs[c], M, N, K, s);
            if (cost < best) { best = cost; p.cfg = c; p.splits = s; }
        }
    }
    if (best == 1e30f) {   // a forced choice that is not possible here: the forced tile, no split
        p.cfg = matmul_fast_force_cfg >= 0 && matmul_fast_force_cfg < ncfg
                && mf_cfg_usable(&cfgs[matmul_fast_force_cfg], a_kc, b_kc) ? matmul_fast_force_cfg : 0;
        p.splits = 1;
    }
    if (p.splits > 1) {
        const int bk = cfgs[p.cfg].bk;
        const int chunk = mf_ceil_div(mf_ceil_div(K, p.splits), bk) * bk;
        if (!cluster) p.splits = mf_ceil_div(K, chunk);   // a cluster always has `splits` blocks;
        p.kchunk = chunk;                                 // trailing ones may get an empty slice
        p.cluster = cluster;
    }
    if (p.splits <= 1) { p.splits = 1; p.kchunk = K; p.cluster = 0; }
    return p;
}

// ----------------------------------------------------------------------------
// the generic launcher

template<bool A_KC, bool B_KC>
static void mf_launch_kernel(int tf32, int cfg, dim3 grid, float* C, const float* A, const float* B,
                             int M, int N, int K, int kchunk, int vec, int split, MatmulFastEpi epi, MfSplitK sk,
                             int pdl, cudaStream_t s) {
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[2];
    lc.gridDim = grid;
    lc.stream = s;
    lc.attrs = attr;
    if (split == MF_SPLIT_CLUSTER) {
        attr[lc.numAttrs].id = cudaLaunchAttributeClusterDimension;
        attr[lc.numAttrs].val.clusterDim.x = 1;
        attr[lc.numAttrs].val.clusterDim.y = 1;
        attr[lc.numAttrs].val.clusterDim.z = grid.z;
        lc.numAttrs++;
    }
    if (pdl && pdl_available()) {   // kernels/common.cuh
        attr[lc.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[lc.numAttrs].val.programmaticStreamSerializationAllowed = 1;
        lc.numAttrs++;
    }
// Above 48 KB of dynamic shared memory a kernel must be allowed it once (cudaFuncSetAttribute; a
// host-side setting, fine during graph capture); `allowed` is one flag per configuration and layout.
#define MF_LAUNCH(KERNEL, THREADS, SMEM_FLOATS) do { \
    static bool allowed = false; \
    lc.blockDim = dim3(THREADS); \
    lc.dynamicSmemBytes = (size_t)(SMEM_FLOATS) * sizeof(float); \
    if (!allowed && lc.dynamicSmemBytes > 48 * 1024) { \
        cudaCheck(cudaFuncSetAttribute(KERNEL, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)lc.dynamicSmemBytes)); \
        allowed = true; \
    } \
    cudaCheck(cudaLaunchKernelEx(&lc, KERNEL, C, A, B, M, N, K, kchunk, vec, split, epi, sk)); } while (0)
// (MF_SPLIT_FIXUP only for A_KC, forward and dinp, where MF_FIXUP_KERNELS compiles it: mf_matmul gives it
// nothing else, and no other such kernel is compiled. Compiled into the trainer, which uses none, those 24
// kernels took its binary from 10 to 16 MB.)
#define MF_FP32(BM, BN, BK, TM, TN, ST) do { \
    if (FIX && split == MF_SPLIT_FIXUP) \
        MF_LAUNCH((matmul_fast_fp32_kernel<BM, BN, BK, TM, TN, ST, A_KC, B_KC, FIX>), (BM / TM) * (BN / TN), \
                  mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 4)); \
    else \
        MF_LAUNCH((matmul_fast_fp32_kernel<BM, BN, BK, TM, TN, ST, A_KC, B_KC, false>), (BM / TM) * (BN / TN), \
                  mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 4)); } while (0)
// The kernels without their rounding (RND = false) serve MF_TF32_EXACT where it is compiled: for the
// forward layout, the only one the trainer passes it for, and for every layout of the mma.sync kernel
// where MF_EXACT_ALL_LAYOUTS is 1 (dev/cuda's Makefile, for its version 7). Elsewhere MF_TF32_EXACT
// names the rounding kernel (RND = !EXACT = true): rounding a TF32 value changes nothing, so the
// products are the same, and the trainer's build compiles no kernel it never launches.
    constexpr bool EXACT = A_KC && B_KC;
    constexpr bool FIX = A_KC && MF_FIXUP_KERNELS;   // MF_SPLIT_FIXUP kernels compiled for this layout
    constexpr bool EXACT_MMA = EXACT || MF_EXACT_ALL_LAYOUTS;
#define MF_TF32(BM, BN, BK, WM, WN, ST) do { \
    if (tf32 == MF_TF32_EXACT) \
        MF_LAUNCH((matmul_fast_tf32_kernel<BM, BN, BK, WM, WN, ST, A_KC, B_KC, !EXACT_MMA>), (BM / WM) * (BN / WN) * 32, \
                  mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 8)); \
    else \
        MF_LAUNCH((matmul_fast_tf32_kernel<BM, BN, BK, WM, WN, ST, A_KC, B_KC, true>), (BM / WM) * (BN / WN) * 32, \
                  mf_smem_floats(BM, BN, BK, ST, A_KC, B_KC, 8)); } while (0)
#define MF_WG(WGS, NB, ST) do { \
    if (tf32 == MF_TF32_EXACT) \
        MF_LAUNCH((matmul_fast_wgmma_kernel<WGS, NB, ST, A_KC, B_KC, !EXACT>), 128 * WGS, \
                  mf_wg_smem_floats(WGS, NB, ST, A_KC, B_KC)); \
    else \
        MF_LAUNCH((matmul_fast_wgmma_kernel<WGS, NB, ST, A_KC, B_KC, true>), 128 * WGS, \
                  mf_wg_smem_floats(WGS, NB, ST, A_KC, B_KC)); } while (0)
    if (!tf32) {   // keep in step with mf_fp32_cfgs
        switch (cfg) {
            case 0: MF_FP32(64, 128, 16, 8, 8, 3); break;
            case 1: MF_FP32(64, 64, 16, 4, 4, 4); break;
            case 2: MF_FP32(32, 64, 32, 4, 4, 3); break;
            case 3: MF_FP32(32, 32, 32, 4, 4, 4); break;
            case 4: MF_FP32(32, 64, 16, 4, 4, 4); break;
            case 5: MF_FP32(64, 64, 16, 8, 4, 4); break;
            case 6: MF_FP32(32, 128, 16, 4, 8, 3); break;
            case 7: MF_FP32(32, 64, 16, 4, 4, 2); break;
            case 8: MF_FP32(128, 128, 16, 8, 8, 3); break;
            case 9: MF_FP32(128, 64, 16, 8, 4, 4); break;
            case 10: MF_FP32(64, 128, 16, 4, 8, 4); break;
            default: MF_FP32(128, 128, 8, 8, 8, 4); break;
        }
    } else {       // keep in step with mf_tf32_cfgs
        switch (cfg) {
            case 0: MF_TF32(64, 64, 16, 32, 32, 4); break;
            case 1: MF_TF32(32, 64, 32, 16, 32, 3); break;
            case 2: MF_TF32(32, 32, 32, 16, 16, 4); break;
            case 3: MF_TF32(64, 128, 16, 32, 64, 3); break;
            case 4: MF_TF32(64, 64, 16, 32, 16, 4); break;
            case 5: MF_TF32(32, 64, 16, 16, 32, 4); break;
            case 6: MF_TF32(32, 64, 32, 16, 16, 3); break;
            case 7: MF_TF32(128, 128, 16, 64, 32, 4); break;
            case 8: MF_TF32(128, 64, 16, 32, 32, 4); break;
            case 9: MF_TF32(64, 128, 16, 32, 32, 4); break;
            case 10: MF_TF32(128, 128, 32, 64, 32, 3); break;
#if defined(MF_WGMMA)   // wgmma (mf_plan only picks these where mf_cfg_usable)
            case 11: MF_WG(1, 1, 4); break;
            case 12: MF_WG(1, 1, 6); break;
            case 13: MF_WG(1, 2, 4); break;
            case 14: MF_WG(2, 1, 4); break;
#endif
            default:
                fprintf(stderr, "matmul_fast: TF32 configuration %d is not built here (wgmma needs sm_90a)\n", cfg);
                exit(EXIT_FAILURE);
        }
    }
#undef MF_LAUNCH
#undef MF_FP32
#undef MF_TF32
#undef MF_WG
    cudaCheck(cudaGetLastError());
}

static inline bool mf_aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// C(M, N) = epilogue(A . B) in the layout given by A_KC / B_KC (see the top of the file).
// scratch holds splits * M * N floats when the plan splits K (only if allow_split).
// the grid of plan p, and whether its K split fits in fixup workspace ws (FP32 products only)
static dim3 mf_grid(const MatmulFastPlan& p, int M, int N, int tf32) {
    const MatmulFastCfg* c = (tf32 ? mf_tf32_cfgs : mf_fp32_cfgs) + p.cfg;
    return dim3(mf_ceil_div(N, c->bn), mf_ceil_div(M, c->bm), p.splits);
}
static int mf_fixup_fits(const MfSplitK* ws, const MatmulFastPlan& p, int M, int N, int tf32) {
    if (ws == NULL || ws->part == NULL || tf32 || p.splits <= 1) return 0;
    const dim3 g = mf_grid(p, M, N, tf32);
    const size_t tiles = (size_t)g.x * g.y;
    return tiles <= ws->tiles && tiles * g.z * mf_fp32_cfgs[p.cfg].bm * mf_fp32_cfgs[p.cfg].bn <= ws->part_floats;
}

template<bool A_KC, bool B_KC>
// pdl: launch with programmatic dependent launch (kernels/common.cuh); the caller guarantees that the
// previous operation in the stream is a kernel launch, not a wait on another stream.
// ws: NULL, or a fixup workspace for the FP32 K splits (MfSplitK), used instead of clusters where it fits.
static void mf_matmul(float* C, const float* A, const float* B, int M, int N, int K, MatmulFastEpi epi,
                      float* scratch, int allow_split, const MfSplitK* ws, int tf32, int pdl, cudaStream_t s) {
    if (M <= 0 || N <= 0) return;
    const int have_scratch = allow_split && scratch != NULL;
    MatmulFastPlan p = mf_plan(M, N, K, A_KC, B_KC, tf32, have_scratch || (ws != NULL && ws->part != NULL && !tf32));
    int split = MF_SPLIT_RAW;
    // the workspace where clusters would leave SMs idle: a grid of at least one block per SM (below that,
    // e.g. the small model's 8-way forward split, the cluster's reduction in shared memory is quicker)
    const dim3 g = mf_grid(p, M, N, tf32);
    const bool big = (size_t)g.x * g.y * g.z >= (size_t)mf_num_sms();
    if (A_KC && MF_FIXUP_KERNELS && mf_fixup_fits(ws, p, M, N, tf32) && (big || !p.cluster)) split = MF_SPLIT_FIXUP;
    else if (p.splits > 1 && p.cluster) split = MF_SPLIT_CLUSTER;
    else if (p.splits > 1 && !have_scratch) p = mf_plan(M, N, K, A_KC, B_KC, tf32, 0);   // ws too small, no clusters
    const bool vec = (K % 4 == 0) && (M % 4 == 0) && (N % 4 == 0) && mf_aligned16(A) && mf_aligned16(B)
                     && mf_aligned16(C) && (epi.aux == NULL || mf_aligned16(epi.aux))
                     && (scratch == NULL || mf_aligned16(scratch));
    const dim3 grid = mf_grid(p, M, N, tf32);
    const MfSplitK sk = split == MF_SPLIT_FIXUP ? *ws : MfSplitK{NULL, NULL, 0, 0};
    const int via_scratch = p.splits > 1 && split == MF_SPLIT_RAW;
    float* out = via_scratch ? scratch : C;
    MatmulFastEpi e = epi;
    if (via_scratch) e.kind = MF_EPI_RAW;
    mf_launch_kernel<A_KC, B_KC>(tf32, p.cfg, grid, out, A, B, M, N, K, p.kchunk, vec ? 1 : 0, split, e, sk, pdl, s);
    if (via_scratch) {
        const size_t MN = (size_t)M * N;
        const int threads = 256;
        if (vec) {
            matmul_fast_splitk_reduce_kernel<true><<<(unsigned)((MN / 4 + threads - 1) / threads), threads, 0, s>>>(
                C, scratch, p.splits, M, N, epi);
        } else {
            matmul_fast_splitk_reduce_kernel<false><<<(unsigned)((MN + threads - 1) / threads), threads, 0, s>>>(
                C, scratch, p.splits, M, N, epi);
        }
        cudaCheck(cudaGetLastError());
    }
}

// ----------------------------------------------------------------------------
// the launchers the trainer calls

// out = act(inp . weight^T + bias); inp is (B, IN), weight is (OUT, IN), bias is (OUT) or NULL,
// out is (B, OUT); act in {0,1,2,3}. tf32: 0, MF_TF32_ROUND, or MF_TF32_EXACT when inp and weight hold
// TF32 values; round_out: out is stored rounded to TF32 (the next layer's MF_TF32_EXACT input). Launched with PDL (kernels/common.cuh): enqueue it right after
// the kernel that writes inp, as the trainer's forward pass does. The backward launchers below
// launch plainly: the trainer records events between them (kernels/common.cuh says why that matters).
// ws: NULL or a fixup workspace (MfSplitK) that only this stream's products use.
static void matmul_forward_fast(float* out, const float* inp, const float* weight, const float* bias,
                                int B, int IN, int OUT, int act, int tf32, int round_out, const MfSplitK* ws,
                                cudaStream_t stream) {
    MatmulFastEpi epi = {MF_EPI_FORWARD, act, bias, NULL, {}, round_out};
    mf_matmul<true, true>(out, inp, weight, B, OUT, IN, epi, NULL, 0, ws, tf32, 1, stream);
}

// dinp = (dout . weight) * act'(inp_act); dout is (B, OUT), weight is (OUT, IN), inp_act and dinp
// are (B, IN); inp_act (the activation output of the layer below) may be NULL only when act == 3;
// ws as for matmul_forward_fast
static void matmul_backward_dinp_fast(float* dinp, const float* dout, const float* weight, const float* inp_act,
                                      int act, int B, int IN, int OUT, int tf32, const MfSplitK* ws,
                                      cudaStream_t stream) {
    if (inp_act == NULL && act != 3) {
        fprintf(stderr, "matmul_backward_dinp_fast: inp_act is NULL but act is %d (only 3 = none allows it)\n", act);
        exit(EXIT_FAILURE);
    }
    MatmulFastEpi epi = {MF_EPI_DINP, act, NULL, inp_act, {}};
    mf_matmul<true, false>(dinp, dout, weight, B, IN, OUT, epi, NULL, 0, ws, tf32, 0, stream);
}

// a fixup workspace of `floats` floats of partial tiles and `tiles` counters (tiles 0: none, all NULL);
// matmul_fast_fixup_free gives it back
static MfSplitK matmul_fast_fixup_alloc(size_t floats, size_t tiles) {
    MfSplitK ws = {NULL, NULL, 0, 0};
    if (tiles == 0) return ws;
    ws.part = (float*)cudaMallocCheck(floats * sizeof(float), "the split-K partial tiles");
    ws.count = (unsigned*)cudaMallocCheck(tiles * sizeof(unsigned), "the split-K tile counters");
    cudaCheck(cudaMemset(ws.count, 0, tiles * sizeof(unsigned)));   // then kept 0 by the kernels
    ws.part_floats = floats;
    ws.tiles = tiles;
    return ws;
}
static void matmul_fast_fixup_free(MfSplitK* ws) {
    cudaCheck(cudaFree(ws->part));
    cudaCheck(cudaFree(ws->count));
    *ws = MfSplitK{NULL, NULL, 0, 0};
}

// floats of scratch matmul_backward_dweight_fast needs for (B, IN, OUT); 0 means none
static size_t matmul_fast_scratch_floats(int B, int IN, int OUT) {
    size_t need = 0;
    for (int tf32 = 0; tf32 < 2; tf32++) {
        MatmulFastPlan p = mf_plan(OUT, IN, B, 0, 0, tf32, 1);
        if (p.splits > 1 && !p.cluster) {
            size_t n = (size_t)p.splits * OUT * IN;
            if (n > need) need = n;
        }
    }
    return need;
}

// dweight = dout^T . inp (overwrites); dout is (B, OUT), inp is (B, IN), dweight is (OUT, IN).
// scratch: at least matmul_fast_scratch_floats(B, IN, OUT) floats (NULL: no K split).
// sgd: NULL, or the weights (OUT, IN) and momentum to update with the finished gradient (the
// optimizer step fused in: nothing may read W between this kernel and the next forward pass).
static void matmul_backward_dweight_fast(float* dweight, const float* dout, const float* inp, int B, int IN,
                                         int OUT, float* scratch, int tf32, const MatmulFastSgd* sgd,
                                         cudaStream_t stream) {
    MatmulFastEpi epi = {MF_EPI_RAW, 3, NULL, NULL, {}};
    if (sgd) { epi.kind = MF_EPI_SGD; epi.sgd = *sgd; }
    mf_matmul<false, false>(dweight, dout, inp, OUT, IN, B, epi, scratch, 1, NULL, tf32, 0, stream);
}
