/*
test_mlp: both GPU trainers diffed against the CPU, step by step and tensor by tensor, and
against PyTorch. This is the promise of mlp.cu: a reader can see that every kernel computes
what its CPU twin computes.

For each case (a model, an activation, a batch size, a trainer: the readable train_mlp.cu, or
train_mlp_fast.cu in FP32, TF32 or BF16), the GPU and the CPU models start from the same weights
(drawn on each side; checked bit for bit), see the same batches (the GPU gathers them from a
uint8 dataset on the device through a permutation, the CPU from the same bytes through the
same permutation; the first is checked bit for bit) and take STEPS SGD steps each,
independently; the last step's batch is a short one, as an epoch's last batch is. After every
step every tensor is compared (tests/check.h names them: each layer's output, the logits, the
loss, dlogits, each hidden layer's gradient, every weight and bias gradient, every weight and
bias after the update). Each tensor gets one line: its worst difference over the steps against
its tolerance, OK or NOT OK; a case that fails says at which step and in which tensor the two
first parted.

TF32 (-x 1) and BF16 (-x 2) are held twice: to the FP32 CPU within their own error, and product
by product to a CPU emulation of their arithmetic (operands rounded to nearest, FP32 sums) from the
GPU's own inputs, within a tenth of their measured error (see "TF32 and BF16: each product against
its emulation"). And every tile configuration of the fast matmuls, in every precision it is built
for (the FP32 ones run as 3xTF32 on the tensor cores too), against the CPU's product.

Then: both trainers' evaluation against the CPU's (the same number of right answers on the
test set, and on synthetic data with a short last batch, more rows than one block sums, and
tied logits); the softmax at logits of +-1000; bitwise determinism (the same seed twice; the
fast trainer's CUDA graphs against the same kernels launched one by one, with a short last
batch); the GPU against the PyTorch reference files; and last, that the fast trainer's cases launched
every kernel family of its step plan (kernels/fast/step/plan.cuh), which -Q's subset must do too.

Without a GPU the GPU checks are skipped (and counted as skipped). Exit code 1 on any NOT OK.
Flags: -V prints every tensor at every step; -Q runs only a subset that still launches every
kernel once, on small shapes (for compute-sanitizer); -X stops after the first case that fails
(dev/mutate/gpu_visit.sh: a mutant is killed by its first failed check). With the trainers' flags
(-m, -a, -b, -l, -k, -w, -d, -s, -x) and -N STEPS, -G readable|fast|both, it runs YOUR model instead: the first
steps of its training run on the CPU and the GPU side by side, every tensor at every step
(./test_mlp -h).
*/
#define TESTING
#include "train_mlp_cpu.c"
#include "train_mlp.cu"
#include "train_mlp_fast.cu"
#include "tests/check.h"
#include "tests/ref_cpu.h"

static int verbose = 0;
static int fail_fast = 0;  // -X: stop after the first case with a failed check
// -S I/N: only cases I, I + N, I + 2N ... (in the order the suite meets them), so that N processes,
// compute-sanitizer's among them, can share the suite; shard_cases counts the cases met so far
static int shard_i = 0, shard_n = 1, shard_cases = 0;

// one case of the suite, unless it is another shard's; with -X the suite stops at the first case
// that failed
#define CASE(call)                                              \
    do {                                                        \
        if (shard_cases++ % shard_n == shard_i) {               \
            call;                                               \
            if (fail_fast && checks_failed) return test_exit(); \
        }                                                       \
    } while (0)

// ----------------------------------------------------------------------------
// tolerances, per tensor and per kind of arithmetic
//
// FP32 (the readable trainer, and the fast one with -x 0): both sides round every product and sum
// to float32, in a different order (the CPU sums 8 lanes at a time, the GPU per thread or per
// tile, split-K adds partial sums), so each value carries ~sqrt(K)·6e-8 relative error, K <= 1024
// terms: ~2e-6. Over the steps the two trajectories drift apart by a few times that.
//   forward values, loss: rtol 1e-4, atol 1e-5 x max   ~10x the drift; the loss is a mean of logsumexps
//   gradients:            rtol 1e-3, atol 1e-4 x max   a gradient entry is a sum of B terms of both
//                                                      signs; cancellation makes small entries'
//                                                      relative error large, the atol covers them
//   weights:              rtol 1e-5, atol 1e-5 x max   the update lr·buf is ~1e-3 of a weight, so the
//                                                      gradient differences barely reach the weights
// The wide model (784,1024,1024,10, B=256) runs with tanh in the FP32 cases: with relu it has 500k
// relu units a step, and about once in 10 steps one of them lands within float32 rounding of zero,
// on for one side and off for the other (both right); that unit's whole row of dW then differs by
// its own size. The smaller shapes have 100x fewer units, so relu is tested there; the wide relu
// model is tested under TF32's norm bounds below.
// TF32 (-x 1): the tensor cores round each input to a 10-bit mantissa (relative 2^-11 ~ 5e-4 per
// product), ~250x the FP32 rounding. TF32 is not meant to follow the FP32 trajectory step after
// step, so the CPU is re-synchronised to the GPU's weights and momentum before every step, and
// each step's error is measured alone; and where a relu unit sits within TF32's rounding of zero
// the two sides disagree on whether it is on, which moves that unit's whole gradient row, so
// TF32 is held to the relative norm ||gpu - cpu|| / ||cpu|| of each tensor instead:
//   forward values, loss: 5e-3   one TF32 product is ~3e-4 (sqrt(K)·2^-11 averaged over the sum)
//   gradients:            5e-2   two or three TF32 products deep, plus the flipped relu rows
//   weights:              5e-4   the update moves a tensor by up to ~5% of its norm (a bias at the
//                                first steps of a small model at lr 0.1-0.5), and the gradient it
//                                applies carries TF32's error, a few 1e-3 of its norm
// These bounds only catch gross errors; the TF32 arithmetic itself is held far tighter below, each
// product against an emulation of what the tensor cores are meant to compute (emu_check_step).
// BF16 (-x 2): the same scheme. BF16 keeps 8 significant bits (relative 2^-9 ~ 2e-3 per operand),
// 4x TF32's error, so the bounds are 4x TF32's: forward values and loss 2e-2 (measured on an H100:
// up to 3.5e-3), gradients 2e-1 (measured: up to 6.6e-2, with the flipped relu rows); and weights
// 1e-2: the update moves a tensor by up to ~5% of its norm, and the gradient it applies carries
// BF16's error, up to 7e-2 of its norm (measured: 2.1e-3, a first layer's bias). Again the tight check
// is the emulation's; here too a real bug is off by ~1, and a wrong update by the update's size.
// A real bug (a missing 1/B, a bias gradient off by a row, a wrong derivative) moves some entries
// by their own size: relative error ~1, far past every bound.
static const Tolerances TOL_FP32 = {{1e-4, 1e-5, 0}, {1e-4, 1e-5, 0}, {1e-3, 1e-4, 0}, {1e-5, 1e-5, 0}};
static const Tolerances TOL_TF32 = {{0, 0, 5e-3}, {0, 0, 5e-3}, {0, 0, 5e-2}, {0, 0, 5e-4}};
static const Tolerances TOL_BF16 = {{0, 0, 2e-2}, {0, 0, 2e-2}, {0, 0, 2e-1}, {0, 0, 1e-2}};

static const char *const PREC_SHORT[] = {"", " TF32", " BF16"};


// ----------------------------------------------------------------------------
// TF32 and BF16: each product against its emulation
//
// What the fast trainer's TF32 path (-x 1) is meant to compute, product by product: the tensor cores
// multiply operands rounded to the nearest TF32 value (cvt.rna; kernels/fast/ops/round.cuh's round_tf32 is
// its CPU twin, bit for bit), exactly, and add the products in FP32. So every product of a step is
// emulated here from the GPU's own inputs of that step (its batch and stored activations, its dlogits
// and hidden gradients, its weights before the update): the operands rounded with round_tf32, then the
// CPU's FP32 matmul. The GPU and its emulation then differ only in the order of their FP32 additions
// (rel norm ~1e-7 to 1e-6, as in the FP32 cases), while TF32's own error -- the emulation against the
// plain FP32 product of the same inputs, measured beside it at every step -- is ~1e-4. The bound is
// set from that measurement: a tenth of it (EMU_SHARE), and never below EMU_FLOOR (FP32's
// summation-order floor). A product that truncates its operands instead of rounding them is off by
// about TF32's own error or more (a share of 1 to 3: ten times the bound and more); a weight gradient
// of 1024 rows with 2 of them zeroed by sqrt(2/1024) = 4e-2 (a share of ~100).
// The stored hidden outputs, round_tf32(act(sum + b)), are compared value by value: each must be the
// emulated value or its TF32 neighbour (a sum within FP32 rounding of a rounding boundary goes either
// way, as does a relu unit within 1e-5 of 0), and at most TF32_NEIGHBOURS of them the neighbour (a
// correct product: FP32 order differences ~1e-6 over a TF32 step of 5e-4 to 1e-3, well under 1%;
// the big model's 4096-long sums on the K-major wgmma kernel, which adds all of K in the tensor
// cores' accumulator (~1e-5: test_matmul_tf32k), 3.1% with tanh; truncated weights: ~30%).
// The fused head (C <= 32, kernels/fast/ops/head.cuh) computes the logits and the last hidden layer's
// gradient in FP32 on those inputs: those two are held to the FP32 floor against the FP32 product.
// BF16 (-x 2) is emulated the same way with round_bf16 (kernels/fast/ops/round.cuh: the kernels' rounding), with
// one difference: every operand is FP32 in memory (the batch, the stored activations, the weights)
// and rounded inside the kernels, so the emulation rounds them all, and the hidden outputs are
// stored as FP32 values: they are compared as products (the same share bound), not value by value.
#define EMU_SHARE 0.1
#define EMU_FLOOR 2e-6
#define TF32_NEIGHBOURS 0.05

typedef struct {
    char name[48];
    double worst_gpu, own_at_worst, worst_share;  // rel norms: GPU vs emulation, emulation vs FP32
    long neighbours, values;                     // stored outputs: TF32 neighbours of the emulation
    int stored, fp32, ok, worst_step;
} EmuStat;
typedef struct {
    EmuStat t[MAX_TENSORS];
    int n;
    int prec;   // PREC_TF32 or PREC_BF16
} EmuReport;

static EmuStat *emu_stat(EmuReport *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->t[i].name, name) == 0) return &r->t[i];
    EmuStat *s = &r->t[r->n++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->ok = 1;
    return s;
}

// x rounded to the report's precision, as the tensor cores take it
static float round_prec(const EmuReport *r, float x) { return r->prec == PREC_BF16 ? round_bf16(x) : round_tf32(x); }

static float *rounded_copy(const EmuReport *rep, const float *x, size_t n) {
    float *r = (float *)mallocCheck(n * sizeof(float));
    for (size_t i = 0; i < n; i++) r[i] = round_prec(rep, x[i]);
    return r;
}

// a product's output against its emulation (emu) and the FP32 product (ref); fp32: the product is
// FP32 by design (the fused head), held to the floor
static void emu_product(EmuReport *r, const char *name, int step, const float *gpu, const float *emu,
                         const float *ref, size_t n, int fp32) {
    EmuStat *s = emu_stat(r, name);
    double e_gpu = rel_norm(gpu, emu, n), e_own = rel_norm(emu, ref, n);
    double bound = fp32 ? EMU_FLOOR : fmax(EMU_SHARE * e_own, EMU_FLOOR);
    s->fp32 = fp32;
    if (!(e_gpu <= bound)) s->ok = 0;
    double share = e_own > 0 ? e_gpu / e_own : e_gpu > 0 ? INFINITY : 0;
    if (!(e_gpu <= s->worst_gpu) || s->values == 0) {
        s->worst_gpu = e_gpu;
        s->own_at_worst = e_own;
        s->worst_share = share;
        s->worst_step = step;
    }
    s->values += (long)n;
}

// the TF32 value next to e on the side of g (e a TF32 value): the spacing of TF32 values at |e|
static int tf32_neighbour(float g, float e) {
    float a = fmaxf(fabsf(g), fabsf(e));
    if (a == 0) return 0;
    return fabsf(g - e) <= ldexpf(1.0f, ilogbf(a) - 10) * 1.0001f;
}

// stored hidden outputs: every value the emulation's or its TF32 neighbour, few of them neighbours
static void emu_stored(EmuReport *r, const char *name, int step, const float *gpu, const float *emu, size_t n) {
    EmuStat *s = emu_stat(r, name);
    s->stored = 1;
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(emu[i]));
    long neighbours = 0;
    for (size_t i = 0; i < n; i++) {
        if (gpu[i] == emu[i]) continue;
        if (tf32_neighbour(gpu[i], emu[i]) || fabs((double)gpu[i] - emu[i]) <= 1e-5 * scale) neighbours++;
        else s->ok = 0, s->worst_step = step;
    }
    s->neighbours += neighbours;
    s->values += (long)n;
    if (s->neighbours > TF32_NEIGHBOURS * s->values) s->ok = 0;
}

// Every product of one fast-trainer TF32 or BF16 step (r->prec), from the GPU's inputs (got: its
// tensors after the step; w: its weights before the update), against the emulation. (The inputs
// x are rounded too: TF32 values already, which rounding leaves as they are; FP32 under BF16.)
static void emu_check_step(EmuReport *r, int step, const StepTensors *got, const float *w, const int *sizes, int L,
                            int act, int bs, int head_fused) {
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    param_layout(sizes, L, w_off, b_off);
    char name[64];
    for (int l = 0; l < L; l++) {  // the forward products: acts[l] times W_l
        int IN = sizes[l], OUT = sizes[l + 1], last = l == L - 1, fp32 = last && head_fused;
        size_t n = (size_t)bs * OUT;
        const float *W = w + w_off[l], *b = w + b_off[l];
        float *Wr = rounded_copy(r, W, (size_t)OUT * IN), *xr = rounded_copy(r, got->acts[l], (size_t)bs * IN);
        float *emu = (float *)mallocCheck(n * sizeof(float)), *ref = (float *)mallocCheck(n * sizeof(float));
        matmul_forward_cpu(ref, got->acts[l], W, b, bs, IN, OUT);
        matmul_forward_cpu(emu, fp32 ? got->acts[l] : xr, fp32 ? W : Wr, b, bs, IN, OUT);
        if (last) {
            emu_product(r, fp32 ? "logits (FP32 head)" : "logits", step, got->acts[L], emu, ref, n, fp32);
        } else if (r->prec == PREC_TF32) {
            activation_forward_cpu(emu, n, act);
            for (size_t i = 0; i < n; i++) emu[i] = round_tf32(emu[i]);
            snprintf(name, sizeof(name), "act%d (stored)", l + 1);
            emu_stored(r, name, step, got->acts[l + 1], emu, n);
        } else {
            activation_forward_cpu(emu, n, act);
            activation_forward_cpu(ref, n, act);
            snprintf(name, sizeof(name), "act%d", l + 1);
            emu_product(r, name, step, got->acts[l + 1], emu, ref, n, 0);
        }
        free(Wr);
        free(xr);
        free(emu);
        free(ref);
    }
    for (int l = L - 1; l >= 0; l--) {  // the backward products: dW_l = dout^T acts[l], dinp = dout W_l
        int IN = sizes[l], OUT = sizes[l + 1], fp32_dinp = l == L - 1 && head_fused;
        const float *W = w + w_off[l], *dout = got->dacts[l + 1], *x = got->acts[l];
        float *dout_r = rounded_copy(r, dout, (size_t)bs * OUT), *Wr = rounded_copy(r, W, (size_t)OUT * IN);
        float *xr = rounded_copy(r, x, (size_t)bs * IN);
        size_t nw = (size_t)OUT * IN, nx = (size_t)bs * IN;
        float *dw_emu = (float *)mallocCheck(nw * sizeof(float)), *dw_ref = (float *)mallocCheck(nw * sizeof(float));
        float *dx_emu = (float *)mallocCheck(nx * sizeof(float)), *dx_ref = (float *)mallocCheck(nx * sizeof(float));
        float *db = (float *)mallocCheck((size_t)OUT * sizeof(float));
        matmul_backward_cpu(l > 0 ? dx_ref : NULL, dw_ref, db, dout, x, W, bs, IN, OUT);
        matmul_backward_cpu(l > 0 ? dx_emu : NULL, dw_emu, db, dout_r, xr, Wr, bs, IN, OUT);
        snprintf(name, sizeof(name), "dW%d", l);
        emu_product(r, name, step, got->grads + w_off[l], dw_emu, dw_ref, nw, 0);
        if (l > 0) {
            activation_backward_cpu(dx_ref, x, nx, act);
            activation_backward_cpu(dx_emu, x, nx, act);
            snprintf(name, sizeof(name), fp32_dinp ? "dact%d (FP32 head)" : "dact%d", l);
            emu_product(r, name, step, got->dacts[l], fp32_dinp ? dx_ref : dx_emu, dx_ref, nx, fp32_dinp);
        }
        free(dout_r);
        free(Wr);
        free(xr);
        free(dw_emu);
        free(dw_ref);
        free(dx_emu);
        free(dx_ref);
        free(db);
    }
}

static void emu_report_print(const EmuReport *r) {
    const char *pn = r->prec == PREC_BF16 ? "BF16" : "TF32";
    printf("  each %s product against its emulation (bound: %.0e of %s's own error, at least %.0e):\n", pn,
           EMU_SHARE, pn, EMU_FLOOR);
    for (int i = 0; i < r->n; i++) {
        const EmuStat *s = &r->t[i];
        if (s->stored)
            check(s->ok, "%-18s stored as the emulation's TF32 value, or its neighbour for %ld of %ld values "
                  "(<= %.0f%%)", s->name, s->neighbours, s->values, 100 * TF32_NEIGHBOURS);
        else if (s->fp32)
            check(s->ok, "%-18s rel norm %.2e against the FP32 product (<= %.0e; worst step %d)", s->name,
                  s->worst_gpu, EMU_FLOOR, s->worst_step);
        else
            check(s->ok, "%-18s rel norm %.2e against the emulation, %s's own error %.2e: a share of %.3f (<= %.1f; "
                  "worst step %d)", s->name, s->worst_gpu, pn, s->own_at_worst, s->worst_share, EMU_SHARE,
                  s->worst_step);
    }
}

// ----------------------------------------------------------------------------
// one GPU model of either trainer, behind one small interface

// FUSED: the fast trainer's -f 3, its fused steps (kernels/fast/fused/fused_step.cuh, or fused_deep.cuh for
// two or more hidden layers) for every model they can run (-f 2 takes them where they are faster)
enum { READABLE = 0, FAST = 1, FUSED = 2, ALL_TRAINERS = -1 };
static const char *const TRAINER_NAMES[] = {"train_mlp.cu (readable)", "train_mlp_fast.cu",
                                            "train_mlp_fast.cu -f 3 (a fused step)"};

typedef struct {
    int trainer, prec, B, L, sizes[MAX_LAYERS + 1];   // prec: PREC_* (run/args.h), the fast trainer's -x
    Model r;           // the readable trainer's model
    fast::Model f;     // the fast trainer's
    int *perm;         // (n) the permutation, on the device (the readable trainer's; the fast one keeps its own)
    float *loss_dev;   // the readable trainer's mean loss of the last step (the fast one keeps step_losses)
    Config cfg;        // lr, momentum, weight decay
    cudaStream_t stream;
    // host copies of the last step's tensors
    float *acts[MAX_LAYERS + 1], *dacts[MAX_LAYERS + 1], *grads, *params;
    int steps;         // steps taken
} GpuModel;

