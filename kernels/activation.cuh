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

#include "common.cuh"

// the activation and its derivative from the output, shared with the fused fast kernels
__device__ __forceinline__ float activation_apply(float x, int act) {
    switch (act) {
    case 0: return 1.0f / (1.0f + expf(-x));   // sigmoid
    case 1: return x > 0.0f ? x : 0.0f;        // relu
    case 2: return tanhf(x);                   // tanh
    default: return x;                         // none
    }
}
__device__ __forceinline__ float activation_grad_from_output(float y, int act) {
    switch (act) {
    case 0: return y * (1.0f - y);
    case 1: return y > 0.0f ? 1.0f : 0.0f;
    case 2: return 1.0f - y * y;
    default: return 1.0f;
    }
}

__global__ void activation_forward_kernel(float *x, size_t n, int act) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = activation_apply(x[i], act);
}

// dx *= act'(y)
__global__ void activation_backward_kernel(float *dx, const float *y, size_t n, int act) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] *= activation_grad_from_output(y[i], act);
}

static inline int elementwise_blocks(size_t n) {
    size_t blocks = CEIL_DIV(n, (size_t)256);
    return (int)(blocks < 65535 ? blocks : 65535);
}

static inline void activation_forward(float *x, size_t n, int act, cudaStream_t stream) {
    activation_forward_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(x, n, act);
    cudaCheck(cudaGetLastError());
}
static inline void activation_backward(float *dx, const float *y, size_t n, int act, cudaStream_t stream) {
    activation_backward_kernel<<<elementwise_blocks(n), 256, 0, stream>>>(dx, y, n, act);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_ACTIVATION_CUH
