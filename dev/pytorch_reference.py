#!/usr/bin/env python3
"""
pytorch_reference.py -- the independent reference for mlp.cu's math.

Builds the same MLP as train_mlp_cpu.c / train_mlp.cu in PyTorch (float32, TF32 off), runs a
few SGD steps on ONE fixed batch and writes every tensor of every step to a small binary file,
one file per hidden activation:

    python3 dev/pytorch_reference.py --out-dir tests/ref        # writes tests/ref/ref_{sigmoid,relu,tanh}.bin
    python3 dev/pytorch_reference.py --check tests/ref/*.bin     # read back, verify, summarise
    python3 dev/pytorch_reference.py --numpy --out-dir /tmp/r  # no torch: numpy twin writes the files

The C tests (test_mlp, the CPU tests) read these files and compare their own forward, backward
and SGD step with them, so this docstring is the format's specification.

The model (same math as the C trainers)
---------------------------------------
Layer sizes s0, s1, ..., sL (default 13,11,7,5: odd, no multiple of any tile). For layer
l = 0..L-1:  z_l = a_l . W_l^T + b_l  with W_l of shape (s_{l+1}, s_l) row-major (nn.Linear),
a_0 = inputs, a_{l+1} = act(z_l) for every hidden layer, and NO activation on the last layer:
z_{L-1} are the logits. loss = mean over the batch of cross-entropy(softmax(logits), label)
(F.cross_entropy). act: 0 sigmoid, 1 relu, 2 tanh. The relu derivative at exactly 0 is 0 (PyTorch).
Optimizer: torch.optim.SGD(lr, momentum, weight_decay), dampening 0, nesterov False:
    g   = grad + weight_decay * p
    buf = g                         on the first step (same as buf = 0 then the rule below)
    buf = momentum * buf + g        afterwards
    p   = p - lr * buf
The file's grads are p.grad after backward(): WITHOUT the weight-decay term.

Flat parameter layout (as in the C code): for l = 0..L-1 in order, W_l (s_{l+1} x s_l floats,
row-major, W_l[o][i] at o*s_l + i) then b_l (s_{l+1} floats).
nparams = sum over l of s_{l+1}*s_l + s_{l+1}. Gradients use the same layout.

Binary format (version 1): little-endian, no padding, fields back to back in this order
---------------------------------------------------------------------------------------
    int32   magic = 0x4D4C5052 (bytes on disk: 52 50 4C 4D)
    int32   version = 1
    int32   act                      0 sigmoid, 1 relu, 2 tanh
    int32   L                        number of Linear layers (>= 1)
    int32   sizes[L+1]               s0 .. sL
    int32   B                        batch size
    int32   nsteps
    float32 lr
    float32 momentum
    float32 weight_decay
    int32   nparams                  total floats in the flat parameter buffer
    float32 inputs[B*s0]             row-major (B, s0), values in [0, 1)
    int32   labels[B]                in [0, sL)
    float32 params0[nparams]         the initial weights (flat layout above)
    for each step t = 0 .. nsteps-1:
        float32 logits[B*sL]         (B, sL) row-major, forward with the params BEFORE step t
        float32 loss                 mean cross-entropy of those logits
        float32 grads[nparams]       gradient of that loss (no weight decay), flat layout
        float32 params[nparams]      the params AFTER optimizer step t
The file ends there. The header is 10 + (L+1) four-byte words (magic, version, act, L,
sizes[L+1], B, nsteps, lr, momentum, weight_decay, nparams), so the length is exactly
    4*(10 + L+1) + 4*(B*s0 + B + nparams) + nsteps * 4*(B*sL + 1 + 2*nparams)  bytes.
With the defaults (13,11,7,5, B 6, 4 steps): nparams 278, files of 10,896 bytes.
inputs start at byte 4*(10 + L+1), i.e. byte 56 for the defaults.

How it is made
--------------
Inputs (uniform in [0,1), like pixels), labels (uniform in [0, sL)) and the initial
weights (U(-1/sqrt(in), 1/sqrt(in)) for W and b, nn.Linear's distribution) come from
numpy's PCG64 generator seeded with --seed, so the torch path and the numpy twin start
from the very same bits; torch.manual_seed is set as well for anything torch draws.
The same inputs and initial weights are used for all three activations.
The run is made three times: torch float32 (what goes in the file, unless --source says
otherwise), torch float64, and a hand-written numpy float64 twin (forward, backward and
SGD written out, no autograd). Torch float64 is compared with the numpy twin and torch
float32 with torch float64, tensor by tensor, and the script exits non-zero if either pair
differs by more than --tol (absolute, default 1e-5). Every file written is then read back
with --check's reader.
--numpy runs without torch: the numpy twin in float32 writes the files (to test the writer
and reader; the committed files come from torch), checked against the twin in float64.
--check FILE... reads files back, verifies every size and the exact length, prints a
summary and recomputes the whole trajectory with the float64 numpy twin from the file's own
inputs and params0 (exit non-zero on any mismatch beyond --tol).
"""

