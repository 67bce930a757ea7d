/*
The data tests of mlp.cu (no GPU, no network), run by `make test`, all on files this test writes
itself into a temporary directory:
  1. the CIFAR-10 binary reader: a small CIFAR-format dataset loads byte for byte; every malformed
     case (sizes, labels, missing files, a directory or a FIFO in place of a file, the class list)
     gets its own message naming the file;
  2. what dataset_load detects in a directory, and what it says when it finds nothing;
  3. the image-folder reader: PNG, JPG and BMP files written with stb_image_write load (PNG and BMP
     byte for byte), in sorted order; malformed folders each get their own message;
  4. preparing a picture for a model: a digit drawn off-centre on white comes out as MNIST's digits
     are (inverted, in a 20x20 box, centred by its mass); colour for CIFAR-10 in planes; the error
     messages for a missing, empty, non-picture or blank file;
  5. safe writing (common/safe_write.h) and the PNG grid of misclassified images, read back;
  6. Fashion-MNIST written out as an image folder: the same pixels as the IDX files, and the CPU
     model trained on it reaches the IDX run's test accuracy within 0.3 points;
  7. (run first) sizes and limits: header claims checked against the limits and the file before
     anything is allocated (each load in a child process, under a cap on its address space), gzip
     bombs refused with their peak memory measured, bytes after a gzip stream refused, FIFOs,
     directories and devices in place of every data file named as such (never a hang), pictures
     whose header claims more than their file holds, and the default data directory's lookup;
  8. the rule for outputs (output_check): each kind replaces only its own kind or an empty file
     (or anything with -F 1), never an input (hard and symbolic links too) nor a file in the data
     directory, by any path (data2/ beside data/ is fine); path_lock's hidden lock file; temporary
     files named with their writer's PID, a dead writer's removed by the next write;
  9. pictures too large told alike at every size (up to beyond stb_image's own limit); a white
     object on transparency laid over black; -p's line on how it prepared a picture; a class
     folder whose name holds a newline refused.
Usage: tests/bin/test_data      (from the repository root; needs Debian's Fashion-MNIST for part 6)
*/
#define TESTING
#include "../train_mlp_cpu.c"
#include "check.h"
#include "idx_write.h"  // put_be32

#include <sys/types.h>
#include <sys/wait.h>

static char tmpdir[256];

// ----------------------------------------------------------------------------
// helpers: files written here

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *f = fopenCheck(path, "wb");
    if (n) fwriteCheck(data, 1, n, f, path);
    fcloseCheck(f, path);
}

static void write_text(const char *path, const char *text) { write_bytes(path, text, strlen(text)); }

// tmpdir/sub, created; returns a static buffer (one of a few, so two can be live at once)
static const char *mkpath(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *mkpath(const char *fmt, ...) {
    static char bufs[8][1100];
    static int next = 0;
    char *p = bufs[next++ % 8];
    char rel[1000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof(rel), fmt, ap);
    va_end(ap);
    snprintf(p, 1100, "%s/%s", tmpdir, rel);
    return p;
}

static void make_dir(const char *path) {
    if (mkdir(path, 0777) != 0 && errno != EEXIST) die("check /tmp", "cannot create %s: %s", path, strerror(errno));
}

// loads both splits of dir; on success frees them. Returns the loader's code, message in err.
static int try_load(const char *dir, char *err, size_t errlen) {
    Dataset train, test;
    int rc = dataset_load_both(dir, &train, &test, err, errlen);
    if (rc == 0) {
        dataset_free(&train);
        dataset_free(&test);
    }
    return rc;
}

// a malformed dataset must be refused with a message holding every one of these words
static void expect_refused(const char *dir, const char *label, const char *want1, const char *want2) {
    char err[1400] = "";
    int rc = try_load(dir, err, sizeof(err));
    check(rc != 0 && strstr(err, want1) && (!want2 || strstr(err, want2)), "%-18s -> \"%s\"", label,
          rc ? err : "(accepted!)");
}

// ----------------------------------------------------------------------------
// 1. CIFAR-10 binary

// record r's pixel i and label: a pattern no two records share
static uint8_t cifar_pixel(int r, int i) { return (uint8_t)(r * 31 + i * 7 + (i >> 10) * 13); }
static uint8_t cifar_label(int r) { return (uint8_t)((r * 3 + 1) % 10); }

static const char *const CIFAR_NAMES[10] = {"airplane", "automobile", "bird", "cat", "deer",
                                            "dog",      "frog",       "horse", "ship", "truck"};
static const int CIFAR_TRAIN_RECORDS[5] = {60, 60, 60, 60, 61}, CIFAR_TEST_RECORDS = 50;

// Writes a CIFAR-format batch of records first .. first+count-1.
static void write_cifar_batch(const char *path, int first, int count) {
    uint8_t *buf = (uint8_t *)mallocCheck((size_t)count * CIFAR_RECORD);
    for (int r = 0; r < count; r++) {
        uint8_t *rec = buf + (size_t)r * CIFAR_RECORD;
        rec[0] = cifar_label(first + r);
        for (int i = 0; i < CIFAR_PIXELS; i++) rec[1 + i] = cifar_pixel(first + r, i);
    }
    write_bytes(path, buf, (size_t)count * CIFAR_RECORD);
    free(buf);
}

// A good CIFAR-format dataset in tmpdir/name: 301 training records in five batches, 50 test
// records (numbered from 1000), and the class list (CRLF line ends and a trailing empty line, as
// some copies of the official file have) when meta is set.
static const char *make_cifar(const char *name, int meta) {
    const char *dir = mkpath("%s", name);
    make_dir(dir);
    int first = 0;
    for (int b = 0; b < 5; b++) {
        write_cifar_batch(mkpath("%s/data_batch_%d.bin", name, b + 1), first, CIFAR_TRAIN_RECORDS[b]);
        first += CIFAR_TRAIN_RECORDS[b];
    }
    write_cifar_batch(mkpath("%s/test_batch.bin", name), 1000, CIFAR_TEST_RECORDS);
    if (meta) {
        char text[256] = "";
        for (int c = 0; c < 10; c++) {
            strcat(text, CIFAR_NAMES[c]);
            strcat(text, "\r\n");
        }
        strcat(text, "\n");
        write_text(mkpath("%s/batches.meta.txt", name), text);
    }
    return dir;
}

static void test_cifar(void) {
    section("CIFAR-10 binary: a good dataset loads byte for byte");
    char err[1400];
    Dataset train, test;
    const char *dir = make_cifar("cifar", 1);
    int rc = dataset_load_both(dir, &train, &test, err, sizeof(err));
    check(rc == 0, "a CIFAR-format directory loads%s%s", rc ? ": " : "", rc ? err : "");
    if (rc == 0) {
        check(train.n == 301 && test.n == CIFAR_TEST_RECORDS && train.channels == 3 && train.rows == 32 &&
                  train.cols == 32 && train.planar == 1 && train.kind == DATA_CIFAR10 &&
                  strcmp(train.name, "CIFAR-10") == 0 && train.num_classes == 10 && dataset_dim(&train) == 3072,
              "301 + 50 items of 3x32x32 in planes, kind CIFAR-10, 10 classes (got %d + %d of %dx%dx%d, planar %d, "
              "\"%s\")",
              train.n, test.n, train.channels, train.rows, train.cols, train.planar, train.name);
        int exact = 1;
        for (int r = 0; r < train.n && exact; r++) {
            exact &= train.labels[r] == cifar_label(r);
            for (int i = 0; i < CIFAR_PIXELS; i++) exact &= train.images[(size_t)r * CIFAR_PIXELS + i] == cifar_pixel(r, i);
        }
        for (int r = 0; r < test.n && exact; r++) {
            exact &= test.labels[r] == cifar_label(1000 + r);
            for (int i = 0; i < CIFAR_PIXELS; i++) exact &= test.images[(size_t)r * CIFAR_PIXELS + i] == cifar_pixel(1000 + r, i);
        }
        check(exact, "every label and pixel byte as written, across the five training batches and the test batch");
        int names = 1;
        for (int c = 0; c < 10; c++) names &= strcmp(train.class_names[c], CIFAR_NAMES[c]) == 0 &&
                                            strcmp(test.class_names[c], CIFAR_NAMES[c]) == 0;
        check(names, "class names from batches.meta.txt (CRLF, trailing empty line): \"%s\" .. \"%s\"",
              train.class_names[0], train.class_names[9]);
        dataset_free(&train);
        dataset_free(&test);
    }
    dir = make_cifar("cifar_nometa", 0);
    rc = dataset_load_both(dir, &train, &test, err, sizeof(err));
    check(rc == 0 && strcmp(train.class_names[0], "0") == 0 && strcmp(train.class_names[9], "9") == 0,
          "without batches.meta.txt the classes are named 0 .. 9%s%s", rc ? ": " : "", rc ? err : "");
    if (rc == 0) {
        dataset_free(&train);
        dataset_free(&test);
    }

    section("CIFAR-10 binary: malformed files (each refused with its own message, naming the file)");
    static uint8_t rec[CIFAR_RECORD + 100];
    memset(rec, 7, sizeof(rec));
    // not a whole number of records: 100 bytes appended to batch 2
    make_cifar("c_size", 1);
    {
        FILE *f = fopenCheck(mkpath("c_size/data_batch_2.bin"), "ab");
        fwriteCheck(rec, 1, 100, f, "c_size");
        fcloseCheck(f, "c_size");
    }
    expect_refused(mkpath("c_size"), "c_size", "data_batch_2.bin: 184480 bytes is not a whole number of 3073-byte records",
                   "60 records and 100 bytes over");
    make_cifar("c_empty", 1);
    write_bytes(mkpath("c_empty/test_batch.bin"), rec, 0);
    expect_refused(mkpath("c_empty"), "c_empty", "test_batch.bin: empty file", NULL);
    // a label of 10 in record 5 of batch 3
    make_cifar("c_label", 1);
    {
        FILE *f = fopenCheck(mkpath("c_label/data_batch_3.bin"), "r+b");
        fseek(f, 5L * CIFAR_RECORD, SEEK_SET);
        uint8_t ten = 10;
        fwriteCheck(&ten, 1, 1, f, "c_label");
        fcloseCheck(f, "c_label");
    }
    expect_refused(mkpath("c_label"), "c_label", "data_batch_3.bin: record 5 has label 10; CIFAR-10's labels are 0 to 9",
                   NULL);
    make_cifar("c_missing", 1);
    remove(mkpath("c_missing/data_batch_4.bin"));
    expect_refused(mkpath("c_missing"), "c_missing", "c_missing/data_batch_4.bin: missing", "data_batch_5.bin");
    // only the test batch: detected as CIFAR-10, and the training set is missing
    make_dir(mkpath("c_testonly"));
    write_cifar_batch(mkpath("c_testonly/test_batch.bin"), 0, 3);
    expect_refused(mkpath("c_testonly"), "c_testonly", "c_testonly/data_batch_1.bin: missing", NULL);
    make_cifar("c_dir", 1);
    remove(mkpath("c_dir/data_batch_5.bin"));
    make_dir(mkpath("c_dir/data_batch_5.bin"));
    expect_refused(mkpath("c_dir"), "c_dir", "c_dir/data_batch_5.bin: is a directory", NULL);
    make_cifar("c_fifo", 1);
    remove(mkpath("c_fifo/test_batch.bin"));
    if (mkfifo(mkpath("c_fifo/test_batch.bin"), 0666) == 0)
        expect_refused(mkpath("c_fifo"), "c_fifo", "c_fifo/test_batch.bin: is a FIFO", NULL);
    else check(0, "mkfifo failed: %s", strerror(errno));
    make_cifar("c_meta_lines", 1);
    write_text(mkpath("c_meta_lines/batches.meta.txt"), "a\nb\nc\nd\ne\nf\ng\nh\ni\n");
    expect_refused(mkpath("c_meta_lines"), "c_meta_lines", "batches.meta.txt: holds 9 class names", "CIFAR-10 has 10");
    make_cifar("c_meta_eleven", 1);
    write_text(mkpath("c_meta_eleven/batches.meta.txt"), "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\n\n");
    expect_refused(mkpath("c_meta_eleven"), "c_meta_eleven", "batches.meta.txt: holds 11 class names", NULL);
    make_cifar("c_meta_long", 1);
    write_text(mkpath("c_meta_long/batches.meta.txt"),
               "a\nb\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\nd\ne\nf\ng\nh\ni\nj\n");
    expect_refused(mkpath("c_meta_long"), "c_meta_long", "the class name on line 3 is 60 bytes long", "at most 47");
    make_cifar("c_meta_gap", 1);
    write_text(mkpath("c_meta_gap/batches.meta.txt"), "a\nb\nc\n\ne\nf\ng\nh\ni\nj\n");
    expect_refused(mkpath("c_meta_gap"), "c_meta_gap", "batches.meta.txt: line 4 is empty", NULL);
    make_cifar("c_meta_binary", 1);
    write_bytes(mkpath("c_meta_binary/batches.meta.txt"), "a\nb\0c\n", 6);
    expect_refused(mkpath("c_meta_binary"), "c_meta_binary", "line 2 holds the control byte 0x00", NULL);
    make_cifar("c_meta_big", 1);
    {
        char big[5000];
        memset(big, 'a', sizeof(big));
        write_bytes(mkpath("c_meta_big/batches.meta.txt"), big, sizeof(big));
    }
    expect_refused(mkpath("c_meta_big"), "c_meta_big", "batches.meta.txt: 5000 bytes is too large", NULL);
    make_cifar("c_meta_dir", 1);
    remove(mkpath("c_meta_dir/batches.meta.txt"));
    make_dir(mkpath("c_meta_dir/batches.meta.txt"));
    expect_refused(mkpath("c_meta_dir"), "c_meta_dir", "batches.meta.txt: is a directory", NULL);
}

// ----------------------------------------------------------------------------
// 2. detection

static void test_detect(void) {
    section("dataset_load: what it finds in a directory");
    char err[1400];
    make_dir(mkpath("nothing"));
    write_text(mkpath("nothing/README"), "no data here\n");
    int rc = try_load(mkpath("nothing"), err, sizeof(err));
    check(rc != 0 && strstr(err, "nothing: no dataset here: looked for MNIST-format IDX files") &&
              strstr(err, "data_batch_1.bin") && strstr(err, "train/CLASS"),
          "an empty directory -> \"%s\"", err);
    make_dir(mkpath("unpacked"));
    make_cifar("unpacked/cifar-10-batches-bin", 0);
    rc = try_load(mkpath("unpacked"), err, sizeof(err));
    check(rc != 0 && strstr(err, "cifar-10-batches-bin: give that"),
          "CIFAR-10 one level down, as its archive unpacks -> \"%s\"", err);
    rc = try_load(mkpath("nothing/README"), err, sizeof(err));
    check(rc != 0 && strstr(err, "not a directory"), "a file given as the directory -> \"%s\"", err);
    rc = try_load(mkpath("no_such_dir"), err, sizeof(err));
    check(rc != 0 && strstr(err, "no_such_dir: no such directory"), "a missing directory -> \"%s\"", err);
    // IDX: a directory where a file should be is named as such
    make_dir(mkpath("idx_dir"));
    make_dir(mkpath("idx_dir/train-images-idx3-ubyte"));
    rc = try_load(mkpath("idx_dir"), err, sizeof(err));
    check(rc != 0 && strstr(err, "train-images-idx3-ubyte: is a directory, not a file"),
          "IDX: a directory named like a data file -> \"%s\"", err);
}

// ----------------------------------------------------------------------------
// 3. image folders

// picture k of an image folder test: w x h, comp channels, a pattern of k
static uint8_t *folder_picture(int k, int w, int h, int comp) {
    uint8_t *p = (uint8_t *)mallocCheck((size_t)w * h * comp);
    for (int i = 0; i < w * h * comp; i++) p[i] = (uint8_t)(k * 37 + i * 11 + (i % comp) * 50);
    return p;
}

static void write_png(const char *path, int w, int h, int comp, const uint8_t *pixels) {
    if (!stbi_write_png(path, w, h, comp, pixels, w * comp)) die("", "cannot write %s", path);
}

// A good image folder in tmpdir/name: train/alpha (3 PNG), train/beta (a PNG, a BMP, a JPG),
// train/gamma (2 PNG, one RGBA), and test/alpha, test/gamma; 8x6 RGB pictures. Files that are
// not pictures are there to be ignored. Picture k is folder_picture(k).
static const int FW = 8, FH = 6;
static void make_folder(const char *name) {
    static const struct {
        const char *file;
        int k, comp;
    } files[] = {
        {"train/alpha/b.png", 1, 3}, {"train/alpha/a.png", 0, 3}, {"train/alpha/c.PNG", 2, 3},
        {"train/beta/x.png", 3, 3},  {"train/beta/y.bmp", 4, 3},  {"train/beta/z.jpg", 5, 3},
        {"train/gamma/1.png", 6, 4}, {"train/gamma/2.png", 7, 3}, {"test/alpha/t.png", 8, 3},
        {"test/gamma/u.png", 9, 3},
    };
    const char *subs[] = {"", "/train", "/train/alpha", "/train/beta", "/train/gamma", "/test", "/test/alpha", "/test/gamma"};
    for (int i = 0; i < 8; i++) make_dir(mkpath("%s%s", name, subs[i]));
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        const char *path = mkpath("%s/%s", name, files[i].file);
        uint8_t *p = folder_picture(files[i].k, FW, FH, files[i].comp);
        const char *ext = strrchr(path, '.') + 1;
        if (strcmp(ext, "bmp") == 0) stbi_write_bmp(path, FW, FH, files[i].comp, p);
        else if (strcmp(ext, "jpg") == 0) stbi_write_jpg(path, FW, FH, files[i].comp, p, 100);
        else write_png(path, FW, FH, files[i].comp, p);
        free(p);
    }
    write_text(mkpath("%s/train/alpha/notes.txt", name), "not a picture: ignored\n");
    write_text(mkpath("%s/train/alpha/.hidden.png", name), "hidden: ignored\n");
    write_text(mkpath("%s/train/README", name), "a file beside the class folders: ignored\n");
    make_dir(mkpath("%s/train/beta/subfolder", name));  // no picture extension: ignored
    make_dir(mkpath("%s/train/.cache", name));          // hidden: not a class
}

