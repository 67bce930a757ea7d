/*
kernels/fast/matmul/tune.cu: the autotune of kernels/fast/matmul/tune.h: every candidate plan of a
product timed on this GPU, on operands of its own, and the cache lookups around it. Compiled once,
and linked into the fast trainer, test_mlp and dev/cuda's benchmarks with the rest of the library.

How a candidate is timed, so that the numbers rank kernels and not the host:
  - the GPU's clocks are raised first by running the cost model's plan for a few milliseconds;
  - each candidate runs once untimed (the first launch of a kernel loads its code);
  - every timed launch is queued behind a short delay kernel, so the host has enqueued the launches
    and the closing event before the GPU reaches the opening one: the time between the events is the
    GPU's alone, the gaps between back-to-back kernels of a busy stream included (as in the trainer's
    graphs), the host's launch latency not;
  - one timed launch first; a candidate already 1.5x behind the best so far stops there, the others
    run three batches of launches and keep the median batch's time per launch.
The operands stay in L2 between launches of a batch where they fit, for every candidate alike.
*/
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tune.h"
#include "../../common.cuh"       // cudaCheck
#include "../../../common/mlp.h"  // ACT_RELU
#include "../ops/round.cuh"       // round_tf32

// ----------------------------------------------------------------------------
// kernels: the operands' values, and the delay that hides the host

enum { TUNE_FILL_FP32 = 0, TUNE_FILL_TF32 = 1, TUNE_FILL_PIXELS = 2 };

// x[i] for i < n: a value in [-1, 1) hashed from (i, seed); rounded to TF32 for TUNE_FILL_TF32 (the
// operands MF_TF32_EXACT takes as they are); a byte 0..255 for TUNE_FILL_PIXELS (MF_FP32_PIXELS' batch)
static __global__ void tune_fill_kernel(float *x, size_t n, uint32_t seed, int kind) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = ((uint32_t)i * 2654435761u) ^ seed;
        h ^= h >> 15;
        h *= 2246822519u;
        h ^= h >> 13;
        h *= 3266489917u;
        h ^= h >> 16;
        const float v = (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
        x[i] = kind == TUNE_FILL_PIXELS ? (float)(h & 255u) : kind == TUNE_FILL_TF32 ? round_tf32(v) : v;
    }
}

// one thread that spins for ns nanoseconds of the GPU's global timer
static __global__ void tune_delay_kernel(unsigned long long ns) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    } while (t - t0 < ns);
}

static float *tune_alloc(size_t n, uint32_t seed, int kind, cudaStream_t stream) {
    float *p = (float *)cudaMallocCheck((n ? n : 1) * sizeof(float), "the autotune's operands");
    if (n > 0) {
        tune_fill_kernel<<<1024, 256, 0, stream>>>(p, n, seed, kind);
        cudaCheck(cudaGetLastError());
    }
    return p;
}

// ----------------------------------------------------------------------------
// the candidates

// a plan, the K splits it was asked with (what the cache stores: matmul_fast_plan_fixed with them
// gives the same plan again), and its time
typedef struct {
    MatmulFastPlan p;
    int splits;
    float us;
} TuneCandidate;

static int tune_same_plan(const MatmulFastPlan *a, const MatmulFastPlan *b) {
    return a->cfg == b->cfg && a->splits == b->splits && a->kchunk == b->kchunk && a->cluster == b->cluster;
}

// whether configuration id can run product prod in precision tf32 beyond what matmul_fast_plan_fixed
// checks: with MF_FP32_PIXELS only the 3xTF32 configurations of the forward and weight-gradient
// products take pixels (matmul_fast_run refuses the others)
static int tune_takes(MfProduct prod, int tf32, int id) {
    if (tf32 != MF_FP32_PIXELS) return 1;
    int count;
    const MatmulFastCfg *cfgs = matmul_fast_configs(tf32, &count);
    for (int i = 0; i < count; i++)
        if (cfgs[i].id == id) return prod != MF_DINP && cfgs[i].kind == MF_KIND_3XTF32;
    return 0;
}

