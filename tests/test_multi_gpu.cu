/*
tests/test_multi_gpu.cu: train_mlp_fast -g N (data-parallel training through NCCL), run as a user runs
it, against its own one-GPU path. Host code only: it runs the trainer binary on a small IDX
dataset written here and reads back its CSV logs and checkpoints; CUDA only counts the GPUs.

  1. the command line (no GPU needed): -g out of range; -b not a multiple of -g; an epoch whose last
     step has fewer rows than GPUs; each gets exit 2 and one line. A build without NCCL: any -g gets
     one line naming NCCL and exit 2 (and the rest is skipped).
  2. (a GPU) -g 1 against the plain path (no -g), for sigmoid, relu, tanh, TF32 (-x 1) and a model
     of 40 classes (more than the fused head takes: the separate softmax kernel) with a validation
     set (-H): every step's loss (-v 1: each step is a log line), the final evaluation, and the final
     weights and momentum of the checkpoint.
     Tolerance: none, bitwise. With one rank the same kernels run on the same rows in the same order;
     what -g changes is where the SGD step runs (after the all-reduce, in sgd_update_fast, instead of
     fused into the bias and weight gradient kernels: both call sgd_one on the same gradient value)
     and NCCL's all-reduce and broadcast, which with one rank leave the buffer as it is.
  3. (a GPU) -g with more GPUs than are visible: exit 2 and one line.
  4. (N GPUs, for N = 2 and 4 where the machine has them; the N-GPU parts are 4 to 7) -g N against
     -g 1 at the same global batch (each GPU takes 1/N of every batch, the epoch's short last batch
     of 41 rows split 21/20 on two GPUs, 11/10/10/10 on four), step by step, for the same five models.
     Tolerances (FP32): each step's loss within 1e-4, the final weights within 1e-4 and the momentum
     within 1e-3 in relative norm, the evaluation's loss within 1e-3 and its accuracy within 1%.
     Why: the two runs compute the same sums in another order. A weight gradient is one sum over the
     batch's rows on one GPU, two half sums added by NCCL on two, and a K split or tile the planner
     picks for 32 rows may differ from its pick for 64: each gradient then differs in its last bits
     (relative 1e-7 to 1e-6), and over these 32 steps the weights drift apart by far less than 1e-4
     of their size. A real fault is far larger: a rank's share divided by its own rows instead of the
     global batch doubles the step, a rank that takes the wrong rows or skips the all-reduce trains on
     other data, and the losses part in the second or third digit within a few steps. The momentum
     is a sum of gradients, some of whose entries nearly cancel: held 10x looser.
     TF32 (-x 1): 10x looser again (2e-3 for the losses, 1e-3 for the weights, 1e-2 for the momentum,
     1e-2 for the evaluation's loss). The forward products read the weights rounded to TF32's 10
     mantissa bits, and a weight that differs by an FP32 ulp between the runs can round to the
     neighbouring TF32 value, a jump of 2^-11 of that weight.
  5. resuming under -g: a run of 2 epochs, and one of 1 epoch resumed with -r for the second, end
     with the same checkpoint, byte for byte (-g 1; and -g N with N GPUs); Ctrl-C under -g writes its
     checkpoint and exits 130, and a diverging run (-l 1000) exits 1 with a line naming the step,
     neither hanging (every run here is under `timeout`).
  6. (N GPUs) -g N at per-GPU batches that take the large tiles (784-4096-4096-10 at global batches
     2048, 3072 and 4096, every precision): every step against -g 1, and in TF32 on the K-major
     wgmma kernel the final weights too (test_large says why and how close).
  7. (N GPUs) the models of 4 started by torchrun (torchrun --no-python --nproc-per-node N, or
     python3 -m torch.distributed.run where only PyTorch's module is there) against their -g N run:
     every step's loss, the evaluation, the final weights and momentum, bitwise. Without torchrun
     each case is skipped, and counted.
  8. (2 GPUs) the path between machines, on one: -g 2 with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1
     NCCL_NET=Socket, where NCCL_DEBUG=INFO must say "via NET/Socket", against -g 1 step by step
     (the relu model, the tolerances of 4).

Usage: tests/bin/test_multi_gpu [TRAINER]   (default ./train_mlp_fast)
Ends with "N passed, N failed[, N skipped]"; exits 1 when a check failed.
*/
#include <cuda_runtime.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../run/checkpoint.h"  // checkpoint_read: the weights and momentum a run ends with
#include "../common/rng.h"         // the dataset's pixels
#include "../common/utils.h"       // mallocCheck, fopenCheck
#include "../run/job.h"            // job_free_port: torchrun's --master-port
#include "check.h"
#include "idx_write.h"  // write_idx_split

