/*
dev/persistent/persistent.cuh: a whole run of training steps in ONE kernel launch (an experiment:
README.md beside this file says how it fared against the fast trainer's CUDA graphs).

For a small model (784,128,10 at batch 64) a step is a few tens of MFLOP: at the GPU's speed that
is microseconds of arithmetic, while a dozen kernel launches cost more, even replayed from a CUDA
graph (each kernel's launch, and the drain of the one before it). So here one cooperative kernel,
one block per multiprocessor, stays resident and walks through the step's phases itself, with a
grid-wide barrier (grid.sync()) where a phase needs everything the previous one wrote:

    per step, for bs rows (the epoch's last step may be smaller):
      forward, l = 0..L-1     acts[l+1] = act(acts[l] · W_lᵀ + b_l)           | barrier each
                              (long, narrow products in two phases: split-K partial sums,
                              then their fixed-order sum with the bias and activation)
      loss                    losses, dlogits = (softmax - onehot) / bs         | barrier
      backward, l = L-1..0    dacts[l] = (dout · W_l) ⊙ act'(acts[l])  (l > 0)
                              dW_l = doutᵀ · acts[l],  db_l = Σ_b dout          | barrier each
      update                  SGD over the flat buffer; the mean loss; and the
                              NEXT step's batch gathered from the uint8 data    | barrier

Within a phase the work is a list of jobs (32x32 output tiles of each product, 32-column
strips of each bias gradient) dealt out to the blocks round-robin. Each output is summed by
one thread in a fixed order, so, like every other path, it is bitwise reproducible. The
math is exactly the simple kernels' (kernels/matmul.cuh, activation.cuh, softmax_xent.cuh,
sgd.cuh); persistent_check.cu checks it against the CPU reference. FP32 only.

Shapes as everywhere: B batch, IN/OUT a layer's features, W is (OUT, IN) row-major.
*/
#ifndef MLP_PERSISTENT_CUH
#define MLP_PERSISTENT_CUH

#include <cooperative_groups.h>

#include "../../common/mlp.h"                // MAX_LAYERS, ACT_NONE
#include "../../common/utils.h"              // die
#include "../../kernels/activation.cuh"      // activation_apply, activation_grad_from_output
#include "../../kernels/common.cuh"          // cudaCheck
#include "../../kernels/fast/gather_fast.cuh"  // pixel_value
#include "../../kernels/sgd.cuh"             // sgd_one
#include "../../kernels/softmax_xent.cuh"    // softmax_xent_row

namespace cg = cooperative_groups;

#define PT 32          // output tiles are PT x PT
#define PK 32          // the K dimension is walked PK at a time through shared memory
#define PTHREADS 256   // threads per block: 32 columns x 8 row groups, 4 outputs per thread

// Everything the kernel needs, passed by value (a few hundred bytes of kernel parameters).
typedef struct {
    int L, sizes[MAX_LAYERS + 1], act;
    int B, last_bs, steps_per_epoch;  // full batch, the epoch's last batch, steps in an epoch
    int first_step, nsteps;           // this launch runs steps first_step .. first_step + nsteps - 1
    size_t num_params, w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    float *params, *grads, *mbuf;
    float *acts[MAX_LAYERS + 1], *dacts[MAX_LAYERS + 1];
    float *losses, *step_losses;
    float *scratch;                   // MAX_SPLITS x B x (widest layer) partial sums of split forwards
    int *labels, *step;
    const uint8_t *images, *all_labels;
    const int *perm;
    int D;
    float lr, momentum, weight_decay;
} PersistentArgs;

// A strided matrix view: element (r, c) is p[r * rs + c * cs]
typedef struct {
    const float *p;
    int rs, cs;
} View;

