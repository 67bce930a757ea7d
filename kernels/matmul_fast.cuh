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
- One tiled kernel serves all three layouts: each operand tile is loaded from global memory into
  registers (float4 when the widths allow it, scalar with bounds checks otherwise) and stored to
  shared memory k-major, S[k][row], transposing on the way where the operand is k-contiguous.
  Two shared buffers: the loads of tile t+1 are in flight while tile t is computed.
- FP32: each thread owns a TM x TN block of C (register blocking), read from shared memory as float4.
- TF32 (tf32=1): each warp owns a WM x WN block of C made of 16x8 mma.sync.m16n8k8 tiles; inputs
  are rounded to TF32 with cvt.rna.tf32.f32 when they are stored to shared memory.
- The tile size is chosen per shape so the grid fills the GPU's multiprocessors. Where the output
  is too small for that (784 -> 128 at batch 64), K is split: on sm_90 the K slices of a tile run as
  one thread-block cluster and add their partial tiles through distributed shared memory, always
  in the order 0, 1, .., S-1. (Before sm_90, dweight alone splits K, through partial buffers in
  `scratch` and a reduce kernel.) No atomics anywhere: results are bitwise reproducible.
- Any sizes work (B = 1, widths like 37): tails are bounds-checked, out-of-range inputs read as 0.
- The launchers only enqueue kernels (no allocation, no synchronisation), so they can be captured
  into a CUDA graph. Every launch is checked with cudaGetLastError.
*/
#pragma once
#include <cuda_runtime.h>
#include <cooperative_groups.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

// ----------------------------------------------------------------------------
// utilities

