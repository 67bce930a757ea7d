/*
Properties of everything around the math (issue 20): each check states what must hold and
computes it independently, so that it fails on a bug rather than on a changed number. None
compares with a number copied from a run. dev/mutate/ names the mutations each one kills.
  1. the training loop, from the outside: the CPU trainer (argv[1]) runs on a tiny IDX dataset
     written here, and its CSV log is read back: the steps of every epoch (the last one short),
     the global step, and each logged loss recomputed from the same initial weights and the same
     permutations (rng_seed(seed, 1), one rng_permutation per epoch), with the batches gathered
     here; each evaluation (test set, -H's validation set, the summary) recomputed image by
     image; -v 3 (the mean over the steps since the last line), -H and -t too; the last row is
     the stop row, at the run's last step;
  2. evaluate_cpu against a loop of single-image forward passes: a last partial batch, the
     loss weighted by each batch's size, ties of the argmax (the first class wins);
  3. the initial weights: every layer (weights and biases) inside +-1/sqrt(IN), reaching its
     bound, mean 0 and variance bound^2/3 within 5 standard errors, no two layers (or a layer's
     weights and its biases) drawing the same numbers, the seed changing them; the generator is
     Philox4x32-10 (its published known-answer vectors);
  4. the shuffle: every order of 3 and 4 items equally likely (chi-square), each item's position
     uniform for 10, from one generator and across seeds; seeds and streams give different
     generators; rng_below uniform and in range; -H holds out a uniformly random subset; the
     generators are xoshiro256** and SplitMix64 (their reference implementations' outputs);
  5. the loss at logits of +-1000 (finite, exact), and argmax ties;
  6. the pixels: 0 -> 0, 255 -> exactly 1.0f, p -> p/255; each row is the permutation's item; a raw
     IDX file's size checked against its header before it is read;
  7. the epoch's plan: ceil(n/B) steps, the last one n - (steps-1)B rows, and -t.
Statistical checks name their false-alarm probability; each is at most 1e-6.
Usage: tests/bin/test_properties [path/to/train_mlp_cpu [path/to/train_mlp ...]]
   (default ./train_mlp_cpu). Further trainers (train_mlp, train_mlp_fast) get the checks of 1 with
   a GPU's float32 tolerance, and are skipped where they find no GPU.
*/
#define TESTING
#include "../train_mlp_cpu.c"
#include "check.h"
#include "idx_write.h"  // write_idx, write_idx_split

#include <sys/wait.h>

static char tmpdir[256];

// ----------------------------------------------------------------------------
// a tiny dataset, written here as IDX files: pixels that depend on the label (so a model learns),
// with 0 and 255 among them

#define PD 12      // pixels per image (3 x 4)
#define PC 3       // classes
#define NTRAIN 23  // 4 full batches of 5 and one of 3
#define NTEST 11   // 2 full evaluation batches of 5 and one of 1

typedef struct {
    uint8_t images[NTRAIN * PD], labels[NTRAIN];
    uint8_t test_images[NTEST * PD], test_labels[NTEST];
} TinyData;

static void make_tiny(TinyData *t, const char *dir) {
    mkdir(dir, 0777);
    Rng rng;
    rng_seed(&rng, 2020, 7);
    for (int split = 0; split < 2; split++) {
        int n = split ? NTEST : NTRAIN;
        uint8_t *img = split ? t->test_images : t->images, *lab = split ? t->test_labels : t->labels;
        for (int i = 0; i < n; i++) {
            lab[i] = (uint8_t)(i % PC);  // every class in both splits
            for (int p = 0; p < PD; p++) {
                int v = (int)rng_below(&rng, 200) + (p % PC == lab[i] ? 120 : 0);
                img[i * PD + p] = (uint8_t)(v > 255 ? 255 : v);
            }
            img[i * PD + (i % PD)] = (i % 2) ? 255 : 0;  // the two ends of the scale
        }
        write_idx_split(dir, split, img, lab, n, 3, 4);
    }
}

// a Dataset over a copy of the given bytes (split_holdout moves items within it)
static Dataset dataset_of(const uint8_t *images, const uint8_t *labels, int n) {
    Dataset ds;
    memset(&ds, 0, sizeof(ds));
    ds.images = (uint8_t *)mallocCheck((size_t)n * PD);
    ds.labels = (uint8_t *)mallocCheck((size_t)n);
    memcpy(ds.images, images, (size_t)n * PD);
    memcpy(ds.labels, labels, (size_t)n);
    ds.n = n;
    ds.rows = 3;
    ds.cols = 4;
    ds.channels = 1;
    ds.num_classes = PC;
    return ds;
}

// ----------------------------------------------------------------------------
// independent computations: a batch, an image-by-image evaluation

// rows perm[start .. start + bs - 1] of ds into m's input, pixel / 255 (written out here, not
// gather_batch_cpu)
static void batch_by_hand(ModelCPU *m, const Dataset *ds, const int *perm, int start, int bs) {
    int D = m->sizes[0];
    for (int b = 0; b < bs; b++) {
        int item = perm[start + b];
        for (int i = 0; i < D; i++) m->acts[0][(size_t)b * D + i] = ds->images[(size_t)item * D + i] / 255.0f;
        m->labels[b] = ds->labels[item];
    }
}

// the mean loss and the accuracy over ds, one image at a time: the forward pass on one row, the
// loss as a log-sum-exp in double, the prediction the first of the largest logits. near: how many
// images have their two largest logits within `gap` of each other (a GPU may order those otherwise)
typedef struct {
    double loss, acc;
    long right;
    int near;
} Eval;

