#!/usr/bin/env python3
"""
bench_pytorch.py -- the PyTorch side of `make bench` (issue 6): trains the same MLPs as
train_mlp on Fashion-MNIST (or MNIST) on one GPU and times every epoch.

    python3 dev/bench_pytorch.py                                  # both configs, the four default modes
    python3 dev/bench_pytorch.py --config small --modes eager --epochs 3 --json /tmp/p.json
    python3 dev/bench_pytorch.py --data .data/fashion-mnist --json dev/out/bench_pytorch.json
    python3 dev/bench_pytorch.py --init torch                     # PyTorch's own init and shuffling
    python3 dev/bench_pytorch.py --config big --modes eager --steps 50   # 50 steps an epoch (like train_mlp -t)

Configs (same settings as the C runs in dev/bench.py):
    small: 784,128,10 sigmoid, batch 64, SGD lr 0.1 momentum 0.9 weight decay 0
    wide:  784,1024,1024,10 relu, batch 256, SGD lr 0.1 momentum 0.9 weight decay 0
Modes:
    eager                    plain PyTorch, FP32 matmuls (TF32 off)
    eager_tf32               plain PyTorch, TF32 tensor-core matmuls
    compile                  torch.compile(forward + loss), compiled optimizer step, FP32
    compile_cudagraphs       the same with mode="reduce-overhead" (CUDA graphs), FP32
    compile_tf32, compile_cudagraphs_tf32   the two compile modes with TF32 (opt-in)
    graph, graph_tf32, graph_bf16   the whole step (gather, forward, loss, backward, fused SGD with
                             momentum) captured once as a CUDA graph and replayed: FP32, TF32, and
                             autocast BF16 (the strongest single-GPU PyTorch; graph_steps)

The data path is the same as the C trainer's: the whole training set on the GPU as float32
pixel/255 (no other normalisation), each epoch a fresh permutation, batches by index,
ceil(N/B) steps with a smaller last batch (nothing dropped); with --steps S, the first S
batches of each epoch's permutation (S*B rows when that is less than N), as train_mlp -t S does.
Where the weights and the order come from (--init):
    mlpcu (default)  mlp.cu's own, for the same --seed as train_mlp -s: the initial weights
                     and biases of train_mlp (Philox, common/rng.h) and its epoch permutations
                     (xoshiro256**), computed bit for bit in numpy by dev/mlpcu_init.py. So a
                     PyTorch run and train_mlp do the same computation up to float rounding, and
                     their test accuracies differ by rounding, not by luck. Every epoch's
                     permutation is computed on the host before the first epoch and uploaded
                     before that epoch's clock starts (train_mlp also uploads its permutation
                     before it starts timing the epoch).
    torch            torch.manual_seed(--seed) for nn.Linear's default init, and each epoch
                     a torch.randperm from a seeded generator, drawn inside the timed epoch.
Every mode starts from the same initial weights and sees the same permutations. Epoch time
is wall clock around the epoch with torch.cuda.synchronize() on both sides (the training
steps only; the test set is evaluated after the last epoch).
The first --warmup epochs (default 1: compilation, CUDA-graph capture, cuBLAS heuristics)
are not counted; the reported time is the median of the rest.
FLOPs per epoch: 6 * sum_l(in_l * out_l) * N_train (2 forward, 4 backward: dinp and dweight),
where N_train is the rows an epoch trains on (fewer with --steps).

By default every (config, mode) runs in its own child process, so a mode that crashes
(or poisons the CUDA context) cannot take the others with it; a failed mode is reported
with status "failed: <first line of the error>". --no-isolate runs everything in this
process.

JSON (--json FILE): a list of records, one per (config, mode):
    config, impl ("pytorch"), mode, status ("ok" or "failed: ..."), gpu, tf32 (bool),
    init ("mlpcu" or "torch"), seed,
    epoch_s_median, epoch_s_all (every epoch, warm-up ones first), warmup_epochs,
    samples_per_s, tflops, test_acc (fraction in [0,1]), test_loss, train_loss (last batch),
    steps_per_epoch, samples_per_epoch (ceil(N/B) and N, or less with --steps),
    peak_mem_mb (torch.cuda.max_memory_allocated, reset per mode, includes the dataset),
    data_mem_mb (memory allocated before the mode started: the dataset on the GPU),
    sizes, act, batch, lr, momentum, weight_decay, epochs, n_train, n_test, torch, dataset
"""

