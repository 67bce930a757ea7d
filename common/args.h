/*
The command line shared by train_mlp_cpu and train_mlp: one table (ARGS below) from which
both the parser and the usage screen are made, so they never drift apart.

    ./train_mlp_cpu -d data/mnist -m 784,128,10 -a sigmoid -b 64 -l 0.1 -k 0.9 -n 4

Every value is checked. A bad command line gets one line naming the flag and what is wrong,
and exit code 2 (EXIT_USAGE). config_parse() itself never exits, so the tests can call it.
*/
#ifndef MLP_ARGS_H
#define MLP_ARGS_H

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utils.h"  // usage_error

#define MAX_LAYERS 16      // at most 16 weight layers (17 sizes)
#define MAX_WIDTH 65536    // widest layer accepted

// Activations: the hidden layers use one of the first three; ACT_NONE is the identity
// (the last layer's logits). The numbers are part of the reference-file format.
enum { ACT_SIGMOID = 0, ACT_RELU = 1, ACT_TANH = 2, ACT_NONE = 3 };

// How the GPU trainer runs its steps (-f)
enum { PATH_SIMPLE = 0, PATH_GRAPH = 1, PATH_PERSISTENT = 2 };
static const char *const ACT_NAMES[] = {"sigmoid", "relu", "tanh", "none"};

typedef struct {
    char data_dir[1024];   // "" = look in the default places (see find_dataset_dir)
    int sizes[MAX_LAYERS + 1];
    int L;                 // number of weight layers = number of sizes - 1
    int act;               // hidden activation, ACT_*
    int batch;             // B
    float lr, momentum, weight_decay;
    int epochs;
    uint64_t seed;
    int log_every;         // log a training line every this many steps
    char log_path[1024];   // CSV log
    int max_steps;         // 0 = all; else stop each epoch after this many steps (for tests)
    int tf32;              // GPU only: TF32 tensor cores in the matmuls
    int path;              // GPU only: PATH_* below
} Config;

// The flat parameter buffer, shared by every implementation and the checkpoint/reference
// files: for each layer l in order, W_l (sizes[l+1] x sizes[l], row-major, like
// nn.Linear's weight) then b_l (sizes[l+1]). Gradients and momentum use the same layout.
// Returns the total number of floats; w_off/b_off get each tensor's offset.
static inline size_t param_layout(const int *sizes, int L, size_t *w_off, size_t *b_off) {
    size_t off = 0;
    for (int l = 0; l < L; l++) {
        w_off[l] = off;
        off += (size_t)sizes[l + 1] * (size_t)sizes[l];
        b_off[l] = off;
        off += (size_t)sizes[l + 1];
    }
    return off;
}

typedef enum { ARG_INT, ARG_U64, ARG_FLOAT, ARG_STRING, ARG_LAYERS, ARG_ACT } ArgType;

typedef struct {
    char flag;          // -flag
    const char *meta;   // what the value is, for the usage screen
    ArgType type;
    size_t offset;      // where in Config the value goes
    double min, max;    // inclusive range (numbers)
    int gpu_only;       // shown and accepted by train_mlp only
    const char *help;
} ArgSpec;

#define CFG(field) offsetof(Config, field)
static const ArgSpec ARGS[] = {
    {'d', "DIR", ARG_STRING, CFG(data_dir), 0, 0, 0,
     "dataset directory with MNIST's four IDX files, raw or .gz; auto = the first of data/mnist, "
     "data/fashion-mnist, /usr/share/datasets/fashion-mnist"},
    {'m', "SIZES", ARG_LAYERS, CFG(sizes), 1, MAX_WIDTH, 0,
     "layer sizes, input first, comma-separated"},
    {'a', "ACT", ARG_ACT, CFG(act), 0, 2, 0, "hidden activation: sigmoid, relu or tanh"},
    {'b', "INT", ARG_INT, CFG(batch), 1, 32768, 0, "batch size"},
    {'l', "FLOAT", ARG_FLOAT, CFG(lr), 1e-12, 1e3, 0, "learning rate"},
    {'k', "FLOAT", ARG_FLOAT, CFG(momentum), 0, 0.999999, 0, "SGD momentum, in [0, 1)"},
    {'w', "FLOAT", ARG_FLOAT, CFG(weight_decay), 0, 0.999999, 0, "weight decay (L2), in [0, 1)"},
    {'n', "INT", ARG_INT, CFG(epochs), 1, 1000000, 0, "epochs"},
    {'s', "INT", ARG_U64, CFG(seed), 0, 0, 0, "random seed: init and shuffling"},
    {'v', "INT", ARG_INT, CFG(log_every), 1, 1000000000, 0, "print a log line every this many steps"},
    {'o', "FILE", ARG_STRING, CFG(log_path), 0, 0, 0, "CSV log of steps, evaluations and epochs"},
    {'t', "INT", ARG_INT, CFG(max_steps), 0, 1000000000, 0,
     "stop each epoch after this many steps (0 = the whole epoch)"},
    {'x', "0|1", ARG_INT, CFG(tf32), 0, 1, 1, "TF32 tensor cores in the matmuls (looser precision)"},
    {'f', "0|1|2", ARG_INT, CFG(path), 0, 2, 1,
     "kernels: 0 simple, one launch each; 1 fast, fused, three streams replayed in CUDA graphs; 2 one "
     "persistent kernel per run of steps (FP32)"},
};
#undef CFG
#define NUM_ARGS ((int)(sizeof(ARGS) / sizeof(ARGS[0])))

