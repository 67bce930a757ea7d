/*
run/safetensors.h: a model in the safetensors format, the file PyTorch and Hugging Face exchange
weights in, written (-e CK -E FILE.safetensors) and read (-e FILE.safetensors, -r FILE.safetensors).

The format: an 8-byte little-endian header length N, then N bytes of JSON (padded with spaces),
then the tensors' bytes, back to back:

    {"__metadata__": {"sizes": "784,128,10", "activation": "sigmoid", ...},
     "0.weight": {"dtype": "F32", "shape": [128, 784], "data_offsets": [0, 401408]},
     "0.bias":   {"dtype": "F32", "shape": [128], "data_offsets": [401408, 401920]}, ...}

Tensor names are those of nn.Sequential(nn.Linear, act, nn.Linear, ..., nn.Linear)'s state_dict:
layer l is `2l.weight` (OUT, IN) and `2l.bias` (OUT). The reader takes any increasing indices
(an nn.Flatten first makes them 1, 3, 5, ...), and `momentum.N.weight`, `momentum.N.bias` for the
SGD momentum buffers (written with -K 1). The metadata's values are strings (doc/checkpoint.md):

    sizes       "784,128,10"             must agree with the tensors' shapes
    activation  sigmoid, relu or tanh    the hidden layers'; without it, -a must say
    classes     ["T-shirt/top", ...]     JSON text: the class names, one per output
    input       "1,28,28,planar"         channels, rows, cols, and the channels' layout
                                         (planar: RRR..GGG..BBB..; interleaved: RGBRGB..)
    data        idx, cifar10 or folder   the kind of dataset it was trained on
    dataset     "Fashion-MNIST"          its name
    scale       "0.00392156886"          the model's input is pixel * scale + offset;
    offset      "0"                      without scale: 1/255, and the reader says so

Reading trusts nothing: safetensors_parse() checks the header length against the file, the JSON
(json_parse: strict RFC 8259, UTF-8 checked, depth limited), every tensor's dtype (F32, or F16
and BF16, widened to float), shape and name, that the data offsets cover the bytes after the
header exactly (no overlap, no gap, nothing after), and the metadata against the tensors. It works
on a memory buffer (the fuzz target's entry point); safetensors_copy() then widens the values
into the flat parameter buffer (common/mlp.h's layout) and refuses any that is not finite.
*/
#ifndef MLP_SAFETENSORS_H
#define MLP_SAFETENSORS_H

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mlp.h"         // MAX_LAYERS, MAX_WIDTH, ACT_*, param_layout
#include "../common/safe_write.h"  // temporary file, fsync, rename
#include "../data/input.h"         // data_open_file, MAX_CLASSES, CLASS_NAME_LEN, DataKind
#include "checkpoint.h"            // CheckpointMeta, Checkpoint
#include "../common/utils.h"       // die

// ----------------------------------------------------------------------------
// JSON: a strict parser into a flat array of tokens (each subtree's tokens follow its first)

#define JSON_MAX_DEPTH 64

typedef enum { JSON_OBJECT = 1, JSON_ARRAY, JSON_STRING, JSON_NUMBER, JSON_TRUE, JSON_FALSE, JSON_NULL } JsonType;

typedef struct {
    JsonType type;
    size_t start, len;  // the text: a string's between its quotes (still escaped), a number's digits
    int size;           // an object's keys, an array's items
    int next;           // the index of the token after this one's subtree
} JsonTok;

typedef struct {
    const char *s;
    size_t n, pos;
    JsonTok *tok;
    int ntok, cap;
    char *err;
    size_t errlen;
} JsonParser;

static inline void json_ws(JsonParser *p) {
    while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static inline int json_fail(JsonParser *p, const char *what) {
    snprintf(p->err, p->errlen, "bad JSON at byte %zu: %s", p->pos, what);
    return -1;
}

static inline int json_hex4(const char *s, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (unsigned)d;
    }
    return 0;
}

// The length of the UTF-8 sequence at s (n bytes left), 0 when it is not valid UTF-8 (overlong
// forms, surrogates and code points past U+10FFFF included)
static inline int utf8_valid_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    int len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (len == 0 || (size_t)len > n) return 0;
    for (int i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && s[1] < 0xa0) return 0;  // overlong
    if (c == 0xed && s[1] >= 0xa0) return 0; // a surrogate
    if (c == 0xf0 && s[1] < 0x90) return 0;  // overlong
    if (c == 0xf4 && s[1] >= 0x90) return 0; // past U+10FFFF
    return len;
}

static inline int json_new_tok(JsonParser *p, JsonType type) {
    if (p->ntok == p->cap) return json_fail(p, "too many values");
    JsonTok *t = &p->tok[p->ntok];
    memset(t, 0, sizeof(*t));
    t->type = type;
    t->start = p->pos;
    return p->ntok++;
}

// a string at p->pos (its opening quote): checks escapes and UTF-8
static inline int json_string_tok(JsonParser *p) {
    int k = json_new_tok(p, JSON_STRING);
    if (k < 0) return -1;
    p->pos++;
    p->tok[k].start = p->pos;
    while (1) {
        if (p->pos >= p->n) return json_fail(p, "a string does not end");
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') break;
        if (c < 0x20) return json_fail(p, "a control character in a string");
        if (c == '\\') {
            if (p->pos + 1 >= p->n) return json_fail(p, "a string does not end");
            char e = p->s[p->pos + 1];
            if (e == 'u') {
                unsigned v, w;
                if (p->pos + 6 > p->n || json_hex4(p->s + p->pos + 2, &v) != 0) return json_fail(p, "a bad \\u escape");
                p->pos += 6;
                if (v >= 0xdc00 && v <= 0xdfff) return json_fail(p, "a \\u escape of a lone low surrogate");
                if (v >= 0xd800 && v <= 0xdbff) {  // must be followed by its low surrogate
                    if (p->pos + 6 > p->n || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u' ||
                        json_hex4(p->s + p->pos + 2, &w) != 0 || w < 0xdc00 || w > 0xdfff)
                        return json_fail(p, "a \\u escape of a high surrogate without its low one");
                    p->pos += 6;
                }
                continue;
            }
            if (!strchr("\"\\/bfnrt", e) || e == 0) return json_fail(p, "a bad escape in a string");
            p->pos += 2;
            continue;
        }
        int len = utf8_valid_len((const unsigned char *)p->s + p->pos, p->n - p->pos);
        if (len == 0) return json_fail(p, "a string is not valid UTF-8");
        p->pos += (size_t)len;
    }
    p->tok[k].len = p->pos - p->tok[k].start;
    p->pos++;  // the closing quote
    p->tok[k].next = p->ntok;
    return k;
}

