/*
data/images.h: pictures in and out, through Debian's stb_image, stb_image_write and stb_easy_font.

    image_prepare(path, &spec, x, ...)       a PNG, JPG or BMP file -> the D input floats of a model
    image_prepare_pixels(pixels, w, h, ...)  the same from pixels in memory (as stb_image gives them)
    write_error_grid(path, test, pred, ...)  a PNG of misclassified test images with their labels
    image_write_png(path, w, h, comp, ...)   any picture as a PNG, written safely
    image_load(path, max_side, ...)          a picture file -> pixels, every failure one line

The stb headers come from libstb-dev (`-I/usr/include/stb`, the Makefile's STB_INCLUDE), never a
copy in this repository. They are compiled here as static functions (STB_IMAGE_STATIC and
STB_IMAGE_WRITE_STATIC), so any number of files may include this one. stb_image is limited to
the three formats we read (PNG, JPEG, BMP: less code exposed to outside files), and under clang
UndefinedBehaviorSanitizer's checks are switched off inside stb's own functions (its 2.27 code
shifts negative numbers in places, by design); our code around it keeps them.

What stb_image 2.27 leaves to us, and what we do about it:
  - it trusts nothing but checks little up front: we read the header first (stbi_info), refuse
    pictures above a side limit (IMAGE_MAX_SIDE here, FOLDER_MAX_SIDE for datasets) and pictures
    whose header claims more pixels than their file can hold (image_max_pixels: stb would decode
    the missing data as zeros) before any pixel is decoded, and check that the decoded size and
    channels are what the header gave;
  - fopen on a FIFO waits forever: files are opened with data_open_file (data/input.h), which
    refuses anything that is not a regular file;
  - its JPEG decoder reads decoder state it never set (Huffman tables a file names but never
    defines): its allocations are zeroed (STBI_MALLOC below), so that state is zeros, never
    whatever the heap held;
  - its JPEG decoder has other known bugs on hostile files (tests/fuzz/README.md lists what
    fuzzing still finds inside stb); a picture is only ever decoded into a buffer stb allocates
    for the size it checked.
stb_easy_font indexes a table by (character - 32) with no check: every caption is cut to
printable ASCII (32..126) before it is drawn.
*/

// ----------------------------------------------------------------------------
// stb, compiled once per translation unit as static functions

#ifndef MLP_IMAGES_STB
#define MLP_IMAGES_STB

#ifndef IMAGE_MAX_SIDE
#define IMAGE_MAX_SIDE 8192  // pictures to predict: at most 8192 x 8192 pixels (the fuzz targets set less)
#endif
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
// stb's own limit, its default: our smaller limits are checked first, on the sizes stbi_info reads,
// so that every picture too large gets the same message whatever its size
#define STBI_MAX_DIMENSIONS (1 << 24)
// stb_image's memory comes zeroed (stb's own knob for its allocator, not a change to its code):
// its JPEG decoder's state is malloc'ed and not cleared, and a file whose scan names a Huffman
// table it never defined made 2.27 decode with whatever the heap held there, reading far out of
// bounds (found by tests/fuzz/); an undefined table is now all zeros, which decodes as zeros
#define STBI_MALLOC(size) calloc(1, (size))
#define STBI_REALLOC(p, size) realloc((p), (size))  // (only its inflate's output grows: written before read)
#define STBI_FREE(p) free(p)
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION

#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"  // the static functions we do not call
#pragma GCC diagnostic ignored "-Wmissing-braces"   // stb_easy_font's colour initializer
#endif
#if defined(__clang__) && !defined(__CUDACC__)
#pragma clang attribute push(__attribute__((no_sanitize("undefined"))), apply_to = function)
#endif
#ifdef __NVCC__
#pragma nv_diag_suppress 177  // variable declared but never referenced (in stb's code)
#pragma nv_diag_suppress 550  // variable set but never used (in stb's code)
#endif

#include <stb_easy_font.h>
#include <stb_image.h>
#include <stb_image_write.h>

#ifdef __NVCC__
#pragma nv_diag_default 177
#pragma nv_diag_default 550
#endif
#if defined(__clang__) && !defined(__CUDACC__)
#pragma clang attribute pop
#endif
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

#endif // MLP_IMAGES_STB

#include "../common/safe_write.h"
#include "input.h"  // Dataset, data_open_file

#ifndef MLP_IMAGES_H
#define MLP_IMAGES_H

#include <math.h>

// ----------------------------------------------------------------------------
// reading a picture

// What a picture file is, from its first bytes (f is left at the start): 'P' PNG, 'J' JPEG, 'B'
// anything else (stb_image then reads it as a BMP, or refuses it)
static inline char image_format(FILE *f) {
    uint8_t magic[2] = {0, 0};
    size_t got = fread(magic, 1, 2, f);
    fseek(f, 0, SEEK_SET);
    if (got == 2 && magic[0] == 0x89 && magic[1] == 'P') return 'P';
    if (got == 2 && magic[0] == 0xff && magic[1] == 0xd8) return 'J';
    return 'B';
}

