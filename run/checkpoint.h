/*
run/checkpoint.h: the checkpoint file: a trained model, what it was trained on, and how far
its training got, in one file that any of the three trainers can write and read.

    -c FILE   write a checkpoint at the end of every epoch, at the end of the run, and on Ctrl-C
    -r FILE   resume the run it holds          -e FILE   evaluate (and -p: predict with) its model

The format (doc/checkpoint.md has the table of every field): a fixed header of CK_HEADER_BYTES,
all little-endian,

    magic "MLPCUCKP", format version, header and file sizes
    the model         L, sizes[0..L], the hidden activation, the number of parameters
    the data          its kind (IDX, CIFAR-10, image folder), channels x rows x cols, planar or
                      interleaved, input = pixel * scale + offset (1/255 and 0), the number of
                      training items, the dataset's name, the class names
    the settings      -b -l -k -w -s -t, and -n of the run that wrote it; from version 2 on, -H and
                      the seed of its split (version 2 adds them after the class names)
    the progress      epochs done, steps done in the epoch in progress (0 at an epoch's end),
                      steps done in all, and the shuffle RNG's state at the START of the epoch
                      in progress (before its permutation was drawn: a resume draws the same
                      permutation again and skips the steps already done)

then the flat FP32 parameters and the SGD momentum buffer (num_params floats each, in the
layout of param_layout in common/mlp.h: W0 b0 W1 b1 ..., W (OUT, IN) row-major like nn.Linear),
then a CRC-32 (zlib's crc32) of every byte before it: the last 4 bytes, in every version. This
program writes version 2 and reads versions 1 and 2.

Writing goes through common/safe_write.h: a temporary file created exclusively in the
destination's directory, fsync'ed, then renamed over the destination, so a crash or a full disk
leaves the last good checkpoint in place, never half of a new one.

Reading trusts nothing. The bytes are parsed by checkpoint_parse() from a memory buffer (what the
fuzz target calls); checkpoint_read() reads the file, whose size (never a header's claim) decides
what is allocated. Each problem gets its own message: not a checkpoint (bad magic), truncated (N
of M bytes), trailing bytes, a CRC-32 mismatch (the file changed after it was written), a
version this program does not read (told only by a file whose CRC-32 is right, so that a damaged
version field is called damage, not a newer mlp.cu), and, for files whose CRC-32 is right but
whose fields are impossible (a writer's bug, or a forged file), the field and why. A parameter or
momentum that is not finite (NaN, infinity) is refused too: such a model predicts nothing, and a
run resumed from it would only diverge; the writer refuses to write one.

Then checkpoint_contradiction() compares a checkpoint with the command line and the data for a
resume, and checkpoint_data_contradiction() with a dataset alone for -e. The resume rules:

    must agree    -m -a -b -l -k -w -s -t -H, and the training set (shape, classes, planar or
                  interleaved, number of items, name): a resume redraws the same permutations
                  and ends bitwise identical to the run never stopped
    taken from the checkpoint when left off: all of the above and -n (checkpoint_adopt_settings),
                  so `-r FILE` alone continues the run as it was started (-H from version 2 on)
    may differ    -n (the total number of epochs: may grow; at least the epochs already done),
                  -d (the data may move, if it is the same data), -v, -o, -c, and the fast
                  trainer's -x and -f (those change the arithmetic, so the result is then no
                  longer bitwise identical to the run never stopped)
*/
#ifndef MLP_CHECKPOINT_H
#define MLP_CHECKPOINT_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "../data/dataset.h"     // Dataset, DataKind, MAX_CLASSES, CLASS_NAME_LEN
#include "args.h"                // Config
#include "../common/mlp.h"         // MAX_LAYERS, MAX_WIDTH, ACT_*, param_layout
#include "../common/rng.h"         // Rng: the shuffle generator's state
#include "../common/safe_write.h"  // temporary file, fsync, rename

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.h writes the parameters as the host's floats: it needs a little-endian host"
#endif

#define CK_MAGIC "MLPCUCKP"        // the first 8 bytes of every checkpoint
#define CK_VERSION 2u              // the format this program writes; it reads 1 and 2
#define CK_HEADER_BYTES 12624u     // version 2's header: the parameters start here (a multiple of 16)
#define CK_HEADER_BYTES_V1 12608u  // version 1's header (the same fields, up to the class names)
#define CK_NAME_LEN 64             // dataset name field
#define CK_WRITER_LEN 32           // "train_mlp_cpu", "train_mlp", "train_mlp_fast"

