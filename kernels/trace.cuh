/*
kernels/trace.cuh: see a training step as the GPU runs it (train_mlp -T).

While tracing is on, every launcher of the simple tier brackets its launch with trace_begin and
trace_end (two CUDA events, the kernel, its grid, block and sizes); trace_end's table, one row per
kernel, turns the sizes into bytes, FLOPs and shapes, so the launchers keep no accounts.
trace_print() lists the kernels in launch order, with each one's time, bandwidth and FLOP rate,
and the totals against the GPU's memory bandwidth and FP32 peak.

Events are recorded on the default stream, so each one is timestamped when the kernels before it
have finished: the time between a kernel's two events is that kernel alone. When tracing is off
(always, except for the one traced step), trace_begin and trace_end do nothing.
*/
#ifndef MLP_TRACE_CUH
#define MLP_TRACE_CUH

#include "../common/mlp.h"    // ACT_NAMES
#include "../common/utils.h"  // now_seconds
#include "common.cuh"

#define TRACE_MAX 256

// the kernels of a training step, as the launchers name them to trace_end
enum { TK_ACT_FORWARD, TK_ACT_BACKWARD, TK_GATHER, TK_MATMUL_FORWARD, TK_MATMUL_DINP, TK_MATMUL_DWEIGHT, TK_MATMUL_DBIAS,
       TK_SOFTMAX_XENT, TK_LOSS_MEAN, TK_SGD };

typedef struct {
    char name[40], shapes[80];
    dim3 grid, block;
    double bytes, flops;
    cudaEvent_t start, stop;
} TraceEntry;

static struct { int on, n; TraceEntry e[TRACE_MAX]; } trace_state;  // the traced step's launches

// Starts tracing once the GPU is idle; returns the host's clock then, for trace_print.
static inline double trace_start(void) {
    cudaCheck(cudaDeviceSynchronize());
    trace_state.on = 1;  // (trace_print leaves n at 0)
    return now_seconds();
}

// before a launch: the start event of the next entry
static inline void trace_begin(void) {
    if (!trace_state.on || trace_state.n == TRACE_MAX) return;
    TraceEntry *t = &trace_state.e[trace_state.n];
    cudaCheck(cudaEventCreate(&t->start));
    cudaCheck(cudaEventCreate(&t->stop));
    cudaCheck(cudaEventRecord(t->start));
}

// After a launch: its stop event, and the kernel's row from the launcher's sizes a, b, c: the fewest
// bytes it must move through GPU memory (each input read once, each output written once), its FLOPs
// (exp and tanh count one each), its shapes. a, b, c: gather bs, D, 1 through a permutation (an int
// index a row); matmuls B, IN, OUT; activations n, -, ACT_*; softmax B, -, C; loss_mean B; sgd n.
#define TRACE_ROW(by, fl, ...) (t->bytes = (by), t->flops = (fl), snprintf(t->shapes, sizeof(t->shapes), __VA_ARGS__))
static inline void trace_end(int kernel, dim3 grid, dim3 block, long long a, long long b, long long c) {
    static const char *names[] = {"%s_forward", "%s_backward", "gather_batch", "matmul_forward", "matmul_backward_dinp",
                                  "matmul_backward_dweight", "matmul_backward_dbias", "softmax_xent_forward_backward",
                                  "loss_mean", "sgd_update"};  // by TK_*, an activation's with its name
    static const int act_fwd[] = {3, 1, 1, 0}, act_bwd[] = {3, 1, 3, 0};  // an activation's FLOPs an element, by ACT_*
    if (!trace_state.on || trace_state.n == TRACE_MAX) return;
    TraceEntry *t = &trace_state.e[trace_state.n++];
    cudaCheck(cudaEventRecord(t->stop));
    t->grid = grid, t->block = block;
    snprintf(t->name, sizeof(t->name), names[kernel], ACT_NAMES[kernel <= TK_ACT_BACKWARD ? c : 0]);
    switch (kernel) {
    case TK_GATHER: TRACE_ROW(5.0 * a * b + a * (c ? 4 + 1 + 4 : 1 + 4), 1.0 * a * b,
                              "uint8 images %lldx%lld -> x %lldx%lld, labels", a, b, a, b); break;
    case TK_MATMUL_FORWARD: TRACE_ROW(4.0 * (a * b + c * b + c + a * c), 2.0 * a * b * c,
                                      "inp %lldx%lld, W %lldx%lld, b -> out %lldx%lld", a, b, c, b, a, c); break;
    case TK_MATMUL_DINP: TRACE_ROW(4.0 * (a * c + c * b + a * b), 2.0 * a * b * c,
                                   "dout %lldx%lld, W %lldx%lld -> dinp %lldx%lld", a, c, c, b, a, b); break;
    case TK_MATMUL_DWEIGHT: TRACE_ROW(4.0 * (a * c + a * b + c * b), 2.0 * a * b * c,
                                      "dout %lldx%lld, inp %lldx%lld -> dW %lldx%lld", a, c, a, b, c, b); break;
    case TK_MATMUL_DBIAS: TRACE_ROW(4.0 * (a * c + c), 1.0 * a * c, "dout %lldx%lld -> db %lld", a, c, c); break;
    case TK_ACT_FORWARD: TRACE_ROW(8.0 * a, 1.0 * act_fwd[c] * a, "x %lld -> x (in place)", a); break;
    case TK_ACT_BACKWARD: TRACE_ROW(12.0 * a, 1.0 * act_bwd[c] * a, "dx %lld, y %lld -> dx (in place)", a, a); break;
    case TK_SOFTMAX_XENT: TRACE_ROW(4.0 * (2.0 * a * c + 2.0 * a), 6.0 * a * c,
                                    "logits %lldx%lld, labels %lld -> dlogits, losses", a, c, a); break;
    case TK_LOSS_MEAN: TRACE_ROW(4.0 * (a + 1), 1.0 * a, "losses %lld -> loss", a); break;
    case TK_SGD: TRACE_ROW(4.0 * 5 * a, 6.0 * a, "p, grad, buf %lld -> p, buf", a); break;
    }
}

// Prints the traced kernels and the totals, and stops tracing. t0: trace_start's clock, so the step's
// time on the host's clock runs from before its first launch until the GPU has finished its last kernel.
static inline void trace_print(double t0) {
    trace_state.on = 0;
    cudaCheck(cudaDeviceSynchronize());
    double step_ms = 1e3 * (now_seconds() - t0);
    int dev = 0, mem_khz = 0, bus_bits = 0, clock_khz = 0;
    cudaDeviceProp prop;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    cudaCheck(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, dev));
    cudaCheck(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    cudaCheck(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev));
    double peak_gbs = 2.0 * mem_khz * 1e3 * (bus_bits / 8) / 1e9;  // double data rate
    int lanes = (prop.major == 8 && prop.minor == 0) || prop.major == 7 ? 64 : 128;  // FP32 lanes per SM (the CUDA guide)
    double peak_gflops = 2.0 * prop.multiProcessorCount * lanes * clock_khz * 1e3 / 1e9;
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
