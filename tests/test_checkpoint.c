/*
The checkpoint library, the evaluation report and the signal handling (run/checkpoint.h,
run/report.h, run/signals.h), tested directly, with no trainer binary:
  1. round trip: a small CPU model written and read back, every field and byte equal, the
     header's fields at the offsets doc/checkpoint.md gives;
  2. damaged files, each with its own message: bad magic, another version (told from a damaged
     version field by the CRC-32, checked first), truncated at several points, trailing bytes,
     one byte flipped at EVERY position (the CRC-32), and forged files whose CRC-32 is right but
     whose fields are impossible (layer sizes, a huge parameter count in a short file, classes,
     progress, a control byte in a class name, -H) or whose numbers are not finite (a NaN weight,
     an infinite momentum: refused by the reader, and never written); a version-1 file still
     loads; a directory, a FIFO, a missing file;
  3. a checkpoint against the command line and the data: each contradiction named, the flags a
     resume may leave off taken from the checkpoint, -n allowed to grow;
  4. failed writes (a missing directory, a directory as the destination, a full disk simulated
     with RLIMIT_FSIZE) fail with one line and leave the last good checkpoint as it was, and no
     temporary file behind;
  5. the report of -e on a small hand-made case and the top-3 line of -p, compared as text;
  6. SIGINT, SIGTERM and SIGHUP: the first sets the flag, the second kills; SIGPIPE sets the flag
     and is then ignored; the exit codes and the stop message.
Usage: tests/bin/test_checkpoint   (from the repository root, where make test runs it;
       KEEP_TMP=1 keeps its temporary directory)
*/
#define TESTING
#include "../train_mlp_cpu.c"
#include "../run/checkpoint.h"
#include "../run/report.h"
#include "../run/signals.h"
#include "check.h"
#include "ckpt_v1.h"  // checkpoint_as_version1

#include <dirent.h>
#include <sys/resource.h>
#include <sys/wait.h>

static char tmpdir[256];

// ----------------------------------------------------------------------------
// helpers

// a check that a failure happened with a message containing needle; prints the message
static void expect_error(const char *what, int rc, const char *err, const char *needle) {
    check(rc != 0 && strstr(err, needle) != NULL, "%s -> \"%s\"", what, rc ? err : "(no error)");
}

static int write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

static uint8_t *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = (uint8_t *)malloc((size_t)len + 1);
    *n = fread(p, 1, (size_t)len, f);
    fclose(f);
    return p;
}

// a forged file: its CRC-32 recomputed, so that the reader's field checks are reached
static void reseal(uint8_t *buf, size_t len) {
    ck_put_u32(buf + len - 4, ck_crc32((uint32_t)crc32(0L, Z_NULL, 0), buf, len - 4));
}

// the temporary files a write left in tmpdir (names with ".tmp.")
static int leftover_temp_files(void) {
    int count = 0;
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));) count += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return count;
}

// A small training set of n random pictures of 1 x rows x cols bytes and C classes with names
static void make_dataset(Dataset *ds, int n, int rows, int cols, int C, uint64_t seed) {
    memset(ds, 0, sizeof(*ds));
    ds->n = n;
    ds->rows = rows;
    ds->cols = cols;
    ds->channels = 1;
    ds->planar = 1;
    ds->kind = DATA_IDX;
    ds->num_classes = C;
    snprintf(ds->name, sizeof(ds->name), "a test set");
    for (int c = 0; c < C; c++) snprintf(ds->class_names[c], CLASS_NAME_LEN, "class %c", 'A' + c);
    ds->images = (uint8_t *)mallocCheck((size_t)n * rows * cols);
    ds->labels = (uint8_t *)mallocCheck((size_t)n);
    Rng r;
    rng_seed(&r, seed, 7);
    for (size_t i = 0; i < (size_t)n * rows * cols; i++) ds->images[i] = (uint8_t)rng_below(&r, 256);
    for (int i = 0; i < n; i++) ds->labels[i] = (uint8_t)rng_below(&r, (uint32_t)C);
}

// A small model trained for a few steps on ds (so the momentum buffer is not zero)
static void make_model(ModelCPU *m, Config *c, const Dataset *ds, int act, int steps) {
    config_defaults(c, PROG_CPU);
    int sizes[4] = {ds->rows * ds->cols, 17, 12, ds->num_classes};
    c->L = 3;
    memcpy(c->sizes, sizes, sizeof(sizes));
    c->act = act;
    c->batch = 16;
    c->lr = 0.05f;
    c->momentum = 0.9f;
    c->weight_decay = 1e-4f;
    c->seed = 4242;
    c->epochs = 3;
    model_build_cpu(m, c->sizes, c->L, c->act, c->batch);
    model_init_params_cpu(m, c->seed);
    Rng r;
    rng_seed(&r, c->seed, 1);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)ds->n);
    rng_permutation(&r, perm, ds->n);
    for (int s = 0; s < steps; s++) {
        gather_batch_cpu(m->acts[0], m->labels, ds->images, ds->labels, perm, (s * c->batch) % (ds->n - c->batch),
                         c->batch, m->sizes[0]);
        model_forward_cpu(m, c->batch);
        model_loss_cpu(m, c->batch);
        model_backward_cpu(m, c->batch);
        model_update_cpu(m, c->lr, c->momentum, c->weight_decay);
    }
    free(perm);
}

// ----------------------------------------------------------------------------
// 1. round trip

static Dataset train;
static ModelCPU model;
static Config cfg;
static CheckpointMeta meta;
static char ckpath[512];
static uint8_t *good;     // the good checkpoint's bytes
static size_t good_len;