static inline int json_value(JsonParser *p, int depth);

static inline int json_number_tok(JsonParser *p) {
    int k = json_new_tok(p, JSON_NUMBER);
    if (k < 0) return -1;
    const char *s = p->s;
    size_t i = p->pos, n = p->n;
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') i++;
    else if (i < n && s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    else return json_fail(p, "a bad number");
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return json_fail(p, "a bad number");
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return json_fail(p, "a bad number");
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    }
    p->tok[k].len = i - p->pos;
    p->pos = i;
    p->tok[k].next = p->ntok;
    return k;
}

// an object or an array at p->pos (its opening bracket)
static inline int json_container(JsonParser *p, int depth) {
    int is_obj = p->s[p->pos] == '{';
    int k = json_new_tok(p, is_obj ? JSON_OBJECT : JSON_ARRAY);
    if (k < 0) return -1;
    if (depth >= JSON_MAX_DEPTH) return json_fail(p, "nested too deep");
    p->pos++;
    json_ws(p);
    char close = is_obj ? '}' : ']';
    if (p->pos < p->n && p->s[p->pos] == close) {
        p->pos++;
        p->tok[k].next = p->ntok;
        return k;
    }
    while (1) {
        if (is_obj) {
            if (p->pos >= p->n || p->s[p->pos] != '"') return json_fail(p, "an object's key must be a string");
            if (json_string_tok(p) < 0) return -1;
            json_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':') return json_fail(p, "a ':' is missing after a key");
            p->pos++;
        }
        if (json_value(p, depth + 1) < 0) return -1;
        p->tok[k].size++;
        json_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            json_ws(p);
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == close) break;
        return json_fail(p, is_obj ? "a ',' or '}' is missing" : "a ',' or ']' is missing");
    }
    p->pos++;
    p->tok[k].len = p->pos - p->tok[k].start;
    p->tok[k].next = p->ntok;
    return k;
}

static inline int json_value(JsonParser *p, int depth) {
    json_ws(p);
    if (p->pos >= p->n) return json_fail(p, "a value is missing");
    char c = p->s[p->pos];
    if (c == '{' || c == '[') return json_container(p, depth);
    if (c == '"') return json_string_tok(p);
    if (c == '-' || (c >= '0' && c <= '9')) return json_number_tok(p);
    static const struct {
        const char *word;
        JsonType type;
    } lit[] = {{"true", JSON_TRUE}, {"false", JSON_FALSE}, {"null", JSON_NULL}};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(lit[i].word);
        if (p->n - p->pos >= len && memcmp(p->s + p->pos, lit[i].word, len) == 0) {
            int k = json_new_tok(p, lit[i].type);
            if (k < 0) return -1;
            p->pos += len;
            p->tok[k].len = len;
            p->tok[k].next = p->ntok;
            return k;
        }
    }
    return json_fail(p, "not a JSON value");
}

// Parses the n bytes at s as one JSON value (whitespace around it allowed) into at most cap
// tokens. Returns the number of tokens, or -1 with one line in err.
static inline int json_parse(const char *s, size_t n, JsonTok *tok, int cap, char *err, size_t errlen) {
    JsonParser p = {s, n, 0, tok, 0, cap, err, errlen};
    if (json_value(&p, 0) < 0) return -1;
    json_ws(&p);
    if (p.pos != n) return json_fail(&p, "something after the value");
    return p.ntok;
}

// A string token decoded into out (outcap bytes with its terminating 0). Returns its length, or
// -1 when it does not fit or holds a \u0000 (names here are C strings).
static inline int json_string(const char *s, const JsonTok *t, char *out, size_t outcap) {
    size_t k = 0;
    for (size_t i = t->start; i < t->start + t->len;) {
        unsigned v;
        char buf[4];
        size_t m = 1;
        if (s[i] != '\\') {
            buf[0] = s[i++];
        } else if (s[i + 1] != 'u') {
            char e = s[i + 1];
            buf[0] = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r' : e == 't' ? '\t' : e;
            i += 2;
        } else {
            json_hex4(s + i + 2, &v);
            i += 6;
            if (v >= 0xd800 && v <= 0xdbff) {  // the parser checked that its low surrogate follows
                unsigned w;
                json_hex4(s + i + 2, &w);
                i += 6;
                v = 0x10000 + ((v - 0xd800) << 10) + (w - 0xdc00);
            }
            if (v == 0) return -1;
            if (v < 0x80) buf[0] = (char)v;
            else if (v < 0x800) m = 2, buf[0] = (char)(0xc0 | (v >> 6)), buf[1] = (char)(0x80 | (v & 63));
            else if (v < 0x10000)
                m = 3, buf[0] = (char)(0xe0 | (v >> 12)), buf[1] = (char)(0x80 | ((v >> 6) & 63)), buf[2] = (char)(0x80 | (v & 63));
            else
                m = 4, buf[0] = (char)(0xf0 | (v >> 18)), buf[1] = (char)(0x80 | ((v >> 12) & 63)),
                buf[2] = (char)(0x80 | ((v >> 6) & 63)), buf[3] = (char)(0x80 | (v & 63));
        }
        if (k + m >= outcap) return -1;
        memcpy(out + k, buf, m);
        k += m;
    }
    out[k] = '\0';
    return (int)k;
}

