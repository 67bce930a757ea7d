#!/usr/bin/env bash
# dev/mutate/gpu_visit.sh OUTDIR: the GPU half of `make mutate`, on a machine with a GPU, in one visit.
#
# Builds and runs every mutant of dev/mutate/gpu_mutations.txt, each in its own copy of the tree (the
# working tree is never touched): first the unmutated tree (make -j: test_mlp, both GPU trainers, the
# CPU trainer, tests/bin/test_properties), which must pass; then the mutants, JOBS at a time, each a
# copy of that built tree with one change, rebuilt by make (a mutant that leaves kernels/fast/'s
# sources alone keeps the shared fast objects build/fast/*.o) and run:
#   a kernel or model-code mutant   ./test_mlp -X (the whole suite; -X stops at the first failing case)
#   a trainer main() mutant         tests/bin/test_properties ./train_mlp_cpu ./<trainer> (its CSV log
#                                   against the CPU's replay: test_mlp never runs a trainer's main)
# Everything stops at BUDGET seconds (default 450: 7.5 minutes);
# a mutant not run by then is reported as such. Writes OUTDIR/gpu_mutants.txt (one line per mutant,
# then the totals) and OUTDIR/gpu_mutant_logs/ (the unmutated runs, each mutant's test output).
#
#   bash dev/mutate/gpu_visit.sh "$OUT"            JOBS=6 BUDGET=450 by default
#   ONLY=ID,ID,... bash dev/mutate/gpu_visit.sh "$OUT"   those mutants only
# Sized for 16 cores and one H100 or H200: on an H100 the first 41 mutants took 233 s in all
# (dev/mutate/results/gpu_run_h100.txt). Since test_mlp runs the big model and every tile
# configuration (issue 21) a mutant takes ~90 s to build and run, and the unmutated tree ~140 s: the
# 45 mutants no longer fit one 10-minute visit; run them in two or three, with ONLY (the four BF16 and
# 3xTF32 mutants: dev/mutate/results/gpu_run_h100_bf16_3xtf32.txt).
set -u -o pipefail
out=${1:?usage: bash dev/mutate/gpu_visit.sh OUTDIR}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
command -v nvidia-smi >/dev/null && nvidia-smi -L
python3 -u dev/mutate/mutate.py gpu-visit "$out" -j "${JOBS:-6}" --budget "${BUDGET:-450}" ${ONLY:+--only "$ONLY"} \
    2>&1 | tee "$out/gpu_visit.log"
