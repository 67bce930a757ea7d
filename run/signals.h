/*
run/signals.h: Ctrl-C (SIGINT) and SIGTERM stop a training run cleanly.

A signal handler may do almost nothing safely (no printf, no malloc, no file I/O), so the handler
only records which signal came; the trainer looks at stop_requested() between steps (or between
runs of steps: the fast trainer's CUDA graphs), and then does the rest itself: finishes the step,
writes the checkpoint when -c is given, flushes the log, says so, and exits with STOP_EXIT_CODE.

    stop_signals_install();                       // before the training loop
    ...
    if (stop_requested()) {                       // after each step (or run of steps)
        ... write the checkpoint (-c), close the log ...
        stop_message(stdout, stop_requested(), epoch, step, ckpath, ok);
        exit(STOP_EXIT_CODE);
    }

The first signal also puts back the default handlers: a second Ctrl-C (or SIGTERM) kills the
program at once, for a user who does not want to wait for the checkpoint. The handlers use
SA_RESTART, so a read or write in progress is resumed rather than failed with EINTR.
*/
#ifndef MLP_SIGNALS_H
#define MLP_SIGNALS_H

#include <signal.h>
#include <stdio.h>
#include <string.h>

#define STOP_EXIT_CODE 130  // 128 + SIGINT, what a shell reports for a Ctrl-C

static volatile sig_atomic_t stop_signal = 0;  // the signal that asked to stop; 0 while none has
static struct sigaction stop_default_action;   // SIG_DFL, ready for the handler to put back

// the handler: note the signal, and let the next one kill (sigaction is async-signal-safe)
static inline void stop_signal_handler(int sig) {
    stop_signal = sig;
    sigaction(SIGINT, &stop_default_action, NULL);
    sigaction(SIGTERM, &stop_default_action, NULL);
}

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
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

// the default handlers again (after the training loop: a Ctrl-C during the final evaluation kills)
static inline void stop_signals_uninstall(void) {
    sigaction(SIGINT, &stop_default_action, NULL);
    sigaction(SIGTERM, &stop_default_action, NULL);
}

// the signal that asked the run to stop (SIGINT or SIGTERM), or 0
static inline int stop_requested(void) { return stop_signal; }

static inline const char *stop_signal_name(int sig) {
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

// "stopped by SIGINT after epoch 2 step 350; checkpoint written to ck.bin": epoch is the epoch
// in progress, step the steps done in it. ckpath NULL: no -c. written 0: writing it failed (the
// trainer has printed why).
static inline void stop_message(FILE *f, int sig, int epoch, int step, const char *ckpath, int written) {
    fprintf(f, "stopped by %s after epoch %d step %d; ", stop_signal_name(sig), epoch, step);
    if (!ckpath) fprintf(f, "no checkpoint written (-c FILE keeps one)\n");
    else if (written) fprintf(f, "checkpoint written to %s (resume with -r %s)\n", ckpath, ckpath);
    else fprintf(f, "the checkpoint %s could not be written\n", ckpath);
    fflush(f);
}

#endif // MLP_SIGNALS_H