// 1 when item i of ds holds picture k (RGB; alpha dropped); max_diff > 0 allows JPEG's loss
static int folder_item_is(const Dataset *ds, int i, int k, int comp, int max_diff) {
    uint8_t *p = folder_picture(k, FW, FH, comp);
    int ok = 1;
    for (int px = 0; px < FW * FH; px++)
        for (int c = 0; c < 3; c++) ok &= abs(ds->images[(size_t)i * FW * FH * 3 + px * 3 + c] - p[px * comp + c]) <= max_diff;
    free(p);
    return ok;
}

static void test_folder(void) {
    section("image folder: a good folder loads in sorted order, PNG and BMP byte for byte");
    char err[1400];
    Dataset train, test;
    make_folder("folder");
    int rc = dataset_load_both(mkpath("folder"), &train, &test, err, sizeof(err));
    check(rc == 0, "an image folder of PNG, BMP and JPG files loads%s%s", rc ? ": " : "", rc ? err : "");
    if (rc == 0) {
        check(train.n == 8 && test.n == 2 && train.channels == 3 && train.rows == FH && train.cols == FW &&
                  train.planar == 0 && train.kind == DATA_FOLDER && strcmp(train.name, "image folder") == 0,
              "8 + 2 items of 8x6 RGB, interleaved, kind image folder (got %d + %d of %dx%dx%d, planar %d)", train.n,
              test.n, train.channels, train.rows, train.cols, train.planar);
        check(train.num_classes == 3 && strcmp(train.class_names[0], "alpha") == 0 &&
                  strcmp(train.class_names[1], "beta") == 0 && strcmp(train.class_names[2], "gamma") == 0 &&
                  test.num_classes == 3 && strcmp(test.class_names[2], "gamma") == 0,
              "3 classes, the train/ sub-folders in sorted order (hidden .cache and the file README ignored)");
        // sorted order: alpha/a, alpha/b, alpha/c.PNG, beta/x, beta/y.bmp, beta/z.jpg, gamma/1, gamma/2
        static const int want_k[8] = {0, 1, 2, 3, 4, 5, 6, 7}, want_label[8] = {0, 0, 0, 1, 1, 1, 2, 2};
        int order = 1, exact = 1;
        for (int i = 0; i < 8; i++) {
            order &= train.labels[i] == want_label[i];
            if (i != 5) exact &= folder_item_is(&train, i, want_k[i], i == 6 ? 4 : 3, 0);
        }
        check(order && exact, "files in sorted order within each class, PNG and BMP pixels exact (an RGBA PNG with its "
                              "alpha dropped)");
        check(folder_item_is(&train, 5, 5, 3, 40), "the JPG (quality 100) within JPEG's loss of what was written");
        check(test.labels[0] == 0 && test.labels[1] == 2 && folder_item_is(&test, 0, 8, 3, 0) &&
                  folder_item_is(&test, 1, 9, 3, 0),
              "test/ leaves class beta out: its items get train's labels alpha = 0, gamma = 2");
        dataset_free(&train);
        dataset_free(&test);
    }
    // gray pictures stay one channel; gray + alpha is gray
    {
        const char *subs[] = {"gray", "gray/train", "gray/train/a", "gray/train/b", "gray/test", "gray/test/b"};
        for (int i = 0; i < 6; i++) make_dir(mkpath("%s", subs[i]));
        uint8_t *p1 = folder_picture(1, FW, FH, 1), *p2 = folder_picture(2, FW, FH, 2);
        write_png(mkpath("gray/train/a/1.png"), FW, FH, 1, p1);
        write_png(mkpath("gray/train/b/2.png"), FW, FH, 2, p2);
        write_png(mkpath("gray/test/b/3.png"), FW, FH, 1, p1);
        rc = dataset_load_both(mkpath("gray"), &train, &test, err, sizeof(err));
        int ok = rc == 0 && train.channels == 1 && train.n == 2 && test.n == 1 && test.labels[0] == 1;
        for (int px = 0; ok && px < FW * FH; px++)
            ok &= train.images[px] == p1[px] && train.images[FW * FH + px] == p2[px * 2];
        check(ok, "gray PNGs load as one channel, a gray+alpha PNG as gray%s%s", rc ? ": " : "", rc ? err : "");
        if (rc == 0) {
            dataset_free(&train);
            dataset_free(&test);
        }
        free(p1);
        free(p2);
    }

    section("image folder: malformed folders (each refused with its own message)");
    uint8_t *small = folder_picture(0, 5, 5, 3), *gray = folder_picture(0, FW, FH, 1);
    make_folder("f_size");
    write_png(mkpath("f_size/train/beta/w.png"), 5, 5, 3, small);
    expect_refused(mkpath("f_size"), "f_size", "f_size/train/beta/w.png: is 5x5 RGB but the first picture",
                   "train/alpha/a.png, is 8x6 RGB");
    make_folder("f_gray");
    write_png(mkpath("f_gray/train/gamma/0.png"), FW, FH, 1, gray);
    expect_refused(mkpath("f_gray"), "f_gray", "train/gamma/0.png: is 8x6 gray but the first picture", "is 8x6 RGB");
    make_folder("f_testsize");
    write_png(mkpath("f_testsize/test/gamma/v.png"), 5, 5, 3, small);
    expect_refused(mkpath("f_testsize"), "f_testsize", "test/gamma/v.png: is 5x5 RGB but the first picture",
                   "train/alpha/a.png");
    make_folder("f_text");
    write_text(mkpath("f_text/train/beta/notes.png"), "this is text, not a picture\n");
    expect_refused(mkpath("f_text"), "f_text", "train/beta/notes.png: not a PNG, JPG or BMP picture", NULL);
    make_folder("f_emptyfile");
    write_bytes(mkpath("f_emptyfile/train/gamma/3.png"), "", 0);
    expect_refused(mkpath("f_emptyfile"), "f_emptyfile", "train/gamma/3.png: empty file", NULL);
    make_folder("f_truncated");
    {
        const char *path = mkpath("f_truncated/train/alpha/a.png");
        uint8_t buf[4096];
        FILE *f = fopenCheck(path, "rb");
        size_t n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        write_bytes(path, buf, n / 2);  // the header survives, the pixels do not
    }
    expect_refused(mkpath("f_truncated"), "f_truncated", "train/alpha/a.png: cannot decode the picture", NULL);
    make_folder("f_emptyclass");
    make_dir(mkpath("f_emptyclass/train/delta"));
    write_text(mkpath("f_emptyclass/train/delta/readme.txt"), "no pictures\n");
    expect_refused(mkpath("f_emptyclass"), "f_emptyclass", "train/delta: no pictures in this class folder", NULL);
    make_folder("f_testclass");
    make_dir(mkpath("f_testclass/test/delta"));
    write_png(mkpath("f_testclass/test/delta/d.png"), FW, FH, 1, gray);
    expect_refused(mkpath("f_testclass"), "f_testclass", "test/delta: class 'delta' is not in", "train/'s 3 sub-folders");
    make_folder("f_notest");
    {
        char cmd[1300];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", mkpath("f_notest/test"));
        if (system(cmd) != 0) check(0, "could not remove %s", mkpath("f_notest/test"));
    }
    expect_refused(mkpath("f_notest"), "f_notest", "f_notest/test: missing", NULL);
    make_dir(mkpath("f_noclasses"));
    make_dir(mkpath("f_noclasses/train"));
    make_dir(mkpath("f_noclasses/test"));
    expect_refused(mkpath("f_noclasses"), "f_noclasses", "f_noclasses/train: no class folders", NULL);
    make_folder("f_longname");
    make_dir(mkpath("f_longname/train/a_class_name_that_is_far_too_long_for_the_checkpoint_xx"));
    expect_refused(mkpath("f_longname"), "f_longname", "a class name of 55 bytes; at most 47", NULL);
    make_folder("f_huge");
    {
        uint8_t *row = (uint8_t *)callocCheck(5000, 1);
        write_png(mkpath("f_huge/train/beta/wide.png"), 5000, 1, 1, row);
        free(row);
    }
    expect_refused(mkpath("f_huge"), "f_huge", "train/beta/wide.png: 5000x1 pixels is larger than the 4096x4096", NULL);
    make_folder("f_dirpng");
    make_dir(mkpath("f_dirpng/train/gamma/folder.png"));
    expect_refused(mkpath("f_dirpng"), "f_dirpng", "train/gamma/folder.png: is a directory", NULL);
    make_folder("f_fifo");
    if (mkfifo(mkpath("f_fifo/train/gamma/pipe.png"), 0666) == 0)
        expect_refused(mkpath("f_fifo"), "f_fifo", "train/gamma/pipe.png: is a FIFO", NULL);
    else check(0, "mkfifo failed: %s", strerror(errno));
    free(small);
    free(gray);
}