// Offsets of the header's fields: the table of doc/checkpoint.md
enum {
    CK_OFF_MAGIC = 0,          // u8[8]   "MLPCUCKP"
    CK_OFF_VERSION = 8,        // u32
    CK_OFF_HEADER_BYTES = 12,  // u32     CK_HEADER_BYTES
    CK_OFF_FILE_BYTES = 16,    // u64     the whole file: header + 8 * num_params + 4
    CK_OFF_NUM_PARAMS = 24,    // u64
    CK_OFF_L = 32,             // u32     weight layers
    CK_OFF_ACT = 36,           // u32     ACT_SIGMOID 0, ACT_RELU 1, ACT_TANH 2
    CK_OFF_SIZES = 40,         // u32[17] sizes[0..L], then zeros
    CK_OFF_DATA_KIND = 108,    // u32     DATA_IDX 1, DATA_CIFAR10 2, DATA_FOLDER 3
    CK_OFF_CHANNELS = 112,     // u32
    CK_OFF_ROWS = 116,         // u32
    CK_OFF_COLS = 120,         // u32
    CK_OFF_PLANAR = 124,       // u32     1: one plane per channel, 0: interleaved
    CK_OFF_NUM_CLASSES = 128,  // u32
    CK_OFF_SCALE = 132,        // f32     input = pixel * scale + offset
    CK_OFF_OFFSET = 136,       // f32
    CK_OFF_TRAIN_N = 140,      // u32     items in the training set
    CK_OFF_DATASET = 144,      // char[64]
    CK_OFF_WRITER = 208,       // char[32]
    CK_OFF_BATCH = 240,        // u32     -b
    CK_OFF_LR = 244,           // f32     -l
    CK_OFF_MOMENTUM = 248,     // f32     -k
    CK_OFF_WEIGHT_DECAY = 252, // f32     -w
    CK_OFF_SEED = 256,         // u64     -s
    CK_OFF_MAX_STEPS = 264,    // u32     -t (0: whole epochs)
    CK_OFF_EPOCHS = 268,       // u32     -n of the run that wrote it
    CK_OFF_EPOCHS_DONE = 272,  // u32
    CK_OFF_STEP = 276,         // u32     steps done in epoch epochs_done + 1
    CK_OFF_STEPS_TOTAL = 280,  // u64     steps done in all epochs
    CK_OFF_RNG = 288,          // u64[4]  the shuffle RNG at the start of epoch epochs_done + 1
    CK_OFF_CLASS_NAMES = 320,  // char[256][48]
    CK_OFF_HOLDOUT = 12608,    // f32     -H (version 2 on; 12612..12615 are zero)
    CK_OFF_HOLDOUT_SEED = 12616, // u64   the seed of -H's split (version 2 on)
};

// the header's size in a version this program reads, or 0
static inline uint32_t ck_header_bytes(uint32_t version) {
    return version == 1 ? CK_HEADER_BYTES_V1 : version == 2 ? CK_HEADER_BYTES : 0;
}

// What a checkpoint says besides its two buffers. The trainers fill it with
// checkpoint_meta_init() once and checkpoint_set_progress() before each write.
typedef struct {
    // the model
    int L, sizes[MAX_LAYERS + 1], act;
    uint64_t num_params;
    // the data it was trained on
    int data_kind, channels, rows, cols, planar, num_classes;
    float input_scale, input_offset;  // the model's input = pixel * scale + offset
    int train_n;                      // items in the training set (the permutation's length)
    char dataset_name[CK_NAME_LEN];
    char class_names[MAX_CLASSES][CLASS_NAME_LEN];
    char writer[CK_WRITER_LEN];       // the program that wrote it
    // the training settings
    int batch, max_steps, epochs;
    float lr, momentum, weight_decay;
    uint64_t seed;
    float holdout;          // -H: the share held out as a validation set; -1 when not recorded (version 1)
    uint64_t holdout_seed;  // the seed of that split
    int version;            // the format version it was read in (CK_VERSION when written)
    // the progress
    int epochs_done;       // epochs finished
    int step_in_epoch;     // steps finished in epoch epochs_done + 1 (0 at an epoch's end)
    uint64_t steps_total;  // steps finished in all epochs
    Rng rng;               // the shuffle generator before epoch epochs_done + 1 drew its permutation
} CheckpointMeta;

// A checkpoint read from a file: its meta, and its two buffers (pointers into bytes)
typedef struct {
    CheckpointMeta meta;
    const float *params, *mbuf;  // num_params floats each
    uint8_t *bytes;              // the whole file (owned)
    size_t nbytes;
    char path[1024];             // where it was read from, for messages
} Checkpoint;

// ----------------------------------------------------------------------------
// little-endian fields

static inline void ck_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ck_put_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ck_put_f32(uint8_t *p, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    ck_put_u32(p, v);
}
static inline uint32_t ck_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t ck_get_u64(const uint8_t *p) { return ck_get_u32(p) | ((uint64_t)ck_get_u32(p + 4) << 32); }
static inline float ck_get_f32(const uint8_t *p) {
    uint32_t v = ck_get_u32(p);
    float f;
    memcpy(&f, &v, 4);
    return f;
}
// a string into a fixed field, zero-padded (always terminated)
static inline void ck_put_str(uint8_t *p, size_t field, const char *s) {
    size_t n = strlen(s);
    if (n > field - 1) n = field - 1;
    memset(p, 0, field);
    memcpy(p, s, n);
}
// a fixed field to a string; -1 when the field holds no terminating 0
static inline int ck_get_str(const uint8_t *p, size_t field, char *out) {
    const void *nul = memchr(p, 0, field);
    if (!nul) return -1;
    memcpy(out, p, (size_t)((const uint8_t *)nul - p) + 1);
    return 0;
}

// zlib's crc32 takes 32-bit lengths: feed it in pieces
static inline uint32_t ck_crc32(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = (const uint8_t *)data;
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, p, k);
        p += k;
        n -= k;
    }
    return crc;
}

// steps in an epoch of n items in batches of B, at most max_steps when that is not 0 (as
// epoch_plan in run/train.h), in 64 bits
static inline uint64_t ck_steps_per_epoch(uint64_t n, uint64_t B, uint64_t max_steps) {
    uint64_t steps = (n + B - 1) / B;
    return max_steps && max_steps < steps ? max_steps : steps;
}

// "784,128,10"
static inline void ck_format_sizes(const int *sizes, int L, char *out, size_t n) {
    size_t k = 0;
    out[0] = '\0';
    for (int l = 0; l <= L && k < n; l++) k += (size_t)snprintf(out + k, n - k, l ? ",%d" : "%d", sizes[l]);
}

// ----------------------------------------------------------------------------
// the meta of a run

