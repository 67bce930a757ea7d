/*
data/cifar.h: the reader for CIFAR-10's binary version (https://www.cs.toronto.edu/~kriz/cifar.html).

    DIR/data_batch_1.bin ... data_batch_5.bin   the training set (10,000 records each)
    DIR/test_batch.bin                          the test set (10,000 records)
    DIR/batches.meta.txt                        the 10 class names, one per line (optional)

Each record is 3,073 bytes: the label (0..9), then the 32x32 picture as three planes of 1,024
bytes, red, then green, then blue, each row-major. The Dataset keeps those bytes as they are
(planar = 1), so a record's 3,072 pixel bytes are one item. Without batches.meta.txt the classes
are named "0" .. "9".

Nothing is trusted: every file is checked to be a regular file (not a directory or a FIFO), not
empty, and a whole number of records long, before anything is allocated, so memory never exceeds
what the files really hold; the pictures of a split at most DATA_MAX_BYTES (data/input.h:
CIFAR-10's own are 154 MB); every label must be below 10; the class list must have exactly 10
non-empty names of at most CLASS_NAME_LEN - 1 bytes (trailing empty lines and a CR before each
newline are allowed: the official file ends with an empty line). Sizes are 64-bit. A failure
returns -1 with one line in err that names the file.
*/
#ifndef MLP_CIFAR_H
#define MLP_CIFAR_H

#include "input.h"  // Dataset, data_open_file

#define CIFAR_SIDE 32
#define CIFAR_PIXELS (3 * CIFAR_SIDE * CIFAR_SIDE)  // 3,072 bytes of picture per record
#define CIFAR_RECORD (1 + CIFAR_PIXELS)             // 3,073 bytes per record
#define CIFAR_CLASSES 10
#define CIFAR_MAX_BATCHES 5
#define CIFAR_META_MAX 4096                 // bytes: a list of 10 class names is far smaller
#define CIFAR_CHUNK_RECORDS 256             // records read at a time

// Reads batches.meta.txt into ds->class_names. 0 when it is good or absent (names "0".."9").
static inline int cifar_read_meta(const char *dir, Dataset *ds, char *err, size_t errlen) {
    char path[1100];
    for (int c = 0; c < CIFAR_CLASSES; c++) snprintf(ds->class_names[c], CLASS_NAME_LEN, "%d", c);
    snprintf(path, sizeof(path), "%s/batches.meta.txt", dir);
    if (!path_exists(path)) return 0;
    int64_t size;
    FILE *f = data_open_file(path, &size, err, errlen);
    if (!f) return -1;
    if (size > CIFAR_META_MAX) {
        snprintf(err, errlen, "%s: %lld bytes is too large for a list of %d class names (at most %d)", path,
                 (long long)size, CIFAR_CLASSES, CIFAR_META_MAX);
        fclose(f);
        return -1;
    }
    char text[CIFAR_META_MAX + 1];
    size_t len = fread(text, 1, (size_t)size, f);
    fclose(f);
    // drop the trailing empty lines (and spaces, CRs), then take the lines that are left
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ')) len--;
    int lines = 0;
    for (size_t start = 0; start < len;) {
        const char *p = text + start, *end = (const char *)memchr(p, '\n', len - start);
        size_t n = end ? (size_t)(end - p) : len - start;
        start += n + 1;
        lines++;
        if (n > 0 && p[n - 1] == '\r') n--;
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)p[i];
            if (ch < 0x20 || ch == 0x7f) {
                snprintf(err, errlen, "%s: line %d holds the control byte 0x%02x: not a text list of class names",
                         path, lines, ch);
                return -1;
            }
        }
        if (n == 0) {
            snprintf(err, errlen, "%s: line %d is empty: every line names one class", path, lines);
            return -1;
        }
        if (n >= CLASS_NAME_LEN) {
            snprintf(err, errlen, "%s: the class name on line %d is %zu bytes long, at most %d are allowed", path,
                     lines, n, CLASS_NAME_LEN - 1);
            return -1;
        }
        if (lines <= CIFAR_CLASSES) {
            memcpy(ds->class_names[lines - 1], p, n);
            ds->class_names[lines - 1][n] = '\0';
        }
    }
    if (lines != CIFAR_CLASSES) {
        snprintf(err, errlen, "%s: holds %d class name%s, one per line; CIFAR-10 has %d", path, lines,
                 lines == 1 ? "" : "s", CIFAR_CLASSES);
        return -1;
    }
    return 0;
}