static Eval eval_by_image(ModelCPU *m, const Dataset *ds, double gap) {
    int D = m->sizes[0], C = m->sizes[m->L];
    Eval e = {0, 0, 0, 0};
    double total = 0;
    for (int i = 0; i < ds->n; i++) {
        for (int k = 0; k < D; k++) m->acts[0][k] = ds->images[(size_t)i * D + k] / 255.0f;
        model_forward_cpu(m, 1);
        const real *z = m->acts[m->L];
        int best = 0;
        double mx = z[0];
        for (int c = 1; c < C; c++)
            if (z[c] > mx) mx = z[c], best = c;
        double second = -INFINITY, s = 0;
        for (int c = 0; c < C; c++) {
            s += exp(z[c] - mx);
            if (c != best && z[c] > second) second = z[c];
        }
        total += log(s) + mx - z[ds->labels[i]];
        e.right += best == ds->labels[i];
        e.near += C > 1 && mx - second <= gap;
    }
    e.loss = total / ds->n;
    e.acc = (double)e.right / ds->n;
    return e;
}

// ----------------------------------------------------------------------------
// 1. the training loop, from the outside

typedef struct {
    char kind[16];
    int epoch;
    long step, global_step;
    double loss, acc;  // NAN where the field is empty
} CsvRow;

#define MAX_ROWS 512

static double csv_field(const char *s) {
    if (*s == '\0' || *s == ',' || *s == '\n') return NAN;
    return strtod(s, NULL);
}

// the rows of a CSV log after its two header lines; -1 when it cannot be read or is malformed
static int read_csv(const char *path, CsvRow *rows, int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[1024];
    int n = 0, lineno = 0, bad = 0;
    while (fgets(line, sizeof(line), f)) {
        lineno++;
        if (lineno == 1) {
            bad |= line[0] != '#';
            continue;
        }
        if (lineno == 2) {
            bad |= strncmp(line, "kind,epoch,step,global_step,loss,accuracy,", 42) != 0;
            continue;
        }
        if (n == max) break;
        CsvRow *r = &rows[n++];
        char *fields[9];
        int k = 0;
        for (char *p = line; k < 9; k++) {
            fields[k] = p;
            p = strchr(p, ',');
            if (!p) {
                k++;
                break;
            }
            *p++ = '\0';
        }
        if (k < 6) {
            bad = 1;
            break;
        }
        snprintf(r->kind, sizeof(r->kind), "%s", fields[0]);
        r->epoch = atoi(fields[1]);
        r->step = atol(fields[2]);
        r->global_step = atol(fields[3]);
        r->loss = csv_field(fields[4]);
        r->acc = csv_field(fields[5]);
    }
    fclose(f);
    return bad ? -1 : n;
}

// Runs `bin args`, its output into out.txt; returns the exit status (128 + n for a signal), and the
// first line of the output that starts with "error:" in err.
static int run_trainer(const char *bin, const char *args, char *err, size_t errlen) {
    char cmd[3000], path[600];
    snprintf(path, sizeof(path), "%s/out.txt", tmpdir);
    snprintf(cmd, sizeof(cmd), "%s %s >%s 2>&1", bin, args, path);
    int status = system(cmd);
    err[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f) {
        char line[1024];
        while (fgets(line, sizeof(line), f))
            if (strncmp(line, "error:", 6) == 0) {
                line[strcspn(line, "\n")] = '\0';
                snprintf(err, errlen, "%s", line);
                break;
            }
        fclose(f);
    }
    if (status == -1) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// One run's settings, as flags and as the replay's numbers
typedef struct {
    const char *name;
    int act, B, epochs, log_every, max_steps;
    float lr, mu, wd, holdout;
    uint64_t seed;
} RunSpec;

static const int TINY_SIZES[] = {PD, 6, PC};

// The run of spec replayed here: its steps' losses (epoch-major), each evaluation after an epoch
// (the validation set with -H, else the test set) and the final one on the test set.
typedef struct {
    int steps, last_bs;         // per epoch, worked out here
    double loss[64];            // [epoch * steps + step]
    int bs[64];
    Eval after_epoch[8], final; // final: the test set after the last epoch
    int val_n;
} Replay;

static void replay(const RunSpec *s, const TinyData *t, Replay *r) {
    memset(r, 0, sizeof(*r));
    Dataset train = dataset_of(t->images, t->labels, NTRAIN), val;
    Dataset test = dataset_of(t->test_images, t->test_labels, NTEST);
    split_holdout(&train, &val, s->holdout, s->seed);  // (its own properties: test_holdout_uniform)
    r->val_n = val.n;
    int n = train.n, B = s->B;
    r->steps = (n + B - 1) / B;
    if (s->max_steps && s->max_steps < r->steps) r->steps = s->max_steps;
    if (s->epochs > 8 || s->epochs * r->steps > 64) die("fewer epochs or steps in test_loop", "a replay holds 64 steps");
    ModelCPU m;
    model_build_cpu(&m, TINY_SIZES, 2, s->act, B);
    model_init_params_cpu(&m, s->seed);
    Rng rng;
    rng_seed(&rng, s->seed, 1);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)n);
    for (int e = 0; e < s->epochs; e++) {
        rng_permutation(&rng, perm, n);
        for (int k = 0; k < r->steps; k++) {
            int bs = n - k * B < B ? n - k * B : B;
            batch_by_hand(&m, &train, perm, k * B, bs);
            model_forward_cpu(&m, bs);
            r->loss[e * r->steps + k] = model_loss_cpu(&m, bs);
            r->bs[e * r->steps + k] = bs;
            model_backward_cpu(&m, bs);
            model_update_cpu(&m, s->lr, s->mu, s->wd);
        }
        r->last_bs = r->bs[e * r->steps + r->steps - 1];
        r->after_epoch[e] = eval_by_image(&m, s->holdout > 0 ? &val : &test, 1e-4);
    }
    r->final = eval_by_image(&m, &test, 1e-4);
    free(perm);
    model_free_cpu(&m);
    dataset_free(&train);
    dataset_free(&val);
    dataset_free(&test);
}

