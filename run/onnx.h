/*
run/onnx.h: a model as an ONNX inference graph (-e CK -E FILE.onnx), for ONNX Runtime, TensorRT
and the browsers' runtimes. Written by hand in protobuf's wire format: no dependency.

The graph (opset 17, IR version 8), for a model of L layers:

    pixels (N, inputs) float32, raw 0-255 in the training layout (doc/checkpoint.md)
      -> Mul(scale) [-> Add(offset) when it is not 0]                  the model's input
      -> Gemm(W0, b0, transB=1) -> Sigmoid|Relu|Tanh -> ... -> Gemm(W{L-1}, b{L-1})  = logits (N, C)
      -> Softmax(axis=-1)                                              = probabilities (N, C)

N is a dynamic dimension. W is stored (out, in) as in the checkpoint, which Gemm's transB=1 reads
as y = x Wᵀ + b. The outputs are `probabilities` and `logits`; the model's metadata_props hold
the same keys as a safetensors export's metadata (run/safetensors.h: sizes, activation, classes,
input, data, dataset, scale, offset).

The wire format: every field is a varint key (field number << 3 | wire type) and its value: a
varint (type 0: integers, enums), 4 bytes (type 5: float), or a length and that many bytes
(type 2: strings, bytes, nested messages). A nested message is written into its own buffer first,
so its length is known before its parent writes it.
*/
#ifndef MLP_ONNX_H
#define MLP_ONNX_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/mlp.h"
#include "../common/safe_write.h"
#include "checkpoint.h"   // CheckpointMeta
#include "safetensors.h"  // st_metadata: the metadata both exports share

#define ONNX_MAX_BYTES ((size_t)2000 << 20)  // a protobuf message is at most 2 GiB: larger models go to .safetensors

// ----------------------------------------------------------------------------
// protobuf's wire format

typedef struct {
    uint8_t *p;
    size_t n, cap;
} PbBuf;

static inline void pb_put(PbBuf *b, const void *data, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        b->p = (uint8_t *)realloc(b->p, cap);
        if (!b->p) die("a smaller model, or -E FILE.safetensors", "out of host memory writing an ONNX model of %zu bytes", cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, data, n);
    b->n += n;
}

static inline void pb_varint(PbBuf *b, uint64_t v) {
    uint8_t out[10];
    int k = 0;
    do {
        out[k] = (uint8_t)(v & 127);
        v >>= 7;
        if (v) out[k] |= 128;
        k++;
    } while (v);
    pb_put(b, out, (size_t)k);
}

enum { PB_VARINT = 0, PB_BYTES = 2, PB_FIXED32 = 5 };
static inline void pb_key(PbBuf *b, int field, int type) { pb_varint(b, ((uint64_t)field << 3) | (uint64_t)type); }
static inline void pb_int(PbBuf *b, int field, int64_t v) {
    pb_key(b, field, PB_VARINT);
    pb_varint(b, (uint64_t)v);
}
static inline void pb_bytes(PbBuf *b, int field, const void *data, size_t n) {
    pb_key(b, field, PB_BYTES);
    pb_varint(b, n);
    pb_put(b, data, n);
}
static inline void pb_string(PbBuf *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }
static inline void pb_float(PbBuf *b, int field, float f) {
    uint8_t v[4];
    ck_put_f32(v, f);
    pb_key(b, field, PB_FIXED32);
    pb_put(b, v, 4);
}
// a nested message, written whole into its own buffer (freed here)
static inline void pb_message(PbBuf *b, int field, PbBuf *sub) {
    pb_bytes(b, field, sub->p, sub->n);
    free(sub->p);
    memset(sub, 0, sizeof(*sub));
}

// ----------------------------------------------------------------------------
// ONNX's messages (onnx.proto's field numbers)

enum { ONNX_FLOAT = 1 };           // TensorProto.DataType
enum { ONNX_ATTR_INT = 2 };        // AttributeProto.AttributeType

// TensorProto: dims (1), data_type (2), name (8), raw_data (9, little-endian)
static inline void onnx_tensor(PbBuf *graph, const char *name, const int64_t *dims, int ndims, const float *data, size_t n) {
    PbBuf t = {0};
    for (int d = 0; d < ndims; d++) pb_int(&t, 1, dims[d]);
    pb_int(&t, 2, ONNX_FLOAT);
    pb_string(&t, 8, name);
    pb_bytes(&t, 9, data, n * sizeof(float));
    pb_message(graph, 5, &t);  // GraphProto.initializer
}

// NodeProto: input (1), output (2), name (3), op_type (4), attribute (5); at most one int attribute
static inline void onnx_node(PbBuf *graph, const char *op, const char *name, const char *in0, const char *in1,
                             const char *in2, const char *out, const char *attr, int64_t attr_value) {
    PbBuf nd = {0};
    pb_string(&nd, 1, in0);
    if (in1) pb_string(&nd, 1, in1);
    if (in2) pb_string(&nd, 1, in2);
    pb_string(&nd, 2, out);
    pb_string(&nd, 3, name);
    pb_string(&nd, 4, op);
    if (attr) {  // AttributeProto: name (1), i (3), type (20)
        PbBuf a = {0};
        pb_string(&a, 1, attr);
        pb_int(&a, 3, attr_value);
        pb_int(&a, 20, ONNX_ATTR_INT);
        pb_message(&nd, 5, &a);
    }
    pb_message(graph, 1, &nd);  // GraphProto.node
}

