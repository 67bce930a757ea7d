/*
The data path on the device: the whole training set is copied to the GPU once, as uint8
(47 MB for MNIST), and each step's float batch is built there from the epoch's permutation.
No host-to-device copy per step. Also the weight init, with cuRAND.
CPU twins: gather_batch_cpu, model_cpu_init_params (which uses the host RNG instead).

    gather:  x(bs, D) = images[perm[start + b]] / 255,  labels(bs) = all_labels[perm[start + b]]
             start = (*step + ahead) * B: the step counter lives on the device (see softmax_xent.cuh);
             ahead = 1 gathers the next step's batch while this step runs (train_steps_fast);
             tf32 = 1 (the trainer's -x 1) stores round_tf32(x): the first layer's forward product
             then takes the batch as it is (kernels/matmul_fast.cuh MF_TF32_EXACT)
    init:    p = (2u - 1) · bound, bound = 1/sqrt(IN) (nn.Linear's default init), u in [0, 1)
             from cuRAND's Philox4x32-10 generator: element i of the flat buffer takes the
             first number of subsequence i of the seed. The same weights on every run and
             GPU, and on the CPU too: common/rng.h computes the same Philox numbers there.
*/
#ifndef MLP_DATA_CUH
#define MLP_DATA_CUH

#include <curand_kernel.h>
#include <stdint.h>

#include "../common/rng.h"
#include "common.cuh"

// one input value: the pixel / 255, a division, as the CPU does (the same float, bit for bit), rounded
// to TF32 when tf32 (also kernels/persistent.cuh's gather, with tf32 = 0)
__device__ __forceinline__ float pixel_value(uint8_t p, int tf32) {
    const float v = p / 255.0f;
    return tf32 ? round_tf32(v) : v;
}

// a row of the batch per blockIdx.y, pixels across threads (coalesced uint8 reads)
__global__ void gather_batch_kernel(float *x, int *labels, const uint8_t *images, const uint8_t *all_labels,
                                    const int *perm, const int *step, int ahead, int B, int bs, int D, int tf32) {
    int b = blockIdx.y;
    if (b >= bs) return;
    int item = perm[(size_t)(*step + ahead) * B + b];
    const uint8_t *img = images + (size_t)item * D;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < D; i += gridDim.x * blockDim.x)
        x[(size_t)b * D + i] = pixel_value(img[i], tf32);
    if (blockIdx.x == 0 && threadIdx.x == 0) labels[b] = all_labels[item];
}

// evaluation batches are contiguous rows of the test set: items start .. start + bs - 1
__global__ void gather_rows_kernel(float *x, int *labels, const uint8_t *images, const uint8_t *all_labels,
                                   int start, int bs, int D, int tf32) {
    int b = blockIdx.y;
    if (b >= bs) return;
    const uint8_t *img = images + (size_t)(start + b) * D;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < D; i += gridDim.x * blockDim.x)
        x[(size_t)b * D + i] = pixel_value(img[i], tf32);
    if (blockIdx.x == 0 && threadIdx.x == 0) labels[b] = all_labels[start + b];
}

__global__ void init_uniform_kernel(float *p, size_t n, float bound, unsigned long long seed, size_t first) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    curandStatePhilox4_32_10_t state;
    curand_init(seed, first + i, 0, &state);  // subsequence = position in the flat buffer
    p[i] = uniform_weight(curand(&state), bound);  // the conversion shared with the CPU (common/rng.h)
}

// ----------------------------------------------------------------------------
// launchers

// the batch of step *step + ahead (ahead 0: this step's; 1: the next one's); tf32: rounded to TF32
static inline void gather_batch(float *x, int *labels, const uint8_t *images, const uint8_t *all_labels,
                                const int *perm, const int *step, int ahead, int B, int bs, int D, int tf32,
                                cudaStream_t stream) {
    dim3 grid(CEIL_DIV(D, 1024) < 4 ? CEIL_DIV(D, 1024) : 4, bs);
    gather_batch_kernel<<<grid, 256, 0, stream>>>(x, labels, images, all_labels, perm, step, ahead, B, bs, D, tf32);
    cudaCheck(cudaGetLastError());
}

static inline void gather_rows(float *x, int *labels, const uint8_t *images, const uint8_t *all_labels, int start,
                               int bs, int D, int tf32, cudaStream_t stream) {
    dim3 grid(CEIL_DIV(D, 1024) < 4 ? CEIL_DIV(D, 1024) : 4, bs);
    gather_rows_kernel<<<grid, 256, 0, stream>>>(x, labels, images, all_labels, start, bs, D, tf32);
    cudaCheck(cudaGetLastError());
}

// p[0..n) uniform in [-bound, bound]; first = p's offset in the flat buffer
static inline void init_uniform(float *p, size_t n, float bound, uint64_t seed, size_t first, cudaStream_t stream) {
    init_uniform_kernel<<<(unsigned)CEIL_DIV(n, (size_t)256), 256, 0, stream>>>(p, n, bound, seed, first);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_DATA_CUH
