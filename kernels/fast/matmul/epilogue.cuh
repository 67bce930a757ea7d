/*
kernels/fast/matmul/epilogue.cuh: what the fast matmul kernels do with a sum once it is complete, and how the
K slices of a split product are added up.

Epilogues (MatmulFastEpi, kernels/fast/matmul/matmul_fast.h), fused into the matmul so that its output makes
no second trip through memory:
    MF_EPI_FORWARD  out = act(sum + bias), stored rounded to TF32 when round_out
    MF_EPI_DINP     dinp = sum * act'(y), y the layer's input activation (kernels/activation.cuh)
    MF_EPI_SGD      dW = sum is stored, and W and its momentum take their SGD step (kernels/sgd.cuh)
    MF_EPI_RAW      the sum as it is
The math is the simple tier's own device functions (kernels/activation.cuh, kernels/sgd.cuh), so both tiers
compute the same floats.

K splits. Where a product's output is too small to fill the GPU, its K dimension is cut into slices,
a block per slice and tile (blockIdx.z the slice), and the partial tiles are added up in the order
0, 1, .., S-1 whichever way, so the result is the same bits on every run, with no atomics:
    MF_SPLIT_CLUSTER  the slices of a tile are one thread-block cluster (sm_90) and add up through
                      distributed shared memory (mf_cluster_reduce): no scratch in global memory;
    MF_SPLIT_RAW      each slice writes its partial sums to scratch, C + z * M * N, and
                      matmul_fast_splitk_reduce_kernel adds them (where there are no clusters).
*/
#ifndef MLP_FAST_EPILOGUE_CUH
#define MLP_FAST_EPILOGUE_CUH

#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include "matmul_fast.h"         // MatmulFastEpi, MF_EPI_*
#include "../../activation.cuh"  // activation_apply, activation_grad_from_output, ACT_NONE
#include "../../sgd.cuh"         // sgd_one
#include "../ops/float4.cuh"     // sgd_four, activation_grad_times4
#include "../ops/round.cuh"      // round_tf32, mf_bf16_bits

// The float4 SGD epilogues' step (the deep fused step's weight-gradient tiles, fused_deep.cuh's fd_tile,
// and the K-major TF32 kernels', wgmma_kmajor.cuh's mf_wg_tf32_store4): W's float4 at i, from its values w
// and its momentum's mb, takes its step with gradient g (sgd_four), and both are stored back; w and mb
// hold the new values after it (for the caller's rounded copies).
__device__ __forceinline__ void mf_sgd_step_store4(const MatmulFastSgd &sg, size_t i, float4 &w, float4 &mb, float4 g) {
    sgd_four(w, g, mb, sg.lr, sg.mu, sg.wd);
    *reinterpret_cast<float4 *>(sg.param + i) = w;
    *reinterpret_cast<float4 *>(sg.mbuf + i) = mb;
}

// the kernels' `split` argument: how the K slices of a tile (gridDim.z > 1) are added up
enum { MF_SPLIT_RAW = 0, MF_SPLIT_CLUSTER = 1 };

// ----------------------------------------------------------------------------
// the epilogue of one output

