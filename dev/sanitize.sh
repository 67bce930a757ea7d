#!/usr/bin/env bash
# compute-sanitizer's four tools on the GPU code (issue 19): memcheck (bad accesses, leaks),
# racecheck (shared-memory races), initcheck (reads of memory nothing wrote) and synccheck (barriers
# misused), each on `./test_mlp -Q` (every kernel and path once, on small and odd shapes) and on a
# short run of each GPU trainer (the readable one; the fast one on its three paths, FP32, TF32 and BF16,
# and the big model, whose FP32 products run as 3xTF32 on the large tiles, in TF32, whose products
# run on the K-major TF32 copies, and in BF16, whose products run on the operands' BF16 copies (both
# kernels/fast/matmul/wgmma_kmajor.cuh); the fused steps of -f 2
# in runs of 3, 3 and 1 steps: one hidden layer in FP32, the wide model in TF32, and -f 3 on an odd
# deep model in FP32); and, where the machine has two GPUs, the big model on -g 2 in each precision at
# a global batch of 2048 (TF32's ranks on the K-major kernels, every rank's all-reduces inside the
# graphs), the sanitizer following both ranks (--target-processes all).
# Prints one summary line per tool and program; logs in OUTDIR. Exit 1 if any reported an error.
#   bash dev/sanitize.sh [OUTDIR (default dev/out/sanitize)]        (make sanitize runs it)
#   DATA=dir  the dataset for the trainer runs (default: as the trainers look for it)
#   TOOLS="memcheck racecheck"  only these tools; ONLY="test_mlp train_mlp_fast_big"  only these programs
#   (by the names below; a visit too short for all 48 runs takes them in parts)
#   SHARDS=N  test_mlp -Q as N processes at once (test_mlp -S I/N), each under the tool: the suite's
#   cases are many short kernels, the sanitizer's own work is on the host, and one process leaves
#   the GPU mostly idle (the shards skip the check that every kernel family was launched)
set -uo pipefail
OUTDIR=${1:-dev/out/sanitize}
mkdir -p "$OUTDIR"
command -v compute-sanitizer >/dev/null || { echo "error: compute-sanitizer not found (it comes with the CUDA toolkit)" >&2; exit 2; }
for b in ./test_mlp ./train_mlp ./train_mlp_fast; do
  [ -x "$b" ] || { echo "error: $b is not built ---> try: make" >&2; exit 2; }
done
DATA=${DATA:-}
if [ -z "$DATA" ]; then
  for d in data/mnist data/fashion-mnist .data/fashion-mnist /usr/share/datasets/fashion-mnist; do
    { [ -e "$d/train-images-idx3-ubyte.gz" ] || [ -e "$d/train-images-idx3-ubyte" ]; } && { DATA=$d; break; }
  done
fi
short=(-d "$DATA" -n 1 -t 3 -v 1)
odd=(-m 784,100,37,10 -a tanh -b 33)
programs=(
  "test_mlp|./test_mlp -Q"
  "train_mlp|./train_mlp ${short[*]} ${odd[*]}"
  "train_mlp_fast_f0|./train_mlp_fast ${short[*]} ${odd[*]} -f 0"
  "train_mlp_fast_f1|./train_mlp_fast ${short[*]} ${odd[*]} -f 1"
  "train_mlp_fast_f2|./train_mlp_fast -d $DATA -n 1 -t 7 -v 3 -m 784,128,10 -a sigmoid -b 64 -f 2"
  "train_mlp_fast_deep|./train_mlp_fast -d $DATA -n 1 -t 7 -v 3 -m 784,1024,1024,10 -a relu -b 256 -x 1 -f 2"
  "train_mlp_fast_deep_f3|./train_mlp_fast -d $DATA -n 1 -t 7 -v 3 -m 784,100,36,10 -a tanh -b 33 -f 3"
  "train_mlp_fast_tf32|./train_mlp_fast ${short[*]} -m 784,1024,1024,10 -a relu -b 256 -x 1 -f 1"
  "train_mlp_fast_bf16|./train_mlp_fast ${short[*]} -m 784,1024,1024,10 -a relu -b 256 -x 2 -f 1"
  "train_mlp_fast_big|./train_mlp_fast ${short[*]} -m 784,4096,4096,10 -a relu -b 1024"
  "train_mlp_fast_big_tf32|./train_mlp_fast ${short[*]} -m 784,4096,4096,10 -a relu -b 1024 -x 1"
  "train_mlp_fast_big_bf16|./train_mlp_fast ${short[*]} -m 784,4096,4096,10 -a relu -b 1024 -x 2"
)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -ge 2 ]; then
  for x in 0 1 2; do
    programs+=("train_mlp_fast_g2_x$x|./train_mlp_fast ${short[*]} -m 784,4096,4096,10 -a relu -b 2048 -x $x -g 2")
  done
fi
tools=(${TOOLS:-memcheck racecheck initcheck synccheck})
for t in "${tools[@]}"; do
  case $t in memcheck|racecheck|initcheck|synccheck) ;; *) echo "error: TOOLS: no tool $t (memcheck, racecheck, initcheck, synccheck)" >&2; exit 2 ;; esac
done
for o in ${ONLY:-}; do
  printf '%s\n' "${programs[@]}" | grep -q "^$o|" || { echo "error: ONLY: no program $o (the names in dev/sanitize.sh)" >&2; exit 2; }
done
SHARDS=${SHARDS:-1}
[[ "$SHARDS" =~ ^[1-9][0-9]?$ ]] && [ "$SHARDS" -le 64 ] || { echo "error: SHARDS: '$SHARDS' is not a count from 1 to 64" >&2; exit 2; }
# one program under one tool: its log, then its line (exit status and the tool's summary); returns the exit status
sanitize_one() {
  local tool=$1 name=$2 cmd=$3 extra=() log="$OUTDIR/${1}_${2}.log" rc summary
  [ "$tool" = memcheck ] && extra=(--leak-check full)
  timeout "${SANITIZE_TIMEOUT:-600}" compute-sanitizer --tool "$tool" "${extra[@]}" --target-processes all --error-exitcode 3 \
    $cmd >"$log" 2>&1
  rc=$?
  summary=$(grep -E '(ERROR|RACECHECK|INITCHECK|SYNCCHECK) SUMMARY' "$log" | tail -1)
  echo "$tool $name: exit $rc; ${summary:-no summary line (see $log)}"
  return $rc
}
failed=0
for tool in "${tools[@]}"; do
  for p in "${programs[@]}"; do
    name=${p%%|*}
    cmd=${p#*|}
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || continue
    if [ "$name" = test_mlp ] && [ "$SHARDS" -gt 1 ]; then   # the shards at once, their lines in order
      pids=()
      for ((k = 0; k < SHARDS; k++)); do
        sanitize_one "$tool" "test_mlp_s$k" "$cmd -S $k/$SHARDS" > "$OUTDIR/.line_$k" & pids+=($!)
      done
      for ((k = 0; k < SHARDS; k++)); do
        wait "${pids[$k]}" || failed=1
        cat "$OUTDIR/.line_$k"; rm -f "$OUTDIR/.line_$k"
      done
      continue
    fi
    [ "$name" = test_mlp ] || cmd="$cmd -o /tmp/sanitize_${name}.csv"  # (the trainers' CSV logs go to /tmp)
    sanitize_one "$tool" "$name" "$cmd" || failed=1
  done
done
exit $failed
