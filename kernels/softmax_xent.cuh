/*
Softmax + cross-entropy on the logits, with its gradient, mean over the batch.
CPU twin: softmax_xent_forward_backward_cpu.

    logits (B,C), labels (B):
    loss_b       = logsumexp(logits_b) - logits_b[label_b]        (max subtracted first: stable)
    loss         = (1/B) Σ_b loss_b
    dlogits(B,C) = (softmax(logits_b) - onehot(label_b)) / B

Kernels:
  softmax_xent_forward_backward_kernel   one thread per row: its loss and its dlogits
  loss_mean_kernel                       one block adds the B losses in a fixed order (no atomics,
                                         so the same bits on every run) and stores the mean
  softmax_xent_eval_kernel               evaluation: each row's loss, and whether its largest
                                         logit is the label
  sum_two_kernel                         two fixed-order sums at once (evaluation's totals)
*/
#ifndef MLP_SOFTMAX_XENT_CUH
#define MLP_SOFTMAX_XENT_CUH

#include "common.cuh"
#include "trace.cuh"  // train_mlp -T: trace_begin, trace_end around each launch

#define LOSS_THREADS 1024  // the one block of loss_mean_kernel and sum_two_kernel

// One row, the math of softmax_xent_forward_backward_cpu: writes the row's dlogits (C) when
// drow is not NULL and returns the row's loss. Every softmax kernel here and in kernels/fast/
// goes through this function, but for the fused steps' heads, which spread a row over a warp's lanes:
// kernels/fast/fused/deep_head.cuh's fd_head_job with the same arithmetic in the same order (the same
// bits), kernels/fast/fused/fused_step.cuh's adding the exponentials as a tree over the lanes.
__device__ __forceinline__ float softmax_xent_row(float *drow, const float *z, int label, int C, int B) {
    float maxz = z[0];
    for (int c = 1; c < C; c++) maxz = fmaxf(maxz, z[c]);
    float sum = 0.0f;
    for (int c = 0; c < C; c++) sum += expf(z[c] - maxz);
    if (drow) {
        for (int c = 0; c < C; c++) {
            float p = expf(z[c] - maxz) / sum;
            drow[c] = (p - (c == label ? 1.0f : 0.0f)) / B;
        }
    }
    return logf(sum) + maxz - z[label];
}

// one thread per row
static __global__ void softmax_xent_forward_backward_kernel(float *dlogits, float *losses, const float *logits,
                                                     const int *labels, int B, int C) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    losses[b] = softmax_xent_row(dlogits + (size_t)b * C, logits + (size_t)b * C, labels[b], C, B);
}

// Sums v[0..n) in one block: thread t adds v[t], v[t + blockDim], ... in order, then a tree
// over the threads. The order is fixed, so the sum is the same on every run.
__device__ double block_sum_fixed_order(const float *v, int n, double *shared) {
    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += v[i];
    shared[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) shared[threadIdx.x] += shared[threadIdx.x + stride];
        __syncthreads();
    }
    return shared[0];
}

// *loss = mean(losses[0..B)). Launch with one block of LOSS_THREADS.
static __global__ void loss_mean_kernel(float *loss, const float *losses, int B) {
    __shared__ double shared[LOSS_THREADS];
    double total = block_sum_fixed_order(losses, B, shared);
    if (threadIdx.x == 0) *loss = (float)(total / B);
}

// evaluation: losses[b] and correct[b] (1 when the largest logit, the first on ties, is the label)
static __global__ void softmax_xent_eval_kernel(float *losses, float *correct, const float *logits, const int *labels, int B,
                                         int C) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= B) return;
    const float *z = logits + (size_t)b * C;
    int best = 0;
    for (int c = 1; c < C; c++)
        if (z[c] > z[best]) best = c;
    losses[b] = softmax_xent_row(NULL, z, labels[b], C, B);
    correct[b] = best == labels[b] ? 1.0f : 0.0f;
}

// out[0] = Σ a, out[1] = Σ b over n values each, in a fixed order (one block)
static __global__ void sum_two_kernel(double *out, const float *a, const float *b, int n) {
    __shared__ double shared[LOSS_THREADS];
    double sa = block_sum_fixed_order(a, n, shared);
    __syncthreads();
    double sb = block_sum_fixed_order(b, n, shared);
    if (threadIdx.x == 0) {
        out[0] = sa;
        out[1] = sb;
    }
}

// ----------------------------------------------------------------------------
// launchers

// losses (B) and dlogits (B, C) from the logits, then their mean into *loss (one float on the device)
static inline void softmax_xent_forward_backward(float *loss, float *dlogits, float *losses, const float *logits,
                                                 const int *labels, int B, int C) {
    trace_begin();
    softmax_xent_forward_backward_kernel<<<CEIL_DIV(B, 128), 128>>>(dlogits, losses, logits, labels, B, C);
    cudaCheck(cudaGetLastError());
    trace_end(TK_SOFTMAX_XENT, dim3(CEIL_DIV(B, 128)), dim3(128), B, 0, C);
    trace_begin();
    loss_mean_kernel<<<1, LOSS_THREADS>>>(loss, losses, B);
    cudaCheck(cudaGetLastError());
    trace_end(TK_LOSS_MEAN, dim3(1), dim3(LOSS_THREADS), B, 0, 0);
}

static inline void softmax_xent_eval(float *losses, float *correct, const float *logits, const int *labels, int B,
                                     int C) {
    softmax_xent_eval_kernel<<<CEIL_DIV(B, 128), 128>>>(losses, correct, logits, labels, B, C);
    cudaCheck(cudaGetLastError());
}

static inline void sum_two(double *out, const float *a, const float *b, int n) {
    sum_two_kernel<<<1, LOSS_THREADS>>>(out, a, b, n);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_SOFTMAX_XENT_CUH