// an evaluation row against the image-by-image one: the loss within tol, the number right the same
// (or, for a GPU, off by at most the images whose top two logits nearly tie)
static int eval_matches(const CsvRow *row, const Eval *e, int n, double tol, int gpu) {
    long right = lround(row->acc * n);
    long allowed = gpu ? e->near : 0;
    return isfinite(row->loss) && fabs(row->loss - e->loss) <= tol * (1 + fabs(e->loss)) &&
           fabs(row->acc * n - right) < 1e-3 && labs(right - e->right) <= allowed;
}

// The trainer bin on the tiny dataset with spec's flags; every row of its log against the replay.
// tol: how far a logged loss may be from the replay's (the CSV prints 6 decimals).
static void check_run(const char *bin, const char *dir, const TinyData *t, const RunSpec *s, int gpu) {
    char log[600], args[2000], err[1024];
    snprintf(log, sizeof(log), "%s/%s.csv", tmpdir, s->name);
    snprintf(args, sizeof(args), "-d %s -m %d,%d,%d -a %s -b %d -l %g -k %g -w %g -n %d -s %llu -v %d -t %d -H %g -o %s",
             dir, TINY_SIZES[0], TINY_SIZES[1], TINY_SIZES[2], ACT_NAMES[s->act], s->B, s->lr, s->mu, s->wd, s->epochs,
             (unsigned long long)s->seed, s->log_every, s->max_steps, s->holdout, log);
    const char *prog = strrchr(bin, '/') ? strrchr(bin, '/') + 1 : bin;
    int rc = run_trainer(bin, args, err, sizeof(err));
    if (gpu && rc == 1 && strstr(err, "no usable CUDA GPU")) {
        skip("%s %s: no GPU here", prog, s->name);
        return;
    }
    if (!check(rc == 0, "%s %s: %s runs (exit %d%s%s)", prog, s->name, args, rc, err[0] ? ": " : "", err)) return;
    static CsvRow rows[MAX_ROWS];
    int nrows = read_csv(log, rows, MAX_ROWS);
    if (!check(nrows > 0, "%s %s: its CSV log %s reads back (%d rows)", prog, s->name, log, nrows)) return;
    Replay r;
    replay(s, t, &r);
    const double tol = gpu ? 1e-4 : 1e-5;  // CPU: the same code and flags, 6 printed decimals; GPU: float32 drift

    // the train rows: the steps each epoch logs, and the mean loss of the steps since the last line
    int want_rows = 0, got_rows = 0, bad_steps = 0, bad_loss = 0;
    double worst = 0;
    char first_bad[256] = "";
    for (int e = 1; e <= s->epochs; e++)
        for (int k = 1; k <= r.steps; k++) want_rows += k % s->log_every == 0 || k == r.steps;
    int e_prev = 0, last_logged = 0;
    for (int i = 0; i < nrows; i++) {
        const CsvRow *row = &rows[i];
        if (strcmp(row->kind, "train") != 0) continue;
        got_rows++;
        if (row->epoch != e_prev) last_logged = 0, e_prev = row->epoch;
        int k = (int)row->step;
        int expected = row->epoch >= 1 && row->epoch <= s->epochs && k > last_logged && k <= r.steps &&
                       (k % s->log_every == 0 || k == r.steps) &&
                       row->global_step == (long)(row->epoch - 1) * r.steps + k;
        if (!expected) {
            if (!bad_steps++)
                snprintf(first_bad, sizeof(first_bad), "epoch %d step %ld global step %ld", row->epoch, row->step,
                         row->global_step);
            continue;
        }
        double mean = 0;
        for (int j = last_logged; j < k; j++) mean += r.loss[(row->epoch - 1) * r.steps + j];
        mean /= k - last_logged;
        double d = fabs(row->loss - mean);
        if (!(d <= tol * (1 + fabs(mean)))) bad_loss++;
        if (!(d <= worst)) worst = d;
        last_logged = k;
    }
    check(bad_steps == 0 && got_rows == want_rows,
          "%s %s: %d train rows (want %d: every %d steps and each epoch's last, %d steps of %d, the last %d rows, "
          "global steps counting on)%s%s",
          prog, s->name, got_rows, want_rows, s->log_every, r.steps, s->B, r.last_bs, bad_steps ? "; unexpected: " : "",
          first_bad);
    check(bad_loss == 0 && got_rows > 0,
          "%s %s: every logged loss is the mean of its steps' losses recomputed here (%d differ; worst %.2e, "
          "tolerance %.0e)",
          prog, s->name, bad_loss, worst, tol);

    // the evaluation after each epoch: the test set, or the validation set with -H
    const char *ekind = s->holdout > 0 ? "val" : "eval";
    int evals = 0, eval_bad = 0, summaries = 0;
    char detail[256] = "";
    for (int i = 0; i < nrows; i++) {
        const CsvRow *row = &rows[i];
        if (strcmp(row->kind, "summary") == 0) {
            summaries++;
            int ok = eval_matches(row, &r.final, NTEST, tol, gpu);
            check(ok, "%s %s: the summary is the test set's loss and accuracy: %.6f, %.4f (recomputed image by image: "
                      "%.6f, %.4f)",
                  prog, s->name, row->loss, row->acc, r.final.loss, r.final.acc);
        }
        if (strcmp(row->kind, ekind) != 0 && strcmp(row->kind, s->holdout > 0 ? "eval" : "val") != 0) continue;
        evals++;
        int e = row->epoch - 1;
        int ok = strcmp(row->kind, ekind) == 0 && e >= 0 && e < s->epochs &&
                 eval_matches(row, &r.after_epoch[e], s->holdout > 0 ? r.val_n : NTEST, tol, gpu);
        if (!ok && !eval_bad++)
            snprintf(detail, sizeof(detail), "; epoch %d: %s %.6f, %.4f against %.6f, %.4f", row->epoch, row->kind,
                     row->loss, row->acc, e >= 0 && e < 8 ? r.after_epoch[e].loss : NAN,
                     e >= 0 && e < 8 ? r.after_epoch[e].acc : NAN);
    }
    check(evals == s->epochs && eval_bad == 0,
          "%s %s: after each epoch a '%s' row with the %s set's loss and accuracy, recomputed image by image "
          "(%d rows, %d differ%s)",
          prog, s->name, ekind, s->holdout > 0 ? "validation" : "test", evals, eval_bad, detail);
    check(summaries == 1, "%s %s: one summary row (%d)", prog, s->name, summaries);
    const CsvRow *last = &rows[nrows - 1];
    check(strcmp(last->kind, "stop") == 0 && last->global_step == (long)s->epochs * r.steps,
          "%s %s: the last row is the stop row, at the run's last step (%s at step %ld)", prog, s->name, last->kind,
          last->global_step);
}