// matmul_fast_plan_fixed, and tune_takes
static int tune_plan_fixed(MatmulFastPlan *p, MfProduct prod, int M, int N, int K, int tf32, int have_scratch, int cfg,
                           int splits) {
    return tune_takes(prod, tf32, cfg) && matmul_fast_plan_fixed(p, prod, M, N, K, tf32, have_scratch, cfg, splits);
}

// Every plan that can run the product here, each once (two asked splits can make one plan), the cost
// model's first; into out (room for 4 per configuration, and one). Returns how many.
static int tune_candidates(MfProduct prod, int M, int N, int K, int tf32, int have_scratch, TuneCandidate *out) {
    int count, n = 0;
    const MatmulFastCfg *cfgs = matmul_fast_configs(tf32, &count);
    const MatmulFastPlan model = matmul_fast_plan(prod, M, N, K, tf32, have_scratch);
    if (model.cfg >= 0 && tune_takes(prod, tf32, model.cfg)) {
        out[n].p = model;
        out[n].splits = model.splits;
        for (int s = 1; s <= 8; s *= 2) {   // the split it was asked with, for the cache
            MatmulFastPlan q;
            if (tune_plan_fixed(&q, prod, M, N, K, tf32, have_scratch, model.cfg, s) && tune_same_plan(&q, &model)) {
                out[n].splits = s;
                break;
            }
        }
        n++;
    }
    for (int c = 0; c < count; c++) {
        for (int s = 1; s <= 8; s *= 2) {
            MatmulFastPlan p;
            if (!tune_plan_fixed(&p, prod, M, N, K, tf32, have_scratch, cfgs[c].id, s)) continue;
            int seen = 0;
            for (int i = 0; i < n && !seen; i++) seen = tune_same_plan(&out[i].p, &p);
            if (seen) continue;
            out[n].p = p;
            out[n].splits = s;
            n++;
        }
    }
    return n;
}

// ----------------------------------------------------------------------------
// timing

// one product's operands and what times it
typedef struct {
    MfProduct prod;
    int M, N, K, tf32;
    float *C, *A, *B, *scratch, *bias, *aux;
    MatmulFastEpi epi;
    cudaStream_t stream;
    cudaEvent_t start, stop;
} TuneBench;

// Microseconds per launch of plan p, over n launches back to back, timed on the GPU alone: the delay
// kernel covers the host's enqueueing (a few microseconds a launch).
static float tune_time(const TuneBench *b, const MatmulFastPlan *p, int n) {
    tune_delay_kernel<<<1, 1, 0, b->stream>>>(1000ull * (20 + 8 * (unsigned long long)n));
    cudaCheck(cudaGetLastError());
    cudaCheck(cudaEventRecord(b->start, b->stream));
    for (int i = 0; i < n; i++)
        matmul_fast_run(b->prod, p, b->C, b->A, b->B, b->M, b->N, b->K, &b->epi, b->scratch, b->tf32, 0, b->stream);
    cudaCheck(cudaEventRecord(b->stop, b->stream));
    cudaCheck(cudaEventSynchronize(b->stop));
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, b->start, b->stop));
    return 1000.0f * ms / (float)n;
}

// the candidate's time: one launch, and unless that is 1.5x behind best_us, the median of three
// batches of as many launches as fill TUNE_BATCH_US (at most 32): long enough that the events'
// resolution does not rank the candidates, short enough for the tune's budget
#define TUNE_BATCH_US 200.0f
static float tune_measure(const TuneBench *b, const MatmulFastPlan *p, float best_us) {
    matmul_fast_run(b->prod, p, b->C, b->A, b->B, b->M, b->N, b->K, &b->epi, b->scratch, b->tf32, 0, b->stream);
    const float one = tune_time(b, p, 1);
    if (one > 1.5f * best_us) return one;
    const int n = one > 0.0f ? (int)fminf(32.0f, fmaxf(1.0f, TUNE_BATCH_US / one)) : 32;
    float t[3];
    for (int k = 0; k < 3; k++) t[k] = tune_time(b, p, n);
    const float lo = fminf(t[0], fminf(t[1], t[2])), hi = fmaxf(t[0], fmaxf(t[1], t[2]));
    return t[0] + t[1] + t[2] - lo - hi;   // the median
}

