/*
train_mlp_fast.cu: the fast GPU trainer of mlp.cu. The same model, flags, data and output as
train_mlp.cu (read that first: it is the same training, one simple kernel per operation), with the
fast kernels of kernels/fast/ and three ways to cut the time between them:

    fused kernels       the matmuls carry their epilogues: bias and activation in the forward
                        product, the activation's gradient in dinp (kernels/fast/matmul/epilogue.cuh); the
                        last layer, the loss and the last hidden layer's gradient are one kernel
                        (kernels/fast/ops/head.cuh); the SGD step rides on the gradient kernels
    tiled matmuls       register tiles fed by cp.async, tile and K split planned per shape, TF32
                        tensor cores with -x 1, BF16 with -x 2 (kernels/fast/matmul/matmul_fast.h)
    streams and graphs  the backward pass runs on three streams (model_backward_update), the next
                        batch is gathered while a step runs, and each run of steps between two log
                        lines is captured once into a CUDA graph and replayed (-f 1): a step costs
                        one graph launch, not a dozen host launches
    one kernel          each run of steps as one kernel: a model with one hidden layer in FP32
                        (kernels/fast/fused/fused_step.cuh, two grid-wide barriers a step), or with two or
                        more hidden layers (kernels/fast/fused/fused_deep.cuh, a barrier between a step's
                        products): no gaps between kernels

The step plan (kernels/fast/step/plan.cuh) decides all of it before training: per layer and product
the kernel family, tile and K split, stream and epilogue, and which copies the model keeps; -P 1
prints it, -P 2 prints it and exits. The executor (kernels/fast/step/step.cuh) runs it, on one GPU
or as one rank of several: nothing re-decides at launch time. -A 1 times the candidates of each
product on this GPU at start-up, once: the plan cache keeps the fastest.

Paths (-f): 2 (the default) the fused step where it is faster (plan_fused says which models and why
not), the graphs for the others; 3 the fused step wherever it can run, to compare it with 1; 1 replays
CUDA graphs; 0 launches the same kernels on the same streams from the host, step by step: what the
graphs save, measured by running both.
Precision (-x): 0 FP32 (on the CUDA cores, or, for large products and where the autotune finds it faster,
as 3xTF32 on the tensor cores, within the same tolerances: kernels/fast/matmul/matmul_fast.h);
1 TF32 tensor cores in the matmuls (the forward products' operands are
kept as TF32 values: model_forward says how); 2 BF16 tensor cores in the matmuls: mixed precision,
where only the matmuls' operands are rounded to BF16 (inside the kernels, as they are loaded) and
everything else stays FP32: the weights (the "master weights"), the momentum and the update, the
sums, the activations as stored, the loss and the softmax.
Several GPUs (-g N, or torchrun, mpirun, srun): data parallel through NCCL, a process per GPU, each
taking its share of every batch, the gradients summed over the GPUs before each step (the section
"several GPUs" before main, and run/job.h; NCCL is built in only where make found it, and loaded
only by a run of several ranks).

The data goes to the GPU once. Inside an epoch the host never copies or waits, except to print a
log line. test_mlp checks every tensor of this trainer against train_mlp_cpu.c, step by step.

Shapes: B batch, IN/OUT a layer's features, C classes, L layers.
Build: make train_fast    Run: ./train_mlp_fast  (./train_mlp_fast -h lists the flags)
*/
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run/args.h"                         // Config, the flag table shared by the trainers
#include "run/log.h"                          // settings box, step log, CSV log
#include "common/mlp.h"                       // ACT_*, MAX_LAYERS, param_layout
#include "common/rng.h"                       // the epoch shuffle: the same one the CPU trainer draws
#include "run/run.h"                          // -r and -c: resuming and checkpoints; Ctrl-C
#include "run/job.h"                          // several GPUs: the ranks of a job, one process each
#include "run/train.h"                        // loading the data, the epoch's steps, the settings box
#include "run/use.h"                          // -e, -p, -i: using a trained model
#include "common/utils.h"                     // checked host allocation and I/O
#include "data/dataset.h"                     // the datasets: IDX, CIFAR-10, image folders
#include "kernels/common.cuh"                 // cudaCheck, cudaMallocCheck, require_gpu
#include "kernels/data.cuh"                   // DeviceData, init_uniform_kernel
#include "kernels/fast/step/plan.cuh"   // the step plan: every kernel a step launches, decided before training
#include "kernels/fast/step/step.cuh"   // the model on the device, and the executor that runs its plan
#include "kernels/fast/matmul/tune.h"   // -A: the autotune and its cache
#if defined(MLP_NCCL) && !defined(TESTING)
#include <dlfcn.h>                       // -g: NCCL is loaded when asked for (nccl_load)
#include <nccl.h>                        // -g: the all-reduce of the gradients over the GPUs (its types)
#endif

#define FAST_EVAL_BATCH 1024       // evaluation runs the test set in batches of this many rows (or B if larger)

// the optimizer's settings of the command line, as the steps take them
static fast::Sgd sgd_of(const Config *c) { return fast::Sgd{c->lr, c->momentum, c->weight_decay}; }

// The precision a model runs in at `rows` rows a rank: -x is a ceiling, and a higher precision runs
// where that is the faster step (plan_precision says where, and why into why)
static int run_precision(const Config *c, int rows, int ranks, char *why, size_t n) {
    return plan_precision(c->sizes, c->L, rows, c->precision, c->path, ranks, why, n);
}

// the box's row for -x: the precision that runs, and the ceiling where that is another
static void box_precision(const Config *c, int prec) {
    if (prec == c->precision) box_row("matmul precision (-x)", "%s", PREC_NAMES[prec]);
    else box_row("matmul precision (-x)", "%s (-x %d is a ceiling; -P says why)", PREC_NAMES[prec], c->precision);
}



// ----------------------------------------------------------------------------
// main: the training loop

#ifndef TESTING
// A run of steps start + 1 .. end of an epoch (1-based), enqueued with a copy of its losses into
// pinned host memory, then the event `done`.
typedef struct {
    int start, end;
    cudaEvent_t done;
} StepRun;

