/*
data/folder.h: the reader for an image folder, a dataset anyone can make from their own pictures.

    DIR/train/CLASS/PICTURE.png   one sub-folder per class, its pictures inside (.png, .jpg, .jpeg, .bmp)
    DIR/test/CLASS/...            the same classes (or some of them)

The classes are train/'s sub-folders in sorted order (strcmp: byte order), labelled 0, 1, ...; their
names are the class names. test/ may leave a class out but may not add one. Within a class the
files are read in sorted order, so every run sees the same items in the same order.

What is read and what is ignored:
  - files whose name ends in .png, .jpg, .jpeg or .bmp (any case) are pictures, read with
    stb_image; any other file (a README, a .txt, a .DS_Store) is ignored, and so is every name
    starting with '.' (hidden files, macOS's ._ files);
  - a file with a picture's extension that stb_image cannot decode is an error naming it, as is one
    that is not a regular file (a directory, a FIFO);
  - every picture must have the same width, height and colours as the first one read (train/'s
    first class, its first file), or the error names the first that differs and both shapes;
  - gray pictures stay one channel, colour ones three (RGB, interleaved as stb_image gives them:
    planar = 0); an alpha channel is dropped (stb_image's req_comp: gray+alpha -> gray, RGBA ->
    RGB), so a picture with transparency counts as gray or RGB;
  - limits, checked from the headers before any pixel is decoded: at most FOLDER_MAX_SIDE pixels
    a side, DATA_MAX_ITEMS pictures and DATA_MAX_BYTES of pixels in all (data/input.h); the
    pixel buffer grows as pictures decode, so memory follows what the files really hold, not
    what their headers claim;
  - at most MAX_CLASSES classes, each name at most CLASS_NAME_LEN - 1 bytes and free of control
    bytes (a newline in a name would break the tables that print it); an empty class folder is an
    error (an empty class cannot be learned or tested).
A failure returns -1 with one line in err naming the file or folder.
*/
#ifndef MLP_FOLDER_H
#define MLP_FOLDER_H

#include <dirent.h>

#include "images.h"  // image_open, image_decode (stb_image)
#include "input.h"   // Dataset, data_open_file

#ifndef FOLDER_MAX_SIDE
#define FOLDER_MAX_SIDE 4096  // pixels a side (3 x 4096 x 4096 = DATA_MAX_ITEM_BYTES; the fuzz targets set less)
#endif

// a growing, sortable list of names
typedef struct {
    char **names;
    int n, cap;
} NameList;

static inline void name_list_free(NameList *l) {
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    memset(l, 0, sizeof(*l));
}

static inline int name_list_add(NameList *l, const char *name) {
    if (l->n >= DATA_MAX_ITEMS) return -1;  // (so that 2 * cap stays an int)
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        char **grown = (char **)realloc(l->names, sizeof(char *) * (size_t)cap);
        if (!grown) return -1;
        l->names = grown;
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(name))) return -1;
    l->n++;
    return 0;
}

static inline int name_compare(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// 1 when name ends in .png, .jpg, .jpeg or .bmp, in any case
static inline int has_picture_extension(const char *name) {
    static const char *const exts[] = {".png", ".jpg", ".jpeg", ".bmp"};
    size_t n = strlen(name);
    for (int e = 0; e < 4; e++) {
        size_t k = strlen(exts[e]);
        if (n > k && strcasecmp(name + n - k, exts[e]) == 0) return 1;
    }
    return 0;
}

// The sorted names in directory path: its sub-directories (dirs = 1) or its files with a
// picture's extension (dirs = 0). Names starting with '.' are skipped.
static inline int folder_list(const char *path, int dirs, NameList *out, char *err, size_t errlen) {
    memset(out, 0, sizeof(*out));
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, errlen, "%s: cannot read the folder: %s", path, strerror(errno));
        return -1;
    }
    struct dirent *e;
    char full[2300];
    int rc = 0;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        if (dirs) {
            struct stat st;
            snprintf(full, sizeof(full), "%s/%s", path, e->d_name);
            if (stat(full, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        } else if (!has_picture_extension(e->d_name)) {
            continue;
        }
        if (name_list_add(out, e->d_name) != 0) {
            if (out->n >= DATA_MAX_ITEMS)
                snprintf(err, errlen, "%s: more than %lld entries, the most this reader accepts", path,
                         (long long)DATA_MAX_ITEMS);
            else snprintf(err, errlen, "%s: out of host memory listing the folder", path);
            rc = -1;
            break;
        }
    }
    closedir(d);
    if (rc != 0) name_list_free(out);
    else if (out->n > 1) qsort(out->names, (size_t)out->n, sizeof(char *), name_compare);
    return rc;
}