import argparse
import os
import struct
import sys

import numpy as np

MAGIC = 0x4D4C5052  # "MLPR" read as a little-endian int32 from the bytes 'R','P','L','M'
VERSION = 1
ACTS = {"sigmoid": 0, "relu": 1, "tanh": 2}
ACT_NAMES = {v: k for k, v in ACTS.items()}

# -----------------------------------------------------------------------------
# flat parameter layout


def layer_offsets(sizes):
    """[(w_off, w_shape, b_off, b_len)] for each layer of the flat buffer."""
    out, off = [], 0
    for l in range(len(sizes) - 1):
        fan_in, fan_out = sizes[l], sizes[l + 1]
        w_off = off
        off += fan_out * fan_in
        b_off = off
        off += fan_out
        out.append((w_off, (fan_out, fan_in), b_off, fan_out))
    return out


def num_params(sizes):
    return sum(sizes[l + 1] * sizes[l] + sizes[l + 1] for l in range(len(sizes) - 1))


def unflatten(flat, sizes):
    """flat (nparams,) -> [(W (out,in), b (out,))] views."""
    return [(flat[wo:wo + ws[0] * ws[1]].reshape(ws), flat[bo:bo + bl])
            for wo, ws, bo, bl in layer_offsets(sizes)]


def make_problem(sizes, B, seed):
    """inputs (B, s0) float32 in [0,1), labels (B,) int32, params0 (nparams,) float32
    (drawn in float64, rounded to float32): every path starts from the same float32 values."""
    rng = np.random.default_rng(seed)
    x = rng.random((B, sizes[0]), dtype=np.float32)
    y = rng.integers(0, sizes[-1], size=B).astype(np.int32)
    parts = []
    for l in range(len(sizes) - 1):
        bound = 1.0 / np.sqrt(sizes[l])
        parts.append(rng.uniform(-bound, bound, size=sizes[l + 1] * sizes[l]))  # W_l
        parts.append(rng.uniform(-bound, bound, size=sizes[l + 1]))             # b_l
    p0 = np.concatenate(parts).astype(np.float32)
    return x, y, p0

# -----------------------------------------------------------------------------
# the numpy twin: forward, backward and SGD written out by hand (no autograd)


def act_forward(z, act):
    if act == 0:
        return 1.0 / (1.0 + np.exp(-z))
    if act == 1:
        return np.maximum(z, 0)
    if act == 2:
        return np.tanh(z)
    raise ValueError(act)


def act_backward(dout, out, act):
    """gradient through the activation, written with its OUTPUT as PyTorch does."""
    if act == 0:
        return dout * out * (1 - out)
    if act == 1:
        return dout * (out > 0)
    if act == 2:
        return dout * (1 - out * out)
    raise ValueError(act)


