/*
Logging shared by the three trainers, so that they print the same lines: the boxed table of
settings printed at start, the one-line step log a person reads, and the CSV file a script
reads.

    epoch 1 step   100/938 | loss 0.5187 | 1.2340 ms/step | 51.9k samples/s
    epoch 1 done | 0.8431 s | 71.2k samples/s | test loss 0.4620 | test accuracy 83.41%
    final | Fashion-MNIST | test accuracy 86.12% | test loss 0.3871 | 4 epochs | 0.8431 s/epoch | CPU, 2 threads

On a terminal the step lines are one progress line, rewritten in place, with the epoch, the
loss averaged over the steps since the last line, the speed and the time left; into a file or
a pipe they are plain lines, one per -v steps, as above.

The CSV log (-o FILE; by default logs/PROGRAM_DATE-TIME_PID.csv, a new file for every run):
    # train_mlp_cpu: -d DIR -m 784,128,10 -a sigmoid -b 64 -l 0.1 -k 0.9 -w 0 -n 4 -s 1337 ...
    kind,epoch,step,global_step,loss,accuracy,ms,samples_per_s,mem_mb,note
    train   a logged step: the mean loss of the steps since the last one, ms per step over them
    eval    after each epoch (or at the end, with -H): test loss, test accuracy in [0,1], its ms
    val     after each epoch with -H: the validation set's loss and accuracy
    epoch   after each epoch: ms of training in that epoch (evaluation excluded)
    summary at the end: final test accuracy, peak memory in MB (device memory on the GPU)
    resume  a resumed run (-r) appending to the log of the run it continues; note: the checkpoint
    stop    the last row, however the run ended; note: why ("finished", "SIGINT ...", the error)
Every row is flushed as it is written, so a run that is killed keeps every row so far (only
kill -9 ends a run without its stop row). The file is locked while the run writes it: a second
run given the same -o is refused, not interleaved. A resumed run given an existing log of
mlp.cu appends to it, after a resume row; any other run replaces it.

Divergence: a run whose mean loss over a log interval is not finite, or above 3 ln(classes) --
three times the loss of a uniform guess, which is about where a freshly initialised model starts --
stops with exit 1 and a line naming the step; no checkpoint is written after it, so the last good
one stays. (A model that confident in wrong answers is not learning; a healthy run's loss falls
from ln(classes).)
*/
#ifndef MLP_LOG_H
#define MLP_LOG_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "../common/safe_write.h"  // safe_write_check: what an output path may be
#include "../common/utils.h"

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

// the rows every trainer prints; each adds its own (device, kernels) after them
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
    box_row("log file (-o)", "%s", c->log_path[0] ? c->log_path : "logs/, a new file for this run");
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
    char path[1024];
    int last_epoch;      // where the run is, for the stop row
    long last_step, last_global_step;
} CsvLog;

#define CSV_HEADER "kind,epoch,step,global_step,loss,accuracy,ms,samples_per_s,mem_mb,note"

static CsvLog *csv_open_log;  // the log being written, for the stop row of a run that ends by exit()
static inline void csv_stop(CsvLog *log, const char *note);

// atexit: a run that ends in die() or exit() (an error, a divergence) still gets its stop row,
// with the error's message as the note
static inline void csv_at_exit(void) {
    if (csv_open_log && csv_open_log->f) csv_stop(csv_open_log, die_message[0] ? die_message : "exit");
}

// 1 when the log at path ends in a header of this version's columns: a resumed run may append
static inline int csv_has_current_header(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char line[2048];
    int ok = 0;
    for (int i = 0; i < 2 && fgets(line, sizeof(line), f); i++) ok = i == 1 && strcmp(line, CSV_HEADER "\n") == 0;
    fclose(f);
    return ok;
}

// Opens the run's log for writing, line by line: -o's path, or a new name for this run. Refuses
// (exit 2, one line) a directory, a FIFO or device, a symbolic link, a directory that cannot be
// written, and a log another run is writing now (an exclusive lock, held until the run ends).
// A resumed run (-r) appends to an existing log of this format (after a resume row saying so);
// any other existing log is replaced.
static inline void csv_open(CsvLog *log, const Config *c, int prog, const char *settings) {
    if (c->log_path[0]) {
        snprintf(log->path, sizeof(log->path), "%s", c->log_path);
    } else {
        char stamp[32];
        time_t now = time(NULL);
        strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", localtime(&now));
        snprintf(log->path, sizeof(log->path), "logs/%s_%s_%d.csv", program_name(prog), stamp, (int)getpid());
        if (make_parent_dirs(log->path) != 0)
            die("-o FILE", "cannot create the directory of the log %s: %s", log->path, strerror(errno));
    }
    const char *argv0 = program_name(prog);
    char err[1200];
    if (safe_write_check(log->path, err, sizeof(err)) != 0) usage_error(argv0, "-o: %s", err);
    int fd = open(log->path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0666);
    struct stat st;
    if (fd < 0)
        usage_error(argv0, "-o: cannot open %s: %s", log->path,
                    errno == ELOOP ? "it is a symbolic link; give the file itself" : strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        usage_error(argv0, "-o: %s is not a regular file", log->path);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0)
        usage_error(argv0, "-o: another run is writing the log %s now; give this run another -o", log->path);
    int append = c->resume_path[0] && st.st_size > 0 && csv_has_current_header(log->path);
    if (!append && ftruncate(fd, 0) != 0) die("-o FILE", "cannot empty the log %s: %s", log->path, strerror(errno));
    if (append && lseek(fd, 0, SEEK_END) < 0) die("-o FILE", "cannot append to the log %s: %s", log->path, strerror(errno));
    log->f = fdopen(fd, append ? "a" : "w");
    if (!log->f) die("-o FILE", "cannot open the log %s: %s", log->path, strerror(errno));
    if (!append) {
        fprintf(log->f, "# %s: %s\n", argv0, settings);
        fprintf(log->f, CSV_HEADER "\n");
    }
    fflush(log->f);
    csv_open_log = log;
    static int registered = 0;
    if (!registered) registered = atexit(csv_at_exit) == 0;
}

