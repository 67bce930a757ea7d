/*
test_mlp: the GPU diffed against the CPU, step by step and tensor by tensor, and both against
PyTorch. This is the promise of mlp.cu: a reader can see that every kernel computes what
its CPU twin computes.

For each case (activation x architecture x kernel path: simple, fast, persistent, TF32), both models start from the same
weights (the GPU's cuRAND init, copied into the CPU model), see the same batches (the GPU
gathers them from a uint8 dataset on the device through a permutation, the CPU from the
same bytes through the same permutation), and take 10 SGD steps each, independently. After
every step the logits, the loss, every layer's weight and bias gradient, and every layer's
weight and bias after the update are compared. Each tensor gets one line with the worst max
absolute and max relative difference over the steps, and OK or NOT OK.

Then: two GPU runs from the same seed must give bitwise identical weights (no atomics); the
graph-replayed fast path must equal the same kernels launched one by one, bit for bit (and
the persistent kernel's one-launch run its step-by-step launches); and
the GPU must match the PyTorch reference files in dev/ref/.

Without a GPU the GPU checks are skipped (and counted as skipped) and the CPU-against-PyTorch
checks still run. Exit code 1 on any NOT OK. Flags: -v prints every step.
*/
#define TESTING
#include "train_mlp.cu"
#include "train_mlp_cpu.c"
#include "tests/check.h"
#include "tests/ref_cpu.h"

static int verbose = 0;
static int sanitizer_subset = 0;  // -s: a few cases covering every kernel, for compute-sanitizer

// ----------------------------------------------------------------------------
// tolerances, per tensor and per kernel path
//
// A difference passes when |gpu - cpu| <= rtol·|cpu| + atol·max|cpu|: a relative bound, plus
// an absolute floor scaled by the tensor's largest value, for the entries that cancel to ~0.
// FP32 (simple and fast kernels): both sides round every product and sum to float32, in a
// different order (the CPU sums 8 lanes at a time, the GPU per thread or per tile, split-K
// adds partial sums), so each value carries ~sqrt(K)·6e-8 relative error, K <= 784 terms:
// ~2e-6. Over 10 independent steps the two trajectories drift apart by a few times that.
//   logits, loss: rtol 1e-4, atol 1e-5   ~10x the drift; the loss is a mean of logsumexps
//   gradients:    rtol 1e-3, atol 1e-4   a gradient entry is a sum of B terms of both signs;
//                                        cancellation makes small entries' relative error
//                                        large, the atol (relative to the largest entry) covers them
//   weights:      rtol 1e-5, atol 1e-5   the update lr·buf is ~1e-3 of a weight, so the
//                                        gradient differences barely reach the weights
// The wide model (784,1024,1024,10, B=256) runs with tanh in the FP32 cases: with relu it
// has 500k relu units a step, and about once in 10 steps one of them lands within float32
// rounding of zero, on for one side and off for the other (both right); that unit's whole
// row of dW then differs by its own size (seen: the persistent path at step 9, rel norm
// 4e-3 on dW1, ~1e-6 at every other step, even with both sides starting each step from the
// same state). The smaller shapes have 100x fewer units, so relu is tested there; the wide
// relu model is tested under TF32's norm bounds below, and trained by make bench.
// TF32 (-x 1): the tensor cores round each input to a 10-bit mantissa (relative 2^-11 ~
// 5e-4 per product), ~250x the FP32 rounding. Two consequences shape its test:
// - TF32 is not meant to follow the FP32 trajectory step after step, so the CPU is
//   re-synchronised to the GPU's weights and momentum before every step, and each step's
//   error is measured alone.
// - Elementwise bounds do not fit it: where a relu unit sits within TF32's rounding of zero,
//   the two sides disagree on whether it is on, and that unit's whole gradient row differs
//   by its own size (seen at 784,1024,1024,10: a few rows of dW0 off by ~6% of max|dW0|).
//   So TF32 is held to the relative norm ||gpu - cpu|| / ||cpu|| of each tensor instead:
//   logits, loss: 5e-3   one TF32 product is ~3e-4 (sqrt(K)·2^-11 averaged over the sum)
//   gradients:    5e-2   two or three TF32 products deep, plus the flipped relu rows
//   weights:      1e-4   the update is lr·buf ~1e-3 of a weight, so the gradient's error
//                        reaches the weights scaled down by ~1e-3
// Norms hide a single wrong entry, but a planted bug (missing 1/B, shifted bias row) still
// moves whole tensors by their own size, far past 5e-2.
// A real bug (a missing 1/B, a bias gradient off by a row, a wrong derivative) moves some
// entries by their own size: relative error ~1, far past every bound.
typedef struct {
    double rtol, atol;  // elementwise: |gpu - cpu| <= rtol·|cpu| + atol·max|cpu|
    double norm;        // if > 0, instead: ||gpu - cpu|| / ||cpu|| <= norm
} Tol;
typedef struct {
    Tol logits, loss, grads, weights;
} Tolerances;
static const Tolerances TOL_FP32 = {{1e-4, 1e-5, 0}, {1e-4, 1e-5, 0}, {1e-3, 1e-4, 0}, {1e-5, 1e-5, 0}};
static const Tolerances TOL_TF32 = {{0, 0, 5e-3}, {0, 0, 5e-3}, {0, 0, 5e-2}, {0, 0, 1e-4}};

