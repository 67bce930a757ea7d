/*
train_mlp.cu: the GPU trainer of mlp.cu. What `.to("cuda")` does, written out.

The same model, flags, data and output as train_mlp_cpu.c (read that first: it is the
reference every kernel here is checked against, by test_mlp). Every step of training is an
explicit CUDA kernel from kernels/:

    gather_batch              uint8 images on the device -> the float batch x (B, 784)
    matmul_forward            y = x · Wᵀ + b           } for each layer; the fast path fuses
    activation_forward        y = σ(y)                  } the activation into the matmul
    softmax_xent_...          loss and dlogits = (softmax - onehot) / B
    head (fast path)          the last layer, the loss, dlogits and the last hidden layer's
                              gradient in one kernel (up to 32 classes)
    matmul_backward           dW = doutᵀ · x, db = Σ dout, dx = dout · W
    activation_backward       dx *= σ'(y)               (fused into dx on the fast path)
    sgd_update                p -= lr · (μ·buf + grad + λ·p), over the flat buffer (the fast
                              path: per layer, some of it fused in: model_backward_update)

The data goes to the GPU once. Inside an epoch the host never copies or waits, except to
print a log line. Three ways to run the steps (-f):
  0  the simple kernels, one launch each: slow, but the clearest picture of the work;
  1  (the default) the fast kernels (tiled matmuls with the bias, activation and activation-
     gradient fused in, TF32 with -x 1; the last layer, the loss and its gradients in one
     kernel (kernels/head.cuh); the backward pass on three streams, the SGD step partly
     fused in, the next batch gathered meanwhile; programmatic dependent launch in the forward
     pass), each run of steps between two log lines captured once into a CUDA graph and
     replayed: a step costs a graph of a dozen nodes, not a dozen host launches;
  2  one persistent kernel per run of steps, all of a step's phases inside it, separated by
     grid-wide barriers (kernels/persistent.cuh): written for small models, where launches
     cost more than the arithmetic. Since the backward pass runs on three streams, path 1 is
     faster for them too (19.4 against 32.3 ms per small epoch: dev/results/bench_h200_2026-11-22f.md).

Shapes: B batch, IN/OUT a layer's features, C classes, L layers.
Build: make train      Run: ./train_mlp  (or ./train_mlp -h)
*/
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/args.h"           // Config, the flag table shared with the CPU trainer
#include "common/log.h"            // settings box, step log, CSV log
#include "common/rng.h"            // host RNG: the epoch shuffle (the same one the CPU trainer draws)
#include "common/utils.h"          // checked host allocation and I/O
#include "data/idx.h"              // MNIST-format IDX reader
#include "kernels/activation.cuh"  // sigmoid / relu / tanh forward and backward
#include "kernels/common.cuh"      // cudaCheck, cudaMallocCheck
#include "kernels/data.cuh"        // gather_batch, cuRAND weight init
#include "kernels/head.cuh"        // the fast path's classifier head: last layer, loss and gradients in one kernel
#include "kernels/matmul.cuh"      // the simple linear-layer kernels
#include "kernels/matmul_fast.cuh" // the fast linear-layer kernels: tiled, fused epilogues, TF32 opt-in
#include "kernels/persistent.cuh"  // a run of steps in one cooperative kernel (-f 2)
#include "kernels/sgd.cuh"         // sgd_update over the flat buffer
#include "kernels/softmax_xent.cuh" // softmax + cross-entropy + gradient, the device step counter

#define EVAL_BATCH 1024  // evaluation runs the test set in batches of this many rows (or B if larger)

// ----------------------------------------------------------------------------
// the model on the device

typedef struct {
    int L, sizes[MAX_LAYERS + 1], act;
    int B;                                   // training batch size
    int max_batch;                           // rows the activation buffers hold: max(B, EVAL_BATCH)
    int path, tf32;                          // how steps run (-f, PATH_*), TF32 (-x)
    int fast;                                // the fast kernels (paths 1 and 2: evaluation uses them)
    int persistent_grid;                     // blocks of the persistent kernel (path 2)
    size_t num_params, w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    float *params, *grads, *mbuf;            // flat buffers, the layout of param_layout()
    float *params_tf32;                      // -x 1 only: the weights rounded to TF32 (its bias slots unused),
                                             // what the forward products read; see model_forward
    float *acts[MAX_LAYERS + 1];             // acts[0] the batch (max_batch, sizes[0]); acts[L] the logits
    float *batches[2];                       // acts[0] is one of these (the fast path gathers the next
    int *batch_labels[2];                    // step's batch into the other one: train_steps_fast)
    float *dacts[MAX_LAYERS + 1];            // gradients of the same shapes (dacts[0] unused)
    float *losses;                           // (max_batch) per-example losses
    int *labels;                             // (max_batch)
    float *scratch;                          // split-K partial sums of the fast dweight
    float *pscratch;                         // split-K partial sums of the persistent forward
    int *perm;                               // (N train) this epoch's permutation
    int *step;                               // the device step counter (see softmax_xent.cuh)
    float *step_losses;                      // (steps per epoch) each step's mean loss
    // fast path: two more streams, one for the weight gradients (and the next step's batch:
    // train_steps_fast) and one for the bias gradients (see model_backward_update), and the
    // events that order them
    cudaStream_t side, bias_stream;
    cudaEvent_t ev_dout[MAX_LAYERS], ev_dinp[MAX_LAYERS], ev_side_done, ev_bias_done, ev_step;
} Model;

