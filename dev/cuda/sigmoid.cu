/*
sigmoid: y = 1 / (1 + exp(-x)) over N floats, the activation of the article this project grew from
(doc/walkthrough.md names it), elementwise like vector_add.

versions:
  1: one thread per element, a grid of blocks, a bounds check
  2: a grid-stride loop (a fixed grid that walks the whole array)
  3: float4 loads and stores (16 bytes per thread per access), grid-stride, scalar tail

Compile: make -C dev/cuda (or nvcc -O3 -arch=sm_90 sigmoid.cu -o sigmoid)
Run:
  ./sigmoid           validate every version, then the CPU-vs-GPU table for N = 1e3 .. 1e8
  ./sigmoid 2         validate and time version 2 only (the table's GPU column uses it)
  ./sigmoid 3 x.csv   ... and write the table to x.csv (default dev/cuda/out/sigmoid.csv)

The table: CPU time (one thread, -O3, expf), the GPU kernel time (CUDA events, median of repeats
after a warm-up), and the GPU time including the copies of x to the device and of y back (pinned
host memory). Validation: |gpu - cpu| <= 1e-6 per element (expf differs by an ulp or two between
the CPU's libm and CUDA, and y is in (0, 1)).
*/
#include "common.h"

// ----------------------------------------------------------------------------
// CPU reference

void sigmoid_forward_cpu(float* y, const float* x, size_t N) {
    for (size_t i = 0; i < N; i++) y[i] = 1.0f / (1.0f + expf(-x[i]));
}

// ----------------------------------------------------------------------------
// kernels

__device__ __forceinline__ float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

// version 1: one thread per element
__global__ void sigmoid_forward_kernel1(float* y, const float* x, size_t N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) y[i] = sigmoidf(x[i]);
}

// version 2: grid-stride loop
__global__ void sigmoid_forward_kernel2(float* y, const float* x, size_t N) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x)
        y[i] = sigmoidf(x[i]);
}

// version 3: float4, grid-stride; the last N % 4 elements one by one (cudaMalloc'd pointers are 256-byte aligned)
__global__ void sigmoid_forward_kernel3(float* y, const float* x, size_t N) {
    size_t N4 = N / 4;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t i = t; i < N4; i += stride) {
        float4 v = reinterpret_cast<const float4*>(x)[i];
        reinterpret_cast<float4*>(y)[i] = make_float4(sigmoidf(v.x), sigmoidf(v.y), sigmoidf(v.z), sigmoidf(v.w));
    }
    for (size_t i = N4 * 4 + t; i < N; i += stride) y[i] = sigmoidf(x[i]);
}

// ----------------------------------------------------------------------------
// launchers

