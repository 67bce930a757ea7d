/*
kernels/fast/fused/deep_head.cuh: the deep fused step's jobs that are not product tiles: the batch's
gather (the next step's rows, gathered during the head's phase), the head's rows (logits, softmax,
loss, dz and the last hidden layer's gradient), and the column jobs of the last phase (every bias
gradient with its SGD step, the head layer's weight gradient, the step's mean loss).
*/
#ifndef MLP_FAST_DEEP_HEAD_CUH
#define MLP_FAST_DEEP_HEAD_CUH

#include "../../sgd.cuh"           // sgd_one
#include "../../softmax_xent.cuh"  // block_sum_fixed_order
#include "../matmul/matmul.cuh"    // mf_cp16, mf_cp4, mf_cp_commit, mf_cp_wait
#include "../ops/float4.cuh"       // sgd_four, activation_grad_times4
#include "../ops/gather.cuh"       // pixel_value, GATHER_*
#include "../ops/head.cuh"         // head_fma4
#include "../ops/round.cuh"        // mf_round_tf32
#include "deep_config.cuh"         // FD_HEAD_ROWS, FD_COLS, FusedDeepArgs
#include "deep_tiles.cuh"          // FD_HEAD_TILES

// the items of rows b0 .. b0 + FD_HEAD_ROWS - 1 of step s's batch: the rows of the training set they are
// (-1 for those past bs)
__device__ __forceinline__ void fd_gather_items(const FusedDeepArgs &a, int s, int b0, int bs, int (&item)[FD_HEAD_ROWS]) {
#pragma unroll
    for (int r = 0; r < FD_HEAD_ROWS; r++) item[r] = b0 + r < bs ? __ldg(a.perm + (size_t)s * a.B + b0 + r) : -1;
}

// the images of those items put in flight into L2, a thread a 128-byte line. Why: the head's phase
// gathers the next step's rows while the rest of the phase waits for it, and a gather from memory waits
// for it twice (the permutation, then the pixels); prefetched a step before, both are in L2.
__device__ __forceinline__ void fd_gather_prefetch(const FusedDeepArgs &a, const int (&item)[FD_HEAD_ROWS]) {
    const int IN = a.sizes[0];
#pragma unroll
    for (int r = 0; r < FD_HEAD_ROWS; r++) {
        if (item[r] < 0) continue;
        const uintptr_t img = (uintptr_t)(a.images + (size_t)item[r] * IN);
        const uintptr_t line = (img & ~(uintptr_t)127) + 128 * threadIdx.x;
        if (line < img + IN) asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
    }
}

// rows b0 .. b0 + FD_HEAD_ROWS - 1 of a batch, the training set's rows item[] (those >= 0), into x and
// labels, the warps shared out over the rows (the gather's pixel_value, as mode says: p / 255, rounded to
// TF32 for -x 1, the bytes themselves for FP32)
__device__ __forceinline__ void fd_gather(const FusedDeepArgs &a, float *x, int *labels, const int (&item)[FD_HEAD_ROWS],
                                          int b0, int mode) {
    constexpr int PER_ROW = FD_THREADS / 32 / FD_HEAD_ROWS;   // warps a row
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, r = warp % FD_HEAD_ROWS, b = b0 + r;
    const int IN = a.sizes[0], part = warp / FD_HEAD_ROWS;
    int it = item[0];   // item[r], without indexing the registers by a variable (which would put them in memory)
#pragma unroll
    for (int k = 1; k < FD_HEAD_ROWS; k++)
        if (r == k) it = item[k];
    if (it < 0) return;
    const uchar4 *img = reinterpret_cast<const uchar4 *>(a.images + (size_t)it * IN);
    float4 *row = reinterpret_cast<float4 *>(x + (size_t)b * IN);
    if (lane == 0 && part == 0) labels[b] = a.all_labels[it];
#pragma unroll 4
    for (int w = part * 32 + lane; w < IN / 4; w += 32 * PER_ROW) {
        const uchar4 p = __ldcs(img + w);   // read once an epoch: kept out of the way in L2
        row[w] = make_float4(pixel_value(p.x, mode), pixel_value(p.y, mode), pixel_value(p.z, mode),
                             pixel_value(p.w, mode));
    }
}