// ValueInfoProto of a float tensor (N, cols): name (1), type (2) = TypeProto{tensor_type (1) =
// {elem_type (1), shape (2) = TensorShapeProto{dim (1) = {dim_value (1) | dim_param (2)}}}}
static inline void onnx_value_info(PbBuf *graph, int field, const char *name, int64_t cols) {
    PbBuf dim_n = {0}, dim_c = {0}, shape = {0}, tensor = {0}, type = {0}, vi = {0};
    pb_string(&dim_n, 2, "N");
    pb_int(&dim_c, 1, cols);
    pb_message(&shape, 1, &dim_n);
    pb_message(&shape, 1, &dim_c);
    pb_int(&tensor, 1, ONNX_FLOAT);
    pb_message(&tensor, 2, &shape);
    pb_message(&type, 1, &tensor);
    pb_string(&vi, 1, name);
    pb_message(&vi, 2, &type);
    pb_message(graph, field, &vi);  // GraphProto.input (11) or output (12)
}

// ----------------------------------------------------------------------------
// the model

// Writes meta's model with its parameters (common/mlp.h's layout) to path as an ONNX model,
// through a temporary file renamed into place. 0, or -1 and one line in err.
static inline int onnx_write(const char *path, const CheckpointMeta *meta, const float *params, char *err, size_t errlen) {
    static const char *const OPS[] = {"Sigmoid", "Relu", "Tanh"};
    size_t w_off[MAX_LAYERS], b_off[MAX_LAYERS];
    size_t P = param_layout(meta->sizes, meta->L, w_off, b_off);
    if (P * sizeof(float) > ONNX_MAX_BYTES) {
        snprintf(err, errlen, "%s: a model of %zu parameters is larger than an ONNX file can hold (2 GiB); write it with "
                 "-E FILE.safetensors", path, P);
        return -1;
    }
    const int L = meta->L, D = meta->sizes[0], C = meta->sizes[L];
    PbBuf g = {0};
    // the input's scaling: x = pixels * scale (+ offset)
    onnx_node(&g, "Mul", "scale", "pixels", "input_scale", NULL, meta->input_offset != 0 ? "scaled" : "x0", NULL, 0);
    if (meta->input_offset != 0) onnx_node(&g, "Add", "offset", "scaled", "input_offset", NULL, "x0", NULL, 0);
    for (int l = 0; l < L; l++) {
        char in[32], out[32], wn[32], bn[32], name[32], act_out[32];
        snprintf(in, sizeof(in), "x%d", l);
        snprintf(wn, sizeof(wn), "%d.weight", 2 * l);  // the names of the safetensors export
        snprintf(bn, sizeof(bn), "%d.bias", 2 * l);
        snprintf(name, sizeof(name), "linear%d", l);
        if (l == L - 1) snprintf(out, sizeof(out), "logits");
        else snprintf(out, sizeof(out), "z%d", l + 1);
        onnx_node(&g, "Gemm", name, in, wn, bn, out, "transB", 1);
        if (l < L - 1) {
            snprintf(name, sizeof(name), "%s%d", ACT_NAMES[meta->act], l);
            snprintf(act_out, sizeof(act_out), "x%d", l + 1);
            onnx_node(&g, OPS[meta->act], name, out, NULL, NULL, act_out, NULL, 0);
        }
    }
    onnx_node(&g, "Softmax", "softmax", "logits", NULL, NULL, "probabilities", "axis", -1);
    pb_string(&g, 2, "mlp");  // GraphProto.name
    const float scale = meta->input_scale, offset = meta->input_offset;
    onnx_tensor(&g, "input_scale", NULL, 0, &scale, 1);
    if (offset != 0) onnx_tensor(&g, "input_offset", NULL, 0, &offset, 1);
    for (int l = 0; l < L; l++) {
        char wn[32], bn[32];
        snprintf(wn, sizeof(wn), "%d.weight", 2 * l);
        snprintf(bn, sizeof(bn), "%d.bias", 2 * l);
        int64_t wd[2] = {meta->sizes[l + 1], meta->sizes[l]}, bd[1] = {meta->sizes[l + 1]};
        onnx_tensor(&g, wn, wd, 2, params + w_off[l], (size_t)wd[0] * (size_t)wd[1]);
        onnx_tensor(&g, bn, bd, 1, params + b_off[l], (size_t)bd[0]);
    }
    onnx_value_info(&g, 11, "pixels", D);
    onnx_value_info(&g, 12, "probabilities", C);
    onnx_value_info(&g, 12, "logits", C);

    // ModelProto: ir_version (1), producer_name (2), graph (7), opset_import (8), metadata_props (14)
    PbBuf m = {0}, opset = {0};
    pb_int(&m, 1, 8);
    pb_string(&m, 2, "mlp.cu");
    pb_message(&m, 7, &g);
    pb_string(&opset, 1, "");  // OperatorSetIdProto: domain (1) "" (the default ops), version (2)
    pb_int(&opset, 2, 17);
    pb_message(&m, 8, &opset);
    const char *keys[ST_META_KEYS];
    char *vals[ST_META_KEYS];
    int nmeta;
    st_metadata(meta, keys, vals, &nmeta);
    for (int i = 0; i < nmeta; i++) {
        PbBuf kv = {0};  // StringStringEntryProto: key (1), value (2)
        if (strcmp(keys[i], "format") != 0) {
            pb_string(&kv, 1, keys[i]);
            pb_string(&kv, 2, vals[i]);
            pb_message(&m, 14, &kv);
        }
        free(vals[i]);
    }

    const void *pieces[1] = {m.p};
    int rc = export_write_pieces(path, "the ONNX model", pieces, &m.n, 1, err, errlen);
    free(m.p);
    return rc;
}

#endif // MLP_ONNX_H
