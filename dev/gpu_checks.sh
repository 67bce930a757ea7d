#!/usr/bin/env bash
# Everything a GPU machine should run on mlp.cu, in one go, logs to OUTDIR:
#   the PyTorch reference files, make test (test_mlp included), compute-sanitizer's four tools
#   on test_mlp and both GPU trainers (dev/sanitize.sh), the trainers on the data (the fast one on both paths, FP32 and
#   TF32, small and wide, twice to show determinism; the readable one; the CPU one), and
#   optionally planted bugs that test_mlp must catch.
#
#   bash dev/gpu_checks.sh [OUTDIR]       (default dev/out/gpu_checks)
#   DATA=dir      MNIST-format directory (default: the first of data/mnist, data/fashion-mnist,
#                 .data/fashion-mnist, /usr/share/datasets/fashion-mnist that holds the data)
#   STEPS="ref test sanitize train bugs"  which parts to run (default: all but bugs)
set -uo pipefail
OUTDIR=${1:-dev/out/gpu_checks}
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
STEPS=${STEPS:-ref test sanitize train}
DATA=${DATA:-}
if [ -z "$DATA" ]; then
  for d in data/mnist data/fashion-mnist .data/fashion-mnist /usr/share/datasets/fashion-mnist; do
    { [ -e "$d/train-images-idx3-ubyte.gz" ] || [ -e "$d/train-images-idx3-ubyte" ]; } && { DATA=$d; break; }
  done
fi
# the CPU tests look for Fashion-MNIST in data/fashion-mnist
if [ -n "$DATA" ] && [ ! -e data/fashion-mnist ] && [ "$DATA" != data/fashion-mnist ]; then
  ln -sfn "$(cd "$DATA" && pwd)" data/fashion-mnist
fi
summary=()
note() { summary+=("$*"); echo "### $*"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }

nvidia-smi -L | tee "$OUTDIR/gpu.txt"

if has ref; then
  python3 dev/pytorch_reference.py --out-dir tests/ref >"$OUTDIR/ref.log" 2>&1 &&
    python3 dev/pytorch_reference.py --check tests/ref/ref_*.bin >>"$OUTDIR/ref.log" 2>&1
  note "pytorch reference: exit $?"
  cp tests/ref/ref_*.bin "$OUTDIR/" 2>/dev/null
fi

if has test; then
  make test 2>&1 | tee "$OUTDIR/make_test.log" | grep -E "^=== |passed, .* failed|NOT OK|FAIL|error"
  note "make test: exit ${PIPESTATUS[0]}"
fi

if has sanitize; then
  # all four compute-sanitizer tools on test_mlp -Q and short runs of both GPU trainers
  bash dev/sanitize.sh "$OUTDIR/sanitize" | tee "$OUTDIR/sanitize.txt"
  note "compute-sanitizer (4 tools x 12 programs): exit ${PIPESTATUS[0]}"
fi

if has train; then
  make train_mlp train_mlp_fast train_mlp_cpu >"$OUTDIR/make_trainers.log" 2>&1 || note "make trainers: FAILED"
  losses() { grep -o 'loss [0-9.]*' "$1"; }
  args=(-d "$DATA" -m 784,128,10 -a sigmoid -b 64 -l 0.1 -k 0.9 -n 4)
  wide=(-d "$DATA" -m 784,1024,1024,10 -a relu -b 256 -l 0.1 -k 0.9 -n 2)
  ./train_mlp_fast "${args[@]}" -o "$OUTDIR/fast.csv" >"$OUTDIR/train_fast.log" 2>&1
  note "train_mlp_fast small: $(tail -1 "$OUTDIR/train_fast.log")"
  ./train_mlp_fast "${args[@]}" -o "$OUTDIR/fast2.csv" >"$OUTDIR/train_fast2.log" 2>&1
  if diff <(losses "$OUTDIR/train_fast.log") <(losses "$OUTDIR/train_fast2.log") >/dev/null; then
    note "two fast runs, same seed: identical losses"
  else
    note "two fast runs, same seed: LOSSES DIFFER"
  fi
  # -f 0: the same kernels and streams launched step by step, the same arithmetic in the same order
  ./train_mlp_fast "${args[@]}" -f 0 -o "$OUTDIR/fast_launch.csv" >"$OUTDIR/train_fast_launch.log" 2>&1
  note "train_mlp_fast small -f 0: $(tail -1 "$OUTDIR/train_fast_launch.log")"
  if diff <(losses "$OUTDIR/train_fast.log") <(losses "$OUTDIR/train_fast_launch.log") >/dev/null; then
    note "fast -f 0 against -f 1 (graphs): identical losses"
  else
    note "fast -f 0 against -f 1 (graphs): LOSSES DIFFER"
  fi
  ./train_mlp_fast "${args[@]}" -x 1 -o "$OUTDIR/fast_tf32.csv" >"$OUTDIR/train_fast_tf32.log" 2>&1
  note "train_mlp_fast small -x 1: $(tail -1 "$OUTDIR/train_fast_tf32.log")"
  for x in 0 1; do
    for f in 1 0; do
      ./train_mlp_fast "${wide[@]}" -x $x -f $f -o "$OUTDIR/wide_x${x}_f${f}.csv" >"$OUTDIR/train_wide_x${x}_f${f}.log" 2>&1
      note "train_mlp_fast wide -x $x -f $f: $(tail -1 "$OUTDIR/train_wide_x${x}_f${f}.log")"
    done
  done
  ./train_mlp "${args[@]}" -o "$OUTDIR/readable.csv" >"$OUTDIR/train_readable.log" 2>&1
  note "train_mlp (readable): $(tail -1 "$OUTDIR/train_readable.log")"
  ./train_mlp_cpu "${args[@]}" -o "$OUTDIR/cpu.csv" >"$OUTDIR/train_cpu.log" 2>&1
  note "train_mlp_cpu ($(nproc) cores): $(tail -1 "$OUTDIR/train_cpu.log")"
fi

if has bugs; then
  # Plant two bugs in a copy of the tree; test_mlp must report NOT OK for each.
  plant() {  # plant NAME FILE SED-EXPR
    rm -rf /tmp/bug_$1 && mkdir -p /tmp/bug_$1 && cp -r . /tmp/bug_$1/ 2>/dev/null
    (cd /tmp/bug_$1 && sed -i "$3" "$2" && make test_mlp >/dev/null 2>&1 && ./test_mlp >"$OUTDIR/bug_$1.log" 2>&1)
    note "planted bug $1: test_mlp exit $?, $(grep -c 'NOT OK' "$OUTDIR/bug_$1.log") NOT OK lines"
  }
  plant no_inv_B kernels/softmax_xent.cuh 's|(p - (c == label ? 1.0f : 0.0f)) / B;|(p - (c == label ? 1.0f : 0.0f));|'
  plant dbias_row kernels/matmul.cuh 's|for (int b = 0; b < B; b++) sum += dout\[(size_t)b \* OUT + o\];|for (int b = 0; b < B; b++) sum += dout[(size_t)(b + 1 < B ? b + 1 : b) * OUT + o];|'
  plant fast_dbias_row kernels/fast/ops/dbias.cuh 's|for (int b = y; b < B; b += DBIAS_TILE) sum += dout\[(size_t)b \* OUT + o\];|for (int b = y; b < B; b += DBIAS_TILE) sum += dout[(size_t)(b + 1 < B ? b + 1 : b) * OUT + o];|'
fi

echo
echo "==================== summary ===================="
printf '%s\n' "${summary[@]}" | tee "$OUTDIR/summary.txt"
