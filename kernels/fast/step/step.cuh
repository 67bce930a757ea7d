/*
kernels/fast/step/step.cuh: the fast trainer's executor: a step's forward pass, loss, backward
pass and update, runs of steps launched from the host or replayed from CUDA graphs, the fused
steps, and the evaluation, all on the model of kernels/fast/step/model.cuh, each launch as its
plan says (kernels/fast/step/plan.cuh). One GPU or one rank of several: the same code (a rank takes
its share of each batch, and the gradients are summed over the ranks before the SGD steps).
Included by train_mlp_fast.cu (and through it by test_mlp.cu), inside namespace fast.
*/
#ifndef MLP_FAST_STEP_STEP_CUH
#define MLP_FAST_STEP_STEP_CUH

#include "../../softmax_xent.cuh"       // softmax_xent_eval_kernel, sum_two_kernel (evaluation)
#include "../fused/fused_deep.cuh"      // fused_deep_steps
#include "../fused/fused_step.cuh"      // fused_steps
#include "../matmul/matmul.cuh"         // matmul_fast_run and the copies' kernels
#include "../ops/dbias.cuh"             // matmul_backward_dbias_fast: bias gradient + SGD step
#include "../ops/gather.cuh"            // gather_batch_step, gather_rows_fast
#include "../ops/head.cuh"              // head_forward_backward, head_batch_sums
#include "../ops/sgd.cuh"               // sgd_update_fast
#include "../ops/softmax.cuh"           // softmax_xent_forward_backward_fast
#include "../ops/transpose.cuh"         // tf32_transpose
#include "model.cuh"                    // Model
#include "plan.cuh"                     // plan_batch

namespace fast {

// the kernel families launched so far (bit FAM_*), a graph's at its capture: test_mlp checks its cases reach every one
static unsigned plan_launched_families = 0;

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

// Runs product prod as the plan's pp says: C = epi(A . B) as matmul_fast.h lays the product out.
// bf: NULL, or the BF16 copies of its operands and output (the copies' families read the operands;
// after an FP32-operand kernel the output's copy, when asked for, is made by a copy kernel).
// param_t: the K-major kernel's transposed store (matmul_fast_tf32k_run). pdl: launched with
// programmatic dependent launch (kernels/fast/ops/pdl.cuh's rule: right after the kernel it waits for).
static void plan_run(MfProduct prod, const ProductPlan *pp, float *C, const float *A, const float *B,
                     const MatmulFastEpi *epi, const MatmulFastBf16 *bf, float *scratch, float *param_t, int pdl,
                     cudaStream_t stream) {
    plan_launched_families |= 1u << pp->family;
    if (pp->family == FAM_TF32_KMAJOR) {
        matmul_fast_tf32k_run_cfg(pp->mm.cfg, C, A, B, pp->M, pp->N, pp->K, epi, param_t, pdl, stream);
    } else if (pp->family == FAM_BF16_COPIES || pp->family == FAM_WGMMA_BF16_COPIES) {
        matmul_fast_bf16_run(prod, pp->mm.cfg, C, bf->a, bf->b, pp->M, pp->N, pp->K, epi, bf->out, pdl, stream);
    } else {
        matmul_fast_run(prod, &pp->mm, C, A, B, pp->M, pp->N, pp->K, epi, scratch, pp->prec, pdl, stream);
        if (bf != NULL && bf->out != NULL)   // (with the SGD epilogue, the copy is the new W's)
            matmul_fast_bf16_copy(bf->out, epi->kind == MF_EPI_SGD ? epi->sgd.param : C, (size_t)pp->M * pp->N,
                                  stream);
    }
}

// The product as it runs on this batch: the plan's; but where the plan takes the first layer on pixel
// bytes and acts[0] holds values instead (x_pixels 0: a caller that wrote the batch there itself,
// test_mlp's against PyTorch), the same 3xTF32 tile on the values, into *values
static const ProductPlan *model_product(const Model *m, const ProductPlan *pp, ProductPlan *values) {
    if (pp->prec != MF_FP32_PIXELS || m->x_pixels) return pp;
    *values = *pp;
    values->prec = 0;
    values->family = FAM_3XTF32;
    return values;
}

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
    const BatchPlan *bp = plan_batch(&m->plan, bs, train);
    if (m->acts_bf16[0] && layers > 0 && !m->x_bf16)
        matmul_fast_bf16_copy(m->acts_bf16[0], m->acts[0], (size_t)bs * m->sizes[0], stream);
    if (bp->kmajor0 && layers > 0) {   // (the first product takes the kernel: no PDL)
        cudaCheck(cudaEventRecord(m->ev_act[0], stream));
        cudaCheck(cudaStreamWaitEvent(m->side, m->ev_act[0], 0));
        tf32_transpose(m->inp_t[0], NULL, m->acts[0], bs, m->sizes[0], m->side);
        cudaCheck(cudaEventRecord(m->ev_x_t, m->side));
    }
    for (int l = 0; l < layers; l++) {
        ProductPlan values;
        const ProductPlan *pp = model_product(m, &bp->layer[l].p[MF_FWD], &values);
        const int act = l < m->L - 1 ? m->act : ACT_NONE;  // the last layer's outputs are the logits
        const float *w = (m->prec == PREC_TF32 ? m->params_tf32 : m->params) + m->w_off[l];
        const MatmulFastEpi epi = {MF_EPI_FORWARD, act, m->params + m->b_off[l], NULL, {}, m->prec == PREC_TF32 && l < m->L - 1};
        MatmulFastBf16 bf;
        plan_run(MF_FWD, pp, m->acts[l + 1], m->acts[l], w, &epi, model_bf16(m, MF_FWD, l, &bf), NULL, NULL,
                 pp->family != FAM_TF32_KMAJOR, stream);
        if (l + 1 < m->L && train && bp->layer[l + 1].kmajor) {
            cudaCheck(cudaEventRecord(m->ev_act[l + 1], stream));
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_act[l + 1], 0));
            tf32_transpose(m->inp_t[l + 1], NULL, m->acts[l + 1], bs, m->sizes[l + 1], m->side);
        }
    }
}

