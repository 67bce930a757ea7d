/*
train_mlp_fast.cu: the fast GPU trainer of mlp.cu. The same model, flags, data and output as
train_mlp.cu (read that first: it is the same training, one simple kernel per operation), with the
fast kernels of kernels/fast/ and three ways to cut the time between them:

    fused kernels       the matmuls carry their epilogues: bias and activation in the forward
                        product, the activation's gradient in dinp (kernels/fast/matmul/epilogue.cuh); the
                        last layer, the loss and the last hidden layer's gradient are one kernel
                        (kernels/fast/ops/head.cuh); the SGD step rides on the gradient kernels
    tiled matmuls       register tiles fed by cp.async, tile and K split planned per shape, TF32
                        tensor cores with -x 1, BF16 with -x 2 (kernels/fast/matmul/matmul_fast.h)
    streams and graphs  the backward pass runs on three streams (model_backward_update), the next
                        batch is gathered while a step runs, and each run of steps between two log
                        lines is captured once into a CUDA graph and replayed (-f 1): a step costs
                        one graph launch, not a dozen host launches
    one kernel          each run of steps as one kernel: a model with one hidden layer in FP32
                        (kernels/fast/fused/fused_step.cuh, two grid-wide barriers a step), or with two or
                        more hidden layers (kernels/fast/fused/fused_deep.cuh, a barrier between a step's
                        products): no gaps between kernels

Paths (-f): 2 (the default) the fused step where it is faster (fused_plan says which models and why
not), the graphs for the others; 3 the fused step wherever it can run, to compare it with 1; 1 replays CUDA graphs; 0 launches the same kernels on the same
streams from the host, step by step: what the graphs save, measured by running both.
Precision (-x): 0 FP32 (on the CUDA cores, or, for the large products the planner's tuned table
names, as 3xTF32 on the tensor cores, within the same tolerances: kernels/fast/matmul/matmul_fast.h);
1 TF32 tensor cores in the matmuls (the forward products' operands are
kept as TF32 values: model_forward says how); 2 BF16 tensor cores in the matmuls: mixed precision,
where only the matmuls' operands are rounded to BF16 (inside the kernels, as they are loaded) and
everything else stays FP32: the weights (the "master weights"), the momentum and the update, the
sums, the activations as stored, the loss and the softmax.
Several GPUs (-g N, or torchrun, mpirun, srun): data parallel through NCCL, a process per GPU, each
taking its share of every batch, the gradients summed over the GPUs before each step (the section
"several GPUs" before main, and run/job.h; NCCL is built in only where make found it, and loaded
only by a run of several ranks).

The data goes to the GPU once. Inside an epoch the host never copies or waits, except to print a
log line. test_mlp checks every tensor of this trainer against train_mlp_cpu.c, step by step.

Shapes: B batch, IN/OUT a layer's features, C classes, L layers.
Build: make train_fast    Run: ./train_mlp_fast  (./train_mlp_fast -h lists the flags)
*/
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/args.h"                         // Config, the flag table shared by the trainers
#include "run/log.h"                          // settings box, step log, CSV log
#include "common/mlp.h"                       // ACT_*, MAX_LAYERS, param_layout
#include "common/rng.h"                       // the epoch shuffle: the same one the CPU trainer draws
#include "run/run.h"                          // -r and -c: resuming and checkpoints; Ctrl-C
#include "run/job.h"                          // several GPUs: the ranks of a job, one process each
#include "run/train.h"                        // loading the data, the epoch's steps, the settings box
#include "run/use.h"                          // -e, -p, -i: using a trained model
#include "common/utils.h"                     // checked host allocation and I/O
#include "data/dataset.h"                     // the datasets: IDX, CIFAR-10, image folders
#include "kernels/common.cuh"                 // cudaCheck, cudaMallocCheck, require_gpu
#include "kernels/data.cuh"                   // DeviceData, init_uniform_kernel
#include "kernels/softmax_xent.cuh"           // softmax_xent_eval_kernel, sum_two_kernel (evaluation)
#include "kernels/fast/fused/fused_deep.cuh"  // fused_deep_plan, fused_deep_steps: the same for deeper models
#include "kernels/fast/fused/fused_step.cuh"  // fused_step_plan, fused_steps: a run of steps in one kernel (-f 2)
#include "kernels/fast/matmul/matmul.cuh"     // matmul_forward_fast, matmul_backward_dinp_fast / _dweight_fast
#include "kernels/fast/ops/dbias.cuh"         // matmul_backward_dbias_fast: bias gradient + SGD step
#include "kernels/fast/ops/gather.cuh"        // gather_batch_step, gather_rows_fast
#include "kernels/fast/ops/head.cuh"          // head_forward_backward, head_batch_sums
#include "kernels/fast/ops/sgd.cuh"           // sgd_update_fast, round_tf32_copy
#include "kernels/fast/ops/softmax.cuh"       // softmax_xent_forward_backward_fast: the device step counter
#include "kernels/fast/ops/transpose.cuh"     // tf32_transpose: -x 1's K-major copies (model_tf32k)
#if defined(MLP_NCCL) && !defined(TESTING)
#include <dlfcn.h>                       // -g: NCCL is loaded when asked for (nccl_load)
#include <nccl.h>                        // -g: the all-reduce of the gradients over the GPUs (its types)
#endif

#define FAST_EVAL_BATCH 1024       // evaluation runs the test set in batches of this many rows (or B if larger)
// the first layer's SGD step rides on its dW below this many weights (model_backward_update says why)
#define FUSED_SGD_MAX_WEIGHTS (1 << 18)
#define FAST_MAX_GRAPHS 8          // kinds of run of steps an epoch captures (two, each at two parities of
                                   // params_tf32t: see run_steps)

namespace fast {  // test_mlp.cu includes this file beside train_mlp.cu, whose Model is another

// ----------------------------------------------------------------------------
// the model on the device

// a run of n steps, the last with last_bs rows, captured into a CUDA graph (run_steps)
typedef struct {
    int n, last_bs;
    int parity;   // the model's tf32t_parity at the run's start (0 for a model without params_tf32t)
    cudaGraphExec_t exec;
} StepGraph;

// The fields of train_mlp.cu's Model, and what the fast path adds: the second batch buffer, the
// device step counter, the TF32 copy of the weights, the streams and events of the backward pass,
// and the captured graphs. Every pointer is a GPU address.
typedef struct {
    int L, sizes[MAX_LAYERS + 1], act;
    int B;                                // training batch size
    int max_batch;                        // rows the activation buffers hold: max(B, FAST_EVAL_BATCH)
    int prec;                             // -x: PREC_FP32, PREC_TF32 or PREC_BF16 (run/args.h)
    size_t num_params, w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    float *params, *grads, *mbuf;         // flat buffers, the layout of param_layout()
    float *params_tf32;                   // -x 1 only: the weights rounded to TF32 (its bias slots unused),
                                          // what the forward products read; see model_forward
    // -x 2, where the widths allow it (model_bf16_fits), BF16 copies of what the hidden layers'
    // products read: the weights (flat, params' layout), acts[0 .. L-2] and dacts[1 .. L-1]; else NULL.
    // See model_forward_layers.
    __nv_bfloat16 *params_bf16, *acts_bf16[MAX_LAYERS + 1], *dacts_bf16[MAX_LAYERS + 1];
    // -x 1, for each hidden layer l >= 1 whose products take the K-major TF32 kernel (model_tf32k),
    // copies of what its dinp and dweight read that is not K-major: inp_t[l] its input transposed
    // (IN, B); dout_r[l] and dout_t[l] its output's gradient, dacts[l + 1], rounded (B, OUT) and
    // rounded and transposed (OUT, B); and in params_tf32t (params' layout, W's slot holding (IN, OUT))
    // its weights rounded and transposed, twice: a step's dinp reads params_tf32t[tf32t_parity] while
    // its SGD step writes the new weights into the other one, and the parity flips (the host counts
    // it). NULL elsewhere. See model_backward_update. And for layer 0, whose dW alone takes the kernel
    // (model_tf32k0), inp_t[0] the batch transposed and dout_t[0] the rounded dacts[1] transposed.
    float *params_tf32t[2], *inp_t[MAX_LAYERS], *dout_r[MAX_LAYERS], *dout_t[MAX_LAYERS];
    int tf32t_parity;
    float *acts[MAX_LAYERS + 1];          // acts[0] the batch (max_batch, sizes[0]); acts[L] the logits
    int x_pixels;                         // acts[0] holds the batch's pixel bytes (model_gather_mode)
    float *dacts[MAX_LAYERS + 1];         // gradients of the same shapes (dacts[0] unused)
    float *batches[2];                    // acts[0] is one of these: train_steps gathers the next
    int *batch_labels[2];                 // step's batch into the other one
    float *losses;                        // (max_batch) per-example losses
    int *labels;                          // (max_batch) the current batch's labels: one of batch_labels
    float *scratch;                       // split-K partial sums of the weight gradients (or NULL)
    int *perm;                            // (N train) this epoch's permutation
    int *step;                            // the device step counter (kernels/fast/ops/softmax.cuh)
    float *step_losses;                   // (steps per epoch) each step's mean loss
    // the two streams beside the caller's, one for the weight gradients (and the next step's batch:
    // train_steps) and one for the bias gradients (model_backward_update), and the events that order them
    cudaStream_t side, bias_stream;
    cudaEvent_t ev_dout[MAX_LAYERS], ev_dinp[MAX_LAYERS], ev_side_done, ev_bias_done, ev_step;
    cudaEvent_t ev_dout_t[MAX_LAYERS];    // dout_t[l] written (model_tf32k)
    cudaEvent_t ev_act[MAX_LAYERS];       // acts[l] written, for the side stream's inp_t[l] (model_tf32k, model_tf32k0)
    cudaEvent_t ev_x_t;                   // inp_t[0] written (model_tf32k0)
    StepGraph graphs[FAST_MAX_GRAPHS];    // the runs of steps captured so far (run_steps)
    int num_graphs;
    FusedPlan fused;                      // -f 2: fused.ok when the model takes the fused step (model_use_fused)
    float *head_part;                     // the deep fused step's shares of the logits (FusedDeepArgs), or NULL
    float *fused_dr;                      // and -x 1's TF32 copies of the hidden gradients its dinp tiles read
                                          // (FusedDeepArgs.dacts_r, layers 2 .. L - 1 one after another), or NULL
    long long *fused_prof;                // NULL, or where it stamps its phases (dev/fused_profile.cu)
} Model;

// whether -x 2 keeps BF16 copies for this model: a hidden layer, and every width but the classes a
// multiple of 8 (the BF16-operand kernel copies 16 bytes, 8 values, at a time: kernels/fast/matmul/mma_bf16.cuh;
// the weights' slices of the flat buffer then start 16-byte aligned too)
static int model_bf16_fits(const int *sizes, int L) {
    if (L < 2) return 0;
    for (int l = 0; l < L; l++)
        if (sizes[l] % 8 != 0) return 0;
    return 1;
}

static void model_free_bf16(Model *m) {
    cudaCheck(cudaFree(m->params_bf16));
    m->params_bf16 = NULL;
    for (int l = 0; l <= m->L; l++) {
        cudaCheck(cudaFree(m->acts_bf16[l]));
        cudaCheck(cudaFree(m->dacts_bf16[l]));
        m->acts_bf16[l] = m->dacts_bf16[l] = NULL;
    }
}

static void model_free_tf32k(Model *m) {
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaFree(m->params_tf32t[i]));
        m->params_tf32t[i] = NULL;
    }
    for (int l = 0; l < m->L; l++) {
        cudaCheck(cudaFree(m->inp_t[l]));
        cudaCheck(cudaFree(m->dout_r[l]));
        cudaCheck(cudaFree(m->dout_t[l]));
        m->inp_t[l] = m->dout_r[l] = m->dout_t[l] = NULL;
    }
}

