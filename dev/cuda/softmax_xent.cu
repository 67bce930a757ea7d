/*
softmax_xent: softmax + cross-entropy on the logits, forward and backward in one pass, mean over the batch.

Key: B batch, C classes. logits (B, C), labels (B) ->
    loss_b       = logsumexp(logits_b) - logits_b[label_b]      (the row's max subtracted first: stable)
    loss         = (1/B) sum_b loss_b                          (one float)
    dlogits(B,C) = (softmax(logits_b) - onehot(label_b)) / B
CPU twin: softmax_xent_forward_backward_cpu (train_mlp_cpu.c); the reference here is the same math in double.

versions:
  1: one thread per row: kernels/softmax_xent.cuh as the simple trainer runs it (its launcher
     softmax_xent_forward_backward): each thread walks its row three times (max, sum of exps, dlogits),
     then loss_mean_kernel adds the B losses in one block, in a fixed order. Two launches. A warp's 32
     threads read 32 different rows: every load touches 32 cache lines.
  2: one warp per row: the lanes split the row (lane l takes columns l, l+32, ...), so a warp's loads
     are 128 neighbouring bytes; the max and the sum are combined across the lanes with shuffles. Still
     three passes over the row in global memory and two expf per element; the mean by loss_mean_kernel.
  3: the fast tier's (kernels/fast/ops/softmax.cuh softmax_xent_fused_kernel, through its launcher):
     version 1's two kernels in one launch: one block of 1024 threads, a thread per row (rows t,
     t + 1024, ...), then the same block adds up the losses. One launch instead of two, but one SM.
     (The fast trainer runs the fused head of kernels/fast/ops/head.cuh instead where C <= 32.)
  4: version 2 with the row held in registers: each lane loads its elements once, keeps them, turns
     them into exps in place, and writes dlogits from there: one read of the row from global memory
     instead of three and one expf per element instead of two. The same sums in the same order as
     version 2, so it should give the same bits (the table's last column says whether it does).
     C up to 1024 (32 values per lane); beyond that it is version 2.
     The mean by loss_mean_kernel.
Every version sums in a fixed order (no atomics): each is run twice and must give the same bits.

Run:
  ./softmax_xent            validate every version (odd shapes, then each benchmark shape before and after
                            its timing), time them on C in {10, 100, 1000} x B in {64, 256, 4096}
  ./softmax_xent 4          the same for version 4 only
  ./softmax_xent 0 x.csv    all versions, the CSV to x.csv (default dev/cuda/out/softmax_xent.csv)
Timing: bench_ms (common.h): the median of back-to-back calls after a warm-up; a call is the whole
operation (both launches where there are two). GB/s counts the bytes the operation must move: the
logits and labels read once, dlogits, the losses and the loss written once: 4 (2BC + 2B + 1) bytes.
Tolerances, against the double reference: dlogits and the losses 1e-5 relative-norm error
(||out - ref|| / ||ref||), the mean loss 1e-5 relative (absolute below 1): float sums of up to 1000 exps, and expf within
a few ulp, land near 1e-7..1e-6.
*/
#include "common.h"
#include "../../kernels/softmax_xent.cuh"      // version 1; softmax_xent_row, loss_mean_kernel, LOSS_THREADS
#include "../../kernels/fast/ops/softmax.cuh"  // version 3

// ----------------------------------------------------------------------------
// CPU reference, in double; returns the mean loss

double softmax_xent_cpu(double* dlogits, double* losses, const float* logits, const int* labels, int B, int C) {
    double total = 0.0;
    for (int b = 0; b < B; b++) {
        const float* z = logits + (size_t)b * C;
        double maxz = z[0];
        for (int c = 1; c < C; c++) maxz = z[c] > maxz ? z[c] : maxz;
        double sum = 0.0;
        for (int c = 0; c < C; c++) sum += exp(z[c] - maxz);
        losses[b] = log(sum) + maxz - z[labels[b]];
        total += losses[b];
        for (int c = 0; c < C; c++)
            dlogits[(size_t)b * C + c] = (exp(z[c] - maxz) / sum - (c == labels[b] ? 1.0 : 0.0)) / B;
    }
    return total / B;
}