static void download(float *host, const float *dev, size_t n) {
    cudaCheck(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
}

typedef struct {
    float lr, momentum, weight_decay;
} Optim;
static const Optim TEST_OPTIM = {0.1f, 0.9f, 5e-4f};

// NULL, or a stand-in for the trainer's plan cache (train_mlp_fast.cu's plan_refine): gpu_build hands
// it to the fast trainer's plan, which passes each new batch plan through it
static void (*test_refine)(void *ctx, const StepPlan *p, BatchPlan *bp) = NULL;

// What a cache entry gives where the autotune timed FFMA fastest: every tiled FP32 product on FFMA
// configuration 1, unsplit (but the first layer's on pixel bytes, which keep their 3xTF32 tile, as
// plan_refine keeps them)
static void refine_ffma(void *ctx, const StepPlan *p, BatchPlan *bp) {
    (void)ctx;
    for (int l = 0; l < p->L; l++)
        for (int k = 0; k < 3; k++) {
            ProductPlan *pp = &bp->layer[l].p[k];
            MatmulFastPlan mm;
            if (!pp->used || pp->prec != 0 || pp->family == FAM_HEAD ||
                !matmul_fast_plan_fixed(&mm, (MfProduct)k, pp->M, pp->N, pp->K, 0, k == MF_DWEIGHT && p->have_scratch, 1, 1))
                continue;
            pp->mm = mm;
            pp->family = plan_tiled_family(0, &mm);
            pp->source = SRC_CACHE;
        }
}

// What the plan gives a large -x 2 model (plan_bf16_sgd_in_dw), on a small one: every layer whose dW
// takes the BF16 wgmma kernel with W's SGD step in that dW's epilogue, after dinp; counts in
// refined_layers the layers above the first it moved (those whose order changes)
static int refined_layers = 0;
static void refine_bf16_sgd(void *ctx, const StepPlan *p, BatchPlan *bp) {
    (void)ctx;
    if (!bp->train || !p->bf16_copies) return;
    for (int l = 0; l < p->L; l++) {
        LayerPlan *lp = &bp->layer[l];
        if (lp->p[MF_DWEIGHT].family != FAM_WGMMA_BF16_COPIES || lp->sgd == SGD_IN_DW) continue;
        lp->sgd = SGD_IN_DW;
        lp->p[MF_DWEIGHT].epi = EPI_SGD;
        refined_layers += l > 0;
    }
}

static void gpu_build(GpuModel *g, int trainer, int prec, const int *sizes, int L, int act, int B, int n, int steps,
                      uint64_t seed, Optim o) {
    memset(g, 0, sizeof(*g));
    g->trainer = trainer;
    g->prec = prec;
    g->B = B;
    g->L = L;
    memcpy(g->sizes, sizes, sizeof(int) * (size_t)(L + 1));
    config_defaults(&g->cfg, PROG_FAST);
    g->cfg.batch = B;
    g->cfg.lr = o.lr;
    g->cfg.momentum = o.momentum;
    g->cfg.weight_decay = o.weight_decay;
    g->cfg.precision = prec;
    cudaCheck(cudaStreamCreate(&g->stream));
    if (trainer == READABLE) {
        model_build(&g->r, sizes, L, act, B);
        model_init_params(&g->r, seed);
        g->perm = (int *)cudaMallocCheck(sizeof(int) * (size_t)n, "the permutation");
        g->loss_dev = (float *)cudaMallocCheck(sizeof(float), "the loss");
    } else {
        fast::model_build(&g->f, sizes, L, act, B, B, prec, n, steps);
        if (test_refine) {   // (the batch plans made again through it, as the trainer's cache does)
            g->f.plan.refine = test_refine;
            g->f.plan.nbatch = 0;
        }
        fast::model_init_params(&g->f, seed, g->stream);
        if (trainer == FUSED && !fast::model_use_fused(&g->f, 1))
            die("", "internal: test case for the fused step with a model it does not take: %s", g->f.plan.fused.why);
    }
    size_t np = trainer == READABLE ? g->r.num_params : g->f.num_params;
    g->grads = (float *)mallocCheck(np * sizeof(float));
    g->params = (float *)mallocCheck(np * sizeof(float));
    for (int l = 0; l <= L; l++) {
        g->acts[l] = (float *)mallocCheck((size_t)B * sizes[l] * sizeof(float));
        g->dacts[l] = (float *)mallocCheck((size_t)B * sizes[l] * sizeof(float));
    }
    cudaCheck(cudaDeviceSynchronize());
}

static void gpu_free(GpuModel *g) {
    if (g->trainer == READABLE) {
        model_free(&g->r);
        cudaCheck(cudaFree(g->perm));
        cudaCheck(cudaFree(g->loss_dev));
    } else {
        fast::model_free(&g->f);
    }
    for (int l = 0; l <= g->L; l++) {
        free(g->acts[l]);
        free(g->dacts[l]);
    }
    free(g->grads);
    free(g->params);
    cudaCheck(cudaStreamDestroy(g->stream));
}

static size_t gpu_num_params(const GpuModel *g) { return g->trainer == READABLE ? g->r.num_params : g->f.num_params; }
static float *gpu_params_dev(GpuModel *g) { return g->trainer == READABLE ? g->r.params : g->f.params; }
static float *gpu_mbuf_dev(GpuModel *g) { return g->trainer == READABLE ? g->r.mbuf : g->f.mbuf; }
static float **gpu_acts_dev(GpuModel *g) { return g->trainer == READABLE ? g->r.acts : g->f.acts; }
static float **gpu_dacts_dev(GpuModel *g) { return g->trainer == READABLE ? g->r.dacts : g->f.dacts; }

static void gpu_set_perm(GpuModel *g, const int *perm, int n) {
    int *dst = g->trainer == READABLE ? g->perm : g->f.perm;
    cudaCheck(cudaMemcpy(dst, perm, sizeof(int) * (size_t)n, cudaMemcpyHostToDevice));
}

// one training step on rows steps*B .. steps*B + bs - 1 of the permutation: the readable trainer's
// loop body, the fast trainer's step with its kernels launched one by one, or its fused step (a run of
// one step)
static void gpu_step(GpuModel *g, const DeviceData *d, int bs) {
    if (g->trainer == READABLE) {
        gather_batch(g->r.acts[0], g->r.labels, d, g->perm, g->steps * g->B, bs);
        model_forward(&g->r, bs);
        model_loss(&g->r, bs, g->loss_dev);
        model_backward(&g->r, bs);
        model_update(&g->r, g->cfg.lr, g->cfg.momentum, g->cfg.weight_decay);
    } else if (g->trainer == FUSED) {
        fast::fused_run(&g->f, d, 1, bs, sgd_of(&g->cfg), g->stream);
    } else {
        fast::train_step(&g->f, d, bs, sgd_of(&g->cfg), g->stream);
    }
    g->steps++;
    cudaCheck(cudaDeviceSynchronize());
}

// the last step's tensors (bs rows), copied to the host
static StepTensors gpu_snapshot(GpuModel *g, int bs) {
    StepTensors s;
    memset(&s, 0, sizeof(s));
    float **acts = gpu_acts_dev(g), **dacts = gpu_dacts_dev(g);
    for (int l = 0; l <= g->L; l++) {
        download(g->acts[l], acts[l], (size_t)bs * g->sizes[l]);
        s.acts[l] = g->acts[l];
        if (l > 0) {
            download(g->dacts[l], dacts[l], (size_t)bs * g->sizes[l]);
            s.dacts[l] = g->dacts[l];
        }
    }
    download(g->grads, g->trainer == READABLE ? g->r.grads : g->f.grads, gpu_num_params(g));
    download(g->params, gpu_params_dev(g), gpu_num_params(g));
    s.grads = g->grads;
    s.params = g->params;
    download(&s.loss, g->trainer == READABLE ? g->loss_dev : g->f.step_losses + g->steps - 1, 1);
    return s;
}

static StepTensors cpu_view(ModelCPU *c, float loss) {
    StepTensors s;
    memset(&s, 0, sizeof(s));
    for (int l = 0; l <= c->L; l++) {
        s.acts[l] = c->acts[l];
        s.dacts[l] = l > 0 ? c->dacts[l] : NULL;
    }
    s.grads = c->grads;
    s.params = c->params;
    s.loss = loss;
    return s;
}

// ----------------------------------------------------------------------------
// synthetic data: random bytes, random labels (the same on both sides)

typedef struct {
    uint8_t *images, *labels;  // (n, D) and (n)
    int n, D;
} HostData;

static HostData make_data(int n, int D, int C, uint64_t seed) {
    HostData h = {(uint8_t *)mallocCheck((size_t)n * D), (uint8_t *)mallocCheck((size_t)n), n, D};
    Rng rng;
    rng_seed(&rng, seed, 9);
    for (size_t i = 0; i < (size_t)n * D; i++) h.images[i] = (uint8_t)rng_below(&rng, 256);
    for (int i = 0; i < n; i++) h.labels[i] = (uint8_t)rng_below(&rng, (uint32_t)C);
    return h;
}

static void shape_string(char *out, size_t n, const int *sizes, int L) {
    size_t k = 0;
    for (int l = 0; l <= L && k < n; l++) k += (size_t)snprintf(out + k, n - k, l ? ",%d" : "%d", sizes[l]);
}

// ----------------------------------------------------------------------------
// a GPU trainer against the CPU, STEPS steps, the last one short

#define STEPS 8

// relu's derivative jumps at 0: a hidden unit whose input lands within float32 rounding of 0 is on
// for one side and off for the other, both right, and then its whole row of the backward pass
// differs by its own size. Counts such ties among the hidden layers' outputs of one step: units on
// for one side and off for the other, both within 1e-5 x the layer's largest output of 0. Returns
// -1 when a unit is on for one side and off for the other further from 0 than that (not a tie:
// the comparison then fails on its own).
static int relu_ties(const StepTensors *got, const StepTensors *want, const int *sizes, int L, int bs) {
    int ties = 0;
    for (int l = 1; l < L; l++) {
        size_t n = (size_t)bs * sizes[l];
        double scale = 0;
        for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want->acts[l][i]));
        for (size_t i = 0; i < n; i++) {
            if ((got->acts[l][i] > 0) == (want->acts[l][i] > 0)) continue;
            if (fabs(got->acts[l][i]) > 1e-5 * scale || fabs(want->acts[l][i]) > 1e-5 * scale) return -1;
            ties++;
        }
    }
    return ties;
}

// `steps` steps of one GPU trainer and the CPU from the same seed, side by side, on rows
// perm[t*B ...] of the data (the last step last_bs rows); every tensor compared after every step.
// Returns 1 when every tensor stayed within its tolerance.
static int gpu_vs_cpu_on(int trainer, int prec, const int *sizes, int L, int act, int B, int steps, int last_bs,
                         const HostData *h, const int *perm, uint64_t seed, Optim o) {
    int D = sizes[0];
    DeviceData d;
    device_data_upload(&d, h->images, h->labels, h->n, h->D);
    GpuModel g;
    gpu_build(&g, trainer, prec, sizes, L, act, B, h->n, steps, seed, o);
    ModelCPU c;
    model_build_cpu(&c, sizes, L, act, B);
    model_init_params_cpu(&c, seed);
    float *init = (float *)mallocCheck(c.num_params * sizeof(float));
    download(init, gpu_params_dev(&g), c.num_params);
    check(memcmp(init, c.params, c.num_params * sizeof(float)) == 0,
          "initial weights: cuRAND's Philox on the GPU and common/rng.h's on the CPU agree bit for bit");
    memcpy(c.params, init, c.num_params * sizeof(float));  // from here on, the GPU's weights on both sides
    free(init);
    gpu_set_perm(&g, perm, h->n);

    const int lowp = prec != PREC_FP32, tf32 = prec == PREC_TF32;   // tensor cores; TF32's stored values
    const Tolerances *tol = prec == PREC_TF32 ? &TOL_TF32 : prec == PREC_BF16 ? &TOL_BF16 : &TOL_FP32;
    Report rep;
    report_init(&rep, verbose);
    static EmuReport trep;
    memset(&trep, 0, sizeof(trep));
    trep.prec = prec;
    float *w_before = lowp ? (float *)mallocCheck(c.num_params * sizeof(float)) : NULL;
    int resync = 0;
    for (int t = 0; t < steps; t++) {
        int bs = t == steps - 1 ? last_bs : B;
        if ((lowp || resync) && t > 0) {  // one step at a time from the GPU's state (see the tolerances)
            download(c.params, gpu_params_dev(&g), c.num_params);
            download(c.mbuf, gpu_mbuf_dev(&g), c.num_params);
        }
        if (lowp) memcpy(w_before, c.params, c.num_params * sizeof(float));  // (= the GPU's: just synced)
        gpu_step(&g, &d, bs);
        StepTensors got = gpu_snapshot(&g, bs);
        if (lowp) emu_check_step(&trep, t, &got, w_before, sizes, L, act, bs, fast::model_head_fused(&g.f));
        gather_batch_cpu(c.acts[0], c.labels, h->images, h->labels, perm, t * B, bs, D);
        if (t == 0) {  // the batch itself: the same floats (pixel / 255, a division on both sides; TF32:
                       // rounded by cvt.rna on the GPU, by kernels/fast/ops/round.cuh's integer twin here;
                       // the fast trainer's pixel bytes (FP32 on pixels): divided here)
            const int pixels = g.trainer != READABLE && g.f.x_pixels;
            size_t differ = 0;
            for (size_t i = 0; i < (size_t)bs * D; i++)
                differ += (pixels ? got.acts[0][i] / 255.0f : got.acts[0][i]) !=
                          (tf32 ? round_tf32(c.acts[0][i]) : c.acts[0][i]);
            check(differ == 0, "the first batch on the GPU equals the CPU's bit for bit%s (%zu of %zu differ)",
                  tf32 ? ", rounded to TF32" : pixels ? ", as pixel bytes" : "", differ, (size_t)bs * D);
        }
        model_forward_cpu(&c, bs);
        float cpu_loss = (float)model_loss_cpu(&c, bs);
        model_backward_cpu(&c, bs);
        model_update_cpu(&c, o.lr, o.momentum, o.weight_decay);
        StepTensors want = cpu_view(&c, cpu_loss);
        if (verbose) printf("  step %d (%d rows): loss GPU %.6f, CPU %.6f\n", t, bs, got.loss, cpu_loss);
        int ties = act == ACT_RELU && !lowp ? relu_ties(&got, &want, sizes, L, bs) : 0;
        if (ties > 0) {  // that step's backward pass may differ by a unit's whole gradient: its forward pass only,
                     // and from here on each step from the GPU's state
            printf("  step %d: %d relu unit(s) within float32 rounding of zero, on for one side and off for the other "
                   "(a tie, not a bug): this step's forward pass is compared, and each later step starts from the "
                   "GPU's state\n", t, ties);
            for (int l = 1; l <= L; l++) want.dacts[l] = got.dacts[l] = NULL;
            want.grads = want.params = got.grads = got.params = NULL;
            resync = 1;
        }
        compare_step(&rep, t, &got, &want, sizes, L, bs, tol);
    }
    if (tf32) {  // the forward products' copy of the weights is round_tf32 of the FP32 ones, bit for bit
        float *rounded = (float *)mallocCheck(c.num_params * sizeof(float));
        download(rounded, g.f.params_tf32, c.num_params);
        size_t differ = 0, count = 0;
        for (int l = 0; l < L; l++)
            for (size_t i = c.w_off[l]; i < c.w_off[l] + (size_t)sizes[l + 1] * sizes[l]; i++, count++)
                differ += rounded[i] != round_tf32(g.params[i]);
        check(differ == 0, "the TF32 copy of the weights is the FP32 weights rounded, bit for bit (%zu of %zu differ)",
              differ, count);
        free(rounded);
        for (int l = 1; l < L; l++) {  // and the hidden layers' outputs are stored as TF32 values
            size_t na = (size_t)last_bs * sizes[l], odd = 0;
            for (size_t i = 0; i < na; i++) odd += g.acts[l][i] != round_tf32(g.acts[l][i]);
            check(odd == 0, "hidden layer %d's output is stored rounded to TF32 (%zu of %zu are not)", l, odd, na);
        }
    }
    int ok = report_print(&rep);
    if (lowp) {
        emu_report_print(&trep);
        free(w_before);
    }
    model_free_cpu(&c);
    gpu_free(&g);
    device_data_free(&d);
    return ok;
}

// one case of the fixed suite: synthetic data, STEPS steps, the last one short
static void gpu_vs_cpu(int trainer, int prec, const int *sizes, int L, int act, int B, int last_bs) {
    char shape[96];
    shape_string(shape, sizeof(shape), sizes, L);
    printf("\n-- %s%s: %s %s, B=%d (last batch %d), %d steps%s\n", TRAINER_NAMES[trainer], PREC_SHORT[prec], shape,
           ACT_NAMES[act], B, last_bs, STEPS, prec ? ", each from the GPU's state" : "");
    int n = B * (STEPS - 1) + last_bs;
    HostData h = make_data(n, sizes[0], sizes[L], 1000 + B);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)n);
    Rng rng;
    rng_seed(&rng, 5, 1);
    rng_permutation(&rng, perm, n);
    gpu_vs_cpu_on(trainer, prec, sizes, L, act, B, STEPS, last_bs, &h, perm, 1337, TEST_OPTIM);
    free(perm);
    free(h.images);
    free(h.labels);
}

// the deep fused step in TF32 with fewer of its tiles on the TMA, or none split (fused_deep_test_tiles,
// fused_deep_tma in kernels/fast/fused/fused_deep.cuh: 0 none, the mma.sync tiles; 1 the forward tiles
// alone; 2 the forward and dinp tiles without clusters), against the CPU: on a Hopper build the default
// splits the forward and dinp tiles in K between the blocks of clusters, so this keeps the others
// checked too. blocks > 0: on that many blocks, where each takes several jobs of a phase
static void gpu_vs_cpu_fused_tma(int level, int blocks, const int *sizes, int L, int act, int B, int last_bs) {
    static const char *what[] = {"the mma.sync tiles", "the TMA forward tiles alone", "the TMA tiles, no clusters",
                                 "the TMA tiles split in K, in clusters"};
    const int full = fused_deep_tma(PREC_TF32);   // asked for by default: 3 on a Hopper build whose driver makes tensor maps, else 0
    fused_deep_test_tiles(level < 3 ? level : -1, blocks);
    printf("\n(the deep fused step's TMA level %d: %s", level, what[level]);
    if (blocks) printf(", blocks %d", blocks);
    printf(")");
    const FusedPlan f = plan_fused(sizes, L, B, PREC_TF32, 1);
    // (level 3 falls back to 2 where the GPU cannot hold the clusters)
    const bool lv = full ? f.tma == level || (level == 3 && f.tma == 2) : f.tma == 0;
    if (check(f.ok && lv && (!blocks || f.blocks == blocks), "TMA level %d: the deep fused step's plan takes "
              "level %d (the default here: %d) on %d blocks", level, f.tma, full, f.blocks))
        gpu_vs_cpu(FUSED, PREC_TF32, sizes, L, act, B, last_bs);
    fused_deep_test_tiles(-1, 0);
}

// -x 1 with the hidden layers' products on the K-major TF32 kernel and its copies (model_tf32k), which
// the trainer takes only where the tiles fill the GPU (the big model, below): here at any fill, so
// that these smaller models take it; the test says whether layer 1 did, and layer 0's dW (model_tf32k0:
// with layer 1's dinp storing its output transposed for it).
static void gpu_vs_cpu_tf32k(const int *sizes, int L, int act, int B, int last_bs) {
    const float fill = matmul_fast_tf32k_set_min_fill(0.0f);
    fast::Model m;
    fast::model_build(&m, sizes, L, act, B, B, PREC_TF32, B, 1);
    const int taken = fast::model_tf32k(&m, 1, B), taken0 = fast::model_tf32k0(&m, B);
    fast::model_free(&m);
    if (!matmul_fast_tf32k_fits(1 << 12, 1 << 12, 1 << 12)) {
        skip("this build has no wgmma kernel (GPU_ARCH=90 builds it): -x 1's K-major path is not run");
    } else if (check(taken && taken0, "layer 1 of this model takes the K-major TF32 kernel at batch %d (%s), and layer "
                     "0's dW (%s)", B, taken ? "yes" : "no", taken0 ? "yes" : "no")) {
        gpu_vs_cpu(FAST, PREC_TF32, sizes, L, act, B, last_bs);
    }
    matmul_fast_tf32k_set_min_fill(fill);
}

// The big model (784,4096,4096,10, batch 1024): its products take the large tiles, FP32 as 3xTF32 on
// the tensor cores, BF16 on larger tiles than any smaller model reaches, and TF32 on the K-major
// kernel. 3 steps (each ~120 GFLOP on the CPU
// side), tanh (see "The wide model" above), under each precision's tolerances.
static void gpu_vs_cpu_big(int prec) {
    const int sizes[] = {784, 4096, 4096, 10}, B = 1024, steps = 3;
    printf("\n-- %s%s: 784,4096,4096,10 tanh, B=%d, %d steps (the big model's tuned kernels)\n", TRAINER_NAMES[FAST],
           PREC_SHORT[prec], B, steps);
    HostData h = make_data(B * steps, 784, 10, 4096);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)h.n);
    for (int i = 0; i < h.n; i++) perm[i] = i;
    gpu_vs_cpu_on(FAST, prec, sizes, 3, ACT_TANH, B, steps, B, &h, perm, 1337, TEST_OPTIM);
    free(perm);
    free(h.images);
    free(h.labels);
}

// ----------------------------------------------------------------------------
// the kernel families that no case above launches on an H100/H200, each in a case whose plan has it

// The candidates, smallest first (on 132 SMs: BF16 copies of the hidden layer's operands at any fill,
// which main asks for; a forward product of 68 TF32 wgmma tiles of 64 x 128 over K = 256, too few
// for the K-major kernel; FP32 models whose products run as 3xTF32 on FP32 values (the layers past
// the first; the first takes the batch as pixel bytes), the second for GPUs of up to 256 SMs)
static const int FAMILY_BF16[] = {784, 64, 40}, FAMILY_TF32[] = {256, 2112, 10}, FAMILY_FP32[] = {768, 1536, 10},
                 FAMILY_FP32_WIDE[] = {1024, 2048, 10};
