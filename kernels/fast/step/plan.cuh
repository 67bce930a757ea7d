/*
kernels/fast/step/plan.cuh: the step plan of the fast trainer. Before training, one host function
(step_plan_make) decides everything about a step of a model at a batch size, in a precision, on a
number of ranks, for a GPU: which kernel runs each product of each layer (its family, tile
configuration and K split), which copies of the operands the model keeps, which stream each
product runs on, and what rides on its epilogue (bias and activation, the activation's gradient,
the SGD step). The executor (kernels/fast/step/step.cuh) only reads it: nothing re-decides at
launch time, so the plan printed by -P is the one that runs, and runs with the same plan are
bitwise identical.

The planner asks no device: the GPU is the matmul library's target (MfTarget, matmul_fast.h), the
current device's in the trainer, a described one in the tests (test_mlp's plan coverage, which
runs without a GPU). Each product's tile and split come from the cost model of
kernels/fast/matmul/planner.cuh, or from the autotune's cache where it has the shape (-A).

Shapes: B the training batch, bs a batch the plan is made for (B, an epoch's short last batch, an
evaluation batch), IN/OUT a layer's features, L layers.
*/
#ifndef MLP_FAST_STEP_PLAN_CUH
#define MLP_FAST_STEP_PLAN_CUH

#include <stdio.h>
#include <string.h>

#include "../../../common/mlp.h"           // MAX_LAYERS, PREC_*, param_layout, ACT_NAMES
#include "../fused/fused_deep.cuh"         // fused_deep_plan, fused_deep_faster
#include "../fused/fused_step.cuh"         // FusedPlan, fused_step_plan
#include "../matmul/matmul_fast.h"         // MatmulFastPlan, matmul_fast_plan, MfTarget
#include "../ops/gather.cuh"               // GATHER_*
#include "../ops/head.cuh"                 // head_fits, head_warp_fits

// The first layer's SGD step rides on its dW's epilogue below this many weights; above, the SGD
// kernel after dW is faster: the fused step is bound by memory latency (the matmul's few blocks per
// SM, one weight in flight per thread), the kernel is not (doc/fast.md has the measurements).
#define PLAN_FUSED_SGD_MAX_WEIGHTS (1 << 18)

// the kernel families: every kernel a step can launch for a product belongs to one
typedef enum {
    FAM_FFMA,               // FP32 register tiles on the CUDA cores (matmul/ffma.cuh)
    FAM_3XTF32,             // FP32 as three TF32 products on the tensor cores (matmul/mma_tf32.cuh)
    FAM_3XTF32_PIXELS,      // the same with the batch as pixel bytes: two products (MF_FP32_PIXELS)
    FAM_MMA_TF32,           // mma.sync TF32 on FP32 operands (matmul/mma_tf32.cuh)
    FAM_WGMMA_TF32,         // wgmma TF32, operands staged through shared memory (matmul/wgmma_tf32.cuh)
    FAM_MMA_BF16,           // mma.sync BF16, FP32 operands rounded as they are loaded (matmul/mma_tf32.cuh)
    FAM_BF16_COPIES,        // mma.sync on BF16 copies of the operands (matmul/mma_bf16.cuh)
    FAM_WGMMA_BF16_COPIES,  // wgmma on BF16 copies (matmul/wgmma_kmajor.cuh)
    FAM_TF32_KMAJOR,        // wgmma on K-major TF32 copies, fed by the TMA (matmul/wgmma_tma.cuh)
    FAM_HEAD,               // the last layer, the loss and its gradient in one kernel (ops/head.cuh)
    FAM_FUSED_STEP,         // a run of steps in one kernel, one hidden layer (fused/fused_step.cuh)
    FAM_FUSED_DEEP,         // a run of steps in one kernel, two or more hidden layers (fused/fused_deep.cuh)
    FAM_COUNT
} KernelFamily;
static const char *const FAM_NAMES[FAM_COUNT] = {
    "FFMA tiles", "3xTF32 mma.sync", "3xTF32 on pixels", "TF32 mma.sync", "TF32 wgmma", "BF16 mma.sync",
    "BF16 copies mma.sync", "BF16 copies wgmma", "TF32 K-major wgmma", "fused head", "fused step",
    "fused deep step"};

enum { STREAM_MAIN = 0, STREAM_SIDE = 1, STREAM_BIAS = 2, STREAM_COMM = 3 };
static const char *const STREAM_NAMES[] = {"main", "side", "bias", "comm"};

// what a product's epilogue does with an output element
enum {
    EPI_NONE = 0,     // stored as it is (a weight gradient)
    EPI_BIAS_ACT,     // + bias, the activation (a forward product)
    EPI_DACT,         // times the activation's gradient (dinp)
    EPI_SGD,          // the weight's SGD step, on the gradient just summed (dW)
    EPI_HEAD,         // the head's: logits, softmax, loss, dlogits, and dh (FAM_HEAD)
};
static const char *const EPI_NAMES[] = {"-", "bias+act", "act'", "SGD step", "loss, dlogits, dh"};