import argparse
import gzip
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

from pytorch_reference import set_tf32  # TF32 on/off through both of torch's APIs

CONFIGS = {
    "small": dict(sizes=[784, 128, 10], act="sigmoid", batch=64, lr=0.1, momentum=0.9, weight_decay=0.0),
    "wide": dict(sizes=[784, 1024, 1024, 10], act="relu", batch=256, lr=0.1, momentum=0.9, weight_decay=0.0),
    "big": dict(sizes=[784, 4096, 4096, 10], act="relu", batch=1024, lr=0.05, momentum=0.9, weight_decay=0.0),
}
# mode -> (torch.compile mode or None for eager, TF32 on?, autocast dtype name or None)
MODES = {
    "eager": (None, False, None),
    "eager_tf32": (None, True, None),
    "autocast_bf16": (None, False, "bfloat16"),  # the matmuls in BF16, FP32 weights, loss and softmax
    "compile": ("default", False, None),
    "compile_cudagraphs": ("reduce-overhead", False, None),
    "compile_tf32": ("default", True, None),
    "compile_cudagraphs_tf32": ("reduce-overhead", True, None),
    # the strongest single-GPU PyTorch a skilled user writes: the whole step (the batch's gather from
    # the epoch's order, forward, loss, backward, fused SGD with momentum) captured once as a CUDA
    # graph and replayed, one graph launch a step (graph_steps)
    "graph": ("cudagraph", False, None),
    "graph_tf32": ("cudagraph", True, None),
    "graph_bf16": ("cudagraph", False, "bfloat16"),
}
# (compile_cudagraphs fails on PyTorch 2.11 with this training loop: available by name, not by default)
DEFAULT_MODES = "eager,eager_tf32,autocast_bf16,compile"
# where the data is looked for: the trainers' places, the first that holds all four IDX files
DATA_DIRS = ["data/mnist", "data/fashion-mnist", ".data/fashion-mnist", "/usr/share/datasets/fashion-mnist"]
IDX_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def first_line(e):
    text = ("%s: %s" % (type(e).__name__, e)).strip()
    return text.splitlines()[0][:300] if text else type(e).__name__


def flops_per_epoch(sizes, n_train):
    return 6.0 * sum(a * b for a, b in zip(sizes[:-1], sizes[1:])) * n_train

# -----------------------------------------------------------------------------
# IDX reader (the format of MNIST and Fashion-MNIST), checked


def read_idx(path, expect_magic, what):
    import numpy as np
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise SystemExit("%s: too short for an IDX file (%d bytes)" % (path, len(data)))
    magic = struct.unpack(">I", data[:4])[0]
    if magic != expect_magic:
        raise SystemExit("%s: magic number %d (0x%08X), expected %d for IDX %s"
                         % (path, magic, magic, expect_magic, what))
    ndim = magic & 0xFF
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    start = 4 + 4 * ndim
    if len(data) != start + math.prod(dims):
        raise SystemExit("%s: %d bytes of data, the header's dims %s need %d"
                         % (path, len(data) - start, dims, math.prod(dims)))
    return np.frombuffer(data, dtype=np.uint8, offset=start).reshape(dims)


def find_file(data_dir, stem):
    for name in (stem + ".gz", stem):
        path = os.path.join(data_dir, name)
        if os.path.exists(path):
            return path
    raise SystemExit("%s: no %s(.gz) ---> try: make data, or --data DIR" % (data_dir, stem))


def load_split(data_dir, split):
    """split 'train' or 't10k' -> images (N, 784) uint8, labels (N,) uint8."""
    img_path = find_file(data_dir, "%s-images-idx3-ubyte" % split)
    lab_path = find_file(data_dir, "%s-labels-idx1-ubyte" % split)
    images = read_idx(img_path, 2051, "images")
    labels = read_idx(lab_path, 2049, "labels")
    if images.shape[1:] != (28, 28):
        raise SystemExit("%s: images are %s, expected 28x28" % (img_path, images.shape[1:]))
    if images.shape[0] != labels.shape[0]:
        raise SystemExit("%s has %d images but %s has %d labels"
                         % (img_path, images.shape[0], lab_path, labels.shape[0]))
    if labels.max() > 9:
        raise SystemExit("%s: label %d out of range 0..9" % (lab_path, labels.max()))
    return images.reshape(images.shape[0], -1), labels


