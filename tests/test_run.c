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
 11. a GPU trainer given a model too large for the GPU: one line naming the size, exit 1;
 12. the rule for outputs: -o, -c, -i never replace an input (by device and inode: hard and symbolic
     links too) nor anything in the data directory (by any path; a sibling data2/ is fine), and an
     existing file only of their own kind unless -F 1 (which never overrides the first two); the
     default log directory never inside the data directory; two runs on one -c refused (its lock);
     resuming with the same -o appends to the log and marks the resume;
 13. every way a run ends leaves its checkpoint (-c), a message, the log's stop row with the reason,
     and its exit code: SIGHUP 129, SIGPIPE (a closed stdout) 141, a file-size limit 1 with no
     temporary file left; a dead writer's stale temporary files are removed, a live one's kept;
 14. messages whose hints work when followed literally (-F 1, -r alone after -H, the CPU trainer's
     command on a machine without a GPU), -e on data of another shape, -p's line on how it
     prepared each picture and its warning on a flat one, -h's exit codes and wording;
 15. what the flags must pin down: -e reproduces the training run's final test loss and accuracy
     on a test set of several evaluation batches; -H 1 refused, -H 0 off; -bx 64 and -m with one
     size refused.
Everything on a small IDX dataset written here (pixels that depend on the label, so the model
learns), except 4, which needs real data: Fashion-MNIST from /usr/share/datasets or data/.
Usage: tests/bin/test_run [TRAINER [CPU_TRAINER]]   (default ./train_mlp_cpu)
  TRAINER is any of the three (make test runs it with each); a GPU trainer on a machine without a
  GPU is skipped. CPU_TRAINER (default ./train_mlp_cpu) is the other side of the crossing in 9.
*/
#define TESTING
#include "../train_mlp_cpu.c"
#include "check.h"
#include "ckpt_v1.h"  // checkpoint_as_version1
#include "fixtures.h"  // make_data, make_data_side, write_cifar_and_folder, line_with

#include <dirent.h>
#include <limits.h>
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

static void write_file(const char *path, const char *text) {
    FILE *f = fopenCheck(path, "w");
    fputs(text, f);
    fcloseCheck(f, path);
}

// 1 when the file at path holds exactly text
static int file_is(const char *path, const char *text) {
    size_t n;
    uint8_t *p = read_all(path, &n);
    int same = p && n == strlen(text) && memcmp(p, text, n) == 0;
    free(p);
    return same;
}

static int starts_with_bytes(const char *path, const char *magic) {
    size_t n;
    uint8_t *p = read_all(path, &n);
    int same = p && n >= strlen(magic) && memcmp(p, magic, strlen(magic)) == 0;
    free(p);
    return same;
}

