#!/usr/bin/env bash
# dev/bench_multi_gpu.sh -- how train_mlp_fast scales over the GPUs of one machine, against PyTorch
# DistributedDataParallel (dev/ddp_pytorch.py at its best settings), in every precision, in one visit.
#
#   bash dev/bench_multi_gpu.sh [OUTDIR]              (default dev/out/multi_gpu)
#   GPUS="1 2" PRECISIONS=bf16 BATCHES=8192 bash dev/bench_multi_gpu.sh     (a part of the sweep)
#   MODELS="big wide" ...       (the wide model too, a secondary set)
#   OURS_ONLY=1 ...             (no PyTorch)     SOCKET=0 ...  ACC=0 ...  SPEED=0 ...  (leave those sections out)
#   APPEND=1 ...                (add to OUTDIR's sweep: its table keeps the points swept before; a
#                               sweep too long for one command, split by PRECISIONS, in two calls)
#   FROM_CSV=1 [GPU_NAME=... NCCL_LINE=... RUN_DATE=...] bash dev/bench_multi_gpu.sh DIR
#                               (no runs: the table and the pictures again from DIR's CSV files)
#
# Speed. For each model (big = 784,4096,4096,10 relu lr 0.05; wide = 784,1024,1024,10 relu lr 0.1),
# each precision (fp32, tf32, bf16: train_mlp_fast -x 0, 1, 2 against DDP's modes eager, eager_tf32,
# eager_bf16), each global batch (8192 and 4096) and each GPU count (1, 2, 4, 8: those present):
#   1 GPU:   ./train_mlp_fast -x X -b B ...   (without -g: the one-GPU trainer, the speed-ups' base)
#   N GPUs:  ./train_mlp_fast -x X -b B -g N ...
#   and      python3 dev/ddp_pytorch.py --mode M --gpus N --batch B ...
# Every run trains enough epochs for MIN_STEPS full steps after its WARMUP epochs (-n 30 at batch
# 8192: an epoch of 60000 images is 7 full steps), under a time limit of RUN_TIMEOUT seconds. Its
# samples/s is the median over the epochs after the warm-up of (training images / epoch time): our
# CSV's epoch rows, ddp_pytorch.py's record.
# Sockets (SOCKET=1, 2 GPUs or more): a small model on -g 2 with NCCL's default transport, and again
# with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket (the path between machines); NCCL_DEBUG=INFO
# must say "via NET/Socket" for the second.
# Accuracy (ACC=1): the big model at batch ACC_BATCH (8192), -n ACC_EPOCHS (5), seeds ACC_SEEDS (1 2 3),
# one GPU without -g against the most GPUs swept, each of ACC_PRECISIONS (PRECISIONS): the mean test
# accuracy of each side, and the difference.
#
# Files in OUTDIR: multi_gpu.md (the tables), multi_gpu.csv, socket.csv, accuracy.csv (their numbers),
# multi_gpu.svg (samples/s against GPUs: a panel per model and batch, a colour per precision, ours
# solid, DDP dashed), multi_gpu.png (the same, where matplotlib is installed), plan.txt (the points
# swept: the table has one row per point), each run's log. The table's title names the GPU, NCCL
# (from our settings box), torch and the date. A failed run is a row that says so, not the end of the
# sweep. The script prints its total time; NCCL_NVLS_ENABLE is left as the machine sets it.
set -u
cd "$(dirname "$0")/.."
T0=$(date +%s)
OUT=${1:-dev/out/multi_gpu}
uniq_words() { echo $(echo "$*" | tr " " "\n" | awk 'NF && !seen[$0]++'); }
MODELS=$(uniq_words "${MODELS:-big}")
PRECISIONS=$(uniq_words "${PRECISIONS:-fp32 tf32 bf16}")
BATCHES=$(uniq_words "${BATCHES:-8192 4096}")
MIN_STEPS=${MIN_STEPS:-200}
WARMUP=${WARMUP:-1}
RUN_TIMEOUT=${RUN_TIMEOUT:-150}
SEED=${SEED:-1337}
SOCKET=${SOCKET:-1}
ACC=${ACC:-1}
ACC_SEEDS=$(uniq_words "${ACC_SEEDS:-1 2 3}")
ACC_PRECISIONS=$(uniq_words "${ACC_PRECISIONS:-$PRECISIONS}")
ACC_EPOCHS=${ACC_EPOCHS:-5}
ACC_BATCH=${ACC_BATCH:-8192}
mkdir -p "$OUT"

