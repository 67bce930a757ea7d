/*
run/run.h: a training run's life around its steps, the same for the three trainers: starting
fresh or resuming a checkpoint (-r), drawing each epoch's permutation, writing checkpoints (-c)
after every epoch (under a lock, so that two runs never share one), and stopping cleanly on
Ctrl-C, SIGTERM, SIGHUP or SIGPIPE (run/signals.h). Each trainer calls it in a line or
two; the model, its kernels and the loop's arithmetic stay in the trainer.

    Run run;
    run_begin(&run, &cfg, argc, argv, PROG_CPU);      // before loading the data: -r's settings
    load_datasets_or_die(...); build the model
    const float *p = run_start(&run, &train, &model, fetch, num_params, &mbuf);
    if (p) copy p and mbuf into the model; else initialise it from the seed
    for (epoch = run.first_epoch; epoch <= cfg.epochs; epoch++) {
        run_epoch(&run, perm, train.n);              // this epoch's permutation
        for (step = run_first_step(&run, epoch); step <= steps; step++) {
            ... the step ...
            run_after_steps(&run, &log, epoch, step, steps, 1);   // exits 128 + the signal when asked to stop
        }
        evaluate; log; run_end_of_epoch(&run, epoch);            // -c: the checkpoint
    }
    run_finish(&run);

Resuming is exact: the checkpoint holds the shuffle generator as it was when the epoch in
progress began, so the resumed run draws the same permutation and skips the steps already done;
with the parameters and the momentum restored, it ends bitwise identical to a run never stopped.
*/
#ifndef MLP_RUN_H
#define MLP_RUN_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../data/dataset.h"
#include "args.h"
#include "checkpoint.h"
#include "export.h"
#include "log.h"
#include "../common/rng.h"
#include "../common/safe_write.h"
#include "signals.h"
#include "../common/utils.h"

// Copies the model's parameters and momentum into params and mbuf (host floats, num_params each):
// the trainer's own, since only it knows where its model lives (host or device memory).
typedef void (*FetchState)(void *model, float *params, float *mbuf);

typedef struct {
    Config *cfg;
    int prog;
    int resumed;              // -r was given
    int imported;             // -r named a .safetensors file: a new run from its weights
    Checkpoint ck;            // -r's checkpoint
    CheckpointMeta meta;      // what -c writes
    Rng shuffle;              // the epoch permutations' generator
    Rng epoch_start;          // its state before the epoch in progress drew its permutation
    int first_epoch;          // where the run starts: epoch 1, or the checkpoint's epoch in progress
    int first_step;           // and the step (1-based) it starts that epoch at
    uint64_t steps_total;     // steps done in all epochs (the checkpoint's, counted on)
    void *model;
    FetchState fetch;
    size_t num_params;
    float *host_params, *host_mbuf;  // where fetch puts them, for writing
    int lock_fd;              // -c's lock (path_lock), held for the whole run; -1 when none
    char lock_path[SAFE_PATH_LEN];
} Run;

static Run *run_locked;  // the run holding -c's lock, for the exit handler

// Gives back -c's lock (removing its hidden lock file). Safe to call twice.
static inline void run_unlock(Run *r) {
    if (r->lock_fd >= 0) path_unlock(r->lock_fd, r->lock_path);
    r->lock_fd = -1;
    if (run_locked == r) run_locked = NULL;
}
static inline void run_unlock_at_exit(void) {
    if (run_locked) run_unlock(run_locked);
}

// Before the data is loaded: with -r, read the checkpoint (exit 1 when it is bad) and take from it
// every setting the command line leaves out; with -c, refuse a path that cannot be written (exit 2)
// before anything is loaded.
static inline void run_begin(Run *r, Config *c, int argc, char **argv, int prog) {
    memset(r, 0, sizeof(*r));
    r->cfg = c;
    r->prog = prog;
    r->lock_fd = -1;
    file_size_signal_ignore();  // a write past ulimit -f fails with a message, not a silent death
    char err[2048];
    if (c->resume_path[0] && is_safetensors_path(c->resume_path)) {  // run/export.h
        model_read_or_die(c->resume_path, c, &r->ck, 'r', argv[0]);
        import_adopt_settings(&r->ck, c, argv[0]);
        r->imported = 1;
    } else if (c->resume_path[0]) {
        if (checkpoint_read(c->resume_path, &r->ck, err, sizeof(err)) != 0)
            die("-r FILE names a checkpoint that -c wrote", "%s", err);
        char given[128];
        flags_given(argc, argv, given, sizeof(given));
        checkpoint_adopt_settings(&r->ck, c, given);
        r->resumed = 1;
    }
    if (c->ckpt_path[0] && safe_write_check(c->ckpt_path, err, sizeof(err)) != 0) usage_error(argv[0], "-c: %s", err);
    if (is_safetensors_path(c->ckpt_path))
        usage_error(argv[0], "-c %s: -c writes mlp.cu's checkpoint format; -e CK -E FILE.safetensors exports one", c->ckpt_path);
    if (c->log_path[0] && safe_write_check(c->log_path, err, sizeof(err)) != 0) usage_error(argv[0], "-o: %s", err);
}

