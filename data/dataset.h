/*
data/dataset.h: a labelled image dataset in memory, whatever files it came from.

Every reader fills the same struct (Dataset, data/input.h): n items of D = channels x rows x cols bytes (0..255) and
n labels below num_classes, with the class names when the files have them. The trainers copy
the bytes to the GPU once and build float batches there (pixel / 255).

    dataset_load(dir, "train" | "test", ...) picks the reader from what `dir` holds:
      MNIST-format IDX files    train-images-idx3-ubyte[.gz] ...       data/idx.h
      CIFAR-10 binary version   data_batch_1.bin ... test_batch.bin     data/cifar.h
      an image folder           train/CLASS/ and test/CLASS/ of PNG, JPG or BMP files   data/folder.h
    A failure returns -1 with one line in err naming the file and what is wrong; the loaders
    never exit, so the tests can call them. The readers include data/input.h, never this file:
    this file dispatches to them, and nothing below it includes it back.

Pictures (preparing one for a model, the grid of misclassified images) are in data/images.h,
which this file includes through data/folder.h.
*/
#ifndef MLP_DATASET_H
#define MLP_DATASET_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/safe_write.h"  // file_type_name
#include "../common/utils.h"
#include "cifar.h"   // cifar_load
#include "folder.h"  // folder_load (and through it images.h: pictures)
#include "idx.h"     // idx_load (and through it input.h: Dataset, the limits, data_open_file)

// ----------------------------------------------------------------------------
// any dataset

// Which kind of dataset dir holds, from the names in it (DATA_NONE: none of these):
//   DATA_IDX      any of MNIST's four file names, raw or .gz
//   DATA_CIFAR10  data_batch_1.bin or test_batch.bin
//   DATA_FOLDER   a sub-directory train/
// A name that is there but is the wrong type (a directory where a file should be) still decides
// the kind, so that the reader can say what is wrong with it.
static inline DataKind dataset_detect(const char *dir) {
    static const char *const idx_names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    char path[1100];
    for (int i = 0; i < 4; i++)
        for (int gz = 0; gz < 2; gz++) {
            snprintf(path, sizeof(path), "%s/%s%s", dir, idx_names[i], gz ? ".gz" : "");
            if (path_exists(path)) return DATA_IDX;
        }
    snprintf(path, sizeof(path), "%s/data_batch_1.bin", dir);
    if (path_exists(path)) return DATA_CIFAR10;
    snprintf(path, sizeof(path), "%s/test_batch.bin", dir);
    if (path_exists(path)) return DATA_CIFAR10;
    struct stat st;
    snprintf(path, sizeof(path), "%s/train", dir);
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return DATA_FOLDER;
    return DATA_NONE;
}

// Loads split "train" or "test" of the dataset in dir, whichever kind it is.
static inline int dataset_load(const char *dir, const char *split, Dataset *ds, char *err, size_t errlen) {
    memset(ds, 0, sizeof(*ds));
    struct stat st;
    int rc = -1;
    DataKind kind = DATA_NONE;
    if (stat(dir, &st) != 0) {
        snprintf(err, errlen, "%s: no such directory", dir);
    } else if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "%s: not a directory (-d names the directory that holds the dataset's files)", dir);
    } else if ((kind = dataset_detect(dir)) == DATA_IDX) {
        rc = idx_load(dir, split, ds, err, errlen);
    } else if (kind == DATA_CIFAR10) {
        rc = cifar_load(dir, split, ds, err, errlen);
    } else if (kind == DATA_FOLDER) {
        rc = folder_load(dir, split, ds, err, errlen);
    } else {
        char sub[1100];  // CIFAR-10's archive unpacks into cifar-10-batches-bin/: point there
        snprintf(sub, sizeof(sub), "%s/cifar-10-batches-bin/data_batch_1.bin", dir);
        const char *hint = path_exists(sub) ? " (CIFAR-10 is in its sub-directory cifar-10-batches-bin: give that)" : "";
        snprintf(err, errlen,
                 "%s: no dataset here: looked for MNIST-format IDX files (train-images-idx3-ubyte[.gz] ...), "
                 "CIFAR-10's binary batches (data_batch_1.bin ... test_batch.bin) and an image folder "
                 "(train/CLASS/*.png|jpg|bmp)%s",
                 dir, hint);
    }
    if (rc != 0) dataset_free(ds);
    return rc;
}

