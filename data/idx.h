/*
Reader for the IDX files of MNIST and Fashion-MNIST, raw or gzip-compressed.

An IDX file is a 4-byte magic number, then one big-endian uint32 per dimension, then the
items as unsigned bytes:

    images: 00 00 08 03 | n | rows | cols | n*rows*cols pixels (0..255)
    labels: 00 00 08 01 | n | n labels

(0x08 means "unsigned byte"; the last magic byte is the number of dimensions.)
A file that starts with gzip's magic bytes (1f 8b) is inflated as it is read, whatever its name;
any other file is read as it is.

Nothing is trusted (data/input.h says how, and gives the limits): the magic number; every
dimension, and their product, computed in 64 bits and held to the limits; truncation; bytes
after the data. A raw file's size is checked against its header before anything is allocated.
A gzip file's header claim is first held to what its compressed size could inflate to
(GZIP_MAX_RATIO), then its data is inflated in chunks into a buffer that starts at
IDX_GZ_FIRST_BUFFER and doubles, never past the claim: memory follows the data really there,
and a small file claiming 2 GB costs no more than what it holds. After the gzip stream only
another gzip member may follow (concatenated members are legal gzip, and are read on); any
other byte is refused (zlib's gzread would skip it silently).
data/dataset.h checks that the image and label counts agree. A failure returns -1 and writes
one line into err that names the file and what is wrong; the reader never exits, so the
tests (and the fuzz targets, tests/fuzz/) can call it. data/dataset.h builds the datasets on it.
*/
#ifndef MLP_IDX_H
#define MLP_IDX_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "../common/utils.h"
#include "input.h"  // Dataset, the limits, data_open_file

#define IDX_GZ_FIRST_BUFFER ((int64_t)16 << 20)  // a gzip file's data buffer starts at 16 MiB
#define IDX_GZ_CHUNK (1 << 16)                   // compressed bytes read at a time

// The bytes of an IDX file, raw or inflated as they are read.
typedef struct {
    FILE *f;
    const char *path;
    int64_t size;            // the file's size in bytes
    int gz;                  // 1: a gzip file
    int z_ready;             // inflateInit2 done (inflateEnd is owed)
    int ended;               // gzip: the last member has ended, and nothing follows it
    z_stream z;
    uint8_t in[IDX_GZ_CHUNK];  // compressed bytes, z.next_in points into it
} IdxStream;

// gzip: tops up the compressed bytes in s->in (moving what is left to the front). Returns the
// bytes available, or -1 on a read error (err set).
static inline long idx_fill(IdxStream *s, char *err, size_t errlen) {
    if (s->z.avail_in > 0 && s->z.next_in != s->in) memmove(s->in, s->z.next_in, s->z.avail_in);
    s->z.next_in = s->in;
    size_t got = fread(s->in + s->z.avail_in, 1, sizeof(s->in) - s->z.avail_in, s->f);
    if (got == 0 && ferror(s->f)) {
        snprintf(err, errlen, "%s: read error: %s", s->path, strerror(errno ? errno : EIO));
        return -1;
    }
    s->z.avail_in += (uInt)got;
    return (long)s->z.avail_in;
}

// gzip: a member has just ended. What follows must be nothing, or another member (its magic
// bytes 1f 8b), which is then read on. 0, or -1 with err set.
static inline int idx_member_end(IdxStream *s, char *err, size_t errlen) {
    if (s->z.avail_in < 2 && idx_fill(s, err, errlen) < 0) return -1;
    if (s->z.avail_in == 0) {
        s->ended = 1;
        return 0;
    }
    if (s->z.avail_in >= 2 && s->z.next_in[0] == 0x1f && s->z.next_in[1] == 0x8b) {
        inflateReset(&s->z);
        return 0;
    }
    // how many bytes follow the stream: the rest of the file, from where inflate stopped
    long pos = ftell(s->f);
    long long extra = pos >= 0 ? (long long)(s->size - pos) + s->z.avail_in : (long long)s->z.avail_in;
    snprintf(err, errlen,
             "%s: %lld unexpected bytes after the end of the gzip stream (not another gzip member): the file was "
             "damaged or appended to",
             s->path, extra);
    return -1;
}