// ----------------------------------------------------------------------------
// comparing tensors over many steps

#define MAX_TENSORS (2 + 4 * MAX_LAYERS)
typedef struct {
    char name[48];
    double max_abs, max_rel, scale, rel_norm;  // scale: the largest |cpu| value seen
    int worst_step, ok;
} TensorStat;
typedef struct {
    TensorStat t[MAX_TENSORS];
    int n;
} Report;

static TensorStat *report_get(Report *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->t[i].name, name) == 0) return &r->t[i];
    TensorStat *s = &r->t[r->n++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->ok = 1;
    return s;
}

// one comparison of a tensor at one step, folded into the report
static void compare_step(Report *r, const char *name, int step, const float *gpu, const float *cpu, size_t n, Tol tol) {
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(cpu[i]));
    double max_abs = 0, max_rel = 0, diff2 = 0, ref2 = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)gpu[i] - cpu[i]);
        if (tol.norm == 0 && !(d <= tol.rtol * fabs(cpu[i]) + tol.atol * scale)) ok = 0;  // NaN fails
        if (!(d <= max_abs)) max_abs = d;
        if (fabs(cpu[i]) > 1e-3 * scale) max_rel = fmax(max_rel, d / fabs(cpu[i]));
        diff2 += d * d;
        ref2 += (double)cpu[i] * cpu[i];
    }
    double rel_norm = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    if (tol.norm > 0 && !(rel_norm <= tol.norm)) ok = 0;
    TensorStat *s = report_get(r, name);
    if (max_abs > s->max_abs || !ok) s->worst_step = step;
    s->max_abs = fmax(s->max_abs, max_abs);
    s->max_rel = fmax(s->max_rel, max_rel);
    s->scale = fmax(s->scale, scale);
    s->rel_norm = fmax(s->rel_norm, rel_norm);
    s->ok &= ok;
    if (verbose)
        printf("    step %2d %-22s max abs %.2e  max rel %.2e  rel norm %.2e  %s\n", step, name, max_abs, max_rel,
               rel_norm, ok ? "OK" : "NOT OK");
}

static void report_print(const Report *r, const Tolerances *tol) {
    for (int i = 0; i < r->n; i++) {
        const TensorStat *s = &r->t[i];
        const Tol *t = strstr(s->name, "logits") ? &tol->logits
                       : strstr(s->name, "loss")  ? &tol->loss
                       : s->name[0] == 'd'        ? &tol->grads
                                                  : &tol->weights;
        char bound[64];
        if (t->norm > 0) snprintf(bound, sizeof(bound), "rel norm <= %.0e", t->norm);
        else snprintf(bound, sizeof(bound), "rtol %.0e, atol %.0e x max", t->rtol, t->atol);
        printf("  %-6s %-22s max abs %.2e  max rel %.2e  rel norm %.2e  max |v| %.2e  (worst step %d; %s)\n",
               s->ok ? "OK" : "NOT OK", s->name, s->max_abs, s->max_rel, s->rel_norm, s->scale, s->worst_step, bound);
        if (s->ok) checks_passed++;
        else checks_failed++;
    }
    fflush(stdout);
}