// ----------------------------------------------------------------------------
// kernels (versions 1 and 3 are the trainers' own, from the headers above)

// the max and the sum over a warp, by a butterfly of shuffles: every lane ends with the same value,
// reached in the same order on every run
__device__ __forceinline__ float warp_max(float v) {
    for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// version 2: one warp per row, three passes over the row (blocks of 128 threads: 4 rows)
__global__ void softmax_xent_kernel2(float* dlogits, float* losses, const float* logits, const int* labels, int B,
                                     int C) {
    const int b = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (b >= B) return;   // the whole warp: b is the same for its 32 lanes
    const float* z = logits + (size_t)b * C;
    float maxz = -INFINITY;
    for (int c = lane; c < C; c += 32) maxz = fmaxf(maxz, z[c]);
    maxz = warp_max(maxz);
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) sum += expf(z[c] - maxz);
    sum = warp_sum(sum);
    const int label = labels[b];
    float* d = dlogits + (size_t)b * C;
    for (int c = lane; c < C; c += 32) d[c] = (expf(z[c] - maxz) / sum - (c == label ? 1.0f : 0.0f)) / B;
    if (lane == 0) losses[b] = logf(sum) + maxz - z[label];
}

// version 4: one warp per row, the row in registers: lane l holds columns l + 32 j, j < PER (C <= 32 PER)
template <int PER>
__global__ void softmax_xent_kernel4(float* dlogits, float* losses, const float* logits, const int* labels, int B,
                                     int C) {
    const int b = (blockIdx.x * blockDim.x + threadIdx.x) / 32, lane = threadIdx.x % 32;
    if (b >= B) return;
    const float* z = logits + (size_t)b * C;
    float v[PER];
    float maxz = -INFINITY;
    #pragma unroll
    for (int j = 0; j < PER; j++) {   // the row's only read: PER coalesced loads per lane
        const int c = lane + 32 * j;
        v[j] = c < C ? z[c] : -INFINITY;
        maxz = fmaxf(maxz, v[j]);
    }
    maxz = warp_max(maxz);
    float sum = 0.0f;
    #pragma unroll
    for (int j = 0; j < PER; j++) {   // exp(-inf) = 0 past the row's end
        v[j] = expf(v[j] - maxz);
        sum += v[j];
    }
    sum = warp_sum(sum);
    const int label = labels[b];
    float* d = dlogits + (size_t)b * C;
    #pragma unroll
    for (int j = 0; j < PER; j++) {
        const int c = lane + 32 * j;
        if (c < C) d[c] = (v[j] / sum - (c == label ? 1.0f : 0.0f)) / B;
    }
    if (lane == 0) losses[b] = logf(sum) + maxz - z[label];   // z[label]: one load (its lane's register
                                                               // would need a run-time index into v)
}

// ----------------------------------------------------------------------------
// launchers: every version computes dlogits (B, C), losses (B) and the mean loss from logits, labels

typedef struct {
    int B, C;
    float *logits, *dlogits, *losses, *loss;   // device
    int* labels;
    float* step_losses;   // version 3 writes the mean to step_losses[*step] and advances *step
    int* step;
    long long step_calls;   // version 3's calls since *step was last reset (host side)
} Bufs;

#define STEP_CAPACITY (1 << 20)   // version 3's step_losses entries; *step is reset before it runs out

