/*
tests/fuzz/make_corpus.c: writes the seed corpora of the fuzz targets (tests/fuzz/corpus/TARGET/),
small valid and near-valid inputs in each target's own framing (tests/fuzz/fuzz.h says what the
first bytes of each target's input mean). The seeds are committed; this program is how they
were made, and makes them again, byte for byte:

    cc -std=gnu11 -I/usr/include/stb tests/fuzz/make_corpus.c -lz -lm -o build/make_corpus
    build/make_corpus tests/fuzz/corpus
*/
#include "fuzz.h"

static char root[512];

// ----------------------------------------------------------------------------
// a growing byte buffer

typedef struct {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void put(Buf *b, const void *data, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = 2 * (b->n + n) + 64;
        b->p = (uint8_t *)realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
}
static void put8(Buf *b, int v) {
    uint8_t c = (uint8_t)v;
    put(b, &c, 1);
}
static void put_be32(Buf *b, uint32_t v) {
    uint8_t c[4] = {(uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
    put(b, c, 4);
}
static void put_le16(Buf *b, int v) {
    put8(b, v & 255);
    put8(b, (v >> 8) & 255);
}
static void stb_to_buf(void *context, void *data, int size) { put((Buf *)context, data, (size_t)size); }

static void save(const char *target, const char *name, const Buf *b) {
    char path[800];
    snprintf(path, sizeof(path), "%s/%s", root, target);
    mkdir(path, 0777);
    snprintf(path, sizeof(path), "%s/%s/%s", root, target, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b->p, 1, b->n, f) != b->n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

// ----------------------------------------------------------------------------
// IDX files

static Buf idx_images(uint32_t n, uint32_t rows, uint32_t cols, size_t body) {
    Buf b = {0};
    put_be32(&b, 0x803);
    put_be32(&b, n);
    put_be32(&b, rows);
    put_be32(&b, cols);
    for (size_t i = 0; i < body; i++) put8(&b, (int)(i * 37));
    return b;
}
static Buf idx_labels(uint32_t n, size_t body) {
    Buf b = {0};
    put_be32(&b, 0x801);
    put_be32(&b, n);
    for (size_t i = 0; i < body; i++) put8(&b, (int)(i % 10));
    return b;
}

static Buf gzip_of(const Buf *in, int level) {
    Buf out = {0};
    out.cap = 2 * in->n + 256;
    out.p = (uint8_t *)malloc(out.cap + 8);
    fuzz_gzip(in->p, in->n, level, out.p, out.cap, &out.n);
    return out;
}

// a target's first bytes, then a body
static Buf framed(const uint8_t *head, size_t nhead, const Buf *body) {
    Buf b = {0};
    put(&b, head, nhead);
    put(&b, body->p, body->n);
    return b;
}

// body framed by each first byte 0 .. 3 (the targets whose first byte's two bits say what to make
// right), saved as NAME_mode0 .. NAME_mode3
static void save_modes(const char *target, const char *name, const Buf *body) {
    for (int mode = 0; mode < 4; mode++) {
        uint8_t head[1] = {(uint8_t)mode};
        char file[128];
        snprintf(file, sizeof(file), "%s_mode%d", name, mode);
        Buf x = framed(head, 1, body);
        save(target, file, &x);
    }
}

static void idx_seeds(void) {
    struct {
        const char *name;
        Buf b;
    } raw[] = {
        {"images_3x2x2", idx_images(3, 2, 2, 12)},
        {"images_1x28x28", idx_images(1, 28, 28, 784)},
        {"labels_5", idx_labels(5, 5)},
        {"images_truncated", idx_images(3, 2, 2, 7)},
        {"labels_trailing", idx_labels(5, 8)},
        {"images_zero_rows", idx_images(3, 0, 2, 0)},
        {"images_header_only", idx_images(2, 3, 3, 0)},
        {"images_65536x32768", idx_images(1, 65536, 32768, 4)},
        {"labels_claim_2_31", idx_labels(0x80000000u, 4)},
        {"labels_claim_2_26", idx_labels(1u << 26, 4)},
        {"images_overflow_64", idx_images(0xffffffffu, 0xffffffffu, 0xffffffffu, 0)},
    };
    for (size_t i = 0; i < sizeof(raw) / sizeof(raw[0]); i++) save("idx_raw", raw[i].name, &raw[i].b);
    Buf wrong = idx_images(1, 1, 1, 1);
    wrong.p[3] = 1;  // a labels magic on an images file
    save("idx_raw", "wrong_magic", &wrong);

    // gzip: mode 0 (the file as it is), 1 (compressed here), 2 (two members), 3 (junk after)
    const uint8_t m0[1] = {0}, m1[2] = {1 | (6 << 2), 0}, m2[2] = {2 | (9 << 2), 100}, m3[2] = {3 | (1 << 2), 3};
    Buf gz = gzip_of(&raw[0].b, 9), gzl = gzip_of(&raw[2].b, 1), two = {0};
    Buf first = {0}, second = {0};  // the images file in two members, cut after 10 bytes
    put(&first, raw[0].b.p, 10);
    put(&second, raw[0].b.p + 10, raw[0].b.n - 10);
    Buf g1 = gzip_of(&first, 6), g2 = gzip_of(&second, 6);
    put(&two, g1.p, g1.n);
    put(&two, g2.p, g2.n);
    Buf seeds[] = {framed(m0, 1, &gz),        framed(m0, 1, &gzl),         framed(m1, 2, &raw[0].b),
                   framed(m1, 2, &raw[2].b), framed(m2, 2, &raw[1].b),     framed(m3, 2, &raw[2].b),
                   framed(m0, 1, &two),       framed(m1, 2, &raw[3].b)};
    const char *names[] = {"gz_images",    "gz_labels",      "mode1_images",      "mode1_labels",
                           "mode2_images", "mode3_labels",   "gz_two_members",    "mode1_truncated"};
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) save("idx_gz", names[i], &seeds[i]);
    Buf junk = framed(m0, 1, &gz);
    put(&junk, "junk", 4);
    save("idx_gz", "gz_trailing_junk", &junk);
}

// ----------------------------------------------------------------------------
// CIFAR-10

static void cifar_record(Buf *b, int label, int k) {
    put8(b, label);
    for (int i = 0; i < CIFAR_PIXELS; i++) put8(b, (k * 31 + i * 7) & 255);
}

static void cifar_seeds(void) {
    static const char *const names = "airplane\nautomobile\nbird\ncat\ndeer\ndog\nfrog\nhorse\nship\ntruck\n";
    Buf b = {0};
    put8(&b, 0);
    cifar_record(&b, 3, 0);
    save("cifar", "test_one_record", &b);
    Buf m = {0};
    put8(&m, 1);
    put_le16(&m, (int)strlen(names));
    put(&m, names, strlen(names));
    cifar_record(&m, 9, 1);
    save("cifar", "test_with_meta", &m);
    Buf t = {0};
    put8(&t, 2);
    cifar_record(&t, 0, 2);
    save("cifar", "train_one_record", &t);
    Buf bad = {0};
    put8(&bad, 0);
    cifar_record(&bad, 10, 3);
    save("cifar", "label_10", &bad);
    Buf part = {0};
    put8(&part, 0);
    cifar_record(&part, 1, 4);
    part.n -= 100;
    save("cifar", "partial_record", &part);
    Buf nine = {0};
    const char *nine_names = "a\r\nb\r\nc\r\nd\r\ne\r\nf\r\ng\r\nh\r\ni\r\n\r\n";
    put8(&nine, 3);
    put_le16(&nine, (int)strlen(nine_names));
    put(&nine, nine_names, strlen(nine_names));
    cifar_record(&nine, 2, 5);
    save("cifar", "train_meta_nine_crlf", &nine);
}

// ----------------------------------------------------------------------------
// pictures

// w x h pixels of comp channels: a pattern with an off-centre blob (so that a digit model finds ink)
static uint8_t *pattern(int w, int h, int comp) {
    uint8_t *p = (uint8_t *)malloc((size_t)w * h * comp);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < comp; c++) {
                int ink = (x - w / 3) * (x - w / 3) + (y - h / 2) * (y - h / 2) < (w * h) / 8;
                p[((size_t)y * w + x) * comp + c] = (uint8_t)(c == 3 ? 200 : ink ? 20 + 30 * c : 230);
            }
    return p;
}

static Buf picture(const char *fmt, int w, int h, int comp) {
    Buf b = {0};
    uint8_t *p = pattern(w, h, comp);
    if (strcmp(fmt, "png") == 0) stbi_write_png_to_func(stb_to_buf, &b, w, h, comp, p, w * comp);
    else if (strcmp(fmt, "jpg") == 0) stbi_write_jpg_to_func(stb_to_buf, &b, w, h, comp, p, 80);
    else stbi_write_bmp_to_func(stb_to_buf, &b, w, h, comp, p);
    free(p);
    return b;
}

// a PNG written by hand, for what stb_image_write does not make: a palette (with transparency),
// 1 and 16 bits a sample, interlacing. rows: the filtered scanlines (each a filter byte, then data).
static void png_chunk(Buf *b, const char *type, const uint8_t *data, size_t n) {
    put_be32(b, (uint32_t)n);
    size_t at = b->n;
    put(b, type, 4);
    if (n) put(b, data, n);
    put_be32(b, (uint32_t)crc32(0, b->p + at, (uInt)(n + 4)));
}
static Buf png_by_hand(int w, int h, int depth, int colour, int interlace, const uint8_t *rows, size_t nrows,
                       const uint8_t *plte, size_t nplte, const uint8_t *trns, size_t ntrns) {
    Buf b = {0};
    put(&b, "\x89PNG\r\n\x1a\n", 8);
    Buf ihdr = {0};
    put_be32(&ihdr, (uint32_t)w);
    put_be32(&ihdr, (uint32_t)h);
    put8(&ihdr, depth);
    put8(&ihdr, colour);
    put8(&ihdr, 0);
    put8(&ihdr, 0);
    put8(&ihdr, interlace);
    png_chunk(&b, "IHDR", ihdr.p, ihdr.n);
    if (plte) png_chunk(&b, "PLTE", plte, nplte);
    if (trns) png_chunk(&b, "tRNS", trns, ntrns);
    uLongf zn = compressBound((uLong)nrows);
    uint8_t *z = (uint8_t *)malloc(zn);
    compress2(z, &zn, rows, (uLong)nrows, 9);
    png_chunk(&b, "IDAT", z, zn);
    png_chunk(&b, "IEND", NULL, 0);
    free(z);
    free(ihdr.p);
    return b;
}

static void picture_seeds(void) {
    struct {
        const char *name, *fmt;
        int w, h, comp;
    } pics[] = {
        {"png_gray_12x12", "png", 12, 12, 1}, {"png_rgb_9x7", "png", 9, 7, 3},   {"png_rgba_6x6", "png", 6, 6, 4},
        {"png_graya_5x5", "png", 5, 5, 2},    {"jpg_gray_16x16", "jpg", 16, 16, 1}, {"jpg_rgb_17x9", "jpg", 17, 9, 3},
        {"bmp_rgb_7x5", "bmp", 7, 5, 3},      {"bmp_rgba_4x4", "bmp", 4, 4, 4},
    };
    const int npics = (int)(sizeof(pics) / sizeof(pics[0]));
    Buf made[16];
    for (int i = 0; i < npics; i++) {
        made[i] = picture(pics[i].fmt, pics[i].w, pics[i].h, pics[i].comp);
        for (int spec = 0; spec < 5; spec++) {  // every model kind with some pictures, not all with all
            if ((i + spec) % 2) continue;
            uint8_t head[2] = {(uint8_t)spec, (uint8_t)(7 + 5 * i)};
            Buf b = framed(head, 2, &made[i]);
            char name[96];
            snprintf(name, sizeof(name), "%s_spec%d", pics[i].name, spec);
            save("image", name, &b);
        }
    }
    // hand-made PNGs: palette + tRNS (4x2, 8 bits), 1-bit gray (8x2), 16-bit RGB (2x2), interlaced 1x1
    const uint8_t plte[6] = {0, 0, 0, 255, 255, 255}, trns[1] = {128};
    const uint8_t pal_rows[] = {0, 0, 1, 1, 0, 1, 1, 0, 0, 1};
    const uint8_t bit_rows[] = {0, 0xa5, 0, 0x3c};
    uint8_t rgb16_rows[2 * (1 + 2 * 6)];
    for (size_t i = 0; i < sizeof(rgb16_rows); i++) rgb16_rows[i] = i % 13 == 0 ? 0 : (uint8_t)(i * 29);
    const uint8_t lace_rows[] = {0, 200};
    Buf hand[4] = {png_by_hand(4, 2, 8, 3, 0, pal_rows, sizeof(pal_rows), plte, 6, trns, 1),
                   png_by_hand(8, 2, 1, 0, 0, bit_rows, sizeof(bit_rows), NULL, 0, NULL, 0),
                   png_by_hand(2, 2, 16, 2, 0, rgb16_rows, sizeof(rgb16_rows), NULL, 0, NULL, 0),
                   png_by_hand(1, 1, 8, 0, 1, lace_rows, sizeof(lace_rows), NULL, 0, NULL, 0)};
    const char *hand_names[4] = {"png_palette_trns", "png_1bit", "png_16bit_rgb", "png_interlaced_1x1"};
    for (int i = 0; i < 4; i++) {
        uint8_t head[2] = {(uint8_t)(i % 5), 11};
        Buf b = framed(head, 2, &hand[i]);
        save("image", hand_names[i], &b);
    }
    // near-valid: a PNG cut in its IDAT, a JPEG cut after its header, a BMP claiming more rows
    uint8_t head[2] = {3, 9};
    Buf cut = framed(head, 2, &made[1]);
    cut.n -= 20;
    save("image", "png_cut", &cut);
    Buf jcut = framed(head, 2, &made[5]);
    jcut.n = jcut.n * 2 / 3;
    save("image", "jpg_cut", &jcut);
    Buf tall = framed(head, 2, &made[6]);
    tall.p[2 + 22] = 200;  // biHeight: 200 rows in a file of 5
    save("image", "bmp_claims_200_rows", &tall);

    // image folders: mode byte, pictures separated by --FILE--
    struct {
        const char *name;
        int mode, pics[6], n;
    } folders[] = {
        {"two_classes_png", 1, {0, 0, 0, 0}, 4},
        {"one_class_mixed_with_test", 4, {1, 1, 1}, 3},  // (rgb 9x7 as png, "jpg" and "bmp" names)
        {"three_classes_jpg", 2, {5, 5, 5, 5}, 4},
        {"shape_mismatch", 1, {0, 1}, 2},
        {"bmp_and_test", 5, {6, 6, 6}, 3},
        {"rgba_dropped_alpha", 0, {2, 2}, 2},
    };
    for (size_t f = 0; f < sizeof(folders) / sizeof(folders[0]); f++) {
        Buf b = {0};
        put8(&b, folders[f].mode);
        for (int i = 0; i < folders[f].n; i++) {
            if (i) put(&b, "--FILE--", 8);
            put(&b, made[folders[f].pics[i]].p, made[folders[f].pics[i]].n);
        }
        save("folder", folders[f].name, &b);
    }
    Buf one = {0};
    put8(&one, 0);
    put(&one, hand[0].p, hand[0].n);
    put(&one, "--FILE--", 8);
    put(&one, "not a picture", 13);
    save("folder", "palette_then_garbage", &one);
}

// ----------------------------------------------------------------------------
// checkpoints

// a checkpoint of a small model, as checkpoint_write would write it
static Buf checkpoint_bytes(int L, const int *sizes, int act) {
    CheckpointMeta m;
    memset(&m, 0, sizeof(m));
    m.L = L;
    memcpy(m.sizes, sizes, sizeof(int) * (size_t)(L + 1));
    m.act = act;
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    m.num_params = param_layout(sizes, L, w_off, b_off);
    m.data_kind = DATA_IDX;
    m.channels = 1;
    m.rows = 1;
    m.cols = sizes[0];
    m.planar = 1;
    m.num_classes = sizes[L];
    m.input_scale = 1.0f / 255.0f;
    m.train_n = 10;
    snprintf(m.dataset_name, sizeof(m.dataset_name), "an IDX dataset");
    for (int k = 0; k < m.num_classes; k++) snprintf(m.class_names[k], CLASS_NAME_LEN, "%d", k);
    snprintf(m.writer, sizeof(m.writer), "train_mlp_cpu");
    m.batch = 4;
    m.lr = 0.1f;
    m.momentum = 0.9f;
    m.seed = 1337;
    m.epochs = 2;
    m.epochs_done = 1;
    m.steps_total = 3;
    rng_seed(&m.rng, 1337, 1);
    Buf b = {0};
    b.cap = CK_HEADER_BYTES + 8 * m.num_params + 4;
    b.p = (uint8_t *)calloc(b.cap, 1);
    b.n = b.cap;
    checkpoint_encode_header(&m, b.p);
    float *params = (float *)(b.p + CK_HEADER_BYTES);
    for (uint64_t i = 0; i < 2 * m.num_params; i++) params[i] = 0.01f * (float)i - 0.1f;
    ck_put_u32(b.p + b.n - 4, ck_crc32((uint32_t)crc32(0L, Z_NULL, 0), b.p, b.n - 4));
    return b;
}

static void checkpoint_seeds(void) {
    const int s1[] = {3, 4, 2}, s2[] = {2, 2}, s3[] = {4, 3, 3, 2};
    Buf a = checkpoint_bytes(2, s1, ACT_SIGMOID), b = checkpoint_bytes(1, s2, ACT_RELU),
        c = checkpoint_bytes(3, s3, ACT_TANH);
    save_modes("checkpoint", "ck_3_4_2", &a);
    uint8_t fix[1] = {3}, none[1] = {0};
    Buf x = framed(fix, 1, &b);
    save("checkpoint", "ck_2_2_relu_mode3", &x);
    x = framed(fix, 1, &c);
    save("checkpoint", "ck_4_3_3_2_tanh_mode3", &x);
    x = framed(none, 1, &a);
    x.n = 1 + CK_HEADER_BYTES / 2;
    save("checkpoint", "ck_truncated_header", &x);
    x = framed(fix, 1, &a);
    ck_put_u32(x.p + 1 + CK_OFF_EPOCHS_DONE, 5);
    save("checkpoint", "ck_forged_progress_mode3", &x);
    x = framed(none, 1, &a);
    put(&x, "abc", 3);
    save("checkpoint", "ck_trailing", &x);
}

// ----------------------------------------------------------------------------
// command lines

static void args_seeds(void) {
    static const struct {
        const char *name;
        uint8_t prog;
        const char *line;
    } lines[] = {
        {"defaults", 0, ""},
        {"full_cpu", 0, "-d data/mnist -m 784,128,10 -a relu -b 64 -l 0.1 -k 0.9 -w 0.0005 -n 4 -s 1337 -v 100 -o "
                        "logs/run.csv -t 0 -H 0.1"},
        {"deep", 0, "-m 784,512,256,128,64,32,16,10 -a tanh"},
        {"gpu_trace", 1, "-T 1 -b 256"},
        {"fast_tf32", 2, "-x 1 -f 0 -n 1"},
        {"eval_predict", 0, "-e ck.bin -p a.png -p b.jpg -i grid.png"},
        {"resume", 0, "-r ck.bin -c ck.bin -n 10"},
        {"help", 0, "-h"},
        {"bad_value", 0, "-l nan -b 0"},
        {"bad_flag", 1, "-x 1"},
        {"big_seed", 0, "-s 18446744073709551615"},
        {"missing_value", 0, "-n"},
    };
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        Buf b = {0};
        put8(&b, lines[i].prog);
        put(&b, lines[i].line, strlen(lines[i].line));
        save("args", lines[i].name, &b);
    }
    Buf nul = {0};
    put8(&nul, 0);
    put(&nul, "-d\0\0-o\0a b.csv", 15);  // NUL-separated: an empty -d, and a path with a space
    save("args", "nul_separated", &nul);
}

// ----------------------------------------------------------------------------
// safetensors files, and JSON

// a 3,2,2 model's file: header text, then 14 values of the dtype (2 or 4 bytes each), or 28 with
// momentum; mode: the fuzz target's first byte (1: it computes the header length)
static Buf safetensors_bytes(int mode, const char *header, int bytes_per_value, int values) {
    Buf b = {0};
    put8(&b, mode);
    if (!(mode & 1)) {
        uint8_t len8[8];
        ck_put_u64(len8, strlen(header));
        put(&b, len8, 8);
    }
    put(&b, header, strlen(header));
    for (int i = 0; i < values * bytes_per_value; i++) put8(&b, bytes_per_value == 4 && i % 4 == 3 ? 0x3e : (i * 13) & 0x3f);
    return b;
}

static void safetensors_seeds(void) {
    const char *f32 = "{\"__metadata__\":{\"format\":\"pt\",\"sizes\":\"3,2,2\",\"activation\":\"relu\","
                      "\"classes\":\"[\\\"a\\\", \\\"b\\\"]\",\"input\":\"3,1,1,interleaved\",\"data\":\"folder\","
                      "\"dataset\":\"tiny\",\"scale\":\"0.00392156886\",\"offset\":\"0\"},"
                      "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
                      "\"2.weight\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[32,48]},"
                      "\"2.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[48,56]}}";
    const char *f16 = "{\"1.weight\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,12]},"
                      "\"1.bias\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[12,16]},"
                      "\"3.weight\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[16,24]},"
                      "\"3.bias\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[24,28]}}";
    const char *mom = "{\"__metadata__\":{\"activation\":\"tanh\"},"
                      "\"0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
                      "\"momentum.0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[32,56]},"
                      "\"momentum.0.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[56,64]}}";
    Buf b = safetensors_bytes(0, f32, 4, 14);
    save("safetensors", "f32_3_2_2_metadata", &b);
    b = safetensors_bytes(1, f32, 4, 14);
    save("safetensors", "f32_3_2_2_metadata_mode1", &b);
    b = safetensors_bytes(1, f16, 2, 14);
    save("safetensors", "f16_bf16_flatten_mode1", &b);
    b = safetensors_bytes(0, mom, 4, 16);
    save("safetensors", "momentum_one_layer", &b);
    b = safetensors_bytes(1, mom, 4, 15);
    save("safetensors", "momentum_short_mode1", &b);
    const char *json[][2] = {
        {"object", "{\"a\": [1, -2.5e+3, true, false, null], \"b\": {\"c\": \"\\u00e9\\ud83d\\ude00\\n\"}}"},
        {"numbers", "[0, -0, 1.5, 2E10, 9007199254740991, 9007199254740992, 123456789012345678901234567890]"},
        {"escapes", "\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u0041 caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\""},
        {"nested", "[[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]]"},
        {"classes", "[\"T-shirt/top\", \"Trouser\", \"Pullover\"]"},
    };
    for (size_t i = 0; i < sizeof(json) / sizeof(json[0]); i++) {
        Buf j = {0};
        put(&j, json[i][1], strlen(json[i][1]));
        save("json", json[i][0], &j);
    }
}

// ----------------------------------------------------------------------------
// plan caches

// the bytes plan_cache_save writes for key with n entries of a small model's products
static Buf plan_cache_seed(const PlanCacheKey *key, int n) {
    PlanCache c;
    memset(&c, 0, sizeof(c));
    c.key = *key;
    for (int i = 0; i < n; i++) {
        PlanCacheShape s = {i % 3, 64 << (i % 4), 128 + 8 * i, 784, i % 4, i % 3 == 2, 1 + i / 4};
        plan_cache_put(&c, &s, 20 + i, 1 << (i % 4), 3.5f + (float)i);
    }
    Buf b = {0};
    b.p = plan_cache_bytes(&c, &b.n);
    b.cap = b.n;
    plan_cache_free(&c);
    return b;
}

static void plan_cache_seeds(void) {
    PlanCacheKey key = fuzz_plan_key(), other = key;
    other.driver = 12090;
    Buf a = plan_cache_seed(&key, 3), empty = plan_cache_seed(&key, 0), o = plan_cache_seed(&other, 2);
    save_modes("plan_cache", "plans_3", &a);
    uint8_t none[1] = {0};
    Buf x = framed(none, 1, &empty);
    save("plan_cache", "plans_empty", &x);
    x = framed(none, 1, &o);
    save("plan_cache", "plans_other_driver", &x);
    x = framed(none, 1, &a);
    x.n = 1 + PLAN_CACHE_HEADER_BYTES + PLAN_CACHE_ENTRY_BYTES / 2;
    save("plan_cache", "plans_truncated", &x);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (tests/fuzz/corpus)\n", argv[0]);
        return 2;
    }
    snprintf(root, sizeof(root), "%s", argv[1]);
    mkdir(root, 0777);
    idx_seeds();
    cifar_seeds();
    picture_seeds();
    checkpoint_seeds();
    args_seeds();
    safetensors_seeds();
    plan_cache_seeds();
    printf("seed corpora written to %s\n", root);
    return 0;
}