// The most pixels a picture file of size bytes can really hold, by its format:
//   PNG   zlib's densest code inflates a byte to at most 1032 bytes, and a pixel takes at least 1 bit
//   JPEG  each 8x8 block of a full-size channel takes at least 1 bit (one Huffman code)
//   BMP   stored uncompressed (stb_image reads no RLE), at least 1 bit a pixel
// stb_image decodes a picture whose data stops short as if the rest were there (zeros), so
// without this a 100-byte header claiming 8192 x 8192 pixels would cost 256 MB and seconds.
static inline int64_t image_max_pixels(char format, int64_t size) {
    if (size > ((int64_t)1 << 40)) return INT64_MAX;  // (no overflow below)
    return format == 'P' ? size * 8 * 1032 : format == 'J' ? size * 64 * 8 : size * 8;
}

// A PNG is a signature, then chunks: 4 bytes of length, 4 of type, the data, a 4-byte CRC-32.
// stb_image 2.27 allocates an IDAT chunk's claimed length before reading it, so a 100-byte file
// claiming a 2 GB chunk would cost 2 GB: every chunk up to IEND must end within the file. Returns
// the offset of the first chunk that does not (its length in *claim), or 0 when all do; f is left
// at the start.
static inline int64_t image_png_overlong_chunk(FILE *f, int64_t size, uint32_t *claim) {
    int64_t at = 8, bad = 0;
    uint8_t head[8];
    while (at + 8 <= size && !bad) {
        if (fseek(f, (long)at, SEEK_SET) != 0 || fread(head, 1, 8, f) != 8) break;
        uint32_t len = ((uint32_t)head[0] << 24) | ((uint32_t)head[1] << 16) | ((uint32_t)head[2] << 8) | head[3];
        if (at + 12 + (int64_t)len > size) bad = at, *claim = len;
        if (memcmp(head + 4, "IEND", 4) == 0) break;
        at += 12 + (int64_t)len;
    }
    fseek(f, 0, SEEK_SET);
    return bad;
}

// A PNG's width and height from its IHDR chunk (bytes 16 to 23), 0 when it has none; f is left at
// the start. For the size message of a picture whose sides stb_image refuses to read at all.
static inline void image_png_size(FILE *f, uint32_t *w, uint32_t *h) {
    uint8_t b[24];
    *w = *h = 0;
    if (fseek(f, 0, SEEK_SET) == 0 && fread(b, 1, 24, f) == 24 && memcmp(b + 12, "IHDR", 4) == 0) {
        *w = ((uint32_t)b[16] << 24) | ((uint32_t)b[17] << 16) | ((uint32_t)b[18] << 8) | b[19];
        *h = ((uint32_t)b[20] << 24) | ((uint32_t)b[21] << 16) | ((uint32_t)b[22] << 8) | b[23];
    }
    fseek(f, 0, SEEK_SET);
}

// Opens path and reads its header: a regular, non-empty file that stb_image recognises as a
// PNG, JPEG or BMP of at most max_side pixels a side, and no more pixels than the file can hold
// (image_max_pixels); a PNG's chunks must end within the file (image_png_overlong_chunk). On
// success *f is open at the picture's start and w, h and comp (the channels in the file: 1 gray,
// 2 gray+alpha, 3 RGB, 4 RGBA) are set.
static inline int image_open(const char *path, int max_side, FILE **f, int *w, int *h, int *comp, char *err,
                             size_t errlen) {
    int64_t size;
    *f = data_open_file(path, &size, err, errlen);
    if (!*f) return -1;
    const char *problem = NULL;
    char what[200];
    char format = size > 0 ? image_format(*f) : 'B';
    int64_t most = image_max_pixels(format, size), chunk;
    uint32_t claim = 0;
    if (size == 0) {
        problem = "empty file";
    } else if (!stbi_info_from_file(*f, w, h, comp)) {
        const char *why = stbi_failure_reason();
        uint32_t pw = 0, ph = 0;
        if (format == 'P') image_png_size(*f, &pw, &ph);
        if ((why && strcmp(why, "too large") == 0) || pw > (uint32_t)max_side || ph > (uint32_t)max_side) {
            // a side beyond even stb's own limit: told as every picture too large is
            if (pw && ph) snprintf(what, sizeof(what), "%ux%u pixels is larger than the %dx%d this program accepts",
                                   pw, ph, max_side, max_side);
            else snprintf(what, sizeof(what), "its header gives a size larger than the %dx%d pixels this program "
                          "accepts", max_side, max_side);
        } else {
            snprintf(what, sizeof(what), "not a PNG, JPG or BMP picture that stb_image can read (%s)", why);
        }
        problem = what;
    } else if (*w <= 0 || *h <= 0 || *w > max_side || *h > max_side) {
        snprintf(what, sizeof(what), "%dx%d pixels is larger than the %dx%d this program accepts", *w, *h, max_side,
                 max_side);
        problem = what;
    } else if ((int64_t)*w * *h > most) {
        snprintf(what, sizeof(what), "its header says %dx%d pixels, more than a file of %lld bytes can hold "
                 "(truncated, or not a real picture)", *w, *h, (long long)size);
        problem = what;
    } else if (format == 'P' && (chunk = image_png_overlong_chunk(*f, size, &claim)) != 0) {
        snprintf(what, sizeof(what), "the PNG chunk at byte %lld claims %u bytes, past the end of the file (%lld "
                 "bytes): truncated, or not a real picture", (long long)chunk, claim, (long long)size);
        problem = what;
    } else if (*comp < 1 || *comp > 4) {
        snprintf(what, sizeof(what), "%d channels: only gray, gray+alpha, RGB and RGBA pictures are read", *comp);
        problem = what;
    }
    if (problem) {
        snprintf(err, errlen, "%s: %s", path, problem);
        fclose(*f);
        *f = NULL;
        return -1;
    }
    return 0;
}

