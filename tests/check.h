/*
The test harness every test binary of mlp.cu uses: count checks, print one line per check,
and end with the line CI reads:

    12 passed, 0 failed, 3 skipped

test_exit() returns the process exit code: non-zero when anything failed. shell_capture runs a
program as a user would, through the shell, and keeps what it printed.

The second half compares a model's tensors with another implementation's, step by step, with
one name per tensor everywhere (the CPU against PyTorch in test_cpu, each GPU trainer against
the CPU and PyTorch in test_mlp):

    act1 .. act{L-1}     each hidden layer's output (acts[l])        forward values
    logits               the last layer's output (acts[L])           forward values
    loss                 the mean loss of the batch                  loss
    dlogits              dloss/dlogits (dacts[L])                    gradients
    dact1 .. dact{L-1}   each hidden layer's gradient, its activation's derivative applied (dacts[l])
    dW0, db0, ...        each layer's weight and bias gradient       gradients
    W0, b0, ...          each layer's weight and bias after the SGD step   weights
*/
#ifndef MLP_CHECK_H
#define MLP_CHECK_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "../common/mlp.h"  // MAX_LAYERS, param_layout

// Runs cmd through the shell, its stdout and stderr into the file tmp and then into out (outlen
// bytes with the terminating 0). Returns its exit status, 128 + n for a signal, -1 if it did not run.
static int shell_capture(const char *cmd, const char *tmp, char *out, size_t outlen) {
    char full[5000];
    snprintf(full, sizeof(full), "%s >%s 2>&1", cmd, tmp);
    int status = system(full);
    out[0] = '\0';
    FILE *f = fopen(tmp, "r");
    if (f) {
        size_t n = fread(out, 1, outlen - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    if (status == -1) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int checks_passed = 0, checks_failed = 0, checks_skipped = 0;

// check(cond, "what is checked", ...): prints "  ok   what" or "  FAIL what"
static int check(int cond, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int check(int cond, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  %s ", cond ? "ok  " : "FAIL");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    if (cond) checks_passed++;
    else checks_failed++;
    fflush(stdout);
    return cond;
}

static void skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void skip(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  skip ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    checks_skipped++;
    fflush(stdout);
}

static void section(const char *name) { printf("\n== %s\n", name); }

// ----------------------------------------------------------------------------
// comparing a model's tensors, step by step

// A difference passes when |got - want| <= rtol·|want| + atol·max|want|: a relative bound, plus
// an absolute floor scaled by the tensor's largest value, for the entries that cancel to ~0.
// With norm > 0 the tensor is held instead to ||got - want|| / ||want|| <= norm. NaN never passes.
typedef struct {
    double rtol, atol, norm;
} Tol;
typedef struct {
    Tol forward, loss, grads, weights;  // the four kinds of tensor, see the names above
} Tolerances;

// Host copies of one step's tensors of one model. A NULL pointer is not compared (the PyTorch
// reference files hold no activations).
typedef struct {
    const float *acts[MAX_LAYERS + 1];   // acts[1..L]; acts[L] the logits
    const float *dacts[MAX_LAYERS + 1];  // dacts[1..L]; dacts[L] dlogits
    const float *grads, *params;         // the flat buffers (params: after the update)
    float loss;
} StepTensors;

// ||a - b|| / ||b|| in double over n floats (||a - b|| where b is all zeros; NaN never passes a bound)
static double rel_norm(const float *a, const float *b, size_t n) {
    double d2 = 0, b2 = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        d2 += d * d;
        b2 += (double)b[i] * b[i];
    }
    return b2 > 0 ? sqrt(d2 / b2) : sqrt(d2);
}

#define MAX_TENSORS (2 + 8 * MAX_LAYERS)
typedef struct {
    char name[48];
    double max_abs, max_rel, scale, rel_norm;  // worst over the steps; scale: the largest |want|
    int worst_step, ok;
    Tol tol;
} TensorStat;
typedef struct {
    TensorStat t[MAX_TENSORS];
    int n;
    int verbose;                 // print every tensor at every step
    int first_fail_step;         // -1 while every tensor has passed
    char first_fail_name[48];
} Report;

static void report_init(Report *r, int verbose) {
    memset(r, 0, sizeof(*r));
    r->verbose = verbose;
    r->first_fail_step = -1;
}

static TensorStat *report_get(Report *r, const char *name) {
    for (int i = 0; i < r->n; i++)
        if (strcmp(r->t[i].name, name) == 0) return &r->t[i];
    TensorStat *s = &r->t[r->n++];
    memset(s, 0, sizeof(*s));
    snprintf(s->name, sizeof(s->name), "%s", name);
    s->ok = 1;
    return s;
}

static void tol_describe(const Tol *t, char *out, size_t n) {
    if (t->norm > 0) snprintf(out, n, "rel norm <= %.0e", t->norm);
    else snprintf(out, n, "rtol %.0e, atol %.0e x max", t->rtol, t->atol);
}

// one tensor at one step, folded into the report
static void compare_tensor(Report *r, const char *name, int step, const float *got, const float *want, size_t n,
                           Tol tol) {
    double scale = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    double max_abs = 0, max_rel = 0, diff2 = 0, ref2 = 0;
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (tol.norm == 0 && !(d <= tol.rtol * fabs(want[i]) + tol.atol * scale)) ok = 0;  // NaN fails
        if (!(d <= max_abs)) max_abs = d;
        if (fabs(want[i]) > 1e-3 * scale) max_rel = fmax(max_rel, d / fabs(want[i]));
        diff2 += d * d;
        ref2 += (double)want[i] * want[i];
    }
    double rel_norm = ref2 > 0 ? sqrt(diff2 / ref2) : sqrt(diff2);
    if (tol.norm > 0 && !(rel_norm <= tol.norm)) ok = 0;
    TensorStat *s = report_get(r, name);
    s->tol = tol;
    if (max_abs > s->max_abs || (!ok && s->ok)) s->worst_step = step;
    s->max_abs = fmax(s->max_abs, max_abs);
    s->max_rel = fmax(s->max_rel, max_rel);
    s->scale = fmax(s->scale, scale);
    s->rel_norm = fmax(s->rel_norm, rel_norm);
    s->ok &= ok;
    if (!ok && r->first_fail_step < 0) {
        r->first_fail_step = step;
        snprintf(r->first_fail_name, sizeof(r->first_fail_name), "%s", name);
    }
    if (r->verbose) {
        char bound[48];
        tol_describe(&tol, bound, sizeof(bound));
        printf("    step %2d %-16s max abs %.2e  max rel %.2e  rel norm %.2e  (%s)  %s\n", step, name, max_abs,
               max_rel, rel_norm, bound, ok ? "OK" : "NOT OK");
    }
}

// every tensor of one step that both sides have; B rows, layer sizes sizes[0..L]
static void compare_step(Report *r, int step, const StepTensors *got, const StepTensors *want, const int *sizes, int L,
                         int B, const Tolerances *tol) {
    char name[48];
    for (int l = 1; l <= L; l++) {
        if (!got->acts[l] || !want->acts[l]) continue;
        if (l < L) snprintf(name, sizeof(name), "act%d", l);
        compare_tensor(r, l < L ? name : "logits", step, got->acts[l], want->acts[l], (size_t)B * sizes[l],
                       tol->forward);
    }
    compare_tensor(r, "loss", step, &got->loss, &want->loss, 1, tol->loss);
    for (int l = L; l >= 1; l--) {
        if (!got->dacts[l] || !want->dacts[l]) continue;
        if (l < L) snprintf(name, sizeof(name), "dact%d", l);
        compare_tensor(r, l < L ? name : "dlogits", step, got->dacts[l], want->dacts[l], (size_t)B * sizes[l],
                       tol->grads);
    }
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    param_layout(sizes, L, w_off, b_off);
    for (int pass = 0; pass < 2; pass++) {  // the gradients, then the weights after the update
        const float *g = pass ? got->params : got->grads, *w = pass ? want->params : want->grads;
        if (!g || !w) continue;
        for (int l = 0; l < L; l++) {
            snprintf(name, sizeof(name), "%sW%d", pass ? "" : "d", l);
            compare_tensor(r, name, step, g + w_off[l], w + w_off[l], (size_t)sizes[l + 1] * sizes[l],
                           pass ? tol->weights : tol->grads);
            snprintf(name, sizeof(name), "%sb%d", pass ? "" : "d", l);
            compare_tensor(r, name, step, g + b_off[l], w + b_off[l], (size_t)sizes[l + 1],
                           pass ? tol->weights : tol->grads);
        }
    }
}

// one line per tensor (its worst step), each counted as a check; then where the two first parted
static int report_print(const Report *r) {
    for (int i = 0; i < r->n; i++) {
        const TensorStat *s = &r->t[i];
        char bound[48];
        tol_describe(&s->tol, bound, sizeof(bound));
        printf("  %-6s %-10s max abs %.2e  max rel %.2e  rel norm %.2e  max |v| %.2e  (worst step %d; %s)\n",
               s->ok ? "OK" : "NOT OK", s->name, s->max_abs, s->max_rel, s->rel_norm, s->scale, s->worst_step, bound);
        if (s->ok) checks_passed++;
        else checks_failed++;
    }
    if (r->first_fail_step >= 0)
        printf("  ---> the two first parted at step %d, in %s (run with -V to see every step)\n", r->first_fail_step,
               r->first_fail_name);
    fflush(stdout);
    return r->first_fail_step < 0;
}

static int test_exit(void) {
    printf("\n%d passed, %d failed", checks_passed, checks_failed);
    if (checks_skipped) printf(", %d skipped", checks_skipped);
    printf("\n");
    return checks_failed ? 1 : 0;
}

#endif // MLP_CHECK_H
