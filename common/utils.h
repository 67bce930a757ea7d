/*
Host utilities shared by train_mlp_cpu.c, train_mlp.cu and the tests.

Every call that can fail is checked here, and a failure prints ONE line that says what went
wrong, in the user's terms, and a hint of what to try:

    error: out of host memory allocating 402653184 bytes ---> try: a smaller batch (-b) or model (-m)

With MLP_DEBUG=1 in the environment the line also names the source file and line that found
the problem (CUDA errors always do: kernels/common.cuh).

Exit codes used across the project:
    0  success
    1  a runtime failure: a bad or missing data file, out of memory, a diverging run, CUDA errors,
       a write error
    2  a bad command line (unknown flag, value out of range, an output that is refused, ...)
    128 + N  a training run stopped by signal N (run/signals.h): 129 SIGHUP, 130 SIGINT, 141
       SIGPIPE, 143 SIGTERM
Plain C99, no dependencies beyond libc.
*/
#ifndef MLP_UTILS_H
#define MLP_UTILS_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_RUNTIME 1
#define EXIT_USAGE 2

// ----------------------------------------------------------------------------
// fatal errors: one line on stderr, then exit

// A machine without a GPU: the command a GPU trainer suggests instead, the CPU trainer's with the
// same flags less the GPU trainers' own (run/args.h sets it from the command line; kernels/common.cuh
// prints it). Empty: a general hint.
static char no_gpu_instead[4400] __attribute__((unused));  // (a program with no GPU trainer leaves it)

// the message of the error that is ending the program (for an atexit handler: run/log.h's stop row)
static char die_message[1024];

static inline void die_at(int code, const char *file, int line, const char *hint, const char *fmt, ...)
    __attribute__((format(printf, 5, 6), noreturn));
static inline void die_at(int code, const char *file, int line, const char *hint, const char *fmt, ...) {
    fflush(stdout);
    const char *debug = getenv("MLP_DEBUG");
    if (debug && strcmp(debug, "0") != 0) fprintf(stderr, "error: %s:%d: ", file, line);
    else fprintf(stderr, "error: ");
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    vsnprintf(die_message, sizeof(die_message), fmt, again);
    va_end(again);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (hint && hint[0]) fprintf(stderr, " ---> try: %s", hint);
    fprintf(stderr, "\n");
    exit(code);
}
// die(hint, fmt, ...): a runtime failure (exit 1); with MLP_DEBUG=1, also the file:line that found it
#define die(hint, ...) die_at(EXIT_RUNTIME, __FILE__, __LINE__, hint, __VA_ARGS__)

// a bad command line (exit 2): the user's mistake, so no source location, and a pointer to -h
static inline void usage_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static inline void usage_error(const char *prog, const char *fmt, ...) {
    fflush(stdout);
    fprintf(stderr, "error: ");
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    vsnprintf(die_message, sizeof(die_message), fmt, again);
    va_end(again);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " ---> try: %s%s -h\n", strchr(prog, '/') ? "" : "./", prog);  // a command that runs as written
    exit(EXIT_USAGE);
}

// ----------------------------------------------------------------------------
// checked allocation and file I/O

static inline void *malloc_check_at(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (!p) die_at(EXIT_RUNTIME, file, line, "a smaller batch (-b) or model (-m)",
                   "out of host memory allocating %zu bytes", size);
    return p;
}
static inline void *calloc_check_at(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) die_at(EXIT_RUNTIME, file, line, "a smaller batch (-b) or model (-m)",
                   "out of host memory allocating %zu x %zu bytes", n, size);
    return p;
}
#define mallocCheck(size) malloc_check_at((size), __FILE__, __LINE__)
#define callocCheck(n, size) calloc_check_at((n), (size), __FILE__, __LINE__)

static inline FILE *fopen_check_at(const char *path, const char *mode, const char *file, int line) {
    FILE *f = fopen(path, mode);
    if (!f) die_at(EXIT_RUNTIME, file, line, "check the path and its permissions",
                   "cannot open %s (mode %s): %s", path, mode, strerror(errno));
    return f;
}
static inline void fwrite_check_at(const void *p, size_t size, size_t n, FILE *f, const char *what,
                            const char *file, int line) {
    if (fwrite(p, size, n, f) != n)
        die_at(EXIT_RUNTIME, file, line, "check free disk space", "short write to %s: %s", what,
               strerror(errno));
}
static inline void fclose_check_at(FILE *f, const char *what, const char *file, int line) {
    if (fclose(f) != 0)
        die_at(EXIT_RUNTIME, file, line, "check free disk space", "closing %s failed: %s", what,
               strerror(errno));
}
#define fopenCheck(path, mode) fopen_check_at((path), (mode), __FILE__, __LINE__)
#define fwriteCheck(p, size, n, f, what) fwrite_check_at((p), (size), (n), (f), (what), __FILE__, __LINE__)
#define fcloseCheck(f, what) fclose_check_at((f), (what), __FILE__, __LINE__)

// size_t multiplication that reports overflow instead of wrapping (returns 0 on success)
static inline int mul_overflows(size_t a, size_t b, size_t *out) {
    if (a != 0 && b > SIZE_MAX / a) return 1;
    *out = a * b;
    return 0;
}

// mkdir -p for the directory part of a path ("logs/run.csv" creates "logs"); 0 on success
static inline int make_parent_dirs(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof(buf)) return -1;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (buf[i] != '/') continue;
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
        buf[i] = '/';
    }
    return 0;
}

static inline int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// ----------------------------------------------------------------------------
// OpenMP on a shared machine

// GNU OpenMP lets a thread that waits for work spin for a long while (about 300,000 rounds) before
// it sleeps. On a machine whose cores are busy with other programs, the spinning threads take the
// cores the working threads need, and every parallel loop waits for the slowest: an epoch of
// train_mlp_cpu ran several times slower with one of two cores busy (bash dev/cpu_under_load.sh).
// A short spin (1,000 rounds: about a microsecond) keeps it as fast alone and within about 2.3x
// under load. libgomp reads GOMP_SPINCOUNT when the program starts, before main, so main calls
// this first: unless the user has set the variable (or OMP_WAIT_POLICY) themselves, it sets it and
// starts the program again, once. Not built with OpenMP: nothing to do.
static inline void openmp_spin_briefly(char **argv) {
#ifdef _OPENMP
    if (getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY")) return;
    setenv("GOMP_SPINCOUNT", "1000", 1);
    execv("/proc/self/exe", argv);  // returns only when it fails: then run on with the default spin
#else
    (void)argv;
#endif
}

// ----------------------------------------------------------------------------
// wall-clock time

static inline double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif // MLP_UTILS_H
