/*
kernels/fast/fused/fused_deep.cuh: a whole run of training steps of a model with two or more hidden layers
in one kernel (train_mlp_fast -f 2 where that is faster than the graphs, fused_deep_faster says
which; -f 3 wherever it can run; the one-hidden-layer FP32 model has its own,
kernels/fast/fused/fused_step.cuh).
CPU twins: gather_batch_cpu, model_forward_cpu, model_loss_cpu, model_backward_cpu and
model_update_cpu (train_mlp_cpu.c), one after the other; test_mlp compares every tensor they produce
after each step, and a run of steps in one launch against the same steps one launch each.

Why: the wide model's step (784,1024,1024,10 at batch 256) is about 1.4 billion multiply-adds, a few
microseconds of the tensor cores' time; as a graph of kernels (-f 1) it takes several times that,
most of it in the kernels' starts and ends along the step's critical path (each kernel waits for
the one before to drain, then fills the GPU again). Here one grid stays on the GPU for the whole
run, a block per SM, and a step is a sequence of phases with a grid-wide barrier between them.
It pays where each product is one wave of tiles over the SMs (the wide model at batch 256, in TF32
or BF16); elsewhere the graphs' kernels, which split K to fill the GPU and overlap the backward
products on three streams, are faster (doc/fast.md has the measurements).

What a phase is: a list of jobs (tiles of a matrix product, pairs of rows of the head with the
next batch's, column sums), job j done by block j mod (blocks), in order (but a phase's column jobs
on the blocks its tiles leave free, where they do). A tile is the
mma.sync kernel's own block tile (mf_mma_sums, kernels/fast/matmul/mma_tf32.cuh: the same sums, fragment
for fragment, as -f 1's kernels in that precision); its epilogue goes through shared memory, four
outputs a thread at a time (the bias and activation, act': epilogue.cuh's mf_epi_load and
mf_epi_apply; or the SGD step, on float4s). For a model of L layers (L - 1 hidden, the last layer
the head) a step is

  F_0 .. F_{L-2}  (l = 0 .. L-2) h_l = act(h_{l-1} · W_lᵀ + b_l), h_{-1} = x: tiles of B x OUT_l;
                  F_{L-2}'s tiles also leave their shares of the logits (fd_head_part)
  H               the head (fd_head_job): logits, loss, dz = dacts[L] and dh_{L-2} (with act'),
                  and the next step's batch gathered into the other of two batch buffers (the
                  images of the step after it prefetched to L2)
  D_l             (l = L-2 .. 0) if l > 0, dh_{l-1} = (dh_l · W_l) ⊙ act'(h_{l-1}): tiles of
                  B x IN_l; and the weight gradient and SGD step of hidden layer l + 1, dW =
                  dh_{l+1}ᵀ · h_l (tiles of OUT x IN with SGD in the epilogue); D_0 also layer 0's,
                  and after its tiles the column jobs: every bias gradient db = Σ_b dh (with its
                  step), the head layer's dW (C x IN, too few rows for tiles) and the mean loss
with a barrier after each phase (none after the last step's D_0). No buffer is written in a phase
in which another block may read it: W_l is read by F_l and by D_l (its dinp), and stepped in
D_{l-1} (or, for W_{L-1}, read by F_{L-2} and H and stepped in D_0); each activation and gradient is
written in one phase and read in later ones; the next batch goes to the buffer the step before
read. Every sum runs in a fixed order, so a run gives the same bits every time, and a run of n
steps the same bits as n runs of one.

Precision: -x 0 (FP32) runs the products as 3xTF32 (MF_TF32X3), within FP32's tolerances as on the
graph path's tuned shapes, and gathers the batch as its pixel bytes, which x's two products take as
byte / 255 with a TF32 product fewer (MF_FP32_PIXELS); -x 1 (TF32) rounds every operand as it
enters the tensor cores (MF_TF32_ROUND), stores x and the hidden activations rounded to TF32 and
keeps the weights' TF32 copy, as -f 1 does, so both paths compute the same products (on a Hopper
build the forward and dinp tiles read the stored activations or a rounded copy of the gradients,
and the FP32 weights, through the TMA instead, and round W as it goes into registers, each tile
split in K between the two blocks of a thread-block cluster: fd_tma_tile, deep_tma.cuh); -x 2 (BF16)
rounds the operands to BF16 (MF_BF16). The head, the losses, the sums over the batch and the SGD
steps are FP32 in all three.

Limits (fused_deep_plan): 3 to MAX_LAYERS layers, every width but the classes a multiple of 4 (the
tiles' 16-byte copies and the epilogue's float4s), C <= HEAD_MAX_C, B <= FD_MAX_B, hidden widths at
most FD_MAX_WIDTH (wider models and larger batches are the graph path's large tiles' work), and a
block per SM resident at once (a cooperative launch; with the split tiles, in clusters of two, as many
as the GPU holds at once).
*/
#ifndef MLP_FAST_FUSED_DEEP_CUH
#define MLP_FAST_FUSED_DEEP_CUH

