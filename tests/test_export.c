/*
Models that travel (run/export.h, run/safetensors.h, run/onnx.h), through a trainer's binary and
checked with the real libraries (tests/export_check.py: safetensors, onnx, onnxruntime; PyTorch
where it is installed):
  1. models trained on the generated IDX, CIFAR-format and image-folder datasets, every activation,
     exported with -e CK -E FILE (.safetensors with -K 1, and .onnx) with no dataset and no
     evaluation; the safetensors file read back bitwise (parameters and momentum) with its
     metadata; then numpy's forward pass from the safetensors tensors and ONNX Runtime's from the
     ONNX graph (onnx.checker.check_model passes) against this program's logits on the same
     pictures: max |dlogit| <= 1e-5 max |logit|, the same top-1 class except at near-ties, the
     probabilities softmax's; and -e of the safetensors export counts the checkpoint's right answers,
     and -p of a picture prints the checkpoint's top 3;
  2. safetensors files written the way PyTorch writes them (an nn.Flatten first: 1.weight,
     3.weight, ...; float16 and no metadata; bfloat16 made here) evaluate to the same answers, say
     which dtypes they widened and that the scale is taken as 1/255, refuse to guess the
     activation, and -r FILE.safetensors starts a new run at epoch 1 from their weights;
  3. bad safetensors files: each refused with its own one-line message (truncated, trailing bytes,
     overlapping and gapped offsets, dtypes, shapes, names, bad JSON and UTF-8, NaN, metadata
     against the tensors), and through the binary with one line and exit 1;
  4. -E and -K's flag errors, and -c naming a .safetensors file (exit 2);
  5. the PyTorch and ONNX Runtime snippets of doc/checkpoint.md, run as they are printed;
  6. with PyTorch: the export loaded into nn.Sequential with load_state_dict(strict=True), and a
     model trained in PyTorch, evaluated and fine-tuned by the trainer.
The Python side runs with MLP_PYTHON, else .venv/bin/python3 (what .ci/run makes), else python3.
Without safetensors, onnx and onnxruntime there, its checks are skipped with a line saying how to
install them, except under CI (CI set), where that is a failure. Without PyTorch, 6 and the PyTorch
snippet are skipped.
Usage: tests/bin/test_export [TRAINER]   (default ./train_mlp_cpu; KEEP_TMP=1 keeps the temporary
       directory)
*/
#define TESTING
#include "../train_mlp_cpu.c"
#include "check.h"
#include "fixtures.h"  // make_data, write_cifar_and_folder, line_with

static char tmpdir[256], idx_dir[300], cifar_dir[300], folder_dir[300];
static const char *bin = "./train_mlp_cpu";
static char python[1100];
static int have_libs, have_torch;

#define OUT_LEN (1 << 16)
static char out[OUT_LEN], out2[OUT_LEN];

// ----------------------------------------------------------------------------
// helpers

// Runs a shell command, its output (stdout and stderr) into out; returns its exit status
static int shell(char *o, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int shell(char *o, size_t n, const char *fmt, ...) {
    char cmd[4000], path[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(path, sizeof(path), "%s/shell.txt", tmpdir);
    return shell_capture(cmd, path, o, n);
}

// the right answers of -e's report: "test accuracy 93.00% (93 of 100)" -> 93; -1 when absent
static int right_answers(const char *text) {
    const char *p = strstr(text, "test accuracy ");
    p = p ? strchr(p, '(') : NULL;
    return p ? atoi(p + 1) : -1;
}

static int count_lines(const char *text) {
    int n = 0;
    for (const char *p = text; *p; p++) n += *p == '\n';
    return n;
}

static float *read_floats(const char *path, size_t want) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    float *p = (float *)mallocCheck(want * sizeof(float) + 4);
    size_t got = fread(p, sizeof(float), want + 1, f);
    fclose(f);
    if (got != want) {
        free(p);
        return NULL;
    }
    return p;
}

static uint8_t *read_file_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    *n = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = (uint8_t *)mallocCheck((size_t)len + 1);
    *n = fread(p, 1, (size_t)len, f);
    fclose(f);
    return p;
}

static void write_file_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopenCheck(path, "wb");
    fwriteCheck(p, 1, n, f, path);
    fcloseCheck(f, path);
}

