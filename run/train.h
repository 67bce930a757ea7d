/*
run/train.h: what the three trainers' main functions share around the training loop, so
that each trainer file keeps only its own model and its loop: loading the data, the plan of
an epoch's steps, the settings box.
*/
#ifndef MLP_TRAIN_H
#define MLP_TRAIN_H

#include <limits.h>
#include <stdlib.h>

#include "../data/dataset.h"
#include "args.h"
#include "log.h"
#include "../common/rng.h"
#include "../common/safe_write.h"
#include "../common/utils.h"

// The rule for outputs (common/safe_write.h's output_check) applied to this run's: -o (or the
// default log's directory), -c and -i, against the run's inputs (-r, -e, -p and the data directory
// with every file in it) and against each other. -c may name -r's checkpoint: resuming in place.
// Refused: exit 2, one line naming the flag and the file. Called once the data directory is known,
// before anything is loaded.
static inline void outputs_check(const Config *c, const char *prog) {
    if (c->writes_nothing) return;
    const char *inputs[MAX_PREDICT + 3];
    int n = 0;
    inputs[n++] = c->eval_path;
    for (int i = 0; i < c->num_predict; i++) inputs[n++] = c->predict[i];
    inputs[n++] = c->resume_path;
    inputs[n] = NULL;
    char err[3000];
    const int eval = c->eval_path[0] != '\0';  // -e writes no log
    if (!eval && !c->log_path[0] && path_inside("logs/run.csv", c->data_dir))
        usage_error(prog, "the default log directory logs/ is inside the data directory %s, where outputs never go: "
                    "name the log with -o FILE outside it", c->data_dir);
    if (!eval && c->log_path[0] &&
        output_check("-o", c->log_path, OUT_LOG, inputs, c->data_dir, c->replace, err, sizeof(err)) != 0)
        usage_error(prog, "%s", err);
    if (c->ckpt_path[0]) {
        inputs[n - 1] = path_same_file(c->ckpt_path, c->resume_path) ? "" : c->resume_path;  // resuming in place
        int rc = output_check("-c", c->ckpt_path, OUT_CHECKPOINT, inputs, c->data_dir, c->replace, err, sizeof(err));
        inputs[n - 1] = c->resume_path;
        if (rc != 0) usage_error(prog, "%s", err);
    }
    if (c->grid_path[0] &&
        output_check("-i", c->grid_path, OUT_PNG, inputs, c->data_dir, c->replace, err, sizeof(err)) != 0)
        usage_error(prog, "%s", err);
    if (c->export_path[0] &&
        output_check("-E", c->export_path, output_kind_of_export(c->export_path), inputs, c->data_dir, c->replace, err,
                     sizeof(err)) != 0)
        usage_error(prog, "%s", err);
    // two outputs, one file: one would replace the other
    const struct {
        char flag;
        const char *path;
    } out[] = {{'o', eval ? "" : c->log_path}, {'c', c->ckpt_path}, {'i', c->grid_path}, {'E', c->export_path}};
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++) {
            char a[SAFE_PATH_LEN], b[SAFE_PATH_LEN];
            if (out[i].path[0] && out[j].path[0] &&
                (path_same_file(out[i].path, out[j].path) ||
                 (path_resolve(out[i].path, a, sizeof(a)) == 0 && path_resolve(out[j].path, b, sizeof(b)) == 0 &&
                  strcmp(a, b) == 0)))
                usage_error(prog, "-%c %s and -%c %s name the same file: give each output its own", out[i].flag,
                            out[i].path, out[j].flag, out[j].path);
        }
}

// What every trainer does first: find the data, load both splits, and fit the model to them:
// without -m, the first size is the data's inputs and the last its number of classes; an explicit
// -m must agree with both. Exits 1 on a bad file, 2 when -m does not match the data.
static inline void load_datasets_or_die(Config *c, const char *prog, Dataset *train, Dataset *test) {
    char err[1400];
    const int chosen = c->data_dir[0] != '\0';  // -d was given: the fix is the user's -d, not `make data`
    if (!chosen) {
        char why[3000];
        const char *dir = dataset_find_default(why, sizeof(why));
        if (!dir) die("make data (or -d DIR)", "%s", why);
        if (why[0]) printf("note: %s\n", why);  // a default place skipped, and why
        snprintf(c->data_dir, sizeof(c->data_dir), "%s", dir);
    }
    outputs_check(c, prog);
    if (dataset_load_both(c->data_dir, train, test, err, sizeof(err)) != 0)
        die(chosen ? "check the files in -d's directory, or name another with -d DIR" : "make data", "%s", err);
    int inputs = dataset_dim(train), classes = train->num_classes;
    if (!c->sizes_given) {
        c->sizes[0] = inputs;
        c->sizes[c->L] = classes;
    }
    if (c->sizes[0] != inputs)
        usage_error(prog, "-m: the first size is %d but the images have %d inputs (%dx%dx%d); use -m %d,...",
                    c->sizes[0], inputs, train->channels, train->rows, train->cols, inputs);
    if (c->sizes[c->L] != classes)
        usage_error(prog, "-m: the last size is %d but %s has %d classes; use -m ...,%d", c->sizes[c->L],
                    c->data_dir, classes, classes);
}