// ----------------------------------------------------------------------------
// 4. preparing a picture for a model

// draws a filled rectangle of value v into a gray canvas (w wide)
static void fill_rect(uint8_t *g, int w, int x0, int y0, int x1, int y1, uint8_t v) {
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) g[y * w + x] = v;
}

// a "7" drawn in dark ink on a white 200x160 canvas, its top-left corner at (ox, oy)
static uint8_t *draw_seven(int ox, int oy) {
    const int W = 200, H = 160;
    uint8_t *g = (uint8_t *)mallocCheck(W * H);
    memset(g, 250, W * H);
    fill_rect(g, W, ox, oy, ox + 60, oy + 10, 20);              // the bar
    for (int y = 0; y < 80; y++)                                // the stroke down, leaning left
        fill_rect(g, W, ox + 50 - y / 4, oy + 10 + y, ox + 60 - y / 4, oy + 11 + y, 20);
    return g;
}

// the bounding box and centre of mass of a (rows, cols) input
static void ink_stats(const float *x, int rows, int cols, int *bw, int *bh, double *cx, double *cy, float *top) {
    int x0 = cols, y0 = rows, x1 = -1, y1 = -1;
    double mass = 0, mx = 0, my = 0;
    *top = 0;
    for (int y = 0; y < rows; y++)
        for (int i = 0; i < cols; i++) {
            float v = x[y * cols + i];
            if (v > 0) {
                x0 = i < x0 ? i : x0, x1 = i > x1 ? i : x1, y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1;
            }
            mass += v, mx += v * (i + 0.5), my += v * (y + 0.5);
            *top = v > *top ? v : *top;
        }
    *bw = x1 - x0 + 1, *bh = y1 - y0 + 1;
    *cx = mass > 0 ? mx / mass : -1, *cy = mass > 0 ? my / mass : -1;
}

static void test_prepare(void) {
    section("preparing pictures for a model");
    char err[1400];
    float x[3 * 32 * 32], y[3 * 32 * 32];
    const ImageSpec mnist = {DATA_IDX, 1, 1, 28, 28, 1}, fashion = {DATA_IDX, 0, 1, 28, 28, 1},
                    cifar = {DATA_CIFAR10, 0, 3, 32, 32, 1}, rgb = {DATA_FOLDER, 0, 3, 32, 32, 0};

    // a digit drawn off-centre (top left) on white, as a PNG
    uint8_t *seven = draw_seven(15, 12);
    write_png(mkpath("seven.png"), 200, 160, 1, seven);
    int rc = image_prepare(mkpath("seven.png"), &mnist, x, err, sizeof(err));
    int bw = 0, bh = 0;
    double cx = 0, cy = 0;
    float top = 0;
    ink_stats(x, 28, 28, &bw, &bh, &cx, &cy, &top);
    check(rc == 0 && x[0] == 0 && x[27] == 0 && x[28 * 28 - 1] == 0 && top == 1.0f,
          "MNIST digit: a dark 7 on white comes out inverted (corners 0, strongest ink 1.0)%s%s", rc ? ": " : "",
          rc ? err : "");
    check(rc == 0 && bw <= 20 && bh == 20, "its ink's box is scaled into 20x20 keeping its aspect: %dx%d", bw, bh);
    check(rc == 0 && fabs(cx - 14) <= 0.5 && fabs(cy - 14) <= 0.5,
          "and centred in 28x28 by its centre of mass: (%.2f, %.2f), want (14, 14) within half a pixel", cx, cy);
    // the same 7 elsewhere on the canvas, and as an RGB JPG, gives (nearly) the same input
    free(seven);
    seven = draw_seven(120, 60);
    uint8_t *rgb7 = (uint8_t *)mallocCheck(200 * 160 * 3);
    for (int i = 0; i < 200 * 160 * 3; i++) rgb7[i] = seven[i / 3];
    write_png(mkpath("seven_moved.png"), 200, 160, 1, seven);
    stbi_write_jpg(mkpath("seven.jpg"), 200, 160, 3, rgb7, 95);
    rc = image_prepare(mkpath("seven_moved.png"), &mnist, y, err, sizeof(err));
    check(rc == 0 && memcmp(x, y, sizeof(float) * 784) == 0, "the same 7 drawn bottom right gives the same input");
    rc = image_prepare(mkpath("seven.jpg"), &mnist, y, err, sizeof(err));
    double diff = 0;
    for (int i = 0; i < 784; i++) diff = fmax(diff, fabs(x[i] - y[i]));
    check(rc == 0 && diff < 0.25, "and as an RGB JPG, within %.3f of it (JPEG's loss)%s%s", diff, rc ? ": " : "",
          rc ? err : "");
    free(rgb7);
    // transparency: black ink on a transparent background is ink on white
    {
        uint8_t *rgba = (uint8_t *)callocCheck(200 * 160 * 4, 1);
        for (int i = 0; i < 200 * 160; i++) rgba[i * 4 + 3] = seven[i] < 128 ? 255 : 0;  // ink opaque black
        write_png(mkpath("seven_alpha.png"), 200, 160, 4, rgba);
        rc = image_prepare(mkpath("seven_alpha.png"), &mnist, y, err, sizeof(err));
        ink_stats(y, 28, 28, &bw, &bh, &cx, &cy, &top);
        check(rc == 0 && y[0] == 0 && bh == 20 && fabs(cx - 14) <= 0.5,
              "black ink on a transparent background is laid over white: inverted and centred the same way");
        free(rgba);
    }
    free(seven);

    // Fashion-MNIST-like gray: a dark square on white, inverted and resized (no box, no centring)
    {
        uint8_t g[56 * 56];
        memset(g, 255, sizeof(g));
        fill_rect(g, 56, 8, 8, 24, 40, 0);
        write_png(mkpath("square.png"), 56, 56, 1, g);
        rc = image_prepare(mkpath("square.png"), &fashion, x, err, sizeof(err));
        check(rc == 0 && x[0] == 0 && x[27 * 28 + 27] == 0 && x[4 * 28 + 4] == 1.0f && x[19 * 28 + 11] == 1.0f &&
                  x[20 * 28 + 12] == 0,
              "gray model: a dark square on white, inverted and resized by 1/2 in place (not re-centred)%s%s",
              rc ? ": " : "", rc ? err : "");
    }

    // colour for CIFAR-10: four coloured quadrants of 64x64, halved, in planes R, G, B
    {
        uint8_t c[64 * 64 * 3];
        static const uint8_t quad[4][3] = {{255, 0, 0}, {0, 255, 0}, {0, 0, 255}, {255, 255, 255}};
        for (int yy = 0; yy < 64; yy++)
            for (int xx = 0; xx < 64; xx++) memcpy(c + (yy * 64 + xx) * 3, quad[(yy >= 32) * 2 + (xx >= 32)], 3);
        write_png(mkpath("quadrants.png"), 64, 64, 3, c);
        rc = image_prepare(mkpath("quadrants.png"), &cifar, x, err, sizeof(err));
        int ok = rc == 0;
        for (int yy = 0; yy < 32 && ok; yy++)
            for (int xx = 0; xx < 32; xx++)
                for (int ch = 0; ch < 3; ch++)
                    ok &= x[ch * 1024 + yy * 32 + xx] == quad[(yy >= 16) * 2 + (xx >= 16)][ch] / 255.0f;
        check(ok, "CIFAR-10: a 64x64 colour picture, halved, as planes R, G, B%s%s", rc ? ": " : "", rc ? err : "");
        rc = image_prepare(mkpath("quadrants.png"), &rgb, y, err, sizeof(err));
        ok = rc == 0;
        for (int p = 0; p < 1024 && ok; p++)
            for (int ch = 0; ch < 3; ch++) ok &= y[p * 3 + ch] == x[ch * 1024 + p];
        check(ok, "a colour image folder: the same values, interleaved RGBRGB as stb_image gives them");
        // a colour picture for a gray model is turned gray: a red square on black
        memset(c, 0, sizeof(c));
        for (int yy = 16; yy < 48; yy++)
            for (int xx = 16; xx < 48; xx++) c[(yy * 64 + xx) * 3] = 255;
        write_png(mkpath("red.png"), 64, 64, 3, c);
        rc = image_prepare(mkpath("red.png"), &fashion, x, err, sizeof(err));
        check(rc == 0 && x[0] == 0 && x[14 * 28 + 14] == 76 / 255.0f,
              "a colour picture for a gray model is turned gray (pure red -> 0.299 x 255 = 76: %.1f)",
              255 * x[14 * 28 + 14]);
        // and a gray picture for a colour model is repeated into R, G and B (and never inverted)
        rc = image_prepare(mkpath("square.png"), &cifar, x, err, sizeof(err));
        check(rc == 0 && x[0] == 1.0f && x[1024] == 1.0f && x[2048] == 1.0f && x[10 * 32 + 8] == 0 &&
                  x[1024 + 10 * 32 + 8] == 0 && x[2048 + 10 * 32 + 8] == 0,
              "a gray picture for a colour model: the same gray in R, G and B, not inverted");
    }

    // a picture of the model's own size gives exactly the dataset's inputs (byte / 255)
    {
        Dataset train, test;
        if (dataset_load_both(mkpath("cifar"), &train, &test, err, sizeof(err)) == 0) {
            uint8_t pic[3072];
            for (int p = 0; p < 1024; p++)
                for (int ch = 0; ch < 3; ch++) pic[p * 3 + ch] = test.images[7 * 3072 + ch * 1024 + p];
            write_png(mkpath("cifar_item.png"), 32, 32, 3, pic);
            rc = image_prepare(mkpath("cifar_item.png"), &cifar, x, err, sizeof(err));
            int same = rc == 0;
            for (int i = 0; i < 3072 && same; i++) same &= x[i] == test.images[7 * 3072 + i] / 255.0f;
            check(same, "a CIFAR-10 test item written as a 32x32 PNG prepares to exactly its dataset inputs");
            dataset_free(&train);
            dataset_free(&test);
        } else {
            check(0, "cannot reload the CIFAR test set: %s", err);
        }
    }

    // what does not work: one line each, naming the file
    struct {
        const char *file, *expect;
        const ImageSpec *spec;
    } bad[] = {
        {"no_such.png", "no_such.png: no such file", &mnist},
        {"empty.png", "empty.png: empty file", &mnist},
        {"text.png", "text.png: not a PNG, JPG or BMP picture that stb_image can read", &mnist},
        {"folder", "folder: is a directory, not a file", &mnist},
        {"blank.png", "blank.png: no ink found", &mnist},
        {"wide.png", "wide.png: 9000x1 pixels is larger than the 8192x8192", &cifar},
        {"fifo.png", "fifo.png: is a FIFO", &mnist},
    };
    write_bytes(mkpath("empty.png"), "", 0);
    write_text(mkpath("text.png"), "a text file with a picture's name\n");
    {
        uint8_t white[40 * 30];
        memset(white, 255, sizeof(white));
        write_png(mkpath("blank.png"), 40, 30, 1, white);
        uint8_t *row = (uint8_t *)callocCheck(9000, 1);
        write_png(mkpath("wide.png"), 9000, 1, 1, row);
        free(row);
        if (mkfifo(mkpath("fifo.png"), 0666) != 0) check(0, "mkfifo failed: %s", strerror(errno));
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rc = image_prepare(mkpath("%s", bad[i].file), bad[i].spec, x, err, sizeof(err));
        check(rc != 0 && strstr(err, bad[i].expect), "%-12s -> \"%s\"", bad[i].file, rc ? err : "(accepted!)");
    }
    const ImageSpec two = {DATA_FOLDER, 0, 2, 28, 28, 0};
    rc = image_prepare(mkpath("square.png"), &two, x, err, sizeof(err));
    check(rc != 0 && strstr(err, "the model takes 2x28x28 inputs, which is not a picture shape"),
          "a model of 2 channels -> \"%s\"", rc ? err : "(accepted!)");
}

