/*
kernels/fast/ops/transpose.cuh: the K-major TF32 copies -x 1's large products read
(kernels/fast/matmul/matmul_fast.h, matmul_fast_tf32k_run): a matrix transposed and rounded to TF32, and,
where asked, the same matrix rounded in its own layout. CPU twin: the loops in test_mlp.cu's
test_matmul_tf32k (round_tf32 of each element, at its transposed place). And the SGD step of a
weight matrix that keeps both copies, with them, in one pass (sgd_tf32_transpose: several ranks'
step after the sum); its twin is sgd_update_fast then tf32_transpose (test_mlp's test_sgd_transpose).
How: a block moves a 32 x 32 tile through shared memory. Its warps read the tile's rows (128
contiguous bytes a warp) and write the transposed tile's rows likewise; the shared tile's rows are
padded by one float, so a warp reading a column of it hits 32 different banks.
*/
#ifndef MLP_FAST_TRANSPOSE_CUH
#define MLP_FAST_TRANSPOSE_CUH

#include "../../common.cuh"
#include "round.cuh"         // round_tf32
#include "../../sgd.cuh"     // sgd_one

// dst (C, R) = round_tf32(src (R, C))^T; same: NULL, or (R, C) = round_tf32(src). A block is 32 x 8
// threads over a 32 x 32 tile, each thread 4 rows of it.
__global__ void tf32_transpose_kernel(float *__restrict__ dst, float *__restrict__ same, const float *__restrict__ src,
                                      int R, int C) {
    __shared__ float tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, tx = threadIdx.x, ty = threadIdx.y;
    #pragma unroll
    for (int j = 0; j < 32; j += 8) {   // rows r0 + ty + j of src, a warp's 32 floats of each
        const int r = r0 + ty + j, c = c0 + tx;
        if (r < R && c < C) {
            const float v = round_tf32(src[(size_t)r * C + c]);
            tile[ty + j][tx] = v;
            if (same) same[(size_t)r * C + c] = v;
        }
    }
    __syncthreads();
    #pragma unroll
    for (int j = 0; j < 32; j += 8) {   // rows c0 + ty + j of dst, a warp's 32 floats of each
        const int c = c0 + ty + j, r = r0 + tx;
        if (r < R && c < C) dst[(size_t)c * R + r] = tile[tx][ty + j];
    }
}

static inline void tf32_transpose(float *dst, float *same, const float *src, int R, int C, cudaStream_t stream) {
    if (R <= 0 || C <= 0) return;
    tf32_transpose_kernel<<<dim3(CEIL_DIV(C, 32), CEIL_DIV(R, 32)), dim3(32, 8), 0, stream>>>(dst, same, src, R, C);
    cudaCheck(cudaGetLastError());
}

// W (R, C) and its momentum take the SGD step on grads (sgd_one, as sgd_update_fast); same (R, C) =
// round_tf32(W) and dst (C, R) = same transposed: what sgd_update_fast with a TF32 copy, then
// tf32_transpose of that copy, write, in one pass, which reads W's rounded copy back from shared
// memory rather than from global memory. The tiles as in tf32_transpose_kernel.
__global__ void sgd_tf32_transpose_kernel(float *__restrict__ params, const float *__restrict__ grads,
                                          float *__restrict__ mbuf, float *__restrict__ same, float *__restrict__ dst,
                                          int R, int C, float lr, float mu, float wd) {
    __shared__ float tile[32][33];
    const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32, tx = threadIdx.x, ty = threadIdx.y;
    #pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int r = r0 + ty + j, c = c0 + tx;
        if (r < R && c < C) {
            const size_t i = (size_t)r * C + c;
            float p = params[i], m = mbuf[i];
            sgd_one(p, grads[i], m, lr, mu, wd);
            params[i] = p;
            mbuf[i] = m;
            const float v = round_tf32(p);
            same[i] = v;
            tile[ty + j][tx] = v;
        }
    }
    __syncthreads();
    #pragma unroll
    for (int j = 0; j < 32; j += 8) {
        const int c = c0 + ty + j, r = r0 + tx;
        if (r < R && c < C) dst[(size_t)c * R + r] = tile[tx][ty + j];
    }
}

static inline void sgd_tf32_transpose(float *params, const float *grads, float *mbuf, float *same, float *dst, int R,
                                      int C, float lr, float mu, float wd, cudaStream_t stream) {
    if (R <= 0 || C <= 0) return;
    sgd_tf32_transpose_kernel<<<dim3(CEIL_DIV(C, 32), CEIL_DIV(R, 32)), dim3(32, 8), 0, stream>>>(
        params, grads, mbuf, same, dst, R, C, lr, mu, wd);
    cudaCheck(cudaGetLastError());
}

#endif  // MLP_FAST_TRANSPOSE_CUH
