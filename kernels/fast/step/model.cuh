/*
kernels/fast/step/model.cuh: the fast trainer's model on the device: its parameters, activations,
gradients, the copies its plan's kernels read (TF32, K-major TF32, BF16), the batch buffers, the
streams and events of the step, and the captured graphs. The plan (kernels/fast/step/plan.cuh) is
made first and the model holds what it asks for, nothing more. Included by train_mlp_fast.cu (and
through it by test_mlp.cu), inside namespace fast.
*/
#ifndef MLP_FAST_STEP_MODEL_CUH
#define MLP_FAST_STEP_MODEL_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../../common/mlp.h"       // MAX_LAYERS, param_layout
#include "../../common.cuh"            // cudaCheck, cudaMallocCheck
#include "../../data.cuh"              // init_uniform_kernel
#include "../matmul/matmul.cuh"        // matmul_fast_bf16_copy, MatmulFastBf16
#include "../ops/dbias.cuh"             // dbias_partial_floats
#include "../ops/sgd.cuh"              // round_tf32_copy
#include "../ops/transpose.cuh"        // tf32_transpose
#include "plan.cuh"                    // StepPlan, step_plan_make, plan_batch

#define FAST_MAX_GRAPHS 8          // kinds of run of steps an epoch captures (two, each at two parities of
                                   // params_tf32t: see run_steps)

