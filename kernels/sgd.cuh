/*
SGD with momentum μ and weight decay λ, torch.optim.SGD's semantics (dampening 0), over
the flat parameter buffer. CPU twin: sgd_update_cpu.

    g = grad + λ·p;   buf = μ·buf + g;   p = p - lr·buf

(PyTorch sets buf = g on the first step; buf starts at zero here and μ·0 + g is exactly g.)
One thread per parameter, a grid-stride loop over the whole buffer: every weight and bias
of every layer in one launch, because they sit in one buffer.
*/
#ifndef MLP_SGD_CUH
#define MLP_SGD_CUH

#include "common.cuh"
#include "trace.cuh"  // train_mlp -T: trace_begin, trace_end around each launch

// one parameter's step; the fused kernels of kernels/fast/ call it too
__device__ __forceinline__ void sgd_one(float &p, float grad, float &buf, float lr, float mu, float wd) {
    float g = grad + wd * p;
    buf = mu * buf + g;
    p -= lr * buf;
}

static __global__ void sgd_update_kernel(float *params, const float *grads, float *mbuf, size_t n, float lr, float mu,
                                  float wd) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        sgd_one(params[i], grads[i], mbuf[i], lr, mu, wd);
}

// ----------------------------------------------------------------------------
// launcher

static inline void sgd_update(float *params, const float *grads, float *mbuf, size_t n, float lr, float mu, float wd) {
    if (n == 0) return;
    size_t blocks = CEIL_DIV(n, (size_t)256);
    int grid = (int)(blocks < 4096 ? blocks : 4096);
    trace_begin();
    sgd_update_kernel<<<grid, 256>>>(params, grads, mbuf, n, lr, mu, wd);
    cudaCheck(cudaGetLastError());
    trace_end(TK_SGD, dim3(grid), dim3(256), n, 0, 0);
}

#endif // MLP_SGD_CUH
