#!/usr/bin/env python3
"""
scaling.py -- issue 21, item 5: how speed scales with the model's width and the batch, for
mlp.cu and PyTorch, as a table and a picture.

    python3 dev/scaling.py --dry-run                     # the plan and its expected seconds, runs nothing
    python3 dev/scaling.py                               # the sweep -> dev/out/scaling/scaling.{csv,md,png}
    python3 dev/scaling.py --out-dir $OUT/scaling --budget 420
    python3 dev/scaling.py --plot-only dev/out/scaling/scaling.csv   # redraw the PNG (no GPU needed)
    python3 dev/scaling.py --hidden 128,1024 --batches 256 --ours-only  # a part of the sweep

The sweep: the model 784,H,H,10 with relu, H in 128 .. 8192 (--hidden), batch B in 64 .. 4096
(--batches), SGD lr 0.05 momentum 0.9, on the dataset bench.py finds (bench.default_data_dir:
Fashion-MNIST where the trainers look for it). For each (H, B), six runs:
    mlp.cu FP32    ./train_mlp_fast -x 0        (CUDA graphs, the default path)
    mlp.cu TF32    ./train_mlp_fast -x 1
    mlp.cu BF16    ./train_mlp_fast -x 2
    PyTorch FP32   bench_pytorch.py's training loop (run_one), mode eager
    PyTorch TF32   the same, mode eager_tf32
    PyTorch BF16   the same, mode autocast_bf16
(--precisions fp32,tf32 runs the first two kinds only, as the sweep did before BF16.)
Every run trains --epochs epochs of the same number of steps S (train_mlp_fast -t S, and
run_one's steps cap), full batches of B rows; the first --warmup epochs (CUDA-graph capture,
cuBLAS heuristics) are left out and the step time is the median epoch time of the rest over S.
Epoch times exclude the evaluation, as in bench.py. S is chosen per point so that an epoch of the
slowest run is about --epoch-ms of estimated work, between --min-steps and --max-steps, and at most
the full batches the training set holds. Then
    samples/s = B / step time,  TFLOP/s = 6 * sum(in*out) * samples/s / 1e12  (bench.py's convention).
The PyTorch runs all happen in one child process (this script with --worker, under --python,
default this Python), which loads the dataset onto the GPU once and takes one run at a time over
a pipe: starting PyTorch for each point would cost more than most points' runs. PyTorch starts
from its own initial weights (--init torch; mlp.cu's, computed in numpy, take many seconds at
H 8192), which changes no run's speed.

A run that runs out of GPU memory is a row "skipped: out of memory", never a crash; a failed run
is a row with the reason. --budget S: no run starts when the time spent plus its estimate would
pass S seconds; what was measured is written as usual, the rest is marked "not run: budget". The
CSV and the markdown table are rewritten after every point, so an interrupted sweep keeps its
points; the PNG is drawn at the end (--plot-only CSV redraws it and the table from a CSV, into
the CSV's directory or --out-dir).

Files (--out-dir, default dev/out/scaling):
    scaling.csv   one row per run: hidden, batch, impl (mlp.cu|pytorch), precision (fp32|tf32|bf16),
                  status, steps, epochs, warmup, step_ms, samples_per_s, tflops, peak_mem_mb
                  (ours: device memory the trainer allocated; PyTorch: torch's peak, dataset
                  included), wall_s (the run's wall time, start-up included), est_s, gpu, date,
                  torch, dataset
    scaling.md    the tables: samples/s with mlp.cu's ratio over PyTorch per precision, and TFLOP/s
    scaling.png   samples/s (top) and TFLOP/s (bottom) against H, one panel per batch size,
                  log-log, one line per (implementation, precision)
    logs/         each mlp.cu run's CSV log and output; pytorch_worker.log, the PyTorch side's output
"""

