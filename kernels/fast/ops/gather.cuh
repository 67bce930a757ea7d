/*
kernels/fast/ops/gather.cuh: the fast trainer's batch gather. Simple twin: gather_batch
(kernels/data.cuh); CPU twin: gather_batch_cpu.
    x(bs, D) = images[perm[start + b]] / 255,  labels(bs) = all_labels[perm[start + b]]
    start = (*step + ahead) * B: the step counter lives on the device (kernels/fast/ops/softmax.cuh);
    ahead = 1 gathers the next step's batch while this step runs (train_mlp_fast.cu);
    the mode (GATHER_*): GATHER_TF32 (-x 1) stores round_tf32(x): the first layer's forward product
    then takes the batch as it is (kernels/fast/matmul/matmul_fast.h MF_TF32_EXACT); GATHER_PIXELS stores
    the bytes themselves, 0..255 as floats, for the first layer's FP32 products on pixels
    (MF_FP32_PIXELS), which take them as byte / 255;
    xb (or NULL): the same values rounded to BF16 as well, the first layer's operand with -x 2's
    BF16 copies (one pass over the pixels where a copy kernel would read x again)
*/
#ifndef MLP_FAST_GATHER_CUH
#define MLP_FAST_GATHER_CUH

#include <cuda_bf16.h>
#include <stdint.h>

#include "../../common.cuh"
#include "round.cuh"

// what the gathers store: the input value, that value rounded to TF32, or the pixel byte itself
enum { GATHER_FP32 = 0, GATHER_TF32 = 1, GATHER_PIXELS = 2 };

// one input value: the pixel / 255, a division, as the CPU does (the same float, bit for bit), rounded
// to TF32 with GATHER_TF32, the byte with GATHER_PIXELS (the fused steps' gathers call it too)
__device__ __forceinline__ float pixel_value(uint8_t p, int mode) {
    if (mode == GATHER_PIXELS) return (float)p;
    // (a zero pixel, half of Fashion-MNIST's, is 0 without the division: 0 / 255 is +0 all the same, and
    // the division's operand check sends a zero dividend to its slow routine)
    const float v = p == 0 ? 0.0f : p / 255.0f;
    return mode == GATHER_TF32 ? round_tf32(v) : v;
}

// a row of the batch per blockIdx.y, pixels across threads (coalesced uint8 reads)
__global__ void gather_batch_step_kernel(float *x, unsigned short *xb, int *labels, const uint8_t *images,
                                         const uint8_t *all_labels, const int *perm, const int *step, int ahead, int B,
                                         int bs, int D, int mode) {
    int b = blockIdx.y;
    if (b >= bs) return;
    int item = perm[(size_t)(*step + ahead) * B + b];
    const uint8_t *img = images + (size_t)item * D;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < D; i += gridDim.x * blockDim.x) {
        const float v = pixel_value(img[i], mode);
        x[(size_t)b * D + i] = v;
        if (xb) xb[(size_t)b * D + i] = mf_bf16_bits(v);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) labels[b] = all_labels[item];
}

// evaluation batches are contiguous rows of the test set: items start .. start + bs - 1
__global__ void gather_rows_fast_kernel(float *x, int *labels, const uint8_t *images, const uint8_t *all_labels,
                                   int start, int bs, int D, int mode) {
    int b = blockIdx.y;
    if (b >= bs) return;
    const uint8_t *img = images + (size_t)(start + b) * D;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < D; i += gridDim.x * blockDim.x)
        x[(size_t)b * D + i] = pixel_value(img[i], mode);
    if (blockIdx.x == 0 && threadIdx.x == 0) labels[b] = all_labels[start + b];
}

// the batch of step *step + ahead (ahead 0: this step's; 1: the next one's), stored as mode says (GATHER_*),
// and rounded to BF16 into xb unless it is NULL
static inline void gather_batch_step(float *x, __nv_bfloat16 *xb, int *labels, const uint8_t *images,
                                     const uint8_t *all_labels, const int *perm, const int *step, int ahead, int B,
                                     int bs, int D, int mode, cudaStream_t stream) {
    dim3 grid(CEIL_DIV(D, 1024) < 4 ? CEIL_DIV(D, 1024) : 4, bs);
    gather_batch_step_kernel<<<grid, 256, 0, stream>>>(x, reinterpret_cast<unsigned short *>(xb), labels, images,
                                                       all_labels, perm, step, ahead, B, bs, D, mode);
    cudaCheck(cudaGetLastError());
}

static inline void gather_rows_fast(float *x, int *labels, const uint8_t *images, const uint8_t *all_labels, int start,
                               int bs, int D, int mode, cudaStream_t stream) {
    dim3 grid(CEIL_DIV(D, 1024) < 4 ? CEIL_DIV(D, 1024) : 4, bs);
    gather_rows_fast_kernel<<<grid, 256, 0, stream>>>(x, labels, images, all_labels, start, bs, D, mode);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_FAST_GATHER_CUH
