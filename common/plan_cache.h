/*
common/plan_cache.h: the fast trainer's cache of measured matmul choices. The autotune
(kernels/fast/matmul/tune.h) times every candidate of a product once on this machine; the
winner is kept here, so a later run of the same binary on the same GPU takes it without timing.

    PlanCache c;
    char warn[512], err[512];
    plan_cache_open(&c, &key, warn, sizeof(warn));     // loads the file; a damaged one: one line in warn
    const PlanCacheEntry *e = plan_cache_find(&c, &shape);
    plan_cache_put(&c, &shape, cfg, splits, us);       // a new or better choice
    plan_cache_save(&c, err, sizeof(err));             // the project's safe write, when anything changed
    plan_cache_free(&c);

Where the file lives (plan_cache_dir): the folder $MLP_PLAN_CACHE if it is set, else
$XDG_CACHE_HOME/mlp.cu, else $HOME/.cache/mlp.cu; created when saving. One file per GPU model,
plans-<GPU name>.bin (the name with every character but letters, digits, '.' and '-' made '_':
plans-NVIDIA_H200.bin), so that machines with different GPUs can share a home folder.

What a choice depends on, and so the key:
    the file     the GPU's name and SM count, the CUDA driver's version, and the binary's build id (a
                 CRC-32 of the program's own file): a file with another key is taken as empty and
                 replaced at the next save, since a rebuilt kernel or another driver times differently
    each entry   the product (0 forward, 1 dinp, 2 dweight: MfProduct), its shape M, N, K, the
                 precision argument (the matmul library's tf32 argument: 0 FP32, MF_TF32_ROUND, ...),
                 whether K may be split through scratch, and the number of ranks of the run
    the choice   the tile configuration's id and the number of K splits, and its measured time

The format, every field little-endian (4-byte integers, IEEE floats), CRC last as in the checkpoint
(run/checkpoint.h):

    offset  bytes    field
    0       8        magic "MLPCUPLN" (OUTPUT_PLAN_MAGIC, common/safe_write.h)
    8       4        format version (PLAN_CACHE_VERSION)
    12      96       GPU name, zero-padded (at least one zero, and zeros only after it)
    108     4        SM count
    112     4        CUDA driver version (cudaDriverGetVersion's number: 12080 for 12.8)
    116     4        build id
    120     4        entry count n (at most PLAN_CACHE_MAX_ENTRIES)
    124     40 * n   entries: product, M, N, K, precision, have_scratch, ranks, cfg, splits (int32 each),
                     the time in microseconds (float32)
    124+40n 4        CRC-32 (zlib's crc32) of every byte before it

Reading trusts nothing: a file that is truncated, longer than its count says, of another magic,
whose CRC-32 does not match, or whose count or fields are out of range is ignored with one line
in the caller's warning buffer (the trainer prints it as "warning: ..."), and the cache starts
empty; the next save replaces the file. Never a crash, never an exit. A save never replaces a
file that is not a plan cache (output_is_kind, the rule of common/safe_write.h's output_check: a
CSV log someone put there stays), and goes through safe_write (a temporary file renamed over the
old one). Two runs saving at once: the last rename wins, and what the other tuned is tuned again
next time.

Host-only C: compiles as C (gcc) and as C++ (nvcc). Needs zlib (-lz).
*/
#ifndef MLP_PLAN_CACHE_H
#define MLP_PLAN_CACHE_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "safe_write.h"  // SafeWrite, output_is_kind, OUTPUT_PLAN_MAGIC
#include "utils.h"       // make_parent_dirs

#define PLAN_CACHE_VERSION 1u
#define PLAN_CACHE_GPU_NAME 96            // bytes of the GPU name field, its zero included
#define PLAN_CACHE_MAX_ENTRIES 65536      // far more products than any run tunes
#define PLAN_CACHE_HEADER_BYTES 124       // magic .. entry count
#define PLAN_CACHE_ENTRY_BYTES 40
#define PLAN_CACHE_FILE_BYTES(n) ((size_t)PLAN_CACHE_HEADER_BYTES + (size_t)PLAN_CACHE_ENTRY_BYTES * (n) + 4)

// the machine part of the key: one per file
typedef struct {
    char gpu[PLAN_CACHE_GPU_NAME];  // cudaDeviceProp.name
    int sms;                        // multiprocessors
    int driver;                     // cudaDriverGetVersion
    uint32_t build_id;              // plan_cache_build_id()
} PlanCacheKey;