import argparse
import csv
import datetime
import json
import math
import os
import select
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (data and GPU discovery, FLOP count, our CSV log's reader)

INPUTS, CLASSES = 784, 10
ACT, LR, MOMENTUM = "relu", 0.05, 0.9
HIDDEN = [128, 256, 512, 1024, 2048, 4096, 8192]
BATCHES = [64, 256, 1024, 4096]
# the runs of a point: (impl, precision, train_mlp_fast -x or bench_pytorch mode); --precisions picks
PRECISIONS = ["fp32", "tf32", "bf16"]
RUNS = [("mlp.cu", "fp32", "0"), ("mlp.cu", "tf32", "1"), ("mlp.cu", "bf16", "2"),
        ("pytorch", "fp32", "eager"), ("pytorch", "tf32", "eager_tf32"), ("pytorch", "bf16", "autocast_bf16")]
PREC_NAMES = {"fp32": "FP32", "tf32": "TF32", "bf16": "BF16"}
LABELS = {("mlp.cu", "fp32"): "mlp.cu FP32", ("mlp.cu", "tf32"): "mlp.cu TF32", ("mlp.cu", "bf16"): "mlp.cu BF16",
          ("pytorch", "fp32"): "PyTorch eager FP32", ("pytorch", "tf32"): "PyTorch eager TF32",
          ("pytorch", "bf16"): "PyTorch autocast BF16"}

# Rough speeds for the estimate alone (--dry-run, the step count, --budget), not for any result:
# per (impl, precision) a sustained TFLOP/s on large shapes and the shortest step (launch and
# Python overhead), and per run a fixed start-up (ours: process, dataset, CUDA context, graph
# capture, evaluations; PyTorch: model and optimizer, evaluation), and the PyTorch worker's start.
EST_TFLOPS = {("mlp.cu", "fp32"): 30.0, ("mlp.cu", "tf32"): 60.0, ("mlp.cu", "bf16"): 60.0,
              ("pytorch", "fp32"): 45.0, ("pytorch", "tf32"): 70.0, ("pytorch", "bf16"): 60.0}
EST_MIN_STEP_S = {"mlp.cu": 40e-6, "pytorch": 1.3e-3}
EST_RUN_START_S = {"mlp.cu": 1.5, "pytorch": 0.5}
EST_WORKER_START_S = 15.0
N_TRAIN_ASSUMED = 60000  # when the dataset is not there (--dry-run on a machine without it)

CSV_FIELDS = ["hidden", "batch", "impl", "precision", "status", "steps", "epochs", "warmup", "step_ms",
              "samples_per_s", "tflops", "peak_mem_mb", "wall_s", "est_s", "gpu", "date", "torch", "dataset"]


def sizes_of(h):
    return [INPUTS, h, h, CLASSES]


def parse_precisions(text):
    vals = [x.strip() for x in text.split(",") if x.strip()]
    bad = [v for v in vals if v not in PRECISIONS]
    if not vals or bad:
        raise argparse.ArgumentTypeError("expected some of %s, got %r" % (",".join(PRECISIONS), text))
    return vals


def parse_int_list(text, what):
    try:
        vals = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError("%s: expected comma-separated integers, got %r" % (what, text))
    if not vals or any(v <= 0 for v in vals):
        raise argparse.ArgumentTypeError("%s: expected positive integers, got %r" % (what, text))
    return vals

# -----------------------------------------------------------------------------
# the plan: steps per point and the expected seconds


def est_step_s(impl, prec, h, b):
    flops = bench.flops_per_sample(sizes_of(h)) * b
    return max(EST_MIN_STEP_S[impl], flops / (EST_TFLOPS[(impl, prec)] * 1e12))


def plan_steps(h, b, runs, args, n_train):
    """Steps per epoch for point (h, b): about --epoch-ms of the slowest run's work, clamped."""
    slowest = max(est_step_s(impl, prec, h, b) for impl, prec, _ in runs)
    s = math.ceil(args.epoch_ms / 1e3 / slowest)
    s = max(args.min_steps, min(args.max_steps, s))
    return max(1, min(s, n_train // b))


def est_run_s(impl, prec, h, b, steps, args):
    """Expected wall seconds of one run: start-up, every epoch's steps, and each evaluation."""
    eval_flops = 2.0 * sum(x * y for x, y in zip(sizes_of(h)[:-1], sizes_of(h)[1:])) * 10000
    eval_s = eval_flops / (EST_TFLOPS[(impl, prec)] * 1e12)
    evals = args.epochs if impl == "mlp.cu" else 1  # ours evaluates after every epoch, run_one at the end
    return EST_RUN_START_S[impl] + args.epochs * steps * est_step_s(impl, prec, h, b) + evals * eval_s


def make_plan(args, n_train):
    """[(h, b, steps, [(impl, prec, flag, est_s)])] in the order they run."""
    runs = [r for r in RUNS if not (args.ours_only and r[0] == "pytorch") and r[1] in args.precisions]
    plan = []
    for h in args.hidden:
        for b in args.batches:
            if b > n_train:
                continue
            steps = plan_steps(h, b, runs, args, n_train)
            plan.append((h, b, steps, [(impl, prec, flag, est_run_s(impl, prec, h, b, steps, args))
                                       for impl, prec, flag in runs]))
    return plan


def print_plan(plan, args, n_train):
    total = sum(e for _, _, _, runs in plan for *_, e in runs)
    worker = 0.0 if args.ours_only else EST_WORKER_START_S
    print("scaling: model 784,H,H,10 %s, SGD lr %g momentum %g; %d points, %d epochs a run (%d warm-up), "
          "%d training images" % (ACT, LR, MOMENTUM, len(plan), args.epochs, args.warmup, n_train))
    heads = ["H", "batch", "steps"] + [LABELS[(impl, prec)] + " s" for impl, prec, _, _ in plan[0][3]] + ["point s"]
    print("  ".join("%8s" % h if i < 3 else "%19s" % h for i, h in enumerate(heads)))
    for h, b, steps, runs in plan:
        cells = ["%8d" % h, "%8d" % b, "%8d" % steps] + ["%19.1f" % e for *_, e in runs]
        print("  ".join(cells) + "  %19.1f" % sum(e for *_, e in runs))
    print("expected: %.0f s of runs%s = %.0f s (%.1f min); --budget %g s"
          % (total, (" + %.0f s PyTorch start" % worker) if worker else "", total + worker,
             (total + worker) / 60, args.budget))

# -----------------------------------------------------------------------------
# mlp.cu: one run of train_mlp_fast


def run_ours(args, h, b, prec, flag, steps, n_train):
    tag = "ours_h%d_b%d_%s" % (h, b, prec)
    log_csv = os.path.join(args.log_dir, tag + ".csv")
    log_txt = os.path.join(args.log_dir, tag + ".log")
    cmd = [args.trainer, "-d", args.data, "-m", ",".join(map(str, sizes_of(h))), "-a", ACT, "-b", str(b),
           "-l", str(LR), "-k", str(MOMENTUM), "-n", str(args.epochs), "-t", str(steps), "-v", str(steps),
           "-s", str(args.seed), "-x", flag, "-o", log_csv]
    if os.path.exists(log_csv):
        os.remove(log_csv)
    row = dict(status="ok")
    try:
        with open(log_txt, "w") as out:
            out.write("$ %s\n" % " ".join(cmd))
            out.flush()
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(status="failed: timed out after %d s (log %s)" % (args.timeout, log_txt))
    except OSError as e:
        return dict(status="failed: %s" % e)
    if proc.returncode != 0:
        with open(log_txt, errors="replace") as f:
            text = f.read()
        if "out of memory" in text.lower():
            return dict(status="skipped: out of memory")
        last = [l.strip() for l in text.splitlines() if l.strip()][-1:] or ["no output"]
        row["status"] = "failed: exit %d: %s" % (proc.returncode, last[0][:200])
    try:
        rec = bench.parse_ours_csv(log_csv, args.warmup, None)
    except (OSError, ValueError, bench.csv.Error) as e:
        return row if row["status"] != "ok" else dict(status="failed: could not read the log: %s" % e)
    timed = rec["epoch_s_all"][args.warmup:]
    if not timed:  # (a run that stopped early, e.g. diverged, before any epoch past the warm-up)
        return row if row["status"] != "ok" else dict(status="failed: no epoch past the warm-up")
    if row["status"] != "ok":  # stopped (diverged, say) after some timed epochs: keep them, say so
        row["status"] = "ok (stopped after %d epochs: %s)" % (len(rec["epoch_s_all"]), row["status"][8:])
    row["epoch_s"] = statistics.median(timed)
    row["peak_mem_mb"] = rec.get("peak_mem_mb")
    return row

# -----------------------------------------------------------------------------
# PyTorch: the worker (a child process) and the parent's end of its pipe


def worker_main(args):
    """--worker: load the dataset once, then run the requests read from stdin, one JSON line each
    ({"hidden", "batch", "mode", "steps"}), answering each with one JSON line on stdout."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    sys.stdout.flush()
    os.dup2(2, 1)  # run_one's progress lines go to stderr (the parent's worker log), not into the pipe

    def send(obj):
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        import torch
        import bench_pytorch
        device = torch.device(args.pytorch_device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        data = bench_pytorch.Data(torch, args.data, device, 0)
    except (Exception, SystemExit) as e:
        send(dict(ready=False, error=("%s: %s" % (type(e).__name__, e)).splitlines()[0][:300]))
        return 1
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    send(dict(ready=True, torch=torch.__version__, gpu=gpu, n_train=data.n_train))
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        h, b = req["hidden"], req["batch"]
        cfg = dict(sizes=sizes_of(h), act=ACT, batch=b, lr=LR, momentum=MOMENTUM, weight_decay=0.0)
        run_args = argparse.Namespace(epochs=args.epochs, warmup=args.warmup, seed=args.seed, init="torch",
                                      compile_optimizer=False, steps=req["steps"])
        rec = bench_pytorch.run_one(torch, data, "h%d_b%d" % (h, b), req["mode"], run_args, device, cfg=cfg)
        if device.type == "cuda":
            torch.cuda.empty_cache()
        send(rec)
    return 0


class PyTorchWorker:
    """The parent's side: starts the worker on first use, again after it died or hung."""

    def __init__(self, args):
        self.args, self.proc, self.info, self.log = args, None, {}, None

    def start(self):
        a = self.args
        cmd = [a.python, os.path.abspath(__file__), "--worker", "--data", a.data, "--seed", str(a.seed),
               "--epochs", str(a.epochs), "--warmup", str(a.warmup), "--pytorch-device", a.pytorch_device]
        self.log = open(os.path.join(a.log_dir, "pytorch_worker.log"), "a")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                         text=True, bufsize=1, env=env)
        except OSError as e:
            raise RuntimeError("cannot start %s: %s" % (a.python, e))
        reply, how = self._read(a.worker_start_timeout)
        if not reply or not reply.get("ready"):
            why = (reply or {}).get("error") or "%s (log %s)" % (how, self.log.name)
            self.stop()
            raise RuntimeError(why)
        self.info = reply

    def _read(self, timeout):
        """(one JSON line from the worker, None) or (None, why: it died, hung past timeout, or said no JSON)."""
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return None, "timed out after %d s" % timeout
        line = self.proc.stdout.readline()
        if not line:
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                rc = "?"
            return None, "died (exit %s)" % rc
        try:
            return json.loads(line), None
        except ValueError:
            return None, "answered %r, not JSON" % line.strip()[:100]

    def stop(self):
        if self.proc:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        if self.log:
            self.log.close()
            self.log = None

    def run(self, h, b, mode, steps):
        if self.proc is None or self.proc.poll() is not None:
            self.stop()
            try:
                self.start()
            except RuntimeError as e:
                return dict(status="failed: PyTorch worker: %s" % e)
        try:
            self.proc.stdin.write(json.dumps(dict(hidden=h, batch=b, mode=mode, steps=steps)) + "\n")
            self.proc.stdin.flush()
        except OSError as e:
            self.stop()
            return dict(status="failed: PyTorch worker: %s" % e)
        rec, how = self._read(self.args.timeout)
        if rec is None:
            self.proc.kill()  # hung or died: the next run starts a fresh one
            self.stop()
            return dict(status="failed: PyTorch worker %s (log %s)" % (how, os.path.join(self.args.log_dir, "pytorch_worker.log")))
        status = rec.get("status", "failed: no status")
        if status != "ok":
            low = status.lower()
            if "out of memory" in low or "outofmemory" in low:
                return dict(status="skipped: out of memory")
            return dict(status=status)
        timed = rec["epoch_s_all"][self.args.warmup:] or rec["epoch_s_all"]
        if rec.get("steps_per_epoch") != steps:
            return dict(status="failed: run_one trained %s steps an epoch, asked %d" % (rec.get("steps_per_epoch"), steps))
        return dict(status="ok", epoch_s=statistics.median(timed), peak_mem_mb=rec.get("peak_mem_mb"))

# -----------------------------------------------------------------------------
# outputs: CSV, markdown, PNG


def fmt_rate(v):
    if v >= 1e6:
        return "%.2fM" % (v / 1e6)
    if v >= 1e3:
        return "%.1fk" % (v / 1e3)
    return "%.0f" % v


def write_csv(rows, path):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: bench.csv_value(r.get(k)) for k in CSV_FIELDS})
    os.replace(tmp, path)