// where a layer's SGD step on W runs
enum {
    SGD_KERNEL = 0,   // the SGD kernel, after dinp has read W (on the side stream; layer 0: after dW, on main)
    SGD_IN_DW,        // in dW's epilogue
    SGD_AFTER_SUM,    // several ranks: the SGD kernel after the gradients are summed over the ranks
};

// where a choice of tile and split came from
enum { SRC_MODEL = 0, SRC_CACHE, SRC_TUNE, SRC_RULE };
static const char *const SRC_NAMES[] = {"cost model", "cache", "autotune", "rule"};

// one product of one layer
typedef struct {
    int used;            // 0: not run (layer 0's dinp; the last layer's products under the fused head)
    int family;          // FAM_*
    int M, N, K;         // the product C(M, N) over K (matmul_fast.h: MF_FWD, MF_DINP, MF_DWEIGHT)
    int prec;            // the launcher's precision argument (0, MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16, MF_FP32_PIXELS)
    MatmulFastPlan mm;   // the tile configuration and K split (the copies' families: mm.cfg alone)
    int stream;          // STREAM_*
    int epi;             // EPI_*
    int source;          // SRC_*
    float est_us;        // the expected time: measured (cache, autotune), else the cost model's estimate
} ProductPlan;

// one layer at one batch size
typedef struct {
    ProductPlan p[3];    // [MF_FWD], [MF_DINP], [MF_DWEIGHT]
    int kmajor;          // -x 1: dinp and dW on the K-major kernel (the layer's copies, Model's inp_t etc.)
    int sgd;             // SGD_*
} LayerPlan;

// a step at one batch size (or an evaluation's forward pass)
typedef struct {
    int bs, train;
    int gather;          // GATHER_*: how the batch is gathered into acts[0]
    int kmajor0;         // -x 1: layer 0's dW on the K-major kernel, its input transposed (model_tf32k0)
    LayerPlan layer[MAX_LAYERS];
} BatchPlan;

// what -f asks for (its values): kernels launched step by step, CUDA graphs, the fused step where it is
// faster than the graphs, the fused step wherever it runs
enum { PLAN_ASK_LAUNCHES = 0, PLAN_ASK_GRAPHS = 1, PLAN_ASK_FUSED = 2, PLAN_ASK_FUSED_ANY = 3 };

// the paths of a run of steps (the -f flag asks; the plan says what runs)
enum { RUN_LAUNCHES = 0, RUN_GRAPHS = 1, RUN_FUSED = 2 };
static const char *const RUN_NAMES[] = {"kernels launched step by step (-f 0)", "CUDA graphs, three streams",
                                        "a run of steps as one kernel"};

#define PLAN_MAX_BATCHES 6

typedef struct StepPlanS {
    int L, sizes[MAX_LAYERS + 1], act, B, prec, ranks;
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    MfTarget gpu;                // the GPU planned for
    int run;                     // RUN_*
    FusedPlan fused;             // RUN_FUSED: its plan; else fused.why says why not (when -f asked for it)
    int head_fused;              // the last layer, the loss and dh are one kernel (FAM_HEAD)
    int bf16_copies;             // -x 2: BF16 copies of the weights and the hidden activations and gradients
    int kmajor[MAX_LAYERS];      // -x 1: the K-major copies of layer l (l >= 1) and of the batch (l = 0)
    int have_scratch;            // dW's K splits go through a scratch buffer (a GPU without clusters)
    size_t scratch_floats;       // its size
    // NULL, or the trainer's pass over each new batch plan: the autotune's cache, and -A 1's tuning
    void (*refine)(void *ctx, const struct StepPlanS *p, BatchPlan *bp);
    void *refine_ctx;
    int nbatch;
    BatchPlan batch[PLAN_MAX_BATCHES];   // the batch sizes planned so far (plan_batch)
} StepPlan;

// ----------------------------------------------------------------------------
// one product

// the family of a tiled plan: its configuration's kind and the precision
static int plan_tiled_family(int prec, const MatmulFastPlan *mm) {
    int n = 0;
    const MatmulFastCfg *cfgs = matmul_fast_configs(prec, &n);
    int kind = MF_KIND_FP32;
    for (int i = 0; i < n; i++)
        if (cfgs[i].id == mm->cfg) kind = cfgs[i].kind;
    if (kind == MF_KIND_FP32) return FAM_FFMA;
    if (kind == MF_KIND_3XTF32) return prec == MF_FP32_PIXELS ? FAM_3XTF32_PIXELS : FAM_3XTF32;
    if (kind == MF_KIND_WGMMA) return FAM_WGMMA_TF32;
    return prec == MF_BF16 ? FAM_MMA_BF16 : FAM_MMA_TF32;
}

