/*
common/safe_write.h: writing a file so that nothing can clobber data, whatever happens.

    SafeWrite w;
    if (safe_write_open(&w, "logs/errors.png", err, sizeof(err)) != 0) ...   // one line in err
    fwrite(bytes, 1, n, w.f);                                               // as many writes as needed
    if (safe_write_commit(&w, err, sizeof(err)) != 0) ...   // one line in err; the old file is untouched
    (or safe_write_abort(&w): give up, nothing changes)

How: the bytes go to a new temporary file in the destination's own directory, created exclusively
by mkstemp (O_CREAT|O_EXCL with a unique name: a symlink or FIFO planted at some name is never
followed or opened, and two runs writing the same destination never share a temporary file).
commit flushes it, fsyncs it, closes it, renames it over the destination (atomic within one file
system, which is why the temporary file lives in the same directory) and fsyncs the directory. A
crash, a kill -9 or a full disk at any moment leaves the old file or the new one, never half of one.

safe_write_check(dest) says early (before any work) whether a destination can be written: not a
directory, not a FIFO or device, in a directory that exists and that we may write. path_same_file()
tells whether two paths name one file (an output path that would overwrite an input).

The temporary file's name holds its writer's process id (".errors.png.tmp.PID.Ab12Cd"), so that a
writer killed by kill -9 can be told from a live one: safe_write_open first removes the temporary
files of the same destination whose writer is gone, never those of a running process.

output_check(flag, path, kind, inputs, data_dir, force) is the rule every output of the trainers
follows (-o, -c, -i, and any later output: exports, caches), checked before any work:
  - never the same file as an input (device and inode: hard links and symbolic links count);
  - never inside the data directory, by any path (a sibling such as data2/ beside data/ is fine),
    nor the same file as anything in it;
  - an existing file is replaced only when it is of the output's kind (output_is_kind: a CSV log
    mlp.cu wrote, an mlp.cu checkpoint, a PNG, ...) or empty, unless force (-F 1) is given; force
    never overrides the two rules above;
  - a kind with a fixed extension (.png, .safetensors, .onnx) refuses a name without it.
path_lock() takes an exclusive lock that outlives the safe write's rename (which swaps the file's
inode): flock on a hidden DIR/.NAME.lock beside the file, so two runs never write one checkpoint.

For checkpoints, logs written in one go, PNGs: anything written whole. (A log written line by line
as a run goes is a different problem: it must survive a crash with its rows, so it is appended to.)
*/
#ifndef MLP_SAFE_WRITE_H
#define MLP_SAFE_WRITE_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAFE_PATH_LEN 4096

typedef struct {
    FILE *f;                    // write the file's bytes here
    char dest[SAFE_PATH_LEN];   // where the file goes
    char tmp[SAFE_PATH_LEN];    // the temporary file, until commit renames it to dest
} SafeWrite;

// "what is this", for messages about a path that is not a regular file
static inline const char *file_type_name(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISLNK(mode)) return "a symbolic link";
    return "not a regular file";
}

// The directory part of path ("." when it has none) into dir; -1 when it does not fit.
static inline int path_dir(const char *path, char *dir, size_t n) {
    const char *slash = strrchr(path, '/');
    if (!slash) return snprintf(dir, n, ".") >= (int)n ? -1 : 0;
    size_t len = slash == path ? 1 : (size_t)(slash - path);  // "/x" -> "/"
    if (len >= n) return -1;
    memcpy(dir, path, len);
    dir[len] = '\0';
    return 0;
}