// The model, data and settings of a run: call once before training. train is the training set
// the permutations run over; writer the program's name.
static inline void checkpoint_meta_init(CheckpointMeta *m, const Config *c, const Dataset *train, const char *writer) {
    memset(m, 0, sizeof(*m));
    m->L = c->L;
    memcpy(m->sizes, c->sizes, sizeof(int) * (size_t)(c->L + 1));
    m->act = c->act;
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    m->num_params = param_layout(c->sizes, c->L, w_off, b_off);
    m->data_kind = (int)train->kind;
    m->channels = train->channels;
    m->rows = train->rows;
    m->cols = train->cols;
    m->planar = train->planar;
    m->num_classes = train->num_classes;
    m->input_scale = 1.0f / 255.0f;
    m->input_offset = 0.0f;
    m->train_n = train->n;
    snprintf(m->dataset_name, sizeof(m->dataset_name), "%s", train->name);
    for (int k = 0; k < train->num_classes && k < MAX_CLASSES; k++)
        snprintf(m->class_names[k], CLASS_NAME_LEN, "%s", train->class_names[k]);
    snprintf(m->writer, sizeof(m->writer), "%s", writer);
    m->batch = c->batch;
    m->lr = c->lr;
    m->momentum = c->momentum;
    m->weight_decay = c->weight_decay;
    m->seed = c->seed;
    m->max_steps = c->max_steps;
    m->epochs = c->epochs;
    m->holdout = c->holdout;
    m->holdout_seed = c->seed;  // split_holdout draws the split from -s
    m->version = CK_VERSION;
}

// Where the run is. At the end of epoch e: (e, 0, steps so far, the shuffle RNG as it is now,
// which is the state the next epoch starts from). Stopped after step s of epoch e:
// (e - 1, s, steps so far, the RNG saved before epoch e drew its permutation).
static inline void checkpoint_set_progress(CheckpointMeta *m, int epochs_done, int step_in_epoch, uint64_t steps_total,
                                           const Rng *epoch_start) {
    m->epochs_done = epochs_done;
    m->step_in_epoch = step_in_epoch;
    m->steps_total = steps_total;
    m->rng = *epoch_start;
}

// ----------------------------------------------------------------------------
// checking a header (the reader's checks, which the writer runs too)

// The model part of a header: L, the activation, sizes, num_params and the two size fields.
// Returns 0 and the file size these imply in *total, or -1 with the reason in err.
static inline int ck_check_layout(const uint8_t *h, uint64_t *total, char *err, size_t errlen) {
    uint32_t L = ck_get_u32(h + CK_OFF_L), act = ck_get_u32(h + CK_OFF_ACT);
    uint32_t header_bytes = ck_get_u32(h + CK_OFF_HEADER_BYTES), version = ck_get_u32(h + CK_OFF_VERSION);
    uint32_t want_header = ck_header_bytes(version);
    if (header_bytes != want_header) {
        snprintf(err, errlen, "header size is %u bytes; version %u's is %u", header_bytes, version, want_header);
        return -1;
    }
    if (L < 1 || L > MAX_LAYERS) {
        snprintf(err, errlen, "impossible model: %u layers (1 to %d)", L, MAX_LAYERS);
        return -1;
    }
    if (act > ACT_TANH) {
        snprintf(err, errlen, "impossible model: activation %u (0 sigmoid, 1 relu, 2 tanh)", act);
        return -1;
    }
    int sizes[MAX_LAYERS + 1];
    for (uint32_t l = 0; l <= MAX_LAYERS; l++) {
        uint32_t s = ck_get_u32(h + CK_OFF_SIZES + 4 * l);
        if (l <= L && (s < 1 || s > MAX_WIDTH)) {
            snprintf(err, errlen, "impossible model: layer size %u is %u (1 to %d)", l, s, MAX_WIDTH);
            return -1;
        }
        if (l > L && s != 0) {
            snprintf(err, errlen, "impossible model: size slot %u holds %u after the %u sizes of %u layers", l, s,
                     L + 1, L);
            return -1;
        }
        sizes[l] = (int)s;
    }
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    uint64_t want = param_layout(sizes, (int)L, w_off, b_off);  // at most 16 x 65536 x 65537: no overflow
    uint64_t num_params = ck_get_u64(h + CK_OFF_NUM_PARAMS);
    if (num_params != want) {
        char s[256];
        ck_format_sizes(sizes, (int)L, s, sizeof(s));
        snprintf(err, errlen, "impossible model: %llu parameters, but layer sizes %s have %llu",
                 (unsigned long long)num_params, s, (unsigned long long)want);
        return -1;
    }
    *total = want_header + 8 * want + 4;
    uint64_t file_bytes = ck_get_u64(h + CK_OFF_FILE_BYTES);
    if (file_bytes != *total) {
        snprintf(err, errlen, "the header gives the file size as %llu bytes, but a model of %llu parameters makes %llu",
                 (unsigned long long)file_bytes, (unsigned long long)want, (unsigned long long)*total);
        return -1;
    }
    return 0;
}

