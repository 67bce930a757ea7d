/*
kernels/fast/fused/fused_step.cuh: a whole run of training steps of a one-hidden-layer model in one kernel
(train_mlp_fast -f 2, the default where the model fits it).
CPU twins: gather_batch_cpu, model_forward_cpu, model_loss_cpu, model_backward_cpu and
model_update_cpu (train_mlp_cpu.c), one after the other; test_mlp compares every tensor they
produce after each step, and a run of steps in one launch against the same steps one launch each.

    x (B, IN) the batch, W0 (H, IN), b0 (H), W1 (C, H), b1 (C); one step:
    h      = act(x · W0ᵀ + b0)                         (B, H)    the hidden layer
    z      = h · W1ᵀ + b1                              (B, C)    the logits
    loss_b = logsumexp(z_b) - z_b[label_b],   dz = (softmax(z) - onehot(label)) / B
    dW1    = dzᵀ · h,   db1 = Σ_b dz                   (C, H), (C)
    dh     = (dz · W1) ⊙ act'(h)                       (B, H)
    dW0    = dhᵀ · x,   db0 = Σ_b dh                   (H, IN), (H)
    and the SGD step (kernels/sgd.cuh's sgd_one) on all four.

Why: the small model's step (784,128,10 at batch 64) is about 13 million multiply-adds, a few
microseconds of arithmetic spread over the GPU. As a graph of separate kernels most of its time is
the gaps between the kernels of its critical path (gather, forward, head, dh, dW0 and its SGD
step). Here the grid stays on the GPU for the whole run, with two grid-wide barriers a step
(dev/fused_profile.cu times each phase; doc/fast.md has the measurements).

How the work is split: block k owns U hidden units, j = kU .. kU + U - 1 (U = 1 for the small model:
128 blocks, about one per SM). Everything about its units stays with it: their rows of W0, their
columns of W1, and the momentum of both live in the block's shared memory for the whole run; it
computes their column of h, their column of dh, their rows of dW0 and columns of dW1, and their
SGD steps. Only the logits need all units at once, so a step is
  phase A   (each block) the batch; its units' column of h, into h in global memory
  ---- grid-wide barrier ----
  phase B1  (block b, for row b of the batch) row b of h and all of W1 and b1 from global memory:
            the row's logits, loss and dz, into global memory
  ---- grid-wide barrier ----
  phase B2  (each block) all of dz from global memory; its units' dh column, dW1 columns, db0,
            dW0 rows and their SGD steps, W1's new columns into global memory; block 0 also b1's
            gradient and step, and the step's mean loss.
No buffer is written while another block may read it: h is written in phase A and read in B1, dz
written in B1 and read in B2, W1 and b1 written in B2 and read in the next step's B1, and each pair
is separated by a barrier that every block reaches only when done with the phase before.

The batch: each block reads it itself, as bytes (B x IN, 50 KB for the small model) into shared
memory, with cp.async: the next step's rows are requested at the end of phase A and arrive during
the barriers and phase B (a second buffer). Products with the pixels take the bytes as they are,
exact in float, and scale the sum by 1/255 once: Σ (p / 255) w becomes (Σ p w) · (1/255), a
difference in the last bits of the float sum (the tolerances of test_mlp cover it; x itself, stored
for the caller, is the gather's pixel_value, p / 255 to the bit).

Memory ordering: data another block wrote during this kernel (h, dz, the losses, W1, b1) is read
with __ldcg (from L2, not the SM's L1, which is not kept coherent with other SMs); the grid barrier
orders the writes before the reads. Every sum runs in a fixed order: a run gives the same bits every
time, and a run of n steps the same bits as n runs of one.
Code size is time here: a step runs through most of the kernel's code once, so loops over units are
kept rolled and each function is inlined in few places.

Limits (fused_step_plan): two layers, FP32, IN a multiple of 16 (16-byte cp.async of whole rows),
C <= 32, B <= 256, every block resident at once (a cooperative launch), and the shared memory of one
block within the GPU's limit. Otherwise the trainer runs the graph path.
*/
#ifndef MLP_FAST_FUSED_STEP_CUH
#define MLP_FAST_FUSED_STEP_CUH

