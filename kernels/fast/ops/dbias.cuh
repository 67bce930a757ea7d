/*
kernels/fast/ops/dbias.cuh: the bias gradient as a tiled column sum, with the bias's SGD step fused in.
Simple twin: matmul_backward_dbias_kernel (kernels/matmul.cuh); CPU twin: matmul_backward_cpu's dbias.
*/
#ifndef MLP_FAST_DBIAS_CUH
#define MLP_FAST_DBIAS_CUH

#include "../../common.cuh"
#include "../../sgd.cuh"     // sgd_one

// The fast bias gradient: the same column sum, spread over a (32 x 32) block per 32 columns.
// Thread (x, y) sums rows y, y + 32, ... of column x; then the 32 partial sums of a column
// are added in a fixed tree order in shared memory. Still no atomics, so still bitwise
// reproducible; but 32x the threads in flight, which matters when OUT is 1024 and B is 256
// (the simple tier's one thread per column then walks 256 rows with few loads in flight).
#define DBIAS_TILE 32
// With param != NULL, the SGD step of the bias is fused in: the thread that writes dbias[o]
// also updates param[o] and mbuf[o] (kernels/sgd.cuh).
// The body, for columns o0 .. o0 + 31 and thread (x, y) of the block; every thread of the block
// calls it (it synchronises the block). kernels/fast/ops/head.cuh calls it too.
__device__ void dbias_tile(float *dbias, const float *dout, int B, int OUT, int o0, int x, int y, float *param,
                           float *mbuf, float lr, float mu, float wd) {
    __shared__ float partial[DBIAS_TILE][DBIAS_TILE + 1];  // +1: no bank conflicts on the column walk
    int o = o0 + x;
    float sum = 0.0f;
    if (o < OUT)
        for (int b = y; b < B; b += DBIAS_TILE) sum += dout[(size_t)b * OUT + o];
    partial[y][x] = sum;
    __syncthreads();
    for (int stride = DBIAS_TILE / 2; stride > 0; stride /= 2) {
        if (y < stride) partial[y][x] += partial[y + stride][x];
        __syncthreads();
    }
    if (y == 0 && o < OUT) {
        dbias[o] = partial[0][x];
        if (param) sgd_one(param[o], partial[0][x], mbuf[o], lr, mu, wd);
    }
}

__global__ void matmul_backward_dbias_tiled_kernel(float *dbias, const float *dout, int B, int OUT, float *param,
                                                   float *mbuf, float lr, float mu, float wd) {
    dbias_tile(dbias, dout, B, OUT, blockIdx.x * DBIAS_TILE, threadIdx.x, threadIdx.y, param, mbuf, lr, mu, wd);
}

// the fast path's: the tiled kernel, and with param != NULL the bias's SGD step fused in
static inline void matmul_backward_dbias_fast(float *dbias, const float *dout, int B, int OUT, float *param,
                                              float *mbuf, float lr, float mu, float wd, cudaStream_t stream) {
    matmul_backward_dbias_tiled_kernel<<<CEIL_DIV(OUT, DBIAS_TILE), dim3(DBIAS_TILE, DBIAS_TILE), 0, stream>>>(
        dbias, dout, B, OUT, param, mbuf, lr, mu, wd);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_FAST_DBIAS_CUH
