/*
Reader for the IDX files of MNIST and Fashion-MNIST, raw or gzip-compressed.

An IDX file is a 4-byte magic number, then one big-endian uint32 per dimension, then the
items as unsigned bytes:

    images: 00 00 08 03 | n | rows | cols | n*rows*cols pixels (0..255)
    labels: 00 00 08 01 | n | n labels

(0x08 means "unsigned byte"; the last magic byte is the number of dimensions.)
zlib's gzread reads plain files unchanged, so one code path serves both forms.

Nothing is trusted: the magic number, every dimension, the size computation (guarded
against overflow), truncation, trailing bytes, that the image and label counts agree, and
that every label is below the model's number of outputs. A failure returns -1 and writes
one line into err that names the file and what is wrong; the reader never exits, so the
tests can call it. The dataset lives on the host as uint8 (47 MB for MNIST's 60k training
images), and the GPU trainer copies it to the device once.
*/
#ifndef MLP_IDX_H
#define MLP_IDX_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../common/args.h"
#include "../common/utils.h"

#define IDX_MAX_BYTES ((size_t)1 << 31)  // refuse item data above 2 GiB: int indexing stays safe

typedef struct {
    uint8_t *images;  // (n, rows*cols), row-major pixels
    uint8_t *labels;  // (n)
    int n, rows, cols;
    char images_path[1100], labels_path[1100];
} Dataset;

// Reads exactly n bytes; returns the count read (short on truncation) or -1 on a gzip error.
static inline long long idx_gzread_all(gzFile g, uint8_t *dst, size_t n) {
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done > (1u << 30) ? (1u << 30) : n - done;
        int got = gzread(g, dst + done, (unsigned)chunk);
        if (got < 0) return -1;
        if (got == 0) break;
        done += (size_t)got;
    }
    return (long long)done;
}

static inline int idx_gzip_error(gzFile g, const char *path, char *err, size_t errlen) {
    int zerr;
    const char *msg = gzerror(g, &zerr);
    const char *colon = strstr(msg, ": ");  // zlib prefixes the path; say it once
    snprintf(err, errlen, "%s: corrupt gzip data: %s", path, colon ? colon + 2 : msg);
    return -1;
}

// The body of idx_read, on an open file: every return but the last is a failure.
static inline int idx_read_open(gzFile g, const char *path, int ndims, uint8_t **data, uint32_t *dims, char *err,
                                size_t errlen) {
    uint8_t head[16];
    size_t head_len = 4 + 4 * (size_t)ndims;
    long long got = idx_gzread_all(g, head, head_len);
    if (got < 0) return idx_gzip_error(g, path, err, errlen);
    if (got < 4) {
        snprintf(err, errlen, "%s: truncated header: the file has %lld bytes, an IDX header needs %zu", path, got,
                 head_len);
        return -1;
    }
    uint32_t magic = ((uint32_t)head[0] << 24) | ((uint32_t)head[1] << 16) | ((uint32_t)head[2] << 8) | head[3];
    uint32_t want = 0x00000800u | (uint32_t)ndims;
    if (magic != want) {
        snprintf(err, errlen, "%s: wrong magic number 0x%08x, expected 0x%08x (%s)", path, magic, want,
                 ndims == 3 ? "IDX unsigned-byte images, 3 dimensions" : "IDX unsigned-byte labels, 1 dimension");
        return -1;
    }
    if ((size_t)got < head_len) {
        snprintf(err, errlen, "%s: truncated header: %lld of its %zu bytes", path, got, head_len);
        return -1;
    }
    size_t total = 1;
    for (int d = 0; d < ndims; d++) {
        const uint8_t *p = head + 4 + 4 * d;
        dims[d] = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
        if (dims[d] == 0) {
            snprintf(err, errlen, "%s: dimension %d is zero: the file holds no items", path, d);
            return -1;
        }
        if (mul_overflows(total, dims[d], &total) || total > IDX_MAX_BYTES) {
            snprintf(err, errlen, "%s: dimensions too large: their product exceeds %zu bytes", path, IDX_MAX_BYTES);
            return -1;
        }
    }
    *data = (uint8_t *)malloc(total);
    if (!*data) {
        snprintf(err, errlen, "%s: out of host memory for %zu bytes", path, total);
        return -1;
    }
    got = idx_gzread_all(g, *data, total);
    if (got < 0) return idx_gzip_error(g, path, err, errlen);
    if ((size_t)got < total) {
        snprintf(err, errlen, "%s: truncated: the header promises %zu bytes of data, the file holds %lld", path, total,
                 got);
        return -1;
    }
    uint8_t extra;
    if (gzread(g, &extra, 1) != 0) {
        snprintf(err, errlen, "%s: unexpected bytes after the %zu bytes of data the header promises", path, total);
        return -1;
    }
    return 0;
}

// Reads one IDX file of unsigned bytes with ndims dimensions (3: images, 1: labels).
// On success *data is malloc'ed and dims[0..ndims-1] are set.
static inline int idx_read(const char *path, int ndims, uint8_t **data, uint32_t *dims, char *err, size_t errlen) {
    *data = NULL;
    errno = 0;
    gzFile g = gzopen(path, "rb");
    if (!g) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno ? errno : ENOENT));
        return -1;
    }
    int rc = idx_read_open(g, path, ndims, data, dims, err, errlen);
    gzclose(g);
    if (rc != 0) {
        free(*data);
        *data = NULL;
    }
    return rc;
}