static void test_loop(const char *bins[], int nbins) {
    section("the training loop, from the outside: the trainer's CSV log against a replay");
    char dir[400];
    snprintf(dir, sizeof(dir), "%s/tiny", tmpdir);
    static TinyData t;
    make_tiny(&t, dir);
    const RunSpec specs[] = {
        // every step logged: each row is one step's loss
        {"v1", ACT_TANH, 5, 2, 1, 0, 0.2f, 0.9f, 0.01f, 0, 4242},
        // every 3 steps: the mean over the steps since the last line; another seed, another activation
        {"v3", ACT_SIGMOID, 5, 3, 3, 0, 0.5f, 0.5f, 0, 0, 77},
        // -H: the validation set after each epoch, the test set at the end
        {"H", ACT_RELU, 5, 2, 1, 0, 0.1f, 0.9f, 0, 0.25f, 9},
        // -t: at most 3 full steps an epoch
        {"t3", ACT_TANH, 4, 2, 1, 3, 0.1f, 0.9f, 0, 0, 5},
    };
    for (int b = 0; b < nbins; b++)
        for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) check_run(bins[b], dir, &t, &specs[i], b > 0);
}

// ----------------------------------------------------------------------------
// 2. evaluate_cpu against a loop of single-image forward passes

static void test_evaluate(void) {
    section("evaluate_cpu against an image-by-image evaluation");
    const int sizes[] = {PD, 7, 4}, n = 29, max_batch = 8;  // batches of 8, 8, 8 and 5
    uint8_t images[29 * PD], labels[29];
    Rng rng;
    rng_seed(&rng, 31, 3);
    for (int i = 0; i < n; i++) {
        labels[i] = (uint8_t)(i < 7 ? 0 : i < 18 ? 3 : 1 + i % 2);  // 7 of class 0, 11 of class 3
        for (int p = 0; p < PD; p++) images[i * PD + p] = (uint8_t)rng_below(&rng, 256);
    }
    Dataset ds = dataset_of(images, labels, n);
    ds.num_classes = 4;
    for (int act = 0; act < 3; act++) {
        ModelCPU m;
        model_build_cpu(&m, sizes, 2, act, max_batch);
        model_init_params_cpu(&m, 100 + act);
        for (size_t i = 0; i < m.num_params; i++) m.params[i] *= 8;  // confident, varied predictions
        double loss, acc;
        evaluate_cpu(&m, &ds, &loss, &acc);
        Eval e = eval_by_image(&m, &ds, 0);
        check(fabs(loss - e.loss) <= 1e-6 * e.loss && lround(acc * n) == e.right && fabs(acc * n - e.right) < 1e-9,
              "%s model, %d images in batches of %d (the last of %d): loss %.7f, %ld right (image by image: %.7f, "
              "%ld right)",
              ACT_NAMES[act], n, max_batch, n % max_batch, loss, lround(acc * n), e.loss, e.right);
        model_free_cpu(&m);
    }
    // every logit 0: every prediction is the first class (class 0), as the GPU's eval kernel decides ties
    ModelCPU z;
    model_build_cpu(&z, sizes, 2, ACT_SIGMOID, max_batch);
    double loss, acc;
    evaluate_cpu(&z, &ds, &loss, &acc);
    check(lround(acc * n) == 7 && fabs(loss - log(4.0)) < 1e-6,
          "all logits tied: %ld of %d right (want 7: the first class wins every tie, and 7 images are class 0), loss "
          "%.6f (ln 4 = %.6f)",
          lround(acc * n), n, loss, log(4.0));
    model_free_cpu(&z);
    dataset_free(&ds);
    const real z4[] = {1, 3, 3, 0}, flat[] = {2, 2, 2, 2, 2}, last[] = {-1, -1, 5};
    check(argmax_cpu(z4, 4) == 1 && argmax_cpu(flat, 5) == 0 && argmax_cpu(last, 3) == 2,
          "argmax_cpu: the first of the largest (%d of {1,3,3,0}, %d of five 2s, %d of {-1,-1,5})", argmax_cpu(z4, 4),
          argmax_cpu(flat, 5), argmax_cpu(last, 3));
}

// ----------------------------------------------------------------------------
// 3. the initial weights

// Philox4x32-10 on a whole counter, rounds written out here with philox_round (for the known answers)
static void philox4x32_10(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
    uint32_t key[2] = {k0, k1};
    for (int round = 0; round < 10; round++) {
        philox_round(ctr, key);
        key[0] += 0x9E3779B9u;  // Weyl constants of the key schedule (Salmon et al. 2011)
        key[1] += 0xBB67AE85u;
    }
}