// ----------------------------------------------------------------------------
// 5. safe writing and the grid of misclassified images

// the number of entries in dir whose name starts with prefix
static int count_entries(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    if (d) closedir(d);
    return n;
}

static void read_all(const char *path, char *buf, size_t n) {
    buf[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

static void test_safe_write(void) {
    section("safe writing: a temporary file, fsync, rename");
    char err[1400], buf[256];
    make_dir(mkpath("out"));
    const char *dest = mkpath("out/result.txt");
    write_text(dest, "the old contents\n");
    SafeWrite w;
    int rc = safe_write_open(&w, dest, err, sizeof(err));
    if (rc == 0) fputs("the new contents\n", w.f);
    read_all(dest, buf, sizeof(buf));
    int untouched = strcmp(buf, "the old contents\n") == 0;
    rc = rc == 0 ? safe_write_commit(&w, err, sizeof(err)) : rc;
    read_all(dest, buf, sizeof(buf));
    check(rc == 0 && untouched && strcmp(buf, "the new contents\n") == 0 && count_entries(mkpath("out"), ".") == 2,
          "replaces the file only at commit, and leaves no temporary file behind%s%s", rc ? ": " : "", rc ? err : "");
    rc = safe_write_open(&w, dest, err, sizeof(err));
    if (rc == 0) {
        fputs("half", w.f);
        safe_write_abort(&w);
    }
    read_all(dest, buf, sizeof(buf));
    check(rc == 0 && strcmp(buf, "the new contents\n") == 0 && count_entries(mkpath("out"), ".") == 2,
          "abort keeps the old file and removes the temporary one");
    // a symlink planted at the destination: the link is replaced, its target never written
    write_text(mkpath("precious.txt"), "precious\n");
    if (symlink(mkpath("precious.txt"), mkpath("out/link.txt")) == 0) {
        rc = safe_write_open(&w, mkpath("out/link.txt"), err, sizeof(err));
        if (rc == 0) fputs("new\n", w.f);
        rc = rc == 0 ? safe_write_commit(&w, err, sizeof(err)) : rc;
        read_all(mkpath("precious.txt"), buf, sizeof(buf));
        struct stat st;
        check(rc == 0 && strcmp(buf, "precious\n") == 0 && lstat(mkpath("out/link.txt"), &st) == 0 && S_ISREG(st.st_mode),
              "a symlink at the destination is replaced; the file it pointed to is untouched");
    }
    rc = safe_write_open(&w, mkpath("out"), err, sizeof(err));
    check(rc != 0 && strstr(err, "out: is a directory"), "a directory -> \"%s\"", err);
    if (mkfifo(mkpath("out/pipe"), 0666) == 0) {
        rc = safe_write_open(&w, mkpath("out/pipe"), err, sizeof(err));
        check(rc != 0 && strstr(err, "pipe: is a FIFO (named pipe), not a file this program may replace"),
              "a FIFO -> \"%s\"", err);
    }
    rc = safe_write_open(&w, mkpath("no_dir/x.png"), err, sizeof(err));
    check(rc != 0 && strstr(err, "no_dir/x.png: its directory") && strstr(err, "does not exist"),
          "a missing directory -> \"%s\"", err);
    if (geteuid() != 0) {
        make_dir(mkpath("readonly"));
        chmod(mkpath("readonly"), 0555);
        rc = safe_write_open(&w, mkpath("readonly/x.png"), err, sizeof(err));
        check(rc != 0 && strstr(err, "cannot write in the directory"), "an unwritable directory -> \"%s\"", err);
    }
    check(path_same_file(mkpath("out/result.txt"), mkpath("out/../out/result.txt")) &&
              !path_same_file(mkpath("out/result.txt"), mkpath("precious.txt")),
          "path_same_file sees one file through two paths, and tells two files apart");
}

static void test_grid(void) {
    section("the grid of misclassified test images");
    char err[1400];
    Dataset train, test;
    if (dataset_load_both(mkpath("cifar"), &train, &test, err, sizeof(err)) != 0) {
        check(0, "cannot reload the CIFAR test set: %s", err);
        return;
    }
    int *pred = (int *)mallocCheck(sizeof(int) * (size_t)test.n);
    int wrong = 0, first_wrong = -1;
    for (int i = 0; i < test.n; i++) {
        pred[i] = i % 3 == 1 ? (test.labels[i] + 1) % 10 : test.labels[i];  // every third item wrong
        if (pred[i] != test.labels[i]) {
            wrong++;
            if (first_wrong < 0) first_wrong = i;
        }
    }
    const char *path = mkpath("out/errors.png");
    int rc = write_error_grid(path, &test, pred, 12, err, sizeof(err));
    int w = 0, h = 0, comp = 0;
    uint8_t *img = rc == 0 ? stbi_load(path, &w, &h, &comp, 3) : NULL;
    // the layout write_error_grid promises: 12 tiles of 64x64 (32 x 2), each in a cell as wide as
    // its widest caption, as many cells a row as fit in 1200 pixels, under a 20-pixel title line
    int text_w = 0, shown = 0;
    for (int i = 0; i < test.n && shown < 12; i++)
        if (pred[i] != test.labels[i]) {
            char caption[80];
            snprintf(caption, sizeof(caption), "true: %s", test.class_names[test.labels[i]]);
            text_w = text_width(caption) > text_w ? text_width(caption) : text_w;
            snprintf(caption, sizeof(caption), "pred: %s", test.class_names[pred[i]]);
            text_w = text_width(caption) > text_w ? text_width(caption) : text_w;
            shown++;
        }
    int cell_w = (text_w > 64 ? text_w : 64) + 2 * GRID_PAD, cell_h = GRID_PAD + 64 + 2 + 24 + GRID_PAD;
    int ncols = 1200 / cell_w < 12 ? 1200 / cell_w : 12, nrows = (12 + ncols - 1) / ncols;
    check(rc == 0 && img && comp == 3 && wrong == 17 && w == ncols * cell_w && h == 20 + nrows * cell_h,
          "written and read back: %dx%d RGB (want %dx%d: %d x %d cells of %dx%d) for 12 of the %d wrong%s%s", w, h,
          ncols * cell_w, 20 + nrows * cell_h, ncols, nrows, cell_w, cell_h, wrong, rc ? ": " : "", rc ? err : "");
    if (img) {
        // the first tile: the first wrong item, enlarged 2x, its planes turned into RGB
        const uint8_t *item = test.images + (size_t)first_wrong * 3072;
        int same = 1, red = 0;
        for (int y = 0; y < 64; y++)
            for (int x = 0; x < 64; x++)
                for (int c = 0; c < 3; c++)
                    same &= img[((20 + GRID_PAD + y) * w + GRID_PAD + x) * 3 + c] == item[c * 1024 + (y / 2) * 32 + x / 2];
        for (int y = 20 + GRID_PAD + 64; y < 20 + cell_h; y++)
            for (int x = 0; x < cell_w; x++) red += img[(y * w + x) * 3] == 200 && img[(y * w + x) * 3 + 1] == 0;
        check(same, "the first tile is test item %d enlarged 2x, CIFAR's planes shown as RGB", first_wrong);
        check(red > 20, "its caption is drawn under it (%d red pixels of \"pred: ...\")", red);
        stbi_image_free(img);
    }
    check(count_entries(mkpath("out"), ".errors") == 0, "no temporary file left beside it");
    rc = write_error_grid(mkpath("out"), &test, pred, 12, err, sizeof(err));
    check(rc != 0 && strstr(err, "is a directory"), "a directory as the destination -> \"%s\"", err);
    // nothing wrong: still a picture, saying so
    for (int i = 0; i < test.n; i++) pred[i] = test.labels[i];
    rc = write_error_grid(path, &test, pred, 12, err, sizeof(err));
    img = rc == 0 ? stbi_load(path, &w, &h, &comp, 3) : NULL;
    check(img && h == 20, "no misclassified image: a one-line picture saying so (%dx%d)", w, h);
    stbi_image_free(img);
    free(pred);
    dataset_free(&train);
    dataset_free(&test);
}

// ----------------------------------------------------------------------------
// 6. Fashion-MNIST as an image folder: the same pixels, the same accuracy

// Trains 784,128,10 sigmoid on train for a few epochs from seed and returns the test accuracy.
// The learning rate falls linearly to 0 over the run: with a constant rate the last weights depend
// so much on the order of the last batches that two orders of the same items differ by more than
// the 0.3 points this test allows; annealed, they settle to nearly the same model.
static double train_and_test(const Dataset *train, const Dataset *test, int epochs, uint64_t seed, ModelCPU *m) {
    const int B = 64;
    model_init_params_cpu(m, seed);
    memset(m->mbuf, 0, sizeof(real) * m->num_params);
    Rng rng;
    rng_seed(&rng, seed, 1);
    int *perm = (int *)mallocCheck(sizeof(int) * (size_t)train->n);
    int steps = (train->n + B - 1) / B, total = epochs * steps, k = 0;
    for (int e = 0; e < epochs; e++) {
        rng_permutation(&rng, perm, train->n);
        for (int s = 0; s < steps; s++, k++) {
            int bs = train->n - s * B < B ? train->n - s * B : B;
            gather_batch_cpu(m->acts[0], m->labels, train->images, train->labels, perm, s * B, bs, 784);
            model_forward_cpu(m, bs);
            model_loss_cpu(m, bs);
            model_backward_cpu(m, bs);
            model_update_cpu(m, 0.1f * (1.0f - (float)k / total), 0.9f, 0.0f);
        }
    }
    free(perm);
    double loss, acc;
    evaluate_cpu(m, test, &loss, &acc);
    return acc;
}

static void test_fashion_folder(void) {
    const int NTRAIN = 20000, EPOCHS = 3;
#ifdef _OPENMP
    // one thread: this tests the data, not the trainer's threads, and two OpenMP threads spinning
    // on a machine whose other programs use the cores can make training many times slower
    omp_set_num_threads(1);
#endif
    section("Fashion-MNIST written as an image folder: the same pixels, the same accuracy");
    const char *dirs[] = {"data/fashion-mnist", "/usr/share/datasets/fashion-mnist"}, *src = NULL;
    char path[1100], err[1400];
    for (int i = 0; i < 2 && !src; i++)
        if (idx_find(dirs[i], "train-images-idx3-ubyte", path, sizeof(path)) == 0) src = dirs[i];
    if (!src) {
        check(0, "Fashion-MNIST not found in data/fashion-mnist or /usr/share/datasets/fashion-mnist "
                 "---> try: apt-get install dataset-fashion-mnist");
        return;
    }
    Dataset itrain, itest, ftrain, ftest;
    if (dataset_load_both(src, &itrain, &itest, err, sizeof(err)) != 0) {
        check(0, "%s", err);
        return;
    }
    double t0 = now_seconds();
    // class folders "0-T-shirt-top" ... "9-Ankle boot" ('/' cannot be in a name), so sorted order
    // is label order; files named by their IDX index, so within a class too the order is known
    char classdir[10][1100];
    make_dir(mkpath("fashion"));
    make_dir(mkpath("fashion/train"));
    make_dir(mkpath("fashion/test"));
    for (int split = 0; split < 2; split++)
        for (int c = 0; c < 10; c++) {
            char name[64];
            snprintf(name, sizeof(name), "%d-%s", c, itrain.class_names[c]);
            for (char *p = name; *p; p++) *p = *p == '/' ? '-' : *p;
            snprintf(classdir[c], sizeof(classdir[c]), "%s", mkpath("fashion/%s/%s", split ? "test" : "train", name));
            make_dir(classdir[c]);
        }
    for (int split = 0; split < 2; split++) {
        const Dataset *ds = split ? &itest : &itrain;
        int n = split ? ds->n : NTRAIN;
        for (int i = 0; i < n; i++) {
            char file[1200], name[64];
            snprintf(name, sizeof(name), "%d-%s", ds->labels[i], itrain.class_names[ds->labels[i]]);
            for (char *p = name; *p; p++) *p = *p == '/' ? '-' : *p;
            snprintf(file, sizeof(file), "%s/fashion/%s/%s/%05d.png", tmpdir, split ? "test" : "train", name, i);
            write_png(file, 28, 28, 1, ds->images + (size_t)i * 784);
        }
    }
    double t1 = now_seconds();
    int rc = dataset_load_both(mkpath("fashion"), &ftrain, &ftest, err, sizeof(err));
    double t2 = now_seconds();
    check(rc == 0 && ftrain.n == NTRAIN && ftest.n == itest.n && ftrain.channels == 1 && ftrain.rows == 28 &&
              ftrain.num_classes == 10 && strcmp(ftrain.class_names[9], "9-Ankle boot") == 0,
          "%d + %d PNGs written (%.1f s) and loaded as an image folder (%.1f s)%s%s", NTRAIN, itest.n, t1 - t0, t2 - t1,
          rc ? ": " : "", rc ? err : "");
    if (rc != 0) {
        dataset_free(&itrain);
        dataset_free(&itest);
        return;
    }
    // the same items: the folder's order is by class, then by IDX index
    int same = 1;
    for (int split = 0; split < 2; split++) {
        const Dataset *ids = split ? &itest : &itrain, *fds = split ? &ftest : &ftrain;
        int n = split ? ids->n : NTRAIN, k = 0;
        for (int c = 0; c < 10; c++)
            for (int i = 0; i < n; i++)
                if (ids->labels[i] == c) {
                    same &= k < fds->n && fds->labels[k] == c &&
                            memcmp(fds->images + (size_t)k * 784, ids->images + (size_t)i * 784, 784) == 0;
                    k++;
                }
        same &= k == fds->n;
    }
    check(same, "every folder item is its IDX item, pixel for pixel and label for label (order: class, then index)");

    Dataset isub = itrain;  // the IDX run trains on the same first NTRAIN items
    isub.n = NTRAIN;
    const int sizes[] = {784, 128, 10};
    ModelCPU m;
    model_build_cpu(&m, sizes, 2, ACT_SIGMOID, 64);
    // Each side is the mean of SEEDS runs: the order of the items alone moves a run's accuracy by
    // tenths of a point, and the mean of two seeds keeps that noise well inside the 0.3 allowed.
    double t3 = now_seconds(), acc_idx = 0, acc_folder = 0, acc_idx_on_folder = 0, loss;
    const int SEEDS = 2;
    for (int s = 0; s < SEEDS; s++) {
        double a;
        acc_idx += train_and_test(&isub, &itest, EPOCHS, 1337 + s, &m) / SEEDS;
        evaluate_cpu(&m, &ftest, &loss, &a);
        acc_idx_on_folder += a / SEEDS;
        acc_folder += train_and_test(&ftrain, &ftest, EPOCHS, 1337 + s, &m) / SEEDS;
    }
    double t4 = now_seconds();
    check(acc_idx_on_folder == acc_idx, "the IDX-trained models score the same on the folder's test set: %.2f%% and %.2f%%",
          100 * acc_idx, 100 * acc_idx_on_folder);
    check(fabs(acc_folder - acc_idx) <= 0.003 && acc_idx > 0.8,
          "%d epochs on %d items, mean of %d seeds: folder %.2f%%, IDX %.2f%%, %.2f points apart (at most 0.3) (%.1f s)",
          EPOCHS, NTRAIN, SEEDS, 100 * acc_folder, 100 * acc_idx, 100 * fabs(acc_folder - acc_idx), t4 - t3);
    model_free_cpu(&m);
    dataset_free(&itrain);
    dataset_free(&itest);
    dataset_free(&ftrain);
    dataset_free(&ftest);
}

// ----------------------------------------------------------------------------
// 7. sizes, limits, and what is not a file (issue 19)
//
// Each load runs in a child process (run_child): killed after 20 s, so that a reader that hangs
// (a FIFO) fails the check instead of the test; where the point is that nothing large is
// allocated, under a cap on its address space (what it uses now plus a few MB: a malloc from a
// header's claim fails there, and shows in the message); its peak RSS comes back from wait4.

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0  // (AddressSanitizer reserves terabytes of address space: no cap on it)
#endif

#include <sys/resource.h>
#include <sys/wait.h>

typedef struct {
    int rc;                      // the loader's return; -100 - signal when the child was killed
    char msg[1400];
    long base_kb, peak_kb, vm_peak_kb;  // the child's RSS before loading, its peak RSS, its peak address space
    double seconds;
} ChildResult;

// a number from /proc/self/status ("VmHWM:" ...), in kB; 0 when not there
static long proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, strlen(key)) == 0) v = atol(line + strlen(key));
    if (f) fclose(f);
    return v;
}