def default_data_dir():
    for d in DATA_DIRS:
        if all(os.path.exists(os.path.join(d, f)) or os.path.exists(os.path.join(d, f + ".gz")) for f in IDX_FILES):
            return d
    return DATA_DIRS[-1]

# -----------------------------------------------------------------------------
# torch helpers


def build_model(torch, sizes, act):
    nn = torch.nn
    act_cls = {"sigmoid": nn.Sigmoid, "relu": nn.ReLU, "tanh": nn.Tanh}[act]
    layers = []
    for l in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[l], sizes[l + 1]))
        if l < len(sizes) - 2:
            layers.append(act_cls())
    return nn.Sequential(*layers)


class Data:
    """The dataset on the device: Xtr (N, 784) float32 in [0,1], Ytr (N,) int64, and the test set."""

    def __init__(self, torch, data_dir, device, limit):
        xtr, ytr = load_split(data_dir, "train")
        xte, yte = load_split(data_dir, "t10k")
        if limit:
            xtr, ytr = xtr[:limit], ytr[:limit]
        self.dir = data_dir
        self.Xtr = torch.from_numpy(xtr.copy()).to(device).float().div_(255.0)
        self.Ytr = torch.from_numpy(ytr.astype("int64")).to(device)
        self.Xte = torch.from_numpy(xte.copy()).to(device).float().div_(255.0)
        self.Yte = torch.from_numpy(yte.astype("int64")).to(device)
        self.n_train, self.n_test = len(ytr), len(yte)


def load_mlpcu_params(torch, model, sizes, seed):
    """Overwrite every nn.Linear's weight (OUT, IN) and bias (OUT) with train_mlp -s seed's initial ones."""
    from mlpcu_init import initial_params  # numpy only; imported here so bench.py needs no numpy
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    params = initial_params(sizes, seed)
    assert len(linears) == len(params)
    with torch.no_grad():
        for lin, (W, b) in zip(linears, params):
            assert tuple(lin.weight.shape) == W.shape and tuple(lin.bias.shape) == b.shape
            lin.weight.copy_(torch.from_numpy(W))
            lin.bias.copy_(torch.from_numpy(b))


def mlpcu_epoch_orders(seed, n, epochs):
    """train_mlp -s seed's permutations of n for the first `epochs` epochs, int64 numpy arrays."""
    from mlpcu_init import EpochOrder
    order = EpochOrder(seed)
    return [order.next_permutation(n) for _ in range(epochs)]