def read_csv(path):
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows or any(k not in rows[0] for k in ("hidden", "batch", "impl", "precision", "status")):
        raise ValueError("%s is not a scaling.py CSV (expected the columns %s)" % (path, ",".join(CSV_FIELDS)))
    for r in rows:
        for k in ("hidden", "batch", "steps", "epochs", "warmup"):
            r[k] = int(r[k]) if (r.get(k) or "").strip() else None
        for k in ("step_ms", "samples_per_s", "tflops", "peak_mem_mb", "wall_s", "est_s"):
            r[k] = bench.num(r.get(k))
    return rows


def is_ok(r):
    return (r.get("status") or "").startswith("ok") and r.get("samples_per_s")


def meta_of(rows):
    first = lambda k: next((r[k] for r in rows if r.get(k)), None)
    dates = sorted({r["date"] for r in rows if r.get("date")})   # several: a CSV merged from sweeps on different days
    return dict(gpu=first("gpu"), date=", ".join(dates) or None, torch=first("torch"), dataset=first("dataset"),
                epochs=first("epochs"), warmup=first("warmup"))


def cell_text(r, key, fmt):
    if r is None:
        return "—"
    if is_ok(r):
        return fmt(r[key])
    s = r.get("status") or ""
    return "OOM" if "out of memory" in s else "not run" if s.startswith("not run") else "failed"


