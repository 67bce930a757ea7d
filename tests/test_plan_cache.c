/*
The fast trainer's plan cache (common/plan_cache.h), tested directly, with no GPU:
  1. where the file lives: $MLP_PLAN_CACHE, else $XDG_CACHE_HOME/mlp.cu, else $HOME/.cache/mlp.cu,
     one file per GPU with the name made safe; the build id is the same twice and not 0;
  2. round trip: entries put, saved (the folder created), opened again, found with the same
     choice and time; a put of a shape already there replaces it; the header at the documented
     offsets; nothing written when nothing changed;
  3. a change of key (driver, build, SM count; another GPU's name in the file) is a miss, with no
     warning, and the next save replaces the file;
  4. damage: one byte flipped at EVERY position, the file cut at EVERY length, another magic,
     trailing bytes, an absurd count and an out-of-range field with a right CRC-32, a directory in
     the file's place: each one warning line, an empty cache, never a crash;
  5. a save never replaces a file that is not a plan cache (a CSV log of mlp.cu) and says so; an
     empty file is replaced.
Usage: tests/bin/test_plan_cache   (KEEP_TMP=1 keeps its temporary directory)
*/
#include "../common/plan_cache.h"
#include "check.h"

static char tmpdir[256];

static int write_file(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(p, 1, n, f);
    return fclose(f) == 0 && w == n ? 0 : -1;
}

// the whole file into a new buffer (*n bytes), or NULL
static uint8_t *slurp(const char *path, size_t *n) {
    struct stat st;
    FILE *f = stat(path, &st) == 0 ? fopen(path, "rb") : NULL;
    if (!f) return NULL;
    uint8_t *p = (uint8_t *)malloc((size_t)st.st_size + 1);
    *n = fread(p, 1, (size_t)st.st_size, f);
    fclose(f);
    return p;
}

static PlanCacheKey test_key(void) {
    PlanCacheKey k;
    plan_cache_key(&k, "NVIDIA H200 (test)", 132, 12080, 0xC0FFEE01u);
    return k;
}

static PlanCacheShape shape_of(int prod, int M, int N, int K, int tf32) {
    PlanCacheShape s = {prod, M, N, K, tf32, prod == 2, 1};
    return s;
}

// a cache of key with three entries, saved to its file; returns the file's path in path
static void make_saved_cache(const PlanCacheKey *key, char *path, size_t n) {
    PlanCache c;
    char warn[1024], err[1024];
    plan_cache_open(&c, key, warn, sizeof(warn));
    PlanCacheShape a = shape_of(0, 256, 1024, 784, 2), b = shape_of(1, 256, 784, 1024, 1);
    PlanCacheShape d = shape_of(2, 1024, 784, 256, 0);
    plan_cache_put(&c, &a, 11, 4, 5.25f);
    plan_cache_put(&c, &b, 9, 8, 7.5f);
    plan_cache_put(&c, &d, 22, 1, 3.0f);
    if (plan_cache_save(&c, err, sizeof(err)) != 0) printf("    (save failed: %s)\n", err);
    snprintf(path, n, "%s", c.path);
    plan_cache_free(&c);
}

// opens the cache of key and checks that it comes back empty with one warning line naming needle
static void expect_damaged(const PlanCacheKey *key, const char *what, const char *needle, int quiet) {
    PlanCache c;
    char warn[1024];
    int n = plan_cache_open(&c, key, warn, sizeof(warn));
    int ok = n == 0 && c.n == 0 && warn[0] && !strchr(warn, '\n') && strstr(warn, needle);
    if (!quiet || !ok) check(ok, "%s: empty, warning \"%s\"", what, warn);
    plan_cache_free(&c);
}

// ----------------------------------------------------------------------------