// Decodes the picture image_open opened, whose header gave w x h pixels of comp channels, as
// req_comp channels (0: comp, as in the file), into a buffer stb allocates (free it with
// stbi_image_free). The buffer is checked to be the shape the header gave (the caller sized
// everything from it). Closes f.
static inline uint8_t *image_decode(FILE *f, const char *path, int w, int h, int comp, int req_comp, char *err,
                                    size_t errlen) {
    int w2, h2, comp2;
    uint8_t *pixels = stbi_load_from_file(f, &w2, &h2, &comp2, req_comp);
    fclose(f);
    if (!pixels) {
        snprintf(err, errlen, "%s: cannot decode the picture: %s (stb_image)", path, stbi_failure_reason());
        return NULL;
    }
    if (w2 != w || h2 != h || comp2 != comp) {
        snprintf(err, errlen, "%s: its header says %dx%d of %d channels but it decodes to %dx%d of %d", path, w, h,
                 comp, w2, h2, comp2);
        stbi_image_free(pixels);
        return NULL;
    }
    return pixels;
}

// image_open + image_decode: the pixels of the picture at path, (h, w, comp) interleaved, where comp
// is the file's channel count; NULL and one line in err on any failure.
static inline uint8_t *image_load(const char *path, int max_side, int *w, int *h, int *comp, char *err,
                                  size_t errlen) {
    FILE *f;
    if (image_open(path, max_side, &f, w, h, comp, err, errlen) != 0) return NULL;
    return image_decode(f, path, *w, *h, *comp, 0, err, errlen);
}

// ----------------------------------------------------------------------------
// resizing: area averaging

// Resizes one channel of a region of a picture by area averaging: output pixel (x, y) is the mean
// of the source area it covers, source pixels partly covered counting by the part covered. That is
// the right filter for shrinking (every source pixel counts, no aliasing); for enlarging it
// repeats pixels (an integer factor gives exact copies) and blends only where an output pixel
// straddles two source pixels. Separable: rows first, then columns.
//   src: the channel's first byte; pixel (x, y) at src[y*row_stride + x*px_stride]
//   region: x0, y0, bw, bh (in source pixels) -> dst (dh, dw) floats, not rounded
typedef struct {
    int *start, *count;  // per output pixel: its first source pixel and how many it covers
    double *weight;      // their weights, output after output (each output's sum to 1)
} AreaAxis;

static inline int area_axis_build(AreaAxis *a, int first, int n, int m) {
    a->start = (int *)malloc(sizeof(int) * (size_t)m);
    a->count = (int *)malloc(sizeof(int) * (size_t)m);
    a->weight = (double *)malloc(sizeof(double) * ((size_t)n + 2 * (size_t)m));
    if (!a->start || !a->count || !a->weight) return -1;
    double span = (double)n / m;
    size_t k = 0;
    for (int i = 0; i < m; i++) {
        double lo = i * span, hi = (i + 1) * span;
        int j0 = (int)floor(lo), j1 = (int)ceil(hi);
        if (j1 > n) j1 = n;
        a->start[i] = first + j0;
        a->count[i] = 0;
        for (int j = j0; j < j1; j++) {
            double overlap = fmin(j + 1.0, hi) - fmax((double)j, lo);
            if (overlap <= 0) continue;
            if (a->count[i] == 0) a->start[i] = first + j;
            a->weight[k++] = overlap / span;
            a->count[i]++;
        }
    }
    return 0;
}

static inline void area_axis_free(AreaAxis *a) {
    free(a->start);
    free(a->count);
    free(a->weight);
}

static inline int resize_area(const uint8_t *src, size_t row_stride, size_t px_stride, int x0, int y0, int bw, int bh,
                              float *dst, int dw, int dh) {
    AreaAxis ax = {0}, ay = {0};
    float *tmp = (float *)malloc(sizeof(float) * (size_t)bh * dw);  // the rows, resized
    const double *w;
    int rc = -1;
    if (!tmp || area_axis_build(&ax, x0, bw, dw) != 0 || area_axis_build(&ay, y0, bh, dh) != 0) goto done;
    for (int y = 0; y < bh; y++) {
        const uint8_t *row = src + (size_t)(y0 + y) * row_stride;
        w = ax.weight;
        for (int x = 0; x < dw; x++) {
            double sum = 0;
            for (int j = 0; j < ax.count[x]; j++) sum += w[j] * row[(size_t)(ax.start[x] + j) * px_stride];
            w += ax.count[x];
            tmp[(size_t)y * dw + x] = (float)sum;
        }
    }
    w = ay.weight;
    for (int y = 0; y < dh; y++) {
        for (int x = 0; x < dw; x++) {
            double sum = 0;
            for (int j = 0; j < ay.count[y]; j++) sum += w[j] * tmp[(size_t)(ay.start[y] - y0 + j) * dw + x];
            dst[(size_t)y * dw + x] = (float)sum;
        }
        w += ay.count[y];
    }
    rc = 0;
done:
    area_axis_free(&ax);
    area_axis_free(&ay);
    free(tmp);
    return rc;
}

