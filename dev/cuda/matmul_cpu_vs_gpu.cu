/*
matmul_cpu_vs_gpu: square N x N matmul C = A . B (row-major), N = 64 .. 4096, CPU against GPU.

  CPU: the plain triple loop in i-k-j order (the inner loop walks rows of B and C contiguously,
       so the compiler vectorises it), rows of C shared over threads with OpenMP when built with it.
  GPU: the fast trainer's FP32 kernel (kernels/fast/, the NN product through
       matmul_backward_dinp_fast with act = none), time of the kernel alone (CUDA events, median),
       and including the copies of A and B in and C out (pinned host memory). cuBLAS SGEMM beside it.
  The CPU side stops at the first N whose time, estimated as 8x the previous N's, exceeds the limit
  (60 s, or the 1st argument in seconds); the table says "skipped (est. X s)" there.

Run: ./matmul_cpu_vs_gpu [cpu limit s] [csv path]   (default CSV dev/cuda/out/matmul_cpu_vs_gpu.csv)
Validation: GPU vs CPU relative-norm error < 1e-5 where the CPU ran, vs cuBLAS above that.
*/
#include "common.h"
#include <cublas_v2.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../../common/mlp.h"                       // ACT_NONE
#include "../../kernels/fast/matmul/matmul_fast.h"  // matmul_backward_dinp_fast

#define cublasCheck(call) do { cublasStatus_t s_ = (call); if (s_ != CUBLAS_STATUS_SUCCESS) { \
    fprintf(stderr, "[cuBLAS ERROR] at %s:%d: status %d\n", __FILE__, __LINE__, (int)s_); exit(EXIT_FAILURE); } } while (0)

// C (N, N) = A (N, N) . B (N, N), i-k-j
void matmul_cpu(float* C, const float* A, const float* B, int N) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float* c = C + (size_t)i * N;
        for (int j = 0; j < N; j++) c[j] = 0.0f;
        for (int k = 0; k < N; k++) {
            const float a = A[(size_t)i * N + k];
            const float* b = B + (size_t)k * N;
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
}

static double rel_err(const float* x, const float* ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) { double d = (double)x[i] - ref[i]; num += d * d; den += (double)ref[i] * ref[i]; }
    if (num != num) return INFINITY;
    return sqrt(num / den);
}

