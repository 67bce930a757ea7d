/*
kernels/fast/matmul/matmul_fast.h: the fast matmuls of a linear layer, as their callers see them. Host
code only: the kernels are compiled once, in the .cu files of kernels/fast/matmul/, and linked into the fast
trainer, test_mlp and dev/cuda's benchmarks. The fast trainer and the fused steps include it through
the library's door, kernels/fast/matmul/matmul.cuh, with the device pieces their own kernels use.

Key: B batch, IN input features, OUT output features. Everything is row-major.
    inp (B, IN), weight (OUT, IN) as PyTorch's nn.Linear stores it, bias (OUT), out (B, OUT)

The three products of a linear layer, and the generic matmul C(M, N) each one is:
    forward: out(B,OUT)      = act( inp(B,IN) . weight(OUT,IN)^T + bias(OUT) )
             "NT": C[m][n] = sum_k A[m][k] * B[n][k]      M = B,   N = OUT, K = IN
    dinp:    dinp(B,IN)      = ( dout(B,OUT) . weight(OUT,IN) ) * act'(inp_act(B,IN))
             "NN": C[m][n] = sum_k A[m][k] * B[k][n]      M = B,   N = IN,  K = OUT
    dweight: dweight(OUT,IN) = dout(B,OUT)^T . inp(B,IN)                  (overwrites)
             "TN": C[m][n] = sum_k A[k][m] * B[k][n]      M = OUT, N = IN,  K = B
act is one of ACT_SIGMOID, ACT_RELU, ACT_TANH, ACT_NONE (common/mlp.h); act' is computed from the
activation's OUTPUT y: sigmoid' = y(1-y), relu' = (y > 0), tanh' = 1 - y^2, none' = 1.

Precision (the launchers' tf32 argument):
    0              FP32: on the CUDA cores (FFMA), or on the tensor cores as 3xTF32 (MF_TF32X3
                   below) where the cost model or the autotune finds that faster, within FP32's
                   tolerances.
    MF_TF32_ROUND  TF32 tensor cores; the kernels round every operand to TF32 on the way in.
    MF_TF32_EXACT  TF32 tensor cores on operands that are TF32 values already (round_tf32 applied by
                   whoever wrote them), which the kernels then take as they are. Rounding a TF32 value
                   changes nothing, so the products equal MF_TF32_ROUND's on such operands.
    MF_BF16        BF16 tensor cores (mma.sync m16n8k16); the kernels round every FP32 operand to
                   BF16 (to nearest) on the way in and add the products in FP32. Operands,
                   outputs and everything around the products stay FP32. Given BF16 copies of the
                   operands (MatmulFastBf16, below), the launchers run the large products on those
                   instead (kernels/fast/matmul/wgmma_kmajor.cuh on sm_90a, else kernels/fast/matmul/mma_bf16.cuh):
                   the same values, half the bytes, and no rounding in the kernel.
    MF_FP32_PIXELS FP32 on a batch of pixels: the forward and weight-gradient products only, with
                   inp holding the batch's bytes 0..255 (as floats) and the product taken with the
                   values byte / 255, the inputs the trainers compute with. A byte is a TF32 value, so
                   3xTF32 needs two TF32 products instead of three where one operand is the batch
                   (matmul_fast_pixels_fit: only where the plan is a 3xTF32 configuration).
The trainer's build compiles what the trainer passes: FP32 everywhere, MF_TF32_EXACT for the forward
product (-x 1 keeps its operands TF32 values) and MF_TF32_ROUND for dinp and dweight, MF_BF16 for
every product (-x 2). Another combination there stops with a message naming it; dev/cuda's build
compiles every combination.

The launchers only enqueue kernels (no allocation, no synchronisation), so they can be captured into
a CUDA graph. Any sizes work (B = 1, widths like 37). Results are bitwise reproducible: every sum runs
in a fixed order, K splits included, and there are no atomics.
*/
#ifndef MLP_FAST_MATMUL_FAST_H
#define MLP_FAST_MATMUL_FAST_H

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>

