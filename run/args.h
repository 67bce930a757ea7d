/*
The command line shared by the three trainers (train_mlp_cpu, train_mlp, train_mlp_fast): one
table (ARGS below) from which both the parser and the usage screen are made, so they never
drift apart. A flag names the trainers that take it; the others refuse it with a pointer to
the one that does.

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

#include "../common/mlp.h"    // MAX_LAYERS, ACT_*, param_layout
#include "../common/utils.h"  // usage_error

#define MAX_PREDICT 32  // -p may be given this many times
#define MAX_GPUS 64     // -g takes at most this many GPUs

// How the fast GPU trainer runs its steps (-f); PATH_FUSED falls back to PATH_GRAPH for models the
// fused steps do not take (kernels/fast/fused/fused_step.cuh, kernels/fast/fused/fused_deep.cuh) or would run
// slower than the graphs; PATH_FUSED_ANY only for models they cannot run
enum { PATH_LAUNCH = 0, PATH_GRAPH = 1, PATH_FUSED = 2, PATH_FUSED_ANY = 3 };

typedef struct {
    char data_dir[1024];   // "" = look in the default places (see find_dataset_dir)
    int sizes[MAX_LAYERS + 1];
    int L;                 // number of weight layers = number of sizes - 1
    int sizes_given;       // -m was on the command line; else the first and last size come from the data
    int act;               // hidden activation, ACT_*
    int act_given;         // -a was on the command line (a safetensors file without an activation needs it)
    int batch;             // B
    float lr, momentum, weight_decay;
    int epochs;
    uint64_t seed;
    int log_every;         // log a training line every this many steps
    char log_path[1024];   // CSV log
    int max_steps;         // 0 = all; else stop each epoch after this many steps (for tests)
    int precision;         // train_mlp_fast only: -x, PREC_* (common/mlp.h)
    int path;              // train_mlp_fast only: PATH_* above
    int gpus;              // train_mlp_fast only: -g, data-parallel ranks through NCCL (0: one GPU, no NCCL)
    int plan_print;        // train_mlp_fast only: -P, print the step plan (2: and exit)
    int autotune;          // train_mlp_fast only: -A, tune the products the plan cache lacks
    int trace;             // train_mlp only: print a training step as the GPU runs it
    float holdout;         // the share of the training set held out as a validation set (0: none)
    char ckpt_path[1024];  // -c: write a checkpoint here after every epoch, at the end, and when stopped
    char resume_path[1024];// -r: resume the run this checkpoint holds
    char eval_path[1024];  // -e: evaluate this checkpoint on the test set (and -p: predict), then exit
    char grid_path[1024];  // -i: with -e, a PNG grid of misclassified test images
    int num_predict;       // -p: pictures to classify with -e's model
    char predict[MAX_PREDICT][1024];
    int replace;           // -F 1: -o, -c, -i, -E may replace an existing file that is not of their kind
    int writes_nothing;    // not a flag: a rank of a run on several GPUs other than rank 0, which
                           // writes no output, so none is checked (run/train.h outputs_check)
    char export_path[1024];// -E: with -e, write the model to this .safetensors or .onnx file
    int export_momentum;   // -K 1: -E's safetensors file also holds the momentum buffers
} Config;

// The three trainers; the program argument of the functions below is one of these
enum { PROG_CPU = 1, PROG_GPU = 2, PROG_FAST = 4, PROG_ALL = 7 };
static inline const char *program_name(int prog) {
    return prog == PROG_CPU ? "train_mlp_cpu" : prog == PROG_GPU ? "train_mlp" : "train_mlp_fast";
}

// ARG_PATH: a path, kept; ARG_PATHS: a path that may be given several times (the list grows)
typedef enum { ARG_INT, ARG_U64, ARG_FLOAT, ARG_PATH, ARG_PATHS, ARG_LAYERS, ARG_ACT } ArgType;

typedef struct {
    char flag;          // -flag
    const char *meta;   // what the value is, for the usage screen
    ArgType type;
    size_t offset;      // where in Config the value goes
    double min, max;    // inclusive range (numbers)
    int programs;       // the trainers that take it: PROG_* bits
    const char *help;
} ArgSpec;

#define CFG(field) offsetof(Config, field)
static const ArgSpec ARGS[] = {
    {'d', "DIR", ARG_PATH, CFG(data_dir), 0, 0, PROG_ALL,
     "dataset directory: MNIST-format IDX files (raw or .gz), CIFAR-10's binary files, or an image folder "
     "(train/CLASS/*.png ...); auto = the first of data/mnist, data/fashion-mnist, /usr/share/datasets/fashion-mnist"},
    {'m', "SIZES", ARG_LAYERS, CFG(sizes), 1, MAX_WIDTH, PROG_ALL,
     "layer sizes, input first, comma-separated; the first must be the data's inputs, the last its classes"},
    {'a', "ACT", ARG_ACT, CFG(act), 0, 2, PROG_ALL, "hidden activation: sigmoid, relu or tanh"},
    {'b', "INT", ARG_INT, CFG(batch), 1, 32768, PROG_ALL, "batch size"},
    {'l', "FLOAT", ARG_FLOAT, CFG(lr), 1e-12, 1e3, PROG_ALL, "learning rate"},
    {'k', "FLOAT", ARG_FLOAT, CFG(momentum), 0, 0.999999, PROG_ALL, "SGD momentum, in [0, 1)"},
    {'w', "FLOAT", ARG_FLOAT, CFG(weight_decay), 0, 0.999999, PROG_ALL, "weight decay (L2), in [0, 1)"},
    {'n', "INT", ARG_INT, CFG(epochs), 1, 1000000, PROG_ALL, "epochs"},
    {'s', "INT", ARG_U64, CFG(seed), 0, 0, PROG_ALL, "random seed: init and shuffling"},
    {'v', "INT", ARG_INT, CFG(log_every), 1, 1000000000, PROG_ALL, "print a log line every this many steps"},
    {'o', "FILE", ARG_PATH, CFG(log_path), 0, 0, PROG_ALL,
     "CSV log of steps, evaluations and epochs; resuming (-r) with the log of the run it continues appends to it"},
    {'t', "INT", ARG_INT, CFG(max_steps), 0, 1000000000, PROG_ALL,
     "stop each epoch after this many steps (0 = the whole epoch)"},
    {'H', "FRAC", ARG_FLOAT, CFG(holdout), 0, 1, PROG_ALL,
     "hold out this share of the training set (seeded by -s), strictly between 0 and 1, as a validation set, "
     "evaluated after every epoch; the test set is then evaluated at the end only; 0: none"},
    {'c', "FILE", ARG_PATH, CFG(ckpt_path), 0, 0, PROG_ALL,
     "write a checkpoint to FILE after every epoch, at the end of the run, and when stopped by Ctrl-C, SIGTERM, "
     "SIGHUP or SIGPIPE; one run at a time per FILE"},
    {'r', "FILE", ARG_PATH, CFG(resume_path), 0, 0, PROG_ALL,
     "resume the run in checkpoint FILE (-n stays the total number of epochs; -c may name the same file)"},
    {'e', "FILE", ARG_PATH, CFG(eval_path), 0, 0, PROG_ALL,
     "evaluate checkpoint FILE on the test set of -d: loss, accuracy, per-class accuracy, confusion matrix; "
     "then exit"},
    {'p', "IMAGE", ARG_PATHS, CFG(predict), 0, 0, PROG_ALL,
     "with -e: classify a PNG, JPG or BMP picture with the checkpoint's model and print its top 3 (repeatable)"},
    {'i', "FILE", ARG_PATH, CFG(grid_path), 0, 0, PROG_ALL,
     "with -e: write a PNG grid (FILE ends in .png) of misclassified test images, with their true and predicted "
     "labels"},
    {'F', "0|1", ARG_INT, CFG(replace), 0, 1, PROG_ALL,
     "1: let -o, -c, -i and -E replace an existing file that is not of their kind (never an input of the run, "
     "never a file in the data directory)"},
    {'E', "FILE", ARG_PATH, CFG(export_path), 0, 0, PROG_ALL,
     "with -e: write the model to FILE, .safetensors (PyTorch's nn.Sequential names) or .onnx (an inference graph "
     "taking raw 0-255 pixels); evaluates too only with -d"},
    {'K', "0|1", ARG_INT, CFG(export_momentum), 0, 1, PROG_ALL, "with -E FILE.safetensors: 1 adds the SGD momentum buffers"},
    {'T', "0|1", ARG_INT, CFG(trace), 0, 1, PROG_GPU,
     "1: print the second training step as a trace: each kernel with its grid, shapes, bytes, FLOPs and time"},
    {'x', "0|1|2", ARG_INT, CFG(precision), 0, 2, PROG_FAST,
     "matmul precision: 0 FP32; 1 TF32 on the tensor cores (inputs rounded to 10 mantissa bits, FP32 sums): "
     "faster, results differ from FP32 in the 3rd or 4th digit; 2 BF16 on the tensor cores (inputs rounded to 7 "
     "mantissa bits, FP32 sums; weights, optimizer, loss and softmax stay FP32): differs in the 2nd or 3rd. A "
     "ceiling: a model runs at a higher precision where that is faster (BF16 where its copies do not fit or "
     "fill the GPU, or where the deep fused step runs, runs TF32; a model the one-hidden-layer fused step takes "
     "runs FP32); -P says which and why"},
    {'f', "0|1|2|3", ARG_INT, CFG(path), 0, 3, PROG_FAST,
     "0: launch every step's kernels from the host; 1: capture runs of steps into CUDA graphs and replay them; "
     "2 (default): each run of steps as one kernel where that is faster (one hidden layer in FP32; two or more "
     "in TF32 or BF16 whose products fill the GPU in one wave of tiles), others as 1; 3: as one kernel wherever "
     "it can run (widths up to 2048, batch up to 512), to compare with 1"},
    {'g', "N", ARG_INT, CFG(gpus), 0, MAX_GPUS, PROG_FAST,
     "data-parallel training on N GPUs through NCCL, a process per GPU, each taking -b/N rows of every batch "
     "(also --gpus N); 0: one GPU, without NCCL"},
    {'P', "0|1|2", ARG_INT, CFG(plan_print), 0, 2, PROG_FAST,
     "1: print the step plan before training: each product's kernel family, tile and K split, stream, epilogue, "
     "where the choice came from (cost model, cache, autotune) and its expected time; 2: print it and exit"},
    {'A', "0|1", ARG_INT, CFG(autotune), 0, 1, PROG_FAST,
     "1: time each product the plan cache lacks on this GPU at start-up (every tile and K split) and keep the "
     "fastest in the cache; 0 (default): the cache where it has the product, else the cost model"},
};
#undef CFG
#define NUM_ARGS ((int)(sizeof(ARGS) / sizeof(ARGS[0])))

static inline void config_defaults(Config *c, int prog) {
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
    (void)prog;  // (c->log_path stays empty: each run writes a log of its own, run/log.h)
    c->max_steps = 0;
    c->precision = PREC_FP32;
    c->path = PATH_FUSED;
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

// the flag's row, if the program takes it (prog PROG_ALL: any program)
static inline const ArgSpec *find_arg(char flag, int prog) {
    for (int i = 0; i < NUM_ARGS; i++)
        if (ARGS[i].flag == flag && (ARGS[i].programs & prog)) return &ARGS[i];
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
        if (a->flag == 'H' && x >= 1) {
            snprintf(err, errlen, "-H: %s is not below 1: it would hold out the whole training set; give 0 (none) or "
                     "a share strictly between 0 and 1, such as 0.1", v);
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
    case ARG_PATH:
    case ARG_PATHS: {
        const size_t cap = 1024;  // every path field of Config
        if (v[0] == '\0' || strlen(v) >= cap) {
            snprintf(err, errlen, "-%c: the path must be 1 to %zu characters", a->flag, cap - 1);
            return -1;
        }
        if (a->type == ARG_PATHS) {  // the -p list
            if (c->num_predict == MAX_PREDICT) {
                snprintf(err, errlen, "-%c: at most %d pictures at a time", a->flag, MAX_PREDICT);
                return -1;
            }
            base += (size_t)c->num_predict++ * cap;
        }
        memcpy(base, v, strlen(v) + 1);
        return 0;
    }
    case ARG_LAYERS:
        c->sizes_given = 1;
        return parse_layers(v, c->sizes, &c->L, err, errlen);
    case ARG_ACT: {
        int act = parse_activation(v);
        if (act < 0) {
            snprintf(err, errlen, "-a: unknown activation '%s'; choose sigmoid, relu or tanh", v);
            return -1;
        }
        c->act = act;
        c->act_given = 1;
        return 0;
    }
    }
    return -1;
}

// Parses argv into c (which holds the defaults). Returns 0 to run, 1 when help was asked
// for, 2 (EXIT_USAGE) on a bad command line with the reason in err.
static inline int config_parse(Config *c, int argc, char **argv, int prog, char *err, size_t errlen) {
    err[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        if (strcmp(s, "-h") == 0 || strcmp(s, "--help") == 0) return 1;
        if (strcmp(s, "--gpus") == 0) s = "-g";  // the one long form of a flag with a value
        if (s[0] != '-' || s[1] == '\0' || s[2] != '\0') {
            snprintf(err, errlen, "unexpected argument '%s'; flags look like -b 64", s);
            return 2;
        }
        const ArgSpec *a = find_arg(s[1], prog);
        if (!a) {
            const ArgSpec *other = find_arg(s[1], PROG_ALL);
            if (other) snprintf(err, errlen, "flag %s is for %s only", s, program_name(other->programs));
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
    case ARG_PATH:
        snprintf(out, n, "%s", base[0] ? base : a->flag == 'd' ? "auto" : a->flag == 'o' ? "a new file logs/PROGRAM_DATE-TIME_PID.csv" : "none");
        break;
    case ARG_PATHS: snprintf(out, n, "none"); break;
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

static inline void config_usage(FILE *f, const char *argv0, int prog) {
    static const char *const what[] = {"", "on the CPU (the reference)", "on the GPU (the readable trainer)", "",
                                       "on the GPU (the fast trainer)"};
    Config d;
    config_defaults(&d, prog);
    fprintf(f, "usage: %s [flags]\n\n", argv0);
    fprintf(f, "Trains an MLP %s.\n\n", what[prog]);
    for (int i = 0; i < NUM_ARGS; i++) {
        const ArgSpec *a = &ARGS[i];
        if (!(a->programs & prog)) continue;
        char def[256];
        if (a->type == ARG_LAYERS) snprintf(def, sizeof(def), "INPUTS,128,CLASSES of the data: 784,128,10 for MNIST");
        else format_value(&d, a, def, sizeof(def));
        fprintf(f, "  -%c %-6s %s (default: %s)\n", a->flag, a->meta, a->help, def);
    }
    fprintf(f, "  -h        this help\n\n");
    fprintf(f, "A run stops with exit 1 when it diverges: when the mean loss over a log interval (-v steps) is not\n"
               "finite, or above 3 ln(classes), three times a uniform guess's. Ctrl-C, SIGTERM, SIGHUP (a closed\n"
               "terminal) and SIGPIPE (a closed stdout) stop it after the step in progress (with -c: a checkpoint\n"
               "first). An output never replaces an input, never goes into the data directory, and replaces an\n"
               "existing file only of its own kind (or with -F 1).\n\n"
               "Exit codes: 0 done; 1 a runtime failure (a bad data file or checkpoint, out of memory, a diverging\n"
               "run, a write error or a full disk); 2 a bad command line or a refused output; 129 SIGHUP;\n"
               "130 Ctrl-C (SIGINT); 141 SIGPIPE; 143 SIGTERM.\n");
    if (prog == PROG_CPU)
        fprintf(f, "\nThreads: OpenMP's (OMP_NUM_THREADS), spinning only briefly while they wait (GOMP_SPINCOUNT\n"
                   "unless it or OMP_WAIT_POLICY is set). On a machine that other programs keep busy,\n"
                   "OMP_WAIT_POLICY=passive or OMP_NUM_THREADS=1 slow it down least.\n");
    if (prog == PROG_FAST)
        fprintf(f, "\nSeveral GPUs: -g N, or torchrun, mpirun or srun (their variables; MASTER_ADDR, MASTER_PORT,\n"
                   "MLP_BOOTSTRAP_PORT, MLP_BOOTSTRAP_TIMEOUT, MLP_LIVENESS_TIMEOUT; CUDA_VISIBLE_DEVICES picks the\n"
                   "GPUs): doc/multi_gpu.md.\n"
                   "\nThe plan cache (-A): MLP_PLAN_CACHE=DIR, else $XDG_CACHE_HOME/mlp.cu, else ~/.cache/mlp.cu: a file per\n"
                   "GPU model, keyed by the GPU, the driver and this binary (doc/fast.md).\n");
    fprintf(f, "\nMLP_DEBUG=1: error lines also name the source file and line that found the problem.\n");
}

// The CPU trainer's command line for the same run as argv (a GPU trainer's), for the hint of a
// machine without a GPU: "./train_mlp_cpu" and every flag the CPU trainer takes, with its value;
// the GPU trainers' own flags (-T, -x, -f, -g) are left out and named in dropped ("" when none).
static inline void cpu_trainer_command(int argc, char **argv, char *out, size_t n, char *dropped, size_t dn) {
    size_t k = (size_t)snprintf(out, n, "./%s", program_name(PROG_CPU)), d = 0;
    dropped[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *s = strcmp(argv[i], "--gpus") == 0 ? "-g" : argv[i];
        int flag = s[0] == '-' && s[1] && !s[2];
        int cpu = flag && find_arg(s[1], PROG_CPU) != NULL;
        if (flag && !cpu) {
            if (d < dn) d += (size_t)snprintf(dropped + d, dn - d, "%s%s", d ? ", " : "", s);
            i++;  // and its value
            continue;
        }
        int quote = strpbrk(argv[i], " \t'\"\\$`*?[]()<>|;&~#") != NULL;
        if (k < n) k += (size_t)snprintf(out + k, n - k, quote ? " '%s'" : " %s", argv[i]);
    }
}

// What a trainer's main does with its command line: the defaults, then the flags; -h prints
// the usage screen and exits 0, a bad command line gets one line and exit code 2.
static inline void config_from_command_line(Config *c, int argc, char **argv, int prog) {
    config_defaults(c, prog);
    char err[512];
    int rc = config_parse(c, argc, argv, prog, err, sizeof(err));
    if (rc == 1) {
        config_usage(stdout, argv[0], prog);
        exit(0);
    }
    if (rc != 0) usage_error(argv[0], "%s", err);
    if (prog != PROG_CPU) {  // the hint of a machine without a GPU (kernels/common.cuh): a command that runs
        char cmd[4096], dropped[128];
        cpu_trainer_command(argc, argv, cmd, sizeof(cmd), dropped, sizeof(dropped));
        snprintf(no_gpu_instead, sizeof(no_gpu_instead), "%s (the CPU trainer: make train_cpu%s%s%s)", cmd,
                 dropped[0] ? "; without " : "", dropped, dropped[0] ? ", which only the GPU trainers take" : "");
    }
    if ((c->num_predict || c->grid_path[0] || c->export_path[0]) && !c->eval_path[0])
        usage_error(argv[0], "-%c goes with -e FILE: the checkpoint whose model to use",
                    c->num_predict ? 'p' : c->grid_path[0] ? 'i' : 'E');
    if (c->export_momentum && !c->export_path[0]) usage_error(argv[0], "-K 1 goes with -E FILE.safetensors");
}

#endif // MLP_ARGS_H