static void model_build(Model *m, const int *sizes, int L, int act, int B, int max_batch, int path, int tf32,
                        int n_train, int steps_per_epoch) {
    memset(m, 0, sizeof(*m));
    m->L = L;
    m->act = act;
    m->B = B;
    m->max_batch = max_batch;
    m->path = path;
    m->fast = path != PATH_SIMPLE;
    m->persistent_grid = path == PATH_PERSISTENT ? persistent_grid_size() : 0;
    m->tf32 = tf32;
    memcpy(m->sizes, sizes, sizeof(int) * (size_t)(L + 1));
    m->num_params = param_layout(sizes, L, m->w_off, m->b_off);
    size_t pbytes = m->num_params * sizeof(float);
    m->params = (float *)cudaMallocCheck(pbytes, "the parameters");
    m->grads = (float *)cudaMallocCheck(pbytes, "the gradients");
    m->mbuf = (float *)cudaMallocCheck(pbytes, "the momentum buffer");
    cudaCheck(cudaMemset(m->mbuf, 0, pbytes));
    if (tf32) {
        m->params_tf32 = (float *)cudaMallocCheck(pbytes, "the TF32 copy of the weights");
        cudaCheck(cudaMemset(m->params_tf32, 0, pbytes));
    }
    size_t scratch = 0;
    for (int l = 0; l <= L; l++) {
        size_t bytes = (size_t)max_batch * sizes[l] * sizeof(float);
        m->acts[l] = (float *)cudaMallocCheck(bytes, "the activations");
        m->dacts[l] = (float *)cudaMallocCheck(bytes, "the activation gradients");
        if (l < L) {
            size_t s = matmul_fast_scratch_floats(max_batch, sizes[l], sizes[l + 1]);
            scratch = s > scratch ? s : scratch;
        }
    }
    m->scratch = scratch ? (float *)cudaMallocCheck(scratch * sizeof(float), "the split-K scratch") : NULL;
    if (path == PATH_PERSISTENT) {
        int widest = 0;
        for (int l = 1; l <= L; l++) widest = sizes[l] > widest ? sizes[l] : widest;
        m->pscratch = (float *)cudaMallocCheck((size_t)MAX_SPLITS * B * widest * sizeof(float), "the split-K scratch");
    }
    m->losses = (float *)cudaMallocCheck((size_t)max_batch * sizeof(float), "the losses");
    m->labels = (int *)cudaMallocCheck((size_t)max_batch * sizeof(int), "the labels");
    m->batches[0] = m->acts[0];
    m->batch_labels[0] = m->labels;
    if (m->fast) {  // the second batch buffer, for gathering ahead
        m->batches[1] = (float *)cudaMallocCheck((size_t)max_batch * sizes[0] * sizeof(float), "the activations");
        m->batch_labels[1] = (int *)cudaMallocCheck((size_t)max_batch * sizeof(int), "the labels");
    }
    m->perm = (int *)cudaMallocCheck((size_t)(n_train > 0 ? n_train : 1) * sizeof(int), "the permutation");
    m->step = (int *)cudaMallocCheck(sizeof(int), "the step counter");
    m->step_losses = (float *)cudaMallocCheck((size_t)steps_per_epoch * sizeof(float), "the step losses");
    cudaCheck(cudaMemset(m->step, 0, sizeof(int)));
    if (m->fast) {
        // (Giving the main stream, which carries the critical path, a higher priority than these
        // two measured no difference: dev/results/ab_prefetch_priority_h200.log.)
        cudaCheck(cudaStreamCreateWithFlags(&m->side, cudaStreamNonBlocking));
        cudaCheck(cudaStreamCreateWithFlags(&m->bias_stream, cudaStreamNonBlocking));
        for (int l = 0; l < L; l++) {
            cudaCheck(cudaEventCreateWithFlags(&m->ev_dout[l], cudaEventDisableTiming));
            cudaCheck(cudaEventCreateWithFlags(&m->ev_dinp[l], cudaEventDisableTiming));
        }
        cudaCheck(cudaEventCreateWithFlags(&m->ev_side_done, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&m->ev_bias_done, cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&m->ev_step, cudaEventDisableTiming));
    }
}