// a resized value back to a byte: rounded to the nearest, within 0..255
static inline uint8_t to_byte(double v) { return v <= 0 ? 0 : v >= 255 ? 255 : (uint8_t)floor(v + 0.5); }

// ----------------------------------------------------------------------------
// preparing a picture for a model

// What a model takes as input, from its checkpoint (or image_spec_from_dataset).
typedef struct {
    DataKind kind;     // the kind of dataset the model was trained on
    int mnist_digits;  // 1: MNIST's handwritten digits, whose pictures are prepared as MNIST's were
    int channels;      // 1 (gray) or 3 (RGB)
    int rows, cols;
    int planar;        // channels 3: 1 = planes RRR..GGG..BBB.. (CIFAR-10), 0 = interleaved RGBRGB..
} ImageSpec;

static inline ImageSpec image_spec_from_dataset(const Dataset *ds) {
    ImageSpec s;
    s.kind = ds->kind;
    s.mnist_digits = ds->kind == DATA_IDX && strcmp(ds->name, "MNIST") == 0;
    s.channels = ds->channels;
    s.rows = ds->rows;
    s.cols = ds->cols;
    s.planar = ds->planar;
    return s;
}

// The mean of the picture's border (a ring min(w, h) / 32 pixels wide, at least 1): the
// background's brightness, for deciding whether to invert.
static inline double border_mean(const uint8_t *g, int w, int h) {
    int ring = (w < h ? w : h) / 32;
    if (ring < 1) ring = 1;
    double sum = 0;
    long count = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            if (x < ring || y < ring || x >= w - ring || y >= h - ring) {
                sum += g[(size_t)y * w + x];
                count++;
            }
    return sum / count;
}

// MNIST's digits were made (LeCun et al.) by scaling each digit's bounding box into a 20x20 box,
// keeping its aspect ratio, with anti-aliasing (gray levels), then centring it in 28x28 by its
// centre of mass. The same here, on a gray picture g (w, h) with light ink on a dark background:
//   1. background and contrast: the border's mean is the background b; values are stretched so
//      that b -> 0 and the strongest ink -> 255, and what stays below a fifth of that (paper
//      texture, JPEG noise) is set to 0, as MNIST's backgrounds are exactly 0;
//   2. the ink's bounding box, resized by area averaging so that its longer side is 20 pixels
//      (20/28 of the model's side for other sizes);
//   3. pasted where its centre of mass falls on the centre of the 28x28 field, moved back inside
//      the field in the rare case that this would cut ink off.
static inline int prepare_mnist_digit(uint8_t *g, int w, int h, const ImageSpec *spec, uint8_t *out, char *err,
                                      size_t errlen) {
    double b = border_mean(g, w, h);
    int top = 0;
    for (size_t i = 0; i < (size_t)w * h; i++) top = g[i] > top ? g[i] : top;
    if (top - b < 32) {
        snprintf(err, errlen, "no ink found: the picture is almost uniform (a digit model needs a digit to centre)");
        return -1;
    }
    int x0 = w, y0 = h, x1 = -1, y1 = -1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *v = &g[(size_t)y * w + x];
            double s = (*v - b) * 255.0 / (top - b);
            *v = s < 255.0 / 5 ? 0 : to_byte(s);
            if (*v) {
                x0 = x < x0 ? x : x0, x1 = x > x1 ? x : x1;
                y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1;
            }
        }
    int bw = x1 - x0 + 1, bh = y1 - y0 + 1;
    int side = spec->rows < spec->cols ? spec->rows : spec->cols;
    int box = (side * 20 + 14) / 28;
    if (box < 1) box = 1;
    double scale = (double)box / (bw > bh ? bw : bh);
    int nw = (int)lround(bw * scale), nh = (int)lround(bh * scale);
    nw = nw < 1 ? 1 : nw > box ? box : nw;
    nh = nh < 1 ? 1 : nh > box ? box : nh;
    float digit[64 * 64];  // box <= side * 20/28, and side <= 89 for this to fit: checked by the caller
    if (resize_area(g, (size_t)w, 1, x0, y0, bw, bh, digit, nw, nh) != 0) {
        snprintf(err, errlen, "out of host memory resizing the picture");
        return -1;
    }
    double mass = 0, mx = 0, my = 0;
    for (int y = 0; y < nh; y++)
        for (int x = 0; x < nw; x++) {
            double v = to_byte(digit[y * nw + x]);
            mass += v;
            mx += v * (x + 0.5);
            my += v * (y + 0.5);
        }
    if (mass <= 0) {
        snprintf(err, errlen, "no ink left after scaling the digit into its %dx%d box", box, box);
        return -1;
    }
    int ox = (int)lround(spec->cols / 2.0 - mx / mass), oy = (int)lround(spec->rows / 2.0 - my / mass);
    ox = ox < 0 ? 0 : ox > spec->cols - nw ? spec->cols - nw : ox;
    oy = oy < 0 ? 0 : oy > spec->rows - nh ? spec->rows - nh : oy;
    memset(out, 0, (size_t)spec->rows * spec->cols);
    for (int y = 0; y < nh; y++)
        for (int x = 0; x < nw; x++) out[(size_t)(oy + y) * spec->cols + ox + x] = to_byte(digit[y * nw + x]);
    return 0;
}

