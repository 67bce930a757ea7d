/*
tests/fuzz/fuzz.h: the entry points of the fuzz targets, one per reader of outside data.

    fuzz_idx_raw      an IDX file as it is: idx_read_file as images (3 dims) and as labels (1 dim)
    fuzz_idx_gz       the same through gzip: the first byte picks how the rest becomes the file
    fuzz_cifar        a CIFAR-10 batch (and its class list) in a directory: cifar_load
    fuzz_image        a picture file: image_prepare (stb_image, then our preparation) for a model
    fuzz_folder       pictures in an image folder: folder_load of train/ and test/
    fuzz_checkpoint   a checkpoint's bytes: checkpoint_parse, the CRC-32 optionally made right
    fuzz_args         a command line: config_parse, argv split on spaces and NULs
    fuzz_safetensors  a safetensors file: safetensors_parse (and its JSON parser), then
                      safetensors_copy; the first byte can make the header's length right
    fuzz_json         JSON text: json_parse, then every string decoded and every number read
    fuzz_plan_cache   the fast trainer's plan cache: plan_cache_parse, the CRC-32 and the key
                      optionally made right; what it accepts is written back byte for byte

Each takes the fuzzer's bytes and returns 0 (accepted) or -1 (refused, with a one-line message in
msg); anything else, a crash or a sanitizer report, is a bug. What is accepted is checked too
(fuzz_require): a reader that accepts a file must describe it consistently.

tests/fuzz/fuzz.c wraps one of them as libFuzzer's LLVMFuzzerTestOneInput (make fuzz), and
tests/test_fuzz_regressions.c runs every saved input through the same functions, compiled
normally, in make test.

The limits are lowered here (IMAGE_MAX_SIDE, FOLDER_MAX_SIDE: 1024 pixels a side) so that a fuzz
run spends its time on many inputs rather than on decoding a few huge pictures; the checks
themselves are the same code.
*/
#ifndef MLP_FUZZ_H
#define MLP_FUZZ_H

#define IMAGE_MAX_SIDE 1024
#define FOLDER_MAX_SIDE 1024

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../../run/args.h"
#include "../../run/checkpoint.h"
#include "../../run/safetensors.h"
#include "../../common/plan_cache.h"
#include "../../data/dataset.h"