#include <cooperative_groups.h>
#include <stdint.h>

#include "../../activation.cuh"  // activation_apply, activation_grad_from_output
#include "../../common.cuh"      // cudaCheck, CEIL_DIV
#include "../../sgd.cuh"         // sgd_one
#include "../ops/gather.cuh"     // pixel_value

#define FUSED_THREADS 512  // 16 warps: the phases are chains of loads and sums, and more warps hide more of them
#define FUSED_MAX_U 4      // hidden units per block
#define FUSED_MAX_B 256    // rows
#define FUSED_MAX_C 32     // classes
#define FUSED_ROWS 4       // rows a warp takes at once in the forward product

// what one launch needs: the model's buffers (train_mlp_fast.cu's Model), the data and the settings
typedef struct {
    float *params, *mbuf, *grads;       // the flat buffers (common/mlp.h param_layout)
    size_t w0, b0, w1, b1;              // offsets of W0, b0, W1, b1 in them
    float *x, *h, *logits, *dh, *dz;    // the trainer's acts[0], acts[1], acts[2], dacts[1], dacts[2]
    float *losses;                      // (B) per row
    int *labels_out;                    // (B) the labels of the last step's batch
    float *step_losses;                 // each step's mean loss, at step_losses[*step]
    int *step;                          // the device step counter: moved on by n
    const int *perm;                    // the epoch's permutation: step s takes rows perm[s*B ..]
    const uint8_t *images, *all_labels; // the training set on the device (kernels/data.cuh)
    int B, IN, H, C, act, U;            // U hidden units per block
    int n, last_bs;                     // n steps, the last with last_bs rows
    float lr, mu, wd;
    long long *prof;                    // NULL; dev/fused_profile.cu: FUSED_PROF_POINTS clock64() stamps per
                                        // block and step, [block][step][point]
} FusedStepArgs;

// phase A start, its end, after the first barrier, after phase B1, after the second barrier, after
// dh, end of the step
#define FUSED_PROF_POINTS 7

// shared memory, in bytes from the start; the same on the host (the launch size) and the device
typedef struct {
    size_t xb, w0s, m0s, hcol, dhs, w1c, m1c, b0s, b1s, hrow, w1s, b1r, zrow, dzs, idxs, part, total;
} FusedLayout;

__host__ __device__ inline FusedLayout fused_layout(int B, int IN, int H, int C, int U) {
    FusedLayout s;
    size_t off = 0;
#define FUSED_TAKE(field, bytes) (s.field = off, off += ((size_t)(bytes) + 15) / 16 * 16)
    FUSED_TAKE(xb, 2 * (size_t)B * IN);     // two batches of bytes
    FUSED_TAKE(w0s, 4 * (size_t)U * IN);    // the block's rows of W0
    FUSED_TAKE(m0s, 4 * (size_t)U * IN);    // and of its momentum
    FUSED_TAKE(hcol, 4 * (size_t)U * B);    // the block's columns of h, (U, B)
    FUSED_TAKE(dhs, 4 * (size_t)U * B);     // and of dh (in phase A: the sums before the bias)
    FUSED_TAKE(w1c, 4 * (size_t)U * C);     // the block's columns of W1, (U, C)
    FUSED_TAKE(m1c, 4 * (size_t)U * C);     // and of its momentum
    FUSED_TAKE(b0s, 8 * (size_t)U);         // the block's b0 and its momentum
    FUSED_TAKE(b1s, 8 * (size_t)C);         // b1 and its momentum (block 0's)
    FUSED_TAKE(hrow, 4 * (size_t)H);        // phase B1: a row of h
    FUSED_TAKE(w1s, 4 * (size_t)C * H);     // all of W1
    FUSED_TAKE(b1r, 4 * (size_t)C);         // and of b1
    FUSED_TAKE(zrow, 4 * (size_t)C);        // the row's logits
    FUSED_TAKE(dzs, 4 * (size_t)B * C);     // phase B2: all of dz
    FUSED_TAKE(idxs, 4 * (size_t)B);        // the next batch's items
    FUSED_TAKE(part, 4 * (size_t)IN);       // dW0: the second half of the rows' sums
#undef FUSED_TAKE
    s.total = off;
    return s;
}