// How image_prepare_pixels prepared a picture, for -p to say (image_prep_describe)
typedef struct {
    int w, h, comp;    // the picture as decoded
    int alpha_filled;  // some pixels were (partly) transparent: laid over fill
    int fill;          // 0 black or 255 white: the colour that contrasts with the picture's opaque part
    int to_gray;       // colour turned gray (a gray model)
    int to_colour;     // gray repeated into R, G and B (a colour model)
    int inverted;      // its border was light: inverted to light on dark, as the dataset's pictures are
    int digit;         // MNIST's preparation: the ink's box scaled into 20x20, centred by its mass
    int resized;       // its size differs from the model's
    int aspect_kept;   // resized by the same factor both ways (or not resized)
    double variance;   // of the prepared inputs: 0 means one flat value, nothing to recognise
} ImagePrep;

// "300x200 RGBA -> 28x28 gray: transparent pixels filled with black, colour turned gray, resized
// (aspect changed)": one line for -p
static inline void image_prep_describe(const ImagePrep *p, const ImageSpec *spec, char *out, size_t n) {
    static const char *const kinds[] = {"", "gray", "gray+alpha", "RGB", "RGBA"};
    size_t k = (size_t)snprintf(out, n, "%dx%d %s -> %dx%d %s:", p->w, p->h, kinds[p->comp < 1 || p->comp > 4 ? 0 : p->comp],
                                spec->cols, spec->rows, spec->channels == 3 ? "RGB" : "gray");
    const char *sep = " ";
#define PREP_SAY(...)                                                      \
    do {                                                                   \
        if (k < n) k += (size_t)snprintf(out + k, n - k, "%s", sep);       \
        if (k < n) k += (size_t)snprintf(out + k, n - k, __VA_ARGS__);     \
        sep = ", ";                                                        \
    } while (0)
    if (p->alpha_filled)
        PREP_SAY("transparent pixels filled with %s (against its %s opaque part)", p->fill ? "white" : "black",
                 p->fill ? "dark" : "light");
    if (p->to_gray) PREP_SAY("colour turned gray");
    if (p->to_colour) PREP_SAY("gray repeated into R, G and B");
    if (p->inverted) PREP_SAY("inverted (its background was light)");
    if (p->digit) PREP_SAY("digit scaled into a 20x20 box (aspect kept) and centred by its mass");
    else if (p->resized) PREP_SAY("resized (aspect %s)", p->aspect_kept ? "kept" : "changed");
    if (!strcmp(sep, " ")) PREP_SAY("used as it is");
#undef PREP_SAY
}