// got (n, C) against want (n, C): max |got - want| <= 1e-5 max |want|, and the same top-1 class
// except where want's two best are within that bound of each other (a near-tie)
static void compare_logits(const char *what, const float *got, const float *want, int n, int C) {
    if (!got) {
        check(0, "%s: no logits came back", what);
        return;
    }
    double maxw = 0, maxd = 0;
    for (size_t i = 0; i < (size_t)n * C; i++) {
        maxw = fmax(maxw, fabs(want[i]));
        double d = fabs((double)got[i] - want[i]);
        maxd = isfinite(got[i]) ? fmax(maxd, d) : INFINITY;
    }
    int differ = 0, ties = 0;
    for (int b = 0; b < n; b++) {
        const float *g = got + (size_t)b * C, *w = want + (size_t)b * C;
        int bg = 0, bw = 0;
        for (int c = 1; c < C; c++) bg = g[c] > g[bg] ? c : bg, bw = w[c] > w[bw] ? c : bw;
        if (bg != bw) {
            if (fabs(w[bg] - w[bw]) <= 2e-5 * maxw) ties++;
            else differ++;
        }
    }
    check(maxd <= 1e-5 * maxw && differ == 0, "%s: max |dlogit| %.3g (bound %.3g = 1e-5 x max |logit|), top-1 the same "
          "for %d of %d (%d near-ties)", what, maxd, 1e-5 * maxw, n - differ - ties, n, ties);
}

// ----------------------------------------------------------------------------
// 1. exports of trained models

typedef struct {
    const char *name, *dir, *sizes, *act;
} Case;

static float *our_logits;  // case 0's, for the snippets
static int case0_n, case0_C;

