/*
kernels/fast/matmul/tune.h: the autotune of one matmul product, and its cache. Host code; the
kernels it times are the library's own (matmul_fast.h), launched through matmul_fast_run.

The cost model (matmul_fast_plan) ranks the tile configurations from a few fitted numbers; on a shape
or a GPU it was not fitted to, its pick can run well below the fastest one. The autotune measures
instead: every plan the library can run for the product and precision (each configuration of
matmul_fast_configs with K split 1, 2, 4 or 8, as matmul_fast_plan_fixed allows it here, and the
cost model's plan among them) is timed on this GPU, and the fastest wins. Its result is kept in the
plan cache (common/plan_cache.h), keyed by the GPU, the driver, the binary and the shape, so each
shape is timed once per machine and build.

    PlanCacheKey key;
    matmul_fast_tune_key(&key);                       // this GPU, its driver, this binary
    PlanCache cache;
    plan_cache_open(&cache, &key, warn, sizeof(warn));
    MatmulFastPlan p;
    int source;
    matmul_fast_tune_cached(&cache, ranks, MF_FWD, B, OUT, IN, tf32, 0, tune, &p, &source);
    ... every product of the model ...
    plan_cache_save(&cache, err, sizeof(err));

matmul_fast_tune, matmul_fast_tune_cached (on a miss with tune set) and matmul_fast_time_plan
allocate, synchronise and free device memory, on a stream of their own: call them before a CUDA
graph is captured, never during a capture (a synchronisation there invalidates it). Under -g, let
rank 0 alone tune and hand its plans to the others, so that every rank runs the same kernels.
*/
#ifndef MLP_FAST_TUNE_H
#define MLP_FAST_TUNE_H

#include "matmul_fast.h"
#include "../../../common/plan_cache.h"  // PlanCache, PlanCacheKey

// where a product's plan came from (matmul_fast_tune_cached's source)
enum { TUNE_FROM_MODEL = 0, TUNE_FROM_CACHE = 1, TUNE_FROM_AUTOTUNE = 2 };

// "cost model", "cache", "autotune": a source's name, for -P's lines
const char *matmul_fast_tune_source_name(int source);

// The machine part of the cache's key for the current GPU: its name and SM count, the CUDA
// driver's version, and this binary's build id (plan_cache_build_id).
void matmul_fast_tune_key(PlanCacheKey *key);

// Times every candidate plan of product prod, C(M, N) over K in precision tf32 (matmul_fast.h's
// argument: 0, MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16, MF_FP32_PIXELS), on operands of its own; with
// have_scratch, K may be split through scratch as for a weight gradient. Each candidate runs once to
// warm up, once timed, and, unless that one run is already far behind the best so far, in three
// timed batches of launches (as many as fill about 200 us, at most 32); its time is the median batch's
// per launch. The whole tune stops taking new candidates after MF_TUNE_BUDGET_S seconds (the cost
// model's plan is always timed first). Returns 0 with the fastest in *best, its time in *best_us
// (microseconds) and the number of candidates timed in *candidates (best_us and candidates may be
// NULL); -1 when no kernel of this build runs the product in this precision (best->cfg is -1).
#define MF_TUNE_BUDGET_S 0.15
int matmul_fast_tune(MfProduct prod, int M, int N, int K, int tf32, int have_scratch, MatmulFastPlan *best,
                     float *best_us, int *candidates);

// The time of plan p for that product, in microseconds, measured as the tune measures each candidate
// (for comparing a plan with the tune's pick: dev/tune_check.cu). 0 for an empty product or no plan.
float matmul_fast_time_plan(MfProduct prod, const MatmulFastPlan *p, int M, int N, int K, int tf32);

// The plan of a product from the cache, else (when tune is not 0) from the autotune, whose result is
// then put in the cache, else the cost model's (matmul_fast_plan). cache may be NULL (no cache);
// ranks is part of the cache's key (1 without -g). A cached choice that cannot run here any more
// (matmul_fast_plan_fixed refuses it) is a miss. *source: TUNE_FROM_*. Returns 0, or -1 when no
// kernel of this build runs the product in this precision (out->cfg is -1).
int matmul_fast_tune_cached(PlanCache *cache, int ranks, MfProduct prod, int M, int N, int K, int tf32,
                            int have_scratch, int tune, MatmulFastPlan *out, int *source);

#endif  // MLP_FAST_TUNE_H