// A number token that is a plain non-negative integer (no sign, fraction or exponent) below 2^53
// into *v; -1 otherwise
static inline int json_uint(const char *s, const JsonTok *t, uint64_t *v) {
    if (t->type != JSON_NUMBER || t->len == 0 || t->len > 16) return -1;
    uint64_t x = 0;
    for (size_t i = t->start; i < t->start + t->len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        x = x * 10 + (uint64_t)(s[i] - '0');
    }
    if (x >= ((uint64_t)1 << 53)) return -1;
    *v = x;
    return 0;
}

// ----------------------------------------------------------------------------
// writing JSON text

typedef struct {
    char *p;
    size_t n, cap;
} StText;

static inline void st_text_put(StText *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = (char *)realloc(b->p, cap);
        if (!b->p) die("a smaller model", "out of host memory writing a header of %zu bytes", cap);
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static inline void st_text_printf(StText *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void st_text_printf(StText *b, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    st_text_put(b, buf, n < (int)sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
}

// s as a JSON string, quotes included: ", \ and control characters escaped, and bytes that are
// not valid UTF-8 (a class named after a folder can hold anything) written as U+FFFD
static inline void json_put_string(StText *b, const char *s) {
    st_text_put(b, "\"", 1);
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            st_text_put(b, e, 2);
            i++;
        } else if (c < 0x20) {
            st_text_printf(b, "\\u%04x", c);
            i++;
        } else {
            int len = utf8_valid_len((const unsigned char *)s + i, n - i);
            if (len == 0) st_text_put(b, "\xef\xbf\xbd", 3), i++;
            else st_text_put(b, s + i, (size_t)len), i += (size_t)len;
        }
    }
    st_text_put(b, "\"", 1);
}

// ----------------------------------------------------------------------------
// the metadata both writers (this one and run/onnx.h) give a model

static const char *const DATA_KIND_KEYS[] = {"", "idx", "cifar10", "folder"};

// "784,128,10"
static inline void st_format_sizes(const CheckpointMeta *m, char *out, size_t n) { ck_format_sizes(m->sizes, m->L, out, n); }

// The class names as JSON text: ["T-shirt/top", "Trouser", ...]
static inline void st_classes_json(const CheckpointMeta *m, StText *b) {
    st_text_put(b, "[", 1);
    for (int c = 0; c < m->sizes[m->L]; c++) {
        if (c) st_text_put(b, ", ", 2);
        json_put_string(b, m->class_names[c]);
    }
    st_text_put(b, "]", 1);
}

// The metadata's keys and values (strings) in order; count in *n. Keys whose value the model does
// not know (an imported file's missing input) are left out. Free each value.
#define ST_META_KEYS 9
static inline void st_metadata(const CheckpointMeta *m, const char *keys[ST_META_KEYS], char *vals[ST_META_KEYS], int *n) {
    char buf[1024];
    StText classes = {0};
    *n = 0;
#define ST_META(key, value) (keys[*n] = (key), vals[*n] = strdup(value), (*n)++)
    ST_META("format", "pt");  // what Hugging Face's loaders look for
    st_format_sizes(m, buf, sizeof(buf));
    ST_META("sizes", buf);
    ST_META("activation", ACT_NAMES[m->act]);
    int named = 0;
    for (int c = 0; c < m->sizes[m->L]; c++) named |= m->class_names[c][0] != 0;
    if (named) {
        st_classes_json(m, &classes);
        ST_META("classes", classes.p);
        free(classes.p);
    }
    if (m->data_kind != DATA_NONE) {
        snprintf(buf, sizeof(buf), "%d,%d,%d,%s", m->channels, m->rows, m->cols, m->planar ? "planar" : "interleaved");
        ST_META("input", buf);
        ST_META("data", DATA_KIND_KEYS[m->data_kind]);
    }
    if (m->dataset_name[0]) ST_META("dataset", m->dataset_name);
    snprintf(buf, sizeof(buf), "%.9g", m->input_scale);
    ST_META("scale", buf);
    snprintf(buf, sizeof(buf), "%.9g", m->input_offset);
    ST_META("offset", buf);
#undef ST_META
    for (int i = 0; i < *n; i++)
        if (!vals[i]) die("a smaller model", "out of host memory writing the metadata");
}

// ----------------------------------------------------------------------------
// writing

// Writes n pieces of bytes, one after the other, to path through common/safe_write.h (a temporary
// file renamed into place); what names the file in messages. 0, or -1 and one line in err.
static inline int export_write_pieces(const char *path, const char *what, const void *const *data, const size_t *bytes,
                                      int n, char *err, size_t errlen) {
    char why[1400];
    SafeWrite w;
    if (safe_write_open(&w, path, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", what, why);
        return -1;
    }
    errno = 0;
    int ok = 1;
    for (int i = 0; ok && i < n; i++) ok = fwrite(data[i], 1, bytes[i], w.f) == bytes[i];
    if (!ok) {
        int saved = errno;
        safe_write_abort(&w);
        snprintf(err, errlen, "cannot write %s %s: %s", what, path, strerror(saved ? saved : EIO));
        return -1;
    }
    if (safe_write_commit(&w, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", what, why);
        return -1;
    }
    return 0;
}

// Writes the model of meta with its parameters (and, when mbuf is not NULL, its momentum buffer) to
// path as safetensors, through a temporary file renamed into place. 0, or -1 and one line in err.
static inline int safetensors_write(const char *path, const CheckpointMeta *meta, const float *params,
                                    const float *mbuf, char *err, size_t errlen) {
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    size_t P = param_layout(meta->sizes, meta->L, w_off, b_off);
    StText h = {0};
    const char *keys[ST_META_KEYS];
    char *vals[ST_META_KEYS];
    int nmeta;
    st_metadata(meta, keys, vals, &nmeta);
    st_text_put(&h, "{\"__metadata__\":{", 17);
    for (int i = 0; i < nmeta; i++) {
        if (i) st_text_put(&h, ",", 1);
        json_put_string(&h, keys[i]);
        st_text_put(&h, ":", 1);
        json_put_string(&h, vals[i]);
        free(vals[i]);
    }
    st_text_put(&h, "}", 1);
    // the tensors in the flat buffer's order, so their bytes are the buffer itself: W0 b0 W1 b1 ...
    size_t off = 0;
    for (int pass = 0; pass < (mbuf ? 2 : 1); pass++) {
        for (int l = 0; l < meta->L; l++) {
            int IN = meta->sizes[l], OUT = meta->sizes[l + 1];
            const char *pre = pass ? "momentum." : "";
            size_t wb = (size_t)OUT * IN * 4, bb = (size_t)OUT * 4;
            st_text_printf(&h, ",\"%s%d.weight\":{\"dtype\":\"F32\",\"shape\":[%d,%d],\"data_offsets\":[%zu,%zu]}", pre,
                           2 * l, OUT, IN, off, off + wb);
            off += wb;
            st_text_printf(&h, ",\"%s%d.bias\":{\"dtype\":\"F32\",\"shape\":[%d],\"data_offsets\":[%zu,%zu]}", pre, 2 * l,
                           OUT, off, off + bb);
            off += bb;
        }
    }
    st_text_put(&h, "}", 1);
    while ((8 + h.n) % 8) st_text_put(&h, " ", 1);  // the tensors start 8-byte aligned, as safetensors pads them
    uint8_t len8[8];
    ck_put_u64(len8, h.n);
    const void *pieces[4] = {len8, h.p, params, mbuf};
    const size_t bytes[4] = {8, h.n, P * sizeof(float), P * sizeof(float)};
    int rc = export_write_pieces(path, "the safetensors file", pieces, bytes, mbuf ? 4 : 3, err, errlen);
    free(h.p);
    return rc;
}

// ----------------------------------------------------------------------------
// reading

#define ST_MAX_HEADER (1u << 20)  // the longest header read: ours are at most a few hundred KiB (the class names)
#define ST_MAX_TENSORS (4 * MAX_LAYERS)

enum { ST_F32 = 1, ST_F16 = 2, ST_BF16 = 4 };  // the dtypes read (bits of SafetensorsInfo.dtypes)

// One tensor's place in the file
typedef struct {
    int dtype;            // ST_*
    uint64_t begin, end;  // its bytes, from the start of the data (after the header)
    int shape[2], dims;
} StTensor;

// What safetensors_parse finds in a file
typedef struct {
    CheckpointMeta meta;  // sizes, activation, the input and classes when the metadata gives them
    int have_act, have_classes, have_input, have_scale, have_momentum;
    int index[MAX_LAYERS];                           // layer l's N (of N.weight)
    StTensor w[MAX_LAYERS], b[MAX_LAYERS];           // the parameters
    StTensor mw[MAX_LAYERS], mb[MAX_LAYERS];         // the momentum buffers (have_momentum)
    int dtypes;                                      // ST_* bits of the dtypes found
    size_t data_start;                               // 8 + the header's length
} SafetensorsInfo;

// "F32, F16" for messages
static inline void st_dtype_names(int dtypes, char *out, size_t n) {
    snprintf(out, n, "%s%s%s%s%s", dtypes & ST_F32 ? "F32" : "", dtypes & ST_F32 && dtypes & ~ST_F32 ? ", " : "",
             dtypes & ST_F16 ? "F16" : "", dtypes & ST_F16 && dtypes & ST_BF16 ? ", " : "", dtypes & ST_BF16 ? "BF16" : "");
}

// "N.weight", "N.bias", "momentum.N.weight", "momentum.N.bias": 0 and *index, *bias, *momentum;
// -1 for any other name
static inline int st_tensor_name(const char *name, int *index, int *bias, int *momentum) {
    *momentum = strncmp(name, "momentum.", 9) == 0;
    const char *p = name + (*momentum ? 9 : 0);
    if (*p < '0' || *p > '9' || (p[0] == '0' && p[1] >= '0' && p[1] <= '9')) return -1;
    long v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 9) v = v * 10 + (*p++ - '0'), digits++;
    if (strcmp(p, ".weight") == 0) *bias = 0;
    else if (strcmp(p, ".bias") == 0) *bias = 1;
    else return -1;
    *index = (int)v;
    return 0;
}

// A tensor's entry {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, tokens from k
static inline int st_tensor_entry(const char *s, const JsonTok *tok, int k, const char *name, StTensor *t, char *err,
                                  size_t errlen) {
    const JsonTok *o = &tok[k];
    if (o->type != JSON_OBJECT) {
        snprintf(err, errlen, "tensor %s: its entry is not a JSON object", name);
        return -1;
    }
    int seen = 0;
    memset(t, 0, sizeof(*t));
    for (int i = 0, j = k + 1; i < o->size; i++) {
        char key[32];
        const JsonTok *v = &tok[j + 1];
        if (json_string(s, &tok[j], key, sizeof(key)) < 0) key[0] = '\0';
        int bit = strcmp(key, "dtype") == 0 ? 1 : strcmp(key, "shape") == 0 ? 2 : strcmp(key, "data_offsets") == 0 ? 4 : 0;
        if (!bit) {
            snprintf(err, errlen, "tensor %s: unexpected key in its entry (a safetensors entry has dtype, shape and "
                     "data_offsets)", name);
            return -1;
        }
        if (seen & bit) {
            snprintf(err, errlen, "tensor %s: its entry gives %s twice", name, key);
            return -1;
        }
        seen |= bit;
        if (bit == 1) {
            char d[16];
            if (v->type != JSON_STRING || json_string(s, v, d, sizeof(d)) < 0) d[0] = '\0';
            t->dtype = strcmp(d, "F32") == 0 ? ST_F32 : strcmp(d, "F16") == 0 ? ST_F16 : strcmp(d, "BF16") == 0 ? ST_BF16 : 0;
            if (!t->dtype) {
                snprintf(err, errlen, "tensor %s has dtype %.15s; this program reads F32, and F16 and BF16 (widened to "
                         "F32)", name, v->type == JSON_STRING && d[0] ? d : "(not a dtype string)");
                return -1;
            }
        } else if (bit == 2) {
            if (v->type != JSON_ARRAY || v->size < 1 || v->size > 2) {
                snprintf(err, errlen, "tensor %s: its shape is not a list of 1 or 2 sizes (a Linear layer's weight is "
                         "(out, in), its bias (out))", name);
                return -1;
            }
            t->dims = v->size;
            for (int d = 0; d < v->size; d++) {
                uint64_t x;
                if (json_uint(s, &tok[j + 2 + d], &x) != 0 || x < 1 || x > MAX_WIDTH) {
                    snprintf(err, errlen, "tensor %s: shape entry %d is not a size from 1 to %d", name, d, MAX_WIDTH);
                    return -1;
                }
                t->shape[d] = (int)x;
            }
        } else {
            uint64_t b, e;
            if (v->type != JSON_ARRAY || v->size != 2 || json_uint(s, &tok[j + 2], &b) != 0 ||
                json_uint(s, &tok[j + 3], &e) != 0 || e < b) {
                snprintf(err, errlen, "tensor %s: data_offsets is not [begin, end] with begin <= end", name);
                return -1;
            }
            t->begin = b;
            t->end = e;
        }
        j = v->next;
    }
    if (seen != 7) {
        snprintf(err, errlen, "tensor %s: its entry has no %s", name, !(seen & 1) ? "dtype" : !(seen & 2) ? "shape" : "data_offsets");
        return -1;
    }
    uint64_t numel = (uint64_t)t->shape[0] * (uint64_t)(t->dims == 2 ? t->shape[1] : 1);
    uint64_t bytes = numel * (t->dtype == ST_F32 ? 4 : 2);
    if (t->end - t->begin != bytes) {
        snprintf(err, errlen, "tensor %s: data_offsets [%llu, %llu] hold %llu bytes, but its shape and dtype make %llu",
                 name, (unsigned long long)t->begin, (unsigned long long)t->end,
                 (unsigned long long)(t->end - t->begin), (unsigned long long)bytes);
        return -1;
    }
    return 0;
}

// A metadata value: "784,128,10", "1,28,28,planar", a float
static inline int st_parse_ints(const char *s, int *v, int max, int *n, const char **rest) {
    *n = 0;
    while (*n < max) {
        if (*s < '0' || *s > '9') return -1;
        long x = 0;
        int digits = 0;
        while (*s >= '0' && *s <= '9' && digits < 7) x = x * 10 + (*s++ - '0'), digits++;
        if (*s >= '0' && *s <= '9') return -1;
        v[(*n)++] = (int)x;
        if (*s != ',') break;
        s++;
        if (*s < '0' || *s > '9') break;  // a word follows (the input's layout)
    }
    *rest = s;
    return 0;
}

static inline int st_parse_float(const char *s, float *out) {
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(x) || fabs(x) > 3e38) return -1;
    *out = (float)x;
    return 0;
}

// The metadata's values, checked against the tensors (the sizes are known by now)
static inline int st_metadata_read(const char *s, const JsonTok *tok, int k, SafetensorsInfo *info, char *err,
                                   size_t errlen) {
    CheckpointMeta *m = &info->meta;
    const JsonTok *o = &tok[k];
    static char val[MAX_CLASSES * CLASS_NAME_LEN * 7];  // the longest class list, every byte escaped
    char sizes[256];
    ck_format_sizes(m->sizes, m->L, sizes, sizeof(sizes));
    if (o->type != JSON_OBJECT) {
        snprintf(err, errlen, "__metadata__ is not a JSON object");
        return -1;
    }
    const char *known[] = {"sizes", "activation", "classes", "input", "data", "dataset", "scale", "offset"};
    int seen = 0;
    for (int i = 0, j = k + 1; i < o->size; i++, j = tok[j + 1].next) {
        char key[64];
        const JsonTok *v = &tok[j + 1];
        if (json_string(s, &tok[j], key, sizeof(key)) < 0) continue;  // a key too long to be ours
        if (v->type != JSON_STRING) {
            snprintf(err, errlen, "__metadata__: the value of %s is not a string (safetensors metadata are strings)", key);
            return -1;
        }
        int which = -1;
        for (int q = 0; q < 8; q++)
            if (strcmp(key, known[q]) == 0) which = q;
        if (which < 0) continue;  // another program's key: not ours to judge
        if (seen & (1 << which)) {
            snprintf(err, errlen, "__metadata__ gives %s twice", key);
            return -1;
        }
        seen |= 1 << which;
        if (json_string(s, v, val, sizeof(val)) < 0) {
            snprintf(err, errlen, "__metadata__: %s is too long or holds a NUL character", key);
            return -1;
        }
        if (which == 0 && strcmp(val, sizes) != 0) {
            snprintf(err, errlen, "__metadata__ gives sizes \"%.100s\" but the tensors' shapes make %s", val, sizes);
            return -1;
        }
        if (which == 1) {
            int act = -1;
            for (int a = 0; a < 3; a++)
                if (strcmp(val, ACT_NAMES[a]) == 0) act = a;
            if (act < 0) {
                snprintf(err, errlen, "__metadata__: activation \"%.40s\" is not sigmoid, relu or tanh", val);
                return -1;
            }
            m->act = act;
            info->have_act = 1;
        }
        if (which == 2) {  // JSON text: an array of one name per class
            int C = m->sizes[m->L];
            JsonTok ct[MAX_CLASSES + 2];
            char why[256];
            int nt = json_parse(val, strlen(val), ct, MAX_CLASSES + 2, why, sizeof(why));
            if (nt < 0 || ct[0].type != JSON_ARRAY || ct[0].size != C || nt != C + 1) {
                snprintf(err, errlen, "__metadata__: classes is not a JSON list of %d names, one per output%s%s", C,
                         nt < 0 ? ": " : "", nt < 0 ? why : "");
                return -1;
            }
            for (int c = 0; c < C; c++) {
                if (ct[c + 1].type != JSON_STRING || json_string(val, &ct[c + 1], m->class_names[c], CLASS_NAME_LEN) < 0) {
                    snprintf(err, errlen, "__metadata__: class %d is not a name of at most %d bytes", c, CLASS_NAME_LEN - 1);
                    return -1;
                }
            }
            info->have_classes = 1;
        }
        if (which == 3) {
            int v3[3], n;
            const char *rest;
            if (st_parse_ints(val, v3, 3, &n, &rest) != 0 || n != 3 ||
                (strcmp(rest, "planar") != 0 && strcmp(rest, "interleaved") != 0)) {
                snprintf(err, errlen, "__metadata__: input \"%.60s\" is not channels,rows,cols,planar (or interleaved)", val);
                return -1;
            }
            if ((v3[0] != 1 && v3[0] != 3) || v3[1] < 1 || v3[2] < 1 || (int64_t)v3[0] * v3[1] * v3[2] != m->sizes[0]) {
                snprintf(err, errlen, "__metadata__: input %d,%d,%d is not 1 or 3 channels of pictures with the model's %d "
                         "inputs", v3[0], v3[1], v3[2], m->sizes[0]);
                return -1;
            }
            m->channels = v3[0];
            m->rows = v3[1];
            m->cols = v3[2];
            m->planar = strcmp(rest, "planar") == 0;
            info->have_input = 1;
        }
        if (which == 4) {
            int kind = 0;
            for (int q = 1; q <= 3; q++)
                if (strcmp(val, DATA_KIND_KEYS[q]) == 0) kind = q;
            if (!kind) {
                snprintf(err, errlen, "__metadata__: data \"%.40s\" is not idx, cifar10 or folder", val);
                return -1;
            }
            m->data_kind = kind;
        }
        if (which == 5) {
            if (strlen(val) >= sizeof(m->dataset_name)) {
                snprintf(err, errlen, "__metadata__: the dataset's name is longer than %zu bytes", sizeof(m->dataset_name) - 1);
                return -1;
            }
            memcpy(m->dataset_name, val, strlen(val) + 1);
        }
        if ((which == 6 || which == 7) && (st_parse_float(val, which == 6 ? &m->input_scale : &m->input_offset) != 0 ||
                                           (which == 6 && m->input_scale == 0))) {
            snprintf(err, errlen, "__metadata__: %s \"%.40s\" is not a finite number%s", key, val, which == 6 ? " other than 0" : "");
            return -1;
        }
        info->have_scale |= which == 6;
    }
    if (info->have_input && !m->data_kind) m->data_kind = DATA_FOLDER;  // pictures of that shape, whatever made them
    if (!info->have_input) m->data_kind = DATA_NONE;
    return 0;
}

// The header's tokens (tok, of the JSON text s) of a file of len bytes whose tensors' bytes start
// at data_start: the tensors, the layers they make, their offsets, the metadata. 0, or -1 and err.
static inline int st_parse_header(const char *s, const JsonTok *tok, size_t len, size_t data_start, SafetensorsInfo *info,
                                  char *err, size_t errlen) {
    if (tok[0].size > ST_MAX_TENSORS + 1) {
        snprintf(err, errlen, "%d tensors: a model of at most %d layers has at most %d", tok[0].size, MAX_LAYERS, ST_MAX_TENSORS);
        return -1;
    }
    // 1. the tensors: names, dtypes, shapes; the metadata's place
    struct {
        char name[48];
        int index, bias, momentum;
        StTensor t;
    } ent[ST_MAX_TENSORS];
    int nent = 0, meta_tok = -1;
    for (int i = 0, j = 1; i < tok[0].size; i++, j = tok[j + 1].next) {
        char name[48];
        int nlen = json_string(s, &tok[j], name, sizeof(name));
        if (nlen >= 0 && strcmp(name, "__metadata__") == 0) {
            if (meta_tok >= 0) {
                snprintf(err, errlen, "__metadata__ is given twice");
                return -1;
            }
            meta_tok = j + 1;
            continue;
        }
        int index, bias, momentum;
        if (nlen < 0 || st_tensor_name(name, &index, &bias, &momentum) != 0) {
            snprintf(err, errlen, "unexpected tensor \"%.40s%s\": this program reads N.weight and N.bias (nn.Linear layers "
                     "in an nn.Sequential), and momentum.N.weight, momentum.N.bias", nlen < 0 ? "" : name, nlen < 0 ? "..." : "");
            return -1;
        }
        for (int e = 0; e < nent; e++)
            if (strcmp(ent[e].name, name) == 0) {
                snprintf(err, errlen, "tensor %s is given twice", name);
                return -1;
            }
        if (nent == ST_MAX_TENSORS) {
            snprintf(err, errlen, "more than %d tensors: a model of at most %d layers has at most %d", ST_MAX_TENSORS,
                     MAX_LAYERS, ST_MAX_TENSORS);
            return -1;
        }
        snprintf(ent[nent].name, sizeof(ent[nent].name), "%s", name);
        ent[nent].index = index;
        ent[nent].bias = bias;
        ent[nent].momentum = momentum;
        if (st_tensor_entry(s, tok, j + 1, name, &ent[nent].t, err, errlen) != 0) return -1;
        info->dtypes |= ent[nent].t.dtype;
        nent++;
    }
    // 2. the layers: the distinct indices of the parameters, in increasing order
    int L = 0;
    while (1) {
        int next = -1;
        for (int e = 0; e < nent; e++)
            if (!ent[e].momentum && (L == 0 || ent[e].index > info->index[L - 1]) && (next < 0 || ent[e].index < next))
                next = ent[e].index;
        if (next < 0) break;
        if (L == MAX_LAYERS) {
            snprintf(err, errlen, "more than %d Linear layers", MAX_LAYERS);
            return -1;
        }
        info->index[L++] = next;
    }
    if (L == 0) {
        snprintf(err, errlen, "no tensors named N.weight and N.bias: not a model this program reads");
        return -1;
    }
    int found[4][MAX_LAYERS] = {{0}};  // weight, bias, momentum weight, momentum bias of each layer
    for (int e = 0; e < nent; e++) {
        int l = 0;
        while (l < L && info->index[l] != ent[e].index) l++;
        if (l == L) {
            snprintf(err, errlen, "tensor %s has no %d.weight and %d.bias to be the momentum of", ent[e].name,
                     ent[e].index, ent[e].index);
            return -1;
        }
        int slot = ent[e].momentum * 2 + ent[e].bias;
        found[slot][l] = 1;
        StTensor *dst[4] = {&info->w[l], &info->b[l], &info->mw[l], &info->mb[l]};
        *dst[slot] = ent[e].t;
        info->have_momentum |= ent[e].momentum;
    }
    for (int l = 0; l < L; l++) {
        int N = info->index[l];
        if (!found[0][l] || !found[1][l]) {
            snprintf(err, errlen, "layer %d has %d.%s but no %d.%s (every layer here is an nn.Linear with a bias)", l, N,
                     found[0][l] ? "weight" : "bias", N, found[0][l] ? "bias" : "weight");
            return -1;
        }
        if (info->have_momentum && (!found[2][l] || !found[3][l])) {
            snprintf(err, errlen, "momentum.%d.%s is missing: the momentum buffers come for every tensor or none", N,
                     found[2][l] ? "bias" : "weight");
            return -1;
        }
        const StTensor *w = &info->w[l], *b = &info->b[l];
        if (w->dims != 2 || b->dims != 1 || b->shape[0] != w->shape[0]) {
            snprintf(err, errlen, "%d.weight is not (out, in) with %d.bias (out): shapes [%d%s%.0d] and [%d%s%.0d]", N, N,
                     w->shape[0], w->dims == 2 ? ", " : "", w->dims == 2 ? w->shape[1] : 0, b->shape[0], b->dims == 2 ? ", " : "",
                     b->dims == 2 ? b->shape[1] : 0);
            return -1;
        }
        if (l > 0 && w->shape[1] != info->w[l - 1].shape[0]) {
            snprintf(err, errlen, "%d.weight takes %d inputs, but the layer before it (%d.weight) has %d outputs", N,
                     w->shape[1], info->index[l - 1], info->w[l - 1].shape[0]);
            return -1;
        }
        for (int q = 0; info->have_momentum && q < 2; q++) {
            const StTensor *p = q ? b : w, *mm = q ? &info->mb[l] : &info->mw[l];
            if (mm->dims != p->dims || mm->shape[0] != p->shape[0] || (p->dims == 2 && mm->shape[1] != p->shape[1])) {
                snprintf(err, errlen, "momentum.%d.%s's shape is not that of %d.%s", N, q ? "bias" : "weight", N,
                         q ? "bias" : "weight");
                return -1;
            }
        }
    }
    CheckpointMeta *m = &info->meta;
    m->L = L;
    m->sizes[0] = info->w[0].shape[1];
    for (int l = 0; l < L; l++) m->sizes[l + 1] = info->w[l].shape[0];
    if (m->sizes[L] > MAX_CLASSES) {
        snprintf(err, errlen, "the last layer has %d outputs; at most %d classes", m->sizes[L], MAX_CLASSES);
        return -1;
    }
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    m->num_params = param_layout(m->sizes, L, w_off, b_off);
    m->num_classes = m->sizes[L];
    m->act = ACT_SIGMOID;  // until the metadata says (have_act)
    m->input_scale = 1.0f / 255.0f;
    m->input_offset = 0.0f;
    snprintf(m->writer, sizeof(m->writer), "safetensors");
    // 3. the bytes: the tensors cover the data after the header exactly, in some order
    info->data_start = data_start;
    uint64_t data_len = len - info->data_start, at = 0;
    for (int k = 0; k < nent; k++) {
        int first = -1;
        for (int e = 0; e < nent; e++)
            if (ent[e].t.begin == at && ent[e].index >= 0 && (first < 0)) first = e;
        if (first < 0) {
            uint64_t lo = UINT64_MAX;
            int who = 0;
            for (int e = 0; e < nent; e++)
                if (ent[e].index >= 0 && ent[e].t.begin < lo) lo = ent[e].t.begin, who = e;
            snprintf(err, errlen, "the tensors' data_offsets %s at byte %llu of the data (tensor %s starts at %llu)",
                     lo < at ? "overlap" : "leave a gap", (unsigned long long)at, ent[who].name, (unsigned long long)lo);
            return -1;
        }
        at = ent[first].t.end;
        ent[first].index = -1;  // placed
        if (at > data_len) {
            snprintf(err, errlen, "truncated: tensor %s ends at byte %llu of the data, but the file holds %llu bytes after "
                     "the header", ent[first].name, (unsigned long long)at, (unsigned long long)data_len);
            return -1;
        }
    }
    if (at != data_len) {
        snprintf(err, errlen, "%llu bytes after the last tensor's data (the tensors end at byte %llu of %llu)",
                 (unsigned long long)(data_len - at), (unsigned long long)at, (unsigned long long)data_len);
        return -1;
    }
    // 4. the metadata, against the tensors
    if (meta_tok >= 0 && st_metadata_read(s, tok, meta_tok, info, err, errlen) != 0) return -1;
    return 0;
}

// Parses a safetensors file's bytes (the whole file, len bytes) into info. Returns 0, or -1 with
// one line in err. Reads only within buf; allocates only the JSON tokens.
static inline int safetensors_parse(const uint8_t *buf, size_t len, SafetensorsInfo *info, char *err, size_t errlen) {
    memset(info, 0, sizeof(*info));
    if (len < 8) {
        snprintf(err, errlen, "not a safetensors file: %zu bytes, fewer than its 8-byte header length", len);
        return -1;
    }
    if (memcmp(buf, CK_MAGIC, 8) == 0) {
        snprintf(err, errlen, "an mlp.cu checkpoint, not a safetensors file: give it a name that does not end in "
                 ".safetensors, or export it with -e CK -E FILE.safetensors");
        return -1;
    }
    uint64_t hlen = ck_get_u64(buf);
    if (hlen < 2 || hlen > ST_MAX_HEADER) {
        snprintf(err, errlen, "not a safetensors file of this program's: its header length is %llu bytes, not 2 to %u "
                 "(a model of %d layers needs far less)", (unsigned long long)hlen, ST_MAX_HEADER, MAX_LAYERS);
        return -1;
    }
    if (hlen > len - 8) {
        snprintf(err, errlen, "truncated: the header's length is %llu bytes, but only %zu follow",
                 (unsigned long long)hlen, len - 8);
        return -1;
    }
    if (buf[8] != '{') {
        snprintf(err, errlen, "not a safetensors file: its header does not start with '{'");
        return -1;
    }
    const char *s = (const char *)buf + 8;
    int cap = (int)(hlen / 2 + 2);  // each token takes at least two bytes of text, but the outermost
    JsonTok *tok = (JsonTok *)malloc(sizeof(JsonTok) * (size_t)cap);
    if (!tok) {
        snprintf(err, errlen, "out of memory for a header of %llu bytes", (unsigned long long)hlen);
        return -1;
    }
    char why[512];
    int rc = -1, nt = json_parse(s, (size_t)hlen, tok, cap, why, sizeof(why));
    if (nt < 0) snprintf(err, errlen, "the header: %s", why);
    else if (tok[0].type != JSON_OBJECT) snprintf(err, errlen, "the header is not a JSON object");
    else rc = st_parse_header(s, tok, len, 8 + (size_t)hlen, info, err, errlen);
    free(tok);
    return rc;
}

// IEEE half and bfloat16 to float
static inline float st_half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, f = h & 1023, bits;
    if (e == 31) bits = sign | 0x7f800000u | (f << 13);
    else if (e != 0) bits = sign | ((e + 112) << 23) | (f << 13);
    else if (f == 0) bits = sign;
    else {  // subnormal: normalise
        e = 113;
        while (!(f & 1024)) f <<= 1, e--;
        bits = sign | (e << 23) | ((f & 1023) << 13);
    }
    float x;
    memcpy(&x, &bits, 4);
    return x;
}