// each layer's weight and bias of a flat buffer, by name ("dW1", "b0", ...)
static void compare_layers(Report *r, const char *prefix, int step, const float *gpu, const float *cpu, const int *sizes,
                           int L, Tol tol) {
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    param_layout(sizes, L, w_off, b_off);
    for (int l = 0; l < L; l++) {
        char name[48];
        snprintf(name, sizeof(name), "%sW%d (%dx%d)", prefix, l, sizes[l + 1], sizes[l]);
        compare_step(r, name, step, gpu + w_off[l], cpu + w_off[l], (size_t)sizes[l + 1] * sizes[l], tol);
        snprintf(name, sizeof(name), "%sb%d (%d)", prefix, l, sizes[l + 1]);
        compare_step(r, name, step, gpu + b_off[l], cpu + b_off[l], (size_t)sizes[l + 1], tol);
    }
}

// ----------------------------------------------------------------------------
// a synthetic dataset: random bytes, random labels (the same on both sides)

typedef struct {
    uint8_t *images, *labels;
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

static void upload_data(DeviceData *d, const HostData *h) {
    Dataset ds;
    memset(&ds, 0, sizeof(ds));
    ds.images = h->images;
    ds.labels = h->labels;
    ds.n = h->n;
    ds.rows = 1;
    ds.cols = h->D;
    device_data_upload(d, &ds);
}

static void download(float *host, const float *dev, size_t n) {
    cudaCheck(cudaMemcpy(host, dev, n * sizeof(float), cudaMemcpyDeviceToHost));
}

// ----------------------------------------------------------------------------
// the GPU against the CPU, 10 steps

#define STEPS 10
static const float LR = 0.1f, MOMENTUM = 0.9f, WEIGHT_DECAY = 5e-4f;

static const char *const PATH_NAMES[] = {"simple kernels", "fast kernels", "persistent kernel"};

// path: PATH_SIMPLE and PATH_GRAPH run train_step's kernels one step at a time (the graph
// replay itself is checked bit for bit in test_determinism); PATH_PERSISTENT launches the
// persistent kernel for one step at a time.
static void gpu_vs_cpu(const int *sizes, int L, int act, int B, int path, int tf32, int resync) {
    char shape[96];
    size_t k = 0;
    for (int l = 0; l <= L; l++) k += (size_t)snprintf(shape + k, sizeof(shape) - k, l ? ",%d" : "%d", sizes[l]);
    printf("\n-- %s %s, B=%d, %s%s, %d steps%s (lr %g, momentum %g, weight decay %g)\n", shape, ACT_NAMES[act], B,
           PATH_NAMES[path], tf32 ? " + TF32" : "", STEPS, resync ? " from a common state each" : "", LR, MOMENTUM,
           WEIGHT_DECAY);
    int C = sizes[L], D = sizes[0];
    HostData h = make_data(B * STEPS, D, C, 1000 + B);
    DeviceData d;
    upload_data(&d, &h);
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    Model m;
    model_build(&m, sizes, L, act, B, B, path, tf32, h.n, STEPS);
    model_init_params(&m, 1337, stream);
    ModelCPU c;
    model_cpu_build(&c, sizes, L, act, B);
    model_cpu_init_params(&c, 1337);
    float *gpu_init = (float *)mallocCheck(m.num_params * sizeof(float));
    download(gpu_init, m.params, m.num_params);
    check(memcmp(gpu_init, c.params, m.num_params * sizeof(float)) == 0,
          "initial weights: cuRAND's Philox on the GPU and common/rng.h's on the CPU agree bit for bit");
    memcpy(c.params, gpu_init, m.num_params * sizeof(float));  // from here on, the GPU's weights on both
    free(gpu_init);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)h.n);
    Rng rng;
    rng_seed(&rng, 5, 1);
    rng_permutation(&rng, perm, h.n);
    cudaCheck(cudaMemcpy(m.perm, perm, sizeof(int) * (size_t)h.n, cudaMemcpyHostToDevice));
    Config cfg;
    config_defaults(&cfg, 1);
    cfg.lr = LR;
    cfg.momentum = MOMENTUM;
    cfg.weight_decay = WEIGHT_DECAY;

    size_t nlogits = (size_t)B * C;
    float *logits = (float *)mallocCheck(nlogits * sizeof(float));
    float *grads = (float *)mallocCheck(m.num_params * sizeof(float));
    float *params = (float *)mallocCheck(m.num_params * sizeof(float));
    const Tolerances *tol = tf32 ? &TOL_TF32 : &TOL_FP32;
    Report rep;
    rep.n = 0;
    for (int t = 0; t < STEPS; t++) {
        if (resync && t > 0) {  // one step at a time from the GPU's state (see the tolerances)
            download(c.params, m.params, m.num_params);
            download(c.mbuf, m.mbuf, m.num_params);
        }
        if (path == PATH_PERSISTENT) run_steps(&m, &d, t, 1, B, STEPS, &cfg, stream);
        else train_step(&m, &d, B, &cfg, stream);
        float loss;
        cudaCheck(cudaMemcpyAsync(&loss, m.step_losses + t, sizeof(float), cudaMemcpyDeviceToHost, stream));
        cudaCheck(cudaStreamSynchronize(stream));
        download(logits, m.acts[L], nlogits);
        download(grads, m.grads, m.num_params);
        download(params, m.params, m.num_params);

        gather_batch_cpu(c.acts[0], c.labels, h.images, h.labels, perm + t * B, B, D);
        if (t == 0) {  // the batch itself: the same floats (pixel / 255, a division on both sides; with TF32
                       // rounded by cvt.rna on the GPU, by common.cuh's integer twin here)
            float *batch = (float *)mallocCheck((size_t)B * D * sizeof(float));
            download(batch, m.acts[0], (size_t)B * D);
            size_t differ = 0;
            for (size_t i = 0; i < (size_t)B * D; i++) {
                float want = (float)c.acts[0][i];
                differ += batch[i] != (tf32 ? round_tf32(want) : want);
            }
            check(differ == 0, "the first batch on the GPU equals the CPU's bit for bit%s (%zu of %zu differ)",
                  tf32 ? ", rounded to TF32" : "", differ, (size_t)B * D);
            free(batch);
        }
        float cpu_loss = (float)model_cpu_forward(&c, B, 1);
        model_cpu_backward(&c, B);
        model_cpu_update(&c, LR, MOMENTUM, WEIGHT_DECAY);

        compare_step(&rep, "logits", t, logits, c.acts[L], nlogits, tol->logits);
        compare_step(&rep, "loss", t, &loss, &cpu_loss, 1, tol->loss);
        compare_layers(&rep, "d", t, grads, c.grads, sizes, L, tol->grads);
        compare_layers(&rep, "updated ", t, params, c.params, sizes, L, tol->weights);
        if (tf32 && t == STEPS - 1) {  // the forward products' copy of the weights: round_tf32 of the FP32 ones
            float *rounded = (float *)mallocCheck(m.num_params * sizeof(float));
            download(rounded, m.params_tf32, m.num_params);
            size_t differ = 0, n = 0;
            for (int l = 0; l < L; l++)
                for (size_t i = m.w_off[l]; i < m.w_off[l] + (size_t)sizes[l + 1] * sizes[l]; i++, n++)
                    differ += rounded[i] != round_tf32(params[i]);
            check(differ == 0, "after %d steps the TF32 copy of the weights is the FP32 weights rounded, bit for bit "
                  "(%zu of %zu differ)", STEPS, differ, n);
            free(rounded);
            for (int l = 1; l < L; l++) {  // the hidden layers' outputs are stored as TF32 values
                size_t na = (size_t)B * sizes[l], odd = 0;
                float *a = (float *)mallocCheck(na * sizeof(float));
                download(a, m.acts[l], na);
                for (size_t i = 0; i < na; i++) odd += a[i] != round_tf32(a[i]);
                check(odd == 0, "hidden layer %d's output is stored rounded to TF32 (%zu of %zu are not)", l, odd, na);
                free(a);
            }
        }
    }
    report_print(&rep, tol);
    free(logits);
    free(grads);
    free(params);
    free(perm);
    free(h.images);
    free(h.labels);
    model_cpu_free(&c);
    model_free(&m);
    device_data_free(&d);
    cudaCheck(cudaStreamDestroy(stream));
}

