#!/usr/bin/env bash
# Per-kernel GPU time of one training step of the fast trainer, with Nsight Compute (ncu):
# profiles 40 kernels from the 251st launch on (after the graphs are captured; up to 30 epochs of at
# most 40 steps, so that a model of few steps an epoch gets there too) and
# prints one line per kernel: name and duration in microseconds.
#   bash dev/profile_step.sh [train_mlp_fast flags...]      e.g. -m 784,1024,1024,10 -a relu -b 256
# TRAINER: the binary (default ./train_mlp_fast); DATA: the dataset directory (default: the first of
# data/mnist, data/fashion-mnist, .data/fashion-mnist, /usr/share/datasets/fashion-mnist with the data)
set -uo pipefail
TRAINER=${TRAINER:-./train_mlp_fast}
DATA=${DATA:-}
if [ -z "$DATA" ]; then
  for d in data/mnist data/fashion-mnist .data/fashion-mnist /usr/share/datasets/fashion-mnist; do
    { [ -e "$d/train-images-idx3-ubyte.gz" ] || [ -e "$d/train-images-idx3-ubyte" ]; } && { DATA=$d; break; }
  done
fi
out=$(mktemp)
ncu --clock-control none --graph-profiling node --metrics gpu__time_duration.sum --csv --print-units base \
    --launch-skip 250 --launch-count 40 \
    "$TRAINER" -d "$DATA" -n 30 -t 40 -v 40 -o /tmp/profile_step.csv "$@" >"$out" 2>&1
python3 - "$out" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, body = rows[0], rows[1:]
ki, vi = head.index("Kernel Name"), head.index("Metric Value")
total = 0.0
for r in body:
    us = float(r[vi].replace(",", "")) / 1e3
    total += us
    print(f"{us:9.2f} us  {r[ki][:110]}")
print(f"{total:9.2f} us  total of {len(body)} kernels")
PY