static void test_init(void) {
    section("the initial weights: range, mean, variance, independence across layers");
    // the known-answer vectors Random123 publishes for Philox4x32-10 (kat_vectors)
    uint32_t a[4] = {0, 0, 0, 0}, b[4] = {~0u, ~0u, ~0u, ~0u}, c[4] = {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344};
    philox4x32_10(a, 0, 0);
    philox4x32_10(b, ~0u, ~0u);
    philox4x32_10(c, 0xa4093822, 0x299f31d0);
    check(a[0] == 0x6627e8d5 && a[1] == 0xe169c58d && a[2] == 0xbc57ac4c && a[3] == 0x9b00dbd8 && b[0] == 0x408f276d &&
              b[3] == 0x6d5451fd && c[0] == 0xd16cfe09 && c[1] == 0x94fdcceb && c[2] == 0x5001e420 &&
              c[3] == 0x24126ea1,
          "philox_round is Philox4x32-10: Random123's three known-answer vectors");
    // cuRAND's curand_init(seed, subsequence, 0): counter (0, 0, subsequence low, high), key (seed low, high)
    const uint64_t seed = 0x0123456789ABCDEFull, sub = 0x0000000500000007ull;
    uint32_t d[4] = {0, 0, (uint32_t)sub, (uint32_t)(sub >> 32)};
    philox4x32_10(d, (uint32_t)seed, (uint32_t)(seed >> 32));
    check(philox_u32(0, 0) == 0x6627e8d5 && philox_u32(seed, sub) == d[0],
          "philox_u32(seed, subsequence) is the first word of Philox4x32-10 at counter (0, 0, subsequence), key seed: "
          "%08x at (0, 0), %08x at a 64-bit seed and subsequence (want %08x)",
          philox_u32(0, 0), philox_u32(seed, sub), d[0]);
    check(uniform_weight(0, 0.5f) == -0.5f && uniform_weight(0x80000000u, 0.5f) == 0.0f &&
              uniform_weight(0xFFFFFFFFu, 0.5f) < 0.5f && uniform_weight(0xFFFFFFFFu, 0.5f) > 0.4999f,
          "uniform_weight maps 32 bits onto [-bound, bound): 0 -> -bound, 2^31 -> 0, 2^32 - 1 -> just under bound");

    const int sizes[] = {300, 200, 100, 10}, L = 3;
    ModelCPU m, m2;
    model_build_cpu(&m, sizes, L, ACT_SIGMOID, 1);
    model_build_cpu(&m2, sizes, L, ACT_SIGMOID, 1);
    model_init_params_cpu(&m, 1337);
    model_init_params_cpu(&m2, 1338);
    // each tensor: the values over the bound, u = w / bound, must look like n draws of U(-1, 1)
    const real *tens[2 * MAX_LAYERS];
    size_t count[2 * MAX_LAYERS];
    for (int l = 0; l < L; l++) {
        float bound = 1.0f / sqrtf((float)sizes[l]);
        for (int isb = 0; isb < 2; isb++) {
            size_t n = isb ? (size_t)sizes[l + 1] : (size_t)sizes[l + 1] * sizes[l];
            const real *w = m.params + (isb ? m.b_off[l] : m.w_off[l]);
            tens[2 * l + isb] = w;
            count[2 * l + isb] = n;
            double mx = 0, sum = 0, sum2 = 0;
            int inside = 1;
            for (size_t i = 0; i < n; i++) {
                inside &= fabsf(w[i]) <= bound;
                mx = fmax(mx, fabs(w[i] / bound));
                sum += w[i] / bound;
                sum2 += (double)(w[i] / bound) * (w[i] / bound);
            }
            double mean = sum / n, m2v = sum2 / n;
            // max of n draws of |U(-1,1)| falls below 1 - x with probability (1 - x)^n: x chosen for < 1e-10
            double x = fmin(0.9, 25.0 / n);
            double se_mean = sqrt(1.0 / 3 / n), se_m2 = sqrt(4.0 / 45 / n);  // U(-1,1): var 1/3, var(u^2) 4/45
            check(inside && mx >= 1 - x && fabs(mean) <= 5 * se_mean && fabs(m2v - 1.0 / 3) <= 5 * se_m2,
                  "layer %d %s (%zu values): inside +-1/sqrt(%d), the largest |w| %.4f of the bound (>= %.4f), mean "
                  "%+.4f (|.| <= %.4f), mean square %.4f (1/3 +- %.4f)",
                  l, isb ? "biases " : "weights", n, sizes[l], mx, 1 - x, mean, 5 * se_mean, m2v, 5 * se_m2);
        }
    }
    // no two tensors draw the same numbers: the first values over their bounds differ, and their
    // correlation over the first k is within 5/sqrt(k) of 0 (false alarm < 1e-6 each)
    int shared = 0, correlated = 0;
    double worst_r = 0;
    for (int i = 0; i < 2 * L; i++)
        for (int j = i + 1; j < 2 * L; j++) {
            size_t k = count[i] < count[j] ? count[i] : count[j];
            float bi = 1.0f / sqrtf((float)sizes[i / 2]), bj = 1.0f / sqrtf((float)sizes[j / 2]);
            int same = 0;
            double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
            for (size_t t = 0; t < k; t++) {
                double u = tens[i][t] / bi, v = tens[j][t] / bj;
                same += t < 8 && fabs(u - v) < 1e-6;
                sx += u, sy += v, sxx += u * u, syy += v * v, sxy += u * v;
            }
            shared += same >= 4;
            if (k >= 100) {
                double r = (sxy - sx * sy / k) / sqrt((sxx - sx * sx / k) * (syy - sy * sy / k));
                worst_r = fmax(worst_r, fabs(r));
                correlated += fabs(r) > 5 / sqrt((double)k);
            }
        }
    check(shared == 0 && correlated == 0,
          "no two layers (nor a layer's weights and biases) draw the same numbers: %d pairs share their first values, "
          "%d correlate (largest |r| %.3f)",
          shared, correlated, worst_r);
    size_t equal = 0;
    for (size_t i = 0; i < m.num_params; i++) equal += m.params[i] == m2.params[i];
    check(equal < m.num_params / 1000, "the seed chooses the weights: seeds 1337 and 1338 share %zu of %zu values",
          equal, m.num_params);
    model_free_cpu(&m);
    model_free_cpu(&m2);
}