#define MF_CHECK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { \
    fprintf(stderr, "[CUDA ERROR] at %s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); \
    exit(EXIT_FAILURE); } } while (0)

static inline int mf_ceil_div(int a, int b) { return (a + b - 1) / b; }

__device__ __forceinline__ float mf_act(float x, int act) {
    switch (act) {
        case 0: return 1.0f / (1.0f + expf(-x));
        case 1: return x > 0.0f ? x : 0.0f;
        case 2: return tanhf(x);
        default: return x;
    }
}

// derivative of the activation, from its output y
__device__ __forceinline__ float mf_dact(float y, int act) {
    switch (act) {
        case 0: return y * (1.0f - y);
        case 1: return y > 0.0f ? 1.0f : 0.0f;
        case 2: return 1.0f - y * y;
        default: return 1.0f;
    }
}

__device__ __forceinline__ float mf_to_tf32(float x) {
    uint32_t u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return __uint_as_float(u);
}

// what happens to an output element after its sum is complete
enum { MF_EPI_RAW = 0, MF_EPI_FORWARD = 1, MF_EPI_DINP = 2 };
typedef struct {
    int kind;            // MF_EPI_*
    int act;             // activation code 0..3
    const float* bias;   // (N) for MF_EPI_FORWARD, may be NULL
    const float* aux;    // (M, N) activation output for MF_EPI_DINP, may be NULL when act == 3
} MatmulFastEpi;

// not inlined: the epilogue runs once per output, and its inlined copies kept the compiler from
// unrolling the store loops (the accumulators then went to local memory)
__device__ __noinline__ float mf_epilogue(float v, int m, int n, int N, MatmulFastEpi epi) {
    if (epi.kind == MF_EPI_FORWARD) {
        if (epi.bias != NULL) v += epi.bias[n];
        return mf_act(v, epi.act);
    }
    if (epi.kind == MF_EPI_DINP && epi.act != 3) {
        return v * mf_dact(epi.aux[(size_t)m * N + n], epi.act);
    }
    return v;
}

// ----------------------------------------------------------------------------
// tile loader: S[k][d] = X(d0 + d, k), for k in [k0, k0 + BK) clipped to kend, d clipped to D.
// KC: X is k-contiguous, X(d, k) = X[d * ld + k] (the operand is transposed on its way to S).
// otherwise X is d-contiguous, X(d, k) = X[k * ld + d].
// vec: the contiguous width and the pointer allow 16-byte loads (a run-time flag, uniform over the
// grid: one kernel serves aligned and odd shapes, which halves the kernels to compile).

template<int BD, int BK, int NT, bool KC>
struct MfTileLoader {
    static constexpr int NV = BD * BK / 4 / NT;   // float4 per thread
    static_assert(NV * 4 * NT == BD * BK, "tile must split evenly into float4 per thread");
    float4 r[NV];

    __device__ __forceinline__ void load(const float* __restrict__ X, int D, int ld, int d0, int k0,
                                         int kend, int tid, bool vec) {
        #pragma unroll
        for (int i = 0; i < NV; i++) {
            int idx = tid + i * NT;
            int d, k;  // first of the 4 elements
            if (KC) { d = idx / (BK / 4); k = (idx % (BK / 4)) * 4; }
            else    { k = idx / (BD / 4); d = (idx % (BD / 4)) * 4; }
            int gd = d0 + d, gk = k0 + k;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (KC) {
                if (gd < D) {
                    const float* p = X + (size_t)gd * ld + gk;
                    if (vec) { if (gk < kend) v = *reinterpret_cast<const float4*>(p); }
                    else {
                        if (gk + 0 < kend) v.x = p[0];
                        if (gk + 1 < kend) v.y = p[1];
                        if (gk + 2 < kend) v.z = p[2];
                        if (gk + 3 < kend) v.w = p[3];
                    }
                }
            } else {
                if (gk < kend) {
                    const float* p = X + (size_t)gk * ld + gd;
                    if (vec) { if (gd < D) v = *reinterpret_cast<const float4*>(p); }
                    else {
                        if (gd + 0 < D) v.x = p[0];
                        if (gd + 1 < D) v.y = p[1];
                        if (gd + 2 < D) v.z = p[2];
                        if (gd + 3 < D) v.w = p[3];
                    }
                }
            }
            r[i] = v;
        }
    }

    // S is [BK][SD], SD = BD + pad
    template<int SD, bool TF32>
    __device__ __forceinline__ void store(float* S, int tid) {
        #pragma unroll
        for (int i = 0; i < NV; i++) {
            int idx = tid + i * NT;
            float4 v = r[i];
            if (TF32) { v.x = mf_to_tf32(v.x); v.y = mf_to_tf32(v.y); v.z = mf_to_tf32(v.z); v.w = mf_to_tf32(v.w); }
            if (KC) {
                int d = idx / (BK / 4), k = (idx % (BK / 4)) * 4;
                S[(k + 0) * SD + d] = v.x;
                S[(k + 1) * SD + d] = v.y;
                S[(k + 2) * SD + d] = v.z;
                S[(k + 3) * SD + d] = v.w;
            } else {
                int k = idx / (BD / 4), d = (idx % (BD / 4)) * 4;
                *reinterpret_cast<float4*>(&S[k * SD + d]) = v;
            }
        }
    }
};

// ----------------------------------------------------------------------------
// split-K inside a thread-block cluster (Hopper, sm_90): the S blocks of a cluster compute the same
// output tile over S slices of K, each leaves its partial tile in its own shared memory (red, BM x BN),
// then block r adds up elements [r*BM*BN/S, (r+1)*BM*BN/S) over the S partials, always in the order
// 0, 1, ..., S-1, through distributed shared memory, and applies the epilogue. No scratch in global
// memory, no atomics: the result is the same every run.

template<int BM, int BN, int NT>
__device__ __forceinline__ void mf_cluster_reduce(float* C, float* red, int m0, int n0, int M, int N,
                                                  const MatmulFastEpi& epi) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();   // every partial tile is in shared memory
    const int S = (int)cluster.num_blocks(), r = (int)cluster.block_rank();
    const int per = BM * BN / S;
    for (int e = r * per + (int)threadIdx.x; e < (r + 1) * per; e += NT) {
        const int m = m0 + e / BN, n = n0 + e % BN;
        float v = 0.0f;
        for (int z = 0; z < S; z++) v += cluster.map_shared_rank(red, z)[e];
        if (m < M && n < N) C[(size_t)m * N + n] = mf_epilogue(v, m, n, N, epi);
    }
    cluster.sync();   // no block leaves while another still reads its shared memory
#endif
}