static void test_case(int k, const Case *t) {
    char d[600], ck[700], msg[512], err[2048];
    snprintf(d, sizeof(d), "%s/case%d", tmpdir, k);
    mkdir(d, 0777);
    snprintf(ck, sizeof(ck), "%s/ck.ckpt", d);
    section(t->name);
    int rc = shell(out, OUT_LEN, "%s -d %s -m %s -a %s -b 10 -n 2 -c %s -o %s/train.csv", bin, t->dir, t->sizes, t->act,
                   ck, d);
    if (!check(rc == 0, "trained %s %s on %s: exit %d", t->sizes, t->act, t->dir, rc)) return;
    rc = shell(out, OUT_LEN, "%s -e %s -E %s/model.safetensors -K 1", bin, ck, d);
    check(rc == 0 && strstr(out, "exported") && !strstr(out, "test accuracy"),
          "-e CK -E model.safetensors -K 1, no -d: exit %d, no evaluation, \"%s\"", rc, line_with(out, "exported", msg, sizeof(msg)));
    rc = shell(out, OUT_LEN, "%s -e %s -E %s/model.onnx", bin, ck, d);
    check(rc == 0 && strstr(out, "exported") && !strstr(out, "test accuracy"), "-e CK -E model.onnx: exit %d, \"%s\"", rc,
          line_with(out, "exported", msg, sizeof(msg)));

    // the safetensors file read back: the same parameters and momentum, bit for bit, and the metadata
    Checkpoint c, s;
    SafetensorsInfo info;
    char st[700];
    snprintf(st, sizeof(st), "%s/model.safetensors", d);
    if (!check(checkpoint_read(ck, &c, err, sizeof(err)) == 0, "the checkpoint reads back")) return;
    if (check(safetensors_read(st, &s, &info, err, sizeof(err)) == 0, "the safetensors export reads back: %s",
              s.params ? "yes" : err)) {
        const CheckpointMeta *a = &c.meta, *b = &s.meta;
        size_t P = (size_t)a->num_params;
        int same = b->L == a->L && b->num_params == a->num_params && b->act == a->act && info.have_act &&
                   info.have_momentum && info.have_classes && info.have_input && info.have_scale &&
                   memcmp(s.params, c.params, P * 4) == 0 && memcmp(s.mbuf, c.mbuf, P * 4) == 0 &&
                   b->channels == a->channels && b->rows == a->rows && b->cols == a->cols && b->planar == a->planar &&
                   b->data_kind == a->data_kind && strcmp(b->dataset_name, a->dataset_name) == 0 &&
                   b->input_scale == a->input_scale && b->input_offset == a->input_offset &&
                   memcmp(b->class_names, a->class_names, sizeof(a->class_names)) == 0;
        check(same, "... its %zu parameters and momentum bitwise equal to the checkpoint's; sizes, activation, input "
              "%d,%d,%d, classes, scale and dataset (%s) in its metadata", P, b->channels, b->rows, b->cols, b->dataset_name);
        checkpoint_free(&s);
    }

    // this program's logits for the test set's first pictures
    Dataset tr, te;
    if (!check(dataset_load_both(t->dir, &tr, &te, err, sizeof(err)) == 0, "the dataset loads")) return;
    const int D = c.meta.sizes[0], C = c.meta.sizes[c.meta.L], n = te.n < 100 ? te.n : 100;
    ModelCPU m;
    model_build_cpu(&m, c.meta.sizes, c.meta.L, c.meta.act, n);
    for (size_t i = 0; i < m.num_params; i++) m.params[i] = c.params[i];
    gather_batch_cpu(m.acts[0], m.labels, te.images, te.labels, NULL, 0, n, D);
    model_forward_cpu(&m, n);
    float *logits = (float *)mallocCheck((size_t)n * C * sizeof(float));
    for (size_t i = 0; i < (size_t)n * C; i++) logits[i] = m.acts[m.L][i];
    char path[800];
    snprintf(path, sizeof(path), "%s/pixels.u8", d);
    write_file_bytes(path, te.images, (size_t)n * D);
    snprintf(path, sizeof(path), "%s/train.u8", d);
    write_file_bytes(path, tr.images, (size_t)tr.n * D);
    snprintf(path, sizeof(path), "%s/train_labels.u8", d);
    write_file_bytes(path, tr.labels, (size_t)tr.n);
    snprintf(path, sizeof(path), "%s/shape.json", d);
    FILE *f = fopenCheck(path, "w");
    fprintf(f, "{\"n\": %d, \"d\": %d, \"classes_n\": %d, \"activation\": \"%s\", \"classes\": [", n, D, C, t->act);
    for (int q = 0; q < C; q++) fprintf(f, "%s\"%s\"", q ? ", " : "", c.meta.class_names[q]);
    fprintf(f, "]}\n");
    fcloseCheck(f, path);

    // -e of the export counts the checkpoint's right answers
    rc = shell(out, OUT_LEN, "%s -e %s -d %s", bin, ck, t->dir);
    int rc2 = shell(out2, OUT_LEN, "%s -e %s -d %s", bin, st, t->dir);
    check(rc == 0 && rc2 == 0 && right_answers(out) >= 0 && right_answers(out) == right_answers(out2),
          "-e model.safetensors -d: %d right answers, the checkpoint's %d", right_answers(out2), right_answers(out));
    if (te.channels == 1) {  // -p of a test picture: the same line from the export as from the checkpoint
        snprintf(path, sizeof(path), "%s/pic.png", d);
        stbi_write_png(path, te.cols, te.rows, 1, te.images, te.cols);
        rc = shell(out, OUT_LEN, "%s -e %s -p %s", bin, ck, path);
        rc2 = shell(out2, OUT_LEN, "%s -e %s -p %s", bin, st, path);
        char l1[512], l2[512];
        line_with(out, "pic.png: 1.", l1, sizeof(l1));
        line_with(out2, "pic.png: 1.", l2, sizeof(l2));
        check(rc == 0 && rc2 == 0 && strstr(out, "pic.png: 1.") && strcmp(l1, l2) == 0,
              "-p of a test picture: the export's top 3 are the checkpoint's: \"%s\"", l2);
    }

    // the libraries' numbers
    if (have_libs) {
        rc = shell(out, OUT_LEN, "%s tests/export_check.py check %s", python, d);
        check(rc == 0, "export_check.py check: exit %d: %s", rc, rc == 0 ? line_with(out, "onnx:", msg, sizeof(msg)) : out);
        float *a = NULL, *b = NULL, *p = NULL;
        if (rc == 0) {
            snprintf(path, sizeof(path), "%s/st_logits.f32", d);
            a = read_floats(path, (size_t)n * C);
            snprintf(path, sizeof(path), "%s/ort_logits.f32", d);
            b = read_floats(path, (size_t)n * C);
            snprintf(path, sizeof(path), "%s/ort_probs.f32", d);
            p = read_floats(path, (size_t)n * C);
            compare_logits("numpy from the safetensors tensors and metadata", a, logits, n, C);
            compare_logits("ONNX Runtime's logits", b, logits, n, C);
            double worst = p ? 0 : INFINITY;
            for (int r = 0; p && r < n; r++) {
                float probs[MAX_CLASSES];
                softmax_probs(logits + (size_t)r * C, C, probs);
                for (int q = 0; q < C; q++) worst = fmax(worst, fabs(probs[q] - p[(size_t)r * C + q]));
            }
            check(worst <= 1e-5, "ONNX Runtime's probabilities: softmax of the logits within %.2g (1e-5)", worst);
        }
        free(a);
        free(b);
        free(p);
        if (have_torch) {
            rc = shell(out, OUT_LEN, "%s tests/export_check.py torch %s", python, d);
            check(rc == 0, "PyTorch: export_check.py torch: exit %d%s%s", rc, rc ? ": " : "", rc ? out : "");
            snprintf(path, sizeof(path), "%s/torch_logits.f32", d);
            float *z = read_floats(path, (size_t)n * C);
            compare_logits("PyTorch's nn.Sequential with load_state_dict(strict=True) of the export", z, logits, n, C);
            free(z);
        }
    }
    if (k == 0) {
        our_logits = logits;
        case0_n = n;
        case0_C = C;
    } else {
        free(logits);
    }
    model_free_cpu(&m);
    checkpoint_free(&c);
    dataset_free(&tr);
    dataset_free(&te);
}