typedef int (*Loader)(const char *path, char *err, size_t errlen);

static int load_dir(const char *dir, char *err, size_t errlen) { return try_load(dir, err, errlen); }
static int load_images(const char *path, char *err, size_t errlen) {
    uint8_t *data;
    uint32_t dims[3];
    int rc = idx_read(path, 3, &data, dims, err, errlen);
    if (rc == 0) free(data);
    return rc;
}
static int load_labels(const char *path, char *err, size_t errlen) {
    uint8_t *data;
    uint32_t dims[1];
    int rc = idx_read(path, 1, &data, dims, err, errlen);
    if (rc == 0) free(data);
    return rc;
}
static int load_picture(const char *path, char *err, size_t errlen) {
    const ImageSpec spec = {DATA_FOLDER, 0, 3, 32, 32, 0};
    float x[3 * 32 * 32];
    return image_prepare(path, &spec, x, err, errlen);
}

// Runs load(path) in a child: with cap_mb > 0 its address space capped at its size now plus cap_mb
static ChildResult run_child(Loader load, const char *path, long cap_mb) {
    ChildResult r;
    memset(&r, 0, sizeof(r));
    int fd[2];
    if (pipe(fd) != 0) die("", "pipe: %s", strerror(errno));
    fflush(stdout);
    double t0 = now_seconds();
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        ChildResult c;
        memset(&c, 0, sizeof(c));
        c.base_kb = proc_status_kb("VmHWM:");
        if (cap_mb > 0 && !UNDER_ASAN) {
            struct rlimit lim;
            lim.rlim_cur = lim.rlim_max = (rlim_t)(proc_status_kb("VmSize:") + cap_mb * 1024) * 1024;
            setrlimit(RLIMIT_AS, &lim);
        }
        alarm(20);
        c.rc = load(path, c.msg, sizeof(c.msg));
        c.vm_peak_kb = proc_status_kb("VmPeak:");
        if (write(fd[1], &c, sizeof(c)) != (ssize_t)sizeof(c)) _exit(3);
        _exit(0);
    }
    close(fd[1]);
    ssize_t got = read(fd[0], &r, sizeof(r));
    close(fd[0]);
    int status = 0;
    struct rusage ru;
    memset(&ru, 0, sizeof(ru));
    wait4(pid, &status, 0, &ru);
    if (got != (ssize_t)sizeof(r) || !WIFEXITED(status)) {
        memset(&r, 0, sizeof(r));
        r.rc = WIFSIGNALED(status) ? -100 - WTERMSIG(status) : -99;
        snprintf(r.msg, sizeof(r.msg), "(the child %s)", WIFSIGNALED(status) && WTERMSIG(status) == SIGALRM
                                                            ? "hung: killed after 20 s"
                                                            : "died");
    }
    r.peak_kb = ru.ru_maxrss;
    r.seconds = now_seconds() - t0;
    return r;
}

