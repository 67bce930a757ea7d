// The datasets the tests that run a trainer make for themselves (tests/test_run.c,
// tests/test_export.c): small, learnable, written as IDX files, CIFAR-10 binary files and an image
// folder of PNGs. Include after train_mlp_cpu.c (Rng, Dataset, the readers, stb's writer).
#pragma once

#include "idx_write.h"  // write_idx_split

// the first line of a text that contains needle (for the messages in checks)
static const char *line_with(const char *text, const char *needle, char *buf, size_t n) {
    const char *p = strstr(text, needle);
    if (!p) return "(not found)";
    while (p > text && p[-1] != '\n') p--;
    size_t k = strcspn(p, "\n");
    snprintf(buf, n, "%.*s", (int)(k < n ? k : n - 1), p);
    return buf;
}

// A learnable dataset of side x side images and 4 classes: class c lights up quadrant c a little,
// under enough noise that a small model still makes a few mistakes (for -i's grid).
static void make_data_side(const char *dir, int ntrain, int ntest, int side) {
    mkdir(dir, 0777);
    Rng rng;
    rng_seed(&rng, 99, 5);
    const int D = side * side, h = side / 2;
    for (int split = 0; split < 2; split++) {
        int n = split ? ntest : ntrain;
        uint8_t *img = (uint8_t *)mallocCheck((size_t)n * D), *lab = (uint8_t *)mallocCheck((size_t)n);
        for (int i = 0; i < n; i++) {
            int c = (int)rng_below(&rng, 4);
            lab[i] = (uint8_t)c;
            for (int p = 0; p < D; p++) {
                int r = p / side, q = p % side, quad = (r >= h) * 2 + (q >= h);
                img[(size_t)i * D + p] = (uint8_t)((quad == c ? 70 : 0) + rng_below(&rng, 180));
            }
        }
        write_idx_split(dir, split, img, lab, n, side, side);
        free(img);
        free(lab);
    }
}
static void make_data(const char *dir, int ntrain, int ntest) { make_data_side(dir, ntrain, ntest, 8); }

// make_data's dataset in idx as CIFAR-10 binary files in cifar (each 8x8 image at the top left of a
// 32x32 field, gray copied into R, G and B) and as an image folder of PNGs in folder
static void write_cifar_and_folder(const char *idx, const char *cifar, const char *folder) {
    Dataset tr, te;
    char err[1400], path[900];
    if (dataset_load_both(idx, &tr, &te, err, sizeof(err)) != 0) die("", "%s", err);
    mkdir(cifar, 0777);
    mkdir(folder, 0777);
    for (int split = 0; split < 2; split++) {
        const Dataset *d = split ? &te : &tr;
        snprintf(path, sizeof(path), "%s/%s", cifar, split ? "test_batch.bin" : "data_batch_1.bin");
        FILE *f = fopenCheck(path, "wb");
        snprintf(path, sizeof(path), "%s/%s", folder, split ? "test" : "train");
        mkdir(path, 0777);
        for (int c = 0; c < 4; c++) {
            snprintf(path, sizeof(path), "%s/%s/class%d", folder, split ? "test" : "train", c);
            mkdir(path, 0777);
        }
        for (int i = 0; i < d->n; i++) {
            uint8_t rec[3073];
            memset(rec, 0, sizeof(rec));
            rec[0] = d->labels[i];
            for (int ch = 0; ch < 3; ch++)
                for (int p = 0; p < 64; p++) rec[1 + ch * 1024 + (p / 8) * 32 + p % 8] = d->images[(size_t)i * 64 + p];
            fwriteCheck(rec, 1, sizeof(rec), f, "the CIFAR-format file");
            snprintf(path, sizeof(path), "%s/%s/class%d/%05d.png", folder, split ? "test" : "train", d->labels[i], i);
            stbi_write_png(path, 8, 8, 1, d->images + (size_t)i * 64, 8);
        }
        fcloseCheck(f, "the CIFAR-format file");
    }
    for (int b = 2; b <= 5; b++) {  // CIFAR-10's training set is five files: the others, empty of records, are
        snprintf(path, sizeof(path), "%s/data_batch_%d.bin", cifar, b);  // refused, so they repeat the first
        char cmd[2000];
        snprintf(cmd, sizeof(cmd), "cp %s/data_batch_1.bin %s", cifar, path);
        if (system(cmd) != 0) die("", "cannot copy %s", path);
    }
    dataset_free(&tr);
    dataset_free(&te);
}