// The rest of a header whose CRC-32 is right: every field in range and consistent. 0 or -1.
static inline int ck_decode_fields(const uint8_t *h, CheckpointMeta *m, char *err, size_t errlen) {
    memset(m, 0, sizeof(*m));
    m->L = (int)ck_get_u32(h + CK_OFF_L);
    m->act = (int)ck_get_u32(h + CK_OFF_ACT);
    for (int l = 0; l <= m->L; l++) m->sizes[l] = (int)ck_get_u32(h + CK_OFF_SIZES + 4 * l);
    m->num_params = ck_get_u64(h + CK_OFF_NUM_PARAMS);
    uint32_t kind = ck_get_u32(h + CK_OFF_DATA_KIND), ch = ck_get_u32(h + CK_OFF_CHANNELS);
    uint32_t rows = ck_get_u32(h + CK_OFF_ROWS), cols = ck_get_u32(h + CK_OFF_COLS);
    uint32_t planar = ck_get_u32(h + CK_OFF_PLANAR), classes = ck_get_u32(h + CK_OFF_NUM_CLASSES);
    uint32_t train_n = ck_get_u32(h + CK_OFF_TRAIN_N), batch = ck_get_u32(h + CK_OFF_BATCH);
    uint32_t max_steps = ck_get_u32(h + CK_OFF_MAX_STEPS), epochs = ck_get_u32(h + CK_OFF_EPOCHS);
    uint32_t done = ck_get_u32(h + CK_OFF_EPOCHS_DONE), step = ck_get_u32(h + CK_OFF_STEP);
    if (kind < DATA_IDX || kind > DATA_FOLDER) {
        snprintf(err, errlen, "impossible data kind %u (1 IDX, 2 CIFAR-10, 3 image folder)", kind);
        return -1;
    }
    if (ch < 1 || ch > 4 || rows < 1 || cols < 1 || (uint64_t)ch * rows * cols != (uint64_t)m->sizes[0]) {
        snprintf(err, errlen, "impossible data shape: %u channels x %u x %u pixels for a model of %d inputs", ch, rows,
                 cols, m->sizes[0]);
        return -1;
    }
    if (planar > 1) {
        snprintf(err, errlen, "impossible planar flag %u (0 or 1)", planar);
        return -1;
    }
    if (classes < 1 || classes > MAX_CLASSES || classes != (uint32_t)m->sizes[m->L]) {
        snprintf(err, errlen, "impossible class count %u for a model of %d outputs (at most %d classes)", classes,
                 m->sizes[m->L], MAX_CLASSES);
        return -1;
    }
    m->input_scale = ck_get_f32(h + CK_OFF_SCALE);
    m->input_offset = ck_get_f32(h + CK_OFF_OFFSET);
    if (!isfinite(m->input_scale) || !(m->input_scale > 0) || !isfinite(m->input_offset)) {
        snprintf(err, errlen, "impossible input normalization: scale %g, offset %g", m->input_scale, m->input_offset);
        return -1;
    }
    if (ck_get_str(h + CK_OFF_DATASET, CK_NAME_LEN, m->dataset_name) != 0 ||
        ck_get_str(h + CK_OFF_WRITER, CK_WRITER_LEN, m->writer) != 0) {
        snprintf(err, errlen, "the dataset or writer name is not terminated");
        return -1;
    }
    for (uint32_t k = 0; k < classes; k++) {
        if (ck_get_str(h + CK_OFF_CLASS_NAMES + (size_t)k * CLASS_NAME_LEN, CLASS_NAME_LEN, m->class_names[k]) != 0) {
            snprintf(err, errlen, "the name of class %u is not terminated", k);
            return -1;
        }
        for (const unsigned char *q = (const unsigned char *)m->class_names[k]; *q; q++)
            if (*q < 32 || *q == 127) {  // (no reader accepts one: it would break the printed tables)
                snprintf(err, errlen, "the name of class %u holds the control byte 0x%02x", k, *q);
                return -1;
            }
    }
    m->lr = ck_get_f32(h + CK_OFF_LR);
    m->momentum = ck_get_f32(h + CK_OFF_MOMENTUM);
    m->weight_decay = ck_get_f32(h + CK_OFF_WEIGHT_DECAY);
    if (batch < 1 || batch > 32768 || !isfinite(m->lr) || !(m->lr > 0) || !(m->momentum >= 0 && m->momentum < 1) ||
        !(m->weight_decay >= 0 && m->weight_decay < 1)) {
        snprintf(err, errlen, "impossible training settings: -b %u -l %g -k %g -w %g", batch, m->lr, m->momentum,
                 m->weight_decay);
        return -1;
    }
    if (train_n < 1 || train_n > 0x7fffffffu || epochs < 1 || epochs > 1000000 || max_steps > 1000000000u ||
        done > epochs) {
        snprintf(err, errlen, "impossible progress: %u training items, %u of %u epochs done, -t %u", train_n, done,
                 epochs, max_steps);
        return -1;
    }
    uint64_t steps = ck_steps_per_epoch(train_n, batch, max_steps);
    if (step >= steps || (done == epochs && step != 0)) {
        snprintf(err, errlen, "impossible progress: step %u of an epoch of %llu steps (epoch %u of %u)", step,
                 (unsigned long long)steps, done + 1, epochs);
        return -1;
    }
    m->data_kind = (int)kind;
    m->channels = (int)ch;
    m->rows = (int)rows;
    m->cols = (int)cols;
    m->planar = (int)planar;
    m->num_classes = (int)classes;
    m->train_n = (int)train_n;
    m->batch = (int)batch;
    m->seed = ck_get_u64(h + CK_OFF_SEED);
    m->max_steps = (int)max_steps;
    m->epochs = (int)epochs;
    m->epochs_done = (int)done;
    m->step_in_epoch = (int)step;
    m->steps_total = ck_get_u64(h + CK_OFF_STEPS_TOTAL);
    for (int i = 0; i < 4; i++) m->rng.s[i] = ck_get_u64(h + CK_OFF_RNG + 8 * i);
    if (!(m->rng.s[0] | m->rng.s[1] | m->rng.s[2] | m->rng.s[3])) {
        snprintf(err, errlen, "impossible RNG state: all zero (xoshiro256** never reaches it)");
        return -1;
    }
    m->version = (int)ck_get_u32(h + CK_OFF_VERSION);
    m->holdout = -1;  // version 1 does not record -H
    m->holdout_seed = m->seed;
    if (m->version >= 2) {
        m->holdout = ck_get_f32(h + CK_OFF_HOLDOUT);
        m->holdout_seed = ck_get_u64(h + CK_OFF_HOLDOUT_SEED);
        if (!(m->holdout >= 0 && m->holdout < 1) || ck_get_u32(h + CK_OFF_HOLDOUT + 4) != 0) {
            snprintf(err, errlen, "impossible -H %g (0, or a share between 0 and 1)", m->holdout);
            return -1;
        }
    }
    return 0;
}