def markdown(rows):
    m = meta_of(rows)
    by = {(r["hidden"], r["batch"], r["impl"], r["precision"]): r for r in rows}
    points = sorted({(r["hidden"], r["batch"]) for r in rows})
    out = ["### Scaling: mlp.cu vs PyTorch eager on %s, %s" % (m["gpu"] or "unknown GPU", m["date"] or "?"), ""]
    out.append("Model 784,H,H,10 %s, SGD lr %g momentum %g, %s on the GPU; each run %s epochs of the same "
               "capped number of full-batch steps (the steps column), the first %s a warm-up; the step time is "
               "the median epoch time of the rest over the steps (evaluation excluded). samples/s = batch / step "
               "time; TFLOP/s = 6·Σ(in·out)·samples/s. PyTorch %s, eager, its own initial weights. "
               "Made by `python3 dev/scaling.py`."
               % (ACT, LR, MOMENTUM, m["dataset"] or "the dataset", m["epochs"] or "?", m["warmup"] or "?",
                  m["torch"] or "(not run)"))
    out.append("")
    ratio = lambda a, b: ("%.1fx" % (a["samples_per_s"] / b["samples_per_s"])) if a and b and is_ok(a) and is_ok(b) else ""
    steps = lambda h, b: next((r["steps"] for k, r in by.items() if k[:2] == (h, b) and r.get("steps")), "")
    precs = [p for p in PRECISIONS if any(r["precision"] == p for r in rows)]   # those this sweep ran
    out.append("samples/s (ratio: mlp.cu over PyTorch, same precision):")
    out.append("")
    out.append("| H | batch | steps | " + " | ".join("mlp.cu %s | PyTorch %s | ratio" % (PREC_NAMES[p], PREC_NAMES[p])
                                                    for p in precs) + " |")
    out.append("|---:|---:|---:|" + "---:|---:|---:|" * len(precs))
    for h, b in points:
        g = lambda impl, prec: by.get((h, b, impl, prec))
        cells = [str(h), str(b), str(steps(h, b))]
        for prec in precs:
            o, p = g("mlp.cu", prec), g("pytorch", prec)
            cells += [cell_text(o, "samples_per_s", fmt_rate), cell_text(p, "samples_per_s", fmt_rate), ratio(o, p)]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    out.append("TFLOP/s:")
    out.append("")
    out.append("| H | batch | " + " | ".join("mlp.cu %s | PyTorch %s" % (PREC_NAMES[p], PREC_NAMES[p]) for p in precs)
               + " |")
    out.append("|---:|---:|" + "---:|---:|" * len(precs))
    for h, b in points:
        cells = [str(h), str(b)] + [cell_text(by.get((h, b, impl, prec)), "tflops", lambda v: "%.2f" % v)
                                    for prec in precs for impl in ("mlp.cu", "pytorch")]
        out.append("| " + " | ".join(cells) + " |")
    notes = [r for r in rows if r["status"] != "ok" and not r["status"].startswith("not run")]
    not_run = [r for r in rows if r["status"].startswith("not run")]
    if notes or not_run:
        out.append("")
        for r in notes:
            out.append("- H %d, batch %d, %s: %s" % (r["hidden"], r["batch"], LABELS[(r["impl"], r["precision"])],
                                                    r["status"]))
        if not_run:
            out.append("- %d runs not run: %s (from H %d, batch %d on)" % (len(not_run), not_run[0]["status"][9:],
                                                                          not_run[0]["hidden"], not_run[0]["batch"]))
    return "\n".join(out) + "\n"