// ----------------------------------------------------------------------------
// 2. files made the way PyTorch makes them

// A safetensors file of case 0's model (64,16,4) in BF16, names shifted by an nn.Flatten, and
// metadata of only an activation, written here byte by byte
static void write_bf16(const char *path, const Checkpoint *c) {
    const CheckpointMeta *m = &c->meta;
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS], off = 0;
    param_layout(m->sizes, m->L, w_off, b_off);
    StText h = {0};
    st_text_printf(&h, "{\"__metadata__\":{\"activation\":\"%s\"}", ACT_NAMES[m->act]);
    for (int l = 0; l < m->L; l++) {
        size_t nw = (size_t)m->sizes[l + 1] * m->sizes[l], nb = (size_t)m->sizes[l + 1];
        st_text_printf(&h, ",\"%d.weight\":{\"dtype\":\"BF16\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}", 2 * l + 1,
                       m->sizes[l + 1], m->sizes[l], off, off + 2 * nw);
        off += 2 * nw;
        st_text_printf(&h, ",\"%d.bias\":{\"dtype\":\"BF16\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}", 2 * l + 1,
                       m->sizes[l + 1], off, off + 2 * nb);
        off += 2 * nb;
    }
    st_text_put(&h, "}", 1);
    FILE *f = fopenCheck(path, "wb");
    uint8_t len8[8];
    ck_put_u64(len8, h.n);
    fwriteCheck(len8, 1, 8, f, path);
    fwriteCheck(h.p, 1, h.n, f, path);
    for (size_t i = 0; i < m->num_params; i++) {  // round to nearest even
        uint32_t u;
        memcpy(&u, &c->params[i], 4);
        u += 0x7fff + ((u >> 16) & 1);
        uint8_t b[2] = {(uint8_t)(u >> 16), (uint8_t)(u >> 24)};
        fwriteCheck(b, 1, 2, f, path);
    }
    fcloseCheck(f, path);
    free(h.p);
}

