/*
train_mlp.cu: training an MLP on the GPU, written out. What `.to("cuda")` actually does: the question
of Lucas de Lima Nogueira's "Why Deep Learning Models Run Faster on GPUs" (Towards Data Science, 2024).

Read train_mlp_cpu.c first: this file has the same functions in the same order, with the
same names (there with _cpu added), and does the same arithmetic. The difference is where
it happens. Here every array of the model lives in GPU memory, and every operation on it is
a kernel from kernels/, launched from the host:

    kernels/data.cuh          the dataset, copied to the GPU once; each batch gathered there
    kernels/matmul.cuh        y = x · Wᵀ + b, and its three gradients
    kernels/activation.cuh    y = σ(y) (or relu, tanh), and dx *= σ'(y)
    kernels/softmax_xent.cuh  the loss and dlogits = (softmax - onehot) / B
    kernels/sgd.cuh           p -= lr · (μ·buf + grad + λ·p), over all parameters at once

Each kernel is the simplest correct one: one thread per output, one launch per operation,
all on the default stream, so each kernel starts when the one before it has finished. The
host does not wait for the GPU inside the training loop: a launch only queues the kernel.
It waits only where it needs a number back (the loss, when it prints a log line; the test
accuracy, after an epoch). train_mlp_fast.cu is the same trainer made fast (kernels/fast/).

Shapes: B batch, IN/OUT a layer's features, C classes, L layers.
Build: make train      Run: ./train_mlp  (./train_mlp -h lists the flags)
Checked against train_mlp_cpu.c, step by step and tensor by tensor, by test_mlp.cu.
*/
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/args.h"             // Config, the flag table shared by the trainers
#include "run/log.h"              // settings box, step log, CSV log
#include "common/mlp.h"              // ACT_*, MAX_LAYERS, param_layout
#include "common/rng.h"              // the epoch shuffle: the same one the CPU trainer draws
#include "run/run.h"              // -r and -c: resuming and checkpoints; Ctrl-C
#include "run/train.h"            // loading the data, the epoch's steps, the settings box
#include "run/use.h"              // -e, -p, -i: using a trained model
#include "common/utils.h"            // checked host allocation and I/O
#include "data/dataset.h"            // the datasets: IDX, CIFAR-10, image folders
#include "kernels/activation.cuh"    // activation_forward, activation_backward
#include "kernels/common.cuh"        // cudaCheck, cudaMallocCheck, require_gpu
#include "kernels/data.cuh"          // DeviceData, gather_batch, init_uniform
#include "kernels/matmul.cuh"        // matmul_forward, matmul_backward
#include "kernels/sgd.cuh"           // sgd_update
#include "kernels/softmax_xent.cuh"  // softmax_xent_forward_backward, softmax_xent_eval
#include "kernels/trace.cuh"         // -T: one step's kernels, as the GPU runs them

#define EVAL_BATCH 1024  // evaluation runs the test set in batches of this many rows (or B if larger)

// ----------------------------------------------------------------------------
// the model on the device

// The same fields as ModelCPU; every pointer here is a GPU address (from cudaMalloc), which
// the host may pass to kernels but must never dereference.
typedef struct {
    int L;                         // weight layers
    int sizes[MAX_LAYERS + 1];     // sizes[0] inputs ... sizes[L] classes
    int act;                       // hidden activation
    int max_batch;                 // activation buffers hold this many rows
    size_t num_params;
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];  // offsets into the flat buffers
    float *params, *grads, *mbuf;  // flat: parameters, their gradients, SGD momentum
    float *acts[MAX_LAYERS + 1];   // acts[0] the input (B, sizes[0]); acts[l+1] layer l's output; acts[L] logits
    float *dacts[MAX_LAYERS + 1];  // dloss/dacts[l], same shapes (dacts[0] unused)
    float *losses;                 // (B) per-example loss
    int *labels;                   // (B)
    float *correct;                // (B) evaluation: 1 where the prediction is right
    double *sums;                  // (2) evaluation: a batch's total loss and number right
} Model;

