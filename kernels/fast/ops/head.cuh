/*
kernels/fast/ops/head.cuh: the classifier head of a training step in one kernel.
CPU twins: matmul_forward_cpu, softmax_xent_forward_backward_cpu, matmul_backward_cpu's dinp and
the activation's _backward_cpu, one after the other (train_mlp_cpu.c); test_mlp compares the
logits, the loss and every gradient after each step.

    h (B, IN) the last hidden layer's output, W (C, IN), b (C), labels (B), act of the layer below
    logits  z_b     = W · h_b + b                                            (B, C)
    loss_b          = logsumexp(z_b) - z_b[label_b]                           (B) per row
    dlogits dz_b    = (softmax(z_b) - onehot(label_b)) / norm                (B, C)
    dh      dh_b    = (Wᵀ · dz_b) ⊙ act'(h_b)                                 (B, IN)
norm is the batch the loss is the mean over: B on one GPU; under train_mlp_fast -g the global batch,
of which these B rows are one GPU's share (the all-reduce of the gradients then sums the shares).

Without it those are three kernels in a row on the step's critical path (the last layer's
forward matmul, the softmax, the last layer's dinp matmul), each with its launch gap, for very
little arithmetic: the last layer has only C outputs (10 classes). Here a block takes HEAD_ROWS
rows from start to end:
  1. its threads split IN, each keeps partial logits for every row and class (a W element is
     loaded once and used for all the block's rows), a butterfly of shuffles adds them up in each
     warp, and one thread per logit adds the warps' sums in order, plus the bias;
  2. one thread per row computes the loss and dlogits with softmax_xent_row (softmax_xent.cuh),
     the function every softmax path here uses;
  3. each thread the dh of every row at its k of step 1, W's values there loaded once for them.
Every sum runs in a fixed order: the results are the same bits on every run. (Not a warp a row
walking its k alone: each warp would wait for one round of loads after another.) At a batch whose
row pairs fill every SM with blocks of 8 warps, head_warp_kernel below does exactly that, a warp two
rows, and is faster: there are warps enough to hide those rounds.

The mean loss over the batch, and moving the device step counter on (softmax_xent.cuh), need all
rows: head_batch_sums_kernel does them after this kernel, with the last layer's bias gradient,
on the bias stream (train_mlp_fast.cu model_backward_update). The last layer's weight gradient stays
a matmul, on the side stream.
Limits: C <= HEAD_MAX_C (the trainer falls back to the three kernels above it). Any B and IN; IN
a multiple of 4 with 16-byte aligned rows takes float4s, others floats.
*/
#ifndef MLP_FAST_HEAD_CUH
#define MLP_FAST_HEAD_CUH

#include <cuda_bf16.h>
#include <stdint.h>
#include "../../activation.cuh"    // activation_grad_from_output
#include "../../common.cuh"        // cudaCheck
#include "../../softmax_xent.cuh"  // softmax_xent_row, block_sum_fixed_order, LOSS_THREADS
#include "dbias.cuh"               // dbias_tile, DBIAS_TILE
#include "float4.cuh"              // activation_grad_times4
#include "pdl.cuh"                 // pdl_wait, launch_pdl
#include "round.cuh"               // mf_bf16_bits, round_tf32, mf_round_tf32

#define HEAD_MAX_C 32     // classes the fused head takes (each thread keeps HEAD_ROWS x MAXC partial sums)
#define HEAD_ROWS 2       // rows per block: B = 256 gives 128 blocks, about one per SM
#define HEAD_THREADS 256  // 8 warps split each row's IN between them

// d · w + s, a float4 of fmaf (the heads' dh sums: here and fused_deep.cuh's fd_head_job)
__device__ __forceinline__ float4 head_fma4(float d, float4 w, float4 s) {
    return make_float4(fmaf(d, w.x, s.x), fmaf(d, w.y, s.y), fmaf(d, w.z, s.z), fmaf(d, w.w, s.w));
}