def plot(rows, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    m = meta_of(rows)
    ok = [r for r in rows if is_ok(r)]
    if not ok:
        raise ValueError("no completed run to draw")
    batches = sorted({r["batch"] for r in rows})
    hidden = sorted({r["hidden"] for r in rows})
    style = {("mlp.cu", "fp32"): dict(color="C0", ls="-", marker="o"),
             ("mlp.cu", "tf32"): dict(color="C0", ls="--", marker="o", mfc="white"),
             ("pytorch", "fp32"): dict(color="C1", ls="-", marker="s"),
             ("pytorch", "tf32"): dict(color="C1", ls="--", marker="s", mfc="white"),
             ("mlp.cu", "bf16"): dict(color="C0", ls=":", marker="^"),
             ("pytorch", "bf16"): dict(color="C1", ls=":", marker="v")}
    fig, axes = plt.subplots(2, len(batches), figsize=(4.2 * len(batches) + 1, 8.5), sharex=True, sharey="row",
                             squeeze=False)
    fp32_peak, tf32_peak, bf16_peak = bench.peaks_for(m["gpu"])
    has_bf16 = any(r["precision"] == "bf16" for r in ok)
    for j, b in enumerate(batches):
        for i, (key, ylabel) in enumerate((("samples_per_s", "samples/s"), ("tflops", "TFLOP/s"))):
            ax = axes[i][j]
            for (impl, prec), st in style.items():
                got = {r["hidden"]: r[key] for r in ok if r["batch"] == b and (r["impl"], r["precision"]) == (impl, prec)}
                if got:  # a missing point (out of memory, failed) is a gap in the line, not a straight bridge
                    ax.plot(hidden, [got.get(h, float("nan")) for h in hidden], label=LABELS[(impl, prec)],
                            lw=1.8, ms=5, **st)
            if i == 1 and fp32_peak:
                for peak, name in ((fp32_peak, "FP32 peak"), (tf32_peak, "TF32 dense peak"),
                                   (bf16_peak if has_bf16 else None, "BF16 dense peak")):
                    if not peak:
                        continue
                    ax.axhline(peak, color="0.6", lw=0.8, ls=":")
                    ax.text(hidden[0], peak, " " + name, color="0.45", fontsize=7, va="bottom")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xticks(hidden)
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: "%d" % v))
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.grid(True, which="major", alpha=0.35)
            ax.grid(True, which="minor", axis="y", alpha=0.12)
            if i == 0:
                ax.set_title("batch %d" % b)
                ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: "%g" % v if v < 1e3 else
                                                           "%gk" % (v / 1e3) if v < 1e6 else "%gM" % (v / 1e6)))
            else:
                ax.set_xlabel("hidden width H")
                ax.tick_params(axis="x", labelrotation=45)
            if j == 0:
                ax.set_ylabel(ylabel)
    handles, labels = axes[0][0].get_legend_handles_labels()
    for ax in axes.flat:  # a panel may lack a line (failed runs): take the fullest legend
        h2, l2 = ax.get_legend_handles_labels()
        if len(l2) > len(labels):
            handles, labels = h2, l2
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 6) or 1, frameon=False)
    fig.suptitle("mlp.cu vs PyTorch eager: 784,H,H,10 %s, SGD lr %g momentum %g, %s\n%s, %s"
                 % (ACT, LR, MOMENTUM, m["dataset"] or "", m["gpu"] or "unknown GPU", m["date"] or ""), fontsize=12)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    tmp = png_path + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, png_path)


