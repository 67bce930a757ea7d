/*
run/export.h: models that travel. What -e, -r and -E do with the standard formats, for the three
trainers alike (run/use.h and run/run.h call it in a line each):

    -e CK -E FILE.safetensors [-K 1]   write the model (and with -K 1 its momentum buffers) as
                                       safetensors (run/safetensors.h): PyTorch, Hugging Face
    -e CK -E FILE.onnx                 write the model as an ONNX graph (run/onnx.h)
    -e FILE.safetensors                evaluate, predict with (-p), export (-E) a safetensors model,
                                       ours or PyTorch's (save_file(model.state_dict(), ...))
    -r FILE.safetensors                start a new run (epoch 1) from its weights: fine-tuning

An export needs no dataset: without -d (and -p, -i) the program exits after writing it.

A safetensors file says less than a checkpoint. Its sizes come from the tensors' shapes; its
activation from its metadata, else from -a (never the default: a model read with the wrong
activation gives wrong answers without a word, so it is refused instead); its scale, when its
metadata has none, is 1/255 (said in a note). Its input shape and class names, when its metadata
has none, come from the dataset of -d.
*/
#ifndef MLP_EXPORT_H
#define MLP_EXPORT_H

#include <stdio.h>
#include <string.h>

#include "../data/dataset.h"
#include "args.h"
#include "checkpoint.h"
#include "onnx.h"
#include "safetensors.h"
#include "train.h"  // outputs_check
#include "../common/utils.h"

// 1 when path ends with ext (".onnx")
static inline int path_has_extension(const char *path, const char *ext) {
    size_t n = strlen(path), k = strlen(ext);
    return n > k && strcmp(path + n - k, ext) == 0;
}
static inline int is_safetensors_path(const char *path) { return path_has_extension(path, ".safetensors"); }

// -E: the model (and with -K 1 its momentum) written to c->export_path, the format by its
// extension. Exits 1 when it cannot be written.
static inline void export_model_or_die(const Config *c, const Checkpoint *ck) {
    char err[2048];
    int rc = is_safetensors_path(c->export_path)
                 ? safetensors_write(c->export_path, &ck->meta, ck->params, c->export_momentum ? ck->mbuf : NULL, err, sizeof(err))
                 : onnx_write(c->export_path, &ck->meta, ck->params, err, sizeof(err));
    if (rc != 0) die("another -E path", "%s", err);
    char sizes[256];
    ck_format_sizes(ck->meta.sizes, ck->meta.L, sizes, sizeof(sizes));
    printf("exported %s: %s, %s%s, %s\n", c->export_path, sizes, ACT_NAMES[ck->meta.act],
           c->export_momentum ? ", with the momentum buffers" : "",
           is_safetensors_path(c->export_path) ? "safetensors (float32)" : "ONNX (opset 17)");
}

// Before anything is read: -E's path and -K. Exits 2 on a bad combination.
static inline void export_check_flags(const Config *c, const char *argv0) {
    if (!c->export_path[0]) return;
    if (!is_safetensors_path(c->export_path) && !path_has_extension(c->export_path, ".onnx"))
        usage_error(argv0, "-E %s: the format comes from the extension: .safetensors or .onnx", c->export_path);
    if (c->export_momentum && !is_safetensors_path(c->export_path))
        usage_error(argv0, "-K 1 adds the momentum buffers to a .safetensors export; an ONNX graph is for inference");
    if (path_same_file(c->export_path, c->eval_path))
        usage_error(argv0, "-E %s is the model -e reads: give another file name", c->export_path);
    outputs_check(c, argv0);  // the rule for every output (common/safe_write.h), -E's kind by its extension
}

// Reads -e's or -r's model (flag 'e' or 'r'): one of our checkpoints, or a safetensors file. For a
// safetensors file, takes its activation (from its metadata, else -a; -a against the metadata is
// a contradiction, exit 2), and says what it read. A bad file: one line, exit 1.
static inline void model_read_or_die(const char *path, Config *c, Checkpoint *ck, char flag, const char *argv0) {
    char err[2048];
    if (!is_safetensors_path(path)) {
        if (checkpoint_read(path, ck, err, sizeof(err)) != 0)
            die(flag == 'e' ? "-e FILE names a checkpoint that -c wrote, or a .safetensors file"
                            : "-r FILE names a checkpoint that -c wrote, or a .safetensors file", "%s", err);
        return;
    }
    SafetensorsInfo info;
    if (safetensors_read(path, ck, &info, err, sizeof(err)) != 0)
        die("a .safetensors file of nn.Linear layers (doc/checkpoint.md)", "%s", err);
    CheckpointMeta *m = &ck->meta;
    const char *act_from = "its metadata";
    if (info.have_act) {
        if (c->act_given && c->act != m->act)
            usage_error(argv0, "-a %s contradicts %s, whose metadata gives the activation %s: leave -a out",
                        ACT_NAMES[c->act], path, ACT_NAMES[m->act]);
    } else if (c->act_given) {
        m->act = c->act;
        act_from = "-a";
    } else if (m->L > 1) {
        die("-a sigmoid, relu or tanh: the activation it was trained with",
            "%s: its metadata does not say the hidden layers' activation, and no -a does", path);
    } else {
        act_from = "no hidden layer";
    }
    char sizes[256], dtypes[32];
    ck_format_sizes(m->sizes, m->L, sizes, sizeof(sizes));
    st_dtype_names(info.dtypes, dtypes, sizeof(dtypes));
    printf("%s: a safetensors model: %s, %s (%s); %s%s; %s\n", path, sizes, ACT_NAMES[m->act], act_from, dtypes,
           info.dtypes == ST_F32 ? "" : " tensors widened to float32",
           info.have_momentum ? "with momentum buffers" : "no momentum buffers");
    if (!info.have_scale)
        printf("note: %s's metadata gives no scale: the model's input is taken as pixel / 255\n", path);
}