#include "../../../common/mlp.h"  // MAX_LAYERS, PREC_*
#include "../../common.cuh"       // cudaCheck, CEIL_DIV
#include "deep_config.cuh"        // the tiles' sizes, FusedDeepArgs, FdTmaMaps
#include "deep_head.cuh"          // fd_gather, fd_head_job, fd_bias, fd_head_dweight, fd_head_bias_loss
#include "deep_tiles.cuh"         // fd_tile
#include "deep_tma.cuh"           // fd_tma_tile, fd_tma_init
#include "fused_step.cuh"         // FusedPlan

// ----------------------------------------------------------------------------
// the grid barrier and the kernel

// the grid barrier's arrivals since the launch began (fused_deep_steps zeroes it before each launch, in
// its stream: one launch of this kernel at a time on a device, as the trainer's one stream runs them)
__device__ unsigned fd_sync_count;

// A grid-wide barrier: every block's thread 0 adds its arrival (release at the GPU's scope: the block's
// stores before it, which the __syncthreads orders before the arrival, are seen by whoever sees the
// arrival) and waits until the count reaches this barrier's, target: gridDim.x more than the barrier
// before (acquire: every block's stores before it are seen after it). One atomic and a poll of one
// word, where cooperative_groups' grid.sync also fences the whole GPU before and after.
// TMA: this thread's stores before it (activations, the batch, W's SGD step) are read after it by
// other blocks' TMA, through the async proxy: the proxy fence orders them first.
template <bool TMA>
__device__ __forceinline__ void fd_grid_sync(unsigned &target) {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    if constexpr (TMA) mf_fence_proxy_async_global();
#endif
    __syncthreads();
    target += gridDim.x;
    if (threadIdx.x == 0) {
        asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(&fd_sync_count) : "memory");
        unsigned v;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(&fd_sync_count) : "memory");
        } while (v < target && (__nanosleep(FD_POLL_NS), true));   // (a pause between polls: fewer loads on
                                                                  // the word the last arrivals add to)
    }
    __syncthreads();
}

