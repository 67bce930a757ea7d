/*
dev/fused_profile.cu: where the time of the fused step goes (train_mlp_fast -f 2,
kernels/fast/fused/fused_step.cuh, and kernels/fast/fused/fused_deep.cuh for two or more hidden layers), phase
by phase.

Runs STEPS steps of a model on random bytes (or a dataset's rows: DATA below) in one launch of the
fused kernel, as the trainer does between two log lines, and prints:
  - the time a step takes (CUDA events around the launch, the median of 5 launches, after one), and
    the host's time to enqueue a launch (which the events count where the GPU was idle before it);
  - then, from a launch with the kernel's clock64() stamps (FusedStepArgs.prof: thread 0 of every
    block, after a __syncthreads at each point), the median over the steps of each phase: for
    block 0 (which also does the bias of the last layer and the mean loss) and for the slowest
    block in that phase. The stamps' __syncthreads slow the step a little; the table says where
    the time goes, the first line how much there is.

    make dev/bin/fused_profile        then    dev/bin/fused_profile [SIZES [B [STEPS [X [ROWS [ACT [DATA]]]]]]]
    e.g. dev/bin/fused_profile 784,128,10 64 200    (the default: the small model)
         dev/bin/fused_profile 784,1024,1024,10 256 100 1    (the wide model, TF32: X is -x)
         dev/bin/fused_profile 784,1024,1024,10 256 100 1 60000 relu    (as the bench's wide TF32 epoch)
         dev/bin/fused_profile 784,1024,1024,10 256 100 1 60000 relu data/fashion-mnist    (on its pixels)
Without ROWS (or with 0) the data are B x STEPS rows, taken in order (batch s is rows s*B to
s*B + B - 1); with it, ROWS rows (at least B x STEPS) and the batches drawn from a random
permutation of them, as the trainer draws an epoch's: the gathers then hit rows scattered over the
whole dataset, which may not stay in L2 (MNIST's 60000 rows are 47 MB). ACT: the hidden layers'
activation (default sigmoid). DATA: a dataset's directory (as the trainers' -d): the first rows of its
training set instead of random bytes, e.g. data/fashion-mnist (the trainer's wide TF32 epoch depends on
the pixels' values).
For a deep model the table has a row per phase (F_l the forward products, H the head, D_l the
backward ones; kernels/fast/fused/fused_deep.cuh): the median time of block 0's jobs, the slowest block's
and the mean over the blocks, how long block 0 then waits at the barrier, and which block was the
slowest (its jobs: the phase's order in fused_deep_kernel).
Built with -DMF_PROF_LOOP (rm -f dev/bin/fused_profile, since make does not see a change of flags, then
make dev/bin/fused_profile NVCCFLAGS="-O3 -lineinfo -DMF_PROF_LOOP"), it also prints the deep step's tiles, forward/dinp and weight
gradient apart, as means over every tile of every launch: a tile's time, its mainloop's, how much of
the mainloop went on waiting for operand tiles (cp.async's wait and the barrier after it) and on the
first of them, and the time after the mainloop (the epilogue). Those stamps cost time of their own.
*/
#define TESTING
#include "train_mlp_fast.cu"

#include <algorithm>
#include <vector>

static double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

