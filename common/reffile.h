/*
Reader for the PyTorch reference files in tests/ref/ref_<act>.bin, written by
dev/pytorch_reference.py (which documents the same format). Little-endian, no padding:

    int32 magic = 0x4D4C5052 ("MLPR"), int32 version = 1,
    int32 act, int32 L, int32 sizes[L+1], int32 B, int32 nsteps,
    float32 lr, float32 momentum, float32 weight_decay,
    int32 nparams
    float32 inputs[B*sizes[0]]; int32 labels[B]
    float32 params0[nparams]                     the initial weights (flat layout, see param_layout)
    for each step t < nsteps:
        float32 logits[B*sizes[L]]; float32 loss  forward pass with the weights before step t
        float32 grads[nparams]                    dloss/dparams (p.grad: weight decay not included)
        float32 params[nparams]                   after torch.optim.SGD's step()

Every field is checked; a bad file gets a message naming it and what is wrong.
*/
#ifndef MLP_REFFILE_H
#define MLP_REFFILE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"  // MAX_LAYERS, param_layout

#define REF_MAGIC 0x4D4C5052
#define REF_VERSION 1

typedef struct {
    int act, L, sizes[MAX_LAYERS + 1], B, nsteps;
    float lr, momentum, weight_decay;
    int nparams;
    float *inputs;   // (B, sizes[0])
    int *labels;     // (B)
    float *params0;  // (nparams)
    float *logits;   // (nsteps, B, sizes[L])
    float *loss;     // (nsteps)
    float *grads;    // (nsteps, nparams)
    float *params;   // (nsteps, nparams), after each step
} RefFile;

static inline int ref_read_exact(FILE *f, void *dst, size_t size, size_t n) { return fread(dst, size, n, f) == n; }

static inline void ref_free(RefFile *r) {
    free(r->inputs);
    free(r->labels);
    free(r->params0);
    free(r->logits);
    free(r->loss);
    free(r->grads);
    free(r->params);
    memset(r, 0, sizeof(*r));
}

// 0 on success; else -1 with the reason in err
static inline int ref_load(const char *path, RefFile *r, char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open (generate it with: python3 dev/pytorch_reference.py)", path);
        return -1;
    }
    int32_t head[4];
    int ok = ref_read_exact(f, head, 4, 4);
    if (!ok || head[0] != REF_MAGIC || head[1] != REF_VERSION) {
        snprintf(err, errlen, "%s: not a version-%d reference file (bad magic or version)", path, REF_VERSION);
        fclose(f);
        return -1;
    }
    r->act = head[2];
    r->L = head[3];
    if (r->act < 0 || r->act > 2 || r->L < 1 || r->L > MAX_LAYERS) {
        snprintf(err, errlen, "%s: activation %d or layer count %d out of range", path, r->act, r->L);
        fclose(f);
        return -1;
    }
    int32_t tail[3];
    ok = ref_read_exact(f, r->sizes, 4, (size_t)r->L + 1) && ref_read_exact(f, tail, 4, 2) &&
         ref_read_exact(f, &r->lr, 4, 1) && ref_read_exact(f, &r->momentum, 4, 1) &&
         ref_read_exact(f, &r->weight_decay, 4, 1) && ref_read_exact(f, &tail[2], 4, 1);
    r->B = tail[0];
    r->nsteps = tail[1];
    r->nparams = tail[2];
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    int sizes_ok = 1;
    for (int l = 0; l <= r->L; l++) sizes_ok &= r->sizes[l] >= 1 && r->sizes[l] <= 4096;
    if (!ok || !sizes_ok || r->B < 1 || r->B > 4096 || r->nsteps < 1 || r->nsteps > 1000 ||
        (size_t)r->nparams != param_layout(r->sizes, r->L, w_off, b_off)) {
        snprintf(err, errlen, "%s: header is truncated or inconsistent", path);
        fclose(f);
        return -1;
    }
    size_t in = (size_t)r->B * r->sizes[0], out = (size_t)r->B * r->sizes[r->L], np = (size_t)r->nparams;
    r->inputs = (float *)malloc(in * 4);
    r->labels = (int *)malloc((size_t)r->B * 4);
    r->params0 = (float *)malloc(np * 4);
    r->logits = (float *)malloc(r->nsteps * out * 4);
    r->loss = (float *)malloc((size_t)r->nsteps * 4);
    r->grads = (float *)malloc(r->nsteps * np * 4);
    r->params = (float *)malloc(r->nsteps * np * 4);
    ok = r->inputs && r->labels && r->params0 && r->logits && r->loss && r->grads && r->params &&
         ref_read_exact(f, r->inputs, 4, in) && ref_read_exact(f, r->labels, 4, (size_t)r->B) &&
         ref_read_exact(f, r->params0, 4, np);
    for (int t = 0; ok && t < r->nsteps; t++)
        ok = ref_read_exact(f, r->logits + t * out, 4, out) && ref_read_exact(f, r->loss + t, 4, 1) &&
             ref_read_exact(f, r->grads + t * np, 4, np) && ref_read_exact(f, r->params + t * np, 4, np);
    char extra;
    if (ok && fread(&extra, 1, 1, f) != 0) {
        snprintf(err, errlen, "%s: unexpected bytes after the last step", path);
        ok = 0;
    } else if (!ok) {
        snprintf(err, errlen, "%s: truncated", path);
    }
    for (int b = 0; ok && b < r->B; b++) {
        if (r->labels[b] < 0 || r->labels[b] >= r->sizes[r->L]) {
            snprintf(err, errlen, "%s: label %d out of range", path, r->labels[b]);
            ok = 0;
        }
    }
    fclose(f);
    if (!ok) ref_free(r);
    return ok ? 0 : -1;
}

#endif // MLP_REFFILE_H
