#!/usr/bin/env python3
"""
plot_log.py -- the loss and accuracy curves of a training run, from its CSV log, as a PNG.

    python3 dev/plot_log.py LOG.csv [LOG2.csv ...] -o curves.png

Every trainer writes the same CSV (run/log.h): a "# PROGRAM: flags" line, then the columns
kind,epoch,step,global_step,loss,accuracy,ms,samples_per_s,mem_mb,note (logs without the note
column are read too). The last row, of kind stop, says in its note why the run ended: a run
that did not finish is labelled with that reason, and a resumed run (a resume row: the log of
a run continued with -r) gets a dotted line at the step it resumed from. The left panel draws the
training loss of each logged step (the mean over the steps since the line before) against the
global step, and each epoch's test (or, with -H, validation) loss at the step it was evaluated;
the right panel the test or validation accuracy after each epoch. Several logs are drawn in one
picture, each labelled with its program and flags, to compare runs. Needs matplotlib.
"""
import argparse
import csv
import os
import sys


def read_log(path):
    """The log's settings line and its rows (dicts of the CSV's columns)."""
    settings, lines = "", []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#"):
                settings = line[1:].strip()
            elif line.strip():
                lines.append(line)
    if not lines or not lines[0].startswith("kind,"):
        raise ValueError(f"{path}: not a mlp.cu CSV log (no 'kind,...' header line)")
    header = lines[0].strip().split(",")
    for column in ("kind", "epoch", "global_step", "loss", "accuracy"):
        if column not in header:
            raise ValueError(f"{path}: the log has no '{column}' column (written by an older mlp.cu?)")
    return settings, list(csv.DictReader(lines))


def number(x):
    return float(x) if x not in ("", None) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.strip().split("\n")[1].strip(),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+", help="CSV logs of train_mlp, train_mlp_fast or train_mlp_cpu")
    ap.add_argument("-o", "--out", default="curves.png", help="the PNG to write (default curves.png)")
    args = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("error: dev/plot_log.py needs matplotlib ---> try: pip install matplotlib (or apt-get install "
                 "python3-matplotlib)")
    runs = []
    for path in args.logs:
        try:
            runs.append((path,) + read_log(path))
        except (OSError, ValueError) as e:
            sys.exit(f"error: {e}")

    def flags_of(settings):  # "-m 784,128,10 -a sigmoid ..." -> {"-m": "784,128,10", ...}
        words = settings.split(":", 1)[1].split() if ":" in settings else []
        return {w: words[i + 1] for i, w in enumerate(words[:-1]) if w.startswith("-") and len(w) == 2}

    all_flags = [flags_of(settings) for _, settings, _ in runs]
    # a run's label: its program and the flags in which the runs differ (one run: its model)
    differ = sorted({f for fl in all_flags for f in fl if len({x.get(f) for x in all_flags}) > 1} - {"-o", "-d"})
    if not differ:
        differ = ["-m", "-a", "-b"]
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    for (path, settings, rows), fl in zip(runs, all_flags):
        program = settings.split(":")[0] or os.path.basename(path)
        label = program + " " + " ".join(f"{f} {fl[f]}" for f in differ if f in fl)
        stops = [(r.get("note") or "").strip() for r in rows if r["kind"] == "stop"]
        if stops and stops[-1] != "finished":  # the last run of the log did not finish: say why
            label += f" (stopped: {stops[-1][:40]})"
        train = [(number(r["global_step"]), number(r["loss"])) for r in rows if r["kind"] == "train"]
        evals = [r for r in rows if r["kind"] in ("eval", "val")]
        line, = ax_loss.plot([s for s, _ in train], [l for _, l in train], lw=1, label=f"{label}: train")
        for r in rows:
            if r["kind"] == "resume":
                ax_loss.axvline(number(r["global_step"]), color=line.get_color(), ls=":", lw=1)
        if evals:
            which = "validation" if any(r["kind"] == "val" for r in evals) else "test"
            ev = [r for r in evals if r["kind"] == ("val" if which == "validation" else "eval")]
            ax_loss.plot([number(r["global_step"]) for r in ev], [number(r["loss"]) for r in ev], "o--",
                         color=line.get_color(), label=f"{label}: {which}")
            ax_acc.plot([int(r["epoch"]) for r in ev], [100 * number(r["accuracy"]) for r in ev], "o-",
                        color=line.get_color(), label=f"{label}: {which}")
    ax_loss.set_xlabel("step")
    ax_loss.set_ylabel("loss (mean since the last log line)")
    ax_loss.set_yscale("log")
    ax_loss.grid(alpha=0.3)
    ax_loss.legend(fontsize=8)
    ax_acc.set_xlabel("epoch")
    ax_acc.xaxis.get_major_locator().set_params(integer=True)
    ax_acc.set_ylabel("accuracy after the epoch (%)")
    ax_acc.grid(alpha=0.3)
    ax_acc.legend(fontsize=7)
    fig.tight_layout()
    tmp = args.out + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, args.out)  # a reader never sees half a picture
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