// the tf32 argument, the products' precision (0: FP32)
enum { MF_TF32_ROUND = 1, MF_TF32_EXACT = 2, MF_BF16 = 3 };
// Not an argument: how the FP32 configurations of kind MF_KIND_3XTF32 run on the tensor cores. Each
// FP32 operand x is split into big = tf32(x) and small = x - big (exact, at most 2^-11 |x|, which the
// tensor cores truncate to TF32: 2^-21 |x| at most), and a product is a_big b_big + a_big b_small +
// a_small b_big: three TF32 products that together keep about 20 of FP32's 24 bits (the dropped
// a_small b_small is at most 2^-22 of the product), at three times TF32's work. The tensor cores sum
// each BK step of K, and FADD adds those sums up (kernels/fast/matmul/mma_tf32.cuh says why).
// MF_FP32_PIXELS, after it: the tf32 argument for FP32 on a batch of pixels (above), whose kernels are
// 3xTF32's with the batch's small parts, 0, left out.
enum { MF_TF32X3 = 4, MF_FP32_PIXELS = 5 };

// SGD fused into the weight gradient's epilogue (kernels/sgd.cuh's step): once dW[i] is complete, the
// thread that holds it updates the parameter and its momentum, laid out like dW. Nothing may read W
// between that kernel and the next forward pass.
typedef struct {
    float *param;       // (OUT, IN) the weights W, updated in place
    float *mbuf;        // (OUT, IN) their momentum buffer
    float lr, mu, wd;   // learning rate, momentum, weight decay
    float *param_tf32;  // NULL, or (OUT, IN): the updated weights rounded to TF32 are stored here too
} MatmulFastSgd;

// -x 2's BF16 copies of a product's operands and output (kernels/fast/matmul/mma_bf16.cuh). Given a and b,
// the product runs on them with the BF16-operand kernel where its shape allows that and fills the GPU
// (matmul_fast_bf16_plan), else on the FP32 operands as MF_BF16 says (the same products); either way
// out, when not NULL, receives the output rounded to BF16 beside the FP32 one (the next product's
// operand): the wgmma kernel stores it with the FP32 value, the others take a copy kernel after the
// product (their epilogues stay as they are: a pointer more in MatmulFastEpi makes them slower).
// Rounding everywhere: to nearest, ties away from zero, as mf_pack_bf16 and round_bf16
// round.
typedef struct {
    const __nv_bfloat16 *a, *b;   // A and B as BF16, laid out as the FP32 operands; both, or neither
    __nv_bfloat16 *out;           // NULL, or (M, N): the output again, as BF16
} MatmulFastBf16;

// out = act(inp . weight^T + bias); inp is (B, IN), weight is (OUT, IN), bias is (OUT) or NULL, out is
// (B, OUT). round_out: out is stored rounded to TF32 (the next layer's MF_TF32_EXACT input). Launched
// with programmatic dependent launch (kernels/fast/ops/pdl.cuh): enqueue it right after the kernel that
// writes inp, with no event recorded in between.
// bf16: NULL, or BF16 copies (MatmulFastBf16; tf32 MF_BF16 only) of inp, weight and out.
void matmul_forward_fast(float *out, const float *inp, const float *weight, const float *bias, int B, int IN,
                         int OUT, int act, int tf32, int round_out, cudaStream_t stream,
                         const MatmulFastBf16 *bf16 = NULL);

// dinp = (dout . weight) * act'(inp_act); dout is (B, OUT), weight is (OUT, IN), inp_act and dinp are
// (B, IN); inp_act (the activation output of the layer below) may be NULL only when act is ACT_NONE.
// bf16: NULL, or BF16 copies of dout, weight and dinp.
void matmul_backward_dinp_fast(float *dinp, const float *dout, const float *weight, const float *inp_act, int act,
                               int B, int IN, int OUT, int tf32, cudaStream_t stream,
                               const MatmulFastBf16 *bf16 = NULL);

