#!/usr/bin/env python3
"""
checkpoint_to_pytorch.py -- take a model trained by mlp.cu somewhere else: load a checkpoint
(-c FILE of train_mlp_cpu, train_mlp or train_mlp_fast) into a PyTorch nn.Sequential.

    python3 dev/checkpoint_to_pytorch.py ck.bin                        # check it, say what it holds
    python3 dev/checkpoint_to_pytorch.py ck.bin --eval data/mnist      # test accuracy and loss with PyTorch
    python3 dev/checkpoint_to_pytorch.py ck.bin --save model.pt        # torch.save the model and its metadata
    python3 dev/checkpoint_to_pytorch.py ck.bin --eval DIR --numpy     # no PyTorch: the same forward pass in numpy

The file is checked as the C reader checks it: the magic number, the format version, the sizes
(truncated, trailing bytes) and the CRC-32 (zlib's, as the C code computes it), and the layer
sizes against the number of parameters. doc/checkpoint.md is the format's field table; the
offsets below are the same as run/checkpoint.h's CK_OFF_*.

The model: nn.Sequential(Linear(s0, s1), act, Linear(s1, s2), act, ..., Linear(s{L-1}, sL)): the
hidden activation after every layer but the last, whose outputs are the logits. The flat buffer
holds W0 b0 W1 b1 ..., each W (out, in) row-major: exactly nn.Linear's weight, no transposes.
The input is a picture's bytes in the dataset's order (IDX: rows x cols; CIFAR-10: RRR..GGG..BBB..)
times the checkpoint's scale (1/255) plus its offset (0).

--eval DIR reads the test set of an MNIST-format directory (t10k-images-idx3-ubyte and
t10k-labels-idx1-ubyte, raw or .gz) or of CIFAR-10's binary version (test_batch.bin), and prints
    test accuracy 86.12% (8612 of 10000) | test loss 0.3871 | PyTorch on cpu
which should be the number of correct predictions the C trainers print for the same checkpoint
(tests/test_checkpoint.c checks that for the numpy path). Needs numpy; PyTorch except with --numpy.
"""
import argparse
import gzip
import os
import struct
import sys
import zlib

MAGIC = b"MLPCUCKP"
VERSIONS = {1: 12608, 2: 12624}  # the format versions read, and each one's header size
HEADER_BYTES = 12624             # the newest's (version 2 adds -H and its seed after the class names)
MAX_LAYERS, MAX_WIDTH, MAX_CLASSES, CLASS_NAME_LEN = 16, 65536, 256, 48
ACTS = ["sigmoid", "relu", "tanh"]
KINDS = {1: "IDX", 2: "CIFAR-10", 3: "image folder"}

# (offset, struct format, name): the header's fields, as in doc/checkpoint.md
FIELDS = [
    (0, "8s", "magic"), (8, "<I", "version"), (12, "<I", "header_bytes"), (16, "<Q", "file_bytes"),
    (24, "<Q", "num_params"), (32, "<I", "L"), (36, "<I", "act"), (40, "<17I", "sizes"),
    (108, "<I", "data_kind"), (112, "<I", "channels"), (116, "<I", "rows"), (120, "<I", "cols"),
    (124, "<I", "planar"), (128, "<I", "num_classes"), (132, "<f", "input_scale"), (136, "<f", "input_offset"),
    (140, "<I", "train_n"), (144, "64s", "dataset_name"), (208, "32s", "writer"),
    (240, "<I", "batch"), (244, "<f", "lr"), (248, "<f", "momentum"), (252, "<f", "weight_decay"),
    (256, "<Q", "seed"), (264, "<I", "max_steps"), (268, "<I", "epochs"), (272, "<I", "epochs_done"),
    (276, "<I", "step_in_epoch"), (280, "<Q", "steps_total"), (288, "<4Q", "rng"),
    (320, "%ds" % (MAX_CLASSES * CLASS_NAME_LEN), "class_names"),
]


def fail(msg):
    print("error: %s" % msg, file=sys.stderr)
    sys.exit(1)


def cstr(b):
    return b.split(b"\0", 1)[0].decode("utf-8", "replace")


