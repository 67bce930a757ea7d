/*
The CPU trainer's binary through a run's whole life, as a user meets it (issues 18 and 19):
  1. resuming: a run stopped after an epoch and resumed with -r ends bitwise identical to one
     never stopped (the same checkpoint bytes, the same printed losses); so does one stopped by
     Ctrl-C (SIGINT) in the middle of an epoch, which writes its checkpoint and exits 130;
  2. a resume that contradicts its checkpoint (-m, -b) is refused with exit 2;
  3. kill -9 keeps every row of the CSV log written so far;
  4. a diverging run (-l 100) stops with exit 1 and a line naming the step, for every activation;
  5. output paths that would clobber data are refused with exit 2 before anything is loaded: -o
     in the data directory, -o or -c naming a directory, a FIFO or a symbolic link, and a second
     run given the log another run is writing;
  6. using the model: -e prints the report (the same number of right answers as the run that
     wrote the checkpoint), -i writes the grid of mistakes, -p classifies pictures this test
     draws (each the test set's own image: top class = the model's prediction for that item), and
     a missing or non-image picture gets one line and exit 1;
  7. -H holds out a validation set, evaluated after every epoch, the test set at the end;
  8. the epoch's arithmetic in 64 bits: epoch_plan at n = 2^31 - 1.
  9. given a GPU trainer and the CPU trainer: checkpoints cross between them, each evaluating the
     other's model to the same number of right answers;
 10. the small dataset written as CIFAR-10 binary files and as an image folder of PNGs: the
     trainer learns from each, a GPU trainer to the CPU trainer's accuracy within a point;
 11. a GPU trainer given a model too large for the GPU: one line naming the size, exit 1.
Everything on a small IDX dataset written here (pixels that depend on the label, so the model
learns), except 4, which needs real data: Fashion-MNIST from /usr/share/datasets or data/.
Usage: tests/bin/test_run [TRAINER [CPU_TRAINER]]   (default ./train_mlp_cpu)
  TRAINER is any of the three (make test runs it with each); a GPU trainer on a machine without a
  GPU is skipped. CPU_TRAINER (default ./train_mlp_cpu) is the other side of the crossing in 9.
*/
#define TESTING
#include "../train_mlp_cpu.c"
#include "check.h"
#include "fixtures.h"   // make_data, write_cifar_and_folder

#include <signal.h>
#include <sys/wait.h>

static char tmpdir[256], data[300];
static const char *bin = "./train_mlp_cpu", *cpu_bin = "./train_mlp_cpu";

// ----------------------------------------------------------------------------
// helpers

// Runs `bin args` through the shell; returns the exit status (128 + n for a signal), and the
// output (stdout and stderr together) in out.
static int run(char *out, size_t outlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t outlen, const char *fmt, ...) {
    char args[3000], cmd[4000], path[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(path, sizeof(path), "%s/out.txt", tmpdir);
    snprintf(cmd, sizeof(cmd), "%s %s", bin, args);
    return shell_capture(cmd, path, out, outlen);
}

// The loss column of every step line of a run's output, as one string (timings differ run to run)
static void losses_of(const char *out, char *losses, size_t n) {
    size_t k = 0;
    losses[0] = '\0';
    for (const char *p = strstr(out, "| loss "); p && k + 16 < n; p = strstr(p + 1, "| loss "))
        k += (size_t)snprintf(losses + k, n - k, "%.*s ", (int)strcspn(p + 7, " "), p + 7);
}

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    uint8_t *buf = (uint8_t *)mallocCheck(1 << 20);
    *n = fread(buf, 1, 1 << 20, f);
    fclose(f);
    return buf;
}

static int same_file_bytes(const char *a, const char *b) {
    size_t na, nb;
    uint8_t *pa = read_all(a, &na), *pb = read_all(b, &nb);
    int same = pa && pb && na == nb && na > 0 && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return same;
}

static int count_lines(const char *path, int *complete) {
    size_t n;
    uint8_t *p = read_all(path, &n);
    int lines = 0;
    for (size_t i = 0; i < n; i++) lines += p[i] == '\n';
    *complete = n > 0 && p[n - 1] == '\n';
    free(p);
    return lines;
}

