/*
run/use.h: using a trained model, the same for the three trainers (-e, -p, -i).

    -e FILE            evaluate the checkpoint's model on the test set of -d: loss, accuracy,
                       per-class accuracy, the confusion matrix (run/report.h)
    -e FILE -i GRID    ... and a PNG grid of the misclassified test images (data/images.h)
    -e FILE -p IMAGE   classify pictures (PNG, JPG, BMP) instead: each one's top 3 classes, the
                       picture prepared as the model's training data was (data/images.h)

The trainer builds the model the checkpoint describes, loads the checkpoint's parameters into it,
and gives a function that runs the forward pass on rows of input floats (on its own device):

    Use u;
    use_begin(&u, &cfg, PROG_CPU);                        // the checkpoint; cfg's sizes and activation
    ModelCPU m; model_build_cpu(&m, cfg.sizes, cfg.L, cfg.act, USE_BATCH); copy u.ck.params in
    return use_run(&u, &m, forward_logits_cpu);           // the report, the grid, the pictures

Everything after the logits (the loss, the argmax, the counts) is computed here on the host, so
the three trainers print the same report from the same logits.
*/
#ifndef MLP_USE_H
#define MLP_USE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/dataset.h"
#include "../data/images.h"
#include "args.h"
#include "checkpoint.h"
#include "export.h"
#include "report.h"
#include "signals.h"
#include "train.h"
#include "../common/utils.h"

#define USE_BATCH 1000  // rows per forward pass

// Runs the model's forward pass on n <= USE_BATCH rows of input x (n, D) (host floats) and writes
// the logits (n, C) (host floats).
typedef void (*ForwardLogits)(void *model, const float *x, int n, float *logits);

typedef struct {
    Config *cfg;
    int prog;
    Checkpoint ck;
    Dataset train, test;  // loaded only to evaluate (not for -p alone)
    int have_data;
    int export_only;      // -E without -d, -p or -i: nothing to do after the export
} Use;

// Reads -e's checkpoint (exit 1 when bad) and takes its model: -m and -a, when given, must agree
// with it (exit 2). Then, unless only pictures are to be classified, loads -d's data and checks that
// the model fits it (exit 2 when it does not).
static inline void use_begin(Use *u, Config *c, int prog) {
    memset(u, 0, sizeof(*u));
    u->cfg = c;
    u->prog = prog;
    const char *argv0 = program_name(prog);
    char err[2048];
    if (c->resume_path[0] || c->ckpt_path[0]) usage_error(argv0, "-e evaluates a checkpoint: it takes no -r or -c");
    if (c->grid_path[0] && c->num_predict)
        usage_error(argv0, "-i draws the test set's mistakes and -p classifies pictures: give one of them");
    if (c->grid_path[0] && safe_write_check(c->grid_path, err, sizeof(err)) != 0) usage_error(argv0, "-i: %s", err);
    file_size_signal_ignore();  // a grid written past ulimit -f fails with a message (run/signals.h)
    export_check_flags(c, argv0);
    model_read_or_die(c->eval_path, c, &u->ck, 'e', argv0);  // a checkpoint, or a .safetensors file (run/export.h)
    const CheckpointMeta *m = &u->ck.meta;
    int same = c->L == m->L;
    for (int l = 0; same && l <= m->L; l++) same = c->sizes[l] == m->sizes[l];
    if (c->sizes_given && !same) usage_error(argv0, "-m contradicts the model in %s: leave -m out", c->eval_path);
    u->export_only = c->export_path[0] && !c->data_dir[0] && !c->num_predict && !c->grid_path[0];
    if (!u->export_only && !c->num_predict) {  // -E alone, or pictures only: no dataset needed
        // the data is compared with the model in the model's terms below: load_datasets_or_die fits
        // the sizes to the data (sizes_given 0), which then must agree with the checkpoint
        c->sizes_given = 0;
        load_datasets_or_die(c, argv0, &u->train, &u->test);
        u->have_data = 1;
        import_fit_data(&u->ck, &u->test, c->data_dir, argv0);  // an imported model: what its metadata left out
        if (checkpoint_data_contradiction(&u->ck, &u->test, c->data_dir, 0, err, sizeof(err)) != 0)
            usage_error(argv0, "%s: evaluate it on data of its own shape (-d)", err);
        memcpy(u->test.class_names, m->class_names, sizeof(m->class_names));  // the names the model learnt
    } else if (c->num_predict) {
        import_for_pictures(&u->ck);
    }
    c->L = m->L;
    memcpy(c->sizes, m->sizes, sizeof(int) * (size_t)(m->L + 1));
    c->act = m->act;
    c->sizes_given = 1;
    if (c->export_path[0]) export_model_or_die(c, &u->ck);
}

