/*
kernels/fast/fused/deep_config.cuh: the deep fused step's (kernels/fast/fused/fused_deep.cuh) sizes,
tiles and arguments: what every part of its kernel (deep_tiles.cuh, deep_tma.cuh, deep_head.cuh) and
its plan share. The tiles' shapes are fixed here, chosen for the models the step is for (a product of
one wave of tiles over the SMs: the wide model at batch 256); doc/fast.md has the measurements.
*/
#ifndef MLP_FAST_DEEP_CONFIG_CUH
#define MLP_FAST_DEEP_CONFIG_CUH

#include <stdint.h>

#include "../../../common/mlp.h"  // MAX_LAYERS, PREC_*
#include "../../activation.cuh"   // ACT_*
#include "../../common.cuh"       // cudaCheck, CEIL_DIV
#include "../matmul/matmul.cuh"   // MF_*, mf_smem_floats, mf_to_tf32, CUtensorMap
#include "../ops/head.cuh"        // HEAD_MAX_C

#define FD_POLL_NS 32       // ns the grid barrier's waiting threads sleep between polls of its count
#define FD_THREADS 256      // 8 warps: the tiles' warp layouts below
#define FD_MAX_B 512        // rows of a batch
#define FD_MAX_WIDTH 2048   // hidden units of a layer
#define FD_COLS 128         // columns of a column-sum job: a float4 a lane
#define FD_COL_UNROLL 4     // rows a warp of a column job has in flight at once (fd_bias, fd_head_dweight)
constexpr int fd_col_unroll = FD_COL_UNROLL;   // (what the loops' unroll pragma can name)
// rows of the batch a job of the head's phase takes (fd_head_job), and rows of the next batch it
// gathers beside them (1, 2 or 4: the shared memory holds no more rows of the widest layer)
#define FD_HEAD_ROWS 2
#define FD_HDW_FLOATS (8 * 16 * 32 * 4 + FD_MAX_B * 16)   // fd_head_dweight's partial sums, then dz of 16 classes

// The tiles. Rows x columns of the product's output, K step, warp tile, pipeline stages:
// forward and dinp products (B x OUT, B x IN: few rows, K the layer's width): 32 x 64 tiles, so
// that the wide model's B = 256 x 1024 outputs make 128 tiles, about one per SM (larger tiles, or K
// split between two blocks, leave more SMs waiting in the phase for no fewer bytes a tile);
#define FD_FB_BM 32
#define FD_FB_BN 64
#define FD_FB_BK 32
#define FD_FB_WM 16
#define FD_FB_WN 16
#define FD_FB_ST 4
// weight gradients (OUT x IN, K = B): 128 x 128 tiles, 64 x 32 a warp (1024 x 1024 makes 64 tiles,
// 1024 x 784 56), their SGD step in the epilogue; K steps of FD_W_BK_TF32 in the TF32 kernel (fewer
// waits a tile, for a pipeline that takes more shared memory, which the other precisions' kernels do
// not ask for: fd_w_bk), FD_W_BK in the others.
#define FD_W_BM 128
#define FD_W_BN 128
#define FD_W_BK 16
#define FD_W_BK_TF32 32
#define FD_W_WM 64
#define FD_W_WN 32
#define FD_W_ST 4
// the TF32 kernel's weight-gradient tiles bring W and its momentum into shared memory by cp.async for
// their SGD epilogue, at most this many float4s of each a thread a round (FdSgdStage); the other
// precisions' kernels load them into registers a float4 at a time
#define FD_SGD_STAGE_TF32 4
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
#define FD_KS 2             // (clusters of four: too few of them fit the GPU a block an SM)
#define FD_TMA_ST_KS 4      // their pipeline stages (16 KB each)
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

#endif  // MLP_FAST_DEEP_CONFIG_CUH
