#!/usr/bin/env python3
"""
tests/export_check.py: the other side of tests/test_export.c, with the real libraries
(safetensors, onnx, onnxruntime from PyPI; PyTorch where it is installed). The C test writes the
files and compares the numbers this script writes back, so every check is counted in one place.

    export_check.py check DIR       DIR/model.safetensors and DIR/model.onnx on DIR/pixels.u8 (N, D):
                                    writes DIR/st_logits.f32 (numpy's forward pass from the safetensors
                                    tensors and metadata), DIR/ort_logits.f32, DIR/ort_probs.f32
                                    (ONNX Runtime); onnx.checker.check_model must pass
    export_check.py write-pt DIR    writes DIR/pt.safetensors as PyTorch's save_file would (its names
                                    shifted by an nn.Flatten: 1.weight, 1.bias, 3.weight ...; metadata
                                    activation and classes), and DIR/pt16.safetensors in float16 with
                                    no metadata; safetensors.torch when PyTorch is here, else .numpy
    export_check.py torch DIR       (PyTorch) DIR/model.safetensors into nn.Sequential with
                                    load_state_dict(strict=True): writes DIR/torch_logits.f32; then
                                    trains an nn.Sequential on DIR/train.u8, DIR/train_labels.u8 and
                                    saves it as DIR/torch.safetensors, its test predictions in
                                    DIR/torch_pred.u8
    export_check.py snippet DIR NAME  runs the snippet NAME ("pytorch" or "onnx") of doc/checkpoint.md
                                    in DIR, then writes what it computed (DIR/snippet_*.f32)

Prints one line per step; any exception is a failure (exit 1), which the C test reports.
"""
import json
import os
import re
import sys

import numpy as np

ACTS = {"sigmoid": lambda z: 1 / (1 + np.exp(-z)), "relu": lambda z: np.maximum(z, 0), "tanh": np.tanh}
ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def pixels(d):
    meta = json.load(open(os.path.join(d, "shape.json")))
    x = np.fromfile(os.path.join(d, "pixels.u8"), np.uint8).reshape(meta["n"], meta["d"])
    return x.astype(np.float32)


def layers_of(tensors):
    """The Linear layers' (weight, bias) in increasing index order, whatever the indices."""
    idx = sorted({int(k.split(".")[0]) for k in tensors if not k.startswith("momentum.")})
    return [(tensors["%d.weight" % i], tensors["%d.bias" % i]) for i in idx]


