#!/usr/bin/env bash
# dev/bench_multi_gpu.sh -- the scaling table of issue 22: samples/s of train_mlp_fast -g N against
# PyTorch DistributedDataParallel (dev/ddp_pytorch.py) on the same machine, in the same visit.
#
#   bash dev/bench_multi_gpu.sh [OUTDIR]            (default dev/out/multi_gpu)
#   GPUS="1 2" MODELS=big BATCHES="1024 2048" EPOCHS=4 bash dev/bench_multi_gpu.sh
#   OURS_ONLY=1 ...                                 (no PyTorch)
#   FROM_CSV=1 GPU_NAME="..." [NCCL_LINE=... RUN_DATE=...] bash dev/bench_multi_gpu.sh DIR   (no runs: the table and the plot again
#                                                    from DIR/multi_gpu.csv, e.g. on a machine without GPUs)
#
# For each model (wide = 784,1024,1024,10 relu; big = 784,4096,4096,10 relu: dev/bench.py's), each
# global batch (256 to 4096) and each GPU count (1, 2, 4, 8: those the machine has), FP32:
#   ./train_mlp_fast -g N -b B ... -o OUTDIR/ours_MODEL_gN_bB.csv   (-g 1: NCCL's path on one GPU)
#   ./train_mlp_fast -b B ...      -o OUTDIR/ours_MODEL_plain_bB.csv (once per batch: the one-GPU path)
#   python3 dev/ddp_pytorch.py --gpus N --batch B ... --json OUTDIR/ddp_MODEL_gN_bB.json
# A run's samples/s is the training set over its median epoch time, the first epoch (warm-up) left
# out (our CSV's epoch rows; ddp_pytorch.py's record). Then OUTDIR/multi_gpu.md: one row per
# (model, batch, GPUs) with both sides, our speed-up over our one-GPU plain run, and ours over DDP;
# OUTDIR/multi_gpu.csv the same numbers, and OUTDIR/multi_gpu.png (when matplotlib is there):
# samples/s against GPUs per batch. The table's title names the GPU, NCCL and the date.
# A failed run is a row with its exit status, not the end of the sweep. NCCL_NVLS_ENABLE is left as
# the machine sets it.
set -u
cd "$(dirname "$0")/.."
OUT=${1:-dev/out/multi_gpu}
MODELS=${MODELS:-"wide big"}
BATCHES=${BATCHES:-"256 512 1024 2048 4096"}
EPOCHS=${EPOCHS:-4}
SEED=${SEED:-1337}
DATA=${DATA:-}
mkdir -p "$OUT"

if [ -z "${FROM_CSV:-}" ]; then
if ! have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); then have=0; fi
if [ "$have" -lt 1 ]; then echo "error: no GPU here (nvidia-smi -L lists none)" >&2; exit 1; fi
GPUS=${GPUS:-$(for n in 1 2 4 8; do [ "$n" -le "$have" ] && echo -n "$n "; done)}
[ -x ./train_mlp_fast ] || { echo "error: ./train_mlp_fast is not built ---> try: make train_fast" >&2; exit 1; }
if ! ./train_mlp_fast ${DATA:+-d "$DATA"} -g 1 -b 1 -n 1 -t 1 -o "$OUT/probe.csv" -v 1 >"$OUT/probe.txt" 2>&1; then
  echo "error: ./train_mlp_fast -g 1 does not run: $(head -n 1 "$OUT/probe.txt")" >&2; exit 1
fi
echo "GPUs: $have here, sweeping -g $GPUS; models: $MODELS; batches: $BATCHES; $EPOCHS epochs each (1 warm-up)"

sizes_of() { case $1 in wide) echo 784,1024,1024,10 ;; big) echo 784,4096,4096,10 ;; esac; }
lr_of() { case $1 in wide) echo 0.1 ;; big) echo 0.05 ;; esac; }
data_flag=(); [ -n "$DATA" ] && data_flag=(-d "$DATA")

for model in $MODELS; do
  for b in $BATCHES; do
    common=(-m "$(sizes_of "$model")" -a relu -b "$b" -l "$(lr_of "$model")" -k 0.9 -n "$EPOCHS" -s "$SEED" -v 1000000)
    echo "=== $model, batch $b: one GPU, no -g"
    ./train_mlp_fast "${data_flag[@]}" "${common[@]}" -o "$OUT/ours_${model}_plain_b$b.csv" \
      >"$OUT/ours_${model}_plain_b$b.txt" 2>&1 || echo "    failed (exit $?): $(tail -n 1 "$OUT/ours_${model}_plain_b$b.txt")"
    for n in $GPUS; do
      if [ $((b % n)) -ne 0 ]; then continue; fi
      echo "=== $model, batch $b, $n GPU(s): ours, then DDP"
      ./train_mlp_fast "${data_flag[@]}" "${common[@]}" -g "$n" -o "$OUT/ours_${model}_g${n}_b$b.csv" \
        >"$OUT/ours_${model}_g${n}_b$b.txt" 2>&1 || echo "    ours failed (exit $?): $(tail -n 1 "$OUT/ours_${model}_g${n}_b$b.txt")"
      if [ -z "${OURS_ONLY:-}" ]; then
        python3 dev/ddp_pytorch.py ${DATA:+--data "$DATA"} --config "$model" --gpus "$n" --batch "$b" \
          --lr "$(lr_of "$model")" --epochs "$EPOCHS" --seed "$SEED" --quiet --json "$OUT/ddp_${model}_g${n}_b$b.json" \
          >"$OUT/ddp_${model}_g${n}_b$b.txt" 2>&1 || echo "    DDP failed: $(tail -n 1 "$OUT/ddp_${model}_g${n}_b$b.txt")"
      fi
    done
  done
