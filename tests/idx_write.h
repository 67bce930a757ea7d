// Writing IDX files (MNIST's format) for the tests that make their own datasets: a big-endian
// header of the magic (0x00 0x00, the type 0x08 for unsigned bytes, the number of dimensions) and
// one 32-bit size per dimension, then the bytes. data/idx.h reads them.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "../common/utils.h"  // fopenCheck, fwriteCheck, fcloseCheck

static inline void put_be32(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

// an IDX file of unsigned bytes: dims[0..ndims) in the header, then the n bytes of body
static inline void write_idx(const char *path, const uint32_t *dims, int ndims, const uint8_t *body, size_t n) {
    FILE *f = fopenCheck(path, "wb");
    uint8_t head[16] = {0, 0, 8, (uint8_t)ndims};
    for (int d = 0; d < ndims; d++) put_be32(head + 4 + 4 * d, dims[d]);
    fwriteCheck(head, 1, 4 + 4 * (size_t)ndims, f, path);
    fwriteCheck(body, 1, n, f, path);
    fcloseCheck(f, path);
}

// one split of an MNIST-style dataset in dir: DIR/train-images-idx3-ubyte and
// DIR/train-labels-idx1-ubyte (split 0), or the t10k ones (split 1), of n images of rows x cols
static inline void write_idx_split(const char *dir, int split, const uint8_t *images, const uint8_t *labels, int n,
                                   int rows, int cols) {
    char path[600];
    uint32_t idims[3] = {(uint32_t)n, (uint32_t)rows, (uint32_t)cols}, ldims[1] = {(uint32_t)n};
    snprintf(path, sizeof(path), "%s/%s-images-idx3-ubyte", dir, split ? "t10k" : "train");
    write_idx(path, idims, 3, images, (size_t)n * (size_t)rows * (size_t)cols);
    snprintf(path, sizeof(path), "%s/%s-labels-idx1-ubyte", dir, split ? "t10k" : "train");
    write_idx(path, ldims, 1, labels, (size_t)n);
}