sizes_of() { case $1 in wide) echo 784,1024,1024,10 ;; big) echo 784,4096,4096,10 ;; esac; }
lr_of() { case $1 in wide) echo 0.1 ;; big) echo 0.05 ;; esac; }
x_of() { case $1 in fp32) echo 0 ;; tf32) echo 1 ;; bf16) echo 2 ;; esac; }
mode_of() { case $1 in fp32) echo eager ;; tf32) echo eager_tf32 ;; bf16) echo eager_bf16 ;; esac; }
for m in $MODELS; do [ -n "$(sizes_of "$m")" ] || { echo "error: MODELS: no model '$m' ---> try: big, wide" >&2; exit 2; }; done
for p in $PRECISIONS $ACC_PRECISIONS; do [ -n "$(x_of "$p")" ] || { echo "error: PRECISIONS: no precision '$p' ---> try: fp32, tf32, bf16" >&2; exit 2; }; done

if [ -z "${FROM_CSV:-}" ]; then
if ! have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU'); then have=0; fi
if [ "$have" -lt 1 ]; then echo "error: no GPU here (nvidia-smi -L lists none)" >&2; exit 1; fi
GPUS=$(uniq_words "${GPUS:-$(for n in 1 2 4 8; do [ "$n" -le "$have" ] && echo -n "$n "; done)}")
for n in $GPUS; do
  [ "$n" -le "$have" ] 2>/dev/null || { echo "error: GPUS: '$n': this machine has $have GPU(s)" >&2; exit 2; }
done
[ -x ./train_mlp_fast ] || { echo "error: ./train_mlp_fast is not built ---> try: make train_fast" >&2; exit 1; }
DATA=${DATA:-$(python3 -c "import sys; sys.path.insert(0, 'dev'); import bench_pytorch; print(bench_pytorch.default_data_dir())")}
N_TRAIN=$(python3 - "$DATA" <<'EOF'
import gzip, os, struct, sys
p = os.path.join(sys.argv[1], "train-labels-idx1-ubyte")
f = open(p, "rb") if os.path.exists(p) else gzip.open(p + ".gz", "rb")
print(struct.unpack(">II", f.read(8))[1])
EOF
) || { echo "error: no training labels in $DATA ---> try: DATA=DIR (an MNIST-format directory)" >&2; exit 1; }
if ! ./train_mlp_fast -d "$DATA" -g 1 -b 1 -n 1 -t 1 -o "$OUT/probe.csv" -v 1 >"$OUT/probe.txt" 2>&1; then
  echo "error: ./train_mlp_fast -g 1 does not run: $(head -n 1 "$OUT/probe.txt")" >&2; exit 1
fi
# the epochs that leave MIN_STEPS full steps after the warm-up at global batch $1
epochs_of() { local full=$((N_TRAIN / $1)); [ "$full" -ge 1 ] || full=1; echo $((WARMUP + (MIN_STEPS + full - 1) / full)); }
echo "GPUs: $have here, sweeping $GPUS; models: $MODELS; precisions: $PRECISIONS; batches: $BATCHES;"
echo "  $MIN_STEPS full steps timed after $WARMUP warm-up epoch(s): $(for b in $BATCHES; do echo -n "-n $(epochs_of "$b") at -b $b; "; done)data $DATA ($N_TRAIN images)"