// dweight = dout^T . inp (overwrites); dout is (B, OUT), inp is (B, IN), dweight is (OUT, IN).
// scratch: matmul_fast_scratch_floats(B, IN, OUT) floats, or NULL (then K is split only through
// thread-block clusters). sgd: NULL, or W's SGD step, fused in (MatmulFastSgd). bf16: NULL, or BF16
// copies of dout and inp (its out unused).
void matmul_backward_dweight_fast(float *dweight, const float *dout, const float *inp, int B, int IN, int OUT,
                                  float *scratch, int tf32, const MatmulFastSgd *sgd, cudaStream_t stream,
                                  const MatmulFastBf16 *bf16 = NULL);

// floats of scratch matmul_backward_dweight_fast needs for (B, IN, OUT) in any precision; 0: none
size_t matmul_fast_scratch_floats(int B, int IN, int OUT);

// ----------------------------------------------------------------------------
// Below: the generic product under the launchers, for dev/cuda's sweeps and the tests. A product is
// planned (which tile configuration, how many K splits: kernels/fast/matmul/planner.cuh) and then run.

typedef enum { MF_FWD = 0, MF_DINP = 1, MF_DWEIGHT = 2 } MfProduct;   // "NT", "NN", "TN" above

// what happens to an output element once its sum is complete
enum { MF_EPI_RAW = 0, MF_EPI_FORWARD = 1, MF_EPI_DINP = 2, MF_EPI_SGD = 3 };
typedef struct {
    int kind;            // MF_EPI_*
    int act;             // ACT_* (MF_EPI_FORWARD: applied; MF_EPI_DINP: its derivative multiplies)
    const float *bias;   // (N) for MF_EPI_FORWARD, may be NULL
    const float *aux;    // (M, N) the activation output for MF_EPI_DINP, may be NULL when act is ACT_NONE
    MatmulFastSgd sgd;   // for MF_EPI_SGD
    int round_out;       // MF_EPI_FORWARD: store the output rounded to TF32
} MatmulFastEpi;

// cfg: a tile configuration's id (planner.cuh). splits > 1: K is cut in `splits` slices of kchunk;
// cluster 1: the slices of a tile form a thread-block cluster and add up in distributed shared memory
// (sm_90); cluster 0: each slice writes its partial sums to scratch and a reduce kernel adds them.
typedef struct { int cfg; int splits; int kchunk; int cluster; } MatmulFastPlan;

// the planner's choice for a product of shape (M, N, K); have_scratch: K may be split through scratch.
// cfg is -1 when this build has no kernel for that product and precision.
MatmulFastPlan matmul_fast_plan(MfProduct prod, int M, int N, int K, int tf32, int have_scratch);

// the plan of configuration cfg with `splits` K slices, as the planner would carry it out; 0 (and *p
// untouched) when that is not possible here: cfg not built for this product and precision, its
// shared memory too large, or the split not possible (no clusters and no scratch, or a slice shorter
// than one tile step)
int matmul_fast_plan_fixed(MatmulFastPlan *p, MfProduct prod, int M, int N, int K, int tf32, int have_scratch,
                           int cfg, int splits);

// C(M, N) = epi(A . B) as product prod lays out A and B, with plan p. scratch: p.splits * M * N floats
// when the plan splits K without clusters. pdl: launch with programmatic dependent launch (the caller
// guarantees the previous operation in the stream is a kernel launch).
void matmul_fast_run(MfProduct prod, const MatmulFastPlan *p, float *C, const float *A, const float *B, int M,
                     int N, int K, const MatmulFastEpi *epi, float *scratch, int tf32, int pdl, cudaStream_t stream);