static void test_pytorch_files(void) {
    section("safetensors files as PyTorch writes them, into the trainer");
    char d[600], ck[700], msg[512], err[2048];
    snprintf(d, sizeof(d), "%s/case0", tmpdir);
    snprintf(ck, sizeof(ck), "%s/ck.ckpt", d);
    int rc = shell(out, OUT_LEN, "%s -e %s -d %s", bin, ck, idx_dir);
    int want = right_answers(out);
    Checkpoint c;
    if (!check(rc == 0 && want > 0 && checkpoint_read(ck, &c, err, sizeof(err)) == 0, "case 0's checkpoint: %d right",
               want))
        return;
    char bf[700];
    snprintf(bf, sizeof(bf), "%s/bf16.safetensors", d);
    write_bf16(bf, &c);
    rc = shell(out, OUT_LEN, "%s -e %s -d %s", bin, bf, idx_dir);
    check(rc == 0 && strstr(out, "BF16 tensors widened to float32") && strstr(out, "(its metadata)") &&
              strstr(out, "no scale") && abs(right_answers(out) - want) <= 3,
          "BF16, indices 1 and 3, metadata of an activation only: exit %d, %d right (float32: %d), \"%s\"", rc,
          right_answers(out), want, line_with(out, "safetensors model", msg, sizeof(msg)));
    checkpoint_free(&c);
    if (!have_libs) {
        skip("files written by safetensors.numpy or .torch: the Python libraries are not here");
        return;
    }
    rc = shell(out, OUT_LEN, "%s tests/export_check.py write-pt %s", python, d);
    if (!check(rc == 0, "export_check.py write-pt: exit %d: %s", rc, out)) return;
    printf("  (%s)\n", line_with(out, "write-pt", msg, sizeof(msg)));
    rc = shell(out, OUT_LEN, "%s -e %s/pt.safetensors -d %s", bin, d, idx_dir);
    check(rc == 0 && right_answers(out) == want && strstr(out, "F32;") && strstr(out, "no scale"),
          "save_file(state_dict, metadata={activation, classes}), 1.weight ...: exit %d, %d right (the checkpoint's %d), "
          "\"%s\"", rc, right_answers(out), want, line_with(out, "note", msg, sizeof(msg)));
    rc = shell(out, OUT_LEN, "%s -e %s/pt16.safetensors -d %s", bin, d, idx_dir);
    check(rc == 1 && count_lines(out) == 1 && strstr(out, "no -a"), "float16, no metadata, no -a: refused, exit %d, \"%s\"",
          rc, line_with(out, "error", msg, sizeof(msg)));
    rc = shell(out, OUT_LEN, "%s -e %s/pt16.safetensors -d %s -a sigmoid", bin, d, idx_dir);
    check(rc == 0 && strstr(out, "F16 tensors widened") && strstr(out, "(-a)") && abs(right_answers(out) - want) <= 2,
          "... with -a sigmoid: exit %d, %d right, \"%s\"", rc, right_answers(out), line_with(out, "F16", msg, sizeof(msg)));
    rc = shell(out, OUT_LEN, "%s -e %s/pt.safetensors -d %s -a relu", bin, d, idx_dir);
    check(rc == 2 && strstr(out, "contradicts"), "-a relu against its metadata's sigmoid: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
    rc = shell(out, OUT_LEN, "%s -r %s/pt.safetensors -d %s -b 10 -n 1 -c %s/ft.ckpt -o %s/ft.csv", bin, d, idx_dir, d, d);
    Checkpoint ft;
    char ftpath[700];
    snprintf(ftpath, sizeof(ftpath), "%s/ft.ckpt", d);
    int ok = rc == 0 && strstr(out, "a new run from the weights") && strstr(out, "epoch 1 done") &&
             checkpoint_read(ftpath, &ft, err, sizeof(err)) == 0;
    check(ok && ft.meta.epochs_done == 1 && ft.meta.steps_total == 20, "-r pt.safetensors -n 1: exit %d, a new run of "
          "one epoch (%llu steps)", rc, ok ? (unsigned long long)ft.meta.steps_total : 0ULL);
    if (ok) checkpoint_free(&ft);
    if (!have_torch) {
        skip("a model trained in PyTorch, fine-tuned here: PyTorch is not installed (the GPU machine has it)");
        return;
    }
    // export_check.py torch (run in test_case 0) trained one and saved it with safetensors.torch
    size_t n;
    char path[800];
    snprintf(path, sizeof(path), "%s/torch_pred.u8", d);
    uint8_t *pred = read_file_bytes(path, &n);
    Dataset tr, te;
    if (!pred || dataset_load_both(idx_dir, &tr, &te, err, sizeof(err)) != 0) {
        check(0, "PyTorch's model: its predictions and the dataset");
        free(pred);
        return;
    }
    int torch_right = 0;
    for (size_t i = 0; i < n && i < (size_t)te.n; i++) torch_right += pred[i] == te.labels[i];
    rc = shell(out, OUT_LEN, "%s -e %s/torch.safetensors -d %s", bin, d, idx_dir);
    int ours = right_answers(out);
    check(rc == 0 && (size_t)te.n <= 100 && abs(ours - torch_right) <= 1,
          "a model trained in PyTorch (Flatten, Linear, Tanh, Linear): -e gets %d right, PyTorch %d", ours, torch_right);
    rc = shell(out, OUT_LEN, "%s -r %s/torch.safetensors -d %s -b 10 -n 2 -o %s/tft.csv", bin, d, idx_dir, d);
    check(rc == 0 && strstr(out, "epoch 2 done"), "... and fine-tuned here for 2 epochs: exit %d, \"%s\"", rc,
          line_with(out, "final |", msg, sizeof(msg)));
    free(pred);
    dataset_free(&tr);
    dataset_free(&te);
}

// ----------------------------------------------------------------------------
// 3. bad files

// a small model's file: 3 inputs, 2 hidden, 2 classes, F32, its header from pieces
static size_t bad_file(uint8_t *buf, const char *header, const float *values, size_t nvalues, size_t extra) {
    size_t h = strlen(header);
    ck_put_u64(buf, h);
    memcpy(buf + 8, header, h);
    memcpy(buf + 8 + h, values, nvalues * 4);
    memset(buf + 8 + h + nvalues * 4, 0, extra);
    return 8 + h + nvalues * 4 + extra;
}

static void test_bad_files(void) {
    section("bad safetensors files: each its own message");
    // 0.weight (2,3) 24 bytes, 0.bias (2) 8, 2.weight (2,2) 16, 2.bias (2) 8: 56 bytes
    const char *good = "{\"__metadata__\":{\"activation\":\"relu\",\"sizes\":\"3,2,2\"},"
                       "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                       "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
                       "\"2.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[32,48]},"
                       "\"2.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[48,56]}}";
    float v[14];
    for (int i = 0; i < 14; i++) v[i] = 0.1f * (float)(i - 7);
    static uint8_t buf[4096];
    char err[2048];
    SafetensorsInfo info;
    float params[14], mbuf[14];
    size_t n = bad_file(buf, good, v, 14, 0);
    int rc = safetensors_parse(buf, n, &info, err, sizeof(err));
    rc = rc ? rc : safetensors_copy(buf, &info, params, mbuf, err, sizeof(err));
    check(rc == 0 && info.meta.L == 2 && info.meta.act == ACT_RELU && memcmp(params, v, sizeof(v)) == 0,
          "the good file: 3,2,2 relu, its values in place: %s", rc ? err : "yes");
    struct {
        const char *what, *from, *to;
        size_t cut, extra;
        int nan;
        const char *needle;
    } bad[] = {
        {"truncated by 4 bytes", NULL, NULL, 4, 0, 0, "truncated"},
        {"4 bytes after the last tensor", NULL, NULL, 0, 4, 0, "bytes after the last tensor"},
        {"overlapping offsets", "[24,32]}", "[20,28]}", 0, 0, 0, "overlap"},
        {"a gap between tensors", "\"data_offsets\":[32,48]", "\"data_offsets\":[36,52]", 0, 4, 0, "gap"},
        {"dtype F64", "\"F32\",\"shape\":[2]", "\"F64\",\"shape\":[2]", 0, 0, 0, "dtype F64"},
        {"a shape against its bytes", "[2,2],\"data", "[2,3],\"data", 0, 0, 0, "hold 16 bytes"},
        {"a weight of 3 dimensions", "[2,3]", "[2,3,1]", 0, 0, 0, "not a list of 1 or 2 sizes"},
        {"layers that do not chain", "[2,2],\"data_offsets\":[32,48]},\"2.bias\":{\"dtype\":\"F32\",\"shape\":[2],"
         "\"data_offsets\":[48,56]", "[1,4],\"data_offsets\":[32,48]},\"2.bias\":{\"dtype\":\"F32\",\"shape\":[1],"
         "\"data_offsets\":[48,52]", 4, 0, 0, "takes 4 inputs"},
        {"a bias whose size is not the weight's", "\"shape\":[2],\"data_offsets\":[48", "\"shape\":[1],\"data_offsets\":[48",
         0, 0, 0, "hold 8 bytes"},
        {"bad JSON: a missing quote", "\"0.bias\"", "\"0.bias", 0, 0, 0, "bad JSON"},
        {"bad JSON: a trailing comma", "[0,24]}", "[0,24],}", 0, 0, 0, "bad JSON"},
        {"a name that is not UTF-8", "\"2.bias\":{", "\"2.\xff\":{", 0, 0, 0, "UTF-8"},
        {"a tensor given twice", "\"2.bias\":{", "\"0.bias\":{", 0, 0, 0, "given twice"},
        {"an unexpected tensor", "\"2.bias\":{", "\"fc.bias\":{", 0, 0, 0, "unexpected tensor"},
        {"a layer without its bias", "\"2.bias\":{", "\"4.bias\":{", 0, 0, 0, "no 2.bias"},
        {"a NaN", NULL, NULL, 0, 0, 1, "NaN"},
        {"metadata sizes against the shapes", "\"3,2,2\"", "\"3,2,3\"", 0, 0, 0, "shapes make 3,2,2"},
        {"a metadata value that is not a string", "\"relu\",", "1,", 0, 0, 0, "not a string"},
        {"an unknown activation", "\"relu\"", "\"gelu\"", 0, 0, 0, "not sigmoid, relu or tanh"},
        {"classes of the wrong count", "\"sizes\"", "\"classes\":\"[\\\"a\\\"]\",\"sizes\"", 0, 0, 0, "list of 2 names"},
        {"an input of another size", "\"sizes\"", "\"input\":\"1,2,2,planar\",\"sizes\"", 0, 0, 0, "model's 3 inputs"},
        {"an entry with an extra key", "\"dtype\":\"F32\",\"shape\":[2,3]", "\"dtype\":\"F32\",\"x\":1,\"shape\":[2,3]", 0, 0, 0,
         "unexpected key"},
        {"negative offsets", "[0,24]", "[-1,24]", 0, 0, 0, "data_offsets is not"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char header[2048];
        snprintf(header, sizeof(header), "%s", good);
        if (bad[i].from) {
            char *p = strstr(header, bad[i].from);
            if (!p) {
                check(0, "%s: the test's pattern %s", bad[i].what, bad[i].from);
                continue;
            }
            char rest[2048];
            snprintf(rest, sizeof(rest), "%s", p + strlen(bad[i].from));
            snprintf(p, sizeof(header) - (size_t)(p - header), "%s%s", bad[i].to, rest);
        }
        float w[14];
        memcpy(w, v, sizeof(v));
        if (bad[i].nan) w[9] = NAN;
        n = bad_file(buf, header, w, 14, bad[i].extra) - bad[i].cut;
        rc = safetensors_parse(buf, n, &info, err, sizeof(err));
        if (rc == 0) rc = safetensors_copy(buf, &info, params, mbuf, err, sizeof(err));
        check(rc != 0 && strstr(err, bad[i].needle), "%s -> \"%s\"", bad[i].what, rc ? err : "(accepted)");
    }
    // the first bytes
    uint8_t small[16] = {0};
    check(safetensors_parse(small, 5, &info, err, sizeof(err)) != 0 && strstr(err, "fewer than its 8-byte"),
          "5 bytes -> \"%s\"", err);
    ck_put_u64(small, 1000);
    small[8] = '{';
    check(safetensors_parse(small, 16, &info, err, sizeof(err)) != 0 && strstr(err, "truncated"),
          "a header longer than the file -> \"%s\"", err);
    ck_put_u64(small, (uint64_t)1 << 40);
    check(safetensors_parse(small, 16, &info, err, sizeof(err)) != 0 && strstr(err, "header length"),
          "a header length of 2^40 -> \"%s\"", err);
    memcpy(small, CK_MAGIC, 8);
    check(safetensors_parse(small, 16, &info, err, sizeof(err)) != 0 && strstr(err, "an mlp.cu checkpoint"),
          "one of our checkpoints -> \"%s\"", err);

    // through the binary: one line, exit 1
    char path[600], msg[512];
    snprintf(path, sizeof(path), "%s/bad.safetensors", tmpdir);
    float w[14];
    memcpy(w, v, sizeof(v));
    w[0] = INFINITY;
    write_file_bytes(path, buf, bad_file(buf, good, w, 14, 0));
    rc = shell(out, OUT_LEN, "%s -e %s -d %s", bin, path, idx_dir);
    check(rc == 1 && count_lines(out) == 1 && strstr(out, "an infinity"), "-e bad.safetensors (an infinity): exit %d, "
          "one line: \"%s\"", rc, line_with(out, "error", msg, sizeof(msg)));
    rc = shell(out, OUT_LEN, "%s -r %s -d %s", bin, path, idx_dir);
    check(rc == 1 && count_lines(out) == 1, "-r bad.safetensors: exit %d, one line", rc);
    snprintf(path, sizeof(path), "%s/missing.safetensors", tmpdir);
    rc = shell(out, OUT_LEN, "%s -e %s", bin, path);
    check(rc == 1 && count_lines(out) == 1 && strstr(out, "no such file"), "-e missing.safetensors: exit %d, \"%s\"", rc,
          line_with(out, "error", msg, sizeof(msg)));
}

// ----------------------------------------------------------------------------
// 4. the flags

static void test_flags(void) {
    section("-E, -K, and -c of a .safetensors name: flag errors, exit 2");
    char ck[600], msg[512];
    snprintf(ck, sizeof(ck), "%s/case0/ck.ckpt", tmpdir);
    // (each command's file names: ck, then tmpdir as often as the format asks)
    struct {
        const char *what, *args;
    } bad[] = {
        {"-E without -e", "-E %1$s.onnx"},
        {"-E of another extension", "-e %1$s -E %2$s/x.pt"},
        {"-K 1 with an ONNX export", "-e %1$s -E %2$s/x.onnx -K 1"},
        {"-K 1 without -E", "-e %1$s -K 1"},
        {"-E over -e's own file", "-e %1$s -e %2$s/case0/model.safetensors -E %2$s/case0/model.safetensors"},
        {"-E into the data directory", "-e %1$s -d %2$s/idx -E %2$s/idx/x.onnx"},
        {"-c naming a .safetensors file", "-d %2$s/idx -c %1$s.safetensors"},
        {"-E over a file of another kind (the user's notes)", "-e %1$s -E %2$s/notes.onnx"},
    };
    char notes[700];   // an existing file that is not an export: -E leaves it alone, unless -F 1
    snprintf(notes, sizeof(notes), "%s/notes.onnx", tmpdir);
    FILE *f = fopenCheck(notes, "w");
    fputs("my notes\n", f);
    fcloseCheck(f, notes);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char args[2000];
        snprintf(args, sizeof(args), bad[i].args, ck, tmpdir);
        int rc = shell(out, OUT_LEN, "%s %s", bin, args);
        check(rc == 2 && count_lines(out) == 1, "%s: exit %d, \"%s\"", bad[i].what, rc, line_with(out, "error", msg, sizeof(msg)));
    }
    f = fopenCheck(notes, "rb");
    const int kept = fgetc(f) == 'm';
    fcloseCheck(f, notes);
    int rc = shell(out, OUT_LEN, "%s -e %s -E %s -F 1", bin, ck, notes);
    f = fopenCheck(notes, "rb");
    const int replaced = fgetc(f) == 0x08;   // an ONNX ModelProto opens with field 1, ir_version
    fcloseCheck(f, notes);
    check(kept && rc == 0 && replaced, "the notes were kept, and -F 1 replaced them with the export (exit %d)", rc);
}

// ----------------------------------------------------------------------------
// 5. the snippets of doc/checkpoint.md

static void test_snippets(void) {
    section("the snippets of doc/checkpoint.md, as printed");
    if (!have_libs || !our_logits) {
        skip("the ONNX Runtime snippet: the Python libraries are not here");
        skip("the PyTorch snippet: the Python libraries are not here");
        return;
    }
    char d[600], path[800];
    snprintf(d, sizeof(d), "%s/case0", tmpdir);
    char cmd[2000];
    snprintf(cmd, sizeof(cmd), "cp %s/pixels.u8 %s/pictures.u8", d, d);
    if (system(cmd) != 0) check(0, "%s", cmd);
    const char *names[2] = {"onnx", "pytorch"};
    for (int i = 0; i < 2; i++) {
        if (i == 1 && !have_torch) {
            skip("the PyTorch snippet: PyTorch is not installed (the GPU machine has it)");
            continue;
        }
        snprintf(path, sizeof(path), "%s/snippet_logits.f32", d);
        remove(path);
        int rc = shell(out, OUT_LEN, "%s tests/export_check.py snippet %s %s", python, d, names[i]);
        printf("%s", out);
        check(rc == 0, "the %s snippet ran: exit %d", names[i], rc);
        float *z = read_floats(path, (size_t)case0_n * case0_C);
        compare_logits(i ? "the PyTorch snippet's model" : "the ONNX Runtime snippet's logits", z, our_logits, case0_n, case0_C);
        free(z);
    }
}

// ----------------------------------------------------------------------------

static void find_python(void) {
    const char *env = getenv("MLP_PYTHON");
    snprintf(python, sizeof(python), "%s", env && env[0] ? env : access(".venv/bin/python3", X_OK) == 0 ? ".venv/bin/python3" : "python3");
    char o[4096];
    have_libs = shell(o, sizeof(o), "%s -c 'import numpy, safetensors, onnx, onnxruntime'", python) == 0;
    have_torch = have_libs && shell(o, sizeof(o), "%s -c 'import torch, safetensors.torch'", python) == 0;
    section("the Python side");
    const char *ci = getenv("CI");
    if (have_libs) check(1, "%s has numpy, safetensors, onnx and onnxruntime%s", python, have_torch ? ", and PyTorch" : "");
    else if (ci && ci[0])
        check(0, "CI is set but %s lacks numpy, safetensors, onnx or onnxruntime (.ci/run installs them in .venv)", python);
    else
        skip("%s lacks numpy, safetensors, onnx or onnxruntime: the library checks are skipped ---> try: python3 -m venv "
             "--system-site-packages .venv && .venv/bin/pip install numpy safetensors onnx onnxruntime", python);
}

int main(int argc, char **argv) {
    if (argc > 1) bin = argv[1];
    if (access(bin, X_OK) != 0) {
        printf("error: %s is not built ---> try: make train_cpu\n", bin);
        check(0, "%s exists", bin);
        return test_exit();
    }
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/mlp_test_export_XXXXXX");
    if (!mkdtemp(tmpdir)) die("check /tmp", "cannot create a temporary directory");
    snprintf(idx_dir, sizeof(idx_dir), "%s/idx", tmpdir);
    snprintf(cifar_dir, sizeof(cifar_dir), "%s/cifar", tmpdir);
    snprintf(folder_dir, sizeof(folder_dir), "%s/folder", tmpdir);
    make_data(idx_dir, 200, 100);
    write_cifar_and_folder(idx_dir, cifar_dir, folder_dir);
    find_python();
    const Case cases[] = {
        {"IDX, 64,16,4 sigmoid", idx_dir, "64,16,4", "sigmoid"},
        {"IDX, 64,16,12,4 relu", idx_dir, "64,16,12,4", "relu"},
        {"IDX, 64,16,4 tanh", idx_dir, "64,16,4", "tanh"},
        {"CIFAR-10 format, 3072,16,10 relu", cifar_dir, "3072,16,10", "relu"},
        {"an image folder, 64,16,4 tanh", folder_dir, "64,16,4", "tanh"},
    };
    for (int k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) test_case(k, &cases[k]);
    test_pytorch_files();
    test_bad_files();
    test_flags();
    test_snippets();
    free(our_logits);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
    if (!getenv("KEEP_TMP") && system(cmd) != 0) printf("  (could not remove %s)\n", tmpdir);
    return test_exit();
}