def sync(torch, device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def evaluate(torch, model, X, Y, bs=10000):
    F = torch.nn.functional
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for i in range(0, X.shape[0], bs):
            logits = model(X[i:i + bs])
            loss_sum += float(F.cross_entropy(logits, Y[i:i + bs], reduction="sum"))
            correct += int((logits.argmax(dim=1) == Y[i:i + bs]).sum())
    return correct / X.shape[0], loss_sum / X.shape[0]

# -----------------------------------------------------------------------------
# one (config, mode)


class GraphSteps:
    """The whole training step as CUDA graphs, replayed: one graph for a full batch, one for the
    epoch's short last batch (when there is one). Each reads its rows of the epoch's order from a
    static buffer (perm) through a device step counter (k), so a step is one graph launch and the
    host only copies the epoch's order in before its first step. The optimizer is torch.optim.SGD
    with fused=True (one kernel for every parameter). Capturing needs a few eager steps first (the
    fused SGD's momentum buffers, cuBLAS's workspaces): they run on copies' worth of state that is
    put back afterwards (the weights restored, the momentum zeroed, which is what PyTorch's first
    step gives: buf = grad), so the replayed steps are the run's first steps."""

    def __init__(self, torch, model, opt, loss_fn, X, Y, B, n_epoch, device):
        self.torch, self.B = torch, B
        self.full = n_epoch // B
        self.rem = n_epoch - self.full * B
        self.perm = torch.zeros(X.shape[0], dtype=torch.int64, device=device)
        self.k = torch.zeros(1, dtype=torch.int64, device=device)
        rows = self.perm[:self.full * B].view(self.full, B) if self.full else None
        last = self.perm[self.full * B:n_epoch]

        def full_step():
            idx = rows.index_select(0, self.k).view(B)
            loss = loss_fn(X.index_select(0, idx), Y.index_select(0, idx))
            loss.backward()
            opt.step()
            self.k.add_(1)
            return loss

        def last_step():
            loss = loss_fn(X.index_select(0, last), Y.index_select(0, last))
            loss.backward()
            opt.step()
            return loss

        saved = [p.detach().clone() for p in model.parameters()]
        side = torch.cuda.Stream(device)
        side.wait_stream(torch.cuda.current_stream(device))
        with torch.cuda.stream(side):
            for step in ([full_step] if self.full else []) + ([last_step] if self.rem else []):
                for _ in range(3):
                    self.perm.copy_(torch.arange(X.shape[0], device=device))
                    self.k.zero_()
                    opt.zero_grad(set_to_none=True)
                    step()
        torch.cuda.current_stream(device).wait_stream(side)
        self.graphs, pool = [], None
        for step in ([full_step] if self.full else []) + ([last_step] if self.rem else []):
            opt.zero_grad(set_to_none=True)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                self.loss = step()
            pool = g.pool()
            self.graphs.append(g)
        with torch.no_grad():
            for p, q in zip(model.parameters(), saved):
                p.copy_(q)
            for st in opt.state.values():
                if st.get("momentum_buffer") is not None:
                    st["momentum_buffer"].zero_()

    def epoch(self, order):
        """One epoch's steps in the order `order` (a device tensor of row indices)."""
        self.perm.copy_(order)
        self.k.zero_()
        if self.full:
            for _ in range(self.full):
                self.graphs[0].replay()
        if self.rem:
            self.graphs[-1].replay()
        return self.loss


def run_one(torch, data, cfg_name, mode, args, device, cfg=None):
    """One (config, mode): cfg_name's entry of CONFIGS, or cfg (a dict with CONFIGS' keys) for a model
    of the caller's own (dev/scaling.py). args: epochs, warmup, seed, init, compile_optimizer, steps."""
    cfg = CONFIGS[cfg_name] if cfg is None else cfg
    compile_mode, tf32, autocast = MODES[mode]
    F = torch.nn.functional
    sizes, B = cfg["sizes"], cfg["batch"]
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    rec = dict(config=cfg_name, impl="pytorch", mode=mode, status="ok", gpu=gpu, tf32=tf32,
               init=args.init, seed=args.seed, epoch_s_median=None, epoch_s_all=[],
               warmup_epochs=args.warmup,
               samples_per_s=None, tflops=None, test_acc=None, test_loss=None, train_loss=None,
               peak_mem_mb=None, data_mem_mb=None, sizes=sizes, act=cfg["act"], batch=B,
               lr=cfg["lr"], momentum=cfg["momentum"], weight_decay=cfg["weight_decay"],
               epochs=args.epochs, n_train=data.n_train, n_test=data.n_test,
               torch=torch.__version__, dataset=data.dir)
    print("-- %s / %s (%s, TF32 %s)" % (cfg_name, mode, "eager" if compile_mode is None
                                         else "the whole step as a CUDA graph" if compile_mode == "cudagraph"
                                         else "torch.compile mode=%s" % compile_mode,
                                         "on" if tf32 else "off"), flush=True)
    model = opt = None
    try:
        if hasattr(torch, "_dynamo"):
            torch._dynamo.reset()
        set_tf32(torch, tf32)
        if device.type == "cuda":
            torch.cuda.empty_cache()
            rec["data_mem_mb"] = torch.cuda.memory_allocated(device) / 2**20
            torch.cuda.reset_peak_memory_stats(device)
        torch.manual_seed(args.seed)
        model = build_model(torch, sizes, cfg["act"]).to(device)
        if args.init == "mlpcu":
            load_mlpcu_params(torch, model, sizes, args.seed)
        graphed = compile_mode == "cudagraph"
        opt = torch.optim.SGD(model.parameters(), lr=cfg["lr"], momentum=cfg["momentum"],
                              weight_decay=cfg["weight_decay"], dampening=0, nesterov=False,
                              **({"fused": True} if graphed else {}))

        def loss_fn(x, y):
            if autocast:  # the forward products in BF16; cross_entropy runs in FP32 under autocast
                # (no cast cache under graph capture: its cached copies would outlive the capture)
                with torch.autocast(device_type=device.type, dtype=getattr(torch, autocast),
                                    cache_enabled=not graphed):
                    return F.cross_entropy(model(x), y)
            return F.cross_entropy(model(x), y)

        def opt_step():
            opt.step()

        mark_step = None
        if compile_mode is not None and not graphed:
            cm = None if compile_mode == "default" else compile_mode
            # dynamic=False: two static shapes (B and the last, smaller batch), no symbolic sizes
            loss_fn = torch.compile(loss_fn, mode=cm, dynamic=False)
            if args.compile_optimizer:
                opt_step = torch.compile(opt_step)
            if compile_mode == "reduce-overhead":
                mark_step = getattr(getattr(torch, "compiler", None), "cudagraph_mark_step_begin", None)

        X, Y, N = data.Xtr, data.Ytr, data.n_train
        max_steps = getattr(args, "steps", 0)
        n_epoch = min(N, max_steps * B) if max_steps else N  # rows each epoch trains on
        rec["steps_per_epoch"], rec["samples_per_epoch"] = -(-n_epoch // B), n_epoch
        if args.init == "mlpcu":  # every epoch's order now, on the host, before any timing
            host_perms = mlpcu_epoch_orders(args.seed, N, args.epochs)
        else:
            gen = torch.Generator(device=device)
            gen.manual_seed(args.seed)
        loss = None
        steps = GraphSteps(torch, model, opt, loss_fn, X, Y, B, n_epoch, device) if graphed else None
        for epoch in range(args.epochs):
            if args.init == "mlpcu":  # uploaded before the clock starts, as train_mlp does
                perm = torch.from_numpy(host_perms[epoch]).to(device)
            sync(torch, device)
            t0 = time.perf_counter()
            if args.init == "torch":
                perm = torch.randperm(N, device=device, generator=gen)
            if steps is not None:
                loss = steps.epoch(perm)
            for i in range(0, n_epoch if steps is None else 0, B):
                idx = perm[i:i + B]
                if mark_step is not None:
                    mark_step()
                loss = loss_fn(X[idx], Y[idx])
                loss.backward()
                opt_step()
                opt.zero_grad(set_to_none=True)
            sync(torch, device)
            dt = time.perf_counter() - t0
            rec["epoch_s_all"].append(dt)
            print("   epoch %d/%d: %.4f s%s" % (epoch + 1, args.epochs, dt,
                                                 " (warm-up)" if epoch < args.warmup else ""), flush=True)
        rec["train_loss"] = float(loss.detach())
        timed = rec["epoch_s_all"][args.warmup:] or rec["epoch_s_all"]
        med = statistics.median(timed)
        rec["epoch_s_median"] = med
        rec["samples_per_s"] = n_epoch / med
        rec["tflops"] = flops_per_epoch(sizes, n_epoch) / med / 1e12
        model.eval()
        rec["test_acc"], rec["test_loss"] = evaluate(torch, model, data.Xte, data.Yte)
        if device.type == "cuda":
            rec["peak_mem_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
        print("   median %.4f s | %.0f samples/s | %.3f TFLOP/s | test acc %.2f%% | peak %.0f MB"
              % (med, rec["samples_per_s"], rec["tflops"], 100 * rec["test_acc"],
                 rec["peak_mem_mb"] or 0), flush=True)
    except Exception as e:  # a failing mode is reported, never fatal
        rec["status"] = "failed: " + first_line(e)
        print("   FAILED: %s" % rec["status"][8:], flush=True)
    finally:
        model = opt = loss = None  # free the mode's memory before the next one
        if hasattr(torch, "_dynamo"):
            try:
                torch._dynamo.reset()
            except Exception:
                pass
    return rec

# -----------------------------------------------------------------------------
# driver


def print_table(records):
    head = "%-6s %-24s %10s %12s %8s %8s %9s  %s" % ("config", "mode", "epoch s", "samples/s",
                                                     "TFLOP/s", "acc %", "peak MB", "status")
    print(head)
    print("-" * len(head))
    fmt = lambda v, f: (f % v) if v is not None else "-"
    for r in records:
        print("%-6s %-24s %10s %12s %8s %8s %9s  %s" % (
            r["config"], r["mode"], fmt(r.get("epoch_s_median"), "%.4f"),
            fmt(r.get("samples_per_s"), "%.0f"), fmt(r.get("tflops"), "%.3f"),
            fmt(None if r.get("test_acc") is None else 100 * r["test_acc"], "%.2f"),
            fmt(r.get("peak_mem_mb"), "%.0f"), r.get("status", "")))


def failed_record(cfg_name, mode, status, args):
    cfg = CONFIGS[cfg_name]
    return dict(config=cfg_name, impl="pytorch", mode=mode, status=status, gpu=None,
                tf32=MODES[mode][1], init=args.init, seed=args.seed, epoch_s_median=None, epoch_s_all=[],
                warmup_epochs=args.warmup,
                samples_per_s=None, tflops=None, test_acc=None, test_loss=None, train_loss=None,
                peak_mem_mb=None, data_mem_mb=None, sizes=cfg["sizes"], act=cfg["act"],
                batch=cfg["batch"], lr=cfg["lr"], momentum=cfg["momentum"],
                weight_decay=cfg["weight_decay"], epochs=args.epochs)


def run_isolated(cfg_name, mode, args):
    """Run one (config, mode) in a child process; its output goes straight to ours."""
    fd, tmp = tempfile.mkstemp(suffix=".json", prefix="bench_pytorch_")
    os.close(fd)
    cmd = [sys.executable, os.path.abspath(__file__), "--no-isolate", "--config", cfg_name,
           "--modes", mode, "--epochs", str(args.epochs), "--warmup", str(args.warmup),
           "--seed", str(args.seed), "--init", args.init, "--data", args.data, "--device", args.device,
           "--limit", str(args.limit), "--steps", str(args.steps), "--json", tmp, "--quiet"]
    if not args.compile_optimizer:
        cmd.append("--no-compile-optimizer")
    rc = None
    try:
        rc = subprocess.run(cmd, timeout=args.timeout).returncode
        with open(tmp) as f:
            recs = json.load(f)
        if recs:
            return recs[0]
        return failed_record(cfg_name, mode, "failed: child process wrote no record (exit %s)" % rc, args)
    except subprocess.TimeoutExpired:
        return failed_record(cfg_name, mode, "failed: timed out after %d s" % args.timeout, args)
    except (OSError, ValueError):  # no JSON: the child died before writing it
        return failed_record(cfg_name, mode, "failed: child process died (exit %s)" % rc, args)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def parse_args():
    ap = argparse.ArgumentParser(
        description="Train the mlp.cu benchmark MLPs in PyTorch and time every epoch (issue 6).")
    ap.add_argument("--data", default=None,
                    help="directory with the IDX files (train-images-idx3-ubyte.gz, ...); default: first "
                         "of %s that exists" % ", ".join(DATA_DIRS))
    ap.add_argument("--config", default="small,wide",
                    help="comma-separated configs: small, wide, big (default small,wide; dev/bench.py asks "
                         "for all three)")
    ap.add_argument("--modes", default=DEFAULT_MODES,
                    help="comma-separated modes from %s (default %s)" % (", ".join(MODES), DEFAULT_MODES))
    ap.add_argument("--epochs", type=int, default=5, help="epochs per mode, warm-up included (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="leading epochs left out of the median (default 1)")
    ap.add_argument("--seed", type=int, default=1337, help="seed for weights and permutations (default 1337)")
    ap.add_argument("--init", choices=("mlpcu", "torch"), default="mlpcu",
                    help="mlpcu: start from train_mlp -s SEED's initial weights and use its batch order "
                         "(dev/mlpcu_init.py); torch: torch.manual_seed init and torch.randperm batches "
                         "(default mlpcu)")
    ap.add_argument("--device", default="cuda", help="torch device (default cuda; cpu only for a smoke test)")
    ap.add_argument("--limit", type=int, default=0, help="train on the first N images only (0: all; smoke tests)")
    ap.add_argument("--steps", type=int, default=0,
                    help="stop each epoch after this many steps, like train_mlp -t (0: the whole epoch; default 0)")
    ap.add_argument("--json", default=None, help="write the records to this JSON file")
    ap.add_argument("--no-compile-optimizer", dest="compile_optimizer", action="store_false",
                    help="in compile modes, leave optimizer.step() eager (default: compiled too)")
    ap.add_argument("--no-isolate", dest="isolate", action="store_false",
                    help="run every mode in this process (default: one child process per mode)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds allowed per isolated mode (default 900)")
    ap.add_argument("--quiet", action="store_true", help="no summary table (used by the child processes)")
    ap.add_argument("--serve", action="store_true",
                    help="load the data once, then run one model a line read from stdin (JSON: sizes, act, batch, "
                         "lr, momentum, weight_decay, mode, and optionally epochs, warmup, steps, seed) and answer "
                         "each with its record as one JSON line on stdout (dev/sweep.py)")
    return ap.parse_args()


def serve(args):
    """--serve: one process for many runs, so that a sweep alternating with our trainer pays for
    PyTorch's start and the data's upload once. Progress goes to stderr, records to stdout."""
    import torch
    device = torch.device(args.device)
    data = Data(torch, args.data, device, args.limit)
    real_stdout, sys.stdout = sys.stdout, sys.stderr
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        run_args = argparse.Namespace(**vars(args))
        for k in ("epochs", "warmup", "steps", "seed"):
            if k in req:
                setattr(run_args, k, req[k])
        cfg = {k: req[k] for k in ("sizes", "act", "batch", "lr", "momentum", "weight_decay")}
        rec = run_one(torch, data, req.get("name", "model"), req["mode"], run_args, device, cfg=cfg)
        real_stdout.write(json.dumps(rec) + "\n")
        real_stdout.flush()
    return 0


def main():
    args = parse_args()
    if args.data is None:
        args.data = default_data_dir()
    if args.serve:
        return serve(args)
    configs = [c.strip() for c in args.config.split(",") if c.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for c in configs:
        if c not in CONFIGS:
            sys.exit("unknown config %r, expected one of %s" % (c, ", ".join(CONFIGS)))
    for m in modes:
        if m not in MODES:
            sys.exit("unknown mode %r, expected one of %s" % (m, ", ".join(MODES)))
    if args.init == "mlpcu" and not 0 <= args.seed < 2**64:
        sys.exit("--seed %d: mlp.cu's seeds are 0 .. 2^64-1 (--init mlpcu)" % args.seed)
    if args.steps < 0:
        sys.exit("--steps %d: expected 0 (whole epochs) or a positive number of steps" % args.steps)
    if args.epochs <= args.warmup:
        print("note: --epochs %d <= --warmup %d: the median uses every epoch" % (args.epochs, args.warmup))

    records = []
    if args.isolate:
        for split in ("train", "t10k"):  # a bad dataset is said once, here, not by every child
            load_split(args.data, split)
        print("bench_pytorch: data %s, configs %s, modes %s, %d epochs (%d warm-up), init %s, seed %d, "
              "one process per mode" % (args.data, ",".join(configs), ",".join(modes), args.epochs, args.warmup,
                                         args.init, args.seed), flush=True)
        for c in configs:
            for m in modes:
                records.append(run_isolated(c, m, args))
    else:
        try:
            import torch
            device = torch.device(args.device)
            if device.type == "cuda" and not torch.cuda.is_available():
                raise RuntimeError("torch sees no CUDA device (use --device cpu for a smoke test)")
            data = Data(torch, args.data, device, args.limit)
        except (Exception, SystemExit) as e:  # no torch, no GPU, bad data: every mode fails, said once
            msg = first_line(e) if isinstance(e, Exception) else str(e)
            print("bench_pytorch: %s" % msg, file=sys.stderr)
            records = [failed_record(c, m, "failed: " + msg, args) for c in configs for m in modes]
        else:
            if not args.quiet:
                print("bench_pytorch: torch %s on %s, data %s (%d train, %d test), init %s, seed %d"
                      % (torch.__version__,
                         torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                         data.dir, data.n_train, data.n_test, args.init, args.seed), flush=True)
            for c in configs:
                for m in modes:
                    records.append(run_one(torch, data, c, m, args, device))

    if args.json:
        d = os.path.dirname(os.path.abspath(args.json))
        os.makedirs(d, exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    if not args.quiet:
        print()
        print_table(records)
        if args.json:
            print("wrote %s" % args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