// 1 when a and b both exist and are the same file (through links, "./", hard links), else 0
static inline int path_same_file(const char *a, const char *b) {
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// 0 when dest can be written by safe_write_open, else -1 and one line in err. An existing
// regular file (or a link to one: the link itself is replaced, never its target) is fine.
static inline int safe_write_check(const char *dest, char *err, size_t errlen) {
    char dir[SAFE_PATH_LEN];
    struct stat st;
    if (!dest[0]) {
        snprintf(err, errlen, "an empty path is not a file name");
        return -1;
    }
    if (strlen(dest) + 16 >= SAFE_PATH_LEN || path_dir(dest, dir, sizeof(dir)) != 0) {
        snprintf(err, errlen, "%.200s...: path too long", dest);
        return -1;
    }
    if (dest[strlen(dest) - 1] == '/' || (stat(dest, &st) == 0 && S_ISDIR(st.st_mode))) {
        snprintf(err, errlen, "%s: is a directory; give a file name", dest);
        return -1;
    }
    if (stat(dest, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: is %s, not a file this program may replace", dest, file_type_name(st.st_mode));
        return -1;
    }
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "%s: its directory %s does not exist", dest, dir);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: %s is not a directory", dest, dir);
        return -1;
    }
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(err, errlen, "%s: cannot write in the directory %s: %s", dest, dir, strerror(errno));
        return -1;
    }
    return 0;
}

// Removes the temporary files of dest (".BASE.tmp.PID.XXXXXX" beside it) whose writer, the process
// PID, no longer exists: what a kill -9 in the middle of a write leaves. A file whose writer runs
// (or whose PID is now another live process, or a process of another user) is left alone. Returns
// how many were removed.
static inline int safe_write_remove_stale(const char *dest) {
    char dir[SAFE_PATH_LEN], prefix[SAFE_PATH_LEN], full[SAFE_PATH_LEN];
    if (path_dir(dest, dir, sizeof(dir)) != 0) return 0;
    const char *base = strrchr(dest, '/') ? strrchr(dest, '/') + 1 : dest;
    if (snprintf(prefix, sizeof(prefix), ".%s.tmp.", base) >= (int)sizeof(prefix)) return 0;
    DIR *d = opendir(dir);
    if (!d) return 0;
    size_t k = strlen(prefix);
    int removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, prefix, k) != 0) continue;
        char *end;
        long pid = strtol(e->d_name + k, &end, 10);
        if (end == e->d_name + k || *end != '.' || strlen(end) != 7 || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;  // alive, or not ours to judge
        if (snprintf(full, sizeof(full), "%s/%s", dir, e->d_name) < (int)sizeof(full) && unlink(full) == 0) removed++;
    }
    closedir(d);
    return removed;
}

// Creates the temporary file for dest; w->f is ready for writing. 0, or -1 and one line in err.
static inline int safe_write_open(SafeWrite *w, const char *dest, char *err, size_t errlen) {
    memset(w, 0, sizeof(*w));
    if (safe_write_check(dest, err, errlen) != 0) return -1;
    char dir[SAFE_PATH_LEN];
    path_dir(dest, dir, sizeof(dir));
    const char *base = strrchr(dest, '/') ? strrchr(dest, '/') + 1 : dest;
    snprintf(w->dest, sizeof(w->dest), "%s", dest);
    safe_write_remove_stale(dest);
    // a hidden name beside the destination, with the writer's PID: ".errors.png.tmp.1234.Ab12Cd"
    if (snprintf(w->tmp, sizeof(w->tmp), "%s/.%s.tmp.%ld.XXXXXX", dir, base, (long)getpid()) >= (int)sizeof(w->tmp)) {
        snprintf(err, errlen, "%.200s...: path too long", dest);
        return -1;
    }
    int fd = mkstemp(w->tmp);  // O_CREAT | O_EXCL, mode 0600
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create a temporary file in %s: %s", dest, dir, strerror(errno));
        return -1;
    }
    // the final file gets the mode the destination has, or a new file's usual mode (0666 less
    // the umask: umask can only be read by setting it, so it is set back at once)
    struct stat st;
    mode_t mode;
    if (stat(dest, &st) == 0) {
        mode = st.st_mode & 07777;
    } else {
        mode_t mask = umask(022);
        umask(mask);
        mode = 0666 & ~mask;
    }
    if (fchmod(fd, mode) != 0) { /* not fatal: the file stays 0600 */ }
    w->f = fdopen(fd, "wb");
    if (!w->f) {
        snprintf(err, errlen, "%s: cannot open the temporary file %s: %s", dest, w->tmp, strerror(errno));
        close(fd);
        unlink(w->tmp);
        return -1;
    }
    return 0;
}