// dh at o (row b, column k: b IN + k): the class sum s (a float4 at k, or s.x alone: vec 0) times the
// activation's gradient at h[o], stored, and again as BF16 and TF32 where those copies are asked for
__device__ __forceinline__ void head_dh_store(float4 s, size_t o, const float *h, float *dh, unsigned short *dh_bf16,
                                              float *dh_tf32, int act, int vec) {
    if (vec) {
        s = activation_grad_times4(s, *reinterpret_cast<const float4 *>(h + o), act);
        *reinterpret_cast<float4 *>(dh + o) = s;
        if (dh_bf16)
            *reinterpret_cast<uint2 *>(dh_bf16 + o) = make_uint2(mf_bf16x2_bits(s.x, s.y), mf_bf16x2_bits(s.z, s.w));
        if (dh_tf32) *reinterpret_cast<float4 *>(dh_tf32 + o) = mf_round_tf32(s);
    } else {
        const float v = s.x * activation_grad_from_output(h[o], act);
        dh[o] = v;
        if (dh_bf16) dh_bf16[o] = mf_bf16_bits(v);
        if (dh_tf32) dh_tf32[o] = round_tf32(v);
    }
}

// Step 1 of both head kernels, in three parts. head_logits_add: acc[r][c] += this thread's share of row
// b0 + r's logit c over columns k0, k0 + step, ... below kend (float4s where vec, else floats; h's
// rows ldh apart, W's ldw apart: W itself, or a chunk of it in shared memory); rows from `rows` on,
// past B, are not used: zeros, or with REREAD row b0 again, whichever gives the kernel fewer
// registers. Each W element is loaded once for all R rows. head_logits_sum then adds them up across
// the warp by a butterfly of shuffles, so that every lane holds the warp's sums.
template <int MAXC, int R>
__device__ __forceinline__ void head_logits_zero(float (&acc)[R][MAXC]) {
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < MAXC; c++) acc[r][c] = 0.0f;
}

template <int MAXC, int R, bool REREAD>
__device__ __forceinline__ void head_logits_add(float (&acc)[R][MAXC], const float *h, size_t ldh, const float *W,
                                                int ldw, int b0, int rows, int C, int k0, int kend, int step, int vec) {
    for (int k = k0; k < kend; k += step) {
        float4 x[R];
#pragma unroll
        for (int r = 0; r < R; r++) {
            const float *hr = h + (size_t)(b0 + (!REREAD || r < rows ? r : 0)) * ldh + k;
            x[r] = !REREAD && r >= rows ? make_float4(0.f, 0.f, 0.f, 0.f)
                 : vec ? *reinterpret_cast<const float4 *>(hr) : make_float4(hr[0], 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int c = 0; c < MAXC; c++) {
            if (c < C) {
                const float *wc = W + (size_t)c * ldw + k;
                const float4 w = vec ? *reinterpret_cast<const float4 *>(wc) : make_float4(wc[0], 0.f, 0.f, 0.f);
#pragma unroll
                for (int r = 0; r < R; r++) {
                    acc[r][c] = fmaf(x[r].x, w.x, acc[r][c]);
                    acc[r][c] = fmaf(x[r].y, w.y, acc[r][c]);
                    acc[r][c] = fmaf(x[r].z, w.z, acc[r][c]);
                    acc[r][c] = fmaf(x[r].w, w.w, acc[r][c]);
                }
            }
        }
    }
}

template <int MAXC, int R>
__device__ __forceinline__ void head_logits_sum(float (&acc)[R][MAXC], int C) {
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < MAXC; c++)
            if (c < C) {
#pragma unroll
                for (int off = 16; off > 0; off /= 2) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], off);
            }
}