#define OUT_LEN (1 << 16)
static char out[OUT_LEN], out2[OUT_LEN];

// ----------------------------------------------------------------------------
// 1, 2. resuming

static void test_resume(void) {
    section("resume: a run stopped and resumed ends bitwise identical to one never stopped");
    const char *common = "-m 64,16,4 -a tanh -b 10 -l 0.05 -v 5";
    char full[600], part[600], losses_full[8192], losses_part[8192], msg[512];
    snprintf(full, sizeof(full), "%s/full.ckpt", tmpdir);
    snprintf(part, sizeof(part), "%s/part.ckpt", tmpdir);
    int rc1 = run(out, OUT_LEN, "-d %s %s -n 3 -c %s -o %s/full.csv", data, common, full, tmpdir);
    losses_of(out, losses_full, sizeof(losses_full));
    int rc2 = run(out2, OUT_LEN, "-d %s %s -n 1 -c %s -o %s/p1.csv", data, common, part, tmpdir);
    losses_of(out2, losses_part, sizeof(losses_part));
    // -r alone: the settings come from the checkpoint; -n stays the total
    int rc3 = run(out2, OUT_LEN, "-d %s -r %s -n 3 -c %s -v 5 -o %s/p2.csv", data, part, part, tmpdir);
    size_t k = strlen(losses_part);
    losses_of(out2, losses_part + k, sizeof(losses_part) - k);
    check(rc1 == 0 && rc2 == 0 && rc3 == 0 && same_file_bytes(full, part),
          "3 epochs, and 1 epoch then -r for the other 2: the same final checkpoint, byte for byte (exits %d %d %d)",
          rc1, rc2, rc3);
    check(strcmp(losses_full, losses_part) == 0 && losses_full[0], "... and the same losses printed, step for step");
    check(strstr(out2, "resuming") != NULL, "the resumed run says so: \"%s\"", line_with(out2, "resuming", msg, sizeof(msg)));

    // Ctrl-C in the middle of an epoch: many short epochs, interrupted after some steps
    char ctrl[600], cmd[2000], csv[600];
    snprintf(ctrl, sizeof(ctrl), "%s/ctrlc.ckpt", tmpdir);
    snprintf(csv, sizeof(csv), "%s/ctrlc.csv", tmpdir);
    snprintf(cmd, sizeof(cmd), "%s -d %s %s -n 400 -v 1 -c %s -o %s", bin, data, common, ctrl, csv);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int complete = 0;
    for (int i = 0; i < 2000 && count_lines(csv, &complete) < 60; i++) usleep(2000);  // ~20 epochs in
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    // sh -c execs the trainer itself (one command): the status is the trainer's
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char whole[600];
    snprintf(whole, sizeof(whole), "%s/whole.ckpt", tmpdir);
    int rc4 = run(out, OUT_LEN, "-d %s %s -n 400 -v 1 -c %s -o %s/whole.csv", data, common, whole, tmpdir);
    int rc5 = run(out2, OUT_LEN, "-d %s -r %s -c %s -v 1 -o %s/ctrlc2.csv", data, ctrl, ctrl, tmpdir);
    check(code == 130 && rc4 == 0 && rc5 == 0 && same_file_bytes(whole, ctrl),
          "Ctrl-C in the middle of a run exits 130 with a checkpoint; resumed, it ends where the run never stopped "
          "ends, byte for byte (exits %d %d %d)", code, rc4, rc5);

    section("resume: flags that contradict the checkpoint are refused");
    int rc = run(out, OUT_LEN, "-d %s -r %s -m 64,20,4 -o %s/x.csv", data, part, tmpdir);
    check(rc == 2 && strstr(out, "-m 64,20,4 contradicts the checkpoint"), "-m: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -r %s -b 7 -o %s/x.csv", data, part, tmpdir);
    check(rc == 2 && strstr(out, "-b 7 contradicts"), "-b: exit %d, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -r %s/nothing.ckpt -o %s/x.csv", data, tmpdir, tmpdir);
    check(rc == 1 && strstr(out, "error: "), "a missing checkpoint: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
}

// ----------------------------------------------------------------------------
// 3. kill -9 keeps the log's rows

static void test_kill9(void) {
    section("kill -9 keeps every row of the CSV log written so far");
    char csv[600], cmd[2000];
    snprintf(csv, sizeof(csv), "%s/killed.csv", tmpdir);
    snprintf(cmd, sizeof(cmd), "exec %s -d %s -m 64,16,4 -b 10 -n 100000 -v 1 -o %s >/dev/null", bin, data, csv);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int complete = 0, before = 0;
    for (int i = 0; i < 2000 && (before = count_lines(csv, &complete)) < 50; i++) usleep(2000);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    int after = count_lines(csv, &complete);
    check(before >= 50 && after >= before && complete, "the log had %d lines when the run was killed, %d after, the "
          "last one whole", before, after);
}

// ----------------------------------------------------------------------------
// 4. divergence

static void test_divergence(void) {
    section("a diverging run fails loudly: -l 100 on Fashion-MNIST, every activation");
    const char *fm = NULL;
    const char *dirs[] = {"data/fashion-mnist", "/usr/share/datasets/fashion-mnist"};
    char path[1100], msg[512];
    for (int i = 0; i < 2 && !fm; i++)
        if (idx_find(dirs[i], "train-images-idx3-ubyte", path, sizeof(path)) == 0) fm = dirs[i];
    if (!fm) {
        skip("Fashion-MNIST not found (apt-get install dataset-fashion-mnist)");
        return;
    }
    for (int act = 0; act < 3; act++) {
        int rc = run(out, OUT_LEN, "-d %s -a %s -l 100 -n 1 -t 300 -v 20 -c %s/div.ckpt -o %s/div.csv", fm,
                     ACT_NAMES[act], tmpdir, tmpdir);
        char ck[600];
        snprintf(ck, sizeof(ck), "%s/div.ckpt", tmpdir);
        check(rc == 1 && strstr(out, "diverged at epoch 1 step") && strstr(out, "a smaller learning rate") &&
                  !file_exists(ck),
              "%-7s -l 100: exit %d, no checkpoint written after it, \"%s\"", ACT_NAMES[act], rc,
              line_with(out, "error", msg, sizeof(msg)));
    }
    int rc = run(out, OUT_LEN, "-d %s -n 1 -t 300 -v 100 -o %s/ok.csv", fm, tmpdir);
    check(rc == 0, "the default -l 0.1 does not trip the rule (exit %d)", rc);
}

// ----------------------------------------------------------------------------
// 5. output paths that would clobber data

static void test_outputs(void) {
    section("outputs that would clobber data are refused (exit 2), before anything is loaded");
    char msg[512], p[600], fifo[600], link[600], dir[600];
    snprintf(p, sizeof(p), "%s/train-images-idx3-ubyte", data);
    snprintf(fifo, sizeof(fifo), "%s/fifo", tmpdir);
    snprintf(link, sizeof(link), "%s/link.csv", tmpdir);
    snprintf(dir, sizeof(dir), "%s/adir", tmpdir);
    mkfifo(fifo, 0666);
    mkdir(dir, 0777);
    if (symlink(p, link) != 0) { /* checked below through the run */ }
    size_t n_before;
    uint8_t *before = read_all(p, &n_before);
    struct {
        const char *flags, *expect;
    } cases[] = {
        {"-o %s/train-images-idx3-ubyte", "inside the data directory"},  // (data dir, formatted below)
        {"-o %s/adir", "is a directory"},
        {"-o %s/fifo", "FIFO"},
        {"-o %s/link.csv", "symbolic link"},
        {"-c %s/adir", "is a directory"},
        {"-c %s/fifo", "FIFO"},
        {"-o %s/nowhere/x/log.csv", "does not exist"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char flags[800];
        snprintf(flags, sizeof(flags), cases[i].flags, i == 0 ? data : tmpdir);
        int rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 %s", data, flags);
        check(rc == 2 && strstr(out, cases[i].expect), "%-36s exit %d: \"%s\"", flags, rc,
              line_with(out, "error", msg, sizeof(msg)));
    }
    size_t n_after;
    uint8_t *after = read_all(p, &n_after);
    check(n_before == n_after && memcmp(before, after, n_before) == 0, "the data file is untouched");
    free(before);
    free(after);

    // two runs, one log: the second is refused while the first writes it
    char csv[600], cmd[2000];
    snprintf(csv, sizeof(csv), "%s/shared.csv", tmpdir);
    snprintf(cmd, sizeof(cmd), "exec %s -d %s -m 64,16,4 -b 10 -n 100000 -v 1 -o %s >/dev/null", bin, data, csv);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int complete;
    for (int i = 0; i < 2000 && count_lines(csv, &complete) < 5; i++) usleep(2000);
    int rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -o %s", data, csv);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    check(rc == 2 && strstr(out, "another run is writing the log"), "a second run with the same -o: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    check(count_lines(csv, &complete) >= 5, "... and the first run's log keeps its rows");
}

// ----------------------------------------------------------------------------
// 6. using the model: -e, -i, -p

static void test_use(void) {
    section("using a trained model: -e, -i, -p");
    char ck[600], msg[512];
    snprintf(ck, sizeof(ck), "%s/use.ckpt", tmpdir);
    int rc = run(out, OUT_LEN, "-d %s -m 64,16,4 -b 10 -n 3 -c %s -o %s/use.csv", data, ck, tmpdir);
    const char *acc = strstr(out, "final |");
    double trained = acc && strstr(acc, "test accuracy ") ? atof(strstr(acc, "test accuracy ") + 14) : -1;
    char grid[600];
    snprintf(grid, sizeof(grid), "%s/grid.png", tmpdir);
    int rc2 = run(out, OUT_LEN, "-e %s -d %s -i %s", ck, data, grid);
    const char *line = strstr(out, "test accuracy ");
    double evaluated = line ? atof(line + 14) : -2;
    check(rc == 0 && rc2 == 0 && trained > 50 && fabs(trained - evaluated) < 1e-9 && strstr(out, "confusion matrix"),
          "-e: exit %d, test accuracy %.2f%% as the training run ended (%.2f%%), with the per-class table and the "
          "confusion matrix", rc2, evaluated, trained);
    int w = 0, h = 0, comp = 0;
    uint8_t *png = stbi_load(grid, &w, &h, &comp, 0);
    check(png != NULL && w > 64 && h > 64, "-i: the grid of mistakes is a PNG of %dx%d", w, h);
    if (png) stbi_image_free(png);

    // -p: the test set's first images as PNGs; the top class must be the model's prediction for them
    Dataset tr, te;
    char err[1400];
    if (dataset_load_both(data, &tr, &te, err, sizeof(err)) != 0) {
        check(0, "%s", err);
        return;
    }
    Checkpoint c;
    if (checkpoint_read(ck, &c, err, sizeof(err)) != 0) {
        check(0, "%s", err);
        return;
    }
    ModelCPU m;
    model_build_cpu(&m, c.meta.sizes, c.meta.L, c.meta.act, 1);
    for (size_t i = 0; i < m.num_params; i++) m.params[i] = c.params[i];
    char args[4000] = "";
    int agree = 0, total = 5;
    int pred[5];
    for (int i = 0; i < total; i++) {
        char pic[600];
        snprintf(pic, sizeof(pic), "%s/pic%d.png", tmpdir, i);
        stbi_write_png(pic, 8, 8, 1, te.images + (size_t)i * 64, 8);
        size_t k = strlen(args);
        snprintf(args + k, sizeof(args) - k, " -p %s", pic);
        gather_batch_cpu(m.acts[0], m.labels, te.images, te.labels, NULL, i, 1, 64);
        model_forward_cpu(&m, 1);
        pred[i] = argmax_cpu(m.acts[m.L], 4);
    }
    rc = run(out, OUT_LEN, "-e %s%s", ck, args);
    for (int i = 0; i < total; i++) {
        char needle[700];
        snprintf(needle, sizeof(needle), "pic%d.png: 1. %d ", i, pred[i]);
        agree += strstr(out, needle) != NULL;
    }
    check(rc == 0 && agree == total, "-p on %d of the test set's images drawn as PNGs: the top class is the model's "
          "prediction for each (%d agree), \"%s\"", total, agree, line_with(out, "pic0.png", msg, sizeof(msg)));
    char text[600];
    snprintf(text, sizeof(text), "%s/not_a_picture.png", tmpdir);
    FILE *f = fopenCheck(text, "w");
    fprintf(f, "hello\n");
    fcloseCheck(f, text);
    rc = run(out, OUT_LEN, "-e %s -p %s/missing.png", ck, tmpdir);
    check(rc == 1 && strstr(out, "error: "), "-p a missing file: exit %d, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-e %s -p %s", ck, text);
    check(rc == 1 && strstr(out, "error: "), "-p a text file: exit %d, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-e %s/use.csv -d %s", tmpdir, data);
    check(rc == 1 && strstr(out, "not an mlp.cu checkpoint"), "-e on a CSV: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    model_free_cpu(&m);
    checkpoint_free(&c);
    dataset_free(&tr);
    dataset_free(&te);
}

// ----------------------------------------------------------------------------
// 7, 8. -H, and the 64-bit epoch

static void test_holdout_and_sizes(void) {
    section("-H: a validation set after every epoch, the test set at the end");
    char msg[512];
    int rc = run(out, OUT_LEN, "-d %s -m 64,16,4 -b 10 -n 2 -H 0.2 -o %s/h.csv", data, tmpdir);
    check(rc == 0 && strstr(out, "epoch 2 done") && strstr(strstr(out, "epoch 2 done"), "val accuracy") &&
              strstr(out, "final |") && strstr(out, "validation set (-H)"),
          "exit %d: \"%s\"", rc, line_with(out, "epoch 2 done", msg, sizeof(msg)));
    section("the epoch's arithmetic in 64 bits");
    EpochPlan p = epoch_plan(2147483647, 64, 0);
    check(p.steps == 33554432 && p.last_bs == 63 && p.samples == 2147483647L,
          "epoch_plan(2^31 - 1 items, batch 64): %d steps, the last of %d, %ld samples", p.steps, p.last_bs, p.samples);
}

// 10. the other kinds of data: the small dataset as CIFAR-10 binary files and as an image folder
// of PNGs (tests/fixtures.h); the trainer learns from each, and a GPU trainer reaches the CPU
// trainer's accuracy on each
static double accuracy_of(const char *text) {
    const char *p = strstr(text, "final |");
    p = p ? strstr(p, "test accuracy ") : NULL;
    return p ? atof(p + 14) : -1;
}

static void test_data_kinds(void) {
    section("other kinds of data: CIFAR-10 binary files and an image folder");
    char cifar[600], folder[600], msg[512];
    snprintf(cifar, sizeof(cifar), "%s/cifar", tmpdir);
    snprintf(folder, sizeof(folder), "%s/folder", tmpdir);
    write_cifar_and_folder(data, cifar, folder);
    const char *dirs[] = {cifar, folder}, *names[] = {"CIFAR-10 format (3072 inputs)", "an image folder (64 inputs)"};
    for (int k = 0; k < 2; k++) {
        int rc = run(out, OUT_LEN, "-d %s -b 10 -n 3 -o %s/k.csv", dirs[k], tmpdir);
        double acc = accuracy_of(out);
        double want = acc;
        if (strcmp(bin, cpu_bin) != 0) {
            const char *save = bin;
            bin = cpu_bin;
            run(out2, OUT_LEN, "-d %s -b 10 -n 3 -o %s/k2.csv", dirs[k], tmpdir);
            bin = save;
            want = accuracy_of(out2);
        }
        check(rc == 0 && acc > 50 && fabs(acc - want) <= 1.0, "%s: exit %d, test accuracy %.2f%% (the CPU trainer's: "
              "%.2f%%), \"%s\"", names[k], rc, acc, want, line_with(out, "dataset ", msg, sizeof(msg)));
    }
}

// 11. a model too large for the GPU: one line naming the size asked for, exit 1 (GPU trainers only:
// on the CPU the same model would be allocated lazily by the kernel and killed when touched)
static void test_out_of_memory(void) {
    section("a model too large for the GPU gets one line naming the size, exit 1");
    const char *base = strrchr(bin, '/') ? strrchr(bin, '/') + 1 : bin;
    if (strcmp(bin, cpu_bin) == 0 || strcmp(base, "train_mlp_cpu") == 0) {  // (make test's sanitizer build too)
        skip("the CPU trainer: its allocations are lazy, so this is a GPU trainer's test");
        return;
    }
    char msg[512];
    // 4 x 65536^2 weights: 64 GiB of parameters, and as much again for gradients and momentum
    int rc = run(out, OUT_LEN, "-d %s -m 64,65536,65536,65536,65536,4 -b 10 -n 1 -o %s/oom.csv", data, tmpdir);
    check(rc == 1 && strstr(out, "out of GPU memory allocating") && strstr(out, "bytes"), "exit %d: \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
}

// 9. checkpoints crossing between the trainer under test and the CPU trainer
static void test_crossing(void) {
    section("checkpoints cross between trainers: each evaluates the other's model alike");
    if (strcmp(bin, cpu_bin) == 0) {
        skip("the trainer under test is the CPU trainer: nothing to cross");
        return;
    }
    char a[600], b[600], msg[512];
    snprintf(a, sizeof(a), "%s/by_test.ckpt", tmpdir);
    snprintf(b, sizeof(b), "%s/by_cpu.ckpt", tmpdir);
    int rc1 = run(out, OUT_LEN, "-d %s -m 64,16,4 -b 10 -n 2 -c %s -o %s/x1.csv", data, a, tmpdir);
    const char *save = bin;
    bin = cpu_bin;
    int rc2 = run(out2, OUT_LEN, "-d %s -m 64,16,4 -b 10 -n 2 -c %s -o %s/x2.csv", data, b, tmpdir);
    for (int i = 0; i < 2; i++) {
        const char *ck = i ? b : a;
        bin = save;
        int e1 = run(out, OUT_LEN, "-e %s -d %s", ck, data);
        bin = cpu_bin;
        int e2 = run(out2, OUT_LEN, "-e %s -d %s", ck, data);
        const char *p = strstr(out, "test accuracy "), *q = strstr(out2, "test accuracy ");
        char l1[256], l2[256];
        line_with(out, "test accuracy", l1, sizeof(l1));
        line_with(out2, "test accuracy", l2, sizeof(l2));
        // the right answers, "(N of M)": the same count on both sides
        const char *n1 = p ? strstr(p, "(") : NULL, *n2 = q ? strstr(q, "(") : NULL;
        check(rc1 == 0 && rc2 == 0 && e1 == 0 && e2 == 0 && n1 && n2 && atoi(n1 + 1) == atoi(n2 + 1),
              "the %s's checkpoint: %s \"%s\", %s \"%s\"", i ? "CPU trainer" : "trainer under test", save, l1,
              cpu_bin, l2);
    }
    bin = save;
    (void)msg;
}

int main(int argc, char **argv) {
    if (argc > 1) bin = argv[1];
    if (argc > 2) cpu_bin = argv[2];
    if (access(bin, X_OK) != 0) {
        printf("error: %s is not built ---> try: make train_cpu\n", bin);
        check(0, "%s exists", bin);
        return test_exit();
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/mlp_test_run_XXXXXX");
    if (!mkdtemp(tmpdir)) die("check /tmp", "cannot create a temporary directory");
    snprintf(data, sizeof(data), "%s/data", tmpdir);
    make_data(data, 200, 100);
    char first[OUT_LEN];
    if (run(first, sizeof(first), "-d %s -m 64,8,4 -n 1 -o %s/probe.csv", data, tmpdir) == 1 &&
        strstr(first, "no usable CUDA GPU")) {
        skip("%s needs a GPU, and there is none here: its run tests are skipped", bin);
        return test_exit();
    }
    test_resume();
    test_kill9();
    test_divergence();
    test_outputs();
    test_use();
    test_holdout_and_sizes();
    test_data_kinds();
    test_crossing();
    test_out_of_memory();
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (!getenv("KEEP_TMP") && system(cmd) != 0) printf("  (could not remove %s)\n", tmpdir);
    return test_exit();
}
