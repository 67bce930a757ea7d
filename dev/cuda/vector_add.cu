/*
vector_add: c = a + b over N floats, the first kernel a reader meets.

versions:
  1: one thread per element, a grid of blocks, a bounds check
  2: a grid-stride loop (a fixed grid that walks the whole array)
  3: float4 loads and stores (16 bytes per thread per access), grid-stride, scalar tail

Compile: make -C dev/cuda (or nvcc -O3 -arch=sm_90 vector_add.cu -o vector_add)
Run:
  ./vector_add           validate every version, then the CPU-vs-GPU table for N = 1e3 .. 1e8
  ./vector_add 2         validate and time version 2 only (the table's GPU column uses it)
  ./vector_add 3 x.csv   ... and write the table to x.csv (default dev/cuda/out/vector_add.csv)

The table: CPU time (one thread, -O3), the GPU kernel time (CUDA events, median of repeats after a
warm-up), and the GPU time including the copies of a and b to the device and of c back (pinned host
memory). A plain addition moves 12 bytes per 1 FLOP: the copies cost more than the kernel.
*/
#include "common.h"

// ----------------------------------------------------------------------------
// CPU reference

void vector_add_cpu(float* c, const float* a, const float* b, size_t N) {
    for (size_t i = 0; i < N; i++) c[i] = a[i] + b[i];
}

// ----------------------------------------------------------------------------
// kernels

// version 1: one thread per element
__global__ void vector_add_kernel1(float* c, const float* a, const float* b, size_t N) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < N) c[i] = a[i] + b[i];
}

// version 2: grid-stride loop
__global__ void vector_add_kernel2(float* c, const float* a, const float* b, size_t N) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < N; i += (size_t)gridDim.x * blockDim.x)
        c[i] = a[i] + b[i];
}