def write_outputs(rows, out_dir, draw, with_csv=True):
    csv_path, md_path, png_path = (os.path.join(out_dir, "scaling." + e) for e in ("csv", "md", "png"))
    wrote = []
    if with_csv:
        write_csv(rows, csv_path)
        wrote.append(csv_path)
    with open(md_path, "w") as f:
        f.write(markdown(rows))
    wrote.append(md_path)
    if draw:
        try:
            plot(rows, png_path)
            wrote.append(png_path)
        except ImportError as e:
            print("warning: no PNG (%s) ---> try: pip install matplotlib, then --plot-only %s" % (e, csv_path))
        except ValueError as e:
            print("warning: no PNG: %s" % e)
    return wrote

# -----------------------------------------------------------------------------
# the sweep


def sweep(args, n_train):
    t_start = time.time()
    plan = make_plan(args, n_train)
    print_plan(plan, args, n_train)
    gpu = bench.gpu_name_from_nvidia_smi()
    date = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    worker = None
    if not args.ours_only:
        worker = PyTorchWorker(args)
        print("starting PyTorch (%s) ..." % args.python, flush=True)
        try:
            worker.start()
        except RuntimeError as e:
            sys.exit("error: PyTorch did not start under %s: %s ---> try: --python /opt/torch/.venv/bin/python3 "
                     "(a Python with torch), or --ours-only" % (args.python, e))
        gpu = gpu or worker.info.get("gpu")
        print("PyTorch %s on %s, ready after %.1f s" % (worker.info.get("torch"), worker.info.get("gpu"),
                                                        time.time() - t_start), flush=True)
    print("GPU %s, %s; writing %s" % (gpu or "unknown", date, args.out_dir), flush=True)
    common = dict(gpu=gpu, date=date, epochs=args.epochs, warmup=args.warmup,
                  torch=worker.info.get("torch") if worker else None,
                  dataset=os.path.basename(os.path.normpath(args.data)))
    rows, out_of_budget = [], False
    try:
        for k, (h, b, steps, runs) in enumerate(plan):
            t_point = time.time()
            cells = []
            for impl, prec, flag, est in runs:
                row = dict(common, hidden=h, batch=b, impl=impl, precision=prec, steps=steps, est_s=est)
                if out_of_budget or time.time() - t_start + est > args.budget:
                    out_of_budget = True
                    row["status"] = "not run: budget %g s" % args.budget
                    rows.append(row)
                    continue
                t0 = time.time()
                res = run_ours(args, h, b, prec, flag, steps, n_train) if impl == "mlp.cu" else \
                    worker.run(h, b, flag, steps)
                row["wall_s"] = time.time() - t0
                row["status"] = res["status"]
                row["peak_mem_mb"] = res.get("peak_mem_mb")
                if res.get("epoch_s"):
                    row["step_ms"] = 1e3 * res["epoch_s"] / steps
                    row["samples_per_s"] = b * steps / res["epoch_s"]
                    row["tflops"] = bench.flops_per_sample(sizes_of(h)) * row["samples_per_s"] / 1e12
                rows.append(row)
                cells.append("%s %s" % (LABELS[(impl, prec)], (fmt_rate(row["samples_per_s"]) + "/s %.2f TF"
                                                                % row["tflops"]) if is_ok(row) else row["status"]))
            if cells:
                print("[%2d/%d] H %4d B %4d, %3d steps | %s | %.1f s (est %.1f), %.0f s in all"
                      % (k + 1, len(plan), h, b, steps, " | ".join(cells), time.time() - t_point,
                         sum(e for *_, e in runs), time.time() - t_start), flush=True)
            write_outputs(rows, args.out_dir, draw=False)
    except KeyboardInterrupt:
        print("\ninterrupted: writing what was measured")
    finally:
        if worker:
            worker.stop()
    if out_of_budget:
        print("stopped by --budget %g s: %d of %d runs not run" % (args.budget, sum(
            1 for r in rows if r["status"].startswith("not run")) + sum(len(p[3]) for p in plan) - len(rows),
            sum(len(p[3]) for p in plan)))
    wrote = write_outputs(rows, args.out_dir, draw=True)
    print("done in %.0f s; wrote %s" % (time.time() - t_start, ", ".join(wrote)))
    return 0