static const struct { const int *sizes; int L, prec, B, last_bs; } family_cases[] = {
    {FAMILY_BF16, 2, PREC_BF16, 33, 9},
    {FAMILY_TF32, 2, PREC_TF32, 256, 100},
    {FAMILY_FP32, 2, PREC_FP32, 256, 100},
    {FAMILY_FP32_WIDE, 2, PREC_FP32, 256, 100},
};

// the families whose kernels only a GPU and a build with wgmma run (sm_90a)
static int family_needs_wgmma(int f) {
    return f == FAM_WGMMA_TF32 || f == FAM_WGMMA_BF16_COPIES || f == FAM_TF32_KMAJOR;
}

// The first candidate whose plan on this GPU (both of its batch sizes, as the fast trainer makes
// it) launches family fam, against the CPU step by step (gpu_vs_cpu). no_wgmma: planned for this GPU
// described without wgmma and the TMA, as for an A100, where the BF16 copies take the mma.sync
// kernel (on a GPU with wgmma its cost model always prefers the wgmma configuration); the kernels
// are this build's, run on this GPU.
static void gpu_vs_cpu_family(int fam, int no_wgmma) {
    MfTarget t = *matmul_fast_target();
    const int wgmma = t.wgmma;
    if (no_wgmma) {
        t.wgmma = t.tma = 0;
        matmul_fast_set_target(&t);
    }
    int found = -1;
    for (int i = 0; i < (int)(sizeof(family_cases) / sizeof(family_cases[0])) && found < 0; i++) {
        static StepPlan p;   // (large: not on the stack)
        step_plan_make(&p, family_cases[i].sizes, family_cases[i].L, ACT_TANH, family_cases[i].B,
                       family_cases[i].prec, PLAN_ASK_GRAPHS, 1);
        plan_batch(&p, family_cases[i].B, 1);
        plan_batch(&p, family_cases[i].last_bs, 1);
        if (plan_uses_family(&p, fam)) found = i;
    }
    // FFMA: where no candidate's plan takes it (on Hopper the cost model finds 3xTF32 faster on all
    // but the smallest products), an FP32 candidate's plan as a cache entry gives it
    if (found < 0 && fam == FAM_FFMA)
        for (int i = 0; i < (int)(sizeof(family_cases) / sizeof(family_cases[0])) && found < 0; i++)
            if (family_cases[i].prec == PREC_FP32) found = i, test_refine = refine_ffma;
    char shape[96] = "";
    if (found >= 0) shape_string(shape, sizeof(shape), family_cases[found].sizes, family_cases[found].L);
    if (test_refine) snprintf(shape + strlen(shape), sizeof(shape) - strlen(shape), " as the cache gives it");
    if (found < 0 && family_needs_wgmma(fam) && !wgmma) {
        skip("family %s: this GPU or build has no wgmma (an sm_90 GPU and a GPU_ARCH=90 build have)", FAM_NAMES[fam]);
    } else if (check(found >= 0, "family %s: %s%s%s", FAM_NAMES[fam], found >= 0 ? "the plan of " : "",
                     found >= 0 ? shape : "no candidate's plan uses it", no_wgmma ? ", planned without wgmma" : "")) {
        // (cleared first, so that this case's launches alone set it)
        const unsigned before = fast::plan_launched_families;
        fast::plan_launched_families &= ~(1u << fam);
        gpu_vs_cpu(FAST, family_cases[found].prec, family_cases[found].sizes, family_cases[found].L, ACT_TANH,
                   family_cases[found].B, family_cases[found].last_bs);
        check((fast::plan_launched_families >> fam) & 1, "that case launched family %s", FAM_NAMES[fam]);
        fast::plan_launched_families |= before;
    }
    test_refine = NULL;
    if (no_wgmma) matmul_fast_set_target(NULL);
}

// -x 2 with W's SGD step in dW's epilogue on a layer above the first too, dW after dinp (the plan a large
// model gets, plan_bf16_sgd_in_dw, given a small one by refine_bf16_sgd), against the CPU step by step
static void gpu_vs_cpu_bf16_sgd(void) {
    if (!matmul_fast_target()->wgmma) {
        skip("-x 2's SGD step in dW's epilogue: this GPU or build has no wgmma (the BF16 kernel it rides on)");
        return;
    }
    static const int sizes[] = {784, 128, 128, 40};
    refined_layers = 0;
    test_refine = refine_bf16_sgd;
    gpu_vs_cpu(FAST, PREC_BF16, sizes, 3, ACT_TANH, 33, 17);
    test_refine = NULL;
    check(refined_layers > 0, "-x 2: the layers above the first took W's step in dW's epilogue after dinp (%d plans)",
          refined_layers);
}

// Every kernel family of the step plan (FAM_*, kernels/fast/step/plan.cuh) was launched by the fast
// trainer's executor in the cases above (fast::plan_launched_families: set at each launch, a graph's
// at its capture); a family that none reached fails here. The wgmma families on a GPU or build
// without wgmma are skipped, with the reason.
static void test_families_launched(void) {
    section("the kernel families launched on this GPU");
    if (shard_n > 1) {
        skip("the kernel families launched: with -S %d/%d this process ran a share of the cases only", shard_i, shard_n);
        return;
    }
    const int wgmma = matmul_fast_target()->wgmma;
    for (int f = 0; f < FAM_COUNT; f++) {
        const int launched = (fast::plan_launched_families >> f) & 1;
        if (!launched && !wgmma && family_needs_wgmma(f))
            skip("family %s: not launched: this GPU or build has no wgmma (an sm_90 GPU and a GPU_ARCH=90 build have)",
                 FAM_NAMES[f]);
        else
            check(launched, "family %-22s launched by the fast trainer in the cases above", FAM_NAMES[f]);
    }
}

// ----------------------------------------------------------------------------
// evaluation: each trainer's evaluate against evaluate_cpu, on the same weights

// Fashion-MNIST's test set when it is here (a trained model's predictions are confident, so no
// argmax sits within rounding of a tie), else synthetic data
static void test_evaluate(int trainer, int prec) {
    const char *dirs[] = {"data/fashion-mnist", ".data/fashion-mnist", "/usr/share/datasets/fashion-mnist"};
    Dataset train_ds, test_ds;
    char err[1400];
    const char *dir = NULL;
    for (int i = 0; i < 3 && !dir; i++)
        if (dataset_load_both(dirs[i], &train_ds, &test_ds, err, sizeof(err)) == 0) dir = dirs[i];
    if (!dir) {
        skip("%s evaluation: Fashion-MNIST not found (apt-get install dataset-fashion-mnist)", TRAINER_NAMES[trainer]);
        return;
    }
    const int sizes[] = {784, 64, 10}, B = 100, steps = 200;
    DeviceData train, test;
    device_data_upload(&train, train_ds.images, train_ds.labels, train_ds.n, 784);
    device_data_upload(&test, test_ds.images, test_ds.labels, test_ds.n, 784);
    GpuModel g;
    gpu_build(&g, trainer, prec, sizes, 2, ACT_RELU, B, train.n, steps, 7, TEST_OPTIM);
    Rng rng;
    rng_seed(&rng, 7, 1);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)train.n);
    rng_permutation(&rng, perm, train.n);
    gpu_set_perm(&g, perm, train.n);
    for (int t = 0; t < steps; t++) gpu_step(&g, &train, B);
    double gpu_loss, gpu_acc;
    if (trainer == READABLE) {
        evaluate(&g.r, &test, &gpu_loss, &gpu_acc);
    } else {
        fast::EvalBuffers eb;
        fast::eval_buffers_alloc(&eb, test.n);
        fast::evaluate(&g.f, &test, &eb, &gpu_loss, &gpu_acc, g.stream);
        fast::eval_buffers_free(&eb);
    }
    ModelCPU c;  // the GPU's trained weights, evaluated on the CPU in batches of B
    model_build_cpu(&c, sizes, 2, ACT_RELU, B);
    download(c.params, gpu_params_dev(&g), c.num_params);
    double cpu_loss, cpu_acc;
    evaluate_cpu(&c, &test_ds, &cpu_loss, &cpu_acc);
    long gpu_right = lround(gpu_acc * test.n), cpu_right = lround(cpu_acc * test.n);
    // TF32: the logits differ by ~1e-3 relative, so a handful of near-ties may fall the other way;
    // BF16: 4x that (its tolerances above), up to 0.4% of the answers
    long allowed = prec == PREC_TF32 ? test.n / 1000 : prec == PREC_BF16 ? test.n / 250 : 0;
    double loss_tol = prec == PREC_TF32 ? 5e-3 : prec == PREC_BF16 ? 2e-2 : 1e-5;
    check(labs(gpu_right - cpu_right) <= allowed && fabs(gpu_loss - cpu_loss) <= loss_tol * cpu_loss,
          "%s%s evaluate on %s's test set after %d steps: %ld right (CPU %ld%s), loss %.6f (CPU %.6f)",
          TRAINER_NAMES[trainer], PREC_SHORT[prec], dir, steps, gpu_right, cpu_right,
          prec == PREC_TF32 ? ", within 0.1%" : prec == PREC_BF16 ? ", within 0.4%" : ", the same", gpu_loss, cpu_loss);
    free(perm);
    model_free_cpu(&c);
    gpu_free(&g);
    device_data_free(&train);
    device_data_free(&test);
    dataset_free(&train_ds);
    dataset_free(&test_ds);
}

// Each trainer's evaluate on synthetic data against evaluate_cpu, on the same weights: 2500 rows in
// batches of 33 (the last of 25), more rows than the one block that sums them has threads; the
// weights scaled up 4x so that few predictions sit near a tie. Right answers: the same, but for the
// rows whose two largest logits are within float32 rounding (1e-5 of the largest |logit|; TF32: its
// 1e-2; BF16 4e-2) of each other, which either side may order differently. Then every weight 0, so every logit is
// 0: each prediction is class 0, the first of the tied classes, on both sides.
static void gpu_evaluate(GpuModel *g, const DeviceData *d, double *loss, double *acc) {
    if (g->trainer == READABLE) {
        evaluate(&g->r, d, loss, acc);
    } else {
        fast::EvalBuffers eb;
        fast::eval_buffers_alloc(&eb, d->n);
        fast::evaluate(&g->f, d, &eb, loss, acc, g->stream);
        fast::eval_buffers_free(&eb);
    }
}

static void gpu_set_params(GpuModel *g, const float *params, size_t n) {
    cudaCheck(cudaMemcpy(gpu_params_dev(g), params, n * sizeof(float), cudaMemcpyHostToDevice));
    if (g->trainer == FAST) fast::model_sync_copies(&g->f, g->stream);
    cudaCheck(cudaDeviceSynchronize());
}

static void test_evaluate_synthetic(int trainer, int prec) {
    const int sizes[] = {784, 64, 10}, B = 33, n = 2500, C = 10;
    HostData h = make_data(n, 784, C, 4242);
    DeviceData d;
    device_data_upload(&d, h.images, h.labels, n, 784);
    GpuModel g;
    gpu_build(&g, trainer, prec, sizes, 2, ACT_TANH, B, n, 1, 99, TEST_OPTIM);
    ModelCPU c;
    model_build_cpu(&c, sizes, 2, ACT_TANH, B);
    download(c.params, gpu_params_dev(&g), c.num_params);
    for (size_t i = 0; i < c.num_params; i++) c.params[i] *= 4;
    gpu_set_params(&g, c.params, c.num_params);
    Dataset ds;
    memset(&ds, 0, sizeof(ds));
    ds.images = h.images, ds.labels = h.labels, ds.n = n, ds.rows = 28, ds.cols = 28, ds.channels = 1;
    ds.num_classes = C;
    double gpu_loss, gpu_acc, cpu_loss, cpu_acc;
    gpu_evaluate(&g, &d, &gpu_loss, &gpu_acc);
    evaluate_cpu(&c, &ds, &cpu_loss, &cpu_acc);
    long near = 0, label0 = 0;  // rows whose top two logits (CPU) nearly tie
    for (int i = 0; i < n; i++) {
        gather_batch_cpu(c.acts[0], c.labels, h.images, h.labels, NULL, i, 1, 784);
        model_forward_cpu(&c, 1);
        float top = -INFINITY, second = -INFINITY, scale = 0;
        for (int k = 0; k < C; k++) {
            float z = c.acts[2][k];
            scale = fmaxf(scale, fabsf(z));
            if (z > top) second = top, top = z;
            else if (z > second) second = z;
        }
        near += top - second <= (prec == PREC_TF32 ? 1e-2f : prec == PREC_BF16 ? 4e-2f : 1e-5f) * scale;
        label0 += h.labels[i] == 0;
    }
    long gpu_right = lround(gpu_acc * n), cpu_right = lround(cpu_acc * n);
    double loss_tol = prec == PREC_TF32 ? 5e-3 : prec == PREC_BF16 ? 2e-2 : 1e-5;
    check(labs(gpu_right - cpu_right) <= near && fabs(gpu_loss - cpu_loss) <= loss_tol * cpu_loss,
          "%s%s evaluate, %d synthetic rows in batches of %d (the last of %d): %ld right (CPU %ld; %ld near-ties), "
          "loss %.6f (CPU %.6f)",
          TRAINER_NAMES[trainer], PREC_SHORT[prec], n, B, n % B, gpu_right, cpu_right, near, gpu_loss, cpu_loss);
    memset(c.params, 0, c.num_params * sizeof(float));  // every logit 0: ties everywhere
    gpu_set_params(&g, c.params, c.num_params);
    gpu_evaluate(&g, &d, &gpu_loss, &gpu_acc);
    check(lround(gpu_acc * n) == label0 && fabs(gpu_loss - log((double)C)) <= 1e-5,
          "%s%s evaluate with every logit tied: %ld right (want %ld: class 0 wins every tie, as on the CPU), loss "
          "%.6f (ln %d = %.6f)",
          TRAINER_NAMES[trainer], PREC_SHORT[prec], lround(gpu_acc * n), label0, gpu_loss, C, log((double)C));
    model_free_cpu(&c);
    gpu_free(&g);
    device_data_free(&d);
    free(h.images);
    free(h.labels);
}

// ----------------------------------------------------------------------------
// the softmax at logits of +-1000: every launcher of the shared row function against the CPU's (whose
// results tests/test_properties.c checks against the exact values: losses 0, 2000, 1000, ln 3)