// One PT x PT tile of C = A · B, with A(m, k) and B(k, n) read through views, rows m0..,
// columns n0.., over k in [k0, k1). acc[i] gets C(m0 + ty + 8i, n0 + tx). Out-of-range
// elements read as 0. Each thread loads 4 elements of each operand tile per K slice, walking
// the operand's contiguous index across neighbouring threads (coalesced) whichever layout it
// has, and loads the next slice into registers while the current one is multiplied from
// shared memory, so a slice's load latency hides behind the previous slice's arithmetic.
__device__ void tile_matmul(float acc[4], View A, View B, int M, int N, int k0, int k1, int m0, int n0,
                            float (*As)[PT + 1], float (*Bs)[PT + 1]) {
    int tid = threadIdx.x, tx = tid % 32, ty = tid / 32;
    int am[4], ak[4], bn[4], bk[4];
    for (int j = 0; j < 4; j++) {
        int e = tid + PTHREADS * j, fast = e % 32, slow = e / 32;
        am[j] = A.cs == 1 ? slow : fast;  // A: walk k across threads if A is k-contiguous, else m
        ak[j] = A.cs == 1 ? fast : slow;
        bn[j] = B.cs == 1 ? fast : slow;  // B: walk n across threads if B is n-contiguous, else k
        bk[j] = B.cs == 1 ? slow : fast;
    }
    float ra[4], rb[4];
    auto load = [&](int kk) {
        for (int j = 0; j < 4; j++) {
            int gm = m0 + am[j], gk = kk + ak[j];
            ra[j] = (gm < M && gk < k1) ? A.p[(size_t)gm * A.rs + (size_t)gk * A.cs] : 0.0f;
            int gn = n0 + bn[j], gk2 = kk + bk[j];
            rb[j] = (gn < N && gk2 < k1) ? B.p[(size_t)gk2 * B.rs + (size_t)gn * B.cs] : 0.0f;
        }
    };
    for (int i = 0; i < 4; i++) acc[i] = 0.0f;
    load(k0);
    for (int kk = k0; kk < k1; kk += PK) {
        for (int j = 0; j < 4; j++) {
            As[ak[j]][am[j]] = ra[j];
            Bs[bk[j]][bn[j]] = rb[j];
        }
        __syncthreads();
        if (kk + PK < k1) load(kk + PK);  // in flight during the multiply below
#pragma unroll 8
        for (int k = 0; k < PK; k++) {
            float b = Bs[k][tx];
            for (int i = 0; i < 4; i++) acc[i] += As[k][ty + 8 * i] * b;
        }
        __syncthreads();
    }
}

static __device__ int tiles(int M, int N) { return ((M + PT - 1) / PT) * ((N + PT - 1) / PT); }

// Split-K for the forward products: a layer with few output tiles and a long K (784 -> 128
// at batch 64: 8 tiles, K = 784) would leave most blocks idle while 8 of them walk 25 K
// slices one after another. So K is cut into `splits` chunks of at least PK*4, each chunk a
// job of its own writing a partial tile to scratch, and a second phase adds the partials in
// the order 0, 1, .., splits-1 (bitwise reproducible), then the bias and the activation.
// The split depends on the shapes only, not on the GPU, so results match across GPUs too.
#define MAX_SPLITS 8
static __host__ __device__ int forward_splits(int bs, int OUT, int IN) {
    int t = ((bs + PT - 1) / PT) * ((OUT + PT - 1) / PT);
    if (t >= 32) return 1;
    int s = (IN + 4 * PK - 1) / (4 * PK);
    return s < 1 ? 1 : (s > MAX_SPLITS ? MAX_SPLITS : s);
}

// out(M=bs, N=OUT) = act(inp · Wᵀ + b), or with splits > 1 its partial sums: job t
__device__ void forward_job(const PersistentArgs &a, int l, int bs, int t, int splits, float (*As)[PT + 1],
                            float (*Bs)[PT + 1]) {
    int IN = a.sizes[l], OUT = a.sizes[l + 1];
    int tn = (OUT + PT - 1) / PT, ntiles = tiles(bs, OUT);
    int split = t / ntiles, tile = t % ntiles, m0 = (tile / tn) * PT, n0 = (tile % tn) * PT;
    int chunk = ((IN + splits - 1) / splits + PK - 1) / PK * PK;
    int k0 = split * chunk, k1 = min(IN, k0 + chunk);
    View A = {a.acts[l], IN, 1};               // inp(m, k)
    View Bv = {a.params + a.w_off[l], 1, IN};  // B(k, n) = W[n][k]
    float acc[4];
    tile_matmul(acc, A, Bv, bs, OUT, k0, k1, m0, n0, As, Bs);
    int act = l < a.L - 1 ? a.act : ACT_NONE, n = n0 + threadIdx.x % 32;
    const float *bias = a.params + a.b_off[l];
    for (int i = 0; i < 4; i++) {
        int m = m0 + threadIdx.x / 32 + 8 * i;
        if (m >= bs || n >= OUT) continue;
        size_t idx = (size_t)m * OUT + n;
        if (splits == 1) a.acts[l + 1][idx] = activation_apply(acc[i] + bias[n], act);
        else a.scratch[(size_t)split * bs * OUT + idx] = acc[i];
    }
}