// acts[0] holds the batch (bs rows): every layer's output, the logits in acts[L]
static void model_forward(Model *m, int bs, cudaStream_t stream) { model_forward_layers(m, bs, m->L, 0, stream); }

// With at most HEAD_MAX_C classes the last layer, the loss and the gradients down to the last
// hidden layer's output are one kernel (kernels/fast/ops/head.cuh)
static int model_head_fused(const Model *m) { return m->plan.head_fused; }

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
        plan_launched_families |= 1u << FAM_HEAD;
        // (with -x 1 on the K-major kernel in the layer below, dh rounded to TF32 too: model_backward_update)
        head_forward_backward(m->acts[L], m->dacts[L], L > 1 ? m->dacts[L - 1] : NULL, m->losses, m->acts[L - 1],
                              m->params + m->w_off[L - 1], m->params + m->b_off[L - 1], m->labels, bs,
                              m->sizes[L - 1], m->sizes[L], m->act, stream, norm, L > 1 ? m->dacts_bf16[L - 1] : NULL,
                              L > 2 && plan_batch(&m->plan, bs, 1)->layer[L - 2].kmajor ? m->dout_r[L - 2] : NULL,
                              plan_batch(&m->plan, bs, 1)->layer[L - 1].p[MF_FWD].mm.cfg);
    } else {
        model_forward_layers(m, bs, L, 1, stream);
        softmax_xent_forward_backward_fast(m->dacts[L], m->losses, m->step_losses, m->step, m->acts[L], m->labels, bs,
                                           m->sizes[L], stream, norm);
    }
}

