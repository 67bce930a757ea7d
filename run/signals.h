/*
run/signals.h: Ctrl-C (SIGINT), SIGTERM, SIGHUP (a closed terminal or ssh session) and SIGPIPE
(a closed stdout: `./train_mlp_cpu ... | head`) stop a training run cleanly, each with its exit
code 128 + the signal's number (130, 143, 129, 141), as a shell reports a program it killed.

A signal handler may do almost nothing safely (no printf, no malloc, no file I/O), so the handler
only records which signal came; the trainer looks at stop_requested() between steps (or between
runs of steps: the fast trainer's CUDA graphs), and then does the rest itself: finishes the step,
writes the checkpoint when -c is given, writes the log's stop row, says so (on stderr for SIGPIPE,
since stdout is gone), and exits with stop_exit_code(signal).

    stop_signals_install();                       // before the training loop
    ...
    if (stop_requested()) {                       // after each step (or run of steps)
        ... write the checkpoint (-c), close the log ...
        stop_message(stop_requested(), epoch, step, ckpath, ok);
        exit(stop_exit_code(stop_requested()));
    }

The first signal also puts back the default handlers of SIGINT, SIGTERM and SIGHUP: a second one
kills the program at once, for a user who does not want to wait for the checkpoint. SIGPIPE is
ignored from then on instead (every later write to the closed stdout would raise it again; such
writes now fail quietly). The handlers use SA_RESTART, so a read or write in progress is resumed
rather than failed with EINTR.

SIGXFSZ (a write past the file-size limit, `ulimit -f`) is ignored from the start: the write then
fails with EFBIG, and the code that writes says so in one line, removes its temporary file and
exits 1, instead of dying silently with the temporary file left behind.
*/
#ifndef MLP_SIGNALS_H
#define MLP_SIGNALS_H

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define STOP_EXIT_CODE 130  // 128 + SIGINT, what a shell reports for a Ctrl-C

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
#define NUM_STOP_SIGNALS 4

// 128 + sig: what a shell reports for a program the signal killed
static inline int stop_exit_code(int sig) { return 128 + sig; }

static volatile sig_atomic_t stop_signal = 0;  // the signal that asked to stop; 0 while none has
static volatile sig_atomic_t stop_keep = 0;    // 1: a second signal only asks again (stop_signals_keep)
static struct sigaction stop_default_action;   // SIG_DFL, ready for the handler to put back

// the handler: note the signal, and let the next one kill (sigaction is async-signal-safe)
static inline void stop_signal_handler(int sig) {
    if (!stop_signal) stop_signal = sig;
    if (stop_keep) return;
    sigaction(SIGINT, &stop_default_action, NULL);
    sigaction(SIGTERM, &stop_default_action, NULL);
    sigaction(SIGHUP, &stop_default_action, NULL);
    signal(SIGPIPE, SIG_IGN);  // (async-signal-safe on Linux, as sigaction is)
}

// writes past the file-size limit fail with EFBIG instead of killing the program (the top of this file)
static inline void file_size_signal_ignore(void) { signal(SIGXFSZ, SIG_IGN); }

static inline void stop_signals_install(void) {
    memset(&stop_default_action, 0, sizeof(stop_default_action));
    stop_default_action.sa_handler = SIG_DFL;
    sigemptyset(&stop_default_action.sa_mask);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = stop_signal_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    stop_signal = 0;
    for (int i = 0; i < NUM_STOP_SIGNALS; i++) sigaction(stop_signals[i], &sa, NULL);
    file_size_signal_ignore();
}

// For a rank of a job of several processes: a second signal asks again instead of killing, since a
// launcher (torchrun) passes the terminal's Ctrl-C on to ranks that have it already, and every rank
// must live to the step at which they all stop (run/job.h's vote)
static inline void stop_signals_keep(void) { stop_keep = 1; }

// the default handlers again (after the training loop: a Ctrl-C during the final evaluation kills)
static inline void stop_signals_uninstall(void) {
    for (int i = 0; i < NUM_STOP_SIGNALS; i++) sigaction(stop_signals[i], &stop_default_action, NULL);
}

// the signal that asked the run to stop (SIGINT, SIGTERM, SIGHUP or SIGPIPE), or 0
static inline int stop_requested(void) { return stop_signal; }

static inline const char *stop_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP"
           : sig == SIGPIPE ? "SIGPIPE (stdout was closed)" : "a signal";
}

// "stopped by SIGINT after epoch 2 step 350; checkpoint written to ck.bin (resume with -r ck.bin)"
// into text: epoch is the epoch in progress, step the steps done in it. ckpath NULL: no -c.
// written 0: writing it failed (the trainer has printed why).
static inline void stop_text(char *text, size_t n, int sig, int epoch, int step, const char *ckpath, int written) {
    int k = snprintf(text, n, "stopped by %s after epoch %d step %d; ", stop_signal_name(sig), epoch, step);
    if (k < 0 || (size_t)k >= n) return;
    if (!ckpath) snprintf(text + k, n - k, "no checkpoint written (-c FILE keeps one)");
    else if (written) snprintf(text + k, n - k, "checkpoint written to %s (resume with -r %s)", ckpath, ckpath);
    else snprintf(text + k, n - k, "the checkpoint %s could not be written", ckpath);
}

// stop_text as a line: on stdout, or on stderr after SIGPIPE (stdout is closed)
static inline void stop_message(int sig, int epoch, int step, const char *ckpath, int written) {
    char text[2600];
    stop_text(text, sizeof(text), sig, epoch, step, ckpath, written);
    FILE *f = sig == SIGPIPE ? stderr : stdout;
    fprintf(f, "%s\n", text);
    fflush(f);
}

#endif // MLP_SIGNALS_H