static void test_where(void) {
    section("where the cache lives");
    char dir[SAFE_PATH_LEN], path[SAFE_PATH_LEN], want[SAFE_PATH_LEN];
    setenv("MLP_PLAN_CACHE", "/some/folder", 1);
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    setenv("HOME", "/home/user", 1);
    check(plan_cache_dir(dir, sizeof(dir)) == 0 && strcmp(dir, "/some/folder") == 0, "MLP_PLAN_CACHE first: %s", dir);
    setenv("MLP_PLAN_CACHE", "", 1);
    check(plan_cache_dir(dir, sizeof(dir)) == 0 && strcmp(dir, "/xdg/mlp.cu") == 0,
          "an empty MLP_PLAN_CACHE is unset: XDG_CACHE_HOME/mlp.cu: %s", dir);
    unsetenv("XDG_CACHE_HOME");
    check(plan_cache_dir(dir, sizeof(dir)) == 0 && strcmp(dir, "/home/user/.cache/mlp.cu") == 0,
          "then HOME/.cache/mlp.cu: %s", dir);
    unsetenv("HOME");
    check(plan_cache_dir(dir, sizeof(dir)) == -1, "none of the three set: no folder");
    PlanCache c;
    char warn[1024];
    PlanCacheKey key = test_key();
    plan_cache_open(&c, &key, warn, sizeof(warn));
    check(c.path[0] == '\0' && strstr(warn, "MLP_PLAN_CACHE=DIR"), "open then warns: \"%s\"", warn);
    plan_cache_put(&c, &(PlanCacheShape){0, 1, 2, 3, 0, 0, 1}, 1, 1, 1.0f);
    char err[1024];
    check(plan_cache_save(&c, err, sizeof(err)) == -1 && strstr(err, "MLP_PLAN_CACHE"), "and save fails: \"%s\"", err);
    plan_cache_free(&c);
    setenv("MLP_PLAN_CACHE", tmpdir, 1);
    check(plan_cache_path(path, sizeof(path), "NVIDIA H200 NVL/x") == 0, "the file's path");
    snprintf(want, sizeof(want), "%s/plans-NVIDIA_H200_NVL_x.bin", tmpdir);
    check(strcmp(path, want) == 0, "one file per GPU, its name made safe: %s", path);
    uint32_t id = plan_cache_build_id();
    check(id != 0 && id == plan_cache_build_id(), "the build id: %08x, the same twice", id);
}

static void test_round_trip(void) {
    section("round trip");
    char sub[512], path[SAFE_PATH_LEN], warn[1024], err[1024];
    snprintf(sub, sizeof(sub), "%s/new/folder", tmpdir);
    setenv("MLP_PLAN_CACHE", sub, 1);
    PlanCacheKey key = test_key();
    PlanCache c;
    int n = plan_cache_open(&c, &key, warn, sizeof(warn));
    check(n == 0 && !warn[0] && !c.stale, "no file yet: empty, no warning");
    PlanCacheShape a = shape_of(0, 256, 1024, 784, 2);
    check(plan_cache_find(&c, &a) == NULL, "an empty cache finds nothing");
    plan_cache_free(&c);
    make_saved_cache(&key, path, sizeof(path));
    struct stat st;
    memset(&st, 0, sizeof(st));
    int found = stat(path, &st) == 0;
    check(found && (size_t)st.st_size == PLAN_CACHE_FILE_BYTES(3),
          "saved, the folder created: %s, %lld bytes", path, (long long)st.st_size);
    check(output_is_kind(path, OUT_PLAN), "the file is of the plan cache's kind (OUTPUT_PLAN_MAGIC)");
    size_t len = 0;
    uint8_t *bytes = slurp(path, &len);
    const uint8_t *p = bytes + 8;
    check(bytes && pc_get(&p) == PLAN_CACHE_VERSION && strcmp((const char *)bytes + 12, key.gpu) == 0,
          "the version at 8, the GPU name at 12");
    p = bytes + 108;
    uint32_t sms = pc_get(&p), driver = pc_get(&p), build = pc_get(&p), count = pc_get(&p);
    check(sms == 132 && driver == 12080 && build == key.build_id && count == 3,
          "SM count, driver, build id and count at 108, 112, 116, 120");
    p = bytes + 124;
    check(pc_get(&p) == 0 && pc_get(&p) == 256 && pc_get(&p) == 1024 && pc_get(&p) == 784,
          "the first entry at 124: product, M, N, K");
    free(bytes);

    n = plan_cache_open(&c, &key, warn, sizeof(warn));
    check(n == 3 && !warn[0], "opened again: %d entries, no warning", n);
    const PlanCacheEntry *e = plan_cache_find(&c, &a);
    check(e && e->cfg == 11 && e->splits == 4 && e->us == 5.25f, "found: cfg 11, 4 splits, 5.25 us");
    PlanCacheShape b = shape_of(1, 256, 784, 1024, 1), d = shape_of(2, 1024, 784, 256, 0);
    e = plan_cache_find(&c, &b);
    const PlanCacheEntry *f = plan_cache_find(&c, &d);
    check(e && e->cfg == 9 && e->splits == 8 && f && f->cfg == 22 && f->us == 3.0f, "and the other two");
    PlanCacheShape other = a;
    other.ranks = 2;
    check(plan_cache_find(&c, &other) == NULL, "another rank count is another shape");
    other = a;
    other.tf32 = 1;
    check(plan_cache_find(&c, &other) == NULL, "another precision is another shape");
    check(!c.changed && plan_cache_save(&c, err, sizeof(err)) == 0, "nothing changed: save writes nothing");
    plan_cache_put(&c, &a, 13, 1, 4.0f);
    e = plan_cache_find(&c, &a);
    check(c.n == 3 && e && e->cfg == 13 && e->splits == 1, "a put of the same shape replaces its entry");
    check(plan_cache_save(&c, err, sizeof(err)) == 0, "saved again");
    plan_cache_free(&c);
    n = plan_cache_open(&c, &key, warn, sizeof(warn));
    e = plan_cache_find(&c, &a);
    check(n == 3 && e && e->cfg == 13 && e->us == 4.0f, "the replacement read back");
    plan_cache_free(&c);
}