// -e's dataset against an imported model: the input shape and the class names its metadata did
// not give are the dataset's (its inputs must be the model's). Exits 2 when they do not fit.
static inline void import_fit_data(Checkpoint *ck, Dataset *test, const char *data_dir, const char *argv0) {
    CheckpointMeta *m = &ck->meta;
    if (strcmp(m->writer, "safetensors") != 0) return;
    if (m->data_kind == DATA_NONE) {
        if (dataset_dim(test) != m->sizes[0])
            usage_error(argv0, "%s's model takes %d inputs but the pictures in %s have %d (%dx%dx%d)", ck->path,
                        m->sizes[0], data_dir, dataset_dim(test), test->channels, test->rows, test->cols);
        m->data_kind = (int)test->kind;
        m->channels = test->channels;
        m->rows = test->rows;
        m->cols = test->cols;
        m->planar = test->planar;
    }
    if (!m->class_names[0][0] && test->num_classes == m->num_classes)
        memcpy(m->class_names, test->class_names, sizeof(m->class_names));
}

// -p with an imported model: its metadata must give the pictures' shape; classes without names
// are numbered. Exits 1 when the shape is unknown.
static inline void import_for_pictures(Checkpoint *ck) {
    CheckpointMeta *m = &ck->meta;
    if (strcmp(m->writer, "safetensors") != 0) return;
    if (m->data_kind == DATA_NONE)
        die("-d DIR to evaluate it instead, or the metadata key input (doc/checkpoint.md)",
            "%s: its metadata does not give the pictures' shape (input), so -p cannot prepare a picture for it", ck->path);
    for (int k = 0; k < m->num_classes; k++)
        if (!m->class_names[k][0]) snprintf(m->class_names[k], CLASS_NAME_LEN, "%d", k);
}

// -r FILE.safetensors, before the data is loaded: the model's sizes and activation become the
// run's (-m, when given, must agree: exit 2); a model whose input is not pixel / 255 is refused,
// since the trainers feed pixel / 255 (exit 1).
static inline void import_adopt_settings(const Checkpoint *ck, Config *c, const char *argv0) {
    const CheckpointMeta *m = &ck->meta;
    int same = c->L == m->L;
    for (int l = 0; same && l <= m->L; l++) same = c->sizes[l] == m->sizes[l];
    if (c->sizes_given && !same) usage_error(argv0, "-m contradicts the model in %s: leave -m out", ck->path);
    c->L = m->L;
    memcpy(c->sizes, m->sizes, sizeof(int) * (size_t)(m->L + 1));
    c->act = m->act;
    if (m->input_scale != 1.0f / 255.0f || m->input_offset != 0)
        die("-e to evaluate it; training feeds pixel / 255", "%s: its model takes pixel * %g + %g, but the trainers train "
            "on pixel / 255", ck->path, m->input_scale, m->input_offset);
}

// -r FILE.safetensors, once the data is loaded: the model must fit it (exit 2). Returns the
// parameters, and the momentum in *mbuf (zeros when the file has none), for a new run at epoch 1.
static inline const float *import_start(const Checkpoint *ck, const Config *c, const Dataset *train, const float **mbuf,
                                        const char *argv0) {
    const CheckpointMeta *m = &ck->meta;
    const char *dir = c->data_dir[0] ? c->data_dir : "the data directory";
    if (m->sizes[0] != dataset_dim(train) || m->sizes[m->L] != train->num_classes)
        usage_error(argv0, "%s's model takes %d inputs to %d classes, but %s has %d inputs (%dx%dx%d) and %d classes",
                    ck->path, m->sizes[0], m->sizes[m->L], dir, dataset_dim(train), train->channels, train->rows,
                    train->cols, train->num_classes);
    char err[1024];
    if (m->data_kind != DATA_NONE && checkpoint_data_contradiction(ck, train, c->data_dir, 0, err, sizeof(err)) != 0)
        usage_error(argv0, "%s", err);
    printf("a new run from the weights of %s (epoch 1)\n", ck->path);
    *mbuf = ck->mbuf;
    return ck->params;
}

#endif // MLP_EXPORT_H
