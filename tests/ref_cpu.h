/*
The CPU reference against PyTorch: loads dev/ref/ref_<act>.bin (written by
dev/pytorch_reference.py with torch.nn.Linear, F.cross_entropy and torch.optim.SGD),
starts train_mlp_cpu.c's model from the same weights, feeds the same batch, and compares
every step's logits, loss, each layer's weight and bias gradient, and the weights after the
update. Included by tests/test_cpu.c (every `make test`, CI included) and by test_mlp.cu,
after train_mlp_cpu.c.

Tolerances: both sides compute in float32, only in a different order (PyTorch's GEMMs block
their sums, we sum left to right), so each value differs by a few float32 roundings
(~6e-8 relative each) accumulated over at most a few dozen terms: ~1e-6 relative.
    logits, loss   rtol 1e-5, atol 1e-6   ten times that rounding, on values of order 1
    gradients      rtol 1e-4, atol 1e-7   a gradient is a difference (softmax - onehot) of order-1
                                           numbers, so its relative error is larger than theirs;
                                           the atol covers the entries that cancel to ~0
    weights        rtol 1e-5, atol 1e-7   p - lr·buf: the update is small against p, so the
                                           gradient's error shrinks by lr (0.1) in the weights
A wrong formula (a missing 1/B, momentum applied twice, weight decay left out) moves these
by 1e-2 or more, a thousand times past any of the bounds.
*/
#ifndef MLP_REF_CPU_H
#define MLP_REF_CPU_H

#include "../common/reffile.h"
#include "check.h"

// Compares each layer's weight and bias separately, named like "layer 1 dweight".
static void compare_params_by_layer(const char *what, const float *got, const float *want, const int *sizes, int L,
                                    double atol, double rtol) {
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    param_layout(sizes, L, w_off, b_off);
    for (int l = 0; l < L; l++) {
        char name[64];
        snprintf(name, sizeof(name), "layer %d %sweight", l, what);
        compare_floats(name, got + w_off[l], want + w_off[l], (size_t)sizes[l + 1] * sizes[l], atol, rtol);
        snprintf(name, sizeof(name), "layer %d %sbias", l, what);
        compare_floats(name, got + b_off[l], want + b_off[l], (size_t)sizes[l + 1], atol, rtol);
    }
}

static void ref_check_cpu(const char *path) {
    RefFile r;
    char err[512];
    if (ref_load(path, &r, err, sizeof(err)) != 0) {
        check(0, "%s", err);
        return;
    }
    printf("  %s: %s, sizes", path, ACT_NAMES[r.act]);
    for (int l = 0; l <= r.L; l++) printf("%c%d", l ? ',' : ' ', r.sizes[l]);
    printf(", B=%d, %d steps, lr %g, momentum %g, weight decay %g\n", r.B, r.nsteps, r.lr, r.momentum, r.weight_decay);
    ModelCPU m;
    model_cpu_build(&m, r.sizes, r.L, r.act, r.B);
    for (int i = 0; i < r.nparams; i++) m.params[i] = r.params0[i];
    for (int i = 0; i < r.B * r.sizes[0]; i++) m.acts[0][i] = r.inputs[i];
    for (int b = 0; b < r.B; b++) m.labels[b] = r.labels[b];
    size_t nout = (size_t)r.B * r.sizes[r.L];
    for (int t = 0; t < r.nsteps; t++) {
        printf("  step %d\n", t);
        float loss = (float)model_cpu_forward(&m, r.B, 1);
        compare_floats("logits", m.acts[r.L], r.logits + t * nout, nout, 1e-6, 1e-5);
        compare_floats("loss", &loss, r.loss + t, 1, 1e-6, 1e-5);
        model_cpu_backward(&m, r.B);
        compare_params_by_layer("d", m.grads, r.grads + (size_t)t * r.nparams, r.sizes, r.L, 1e-7, 1e-4);
        model_cpu_update(&m, r.lr, r.momentum, r.weight_decay);
        compare_params_by_layer("updated ", m.params, r.params + (size_t)t * r.nparams, r.sizes, r.L, 1e-7, 1e-5);
    }
    model_cpu_free(&m);
    ref_free(&r);
}

#endif // MLP_REF_CPU_H