// A CSV field: as it is, or in double quotes (doubled inside) when it holds a comma, a quote or a
// line break (a line break becomes a space: one row is one line)
static inline void csv_put_field(FILE *f, const char *s) {
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s == '\n' || *s == '\r' ? ' ' : *s, f);
    }
    fputc('"', f);
}

// one row with a note, flushed at once; empty fields for values that are < 0 (not applicable).
// A row that cannot be written ends the run (exit 1); the stop row never does (it is the last).
static inline void csv_row_note(CsvLog *log, const char *kind, int epoch, long step, long global_step, double loss,
                                double acc, double ms, double sps, double mem_mb, const char *note) {
    if (!log->f) return;
    log->last_epoch = epoch;
    log->last_step = step;
    log->last_global_step = global_step;
    fprintf(log->f, "%s,%d,%ld,%ld,", kind, epoch, step, global_step);
    double v[5] = {loss, acc, ms, sps, mem_mb};
    for (int i = 0; i < 5; i++) {
        if (v[i] >= 0) fprintf(log->f, i == 0 ? "%.6f" : "%.6g", v[i]);
        fputc(',', log->f);
    }
    csv_put_field(log->f, note);
    fputc('\n', log->f);
    if (fflush(log->f) != 0 && strcmp(kind, "stop") != 0) {
        int saved = errno;
        fclose(log->f);  // (the stop row could not be written either)
        log->f = NULL;
        die("free disk space, or a larger file-size limit (ulimit -f)", "cannot write the log %s: %s", log->path,
            strerror(saved));
    }
}

static inline void csv_row(CsvLog *log, const char *kind, int epoch, long step, long global_step, double loss,
                           double acc, double ms, double sps, double mem_mb) {
    csv_row_note(log, kind, epoch, step, global_step, loss, acc, ms, sps, mem_mb, "");
}

static inline void csv_close(CsvLog *log) {
    if (csv_open_log == log) csv_open_log = NULL;
    if (!log->f) return;
    FILE *f = log->f;
    log->f = NULL;
    fcloseCheck(f, log->path);  // (closing drops the lock)
}

// The last row, kind stop, with why the run ended in note; then closes the log. Never exits: a
// stop row that cannot be written is lost, and the run ends as it was ending.
static inline void csv_stop(CsvLog *log, const char *note) {
    if (csv_open_log == log) csv_open_log = NULL;
    if (!log->f) return;
    csv_row_note(log, "stop", log->last_epoch, log->last_step, log->last_global_step, -1, -1, -1, -1, -1, note);
    fclose(log->f);
    log->f = NULL;
}

// ----------------------------------------------------------------------------
// the lines every trainer prints, each with its CSV row

typedef struct {
    CsvLog csv;
    int B, epochs, steps;          // the run's shape: batch size, epochs, steps per epoch
    int tty;                       // stdout is a terminal: one progress line, rewritten in place
    double loss_sum;               // the losses since the last logged step ...
    int loss_count;                // ... and how many
    double chance_loss;            // ln(classes): the loss of a uniform guess
    double start_time;             // for the time left
    long steps_done, steps_to_do;  // steps of this run so far, and in all
    long global_step;              // steps of the whole training (a resumed run counts on)
} RunLog;

// settings: the run's flags as one line, for the CSV's first line
static inline void run_log_open(RunLog *r, const Config *c, int prog, int steps_per_epoch, int classes,
                                long steps_to_do, long global_step) {
    memset(r, 0, sizeof(*r));
    r->B = c->batch;
    r->epochs = c->epochs;
    r->steps = steps_per_epoch;
    r->tty = isatty(fileno(stdout));
    r->chance_loss = log((double)classes);
    r->start_time = now_seconds();
    r->steps_to_do = steps_to_do;
    r->global_step = global_step;
    char settings[1400], sizes[256];
    format_value(c, &ARGS[1], sizes, sizeof(sizes));  // ARGS[1] is -m
    snprintf(settings, sizeof(settings), "-d %s -m %s -a %s -b %d -l %g -k %g -w %g -n %d -s %llu -t %d -H %g%s%s",
             c->data_dir, sizes, ACT_NAMES[c->act], c->batch, c->lr, c->momentum, c->weight_decay, c->epochs,
             (unsigned long long)c->seed, c->max_steps, c->holdout, c->resume_path[0] ? " -r " : "", c->resume_path);
    if (prog == PROG_FAST) {
        size_t k = strlen(settings);
        snprintf(settings + k, sizeof(settings) - k, " -x %d -f %d", c->precision, c->path);
    }
    csv_open(&r->csv, c, prog, settings);
    if (c->resume_path[0]) {  // where the run continues: the step after the checkpoint's last
        char note[1600];
        snprintf(note, sizeof(note), "resumed from %s: %s", c->resume_path, settings);
        int steps = steps_per_epoch > 0 ? steps_per_epoch : 1;
        csv_row_note(&r->csv, "resume", (int)(global_step / steps) + 1, global_step % steps, global_step, -1, -1, -1,
                     -1, -1, note);
    }
}