done

fi   # (FROM_CSV)

# the table (and the plot) from the logs, or from multi_gpu.csv (FROM_CSV)
[ -n "${FROM_CSV:-}" ] && [ ! -f "$OUT/multi_gpu.csv" ] && { echo "error: FROM_CSV: no $OUT/multi_gpu.csv" >&2; exit 1; }
GPU_NAME=${GPU_NAME:-$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)} \
NCCL_LINE=${NCCL_LINE:-$(grep -o -m 1 "NCCL [0-9][0-9.]*" "$OUT/probe.txt" 2>/dev/null)} \
python3 - "$OUT" "$MODELS" "$BATCHES" "${GPUS:-1 2 4 8}" <<'EOF'
import csv, datetime, json, os, statistics, sys, textwrap
out, models, batches, gpus = sys.argv[1], sys.argv[2].split(), [int(b) for b in sys.argv[3].split()], [int(g) for g in sys.argv[4].split()]
from_csv = bool(os.environ.get("FROM_CSV"))

def ours(path):
    """samples/s: the training rows of an epoch over its median time, the first epoch left out"""
    if not os.path.exists(path):
        return None
    rows = [r for r in csv.DictReader(l for l in open(path) if not l.startswith("#")) if r["kind"] == "epoch"]
    sps = [float(r["samples_per_s"]) for r in rows if r.get("samples_per_s")]
    kept = sps[1:] or sps
    return statistics.median(kept) if kept else None

def ddp(path):
    if not os.path.exists(path):
        return None
    rec = json.load(open(path))
    return rec.get("samples_per_s") if rec.get("status") == "ok" else None

fmt = lambda x: "%.0f" % x if x else "failed"
ratio = lambda a, b: "%.2fx" % (a / b) if a and b else ""
rows = []
if from_csv:   # the rows a sweep wrote, its models and batches
    num = lambda v: float(v) if v not in ("", "None") else None
    for r in csv.DictReader(open(os.path.join(out, "multi_gpu.csv"))):
        rows.append(dict(model=r["model"], batch=int(r["batch"]), gpus=int(r["gpus"]), ours=num(r["ours"]),
                         plain=num(r["plain"]), ddp=num(r["ddp"])))
    models = list(dict.fromkeys(r["model"] for r in rows))
    batches = list(dict.fromkeys(r["batch"] for r in rows))
for m in models if not from_csv else []:
    for b in batches:
        plain = ours(os.path.join(out, "ours_%s_plain_b%d.csv" % (m, b)))
        for n in gpus:
            if b % n:
                continue
            o = ours(os.path.join(out, "ours_%s_g%d_b%d.csv" % (m, n, b)))
            d = ddp(os.path.join(out, "ddp_%s_g%d_b%d.json" % (m, n, b)))
            rows.append(dict(model=m, batch=b, gpus=n, ours=o, plain=plain, ddp=d))
title = "train_mlp_fast -g N against PyTorch DDP, FP32, %s, %s, %s" % (
    os.environ.get("GPU_NAME", "?"), os.environ.get("NCCL_LINE", "NCCL"), os.environ.get("RUN_DATE") or datetime.date.today().isoformat())
with open(os.path.join(out, "multi_gpu.md"), "w") as f:
    f.write("%s (`bash dev/bench_multi_gpu.sh`; samples/s, median epoch, first left out)\n\n" % title)
    f.write("| model | batch | GPUs | ours samples/s | ours / one GPU without -g | DDP samples/s | ours / DDP |\n")
    f.write("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
    for r in rows:
        f.write("| %s | %d | %d | %s | %s | %s | %s |\n" % (r["model"], r["batch"], r["gpus"], fmt(r["ours"]),
                ratio(r["ours"], r["plain"]), fmt(r["ddp"]), ratio(r["ours"], r["ddp"])))
if not from_csv:
    with open(os.path.join(out, "multi_gpu.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["model", "batch", "gpus", "ours", "plain", "ddp"])
        w.writeheader()
        w.writerows(rows)
print(open(os.path.join(out, "multi_gpu.md")).read())
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    print("(no matplotlib: no plot)")
    sys.exit(0)
fig, axes = plt.subplots(1, len(models), figsize=(6 * len(models), 4.5), squeeze=False)
for ax, m in zip(axes[0], models):
    for b in batches:
        pts = [r for r in rows if r["model"] == m and r["batch"] == b]
        line, = ax.plot([r["gpus"] for r in pts], [r["ours"] or float("nan") for r in pts], "o-", label="ours, batch %d" % b)
        ax.plot([r["gpus"] for r in pts], [r["ddp"] or float("nan") for r in pts], "x--", color=line.get_color(),
                label="DDP, batch %d" % b)
    ax.set_title(m)
    ax.set_xlabel("GPUs")
    ax.set_ylabel("samples/s")
    ax.set_xscale("log", base=2)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
fig.suptitle("\n".join(textwrap.wrap(title, 60 * len(models))), fontsize=9)
fig.tight_layout()
fig.savefig(os.path.join(out, "multi_gpu.png"), dpi=120)
print("plot: %s" % os.path.join(out, "multi_gpu.png"))
EOF