// -P's expected time of a product: a wave of its tiles (as many as the SMs hold at once) costs a fixed
// time plus its FLOPs at a rate, per kernel family, in the SMs' clocks, fitted to products timed alone
// at their fastest plans (python3 dev/cuda/fit_plan.py --estimate; doc/fast.md, the step plan). The
// fixed time is what a wave spends outside its products: loading the first stages, the epilogue.
// BF16 on FP32 operands (timed with no tile of its own) takes mma.sync TF32's.
typedef struct { float wave_clocks, flops_per_clock; } PlanRate;
static PlanRate plan_family_rate(int family) {
    switch (family) {
    case FAM_FFMA: return {5750, 162.2f};
    case FAM_3XTF32: return {6500, 312.6f};
    case FAM_3XTF32_PIXELS: return {7000, 446.7f};
    case FAM_MMA_TF32: case FAM_MMA_BF16: return {6750, 478.6f};
    case FAM_WGMMA_TF32: return {5750, 660.7f};
    case FAM_TF32_KMAJOR: return {13750, 1717.9f};
    case FAM_BF16_COPIES: return {4000, 1161.4f};
    case FAM_WGMMA_BF16_COPIES: return {16500, 3235.9f};
    default: return {5750, 162.2f};
    }
}

// a product's tile (bm x bn, K steps of bk) and the blocks an SM holds at once, as its plan launches
// it (the copies' kernels and the K-major one: one a SM, as fitted)
static void plan_tile(const ProductPlan *pp, int *bm, int *bn, int *bk, int *occ) {
    *bm = 128, *bn = 128, *bk = 32, *occ = 1;
    int n = 0;
    if (pp->family == FAM_TF32_KMAJOR) {
        matmul_fast_tf32k_tile(pp->mm.cfg, bm, bn);
        return;
    }
    const int copies = pp->family == FAM_BF16_COPIES || pp->family == FAM_WGMMA_BF16_COPIES;
    const MatmulFastCfg *cfgs = copies ? matmul_fast_bf16_configs(&n) : matmul_fast_configs(pp->prec, &n);
    for (int i = 0; i < n; i++)
        if (cfgs[i].id == pp->mm.cfg) *bm = cfgs[i].bm, *bn = cfgs[i].bn, *bk = cfgs[i].bk, *occ = copies ? 1 : cfgs[i].occ;
}

// the blocks a product's plan launches: its tiles, times its K slices
static long plan_tiles(const ProductPlan *pp) {
    int bm, bn, bk, occ;
    plan_tile(pp, &bm, &bn, &bk, &occ);
    return (long)((pp->M + bm - 1) / bm) * ((pp->N + bn - 1) / bn) * (pp->mm.splits > 0 ? pp->mm.splits : 1);
}

// -P's expected time (plan_family_rate), with a launch's couple of microseconds
static float plan_estimate_us(const ProductPlan *pp, const MfTarget *g) {
    int bm, bn, bk, occ;
    plan_tile(pp, &bm, &bn, &bk, &occ);
    const int splits = pp->mm.splits > 0 ? pp->mm.splits : 1;
    const long waves = (plan_tiles(pp) + (long)g->sms * occ - 1) / ((long)g->sms * occ);
    const long kslice = ((pp->K + splits - 1) / splits + bk - 1) / bk * bk;
    const double wave_flops = 2.0 * occ * bm * bn * (double)kslice;
    const PlanRate r = plan_family_rate(pp->family);
    return (float)(2.0 + waves * (r.wave_clocks + wave_flops / r.flops_per_clock) / (g->clock_mhz > 0 ? g->clock_mhz : 1500));
}

// a tiled product in precision prec: the cost model's tile and split (the cache's: plan_refine)
static ProductPlan plan_tiled(MfProduct prod, int M, int N, int K, int prec, int have_scratch) {
    ProductPlan pp;
    memset(&pp, 0, sizeof(pp));
    pp.used = 1;
    pp.M = M, pp.N = N, pp.K = K;
    pp.prec = prec;
    pp.mm = matmul_fast_plan(prod, M, N, K, prec, have_scratch);
    pp.family = plan_tiled_family(prec, &pp.mm);
    pp.source = SRC_MODEL;
    return pp;
}

