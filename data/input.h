/*
data/input.h: what every reader of outside data shares: the limits, opening a file safely, and
the Dataset struct each reader fills.

Every file a reader opens comes from outside the program (a download, a user's folder, a file an
attacker planted), so its header is a claim to check, never a size to allocate. The readers:
  - compute every count, offset and product of sizes in 64 bits, and check it against the limits
    below before using it (the trainers index items with int: the limits keep every count, and
    every item's offset, inside an int);
  - allocate from what a file really holds, never from its header alone: a raw file's size is
    known before anything is read (fstat), and a gzip file's buffer grows as its data inflates;
  - refuse, with one line naming the file, anything that is not a regular file: a directory, a
    device (/dev/zero would never end), a FIFO (which a plain fopen would wait on forever).

The limits (per split: the training set, or the test set):
    DATA_MAX_ITEMS       2^26 = 67,108,864 items: the trainers' int permutation (256 MB) and
                         their per-item arrays stay bounded, and n + B - 1 stays far from INT_MAX
    DATA_MAX_BYTES       2^31 - 1 bytes of pixels (just under 2 GiB): n x D fits an int
    DATA_MAX_ITEM_BYTES  3 x 4096 x 4096 bytes (48 MiB) for one item: an RGB picture 4096 pixels
                         a side (the image folder's limit; a model's input is far smaller)
A gzip file is also held to deflate's densest code: at most GZIP_MAX_RATIO bytes of data for
each byte of the file, so a header that claims more than its file could ever inflate to is
refused before anything is inflated.
*/
#ifndef MLP_INPUT_H
#define MLP_INPUT_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/safe_write.h"  // file_type_name

#define DATA_MAX_ITEMS ((int64_t)1 << 26)               // items per split
#define DATA_MAX_BYTES (((int64_t)1 << 31) - 1)         // pixel bytes per split
#define DATA_MAX_ITEM_BYTES ((int64_t)3 * 4096 * 4096)  // bytes of one item
// deflate's densest code spends 2 bits on a run of 258 bytes: 1032 bytes out per byte in
#define GZIP_MAX_RATIO 1032

// 1 when path exists, whatever it is (a file, a directory, a FIFO ...)
static inline int path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// Opens path for reading and gets its size, refusing with a message what is not a regular file:
// a directory, a device, or a FIFO (which a plain fopen would wait on forever: opening with
// O_NONBLOCK returns at once, and fstat on the open file says what it is, with no gap between
// looking and opening). NULL and one line in err when the file cannot be read.
static inline FILE *data_open_file(const char *path, int64_t *size, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) snprintf(err, errlen, "%s: no such file", path);
        else snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) snprintf(err, errlen, "%s: is a directory, not a file", path);
        else snprintf(err, errlen, "%s: is %s, not a file", path, file_type_name(st.st_mode));
        close(fd);
        return NULL;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);  // plain blocking reads from here
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    *size = (int64_t)st.st_size;
    return f;
}

// ----------------------------------------------------------------------------
// the dataset every reader fills

#define MAX_CLASSES 256     // labels are bytes
#define CLASS_NAME_LEN 48   // bytes of a class name, with its terminating 0

typedef enum { DATA_NONE = 0, DATA_IDX = 1, DATA_CIFAR10 = 2, DATA_FOLDER = 3 } DataKind;

typedef struct {
    uint8_t *images;  // (n, D) bytes, D = channels * rows * cols, in the layout below
    uint8_t *labels;  // (n), each < num_classes
    int n, rows, cols, channels;
    int planar;       // channels > 1: 1 = one plane per channel (CIFAR-10's RRR..GGG..BBB..),
                      // 0 = interleaved (RGBRGB..., as stb_image decodes a picture)
    DataKind kind;
    int num_classes;
    char class_names[MAX_CLASSES][CLASS_NAME_LEN];
    char name[64];                             // "MNIST", "Fashion-MNIST", "CIFAR-10", ...
    char images_path[1100], labels_path[1100]; // what was read (for messages)
} Dataset;

// bytes (and model inputs) per item
static inline int dataset_dim(const Dataset *ds) { return ds->channels * ds->rows * ds->cols; }

static inline void dataset_free(Dataset *ds) {
    free(ds->images);
    free(ds->labels);
    ds->images = ds->labels = NULL;
}

static inline void dataset_set_class_names(Dataset *ds, const char *const *names, int count) {
    for (int c = 0; c < count && c < MAX_CLASSES; c++) snprintf(ds->class_names[c], CLASS_NAME_LEN, "%s", names[c]);
}

#endif // MLP_INPUT_H