// ----------------------------------------------------------------------------
// FP32 kernel: block tile BM x BN, K in steps of BK, each thread a TM x TN register block.
// A_KC: A is (M, K) row-major, else (K, M). B_KC: B is (N, K) row-major, else (K, N).
// C is (M, N); blockIdx.z is the K split, which writes C + z * M * N (raw) when gridDim.z > 1.
// The thread's rows are ty*4 + {0..3} + g * (BM*4/TM) (float4 groups spread over the tile, which
// keeps the shared-memory reads free of bank conflicts); columns likewise.

template<int BM, int BN, int BK, int TM, int TN, bool A_KC, bool B_KC>
__global__ void __launch_bounds__((BM / TM) * (BN / TN))
matmul_fast_fp32_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                        int M, int N, int K, int kchunk, int vec, int cluster, MatmulFastEpi epi) {
    constexpr int NT = (BM / TM) * (BN / TN);
    constexpr int PAD = 4;
    constexpr int SA = BM + PAD, SB = BN + PAD;
    constexpr int RM = BM * 4 / TM, RN = BN * 4 / TN;   // stride between a thread's float4 groups
    constexpr int SMEM = 2 * BK * (SA + SB) > BM * BN ? 2 * BK * (SA + SB) : BM * BN;
    __shared__ __align__(16) float smem[SMEM];   // As[2][BK*SA], Bs[2][BK*SB]; the cluster reduction reuses it

    const int tid = threadIdx.x;
    const int tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    const int ntiles = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;

    MfTileLoader<BM, BK, NT, A_KC> la;
    MfTileLoader<BN, BK, NT, B_KC> lb;
    const int lda = A_KC ? K : M, ldb = B_KC ? K : N;

    float acc[TM][TN];
    #pragma unroll
    for (int i = 0; i < TM; i++)
        #pragma unroll
        for (int j = 0; j < TN; j++) acc[i][j] = 0.0f;

    if (ntiles > 0) {
        la.load(A, M, lda, m0, kbeg, kend, tid, vec);
        lb.load(B, N, ldb, n0, kbeg, kend, tid, vec);
        la.template store<SA, false>((smem + (0) * BK * SA), tid);
        lb.template store<SB, false>((smem + 2 * BK * SA + (0) * BK * SB), tid);
        __syncthreads();
    }
    for (int t = 0; t < ntiles; t++) {
        const int buf = t & 1;
        if (t + 1 < ntiles) {   // next tile's loads in flight during this tile's math
            la.load(A, M, lda, m0, kbeg + (t + 1) * BK, kend, tid, vec);
            lb.load(B, N, ldb, n0, kbeg + (t + 1) * BK, kend, tid, vec);
        }
        const float* as = (smem + (buf) * BK * SA);
        const float* bs = (smem + 2 * BK * SA + (buf) * BK * SB);
        #pragma unroll
        for (int k = 0; k < BK; k++) {
            float a[TM], b[TN];
            #pragma unroll
            for (int g = 0; g < TM / 4; g++) {
                float4 v = *reinterpret_cast<const float4*>(&as[k * SA + g * RM + ty * 4]);
                a[g * 4 + 0] = v.x; a[g * 4 + 1] = v.y; a[g * 4 + 2] = v.z; a[g * 4 + 3] = v.w;
            }
            #pragma unroll
            for (int g = 0; g < TN / 4; g++) {
                float4 v = *reinterpret_cast<const float4*>(&bs[k * SB + g * RN + tx * 4]);
                b[g * 4 + 0] = v.x; b[g * 4 + 1] = v.y; b[g * 4 + 2] = v.z; b[g * 4 + 3] = v.w;
            }
            #pragma unroll
            for (int i = 0; i < TM; i++)
                #pragma unroll
                for (int j = 0; j < TN; j++) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (t + 1 < ntiles) {
            la.template store<SA, false>((smem + (buf ^ 1) * BK * SA), tid);
            lb.template store<SB, false>((smem + 2 * BK * SA + (buf ^ 1) * BK * SB), tid);
        }
        __syncthreads();
    }

    if (cluster) {   // gridDim.z blocks of one cluster share this tile: reduce in shared memory
        #pragma unroll
        for (int i = 0; i < TM; i++)
            #pragma unroll
            for (int g = 0; g < TN / 4; g++)
                *reinterpret_cast<float4*>(&smem[((i / 4) * RM + ty * 4 + (i % 4)) * BN + g * RN + tx * 4]) =
                    make_float4(acc[i][g * 4], acc[i][g * 4 + 1], acc[i][g * 4 + 2], acc[i][g * 4 + 3]);
        mf_cluster_reduce<BM, BN, NT>(C, smem, m0, n0, M, N, epi);
        return;
    }

    // epilogue
    float* Cz = C + (size_t)blockIdx.z * M * N;
    #pragma unroll
    for (int i = 0; i < TM; i++) {
        const int m = m0 + (i / 4) * RM + ty * 4 + (i % 4);
        if (m >= M) continue;
        #pragma unroll
        for (int g = 0; g < TN / 4; g++) {
            const int n = n0 + g * RN + tx * 4;
            float v[4];
            #pragma unroll
            for (int j = 0; j < 4; j++) v[j] = acc[i][g * 4 + j];
            if (vec && n < N) {  // N % 4 == 0: all four in range
                #pragma unroll
                for (int j = 0; j < 4; j++) v[j] = mf_epilogue(v[j], m, n + j, N, epi);
                *reinterpret_cast<float4*>(&Cz[(size_t)m * N + n]) = make_float4(v[0], v[1], v[2], v[3]);
            } else if (!vec) {
                #pragma unroll
                for (int j = 0; j < 4; j++)
                    if (n + j < N) Cz[(size_t)m * N + n + j] = mf_epilogue(v[j], m, n + j, N, epi);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// TF32 kernel: block tile BM x BN, warps of WM x WN, each warp (WM/16) x (WN/8) mma.m16n8k8 tiles.
// Same loading as the FP32 kernel; values are rounded to TF32 (cvt.rna) when stored to shared.
// Fragment layouts (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, q = lane % 4:
//   a0 (g, q) a1 (g+8, q) a2 (g, q+4) a3 (g+8, q+4)        A is 16 x 8 (row, k)
//   b0 (k=q, n=g) b1 (k=q+4, n=g)                           B is 8 x 8 (k, n)
//   c0 (g, 2q) c1 (g, 2q+1) c2 (g+8, 2q) c3 (g+8, 2q+1)    C is 16 x 8
// Shared rows are padded by 8 floats, so the fragment reads S[q][g] hit 32 different banks.

__device__ __forceinline__ void mf_mma_tf32(float* c, const uint32_t* a, const uint32_t* b) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

template<int BM, int BN, int BK, int WM, int WN, bool A_KC, bool B_KC>
__global__ void __launch_bounds__((BM / WM) * (BN / WN) * 32)
matmul_fast_tf32_kernel(float* __restrict__ C, const float* __restrict__ A, const float* __restrict__ B,
                        int M, int N, int K, int kchunk, int vec, int cluster, MatmulFastEpi epi) {
    constexpr int NT = (BM / WM) * (BN / WN) * 32;
    constexpr int MI = WM / 16, NI = WN / 8;
    constexpr int PAD = 8;
    constexpr int SA = BM + PAD, SB = BN + PAD;
    constexpr int SMEM = 2 * BK * (SA + SB) > BM * BN ? 2 * BK * (SA + SB) : BM * BN;
    __shared__ __align__(16) float smem[SMEM];   // As[2][BK*SA], Bs[2][BK*SB]; the cluster reduction reuses it

    const int tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32;
    const int wm = (warp / (BN / WN)) * WM, wn = (warp % (BN / WN)) * WN;
    const int g = lane / 4, q = lane % 4;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int kbeg = blockIdx.z * kchunk;
    const int kend = min(K, kbeg + kchunk);
    const int ntiles = kend > kbeg ? (kend - kbeg + BK - 1) / BK : 0;

    MfTileLoader<BM, BK, NT, A_KC> la;
    MfTileLoader<BN, BK, NT, B_KC> lb;
    const int lda = A_KC ? K : M, ldb = B_KC ? K : N;

    float acc[MI][NI][4];
    #pragma unroll
    for (int i = 0; i < MI; i++)
        #pragma unroll
        for (int j = 0; j < NI; j++)
            #pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.0f;

    if (ntiles > 0) {
        la.load(A, M, lda, m0, kbeg, kend, tid, vec);
        lb.load(B, N, ldb, n0, kbeg, kend, tid, vec);
        la.template store<SA, true>((smem + (0) * BK * SA), tid);
        lb.template store<SB, true>((smem + 2 * BK * SA + (0) * BK * SB), tid);
        __syncthreads();
    }
    for (int t = 0; t < ntiles; t++) {
        const int buf = t & 1;
        if (t + 1 < ntiles) {
            la.load(A, M, lda, m0, kbeg + (t + 1) * BK, kend, tid, vec);
            lb.load(B, N, ldb, n0, kbeg + (t + 1) * BK, kend, tid, vec);
        }
        const float* as = (smem + (buf) * BK * SA);
        const float* bs = (smem + 2 * BK * SA + (buf) * BK * SB);
        #pragma unroll
        for (int kk = 0; kk < BK; kk += 8) {
            uint32_t af[MI][4], bf[NI][2];
            #pragma unroll
            for (int i = 0; i < MI; i++) {
                const int r = wm + i * 16 + g;
                af[i][0] = __float_as_uint(as[(kk + q) * SA + r]);
                af[i][1] = __float_as_uint(as[(kk + q) * SA + r + 8]);
                af[i][2] = __float_as_uint(as[(kk + q + 4) * SA + r]);
                af[i][3] = __float_as_uint(as[(kk + q + 4) * SA + r + 8]);
            }
            #pragma unroll
            for (int j = 0; j < NI; j++) {
                const int c = wn + j * 8 + g;
                bf[j][0] = __float_as_uint(bs[(kk + q) * SB + c]);
                bf[j][1] = __float_as_uint(bs[(kk + q + 4) * SB + c]);
            }
            #pragma unroll
            for (int i = 0; i < MI; i++)
                #pragma unroll
                for (int j = 0; j < NI; j++) mf_mma_tf32(acc[i][j], af[i], bf[j]);
        }
        if (t + 1 < ntiles) {
            la.template store<SA, true>((smem + (buf ^ 1) * BK * SA), tid);
            lb.template store<SB, true>((smem + 2 * BK * SA + (buf ^ 1) * BK * SB), tid);
        }
        __syncthreads();
    }

    if (cluster) {   // gridDim.z blocks of one cluster share this tile: reduce in shared memory
        #pragma unroll
        for (int i = 0; i < MI; i++)
            #pragma unroll
            for (int h = 0; h < 2; h++)
                #pragma unroll
                for (int j = 0; j < NI; j++)
                    *reinterpret_cast<float2*>(&smem[(wm + i * 16 + g + h * 8) * BN + wn + j * 8 + 2 * q]) =
                        make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
        mf_cluster_reduce<BM, BN, NT>(C, smem, m0, n0, M, N, epi);
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
                for (int j = 0; j < NI; j++) {
                    const int n = n0 + wn + j * 8 + 2 * q;
                    float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                    if (vec) {
                        if (n < N) {   // N % 4 == 0 and n even: both in range, 8-byte aligned
                            v0 = mf_epilogue(v0, m, n, N, epi);
                            v1 = mf_epilogue(v1, m, n + 1, N, epi);
                            *reinterpret_cast<float2*>(&Cz[(size_t)m * N + n]) = make_float2(v0, v1);
                        }
                    } else {
                        if (n < N)     Cz[(size_t)m * N + n]     = mf_epilogue(v0, m, n, N, epi);
                        if (n + 1 < N) Cz[(size_t)m * N + n + 1] = mf_epilogue(v1, m, n + 1, N, epi);
                    }
                }
            }
        }
    }
}

// ----------------------------------------------------------------------------
// split-K reduce: C[i] = epilogue( part[0][i] + part[1][i] + ... ), always in this order.
// part is (splits, M, N). 4 elements per thread when N % 4 == 0 (VEC), else 1.

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

// the tile configurations; dev/cuda/matmul_forward.cu can force one through matmul_fast_force_cfg
typedef struct { int bm, bn, bk; float eff; const char* name; } MatmulFastCfg;
#define MF_NUM_FP32_CFGS 4
#define MF_NUM_TF32_CFGS 3
static const MatmulFastCfg mf_fp32_cfgs[MF_NUM_FP32_CFGS] = {
    { 64, 128, 16, 0.60f, "64x128x16 t8x8"},
    { 64,  64, 16, 0.80f, "64x64x16 t4x4"},
    { 32,  64, 32, 1.00f, "32x64x32 t4x4"},
    { 32,  32, 32, 0.90f, "32x32x32 t4x4"},
};
static const MatmulFastCfg mf_tf32_cfgs[MF_NUM_TF32_CFGS] = {
    { 64,  64, 32, 1.00f, "64x64x32 w32x32"},
    { 32,  64, 32, 0.90f, "32x64x32 w16x32"},
    { 32,  32, 32, 0.80f, "32x32x32 w16x16"},
};
static int matmul_fast_force_cfg = -1;     // dev only: -1 = choose by shape
static int matmul_fast_force_splits = 0;   // dev only: 0 = choose by shape

// splits > 1: K is cut in splits chunks of kchunk; cluster = 1: the splits of a tile form a thread-block
// cluster and reduce in distributed shared memory (sm_90); cluster = 0: each split writes a partial
// buffer in scratch and matmul_fast_splitk_reduce_kernel adds them (only dweight has a scratch)
typedef struct { int cfg; int splits; int kchunk; int cluster; } MatmulFastPlan;

static int mf_num_sms(void) {
    static int sms = 0;
    if (sms == 0) {
        int dev = 0;
        MF_CHECK(cudaGetDevice(&dev));
        MF_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    return sms;
}

static int mf_has_clusters(void) {   // compute capability 9.0 or newer
    static int cc = -1;
    if (cc < 0) {
        int dev = 0;
        MF_CHECK(cudaGetDevice(&dev));
        MF_CHECK(cudaDeviceGetAttribute(&cc, cudaDevAttrComputeCapabilityMajor, dev));
    }
    return cc >= 9;
}

// Tile: the busiest multiprocessor gets ceil(blocks / SMs) tiles of BM*BN outputs; eff (measured on an
// H200 by `dev/cuda/matmul_forward sweep`) says how fast a tile size runs. Cheapest wins.
// Splits: while the grid has fewer than two blocks per SM, double the K splits (up to 8, the portable
// cluster size), keeping at least two BK steps per split: the loop over K is a chain of dependent
// tile loads, and short outputs with long K (784 -> 128 at batch 64) are latency-bound on it.
static MatmulFastPlan mf_plan(int M, int N, int K, int tf32, int have_scratch) {
    const MatmulFastCfg* cfgs = tf32 ? mf_tf32_cfgs : mf_fp32_cfgs;
    const int ncfg = tf32 ? MF_NUM_TF32_CFGS : MF_NUM_FP32_CFGS;
    const int sms = mf_num_sms();
    MatmulFastPlan p = {0, 1, K, 0};
    if (matmul_fast_force_cfg >= 0 && matmul_fast_force_cfg < ncfg) {
        p.cfg = matmul_fast_force_cfg;
    } else {
        float best = 1e30f;
        for (int c = 0; c < ncfg; c++) {
            long blocks = (long)mf_ceil_div(M, cfgs[c].bm) * mf_ceil_div(N, cfgs[c].bn);
            float cost = (float)((blocks + sms - 1) / sms) * cfgs[c].bm * cfgs[c].bn / cfgs[c].eff;
            if (cost < best) { best = cost; p.cfg = c; }
        }
    }
    const int cluster = mf_has_clusters();
    if (!cluster && !have_scratch) return p;
    const int bk = cfgs[p.cfg].bk;
    const long blocks = (long)mf_ceil_div(M, cfgs[p.cfg].bm) * mf_ceil_div(N, cfgs[p.cfg].bn);
    int splits = 1;
    if (matmul_fast_force_splits > 0) {
        splits = matmul_fast_force_splits;
    } else {
        while (splits < 8 && blocks * splits * 2 <= 2L * sms && K / (splits * 2) >= 2 * bk) splits *= 2;
    }
    if (cluster && splits > 8) splits = 8;
    if (splits > 1) {
        int chunk = mf_ceil_div(mf_ceil_div(K, splits), bk) * bk;
        if (cluster) {   // a cluster always has `splits` blocks; trailing ones may get an empty slice
            p.splits = splits;
        } else {
            p.splits = mf_ceil_div(K, chunk);
        }
        p.kchunk = chunk;
        p.cluster = cluster;
    }
    if (p.splits <= 1) { p.splits = 1; p.kchunk = K; p.cluster = 0; }
    return p;
}

// ----------------------------------------------------------------------------
// the generic launcher

template<bool A_KC, bool B_KC>
static void mf_launch_kernel(int tf32, int cfg, dim3 grid, float* C, const float* A, const float* B,
                             int M, int N, int K, int kchunk, int vec, int cluster, MatmulFastEpi epi, cudaStream_t s) {
    cudaLaunchConfig_t lc;
    memset(&lc, 0, sizeof(lc));
    cudaLaunchAttribute attr[1];
    lc.gridDim = grid;
    lc.stream = s;
    if (cluster) {
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = 1;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = grid.z;
        lc.attrs = attr;
        lc.numAttrs = 1;
    }
#define MF_FP32(BM, BN, BK, TM, TN) do { lc.blockDim = dim3((BM / TM) * (BN / TN)); \
    MF_CHECK(cudaLaunchKernelEx(&lc, matmul_fast_fp32_kernel<BM, BN, BK, TM, TN, A_KC, B_KC>, \
                                C, A, B, M, N, K, kchunk, vec, cluster, epi)); } while (0)
#define MF_TF32(BM, BN, BK, WM, WN) do { lc.blockDim = dim3((BM / WM) * (BN / WN) * 32); \
    MF_CHECK(cudaLaunchKernelEx(&lc, matmul_fast_tf32_kernel<BM, BN, BK, WM, WN, A_KC, B_KC>, \
                                C, A, B, M, N, K, kchunk, vec, cluster, epi)); } while (0)
    if (!tf32) {   // keep in step with mf_fp32_cfgs
        switch (cfg) {
            case 0: MF_FP32(64, 128, 16, 8, 8); break;
            case 1: MF_FP32(64, 64, 16, 4, 4); break;
            case 2: MF_FP32(32, 64, 32, 4, 4); break;
            default: MF_FP32(32, 32, 32, 4, 4); break;
        }
    } else {       // keep in step with mf_tf32_cfgs
        switch (cfg) {
            case 0: MF_TF32(64, 64, 32, 32, 32); break;
            case 1: MF_TF32(32, 64, 32, 16, 32); break;
            default: MF_TF32(32, 32, 32, 16, 16); break;
        }
    }
#undef MF_FP32
#undef MF_TF32
    MF_CHECK(cudaGetLastError());
}

static inline bool mf_aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// C(M, N) = epilogue(A . B) in the layout given by A_KC / B_KC (see the top of the file).
// scratch holds splits * M * N floats when the plan splits K (only if allow_split).
template<bool A_KC, bool B_KC>
static void mf_matmul(float* C, const float* A, const float* B, int M, int N, int K, MatmulFastEpi epi,
                      float* scratch, int allow_split, int tf32, cudaStream_t s) {
    if (M <= 0 || N <= 0) return;
    MatmulFastPlan p = mf_plan(M, N, K, tf32, allow_split && scratch != NULL);
    const MatmulFastCfg* cfgs = tf32 ? mf_tf32_cfgs : mf_fp32_cfgs;
    const bool vec = (K % 4 == 0) && (M % 4 == 0) && (N % 4 == 0) && mf_aligned16(A) && mf_aligned16(B)
                     && mf_aligned16(C) && (epi.aux == NULL || mf_aligned16(epi.aux))
                     && (scratch == NULL || mf_aligned16(scratch));
    dim3 grid(mf_ceil_div(N, cfgs[p.cfg].bn), mf_ceil_div(M, cfgs[p.cfg].bm), p.splits);
    const int via_scratch = p.splits > 1 && !p.cluster;
    float* out = via_scratch ? scratch : C;
    MatmulFastEpi e = epi;
    if (via_scratch) e.kind = MF_EPI_RAW;
    mf_launch_kernel<A_KC, B_KC>(tf32, p.cfg, grid, out, A, B, M, N, K, p.kchunk, vec ? 1 : 0, p.cluster, e, s);
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
        MF_CHECK(cudaGetLastError());
    }
}

// ----------------------------------------------------------------------------
// the launchers the trainer calls

// out = act(inp . weight^T + bias); inp is (B, IN), weight is (OUT, IN), bias is (OUT) or NULL,
// out is (B, OUT); act in {0,1,2,3}
static void matmul_forward_fast(float* out, const float* inp, const float* weight, const float* bias,
                                int B, int IN, int OUT, int act, int tf32, cudaStream_t stream) {
    MatmulFastEpi epi = {MF_EPI_FORWARD, act, bias, NULL};
    mf_matmul<true, true>(out, inp, weight, B, OUT, IN, epi, NULL, 0, tf32, stream);
}

// dinp = (dout . weight) * act'(inp_act); dout is (B, OUT), weight is (OUT, IN), inp_act and dinp
// are (B, IN); inp_act (the activation output of the layer below) may be NULL only when act == 3
static void matmul_backward_dinp_fast(float* dinp, const float* dout, const float* weight, const float* inp_act,
                                      int act, int B, int IN, int OUT, int tf32, cudaStream_t stream) {
    if (inp_act == NULL && act != 3) {
        fprintf(stderr, "matmul_backward_dinp_fast: inp_act is NULL but act is %d (only 3 = none allows it)\n", act);
        exit(EXIT_FAILURE);
    }
    MatmulFastEpi epi = {MF_EPI_DINP, act, NULL, inp_act};
    mf_matmul<true, false>(dinp, dout, weight, B, IN, OUT, epi, NULL, 0, tf32, stream);
}

// floats of scratch matmul_backward_dweight_fast needs for (B, IN, OUT); 0 means none
static size_t matmul_fast_scratch_floats(int B, int IN, int OUT) {
    size_t need = 0;
    for (int tf32 = 0; tf32 < 2; tf32++) {
        MatmulFastPlan p = mf_plan(OUT, IN, B, tf32, 1);
        if (p.splits > 1 && !p.cluster) {
            size_t n = (size_t)p.splits * OUT * IN;
            if (n > need) need = n;
        }
    }
    return need;
}

// dweight = dout^T . inp (overwrites); dout is (B, OUT), inp is (B, IN), dweight is (OUT, IN).
// scratch: at least matmul_fast_scratch_floats(B, IN, OUT) floats (NULL: no K split)
static void matmul_backward_dweight_fast(float* dweight, const float* dout, const float* inp, int B, int IN,
                                         int OUT, float* scratch, int tf32, cudaStream_t stream) {
    MatmulFastEpi epi = {MF_EPI_RAW, 3, NULL, NULL};
    mf_matmul<false, false>(dweight, dout, inp, OUT, IN, B, epi, scratch, 1, tf32, stream);
}