// After the data is loaded and the model built: checks a resume against the data and the flags
// (exit 2 on a contradiction), takes -c's lock (exit 2 when another run holds it: two runs
// writing one checkpoint would each report it written, and only one would survive), seeds the
// shuffle, and installs the Ctrl-C handler. Returns the
// checkpoint's parameters (and its momentum in *mbuf) for the trainer to load, or NULL for a
// fresh run, which the trainer initialises from the seed.
static inline const float *run_start(Run *r, const Dataset *train, void *model, FetchState fetch, size_t num_params,
                                     const float **mbuf) {
    r->model = model;
    r->fetch = fetch;
    r->num_params = num_params;
    r->first_epoch = 1;
    r->first_step = 1;
    const float *params = NULL;
    if (r->resumed) {
        char err[2048];
        if (checkpoint_contradiction(&r->ck, r->cfg, train, err, sizeof(err)) != 0)
            usage_error(program_name(r->prog), "%s", err);
        r->shuffle = r->ck.meta.rng;
        r->first_epoch = r->ck.meta.epochs_done + 1;
        r->first_step = r->ck.meta.step_in_epoch + 1;
        r->steps_total = r->ck.meta.steps_total;
        params = r->ck.params;
        *mbuf = r->ck.mbuf;
        int e = r->ck.meta.epochs_done, k = r->ck.meta.step_in_epoch;
        printf("resuming %s: %d epoch%s and %d step%s done, %llu in all\n", r->ck.path, e, e == 1 ? "" : "s", k,
               k == 1 ? "" : "s", (unsigned long long)r->steps_total);
    } else {
        rng_seed(&r->shuffle, r->cfg->seed, 1);  // every trainer draws the same permutations from the same -s
        *mbuf = NULL;
        if (r->imported) params = import_start(&r->ck, r->cfg, train, mbuf, program_name(r->prog));
    }
    checkpoint_meta_init(&r->meta, r->cfg, train, program_name(r->prog));
    if (r->cfg->ckpt_path[0]) {
        char err[SAFE_PATH_LEN + 300];
        r->lock_fd = path_lock(r->cfg->ckpt_path, r->lock_path, sizeof(r->lock_path), err, sizeof(err));
        if (r->lock_fd < 0) usage_error(program_name(r->prog), "-c: %s; give this run another -c", err);
        run_locked = r;
        static int registered = 0;
        if (!registered) registered = atexit(run_unlock_at_exit) == 0;
        r->host_params = (float *)mallocCheck(num_params * sizeof(float));
        r->host_mbuf = (float *)mallocCheck(num_params * sizeof(float));
    }
    stop_signals_install();
    return params;
}

// the epoch's permutation of the n training items (the generator's state kept for a checkpoint)
static inline void run_epoch(Run *r, int *perm, int n) {
    r->epoch_start = r->shuffle;
    rng_permutation(&r->shuffle, perm, n);
}

// the first step (1-based) of this epoch: past the steps a resumed checkpoint had done
static inline int run_first_step(const Run *r, int epoch) { return epoch == r->first_epoch ? r->first_step : 1; }

// Writes -c's checkpoint with the given progress; returns 1 when written (a failure prints why).
static inline int run_write_checkpoint(Run *r, int epochs_done, int step_in_epoch, const Rng *state) {
    if (!r->cfg->ckpt_path[0]) return 0;
    r->fetch(r->model, r->host_params, r->host_mbuf);
    checkpoint_set_progress(&r->meta, epochs_done, step_in_epoch, r->steps_total, state);
    char err[2048];
    if (checkpoint_write(r->cfg->ckpt_path, &r->meta, r->host_params, r->host_mbuf, r->num_params, err,
                         sizeof(err)) != 0) {
        fflush(stdout);
        fprintf(stderr, "error: %s\n", err);
        snprintf(die_message, sizeof(die_message), "%s", err);  // (the log's stop row says why)
        return 0;
    }
    return 1;
}

// Counts n more steps as done, without looking for a stop: for a trainer that logs a run of steps
// while its next run is already on the GPU (train_mlp_fast). A checkpoint then would not match the
// parameters, which are ahead; it calls run_after_steps once nothing later is in flight.
static inline void run_count_steps(Run *r, int n) { r->steps_total += (uint64_t)n; }

// After n more steps, the last of them step `step` of `steps` in epoch `epoch`, and nothing after
// them started: counts them, and when sig (a signal, or 0) says stop, writes the checkpoint (with
// -c), the log's stop row, says so and exits 128 + the signal's number. sig comes from the caller:
// run_after_steps' own signal, or the vote of the ranks of a run on several GPUs, which stop at the
// same step whichever of them a signal reached
static inline void run_after_steps_on(Run *r, RunLog *log, int epoch, int step, int steps, int n, int sig) {
    run_count_steps(r, n);
    if (!sig) return;
    int written = step == steps ? run_write_checkpoint(r, epoch, 0, &r->shuffle)
                                : run_write_checkpoint(r, epoch - 1, step, &r->epoch_start);
    const char *ck = r->cfg->ckpt_path[0] ? r->cfg->ckpt_path : NULL;
    char note[2600];
    stop_text(note, sizeof(note), sig, epoch, step, ck, written);
    log->csv.last_epoch = epoch;
    log->csv.last_step = step;
    log->csv.last_global_step = (long)r->steps_total;
    csv_stop(&log->csv, note);
    stop_message(sig, epoch, step, ck, written);
    run_unlock(r);
    exit(stop_exit_code(sig));
}

// ... when a signal has asked this process to stop (run/signals.h)
static inline void run_after_steps(Run *r, RunLog *log, int epoch, int step, int steps, int n) {
    run_after_steps_on(r, log, epoch, step, steps, n, stop_requested());
}

// After an epoch (and its evaluation): -c's checkpoint. A checkpoint that cannot be written ends
// the run (exit 1): the last good one stays.
static inline void run_end_of_epoch(Run *r, int epoch) {
    if (r->cfg->ckpt_path[0] && !run_write_checkpoint(r, epoch, 0, &r->shuffle)) exit(EXIT_RUNTIME);
}

static inline void run_finish(Run *r) {
    stop_signals_uninstall();
    run_unlock(r);
    free(r->host_params);
    free(r->host_mbuf);
    if (r->resumed || r->imported) checkpoint_free(&r->ck);
}

#endif // MLP_RUN_H