// ----------------------------------------------------------------------------
// determinism: the same seed twice gives the same bits; graphs give the same bits as launches

// Trains `steps` steps from the seed and returns the final weights (malloc'ed). With
// one_run, path 1 captures all steps into one graph and path 2 runs them in one launch;
// else each step is launched on its own.
static float *train_weights(const int *sizes, int L, int act, int B, int path, int one_run, int steps) {
    int C = sizes[L], D = sizes[0];
    HostData h = make_data(B * steps, D, C, 77);
    DeviceData d;
    upload_data(&d, &h);
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    Model m;
    model_build(&m, sizes, L, act, B, B, path, 0, h.n, steps);
    model_init_params(&m, 2024, stream);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)h.n);
    Rng rng;
    rng_seed(&rng, 2024, 1);
    rng_permutation(&rng, perm, h.n);
    cudaCheck(cudaMemcpy(m.perm, perm, sizeof(int) * (size_t)h.n, cudaMemcpyHostToDevice));
    Config cfg;
    config_defaults(&cfg, 1);
    if (one_run) {
        run_steps(&m, &d, 0, steps, B, steps, &cfg, stream);
        free_graphs();
    } else if (path == PATH_PERSISTENT) {
        for (int t = 0; t < steps; t++) run_steps(&m, &d, t, 1, B, steps, &cfg, stream);
    } else {
        for (int t = 0; t < steps; t++) train_step(&m, &d, B, &cfg, stream);
    }
    cudaCheck(cudaStreamSynchronize(stream));
    float *w = (float *)mallocCheck(m.num_params * sizeof(float));
    download(w, m.params, m.num_params);
    free(perm);
    free(h.images);
    free(h.labels);
    model_free(&m);
    device_data_free(&d);
    cudaCheck(cudaStreamDestroy(stream));
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
    char what[128];
    for (int path = 0; path <= 2; path++) {
        snprintf(what, sizeof(what), "%s: two runs from the same seed give identical weights", PATH_NAMES[path]);
        check_identical(train_weights(sizes, 3, ACT_SIGMOID, 33, path, path > 0, 10),
                        train_weights(sizes, 3, ACT_SIGMOID, 33, path, path > 0, 10), n, what);
    }
    check_identical(train_weights(sizes, 3, ACT_RELU, 33, PATH_GRAPH, 0, 10),
                    train_weights(sizes, 3, ACT_RELU, 33, PATH_GRAPH, 1, 10), n,
                    "fast kernels: a CUDA graph replay gives the same bits as launching the kernels one by one");
    check_identical(train_weights(sizes, 3, ACT_TANH, 33, PATH_PERSISTENT, 0, 10),
                    train_weights(sizes, 3, ACT_TANH, 33, PATH_PERSISTENT, 1, 10), n,
                    "persistent kernel: 10 steps in one launch give the same bits as 10 launches of one step");
}

