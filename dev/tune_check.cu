/*
dev/tune_check.cu: the autotune (kernels/fast/matmul/tune.h) on the GPU, against the cost model.

For every product of a model (forward, dinp, dweight of each layer: matmul_fast.h's shapes) and every
precision the trainer passes for it (FP32; TF32: MF_TF32_EXACT forward, MF_TF32_ROUND backward, and
MF_TF32_ROUND forward as well, which this build may not have; BF16), it prints the cost model's plan
and its time, the tune's pick and its time (both timed again alike, matmul_fast_time_plan, after the
tune), how many candidates the tune timed and its wall time. Then it checks the cache round trip on
the GPU: a product tuned through matmul_fast_tune_cached, saved, opened again, and found there.

    make dev/bin/tune_check    then    dev/bin/tune_check [SIZES B] ...
    e.g. dev/bin/tune_check                          (784,1024,1024,10 at 256 and 784,4096,4096,10 at 1024)
         dev/bin/tune_check 784,2048,2048,2048,10 512
         dev/bin/tune_check --times fp32|tf32 SIZES B ... > times.csv   (every plan timed: fit_plan.py --times)
         dev/bin/tune_check --families SIZES B ...      (the copies' kernels, every configuration: CSV)

A check fails (and the exit status is 1) where the tune finds nothing although the cost model has a
plan, where its pick is more than 10 % slower than the cost model's plan timed alike (the cost
model's plan is one of its candidates), where one product's tune takes more than 0.3 s, or where the
cache does not give back what was tuned. Ends with "N passed, N failed".
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <functional>

#include "../kernels/common.cuh"               // cudaCheck, require_gpu
#include "../kernels/fast/matmul/tune.h"
#include "../run/args.h"                       // parse_layers
#include "../tests/check.h"                    // check, test_exit

static const char *const PRODUCT_NAMES[] = {"forward", "dinp", "dweight"};

static const char *prec_name(int tf32) {
    return tf32 == 0 ? "fp32" : tf32 == MF_TF32_ROUND ? "tf32-round" : tf32 == MF_TF32_EXACT ? "tf32-exact" : "bf16";
}

static void plan_text(const MatmulFastPlan *p, char *out, size_t n) {
    if (p->cfg < 0) snprintf(out, n, "none");
    else snprintf(out, n, "cfg %d x%d%s", p->cfg, p->splits, p->splits > 1 ? (p->cluster ? " cl" : " sc") : "");
}

// one product in one precision: the tune against the cost model
static void check_product(MfProduct prod, int layer, int M, int N, int K, int tf32, double *tune_total) {
    const int have_scratch = prod == MF_DWEIGHT;
    const MatmulFastPlan model = matmul_fast_plan(prod, M, N, K, tf32, have_scratch);
    MatmulFastPlan best;
    float tune_us = 0.0f;
    int timed = 0;
    const double t0 = now_seconds();
    const int rc = matmul_fast_tune(prod, M, N, K, tf32, have_scratch, &best, &tune_us, &timed);
    const double wall = now_seconds() - t0;
    *tune_total += wall;
    char a[48], b[48];
    plan_text(&model, a, sizeof(a));
    plan_text(&best, b, sizeof(b));
    if (model.cfg < 0) {
        printf("  %-8s L%d %5d x %5d x %5d  %-10s  no kernel in this build (the cost model has none either)\n",
               PRODUCT_NAMES[prod], layer, M, N, K, prec_name(tf32));
        check(rc == -1, "%s L%d %s: the tune also finds none", PRODUCT_NAMES[prod], layer, prec_name(tf32));
        return;
    }
    const float model_us = matmul_fast_time_plan(prod, &model, M, N, K, tf32);
    const float best_us = rc == 0 ? matmul_fast_time_plan(prod, &best, M, N, K, tf32) : 0.0f;
    printf("  %-8s L%d %5d x %5d x %5d  %-10s  model %-12s %9.2f us | tuned %-12s %9.2f us (in the tune %9.2f) "
           "%5.2fx | %3d candidates, %6.1f ms\n",
           PRODUCT_NAMES[prod], layer, M, N, K, prec_name(tf32), a, model_us, b, best_us, tune_us,
           best_us > 0 ? model_us / best_us : 0.0, timed, 1e3 * wall);
    check(rc == 0 && best.cfg >= 0, "%s L%d %s: the tune found a plan", PRODUCT_NAMES[prod], layer, prec_name(tf32));
    check(best_us <= 1.10f * model_us, "%s L%d %s: the tuned plan no slower than the cost model's (10 %% noise)",
          PRODUCT_NAMES[prod], layer, prec_name(tf32));
    check(wall < 0.3, "%s L%d %s: the tune took under 0.3 s", PRODUCT_NAMES[prod], layer, prec_name(tf32));
}

// every product of the model at batch B, in every precision
static void check_model(const int *sizes, int L, int B) {
    printf("\n== model %d", sizes[0]);
    for (int l = 1; l <= L; l++) printf(",%d", sizes[l]);
    printf(" at batch %d\n", B);
    static const int fwd_precs[] = {0, MF_TF32_EXACT, MF_TF32_ROUND, MF_BF16};
    static const int bwd_precs[] = {0, MF_TF32_ROUND, MF_BF16};
    double total = 0;
    for (int l = 0; l < L; l++) {
        const int IN = sizes[l], OUT = sizes[l + 1];
        for (int i = 0; i < 4; i++) check_product(MF_FWD, l, B, OUT, IN, fwd_precs[i], &total);
        for (int i = 0; i < 3 && l > 0; i++) check_product(MF_DINP, l, B, IN, OUT, bwd_precs[i], &total);
        for (int i = 0; i < 3; i++) check_product(MF_DWEIGHT, l, OUT, IN, B, bwd_precs[i], &total);
    }
    printf("  the tunes of this model took %.2f s in all\n", total);
}

// matmul_fast_tune_cached: tuned once, saved, opened again, then from the cache with the same plan
static void check_cache(void) {
    section("the cache on the GPU");
    char dir[] = "/tmp/mlpcu_tune_check_XXXXXX", warn[1024], err[1024];
    if (!mkdtemp(dir)) {
        check(0, "a temporary folder: %s", strerror(errno));
        return;
    }
    setenv("MLP_PLAN_CACHE", dir, 1);
    PlanCacheKey key;
    matmul_fast_tune_key(&key);
    printf("  key: %s, %d SMs, driver %d, build %08x\n", key.gpu, key.sms, key.driver, key.build_id);
    PlanCache cache;
    plan_cache_open(&cache, &key, warn, sizeof(warn));
    check(cache.n == 0 && !warn[0], "a new folder: an empty cache, no warning");
    MatmulFastPlan first, again;
    int src1 = -1, src2 = -1, src3 = -1;
    matmul_fast_tune_cached(&cache, 1, MF_FWD, 256, 1024, 784, MF_TF32_EXACT, 0, 0, &first, &src1);
    check(src1 == TUNE_FROM_MODEL, "a miss without tuning: the cost model's plan (%s)",
          matmul_fast_tune_source_name(src1));
    matmul_fast_tune_cached(&cache, 1, MF_FWD, 256, 1024, 784, MF_TF32_EXACT, 0, 1, &first, &src2);
    check(src2 == TUNE_FROM_AUTOTUNE && cache.n == 1, "a miss with tuning: tuned (%s), one entry",
          matmul_fast_tune_source_name(src2));
    check(plan_cache_save(&cache, err, sizeof(err)) == 0, "saved: %s", err[0] ? err : cache.path);
    plan_cache_free(&cache);
    plan_cache_open(&cache, &key, warn, sizeof(warn));
    matmul_fast_tune_cached(&cache, 1, MF_FWD, 256, 1024, 784, MF_TF32_EXACT, 0, 1, &again, &src3);
    check(src3 == TUNE_FROM_CACHE && again.cfg == first.cfg && again.splits == first.splits &&
          again.kchunk == first.kchunk && again.cluster == first.cluster,
          "opened again: the same plan from the cache (%s)", matmul_fast_tune_source_name(src3));
    plan_cache_free(&cache);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", dir);
}

// --times fp32|tf32: every plan each product of a model can run in that precision (each configuration
// of its list at 1, 2, 4 and 8 K splits: FP32's FFMA and 3xTF32 rows, and the first layer's products
// on pixel bytes too; TF32's mma.sync and wgmma rows, on TF32 values forward and rounding backward,
// as the trainer passes them), timed as the tune times them: one CSV line each
// (prod,M,N,K,tf32,cfg,splits,us), the data dev/cuda/fit_plan.py --times fits the cost model to
static void print_times(const int *sizes, int L, int B, int tf) {
    for (int l = 0; l < L; l++) {
        const int IN = sizes[l], OUT = sizes[l + 1];
        const int shapes[3][3] = {{B, OUT, IN}, {B, IN, OUT}, {OUT, IN, B}};
        for (int prod = 0; prod < 3; prod++) {
            if (prod == MF_DINP && l == 0) continue;
            for (int px = 0; px < 2; px++) {
                if (px && (tf || l > 0 || prod == MF_DINP)) continue;
                const int tf32 = px ? MF_FP32_PIXELS : !tf ? 0 : prod == MF_FWD ? MF_TF32_EXACT : MF_TF32_ROUND, M = shapes[prod][0], N = shapes[prod][1], K = shapes[prod][2];
                int count;
                const MatmulFastCfg *cfgs = matmul_fast_configs(tf32, &count);
                for (int c = 0; c < count; c++) {
                    if (px && cfgs[c].kind != MF_KIND_3XTF32) continue;
                    for (int s = 1; s <= 8; s *= 2) {
                        MatmulFastPlan p;
                        if (!matmul_fast_plan_fixed(&p, (MfProduct)prod, M, N, K, tf32, prod == MF_DWEIGHT, cfgs[c].id, s))
                            continue;
                        if (p.splits != s) continue;   // (a split the length turned into another)
                        const float us = matmul_fast_time_plan((MfProduct)prod, &p, M, N, K, tf32);
                        printf("%s,%d,%d,%d,%d,%d,%d,%.3f\n", PRODUCT_NAMES[prod], M, N, K, tf32, cfgs[c].id, s, us);
                    }
                }
            }
        }
    }
}

// --families SIZES B: every configuration of the copies' kernels on every product of the model, timed
// alone: -x 1's K-major TF32 kernel (kmajor_tf32.cu) and -x 2's BF16-copies kernels (copies_bf16.cu),
// each beside the cost model's tiled plan in that precision and the configuration the trainer's plan
// takes (marked *): the data to choose those families' tiles by. Operands of the right sizes, values
// of no importance to the time (the same bytes in every run).
static float family_time(cudaEvent_t e0, cudaEvent_t e1, const std::function<void(void)> &launch) {
    for (int i = 0; i < 3; i++) launch();
    float best = INFINITY;
    for (int rep = 0; rep < 3; rep++) {
        cudaCheck(cudaEventRecord(e0));
        for (int i = 0; i < 10; i++) launch();
        cudaCheck(cudaEventRecord(e1));
        cudaCheck(cudaEventSynchronize(e1));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, e0, e1));
        if (ms * 100.0f < best) best = ms * 100.0f;   // microseconds a launch
    }
    return best;
}

static void print_families(const int *sizes, int L, int B) {
    size_t most = 0;
    for (int l = 0; l <= L; l++) {
        const size_t a = (size_t)B * sizes[l], w = (size_t)sizes[l] * (l < L ? sizes[l + 1] : 1);
        most = a > most ? a : most;
        most = w > most ? w : most;
    }
    float *A, *Bm, *C;
    cudaCheck(cudaMalloc(&A, most * sizeof(float)));
    cudaCheck(cudaMalloc(&Bm, most * sizeof(float)));
    cudaCheck(cudaMalloc(&C, most * sizeof(float)));
    cudaCheck(cudaMemset(A, 0x3c, most * sizeof(float)));
    cudaCheck(cudaMemset(Bm, 0x3c, most * sizeof(float)));
    cudaEvent_t e0, e1;
    cudaCheck(cudaEventCreate(&e0));
    cudaCheck(cudaEventCreate(&e1));
    MatmulFastEpi epi;
    memset(&epi, 0, sizeof(epi));
    int nbf;
    const MatmulFastCfg *bf = matmul_fast_bf16_configs(&nbf);
    printf("prod,M,N,K,family,cfg,tile,us,picked\n");
    for (int l = 0; l < L; l++) {
        const int IN = sizes[l], OUT = sizes[l + 1];
        const int shapes[3][3] = {{B, OUT, IN}, {B, IN, OUT}, {OUT, IN, B}};
        for (int prod = 0; prod < 3; prod++) {
            if (prod == MF_DINP && l == 0) continue;
            const int M = shapes[prod][0], N = shapes[prod][1], K = shapes[prod][2];
            const MfProduct pr = (MfProduct)prod;
            const char *name = PRODUCT_NAMES[prod];
            for (int t = 0; t < 2; t++) {   // the tiled kernels' cost-model plans, TF32 and BF16
                const int tf32 = t ? MF_BF16 : prod == MF_FWD ? MF_TF32_EXACT : MF_TF32_ROUND;
                const MatmulFastPlan p = matmul_fast_plan(pr, M, N, K, tf32, prod == MF_DWEIGHT);
                if (p.cfg >= 0)
                    printf("%s,%d,%d,%d,%s,%d,x%d,%.2f,\n", name, M, N, K, t ? "bf16-tiled" : "tf32-tiled", p.cfg,
                           p.splits, matmul_fast_time_plan(pr, &p, M, N, K, tf32));
            }
            const int kpick = matmul_fast_tf32k_fits(M, N, K) ? matmul_fast_tf32k_cfg(pr, M, N) : -1;
            for (int c = 0; c < matmul_fast_tf32k_num_cfgs() && K % 4 == 0; c++) {
                int bm = 0, bn = 0;
                matmul_fast_tf32k_tile(c, &bm, &bn);
                const float us = family_time(e0, e1, [&] {
                    matmul_fast_tf32k_run_cfg(c, C, A, Bm, M, N, K, &epi, NULL, 0, 0);
                });
                printf("%s,%d,%d,%d,tf32-kmajor,%d,%dx%d,%.2f,%s\n", name, M, N, K, c, bm, bn, us, c == kpick ? "*" : "");
            }
            const int bpick = matmul_fast_bf16_plan(pr, M, N, K);
            for (int c = 0; c < nbf && matmul_fast_bf16_fits(pr, M, N, K); c++) {
                if (bf[c].bk == 64 && !matmul_fast_target()->wgmma) continue;
                const float us = family_time(e0, e1, [&] {
                    matmul_fast_bf16_run(pr, bf[c].id, C, (const __nv_bfloat16 *)A, (const __nv_bfloat16 *)Bm, M, N, K,
                                         &epi, NULL, 0, 0);
                });
                printf("%s,%d,%d,%d,bf16-copies,%d,%dx%d,%.2f,%s\n", name, M, N, K, bf[c].id, bf[c].bm, bf[c].bn, us,
                       bf[c].id == bpick ? "*" : "");
            }
        }
    }
    cudaCheck(cudaEventDestroy(e0));
    cudaCheck(cudaEventDestroy(e1));
    cudaCheck(cudaFree(A));
    cudaCheck(cudaFree(Bm));
    cudaCheck(cudaFree(C));
}

// the pairs SIZES B from argv[first] on, each parsed and handed to fn; 2 and one line at the first that
// is not a model and a batch (try: the arguments of an example)
static int each_model(int argc, char **argv, int first, const char *try_args,
                      const std::function<void(const int *, int, int)> &fn) {
    for (int i = first; i + 1 < argc; i += 2) {
        int sizes[MAX_LAYERS + 1], L = 0;
        char err[256] = "";
        if (parse_layers(argv[i], sizes, &L, err, sizeof(err)) == 0 && atoi(argv[i + 1]) < 1)
            snprintf(err, sizeof(err), "batch '%s': a whole number of at least 1", argv[i + 1]);
        if (err[0]) {
            fprintf(stderr, "error: %s ---> try: dev/bin/tune_check %s\n", err, try_args);
            return 2;
        }
        fn(sizes, L, atoi(argv[i + 1]));
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--families") == 0) {   // --families SIZES B ...
        if (argc < 4 || argc % 2 != 0) {
            fprintf(stderr, "error: --families takes models as pairs SIZES B ---> try: dev/bin/tune_check --families "
                            "784,2048,2048,2048,10 512\n");
            return 2;
        }
        require_gpu();
        return each_model(argc, argv, 2, "--families 784,2048,2048,2048,10 512",
                          [](const int *sizes, int L, int B) { print_families(sizes, L, B); });
    }
    if (argc > 2 && strcmp(argv[1], "--times") == 0) {   // --times fp32|tf32 SIZES B ...: the CSV above
        const int tf = strcmp(argv[2], "tf32") == 0;
        if (!tf && strcmp(argv[2], "fp32") != 0) {
            fprintf(stderr, "error: --times %s: fp32 or tf32 ---> try: dev/bin/tune_check --times fp32 784,1024,1024,10 256\n",
                    argv[2]);
            return 2;
        }
        require_gpu();
        printf("prod,M,N,K,tf32,cfg,splits,us\n");
        return each_model(argc, argv, 3, "--times fp32 784,1024,1024,10 256",
                          [tf](const int *sizes, int L, int B) { print_times(sizes, L, B, tf); });
    }
    const cudaDeviceProp prop = require_gpu();
    int driver = 0;
    cudaCheck(cudaDriverGetVersion(&driver));
    printf("GPU: %s, %d SMs, driver %d, clusters %s\n", prop.name, prop.multiProcessorCount, driver,
           matmul_fast_has_clusters() ? "yes" : "no");
    if (argc > 1 && argc % 2 != 1) {
        fprintf(stderr, "error: give models as pairs SIZES B ---> try: dev/bin/tune_check 784,1024,1024,10 256\n");
        return 2;
    }
    const char *defaults[] = {"784,1024,1024,10", "256", "784,4096,4096,10", "1024"};
    const int pairs = argc > 1 ? (argc - 1) / 2 : 2;
    for (int i = 0; i < pairs; i++) {
        const char *spec = argc > 1 ? argv[1 + 2 * i] : defaults[2 * i];
        const int B = atoi(argc > 1 ? argv[2 + 2 * i] : defaults[2 * i + 1]);
        int sizes[MAX_LAYERS + 1], L = 0;
        char err[256];
        if (parse_layers(spec, sizes, &L, err, sizeof(err)) != 0 || B < 1) {
            fprintf(stderr, "error: %s ---> try: dev/bin/tune_check 784,1024,1024,10 256\n",
                    B < 1 ? "the batch must be a positive number" : err);
            return 2;
        }
        check_model(sizes, L, B);
    }
    check_cache();
    return test_exit();
}