void softmax_xent(int version, Bufs* b) {
    const int B = b->B, C = b->C;
    switch (version) {
        case 1:   // the simple tier's launcher: its kernel, then loss_mean_kernel
            softmax_xent_forward_backward(b->loss, b->dlogits, b->losses, b->logits, b->labels, B, C);
            return;
        case 2:
            softmax_xent_kernel2<<<CEIL_DIV(B, 4), 128>>>(b->dlogits, b->losses, b->logits, b->labels, B, C);
            cudaCheck(cudaGetLastError());
            break;
        case 3:   // the fast tier's launcher, without programmatic dependent launch (pdl_allowed = 0 in main)
            if (++b->step_calls >= STEP_CAPACITY) {
                cudaCheck(cudaMemsetAsync(b->step, 0, sizeof(int)));
                b->step_calls = 1;
            }
            softmax_xent_forward_backward_fast(b->dlogits, b->losses, b->step_losses, b->step, b->logits, b->labels,
                                               B, C, 0);
            return;
        case 4:
            if (C <= 32) softmax_xent_kernel4<1><<<CEIL_DIV(B, 4), 128>>>(b->dlogits, b->losses, b->logits, b->labels, B, C);
            else if (C <= 128) softmax_xent_kernel4<4><<<CEIL_DIV(B, 4), 128>>>(b->dlogits, b->losses, b->logits, b->labels, B, C);
            else if (C <= 1024) softmax_xent_kernel4<32><<<CEIL_DIV(B, 4), 128>>>(b->dlogits, b->losses, b->logits, b->labels, B, C);
            else softmax_xent_kernel2<<<CEIL_DIV(B, 4), 128>>>(b->dlogits, b->losses, b->logits, b->labels, B, C);
            cudaCheck(cudaGetLastError());
            break;
        default: fprintf(stderr, "softmax_xent: no version %d (1..4)\n", version); exit(EXIT_FAILURE);
    }
    loss_mean_kernel<<<1, LOSS_THREADS>>>(b->loss, b->losses, B);   // versions 2 and 4: the simple tier's mean
    cudaCheck(cudaGetLastError());
}

// ----------------------------------------------------------------------------
// validation

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

typedef struct {
    float* hlogits;
    int* hlabels;
    double *ref_d, *ref_l, ref_loss;
} Host;