def read_checkpoint(path):
    """The header as a dict and the raw bytes; every check of the C reader, in the same order."""
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError as e:
        fail("%s: cannot open the checkpoint: %s" % (path, e.strerror))
    n = len(buf)
    if buf[:8] != MAGIC:
        if n < 8 and MAGIC.startswith(buf) and n > 0:
            fail("%s: truncated: the file has %d bytes, a checkpoint's header alone has %d" % (path, n, HEADER_BYTES))
        fail("%s: not an mlp.cu checkpoint: it starts with %r, a checkpoint with %r" % (path, buf[:8], MAGIC))
    if n < 12:
        fail("%s: truncated: the file has %d bytes, a checkpoint's header alone has %d" % (path, n, HEADER_BYTES))
    version = struct.unpack_from("<I", buf, 8)[0]
    crc_ok = n >= 16 and zlib.crc32(buf[: n - 4]) & 0xFFFFFFFF == struct.unpack_from("<I", buf, n - 4)[0]
    if version not in VERSIONS:  # the CRC-32 first: a damaged version field is damage, not a newer file
        if crc_ok:
            fail("%s: checkpoint format version %d; this script reads versions 1 to 2" % (path, version))
        fail("%s: corrupt: its CRC-32 (the last 4 bytes) does not match, and its version field reads %d" % (path, version))
    header_bytes = VERSIONS[version]
    if n < header_bytes:
        fail("%s: truncated: the file has %d bytes, a checkpoint's header alone has %d" % (path, n, header_bytes))
    h = {name: struct.unpack_from(fmt, buf, off) for off, fmt, name in FIELDS}
    h = {k: (v if k in ("sizes", "rng") else v[0]) for k, v in h.items()}
    L = h["L"]
    layout_ok = h["header_bytes"] == header_bytes and 1 <= L <= MAX_LAYERS and h["act"] <= 2
    sizes = list(h["sizes"][: L + 1]) if layout_ok else []
    layout_ok = layout_ok and all(1 <= s <= MAX_WIDTH for s in sizes) and not any(h["sizes"][L + 1 :])
    if layout_ok:
        want = sum(sizes[l + 1] * sizes[l] + sizes[l + 1] for l in range(L))
        total = header_bytes + 8 * want + 4
        layout_ok = h["num_params"] == want and h["file_bytes"] == total
    if layout_ok and n < total:
        fail("%s: truncated: the file has %d of the %d bytes its header describes" % (path, n, total))
    if layout_ok and n > total:
        fail("%s: %d unexpected bytes after the end of the checkpoint (%d bytes)" % (path, n - total, total))
    crc, stored = zlib.crc32(buf[: n - 4]) & 0xFFFFFFFF, struct.unpack_from("<I", buf, n - 4)[0]
    if crc != stored:
        fail("%s: corrupt: CRC-32 of its first %d bytes is 0x%08x, expected 0x%08x (its last 4 bytes)"
             % (path, n - 4, crc, stored))
    if not layout_ok:
        fail("%s: impossible header: layer sizes, parameter count and file size disagree" % path)
    h["sizes"] = sizes
    h["dataset_name"], h["writer"] = cstr(h["dataset_name"]), cstr(h["writer"])
    raw = h["class_names"]
    h["class_names"] = [cstr(raw[c * CLASS_NAME_LEN : (c + 1) * CLASS_NAME_LEN]) for c in range(h["num_classes"])]
    if h["num_classes"] != sizes[-1] or h["channels"] * h["rows"] * h["cols"] != sizes[0]:
        fail("%s: impossible header: the data's shape or classes do not fit the layer sizes" % path)
    h["header_bytes"], h["path"] = header_bytes, path
    h["holdout"] = struct.unpack_from("<f", buf, 12608)[0] if version >= 2 else None  # -H (None: not recorded)
    return h, buf