// -x 1's products on the K-major TF32 kernel (kernels/fast/matmul/matmul_fast.h, matmul_fast_tf32k_run; sm_90a),
// where their tiles fill the GPU (the big model's 4096-wide layers). Its operands must be K-major TF32
// values. The forward product's are (the batch, the hidden outputs and params_tf32 are stored rounded:
// model_forward_layers), so any layer but the head may take it as it is: model_tf32k_fwd. dinp's weight
// and both of dweight's operands are not: a hidden layer l >= 1 takes the kernel for those only where the
// model keeps the copies (Model's inp_t etc., made at model_build when the training batch fits) and
// all three products fit at this batch: model_tf32k. (W's slices must start 16-byte aligned too.)
static int model_tf32k_fwd(const Model *m, int l, int bs) {
    return m->prec == PREC_TF32 && l <= m->L - 2 && m->w_off[l] % 4 == 0 &&
           matmul_fast_tf32k_fits(bs, m->sizes[l + 1], m->sizes[l]);
}
static int model_tf32k_fits(const Model *m, int l, int bs) {   // (the forward product's conditions, then dinp's and dW's)
    const int IN = m->sizes[l], OUT = m->sizes[l + 1];
    return l >= 1 && model_tf32k_fwd(m, l, bs) && matmul_fast_tf32k_fits(bs, IN, OUT) &&
           matmul_fast_tf32k_fits(OUT, IN, bs);
}
static int model_tf32k(const Model *m, int l, int bs) { return m->inp_t[l] != NULL && model_tf32k_fits(m, l, bs); }
// Layer 0 has no dinp: its dW takes the kernel, with the SGD step in its epilogue, where its forward
// product does and layer 1 takes it (whose dinp then also stores its output rounded and transposed,
// dW's operand dout_t[0]; the forward pass transposes the batch, inp_t[0]).
static int model_tf32k0_fits(const Model *m, int bs) {
    return m->L >= 3 && model_tf32k_fits(m, 1, bs) && model_tf32k_fwd(m, 0, bs) &&
           matmul_fast_tf32k_fits(m->sizes[1], m->sizes[0], bs);
}
static int model_tf32k0(const Model *m, int bs) { return m->inp_t[0] != NULL && model_tf32k0_fits(m, bs); }

// n_train: rows of the permutation; steps_per_epoch: entries of step_losses; kmajor: 0 leaves out -x 1's
// K-major copies (model_tf32k), for a caller whose products read the FP32 tensors (-g)
static void model_build(Model *m, const int *sizes, int L, int act, int B, int max_batch, int prec, int n_train,
                        int steps_per_epoch, int kmajor = 1) {
    memset(m, 0, sizeof(*m));
    m->L = L;
    m->act = act;
    m->B = B;
    m->max_batch = max_batch;
    m->prec = prec;
    memcpy(m->sizes, sizes, sizeof(int) * (size_t)(L + 1));
    m->num_params = param_layout(sizes, L, m->w_off, m->b_off);
    size_t pbytes = m->num_params * sizeof(float);
    m->params = (float *)cudaMallocCheck(pbytes, "the parameters");
    m->grads = (float *)cudaMallocCheck(pbytes, "the gradients");
    m->mbuf = (float *)cudaMallocCheck(pbytes, "the momentum buffer");
    cudaCheck(cudaMemset(m->mbuf, 0, pbytes));
    if (prec == PREC_TF32) {
        m->params_tf32 = (float *)cudaMallocCheck(pbytes, "the TF32 copy of the weights");
        cudaCheck(cudaMemset(m->params_tf32, 0, pbytes));
    }
    for (int l = 1; l < L && kmajor; l++)
        if (model_tf32k_fits(m, l, B)) {
            for (int i = 0; i < 2; i++)
                if (m->params_tf32t[i] == NULL) {
                    m->params_tf32t[i] = (float *)cudaMallocCheck(pbytes, "the transposed TF32 copies of the weights");
                    cudaCheck(cudaMemset(m->params_tf32t[i], 0, pbytes));
                }
            const size_t in = (size_t)B * sizes[l] * sizeof(float), out = (size_t)B * sizes[l + 1] * sizeof(float);
            m->inp_t[l] = (float *)cudaMallocCheck(in, "the transposed TF32 activations");
            m->dout_r[l] = (float *)cudaMallocCheck(out, "the TF32 activation gradients");
            m->dout_t[l] = (float *)cudaMallocCheck(out, "the transposed TF32 activation gradients");
        }
    if (kmajor && model_tf32k0_fits(m, B)) {
        m->inp_t[0] = (float *)cudaMallocCheck((size_t)B * sizes[0] * sizeof(float), "the transposed batch");
        m->dout_t[0] = (float *)cudaMallocCheck((size_t)B * sizes[1] * sizeof(float),
                                                "the transposed TF32 activation gradients");
    }
    if (prec == PREC_BF16 && model_bf16_fits(sizes, L)) {
        m->params_bf16 = (__nv_bfloat16 *)cudaMallocCheck(m->num_params * 2, "the BF16 copy of the weights");
        cudaCheck(cudaMemset(m->params_bf16, 0, m->num_params * 2));
        for (int l = 0; l < L; l++) {
            const size_t bytes = (size_t)max_batch * sizes[l] * 2;
            if (l <= L - 2) m->acts_bf16[l] = (__nv_bfloat16 *)cudaMallocCheck(bytes, "the BF16 activations");
            if (l >= 1) m->dacts_bf16[l] = (__nv_bfloat16 *)cudaMallocCheck(bytes, "the BF16 activation gradients");
        }
    }
    size_t scratch = 0;
    for (int l = 0; l <= L; l++) {
        size_t bytes = (size_t)max_batch * sizes[l] * sizeof(float);
        m->acts[l] = (float *)cudaMallocCheck(bytes, "the activations");
        m->dacts[l] = (float *)cudaMallocCheck(bytes, "the activation gradients");
        // (the deep fused step's TMA tiles read whole boxes of rows of both, past a short batch's last:
        // values that reach no output, but read, so written once here)
        cudaCheck(cudaMemset(m->acts[l], 0, bytes));
        cudaCheck(cudaMemset(m->dacts[l], 0, bytes));
        if (l < L) {
            size_t s = matmul_fast_scratch_floats(max_batch, sizes[l], sizes[l + 1]);
            scratch = s > scratch ? s : scratch;
        }
    }
    m->scratch = scratch ? (float *)cudaMallocCheck(scratch * sizeof(float), "the split-K scratch") : NULL;
    m->losses = (float *)cudaMallocCheck((size_t)max_batch * sizeof(float), "the losses");
    m->labels = (int *)cudaMallocCheck((size_t)max_batch * sizeof(int), "the labels");
    m->batches[0] = m->acts[0];
    m->batch_labels[0] = m->labels;
    m->batches[1] = (float *)cudaMallocCheck((size_t)max_batch * sizes[0] * sizeof(float), "the activations");
    cudaCheck(cudaMemset(m->batches[1], 0, (size_t)max_batch * sizes[0] * sizeof(float)));
    m->batch_labels[1] = (int *)cudaMallocCheck((size_t)max_batch * sizeof(int), "the labels");
    m->perm = (int *)cudaMallocCheck((size_t)(n_train > 0 ? n_train : 1) * sizeof(int), "the permutation");
    m->step = (int *)cudaMallocCheck(sizeof(int), "the step counter");
    m->step_losses = (float *)cudaMallocCheck((size_t)steps_per_epoch * sizeof(float), "the step losses");
    cudaCheck(cudaMemset(m->step, 0, sizeof(int)));
    // (The main stream carries the critical path; a higher priority for it than these two gains nothing.)
    cudaCheck(cudaStreamCreateWithFlags(&m->side, cudaStreamNonBlocking));
    cudaCheck(cudaStreamCreateWithFlags(&m->bias_stream, cudaStreamNonBlocking));
    for (int l = 0; l < L; l++) {
        cudaCheck(cudaEventCreateWithFlags(&m->ev_dout[l], cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&m->ev_dinp[l], cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&m->ev_dout_t[l], cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&m->ev_act[l], cudaEventDisableTiming));
    }
    cudaCheck(cudaEventCreateWithFlags(&m->ev_x_t, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&m->ev_side_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&m->ev_bias_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&m->ev_step, cudaEventDisableTiming));
}

// the captured graphs: they hold this model's buffers, so they go with it
static void free_graphs(Model *m) {
    for (int i = 0; i < m->num_graphs; i++) cudaCheck(cudaGraphExecDestroy(m->graphs[i].exec));
    m->num_graphs = 0;
}

static void model_free(Model *m) {
    free_graphs(m);
    cudaCheck(cudaFree(m->params));
    cudaCheck(cudaFree(m->grads));
    cudaCheck(cudaFree(m->mbuf));
    cudaCheck(cudaFree(m->params_tf32));
    model_free_bf16(m);
    model_free_tf32k(m);
    for (int l = 0; l <= m->L; l++) {
        if (l > 0) cudaCheck(cudaFree(m->acts[l]));  // acts[0] is one of the batch buffers
        cudaCheck(cudaFree(m->dacts[l]));
    }
    for (int i = 0; i < 2; i++) {
        cudaCheck(cudaFree(m->batches[i]));
        cudaCheck(cudaFree(m->batch_labels[i]));
    }
    cudaCheck(cudaFree(m->scratch));  // (cudaFree(NULL) does nothing)
    cudaCheck(cudaFree(m->head_part));
    cudaCheck(cudaFree(m->fused_dr));
    cudaCheck(cudaFree(m->losses));
    cudaCheck(cudaFree(m->perm));
    cudaCheck(cudaFree(m->step));
    cudaCheck(cudaFree(m->step_losses));
    for (int l = 0; l < m->L; l++) {
        cudaCheck(cudaEventDestroy(m->ev_dout[l]));
        cudaCheck(cudaEventDestroy(m->ev_dinp[l]));
        cudaCheck(cudaEventDestroy(m->ev_dout_t[l]));
        cudaCheck(cudaEventDestroy(m->ev_act[l]));
    }
    cudaCheck(cudaEventDestroy(m->ev_x_t));
    cudaCheck(cudaEventDestroy(m->ev_side_done));
    cudaCheck(cudaEventDestroy(m->ev_bias_done));
    cudaCheck(cudaEventDestroy(m->ev_step));
    cudaCheck(cudaStreamDestroy(m->side));
    cudaCheck(cudaStreamDestroy(m->bias_stream));
}

// the weights' TF32 or BF16 copies made from params again, after anything but an optimizer step wrote
// them (the initial draw, a checkpoint, a broadcast, a test)
static void model_sync_copies(Model *m, cudaStream_t stream) {
    if (m->params_tf32) round_tf32_copy(m->params_tf32, m->params, m->num_params, stream);
    for (int l = 1; l < m->L; l++)   // (into the copy the next step's dinp reads; layer 0 has no dinp)
        if (m->inp_t[l])
            tf32_transpose(m->params_tf32t[m->tf32t_parity] + m->w_off[l], NULL, m->params_tf32 + m->w_off[l],
                           m->sizes[l + 1], m->sizes[l], stream);
    if (m->params_bf16) matmul_fast_bf16_copy(m->params_bf16, m->params, m->num_params, stream);
}

// nn.Linear's init, W and b uniform in [-1/sqrt(IN), 1/sqrt(IN)], drawn on the device by cuRAND's
// Philox generator (kernels/data.cuh): the same numbers as train_mlp.cu and model_init_params_cpu
static void model_init_params(Model *m, uint64_t seed, cudaStream_t stream) {
    for (int l = 0; l < m->L; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        float bound = 1.0f / sqrtf((float)IN);
        size_t n = (size_t)OUT * IN + OUT;  // W then b, contiguous
        init_uniform_kernel<<<(unsigned)CEIL_DIV(n, (size_t)256), 256, 0, stream>>>(m->params + m->w_off[l], n, bound,
                                                                                    seed, m->w_off[l]);
        cudaCheck(cudaGetLastError());
    }
    model_sync_copies(m, stream);
}

// ----------------------------------------------------------------------------
// forward, loss, backward and update

