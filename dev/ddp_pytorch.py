#!/usr/bin/env python3
"""
ddp_pytorch.py -- PyTorch DistributedDataParallel, the peer of train_mlp_fast -g N: the same MLPs,
the same data-parallel split, timed per epoch. dev/bench_multi_gpu.sh runs it beside our trainer.

    python3 dev/ddp_pytorch.py --config big --gpus 2 --batch 8192 --epochs 30 --json /tmp/ddp.json
    python3 dev/ddp_pytorch.py --config wide --gpus 1 --batch 256 --mode eager_tf32
    python3 dev/ddp_pytorch.py --config big --gpus 4 --batch 4096 --mode eager_bf16 --bucket-cap-mb 50

No torchrun: one process per GPU started by torch.multiprocessing.spawn, the NCCL backend, the
rendezvous on a free TCP port of this host. Each rank holds the whole training set on its GPU
(float32 pixel/255, as bench_pytorch.py does), draws the same epoch permutation from the same
seeded generator, and takes its share of every global batch of --batch rows: rows
[r*B/N, (r+1)*B/N) (torch.tensor_split: the epoch's short last batch split as evenly as possible,
as train_mlp_fast -g does). DDP averages the ranks' gradients (sum / N); each rank's loss is its
rows' summed cross-entropy times N / (the global batch's rows), so the average is the global
batch's mean gradient, as on one GPU. SGD with momentum (--lr, --momentum), rank 0's initial
weights broadcast by DDP itself.

DDP at its best settings for this loop: gradient_as_bucket_view=True (the gradients live in DDP's
buckets, no copy into them), static_graph=True (the same parameters get gradients in the same order
at every step, so DDP can skip its per-step search for unused ones and reorder its buckets after
the first step), bucket_cap_mb as --bucket-cap-mb says (default: DDP's own, 25 MB), and SGD with
fused=True (one kernel for every parameter) where this torch has it, else foreach=True.

Timing: wall clock around each epoch with torch.cuda.synchronize and a barrier on every rank
(rank 0 reports it); the first --warmup epochs are left out, the median of the rest is the epoch
time; samples/s = training images / epoch time. The test set is evaluated by rank 0 after the
last epoch. --epochs should leave at least 200 full steps after the warm-up (the record's
steps_timed): at batch 8192 an epoch of Fashion-MNIST is 7 full steps, so --epochs 30.
Modes, as train_mlp_fast's -x:
    eager        FP32 matmuls (-x 0)
    eager_tf32   TF32 matmuls, FP32 everywhere else (-x 1)
    eager_bf16   autocast BF16 around the forward pass and the loss: the products in BF16, the
                 weights, their gradients, the all-reduce and SGD in FP32 (-x 2)

JSON (--json FILE, written by rank 0): one record: impl "pytorch_ddp", config, mode, gpus, batch,
gpu (name of GPU 0), epoch_s_median, epoch_s_all, samples_per_s, test_acc, test_loss, torch,
nccl (version), status ("ok" or "failed: ..."); and epochs, warmup, steps_per_epoch (full steps),
steps_timed (full steps in the epochs after the warm-up), optimizer ("sgd fused" or "sgd foreach"),
gradient_as_bucket_view, static_graph, bucket_cap_mb (null: DDP's default).
"""

import argparse
import inspect
import json
import os
import socket
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_pytorch as bp  # noqa: E402  (the IDX reader, the dataset on the GPU, the model)

CONFIGS = {  # the shapes of dev/bench.py; the batch comes from --batch
    "small": dict(sizes=[784, 128, 10], act="sigmoid"),
    "wide": dict(sizes=[784, 1024, 1024, 10], act="relu"),
    "big": dict(sizes=[784, 4096, 4096, 10], act="relu"),
}


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


MODES = {  # mode -> (TF32 on?, autocast dtype name or None)
    "eager": (False, None),
    "eager_tf32": (True, None),
    "eager_bf16": (False, "bfloat16"),
}


def make_sgd(torch, params, lr, momentum):
    """SGD with momentum in one kernel for all parameters (fused) where torch has it, else foreach.
    Returns (optimizer, its name for the record)."""
    if "fused" in inspect.signature(torch.optim.SGD).parameters:
        return torch.optim.SGD(params, lr=lr, momentum=momentum, fused=True), "sgd fused"
    return torch.optim.SGD(params, lr=lr, momentum=momentum, foreach=True), "sgd foreach"