// Several ranks: layer l's W and b gradients summed over the ranks in place (m->sum_grads), on the
// communication stream, once dW (ev_dw[l]) and db (ev_db[l]) are written; then their SGD step, which
// writes W, b, their momentum and W's TF32 copy, after dinp has read W (ev_dinp[l]; not for a layer
// whose dinp reads the transposed copy, wait_dinp 0); and for a layer that keeps the K-major copies
// (inp_t[l], l >= 1) W rounded and transposed into params_tf32t[1 - par], the copy this step's dinp
// does not read, which the next step's reads. (model_backward_update's end joins this stream into
// the main one, so the next step's forward pass and dinp see the new weights.)
static void model_sum_step(Model *m, int l, int par, int wait_dinp, float lr, float momentum, float weight_decay) {
    const int IN = m->sizes[l], OUT = m->sizes[l + 1];
    const size_t w = m->w_off[l], n = (size_t)OUT * IN + OUT;   // W then b: b = w + OUT * IN
    float *w_tf32 = m->params_tf32 ? m->params_tf32 + w : NULL;
    cudaCheck(cudaStreamWaitEvent(m->comm, m->ev_dw[l], 0));
    cudaCheck(cudaStreamWaitEvent(m->comm, m->ev_db[l], 0));
    m->sum_grads(m->sum_ctx, m->grads + w, n, m->comm);
    if (wait_dinp) cudaCheck(cudaStreamWaitEvent(m->comm, m->ev_dinp[l], 0));
    sgd_update_fast(m->params + w, m->grads + w, m->mbuf + w, w_tf32, n, lr, momentum, weight_decay, 1, m->comm,
                    m->params_bf16 ? m->params_bf16 + w : NULL);
    if (l > 0 && m->inp_t[l]) tf32_transpose(m->params_tf32t[1 - par] + w, NULL, w_tf32, OUT, IN, m->comm);
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
// last update, its SGD step in dW's epilogue or the SGD kernel after it, as the plan says
// (PLAN_FUSED_SGD_MAX_WEIGHTS says why). Above it a layer's dW runs beside its dinp, so its step is a
// kernel after dW; except with -x 2 where the plan says (plan_bf16_sgd_in_dw): dW then runs after
// dinp, which reads W's BF16 copy, takes the step in its epilogue and stores the new copy itself.
// With -x 1, a layer on the K-major kernel (LayerPlan.kmajor) needs dout rounded (dinp's operand)
// and rounded and transposed (dW's): below the fused head, which stores the rounded copy itself, the
// side stream transposes it before dW and dinp starts at once; elsewhere main makes both first
// (ev_dout_t: the side stream's dW waits for it). Its dW takes the SGD step in its epilogue, which
// writes W, its momentum and its rounded copies: params_tf32 (what the next forward reads) and W^T
// into the params_tf32t that dinp does not read (Model's tf32t_parity), so dW runs beside dinp from
// start to end. (A layer with the copies at a batch too small for the kernel transposes its new
// weights after the SGD kernel.)
// Several ranks (SGD_AFTER_SUM): no SGD step rides on a kernel; a fourth stream, comm, sums each
// layer's W and b gradients over the ranks (m->sum_grads, in place) as soon as its dW and db are
// written, while the backward pass goes on with the layers below, and then steps W and b (they lie
// next to each other in the flat buffers) once dinp has read W (model_sum_step). A layer on the
// K-major kernel stores its gradient there too; its dinp reads params_tf32t[par], so its step need
// not wait for dinp, and the new W^T goes into the other copy after it. Here dinp waits for its
// layer's dW rather than running beside it: the sum of the big layer's gradient then starts a whole
// product earlier and runs beside dinp and the layers below, instead of after them, where nothing
// is left to hide it. The comm stream has the highest priority, so that the sum's kernel gets SMs as
// soon as dinp's running blocks end, not after all of them.
// The events carry the order: ev_dout[l] (dout ready) and ev_dinp[l] (W no longer read); at the end
// the main stream waits for the others. In a CUDA graph capture the events become edges: the step is
// captured as a DAG of branches, not a chain.
// keep_grads: the weight gradients are stored (a caller may read them); else the K-major kernel's SGD
// epilogue leaves them out (train_steps keeps only a run's last step's, as the fused steps do).
// norm: the rows the loss is the mean over (bs on one GPU; the global batch on several ranks).
static void model_backward_update(Model *m, int bs, float lr, float momentum, float weight_decay, int keep_grads,
                                  cudaStream_t stream, int norm = 0) {
    const BatchPlan *bp = plan_batch(&m->plan, bs, 1);
    const int ranks = m->plan.ranks > 1;
    const int par = m->tf32t_parity;   // -x 1's K-major dinp reads params_tf32t[par], SGD writes the other
    for (int l = m->L - 1; l >= 0; l--) {
        const LayerPlan *lp = &bp->layer[l];
        const int IN = m->sizes[l], OUT = m->sizes[l + 1];
        const size_t w = m->w_off[l], b = m->b_off[l];
        const float *dout = m->dacts[l + 1];
        float *w_tf32 = m->params_tf32 ? m->params_tf32 + w : NULL;
        __nv_bfloat16 *w_bf16 = m->params_bf16 ? m->params_bf16 + w : NULL;
        MatmulFastBf16 bf_dw, bf_dinp;
        const MatmulFastBf16 *dw16 = model_bf16(m, MF_DWEIGHT, l, &bf_dw), *dinp16 = model_bf16(m, MF_DINP, l, &bf_dinp);
        // dW's epilogue: the layer's SGD step (SGD_IN_DW), or none
        MatmulFastEpi dw_epi = {MF_EPI_RAW, ACT_NONE, NULL, NULL, {}, 0};
        if (lp->sgd == SGD_IN_DW)
            dw_epi = {MF_EPI_SGD, ACT_NONE, NULL, NULL, {m->params + w, m->mbuf + w, lr, momentum, weight_decay, w_tf32}, 0};
        const MatmulFastEpi dinp_epi = {MF_EPI_DINP, m->act, NULL, m->acts[l], {}, 0};
        cudaCheck(cudaEventRecord(m->ev_dout[l], stream));
        cudaCheck(cudaStreamWaitEvent(m->bias_stream, m->ev_dout[l], 0));
        float *bp_ = ranks ? NULL : m->params + b, *bm_ = ranks ? NULL : m->mbuf + b;   // (ranks: b steps after the sum)
        if (l == m->L - 1 && model_head_fused(m))  // with the step's mean loss and the step counter
            head_batch_sums(m->grads + b, dout, bs, OUT, bp_, bm_, lr, momentum, weight_decay, m->step_losses, m->step,
                            m->losses, m->bias_stream, norm);
        else
            matmul_backward_dbias_fast(m->grads + b, dout, bs, OUT, bp_, bm_, lr, momentum, weight_decay,
                                       m->bias_stream, m->dbias_part);
        if (ranks) cudaCheck(cudaEventRecord(m->ev_db[l], m->bias_stream));
        // the split-K scratch (on GPUs without thread-block clusters) is one buffer: the first layer's
        // dW, on this stream, waits for the side stream's dW of layer 1, which uses it too
        if (l == 0 && m->L > 1 && m->scratch) {
            cudaCheck(cudaEventRecord(m->ev_side_done, m->side));
            cudaCheck(cudaStreamWaitEvent(stream, m->ev_side_done, 0));
        }
        cudaStream_t dw_stream = lp->p[MF_DWEIGHT].stream == STREAM_SIDE ? m->side : stream;
        if (l > 0 && lp->kmajor) {
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
            plan_run(MF_DWEIGHT, &lp->p[MF_DWEIGHT], keep_grads || ranks ? m->grads + w : NULL, m->dout_t[l],
                     m->inp_t[l], &dw_epi, NULL, NULL, ranks ? NULL : m->params_tf32t[1 - par] + w, 0, m->side);
            if (ranks) cudaCheck(cudaEventRecord(m->ev_dw[l], m->side));
            if (ranks) cudaCheck(cudaStreamWaitEvent(stream, m->ev_dw[l], 0));   // (dW first: see above)
            plan_run(MF_DINP, &lp->p[MF_DINP], m->dacts[l], m->dout_r[l], m->params_tf32t[par] + w, &dinp_epi, NULL,
                     NULL, l == 1 && bp->kmajor0 ? m->dout_t[0] : NULL, 0, stream);
            if (ranks) model_sum_step(m, l, par, 0, lr, momentum, weight_decay);
            continue;   // (W has taken its step, or will after the sum)
        }
        if (l == 0 && bp->kmajor0) {   // (layer 0 on the K-major kernel: SGD in the epilogue, or after the sum)
            cudaCheck(cudaStreamWaitEvent(stream, m->ev_x_t, 0));
            plan_run(MF_DWEIGHT, &lp->p[MF_DWEIGHT], keep_grads || ranks ? m->grads + w : NULL, m->dout_t[0],
                     m->inp_t[0], &dw_epi, NULL, NULL, NULL, 0, stream);
            if (ranks) {
                cudaCheck(cudaEventRecord(m->ev_dw[l], stream));
                model_sum_step(m, l, par, 0, lr, momentum, weight_decay);
            }
            continue;
        }
        if (lp->sgd == SGD_IN_DW && dw16 != NULL) {
            // -x 2 with W's step in dW's epilogue (plan_bf16_sgd_in_dw): dinp first, which reads W's BF16
            // copy; then dW, which steps W and stores the new copy (and the gradient where it is kept)
            if (lp->p[MF_DINP].used) {
                plan_run(MF_DINP, &lp->p[MF_DINP], m->dacts[l], dout, m->params + w, &dinp_epi, dinp16, NULL, NULL, 0,
                         stream);
                cudaCheck(cudaEventRecord(m->ev_dinp[l], stream));
                cudaCheck(cudaStreamWaitEvent(dw_stream, m->ev_dinp[l], 0));
            }
            bf_dw.out = w_bf16;
            const ProductPlan *dw = &lp->p[MF_DWEIGHT];   // (C may be NULL on the wgmma kernels' float4 path)
            const int keep = keep_grads || dw->family != FAM_WGMMA_BF16_COPIES || dw->N % 4 != 0;
            plan_run(MF_DWEIGHT, dw, keep ? m->grads + w : NULL, dout, m->acts[l], &dw_epi, &bf_dw, m->scratch, NULL, 0,
                     dw_stream);
            continue;
        }
        if (l > 0) cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dout[l], 0));
        ProductPlan values;
        plan_run(MF_DWEIGHT, model_product(m, &lp->p[MF_DWEIGHT], &values), m->grads + w, dout, m->acts[l], &dw_epi,
                 dw16, m->scratch, NULL, 0, dw_stream);
        if (ranks) cudaCheck(cudaEventRecord(m->ev_dw[l], dw_stream));
        if (ranks && dw_stream != stream) cudaCheck(cudaStreamWaitEvent(stream, m->ev_dw[l], 0));
        if (lp->p[MF_DINP].used)   // (the fused head has computed the last layer's dinp)
            plan_run(MF_DINP, &lp->p[MF_DINP], m->dacts[l], dout, m->params + w, &dinp_epi, dinp16, NULL, NULL, 0,
                     stream);
        if (ranks) {   // the sum over the ranks, then W's and b's step, on the communication stream
            cudaCheck(cudaEventRecord(m->ev_dinp[l], stream));
            model_sum_step(m, l, par, 1, lr, momentum, weight_decay);
        } else if (l > 0) {
            cudaCheck(cudaEventRecord(m->ev_dinp[l], stream));
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_dinp[l], 0));
            sgd_update_fast(m->params + w, m->grads + w, m->mbuf + w, w_tf32, (size_t)OUT * IN, lr, momentum,
                            weight_decay, 1, m->side, w_bf16);
            if (m->inp_t[l]) tf32_transpose(m->params_tf32t[1 - par] + w, NULL, w_tf32, OUT, IN, m->side);
        } else if (lp->sgd == SGD_KERNEL) {
            sgd_update_fast(m->params + w, m->grads + w, m->mbuf + w, w_tf32, (size_t)OUT * IN, lr, momentum,
                            weight_decay, 1, stream, w_bf16);
        }
    }
    cudaCheck(cudaEventRecord(m->ev_side_done, m->side));
    cudaCheck(cudaEventRecord(m->ev_bias_done, m->bias_stream));
    cudaCheck(cudaStreamWaitEvent(stream, m->ev_side_done, 0));
    cudaCheck(cudaStreamWaitEvent(stream, m->ev_bias_done, 0));
    if (ranks) {
        cudaCheck(cudaEventRecord(m->ev_comm_done, m->comm));
        cudaCheck(cudaStreamWaitEvent(stream, m->ev_comm_done, 0));
    }
    if (m->params_tf32t[0]) m->tf32t_parity ^= 1;
}