static void model_free(Model *m) {
    cudaCheck(cudaFree(m->params));
    cudaCheck(cudaFree(m->grads));
    cudaCheck(cudaFree(m->mbuf));
    cudaCheck(cudaFree(m->params_tf32));
    for (int l = 0; l <= m->L; l++) {
        if (l > 0) cudaCheck(cudaFree(m->acts[l]));  // acts[0] is one of the batch buffers
        cudaCheck(cudaFree(m->dacts[l]));
    }
    for (int i = 0; i < 2; i++) {  // (cudaFree(NULL) does nothing)
        cudaCheck(cudaFree(m->batches[i]));
        cudaCheck(cudaFree(m->batch_labels[i]));
    }
    cudaCheck(cudaFree(m->scratch));
    cudaCheck(cudaFree(m->pscratch));
    cudaCheck(cudaFree(m->losses));
    cudaCheck(cudaFree(m->perm));
    cudaCheck(cudaFree(m->step));
    cudaCheck(cudaFree(m->step_losses));
    if (m->fast) {
        for (int l = 0; l < m->L; l++) {
            cudaCheck(cudaEventDestroy(m->ev_dout[l]));
            cudaCheck(cudaEventDestroy(m->ev_dinp[l]));
        }
        cudaCheck(cudaEventDestroy(m->ev_side_done));
        cudaCheck(cudaEventDestroy(m->ev_bias_done));
        cudaCheck(cudaEventDestroy(m->ev_step));
        cudaCheck(cudaStreamDestroy(m->side));
        cudaCheck(cudaStreamDestroy(m->bias_stream));
    }
}

// nn.Linear's init, W and b uniform in [-1/sqrt(IN), 1/sqrt(IN)], drawn on the device by cuRAND
static void model_init_params(Model *m, uint64_t seed, cudaStream_t stream) {
    for (int l = 0; l < m->L; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        float bound = 1.0f / sqrtf((float)IN);
        init_uniform(m->params + m->w_off[l], (size_t)OUT * IN, bound, seed, m->w_off[l], stream);
        init_uniform(m->params + m->b_off[l], (size_t)OUT, bound, seed, m->b_off[l], stream);
    }
    if (m->params_tf32) round_tf32_copy(m->params_tf32, m->params, m->num_params, stream);
}

// acts[0] holds bs rows; runs the first `layers` layers (m->L: all, leaving the logits in acts[L]).
// With TF32 (-x 1) every forward product's operands are TF32 values already: the batch is gathered
// rounded, each hidden layer's output is stored rounded (the logits are not), and the weights come
// from params_tf32, which the optimizer steps keep equal to round_tf32(params). The tensor cores
// would round them anyway; stored so, the wgmma kernel can skip its rounding pass (MF_TF32_EXACT,
// kernels/matmul_fast.cuh). The backward products read the same activations (relu' sees the same
// sign; sigmoid' and tanh' see the value the tensor cores saw), and the FP32 weights.
static void model_forward(Model *m, int bs, int layers, cudaStream_t stream) {
    for (int l = 0; l < layers; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        const float *W = m->params + m->w_off[l], *b = m->params + m->b_off[l];
        int act = l < m->L - 1 ? m->act : ACT_NONE;  // the last layer's outputs are the logits
        if (m->fast && m->tf32) {
            matmul_forward_fast(m->acts[l + 1], m->acts[l], m->params_tf32 + m->w_off[l], b, bs, IN, OUT, act,
                                MF_TF32_EXACT, l < m->L - 1, NULL, stream);
        } else if (m->fast) {
            // (no fixup workspace: K splits through clusters. A workspace made the wide FP32 epoch slower,
            // 28.1 -> 29.4 ms, though the products alone got faster: dev/cuda/README.md, run 17)
            matmul_forward_fast(m->acts[l + 1], m->acts[l], W, b, bs, IN, OUT, act, 0, 0, NULL, stream);
        } else {
            matmul_forward(m->acts[l + 1], m->acts[l], W, b, bs, IN, OUT, stream);
            if (act != ACT_NONE) activation_forward(m->acts[l + 1], (size_t)bs * OUT, act, stream);
        }
    }
}

// Path 1 with at most HEAD_MAX_C classes: the last layer, the loss and the gradients down to the
// last hidden layer's output are one kernel (kernels/head.cuh)
static int model_head_fused(const Model *m) { return m->path == PATH_GRAPH && head_fits(m->sizes[m->L]); }

