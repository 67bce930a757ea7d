// dev/cuda/common.h: what every file in dev/cuda shares: checked CUDA calls, the no-GPU exit,
// host timers, medians, the benchmark loop (bench_ms), random fills, CSV output. Plain host code plus the CUDA runtime.
#pragma once
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <sys/stat.h>

// ----------------------------------------------------------------------------
// checked calls

// cudaCheck is the project's: one line, `error: file:line: CUDA error: <string> ---> try: <hint>`
#include "../../kernels/common.cuh"

static void* malloc_check(size_t size, const char* file, int line) {
    void* p = malloc(size);
    if (p == NULL) {
        fprintf(stderr, "[malloc ERROR] at %s:%d: %zu bytes\n---> try: a smaller N\n", file, line, size);
        exit(EXIT_FAILURE);
    }
    return p;
}
#undef mallocCheck   // (common/utils.h's, through kernels/common.cuh: its hint speaks of -b and -m)
#define mallocCheck(size) malloc_check((size), __FILE__, __LINE__)

static FILE* fopen_check(const char* path, const char* mode, const char* file, int line) {
    FILE* f = fopen(path, mode);
    if (f == NULL) {
        fprintf(stderr, "[fopen ERROR] at %s:%d: cannot open %s (mode %s)\n---> try: a path in a folder that exists\n",
                file, line, path, mode);
        exit(EXIT_FAILURE);
    }
    return f;
}
#undef fopenCheck
#define fopenCheck(path, mode) fopen_check((path), (mode), __FILE__, __LINE__)

// every binary here needs a GPU: without one it says so in one line and exits 0, so that
// `make -C dev/cuda && ./dev/cuda/x` can run on any machine
static void require_gpu_or_exit(const char* prog) {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess || n == 0) {
        printf("%s: no CUDA GPU found (%s), nothing to run\n", prog,
               err != cudaSuccess ? cudaGetErrorString(err) : "0 devices");
        exit(EXIT_SUCCESS);
    }
}

static void print_gpu_name(void) {
    cudaDeviceProp prop;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    printf("GPU: %s, %d SMs, %.0f MB L2, compute capability %d.%d\n", prop.name, prop.multiProcessorCount,
           prop.l2CacheSize / 1e6, prop.major, prop.minor);
}

static void gpu_name(char* out, size_t n) {
    cudaDeviceProp prop;
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    snprintf(out, n, "%s", prop.name);
}

// ----------------------------------------------------------------------------
// timing

static double wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_float(const void* a, const void* b) {
    float x = *(const float*)a, y = *(const float*)b;
    return (x > y) - (x < y);
}

static float median(float* v, int n) {   // sorts v
    qsort(v, n, sizeof(float), cmp_float);
    return n % 2 ? v[n / 2] : 0.5f * (v[n / 2 - 1] + v[n / 2]);
}

// bench_ms(fn, ctx): the time of one call of fn(ctx) in ms, measured with CUDA events on the default
// stream (fn launches its kernels there). First it launches for at least 20 ms, so that the SM clock has
// ramped up from idle (an H100 or H200 idles at a few hundred MHz, and a handful of short launches would
// be timed before it is up to speed); then it takes the median of BENCH_REPS timings of BENCH_INNER
// back-to-back calls each, so the times include the GPU's gap between launches, the same for every
// version. A slow call, where that would take more than BENCH_BUDGET_MS, is timed one call at a time, at
// least 5 times and within that budget: for it the gap is nothing, and the whole run stays short.
typedef void (*bench_fn)(void* ctx);
#define BENCH_REPS 50
#define BENCH_INNER 10
#define BENCH_BUDGET_MS 250.0
static float bench_ms(bench_fn fn, void* ctx) {
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    const double w0 = wall_ms();
    double elapsed = 0.0;
    int calls = 0, batch = 1;
    do {   // batches of 1, 2, 4, .. 32 calls: a slow call is not launched 32 times just to warm up
        for (int i = 0; i < batch; i++) fn(ctx);
        cudaCheck(cudaDeviceSynchronize());
        calls += batch;
        batch = batch < 32 ? 2 * batch : 32;
        elapsed = wall_ms() - w0;
    } while (elapsed < 20.0);
    const double per_call = elapsed / calls;   // host time, an upper bound on the GPU's
    int reps = BENCH_REPS, inner = BENCH_INNER;
    if (per_call * BENCH_REPS * BENCH_INNER > BENCH_BUDGET_MS) {
        inner = 1;
        reps = (int)(BENCH_BUDGET_MS / per_call);
        reps = reps < 5 ? 5 : reps > BENCH_REPS ? BENCH_REPS : reps;
    }
    float t[BENCH_REPS];
    for (int r = 0; r < reps; r++) {
        cudaCheck(cudaEventRecord(e0));
        for (int i = 0; i < inner; i++) fn(ctx);
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        cudaCheck(cudaEventElapsedTime(&t[r], e0, e1));
        t[r] /= inner;
    }
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    return median(t, reps);
}

// ----------------------------------------------------------------------------
// data

static unsigned long long rng_state = 0x2545F4914F6CDD1DULL;
static inline float rand_uniform(void) {   // in [-1, 1), xorshift64*
    rng_state ^= rng_state >> 12; rng_state ^= rng_state << 25; rng_state ^= rng_state >> 27;
    unsigned long long r = rng_state * 0x2545F4914F6CDD1DULL;
    return (float)((r >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}
static void fill_uniform(float* x, size_t n) { for (size_t i = 0; i < n; i++) x[i] = rand_uniform(); }

// the CSV path: argv's if given, else dev/cuda/out/<name>.csv (its folder made if missing)
static const char* csv_path(const char* given, const char* name, char* buf, size_t n) {
    if (given != NULL) return given;
    mkdir("dev/cuda/out", 0755);
    snprintf(buf, n, "dev/cuda/out/%s.csv", name);
    FILE* f = fopen(buf, "a");
    if (f == NULL) {   // not run from the repository root: use the current folder
        mkdir("out", 0755);
        snprintf(buf, n, "out/%s.csv", name);
    } else {
        fclose(f);
    }
    return buf;
}