// ----------------------------------------------------------------------------
// the GPU against PyTorch

static void ref_check_gpu(const char *path, int fast) {  // simple or fast kernels
    RefFile r;
    char err[512];
    if (ref_load(path, &r, err, sizeof(err)) != 0) {
        check(0, "%s", err);
        return;
    }
    printf("\n-- %s against %s, %s kernels\n", path, ACT_NAMES[r.act], fast ? "fast" : "simple");
    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    Model m;
    model_build(&m, r.sizes, r.L, r.act, r.B, r.B, fast ? PATH_GRAPH : PATH_SIMPLE, 0, 1, r.nsteps);
    cudaCheck(cudaMemcpy(m.params, r.params0, sizeof(float) * (size_t)r.nparams, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(m.acts[0], r.inputs, sizeof(float) * (size_t)r.B * r.sizes[0], cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(m.labels, r.labels, sizeof(int) * (size_t)r.B, cudaMemcpyHostToDevice));
    size_t nout = (size_t)r.B * r.sizes[r.L];
    float *logits = (float *)mallocCheck(nout * sizeof(float));
    float *grads = (float *)mallocCheck((size_t)r.nparams * sizeof(float));
    float *params = (float *)mallocCheck((size_t)r.nparams * sizeof(float));
    Report rep;
    rep.n = 0;
    for (int t = 0; t < r.nsteps; t++) {
        train_step_on_batch(&m, r.B, r.lr, r.momentum, r.weight_decay, stream);
        float loss;
        cudaCheck(cudaMemcpyAsync(&loss, m.step_losses + t, sizeof(float), cudaMemcpyDeviceToHost, stream));
        cudaCheck(cudaStreamSynchronize(stream));
        download(logits, m.acts[r.L], nout);
        download(grads, m.grads, (size_t)r.nparams);
        download(params, m.params, (size_t)r.nparams);
        // the same FP32 tolerances as against the CPU: PyTorch is one more float32 summation order
        compare_step(&rep, "logits", t, logits, r.logits + t * nout, nout, TOL_FP32.logits);
        compare_step(&rep, "loss", t, &loss, r.loss + t, 1, TOL_FP32.loss);
        compare_layers(&rep, "d", t, grads, r.grads + (size_t)t * r.nparams, r.sizes, r.L, TOL_FP32.grads);
        compare_layers(&rep, "updated ", t, params, r.params + (size_t)t * r.nparams, r.sizes, r.L, TOL_FP32.weights);
    }
    report_print(&rep, &TOL_FP32);
    free(logits);
    free(grads);
    free(params);
    model_free(&m);
    ref_free(&r);
    cudaCheck(cudaStreamDestroy(stream));
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-v") == 0) verbose = 1;
        else if (strcmp(argv[i], "-s") == 0) sanitizer_subset = 1;
        else {
            fprintf(stderr, "usage: %s [-v] [-s]\n  -v  print every step\n  -s  only the cases a sanitizer needs: "
                            "every kernel once, on the small and odd shapes\n", argv[0]);
            return 2;
        }
    }
    const char *refs[] = {"dev/ref/ref_sigmoid.bin", "dev/ref/ref_relu.bin", "dev/ref/ref_tanh.bin"};
    section("the CPU reference against PyTorch (dev/ref)");
    for (int i = 0; i < 3; i++) ref_check_cpu(refs[i]);

    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        section("GPU checks");
        skip("no CUDA GPU here (%s): the GPU-against-CPU, determinism and GPU-against-PyTorch checks are skipped",
             err != cudaSuccess ? cudaGetErrorString(err) : "no device");
        return test_exit();
    }
    cudaDeviceProp prop = require_gpu();
    printf("\nGPU: %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);

    section("the GPU against the CPU, step by step");
    const int small[] = {784, 128, 10};
    const int odd[] = {784, 100, 37, 10};   // widths that are no multiple of any tile
    const int wide[] = {784, 1024, 1024, 10};
    const int many[] = {784, 64, 40};       // more classes than the fused head takes (kernels/head.cuh)
    const int linear[] = {784, 10};         // one layer: the fused head straight on the data
    if (sanitizer_subset) {  // every kernel and path once, small enough for memcheck and racecheck
        for (int path = 0; path <= 2; path++) gpu_vs_cpu(odd, 3, path == 1 ? ACT_RELU : ACT_TANH, 33, path, 0, 0);
        gpu_vs_cpu(many, 2, ACT_SIGMOID, 33, PATH_GRAPH, 0, 0);
        gpu_vs_cpu(small, 2, ACT_SIGMOID, 64, PATH_PERSISTENT, 0, 0);
        gpu_vs_cpu(odd, 3, ACT_SIGMOID, 33, PATH_GRAPH, 1, 1);
        test_determinism();
        return test_exit();
    }
    for (int path = 0; path <= 2; path++) {
        for (int act = 0; act < 3; act++) {
            gpu_vs_cpu(small, 2, act, 64, path, 0, 0);
            gpu_vs_cpu(odd, 3, act, 33, path, 0, 0);
        }
        gpu_vs_cpu(small, 2, ACT_SIGMOID, 1, path, 0, 0);  // a batch of one
        gpu_vs_cpu(wide, 3, ACT_TANH, 256, path, 0, 0);    // tanh: see "The wide model" above
    }
    gpu_vs_cpu(many, 2, ACT_RELU, 33, PATH_GRAPH, 0, 0);  // the fast path without the fused head
    gpu_vs_cpu(linear, 1, ACT_SIGMOID, 33, PATH_GRAPH, 0, 0);  // softmax regression: no hidden layer
    // the TF32 tensor-core path, with its looser tolerances
    gpu_vs_cpu(small, 2, ACT_SIGMOID, 64, PATH_GRAPH, 1, 1);
    gpu_vs_cpu(odd, 3, ACT_TANH, 33, PATH_GRAPH, 1, 1);
    gpu_vs_cpu(wide, 3, ACT_RELU, 256, PATH_GRAPH, 1, 1);

    test_determinism();

    section("the GPU against PyTorch (dev/ref)");
    for (int fast = 0; fast <= 1; fast++)
        for (int i = 0; i < 3; i++) ref_check_gpu(refs[i], fast);
    return test_exit();
}
