/*
common/mlp.h: what every implementation of the model agrees on, with no dependencies: the
activations' numbers, the matmuls' precisions, the layer limits, and the layout of the flat parameter buffer. The CPU
trainer, the kernels, the GPU trainers, the tests and the reference-file reader include it;
the flag table (run/args.h) builds on it.
*/
#ifndef MLP_MLP_H
#define MLP_MLP_H

#include <stddef.h>

#define MAX_LAYERS 16      // at most 16 weight layers (17 sizes)
#define MAX_WIDTH 65536    // widest layer accepted

// Activations: the hidden layers use one of the first three; ACT_NONE is the identity
// (the last layer's logits). The numbers are part of the reference-file format.
enum { ACT_SIGMOID = 0, ACT_RELU = 1, ACT_TANH = 2, ACT_NONE = 3 };
static const char *const ACT_NAMES[] = {"sigmoid", "relu", "tanh", "none"};

// The precision of the matmuls (train_mlp_fast's -x; everything else is FP32 in every mode). The
// fast kernels, the planner and the flag table all use these names.
typedef enum { PREC_FP32 = 0, PREC_TF32 = 1, PREC_BF16 = 2 } Precision;
static const char *const PREC_NAMES[] = {"FP32", "TF32 tensor cores", "BF16 tensor cores, FP32 master weights"};

// The flat parameter buffer, shared by every implementation and the checkpoint/reference
// files: for each layer l in order, W_l (sizes[l+1] x sizes[l], row-major, like
// nn.Linear's weight) then b_l (sizes[l+1]). Gradients and momentum use the same layout.
// Returns the total number of floats; w_off/b_off get each tensor's offset.
static inline size_t param_layout(const int *sizes, int L, size_t *w_off, size_t *b_off) {
    size_t off = 0;
    for (int l = 0; l < L; l++) {
        w_off[l] = off;
        off += (size_t)sizes[l + 1] * (size_t)sizes[l];
        b_off[l] = off;
        off += (size_t)sizes[l + 1];
    }
    return off;
}

#endif // MLP_MLP_H
