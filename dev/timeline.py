#!/usr/bin/env python3
"""dev/timeline.py: a training step's kernels inside its CUDA graph, from dev/timeline.c's CSV.

    make dev/bin/libtimeline.so
    CUDA_INJECTION64_PATH=$PWD/dev/bin/libtimeline.so TIMELINE_CSV=/tmp/t.csv \\
        ./train_mlp_fast -m 784,1024,1024,10 -a relu -b 256 -n 3
    python3 dev/timeline.py /tmp/t.csv [--marker gather_batch_step_kernel] [--width 120]

The graph path (-f 1) replays the same graph of log-interval steps again and again; its kernel nodes
keep their ids from replay to replay, and the ids follow the order the step was captured in. So the
most frequent graph's replays (the first one left out: its caches are cold) are cut into steps at
the kernel the trainer enqueues first in a step (the marker: the gather of the next batch), and the
steps whose sequence of kernels is the most common one are laid over each other.
Prints the median step: each kernel's start and end after the step's first kernel starts, its
duration on the GPU inside the graph (with the other streams' kernels beside it and warm caches,
unlike ncu's), its stream and blocks, and a bar for each (one column per --us microseconds), then
the step's median span and the median time from one step's start to the next (the period: an epoch
is about steps x period). Where the step holds NCCL kernels (a rank of train_mlp_fast -g N; with
TIMELINE_CSV=/tmp/t_%p.csv each rank writes its own file), also the all-reduces' share of the
period, and how much of their time another kernel ran beside them (hidden: they then share the SMs
and memory with it, so hidden is not free) and how much they ran alone (exposed).
"""
import argparse
import bisect
import collections
import csv
import shutil
import statistics
import subprocess
import sys


def demangle(names):
    """mangled -> readable, through c++filt when there is one"""
    names = sorted(set(names))
    if not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short(name, width=56):
    """a kernel's name without its parameter list, its template arguments cut to fit"""
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):   # the parameter list: the first '(' outside template brackets
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "(" and depth == 0:
            cut = i
            break
    s = name[:cut]
    for prefix in ("void ", "fast::"):
        s = s.replace(prefix, "")
    return s if len(s) <= width else s[: width - 3] + "..."


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--marker", default="gather_batch_step_kernel",
                    help="the kernel each step's capture starts with (default: %(default)s)")
    ap.add_argument("--us", type=float, default=1.0, help="microseconds per column of the bars (default 1)")
    ap.add_argument("--width", type=int, default=110, help="the bars' widest column (default 110)")
    a = ap.parse_args()

    try:
        with open(a.csv, newline="") as f:
            rows = [r for r in csv.DictReader(f)]
    except OSError as e:
        sys.exit(f"error: {a.csv}: {e.strerror}")
    if not rows or "graph_node" not in rows[0]:
        sys.exit(f"error: {a.csv}: not a dev/timeline.c CSV (no rows, or no graph_node column)")
    names = demangle(r["name"] for r in rows)
    for r in rows:
        r["short"] = short(names[r["name"]])
        for k in ("start_ns", "end_ns", "graph_id", "graph_node", "grid", "stream"):
            r[k] = int(r[k])
    graphs = collections.Counter(r["graph_id"] for r in rows if r["graph_id"])
    if not graphs:
        sys.exit("error: no kernel ran from a CUDA graph: run the trainer on its graph path (-f 1)")
    gid = graphs.most_common(1)[0][0]
    g = sorted((r for r in rows if r["graph_id"] == gid), key=lambda r: r["start_ns"])

    replays, seen = [[]], set()   # a node seen again: the next replay has begun
    for r in g:
        if r["graph_node"] in seen:
            replays.append([])
            seen = set()
        seen.add(r["graph_node"])
        replays[-1].append(r)
    replays = replays[1:]   # the first replay: cold caches
    if not replays:
        sys.exit("error: the graph ran once: run more steps (more epochs, or a smaller -v)")

    steps, periods = [], []
    for rep in replays:
        order = sorted(rep, key=lambda r: r["graph_node"])   # the capture order
        cur, these = None, []
        for r in order:
            if a.marker in r["short"] and (cur is None or any(a.marker not in x["short"] for x in cur)):
                cur = []
                these.append(cur)
            if cur is not None:
                cur.append(r)
        starts = [min(x["start_ns"] for x in s) for s in these]
        periods += [(b - c) / 1e3 for c, b in zip(starts, starts[1:])]
        steps += these
    if not steps:
        sys.exit(f"error: no step starts with a kernel named like {a.marker!r} (--marker)")
    sig = collections.Counter(tuple(x["short"] for x in s) for s in steps).most_common(1)[0][0]
    same = [s for s in steps if tuple(x["short"] for x in s) == sig]

    print(f"graph {gid}: {len(replays)} replays after the first, {len(same)} steps of {len(sig)} kernels "
          f"({len(steps) - len(same)} other steps left out)")
    med = []
    for k in range(len(sig)):
        t0 = [min(x["start_ns"] for x in s) for s in same]
        st = statistics.median((s[k]["start_ns"] - t) / 1e3 for s, t in zip(same, t0))
        en = statistics.median((s[k]["end_ns"] - t) / 1e3 for s, t in zip(same, t0))
        du = statistics.median((s[k]["end_ns"] - s[k]["start_ns"]) / 1e3 for s in same)
        med.append((st, en, du, same[0][k]))
    streams = {sid: i for i, sid in enumerate(sorted({m[3]["stream"] for m in med}))}
    print(f"{'kernel':56s} {'str':>3s} {'blocks':>6s} {'start':>7s} {'end':>7s} {'us':>6s}")
    for st, en, du, r in sorted(med, key=lambda m: m[0]):
        print(f"{r['short']:56s} {streams[r['stream']]:3d} {r['grid']:6d} {st:7.2f} {en:7.2f} {du:6.2f}")
    print(f"\none column = {a.us:g} us; each kernel from its median start to its median end")
    for st, en, du, r in sorted(med, key=lambda m: m[0]):
        c0, c1 = int(st / a.us), max(int(st / a.us) + 1, int(round(en / a.us)))
        bar = (" " * min(c0, a.width) + "#" * max(0, min(c1, a.width) - c0))[: a.width]
        print(f"{r['short'][:28]:28s} {streams[r['stream']]} |{bar}")
    print()
    comm_summary(g, same, periods)
    span = statistics.median((max(x["end_ns"] for x in s) - min(x["start_ns"] for x in s)) / 1e3 for s in same)
    print(f"\nstep span (first start to last end): median {span:.2f} us")
    if periods:
        print(f"step period (one step's start to the next's): median {statistics.median(periods):.2f} us "
              f"over {len(periods)} pairs")