// Gives up: closes and removes the temporary file; dest is untouched. Safe to call twice.
static inline void safe_write_abort(SafeWrite *w) {
    if (w->f) fclose(w->f);
    w->f = NULL;
    if (w->tmp[0]) unlink(w->tmp);
    w->tmp[0] = '\0';
}

// Flushes, fsyncs and closes the temporary file, then renames it over dest. On any failure (a
// full disk above all) the temporary file is removed, dest is untouched, and err says why.
static inline int safe_write_commit(SafeWrite *w, char *err, size_t errlen) {
    if (!w->f) {
        snprintf(err, errlen, "%s: nothing to commit (the file was not opened)", w->dest);
        return -1;
    }
    int fd = fileno(w->f);
    const char *failed = NULL;
    if (fflush(w->f) != 0 || ferror(w->f)) failed = "writing";
    else if (fsync(fd) != 0) failed = "syncing";
    int saved = errno;
    if (fclose(w->f) != 0 && !failed) {
        failed = "closing";
        saved = errno;
    }
    w->f = NULL;
    if (!failed && rename(w->tmp, w->dest) != 0) {
        failed = "renaming the temporary file to";
        saved = errno;
    }
    if (failed) {
        snprintf(err, errlen, "%s: %s failed: %s", w->dest, failed, strerror(saved ? saved : EIO));
        safe_write_abort(w);
        return -1;
    }
    w->tmp[0] = '\0';
    // make the rename itself durable: fsync the directory (best effort: some file systems refuse)
    char dir[SAFE_PATH_LEN];
    if (path_dir(w->dest, dir, sizeof(dir)) == 0) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY);
        if (dfd >= 0) {
            if (fsync(dfd) != 0) { /* best effort */ }
            close(dfd);
        }
    }
    return 0;
}

// ----------------------------------------------------------------------------
// the rule for outputs

// The kinds of file the trainers write. Each is recognised by its first bytes (output_is_kind);
// the kinds with a fixed extension refuse a name without it.
typedef enum { OUT_LOG, OUT_CHECKPOINT, OUT_PNG, OUT_SAFETENSORS, OUT_ONNX, OUT_PLAN } OutputKind;

#ifndef OUTPUT_PLAN_MAGIC
#define OUTPUT_PLAN_MAGIC "MLPCUPLN"  // the first bytes of the fast trainer's plan cache
#endif

static inline const char *output_kind_name(OutputKind kind) {
    static const char *const names[] = {"a CSV log of mlp.cu", "an mlp.cu checkpoint", "a PNG picture",
                                        "a safetensors file", "an ONNX model", "a plan cache of mlp.cu"};
    return names[kind];
}

// the extension a kind's file must have, or NULL
// -E's kind, from its extension: a .safetensors file, else an ONNX graph (run/export.h refuses others)
static inline OutputKind output_kind_of_export(const char *path) {
    size_t n = strlen(path), k = strlen(".safetensors");
    return n > k && strcasecmp(path + n - k, ".safetensors") == 0 ? OUT_SAFETENSORS : OUT_ONNX;
}

static inline const char *output_kind_extension(OutputKind kind) {
    return kind == OUT_PNG ? ".png" : kind == OUT_SAFETENSORS ? ".safetensors" : kind == OUT_ONNX ? ".onnx" : NULL;
}