// -H: moves a share frac of the training set into val, the validation set: the items at the front
// of a permutation drawn from the seed (its own generator, so the epochs' shuffles are unchanged).
// The rest stay in train, in their order. frac 0: val is empty (n = 0).
static inline void split_holdout(Dataset *train, Dataset *val, float frac, uint64_t seed) {
    *val = *train;
    val->n = 0;
    val->images = val->labels = NULL;
    int k = (int)((double)frac * train->n);
    if (k == 0) return;
    if (k >= train->n)
        die("a smaller -H", "-H %g holds out all %d training items, leaving none to train on", frac, train->n);
    size_t D = (size_t)dataset_dim(train);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)train->n);
    uint8_t *held = (uint8_t *)callocCheck((size_t)train->n, 1);
    Rng rng;
    rng_seed(&rng, seed, 2);
    rng_permutation(&rng, perm, train->n);
    for (int i = 0; i < k; i++) held[perm[i]] = 1;
    val->images = (uint8_t *)mallocCheck((size_t)k * D);
    val->labels = (uint8_t *)mallocCheck((size_t)k);
    int nv = 0, nt = 0;
    for (int i = 0; i < train->n; i++) {  // in place: item i moves to position nt <= i
        uint8_t *dst = held[i] ? val->images + (size_t)nv * D : train->images + (size_t)nt * D;
        memmove(dst, train->images + (size_t)i * D, D);
        if (held[i]) val->labels[nv++] = train->labels[i];
        else train->labels[nt++] = train->labels[i];
    }
    train->n = nt;
    val->n = nv;
    free(perm);
    free(held);
}

// An epoch: ceil(n / B) steps of B rows, the last one smaller when B does not divide n; with
// -t, at most max_steps steps of B rows.
typedef struct {
    int steps;     // steps per epoch
    int last_bs;   // rows of the last step
    long samples;  // rows of the whole epoch
} EpochPlan;

static inline EpochPlan epoch_plan(int n, int B, int max_steps) {
    EpochPlan p;
    p.steps = (int)(((long long)n + B - 1) / B);  // (in 64 bits: n + B - 1 can pass INT_MAX)
    p.last_bs = (int)((long long)n - (long long)(p.steps - 1) * B);
    if (max_steps && max_steps < p.steps) {
        p.steps = max_steps;
        p.last_bs = B;
    }
    p.samples = (long)(p.steps - 1) * B + p.last_bs;
    return p;
}

// rows of step s (0-based) of the epoch
static inline int epoch_batch_size(const EpochPlan *p, int s, int B) { return s == p->steps - 1 ? p->last_bs : B; }

// The boxed table of settings every trainer prints first; the trainer adds its own rows (the
// device, its kernels) and closes the box with box_rule().
static inline void box_settings(const char *program, const char *what, const Config *c, const Dataset *train,
                                const Dataset *test, size_t num_params, int steps) {
    box_rule();
    box_row(program, "%s", what);
    box_rule();
    box_row("dataset", "%s, %d classes", train->name, train->num_classes);
    box_row("data directory (-d)", "%s", c->data_dir);
    box_row("train / test images", "%d / %d of %dx%d%s", train->n, test->n, train->rows, train->cols,
            train->channels == 3 ? " RGB" : train->channels == 1 ? "" : "x?");
    if (c->holdout > 0) box_row("validation set (-H)", "%.0f%% of the training set, held out", 100 * c->holdout);
    box_model_rows(c);
    box_row("parameters", "%zu (%.2f MB)", num_params, num_params * sizeof(float) / 1e6);
    box_row("steps per epoch", "%d", steps);
}

#endif // MLP_TRAIN_H