// Prepares a decoded picture, (h, w, comp) interleaved bytes with comp 1..4 (gray, gray+alpha,
// RGB, RGBA), as the model's D = channels * rows * cols input floats (byte / 255, as the trainers
// feed the dataset), according to spec, and says how in *prep (when not NULL):
//   - transparent pixels are laid over black or white, whichever contrasts with the picture's
//     opaque part (its mean brightness, weighted by opacity): a white shirt on transparency
//     stays a white shirt (on black), a black digit a black digit (on white);
//   - gray models: colour is turned gray (0.299 R + 0.587 G + 0.114 B); the picture is inverted
//     when its border is light (MNIST and Fashion-MNIST have light things on black); then MNIST's
//     digits as prepare_mnist_digit says, anything else resized to rows x cols;
//   - colour models: gray is repeated into R, G and B; resized to rows x cols; the channels
//     in the dataset's order (CIFAR-10's planes, or interleaved as stb gives them).
// Resizing is by area averaging (resize_area), and the result is rounded to bytes, so a picture
// already of the model's size gives exactly the inputs the dataset's own item would.
static inline int image_prepare_pixels_how(const uint8_t *pixels, int w, int h, int comp, const ImageSpec *spec,
                                           float *x, ImagePrep *prep, char *err, size_t errlen) {
    ImagePrep unused;
    if (!prep) prep = &unused;
    memset(prep, 0, sizeof(*prep));
    prep->w = w, prep->h = h, prep->comp = comp;
    if ((spec->channels != 1 && spec->channels != 3) || spec->rows < 1 || spec->cols < 1 ||
        spec->rows > IMAGE_MAX_SIDE || spec->cols > IMAGE_MAX_SIDE || (spec->mnist_digits && spec->channels != 1) ||
        (spec->mnist_digits && (spec->rows > 89 || spec->cols > 89))) {
        snprintf(err, errlen, "the model takes %dx%dx%d inputs%s, which is not a picture shape this program prepares",
                 spec->channels, spec->rows, spec->cols, spec->mnist_digits ? " as MNIST digits" : "");
        return -1;
    }
    if (comp < 1 || comp > 4 || w < 1 || h < 1) {
        snprintf(err, errlen, "a %dx%d picture of %d channels cannot be prepared", w, h, comp);
        return -1;
    }
    int C = spec->channels, has_alpha = comp == 2 || comp == 4, colour = comp >= 3;
    size_t npix = (size_t)w * h;
    uint8_t *work = (uint8_t *)malloc(npix * C);  // (h, w, C) interleaved
    uint8_t *out = (uint8_t *)malloc((size_t)C * spec->rows * spec->cols);
    float *plane = (float *)malloc(sizeof(float) * (size_t)spec->rows * spec->cols);
    int rc = -1, D = C * spec->rows * spec->cols;
    double fill = 255;  // what transparent pixels are laid over: the opposite of the opaque part
    double sum = 0, sum2 = 0;
    if (!work || !out || !plane) {
        snprintf(err, errlen, "out of host memory for a %dx%d picture", w, h);
        goto done;
    }
    if (has_alpha) {
        double opacity = 0, light = 0;
        for (size_t i = 0; i < npix; i++) {
            const uint8_t *p = pixels + i * comp;
            double a = p[comp - 1] / 255.0;
            opacity += a;
            light += a * (colour ? 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2] : p[0]);
            prep->alpha_filled |= p[comp - 1] != 255;
        }
        fill = opacity > 0 && light / opacity > 127.5 ? 0 : 255;
        prep->fill = (int)fill;
        if (!prep->alpha_filled) has_alpha = 0;
    }
    prep->to_gray = C == 1 && colour;
    prep->to_colour = C == 3 && !colour;
    for (size_t i = 0; i < npix; i++) {
        const uint8_t *p = pixels + i * comp;
        double rgb[3];
        for (int c = 0; c < 3; c++) rgb[c] = p[colour ? c : 0];
        if (has_alpha) {
            double a = p[comp - 1] / 255.0;
            for (int c = 0; c < 3; c++) rgb[c] = a * rgb[c] + (1 - a) * fill;
        }
        if (C == 1) work[i] = to_byte(colour ? 0.299 * rgb[0] + 0.587 * rgb[1] + 0.114 * rgb[2] : rgb[0]);
        else
            for (int c = 0; c < 3; c++) work[i * 3 + c] = to_byte(rgb[c]);
    }
    prep->resized = w != spec->cols || h != spec->rows;
    prep->aspect_kept = (int64_t)w * spec->rows == (int64_t)h * spec->cols;
    if (C == 1) {
        if ((prep->inverted = border_mean(work, w, h) > 127.5))
            for (size_t i = 0; i < npix; i++) work[i] = (uint8_t)(255 - work[i]);
        if ((prep->digit = spec->mnist_digits)) {
            if (prepare_mnist_digit(work, w, h, spec, out, err, errlen) != 0) goto done;
        } else {
            if (resize_area(work, (size_t)w, 1, 0, 0, w, h, plane, spec->cols, spec->rows) != 0) goto oom;
            for (int i = 0; i < spec->rows * spec->cols; i++) out[i] = to_byte(plane[i]);
        }
    } else {
        int RC = spec->rows * spec->cols;
        for (int c = 0; c < 3; c++) {
            if (resize_area(work + c, (size_t)w * 3, 3, 0, 0, w, h, plane, spec->cols, spec->rows) != 0) goto oom;
            for (int i = 0; i < RC; i++) out[spec->planar ? c * RC + i : i * 3 + c] = to_byte(plane[i]);
        }
    }
    for (int i = 0; i < D; i++) {
        x[i] = out[i] / 255.0f;
        sum += out[i];
        sum2 += (double)out[i] * out[i];
    }
    prep->variance = sum2 / D - (sum / D) * (sum / D);
    if (prep->variance < 0) prep->variance = 0;  // (rounding)
    rc = 0;
    goto done;
oom:
    snprintf(err, errlen, "out of host memory resizing a %dx%d picture", w, h);
done:
    free(work);
    free(out);
    free(plane);
    return rc;
}

static inline int image_prepare_pixels(const uint8_t *pixels, int w, int h, int comp, const ImageSpec *spec,
                                       float *x, char *err, size_t errlen) {
    return image_prepare_pixels_how(pixels, w, h, comp, spec, x, NULL, err, errlen);
}