// Rows b0 .. b0 + HEAD_ROWS - 1 (those below B) of the head, by a block of HEAD_THREADS threads, all of
// which call it. MAXC >= C (16 or 32) sizes the register arrays; vec: float4 loads (IN % 4 == 0,
// aligned rows). head_kernel runs one group of rows a block (the fused steps have heads of their own:
// fused_step.cuh, fused_deep.cuh's fd_head_job).
// dh_bf16: NULL, or (B, IN) where dh is stored again, rounded to BF16 (-x 2's copy of the operand the
// next products read: kernels/fast/matmul/mma_bf16.cuh); dh_tf32 likewise, rounded to TF32 (-x 1's for the
// K-major kernel: train_mlp_fast.cu, model_tf32k).
template <int MAXC>
__device__ __forceinline__ void head_rows(int b0, float *logits, float *dlogits, float *dh, float *losses,
                                          const float *h, const float *W, const float *bias, const int *labels,
                                          int B, int IN, int C, int act, int vec, int norm,
                                          unsigned short *dh_bf16 = nullptr, float *dh_tf32 = nullptr) {
    __shared__ float part[HEAD_THREADS / 32][HEAD_ROWS][MAXC];   // each warp's partial logits
    __shared__ float z[HEAD_ROWS][MAXC], dz[HEAD_ROWS][MAXC];    // the rows' logits and their gradients
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int rows = B - b0 < HEAD_ROWS ? B - b0 : HEAD_ROWS;

    // 1. partial logits: the thread's k (float4s, or floats, HEAD_THREADS apart) for each row and
    //    class, every W element loaded once per block and used for all its rows, added up across each
    //    warp (head_logits_add, head_logits_sum), then across the warps in order
    float acc[HEAD_ROWS][MAXC];
    const int step = vec ? 4 * HEAD_THREADS : HEAD_THREADS;
    head_logits_zero(acc);
    head_logits_add<MAXC, HEAD_ROWS, false>(acc, h, IN, W, IN, b0, rows, C, vec ? 4 * tid : tid, IN, step, vec);
    head_logits_sum(acc, C);
#pragma unroll
    for (int r = 0; r < HEAD_ROWS; r++)
#pragma unroll
        for (int c = 0; c < MAXC; c++)
            if (c < C && lane == 0) part[warp][r][c] = acc[r][c];
    __syncthreads();
    if (tid < HEAD_ROWS * MAXC) {
        const int r = tid / MAXC, c = tid % MAXC;
        if (r < rows && c < C) {
            float s = bias[c];
            for (int w = 0; w < HEAD_THREADS / 32; w++) s += part[w][r][c];
            z[r][c] = s;
            logits[(size_t)(b0 + r) * C + c] = s;
        }
    }
    __syncthreads();

    // 2. the loss and dlogits of each row, by the function every softmax path shares (softmax_xent.cuh)
    if (tid < rows) losses[b0 + tid] = softmax_xent_row(dz[tid], z[tid], labels[b0 + tid], C, norm);
    __syncthreads();
    if (tid < HEAD_ROWS * MAXC) {
        const int r = tid / MAXC, c = tid % MAXC;
        if (r < rows && c < C) dlogits[(size_t)(b0 + r) * C + c] = dz[r][c];
    }
    if (dh == NULL) return;  // a one-layer model: h is the data, it needs no gradient

    // 3. dh_b[k] = Σ_c dz[c] · W[c][k] · act'(h_b[k]), at the thread's k of step 1 (float4s, or floats):
    //    W's values there loaded once for all the block's rows, as in step 1 (where each thread took a
    //    float4 of one row, it read W's column anew for each row, one round trip to L2 after another)
    for (int k = vec ? 4 * tid : tid; k < IN; k += step) {
        float4 w[MAXC];
#pragma unroll
        for (int c = 0; c < MAXC; c++) {
            const float *wc = W + (size_t)c * IN + k;
            w[c] = c >= C ? make_float4(0.f, 0.f, 0.f, 0.f)
                 : vec ? *reinterpret_cast<const float4 *>(wc) : make_float4(wc[0], 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int r = 0; r < HEAD_ROWS; r++) {
            if (r >= rows) break;
            float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
            for (int c = 0; c < MAXC; c++) {
                if (c < C) s = head_fma4(dz[r][c], w[c], s);
            }
            head_dh_store(s, (size_t)(b0 + r) * IN + k, h, dh, dh_bf16, dh_tf32, act, vec);
        }
    }
}

template <int MAXC>
__global__ void __launch_bounds__(HEAD_THREADS)
    head_kernel(float *logits, float *dlogits, float *dh, float *losses, const float *h, const float *W,
                const float *bias, const int *labels, int B, int IN, int C, int act, int vec, int norm,
                unsigned short *dh_bf16, float *dh_tf32) {
    pdl_wait();  // launched with PDL: h is the previous kernel's output (pdl.cuh)
    head_rows<MAXC>(blockIdx.x * HEAD_ROWS, logits, dlogits, dh, losses, h, W, bias, labels, B, IN, C, act, vec, norm,
                    dh_bf16, dh_tf32);
}

// The same head for large batches: a warp takes HEAD_WARP_ROWS rows from start to end, its lanes
// splitting IN. head_rows' blocks split IN between 8 warps and meet at three barriers a row pair; at a
// batch of thousands of rows, two such blocks an SM (their registers) spent the kernel waiting on
// memory (doc/fast.md has the times). Every warp reads all of W twice (the logits, then dh): the block
// stages W in shared memory 512 columns at a time (256 above 16 classes: HeadChunk) for its 8 warps,
// between two barriers a chunk, so that W comes from L2 once a block, not once a warp (the rows
// streaming through L1 evict it there). The chunks are multiples of a warp's round (128 floats), so
// each lane walks its k in the same order as without them. Each sum runs in a fixed order (the lane's
// k in turn, then a butterfly of shuffles, then the bias): the same bits on every run. The step plan
// takes it where its blocks fill every SM (head_warp_fits).
#define HEAD_WARP_ROWS 2
template <int MAXC>
struct HeadChunk { static constexpr int KC = MAXC <= 16 ? 512 : 256; };   // (32 KB of W either way)

// W's columns [k0, k0 + kc) of each class into ws (class c at c KC), by the block's threads
template <int KC>
__device__ __forceinline__ void head_stage_w(float *ws, const float *W, int IN, int C, int k0, int kc, int vec) {
    if (vec)
        for (int i = threadIdx.x; i < C * kc / 4; i += HEAD_THREADS) {
            const int c = i / (kc / 4), k = 4 * (i % (kc / 4));
            *reinterpret_cast<float4 *>(ws + c * KC + k) =
                *reinterpret_cast<const float4 *>(W + (size_t)c * IN + k0 + k);
        }
    else
        for (int i = threadIdx.x; i < C * kc; i += HEAD_THREADS)
            ws[(i / kc) * KC + i % kc] = W[(size_t)(i / kc) * IN + k0 + i % kc];
}

template <int MAXC>
__global__ void __launch_bounds__(HEAD_THREADS)
    head_warp_kernel(float *logits, float *dlogits, float *dh, float *losses, const float *h, const float *W,
                     const float *bias, const int *labels, int B, int IN, int C, int act, int vec, int norm,
                     unsigned short *dh_bf16, float *dh_tf32) {
    constexpr int R = HEAD_WARP_ROWS, WARPS = HEAD_THREADS / 32, KC = HeadChunk<MAXC>::KC;
    __shared__ float zs[WARPS][R][MAXC], dzs[WARPS][R][MAXC];   // each warp's logits and their gradients
    __shared__ __align__(16) float ws[MAXC * KC];               // a chunk of W (head_stage_w)
    pdl_wait();  // launched with PDL: h is the previous kernel's output (pdl.cuh)
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int b0 = (blockIdx.x * WARPS + warp) * R;
    // (a warp past B has no rows, but stages W with the others: the barriers take the whole block)
    const int rows = b0 >= B ? 0 : B - b0 < R ? B - b0 : R;
    const int step = vec ? 128 : 32, kl = vec ? 4 * lane : lane;

    // 1. the logits: the lane's k (float4s, or floats, 32 apart) for each row and class, W from the
    //    staged chunk (head_logits_add), added up across the warp (head_logits_sum), plus the bias
    float acc[R][MAXC];
    head_logits_zero(acc);
    for (int k0 = 0; k0 < IN; k0 += KC) {
        const int kc = IN - k0 < KC ? IN - k0 : KC;
        __syncthreads();   // (every warp done with the last chunk)
        head_stage_w<KC>(ws, W, IN, C, k0, kc, vec);
        __syncthreads();
        if (rows > 0) head_logits_add<MAXC, R, true>(acc, h + k0, IN, ws, KC, b0, rows, C, kl, kc, step, vec);
    }
    head_logits_sum(acc, C);
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int c = 0; c < MAXC; c++)
            if (c < C && lane == 0) zs[warp][r][c] = acc[r][c] + bias[c];
    __syncwarp();

    // 2. the loss and dlogits of each row (softmax_xent_row, as every softmax path), a lane a row; the
    //    rows' logits and dlogits stored by the warp, contiguous
    if (lane < rows) losses[b0 + lane] = softmax_xent_row(dzs[warp][lane], zs[warp][lane], labels[b0 + lane], C, norm);
    __syncwarp();
    for (int i = lane; i < rows * C; i += 32) {
        logits[(size_t)b0 * C + i] = zs[warp][i / C][i % C];
        dlogits[(size_t)b0 * C + i] = dzs[warp][i / C][i % C];
    }
    if (dh == NULL) return;  // a one-layer model: h is the data, it needs no gradient (the whole block)

    // 3. dh_b[k] = Σ_c dz[c] · W[c][k] · act'(h_b[k]) at the lane's k of step 1, W from the staged chunk
    for (int k0 = 0; k0 < IN; k0 += KC) {
        const int kc = IN - k0 < KC ? IN - k0 : KC;
        __syncthreads();
        head_stage_w<KC>(ws, W, IN, C, k0, kc, vec);
        __syncthreads();
        if (rows == 0) continue;
        for (int k = kl; k < kc; k += step) {
            float4 sum[R];
#pragma unroll
            for (int r = 0; r < R; r++) sum[r] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
            for (int c = 0; c < C; c++) {
                const float4 w = vec ? *reinterpret_cast<const float4 *>(ws + c * KC + k)
                                     : make_float4(ws[c * KC + k], 0.f, 0.f, 0.f);
#pragma unroll
                for (int r = 0; r < R; r++) sum[r] = head_fma4(dzs[warp][r][c], w, sum[r]);
            }
#pragma unroll
            for (int r = 0; r < R; r++)
                if (r < rows) head_dh_store(sum[r], (size_t)(b0 + r) * IN + k0 + k, h, dh, dh_bf16, dh_tf32, act, vec);
        }
    }
}