// TMA (-x 1 on a Hopper build; FusedPlan.tma): the forward tiles are fd_tma_tile's, through the maps
// in tm; else tm is unused.
template <int PREC, bool TMA, int KS>
__global__ void __launch_bounds__(FD_THREADS, 1) fused_deep_kernel(FusedDeepArgs a, const __grid_constant__ FdTmaMaps tm) {
    static_assert(KS == 1 || TMA, "K split only on the TMA tiles");
    unsigned sync_target = 0;   // fd_grid_sync's count
    extern __shared__ __align__(16) float fdsm[];
    const int G = gridDim.x, L = a.L, B = a.B, C = a.sizes[L];
    constexpr int TF32 = PREC == MF_TF32_ROUND;
    // FP32 takes the batch as its pixel bytes: x's products, F_0 and layer 0's weight gradient, are
    // then 3xTF32 one TF32 product shorter (MF_FP32_PIXELS, kernels/fast/matmul/matmul_fast.h)
    constexpr bool PIXELS = PREC == MF_TF32X3;
    constexpr int GATHER = TF32 ? GATHER_TF32 : PIXELS ? GATHER_PIXELS : GATHER_FP32;
    const int s0 = *a.step;   // every block reads it before its first barrier; block 0 moves it on after its last
    const int PP = fd_prof_points(L);
    long long *prof = a.prof ? a.prof + (size_t)blockIdx.x * a.n * PP : NULL;
    int ph = 0;   // the phase of the step (profile stamps)
#define FD_STAMP(end)                                                          \
    if (prof) {                                                                \
        __syncthreads();                                                       \
        if (threadIdx.x == 0) prof[(size_t)i * PP + 2 * ph + (end)] = clock64(); \
        ph += (end);                                                           \
    }

    unsigned tg = 0;   // the k-tiles through fd_tma_tile's stages so far
    if constexpr (TMA) fd_tma_init();   // (the grid barrier below orders it before the first tile)

    // the first step's batch into xbuf[0]
    {
        const int bs0 = a.n == 1 ? a.last_bs : B;
        for (int j = blockIdx.x; j < CEIL_DIV(bs0, FD_HEAD_ROWS); j += G) {
            int item[FD_HEAD_ROWS];
            fd_gather_items(a, s0, j * FD_HEAD_ROWS, bs0, item);
            fd_gather(a, a.xbuf[0], a.labbuf[0], item, j * FD_HEAD_ROWS, GATHER);
        }
    }
    fd_grid_sync<TMA>(sync_target);

    for (int i = 0; i < a.n; i++) {
        const int s = s0 + i, p = i % 2, bs = i == a.n - 1 ? a.last_bs : B;
        const int next_bs = i + 1 == a.n - 1 ? a.last_bs : B;
        float *x = a.xbuf[p];
        ph = 0;
        const int gather_bs = i + 1 < a.n ? next_bs : 0;

        // ---- F_0 .. F_{L-2}: the hidden layers
        for (int l = 0; l < L - 1; l++) {
            FD_STAMP(0);
            const int IN = a.sizes[l], OUT = a.sizes[l + 1];
            MatmulFastEpi epi;
            memset(&epi, 0, sizeof(epi));
            epi.kind = MF_EPI_FORWARD;
            epi.act = a.act;
            epi.bias = a.params + a.b_off[l];
            epi.round_out = TF32;
            // the last hidden layer's tiles also take their share of the head's logits
            const FdHeadPart hp = {a.params + a.w_off[L - 1], l == L - 2 ? a.head_part : nullptr, B, C};
            // (split: a tile's KS jobs, one a K slice, go to the KS blocks of a cluster: job j to block j
            // mod G, and G is a multiple of KS)
            const int tn = CEIL_DIV(OUT, FD_FB_BN), tiles = CEIL_DIV(bs, KS * FD_FB_BM) * tn * KS;
            for (int t = blockIdx.x; t < tiles; t += G) {
                if constexpr (TMA) {
                    const int u = t / KS;
                    fd_tma_tile<false, KS>(fdsm, tg, l == 0 ? &tm.x[p] : &tm.act[l], &tm.w[l], a.acts[l + 1], nullptr,
                                           bs, OUT, IN, (u / tn) * KS * FD_FB_BM, (u % tn) * FD_FB_BN, epi, hp);
                    continue;
                }
                if constexpr (PIXELS) {
                    if (l == 0) {
                        fd_tile<MF_FP32_PIXELS, true, true, FD_FB_BM, FD_FB_BN, FD_FB_BK, FD_FB_WM, FD_FB_WN, FD_FB_ST>(
                            fdsm, a.acts[1], x, a.params + a.w_off[0], bs, OUT, IN, (t / tn) * FD_FB_BM,
                            (t % tn) * FD_FB_BN, epi, true, hp);
                        continue;
                    }
                }
                fd_tile<PREC, true, true, FD_FB_BM, FD_FB_BN, FD_FB_BK, FD_FB_WM, FD_FB_WN, FD_FB_ST>(
                    fdsm, a.acts[l + 1], l == 0 ? x : a.acts[l], a.params + a.w_off[l], bs, OUT, IN,
                    (t / tn) * FD_FB_BM, (t % tn) * FD_FB_BN, epi, true, hp);
            }
            FD_STAMP(1);
            fd_grid_sync<TMA>(sync_target);
        }

        // ---- H: the head's rows, FD_HEAD_ROWS a job, and the next step's batch into the other buffer
        {
            FD_STAMP(0);
            // (and the rows of the step after the next, those of this run, prefetched to L2 for the next step's)
            const int pre_bs = i + 2 < a.n ? (i + 2 == a.n - 1 ? a.last_bs : B) : 0;
            const int jobs = CEIL_DIV(max(bs, gather_bs), FD_HEAD_ROWS);
            for (int j = blockIdx.x; j < jobs; j += G)
                fd_head_job(fdsm, a, j * FD_HEAD_ROWS, bs, a.labbuf[p], a.xbuf[1 - p], a.labbuf[1 - p], s, gather_bs,
                            pre_bs, GATHER);
            FD_STAMP(1);
            fd_grid_sync<TMA>(sync_target);
        }

        // ---- D_{L-2} .. D_0: the hidden layers' dinp, each layer's gradients and SGD steps. The
        // column jobs (every bias, and the head layer's weights, whose inputs are ready after H) all
        // go to D_0, after its tiles, onto the blocks the tiles leave free.
        for (int l = L - 2; l >= 0; l--) {
            FD_STAMP(0);
            const int IN = a.sizes[l], OUT = a.sizes[l + 1];
            // jobs, in this order: dinp tiles of layer l (l > 0); the weight-gradient tiles of hidden
            // layer l + 1 (l + 1 < L - 1), and of layer 0 (l == 0); the column jobs (l == 0)
            const int dn = CEIL_DIV(IN, FD_FB_BN), n_dinp = l > 0 ? CEIL_DIV(bs, KS * FD_FB_BM) * dn * KS : 0;
            const int wn1 = CEIL_DIV(OUT, FD_W_BN);
            const int n_w1 = l + 1 < L - 1 ? CEIL_DIV(a.sizes[l + 2], FD_W_BM) * wn1 : 0;
            const int wn0 = CEIL_DIV(IN, FD_W_BN), n_w0 = l == 0 ? CEIL_DIV(OUT, FD_W_BM) * wn0 : 0;
            int n_cols = 0;
            if (l == 0) {
                n_cols = CEIL_DIV(a.sizes[L - 1], FD_COLS) + 1;   // the head layer's weights, its bias and the loss
                for (int ll = 0; ll < L - 1; ll++) n_cols += CEIL_DIV(a.sizes[ll + 1], FD_COLS);
            }
            // Who takes which job: round robin over the blocks, job j on block j mod G; but where the
            // tiles are fewer than the blocks (D_0 of the wide model: 120 tiles on 132 SMs) and column
            // jobs follow, the column jobs go round robin over the blocks without a tile only, so that no
            // block runs a column job after its tile (that block's tile plus a column job was the phase)
            const int tiles = n_dinp + n_w1 + n_w0, jobs = tiles + n_cols;
            const bool apart = n_cols > 0 && tiles < G;
            const int stride = apart ? (blockIdx.x < tiles ? jobs : G - tiles) : G;
            for (int j = blockIdx.x; j < jobs; j += stride) {
                int k = j;
                if (k < n_dinp) {   // dacts[l] = (dacts[l + 1] · W_l) ⊙ act'(acts[l])
                    MatmulFastEpi epi;
                    memset(&epi, 0, sizeof(epi));
                    epi.kind = MF_EPI_DINP;
                    epi.act = a.act;
                    epi.aux = a.acts[l];
                    if constexpr (TMA) {
                        if (KS > 1 || a.tma_dinp) {   // (split: as the forward tiles)
                            const int u = k / KS;
                            fd_tma_tile<true, KS>(fdsm, tg, &tm.dout[l], &tm.wd[l], a.dacts[l], a.dacts_r[l], bs, IN,
                                                  OUT, (u / dn) * KS * FD_FB_BM, (u % dn) * FD_FB_BN, epi,
                                                  FdHeadPart{});
                            continue;
                        }
                    }
                    fd_tile<PREC, true, false, FD_FB_BM, FD_FB_BN, FD_FB_BK, FD_FB_WM, FD_FB_WN, FD_FB_ST>(
                        fdsm, a.dacts[l], a.dacts[l + 1], a.params + a.w_off[l], bs, IN, OUT,
                        (k / dn) * FD_FB_BM, (k % dn) * FD_FB_BN, epi, true);
                    continue;
                }
                k -= n_dinp;
                if (k < n_w1 + n_w0) {   // a weight gradient, its SGD step in the epilogue
                    const int ll = k < n_w1 ? l + 1 : 0;
                    if (ll == 0) k -= n_w1;
                    const int M = a.sizes[ll + 1], N = a.sizes[ll], wn = ll == 0 ? wn0 : wn1;
                    MatmulFastEpi epi;
                    memset(&epi, 0, sizeof(epi));
                    epi.kind = MF_EPI_SGD;
                    epi.sgd.param = a.params + a.w_off[ll];
                    epi.sgd.mbuf = a.mbuf + a.w_off[ll];
                    epi.sgd.lr = a.lr;
                    epi.sgd.mu = a.mu;
                    epi.sgd.wd = a.wd;
                    epi.sgd.param_tf32 = a.params_tf32 ? a.params_tf32 + a.w_off[ll] : NULL;
                    if constexpr (PIXELS) {
                        if (ll == 0) {
                            fd_tile<MF_FP32_PIXELS, false, false, FD_W_BM, FD_W_BN, fd_w_bk(PREC), FD_W_WM, FD_W_WN, FD_W_ST>(
                                fdsm, a.grads + a.w_off[0], a.dacts[1], x, M, N, bs, (k / wn) * FD_W_BM,
                                (k % wn) * FD_W_BN, epi, i == a.n - 1);
                            continue;
                        }
                    }
                    fd_tile<PREC, false, false, FD_W_BM, FD_W_BN, fd_w_bk(PREC), FD_W_WM, FD_W_WN, FD_W_ST>(
                        fdsm, a.grads + a.w_off[ll], a.dacts[ll + 1], ll == 0 ? x : a.acts[ll], M, N, bs,
                        (k / wn) * FD_W_BM, (k % wn) * FD_W_BN, epi, i == a.n - 1);
                    continue;
                }
                k -= n_w1 + n_w0;   // a column job (l == 0)
                const int n_hdw = CEIL_DIV(a.sizes[L - 1], FD_COLS);
                if (k < n_hdw) {
                    fd_head_dweight<PREC>(fdsm, a, bs, k * FD_COLS, i == a.n - 1);
                    continue;
                }
                k -= n_hdw;
                if (k == 0) {
                    fd_head_bias_loss(fdsm, a, bs, s);
                    continue;
                }
                k -= 1;
                for (int ll = 0; ll < L - 1; ll++) {   // hidden layer ll's bias
                    const int nb = CEIL_DIV(a.sizes[ll + 1], FD_COLS);
                    if (k < nb) {
                        fd_bias(fdsm, a, ll, a.dacts[ll + 1], bs, k * FD_COLS);
                        break;
                    }
                    k -= nb;
                }
            }
            FD_STAMP(1);
            if (l > 0 || i + 1 < a.n) fd_grid_sync<TMA>(sync_target);
        }
    }
#undef FD_STAMP
    if (blockIdx.x == 0 && threadIdx.x == 0) *a.step = s0 + a.n;
}