static void test_key_change(void) {
    section("a change of key is a miss");
    char path[SAFE_PATH_LEN], warn[1024], err[1024];
    setenv("MLP_PLAN_CACHE", tmpdir, 1);
    PlanCacheKey key = test_key();
    make_saved_cache(&key, path, sizeof(path));
    const char *names[] = {"another driver", "another build", "another SM count"};
    for (int i = 0; i < 3; i++) {
        PlanCacheKey k = key;
        if (i == 0) k.driver = 12090;
        if (i == 1) k.build_id ^= 1;
        if (i == 2) k.sms = 114;
        PlanCache c;
        int n = plan_cache_open(&c, &k, warn, sizeof(warn));
        check(n == 0 && c.stale && !warn[0], "%s: empty, no warning", names[i]);
        plan_cache_free(&c);
    }
    // the file of another GPU's name (only a copy or a rename puts one there)
    size_t len = 0;
    uint8_t *bytes = slurp(path, &len);
    PlanCache c;
    memset(&c, 0, sizeof(c));
    c.key = key;
    snprintf(c.key.gpu, sizeof(c.key.gpu), "NVIDIA H100 80GB HBM3");
    check(plan_cache_parse(&c, bytes, len, "x", warn, sizeof(warn)) == 0 && c.n == 0 && c.stale,
          "another GPU's name in the file: empty, no warning");
    plan_cache_free(&c);
    free(bytes);
    // a run with the new driver tunes, saves: the file is replaced with its key
    PlanCacheKey k = key;
    k.driver = 12090;
    plan_cache_open(&c, &k, warn, sizeof(warn));
    PlanCacheShape s = shape_of(0, 64, 128, 784, 0);
    plan_cache_put(&c, &s, 24, 8, 2.0f);
    check(plan_cache_save(&c, err, sizeof(err)) == 0, "the new driver's run saves");
    plan_cache_free(&c);
    int n = plan_cache_open(&c, &k, warn, sizeof(warn));
    check(n == 1 && plan_cache_find(&c, &s) != NULL, "the file now holds the new key's one entry");
    plan_cache_free(&c);
    n = plan_cache_open(&c, &key, warn, sizeof(warn));
    check(n == 0 && c.stale, "and the old key's run misses");
    plan_cache_free(&c);
}