// the loss of one step (the CPU, each step), or the sum of n steps' losses (the GPU, at a log line)
static inline void log_losses(RunLog *r, double sum, int n) {
    r->loss_sum += sum;
    r->loss_count += n;
    r->steps_done += n;
    r->global_step += n;
}

// A logged step: the mean loss of the steps since the last one, and the mean time per step. Ends
// the run (exit 1) when it has diverged (the rule at the top of this file).
static inline void log_step(RunLog *r, int epoch, int step, double ms_per_step) {
    double loss = r->loss_count ? r->loss_sum / r->loss_count : NAN;
    r->loss_sum = 0;
    r->loss_count = 0;
    double limit = 3 * r->chance_loss;  // (one class: the loss is 0, and nothing can diverge)
    if (!isfinite(loss) || (r->chance_loss > 0 && loss > limit)) {
        if (r->tty) printf("\n");
        r->csv.last_epoch = epoch;
        r->csv.last_step = step;
        r->csv.last_global_step = r->global_step;
        char value[160];
        if (isfinite(loss))
            snprintf(value, sizeof(value), "%.4g, above %.3g (3 ln(classes), three times a uniform guess's)", loss,
                     limit);
        else snprintf(value, sizeof(value), "%s: the weights overflowed", isnan(loss) ? "not a number" : "infinite");
        die("a smaller learning rate (-l)", "the run diverged at epoch %d step %d: the mean loss of the last steps is %s",
            epoch, step, value);
    }
    double sps = r->B / (ms_per_step / 1e3);
    char rate[32];
    format_rate(sps, rate, sizeof(rate));
    if (r->tty) {
        double elapsed = now_seconds() - r->start_time;
        double left = r->steps_done ? elapsed / r->steps_done * (r->steps_to_do - r->steps_done) : 0;
        printf("\repoch %d/%d step %5d/%d | loss %.4f | %.4f ms/step | %s samples/s | %.0f s left   ", epoch, r->epochs,
               step, r->steps, loss, ms_per_step, rate, left);
    } else {
        printf("epoch %d step %5d/%d | loss %.4f | %.4f ms/step | %s samples/s\n", epoch, step, r->steps, loss,
               ms_per_step, rate);
    }
    fflush(stdout);
    csv_row(&r->csv, "train", epoch, step, r->global_step, loss, -1, ms_per_step, sps, -1);
}

// An epoch's training time (evaluation excluded), and the evaluation after it: which is "test"
// or "val" (with -H), its loss and accuracy, and the ms it took.
static inline void log_epoch(RunLog *r, int epoch, double train_s, long samples, const char *which, double loss,
                             double acc, double eval_ms) {
    if (r->tty) printf("\n");
    printf("epoch %d done | %.4f s | %.1fk samples/s | %s loss %.4f | %s accuracy %.2f%%\n", epoch, train_s,
           samples / train_s / 1e3, which, loss, which, 100 * acc);
    fflush(stdout);
    csv_row(&r->csv, "epoch", epoch, r->steps, r->global_step, -1, -1, 1e3 * train_s, samples / train_s, -1);
    csv_row(&r->csv, strcmp(which, "val") == 0 ? "val" : "eval", epoch, r->steps, r->global_step, loss, acc, eval_ms,
            -1, -1);
}

// the run's last line and CSV row; mem_mb < 0: not measured (the CPU); device: where it ran
static inline void log_final(RunLog *r, const Config *c, const char *dataset, double test_loss, double test_acc,
                             double train_s_total, int epochs_run, double mem_mb, const char *device) {
    csv_row(&r->csv, "summary", c->epochs, r->steps, r->global_step, test_loss, test_acc, 1e3 * train_s_total, -1,
            mem_mb);
    csv_stop(&r->csv, "finished");
    printf("final | %s | test accuracy %.2f%% | test loss %.4f | %d epoch%s | %.4f s/epoch", dataset, 100 * test_acc,
           test_loss, c->epochs, c->epochs == 1 ? "" : "s", epochs_run ? train_s_total / epochs_run : 0.0);
    if (mem_mb >= 0) printf(" | %.1f MB", mem_mb);
    printf(" | %s\n", device);
    printf("log: %s\n", r->csv.path);
}

#endif // MLP_LOG_H
