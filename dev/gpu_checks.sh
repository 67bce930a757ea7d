#!/usr/bin/env bash
# Everything a GPU machine should run on mlp.cu, in one go, logs to OUTDIR:
#   the PyTorch reference files, make test (test_mlp included), compute-sanitizer memcheck
#   and racecheck on test_mlp, the trainers on Fashion-MNIST (fast, simple, CPU, and a second
#   fast run to show determinism), and optionally planted bugs that test_mlp must catch.
#
#   bash dev/gpu_checks.sh [OUTDIR]       (default dev/out/gpu_checks)
#   DATA=dir      Fashion-MNIST or MNIST directory (default: .data/fashion-mnist, then data/fashion-mnist)
#   STEPS="ref test sanitize train bugs"  which parts to run (default: all but bugs)
set -uo pipefail
OUTDIR=${1:-dev/out/gpu_checks}
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
STEPS=${STEPS:-ref test sanitize train}
DATA=${DATA:-}
if [ -z "$DATA" ]; then
  for d in .data/fashion-mnist data/fashion-mnist /usr/share/datasets/fashion-mnist; do
    [ -e "$d/train-images-idx3-ubyte.gz" ] && { DATA=$d; break; }
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
  python3 dev/pytorch_reference.py --out-dir dev/ref >"$OUTDIR/ref.log" 2>&1 &&
    python3 dev/pytorch_reference.py --check dev/ref/ref_*.bin >>"$OUTDIR/ref.log" 2>&1
  note "pytorch reference: exit $?"
  cp dev/ref/ref_*.bin "$OUTDIR/" 2>/dev/null
fi

if has test; then
  make test 2>&1 | tee "$OUTDIR/make_test.log" | grep -E "^=== |passed, .* failed|NOT OK|FAIL|error"
  note "make test: exit ${PIPESTATUS[0]}"
fi

if has sanitize; then
  # test_mlp -s: every kernel and path once on small shapes (the full test_mlp under
  # racecheck takes over ten minutes on an H200)
  for tool in memcheck racecheck; do
    timeout ${SANITIZE_TIMEOUT:-300} compute-sanitizer --tool $tool --error-exitcode 3 ./test_mlp -s >"$OUTDIR/$tool.log" 2>&1
    rc=$?
    note "compute-sanitizer $tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUTDIR/$tool.log" | tail -1)"
  done
fi

if has train; then
  args=(-d "$DATA" -m 784,128,10 -a sigmoid -b 64 -l 0.1 -k 0.9 -n 4)
  ./train_mlp "${args[@]}" -o "$OUTDIR/fast.csv" >"$OUTDIR/train_fast.log" 2>&1
  note "train_mlp fast: $(tail -1 "$OUTDIR/train_fast.log")"
  ./train_mlp "${args[@]}" -o "$OUTDIR/fast2.csv" >"$OUTDIR/train_fast2.log" 2>&1
  if diff <(grep -o 'loss [0-9.]*' "$OUTDIR/train_fast.log") <(grep -o 'loss [0-9.]*' "$OUTDIR/train_fast2.log") >/dev/null; then
    note "two fast runs, same seed: identical losses"
  else
    note "two fast runs, same seed: LOSSES DIFFER"
  fi
  ./train_mlp "${args[@]}" -f 0 -o "$OUTDIR/simple.csv" >"$OUTDIR/train_simple.log" 2>&1
  note "train_mlp simple: $(tail -1 "$OUTDIR/train_simple.log")"
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
fi

echo
echo "==================== summary ===================="
printf '%s\n' "${summary[@]}" | tee "$OUTDIR/summary.txt"