// Simple path: from dacts[L] (dlogits) down, every layer's dweight and dbias into grads, then
// one SGD update over the whole flat buffer.
static void model_backward_simple(Model *m, int bs, float lr, float momentum, float weight_decay,
                                  cudaStream_t stream) {
    for (int l = m->L - 1; l >= 0; l--) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        const float *W = m->params + m->w_off[l];
        float *dW = m->grads + m->w_off[l], *db = m->grads + m->b_off[l];
        float *dinp = l > 0 ? m->dacts[l] : NULL;  // the first layer's input is data: no gradient
        matmul_backward(dinp, dW, db, m->dacts[l + 1], m->acts[l], W, bs, IN, OUT, stream);
        if (dinp) activation_backward(dinp, m->acts[l], (size_t)bs * IN, m->act, stream);
    }
    sgd_update(m->params, m->grads, m->mbuf, NULL, m->num_params, lr, momentum, weight_decay, 0, stream);
}

// Fast path: the same arithmetic, as three streams. Once dout of layer l (dacts[l+1]) exists:
//   main stream:  dinp = (dout · W) ⊙ act'(acts[l]), the activation's gradient fused in; the next
//                 layer down needs it, so this chain is the critical path;
//   side stream:  dW = doutᵀ · acts[l], beside dinp; then, once dinp has read W, W's SGD step;
//   bias stream:  db = Σ dout with b's SGD step fused in (only the next forward pass reads b);
//                 for the last layer after the fused head, with the step's mean loss and the step
//                 counter in the same kernel (head_batch_sums, kernels/head.cuh).
// The last layer's dinp is the fused head's (model_forward_loss) when it is used.
// The first layer has no dinp: its dW runs on main, after the last dinp, beside the side stream's
// last update. If the layer has fewer than FUSED_SGD_MAX_WEIGHTS weights its SGD step is fused into
// dW's epilogue (kernels/matmul_fast.cuh MF_EPI_SGD), which saves the small model (100k weights) a
// kernel per step; above that the step is the SGD kernel after dW: the fused step is bound by memory
// latency (the matmul's few blocks per SM, one float4 of weights in flight per thread), the kernel is
// not. Measured on an H200, same runs, for the wide model's 800k: TF32 epoch 18.3 against 20.25 ms,
// FP32 29.15 against 29.6 (dev/results/ab_tile_epilogue_h200.log, part 6).
// (Fusing the step into every dW was slower for the wide model: dW would have to wait for dinp
// instead of running beside it.) The events carry the order: ev_dout[l] (dout ready) and ev_dinp[l]
// (W no longer read); at the end the main stream waits for the other two. In a CUDA graph capture
// the events become edges: the step is captured as a DAG with three branches, not a chain.
#define FUSED_SGD_MAX_WEIGHTS (1 << 18)
static void model_backward_update(Model *m, int bs, float lr, float momentum, float weight_decay,
                                  cudaStream_t stream) {
    for (int l = m->L - 1; l >= 0; l--) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        const size_t w = m->w_off[l], b = m->b_off[l];
        const float *dout = m->dacts[l + 1];
        cudaCheck(cudaEventRecord(m->ev_dout[l], stream));
        cudaCheck(cudaStreamWaitEvent(m->bias_stream, m->ev_dout[l], 0));
        if (l == m->L - 1 && model_head_fused(m))  // with the step's mean loss and the step counter
            head_batch_sums(m->grads + b, dout, bs, OUT, m->params + b, m->mbuf + b, lr, momentum, weight_decay,
                            m->step_losses, m->step, m->losses, m->bias_stream);
        else
            matmul_backward_dbias_fast(m->grads + b, dout, bs, OUT, m->params + b, m->mbuf + b, lr, momentum,
                                       weight_decay, m->bias_stream);
        if (l > 0) {
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dout[l], 0));
            matmul_backward_dweight_fast(m->grads + w, dout, m->acts[l], bs, IN, OUT, m->scratch, m->tf32, NULL,
                                         m->side);
            if (l < m->L - 1 || !model_head_fused(m))  // (the fused head has computed the last layer's dinp)
                matmul_backward_dinp_fast(m->dacts[l], dout, m->params + w, m->acts[l], m->act, bs, IN, OUT,
                                          m->tf32, NULL, stream);
            cudaCheck(cudaEventRecord(m->ev_dinp[l], stream));
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dinp[l], 0));
            sgd_update(m->params + w, m->grads + w, m->mbuf + w, m->params_tf32 ? m->params_tf32 + w : NULL,
                       (size_t)OUT * IN, lr, momentum, weight_decay, 1, m->side);
        } else if ((size_t)OUT * IN < FUSED_SGD_MAX_WEIGHTS) {
            MatmulFastSgd sgd = {m->params + w, m->mbuf + w, lr, momentum, weight_decay,
                                 m->params_tf32 ? m->params_tf32 + w : NULL};
            matmul_backward_dweight_fast(m->grads + w, dout, m->acts[l], bs, IN, OUT, m->scratch, m->tf32, &sgd,
                                         stream);
        } else {
            matmul_backward_dweight_fast(m->grads + w, dout, m->acts[l], bs, IN, OUT, m->scratch, m->tf32, NULL,
                                         stream);
            sgd_update(m->params + w, m->grads + w, m->mbuf + w, m->params_tf32 ? m->params_tf32 + w : NULL,
                       (size_t)OUT * IN, lr, momentum, weight_decay, 1, stream);
        }
    }
    cudaCheck(cudaEventRecord(m->ev_side_done, m->side));
    cudaCheck(cudaEventRecord(m->ev_bias_done, m->bias_stream));
    cudaCheck(cudaStreamWaitEvent(stream, m->ev_side_done, 0));
    cudaCheck(cudaStreamWaitEvent(stream, m->ev_bias_done, 0));
}

