#!/usr/bin/env bash
# Matmul A/B: two builds of matmul_forward, swept alternately on the same GPU (old, new, old, new, ...),
# so the machine's drift and cuBLAS's own swings hit both alike. Each pass is
# `matmul_forward sweep CSV wide [fp32]`: every configuration x split validated on odd shapes, then
# timed (and validated before and after) on the six batch-256 wide shapes with cuBLAS beside it.
# Prints, per pass, each shape's fastest configuration and its percentage of cuBLAS in that pass;
# the full logs and CSVs go to OUTDIR.
#   bash dev/cuda/ab_sweep.sh OLD_BINARY NEW_BINARY [REPS (default 2)] [OUTDIR (default dev/cuda/out/ab)] [fp32|all]
# e.g. build the old code with a dev switch, or in another checkout:
#   git worktree add /tmp/old main && make -C /tmp/old/dev/cuda && cp /tmp/old/dev/cuda/bin/matmul_forward /tmp/mf_old
#   bash dev/cuda/ab_sweep.sh /tmp/mf_old dev/cuda/bin/matmul_forward
set -uo pipefail
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: bash dev/cuda/ab_sweep.sh OLD_BINARY NEW_BINARY [REPS] [OUTDIR] [fp32|all]  (two executable matmul_forward builds)" >&2
    exit 2
fi
OLD=$1
NEW=$2
REPS=${3:-2}
OUTDIR=${4:-dev/cuda/out/ab}
WHICH=${5:-fp32}
[ "$WHICH" = fp32 ] || [ "$WHICH" = all ] || { echo "error: the 5th argument is fp32 or all, not '$WHICH'" >&2; exit 2; }
mkdir -p "$OUTDIR"
echo "# dev/cuda/ab_sweep.sh: old = $OLD, new = $NEW, $REPS reps, $WHICH, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
status=0
for rep in $(seq 1 "$REPS"); do
    for v in old new; do
        b=$NEW
        [ $v = old ] && b=$OLD
        log="$OUTDIR/sweep_${v}_$rep.log"
        csv="$OUTDIR/sweep_${v}_$rep.csv"
        args=(sweep "$csv" wide)
        [ "$WHICH" = fp32 ] && args+=(fp32)
        "$b" "${args[@]}" >"$log" 2>&1 || { status=1; echo "rep $rep $v: FAILED (see $log)"; }
        echo "rep $rep $v: $(tail -1 "$log")"
        # per shape and precision: the fastest configuration against cuBLAS of the same pass
        python3 - "$csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
names = {0: "FP32", 1: "TF32", 2: "TF32 values"}
shapes = []
for r in rows:
    key = (r["prod"], r["IN"], r["OUT"])
    if key not in shapes: shapes.append(key)
for key in shapes:
    out = []
    for t in sorted({int(r["tf32"]) for r in rows}):
        mine = [r for r in rows if (r["prod"], r["IN"], r["OUT"]) == key and int(r["tf32"]) == t]
        cub = [float(r["ms"]) for r in mine if r["cfg"] == "-1"]
        ours = [r for r in mine if r["cfg"] != "-1"]
        if not cub or not ours: continue
        best = min(ours, key=lambda r: float(r["ms"]))
        pick = [r for r in ours if r["pick"] == "1"]
        s = f"{names[t]} best c{best['cfg']}/s{best['splits']} {float(best['ms']):.4f} ms {100 * cub[0] / float(best['ms']):.0f}%"
        if pick: s += f" (pick c{pick[0]['cfg']}/s{pick[0]['splits']} {100 * cub[0] / float(pick[0]['ms']):.0f}%)"
        out.append(f"cuBLAS {cub[0]:.4f} ms, {s}")
    print(f"    {key[0]:7s} {key[1]:>4s}->{key[2]:<4s} | " + " | ".join(out))
PY
    done
done
exit $status