// what the checkpoint's model takes as a picture
static inline ImageSpec use_image_spec(const Use *u) {
    const CheckpointMeta *m = &u->ck.meta;
    ImageSpec s;
    s.kind = (DataKind)m->data_kind;
    s.mnist_digits = m->data_kind == DATA_IDX && strcmp(m->dataset_name, "MNIST") == 0;
    s.channels = m->channels;
    s.rows = m->rows;
    s.cols = m->cols;
    s.planar = m->planar;
    return s;
}

// The report of -e (and -i's grid), or -p's pictures. Returns the exit code: 0, or 1 when a
// picture or the grid could not be read or written (each says why in one line).
static inline int use_run(Use *u, void *model, ForwardLogits forward) {
    if (u->export_only) {  // -E alone: written already
        checkpoint_free(&u->ck);
        return 0;
    }
    const CheckpointMeta *m = &u->ck.meta;
    const int D = m->sizes[0], C = m->sizes[m->L];
    float *x = (float *)mallocCheck((size_t)USE_BATCH * D * sizeof(float));
    float *logits = (float *)mallocCheck((size_t)USE_BATCH * C * sizeof(float));
    float *probs = (float *)mallocCheck((size_t)C * sizeof(float));
    char err[2048];
    int rc = 0;
    // the model's input: pixel / 255 as the trainers compute it, or the imported model's own scaling
    const int plain = m->input_scale == 1.0f / 255.0f && m->input_offset == 0.0f;
    if (u->cfg->num_predict) {
        ImageSpec spec = use_image_spec(u);
        printf("%s: a %s model of %s (%d classes)\n", u->ck.path, m->dataset_name,
               m->channels == 3 ? "colour pictures" : "gray pictures", C);
        for (int i = 0; i < u->cfg->num_predict; i++) {
            const char *path = u->cfg->predict[i];
            ImagePrep prep;
            if (image_prepare_how(path, &spec, x, &prep, err, sizeof(err)) != 0) {
                fflush(stdout);
                fprintf(stderr, "error: %s\n", err);
                rc = 1;
                continue;
            }
            char how[600];
            image_prep_describe(&prep, &spec, how, sizeof(how));
            printf("%s: %s\n", path, how);
            if (prep.variance == 0) {
                fflush(stdout);
                fprintf(stderr, "warning: %s: the prepared picture is one flat value, with nothing to recognise: its "
                        "prediction means nothing\n", path);
            }
            for (int i = 0; !plain && i < D; i++) x[i] = roundf(x[i] * 255.0f) * m->input_scale + m->input_offset;
            forward(model, x, 1, logits);
            softmax_probs(logits, C, probs);
            print_top_classes(stdout, path, probs, C, &m->class_names[0][0], C < 3 ? C : 3);
        }
    } else {
        const Dataset *t = &u->test;
        int *pred = (int *)mallocCheck((size_t)t->n * sizeof(int));
        double total = 0;
        for (long start = 0; start < t->n; start += USE_BATCH) {
            int n = t->n - start < USE_BATCH ? (int)(t->n - start) : USE_BATCH;
            for (size_t i = 0; i < (size_t)n * D; i++) {
                uint8_t pixel = t->images[(size_t)start * D + i];
                x[i] = plain ? pixel / 255.0f : pixel * m->input_scale + m->input_offset;
            }
            forward(model, x, n, logits);
            for (int b = 0; b < n; b++) {  // each row's loss (logsumexp - the label's logit) and argmax
                const float *z = logits + (size_t)b * C;
                int best = 0;
                for (int c = 1; c < C; c++) best = z[c] > z[best] ? c : best;
                double sum = 0;
                for (int c = 0; c < C; c++) sum += exp((double)z[c] - z[best]);
                total += log(sum) + z[best] - z[t->labels[start + b]];
                pred[start + b] = best;
            }
        }
        eval_report_print_dataset(stdout, t, pred, total / t->n);
        if (u->cfg->grid_path[0]) {
            if (write_error_grid(u->cfg->grid_path, t, pred, 64, err, sizeof(err)) != 0) {
                fflush(stdout);
                fprintf(stderr, "error: %s\n", err);
                rc = 1;
            } else {
                printf("misclassified test images: %s\n", u->cfg->grid_path);
            }
        }
        free(pred);
        dataset_free(&u->train);
        dataset_free(&u->test);
    }
    free(x);
    free(logits);
    free(probs);
    checkpoint_free(&u->ck);
    return rc;
}

#endif // MLP_USE_H