// Product prod of a layer (M, N, K as matmul_fast.h lays it out) in precision prec. bf16: the model
// keeps BF16 copies of both operands, and the BF16-operand kernel takes them where the shape allows
// it and its tiles fill the GPU (matmul_fast_bf16_plan); else the FP32-operand kernels.
static ProductPlan plan_product(MfProduct prod, int M, int N, int K, int prec, int have_scratch, int bf16) {
    const int cfg = bf16 && prec == MF_BF16 ? matmul_fast_bf16_plan(prod, M, N, K) : -1;
    if (cfg >= 0) {
        ProductPlan pp;
        memset(&pp, 0, sizeof(pp));
        pp.used = 1;
        pp.M = M, pp.N = N, pp.K = K;
        pp.prec = prec;
        pp.mm.cfg = cfg;
        pp.mm.splits = 1;
        pp.mm.kchunk = K;
        int n = 0;
        const MatmulFastCfg *cfgs = matmul_fast_bf16_configs(&n);
        pp.family = FAM_BF16_COPIES;
        for (int i = 0; i < n; i++)
            if (cfgs[i].id == cfg && cfgs[i].bk == 64) pp.family = FAM_WGMMA_BF16_COPIES;
        pp.source = SRC_MODEL;   // (matmul_fast_bf16_plan: the configuration of least cost)
        return pp;
    }
    return plan_tiled(prod, M, N, K, prec, have_scratch);
}

// -x 1's K-major kernel for a product (matmul_fast_tf32k_cfg's configuration)
static ProductPlan plan_kmajor(MfProduct prod, int M, int N, int K) {
    ProductPlan pp;
    memset(&pp, 0, sizeof(pp));
    pp.used = 1;
    pp.family = FAM_TF32_KMAJOR;
    pp.M = M, pp.N = N, pp.K = K;
    pp.prec = prod == MF_FWD ? MF_TF32_EXACT : MF_TF32_ROUND;
    pp.mm.cfg = matmul_fast_tf32k_cfg(prod, M, N);   // (the tile width whose waves cost least)
    pp.mm.splits = 1;
    pp.mm.kchunk = K;
    pp.source = SRC_MODEL;
    return pp;
}

// ----------------------------------------------------------------------------
// the rules of the copies

// -x 2 keeps BF16 copies for a model with a hidden layer and every width but the classes a multiple
// of 8 (the BF16-operand kernels copy 16 bytes, 8 values, at a time; the weights' slices of the flat
// buffer then start 16-byte aligned too)
static int plan_bf16_fits(const int *sizes, int L) {
    if (L < 2) return 0;
    for (int l = 0; l < L; l++)
        if (sizes[l] % 8 != 0) return 0;
    return 1;
}

// -x 1's products on the K-major TF32 kernel (matmul_fast_tf32k_run; sm_90a), where their tiles fill
// the GPU. Its operands must be K-major TF32 values. The forward product's are (the batch, the hidden
// outputs and params_tf32 are stored rounded), so any layer but the head may take it as it is:
// plan_kmajor_fwd. dinp's weight and both of dweight's operands are not: a hidden layer l >= 1 takes
// the kernel for those where the model keeps the copies (Model's inp_t etc., made for the training
// batch) and all three products fit at this batch: plan_kmajor_fits. (W's slices 16-byte aligned too.)
static int plan_kmajor_fwd(const StepPlan *p, int l, int bs) {
    return p->prec == PREC_TF32 && l <= p->L - 2 && p->w_off[l] % 4 == 0 &&
           matmul_fast_tf32k_fits(bs, p->sizes[l + 1], p->sizes[l]);
}
static int plan_kmajor_fits(const StepPlan *p, int l, int bs) {
    const int IN = p->sizes[l], OUT = p->sizes[l + 1];
    return l >= 1 && plan_kmajor_fwd(p, l, bs) && matmul_fast_tf32k_fits(bs, IN, OUT) &&
           matmul_fast_tf32k_fits(OUT, IN, bs);
}
// Layer 0 has no dinp: its dW takes the kernel (on one rank with the SGD step in its epilogue) where
// its forward product does and layer 1 takes it (whose dinp then also stores its output rounded and
// transposed, dW's operand; the forward pass transposes the batch).
static int plan_kmajor0_fits(const StepPlan *p, int bs) {
    return p->L >= 3 && plan_kmajor_fits(p, 1, bs) && plan_kmajor_fwd(p, 0, bs) &&
           matmul_fast_tf32k_fits(p->sizes[1], p->sizes[0], bs);
}

// ----------------------------------------------------------------------------
// a batch size

// -x 2, one rank: whether layer l's SGD step rides on its dW's epilogue, which then stores the new W's
// BF16 copy as well (the wgmma BF16 kernels' float4 epilogue). The SGD kernel it saves runs beside no
// product (their blocks take all of an SM's registers) and reads and writes the gradient besides.
// Layer 0 has no dinp: its dW runs after every other product, so it always takes it. A layer above
// runs dW after dinp, which reads W's copy, instead of beside it: taken where dW and dinp each fill
// the GPU with a wave of tiles or more, so that running one after the other costs little.
static int plan_bf16_sgd_in_dw(const StepPlan *p, const LayerPlan *lp, int l) {
    const ProductPlan *dw = &lp->p[MF_DWEIGHT], *di = &lp->p[MF_DINP];
    if (!p->bf16_copies || p->ranks > 1 || !dw->used || dw->family != FAM_WGMMA_BF16_COPIES) return 0;
    return l == 0 || (di->used && plan_tiles(dw) >= p->gpu.sms && plan_tiles(di) >= p->gpu.sms);
}

