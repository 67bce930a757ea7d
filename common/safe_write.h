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

For checkpoints, logs written in one go, PNGs: anything written whole. (A log written line by line
as a run goes is a different problem: it must survive a crash with its rows, so it is appended to.)
*/
#ifndef MLP_SAFE_WRITE_H
#define MLP_SAFE_WRITE_H

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

// Creates the temporary file for dest; w->f is ready for writing. 0, or -1 and one line in err.
static inline int safe_write_open(SafeWrite *w, const char *dest, char *err, size_t errlen) {
    memset(w, 0, sizeof(*w));
    if (safe_write_check(dest, err, errlen) != 0) return -1;
    char dir[SAFE_PATH_LEN];
    path_dir(dest, dir, sizeof(dir));
    const char *base = strrchr(dest, '/') ? strrchr(dest, '/') + 1 : dest;
    snprintf(w->dest, sizeof(w->dest), "%s", dest);
    // a hidden name beside the destination: ".errors.png.tmp.Ab12Cd"
    if (snprintf(w->tmp, sizeof(w->tmp), "%s/.%s.tmp.XXXXXX", dir, base) >= (int)sizeof(w->tmp)) {
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

#endif // MLP_SAFE_WRITE_H