static inline bool head_fits(int C) { return C >= 1 && C <= HEAD_MAX_C; }

// whether a step at B rows takes head_warp_kernel on a GPU of sms SMs: where its blocks (HEAD_THREADS /
// 32 x HEAD_WARP_ROWS rows each) are at least one an SM. Below that the row pairs of head_kernel,
// each split over a whole block, finish sooner.
static inline bool head_warp_fits(int B, int sms) {
    return (B + HEAD_THREADS / 32 * HEAD_WARP_ROWS - 1) / (HEAD_THREADS / 32 * HEAD_WARP_ROWS) >= sms;
}

// logits, dlogits (B, C), losses (B); dh (B, IN) or NULL; see the top of the file. Launched with
// PDL: enqueue it right after the kernel that writes h (or with nothing recorded in between).
// norm: the batch of the mean (0: B). dh_bf16, dh_tf32: NULL, or where dh is stored again as BF16, as
// TF32 values (head_rows). by_warps: head_warp_kernel (the step plan's choice, head_warp_fits), else
// head_kernel.
static inline void head_forward_backward(float *logits, float *dlogits, float *dh, float *losses, const float *h,
                                         const float *W, const float *bias, const int *labels, int B, int IN, int C,
                                         int act, cudaStream_t stream, int norm = 0, __nv_bfloat16 *dh_bf16 = NULL,
                                         float *dh_tf32 = NULL, int by_warps = 0) {
    if (!head_fits(C)) {
        fprintf(stderr, "head_forward_backward: %d classes, more than the %d it takes\n", C, HEAD_MAX_C);
        exit(EXIT_FAILURE);
    }
    if (B <= 0) return;
    const int vec = IN % 4 == 0 && ((uintptr_t)h & 15) == 0 && ((uintptr_t)W & 15) == 0 &&
                    (dh == NULL || ((uintptr_t)dh & 15) == 0) && ((uintptr_t)dh_bf16 & 7) == 0 &&
                    ((uintptr_t)dh_tf32 & 15) == 0;
    unsigned short *dhb = reinterpret_cast<unsigned short *>(dh_bf16);
    const dim3 grid(CEIL_DIV(B, by_warps ? HEAD_THREADS / 32 * HEAD_WARP_ROWS : HEAD_ROWS)), block(HEAD_THREADS);
    if (norm <= 0) norm = B;
    auto kernel = by_warps ? (C <= 16 ? head_warp_kernel<16> : head_warp_kernel<32>)
                           : (C <= 16 ? head_kernel<16> : head_kernel<32>);
    launch_pdl(kernel, grid, block, 0, stream, logits, dlogits, dh, losses, h, W, bias, labels, B, IN, C, act, vec,
               norm, dhb, dh_tf32);
    cudaCheck(cudaGetLastError());
}