// Reads up to n bytes of data into dst. Returns the count (short only at the end of the data), or
// -1 with err set: a read error, corrupt gzip data, bytes after the gzip stream.
static inline int64_t idx_stream_read(IdxStream *s, uint8_t *dst, int64_t n, char *err, size_t errlen) {
    int64_t done = 0;
    if (!s->gz) {
        while (done < n) {
            size_t want = n - done > (1 << 30) ? (size_t)1 << 30 : (size_t)(n - done);
            size_t got = fread(dst + done, 1, want, s->f);
            if (got == 0) {
                if (ferror(s->f)) {
                    snprintf(err, errlen, "%s: read error: %s", s->path, strerror(errno ? errno : EIO));
                    return -1;
                }
                break;
            }
            done += (int64_t)got;
        }
        return done;
    }
    while (done < n && !s->ended) {
        if (s->z.avail_in == 0) {
            long have = idx_fill(s, err, errlen);
            if (have < 0) return -1;
            if (have == 0) {
                snprintf(err, errlen, "%s: truncated gzip file: the compressed data ends before the gzip stream "
                         "does (%lld bytes of data so far)", s->path, (long long)(s->z.total_out));
                return -1;
            }
        }
        uInt room = n - done > (1 << 30) ? 1u << 30 : (uInt)(n - done);
        s->z.next_out = dst + done;
        s->z.avail_out = room;
        int ret = inflate(&s->z, Z_NO_FLUSH);
        done += room - s->z.avail_out;
        if (ret == Z_STREAM_END) {
            if (idx_member_end(s, err, errlen) != 0) return -1;
        } else if (ret == Z_BUF_ERROR) {
            // no progress possible: inflate wants more input, which the loop reads (or finds none)
            if (s->z.avail_in > 0) {
                snprintf(err, errlen, "%s: corrupt gzip data: inflate made no progress", s->path);
                return -1;
            }
        } else if (ret != Z_OK) {
            snprintf(err, errlen, "%s: corrupt gzip data: %s", s->path,
                     s->z.msg ? s->z.msg : ret == Z_MEM_ERROR ? "out of memory" : "inflate failed");
            return -1;
        }
    }
    return done;
}

// "60000 x 28 x 28" for messages
static inline void idx_format_dims(const uint32_t *dims, int ndims, char *out, size_t n) {
    size_t k = 0;
    out[0] = '\0';
    for (int d = 0; d < ndims && k < n; d++) k += (size_t)snprintf(out + k, n - k, d ? " x %u" : "%u", dims[d]);
}

