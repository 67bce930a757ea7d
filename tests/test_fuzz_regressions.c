/*
The fuzz targets' saved inputs, run by `make test` with no fuzzer: every file under
tests/fuzz/corpus/TARGET/ (the seeds) and tests/fuzz/regressions/TARGET/ (inputs that once
crashed a reader, or that a fix made a reader refuse) goes through the target's entry point in
tests/fuzz/fuzz.h, the same code the fuzzer runs, compiled normally. Each must come back accepted
or refused with a one-line message, never a crash (under make test's sanitizer builds, never a
report either); then a few named inputs must give their expected message.
Usage: tests/bin/test_fuzz_regressions [-v]   (from the repository root; -v: every file's result)
*/
#include "fuzz/fuzz.h"  // first: it sets the picture limits before data/images.h does

#include "check.h"

static int verbose = 0;

static uint8_t *read_whole(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, len = 0, got;
    uint8_t *buf = (uint8_t *)malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            uint8_t *bigger = (uint8_t *)realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    *n = len;
    return buf;
}

// runs one saved input through its target: 0 accepted, -1 refused (the message in msg)
static int run_file(FuzzEntry fn, const char *path, char *msg, size_t msglen) {
    size_t n = 0;
    uint8_t *data = read_whole(path, &n);
    if (!data) {
        snprintf(msg, msglen, "cannot read %s", path);
        return -2;
    }
    msg[0] = '\0';
    int rc = fn(data, n, msg, msglen);
    free(data);
    return rc;
}

// every file in base/TARGET/ for every target: one check per directory
static void run_directory(const char *base) {
    char what[64];
    snprintf(what, sizeof(what), "every input in tests/fuzz/%s/", base);
    section(what);
    for (int t = 0; t < NUM_FUZZ_TARGETS; t++) {
        char dir[400], path[1000], msg[2048];
        snprintf(dir, sizeof(dir), "tests/fuzz/%s/%s", base, FUZZ_TARGETS[t].name);
        DIR *d = opendir(dir);
        if (!d) {
            if (strcmp(base, "corpus") == 0) check(0, "%s: missing (run from the repository root)", dir);
            continue;
        }
        char *names[4096];
        int n = 0;
        struct dirent *e;
        while ((e = readdir(d)) && n < 4096)
            if (e->d_name[0] != '.') names[n++] = strdup(e->d_name);
        closedir(d);
        qsort(names, (size_t)n, sizeof(char *), name_compare);  // (data/folder.h's)
        int accepted = 0, refused = 0, bad = 0;
        double t0 = now_seconds();
        for (int i = 0; i < n; i++) {
            snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
            int rc = run_file(FUZZ_TARGETS[t].fn, path, msg, sizeof(msg));
            if (rc == 0) accepted++;
            else if (rc == -1 && msg[0]) refused++;
            else bad++;
            if (verbose || (rc != 0 && !(rc == -1 && msg[0])))
                printf("       %s: %s: %s\n", path, rc == 0 ? "accepted" : "refused", msg);
            free(names[i]);
        }
        check(bad == 0 && n > 0, "%-10s %4d inputs: %d accepted, %d refused with a message (%.2f s)",
              FUZZ_TARGETS[t].name, n, accepted, refused, now_seconds() - t0);
    }
}

// a named input and the words its message must hold ("accepted": it must be accepted)
static void expect(const char *target, const char *file, const char *want) {
    char path[600], msg[2048];
    snprintf(path, sizeof(path), "tests/fuzz/%s", file);
    int rc = run_file(fuzz_find(target), path, msg, sizeof(msg));
    int ok = strcmp(want, "accepted") == 0 ? rc == 0 : rc == -1 && strstr(msg, want) != NULL;
    check(ok, "%s %s -> \"%s\"", target, file, msg);
}

int main(int argc, char **argv) {
    verbose = argc > 1 && strcmp(argv[1], "-v") == 0;
    double t0 = now_seconds();
    run_directory("corpus");
    run_directory("regressions");

    section("what named inputs must give");
    expect("idx_raw", "corpus/idx_raw/images_3x2x2", "accepted");
    expect("idx_raw", "corpus/idx_raw/labels_claim_2_31",
           "the header promises 2147483648 bytes of data (2147483648), more than the 2147483647 this reader "
           "accepts; the file holds 4");
    expect("idx_raw", "corpus/idx_raw/labels_claim_2_26",
           "truncated: the header promises 67108864 bytes of data, the file holds 4");
    expect("idx_raw", "corpus/idx_raw/images_65536x32768", "an image of 65536 x 32768 pixels is 2147483648 bytes");
    expect("idx_gz", "corpus/idx_gz/gz_two_members", "accepted");
    expect("idx_gz", "corpus/idx_gz/gz_trailing_junk", "4 unexpected bytes after the end of the gzip stream");
    expect("cifar", "corpus/cifar/test_with_meta", "accepted");
    expect("cifar", "corpus/cifar/label_10", "record 0 has label 10");
    expect("image", "corpus/image/png_palette_trns", "accepted");
    expect("image", "corpus/image/bmp_claims_200_rows", "more than a file of");
    expect("folder", "corpus/folder/shape_mismatch", "every picture must have the same size and colours");
    expect("checkpoint", "corpus/checkpoint/ck_3_4_2_mode0", "accepted");
    expect("checkpoint", "corpus/checkpoint/ck_forged_progress_mode3", "impossible progress");
    expect("plan_cache", "corpus/plan_cache/plans_3_mode0", "accepted");
    expect("plan_cache", "corpus/plan_cache/plans_other_driver", "accepted");
    expect("plan_cache", "corpus/plan_cache/plans_truncated", "truncated");
    expect("args", "corpus/args/full_cpu", "accepted");
    expect("args", "corpus/args/bad_value", "-l: nan is out of range");
    fuzz_clean(1);
    printf("\n(test_fuzz_regressions took %.1f s)\n", now_seconds() - t0);
    return test_exit();
}