#define RUN_TIMEOUT_S 300  // a trainer run that takes longer has hung (the runs here take seconds)

static char tmpdir[256], data4[300], data40[300], data784[300];
static const char *bin = "./train_mlp_fast";

// ----------------------------------------------------------------------------
// helpers

// A learnable dataset of 8x8 images and any number of classes (tests/fixtures.h's make_data has 4
// only): class c lights up the pixels p with p % classes == c a little, under noise (4 classes: 16
// pixels each; 40 classes: one or two pixels each). (side: 8, or 28 for the large products' runs,
// MNIST's 784 inputs)
static void make_class_data(const char *dir, int classes, int ntrain, int ntest, int side = 8) {
    mkdir(dir, 0777);
    Rng rng;
    rng_seed(&rng, 7 + (uint64_t)classes, 5);
    const int D = side * side;
    for (int split = 0; split < 2; split++) {
        int n = split ? ntest : ntrain;
        uint8_t *img = (uint8_t *)mallocCheck((size_t)n * D), *lab = (uint8_t *)mallocCheck((size_t)n);
        for (int i = 0; i < n; i++) {
            int c = (int)rng_below(&rng, (uint32_t)classes);
            lab[i] = (uint8_t)c;
            for (int p = 0; p < D; p++)
                img[(size_t)i * D + p] = (uint8_t)((p % classes == c ? 90 : 0) + rng_below(&rng, 160));
        }
        write_idx_split(dir, split, img, lab, n, side, side);
        free(img);
        free(lab);
    }
}

// Runs `timeout RUN_TIMEOUT_S LAUNCHER bin args` through the shell (launcher "": the trainer by
// itself; else a command that starts it, as torchrun does); returns its exit status (124: it hung),
// and the output (stdout and stderr together) in out.
static int vrun_launched(const char *launcher, char *out, size_t outlen, const char *fmt, va_list ap) {
    char args[3000], cmd[4000], path[600];
    vsnprintf(args, sizeof(args), fmt, ap);
    snprintf(path, sizeof(path), "%s/out.txt", tmpdir);
    snprintf(cmd, sizeof(cmd), "timeout %d %s %s %s", RUN_TIMEOUT_S, launcher, bin, args);
    return shell_capture(cmd, path, out, outlen);
}
static int run_launched(const char *launcher, char *out, size_t outlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int run_launched(const char *launcher, char *out, size_t outlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vrun_launched(launcher, out, outlen, fmt, ap);
    va_end(ap);
    return rc;
}
static int run(char *out, size_t outlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t outlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = vrun_launched("", out, outlen, fmt, ap);
    va_end(ap);
    return rc;
}

// How torchrun is started here: "torchrun", else PyTorch's module of it through python3 (on a
// machine where torchrun lives in PyTorch's environment but not on PATH), else NULL: not installed.
static const char *torchrun_command(void) {
    static int looked = 0;
    static const char *cmd = NULL;
    if (!looked) {
        looked = 1;
        if (system("command -v torchrun >/dev/null 2>&1") == 0) cmd = "torchrun";
        else if (system("python3 -c 'import torch.distributed.run' >/dev/null 2>&1") == 0)
            cmd = "python3 -m torch.distributed.run";
    }
    return cmd;
}

static int count_lines(const char *text) {
    int n = 0;
    for (const char *p = text; *p; p++) n += *p == '\n';
    return n;
}

// the first line of text, for the messages of checks
static const char *first_line(const char *text, char *buf, size_t n) {
    size_t k = strcspn(text, "\n");
    snprintf(buf, n, "%.*s", (int)(k < n ? k : n - 1), text);
    return buf;
}

static uint8_t *read_file(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = (uint8_t *)mallocCheck(size > 0 ? (size_t)size : 1);
    *n = fread(buf, 1, size > 0 ? (size_t)size : 0, f);
    fclose(f);
    return buf;
}

static int same_file_bytes(const char *a, const char *b) {
    size_t na, nb;
    uint8_t *pa = read_file(a, &na), *pb = read_file(b, &nb);
    int same = pa && pb && na == nb && na > 0 && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return same;
}

// What a run's CSV log holds: each train row's loss (one per step with -v 1), and the last
// evaluation (the summary row: the test set at the end)
#define MAX_STEPS 256
typedef struct {
    int n;
    double loss[MAX_STEPS];
    char text[MAX_STEPS][32];  // the loss as the log wrote it
    double eval_loss, eval_acc;
    int evals;                 // eval and val rows
} CsvRun;

static int read_csv(const char *path, CsvRun *r) {
    memset(r, 0, sizeof(*r));
    r->eval_loss = r->eval_acc = NAN;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = '\0';
        char *field[9];  // kind,epoch,step,global_step,loss,accuracy,ms,samples_per_s,mem_mb
        int k = 0;
        field[k++] = line;
        for (char *p = line; *p && k < 9; p++)
            if (*p == ',') {
                *p = '\0';
                field[k++] = p + 1;
            }
        if (k < 6) continue;
        if (strcmp(field[0], "train") == 0 && r->n < MAX_STEPS) {
            r->loss[r->n] = atof(field[4]);
            snprintf(r->text[r->n], sizeof(r->text[0]), "%s", field[4]);
            r->n++;
        } else if (strcmp(field[0], "eval") == 0 || strcmp(field[0], "val") == 0) {
            r->evals++;
        } else if (strcmp(field[0], "summary") == 0) {
            r->eval_loss = atof(field[4]);
            r->eval_acc = atof(field[5]);
        }
    }
    fclose(f);
    return 0;
}