// The first parameter or momentum value of the two buffers (n floats each) that is not finite, as
// one line in err ("parameter 17 of 1108 (layer 0's weights) is nan"); 0 when every value is finite
static inline int ck_find_nonfinite(const CheckpointMeta *m, const void *params, const void *mbuf, size_t n,
                                    char *err, size_t errlen) {
    for (int b = 0; b < 2; b++) {
        const uint8_t *v = (const uint8_t *)(b ? mbuf : params);
        for (size_t i = 0; i < n; i++) {
            float x;
            memcpy(&x, v + 4 * i, sizeof(x));  // (a file's bytes may be unaligned: read them as bytes)
            if (isfinite(x)) continue;
            size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
            param_layout(m->sizes, m->L, w_off, b_off);
            int layer = 0;
            while (layer + 1 < m->L && i >= w_off[layer + 1]) layer++;
            snprintf(err, errlen, "%s %zu of %zu (layer %d's %s) is %s: a checkpoint holds finite numbers only",
                     b ? "momentum value" : "parameter", i, n, layer, i >= b_off[layer] ? "bias" : "weights",
                     isnan(x) ? "NaN" : x > 0 ? "+infinity" : "-infinity");
            return -1;
        }
    }
    return 0;
}

// ----------------------------------------------------------------------------
// writing

// The header's bytes (CK_HEADER_BYTES of them) for meta
static inline void checkpoint_encode_header(const CheckpointMeta *m, uint8_t *h) {
    memset(h, 0, CK_HEADER_BYTES);
    memcpy(h + CK_OFF_MAGIC, CK_MAGIC, 8);
    ck_put_u32(h + CK_OFF_VERSION, CK_VERSION);
    ck_put_u32(h + CK_OFF_HEADER_BYTES, CK_HEADER_BYTES);
    ck_put_u64(h + CK_OFF_FILE_BYTES, CK_HEADER_BYTES + 8 * m->num_params + 4);
    ck_put_u64(h + CK_OFF_NUM_PARAMS, m->num_params);
    ck_put_u32(h + CK_OFF_L, (uint32_t)m->L);
    ck_put_u32(h + CK_OFF_ACT, (uint32_t)m->act);
    for (int l = 0; l <= m->L; l++) ck_put_u32(h + CK_OFF_SIZES + 4 * l, (uint32_t)m->sizes[l]);
    ck_put_u32(h + CK_OFF_DATA_KIND, (uint32_t)m->data_kind);
    ck_put_u32(h + CK_OFF_CHANNELS, (uint32_t)m->channels);
    ck_put_u32(h + CK_OFF_ROWS, (uint32_t)m->rows);
    ck_put_u32(h + CK_OFF_COLS, (uint32_t)m->cols);
    ck_put_u32(h + CK_OFF_PLANAR, (uint32_t)m->planar);
    ck_put_u32(h + CK_OFF_NUM_CLASSES, (uint32_t)m->num_classes);
    ck_put_f32(h + CK_OFF_SCALE, m->input_scale);
    ck_put_f32(h + CK_OFF_OFFSET, m->input_offset);
    ck_put_u32(h + CK_OFF_TRAIN_N, (uint32_t)m->train_n);
    ck_put_str(h + CK_OFF_DATASET, CK_NAME_LEN, m->dataset_name);
    ck_put_str(h + CK_OFF_WRITER, CK_WRITER_LEN, m->writer);
    ck_put_u32(h + CK_OFF_BATCH, (uint32_t)m->batch);
    ck_put_f32(h + CK_OFF_LR, m->lr);
    ck_put_f32(h + CK_OFF_MOMENTUM, m->momentum);
    ck_put_f32(h + CK_OFF_WEIGHT_DECAY, m->weight_decay);
    ck_put_u64(h + CK_OFF_SEED, m->seed);
    ck_put_u32(h + CK_OFF_MAX_STEPS, (uint32_t)m->max_steps);
    ck_put_u32(h + CK_OFF_EPOCHS, (uint32_t)m->epochs);
    ck_put_u32(h + CK_OFF_EPOCHS_DONE, (uint32_t)m->epochs_done);
    ck_put_u32(h + CK_OFF_STEP, (uint32_t)m->step_in_epoch);
    ck_put_u64(h + CK_OFF_STEPS_TOTAL, m->steps_total);
    for (int i = 0; i < 4; i++) ck_put_u64(h + CK_OFF_RNG + 8 * i, m->rng.s[i]);
    for (int k = 0; k < m->num_classes && k < MAX_CLASSES; k++)
        ck_put_str(h + CK_OFF_CLASS_NAMES + (size_t)k * CLASS_NAME_LEN, CLASS_NAME_LEN, m->class_names[k]);
    ck_put_f32(h + CK_OFF_HOLDOUT, m->holdout);
    ck_put_u64(h + CK_OFF_HOLDOUT_SEED, m->holdout_seed);
}

