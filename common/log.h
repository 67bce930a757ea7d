/*
Logging shared by both trainers: the boxed table of settings printed at start, the one-line
step log a person reads, and the CSV file a script reads.

    step   100/937 | loss 0.5187 | 1.234 ms/step | 51.9k samples/s

CSV columns (one header line, then one row per event):
    kind,epoch,step,loss,accuracy,ms,samples_per_s,mem_mb
    train   a logged step: loss of that step, ms per step since the last log line
    eval    after each epoch: test loss, test accuracy in [0,1], ms the evaluation took
    epoch   after each epoch: ms of training in that epoch (evaluation excluded)
    summary at the end: final test accuracy, peak memory in MB (device memory on the GPU)
The CSV is written to FILE.tmp and renamed to FILE when the run ends, so an earlier log of
the same name survives a run that fails.
*/
#ifndef MLP_LOG_H
#define MLP_LOG_H

#include <stdarg.h>
#include <stdio.h>

#include "args.h"
#include "utils.h"

// ----------------------------------------------------------------------------
// the settings box

#define BOX_KEY 24
#define BOX_VAL 56
static inline void box_rule(void) {
    printf("+");
    for (int i = 0; i < BOX_KEY + 2; i++) printf("-");
    printf("+");
    for (int i = 0; i < BOX_VAL + 2; i++) printf("-");
    printf("+\n");
}
static inline void box_row(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void box_row(const char *key, const char *fmt, ...) {
    char val[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(val, sizeof(val), fmt, ap);
    va_end(ap);
    size_t n = strlen(val);
    if (n > BOX_VAL) {  // keep the box straight: elide the middle of long values (paths)
        memmove(val + BOX_VAL / 2 + 3, val + n - (BOX_VAL - BOX_VAL / 2 - 3), BOX_VAL - BOX_VAL / 2 - 3 + 1);
        memcpy(val + BOX_VAL / 2, "...", 3);
    }
    printf("| %-*s | %-*s |\n", BOX_KEY, key, BOX_VAL, val);
}

// the rows both trainers print; each adds its own (device, threads) around them
static inline void box_model_rows(const Config *c) {
    char sizes[256];
    format_value(c, &ARGS[1], sizes, sizeof(sizes));  // ARGS[1] is -m
    box_row("layer sizes (-m)", "%s", sizes);
    box_row("hidden activation (-a)", "%s", ACT_NAMES[c->act]);
    box_row("output", "softmax + cross-entropy, mean over the batch");
    box_row("batch size (-b)", "%d", c->batch);
    box_row("learning rate (-l)", "%g", c->lr);
    box_row("momentum (-k)", "%g", c->momentum);
    box_row("weight decay (-w)", "%g", c->weight_decay);
    box_row("epochs (-n)", "%d", c->epochs);
    if (c->max_steps) box_row("steps per epoch (-t)", "at most %d", c->max_steps);
    box_row("seed (-s)", "%llu", (unsigned long long)c->seed);
    box_row("log file (-o)", "%s", c->log_path);
}

// "51.9k", "3.1M": samples per second for the step log
static inline void format_rate(double x, char *out, size_t n) {
    if (x >= 1e6) snprintf(out, n, "%.2fM", x / 1e6);
    else if (x >= 1e3) snprintf(out, n, "%.1fk", x / 1e3);
    else snprintf(out, n, "%.0f", x);
}

// ----------------------------------------------------------------------------
// the CSV log

typedef struct {
    FILE *f;
    char path[1024], tmp[1040];
} CsvLog;

static inline void csv_open(CsvLog *log, const char *path) {
    snprintf(log->path, sizeof(log->path), "%s", path);
    snprintf(log->tmp, sizeof(log->tmp), "%s.tmp", path);
    if (make_parent_dirs(log->tmp) != 0) die("a different -o", "cannot create the directory for %s", path);
    log->f = fopenCheck(log->tmp, "w");
    fprintf(log->f, "kind,epoch,step,loss,accuracy,ms,samples_per_s,mem_mb\n");
}

// empty fields are written for values that are < 0 (not applicable)
static inline void csv_row(CsvLog *log, const char *kind, int epoch, long step, double loss, double acc, double ms,
                    double sps, double mem_mb) {
    fprintf(log->f, "%s,%d,%ld,", kind, epoch, step);
    double v[5] = {loss, acc, ms, sps, mem_mb};
    for (int i = 0; i < 5; i++) {
        if (v[i] >= 0) fprintf(log->f, i == 0 ? "%.6f" : "%.6g", v[i]);
        fprintf(log->f, i < 4 ? "," : "\n");
    }
}

static inline void csv_close(CsvLog *log) {
    fcloseCheck(log->f, log->tmp);
    if (rename(log->tmp, log->path) != 0)
        die("check permissions", "cannot rename %s to %s: %s", log->tmp, log->path, strerror(errno));
}

#endif // MLP_LOG_H