static void test_round_trip(void) {
    section("round trip");
    make_dataset(&train, 100, 5, 6, 5, 1);
    make_model(&model, &cfg, &train, ACT_TANH, 3);
    checkpoint_meta_init(&meta, &cfg, &train, "test_checkpoint");
    Rng epoch_start;
    rng_seed(&epoch_start, 99, 1);
    checkpoint_set_progress(&meta, 1, 3, 10, &epoch_start);  // stopped after step 3 of epoch 2
    snprintf(ckpath, sizeof(ckpath), "%s/ck.bin", tmpdir);
    char err[1024] = "";
    int rc = checkpoint_write(ckpath, &meta, model.params, model.mbuf, model.num_params, err, sizeof(err));
    check(rc == 0, "checkpoint_write succeeds%s%s", rc ? ": " : "", err);
    good = read_bytes(ckpath, &good_len);
    size_t want_len = CK_HEADER_BYTES + 8 * model.num_params + 4;
    check(good && good_len == want_len, "the file has header + 2 x %zu floats + CRC = %zu bytes (has %zu)",
          model.num_params, want_len, good_len);
    check(leftover_temp_files() == 0, "no temporary file is left beside it");

    Checkpoint ck;
    rc = checkpoint_read(ckpath, &ck, err, sizeof(err));
    check(rc == 0, "checkpoint_read succeeds%s%s", rc ? ": " : "", err);
    if (rc != 0) return;
    check(memcmp(&ck.meta, &meta, sizeof(meta)) == 0, "every field read back equals the one written");
    check(ck.meta.L == 3 && ck.meta.sizes[0] == 30 && ck.meta.sizes[3] == 5 && ck.meta.act == ACT_TANH &&
              ck.meta.num_params == model.num_params,
          "model: L 3, sizes 30,17,12,5, tanh, %llu parameters", (unsigned long long)ck.meta.num_params);
    check(ck.meta.data_kind == DATA_IDX && ck.meta.channels == 1 && ck.meta.rows == 5 && ck.meta.cols == 6 &&
              ck.meta.num_classes == 5 && ck.meta.train_n == 100 && ck.meta.input_scale == 1.0f / 255.0f &&
              ck.meta.input_offset == 0.0f && strcmp(ck.meta.class_names[4], "class E") == 0 &&
              strcmp(ck.meta.dataset_name, "a test set") == 0,
          "data: IDX 1x5x6, 5 classes with their names, 100 items, scale 1/255, offset 0");
    check(ck.meta.batch == 16 && ck.meta.lr == 0.05f && ck.meta.momentum == 0.9f && ck.meta.weight_decay == 1e-4f &&
              ck.meta.seed == 4242 && ck.meta.epochs == 3 && ck.meta.max_steps == 0,
          "settings: -b 16 -l 0.05 -k 0.9 -w 1e-4 -s 4242 -n 3");
    check(ck.meta.epochs_done == 1 && ck.meta.step_in_epoch == 3 && ck.meta.steps_total == 10 &&
              memcmp(&ck.meta.rng, &epoch_start, sizeof(Rng)) == 0,
          "progress: 1 epoch + 3 steps done, 10 in all, the RNG state");
    check(memcmp(ck.params, model.params, model.num_params * 4) == 0 &&
              memcmp(ck.mbuf, model.mbuf, model.num_params * 4) == 0,
          "parameters and momentum buffer: every byte equal");
    // the offsets of doc/checkpoint.md
    check(memcmp(good, "MLPCUCKP", 8) == 0 && ck_get_u32(good + 8) == 2 && ck_get_u32(good + 12) == 12624 &&
              ck_get_u64(good + 16) == good_len && ck_get_u32(good + 32) == 3 && ck_get_u32(good + 40) == 30 &&
              ck_get_u32(good + 52) == 5 && ck_get_u32(good + 240) == 16 && ck_get_u32(good + 276) == 3 &&
              strcmp((const char *)good + 320 + 48, "class B") == 0 && ck_get_f32(good + 12608) == cfg.holdout &&
              ck_get_u64(good + 12616) == 4242 && memcmp(good + 12624, model.params, 4) == 0,
          "fields at the documented offsets (magic 0, version 8, L 32, sizes 40, -b 240, step 276, names 320, "
          "-H 12608, its seed 12616, parameters 12624)");
    // writing what was read gives the same bytes
    char again[600];
    snprintf(again, sizeof(again), "%s/again.bin", tmpdir);
    rc = checkpoint_write(again, &ck.meta, ck.params, ck.mbuf, ck.meta.num_params, err, sizeof(err));
    size_t n2 = 0;
    uint8_t *b2 = read_bytes(again, &n2);
    check(rc == 0 && b2 && n2 == good_len && memcmp(b2, good, good_len) == 0,
          "writing the checkpoint read gives the same bytes");
    free(b2);
    rc = checkpoint_write(again, &meta, model.params, model.mbuf, model.num_params - 1, err, sizeof(err));
    expect_error("a parameter count that is not the model's", rc, err, "parameters given for a model of");
    CheckpointMeta wrong = meta;
    wrong.step_in_epoch = 7;  // 100 items in batches of 16: 7 steps, numbered 0..6
    rc = checkpoint_write(again, &wrong, model.params, model.mbuf, model.num_params, err, sizeof(err));
    expect_error("progress past the end of an epoch", rc, err,
                 "not written: impossible progress: step 7 of an epoch of 7 steps (epoch 2 of 3) (a bug in the program "
                 "writing it); the previous checkpoint is kept");
    checkpoint_free(&ck);
    checkpoint_free(&ck);  // twice is harmless
}