// The plan of a step (train) or an evaluation's forward pass at bs rows.
static void plan_batch_make(const StepPlan *p, int bs, int train, BatchPlan *bp) {
    memset(bp, 0, sizeof(*bp));
    bp->bs = bs;
    bp->train = train;
    const int L = p->L, prec = p->prec, one = p->ranks == 1;
    const int mm = prec == PREC_TF32 ? MF_TF32_ROUND : prec == PREC_BF16 ? MF_BF16 : 0;   // the backward products'
    // How the batch is gathered: -x 1 rounds it to TF32. In FP32 a training batch is the pixel bytes
    // themselves where both of the first layer's products plan a 3xTF32 kernel (MF_FP32_PIXELS): a byte
    // is exact in TF32, so each takes two TF32 products instead of three, the same results within FP32's
    // rounding (the kernels apply the / 255). One layer: the fused head reads the batch.
    bp->gather = prec == PREC_TF32 ? GATHER_TF32 : GATHER_FP32;
    if (train && one && prec == PREC_FP32 && L >= 2 &&
        matmul_fast_pixels_fit(MF_FWD, bs, p->sizes[1], p->sizes[0], 0) &&
        matmul_fast_pixels_fit(MF_DWEIGHT, p->sizes[1], p->sizes[0], bs, p->have_scratch))
        bp->gather = GATHER_PIXELS;
    const int pixels = bp->gather == GATHER_PIXELS;
    bp->kmajor0 = train && p->kmajor[0] && plan_kmajor0_fits(p, bs);
    for (int l = 0; l < L; l++) {
        LayerPlan *lp = &bp->layer[l];
        const int IN = p->sizes[l], OUT = p->sizes[l + 1], hidden = l <= L - 2;
        const int bf = p->bf16_copies && hidden;   // (the head layer's products read FP32)
        // forward
        ProductPlan *f = &lp->p[MF_FWD];
        if (train && l == L - 1 && p->head_fused) {
            memset(f, 0, sizeof(*f));
            f->used = 1, f->family = FAM_HEAD, f->M = bs, f->N = OUT, f->K = IN, f->epi = EPI_HEAD;
            f->mm.cfg = head_warp_fits(bs, p->gpu.sms);   // 1: a warp a row pair, 0: a block a row pair
            f->source = SRC_RULE;
        } else if (plan_kmajor_fwd(p, l, bs)) {
            *f = plan_kmajor(MF_FWD, bs, OUT, IN);
        } else {
            const int fp = prec == PREC_TF32 ? MF_TF32_EXACT : prec == PREC_BF16 ? MF_BF16 : l == 0 && pixels ? MF_FP32_PIXELS : 0;
            *f = plan_product(MF_FWD, bs, OUT, IN, fp, 0, bf);
        }
        if (f->family != FAM_HEAD) f->epi = EPI_BIAS_ACT;
        f->stream = STREAM_MAIN;
        if (!train) continue;
        // backward
        ProductPlan *di = &lp->p[MF_DINP], *dw = &lp->p[MF_DWEIGHT];
        lp->kmajor = l >= 1 && p->kmajor[l] && plan_kmajor_fits(p, l, bs);
        if (lp->kmajor || (l == 0 && bp->kmajor0)) {
            // one rank: W's step (and its transposed copy) in dW's epilogue; several: dW stores the
            // gradient, which is summed over the ranks before the SGD kernel
            *dw = plan_kmajor(MF_DWEIGHT, OUT, IN, bs);
            if (lp->kmajor) *di = plan_kmajor(MF_DINP, bs, IN, OUT);
            lp->sgd = one ? SGD_IN_DW : SGD_AFTER_SUM;
            dw->epi = one ? EPI_SGD : EPI_NONE;
        } else {
            const int dwp = l == 0 && pixels ? MF_FP32_PIXELS : mm;
            *dw = plan_product(MF_DWEIGHT, OUT, IN, bs, dwp, p->have_scratch, p->bf16_copies && hidden);
            if (dw->mm.splits > 1 && !dw->mm.cluster && (size_t)dw->mm.splits * OUT * IN > p->scratch_floats)
                *dw = plan_product(MF_DWEIGHT, OUT, IN, bs, dwp, 0, p->bf16_copies && hidden);   // (no room: unsplit)
            if (l > 0 && !(l == L - 1 && p->head_fused))
                *di = plan_product(MF_DINP, bs, IN, OUT, mm, 0, bf);
            lp->sgd = !one ? SGD_AFTER_SUM
                    : l == 0 && (size_t)OUT * IN < PLAN_FUSED_SGD_MAX_WEIGHTS && !p->bf16_copies ? SGD_IN_DW
                    : plan_bf16_sgd_in_dw(p, lp, l) ? SGD_IN_DW
                    : SGD_KERNEL;
            dw->epi = lp->sgd == SGD_IN_DW ? EPI_SGD : EPI_NONE;
        }
        if (l > 0 && l == L - 1 && p->head_fused) {   // (the head computes this layer's dinp)
            memset(di, 0, sizeof(*di));
        }
        if (di->used) di->epi = EPI_DACT, di->stream = STREAM_MAIN;
        // dW beside dinp on the side stream; the first layer's on main, after the last dinp
        dw->stream = l > 0 ? STREAM_SIDE : STREAM_MAIN;
    }
}