// the 4 bytes of w as exact floats: each byte under the exponent bits of 2^23, minus 2^23
// (a byte permute and an add, where a conversion instruction runs at a quarter of their rate)
__device__ __forceinline__ float4 fused_bytes(uint32_t w) {
    const float big = 8388608.0f;
    return make_float4(__uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540)) - big,
                       __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7541)) - big,
                       __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7542)) - big,
                       __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7543)) - big);
}

// the butterfly sum over a warp: every lane gets the same bits (a + b == b + a)
__device__ __forceinline__ float fused_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// the batch rows of idxs (bs of them), as bytes, into xb: 16-byte cp.async pieces, one group
__device__ __forceinline__ void fused_fetch_batch(uint8_t *xb, const int *idxs, const FusedStepArgs &a, int bs) {
    const int per_row = a.IN / 16;
    for (int b = threadIdx.x / 32; b < bs; b += FUSED_THREADS / 32) {   // a warp per row
        const uint8_t *src = a.images + (size_t)idxs[b] * a.IN;
        uint8_t *dst = xb + (size_t)b * a.IN;
        for (int c = threadIdx.x % 32; c < per_row; c += 32) {
            const unsigned d = (unsigned)__cvta_generic_to_shared(dst + 16 * c);
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src + 16 * c));
        }
    }
    asm volatile("cp.async.commit_group;\n" ::);
}