// Loads both splits and checks that they agree: the same image shape, and no test label outside
// the training set's classes. The test set takes the training set's class names and name.
static inline int dataset_load_both(const char *dir, Dataset *train, Dataset *test, char *err, size_t errlen) {
    if (dataset_load(dir, "train", train, err, errlen) != 0) return -1;
    if (dataset_load(dir, "test", test, err, errlen) != 0) {
        dataset_free(train);
        return -1;
    }
    if (train->kind == DATA_IDX) idx_name_dataset(train);
    const char *problem = NULL;
    char what[256];
    if (test->rows != train->rows || test->cols != train->cols || test->channels != train->channels) {
        snprintf(what, sizeof(what), "test images are %dx%dx%d but training images are %dx%dx%d", test->channels,
                 test->rows, test->cols, train->channels, train->rows, train->cols);
        problem = what;
    }
    for (int i = 0; i < test->n && !problem; i++) {
        if (test->labels[i] >= train->num_classes) {
            snprintf(what, sizeof(what), "label %d of test item %d is not one of the training set's %d classes",
                     test->labels[i], i, train->num_classes);
            problem = what;
        }
    }
    if (problem) {
        snprintf(err, errlen, "%s: %s", test->labels_path[0] ? test->labels_path : dir, problem);
        dataset_free(train);
        dataset_free(test);
        return -1;
    }
    test->num_classes = train->num_classes;
    memcpy(test->class_names, train->class_names, sizeof(train->class_names));
    memcpy(test->name, train->name, sizeof(train->name));
    return 0;
}

// The default -d: the first of DATASET_DEFAULT_DIRS that holds all four IDX files (raw or .gz,
// each a regular file); a directory with only some of them is skipped. Returns NULL when none
// does. why (when not NULL) gets one line: on failure what each place lacks, e.g.
//   no dataset found: data/mnist has only the training files: missing t10k-images-idx3-ubyte[.gz],
//   t10k-labels-idx1-ubyte[.gz]; data/fashion-mnist: no such directory; ...
// and on success the places skipped on the way ("" when none was), for a note to the user.
#define DATASET_NUM_DEFAULT_DIRS 3
static const char *const DATASET_DEFAULT_DIRS[DATASET_NUM_DEFAULT_DIRS] = {
    "data/mnist", "data/fashion-mnist", "/usr/share/datasets/fashion-mnist"};

// What dir lacks of the four IDX files, into out ("" when it has them all). 0 when complete.
static inline int idx_dir_lacks(const char *dir, char *out, size_t n) {
    static const char *const names[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    struct stat st;
    char path[1100], list[700] = "";
    int missing[4], count = 0;
    out[0] = '\0';
    if (stat(dir, &st) != 0) {
        snprintf(out, n, "%s: no such directory", dir);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(out, n, "%s: is %s, not a directory", dir, file_type_name(st.st_mode));
        return -1;
    }
    for (int i = 0; i < 4; i++) {
        missing[i] = idx_find(dir, names[i], path, sizeof(path)) != 0;
        if (!missing[i]) continue;
        count++;
        size_t k = strlen(list);
        snprintf(list + k, sizeof(list) - k, "%s%s[.gz]", k ? ", " : "", names[i]);
        for (int gz = 0; gz < 2; gz++) {  // there, but not a file: say what it is
            snprintf(path, sizeof(path), "%s/%s%s", dir, names[i], gz ? ".gz" : "");
            if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
                k = strlen(list);
                snprintf(list + k, sizeof(list) - k, " (%s%s is %s)", names[i], gz ? ".gz" : "",
                         file_type_name(st.st_mode));
                break;
            }
        }
    }
    if (count == 0) return 0;
    if (count == 4) snprintf(out, n, "%s has none of the four IDX files (train-images-idx3-ubyte[.gz] ...)", dir);
    else if (count == 2 && missing[2] && missing[3])
        snprintf(out, n, "%s has only the training files: missing %s", dir, list);
    else if (count == 2 && missing[0] && missing[1])
        snprintf(out, n, "%s has only the test files: missing %s", dir, list);
    else snprintf(out, n, "%s: missing %s", dir, list);
    return -1;
}

// dataset_find_default over the n (at most 8) directories dirs
static inline const char *dataset_find_in(const char *const *dirs, int n, char *why, size_t whylen) {
    char lacks[8][800], all[2600] = "";
    if (n > 8) n = 8;
    for (int i = 0; i < n; i++) {
        if (idx_dir_lacks(dirs[i], lacks[i], sizeof(lacks[i])) == 0) {
            if (why && whylen) {  // the note: the places skipped, the incomplete ones only
                why[0] = '\0';
                for (int j = 0; j < i; j++) {
                    if (strstr(lacks[j], ": no such directory")) continue;
                    size_t k = strlen(why);
                    snprintf(why + k, whylen - k, "%sskipped %s", k ? "; " : "", lacks[j]);
                }
            }
            return dirs[i];
        }
        size_t k = strlen(all);
        snprintf(all + k, sizeof(all) - k, "%s%s", i ? "; " : "", lacks[i]);
    }
    if (why && whylen) snprintf(why, whylen, "no dataset found: %s", all);
    return NULL;
}

static inline const char *dataset_find_default(char *why, size_t whylen) {
    return dataset_find_in(DATASET_DEFAULT_DIRS, DATASET_NUM_DEFAULT_DIRS, why, whylen);
}

// dataset_find_default without the reasons
static inline const char *find_dataset_dir(void) { return dataset_find_default(NULL, 0); }

#endif // MLP_DATASET_H