static inline const char *channels_name(int channels) { return channels == 1 ? "gray" : "RGB"; }

// The shape of the first picture of train/ (first class, first file): what every picture of both
// splits must match. 0 when found.
static inline int folder_first_shape(const char *dir, const NameList *classes, int *w, int *h, int *ch,
                                     char *first, size_t firstlen) {
    char path[2300], err[1400];
    NameList files;
    snprintf(path, sizeof(path), "%s/train/%s", dir, classes->names[0]);
    if (folder_list(path, 0, &files, err, sizeof(err)) != 0) return -1;
    int rc = -1;
    FILE *f;
    int comp;
    if (files.n > 0) {
        snprintf(first, firstlen, "%s/%s", path, files.names[0]);
        if (image_open(first, FOLDER_MAX_SIDE, &f, w, h, &comp, err, sizeof(err)) == 0) {
            fclose(f);
            *ch = comp <= 2 ? 1 : 3;
            rc = 0;
        }
    }
    name_list_free(&files);
    return rc;
}

// Loads split "train" or "test" of the image folder dir.
static inline int folder_load(const char *dir, const char *split, Dataset *ds, char *err, size_t errlen) {
    char train_dir[1100], split_dir[1100], path[2300], first[2300] = "";
    NameList classes = {0}, files[MAX_CLASSES];
    memset(files, 0, sizeof(files));
    int rc = -1, w0 = 0, h0 = 0, ch0 = 0, D = 0;
    int64_t total = 0, capacity = 0, n = 0;
    struct stat st;

    // the classes: train/'s sub-folders
    snprintf(train_dir, sizeof(train_dir), "%s/train", dir);
    snprintf(split_dir, sizeof(split_dir), "%s/%s", dir, split);
    if (folder_list(train_dir, 1, &classes, err, errlen) != 0) goto done;
    if (classes.n == 0) {
        snprintf(err, errlen, "%s: no class folders in it (an image folder has one sub-folder per class)", train_dir);
        goto done;
    }
    if (classes.n > MAX_CLASSES) {
        snprintf(err, errlen, "%s: %d class folders, more than the %d this program handles", train_dir, classes.n,
                 MAX_CLASSES);
        goto done;
    }
    for (int c = 0; c < classes.n; c++) {
        if (strlen(classes.names[c]) >= CLASS_NAME_LEN) {
            snprintf(err, errlen, "%s/%s: a class name of %zu bytes; at most %d are allowed", train_dir,
                     classes.names[c], strlen(classes.names[c]), CLASS_NAME_LEN - 1);
            goto done;
        }
        // a control byte (a newline, an escape sequence) in a name would break the tables that print it
        for (const unsigned char *q = (const unsigned char *)classes.names[c]; *q; q++)
            if (*q < 32 || *q == 127) {
                snprintf(err, errlen, "%s: the class folder name at position %d holds the control byte 0x%02x (byte "
                         "%d of its name); rename the folder", train_dir, c + 1, *q,
                         (int)(q - (const unsigned char *)classes.names[c]) + 1);
                goto done;
            }
    }
    if (stat(split_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (stat(split_dir, &st) != 0)
            snprintf(err, errlen, "%s: missing: an image folder holds train/ and test/, each with a folder per class",
                     split_dir);
        else snprintf(err, errlen, "%s: is %s, not a folder", split_dir, file_type_name(st.st_mode));
        goto done;
    }
    if (strcmp(split, "train") != 0) {  // test/ may not have a class train/ lacks
        NameList sub;
        if (folder_list(split_dir, 1, &sub, err, errlen) != 0) goto done;
        for (int i = 0; i < sub.n; i++)
            if (!bsearch(&sub.names[i], classes.names, (size_t)classes.n, sizeof(char *), name_compare)) {
                snprintf(err, errlen, "%s/%s: class '%s' is not in %s (the classes are train/'s %d sub-folders)",
                         split_dir, sub.names[i], sub.names[i], train_dir, classes.n);
                name_list_free(&sub);
                goto done;
            }
        name_list_free(&sub);
        if (folder_first_shape(dir, &classes, &w0, &h0, &ch0, first, sizeof(first)) == 0)
            D = w0 * h0 * ch0;
    }

    // every class's pictures, by name
    for (int c = 0; c < classes.n; c++) {
        snprintf(path, sizeof(path), "%s/%s", split_dir, classes.names[c]);
        if (stat(path, &st) != 0) continue;  // test/ without this class
        if (folder_list(path, 0, &files[c], err, errlen) != 0) goto done;
        if (files[c].n == 0) {
            snprintf(err, errlen, "%s: no pictures in this class folder (.png, .jpg, .jpeg or .bmp files)", path);
            goto done;
        }
        total += files[c].n;
        if (total > DATA_MAX_ITEMS) {
            snprintf(err, errlen, "%s: more than %lld pictures, the most this reader accepts", split_dir,
                     (long long)DATA_MAX_ITEMS);
            goto done;
        }
    }
    if (total == 0) {
        snprintf(err, errlen, "%s: no pictures in it", split_dir);
        goto done;
    }

    // then each picture: its header checked against the first, then decoded into the buffer
    for (int c = 0; c < classes.n; c++) {
        for (int i = 0; i < files[c].n; i++) {
            snprintf(path, sizeof(path), "%s/%s/%s", split_dir, classes.names[c], files[c].names[i]);
            FILE *f;
            int w, h, comp;
            if (image_open(path, FOLDER_MAX_SIDE, &f, &w, &h, &comp, err, errlen) != 0) goto done;
            int ch = comp <= 2 ? 1 : 3;
            if (!D) {  // the first picture sets the shape
                w0 = w, h0 = h, ch0 = ch, D = w * h * ch;
                snprintf(first, sizeof(first), "%s", path);
            }
            if (w != w0 || h != h0 || ch != ch0) {
                snprintf(err, errlen,
                         "%s: is %dx%d %s but the first picture, %s, is %dx%d %s: every picture must have the same "
                         "size and colours",
                         path, w, h, channels_name(ch), first, w0, h0, channels_name(ch0));
                fclose(f);
                goto done;
            }
            if (total * D > DATA_MAX_BYTES) {  // (total <= DATA_MAX_ITEMS and D <= 3 x 4096^2: no overflow)
                snprintf(err, errlen, "%s: %lld pictures of %dx%d %s are %lld bytes, more than the %lld this reader "
                         "accepts", split_dir, (long long)total, w0, h0, channels_name(ch0), (long long)(total * D),
                         (long long)DATA_MAX_BYTES);
                fclose(f);
                goto done;
            }
            uint8_t *pixels = image_decode(f, path, w, h, comp, ch, err, errlen);  // closes f
            if (!pixels) goto done;
            if (n == capacity) {  // grow by doubling, never past the total
                int64_t cap = capacity ? 2 * capacity : 64;
                cap = cap > total ? total : cap;
                uint8_t *images = (uint8_t *)realloc(ds->images, (size_t)(cap * D));
                uint8_t *labels = (uint8_t *)realloc(ds->labels, (size_t)cap);
                if (images) ds->images = images;
                if (labels) ds->labels = labels;
                if (!images || !labels) {
                    snprintf(err, errlen, "%s: out of host memory for %lld pictures", split_dir, (long long)cap);
                    stbi_image_free(pixels);
                    goto done;
                }
                capacity = cap;
            }
            memcpy(ds->images + (size_t)n * D, pixels, (size_t)D);
            ds->labels[n++] = (uint8_t)c;
            stbi_image_free(pixels);
        }
    }
    ds->kind = DATA_FOLDER;
    ds->n = (int)n;
    ds->rows = h0;
    ds->cols = w0;
    ds->channels = ch0;
    ds->planar = 0;
    ds->num_classes = classes.n;
    for (int c = 0; c < classes.n; c++) snprintf(ds->class_names[c], CLASS_NAME_LEN, "%s", classes.names[c]);
    snprintf(ds->name, sizeof(ds->name), "image folder");
    snprintf(ds->images_path, sizeof(ds->images_path), "%s", split_dir);
    snprintf(ds->labels_path, sizeof(ds->labels_path), "%s", split_dir);
    rc = 0;
done:
    name_list_free(&classes);
    for (int c = 0; c < MAX_CLASSES; c++) name_list_free(&files[c]);
    return rc;  // on failure dataset_load frees ds's buffers
}

#endif // MLP_FOLDER_H