// the second phase of a split forward: out = act(Σ_s partial_s + b), a thread per element
__device__ void forward_reduce(const PersistentArgs &a, int l, int bs, int splits) {
    int OUT = a.sizes[l + 1], act = l < a.L - 1 ? a.act : ACT_NONE;
    size_t n = (size_t)bs * OUT, stride = (size_t)gridDim.x * blockDim.x;
    const float *bias = a.params + a.b_off[l];
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        float sum = 0.0f;
        for (int s = 0; s < splits; s++) sum += a.scratch[s * n + i];
        a.acts[l + 1][i] = activation_apply(sum + bias[i % OUT], act);
    }
}

// Backward of layer l, job t: first the dinp tiles (l > 0), then the dweight tiles, then the
// dbias strips of 32 columns.
__device__ void backward_job(const PersistentArgs &a, int l, int bs, int t, float (*As)[PT + 1], float (*Bs)[PT + 1]) {
    int IN = a.sizes[l], OUT = a.sizes[l + 1];
    const float *dout = a.dacts[l + 1], *W = a.params + a.w_off[l];
    int n_dinp = l > 0 ? tiles(bs, IN) : 0, n_dw = tiles(OUT, IN);
    int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
    float acc[4];
    if (t < n_dinp) {  // dinp(bs, IN) = (dout · W) ⊙ act'(acts[l])
        int tn = (IN + PT - 1) / PT, m0 = (t / tn) * PT, n0 = (t % tn) * PT;
        View A = {dout, OUT, 1}, Bv = {W, IN, 1};
        tile_matmul(acc, A, Bv, bs, IN, 0, OUT, m0, n0, As, Bs);
        for (int i = 0; i < 4; i++) {
            int m = m0 + ty + 8 * i, n = n0 + tx;
            if (m < bs && n < IN) {
                size_t idx = (size_t)m * IN + n;
                a.dacts[l][idx] = acc[i] * activation_grad_from_output(a.acts[l][idx], a.act);
            }
        }
        return;
    }
    t -= n_dinp;
    if (t < n_dw) {  // dweight(OUT, IN) = doutᵀ · acts[l]
        int tn = (IN + PT - 1) / PT, m0 = (t / tn) * PT, n0 = (t % tn) * PT;
        View A = {dout, 1, OUT}, Bv = {a.acts[l], IN, 1};  // A(m=o, k=b) = dout[b][o]
        tile_matmul(acc, A, Bv, OUT, IN, 0, bs, m0, n0, As, Bs);
        float *dW = a.grads + a.w_off[l];
        for (int i = 0; i < 4; i++) {
            int m = m0 + ty + 8 * i, n = n0 + tx;
            if (m < OUT && n < IN) dW[(size_t)m * IN + n] = acc[i];
        }
        return;
    }
    t -= n_dw;  // dbias, columns 32t .. 32t+31: 8 row groups, then a fixed-order sum in shared memory
    int o = t * 32 + tx;
    float sum = 0.0f;
    if (o < OUT)
        for (int b = ty; b < bs; b += 8) sum += dout[(size_t)b * OUT + o];
    As[ty][tx] = sum;
    __syncthreads();
    for (int stride = 4; stride > 0; stride /= 2) {
        if (ty < stride) As[ty][tx] += As[ty + stride][tx];
        __syncthreads();
    }
    if (ty == 0 && o < OUT) a.grads[a.b_off[l] + o] = As[0][tx];
    __syncthreads();  // As is reused by the block's next job
}

// rows start.. of the permutation -> acts[0], labels; grid-stride over the whole grid
__device__ void gather_phase(const PersistentArgs &a, int step, int bs) {
    size_t n = (size_t)bs * a.D, stride = (size_t)gridDim.x * blockDim.x;
    const int *rows = a.perm + (size_t)step * a.B;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
        int b = (int)(i / a.D), k = (int)(i % a.D);
        a.acts[0][i] = pixel_value(a.images[(size_t)rows[b] * a.D + k], 0);  // (kernels/fast/gather_fast.cuh)
        if (k == 0) a.labels[b] = a.all_labels[rows[b]];
    }
}