// ----------------------------------------------------------------------------
// the data on the device

typedef struct {
    uint8_t *images, *labels;  // (n, D) and (n), exactly as in the files
    int n, D;
} DeviceData;

static void device_data_upload(DeviceData *d, const Dataset *ds) {
    d->n = ds->n;
    d->D = ds->rows * ds->cols;
    size_t bytes = (size_t)d->n * d->D;
    d->images = (uint8_t *)cudaMallocCheck(bytes, "the images");
    d->labels = (uint8_t *)cudaMallocCheck((size_t)d->n, "the labels");
    cudaCheck(cudaMemcpy(d->images, ds->images, bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(d->labels, ds->labels, (size_t)d->n, cudaMemcpyHostToDevice));
}

static void device_data_free(DeviceData *d) {
    cudaCheck(cudaFree(d->images));
    cudaCheck(cudaFree(d->labels));
}

// ----------------------------------------------------------------------------
// one training step, and runs of steps (replayed from CUDA graphs on the fast path)

// Forward and loss on the bs rows in acts[0] and labels: the logits, dlogits, the step's loss, and
// the device step counter moves on (softmax_xent.cuh). With the fused head also dacts[L-1], the
// last hidden layer's gradient, ahead of model_backward_update; the head leaves the mean loss and
// the step counter to model_backward_update (head_batch_sums, on the bias stream).
static void model_forward_loss(Model *m, int bs, cudaStream_t stream) {
    int L = m->L;
    if (model_head_fused(m)) {
        model_forward(m, bs, L - 1, stream);
        head_forward_backward(m->acts[L], m->dacts[L], L > 1 ? m->dacts[L - 1] : NULL, m->losses, m->acts[L - 1],
                              m->params + m->w_off[L - 1], m->params + m->b_off[L - 1], m->labels, bs,
                              m->sizes[L - 1], m->sizes[L], m->act, stream);
    } else {
        model_forward(m, bs, L, stream);
        softmax_xent_forward_backward(m->dacts[L], m->losses, m->step_losses, m->step, m->acts[L], m->labels, bs,
                                      m->sizes[L], m->fast, stream);
    }
}

// Forward, loss, backward and update on the bs rows already in acts[0] and labels.
static void train_step_on_batch(Model *m, int bs, float lr, float momentum, float weight_decay, cudaStream_t stream) {
    model_forward_loss(m, bs, stream);
    if (m->fast) model_backward_update(m, bs, lr, momentum, weight_decay, stream);
    else model_backward_simple(m, bs, lr, momentum, weight_decay, stream);
}

// Enqueues one step on bs rows; the batch is rows (*step)*B ... of the permutation.
static void train_step(Model *m, const DeviceData *train, int bs, const Config *c, cudaStream_t stream) {
    gather_batch(m->acts[0], m->labels, train->images, train->labels, m->perm, m->step, 0, m->B, bs, train->D,
                 m->tf32, stream);
    train_step_on_batch(m, bs, c->lr, c->momentum, c->weight_decay, stream);
}

// Enqueues n steps on the fast path, the last with last_bs rows. The same steps as n train_step()s,
// with one change in the order: step i+1's batch is gathered into the other of the two batch
// buffers while step i runs, on the side stream, from the start of step i (which it waits for,
// ev_step) to well before the side stream's first weight gradient. The other buffer was last read
// by step i-1, which has finished (its end joined every stream into the main one), and the step
// counter holds i (step i-1 moved it on), so the gather takes the rows of step *step + 1. The
// gather is off the critical path, and off the bias stream, which carried the small model's
// critical path after the fused head. Measured against gathering on the bias stream after the
// forward pass (where it was before), same run on an H200: small epoch 19.5 against 22.8 ms, wide
// FP32 30.1 against 31.4, wide TF32 21.3 against 20.8 (there the gather now shares the GPU with
// the first forward product): dev/results/ab_gather_ahead_h200.log. The first step of a run
// gathers its own batch: a run (one graph) depends on no other. (The event ev_step sits before
// the first forward kernel, which is launched with PDL: in the captured graph the gather's edge
// comes from the nodes before the event, and nothing orders the gather against that kernel.)
static void train_steps_fast(Model *m, const DeviceData *train, int n, int last_bs, const Config *c,
                             cudaStream_t stream) {
    for (int i = 0; i < n; i++) {
        const int bs = i == n - 1 ? last_bs : m->B, next_bs = i + 1 == n - 1 ? last_bs : m->B;
        m->acts[0] = m->batches[i % 2];
        m->labels = m->batch_labels[i % 2];
        if (i + 1 < n) {
            cudaCheck(cudaEventRecord(m->ev_step, stream));
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_step, 0));
            gather_batch(m->batches[(i + 1) % 2], m->batch_labels[(i + 1) % 2], train->images, train->labels, m->perm,
                         m->step, 1, m->B, next_bs, train->D, m->tf32, m->side);
        }
        if (i == 0)
            gather_batch(m->acts[0], m->labels, train->images, train->labels, m->perm, m->step, 0, m->B, bs, train->D,
                         m->tf32, stream);
        model_forward_loss(m, bs, stream);
        model_backward_update(m, bs, c->lr, c->momentum, c->weight_decay, stream);
    }
}