// ----------------------------------------------------------------------------
// 2. damaged files

// writes bytes to a file and reads it as a checkpoint: 0 or -1, the message in err
static int read_variant(const uint8_t *p, size_t n, char *err, size_t errlen) {
    char path[600];
    snprintf(path, sizeof(path), "%s/bad.bin", tmpdir);
    write_bytes(path, p, n);
    Checkpoint ck;
    int rc = checkpoint_read(path, &ck, err, errlen);
    if (rc == 0) checkpoint_free(&ck);
    return rc;
}

static void test_damaged(void) {
    section("damaged files: each its own message");
    if (!good) return;
    char err[1024], want[256];
    uint8_t *b = (uint8_t *)malloc(good_len + 16);
    int rc;

    memcpy(b, good, good_len);
    b[0] = 'X';
    expect_error("bad magic", read_variant(b, good_len, err, sizeof(err)), err, "not an mlp.cu checkpoint");
    const uint8_t idx[16] = {0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 28, 0, 0, 0, 28};
    expect_error("an IDX file", read_variant(idx, 16, err, sizeof(err)), err,
                 "starts with bytes 00 00 08 03 00 00 00 01, a");
    expect_error("an empty file", read_variant(b, 0, err, sizeof(err)), err, "the file is empty");
    memcpy(b, good, good_len);
    ck_put_u32(b + 8, 3);
    reseal(b, good_len);
    expect_error("version 3, its CRC-32 right", read_variant(b, good_len, err, sizeof(err)), err,
                 "format version 3; this program reads versions 1 to 2 (it was written by a newer mlp.cu)");
    ck_put_u32(b + 8, 0);
    reseal(b, good_len);
    expect_error("version 0, its CRC-32 right", read_variant(b, good_len, err, sizeof(err)), err, "format version 0");
    memcpy(b, good, good_len);
    b[9] ^= 0x01;  // one bit flipped in the version field: damage, not a newer program's file
    expect_error("one bit flipped in the version field", read_variant(b, good_len, err, sizeof(err)), err,
                 "corrupt: its CRC-32 (the last 4 bytes) does not match its");
    check(strstr(err, "newer") == NULL, "... and it is not called a newer mlp.cu's file");

    // a version-1 file (the same fields, a 12,608-byte header, no -H) still loads
    {
        size_t n1 = 0;
        uint8_t *v1 = checkpoint_as_version1(good, good_len, &n1);
        char p1[600];
        snprintf(p1, sizeof(p1), "%s/v1.bin", tmpdir);
        write_bytes(p1, v1, n1);
        Checkpoint c1;
        rc = checkpoint_read(p1, &c1, err, sizeof(err));
        check(rc == 0 && c1.meta.version == 1 && c1.meta.holdout == -1 && c1.meta.L == 3 &&
                  memcmp(c1.params, model.params, model.num_params * 4) == 0 &&
                  memcmp(c1.mbuf, model.mbuf, model.num_params * 4) == 0,
              "a version-1 checkpoint loads: its model, parameters and momentum, -H unknown%s%s", rc ? ": " : "",
              rc ? err : "");
        if (rc == 0) {
            Dataset d = train;
            d.n = 90;  // a run that held out 10 with -H, resumed without it
            Config c = cfg;
            rc = checkpoint_contradiction(&c1, &c, &d, err, sizeof(err));
            expect_error("a version-1 checkpoint on a training set of another size", rc, err,
                         "with the -H of the run that wrote it (a version-1 checkpoint does not record -H)");
            checkpoint_free(&c1);
        }
        free(v1);
    }

    // truncated at several points: inside the magic, the header, the parameters, the CRC
    size_t cuts[] = {5, 10, 20, 100, CK_HEADER_BYTES - 1, CK_HEADER_BYTES, CK_HEADER_BYTES + 1000, good_len - 4,
                     good_len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        size_t n = cuts[i];
        if (n >= 24) snprintf(want, sizeof(want), "truncated: the file has %zu of the %zu bytes", n, good_len);
        else snprintf(want, sizeof(want), "truncated: the file has %zu bytes", n);
        char what[64];
        snprintf(what, sizeof(what), "truncated to %zu bytes", n);
        expect_error(what, read_variant(good, n, err, sizeof(err)), err, want);
    }
    memcpy(b, good, good_len);
    memcpy(b + good_len, "abc", 3);
    snprintf(want, sizeof(want), "3 unexpected bytes after the end of the checkpoint (its header describes %zu bytes",
             good_len);
    expect_error("3 bytes appended", read_variant(b, good_len + 3, err, sizeof(err)), err, want);

    // one byte flipped, at every position after the magic and version: the CRC-32 catches it
    // (in memory: checkpoint_parse is what checkpoint_read calls on the file's bytes)
    memcpy(b, good, good_len);
    size_t missed = 0, first_missed = 0;
    char first_msg[1024] = "";
    for (size_t pos = 8; pos < good_len; pos++) {
        b[pos] ^= 0x10;
        CheckpointMeta m;
        size_t off;
        rc = checkpoint_parse(b, good_len, &m, &off, err, sizeof(err));
        if (rc == 0 || strncmp(err, "corrupt: ", 9) != 0 || strstr(err, "CRC-32") == NULL) {
            if (!missed++) {
                first_missed = pos;
                snprintf(first_msg, sizeof(first_msg), "%s", rc ? err : "(accepted)");
            }
        }
        b[pos] ^= 0x10;
    }
    check(missed == 0, "a flipped bit at each of the %zu positions from byte 8 on (the version too): \"corrupt: "
          "CRC-32 ...\"%s", good_len - 8, missed ? "" : "");
    if (missed) printf("       missed %zu, the first at byte %zu: %s\n", missed, first_missed, first_msg);
    b[5000] ^= 1;
    snprintf(want, sizeof(want), "corrupt: CRC-32 of its first %zu bytes is 0x", good_len - 4);
    expect_error("one flipped byte in the file", read_variant(b, good_len, err, sizeof(err)), err, want);
    check(strstr(err, "/bad.bin: corrupt:") && strstr(err, ", expected 0x"),
          "the message names the file and the expected CRC-32");
    memcpy(b, good, good_len);
    b[CK_OFF_SIZES + 4] ^= 0x40;  // a layer size: the header no longer adds up, and the CRC says why
    expect_error("a flipped byte in a layer size", read_variant(b, good_len, err, sizeof(err)), err,
                 "the header is damaged too: impossible model:");

    // forged: the CRC-32 is right, the fields are not
    struct {
        const char *what;
        int off, bytes;
        uint64_t value;
        const char *expect;
    } forged[] = {
        {"0 layers", CK_OFF_L, 4, 0, "impossible model: 0 layers (1 to 16)"},
        {"17 layers", CK_OFF_L, 4, 17, "impossible model: 17 layers"},
        {"activation 7", CK_OFF_ACT, 4, 7, "impossible model: activation 7"},
        {"a layer of size 0", CK_OFF_SIZES + 8, 4, 0, "impossible model: layer size 2 is 0"},
        {"a layer wider than 65536", CK_OFF_SIZES + 8, 4, 70000, "impossible model: layer size 2 is 70000"},
        {"a size after the last layer", CK_OFF_SIZES + 16, 4, 9, "size slot 4 holds 9 after the 4 sizes of 3 layers"},
        {"a parameter count that is not the sizes'", CK_OFF_NUM_PARAMS, 8, 809,
         "impossible model: 809 parameters, but layer sizes 30,17,12,5 have 808"},
        {"a file size that is not the sizes'", CK_OFF_FILE_BYTES, 8, 99, "the header gives the file size as 99 bytes"},
        {"another header size", CK_OFF_HEADER_BYTES, 4, 4096, "header size is 4096 bytes"},
        {"data kind 9", CK_OFF_DATA_KIND, 4, 9, "impossible data kind 9"},
        {"a picture shape that is not the inputs", CK_OFF_ROWS, 4, 7,
         "impossible data shape: 1 channels x 7 x 6 pixels for a model of 30 inputs"},
        {"a class count that is not the outputs", CK_OFF_NUM_CLASSES, 4, 6, "impossible class count 6"},
        {"batch 0", CK_OFF_BATCH, 4, 0, "impossible training settings: -b 0"},
        {"no training items", CK_OFF_TRAIN_N, 4, 0, "impossible progress: 0 training items"},
        {"a step beyond the epoch", CK_OFF_STEP, 4, 7, "impossible progress: step 7 of an epoch of 7 steps"},
        {"more epochs done than -n", CK_OFF_EPOCHS_DONE, 4, 4, "impossible progress: 100 training items, 4 of 3"},
    };
    for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
        memcpy(b, good, good_len);
        if (forged[i].bytes == 4) ck_put_u32(b + forged[i].off, (uint32_t)forged[i].value);
        else ck_put_u64(b + forged[i].off, forged[i].value);
        reseal(b, good_len);
        expect_error(forged[i].what, read_variant(b, good_len, err, sizeof(err)), err, forged[i].expect);
    }
    memcpy(b, good, good_len);
    b[CK_OFF_CLASS_NAMES + 2 * CLASS_NAME_LEN + CLASS_NAME_LEN - 1] = 'x';
    memset(b + CK_OFF_CLASS_NAMES + 2 * CLASS_NAME_LEN, 'x', CLASS_NAME_LEN);
    reseal(b, good_len);
    expect_error("a class name with no end", read_variant(b, good_len, err, sizeof(err)), err,
                 "the name of class 2 is not terminated");
    memcpy(b, good, good_len);
    ck_put_f32(b + CK_OFF_SCALE, NAN);
    reseal(b, good_len);
    expect_error("a NaN input scale", read_variant(b, good_len, err, sizeof(err)), err,
                 "impossible input normalization");
    memcpy(b, good, good_len);
    b[CK_OFF_CLASS_NAMES + CLASS_NAME_LEN + 2] = '\n';  // "cl\nss B"
    reseal(b, good_len);
    expect_error("a newline in a class name", read_variant(b, good_len, err, sizeof(err)), err,
                 "the name of class 1 holds the control byte 0x0a");
    memcpy(b, good, good_len);
    ck_put_f32(b + CK_OFF_HOLDOUT, 1.0f);
    reseal(b, good_len);
    expect_error("-H 1", read_variant(b, good_len, err, sizeof(err)), err, "impossible -H 1");

    // numbers that are not finite, with the CRC-32 right: refused, whichever buffer and value
    size_t P0 = model.num_params;
    struct {
        const char *what;
        size_t at;
        float value;
        const char *expect;
    } nonfinite[] = {
        {"a NaN weight", 5, NAN, "parameter 5 of 808 (layer 0's weights) is NaN"},
        {"an infinite bias", 30 * 17 + 3, INFINITY, "parameter 513 of 808 (layer 0's bias) is +infinity"},
        {"a -infinite weight of the last layer", 808 - 5 - 1, -INFINITY, "(layer 2's weights) is -infinity"},
        {"a NaN momentum", P0 + 7, NAN, "momentum value 7 of 808 (layer 0's weights) is NaN"},
    };
    for (size_t i = 0; i < sizeof(nonfinite) / sizeof(nonfinite[0]); i++) {
        memcpy(b, good, good_len);
        ck_put_f32(b + CK_HEADER_BYTES + 4 * nonfinite[i].at, nonfinite[i].value);
        reseal(b, good_len);
        expect_error(nonfinite[i].what, read_variant(b, good_len, err, sizeof(err)), err, nonfinite[i].expect);
    }
    {  // the writer refuses them too, and keeps the last good file
        float *bad = (float *)malloc(sizeof(float) * P0);
        memcpy(bad, model.params, sizeof(float) * P0);
        bad[100] = NAN;
        rc = checkpoint_write(ckpath, &meta, bad, model.mbuf, P0, err, sizeof(err));
        size_t n_now = 0;
        uint8_t *now = read_bytes(ckpath, &n_now);
        expect_error("writing a model with a NaN weight", rc, err,
                     "not written: parameter 100 of 808 (layer 0's weights) is NaN: a checkpoint holds finite numbers "
                     "only (the run diverged); the previous checkpoint is kept");
        check(now && n_now == good_len && memcmp(now, good, good_len) == 0 && leftover_temp_files() == 0,
              "... the previous checkpoint is unchanged, and no temporary file is left");
        free(now);
        free(bad);
    }

    // a huge model claimed by a short file: refused from the sizes, nothing allocated from the claim
    memcpy(b, good, good_len);
    uint64_t P = 65536ull * 65536 + 65536 + 65536ull * 5 + 5;
    ck_put_u32(b + CK_OFF_L, 2);
    ck_put_u32(b + CK_OFF_SIZES, 65536);
    ck_put_u32(b + CK_OFF_SIZES + 4, 65536);
    ck_put_u32(b + CK_OFF_SIZES + 8, 5);
    ck_put_u32(b + CK_OFF_SIZES + 12, 0);
    ck_put_u64(b + CK_OFF_NUM_PARAMS, P);
    ck_put_u64(b + CK_OFF_FILE_BYTES, CK_HEADER_BYTES + 8 * P + 4);
    reseal(b, good_len);
    snprintf(want, sizeof(want), "truncated: the file has %zu of the %llu bytes its header describes", good_len,
             (unsigned long long)(CK_HEADER_BYTES + 8 * P + 4));
    expect_error("a 34 GB model claimed by a 19 KB file", read_variant(b, good_len, err, sizeof(err)), err, want);
    free(b);

    // not files
    Checkpoint ck;
    rc = checkpoint_read(tmpdir, &ck, err, sizeof(err));
    expect_error("a directory", rc, err, "is a directory, not a checkpoint file");
    char fifo[600];
    snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
    if (mkfifo(fifo, 0600) == 0) {
        rc = checkpoint_read(fifo, &ck, err, sizeof(err));  // must not hang
        expect_error("a FIFO", rc, err, "is a FIFO (named pipe), not a checkpoint file");
        unlink(fifo);
    } else {
        skip("a FIFO: mkfifo failed: %s", strerror(errno));
    }
    // devices: /dev/zero would never end, /dev/null is empty; both are named as what they are
    rc = checkpoint_read("/dev/zero", &ck, err, sizeof(err));
    expect_error("/dev/zero", rc, err, "/dev/zero: is a device, not a checkpoint file");
    rc = checkpoint_read("/dev/null", &ck, err, sizeof(err));
    expect_error("/dev/null", rc, err, "/dev/null: is a device, not a checkpoint file");
    snprintf(fifo, sizeof(fifo), "%s/zero-link.bin", tmpdir);
    if (symlink("/dev/zero", fifo) == 0) {
        rc = checkpoint_read(fifo, &ck, err, sizeof(err));
        expect_error("a link to /dev/zero", rc, err, "zero-link.bin: is a device, not a checkpoint file");
    }
    snprintf(fifo, sizeof(fifo), "%s/no-such.bin", tmpdir);
    rc = checkpoint_read(fifo, &ck, err, sizeof(err));
    expect_error("a missing file", rc, err, "no-such.bin: cannot open the checkpoint: No such file or directory");
}