// Reads a PNG, JPG or BMP file and prepares it for the model (image_prepare_pixels): x gets
// spec's channels * rows * cols floats, and prep (when not NULL) how it was prepared. -1 and one
// line in err, naming the file, when it is missing, empty, not a picture stb_image can read,
// larger than IMAGE_MAX_SIDE a side, or does not fit the model (a blank picture for a digit
// model: no ink to centre).
static inline int image_prepare_how(const char *path, const ImageSpec *spec, float *x, ImagePrep *prep, char *err,
                                    size_t errlen) {
    int w, h, comp;
    uint8_t *pixels = image_load(path, IMAGE_MAX_SIDE, &w, &h, &comp, err, errlen);
    if (!pixels) return -1;
    char why[512];
    int rc = image_prepare_pixels_how(pixels, w, h, comp, spec, x, prep, why, sizeof(why));
    if (rc != 0) snprintf(err, errlen, "%s: %s", path, why);
    stbi_image_free(pixels);
    return rc;
}

static inline int image_prepare(const char *path, const ImageSpec *spec, float *x, char *err, size_t errlen) {
    return image_prepare_how(path, spec, x, NULL, err, errlen);
}

// ----------------------------------------------------------------------------
// writing pictures

// stb_image_write's output callback: the bytes go to the SafeWrite's temporary file (a failed
// write shows in ferror, which safe_write_commit checks)
static inline void image_write_to_safe(void *context, void *data, int size) {
    SafeWrite *w = (SafeWrite *)context;
    if (size > 0) fwrite(data, 1, (size_t)size, w->f);
}

// Writes pixels ((h, w, comp) interleaved bytes, comp 1..4) as a PNG at path, safely
// (common/safe_write.h: a temporary file, fsync, rename). 0, or -1 and one line in err.
static inline int image_write_png(const char *path, int w, int h, int comp, const uint8_t *pixels, char *err,
                                  size_t errlen) {
    SafeWrite sw;
    if (safe_write_open(&sw, path, err, errlen) != 0) return -1;
    if (!stbi_write_png_to_func(image_write_to_safe, &sw, w, h, comp, pixels, w * comp)) {
        snprintf(err, errlen, "%s: stb_image_write could not encode the %dx%d picture", path, w, h);
        safe_write_abort(&sw);
        return -1;
    }
    return safe_write_commit(&sw, err, errlen);
}

// Draws text at (x, y) (its top left) into an RGB picture (W, H) in colour rgb, with stb_easy_font:
// it gives each character as axis-aligned quads, which are filled here as rectangles. Bytes
// outside printable ASCII become '?' (stb_easy_font has no glyphs for them, and no check).
static inline void draw_text(uint8_t *img, int W, int H, int x, int y, const char *text, const uint8_t rgb[3]) {
    char safe[256];
    size_t n = 0;
    for (; text[n] && n < sizeof(safe) - 1; n++) safe[n] = text[n] >= 32 && text[n] <= 126 ? text[n] : '?';
    safe[n] = '\0';
    static float quads[256 * 70 * 4];  // stb_easy_font's worst case is about 270 bytes a character
    int nq = stb_easy_font_print((float)x, (float)y, safe, NULL, quads, (int)sizeof(quads));
    for (int q = 0; q < nq; q++) {
        const float *v = quads + (size_t)q * 16;  // 4 vertices of x, y, z, colour (16 bytes each)
        float qx0 = v[0], qy0 = v[1], qx1 = v[0], qy1 = v[1];
        for (int k = 1; k < 4; k++) {
            qx0 = fminf(qx0, v[k * 4]), qx1 = fmaxf(qx1, v[k * 4]);
            qy0 = fminf(qy0, v[k * 4 + 1]), qy1 = fmaxf(qy1, v[k * 4 + 1]);
        }
        for (int py = (int)lroundf(qy0); py < (int)lroundf(qy1); py++)
            for (int px = (int)lroundf(qx0); px < (int)lroundf(qx1); px++)
                if (px >= 0 && py >= 0 && px < W && py < H) memcpy(img + ((size_t)py * W + px) * 3, rgb, 3);
    }
}

// width in pixels of text as draw_text draws it
static inline int text_width(const char *text) {
    char safe[256];
    size_t n = 0;
    for (; text[n] && n < sizeof(safe) - 1; n++) safe[n] = text[n] >= 32 && text[n] <= 126 ? text[n] : '?';
    safe[n] = '\0';
    return stb_easy_font_width(safe);
}

#define ERROR_GRID_DEFAULT 100  // max_images <= 0 means this many
#define ERROR_GRID_MAX 400      // and never more than this many
#define GRID_MIN_TILE 64        // pictures are enlarged (by whole factors) to at least this many pixels a side
#define GRID_MAX_TILE 256       // and shrunk (by area averaging) to at most this many
#define GRID_PAD 4