// Waits for run k and prints its log line: the mean of its steps' losses, and the time a step since
// *last_ms (the GPU's time from the epoch's start event to the run's end, so the host's waits do
// not count). Exits when the run has diverged (log_step).
static void log_step_run(RunLog *log, const StepRun *k, const float *losses_host, cudaEvent_t epoch_start,
                         int epoch, float *last_ms) {
    cudaCheck(cudaEventSynchronize(k->done));
    float ms;
    cudaCheck(cudaEventElapsedTime(&ms, epoch_start, k->done));
    const int n = k->end - k->start;
    double sum = 0;
    for (int i = k->start; i < k->end; i++) sum += losses_host[i];
    log_losses(log, sum, n);
    log_step(log, epoch, k->end, (ms - *last_ms) / n);
    *last_ms = ms;
}

// the parameters and momentum, copied to the host for a checkpoint (run/run.h)
static void fetch_state(void *model, float *params, float *mbuf) {
    const fast::Model *m = (const fast::Model *)model;
    cudaCheck(cudaMemcpy(params, m->params, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
    cudaCheck(cudaMemcpy(mbuf, m->mbuf, m->num_params * sizeof(float), cudaMemcpyDeviceToHost));
}

// -e and -p: the forward pass on n rows of host inputs x, the logits back to the host (run/use.h).
// With TF32 the inputs go in rounded, as the training batches do (model_forward).
static void forward_logits(void *model, const float *x, int n, float *logits) {
    fast::Model *m = (fast::Model *)model;
    const size_t nx = (size_t)n * m->sizes[0];
    float *xr = (float *)mallocCheck(nx * sizeof(float));
    for (size_t i = 0; i < nx; i++) xr[i] = m->prec == PREC_TF32 ? round_tf32(x[i]) : x[i];
    cudaCheck(cudaMemcpy(m->acts[0], xr, nx * sizeof(float), cudaMemcpyHostToDevice));
    free(xr);
    fast::model_forward(m, n, 0);
    cudaCheck(cudaMemcpy(logits, m->acts[m->L], (size_t)n * m->sizes[m->L] * sizeof(float), cudaMemcpyDeviceToHost));
}

// ----------------------------------------------------------------------------
// several GPUs: data-parallel training through NCCL, one process per GPU
//
// Each rank is a process with one GPU. torchrun, mpirun or srun start them (one per GPU, on one
// machine or several), or -g N starts N of them on this machine (job_spawn, in main). They meet
// through run/job.h: the launcher's environment says which rank this is and where rank 0 listens;
// its TCP bootstrap hands rank 0's NCCL id and the run's place (a resumed run's epoch, step and
// shuffle) to the others; its sockets then watch that every rank is alive, and carry the vote
// that stops them all at the same step.
//
// Every rank loads the data and draws the same epoch permutations from the same seed, so the
// global batches come in the one-GPU order; rank r takes its share of each (model_share). Rank 0
// draws the initial weights (or loads -r's checkpoint) and broadcasts them and the momentum; from
// then on every rank takes the same SGD steps on the same summed gradient, so the parameters stay
// the same on all of them. Rank 0 alone prints, logs, evaluates and writes checkpoints; the others
// print only their errors.
//
// A step on each rank is the one-GPU executor's (kernels/fast/step/step.cuh), run by its plan for
// several ranks: its rows' forward pass and loss, with dlogits divided by the GLOBAL batch, so that
// the gradients of the ranks' shares add up to the global batch's mean gradient; then the backward
// pass, where a fourth stream sums each layer's gradients over the ranks (dp_sum_grads: NCCL's
// all-reduce, in place) as soon as that layer's dW and db are written, while the backward pass goes
// on with the layers below, and then takes that layer's SGD step. No SGD step rides on a gradient
// kernel here: the step must come after the sum. The runs of steps between log lines are CUDA
// graphs, the all-reduces inside them (-f 0: launched from the host).
//
// The batch: -b must be a multiple of the ranks (each takes -b/N rows). The last step of an epoch
// may be short: its rows are split as evenly as possible, the first (rows % N) ranks taking one
// more, and the loss is still divided by that step's global rows; each rank needs at least one
// row of it (checked at the start).
//
// Each log line's losses are summed over the ranks by one more all-reduce, and the ranks vote on
// stopping (job_agree): a Ctrl-C, SIGTERM or SIGHUP that reached any rank stops every rank after
// the same step, rank 0 writes the checkpoint, and the others wait for it at their exit. A rank that
// ends with an error, or dies, ends the others within run/job.h's liveness timeout, each with a line
// naming it.

// -b must divide among the ranks; else 1 and the message in msg
static int batch_share_error(char *msg, size_t n, int B, int ranks) {
    if (B % ranks == 0) return 0;
    snprintf(msg, n, "-b %d does not divide among %d ranks (each takes -b/N rows of every batch); give a -b that is a "
             "multiple of %d", B, ranks, ranks);
    return 1;
}

#ifdef MLP_NCCL

// NCCL is not linked but loaded (dlopen) when a run of several ranks asks for it, so that the
// trainer on one GPU never needs the library: first the one make found (MLP_NCCL_LIB), then the
// loader's usual places. These are the functions the ranks call, with nccl.h's own types.
#ifndef MLP_NCCL_LIB
#define MLP_NCCL_LIB "libnccl.so.2"
#endif
static struct {
    decltype(&::ncclGetVersion) GetVersion;
    decltype(&::ncclGetErrorString) GetErrorString;
    decltype(&::ncclGetLastError) GetLastError;  // (NCCL 2.13 on; NULL before)
    decltype(&::ncclGetUniqueId) GetUniqueId;
    decltype(&::ncclCommInitRank) CommInitRank;
    decltype(&::ncclCommDestroy) CommDestroy;
    decltype(&::ncclCommAbort) CommAbort;
    decltype(&::ncclGroupStart) GroupStart;
    decltype(&::ncclGroupEnd) GroupEnd;
    decltype(&::ncclBroadcast) Broadcast;
    decltype(&::ncclAllReduce) AllReduce;
} nccl;

static void nccl_load(void) {
    const char *names[] = {MLP_NCCL_LIB, "libnccl.so.2", "libnccl.so"};
    void *lib = NULL;
    for (int i = 0; i < 3 && !lib; i++) lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        die("LD_LIBRARY_PATH=the directory of libnccl.so.2, or one GPU (no -g)", "cannot load NCCL (%s): %s",
            MLP_NCCL_LIB, dlerror());
#define NCCL_FN(field, name, required)                                                                \
    *(void **)&nccl.field = dlsym(lib, name);                                                           \
    if (!nccl.field && (required)) die("a newer NCCL", "the NCCL library loaded has no %s", name)
    NCCL_FN(GetVersion, "ncclGetVersion", 1);
    NCCL_FN(GetErrorString, "ncclGetErrorString", 1);
    NCCL_FN(GetLastError, "ncclGetLastError", 0);
    NCCL_FN(GetUniqueId, "ncclGetUniqueId", 1);
    NCCL_FN(CommInitRank, "ncclCommInitRank", 1);
    NCCL_FN(CommDestroy, "ncclCommDestroy", 1);
    NCCL_FN(CommAbort, "ncclCommAbort", 1);
    NCCL_FN(GroupStart, "ncclGroupStart", 1);
    NCCL_FN(GroupEnd, "ncclGroupEnd", 1);
    NCCL_FN(Broadcast, "ncclBroadcast", 1);
    NCCL_FN(AllReduce, "ncclAllReduce", 1);
#undef NCCL_FN
}

#define ncclCheck(res) nccl_check_at((res), __FILE__, __LINE__)
static void nccl_check_at(ncclResult_t res, const char *file, int line) {
    if (res == ncclSuccess) return;
    fflush(stdout);
    fprintf(stderr, "error: %s:%d: NCCL error: %s (%s) ---> try: NCCL_DEBUG=WARN for NCCL's account of it\n", file,
            line, nccl.GetErrorString(res), nccl.GetLastError ? nccl.GetLastError(NULL) : "");
    exit(EXIT_RUNTIME);
}

// this process's rank: its job, its NCCL communicator, its copy of the model and data
typedef struct {
    Job *job;
    const Config *cfg;
    ncclComm_t comm;
    fast::Model model;         // its communication stream (model.comm) carries every NCCL call
    DeviceData train;
    cudaStream_t stream;       // the main stream of the step (as in the one-GPU path)
    cudaEvent_t ev_ready, ev_log, epoch_start, epoch_end;
} Rank;

// where a run starts, rank 0's (run_start) for the others: a resumed run's epoch, step and shuffle
typedef struct {
    int first_epoch, first_step;
    uint64_t steps_total;
    Rng shuffle;
} RankStart;

// the executor's sum of a layer's gradients over the ranks (Model.sum_grads): NCCL's all-reduce, in
// place, on the model's communication stream
static void dp_sum_grads(void *ctx, float *grads, size_t n, cudaStream_t stream) {
    ncclCheck(nccl.AllReduce(grads, grads, n, ncclFloat, ncclSum, ((Rank *)ctx)->comm, stream));
}

// n floats at p, summed over the ranks in place, ordered after the main stream's work so far; the
// main stream then waits for the sum
static void dp_sum_over_ranks(Rank *k, float *p, size_t n) {
    fast::Model *m = &k->model;
    cudaCheck(cudaEventRecord(k->ev_ready, k->stream));
    cudaCheck(cudaStreamWaitEvent(m->comm, k->ev_ready, 0));
    ncclCheck(nccl.AllReduce(p, p, n, ncclFloat, ncclSum, k->comm, m->comm));
    cudaCheck(cudaEventRecord(m->ev_comm_done, m->comm));
    cudaCheck(cudaStreamWaitEvent(k->stream, m->ev_comm_done, 0));
}

// The communicator while the rank trains. A process that ends early (an error line and exit, a
// diverging run, a stop) aborts it first, in an exit handler, so that no NCCL kernel is left
// waiting for a peer that will never come, and NCCL's own threads stop before CUDA shuts down.
// The normal end destroys it.
static ncclComm_t dp_live_comm = NULL;
static void dp_abort_at_exit(void) {
    ncclComm_t comm = dp_live_comm;
    dp_live_comm = NULL;
    if (comm) nccl.CommAbort(comm);  // (its result: nothing to do)
}

// What only rank 0 has: the run (-r, -c), the log and the evaluation sets
typedef struct {
    Run *run;
    RunLog *log;
    DeviceData *val, *test;
    fast::EvalBuffers *eval;
    double train_seconds, loss, acc;
    int epochs_run;
} RankZero;

// The rank's training: main's loop, its runs of steps the executor's (run_steps).
// At each log line the ranks vote on stopping; rank 0 logs, evaluates and writes checkpoints while
// the others go on to the next steps (whose first all-reduce waits for rank 0).
static void dp_rank_loop(Rank *k, RankZero *z, const RankStart *start, const EpochPlan *plan) {
    const Config *c = k->cfg;
    fast::Model *m = &k->model;
    const int r0 = k->job->rank == 0, steps = plan->steps, n_train = k->train.n;
    int *perm_host;
    cudaCheck(cudaMallocHost((void **)&perm_host, sizeof(int) * (size_t)n_train));
    float *losses_host = (float *)mallocCheck(sizeof(float) * (size_t)steps);
    Rng shuffle = start->shuffle;   // (rank 0 draws from its run's own, which -c keeps)
    for (int epoch = start->first_epoch; epoch <= c->epochs; epoch++) {
        if (r0) run_epoch(z->run, perm_host, n_train);
        else rng_permutation(&shuffle, perm_host, n_train);
        int done = (epoch == start->first_epoch ? start->first_step : 1) - 1;  // steps 1-based; the counter 0-based
        cudaCheck(cudaMemcpyAsync(m->perm, perm_host, sizeof(int) * (size_t)n_train, cudaMemcpyHostToDevice, k->stream));
        cudaCheck(cudaMemcpyAsync(m->step, &done, sizeof(int), cudaMemcpyHostToDevice, k->stream));
        cudaCheck(cudaEventRecord(k->epoch_start, k->stream));
        float last_log_ms = 0;
        long samples = 0;
        while (done < steps) {
            const int next_log = (done / c->log_every + 1) * c->log_every;
            const int end = next_log < steps ? next_log : steps, n = end - done;
            const int last_gbs = epoch_batch_size(plan, end - 1, c->batch);
            if (c->path == PATH_LAUNCH) fast::train_steps(m, &k->train, n, last_gbs, sgd_of(c), k->stream);
            else fast::run_steps(m, &k->train, n, last_gbs, sgd_of(c), k->stream);
            for (int s = done; s < end; s++) samples += epoch_batch_size(plan, s, c->batch);
            dp_sum_over_ranks(k, m->step_losses + done, (size_t)n);  // each rank's losses are its share
            cudaCheck(cudaEventRecord(k->ev_log, k->stream));
            cudaCheck(cudaEventSynchronize(k->ev_log));
            const int sig = job_agree(k->job, stop_requested());  // the same answer on every rank
            if (sig < 0) die(k->job->hint, "%s", k->job->err);
            if (r0) {
                float ms_now;
                cudaCheck(cudaEventElapsedTime(&ms_now, k->epoch_start, k->ev_log));
                cudaCheck(cudaMemcpy(losses_host, m->step_losses + done, n * sizeof(float), cudaMemcpyDeviceToHost));
                double sum = 0;
                for (int i = 0; i < n; i++) sum += losses_host[i];
                log_losses(z->log, sum, n);
                log_step(z->log, epoch, end, (ms_now - last_log_ms) / n);  // (exits if the run diverged)
                last_log_ms = ms_now;
                // the vote's signal (it may have reached another rank), not this rank's own: one that
                // came after this rank voted stops every rank at the next vote
                run_after_steps_on(z->run, z->log, epoch, end, steps, n, sig);  // a stop: checkpoint, message, exit
            } else if (sig) {
                exit(stop_exit_code(sig));  // (the exit waits for rank 0's checkpoint: run/job.h)
            }
            done = end;
        }
        if (r0) {
            cudaCheck(cudaEventRecord(k->epoch_end, k->stream));
            cudaCheck(cudaEventSynchronize(k->epoch_end));
            float epoch_ms;
            cudaCheck(cudaEventElapsedTime(&epoch_ms, k->epoch_start, k->epoch_end));
            z->train_seconds += epoch_ms / 1e3;
            z->epochs_run++;
            const int held = c->holdout > 0;
            double t0 = now_seconds();
            fast::evaluate(m, held ? z->val : z->test, z->eval, &z->loss, &z->acc, k->stream);
            log_epoch(z->log, epoch, epoch_ms / 1e3, samples, held ? "val" : "test", z->loss, z->acc,
                      1e3 * (now_seconds() - t0));
            run_end_of_epoch(z->run, epoch);  // -c: the checkpoint
        }
    }
    cudaCheck(cudaFreeHost(perm_host));
    free(losses_host);
}

// A usage error found by every rank alike: rank 0 says it; under -g's spawner the others end
// without a word (the spawner reports rank 0's), under another launcher each says it, as each rank
// of a job does
static void dp_usage_error(const Job *job, const char *prog, const char *msg) {
    if (job->rank == 0 || job->launcher != JOB_SPAWN) usage_error(prog, "%s", msg);
    exit(EXIT_USAGE);
}

// main for one rank of a job: everything main does for one GPU, with the ranks' gradients summed
static int train_data_parallel(Config *cfg, Job *job, int argc, char **argv) {
    using namespace fast;
    const int N = job->world, r0 = job->rank == 0;
    if (!r0 && !freopen("/dev/null", "w", stdout)) die("", "cannot silence rank %d's output: %s", job->rank, strerror(errno));
    // rank 0 runs the run: -r's checkpoint and the settings it holds, -c and -o; the others read
    // -r's settings too (the same checkpoint, read only), and write nothing
    Run run;
    if (!r0) {
        cfg->ckpt_path[0] = cfg->log_path[0] = cfg->grid_path[0] = '\0';
        cfg->writes_nothing = 1;
    }
    run_begin(&run, cfg, argc, argv, PROG_FAST);
    const int B = cfg->batch;
    char msg[512];
    if (batch_share_error(msg, sizeof(msg), B, N)) dp_usage_error(job, argv[0], msg);
    Dataset train_host, val_host, test_host;
    load_datasets_or_die(cfg, argv[0], &train_host, &test_host);
    split_holdout(&train_host, &val_host, cfg->holdout, cfg->seed);  // -H: a validation set
    const EpochPlan plan = epoch_plan(train_host.n, B, cfg->max_steps);
    if (plan.last_bs < N) {
        snprintf(msg, sizeof(msg), "%d ranks: the last step of every epoch has %d row%s (%d training images, -b %d), "
                 "fewer than one per GPU; give another -b", N, plan.last_bs, plan.last_bs == 1 ? "" : "s",
                 train_host.n, B);
        dp_usage_error(job, argv[0], msg);
    }
    cudaDeviceProp prop = require_gpu();
    int count = 0;
    cudaCheck(cudaGetDeviceCount(&count));
    const int dev = count == 1 ? 0 : job->local_rank;   // (a launcher may show each rank its GPU alone)
    if (dev >= count)
        die_at(EXIT_USAGE, __FILE__, __LINE__, "as many ranks on each machine as it has GPUs",
               "rank %d of %d is rank %d on its machine, which shows %d GPU%s", job->rank, N, job->local_rank, count,
               count == 1 ? "" : "s");
    cudaCheck(cudaSetDevice(dev));
    cudaCheck(cudaGetDeviceProperties(&prop, dev));

    // the ranks meet: NCCL's id from rank 0, then the communicator. (The NCCL clean-up is registered
    // first, so that it runs after run/job.h's exit handler: a rank that stops waits for rank 0's
    // checkpoint with its communicator whole, and one that fails tells the others before aborting it.)
    if (atexit(dp_abort_at_exit) != 0) die("", "atexit: cannot register the NCCL clean-up");
    if (job_connect(job) != 0) die(job->hint, "%s", job->err);
    stop_signals_install();  // (rank 0's again in run_start) a signal to any rank becomes the vote's
    stop_signals_keep();   // a launcher may pass the terminal's Ctrl-C on a second time
    nccl_load();
    int nccl_version = 0;
    ncclCheck(nccl.GetVersion(&nccl_version));
    ncclUniqueId id;
    memset(&id, 0, sizeof(id));
    if (r0) ncclCheck(nccl.GetUniqueId(&id));
    if (job_broadcast(job, &id, sizeof(id)) != 0) die(job->hint, "%s", job->err);
    Rank k;
    memset(&k, 0, sizeof(k));
    k.job = job;
    k.cfg = cfg;
    ncclCheck(nccl.CommInitRank(&k.comm, N, id, job->rank));
    dp_live_comm = k.comm;
    // every rank plans for rank 0's GPU, so that all run the same kernels: the same sums, the same steps
    MfTarget target = matmul_fast_target_here();
    if (job_broadcast(job, &target, sizeof(target)) != 0) die(job->hint, "%s", job->err);
    matmul_fast_set_target(&target);

    cudaCheck(cudaStreamCreate(&k.stream));
    cudaCheck(cudaEventCreateWithFlags(&k.ev_ready, cudaEventDisableTiming));
    cudaCheck(cudaEventCreate(&k.ev_log));
    cudaCheck(cudaEventCreate(&k.epoch_start));
    cudaCheck(cudaEventCreate(&k.epoch_end));
    const int D = dataset_dim(&train_host), share = B / N;
    const int max_batch = share > FAST_EVAL_BATCH ? share : FAST_EVAL_BATCH;
    device_data_upload(&k.train, train_host.images, train_host.labels, train_host.n, D);
    char prec_why[200];
    const int prec = run_precision(cfg, share, N, prec_why, sizeof(prec_why));
    model_build(&k.model, cfg->sizes, cfg->L, cfg->act, B, max_batch, prec, k.train.n, plan.steps, N);
    Model *m = &k.model;
    m->rank = job->rank;
    m->sum_grads = dp_sum_grads;
    m->sum_ctx = &k;
    DeviceData val, test;
    EvalBuffers eval;
    RankZero z;
    memset(&z, 0, sizeof(z));
    RankStart start;
    memset(&start, 0, sizeof(start));
    if (r0) {
        device_data_upload(&val, val_host.images, val_host.labels, val_host.n, D);
        device_data_upload(&test, test_host.images, test_host.labels, test_host.n, D);
        eval_buffers_alloc(&eval, val.n > test.n ? val.n : test.n);
        z.run = &run, z.val = &val, z.test = &test, z.eval = &eval;
        // the parameters and momentum: the checkpoint's (-r), or drawn from the seed
        const float *mbuf, *params = run_start(&run, &train_host, m, fetch_state, m->num_params, &mbuf);
        if (params) {
            cudaCheck(cudaMemcpy(m->params, params, m->num_params * sizeof(float), cudaMemcpyHostToDevice));
            cudaCheck(cudaMemcpy(m->mbuf, mbuf, m->num_params * sizeof(float), cudaMemcpyHostToDevice));
        } else {
            model_init_params(m, cfg->seed, k.stream);
        }
        start.first_epoch = run.first_epoch, start.first_step = run.first_step;
        start.steps_total = run.steps_total, start.shuffle = run.shuffle;
    }
    if (job_broadcast(job, &start, sizeof(start)) != 0) die(job->hint, "%s", job->err);
    cudaCheck(cudaDeviceSynchronize());   // (model_build's memsets and the copies above ran on the legacy stream)
    ncclCheck(nccl.GroupStart());
    ncclCheck(nccl.Broadcast(m->params, m->params, m->num_params, ncclFloat, 0, k.comm, m->comm));
    ncclCheck(nccl.Broadcast(m->mbuf, m->mbuf, m->num_params, ncclFloat, 0, k.comm, m->comm));
    ncclCheck(nccl.GroupEnd());
    cudaCheck(cudaStreamSynchronize(m->comm));
    model_sync_copies(m, k.stream);
    cudaCheck(cudaStreamSynchronize(k.stream));

    RunLog log;
    if (r0) {
        box_settings("train_mlp_fast", "GPU trainer, the fast one", cfg, &train_host, &test_host, m->num_params,
                     plan.steps);
        box_row("device", "rank 0 of %d: %s (sm_%d%d, %d SMs, %.0f GB)", N, prop.name, prop.major, prop.minor,
                prop.multiProcessorCount, prop.totalGlobalMem / 1e9);
        // (each value within the box's width: a longer one loses its middle, NCCL's version with it)
        box_row("ranks (data parallel)", "%d from %s, NCCL %d.%d.%d, %d rows a GPU", N, job_launcher_name(job),
                nccl_version / 10000, nccl_version / 100 % 100, nccl_version % 100, share);
        box_row("kernels (-f)", "%s", cfg->path == PATH_LAUNCH ? "0: fused, four streams, launched step by step"
                                                               : "1: fused, four streams, NCCL inside CUDA graphs");
        box_precision(cfg, prec);
        box_rule();
        if (cfg->path == PATH_LAUNCH) m->plan.run = RUN_LAUNCHES;
        int first;   // (the plan at a rank's rows)
        if (cfg->plan_print && prec_why[0]) printf("precision: -x %d is a ceiling; runs %s\n", cfg->precision, prec_why);
        if (cfg->plan_print)
            plan_print(stdout, &m->plan, model_share(m, B, &first), model_share(m, plan.last_bs, &first));
        if (cfg->autotune) printf("(-A: one GPU's; the ranks plan from the cost model, all alike)\n");
    }
    if (cfg->plan_print == 2) {   // -P 2: the plan, and nothing more, on every rank
        job_finish(job);
        return 0;
    }
    if (r0) {
        long steps_to_do = (long)(cfg->epochs - run.first_epoch + 1) * plan.steps - (run.first_step - 1);
        run_log_open(&log, cfg, PROG_FAST, plan.steps, train_host.num_classes, steps_to_do, (long)run.steps_total);
        z.log = &log;
    }
    dp_rank_loop(&k, &z, &start, &plan);

    if (r0) {
        if (cfg->holdout > 0 || z.epochs_run == 0)  // the test set, at the end
            evaluate(m, &test, &eval, &z.loss, &z.acc, k.stream);
        char where[400];
        snprintf(where, sizeof(where), "%d x %s", N, prop.name);
        log_final(&log, cfg, train_host.name, z.loss, z.acc, z.train_seconds, z.epochs_run,
                  device_bytes_allocated / 1e6, where);
        run_finish(&run);
        eval_buffers_free(&eval);
        device_data_free(&val);
        device_data_free(&test);
    }
    // (the graphs hold NCCL's captured work: they go first, or destroying the communicator waits for them)
    cudaCheck(cudaDeviceSynchronize());
    free_graphs(m);
    dp_live_comm = NULL;  // destroyed here, not aborted
    ncclCheck(nccl.CommDestroy(k.comm));
    job_finish(job);
    model_free(m);
    device_data_free(&k.train);
    cudaEvent_t evs[] = {k.ev_ready, k.ev_log, k.epoch_start, k.epoch_end};
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) cudaCheck(cudaEventDestroy(evs[i]));
    cudaCheck(cudaStreamDestroy(k.stream));
    dataset_free(&train_host);
    dataset_free(&val_host);
    dataset_free(&test_host);
    return 0;
}

#else  // built without NCCL: several ranks get one line and exit 2, before anything is loaded

static int train_data_parallel(Config *cfg, Job *job, int argc, char **argv) {
    (void)cfg;
    (void)argc;
    (void)argv;
    die_at(EXIT_USAGE, __FILE__, __LINE__, "one GPU (no -g, no launcher), or make clean && make train_fast NCCL_HOME=DIR",
           "%d ranks (%s): this train_mlp_fast was built without NCCL (libnccl), which several GPUs need; make's "
           "banner says where it looked", job->world, job_launcher_name(job));
}

#endif  // MLP_NCCL

// -g N: N ranks of this program on this machine, one GPU each (run/job.h's job_spawn), each the
// rank that torchrun would start; this process waits for them and exits as they did
static int spawn_ranks(const Config *cfg, int argc, char **argv) {
#ifndef MLP_NCCL
    die_at(EXIT_USAGE, __FILE__, __LINE__, "leave -g out (one GPU), or make clean && make train_fast NCCL_HOME=DIR",
           "-g %d: this train_mlp_fast was built without NCCL (libnccl), which -g needs; make's banner says where it "
           "looked", cfg->gpus);
#endif
    char msg[512];   // (with -r, the checkpoint's -b: the ranks check it)
    if (!cfg->resume_path[0] && batch_share_error(msg, sizeof(msg), cfg->batch, cfg->gpus)) usage_error(argv[0], "%s", msg);
    int count = 0;   // (no GPU at all: the ranks say so, after the checks of the command line)
    if (cudaGetDeviceCount(&count) != cudaSuccess) count = 0;
    (void)cudaGetLastError();
    if (count > 0 && count < cfg->gpus)
        die_at(EXIT_USAGE, __FILE__, __LINE__, "a smaller -g", "-g %d: %d GPU%s visible here (CUDA_VISIBLE_DEVICES=%s)",
               cfg->gpus, count, count == 1 ? " is" : "s are",
               getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset");
    fflush(stdout);
    return job_spawn(cfg->gpus, job_argv_without(argc, argv, "-g", "--gpus"));
}

// -A and the plan cache (kernels/fast/matmul/tune.h): each tiled product of a batch plan from the
// cache, else with -A 1 from the autotune (which then keeps it in the cache), else the cost model's,
// which the plan already holds. The K-major and BF16-copies families and the head are chosen by rule,
// and a first layer on pixel bytes keeps its 3xTF32 tile (the gather's choice rests on it).
typedef struct {
    PlanCache cache;
    int tune, tuned;     // -A; products timed
    double seconds;      // their time
} PlanTune;

static void plan_refine(void *ctx, const StepPlan *p, BatchPlan *bp) {
    PlanTune *t = (PlanTune *)ctx;
    for (int l = 0; l < p->L; l++)
        for (int k = 0; k < 3; k++) {
            ProductPlan *pp = &bp->layer[l].p[k];
            if (!pp->used || pp->prec == MF_FP32_PIXELS || pp->family == FAM_HEAD || pp->family == FAM_TF32_KMAJOR ||
                pp->family == FAM_BF16_COPIES || pp->family == FAM_WGMMA_BF16_COPIES)
                continue;
            const int scratch = k == MF_DWEIGHT && p->have_scratch;
            MatmulFastPlan mm;
            int source = TUNE_FROM_MODEL;
            const double t0 = now_seconds();
            if (matmul_fast_tune_cached(&t->cache, p->ranks, (MfProduct)k, pp->M, pp->N, pp->K, pp->prec, scratch,
                                        t->tune, &mm, &source) != 0 || source == TUNE_FROM_MODEL)
                continue;
            if (source == TUNE_FROM_AUTOTUNE) t->tuned++, t->seconds += now_seconds() - t0;
            if (mm.splits > 1 && !mm.cluster && (size_t)mm.splits * pp->M * pp->N > p->scratch_floats) continue;
            pp->mm = mm;
            pp->family = plan_tiled_family(pp->prec, &mm);
            pp->source = source == TUNE_FROM_CACHE ? SRC_CACHE : SRC_TUNE;
            const PlanCacheShape shape = {k, pp->M, pp->N, pp->K, pp->prec, scratch, p->ranks};
            const PlanCacheEntry *e = plan_cache_find(&t->cache, &shape);
            if (e) pp->est_us = e->us;
        }
}

// The plan's batches made now, each product from the cache or the autotune: the training batch, the
// epoch's last, the evaluation's (the autotune synchronises the GPU, which no graph capture may meet)
static void plan_tune_batches(fast::Model *m, PlanTune *t, int autotune, int last_bs, int eval_sizes[3]) {
    PlanCacheKey key;
    matmul_fast_tune_key(&key);
    char warn[512] = "";
    plan_cache_open(&t->cache, &key, warn, sizeof(warn));
    if (warn[0]) fprintf(stderr, "warning: %s\n", warn);
    t->tune = autotune;
    m->plan.refine = plan_refine;
    m->plan.refine_ctx = t;
    m->plan.nbatch = 0;
    if (m->plan.run != RUN_FUSED) {   // (the fused step's products are its kernel's own)
        plan_batch(&m->plan, m->B, 1);
        plan_batch(&m->plan, last_bs, 1);
    }
    for (int i = 0; i < 3; i++)
        if (eval_sizes[i] > 0) plan_batch(&m->plan, eval_sizes[i], 0);
    if (t->tuned) printf("autotune: %d product%s timed in %.2f s, kept in %s\n", t->tuned, t->tuned > 1 ? "s" : "",
                         t->seconds, t->cache.path[0] ? t->cache.path : "(no cache folder)");
    char err[512];
    if (t->cache.changed && plan_cache_save(&t->cache, err, sizeof(err)) != 0) fprintf(stderr, "warning: %s\n", err);
}

int main(int argc, char **argv) {
    using namespace fast;
    Config cfg;
    config_from_command_line(&cfg, argc, argv, PROG_FAST);
    static Job job;   // (its watcher thread and exit handler keep its address: static)
    if (job_from_env(&job) < 0) die(job.hint, "%s", job.err);
    if (cfg.gpus > 0 && job.launcher != JOB_NONE)
        usage_error(argv[0], "-g %d under %s: the launcher starts the ranks (one per GPU); leave -g out", cfg.gpus,
                    job_launcher_name(&job));
    if (cfg.gpus > 0 && !cfg.eval_path[0]) return spawn_ranks(&cfg, argc, argv);  // -g N (-e uses one GPU)
    if ((job.world > 1 || job.launcher == JOB_SPAWN) && !cfg.eval_path[0]) return train_data_parallel(&cfg, &job, argc, argv);
    if (job.rank > 0) return 0;   // -e in a job: rank 0 evaluates
    cudaDeviceProp prop = require_gpu();
    if (cfg.eval_path[0]) {  // -e: evaluate a checkpoint (or -p: classify pictures with it), and exit
        Use use;
        use_begin(&use, &cfg, PROG_FAST);
        Model model;
        char why[200];
        model_build(&model, cfg.sizes, cfg.L, cfg.act, USE_BATCH, USE_BATCH, run_precision(&cfg, USE_BATCH, 1, why, sizeof(why)),
                    1, 1);
        cudaCheck(cudaMemcpy(model.params, use.ck.params, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
        model_sync_copies(&model, 0);
        int rc = use_run(&use, &model, forward_logits);
        model_free(&model);
        return rc;
    }
    Run run;
    run_begin(&run, &cfg, argc, argv, PROG_FAST);  // -r: the checkpoint, and the settings it holds
    Dataset train_host, val_host, test_host;
    load_datasets_or_die(&cfg, argv[0], &train_host, &test_host);
    split_holdout(&train_host, &val_host, cfg.holdout, cfg.seed);  // -H: a validation set
    int B = cfg.batch;
    EpochPlan plan = epoch_plan(train_host.n, B, cfg.max_steps);

    cudaStream_t stream;
    cudaCheck(cudaStreamCreate(&stream));
    DeviceData train, val, test;
    int D = dataset_dim(&train_host);
    device_data_upload(&train, train_host.images, train_host.labels, train_host.n, D);
    device_data_upload(&val, val_host.images, val_host.labels, val_host.n, D);
    device_data_upload(&test, test_host.images, test_host.labels, test_host.n, D);
    Model model;
    char prec_why[200];
    const int prec = run_precision(&cfg, B, 1, prec_why, sizeof(prec_why));
    model_build(&model, cfg.sizes, cfg.L, cfg.act, B, B > FAST_EVAL_BATCH ? B : FAST_EVAL_BATCH, prec, train.n,
                plan.steps);
    const float *mbuf, *params = run_start(&run, &train_host, &model, fetch_state, model.num_params, &mbuf);
    if (params) {  // resuming: the checkpoint's weights and momentum
        cudaCheck(cudaMemcpy(model.params, params, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
        cudaCheck(cudaMemcpy(model.mbuf, mbuf, model.num_params * sizeof(float), cudaMemcpyHostToDevice));
        model_sync_copies(&model, stream);
    } else {
        model_init_params(&model, cfg.seed, stream);
    }
    EvalBuffers eval;
    eval_buffers_alloc(&eval, val.n > test.n ? val.n : test.n);

    box_settings("train_mlp_fast", "GPU trainer, the fast one", &cfg, &train_host, &test_host, model.num_params,
                 plan.steps);
    box_row("device", "%s (sm_%d%d, %d SMs, %.0f GB)", prop.name, prop.major, prop.minor, prop.multiProcessorCount,
            prop.totalGlobalMem / 1e9);
    if (cfg.path >= PATH_FUSED && !model_use_fused(&model, cfg.path == PATH_FUSED_ANY)) cfg.path = PATH_GRAPH;
    if (cfg.path >= PATH_FUSED && model.plan.fused.deep)
        box_row("kernels (-f)", "%d: a run of steps as one kernel, %d blocks, tiles of each product", cfg.path,
                model.plan.fused.blocks);
    else if (cfg.path >= PATH_FUSED)
        box_row("kernels (-f)", "%d: a run of steps as one kernel, %d blocks of %d unit%s", cfg.path,
                model.plan.fused.blocks, model.plan.fused.U, model.plan.fused.U > 1 ? "s" : "");
    else
        box_row("kernels (-f)", "%s%s%s", cfg.path == PATH_GRAPH ? "1: fused, three streams, replayed from CUDA graphs"
                                                                  : "0: fused, three streams, launched step by step",
                model.plan.fused.why[0] ? "; not -f 2: " : "", model.plan.fused.why);
    box_precision(&cfg, prec);
    box_rule();
    if (cfg.path == PATH_LAUNCH) model.plan.run = RUN_LAUNCHES;
    static PlanTune tune;
    const int max_batch = B > FAST_EVAL_BATCH ? B : FAST_EVAL_BATCH;
    int eval_sizes[3] = {max_batch, val.n % max_batch, test.n % max_batch};
    plan_tune_batches(&model, &tune, cfg.autotune, plan.last_bs, eval_sizes);
    if (cfg.plan_print) {   // -P: the plan, and with -P 2 nothing more
        if (prec_why[0]) printf("precision: -x %d is a ceiling; runs %s\n", cfg.precision, prec_why);
        plan_print(stdout, &model.plan, B, plan.last_bs);
        if (cfg.plan_print == 2) return 0;
    }

    RunLog log;
    long steps_to_do = (long)(cfg.epochs - run.first_epoch + 1) * plan.steps - (run.first_step - 1);
    run_log_open(&log, &cfg, PROG_FAST, plan.steps, train_host.num_classes, steps_to_do, (long)run.steps_total);
    int *perm_host;
    cudaCheck(cudaMallocHost((void **)&perm_host, sizeof(int) * (size_t)train.n));
    float *losses_host;  // (plan.steps) pinned: each run of steps copies its losses here behind it
    cudaCheck(cudaMallocHost((void **)&losses_host, sizeof(float) * (size_t)plan.steps));
    cudaEvent_t epoch_start, epoch_end;
    cudaCheck(cudaEventCreate(&epoch_start));
    cudaCheck(cudaEventCreate(&epoch_end));
    StepRun runs[2];  // the run just enqueued, and the one before it, whose log line may be waiting
    for (int i = 0; i < 2; i++) cudaCheck(cudaEventCreate(&runs[i].done));

    double loss = 0, acc = 0, train_seconds = 0;
    int epochs_run = 0;
    for (int epoch = run.first_epoch; epoch <= cfg.epochs; epoch++) {
        run_epoch(&run, perm_host, train.n);
        int first = run_first_step(&run, epoch), done = first - 1;  // steps are 1-based; the counter, 0-based
        cudaCheck(cudaMemcpyAsync(model.perm, perm_host, sizeof(int) * (size_t)train.n, cudaMemcpyHostToDevice, stream));
        cudaCheck(cudaMemcpyAsync(model.step, &done, sizeof(int), cudaMemcpyHostToDevice, stream));
        cudaCheck(cudaEventRecord(epoch_start, stream));
        float last_log_ms = 0;
        long samples = 0;
        // Runs of steps from one log line to the next. The host prints a run's line after it has
        // enqueued the next run, so the GPU never idles while the host waits, reads the losses and
        // prints. The epoch's last run, and a run after which Ctrl-C or SIGTERM asked to stop, are
        // waited for at once: a checkpoint must hold the parameters of the steps it counts.
        const StepRun *waiting = NULL;  // the run before the newest one, while its line is not printed
        while (done < plan.steps) {
            int next_log = (done / cfg.log_every + 1) * cfg.log_every;
            int end = next_log < plan.steps ? next_log : plan.steps;
            if (cfg.path >= PATH_FUSED) {
                fused_run(&model, &train, end - done, epoch_batch_size(&plan, end - 1, B), sgd_of(&cfg), stream);
            } else if (cfg.path == PATH_GRAPH) {
                run_steps(&model, &train, end - done, epoch_batch_size(&plan, end - 1, B), sgd_of(&cfg), stream);
            } else {
                for (int s = done; s < end; s++) train_step(&model, &train, epoch_batch_size(&plan, s, B), sgd_of(&cfg), stream);
            }
            for (int s = done; s < end; s++) samples += epoch_batch_size(&plan, s, B);
            StepRun *k = waiting == &runs[0] ? &runs[1] : &runs[0];
            k->start = done;
            k->end = end;
            cudaCheck(cudaMemcpyAsync(losses_host + done, model.step_losses + done, (size_t)(end - done) * sizeof(float),
                                      cudaMemcpyDeviceToHost, stream));
            cudaCheck(cudaEventRecord(k->done, stream));
            done = end;
            if (waiting) {  // its line, and its steps counted
                log_step_run(&log, waiting, losses_host, epoch_start, epoch, &last_log_ms);
                run_count_steps(&run, waiting->end - waiting->start);
            }
            waiting = k;
            if (done == plan.steps || stop_requested()) {
                log_step_run(&log, k, losses_host, epoch_start, epoch, &last_log_ms);
                waiting = NULL;
                run_after_steps(&run, &log, epoch, done, plan.steps, k->end - k->start);  // Ctrl-C: checkpoint, exit 130
            }
        }
        cudaCheck(cudaEventRecord(epoch_end, stream));
        cudaCheck(cudaEventSynchronize(epoch_end));
        float epoch_ms;
        cudaCheck(cudaEventElapsedTime(&epoch_ms, epoch_start, epoch_end));
        train_seconds += epoch_ms / 1e3;
        epochs_run++;
        double t0 = now_seconds();
        evaluate(&model, cfg.holdout > 0 ? &val : &test, &eval, &loss, &acc, stream);
        log_epoch(&log, epoch, epoch_ms / 1e3, samples, cfg.holdout > 0 ? "val" : "test", loss, acc,
                  1e3 * (now_seconds() - t0));
        run_end_of_epoch(&run, epoch);  // -c: the checkpoint
    }
    if (cfg.holdout > 0 || epochs_run == 0) evaluate(&model, &test, &eval, &loss, &acc, stream);  // the test set, at the end
    log_final(&log, &cfg, train_host.name, loss, acc, train_seconds, epochs_run, device_bytes_allocated / 1e6,
              prop.name);
    run_finish(&run);

    cudaCheck(cudaFreeHost(perm_host));
    cudaCheck(cudaFreeHost(losses_host));
    cudaCheck(cudaEventDestroy(epoch_start));
    cudaCheck(cudaEventDestroy(epoch_end));
    for (int i = 0; i < 2; i++) cudaCheck(cudaEventDestroy(runs[i].done));
    eval_buffers_free(&eval);
    model_free(&model);
    device_data_free(&train);
    device_data_free(&val);
    device_data_free(&test);
    dataset_free(&train_host);
    dataset_free(&val_host);
    dataset_free(&test_host);
    cudaCheck(cudaStreamDestroy(stream));
    return 0;
}
#endif