// ----------------------------------------------------------------------------
// the plan and the launcher

// the kernel's PREC (the matmul library's operand mode, MF_* of kernels/fast/matmul/matmul_fast.h: how
// the tiles round their operands) for the user's precision prec (PREC_* of common/mlp.h)
static inline constexpr int fused_deep_kernel_prec(int prec) {
    return prec == PREC_TF32 ? (int)MF_TF32_ROUND : prec == PREC_BF16 ? (int)MF_BF16 : (int)MF_TF32X3;
}

// the kernel of precision prec, with the TMA forward tiles or without
static inline const void *fused_deep_kernel_for(int prec, int tma) {
#if defined(MF_WGMMA)
    if (prec == PREC_TF32 && tma == 3) return (const void *)fused_deep_kernel<MF_TF32_ROUND, true, FD_KS>;
    if (prec == PREC_TF32 && tma) return (const void *)fused_deep_kernel<MF_TF32_ROUND, true, 1>;
#endif
    (void)tma;
    return prec == PREC_TF32 ? (const void *)fused_deep_kernel<MF_TF32_ROUND, false, 1>
         : prec == PREC_BF16 ? (const void *)fused_deep_kernel<MF_BF16, false, 1>
                     : (const void *)fused_deep_kernel<MF_TF32X3, false, 1>;
}