// A job of the head's phase (step s): rows b0 .. b0 + FD_HEAD_ROWS - 1 (those below bs) of the head, from
// the logits' shares the forward tiles left (fd_head_part), with step s + 1's rows b0 .. (those below
// gather_bs) gathered beside them, into x and xlabels, and step s + 2's (those below pre_bs) prefetched
// to L2 for the next step's job (fd_gather_prefetch). In order:
//   1. the rows of h and their logits' shares are put in flight into shared memory (cp.async), the
//      rows' biases and labels into registers; the gather runs while they land;
//   2. (a warp a row, a lane a class) logit z = b + the shares of tile columns 0, 1, ... in order; then
//      softmax_xent_row's arithmetic with its sums in the same order, so the same bits: the largest
//      logit, the exponentials' sum in class order (every lane adds them all, taken from their lanes),
//      dz and the loss;
//   3. dh[r][k] = Σ_c dz[r][c] · W[c][k] · act'(h[r][k]), a float4 of columns a thread, W's values of
//      each class taken once for all the job's rows.
// The logits, dz, the losses and dh go to the trainer's buffers, as head.cuh's head_rows leaves them.
// Why: the head's phase is a chain of waits (a round trip to L2, a __syncthreads, a run of dependent
// arithmetic), each costing a fraction of a microsecond on the step's critical path: here the loads are
// in flight at the job's start, the gather's among them (its pixels already in L2), the softmax is a
// few shuffles on a warp instead of a thread's loop over the classes, and two __syncthreads separate
// the three steps. (W is read from L2 where it is used: staging it in shared memory, or in registers
// from the job's start, adds a wait to the phase's chain.)
static_assert(HEAD_MAX_C <= 32 && FD_HEAD_ROWS <= FD_THREADS / 32, "a lane a class, a warp a row");
__device__ __forceinline__ void fd_head_job(float *smem, const FusedDeepArgs &a, int b0, int bs, const int *labels,
                                            float *x, int *xlabels, int s, int gather_bs, int pre_bs,
                                            int gather_mode) {
    const int L = a.L, IN = a.sizes[L - 1], C = a.sizes[L], TN = FD_HEAD_TILES(IN), tid = threadIdx.x;
    const int warp = tid / 32, lane = tid % 32, rows = min(FD_HEAD_ROWS, bs - b0);
    const float *W = a.params + a.w_off[L - 1], *bias = a.params + a.b_off[L - 1], *h = a.acts[L - 1];
    // shared memory: the rows of h, their logits' shares [tile column][row][class], dz [row][class]
    float *hs = smem, *ps = hs + FD_HEAD_ROWS * IN, *dzs = ps + FD_HEAD_ROWS * TN * C;
    int item[FD_HEAD_ROWS], pre[FD_HEAD_ROWS];
    fd_gather_items(a, s + 1, b0, gather_bs, item);
    fd_gather_items(a, s + 2, b0, pre_bs, pre);
    float zb = 0.0f;
    int lab = 0;
    if (rows > 0) {
        const unsigned sh = (unsigned)__cvta_generic_to_shared(smem);
        for (int t = tid; t < rows * IN / 4; t += FD_THREADS)   // the rows are consecutive in h
            mf_cp16(sh + 16u * t, h + (size_t)b0 * IN + 4 * t, true);
        for (int t = tid; t < TN * rows * C; t += FD_THREADS) {   // [tile column][row][class], rows consecutive
            const int tn = t / (rows * C), rc = t % (rows * C);
            mf_cp4(sh + 4u * (unsigned)(ps - smem + tn * FD_HEAD_ROWS * C + rc),
                   a.head_part + ((size_t)tn * a.B + b0) * C + rc, true);
        }
        mf_cp_commit();
        if (warp < rows) {
            zb = lane < C ? bias[lane] : 0.0f;
            lab = labels[b0 + warp];
        }
    }
    fd_gather(a, x, xlabels, item, b0, gather_mode);
    fd_gather_prefetch(a, pre);
    if (rows <= 0) return;
    mf_cp_wait<0>();
    __syncthreads();
    if (warp < rows) {   // (warp-uniform: every lane takes part in the shuffles)
        const int b = b0 + warp;
        float z = -INFINITY;   // (lanes past the classes: nothing to the largest logit, 0 to the sum)
        if (lane < C) {
            z = zb;
            for (int tn = 0; tn < TN; tn++) z += ps[tn * FD_HEAD_ROWS * C + warp * C + lane];
            a.acts[L][(size_t)b * C + lane] = z;
        }
        float maxz = z;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) maxz = fmaxf(maxz, __shfl_xor_sync(0xffffffffu, maxz, o));
        const float e = lane < C ? expf(z - maxz) : 0.0f;
        float sum = 0.0f;
        for (int c = 0; c < C; c++) sum += __shfl_sync(0xffffffffu, e, c);
        const float zl = __shfl_sync(0xffffffffu, z, lab);
        if (lane < C) {
            const float d = (e / sum - (lane == lab ? 1.0f : 0.0f)) / bs;
            dzs[warp * C + lane] = d;
            a.dacts[L][(size_t)b * C + lane] = d;
        }
        if (lane == 0) a.losses[b] = logf(sum) + maxz - zl;
    }
    __syncthreads();
    float *dh = a.dacts[L - 1] + (size_t)b0 * IN, *dh_r = a.dacts_r[L - 1] ? a.dacts_r[L - 1] + (size_t)b0 * IN : NULL;
    for (int q = tid; q < IN / 4; q += FD_THREADS) {   // columns 4q .. 4q + 3
        float4 sum[FD_HEAD_ROWS];
#pragma unroll
        for (int r = 0; r < FD_HEAD_ROWS; r++) sum[r] = make_float4(0.f, 0.f, 0.f, 0.f);
        // (c in order: the same sums as head.cuh's; dz of rows past the batch is never written, nor their dh)
        for (int c = 0; c < C; c++) {
            const float4 w = *reinterpret_cast<const float4 *>(W + (size_t)c * IN + 4 * q);
#pragma unroll
            for (int r = 0; r < FD_HEAD_ROWS; r++) sum[r] = head_fma4(dzs[r * C + c], w, sum[r]);
        }
#pragma unroll
        for (int r = 0; r < FD_HEAD_ROWS; r++) {
            if (r >= rows) break;
            const float4 v = activation_grad_times4(sum[r], reinterpret_cast<const float4 *>(hs + r * IN)[q], a.act);
            reinterpret_cast<float4 *>(dh + (size_t)r * IN)[q] = v;
            if (dh_r) reinterpret_cast<float4 *>(dh_r + (size_t)r * IN)[q] = mf_round_tf32(v);
        }
    }
    __syncthreads();   // the shared memory is the next job's
}