// The BF16 copies layer l's product prod reads and writes (MatmulFastBf16), or NULL where there are
// none. The hidden layers' products (l <= L-2) read copies; the head layer's read FP32 (its logits and
// their gradient have no copies; with the fused head it is not a matmul anyway), but its dinp, the
// last hidden layer's gradient, is the next products' operand: it is written a second time.
static const MatmulFastBf16 *model_bf16(const Model *m, MfProduct prod, int l, MatmulFastBf16 *bf) {
    if (m->params_bf16 == NULL) return NULL;
    const bool hidden = l <= m->L - 2;
    const __nv_bfloat16 *w = m->params_bf16 + m->w_off[l];
    if (prod == MF_FWD) *bf = {hidden ? m->acts_bf16[l] : NULL, hidden ? w : NULL, hidden ? m->acts_bf16[l + 1] : NULL};
    else if (prod == MF_DINP) *bf = {hidden ? m->dacts_bf16[l + 1] : NULL, hidden ? w : NULL, m->dacts_bf16[l]};
    else *bf = {hidden ? m->dacts_bf16[l + 1] : NULL, hidden ? m->acts_bf16[l] : NULL, NULL};
    return bf;
}

// the precision argument of the backward products' launchers (kernels/fast/matmul/matmul_fast.h): TF32 rounds
// their operands (the gradients are not TF32 values), BF16 rounds every product's
static int model_mm_prec(const Model *m) {
    return m->prec == PREC_TF32 ? MF_TF32_ROUND : m->prec == PREC_BF16 ? MF_BF16 : 0;
}

// How a batch of bs rows is gathered into acts[0] (kernels/fast/ops/gather.cuh): -x 1 rounds it to
// TF32. In FP32 it is the pixel bytes themselves where both of the first layer's products plan a
// 3xTF32 kernel (MF_FP32_PIXELS, kernels/fast/matmul/matmul_fast.h): a byte is exact in TF32, so each takes
// two TF32 products instead of three, with the same results within FP32's rounding (the kernels
// apply the / 255). Whoever gathers a batch sets m->x_pixels to say which it holds.
static int model_gather_mode(const Model *m, int bs) {
    if (m->prec == PREC_TF32) return GATHER_TF32;
    if (m->prec != PREC_FP32 || m->L < 2) return GATHER_FP32;   // (one layer: the fused head reads the batch)
    const int IN = m->sizes[0], OUT = m->sizes[1];
    return matmul_fast_pixels_fit(MF_FWD, bs, OUT, IN, 0) &&
           matmul_fast_pixels_fit(MF_DWEIGHT, OUT, IN, bs, m->scratch != NULL) ? GATHER_PIXELS : GATHER_FP32;
}

// the precision argument of the first layer's products on acts[0]: prec, or FP32 on pixels
static int model_x_prec(const Model *m, int prec) { return m->x_pixels ? MF_FP32_PIXELS : prec; }

// acts[0] holds bs rows; runs the first `layers` layers, leaving their outputs in acts[1..layers].
// With TF32 (-x 1) every forward product's operands are TF32 values already: the batch is gathered
// rounded, each hidden layer's output is stored rounded (the logits are not), and the weights come
// from params_tf32, which the optimizer steps keep equal to round_tf32(params). The tensor cores
// would round them anyway; stored so, the kernels can skip their rounding (MF_TF32_EXACT,
// kernels/fast/matmul/matmul_fast.h). The backward products read the same activations (relu' sees the
// same sign; sigmoid' and tanh' see the value the tensor cores saw), and the FP32 weights.
// With BF16 (-x 2) the products' operands are rounded to BF16. Where the model has BF16 copies
// (params_bf16: model_bf16_fits), the hidden layers' products read those instead of the FP32 tensors,
// the same values, at half the bytes, on the BF16-operand kernels (kernels/fast/matmul/wgmma_kmajor.cuh): the
// batch is copied rounded before the first layer, each hidden output and each hidden gradient is
// stored a second time, rounded, by the kernel that stores it (the BF16-operand kernel's epilogue, the
// head; after an FP32-operand product, a copy kernel), and the weights by the optimizer (model_bf16).
// train: a training step's forward pass; with -x 1 the side stream then also transposes each hidden
// output whose layer takes the K-major kernel in the backward pass (model_tf32k: inp_t), beside the
// next forward product (which takes that kernel too, so it is launched without PDL: the event between
// keeps pdl.cuh's rule); and the batch, for layer 0's dW there (model_tf32k0).
static void model_forward_layers(Model *m, int bs, int layers, int train, cudaStream_t stream) {
    if (m->acts_bf16[0] && layers > 0)
        matmul_fast_bf16_copy(m->acts_bf16[0], m->acts[0], (size_t)bs * m->sizes[0], stream);
    if (train && layers > 0 && model_tf32k0(m, bs)) {   // (the first product takes the kernel: no PDL)
        cudaCheck(cudaEventRecord(m->ev_act[0], stream));
        cudaCheck(cudaStreamWaitEvent(m->side, m->ev_act[0], 0));
        tf32_transpose(m->inp_t[0], NULL, m->acts[0], bs, m->sizes[0], m->side);
        cudaCheck(cudaEventRecord(m->ev_x_t, m->side));
    }
    for (int l = 0; l < layers; l++) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        const float *b = m->params + m->b_off[l];
        int act = l < m->L - 1 ? m->act : ACT_NONE;  // the last layer's outputs are the logits
        if (m->prec == PREC_TF32) {
            if (model_tf32k_fwd(m, l, bs)) {
                const MatmulFastEpi epi = {MF_EPI_FORWARD, act, b, NULL, {}, 1};
                matmul_fast_tf32k_run(MF_FWD, m->acts[l + 1], m->acts[l], m->params_tf32 + m->w_off[l], bs, OUT, IN,
                                      &epi, NULL, 0, stream);
            } else {
                matmul_forward_fast(m->acts[l + 1], m->acts[l], m->params_tf32 + m->w_off[l], b, bs, IN, OUT, act,
                                    MF_TF32_EXACT, l < m->L - 1, stream);
            }
            if (train && l + 1 < m->L && model_tf32k(m, l + 1, bs)) {
                cudaCheck(cudaEventRecord(m->ev_act[l + 1], stream));
                cudaCheck(cudaStreamWaitEvent(m->side, m->ev_act[l + 1], 0));
                tf32_transpose(m->inp_t[l + 1], NULL, m->acts[l + 1], bs, OUT, m->side);
            }
        } else if (m->prec == PREC_BF16) {
            MatmulFastBf16 bf;
            matmul_forward_fast(m->acts[l + 1], m->acts[l], m->params + m->w_off[l], b, bs, IN, OUT, act, MF_BF16, 0,
                                stream, model_bf16(m, MF_FWD, l, &bf));
        }
        else
            matmul_forward_fast(m->acts[l + 1], m->acts[l], m->params + m->w_off[l], b, bs, IN, OUT, act,
                                l == 0 ? model_x_prec(m, 0) : 0, 0, stream);
    }
}

// acts[0] holds the batch (bs rows): every layer's output, the logits in acts[L]
static void model_forward(Model *m, int bs, cudaStream_t stream) { model_forward_layers(m, bs, m->L, 0, stream); }

// With at most HEAD_MAX_C classes the last layer, the loss and the gradients down to the last
// hidden layer's output are one kernel (kernels/fast/ops/head.cuh)
static int model_head_fused(const Model *m) { return head_fits(m->sizes[m->L]); }

// model_forward and train_mlp.cu's model_loss, fused: the logits, each row's loss, dlogits
// (dacts[L]), and the step's mean loss into step_losses[*step] with the device step counter moved
// on (kernels/fast/ops/softmax.cuh). With the fused head also dacts[L-1], the last hidden layer's
// gradient, ahead of model_backward_update; the head leaves the mean loss and the step counter to
// model_backward_update (head_batch_sums, on the bias stream). norm: the batch the loss is the mean
// over, bs on one GPU; under -g the global batch, of which these bs rows are one GPU's share.
static void model_forward_loss(Model *m, int bs, int norm, cudaStream_t stream) {
    int L = m->L;
    if (model_head_fused(m)) {
        model_forward_layers(m, bs, L - 1, 1, stream);
        // (with -x 1 on the K-major kernel in the layer below, dh rounded to TF32 too: model_backward_update)
        head_forward_backward(m->acts[L], m->dacts[L], L > 1 ? m->dacts[L - 1] : NULL, m->losses, m->acts[L - 1],
                              m->params + m->w_off[L - 1], m->params + m->b_off[L - 1], m->labels, bs,
                              m->sizes[L - 1], m->sizes[L], m->act, stream, norm, L > 1 ? m->dacts_bf16[L - 1] : NULL,
                              L > 2 && model_tf32k(m, L - 2, bs) ? m->dout_r[L - 2] : NULL);
    } else {
        model_forward_layers(m, bs, L, 1, stream);
        softmax_xent_forward_backward_fast(m->dacts[L], m->losses, m->step_losses, m->step, m->acts[L], m->labels, bs,
                                           m->sizes[L], stream, norm);
    }
}