// 1 when the regular file at path holds a file of this kind (judged by its first bytes), or is
// empty (nothing to lose); 0 otherwise (unreadable counts as not of the kind)
static inline int output_is_kind(const char *path, OutputKind kind) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    char head[512];
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, head, sizeof(head) - 1) : -1;
    close(fd);
    if (n < 0) return 0;
    if (n == 0) return 1;
    head[n] = '\0';
    switch (kind) {
    case OUT_LOG: {  // "# train_mlp...: flags" then the header "kind,epoch,..."
        const char *nl = (const char *)memchr(head, '\n', (size_t)n);
        return strncmp(head, "# train_mlp", 11) == 0 && nl && strncmp(nl + 1, "kind,epoch,", 11) == 0;
    }
    case OUT_CHECKPOINT: return n >= 8 && memcmp(head, "MLPCUCKP", 8) == 0;
    case OUT_PNG: return n >= 8 && memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0;
    case OUT_SAFETENSORS: {  // a u64 header length, then the JSON header
        uint64_t len = 0;
        for (int i = 7; n >= 9 && i >= 0; i--) len = len << 8 | (uint8_t)head[i];
        return n >= 9 && head[8] == '{' && len + 8 <= (uint64_t)st.st_size;
    }
    case OUT_ONNX: return (uint8_t)head[0] == 0x08;  // a ModelProto opens with field 1, ir_version
    case OUT_PLAN: return n >= 8 && memcmp(head, OUTPUT_PLAN_MAGIC, 8) == 0;
    }
    return 0;
}

// path with its directories resolved (symbolic links, "..", "."), for a path that may not exist
// yet: realpath of its longest existing ancestor, then the rest as written. 0, or -1.
static inline int path_resolve(const char *path, char *out, size_t n) {
    char head[SAFE_PATH_LEN], real[PATH_MAX];
    if (strlen(path) >= sizeof(head)) return -1;
    snprintf(head, sizeof(head), "%s", path);
    size_t cut = strlen(head);
    while (1) {  // the longest prefix, ending at a '/', that realpath resolves
        char save = head[cut];
        head[cut] = '\0';
        const char *try_path = cut == 0 ? (path[0] == '/' ? "/" : ".") : head;
        if (realpath(try_path, real)) {
            head[cut] = save;
            const char *rest = path + cut;
            while (*rest == '/') rest++;
            int k = snprintf(out, n, "%s%s%s", real, real[strlen(real) - 1] == '/' || !*rest ? "" : "/", rest);
            return k < 0 || (size_t)k >= n ? -1 : 0;
        }
        head[cut] = save;
        if (cut == 0) return -1;
        do cut--; while (cut > 0 && head[cut] != '/');
    }
}

// 1 when path (which need not exist) lies inside directory dir or is dir, through links and "..";
// a sibling whose name only starts with dir's ("data2" beside "data") is not inside
static inline int path_inside(const char *path, const char *dir) {
    char d[SAFE_PATH_LEN], p[SAFE_PATH_LEN], real[PATH_MAX];
    if (!dir || !dir[0] || !realpath(dir, d) || path_resolve(path, p, sizeof(p)) != 0) return 0;
    size_t n = strlen(d);
    if (n == 1) return 1;  // dir is "/"
    if (strncmp(p, d, n) == 0 && (p[n] == '/' || p[n] == '\0')) return 1;
    // an existing path that is a link into dir
    if (realpath(path, real) && strncmp(real, d, n) == 0 && (real[n] == '/' || real[n] == '\0')) return 1;
    return 0;
}

// 1 when some entry under dir (up to depth levels down, symbolic links followed for files) is the
// file st describes; its path goes into which. Uses each entry's inode number from the directory,
// so only the candidates (and links) are stat'ed.
static inline int path_found_under(const char *dir, const struct stat *st, int depth, char *which, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    char full[SAFE_PATH_LEN];
    for (struct dirent *e; !found && (e = readdir(d)) != NULL;) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (snprintf(full, sizeof(full), "%s/%s", dir, e->d_name) >= (int)sizeof(full)) continue;
        struct stat es;
        int is_dir = e->d_type == DT_DIR, maybe = e->d_ino == st->st_ino || e->d_type == DT_LNK || e->d_type == DT_UNKNOWN;
        if (maybe && stat(full, &es) == 0) {
            if (es.st_dev == st->st_dev && es.st_ino == st->st_ino) {
                snprintf(which, n, "%s", full);
                found = 1;
            }
            is_dir = S_ISDIR(es.st_mode) && e->d_type != DT_LNK;
        }
        if (!found && is_dir && depth > 0) found = path_found_under(full, st, depth - 1, which, n);
    }
    closedir(d);
    return found;
}