// The head's sums over the batch, in one block of LOSS_THREADS (32 x 32) threads, on the bias
// stream: the last layer's bias gradient db = Σ_b dlogits[b] with its SGD step, as
// matmul_backward_dbias_fast does it (the same dbias_tile, C <= 32 columns), and the step's mean
// loss, as loss_mean_kernel does it (step_losses[*step] = mean of losses, then ++*step). One
// launch where there were two: after the head that stream carried the critical path of the
// small model's step.
__global__ void __launch_bounds__(LOSS_THREADS)
    head_batch_sums_kernel(float *dbias, const float *dlogits, int B, int C, float *param, float *mbuf, float lr,
                           float mu, float wd, float *step_losses, int *step, const float *losses, int norm) {
    __shared__ double shared[LOSS_THREADS];
    dbias_tile(dbias, dlogits, B, C, 0, threadIdx.x % DBIAS_TILE, threadIdx.x / DBIAS_TILE, param, mbuf, lr, mu, wd);
    double total = block_sum_fixed_order(losses, B, shared);
    if (threadIdx.x == 0) {
        step_losses[*step] = (float)(total / norm);
        *step += 1;
    }
}

// after head_forward_backward: db (C) of the last layer and its SGD step on param, mbuf (C); the
// step's mean loss into step_losses[*step] (Σ losses / norm; norm 0: B), and the step counter moves
// on. param NULL: the gradient alone, no SGD step (train_mlp_fast -g steps after the all-reduce).
static inline void head_batch_sums(float *dbias, const float *dlogits, int B, int C, float *param, float *mbuf,
                                   float lr, float mu, float wd, float *step_losses, int *step, const float *losses,
                                   cudaStream_t stream, int norm = 0) {
    static_assert(DBIAS_TILE * DBIAS_TILE == LOSS_THREADS && HEAD_MAX_C <= DBIAS_TILE, "one block does both sums");
    head_batch_sums_kernel<<<1, LOSS_THREADS, 0, stream>>>(dbias, dlogits, B, C, param, mbuf, lr, mu, wd, step_losses,
                                                           step, losses, norm > 0 ? norm : B);
    cudaCheck(cudaGetLastError());
}

#endif // MLP_FAST_HEAD_CUH