// Runs steps first .. first + n - 1 of the epoch; the last of them has last_bs rows.
// Path 1: such a run is the same work every time it occurs (the kernels find their rows
// through the device step counter), so it is captured into a graph once and replayed. An
// epoch has at most two kinds of run (log_every full steps, and the remainder at its end).
// Path 2: one launch of the persistent kernel does the whole run.
#define MAX_GRAPHS 4
typedef struct {
    int n, last_bs;
    cudaGraphExec_t exec;
} GraphEntry;
static GraphEntry graphs[MAX_GRAPHS];
static int num_graphs = 0;

static void run_steps(Model *m, const DeviceData *train, int first, int n, int last_bs, int steps_per_epoch,
                      const Config *c, cudaStream_t stream) {
    if (m->path == PATH_PERSISTENT) {
        PersistentArgs a;
        memset(&a, 0, sizeof(a));
        a.L = m->L;
        memcpy(a.sizes, m->sizes, sizeof(m->sizes));
        a.act = m->act;
        a.B = m->B;
        a.last_bs = last_bs;
        a.steps_per_epoch = steps_per_epoch;
        a.first_step = first;
        a.nsteps = n;
        a.num_params = m->num_params;
        memcpy(a.w_off, m->w_off, sizeof(m->w_off));
        memcpy(a.b_off, m->b_off, sizeof(m->b_off));
        a.params = m->params;
        a.grads = m->grads;
        a.mbuf = m->mbuf;
        memcpy(a.acts, m->acts, sizeof(m->acts));
        memcpy(a.dacts, m->dacts, sizeof(m->dacts));
        a.losses = m->losses;
        a.step_losses = m->step_losses;
        a.scratch = m->pscratch;
        a.labels = m->labels;
        a.step = m->step;
        a.images = train->images;
        a.all_labels = train->labels;
        a.perm = m->perm;
        a.D = train->D;
        a.lr = c->lr;
        a.momentum = c->momentum;
        a.weight_decay = c->weight_decay;
        train_steps_persistent(&a, m->persistent_grid, stream);
        return;
    }
    if (m->path == PATH_SIMPLE) {
        for (int i = 0; i < n; i++) train_step(m, train, i == n - 1 ? last_bs : m->B, c, stream);
        return;
    }
    GraphEntry *g = NULL;
    for (int i = 0; i < num_graphs; i++)
        if (graphs[i].n == n && graphs[i].last_bs == last_bs) g = &graphs[i];
    if (!g) {
        if (num_graphs == MAX_GRAPHS) die("", "internal: more than %d kinds of step run", MAX_GRAPHS);
        g = &graphs[num_graphs++];
        g->n = n;
        g->last_bs = last_bs;
        cudaGraph_t graph;
        cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        train_steps_fast(m, train, n, last_bs, c, stream);
        cudaCheck(cudaStreamEndCapture(stream, &graph));
        cudaCheck(cudaGraphInstantiate(&g->exec, graph, 0));
        cudaCheck(cudaGraphDestroy(graph));
    }
    cudaCheck(cudaGraphLaunch(g->exec, stream));
}

static void free_graphs(void) {
    for (int i = 0; i < num_graphs; i++) cudaCheck(cudaGraphExecDestroy(graphs[i].exec));
    num_graphs = 0;
}

// ----------------------------------------------------------------------------
// evaluation on the device: mean loss and accuracy over a whole dataset