namespace fast {  // test_mlp.cu includes the fast trainer beside train_mlp.cu, whose Model is another

// a run of n steps, the last with last_bs rows, captured into a CUDA graph (run_steps)
typedef struct {
    int n, last_bs;
    int parity;   // the model's tf32t_parity at the run's start (0 for a model without params_tf32t)
    cudaGraphExec_t exec;
} StepGraph;

// The fields of train_mlp.cu's Model, and what the fast path adds: the second batch buffer, the
// device step counter, the TF32 copy of the weights, the streams and events of the backward pass,
// and the captured graphs. Every pointer is a GPU address.
// Several ranks: how the executor sums a layer's gradients over the ranks, in place, on `stream`
// (the trainer's NCCL all-reduce; the executor knows no communication library)
typedef void (*GradSum)(void *ctx, float *grads, size_t n, cudaStream_t stream);

typedef struct {
    int L, sizes[MAX_LAYERS + 1], act;
    StepPlan plan;                        // what every launch below runs (kernels/fast/step/plan.cuh)
    int B;                                // training batch size
    int max_batch;                        // rows the activation buffers hold: max(B, FAST_EVAL_BATCH)
    int prec;                             // -x: PREC_FP32, PREC_TF32 or PREC_BF16 (run/args.h)
    size_t num_params, w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    float *params, *grads, *mbuf;         // flat buffers, the layout of param_layout()
    float *params_tf32;                   // -x 1 only: the weights rounded to TF32 (its bias slots unused),
                                          // what the forward products read; see model_forward
    // -x 2, where the plan keeps them (StepPlan.bf16_copies), BF16 copies of what the hidden layers'
    // products read: the weights (flat, params' layout), acts[0 .. L-2] and dacts[1 .. L-1]; else NULL.
    // See model_forward_layers.
    __nv_bfloat16 *params_bf16, *acts_bf16[MAX_LAYERS + 1], *dacts_bf16[MAX_LAYERS + 1];
    // with acts_bf16[0], the batch's two buffers as batches below: acts_bf16[0] is one of them, which
    // train_steps' gathers fill beside the FP32 batch (x_bf16 then 1: no copy kernel before layer 0)
    __nv_bfloat16 *batches_bf16[2];
    int x_bf16;
    // -x 1, for each hidden layer l >= 1 whose products take the K-major TF32 kernel (model_tf32k),
    // copies of what its dinp and dweight read that is not K-major (B rows: a rank's share on several
    // ranks): inp_t[l] its input transposed
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
    float *dbias_part;                    // the bias gradients' partial sums over chunks of rows (or NULL;
                                          // kernels/fast/ops/dbias.cuh: one buffer, the bias stream's)
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
    float *head_part;                     // the deep fused step's shares of the logits (FusedDeepArgs), or NULL
    float *fused_dr;                      // and -x 1's TF32 copies of the hidden gradients its dinp tiles read
                                          // (FusedDeepArgs.dacts_r, layers 2 .. L - 1 one after another), or NULL
    long long *fused_prof;                // NULL, or where it stamps its phases (dev/fused_profile.cu)
    // several ranks (plan.ranks > 1): the gradients' sum over the ranks and the stream it runs on,
    // with the SGD steps after it (model_backward_update), and its events (the stream and events exist
    // on one GPU too)
    int rank;                             // this process's rank (0 on one GPU); plan.ranks the job's
    GradSum sum_grads;
    void *sum_ctx;
    cudaStream_t comm;
    cudaEvent_t ev_dw[MAX_LAYERS], ev_db[MAX_LAYERS], ev_comm_done;
} Model;

static void model_free_bf16(Model *m) {
    cudaCheck(cudaFree(m->params_bf16));
    m->params_bf16 = NULL;
    for (int i = 0; i < 2; i++) {   // (acts_bf16[0] is one of them)
        cudaCheck(cudaFree(m->batches_bf16[i]));
        m->batches_bf16[i] = NULL;
    }
    m->acts_bf16[0] = NULL;
    for (int l = 1; l <= m->L; l++) {
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

// whether layer l's dinp and dW take the K-major kernel at bs rows (the plan's LayerPlan.kmajor), and
// layer 0's dW (BatchPlan.kmajor0)
static int model_tf32k(Model *m, int l, int bs) { return plan_batch(&m->plan, bs, 1)->layer[l].kmajor; }
static int model_tf32k0(Model *m, int bs) { return plan_batch(&m->plan, bs, 1)->kmajor0; }

// The model on the device, as its plan says (step_plan_make: the graphs' path; model_use_fused may
// take the fused step after): its buffers and the copies the plan's kernels read. n_train: rows of
// the permutation; steps_per_epoch: entries of step_losses; ranks: the ranks of a data-parallel job
// (1: one GPU).
static void model_build(Model *m, const int *sizes, int L, int act, int B, int max_batch, int prec, int n_train,
                        int steps_per_epoch, int ranks = 1) {
    memset(m, 0, sizeof(*m));
    m->L = L;
    m->act = act;
    m->B = B;
    m->max_batch = max_batch;
    m->prec = prec;
    memcpy(m->sizes, sizes, sizeof(int) * (size_t)(L + 1));
    step_plan_make(&m->plan, sizes, L, act, B, prec, PLAN_ASK_GRAPHS, ranks);
    const StepPlan *p = &m->plan;
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
    const int rows = (B + ranks - 1) / ranks;   // (the K-major copies of the activations hold a rank's share)
    for (int l = 1; l < L; l++)
        if (p->kmajor[l]) {
            for (int i = 0; i < 2; i++)
                if (m->params_tf32t[i] == NULL) {
                    m->params_tf32t[i] = (float *)cudaMallocCheck(pbytes, "the transposed TF32 copies of the weights");
                    cudaCheck(cudaMemset(m->params_tf32t[i], 0, pbytes));
                }
            const size_t in = (size_t)rows * sizes[l] * sizeof(float);
            const size_t out = (size_t)rows * sizes[l + 1] * sizeof(float);
            m->inp_t[l] = (float *)cudaMallocCheck(in, "the transposed TF32 activations");
            m->dout_r[l] = (float *)cudaMallocCheck(out, "the TF32 activation gradients");
            m->dout_t[l] = (float *)cudaMallocCheck(out, "the transposed TF32 activation gradients");
        }
    if (p->kmajor[0]) {
        m->inp_t[0] = (float *)cudaMallocCheck((size_t)rows * sizes[0] * sizeof(float), "the transposed batch");
        m->dout_t[0] = (float *)cudaMallocCheck((size_t)rows * sizes[1] * sizeof(float),
                                                "the transposed TF32 activation gradients");
    }
    if (p->bf16_copies) {
        m->params_bf16 = (__nv_bfloat16 *)cudaMallocCheck(m->num_params * 2, "the BF16 copy of the weights");
        cudaCheck(cudaMemset(m->params_bf16, 0, m->num_params * 2));
        for (int l = 0; l < L; l++) {
            const size_t bytes = (size_t)max_batch * sizes[l] * 2;
            if (l <= L - 2) m->acts_bf16[l] = (__nv_bfloat16 *)cudaMallocCheck(bytes, "the BF16 activations");
            if (l >= 1) m->dacts_bf16[l] = (__nv_bfloat16 *)cudaMallocCheck(bytes, "the BF16 activation gradients");
        }
        if (m->acts_bf16[0]) {
            m->batches_bf16[0] = m->acts_bf16[0];
            m->batches_bf16[1] = (__nv_bfloat16 *)cudaMallocCheck((size_t)max_batch * sizes[0] * 2, "the BF16 activations");
        }
    }
    for (int l = 0; l <= L; l++) {
        size_t bytes = (size_t)max_batch * sizes[l] * sizeof(float);
        m->acts[l] = (float *)cudaMallocCheck(bytes, "the activations");
        m->dacts[l] = (float *)cudaMallocCheck(bytes, "the activation gradients");
        // (the deep fused step's TMA tiles read whole boxes of rows of both, past a short batch's last:
        // values that reach no output, but read, so written once here)
        cudaCheck(cudaMemset(m->acts[l], 0, bytes));
        cudaCheck(cudaMemset(m->dacts[l], 0, bytes));
    }
    m->scratch = p->scratch_floats ? (float *)cudaMallocCheck(p->scratch_floats * sizeof(float), "the split-K scratch")
                                   : NULL;
    size_t part = 0;
    for (int l = 0; l < L; l++)
        if (dbias_partial_floats(rows, sizes[l + 1]) > part) part = dbias_partial_floats(rows, sizes[l + 1]);
    m->dbias_part = part ? (float *)cudaMallocCheck(part * sizeof(float), "the bias gradients' partial sums") : NULL;
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
    for (int l = 0; l < L; l++) {   // (ev_dw, ev_db: the ranks' sums; a rank of one, -g 1, has them too)
        cudaEvent_t *evs[] = {&m->ev_dout[l], &m->ev_dinp[l], &m->ev_dout_t[l], &m->ev_act[l], &m->ev_dw[l], &m->ev_db[l]};
        for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++)
            cudaCheck(cudaEventCreateWithFlags(evs[i], cudaEventDisableTiming));
    }
    cudaCheck(cudaEventCreateWithFlags(&m->ev_x_t, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&m->ev_side_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&m->ev_bias_done, cudaEventDisableTiming));
    cudaCheck(cudaEventCreateWithFlags(&m->ev_step, cudaEventDisableTiming));
    // (a rank of one, -g 1, sums its log lines' losses over the ranks on it too)
    // (the highest priority: the ranks' sums run beside the backward products; step.cuh says why)
    int lowest, highest;
    cudaCheck(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
    cudaCheck(cudaStreamCreateWithPriority(&m->comm, cudaStreamNonBlocking, highest));
    cudaCheck(cudaEventCreateWithFlags(&m->ev_comm_done, cudaEventDisableTiming));
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
    cudaCheck(cudaFree(m->dbias_part));
    cudaCheck(cudaFree(m->head_part));
    cudaCheck(cudaFree(m->fused_dr));
    cudaCheck(cudaFree(m->losses));
    cudaCheck(cudaFree(m->perm));
    cudaCheck(cudaFree(m->step));
    cudaCheck(cudaFree(m->step_losses));
    for (int l = 0; l < m->L; l++) {
        cudaEvent_t evs[] = {m->ev_dout[l], m->ev_dinp[l], m->ev_dout_t[l], m->ev_act[l], m->ev_dw[l], m->ev_db[l]};
        for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) cudaCheck(cudaEventDestroy(evs[i]));
    }
    cudaCheck(cudaEventDestroy(m->ev_x_t));
    cudaCheck(cudaEventDestroy(m->ev_side_done));
    cudaCheck(cudaEventDestroy(m->ev_bias_done));
    cudaCheck(cudaEventDestroy(m->ev_step));
    cudaCheck(cudaStreamDestroy(m->side));
    cudaCheck(cudaStreamDestroy(m->bias_stream));
    cudaCheck(cudaEventDestroy(m->ev_comm_done));
    cudaCheck(cudaStreamDestroy(m->comm));
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

}  // namespace fast

#endif  // MLP_FAST_STEP_MODEL_CUH