// check.h's rel_norm, and *bitwise: every float the same bits
static double rel_norm_bits(const float *a, const float *b, size_t n, int *bitwise) {
    *bitwise = memcmp(a, b, n * sizeof(float)) == 0;
    return rel_norm(a, b, n);
}

#define OUT_LEN (1 << 16)
static char out[OUT_LEN];

// ----------------------------------------------------------------------------
// the models compared

typedef struct {
    const char *name;
    const char *flags;  // beside -d: the model and the run
    int classes;        // which dataset
    int tf32;
} Case;

// 2 epochs of 1001 training images (901 with -H 0.1) at -b 64: 16 steps (15), the last of 41 rows (5)
static const Case MODELS[] = {
    {"sigmoid, 64-37-24-4", "-m 64,37,24,4 -a sigmoid", 4, 0},
    {"relu, 64-37-24-4", "-m 64,37,24,4 -a relu", 4, 0},
    {"tanh, 64-37-24-4", "-m 64,37,24,4 -a tanh", 4, 0},
    {"TF32 (-x 1), tanh, 64-48-24-4", "-m 64,48,24,4 -a tanh -x 1", 4, 1},
    {"40 classes (the separate softmax), -H 0.1, sigmoid, 64-32-40", "-m 64,32,40 -a sigmoid -H 0.1", 40, 0},
};
#define NUM_MODELS ((int)(sizeof(MODELS) / sizeof(MODELS[0])))
#define COMMON "-b 64 -l 0.1 -k 0.9 -w 0.0001 -n 2 -v 1 -s 5"

// One run of a model; gpus 0: no -g. launcher: NULL, or a command that starts the trainer as its
// ranks itself (torchrun: no -g then). Its CSV and checkpoint are tmpdir/NAME.csv and .ckpt.
static int train(const Case *m, int gpus, const char *name, const char *launcher = NULL) {
    char g[32] = "";
    if (gpus && !launcher) snprintf(g, sizeof(g), "-g %d", gpus);
    int rc = run_launched(launcher ? launcher : "", out, OUT_LEN, "-d %s %s %s %s -o %s/%s.csv -c %s/%s.ckpt",
                          m->classes == 40 ? data40 : data4, m->flags, COMMON, g, tmpdir, name, tmpdir, name);
    char msg[512];
    if (rc != 0)
        printf("    (%s %s: exit %d: %s)\n", m->name, launcher ? launcher : g[0] ? g : "without -g", rc,
               first_line(out, msg, sizeof(msg)));
    return rc;
}