// Allocates and fills the operands of the product's layout (matmul_fast.h): forward A (M, K), B (N, K);
// dinp A (M, K), B (K, N); dweight A (K, M), B (K, N): M * K and K * N floats either way. The batch is
// forward's A and dweight's B (pixels for MF_FP32_PIXELS). scratch: floats of scratch for K splits.
static void tune_bench_open(TuneBench *b, MfProduct prod, int M, int N, int K, int tf32, size_t scratch_floats) {
    memset(b, 0, sizeof(*b));
    b->prod = prod, b->M = M, b->N = N, b->K = K, b->tf32 = tf32;
    cudaCheck(cudaStreamCreateWithFlags(&b->stream, cudaStreamNonBlocking));
    cudaCheck(cudaEventCreate(&b->start));
    cudaCheck(cudaEventCreate(&b->stop));
    const int values = tf32 == MF_TF32_EXACT ? TUNE_FILL_TF32 : TUNE_FILL_FP32;
    const int pixels = tf32 == MF_FP32_PIXELS ? TUNE_FILL_PIXELS : values;
    const size_t MN = (size_t)M * N;
    b->A = tune_alloc((size_t)M * K, 1, prod == MF_FWD ? pixels : values, b->stream);
    b->B = tune_alloc((size_t)K * N, 2, prod == MF_DWEIGHT ? pixels : values, b->stream);
    b->C = tune_alloc(MN, 3, TUNE_FILL_FP32, b->stream);
    b->scratch = scratch_floats ? tune_alloc(scratch_floats, 0, TUNE_FILL_FP32, b->stream) : NULL;
    // dweight is timed with the raw epilogue: the trainer's SGD epilogue would step parameters of its
    // own; it adds the same few loads and stores per output to every candidate, so the ranking holds
    b->epi.kind = MF_EPI_RAW;
    b->epi.act = ACT_NONE;
    if (prod == MF_FWD) {
        b->bias = tune_alloc((size_t)N, 4, TUNE_FILL_FP32, b->stream);
        b->epi.kind = MF_EPI_FORWARD;
        b->epi.act = ACT_RELU;
        b->epi.bias = b->bias;
    } else if (prod == MF_DINP) {
        b->aux = tune_alloc(MN, 5, TUNE_FILL_FP32, b->stream);
        b->epi.kind = MF_EPI_DINP;
        b->epi.act = ACT_RELU;
        b->epi.aux = b->aux;
    }
}

static void tune_bench_close(TuneBench *b) {
    cudaCheck(cudaStreamSynchronize(b->stream));
    float *bufs[] = {b->A, b->B, b->C, b->scratch, b->bias, b->aux};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        if (bufs[i]) cudaCheck(cudaFree(bufs[i]));
    cudaCheck(cudaEventDestroy(b->start));
    cudaCheck(cudaEventDestroy(b->stop));
    cudaCheck(cudaStreamDestroy(b->stream));
}

// the clocks up: plan p run for TUNE_WARM_US, so that the first candidates are not timed at an idle
// GPU's clock
#define TUNE_WARM_US 3000.0f
static void tune_warm_clocks(const TuneBench *b, const MatmulFastPlan *p) {
    const float first = tune_time(b, p, 1);
    tune_time(b, p, (int)fminf(200.0f, fmaxf(1.0f, TUNE_WARM_US / fmaxf(first, 1.0f))));
}

// the floats of scratch plan p needs for an (M, N) output
static size_t tune_scratch_floats(const MatmulFastPlan *p, int M, int N) {
    return p->splits > 1 && !p->cluster ? (size_t)p->splits * M * N : 0;
}

