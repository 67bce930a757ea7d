/*
train_mlp_cpu.c: the CPU reference trainer of mlp.cu.

The same model and math as train_mlp.cu, in plain C (OpenMP when the compiler has it), so
that every GPU kernel has a CPU twin to be checked against. Read it top to bottom:
the operations (each with a twin of the same name, minus _cpu, in kernels/), the model,
evaluation, the training loop, main.

The model: L fully connected layers. For layer l with IN = sizes[l], OUT = sizes[l+1]:
    y = act(x · Wᵀ + b)      W is (OUT, IN) row-major, like PyTorch's nn.Linear
with act = sigmoid (the article's y = σ(Wx + b)), relu or tanh on every hidden layer and no
activation on the last one: its outputs are the logits, followed by softmax + cross-entropy,
mean over the batch. Training is mini-batch SGD with momentum and weight decay, with
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

#include "common/args.h"   // Config, the flag table, param_layout
#include "common/log.h"    // settings box, step log, CSV log
#include "common/rng.h"    // xoshiro256** for shuffling, Philox for the initial weights
#include "common/utils.h"  // checked allocation and I/O, die()
#include "data/idx.h"      // MNIST-format IDX reader

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

// x(B,D) = images[idx[b]] / 255 and labels(B) = all_labels[idx[b]]: a float batch from uint8 data
void gather_batch_cpu(real *x, int *labels, const uint8_t *images, const uint8_t *all_labels, const int *idx,
                      int B, int D) {
    for (int b = 0; b < B; b++) {
        const uint8_t *img = images + (size_t)idx[b] * D;
        for (int i = 0; i < D; i++) x[(size_t)b * D + i] = img[i] / (real)255;
        labels[b] = all_labels[idx[b]];
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

void model_cpu_build(ModelCPU *m, const int *sizes, int L, int act, int max_batch) {
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

void model_cpu_free(ModelCPU *m) {
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
void model_cpu_init_params(ModelCPU *m, uint64_t seed) {
    for (int l = 0; l < m->L; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        float bound = 1.0f / sqrtf((float)IN);
        size_t first = m->w_off[l], count = (size_t)OUT * IN + OUT;  // W then b, contiguous
        for (size_t i = first; i < first + count; i++) m->params[i] = uniform_weight(philox_u32(seed, i), bound);
    }
}

// acts[0] and labels hold the batch. Returns the mean loss; leaves the logits in acts[L]
// and, when with_grad, dloss/dlogits in dacts[L].
double model_cpu_forward(ModelCPU *m, int B, int with_grad) {
    for (int l = 0; l < m->L; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        matmul_forward_cpu(m->acts[l + 1], m->acts[l], m->params + m->w_off[l], m->params + m->b_off[l], B, IN, OUT);
        if (l < m->L - 1) activation_forward_cpu(m->acts[l + 1], (size_t)B * OUT, m->act);
    }
    return softmax_xent_forward_backward_cpu(with_grad ? m->dacts[m->L] : NULL, m->losses, m->acts[m->L],
                                             m->labels, B, m->sizes[m->L]);
}

// From dacts[L] down: every layer's weight and bias gradient into grads.
void model_cpu_backward(ModelCPU *m, int B) {
    for (int l = m->L - 1; l >= 0; l--) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        matmul_backward_cpu(l > 0 ? m->dacts[l] : NULL, m->grads + m->w_off[l], m->grads + m->b_off[l],
                            m->dacts[l + 1], m->acts[l], m->params + m->w_off[l], B, IN, OUT);
        if (l > 0) activation_backward_cpu(m->dacts[l], m->acts[l], (size_t)B * IN, m->act);
    }
}

void model_cpu_update(ModelCPU *m, float lr, float mu, float wd) {
    sgd_update_cpu(m->params, m->grads, m->mbuf, m->num_params, lr, mu, wd);
}

// index of the largest logit (the first one on ties)
static int argmax_cpu(const real *z, int C) {
    int best = 0;
    for (int c = 1; c < C; c++)
        if (z[c] > z[best]) best = c;
    return best;
}

// Mean loss and accuracy over a whole dataset, in batches of max_batch.
void evaluate_cpu(ModelCPU *m, const Dataset *ds, double *loss, double *accuracy) {
    int D = m->sizes[0], C = m->sizes[m->L];
    int *idx = (int *)mallocCheck(sizeof(int) * (size_t)m->max_batch);
    double total = 0;
    long correct = 0;
    for (int start = 0; start < ds->n; start += m->max_batch) {
        int B = ds->n - start < m->max_batch ? ds->n - start : m->max_batch;
        for (int b = 0; b < B; b++) idx[b] = start + b;
        gather_batch_cpu(m->acts[0], m->labels, ds->images, ds->labels, idx, B, D);
        total += model_cpu_forward(m, B, 0) * B;
        for (int b = 0; b < B; b++) correct += argmax_cpu(m->acts[m->L] + (size_t)b * C, C) == m->labels[b];
    }
    free(idx);
    *loss = total / ds->n;
    *accuracy = (double)correct / ds->n;
}

// ----------------------------------------------------------------------------
// main: the training loop

#ifndef TESTING
int main(int argc, char **argv) {
    Config cfg;
    config_from_command_line(&cfg, argc, argv, 0);

    Dataset train, test;
    const char *dataset = load_datasets_or_die(&cfg, argv[0], &train, &test);
    int D = cfg.sizes[0], B = cfg.batch;
    int steps_per_epoch = (train.n + B - 1) / B;  // the last batch may be smaller
    if (cfg.max_steps && cfg.max_steps < steps_per_epoch) steps_per_epoch = cfg.max_steps;

    ModelCPU model;
    model_cpu_build(&model, cfg.sizes, cfg.L, cfg.act, B);
    model_cpu_init_params(&model, cfg.seed);

    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    box_rule();
    box_row("train_mlp_cpu", "CPU reference trainer");
    box_rule();
    box_row("dataset", "%s", dataset);
    box_row("data directory (-d)", "%s", cfg.data_dir);
    box_row("train / test images", "%d / %d of %dx%d", train.n, test.n, train.rows, train.cols);
    box_model_rows(&cfg);
    box_row("parameters", "%zu (%.2f MB)", model.num_params, model.num_params * sizeof(real) / 1e6);
    box_row("steps per epoch", "%d", steps_per_epoch);
    box_row("device", "CPU, %d OpenMP thread%s", threads, threads == 1 ? "" : "s");
    box_rule();

    CsvLog log;
    csv_open(&log, cfg.log_path);
    Rng shuffle;
    rng_seed(&shuffle, cfg.seed, 1);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)train.n);
    double test_loss = 0, test_acc = 0, train_seconds = 0;
    for (int epoch = 1; epoch <= cfg.epochs; epoch++) {
        rng_permutation(&shuffle, perm, train.n);
        double epoch_start = now_seconds(), last_log = epoch_start;
        int last_log_step = 0;
        for (int step = 1; step <= steps_per_epoch; step++) {
            int start = (step - 1) * B;
            int bs = train.n - start < B ? train.n - start : B;
            gather_batch_cpu(model.acts[0], model.labels, train.images, train.labels, perm + start, bs, D);
            double loss = model_cpu_forward(&model, bs, 1);
            if (!isfinite(loss))
                die("a smaller learning rate (-l)", "the run diverged: loss is %g at epoch %d step %d", loss, epoch, step);
            model_cpu_backward(&model, bs);
            model_cpu_update(&model, cfg.lr, cfg.momentum, cfg.weight_decay);
            if (step % cfg.log_every == 0 || step == steps_per_epoch) {
                double t = now_seconds();
                double ms = 1e3 * (t - last_log) / (step - last_log_step);
                double sps = (double)B / (ms / 1e3);
                char rate[32];
                format_rate(sps, rate, sizeof(rate));
                printf("epoch %d step %5d/%d | loss %.4f | %.3f ms/step | %s samples/s\n", epoch, step,
                       steps_per_epoch, loss, ms, rate);
                fflush(stdout);
                csv_row(&log, "train", epoch, step, loss, -1, ms, sps, -1);
                last_log = t;
                last_log_step = step;
            }
        }
        double epoch_s = now_seconds() - epoch_start;
        train_seconds += epoch_s;
        long samples = steps_per_epoch == (train.n + B - 1) / B ? train.n : (long)steps_per_epoch * B;
        double t0 = now_seconds();
        evaluate_cpu(&model, &test, &test_loss, &test_acc);
        double eval_ms = 1e3 * (now_seconds() - t0);
        printf("epoch %d done | %.3f s | %.1fk samples/s | test loss %.4f | test accuracy %.2f%%\n", epoch, epoch_s,
               samples / epoch_s / 1e3, test_loss, 100 * test_acc);
        csv_row(&log, "epoch", epoch, steps_per_epoch, -1, -1, 1e3 * epoch_s, samples / epoch_s, -1);
        csv_row(&log, "eval", epoch, steps_per_epoch, test_loss, test_acc, eval_ms, -1, -1);
    }
    csv_row(&log, "summary", cfg.epochs, steps_per_epoch, test_loss, test_acc, 1e3 * train_seconds, -1, -1);
    csv_close(&log);
    printf("final | %s | test accuracy %.2f%% | test loss %.4f | %d epochs | %.3f s/epoch\n", dataset, 100 * test_acc,
           test_loss, cfg.epochs, train_seconds / cfg.epochs);
    free(perm);
    model_cpu_free(&model);
    dataset_free(&train);
    dataset_free(&test);
    return 0;
}
#endif