// An accepted input that breaks what the reader promises: abort, which the fuzzer reports
#define fuzz_require(cond)                                                                              \
    do {                                                                                                \
        if (!(cond)) {                                                                                  \
            fprintf(stderr, "fuzz_require failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);            \
            abort();                                                                                    \
        }                                                                                               \
    } while (0)

// a refusal must say why
static inline int fuzz_refused(int rc, const char *msg) {
    fuzz_require(rc == 0 || (rc == -1 && msg[0] != '\0'));
    return rc;
}

// ----------------------------------------------------------------------------
// a scratch directory for the targets that read files: in /dev/shm when there is one (memory,
// fast), removed at exit

static char fuzz_dir[256];

// removes path and, when it is a directory, everything in it (links are not followed)
static inline void fuzz_rmtree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        char sub[1024];
        while (d && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
            fuzz_rmtree(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

// empties the scratch directory (top: removes it too)
static inline void fuzz_clean(int top) {
    if (!fuzz_dir[0]) return;
    fuzz_rmtree(fuzz_dir);
    if (!top) mkdir(fuzz_dir, 0700);
}

static void fuzz_clean_at_exit(void) { fuzz_clean(1); }

static inline const char *fuzz_scratch(void) {
    if (!fuzz_dir[0]) {
        struct stat st;
        const char *base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0
                               ? "/dev/shm"
                               : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(fuzz_dir, sizeof(fuzz_dir), "%s/mlp_fuzz_XXXXXX", base);
        if (!mkdtemp(fuzz_dir)) {
            perror("mkdtemp");
            abort();
        }
        atexit(fuzz_clean_at_exit);
    }
    return fuzz_dir;
}

// writes n bytes to the scratch directory's rel (its directories created)
static inline void fuzz_write(const char *rel, const uint8_t *data, size_t n) {
    char path[600];
    snprintf(path, sizeof(path), "%s/%s", fuzz_scratch(), rel);
    for (char *p = path + strlen(fuzz_dir) + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0700);
            *p = '/';
        }
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

// ----------------------------------------------------------------------------
// IDX

// idx_read_file on bytes in memory, as images and as labels; what is accepted must be exactly
// the header plus the product of its dimensions, within the limits
static inline int fuzz_idx_bytes(const uint8_t *data, size_t size, size_t raw_size, char *msg, size_t msglen) {
    int result = -1;
    char err[2][1400];
    for (int k = 0; k < 2; k++) {
        int ndims = k ? 3 : 1;
        static uint8_t none[1];
        FILE *f = fmemopen(size ? (void *)data : (void *)none, size, "rb");  // (glibc 2.22 on: size 0 is fine)
        if (!f) abort();
        uint8_t *items = NULL;
        uint32_t dims[3] = {0, 0, 0};
        err[k][0] = '\0';
        int rc = idx_read_file(f, (int64_t)size, "fuzz.idx", ndims, &items, dims, err[k], sizeof(err[k]));
        fclose(f);
        fuzz_refused(rc, err[k]);
        if (rc == 0) {
            uint64_t total = 1;
            for (int d = 0; d < ndims; d++) total *= dims[d];
            fuzz_require(items != NULL && total >= 1 && total <= (uint64_t)DATA_MAX_BYTES &&
                         dims[0] <= DATA_MAX_ITEMS);
            fuzz_require(raw_size == 0 || total + 4 + 4 * (uint64_t)ndims == raw_size);
            volatile uint8_t sum = 0;  // every byte is there to read (ASan would see one past the end)
            for (uint64_t i = 0; i < total; i++) sum += items[i];
            (void)sum;
            result = 0;
        } else {
            fuzz_require(items == NULL);
        }
        free(items);
    }
    // the message: "accepted", or the refusal of the reading that got past the magic number
    if (result == 0) snprintf(msg, msglen, "accepted");
    else snprintf(msg, msglen, "%s", strstr(err[0], "wrong magic number") ? err[1] : err[0]);
    return result;
}

static inline int fuzz_idx_raw(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    int gz = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    return fuzz_idx_bytes(data, size, gz ? 0 : size, msg, msglen);
}

// gzip-compresses in as one member, appended to out (a buffer of cap bytes) at *len
static inline void fuzz_gzip(const uint8_t *in, size_t n, int level, uint8_t *out, size_t cap, size_t *len) {
    z_stream z;
    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) abort();
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)n;
    z.next_out = out + *len;
    z.avail_out = (uInt)(cap - *len);
    if (deflate(&z, Z_FINISH) != Z_STREAM_END) abort();
    *len = cap - z.avail_out;
    deflateEnd(&z);
}

// The first byte picks how the rest becomes the file (the low 2 bits), and the level (bits 2-5):
//   0  the rest is the file as it is (a .gz with whatever mutations, trailing bytes, members)
//   1  the rest, gzip-compressed: one member (so mutations reach the IDX checks through gzip)
//   2  the rest split at the second byte's share of it, compressed as two members
//   3  the rest compressed, followed by its last (second byte % 8) bytes as they are: junk after
//      the stream
static inline int fuzz_idx_gz(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    if (size < 2) return fuzz_idx_bytes(data, size, 0, msg, msglen);
    int mode = data[0] & 3, level = (data[0] >> 2) & 15;
    if (level > 9) level = -1;
    if (mode == 0) return fuzz_idx_bytes(data + 1, size - 1, 0, msg, msglen);
    const uint8_t *rest = data + 2;
    size_t n = size - 2, cap = 2 * n + 256, len = 0;
    uint8_t *file = (uint8_t *)malloc(cap + 8);
    if (!file) abort();
    if (mode == 1) {
        fuzz_gzip(rest, n, level, file, cap, &len);
    } else if (mode == 2) {
        size_t cut = n * data[1] / 255;
        fuzz_gzip(rest, cut, level, file, cap, &len);
        fuzz_gzip(rest + cut, n - cut, level, file, cap, &len);
    } else {
        size_t junk = data[1] % 8 < n ? data[1] % 8 : n;
        fuzz_gzip(rest, n - junk, level, file, cap, &len);
        memcpy(file + len, rest + n - junk, junk);
        len += junk;
    }
    int rc = fuzz_idx_bytes(file, len, 0, msg, msglen);
    // compressed whole, the data is exactly the rest: an accepted file must be its size
    if (rc == 0 && mode != 3) {
        uint8_t *items;
        uint32_t dims[3];
        char err[1400];
        FILE *f = fmemopen(file, len, "rb");
        int ndims = n >= 4 && rest[3] == 3 ? 3 : 1;
        if (idx_read_file(f, (int64_t)len, "fuzz.idx.gz", ndims, &items, dims, err, sizeof(err)) == 0) {
            uint64_t total = ndims == 3 ? (uint64_t)dims[0] * dims[1] * dims[2] : dims[0];
            fuzz_require(total + 4 + 4 * (uint64_t)ndims == n && memcmp(items, rest + 4 + 4 * ndims, total) == 0);
            free(items);
        }
        fclose(f);
    }
    if (rc == 0 && mode == 3) fuzz_require(data[1] % 8 == 0 || n == 0);  // junk is never accepted
    free(file);
    return rc;
}

// ----------------------------------------------------------------------------
// CIFAR-10

// The first byte: bit 0, write a class list (batches.meta.txt); bit 1, read the training split (the
// batch written as all five data_batch files) instead of the test split. Then, with a class list,
// 2 bytes (little-endian) give its length, and it follows; the rest is the batch.
static inline int fuzz_cifar(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    fuzz_clean(0);
    int meta = size > 0 && (data[0] & 1), train = size > 0 && (data[0] & 2);
    size_t at = size > 0 ? 1 : 0;
    if (meta) {
        size_t mlen = size >= 3 ? (size_t)(data[1] | data[2] << 8) : 0;
        at = size >= 3 ? 3 : size;
        if (mlen > size - at) mlen = size - at;
        fuzz_write("c/batches.meta.txt", data + at, mlen);
        at += mlen;
    }
    char name[64];
    for (int b = 0; b < (train ? 5 : 1); b++) {
        if (train) snprintf(name, sizeof(name), "c/data_batch_%d.bin", b + 1);
        else snprintf(name, sizeof(name), "c/test_batch.bin");
        fuzz_write(name, data + at, size - at);
    }
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/c", fuzz_scratch());
    Dataset ds;
    memset(&ds, 0, sizeof(ds));
    int rc = cifar_load(dir, train ? "train" : "test", &ds, msg, msglen);
    fuzz_refused(rc, msg);
    if (rc == 0) {
        size_t records = (size - at) / CIFAR_RECORD;
        fuzz_require(ds.n == (int)(records * (train ? 5 : 1)) && ds.channels == 3 && ds.rows == 32 &&
                     ds.cols == 32 && ds.num_classes == 10);
        for (int i = 0; i < ds.n; i++) fuzz_require(ds.labels[i] < 10);
        for (int c = 0; c < 10; c++) fuzz_require(memchr(ds.class_names[c], 0, CLASS_NAME_LEN) != NULL);
        snprintf(msg, msglen, "accepted");
    }
    dataset_free(&ds);
    return rc;
}

// ----------------------------------------------------------------------------
// pictures

// The model a picture is prepared for, from the first byte (and the second: a size):
// 0 MNIST's digits, 1 Fashion-MNIST (gray 28x28), 2 CIFAR-10 (RGB planes), 3 an image folder's
// (RGB interleaved), 4 gray, of sizes 1 .. 40 a side (digits: up to 89, the largest allowed)
static inline ImageSpec fuzz_spec(uint8_t pick, uint8_t side) {
    ImageSpec s;
    memset(&s, 0, sizeof(s));
    int n = 1 + side % 40;
    switch (pick % 5) {
    case 0: s = (ImageSpec){DATA_IDX, 1, 1, 28, 28, 1}; break;
    case 1: s = (ImageSpec){DATA_IDX, 0, 1, 28, 28, 1}; break;
    case 2: s = (ImageSpec){DATA_CIFAR10, 0, 3, 32, 32, 1}; break;
    case 3: s = (ImageSpec){DATA_FOLDER, 0, 3, n, 1 + side % 37, 0}; break;
    default: s = (ImageSpec){DATA_FOLDER, (pick / 5) & 1, 1, 1 + side % 89, 1 + (side * 7) % 89, 1}; break;
    }
    return s;
}

// The first two bytes pick the model (fuzz_spec); the rest is the picture file.
static inline int fuzz_image(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    fuzz_clean(0);
    ImageSpec spec = fuzz_spec(size > 0 ? data[0] : 0, size > 1 ? data[1] : 0);
    size_t at = size < 2 ? size : 2;
    fuzz_write("picture", data + at, size - at);
    char path[400];
    snprintf(path, sizeof(path), "%s/picture", fuzz_scratch());
    size_t D = (size_t)spec.channels * spec.rows * spec.cols;
    float *x = (float *)malloc(sizeof(float) * D);
    if (!x) abort();
    int rc = image_prepare(path, &spec, x, msg, msglen);
    fuzz_refused(rc, msg);
    if (rc == 0) {
        for (size_t i = 0; i < D; i++) fuzz_require(x[i] >= 0.0f && x[i] <= 1.0f);
        snprintf(msg, msglen, "accepted");
    }
    free(x);
    return rc;
}

// Pictures in an image folder. The first byte: bits 0-1, the number of classes (1 to 4); bit 2,
// load the test split too. The rest is split at every "--FILE--" into pictures: picture i goes to
// train/c(i % classes)/i.png (or .jpg, .bmp, by i % 3: the reader looks at the extension only to
// pick files), and with bit 2 the last one to test/c0/t.png.
static inline int fuzz_folder(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    static const char *const ext[3] = {"png", "jpg", "bmp"};
    static const char sep[] = "--FILE--";
    fuzz_clean(0);
    int classes = size > 0 ? 1 + (data[0] & 3) : 1, test = size > 0 && (data[0] & 4);
    const uint8_t *p = size > 0 ? data + 1 : data, *end = data + size;
    int count = 0;
    char rel[128];
    while (p <= end && count < 64) {
        const uint8_t *next = NULL;
        for (const uint8_t *q = p; !next && q + sizeof(sep) - 1 <= end; q++)
            if (memcmp(q, sep, sizeof(sep) - 1) == 0) next = q;
        const uint8_t *stop = next ? next : end;
        if (test && !next) snprintf(rel, sizeof(rel), "f/test/c0/t.png");
        else snprintf(rel, sizeof(rel), "f/train/c%d/%d.%s", count % classes, count, ext[count % 3]);
        fuzz_write(rel, p, (size_t)(stop - p));
        count++;
        if (!next) break;
        p = next + sizeof(sep) - 1;
    }
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/f", fuzz_scratch());
    int rc = -1;
    Dataset train, tst;
    memset(&train, 0, sizeof(train));
    memset(&tst, 0, sizeof(tst));
    rc = folder_load(dir, "train", &train, msg, msglen);
    fuzz_refused(rc, msg);
    if (rc == 0) {
        fuzz_require(train.n >= 1 && train.n <= count && train.num_classes >= 1 && train.num_classes <= classes);
        fuzz_require(train.channels == 1 || train.channels == 3);
        fuzz_require(train.rows >= 1 && train.rows <= FOLDER_MAX_SIDE && train.cols >= 1 &&
                     train.cols <= FOLDER_MAX_SIDE);
        volatile uint8_t sum = 0;  // every byte is there to read
        for (size_t i = 0; i < (size_t)train.n * dataset_dim(&train); i++) sum += train.images[i];
        (void)sum;
        for (int i = 0; i < train.n; i++) fuzz_require(train.labels[i] < train.num_classes);
        if (test) {
            rc = folder_load(dir, "test", &tst, msg, msglen);
            fuzz_refused(rc, msg);
            if (rc == 0) fuzz_require(tst.n == 1 && tst.rows == train.rows && tst.cols == train.cols);
        }
        if (rc == 0) snprintf(msg, msglen, "accepted");
    }
    dataset_free(&train);
    dataset_free(&tst);
    return rc;
}

// ----------------------------------------------------------------------------
// checkpoints

// The first byte's bits say what to make right before parsing, so that mutations get past the
// checks that guard the rest: bit 0, the CRC-32 (recomputed over the bytes before the last 4);
// bit 1, the parameter count and file size fields, from the layer sizes, and the length of the
// input, cut or padded with zeros to that size (before the CRC). The rest is the file.
static inline int fuzz_checkpoint(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    int fix_crc = size > 0 && (data[0] & 1), fix_size = size > 0 && (data[0] & 2);
    size_t len = size > 0 ? size - 1 : 0;
    const uint8_t *in = size > 0 ? data + 1 : data;
    size_t cap = len;  // the bytes parsed
    uint64_t P = 0;
    int sane = 0;      // fix_size, and the layer sizes are those of a small model
    uint32_t header_bytes = len >= 12 ? ck_header_bytes(ck_get_u32(in + CK_OFF_VERSION)) : 0;
    if (fix_size && header_bytes && len >= header_bytes) {
        uint32_t L = ck_get_u32(in + CK_OFF_L);
        int sizes[MAX_LAYERS + 1] = {0};
        sane = L >= 1 && L <= MAX_LAYERS;
        for (uint32_t l = 0; sane && l <= L; l++) {
            uint32_t s = ck_get_u32(in + CK_OFF_SIZES + 4 * l);
            sane = s >= 1 && s <= 64;  // small models only: the file stays small
            sizes[l] = (int)s;
        }
        if (sane) {
            size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
            P = param_layout(sizes, (int)L, w_off, b_off);
            cap = header_bytes + 8 * P + 4;
        }
    }
    uint8_t *buf = (uint8_t *)calloc(cap ? cap : 1, 1);
    if (!buf) abort();
    memcpy(buf, in, len < cap ? len : cap);
    if (sane) {
        ck_put_u64(buf + CK_OFF_NUM_PARAMS, P);
        ck_put_u64(buf + CK_OFF_FILE_BYTES, cap);
    }
    len = cap;
    if (fix_crc && len >= 4)
        ck_put_u32(buf + len - 4, ck_crc32((uint32_t)crc32(0L, Z_NULL, 0), buf, len - 4));
    CheckpointMeta meta;
    size_t off = 0;
    int rc = checkpoint_parse(buf, len, &meta, &off, msg, msglen);
    fuzz_refused(rc, msg);
    if (rc == 0) {
        fuzz_require(off == ck_header_bytes((uint32_t)meta.version) && off + 8 * meta.num_params + 4 == len);
        fuzz_require(meta.L >= 1 && meta.L <= MAX_LAYERS && meta.num_classes == meta.sizes[meta.L]);
        fuzz_require((int64_t)meta.channels * meta.rows * meta.cols == meta.sizes[0]);
        fuzz_require(meta.train_n >= 1 && meta.batch >= 1 && meta.epochs_done <= meta.epochs);
        for (int k = 0; k < meta.num_classes; k++) fuzz_require(memchr(meta.class_names[k], 0, CLASS_NAME_LEN));
        // what a resume does with it next: its settings into a command line's Config
        Checkpoint ck;
        memset(&ck, 0, sizeof(ck));
        ck.meta = meta;
        Config c;
        config_defaults(&c, PROG_CPU);
        checkpoint_adopt_settings(&ck, &c, "");
        fuzz_require(c.L == meta.L && c.sizes[c.L] == meta.num_classes);
        snprintf(msg, msglen, "accepted");
    }
    free(buf);
    return rc;
}

// ----------------------------------------------------------------------------
// the command line

// The first byte picks the trainer (CPU, GPU, fast); the rest is split into arguments at spaces
// (runs of spaces count as one) and at NULs (each one ends an argument, so "" can be one).
static inline int fuzz_args(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    static const int progs[3] = {PROG_CPU, PROG_GPU, PROG_FAST};
    int prog = progs[size > 0 ? data[0] % 3 : 0];
    size_t n = size > 0 ? size - 1 : 0;
    char *text = (char *)malloc(n + 1), *argv[260];
    if (!text) abort();
    memcpy(text, size > 0 ? data + 1 : data, n);
    text[n] = '\0';
    int argc = 0;
    argv[argc++] = (char *)program_name(prog);
    for (size_t i = 0; i <= n && argc < 259;) {
        size_t j = i;
        while (j < n && text[j] != ' ' && text[j] != '\0') j++;
        int ended_by_nul = j < n && text[j] == '\0';
        if (j > i || ended_by_nul) argv[argc++] = text + i;
        if (j < n) text[j] = '\0';
        i = j + 1;
    }
    argv[argc] = NULL;
    Config c;
    config_defaults(&c, prog);
    int rc = config_parse(&c, argc, argv, prog, msg, msglen);
    fuzz_require(rc == 0 || rc == 1 || (rc == 2 && msg[0]));
    if (rc == 0) {  // what a trainer does next with it: the settings box, the flags given
        char value[1200], given[130];
        for (int a = 0; a < NUM_ARGS; a++) format_value(&c, &ARGS[a], value, sizeof(value));
        flags_given(argc, argv, given, sizeof(given));
        fuzz_require(c.L >= 1 && c.L <= MAX_LAYERS && c.batch >= 1 && c.num_predict <= MAX_PREDICT);
        for (int l = 0; l <= c.L; l++) fuzz_require(c.sizes[l] >= 1 && c.sizes[l] <= MAX_WIDTH);
        snprintf(msg, msglen, "accepted");
    } else if (rc == 1) {
        snprintf(msg, msglen, "help");
    }
    free(text);
    return rc == 2 ? -1 : 0;
}

// ----------------------------------------------------------------------------
// the table: name (the corpus and regression directories' names) -> entry point

// ----------------------------------------------------------------------------
// safetensors (run/safetensors.h) and its JSON parser

// The first byte: bit 0 set, the 8-byte header length is computed here, so that the rest is the
// header's text up to its last '}' and then the tensors' bytes (mutations then reach the JSON and
// the fields rather than the length); clear, the rest is the file as it is.
static inline int fuzz_safetensors(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    int fix_len = size > 0 && (data[0] & 1);
    const uint8_t *in = size > 0 ? data + 1 : data;
    size_t len = size > 0 ? size - 1 : 0, n = len;
    uint8_t *buf = (uint8_t *)malloc(len + 8);
    if (!buf) abort();
    if (fix_len) {
        size_t h = len;
        while (h > 0 && in[h - 1] != '}') h--;
        ck_put_u64(buf, h);
        memcpy(buf + 8, in, len);
        n = len + 8;
    } else {
        memcpy(buf, in, len);
    }
    SafetensorsInfo info;
    int rc = safetensors_parse(buf, n, &info, msg, msglen);
    if (rc == 0) {  // an accepted file: a model of at most MAX_LAYERS layers, its bytes inside the file
        const CheckpointMeta *m = &info.meta;
        fuzz_require(m->L >= 1 && m->L <= MAX_LAYERS && m->sizes[m->L] <= MAX_CLASSES);
        fuzz_require(info.data_start + m->num_params * 2 <= n);
        float *p = (float *)malloc(2 * m->num_params * sizeof(float));
        if (!p) abort();
        rc = safetensors_copy(buf, &info, p, p + m->num_params, msg, msglen);
        for (size_t i = 0; rc == 0 && i < 2 * m->num_params; i++) fuzz_require(isfinite(p[i]));
        free(p);
    }
    free(buf);
    return fuzz_refused(rc, msg);
}

static inline int fuzz_json(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    int cap = (int)(size / 2 + 2);
    JsonTok *tok = (JsonTok *)malloc(sizeof(JsonTok) * (size_t)cap);
    if (!tok) abort();
    int nt = json_parse((const char *)data, size, tok, cap, msg, msglen);
    for (int i = 0; i < nt; i++) {  // every token inside the text, every subtree's end after its start
        fuzz_require(tok[i].start + tok[i].len <= size && tok[i].next > i && tok[i].next <= nt);
        if (tok[i].type == JSON_STRING) {
            char out[256];
            int k = json_string((const char *)data, &tok[i], out, sizeof(out));
            fuzz_require(k < 0 || (size_t)k == strlen(out));
            if (k >= 0) fuzz_require(utf8_valid_len((const unsigned char *)out, (size_t)k + 1) > 0 || k == 0);
        }
        uint64_t v;
        if (json_uint((const char *)data, &tok[i], &v) == 0) fuzz_require(v < ((uint64_t)1 << 53));
    }
    free(tok);
    return fuzz_refused(nt < 0 ? -1 : 0, msg);
}

// ----------------------------------------------------------------------------
// the fast trainer's plan cache

// the key the fuzzed caches are read with (make_corpus.c writes the seeds with it)
static inline PlanCacheKey fuzz_plan_key(void) {
    PlanCacheKey k;
    plan_cache_key(&k, "NVIDIA H200", 132, 12080, 0x1234ABCDu);
    return k;
}

// The first byte's bits say what to make right before parsing: bit 0, the CRC-32 (recomputed over
// the bytes before the last 4); bit 1, the key (fuzz_plan_key's GPU, SM count, driver and build id)
// and the entry count (what the length gives), so that mutations reach the entries' checks. The rest
// is the file. An accepted file of this key must hold sane entries and be written back byte for byte.
static inline int fuzz_plan_cache(const uint8_t *data, size_t size, char *msg, size_t msglen) {
    int fix_crc = size > 0 && (data[0] & 1), fix_key = size > 0 && (data[0] & 2);
    size_t len = size > 0 ? size - 1 : 0;
    uint8_t *buf = (uint8_t *)malloc(len ? len : 1), *p;
    if (!buf) abort();
    if (len) memcpy(buf, data + 1, len);
    PlanCacheKey key = fuzz_plan_key();
    if (fix_key && len >= PLAN_CACHE_FILE_BYTES(0)) {
        memset(buf + 12, 0, PLAN_CACHE_GPU_NAME);
        memcpy(buf + 12, key.gpu, strlen(key.gpu));
        p = buf + 108;
        pc_put(&p, (uint32_t)key.sms);
        pc_put(&p, (uint32_t)key.driver);
        pc_put(&p, key.build_id);
        pc_put(&p, (uint32_t)((len - PLAN_CACHE_FILE_BYTES(0)) / PLAN_CACHE_ENTRY_BYTES));
    }
    if (fix_crc && len >= 4) {
        p = buf + len - 4;
        pc_put(&p, (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)(len - 4)));
    }
    PlanCache c;
    memset(&c, 0, sizeof(c));
    c.key = key;
    int rc = plan_cache_parse(&c, buf, len, "the input", msg, msglen);
    fuzz_refused(rc, msg);
    if (rc == 0 && c.stale) {
        fuzz_require(c.n == 0);
        snprintf(msg, msglen, "accepted (another key or version: an empty cache)");
    } else if (rc == 0) {
        fuzz_require(len == PLAN_CACHE_FILE_BYTES(c.n));
        for (int i = 0; i < c.n; i++)
            fuzz_require(plan_cache_entry_sane(&c.entries[i]) && plan_cache_find(&c, &c.entries[i].shape) != NULL);
        size_t n = 0;
        uint8_t *again = plan_cache_bytes(&c, &n);
        fuzz_require(n == len && memcmp(again, buf, len) == 0);
        free(again);
        snprintf(msg, msglen, "accepted");
    }
    plan_cache_free(&c);
    free(buf);
    return rc;
}

typedef int (*FuzzEntry)(const uint8_t *data, size_t size, char *msg, size_t msglen);
typedef struct {
    const char *name;
    FuzzEntry fn;
} FuzzTarget;

static const FuzzTarget FUZZ_TARGETS[] = {
    {"idx_raw", fuzz_idx_raw},   {"idx_gz", fuzz_idx_gz},         {"cifar", fuzz_cifar}, {"image", fuzz_image},
    {"folder", fuzz_folder},     {"checkpoint", fuzz_checkpoint}, {"args", fuzz_args},
    {"safetensors", fuzz_safetensors}, {"json", fuzz_json},      {"plan_cache", fuzz_plan_cache},
};
#define NUM_FUZZ_TARGETS ((int)(sizeof(FUZZ_TARGETS) / sizeof(FUZZ_TARGETS[0])))

static inline FuzzEntry fuzz_find(const char *name) {
    for (int i = 0; i < NUM_FUZZ_TARGETS; i++)
        if (strcmp(FUZZ_TARGETS[i].name, name) == 0) return FUZZ_TARGETS[i].fn;
    return NULL;
}

#endif // MLP_FUZZ_H