# one run of ours: LOG (without .csv/.txt) then the trainer's flags; a failure is said and kept going
ours() {
  local log=$1; shift
  timeout "$RUN_TIMEOUT" ./train_mlp_fast -d "$DATA" "$@" -o "$log.csv" >"$log.txt" 2>&1 \
    || echo "    ours failed (exit $?): $(tail -n 1 "$log.txt")"
}
ddp() {
  local log=$1; shift
  timeout "$RUN_TIMEOUT" python3 dev/ddp_pytorch.py --data "$DATA" "$@" --quiet --json "$log.json" >"$log.txt" 2>&1 \
    || echo "    DDP failed (exit $?): $(tail -n 1 "$log.txt")"
}

if [ -z "${APPEND:-}" ]; then   # a new sweep: the logs of an earlier one in OUTDIR would be read as this one's
  : >"$OUT/plan.txt"
  rm -f "$OUT"/ours_* "$OUT"/ddp_* "$OUT"/acc_* "$OUT"/socket_*
fi
[ "${SPEED:-1}" = 1 ] || MODELS=   # (SPEED=0: no speed runs; with APPEND=1 the table keeps the earlier ones)
for model in $MODELS; do
  for prec in $PRECISIONS; do
    for b in $BATCHES; do
      n_ep=$(epochs_of "$b")
      common=(-m "$(sizes_of "$model")" -a relu -b "$b" -l "$(lr_of "$model")" -k 0.9 -n "$n_ep" -s "$SEED"
              -x "$(x_of "$prec")" -v 1000000)
      for n in $GPUS; do
        if [ $((b % n)) -ne 0 ]; then continue; fi
        echo "$model $prec $b $n" >>"$OUT/plan.txt"
        echo "=== $model, $prec, batch $b, $n GPU(s): ours$([ "$n" = 1 ] && echo " (without -g)"), then DDP   [$(( $(date +%s) - T0 )) s]"
        if [ "$n" = 1 ]; then ours "$OUT/ours_${model}_${prec}_g1_b$b" "${common[@]}"
        else ours "$OUT/ours_${model}_${prec}_g${n}_b$b" "${common[@]}" -g "$n"; fi
        [ -n "${OURS_ONLY:-}" ] || ddp "$OUT/ddp_${model}_${prec}_g${n}_b$b" --config "$model" --mode "$(mode_of "$prec")" \
          --gpus "$n" --batch "$b" --lr "$(lr_of "$model")" --epochs "$n_ep" --warmup "$WARMUP" --seed "$SEED"
      done
    done
  done
done

if [ "$SOCKET" = 1 ] && [ "$have" -ge 2 ]; then
  small=(-m 784,256,256,10 -a relu -b 4096 -l 0.05 -k 0.9 -n 6 -s "$SEED" -v 1000000 -g 2)
  echo "=== sockets: a small model on -g 2, NCCL's default transport, then sockets only   [$(( $(date +%s) - T0 )) s]"
  NCCL_DEBUG=INFO ours "$OUT/socket_default" "${small[@]}"
  NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_DEBUG=INFO ours "$OUT/socket_net" "${small[@]}"
fi

if [ "$ACC" = 1 ]; then
  most=$(echo $GPUS | tr ' ' '\n' | sort -n | tail -n 1)
  acc_n=1; [ "$most" -gt 1 ] && [ $((ACC_BATCH % most)) = 0 ] && acc_n=$most
  echo "=== accuracy: big, batch $ACC_BATCH, -n $ACC_EPOCHS, seeds $ACC_SEEDS: one GPU against $acc_n   [$(( $(date +%s) - T0 )) s]"
  for prec in $ACC_PRECISIONS; do
    for s in $ACC_SEEDS; do
      acc=(-m "$(sizes_of big)" -a relu -b "$ACC_BATCH" -l "$(lr_of big)" -k 0.9 -n "$ACC_EPOCHS" -s "$s" -x "$(x_of "$prec")" -v 1000000)
      ours "$OUT/acc_${prec}_g1_s$s" "${acc[@]}"
      [ "$acc_n" -gt 1 ] && ours "$OUT/acc_${prec}_g${acc_n}_s$s" "${acc[@]}" -g "$acc_n"
    done
  done
fi
fi   # (FROM_CSV)