// Writes the checkpoint: the header of meta, params and mbuf (n floats each, n = meta's
// num_params), the CRC-32. Returns 0, or -1 with one line in err; on failure the file at path is
// what it was before (the last good checkpoint, or nothing).
static inline int checkpoint_write(const char *path, const CheckpointMeta *meta, const float *params,
                                   const float *mbuf, size_t n, char *err, size_t errlen) {
    if ((uint64_t)n != meta->num_params) {
        snprintf(err, errlen, "%s: not written: %zu parameters given for a model of %llu", path, n,
                 (unsigned long long)meta->num_params);
        return -1;
    }
    struct stat st;
    const char *kept = stat(path, &st) == 0 && S_ISREG(st.st_mode) ? "the previous checkpoint is kept"
                                                                    : "no checkpoint was written";
    // the header first, checked as the reader will check it: never write a file it would refuse
    uint8_t *header = (uint8_t *)malloc(CK_HEADER_BYTES);
    CheckpointMeta *again = (CheckpointMeta *)malloc(sizeof(CheckpointMeta));
    char why[1400];
    uint64_t total;
    if (!header || !again) {
        free(header);
        free(again);
        snprintf(err, errlen, "cannot write the checkpoint %s: out of memory; %s", path, kept);
        return -1;
    }
    checkpoint_encode_header(meta, header);
    int bad = ck_check_layout(header, &total, why, sizeof(why)) != 0 ||
              ck_decode_fields(header, again, why, sizeof(why)) != 0;
    free(again);
    if (bad) {
        free(header);
        snprintf(err, errlen, "%s: not written: %s (a bug in the program writing it); %s", path, why, kept);
        return -1;
    }
    if (ck_find_nonfinite(meta, params, mbuf, n, why, sizeof(why)) != 0) {
        free(header);
        snprintf(err, errlen, "%s: not written: %s (the run diverged); %s", path, why, kept);
        return -1;
    }
    SafeWrite w;
    if (safe_write_open(&w, path, why, sizeof(why)) != 0) {
        free(header);
        snprintf(err, errlen, "cannot write the checkpoint: %s; %s", why, kept);
        return -1;
    }
    uint8_t tail[4];
    uint32_t crc = (uint32_t)crc32(0L, Z_NULL, 0);
    crc = ck_crc32(crc, header, CK_HEADER_BYTES);
    crc = ck_crc32(crc, params, n * sizeof(float));
    crc = ck_crc32(crc, mbuf, n * sizeof(float));
    ck_put_u32(tail, crc);
    errno = 0;
    int ok = fwrite(header, 1, CK_HEADER_BYTES, w.f) == CK_HEADER_BYTES && fwrite(params, sizeof(float), n, w.f) == n &&
             fwrite(mbuf, sizeof(float), n, w.f) == n && fwrite(tail, 1, 4, w.f) == 4;
    int saved = errno;
    free(header);
    if (!ok) {
        safe_write_abort(&w);
        snprintf(err, errlen, "cannot write the checkpoint %s: %s; %s", path, strerror(saved ? saved : EIO), kept);
        return -1;
    }
    if (safe_write_commit(&w, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "cannot write the checkpoint: %s; %s", why, kept);
        return -1;
    }
    return 0;
}

// ----------------------------------------------------------------------------
// reading

// Parses a checkpoint's bytes (the whole file, len bytes). Returns 0 with meta filled and the
// offset of the parameters in *params_offset (the momentum buffer follows them), or -1 with one
// line in err. Reads only within buf and allocates nothing: the fuzz target's entry point.
static inline int checkpoint_parse(const uint8_t *buf, size_t len, CheckpointMeta *meta, size_t *params_offset,
                                   char *err, size_t errlen) {
    // 1. what the file is: its magic number and format version
    if (len == 0) {
        snprintf(err, errlen, "not a checkpoint: the file is empty");
        return -1;
    }
    if (len < 8 || memcmp(buf, CK_MAGIC, 8) != 0) {
        if (len < 8 && memcmp(buf, CK_MAGIC, len) == 0) {
            snprintf(err, errlen, "truncated: the file has %zu bytes, a checkpoint's header alone has %u", len,
                     CK_HEADER_BYTES);
            return -1;
        }
        char seen[40] = "";
        for (size_t i = 0; i < len && i < 8; i++)
            snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), i ? " %02x" : "%02x", buf[i]);
        snprintf(err, errlen, "not an mlp.cu checkpoint: it starts with bytes %s%s, a checkpoint with \"%s\"", seen,
                 len < 8 ? " (and ends)" : "", CK_MAGIC);
        return -1;
    }
    if (len < 12) {
        snprintf(err, errlen, "truncated: the file has %zu bytes, a checkpoint's header alone has %u", len,
                 CK_HEADER_BYTES);
        return -1;
    }
    // the CRC-32, the last 4 bytes in every version, before the version is believed: a damaged
    // version field must be called damage, not a newer program's file
    uint32_t version = ck_get_u32(buf + CK_OFF_VERSION), header_bytes = ck_header_bytes(version);
    int crc_ok = len >= 16 && ck_get_u32(buf + len - 4) == ck_crc32((uint32_t)crc32(0L, Z_NULL, 0), buf, len - 4);
    if (!header_bytes) {
        if (crc_ok)
            snprintf(err, errlen, "checkpoint format version %u; this program reads versions 1 to %u%s", version,
                     CK_VERSION, version > CK_VERSION ? " (it was written by a newer mlp.cu)" : "");
        else
            snprintf(err, errlen, "corrupt: its CRC-32 (the last 4 bytes) does not match its %zu bytes, and its "
                     "version field reads %u, which no mlp.cu writes: the file was damaged or cut", len, version);
        return -1;
    }
    // 2. its size: the header says how long the file is; compare before believing anything
    if (len < header_bytes) {
        uint64_t claim = len >= CK_OFF_FILE_BYTES + 8 ? ck_get_u64(buf + CK_OFF_FILE_BYTES) : 0;
        if (claim > header_bytes)
            snprintf(err, errlen, "truncated: the file has %zu of the %llu bytes its header describes", len,
                     (unsigned long long)claim);
        else
            snprintf(err, errlen, "truncated: the file has %zu bytes, a checkpoint's header alone has %u", len,
                     header_bytes);
        return -1;
    }
    uint64_t total = 0;
    char layout_err[256];
    int sane = ck_check_layout(buf, &total, layout_err, sizeof(layout_err)) == 0;
    if (sane && (uint64_t)len < total) {
        snprintf(err, errlen, "truncated: the file has %zu of the %llu bytes its header describes", len,
                 (unsigned long long)total);
        return -1;
    }
    if (sane && (uint64_t)len > total) {
        uint32_t want = ck_get_u32(buf + total - 4), got = ck_crc32((uint32_t)crc32(0L, Z_NULL, 0), buf, total - 4);
        snprintf(err, errlen, "%llu unexpected bytes after the end of the checkpoint (its header describes %llu bytes, "
                 "the file has %zu)%s", (unsigned long long)(len - total), (unsigned long long)total, len,
                 got == want ? "" : "; its CRC-32 does not match either");
        return -1;
    }
    // 3. the CRC-32: any byte changed since it was written
    uint32_t stored_crc = ck_get_u32(buf + len - 4), crc_all = ck_crc32((uint32_t)crc32(0L, Z_NULL, 0), buf, len - 4);
    if (!crc_ok) {
        snprintf(err, errlen, "corrupt: CRC-32 of its first %zu bytes is 0x%08x, expected 0x%08x (its last 4 bytes): "
                 "the file changed after it was written%s%s", len - 4, crc_all, stored_crc,
                 sane ? "" : "; the header is damaged too: ", sane ? "" : layout_err);
        return -1;
    }
    // 4. an intact file: every field must make sense (only a writer's bug or a forged file fails here)
    if (!sane) {
        snprintf(err, errlen, "%s", layout_err);
        return -1;
    }
    if (ck_decode_fields(buf, meta, err, errlen) != 0) return -1;
    // 5. the numbers: every parameter and momentum value finite (read as bytes: buf may be unaligned)
    if (ck_find_nonfinite(meta, buf + header_bytes, buf + header_bytes + 4 * meta->num_params,
                          (size_t)meta->num_params, err, errlen) != 0)
        return -1;
    *params_offset = header_bytes;
    return 0;
}