// Columns c0 .. c0 + FD_COLS - 1 (those below N) of db = Σ_b dout[b][.] over bs rows (N % 4 == 0), and
// b's SGD step: lanes across the columns, a float4 each, warps across the rows, the warps' sums added
// in order through shared memory.
__device__ __forceinline__ void fd_bias(float *smem, const FusedDeepArgs &a, int l, const float *dout, int bs, int c0) {
    const int N = a.sizes[l + 1], lane = threadIdx.x % 32, warp = threadIdx.x / 32, c = c0 + 4 * lane;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    if (c < N) {
#pragma unroll fd_col_unroll
        for (int b = warp; b < bs; b += FD_THREADS / 32) {
            const float4 v = *reinterpret_cast<const float4 *>(dout + (size_t)b * N + c);
            s.x += v.x;
            s.y += v.y;
            s.z += v.z;
            s.w += v.w;
        }
    }
    float4 *part = reinterpret_cast<float4 *>(smem);
    part[warp * 32 + lane] = s;
    __syncthreads();
    if (warp == 0 && c < N) {
        float4 g = part[lane];
        for (int w = 1; w < FD_THREADS / 32; w++) {
            const float4 p = part[w * 32 + lane];
            g.x += p.x;
            g.y += p.y;
            g.z += p.z;
            g.w += p.w;
        }
        // (b's four values and their momentum in two 16-byte loads, both in flight at once)
        float4 *bias = reinterpret_cast<float4 *>(a.params + a.b_off[l] + c);
        float4 *mb = reinterpret_cast<float4 *>(a.mbuf + a.b_off[l] + c);
        float4 w = *bias, m = *mb;
        *reinterpret_cast<float4 *>(a.grads + a.b_off[l] + c) = g;
        sgd_four(w, g, m, a.lr, a.mu, a.wd);
        *bias = w;
        *mb = m;
    }
    __syncthreads();
}

