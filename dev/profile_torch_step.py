#!/usr/bin/env python3
"""
profile_torch_step.py -- per-kernel GPU time of one training step of PyTorch's peer of
train_mlp_fast (the model bench_pytorch.py builds, SGD with momentum, fused), the counterpart of
dev/profile_step.sh: which kernels cuBLAS picks for each product, and how long each takes.

    python3 dev/profile_torch_step.py -m 784,2048,2048,2048,10 -a relu -b 512 -x 2

-x 0: FP32, 1: TF32, 2: autocast BF16, as train_mlp_fast's -x. Random inputs (the kernels do not
depend on the values). Prints one line per kernel of a step, averaged over --steps profiled steps,
after --warmup steps.
"""

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-m", required=True, help="layer sizes, as train_mlp_fast's -m")
    ap.add_argument("-a", default="relu", choices=("relu", "sigmoid", "tanh"))
    ap.add_argument("-b", type=int, default=512, help="batch size")
    ap.add_argument("-x", type=int, default=0, choices=(0, 1, 2), help="precision")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()

    import torch
    import bench_pytorch
    from torch.profiler import profile, ProfilerActivity

    sizes = [int(s) for s in a.m.split(",")]
    torch.backends.cuda.matmul.allow_tf32 = a.x == 1
    torch.backends.cudnn.allow_tf32 = a.x == 1
    dev = torch.device("cuda")
    model = bench_pytorch.build_model(torch, sizes, a.a).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, fused=True)
    x = torch.rand(a.b, sizes[0], device=dev)
    y = torch.randint(0, sizes[-1], (a.b,), device=dev)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=a.x == 2):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
    total = collections.OrderedDict()
    count = collections.Counter()
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            total[e.name] = total.get(e.name, 0.0) + e.device_time
            count[e.name] += 1
    step_us = 0.0
    print("# %s %s batch %d -x %d on %s, per step (mean of %d)" % (a.m, a.a, a.b, a.x,
          torch.cuda.get_device_name(dev), a.steps))
    for name, us in sorted(total.items(), key=lambda kv: -kv[1]):
        per = us / a.steps
        step_us += per
        print("%9.2f us  x%-3g %s" % (per, count[name] / a.steps, name[:110]))
    print("%9.2f us  total of the step's kernels" % step_us)


if __name__ == "__main__":
    main()