void model_build(Model *m, const int *sizes, int L, int act, int max_batch) {
    memset(m, 0, sizeof(*m));
    m->L = L;
    m->act = act;
    m->max_batch = max_batch;
    memcpy(m->sizes, sizes, sizeof(int) * (size_t)(L + 1));
    m->num_params = param_layout(sizes, L, m->w_off, m->b_off);
    size_t pbytes = m->num_params * sizeof(float);
    m->params = (float *)cudaMallocCheck(pbytes, "the parameters");
    m->grads = (float *)cudaMallocCheck(pbytes, "the gradients");
    m->mbuf = (float *)cudaMallocCheck(pbytes, "the momentum buffer");
    cudaCheck(cudaMemset(m->mbuf, 0, pbytes));  // momentum starts at zero, like ModelCPU's calloc
    for (int l = 0; l <= L; l++) {
        size_t bytes = (size_t)max_batch * sizes[l] * sizeof(float);
        m->acts[l] = (float *)cudaMallocCheck(bytes, "the activations");
        m->dacts[l] = (float *)cudaMallocCheck(bytes, "the activation gradients");
    }
    m->losses = (float *)cudaMallocCheck((size_t)max_batch * sizeof(float), "the losses");
    m->labels = (int *)cudaMallocCheck((size_t)max_batch * sizeof(int), "the labels");
    m->correct = (float *)cudaMallocCheck((size_t)max_batch * sizeof(float), "the evaluation results");
    m->sums = (double *)cudaMallocCheck(2 * sizeof(double), "the evaluation sums");
}

void model_free(Model *m) {
    cudaCheck(cudaFree(m->params));
    cudaCheck(cudaFree(m->grads));
    cudaCheck(cudaFree(m->mbuf));
    for (int l = 0; l <= m->L; l++) {
        cudaCheck(cudaFree(m->acts[l]));
        cudaCheck(cudaFree(m->dacts[l]));
    }
    cudaCheck(cudaFree(m->losses));
    cudaCheck(cudaFree(m->labels));
    cudaCheck(cudaFree(m->correct));
    cudaCheck(cudaFree(m->sums));
}

// nn.Linear's init, W and b uniform in [-1/sqrt(IN), 1/sqrt(IN)], drawn on the device by cuRAND's
// Philox generator: the very numbers model_init_params_cpu computes, bit for bit.
void model_init_params(Model *m, uint64_t seed) {
    for (int l = 0; l < m->L; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        float bound = 1.0f / sqrtf((float)IN);
        init_uniform(m->params + m->w_off[l], (size_t)OUT * IN + OUT, bound, seed, m->w_off[l]);  // W then b
    }
}

// acts[0] holds the batch (B rows): every layer's output, the logits in acts[L]
void model_forward(Model *m, int B) {
    for (int l = 0; l < m->L; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        matmul_forward(m->acts[l + 1], m->acts[l], m->params + m->w_off[l], m->params + m->b_off[l], B, IN, OUT);
        if (l < m->L - 1) activation_forward(m->acts[l + 1], (size_t)B * OUT, m->act);
    }
}

// The loss of the logits in acts[L] against labels: each row's loss in losses, dloss/dlogits in
// dacts[L], and the mean loss in *loss, one float in GPU memory. It stays there: reading it back
// would make the host wait for the GPU at every step, so the training loop keeps every step's
// loss on the GPU and copies them back only when it prints a log line.
void model_loss(Model *m, int B, float *loss) {
    softmax_xent_forward_backward(loss, m->dacts[m->L], m->losses, m->acts[m->L], m->labels, B, m->sizes[m->L]);
}

// From dacts[L] down: every layer's weight and bias gradient into grads, and each hidden
// layer's gradient (through its activation) into dacts[l].
void model_backward(Model *m, int B) {
    for (int l = m->L - 1; l >= 0; l--) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        matmul_backward(l > 0 ? m->dacts[l] : NULL, m->grads + m->w_off[l], m->grads + m->b_off[l], m->dacts[l + 1],
                        m->acts[l], m->params + m->w_off[l], B, IN, OUT);
        if (l > 0) activation_backward(m->dacts[l], m->acts[l], (size_t)B * IN, m->act);
    }
}

// one SGD step over the whole flat buffer: one kernel for every weight and bias of every layer
void model_update(Model *m, float lr, float mu, float wd) {
    sgd_update(m->params, m->grads, m->mbuf, m->num_params, lr, mu, wd);
}

// ----------------------------------------------------------------------------
// evaluation