// ----------------------------------------------------------------------------
// 4. the shuffle

// chi-square critical values at a false-alarm probability of 1e-6 (and 1e-7), by degrees of freedom:
// the upper quantiles of the chi-square distribution (scipy.stats.chi2.isf(1e-6, dof))
static double chi2_crit_1e6(int dof) {
    switch (dof) {
    case 2: return 27.63;
    case 5: return 35.89;
    case 9: return 44.81;
    case 19: return 63.68;
    case 23: return 70.55;
    default: return NAN;
    }
}
static const double CHI2_CRIT_9DOF_1E7 = 50.17;

static double chi2(const long *counts, int k, double expected) {
    double x = 0;
    for (int i = 0; i < k; i++) x += (counts[i] - expected) * (counts[i] - expected) / expected;
    return x;
}

// the index of a permutation of n <= 4 items among the n! orders (its Lehmer code)
static int perm_index(const int *p, int n) {
    int idx = 0;
    for (int i = 0; i < n; i++) {
        int smaller = 0;
        for (int j = i + 1; j < n; j++) smaller += p[j] < p[i];
        idx = idx * (n - i) + smaller;
    }
    return idx;
}

static void test_shuffle(void) {
    section("the shuffle: every order equally likely; seeds and streams");
    for (int n = 3; n <= 4; n++) {
        int orders = n == 3 ? 6 : 24, per = 1000;
        long draws = (long)orders * per;
        for (int across = 0; across < 2; across++) {  // one generator's draws, or the first draw of many seeds
            long counts[24] = {0};
            int perm[4], valid = 1;
            Rng r;
            rng_seed(&r, 1, 1);
            for (long d = 0; d < draws; d++) {
                if (across) rng_seed(&r, (uint64_t)d, 1);
                rng_permutation(&r, perm, n);
                int seen = 0;
                for (int i = 0; i < n; i++) seen |= (perm[i] >= 0 && perm[i] < n) ? 1 << perm[i] : 1 << 8;
                if (seen != (1 << n) - 1) valid = 0;
                else counts[perm_index(perm, n)]++;
            }
            int missing = 0;
            for (int i = 0; i < orders; i++) missing += counts[i] == 0;
            double x = chi2(counts, orders, per), crit = chi2_crit_1e6(orders - 1);
            check(valid && x <= crit,
                  "%s: the %d orders of %d items, %ld draws: chi-square %.1f (<= %.2f, %d dof, false alarm 1e-6), %d "
                  "orders never drawn%s",
                  across ? "the first permutation of each of many seeds" : "one generator's permutations", orders, n,
                  draws, x, crit, orders - 1, missing, valid ? "" : ", and some draws were not permutations");
        }
    }
    {  // each item's position, 10 items
        enum { N = 10, DRAWS = 20000 };
        long pos[N][N];
        memset(pos, 0, sizeof(pos));
        int perm[N];
        Rng r;
        rng_seed(&r, 8, 1);
        for (int d = 0; d < DRAWS; d++) {
            rng_permutation(&r, perm, N);
            for (int i = 0; i < N; i++)
                if (perm[i] >= 0 && perm[i] < N) pos[perm[i]][i]++;
        }
        double worst = 0;
        for (int item = 0; item < N; item++) worst = fmax(worst, chi2(pos[item], N, (double)DRAWS / N));
        check(worst <= CHI2_CRIT_9DOF_1E7,  // 10 tests at 1e-7 each: 1e-6 in all
              "each of 10 items lands on each position equally often (%d draws): the worst item's chi-square %.1f (<= "
              "%.2f, 9 dof, false alarm 1e-7 per item)",
              DRAWS, worst, CHI2_CRIT_9DOF_1E7);
    }
    {  // the generators are the published ones: the reference implementations' outputs (Vigna's
       // splitmix64.c and xoshiro256starstar.c, as the Rust crate rand_xoshiro's tests quote them)
        Rng r = {{1, 2, 3, 4}};
        const uint64_t want_x[4] = {11520ull, 0ull, 1509978240ull, 1215971899390074240ull};
        int ok_x = 1, ok_s = 1;
        for (int i = 0; i < 4; i++) ok_x &= rng_u64(&r) == want_x[i];
        uint64_t x = 1477776061723855037ull;
        const uint64_t want_s[3] = {1985237415132408290ull, 2979275885539914483ull, 13511426838097143398ull};
        for (int i = 0; i < 3; i++) ok_s &= splitmix64(&x) == want_s[i];
        check(ok_x && ok_s, "rng_u64 is xoshiro256** and splitmix64 is SplitMix64: their reference outputs (%s, %s)",
              ok_x ? "same" : "differ", ok_s ? "same" : "differ");
    }
    {  // seeds and streams: different generators
        uint64_t first[100];
        int dup = 0;
        for (int s = 0; s < 100; s++) {
            Rng r;
            rng_seed(&r, (uint64_t)s, 1);
            first[s] = rng_u64(&r);
            for (int t = 0; t < s; t++) dup += first[t] == first[s];
        }
        Rng r0, r1, r2;
        rng_seed(&r0, 5, 0);
        rng_seed(&r1, 5, 1);
        rng_seed(&r2, 5, 2);
        uint64_t a = rng_u64(&r0), b = rng_u64(&r1), c = rng_u64(&r2);
        check(dup == 0 && a != b && b != c && a != c,
              "seeds 0..99 start 100 different sequences (%d repeats); streams 0, 1, 2 of one seed differ", dup);
        int p1[50], p2[50], same = 0;
        rng_seed(&r1, 11, 1);
        rng_seed(&r2, 12, 1);
        rng_permutation(&r1, p1, 50);
        rng_permutation(&r2, p2, 50);
        for (int i = 0; i < 50; i++) same += p1[i] == p2[i];
        check(same < 10, "the seed chooses the permutation: seeds 11 and 12 put %d of 50 items at the same place", same);
    }
    {  // rng_below: in range, uniform
        Rng r;
        rng_seed(&r, 3, 4);
        int out_of_range = 0, upper = 0;
        const uint32_t ns[] = {1, 2, 3, 7, 10, 1000000007u, 0x80000001u, 0xFFFFFFFFu};
        for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++)
            for (int i = 0; i < 2000; i++) {
                uint32_t v = rng_below(&r, ns[k]);
                out_of_range += v >= ns[k];
                upper += ns[k] == 0x80000001u && v > 0x40000000u;
            }
        long c3[3] = {0}, c10[10] = {0}, big[3] = {0};
        for (int i = 0; i < 30000; i++) c3[rng_below(&r, 3) % 3]++;
        for (int i = 0; i < 30000; i++) c10[rng_below(&r, 10) % 10]++;
        // n = 3 * 2^30: 2^32 inputs onto 3 * 2^30 values, 4 onto every 3; without rejecting the excess,
        // the values divisible by 3 come twice as often as the others (the modulo bias at its largest)
        for (int i = 0; i < 30000; i++) big[rng_below(&r, 3u << 30) % 3]++;
        double x3 = chi2(c3, 3, 10000), x10 = chi2(c10, 10, 3000), xbig = chi2(big, 3, 10000);
        check(out_of_range == 0 && upper > 0 && x3 <= chi2_crit_1e6(2) && x10 <= chi2_crit_1e6(9) &&
                  xbig <= chi2_crit_1e6(2),
              "rng_below(n) is below n (%d are not), reaches the top half of [0, 2^31 + 1) (%d of 2000), and is "
              "uniform: chi-square %.1f for n = 3, %.1f for n = 10, %.1f for the residues mod 3 of n = 3 * 2^30 "
              "(<= %.2f, %.2f, %.2f)",
              out_of_range, upper, x3, x10, xbig, chi2_crit_1e6(2), chi2_crit_1e6(9), chi2_crit_1e6(2));
    }
    {  // -H: a uniformly random subset
        enum { N = 20, SEEDS = 4000 };
        long held[N] = {0};
        int bad = 0;
        uint8_t images[N * PD], labels[N];
        for (int i = 0; i < N; i++) {
            labels[i] = (uint8_t)(i % PC);
            for (int p = 0; p < PD; p++) images[i * PD + p] = (uint8_t)i;  // each item's pixels name it
        }
        for (int s = 0; s < SEEDS; s++) {
            Dataset train = dataset_of(images, labels, N), val;
            split_holdout(&train, &val, 0.25f, (uint64_t)s);
            int prev = -1;
            bad |= val.n != 5 || train.n != 15;
            for (int i = 0; i < val.n; i++) held[val.images[(size_t)i * PD] % N]++;
            for (int i = 0; i < train.n; i++) {  // the rest keep their order, and every item is in one of the two
                int item = train.images[(size_t)i * PD];
                bad |= item <= prev || train.labels[i] != item % PC;
                prev = item;
            }
            dataset_free(&train);
            dataset_free(&val);
        }
        Dataset all = dataset_of(images, labels, N), none;  // -H 0 (the default): nothing held out
        split_holdout(&all, &none, 0.0f, 7);
        int untouched = none.n == 0 && all.n == N && memcmp(all.images, images, sizeof(images)) == 0 &&
                        memcmp(all.labels, labels, sizeof(labels)) == 0;
        dataset_free(&all);
        dataset_free(&none);
        check(untouched, "-H 0: the validation set is empty (%d items) and the training set as it was", none.n);
        double x = chi2(held, N, SEEDS * 5.0 / N);
        check(!bad && x <= chi2_crit_1e6(19),
              "-H 0.25 of 20 items over %d seeds: 5 held out, the other 15 in order; each item held out equally often "
              "(chi-square %.1f <= %.2f)",
              SEEDS, x, chi2_crit_1e6(19));
    }
}