// ----------------------------------------------------------------------------
// 3. against the command line and the data

static void expect_contradiction(const Checkpoint *ck, const Config *c, const Dataset *ds, const char *what,
                                 const char *needle) {
    char err[1024];
    int rc = checkpoint_contradiction(ck, c, ds, err, sizeof(err));
    expect_error(what, rc, err, needle);
}

static void test_contradictions(void) {
    section("a checkpoint against the command line and the data");
    Checkpoint ck;
    char err[1024], want[1024];
    if (checkpoint_read(ckpath, &ck, err, sizeof(err)) != 0) {
        check(0, "reading the checkpoint: %s", err);
        return;
    }
    Config c = cfg;
    check(checkpoint_contradiction(&ck, &c, &train, err, sizeof(err)) == 0, "the run that wrote it: no contradiction");
    c.epochs = 10;
    check(checkpoint_contradiction(&ck, &c, &train, err, sizeof(err)) == 0, "-n 10 (more epochs): allowed");
    c.log_every = 1;
    snprintf(c.log_path, sizeof(c.log_path), "elsewhere.csv");
    snprintf(c.data_dir, sizeof(c.data_dir), "moved/data");
    check(checkpoint_contradiction(&ck, &c, &train, err, sizeof(err)) == 0, "another -v, -o and -d: allowed");

    // each flag that must agree
    snprintf(want, sizeof(want), "-b 32 contradicts the checkpoint %s, trained with -b 16: leave -b out to resume it, "
             "or start a new run without -r", ckpath);
    c = cfg, c.batch = 32;
    expect_contradiction(&ck, &c, &train, "-b 32", want);
    c = cfg, c.sizes[2] = 13;
    expect_contradiction(&ck, &c, &train, "-m 30,17,13,5", "-m 30,17,13,5 contradicts the checkpoint");
    c = cfg, c.L = 2, c.sizes[2] = 5;
    expect_contradiction(&ck, &c, &train, "-m 30,17,5", "-m 30,17,5 contradicts the checkpoint");
    c = cfg, c.act = ACT_RELU;
    expect_contradiction(&ck, &c, &train, "-a relu", "-a relu contradicts the checkpoint");
    c = cfg, c.lr = 0.1f;
    expect_contradiction(&ck, &c, &train, "-l 0.1", "-l 0.1 contradicts the checkpoint");
    c = cfg, c.momentum = 0.5f;
    expect_contradiction(&ck, &c, &train, "-k 0.5", "-k 0.5 contradicts the checkpoint");
    c = cfg, c.weight_decay = 0;
    expect_contradiction(&ck, &c, &train, "-w 0", "trained with -w 0.0001");
    c = cfg, c.seed = 1;
    expect_contradiction(&ck, &c, &train, "-s 1", "-s 1 contradicts the checkpoint");
    c = cfg, c.max_steps = 5;
    expect_contradiction(&ck, &c, &train, "-t 5", "-t 5 contradicts the checkpoint");
    ck.meta.epochs_done = 2;
    c = cfg, c.epochs = 1;
    expect_contradiction(&ck, &c, &train, "-n 1 after 2 epochs",
                         "has already done 2 epochs; -n is the total, at least 2");
    ck.meta.epochs_done = 1;

    // the data
    c = cfg;
    Dataset d = train;
    d.rows = 6, d.cols = 5;
    snprintf(c.data_dir, sizeof(c.data_dir), "other/data");
    snprintf(want, sizeof(want), "%s's model takes 1x5x6 images (30 inputs) but other/data holds 1x6x5 images", ckpath);
    expect_contradiction(&ck, &c, &d, "a dataset of another shape", want);
    d = train, d.num_classes = 6;
    expect_contradiction(&ck, &c, &d, "a dataset of 6 classes", "model has 5 classes but other/data has 6");
    d = train, d.n = 99;
    expect_contradiction(&ck, &c, &d, "a training set of 99 items",
                         "was trained on a test set (100 training images) but other/data holds a test set (99): "
                         "resume on the same data");
    check(strstr(err, "-H") == NULL, "... (a version-2 checkpoint records -H: the message need not name it)");
    // -H: recorded from version 2 on, taken by a resume that leaves it off, refused when it differs
    ck.meta.holdout = 0.25f;
    c = cfg, c.holdout = 0.1f;
    expect_contradiction(&ck, &c, &train, "-H 0.1 against a checkpoint of -H 0.25",
                         "-H 0.1 contradicts the checkpoint");
    config_defaults(&c, PROG_CPU);
    checkpoint_adopt_settings(&ck, &c, "r");
    check(c.holdout == 0.25f, "-r alone: -H from the checkpoint (%g)", c.holdout);
    config_defaults(&c, PROG_CPU);
    c.holdout = 0.1f;
    checkpoint_adopt_settings(&ck, &c, "rH");
    check(c.holdout == 0.1f, "-r with -H 0.1: -H 0.1 kept (and then refused above)");
    ck.meta.holdout = 0;
    c = cfg;
    snprintf(c.data_dir, sizeof(c.data_dir), "other/data");
    d = train;
    snprintf(d.name, sizeof(d.name), "Fashion-MNIST");
    expect_contradiction(&ck, &c, &d, "another dataset of the same size", "holds Fashion-MNIST (100)");
    d.n = 37;
    check(checkpoint_data_contradiction(&ck, &d, "other/data", 0, err, sizeof(err)) == 0,
          "-e on another dataset of the same shape and classes: allowed");
    Checkpoint colour = ck;
    colour.meta.channels = 3, colour.meta.rows = 2, colour.meta.cols = 5, colour.meta.planar = 1;
    d = train, d.channels = 3, d.rows = 2, d.cols = 5, d.planar = 0;
    expect_contradiction(&colour, &c, &d, "planar model, interleaved data",
                         "reads its 3 channels as planes (RRR..GGG..BBB) but other/data stores them interleaved");

    // the flags a resume leaves off come from the checkpoint
    char *argv[] = {(char *)"prog", (char *)"-r", (char *)"ck.bin", (char *)"-n", (char *)"5", (char *)"-c",
                    (char *)"ck.bin", NULL};
    char given[128];
    flags_given(7, argv, given, sizeof(given));
    check(strcmp(given, "rnc") == 0, "flags_given(-r ck.bin -n 5 -c ck.bin) = \"%s\"", given);
    config_defaults(&c, PROG_CPU);
    c.epochs = 5;
    checkpoint_adopt_settings(&ck, &c, given);
    check(c.L == 3 && c.sizes[1] == 17 && c.sizes[2] == 12 && c.act == ACT_TANH && c.batch == 16 && c.lr == 0.05f &&
              c.momentum == 0.9f && c.weight_decay == 1e-4f && c.seed == 4242 && c.epochs == 5 && !c.sizes_given,
          "-r ck.bin -n 5: -m -a -b -l -k -w -s from the checkpoint, -n 5 kept");
    check(checkpoint_contradiction(&ck, &c, &train, err, sizeof(err)) == 0, "... and then no contradiction");
    config_defaults(&c, PROG_CPU);
    checkpoint_adopt_settings(&ck, &c, "rb");  // -b given: its default 64 stays, and contradicts
    expect_contradiction(&ck, &c, &train, "-r ck.bin -b 64", "-b 64 contradicts the checkpoint");
    config_defaults(&c, PROG_CPU);
    checkpoint_adopt_settings(&ck, &c, NULL);
    check(c.epochs == 3, "-r alone: -n from the checkpoint (3)");
    checkpoint_free(&ck);
}

