/*
kernels/trace.cuh: see a training step as the GPU runs it (train_mlp -T).

While tracing is on, every launcher of the simple tier records its kernel: the name, the grid
and block sizes, the shapes it reads and writes, the fewest bytes it must move through GPU
memory (each input read once, each output written once), the floating-point operations it does,
and its time, from a pair of CUDA events around the launch. trace_print() then lists them in
launch order, with each kernel's achieved bandwidth and FLOP rate, and the totals against the
GPU's memory bandwidth and FP32 peak.

Events are recorded on the default stream, so each one is timestamped when the kernels before it
have finished: the time between a kernel's two events is that kernel alone. When tracing is off
(always, except for the one traced step), trace_begin and trace_end do nothing.
*/
#ifndef MLP_TRACE_CUH
#define MLP_TRACE_CUH

#include <stdarg.h>
#include <stdio.h>

#include "common.cuh"

#define TRACE_MAX 256

typedef struct {
    char name[40], shapes[80];
    dim3 grid, block;
    double bytes, flops;
    cudaEvent_t start, stop;
} TraceEntry;

static struct {
    int on, n;
    TraceEntry e[TRACE_MAX];
} trace_state;

static inline void trace_start(void) {
    trace_state.on = 1;
    trace_state.n = 0;
}

// before a launch: the start event of the next entry (NULL when tracing is off)
static inline TraceEntry *trace_begin(void) {
    if (!trace_state.on || trace_state.n == TRACE_MAX) return NULL;
    TraceEntry *t = &trace_state.e[trace_state.n++];
    cudaCheck(cudaEventCreate(&t->start));
    cudaCheck(cudaEventCreate(&t->stop));
    cudaCheck(cudaEventRecord(t->start));
    return t;
}

// after it: what the kernel was, what it moved and computed
static inline void trace_end(TraceEntry *t, const char *name, dim3 grid, dim3 block, double bytes, double flops,
                             const char *shapes_fmt, ...) {
    if (!t) return;
    cudaCheck(cudaEventRecord(t->stop));
    snprintf(t->name, sizeof(t->name), "%s", name);
    va_list ap;
    va_start(ap, shapes_fmt);
    vsnprintf(t->shapes, sizeof(t->shapes), shapes_fmt, ap);
    va_end(ap);
    t->grid = grid;
    t->block = block;
    t->bytes = bytes;
    t->flops = flops;
}

// FP32 lanes per SM (NVIDIA's tables in the CUDA programming guide), for the peak FLOP rate
static inline int trace_fp32_lanes(int major, int minor) {
    if (major == 9 || major >= 10) return 128;
    if (major == 8) return minor == 0 ? 64 : 128;
    if (major == 7) return 64;
    return 128;
}

// Prints the traced kernels and the totals, and stops tracing. step_ms: the traced step's time on
// the host's clock, from before its first launch until the GPU had finished its last kernel.
static inline void trace_print(double step_ms) {
    trace_state.on = 0;
    cudaCheck(cudaDeviceSynchronize());
    int dev = 0, mem_khz = 0, bus_bits = 0, clock_khz = 0;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    cudaCheck(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev));
    cudaCheck(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    cudaCheck(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
    double peak_gbs = 2.0 * mem_khz * 1e3 * (bus_bits / 8) / 1e9;  // double data rate
    double peak_gflops = 2.0 * prop.multiProcessorCount * trace_fp32_lanes(prop.major, prop.minor) * clock_khz * 1e3 / 1e9;
    printf("\ntrace of one training step on %s (%d SMs; datasheet-style peaks from its clocks: %.0f GB/s, "
           "%.1f TFLOP/s FP32)\n", prop.name, prop.multiProcessorCount, peak_gbs, peak_gflops / 1e3);
    printf("  #  %-30s %-12s %-9s %-44s %10s %10s %9s %8s %8s\n", "kernel", "grid", "block", "reads -> writes",
           "bytes", "FLOPs", "us", "GB/s", "GFLOP/s");
    double total_us = 0, total_bytes = 0, total_flops = 0;
    for (int i = 0; i < trace_state.n; i++) {
        TraceEntry *t = &trace_state.e[i];
        float ms = 0;
        cudaCheck(cudaEventElapsedTime(&ms, t->start, t->stop));
        double us = 1e3 * ms;
        char grid[24], block[16];
        snprintf(grid, sizeof(grid), "%ux%u", t->grid.x, t->grid.y);
        snprintf(block, sizeof(block), "%ux%u", t->block.x, t->block.y);
        printf("%3d  %-30s %-12s %-9s %-44s %10.0f %10.0f %9.2f %8.1f %8.1f\n", i + 1, t->name, grid, block, t->shapes,
               t->bytes, t->flops, us, t->bytes / us / 1e3, t->flops / us / 1e3);
        total_us += us;
        total_bytes += t->bytes;
        total_flops += t->flops;
        cudaCheck(cudaEventDestroy(t->start));
        cudaCheck(cudaEventDestroy(t->stop));
    }
    double floor_us = fmax(total_bytes / (peak_gbs * 1e3), total_flops / (peak_gflops * 1e3));
    printf("  %d kernels: %.1f us of kernel time, %.0f bytes (%.1f GB/s), %.0f FLOPs (%.1f GFLOP/s)\n", trace_state.n,
           total_us, total_bytes, total_bytes / total_us / 1e3, total_flops, total_flops / total_us / 1e3);
    printf("  at the GPU's peaks this work would take %.2f us (%s-bound): the kernels take %.0fx that\n", floor_us,
           total_bytes / (peak_gbs * 1e3) > total_flops / (peak_gflops * 1e3) ? "memory" : "arithmetic",
           total_us / floor_us);
    printf("  the traced step took %.1f us on the host's clock: %.1f us more than its kernels, spent launching them and "
           "between them (the tracing's own events included)\n\n", 1e3 * step_ms, 1e3 * step_ms - total_us);
    trace_state.n = 0;
}

#endif // MLP_TRACE_CUH