static void setup(Bufs* b, Host* h, int B, int C) {
    memset(b, 0, sizeof(*b));
    b->B = B;
    b->C = C;
    const size_t n = (size_t)B * C;
    h->hlogits = (float*)mallocCheck(n * sizeof(float));
    h->hlabels = (int*)mallocCheck(B * sizeof(int));
    for (size_t i = 0; i < n; i++) h->hlogits[i] = 4.0f * rand_uniform();   // logits in [-4, 4)
    for (int i = 0; i < B; i++) {
        int l = (int)((rand_uniform() + 1.0f) * 0.5f * C);
        h->hlabels[i] = l < 0 ? 0 : l >= C ? C - 1 : l;
    }
    h->ref_d = (double*)mallocCheck(n * sizeof(double));
    h->ref_l = (double*)mallocCheck(B * sizeof(double));
    h->ref_loss = softmax_xent_cpu(h->ref_d, h->ref_l, h->hlogits, h->hlabels, B, C);
    cudaCheck(cudaMalloc(&b->logits, n * sizeof(float)));
    cudaCheck(cudaMalloc(&b->dlogits, n * sizeof(float)));
    cudaCheck(cudaMalloc(&b->losses, B * sizeof(float)));
    cudaCheck(cudaMalloc(&b->loss, sizeof(float)));
    cudaCheck(cudaMalloc(&b->labels, B * sizeof(int)));
    cudaCheck(cudaMalloc(&b->step_losses, STEP_CAPACITY * sizeof(float)));
    cudaCheck(cudaMalloc(&b->step, sizeof(int)));
    cudaCheck(cudaMemset(b->step, 0, sizeof(int)));
    cudaCheck(cudaMemcpy(b->logits, h->hlogits, n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaMemcpy(b->labels, h->hlabels, B * sizeof(int), cudaMemcpyHostToDevice));
}

static void teardown(Bufs* b, Host* h) {
    cudaCheck(cudaFree(b->logits)); cudaCheck(cudaFree(b->dlogits)); cudaCheck(cudaFree(b->losses));
    cudaCheck(cudaFree(b->loss)); cudaCheck(cudaFree(b->labels)); cudaCheck(cudaFree(b->step_losses));
    cudaCheck(cudaFree(b->step));
    free(h->hlogits); free(h->hlabels); free(h->ref_d); free(h->ref_l);
}

// one run from NaN-filled outputs: dlogits, losses and the mean loss copied back
static void run_poisoned(int version, Bufs* b, float* d, float* l, float* loss) {
    const size_t n = (size_t)b->B * b->C;
    cudaCheck(cudaMemset(b->dlogits, 0xFF, n * sizeof(float)));
    cudaCheck(cudaMemset(b->losses, 0xFF, b->B * sizeof(float)));
    cudaCheck(cudaMemset(b->loss, 0xFF, sizeof(float)));
    cudaCheck(cudaMemset(b->step_losses, 0xFF, sizeof(float)));
    cudaCheck(cudaMemset(b->step, 0, sizeof(int)));   // version 3 then writes step_losses[0]
    b->step_calls = 0;
    softmax_xent(version, b);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(d, b->dlogits, n * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(l, b->losses, b->B * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(loss, version == 3 ? b->step_losses : b->loss, sizeof(float), cudaMemcpyDeviceToHost));
}

#define TOL 1e-5
static int validate(int version, Bufs* b, const Host* h, const char* when, int verbose) {
    const size_t n = (size_t)b->B * b->C;
    float *d = (float*)mallocCheck(n * sizeof(float)), *d2 = (float*)mallocCheck(n * sizeof(float));
    float *l = (float*)mallocCheck(b->B * sizeof(float)), *l2 = (float*)mallocCheck(b->B * sizeof(float));
    float loss, loss2;
    run_poisoned(version, b, d, l, &loss);
    run_poisoned(version, b, d2, l2, &loss2);   // again: the same bits
    const double ed = rel_err(d, h->ref_d, n), el = rel_err(l, h->ref_l, b->B);
    const double em = fabs(loss - h->ref_loss) / fmax(fabs(h->ref_loss), 1.0);   // (absolute below 1: C = 1 gives 0)
    const int same = memcmp(d, d2, n * sizeof(float)) == 0 && memcmp(l, l2, b->B * sizeof(float)) == 0 &&
                     memcmp(&loss, &loss2, sizeof(float)) == 0;
    const int ok = ed < TOL && el < TOL && em < TOL && same;   // (a NaN fails every comparison)
    if (verbose || !ok)
        printf("  v%d B=%-5d C=%-5d dlogits %.1e losses %.1e loss %.1e (tol %.0e)%s %s%s\n", version, b->B, b->C, ed, el,
               em, TOL, same ? "" : " NOT REPEATABLE", ok ? "ok" : "FAIL", when);
    free(d); free(d2); free(l); free(l2);
    return ok;
}

// Whether versions 2 and 4 give the same bits (they should: the same sums in the same order), for the log
static int same_bits_2_4(Bufs* b) {
    const size_t n = (size_t)b->B * b->C;
    float *d2 = (float*)mallocCheck(n * sizeof(float)), *d4 = (float*)mallocCheck(n * sizeof(float));
    float *l2 = (float*)mallocCheck(b->B * sizeof(float)), *l4 = (float*)mallocCheck(b->B * sizeof(float));
    float m2, m4;
    run_poisoned(2, b, d2, l2, &m2);
    run_poisoned(4, b, d4, l4, &m4);
    const int same = memcmp(d2, d4, n * sizeof(float)) == 0 && memcmp(l2, l4, b->B * sizeof(float)) == 0 &&
                     memcmp(&m2, &m4, sizeof(float)) == 0;
    free(d2); free(d4); free(l2); free(l4);
    return same;
}

// ----------------------------------------------------------------------------
// timing

typedef struct { int version; Bufs* b; } Call;
static void call(void* ctx) {
    const Call* c = (const Call*)ctx;
    softmax_xent(c->version, c->b);
}

int main(int argc, char** argv) {
    require_gpu_or_exit("softmax_xent");
    print_gpu_name();
    pdl_allowed = 0;   // version 3 launched plainly, like the others (kernels/fast/ops/pdl.cuh)
    const int only = argc > 1 ? atoi(argv[1]) : 0;
    if (only < 0 || only > 4) {
        fprintf(stderr, "usage: %s [version 1..4, 0 = all] [csv path]\n", argv[0]);
        return EXIT_FAILURE;
    }
    char buf[256];
    const char* path = csv_path(argc > 2 ? argv[2] : NULL, "softmax_xent", buf, sizeof(buf));
    const int v_lo = only ? only : 1, v_hi = only ? only : 4;
    int passed = 0, failed = 0;

    printf("validation on odd shapes (against a double CPU reference, outputs NaN-poisoned, each run twice):\n");
    const int odd[][2] = {{1, 1}, {7, 3}, {33, 37}, {65, 129}, {1025, 10}, {5, 1025}, {3, 2000}};
    for (int i = 0; i < 7; i++) {
        Bufs b; Host h;
        setup(&b, &h, odd[i][0], odd[i][1]);
        for (int v = v_lo; v <= v_hi; v++) {
            const int ok = validate(v, &b, &h, "", 0);
            passed += ok; failed += !ok;
        }
        teardown(&b, &h);
    }
    printf("  %d passed, %d failed\n", passed, failed);

    const int Cs[3] = {10, 100, 1000}, Bs[3] = {64, 256, 4096};
    FILE* csv = fopenCheck(path, "w");
    fprintf(csv, "version,B,C,ms,gbps\n");
    printf("\nsoftmax + cross-entropy, forward and backward with the mean loss: ms per call (GB/s of the "
           "4 (2BC + 2B + 1) bytes it must move)\n");
    const int compare = v_lo <= 2 && v_hi >= 4;   // the last column: v2 and v4 give the same bits?
    printf("| C | B |");
    for (int v = v_lo; v <= v_hi; v++) printf(" v%d |", v);
    printf("%s\n|---|---|", compare ? " v4 = v2, bitwise |" : "");
    for (int v = v_lo; v <= v_hi; v++) printf("---:|");
    printf("%s\n", compare ? "---|" : "");
    for (int ci = 0; ci < 3; ci++)
        for (int bi = 0; bi < 3; bi++) {
            const int B = Bs[bi], C = Cs[ci];
            Bufs b; Host h;
            setup(&b, &h, B, C);
            const double bytes = 4.0 * (2.0 * B * C + 2.0 * B + 1.0);
            float ms[5] = {0, 0, 0, 0, 0};
            for (int v = v_lo; v <= v_hi; v++) {
                int ok = validate(v, &b, &h, " (before timing)", 0);
                Call c = {v, &b};
                b.step_calls = 0;
                cudaCheck(cudaMemset(b.step, 0, sizeof(int)));
                ms[v] = bench_ms(call, &c);
                ok = validate(v, &b, &h, " (after timing)", 0) && ok;
                passed += ok; failed += !ok;
                fprintf(csv, "%d,%d,%d,%.6f,%.1f\n", v, B, C, ms[v], bytes / ms[v] * 1e-6);
            }
            printf("| %d | %d |", C, B);
            for (int v = v_lo; v <= v_hi; v++) printf(" %.4f (%.0f) |", ms[v], bytes / ms[v] * 1e-6);
            if (compare) printf(" %s |", same_bits_2_4(&b) ? "yes" : "no");
            printf("\n");
            fflush(stdout);
            teardown(&b, &h);
        }
    fclose(csv);
    printf("wrote %s\n", path);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
