/*
SGD with momentum μ and weight decay λ, torch.optim.SGD's semantics (dampening 0), over
the flat parameter buffer (or a slice of it: one layer's W and b). CPU twin: sgd_update_cpu.

    g = grad + λ·p;   buf = μ·buf + g;   p = p - lr·buf

(PyTorch sets buf = g on the first step; buf starts at zero here and μ·0 + g is exactly g.)
Two versions: one float per thread, and the fast one with 16-byte (float4) loads and
stores, which moves the same bytes in a quarter of the memory instructions. The buffers
come from cudaMalloc, so they are 256-byte aligned, but a layer's slice of them need not be:
the float4 kernel runs when the pointers allow it; the last n % 4 floats go one at a time.

With TF32 (-x 1) the trainer keeps a second copy of the weights, rounded to TF32
(common.cuh round_tf32), which is what its forward products read (kernels/matmul_fast.cuh,
MF_TF32_EXACT): sgd_update writes it beside the FP32 weights when given `rounded`, and
round_tf32_copy makes it from scratch (after the init).
*/
#ifndef MLP_SGD_CUH
#define MLP_SGD_CUH

#include <stdint.h>

#include "common.cuh"

__device__ __forceinline__ void sgd_one(float &p, float grad, float &buf, float lr, float mu, float wd) {
    float g = grad + wd * p;
    buf = mu * buf + g;
    p -= lr * buf;
}

__global__ void sgd_update_kernel(float *params, const float *grads, float *mbuf, float *rounded, size_t n, float lr,
                                  float mu, float wd) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        sgd_one(params[i], grads[i], mbuf[i], lr, mu, wd);
        if (rounded) rounded[i] = round_tf32(params[i]);
    }
}

__global__ void sgd_update_vec4_kernel(float *params, const float *grads, float *mbuf, float *rounded, size_t n,
                                       float lr, float mu, float wd) {
    size_t n4 = n / 4;
    float4 *p4 = reinterpret_cast<float4 *>(params);
    float4 *m4 = reinterpret_cast<float4 *>(mbuf);
    const float4 *g4 = reinterpret_cast<const float4 *>(grads);
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 p = p4[i], g = g4[i], m = m4[i];
        sgd_one(p.x, g.x, m.x, lr, mu, wd);
        sgd_one(p.y, g.y, m.y, lr, mu, wd);
        sgd_one(p.z, g.z, m.z, lr, mu, wd);
        sgd_one(p.w, g.w, m.w, lr, mu, wd);
        p4[i] = p;
        m4[i] = m;
        if (rounded)
            reinterpret_cast<float4 *>(rounded)[i] =
                make_float4(round_tf32(p.x), round_tf32(p.y), round_tf32(p.z), round_tf32(p.w));
    }
    for (size_t i = 4 * n4 + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        sgd_one(params[i], grads[i], mbuf[i], lr, mu, wd);
        if (rounded) rounded[i] = round_tf32(params[i]);
    }
}

__global__ void round_tf32_copy_kernel(float *dst, const float *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = round_tf32(src[i]);
}

// vec4: the float4 kernel, when all the pointers are 16-byte aligned (a layer's slice of the flat
// buffers may start anywhere); otherwise one float per thread. rounded: NULL, or n floats that
// receive the updated params rounded to TF32.
static inline void sgd_update(float *params, const float *grads, float *mbuf, float *rounded, size_t n, float lr,
                              float mu, float wd, int vec4, cudaStream_t stream) {
    if (n == 0) return;
    if ((((uintptr_t)params | (uintptr_t)grads | (uintptr_t)mbuf | (uintptr_t)rounded) & 15) != 0) vec4 = 0;
    size_t work = vec4 ? CEIL_DIV(n, (size_t)4) : n;
    size_t blocks = CEIL_DIV(work, (size_t)256);
    int grid = (int)(blocks < 4096 ? blocks : 4096);
    if (vec4) sgd_update_vec4_kernel<<<grid, 256, 0, stream>>>(params, grads, mbuf, rounded, n, lr, mu, wd);
    else sgd_update_kernel<<<grid, 256, 0, stream>>>(params, grads, mbuf, rounded, n, lr, mu, wd);
    cudaCheck(cudaGetLastError());
}

// dst[i] = round_tf32(src[i]) for i < n
static inline void round_tf32_copy(float *dst, const float *src, size_t n, cudaStream_t stream) {
    if (n == 0) return;
    size_t blocks = CEIL_DIV(n, (size_t)256);
    round_tf32_copy_kernel<<<(int)(blocks < 4096 ? blocks : 4096), 256, 0, stream>>>(dst, src, n);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_SGD_CUH
