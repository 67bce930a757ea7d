/*
kernels/fast/ops/sgd.cuh: the SGD step over a slice of the flat buffer with 16-byte (float4)
loads and stores, which move the same bytes in a quarter of the memory instructions; and with
TF32 (-x 1) a second copy of the weights, rounded to TF32, written beside the FP32 ones (the
forward products read it: kernels/fast/matmul/matmul_fast.h, MF_TF32_EXACT), or with BF16 (-x 2) one rounded
to BF16, as 16-bit values (the BF16-operand kernel reads it: kernels/fast/matmul/mma_bf16.cuh). Simple twin:
sgd_update (kernels/sgd.cuh); CPU twin: sgd_update_cpu.
A layer's slice of the flat buffers need not be 16-byte aligned: the float4 kernel runs when the
pointers allow it; the last n % 4 floats go one at a time.
*/
#ifndef MLP_FAST_SGD_CUH
#define MLP_FAST_SGD_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "../../common.cuh"
#include "../../sgd.cuh"     // sgd_one
#include "float4.cuh"        // sgd_four
#include "round.cuh"

// one parameter per thread (for slices that are not 16-byte aligned)
__global__ void sgd_update_fast_kernel(float *params, const float *grads, float *mbuf, float *rounded,
                                       unsigned short *bf16, size_t n, float lr, float mu, float wd) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        sgd_one(params[i], grads[i], mbuf[i], lr, mu, wd);
        if (rounded) rounded[i] = round_tf32(params[i]);
        if (bf16) bf16[i] = mf_bf16_bits(params[i]);
    }
}

// four parameters per thread, in 16-byte loads and stores; the last n % 4 one at a time
__global__ void sgd_update_vec4_kernel(float *params, const float *grads, float *mbuf, float *rounded,
                                       unsigned short *bf16, size_t n, float lr, float mu, float wd) {
    size_t n4 = n / 4;
    float4 *p4 = reinterpret_cast<float4 *>(params);
    float4 *m4 = reinterpret_cast<float4 *>(mbuf);
    const float4 *g4 = reinterpret_cast<const float4 *>(grads);
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 p = p4[i], g = g4[i], m = m4[i];
        sgd_four(p, g, m, lr, mu, wd);
        p4[i] = p;
        m4[i] = m;
        if (rounded) reinterpret_cast<float4 *>(rounded)[i] = mf_round_tf32(p);
        if (bf16) reinterpret_cast<uint2 *>(bf16)[i] = make_uint2(mf_bf16x2_bits(p.x, p.y), mf_bf16x2_bits(p.z, p.w));
    }
    for (size_t i = 4 * n4 + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        sgd_one(params[i], grads[i], mbuf[i], lr, mu, wd);
        if (rounded) rounded[i] = round_tf32(params[i]);
        if (bf16) bf16[i] = mf_bf16_bits(params[i]);
    }
}

__global__ void round_tf32_copy_kernel(float *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = round_tf32(src[i]);
}

// vec4: the float4 kernel, when all the pointers are 16-byte aligned (a layer's slice of the flat
// buffers may start anywhere); otherwise one float per thread. rounded: NULL, or n floats that
// receive the updated params rounded to TF32; bf16: NULL, or n BF16 values that receive them rounded
// to BF16.
static inline void sgd_update_fast(float *params, const float *grads, float *mbuf, float *rounded, size_t n, float lr,
                                   float mu, float wd, int vec4, cudaStream_t stream, __nv_bfloat16 *bf16 = NULL) {
    if (n == 0) return;
    if ((((uintptr_t)params | (uintptr_t)grads | (uintptr_t)mbuf | (uintptr_t)rounded) & 15) != 0 ||
        ((uintptr_t)bf16 & 7) != 0)
        vec4 = 0;
    unsigned short *b = reinterpret_cast<unsigned short *>(bf16);
    size_t work = vec4 ? CEIL_DIV(n, (size_t)4) : n;
    size_t blocks = CEIL_DIV(work, (size_t)256);
    int grid = (int)(blocks < 4096 ? blocks : 4096);
    if (vec4) sgd_update_vec4_kernel<<<grid, 256, 0, stream>>>(params, grads, mbuf, rounded, b, n, lr, mu, wd);
    else sgd_update_fast_kernel<<<grid, 256, 0, stream>>>(params, grads, mbuf, rounded, b, n, lr, mu, wd);
    cudaCheck(cudaGetLastError());
}

// dst[i] = round_tf32(src[i]) for i < n
static inline void round_tf32_copy(float *dst, const float *src, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    size_t blocks = CEIL_DIV(n, (size_t)256);
    round_tf32_copy_kernel<<<(int)(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(dst, src, n);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_FAST_SGD_CUH