static inline void config_defaults(Config *c, int is_gpu) {
    memset(c, 0, sizeof(*c));
    c->L = 2;
    c->sizes[0] = 784;
    c->sizes[1] = 128;
    c->sizes[2] = 10;
    c->act = ACT_SIGMOID;
    c->batch = 64;
    c->lr = 0.1f;
    c->momentum = 0.9f;
    c->weight_decay = 0.0f;
    c->epochs = 4;
    c->seed = 1337;
    c->log_every = 100;
    snprintf(c->log_path, sizeof(c->log_path), "logs/%s.csv", is_gpu ? "train_mlp" : "train_mlp_cpu");
    c->max_steps = 0;
    c->tf32 = 0;
    c->path = PATH_GRAPH;
}

// "784,128,10" -> sizes and L; 0 on success, else writes err
static inline int parse_layers(const char *s, int *sizes, int *L, char *err, size_t errlen) {
    int n = 0;
    const char *p = s;
    while (1) {
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || (*end != ',' && *end != '\0')) {
            snprintf(err, errlen, "-m: '%s' is not a comma-separated list of integers (e.g. 784,128,10)", s);
            return -1;
        }
        if (n == MAX_LAYERS + 1) {
            snprintf(err, errlen, "-m: '%s' has more than %d layers", s, MAX_LAYERS);
            return -1;
        }
        if (errno == ERANGE || v < 1 || v > MAX_WIDTH) {
            snprintf(err, errlen, "-m: size %d is %.*s; every size must be between 1 and %d",
                     n + 1, (int)(end - p), p, MAX_WIDTH);
            return -1;
        }
        sizes[n++] = (int)v;
        if (*end == '\0') break;
        p = end + 1;
    }
    if (n < 2) {
        snprintf(err, errlen, "-m: '%s' needs at least two sizes: inputs and outputs (e.g. 784,10)", s);
        return -1;
    }
    *L = n - 1;
    return 0;
}

static inline int parse_activation(const char *s) {
    for (int a = 0; a < 3; a++)
        if (strcmp(s, ACT_NAMES[a]) == 0) return a;
    return -1;
}

static inline const ArgSpec *find_arg(char flag, int is_gpu) {
    for (int i = 0; i < NUM_ARGS; i++)
        if (ARGS[i].flag == flag && (is_gpu || !ARGS[i].gpu_only)) return &ARGS[i];
    return NULL;
}

// Parses one value into the Config; 0 on success, else writes err.
static inline int parse_value(Config *c, const ArgSpec *a, const char *v, char *err, size_t errlen) {
    char *base = (char *)c + a->offset;
    char *end;
    switch (a->type) {
    case ARG_INT: {
        errno = 0;
        long x = strtol(v, &end, 10);
        if (end == v || *end != '\0') {
            snprintf(err, errlen, "-%c: '%s' is not an integer", a->flag, v);
            return -1;
        }
        if (errno == ERANGE || x < a->min || x > a->max) {
            snprintf(err, errlen, "-%c: %s is out of range; it must be between %.0f and %.0f", a->flag, v,
                     a->min, a->max);
            return -1;
        }
        *(int *)base = (int)x;
        return 0;
    }
    case ARG_U64: {
        errno = 0;
        if (v[0] == '-') {
            snprintf(err, errlen, "-%c: '%s' must not be negative", a->flag, v);
            return -1;
        }
        unsigned long long x = strtoull(v, &end, 10);
        if (end == v || *end != '\0' || errno == ERANGE) {
            snprintf(err, errlen, "-%c: '%s' is not an integer between 0 and 2^64-1", a->flag, v);
            return -1;
        }
        *(uint64_t *)base = (uint64_t)x;
        return 0;
    }
    case ARG_FLOAT: {
        errno = 0;
        double x = strtod(v, &end);
        if (end == v || *end != '\0') {
            snprintf(err, errlen, "-%c: '%s' is not a number", a->flag, v);
            return -1;
        }
        if (!isfinite(x) || x < a->min || x > a->max) {
            snprintf(err, errlen, "-%c: %s is out of range; it must be a number in [%g, %g]", a->flag, v,
                     a->min, a->max);
            return -1;
        }
        *(float *)base = (float)x;
        return 0;
    }
    case ARG_STRING: {
        size_t cap = (a->offset == offsetof(Config, data_dir)) ? sizeof(c->data_dir) : sizeof(c->log_path);
        if (v[0] == '\0' || strlen(v) >= cap) {
            snprintf(err, errlen, "-%c: the path must be 1 to %zu characters", a->flag, cap - 1);
            return -1;
        }
        memcpy(base, v, strlen(v) + 1);
        return 0;
    }
    case ARG_LAYERS:
        return parse_layers(v, c->sizes, &c->L, err, errlen);
    case ARG_ACT: {
        int act = parse_activation(v);
        if (act < 0) {
            snprintf(err, errlen, "-a: unknown activation '%s'; choose sigmoid, relu or tanh", v);
            return -1;
        }
        c->act = act;
        return 0;
    }
    }
    return -1;
}