// the product part of the key: one per entry
typedef struct {
    int prod;          // 0 forward, 1 dinp, 2 dweight (MfProduct)
    int M, N, K;       // the product C(M, N) = A . B over K (matmul_fast.h: M = B, N = OUT, K = IN forward)
    int tf32;          // the precision argument: 0, MF_TF32_ROUND, MF_TF32_EXACT, MF_BF16, ...
    int have_scratch;  // 1: K may be split through scratch (dweight)
    int ranks;         // GPUs of the run (1 without -g)
} PlanCacheShape;

typedef struct {
    PlanCacheShape shape;
    int cfg, splits;   // the choice: the configuration's id and the K splits (MatmulFastPlan's)
    float us;          // its measured time, microseconds
} PlanCacheEntry;

typedef struct {
    PlanCacheKey key;             // what plan_cache_open was given
    PlanCacheEntry *entries;      // n of them (cap allocated)
    int n, cap;
    int changed;                  // put since the load: save has something to write
    int stale;                    // the file held another key (other driver, build or GPU): replaced at save
    char path[SAFE_PATH_LEN];     // the file; empty when no folder could be named
} PlanCache;

// ----------------------------------------------------------------------------
// the key

// key = (gpu, sms, driver, build_id); gpu is cut to PLAN_CACHE_GPU_NAME - 1 bytes
static inline void plan_cache_key(PlanCacheKey *key, const char *gpu, int sms, int driver, uint32_t build_id) {
    memset(key, 0, sizeof(*key));
    snprintf(key->gpu, sizeof(key->gpu), "%s", gpu);
    key->sms = sms;
    key->driver = driver;
    key->build_id = build_id;
}

// CRC-32 of the program's own file (/proc/self/exe), computed once: any rebuild changes it. 0 when
// the file cannot be read (then every build shares one id, and only the driver and GPU tell apart).
static inline uint32_t plan_cache_build_id(void) {
    static int done = 0;
    static uint32_t id = 0;
    if (done) return id;
    done = 1;
    FILE *f = fopen("/proc/self/exe", "rb");
    if (!f) return id;
    unsigned char *buf = (unsigned char *)malloc(1 << 20);
    uLong crc = crc32(0L, Z_NULL, 0);
    size_t k;
    while (buf && (k = fread(buf, 1, 1 << 20, f)) > 0) crc = crc32(crc, buf, (uInt)k);
    if (buf && !ferror(f)) id = (uint32_t)crc;
    free(buf);
    fclose(f);
    return id;
}

// ----------------------------------------------------------------------------
// where the file lives

