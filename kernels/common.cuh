/*
What every kernel file and GPU trainer needs: checked CUDA calls, checked device allocation,
CEIL_DIV, and finding the GPU.

The kernels of the files in kernels/ are declared `static __global__`: each program that includes
a header gets its own copy, so that two separately compiled files (the fast tier's objects and a
trainer) can both include it without their kernels colliding when they are linked.

Every CUDA call goes through cudaCheck(...) and every launch is followed by
cudaCheck(cudaGetLastError()). A failure prints one line with file:line, CUDA's own error
string and a hint, then exits 1:

    error: train_mlp.cu:301: CUDA error: out of memory ---> try: a smaller -b or -m
*/
#ifndef MLP_KERNELS_COMMON_CUH
#define MLP_KERNELS_COMMON_CUH

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/utils.h"  // no_gpu_instead: the command to suggest on a machine without a GPU

#define CEIL_DIV(a, b) (((a) + (b) - 1) / (b))

static inline const char *cuda_hint(cudaError_t err) {
    switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInitializationError:
        return "no usable GPU here: train on the CPU with ./train_mlp_cpu (make train_cpu)";
    case cudaErrorMemoryAllocation:
        return "a smaller batch (-b) or model (-m)";
    case cudaErrorNoKernelImageForDevice:
    case cudaErrorUnsupportedPtxVersion:
        return "rebuild for this GPU: make clean && make train (or make GPU_ARCH=<compute capability>)";
    default:
        return "run under compute-sanitizer to find the faulting kernel";
    }
}

static inline void cuda_check_at(cudaError_t err, const char *file, int line) {
    if (err == cudaSuccess) return;
    fflush(stdout);
    fprintf(stderr, "error: %s:%d: CUDA error: %s (%s) ---> try: %s\n", file, line, cudaGetErrorString(err),
            cudaGetErrorName(err), cuda_hint(err));
    exit(1);
}
#define cudaCheck(err) cuda_check_at((err), __FILE__, __LINE__)

// Device memory, with the size named when it cannot be had. Every device allocation of
// the trainer goes through here, so *device_bytes_allocated is its peak device memory.
static size_t device_bytes_allocated = 0;
static inline void *cuda_malloc_check_at(size_t bytes, const char *what, const char *file, int line) {
    void *p = NULL;
    cudaError_t err = cudaMalloc(&p, bytes ? bytes : 1);
    if (err == cudaErrorMemoryAllocation) {
        size_t free_b = 0, total_b = 0;
        cudaGetLastError();  // clear the error so the query below works
        cudaMemGetInfo(&free_b, &total_b);
        fflush(stdout);
        fprintf(stderr,
                "error: %s:%d: out of GPU memory allocating %zu bytes (%.1f MB) for %s; %.1f MB of %.1f MB "
                "free ---> try: a smaller batch (-b) or model (-m)\n",
                file, line, bytes, bytes / 1e6, what, free_b / 1e6, total_b / 1e6);
        exit(1);
    }
    cuda_check_at(err, file, line);
    device_bytes_allocated += bytes;
    return p;
}
#define cudaMallocCheck(bytes, what) cuda_malloc_check_at((bytes), (what), __FILE__, __LINE__)

// Why there is no GPU to use, in the user's terms ("no GPU or no GPU driver" where CUDA says its driver
// is too old for its runtime: which is what it says on a machine with no GPU driver at all), or NULL
// when there is one.
static inline const char *gpu_missing(void) {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err == cudaSuccess && count > 0) return NULL;
    if (err == cudaSuccess || err == cudaErrorInsufficientDriver || err == cudaErrorNoDevice) return "no GPU or no GPU driver";
    return cudaGetErrorString(err);
}

// The GPU the trainers run on (device 0), or one line and exit 1 when there is none: a machine
// without a GPU or without its driver is not an error of the CUDA code, so the line says what to
// use instead.
static inline cudaDeviceProp require_gpu(void) {
    const char *missing = gpu_missing();
    if (missing) {
        fflush(stdout);
        fprintf(stderr, "error: no usable CUDA GPU here (%s) ---> try: %s\n", missing,
                no_gpu_instead[0] ? no_gpu_instead : "the CPU trainer, ./train_mlp_cpu (make train_cpu)");
        exit(1);
    }
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, 0));
    cudaCheck(cudaSetDevice(0));
    return prop;
}

#endif // MLP_KERNELS_COMMON_CUH