// The rule for an output (the top of this file): 0 when path may be written as a file of this
// kind, else -1 and one line in err that starts with flag ("-c", "-o", ...). inputs: the files the
// run reads (a NULL-terminated list; empty strings are skipped); data_dir: the data directory, or
// NULL or "" when none; force: -F 1, which lets an existing file of another kind be replaced.
static inline int output_check(const char *flag, const char *path, OutputKind kind, const char *const *inputs,
                               const char *data_dir, int force, char *err, size_t errlen) {
    char why[SAFE_PATH_LEN + 200], which[SAFE_PATH_LEN];
    if (safe_write_check(path, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "%s: %s", flag, why);
        return -1;
    }
    for (int i = 0; inputs && inputs[i]; i++)
        if (inputs[i][0] && path_same_file(path, inputs[i])) {
            snprintf(err, errlen, "%s %s is the same file as the input %s: an output never replaces what the run reads",
                     flag, path, inputs[i]);
            return -1;
        }
    struct stat st;
    int exists = stat(path, &st) == 0;
    which[0] = '\0';
    if (data_dir && data_dir[0] &&
        (path_inside(path, data_dir) || (exists && path_found_under(data_dir, &st, 4, which, sizeof(which))))) {
        if (which[0])
            snprintf(err, errlen, "%s %s is the same file as %s, in the data directory %s: outputs never replace the "
                     "data", flag, path, which, data_dir);
        else snprintf(err, errlen, "%s %s is inside the data directory %s: outputs never go where the data is", flag,
                      path, data_dir);
        return -1;
    }
    const char *ext = output_kind_extension(kind);
    size_t len = strlen(path);
    if (ext && (len <= strlen(ext) || strcasecmp(path + len - strlen(ext), ext) != 0)) {
        snprintf(err, errlen, "%s %s: this output is %s; give a name ending in %s", flag, path, output_kind_name(kind),
                 ext);
        return -1;
    }
    if (exists && !force && !output_is_kind(path, kind)) {
        snprintf(err, errlen, "%s %s: the file exists and is not %s: not replaced (give another name, or add -F 1 to "
                 "replace it)", flag, path, output_kind_name(kind));
        return -1;
    }
    return 0;
}

// Locks path for writing by this process alone, for as long as it runs (or until path_unlock):
// an exclusive flock on the hidden file DIR/.NAME.lock, created if need be. Returns the lock's file
// descriptor, or -1 with one line in err (another process holds it, or it cannot be created).
static inline int path_lock(const char *path, char *lock, size_t locklen, char *err, size_t errlen) {
    char dir[SAFE_PATH_LEN];
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    if (path_dir(path, dir, sizeof(dir)) != 0 ||
        snprintf(lock, locklen, "%s/.%s.lock", dir, base) >= (int)locklen) {
        snprintf(err, errlen, "%.200s...: path too long", path);
        return -1;
    }
    for (int attempt = 0; attempt < 8; attempt++) {
        int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (fd < 0) {
            snprintf(err, errlen, "cannot create the lock file %s: %s", lock, strerror(errno));
            return -1;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            int busy = errno == EWOULDBLOCK;
            snprintf(err, errlen, busy ? "another run is writing %s now (it holds the lock %s)" : "cannot lock %s: %s",
                     path, busy ? lock : strerror(errno));
            close(fd);
            return -1;
        }
        // the lock file may have been removed by its last holder between our open and our flock:
        // then we hold a lock on a file no one else will open, so try again on the new one
        struct stat a, b;
        if (fstat(fd, &a) == 0 && stat(lock, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) return fd;
        close(fd);
    }
    snprintf(err, errlen, "cannot lock %s: its lock file %s keeps changing", path, lock);
    return -1;
}

// Gives back path_lock's lock: removes the lock file (while still holding it) and closes it.
static inline void path_unlock(int fd, const char *lock) {
    if (fd < 0) return;
    unlink(lock);
    close(fd);
}

#endif // MLP_SAFE_WRITE_H