// which of -x 1's deep fused step's tiles take the TMA (FusedPlan.tma), as asked for: 3, the forward and
// the dinp tiles split in K between the blocks of clusters, on a Hopper build (MF_WGMMA) whose driver
// makes tensor maps (fused_deep_plan falls back to 2 where the GPU cannot hold the clusters); else 0, the
// mma.sync tiles alone. test_mlp asks for fewer (fused_deep_test_tiles), to keep those tiles checked too.
static int fd_test_tma = -1;    // -1: the default; 0, 1 (the forward tiles alone) or 2 (the forward and dinp
                                // tiles, no clusters): test_mlp's pick
static int fd_test_blocks = 0;  // > 0: test_mlp's cap on the kernel's blocks (fused_deep_plan)

// test_mlp's hook: the deep fused step's plans from now on take TMA level tma (-1: the default, else 0 to
// 2 as fused_deep_tma says) on at most `blocks` blocks (0: no cap; whole clusters), where each block
// then takes several jobs of a phase, as on a GPU with fewer SMs
static inline void fused_deep_test_tiles(int tma, int blocks) {
    fd_test_tma = tma;
    fd_test_blocks = blocks;
}

static inline int fused_deep_tma(int prec) {
#if defined(MF_WGMMA)
    if (prec != PREC_TF32 || !matmul_fast_target()->tma) return 0;
    if (fd_test_tma >= 0 && fd_test_tma <= 2) return fd_test_tma;
    return 3;
#else
    (void)prec;
    return 0;
#endif
}