// ----------------------------------------------------------------------------
// one training step, and runs of steps replayed from CUDA graphs

// the optimizer's settings, as the steps take them
typedef struct {
    float lr, momentum, weight_decay;
} Sgd;

// Forward, loss, backward and update on the bs rows already in acts[0] and labels.
static void train_step_on_batch(Model *m, int bs, float lr, float momentum, float weight_decay, cudaStream_t stream) {
    model_forward_loss(m, bs, bs, stream);
    model_backward_update(m, bs, lr, momentum, weight_decay, 1, stream);
}

// this rank's share of a global batch of gbs rows: rows [*first, *first + return value) of it (the
// first gbs % ranks ranks take one more row). One GPU: all of it.
static int model_share(const Model *m, int gbs, int *first) {
    const int ranks = m->plan.ranks, base = gbs / ranks, extra = gbs % ranks, r = m->rank;
    *first = r * base + (r < extra ? r : extra);
    return base + (r < extra ? 1 : 0);
}

// The batch of the step the device step counter points at (ahead: the next one), this rank's share
// of its gbs rows, gathered into buffer i of the two as the plan says
static void model_gather(Model *m, const DeviceData *train, int i, int ahead, int gbs, cudaStream_t stream) {
    int first;
    const int rows = model_share(m, gbs, &first);
    gather_batch_step(m->batches[i], m->batches_bf16[i], m->batch_labels[i], train->images, train->labels,
                      m->perm + first, m->step, ahead, m->B, rows, train->D, plan_batch(&m->plan, rows, 1)->gather,
                      stream);
}

