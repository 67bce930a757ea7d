/*
Finite-difference check of the CPU reference's forward and backward passes, in double.

train_mlp_cpu.c is compiled here with MLP_REAL=double. For every hidden activation, on a
small odd shape (batch 3, sizes 7,5,4,3, and a deeper 6,9,2,5,4 at batch 5), each
parameter's analytic gradient from model_backward_cpu is compared with the fourth-order
central difference
    (-loss(p+2h) + 8 loss(p+h) - 8 loss(p-h) + loss(p-2h)) / 12h,   h = 1e-4
Its error is O(h⁴) from truncation (~1e-16) plus ~1e-16/h from rounding (~3e-12 absolute),
so a correct backward pass lands far below the 1e-6 bound even for gradients of 1e-5, and
any real mistake (a missing 1/B, a transposed index, a wrong derivative) lands far above it.
(The plain two-point difference is not enough here: its rounding error, ~2e-10 absolute,
is already 1e-5 relative to the smallest gradients of the deeper net.)
The relative error is |a - n| / max(|a|, |n|, 1e-5): gradients below 1e-5 (relu's dead
units give exact zeros) are held to an absolute 1e-11 instead, a few times the rounding
noise of the difference itself, since a relative error of noise against zero says nothing.
*/
#define TESTING
#define MLP_REAL double
#include "../train_mlp_cpu.c"
#include "check.h"

// A fingerprint of which hidden units are positive: relu's loss has kinks where a unit
// crosses zero, and a finite difference across a kink measures nothing. Parameters whose
// perturbations change the pattern are skipped (and counted).
static uint64_t relu_pattern(const ModelCPU *m, int B) {
    uint64_t hash = 1469598103934665603ull;
    for (int l = 1; l < m->L; l++)
        for (int i = 0; i < B * m->sizes[l]; i++) hash = (hash ^ (uint64_t)(m->acts[l][i] > 0)) * 1099511628211ull;
    return hash;
}

static void gradcheck(const int *sizes, int L, int B, int act) {
    ModelCPU m;
    model_build_cpu(&m, sizes, L, act, B);
    model_init_params_cpu(&m, 42 + act);
    Rng rng;
    rng_seed(&rng, 7, 3);
    for (int i = 0; i < B * sizes[0]; i++) m.acts[0][i] = rng_uniform(&rng);
    for (int b = 0; b < B; b++) m.labels[b] = (int)rng_below(&rng, (uint32_t)sizes[L]);
    model_forward_cpu(&m, B);
    model_loss_cpu(&m, B);
    uint64_t pattern = relu_pattern(&m, B);
    model_backward_cpu(&m, B);
    double *analytic = (double *)mallocCheck(sizeof(double) * m.num_params);
    memcpy(analytic, m.grads, sizeof(double) * m.num_params);

    const double h = 1e-4;
    double worst = 0;
    size_t worst_i = 0, at_kink = 0;
    for (size_t i = 0; i < m.num_params; i++) {
        double p = m.params[i];
        double f[4];
        const double shift[4] = {2 * h, h, -h, -2 * h};
        int kink = 0;
        for (int j = 0; j < 4; j++) {
            m.params[i] = p + shift[j];
            model_forward_cpu(&m, B);
            f[j] = model_loss_cpu(&m, B);
            kink |= act == ACT_RELU && relu_pattern(&m, B) != pattern;
        }
        m.params[i] = p;
        if (kink) {
            at_kink++;
            continue;
        }
        double numeric = (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h);
        double a = analytic[i];
        double scale = fmax(fmax(fabs(a), fabs(numeric)), 1e-5);
        double rel = fabs(a - numeric) / scale;
        if (rel > worst) {
            worst = rel;
            worst_i = i;
        }
    }
    char shape[64];
    size_t k = 0;
    for (int l = 0; l <= L; l++) k += (size_t)snprintf(shape + k, sizeof(shape) - k, l ? ",%d" : "%d", sizes[l]);
    check(worst < 1e-6 && at_kink * 20 <= m.num_params,
          "%-7s sizes %-12s B=%d: %zu parameters (%zu at a relu kink, skipped), worst relative error %.2e "
          "(param %zu) < 1e-6", ACT_NAMES[act], shape, B, m.num_params, at_kink, worst, worst_i);
    free(analytic);
    model_free_cpu(&m);
}

int main(void) {
    section("finite-difference gradient check of the CPU reference (double)");
    const int small[] = {7, 5, 4, 3};
    const int deep[] = {6, 9, 2, 5, 4};
    for (int act = 0; act < 3; act++) {
        gradcheck(small, 3, 3, act);
        gradcheck(deep, 4, 5, act);
    }
    const int single[] = {4, 3};  // no hidden layer: softmax + cross-entropy of a linear model
    gradcheck(single, 1, 2, ACT_SIGMOID);
    return test_exit();
}