static void test_softmax_extremes(void) {
    section("softmax cross-entropy at logits of +-1000 (finite, the CPU's values)");
    const int B = 4, C = 3;
    const float logits[] = {1000, -1000, 0, 1000, -1000, 0, 1000, -1000, 0, 1000, 1000, 1000};
    const int labels[] = {0, 1, 2, 0};
    float want_losses[4], want_d[12];
    double want_mean = softmax_xent_forward_backward_cpu(want_d, want_losses, logits, labels, B, C);
    float *dz = (float *)cudaMallocCheck(sizeof(logits), "logits");
    float *dd = (float *)cudaMallocCheck(sizeof(logits), "dlogits");
    float *dl = (float *)cudaMallocCheck(4 * sizeof(float), "losses");
    float *dm = (float *)cudaMallocCheck(4 * sizeof(float), "mean");
    float *dc = (float *)cudaMallocCheck(4 * sizeof(float), "correct");
    int *dlab = (int *)cudaMallocCheck(sizeof(labels), "labels"), *dstep = (int *)cudaMallocCheck(sizeof(int), "step");
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    cudaCheck(cudaMemcpy(dz, logits, sizeof(logits), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(dlab, labels, sizeof(labels), cudaMemcpyHostToDevice));
    for (int path = 0; path < 3; path++) {
        float losses[4] = {0}, d[12] = {0}, mean = 0, correct[4] = {0};
        cudaCheck(cudaMemset(dd, 0, sizeof(logits)));
        cudaCheck(cudaMemset(dstep, 0, sizeof(int)));
        if (path == 0) softmax_xent_forward_backward(dm, dd, dl, dz, dlab, B, C);
        else if (path == 1) softmax_xent_forward_backward_fast(dd, dl, dm, dstep, dz, dlab, B, C, stream);
        else softmax_xent_eval(dl, dc, dz, dlab, B, C);
        cudaCheck(cudaDeviceSynchronize());
        download(losses, dl, 4);
        download(d, dd, 12);
        download(&mean, dm, 1);
        download(correct, dc, 4);
        int ok = 1;
        for (int b = 0; b < B; b++)
            ok &= isfinite(losses[b]) && fabsf(losses[b] - want_losses[b]) <= 1e-3f * (1 + fabsf(want_losses[b]));
        if (path < 2) {
            for (int i = 0; i < 12; i++) ok &= isfinite(d[i]) && fabsf(d[i] - want_d[i]) <= 1e-6f;
            ok &= fabs(mean - want_mean) <= 1e-4 * want_mean;
        } else {  // argmax: row 1 predicts class 0 (right), rows 2 and 3 class 0 (wrong), row 4 a tie: class 0 (right)
            ok &= correct[0] == 1 && correct[1] == 0 && correct[2] == 0 && correct[3] == 1;
        }
        const char *names[] = {"softmax_xent_forward_backward (readable)", "softmax_xent_forward_backward_fast",
                               "softmax_xent_eval"};
        check(ok, "%s: losses %g %g %g %g (CPU %g %g %g %g)%s", names[path], losses[0], losses[1], losses[2], losses[3],
              want_losses[0], want_losses[1], want_losses[2], want_losses[3],
              path < 2 ? ", dlogits and the mean loss the CPU's" : ", right answers 1 0 0 1 (a tie goes to class 0)");
    }
    cudaCheck(cudaFree(dz));
    cudaCheck(cudaFree(dd));
    cudaCheck(cudaFree(dl));
    cudaCheck(cudaFree(dm));
    cudaCheck(cudaFree(dc));
    cudaCheck(cudaFree(dlab));
    cudaCheck(cudaFree(dstep));
    cudaCheck(cudaStreamDestroy(stream));
}

// ----------------------------------------------------------------------------
// the fast matmul kernels one by one: every tile configuration of this build, for every product and
// precision it is built for, against the CPU
//
// The trainer's planner picks a configuration per shape, and some (the large tiles) only on large
// shapes, which the step-by-step cases above do not reach. So each configuration runs
// here on two shapes of its own: one that allows 16-byte accesses (M, N, K multiples of 4) and one
// that does not (odd sizes: the element-by-element paths and the tile edges), with K unsplit and
// split in two. The reference is the product of the operands the kernel is meant to multiply, in
// double: FP32 configurations (on the CUDA cores, or as 3xTF32 on the tensor cores) the FP32 operands;
// TF32 the operands rounded to TF32 (MF_TF32_EXACT is given TF32 values, as the trainer gives it);
// BF16 rounded to BF16. The kernel's error is then FP32 summation alone (rel norm ~1e-7 at K ~300;
// for 3xTF32 also the split, at most 2^-21 of each product), under MM_CFG_BOUND, where a wrong
// element, a missed K step or truncated operands (TF32's own error is ~3e-4) are far above it; so is
// a 3xTF32 product that drops a cross term (~1e-4) or sums K in one tensor-core accumulator (2e-6
// here, 1e-5 at K = 4096: kernels/fast/matmul/mma_tf32.cuh).
#define MM_CFG_BOUND 2e-6

static float mm_operand(const float *x, int prec) {
    return prec == MF_BF16 ? round_bf16(*x) : prec == MF_TF32_ROUND || prec == MF_TF32_EXACT ? round_tf32(*x) : *x;
}

// the matmul tests' names of the products (MfProduct) and precisions (the launchers' tf32 argument),
// and the precisions they test
static const char *const prods[] = {"forward", "dinp", "dweight"};
static const char *mm_prec_name(int prec) {
    static const char *const names[] = {"FP32", "TF32 (rounding)", "TF32 (TF32 values)", "BF16"};
    return prec == MF_FP32_PIXELS ? "FP32 on pixels" : names[prec];
}
static const int mm_precs[] = {0, MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16, MF_FP32_PIXELS};
#define MM_NUM_PRECS ((int)(sizeof(mm_precs) / sizeof(mm_precs[0])))

// FP32 on pixels (MF_FP32_PIXELS): the forward product's A and the weight gradient's B hold pixel
// bytes, which the product takes as byte / 255
static int mm_pixels_a(int prod, int prec) { return prec == MF_FP32_PIXELS && prod == MF_FWD; }
static int mm_pixels_b(int prod, int prec) { return prec == MF_FP32_PIXELS && prod == MF_DWEIGHT; }

// random operands for product prod in precision prec, na floats of A and nb of B: uniform in [-1, 1),
// TF32 values for MF_TF32_EXACT (the kernels take them as they are), pixel bytes 0..255 for the
// operand that MF_FP32_PIXELS says holds them
static void mm_operands(float *A, size_t na, float *B, size_t nb, int prod, int prec, Rng *rng) {
    for (size_t i = 0; i < na; i++) A[i] = mm_pixels_a(prod, prec) ? (float)rng_below(rng, 256) : rng_uniform(rng) * 2 - 1;
    for (size_t i = 0; i < nb; i++) B[i] = mm_pixels_b(prod, prec) ? (float)rng_below(rng, 256) : rng_uniform(rng) * 2 - 1;
    if (prec == MF_TF32_EXACT) {
        for (size_t i = 0; i < na; i++) A[i] = round_tf32(A[i]);
        for (size_t i = 0; i < nb; i++) B[i] = round_tf32(B[i]);
    }
}

// output (m, n) of product prod on the CPU, in double, A and B laid out as the product takes them:
// forward A (M,K) B (N,K); dinp A (M,K) B (K,N); dweight A (K,M) B (K,N). A pixel byte is taken as
// byte / 255 in float, as the trainers' CPU gather computes the input.
static double mm_ref(int prod, const float *A, const float *B, int M, int N, int K, int m, int n, int prec) {
    const int pa = mm_pixels_a(prod, prec), pb = mm_pixels_b(prod, prec);
    double sum = 0;
    for (int k = 0; k < K; k++) {
        const float *a = prod == MF_DWEIGHT ? &A[(size_t)k * M + m] : &A[(size_t)m * K + k];
        const float *b = prod == MF_FWD ? &B[(size_t)n * K + k] : &B[(size_t)k * N + n];
        sum += (double)(pa ? *a / 255.0f : mm_operand(a, prec)) * (pb ? *b / 255.0f : mm_operand(b, prec));
    }
    return sum;
}

static void test_matmul_configs(void) {
    section("the fast matmul kernels: every tile configuration of this build against the CPU");
    const int shapes[2][3] = {{200, 136, 304}, {203, 130, 301}};   // M, N, K
    const int max_elems = 204 * 304;
    float *hA = (float *)mallocCheck(max_elems * sizeof(float)), *hB = (float *)mallocCheck(max_elems * sizeof(float));
    float *hC = (float *)mallocCheck(max_elems * sizeof(float));
    float *refc = (float *)mallocCheck(max_elems * sizeof(float));
    float *dA = (float *)cudaMallocCheck(max_elems * sizeof(float), "A");
    float *dB = (float *)cudaMallocCheck(max_elems * sizeof(float), "B");
    float *dC = (float *)cudaMallocCheck(max_elems * sizeof(float), "C");
    float *scratch = (float *)cudaMallocCheck(2 * (size_t)max_elems * sizeof(float), "the split-K scratch");
    Rng rng;
    rng_seed(&rng, 31, 1);
    int runs = 0, pixel_runs = 0;
    double worst[6] = {0};   // by kind: FP32, 3xTF32, TF32 (rounding), TF32 (TF32 values), BF16, pixels
    static const char *const kinds[] = {"FP32 on the CUDA cores", "FP32 as 3xTF32", "TF32 (rounding)",
                                        "TF32 (TF32 values)", "BF16", "FP32 on pixels (3xTF32)"};
    for (int pi = 0; pi < MM_NUM_PRECS; pi++) {
        const int tf32 = mm_precs[pi];
        int ncfg;
        const MatmulFastCfg *cfgs = matmul_fast_configs(tf32, &ncfg);
        for (int prod = MF_FWD; prod <= MF_DWEIGHT; prod++) {
            for (int c = 0; c < ncfg; c++) {
                // (pixels: the 3xTF32 configurations' forward and weight-gradient kernels only)
                if (tf32 == MF_FP32_PIXELS && (prod == MF_DINP || cfgs[c].kind != MF_KIND_3XTF32)) continue;
                for (int sh = 0; sh < 2; sh++) {
                    const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
                    MatmulFastPlan p;
                    if (!matmul_fast_plan_fixed(&p, (MfProduct)prod, M, N, K, tf32, 1, cfgs[c].id, 1)) continue;
                    // A and B as the product lays them out: forward A (M,K) B (N,K); dinp A (M,K) B (K,N);
                    // dweight A (K,M) B (K,N)
                    mm_operands(hA, (size_t)M * K, hB, (size_t)N * K, prod, tf32, &rng);
                    for (int m = 0; m < M; m++)
                        for (int n = 0; n < N; n++) refc[(size_t)m * N + n] = (float)mm_ref(prod, hA, hB, M, N, K, m, n, tf32);
                    cudaCheck(cudaMemcpy(dA, hA, (size_t)M * K * sizeof(float), cudaMemcpyHostToDevice));
                    cudaCheck(cudaMemcpy(dB, hB, (size_t)N * K * sizeof(float), cudaMemcpyHostToDevice));
                    for (int splits = 1; splits <= 2; splits++) {
                        if (!matmul_fast_plan_fixed(&p, (MfProduct)prod, M, N, K, tf32, 1, cfgs[c].id, splits)) continue;
                        const MatmulFastEpi epi = {MF_EPI_RAW, ACT_NONE, NULL, NULL, {}, 0};
                        cudaCheck(cudaMemset(dC, 0xFF, (size_t)M * N * sizeof(float)));   // NaN: every element must be written
                        matmul_fast_run((MfProduct)prod, &p, dC, dA, dB, M, N, K, &epi, scratch, tf32, 0, 0);
                        cudaCheck(cudaDeviceSynchronize());
                        download(hC, dC, (size_t)M * N);
                        const double e = rel_norm(hC, refc, (size_t)M * N);
                        const int x3 = cfgs[c].kind == MF_KIND_3XTF32;
                        const int kind = tf32 == MF_FP32_PIXELS ? 5 : tf32 ? tf32 + 1 : x3;
                        const double bound = MM_CFG_BOUND;
                        runs++;
                        pixel_runs += tf32 == MF_FP32_PIXELS;
                        if (!(e <= worst[kind])) worst[kind] = e;
                        if (verbose || !(e <= bound))
                            check(e <= bound, "%-7s %-18s configuration %2d (%s), %dx%dx%d, %d K slice(s): rel norm "
                                  "%.2e (<= %.0e)", prods[prod], mm_prec_name(tf32), cfgs[c].id, cfgs[c].name, M, N, K,
                                  p.splits, e, bound);
                        else
                            checks_passed++;
                    }
                }
            }
        }
    }
    printf("  %d products run (every configuration, product and precision this build has, 2 shapes, K whole and split "
           "in two), each against its CPU product (bound %.0e)%s; the worst rel norm by kind:\n", runs,
           MM_CFG_BOUND, verbose ? "" : " (-V lists them)");
    for (int k = 0; k < 6; k++) printf("    %-24s %.2e\n", kinds[k], worst[k]);
    check(runs > 0, "the build has fast matmul kernels to test (%d run)", runs);
    check(pixel_runs > 0, "the build has 3xTF32 kernels on pixels to test (%d run)", pixel_runs);
    free(hA), free(hB), free(hC), free(refc);
    cudaCheck(cudaFree(dA));
    cudaCheck(cudaFree(dB));
    cudaCheck(cudaFree(dC));
    cudaCheck(cudaFree(scratch));
}

// The planner's large-product rule (kernels/fast/matmul/planner.cuh mf_large: BF16's; FP32 and TF32
// leave every tile to the cost model) gives large products the big model's large tile, which the
// configurations above run on small shapes only. For each product and precision with such a tile in
// this build: on a shape with tiles of up to 128 x 256 enough for half a wave (1024 x N x 512, N =
// 256 per 16 SMs: 2304 on 132 SMs), the plan must be that tile, K unsplit; below half a wave
// (128 x 128 x 512) or with K shorter than MF_LARGE_MIN_K (1024 x N x 64) the rule does not apply and
// the cost model takes a smaller tile there; and the large shape run through the plan must match the CPU on 512 outputs drawn at
// random (rel norm over them, MM_CFG_BOUND as above: the same kernels, K = 512; the TF32 kernels sit
// closest to the bound, their tensor cores' FP32 sums being a little coarser than the others').
static void test_matmul_large(void) {
    section("the planner's large products: the big model's tiles, and their products against the CPU");
    int dev, sms;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    const int M = 1024, N = 256 * CEIL_DIV(sms, 16), K = 512, S = 512;
    float *hA = (float *)mallocCheck((size_t)M * K * sizeof(float)), *hB = (float *)mallocCheck((size_t)N * K * sizeof(float));
    float *hC = (float *)mallocCheck((size_t)M * N * sizeof(float));
    float *dA = (float *)cudaMallocCheck((size_t)M * K * sizeof(float), "A");
    float *dB = (float *)cudaMallocCheck((size_t)N * K * sizeof(float), "B");
    float *dC = (float *)cudaMallocCheck((size_t)M * N * sizeof(float), "C");
    Rng rng;
    rng_seed(&rng, 37, 1);
    int runs = 0;
    for (int pi = 0; pi < MM_NUM_PRECS; pi++) {
        const int tf32 = mm_precs[pi];
        for (int prod = MF_FWD; prod <= MF_DWEIGHT; prod++) {
            const int cfg = matmul_fast_large_cfg((MfProduct)prod, tf32);
            if (cfg < 0) continue;
            if (tf32 == 0 && prod != MF_DINP)   // (FP32's large tiles are 3xTF32: they take pixels too)
                check(matmul_fast_large_cfg((MfProduct)prod, MF_FP32_PIXELS) == cfg &&
                      matmul_fast_pixels_fit((MfProduct)prod, M, N, K, 1),
                      "%-7s FP32 %dx%dx%d on the large tile %d: it takes the batch as pixels too", prods[prod], M, N,
                      K, cfg);
            const MatmulFastPlan p = matmul_fast_plan((MfProduct)prod, M, N, K, tf32, 1);
            check(p.cfg == cfg && p.splits == 1, "%-7s %-18s %dx%dx%d: the plan is configuration %d with %d K slice(s) "
                  "(the large tile %d, unsplit)", prods[prod], mm_prec_name(tf32), M, N, K, p.cfg, p.splits, cfg);
            const MatmulFastPlan few = matmul_fast_plan((MfProduct)prod, 128, 128, K, tf32, 1);
            const MatmulFastPlan shortk = matmul_fast_plan((MfProduct)prod, M, N, 64, tf32, 1);
            check(few.cfg != cfg && shortk.cfg != cfg, "%-7s %-18s: 128x128x%d and %dx%dx64 are not planned on the "
                  "large tile %d (plans %d and %d)", prods[prod], mm_prec_name(tf32), K, M, N, cfg, few.cfg, shortk.cfg);
            mm_operands(hA, (size_t)M * K, hB, (size_t)N * K, prod, tf32, &rng);
            cudaCheck(cudaMemcpy(dA, hA, (size_t)M * K * sizeof(float), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dB, hB, (size_t)N * K * sizeof(float), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemset(dC, 0xFF, (size_t)M * N * sizeof(float)));   // NaN where nothing is written
            const MatmulFastEpi epi = {MF_EPI_RAW, ACT_NONE, NULL, NULL, {}, 0};
            matmul_fast_run((MfProduct)prod, &p, dC, dA, dB, M, N, K, &epi, NULL, tf32, 0, 0);
            cudaCheck(cudaDeviceSynchronize());
            download(hC, dC, (size_t)M * N);
            double err2 = 0, ref2 = 0;   // over S outputs at random (m, n)
            for (int t = 0; t < S; t++) {
                const int m = (int)rng_below(&rng, M), n = (int)rng_below(&rng, N);
                const double sum = mm_ref(prod, hA, hB, M, N, K, m, n, tf32);
                const double d = (double)hC[(size_t)m * N + n] - sum;
                err2 += d * d;
                ref2 += sum * sum;
            }
            const double e = sqrt(err2 / ref2);
            runs++;
            check(e <= MM_CFG_BOUND, "%-7s %-18s %dx%dx%d on configuration %d: rel norm %.2e over %d outputs (<= %.0e)",
                  prods[prod], mm_prec_name(tf32), M, N, K, p.cfg, e, S, MM_CFG_BOUND);
        }
    }
    check(runs > 0, "the build has large-product tiles to test (%d)", runs);
    free(hA), free(hB), free(hC);
    cudaCheck(cudaFree(dA));
    cudaCheck(cudaFree(dB));
    cudaCheck(cudaFree(dC));
}

// -x 1's K-major TF32 kernel (kernels/fast/matmul/wgmma_kmajor.cuh with T = float: matmul_fast_tf32k_run) and the
// copies it reads (kernels/fast/ops/transpose.cuh). C = epi(A . B^T) on random TF32 values, against
// their product in double, so the kernel's error is summation alone, in every configuration; on
// shapes whose M, N and K are no multiple of the tiles' 64 or 128, 128 or 256, and 32 (edge tiles in
// every direction), and on whole tiles with a longer K. The bound grows with K: the kernel adds all
// of K in the tensor cores' accumulator, whose error measured 2.5e-9 K (7.3e-7 at K = 296, 2.5e-6 at
// 1036; the mma.sync kernels add each K step's sums with FADD instead, MM_CFG_BOUND), a hundredth of
// TF32's own error at K = 1036 and far below a truncated operand's or a missed K step's. With the
// trainer's epilogues: forward with bias, relu and the output rounded to TF32 (every output must then
// be a TF32 value), dinp with tanh's derivative, dweight raw, and dweight with its SGD step (the sums
// against the CPU as raw ones; W, its momentum and its TF32 copy bit for bit against sgd_update_fast's
// step with the kernel's own gradient, the same sgd_one per weight; the transposed copy, where M allows
// it, bit for bit that TF32 copy transposed), on the float4 path and, with W one float off 16-byte
// alignment, the general one; and dinp with its transposed copy (where M allows it), bit for bit the
// kernel's dinp rounded and transposed. Then the copies: tf32_transpose against round_tf32 of each element at
// its transposed place (and at its own place, for the rounded copy), bit for bit. NaN in the outputs
// first, so an element never written fails.
static void test_matmul_tf32k(void) {
    section("the K-major TF32 matmul kernel against the CPU, and its transposed copies");
    if (!matmul_fast_tf32k_fits(1 << 12, 1 << 12, 1 << 12)) {
        skip("this build has no wgmma kernel (GPU_ARCH=90 builds it): the K-major TF32 kernel is not run");
        return;
    }
    const float fill = matmul_fast_tf32k_set_min_fill(0.0f);   // (any fill: these shapes are small)
    const int shapes[3][3] = {{203, 300, 296}, {128, 256, 1036}, {76, 132, 200}};   // M, N, K; the second: whole tiles
    const int max_elems = 300 * 1036;
    float *hA = (float *)mallocCheck(max_elems * sizeof(float)), *hB = (float *)mallocCheck(max_elems * sizeof(float));
    float *hC = (float *)mallocCheck(max_elems * sizeof(float)), *refc = (float *)mallocCheck(max_elems * sizeof(float));
    float *aux = (float *)mallocCheck(max_elems * sizeof(float)), *bias = (float *)mallocCheck(300 * sizeof(float));
    float *hS = (float *)mallocCheck(max_elems * sizeof(float)), *hT = (float *)mallocCheck(max_elems * sizeof(float));
    double *sums = (double *)mallocCheck(max_elems * sizeof(double));
    float *dA = (float *)cudaMallocCheck(max_elems * sizeof(float), "A");
    float *dB = (float *)cudaMallocCheck(max_elems * sizeof(float), "B");
    float *dC = (float *)cudaMallocCheck(max_elems * sizeof(float), "C");
    float *daux = (float *)cudaMallocCheck(max_elems * sizeof(float), "aux");
    float *dbias = (float *)cudaMallocCheck(300 * sizeof(float), "bias");
    float *sgd_dev[7];   // the SGD epilogue's W, momentum and TF32 copy (one float more: the misaligned
                         // case), then sgd_update_fast's, the reference; and the transposed copy
    for (int k = 0; k < 7; k++) sgd_dev[k] = (float *)cudaMallocCheck((max_elems + 1) * sizeof(float), "SGD");
    Rng rng;
    rng_seed(&rng, 41, 1);
    for (int i = 0; i < 300; i++) bias[i] = rng_uniform(&rng) - 0.5f;
    cudaCheck(cudaMemcpy(dbias, bias, 300 * sizeof(float), cudaMemcpyHostToDevice));
    for (int sh = 0; sh < 3; sh++) {
        const int M = shapes[sh][0], N = shapes[sh][1], K = shapes[sh][2];
        const size_t mn = (size_t)M * N;
        for (int i = 0; i < M * K; i++) hA[i] = round_tf32(rng_uniform(&rng) * 2 - 1);
        for (int i = 0; i < N * K; i++) hB[i] = round_tf32(rng_uniform(&rng) * 2 - 1);
        for (size_t i = 0; i < mn; i++) aux[i] = rng_uniform(&rng) * 2 - 1;   // tanh outputs in (-1, 1)
        cudaCheck(cudaMemcpy(dA, hA, (size_t)M * K * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(dB, hB, (size_t)N * K * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(daux, aux, mn * sizeof(float), cudaMemcpyHostToDevice));
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) sums[(size_t)m * N + n] = mm_ref(MF_FWD, hA, hB, M, N, K, m, n, 0);   // (TF32 values already)
        // every configuration, and the persistent one again on a grid of two blocks, each then taking
        // every other tile in turn (its epilogue beside the next tile's products)
        for (int pass = 0; pass <= matmul_fast_tf32k_num_cfgs(); pass++)
            for (int variant = 0; variant < 6; variant++) {   // raw, forward, dinp, SGD; SGD off alignment; dinp
                                                              // with its transposed copy
                const int cfg = pass < matmul_fast_tf32k_num_cfgs() ? pass : matmul_fast_tf32k_persistent_cfg();
                const int cap_old = matmul_fast_tf32k_set_grid_cap(pass == cfg ? 0 : 2);
                char cname[40];
                snprintf(cname, sizeof cname, pass == cfg ? "configuration %d" : "configuration %d on 2 blocks", cfg);
                const int kind = variant < MF_EPI_SGD ? variant : variant == 5 ? MF_EPI_DINP : MF_EPI_SGD;
                const int off = variant == 4;
                for (size_t i = 0; i < mn; i++) {
                    const double sum = sums[i];
                    float v = (float)sum;
                    const int n = (int)(i % N);
                    if (kind == MF_EPI_FORWARD) v = round_tf32(v + bias[n] > 0 ? v + bias[n] : 0.0f);
                    if (kind == MF_EPI_DINP) v = (float)(sum * (1.0 - (double)aux[i] * aux[i]));
                    refc[i] = v;
                }
                const float lr = 0.05f, mu = 0.9f, wd = 1e-4f;
                const MatmulFastEpi epi = {kind, kind == MF_EPI_FORWARD ? ACT_RELU : kind == MF_EPI_DINP ? ACT_TANH : ACT_NONE,
                                           kind == MF_EPI_FORWARD ? dbias : NULL, kind == MF_EPI_DINP ? daux : NULL,
                                           {sgd_dev[0] + off, sgd_dev[1] + off, lr, mu, wd, sgd_dev[2] + off},
                                           kind == MF_EPI_FORWARD};
                float *param_t = (variant == 3 || variant == 5) && M % 4 == 0 ? sgd_dev[6] : NULL;
                if (param_t) cudaCheck(cudaMemset(param_t, 0xFF, mn * sizeof(float)));
                if (kind == MF_EPI_SGD) {   // W and its momentum random, the same in both; the TF32 copies NaN
                    for (int k = 0; k < 2; k++) {
                        for (size_t i = 0; i < mn; i++) hS[i] = rng_uniform(&rng) * 2 - 1;
                        cudaCheck(cudaMemcpy(sgd_dev[k] + off, hS, mn * sizeof(float), cudaMemcpyHostToDevice));
                        cudaCheck(cudaMemcpy(sgd_dev[3 + k], hS, mn * sizeof(float), cudaMemcpyHostToDevice));
                    }
                    cudaCheck(cudaMemset(sgd_dev[2] + off, 0xFF, mn * sizeof(float)));
                    cudaCheck(cudaMemset(sgd_dev[5], 0xFF, mn * sizeof(float)));
                }
                cudaCheck(cudaMemset(dC, 0xFF, mn * sizeof(float)));   // NaN: every element must be written
                matmul_fast_tf32k_run_cfg(cfg, dC, dA, dB, M, N, K, &epi, param_t, 0, 0);
                cudaCheck(cudaDeviceSynchronize());
                matmul_fast_tf32k_set_grid_cap(cap_old);
                download(hC, dC, mn);
                if (kind == MF_EPI_SGD) {
                    sgd_update_fast(sgd_dev[3], dC, sgd_dev[4], sgd_dev[5], mn, lr, mu, wd, 1, 0);
                    int bad = 0;   // tensors that differ: W, its momentum, its TF32 copy
                    for (int k = 0; k < 3; k++) {
                        download(hS, sgd_dev[k] + off, mn);
                        download(hT, sgd_dev[3 + k], mn);
                        bad += memcmp(hS, hT, mn * 4) != 0;
                    }
                    int bad_t = 0;   // hS: the kernel's TF32 copy (the last of the three)
                    if (param_t) {
                        download(hT, param_t, mn);
                        for (int m = 0; m < M; m++)
                            for (int n = 0; n < N; n++)
                                bad_t += memcmp(&hT[(size_t)n * M + m], &hS[(size_t)m * N + n], 4) != 0;
                    }
                    check(bad == 0 && bad_t == 0, "%s, SGD epilogue%s, %dx%d: W, its momentum and its "
                          "TF32 copy equal sgd_update_fast's step on the kernel's gradient (%d of 3 differ)%s (%d differ)",
                          cname, off ? " (W not 16-byte aligned)" : "", M, N, bad,
                          param_t ? ", the transposed copy that copy transposed" : ", no transposed copy", bad_t);
                }
                // forward's outputs are rounded to TF32 on both sides: the rounding can turn an FP32 sum's
                // last-bit difference into one TF32 step (2^-11 relative) for a few outputs, so its bound is
                // TF32's half step over the norm (a wrong rounding, or none, shows up at every output)
                const double e = rel_norm(hC, refc, mn);
                const double bound = kind == MF_EPI_FORWARD ? 5e-4 : fmax(MM_CFG_BOUND, 4e-9 * K);
                if (variant == 5 && param_t) {   // dinp^T rounded, bit for bit from the kernel's own dinp
                    download(hT, param_t, mn);
                    int bad_t = 0;
                    for (int m = 0; m < M; m++)
                        for (int n = 0; n < N; n++) {
                            const float want = round_tf32(hC[(size_t)m * N + n]);
                            bad_t += memcmp(&hT[(size_t)n * M + m], &want, 4) != 0;
                        }
                    check(bad_t == 0, "%s, dinp epilogue, %dx%d: the transposed copy is dinp rounded to "
                          "TF32 and transposed (%d of %zu differ)", cname, M, N, bad_t, mn);
                }
                const char *names[] = {"raw (dweight)", "forward", "dinp", "SGD (dweight)", "SGD, W off alignment,",
                                       "dinp with its transposed copy,"};
                check(e <= bound, "%s, %s epilogue, %dx%dx%d: rel norm %.2e (<= %.1e)", cname,
                      names[variant], M, N, K, e, bound);
                if (kind == MF_EPI_FORWARD) {
                    int bad = 0;
                    for (size_t i = 0; i < mn; i++) bad += round_tf32(hC[i]) != hC[i];
                    check(bad == 0, "%s, forward epilogue: every output is a TF32 value (%d of %zu are not)",
                          cname, bad, mn);
                }
            }
    }
    // the copies: a transposed one alone, and with the rounded one in place; on FP32 values (not TF32)
    const int tshapes[2][2] = {{37, 45}, {96, 64}};
    for (int sh = 0; sh < 2; sh++) {
        const int R = tshapes[sh][0], C = tshapes[sh][1];
        for (int i = 0; i < R * C; i++) hA[i] = rng_uniform(&rng) * 2 - 1;
        cudaCheck(cudaMemcpy(dA, hA, (size_t)R * C * sizeof(float), cudaMemcpyHostToDevice));
        for (int with_same = 0; with_same < 2; with_same++) {
            cudaCheck(cudaMemset(dB, 0xFF, (size_t)R * C * sizeof(float)));
            cudaCheck(cudaMemset(dC, 0xFF, (size_t)R * C * sizeof(float)));
            tf32_transpose(dB, with_same ? dC : NULL, dA, R, C, 0);
            cudaCheck(cudaDeviceSynchronize());
            download(hB, dB, (size_t)R * C);
            download(hC, dC, (size_t)R * C);
            int bad_t = 0, bad_s = 0;
            for (int r = 0; r < R; r++)
                for (int c = 0; c < C; c++) {
                    const float want = round_tf32(hA[(size_t)r * C + c]);
                    bad_t += memcmp(&hB[(size_t)c * R + r], &want, 4) != 0;
                    if (with_same) bad_s += memcmp(&hC[(size_t)r * C + c], &want, 4) != 0;
                    else bad_s += !isnan(hC[(size_t)r * C + c]);   // untouched without it
                }
            check(bad_t == 0 && bad_s == 0, "tf32_transpose %dx%d%s: %d transposed and %d %s differ, of %d", R, C,
                  with_same ? " with the rounded copy" : "", bad_t, bad_s, with_same ? "rounded" : "untouched", R * C);
        }
    }
    matmul_fast_tf32k_set_min_fill(fill);
    free(hA), free(hB), free(hC), free(refc), free(aux), free(bias), free(hS), free(hT), free(sums);
    float *dev[] = {dA, dB, dC, daux, dbias};
    for (float *p : dev) cudaCheck(cudaFree(p));
    for (float *p : sgd_dev) cudaCheck(cudaFree(p));
}

// The BF16-operand kernels (kernels/fast/matmul/wgmma_kmajor.cuh and mma_bf16.cuh, -x 2's large products), each configuration and
// product on two shapes: all widths multiples of 8, and the batch dimension odd (M for forward and
// dinp, K for dweight: the tiles' edges). Operands are random BF16 values, and the reference their
// product in double, so the kernel's error is FP32 summation alone (MM_CFG_BOUND, as above). Each runs
// with its trainer epilogue too: forward with bias, relu and the output's BF16 copy, dinp with tanh's
// derivative and the copy; every element of a copy must be the GPU's own FP32 output rounded to BF16,
// bit for bit. Then the launchers given the copies (matmul_forward_fast etc. with MatmulFastBf16) must
// give the same products as the FP32-operand BF16 kernels on the FP32 values of the same numbers, and
// the output copy must be written when those run too (by a copy after the product: the last hidden
// layer's gradient below a head of more than 32 classes is written so).
static void test_matmul_bf16_ops(void) {
    section("the BF16-operand matmul kernel: each configuration against the CPU, and its copies");
    int ncfg;
    const MatmulFastCfg *cfgs = matmul_fast_bf16_configs(&ncfg);
    const int max_elems = 208 * 304;
    float *hA = (float *)mallocCheck(max_elems * sizeof(float)), *hB = (float *)mallocCheck(max_elems * sizeof(float));
    float *hC = (float *)mallocCheck(max_elems * sizeof(float)), *hC2 = (float *)mallocCheck(max_elems * sizeof(float));
    float *refc = (float *)mallocCheck(max_elems * sizeof(float)), *aux = (float *)mallocCheck(max_elems * sizeof(float));
    float *bias = (float *)mallocCheck(304 * sizeof(float));
    unsigned short *hA16 = (unsigned short *)mallocCheck(max_elems * 2), *hB16 = (unsigned short *)mallocCheck(max_elems * 2);
    unsigned short *hC16 = (unsigned short *)mallocCheck(max_elems * 2);
    float *dA = (float *)cudaMallocCheck(max_elems * sizeof(float), "A");
    float *dB = (float *)cudaMallocCheck(max_elems * sizeof(float), "B");
    float *dC = (float *)cudaMallocCheck(max_elems * sizeof(float), "C");
    float *dC2 = (float *)cudaMallocCheck(max_elems * sizeof(float), "C");
    float *daux = (float *)cudaMallocCheck(max_elems * sizeof(float), "aux");
    float *dbias = (float *)cudaMallocCheck(304 * sizeof(float), "bias");
    __nv_bfloat16 *dA16 = (__nv_bfloat16 *)cudaMallocCheck(max_elems * 2, "A16");
    __nv_bfloat16 *dB16 = (__nv_bfloat16 *)cudaMallocCheck(max_elems * 2, "B16");
    __nv_bfloat16 *dC16 = (__nv_bfloat16 *)cudaMallocCheck(max_elems * 2, "C16");
    Rng rng;
    rng_seed(&rng, 37, 1);
    for (int i = 0; i < 304; i++) bias[i] = rng_uniform(&rng) - 0.5f;
    cudaCheck(cudaMemcpy(dbias, bias, 304 * sizeof(float), cudaMemcpyHostToDevice));
    int runs = 0, copies_bad = 0;
    double worst = 0;
    for (int prod = MF_FWD; prod <= MF_DWEIGHT; prod++) {
        for (int sh = 0; sh < 2; sh++) {
            // M, N, K: the batch dimension odd in the second shape
            const int M = sh == 0 || prod == MF_DWEIGHT ? 200 : 203, N = 136, K = sh == 1 && prod == MF_DWEIGHT ? 301 : 296;
            if (!check(matmul_fast_bf16_fits((MfProduct)prod, M, N, K), "%s %dx%dx%d fits the BF16-operand kernel",
                       prods[prod], M, N, K))
                continue;
            for (int i = 0; i < M * K; i++) hA[i] = round_bf16(rng_uniform(&rng) * 2 - 1);
            for (int i = 0; i < N * K; i++) hB[i] = round_bf16(rng_uniform(&rng) * 2 - 1);
            for (int i = 0; i < M * N; i++) aux[i] = rng_uniform(&rng) * 2 - 1;   // tanh outputs in (-1, 1)
            for (int i = 0; i < M * K; i++) hA16[i] = mf_bf16_bits(hA[i]);
            for (int i = 0; i < N * K; i++) hB16[i] = mf_bf16_bits(hB[i]);
            cudaCheck(cudaMemcpy(dA, hA, (size_t)M * K * sizeof(float), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dB, hB, (size_t)N * K * sizeof(float), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dA16, hA16, (size_t)M * K * 2, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(dB16, hB16, (size_t)N * K * 2, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(daux, aux, (size_t)M * N * sizeof(float), cudaMemcpyHostToDevice));
            // the epilogue of the trainer's product: forward bias + relu, dinp tanh', dweight raw
            const int epi_kind = prod == MF_FWD ? MF_EPI_FORWARD : prod == MF_DINP ? MF_EPI_DINP : MF_EPI_RAW;
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    const double sum = mm_ref(prod, hA, hB, M, N, K, m, n, 0);   // (BF16 values already)
                    float v = (float)sum;
                    if (epi_kind == MF_EPI_FORWARD) v = v + bias[n] > 0 ? v + bias[n] : 0.0f;
                    if (epi_kind == MF_EPI_DINP) v = (float)(sum * (1.0 - (double)aux[(size_t)m * N + n] * aux[(size_t)m * N + n]));
                    refc[(size_t)m * N + n] = v;
                }
            const MatmulFastEpi epi = {epi_kind, epi_kind == MF_EPI_FORWARD ? ACT_RELU : ACT_TANH,
                                       epi_kind == MF_EPI_FORWARD ? dbias : NULL, epi_kind == MF_EPI_DINP ? daux : NULL,
                                       {}, 0};
            __nv_bfloat16 *out16 = epi_kind == MF_EPI_RAW ? NULL : dC16;   // the output's copy, as the trainer asks
            for (int c = 0; c < ncfg; c++) {
                cudaCheck(cudaMemset(dC, 0xFF, (size_t)M * N * sizeof(float)));   // NaN: every element must be written
                cudaCheck(cudaMemset(dC16, 0xFF, (size_t)M * N * 2));
                matmul_fast_bf16_run((MfProduct)prod, cfgs[c].id, dC, dA16, dB16, M, N, K, &epi, out16, 0, 0);
                cudaCheck(cudaDeviceSynchronize());
                download(hC, dC, (size_t)M * N);
                const double e = rel_norm(hC, refc, (size_t)M * N);
                runs++;
                if (!(e <= worst)) worst = e;
                check(e <= MM_CFG_BOUND, "%-7s configuration %d (%s), %dx%dx%d: rel norm %.2e (<= %.0e)", prods[prod],
                      cfgs[c].id, cfgs[c].name, M, N, K, e, MM_CFG_BOUND);
                if (out16) {
                    cudaCheck(cudaMemcpy(hC16, dC16, (size_t)M * N * 2, cudaMemcpyDeviceToHost));
                    int bad = 0;
                    for (int i = 0; i < M * N; i++) bad += hC16[i] != mf_bf16_bits(hC[i]);
                    copies_bad += bad;
                    check(bad == 0, "%-7s configuration %d: the output's BF16 copy is the output rounded (%d of %d differ)",
                          prods[prod], cfgs[c].id, bad, M * N);
                }
            }
            // the launchers: given the copies (the BF16-operand kernel wherever the shape fits, min_fill 0
            // here) and without them (the FP32-operand BF16 kernels, which still write the copy)
            MatmulFastBf16 with = {dA16, dB16, out16}, without = {NULL, NULL, out16};
            cudaCheck(cudaMemset(dC16, 0xFF, (size_t)M * N * 2));
            for (int v = 0; v < 2; v++) {
                const MatmulFastBf16 *bf = v == 0 ? &with : &without;
                float *out = v == 0 ? dC : dC2;
                if (prod == MF_FWD) matmul_forward_fast(out, dA, dB, dbias, M, K, N, ACT_RELU, MF_BF16, 0, 0, bf);
                else if (prod == MF_DINP) matmul_backward_dinp_fast(out, dA, dB, daux, ACT_TANH, M, N, K, MF_BF16, 0, bf);
                else matmul_backward_dweight_fast(out, dA, dB, K, N, M, NULL, MF_BF16, NULL, 0, bf);
            }
            cudaCheck(cudaDeviceSynchronize());
            download(hC, dC, (size_t)M * N);
            download(hC2, dC2, (size_t)M * N);
            const double e1 = rel_norm(hC, refc, (size_t)M * N), e2 = rel_norm(hC2, refc, (size_t)M * N);
            check(e1 <= MM_CFG_BOUND && e2 <= MM_CFG_BOUND, "%-7s %dx%dx%d through the launcher: with the BF16 copies "
                  "rel norm %.2e, from the FP32 values %.2e (<= %.0e)", prods[prod], M, N, K, e1, e2, MM_CFG_BOUND);
            if (out16) {   // the last launch (the FP32-operand kernels) wrote the copy
                cudaCheck(cudaMemcpy(hC16, dC16, (size_t)M * N * 2, cudaMemcpyDeviceToHost));
                int bad = 0;
                for (int i = 0; i < M * N; i++) bad += hC16[i] != mf_bf16_bits(hC2[i]);
                check(bad == 0, "%-7s the FP32-operand kernels' BF16 copy of the output is the output rounded (%d of %d "
                      "differ)", prods[prod], bad, M * N);
            }
        }
    }
    printf("  %d products run (%d configurations x 3 products x 2 shapes), worst rel norm %.2e; BF16 copies that "
           "differed: %d\n", runs, ncfg, worst, copies_bad);
    check(ncfg >= 2 && runs == ncfg * 6, "every BF16-operand configuration ran on every product and shape (%d of %d x 6)",
          runs, ncfg);
    free(hA), free(hB), free(hC), free(hC2), free(refc), free(aux), free(bias), free(hA16), free(hB16), free(hC16);
    float *dev[] = {dA, dB, dC, dC2, daux, dbias};
    for (float *p : dev) cudaCheck(cudaFree(p));
    cudaCheck(cudaFree(dA16));
    cudaCheck(cudaFree(dB16));
    cudaCheck(cudaFree(dC16));
}

// ----------------------------------------------------------------------------
// the step plan's coverage, on described GPUs (no GPU needed: the planner asks none)

// GPUs as the planner sees them (MfTarget): an H100 or H200 (sm_90: clusters, wgmma, the TMA), the
// same without the driver's TMA, an A100 (sm_80) and an L4 (sm_89): neither clusters nor wgmma
static const struct { const char *name; MfTarget t; } plan_gpus[] = {
    {"H100/H200 (132 SMs)", {132, 1, 1, 1, 232448, 66, 1980}},
    {"H100 PCIe, no TMA (114 SMs)", {114, 1, 1, 0, 232448, 57, 1755}},
    {"A100 (108 SMs)", {108, 0, 0, 0, 166912, 0, 1410}},
    {"L4 (58 SMs)", {58, 0, 0, 0, 101376, 0, 2040}},
};

// Whether plan p is consistent: each product's shape is its layer's at the batch planned; what it
// names can run on the GPU planned for (a tile configuration and K split the library accepts there,
// copies the model keeps, a split through scratch that fits it); several ranks take every SGD step
// after the sum of the gradients (none in an epilogue; their K-major layers store dW) and no pixel
// bytes, and one rank none after a sum; the batch is gathered as pixel bytes only where
// both of the first layer's products take them; the first layer has no dinp, the others have one
// but under the fused head. The first thing wrong, in words, into why.
static int plan_consistent(const StepPlan *p, char *why, size_t n) {
    for (int i = 0; i < p->nbatch; i++) {
        const BatchPlan *bp = &p->batch[i];
        const int bs = bp->bs;
        if (p->ranks > 1 && bp->gather == GATHER_PIXELS)
            return snprintf(why, n, "batch %d: several ranks with pixel bytes", bs), 0;
        if (bp->kmajor0 && !p->kmajor[0])
            return snprintf(why, n, "batch %d: a K-major first layer without its copies", bs), 0;
        for (int l = 0; l < p->L; l++) {
            const LayerPlan *lp = &bp->layer[l];
            const int IN = p->sizes[l], OUT = p->sizes[l + 1];
            const int shape[3][3] = {{bs, OUT, IN}, {bs, IN, OUT}, {OUT, IN, bs}};
            if (bp->train && (p->ranks > 1) != (lp->sgd == SGD_AFTER_SUM))
                return snprintf(why, n, "batch %d layer %d: %d rank%s, SGD step %s", bs, l, p->ranks,
                                p->ranks > 1 ? "s" : "", p->ranks > 1 ? "not after the sum" : "after a sum"), 0;
            if ((lp->p[MF_DWEIGHT].epi == EPI_SGD) != (bp->train && lp->sgd == SGD_IN_DW))
                return snprintf(why, n, "batch %d layer %d: dW's epilogue and the SGD step disagree", bs, l), 0;
            if (bp->train && lp->sgd == SGD_IN_DW && l > 0 && !lp->kmajor &&
                !(p->bf16_copies && lp->p[MF_DWEIGHT].family == FAM_WGMMA_BF16_COPIES))
                return snprintf(why, n, "batch %d layer %d: W's step in dW's epilogue, which neither K-major copies "
                                "nor the BF16 wgmma kernel's ordering after dinp allows", bs, l), 0;
            if (lp->kmajor && !p->kmajor[l]) return snprintf(why, n, "batch %d layer %d: K-major without copies", bs, l), 0;
            if (bp->train && (l == 0) == (lp->p[MF_DINP].used != 0) && !(l == p->L - 1 && p->head_fused))
                return snprintf(why, n, "batch %d layer %d: dinp %s", bs, l, l == 0 ? "planned" : "missing"), 0;
            for (int k = 0; k < 3; k++) {
                const ProductPlan *pp = &lp->p[k];
                if (!pp->used) continue;
                if (pp->M != shape[k][0] || pp->N != shape[k][1] || pp->K != shape[k][2])
                    return snprintf(why, n, "batch %d layer %d product %d: shape %dx%dx%d", bs, l, k, pp->M, pp->N, pp->K), 0;
                MatmulFastPlan fixed;
                const int scratch = k == MF_DWEIGHT && p->have_scratch;
                switch (pp->family) {
                case FAM_HEAD:
                    if (!p->head_fused || k != MF_FWD || l != p->L - 1 || !bp->train)
                        return snprintf(why, n, "batch %d layer %d: a fused head where there is none", bs, l), 0;
                    break;
                case FAM_TF32_KMAJOR:
                    if (!p->gpu.wgmma || (k != MF_FWD && !lp->kmajor && !(l == 0 && bp->kmajor0)))
                        return snprintf(why, n, "batch %d layer %d product %d: K-major without wgmma or copies", bs, l, k), 0;
                    break;
                case FAM_BF16_COPIES: case FAM_WGMMA_BF16_COPIES:
                    if (!p->bf16_copies || l > p->L - 2 || !matmul_fast_bf16_fits((MfProduct)k, pp->M, pp->N, pp->K) ||
                        (pp->family == FAM_WGMMA_BF16_COPIES && !p->gpu.wgmma))
                        return snprintf(why, n, "batch %d layer %d product %d: BF16 copies that do not fit", bs, l, k), 0;
                    break;
                default:
                    if (!matmul_fast_plan_fixed(&fixed, (MfProduct)k, pp->M, pp->N, pp->K, pp->prec, scratch, pp->mm.cfg,
                                                pp->mm.splits) ||
                        fixed.kchunk != pp->mm.kchunk || fixed.cluster != pp->mm.cluster)
                        return snprintf(why, n, "batch %d layer %d product %d: configuration %d split %d cannot run", bs,
                                        l, k, pp->mm.cfg, pp->mm.splits), 0;
                    if (pp->mm.splits > 1 && !pp->mm.cluster &&
                        (size_t)pp->mm.splits * pp->M * pp->N > p->scratch_floats)
                        return snprintf(why, n, "batch %d layer %d product %d: its K split overflows the scratch", bs, l, k), 0;
                }
            }
        }
        if (bp->gather == GATHER_PIXELS &&
            (bp->layer[0].p[MF_FWD].family != FAM_3XTF32_PIXELS ||
             (bp->layer[0].p[MF_DWEIGHT].used && bp->layer[0].p[MF_DWEIGHT].family != FAM_3XTF32_PIXELS)))
            return snprintf(why, n, "batch %d: pixel bytes, but the first layer's products do not take them", bs), 0;
    }
    return 1;
}

// the families that plans for GPU t choose over a spread of models, batches, precisions, paths and
// rank counts (every batch plan each makes: the training batch, a short last batch, evaluation);
// first[f] names the first case that chose family f
static unsigned plan_families(const MfTarget *t, char first[FAM_COUNT][96], int *plans, int *bad, char *why,
                              size_t nwhy) {
    static const int m1[] = {784, 128, 10}, m2[] = {784, 1024, 1024, 10}, m3[] = {784, 4096, 4096, 10},
                     m4[] = {784, 100, 37, 10}, m5[] = {784, 2048, 2048, 2048, 10}, m6[] = {64, 96, 48, 52, 17},
                     m7[] = {784, 512, 40}, m8[] = {3072, 8192, 10}, m9[] = {784, 10};
    static const struct { const int *sizes; int L; } models[] = {{m1, 2}, {m2, 3}, {m3, 3}, {m4, 3}, {m5, 4},
                                                                 {m6, 4}, {m7, 2}, {m8, 2}, {m9, 1}};
    static const int batches[] = {16, 64, 256, 512, 1024, 4096};
    unsigned seen = 0;
    matmul_fast_set_target(t);
    for (size_t mi = 0; mi < sizeof(models) / sizeof(models[0]); mi++)
        for (size_t bi = 0; bi < sizeof(batches) / sizeof(batches[0]); bi++)
            for (int prec = 0; prec < 3; prec++)
                for (int ask = PLAN_ASK_GRAPHS; ask <= PLAN_ASK_FUSED_ANY; ask++)
                    for (int ranks = 1; ranks <= 4; ranks *= 2) {
                        if (ranks > 1 && ask != PLAN_ASK_GRAPHS) continue;
                        static StepPlan p;   // (large: not on the stack)
                        const int B = batches[bi];
                        step_plan_make(&p, models[mi].sizes, models[mi].L, ACT_RELU, B, prec, ask, ranks);
                        plan_batch(&p, B / ranks, 1);
                        plan_batch(&p, B / ranks / 3 + 1, 1);
                        plan_batch(&p, B > 1024 ? B : 1024, 0);
                        char w[200];
                        (*plans)++;
                        if (!plan_consistent(&p, w, sizeof(w)) && (*bad)++ == 0)
                            snprintf(why, nwhy, "%d,%d..%d B %d -x %d -f %d, %d rank%s: %s", models[mi].sizes[0],
                                     models[mi].sizes[1], models[mi].sizes[models[mi].L], B, prec, ask, ranks,
                                     ranks > 1 ? "s" : "", w);
                        for (int f = 0; f < FAM_COUNT; f++)
                            if (plan_uses_family(&p, f) && !(seen & (1u << f))) {
                                seen |= 1u << f;
                                snprintf(first[f], 96, "%d,%d..%d B %d -x %d -f %d, %d rank%s", models[mi].sizes[0],
                                         models[mi].sizes[1], models[mi].sizes[models[mi].L], B, prec, ask, ranks,
                                         ranks > 1 ? "s" : "");
                            }
                    }
    matmul_fast_set_target(NULL);
    return seen;
}

// -P's text of plan p at bs and last_bs rows (plan_print), in a string to free
static char *plan_text(StepPlan *p, int bs, int last_bs) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (f == NULL) die("", "open_memstream: %s", strerror(errno));
    plan_print(f, p, bs, last_bs);
    fclose(f);
    return text;
}

// Several ranks in TF32 on an H100/H200: the big model at a global batch of 8192 (4096 rows a rank)
// keeps the K-major layers one GPU has (layer 1's dinp and dW, layer 0's dW), each dW storing the
// gradient (no SGD epilogue: the step follows the sum over the ranks), and the consistency check
// refuses the same plan with the SGD step put back into a K-major dW's epilogue
static void test_plan_ranks_kmajor(void) {
    static StepPlan q;
    matmul_fast_set_target(&plan_gpus[0].t);
    const int big[] = {784, 4096, 4096, 10};
    char why[200] = "";
    for (int ranks = 2; ranks <= 4; ranks *= 2) {
        step_plan_make(&q, big, 3, ACT_RELU, 8192, PREC_TF32, PLAN_ASK_GRAPHS, ranks);
        BatchPlan *bp = (BatchPlan *)plan_batch(&q, 8192 / ranks, 1);
        const LayerPlan *l0 = &bp->layer[0], *l1 = &bp->layer[1];
        const int kmajor = q.kmajor[0] && q.kmajor[1] && bp->kmajor0 && l1->kmajor &&
                           l1->p[MF_DINP].family == FAM_TF32_KMAJOR && l1->p[MF_DWEIGHT].family == FAM_TF32_KMAJOR &&
                           l0->p[MF_DWEIGHT].family == FAM_TF32_KMAJOR;
        const int after_sum = l0->sgd == SGD_AFTER_SUM && l1->sgd == SGD_AFTER_SUM &&
                              l0->p[MF_DWEIGHT].epi == EPI_NONE && l1->p[MF_DWEIGHT].epi == EPI_NONE;
        const int fine = plan_consistent(&q, why, sizeof(why));
        check(kmajor && after_sum && fine, "%d ranks, 784..10 in TF32 at global batch 8192 on an H100/H200: layer 1's "
              "dinp and dW and layer 0's dW on %s (%d), each dW storing its gradient for the SGD step after the sum "
              "(%d), consistent (%d%s%s)", ranks, FAM_NAMES[FAM_TF32_KMAJOR], kmajor, after_sum, fine,
              fine ? "" : ": ", fine ? "" : why);
    }
    // (q: 4 ranks) an SGD epilogue put back on a K-major dW under ranks is caught, with or without the step's flag
    BatchPlan *bp = &q.batch[0];
    bp->layer[1].p[MF_DWEIGHT].epi = EPI_SGD;
    const int epi = plan_consistent(&q, why, sizeof(why));
    bp->layer[1].sgd = SGD_IN_DW;
    const int both = plan_consistent(&q, why, sizeof(why));
    check(!epi && !both, "the consistency check: under ranks, a K-major dW with the SGD step in its epilogue is caught "
          "(%d %d)", !epi, !both);
    // -P's text for two ranks: the K-major products, and the SGD steps after the sum
    step_plan_make(&q, big, 3, ACT_RELU, 8192, PREC_TF32, PLAN_ASK_GRAPHS, 2);
    char *text = plan_text(&q, 4096, 4096);
    const char *km = strstr(text, FAM_NAMES[FAM_TF32_KMAJOR]);
    check(km && strstr(text, "W's and b's SGD step after the sum over the ranks, K-major copies (dW before dinp") &&
              !strstr(text, "in dW's epilogue") && !strstr(text, "b's in the bias gradient's kernel"),
          "-P's text for the big model in TF32 on 2 ranks names the K-major products, W's and b's steps after the "
          "sum, and no step in an epilogue or the bias gradient's kernel");
    if (verbose) fputs(text, stdout);
    free(text);
    matmul_fast_set_target(NULL);
}

// Every kernel family of the planner's enum is chosen by some plan for some GPU, and the plans are
// consistent: what a plan names can run there (the copies it launches on are kept, a K split through
// scratch has room)
static void test_plan_coverage(void) {
    unsigned all = 0;
    char first[FAM_COUNT][96];
    for (size_t g = 0; g < sizeof(plan_gpus) / sizeof(plan_gpus[0]); g++) {
        memset(first, 0, sizeof(first));
        int plans = 0, bad = 0;
        char why[400] = "";
        const unsigned seen = plan_families(&plan_gpus[g].t, first, &plans, &bad, why, sizeof(why));
        check(bad == 0, "plans for %s: %d of %d consistent%s%s", plan_gpus[g].name, plans - bad, plans,
              bad ? "; the first that is not: " : "", why);
        char list[512] = "";
        for (int f = 0; f < FAM_COUNT; f++)
            if (seen & (1u << f)) snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", list[0] ? ", " : "",
                                           FAM_NAMES[f]);
        check(seen != 0, "plans for %s choose: %s", plan_gpus[g].name, list);
        const int sm90 = plan_gpus[g].t.wgmma;
        if (!sm90)
            check(!(seen & (1u << FAM_TF32_KMAJOR | 1u << FAM_WGMMA_TF32 | 1u << FAM_WGMMA_BF16_COPIES)),
                  "plans for %s choose no wgmma family (it has no wgmma)", plan_gpus[g].name);
        all |= seen;
    }
    for (int f = 0; f < FAM_COUNT; f++) {
        memset(first, 0, sizeof(first));
        unsigned any = 0;
        for (size_t g = 0; g < sizeof(plan_gpus) / sizeof(plan_gpus[0]) && !(any & (1u << f)); g++) {
            int plans = 0, bad = 0;
            char why[400];
            any = plan_families(&plan_gpus[g].t, first, &plans, &bad, why, sizeof(why));
            if (any & (1u << f))
                check(1, "family %-22s chosen (first: %s on %s)", FAM_NAMES[f], first[f], plan_gpus[g].name);
        }
        if (!(all & (1u << f))) check(0, "family %s: no plan of the spread chooses it", FAM_NAMES[f]);
    }
    // the checker itself: a plan made wrong on purpose, three ways, is caught each time
    {
        static StepPlan q;
        matmul_fast_set_target(&plan_gpus[0].t);
        const int wide[] = {784, 1024, 1024, 10};
        char why[200];
        step_plan_make(&q, wide, 3, ACT_RELU, 256, PREC_TF32, PLAN_ASK_GRAPHS, 1);
        BatchPlan *bp = (BatchPlan *)plan_batch(&q, 256, 1);
        const int fine = plan_consistent(&q, why, sizeof(why));
        bp->layer[0].p[MF_DINP].used = 1;
        const int dinp0 = plan_consistent(&q, why, sizeof(why));
        bp->layer[0].p[MF_DINP].used = 0;
        bp->gather = GATHER_PIXELS;
        const int pixels = plan_consistent(&q, why, sizeof(why));
        bp->gather = GATHER_TF32;
        bp->layer[1].p[MF_DWEIGHT].mm.cfg = 999;
        const int cfg = plan_consistent(&q, why, sizeof(why));
        check(fine && !dinp0 && !pixels && !cfg, "the consistency check: a good plan passes (%d); a first layer's dinp, "
              "pixel bytes in TF32 and a configuration that does not exist are each caught (%d %d %d)", fine, !dinp0,
              !pixels, !cfg);
        matmul_fast_set_target(NULL);
    }
    test_plan_ranks_kmajor();
    // a plan's text: one line per product, with its family's name
    static StepPlan p;
    matmul_fast_set_target(&plan_gpus[0].t);
    const int big[] = {784, 4096, 4096, 10};
    step_plan_make(&p, big, 3, ACT_RELU, 1024, PREC_TF32, PLAN_ASK_FUSED, 1);
    char *text = plan_text(&p, 1024, 1024);
    int lines = 0;
    for (const char *c = text; *c; c++) lines += *c == '\n';
    check(strstr(text, FAM_NAMES[FAM_TF32_KMAJOR]) && strstr(text, FAM_NAMES[FAM_HEAD]) && lines >= 10,
          "-P's text for the big model in TF32 on an H100: %d lines, its K-major and head products named", lines);
    if (verbose) fputs(text, stdout);
    free(text);
    matmul_fast_set_target(NULL);
}

// -x is a ceiling (plan_precision): the precision a model runs in is never below the one asked, a
// change always says why, and the rules pick what the sweep measured faster on an H200
static void test_plan_precision(void) {
    matmul_fast_set_target(&plan_gpus[0].t);
    static const int tiny[] = {784, 64, 10}, odd[] = {784, 2500, 2500, 10}, deep[] = {784, 2048, 2048, 2048, 10},
                     wide[] = {784, 1536, 1536, 10}, two[] = {784, 1024, 1024, 10}, one[] = {784, 8192, 10};
    static const struct { const int *sizes; int L, B, ceiling, ask, ranks, want; const char *what; } cases[] = {
        {odd, 3, 2048, 2, PLAN_ASK_FUSED, 1, PREC_TF32, "widths of 2500: no BF16 copies"},
        {deep, 4, 512, 2, PLAN_ASK_FUSED, 1, PREC_BF16, "batch 512: the BF16-copies kernels' 64-row tiles fill the GPU"},
        {deep, 4, 128, 2, PLAN_ASK_GRAPHS, 1, PREC_TF32, "batch 128: no BF16-copies tile fills the GPU"},
        {wide, 3, 4096, 2, PLAN_ASK_FUSED, 1, PREC_BF16, "batch 4096: they do"},
        {one, 2, 1024, 2, PLAN_ASK_FUSED, 1, PREC_BF16, "one wide hidden layer at batch 1024"},
        {two, 3, 256, 2, PLAN_ASK_FUSED, 1, PREC_TF32, "the fused deep step: TF32, BF16's no faster"},
        {two, 3, 256, 2, PLAN_ASK_FUSED_ANY, 1, PREC_BF16, "-f 3 keeps the fused deep step in BF16"},
        {tiny, 2, 16, 1, PLAN_ASK_FUSED, 1, PREC_FP32, "the one-hidden-layer fused step"},
        {tiny, 2, 16, 2, PLAN_ASK_FUSED, 1, PREC_FP32, "the same from -x 2"},
        {tiny, 2, 16, 1, PLAN_ASK_GRAPHS, 1, PREC_TF32, "-f 1: no fused step"},
        {tiny, 2, 32, 1, PLAN_ASK_GRAPHS, 2, PREC_TF32, "two ranks: no fused step"},
        {odd, 3, 2048, 0, PLAN_ASK_FUSED, 1, PREC_FP32, "-x 0"},
        {odd, 3, 2048, 1, PLAN_ASK_FUSED, 1, PREC_TF32, "-x 1 on a large model"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[200];
        const int got = plan_precision(cases[i].sizes, cases[i].L, cases[i].B, cases[i].ceiling, cases[i].ask,
                                       cases[i].ranks, why, sizeof(why));
        check(got == cases[i].want && (got != cases[i].ceiling) == (why[0] != 0),
              "-x %d, %d,%d..%d at batch %d, -f %d, %d rank%s (%s): runs -x %d (want %d)%s%s", cases[i].ceiling,
              cases[i].sizes[0], cases[i].sizes[1], cases[i].sizes[cases[i].L], cases[i].B, cases[i].ask, cases[i].ranks,
              cases[i].ranks > 1 ? "s" : "", cases[i].what, got, cases[i].want, why[0] ? ": " : "", why);
    }
    // over the coverage's spread on every described GPU: never below the ceiling, a reason for every change
    int bad = 0, n = 0, changed = 0;
    static const int bs[] = {16, 64, 256, 512, 1024, 4096};
    static const int *models[] = {tiny, odd, deep, wide, two, one};
    static const int Ls[] = {2, 3, 4, 3, 3, 2};
    for (size_t g = 0; g < sizeof(plan_gpus) / sizeof(plan_gpus[0]); g++) {
        matmul_fast_set_target(&plan_gpus[g].t);
        for (int mi = 0; mi < 6; mi++)
            for (int bi = 0; bi < 6; bi++)
                for (int c = 0; c < 3; c++)
                    for (int ask = PLAN_ASK_LAUNCHES; ask <= PLAN_ASK_FUSED_ANY; ask++) {
                        char why[200];
                        const int got = plan_precision(models[mi], Ls[mi], bs[bi], c, ask, 1, why, sizeof(why));
                        n++, changed += got != c;
                        bad += got > c || got < 0 || (got != c) != (why[0] != 0);
                    }
    }
    check(bad == 0 && changed > 0, "%d ceilings on 4 described GPUs: %d run a higher precision, each with its reason, "
          "none a lower one (%d wrong)", n, changed, bad);
    matmul_fast_set_target(NULL);
}

// -x 2's large products take the TMA kernel (copies_bf16.cu, matmul_fast_bf16_tma) on a GPU
// planned for with the TMA, and another BF16-copies kernel where it has none (whose driver cannot make
// tensor maps: the launch would stop with an error) or no wgmma: the big model's three products on
// each described GPU
static void test_plan_bf16_tma(void) {
    int ncfg;
    const MatmulFastCfg *cfgs = matmul_fast_bf16_configs(&ncfg);
    int tma_rows = 0;
    for (int i = 0; i < ncfg; i++) tma_rows += matmul_fast_bf16_tma(cfgs[i].id);
    if (tma_rows == 0) {
        skip("this build has no BF16 TMA configuration (no sm_90a code)");
        return;
    }
    static const int shapes[3][3] = {{1024, 4096, 4096}, {1024, 4096, 4096}, {4096, 4096, 1024}};
    for (size_t g = 0; g < sizeof(plan_gpus) / sizeof(plan_gpus[0]); g++) {
        matmul_fast_set_target(&plan_gpus[g].t);
        const MfTarget &t = plan_gpus[g].t;
        int wrong = 0;
        for (int prod = MF_FWD; prod <= MF_DWEIGHT; prod++) {
            const int cfg = matmul_fast_bf16_plan((MfProduct)prod, shapes[prod][0], shapes[prod][1], shapes[prod][2]);
            const MatmulFastCfg *c = NULL;
            for (int i = 0; i < ncfg; i++)
                if (cfgs[i].id == cfg) c = &cfgs[i];
            const int tma = c != NULL && matmul_fast_bf16_tma(cfg);
            wrong += c == NULL || tma != (t.wgmma && t.tma) || (!t.wgmma && c->bk == 64);
        }
        check(wrong == 0, "-x 2, the big model's products on %s: %s (%d wrong)", plan_gpus[g].name,
              t.wgmma && t.tma ? "the TMA kernel" : t.wgmma ? "wgmma without the TMA" : "mma.sync", wrong);
    }
    matmul_fast_set_target(NULL);
}

// -x 2's SGD step in dW's epilogue (plan_bf16_sgd_in_dw) on an H100/H200: the big model at batch 4096
// takes it in both layers (layer 1's dW and dinp are 512 tiles each, layer 0 has no dinp), and -P says
// so; the wide model at batch 256 keeps layer 1's SGD kernel (its dW is a fraction of a wave, which runs
// beside dinp)
static void test_plan_bf16_sgd(void) {
    static StepPlan q;
    matmul_fast_set_target(&plan_gpus[0].t);
    const int big[] = {784, 4096, 4096, 10}, wide[] = {784, 1024, 1024, 10};
    char why[200] = "";
    step_plan_make(&q, big, 3, ACT_RELU, 4096, PREC_BF16, PLAN_ASK_GRAPHS, 1);
    const BatchPlan *bp = plan_batch(&q, 4096, 1);
    const int fine = plan_consistent(&q, why, sizeof(why));
    check(q.bf16_copies && bp->layer[0].sgd == SGD_IN_DW && bp->layer[1].sgd == SGD_IN_DW && fine,
          "-x 2, 784,4096,4096,10 at batch 4096 on an H100/H200: W's step in dW's epilogue in layers 0 (%d) and 1 "
          "(%d), consistent (%d%s%s)", bp->layer[0].sgd == SGD_IN_DW, bp->layer[1].sgd == SGD_IN_DW, fine,
          fine ? "" : ": ", fine ? "" : why);
    char *text = plan_text(&q, 4096, 4096);
    check(strstr(text, "layer 1: W's SGD step in dW's epilogue after dinp, with W's BF16 copy") != NULL,
          "-P's text says layer 1's step rides on dW after dinp, with W's BF16 copy");
    if (verbose) fputs(text, stdout);
    free(text);
    step_plan_make(&q, wide, 3, ACT_RELU, 256, PREC_BF16, PLAN_ASK_GRAPHS, 1);
    bp = plan_batch(&q, 256, 1);
    check(bp->layer[1].sgd == SGD_KERNEL, "-x 2, 784,1024,1024,10 at batch 256: layer 1 keeps the SGD kernel (%d)",
          bp->layer[1].sgd);
    // at batch 512 layer 1's dinp (512 x 2048) is 64 tiles of 128 x 128, half a wave of the 132 SMs
    const int deep[] = {784, 2048, 2048, 2048, 10};
    step_plan_make(&q, deep, 4, ACT_RELU, 512, PREC_BF16, PLAN_ASK_GRAPHS, 1);
    bp = plan_batch(&q, 512, 1);
    check(bp->layer[0].sgd == SGD_IN_DW && bp->layer[1].sgd == SGD_KERNEL,
          "-x 2, 784,2048,2048,2048,10 at batch 512: layer 0's step in dW's epilogue (%d), layer 1's in the SGD "
          "kernel (%d): its dinp fills half a wave", bp->layer[0].sgd == SGD_IN_DW, bp->layer[1].sgd == SGD_KERNEL);
    matmul_fast_set_target(NULL);
}

// -P's expected time (plan_estimate_us) against products timed alone on an H200, each at the plan the
// planner picks for it (tune_check --families, dev/results/sweep_h200_2026-11-29b.log): within 25 %,
// the spread of plan_family_rate's fit (python3 dev/cuda/fit_plan.py --estimate) on such products
static void test_plan_estimates(void) {
    static const struct { int family, M, N, K, cfg; float us; const char *what; } timed[] = {
        {FAM_WGMMA_BF16_COPIES, 4096, 1536, 784, 15, 30.68f, "BF16 forward, 128 x 192 tiles"},
        {FAM_WGMMA_BF16_COPIES, 1536, 784, 4096, 16, 26.95f, "BF16 weight gradient, 128 x 128 tiles"},
        {FAM_TF32_KMAJOR, 4096, 1536, 784, 6, 41.39f, "TF32 K-major forward, 128 x 192 tiles"},
    };
    for (size_t i = 0; i < sizeof(timed) / sizeof(timed[0]); i++) {
        ProductPlan pp;
        memset(&pp, 0, sizeof(pp));
        pp.used = 1, pp.family = timed[i].family, pp.M = timed[i].M, pp.N = timed[i].N, pp.K = timed[i].K;
        pp.mm.cfg = timed[i].cfg, pp.mm.splits = 1;
        int n = 0, built = 0, bm = 0, bn = 0;
        if (timed[i].family == FAM_TF32_KMAJOR) {
            matmul_fast_tf32k_tile(timed[i].cfg, &bm, &bn);
            built = bm > 0;
        } else {
            const MatmulFastCfg *cfgs = matmul_fast_bf16_configs(&n);
            for (int c = 0; c < n && !built; c++) built = cfgs[c].id == timed[i].cfg;
        }
        if (!built) {
            skip("-P's estimate of the %s: this build has no such kernel", timed[i].what);
            continue;
        }
        const float est = plan_estimate_us(&pp, &plan_gpus[0].t);
        check(fabsf(est / timed[i].us - 1.0f) <= 0.25f, "-P's estimate of the %s (%d x %d x %d) on an H200: %.1f us, "
              "timed %.2f", timed[i].what, timed[i].M, timed[i].N, timed[i].K, est, timed[i].us);
    }
}

// The models the fused step takes and those it leaves to the graph path, with the reason
static void test_fused_plan(void) {
    const int small[] = {784, 128, 10}, deep[] = {784, 128, 64, 10}, odd_in[] = {23, 128, 10},
              many[] = {784, 128, 33}, huge[] = {784, 8192, 10};
    FusedPlan f = fused_step_plan(small, 2, 64, PREC_FP32);
    check(f.ok && f.blocks * f.U >= 128 && (f.blocks - 1) * f.U < 128, "fused step: the small model at batch 64 "
          "takes it (%d blocks of %d units)", f.blocks, f.U);
    struct { const int *sizes; int L, B, prec; const char *what; } no[] = {
        {deep, 3, 64, PREC_FP32, "two hidden layers"}, {small, 2, 64, PREC_TF32, "TF32"},
        {small, 2, 64, PREC_BF16, "BF16"}, {odd_in, 2, 64, PREC_FP32, "23 inputs"},
        {many, 2, 64, PREC_FP32, "33 classes"},
        {small, 2, 257, PREC_FP32, "batch 257"}, {huge, 2, 64, PREC_FP32, "8192 hidden units"}};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        f = fused_step_plan(no[i].sizes, no[i].L, no[i].B, no[i].prec);
        check(!f.ok && f.why[0], "fused step: not taken with %s (%s)", no[i].what, f.why);
    }
    // the deep fused step (kernels/fast/fused/fused_deep.cuh), where it can run (-f 3): the wide model in every
    // precision, a block per SM; four layers
    const int wide[] = {784, 1024, 1024, 10}, four[] = {64, 96, 48, 52, 17}, odd[] = {784, 100, 37, 10},
              big[] = {784, 4096, 4096, 10}, deep40[] = {784, 128, 64, 40}, narrow[] = {784, 256, 256, 10};
    int sms = 0;
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    for (int prec = PREC_FP32; prec <= PREC_BF16; prec++) {
        f = plan_fused(wide, 3, 256, prec, 1);
        // (-x 1 on a Hopper build: in clusters of FD_KS, as many as the GPU holds, at least half the SMs)
        const bool ok = f.tma == 3 ? f.blocks % FD_KS == 0 && 2 * f.blocks >= sms && f.blocks <= sms : f.blocks == sms;
        check(f.ok && f.deep && ok, "deep fused step: -f 3 runs the wide model at batch 256, -x %d (%d blocks on %d "
              "SMs, TMA level %d)", prec, f.blocks, sms, f.tma);
    }
    f = plan_fused(four, 4, 100, PREC_FP32, 1);
    check(f.ok && f.deep, "deep fused step: -f 3 runs 64,96,48,52,17 at batch 100");
    f = plan_fused(small, 2, 64, PREC_FP32, 0);
    check(f.ok && !f.deep, "fused_plan: one hidden layer goes to the fused step of one hidden layer");
    struct { const int *sizes; int L, B; const char *what; } dno[] = {
        {odd, 3, 33, "a width of 37"}, {big, 3, 1024, "batch 1024"}, {big, 3, 256, "4096 hidden units"},
        {deep40, 3, 64, "40 classes"}};
    for (size_t i = 0; i < sizeof(dno) / sizeof(dno[0]); i++) {
        f = plan_fused(dno[i].sizes, dno[i].L, dno[i].B, PREC_FP32, 1);
        check(!f.ok && f.why[0], "deep fused step: cannot run with %s (%s)", dno[i].what, f.why);
    }
    // and where -f 2 takes it: TF32 and BF16 with one wave of tiles a product (fused_deep_faster); on a
    // GPU of 128 to 256 SMs the wide model at batch 256 is one wave (128 tiles of 32 x 64)
    if (sms >= 128 && sms <= 256)
        for (int prec = PREC_TF32; prec <= PREC_BF16; prec++) {
            f = plan_fused(wide, 3, 256, prec, 0);
            check(f.ok && f.deep, "deep fused step: -f 2 takes the wide model at batch 256, -x %d", prec);
        }
    struct { const int *sizes; int B, prec; const char *what; } slower[] = {
        {wide, 256, PREC_FP32, "FP32"}, {narrow, 64, PREC_TF32, "784,256,256,10 at batch 64 (8 tiles a product)"},
        {wide, 512, PREC_TF32, "the wide model at batch 512 (two waves)"}};
    for (size_t i = 0; i < sizeof(slower) / sizeof(slower[0]); i++) {
        f = plan_fused(slower[i].sizes, 3, slower[i].B, slower[i].prec, 0);
        check(!f.ok && f.why[0], "deep fused step: -f 2 leaves %s to the graphs (%s)", slower[i].what, f.why);
    }
}

// ----------------------------------------------------------------------------
// determinism: the same seed twice gives the same bits; graphs give the same bits as launches

// `steps` steps from the seed, the last of last_bs rows; returns the final weights (malloc'ed). graph:
// the fast trainer's run_steps, in runs of `run` steps (one CUDA graph each, as the trainer runs the
// steps between two log lines), the last run ending on the short batch; else one step at a time.
// (The FUSED trainer: graph 1 runs `run` steps a launch of its kernel, 0 one step a launch.)
static float *train_weights(int trainer, int prec, int graph, const int *sizes, int L, int act, int B, int steps,
                            int last_bs, int run) {
    HostData h = make_data(B * (steps - 1) + last_bs, sizes[0], sizes[L], 77);
    DeviceData d;
    device_data_upload(&d, h.images, h.labels, h.n, h.D);
    GpuModel g;
    gpu_build(&g, trainer, prec, sizes, L, act, B, h.n, steps, 2024, TEST_OPTIM);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)h.n);
    Rng rng;
    rng_seed(&rng, 2024, 1);
    rng_permutation(&rng, perm, h.n);
    gpu_set_perm(&g, perm, h.n);
    if (graph) {
        for (int done = 0; done < steps;) {
            int end = done + run < steps ? done + run : steps;
            if (trainer == FUSED)
                fast::fused_run(&g.f, &d, end - done, end == steps ? last_bs : B, sgd_of(&g.cfg), g.stream);
            else
                fast::run_steps(&g.f, &d, end - done, end == steps ? last_bs : B, sgd_of(&g.cfg), g.stream);
            done = end;
        }
        cudaCheck(cudaStreamSynchronize(g.stream));
    } else {
        for (int t = 0; t < steps; t++) gpu_step(&g, &d, t == steps - 1 ? last_bs : B);
    }
    float *w = (float *)mallocCheck(gpu_num_params(&g) * sizeof(float));
    download(w, gpu_params_dev(&g), gpu_num_params(&g));
    free(perm);
    free(h.images);
    free(h.labels);
    gpu_free(&g);
    device_data_free(&d);
    return w;
}