// ----------------------------------------------------------------------------
// 5. the loss at extreme logits; 6. the pixels; 7. the epoch's plan

static void test_softmax_extremes(void) {
    section("softmax cross-entropy at logits of +-1000");
    // rows: {1000, -1000, 0} with each label, and three equal logits of 1000
    const real logits[] = {1000, -1000, 0, 1000, -1000, 0, 1000, -1000, 0, 1000, 1000, 1000};
    const int labels[] = {0, 1, 2, 0};
    real losses[4], dlogits[12];
    double mean = softmax_xent_forward_backward_cpu(dlogits, losses, logits, labels, 4, 3);
    // in exact arithmetic: logsumexp(1000, -1000, 0) = 1000 + log(1 + e^-1000 + e^-2000), so the losses
    // are 0, 2000, 1000 and ln 3; softmax is (1, 0, 0), and (1/3, 1/3, 1/3) for the last row
    const double want[] = {0, 2000, 1000, log(3.0)};
    int finite = isfinite(mean), close = 1;
    for (int b = 0; b < 4; b++) {
        finite &= isfinite(losses[b]);
        close &= fabs(losses[b] - want[b]) <= 1e-4 * (1 + want[b]);
    }
    double wmean = (want[0] + want[1] + want[2] + want[3]) / 4;
    check(finite && close && fabs(mean - wmean) <= 1e-4 * wmean,
          "the losses are finite and exact: %g %g %g %g (want 0 2000 1000 %.4f), mean %g", losses[0], losses[1],
          losses[2], losses[3], log(3.0), mean);
    int grads_ok = 1;
    for (int b = 0; b < 4; b++)
        for (int c = 0; c < 3; c++) {
            double p = b == 3 ? 1.0 / 3 : c == 0 ? 1 : 0;
            double g = (p - (c == labels[b])) / 4;
            grads_ok &= isfinite(dlogits[b * 3 + c]) && fabs(dlogits[b * 3 + c] - g) <= 1e-6;
        }
    check(grads_ok, "dlogits = (softmax - onehot) / B, finite: row 1 (%g %g %g), row 4 (%g %g %g)", dlogits[3],
          dlogits[4], dlogits[5], dlogits[9], dlogits[10], dlogits[11]);
}