// the tensor maps of fd_tma_tile's operands for the buffers in a (FdTmaMaps)
// (A's boxes: ks x FD_TMA_BB rows, where the tiles split K ks ways)
static inline void fd_tma_maps(FdTmaMaps *tm, const FusedDeepArgs *a, int ks) {
    for (int p = 0; p < 2; p++) mf_tensor_map(&tm->x[p], a->xbuf[p], a->B, a->sizes[0], ks * FD_TMA_BB);
    for (int l = 0; l < a->L - 1; l++) {
        if (l > 0) mf_tensor_map(&tm->act[l], a->acts[l], a->B, a->sizes[l], ks * FD_TMA_BB);
        mf_tensor_map(&tm->w[l], a->params + a->w_off[l], a->sizes[l + 1], a->sizes[l], FD_TMA_BO);
        if (l > 0 && a->tma_dinp) {
            mf_tensor_map(&tm->dout[l], a->dacts_r[l + 1], a->B, a->sizes[l + 1], ks * FD_TMA_BB);
            mf_tensor_map(&tm->wd[l], a->params + a->w_off[l], a->sizes[l + 1], a->sizes[l], 32);
        }
    }
}

// FusedDeepArgs.dacts_r for a model (sizes[0..L]) at batch B: the copies of layers 2 .. L - 1 one after
// another in one buffer at base, their pointers into dr[l] (dr NULL: none); returns the buffer's floats
static inline size_t fused_deep_dacts_r(const int *sizes, int L, int B, float *base, float **dr) {
    size_t off = 0;
    for (int l = 2; l < L; l++) {
        if (dr) dr[l] = base + off;
        off += (size_t)B * sizes[l];
    }
    return off;
}