static void test_damage(void) {
    section("damaged files: one warning, an empty cache");
    char path[SAFE_PATH_LEN];
    setenv("MLP_PLAN_CACHE", tmpdir, 1);
    PlanCacheKey key = test_key();
    make_saved_cache(&key, path, sizeof(path));
    size_t len = 0;
    uint8_t *good = slurp(path, &len);
    uint8_t *bad = (uint8_t *)malloc(len + 16);

    int flipped_ok = 1;
    for (size_t i = 0; i < len; i++) {
        memcpy(bad, good, len);
        bad[i] ^= (uint8_t)(1u << (i % 8));
        write_file(path, bad, len);
        PlanCache c;
        char warn[1024];
        plan_cache_open(&c, &key, warn, sizeof(warn));
        if (c.n != 0 || !warn[0] || strchr(warn, '\n')) {
            printf("    byte %zu flipped: %d entries, warning \"%s\"\n", i, c.n, warn);
            flipped_ok = 0;
        }
        plan_cache_free(&c);
    }
    check(flipped_ok, "a bit flipped in each of the %zu bytes: every one warned, none loaded", len);

    int cut_ok = 1;
    for (size_t k = 0; k < len; k++) {
        write_file(path, good, k);
        PlanCache c;
        char warn[1024];
        plan_cache_open(&c, &key, warn, sizeof(warn));
        if (c.n != 0 || !warn[0]) {
            printf("    cut at %zu bytes: %d entries, warning \"%s\"\n", k, c.n, warn);
            cut_ok = 0;
        }
        plan_cache_free(&c);
    }
    check(cut_ok, "cut at each length 0 .. %zu: every one warned, none loaded", len - 1);
    write_file(path, good, 60);
    expect_damaged(&key, "cut inside the header", "truncated", 0);
    write_file(path, good, len - 10);
    expect_damaged(&key, "cut inside the entries", "CRC-32", 0);

    memcpy(bad, good, len);
    memcpy(bad, "MLPCUCKP", 8);
    write_file(path, bad, len);
    expect_damaged(&key, "a checkpoint's magic", "not a plan cache", 0);

    memcpy(bad, good, len);
    memset(bad + len, 0, 8);
    uint8_t *q = bad + len + 4;
    pc_put(&q, (uint32_t)crc32(crc32(0L, Z_NULL, 0), bad, (uInt)(len + 4)));
    write_file(path, bad, len + 8);
    expect_damaged(&key, "8 trailing bytes (CRC-32 right)", "do not make its", 0);

    // forged: a right CRC-32 over impossible fields
    const uint32_t counts[] = {4, 1000000, 0xFFFFFFFFu};
    for (int i = 0; i < 3; i++) {
        memcpy(bad, good, len);
        q = bad + 120;
        pc_put(&q, counts[i]);
        q = bad + len - 4;
        pc_put(&q, (uint32_t)crc32(crc32(0L, Z_NULL, 0), bad, (uInt)(len - 4)));
        write_file(path, bad, len);
        char what[80];
        snprintf(what, sizeof(what), "a count of %u in a file of 3 (CRC-32 right)", counts[i]);
        expect_damaged(&key, what, "damaged", 0);
    }
    const struct { int offset; uint32_t value; const char *what; } fields[] = {
        {124, 3, "product 3"}, {128, 0, "M 0"}, {136, 0xFFFFFFFFu, "K -1"}, {148, 0, "ranks 0"},
        {156, 0, "0 splits"}, {160, 0x7FC00000u, "a NaN time"}, {160, 0xBF800000u, "a time of -1"},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        memcpy(bad, good, len);
        q = bad + fields[i].offset;
        pc_put(&q, fields[i].value);
        q = bad + len - 4;
        pc_put(&q, (uint32_t)crc32(crc32(0L, Z_NULL, 0), bad, (uInt)(len - 4)));
        write_file(path, bad, len);
        char what[80];
        snprintf(what, sizeof(what), "entry 1 with %s (CRC-32 right)", fields[i].what);
        expect_damaged(&key, what, "out of range", 0);
    }
    memcpy(bad, good, len);
    memset(bad + 12, 'x', PLAN_CACHE_GPU_NAME);
    q = bad + len - 4;
    pc_put(&q, (uint32_t)crc32(crc32(0L, Z_NULL, 0), bad, (uInt)(len - 4)));
    write_file(path, bad, len);
    expect_damaged(&key, "a GPU name with no end (CRC-32 right)", "no end", 0);
    memcpy(bad, good, len);
    bad[12 + PLAN_CACHE_GPU_NAME - 2] = 'x';
    q = bad + len - 4;
    pc_put(&q, (uint32_t)crc32(crc32(0L, Z_NULL, 0), bad, (uInt)(len - 4)));
    write_file(path, bad, len);
    expect_damaged(&key, "a byte after the GPU name's end (CRC-32 right)", "not padded", 0);

    // another format version with a right CRC-32: a newer mlp.cu's file, a miss like another key
    memcpy(bad, good, len);
    q = bad + 8;
    pc_put(&q, PLAN_CACHE_VERSION + 1);
    q = bad + len - 4;
    pc_put(&q, (uint32_t)crc32(crc32(0L, Z_NULL, 0), bad, (uInt)(len - 4)));
    write_file(path, bad, len);
    PlanCache c;
    char warn[1024], err[1024];
    int n = plan_cache_open(&c, &key, warn, sizeof(warn));
    check(n == 0 && c.stale && !warn[0], "another format version (CRC-32 right): a miss, no warning");
    plan_cache_free(&c);

    // after damage, a save replaces the file with a good one
    write_file(path, good, len - 1);
    plan_cache_open(&c, &key, warn, sizeof(warn));
    PlanCacheShape s = shape_of(0, 8, 8, 8, 0);
    plan_cache_put(&c, &s, 0, 1, 1.0f);
    check(plan_cache_save(&c, err, sizeof(err)) == 0, "a damaged file is replaced at the next save");
    plan_cache_free(&c);
    n = plan_cache_open(&c, &key, warn, sizeof(warn));
    check(n == 1 && !warn[0], "and reads back whole");
    plan_cache_free(&c);

    unlink(path);
    mkdir(path, 0755);
    expect_damaged(&key, "a directory in the file's place", "a directory", 0);
    plan_cache_open(&c, &key, warn, sizeof(warn));
    plan_cache_put(&c, &s, 0, 1, 1.0f);
    check(plan_cache_save(&c, err, sizeof(err)) == -1 && strstr(err, "directory"), "and save refuses it: \"%s\"", err);
    plan_cache_free(&c);
    rmdir(path);
    free(good);
    free(bad);
}

