/*
kernels/fast/ops/softmax.cuh: softmax + cross-entropy for the fast trainer, which keeps the
number of the current step in device memory (the step counter), so that the same kernels,
captured once into a CUDA graph, can be replayed for every step: the gather reads it to find
the step's rows of the permutation (kernels/fast/ops/gather.cuh), and the kernel that ends
the step's loss computation writes the mean loss to step_losses[*step] and then advances it
(here softmax_xent_fused_kernel; with the fused head of kernels/fast/ops/head.cuh,
head_batch_sums_kernel). The host reads step_losses only when it logs.
Simple twins: kernels/softmax_xent.cuh; CPU twin: softmax_xent_forward_backward_cpu.
*/
#ifndef MLP_FAST_SOFTMAX_CUH
#define MLP_FAST_SOFTMAX_CUH

#include "../../softmax_xent.cuh"  // softmax_xent_row, block_sum_fixed_order, LOSS_THREADS
#include "pdl.cuh"

// The simple tier's two kernels (softmax_xent_forward_backward_kernel, loss_mean_kernel) in one
// launch. One block of LOSS_THREADS threads, a thread per row (rows t, t + LOSS_THREADS, ...): each
// thread's loads are independent of the other rows', so all rows are in flight at once. (A warp per
// row with shuffles looks parallel, but for C = 10 it leaves 22 lanes idle and walks the rows of a
// warp one after another.)
__global__ void __launch_bounds__(LOSS_THREADS)
    softmax_xent_fused_kernel(float *dlogits, float *losses, float *step_losses, int *step, const float *logits,
                              const int *labels, int B, int C, int norm) {
    __shared__ double shared[LOSS_THREADS];
    pdl_wait();  // launched with PDL: the logits are the previous kernel's output (pdl.cuh)
    for (int b = threadIdx.x; b < B; b += blockDim.x)
        losses[b] = softmax_xent_row(dlogits + (size_t)b * C, logits + (size_t)b * C, labels[b], C, norm);
    __syncthreads();  // every row's loss is written before the block sums them
    double total = block_sum_fixed_order(losses, B, shared);
    if (threadIdx.x == 0) {
        step_losses[*step] = (float)(total / norm);
        *step += 1;
    }
}

// losses (B) and dlogits (B, C) from the logits (B, C), the mean loss into step_losses[*step], and
// ++*step. Launched with PDL: it always follows the last layer's forward kernel in the same stream.
// norm: the batch the mean is over (0: B); under train_mlp_fast -g the global batch, of which these B
// rows are one GPU's share: dlogits = (softmax - onehot) / norm, step_losses[*step] = Σ losses / norm.
static inline void softmax_xent_forward_backward_fast(float *dlogits, float *losses, float *step_losses, int *step,
                                                      const float *logits, const int *labels, int B, int C,
                                                      cudaStream_t stream, int norm = 0) {
    launch_pdl(softmax_xent_fused_kernel, dim3(1), dim3(LOSS_THREADS), 0, stream, dlogits, losses, step_losses, step,
               logits, labels, B, C, norm > 0 ? norm : B);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_FAST_SOFTMAX_CUH