static inline float st_bf16_to_float(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float x;
    memcpy(&x, &bits, 4);
    return x;
}

// One tensor's values into out (widened to float); -1 and err at the first value that is not finite
static inline int st_copy_tensor(const uint8_t *data, const StTensor *t, const char *name, float *out, char *err,
                                 size_t errlen) {
    const uint8_t *p = data + t->begin;
    size_t n = (size_t)((t->end - t->begin) / (t->dtype == ST_F32 ? 4 : 2));
    for (size_t i = 0; i < n; i++) {
        float x;
        if (t->dtype == ST_F32) x = ck_get_f32(p + 4 * i);
        else {
            uint16_t h = (uint16_t)(p[2 * i] | (p[2 * i + 1] << 8));
            x = t->dtype == ST_F16 ? st_half_to_float(h) : st_bf16_to_float(h);
        }
        if (!isfinite(x)) {
            snprintf(err, errlen, "tensor %s holds %s at element %zu: a model's values must be finite", name,
                     isnan(x) ? "NaN" : "an infinity", i);
            return -1;
        }
        out[i] = x;
    }
    return 0;
}

// The parameters (and the momentum buffers when the file has them, else zeros) of a parsed file
// into params and mbuf (meta.num_params floats each, common/mlp.h's layout). 0, or -1 and err.
static inline int safetensors_copy(const uint8_t *buf, const SafetensorsInfo *info, float *params, float *mbuf,
                                   char *err, size_t errlen) {
    const CheckpointMeta *m = &info->meta;
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    size_t P = param_layout(m->sizes, m->L, w_off, b_off);
    const uint8_t *data = buf + info->data_start;
    if (!info->have_momentum) memset(mbuf, 0, P * sizeof(float));
    for (int l = 0; l < m->L; l++) {
        char name[64];
        int N = info->index[l];
        for (int q = 0; q < (info->have_momentum ? 4 : 2); q++) {
            const StTensor *t = q == 0 ? &info->w[l] : q == 1 ? &info->b[l] : q == 2 ? &info->mw[l] : &info->mb[l];
            float *out = (q < 2 ? params : mbuf) + (q % 2 ? b_off[l] : w_off[l]);
            snprintf(name, sizeof(name), "%s%d.%s", q < 2 ? "" : "momentum.", N, q % 2 ? "bias" : "weight");
            if (st_copy_tensor(data, t, name, out, err, errlen) != 0) return -1;
        }
    }
    return 0;
}

