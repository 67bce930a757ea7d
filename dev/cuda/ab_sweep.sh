#!/usr/bin/env bash
# Matmul A/B: two builds of matmul_forward, swept alternately on the same GPU (old, new, old, new, ...),
# so the machine's drift and cuBLAS's own swings hit both alike. Each pass is
# `matmul_forward sweep CSV wide [fp32]`: every configuration x split of the shipped kernels (version 9,
# the FP32 one, with fp32; versions 9, 10 and 11 with all) validated on odd shapes, then timed (and
# validated before and after) on the six batch-256 wide shapes with cuBLAS beside it.
# Prints, per pass, the sweep's line for each shape (cuBLAS, the fastest configuration and its
# percentage of cuBLAS in that pass, the heuristic's pick); the full logs and CSVs go to OUTDIR.
#   bash dev/cuda/ab_sweep.sh OLD_BINARY NEW_BINARY [REPS (default 2)] [OUTDIR (default dev/cuda/out/ab)] [fp32|all]
# e.g. build the old code with a dev switch, or in another checkout:
#   git worktree add /tmp/old main && make -C /tmp/old/dev/cuda && cp /tmp/old/dev/cuda/bin/matmul_forward /tmp/mf_old
#   bash dev/cuda/ab_sweep.sh /tmp/mf_old dev/cuda/bin/matmul_forward
# OLD_ENV, NEW_ENV: environment settings for one side only (NAME=VALUE words), e.g. one build with and
# without a setting it reads:
#   NEW_ENV=NAME=VALUE bash dev/cuda/ab_sweep.sh dev/cuda/bin/matmul_forward dev/cuda/bin/matmul_forward
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
OLD_ENV=${OLD_ENV:-}
NEW_ENV=${NEW_ENV:-}
for e in $OLD_ENV $NEW_ENV; do
    [[ "$e" =~ ^[A-Za-z_][A-Za-z0-9_]*=[^[:space:]]*$ ]] || { echo "error: OLD_ENV / NEW_ENV hold NAME=VALUE words, not '$e'" >&2; exit 2; }
done
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "error: REPS is a positive whole number, not '$REPS'" >&2; exit 2; }
[ "$WHICH" = fp32 ] || [ "$WHICH" = all ] || { echo "error: the 5th argument is fp32 or all, not '$WHICH'" >&2; exit 2; }
mkdir -p "$OUTDIR"
echo "# dev/cuda/ab_sweep.sh: old = ${OLD_ENV:+$OLD_ENV }$OLD, new = ${NEW_ENV:+$NEW_ENV }$NEW, $REPS reps, $WHICH, $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
status=0
for rep in $(seq 1 "$REPS"); do
    for v in old new; do
        b=$NEW; e=$NEW_ENV
        [ $v = old ] && { b=$OLD; e=$OLD_ENV; }
        log="$OUTDIR/sweep_${v}_$rep.log"
        csv="$OUTDIR/sweep_${v}_$rep.csv"
        args=(sweep "$csv" wide)
        [ "$WHICH" = fp32 ] && args+=(fp32)
        # (env with no settings runs the binary as it is; $e is split into NAME=VALUE words on purpose)
        env $e "$b" "${args[@]}" >"$log" 2>&1 || { status=1; echo "rep $rep $v: FAILED (see $log)"; }
        echo "rep $rep $v: $(tail -1 "$log")"
        # per shape: cuBLAS, the fastest configuration and its % of cuBLAS, the heuristic's pick
        grep -E '^(fwd|dinp|dweight) ' "$log" | sed 's/^/    /'
    done
done
exit $status