def tensors(h, buf):
    """[(W, b), ...] as numpy float32 arrays, W (out, in); and the momentum buffer, flat."""
    import numpy as np

    P = h["num_params"]
    head = h["header_bytes"]
    flat = np.frombuffer(buf, dtype="<f4", count=P, offset=head)
    mbuf = np.frombuffer(buf, dtype="<f4", count=P, offset=head + 4 * P)
    if not (np.isfinite(flat).all() and np.isfinite(mbuf).all()):
        fail("%s: a parameter or momentum value is not finite: a checkpoint holds finite numbers only" % h["path"])
    layers, off, s = [], 0, h["sizes"]
    for l in range(h["L"]):
        W = flat[off : off + s[l + 1] * s[l]].reshape(s[l + 1], s[l])
        off += s[l + 1] * s[l]
        b = flat[off : off + s[l + 1]]
        off += s[l + 1]
        layers.append((W, b))
    return layers, mbuf


def to_pytorch(h, layers):
    import torch
    from torch import nn

    act = {"sigmoid": nn.Sigmoid, "relu": nn.ReLU, "tanh": nn.Tanh}[ACTS[h["act"]]]
    mods = []
    for l, (W, b) in enumerate(layers):
        lin = nn.Linear(W.shape[1], W.shape[0])
        with torch.no_grad():
            lin.weight.copy_(torch.from_numpy(W.copy()))
            lin.bias.copy_(torch.from_numpy(b.copy()))
        mods.append(lin)
        if l < len(layers) - 1:
            mods.append(act())
    return nn.Sequential(*mods)


# ----------------------------------------------------------------------------------------------
# test sets


def open_maybe_gz(d, name):
    for p, opener in ((os.path.join(d, name), open), (os.path.join(d, name + ".gz"), gzip.open)):
        if os.path.isfile(p):
            with opener(p, "rb") as f:
                return p, f.read()
    return None, None


def read_idx(d, name, ndims):
    p, data = open_maybe_gz(d, name)
    if p is None:
        fail("%s: no %s or %s.gz" % (d, name, name))
    head = 4 + 4 * ndims
    if len(data) < head or struct.unpack_from(">I", data, 0)[0] != 0x800 + ndims:
        fail("%s: not an IDX file of %d dimensions" % (p, ndims))
    dims = struct.unpack_from(">%dI" % ndims, data, 4)
    count = 1
    for x in dims:
        count *= x
    if len(data) != head + count:
        fail("%s: %d bytes of data, its header promises %d" % (p, len(data) - head, count))
    return dims, data[head:]


def load_test_set(d, h):
    """(images (n, D) uint8 in the dataset's byte order, labels (n,)) of DIR's test set."""
    import numpy as np

    if os.path.isfile(os.path.join(d, "test_batch.bin")):  # CIFAR-10: records of 1 label + 3072 bytes (planar)
        with open(os.path.join(d, "test_batch.bin"), "rb") as f:
            raw = np.frombuffer(f.read(), dtype=np.uint8)
        if raw.size % 3073:
            fail("%s/test_batch.bin: %d bytes is not a whole number of 3073-byte records" % (d, raw.size))
        rec = raw.reshape(-1, 3073)
        shape, images, labels = (3, 32, 32), rec[:, 1:], rec[:, 0]
    else:
        idims, ibytes = read_idx(d, "t10k-images-idx3-ubyte", 3)
        ldims, lbytes = read_idx(d, "t10k-labels-idx1-ubyte", 1)
        if idims[0] != ldims[0]:
            fail("%s: %d test images but %d labels" % (d, idims[0], ldims[0]))
        shape = (1, idims[1], idims[2])
        images = np.frombuffer(ibytes, dtype=np.uint8).reshape(idims[0], -1)
        labels = np.frombuffer(lbytes, dtype=np.uint8)
    if shape != (h["channels"], h["rows"], h["cols"]):
        fail("%s: the test images are %dx%dx%d but the model takes %dx%dx%d" % ((d,) + shape + (
            h["channels"], h["rows"], h["cols"])))
    if labels.size and int(labels.max()) >= h["num_classes"]:
        fail("%s: label %d is not one of the model's %d classes" % (d, int(labels.max()), h["num_classes"]))
    return images, labels


def inputs(h, images):
    """pixel * scale + offset, in float32. The trainers divide by 255 (pixel / 255.0f), which can
    differ from pixel * (1/255) in the last bit: when 1/scale is a whole number, divide by it too."""
    import numpy as np

    x = images.astype(np.float32)
    inv = 1.0 / h["input_scale"]
    if abs(inv - round(inv)) < 1e-3:
        x = x / np.float32(round(inv))
    else:
        x = x * np.float32(h["input_scale"])
    return x + np.float32(h["input_offset"])