// Enqueues n steps, the last with last_bs rows (global rows, on several ranks), launched from the
// host (-f 0) or for a graph capture (run_steps). Step i+1's batch is gathered into the other of the
// two batch buffers while step i runs, on the side stream, from the start of step i (which it waits
// for, ev_step) to well before the side stream's first weight gradient. The other buffer was last
// read by step i-1, which has finished (its end joined every stream into the main one), and the step
// counter holds i (step i-1 moved it on), so the gather takes the rows of step *step + 1. The gather
// is then off the critical path, and off the bias stream, which carries the small model's critical
// path after the fused head. The first step of a run gathers its own batch: a run (one graph)
// depends on no other. (The event ev_step sits before the first forward kernel, which is launched
// with PDL: in the captured graph the gather's edge comes from the nodes before the event, and
// nothing orders the gather against that kernel: kernels/fast/ops/pdl.cuh.)
// Several ranks: each takes its share of every batch (model_share), and the loss is the mean over
// the global batch, so that the ranks' gradients add up to the global batch's mean gradient.
static void train_steps(Model *m, const DeviceData *train, int n, int last_bs, Sgd o, cudaStream_t stream) {
    for (int i = 0; i < n; i++) {
        const int gbs = i == n - 1 ? last_bs : m->B, next_gbs = i + 1 == n - 1 ? last_bs : m->B;
        int first;
        const int bs = model_share(m, gbs, &first);
        m->acts[0] = m->batches[i % 2];
        if (m->batches_bf16[0]) m->acts_bf16[0] = m->batches_bf16[i % 2];
        m->x_bf16 = m->batches_bf16[0] != NULL;   // (the gathers write the BF16 batch too)
        m->labels = m->batch_labels[i % 2];
        m->x_pixels = plan_batch(&m->plan, bs, 1)->gather == GATHER_PIXELS;   // (how this batch is gathered)
        if (i + 1 < n) {
            cudaCheck(cudaEventRecord(m->ev_step, stream));
            cudaCheck(cudaStreamWaitEvent(m->side, m->ev_step, 0));
            model_gather(m, train, (i + 1) % 2, 1, next_gbs, m->side);
        }
        if (i == 0) model_gather(m, train, 0, 0, gbs, stream);
        model_forward_loss(m, bs, gbs, stream);
        model_backward_update(m, bs, o.lr, o.momentum, o.weight_decay, i == n - 1, stream, gbs);
    }
    m->x_bf16 = 0;   // (a batch written into acts[0] by anything else gets the copy kernel)
}