static void test_other_kind(void) {
    section("a save never replaces a file of another kind");
    char path[SAFE_PATH_LEN], warn[1024], err[1024];
    setenv("MLP_PLAN_CACHE", tmpdir, 1);
    PlanCacheKey key = test_key();
    plan_cache_path(path, sizeof(path), key.gpu);
    const char *log = "# train_mlp_fast -m 784,128,10\nkind,epoch,step,loss\ntrain,1,100,0.5\n";
    write_file(path, log, strlen(log));
    PlanCache c;
    plan_cache_open(&c, &key, warn, sizeof(warn));
    check(c.n == 0 && strstr(warn, "not a plan cache"), "a CSV log in the cache's place: read as empty, \"%s\"", warn);
    PlanCacheShape s = shape_of(1, 32, 64, 128, 3);
    plan_cache_put(&c, &s, 5, 2, 9.0f);
    int rc = plan_cache_save(&c, err, sizeof(err));
    check(rc == -1 && strstr(err, "not a plan cache") && strstr(err, "---> try:"), "save refuses: \"%s\"", err);
    size_t len = 0;
    uint8_t *now = slurp(path, &len);
    check(now && len == strlen(log) && memcmp(now, log, len) == 0, "the log is as it was");
    free(now);
    write_file(path, "", 0);
    check(plan_cache_save(&c, err, sizeof(err)) == 0, "an empty file is replaced");
    plan_cache_free(&c);
    check(plan_cache_open(&c, &key, warn, sizeof(warn)) == 1, "and holds the cache");
    plan_cache_free(&c);
    unlink(path);
}

int main(void) {
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/mlpcu_test_plan_cache_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        printf("cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    test_where();
    test_round_trip();
    test_key_change();
    test_damage();
    test_other_kind();
    char cmd[400];
    if (!getenv("KEEP_TMP")) {
        snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
        if (system(cmd) != 0) printf("  (could not remove %s)\n", tmpdir);
    }
    return test_exit();
}