// the tile configurations of this build, for dev/cuda's sweeps: `count` of FP32 (tf32 0, or
// MF_FP32_PIXELS: its 3xTF32 rows take pixels) or tensor-core ones (any other tf32: the TF32 and BF16
// kernels share their tiles)
typedef struct {
    int id;              // what plans and the autotune's cache call it
    int kind;            // MF_KIND_*
    int bm, bn, bk;      // block tile M x N, K step
    int tm, tn;          // FP32: a thread's register block; else a warp's (mma.sync) or warpgroup's (wgmma) tile
    int st;              // pipeline stages
    float eff, fill;     // the cost model (planner.cuh); eff 0: never picked by it
    int occ;             // blocks per SM the cost model assumes
    int built;           // the products and precisions it is compiled for (MF_BUILT bits)
    int threads;         // threads per block
    const char *name;
} MatmulFastCfg;
enum { MF_KIND_FP32 = 0, MF_KIND_MMA = 1, MF_KIND_WGMMA = 2, MF_KIND_3XTF32 = 3, MF_KIND_BF16_OPS = 4 };
const MatmulFastCfg *matmul_fast_configs(int tf32, int *count);

// whether product prod (MF_FWD or MF_DWEIGHT) of shape (M, N, K) can take its batch operand as pixel
// bytes (MF_FP32_PIXELS): its FP32 plan is a 3xTF32 configuration; have_scratch as matmul_fast_plan
int matmul_fast_pixels_fit(MfProduct prod, int M, int N, int K, int have_scratch);

// whether this build and GPU split K through thread-block clusters (else through scratch, dweight only)
int matmul_fast_has_clusters(void);

// The GPU the planners plan for. Every choice of the library (tile, split, kernel family) is a
// function of the product's shape and of this description, never of a device query of its own.
typedef struct {
    int sms;        // streaming multiprocessors
    int clusters;   // thread-block clusters: the GPU is sm_90 and so is the code that runs on it
    int wgmma;      // the wgmma kernels: this build has them (sm_90a) and they run on this GPU
    int tma;        // ... and the driver makes the TMA's tensor maps (cuTensorMapEncodeTiled)
    int smem_optin;     // bytes of shared memory a block may have
    int pair_clusters;  // clusters of two blocks, each with a whole SM's shared memory, the GPU holds at once
    int clock_mhz;      // the SMs' clock (for -P's estimates only)
} MfTarget;
// the current device's (asked once: a process drives one GPU)
MfTarget matmul_fast_target_here(void);
// plan for t from now on (NULL: the current device again); a host-only test describes a GPU so
const MfTarget *matmul_fast_target(void);
void matmul_fast_set_target(const MfTarget *t);

// the configuration the planner gives large products (half a wave of its tiles or more, K of at least
// MF_LARGE_MIN_K: planner.cuh mf_large) for this product and precision, or -1: none (BF16 has one;
// elsewhere the cost model decides); with MF_FP32_PIXELS, FP32's where it takes pixels
int matmul_fast_large_cfg(MfProduct prod, int tf32);

// ----------------------------------------------------------------------------
// The BF16-operand kernel (kernels/fast/matmul/mma_bf16.cuh), for the tests and dev/cuda.

// whether its 16-byte copies can read product prod's operands at this shape: their leading dimensions
// (and the output's rows) multiples of 8
int matmul_fast_bf16_fits(MfProduct prod, int M, int N, int K);
// the configuration the launchers above take for this shape, or -1: they then run the FP32-operand
// kernels. It is taken when it fits and its tiles fill at least min_fill of the GPU's first wave of
// blocks (matmul_fast_bf16_set_min_fill; 0.45 unless set), where fewer, split-K tiles of the other
// kernels are faster.
int matmul_fast_bf16_plan(MfProduct prod, int M, int N, int K);
void matmul_fast_bf16_set_min_fill(float min_fill);
// dst[i] = src[i] rounded to BF16 (round_bf16), i < n: the copies of what no kernel writes with a copy
// (the weights after a load, the batch)
void matmul_fast_bf16_copy(__nv_bfloat16 *dst, const float *src, size_t n, cudaStream_t stream);
// its configurations: count, and each one's tile (bm, bn, bk, warp tile tm x tn, st), name and id
const MatmulFastCfg *matmul_fast_bf16_configs(int *count);
// whether configuration cfg runs on the TMA kernel (kernels/fast/matmul/wgmma_tma.cuh): only where the GPU
// planned for has the TMA (MfTarget's tma)
int matmul_fast_bf16_tma(int cfg);
// C(M, N) = epi(A . B) with configuration cfg, A and B BF16 as product prod lays them out (their
// shape must fit: matmul_fast_bf16_fits); out_bf16: NULL, or (M, N) where C is stored again as BF16
// (MatmulFastBf16's out). pdl as matmul_fast_run.
void matmul_fast_bf16_run(MfProduct prod, int cfg, float *C, const __nv_bfloat16 *A, const __nv_bfloat16 *B, int M,
                          int N, int K, const MatmulFastEpi *epi, __nv_bfloat16 *out_bf16, int pdl,
                          cudaStream_t stream);