def comm_summary(g, same, periods):
    """the NCCL kernels of each step, and the other kernels of their stream (the SGD steps after the
    sums): their time, and how much of it the other streams' kernels ran beside them"""
    nccl = lambda r: r["short"].startswith("ncclDevKernel") or r["short"].startswith("ncclKernel")
    if not periods or not any(nccl(x) for x in same[0]):
        return
    comm = {x["stream"] for s in same for x in s if nccl(x)}
    merged = []   # the union of the other streams' kernels' intervals, over the whole graph's replays
    for r in sorted((r for r in g if r["stream"] not in comm), key=lambda r: r["start_ns"]):
        if merged and r["start_ns"] <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], r["end_ns"])
        else:
            merged.append([r["start_ns"], r["end_ns"]])
    starts = [m[0] for m in merged]

    def beside(a, b):   # ns of [a, b) that the union covers
        i, t = max(0, bisect.bisect_right(starts, a) - 1), 0
        while i < len(merged) and merged[i][0] < b:
            t += max(0, min(b, merged[i][1]) - max(a, merged[i][0]))
            i += 1
        return t

    p = statistics.median(periods)
    for what, pick in (("all-reduces (NCCL kernels)", nccl),
                       ("the SGD steps after them (their stream's other kernels)",
                        lambda r: r["stream"] in comm and not nccl(r))):
        total = statistics.median(sum(x["end_ns"] - x["start_ns"] for x in s if pick(x)) / 1e3 for s in same)
        hidden = statistics.median(sum(beside(x["start_ns"], x["end_ns"]) for x in s if pick(x)) / 1e3 for s in same)
        print(f"{what}: {total:.1f} us a step, {100 * total / p:.1f}% of the period; {hidden:.1f} us of it beside "
              f"other kernels (hidden), {total - hidden:.1f} us alone (exposed, {100 * (total - hidden) / p:.1f}%)")


if __name__ == "__main__":
    main()