// Loads split "train" (data_batch_1.bin ... data_batch_5.bin) or "test" (test_batch.bin) from dir.
static inline int cifar_load(const char *dir, const char *split, Dataset *ds, char *err, size_t errlen) {
    int train = strcmp(split, "train") == 0;
    int nfiles = train ? CIFAR_MAX_BATCHES : 1;
    char paths[CIFAR_MAX_BATCHES][1100];
    FILE *files[CIFAR_MAX_BATCHES] = {0};
    int64_t records[CIFAR_MAX_BATCHES], total = 0;
    uint8_t *chunk = NULL;
    int64_t item = 0;  // records copied so far
    int rc = -1;
    // first every file's size: whole records, and the total within the limit, before allocating
    for (int i = 0; i < nfiles; i++) {
        if (train) snprintf(paths[i], sizeof(paths[i]), "%s/data_batch_%d.bin", dir, i + 1);
        else snprintf(paths[i], sizeof(paths[i]), "%s/test_batch.bin", dir);
        if (!path_exists(paths[i])) {
            snprintf(err, errlen, "%s: missing: CIFAR-10's %s", paths[i],
                     train ? "training set is the five files data_batch_1.bin ... data_batch_5.bin"
                           : "test set is the file test_batch.bin");
            goto done;
        }
        int64_t size;
        if (!(files[i] = data_open_file(paths[i], &size, err, errlen))) goto done;
        if (size == 0) {
            snprintf(err, errlen, "%s: empty file (a CIFAR-10 batch is records of %d bytes: a label, then %d pixels)",
                     paths[i], CIFAR_RECORD, CIFAR_PIXELS);
            goto done;
        }
        if (size % CIFAR_RECORD != 0) {
            snprintf(err, errlen,
                     "%s: %lld bytes is not a whole number of %d-byte records (%lld records and %lld bytes over): "
                     "truncated, or not a CIFAR-10 batch",
                     paths[i], (long long)size, CIFAR_RECORD, (long long)(size / CIFAR_RECORD),
                     (long long)(size % CIFAR_RECORD));
            goto done;
        }
        records[i] = size / CIFAR_RECORD;
        // (each term checked before the sum: a sparse file can claim 2^62 bytes; and DATA_MAX_ITEMS
        // is far off: 699,050 records)
        if (records[i] > DATA_MAX_BYTES / CIFAR_PIXELS) total = records[i];
        else total += records[i];
        if (total > DATA_MAX_BYTES / CIFAR_PIXELS) {
            snprintf(err, errlen, "%s: the %s set would exceed %lld bytes of pictures, more than this reader accepts",
                     paths[i], train ? "training" : "test", (long long)DATA_MAX_BYTES);
            goto done;
        }
    }
    ds->images = (uint8_t *)malloc((size_t)total * CIFAR_PIXELS);
    ds->labels = (uint8_t *)malloc((size_t)total);
    chunk = (uint8_t *)malloc((size_t)CIFAR_CHUNK_RECORDS * CIFAR_RECORD);
    if (!ds->images || !ds->labels || !chunk) {
        snprintf(err, errlen, "%s: out of host memory for %lld records", paths[0], (long long)total);
        goto done;
    }
    // then the records: labels checked, pictures copied as they are (planes)
    for (int i = 0; i < nfiles; i++) {
        for (int64_t r = 0; r < records[i]; r += CIFAR_CHUNK_RECORDS) {
            size_t want = (size_t)(records[i] - r < CIFAR_CHUNK_RECORDS ? records[i] - r : CIFAR_CHUNK_RECORDS);
            if (fread(chunk, CIFAR_RECORD, want, files[i]) != want) {
                snprintf(err, errlen, "%s: read failed at record %lld (did the file change while being read?)",
                         paths[i], (long long)r);
                goto done;
            }
            for (size_t k = 0; k < want; k++, item++) {
                const uint8_t *rec = chunk + k * CIFAR_RECORD;
                if (rec[0] >= CIFAR_CLASSES) {
                    snprintf(err, errlen, "%s: record %lld has label %d; CIFAR-10's labels are 0 to %d", paths[i],
                             (long long)(r + (int64_t)k), rec[0], CIFAR_CLASSES - 1);
                    goto done;
                }
                ds->labels[item] = rec[0];
                memcpy(ds->images + (size_t)item * CIFAR_PIXELS, rec + 1, CIFAR_PIXELS);
            }
        }
    }
    if (cifar_read_meta(dir, ds, err, errlen) != 0) goto done;
    ds->kind = DATA_CIFAR10;
    ds->n = (int)total;
    ds->channels = 3;
    ds->rows = ds->cols = CIFAR_SIDE;
    ds->planar = 1;
    ds->num_classes = CIFAR_CLASSES;
    snprintf(ds->name, sizeof(ds->name), "CIFAR-10");
    if (train) snprintf(ds->images_path, sizeof(ds->images_path), "%s/data_batch_{1..5}.bin", dir);
    else snprintf(ds->images_path, sizeof(ds->images_path), "%s", paths[0]);
    snprintf(ds->labels_path, sizeof(ds->labels_path), "%s", ds->images_path);
    rc = 0;
done:
    for (int i = 0; i < nfiles; i++)
        if (files[i]) fclose(files[i]);
    free(chunk);
    return rc;  // on failure dataset_load frees ds's buffers
}

#endif // MLP_CIFAR_H