// dir/name if it exists, else dir/name.gz; 0 if either exists
static inline int idx_find(const char *dir, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", dir, name);
    if (file_exists(out)) return 0;
    snprintf(out, n, "%s/%s.gz", dir, name);
    return file_exists(out) ? 0 : -1;
}

static inline void dataset_free(Dataset *ds) {
    free(ds->images);
    free(ds->labels);
    ds->images = ds->labels = NULL;
}

// Loads split "train" or "t10k" from dir. Labels must be below num_classes.
static inline int dataset_load(const char *dir, const char *split, int num_classes, Dataset *ds, char *err, size_t errlen) {
    memset(ds, 0, sizeof(*ds));
    char name[64];
    snprintf(name, sizeof(name), "%s-images-idx3-ubyte", split);
    if (idx_find(dir, name, ds->images_path, sizeof(ds->images_path)) != 0) {
        snprintf(err, errlen, "%s: no %s or %s.gz in this directory", dir, name, name);
        return -1;
    }
    snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", split);
    if (idx_find(dir, name, ds->labels_path, sizeof(ds->labels_path)) != 0) {
        snprintf(err, errlen, "%s: no %s or %s.gz in this directory", dir, name, name);
        return -1;
    }
    uint32_t idims[3], ldims[1];
    if (idx_read(ds->images_path, 3, &ds->images, idims, err, errlen) != 0) return -1;
    if (idx_read(ds->labels_path, 1, &ds->labels, ldims, err, errlen) != 0) {
        dataset_free(ds);
        return -1;
    }
    if (idims[0] != ldims[0]) {
        snprintf(err, errlen, "%s: holds %u labels but %s holds %u images", ds->labels_path, ldims[0],
                 ds->images_path, idims[0]);
        dataset_free(ds);
        return -1;
    }
    if (idims[0] > 0x7fffffffu) {
        snprintf(err, errlen, "%s: %u items is more than this reader handles", ds->images_path, idims[0]);
        dataset_free(ds);
        return -1;
    }
    ds->n = (int)idims[0];
    ds->rows = (int)idims[1];
    ds->cols = (int)idims[2];
    for (int i = 0; i < ds->n; i++) {
        if (ds->labels[i] >= num_classes) {
            snprintf(err, errlen, "%s: label %d of item %d is out of range: the model has %d outputs (last size of -m)",
                     ds->labels_path, ds->labels[i], i, num_classes);
            dataset_free(ds);
            return -1;
        }
    }
    return 0;
}

// Which dataset is this? MNIST and Fashion-MNIST share a format but not a label histogram:
// Fashion-MNIST's training set has exactly 6000 of each class, MNIST's has these counts.
static inline const char *dataset_name(const Dataset *train) {
    static const int mnist_train[10] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
    int count[256] = {0};
    for (int i = 0; i < train->n; i++) count[train->labels[i]]++;
    int is_mnist = train->n == 60000, is_fashion = train->n == 60000;
    for (int c = 0; c < 10; c++) {
        is_mnist &= count[c] == mnist_train[c];
        is_fashion &= count[c] == 6000;
    }
    if (is_mnist) return "MNIST";
    if (is_fashion) return "Fashion-MNIST";
    return "an IDX dataset (not MNIST or Fashion-MNIST)";
}

// The default -d: the first of these that holds the training images.
static inline const char *find_dataset_dir(void) {
    static const char *const dirs[] = {"data/mnist", "data/fashion-mnist", "/usr/share/datasets/fashion-mnist"};
    char path[1100];
    for (int i = 0; i < 3; i++)
        if (idx_find(dirs[i], "train-images-idx3-ubyte", path, sizeof(path)) == 0) return dirs[i];
    return NULL;
}

// What both trainers do first: find the data, load both splits, and check that the model
// fits them. Exits 1 on a bad file, 2 when -m does not match the images.
static inline const char *load_datasets_or_die(Config *c, const char *prog, Dataset *train, Dataset *test) {
    char err[1400];
    if (!c->data_dir[0]) {
        const char *dir = find_dataset_dir();
        if (!dir)
            die("make data (or -d DIR)",
                "no dataset found in data/mnist, data/fashion-mnist or /usr/share/datasets/fashion-mnist");
        snprintf(c->data_dir, sizeof(c->data_dir), "%s", dir);
    }
    int classes = c->sizes[c->L];
    if (dataset_load(c->data_dir, "train", classes, train, err, sizeof(err)) != 0) die("make data", "%s", err);
    if (dataset_load(c->data_dir, "t10k", classes, test, err, sizeof(err)) != 0) die("make data", "%s", err);
    if (test->rows != train->rows || test->cols != train->cols)
        die("make data", "%s: test images are %dx%d but training images are %dx%d", test->images_path,
            test->rows, test->cols, train->rows, train->cols);
    int pixels = train->rows * train->cols;
    if (c->sizes[0] != pixels)
        usage_error(prog, "-m: the first size is %d but the images have %d pixels (%dx%d); use -m %d,...",
               c->sizes[0], pixels, train->rows, train->cols, pixels);
    return dataset_name(train);
}

#endif // MLP_IDX_H