int main(int argc, char **argv) {
    using namespace fast;
    int sizes[MAX_LAYERS + 1], L = 0;
    char err[256];
    if (parse_layers(argc > 1 ? argv[1] : "784,128,10", sizes, &L, err, sizeof(err)) != 0) {
        fprintf(stderr, "error: %s\n", err);
        return 2;
    }
    const int B = argc > 2 ? atoi(argv[2]) : 64, steps = argc > 3 ? atoi(argv[3]) : 200;
    const int prec = argc > 4 ? atoi(argv[4]) : PREC_FP32;
    const long rows = argc > 5 ? atol(argv[5]) : 0;   // 0: B x STEPS rows in order
    const int act = argc > 6 ? parse_activation(argv[6]) : ACT_SIGMOID;
    const char *data_dir = argc > 7 ? argv[7] : NULL;
    if (B < 1 || steps < 3 || prec < PREC_FP32 || prec > PREC_BF16 || act < 0 ||
        (rows && (rows < (long)B * steps || rows > 10000000))) {
        fprintf(stderr, "usage: %s [SIZES [B (>= 1) [STEPS (>= 3) [X (0, 1 or 2) [ROWS (0, or B x STEPS to 10^7) "
                "[ACT (sigmoid, relu or tanh) [DATA (a dataset's directory)]]]]]]]\n", argv[0]);
        return 2;
    }
    cudaDeviceProp prop = require_gpu();
    const int n = rows ? (int)rows : B * steps, D = sizes[0], C = sizes[L];
    uint8_t *images = (uint8_t *)mallocCheck((size_t)n * D), *labels = (uint8_t *)mallocCheck((size_t)n);
    Rng rng;
    rng_seed(&rng, 7, 1);
    if (data_dir) {   // the first n rows of a training set
        Dataset ds;
        if (dataset_load(data_dir, "train", &ds, err, sizeof(err)) != 0) {
            fprintf(stderr, "error: %s\n", err);
            return 2;
        }
        if (dataset_dim(&ds) != D || ds.num_classes > C || ds.n < n) {
            fprintf(stderr, "error: %s has %d rows of %d values and %d classes; the model takes %d values and %d "
                    "classes, and %d rows are needed\n", data_dir, ds.n, dataset_dim(&ds), ds.num_classes, D, C, n);
            return 2;
        }
        memcpy(images, ds.images, (size_t)n * D);
        memcpy(labels, ds.labels, (size_t)n);
        printf("data: the first %d rows of %s (%s)\n", n, ds.name, data_dir);
        dataset_free(&ds);
    } else {
        for (size_t i = 0; i < (size_t)n * D; i++) images[i] = (uint8_t)rng_below(&rng, 256);
        for (int i = 0; i < n; i++) labels[i] = (uint8_t)rng_below(&rng, (uint32_t)C);
    }
    DeviceData d;
    device_data_upload(&d, images, labels, n, D);
    Model m;
    model_build(&m, sizes, L, act, B, B, prec, n, steps);
    model_init_params(&m, 1337, 0);
    if (!model_use_fused(&m, 1)) {
        fprintf(stderr, "error: the fused step does not take this model: %s\n", m.plan.fused.why);
        return 2;
    }
    std::vector<int> perm(n);
    if (rows) rng_permutation(&rng, perm.data(), n);   // (the trainer's epoch: common/rng.h)
    else
        for (int i = 0; i < n; i++) perm[i] = i;
    cudaCheck(cudaMemcpy(m.perm, perm.data(), sizeof(int) * (size_t)n, cudaMemcpyHostToDevice));
    Config cfg;
    config_defaults(&cfg, PROG_FAST);
    cudaEvent_t t0, t1;
    cudaCheck(cudaEventCreate(&t0));
    cudaCheck(cudaEventCreate(&t1));
    std::vector<double> host_us;   // the host's time to enqueue each launch (the tensor maps, the launch)
    auto timed_run = [&]() {   // one launch of `steps` steps from step 0: its time in ms
        const int zero = 0;
        cudaCheck(cudaMemcpy(m.step, &zero, sizeof(int), cudaMemcpyHostToDevice));
        cudaCheck(cudaEventRecord(t0, 0));
        const double h0 = now_seconds();
        fused_run(&m, &d, steps, B, sgd_of(&cfg), 0);
        host_us.push_back(1e6 * (now_seconds() - h0));
        cudaCheck(cudaEventRecord(t1, 0));
        cudaCheck(cudaEventSynchronize(t1));
        float ms;
        cudaCheck(cudaEventElapsedTime(&ms, t0, t1));
        return (double)ms;
    };
    std::vector<double> per_step;
    for (int rep = 0; rep < 6; rep++) {
        const double ms = timed_run();
        if (rep > 0) per_step.push_back(1e3 * ms / steps);
    }
    printf("%s, model %s (%s, B %d, -x %d), %d blocks%s, %zu bytes of shared memory a block, TMA level %d\n", prop.name,
           argc > 1 ? argv[1] : "784,128,10", ACT_NAMES[act], B, prec, m.plan.fused.blocks,
           m.plan.fused.deep ? " (kernels/fast/fused/fused_deep.cuh)" : m.plan.fused.U > 1 ? " of several units" : " of one unit",
           m.plan.fused.smem, m.plan.fused.tma);
    printf("a step: %.2f us (median of 5 launches of %d steps; %d rows of data, %s); the host enqueues a launch "
           "in %.1f us\n", median(per_step), steps, n, rows ? "a random permutation" : "in order",
           median(std::vector<double>(host_us.begin() + 1, host_us.end())));
    int khz;
    cudaCheck(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0));
    const double ns_per_cycle = 1e6 / khz;
    // a launch with the kernel's stamps, `points` a block and step: the stamps, and the time it took
    auto stamped_run = [&](int points) {
        long long *prof;
        cudaCheck(cudaMalloc(&prof, sizeof(long long) * (size_t)m.plan.fused.blocks * steps * points));
        m.fused_prof = prof;
        const double ms = timed_run();
        std::vector<long long> h((size_t)m.plan.fused.blocks * steps * points);
        cudaCheck(cudaMemcpy(h.data(), prof, sizeof(long long) * h.size(), cudaMemcpyDeviceToHost));
        cudaCheck(cudaFree(prof));
        m.fused_prof = NULL;
        printf("with the stamps: %.2f us a step; SM clock %.0f MHz (its nominal rate: the cycles below are read as "
               "ns at it)\n", 1e3 * ms / steps, khz / 1e3);
        return h;
    };
    if (m.plan.fused.deep) {   // kernels/fast/fused/fused_deep.cuh: a start and an end stamp per phase
        const int PP = fd_prof_points(L), G = m.plan.fused.blocks, phases = PP / 2;
        const std::vector<long long> h = stamped_run(PP);
        printf("%-8s %12s %12s %12s %14s %8s\n", "phase", "block 0 ns", "slowest ns", "mean ns", "block 0 waits",
               "slowest");
        double total0 = 0;
        for (int k = 0; k < phases; k++) {
            char name[16];
            if (k < L - 1) snprintf(name, sizeof(name), "F_%d", k);
            else if (k == L - 1) snprintf(name, sizeof(name), "H");
            else snprintf(name, sizeof(name), "D_%d", 2 * L - 2 - k);
            std::vector<double> meds;
            double wait0 = 0;
            for (int g = 0; g < G; g++) {
                std::vector<double> v, w;
                for (int st = 1; st + 1 < steps; st++) {
                    const long long *t = &h[((size_t)g * steps + st) * PP];
                    v.push_back((double)(t[2 * k + 1] - t[2 * k]) * ns_per_cycle);
                    const long long next = k + 1 < phases ? t[2 * k + 2] : t[PP];   // the next step's first start
                    w.push_back((double)(next - t[2 * k + 1]) * ns_per_cycle);
                }
                meds.push_back(median(v));
                if (g == 0) wait0 = median(w);
            }
            double mean = 0;
            for (double x : meds) mean += x / G;
            total0 += meds[0] + wait0;
            const auto worst = std::max_element(meds.begin(), meds.end());
            printf("%-8s %12.0f %12.0f %12.0f %14.0f %8d\n", name, meds[0], *worst, mean, wait0,
                   (int)(worst - meds.begin()));
        }
        printf("%-8s %12.0f  (block 0: jobs and waits)\n", "a step", total0);
#ifdef MF_PROF_LOOP   // the tiles' profile (every launch above), means over the blocks' tiles, ns
        {
            static long long tp[1024][2][5];
            cudaCheck(cudaMemcpyFromSymbol(tp, fd_prof_tile, sizeof(tp)));
            const char *kinds[2] = {"forward/dinp", "weight grad"};
            printf("%-14s %8s %10s %10s %10s %10s %10s\n", "tile", "tiles", "tile ns", "loop ns", "waits ns",
                   "first ns", "after ns");
            for (int k = 0; k < 2; k++) {
                double s[5] = {0, 0, 0, 0, 0};
                for (int g = 0; g < G; g++)
                    for (int j = 0; j < 5; j++) s[j] += (double)tp[g][k][j];
                if (s[4] == 0) continue;
                printf("%-14s %8.0f %10.0f %10.0f %10.0f %10.0f %10.0f\n", kinds[k], s[4], s[0] / s[4] * ns_per_cycle,
                       s[1] / s[4] * ns_per_cycle, s[2] / s[4] * ns_per_cycle, s[3] / s[4] * ns_per_cycle,
                       (s[0] - s[1]) / s[4] * ns_per_cycle);
            }
        }
#endif
        model_free(&m);
        device_data_free(&d);
        free(images);
        free(labels);
        return 0;
    }

    const int P = FUSED_PROF_POINTS, G = m.plan.fused.blocks;
    const std::vector<long long> h = stamped_run(P);
    static const char *const names[] = {"phase A: h's columns, next batch", "wait at the first barrier",
                                        "phase B1: logits, loss, dz", "wait at the second barrier",
                                        "phase B2: dz from L2, dh", "dW1, db, dW0, SGD", "to the next phase A"};
    printf("%-34s %12s %12s\n", "phase (median over steps)", "block 0 ns", "slowest ns");
    double total0 = 0;
    for (int k = 0; k < P; k++) {
        std::vector<double> worst;
        double b0 = 0;
        for (int g = 0; g < G; g++) {
            std::vector<double> v;
            for (int s = 1; s + 1 < steps; s++) {
                const long long *t = &h[((size_t)g * steps + s) * P];
                const long long end = k + 1 < P ? t[k + 1] : t[P]; // t[P] is the next step's point 0
                v.push_back((double)(end - t[k]) * ns_per_cycle);
            }
            const double med = median(v);
            if (g == 0) b0 = med;
            worst.push_back(med);
        }
        total0 += b0;
        printf("%-34s %12.0f %12.0f\n", names[k], b0, *std::max_element(worst.begin(), worst.end()));
    }
    printf("%-34s %12.0f\n", "block 0, all phases", total0);
    model_free(&m);
    device_data_free(&d);
    free(images);
    free(labels);
    return 0;
}