// train_mlp.cu's model_backward and model_update, as three streams. Once dout of layer l
// (dacts[l+1]) exists:
//   main stream:  dinp = (dout · W) ⊙ act'(acts[l]), the activation's gradient fused in; the next
//                 layer down needs it, so this chain is the critical path;
//   side stream:  dW = doutᵀ · acts[l], beside dinp; then, once dinp has read W, W's SGD step;
//   bias stream:  db = Σ dout with b's SGD step fused in (only the next forward pass reads b);
//                 for the last layer after the fused head, with the step's mean loss and the step
//                 counter in the same kernel (head_batch_sums, kernels/fast/ops/head.cuh).
// The last layer's dinp is the fused head's (model_forward_loss) when it is used.
// The first layer has no dinp: its dW runs on main, after the last dinp, beside the side stream's
// last update. If the layer has fewer than FUSED_SGD_MAX_WEIGHTS weights its SGD step is fused into
// dW's epilogue (MatmulFastSgd), which saves a small model a kernel per step; above that the step is
// the SGD kernel after dW: the fused step is bound by memory latency (the matmul's few blocks per
// SM, one weight in flight per thread), the kernel is not (doc/fast.md has the measurements).
// (Fusing the step into every dW was slower for the wide model: dW would have to wait for dinp
// instead of running beside it.) With -x 1, a layer on the K-major kernel (model_tf32k) needs dout
// rounded (dinp's operand) and rounded and transposed (dW's): below the fused head, which stores the
// rounded copy itself, the side stream transposes it before dW and dinp starts at once; elsewhere main
// makes both first (ev_dout_t: the side stream's dW waits for it). Its dW takes the SGD
// step in its epilogue, which writes W, its momentum and its rounded copies: params_tf32 (what the next
// forward reads) and W^T into the params_tf32t that dinp does not read (Model's tf32t_parity), so dW
// runs beside dinp from start to end. (A layer with the copies at a batch too small for the kernel
// transposes its new weights after the SGD kernel.)
// The events carry the order: ev_dout[l] (dout ready) and ev_dinp[l]
// (W no longer read); at the end the main stream waits for the other two. In a CUDA graph capture
// the events become edges: the step is captured as a DAG with three branches, not a chain.
// keep_grads: the weight gradients are stored (a caller may read them); else the K-major kernel's SGD
// epilogue leaves them out (train_steps keeps only a run's last step's, as the fused steps do).
static void model_backward_update(Model *m, int bs, float lr, float momentum, float weight_decay, int keep_grads,
                                  cudaStream_t stream) {
    const int prec = model_mm_prec(m);
    const int par = m->tf32t_parity;   // -x 1's K-major dinp reads params_tf32t[par], SGD writes the other
    for (int l = m->L - 1; l >= 0; l--) {
        int IN = m->sizes[l], OUT = m->sizes[l + 1];
        const size_t w = m->w_off[l], b = m->b_off[l];
        const float *dout = m->dacts[l + 1];
        float *w_tf32 = m->params_tf32 ? m->params_tf32 + w : NULL;
        __nv_bfloat16 *w_bf16 = m->params_bf16 ? m->params_bf16 + w : NULL;
        MatmulFastBf16 bf_dw, bf_dinp;
        const MatmulFastBf16 *dw16 = model_bf16(m, MF_DWEIGHT, l, &bf_dw), *dinp16 = model_bf16(m, MF_DINP, l, &bf_dinp);
        // the K-major kernel's dW epilogue: the layer's SGD step (model_tf32k, model_tf32k0)
        const MatmulFastEpi sgd_epi = {MF_EPI_SGD, ACT_NONE, NULL, NULL,
                                       {m->params + w, m->mbuf + w, lr, momentum, weight_decay, w_tf32}, 0};
        cudaCheck(cudaEventRecord(m->ev_dout[l], stream));
        cudaCheck(cudaStreamWaitEvent(m->bias_stream, m->ev_dout[l], 0));
        if (l == m->L - 1 && model_head_fused(m))  // with the step's mean loss and the step counter
            head_batch_sums(m->grads + b, dout, bs, OUT, m->params + b, m->mbuf + b, lr, momentum, weight_decay,
                            m->step_losses, m->step, m->losses, m->bias_stream);
        else
            matmul_backward_dbias_fast(m->grads + b, dout, bs, OUT, m->params + b, m->mbuf + b, lr, momentum,
                                       weight_decay, m->bias_stream);
        // the split-K scratch (on GPUs without thread-block clusters) is one buffer: the first layer's
        // dW, on this stream, waits for the side stream's dW of layer 1, which uses it too
        if (l == 0 && m->L > 1 && m->scratch) {
            cudaCheck(cudaEventRecord(m->ev_side_done, m->side));
            cudaCheck(cudaStreamWaitEvent(stream, m->ev_side_done, 0));
        }
        if (l > 0 && model_tf32k(m, l, bs)) {
            // -x 1 on the K-major kernel: dout rounded and transposed (for both products), the layer's
            // input transposed by the forward pass, W's transposed copy by the last SGD epilogue
            if (l == m->L - 2 && model_head_fused(m)) {   // (the head stored dout_r: ev_dout[l] above)
                cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dout[l], 0));
                tf32_transpose(m->dout_t[l], NULL, m->dout_r[l], bs, OUT, m->side);
            } else {
                tf32_transpose(m->dout_t[l], m->dout_r[l], dout, bs, OUT, stream);
                cudaCheck(cudaEventRecord(m->ev_dout_t[l], stream));
                cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dout_t[l], 0));
            }
            const MatmulFastEpi dinp = {MF_EPI_DINP, m->act, NULL, m->acts[l], {}, 0};
            matmul_fast_tf32k_run(MF_DWEIGHT, keep_grads ? m->grads + w : NULL, m->dout_t[l], m->inp_t[l], OUT, IN,
                                  bs, &sgd_epi, m->params_tf32t[1 - par] + w, 0, m->side);
            matmul_fast_tf32k_run(MF_DINP, m->dacts[l], m->dout_r[l], m->params_tf32t[par] + w, bs, IN, OUT, &dinp,
                                  l == 1 && model_tf32k0(m, bs) ? m->dout_t[0] : NULL, 0, stream);
            continue;   // (W has taken its step)
        } else if (l > 0) {
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dout[l], 0));
            matmul_backward_dweight_fast(m->grads + w, dout, m->acts[l], bs, IN, OUT, m->scratch, prec, NULL,
                                         m->side, dw16);
            if (l < m->L - 1 || !model_head_fused(m))  // (the fused head has computed the last layer's dinp)
                matmul_backward_dinp_fast(m->dacts[l], dout, m->params + w, m->acts[l], m->act, bs, IN, OUT, prec,
                                          stream, dinp16);
        }
        if (l > 0) {
            cudaCheck(cudaEventRecord(m->ev_dinp[l], stream));
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dinp[l], 0));
            sgd_update_fast(m->params + w, m->grads + w, m->mbuf + w, w_tf32, (size_t)OUT * IN, lr, momentum,
                            weight_decay, 1, m->side, w_bf16);
            if (m->inp_t[l]) tf32_transpose(m->params_tf32t[1 - par] + w, NULL, w_tf32, OUT, IN, m->side);
        } else if (model_tf32k0(m, bs)) {   // (layer 0 on the K-major kernel, its SGD step in the epilogue)
            cudaCheck(cudaStreamWaitEvent(stream, m->ev_x_t, 0));
            matmul_fast_tf32k_run(MF_DWEIGHT, keep_grads ? m->grads + w : NULL, m->dout_t[0], m->inp_t[0], OUT, IN, bs,
                                  &sgd_epi, NULL, 0, stream);
        } else if ((size_t)OUT * IN < FUSED_SGD_MAX_WEIGHTS && w_bf16 == NULL) {   // (the SGD kernel writes the copy)
            MatmulFastSgd sgd = {m->params + w, m->mbuf + w, lr, momentum, weight_decay, w_tf32};
            matmul_backward_dweight_fast(m->grads + w, dout, m->acts[l], bs, IN, OUT, m->scratch, model_x_prec(m, prec),
                                         &sgd, stream, dw16);
        } else {
            matmul_backward_dweight_fast(m->grads + w, dout, m->acts[l], bs, IN, OUT, m->scratch, model_x_prec(m, prec),
                                         NULL, stream, dw16);
            sgd_update_fast(m->params + w, m->grads + w, m->mbuf + w, w_tf32, (size_t)OUT * IN, lr, momentum,
                            weight_decay, 1, stream, w_bf16);
        }
    }
    cudaCheck(cudaEventRecord(m->ev_side_done, m->side));
    cudaCheck(cudaEventRecord(m->ev_bias_done, m->bias_stream));
    cudaCheck(cudaStreamWaitEvent(stream, m->ev_side_done, 0));
    cudaCheck(cudaStreamWaitEvent(stream, m->ev_bias_done, 0));
    if (m->params_tf32t[0]) m->tf32t_parity ^= 1;
}

// ----------------------------------------------------------------------------
// one training step, and runs of steps replayed from CUDA graphs

// Forward, loss, backward and update on the bs rows already in acts[0] and labels.
static void train_step_on_batch(Model *m, int bs, float lr, float momentum, float weight_decay, cudaStream_t stream) {
    model_forward_loss(m, bs, bs, stream);
    model_backward_update(m, bs, lr, momentum, weight_decay, 1, stream);
}

// One step on bs rows, its kernels launched from the host (-f 0); the batch is rows
// (*step) * B ... of the permutation.
static void train_step(Model *m, const DeviceData *train, int bs, const Config *c, cudaStream_t stream) {
    const int mode = model_gather_mode(m, bs);
    gather_batch_step(m->acts[0], m->labels, train->images, train->labels, m->perm, m->step, 0, m->B, bs, train->D,
                      mode, stream);
    m->x_pixels = mode == GATHER_PIXELS;
    train_step_on_batch(m, bs, c->lr, c->momentum, c->weight_decay, stream);
}

// Enqueues n steps, the last with last_bs rows, for a graph capture (run_steps). The same steps as n
// train_step()s, with one change in the order: step i+1's batch is gathered into the other of the
// two batch buffers while step i runs, on the side stream, from the start of step i (which it waits
// for, ev_step) to well before the side stream's first weight gradient. The other buffer was last
// read by step i-1, which has finished (its end joined every stream into the main one), and the step
// counter holds i (step i-1 moved it on), so the gather takes the rows of step *step + 1. The gather
// is then off the critical path, and off the bias stream, which carries the small model's critical
// path after the fused head. The first step of a run gathers its own batch: a run (one graph)
// depends on no other. (The event ev_step sits before the first forward kernel, which is launched
// with PDL: in the captured graph the gather's edge comes from the nodes before the event, and
// nothing orders the gather against that kernel: kernels/fast/ops/pdl.cuh.)
static void train_steps(Model *m, const DeviceData *train, int n, int last_bs, const Config *c,
                        cudaStream_t stream) {
    for (int i = 0; i < n; i++) {
        const int bs = i == n - 1 ? last_bs : m->B, next_bs = i + 1 == n - 1 ? last_bs : m->B;
        m->acts[0] = m->batches[i % 2];
        m->labels = m->batch_labels[i % 2];
        m->x_pixels = model_gather_mode(m, bs) == GATHER_PIXELS;   // (how this batch was, or is now, gathered)
        if (i + 1 < n) {
            cudaCheck(cudaEventRecord(m->ev_step, stream));
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_step, 0));
            gather_batch_step(m->batches[(i + 1) % 2], m->batch_labels[(i + 1) % 2], train->images, train->labels,
                              m->perm, m->step, 1, m->B, next_bs, train->D, model_gather_mode(m, next_bs), m->side);
        }
        if (i == 0)
            gather_batch_step(m->acts[0], m->labels, train->images, train->labels, m->perm, m->step, 0, m->B, bs,
                              train->D, model_gather_mode(m, bs), stream);
        model_forward_loss(m, bs, bs, stream);
        model_backward_update(m, bs, c->lr, c->momentum, c->weight_decay, i == n - 1, stream);
    }
}

// Runs n steps, the last of them with last_bs rows, from a CUDA graph (-f 1). Such a run is the
// same work every time it occurs (the kernels find their rows through the device step counter), so
// it is captured once and replayed. An epoch has at most two kinds of run (log_every full steps,
// and the remainder at its end).
// With -x 1's two transposed copies of the weights (params_tf32t) a run's steps alternate between them
// from the parity it starts at, so that is part of the run's kind: a run of odd length leaves the next
// one at the other parity.
static void run_steps(Model *m, const DeviceData *train, int n, int last_bs, const Config *c, cudaStream_t stream) {
    StepGraph *g = NULL;
    const int parity = m->params_tf32t[0] ? m->tf32t_parity : 0;
    for (int i = 0; i < m->num_graphs; i++)
        if (m->graphs[i].n == n && m->graphs[i].last_bs == last_bs && m->graphs[i].parity == parity)
            g = &m->graphs[i];
    if (!g) {
        if (m->num_graphs == FAST_MAX_GRAPHS) die("", "internal: more than %d kinds of step run", FAST_MAX_GRAPHS);
        g = &m->graphs[m->num_graphs++];
        g->n = n;
        g->last_bs = last_bs;
        g->parity = parity;
        cudaGraph_t graph;
        cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        train_steps(m, train, n, last_bs, c, stream);   // (moves the parity on by n)
        cudaCheck(cudaStreamEndCapture(stream, &graph));
        cudaCheck(cudaGraphInstantiate(&g->exec, graph, 0));
        cudaCheck(cudaGraphDestroy(graph));
    }
    cudaCheck(cudaGraphLaunch(g->exec, stream));
    if (m->params_tf32t[0]) m->tf32t_parity = (parity + n) % 2;
}