// ----------------------------------------------------------------------------
// -x 1's large products on K-major TF32 copies (kernels/fast/matmul/wgmma_kmajor.cuh with T = float, and the
// TMA kernel of kernels/fast/matmul/wgmma_tma.cuh, the default; sm_90a).
// wgmma reads 32-bit operands K-major only, so the trainer keeps such copies of the operands that are
// not (train_mlp_fast.cu, model_tf32k): C (M, N) = epi(A . B^T), A (M, K) and B (N, K) row-major, both
// TF32 values (round_tf32 applied by whoever wrote them), which the kernel takes as they are.

// whether this build has the kernel, K is a multiple of 4 (16-byte copies), and the tiles fill at least
// min_fill of the GPU's SMs (matmul_fast_tf32k_set_min_fill, which returns the one before; 0.4
// unless set): below that the other kernels' K splits win, as for the BF16 copies
int matmul_fast_tf32k_fits(int M, int N, int K);
float matmul_fast_tf32k_set_min_fill(float min_fill);
// The product, in the configuration matmul_fast_tf32k_cfg picks for it; A and
// B 16-byte aligned; pdl as matmul_fast_run. With MF_EPI_SGD (a weight gradient, C = dW) the kernel
// steps W in its epilogue, on float4s where N % 4 == 0 and the pointers allow it; C may then be NULL
// (the gradient is not stored); param_t: NULL, or W^T (N, M), where the new weights are also stored
// rounded and transposed. With MF_EPI_DINP, param_t: NULL, or (N, M) where dinp is stored rounded and
// transposed. (Those need N and M multiples of 4, the pointers 16-byte aligned: else an error.)
void matmul_fast_tf32k_run(MfProduct prod, float *C, const float *A, const float *B, int M, int N, int K,
                           const MatmulFastEpi *epi, float *param_t, int pdl, cudaStream_t stream);
// the same in configuration cfg (0 .. matmul_fast_tf32k_num_cfgs() - 1: test_mlp runs each)
void matmul_fast_tf32k_run_cfg(int cfg, float *C, const float *A, const float *B, int M, int N, int K,
                               const MatmulFastEpi *epi, float *param_t, int pdl, cudaStream_t stream);
int matmul_fast_tf32k_num_cfgs(void);
// the configuration product prod of C (M, N) takes: the TMA kernel in the width whose tiles cost least
int matmul_fast_tf32k_cfg(MfProduct prod, int M, int N);
// configuration cfg's tile: rows *bm, columns *bn (left as they are for no such configuration)
void matmul_fast_tf32k_tile(int cfg, int *bm, int *bn);
// the persistent configuration's ID (one block an SM, each taking tiles in turn), and its grid at most
// blocks (0: no cap; returns the cap before). For tests: a small grid gives each block many tiles.
int matmul_fast_tf32k_persistent_cfg(void);
int matmul_fast_tf32k_set_grid_cap(int blocks);

#endif  // MLP_FAST_MATMUL_FAST_H
