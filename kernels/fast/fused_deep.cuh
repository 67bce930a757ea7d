/*
kernels/fast/fused_deep.cuh: a whole run of training steps of a model with two or more hidden layers
in one kernel (train_mlp_fast -f 2 where that is faster than the graphs, fused_deep_faster says
which; -f 3 wherever it can run; the one-hidden-layer FP32 model has its own,
kernels/fast/fused_step.cuh).
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
products on three streams, are faster (dev/NOTES.md has the measurements).

What a phase is: a list of jobs (tiles of a matrix product, pairs of rows of the head with the
next batch's, column sums), job j done by block j mod (blocks), in order (but a phase's column jobs
on the blocks its tiles leave free, where they do). A tile is the
mma.sync kernel's own block tile (mf_mma_sums, kernels/fast/mma_tf32.cuh: the same sums, fragment
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
split in K between the two blocks of a thread-block cluster: fd_tma_tile below); -x 2 (BF16)
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

#include <stdint.h>

#include "../../common/mlp.h"     // MAX_LAYERS
#include "../activation.cuh"      // ACT_*
#include "../common.cuh"          // cudaCheck, CEIL_DIV
#include "../sgd.cuh"             // sgd_one, sgd_four
#include "../softmax_xent.cuh"    // block_sum_fixed_order
#include "configs.cuh"            // mf_smem_floats
#include "epilogue.cuh"           // mf_epi_load, mf_epi_apply
#include "fused_step.cuh"         // FusedPlan
#include "gather_fast.cuh"        // pixel_value
#include "head.cuh"               // HEAD_MAX_C
#include "mma_tf32.cuh"           // mf_mma_sums, mf_mma_stage, mf_ldsm_x4, mf_lds_f32
#include "wgmma_tma.cuh"          // mf_wgmma_tf32_n32, mf_tma_load, mf_tensor_map (fd_tma_tile)

#ifndef FD_POLL_NS
#define FD_POLL_NS 32       // ns the grid barrier's waiting threads sleep between polls of its count
#endif
#define FD_THREADS 256      // 8 warps: the tiles' warp layouts below
#define FD_MAX_B 512        // rows of a batch
#define FD_MAX_WIDTH 2048   // hidden units of a layer
#define FD_COLS 128         // columns of a column-sum job: a float4 a lane
#ifndef FD_COL_UNROLL
#define FD_COL_UNROLL 4     // rows a warp of a column job has in flight at once (fd_bias, fd_head_dweight)
#endif
constexpr int fd_col_unroll = FD_COL_UNROLL;   // (what the loops' unroll pragma can name)
// rows of the batch a job of the head's phase takes (fd_head_job), and rows of the next batch it
// gathers beside them (1, 2 or 4: the shared memory holds no more rows of the widest layer)
#ifndef FD_HEAD_ROWS
#define FD_HEAD_ROWS 2
#endif
#define FD_HDW_FLOATS (8 * 16 * 32 * 4 + FD_MAX_B * 16)   // fd_head_dweight's partial sums, then dz of 16 classes

// The tiles. Rows x columns of the product's output, K step, warp tile, pipeline stages (each may be
// given on nvcc's command line, for dev/fused_profile.cu's comparisons):
// forward and dinp products (B x OUT, B x IN: few rows, K the layer's width): 32 x 64 tiles, so
// that the wide model's B = 256 x 1024 outputs make 128 tiles, about one per SM (larger tiles, and
// K split between two blocks, measured no faster: dev/NOTES.md);
#ifndef FD_FB_BM
#define FD_FB_BM 32
#endif
#ifndef FD_FB_BN
#define FD_FB_BN 64
#endif
#ifndef FD_FB_BK
#define FD_FB_BK 32
#endif
#ifndef FD_FB_WM
#define FD_FB_WM 16
#endif
#ifndef FD_FB_WN
#define FD_FB_WN 16
#endif
#ifndef FD_FB_ST
#define FD_FB_ST 4
#endif
// weight gradients (OUT x IN, K = B): 128 x 128 tiles, 64 x 32 a warp (1024 x 1024 makes 64 tiles,
// 1024 x 784 56), their SGD step in the epilogue; K steps of FD_W_BK_TF32 in the TF32 kernel (the
// larger step was faster in its wide epoch; its pipeline then takes more shared memory, which the
// other precisions' kernels, not measured with it, do not ask for: fd_w_bk), FD_W_BK in the others.
#ifndef FD_W_BM
#define FD_W_BM 128
#endif
#ifndef FD_W_BN
#define FD_W_BN 128
#endif
#ifndef FD_W_BK
#define FD_W_BK 16
#endif
#ifndef FD_W_BK_TF32
#define FD_W_BK_TF32 32
#endif
#ifndef FD_W_WM
#define FD_W_WM 64
#endif
#ifndef FD_W_WN
#define FD_W_WN 32
#endif
#ifndef FD_W_ST
#define FD_W_ST 4
#endif
// R > 0: the TF32 kernel's weight-gradient tiles bring W and its momentum into shared memory by
// cp.async for their SGD epilogue, at most R float4s of each a thread a round (FdSgdStage); 0: loaded
// into registers a float4 at a time, as the other precisions' kernels do
#ifndef FD_SGD_STAGE_TF32
#define FD_SGD_STAGE_TF32 4
#endif
static_assert((FD_FB_BM / FD_FB_WM) * (FD_FB_BN / FD_FB_WN) * 32 == FD_THREADS, "8 warps a forward tile");
static_assert((FD_W_BM / FD_W_WM) * (FD_W_BN / FD_W_WN) * 32 == FD_THREADS, "8 warps a weight-gradient tile");
static_assert((FD_THREADS / 32) % FD_HEAD_ROWS == 0, "whole warps a row of the gather");

// the weight-gradient tiles' K step in a kernel of precision PREC (MF_FP32_PIXELS's tiles are the
// 3xTF32 kernel's)
__host__ __device__ constexpr int fd_w_bk(int prec) { return prec == MF_TF32_ROUND ? FD_W_BK_TF32 : FD_W_BK; }

// floats of dynamic shared memory of the kernel whose weight-gradient tiles step K by w_bk: the largest
// of the tiles' pipelines (the weight-gradient tile staged for its epilogue fits in its own), and the
// head layer's weight-gradient jobs (fd_head_dweight)
__host__ __device__ constexpr int fd_max(int a, int b) { return a > b ? a : b; }
__host__ __device__ constexpr int fd_smem_floats(int w_bk) {
    return fd_max(fd_max(mf_smem_floats(FD_FB_BM, FD_FB_BN, FD_FB_BK, FD_FB_ST, true, true, 8),
                         mf_smem_floats(FD_FB_BM, FD_FB_BN, FD_FB_BK, FD_FB_ST, true, false, 8)),
                  fd_max(mf_smem_floats(FD_W_BM, FD_W_BN, w_bk, FD_W_ST, false, false, 8), FD_HDW_FLOATS));
}
// the smallest of them, what every kernel has
#define FD_W_BK_MIN (FD_W_BK_TF32 < FD_W_BK ? FD_W_BK_TF32 : FD_W_BK)
#define FD_SMEM_FLOATS fd_smem_floats(FD_W_BK_MIN)

// where the last hidden layer's forward tiles keep W_{L-1}'s columns of their outputs (HEAD_MAX_C rows
// of FD_FB_BN + 4 floats: fd_head_w_load): the end of the dynamic shared memory, past the tiles' pipelines
__host__ __device__ constexpr int fd_head_w_off(int w_bk) { return fd_smem_floats(w_bk) - HEAD_MAX_C * (FD_FB_BN + 4); }
#define FD_HEAD_W_OFF fd_head_w_off(FD_W_BK_MIN)   // (the smallest)
static_assert(mf_smem_floats(FD_FB_BM, FD_FB_BN, FD_FB_BK, FD_FB_ST, true, true, 8) <= FD_HEAD_W_OFF,
              "the forward tiles' pipeline ends before W_{L-1}'s columns");

// what one launch needs: the model's buffers (train_mlp_fast.cu's Model), the data and the settings
typedef struct {
    float *params, *mbuf, *grads;          // the flat buffers (common/mlp.h param_layout)
    float *params_tf32;                    // -x 1: the weights rounded to TF32 (kept up to date); else NULL
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    float *acts[MAX_LAYERS + 1];           // the trainer's activations (acts[0] unused: the batch is xbuf[])
    float *dacts[MAX_LAYERS + 1];          // and their gradients
    float *dacts_r[MAX_LAYERS + 1];        // -x 1 with the dinp tiles on the TMA: dacts[l] rounded to TF32, for
                                           // l = 2 .. L - 1 (what those tiles read), else NULL
    float *xbuf[2];                        // the two batch buffers: step i of the run reads xbuf[i % 2]
    int *labbuf[2];                        // and its labels
    float *losses;                         // (B) per row
    float *head_part;                      // (FD_HEAD_TILES of the last hidden width, B, C): the head's logits,
                                           // each tile's share of the sum (fd_head_part)
    float *step_losses;                    // each step's mean loss, at step_losses[*step]
    int *step;                             // the device step counter: moved on by n
    const int *perm;                       // the epoch's permutation: step s takes rows perm[s*B ..]
    const uint8_t *images, *all_labels;    // the training set on the device (kernels/data.cuh)
    int L, sizes[MAX_LAYERS + 1], act, B;
    int n, last_bs;                        // n steps, the last with last_bs rows
    float lr, mu, wd;
    int tma_dinp;                          // the TMA kernel's dinp tiles on the TMA too (FusedPlan.tma 2)
    long long *prof;                       // NULL; dev/fused_profile.cu: clock64() stamps, for each block, step
                                           // and phase its start and the end of its jobs (fd_prof_points)
} FusedDeepArgs;

// -x 1's forward and dinp tiles on the TMA and wgmma (fd_tma_tile, on a Hopper build whose driver makes
// tensor maps): the same tiles as the mma.sync ones (FD_FB_BM rows of the batch x FD_FB_BN columns), so
// that the phases' jobs and fused_deep_faster's count are the same
#define FD_TMA_BB 32        // rows of the batch a tile (wgmma's N)
#define FD_TMA_BO 64        // columns of the output a tile (wgmma's M)
#define FD_TMA_ST 6         // pipeline stages of 32 k (128 bytes of a row: the swizzle's width)
// FusedPlan.tma 3: the forward and dinp tiles split in K between the FD_KS blocks of a thread-block
// cluster, each block FD_KS x FD_TMA_BB rows of the batch x FD_TMA_BO columns over a slice of K, the
// slices' sums added up through distributed shared memory (fd_tma_tile)
#define FD_KS 2             // (clusters of four: an H100 holds 30 of them a block an SM, too few: dev/NOTES.md)
#ifndef FD_TMA_ST_KS
#define FD_TMA_ST_KS 4      // their pipeline stages (16 KB each; four ran faster than five: dev/NOTES.md)
#endif
#define FD_TMA_ST_MAX fd_max(FD_TMA_ST, FD_TMA_ST_KS)
// stages and bytes of a stage (W's boxes, then A's) of the tiles that split K KS ways (1: none)
__host__ __device__ constexpr int fd_tma_st(int KS) { return KS == 1 ? FD_TMA_ST : FD_TMA_ST_KS; }
__host__ __device__ constexpr int fd_tma_stage(int KS) { return (FD_TMA_BO + KS * FD_TMA_BB) * 128; }
// bytes of shared memory of either kind: its stages (KS 1: and the staged sums after them; split: the
// partial sums and the reduced rows in the stages), 1024 to align them
#define FD_TMA_BYTES                                                                                       \
    fd_max(1024 + FD_TMA_ST * fd_tma_stage(1) + FD_TMA_BB * FD_TMA_BO * 4, 1024 + FD_TMA_ST_KS * fd_tma_stage(FD_KS))
static_assert(FD_TMA_ST_KS * fd_tma_stage(FD_KS) >= (FD_KS + 1) * FD_TMA_BB * FD_TMA_BO * 4,
              "the split tiles' partial sums and reduced rows fit in their stages");
static_assert(FD_TMA_BB == FD_FB_BM && FD_TMA_BO == FD_FB_BN, "the TMA tiles are the forward tiles' shape");
static_assert(FD_TMA_BYTES <= 4 * FD_HEAD_W_OFF, "the TMA tiles' stages fit in the kernel's shared memory, before "
                                                "W_{L-1}'s columns (fd_head_w_load)");

// the tensor maps of the TMA tiles' operands (fd_tma_maps), as the trainer keeps them (row-major): for
// the forward tiles the two batch buffers, the hidden activations (act[l]: acts[l], l >= 1) and the
// FP32 weights (w[l], boxes of FD_TMA_BO rows); for the dinp tiles the TF32 copies of the hidden
// layers' gradients (dout[l]: dacts_r[l + 1], l >= 1) and the weights again in boxes of 32 rows
// (wd[l]); a kernel parameter (__grid_constant__), where the TMA reads them
typedef struct {
    CUtensorMap x[2], act[MAX_LAYERS], w[MAX_LAYERS], dout[MAX_LAYERS], wd[MAX_LAYERS];
} FdTmaMaps;

// the stamps a step leaves in FusedDeepArgs.prof: a start and an end for each of its 2L - 1 phases
__host__ __device__ inline int fd_prof_points(int L) { return 2 * (2 * L - 1); }

// an operand as the tensor cores take it in precision PREC (the products of the head layer's weight
// gradient, which runs on the CUDA cores, round their operands as the tiles do): TF32 as mf_to_tf32,
// BF16 as mf_pack_bf16 rounds (to nearest, ties away from zero), 3xTF32's FP32 as it is
template <int PREC>
__device__ __forceinline__ float fd_operand(float x) {
    if constexpr (PREC == MF_TF32_ROUND) return __uint_as_float(mf_to_tf32(x));
    else if constexpr (PREC == MF_BF16) return __uint_as_float((__float_as_uint(x) + 0x8000u) & 0xFFFF0000u);
    else return x;
}

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

// One tile of a product, C (M, N) = epi(A . B), the layouts of MfProduct (A_KC, B_KC), at (m0, n0),
// all of K: the sums (mf_mma_sums), then through shared memory to the epilogue (fd_epi_tile). The SGD
// epilogue (a weight gradient) takes W and its momentum as float4s too, and stores the gradient itself
// (and W's TF32 copy, which the caller's other paths read; this kernel's TMA tiles round W as they
// read it) only when keep: the last step of a run, whose gradient the caller may read; the steps
// before it leave that traffic out.
#ifdef MF_PROF_LOOP
// dev/fused_profile.cu's tile profile only: for each block and kind of tile (0 forward and dinp, 1 weight
// gradient), the cycles of thread 0 in: the tile, its mainloop, the mainloop's waits, the wait for its
// first k step; and the tiles
static __device__ long long fd_prof_tile[1024][2][5];
#define FD_PROF_TILE_START                                      \
    const long long pt0 = clock64();                            \
    if (threadIdx.x == 0) mf_prof_wait[blockIdx.x] = mf_prof_first[blockIdx.x] = 0;
#define FD_PROF_TILE_LOOP const long long pt1 = clock64();
#define FD_PROF_TILE_END(kind)                                                       \
    if (threadIdx.x == 0) {                                                          \
        long long *q = fd_prof_tile[blockIdx.x][kind];                               \
        q[0] += clock64() - pt0;                                                     \
        q[1] += pt1 - pt0;                                                           \
        q[2] += mf_prof_wait[blockIdx.x];                                            \
        q[3] += mf_prof_first[blockIdx.x];                                           \
        q[4]++;                                                                      \
    }
#else
#define FD_PROF_TILE_START
#define FD_PROF_TILE_LOOP
#define FD_PROF_TILE_END(kind)
#endif

// The head's logits begin in the last hidden layer's forward tiles: each tile, once it has its outputs
// h (B x N, the layer's width N), adds up its share of z = h · W_{L-1}ᵀ, its BN columns of h times
// W_{L-1}'s, for its rows and every class, into part[tile column][row][class]; the head's phase then adds
// the FD_HEAD_TILES shares of each logit in order (fd_head_job). Why: the head's phase would otherwise
// read h and W_{L-1} again and add up 1024-long sums across each block before its softmax could start;
// here the products ride on the epilogue, with h already in shared memory.
typedef struct {
    const float *w;   // W_{L-1} (C, N)
    float *part;      // (FD_HEAD_TILES(N), B, C); NULL: not the last hidden layer's tile
    int B, C;
} FdHeadPart;
#define FD_HEAD_TILES(width) CEIL_DIV(width, FD_FB_BN)

// W_{L-1}'s columns n0 .. n0 + BN - 1 for every class into shared memory at ws, [class][BN + 4] (rows
// padded against bank conflicts; zeros past N, and a class of zeros after an odd C), as one group of
// asynchronous copies: a tile issues them at its start, and they land while it runs
template <int BN>
__device__ __forceinline__ void fd_head_w_load(const FdHeadPart &hp, float *ws, int N, int n0) {
    const unsigned sa = (unsigned)__cvta_generic_to_shared(ws);
    for (int t = threadIdx.x; t < (hp.C + 1) / 2 * 2 * (BN / 4); t += FD_THREADS) {
        const int c = t / (BN / 4), k4 = t % (BN / 4), n = n0 + 4 * k4;
        const bool ok = c < hp.C && n < N;
        mf_cp16(sa + 4u * (unsigned)(c * (BN + 4) + 4 * k4), ok ? hp.w + (size_t)c * N + n : hp.w, ok);
    }
    mf_cp_commit();
}

// The tile's share of the logits: h's rows m0 .. (their outputs n0 .. n0 + BN - 1, in shared memory at hs,
// rows BN apart, zeros past N) times ws's columns (fd_head_w_load), a thread two rows x two classes
// (each h and W value it loads used twice), the BN products of each logit added in order
template <int BM, int BN>
__device__ __forceinline__ void fd_head_part(const FdHeadPart &hp, const float *hs, const float *ws, int M, int m0,
                                             int tn) {
    static_assert(BM % 2 == 0, "rows in pairs");
    const int C = hp.C, CP = (C + 1) / 2;
    for (int t = threadIdx.x; t < BM / 2 * CP; t += FD_THREADS) {
        const int r = 2 * (t / CP), c = 2 * (t % CP);
        if (m0 + r >= M) break;
        const float4 *h0 = reinterpret_cast<const float4 *>(hs + r * BN), *h1 = h0 + BN / 4;
        const float4 *w0 = reinterpret_cast<const float4 *>(ws + c * (BN + 4)), *w1 = w0 + (BN + 4) / 4;
        float p00 = 0.0f, p01 = 0.0f, p10 = 0.0f, p11 = 0.0f;   // (row, class)
#pragma unroll 4
        for (int k = 0; k < BN / 4; k++) {
            const float4 a = h0[k], b = h1[k], u = w0[k], v = w1[k];
            p00 = fmaf(a.w, u.w, fmaf(a.z, u.z, fmaf(a.y, u.y, fmaf(a.x, u.x, p00))));
            p01 = fmaf(a.w, v.w, fmaf(a.z, v.z, fmaf(a.y, v.y, fmaf(a.x, v.x, p01))));
            p10 = fmaf(b.w, u.w, fmaf(b.z, u.z, fmaf(b.y, u.y, fmaf(b.x, u.x, p10))));
            p11 = fmaf(b.w, v.w, fmaf(b.z, v.z, fmaf(b.y, v.y, fmaf(b.x, v.x, p11))));
        }
        float *out = hp.part + ((size_t)tn * hp.B + m0 + r) * C + c;
        out[0] = p00;
        if (c + 1 < C) out[1] = p01;
        if (m0 + r + 1 < M) {
            out[C] = p10;
            if (c + 1 < C) out[C + 1] = p11;
        }
    }
}

// The forward or dinp epilogue (the bias and activation, or act') of a BM x BN tile of sums staged in
// shared memory (rows BN floats apart) into C (M, N) at (m0, n0): a float4 of outputs a thread at a
// time, the epilogue's loads for the four in flight together (N % 4 == 0). hp.part: the last hidden
// layer's forward tile (else NULL), whose outputs then go back into red (zeros outside the matrix) for
// its share of the logits (fd_head_part, with W's columns at ws: fd_head_w_load).
template <int BM, int BN>
__device__ __forceinline__ void fd_epi_tile(float4 *red, float *C, int M, int N, int m0, int n0,
                                            const MatmulFastEpi &epi, const FdHeadPart &hp, const float *ws,
                                            float *Cr = nullptr) {
#pragma unroll 2
    for (int e4 = threadIdx.x; e4 < BM * BN / 4; e4 += FD_THREADS) {
        const int m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
        if (m >= M || n >= N) {
            if (hp.part) red[e4] = make_float4(0.f, 0.f, 0.f, 0.f);
            continue;
        }
        MfEpiIn in[4];
#pragma unroll
        for (int j = 0; j < 4; j++) in[j] = mf_epi_load(m, n + j, N, epi);
        const float4 v = red[e4];
        float o[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; j++) o[j] = mf_epi_apply(o[j], in[j], m, n + j, N, epi);
        const float4 out = make_float4(o[0], o[1], o[2], o[3]);
        *reinterpret_cast<float4 *>(&C[(size_t)m * N + n]) = out;
        if (Cr) *reinterpret_cast<float4 *>(&Cr[(size_t)m * N + n]) = mf_round_tf32(out);
        if (hp.part) red[e4] = out;
    }
    if (hp.part) {
        __syncthreads();
        fd_head_part<BM, BN>(hp, reinterpret_cast<const float *>(red), ws, M, m0, n0 / BN);
    }
}

// The SGD step of W's float4 at i (mf_sgd_step_store4); keep (a run's last step) also the gradient into
// grad and the new W's TF32 copy, where there is one
__device__ __forceinline__ void fd_sgd_step4(const MatmulFastSgd &sg, float *grad, size_t i, float4 w, float4 mb,
                                             float4 g, bool keep) {
    mf_sgd_step_store4(sg, i, w, mb, g);
    if (keep) {
        *reinterpret_cast<float4 *>(grad + i) = g;
        if (sg.param_tf32) *reinterpret_cast<float4 *>(sg.param_tf32 + i) = mf_round_tf32(w);
    }
}

// The SGD epilogue's W and momentum through shared memory (FD_SGD_STAGE_TF32). A thread's float4s of
// the tile are e4 = threadIdx.x + e * FD_THREADS, e = 0 .. E4 - 1; a round stages R of them of W and R of
// the momentum, all of a round's copies in flight at once, where a float4 at a time from registers waits
// on each load in turn. Each thread reads back only what it copied (cp.async.wait_group makes a
// thread's own copies visible to it), so the rounds need no barrier. FREE: the floats of shared memory
// the tile leaves free after its staged sums; RMAX: FD_SGD_STAGE_TF32.
template <int BM, int BN, int FREE, int RMAX>
struct FdSgdStage {
    static constexpr int E4 = BM * BN / 4 / FD_THREADS;
    static constexpr int fit(int r) {   // the largest power of two up to r that divides E4 and fits
        return (E4 % r == 0 && 2 * r * 4 * FD_THREADS <= FREE) || r == 1 ? r : fit(r / 2);
    }
    static constexpr int R = fit(RMAX < E4 ? RMAX : E4);
    static_assert(2 * R * 4 * FD_THREADS <= FREE, "a round's copies fit past the staged sums");

    // round r0 / R's copies into st (R float4s of W, then R of the momentum, FD_THREADS apart)
    __device__ __forceinline__ static void issue(float *st, const MatmulFastSgd &sg, int M, int N, int m0, int n0,
                                                 int r0) {
#pragma unroll
        for (int b = 0; b < R; b++) {
            const int e4 = threadIdx.x + (r0 + b) * FD_THREADS, m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
            const bool ok = m < M && n < N;
            const size_t i = ok ? (size_t)m * N + n : 0;
            mf_cp16(st + 4 * (b * FD_THREADS + threadIdx.x), sg.param + i, ok);
            mf_cp16(st + 4 * ((R + b) * FD_THREADS + threadIdx.x), sg.mbuf + i, ok);
        }
        mf_cp_commit();
    }
};

template <int PREC, bool A_KC, bool B_KC, int BM, int BN, int BK, int WM, int WN, int ST>
__device__ __forceinline__ void fd_tile(float *smem, float *C, const float *A, const float *B, int M, int N, int K,
                                        int m0, int n0, const MatmulFastEpi &epi, bool keep,
                                        const FdHeadPart &hp = FdHeadPart{}) {
    FD_PROF_TILE_START
    constexpr int W_OFF = fd_head_w_off(fd_w_bk(PREC));
    if (hp.part) fd_head_w_load<BN>(hp, smem + W_OFF, N, n0);   // (landed by the mainloop's last wait)
    float acc[WM / 16][WN / 8][4];
    mf_mma_sums<BM, BN, BK, WM, WN, ST, A_KC, B_KC, PREC>(acc, smem, A, B, M, N, K, m0, n0, 0, K, true);
    FD_PROF_TILE_LOOP
    // The staged SGD epilogue (the TF32 kernel's weight-gradient tiles): its first round's copies go out
    // before the sums are staged, into the shared memory past them, which the mainloop has left free
    // (the head's W region at the end among it: only a forward tile uses that, within the tile).
    constexpr int SGD_FREE = fd_smem_floats(fd_w_bk(PREC)) - BM * BN;
    using Stage = FdSgdStage<BM, BN, SGD_FREE, (FD_SGD_STAGE_TF32 > 0 ? FD_SGD_STAGE_TF32 : 1)>;
    constexpr bool STAGED = FD_SGD_STAGE_TF32 > 0 && PREC == MF_TF32_ROUND && BM == FD_W_BM && BN == FD_W_BN;
    float *sgd_st = smem + BM * BN;
    if (STAGED && epi.kind == MF_EPI_SGD) Stage::issue(sgd_st, epi.sgd, M, N, m0, n0, 0);
    mf_mma_stage<BM, BN, WM, WN>(acc, smem);
    __syncthreads();
    float4 *red = reinterpret_cast<float4 *>(smem);
    if (STAGED && epi.kind == MF_EPI_SGD) {
        const MatmulFastSgd &sg = epi.sgd;
        const float4 *sw = reinterpret_cast<const float4 *>(sgd_st);
        for (int r0 = 0; r0 < Stage::E4; r0 += Stage::R) {
            if (r0 > 0) Stage::issue(sgd_st, sg, M, N, m0, n0, r0);   // (the round before has been used)
            mf_cp_wait<0>();
#pragma unroll
            for (int b = 0; b < Stage::R; b++) {
                const int e4 = threadIdx.x + (r0 + b) * FD_THREADS, m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
                if (m >= M || n >= N) continue;
                const size_t i = (size_t)m * N + n;
                fd_sgd_step4(sg, C, i, sw[b * FD_THREADS + threadIdx.x], sw[(Stage::R + b) * FD_THREADS + threadIdx.x],
                             red[e4], keep);
            }
        }
    } else if (epi.kind == MF_EPI_SGD) {
        const MatmulFastSgd &sg = epi.sgd;
#pragma unroll 2
        for (int e4 = threadIdx.x; e4 < BM * BN / 4; e4 += FD_THREADS) {
            const int m = m0 + e4 * 4 / BN, n = n0 + e4 * 4 % BN;
            if (m >= M || n >= N) continue;
            const size_t i = (size_t)m * N + n;
            fd_sgd_step4(sg, C, i, *reinterpret_cast<const float4 *>(sg.param + i),
                         *reinterpret_cast<const float4 *>(sg.mbuf + i), red[e4], keep);
        }
    } else {
        fd_epi_tile<BM, BN>(red, C, M, N, m0, n0, epi, hp, smem + W_OFF);
    }
    __syncthreads();   // the shared memory is the next job's
    FD_PROF_TILE_END(BM == FD_W_BM && BN == FD_W_BN ? 1 : 0)
}

#if defined(MF_WGMMA)
// fd_tma_tile's barriers: full[s] (the copier's arrival and the stage's bytes), then empty[s] (the
// products' arrival once they are done with the stage); outside the dynamic shared memory, which the
// other jobs use for their own arrays
static __shared__ unsigned long long fd_tma_bar[2 * FD_TMA_ST_MAX];
#endif

// keeps the registers of one k step's W fragments (fd_tma_tile) from the compiler's other uses until
// here, as mf_wg_pin does an accumulator's: wgmma reads them while it runs (init: zeroed first, so that
// the first pin reads defined values)
__device__ __forceinline__ void fd_pin_frag(uint32_t (&f)[4], bool init) {
#pragma unroll
    for (int e = 0; e < 4; e++) {
        if (init) f[e] = 0u;
        asm volatile("" : "+r"(f[e]));
    }
}

// fd_tma_tile's barriers initialised, once a launch, by thread 0, before the first grid barrier
__device__ __forceinline__ void fd_tma_init() {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    if (threadIdx.x == 0) {
        const unsigned bars = (unsigned)__cvta_generic_to_shared(fd_tma_bar);
        for (int s = 0; s < FD_TMA_ST_MAX; s++) {
            mf_mbar_init(bars + 8 * s, 1);
            mf_mbar_init(bars + 8 * (FD_TMA_ST_MAX + s), 4);   // (each products warp: fd_tma_tile)
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
#endif
}

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

// One forward or dinp tile of -x 1 on the TMA and wgmma, C (M, N) = epi(A · Wᵀ) (forward: W (N, K) as
// the trainer keeps it) or epi(A · W) (DINP: W (K, N)), at rows m0 .. m0 + R - 1 of the batch (R = 32 KS)
// and columns n0 .. n0 + 63: all of K (KS 1), or split in K between the KS blocks of this block's
// thread-block cluster (KS 2: FusedPlan.tma 3), this one, of rank r, taking the r-th of KS slices of
// the k-tiles and, in the end, rows m0 + 32 r .. m0 + 32 r + 31 of the tile. A (M, K) holds TF32 values:
// the batch and the hidden activations are stored rounded, and so is the copy of each hidden layer's
// gradient that the dinp tiles read (dacts_r); W holds the FP32 weights, rounded as they enter the
// products. Operands through the tensor maps tmA (boxes of 32 k x R rows) and tmW (forward: 32 k x 64
// rows; DINP: 32 k rows x 32 columns, two a stage), 128-byte swizzle, zeros outside the matrix.
// Why: the mma.sync tiles (fd_tile) read their operands through cp.async and are bound by those reads;
// the TMA brings the same boxes with no thread's help (dev/cuda/phase_tma.cu, dev/NOTES.md). wgmma
// reads A's box from shared memory as it lies (K-major), and W's products from registers: there
// wgmma takes any layout (the dinp's W is N-major, which wgmma cannot read from shared memory in TF32)
// and the values rounded to TF32 first (wgmma itself would truncate FP32 ones), so W needs no TF32
// copy for the TMA to read (7.4 MB of stores a step in the wide model) and no pass over the stage to
// round it (dev/NOTES.md has both). Why the split: these phases are bound by the bytes the SMs take
// in from L2, A's rows re-read by every column of tiles and W's by every row; a block with a 64-row
// tile over half of K takes in a third fewer bytes for the same products as one with a 32-row tile over
// all of it, and the two halves' sums meet through distributed shared memory, 8 KB a block.
// Who does what: thread 128 (warp 4) is the copier: for each k-tile it waits until its stage is free,
// arms the stage's full barrier with its bytes and asks the TMA for the boxes. Warpgroup 0 (threads
// 0-127) runs the products as Wᵀ's tile times A's, wgmma.m64nRk8 (the tile's columns are wgmma's M,
// the rows of the batch its N): for each k-tile, once the stage has landed, each warp loads its 16
// columns x 32 k of W (ldmatrix from the forward's K-major box, single floats from the dinp's N-major
// ones), rounds them (round_tf32's rounding) and hands them to wgmma with A's box; the stage is free
// once each of the four warps has arrived on its empty barrier, after its wgmma.wait_group says its own
// products that read the stage are done (wait_group speaks for its warp alone). Then the sums go
// through shared memory (transposed to rows of the batch; split: the
// partial sums of all R rows over the stages, a cluster barrier, then this block's 32 rows added up
// from every block of the cluster in the order of the ranks, the same bits on every run) to
// fd_epi_tile, by all the block's threads (the dinp epilogue also stores Cr, its output rounded, where
// the next dinp reads it). g counts the k-tiles this block has taken through the stages since the
// launch: k-tile g uses stage g % ST in that barrier's (g / ST)-th phase, whose parity each wait
// names; the copier and the products keep the same count.
// A stage (from the 1024-aligned base): W's 64 columns x 32 k (forward: one box of 64 rows; DINP: two
// boxes of 32 k rows x 32 columns), then A's box; the sums after the stages (split: in them).
template <bool DINP, int KS>
__device__ __forceinline__ void fd_tma_tile(float *smem, unsigned &g, const CUtensorMap *tmA, const CUtensorMap *tmW,
                                            float *C, float *Cr, int M, int N, int K, int m0, int n0,
                                            const MatmulFastEpi &epi, const FdHeadPart &hp) {
#if defined(MF_WGMMA) && defined(__CUDA_ARCH__)
    constexpr int ST = fd_tma_st(KS), STAGE = fd_tma_stage(KS), R = KS * FD_TMA_BB;   // R: rows of A's box
    static_assert(FD_TMA_BB == 32 && FD_TMA_BO == 64 && (KS == 1 || KS == 2),
                  "a stage holds W's 64 columns x 32 k (8192 bytes), then A's 32 or 64 rows x 32 k");
    const unsigned sraw = (unsigned)__cvta_generic_to_shared(smem);
    const unsigned sbase = sraw + ((1024u - (sraw & 1023u)) & 1023u);   // swizzle atoms 1024-byte aligned
    const unsigned bars = (unsigned)__cvta_generic_to_shared(fd_tma_bar);
    unsigned char *stages = reinterpret_cast<unsigned char *>(smem) + (sbase - sraw);
    // the sums, [row of the batch][output]: KS 1, after the stages; split, this block's partial sums of
    // all R rows over the stages (free once the products are done), its reduced 32 rows after them
    float *out = reinterpret_cast<float *>(stages + (KS == 1 ? ST * STAGE : R * FD_TMA_BO * 4));
    float *part = KS == 1 ? out : reinterpret_cast<float *>(stages);
    const unsigned rank = KS == 1 ? 0 : mf_cluster_rank();
    const int tid = threadIdx.x, ntk = CEIL_DIV(K, 32), t0 = (int)rank * ntk / KS;
    const int nt = ((int)rank + 1) * ntk / KS - t0;   // this block's k-tiles: t0 .. t0 + nt - 1 (nt may be 0)
    constexpr int W_OFF = fd_head_w_off(fd_w_bk(MF_TF32_ROUND));   // (a TF32 kernel's tile)
    if (hp.part) fd_head_w_load<FD_TMA_BO>(hp, smem + W_OFF, N, n0);   // (waited for before the epilogue)
    float acc[16 * KS];   // the products' sums (warpgroup 0)
#pragma unroll
    for (int i = 0; i < 16 * KS; i++) acc[i] = 0.0f;
    mf_fence_proxy_async();   // the jobs before wrote this shared memory through the generic proxy: their
    __syncthreads();          // accesses ordered before the TMA's writes
    if (tid == 128) {
        mf_fence_proxy_async_global();   // (the operands: other blocks' stores before the grid barrier)
        for (int t = 0; t < nt; t++) {
            const unsigned G = g + t, s = G % ST, k = 32 * (t0 + t);
            const unsigned full = bars + 8 * s, sa = sbase + s * STAGE;
            if (G >= ST) mf_mbar_wait(bars + 8 * (FD_TMA_ST_MAX + s), ((G / ST) + 1) & 1);   // freed
            mf_mbar_expect_tx(full, STAGE);
            if constexpr (DINP) {
                mf_tma_load(sa, tmW, n0, k, full);
                mf_tma_load(sa + 4096, tmW, n0 + 32, k, full);
            } else {
                mf_tma_load(sa, tmW, k, n0, full);
            }
            mf_tma_load(sa + 8192, tmA, k, m0, full);
        }
    } else if (tid < 128) {
        // forward: this lane's row of W's box for ldmatrix (rows 16 w + 0..15 of warp w, the k chunk after
        // for lanes 16-31). DINP (below, o): where its elements lie, (column c, k) = (n, q), (n + 8, q),
        // (n, q + 4) and (n + 8, q + 4) of each k step, n = 16 w + gq: in box c / 32 at row k, 16-byte chunk
        // (c % 32) / 4 ^ (k % 8) (the swizzle). o is the first's address at k step 0; the others' differ
        // from it in the chunk (n's and n + 8's chunks, (n % 32) / 4 in {0, 1, 4, 5} and that + 2, differ
        // in bit 1; q's and q + 4's in bit 2) and by 4 rows for q + 4; each k step adds 8 rows, 1024
        // bytes, and leaves k % 8 as it was (the stage is 1024-byte aligned: the XORs touch the offset alone).
        const int r = 16 * (tid / 32) + (tid & 7) + ((tid >> 3) & 1) * 8, hi = (tid >> 4) & 1;
        // W's fragments of the four k steps, rounded to TF32 (round_tf32). wgmma reads its A registers
        // while it runs, until a wait_group says it is done, so a k-tile's fragments are loaded only once
        // the wait says the last k-tile's products are done, and they are pinned (fd_pin_frag) there,
        // which keeps the compiler from giving their registers to anything else while the products run.
        // (Where the next k-tile's loads came after a wait that left the last products running, they
        // overwrote registers those were still reading: compute-sanitizer's memcheck, which slows the
        // warps, saw wrong sums. Loads in flight beside the products, in two sets or in smaller groups,
        // were slower than this, and so was the stage freed before the wait for the next one's bytes
        // rather than after it: dev/NOTES.md.)
        uint32_t af[4][4];
#pragma unroll
        for (int ks = 0; ks < 4; ks++) fd_pin_frag(af[ks], true);
        for (int t = 0; t < nt; t++) {
            const unsigned G = g + t, s = G % ST;
            mf_mbar_wait(bars + 8 * s, (G / ST) & 1);   // the stage's bytes have landed
            // this warp's products of k-tile t - 1 are done: its fragments are free, and so is its stage
            // once every warp has arrived
            mf_wg_wait<0>();
#pragma unroll
            for (int ks = 0; ks < 4; ks++) fd_pin_frag(af[ks], false);
            if (t >= 1 && (tid & 31) == 0) mf_mbar_arrive(bars + 8 * (FD_TMA_ST_MAX + (G - 1) % ST));
            const float *Ws = reinterpret_cast<const float *>(stages + s * STAGE);
            const unsigned sw = sbase + s * STAGE, sx = sw + 8192;
            unsigned o = 0;
            if constexpr (DINP) {   // (made here at each k-tile from tid: kept, it cost the kernel registers it spilled)
                unsigned u = tid;
                asm volatile("" : "+r"(u));
                const unsigned c0 = 16 * (u / 32) + (u % 32) / 4, q = u % 4;
                o = sw + 4u * ((c0 / 32) * 1024 + q * 32 + ((((c0 % 32) >> 2) ^ q) << 2) + (c0 & 3));
            }
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                if constexpr (DINP) {
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        af[ks][e] = mf_to_tf32(mf_lds_f32((o ^ (32u * (e & 1) + 64u * (e >> 1))) + 512u * (e >> 1) + 1024u * ks));
                } else {
                    mf_ldsm_x4(af[ks], Ws + r * 32 + (((2 * ks + hi) ^ (r & 7)) * 4));
#pragma unroll
                    for (int e = 0; e < 4; e++) af[ks][e] = mf_to_tf32(__uint_as_float(af[ks][e]));
                }
            }
            mf_wg_fence();
#pragma unroll
            for (int ks = 0; ks < 4; ks++) {
                const uint64_t db = mf_wgb16_desc(sx + ks * 32, false);
                if constexpr (KS == 1) mf_wgmma_tf32_n32_rs(acc, af[ks], db);
                else mf_wgmma_tf32_n64_rs(acc, af[ks], db);
            }
            mf_wg_commit();
        }
        mf_wg_wait<0>();
#pragma unroll
        for (int ks = 0; ks < 4; ks++) fd_pin_frag(af[ks], false);
        if (nt > 0 && (tid & 31) == 0) mf_mbar_arrive(bars + 8 * (FD_TMA_ST_MAX + (g + nt - 1) % ST));
        if constexpr (KS == 1) mf_wg_n32_store_t(out, FD_TMA_BO, acc, tid);   // (after the stages)
    }
    g += nt;
    mf_cp_wait<0>();   // (W_{L-1}'s columns: fd_head_w_load)
    if constexpr (KS > 1) {
        // the tile's KS partial sums, one a block of the cluster, stored over the stages once every warp's
        // products are done with them (a warp's wait_group speaks for its own products alone); then this
        // block adds up rows 32 rank .. 32 rank + 31 of them from every block's shared memory, in the order
        // of the ranks (the same bits on every run), into out. (The cluster barrier's .aligned form wants
        // whole warps: the copier's warp came apart above, the __syncthreads brings it together.)
        __syncthreads();
        if (tid < 128) {
#pragma unroll
            for (int j = 0; j < KS; j++) mf_wg_n32_store_t(part + j * FD_TMA_BB * FD_TMA_BO, FD_TMA_BO, acc + 16 * j, tid);
        }
        __syncthreads();
        mf_cluster_arrive();
        mf_cluster_wait();   // every block's partial sums are in its shared memory
        const unsigned pa = (unsigned)__cvta_generic_to_shared(part) + rank * (FD_TMA_BB * FD_TMA_BO * 4);
        if (m0 + (int)rank * FD_TMA_BB < M) {
#pragma unroll
            for (int i = tid; i < FD_TMA_BB * FD_TMA_BO / 4; i += FD_THREADS) {
                float4 v[KS];
#pragma unroll
                for (int z = 0; z < KS; z++) v[z] = mf_lds_cluster_f4(pa + 16u * i, z);
#pragma unroll
                for (int z = 1; z < KS; z++) {
                    v[0].x += v[z].x;
                    v[0].y += v[z].y;
                    v[0].z += v[z].z;
                    v[0].w += v[z].w;
                }
                reinterpret_cast<float4 *>(out)[i] = v[0];
            }
        }
        mf_cluster_arrive();   // this block is done with the others' shared memory (waited for below)
    }
    __syncthreads();
    fd_epi_tile<FD_TMA_BB, FD_TMA_BO>(reinterpret_cast<float4 *>(out), C, M, N, m0 + (int)rank * FD_TMA_BB, n0, epi,
                                      hp, smem + W_OFF, Cr);
    __syncthreads();   // the shared memory is the next job's (split: once the others are done with it too)
    if constexpr (KS > 1) mf_cluster_wait();
#endif
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
// the three steps. (W is read from L2 where it is used: staged in shared memory, or in registers from
// the job's start, it made the phase slower, dev/NOTES.md.)
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
    // then 3xTF32 one TF32 product shorter (MF_FP32_PIXELS, kernels/fast/matmul_fast.h)
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
#ifdef FD_PROF_RAW_EPI   // dev/fused_profile.cu's comparison only: the gradient stored, no SGD step (wrong results)
                    epi.kind = MF_EPI_RAW;
#endif
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

// the kernel's PREC for precision prec (PREC_* of common/mlp.h: 0 FP32, 1 TF32, 2 BF16)
static inline constexpr int fused_deep_kernel_prec(int prec) {
    return prec == 1 ? (int)MF_TF32_ROUND : prec == 2 ? (int)MF_BF16 : (int)MF_TF32X3;   // (two enums)
}

// the kernel of precision prec, with the TMA forward tiles or without
static inline const void *fused_deep_kernel_for(int prec, int tma) {
#if defined(MF_WGMMA)
    if (prec == 1 && tma == 3) return (const void *)fused_deep_kernel<MF_TF32_ROUND, true, FD_KS>;
    if (prec == 1 && tma) return (const void *)fused_deep_kernel<MF_TF32_ROUND, true, 1>;
#endif
    (void)tma;
    return prec == 1 ? (const void *)fused_deep_kernel<MF_TF32_ROUND, false, 1>
         : prec == 2 ? (const void *)fused_deep_kernel<MF_BF16, false, 1>
                     : (const void *)fused_deep_kernel<MF_TF32X3, false, 1>;
}

// which of -x 1's deep fused step's tiles take the TMA (FusedPlan.tma), as asked for: 3, the forward and
// the dinp tiles split in K between the blocks of clusters, on a Hopper build (MF_WGMMA) whose driver
// makes tensor maps (fused_deep_plan falls back to 2 where the GPU cannot hold the clusters); else 0, the
// mma.sync tiles alone. MLP_FUSED_TMA=0, 1 (the forward tiles alone) or 2 (the forward and dinp tiles,
// no clusters) for comparisons and test_mlp.
static inline int fused_deep_tma(int prec) {
#if defined(MF_WGMMA)
    if (prec != 1 || mf_tma_encoder() == NULL) return 0;
    const char *env = getenv("MLP_FUSED_TMA");
    if (env && env[0] >= '0' && env[0] <= '2' && env[1] == 0) return env[0] - '0';
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

// whether a model (sizes[0..L]) at batch B and precision prec fits this kernel on the current GPU; the
// parameters' offsets (w_off, b_off of param_layout) must allow the float4 accesses
static inline FusedPlan fused_deep_plan(const int *sizes, int L, int B, int prec, const size_t *w_off,
                                        const size_t *b_off) {
    FusedPlan f;
    memset(&f, 0, sizeof(f));
    if (L < 3 || L > MAX_LAYERS)
        return snprintf(f.why, sizeof(f.why), "%d layers (the deep fused step takes 3 to %d)", L, MAX_LAYERS), f;
    if (prec < 0 || prec > 2) return snprintf(f.why, sizeof(f.why), "-x %d", prec), f;
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
    int dev, sms, optin;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    f.tma = fused_deep_tma(prec);
    const size_t smem = sizeof(float) * (size_t)fd_smem_floats(fd_w_bk(fused_deep_kernel_prec(prec)));
    if (smem > (size_t)optin)
        return snprintf(f.why, sizeof(f.why), "%zu bytes of shared memory a block (the GPU has %d)", smem, optin), f;
    const void *kernel = fused_deep_kernel_for(prec, f.tma);
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    cudaCheck(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, FD_THREADS, smem));
    if (per_sm < 1)
        return snprintf(f.why, sizeof(f.why), "a block of %d threads and %zu bytes does not fit an SM", FD_THREADS,
                        smem), f;
    f.blocks = sms;
    if (f.tma == 3) {   // clusters of FD_KS blocks, a block an SM: as many as the GPU holds at once, else no clusters
        cudaLaunchConfig_t cfg;
        cudaLaunchAttribute at[2];
        fd_launch_config(&cfg, at, sms / FD_KS * FD_KS, smem, 0, 3);
        cfg.numAttrs = 1;   // (the query takes no cooperative attribute)
        int clusters = 0;
        if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess || 2 * FD_KS * clusters < sms) {
            (void)cudaGetLastError();   // (a failed query: no clusters)
            f.tma = 2;
            kernel = fused_deep_kernel_for(prec, f.tma);
            cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        } else {
            f.blocks = FD_KS * (clusters < sms / FD_KS ? clusters : sms / FD_KS);
        }
    }
    // MLP_FUSED_BLOCKS=n: at most n blocks (whole clusters), for test_mlp: each block then takes several
    // jobs of a phase, as on a GPU with fewer SMs
    const char *cap = getenv("MLP_FUSED_BLOCKS");
    const int ks = f.tma == 3 ? FD_KS : 1, n = cap ? atoi(cap) / ks * ks : 0;
    if (n >= ks && n < f.blocks) f.blocks = n;
    f.ok = 1;
    f.deep = 1;
    f.smem = smem;
    return f;
}

// Whether -f 2 takes this kernel for a model it can run (fused_deep_plan), on `blocks` blocks: TF32 or
// BF16, and every forward and dinp product one wave of tiles, at least half as many as blocks. With
// fewer tiles most SMs wait through each phase, where the graphs' kernels split K to fill the GPU; with
// more, a second wave doubles the phase; and FP32's 3xTF32 is three products a tile (measured on an
// H100, the wide model and others: dev/NOTES.md). -f 3 runs it wherever it can.
static inline int fused_deep_faster(const int *sizes, int L, int B, int prec, int blocks) {
    if (prec != 1 && prec != 2) return 0;
    for (int l = 0; l < L - 1; l++) {
        const int f = CEIL_DIV(B, FD_FB_BM) * CEIL_DIV(sizes[l + 1], FD_FB_BN);   // F_l
        const int d = CEIL_DIV(B, FD_FB_BM) * CEIL_DIV(sizes[l], FD_FB_BN);       // D_l's dinp (l > 0)
        if (f > blocks || 2 * f < blocks) return 0;
        if (l > 0 && (d > blocks || 2 * d < blocks)) return 0;
    }
    return 1;
}

// n steps (the last with last_bs rows) of the model in a, from the device step counter on; f from
// fused_deep_plan on this GPU (which also raised the kernel's shared-memory limit)
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
    cudaCheck(cudaLaunchKernelExC(&cfg, fused_deep_kernel_for(prec, f->tma), args));
}

#endif  // MLP_FAST_FUSED_DEEP_CUH