def check(d):
    from safetensors import safe_open
    from safetensors.numpy import load_file
    import onnx
    import onnxruntime

    path = os.path.join(d, "model.safetensors")
    tensors = load_file(path)
    with safe_open(path, "np") as f:
        meta = f.metadata()
    assert all(v.dtype == np.float32 for v in tensors.values()), "tensors are not all float32"
    sizes = [int(s) for s in meta["sizes"].split(",")]
    layers = layers_of(tensors)
    assert [w.shape for w, _ in layers] == [(b, a) for a, b in zip(sizes, sizes[1:])], "shapes against sizes"
    names = ["%d.%s" % (2 * l, k) for l in range(len(layers)) for k in ("weight", "bias")]
    assert sorted(k for k in tensors if not k.startswith("momentum.")) == sorted(names), "names: %s" % list(tensors)
    classes = json.loads(meta["classes"])
    assert len(classes) == sizes[-1], "classes: %r" % classes
    c, h, w, layout = meta["input"].split(",")
    assert int(c) * int(h) * int(w) == sizes[0] and layout in ("planar", "interleaved"), meta["input"]
    x = pixels(d) * np.float32(meta["scale"]) + np.float32(meta["offset"])
    for l, (wt, b) in enumerate(layers):
        x = x @ wt.T + b
        if l < len(layers) - 1:
            x = ACTS[meta["activation"]](x)
    x.astype(np.float32).tofile(os.path.join(d, "st_logits.f32"))
    print("safetensors: %d tensors (%s), metadata %s" % (len(tensors), ", ".join(sorted(tensors)[:4]) + " ...",
                                                         ", ".join(sorted(meta))))

    opath = os.path.join(d, "model.onnx")
    model = onnx.load(opath)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version == 8 and model.opset_import[0].version == 17, "IR %d opset %d" % (
        model.ir_version, model.opset_import[0].version)
    props = {p.key: p.value for p in model.metadata_props}
    assert json.loads(props["classes"]) == classes, "the ONNX classes"
    session = onnxruntime.InferenceSession(opath, providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["pixels"] and session.get_inputs()[0].shape[0] == "N"
    assert [o.name for o in session.get_outputs()] == ["probabilities", "logits"]
    probs, logits = session.run(["probabilities", "logits"], {"pixels": pixels(d)})
    logits.astype(np.float32).tofile(os.path.join(d, "ort_logits.f32"))
    probs.astype(np.float32).tofile(os.path.join(d, "ort_probs.f32"))
    print("onnx: check_model passed; ONNX Runtime %s ran %d rows; ops %s" % (
        onnxruntime.__version__, logits.shape[0], " ".join(n.op_type for n in model.graph.node)))


def have_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


def write_pt(d):
    from safetensors.numpy import load_file
    src = load_file(os.path.join(d, "model.safetensors"))
    with open(os.path.join(d, "shape.json")) as f:
        info = json.load(f)
    layers = layers_of(src)
    shifted = {}
    for l, (w, b) in enumerate(layers):  # nn.Sequential(nn.Flatten(), nn.Linear, act, nn.Linear, ...)
        shifted["%d.weight" % (2 * l + 1)] = w
        shifted["%d.bias" % (2 * l + 1)] = b
    meta = {"format": "pt", "activation": info["activation"], "classes": json.dumps(info["classes"])}
    if have_torch():
        import torch
        from safetensors.torch import save_file
        save_file({k: torch.from_numpy(v.copy()) for k, v in shifted.items()}, os.path.join(d, "pt.safetensors"), metadata=meta)
        save_file({k: torch.from_numpy(v.copy()).half() for k, v in shifted.items()}, os.path.join(d, "pt16.safetensors"))
        print("write-pt: safetensors.torch.save_file")
    else:
        from safetensors.numpy import save_file
        save_file(shifted, os.path.join(d, "pt.safetensors"), metadata=meta)
        save_file({k: v.astype(np.float16) for k, v in shifted.items()}, os.path.join(d, "pt16.safetensors"))
        print("write-pt: safetensors.numpy.save_file (no PyTorch here)")


def torch_side(d):
    import torch
    from safetensors.torch import load_file, save_file
    from safetensors import safe_open
    path = os.path.join(d, "model.safetensors")
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    sizes = [int(s) for s in meta["sizes"].split(",")]
    act = {"sigmoid": torch.nn.Sigmoid, "relu": torch.nn.ReLU, "tanh": torch.nn.Tanh}[meta["activation"]]
    mods = []
    for a, b in zip(sizes, sizes[1:]):
        mods += [torch.nn.Linear(a, b), act()]
    model = torch.nn.Sequential(*mods[:-1])
    state = {k: v for k, v in load_file(path).items() if not k.startswith("momentum.")}
    model.load_state_dict(state, strict=True)
    x = torch.from_numpy(pixels(d)) * float(meta["scale"]) + float(meta["offset"])
    with torch.no_grad():
        model(x).numpy().astype(np.float32).tofile(os.path.join(d, "torch_logits.f32"))
    print("torch: load_state_dict(strict=True) of %d tensors into %s" % (len(state), model))

    # a model trained here, in PyTorch, for the trainer to evaluate and fine-tune
    info = json.load(open(os.path.join(d, "shape.json")))
    xt = torch.from_numpy(np.fromfile(os.path.join(d, "train.u8"), np.uint8).reshape(-1, info["d"]).astype(np.float32) / 255)
    yt = torch.from_numpy(np.fromfile(os.path.join(d, "train_labels.u8"), np.uint8).astype(np.int64))
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(info["d"], 12), torch.nn.Tanh(),
                              torch.nn.Linear(12, info["classes_n"]))
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    for epoch in range(5):
        for i in range(0, len(xt), 10):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(net(xt[i:i + 10]), yt[i:i + 10]).backward()
            opt.step()
    save_file(net.state_dict(), os.path.join(d, "torch.safetensors"),
              metadata={"format": "pt", "activation": "tanh"})
    with torch.no_grad():
        pred = net(torch.from_numpy(pixels(d)) / 255).argmax(1).numpy().astype(np.uint8)
    pred.tofile(os.path.join(d, "torch_pred.u8"))
    print("torch: trained %s, saved torch.safetensors" % net)


def snippet(d, name):
    """The fenced block of doc/checkpoint.md that follows the line naming it, run in d."""
    text = open(os.path.join(ROOT, "doc", "checkpoint.md"), encoding="utf-8").read()
    marker = {"pytorch": "<!-- snippet: pytorch -->", "onnx": "<!-- snippet: onnx -->"}[name]
    m = re.search(re.escape(marker) + r"\s*```python\n(.*?)```", text, re.S)
    assert m, "doc/checkpoint.md has no %s snippet" % name
    code = m.group(1)
    print("snippet %s: %d lines" % (name, code.count("\n")))
    os.chdir(d)
    scope = {}
    exec(compile(code, "doc/checkpoint.md (%s snippet)" % name, "exec"), scope)
    if name == "onnx":
        scope["logits"].astype(np.float32).tofile("snippet_logits.f32")
    else:
        import torch
        x = torch.from_numpy(pixels(d)) * float(scope["meta"]["scale"]) + float(scope["meta"]["offset"])
        with torch.no_grad():
            scope["model"](x).numpy().astype(np.float32).tofile("snippet_logits.f32")


if __name__ == "__main__":
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "snippet":
        snippet(d, sys.argv[3])
    else:
        {"check": check, "write-pt": write_pt, "torch": torch_side}[cmd](d)