// must be refused, in the child, with a message holding want (and want2)
static void expect_child(const char *label, Loader load, const char *path, long cap_mb, const char *want,
                         const char *want2) {
    ChildResult r = run_child(load, path, cap_mb);
    check(r.rc == -1 && strstr(r.msg, want) && (!want2 || strstr(r.msg, want2)), "%-22s -> \"%s\"", label,
          r.rc == 0 ? "(accepted!)" : r.msg);
}

// an IDX header: magic 0x0801 (labels, 1 dim) or 0x0803 (images, 3 dims)
static size_t idx_header(uint8_t *h, int ndims, uint32_t n, uint32_t rows, uint32_t cols) {
    put_be32(h, 0x800u | (uint32_t)ndims);
    put_be32(h + 4, n);
    if (ndims == 3) put_be32(h + 8, rows), put_be32(h + 12, cols);
    return 4 + 4 * (size_t)ndims;
}

// a raw IDX file: the header, then size_data bytes (a sparse file: nothing written but its size)
static void write_sparse_idx(const char *path, int ndims, uint32_t n, uint32_t rows, uint32_t cols, int64_t size_data) {
    uint8_t h[16];
    size_t hn = idx_header(h, ndims, n, rows, cols);
    write_bytes(path, h, hn);
    if (truncate(path, (off_t)(hn + size_data)) != 0) die("", "truncate %s: %s", path, strerror(errno));
}