// Frees what checkpoint_read allocated (safe to call twice)
static inline void checkpoint_free(Checkpoint *ck) {
    free(ck->bytes);
    ck->bytes = NULL;
    ck->params = ck->mbuf = NULL;
    ck->nbytes = 0;
}

// Reads and checks the checkpoint at path into ck (allocates; free with checkpoint_free).
// Returns 0, or -1 with one line in err that names the file and what is wrong.
static inline int checkpoint_read(const char *path, Checkpoint *ck, char *err, size_t errlen) {
    memset(ck, 0, sizeof(*ck));
    snprintf(ck->path, sizeof(ck->path), "%s", path);
    // O_NONBLOCK: a FIFO planted at path must not hang the open; it is refused below
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open the checkpoint: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: is %s, not a checkpoint file", path,
                 fstat(fd, &st) != 0 ? "unreadable" : file_type_name(st.st_mode));
        close(fd);
        return -1;
    }
    size_t len = (size_t)st.st_size;  // the file's size decides the allocation, never its header
    if ((off_t)len != st.st_size) {
        snprintf(err, errlen, "%s: %lld bytes is too large for this machine", path, (long long)st.st_size);
        close(fd);
        return -1;
    }
    ck->bytes = (uint8_t *)malloc(len ? len : 1);
    if (!ck->bytes) {
        snprintf(err, errlen, "%s: out of memory reading its %zu bytes", path, len);
        close(fd);
        return -1;
    }
    size_t got = 0;
    while (got < len) {
        ssize_t r = read(fd, ck->bytes + got, len - got > (1u << 30) ? (1u << 30) : len - got);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            snprintf(err, errlen, "%s: read error: %s", path, strerror(errno));
            close(fd);
            checkpoint_free(ck);
            return -1;
        }
        if (r == 0) break;  // shrank while we read: parse sees the short file as truncated
        got += (size_t)r;
    }
    close(fd);
    ck->nbytes = got;
    size_t off = 0;
    char why[768];
    if (checkpoint_parse(ck->bytes, ck->nbytes, &ck->meta, &off, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "%s: %s", path, why);
        checkpoint_free(ck);
        return -1;
    }
    // aligned: malloc's alignment, and the offset is a multiple of 16
    ck->params = (const float *)(const void *)(ck->bytes + off);
    ck->mbuf = ck->params + ck->meta.num_params;
    return 0;
}

// ----------------------------------------------------------------------------
// a checkpoint against the command line and the data

// The flags a resume takes from the checkpoint when the command line leaves them off: -m -a -b
// -l -k -w -s -t -n, and -H where the checkpoint records it (version 2 on). given: the letters of the flags that were on the command line (e.g. "rnc";
// see flags_given). -m sets the sizes but not sizes_given: load_datasets_or_die then fits the
// first and last size to the data, and checkpoint_contradiction names any mismatch in data terms.
static inline void checkpoint_adopt_settings(const Checkpoint *ck, Config *c, const char *given) {
    const CheckpointMeta *m = &ck->meta;
#define CK_GIVEN(flag) (given && strchr(given, flag))
    if (!CK_GIVEN('m')) {
        c->L = m->L;
        memcpy(c->sizes, m->sizes, sizeof(int) * (size_t)(m->L + 1));
    }
    if (!CK_GIVEN('a')) c->act = m->act;
    if (!CK_GIVEN('b')) c->batch = m->batch;
    if (!CK_GIVEN('l')) c->lr = m->lr;
    if (!CK_GIVEN('k')) c->momentum = m->momentum;
    if (!CK_GIVEN('w')) c->weight_decay = m->weight_decay;
    if (!CK_GIVEN('s')) c->seed = m->seed;
    if (!CK_GIVEN('t')) c->max_steps = m->max_steps;
    if (!CK_GIVEN('n')) c->epochs = m->epochs;
    if (!CK_GIVEN('H') && m->holdout >= 0) c->holdout = m->holdout;
#undef CK_GIVEN
}

