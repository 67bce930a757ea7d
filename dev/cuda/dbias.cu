/*
dbias: the bias gradient of a linear layer, the column sum of dout.

Key: B batch, OUT output features. dout (B, OUT) row-major -> dbias (OUT):
    dbias[o] = sum_b dout[b][o]
CPU twin: the dbias loop of matmul_backward_cpu (train_mlp_cpu.c); the reference here is the same sum in
double. Every version adds in a fixed order, with no atomics, so each gives the same bits on every run
(the project's rule for every gradient); each is run twice here and must.

versions:
  1: one thread per column: kernels/matmul.cuh matmul_backward_dbias_kernel, as the simple tier
     launches it (blocks of 128). OUT threads in all, each walking B rows one load after another:
     10 threads for the last layer of an MNIST model, so most of the GPU has nothing to do.
  2: the fast tier's (kernels/fast/ops/dbias.cuh matmul_backward_dbias_tiled_kernel, through its launcher,
     without the fused SGD step): a block of 32 x 32 threads per 32 columns; thread (x, y) sums rows
     y, y + 32, ... of column x (a warp reads 32 neighbouring floats of one row), then the 32 partial
     sums of each column are added by a tree in shared memory. 32x the threads of version 1, but
     still OUT / 32 blocks: for a tall dout (B in the thousands) and few columns, a block or two
     walk all of it.
  3: the fast tier's launcher given its partial sums (what the trainer runs): version 2 split over
     the rows, in two passes: the rows are cut into S chunks, a block per 32 columns and chunk writes
     its column sums to partial[chunk][o] (version 2's loop and tree on its rows), then a second
     kernel adds each column's S partial sums in the order 0 .. S-1. S comes from the shape alone
     (dbias_chunks: about 256 blocks, at least 256 rows a chunk), so the bits do not depend on the
     GPU; with S = 1 (small or short dout, where the second launch would cost more than it saves)
     the first pass writes dbias and this is version 2 exactly.

Run:
  ./dbias            validate every version (odd shapes, then each benchmark shape before and after its
                     timing), time them on B in {64, 256, 1024, 8192} x OUT in {10, 128, 1024, 4096}
  ./dbias 3          the same for version 3 only
  ./dbias 0 x.csv    all versions, the CSV to x.csv (default dev/cuda/out/dbias.csv)
Timing: bench_ms (common.h): the median of back-to-back calls after a warm-up; a call is the whole
operation (both passes of version 3). GB/s counts the bytes it must move: dout read once and dbias
written once, 4 (B OUT + OUT) bytes (version 3's partial sums are extra traffic, not counted).
Tolerance: 1e-5 relative-norm error (||out - ref|| / ||ref||) against the double reference: float sums
of up to 8192 values in [-1, 1) land near 1e-7..1e-6.
*/
#include "common.h"
#include "../../kernels/matmul.cuh"          // version 1: matmul_backward_dbias_kernel
#include "../../kernels/fast/ops/dbias.cuh"  // version 2: matmul_backward_dbias_fast

// ----------------------------------------------------------------------------
// CPU reference, in double

void dbias_cpu(double* dbias, const float* dout, int B, int OUT) {
    for (int o = 0; o < OUT; o++) dbias[o] = 0.0;
    for (int b = 0; b < B; b++)
        for (int o = 0; o < OUT; o++) dbias[o] += dout[(size_t)b * OUT + o];
}

// ----------------------------------------------------------------------------
// launchers: dbias (OUT) = column sums of dout (B, OUT); partial: version 3's S * OUT floats

void dbias_backward(int version, float* dbias, const float* dout, float* partial, int B, int OUT) {
    switch (version) {
        case 1:   // as kernels/matmul.cuh's matmul_backward launches it
            matmul_backward_dbias_kernel<<<CEIL_DIV(OUT, 128), 128>>>(dbias, dout, B, OUT);
            cudaCheck(cudaGetLastError());
            break;
        case 2:   // the fast tier's launcher, no SGD step fused in
            matmul_backward_dbias_fast(dbias, dout, B, OUT, NULL, NULL, 0.0f, 0.0f, 0.0f, 0);
            break;
        case 3:   // the same launcher with its partial sums: the rows in chunks (dbias_chunks)
            matmul_backward_dbias_fast(dbias, dout, B, OUT, NULL, NULL, 0.0f, 0.0f, 0.0f, 0, partial);
            break;
        default: fprintf(stderr, "dbias: no version %d (1..3)\n", version); exit(EXIT_FAILURE);
    }
}

// ----------------------------------------------------------------------------
// validation and timing

typedef struct {
    int B, OUT;
    float *dout, *dbias, *partial;   // device
    float* hdout;
    double* ref;
} Bufs;

static void setup(Bufs* b, int B, int OUT) {
    b->B = B;
    b->OUT = OUT;
    const size_t n = (size_t)B * OUT;
    b->hdout = (float*)mallocCheck(n * sizeof(float));
    fill_uniform(b->hdout, n);
    b->ref = (double*)mallocCheck(OUT * sizeof(double));
    dbias_cpu(b->ref, b->hdout, B, OUT);
    cudaCheck(cudaMalloc(&b->dout, n * sizeof(float)));
    cudaCheck(cudaMalloc(&b->dbias, OUT * sizeof(float)));
    cudaCheck(cudaMalloc(&b->partial, (dbias_partial_floats(B, OUT) + 1) * sizeof(float)));
    cudaCheck(cudaMemcpy(b->dout, b->hdout, n * sizeof(float), cudaMemcpyHostToDevice));
}