int main(int argc, char** argv) {
    require_gpu_or_exit("matmul_cpu_vs_gpu");
    double limit_s = argc > 1 ? atof(argv[1]) : 60.0;
    char buf[256];
    const char* path = csv_path(argc > 2 ? argv[2] : NULL, "matmul_cpu_vs_gpu", buf, sizeof(buf));
    print_gpu_name();
    int threads = 1;
#ifdef _OPENMP
    threads = omp_get_max_threads();
#endif
    printf("CPU: i-k-j triple loop, %d OpenMP thread(s); CPU side stops where 8x the previous time > %.0f s\n",
           threads, limit_s);
    cublasHandle_t h;
    cublasCheck(cublasCreate(&h));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0)); cudaCheck(cudaEventCreate(&e1));
    FILE* csv = fopenCheck(path, "w");
    fprintf(csv, "op,N,cpu_ms,gpu_kernel_ms,gpu_total_ms,cublas_ms,cpu_threads,cpu_note\n");
    printf("| N | CPU ms | GPU kernel ms | GPU incl. copies ms | cuBLAS ms | GPU TFLOP/s | CPU GFLOP/s | kernel speed-up | total speed-up | check |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|\n");
    int failed = 0;
    double prev_cpu_ms = 0;
    int cpu_on = 1;
    for (int N = 64; N <= 4096; N *= 2) {
        size_t n = (size_t)N * N;
        float *A, *B, *C, *ref;
        cudaCheck(cudaMallocHost(&A, n * 4)); cudaCheck(cudaMallocHost(&B, n * 4)); cudaCheck(cudaMallocHost(&C, n * 4));
        ref = (float*)mallocCheck(n * 4);
        fill_uniform(A, n); fill_uniform(B, n);
        float *dA, *dB, *dC, *dR;
        cudaCheck(cudaMalloc(&dA, n * 4)); cudaCheck(cudaMalloc(&dB, n * 4));
        cudaCheck(cudaMalloc(&dC, n * 4)); cudaCheck(cudaMalloc(&dR, n * 4));
        cudaCheck(cudaMemcpy(dA, A, n * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(dB, B, n * 4, cudaMemcpyHostToDevice));

        // CPU
        double cpu_ms = -1, est_s = prev_cpu_ms * 8 / 1e3;
        char note[64] = "";
        if (cpu_on && prev_cpu_ms > 0 && est_s > limit_s) cpu_on = 0;
        if (cpu_on) {
            int reps = N <= 256 ? 5 : 1;
            float t[5];
            for (int r = 0; r < reps; r++) {
                double t0 = wall_ms();
                matmul_cpu(ref, A, B, N);
                t[r] = (float)(wall_ms() - t0);
            }
            cpu_ms = median(t, reps);
            prev_cpu_ms = cpu_ms;
        } else {
            snprintf(note, sizeof(note), "skipped (est. %.0f s)", est_s);
            prev_cpu_ms *= 8;   // the next estimate builds on this one
        }

        // GPU: kernel alone, median of 21 after warm-up
        float t[21];
        const float one = 1.0f, zero = 0.0f;
        for (int r = 0; r < 3; r++) matmul_backward_dinp_fast(dC, dA, dB, NULL, ACT_NONE, N, N, N, 0, 0);
        for (int r = 0; r < 21; r++) {
            cudaCheck(cudaEventRecord(e0));
            matmul_backward_dinp_fast(dC, dA, dB, NULL, ACT_NONE, N, N, N, 0, 0);
            cudaCheck(cudaEventRecord(e1)); cudaCheck(cudaEventSynchronize(e1));
            cudaCheck(cudaEventElapsedTime(&t[r], e0, e1));
        }
        float k_ms = median(t, 21);
        // cuBLAS (column-major: C^T = B^T A^T)
        for (int r = 0; r < 3; r++) cublasCheck(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dB, N, dA, N, &zero, dR, N));
        for (int r = 0; r < 21; r++) {
            cudaCheck(cudaEventRecord(e0));
            cublasCheck(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, dB, N, dA, N, &zero, dR, N));
            cudaCheck(cudaEventRecord(e1)); cudaCheck(cudaEventSynchronize(e1));
            cudaCheck(cudaEventElapsedTime(&t[r], e0, e1));
        }
        float cb_ms = median(t, 21);
        // GPU including copies: median of 7 (+1 warm-up)
        for (int r = 0; r < 8; r++) {
            cudaCheck(cudaMemsetAsync(dC, 0xFF, n * 4));   // outside the timed region: NaN poison
            cudaCheck(cudaEventRecord(e0));
            cudaCheck(cudaMemcpyAsync(dA, A, n * 4, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpyAsync(dB, B, n * 4, cudaMemcpyHostToDevice));
            matmul_backward_dinp_fast(dC, dA, dB, NULL, ACT_NONE, N, N, N, 0, 0);
            cudaCheck(cudaMemcpyAsync(C, dC, n * 4, cudaMemcpyDeviceToHost));
            cudaCheck(cudaEventRecord(e1)); cudaCheck(cudaEventSynchronize(e1));
            if (r > 0) cudaCheck(cudaEventElapsedTime(&t[r - 1], e0, e1));
        }
        float tot_ms = median(t, 7);

        // check: against the CPU where it ran, else against cuBLAS
        if (!cpu_on) cudaCheck(cudaMemcpy(ref, dR, n * 4, cudaMemcpyDeviceToHost));
        double err = rel_err(C, ref, n);
        int ok = err < 1e-5;
        failed += !ok;
        char check[64];
        snprintf(check, sizeof(check), "%s %.1e vs %s", ok ? "ok" : "FAIL", err, cpu_on ? "CPU" : "cuBLAS");

        double flop = 2.0 * N * N * (double)N;
        if (cpu_on)
            printf("| %d | %.3f | %.4f | %.4f | %.4f | %.2f | %.1f | %.0fx | %.1fx | %s |\n", N, cpu_ms, k_ms, tot_ms, cb_ms,
                   flop / k_ms * 1e-9, flop / cpu_ms * 1e-6, cpu_ms / k_ms, cpu_ms / tot_ms, check);
        else
            printf("| %d | %s | %.4f | %.4f | %.4f | %.2f | - | - | - | %s |\n", N, note, k_ms, tot_ms, cb_ms,
                   flop / k_ms * 1e-9, check);
        char cpu_field[32] = "";   // empty where the CPU was skipped
        if (cpu_on) snprintf(cpu_field, sizeof(cpu_field), "%.6f", cpu_ms);
        fprintf(csv, "matmul,%d,%s,%.6f,%.6f,%.6f,%d,%s\n", N, cpu_field, k_ms, tot_ms, cb_ms, threads, note);
        fflush(csv);   // a row at a time: a run cut short keeps what it measured
        fflush(stdout);
        cudaCheck(cudaFree(dA)); cudaCheck(cudaFree(dB)); cudaCheck(cudaFree(dC)); cudaCheck(cudaFree(dR));
        cudaCheck(cudaFreeHost(A)); cudaCheck(cudaFreeHost(B)); cudaCheck(cudaFreeHost(C)); free(ref);
    }
    fclose(csv);
    cublasCheck(cublasDestroy(h));
    printf("wrote %s\n", path);
    printf("matmul_cpu_vs_gpu: %s\n", failed ? "FAILED" : "all sizes validated");
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