def numpy_forward_backward(x, y, flat, sizes, act):
    """x (B, s0), y (B,), flat (nparams,) -> logits (B, sL), loss, grads (nparams,), hidden z's.
    Computes in flat.dtype."""
    dt = flat.dtype
    layers = unflatten(flat, sizes)
    L = len(layers)
    acts = [x.astype(dt)]         # a_0 .. a_{L-1}: the inputs of each layer
    zs = []
    for l, (W, b) in enumerate(layers):
        z = acts[-1] @ W.T + b    # (B, out)
        zs.append(z)
        if l < L - 1:
            acts.append(act_forward(z, act).astype(dt))
    logits = zs[-1]
    B = x.shape[0]
    # softmax + cross-entropy, numerically stable
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    s = e.sum(axis=1, keepdims=True)
    logp = logits - m - np.log(s)
    loss = -logp[np.arange(B), y].mean()
    # dloss/dlogits = (softmax - onehot) / B
    dz = e / s
    dz[np.arange(B), y] -= 1
    dz = (dz / B).astype(dt)
    grads = np.zeros_like(flat)
    offs = layer_offsets(sizes)
    for l in range(L - 1, -1, -1):
        W, _ = layers[l]
        wo, ws, bo, bl = offs[l]
        grads[wo:wo + ws[0] * ws[1]] = (dz.T @ acts[l]).reshape(-1)   # dweight (out, in)
        grads[bo:bo + bl] = dz.sum(axis=0)                            # dbias (out,)
        if l > 0:
            dinp = dz @ W                                             # (B, in)
            dz = act_backward(dinp, acts[l], act).astype(dt)
    return logits, dt.type(loss), grads, zs[:-1]


def run_numpy(x, y, p0, sizes, act, lr, momentum, wd, nsteps, dtype):
    """The whole trajectory in numpy with the given dtype. Returns (steps, hidden_zs) where
    steps is a list of (logits, loss, grads, params_after)."""
    p = p0.astype(dtype).copy()
    buf = None
    steps, zs_all = [], []
    lr, momentum, wd = dtype(lr), dtype(momentum), dtype(wd)
    for _ in range(nsteps):
        logits, loss, grads, zs = numpy_forward_backward(x, y, p, sizes, act)
        zs_all.extend(zs)
        g = grads + wd * p
        buf = g.copy() if buf is None else momentum * buf + g
        p = p - lr * buf
        steps.append((logits.copy(), loss, grads.copy(), p.copy()))
    return steps, zs_all

# -----------------------------------------------------------------------------
# the torch path


def set_tf32(torch, enabled):
    """Set TF32 for matmuls and cuDNN, through both the legacy flags and (torch >= 2.9) the
    fp32_precision API, so the two never disagree (inductor checks that they agree)."""
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.backends.cuda.matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled
        prec = "tf32" if enabled else "ieee"
        for obj in (getattr(torch.backends.cuda, "matmul", None),
                    getattr(getattr(torch.backends, "cudnn", None), "conv", None)):
            if obj is not None and hasattr(obj, "fp32_precision"):
                try:
                    obj.fp32_precision = prec
                except Exception:
                    pass