// Parses argv into c (which holds the defaults). Returns 0 to run, 1 when help was asked
// for, 2 (EXIT_USAGE) on a bad command line with the reason in err.
static inline int config_parse(Config *c, int argc, char **argv, int is_gpu, char *err, size_t errlen) {
    err[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) return 1;
        if (s[0] != '-' || s[1] == '\0' || s[2] != '\0') {
            snprintf(err, errlen, "unexpected argument '%s'; flags look like -b 64", s);
            return 2;
        }
        const ArgSpec *a = find_arg(s[1], is_gpu);
        if (!a) {
            if (find_arg(s[1], 1)) snprintf(err, errlen, "flag %s is for the GPU trainer (train_mlp) only", s);
            else snprintf(err, errlen, "unknown flag %s", s);
            return 2;
        }
        if (i + 1 >= argc) {
            snprintf(err, errlen, "flag %s needs a value (%s)", s, a->meta);
            return 2;
        }
        if (parse_value(c, a, argv[++i], err, errlen) != 0) return 2;
    }
    return 0;
}

// Writes the current value of one flag (the default, when called on fresh defaults).
static inline void format_value(const Config *c, const ArgSpec *a, char *out, size_t n) {
    const char *base = (const char *)c + a->offset;
    switch (a->type) {
    case ARG_INT: snprintf(out, n, "%d", *(const int *)base); break;
    case ARG_U64: snprintf(out, n, "%llu", (unsigned long long)*(const uint64_t *)base); break;
    case ARG_FLOAT: snprintf(out, n, "%g", *(const float *)base); break;
    case ARG_STRING: snprintf(out, n, "%s", base[0] ? base : "auto"); break;
    case ARG_ACT: snprintf(out, n, "%s", ACT_NAMES[c->act]); break;
    case ARG_LAYERS: {
        size_t k = 0;
        out[0] = '\0';
        for (int l = 0; l <= c->L && k < n; l++)
            k += (size_t)snprintf(out + k, n - k, l ? ",%d" : "%d", c->sizes[l]);
        break;
    }
    }
}

static inline void config_usage(FILE *f, const char *prog, int is_gpu) {
    Config d;
    config_defaults(&d, is_gpu);
    fprintf(f, "usage: %s [flags]\n\n", prog);
    fprintf(f, "Trains an MLP on MNIST-format data %s.\n\n", is_gpu ? "on the GPU" : "on the CPU");
    for (int i = 0; i < NUM_ARGS; i++) {
        const ArgSpec *a = &ARGS[i];
        if (a->gpu_only && !is_gpu) continue;
        char def[256];
        format_value(&d, a, def, sizeof(def));
        fprintf(f, "  -%c %-6s %s (default: %s)\n", a->flag, a->meta, a->help, def);
    }
    fprintf(f, "  -h        this help\n");
}

// What a trainer's main does with its command line: the defaults, then the flags; -h prints
// the usage screen and exits 0, a bad command line gets one line and exit code 2.
static inline void config_from_command_line(Config *c, int argc, char **argv, int is_gpu) {
    config_defaults(c, is_gpu);
    char err[512];
    int rc = config_parse(c, argc, argv, is_gpu, err, sizeof(err));
    if (rc == 1) {
        config_usage(stdout, argv[0], is_gpu);
        exit(0);
    }
    if (rc != 0) usage_error(argv[0], "%s", err);
}

#endif // MLP_ARGS_H