// The run `got` against the run `want`: every step's loss, the final evaluation, the final weights
// and momentum. bitwise: all must be the same bits (and the losses the same text); else within the
// tolerances of the top of the file.
static void compare_runs(const Case *m, const char *got, const char *want, int bitwise) {
    char path[600], err[2048];
    CsvRun a, b;
    snprintf(path, sizeof(path), "%s/%s.csv", tmpdir, got);
    int ra = read_csv(path, &a);
    snprintf(path, sizeof(path), "%s/%s.csv", tmpdir, want);
    int rb = read_csv(path, &b);
    if (!check(ra == 0 && rb == 0 && a.n == b.n && a.n >= 30 && a.evals == b.evals && a.evals >= 2,
               "%s: both logs have every step (%d and %d steps) and every evaluation", m->name, a.n, b.n))
        return;
    const double tl = m->tf32 ? 2e-3 : 1e-4, tw = m->tf32 ? 1e-3 : 1e-4, tm = m->tf32 ? 1e-2 : 1e-3;
    const double te = m->tf32 ? 1e-2 : 1e-3;
    double worst = 0;
    int worst_step = 0, same_text = 1;
    for (int i = 0; i < a.n; i++) {
        double d = fabs(a.loss[i] - b.loss[i]);
        if (!(d <= worst)) {
            worst = d;
            worst_step = i + 1;
        }
        same_text &= strcmp(a.text[i], b.text[i]) == 0;
    }
    if (bitwise)
        check(same_text, "%s: every step's loss the same (largest difference %.2e, at step %d)", m->name, worst,
              worst_step);
    else
        check(worst <= tl, "%s: every step's loss within %.0e (largest difference %.2e, at step %d)", m->name, tl,
              worst, worst_step);
    if (bitwise)
        check(a.eval_loss == b.eval_loss && a.eval_acc == b.eval_acc,
              "%s: the same final evaluation (loss %.6f and %.6f, accuracy %.4f and %.4f)", m->name, a.eval_loss,
              b.eval_loss, a.eval_acc, b.eval_acc);
    else
        check(fabs(a.eval_loss - b.eval_loss) <= te && fabs(a.eval_acc - b.eval_acc) <= 0.01,
              "%s: the final evaluation's loss within %.0e and accuracy within 1%% (loss %.6f and %.6f, accuracy "
              "%.4f and %.4f)", m->name, te, a.eval_loss, b.eval_loss, a.eval_acc, b.eval_acc);
    Checkpoint ca, cb;
    snprintf(path, sizeof(path), "%s/%s.ckpt", tmpdir, got);
    if (!check(checkpoint_read(path, &ca, err, sizeof(err)) == 0, "%s: %s's checkpoint reads back", m->name, got))
        return;
    snprintf(path, sizeof(path), "%s/%s.ckpt", tmpdir, want);
    if (!check(checkpoint_read(path, &cb, err, sizeof(err)) == 0, "%s: %s's checkpoint reads back", m->name, want)) {
        checkpoint_free(&ca);
        return;
    }
    if (check(ca.meta.num_params == cb.meta.num_params && ca.meta.steps_total == cb.meta.steps_total,
              "%s: the checkpoints hold the same model after the same steps", m->name)) {
        const size_t n = ca.meta.num_params;
        int wbits, mbits;
        double dw = rel_norm_bits(ca.params, cb.params, n, &wbits), dm = rel_norm_bits(ca.mbuf, cb.mbuf, n, &mbits);
        if (bitwise) {
            check(wbits, "%s: the final weights bitwise the same (relative difference %.2e)", m->name, dw);
            check(mbits, "%s: the final momentum bitwise the same (relative difference %.2e)", m->name, dm);
        } else {
            check(dw <= tw, "%s: the final weights within %.0e in relative norm (%.2e)", m->name, tw, dw);
            check(dm <= tm, "%s: the final momentum within %.0e in relative norm (%.2e)", m->name, tm, dm);
        }
    }
    checkpoint_free(&ca);
    checkpoint_free(&cb);
}

// ----------------------------------------------------------------------------
// 6. per-GPU batches that take the large products' kernels

// The big model's shape at global batches of 2048, 3072 and 4096: on two GPUs each GPU's share of
// 1024 or 2048 rows takes the large tiles (more than 48 KB of shared memory a block) in every
// precision, and on four the shares of 512 and 1024 rows take what the planner picks for those. The
// kernels' function attributes belong to each device, so each rank must set its own: a run on several
// GPUs launches them on the others too. Each is compared with -g 1 at the same global batch, every
// step (the same tolerances as above, 10x looser for TF32 and BF16: the products' operands are
// rounded, and a K split planned for one batch may differ from the other's).
// The K-major TF32 cases (kmajor): where one GPU's plan puts a product on the K-major wgmma kernel,
// the ranks' plan must too (-P 1's text, a dW line on it), and the final weights and momentum are
// compared as well (the tolerances of TF32 above), which a stale or missing transposed copy of the
// weights (written after the sum over the ranks, read by the next step's dinp) would break. At -b
// 4096, four steps, each on the kernel on 2 and 4 GPUs (2048 and 1024 rows a GPU): each step's dinp
// reads the copy the step before wrote. At -b 3072 on 4096 images, two epochs of a full step (1536
// or 768 rows a GPU: the kernel) and a short one of 1024 rows (512 or 256 a GPU: mma.sync, after
// which the SGD kernel writes the transposed copy the next full step reads).
typedef struct { const char *flags; int tf32, steps, kmajor; } LargeCase;
static const LargeCase LARGE[] = {
    {"-x 0 -b 4096 -n 2 -t 1", 0, 2, 0}, {"-x 1 -b 2048 -n 2 -t 1", 1, 2, 0}, {"-x 1 -b 4096 -n 4 -t 1", 1, 4, 1},
    {"-x 1 -b 3072 -n 2", 1, 4, 1},      {"-x 2 -b 2048 -n 2 -t 1", 1, 2, 0}, {"-x 2 -b 4096 -n 2 -t 1", 1, 2, 0},
};
#define NUM_LARGE ((int)(sizeof(LARGE) / sizeof(LARGE[0])))
static int large_ref_rc[NUM_LARGE] = {-1, -1, -1, -1, -1, -1};  // the -g 1 runs' exits (-1: not run yet): run once
static int large_ref_kmajor[NUM_LARGE];   // and how many dW lines of their plans are on the K-major kernel