# -----------------------------------------------------------------------------
# main


def parse_args():
    ap = argparse.ArgumentParser(
        description="Sweep hidden width and batch size: samples/s and TFLOP/s of ./train_mlp_fast (FP32, TF32, BF16) "
                    "and PyTorch (eager FP32 and TF32, autocast BF16) on 784,H,H,10 relu; writes scaling.{csv,md,png} "
                    "(issue 21).")
    ap.add_argument("--data", default=None, help="IDX dataset directory; default: as bench.py, the first of %s "
                    "that holds the files" % ", ".join(bench.DATA_DIRS))
    ap.add_argument("--trainer", default="./train_mlp_fast", help="our trainer (default ./train_mlp_fast)")
    ap.add_argument("--python", default=sys.executable,
                    help="the Python with torch, for the PyTorch runs (default: this one, %s)" % sys.executable)
    ap.add_argument("--out-dir", default=None,
                    help="output directory (default dev/out/scaling; with --plot-only, the CSV's directory)")
    ap.add_argument("--hidden", type=lambda t: parse_int_list(t, "--hidden"), default=HIDDEN,
                    help="hidden widths H (default %s)" % ",".join(map(str, HIDDEN)))
    ap.add_argument("--batches", type=lambda t: parse_int_list(t, "--batches"), default=BATCHES,
                    help="batch sizes (default %s)" % ",".join(map(str, BATCHES)))
    ap.add_argument("--epochs", type=int, default=5, help="epochs per run, warm-up included (default 5)")
    ap.add_argument("--warmup", type=int, default=1, help="leading epochs left out of the median (default 1)")
    ap.add_argument("--epoch-ms", type=float, default=200.0,
                    help="aim each epoch at about this many ms of the slowest run's estimated work (default 200)")
    ap.add_argument("--min-steps", type=int, default=20, help="fewest steps an epoch (default 20)")
    ap.add_argument("--max-steps", type=int, default=200, help="most steps an epoch (default 200)")
    ap.add_argument("--seed", type=int, default=1337, help="seed for both sides (default 1337)")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="seconds: start no run that the estimate says would end past this (default 420)")
    ap.add_argument("--timeout", type=int, default=180, help="seconds allowed per run (default 180)")
    ap.add_argument("--worker-start-timeout", type=int, default=180, help=argparse.SUPPRESS)
    ap.add_argument("--ours-only", action="store_true", help="only ./train_mlp_fast, no PyTorch")
    ap.add_argument("--precisions", type=parse_precisions, default=PRECISIONS,
                    help="matmul precisions to run, of %s (default all: ours -x 0, 1, 2; PyTorch eager, eager with "
                         "TF32, autocast BF16)" % ",".join(PRECISIONS))
    ap.add_argument("--pytorch-device", default="cuda", help="torch device (default cuda; cpu: a smoke test)")
    ap.add_argument("--dry-run", action="store_true", help="print the plan and its expected seconds, run nothing")
    ap.add_argument("--plot-only", metavar="CSV", default=None,
                    help="redraw scaling.png and scaling.md from this CSV (no GPU needed), run nothing")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # the PyTorch child process
    args = ap.parse_args()
    if args.epochs < 1 or args.warmup < 0:
        ap.error("--epochs must be at least 1 and --warmup at least 0")
    if args.epochs <= args.warmup:
        ap.error("--epochs %d must be more than --warmup %d: no epoch would be timed" % (args.epochs, args.warmup))
    if args.min_steps < 1 or args.max_steps < args.min_steps:
        ap.error("expected 1 <= --min-steps <= --max-steps")
    return args