// The body of idx_read, on an open file of size bytes (path only names it in messages). On success
// *data is malloc'ed and dims[0..ndims-1] are set; on failure *data may be left allocated for the
// caller to free.
static inline int idx_read_stream(IdxStream *s, int ndims, uint8_t **data, uint32_t *dims, char *err, size_t errlen) {
    const char *path = s->path;
    uint8_t head[16];
    int64_t head_len = 4 + 4 * (int64_t)ndims;
    int64_t got = idx_stream_read(s, head, head_len, err, errlen);
    if (got < 0) return -1;
    if (got < 4) {
        snprintf(err, errlen, "%s: truncated header: the file has %lld bytes, an IDX header needs %lld", path,
                 (long long)got, (long long)head_len);
        return -1;
    }
    uint32_t magic = ((uint32_t)head[0] << 24) | ((uint32_t)head[1] << 16) | ((uint32_t)head[2] << 8) | head[3];
    uint32_t want = 0x00000800u | (uint32_t)ndims;
    if (magic != want) {
        snprintf(err, errlen, "%s: wrong magic number 0x%08x, expected 0x%08x (%s)", path, magic, want,
                 ndims == 3 ? "IDX unsigned-byte images, 3 dimensions" : "IDX unsigned-byte labels, 1 dimension");
        return -1;
    }
    if (got < head_len) {
        snprintf(err, errlen, "%s: truncated header: %lld of its %lld bytes", path, (long long)got,
                 (long long)head_len);
        return -1;
    }
    // the sizes: each dimension at least 1, their product in 64 bits (three uint32 can pass 2^64:
    // each step is checked for overflow)
    uint64_t total = 1;
    int too_large = 0;  // the product does not fit 64 bits
    for (int d = 0; d < ndims; d++) {
        const uint8_t *p = head + 4 + 4 * d;
        dims[d] = ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
        if (dims[d] == 0) {
            snprintf(err, errlen, "%s: dimension %d is zero: the file holds no items", path, d);
            return -1;
        }
        if (total > UINT64_MAX / dims[d]) too_large = 1;
        else total *= dims[d];
    }
    // what the file holds after its header: a raw file's size says; a gzip file's bounds it
    int64_t present = s->size - head_len;
    char shape[64];
    idx_format_dims(dims, ndims, shape, sizeof(shape));
    if (ndims == 3 && (uint64_t)dims[1] * dims[2] > (uint64_t)DATA_MAX_ITEM_BYTES) {
        snprintf(err, errlen, "%s: dimensions too large: an image of %u x %u pixels is %llu bytes, more than the "
                 "%lld this reader accepts (%s)", path, dims[1], dims[2], (unsigned long long)dims[1] * dims[2],
                 (long long)DATA_MAX_ITEM_BYTES, shape);
        return -1;
    }
    if (too_large || total > (uint64_t)DATA_MAX_BYTES) {
        char claim[64] = "more than 2^64";
        if (!too_large) snprintf(claim, sizeof(claim), "%llu", (unsigned long long)total);
        snprintf(err, errlen, "%s: dimensions too large: the header promises %s bytes of data (%s), more than the "
                 "%lld this reader accepts%s", path, claim, shape, (long long)DATA_MAX_BYTES,
                 s->gz ? "" : "; the file holds ");
        if (!s->gz) snprintf(err + strlen(err), errlen - strlen(err), "%lld", (long long)present);
        return -1;
    }
    if (!s->gz && (int64_t)total > present) {
        snprintf(err, errlen, "%s: truncated: the header promises %llu bytes of data, the file holds %lld", path,
                 (unsigned long long)total, (long long)present);
        return -1;
    }
    if (!s->gz && (int64_t)total < present) {
        snprintf(err, errlen, "%s: unexpected bytes after the %llu bytes of data the header promises (%lld more)",
                 path, (unsigned long long)total, (long long)(present - (int64_t)total));
        return -1;
    }
    if (s->gz && total > (uint64_t)GZIP_MAX_RATIO * (uint64_t)s->size) {
        snprintf(err, errlen, "%s: truncated: the header promises %llu bytes of data, but a gzip file of %lld bytes "
                 "inflates to at most %llu", path, (unsigned long long)total, (long long)s->size,
                 (unsigned long long)GZIP_MAX_RATIO * (uint64_t)s->size);
        return -1;
    }
    if (dims[0] > DATA_MAX_ITEMS) {
        snprintf(err, errlen, "%s: %u items, more than the %lld this reader accepts", path, dims[0],
                 (long long)DATA_MAX_ITEMS);
        return -1;
    }
    // the data: a raw file's is all there (checked above); a gzip file's grows as it inflates
    int64_t cap = s->gz && (int64_t)total > IDX_GZ_FIRST_BUFFER ? IDX_GZ_FIRST_BUFFER : (int64_t)total;
    int64_t have = 0;
    *data = (uint8_t *)malloc((size_t)cap);
    if (!*data) {
        snprintf(err, errlen, "%s: out of host memory for %lld bytes", path, (long long)cap);
        return -1;
    }
    for (;;) {
        got = idx_stream_read(s, *data + have, cap - have, err, errlen);
        if (got < 0) return -1;
        have += got;
        if (have < cap || cap == (int64_t)total) break;  // the data ended, or all of it is here
        int64_t grown = 2 * cap > (int64_t)total ? (int64_t)total : 2 * cap;
        uint8_t *bigger = (uint8_t *)realloc(*data, (size_t)grown);
        if (!bigger) {
            snprintf(err, errlen, "%s: out of host memory for %lld bytes", path, (long long)grown);
            return -1;
        }
        *data = bigger;
        cap = grown;
    }
    if (have < (int64_t)total) {
        snprintf(err, errlen, "%s: truncated: the header promises %llu bytes of data, the file holds %lld%s", path,
                 (unsigned long long)total, (long long)have,
                 s->gz ? "" : " (did the file change while being read?)");
        return -1;
    }
    uint8_t extra;
    got = idx_stream_read(s, &extra, 1, err, errlen);
    if (got < 0) return -1;
    if (got > 0) {
        snprintf(err, errlen, "%s: unexpected bytes after the %llu bytes of data the header promises", path,
                 (unsigned long long)total);
        return -1;
    }
    return 0;
}

// idx_read on a file already open: f holds size bytes (the fuzz targets pass a file in memory).
static inline int idx_read_file(FILE *f, int64_t size, const char *path, int ndims, uint8_t **data, uint32_t *dims,
                                char *err, size_t errlen) {
    *data = NULL;
    IdxStream *s = (IdxStream *)calloc(1, sizeof(IdxStream));
    if (!s) {
        snprintf(err, errlen, "%s: out of host memory", path);
        return -1;
    }
    s->f = f;
    s->path = path;
    s->size = size;
    // gzip or raw: the first two bytes say (an IDX file starts with 00 00)
    int c0 = fgetc(f), c1 = c0 == EOF ? EOF : fgetc(f);
    s->gz = c0 == 0x1f && c1 == 0x8b;
    rewind(f);
    int rc = -1;
    if (s->gz) {
        if (inflateInit2(&s->z, 16 + MAX_WBITS) != Z_OK) {  // 16 +: a gzip wrapper, its CRC-32 checked
            snprintf(err, errlen, "%s: cannot start zlib's inflate", path);
            goto done;
        }
        s->z_ready = 1;
    }
    rc = idx_read_stream(s, ndims, data, dims, err, errlen);
done:
    if (s->z_ready) inflateEnd(&s->z);
    free(s);
    if (rc != 0) {
        free(*data);
        *data = NULL;
    }
    return rc;
}