// the plan at bs rows (train: a step; else an evaluation's forward pass), made on first use
static const BatchPlan *plan_batch(StepPlan *p, int bs, int train) {
    for (int i = 0; i < p->nbatch; i++)
        if (p->batch[i].bs == bs && p->batch[i].train == train) return &p->batch[i];
    BatchPlan *bp = &p->batch[p->nbatch < PLAN_MAX_BATCHES ? p->nbatch++ : PLAN_MAX_BATCHES - 1];
    plan_batch_make(p, bs, train, bp);
    if (p->refine) p->refine(p->refine_ctx, p, bp);
    for (int l = 0; l < p->L; l++)
        for (int k = 0; k < 3; k++)
            if (bp->layer[l].p[k].used && bp->layer[l].p[k].source != SRC_CACHE && bp->layer[l].p[k].source != SRC_TUNE)
                bp->layer[l].p[k].est_us = bp->layer[l].p[k].family == FAM_HEAD ? 0.0f
                                                                             : plan_estimate_us(&bp->layer[l].p[k], &p->gpu);
    return bp;
}

// ----------------------------------------------------------------------------
// the plan of a model

// the -f 2 fused step for this model, or why not: one hidden layer, fused/fused_step.cuh; two or more,
// fused/fused_deep.cuh, where it is faster than the graphs (any: wherever it can run, -f 3)
static FusedPlan plan_fused(const int *sizes, int L, int B, int prec, int any) {
    if (L < 3) return fused_step_plan(sizes, L, B, prec);
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    param_layout(sizes, L, w_off, b_off);
    FusedPlan f = fused_deep_plan(sizes, L, B, prec, w_off, b_off);
    if (f.ok && !any && !fused_deep_faster(sizes, L, B, prec, f.blocks)) {
        f.ok = 0;
        snprintf(f.why, sizeof(f.why), "the graphs are faster for this model (-f 3 runs it as one kernel)");
    }
    return f;
}

// The plan of a model (sizes[0..L], act) trained at batch B in precision prec on `ranks` ranks, for
// the GPU of matmul_fast_target(). path: what -f asks (PLAN_ASK_*). Several ranks sum their gradients before each
// SGD step, so no step rides on an epilogue there: -x 1's K-major layers store their gradients, and
// the SGD kernel after the sum also writes W's transposed copy (kernels/fast/step/step.cuh). Each
// rank runs B / ranks rows, at which the K-major products must fit.
static void step_plan_make(StepPlan *p, const int *sizes, int L, int act, int B, int prec, int path, int ranks) {
    memset(p, 0, sizeof(*p));
    p->L = L, p->act = act, p->B = B, p->prec = prec, p->ranks = ranks;
    memcpy(p->sizes, sizes, sizeof(int) * (size_t)(L + 1));
    param_layout(sizes, L, p->w_off, p->b_off);
    p->gpu = *matmul_fast_target();
    p->head_fused = head_fits(sizes[L]);
    p->run = path == PLAN_ASK_LAUNCHES ? RUN_LAUNCHES : RUN_GRAPHS;
    if (path >= PLAN_ASK_FUSED && ranks == 1) {
        p->fused = plan_fused(sizes, L, B, prec, path == PLAN_ASK_FUSED_ANY);
        if (p->fused.ok) p->run = RUN_FUSED;
    } else if (path >= PLAN_ASK_FUSED) {
        snprintf(p->fused.why, sizeof(p->fused.why), "%d ranks (the gradients are summed between a step's kernels)",
                 ranks);
    }
    // (the fused steps read and step the FP32 weights only: no copies)
    p->bf16_copies = prec == PREC_BF16 && p->run != RUN_FUSED && plan_bf16_fits(sizes, L);
    if (prec == PREC_TF32 && p->run != RUN_FUSED) {
        const int rows = B / ranks;   // (a rank's share: B is a multiple of the ranks)
        for (int l = 1; l < L; l++) p->kmajor[l] = plan_kmajor_fits(p, l, rows);
        p->kmajor[0] = plan_kmajor0_fits(p, rows);
    }
    p->have_scratch = !p->gpu.clusters;
    if (p->have_scratch)
        for (int l = 0; l < L; l++) {
            const size_t s = matmul_fast_scratch_floats(B > 1024 ? B : 1024, sizes[l], sizes[l + 1]);
            if (s > p->scratch_floats) p->scratch_floats = s;
        }
}