// The epilogue of output (m, n) in two halves: mf_epi_load reads what it needs from memory (the bias,
// the activation output, the weight and its momentum), mf_epi_apply computes the value to store (and
// stores the SGD step). Apart, so that the cluster reduction (mf_cluster_reduce) can have the loads of
// several outputs in flight at once, instead of each output waiting a full memory latency for its own.
typedef struct { float a, b; } MfEpiIn;
__device__ __forceinline__ MfEpiIn mf_epi_load(int m, int n, int N, const MatmulFastEpi& epi) {
    MfEpiIn in = {0.0f, 0.0f};
    const size_t i = (size_t)m * N + n;
    if (epi.kind == MF_EPI_FORWARD && epi.bias != NULL) in.a = epi.bias[n];
    else if (epi.kind == MF_EPI_DINP && epi.act != ACT_NONE) in.a = epi.aux[i];
    else if (epi.kind == MF_EPI_SGD) { in.a = epi.sgd.param[i]; in.b = epi.sgd.mbuf[i]; }
    return in;
}
__device__ __forceinline__ float mf_epi_apply(float v, MfEpiIn in, int m, int n, int N, const MatmulFastEpi& epi) {
    if (epi.kind == MF_EPI_FORWARD) {
        v = activation_apply(v + in.a, epi.act);   // (in.a is 0 without a bias)
        return epi.round_out ? round_tf32(v) : v;
    }
    if (epi.kind == MF_EPI_DINP && epi.act != ACT_NONE) return v * activation_grad_from_output(in.a, epi.act);
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
// activation or rounding): then the register-tile stores skip mf_epilogue, a call per output that
// would cost the weight gradient more than its arithmetic
__device__ __forceinline__ bool mf_epi_identity(const MatmulFastEpi& epi) {
    return epi.kind == MF_EPI_RAW || (epi.kind == MF_EPI_FORWARD && epi.bias == NULL && epi.act == ACT_NONE && !epi.round_out)
        || (epi.kind == MF_EPI_DINP && epi.act == ACT_NONE);
}

// both halves, for one output. Not inlined: the epilogue runs once per output, and its inlined copies
// kept the compiler from unrolling the store loops (the accumulators then went to local memory).
// static: each object has its own (a __device__ function also gets a host-side symbol)
static __device__ __noinline__ float mf_epilogue(float v, int m, int n, int N, const MatmulFastEpi epi) {
    return mf_epi_apply(v, mf_epi_load(m, n, N, epi), m, n, N, epi);
}

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

// Outputs (m, n .. n + 3), their sums v and the epilogue's loads in (mf_epi_load), through the epilogue
// into C, those in range: one 16-byte store when vec (N % 4 == 0, C 16-byte aligned: the four are in
// range together), else one at a time. out_bf16: NULL, or (M, N) where each output is stored again,
// rounded to BF16 (-x 2's copies of the next products' operands: kernels/fast/matmul/wgmma_kmajor.cuh). For an
// epilogue that takes a float4 of a row at a time from a tile in shared memory, as the wgmma BF16
// kernel's does (the cluster reduction below does the same with its own copy of these lines).
__device__ __forceinline__ void mf_epi_store4(float* C, float4 v, const MfEpiIn (&in)[4], int m, int n, int N, bool vec,
                                              const MatmulFastEpi& epi, unsigned short* out_bf16) {
    float o[4] = {v.x, v.y, v.z, v.w};
    #pragma unroll   // only in range: past column N - 1 the index m * N + n is the next row's
    for (int j = 0; j < 4; j++) if (n + j < N) o[j] = mf_epi_apply(o[j], in[j], m, n + j, N, epi);
    const size_t i = (size_t)m * N + n;
    if (vec && n < N) {
        *reinterpret_cast<float4*>(&C[i]) = make_float4(o[0], o[1], o[2], o[3]);
        if (out_bf16 != nullptr)   // (i a multiple of 4: 8-byte aligned)
            *reinterpret_cast<uint2*>(out_bf16 + i) = make_uint2(mf_bf16x2_bits(o[0], o[1]), mf_bf16x2_bits(o[2], o[3]));
    } else {
        #pragma unroll
        for (int j = 0; j < 4; j++)
            if (n + j < N) {
                C[i + j] = o[j];
                if (out_bf16 != nullptr) out_bf16[i + j] = mf_bf16_bits(o[j]);
            }
    }
}

// ----------------------------------------------------------------------------
// split-K inside a thread-block cluster (Hopper, sm_90): the S blocks of a cluster compute the same
// output tile over S slices of K, each leaves its partial tile in its own shared memory (red, BM x BN),
// then block r adds up elements [r*BM*BN/S, (r+1)*BM*BN/S) over the S partials, always in the order
// 0, 1, ..., S-1, through distributed shared memory, and applies the epilogue. No scratch in global
// memory, no atomics: the result is the same every run. A thread takes a float4 at a time, with the
// epilogue's loads for the four in flight together with the partials' (mf_epi_load), rather than one
// mf_epilogue call, and one memory latency, after another. (Two or four float4s per round, all their
// loads first, cost the kernels registers, and so blocks per SM.)
// The register-tile epilogue (mf_store_pair and the like) still calls mf_epilogue output by output,
// each waiting for its own loads: fine for the bias and the activation, but the SGD step there is
// bound by that latency, so the trainer fuses it only for small layers (train_mlp_fast.cu,
// FUSED_SGD_MAX_WEIGHTS).

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

#endif  // MLP_FAST_EPILOGUE_CUH