__global__ void __launch_bounds__(FUSED_THREADS) fused_step_kernel(FusedStepArgs a) {
    namespace cg = cooperative_groups;
    cg::grid_group grid = cg::this_grid();
    extern __shared__ __align__(16) unsigned char fsm[];
    const int IN = a.IN, H = a.H, C = a.C, B = a.B, U = a.U, IN4 = IN / 4;
    const FusedLayout L = fused_layout(B, IN, H, C, U);
    uint8_t *xb = fsm + L.xb;
    float *w0s = (float *)(fsm + L.w0s), *m0s = (float *)(fsm + L.m0s), *hcol = (float *)(fsm + L.hcol);
    float *dhs = (float *)(fsm + L.dhs), *w1c = (float *)(fsm + L.w1c), *m1c = (float *)(fsm + L.m1c);
    float *b0s = (float *)(fsm + L.b0s), *b1s = (float *)(fsm + L.b1s), *hrow = (float *)(fsm + L.hrow);
    float *w1s = (float *)(fsm + L.w1s), *b1r = (float *)(fsm + L.b1r), *zrow = (float *)(fsm + L.zrow);
    float *dzs = (float *)(fsm + L.dzs);
    int *idxs = (int *)(fsm + L.idxs);

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, NW = FUSED_THREADS / 32, G = gridDim.x;
    const int j0 = blockIdx.x * U, nu = min(U, H - j0);  // the block's units: j0 .. j0 + nu - 1
    const int s0 = *a.step;   // every block reads it before its first barrier; block 0 moves it on after its last
    const bool first = blockIdx.x == 0;
    float *W1 = a.params + a.w1, *b1 = a.params + a.b1;
    long long *prof = a.prof ? a.prof + (size_t)blockIdx.x * a.n * FUSED_PROF_POINTS : NULL;
#define FUSED_STAMP(k)                                                         \
    if (prof) {                                                                \
        __syncthreads();                                                       \
        if (tid == 0) prof[(size_t)i * FUSED_PROF_POINTS + (k)] = clock64();   \
    }

    // the first batch; the block's rows of W0, columns of W1, b0 and (block 0) b1, with their momentum
    const int bs0 = a.n == 1 ? a.last_bs : B;
    if (tid < bs0) idxs[tid] = __ldg(a.perm + (size_t)s0 * B + tid);
    for (int i = tid; i < nu * IN; i += FUSED_THREADS) {
        w0s[i] = a.params[a.w0 + (size_t)j0 * IN + i];
        m0s[i] = a.mbuf[a.w0 + (size_t)j0 * IN + i];
    }
    for (int t = tid; t < nu * C; t += FUSED_THREADS) {
        const size_t o = (size_t)(t % C) * H + j0 + t / C;   // (u, c) = (t / C, t % C)
        w1c[t] = a.params[a.w1 + o];
        m1c[t] = a.mbuf[a.w1 + o];
    }
    if (tid < nu) {
        b0s[2 * tid] = a.params[a.b0 + j0 + tid];
        b0s[2 * tid + 1] = a.mbuf[a.b0 + j0 + tid];
    }
    if (first && tid < C) {
        b1s[2 * tid] = a.params[a.b1 + tid];
        b1s[2 * tid + 1] = a.mbuf[a.b1 + tid];
    }
    __syncthreads();
    fused_fetch_batch(xb, idxs, a, bs0);

    for (int i = 0; i < a.n; i++) {
        const int s = s0 + i, p = i % 2, bs = i == a.n - 1 ? a.last_bs : B;
        const int next_bs = i + 1 == a.n - 1 ? a.last_bs : B;
        const uint8_t *x = xb + (size_t)p * B * IN;
        const uint32_t *x32 = (const uint32_t *)x;

        // ---- phase A: this step's batch (requested a step earlier), the block's columns of h. The
        // next batch's items and this step's label of row blockIdx.x (for phase B1) are loaded now
        // and used later, so their latency passes during the arithmetic.
        const int next_item = i + 1 < a.n && tid < next_bs ? __ldg(a.perm + (size_t)(s + 1) * B + tid) : 0;
        const int row_label = tid == 0 && blockIdx.x < bs ? a.all_labels[__ldg(a.perm + (size_t)s * B + blockIdx.x)] : 0;
        asm volatile("cp.async.wait_all;\n" ::: "memory");
        __syncthreads();
        FUSED_STAMP(0);
        // a warp per FUSED_ROWS rows, its lanes across IN: each W0 value loaded once for the rows,
        // FUSED_ROWS independent sums (a row past bs repeats the last one, its sums unused); the sums
        // go to dhs (free until phase B2), the bias and activation after them
#pragma unroll 1
        for (int u = 0; u < nu; u++) {
            const float *wr = w0s + (size_t)u * IN;
            for (int b0 = warp * FUSED_ROWS; b0 < bs; b0 += NW * FUSED_ROWS) {
                float acc[FUSED_ROWS];
                const uint32_t *xr[FUSED_ROWS];
#pragma unroll
                for (int r = 0; r < FUSED_ROWS; r++) {
                    acc[r] = 0.0f;
                    xr[r] = x32 + (size_t)min(b0 + r, bs - 1) * IN4;
                }
#pragma unroll 2
                for (int w = lane; w < IN4; w += 32) {
                    const float4 wv = *(const float4 *)&wr[4 * w];
#pragma unroll
                    for (int r = 0; r < FUSED_ROWS; r++) {
                        const float4 xv = fused_bytes(xr[r][w]);
                        acc[r] = fmaf(xv.x, wv.x, acc[r]);
                        acc[r] = fmaf(xv.y, wv.y, acc[r]);
                        acc[r] = fmaf(xv.z, wv.z, acc[r]);
                        acc[r] = fmaf(xv.w, wv.w, acc[r]);
                    }
                }
#pragma unroll
                for (int r = 0; r < FUSED_ROWS; r++) {
                    const float z = fused_warp_sum(acc[r]);
                    if (lane == 0 && b0 + r < bs) dhs[(size_t)u * B + b0 + r] = z;
                }
            }
        }
        __syncthreads();
        for (int t = tid; t < bs * nu; t += FUSED_THREADS) {
            const int u = t / bs, b = t % bs;
            const float v = activation_apply(dhs[(size_t)u * B + b] * (1.0f / 255.0f) + b0s[2 * u], a.act);
            hcol[(size_t)u * B + b] = v;
            a.h[(size_t)b * H + j0 + u] = v;
        }
        // the batch as floats for the caller: a row per block, rows G apart
        for (int b = blockIdx.x; b < bs; b += G)
            for (int k = tid; k < IN; k += FUSED_THREADS)
                a.x[(size_t)b * IN + k] = pixel_value(x[(size_t)b * IN + k], 0);
        // the next batch on its way (its buffer was last read by the step before this one)
        if (i + 1 < a.n) {
            if (tid < next_bs) idxs[tid] = next_item;
            __syncthreads();
            fused_fetch_batch(xb + (size_t)(1 - p) * B * IN, idxs, a, next_bs);
        }
        FUSED_STAMP(1);
        grid.sync();
        FUSED_STAMP(2);

        // ---- phase B1: row b of h, W1 and b1 -> the row's logits, loss and dz (block b; rows G apart)
        if (blockIdx.x < bs) {
            for (int t = tid; t < C * H; t += FUSED_THREADS) w1s[t] = __ldcg(&W1[t]);
            if (tid < C) b1r[tid] = __ldcg(&b1[tid]);
        }
        for (int b = blockIdx.x; b < bs; b += G) {
            for (int k = tid; k < H; k += FUSED_THREADS) hrow[k] = __ldcg(&a.h[(size_t)b * H + k]);
            if (tid < C) zrow[tid] = b1r[tid];
            __syncthreads();
            for (int c = warp; c < C; c += NW) {   // a warp per class, its lanes across H
                float z = 0.0f;
                for (int k = lane; k < H; k += 32) z = fmaf(hrow[k], w1s[(size_t)c * H + k], z);
                z = fused_warp_sum(z);
                if (lane == 0) zrow[c] += z;
            }
            __syncthreads();
            if (warp == 0) {   // softmax_xent_row's formulas, a lane per class
                int label = b == blockIdx.x ? row_label : a.all_labels[__ldg(a.perm + (size_t)s * B + b)];
                label = __shfl_sync(0xffffffffu, label, 0);   // (row_label is thread 0's)
                const float z = lane < C ? zrow[lane] : -INFINITY;
                float maxz = z;
                for (int o = 16; o > 0; o >>= 1) maxz = fmaxf(maxz, __shfl_xor_sync(0xffffffffu, maxz, o));
                const float e = lane < C ? expf(z - maxz) : 0.0f;
                const float sum = fused_warp_sum(e);
                if (lane < C) {
                    a.logits[(size_t)b * C + lane] = z;
                    a.dz[(size_t)b * C + lane] = (e / sum - (lane == label ? 1.0f : 0.0f)) / bs;
                }
                if (lane == 0) {
                    a.losses[b] = logf(sum) + maxz - zrow[label];
                    a.labels_out[b] = label;
                }
            }
            __syncthreads();   // (hrow and zrow again for the next row)
        }
        FUSED_STAMP(3);
        grid.sync();
        FUSED_STAMP(4);

        // ---- phase B2: all of dz; the block's columns of dh (W1 as it was before the step)
        for (int t = tid; t < bs * C; t += FUSED_THREADS) dzs[t] = __ldcg(&a.dz[t]);
        __syncthreads();
        for (int t = tid; t < bs * nu; t += FUSED_THREADS) {
            const int u = t / bs, b = t % bs;
            float g = 0.0f;
            for (int c = 0; c < C; c++) g = fmaf(dzs[(size_t)b * C + c], w1c[(size_t)u * C + c], g);
            g *= activation_grad_from_output(hcol[(size_t)u * B + b], a.act);
            dhs[(size_t)u * B + b] = g;
            a.dh[(size_t)b * H + j0 + u] = g;
        }
        __syncthreads();
        FUSED_STAMP(5);
        // sums over the rows, a warp each: the block's dW1 columns and db0 with their steps, and block
        // 0's db1 with its step and the mean loss
        const int tasks = nu * C + nu + (first ? C + 1 : 0);
        for (int t = warp; t < tasks; t += NW) {
            float g = 0.0f;
            if (t < nu * C) {            // dW1[c][j0 + u]
                const int u = t / C, c = t % C;
                for (int b = lane; b < bs; b += 32) g = fmaf(dzs[(size_t)b * C + c], hcol[(size_t)u * B + b], g);
                g = fused_warp_sum(g);
                if (lane == 0) {
                    const size_t o = (size_t)c * H + j0 + u;
                    a.grads[a.w1 + o] = g;
                    sgd_one(w1c[t], g, m1c[t], a.lr, a.mu, a.wd);
                    W1[o] = w1c[t];
                }
            } else if (t < nu * C + nu) {   // db0[j0 + u]
                const int u = t - nu * C;
                for (int b = lane; b < bs; b += 32) g += dhs[(size_t)u * B + b];
                g = fused_warp_sum(g);
                if (lane == 0) {
                    a.grads[a.b0 + j0 + u] = g;
                    sgd_one(b0s[2 * u], g, b0s[2 * u + 1], a.lr, a.mu, a.wd);
                }
            } else if (t < nu * C + nu + C) {   // db1[c]
                const int c = t - nu * C - nu;
                for (int b = lane; b < bs; b += 32) g += dzs[(size_t)b * C + c];
                g = fused_warp_sum(g);
                if (lane == 0) {
                    a.grads[a.b1 + c] = g;
                    sgd_one(b1s[2 * c], g, b1s[2 * c + 1], a.lr, a.mu, a.wd);
                    b1[c] = b1s[2 * c];
                }
            } else {                         // the mean loss
                double sum = 0.0;
                for (int b = lane; b < bs; b += 32) sum += __ldcg(&a.losses[b]);
                for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
                if (lane == 0) a.step_losses[s] = (float)(sum / bs);
            }
        }
        // the block's rows of dW0 = dhᵀ · x, 4 pixels (a word of x) a thread, and their SGD step in
        // shared memory. Where the block has the threads for it, each word's rows in two halves, the
        // second half's sums added to the first's (in that order) through shared memory.
        const bool halves = 2 * IN4 <= FUSED_THREADS;
        const int hrows = halves ? (bs + 1) / 2 : bs;
        float4 *part = (float4 *)(fsm + L.part);
#pragma unroll 1
        for (int u = 0; u < nu; u++) {
            const float *d = dhs + (size_t)u * B;
            auto rows_sum = [&](int w, int bbeg, int bend) {   // Σ_b d[b] x[b][4w .. 4w + 3] (the bytes)
                float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 4
                for (int b = bbeg; b < bend; b++) {
                    const float4 xv = fused_bytes(x32[(size_t)b * IN4 + w]);
                    acc.x = fmaf(d[b], xv.x, acc.x);
                    acc.y = fmaf(d[b], xv.y, acc.y);
                    acc.z = fmaf(d[b], xv.z, acc.z);
                    acc.w = fmaf(d[b], xv.w, acc.w);
                }
                return acc;
            };
            auto step_word = [&](int w, float4 acc) {   // the gradient of word w, stored, and its SGD step
                const float k = 1.0f / 255.0f;
                const float4 g = make_float4(acc.x * k, acc.y * k, acc.z * k, acc.w * k);
                const size_t o = (size_t)u * IN + 4 * w;
                *(float4 *)&a.grads[a.w0 + (size_t)j0 * IN + o] = g;
#pragma unroll
                for (int e = 0; e < 4; e++) sgd_one(w0s[o + e], (&g.x)[e], m0s[o + e], a.lr, a.mu, a.wd);
            };
            if (halves) {   // one word and half of the rows a thread
                const int w = tid % IN4, half = tid / IN4;
                float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                if (half < 2) acc = rows_sum(w, half * hrows, half ? bs : hrows);
                if (half == 1) part[w] = acc;
                __syncthreads();
                if (half == 0) {
                    const float4 q = part[w];
                    step_word(w, make_float4(acc.x + q.x, acc.y + q.y, acc.z + q.z, acc.w + q.w));
                }
                __syncthreads();   // (part again for the next unit)
            } else {
                for (int w = tid; w < IN4; w += FUSED_THREADS) step_word(w, rows_sum(w, 0, bs));
            }
        }
        __syncthreads();   // (phase A of the next step reads w0s, b0s, dhs)
        FUSED_STAMP(6);
    }
#undef FUSED_STAMP

    // ---- after the last step: what lives in shared memory back to global memory (W1 and b1 are
    // there already); no other block reads any of it in this kernel
    for (int i = tid; i < nu * IN; i += FUSED_THREADS) {
        a.params[a.w0 + (size_t)j0 * IN + i] = w0s[i];
        a.mbuf[a.w0 + (size_t)j0 * IN + i] = m0s[i];
    }
    for (int t = tid; t < nu * C; t += FUSED_THREADS) a.mbuf[a.w1 + (size_t)(t % C) * H + j0 + t / C] = m1c[t];
    if (tid < nu) {
        a.params[a.b0 + j0 + tid] = b0s[2 * tid];
        a.mbuf[a.b0 + j0 + tid] = b0s[2 * tid + 1];
    }
    if (first && tid < C) a.mbuf[a.b1 + tid] = b1s[2 * tid + 1];
    if (first && tid == 0) *a.step = s0 + a.n;
}