static void teardown(Bufs* b) {
    cudaCheck(cudaFree(b->dout)); cudaCheck(cudaFree(b->dbias)); cudaCheck(cudaFree(b->partial));
    free(b->hdout); free(b->ref);
}

static double rel_err(const float* out, const double* ref, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)out[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (num != num) return INFINITY;   // NaN: an unwritten or broken element
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

#define TOL 1e-5
// poison, run, compare; run again and demand the same bits
static int validate(int version, Bufs* b, const char* when, int verbose) {
    float *h = (float*)mallocCheck(b->OUT * sizeof(float)), *h2 = (float*)mallocCheck(b->OUT * sizeof(float));
    for (int r = 0; r < 2; r++) {
        cudaCheck(cudaMemset(b->dbias, 0xFF, b->OUT * sizeof(float)));
        dbias_backward(version, b->dbias, b->dout, b->partial, b->B, b->OUT);
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(r ? h2 : h, b->dbias, b->OUT * sizeof(float), cudaMemcpyDeviceToHost));
    }
    const double err = rel_err(h, b->ref, b->OUT);
    const int same = memcmp(h, h2, b->OUT * sizeof(float)) == 0;
    const int ok = err < TOL && same;
    if (verbose || !ok)
        printf("  v%d B=%-5d OUT=%-5d rel err %.1e (tol %.0e)%s %s%s\n", version, b->B, b->OUT, err, TOL,
               same ? "" : " NOT REPEATABLE", ok ? "ok" : "FAIL", when);
    free(h); free(h2);
    return ok;
}

typedef struct { int version; Bufs* b; } Call;
static void call(void* ctx) {
    const Call* c = (const Call*)ctx;
    dbias_backward(c->version, c->b->dbias, c->b->dout, c->b->partial, c->b->B, c->b->OUT);
}

int main(int argc, char** argv) {
    require_gpu_or_exit("dbias");
    print_gpu_name();
    const int only = argc > 1 ? atoi(argv[1]) : 0;
    if (only < 0 || only > 3) {
        fprintf(stderr, "usage: %s [version 1..3, 0 = all] [csv path]\n", argv[0]);
        return EXIT_FAILURE;
    }
    char buf[256];
    const char* path = csv_path(argc > 2 ? argv[2] : NULL, "dbias", buf, sizeof(buf));
    const int v_lo = only ? only : 1, v_hi = only ? only : 3;
    int passed = 0, failed = 0;

    printf("validation on odd shapes (against a double CPU reference, dbias NaN-poisoned, each run twice):\n");
    const int odd[][2] = {{1, 1}, {7, 3}, {33, 37}, {1000, 33}, {3000, 5}, {513, 1025}, {20000, 7}};
    for (int i = 0; i < 7; i++) {
        Bufs b;
        setup(&b, odd[i][0], odd[i][1]);
        for (int v = v_lo; v <= v_hi; v++) {
            const int ok = validate(v, &b, "", 0);
            passed += ok; failed += !ok;
        }
        teardown(&b);
    }
    printf("  %d passed, %d failed\n", passed, failed);

    const int Bs[4] = {64, 256, 1024, 8192}, OUTs[4] = {10, 128, 1024, 4096};
    FILE* csv = fopenCheck(path, "w");
    fprintf(csv, "version,B,OUT,chunks,ms,gbps\n");
    printf("\nbias gradient, the column sum of dout (B, OUT): ms per call (GB/s of the 4 (B OUT + OUT) bytes it must "
           "move); S: version 3's row chunks\n");
    printf("| OUT | B |");
    for (int v = v_lo; v <= v_hi; v++) printf(" v%d |", v);
    printf(" S |\n|---|---|");
    for (int v = v_lo; v <= v_hi; v++) printf("---:|");
    printf("---:|\n");
    for (int oi = 0; oi < 4; oi++)
        for (int bi = 0; bi < 4; bi++) {
            const int B = Bs[bi], OUT = OUTs[oi];
            Bufs b;
            setup(&b, B, OUT);
            const double bytes = 4.0 * ((double)B * OUT + OUT);
            float ms[4] = {0, 0, 0, 0};
            for (int v = v_lo; v <= v_hi; v++) {
                int ok = validate(v, &b, " (before timing)", 0);
                Call c = {v, &b};
                ms[v] = bench_ms(call, &c);
                ok = validate(v, &b, " (after timing)", 0) && ok;
                passed += ok; failed += !ok;
                fprintf(csv, "%d,%d,%d,%d,%.6f,%.1f\n", v, B, OUT, dbias_chunks(B, OUT), ms[v], bytes / ms[v] * 1e-6);
            }
            printf("| %d | %d |", OUT, B);
            for (int v = v_lo; v <= v_hi; v++) printf(" %.4f (%.0f) |", ms[v], bytes / ms[v] * 1e-6);
            printf(" %d |\n", dbias_chunks(B, OUT));
            fflush(stdout);
            teardown(&b);
        }
    fclose(csv);
    printf("wrote %s\n", path);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