// the lines of -P's text (a trainer's output) with a weight gradient on the K-major TF32 kernel
static int kmajor_dw_lines(const char *text) {
    int n = 0;
    for (const char *p = text; *p;) {
        const size_t len = strcspn(p, "\n");
        char line[512];
        snprintf(line, sizeof(line), "%.*s", (int)(len < sizeof(line) ? len : sizeof(line) - 1), p);
        n += strstr(line, " dW ") && strstr(line, "TF32 K-major wgmma");
        p += len + (p[len] == '\n');
    }
    return n;
}

// the final weights and momentum of the checkpoints at paths got and want, within TF32's tolerances
static void compare_large_ckpt(const char *flags, int gpus, const char *got, const char *want) {
    Checkpoint ca, cb;
    char err[2048];
    if (!check(checkpoint_read(got, &ca, err, sizeof(err)) == 0, "%s: -g %d's checkpoint reads back", flags, gpus))
        return;
    if (check(checkpoint_read(want, &cb, err, sizeof(err)) == 0, "%s: -g 1's checkpoint reads back", flags)) {
        if (check(ca.meta.num_params == cb.meta.num_params && ca.meta.steps_total == cb.meta.steps_total,
                  "%s: the checkpoints hold the same model after the same steps", flags)) {
            const size_t n = ca.meta.num_params;
            const double dw = rel_norm(ca.params, cb.params, n), dm = rel_norm(ca.mbuf, cb.mbuf, n);
            check(dw <= 1e-3 && dm <= 1e-2, "%s: -g %d's final weights within 1e-3 (%.2e) and momentum within 1e-2 "
                  "(%.2e) of -g 1's, in relative norm", flags, gpus, dw, dm);
        }
        checkpoint_free(&cb);
    }
    checkpoint_free(&ca);
}

static void test_large(int gpus) {
    char name[200];
    snprintf(name, sizeof(name), "-g %d at global batches 2048, 3072 and 4096 of 784-4096-4096-10 (%d, %d and %d "
             "rows a GPU), against -g 1", gpus, 2048 / gpus, 3072 / gpus, 4096 / gpus);
    section(name);
    for (int i = 0; i < NUM_LARGE; i++) {
        const LargeCase *c = &LARGE[i];
        CsvRun r[2];
        int rc[2], ok = 1, kmajor = 0;
        char msg[512], ckpt[2][600];
        for (int g = 0; g < 2; g++) {
            char path[600], extra[700] = "";
            snprintf(path, sizeof(path), "%s/large%d_g%d.csv", tmpdir, i, g ? gpus : 1);
            snprintf(ckpt[g], sizeof(ckpt[g]), "%s/large%d_g%d.ckpt", tmpdir, i, g ? gpus : 1);
            if (c->kmajor) snprintf(extra, sizeof(extra), "-P 1 -c %s", ckpt[g]);
            if (g == 0 && large_ref_rc[i] >= 0) {
                rc[g] = large_ref_rc[i];
            } else {
                rc[g] = run(out, OUT_LEN, "-d %s -m 784,4096,4096,10 -a relu -l 0.05 -k 0.9 -v 1 -s 3 %s -g %d -o %s "
                            "%s", data784, c->flags, g ? gpus : 1, path, extra);
                if (rc[g] != 0)
                    printf("    (%s -g %d: exit %d: %s)\n", c->flags, g ? gpus : 1, rc[g], first_line(out, msg, sizeof(msg)));
                if (g == 0) large_ref_rc[i] = rc[g], large_ref_kmajor[i] = kmajor_dw_lines(out);
                else kmajor = kmajor_dw_lines(out);
            }
            ok &= rc[g] == 0 && read_csv(path, &r[g]) == 0;
        }
        if (!check(ok && r[0].n == c->steps && r[1].n == c->steps, "%s: -g 1 and -g %d both run their %d steps (exits "
                   "%d and %d)", c->flags, gpus, c->steps, rc[0], rc[1]))
            continue;
        const double tl = c->tf32 ? 1e-3 : 1e-4;
        double worst = 0;
        for (int s = 0; s < c->steps; s++) worst = fmax(worst, fabs(r[0].loss[s] - r[1].loss[s]));
        check(worst <= tl, "%s: every step's loss within %.0e (largest difference %.2e)", c->flags, tl, worst);
        if (!c->kmajor) continue;
        if (large_ref_kmajor[i] == 0)
            skip("%s: -g 1's plan puts no dW on the K-major kernel here (not an sm_90 GPU?)", c->flags);
        else
            check(kmajor > 0, "%s: -g %d's plan puts the weight gradients on the K-major kernel, as -g 1's does "
                  "(%d and %d dW lines of -P)", c->flags, gpus, kmajor, large_ref_kmajor[i]);
        compare_large_ckpt(c->flags, gpus, ckpt[1], ckpt[0]);
        unlink(ckpt[1]);   // (160 MB each)
    }
}