// The cache's folder into buf (n bytes): $MLP_PLAN_CACHE, else $XDG_CACHE_HOME/mlp.cu, else
// $HOME/.cache/mlp.cu (an empty variable counts as unset). 0, or -1 when none is set or the path
// does not fit. Creates nothing (plan_cache_save does).
static inline int plan_cache_dir(char *buf, size_t n) {
    const char *own = getenv("MLP_PLAN_CACHE"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int k;
    if (own && own[0]) k = snprintf(buf, n, "%s", own);
    else if (xdg && xdg[0]) k = snprintf(buf, n, "%s/mlp.cu", xdg);
    else if (home && home[0]) k = snprintf(buf, n, "%s/.cache/mlp.cu", home);
    else k = -1;
    if (k < 0 || (size_t)k >= n) {
        if (n > 0) buf[0] = '\0';
        return -1;
    }
    return 0;
}

// The file of GPU gpu into buf: DIR/plans-<gpu with [^A-Za-z0-9.-] made '_'>.bin. 0, or -1 (no folder,
// or too long).
static inline int plan_cache_path(char *buf, size_t n, const char *gpu) {
    char dir[SAFE_PATH_LEN], name[PLAN_CACHE_GPU_NAME];
    size_t i = 0;
    for (; gpu[i] && i + 1 < sizeof(name); i++) {
        char ch = gpu[i];
        int keep = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                   ch == '-';
        name[i] = keep ? ch : '_';
    }
    name[i] = '\0';
    if (plan_cache_dir(dir, sizeof(dir)) != 0) return -1;
    int k = snprintf(buf, n, "%s/plans-%s.bin", dir, i ? name : "unknown");
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

// ----------------------------------------------------------------------------
// the entries in memory

static inline int plan_cache_same_shape(const PlanCacheShape *a, const PlanCacheShape *b) {
    return a->prod == b->prod && a->M == b->M && a->N == b->N && a->K == b->K && a->tf32 == b->tf32 &&
           a->have_scratch == b->have_scratch && a->ranks == b->ranks;
}

// The entry of this shape, or NULL.
static inline const PlanCacheEntry *plan_cache_find(const PlanCache *c, const PlanCacheShape *shape) {
    for (int i = 0; i < c->n; i++)
        if (plan_cache_same_shape(&c->entries[i].shape, shape)) return &c->entries[i];
    return NULL;
}

// Stores (cfg, splits, us) for this shape, replacing the entry of the same shape. 0, or -1 when the
// cache holds PLAN_CACHE_MAX_ENTRIES already (nothing stored: the choice is only not remembered).
static inline int plan_cache_put(PlanCache *c, const PlanCacheShape *shape, int cfg, int splits, float us) {
    PlanCacheEntry *e = (PlanCacheEntry *)plan_cache_find(c, shape);
    if (!e) {
        if (c->n >= PLAN_CACHE_MAX_ENTRIES) return -1;
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 16;
            PlanCacheEntry *grown = (PlanCacheEntry *)realloc(c->entries, (size_t)cap * sizeof(PlanCacheEntry));
            if (!grown) die("a smaller model (-m)", "out of host memory growing the plan cache to %d entries", cap);
            c->entries = grown;
            c->cap = cap;
        }
        e = &c->entries[c->n++];
        e->shape = *shape;
    }
    e->cfg = cfg;
    e->splits = splits;
    e->us = us;
    c->changed = 1;
    return 0;
}

// ----------------------------------------------------------------------------
// the file's bytes

static inline void pc_put(uint8_t **p, uint32_t v) {
    for (int i = 0; i < 4; i++) (*p)[i] = (uint8_t)(v >> (8 * i));
    *p += 4;
}
static inline uint32_t pc_get(const uint8_t **p) {
    const uint8_t *b = *p;
    *p += 4;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static inline uint32_t pc_float_bits(float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    return v;
}

// Whether an entry read from a file is one a writer could have made: every field in its range.
static inline int plan_cache_entry_sane(const PlanCacheEntry *e) {
    const PlanCacheShape *s = &e->shape;
    return s->prod >= 0 && s->prod <= 2 && s->M >= 1 && s->N >= 1 && s->K >= 1 && s->tf32 >= 0 && s->tf32 <= 15 &&
           (s->have_scratch == 0 || s->have_scratch == 1) && s->ranks >= 1 && s->ranks <= 65536 && e->cfg >= 0 &&
           e->cfg < 65536 && e->splits >= 1 && e->splits <= 64 && isfinite(e->us) && e->us >= 0.0f;
}

// The file's bytes for c's key and entries, into a new buffer (*len bytes; the caller frees it).
static inline uint8_t *plan_cache_bytes(const PlanCache *c, size_t *len) {
    *len = PLAN_CACHE_FILE_BYTES(c->n);
    uint8_t *buf = (uint8_t *)mallocCheck(*len), *p = buf;
    memcpy(p, OUTPUT_PLAN_MAGIC, 8);
    p += 8;
    pc_put(&p, PLAN_CACHE_VERSION);
    memset(p, 0, PLAN_CACHE_GPU_NAME);
    memcpy(p, c->key.gpu, strnlen(c->key.gpu, PLAN_CACHE_GPU_NAME - 1));
    p += PLAN_CACHE_GPU_NAME;
    pc_put(&p, (uint32_t)c->key.sms);
    pc_put(&p, (uint32_t)c->key.driver);
    pc_put(&p, c->key.build_id);
    pc_put(&p, (uint32_t)c->n);
    for (int i = 0; i < c->n; i++) {
        const PlanCacheEntry *e = &c->entries[i];
        const int f[9] = {e->shape.prod, e->shape.M, e->shape.N, e->shape.K, e->shape.tf32, e->shape.have_scratch,
                          e->shape.ranks, e->cfg, e->splits};
        for (int j = 0; j < 9; j++) pc_put(&p, (uint32_t)f[j]);
        pc_put(&p, pc_float_bits(e->us));
    }
    pc_put(&p, (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)(*len - 4)));
    return buf;
}

// Reads a plan cache's bytes (buf, len) into c, whose key is set and which holds no entries. 0: the
// entries are loaded, or the file is of another key or format version (c->stale set, no entries, no
// warning); -1: the bytes are damaged, one line in warn naming what (c left empty). `what` names the
// bytes in the line (the file's path).
static inline int plan_cache_parse(PlanCache *c, const uint8_t *buf, size_t len, const char *what, char *warn,
                                   size_t nwarn) {
    if (len < 8 || memcmp(buf, OUTPUT_PLAN_MAGIC, 8) != 0) {
        snprintf(warn, nwarn, "%s is not a plan cache of mlp.cu (its first bytes are not %s): ignored", what,
                 OUTPUT_PLAN_MAGIC);
        return -1;
    }
    if (len < PLAN_CACHE_FILE_BYTES(0)) {
        snprintf(warn, nwarn, "the plan cache %s is truncated (%zu bytes, at least %zu): ignored, and replaced when "
                 "a run saves", what, len, PLAN_CACHE_FILE_BYTES(0));
        return -1;
    }
    const uint8_t *p = buf + len - 4;
    uint32_t stored = pc_get(&p), crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), buf, (uInt)(len - 4));
    if (stored != crc) {
        snprintf(warn, nwarn, "the plan cache %s is damaged (its CRC-32 is %08x, its bytes give %08x; truncated or "
                 "changed after it was written): ignored, and replaced when a run saves", what, stored, crc);
        return -1;
    }
    p = buf + 8;
    uint32_t version = pc_get(&p);
    const uint8_t *name = p;
    p += PLAN_CACHE_GPU_NAME;
    PlanCacheKey k;
    memset(&k, 0, sizeof(k));
    k.sms = (int)pc_get(&p);
    k.driver = (int)pc_get(&p);
    k.build_id = pc_get(&p);
    uint32_t n = pc_get(&p);
    if (version != PLAN_CACHE_VERSION) {  // another mlp.cu's format (the CRC-32 says it is not damage)
        c->stale = 1;
        return 0;
    }
    const uint8_t *end = (const uint8_t *)memchr(name, 0, PLAN_CACHE_GPU_NAME);
    int padded = end != NULL;  // zeros from the name's end to the field's, as the writer leaves them
    for (const uint8_t *q = end; padded && q < name + PLAN_CACHE_GPU_NAME; q++) padded = *q == 0;
    if (!padded) {
        snprintf(warn, nwarn, "the plan cache %s is damaged (its GPU name %s): ignored", what,
                 end ? "is not padded with zeros" : "has no end");
        return -1;
    }
    if (n > PLAN_CACHE_MAX_ENTRIES || len != PLAN_CACHE_FILE_BYTES(n)) {
        snprintf(warn, nwarn, "the plan cache %s is damaged (it counts %u entries, %s %zu bytes): ignored", what, n,
                 n > PLAN_CACHE_MAX_ENTRIES ? "more than any cache holds, in" : "which do not make its", len);
        return -1;
    }
    memcpy(k.gpu, name, PLAN_CACHE_GPU_NAME);
    if (strcmp(k.gpu, c->key.gpu) != 0 || k.sms != c->key.sms || k.driver != c->key.driver ||
        k.build_id != c->key.build_id) {
        c->stale = 1;
        return 0;
    }
    PlanCacheEntry *entries = (PlanCacheEntry *)mallocCheck((size_t)(n ? n : 1) * sizeof(PlanCacheEntry));
    for (uint32_t i = 0; i < n; i++) {
        PlanCacheEntry *e = &entries[i];
        int f[9];
        for (int j = 0; j < 9; j++) f[j] = (int)pc_get(&p);
        uint32_t bits = pc_get(&p);
        e->shape.prod = f[0], e->shape.M = f[1], e->shape.N = f[2], e->shape.K = f[3], e->shape.tf32 = f[4];
        e->shape.have_scratch = f[5], e->shape.ranks = f[6], e->cfg = f[7], e->splits = f[8];
        memcpy(&e->us, &bits, 4);
        if (!plan_cache_entry_sane(e)) {
            snprintf(warn, nwarn, "the plan cache %s is damaged (entry %u of %u has a field out of range): ignored",
                     what, i + 1, n);
            free(entries);
            return -1;
        }
    }
    c->entries = entries;
    c->n = c->cap = (int)n;
    return 0;
}