// floats of FusedDeepArgs.head_part for a model (sizes[0..L]) at batch B
static inline size_t fused_deep_head_part_floats(const int *sizes, int L, int B) {
    return (size_t)FD_HEAD_TILES(sizes[L - 1]) * B * sizes[L];
}
static_assert(FD_HEAD_ROWS * (FD_MAX_WIDTH + (FD_MAX_WIDTH / FD_FB_BN + 1) * HEAD_MAX_C) <= FD_SMEM_FLOATS,
              "fd_head_job's rows of h, logits' shares and dz fit in the shared memory");

// a launch of the kernel on `blocks` blocks in stream: cooperative (every block at once, which the grid
// barrier needs), and with tma 3 in clusters of FD_KS blocks along x (the cluster attribute first)
static inline void fd_launch_config(cudaLaunchConfig_t *cfg, cudaLaunchAttribute *at, int blocks, size_t smem,
                                    cudaStream_t stream, int tma) {
    *cfg = cudaLaunchConfig_t{};
    at[0] = at[1] = cudaLaunchAttribute{};
    cfg->gridDim = dim3(blocks);
    cfg->blockDim = dim3(FD_THREADS);
    cfg->dynamicSmemBytes = smem;
    cfg->stream = stream;
    cfg->attrs = at;
    if (tma == 3) {
        at[cfg->numAttrs].id = cudaLaunchAttributeClusterDimension;
        at[cfg->numAttrs].val.clusterDim.x = FD_KS;
        at[cfg->numAttrs].val.clusterDim.y = 1;
        at[cfg->numAttrs].val.clusterDim.z = 1;
        cfg->numAttrs++;
    }
    at[cfg->numAttrs].id = cudaLaunchAttributeCooperative;
    at[cfg->numAttrs].val.cooperative = 1;
    cfg->numAttrs++;
}

// whether a model (sizes[0..L]) at batch B and precision prec fits this kernel on the GPU planned for
// (matmul_fast_target); the
// parameters' offsets (w_off, b_off of param_layout) must allow the float4 accesses
static inline FusedPlan fused_deep_plan(const int *sizes, int L, int B, int prec, const size_t *w_off,
                                        const size_t *b_off) {
    FusedPlan f;
    memset(&f, 0, sizeof(f));
    if (L < 3 || L > MAX_LAYERS)
        return snprintf(f.why, sizeof(f.why), "%d layers (the deep fused step takes 3 to %d)", L, MAX_LAYERS), f;
    if (prec < PREC_FP32 || prec > PREC_BF16) return snprintf(f.why, sizeof(f.why), "-x %d", prec), f;
    if (sizes[L] > HEAD_MAX_C)
        return snprintf(f.why, sizeof(f.why), "%d classes (at most %d)", sizes[L], HEAD_MAX_C), f;
    if (B > FD_MAX_B) return snprintf(f.why, sizeof(f.why), "batch %d (at most %d)", B, FD_MAX_B), f;
    for (int l = 0; l < L; l++) {
        if (sizes[l] % 4)
            return snprintf(f.why, sizeof(f.why), "a width of %d (a multiple of 4 is needed)", sizes[l]), f;
        if (l > 0 && sizes[l] > FD_MAX_WIDTH)
            return snprintf(f.why, sizeof(f.why), "%d hidden units in a layer (at most %d)", sizes[l], FD_MAX_WIDTH),
                   f;
        if (w_off[l] % 4 || b_off[l] % 4)
            return snprintf(f.why, sizeof(f.why), "layer %d's parameters not 16-byte aligned", l), f;
    }
    // (the GPU planned for: matmul_fast_target; a block of FD_THREADS threads fits an SM's registers, so
    // shared memory alone decides whether one fits)
    const int sms = matmul_fast_target()->sms, optin = matmul_fast_target()->smem_optin;
    f.tma = fused_deep_tma(prec);
    const size_t smem = sizeof(float) * (size_t)fd_smem_floats(fd_w_bk(fused_deep_kernel_prec(prec)));
    if (smem > (size_t)optin)
        return snprintf(f.why, sizeof(f.why), "%zu bytes of shared memory a block (the GPU has %d)", smem, optin), f;
    f.blocks = sms;
    if (f.tma == 3) {   // clusters of FD_KS blocks, a block an SM: as many as the GPU holds at once, else no clusters
        static_assert(FD_KS == 2, "the GPU's description counts clusters of two blocks (MfTarget.pair_clusters)");
        const int clusters = matmul_fast_target()->pair_clusters;
        if (2 * FD_KS * clusters < sms) f.tma = 2;
        else f.blocks = FD_KS * (clusters < sms / FD_KS ? clusters : sms / FD_KS);
    }
    // test_mlp's cap (fused_deep_test_tiles), in whole clusters
    const int ks = f.tma == 3 ? FD_KS : 1, n = fd_test_blocks / ks * ks;
    if (n >= ks && n < f.blocks) f.blocks = n;
    f.ok = 1;
    f.deep = 1;
    f.smem = smem;
    return f;
}