// Reads the safetensors file at path into ck (its meta, its parameters and momentum: zeros when
// the file has none) and info (what the metadata gave). Allocates; free with checkpoint_free.
// Returns 0, or -1 with one line in err that names the file.
static inline int safetensors_read(const char *path, Checkpoint *ck, SafetensorsInfo *info, char *err, size_t errlen) {
    memset(ck, 0, sizeof(*ck));
    snprintf(ck->path, sizeof(ck->path), "%s", path);
    int64_t size;
    char why[1400];
    FILE *f = data_open_file(path, &size, why, sizeof(why));
    if (!f) {
        snprintf(err, errlen, "%s", why);
        return -1;
    }
    uint8_t *bytes = (uint8_t *)malloc(size > 0 ? (size_t)size : 1);
    if (!bytes || (int64_t)(size_t)size != size) {
        fclose(f);
        free(bytes);
        snprintf(err, errlen, "%s: out of memory reading its %lld bytes", path, (long long)size);
        return -1;
    }
    size_t got = fread(bytes, 1, (size_t)size, f);
    fclose(f);
    int rc = safetensors_parse(bytes, got, info, why, sizeof(why));
    if (rc == 0) {
        size_t P = (size_t)info->meta.num_params;
        ck->bytes = (uint8_t *)malloc(2 * P * sizeof(float));
        if (!ck->bytes) {
            snprintf(why, sizeof(why), "out of memory for its %zu parameters", P);
            rc = -1;
        } else {
            float *params = (float *)(void *)ck->bytes;
            rc = safetensors_copy(bytes, info, params, params + P, why, sizeof(why));
            ck->params = params;
            ck->mbuf = params + P;
            ck->nbytes = 2 * P * sizeof(float);
            ck->meta = info->meta;
        }
    }
    free(bytes);
    if (rc != 0) {
        checkpoint_free(ck);
        snprintf(err, errlen, "%s: %s", path, why);
        return -1;
    }
    return 0;
}

#endif // MLP_SAFETENSORS_H