def worker(rank, args, port, result_path):
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:%d" % port, rank=rank, world_size=args.gpus)
    tf32, autocast = MODES[args.mode]
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    cfg = CONFIGS[args.config]
    torch.manual_seed(args.seed)  # the same initial weights on every rank (DDP broadcasts rank 0's anyway)
    model = bp.build_model(torch, cfg["sizes"], cfg["act"]).to(device)
    bucket = {} if args.bucket_cap_mb is None else dict(bucket_cap_mb=args.bucket_cap_mb)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank], gradient_as_bucket_view=True,
                                                    static_graph=True, **bucket)
    opt, opt_name = make_sgd(torch, ddp.parameters(), args.lr, args.momentum)

    def loss_of(x, y, scale):  # the rank's summed cross-entropy times N / (the global batch's rows)
        if autocast:  # the products in BF16; cross_entropy runs in FP32 under autocast
            with torch.autocast(device_type="cuda", dtype=getattr(torch, autocast)):
                return F.cross_entropy(ddp(x), y, reduction="sum") * scale
        return F.cross_entropy(ddp(x), y, reduction="sum") * scale

    data = bp.Data(torch, args.data, device, args.limit)
    n, B, N = data.n_train, args.batch, args.gpus
    gen = torch.Generator(device="cpu")
    gen.manual_seed(args.seed)
    times = []
    for epoch in range(args.epochs):
        perm = torch.randperm(n, generator=gen).to(device)  # the same on every rank
        torch.cuda.synchronize(device)
        dist.barrier()
        t0 = time.perf_counter()
        for start in range(0, n, B):
            idx = perm[start:start + B]
            gbs = idx.shape[0]
            mine = torch.tensor_split(idx, N)[rank]
            loss = loss_of(data.Xtr[mine], data.Ytr[mine], N / gbs)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        torch.cuda.synchronize(device)
        dist.barrier()
        times.append(time.perf_counter() - t0)
        if rank == 0 and not args.quiet:
            print("ddp %s %s %d GPU(s) batch %d: epoch %d %.3f s" % (args.config, args.mode, N, B, epoch + 1, times[-1]),
                  flush=True)
    if rank == 0:
        test_acc, test_loss = bp.evaluate(torch, model, data.Xte, data.Yte)
        kept = times[args.warmup:] or times
        med = statistics.median(kept)
        full = n // B  # full steps an epoch
        nccl = torch.cuda.nccl.version()
        record = dict(impl="pytorch_ddp", config=args.config, mode=args.mode, gpus=N, batch=B,
                      gpu=torch.cuda.get_device_name(0), epoch_s_median=med, epoch_s_all=times,
                      samples_per_s=n / med, test_acc=test_acc, test_loss=test_loss, torch=torch.__version__,
                      nccl=".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl), status="ok",
                      epochs=args.epochs, warmup=args.warmup, steps_per_epoch=full, steps_timed=full * len(kept),
                      optimizer=opt_name, gradient_as_bucket_view=True, static_graph=True,
                      bucket_cap_mb=args.bucket_cap_mb)
        with open(result_path, "w") as f:
            json.dump(record, f)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description="PyTorch DDP on N GPUs, the peer of train_mlp_fast -g N")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="big")
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2048, help="the global batch, split over the GPUs")
    ap.add_argument("--mode", choices=sorted(MODES), default="eager",
                    help="eager (FP32), eager_tf32, eager_bf16 (autocast BF16, FP32 weights)")
    ap.add_argument("--epochs", type=int, default=4, help="epochs, warm-up included (default 4)")
    ap.add_argument("--warmup", type=int, default=1, help="leading epochs left out of the median (default 1)")
    ap.add_argument("--bucket-cap-mb", type=float, default=None,
                    help="DDP's gradient bucket size in MB (default: DDP's own)")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--data", default=None, help="MNIST-format directory (default: the trainers' places)")
    ap.add_argument("--limit", type=int, default=0, help="train on the first N images only (0: all)")
    ap.add_argument("--json", default=None, help="write the record to this file")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args()
    args.data = args.data or bp.default_data_dir()

    import torch
    import torch.multiprocessing as mp
    if not torch.cuda.is_available() or torch.cuda.device_count() < args.gpus:
        raise SystemExit("error: --gpus %d: %d CUDA GPU(s) visible to PyTorch"
                         % (args.gpus, torch.cuda.device_count() if torch.cuda.is_available() else 0))
    if args.batch < args.gpus:
        raise SystemExit("error: --batch %d is smaller than --gpus %d" % (args.batch, args.gpus))
    if args.epochs < 1 or not 0 <= args.warmup < args.epochs:
        raise SystemExit("error: --epochs %d --warmup %d: at least one epoch must be timed after the warm-up "
                         "---> try: --epochs %d" % (args.epochs, args.warmup, args.warmup + 1))
    if args.bucket_cap_mb is not None and not args.bucket_cap_mb > 0:
        raise SystemExit("error: --bucket-cap-mb %g: must be above 0" % args.bucket_cap_mb)
    result = args.json or os.path.join("/tmp", "ddp_pytorch_%d.json" % os.getpid())
    if os.path.exists(result):
        os.unlink(result)
    try:
        mp.spawn(worker, args=(args, free_port(), result), nprocs=args.gpus, join=True)
    except Exception as e:  # a rank failed: one record that says so
        record = dict(impl="pytorch_ddp", config=args.config, mode=args.mode, gpus=args.gpus, batch=args.batch,
                      status="failed: " + bp.first_line(e))
        with open(result, "w") as f:
            json.dump(record, f)
        print("error: %s" % record["status"], file=sys.stderr)
        return 1
    with open(result) as f:
        record = json.load(f)
    print("ddp %s %s %d GPU(s) batch %d: %.0f samples/s (median epoch %.3f s), test accuracy %.2f%%"
          % (args.config, args.mode, args.gpus, args.batch, record["samples_per_s"], record["epoch_s_median"],
             100 * record["test_acc"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