def numpy_logits(h, layers, x):
    """The forward pass in numpy float32, the twin of model_forward_cpu."""
    import numpy as np

    act = ACTS[h["act"]]
    for l, (W, b) in enumerate(layers):
        x = x @ W.T + b
        if l < len(layers) - 1:  # as the C code: exp and tanh in double, the result rounded to float
            if act == "sigmoid":
                x = (1 / (1 + np.exp(-x.astype(np.float64)))).astype(np.float32)
            elif act == "relu":
                x = np.maximum(x, np.float32(0))
            else:
                x = np.tanh(x.astype(np.float64)).astype(np.float32)
    return x


def report(logits, labels, how):
    """accuracy and mean cross-entropy (in float64) of float32 logits"""
    import numpy as np

    z = logits.astype(np.float64)
    top = z.max(axis=1, keepdims=True)
    lse = np.log(np.exp(z - top).sum(axis=1)) + top[:, 0]
    loss = float(np.mean(lse - z[np.arange(len(labels)), labels]))
    correct = int((logits.argmax(axis=1) == labels).sum())
    n = len(labels)
    print("test accuracy %.2f%% (%d of %d) | test loss %.4f | %s" % (100.0 * correct / n, correct, n, loss, how))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("checkpoint")
    ap.add_argument("--eval", metavar="DIR", help="evaluate on DIR's test set (MNIST-format IDX or CIFAR-10 binary)")
    ap.add_argument("--numpy", action="store_true", help="run the forward pass in numpy (no PyTorch needed)")
    ap.add_argument("--save", metavar="FILE", help="torch.save the nn.Sequential and the checkpoint's metadata")
    ap.add_argument("--device", default=None, help="PyTorch device (default: cuda when there is one)")
    args = ap.parse_args()

    h, buf = read_checkpoint(args.checkpoint)
    print("%s: %s model %s (%d parameters), %s, trained on %s (%s, %dx%dx%d, %d classes) by %s: "
          "%d of %d epochs done%s" % (
              args.checkpoint, "MLP", ",".join(map(str, h["sizes"])), h["num_params"], ACTS[h["act"]],
              h["dataset_name"], KINDS.get(h["data_kind"], "?"), h["channels"], h["rows"], h["cols"],
              h["num_classes"], h["writer"], h["epochs_done"], h["epochs"],
              " and %d steps" % h["step_in_epoch"] if h["step_in_epoch"] else ""))
    try:
        import numpy as np  # noqa: F401
    except ImportError:
        fail("numpy is not installed ---> try: pip install numpy")
    layers, _ = tensors(h, buf)

    if args.numpy:
        if args.save:
            fail("--save needs PyTorch; leave out --numpy")
        if args.eval:
            images, labels = load_test_set(args.eval, h)
            report(numpy_logits(h, layers, inputs(h, images)), labels, "numpy forward pass")
        return

    try:
        import torch
    except ImportError:
        fail("PyTorch is not installed ---> try: pip install torch, or --numpy for the numpy forward pass")
    model = to_pytorch(h, layers)
    print(model)
    if args.save:
        meta = {k: h[k] for k in ("sizes", "act", "channels", "rows", "cols", "planar", "input_scale", "input_offset",
                                  "dataset_name", "class_names", "epochs_done")}
        meta["act"] = ACTS[h["act"]]
        torch.save({"model": model.state_dict(), "meta": meta}, args.save)
        print("saved to %s (the state_dict under 'model', the checkpoint's metadata under 'meta')" % args.save)
    if args.eval:
        device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
        torch.backends.cuda.matmul.allow_tf32 = False
        images, labels = load_test_set(args.eval, h)
        x = torch.from_numpy(inputs(h, images)).to(device)
        model = model.to(device).eval()
        with torch.no_grad():
            logits = torch.cat([model(x[i : i + 4096]) for i in range(0, len(x), 4096)]).cpu().numpy()
        report(logits, labels, "PyTorch on %s" % device)


if __name__ == "__main__":
    main()