static int num_sms(void) {
    int dev, sms;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

void sigmoid_forward(int version, float* y, const float* x, size_t N, cudaStream_t s) {
    const int block = 256;
    switch (version) {
        case 1: sigmoid_forward_kernel1<<<(unsigned)((N + block - 1) / block), block, 0, s>>>(y, x, N); break;
        case 2: sigmoid_forward_kernel2<<<num_sms() * 8, block, 0, s>>>(y, x, N); break;
        case 3: {
            size_t want = (N / 4 + block - 1) / block;
            size_t cap = (size_t)num_sms() * 8;
            sigmoid_forward_kernel3<<<(unsigned)(want < cap ? (want > 0 ? want : 1) : cap), block, 0, s>>>(y, x, N);
            break;
        }
        default: fprintf(stderr, "sigmoid: no version %d (1..3)\n", version); exit(EXIT_FAILURE);
    }
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// validation

static size_t count_bad(const float* y, const float* ref, size_t N) {
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) if (!(fabsf(y[i] - ref[i]) <= 1e-6f)) bad++;   // NaN counts as bad
    return bad;
}

static int validate(int version, size_t N) {
    float *x = (float*)mallocCheck(N * 4), *y = (float*)mallocCheck(N * 4), *ref = (float*)mallocCheck(N * 4);
    for (size_t i = 0; i < N; i++) x[i] = 8.0f * rand_uniform();
    sigmoid_forward_cpu(ref, x, N);
    float *dx, *dy;
    cudaCheck(cudaMalloc(&dx, N * 4)); cudaCheck(cudaMalloc(&dy, N * 4));
    cudaCheck(cudaMemcpy(dx, x, N * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(dy, 0xFF, N * 4));   // NaN: an unwritten element fails
    sigmoid_forward(version, dy, dx, N, 0);
    cudaCheck(cudaMemcpy(y, dy, N * 4, cudaMemcpyDeviceToHost));
    size_t bad = count_bad(y, ref, N);
    printf("  version %d, N = %zu: %s (%zu outside 1e-6)\n", version, N, bad ? "FAIL" : "ok", bad);
    cudaCheck(cudaFree(dx)); cudaCheck(cudaFree(dy));
    free(x); free(y); free(ref);
    return bad == 0;
}

// ----------------------------------------------------------------------------
// the CPU-vs-GPU table

int main(int argc, char** argv) {
    require_gpu_or_exit("sigmoid");
    int only = argc > 1 ? atoi(argv[1]) : 0;
    char buf[256];
    const char* path = csv_path(argc > 2 ? argv[2] : NULL, "sigmoid", buf, sizeof(buf));
    print_gpu_name();

    int v_lo = only ? only : 1, v_hi = only ? only : 3, v_table = only ? only : 3;
    int failed = 0;
    printf("validation (|gpu - cpu| <= 1e-6, before timing):\n");
    const size_t sizes_val[] = {1, 3, 1000, 1001, 12345, 1 << 20};
    for (int v = v_lo; v <= v_hi; v++)
        for (int i = 0; i < 6; i++) failed += !validate(v, sizes_val[i]);

    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0)); cudaCheck(cudaEventCreate(&e1));
    FILE* csv = fopenCheck(path, "w");
    fprintf(csv, "op,N,cpu_ms,gpu_kernel_ms,gpu_total_ms,kernel_version,v1_ms,v2_ms,v3_ms\n");
    printf("\nsigmoid: y = 1/(1+exp(-x)), times in ms (GPU kernel: version %d; total: copy x in + kernel + y out, pinned)\n", v_table);
    printf("| N | CPU | GPU kernel | GPU incl. copies | v1 | v2 | v3 | kernel speed-up | total speed-up |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t N = 1000; N <= 100000000; N *= 10) {
        float *x, *y, *ref;
        cudaCheck(cudaMallocHost(&x, N * 4)); cudaCheck(cudaMallocHost(&y, N * 4));
        ref = (float*)mallocCheck(N * 4);
        for (size_t i = 0; i < N; i++) x[i] = 8.0f * rand_uniform();
        float *dx, *dy;
        cudaCheck(cudaMalloc(&dx, N * 4)); cudaCheck(cudaMalloc(&dy, N * 4));
        cudaCheck(cudaMemcpy(dx, x, N * 4, cudaMemcpyHostToDevice));

        // CPU: median of repeats
        int reps_cpu = N >= 10000000 ? 3 : (N >= 100000 ? 11 : 101);
        float t[101];
        sigmoid_forward_cpu(ref, x, N);   // warm-up (page faults)
        for (int r = 0; r < reps_cpu; r++) {
            double t0 = wall_ms();
            sigmoid_forward_cpu(ref, x, N);
            t[r] = (float)(wall_ms() - t0);
        }
        float cpu_ms = median(t, reps_cpu);

        // GPU kernels alone: median of 21 after 3 warm-ups
        float kms[4] = {0, 0, 0, 0};
        for (int v = v_lo; v <= v_hi; v++) {
            for (int r = 0; r < 3; r++) sigmoid_forward(v, dy, dx, N, 0);
            for (int r = 0; r < 21; r++) {
                cudaCheck(cudaEventRecord(e0));
                sigmoid_forward(v, dy, dx, N, 0);
                cudaCheck(cudaEventRecord(e1));
                cudaCheck(cudaEventSynchronize(e1));
                cudaCheck(cudaEventElapsedTime(&t[r], e0, e1));
            }
            kms[v] = median(t, 21);
        }

        // GPU including the copies: median of repeats
        int reps_tot = N >= 10000000 ? 5 : 21;
        for (int r = 0; r < reps_tot + 1; r++) {
            cudaCheck(cudaEventRecord(e0));
            cudaCheck(cudaMemcpyAsync(dx, x, N * 4, cudaMemcpyHostToDevice));
            sigmoid_forward(v_table, dy, dx, N, 0);
            cudaCheck(cudaMemcpyAsync(y, dy, N * 4, cudaMemcpyDeviceToHost));
            cudaCheck(cudaEventRecord(e1));
            cudaCheck(cudaEventSynchronize(e1));
            if (r > 0) cudaCheck(cudaEventElapsedTime(&t[r - 1], e0, e1));   // first is warm-up
        }
        float tot_ms = median(t, reps_tot);

        // validate what came back after the timing
        size_t bad = count_bad(y, ref, N);
        if (bad) { printf("  N = %zu: FAIL after timing (%zu outside 1e-6)\n", N, bad); failed++; }

        printf("| %.0e | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.1fx | %.2fx |\n", (double)N, cpu_ms, kms[v_table],
               tot_ms, kms[1], kms[2], kms[3], cpu_ms / kms[v_table], cpu_ms / tot_ms);
        fprintf(csv, "sigmoid,%zu,%.6f,%.6f,%.6f,%d,%.6f,%.6f,%.6f\n", N, cpu_ms, kms[v_table], tot_ms, v_table,
                kms[1], kms[2], kms[3]);
        cudaCheck(cudaFree(dx)); cudaCheck(cudaFree(dy));
        cudaCheck(cudaFreeHost(x)); cudaCheck(cudaFreeHost(y)); free(ref);
    }
    fclose(csv);
    printf("wrote %s\n", path);
    printf("sigmoid: %s\n", failed ? "FAILED" : "all versions validated");
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