def main():
    args = parse_args()
    if args.data is None:
        args.data = bench.default_data_dir()
    if args.worker:
        return worker_main(args)
    if args.plot_only:
        out_dir = args.out_dir or os.path.dirname(os.path.abspath(args.plot_only))
        try:
            rows = read_csv(args.plot_only)
        except (OSError, ValueError, KeyError) as e:
            sys.exit("error: %s" % e)
        try:
            os.makedirs(out_dir, exist_ok=True)
            wrote = write_outputs(rows, out_dir, draw=True, with_csv=False)
        except OSError as e:
            sys.exit("error: cannot write in %s: %s ---> try: --out-dir DIR" % (out_dir, e))
        print("wrote %s" % ", ".join(wrote))
        return 0 if any(w.endswith(".png") for w in wrote) else 1

    n_train = bench.count_train_images(args.data)
    if args.dry_run:
        if not n_train:
            print("note: no dataset at %s: planning for %d training images" % (args.data, N_TRAIN_ASSUMED))
        plan = make_plan(args, n_train or N_TRAIN_ASSUMED)
        if not plan:
            sys.exit("error: no point to run (every batch is larger than the training set)")
        print_plan(plan, args, n_train or N_TRAIN_ASSUMED)
        return 0
    if not n_train:
        sys.exit("error: no MNIST-format dataset in %s ---> try: make data, or --data DIR" % args.data)
    if not (os.path.isfile(args.trainer) and os.access(args.trainer, os.X_OK)):
        sys.exit("error: %s not found or not executable ---> try: make train_mlp_fast" % args.trainer)
    if not make_plan(args, n_train):
        sys.exit("error: no point to run (every batch is larger than the %d training images)" % n_train)
    args.out_dir = args.out_dir or os.path.join(HERE, "out", "scaling")
    args.log_dir = os.path.join(args.out_dir, "logs")
    os.makedirs(args.log_dir, exist_ok=True)
    return sweep(args, n_train)


if __name__ == "__main__":
    sys.exit(main())