// ----------------------------------------------------------------------------
// the precision a model runs in

// -x is a ceiling on the rounding the user accepts, not an order: a model runs at a higher precision
// (less rounding) where that is the faster step. Three rules, each from the sweep of models no
// benchmark names (doc/fast.md, "-x is a ceiling"):
//  - BF16 needs its copies (plan_bf16_fits: hidden widths multiples of 8) and forward products that
//    take the BF16-copies kernels at this batch (their tiles fill the GPU: matmul_fast_bf16_plan) in
//    at least half of the hidden layers. Otherwise most products read FP32 operands and round them as
//    they load, which is slower than TF32's kernels: TF32 runs.
//  - Where the deep fused step runs (-f 2), it runs in TF32: it reads the FP32 weights and rounds
//    them as it loads in either precision, and in BF16 it was never faster (as fast on the sweep's
//    small deep models, slower on the wide one). -f 3, which asks for it to compare, keeps BF16.
//  - The one-hidden-layer fused step is FP32 only, and exists for models small enough (at most
//    FUSED_MAX_U units a block, FUSED_MAX_B rows) that a step of separate kernels is mostly their
//    launches' latency at any precision: where it runs, FP32 runs.
// Returns the precision (PREC_*), and why in words into why (empty: as asked).
static int plan_precision(const int *sizes, int L, int B, int ceiling, int path, int ranks, char *why, size_t n) {
    int prec = ceiling;
    if (n) why[0] = '\0';
    const int fused_asked = path >= PLAN_ASK_FUSED && ranks == 1;
    if (prec == PREC_BF16 && fused_asked && L >= 3 && path != PLAN_ASK_FUSED_ANY &&
        plan_fused(sizes, L, B, PREC_TF32, 0).ok) {
        prec = PREC_TF32;
        snprintf(why, n, "TF32: the deep fused step runs here, and in BF16 it is no faster than in TF32 (it reads "
                         "the FP32 weights either way)");
    } else if (prec == PREC_BF16 &&
               !(fused_asked && L >= 3 && plan_fused(sizes, L, B, PREC_BF16, path == PLAN_ASK_FUSED_ANY).ok)) {
        int copies = 0;
        for (int l = 0; l + 1 < L; l++) copies += matmul_fast_bf16_plan(MF_FWD, B, sizes[l + 1], sizes[l]) >= 0;
        if (!plan_bf16_fits(sizes, L)) {
            prec = PREC_TF32;
            snprintf(why, n, "TF32: BF16 keeps no copies here (a width not a multiple of 8), and TF32 is faster "
                             "than BF16 on FP32 operands");
        } else if (2 * copies < L - 1) {
            prec = PREC_TF32;
            snprintf(why, n, "TF32: at batch %d the BF16-copies kernels fill the GPU in %d of %d hidden layers; "
                             "TF32 is faster than BF16 on FP32 operands", B, copies, L - 1);
        }
    }
    if (prec >= PREC_TF32 && fused_asked && L == 2 && fused_step_plan(sizes, L, B, PREC_FP32).ok) {
        snprintf(why, n, "FP32: the one-hidden-layer fused step (FP32 only) is faster than a step of kernels "
                         "in any precision");
        prec = PREC_FP32;
    }
    return prec;
}

// ----------------------------------------------------------------------------
// -P: the plan in words

static void plan_print_product(FILE *f, int l, const char *name, const ProductPlan *pp) {
    if (!pp->used) return;
    char cfg[48] = "-";
    if (pp->family == FAM_TF32_KMAJOR || pp->family == FAM_BF16_COPIES || pp->family == FAM_WGMMA_BF16_COPIES)
        snprintf(cfg, sizeof(cfg), "%d", pp->mm.cfg);
    else if (pp->family == FAM_HEAD)
        snprintf(cfg, sizeof(cfg), "%s", pp->mm.cfg ? "rows by warps" : "rows by blocks");
    else
        snprintf(cfg, sizeof(cfg), "%d, K in %d%s", pp->mm.cfg, pp->mm.splits, pp->mm.cluster ? " (cluster)" : "");
    fprintf(f, "  %-3d %-5s %5d x %5d x %5d  %-21s %-20s %-5s %-17s %-10s %8.1f\n", l, name, pp->M, pp->N, pp->K,
            FAM_NAMES[pp->family], cfg, STREAM_NAMES[pp->stream], EPI_NAMES[pp->epi], SRC_NAMES[pp->source],
            pp->est_us);
}

