/*
The data path on the device, and the weight init.

The whole dataset is copied to the GPU once, as the uint8 bytes of its files (47 MB for
MNIST's training set): that copy is what `.to("cuda")` does to a dataset. Each step's float
batch is then built on the GPU from the epoch's permutation, so no training step copies
anything from the host. CPU twins: gather_batch_cpu, model_init_params_cpu.

    gather:  x(bs, D) = images[item_b] / 255,  labels(bs) = all_labels[item_b]
             item_b = idx[start + b] (a batch of the epoch's permutation), or start + b when
             idx is NULL (evaluation walks the test set in order)
    init:    p = (2u - 1) · bound, bound = 1/sqrt(IN) (nn.Linear's default init), u in [0, 1)
             from cuRAND's Philox4x32-10 generator: element i of the flat buffer takes the
             first number of subsequence i of the seed. The same weights on every run and
             GPU, and on the CPU too: common/rng.h computes the same Philox numbers there.
*/
#ifndef MLP_DATA_CUH
#define MLP_DATA_CUH

#include <curand_kernel.h>
#include <stdint.h>

#include "../common/rng.h"  // uniform_weight: the bits-to-float conversion the CPU uses too
#include "common.cuh"
#include "trace.cuh"  // train_mlp -T: trace_begin, trace_end around each launch

// a dataset on the device: n items of D bytes each, and n labels, exactly as in the files
typedef struct {
    uint8_t *images, *labels;  // (n, D) and (n)
    int n, D;
} DeviceData;

// cudaMalloc + cudaMemcpy: host bytes to the device, once
static inline void device_data_upload(DeviceData *d, const uint8_t *images, const uint8_t *labels, int n, int D) {
    d->n = n;
    d->D = D;
    size_t bytes = (size_t)n * D;
    d->images = (uint8_t *)cudaMallocCheck(bytes, "the images");
    d->labels = (uint8_t *)cudaMallocCheck((size_t)n, "the labels");
    cudaCheck(cudaMemcpy(d->images, images, bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d->labels, labels, (size_t)n, cudaMemcpyHostToDevice));
}

static inline void device_data_free(DeviceData *d) {
    cudaCheck(cudaFree(d->images));
    cudaCheck(cudaFree(d->labels));
}

// a row of the batch per blockIdx.y, pixels across the threads (neighbouring threads read
// neighbouring bytes: coalesced)
static __global__ void gather_batch_kernel(float *x, int *labels, const uint8_t *images, const uint8_t *all_labels,
                                    const int *idx, int start, int bs, int D) {
    int b = blockIdx.y;
    if (b >= bs) return;
    int item = idx ? idx[start + b] : start + b;
    const uint8_t *img = images + (size_t)item * D;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < D; i += gridDim.x * blockDim.x)
        x[(size_t)b * D + i] = img[i] / 255.0f;  // a division, as on the CPU: the same float, bit for bit
    if (blockIdx.x == 0 && threadIdx.x == 0) labels[b] = all_labels[item];
}

// one thread per parameter: its own Philox subsequence, so no two threads share a generator
static __global__ void init_uniform_kernel(float *p, size_t n, float bound, unsigned long long seed, size_t first) {
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i >= n) return;
    curandStatePhilox4_32_10_t state;
    curand_init(seed, first + i, 0, &state);       // subsequence = position in the flat buffer
    p[i] = uniform_weight(curand(&state), bound);  // the conversion shared with the CPU (common/rng.h)
}

// ----------------------------------------------------------------------------
// launchers

// the batch of rows start .. start + bs - 1 of idx (a device array), or of the dataset itself when idx is NULL
static inline void gather_batch(float *x, int *labels, const DeviceData *d, const int *idx, int start, int bs) {
    dim3 grid(CEIL_DIV(d->D, 1024) < 4 ? CEIL_DIV(d->D, 1024) : 4, bs);
    trace_begin();
    gather_batch_kernel<<<grid, 256>>>(x, labels, d->images, d->labels, idx, start, bs, d->D);
    cudaCheck(cudaGetLastError());
    trace_end(TK_GATHER, grid, dim3(256), bs, d->D, idx != NULL);
}

// p[0..n) uniform in [-bound, bound]; first = p's offset in the flat buffer
static inline void init_uniform(float *p, size_t n, float bound, uint64_t seed, size_t first) {
    init_uniform_kernel<<<(unsigned)CEIL_DIV(n, (size_t)256), 256>>>(p, n, bound, seed, first);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_DATA_CUH