// -f 2: whether the model takes a fused step: one hidden layer in FP32, kernels/fast/fused/fused_step.cuh;
// two or more hidden layers, kernels/fast/fused/fused_deep.cuh. m->fused.why says why not (the plan of
// the kernel for the model's depth). Returns m->fused.ok.
// any (-f 3): wherever it can run; else (-f 2) only where it is faster than the graphs (fused_deep_faster)
static FusedPlan fused_plan(const int *sizes, int L, int B, int prec, int any) {
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
// (The fused steps read and step the FP32 weights only: a model that takes them drops its BF16 copies,
// and its evaluation's forward products then read the FP32 tensors; and -x 1's K-major copies.)
static int model_use_fused(Model *m, int any) {
    m->fused = fused_plan(m->sizes, m->L, m->B, m->prec, any);
    if (m->fused.ok) {
        model_free_bf16(m);
        model_free_tf32k(m);
    }
    if (m->fused.ok && m->fused.deep && !m->head_part)
        m->head_part = (float *)cudaMallocCheck(
            fused_deep_head_part_floats(m->sizes, m->L, m->B) * sizeof(float),
            "the head's shares of the logits");
    if (m->fused.ok && m->fused.deep && m->fused.tma >= 2 && !m->fused_dr) {
        const size_t floats = fused_deep_dacts_r(m->sizes, m->L, m->B, NULL, NULL);
        m->fused_dr = (float *)cudaMallocCheck(floats * sizeof(float), "the TF32 copies of the hidden gradients");
        cudaCheck(cudaMemset(m->fused_dr, 0, floats * sizeof(float)));   // (read past a short batch, as dacts)
    }
    return m->fused.ok;
}

// fused_run for a deep model: the batches alternate between the two buffers, the first gathered into
// batches[0]; afterwards acts[0] and labels are the last step's, as after n train_step()s
static void fused_deep_run(Model *m, const DeviceData *train, int n, int last_bs, const Config *c,
                           cudaStream_t stream) {
    FusedDeepArgs a;
    memset(&a, 0, sizeof(a));
    a.params = m->params;
    a.mbuf = m->mbuf;
    a.grads = m->grads;
    a.params_tf32 = m->params_tf32;
    memcpy(a.w_off, m->w_off, sizeof(a.w_off));
    memcpy(a.b_off, m->b_off, sizeof(a.b_off));
    memcpy(a.acts, m->acts, sizeof(a.acts));
    memcpy(a.dacts, m->dacts, sizeof(a.dacts));
    if (m->fused_dr && m->fused.tma >= 2)
        fused_deep_dacts_r(m->sizes, m->L, m->B, m->fused_dr, a.dacts_r);
    memcpy(a.sizes, m->sizes, sizeof(a.sizes));
    for (int p = 0; p < 2; p++) {
        a.xbuf[p] = m->batches[p];
        a.labbuf[p] = m->batch_labels[p];
    }
    a.losses = m->losses;
    a.head_part = m->head_part;
    a.step_losses = m->step_losses;
    a.step = m->step;
    a.perm = m->perm;
    a.images = train->images;
    a.all_labels = train->labels;
    a.L = m->L;
    a.act = m->act;
    a.B = m->B;
    a.n = n;
    a.last_bs = last_bs;
    a.lr = c->lr;
    a.mu = c->momentum;
    a.wd = c->weight_decay;
    a.prof = m->fused_prof;
    fused_deep_steps(&m->fused, m->prec, &a, stream);
    m->acts[0] = m->batches[(n - 1) % 2];
    m->labels = m->batch_labels[(n - 1) % 2];
    m->x_pixels = m->prec == PREC_FP32;   // (its FP32 kernel gathers pixel bytes: kernels/fast/fused/fused_deep.cuh)
}

// Runs n steps, the last of them with last_bs rows, as one kernel (-f 2, after model_use_fused): the
// same steps as n train_step()s, the batch gathered inside it into acts[0] = batches[0] (a deep
// model's: fused_deep_run).
static void fused_run(Model *m, const DeviceData *train, int n, int last_bs, const Config *c, cudaStream_t stream) {
    m->x_pixels = 0;   // (the one-hidden-layer fused step gathers the values; the deep one: fused_deep_run)
    if (m->fused.deep) return fused_deep_run(m, train, n, last_bs, c, stream);
    m->acts[0] = m->batches[0];
    m->labels = m->batch_labels[0];
    FusedStepArgs a;
    memset(&a, 0, sizeof(a));
    a.params = m->params;
    a.mbuf = m->mbuf;
    a.grads = m->grads;
    a.w0 = m->w_off[0];
    a.b0 = m->b_off[0];
    a.w1 = m->w_off[1];
    a.b1 = m->b_off[1];
    a.x = m->acts[0];
    a.h = m->acts[1];
    a.logits = m->acts[2];
    a.dh = m->dacts[1];
    a.dz = m->dacts[2];
    a.losses = m->losses;
    a.labels_out = m->labels;
    a.step_losses = m->step_losses;
    a.step = m->step;
    a.perm = m->perm;
    a.images = train->images;
    a.all_labels = train->labels;
    a.B = m->B;
    a.IN = m->sizes[0];
    a.H = m->sizes[1];
    a.C = m->sizes[2];
    a.act = m->act;
    a.n = n;
    a.last_bs = last_bs;
    a.lr = c->lr;
    a.mu = c->momentum;
    a.wd = c->weight_decay;
    a.prof = m->fused_prof;
    fused_steps(&m->fused, &a, stream);
}

// ----------------------------------------------------------------------------
// evaluation on the device: mean loss and accuracy over a whole dataset

typedef struct {
    float *losses, *correct;  // (n) per example
    double *sums;             // (2) Σ losses, Σ correct
} EvalBuffers;

static void eval_buffers_alloc(EvalBuffers *e, int n) {
    e->losses = (float *)cudaMallocCheck((size_t)n * sizeof(float), "the evaluation losses");
    e->correct = (float *)cudaMallocCheck((size_t)n * sizeof(float), "the evaluation results");
    e->sums = (double *)cudaMallocCheck(2 * sizeof(double), "the evaluation sums");
}

static void eval_buffers_free(EvalBuffers *e) {
    cudaCheck(cudaFree(e->losses));
    cudaCheck(cudaFree(e->correct));
    cudaCheck(cudaFree(e->sums));
}

// In batches of max_batch rows; each row's loss and result stay on the device, and one block adds
// them all up in a fixed order (kernels/softmax_xent.cuh): one copy back per evaluation.
static void evaluate(Model *m, const DeviceData *d, EvalBuffers *e, double *loss, double *accuracy,
                     cudaStream_t stream) {
    int C = m->sizes[m->L];
    for (int start = 0; start < d->n; start += m->max_batch) {
        int bs = d->n - start < m->max_batch ? d->n - start : m->max_batch;
        gather_rows_fast(m->acts[0], m->labels, d->images, d->labels, start, bs, d->D,
                         m->prec == PREC_TF32 ? GATHER_TF32 : GATHER_FP32, stream);
        m->x_pixels = 0;
        model_forward(m, bs, stream);
        softmax_xent_eval_kernel<<<CEIL_DIV(bs, 128), 128, 0, stream>>>(e->losses + start, e->correct + start,
                                                                        m->acts[m->L], m->labels, bs, C);
        cudaCheck(cudaGetLastError());
    }
    sum_two_kernel<<<1, LOSS_THREADS, 0, stream>>>(e->sums, e->losses, e->correct, d->n);
    cudaCheck(cudaGetLastError());
    double sums[2];
    cudaCheck(cudaMemcpyAsync(sums, e->sums, sizeof(sums), cudaMemcpyDeviceToHost, stream));
    cudaCheck(cudaStreamSynchronize(stream));
    *loss = sums[0] / d->n;
    *accuracy = sums[1] / d->n;
}

}  // namespace fast

// ----------------------------------------------------------------------------
// main: the training loop

#ifndef TESTING
// A run of steps start + 1 .. end of an epoch (1-based), enqueued with a copy of its losses into
// pinned host memory, then the event `done`.
typedef struct {
    int start, end;
    cudaEvent_t done;
} StepRun;

// Waits for run k and prints its log line: the mean of its steps' losses, and the time a step since
// *last_ms (the GPU's time from the epoch's start event to the run's end, so the host's waits do
// not count). Exits when the run has diverged (log_step).
static void log_step_run(RunLog *log, const StepRun *k, const float *losses_host, cudaEvent_t epoch_start,
                         int epoch, float *last_ms) {
    cudaCheck(cudaEventSynchronize(k->done));
    float ms;
    cudaCheck(cudaEventElapsedTime(&ms, epoch_start, k->done));
    const int n = k->end - k->start;
    double sum = 0;
    for (int i = k->start; i < k->end; i++) sum += losses_host[i];
    log_losses(log, sum, n);
    log_step(log, epoch, k->end, (ms - *last_ms) / n);
    *last_ms = ms;
}

