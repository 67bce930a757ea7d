/*
The CPU reference against PyTorch: loads tests/ref/ref_<act>.bin (written by
dev/pytorch_reference.py with torch.nn.Linear, F.cross_entropy and torch.optim.SGD),
starts train_mlp_cpu.c's model from the same weights, feeds the same batch, and compares
every step's logits, loss, each layer's weight and bias gradient, and the weights after the
update (tests/check.h names them). Included by tests/test_cpu.c (every `make test`, CI
included) and by test_mlp.cu, after train_mlp_cpu.c.

Tolerances: both sides compute in float32, only in a different order (PyTorch's GEMMs block
their sums, we sum left to right), so each value differs by a few float32 roundings
(~6e-8 relative each) accumulated over at most a few dozen terms: ~1e-6 relative.
    logits, loss   rtol 1e-5, atol 1e-6 x max   ten times that rounding, on values of order 1
    gradients      rtol 1e-4, atol 1e-6 x max   a gradient is a difference (softmax - onehot) of
                                                order-1 numbers, so its relative error is larger
                                                than theirs; the atol covers entries that cancel to ~0
    weights        rtol 1e-5, atol 1e-6 x max   p - lr·buf: the update is small against p, so the
                                                gradient's error shrinks by lr (0.1) in the weights
A wrong formula (a missing 1/B, momentum applied twice, weight decay left out) moves these
by 1e-2 or more, a thousand times past any of the bounds.
*/
#ifndef MLP_REF_CPU_H
#define MLP_REF_CPU_H

#include "../common/reffile.h"
#include "check.h"

static const Tolerances TOL_REF = {{1e-5, 1e-6, 0}, {1e-5, 1e-6, 0}, {1e-4, 1e-6, 0}, {1e-5, 1e-6, 0}};

// the reference's tensors of step t (the forward pass before the update, the weights after it)
static StepTensors ref_step(const RefFile *r, int t) {
    StepTensors s;
    memset(&s, 0, sizeof(s));
    s.acts[r->L] = r->logits + (size_t)t * r->B * r->sizes[r->L];
    s.loss = r->loss[t];
    s.grads = r->grads + (size_t)t * r->nparams;
    s.params = r->params + (size_t)t * r->nparams;
    return s;
}

// prints the file's settings; 0 when it loaded
static int ref_open(const char *path, RefFile *r) {
    char err[512];
    if (ref_load(path, r, err, sizeof(err)) != 0) {
        check(0, "%s", err);
        return -1;
    }
    printf("\n-- %s: %s, sizes", path, ACT_NAMES[r->act]);
    for (int l = 0; l <= r->L; l++) printf("%c%d", l ? ',' : ' ', r->sizes[l]);
    printf(", B=%d, %d steps, lr %g, momentum %g, weight decay %g\n", r->B, r->nsteps, r->lr, r->momentum,
           r->weight_decay);
    return 0;
}

static void ref_check_cpu(const char *path, int verbose) {
    RefFile r;
    if (ref_open(path, &r) != 0) return;
    ModelCPU m;
    model_build_cpu(&m, r.sizes, r.L, r.act, r.B);
    for (int i = 0; i < r.nparams; i++) m.params[i] = r.params0[i];
    for (int i = 0; i < r.B * r.sizes[0]; i++) m.acts[0][i] = r.inputs[i];
    for (int b = 0; b < r.B; b++) m.labels[b] = r.labels[b];
    Report rep;
    report_init(&rep, verbose);
    for (int t = 0; t < r.nsteps; t++) {
        model_forward_cpu(&m, r.B);
        StepTensors got;
        memset(&got, 0, sizeof(got));
        got.loss = (float)model_loss_cpu(&m, r.B);
        model_backward_cpu(&m, r.B);
        model_update_cpu(&m, r.lr, r.momentum, r.weight_decay);
        got.acts[r.L] = m.acts[r.L];
        got.grads = m.grads;
        got.params = m.params;
        StepTensors want = ref_step(&r, t);
        compare_step(&rep, t, &got, &want, r.sizes, r.L, r.B, &TOL_REF);
    }
    report_print(&rep);
    model_free_cpu(&m);
    ref_free(&r);
}

#endif // MLP_REF_CPU_H