// One step on bs rows, its kernels launched from the host (-f 0); the batch is rows
// (*step) * B ... of the permutation.
static void train_step(Model *m, const DeviceData *train, int bs, Sgd o, cudaStream_t stream) {
    train_steps(m, train, 1, bs, o, stream);
}

// Captures a run of n steps, the last of them with last_bs rows, starting at the given parity of
// -x 1's transposed copies, into a new graph of m->graphs.
static StepGraph *capture_run(Model *m, const DeviceData *train, int n, int last_bs, int parity, Sgd o,
                              cudaStream_t stream) {
    if (m->num_graphs == FAST_MAX_GRAPHS) die("", "internal: more than %d kinds of step run", FAST_MAX_GRAPHS);
    StepGraph *g = &m->graphs[m->num_graphs++];
    g->n = n;
    g->last_bs = last_bs;
    g->parity = parity;
    m->tf32t_parity = parity;
    cudaGraph_t graph;
    cudaCheck(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    train_steps(m, train, n, last_bs, o, stream);   // (moves the parity on by n)
    cudaCheck(cudaStreamEndCapture(stream, &graph));
    // (the kernels keep the priority of the stream they were captured on: the ranks' sums, on
    // the high-priority comm stream, take SMs ahead of the waiting blocks of the products)
    cudaCheck(cudaGraphInstantiate(&g->exec, graph, cudaGraphInstantiateFlagUseNodePriority));
    cudaCheck(cudaGraphDestroy(graph));
    return g;
}

// Runs n steps, the last of them with last_bs rows, from a CUDA graph (-f 1). Such a run is the
// same work every time it occurs (the kernels find their rows through the device step counter), so
// it is captured once and replayed. An epoch has at most two kinds of run (log_every full steps,
// and the remainder at its end).
// With -x 1's two transposed copies of the weights (params_tf32t) a run's steps alternate between them
// from the parity it starts at, so that is part of the run's kind: a run of odd length leaves the next
// one at the other parity. Both parities of a kind are captured when it first occurs: an epoch of an
// odd number of steps starts the next at the other parity, which would otherwise pay for its captures
// in the second epoch.
static void run_steps(Model *m, const DeviceData *train, int n, int last_bs, Sgd o, cudaStream_t stream) {
    StepGraph *g = NULL;
    const int parity = m->params_tf32t[0] ? m->tf32t_parity : 0;
    for (int i = 0; i < m->num_graphs; i++)
        if (m->graphs[i].n == n && m->graphs[i].last_bs == last_bs && m->graphs[i].parity == parity)
            g = &m->graphs[i];
    if (!g) {
        if (m->params_tf32t[0]) capture_run(m, train, n, last_bs, 1 - parity, o, stream);
        g = capture_run(m, train, n, last_bs, parity, o, stream);
    }
    cudaCheck(cudaGraphLaunch(g->exec, stream));
    if (m->params_tf32t[0]) m->tf32t_parity = (parity + n) % 2;
}

// (The fused steps read and step the FP32 weights only: a model that takes them drops its BF16 copies,
// and its evaluation's forward products then read the FP32 tensors; and -x 1's K-major copies.)
// -f 2 (any 0) or 3 (any 1): the plan made again, the fused step taken where it says so. Returns
// whether it is.
static int model_use_fused(Model *m, int any) {
    step_plan_make(&m->plan, m->sizes, m->L, m->act, m->B, m->prec, any ? PLAN_ASK_FUSED_ANY : PLAN_ASK_FUSED, 1);
    if (m->plan.fused.ok) {
        model_free_bf16(m);
        model_free_tf32k(m);
    }
    if (m->plan.fused.ok && m->plan.fused.deep && !m->head_part)
        m->head_part = (float *)cudaMallocCheck(
            fused_deep_head_part_floats(m->sizes, m->L, m->B) * sizeof(float),
            "the head's shares of the logits");
    if (m->plan.fused.ok && m->plan.fused.deep && m->plan.fused.tma >= 2 && !m->fused_dr) {
        const size_t floats = fused_deep_dacts_r(m->sizes, m->L, m->B, NULL, NULL);
        m->fused_dr = (float *)cudaMallocCheck(floats * sizeof(float), "the TF32 copies of the hidden gradients");
        cudaCheck(cudaMemset(m->fused_dr, 0, floats * sizeof(float)));   // (read past a short batch, as dacts)
    }
    return m->plan.fused.ok;
}

// what both fused steps' arguments hold alike (FusedStepArgs, FusedDeepArgs): the model's buffers,
// the data, the run of n steps, the optimizer
template <typename Args>
static void fused_common_args(Args *a, const Model *m, const DeviceData *train, int n, int last_bs, Sgd o) {
    a->params = m->params;
    a->mbuf = m->mbuf;
    a->grads = m->grads;
    a->losses = m->losses;
    a->step_losses = m->step_losses;
    a->step = m->step;
    a->perm = m->perm;
    a->images = train->images;
    a->all_labels = train->labels;
    a->act = m->act;
    a->B = m->B;
    a->n = n;
    a->last_bs = last_bs;
    a->lr = o.lr;
    a->mu = o.momentum;
    a->wd = o.weight_decay;
    a->prof = m->fused_prof;
}

// fused_run for a deep model: the batches alternate between the two buffers, the first gathered into
// batches[0]; afterwards acts[0] and labels are the last step's, as after n train_step()s
static void fused_deep_run(Model *m, const DeviceData *train, int n, int last_bs, Sgd o, cudaStream_t stream) {
    FusedDeepArgs a;
    memset(&a, 0, sizeof(a));
    a.params_tf32 = m->params_tf32;
    memcpy(a.w_off, m->w_off, sizeof(a.w_off));
    memcpy(a.b_off, m->b_off, sizeof(a.b_off));
    memcpy(a.acts, m->acts, sizeof(a.acts));
    memcpy(a.dacts, m->dacts, sizeof(a.dacts));
    if (m->fused_dr && m->plan.fused.tma >= 2)
        fused_deep_dacts_r(m->sizes, m->L, m->B, m->fused_dr, a.dacts_r);
    memcpy(a.sizes, m->sizes, sizeof(a.sizes));
    for (int p = 0; p < 2; p++) {
        a.xbuf[p] = m->batches[p];
        a.labbuf[p] = m->batch_labels[p];
    }
    a.head_part = m->head_part;
    a.L = m->L;
    fused_common_args(&a, m, train, n, last_bs, o);
    fused_deep_steps(&m->plan.fused, m->prec, &a, stream);
    m->acts[0] = m->batches[(n - 1) % 2];
    m->labels = m->batch_labels[(n - 1) % 2];
    m->x_pixels = m->prec == PREC_FP32;   // (its FP32 kernel gathers pixel bytes: kernels/fast/fused/fused_deep.cuh)
}

// Runs n steps, the last of them with last_bs rows, as one kernel (-f 2, after model_use_fused): the
// same steps as n train_step()s, the batch gathered inside it into acts[0] = batches[0] (a deep
// model's: fused_deep_run).
static void fused_run(Model *m, const DeviceData *train, int n, int last_bs, Sgd o, cudaStream_t stream) {
    plan_launched_families |= 1u << (m->plan.fused.deep ? FAM_FUSED_DEEP : FAM_FUSED_STEP);
    m->x_pixels = 0;   // (the one-hidden-layer fused step gathers the values; the deep one: fused_deep_run)
    if (m->plan.fused.deep) return fused_deep_run(m, train, n, last_bs, o, stream);
    m->acts[0] = m->batches[0];
    m->labels = m->batch_labels[0];
    FusedStepArgs a;
    memset(&a, 0, sizeof(a));
    a.w0 = m->w_off[0];
    a.b0 = m->b_off[0];
    a.w1 = m->w_off[1];
    a.b1 = m->b_off[1];
    a.x = m->acts[0];
    a.h = m->acts[1];
    a.logits = m->acts[2];
    a.dh = m->dacts[1];
    a.dz = m->dacts[2];
    a.labels_out = m->labels;
    a.IN = m->sizes[0];
    a.H = m->sizes[1];
    a.C = m->sizes[2];
    fused_common_args(&a, m, train, n, last_bs, o);
    fused_steps(&m->plan.fused, &a, stream);
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

#endif  // MLP_FAST_STEP_STEP_CUH