// the parameters and momentum, copied to the host for a checkpoint (run/run.h)
static void fetch_state(void *model, float *params, float *mbuf) {
    const fast::Model *m = (const fast::Model *)model;
    cudaCheck(cudaMemcpy(params, m->params, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(mbuf, m->mbuf, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
}

// -e and -p: the forward pass on n rows of host inputs x, the logits back to the host (run/use.h).
// With TF32 the inputs go in rounded, as the training batches do (model_forward).
static void forward_logits(void *model, const float *x, int n, float *logits) {
    fast::Model *m = (fast::Model *)model;
    const size_t nx = (size_t)n * m->sizes[0];
    float *xr = (float *)mallocCheck(nx * sizeof(float));
    for (size_t i = 0; i < nx; i++) xr[i] = m->prec == PREC_TF32 ? round_tf32(x[i]) : x[i];
    cudaCheck(cudaMemcpy(m->acts[0], xr, nx * sizeof(float), cudaMemcpyHostToDevice));
    free(xr);
    fast::model_forward(m, n, 0);
    cudaCheck(cudaMemcpy(logits, m->acts[m->L], (size_t)n * m->sizes[m->L] * sizeof(float), cudaMemcpyDeviceToHost));
}

// ----------------------------------------------------------------------------
// several GPUs: data-parallel training through NCCL, one process per GPU
//
// Each rank is a process with one GPU. torchrun, mpirun or srun start them (one per GPU, on one
// machine or several), or -g N starts N of them on this machine (job_spawn, in main). They meet
// through run/job.h: the launcher's environment says which rank this is and where rank 0 listens;
// its TCP bootstrap hands rank 0's NCCL id and the run's place (a resumed run's epoch, step and
// shuffle) to the others; its sockets then watch that every rank is alive, and carry the vote
// that stops them all at the same step.
//
// Every rank loads the data and draws the same epoch permutations from the same seed, so the
// global batches come in the one-GPU order; rank r takes its share of each, rows [first, first +
// rows) (dp_share). Rank 0 draws the initial weights (or loads -r's checkpoint) and broadcasts
// them and the momentum; from then on every rank takes the same SGD steps on the same summed
// gradient, so the parameters stay the same on all of them. Rank 0 alone prints, logs,
// evaluates and writes checkpoints; the others print only their errors.
//
// A step on each rank: its rows' forward pass and loss, with dlogits divided by the GLOBAL batch
// (model_forward_loss's norm), so that the gradients of the ranks' shares add up to the global
// batch's mean gradient; then dp_backward_update: model_backward_update's streams without its SGD
// steps, and a fourth, the communication stream, which sums each layer's gradients over the ranks
// (ncclAllReduce, in place) as soon as that layer's dW and db are written, while the backward pass
// goes on with the layers below, and then takes that layer's SGD step (sgd_update_fast over the
// layer's W and b, which lie next to each other in the flat buffers). The fused SGD of the one-GPU
// path is off here: the step must come after the all-reduce.
//
// The batch: -b must be a multiple of the ranks (each takes -b/N rows). The last step of an epoch
// may be short: its rows are split as evenly as possible, the first (rows % N) ranks taking one
// more, and the loss is still divided by that step's global rows; each rank needs at least one
// row of it (checked at the start).
//
// The steps are launched from the host, as -f 0 does (no graphs yet). Each log line's losses are
// summed over the ranks by one more all-reduce, and the ranks vote on stopping (job_agree): a
// Ctrl-C, SIGTERM or SIGHUP that reached any rank stops every rank after the same step, rank 0
// writes the checkpoint, and the others wait for it at their exit. A rank that ends with an
// error, or dies, ends the others within run/job.h's liveness timeout, each with a line naming it.

// -b must divide among the ranks; else 1 and the message in msg
static int batch_share_error(char *msg, size_t n, int B, int ranks) {
    if (B % ranks == 0) return 0;
    snprintf(msg, n, "-b %d does not divide among %d ranks (each takes -b/N rows of every batch); give a -b that is a "
             "multiple of %d", B, ranks, ranks);
    return 1;
}

#ifdef MLP_NCCL

// NCCL is not linked but loaded (dlopen) when a run of several ranks asks for it, so that the
// trainer on one GPU never needs the library: first the one make found (MLP_NCCL_LIB), then the
// loader's usual places. These are the functions the ranks call, with nccl.h's own types.
#ifndef MLP_NCCL_LIB
#define MLP_NCCL_LIB "libnccl.so.2"
#endif
static struct {
    decltype(&::ncclGetVersion) GetVersion;
    decltype(&::ncclGetErrorString) GetErrorString;
    decltype(&::ncclGetLastError) GetLastError;  // (NCCL 2.13 on; NULL before)
    decltype(&::ncclGetUniqueId) GetUniqueId;
    decltype(&::ncclCommInitRank) CommInitRank;
    decltype(&::ncclCommDestroy) CommDestroy;
    decltype(&::ncclCommAbort) CommAbort;
    decltype(&::ncclGroupStart) GroupStart;
    decltype(&::ncclGroupEnd) GroupEnd;
    decltype(&::ncclBroadcast) Broadcast;
    decltype(&::ncclAllReduce) AllReduce;
} nccl;

static void nccl_load(void) {
    const char *names[] = {MLP_NCCL_LIB, "libnccl.so.2", "libnccl.so"};
    void *lib = NULL;
    for (int i = 0; i < 3 && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        die("LD_LIBRARY_PATH=the directory of libnccl.so.2, or one GPU (no -g)", "cannot load NCCL (%s): %s",
            MLP_NCCL_LIB, dlerror());
#define NCCL_FN(field, name, required)                                                                \
    *(void **)&nccl.field = dlsym(lib, name);                                                           \
    if (!nccl.field && (required)) die("a newer NCCL", "the NCCL library loaded has no %s", name)
    NCCL_FN(GetVersion, "ncclGetVersion", 1);
    NCCL_FN(GetErrorString, "ncclGetErrorString", 1);
    NCCL_FN(GetLastError, "ncclGetLastError", 0);
    NCCL_FN(GetUniqueId, "ncclGetUniqueId", 1);
    NCCL_FN(CommInitRank, "ncclCommInitRank", 1);
    NCCL_FN(CommDestroy, "ncclCommDestroy", 1);
    NCCL_FN(CommAbort, "ncclCommAbort", 1);
    NCCL_FN(GroupStart, "ncclGroupStart", 1);
    NCCL_FN(GroupEnd, "ncclGroupEnd", 1);
    NCCL_FN(Broadcast, "ncclBroadcast", 1);
    NCCL_FN(AllReduce, "ncclAllReduce", 1);
#undef NCCL_FN
}

#define ncclCheck(res) nccl_check_at((res), __FILE__, __LINE__)
static void nccl_check_at(ncclResult_t res, const char *file, int line) {
    if (res == ncclSuccess) return;
    fflush(stdout);
    fprintf(stderr, "error: %s:%d: NCCL error: %s (%s) ---> try: NCCL_DEBUG=WARN for NCCL's account of it\n", file,
            line, nccl.GetErrorString(res), nccl.GetLastError ? nccl.GetLastError(NULL) : "");
    exit(EXIT_RUNTIME);
}

// this process's rank: its job, its NCCL communicator, its copy of the model and data
typedef struct {
    Job *job;
    const Config *cfg;
    ncclComm_t comm;
    fast::Model model;
    DeviceData train;
    cudaStream_t stream;       // the main stream of the step (as in the one-GPU path)
    cudaStream_t comm_stream;  // every NCCL call of this rank, and the SGD steps after the all-reduces
    cudaEvent_t ev_dw[MAX_LAYERS], ev_db[MAX_LAYERS];  // layer l's weight / bias gradient written
    cudaEvent_t ev_ready, ev_comm_done, ev_log, epoch_start, epoch_end;
} Rank;

// where a run starts, rank 0's (run_start) for the others: a resumed run's epoch, step and shuffle
typedef struct {
    int first_epoch, first_step;
    uint64_t steps_total;
    Rng shuffle;
} RankStart;

// rank r's share of a global batch of gbs rows among `ranks`: rows [*first, *first + return value)
static int dp_share(int gbs, int ranks, int r, int *first) {
    const int base = gbs / ranks, extra = gbs % ranks;
    *first = r * base + (r < extra ? r : extra);
    return base + (r < extra ? 1 : 0);
}

// model_backward_update without the SGD steps, and with the all-reduce and the step of each layer on
// the communication stream (the top of this section). bs: this rank's rows; norm: the global batch.
// The order on the communication stream, per layer: wait for dW and db, sum them over the ranks,
// wait for dinp (the last reader of W), step. The all-reduce of layer l runs beside layer l-1's dinp
// and dW. At the end the main stream waits for the other three: the next step's forward pass reads
// the stepped parameters, and its gradients overwrite these.
static void dp_backward_update(Rank *k, int bs, int norm) {
    fast::Model *m = &k->model;
    const Config *c = k->cfg;
    const int prec = fast::model_mm_prec(m);
    for (int l = m->L - 1; l >= 0; l--) {
        const int IN = m->sizes[l], OUT = m->sizes[l + 1];
        const size_t w = m->w_off[l], b = m->b_off[l], n = (size_t)OUT * IN + OUT;  // W then b: b = w + OUT * IN
        const float *dout = m->dacts[l + 1];
        cudaCheck(cudaEventRecord(m->ev_dout[l], k->stream));
        cudaCheck(cudaStreamWaitEvent(m->bias_stream, m->ev_dout[l], 0));
        if (l == m->L - 1 && fast::model_head_fused(m))  // with the step's loss and the step counter
            head_batch_sums(m->grads + b, dout, bs, OUT, NULL, NULL, 0, 0, 0, m->step_losses, m->step, m->losses,
                            m->bias_stream, norm);
        else
            matmul_backward_dbias_fast(m->grads + b, dout, bs, OUT, NULL, NULL, 0, 0, 0, m->bias_stream);
        cudaCheck(cudaEventRecord(k->ev_db[l], m->bias_stream));
        // dW on the side stream, beside dinp; the first layer has no dinp, its dW runs on main
        cudaStream_t dw_stream = l > 0 ? m->side : k->stream;
        if (l > 0) cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dout[l], 0));
        // (the split-K scratch is one buffer: the first layer's dW waits for the side stream's last one)
        if (l == 0 && m->L > 1 && m->scratch) cudaCheck(cudaStreamWaitEvent(k->stream, k->ev_dw[1], 0));
        MatmulFastBf16 bf_dw, bf_dinp;
        matmul_backward_dweight_fast(m->grads + w, dout, m->acts[l], bs, IN, OUT, m->scratch, prec, NULL, dw_stream,
                                     fast::model_bf16(m, MF_DWEIGHT, l, &bf_dw));
        cudaCheck(cudaEventRecord(k->ev_dw[l], dw_stream));
        if (l > 0 && (l < m->L - 1 || !fast::model_head_fused(m)))  // (else the fused head has done it)
            matmul_backward_dinp_fast(m->dacts[l], dout, m->params + w, m->acts[l], m->act, bs, IN, OUT, prec,
                                      k->stream, fast::model_bf16(m, MF_DINP, l, &bf_dinp));
        cudaCheck(cudaEventRecord(m->ev_dinp[l], k->stream));
        cudaCheck(cudaStreamWaitEvent(k->comm_stream, k->ev_dw[l], 0));
        cudaCheck(cudaStreamWaitEvent(k->comm_stream, k->ev_db[l], 0));
        ncclCheck(nccl.AllReduce(m->grads + w, m->grads + w, n, ncclFloat, ncclSum, k->comm, k->comm_stream));
        cudaCheck(cudaStreamWaitEvent(k->comm_stream, m->ev_dinp[l], 0));
        sgd_update_fast(m->params + w, m->grads + w, m->mbuf + w, m->params_tf32 ? m->params_tf32 + w : NULL, n, c->lr,
                        c->momentum, c->weight_decay, 1, k->comm_stream, m->params_bf16 ? m->params_bf16 + w : NULL);
    }
    cudaCheck(cudaEventRecord(m->ev_side_done, m->side));
    cudaCheck(cudaEventRecord(m->ev_bias_done, m->bias_stream));
    cudaCheck(cudaEventRecord(k->ev_comm_done, k->comm_stream));
    cudaCheck(cudaStreamWaitEvent(k->stream, m->ev_side_done, 0));
    cudaCheck(cudaStreamWaitEvent(k->stream, m->ev_bias_done, 0));
    cudaCheck(cudaStreamWaitEvent(k->stream, k->ev_comm_done, 0));
}

// One step of gbs global rows on this rank: its share of the batch gathered (the rows of the
// permutation from the step counter's step, moved on by the share's first row), forward, loss,
// backward, all-reduce, update.
static void dp_step(Rank *k, int gbs) {
    fast::Model *m = &k->model;
    int first;
    const int rows = dp_share(gbs, k->job->world, k->job->rank, &first);
    gather_batch_step(m->acts[0], m->labels, k->train.images, k->train.labels, m->perm + first, m->step, 0, m->B, rows,
                      k->train.D, m->prec == PREC_TF32 ? GATHER_TF32 : GATHER_FP32, k->stream);
    m->x_pixels = 0;   // (the ranks' products take the batch's values: dp_backward_update passes no pixels)
    fast::model_forward_loss(m, rows, gbs, k->stream);
    dp_backward_update(k, rows, gbs);
}

// n floats at p, summed over the ranks in place, ordered after the main stream's work so far; the
// main stream then waits for the sum
static void dp_sum_over_ranks(Rank *k, float *p, size_t n) {
    cudaCheck(cudaEventRecord(k->ev_ready, k->stream));
    cudaCheck(cudaStreamWaitEvent(k->comm_stream, k->ev_ready, 0));
    ncclCheck(nccl.AllReduce(p, p, n, ncclFloat, ncclSum, k->comm, k->comm_stream));
    cudaCheck(cudaEventRecord(k->ev_comm_done, k->comm_stream));
    cudaCheck(cudaStreamWaitEvent(k->stream, k->ev_comm_done, 0));
}

// The communicator while the rank trains. A process that ends early (an error line and exit, a
// diverging run, a stop) aborts it first, in an exit handler, so that no NCCL kernel is left
// waiting for a peer that will never come, and NCCL's own threads stop before CUDA shuts down.
// The normal end destroys it.
static ncclComm_t dp_live_comm = NULL;
static void dp_abort_at_exit(void) {
    ncclComm_t comm = dp_live_comm;
    dp_live_comm = NULL;
    if (comm) nccl.CommAbort(comm);  // (its result: nothing to do)
}

// What only rank 0 has: the run (-r, -c), the log and the evaluation sets
typedef struct {
    Run *run;
    RunLog *log;
    DeviceData *val, *test;
    fast::EvalBuffers *eval;
    double train_seconds, loss, acc;
    int epochs_run;
} RankZero;

// The rank's training: the one-GPU loop of main, step by step (no graphs), each step a dp_step.
// At each log line the ranks vote on stopping; rank 0 logs, evaluates and writes checkpoints while
// the others go on to the next steps (whose first all-reduce waits for rank 0).
static void dp_rank_loop(Rank *k, RankZero *z, const RankStart *start, const EpochPlan *plan) {
    const Config *c = k->cfg;
    fast::Model *m = &k->model;
    const int r0 = k->job->rank == 0, steps = plan->steps, n_train = k->train.n;
    int *perm_host;
    cudaCheck(cudaMallocHost((void **)&perm_host, sizeof(int) * (size_t)n_train));
    float *losses_host = (float *)mallocCheck(sizeof(float) * (size_t)steps);
    Rng shuffle = start->shuffle;   // (rank 0 draws from its run's own, which -c keeps)
    for (int epoch = start->first_epoch; epoch <= c->epochs; epoch++) {
        if (r0) run_epoch(z->run, perm_host, n_train);
        else rng_permutation(&shuffle, perm_host, n_train);
        int done = (epoch == start->first_epoch ? start->first_step : 1) - 1;  // steps 1-based; the counter 0-based
        cudaCheck(cudaMemcpyAsync(m->perm, perm_host, sizeof(int) * (size_t)n_train, cudaMemcpyHostToDevice, k->stream));
        cudaCheck(cudaMemcpyAsync(m->step, &done, sizeof(int), cudaMemcpyHostToDevice, k->stream));
        cudaCheck(cudaEventRecord(k->epoch_start, k->stream));
        float last_log_ms = 0;
        long samples = 0;
        while (done < steps) {
            const int next_log = (done / c->log_every + 1) * c->log_every;
            const int end = next_log < steps ? next_log : steps, n = end - done;
            for (int s = done; s < end; s++) {
                const int gbs = epoch_batch_size(plan, s, c->batch);
                dp_step(k, gbs);
                samples += gbs;
            }
            dp_sum_over_ranks(k, m->step_losses + done, (size_t)n);  // each rank's losses are its share
            cudaCheck(cudaEventRecord(k->ev_log, k->stream));
            cudaCheck(cudaEventSynchronize(k->ev_log));
            const int sig = job_agree(k->job, stop_requested());  // the same answer on every rank
            if (sig < 0) die(k->job->hint, "%s", k->job->err);
            if (r0) {
                float ms_now;
                cudaCheck(cudaEventElapsedTime(&ms_now, k->epoch_start, k->ev_log));
                cudaCheck(cudaMemcpy(losses_host, m->step_losses + done, n * sizeof(float), cudaMemcpyDeviceToHost));
                double sum = 0;
                for (int i = 0; i < n; i++) sum += losses_host[i];
                log_losses(z->log, sum, n);
                log_step(z->log, epoch, end, (ms_now - last_log_ms) / n);  // (exits if the run diverged)
                last_log_ms = ms_now;
                // the vote's signal (it may have reached another rank), not this rank's own: one that
                // came after this rank voted stops every rank at the next vote
                run_after_steps_on(z->run, z->log, epoch, end, steps, n, sig);  // a stop: checkpoint, message, exit
            } else if (sig) {
                exit(stop_exit_code(sig));  // (the exit waits for rank 0's checkpoint: run/job.h)
            }
            done = end;
        }
        if (r0) {
            cudaCheck(cudaEventRecord(k->epoch_end, k->stream));
            cudaCheck(cudaEventSynchronize(k->epoch_end));
            float epoch_ms;
            cudaCheck(cudaEventElapsedTime(&epoch_ms, k->epoch_start, k->epoch_end));
            z->train_seconds += epoch_ms / 1e3;
            z->epochs_run++;
            const int held = c->holdout > 0;
            double t0 = now_seconds();
            fast::evaluate(m, held ? z->val : z->test, z->eval, &z->loss, &z->acc, k->stream);
            log_epoch(z->log, epoch, epoch_ms / 1e3, samples, held ? "val" : "test", z->loss, z->acc,
                      1e3 * (now_seconds() - t0));
            run_end_of_epoch(z->run, epoch);  // -c: the checkpoint
        }
    }
    cudaCheck(cudaFreeHost(perm_host));
    free(losses_host);
}

// A usage error found by every rank alike: rank 0 says it; under -g's spawner the others end
// without a word (the spawner reports rank 0's), under another launcher each says it, as each rank
// of a job does
static void dp_usage_error(const Job *job, const char *prog, const char *msg) {
    if (job->rank == 0 || job->launcher != JOB_SPAWN) usage_error(prog, "%s", msg);
    exit(EXIT_USAGE);
}

// main for one rank of a job: everything main does for one GPU, with the ranks' gradients summed
static int train_data_parallel(Config *cfg, Job *job, int argc, char **argv) {
    using namespace fast;
    const int N = job->world, r0 = job->rank == 0;
    if (!r0 && !freopen("/dev/null", "w", stdout)) die("", "cannot silence rank %d's output: %s", job->rank, strerror(errno));
    // rank 0 runs the run: -r's checkpoint and the settings it holds, -c and -o; the others read
    // -r's settings too (the same checkpoint, read only), and write nothing
    Run run;
    if (!r0) {
        cfg->ckpt_path[0] = cfg->log_path[0] = cfg->grid_path[0] = '\0';
        cfg->writes_nothing = 1;
    }
    run_begin(&run, cfg, argc, argv, PROG_FAST);
    const int B = cfg->batch;
    char msg[512];
    if (batch_share_error(msg, sizeof(msg), B, N)) dp_usage_error(job, argv[0], msg);
    Dataset train_host, val_host, test_host;
    load_datasets_or_die(cfg, argv[0], &train_host, &test_host);
    split_holdout(&train_host, &val_host, cfg->holdout, cfg->seed);  // -H: a validation set
    const EpochPlan plan = epoch_plan(train_host.n, B, cfg->max_steps);
    if (plan.last_bs < N) {
        snprintf(msg, sizeof(msg), "%d ranks: the last step of every epoch has %d row%s (%d training images, -b %d), "
                 "fewer than one per GPU; give another -b", N, plan.last_bs, plan.last_bs == 1 ? "" : "s",
                 train_host.n, B);
        dp_usage_error(job, argv[0], msg);
    }
    cudaDeviceProp prop = require_gpu();
    int count = 0;
    cudaCheck(cudaGetDeviceCount(&count));
    const int dev = count == 1 ? 0 : job->local_rank;   // (a launcher may show each rank its GPU alone)
    if (dev >= count)
        die_at(EXIT_USAGE, __FILE__, __LINE__, "as many ranks on each machine as it has GPUs",
               "rank %d of %d is rank %d on its machine, which shows %d GPU%s", job->rank, N, job->local_rank, count,
               count == 1 ? "" : "s");
    cudaCheck(cudaSetDevice(dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));

    // the ranks meet: NCCL's id from rank 0, then the communicator. (The NCCL clean-up is registered
    // first, so that it runs after run/job.h's exit handler: a rank that stops waits for rank 0's
    // checkpoint with its communicator whole, and one that fails tells the others before aborting it.)
    if (atexit(dp_abort_at_exit) != 0) die("", "atexit: cannot register the NCCL clean-up");
    if (job_connect(job) != 0) die(job->hint, "%s", job->err);
    stop_signals_install();  // (rank 0's again in run_start) a signal to any rank becomes the vote's
    stop_signals_keep();   // a launcher may pass the terminal's Ctrl-C on a second time
    nccl_load();
    int nccl_version = 0;
    ncclCheck(nccl.GetVersion(&nccl_version));
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (r0) ncclCheck(nccl.GetUniqueId(&id));
    if (job_broadcast(job, &id, sizeof(id)) != 0) die(job->hint, "%s", job->err);
    Rank k;
    memset(&k, 0, sizeof(k));
    k.job = job;
    k.cfg = cfg;
    ncclCheck(nccl.CommInitRank(&k.comm, N, id, job->rank));
    dp_live_comm = k.comm;

    cudaCheck(cudaStreamCreate(&k.stream));
    cudaCheck(cudaStreamCreateWithFlags(&k.comm_stream, cudaStreamNonBlocking));
    for (int l = 0; l < cfg->L; l++) {
        cudaCheck(cudaEventCreateWithFlags(&k.ev_dw[l], cudaEventDisableTiming));
        cudaCheck(cudaEventCreateWithFlags(&k.ev_db[l], cudaEventDisableTiming));
    }
    cudaCheck(cudaEventCreateWithFlags(&k.ev_ready, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&k.ev_comm_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreate(&k.ev_log));
    cudaCheck(cudaEventCreate(&k.epoch_start));
    cudaCheck(cudaEventCreate(&k.epoch_end));
    const int D = dataset_dim(&train_host), share = B / N;
    const int max_batch = share > FAST_EVAL_BATCH ? share : FAST_EVAL_BATCH;
    device_data_upload(&k.train, train_host.images, train_host.labels, train_host.n, D);
    // (no K-major copies: dp_backward_update's products read the FP32 tensors)
    model_build(&k.model, cfg->sizes, cfg->L, cfg->act, B, max_batch, cfg->precision, k.train.n, plan.steps, 0);
    Model *m = &k.model;
    DeviceData val, test;
    EvalBuffers eval;
    RankZero z;
    memset(&z, 0, sizeof(z));
    RankStart start;
    memset(&start, 0, sizeof(start));
    if (r0) {
        device_data_upload(&val, val_host.images, val_host.labels, val_host.n, D);
        device_data_upload(&test, test_host.images, test_host.labels, test_host.n, D);
        eval_buffers_alloc(&eval, val.n > test.n ? val.n : test.n);
        z.run = &run, z.val = &val, z.test = &test, z.eval = &eval;
        // the parameters and momentum: the checkpoint's (-r), or drawn from the seed
        const float *mbuf, *params = run_start(&run, &train_host, m, fetch_state, m->num_params, &mbuf);
        if (params) {
            cudaCheck(cudaMemcpy(m->params, params, m->num_params * sizeof(float), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(m->mbuf, mbuf, m->num_params * sizeof(float), cudaMemcpyHostToDevice));
        } else {
            model_init_params(m, cfg->seed, k.stream);
        }
        start.first_epoch = run.first_epoch, start.first_step = run.first_step;
        start.steps_total = run.steps_total, start.shuffle = run.shuffle;
    }
    if (job_broadcast(job, &start, sizeof(start)) != 0) die(job->hint, "%s", job->err);
    cudaCheck(cudaDeviceSynchronize());   // (model_build's memsets and the copies above ran on the legacy stream)
    ncclCheck(nccl.GroupStart());
    ncclCheck(nccl.Broadcast(m->params, m->params, m->num_params, ncclFloat, 0, k.comm, k.comm_stream));
    ncclCheck(nccl.Broadcast(m->mbuf, m->mbuf, m->num_params, ncclFloat, 0, k.comm, k.comm_stream));
    ncclCheck(nccl.GroupEnd());
    cudaCheck(cudaStreamSynchronize(k.comm_stream));
    model_sync_copies(m, k.stream);
    cudaCheck(cudaStreamSynchronize(k.stream));

    RunLog log;
    if (r0) {
        box_settings("train_mlp_fast", "GPU trainer, the fast one", cfg, &train_host, &test_host, m->num_params,
                     plan.steps);
        box_row("device", "rank 0 of %d: %s (sm_%d%d, %d SMs, %.0f GB)", N, prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
        // (each value within the box's width: a longer one loses its middle, NCCL's version with it)
        box_row("ranks (data parallel)", "%d from %s, NCCL %d.%d.%d, %d rows a GPU", N, job_launcher_name(job),
                nccl_version / 10000, nccl_version / 100 % 100, nccl_version % 100, share);
        box_row("kernels (-f)", "%s", "fused, 4 streams, launched step by step (no graphs)");
        box_row("matmul precision (-x)", "%s", PREC_NAMES[cfg->precision]);
        box_rule();
        long steps_to_do = (long)(cfg->epochs - run.first_epoch + 1) * plan.steps - (run.first_step - 1);
        run_log_open(&log, cfg, PROG_FAST, plan.steps, train_host.num_classes, steps_to_do, (long)run.steps_total);
        z.log = &log;
    }
    dp_rank_loop(&k, &z, &start, &plan);

    if (r0) {
        if (cfg->holdout > 0 || z.epochs_run == 0)  // the test set, at the end
            evaluate(m, &test, &eval, &z.loss, &z.acc, k.stream);
        char where[400];
        snprintf(where, sizeof(where), "%d x %s", N, prop.name);
        log_final(&log, cfg, train_host.name, z.loss, z.acc, z.train_seconds, z.epochs_run,
                  device_bytes_allocated / 1e6, where);
        run_finish(&run);
        eval_buffers_free(&eval);
        device_data_free(&val);
        device_data_free(&test);
    }
    dp_live_comm = NULL;  // destroyed here, not aborted
    ncclCheck(nccl.CommDestroy(k.comm));
    job_finish(job);
    model_free(m);
    device_data_free(&k.train);
    for (int l = 0; l < cfg->L; l++) {
        cudaCheck(cudaEventDestroy(k.ev_dw[l]));
        cudaCheck(cudaEventDestroy(k.ev_db[l]));
    }
    cudaEvent_t evs[] = {k.ev_ready, k.ev_comm_done, k.ev_log, k.epoch_start, k.epoch_end};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) cudaCheck(cudaEventDestroy(evs[i]));
    cudaCheck(cudaStreamDestroy(k.stream));
    cudaCheck(cudaStreamDestroy(k.comm_stream));
    dataset_free(&train_host);
    dataset_free(&val_host);
    dataset_free(&test_host);
    return 0;
}

#else  // built without NCCL: several ranks get one line and exit 2, before anything is loaded

static int train_data_parallel(Config *cfg, Job *job, int argc, char **argv) {
    (void)cfg;
    (void)argc;
    (void)argv;
    die_at(EXIT_USAGE, __FILE__, __LINE__, "one GPU (no -g, no launcher), or make clean && make train_fast NCCL_HOME=DIR",
           "%d ranks (%s): this train_mlp_fast was built without NCCL (libnccl), which several GPUs need; make's "
           "banner says where it looked", job->world, job_launcher_name(job));
}

#endif  // MLP_NCCL

// -g N: N ranks of this program on this machine, one GPU each (run/job.h's job_spawn), each the
// rank that torchrun would start; this process waits for them and exits as they did
static int spawn_ranks(const Config *cfg, int argc, char **argv) {
#ifndef MLP_NCCL
    die_at(EXIT_USAGE, __FILE__, __LINE__, "leave -g out (one GPU), or make clean && make train_fast NCCL_HOME=DIR",
           "-g %d: this train_mlp_fast was built without NCCL (libnccl), which -g needs; make's banner says where it "
           "looked", cfg->gpus);
#endif
    char msg[512];   // (with -r, the checkpoint's -b: the ranks check it)
    if (!cfg->resume_path[0] && batch_share_error(msg, sizeof(msg), cfg->batch, cfg->gpus)) usage_error(argv[0], "%s", msg);
    int count = 0;   // (no GPU at all: the ranks say so, after the checks of the command line)
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    (void)cudaGetLastError();
    if (count > 0 && count < cfg->gpus)
        die_at(EXIT_USAGE, __FILE__, __LINE__, "a smaller -g", "-g %d: %d GPU%s visible here (CUDA_VISIBLE_DEVICES=%s)",
               cfg->gpus, count, count == 1 ? " is" : "s are",
               getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
    fflush(stdout);
    return job_spawn(cfg->gpus, job_argv_without(argc, argv, "-g", "--gpus"));
}

int main(int argc, char **argv) {
    using namespace fast;
    Config cfg;
    config_from_command_line(&cfg, argc, argv, PROG_FAST);
    static Job job;   // (its watcher thread and exit handler keep its address: static)
    if (job_from_env(&job) < 0) die(job.hint, "%s", job.err);
    if (cfg.gpus > 0 && job.launcher != JOB_NONE)
        usage_error(argv[0], "-g %d under %s: the launcher starts the ranks (one per GPU); leave -g out", cfg.gpus,
                    job_launcher_name(&job));
    if (cfg.gpus > 0 && !cfg.eval_path[0]) return spawn_ranks(&cfg, argc, argv);  // -g N (-e uses one GPU)
    if ((job.world > 1 || job.launcher == JOB_SPAWN) && !cfg.eval_path[0]) return train_data_parallel(&cfg, &job, argc, argv);
    if (job.rank > 0) return 0;   // -e in a job: rank 0 evaluates
    cudaDeviceProp prop = require_gpu();
    if (cfg.eval_path[0]) {  // -e: evaluate a checkpoint (or -p: classify pictures with it), and exit
        Use use;
        use_begin(&use, &cfg, PROG_FAST);
        Model model;
        model_build(&model, cfg.sizes, cfg.L, cfg.act, USE_BATCH, USE_BATCH, cfg.precision, 1, 1);
        cudaCheck(cudaMemcpy(model.params, use.ck.params, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
        model_sync_copies(&model, 0);
        int rc = use_run(&use, &model, forward_logits);
        model_free(&model);
        return rc;
    }
    Run run;
    run_begin(&run, &cfg, argc, argv, PROG_FAST);  // -r: the checkpoint, and the settings it holds
    Dataset train_host, val_host, test_host;
    load_datasets_or_die(&cfg, argv[0], &train_host, &test_host);
    split_holdout(&train_host, &val_host, cfg.holdout, cfg.seed);  // -H: a validation set
    int B = cfg.batch;
    EpochPlan plan = epoch_plan(train_host.n, B, cfg.max_steps);

    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    DeviceData train, val, test;
    int D = dataset_dim(&train_host);
    device_data_upload(&train, train_host.images, train_host.labels, train_host.n, D);
    device_data_upload(&val, val_host.images, val_host.labels, val_host.n, D);
    device_data_upload(&test, test_host.images, test_host.labels, test_host.n, D);
    Model model;
    model_build(&model, cfg.sizes, cfg.L, cfg.act, B, B > FAST_EVAL_BATCH ? B : FAST_EVAL_BATCH, cfg.precision, train.n,
                plan.steps);
    const float *mbuf, *params = run_start(&run, &train_host, &model, fetch_state, model.num_params, &mbuf);
    if (params) {  // resuming: the checkpoint's weights and momentum
        cudaCheck(cudaMemcpy(model.params, params, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(model.mbuf, mbuf, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
        model_sync_copies(&model, stream);
    } else {
        model_init_params(&model, cfg.seed, stream);
    }
    EvalBuffers eval;
    eval_buffers_alloc(&eval, val.n > test.n ? val.n : test.n);

    box_settings("train_mlp_fast", "GPU trainer, the fast one", &cfg, &train_host, &test_host, model.num_params,
                 plan.steps);
    box_row("device", "%s (sm_%d%d, %d SMs, %.0f GB)", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
            prop.totalGlobalMem / 1e9);
    if (cfg.path >= PATH_FUSED && !model_use_fused(&model, cfg.path == PATH_FUSED_ANY)) cfg.path = PATH_GRAPH;
    if (cfg.path >= PATH_FUSED && model.fused.deep)
        box_row("kernels (-f)", "%d: a run of steps as one kernel, %d blocks, tiles of each product", cfg.path,
                model.fused.blocks);
    else if (cfg.path >= PATH_FUSED)
        box_row("kernels (-f)", "%d: a run of steps as one kernel, %d blocks of %d unit%s", cfg.path,
                model.fused.blocks, model.fused.U, model.fused.U > 1 ? "s" : "");
    else
        box_row("kernels (-f)", "%s%s%s", cfg.path == PATH_GRAPH ? "1: fused, three streams, replayed from CUDA graphs"
                                                                  : "0: fused, three streams, launched step by step",
                model.fused.why[0] ? "; not -f 2: " : "", model.fused.why);
    box_row("matmul precision (-x)", "%s", PREC_NAMES[cfg.precision]);
    box_rule();

    RunLog log;
    long steps_to_do = (long)(cfg.epochs - run.first_epoch + 1) * plan.steps - (run.first_step - 1);
    run_log_open(&log, &cfg, PROG_FAST, plan.steps, train_host.num_classes, steps_to_do, (long)run.steps_total);
    int *perm_host;
    cudaCheck(cudaMallocHost((void **)&perm_host, sizeof(int) * (size_t)train.n));
    float *losses_host;  // (plan.steps) pinned: each run of steps copies its losses here behind it
    cudaCheck(cudaMallocHost((void **)&losses_host, sizeof(float) * (size_t)plan.steps));
    cudaEvent_t epoch_start, epoch_end;
    cudaCheck(cudaEventCreate(&epoch_start));
    cudaCheck(cudaEventCreate(&epoch_end));
    StepRun runs[2];  // the run just enqueued, and the one before it, whose log line may be waiting
    for (int i = 0; i < 2; i++) cudaCheck(cudaEventCreate(&runs[i].done));

    double loss = 0, acc = 0, train_seconds = 0;
    int epochs_run = 0;
    for (int epoch = run.first_epoch; epoch <= cfg.epochs; epoch++) {
        run_epoch(&run, perm_host, train.n);
        int first = run_first_step(&run, epoch), done = first - 1;  // steps are 1-based; the counter, 0-based
        cudaCheck(cudaMemcpyAsync(model.perm, perm_host, sizeof(int) * (size_t)train.n, cudaMemcpyHostToDevice, stream));
        cudaCheck(cudaMemcpyAsync(model.step, &done, sizeof(int), cudaMemcpyHostToDevice, stream));
        cudaCheck(cudaEventRecord(epoch_start, stream));
        float last_log_ms = 0;
        long samples = 0;
        // Runs of steps from one log line to the next. The host prints a run's line after it has
        // enqueued the next run, so the GPU never idles while the host waits, reads the losses and
        // prints. The epoch's last run, and a run after which Ctrl-C or SIGTERM asked to stop, are
        // waited for at once: a checkpoint must hold the parameters of the steps it counts.
        const StepRun *waiting = NULL;  // the run before the newest one, while its line is not printed
        while (done < plan.steps) {
            int next_log = (done / cfg.log_every + 1) * cfg.log_every;
            int end = next_log < plan.steps ? next_log : plan.steps;
            if (cfg.path >= PATH_FUSED) {
                fused_run(&model, &train, end - done, epoch_batch_size(&plan, end - 1, B), &cfg, stream);
            } else if (cfg.path == PATH_GRAPH) {
                run_steps(&model, &train, end - done, epoch_batch_size(&plan, end - 1, B), &cfg, stream);
            } else {
                for (int s = done; s < end; s++) train_step(&model, &train, epoch_batch_size(&plan, s, B), &cfg, stream);
            }
            for (int s = done; s < end; s++) samples += epoch_batch_size(&plan, s, B);
            StepRun *k = waiting == &runs[0] ? &runs[1] : &runs[0];
            k->start = done;
            k->end = end;
            cudaCheck(cudaMemcpyAsync(losses_host + done, model.step_losses + done, (size_t)(end - done) * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream));
            cudaCheck(cudaEventRecord(k->done, stream));
            done = end;
            if (waiting) {  // its line, and its steps counted
                log_step_run(&log, waiting, losses_host, epoch_start, epoch, &last_log_ms);
                run_count_steps(&run, waiting->end - waiting->start);
            }
            waiting = k;
            if (done == plan.steps || stop_requested()) {
                log_step_run(&log, k, losses_host, epoch_start, epoch, &last_log_ms);
                waiting = NULL;
                run_after_steps(&run, &log, epoch, done, plan.steps, k->end - k->start);  // Ctrl-C: checkpoint, exit 130
            }
        }
        cudaCheck(cudaEventRecord(epoch_end, stream));
        cudaCheck(cudaEventSynchronize(epoch_end));
        float epoch_ms;
        cudaCheck(cudaEventElapsedTime(&epoch_ms, epoch_start, epoch_end));
        train_seconds += epoch_ms / 1e3;
        epochs_run++;
        double t0 = now_seconds();
        evaluate(&model, cfg.holdout > 0 ? &val : &test, &eval, &loss, &acc, stream);
        log_epoch(&log, epoch, epoch_ms / 1e3, samples, cfg.holdout > 0 ? "val" : "test", loss, acc,
                  1e3 * (now_seconds() - t0));
        run_end_of_epoch(&run, epoch);  // -c: the checkpoint
    }
    if (cfg.holdout > 0 || epochs_run == 0) evaluate(&model, &test, &eval, &loss, &acc, stream);  // the test set, at the end
    log_final(&log, &cfg, train_host.name, loss, acc, train_seconds, epochs_run, device_bytes_allocated / 1e6,
              prop.name);
    run_finish(&run);

    cudaCheck(cudaFreeHost(perm_host));
    cudaCheck(cudaFreeHost(losses_host));
    cudaCheck(cudaEventDestroy(epoch_start));
    cudaCheck(cudaEventDestroy(epoch_end));
    for (int i = 0; i < 2; i++) cudaCheck(cudaEventDestroy(runs[i].done));
    eval_buffers_free(&eval);
    model_free(&model);
    device_data_free(&train);
    device_data_free(&val);
    device_data_free(&test);
    dataset_free(&train_host);
    dataset_free(&val_host);
    dataset_free(&test_host);
    cudaCheck(cudaStreamDestroy(stream));
    return 0;
}
#endif
