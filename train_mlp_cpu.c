/*
train_mlp_cpu.c: the CPU reference trainer of mlp.cu.

The same model and math as train_mlp.cu, in plain C (OpenMP when the compiler has it), so
that every GPU kernel has a CPU twin to be checked against. Read it top to bottom, then
train_mlp.cu beside it: the two files have the same functions in the same order, with the
same names (here with _cpu added): the operations (each the twin of a kernel in kernels/),
the model (model_build, model_init_params, model_forward, model_loss, model_backward,
model_update), evaluation, and main with the training loop.

The model: L fully connected layers. For layer l with IN = sizes[l], OUT = sizes[l+1]:
    y = act(x · Wᵀ + b)      W is (OUT, IN) row-major, like PyTorch's nn.Linear
with act = sigmoid (the y = σ(Wx + b) of the article this project grew from, Lucas de Lima
Nogueira's "Why Deep Learning Models Run Faster on GPUs", Towards Data Science, 2024), relu or
tanh on every hidden layer and no activation on the last one: its outputs are the logits,
followed by softmax + cross-entropy, mean over the batch. Training is mini-batch SGD with momentum and weight decay, with
torch.optim.SGD's semantics, so runs can be compared with PyTorch number for number.

Shapes: B batch, IN/OUT a layer's features, C classes (= sizes[L]).

Build: make train_cpu (or: cc -O3 -fopenmp train_mlp_cpu.c -lz -lm -o train_mlp_cpu)
Run:   ./train_mlp_cpu -m 784,128,10 -a sigmoid -b 64 -l 0.1 -k 0.9 -n 4

The tests compile this file with -DMLP_REAL=double for the finite-difference gradient check,
which is why the arithmetic type is spelled `real` (float everywhere else).
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "run/args.h"   // Config, the flag table
#include "run/log.h"    // settings box, step log, CSV log
#include "common/mlp.h"    // ACT_*, MAX_LAYERS, param_layout
#include "common/rng.h"    // xoshiro256** for shuffling, Philox for the initial weights
#include "run/run.h"    // -r and -c: resuming and checkpoints; Ctrl-C
#include "run/train.h"  // loading the data, the epoch's steps, the settings box
#include "run/use.h"    // -e, -p, -i: using a trained model
#include "common/utils.h"  // checked allocation and I/O, die()
#include "data/dataset.h"  // the datasets: IDX, CIFAR-10, image folders

#ifndef MLP_REAL
#define MLP_REAL float
#endif
typedef MLP_REAL real;

// ----------------------------------------------------------------------------
// the operations: the CPU twins of the kernels in kernels/

// out(B,OUT) = inp(B,IN) · weight(OUT,IN)ᵀ + bias(OUT)
void matmul_forward_cpu(real *out, const real *inp, const real *weight, const real *bias, int B, int IN, int OUT) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++) {
        for (int o = 0; o < OUT; o++) {
            const real *x = inp + (size_t)b * IN;
            const real *w = weight + (size_t)o * IN;
            real sum = 0;
#pragma omp simd reduction(+ : sum)
            for (int i = 0; i < IN; i++) sum += x[i] * w[i];
            out[(size_t)b * OUT + o] = sum + bias[o];
        }
    }
}

// Given dout(B,OUT) = dloss/dout, the three gradients of out = inp · weightᵀ + bias:
//   dinp(B,IN)       = dout · weight        (skipped when dinp is NULL: the first layer's input is data)
//   dweight(OUT,IN)  = doutᵀ · inp
//   dbias(OUT)       = Σ_b dout[b, :]       (the column sum)
// Each is overwritten, not accumulated.
void matmul_backward_cpu(real *dinp, real *dweight, real *dbias, const real *dout, const real *inp,
                         const real *weight, int B, int IN, int OUT) {
    if (dinp) {
#pragma omp parallel for schedule(static)
        for (int b = 0; b < B; b++) {
            real *dx = dinp + (size_t)b * IN;
            for (int i = 0; i < IN; i++) dx[i] = 0;
            for (int o = 0; o < OUT; o++) {
                real d = dout[(size_t)b * OUT + o];
                const real *w = weight + (size_t)o * IN;
#pragma omp simd
                for (int i = 0; i < IN; i++) dx[i] += d * w[i];
            }
        }
    }
#pragma omp parallel for schedule(static)
    for (int o = 0; o < OUT; o++) {
        real *dw = dweight + (size_t)o * IN;
        real db = 0;
        for (int i = 0; i < IN; i++) dw[i] = 0;
        for (int b = 0; b < B; b++) {
            real d = dout[(size_t)b * OUT + o];
            const real *x = inp + (size_t)b * IN;
#pragma omp simd
            for (int i = 0; i < IN; i++) dw[i] += d * x[i];
            db += d;
        }
        dbias[o] = db;
    }
}

// The activations work in place on the (B, OUT) output of a matmul. Their backward
// passes need only the activation's OUTPUT y (not its input), which is what the forward
// pass keeps: σ'(x) = y(1 - y), tanh'(x) = 1 - y², relu'(x) = [y > 0].
void sigmoid_forward_cpu(real *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = 1 / (1 + exp(-x[i]));
}
void sigmoid_backward_cpu(real *dx, const real *y, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] *= y[i] * (1 - y[i]);
}
void relu_forward_cpu(real *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = x[i] > 0 ? x[i] : 0;
}
void relu_backward_cpu(real *dx, const real *y, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] = y[i] > 0 ? dx[i] : 0;
}
void tanh_forward_cpu(real *x, size_t n) {
    for (size_t i = 0; i < n; i++) x[i] = tanh(x[i]);
}
void tanh_backward_cpu(real *dx, const real *y, size_t n) {
    for (size_t i = 0; i < n; i++) dx[i] *= 1 - y[i] * y[i];
}
void activation_forward_cpu(real *x, size_t n, int act) {
    if (act == ACT_SIGMOID) sigmoid_forward_cpu(x, n);
    else if (act == ACT_RELU) relu_forward_cpu(x, n);
    else if (act == ACT_TANH) tanh_forward_cpu(x, n);
}
// dx(n) *= act'(y)
void activation_backward_cpu(real *dx, const real *y, size_t n, int act) {
    if (act == ACT_SIGMOID) sigmoid_backward_cpu(dx, y, n);
    else if (act == ACT_RELU) relu_backward_cpu(dx, y, n);
    else if (act == ACT_TANH) tanh_backward_cpu(dx, y, n);
}

// logits (B,C), labels (B) -> losses (B): -log softmax(logits)[label], computed stably as
// logsumexp(logits) - logits[label]. Returns the mean loss. When dlogits is not NULL it
// gets the gradient of the mean loss: (softmax(logits) - onehot(label)) / B.
double softmax_xent_forward_backward_cpu(real *dlogits, real *losses, const real *logits, const int *labels,
                                         int B, int C) {
    double total = 0;
    for (int b = 0; b < B; b++) {
        const real *z = logits + (size_t)b * C;
        real maxz = z[0];
        for (int c = 1; c < C; c++) maxz = z[c] > maxz ? z[c] : maxz;
        real sum = 0;
        for (int c = 0; c < C; c++) sum += exp(z[c] - maxz);
        real loss = log(sum) + maxz - z[labels[b]];
        if (losses) losses[b] = loss;
        total += loss;
        if (dlogits) {
            for (int c = 0; c < C; c++) {
                real p = exp(z[c] - maxz) / sum;
                dlogits[(size_t)b * C + c] = (p - (c == labels[b] ? 1 : 0)) / B;
            }
        }
    }
    return total / B;
}

// torch.optim.SGD with momentum μ, weight decay λ and dampening 0, over the flat buffer:
//   g = grad + λ·p;   buf = μ·buf + g;   p = p - lr·buf
// PyTorch sets buf = g on the first step; buf starts at zero here, and μ·0 + g is exactly g.
void sgd_update_cpu(real *params, const real *grads, real *mbuf, size_t n, float lr, float mu, float wd) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        real g = grads[i] + (real)wd * params[i];
        real v = (real)mu * mbuf[i] + g;
        mbuf[i] = v;
        params[i] -= (real)lr * v;
    }
}

// x(bs,D) = images[item_b] / 255 and labels(bs) = all_labels[item_b]: a float batch from uint8
// data, where item_b = idx[start + b] (a batch of the epoch's permutation), or start + b when
// idx is NULL (evaluation walks the dataset in order)
void gather_batch_cpu(real *x, int *labels, const uint8_t *images, const uint8_t *all_labels, const int *idx,
                      int start, int bs, int D) {
    for (int b = 0; b < bs; b++) {
        int item = idx ? idx[start + b] : start + b;
        const uint8_t *img = images + (size_t)item * D;
        for (int i = 0; i < D; i++) x[(size_t)b * D + i] = img[i] / (real)255;
        labels[b] = all_labels[item];
    }
}

// ----------------------------------------------------------------------------
// the model

typedef struct {
    int L;                          // weight layers
    int sizes[MAX_LAYERS + 1];      // sizes[0] inputs ... sizes[L] classes
    int act;                        // hidden activation
    int max_batch;                  // activation buffers hold this many rows
    size_t num_params;
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];  // offsets into the flat buffers
    real *params, *grads, *mbuf;    // flat: parameters, their gradients, SGD momentum
    real *acts[MAX_LAYERS + 1];     // acts[0] the input (B, sizes[0]); acts[l+1] layer l's output; acts[L] logits
    real *dacts[MAX_LAYERS + 1];    // dloss/dacts[l], same shapes (dacts[0] unused)
    real *losses;                   // (B) per-example loss
    int *labels;                    // (B)
} ModelCPU;

void model_build_cpu(ModelCPU *m, const int *sizes, int L, int act, int max_batch) {
    memset(m, 0, sizeof(*m));
    m->L = L;
    m->act = act;
    m->max_batch = max_batch;
    memcpy(m->sizes, sizes, sizeof(int) * (size_t)(L + 1));
    m->num_params = param_layout(sizes, L, m->w_off, m->b_off);
    m->params = (real *)callocCheck(m->num_params, sizeof(real));
    m->grads = (real *)callocCheck(m->num_params, sizeof(real));
    m->mbuf = (real *)callocCheck(m->num_params, sizeof(real));
    for (int l = 0; l <= L; l++) {
        m->acts[l] = (real *)callocCheck((size_t)max_batch * sizes[l], sizeof(real));
        m->dacts[l] = (real *)callocCheck((size_t)max_batch * sizes[l], sizeof(real));
    }
    m->losses = (real *)callocCheck((size_t)max_batch, sizeof(real));
    m->labels = (int *)callocCheck((size_t)max_batch, sizeof(int));
}

void model_free_cpu(ModelCPU *m) {
    free(m->params);
    free(m->grads);
    free(m->mbuf);
    for (int l = 0; l <= m->L; l++) {
        free(m->acts[l]);
        free(m->dacts[l]);
    }
    free(m->losses);
    free(m->labels);
}

// nn.Linear's default init: W and b uniform in [-1/sqrt(IN), 1/sqrt(IN)]. Element i of the
// flat buffer is drawn from Philox subsequence i of the seed, as the GPU does with cuRAND.
void model_init_params_cpu(ModelCPU *m, uint64_t seed) {
    for (int l = 0; l < m->L; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        float bound = 1.0f / sqrtf((float)IN);
        size_t first = m->w_off[l], count = (size_t)OUT * IN + OUT;  // W then b, contiguous
        for (size_t i = first; i < first + count; i++) m->params[i] = uniform_weight(philox_u32(seed, i), bound);
    }
}

// acts[0] holds the batch (B rows): every layer's output, the logits in acts[L]
void model_forward_cpu(ModelCPU *m, int B) {
    for (int l = 0; l < m->L; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        matmul_forward_cpu(m->acts[l + 1], m->acts[l], m->params + m->w_off[l], m->params + m->b_off[l], B, IN, OUT);
        if (l < m->L - 1) activation_forward_cpu(m->acts[l + 1], (size_t)B * OUT, m->act);
    }
}

// The loss of the logits in acts[L] against labels: each row's loss in losses, dloss/dlogits
// in dacts[L]. Returns the mean loss.
double model_loss_cpu(ModelCPU *m, int B) {
    return softmax_xent_forward_backward_cpu(m->dacts[m->L], m->losses, m->acts[m->L], m->labels, B, m->sizes[m->L]);
}

// From dacts[L] down: every layer's weight and bias gradient into grads, and each hidden
// layer's gradient (through its activation) into dacts[l].
void model_backward_cpu(ModelCPU *m, int B) {
    for (int l = m->L - 1; l >= 0; l--) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        matmul_backward_cpu(l > 0 ? m->dacts[l] : NULL, m->grads + m->w_off[l], m->grads + m->b_off[l],
                            m->dacts[l + 1], m->acts[l], m->params + m->w_off[l], B, IN, OUT);
        if (l > 0) activation_backward_cpu(m->dacts[l], m->acts[l], (size_t)B * IN, m->act);
    }
}

// one SGD step over the whole flat buffer
void model_update_cpu(ModelCPU *m, float lr, float mu, float wd) {
    sgd_update_cpu(m->params, m->grads, m->mbuf, m->num_params, lr, mu, wd);
}

// index of the largest logit (the first one on ties)
static int argmax_cpu(const real *z, int C) {
    int best = 0;
    for (int c = 1; c < C; c++)
        if (z[c] > z[best]) best = c;
    return best;
}

// Mean loss and accuracy over a whole dataset, in batches of max_batch rows.
void evaluate_cpu(ModelCPU *m, const Dataset *ds, double *loss, double *accuracy) {
    int D = m->sizes[0], C = m->sizes[m->L];
    double total = 0;
    long correct = 0;
    for (long start = 0; start < ds->n; start += m->max_batch) {  // (long: start + max_batch may pass INT_MAX)
        int B = ds->n - start < m->max_batch ? (int)(ds->n - start) : m->max_batch;
        gather_batch_cpu(m->acts[0], m->labels, ds->images, ds->labels, NULL, (int)start, B, D);
        model_forward_cpu(m, B);
        total += softmax_xent_forward_backward_cpu(NULL, m->losses, m->acts[m->L], m->labels, B, C) * B;
        for (int b = 0; b < B; b++) correct += argmax_cpu(m->acts[m->L] + (size_t)b * C, C) == m->labels[b];
    }
    *loss = total / ds->n;
    *accuracy = (double)correct / ds->n;
}

// ----------------------------------------------------------------------------
// main: the training loop

#ifndef TESTING
// the parameters and momentum as floats, for a checkpoint (run/run.h)
static void fetch_state_cpu(void *model, float *params, float *mbuf) {
    const ModelCPU *m = (const ModelCPU *)model;
    for (size_t i = 0; i < m->num_params; i++) {
        params[i] = (float)m->params[i];
        mbuf[i] = (float)m->mbuf[i];
    }
}

// -e and -p: the forward pass on n rows of inputs x, the logits out (run/use.h)
static void forward_logits_cpu(void *model, const float *x, int n, float *logits) {
    ModelCPU *m = (ModelCPU *)model;
    for (size_t i = 0; i < (size_t)n * m->sizes[0]; i++) m->acts[0][i] = x[i];
    model_forward_cpu(m, n);
    for (size_t i = 0; i < (size_t)n * m->sizes[m->L]; i++) logits[i] = (float)m->acts[m->L][i];
}

int main(int argc, char **argv) {
    openmp_spin_briefly(argv);  // OpenMP's waiting threads must not hog a busy machine's cores
    Config cfg;
    config_from_command_line(&cfg, argc, argv, PROG_CPU);
    if (cfg.eval_path[0]) {  // -e: evaluate a checkpoint (or -p: classify pictures with it), and exit
        Use use;
        use_begin(&use, &cfg, PROG_CPU);
        ModelCPU model;
        model_build_cpu(&model, cfg.sizes, cfg.L, cfg.act, USE_BATCH);
        for (size_t i = 0; i < model.num_params; i++) model.params[i] = use.ck.params[i];
        int rc = use_run(&use, &model, forward_logits_cpu);
        model_free_cpu(&model);
        return rc;
    }
    Run run;
    run_begin(&run, &cfg, argc, argv, PROG_CPU);  // -r: the checkpoint, and the settings it holds
    Dataset train, val, test;
    load_datasets_or_die(&cfg, argv[0], &train, &test);
    split_holdout(&train, &val, cfg.holdout, cfg.seed);  // -H: a validation set
    int D = cfg.sizes[0], B = cfg.batch;
    EpochPlan plan = epoch_plan(train.n, B, cfg.max_steps);

    ModelCPU model;
    model_build_cpu(&model, cfg.sizes, cfg.L, cfg.act, B);
    const float *mbuf, *params = run_start(&run, &train, &model, fetch_state_cpu, model.num_params, &mbuf);
    if (params) {  // resuming: the checkpoint's weights and momentum
        for (size_t i = 0; i < model.num_params; i++) model.params[i] = params[i], model.mbuf[i] = mbuf[i];
    } else {
        model_init_params_cpu(&model, cfg.seed);
    }

    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    char device[64];
    snprintf(device, sizeof(device), "CPU, %d thread%s", threads, threads == 1 ? "" : "s");
    box_settings("train_mlp_cpu", "CPU reference trainer", &cfg, &train, &test, model.num_params, plan.steps);
    box_row("device", "%s (OpenMP)", device);
    box_rule();

    RunLog log;
    long steps_to_do = (long)(cfg.epochs - run.first_epoch + 1) * plan.steps - (run.first_step - 1);
    run_log_open(&log, &cfg, PROG_CPU, plan.steps, train.num_classes, steps_to_do, (long)run.steps_total);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)train.n);
    double loss = 0, acc = 0, train_seconds = 0;
    int epochs_run = 0;
    for (int epoch = run.first_epoch; epoch <= cfg.epochs; epoch++) {
        run_epoch(&run, perm, train.n);
        int first = run_first_step(&run, epoch);
        double epoch_start = now_seconds(), last_log = epoch_start;
        int last_log_step = first - 1;
        long samples = 0;
        for (int step = first; step <= plan.steps; step++) {
            int bs = epoch_batch_size(&plan, step - 1, B);
            gather_batch_cpu(model.acts[0], model.labels, train.images, train.labels, perm, (step - 1) * B, bs, D);
            model_forward_cpu(&model, bs);
            double step_loss = model_loss_cpu(&model, bs);
            model_backward_cpu(&model, bs);
            model_update_cpu(&model, cfg.lr, cfg.momentum, cfg.weight_decay);
            samples += bs;
            log_losses(&log, step_loss, 1);
            if (step % cfg.log_every == 0 || step == plan.steps) {
                double t = now_seconds();
                log_step(&log, epoch, step, 1e3 * (t - last_log) / (step - last_log_step));  // (exits if diverged)
                last_log = t;
                last_log_step = step;
            }
            run_after_steps(&run, &log, epoch, step, plan.steps, 1);  // Ctrl-C: checkpoint, exit 130
        }
        double epoch_s = now_seconds() - epoch_start;
        train_seconds += epoch_s;
        epochs_run++;
        double t0 = now_seconds();
        evaluate_cpu(&model, cfg.holdout > 0 ? &val : &test, &loss, &acc);
        log_epoch(&log, epoch, epoch_s, samples, cfg.holdout > 0 ? "val" : "test", loss, acc,
                  1e3 * (now_seconds() - t0));
        run_end_of_epoch(&run, epoch);  // -c: the checkpoint
    }
    if (cfg.holdout > 0 || epochs_run == 0) evaluate_cpu(&model, &test, &loss, &acc);  // the test set, at the end
    log_final(&log, &cfg, train.name, loss, acc, train_seconds, epochs_run, -1, device);
    run_finish(&run);
    free(perm);
    model_free_cpu(&model);
    dataset_free(&train);
    dataset_free(&val);
    dataset_free(&test);
    return 0;
}
#endif