// a gzip file: an IDX header, then `zeros` zero bytes, then `noise` bytes of noise (which zlib
// cannot compress), then `tail` raw bytes after the gzip stream
static void write_gz_idx(const char *path, int ndims, uint32_t n, uint32_t rows, uint32_t cols, int64_t zeros,
                         int64_t noise, const char *tail) {
    uint8_t h[16];
    size_t hn = idx_header(h, ndims, n, rows, cols);
    gzFile g = gzopen(path, "wb6");
    if (!g) die("", "cannot write %s", path);
    gzwrite(g, h, (unsigned)hn);
    static uint8_t chunk[1 << 20];
    memset(chunk, 0, sizeof(chunk));
    for (int64_t left = zeros; left > 0; left -= (int64_t)sizeof(chunk))
        gzwrite(g, chunk, (unsigned)(left < (int64_t)sizeof(chunk) ? left : (int64_t)sizeof(chunk)));
    uint64_t x = 88172645463325252ull;  // xorshift64
    for (int64_t left = noise; left > 0; left -= (int64_t)sizeof(chunk)) {
        for (size_t i = 0; i < sizeof(chunk); i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            chunk[i] = (uint8_t)x;
        }
        gzwrite(g, chunk, (unsigned)(left < (int64_t)sizeof(chunk) ? left : (int64_t)sizeof(chunk)));
    }
    gzclose(g);
    if (tail) {
        FILE *f = fopenCheck(path, "ab");
        fwriteCheck(tail, 1, strlen(tail), f, path);
        fcloseCheck(f, path);
    }
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

// a small good IDX dataset in tmpdir/name: 6 training and 3 test images of 2x3 (raw, or .gz)
static const char *make_idx(const char *name, int gz) {
    static const char *const files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                         "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    const char *dir = mkpath("%s", name);
    make_dir(dir);
    for (int i = 0; i < 4; i++) {
        uint8_t buf[64];
        uint32_t n = i < 2 ? 6 : 3;
        size_t hn = idx_header(buf, i % 2 ? 1 : 3, n, 2, 3), body = i % 2 ? n : 6 * n;
        for (size_t k = 0; k < body; k++) buf[hn + k] = (uint8_t)(k % 3);
        const char *path = mkpath("%s/%s%s", name, files[i], gz ? ".gz" : "");
        if (gz) {
            gzFile g = gzopen(path, "wb");
            gzwrite(g, buf, (unsigned)(hn + body));
            gzclose(g);
        } else {
            write_bytes(path, buf, hn + body);
        }
    }
    return dir;
}

static void test_limits(void) {
    char err[2600];
    section("sizes: every claim checked against the limits and the file before anything is allocated");
    // a 12-byte labels file claiming 2^31 labels (4 bytes of data): refused from its size alone
    write_sparse_idx(mkpath("claim31"), 1, 0x80000000u, 0, 0, 4);
    expect_child("12 bytes claiming 2^31", load_labels, mkpath("claim31"), 16,
                 "the header promises 2147483648 bytes of data", "the file holds 4");
    write_sparse_idx(mkpath("claim26"), 1, 1u << 26, 0, 0, 4);
    expect_child("12 bytes claiming 2^26", load_labels, mkpath("claim26"), 16,
                 "truncated: the header promises 67108864 bytes of data, the file holds 4", NULL);
    // products that pass 32 bits but not 64: one image of 65536 x 32768 (2^31 bytes), and 2^31 - 1
    // images of 1 x 1 in a file that really has them all (a sparse 2 GB file): the limits refuse both
    write_sparse_idx(mkpath("wide_image"), 3, 1, 65536, 32768, 16);
    expect_child("1 image of 65536x32768", load_images, mkpath("wide_image"), 16,
                 "an image of 65536 x 32768 pixels is 2147483648 bytes, more than the 50331648", NULL);
    write_sparse_idx(mkpath("many_items"), 3, 0x7fffffffu, 1, 1, 0x7fffffff);
    expect_child("2^31-1 images of 1x1", load_images, mkpath("many_items"), 16,
                 "2147483647 items, more than the 67108864 this reader accepts", NULL);
    write_sparse_idx(mkpath("many_labels"), 1, (1u << 26) + 1, 0, 0, (1 << 26) + 1);
    expect_child("2^26+1 labels", load_labels, mkpath("many_labels"), 16,
                 "67108865 items, more than the 67108864", NULL);
    write_sparse_idx(mkpath("many_bytes"), 3, 200, 4096, 4096, 16);
    expect_child("200 x 4096 x 4096", load_images, mkpath("many_bytes"), 16,
                 "the header promises 3355443200 bytes of data (200 x 4096 x 4096), more than the 2147483647", NULL);

    section("gzip: memory follows the data really there; a bomb is refused");
    // 47 MB of zeros under a header claiming 2,048,000,000 bytes: a 46 KB file that could never hold
    // what it claims (deflate's densest code: 1032 bytes a byte): refused before inflating anything
    write_gz_idx(mkpath("bomb.gz"), 3, 2000000, 32, 32, 47000000, 0, NULL);
    ChildResult r = run_child(load_images, mkpath("bomb.gz"), 16);
    check(r.rc == -1 && strstr(r.msg, "the header promises 2048000000 bytes of data, but a gzip file of") &&
              r.seconds < 2,
          "a %ld-byte .gz of 47 MB of zeros claiming 2 GB -> \"%s\" (%.2f s)", file_size(mkpath("bomb.gz")), r.msg,
          r.seconds);
    // the same claim, with 2 MB of noise after the zeros so that the file could hold it: inflated in
    // chunks into a buffer that grows, and refused as truncated, with memory bounded by the 49 MB
    // really there (bound: 2 x 49 MB + 16 MB more than before loading), never the 2 GB claimed
    write_gz_idx(mkpath("bomb_noise.gz"), 3, 2000000, 32, 32, 47000000, 2000000, NULL);
    r = run_child(load_images, mkpath("bomb_noise.gz"), 200);
    const long present_kb = 49000000 / 1024, bound_kb = 2 * present_kb + 16 * 1024;
    int refused = r.rc == -1 && strstr(r.msg, "truncated: the header promises 2048000000 bytes of data, the file "
                                              "holds 49000000");
    check(refused, "a %ld-byte .gz of 49 MB claiming 2 GB -> \"%s\" (%.2f s)", file_size(mkpath("bomb_noise.gz")),
          r.msg, r.seconds);
    if (UNDER_ASAN) {
        skip("peak memory under AddressSanitizer (its shadow memory and quarantine are not the reader's)");
    } else {
        check(refused && r.peak_kb - r.base_kb <= bound_kb && r.vm_peak_kb > 0,
              "peak RSS %ld MB: %ld MB more than before loading, at most %ld MB allowed (2 x the 49 MB there + 16); "
              "peak address space %ld MB",
              r.peak_kb / 1024, (r.peak_kb - r.base_kb) / 1024, bound_kb / 1024, r.vm_peak_kb / 1024);
    }
    // the other way: a header claiming 1,000 labels, followed by 64 MB of zeros: refused after 1,001
    write_gz_idx(mkpath("long.gz"), 1, 1000, 0, 0, 64 << 20, 0, NULL);
    r = run_child(load_labels, mkpath("long.gz"), 16);
    check(r.rc == -1 && strstr(r.msg, "unexpected bytes after the 1000 bytes of data the header promises") &&
              r.peak_kb - r.base_kb < 8 * 1024 && r.seconds < 2,
          "a .gz of 1,000 labels and 64 MB more -> \"%s\" (%.2f s, %ld MB more RSS)", r.msg, r.seconds,
          (r.peak_kb - r.base_kb) / 1024);

    section("gzip: nothing but another gzip member after the stream");
    make_idx("gz_junk", 1);
    {
        FILE *f = fopenCheck(mkpath("gz_junk/train-labels-idx1-ubyte.gz"), "ab");
        fwriteCheck("junk", 1, 4, f, "gz_junk");
        fcloseCheck(f, "gz_junk");
    }
    expect_refused(mkpath("gz_junk"), "junk after the stream", "train-labels-idx1-ubyte.gz: 4 unexpected bytes after "
                   "the end of the gzip stream (not another gzip member)", NULL);
    make_idx("gz_zeros", 1);
    {
        FILE *f = fopenCheck(mkpath("gz_zeros/t10k-images-idx3-ubyte.gz"), "ab");
        static const uint8_t zeros[512];
        fwriteCheck(zeros, 1, sizeof(zeros), f, "gz_zeros");
        fcloseCheck(f, "gz_zeros");
    }
    expect_refused(mkpath("gz_zeros"), "512 zero bytes after", "t10k-images-idx3-ubyte.gz: 512 unexpected bytes after "
                   "the end of the gzip stream", NULL);
    {  // two gzip members, the file cut between them: legal gzip (as `cat a.gz b.gz`), read as one
        make_idx("gz_members", 1);
        uint8_t buf[64];
        size_t hn = idx_header(buf, 3, 6, 2, 3);
        for (size_t k = 0; k < 36; k++) buf[hn + k] = (uint8_t)(k % 3);
        const char *path = mkpath("gz_members/train-images-idx3-ubyte.gz");
        gzFile g = gzopen(path, "wb");
        gzwrite(g, buf, 10);
        gzclose(g);
        FILE *f = fopenCheck(path, "ab");  // a second member, appended
        Bytef member[256];
        z_stream z;
        memset(&z, 0, sizeof(z));
        deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
        z.next_in = buf + 10, z.avail_in = (uInt)(hn + 36 - 10), z.next_out = member, z.avail_out = sizeof(member);
        deflate(&z, Z_FINISH);
        fwriteCheck(member, 1, sizeof(member) - z.avail_out, f, path);
        deflateEnd(&z);
        fcloseCheck(f, path);
        Dataset train, test;
        int rc = dataset_load_both(mkpath("gz_members"), &train, &test, err, sizeof(err));
        check(rc == 0 && train.n == 6 && train.images[35] == 2, "two concatenated gzip members are read as one file%s%s",
              rc ? ": " : "", rc ? err : "");
        if (rc == 0) dataset_free(&train), dataset_free(&test);
    }
    {  // a .gz cut short in its compressed stream
        make_idx("gz_cut", 1);
        const char *path = mkpath("gz_cut/t10k-labels-idx1-ubyte.gz");
        if (truncate(path, file_size(path) - 6) != 0) check(0, "truncate failed");
        expect_refused(mkpath("gz_cut"), "a .gz cut short", "t10k-labels-idx1-ubyte.gz: truncated gzip file", NULL);
    }

    section("what is not a file: a FIFO, a directory, /dev/null, /dev/zero in place of each data file");
    static const char *const idx_files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    static const struct {
        const char *what, *expect;
    } kinds[4] = {{"FIFO", "is a FIFO (named pipe), not a file"},
                  {"directory", "is a directory, not a file"},
                  {"/dev/null", "is a device, not a file"},
                  {"/dev/zero", "is a device, not a file"}};
    int all = 1, n = 0;
    char first_bad[3000] = "";
    for (int f = 0; f < 4; f++)
        for (int k = 0; k < 4; k++)
            for (int gz = 0; gz < 2; gz++) {
                char name[64];
                snprintf(name, sizeof(name), "notfile_%d_%d_%d", f, k, gz);
                make_idx(name, gz);
                const char *path = mkpath("%s/%s%s", name, idx_files[f], gz ? ".gz" : "");
                remove(path);
                int made = k == 0 ? mkfifo(path, 0666) : k == 1 ? mkdir(path, 0777) : symlink(kinds[k].what, path);
                if (made != 0) die("", "cannot make %s: %s", path, strerror(errno));
                ChildResult c = run_child(load_dir, mkpath("%s", name), 0);
                int ok = c.rc == -1 && strstr(c.msg, kinds[k].expect) && strstr(c.msg, idx_files[f]);
                if (!ok && all) snprintf(first_bad, sizeof(first_bad), "%s: \"%s\"", path, c.msg);
                all &= ok;
                n++;
            }
    check(all, "%d cases (4 files x FIFO, directory, /dev/null, /dev/zero x raw or .gz name): each named as what "
               "it is, none hangs%s%s", n, all ? "" : "; the first that failed: ", first_bad);
    // and the reader itself, given such a path directly (no directory listing to look first): it
    // opens without blocking and asks the open file what it is
    make_dir(mkpath("direct"));
    if (mkfifo(mkpath("direct/fifo"), 0666) != 0) check(0, "mkfifo: %s", strerror(errno));
    expect_child("idx_read of a FIFO", load_images, mkpath("direct/fifo"), 0, "direct/fifo: is a FIFO (named pipe), "
                 "not a file", NULL);
    expect_child("idx_read of a directory", load_images, mkpath("direct"), 0, "direct: is a directory, not a file",
                 NULL);
    expect_child("idx_read of /dev/zero", load_labels, "/dev/zero", 0, "/dev/zero: is a device, not a file", NULL);
    expect_child("idx_read of /dev/null", load_labels, "/dev/null", 0, "/dev/null: is a device, not a file", NULL);
    make_cifar("c_devzero", 1);
    remove(mkpath("c_devzero/data_batch_3.bin"));
    if (symlink("/dev/zero", mkpath("c_devzero/data_batch_3.bin")) != 0) check(0, "symlink: %s", strerror(errno));
    expect_child("CIFAR batch -> /dev/zero", load_dir, mkpath("c_devzero"), 0, "data_batch_3.bin: is a device", NULL);
    expect_child("a picture: a FIFO", load_picture, mkpath("direct/fifo"), 0, "fifo: is a FIFO", NULL);
    expect_child("a picture: /dev/zero", load_picture, "/dev/zero", 0, "/dev/zero: is a device, not a file", NULL);

    section("pictures: a header claiming more than its file holds is refused before decoding");
    {
        // a BMP header (54 bytes) claiming 4000 x 4000 RGB pixels: stb_image would decode 48 MB of zeros
        uint8_t bmp[54] = {'B', 'M'};
        put_be32(bmp + 2, 0);
        bmp[10] = 54, bmp[14] = 40;
        bmp[18] = 4000 & 255, bmp[19] = 4000 >> 8, bmp[22] = 4000 & 255, bmp[23] = 4000 >> 8;
        bmp[26] = 1, bmp[28] = 24;
        write_bytes(mkpath("bomb.bmp"), bmp, sizeof(bmp));
        expect_child("a 54-byte BMP of 4000^2", load_picture, mkpath("bomb.bmp"), 16,
                     "bomb.bmp: its header says 4000x4000 pixels, more than a file of 54 bytes can hold", NULL);
        // a 1x1 PNG whose IDAT chunk claims 2 GB: stb_image 2.27 allocates that before reading it
        uint8_t png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R', 0, 0, 0, 1,
                         0, 0, 0, 1, 8, 0, 0, 0, 0, 0x3a, 0x7e, 0x9b, 0x55, 0x7f, 0xff, 0xff, 0xf0, 'I', 'D', 'A',
                         'T', 0x78, 0x9c, 0x63, 0x60, 0, 0, 0, 2, 0, 1};
        write_bytes(mkpath("bomb.png"), png, sizeof(png));
        expect_child("a PNG chunk of 2 GB", load_picture, mkpath("bomb.png"), 16,
                     "bomb.png: the PNG chunk at byte 33 claims 2147483632 bytes, past the end of the file", NULL);
    }

    section("the default data directory: only a complete one, and what each place lacks");
    make_dir(mkpath("lookup"));
    make_dir(mkpath("lookup/data"));
    make_idx("lookup/data/mnist", 1);
    remove(mkpath("lookup/data/mnist/t10k-images-idx3-ubyte.gz"));
    remove(mkpath("lookup/data/mnist/t10k-labels-idx1-ubyte.gz"));
    make_dir(mkpath("lookup/empty"));
    make_idx("lookup/odd", 0);
    remove(mkpath("lookup/odd/train-labels-idx1-ubyte"));
    if (mkfifo(mkpath("lookup/odd/train-labels-idx1-ubyte"), 0666) != 0) check(0, "mkfifo: %s", strerror(errno));
    static char dir_names[4][1100];  // (mkpath's buffers are reused)
    const char *dirs[4] = {dir_names[0], dir_names[1], dir_names[2], dir_names[3]};
    snprintf(dir_names[0], sizeof(dir_names[0]), "%s", mkpath("lookup/data/mnist"));
    snprintf(dir_names[1], sizeof(dir_names[1]), "%s", mkpath("lookup/data/fashion-mnist"));
    snprintf(dir_names[2], sizeof(dir_names[2]), "%s", mkpath("lookup/empty"));
    snprintf(dir_names[3], sizeof(dir_names[3]), "%s", mkpath("lookup/odd"));
    char why[3000], want[3000];
    const char *found = dataset_find_in(dirs, 4, why, sizeof(why));
    snprintf(want, sizeof(want),
             "no dataset found: %s has only the training files: missing t10k-images-idx3-ubyte[.gz], "
             "t10k-labels-idx1-ubyte[.gz]; %s: no such directory; %s has none of the four IDX files "
             "(train-images-idx3-ubyte[.gz] ...); %s: missing train-labels-idx1-ubyte[.gz] "
             "(train-labels-idx1-ubyte is a FIFO (named pipe))",
             dirs[0], dirs[1], dirs[2], dirs[3]);
    check(!found && strcmp(why, want) == 0, "none complete -> \"%s\"", why);
    make_idx("lookup/data/fashion-mnist", 0);
    found = dataset_find_in(dirs, 4, why, sizeof(why));
    check(found == dirs[1] && strstr(why, "skipped ") && strstr(why, "mnist has only the training files"),
          "the first complete one, the incomplete one before it skipped: %s (note: \"%s\")", found ? found : "NULL",
          why);
    // the real default, from a directory whose data/mnist has only the training files
    char cwd[1100];
    if (!getcwd(cwd, sizeof(cwd)) || chdir(mkpath("lookup")) != 0) {
        check(0, "cannot change directory: %s", strerror(errno));
        return;
    }
    found = find_dataset_dir();
    check(found && strcmp(found, "data/fashion-mnist") == 0,
          "find_dataset_dir skips data/mnist (training files only) for data/fashion-mnist: %s", found ? found : "NULL");
    if (chdir(cwd) != 0) die("", "cannot return to %s", cwd);
}

// ----------------------------------------------------------------------------
// 6. the rule for outputs (common/safe_write.h's output_check), locks, stale temporary files