# the tables and the pictures, from the logs, or from the CSV files (FROM_CSV)
[ -n "${FROM_CSV:-}" ] && [ ! -f "$OUT/multi_gpu.csv" ] && { echo "error: FROM_CSV: no $OUT/multi_gpu.csv" >&2; exit 1; }
GPU_NAME=${GPU_NAME:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)} \
NCCL_LINE=${NCCL_LINE:-$(grep -o -m 1 "NCCL [0-9][0-9.]*[0-9]" "$OUT/probe.txt" 2>/dev/null)} \
ACC_BATCH=$ACC_BATCH ACC_EPOCHS=$ACC_EPOCHS \
python3 - "$OUT" "$WARMUP" "${N_TRAIN:-}" <<'EOF'
import csv, datetime, glob, io, json, math, os, re, statistics, sys
out, warmup, n_train = sys.argv[1], int(sys.argv[2]), int(sys.argv[3] or 0)
from_csv = bool(os.environ.get("FROM_CSV"))
PRECS = ["fp32", "tf32", "bf16"]
COLOR = {"fp32": "#1f77b4", "tf32": "#d62728", "bf16": "#2ca02c"}
SIZES = {"big": "784,4096,4096,10", "wide": "784,1024,1024,10"}


def log_rows(path):
    """our CSV log's rows (the comment lines left out), or [] when there is none"""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def ours(path, batch=0):
    """(samples/s, full steps timed): the median over the epochs after the warm-up of the epoch's samples/s"""
    sps = [float(r["samples_per_s"]) for r in log_rows(path) if r["kind"] == "epoch" and r.get("samples_per_s")]
    kept = sps[warmup:]
    if not kept:
        return None, 0
    return statistics.median(kept), (n_train // batch if batch else 0) * len(kept)


def write_whole(name, text):
    """OUT/name holds text, written beside it and renamed into place: a stdout pointed at the same file
    (bench_multi_gpu.sh OUT | tee OUT/multi_gpu.md) keeps writing to the old file, never into this one"""
    path = os.path.join(out, name)
    with open(path + ".tmp", "w", newline="") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def csv_text(fields, rows):
    buf = io.StringIO()
    w = csv.writer(buf)
    w.writerow(fields)
    w.writerows(rows)
    return buf.getvalue()


def final_acc(path):
    rows = [r for r in log_rows(path) if r["kind"] == "summary"]
    return float(rows[-1]["accuracy"]) if rows else None


def ddp(path):
    """(samples/s, full steps timed, torch version) of a ddp_pytorch.py record; None when it failed"""
    if not os.path.exists(path):
        return None, 0, None
    rec = json.load(open(path))
    if rec.get("status") != "ok":
        return None, 0, None
    return rec.get("samples_per_s"), rec.get("steps_timed", 0), rec.get("torch")


num = lambda v: float(v) if v not in (None, "", "None") else None
rows, socket_rows, acc_rows, torch_version = {}, [], [], None
if from_csv:   # the points a sweep wrote (an older CSV has no precision: FP32)
    for r in csv.DictReader(open(os.path.join(out, "multi_gpu.csv"))):
        key = (r["model"], r.get("precision") or "fp32", int(r["batch"]), int(r["gpus"]))
        if key in rows:
            print("(multi_gpu.csv: %s twice: the last kept)" % (key,))
        rows[key] = dict(ours=num(r["ours"]), plain=num(r["plain"]), ddp=num(r["ddp"]),
                         ddp_base=num(r.get("ddp_base")), steps=int(num(r.get("steps")) or 0))
        torch_version = torch_version or r.get("torch")
    if os.path.exists(os.path.join(out, "socket.csv")):
        socket_rows = list(csv.DictReader(open(os.path.join(out, "socket.csv"))))
    if os.path.exists(os.path.join(out, "accuracy.csv")):
        acc_rows = list(csv.DictReader(open(os.path.join(out, "accuracy.csv"))))
else:          # the points plan.txt lists, each once, in the order swept
    plan = []
    for line in open(os.path.join(out, "plan.txt")):
        m, p, b, n = line.split()
        plan.append((m, p, int(b), int(n)))
    for (m, p, b, n) in dict.fromkeys(plan):
        name = lambda side, g: os.path.join(out, "%s_%s_%s_g%d_b%d" % (side, m, p, g, b))
        o, steps = ours(name("ours", n) + ".csv", b)
        plain, _ = ours(name("ours", 1) + ".csv")
        d, _, tv = ddp(name("ddp", n) + ".json")
        d1, _, _ = ddp(name("ddp", 1) + ".json")
        torch_version = torch_version or tv
        rows[(m, p, b, n)] = dict(ours=o, plain=plain, ddp=d, ddp_base=d1, steps=steps)
    for name, env in (("default", "NCCL's default"), ("net", "sockets only")):
        path = os.path.join(out, "socket_%s" % name)
        if os.path.exists(path + ".txt"):
            text = open(path + ".txt", errors="replace").read()
            via = sorted(set(re.findall(r"via (NET/Socket|NET/IB|P2P|SHM)", text)))
            socket_rows.append(dict(transport=env, ours=ours(path + ".csv")[0], via=" ".join(via)))
    for path in sorted(glob.glob(os.path.join(out, "acc_*_g*_s*.csv"))):
        p, g, s = re.match(r"acc_(\w+?)_g(\d+)_s(\d+)\.csv$", os.path.basename(path)).groups()
        acc_rows.append(dict(precision=p, gpus=g, seed=s, test_acc=final_acc(path), batch=os.environ.get("ACC_BATCH"),
                             epochs=os.environ.get("ACC_EPOCHS")))

fmt = lambda x: "%.0f" % x if x else "failed"
ratio = lambda a, b: "%.2fx" % (a / b) if a and b else ""
title = "train_mlp_fast -g N against PyTorch DDP, %s, %s, torch %s, %s" % (
    os.environ.get("GPU_NAME") or "?", os.environ.get("NCCL_LINE") or "NCCL ?", torch_version or "?",
    os.environ.get("RUN_DATE") or datetime.date.today().isoformat())
models = list(dict.fromkeys(k[0] for k in rows))
md = ["%s (`bash dev/bench_multi_gpu.sh`: samples/s, the median epoch after the warm-up; the speed-ups "
      "over one GPU without -g, at the same global batch)" % title, ""]
for m in models:
    md += ["%s (%s relu):" % (m, SIZES.get(m, "?")), "",
           "| precision | batch | GPUs | ours samples/s | ours / one GPU | DDP samples/s | DDP / one GPU | ours / DDP | steps timed |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for (mm, p, b, n), r in rows.items():
        if mm == m:
            md.append("| %s | %d | %d | %s | %s | %s | %s | %s | %d |" % (
                p, b, n, fmt(r["ours"]), ratio(r["ours"], r["plain"]), fmt(r["ddp"]), ratio(r["ddp"], r["ddp_base"]),
                ratio(r["ours"], r["ddp"]), r["steps"]))
    md.append("")
if socket_rows:
    md += ["NCCL's transports, -g 2, 784,256,256,10 relu at batch 4096 (sockets only: NCCL_P2P_DISABLE=1 "
           "NCCL_SHM_DISABLE=1 NCCL_NET=Socket, the path between machines):", "",
           "| transport | ours samples/s | NCCL_DEBUG=INFO says via |", "| --- | ---: | --- |"]
    md += ["| %s | %s | %s |" % (r["transport"], fmt(num(r["ours"])), r["via"] or "?") for r in socket_rows]
    md.append("")
if acc_rows:
    by = {}
    for r in acc_rows:
        if num(r["test_acc"]) is not None:
            by.setdefault((r["precision"], int(r["gpus"])), []).append(100 * num(r["test_acc"]))
    gpus_acc = sorted({int(r["gpus"]) for r in acc_rows})
    seeds = sorted({int(r["seed"]) for r in acc_rows})
    md += ["Accuracy: the big model at batch %s, -n %s, seeds %s; the mean test accuracy in %% (the runs it averages):" % (
        acc_rows[0].get("batch") or "?", acc_rows[0].get("epochs") or "?", ", ".join(map(str, seeds))), "",
        "| precision | " + " | ".join("%d GPU%s" % (g, "" if g == 1 else "s") for g in gpus_acc) + " | difference |",
        "| --- |" + " ---: |" * (len(gpus_acc) + 1)]
    for p in [p for p in PRECS if any(k[0] == p for k in by)]:
        means = [statistics.mean(by[(p, g)]) if by.get((p, g)) else None for g in gpus_acc]
        diff = "%+.2f" % (means[-1] - means[0]) if len(means) > 1 and None not in (means[0], means[-1]) else ""
        md.append("| %s | %s | %s |" % (p, " | ".join("%.2f (%d)" % (x, len(by[(p, g)])) if x is not None else "failed"
                                                   for x, g in zip(means, gpus_acc)), diff))
    md.append("")
write_whole("multi_gpu.md", "\n".join(md))
if not from_csv:
    write_whole("multi_gpu.csv", csv_text(["model", "precision", "batch", "gpus", "ours", "plain", "ddp", "ddp_base",
                                           "steps", "torch"],
                                          [[m, p, b, n, r["ours"], r["plain"], r["ddp"], r["ddp_base"], r["steps"],
                                            torch_version] for (m, p, b, n), r in rows.items()]))
    for name, data, fields in (("socket.csv", socket_rows, ["transport", "ours", "via"]),
                               ("accuracy.csv", acc_rows, ["precision", "gpus", "seed", "test_acc", "batch", "epochs"])):
        if data:
            write_whole(name, csv_text(fields, [[r.get(k) for k in fields] for r in data]))
print("\n".join(md))

# The picture, written by hand as SVG: a panel per (model, batch); x the GPUs on a log scale, y the
# samples/s from 0; a colour per precision, ours solid with dots, DDP dashed with squares, and a
# thin dotted line for ours' one GPU times N (linear scaling).
panels = list(dict.fromkeys((k[0], k[2]) for k in rows))
gpus = sorted({k[3] for k in rows})
PW, PH, ML, MR, MT, MB = 360, 260, 70, 15, 40, 45
W, H = max(PW * max(1, len(panels)), 780), PH + 70
svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">' % (W, H),
       '<rect width="100%" height="100%" fill="white"/>',
       '<text x="%d" y="16" text-anchor="middle" font-size="12">%s</text>' % (W // 2, title.replace("&", "&amp;"))]
for i, (m, b) in enumerate(panels):
    x0, y0, w, h = i * PW + ML, MT, PW - ML - MR, PH - MT - MB
    pts = {k: r for k, r in rows.items() if k[0] == m and k[2] == b}
    top = max([v for r in pts.values() for v in (r["ours"], r["ddp"]) if v] or [1]) * 1.1
    top = max([top] + [r["plain"] * k[3] * 1.02 for k, r in pts.items() if r["plain"]])
    exp = 10 ** math.floor(math.log10(top / 5))
    tick = min((s * exp for s in (1, 2, 5, 10) if top / (s * exp) <= 6), default=exp)
    gx = lambda g: x0 + (w * (math.log2(g) - math.log2(gpus[0])) / max(1e-9, math.log2(gpus[-1]) - math.log2(gpus[0]))
                         if len(gpus) > 1 else w / 2)
    gy = lambda v: y0 + h - h * v / top
    svg.append('<text x="%d" y="%d" text-anchor="middle">%s, batch %d</text>' % (x0 + w // 2, y0 - 8, m, b))
    svg.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>' % (x0, y0, w, h))
    t = 0.0
    while t <= top:
        svg.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>' % (x0, gy(t), x0 + w, gy(t)))
        svg.append('<text x="%d" y="%.1f" text-anchor="end">%s</text>' % (x0 - 4, gy(t) + 4,
                   "0" if t == 0 else "%gM" % (t / 1e6) if top >= 1e6 else "%gk" % (t / 1e3)))
        t += tick
    for g in gpus:
        svg.append('<text x="%.1f" y="%d" text-anchor="middle">%d</text>' % (gx(g), y0 + h + 14, g))
    svg.append('<text x="%d" y="%d" text-anchor="middle">GPUs</text>' % (x0 + w // 2, y0 + h + 30))
    svg.append('<text x="%d" y="%d" text-anchor="middle" transform="rotate(-90 %d %d)">samples/s</text>' % (
        i * PW + 14, y0 + h // 2, i * PW + 14, y0 + h // 2))
    for p in PRECS:
        base = [r["plain"] for k, r in pts.items() if k[1] == p and r["plain"]]
        if base and len(gpus) > 1:
            svg.append('<polyline fill="none" stroke="%s" stroke-width="1" stroke-dasharray="1,3" points="%s"/>' % (
                COLOR[p], " ".join("%.1f,%.1f" % (gx(g), gy(base[0] * g)) for g in gpus)))
        for side, dash, mark in (("ours", "", "circle"), ("ddp", ' stroke-dasharray="5,4"', "rect")):
            line = sorted((k[3], r[side]) for k, r in pts.items() if k[1] == p and r[side])
            if not line:
                continue
            svg.append('<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>' % (
                COLOR[p], dash, " ".join("%.1f,%.1f" % (gx(g), gy(v)) for g, v in line)))
            for g, v in line:
                svg.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (gx(g), gy(v), COLOR[p]) if mark == "circle"
                           else '<rect x="%.1f" y="%.1f" width="7" height="7" fill="white" stroke="%s"/>' % (
                               gx(g) - 3.5, gy(v) - 3.5, COLOR[p]))
lx = 20
for p in [p for p in PRECS if any(k[1] == p for k in rows)]:
    for side, dash in (("ours", ""), ("DDP", ' stroke-dasharray="5,4"')):
        svg.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>' % (
            lx, H - 18, lx + 28, H - 18, COLOR[p], dash))
        svg.append('<text x="%d" y="%d">%s %s</text>' % (lx + 34, H - 14, side, p.upper()))
        lx += 100
svg.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444" stroke-width="1" stroke-dasharray="1,3"/>' % (
    lx, H - 18, lx + 28, H - 18))
svg.append('<text x="%d" y="%d">ours, one GPU x N</text>' % (lx + 34, H - 14))
svg.append("</svg>")
write_whole("multi_gpu.svg", "\n".join(svg) + "\n")
print("picture: %s" % os.path.join(out, "multi_gpu.svg"))

try:   # the same picture as a PNG, where matplotlib is installed
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(4.5 * max(1, len(panels)), 4), squeeze=False)
for ax, (m, b) in zip(axes[0], panels):
    pts = {k: r for k, r in rows.items() if k[0] == m and k[2] == b}
    for p in PRECS:
        base = [r["plain"] for k, r in pts.items() if k[1] == p and r["plain"]]
        if base and len(gpus) > 1:
            ax.plot(gpus, [base[0] * g for g in gpus], ":", color=COLOR[p], lw=1)
        for side, style in (("ours", "o-"), ("ddp", "s--")):
            line = sorted((k[3], r[side]) for k, r in pts.items() if k[1] == p and r[side])
            if line:
                ax.plot([g for g, _ in line], [v for _, v in line], style, color=COLOR[p],
                        label="%s %s" % ("ours" if side == "ours" else "DDP", p.upper()), mfc="white" if side == "ddp" else None)
    ax.set_title("%s, batch %d" % (m, b), fontsize=9)
    ax.set_xscale("log", base=2)
    ax.set_xticks(gpus, [str(g) for g in gpus])
    ax.set_xlabel("GPUs")
    ax.set_ylabel("samples/s")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
fig.suptitle(title, fontsize=8)
fig.tight_layout()
fig.savefig(os.path.join(out, "multi_gpu.png"), dpi=120)
print("picture: %s" % os.path.join(out, "multi_gpu.png"))
EOF
echo "total: $(( $(date +%s) - T0 )) s"
