/*
Activations, elementwise over the (B, OUT) output of a linear layer, in place.
CPU twins: sigmoid_forward_cpu, relu_forward_cpu, tanh_forward_cpu and their _backward_cpu.

    forward   y = σ(x) = 1 / (1 + e^-x)      y = max(x, 0)       y = tanh(x)
    backward  dx = dy · y(1 - y)             dx = dy · [y > 0]   dx = dy · (1 - y²)

The backward passes take the activation's OUTPUT y, which the forward pass keeps anyway,
so no pre-activation buffer is needed. One thread per element; a grid-stride loop lets any
n run on any grid.
*/
#ifndef MLP_ACTIVATION_CUH
#define MLP_ACTIVATION_CUH

#include "../common/mlp.h"  // ACT_SIGMOID, ACT_RELU, ACT_TANH, ACT_NONE
#include "common.cuh"
#include "trace.cuh"  // train_mlp -T: trace_begin, trace_end around each launch

// the activation, and its derivative from the output: __device__ functions, so the fused
// kernels of kernels/fast/ apply them in their epilogues too
__device__ __forceinline__ float activation_apply(float x, int act) {
    switch (act) {
    case ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case ACT_RELU: return x > 0.0f ? x : 0.0f;
    case ACT_TANH: return tanhf(x);
    default: return x;  // ACT_NONE
    }
}
__device__ __forceinline__ float activation_grad_from_output(float y, int act) {
    switch (act) {
    case ACT_SIGMOID: return y * (1.0f - y);
    case ACT_RELU: return y > 0.0f ? 1.0f : 0.0f;
    case ACT_TANH: return 1.0f - y * y;
    default: return 1.0f;  // ACT_NONE
    }
}

static __global__ void activation_forward_kernel(float *x, size_t n, int act) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = activation_apply(x[i], act);
}

// dx *= act'(y)
static __global__ void activation_backward_kernel(float *dx, const float *y, size_t n, int act) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] *= activation_grad_from_output(y[i], act);
}

// blocks of 256 threads for n elements, at most 65535 of them (the grid-stride loop does the rest)
static inline int elementwise_blocks(size_t n) {
    size_t blocks = CEIL_DIV(n, (size_t)256);
    return (int)(blocks < 65535 ? blocks : 65535);
}

// ----------------------------------------------------------------------------
// launchers

static inline void activation_forward(float *x, size_t n, int act) {
    trace_begin();
    activation_forward_kernel<<<elementwise_blocks(n), 256>>>(x, n, act);
    cudaCheck(cudaGetLastError());
    trace_end(TK_ACT_FORWARD, dim3(elementwise_blocks(n)), dim3(256), n, 0, act);
}
static inline void activation_backward(float *dx, const float *y, size_t n, int act) {
    trace_begin();
    activation_backward_kernel<<<elementwise_blocks(n), 256>>>(dx, y, n, act);
    cudaCheck(cudaGetLastError());
    trace_end(TK_ACT_BACKWARD, dim3(elementwise_blocks(n)), dim3(256), n, 0, act);
}

#endif // MLP_ACTIVATION_CUH