static __device__ int step_rows(const PersistentArgs &a, int step) {
    return step == a.steps_per_epoch - 1 ? a.last_bs : a.B;
}

__global__ void __launch_bounds__(PTHREADS) train_steps_persistent_kernel(PersistentArgs a) {
    cg::grid_group grid = cg::this_grid();
    __shared__ float As[PK][PT + 1], Bs[PK][PT + 1];
    __shared__ double sums[PTHREADS];
    int L = a.L, C = a.sizes[L];
    gather_phase(a, a.first_step, step_rows(a, a.first_step));
    grid.sync();
    for (int s = 0; s < a.nsteps; s++) {
        int step = a.first_step + s, bs = step_rows(a, step);
        for (int l = 0; l < L; l++) {
            int splits = forward_splits(bs, a.sizes[l + 1], a.sizes[l]);
            int jobs = tiles(bs, a.sizes[l + 1]) * splits;
            for (int t = blockIdx.x; t < jobs; t += gridDim.x) forward_job(a, l, bs, t, splits, As, Bs);
            grid.sync();
            if (splits > 1) {
                forward_reduce(a, l, bs, splits);
                grid.sync();
            }
        }
        // softmax + cross-entropy, a thread per row
        for (int b = blockIdx.x * blockDim.x + threadIdx.x; b < bs; b += gridDim.x * blockDim.x)
            a.losses[b] = softmax_xent_row(a.dacts[L] + (size_t)b * C, a.acts[L] + (size_t)b * C, a.labels[b], C, bs);
        grid.sync();
        for (int l = L - 1; l >= 0; l--) {
            int IN = a.sizes[l], OUT = a.sizes[l + 1];
            int jobs = (l > 0 ? tiles(bs, IN) : 0) + tiles(OUT, IN) + (OUT + 31) / 32;
            for (int t = blockIdx.x; t < jobs; t += gridDim.x) backward_job(a, l, bs, t, As, Bs);
            grid.sync();
        }
        // the update, the step's mean loss (block 0, fixed order), the next step's batch
        size_t stride = (size_t)gridDim.x * blockDim.x;
        for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < a.num_params; i += stride)
            sgd_one(a.params[i], a.grads[i], a.mbuf[i], a.lr, a.momentum, a.weight_decay);
        if (blockIdx.x == 0) {
            double part = 0.0;
            for (int b = threadIdx.x; b < bs; b += blockDim.x) part += a.losses[b];
            sums[threadIdx.x] = part;
            __syncthreads();
            for (int w = blockDim.x / 2; w > 0; w /= 2) {
                if (threadIdx.x < w) sums[threadIdx.x] += sums[threadIdx.x + w];
                __syncthreads();
            }
            if (threadIdx.x == 0) {
                a.step_losses[step] = (float)(sums[0] / bs);
                *a.step = step + 1;  // the step counter the fast trainer's graphs keep, kept here too
            }
        }
        if (s + 1 < a.nsteps) gather_phase(a, step + 1, step_rows(a, step + 1));
        grid.sync();
    }
}

// How many blocks of the persistent kernel fit on the GPU at once: a cooperative launch
// needs every block resident. One per multiprocessor is enough work for a small model.
static inline int persistent_grid_size(void) {
    int device, sms, per_sm;
    cudaCheck(cudaGetDevice(&device));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, train_steps_persistent_kernel, PTHREADS, 0));
    if (per_sm < 1) die("", "the persistent kernel does not fit on this GPU");
    return sms;
}

// steps args->first_step .. + nsteps - 1, in one cooperative launch of `grid` blocks
static inline void train_steps_persistent(const PersistentArgs *args, int grid, cudaStream_t stream) {
    void *params[] = {(void *)args};
    cudaCheck(cudaLaunchCooperativeKernel((void *)train_steps_persistent_kernel, grid, PTHREADS, params, 0, stream));
    cudaCheck(cudaGetLastError());
}

#endif // MLP_PERSISTENT_CUH
