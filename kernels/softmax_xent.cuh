/*
Softmax + cross-entropy on the logits, with its gradient, mean over the batch.
CPU twin: softmax_xent_forward_backward_cpu.

    logits (B,C), labels (B):
    loss_b       = logsumexp(logits_b) - logits_b[label_b]        (max subtracted first: stable)
    loss         = (1/B) Σ_b loss_b
    dlogits(B,C) = (softmax(logits_b) - onehot(label_b)) / B

The step counter. The trainer keeps the number of the current step in device memory, so
that the same kernels, captured once into a CUDA graph, can be replayed for every step:
gather_batch reads it to find the step's rows of the permutation, and the kernel that ends
the step's loss computation writes the mean loss to step_losses[*step] and then advances it
(here loss_mean_kernel or softmax_xent_fused_kernel; with the fused head of kernels/head.cuh,
head_batch_sums_kernel).
The host reads step_losses only when it prints a log line.

Versions:
  simple: softmax_xent_forward_backward_kernel (one thread per row) then
          loss_mean_kernel (one block sums the B losses in a fixed order: no atomics)
  fast:   softmax_xent_fused_kernel: one block does it all, a thread per row, then the same
          fixed-order block sum; one launch instead of two
  eval:   softmax_xent_eval_kernel: per-row loss and whether the argmax is the label
*/
#ifndef MLP_SOFTMAX_XENT_CUH
#define MLP_SOFTMAX_XENT_CUH

#include "common.cuh"

#define LOSS_THREADS 1024  // the one block of loss_mean_kernel, softmax_xent_fused_kernel and sum_two_kernel

// One row, the math of softmax_xent_forward_backward_cpu: writes the row's dlogits (C) when
// drow is not NULL and returns the row's loss. Every path's loss goes through here.
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
__global__ void softmax_xent_forward_backward_kernel(float *dlogits, float *losses, const float *logits,
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

// step_losses[*step] = mean(losses); then ++*step. Launch with one block of LOSS_THREADS.
__global__ void loss_mean_kernel(float *step_losses, int *step, const float *losses, int B) {
    __shared__ double shared[LOSS_THREADS];
    double total = block_sum_fixed_order(losses, B, shared);
    if (threadIdx.x == 0) {
        step_losses[*step] = (float)(total / B);
        *step += 1;
    }
}

// The fast version: one launch instead of two. One block of LOSS_THREADS threads, a thread
// per row (rows t, t + LOSS_THREADS, ...): each thread's loads are independent of the other
// rows', so all rows are in flight at once. (A warp per row with shuffles looks parallel, but
// for C = 10 it leaves 22 lanes idle and walks the rows of a warp one after another: it
// measured 11 us at B = 64 and 40 us at B = 256 on an H200, against ~3 us for this.)
__global__ void __launch_bounds__(LOSS_THREADS)
    softmax_xent_fused_kernel(float *dlogits, float *losses, float *step_losses, int *step, const float *logits,
                              const int *labels, int B, int C) {
    __shared__ double shared[LOSS_THREADS];
    pdl_wait();  // launched with PDL: the logits are the previous kernel's output (kernels/common.cuh)
    for (int b = threadIdx.x; b < B; b += blockDim.x)
        losses[b] = softmax_xent_row(dlogits + (size_t)b * C, logits + (size_t)b * C, labels[b], C, B);
    __syncthreads();  // every row's loss is written before the block sums them
    double total = block_sum_fixed_order(losses, B, shared);
    if (threadIdx.x == 0) {
        step_losses[*step] = (float)(total / B);
        *step += 1;
    }
}

// evaluation: losses[b] and correct[b] (1 when the largest logit, first on ties, is the label)
__global__ void softmax_xent_eval_kernel(float *losses, float *correct, const float *logits, const int *labels, int B,
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
__global__ void sum_two_kernel(double *out, const float *a, const float *b, int n) {
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

static inline void softmax_xent_forward_backward(float *dlogits, float *losses, float *step_losses, int *step,
                                                 const float *logits, const int *labels, int B, int C, int fused,
                                                 cudaStream_t stream) {
    if (fused) {  // with PDL: it always follows the last layer's forward kernel in the same stream
        launch_pdl(softmax_xent_fused_kernel, dim3(1), dim3(LOSS_THREADS), 0, stream, dlogits, losses, step_losses, step,
                   logits, labels, B, C);
        cudaCheck(cudaGetLastError());
        return;
    }
    softmax_xent_forward_backward_kernel<<<CEIL_DIV(B, 128), 128, 0, stream>>>(dlogits, losses, logits, labels, B, C);
    cudaCheck(cudaGetLastError());
    loss_mean_kernel<<<1, LOSS_THREADS, 0, stream>>>(step_losses, step, losses, B);
    cudaCheck(cudaGetLastError());
}

static inline void softmax_xent_eval(float *losses, float *correct, const float *logits, const int *labels, int B,
                                     int C, cudaStream_t stream) {
    softmax_xent_eval_kernel<<<CEIL_DIV(B, 128), 128, 0, stream>>>(losses, correct, logits, labels, B, C);
    cudaCheck(cudaGetLastError());
}

static inline void sum_two(double *out, const float *a, const float *b, int n, cudaStream_t stream) {
    sum_two_kernel<<<1, LOSS_THREADS, 0, stream>>>(out, a, b, n);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_SOFTMAX_XENT_CUH