// Reads one IDX file of unsigned bytes with ndims dimensions (3: images, 1: labels).
// On success *data is malloc'ed and dims[0..ndims-1] are set.
static inline int idx_read(const char *path, int ndims, uint8_t **data, uint32_t *dims, char *err, size_t errlen) {
    *data = NULL;
    int64_t size;
    FILE *f = data_open_file(path, &size, err, errlen);
    if (!f) return -1;
    int rc = idx_read_file(f, size, path, ndims, data, dims, err, errlen);
    fclose(f);
    return rc;
}

// dir/name if it exists, else dir/name.gz; 0 if either exists
static inline int idx_find(const char *dir, const char *name, char *out, size_t n) {
    snprintf(out, n, "%s/%s", dir, name);
    if (file_exists(out)) return 0;
    snprintf(out, n, "%s/%s.gz", dir, name);
    return file_exists(out) ? 0 : -1;
}

// ----------------------------------------------------------------------------
// a split of MNIST-format IDX files, as a Dataset

// Which IDX dataset is this? MNIST and Fashion-MNIST share a format but not a label histogram:
// Fashion-MNIST's training set has exactly 6000 of each class, MNIST's has these counts.
static inline void idx_name_dataset(Dataset *train) {
    static const int mnist_train[10] = {5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949};
    static const char *const fashion[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    int count[MAX_CLASSES] = {0};
    for (int i = 0; i < train->n; i++) count[train->labels[i]]++;
    int is_mnist = train->n == 60000 && train->num_classes == 10, is_fashion = is_mnist;
    for (int c = 0; c < 10; c++) {
        is_mnist &= count[c] == mnist_train[c];
        is_fashion &= count[c] == 6000;
    }
    snprintf(train->name, sizeof(train->name), "%s",
             is_mnist ? "MNIST" : is_fashion ? "Fashion-MNIST" : "an IDX dataset (not MNIST or Fashion-MNIST)");
    if (is_fashion) dataset_set_class_names(train, fashion, 10);
}

// idx_find, and when neither dir/name nor dir/name.gz is a file, one line in err: which is there
// but is not a file (a directory, a FIFO), or that neither is there
static inline int idx_find_or_explain(const char *dir, const char *name, char *out, size_t n, char *err,
                                      size_t errlen) {
    if (idx_find(dir, name, out, n) == 0) return 0;
    struct stat st;
    for (int gz = 0; gz < 2; gz++) {
        snprintf(out, n, "%s/%s%s", dir, name, gz ? ".gz" : "");
        if (stat(out, &st) == 0) {
            snprintf(err, errlen, "%s: is %s, not a file", out, file_type_name(st.st_mode));
            return -1;
        }
    }
    snprintf(err, errlen, "%s: no %s or %s.gz in this directory", dir, name, name);
    return -1;
}

// Loads split "train" or "test" ("t10k" in the file names) from dir. The classes are 0 .. the
// largest label (named by their numbers; Fashion-MNIST's by their names).
static inline int idx_load(const char *dir, const char *split, Dataset *ds, char *err, size_t errlen) {
    const char *prefix = strcmp(split, "test") == 0 ? "t10k" : split;
    char name[64];
    snprintf(name, sizeof(name), "%s-images-idx3-ubyte", prefix);
    if (idx_find_or_explain(dir, name, ds->images_path, sizeof(ds->images_path), err, errlen) != 0) return -1;
    snprintf(name, sizeof(name), "%s-labels-idx1-ubyte", prefix);
    if (idx_find_or_explain(dir, name, ds->labels_path, sizeof(ds->labels_path), err, errlen) != 0) return -1;
    uint32_t idims[3], ldims[1];
    if (idx_read(ds->images_path, 3, &ds->images, idims, err, errlen) != 0) return -1;
    if (idx_read(ds->labels_path, 1, &ds->labels, ldims, err, errlen) != 0) return -1;
    if (idims[0] != ldims[0]) {
        snprintf(err, errlen, "%s: holds %u labels but %s holds %u images", ds->labels_path, ldims[0],
                 ds->images_path, idims[0]);
        return -1;
    }
    // (idx_read has held the counts and sizes to data/input.h's limits: they fit an int)
    ds->kind = DATA_IDX;
    ds->n = (int)idims[0];
    ds->rows = (int)idims[1];
    ds->cols = (int)idims[2];
    ds->channels = 1;
    ds->planar = 1;
    int top = 0;
    for (int i = 0; i < ds->n; i++) top = ds->labels[i] > top ? ds->labels[i] : top;
    ds->num_classes = top + 1;
    for (int c = 0; c < ds->num_classes; c++) snprintf(ds->class_names[c], CLASS_NAME_LEN, "%d", c);
    snprintf(ds->name, sizeof(ds->name), "an IDX dataset");
    return 0;
}

#endif // MLP_IDX_H
