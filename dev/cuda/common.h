// dev/cuda/common.h: what every file in dev/cuda shares: checked CUDA calls, the no-GPU exit,
// host timers, medians, random fills, CSV output. Plain host code plus the CUDA runtime.
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