// ----------------------------------------------------------------------------
// 4. failed writes

static void test_failed_writes(void) {
    section("failed writes leave the last good checkpoint");
    char err[1024] = "", path[700];
    int rc;
    snprintf(path, sizeof(path), "%s/no-such-dir/ck.bin", tmpdir);
    rc = checkpoint_write(path, &meta, model.params, model.mbuf, model.num_params, err, sizeof(err));
    expect_error("a directory that does not exist", rc, err, "no-such-dir does not exist; no checkpoint was written");
    snprintf(path, sizeof(path), "%s/ck.bin/x.bin", tmpdir);
    rc = checkpoint_write(path, &meta, model.params, model.mbuf, model.num_params, err, sizeof(err));
    expect_error("a file where the directory should be", rc, err, "is not a directory");
    rc = checkpoint_write(tmpdir, &meta, model.params, model.mbuf, model.num_params, err, sizeof(err));
    expect_error("a directory as the destination", rc, err, "is a directory");

    // a full disk: the file size limit makes the write fail part way (EFBIG, as ENOSPC would)
    CheckpointMeta later = meta;
    later.steps_total = 11;
    int fds[2];
    if (pipe(fds) != 0) {
        check(0, "pipe: %s", strerror(errno));
        return;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit lim = {8192, 8192};
        setrlimit(RLIMIT_FSIZE, &lim);
        rc = checkpoint_write(ckpath, &later, model.params, model.mbuf, model.num_params, err, sizeof(err));
        ssize_t w = write(fds[1], err, strlen(err) + 1);
        (void)w;
        _exit(rc == -1 ? 0 : 1);
    }
    close(fds[1]);
    memset(err, 0, sizeof(err));
    ssize_t got = read(fds[0], err, sizeof(err) - 1);
    (void)got;
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    check(WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(err, "File too large") &&
              strstr(err, "the previous checkpoint is kept"),
          "a write that fails part way: -1 and \"%s\"", err);
    size_t n = 0;
    uint8_t *now = read_bytes(ckpath, &n);
    check(now && n == good_len && memcmp(now, good, n) == 0, "the last good checkpoint is unchanged, byte for byte");
    free(now);
    check(leftover_temp_files() == 0, "no temporary file is left behind");

    if (geteuid() == 0) {
        skip("an unwritable directory: running as root, where directory permissions do not apply");
    } else {
        char dir[600];
        snprintf(dir, sizeof(dir), "%s/readonly", tmpdir);
        mkdir(dir, 0700);
        snprintf(path, sizeof(path), "%s/ck.bin", dir);
        rc = checkpoint_write(path, &meta, model.params, model.mbuf, model.num_params, err, sizeof(err));
        chmod(dir, 0500);
        rc = checkpoint_write(path, &later, model.params, model.mbuf, model.num_params, err, sizeof(err));
        expect_error("an unwritable directory", rc, err, "the previous checkpoint is kept");
        now = read_bytes(path, &n);
        check(now && n == good_len && memcmp(now, good, n) == 0, "... and the checkpoint in it is unchanged");
        free(now);
        chmod(dir, 0700);
    }
}