// Mean loss and accuracy over a whole dataset, in batches of max_batch rows. Each batch's totals
// come back to the host (16 bytes), which adds them up in double, as evaluate_cpu does.
void evaluate(Model *m, const DeviceData *d, double *loss, double *accuracy) {
    int C = m->sizes[m->L];
    double total = 0, correct = 0;
    for (long start = 0; start < d->n; start += m->max_batch) {  // (long: start + max_batch may pass INT_MAX)
        int B = d->n - start < m->max_batch ? (int)(d->n - start) : m->max_batch;
        gather_batch(m->acts[0], m->labels, d, NULL, (int)start, B);
        model_forward(m, B);
        softmax_xent_eval(m->losses, m->correct, m->acts[m->L], m->labels, B, C);
        sum_two(m->sums, m->losses, m->correct, B);
        double sums[2];
        cudaCheck(cudaMemcpy(sums, m->sums, sizeof(sums), cudaMemcpyDeviceToHost));  // waits for the kernels
        total += sums[0];
        correct += sums[1];
    }
    *loss = total / d->n;
    *accuracy = correct / d->n;
}

// ----------------------------------------------------------------------------
// main: the training loop

#ifndef TESTING
// the parameters and momentum, copied to the host for a checkpoint (run/run.h)
static void fetch_state(void *model, float *params, float *mbuf) {
    const Model *m = (const Model *)model;
    cudaCheck(cudaMemcpy(params, m->params, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(mbuf, m->mbuf, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
}

// -e and -p: the forward pass on n rows of host inputs x, the logits back to the host (run/use.h)
static void forward_logits(void *model, const float *x, int n, float *logits) {
    Model *m = (Model *)model;
    cudaCheck(cudaMemcpy(m->acts[0], x, (size_t)n * m->sizes[0] * sizeof(float), cudaMemcpyHostToDevice));
    model_forward(m, n);
    cudaCheck(cudaMemcpy(logits, m->acts[m->L], (size_t)n * m->sizes[m->L] * sizeof(float), cudaMemcpyDeviceToHost));
}

int main(int argc, char **argv) {
    Config cfg;
    config_from_command_line(&cfg, argc, argv, PROG_GPU);
    cudaDeviceProp prop = require_gpu();
    if (cfg.eval_path[0]) {  // -e: evaluate a checkpoint (or -p: classify pictures with it), and exit
        Use use;
        use_begin(&use, &cfg, PROG_GPU);
        Model model;
        model_build(&model, cfg.sizes, cfg.L, cfg.act, USE_BATCH);
        cudaCheck(cudaMemcpy(model.params, use.ck.params, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
        int rc = use_run(&use, &model, forward_logits);
        model_free(&model);
        return rc;
    }
    Run run;
    run_begin(&run, &cfg, argc, argv, PROG_GPU);  // -r: the checkpoint, and the settings it holds
    Dataset train_host, val_host, test_host;
    load_datasets_or_die(&cfg, argv[0], &train_host, &test_host);
    split_holdout(&train_host, &val_host, cfg.holdout, cfg.seed);  // -H: a validation set
    int B = cfg.batch;
    EpochPlan plan = epoch_plan(train_host.n, B, cfg.max_steps);

    // .to("cuda"): the datasets' bytes, copied to GPU memory once (cudaMalloc + cudaMemcpy)
    DeviceData train, val, test;
    int D = dataset_dim(&train_host);
    device_data_upload(&train, train_host.images, train_host.labels, train_host.n, D);
    device_data_upload(&val, val_host.images, val_host.labels, val_host.n, D);
    device_data_upload(&test, test_host.images, test_host.labels, test_host.n, D);
    Model model;
    model_build(&model, cfg.sizes, cfg.L, cfg.act, B > EVAL_BATCH ? B : EVAL_BATCH);
    const float *mbuf, *params = run_start(&run, &train_host, &model, fetch_state, model.num_params, &mbuf);
    if (params) {  // resuming: the checkpoint's weights and momentum
        cudaCheck(cudaMemcpy(model.params, params, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(model.mbuf, mbuf, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
    } else {
        model_init_params(&model, cfg.seed);
    }

    box_settings("train_mlp", "GPU trainer, the readable one", &cfg, &train_host, &test_host, model.num_params,
                 plan.steps);
    box_row("device", "%s (sm_%d%d, %d SMs, %.0f GB)", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
            prop.totalGlobalMem / 1e9);
    box_row("kernels", "simple: one launch per operation, one stream");
    box_rule();

    RunLog log;
    long steps_to_do = (long)(cfg.epochs - run.first_epoch + 1) * plan.steps - (run.first_step - 1);
    run_log_open(&log, &cfg, PROG_GPU, plan.steps, train_host.num_classes, steps_to_do, (long)run.steps_total);
    int *perm_host = (int *)mallocCheck(sizeof(int) * (size_t)train.n);
    int *perm = (int *)cudaMallocCheck(sizeof(int) * (size_t)train.n, "the permutation");
    float *losses_host = (float *)mallocCheck(sizeof(float) * (size_t)plan.steps);
    float *step_losses = (float *)cudaMallocCheck(sizeof(float) * (size_t)plan.steps, "the step losses");
    double loss = 0, acc = 0, train_seconds = 0;
    int epochs_run = 0;
    for (int epoch = run.first_epoch; epoch <= cfg.epochs; epoch++) {
        run_epoch(&run, perm_host, train.n);
        // the epoch's one host-to-device copy: its order of the training set (240 KB for MNIST)
        cudaCheck(cudaMemcpy(perm, perm_host, sizeof(int) * (size_t)train.n, cudaMemcpyHostToDevice));
        int first = run_first_step(&run, epoch);
        double epoch_start = now_seconds(), last_log = epoch_start;
        int last_log_step = first - 1;
        long samples = 0;
        for (int step = first; step <= plan.steps; step++) {
            int bs = epoch_batch_size(&plan, step - 1, B);
            // -T traces the second step (the first also loads each kernel's code onto the GPU)
            int traced = cfg.trace && epoch == 1 && step == (plan.steps > 1 ? 2 : 1);
            double trace_t0 = traced ? trace_start() : 0;  // (it waits for the GPU first)
            gather_batch(model.acts[0], model.labels, &train, perm, (step - 1) * B, bs);
            model_forward(&model, bs);
            model_loss(&model, bs, step_losses + step - 1);
            model_backward(&model, bs);
            model_update(&model, cfg.lr, cfg.momentum, cfg.weight_decay);
            if (traced) trace_print(trace_t0);
            samples += bs;
            if (step % cfg.log_every == 0 || step == plan.steps) {
                int n = step - last_log_step;  // the copy waits until the GPU has run every kernel queued so far
                cudaCheck(cudaMemcpy(losses_host, step_losses + last_log_step, n * sizeof(float), cudaMemcpyDeviceToHost));
                double sum = 0, t = now_seconds();
                for (int i = 0; i < n; i++) sum += losses_host[i];
                log_losses(&log, sum, n);
                log_step(&log, epoch, step, 1e3 * (t - last_log) / n);  // (exits if the run diverged)
                last_log = t;
                last_log_step = step;
            }
            run_after_steps(&run, &log, epoch, step, plan.steps, 1);  // Ctrl-C: checkpoint, exit 130
        }
        cudaCheck(cudaDeviceSynchronize());  // (the last step was logged: the GPU is idle already)
        double epoch_s = now_seconds() - epoch_start;
        train_seconds += epoch_s;
        epochs_run++;
        double t0 = now_seconds();
        evaluate(&model, cfg.holdout > 0 ? &val : &test, &loss, &acc);
        log_epoch(&log, epoch, epoch_s, samples, cfg.holdout > 0 ? "val" : "test", loss, acc,
                  1e3 * (now_seconds() - t0));
        run_end_of_epoch(&run, epoch);  // -c: the checkpoint
    }
    if (cfg.holdout > 0 || epochs_run == 0) evaluate(&model, &test, &loss, &acc);  // the test set, at the end
    log_final(&log, &cfg, train_host.name, loss, acc, train_seconds, epochs_run, device_bytes_allocated / 1e6,
              prop.name);
    run_finish(&run);
    free(perm_host);
    free(losses_host);
    cudaCheck(cudaFree(perm));
    cudaCheck(cudaFree(step_losses));
    model_free(&model);
    device_data_free(&train);
    device_data_free(&val);
    device_data_free(&test);
    dataset_free(&train_host);
    dataset_free(&val_host);
    dataset_free(&test_host);
    return 0;
}
#endif