// checks that two weight buffers are the same bits, and frees both
static void check_identical(float *a, float *b, size_t n, const char *what) {
    check(memcmp(a, b, n * sizeof(float)) == 0, "%s (%zu weights)", what, n);
    free(a);
    free(b);
}

static void test_determinism(void) {
    section("determinism: bitwise identical weights after 10 steps");
    const int sizes[] = {784, 100, 37, 10};
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    size_t n = param_layout(sizes, 3, w_off, b_off);
    check_identical(train_weights(READABLE, 0, 0, sizes, 3, ACT_SIGMOID, 33, 10, 33, 10),
                    train_weights(READABLE, 0, 0, sizes, 3, ACT_SIGMOID, 33, 10, 33, 10), n,
                    "train_mlp.cu: two runs from the same seed give identical weights");
    check_identical(train_weights(FAST, 0, 1, sizes, 3, ACT_SIGMOID, 33, 10, 33, 10),
                    train_weights(FAST, 0, 1, sizes, 3, ACT_SIGMOID, 33, 10, 33, 10), n,
                    "train_mlp_fast.cu: two graph runs from the same seed give identical weights");
    check_identical(train_weights(FAST, 0, 0, sizes, 3, ACT_RELU, 33, 10, 33, 10),
                    train_weights(FAST, 0, 1, sizes, 3, ACT_RELU, 33, 10, 33, 10), n,
                    "train_mlp_fast.cu: a CUDA graph replay gives the same bits as launching the kernels one by one");
    check_identical(train_weights(FAST, 1, 0, sizes, 3, ACT_TANH, 33, 10, 33, 10),
                    train_weights(FAST, 1, 1, sizes, 3, ACT_TANH, 33, 10, 33, 10), n,
                    "train_mlp_fast.cu TF32: graph replay and launches give the same bits");
    // as the trainer runs an epoch: graphs of 4 steps, then the remainder, ending on a short batch
    check_identical(train_weights(FAST, 0, 0, sizes, 3, ACT_RELU, 33, 10, 17, 4),
                    train_weights(FAST, 0, 1, sizes, 3, ACT_RELU, 33, 10, 17, 4), n,
                    "train_mlp_fast.cu: runs of 4, 4 and 2 steps from graphs, the last batch of 17 rows, give the same "
                    "bits as launches");
    check_identical(train_weights(FAST, 1, 0, sizes, 3, ACT_SIGMOID, 33, 10, 17, 4),
                    train_weights(FAST, 1, 1, sizes, 3, ACT_SIGMOID, 33, 10, 17, 4), n,
                    "train_mlp_fast.cu TF32: the same with a last batch of 17 rows");
    check_identical(train_weights(FAST, PREC_BF16, 0, sizes, 3, ACT_RELU, 33, 10, 17, 4),
                    train_weights(FAST, PREC_BF16, 1, sizes, 3, ACT_RELU, 33, 10, 17, 4), n,
                    "train_mlp_fast.cu BF16: the same with a last batch of 17 rows");
    // TF32 on the K-major kernel (at any fill, as gpu_vs_cpu_tf32k runs it): each step's dinp reads one
    // of the two transposed copies of W while its SGD step writes the other (Model's tf32t_parity), so
    // a run's graph depends on the parity it starts at; runs of 3, 3, 3 and 1 steps start at both, and
    // the last batch (37 rows) is too short for the kernel (the SGD kernel and a transpose instead)
    if (matmul_fast_tf32k_fits(1 << 12, 1 << 12, 1 << 12)) {
        const int deep4[] = {64, 96, 48, 52, 17};
        size_t w4[MAX_LAYERS], b4[MAX_LAYERS];
        const size_t n4 = param_layout(deep4, 4, w4, b4);
        const float fill = matmul_fast_tf32k_set_min_fill(0.0f);
        check_identical(train_weights(FAST, PREC_TF32, 0, deep4, 4, ACT_TANH, 100, 10, 37, 3),
                        train_weights(FAST, PREC_TF32, 1, deep4, 4, ACT_TANH, 100, 10, 37, 3), n4,
                        "train_mlp_fast.cu TF32 on the K-major kernel: runs of 3, 3, 3 and 1 steps from graphs, at "
                        "both parities of W's transposed copies, the last batch of 37 rows, give the same bits as "
                        "launches");
        matmul_fast_tf32k_set_min_fill(fill);
    } else {
        skip("this build has no wgmma kernel (GPU_ARCH=90 builds it): the K-major TF32 kernel's graphs are not run");
    }
    // FP32 on pixels (MF_FP32_PIXELS): one graph with steps on pixel bytes and a last step on values,
    // the last batch gathered ahead as values, where the plan has such a pair of batch sizes: the
    // first of a few models and last batches whose first layer takes 3xTF32 tiles (pixels) at 1024
    // rows and an FFMA tile (values) at the last batch; the launches, step by step, are compared with
    // the CPU elsewhere
    {
        static const int hs[] = {1536, 100, 37, 16};
        static const int lasts[] = {100, 17, 5, 1};
        int px[3] = {784, 0, 10}, last = 0;
        for (int i = 0; i < 4 && !last; i++)
            for (int j = 0; j < 4 && !last; j++) {
                px[1] = hs[i];
                const int pixels = matmul_fast_pixels_fit(MF_FWD, 1024, px[1], 784, 0) &&
                                   matmul_fast_pixels_fit(MF_DWEIGHT, px[1], 784, 1024, 1);
                const int values = !matmul_fast_pixels_fit(MF_FWD, lasts[j], px[1], 784, 0) ||
                                   !matmul_fast_pixels_fit(MF_DWEIGHT, px[1], 784, lasts[j], 1);
                if (pixels && values) last = lasts[j];
            }
        if (!last) {
            skip("FP32 on pixels beside values in one graph: no model of the few tried takes pixel bytes at 1024 rows "
                 "and values at its last batch on this GPU (its plans take 3xTF32 tiles on the first layer at every "
                 "batch); the steps on pixels are compared with the CPU elsewhere");
        } else {
            size_t wpx[MAX_LAYERS], bpx[MAX_LAYERS];
            size_t npx = param_layout(px, 2, wpx, bpx);
            char what[160];
            snprintf(what, sizeof(what), "train_mlp_fast.cu FP32 on pixels: a graph of 4 steps of 784,%d,10, 3 on pixel "
                     "bytes and the last on %d rows of values, gives the same bits as launches", px[1], last);
            check_identical(train_weights(FAST, 0, 0, px, 2, ACT_RELU, 1024, 4, last, 4),
                            train_weights(FAST, 0, 1, px, 2, ACT_RELU, 1024, 4, last, 4), npx, what);
        }
    }
    // the fused step: runs of several steps in one launch (the next batch fetched during a step,
    // W0's rows and W1's columns kept in shared memory from step to step and written back at the
    // end) give the same bits as one launch a step, whose every tensor the step-by-step cases
    // compare with the CPU; runs of 4, 4 and 2 steps, and of 3, 3, 3 and 1
    const int two[] = {784, 100, 10};
    size_t w2[MAX_LAYERS], b2[MAX_LAYERS];
    size_t n2 = param_layout(two, 2, w2, b2);
    check_identical(train_weights(FUSED, 0, 0, two, 2, ACT_RELU, 33, 10, 17, 4),
                    train_weights(FUSED, 0, 1, two, 2, ACT_RELU, 33, 10, 17, 4), n2,
                    "train_mlp_fast.cu -f 2: runs of 4, 4 and 2 steps in one launch each, the last batch of 17 rows, "
                    "give the same bits as one step a launch");
    check_identical(train_weights(FUSED, 0, 0, two, 2, ACT_SIGMOID, 33, 10, 33, 3),
                    train_weights(FUSED, 0, 1, two, 2, ACT_SIGMOID, 33, 10, 33, 3), n2,
                    "train_mlp_fast.cu -f 2: runs of 3, 3, 3 and 1 steps give the same bits as one step a launch");
    check_identical(train_weights(FUSED, 0, 1, two, 2, ACT_TANH, 33, 10, 17, 10),
                    train_weights(FUSED, 0, 1, two, 2, ACT_TANH, 33, 10, 17, 10), n2,
                    "train_mlp_fast.cu -f 2: two runs of 10 steps in one launch from the same seed give identical "
                    "weights");
    // the deep fused step (kernels/fast/fused/fused_deep.cuh): the batches alternate between two buffers, the
    // next one gathered during the head's phase; runs of several steps in one launch give the same bits
    // as one step a launch, in each precision
    const int deep[] = {784, 100, 36, 10};
    size_t w3[MAX_LAYERS], b3[MAX_LAYERS];
    size_t n3 = param_layout(deep, 3, w3, b3);
    check_identical(train_weights(FUSED, 0, 0, deep, 3, ACT_RELU, 33, 10, 17, 4),
                    train_weights(FUSED, 0, 1, deep, 3, ACT_RELU, 33, 10, 17, 4), n3,
                    "train_mlp_fast.cu -f 2, two hidden layers: runs of 4, 4 and 2 steps in one launch each, the last "
                    "batch of 17 rows, give the same bits as one step a launch");
    check_identical(train_weights(FUSED, 1, 0, deep, 3, ACT_TANH, 33, 10, 33, 3),
                    train_weights(FUSED, 1, 1, deep, 3, ACT_TANH, 33, 10, 33, 3), n3,
                    "train_mlp_fast.cu -f 2 TF32, two hidden layers: runs of 3, 3, 3 and 1 steps, the same bits");
    check_identical(train_weights(FUSED, PREC_BF16, 0, deep, 3, ACT_SIGMOID, 33, 10, 17, 4),
                    train_weights(FUSED, PREC_BF16, 1, deep, 3, ACT_SIGMOID, 33, 10, 17, 4), n3,
                    "train_mlp_fast.cu -f 2 BF16, two hidden layers: runs of 4, 4 and 2 steps, the same bits");
    check_identical(train_weights(FUSED, 0, 1, deep, 3, ACT_TANH, 33, 10, 17, 10),
                    train_weights(FUSED, 0, 1, deep, 3, ACT_TANH, 33, 10, 17, 10), n3,
                    "train_mlp_fast.cu -f 2, two hidden layers: two runs of 10 steps in one launch give identical "
                    "weights");
}