// ----------------------------------------------------------------------------
// 5. the report of -e and the line of -p

static char *print_to_string(void (*fn)(FILE *)) {
    FILE *f = tmpfile();
    fn(f);
    long n = ftell(f);
    rewind(f);
    char *s = (char *)calloc((size_t)n + 1, 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static void print_small_report(FILE *f) {
    char names[3][CLASS_NAME_LEN] = {"cat", "dog", "hippopotamus"};
    const uint8_t labels[10] = {0, 0, 0, 0, 1, 1, 1, 2, 2, 2};
    const int pred[10] = {0, 0, 1, 2, 1, 1, 0, 2, 2, 1};
    eval_report_print(f, "tiny test set", 0.91234, labels, pred, 10, 3, &names[0][0]);
}
static void print_same_cuts(FILE *f) {
    char names[2][CLASS_NAME_LEN] = {"class_a", "class_b"};
    const uint8_t labels[3] = {0, 1, 1};
    const int pred[3] = {0, 1, 0};
    eval_report_print(f, "cuts", 0.5, labels, pred, 3, 2, &names[0][0]);
}
static void print_many_classes(FILE *f) {
    uint8_t labels[21];
    int pred[21];
    for (int i = 0; i < 21; i++) labels[i] = (uint8_t)i, pred[i] = i % 20;
    eval_report_print(f, "many", 0.1, labels, pred, 21, 21, NULL);
}
static void print_top3(FILE *f) {
    static const char *const fashion[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                            "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};
    char names[10][CLASS_NAME_LEN];
    for (int c = 0; c < 10; c++) snprintf(names[c], CLASS_NAME_LEN, "%s", fashion[c]);
    float probs[10] = {0.001f, 0, 0, 0.002f, 0, 0.052f, 0.003f, 0.931f, 0, 0.011f};
    print_top_classes(f, "predict.png", probs, 10, &names[0][0], 3);
    float logits[2] = {0, 0}, two[2];
    softmax_probs(logits, 2, two);
    print_top_classes(f, "two.png", two, 2, NULL, 3);
}

static void test_report(void) {
    section("the report of -e, the line of -p");
    const char *want =
        "tiny test set: 10 images, 3 classes\n"
        "test loss 0.9123 | test accuracy 60.00% (6 of 10)\n"
        "\n"
        "per class:\n"
        "  #  class         accuracy  correct  items  most often predicted instead\n"
        "  0  cat             50.00%        2      4  dog (1, 25.00%)\n"
        "  1  dog             66.67%        2      3  cat (1, 33.33%)\n"
        "  2  hippopotamus    66.67%        2      3  dog (1, 33.33%)\n"
        "\n"
        "confusion matrix: one row per true class, one column per predicted class\n"
        "          cat   dog hippo\n"
        "  cat       2     1     1\n"
        "  dog       1     2     0\n"
        "  hippo     0     1     2\n"
        "key: hippo hippopotamus\n";
    char *got = print_to_string(print_small_report);
    check(strcmp(got, want) == 0, "a 3-class report, exact text%s%s", strcmp(got, want) ? ":\n" : "",
          strcmp(got, want) ? got : "");
    free(got);
    got = print_to_string(print_same_cuts);
    check(strstr(got, "\n            0     1\n"
                      "  0         1     0\n"
                      "  1         1     1\n"
                      "key: 0 class_a | 1 class_b\n") != NULL,
          "names that cut to the same label (class_a, class_b): the class numbers, and a key");
    free(got);
    got = print_to_string(print_many_classes);
    check(strstr(got, "confusion matrix omitted: 21 classes (it is printed for up to 20)\n") != NULL &&
              strstr(got, " 20  20        0.00%        0      1  0 (1, 100.00%)\n") != NULL,
          "21 classes: the per-class table, and the matrix omitted");
    free(got);
    got = print_to_string(print_top3);
    check(strcmp(got, "predict.png: 1. Sneaker 93.1%  2. Sandal 5.2%  3. Ankle boot 1.1%\n"
                      "two.png: 1. 0 50.0%  2. 1 50.0%\n") == 0,
          "the top-3 line of -p: \"%.*s\"", (int)strcspn(got, "\n"), got);
    free(got);
}

// ----------------------------------------------------------------------------
// 6. signals

static void test_signals(void) {
    section("SIGINT, SIGTERM, SIGHUP and SIGPIPE");
    int sigs[4][2] = {{SIGINT, SIGINT}, {SIGTERM, SIGINT}, {SIGHUP, SIGHUP}, {SIGPIPE, SIGPIPE}};
    for (int t = 0; t < 4; t++) {
        fflush(stdout);
        int fds[2];
        if (pipe(fds) != 0) return;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            stop_signals_install();
            char seen = (char)(stop_requested() == 0);
            raise(sigs[t][0]);
            seen = (char)(seen && stop_requested() == sigs[t][0]);  // still alive, the flag set
            ssize_t w = write(fds[1], &seen, 1);
            (void)w;
            raise(sigs[t][1]);  // the default action again: this kills (SIGPIPE: ignored from now on)
            _exit(3);
        }
        close(fds[1]);
        char seen = 0;
        ssize_t got = read(fds[0], &seen, 1);
        close(fds[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        check(got == 1 && seen == 1, "the first %s sets the flag and the program goes on",
              stop_signal_name(sigs[t][0]));
        if (sigs[t][0] == SIGPIPE)
            check(WIFEXITED(status) && WEXITSTATUS(status) == 3,
                  "a second SIGPIPE is ignored: writes to the closed stdout fail quietly until the run stops");
        else
            check(WIFSIGNALED(status) && WTERMSIG(status) == sigs[t][1], "a second signal (%s) kills it at once",
                  stop_signal_name(sigs[t][1]));
    }
    check(stop_exit_code(SIGINT) == 130 && stop_exit_code(SIGTERM) == 143 && stop_exit_code(SIGHUP) == 129 &&
              stop_exit_code(SIGPIPE) == 141,
          "exit codes 128 + the signal: SIGINT 130, SIGTERM 143, SIGHUP 129, SIGPIPE 141");
    char text[2][512];
    stop_text(text[0], sizeof(text[0]), SIGINT, 2, 350, "ck.bin", 1);
    stop_text(text[1], sizeof(text[1]), SIGPIPE, 1, 7, NULL, 0);
    check(strcmp(text[0], "stopped by SIGINT after epoch 2 step 350; checkpoint written to ck.bin "
                          "(resume with -r ck.bin)") == 0 &&
              strcmp(text[1], "stopped by SIGPIPE (stdout was closed) after epoch 1 step 7; no checkpoint written "
                              "(-c FILE keeps one)") == 0,
          "the message: \"%s\"", text[0]);
}

// ----------------------------------------------------------------------------

int main(void) {
    double t0 = now_seconds();
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/mlpcu_test_checkpoint_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    test_round_trip();
    test_damaged();
    test_contradictions();
    test_failed_writes();
    test_report();
    test_signals();
    model_free_cpu(&model);
    dataset_free(&train);
    free(good);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (getenv("KEEP_TMP")) printf("\n(KEEP_TMP: the files are in %s)", tmpdir);
    else if (system(cmd) != 0) printf("(could not remove %s)\n", tmpdir);
    printf("\n(%.1f s)", now_seconds() - t0);
    return test_exit();
}