// version 3: float4, grid-stride; the last N % 4 elements one by one (cudaMalloc'd pointers are 256-byte aligned)
__global__ void vector_add_kernel3(float* c, const float* a, const float* b, size_t N) {
    size_t N4 = N / 4;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (size_t i = t; i < N4; i += stride) {
        float4 x = reinterpret_cast<const float4*>(a)[i];
        float4 y = reinterpret_cast<const float4*>(b)[i];
        reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    for (size_t i = N4 * 4 + t; i < N; i += stride) c[i] = a[i] + b[i];
}

// ----------------------------------------------------------------------------
// launchers

static int num_sms(void) {
    int dev, sms;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

void vector_add(int version, float* c, const float* a, const float* b, size_t N, cudaStream_t s) {
    const int block = 256;
    switch (version) {
        case 1: vector_add_kernel1<<<(unsigned)((N + block - 1) / block), block, 0, s>>>(c, a, b, N); break;
        case 2: vector_add_kernel2<<<num_sms() * 8, block, 0, s>>>(c, a, b, N); break;
        case 3: {
            size_t want = (N / 4 + block - 1) / block;
            size_t cap = (size_t)num_sms() * 8;
            vector_add_kernel3<<<(unsigned)(want < cap ? (want > 0 ? want : 1) : cap), block, 0, s>>>(c, a, b, N);
            break;
        }
        default: fprintf(stderr, "vector_add: no version %d (1..3)\n", version); exit(EXIT_FAILURE);
    }
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// validation: a + b is exact in FP32 on both sides, so the results must be bitwise equal

static int validate(int version, size_t N) {
    float *a = (float*)mallocCheck(N * 4), *b = (float*)mallocCheck(N * 4);
    float *c = (float*)mallocCheck(N * 4), *ref = (float*)mallocCheck(N * 4);
    fill_uniform(a, N); fill_uniform(b, N);
    vector_add_cpu(ref, a, b, N);
    float *da, *db, *dc;
    cudaCheck(cudaMalloc(&da, N * 4)); cudaCheck(cudaMalloc(&db, N * 4)); cudaCheck(cudaMalloc(&dc, N * 4));
    cudaCheck(cudaMemcpy(da, a, N * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(db, b, N * 4, cudaMemcpyHostToDevice));
    cudaCheck(cudaMemset(dc, 0xFF, N * 4));   // NaN: an unwritten element fails
    vector_add(version, dc, da, db, N, 0);
    cudaCheck(cudaMemcpy(c, dc, N * 4, cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) if (!(c[i] == ref[i])) bad++;
    printf("  version %d, N = %zu: %s (%zu mismatches)\n", version, N, bad ? "FAIL" : "ok", bad);
    cudaCheck(cudaFree(da)); cudaCheck(cudaFree(db)); cudaCheck(cudaFree(dc));
    free(a); free(b); free(c); free(ref);
    return bad == 0;
}

// ----------------------------------------------------------------------------
// the CPU-vs-GPU table

int main(int argc, char** argv) {
    require_gpu_or_exit("vector_add");
    int only = argc > 1 ? atoi(argv[1]) : 0;
    char buf[256];
    const char* path = csv_path(argc > 2 ? argv[2] : NULL, "vector_add", buf, sizeof(buf));
    print_gpu_name();

    int v_lo = only ? only : 1, v_hi = only ? only : 3, v_table = only ? only : 3;
    int failed = 0;
    printf("validation (bitwise against the CPU, before timing):\n");
    const size_t sizes_val[] = {1, 3, 1000, 1001, 12345, 1 << 20};
    for (int v = v_lo; v <= v_hi; v++)
        for (int i = 0; i < 6; i++) failed += !validate(v, sizes_val[i]);

    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0)); cudaCheck(cudaEventCreate(&e1));
    FILE* csv = fopenCheck(path, "w");
    fprintf(csv, "op,N,cpu_ms,gpu_kernel_ms,gpu_total_ms,kernel_version,v1_ms,v2_ms,v3_ms\n");
    printf("\nvector_add: c = a + b, times in ms (GPU kernel: version %d; total: copies a,b in + kernel + c out, pinned)\n", v_table);
    printf("| N | CPU | GPU kernel | GPU incl. copies | v1 | v2 | v3 | kernel speed-up | total speed-up |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (size_t N = 1000; N <= 100000000; N *= 10) {
        float *a, *b, *c;
        cudaCheck(cudaMallocHost(&a, N * 4)); cudaCheck(cudaMallocHost(&b, N * 4)); cudaCheck(cudaMallocHost(&c, N * 4));
        fill_uniform(a, N); fill_uniform(b, N);
        float *da, *db, *dc;
        cudaCheck(cudaMalloc(&da, N * 4)); cudaCheck(cudaMalloc(&db, N * 4)); cudaCheck(cudaMalloc(&dc, N * 4));
        cudaCheck(cudaMemcpy(da, a, N * 4, cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(db, b, N * 4, cudaMemcpyHostToDevice));

        // CPU: median of repeats
        int reps_cpu = N >= 10000000 ? 3 : (N >= 100000 ? 11 : 101);
        float t[101];
        vector_add_cpu(c, a, b, N);   // warm-up (page faults)
        for (int r = 0; r < reps_cpu; r++) {
            double t0 = wall_ms();
            vector_add_cpu(c, a, b, N);
            t[r] = (float)(wall_ms() - t0);
        }
        float cpu_ms = median(t, reps_cpu);

        // GPU kernels alone: median of 21 after 3 warm-ups
        float kms[4] = {0, 0, 0, 0};
        for (int v = v_lo; v <= v_hi; v++) {
            for (int r = 0; r < 3; r++) vector_add(v, dc, da, db, N, 0);
            for (int r = 0; r < 21; r++) {
                cudaCheck(cudaEventRecord(e0));
                vector_add(v, dc, da, db, N, 0);
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
            cudaCheck(cudaMemcpyAsync(da, a, N * 4, cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpyAsync(db, b, N * 4, cudaMemcpyHostToDevice));
            vector_add(v_table, dc, da, db, N, 0);
            cudaCheck(cudaMemcpyAsync(c, dc, N * 4, cudaMemcpyDeviceToHost));
            cudaCheck(cudaEventRecord(e1));
            cudaCheck(cudaEventSynchronize(e1));
            if (r > 0) cudaCheck(cudaEventElapsedTime(&t[r - 1], e0, e1));   // first is warm-up
        }
        float tot_ms = median(t, reps_tot);

        // validate what came back after the timing
        size_t bad = 0;
        for (size_t i = 0; i < N; i++) if (!(c[i] == a[i] + b[i])) bad++;
        if (bad) { printf("  N = %zu: FAIL after timing (%zu mismatches)\n", N, bad); failed++; }

        printf("| %.0e | %.4f | %.4f | %.4f | %.4f | %.4f | %.4f | %.1fx | %.2fx |\n", (double)N, cpu_ms, kms[v_table],
               tot_ms, kms[1], kms[2], kms[3], cpu_ms / kms[v_table], cpu_ms / tot_ms);
        fprintf(csv, "vector_add,%zu,%.6f,%.6f,%.6f,%d,%.6f,%.6f,%.6f\n", N, cpu_ms, kms[v_table], tot_ms, v_table,
                kms[1], kms[2], kms[3]);
        cudaCheck(cudaFree(da)); cudaCheck(cudaFree(db)); cudaCheck(cudaFree(dc));
        cudaCheck(cudaFreeHost(a)); cudaCheck(cudaFreeHost(b)); cudaCheck(cudaFreeHost(c));
    }
    fclose(csv);
    printf("wrote %s\n", path);
    printf("vector_add: %s\n", failed ? "FAILED" : "all versions validated");
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