// ----------------------------------------------------------------------------
// the GPU against PyTorch

static void ref_check_gpu(const char *path, int trainer) {
    RefFile r;
    if (ref_open(path, &r) != 0) return;
    printf("   against %s\n", TRAINER_NAMES[trainer]);
    GpuModel g;
    gpu_build(&g, trainer, 0, r.sizes, r.L, r.act, r.B, r.B, r.nsteps, 1, TEST_OPTIM);
    cudaCheck(cudaMemcpy(gpu_params_dev(&g), r.params0, sizeof(float) * (size_t)r.nparams, cudaMemcpyHostToDevice));
    if (trainer == FAST) fast::model_sync_copies(&g.f, 0);
    // the reference's inputs as they are (floats, not bytes): straight into the batch, which then holds
    // values, not pixel bytes
    if (trainer != READABLE) g.f.x_pixels = 0;
    float *x = gpu_acts_dev(&g)[0];
    int *labels = trainer == READABLE ? g.r.labels : g.f.labels;
    cudaCheck(cudaMemcpy(x, r.inputs, sizeof(float) * (size_t)r.B * r.sizes[0], cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(labels, r.labels, sizeof(int) * (size_t)r.B, cudaMemcpyHostToDevice));
    Report rep;
    report_init(&rep, verbose);
    for (int t = 0; t < r.nsteps; t++) {
        if (trainer == READABLE) {
            model_forward(&g.r, r.B);
            model_loss(&g.r, r.B, g.loss_dev);
            model_backward(&g.r, r.B);
            model_update(&g.r, r.lr, r.momentum, r.weight_decay);
        } else {
            fast::train_step_on_batch(&g.f, r.B, r.lr, r.momentum, r.weight_decay, g.stream);
        }
        g.steps++;
        cudaCheck(cudaDeviceSynchronize());
        StepTensors got = gpu_snapshot(&g, r.B);
        StepTensors want = ref_step(&r, t);
        // the same FP32 tolerances as against the CPU: PyTorch is one more float32 summation order
        compare_step(&rep, t, &got, &want, r.sizes, r.L, r.B, &TOL_FP32);
    }
    report_print(&rep);
    gpu_free(&g);
    ref_free(&r);
}

// ----------------------------------------------------------------------------
// your own model: the trainers' flags select it, test_mlp runs it on the CPU and the GPU side by side

static void usage(FILE *f, const char *prog) {
    fprintf(f, "usage: %s                run the whole test suite\n"
               "       %s -Q             a subset that still launches every kernel (for compute-sanitizer)\n"
               "       %s [trainer flags] [-N STEPS] [-G readable|fast|fused|all]\n"
               "                         your own model: the first STEPS (default 10) steps of a training run\n"
               "                         on the CPU and on the GPU side by side, every tensor at every step\n\n"
               "  -V        print every tensor at every step (the suite; your own model always does)\n"
               "  -X        stop after the first case that fails (mutation runs: dev/mutate/)\n"
               "  -S I/N    only cases I, I+N, I+2N ... of the suite (or of -Q): N processes share it, e.g.\n"
               "            four compute-sanitizer runs at once (dev/sanitize.sh, SHARDS=4)\n"
               "  -N INT    steps to compare (default 10)\n"
               "  -G WHICH  the GPU trainer to compare: readable (train_mlp.cu), fast (train_mlp_fast.cu -f 0),\n"
               "            fused (train_mlp_fast.cu -f 3, for the models its fused steps can run), all (default)\n\n"
               "the trainer flags (the same table as train_mlp_fast's; -n, -v, -o and -t have no effect here):\n",
            prog, prog, prog);
    Config d;
    config_defaults(&d, PROG_FAST);
    for (int i = 0; i < NUM_ARGS; i++) {
        if (!(ARGS[i].programs & PROG_FAST)) continue;
        fprintf(f, "  -%c %-6s %s\n", ARGS[i].flag, ARGS[i].meta, ARGS[i].help);
    }
}

// The first `steps` steps of training the model of cfg on its data (the permutation of its first
// epoch, the weights of its seed), on the CPU and on the chosen GPU trainers. Returns the exit code.
static int run_own_model(Config *cfg, const char *prog, int steps, int which) {
    Dataset train, test;
    load_datasets_or_die(cfg, prog, &train, &test);
    char shape[96];
    shape_string(shape, sizeof(shape), cfg->sizes, cfg->L);
    int B = cfg->batch, D = dataset_dim(&train);
    EpochPlan plan = epoch_plan(train.n, B, steps);
    Rng rng;
    rng_seed(&rng, cfg->seed, 1);  // the trainers' shuffle: the same first epoch
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)train.n);
    rng_permutation(&rng, perm, train.n);
    HostData h = {train.images, train.labels, train.n, D};
    Optim o = {cfg->lr, cfg->momentum, cfg->weight_decay};
    printf("%s: %s %s, B=%d, lr %g, momentum %g, weight decay %g, seed %llu, %d steps%s\n", train.name, shape,
           ACT_NAMES[cfg->act], B, cfg->lr, cfg->momentum, cfg->weight_decay, (unsigned long long)cfg->seed,
           plan.steps, cfg->precision == PREC_TF32   ? ", TF32 (-x 1: the fast trainer only)"
                       : cfg->precision == PREC_BF16 ? ", BF16 (-x 2: the fast trainer only)" : "");
    section("the step plan (host only: described GPUs)");
    CASE(test_plan_coverage());
    CASE(test_plan_precision());
    CASE(test_plan_bf16_tma());
    CASE(test_plan_bf16_sgd());
    CASE(test_plan_estimates());
    const char *missing = gpu_missing();
    if (missing) {
        printf("\nno CUDA GPU here (%s): only the CPU side can run. Its loss at each step:\n", missing);
        ModelCPU c;
        model_build_cpu(&c, cfg->sizes, cfg->L, cfg->act, B);
        model_init_params_cpu(&c, cfg->seed);
        for (int t = 0; t < plan.steps; t++) {
            int bs = epoch_batch_size(&plan, t, B);
            gather_batch_cpu(c.acts[0], c.labels, train.images, train.labels, perm, t * B, bs, D);
            model_forward_cpu(&c, bs);
            double loss = model_loss_cpu(&c, bs);
            model_backward_cpu(&c, bs);
            model_update_cpu(&c, o.lr, o.momentum, o.weight_decay);
            printf("  step %d: loss %.6f\n", t, loss);
        }
        model_free_cpu(&c);
        skip("the GPU side: run this on a machine with a GPU to compare it tensor by tensor");
    } else {
        cudaDeviceProp p = require_gpu();
        printf("GPU: %s (sm_%d%d)\n", p.name, p.major, p.minor);
        for (int trainer = READABLE; trainer <= FUSED; trainer++) {
            if (which != ALL_TRAINERS && which != trainer) continue;
            int prec = trainer != READABLE ? cfg->precision : PREC_FP32;
            if (trainer == FUSED) {
                FusedPlan f = plan_fused(cfg->sizes, cfg->L, B, prec, 1);
                if (!f.ok) {
                    printf("\n-- %s: not for this model: %s\n", TRAINER_NAMES[trainer], f.why);
                    if (which == FUSED) skip("%s: %s", TRAINER_NAMES[trainer], f.why);
                    continue;
                }
            }
            printf("\n-- %s%s against the CPU\n", TRAINER_NAMES[trainer], PREC_SHORT[prec]);
            gpu_vs_cpu_on(trainer, prec, cfg->sizes, cfg->L, cfg->act, B, plan.steps, plan.last_bs, &h, perm, cfg->seed, o);
        }
    }
    free(perm);
    dataset_free(&train);
    dataset_free(&test);
    return test_exit();
}