static void test_pixels(void) {
    section("the pixels: p / 255, from the permutation's items");
    enum { D = 6, N = 5 };
    const uint8_t images[N * D] = {0, 1, 127, 128, 254, 255, 10, 20, 30, 40, 50, 60, 255, 255, 255, 0, 0, 0,
                                   3, 5, 7, 11, 13, 17, 200, 100, 50, 25, 12, 6};
    const uint8_t labels[N] = {4, 3, 2, 1, 0};
    const int idx[] = {3, 0, 4, 2, 1};
    real x[3 * D];
    int lab[3];
    gather_batch_cpu(x, lab, images, labels, idx, 1, 3, D);  // items idx[1..3] = 0, 4, 2
    int exact = x[0] == 0.0f && x[5] == 1.0f && x[2 * D + 0] == 1.0f && x[2 * D + 5] == 0.0f, close = 1, rows = 1;
    const int items[3] = {0, 4, 2};
    for (int b = 0; b < 3; b++) {
        rows &= lab[b] == labels[items[b]];
        for (int i = 0; i < D; i++) {
            double want = images[items[b] * D + i] / 255.0;
            close &= fabs(x[b * D + i] - want) <= 6e-8 * want;
        }
    }
    check(exact, "pixel 0 -> %g and 255 -> %.9g: exactly 0 and 1", x[0], x[5]);
    check(close && rows, "every pixel p -> p/255 (within a float rounding), and row b is item idx[start + b] with its "
                         "label");
    gather_batch_cpu(x, lab, images, labels, NULL, 2, 2, D);  // evaluation: items 2, 3 in order
    check(x[0] == 1.0f && lab[0] == labels[2] && lab[1] == labels[3] && fabs(x[D] - 3 / 255.0) < 1e-9,
          "without a permutation, row b is item start + b");
}

// data/idx.h's promise for a raw file: its size is checked against the header before anything is
// allocated or read; one byte too many is refused there, with the count (the check after reading
// would refuse it too, but only once the data is in memory, and without saying how much is extra)
static void test_raw_size_checked_first(void) {
    section("a raw IDX file's size is checked against its header before it is read");
    char path[400], err[1400];
    snprintf(path, sizeof(path), "%s/one-extra-idx3-ubyte", tmpdir);
    uint8_t body[2 * PD + 1];
    for (size_t i = 0; i < sizeof(body); i++) body[i] = (uint8_t)i;
    const uint32_t dims[3] = {2, 3, 4};
    write_idx(path, dims, 3, body, sizeof(body));  // 2 images of 3x4, and one byte more
    uint8_t *data = NULL;
    uint32_t got[3];
    int rc = idx_read(path, 3, &data, got, err, sizeof(err));
    free(data);
    check(rc != 0 && strstr(err, "(1 more)") != NULL, "2 images of 3x4 and 1 byte more: refused by the size check, "
          "which counts the extra byte: \"%s\"", rc ? err : "(accepted)");
}

static void test_plan(void) {
    section("the epoch's plan: ceil(n/B) steps, the last one short");
    int bad = 0;
    char first[128] = "";
    for (int n = 1; n <= 70; n++)
        for (int B = 1; B <= 13; B++)
            for (int t = 0; t <= 8; t += 4) {
                EpochPlan p = epoch_plan(n, B, t);
                int steps = (n + B - 1) / B, last = n - (steps - 1) * B;
                if (t && t < steps) steps = t, last = B;
                long rows = 0;
                for (int s = 0; s < p.steps; s++) rows += epoch_batch_size(&p, s, B);
                int ok = p.steps == steps && p.last_bs == last && p.samples == (long)(steps - 1) * B + last &&
                         rows == p.samples && epoch_batch_size(&p, p.steps - 1, B) == last &&
                         (p.steps < 2 || epoch_batch_size(&p, 0, B) == B);
                if (!ok && !bad++)
                    snprintf(first, sizeof(first), "n %d, B %d, -t %d: %d steps, the last of %d", n, B, t, p.steps,
                             p.last_bs);
            }
    check(bad == 0, "n = 1..70, B = 1..13, -t 0, 4, 8: steps, last batch, rows per step and samples (%d wrong%s%s)",
          bad, bad ? ": " : "", first);
}

int main(int argc, char **argv) {
    const char *bins[8] = {argc > 1 ? argv[1] : "./train_mlp_cpu"};
    int nbins = 1;
    for (int i = 2; i < argc && nbins < 8; i++) bins[nbins++] = argv[i];
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/mlp_props_XXXXXX");
    if (!mkdtemp(tmpdir)) die("check /tmp", "cannot create a temporary directory");
    test_plan();
    test_raw_size_checked_first();
    test_pixels();
    test_softmax_extremes();
    test_evaluate();
    test_init();
    test_shuffle();
    test_loop(bins, nbins);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", tmpdir);
    return test_exit();
}
