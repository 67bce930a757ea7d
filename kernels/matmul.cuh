/*
The linear layer, simple version: one thread per output element, a plain loop over the
shared dimension. Clear first; the fast path (kernels/matmul_fast.cuh, dev/cuda/) is
validated against these. CPU twins: matmul_forward_cpu, matmul_backward_cpu.

Shapes: B batch, IN input features, OUT output features. W is (OUT, IN) row-major, like
PyTorch's nn.Linear, so that
    forward   out(B,OUT)     = inp(B,IN) · W(OUT,IN)ᵀ + bias(OUT)
    backward  dinp(B,IN)     = dout(B,OUT) · W(OUT,IN)
              dweight(OUT,IN) = dout(B,OUT)ᵀ · inp(B,IN)
              dbias(OUT)     = Σ_b dout(b, :)           (a column sum)
Threads along x walk the fastest-changing index of what they write (o, i), so neighbouring
threads of a warp read neighbouring addresses of W or inp (coalesced) wherever the loop
allows it. Each output is summed by one thread in a fixed order: no atomics, so the result
is the same, bit for bit, on every run.
*/
#ifndef MLP_MATMUL_CUH
#define MLP_MATMUL_CUH

#include "common.cuh"
#include "sgd.cuh"  // sgd_one, for the bias update fused into the fast dbias

// one thread per out[b][o]
__global__ void matmul_forward_kernel(float *out, const float *inp, const float *weight, const float *bias, int B,
                                      int IN, int OUT) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (b >= B || o >= OUT) return;
    const float *x = inp + (size_t)b * IN;
    const float *w = weight + (size_t)o * IN;
    float sum = 0.0f;
    for (int i = 0; i < IN; i++) sum += x[i] * w[i];
    out[(size_t)b * OUT + o] = sum + bias[o];
}

// one thread per dinp[b][i]: the i-th column of W, weighted by the b-th row of dout
__global__ void matmul_backward_dinp_kernel(float *dinp, const float *dout, const float *weight, int B, int IN,
                                            int OUT) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (b >= B || i >= IN) return;
    float sum = 0.0f;
    for (int o = 0; o < OUT; o++) sum += dout[(size_t)b * OUT + o] * weight[(size_t)o * IN + i];
    dinp[(size_t)b * IN + i] = sum;
}

// one thread per dweight[o][i]: a sum over the batch
__global__ void matmul_backward_dweight_kernel(float *dweight, const float *dout, const float *inp, int B, int IN,
                                               int OUT) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int o = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= OUT || i >= IN) return;
    float sum = 0.0f;
    for (int b = 0; b < B; b++) sum += dout[(size_t)b * OUT + o] * inp[(size_t)b * IN + i];
    dweight[(size_t)o * IN + i] = sum;
}

// one thread per dbias[o]: the column sum of dout
__global__ void matmul_backward_dbias_kernel(float *dbias, const float *dout, int B, int OUT) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OUT) return;
    float sum = 0.0f;
    for (int b = 0; b < B; b++) sum += dout[(size_t)b * OUT + o];
    dbias[o] = sum;
}

// The fast bias gradient: the same column sum, spread over a (32 x 32) block per 32 columns.
// Thread (x, y) sums rows y, y + 32, ... of column x; then the 32 partial sums of a column
// are added in a fixed tree order in shared memory. Still no atomics, so still bitwise
// reproducible; but 32x the threads in flight, which matters when OUT is 1024 and B is 256
// (the one-thread-per-column kernel above measured 11 us there on an H200).
#define DBIAS_TILE 32
// With param != NULL, the SGD step of the bias is fused in: the thread that writes dbias[o]
// also updates param[o] and mbuf[o] (kernels/sgd.cuh).
// The body, for columns o0 .. o0 + 31 and thread (x, y) of the block; every thread of the block
// calls it (it synchronises the block). kernels/head.cuh calls it too.
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

// ----------------------------------------------------------------------------
// launchers

static inline void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int B, int IN,
                                  int OUT, cudaStream_t stream) {
    dim3 block(32, 8);
    dim3 grid(CEIL_DIV(OUT, 32), CEIL_DIV(B, 8));
    matmul_forward_kernel<<<grid, block, 0, stream>>>(out, inp, weight, bias, B, IN, OUT);
    cudaCheck(cudaGetLastError());
}

// the bias gradient: a column sum of dout (the simple kernel)
static inline void matmul_backward_dbias(float *dbias, const float *dout, int B, int OUT, cudaStream_t stream) {
    matmul_backward_dbias_kernel<<<CEIL_DIV(OUT, 128), 128, 0, stream>>>(dbias, dout, B, OUT);
    cudaCheck(cudaGetLastError());
}

// the fast path's: the tiled kernel, and with param != NULL the bias's SGD step fused in
static inline void matmul_backward_dbias_fast(float *dbias, const float *dout, int B, int OUT, float *param,
                                              float *mbuf, float lr, float mu, float wd, cudaStream_t stream) {
    matmul_backward_dbias_tiled_kernel<<<CEIL_DIV(OUT, DBIAS_TILE), dim3(DBIAS_TILE, DBIAS_TILE), 0, stream>>>(
        dbias, dout, B, OUT, param, mbuf, lr, mu, wd);
    cudaCheck(cudaGetLastError());
}

// dinp may be NULL (the first layer: its input is data, no gradient needed)
static inline void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                   const float *weight, int B, int IN, int OUT, cudaStream_t stream) {
    dim3 block(32, 8);
    if (dinp) {
        matmul_backward_dinp_kernel<<<dim3(CEIL_DIV(IN, 32), CEIL_DIV(B, 8)), block, 0, stream>>>(dinp, dout, weight,
                                                                                                 B, IN, OUT);
        cudaCheck(cudaGetLastError());
    }
    matmul_backward_dweight_kernel<<<dim3(CEIL_DIV(IN, 32), CEIL_DIV(OUT, 8)), block, 0, stream>>>(dweight, dout, inp,
                                                                                                   B, IN, OUT);
    cudaCheck(cudaGetLastError());
    matmul_backward_dbias(dbias, dout, B, OUT, stream);
}

#endif // MLP_MATMUL_CUH