// runs the trainer (by its absolute path) from directory dir: `cd dir && bin args`
static int run_in(const char *dir, char *out, size_t outlen, const char *args) {
    char abs_bin[PATH_MAX], cmd[5000], path[600];
    if (!realpath(bin, abs_bin)) snprintf(abs_bin, sizeof(abs_bin), "%s", bin);
    snprintf(path, sizeof(path), "%s/out.txt", tmpdir);
    snprintf(cmd, sizeof(cmd), "cd '%s' && '%s' %s >%s 2>&1", dir, abs_bin, args, path);
    int status = system(cmd);
    size_t n = 0;
    uint8_t *p = read_all(path, &n);
    n = n < outlen - 1 ? n : outlen - 1;
    if (p) memcpy(out, p, n);
    out[n] = '\0';
    free(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// the last (up to) n - 1 bytes of a file, as a string: the end of a run's output, where its last
// message is
static void tail_of(const char *path, char *text, size_t n) {
    size_t len;
    uint8_t *p = read_all(path, &len);
    size_t k = len < n - 1 ? len : n - 1;
    if (p) memcpy(text, p + len - k, k);
    text[p ? k : 0] = '\0';
    free(p);
}

// the last line of a file (without its newline)
static void last_line(const char *path, char *line, size_t n) {
    size_t len;
    uint8_t *p = read_all(path, &len);
    line[0] = '\0';
    if (!p || len == 0) {
        free(p);
        return;
    }
    size_t end = len, start;
    while (end > 0 && p[end - 1] == '\n') end--;
    for (start = end; start > 0 && p[start - 1] != '\n'; start--) {}
    snprintf(line, n, "%.*s", (int)(end - start), (const char *)p + start);
    free(p);
}

static int count_text(const char *path, const char *needle) {
    size_t n;
    uint8_t *p = read_all(path, &n);
    int k = 0;
    if (p) {
        char *text = (char *)mallocCheck(n + 1);
        memcpy(text, p, n);
        text[n] = '\0';
        for (const char *q = strstr(text, needle); q; q = strstr(q + 1, needle)) k++;
        free(text);
    }
    free(p);
    return k;
}

// Starts `bin args` in the background (sh -c exec: the pid is the trainer's), its stdout and
// stderr into tmpdir/bg_out.txt, and waits until the log at csv has at least rows lines
static pid_t start_run(const char *args, const char *csv, int rows) {
    char cmd[3000];
    snprintf(cmd, sizeof(cmd), "exec %s %s >%s/bg_out.txt 2>&1", bin, args, tmpdir);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int complete;
    for (int i = 0; i < 3000 && count_lines(csv, &complete) < rows; i++) usleep(2000);
    return pid;
}

// Sends sig to a run start_run started; returns its exit status (128 + n for a signal)
static int stop_run(pid_t pid, int sig) {
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
    snprintf(cmd, sizeof(cmd), "exec %s -d %s %s -n 400 -v 1 -c %s -o %s", bin, data, common, ctrl, csv);
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
    // sh -c execs the trainer itself (exec): the status is the trainer's
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    char last[1000];
    last_line(csv, last, sizeof(last));  // the stopped run's own word that the signal stopped it
    check(code == 130 && strncmp(last, "stop,", 5) == 0 && strstr(last, "stopped by SIGINT"),
          "Ctrl-C: exit %d, the log's last row \"%.100s\"", code, last);
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
        const char *is = strstr(out, "the mean loss of the last steps is ");
        is = is ? is + strlen("the mean loss of the last steps is ") : "";
        char line[1000], csv[700];
        snprintf(csv, sizeof(csv), "%s/div.csv", tmpdir);
        last_line(csv, line, sizeof(line));
        // the loss reads as a number and its limit, or as "not a number": never "-nan6.91" run together
        int reads = strncmp(is, "not a number: the weights overflowed", 36) == 0 || strncmp(is, "infinite", 8) == 0 ||
                    (strtod(is, NULL) > 0 && strstr(is, ", above ") == is + strcspn(is, ","));
        check(rc == 1 && strstr(out, "diverged at epoch 1 step") && strstr(out, "a smaller learning rate") &&
                  !file_exists(ck) && reads && strncmp(line, "stop,", 5) == 0 && strstr(line, "diverged"),
              "%-7s -l 100: exit %d, no checkpoint written after it, the log's stop row says why, \"%s\"",
              ACT_NAMES[act], rc, line_with(out, "error", msg, sizeof(msg)));
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
    char elsewhere[600];
    snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere.csv", tmpdir);
    if (symlink(elsewhere, link) != 0) { /* checked below through the run */ }
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
    char csv[600], args[2000];
    snprintf(csv, sizeof(csv), "%s/shared.csv", tmpdir);
    snprintf(args, sizeof(args), "-d %s -m 64,16,4 -b 10 -n 100000 -v 1 -o %s", data, csv);
    pid_t pid = start_run(args, csv, 5);
    int rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -o %s", data, csv);
    stop_run(pid, SIGKILL);
    int complete;
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

// ----------------------------------------------------------------------------
// 12. the rule for outputs

static void test_output_rule(void) {
    section("an output replaces only a file of its own kind, never an input, never the data");
    char msg[512], notes[600], ck[600], pic[600], a[600];
    snprintf(notes, sizeof(notes), "%s/notes.txt", tmpdir);
    snprintf(ck, sizeof(ck), "%s/rule.ckpt", tmpdir);
    snprintf(pic, sizeof(pic), "%s/notes.png", tmpdir);
    write_file(notes, "my notes\n");
    write_file(pic, "not a picture\n");
    int rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -c %s -o %s/r1.csv", data, notes, tmpdir);
    check(rc == 2 && strstr(out, "not an mlp.cu checkpoint") && strstr(out, "-F 1") && file_is(notes, "my notes\n"),
          "-c on a text file: exit %d, the file untouched, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -o %s", data, notes);
    check(rc == 2 && strstr(out, "not a CSV log of mlp.cu") && file_is(notes, "my notes\n"),
          "-o on a text file: exit %d, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -b 10 -c %s -o %s/r1.csv", data, ck, tmpdir);
    check(rc == 0, "a checkpoint to use below (exit %d)", rc);
    rc = run(out, OUT_LEN, "-e %s -d %s -i %s", ck, data, pic);
    check(rc == 2 && strstr(out, "not a PNG picture") && file_is(pic, "not a picture\n"),
          "-i on a .png that is not a PNG: exit %d, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-e %s -d %s -i %s/errors.jpg", ck, data, tmpdir);
    snprintf(a, sizeof(a), "%s/errors.jpg", tmpdir);
    check(rc == 2 && strstr(out, "give a name ending in .png") && !file_exists(a), "-i errors.jpg: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    // the hint, followed: -F 1 replaces the stranger's file
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -c %s -o %s/r2.csv -F 1", data, notes, tmpdir);
    check(rc == 0 && starts_with_bytes(notes, "MLPCUCKP"), "... with -F 1, as the message says: exit %d, replaced", rc);
    // each output replaces a file of its own kind, and an empty file
    snprintf(a, sizeof(a), "%s/empty.ckpt", tmpdir);
    write_file(a, "");
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -b 10 -c %s -o %s/r1.csv", data, a, tmpdir);
    int rc2 = run(out2, OUT_LEN, "-d %s -m 64,8,4 -n 1 -b 10 -c %s -o %s/r1.csv", data, ck, tmpdir);
    check(rc == 0 && rc2 == 0 && starts_with_bytes(a, "MLPCUCKP"),
          "an empty file and a checkpoint are replaced by -c, a log by -o (exits %d %d)", rc, rc2);

    // inputs: never replaced, -F 1 or not
    size_t n0;
    uint8_t *before = read_all(ck, &n0);
    rc = run(out, OUT_LEN, "-d %s -r %s -n 2 -o %s -F 1", data, ck, ck);
    check(rc == 2 && strstr(out, "is the same file as the input"), "-r X -o X (even with -F 1): exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    snprintf(a, sizeof(a), "%s/rule_link.png", tmpdir);
    if (symlink(ck, a) != 0) { /* the run below says what happened */ }
    rc = run(out, OUT_LEN, "-e %s -d %s -i %s", ck, data, a);
    check(rc == 2 && strstr(out, "is the same file as the input"),
          "-e X -i LINK.png (a symbolic link to X): exit %d, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    size_t n1;
    uint8_t *after = read_all(ck, &n1);
    check(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "... the checkpoint is untouched");
    free(before);
    free(after);
    snprintf(a, sizeof(a), "%s/both", tmpdir);
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -c %s -o %s", data, a, a);
    check(rc == 2 && strstr(out, "name the same file") && !file_exists(a), "-c F -o F: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -r %s -c %s -n 2 -o %s/r3.csv", data, ck, ck, tmpdir);
    check(rc == 0, "-r X -c X, resuming in place, is the one exception (exit %d)", rc);

    // the data: a hard link to a training file, outside the data directory; by any path inside it
    char train_file[600], hard[600];
    snprintf(train_file, sizeof(train_file), "%s/train-labels-idx1-ubyte", data);
    snprintf(hard, sizeof(hard), "%s/hard.csv", tmpdir);
    before = read_all(train_file, &n0);
    if (link(train_file, hard) == 0) {
        rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -o %s -F 1", data, hard);
        check(rc == 2 && strstr(out, "is the same file as") && strstr(out, "in the data directory"),
              "-o naming a hard link to a training file: exit %d, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    } else {
        skip("a hard link: %s", strerror(errno));
    }
    const char *inside[] = {"-o %s/../data/x.csv", "-c %s/./x.ckpt", "-o %s/x.csv -F 1"};
    for (int i = 0; i < 3; i++) {
        char flags[800];
        snprintf(flags, sizeof(flags), inside[i], data);
        rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 %s", data, flags);
        check(rc == 2 && strstr(out, "inside the data directory"), "%s: exit %d", flags, rc);
    }
    rc = run(out, OUT_LEN, "-e %s -d %s -i %s/grid.png", ck, data, data);
    check(rc == 2 && strstr(out, "inside the data directory"), "-i into the data directory: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    after = read_all(train_file, &n1);
    check(before && after && n0 == n1 && memcmp(before, after, n0) == 0, "the training file is untouched");
    free(before);
    free(after);
    // a sibling whose name starts with the data directory's is not inside it
    char sib[600];
    snprintf(sib, sizeof(sib), "%s2", data);
    mkdir(sib, 0777);
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -b 10 -o %s/x.csv -c %s/x.ckpt", data, sib, sib);
    rc2 = run(out2, OUT_LEN, "-e %s/x.ckpt -d %s -i %s/x.png", sib, data, sib);
    check(rc == 0 && rc2 == 0, "-o, -c and -i into the sibling directory data2/: allowed (exits %d %d)", rc, rc2);
    // the default log directory: never inside the data directory
    rc = run_in(data, out, OUT_LEN, "-d . -m 64,8,4 -n 1");
    snprintf(a, sizeof(a), "%s/logs", data);
    struct stat st;
    check(rc == 2 && strstr(out, "the default log directory logs/ is inside the data directory") && stat(a, &st) != 0,
          "cd DATA && trainer -d .: exit %d, no logs/ made there, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    rc = run_in(data, out, OUT_LEN, "-d . -m 64,8,4 -n 1 -o ../from_inside.csv");
    check(rc == 0, "... and with -o FILE outside it, as the message says: exit %d", rc);

    // two runs, one checkpoint: the second is refused while the first holds its lock
    char lck[600], lcsv[600], args[2000];
    snprintf(lck, sizeof(lck), "%s/locked.ckpt", tmpdir);
    snprintf(lcsv, sizeof(lcsv), "%s/locked.csv", tmpdir);
    snprintf(args, sizeof(args), "-d %s -m 64,16,4 -b 10 -n 100000 -v 1 -c %s -o %s", data, lck, lcsv);
    pid_t pid = start_run(args, lcsv, 5);
    rc = run(out, OUT_LEN, "-d %s -m 64,16,4 -b 10 -n 1 -c %s -o %s/locked2.csv", data, lck, tmpdir);
    int code = stop_run(pid, SIGTERM);
    check(rc == 2 && strstr(out, "another run is writing"), "a second run on the same -c: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    Checkpoint c;
    char err[1400];
    int ok = checkpoint_read(lck, &c, err, sizeof(err)) == 0;
    if (ok) checkpoint_free(&c);
    snprintf(a, sizeof(a), "%s/.locked.ckpt.lock", tmpdir);
    check(code == 143 && ok && !file_exists(a), "... the first, stopped by SIGTERM, exits 143 with its checkpoint and "
          "gives its lock back (exit %d)", code);

    // resuming with the same -o: the log goes on
    char rck[600], rcsv[600], line[600];
    snprintf(rck, sizeof(rck), "%s/resumed.ckpt", tmpdir);
    snprintf(rcsv, sizeof(rcsv), "%s/resumed.csv", tmpdir);
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -b 10 -n 1 -c %s -o %s", data, rck, rcsv);
    rc2 = run(out, OUT_LEN, "-d %s -r %s -n 2 -c %s -o %s", data, rck, rck, rcsv);
    last_line(rcsv, line, sizeof(line));
    check(rc == 0 && rc2 == 0 && count_text(rcsv, "\nepoch,1,") == 1 && count_text(rcsv, "\nepoch,2,") == 1 &&
              count_text(rcsv, "\nresume,2,0,20,") == 1 && count_text(rcsv, "kind,epoch") == 1 &&
              count_text(rcsv, "\nstop,") == 2 && strstr(line, "stop,") == line && strstr(line, "finished"),
          "-r with the same -o appends: both epochs, one header, a resume row, each run's stop row (exits %d %d)", rc,
          rc2);
}

// ----------------------------------------------------------------------------
// 13. every way a run ends

static void test_endings(void) {
    section("every way a run ends: a checkpoint, a message, the log's stop row, its exit code");
    char ck[600], csv[600], args[2000], line[1000], msg[512], path[700];
    snprintf(ck, sizeof(ck), "%s/end.ckpt", tmpdir);
    snprintf(csv, sizeof(csv), "%s/end.csv", tmpdir);
    snprintf(args, sizeof(args), "-d %s -m 64,16,4 -b 10 -n 100000 -v 1 -c %s -o %s", data, ck, csv);
    int code = stop_run(start_run(args, csv, 20), SIGHUP);
    snprintf(path, sizeof(path), "%s/bg_out.txt", tmpdir);
    char said[4096];
    tail_of(path, said, sizeof(said));
    last_line(csv, line, sizeof(line));
    Checkpoint c;
    char err[1400];
    int ok = checkpoint_read(ck, &c, err, sizeof(err)) == 0;
    if (ok) checkpoint_free(&c);
    check(code == 129 && ok && strstr(said, "stopped by SIGHUP") && strstr(line, "stop,") == line &&
              strstr(line, "stopped by SIGHUP"),
          "SIGHUP: exit %d, the checkpoint written, \"%s\"; the log's last row \"%.80s\"", code,
          line_with(said, "stopped", msg, sizeof(msg)), line);
    int rc = run(out, OUT_LEN, "-d %s -r %s -n 1000 -t 2 -c %s -o %s/end2.csv", data, ck, ck, tmpdir);
    check(rc == 2 && strstr(out, "-t 2 contradicts"), "... a contradicting resume of it is refused (exit %d)", rc);

    // SIGPIPE: stdout closed by the reader (`| head -1`)
    char rcfile[600], errfile[600];
    snprintf(rcfile, sizeof(rcfile), "%s/pipe_rc.txt", tmpdir);
    snprintf(errfile, sizeof(errfile), "%s/pipe_err.txt", tmpdir);
    snprintf(ck, sizeof(ck), "%s/pipe.ckpt", tmpdir);
    char cmd[3000];
    snprintf(cmd, sizeof(cmd), "(%s -d %s -m 64,16,4 -b 10 -n 100000 -v 1 -c %s -o %s/pipe.csv 2>%s; echo $? >%s) | "
             "head -n 1 >/dev/null", bin, data, ck, tmpdir, errfile, rcfile);
    if (system(cmd) != 0) { /* head's status: the trainer's is in rcfile */ }
    size_t n;
    uint8_t *rct = read_all(rcfile, &n);
    char errtext[2048];
    tail_of(errfile, errtext, sizeof(errtext));
    ok = checkpoint_read(ck, &c, err, sizeof(err)) == 0;
    if (ok) checkpoint_free(&c);
    snprintf(path, sizeof(path), "%s/pipe.csv", tmpdir);
    last_line(path, line, sizeof(line));
    check(rct && atoi((const char *)rct) == 141 && ok && strstr(errtext, "stopped by SIGPIPE") &&
              strstr(line, "stopped by SIGPIPE"),
          "| head -1 (SIGPIPE): exit %d, the checkpoint written, on stderr \"%.*s\"", rct ? atoi((const char *)rct) : -1,
          (int)strcspn(errtext, "\n"), errtext);
    free(rct);

    // a file-size limit: the checkpoint (21 KB) does not fit under ulimit -f 16 (8 or 16 KB)
    snprintf(ck, sizeof(ck), "%s/big.ckpt", tmpdir);
    snprintf(cmd, sizeof(cmd), "ulimit -f 16; exec %s -d %s -m 64,16,4 -b 10 -n 1 -c %s -o %s/fsize.csv >%s/fsize.txt "
             "2>&1", bin, data, ck, tmpdir, tmpdir);
    int status = system(cmd);
    code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    snprintf(path, sizeof(path), "%s/fsize.txt", tmpdir);
    tail_of(path, said, sizeof(said));
    int temps = 0;
    DIR *d = opendir(tmpdir);
    for (struct dirent *e; d && (e = readdir(d));) temps += strncmp(e->d_name, ".big.ckpt.tmp.", 14) == 0;
    if (d) closedir(d);
    snprintf(path, sizeof(path), "%s/fsize.csv", tmpdir);
    last_line(path, line, sizeof(line));
    check(code == 1 && strstr(said, "File too large") && temps == 0 && !file_exists(ck) &&
              strstr(line, "stop,") == line && strstr(line, "File too large"),
          "ulimit -f: exit %d, no temporary file left, \"%s\"; the log's last row \"%.100s\"", code,
          line_with(said, "error", msg, sizeof(msg)), line);

    // stale temporary files: a dead writer's removed, a live one's kept
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    char stale[700], live[700];
    snprintf(ck, sizeof(ck), "%s/stale.ckpt", tmpdir);
    snprintf(stale, sizeof(stale), "%s/.stale.ckpt.tmp.%d.Ab12Cd", tmpdir, (int)dead);
    snprintf(live, sizeof(live), "%s/.stale.ckpt.tmp.%d.Ab12Cd", tmpdir, (int)getpid());
    write_file(stale, "half a checkpoint");
    write_file(live, "a running writer's");
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -b 10 -n 1 -c %s -o %s/stale.csv", data, ck, tmpdir);
    check(rc == 0 && !file_exists(stale) && file_exists(live),
          "after kill -9: the next run removes the dead writer's temporary file, never a live one's (exit %d)", rc);
    unlink(live);

    // a normal end, and an error's: the stop row says which
    snprintf(path, sizeof(path), "%s/r1.csv", tmpdir);
    last_line(path, line, sizeof(line));
    check(strncmp(line, "stop,", 5) == 0 && strstr(line, ",finished"), "a finished run's last row: \"%s\"", line);
}

// ----------------------------------------------------------------------------
// 14, 15. messages, and what the flags pin down

static void test_messages(void) {
    section("messages whose hints work, and what the flags pin down");
    char msg[512], ck[600];
    snprintf(ck, sizeof(ck), "%s/rule.ckpt", tmpdir);
    // -e on data of another shape: the message names both shapes and advises no -m
    char small[600];
    snprintf(small, sizeof(small), "%s/small", tmpdir);
    make_data_side(small, 40, 20, 4);
    int rc = run(out, OUT_LEN, "-e %s -d %s", ck, small);
    check(rc == 2 && strstr(out, "takes 1x8x8 images (64 inputs)") && strstr(out, "holds 1x4x4 images") &&
              !strstr(out, "use -m"),
          "-e on data of another shape: exit %d, \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    // -H is kept in the checkpoint: -r alone resumes a run that held out a validation set
    char hck[600];
    snprintf(hck, sizeof(hck), "%s/holdout.ckpt", tmpdir);
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -b 10 -n 1 -H 0.1 -c %s -o %s/h1.csv", data, hck, tmpdir);
    int rc2 = run(out, OUT_LEN, "-d %s -r %s -n 2 -o %s/h2.csv", data, hck, tmpdir);
    check(rc == 0 && rc2 == 0 && strstr(out, "val accuracy"), "-H 0.1, then -r alone: resumed with -H 0.1 (exits %d %d)",
          rc, rc2);
    rc = run(out, OUT_LEN, "-d %s -r %s -n 3 -H 0.2 -o %s/h3.csv", data, hck, tmpdir);
    rc2 = run(out2, OUT_LEN, "-d %s -r %s -n 3 -o %s/h3.csv", data, hck, tmpdir);
    check(rc == 2 && strstr(out, "-H 0.2 contradicts the checkpoint") && strstr(out, "leave -H out") && rc2 == 0,
          "-H 0.2 against it: exit %d, \"%s\"; leaving -H out as it says: exit %d", rc,
          line_with(out, "error", msg, sizeof(msg)), rc2);
    // a version-1 checkpoint (no -H recorded) of that run: -r alone is refused with a message that
    // names -H; given the run's -H again, as the message says, it resumes
    size_t n2;
    uint8_t *v2 = read_all(hck, &n2);
    char v1path[600];
    snprintf(v1path, sizeof(v1path), "%s/holdout_v1.ckpt", tmpdir);
    size_t n1 = 0;
    uint8_t *v1 = v2 ? checkpoint_as_version1(v2, n2, &n1) : NULL;
    if (v1) {
        FILE *f = fopenCheck(v1path, "wb");
        fwriteCheck(v1, 1, n1, f, v1path);
        fcloseCheck(f, v1path);
        free(v1);
    }
    free(v2);
    rc = run(out, OUT_LEN, "-d %s -r %s -n 2 -o %s/h4.csv", data, v1path, tmpdir);
    rc2 = run(out2, OUT_LEN, "-d %s -r %s -n 2 -H 0.1 -o %s/h5.csv", data, v1path, tmpdir);
    check(rc == 2 && strstr(out, "with the -H of the run that wrote it") && rc2 == 0,
          "a version-1 checkpoint of a -H 0.1 run, -r alone: exit %d, \"%s\"; with -H 0.1 again: exit %d", rc,
          line_with(out, "error", msg, sizeof(msg)), rc2);
    // -p: one line on how each picture was prepared, and a warning on a flat one
    char flat[600], pic[600];
    snprintf(flat, sizeof(flat), "%s/flat.png", tmpdir);
    snprintf(pic, sizeof(pic), "%s/wide.png", tmpdir);
    uint8_t gray[16 * 8];
    memset(gray, 100, sizeof(gray));
    stbi_write_png(flat, 8, 8, 1, gray, 8);
    for (int i = 0; i < 16 * 8; i++) gray[i] = (uint8_t)(i * 2);
    stbi_write_png(pic, 16, 8, 1, gray, 16);
    rc = run(out, OUT_LEN, "-e %s -p %s -p %s", ck, flat, pic);
    check(rc == 0 && strstr(out, "flat.png: 8x8 gray -> 8x8 gray: used as it is") &&
              strstr(out, "warning: ") && strstr(out, "one flat value") &&
              strstr(out, "wide.png: 16x8 gray -> 8x8 gray: resized (aspect changed)"),
          "-p: how each picture was prepared, \"%s\", and \"%s\"", line_with(out, "wide.png: 16", msg, sizeof(msg)),
          line_with(out, "warning", out2, 300));
    // the divergence message reads as a sentence (no "%g%s%.3g" run together)
    // -h: exit codes, and every flag's default said once
    rc = run(out, OUT_LEN, "-h");
    int twice = 0;
    for (const char *l = out; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != 0)) {
        const char *d1 = strstr(l, "(default: ");
        twice |= d1 && d1 < l + strcspn(l, "\n") && strstr(d1 + 1, "(default: ") &&
                 strstr(d1 + 1, "(default: ") < l + strcspn(l, "\n");
    }
    check(rc == 0 && strstr(out, "Exit codes") && strstr(out, "129 SIGHUP") && strstr(out, "141 SIGPIPE") &&
              strstr(out, "143 SIGTERM") && !twice && strstr(out, "-F 0|1"),
          "-h lists the exit codes and -F, and says each default once");
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -b 10 -n 1 -o %s/one.csv", data, tmpdir);
    check(rc == 0 && strstr(out, "| 1 epoch |") && !strstr(out, "1 epochs"), "\"1 epoch\", not \"1 epochs\": \"%s\"",
          line_with(out, "final", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -r %s -b 7 -o %s/x.csv", data, ck, tmpdir);
    check(rc == 2 && strstr(out, "---> try: ./train_mlp") && strstr(out, " -h"),
          "a usage error's hint is a command that runs: \"%s\"", line_with(out, "error", msg, sizeof(msg)));

    // a machine without a GPU: the CPU trainer's command, the GPU trainers' own flags left out, runs
    char csv[600];
    snprintf(csv, sizeof(csv), "%s/no_gpu.csv", tmpdir);
    char *gpu_argv[] = {(char *)"./train_mlp", (char *)"-T", (char *)"1", (char *)"-d", data, (char *)"-m",
                        (char *)"64,8,4", (char *)"-n", (char *)"1", (char *)"-o", csv, NULL};
    char cmd[4096], dropped[64], line[5000];
    cpu_trainer_command(11, gpu_argv, cmd, sizeof(cmd), dropped, sizeof(dropped));
    char want[3000];
    snprintf(want, sizeof(want), "./train_mlp_cpu -d %s -m 64,8,4 -n 1 -o %s", data, csv);
    check(strcmp(cmd, want) == 0 && strcmp(dropped, "-T") == 0, "./train_mlp -T 1 ... without a GPU suggests \"%s\"",
          cmd);
    char abs_cpu[PATH_MAX];
    if (realpath(cpu_bin, abs_cpu)) {
        snprintf(line, sizeof(line), "'%s'%s >/dev/null 2>&1", abs_cpu, cmd + strlen("./train_mlp_cpu"));
        rc = system(line);
        check(rc == 0, "... and that command runs (exit %d)", rc);
    }

    // 15. what the flags pin down
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -n 1 -H 1 -o %s/x.csv", data, tmpdir);
    check(rc == 2 && strstr(out, "-H: 1 is not below 1: it would hold out the whole training set"), "-H 1: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -m 64,8,4 -b 10 -n 1 -H 0 -o %s/x.csv", data, tmpdir);
    check(rc == 0 && !strstr(out, "val ") && !strstr(out, "validation set") && strstr(out, "test accuracy"),
          "-H 0: no validation set (exit %d)", rc);
    rc = run(out, OUT_LEN, "-d %s -bx 64 -n 1 -o %s/x.csv", data, tmpdir);
    check(rc == 2 && strstr(out, "unexpected argument '-bx'"), "-bx 64: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    rc = run(out, OUT_LEN, "-d %s -m 64 -n 1 -o %s/x.csv", data, tmpdir);
    check(rc == 2 && strstr(out, "needs at least two sizes"), "-m 64: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));

    // -e reproduces the training run's final test loss and accuracy over several evaluation batches
    char big[600], bck[600];
    snprintf(big, sizeof(big), "%s/big", tmpdir);
    snprintf(bck, sizeof(bck), "%s/big.ckpt", tmpdir);
    make_data(big, 300, 2500);
    unlink(bck);
    rc = run(out, OUT_LEN, "-d %s -m 64,16,4 -b 10 -n 2 -c %s -o %s/big.csv", big, bck, tmpdir);
    rc2 = run(out2, OUT_LEN, "-e %s -d %s", bck, big);
    char acc[64] = "", loss[64] = "", acc2[64] = "", loss2[64] = "";
    const char *f = strstr(out, "final |"), *e = strstr(out2, "test loss ");
    if (f && strstr(f, "test accuracy ") && strstr(f, "test loss ")) {
        sscanf(strstr(f, "test accuracy ") + 14, "%63[0-9.]", acc);
        sscanf(strstr(f, "test loss ") + 10, "%63[0-9.]", loss);
    }
    if (e && strstr(e, "test accuracy ")) {
        sscanf(e + 10, "%63[0-9.]", loss2);
        sscanf(strstr(e, "test accuracy ") + 14, "%63[0-9.]", acc2);
    }
    check(rc == 0 && rc2 == 0 && acc[0] && loss[0] && strcmp(acc, acc2) == 0 && strcmp(loss, loss2) == 0,
          "-e on 2500 test images (3 evaluation batches): test loss %s, accuracy %s%%, as the run printed (%s, %s%%)",
          loss2, acc2, loss, acc);
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
        // the hint of a machine without a GPU, followed literally: the CPU trainer's command, which
        // must run (given a GPU trainer's own flag, it is left out of the command)
        const char *base = strrchr(bin, '/') ? strrchr(bin, '/') + 1 : bin;
        const char *own = strcmp(base, "train_mlp") == 0 ? "-T 1" : strcmp(base, "train_mlp_fast") == 0 ? "-x 1" : "";
        run(first, sizeof(first), "%s -d %s -m 64,8,4 -n 1 -o %s/hint.csv", own, data, tmpdir);
        const char *hint = strstr(first, "---> try: ./train_mlp_cpu ");
        char cmd[3000], abs_cpu[PATH_MAX];
        int rc = -1;
        if (hint && realpath(cpu_bin, abs_cpu)) {
            hint += strlen("---> try: ./train_mlp_cpu");
            snprintf(cmd, sizeof(cmd), "'%s'%.*s >/dev/null 2>&1", abs_cpu, (int)(strstr(hint, " (the CPU trainer") ?
                     strstr(hint, " (the CPU trainer") - hint : (long)strcspn(hint, "\n")), hint);
            rc = system(cmd);
        }
        check(hint && rc == 0, "%s %s without a GPU: its hint, followed literally, runs (exit %d): \"%.*s\"", bin, own,
              rc, (int)strcspn(first, "\n"), first);
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
    test_output_rule();
    test_endings();
    test_messages();
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (!getenv("KEEP_TMP") && system(cmd) != 0) printf("  (could not remove %s)\n", tmpdir);
    return test_exit();
}