// ----------------------------------------------------------------------------
// 1. the command line

// returns 1 when this build has NCCL
static int test_command_line(void) {
    section("the command line: exit 2 and one line");
    char msg[512];
    int rc = run(out, OUT_LEN, "-d %s -m 64,16,4 -g %d", data4, MAX_GPUS + 1);
    check(rc == 2 && count_lines(out) == 1 && strstr(out, "-g"), "-g %d: exit %d, \"%s\"", MAX_GPUS + 1, rc,
          first_line(out, msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -m 64,16,4 -g 1 -b 64 -n 1 -t 1", data4);
    if (rc == 2 && strstr(out, "without NCCL")) {
        check(count_lines(out) == 1, "a build without NCCL: -g 1 gets exit 2 and one line naming NCCL: \"%s\"",
              first_line(out, msg, sizeof(msg)));
        return 0;
    }
    rc = run(out, OUT_LEN, "-d %s -m 64,16,4 -g 2 -b 63", data4);
    check(rc == 2 && count_lines(out) == 1 && strstr(out, "-b 63"), "-g 2 -b 63: exit %d, \"%s\"", rc,
          first_line(out, msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -m 64,16,4 --gpus 3 -b 64", data4);
    check(rc == 2 && count_lines(out) == 1 && strstr(out, "-b 64"), "--gpus 3 -b 64: exit %d, \"%s\"", rc,
          first_line(out, msg, sizeof(msg)));
    // 1001 training images at -b 1000: the epoch's last step has one row, fewer than 2 GPUs. The ranks
    // find this once they have read the data; on a machine with one GPU, -g 2's own count of the GPUs
    // refuses first, so the GPUs are hidden here (none visible: the ranks check the command line and
    // the data before they look for one)
    rc = run_launched("env CUDA_VISIBLE_DEVICES=", out, OUT_LEN, "-d %s -m 64,16,4 -g 2 -b 1000", data4);
    check(rc == 2 && count_lines(out) == 1 && strstr(out, "last step"), "-g 2 -b 1000 on 1001 images: exit %d, \"%s\"",
          rc, first_line(out, msg, sizeof(msg)));
    return 1;
}

// ----------------------------------------------------------------------------
// 5. resuming, Ctrl-C, divergence under -g

static void test_resume(int gpus) {
    section("resuming under -g: stopped after an epoch and resumed, the same checkpoint byte for byte");
    char full[600], part[600], msg[512];
    snprintf(full, sizeof(full), "%s/full%d.ckpt", tmpdir, gpus);
    snprintf(part, sizeof(part), "%s/part%d.ckpt", tmpdir, gpus);
    const char *flags = "-m 64,37,24,4 -a tanh -b 64 -l 0.05 -v 4";
    int rc1 = run(out, OUT_LEN, "-d %s %s -g %d -n 2 -c %s -o %s/full.csv", data4, flags, gpus, full, tmpdir);
    int rc2 = run(out, OUT_LEN, "-d %s %s -g %d -n 1 -c %s -o %s/p1.csv", data4, flags, gpus, part, tmpdir);
    int rc3 = run(out, OUT_LEN, "-d %s -r %s -g %d -n 2 -c %s -v 4 -o %s/p2.csv", data4, part, gpus, part, tmpdir);
    check(rc1 == 0 && rc2 == 0 && rc3 == 0 && strstr(out, "resuming") && same_file_bytes(full, part),
          "-g %d: 2 epochs, and 1 epoch then -r for the second: the same final checkpoint (exits %d %d %d)", gpus, rc1,
          rc2, rc3);

    // Ctrl-C: many epochs, interrupted once the log has some rows
    char ctrl[600], csv[600], cmd[2000];
    snprintf(ctrl, sizeof(ctrl), "%s/ctrlc%d.ckpt", tmpdir, gpus);
    snprintf(csv, sizeof(csv), "%s/ctrlc%d.csv", tmpdir, gpus);
    unlink(csv);
    snprintf(cmd, sizeof(cmd), "exec %s -d %s %s -g %d -n 1000 -v 1 -c %s -o %s", bin, data4, flags, gpus, ctrl, csv);
    char said[600];   // (the run's output, shown when the check fails)
    snprintf(said, sizeof(said), "%s/ctrlc%d.txt", tmpdir, gpus);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(said, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        dup2(fd, 2);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 3000; i++) {  // up to a minute for 40 rows
        size_t n;
        uint8_t *p = read_file(csv, &n);
        int lines = 0;
        for (size_t j = 0; j < n; j++) lines += p[j] == '\n';
        free(p);
        if (lines >= 40) break;
        usleep(20000);
    }
    kill(pid, SIGINT);
    int status = 0, waited = 0;
    for (int i = 0; i < 3000 && !waited; i++) {  // up to a minute to stop
        waited = waitpid(pid, &status, WNOHANG) == pid;
        if (!waited) usleep(20000);
    }
    if (!waited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    Checkpoint ck;
    char err[2048];
    const int readable = checkpoint_read(ctrl, &ck, err, sizeof(err)) == 0;
    if (!check(waited && code == 130 && readable, "-g %d: Ctrl-C stops the run with exit 130 (%s, exit %d) and its "
          "checkpoint reads back (%s)", gpus, waited ? "stopped" : "HUNG", code, readable ? "yes" : err)) {
        size_t n;
        uint8_t *text = read_file(said, &n);
        const size_t from = n > 600 ? n - 600 : 0;
        if (text) printf("    (its output, the end: %.*s)\n", (int)(n - from), (char *)text + from);
        free(text);
    }
    if (readable) checkpoint_free(&ck);

    int rc = run(out, OUT_LEN, "-d %s -m 64,37,24,4 -a sigmoid -b 64 -l 1000 -k 0.99 -g %d -n 3 -v 1 -o %s/div.csv",
                 data4, gpus, tmpdir);
    check(rc == 1 && strstr(out, "diverged"), "-g %d: a diverging run (-l 1000) exits 1 naming the step (exit %d%s): "
          "\"%s\"", gpus, rc, rc == 124 ? ": it hung" : "", strstr(out, "error:") ? first_line(strstr(out, "error:"), msg,
          sizeof(msg)) : "");
}

// ----------------------------------------------------------------------------
// 8. the path between machines, on one: NCCL forced onto its socket transport (2 GPUs)

// Two ranks on this machine that talk as two machines would, through TCP sockets (no NVLink, PCIe
// peer access or shared memory): NCCL_DEBUG=INFO must name the transport, and the run must match
// -g 1 step by step as the -g 2 run over NVLink does (the same tolerances).
static void test_sockets(void) {
    section("-g 2 with NCCL on sockets only (the path between machines) against -g 1, step by step");
    const Case *m = &MODELS[1];
    const char *vars[][2] = {{"NCCL_P2P_DISABLE", "1"}, {"NCCL_SHM_DISABLE", "1"}, {"NCCL_NET", "Socket"},
                             {"NCCL_DEBUG", "INFO"}};
    char *saved[4];   // (the caller's own values of these, put back after)
    for (int i = 0; i < 4; i++) {
        saved[i] = getenv(vars[i][0]) ? strdup(getenv(vars[i][0])) : NULL;
        setenv(vars[i][0], vars[i][1], 1);   // (the ranks inherit them through -g's spawner)
    }
    int rc = train(m, 2, "sockets");
    for (int i = 0; i < 4; i++) {
        if (saved[i]) setenv(vars[i][0], saved[i], 1);
        else unsetenv(vars[i][0]);
        free(saved[i]);
    }
    check(rc == 0 && strstr(out, "via NET/Socket"), "%s: exit %d, and NCCL_DEBUG=INFO says \"via NET/Socket\"%s",
          m->name, rc, strstr(out, "via NET/Socket") ? "" : " (it does not)");
    if (rc == 0) compare_runs(m, "sockets", "g1_1", 0);
}

// ----------------------------------------------------------------------------
// 4 to 7 on n GPUs

static void test_ranks(int n, int gpus) {
    char name[200];
    snprintf(name, sizeof(name), "-g %d against -g 1 at the same global batch, step by step (tolerances: the top of "
             "the file)", n);
    section(name);
    if (gpus < n) {
        skip("%d GPU%s here: the -g %d part needs %d (a machine with %d, e.g. nvidia-h200-x%d)", gpus,
             gpus == 1 ? "" : "s", n, n, n, n);
        return;
    }
    const double t0 = now_seconds();
    int rc_g[NUM_MODELS];
    for (int i = 0; i < NUM_MODELS; i++) {
        const Case *m = &MODELS[i];
        char one[32], many[32];
        snprintf(one, sizeof(one), "g1_%d", i);  // (the -g 1 runs of above)
        snprintf(many, sizeof(many), "g%d_%d", n, i);
        rc_g[i] = train(m, n, many);
        if (check(rc_g[i] == 0, "%s: the -g %d run (exit %d)", m->name, n, rc_g[i])) compare_runs(m, many, one, 0);
    }
    if (n == 2) test_sockets();
    test_resume(n);
    test_large(n);

    // The same ranks started by torchrun instead of -g's spawner: the same processes on the same
    // GPUs with the same rows, so every step and the final weights come out bit for bit the same.
    snprintf(name, sizeof(name), "torchrun --no-python --nproc-per-node %d against -g %d: bitwise the same", n, n);
    section(name);
    const char *tr = torchrun_command();
    for (int i = 0; i < NUM_MODELS; i++) {
        const Case *m = &MODELS[i];
        if (!tr) {
            skip("%s: torchrun is not installed here (nor python3 -m torch.distributed.run)", m->name);
            continue;
        }
        // (torchrun's agent listens on --master-port; the ranks meet on the port above it, the default)
        const int port = job_free_port();
        char launcher[300], many[32], launched[32];
        snprintf(launcher, sizeof(launcher), "%s --no-python --nproc-per-node %d --master-addr 127.0.0.1 --master-port %d",
                 tr, n, port > 0 ? port : 29500);
        snprintf(many, sizeof(many), "g%d_%d", n, i);
        snprintf(launched, sizeof(launched), "torchrun%d_%d", n, i);
        int rc = train(m, n, launched, launcher);
        if (check(rc == 0 && rc_g[i] == 0, "%s: %s and -g %d both run (exits %d and %d)", m->name, tr, n, rc, rc_g[i]))
            compare_runs(m, launched, many, 1);
    }
    printf("  (the -g %d part took %.0f s)\n", n, now_seconds() - t0);
}

// ----------------------------------------------------------------------------

int main(int argc, char **argv) {
    if (argc > 1) bin = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/mlp_test_multi_gpu_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "error: cannot make a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    // the plain runs' plans from the cost model alone, as every rank's under -g (no plan cache of the
    // user's: an empty folder of the test's own)
    char cache[600];
    snprintf(cache, sizeof(cache), "%s/plan_cache", tmpdir);
    setenv("MLP_PLAN_CACHE", cache, 1);
    snprintf(data4, sizeof(data4), "%s/data4", tmpdir);
    snprintf(data40, sizeof(data40), "%s/data40", tmpdir);
    make_class_data(data4, 4, 1001, 300);
    make_class_data(data40, 40, 1001, 300);
    snprintf(data784, sizeof(data784), "%s/data784", tmpdir);
    make_class_data(data784, 10, 4096, 100, 28);
    struct stat st;
    if (stat(bin, &st) != 0) {
        section("train_mlp_fast -g");
        skip("%s is not built here (make train_fast)", bin);
        return test_exit();
    }

    const int nccl = test_command_line();
    int gpus = 0;
    if (cudaGetDeviceCount(&gpus) != cudaSuccess) gpus = 0;
    section("-g 1 against the plain path: bitwise the same");
    if (!nccl) skip("this %s was built without NCCL: the -g runs are skipped", bin);
    else if (gpus < 1) skip("no CUDA GPU here: the -g runs are skipped");
    if (!nccl || gpus < 1) {
        section("-g N against -g 1");
        skip("%s", !nccl ? "no NCCL in this build" : "no CUDA GPU here");
        return test_exit();
    }
    for (int i = 0; i < NUM_MODELS; i++) {
        const Case *m = &MODELS[i];
        char plain[32], one[32];
        snprintf(plain, sizeof(plain), "plain%d", i);
        snprintf(one, sizeof(one), "g1_%d", i);
        int rc1 = train(m, 0, plain), rc2 = train(m, 1, one);
        if (check(rc1 == 0 && rc2 == 0, "%s: the plain run and the -g 1 run (exits %d and %d)", m->name, rc1, rc2))
            compare_runs(m, one, plain, 1);
    }

    section("more GPUs than there are");
    char msg[512];
    int rc = run(out, OUT_LEN, "-d %s -m 64,16,4 -b %d -g %d -n 1", data4, 64 * (gpus + 1), gpus + 1);
    check(rc == 2 && count_lines(out) == 1 && strstr(out, "visible"), "-g %d with %d GPU%s: exit %d, \"%s\"", gpus + 1,
          gpus, gpus == 1 ? "" : "s", rc, first_line(out, msg, sizeof(msg)));

    test_resume(1);

    for (int n = 2; n <= 4; n *= 2) test_ranks(n, gpus);
    for (int i = 0; i < NUM_LARGE; i++) {   // (the -g 1 references' checkpoints, 160 MB each)
        char path[600];
        snprintf(path, sizeof(path), "%s/large%d_g1.ckpt", tmpdir, i);
        unlink(path);
    }
    return test_exit();
}
