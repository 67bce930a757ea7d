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
// A tall dout (B in the thousands) is also cut into chunks of rows (dbias_chunks): a block per 32
// columns and chunk writes the chunk's column sums, and a second kernel adds each column's chunks in
// order. Its blocks are short: one block per 32 columns walking all of B held its SMs for the whole
// backward pass, while the products beside it on the other streams, one block an SM with the whole
// register file, could not use them (dev/cuda/dbias.cu times both).
#define DBIAS_TILE 32
// The body, for columns o0 .. o0 + 31, rows r0 .. r1 - 1, and thread (x, y) of the block; every
// thread of the block calls it (it synchronises the block). Writes out[o] = the rows' sum of column
// o; with param != NULL, the SGD step of the bias is fused in: the thread that writes out[o] also
// updates param[o] and mbuf[o] (kernels/sgd.cuh). kernels/fast/ops/head.cuh calls it too.
__device__ void dbias_tile_rows(float *out, const float *dout, int r0, int r1, int OUT, int o0, int x, int y,
                                float *param, float *mbuf, float lr, float mu, float wd) {
    __shared__ float partial[DBIAS_TILE][DBIAS_TILE + 1];  // +1: no bank conflicts on the column walk
    int o = o0 + x;
    float sum = 0.0f;
    if (o < OUT)
        for (int b = r0 + y; b < r1; b += DBIAS_TILE) sum += dout[(size_t)b * OUT + o];
    partial[y][x] = sum;
    __syncthreads();
    for (int stride = DBIAS_TILE / 2; stride > 0; stride /= 2) {
        if (y < stride) partial[y][x] += partial[y + stride][x];
        __syncthreads();
    }
    if (y == 0 && o < OUT) {
        out[o] = partial[0][x];
        if (param) sgd_one(param[o], partial[0][x], mbuf[o], lr, mu, wd);
    }
}
// all B rows into dbias
__device__ void dbias_tile(float *dbias, const float *dout, int B, int OUT, int o0, int x, int y, float *param,
                           float *mbuf, float lr, float mu, float wd) {
    dbias_tile_rows(dbias, dout, 0, B, OUT, o0, x, y, param, mbuf, lr, mu, wd);
}

// one chunk of rows a blockIdx.y (rows apart), its column sums into out + blockIdx.y * OUT; with one
// chunk, out is dbias and the SGD step rides along
__global__ void matmul_backward_dbias_tiled_kernel(float *out, const float *dout, int B, int OUT, int rows, float *param,
                                                   float *mbuf, float lr, float mu, float wd) {
    const int r0 = blockIdx.y * rows, r1 = min(B, r0 + rows);
    dbias_tile_rows(out + (size_t)blockIdx.y * OUT, dout, r0, r1, OUT, blockIdx.x * DBIAS_TILE, threadIdx.x,
                    threadIdx.y, param, mbuf, lr, mu, wd);
}

// dbias[o] = the S chunks' sums of column o, added in order 0 .. S - 1 (a thread a column), and the
// bias's SGD step where param != NULL
__global__ void dbias_sum_chunks_kernel(float *dbias, const float *partial, int S, int OUT, float *param, float *mbuf,
                                        float lr, float mu, float wd) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OUT) return;
    float sum = 0.0f;
    for (int s = 0; s < S; s++) sum += partial[(size_t)s * OUT + o];
    dbias[o] = sum;
    if (param) sgd_one(param[o], sum, mbuf[o], lr, mu, wd);
}

// the chunks of rows for a dout of B x OUT, from the shape alone (so the bits do not depend on the
// GPU): one where dout is 256 KB or less (a second launch would cost more than it saves); else about
// 256 blocks, chunks of 256 rows or more (8 loads a thread). dbias_chunks_most is that count, never
// more for a smaller B; dbias_chunks the same with no chunk left empty.
static inline int dbias_chunks_most(int B, int OUT) {
    if ((size_t)B * OUT <= 65536) return 1;
    const int s = CEIL_DIV(256, CEIL_DIV(OUT, DBIAS_TILE)), most = CEIL_DIV(B, 256);
    return s < most ? s : most;
}
static inline int dbias_chunks(int B, int OUT) {
    const int S = dbias_chunks_most(B, OUT);
    return S <= 1 ? 1 : CEIL_DIV(B, CEIL_DIV(B, S));
}

// the floats of partial sums matmul_backward_dbias_fast needs for a dout of up to B x OUT (0: none)
static inline size_t dbias_partial_floats(int B, int OUT) {
    const int S = dbias_chunks_most(B, OUT);
    return S > 1 ? (size_t)S * OUT : 0;
}

// the fast path's: the tiled kernel, and with param != NULL the bias's SGD step fused in. partial:
// dbias_partial_floats(B, OUT) floats (or more) for the chunks' sums, or NULL: one chunk, all B rows
// a block.
static inline void matmul_backward_dbias_fast(float *dbias, const float *dout, int B, int OUT, float *param,
                                              float *mbuf, float lr, float mu, float wd, cudaStream_t stream,
                                              float *partial = NULL) {
    const int S = partial ? dbias_chunks(B, OUT) : 1, rows = CEIL_DIV(B, S);
    matmul_backward_dbias_tiled_kernel<<<dim3(CEIL_DIV(OUT, DBIAS_TILE), S), dim3(DBIAS_TILE, DBIAS_TILE), 0,
                                         stream>>>(S > 1 ? partial : dbias, dout, B, OUT, rows, S > 1 ? NULL : param,
                                                   mbuf, lr, mu, wd);
    cudaCheck(cudaGetLastError());
    if (S > 1) {
        dbias_sum_chunks_kernel<<<CEIL_DIV(OUT, 256), 256, 0, stream>>>(dbias, partial, S, OUT, param, mbuf, lr, mu,
                                                                       wd);
        cudaCheck(cudaGetLastError());
    }
}

#endif // MLP_FAST_DBIAS_CUH