// The head layer's weight gradient, dW (C, IN) = dzᵀ · h, columns c0 .. c0 + FD_COLS - 1 of it (those
// below IN), for every class, and their SGD step: lanes across the columns (a float4 each), warps
// across the rows, 16 classes at a time, their dz staged in shared memory; the warps' sums added in
// order through shared memory. The operands rounded as the precision's products round them
// (fd_operand), FP32 sums. The gradient (and W's TF32 copy) stored only when keep, as in fd_tile.
template <int PREC>
__device__ __forceinline__ void fd_head_dweight(float *smem, const FusedDeepArgs &a, int bs, int c0, bool keep) {
    const int l = a.L - 1, IN = a.sizes[l], C = a.sizes[l + 1];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, c = c0 + 4 * lane;
    const float *h = a.acts[l], *dz = a.dacts[l + 1];
    float4 *part = reinterpret_cast<float4 *>(smem);   // [warp][class of 16][lane]
    float *dzs = smem + 8 * 16 * 32 * 4;               // [row][class of 16]
    for (int k0 = 0; k0 < C; k0 += 16) {
        for (int t = threadIdx.x; t < bs * 16; t += FD_THREADS) {
            const int b = t / 16, k = k0 + t % 16;
            dzs[t] = k < C ? fd_operand<PREC>(dz[(size_t)b * C + k]) : 0.0f;
        }
        __syncthreads();
        float4 s[16];
#pragma unroll
        for (int k = 0; k < 16; k++) s[k] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (c < IN) {
#pragma unroll fd_col_unroll
            for (int b = warp; b < bs; b += FD_THREADS / 32) {
                float4 v = *reinterpret_cast<const float4 *>(h + (size_t)b * IN + c);
                v = make_float4(fd_operand<PREC>(v.x), fd_operand<PREC>(v.y), fd_operand<PREC>(v.z),
                                fd_operand<PREC>(v.w));
#pragma unroll
                for (int k = 0; k < 16; k++) {
                    const float d = dzs[b * 16 + k];
                    s[k].x = fmaf(d, v.x, s[k].x);
                    s[k].y = fmaf(d, v.y, s[k].y);
                    s[k].z = fmaf(d, v.z, s[k].z);
                    s[k].w = fmaf(d, v.w, s[k].w);
                }
            }
        }
#pragma unroll
        for (int k = 0; k < 16; k++) part[(warp * 16 + k) * 32 + lane] = s[k];
        __syncthreads();
        for (int t = threadIdx.x; t < 16 * 32; t += FD_THREADS) {   // class k0 + t / 32, the float4 of lane t % 32
            const int k = t / 32, ln = t % 32, cc = c0 + 4 * ln;
            if (k0 + k < C && cc < IN) {
                float4 g = part[k * 32 + ln];
                for (int w = 1; w < FD_THREADS / 32; w++) {
                    const float4 p = part[(w * 16 + k) * 32 + ln];
                    g.x += p.x;
                    g.y += p.y;
                    g.z += p.z;
                    g.w += p.w;
                }
                // (W's four values and their momentum in two 16-byte loads, both in flight at once)
                const size_t o = a.w_off[l] + (size_t)(k0 + k) * IN + cc;
                float4 *wp = reinterpret_cast<float4 *>(a.params + o), *mp = reinterpret_cast<float4 *>(a.mbuf + o);
                float4 w = *wp, m = *mp;
                sgd_four(w, g, m, a.lr, a.mu, a.wd);
                *wp = w;
                *mp = m;
                if (keep) {
                    *reinterpret_cast<float4 *>(a.grads + o) = g;
                    if (a.params_tf32) *reinterpret_cast<float4 *>(a.params_tf32 + o) = mf_round_tf32(w);
                }
            }
        }
        __syncthreads();
    }
}

// The head layer's bias gradient db = Σ_b dz[b] with its SGD step (C <= 32: a lane a class, warps
// across the rows), and the step's mean loss into step_losses[s] (double sums in a fixed order)
__device__ __forceinline__ void fd_head_bias_loss(float *smem, const FusedDeepArgs &a, int bs, int s) {
    const int l = a.L - 1, C = a.sizes[l + 1], lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const float *dz = a.dacts[l + 1];
    float g = 0.0f;
    if (lane < C)
        for (int b = warp; b < bs; b += FD_THREADS / 32) g += dz[(size_t)b * C + lane];
    smem[warp * 32 + lane] = g;
    __syncthreads();
    if (warp == 0 && lane < C) {
        float t = smem[lane];
        for (int w = 1; w < FD_THREADS / 32; w++) t += smem[w * 32 + lane];
        a.grads[a.b_off[l] + lane] = t;
        sgd_one(a.params[a.b_off[l] + lane], t, a.mbuf[a.b_off[l] + lane], a.lr, a.mu, a.wd);
    }
    __syncthreads();
    double *shared = reinterpret_cast<double *>(smem);
    const double total = block_sum_fixed_order(a.losses, bs, shared);
    if (threadIdx.x == 0) a.step_losses[s] = (float)(total / bs);
    __syncthreads();
}

#endif  // MLP_FAST_DEEP_HEAD_CUH