// The letters of the short flags on a command line whose every flag takes a value (all of the
// trainers' do, but -h): "-b 64 -r ck.bin" gives "br". given has room for 128 letters.
static inline void flags_given(int argc, char **argv, char *given, size_t n) {
    size_t k = 0;
    for (int i = 1; i < argc && k + 1 < n; i++) {
        if (argv[i][0] == '-' && argv[i][1] && !argv[i][2]) {
            given[k++] = argv[i][1];
            i++;  // its value
        }
    }
    given[k] = '\0';
}

// The model in the checkpoint against a dataset: the same pixels in (shape, channel order) and
// classes out. For -e this is all that must hold; a resume (resume = 1: ds is the training set)
// also needs the same training set: its number of items and its name. 0, or -1 and one line.
static inline int checkpoint_data_contradiction(const Checkpoint *ck, const Dataset *ds, const char *data_dir,
                                                int resume, char *err, size_t errlen) {
    const CheckpointMeta *m = &ck->meta;
    const char *dir = data_dir && data_dir[0] ? data_dir : "the data directory";
    if (ds->channels != m->channels || ds->rows != m->rows || ds->cols != m->cols) {
        snprintf(err, errlen, "%s's model takes %dx%dx%d images (%d inputs) but %s holds %dx%dx%d images", ck->path,
                 m->channels, m->rows, m->cols, m->sizes[0], dir, ds->channels, ds->rows, ds->cols);
        return -1;
    }
    if (m->channels > 1 && ds->planar != m->planar) {
        snprintf(err, errlen, "%s's model reads its %d channels %s but %s stores them %s", ck->path, m->channels,
                 m->planar ? "as planes (RRR..GGG..BBB)" : "interleaved (RGBRGB..)", dir,
                 ds->planar ? "as planes" : "interleaved");
        return -1;
    }
    if (ds->num_classes != m->num_classes) {
        snprintf(err, errlen, "%s's model has %d classes but %s has %d", ck->path, m->num_classes, dir,
                 ds->num_classes);
        return -1;
    }
    if (resume && (ds->n != m->train_n || strcmp(ds->name, m->dataset_name) != 0)) {
        snprintf(err, errlen, "%s was trained on %s (%d training images) but %s holds %s (%d): resume on the same "
                 "data%s", ck->path, m->dataset_name, m->train_n, dir, ds->name, ds->n,
                 m->holdout < 0 ? ", with the -H of the run that wrote it (a version-1 checkpoint does not record -H)"
                                : "");
        return -1;
    }
    return 0;
}

// For a resume: the first way the run of c on the training set train contradicts the checkpoint,
// as one line in err (the trainer prints it and exits 2), or 0 when they agree. Call after
// checkpoint_adopt_settings and loading the data.
static inline int checkpoint_contradiction(const Checkpoint *ck, const Config *c, const Dataset *train, char *err,
                                           size_t errlen) {
    const CheckpointMeta *m = &ck->meta;
    if (m->holdout >= 0 && c->holdout != m->holdout) {  // (before the data: -H changes the training set's size)
        snprintf(err, errlen, "-H %g contradicts the checkpoint %s, trained with -H %g: leave -H out to resume it, "
                 "or start a new run without -r", c->holdout, ck->path, m->holdout);
        return -1;
    }
    if (checkpoint_data_contradiction(ck, train, c->data_dir, 1, err, errlen) != 0) return -1;
    int same_sizes = c->L == m->L;
    for (int l = 0; same_sizes && l <= m->L; l++) same_sizes = c->sizes[l] == m->sizes[l];
    char have[256], want[256], flag = 0;
    if (!same_sizes) {
        flag = 'm';
        ck_format_sizes(c->sizes, c->L, have, sizeof(have));
        ck_format_sizes(m->sizes, m->L, want, sizeof(want));
    } else if (c->act != m->act) {
        flag = 'a';
        snprintf(have, sizeof(have), "%s", ACT_NAMES[c->act]);
        snprintf(want, sizeof(want), "%s", ACT_NAMES[m->act]);
    } else if (c->batch != m->batch) {
        flag = 'b';
        snprintf(have, sizeof(have), "%d", c->batch);
        snprintf(want, sizeof(want), "%d", m->batch);
    } else if (c->lr != m->lr) {
        flag = 'l';
        snprintf(have, sizeof(have), "%g", c->lr);
        snprintf(want, sizeof(want), "%g", m->lr);
    } else if (c->momentum != m->momentum) {
        flag = 'k';
        snprintf(have, sizeof(have), "%g", c->momentum);
        snprintf(want, sizeof(want), "%g", m->momentum);
    } else if (c->weight_decay != m->weight_decay) {
        flag = 'w';
        snprintf(have, sizeof(have), "%g", c->weight_decay);
        snprintf(want, sizeof(want), "%g", m->weight_decay);
    } else if (c->seed != m->seed) {
        flag = 's';
        snprintf(have, sizeof(have), "%llu", (unsigned long long)c->seed);
        snprintf(want, sizeof(want), "%llu", (unsigned long long)m->seed);
    } else if (c->max_steps != m->max_steps) {
        flag = 't';
        snprintf(have, sizeof(have), "%d", c->max_steps);
        snprintf(want, sizeof(want), "%d", m->max_steps);
    }
    if (flag) {
        snprintf(err, errlen, "-%c %s contradicts the checkpoint %s, trained with -%c %s: leave -%c out to resume it, "
                 "or start a new run without -r", flag, have, ck->path, flag, want, flag);
        return -1;
    }
    if (c->epochs < m->epochs_done) {
        snprintf(err, errlen, "-n %d: the checkpoint %s has already done %d epochs; -n is the total, at least %d",
                 c->epochs, ck->path, m->epochs_done, m->epochs_done);
        return -1;
    }
    return 0;
}

#endif // MLP_CHECKPOINT_H