// ----------------------------------------------------------------------------
// open, save, free

// Starts c for key, with the entries of the file of key's GPU (plan_cache_path) when it exists and
// holds that key. warn: "" or one line (a damaged or unreadable file, no folder to keep it in) for
// the caller to print as "warning: ..."; the cache then starts empty. Returns the entries loaded.
static inline int plan_cache_open(PlanCache *c, const PlanCacheKey *key, char *warn, size_t nwarn) {
    memset(c, 0, sizeof(*c));
    c->key = *key;
    c->key.gpu[PLAN_CACHE_GPU_NAME - 1] = '\0';
    if (nwarn > 0) warn[0] = '\0';
    if (plan_cache_path(c->path, sizeof(c->path), c->key.gpu) != 0) {
        c->path[0] = '\0';
        snprintf(warn, nwarn, "no folder for the plan cache (HOME, XDG_CACHE_HOME and MLP_PLAN_CACHE are unset, or "
                 "too long): tuned plans are not kept ---> try: MLP_PLAN_CACHE=DIR");
        return 0;
    }
    struct stat st;
    if (stat(c->path, &st) != 0) {
        if (errno != ENOENT)
            snprintf(warn, nwarn, "cannot read the plan cache %s: %s", c->path, strerror(errno));
        return 0;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(warn, nwarn, "the plan cache %s is %s, not a file: ignored", c->path, file_type_name(st.st_mode));
        return 0;
    }
    // the file's size (never its count) decides what is read; a file larger than any cache is damage
    size_t len = (size_t)st.st_size;
    if ((uint64_t)st.st_size > PLAN_CACHE_FILE_BYTES(PLAN_CACHE_MAX_ENTRIES)) {
        snprintf(warn, nwarn, "the plan cache %s is damaged (%lld bytes, more than any cache holds): ignored", c->path,
                 (long long)st.st_size);
        return 0;
    }
    FILE *f = fopen(c->path, "rb");
    if (!f) {
        snprintf(warn, nwarn, "cannot read the plan cache %s: %s", c->path, strerror(errno));
        return 0;
    }
    uint8_t *buf = (uint8_t *)mallocCheck(len ? len : 1);
    size_t got = fread(buf, 1, len, f);
    int more = fgetc(f) != EOF;  // it grew since the stat: another writer, read it next time
    fclose(f);
    if (got != len || more) {
        snprintf(warn, nwarn, "the plan cache %s changed while it was read: ignored", c->path);
        free(buf);
        return 0;
    }
    plan_cache_parse(c, buf, len, c->path, warn, nwarn);
    free(buf);
    return c->n;
}