int main(int argc, char **argv) {
    int quick = 0, steps = 10, which = ALL_TRAINERS, own = 0;
    char *rest[256];
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-V") == 0) verbose = 1;
        else if (strcmp(a, "-Q") == 0) quick = 1;
        else if (strcmp(a, "-X") == 0) fail_fast = 1;
        else if (strcmp(a, "-S") == 0 && i + 1 < argc) {
            const char *v = argv[++i];
            int si, sn, used = 0;
            if (sscanf(v, "%d/%d%n", &si, &sn, &used) != 2 || v[used] || sn < 1 || sn > 64 || si < 0 || si >= sn)
                usage_error(argv[0], "-S: '%s' is not I/N with 0 <= I < N <= 64 (e.g. 0/4)", v);
            shard_i = si, shard_n = sn;
        }
        else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout, argv[0]);
            return 0;
        } else if ((strcmp(a, "-N") == 0 || strcmp(a, "-G") == 0) && i + 1 < argc) {
            const char *v = argv[++i];
            own = 1;
            if (a[1] == 'N') {
                char *end;
                long n = strtol(v, &end, 10);
                if (*end || n < 1 || n > 100000) usage_error(argv[0], "-N: '%s' is not a step count from 1 to 100000", v);
                steps = (int)n;
            } else {
                which = strcmp(v, "readable") == 0 ? READABLE
                        : strcmp(v, "fast") == 0   ? FAST
                        : strcmp(v, "fused") == 0  ? FUSED
                        : strcmp(v, "all") == 0 || strcmp(v, "both") == 0 ? ALL_TRAINERS : -2;
                if (which == -2) usage_error(argv[0], "-G: '%s' is not readable, fast, fused or all", v);
            }
        } else if (nrest < 255) {
            rest[nrest++] = argv[i];
            own = 1;
        }
    }
    if (own) {
        Config cfg;
        config_defaults(&cfg, PROG_FAST);
        char err[512];
        int rc = config_parse(&cfg, nrest, rest, PROG_FAST, err, sizeof(err));
        if (rc != 0) usage_error(argv[0], "%s", err);
        verbose = 1;
        return run_own_model(&cfg, argv[0], steps, which);
    }
    section("the step plan (host only: described GPUs)");
    CASE(test_plan_coverage());
    CASE(test_plan_precision());
    CASE(test_plan_bf16_tma());
    CASE(test_plan_bf16_sgd());
    CASE(test_plan_estimates());
    const char *missing = gpu_missing();
    if (missing) {
        section("GPU checks");
        skip("no CUDA GPU here (%s): the GPU-against-CPU, evaluation, determinism and GPU-against-PyTorch checks "
             "are skipped; the CPU's own checks run in tests/bin/test_cpu", missing);
        return test_exit();
    }
    cudaDeviceProp prop = require_gpu();
    printf("GPU: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
    // -x 2's products on BF16 copies wherever the widths allow, however few tiles (the trainer takes
    // them only where they fill half the GPU: the big model), so that the small cases here run them too
    matmul_fast_bf16_set_min_fill(0.0f);

    const int small[] = {784, 128, 10};
    const int odd[] = {784, 100, 37, 10};     // widths that are no multiple of any tile
    const int wide[] = {784, 1024, 1024, 10};
    const int head32[] = {784, 64, 27};       // the fused head's larger variant (17-32 classes)
    const int many[] = {784, 64, 40};         // more classes than the fused head takes (kernels/fast/ops/head.cuh)
    const int linear[] = {784, 10};           // one layer: softmax regression, no hidden layer
    const int tail[] = {23, 5, 7};            // W1: 35 weights at a 16-byte aligned offset: sgd_update_fast's
                                              // float4 kernel and its one-at-a-time tail (kernels/fast/ops/sgd.cuh)
    // the fused step (-f 2) split otherwise than the small model (128 blocks of 1 unit, a block per row
    // of the batch in its head): 3 units a block on a GPU of 101 to 150 SMs, the last block with 1,
    // 17 classes (B 100); and 8 blocks, 32 rows each in the head, 3 classes (B 256)
    const int fused3[] = {256, 301, 17};
    const int fused_tiny[] = {64, 8, 3};
    // the deep fused step (widths but the classes multiples of 4)
    const int deep_small[] = {784, 64, 32, 10};
    const int deep4[] = {64, 96, 48, 52, 17};
    // the fused head at a batch whose blocks of warps fill the GPU (head_warp_kernel; a last batch
    // below that takes head_kernel): float4 rows, and single floats (18 inputs) with 27 classes
    const int headw[] = {48, 36, 10}, headw_odd[] = {48, 30, 18, 27}, headw_b16[] = {48, 40, 32, 10};
    section("the GPU against the CPU, step by step");
    if (quick) {  // every kernel and path once, small enough for memcheck and racecheck
        CASE(gpu_vs_cpu(READABLE, 0, odd, 3, ACT_TANH, 33, 17));
        CASE(gpu_vs_cpu(FAST, 0, odd, 3, ACT_RELU, 33, 17));
        CASE(gpu_vs_cpu(FAST, 0, head32, 2, ACT_SIGMOID, 33, 5));
        CASE(gpu_vs_cpu(FAST, 0, many, 2, ACT_SIGMOID, 33, 5));
        CASE(gpu_vs_cpu(FAST, 1, odd, 3, ACT_SIGMOID, 33, 17));
        CASE(gpu_vs_cpu(FAST, 1, many, 2, ACT_TANH, 33, 5));
        CASE(gpu_vs_cpu(FAST, PREC_BF16, odd, 3, ACT_RELU, 33, 17));
        CASE(gpu_vs_cpu(FAST, PREC_BF16, many, 2, ACT_SIGMOID, 33, 5));
        CASE(gpu_vs_cpu(FAST, 0, tail, 2, ACT_TANH, 33, 17));
        CASE(gpu_vs_cpu(FAST, 0, headw_odd, 3, ACT_RELU, 4096, 1001));
        CASE(gpu_vs_cpu(FAST, PREC_BF16, headw_b16, 3, ACT_SIGMOID, 4096, 1001));
        CASE(gpu_vs_cpu(FUSED, 0, fused3, 2, ACT_TANH, 100, 37));
        CASE(gpu_vs_cpu(FUSED, 0, deep4, 4, ACT_RELU, 100, 37));
        CASE(gpu_vs_cpu(FUSED, 1, deep_small, 3, ACT_TANH, 33, 17));
        CASE(gpu_vs_cpu(FUSED, PREC_BF16, deep4, 4, ACT_SIGMOID, 100, 37));
        CASE(test_matmul_configs());
        CASE(test_matmul_large());
        CASE(test_matmul_bf16_ops());
        CASE(test_matmul_tf32k());
        CASE(gpu_vs_cpu_tf32k(deep4, 4, ACT_TANH, 100, 37));
        CASE(gpu_vs_cpu_family(FAM_3XTF32, 0));
        CASE(gpu_vs_cpu_family(FAM_FFMA, 0));
        CASE(gpu_vs_cpu_family(FAM_WGMMA_TF32, 0));
        CASE(gpu_vs_cpu_family(FAM_BF16_COPIES, 1));
        CASE(gpu_vs_cpu_bf16_sgd());
        CASE(test_determinism());
        CASE(test_families_launched());
        return test_exit();
    }
    for (int trainer = READABLE; trainer <= FAST; trainer++) {
        for (int act = 0; act < 3; act++) {
            CASE(gpu_vs_cpu(trainer, 0, small, 2, act, 64, 32));
            CASE(gpu_vs_cpu(trainer, 0, odd, 3, act, 33, 17));
        }
        CASE(gpu_vs_cpu(trainer, 0, small, 2, ACT_SIGMOID, 1, 1));     // a batch of one
        CASE(gpu_vs_cpu(trainer, 0, wide, 3, ACT_TANH, 256, 96));     // tanh: see "The wide model" above
        CASE(gpu_vs_cpu(trainer, 0, linear, 1, ACT_SIGMOID, 33, 8));
    }
    CASE(gpu_vs_cpu(FAST, 0, head32, 2, ACT_RELU, 33, 9));   // the fused head with 17-32 classes
    CASE(gpu_vs_cpu(FAST, 0, many, 2, ACT_RELU, 33, 9));     // the fast path without the fused head
    CASE(gpu_vs_cpu(FAST, 0, tail, 2, ACT_TANH, 33, 17));    // the SGD kernel's tail
    CASE(gpu_vs_cpu(FAST, 0, headw, 2, ACT_TANH, 4096, 1001));          // the head by warps, one hidden layer
    CASE(gpu_vs_cpu(FAST, 0, headw_odd, 3, ACT_RELU, 4096, 1001));
    CASE(gpu_vs_cpu(FAST, 1, headw_odd, 3, ACT_SIGMOID, 4096, 2500));
    CASE(gpu_vs_cpu(FAST, PREC_BF16, headw_b16, 3, ACT_SIGMOID, 4096, 1001));   // dh's BF16 copy
    // the fused step (-f 2): the small model with each activation, a batch of one, other splits
    for (int act = 0; act < 3; act++) CASE(gpu_vs_cpu(FUSED, 0, small, 2, act, 64, 32));
    CASE(gpu_vs_cpu(FUSED, 0, small, 2, ACT_SIGMOID, 1, 1));
    CASE(gpu_vs_cpu(FUSED, 0, fused3, 2, ACT_TANH, 100, 37));
    CASE(gpu_vs_cpu(FUSED, 0, fused_tiny, 2, ACT_RELU, 256, 255));
    // the deep fused step (-f 2 with two or more hidden layers, kernels/fast/fused/fused_deep.cuh), in each
    // precision: a small deep model with each activation and a batch of one, the wide model, four
    // layers with 17 classes (the head's larger variant) at a batch that is no multiple of any tile
    for (int act = 0; act < 3; act++) CASE(gpu_vs_cpu(FUSED, 0, deep_small, 3, act, 33, 17));
    CASE(gpu_vs_cpu(FUSED, 0, deep_small, 3, ACT_SIGMOID, 1, 1));
    CASE(gpu_vs_cpu(FUSED, 0, wide, 3, ACT_TANH, 256, 96));
    CASE(gpu_vs_cpu(FUSED, 0, deep4, 4, ACT_SIGMOID, 100, 37));
    CASE(gpu_vs_cpu(FUSED, 1, wide, 3, ACT_RELU, 256, 96));
    CASE(gpu_vs_cpu(FUSED, 1, deep4, 4, ACT_TANH, 100, 37));
    CASE(gpu_vs_cpu_fused_tma(0, 0, wide, 3, ACT_RELU, 256, 96));
    CASE(gpu_vs_cpu_fused_tma(0, 0, deep4, 4, ACT_TANH, 100, 37));
    CASE(gpu_vs_cpu_fused_tma(1, 0, wide, 3, ACT_RELU, 256, 96));
    CASE(gpu_vs_cpu_fused_tma(1, 0, deep4, 4, ACT_TANH, 100, 37));
    CASE(gpu_vs_cpu_fused_tma(2, 0, wide, 3, ACT_RELU, 256, 96));
    CASE(gpu_vs_cpu_fused_tma(2, 0, deep4, 4, ACT_TANH, 100, 37));
    // on 4 blocks, every block several tiles of a phase, clusters or not
    CASE(gpu_vs_cpu_fused_tma(3, 4, deep4, 4, ACT_TANH, 100, 37));
    CASE(gpu_vs_cpu_fused_tma(2, 4, deep4, 4, ACT_TANH, 100, 37));
    CASE(gpu_vs_cpu(FUSED, PREC_BF16, wide, 3, ACT_RELU, 256, 96));
    CASE(gpu_vs_cpu(FUSED, PREC_BF16, deep_small, 3, ACT_SIGMOID, 33, 17));
    CASE(test_fused_plan());
    CASE(gpu_vs_cpu_big(PREC_FP32));                         // FP32 as 3xTF32 on the tensor cores
    // the TF32 tensor-core path, with its looser tolerances, and each product against its emulation
    CASE(gpu_vs_cpu(FAST, 1, small, 2, ACT_SIGMOID, 64, 32));
    CASE(gpu_vs_cpu(FAST, 1, odd, 3, ACT_TANH, 33, 17));
    CASE(gpu_vs_cpu(FAST, 1, head32, 2, ACT_RELU, 33, 9));   // TF32 with the fused head's larger variant
    CASE(gpu_vs_cpu(FAST, 1, many, 2, ACT_SIGMOID, 33, 9));  // TF32 without the fused head: TF32 logits
    CASE(gpu_vs_cpu(FAST, 1, wide, 3, ACT_RELU, 256, 96));
    // and on the K-major kernel (any fill): two such layers in a row, the last batch's dweight too
    // short for it (37 rows: the other kernels, while the copies of W stay current), and the wide model
    CASE(gpu_vs_cpu_tf32k(deep4, 4, ACT_TANH, 100, 37));
    CASE(gpu_vs_cpu_tf32k(wide, 3, ACT_RELU, 256, 96));
    CASE(gpu_vs_cpu_big(PREC_TF32));
    // BF16 mixed precision, the same cases: 4x TF32's tolerances, and each product against its emulation
    CASE(gpu_vs_cpu(FAST, PREC_BF16, small, 2, ACT_SIGMOID, 64, 32));
    CASE(gpu_vs_cpu(FAST, PREC_BF16, odd, 3, ACT_TANH, 33, 17));
    CASE(gpu_vs_cpu(FAST, PREC_BF16, head32, 2, ACT_RELU, 33, 9));
    CASE(gpu_vs_cpu(FAST, PREC_BF16, many, 2, ACT_SIGMOID, 33, 9));   // BF16 logits
    CASE(gpu_vs_cpu(FAST, PREC_BF16, wide, 3, ACT_RELU, 256, 96));
    CASE(gpu_vs_cpu_big(PREC_BF16));
    // the families the cases above leave out on an H100/H200 (3xTF32 but in the big model), a case each
    CASE(gpu_vs_cpu_family(FAM_3XTF32, 0));
    CASE(gpu_vs_cpu_family(FAM_FFMA, 0));
    CASE(gpu_vs_cpu_family(FAM_WGMMA_TF32, 0));
    CASE(gpu_vs_cpu_family(FAM_BF16_COPIES, 1));
    CASE(gpu_vs_cpu_bf16_sgd());

    CASE(test_matmul_configs());
    CASE(test_matmul_large());
    CASE(test_matmul_bf16_ops());
    CASE(test_matmul_tf32k());

    section("evaluation: the GPU's test loss and accuracy against the CPU's");
    CASE(test_evaluate_synthetic(READABLE, 0));
    CASE(test_evaluate_synthetic(FAST, 0));
    CASE(test_evaluate_synthetic(FAST, 1));
    CASE(test_evaluate_synthetic(FAST, PREC_BF16));
    CASE(test_evaluate(READABLE, 0));
    CASE(test_evaluate(FAST, 0));
    CASE(test_evaluate(FAST, 1));
    CASE(test_evaluate(FAST, PREC_BF16));

    CASE(test_softmax_extremes());
    CASE(test_determinism());

    section("the GPU against PyTorch (tests/ref)");
    const char *refs[] = {"tests/ref/ref_sigmoid.bin", "tests/ref/ref_relu.bin", "tests/ref/ref_tanh.bin"};
    for (int trainer = READABLE; trainer <= FAST; trainer++)
        for (int i = 0; i < 3; i++) ref_check_gpu(refs[i], trainer);
    CASE(test_families_launched());
    return test_exit();
}