// The tune: the fastest candidate into *best; *timed: how many were timed. 0, or -1 when none runs.
static int tune_run(MfProduct prod, int M, int N, int K, int tf32, int have_scratch, TuneCandidate *best,
                    int *timed) {
    *timed = 0;
    memset(best, 0, sizeof(*best));
    best->p.cfg = -1;
    if (M <= 0 || N <= 0 || K <= 0) return -1;
    int count;
    matmul_fast_configs(tf32, &count);
    TuneCandidate *cand = (TuneCandidate *)mallocCheck((size_t)(4 * count + 1) * sizeof(TuneCandidate));
    const int n = tune_candidates(prod, M, N, K, tf32, have_scratch, cand);
    if (n == 0) {
        free(cand);
        return -1;
    }
    const double t0 = now_seconds();
    size_t scratch_floats = 0;
    for (int i = 0; i < n; i++) {
        const size_t need = tune_scratch_floats(&cand[i].p, M, N);
        if (need > scratch_floats) scratch_floats = need;
    }
    TuneBench b;
    tune_bench_open(&b, prod, M, N, K, tf32, scratch_floats);
    tune_warm_clocks(&b, &cand[0].p);
    int win = 0;
    float best_us = INFINITY;
    for (int i = 0; i < n; i++) {
        if (i > 0 && now_seconds() - t0 > MF_TUNE_BUDGET_S) break;   // the cost model's plan is always timed
        cand[i].us = tune_measure(&b, &cand[i].p, best_us);
        ++*timed;
        if (cand[i].us < best_us) {
            best_us = cand[i].us;
            win = i;
        }
    }
    *best = cand[win];
    tune_bench_close(&b);
    free(cand);
    return 0;
}

// ----------------------------------------------------------------------------
// the API of tune.h

const char *matmul_fast_tune_source_name(int source) {
    return source == TUNE_FROM_CACHE ? "cache" : source == TUNE_FROM_AUTOTUNE ? "autotune" : "cost model";
}

void matmul_fast_tune_key(PlanCacheKey *key) {
    int dev = 0, driver = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    cudaCheck(cudaGetDeviceProperties(&prop, dev));
    cudaCheck(cudaDriverGetVersion(&driver));
    plan_cache_key(key, prop.name, prop.multiProcessorCount, driver, plan_cache_build_id());
}

int matmul_fast_tune(MfProduct prod, int M, int N, int K, int tf32, int have_scratch, MatmulFastPlan *best,
                     float *best_us, int *candidates) {
    TuneCandidate win;
    int timed = 0;
    const int rc = tune_run(prod, M, N, K, tf32, have_scratch, &win, &timed);
    *best = win.p;
    if (best_us) *best_us = rc == 0 ? win.us : 0.0f;
    if (candidates) *candidates = timed;
    return rc;
}

float matmul_fast_time_plan(MfProduct prod, const MatmulFastPlan *p, int M, int N, int K, int tf32) {
    if (M <= 0 || N <= 0 || K <= 0 || p->cfg < 0) return 0.0f;
    TuneBench b;
    tune_bench_open(&b, prod, M, N, K, tf32, tune_scratch_floats(p, M, N));
    tune_warm_clocks(&b, p);
    const float us = tune_measure(&b, p, INFINITY);
    tune_bench_close(&b);
    return us;
}

int matmul_fast_tune_cached(PlanCache *cache, int ranks, MfProduct prod, int M, int N, int K, int tf32,
                            int have_scratch, int tune, MatmulFastPlan *out, int *source) {
    const PlanCacheShape shape = {(int)prod, M, N, K, tf32, have_scratch ? 1 : 0, ranks};
    const PlanCacheEntry *e = cache ? plan_cache_find(cache, &shape) : NULL;
    if (e && tune_plan_fixed(out, prod, M, N, K, tf32, have_scratch, e->cfg, e->splits)) {
        *source = TUNE_FROM_CACHE;
        return 0;
    }
    TuneCandidate win;
    int timed;
    if (tune && tune_run(prod, M, N, K, tf32, have_scratch, &win, &timed) == 0) {
        if (cache) plan_cache_put(cache, &shape, win.p.cfg, win.splits, win.us);
        *out = win.p;
        *source = TUNE_FROM_AUTOTUNE;
        return 0;
    }
    *out = matmul_fast_plan(prod, M, N, K, tf32, have_scratch);
    *source = TUNE_FROM_MODEL;
    return out->cfg >= 0 ? 0 : -1;
}