def run_torch(x, y, p0, sizes, act, lr, momentum, wd, nsteps, dtype_name, device, seed):
    """The trajectory with nn.Linear, autograd and torch.optim.SGD.
    Returns a list of (logits, loss, grads, params_after) as float64 numpy arrays."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    dtype = {"float32": torch.float32, "float64": torch.float64}[dtype_name]
    torch.manual_seed(seed)  # nothing below draws from it (weights are copied in), but be explicit
    set_tf32(torch, False)
    layers = []
    for l in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[l], sizes[l + 1]))
        if l < len(sizes) - 2:
            layers.append({0: nn.Sigmoid, 1: nn.ReLU, 2: nn.Tanh}[act]())
    model = nn.Sequential(*layers).to(device=device, dtype=dtype)
    linears = [m for m in model if isinstance(m, nn.Linear)]
    p0_t = torch.from_numpy(p0.astype(np.float64))
    with torch.no_grad():
        for lin, (W, b) in zip(linears, unflatten(p0_t, sizes)):
            lin.weight.copy_(W)
            lin.bias.copy_(b)
    xt = torch.from_numpy(x.astype(np.float64)).to(device=device, dtype=dtype)
    yt = torch.from_numpy(y.astype(np.int64)).to(device=device)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum, weight_decay=wd,
                          dampening=0, nesterov=False)

    def flat(kind):
        parts = []
        for lin in linears:
            for t in (lin.weight, lin.bias):
                t = t.grad if kind == "grad" else t
                parts.append(t.detach().reshape(-1).to("cpu", torch.float64))
        return torch.cat(parts).numpy()

    steps = []
    for _ in range(nsteps):
        opt.zero_grad(set_to_none=True)
        logits = model(xt)
        loss = F.cross_entropy(logits, yt)
        loss.backward()
        out_logits = logits.detach().to("cpu", torch.float64).numpy()
        out_loss = float(loss.item())
        grads = flat("grad")
        opt.step()
        steps.append((out_logits, out_loss, grads, flat("param")))
    return steps

# -----------------------------------------------------------------------------
# writer and reader


def file_size(sizes, B, nsteps):
    L = len(sizes) - 1
    npar = num_params(sizes)
    return 4 * (10 + (L + 1)) + 4 * (B * sizes[0] + B + npar) + nsteps * 4 * (B * sizes[-1] + 1 + 2 * npar)


def write_ref(path, act, sizes, B, lr, momentum, wd, x, y, p0, steps):
    f32 = "<f4"
    L = len(sizes) - 1
    npar = num_params(sizes)
    parts = [struct.pack("<4i", MAGIC, VERSION, act, L),
             struct.pack("<%di" % (L + 1), *sizes),
             struct.pack("<2i", B, len(steps)),
             struct.pack("<3f", lr, momentum, wd),
             struct.pack("<i", npar),
             np.asarray(x, dtype=f32).reshape(-1).tobytes(),
             np.asarray(y, dtype="<i4").reshape(-1).tobytes(),
             np.asarray(p0, dtype=f32).reshape(-1).tobytes()]
    for logits, loss, grads, params in steps:
        assert logits.size == B * sizes[-1] and grads.size == npar and params.size == npar
        parts += [np.asarray(logits, dtype=f32).reshape(-1).tobytes(),
                  np.asarray([loss], dtype=f32).tobytes(),
                  np.asarray(grads, dtype=f32).reshape(-1).tobytes(),
                  np.asarray(params, dtype=f32).reshape(-1).tobytes()]
    data = b"".join(parts)
    assert len(data) == file_size(sizes, B, len(steps)), "writer and format disagree"
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return len(data)


class FormatError(Exception):
    pass


def read_ref(path):
    """Parse a reference file; every size is checked and the length must match exactly.
    Returns a dict with the header fields, x, y, p0 and steps [(logits, loss, grads, params)]."""
    with open(path, "rb") as f:
        data = f.read()
    pos = 0

    def take(fmt_char, count, what):
        nonlocal pos
        n = 4 * count
        if pos + n > len(data):
            raise FormatError("%s: file ends at byte %d while reading %s (needs %d more bytes)"
                              % (path, len(data), what, pos + n - len(data)))
        arr = np.frombuffer(data, dtype="<" + fmt_char + "4", count=count, offset=pos)
        pos += n
        return arr

    magic, version, act, L = (int(v) for v in take("i", 4, "header"))
    if magic != MAGIC:
        raise FormatError("%s: bad magic 0x%08X, expected 0x%08X ('MLPR')" % (path, magic & 0xFFFFFFFF, MAGIC))
    if version != VERSION:
        raise FormatError("%s: version %d, this reader knows version %d" % (path, version, VERSION))
    if act not in ACT_NAMES:
        raise FormatError("%s: activation code %d, expected 0 (sigmoid), 1 (relu) or 2 (tanh)" % (path, act))
    if not 1 <= L <= 64:
        raise FormatError("%s: L = %d layers, expected 1..64" % (path, L))
    sizes = [int(v) for v in take("i", L + 1, "sizes")]
    if any(s <= 0 or s > 1 << 20 for s in sizes):
        raise FormatError("%s: layer sizes %s out of range" % (path, sizes))
    B, nsteps = (int(v) for v in take("i", 2, "B, nsteps"))
    if not (1 <= B <= 1 << 20 and 0 <= nsteps <= 1 << 16):
        raise FormatError("%s: B = %d, nsteps = %d out of range" % (path, B, nsteps))
    lr, momentum, wd = (float(v) for v in take("f", 3, "lr, momentum, weight_decay"))
    npar = int(take("i", 1, "nparams")[0])
    if npar != num_params(sizes):
        raise FormatError("%s: nparams = %d but sizes %s give %d" % (path, npar, sizes, num_params(sizes)))
    expect = file_size(sizes, B, nsteps)
    if len(data) != expect:
        raise FormatError("%s: file is %d bytes, the header says it should be %d" % (path, len(data), expect))
    x = take("f", B * sizes[0], "inputs").reshape(B, sizes[0])
    y = take("i", B, "labels")
    if y.min() < 0 or y.max() >= sizes[-1]:
        raise FormatError("%s: labels out of range [0, %d): %s" % (path, sizes[-1], y.tolist()))
    p0 = take("f", npar, "params0")
    steps = []
    for t in range(nsteps):
        logits = take("f", B * sizes[-1], "logits[%d]" % t).reshape(B, sizes[-1])
        loss = float(take("f", 1, "loss[%d]" % t)[0])
        grads = take("f", npar, "grads[%d]" % t)
        params = take("f", npar, "params[%d]" % t)
        steps.append((logits, loss, grads, params))
    assert pos == len(data)
    return dict(act=act, L=L, sizes=sizes, B=B, nsteps=nsteps, lr=lr, momentum=momentum,
                weight_decay=wd, nparams=npar, x=x, y=y, p0=p0, steps=steps, nbytes=len(data))

# -----------------------------------------------------------------------------
# comparisons


def compare_steps(name_a, a, name_b, b, sizes):
    """Max abs diff per tensor kind between two trajectories. Returns the overall max."""
    worst = 0.0
    rows = []
    for t, (sa, sb) in enumerate(zip(a, b)):
        d = {"logits": np.abs(np.asarray(sa[0], np.float64) - sb[0]).max(),
             "loss": abs(float(sa[1]) - float(sb[1])),
             "grads": np.abs(np.asarray(sa[2], np.float64) - sb[2]).max(),
             "params": np.abs(np.asarray(sa[3], np.float64) - sb[3]).max()}
        worst = max(worst, *d.values())
        rows.append("step %d: " % t + "  ".join("%s %.2e" % kv for kv in d.items()))
    print("  %s vs %s: max abs diff %.3e" % (name_a, name_b, worst))
    for r in rows:
        print("    " + r)
    return worst


def relu_kink_margin(zs):
    """Smallest |z| over the hidden pre-activations: near 0 relu's derivative may flip between
    float32 and float64 and the reference would be fragile."""
    return min(float(np.abs(z).min()) for z in zs) if zs else float("inf")


def check_file(path, tol):
    r = read_ref(path)
    sizes = r["sizes"]
    print("%s: %d bytes, OK format v%d" % (path, r["nbytes"], VERSION))
    print("  act %s (%d), sizes %s, B %d, nsteps %d, lr %g, momentum %g, weight_decay %g, nparams %d"
          % (ACT_NAMES[r["act"]], r["act"], ",".join(map(str, sizes)), r["B"], r["nsteps"],
             r["lr"], r["momentum"], r["weight_decay"], r["nparams"]))
    print("  labels %s, inputs in [%.3f, %.3f], |params0| max %.4f"
          % (r["y"].tolist(), r["x"].min(), r["x"].max(), np.abs(r["p0"]).max()))
    for t, (logits, loss, grads, params) in enumerate(r["steps"]):
        print("  step %d: loss %.6f  |logits| max %.4f  |grad| max %.3e  |grad|_2 %.3e  |params| max %.4f"
              % (t, loss, np.abs(logits).max(), np.abs(grads).max(), np.linalg.norm(grads), np.abs(params).max()))
    twin, zs = run_numpy(r["x"], r["y"], r["p0"].astype(np.float64), sizes, r["act"], r["lr"],
                         r["momentum"], r["weight_decay"], r["nsteps"], np.float64)
    worst = compare_steps("file", r["steps"], "numpy float64 recomputation", twin, sizes)
    ok = worst <= tol
    print("  %s (tolerance %.0e)" % ("OK" if ok else "NOT OK", tol))
    return ok

# -----------------------------------------------------------------------------
# main


def parse_args():
    ap = argparse.ArgumentParser(
        description="Write (or check) the PyTorch reference files tests/ref/ref_<act>.bin "
                    "that the C tests compare against. The format is in this file's docstring.")
    ap.add_argument("--out-dir", default="tests/ref", help="where ref_<act>.bin go (default tests/ref)")
    ap.add_argument("--acts", default="sigmoid,relu,tanh", help="activations, comma separated")
    ap.add_argument("--sizes", default="13,11,7,5", help="layer sizes s0,...,sL (default 13,11,7,5)")
    ap.add_argument("--batch", type=int, default=6, help="batch size B (default 6)")
    ap.add_argument("--steps", type=int, default=4, help="SGD steps on the fixed batch (default 4)")
    ap.add_argument("--lr", type=float, default=0.1, help="learning rate (default 0.1)")
    ap.add_argument("--momentum", type=float, default=0.9, help="SGD momentum (default 0.9)")
    ap.add_argument("--wd", type=float, default=5e-4, help="weight decay (default 5e-4)")
    ap.add_argument("--seed", type=int, default=1337, help="seed for inputs, labels, weights (default 1337)")
    ap.add_argument("--device", default="cpu", help="torch device for the torch runs (default cpu; cuda works)")
    ap.add_argument("--source", choices=["float32", "float64"], default="float32",
                    help="which torch run goes in the file, rounded to float32 (default float32)")
    ap.add_argument("--tol", type=float, default=1e-5, help="max abs difference allowed between runs (default 1e-5)")
    ap.add_argument("--numpy", action="store_true", help="no torch: the numpy twin (float32) writes the files")
    ap.add_argument("--check", nargs="+", metavar="FILE", help="read FILE(s) back, verify and summarise; writes nothing")
    return ap.parse_args()


def main():
    args = parse_args()
    if args.check:
        ok = True
        for path in args.check:
            try:
                ok &= check_file(path, args.tol)
            except (FormatError, OSError) as e:
                print("NOT OK: %s" % e)
                ok = False
        print("all files OK" if ok else "some files NOT OK")
        return 0 if ok else 1

    sizes = [int(s) for s in args.sizes.split(",")]
    acts = [a.strip() for a in args.acts.split(",") if a.strip()]
    for a in acts:
        if a not in ACTS:
            sys.exit("unknown activation %r, expected one of %s" % (a, ", ".join(ACTS)))
    if len(sizes) < 2 or min(sizes) < 1:
        sys.exit("--sizes needs at least two positive sizes, got %r" % args.sizes)
    os.makedirs(args.out_dir, exist_ok=True)
    # the file stores lr/momentum/wd as float32: run every path with exactly those values
    lr, momentum, wd = (float(np.float32(v)) for v in (args.lr, args.momentum, args.wd))
    if not args.numpy:
        try:
            import torch  # noqa: F401
        except ImportError:
            sys.exit("PyTorch is not installed here: run this on the GPU machine, "
                     "or use --numpy to test the writer with the numpy twin")
    x, y, p0 = make_problem(sizes, args.batch, args.seed)
    ok = True
    for name in acts:
        act = ACTS[name]
        path = os.path.join(args.out_dir, "ref_%s.bin" % name)
        print("== %s: sizes %s, B %d, %d steps" % (name, args.sizes, args.batch, args.steps))
        np64, zs = run_numpy(x, y, p0, sizes, act, lr, momentum, wd, args.steps, np.float64)
        if act == 1:
            print("  relu: smallest |z| at a hidden unit %.2e (derivative kink at 0)" % relu_kink_margin(zs))
        if args.numpy:
            np32, _ = run_numpy(x, y, p0, sizes, act, lr, momentum, wd, args.steps, np.float32)
            worst = compare_steps("numpy float32", np32, "numpy float64", np64, sizes)
            steps, source = np32, "numpy float32 (NOT the PyTorch reference: for testing the writer)"
        else:
            t32 = run_torch(x, y, p0, sizes, act, lr, momentum, wd, args.steps, "float32", args.device, args.seed)
            t64 = run_torch(x, y, p0, sizes, act, lr, momentum, wd, args.steps, "float64", args.device, args.seed)
            worst = max(compare_steps("torch float64", t64, "numpy float64", np64, sizes),
                        compare_steps("torch float32", t32, "torch float64", t64, sizes))
            steps = t32 if args.source == "float32" else t64
            source = "torch %s on %s" % (args.source, args.device)
        if worst > args.tol:
            print("  NOT OK: max abs diff %.3e > tolerance %.0e" % (worst, args.tol))
            ok = False
        n = write_ref(path, act, sizes, args.batch, lr, momentum, wd, x, y, p0, steps)
        print("  wrote %s (%d bytes) from %s" % (path, n, source))
        ok &= check_file(path, args.tol)
    print("all OK" if ok else "FAILED: see NOT OK above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