static void test_output_check(void) {
    section("the rule for outputs: its own kind, never an input, never the data directory");
    char err[2000];
    make_dir(mkpath("rule"));
    make_dir(mkpath("rule/data"));
    make_dir(mkpath("rule/data2"));
    write_text(mkpath("rule/data/train.bin"), "the data\n");
    write_text(mkpath("rule/notes.txt"), "my notes\n");
    write_text(mkpath("rule/empty"), "");
    write_text(mkpath("rule/run.csv"), "# train_mlp_cpu: -d x\nkind,epoch,step\n");
    write_text(mkpath("rule/ck.bin"), "MLPCUCKP and more");
    write_text(mkpath("rule/pic.png"), "\x89PNG\r\n\x1a\n and more");
    write_text(mkpath("rule/fake.png"), "not a picture");
    const char *data = mkpath("rule/data");
    char data_dir[600];
    snprintf(data_dir, sizeof(data_dir), "%s", data);
    const char *none[] = {NULL};
    struct {
        const char *flag, *path;
        OutputKind kind;
        int force, ok;
        const char *expect;
    } cases[] = {
        {"-o", "rule/run.csv", OUT_LOG, 0, 1, ""},
        {"-c", "rule/ck.bin", OUT_CHECKPOINT, 0, 1, ""},
        {"-i", "rule/pic.png", OUT_PNG, 0, 1, ""},
        {"-c", "rule/empty", OUT_CHECKPOINT, 0, 1, ""},
        {"-c", "rule/new.bin", OUT_CHECKPOINT, 0, 1, ""},
        {"-c", "rule/notes.txt", OUT_CHECKPOINT, 0, 0, "the file exists and is not an mlp.cu checkpoint"},
        {"-o", "rule/notes.txt", OUT_LOG, 0, 0, "is not a CSV log of mlp.cu"},
        {"-o", "rule/ck.bin", OUT_LOG, 0, 0, "is not a CSV log of mlp.cu"},
        {"-i", "rule/fake.png", OUT_PNG, 0, 0, "is not a PNG picture"},
        {"-c", "rule/notes.txt", OUT_CHECKPOINT, 1, 1, ""},
        {"-i", "rule/errors.jpg", OUT_PNG, 1, 0, "give a name ending in .png"},
        {"-E", "rule/model.onnx.bak", OUT_ONNX, 0, 0, "give a name ending in .onnx"},
        {"-E", "rule/model.safetensors", OUT_SAFETENSORS, 0, 1, ""},
        {"-o", "rule/data/x.csv", OUT_LOG, 1, 0, "is inside the data directory"},
        {"-o", "rule/data/../data/y.csv", OUT_LOG, 0, 0, "is inside the data directory"},
        {"-o", "rule/data2/x.csv", OUT_LOG, 0, 1, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[700];
        snprintf(path, sizeof(path), "%s", mkpath("%s", cases[i].path));
        err[0] = '\0';
        int rc = output_check(cases[i].flag, path, cases[i].kind, none, data_dir, cases[i].force, err, sizeof(err));
        check(cases[i].ok ? rc == 0 : rc != 0 && strstr(err, cases[i].expect) && strncmp(err, cases[i].flag, 2) == 0,
              "%s %s%s -> %s", cases[i].flag, cases[i].path, cases[i].force ? " -F 1" : "", rc ? err : "allowed");
    }
    // inputs, by device and inode: the same path, a hard link, a symbolic link; -F 1 changes nothing
    char input[700], hard[700], soft[700];
    snprintf(input, sizeof(input), "%s", mkpath("rule/ck.bin"));
    snprintf(hard, sizeof(hard), "%s", mkpath("rule/hard.csv"));
    snprintf(soft, sizeof(soft), "%s", mkpath("rule/soft.png"));
    int linked = link(input, hard) == 0 && symlink(input, soft) == 0;
    const char *inputs[] = {"", input, NULL};
    int rc1 = output_check("-c", input, OUT_CHECKPOINT, inputs, NULL, 1, err, sizeof(err));
    check(rc1 != 0 && strstr(err, "is the same file as the input"), "an input named again -> \"%s\"", err);
    int rc2 = linked ? output_check("-o", hard, OUT_LOG, inputs, NULL, 1, err, sizeof(err)) : -1;
    check(rc2 != 0 && strstr(err, "is the same file as the input"), "a hard link to an input (-F 1) -> \"%s\"", err);
    int rc3 = linked ? output_check("-i", soft, OUT_PNG, inputs, NULL, 0, err, sizeof(err)) : -1;
    check(rc3 != 0 && strstr(err, "is the same file as the input"), "a symbolic link to an input -> \"%s\"", err);
    // a hard link to a file inside the data directory, from outside it
    char dlink[700];
    snprintf(dlink, sizeof(dlink), "%s", mkpath("rule/outside.csv"));
    int rc4 = link(mkpath("rule/data/train.bin"), dlink) == 0
                  ? output_check("-o", dlink, OUT_LOG, none, data_dir, 1, err, sizeof(err)) : -1;
    check(rc4 != 0 && strstr(err, "is the same file as") && strstr(err, "train.bin, in the data directory"),
          "a hard link to a data file, outside the data directory (-F 1) -> \"%s\"", err);
    char sib[700];
    snprintf(sib, sizeof(sib), "%s", mkpath("rule/data2/z.csv"));
    check(path_inside(mkpath("rule/data/new/x.csv"), data_dir) && !path_inside(sib, data_dir) &&
              path_inside(mkpath("rule/data2/../data/x"), data_dir),
          "path_inside: a path under a missing sub-directory is inside; data2/ beside data/ is not");

    section("a lock beside a file, and stale temporary files");
    char lock1[700], lock2[700], target[700];
    snprintf(target, sizeof(target), "%s", mkpath("rule/locked.ckpt"));
    int fd1 = path_lock(target, lock1, sizeof(lock1), err, sizeof(err));
    pid_t pid = fork();
    if (pid == 0) {  // another process: refused while the first holds it
        char l[700], e[2000];
        int fd = path_lock(target, l, sizeof(l), e, sizeof(e));
        _exit(fd < 0 && strstr(e, "another run is writing") ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    check(fd1 >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0 && strstr(lock1, "/.locked.ckpt.lock"),
          "path_lock: a hidden %s beside the file; another process is refused while it is held", strrchr(lock1, '/'));
    path_unlock(fd1, lock1);
    int fd2 = path_lock(target, lock2, sizeof(lock2), err, sizeof(err));
    struct stat st;
    check(fd2 >= 0, "... and gets it once it is given back");
    path_unlock(fd2, lock2);
    check(stat(lock2, &st) != 0, "path_unlock removes the lock file");

    // temporary files named with their writer's PID: a dead writer's go, a live one's stay
    pid_t dead = fork();
    if (dead == 0) _exit(0);
    waitpid(dead, NULL, 0);
    write_text(mkpath("rule/.out.bin.tmp.%d.Ab12Cd", (int)dead), "half");
    write_text(mkpath("rule/.out.bin.tmp.%d.Ab12Cd", (int)getppid()), "a live writer's");
    write_text(mkpath("rule/.out.bin.tmp.Xy12Zw"), "an old-style name: its writer unknown");
    write_text(mkpath("rule/.other.bin.tmp.%d.Ab12Cd", (int)dead), "another destination's");
    SafeWrite w;
    int rc = safe_write_open(&w, mkpath("rule/out.bin"), err, sizeof(err));
    char mine[64];
    snprintf(mine, sizeof(mine), ".out.bin.tmp.%d.", (int)getpid());
    check(rc == 0 && strstr(w.tmp, mine) != NULL, "the temporary file's name holds the writer's PID: %s",
          rc == 0 ? strrchr(w.tmp, '/') + 1 : err);
    if (rc == 0) safe_write_abort(&w);
    check(stat(mkpath("rule/.out.bin.tmp.%d.Ab12Cd", (int)dead), &st) != 0 &&
              stat(mkpath("rule/.out.bin.tmp.%d.Ab12Cd", (int)getppid()), &st) == 0 &&
              stat(mkpath("rule/.out.bin.tmp.Xy12Zw"), &st) == 0 &&
              stat(mkpath("rule/.other.bin.tmp.%d.Ab12Cd", (int)dead), &st) == 0,
          "the next write removes its destination's temporary files whose writer is dead, and no other");
}

// ----------------------------------------------------------------------------
// 7. pictures: sizes told alike, transparency, how -p prepared a picture; class names

// a PNG of w x h whose header is all there is (a signature and an IHDR chunk with its CRC-32)
static void write_png_header(const char *path, uint32_t w, uint32_t h) {
    uint8_t b[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    put_be32(b + 16, w);
    put_be32(b + 20, h);
    b[24] = 8, b[25] = 0;  // 8 bits, gray
    put_be32(b + 29, (uint32_t)crc32(0L, b + 12, 17));
    write_bytes(path, b, sizeof(b));
}

static void test_picture_messages(void) {
    section("pictures: size messages alike, transparency, how -p prepared it");
    char err[1400];
    float x[3 * 32 * 32];
    const ImageSpec fashion = {DATA_IDX, 0, 1, 28, 28, 1};
    const uint32_t sides[] = {10000, 16385, 20000, 100000000};
    for (int i = 0; i < 4; i++) {
        const char *p = mkpath("big%d.png", i);
        write_png_header(p, sides[i], sides[i]);
        int rc = image_prepare(p, &fashion, x, err, sizeof(err));
        check(rc != 0 && strstr(err, "larger than the 8192x8192") && !strstr(err, "not a PNG"),
              "a header of %ux%u -> \"%s\"", sides[i], sides[i], strrchr(err, '/') ? strrchr(err, '/') + 1 : err);
    }
    // a white trouser on a transparent background: on black, as Fashion-MNIST's pictures are
    uint8_t rgba[40 * 40 * 4];
    memset(rgba, 0, sizeof(rgba));
    for (int y = 4; y < 36; y++)
        for (int xx = 14; xx < 26; xx++) memset(rgba + (y * 40 + xx) * 4, 255, 4);  // opaque white
    write_png(mkpath("trouser.png"), 40, 40, 4, rgba);
    ImagePrep prep;
    int rc = image_prepare_how(mkpath("trouser.png"), &fashion, x, &prep, err, sizeof(err));
    char how[600] = "";
    if (rc == 0) image_prep_describe(&prep, &fashion, how, sizeof(how));
    check(rc == 0 && x[0] == 0 && x[14 * 28 + 14] == 1.0f && prep.variance > 0 && prep.alpha_filled && prep.fill == 0,
          "a white object on transparency is laid over black, not white: the object stays (\"%s\")", how);
    check(strcmp(how, "40x40 RGBA -> 28x28 gray: transparent pixels filled with black (against its light opaque "
                      "part), colour turned gray, resized (aspect kept)") == 0,
          "how it was prepared, in one line");
    uint8_t flat[8 * 8];
    memset(flat, 100, sizeof(flat));
    rc = image_prepare_pixels_how(flat, 8, 8, 1, &(ImageSpec){DATA_IDX, 0, 1, 8, 8, 1}, x, &prep, err, sizeof(err));
    check(rc == 0 && prep.variance == 0, "a flat picture: variance %g (-p warns on stderr)", prep.variance);

    section("class names with control bytes are refused by every reader");
    make_dir(mkpath("ctl"));
    make_dir(mkpath("ctl/train"));
    make_dir(mkpath("ctl/test"));
    const char *names[] = {"good", "bad\nname"};
    uint8_t g[4 * 4];
    memset(g, 7, sizeof(g));
    for (int c = 0; c < 2; c++)
        for (int s = 0; s < 2; s++) {
            make_dir(mkpath("ctl/%s/%s", s ? "test" : "train", names[c]));
            write_png(mkpath("ctl/%s/%s/a.png", s ? "test" : "train", names[c]), 4, 4, 1, g);
        }
    Dataset tr, te;
    rc = dataset_load_both(mkpath("ctl"), &tr, &te, err, sizeof(err));
    check(rc != 0 && strstr(err, "control byte 0x0a") && !strchr(err, '\n'),
          "an image folder with a class folder named \"bad\\nname\" -> \"%s\"", err);
    if (rc == 0) {
        dataset_free(&tr);
        dataset_free(&te);
    }
}

int main(void) {
    double t0 = now_seconds();
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/mlp_test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) die("check /tmp", "cannot create a temporary directory");
    test_limits();  // first: its children's peak memory starts from this process's, which is small here
    test_cifar();
    test_detect();
    test_folder();
    test_prepare();
    test_safe_write();
    test_grid();
    test_fashion_folder();
    test_output_check();
    test_picture_messages();
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "chmod -R u+w %s; rm -rf %s", tmpdir, tmpdir);
    if (system(cmd) != 0) printf("  (could not remove %s)\n", tmpdir);
    printf("\n(test_data took %.1f s)\n", now_seconds() - t0);
    return test_exit();
}