// Whether -f 2 takes this kernel for a model it can run (fused_deep_plan), on `blocks` blocks: TF32 or
// BF16, and every forward and dinp product one wave of tiles, at least half as many as blocks. With
// fewer tiles most SMs wait through each phase, where the graphs' kernels split K to fill the GPU; with
// more, a second wave doubles the phase; and FP32's 3xTF32 is three products a tile (doc/fast.md has
// the measurements). -f 3 runs it wherever it can.
static inline int fused_deep_faster(const int *sizes, int L, int B, int prec, int blocks) {
    if (prec != PREC_TF32 && prec != PREC_BF16) return 0;
    for (int l = 0; l < L - 1; l++) {
        const int f = CEIL_DIV(B, FD_FB_BM) * CEIL_DIV(sizes[l + 1], FD_FB_BN);   // F_l
        const int d = CEIL_DIV(B, FD_FB_BM) * CEIL_DIV(sizes[l], FD_FB_BN);       // D_l's dinp (l > 0)
        if (f > blocks || 2 * f < blocks) return 0;
        if (l > 0 && (d > blocks || 2 * d < blocks)) return 0;
    }
    return 1;
}

// n steps (the last with last_bs rows) of the model in a, from the device step counter on; f from
// fused_deep_plan for this GPU
static inline void fused_deep_steps(const FusedPlan *f, int prec, FusedDeepArgs *a, cudaStream_t stream) {
    FdTmaMaps tm;   // (the launch copies it)
    memset(&tm, 0, sizeof(tm));
    a->tma_dinp = f->tma >= 2;
    if (f->tma) fd_tma_maps(&tm, a, f->tma == 3 ? FD_KS : 1);
    void *args[] = {a, &tm};
    void *count = NULL;   // (the current device's: each has its own)
    cudaCheck(cudaGetSymbolAddress(&count, fd_sync_count));
    cudaCheck(cudaMemsetAsync(count, 0, sizeof(unsigned), stream));
    cudaLaunchConfig_t cfg;
    cudaLaunchAttribute at[2];
    fd_launch_config(&cfg, at, f->blocks, f->smem, stream, f->tma);
    const void *kernel = fused_deep_kernel_for(prec, f->tma);
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)f->smem));
    cudaCheck(cudaLaunchKernelExC(&cfg, kernel, args));
}

#endif  // MLP_FAST_FUSED_DEEP_CUH