// ----------------------------------------------------------------------------
// the plan and the launcher

typedef struct {
    int ok;            // 1: the model takes the fused step
    int deep;          // 1: the kernel of kernels/fast/fused/fused_deep.cuh (two or more hidden layers), else this file's
    int U, blocks;     // hidden units per block (this file's kernel), blocks (H / U rounded up; deep: one per SM)
    size_t smem;       // dynamic shared memory per block, bytes
    int tma;           // deep, -x 1: 3 the forward and dinp tiles on the TMA, split in K between the blocks of
                       // clusters; 2 the same tiles unsplit; 1 the forward alone; 0 neither
                       // (kernels/fast/fused/fused_deep.cuh, fused_deep_tma)
    char why[160];     // ok == 0: why not, in words
} FusedPlan;

// whether a model (sizes[0..L]) at batch B and precision prec (PREC_*, common/mlp.h) fits the fused
// step on the GPU planned for (matmul_fast_target), and how it is split
static inline FusedPlan fused_step_plan(const int *sizes, int L, int B, int prec) {
    FusedPlan f;
    memset(&f, 0, sizeof(f));
    if (L != 2) {
        snprintf(f.why, sizeof(f.why), "%d layers (it takes one hidden layer)", L);
        return f;
    }
    const int IN = sizes[0], H = sizes[1], C = sizes[2];
    if (prec != PREC_FP32) return snprintf(f.why, sizeof(f.why), "-x %d (it is FP32 only)", prec), f;
    if (IN % 16) return snprintf(f.why, sizeof(f.why), "%d inputs (a multiple of 16 is needed)", IN), f;
    if (C > FUSED_MAX_C) return snprintf(f.why, sizeof(f.why), "%d classes (at most %d)", C, FUSED_MAX_C), f;
    if (B > FUSED_MAX_B) return snprintf(f.why, sizeof(f.why), "batch %d (at most %d)", B, FUSED_MAX_B), f;
    // (the GPU planned for: matmul_fast_target; a block of FUSED_THREADS threads fits an SM's registers, so
    // shared memory alone decides whether one fits)
    const int sms = matmul_fast_target()->sms, optin = matmul_fast_target()->smem_optin;
    for (int U = CEIL_DIV(H, sms); U <= FUSED_MAX_U; U++) {
        const FusedLayout l = fused_layout(B, IN, H, C, U);
        if (l.total > (size_t)optin) {
            snprintf(f.why, sizeof(f.why), "%zu bytes of shared memory a block (the GPU has %d)", l.total, optin);
            return f;
        }
        if (CEIL_DIV(H, U) <= sms) {  // a block an SM, all resident at once (a cooperative launch)
            f.ok = 1;
            f.U = U;
            f.blocks = CEIL_DIV(H, U);
            f.smem = l.total;
            return f;
        }
    }
    snprintf(f.why, sizeof(f.why), "%d hidden units (at most %d x %d SMs)", H, FUSED_MAX_U, sms);
    return f;
}

// n steps (the last with last_bs rows) of the model in a, from the device step counter on; f from
// fused_step_plan for this GPU
static inline void fused_steps(const FusedPlan *f, FusedStepArgs *a, cudaStream_t stream) {
    a->U = f->U;
    cudaCheck(cudaFuncSetAttribute(fused_step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)f->smem));
    void *args[] = {a};
    cudaCheck(cudaLaunchCooperativeKernel((const void *)fused_step_kernel, dim3(f->blocks), dim3(FUSED_THREADS), args,
                                          f->smem, stream));
}

#endif  // MLP_FAST_FUSED_STEP_CUH