typedef struct {
    float *losses, *correct;  // (n) per example
    double *sums;             // (2) Σ losses, Σ correct
} EvalBuffers;

static void evaluate(Model *m, const DeviceData *d, EvalBuffers *e, double *loss, double *accuracy,
                     cudaStream_t stream) {
    int C = m->sizes[m->L];
    for (int start = 0; start < d->n; start += m->max_batch) {
        int bs = d->n - start < m->max_batch ? d->n - start : m->max_batch;
        gather_rows(m->acts[0], m->labels, d->images, d->labels, start, bs, d->D, m->tf32, stream);
        model_forward(m, bs, m->L, stream);
        softmax_xent_eval(e->losses + start, e->correct + start, m->acts[m->L], m->labels, bs, C, stream);
    }
    sum_two(e->sums, e->losses, e->correct, d->n, stream);
    double sums[2];
    cudaCheck(cudaMemcpyAsync(sums, e->sums, sizeof(sums), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    *loss = sums[0] / d->n;
    *accuracy = sums[1] / d->n;
}

// ----------------------------------------------------------------------------
// main: the training loop

// one line and exit 1 when there is no GPU to run on
static cudaDeviceProp require_gpu(void) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess || count == 0) {
        fprintf(stderr, "error: no CUDA GPU available (%s) ---> try: the CPU trainer, same flags: ./train_mlp_cpu "
                        "(make train_cpu)\n",
                err != cudaSuccess ? cudaGetErrorString(err) : "no device found");
        exit(1);
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    cudaCheck(cudaSetDevice(0));
    return prop;
}

#ifndef TESTING
int main(int argc, char **argv) {
    Config cfg;
    config_from_command_line(&cfg, argc, argv, 1);

    cudaDeviceProp prop = require_gpu();
    Dataset train_host, test_host;
    const char *dataset = load_datasets_or_die(&cfg, argv[0], &train_host, &test_host);
    int B = cfg.batch, L = cfg.L;
    int steps_per_epoch = (train_host.n + B - 1) / B;  // the last batch may be smaller
    int last_bs = train_host.n - (steps_per_epoch - 1) * B;
    if (cfg.max_steps && cfg.max_steps < steps_per_epoch) {
        steps_per_epoch = cfg.max_steps;
        last_bs = B;
    }
    long samples_per_epoch = (long)(steps_per_epoch - 1) * B + last_bs;

    if (cfg.tf32 && cfg.path != PATH_GRAPH) usage_error(argv[0], "-x 1 (TF32) runs on the fast kernels: use it with -f 1");

    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    DeviceData train, test;
    device_data_upload(&train, &train_host);
    device_data_upload(&test, &test_host);
    Model model;
    int max_batch = B > EVAL_BATCH ? B : EVAL_BATCH;
    model_build(&model, cfg.sizes, L, cfg.act, B, max_batch, cfg.path, cfg.tf32, train.n, steps_per_epoch);
    model_init_params(&model, cfg.seed, stream);
    EvalBuffers eval;
    eval.losses = (float *)cudaMallocCheck((size_t)test.n * sizeof(float), "the evaluation losses");
    eval.correct = (float *)cudaMallocCheck((size_t)test.n * sizeof(float), "the evaluation results");
    eval.sums = (double *)cudaMallocCheck(2 * sizeof(double), "the evaluation sums");

    box_rule();
    box_row("train_mlp", "GPU trainer");
    box_rule();
    box_row("dataset", "%s", dataset);
    box_row("data directory (-d)", "%s", cfg.data_dir);
    box_row("train / test images", "%d / %d of %dx%d", train.n, test.n, train_host.rows, train_host.cols);
    box_model_rows(&cfg);
    box_row("parameters", "%zu (%.2f MB)", model.num_params, model.num_params * sizeof(float) / 1e6);
    box_row("steps per epoch", "%d", steps_per_epoch);
    box_row("device", "%s (sm_%d%d, %d SMs, %.0f GB)", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
            prop.totalGlobalMem / 1e9);
    static const char *const paths[] = {"0: simple kernels, one launch per op", "1: fast fused kernels, streams, CUDA graphs",
                                        "2: one persistent kernel per run of steps"};
    box_row("kernels (-f)", "%s", paths[cfg.path]);
    box_row("matmul precision (-x)", "%s", cfg.tf32 ? "TF32 tensor cores" : "FP32");
    box_rule();
    dataset_free(&train_host);
    dataset_free(&test_host);

    CsvLog log;
    csv_open(&log, cfg.log_path);
    Rng shuffle;
    rng_seed(&shuffle, cfg.seed, 1);  // the same permutations as train_mlp_cpu with the same -s
    int *perm_host;
    cudaCheck(cudaMallocHost((void **)&perm_host, sizeof(int) * (size_t)train.n));
    cudaEvent_t epoch_start, epoch_end, log_event;
    cudaCheck(cudaEventCreate(&epoch_start));
    cudaCheck(cudaEventCreate(&epoch_end));
    cudaCheck(cudaEventCreate(&log_event));

    double test_loss = 0, test_acc = 0, train_ms_total = 0;
    for (int epoch = 1; epoch <= cfg.epochs; epoch++) {
        rng_permutation(&shuffle, perm_host, train.n);
        cudaCheck(cudaMemcpyAsync(model.perm, perm_host, sizeof(int) * (size_t)train.n, cudaMemcpyHostToDevice, stream));
        cudaCheck(cudaMemsetAsync(model.step, 0, sizeof(int), stream));
        cudaCheck(cudaEventRecord(epoch_start, stream));
        float last_log_ms = 0;
        int last_log_step = 0;
        // runs of steps from one log line to the next; the host waits only to print
        for (int done = 0; done < steps_per_epoch;) {
            int next_log = (done / cfg.log_every + 1) * cfg.log_every;
            int end = next_log < steps_per_epoch ? next_log : steps_per_epoch;
            run_steps(&model, &train, done, end - done, end == steps_per_epoch ? last_bs : B, steps_per_epoch, &cfg,
                      stream);
            done = end;
            cudaCheck(cudaEventRecord(log_event, stream));
            cudaCheck(cudaEventSynchronize(log_event));
            float ms_now;
            cudaCheck(cudaEventElapsedTime(&ms_now, epoch_start, log_event));
            float loss;
            cudaCheck(cudaMemcpy(&loss, model.step_losses + done - 1, sizeof(float), cudaMemcpyDeviceToHost));
            if (!isfinite(loss))
                die("a smaller learning rate (-l)", "the run diverged: loss is %g at epoch %d step %d", loss, epoch, done);
            double ms = (ms_now - last_log_ms) / (done - last_log_step);
            double sps = B / (ms / 1e3);
            char rate[32];
            format_rate(sps, rate, sizeof(rate));
            printf("epoch %d step %5d/%d | loss %.4f | %.4f ms/step | %s samples/s\n", epoch, done, steps_per_epoch,
                   loss, ms, rate);
            fflush(stdout);
            csv_row(&log, "train", epoch, done, loss, -1, ms, sps, -1);
            last_log_ms = ms_now;
            last_log_step = done;
        }
        cudaCheck(cudaEventRecord(epoch_end, stream));
        cudaCheck(cudaEventSynchronize(epoch_end));
        float epoch_ms;
        cudaCheck(cudaEventElapsedTime(&epoch_ms, epoch_start, epoch_end));
        train_ms_total += epoch_ms;
        double t0 = now_seconds();
        evaluate(&model, &test, &eval, &test_loss, &test_acc, stream);
        double eval_ms = 1e3 * (now_seconds() - t0);
        if (!isfinite(test_loss))
            die("a smaller learning rate (-l)", "the run diverged: test loss is %g after epoch %d", test_loss, epoch);
        double sps = samples_per_epoch / (epoch_ms / 1e3);
        printf("epoch %d done | %.4f s | %.1fk samples/s | test loss %.4f | test accuracy %.2f%%\n", epoch,
               epoch_ms / 1e3, sps / 1e3, test_loss, 100 * test_acc);
        csv_row(&log, "epoch", epoch, steps_per_epoch, -1, -1, epoch_ms, sps, -1);
        csv_row(&log, "eval", epoch, steps_per_epoch, test_loss, test_acc, eval_ms, -1, -1);
    }
    double mem_mb = device_bytes_allocated / 1e6;
    csv_row(&log, "summary", cfg.epochs, steps_per_epoch, test_loss, test_acc, train_ms_total, -1, mem_mb);
    csv_close(&log);
    printf("final | %s | test accuracy %.2f%% | test loss %.4f | %d epochs | %.4f s/epoch | %.1f MB on %s\n", dataset,
           100 * test_acc, test_loss, cfg.epochs, train_ms_total / 1e3 / cfg.epochs, mem_mb, prop.name);

    free_graphs();
    cudaCheck(cudaFreeHost(perm_host));
    cudaCheck(cudaEventDestroy(epoch_start));
    cudaCheck(cudaEventDestroy(epoch_end));
    cudaCheck(cudaEventDestroy(log_event));
    cudaCheck(cudaFree(eval.losses));
    cudaCheck(cudaFree(eval.correct));
    cudaCheck(cudaFree(eval.sums));
    model_free(&model);
    device_data_free(&train);
    device_data_free(&test);
    cudaCheck(cudaStreamDestroy(stream));
    return 0;
}
#endif