// Writes c to its file when anything was put since the load (else does nothing): creates the folder,
// refuses to replace a file that is not a plan cache, and writes with safe_write (a temporary file
// renamed over the old one). 0, or -1 and one line in err.
static inline int plan_cache_save(PlanCache *c, char *err, size_t nerr) {
    if (!c->changed) return 0;
    if (!c->path[0]) {
        snprintf(err, nerr, "no folder for the plan cache: tuned plans are not kept ---> try: MLP_PLAN_CACHE=DIR");
        return -1;
    }
    if (make_parent_dirs(c->path) != 0) {
        snprintf(err, nerr, "cannot create the folder of the plan cache %s: %s ---> try: MLP_PLAN_CACHE=DIR", c->path,
                 strerror(errno));
        return -1;
    }
    if (file_exists(c->path) && !output_is_kind(c->path, OUT_PLAN)) {
        snprintf(err, nerr, "%s exists and is not a plan cache of mlp.cu: not replaced ---> try: move it away, or "
                 "MLP_PLAN_CACHE=another folder", c->path);
        return -1;
    }
    SafeWrite w;
    if (safe_write_open(&w, c->path, err, nerr) != 0) return -1;
    size_t len;
    uint8_t *buf = plan_cache_bytes(c, &len);
    size_t put = fwrite(buf, 1, len, w.f);
    free(buf);
    if (put != len) {
        snprintf(err, nerr, "%s: short write: %s", c->path, strerror(errno));
        safe_write_abort(&w);
        return -1;
    }
    if (safe_write_commit(&w, err, nerr) != 0) return -1;
    c->changed = 0;
    c->stale = 0;
    return 0;
}

static inline void plan_cache_free(PlanCache *c) {
    free(c->entries);
    c->entries = NULL;
    c->n = c->cap = 0;
}

#endif // MLP_PLAN_CACHE_H
