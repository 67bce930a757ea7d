/*
What every kernel file needs: checked CUDA calls, checked device allocation, CEIL_DIV, TF32 rounding.

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

// ----------------------------------------------------------------------------
// TF32: a float with its mantissa cut to 10 bits (of 23), the precision the tensor cores multiply
// in. round_tf32 rounds to the nearest TF32 value, ties away from zero: on the GPU the instruction
// cvt.rna (sm_80+), on the host (and older GPUs) the same rounding in integer arithmetic: add half
// of the 13 dropped bits' range, then clear them. The result is a float whose low 13 bits are 0;
// the tensor cores take such a value exactly (anything else they truncate). Inf and NaN pass as they are.
__host__ __device__ __forceinline__ float round_tf32(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(x));
    return __uint_as_float(u);
#else
    unsigned u;
    memcpy(&u, &x, sizeof(u));
    if ((u & 0x7F800000u) != 0x7F800000u) u = (u + 0x1000u) & 0xFFFFE000u;
    float r;
    memcpy(&r, &u, sizeof(r));
    return r;
#endif
}

// ----------------------------------------------------------------------------
// Programmatic dependent launch (PDL, sm_90 and later). Normally a kernel starts only after the
// previous kernel in its stream has finished and its writes are flushed: the GPU sits idle for
// the launch latency and the new kernel's start-up at every boundary. Launched with PDL, the next
// kernel is launched as the previous one's blocks exit, and its blocks run up to pdl_wait(), which
// returns when the previous kernel has completed and its memory is visible. So a PDL kernel reads
// and writes nothing before pdl_wait(); here every PDL kernel calls it first thing. In a kernel
// launched without PDL it does nothing, so the same kernels serve every path.
// (A kernel may also let its dependents launch earlier, with griddepcontrol.launch_dependents at
// its start. Measured on the wide model's step, that was slower, 26.0 against 23.3 ms per TF32
// epoch on an H200: the early blocks sit on SM slots while they wait, slots that the kernels of
// the backward pass's second stream needed. So the dependents launch as the blocks exit.)
// launch_pdl() uses it only where the GPU and the compiled code support it, pdl_allowed is set,
// and the environment has no MLP_PDL=0 (for measuring what it buys). The launchers that use it
// say so, and the caller keeps two rules:
//   - the previous operation in the stream is a kernel (not a wait for another stream's event);
//   - no event that another stream waits on is recorded between that kernel and this one. To start
//     the PDL kernel early the stream has to pass the event early, and whether the event then still
//     waits for the previous kernel's writes is not something the programming guide promises.
// The trainer uses PDL in the forward pass, the fused softmax and the fused head (kernels/head.cuh);
// the backward pass records events between all its kernels (train_mlp.cu model_backward_update).
// One event sits before a PDL kernel: ev_step, before a step's first forward kernel, in
// train_steps_fast, which only runs inside a graph capture. There an event is no object that is
// passed at run time: the kernel that waits for it (the gather of the next batch, launched
// plainly) gets ordinary edges from the nodes before it, so it waits for them to finish.
__device__ __forceinline__ void pdl_wait(void) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

__global__ void pdl_probe_kernel(void) {}  // its attributes tell what this file was compiled for

static int pdl_allowed = 1;  // dev/cuda's single-kernel benchmarks set 0: cuBLAS does not overlap launches

static inline int pdl_available(void) {
    static int available = -1;
    if (available < 0) {
        int dev = 0, major = 0;
        cudaFuncAttributes fa;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
        cudaCheck(cudaFuncGetAttributes(&fa, pdl_probe_kernel));
        const char *env = getenv("MLP_PDL");
        available = major >= 9 && fa.ptxVersion >= 90 && fa.binaryVersion >= 90 && !(env && strcmp(env, "0") == 0);
    }
    return available && pdl_allowed;
}

// kernel<<<grid, block, smem, stream>>>(args...), with PDL when available
template <typename... KArgs, typename... Args>
static inline void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                              Args... args) {
    cudaLaunchConfig_t lc = {};
    cudaLaunchAttribute attr[1];
    lc.gridDim = grid;
    lc.blockDim = block;
    lc.dynamicSmemBytes = smem;
    lc.stream = stream;
    if (pdl_available()) {
        attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        attr[0].val.programmaticStreamSerializationAllowed = 1;
        lc.attrs = attr;
        lc.numAttrs = 1;
    }
    cudaCheck(cudaLaunchKernelEx(&lc, kernel, args...));
}

#endif // MLP_KERNELS_COMMON_CUH
