/*
kernels/fast/ops/transpose.cuh: the K-major TF32 copies -x 1's large products read
(kernels/fast/matmul/matmul_fast.h, matmul_fast_tf32k_run): a matrix transposed and rounded to TF32, and,
where asked, the same matrix rounded in its own layout. CPU twin: the loops in test_mlp.cu's
test_matmul_tf32k (round_tf32 of each element, at its transposed place).
How: a block moves a 32 x 32 tile through shared memory. Its warps read the tile's rows (128
contiguous bytes a warp) and write the transposed tile's rows likewise; the shared tile's rows are
padded by one float, so a warp reading a column of it hits 32 different banks.
*/
#ifndef MLP_FAST_TRANSPOSE_CUH
#define MLP_FAST_TRANSPOSE_CUH

#include "../../common.cuh"
#include "round.cuh"         // round_tf32

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

#endif  // MLP_FAST_TRANSPOSE_CUH