// Writes a PNG grid of the first max_images misclassified test images: each enlarged to at least
// GRID_MIN_TILE pixels a side (by a whole factor, so pixels stay sharp), in colour as the dataset
// stores it (CIFAR-10's planes turned into RGB), with two lines under it: "true: Coat" in black
// and "pred: Pullover" in red; a title line says how many were wrong. pred holds test->n predicted
// classes. Written safely (image_write_png). 0, or -1 and one line in err.
static inline int write_error_grid(const char *path, const Dataset *test, const int *pred, int max_images, char *err,
                                   size_t errlen) {
    if (max_images <= 0) max_images = ERROR_GRID_DEFAULT;
    if (max_images > ERROR_GRID_MAX) max_images = ERROR_GRID_MAX;
    int wrong = 0, shown = 0;
    int *items = (int *)malloc(sizeof(int) * (size_t)max_images);
    if (!items) {
        snprintf(err, errlen, "%s: out of host memory", path);
        return -1;
    }
    for (int i = 0; i < test->n; i++)
        if (pred[i] != test->labels[i]) {
            if (shown < max_images) items[shown++] = i;
            wrong++;
        }
    // the tile: the picture scaled by a whole factor up to GRID_MIN_TILE, or down to GRID_MAX_TILE
    int rows = test->rows, cols = test->cols, big = rows > cols ? rows : cols;
    int tw = cols, th = rows;
    if (big < GRID_MIN_TILE) {
        int k = (GRID_MIN_TILE + big - 1) / big;
        tw = cols * k, th = rows * k;
    } else if (big > GRID_MAX_TILE) {
        tw = (int)((long)cols * GRID_MAX_TILE / big), th = (int)((long)rows * GRID_MAX_TILE / big);
        tw = tw < 1 ? 1 : tw, th = th < 1 ? 1 : th;
    }
    // captions, cut to 24 characters
    char (*caption)[2][40] = (char (*)[2][40])malloc(sizeof(*caption) * (size_t)(shown ? shown : 1));
    if (!caption) {
        free(items);
        snprintf(err, errlen, "%s: out of host memory", path);
        return -1;
    }
    int text_w = 0;
    for (int s = 0; s < shown; s++) {
        int truth = test->labels[items[s]], p = pred[items[s]];
        const char *tn = truth < test->num_classes ? test->class_names[truth] : "?";
        const char *pn = p >= 0 && p < test->num_classes ? test->class_names[p] : "?";
        snprintf(caption[s][0], sizeof(caption[s][0]), "true: %.24s", tn);
        snprintf(caption[s][1], sizeof(caption[s][1]), "pred: %.24s", pn);
        for (int l = 0; l < 2; l++) text_w = text_width(caption[s][l]) > text_w ? text_width(caption[s][l]) : text_w;
    }
    char title[200];
    if (wrong) snprintf(title, sizeof(title), "%s: %d of %d test images misclassified, the first %d shown", test->name,
                        wrong, test->n, shown);
    else snprintf(title, sizeof(title), "%s: no test image misclassified (of %d)", test->name, test->n);
    int cell_w = (tw > text_w ? tw : text_w) + 2 * GRID_PAD, cell_h = GRID_PAD + th + 2 + 24 + GRID_PAD;
    int ncols = 1200 / cell_w;  // as many cells a row as fit in 1200 pixels, at least one
    if (ncols > shown) ncols = shown;
    if (ncols < 1) ncols = 1;
    int nrows = (shown + ncols - 1) / ncols, title_h = 20;
    int W = ncols * cell_w, H = title_h + nrows * cell_h;
    if (W < text_width(title) + 2 * GRID_PAD) W = text_width(title) + 2 * GRID_PAD;
    uint8_t *img = (uint8_t *)malloc((size_t)W * H * 3);
    float *plane = (float *)malloc(sizeof(float) * (size_t)tw * th);
    int rc = -1;
    if (!img || !plane) {
        snprintf(err, errlen, "%s: out of host memory for a %dx%d picture", path, W, H);
        goto done;
    }
    memset(img, 255, (size_t)W * H * 3);
    static const uint8_t black[3] = {0, 0, 0}, red[3] = {200, 0, 0};
    draw_text(img, W, H, GRID_PAD, 5, title, black);
    for (int s = 0; s < shown; s++) {
        int gx = (s % ncols) * cell_w + GRID_PAD, gy = title_h + (s / ncols) * cell_h + GRID_PAD;
        const uint8_t *item = test->images + (size_t)items[s] * dataset_dim(test);
        for (int c = 0; c < 3; c++) {
            // where channel c's pixel (x, y) is: gray repeats channel 0; planes or interleaved
            int ch = test->channels == 1 ? 0 : c;
            const uint8_t *src = test->planar || test->channels == 1 ? item + (size_t)ch * rows * cols : item + ch;
            size_t px = test->planar || test->channels == 1 ? 1 : (size_t)test->channels;
            if (resize_area(src, px * cols, px, 0, 0, cols, rows, plane, tw, th) != 0) {
                snprintf(err, errlen, "%s: out of host memory", path);
                goto done;
            }
            for (int y = 0; y < th; y++)
                for (int x = 0; x < tw; x++) img[((size_t)(gy + y) * W + gx + x) * 3 + c] = to_byte(plane[y * tw + x]);
        }
        draw_text(img, W, H, gx, gy + th + 2, caption[s][0], black);
        draw_text(img, W, H, gx, gy + th + 2 + 12, caption[s][1], red);
    }
    rc = image_write_png(path, W, H, 3, img, err, errlen);
done:
    free(img);
    free(plane);
    free(caption);
    free(items);
    return rc;
}

#endif // MLP_IMAGES_H
