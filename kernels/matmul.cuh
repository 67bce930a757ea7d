/*
The linear layer: one thread per output element, a plain loop over the shared dimension: the
matmul kernel of the article this project grew from (Lucas de Lima Nogueira, "Why Deep Learning
Models Run Faster on GPUs", Towards Data Science, 2024), in the layout of PyTorch's nn.Linear.
CPU twins: matmul_forward_cpu, matmul_backward_cpu; the fast tier is validated against these.

Shapes: B batch, IN input features, OUT output features. W is (OUT, IN) row-major, like
PyTorch's nn.Linear, so that
    forward   out(B,OUT)      = inp(B,IN) · W(OUT,IN)ᵀ + bias(OUT)
    backward  dinp(B,IN)      = dout(B,OUT) · W(OUT,IN)
              dweight(OUT,IN) = dout(B,OUT)ᵀ · inp(B,IN)
              dbias(OUT)      = Σ_b dout(b, :)           (a column sum)
Threads along x walk the fastest-changing index of what they write (o, i), so neighbouring
threads of a warp read neighbouring addresses of W or inp (coalesced) wherever the loop
allows it. (The article puts the row on x instead: then the 32 threads of a warp write 32
different rows, 32 separate memory transactions where one would do.) Each output is summed
by one thread in a fixed order: no atomics, so the result is the same, bit for bit, on
every run.
*/
#ifndef MLP_MATMUL_CUH
#define MLP_MATMUL_CUH

#include "common.cuh"
#include "trace.cuh"  // train_mlp -T: trace_begin, trace_end around each launch

// one thread per out[b][o]
static __global__ void matmul_forward_kernel(float *out, const float *inp, const float *weight, const float *bias, int B,
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
static __global__ void matmul_backward_dinp_kernel(float *dinp, const float *dout, const float *weight, int B, int IN,
                                            int OUT) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int b = blockIdx.y * blockDim.y + threadIdx.y;
    if (b >= B || i >= IN) return;
    float sum = 0.0f;
    for (int o = 0; o < OUT; o++) sum += dout[(size_t)b * OUT + o] * weight[(size_t)o * IN + i];
    dinp[(size_t)b * IN + i] = sum;
}

// one thread per dweight[o][i]: a sum over the batch
static __global__ void matmul_backward_dweight_kernel(float *dweight, const float *dout, const float *inp, int B, int IN,
                                               int OUT) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int o = blockIdx.y * blockDim.y + threadIdx.y;
    if (o >= OUT || i >= IN) return;
    float sum = 0.0f;
    for (int b = 0; b < B; b++) sum += dout[(size_t)b * OUT + o] * inp[(size_t)b * IN + i];
    dweight[(size_t)o * IN + i] = sum;
}

// one thread per dbias[o]: the column sum of dout
static __global__ void matmul_backward_dbias_kernel(float *dbias, const float *dout, int B, int OUT) {
    int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= OUT) return;
    float sum = 0.0f;
    for (int b = 0; b < B; b++) sum += dout[(size_t)b * OUT + o];
    dbias[o] = sum;
}

// ----------------------------------------------------------------------------
// launchers: blocks of 32 x 8 threads, as many blocks as it takes to cover the output

static inline void matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int B, int IN,
                                  int OUT) {
    dim3 block(32, 8);
    dim3 grid(CEIL_DIV(OUT, 32), CEIL_DIV(B, 8));
    trace_begin();
    matmul_forward_kernel<<<grid, block>>>(out, inp, weight, bias, B, IN, OUT);
    cudaCheck(cudaGetLastError());
    trace_end(TK_MATMUL_FORWARD, grid, block, B, IN, OUT);
}

// dinp may be NULL (the first layer: its input is data, no gradient needed)
static inline void matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout, const float *inp,
                                   const float *weight, int B, int IN, int OUT) {
    dim3 block(32, 8);
    if (dinp) {
        dim3 grid(CEIL_DIV(IN, 32), CEIL_DIV(B, 8));
        trace_begin();
        matmul_backward_dinp_kernel<<<grid, block>>>(dinp, dout, weight, B, IN, OUT);
        cudaCheck(cudaGetLastError());
        trace_end(TK_MATMUL_DINP, grid, block, B, IN, OUT);
    }
    dim3 grid(CEIL_DIV(IN, 32), CEIL_DIV(OUT, 8));
    trace_begin();
    matmul_backward_dweight_kernel<<<grid, block>>>(dweight, dout, inp, B, IN, OUT);
    cudaCheck(cudaGetLastError());
    trace_end(TK_MATMUL_DWEIGHT, grid, block, B, IN, OUT);
    trace_begin();
    matmul_backward_dbias_kernel<<<CEIL_DIV(OUT, 128), 128>>>(dbias, dout, B, OUT);
    cudaCheck(cudaGetLastError());
    trace_end(TK_MATMUL_DBIAS, dim3(CEIL_DIV(OUT, 128)), dim3(128), B, IN, OUT);
}

#endif // MLP_MATMUL_CUH