// one line per product: its shape, family, configuration and K split, stream, epilogue, where the
// choice came from and its expected time (microseconds)
static void plan_print_batch(FILE *f, const StepPlan *p, const BatchPlan *bp) {
    static const char *const gather[] = {"FP32 values", "TF32 values", "pixel bytes"};
    fprintf(f, "%s at %d rows: the batch gathered as %s%s\n", bp->train ? "a step" : "evaluation", bp->bs,
            gather[bp->gather], bp->kmajor0 ? "; layer 0's input also transposed (its dW on the K-major kernel)" : "");
    fprintf(f, "  %-3s %-5s %-23s  %-21s %-20s %-5s %-17s %-10s %8s\n", "l", "prod", "M x N x K", "family",
            "config, split", "strm", "epilogue", "source", "est. us");
    static const char *const names[] = {"fwd", "dinp", "dW"};
    for (int l = 0; l < p->L; l++)
        for (int k = 0; k < 3; k++) plan_print_product(f, l, names[k], &bp->layer[l].p[k]);
    if (bp->train) {
        static const char *const sgd[] = {"in the SGD kernel", "in dW's epilogue", "after the sum over the ranks"};
        for (int l = 0; l < p->L; l++) {
            const LayerPlan *lp = &bp->layer[l];
            const int summed = lp->sgd == SGD_AFTER_SUM;   // (several ranks: W and b summed, then stepped)
            const int bf16_in_dw = p->bf16_copies && lp->sgd == SGD_IN_DW;   // (plan_bf16_sgd_in_dw)
            fprintf(f, "  layer %d: %s SGD step %s%s%s\n", l, summed ? "W's and b's" : "W's", sgd[lp->sgd],
                    lp->kmajor                              ? ", K-major copies"
                    : bf16_in_dw && lp->p[MF_DINP].used     ? " after dinp, with W's BF16 copy"
                    : bf16_in_dw                            ? ", with W's BF16 copy"
                                                            : "",
                    !summed ? "; b's in the bias gradient's kernel (bias stream)"
                    : lp->p[MF_DINP].used ? " (dW before dinp, its sum beside dinp on the comm stream)" : "");
        }
    }
}

// the plan of a step at bs rows (a rank's share of the batch on several ranks) and at last_bs (the
// epoch's last step), or the fused step's
static void plan_print(FILE *f, StepPlan *p, int bs, int last_bs) {
    fprintf(f, "the step plan: ");
    for (int l = 0; l <= p->L; l++) fprintf(f, "%d%s", p->sizes[l], l < p->L ? "," : "");
    static const char *const prec[] = {"FP32", "TF32", "BF16"};
    fprintf(f, " %s, batch %d, %s, %d rank%s; GPU: %d SMs, %s, %s, %s\n", ACT_NAMES[p->act], p->B, prec[p->prec],
            p->ranks, p->ranks > 1 ? "s" : "", p->gpu.sms, p->gpu.clusters ? "clusters" : "no clusters",
            p->gpu.wgmma ? "wgmma" : "no wgmma", p->gpu.tma ? "TMA" : "no TMA");
    fprintf(f, "runs as: %s", RUN_NAMES[p->run]);
    if (p->run == RUN_FUSED)
        fprintf(f, " (%s, %d blocks)\n", FAM_NAMES[p->fused.deep ? FAM_FUSED_DEEP : FAM_FUSED_STEP], p->fused.blocks);
    else
        fprintf(f, "%s%s\n", p->fused.why[0] ? "; not the fused step: " : "", p->fused.why);
    fprintf(f, "copies: %s%s%s\n", p->bf16_copies ? "BF16 weights, activations and gradients" : "",
            p->kmajor[0] || p->kmajor[1] ? "K-major TF32 copies for the layers marked below" : "",
            !p->bf16_copies && !p->kmajor[0] && !p->kmajor[1] ? "none" : "");
    if (p->run == RUN_FUSED) {
        fprintf(f, "(the fused step runs every product inside its kernel; below, the evaluation's products)\n");
        plan_print_batch(f, p, plan_batch(p, p->B, 0));
        return;
    }
    plan_print_batch(f, p, plan_batch(p, bs, 1));
    if (last_bs != bs) plan_print_batch(f, p, plan_batch(p, last_bs, 1));
}

// whether a plan launches family fam at some batch it has planned (test_mlp's coverage)
static int plan_uses_family(const StepPlan *p, int fam) {
    if (p->run == RUN_FUSED && fam == (p->fused.deep ? FAM_FUSED_DEEP : FAM_FUSED_STEP)) return 1;
    for (int i = 0; i < p->nbatch; i++)
        for (int l = 0; l < p->L; l++)
            for (int k = 0; k < 3; k++)
                if (p->batch[i].layer[l].p[k].used && p->batch[i].layer[l].p[k].family == fam &&
                    (p->run != RUN_FUSED || !p->batch[i].train))
                    return 1;
    return 0;
}

#endif  // MLP_FAST_STEP_PLAN_CUH
