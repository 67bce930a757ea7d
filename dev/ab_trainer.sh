#!/usr/bin/env bash
# Trainer A/B: the epoch time of two builds of the fast trainer, run alternately on the same GPU, so that
# the machine's drift hits both alike. Prints one line per repetition and build: the median epoch
# (epochs 2-5 of a 5-epoch run: the first one captures the CUDA graphs; each build with its default -f)
# of the wide model in TF32 and in FP32 (784,1024,1024,10 relu, batch 256) and of the small one
# (784,128,10 sigmoid, batch 64);
# with MODEL=big, of the big model in TF32, FP32 and BF16 instead (784,4096,4096,10 relu, batch 1024,
# lr 0.05; a build without -x 2 prints FAIL for BF16).
#   bash dev/ab_trainer.sh OLD_BINARY [NEW_BINARY (default ./train_mlp_fast)] [REPS (default 3)]
# e.g. build the old code in another checkout:  git worktree add /tmp/old main && make -C /tmp/old train_fast
#   bash dev/ab_trainer.sh /tmp/old/train_mlp_fast
# (Before issue 16 the fast trainer was ./train_mlp, built by `make train`, whose -f 1 is the same path.)
# DATA: the dataset directory (default: the first of data/mnist, data/fashion-mnist, .data/fashion-mnist,
# /usr/share/datasets/fashion-mnist that holds the data). LOG_EVERY: the runs' -v (default 1000000: one
# log line an epoch; 100 is the trainers' default, what make bench runs).
set -uo pipefail
if [ $# -lt 1 ] || [ ! -x "$1" ]; then
    echo "usage: bash dev/ab_trainer.sh OLD_BINARY [NEW_BINARY] [REPS]  (OLD_BINARY must be an executable fast trainer)" >&2
    exit 2
fi
[ -z "${MODEL:-}" ] || [ "$MODEL" = big ] || { echo "error: MODEL=$MODEL: only MODEL=big, or none (the wide and small models)" >&2; exit 2; }
OLD=$1
NEW=${2:-./train_mlp_fast}
REPS=${3:-3}
[ -x "$NEW" ] || { echo "error: $NEW is not an executable fast trainer ---> try: make train_fast" >&2; exit 2; }
DATA=${DATA:-}
if [ -z "$DATA" ]; then
    for d in data/mnist data/fashion-mnist .data/fashion-mnist /usr/share/datasets/fashion-mnist; do
        { [ -e "$d/train-images-idx3-ubyte.gz" ] || [ -e "$d/train-images-idx3-ubyte" ]; } && { DATA=$d; break; }
    done
fi
[ -n "$DATA" ] || { echo "error: no dataset found ---> try: make data, or DATA=dir" >&2; exit 2; }

epoch_ms() {  # binary, flags... -> median epoch time in ms over epochs 2..5, or FAIL
    "$@" -d "$DATA" -n 5 -v "${LOG_EVERY:-1000000}" -o /tmp/ab_trainer.csv 2>&1 |
        awk '/^epoch [0-9]+ done/ {n++; if (n > 1) print $5 * 1000}' | sort -n |
        awk '{v[NR] = $1} END {if (NR == 0) print "FAIL"; else print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2}'
}
echo "# dev/ab_trainer.sh: old = $OLD, new = $NEW, data $DATA, -v ${LOG_EVERY:-1000000}, $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
for rep in $(seq 1 "$REPS"); do
    for v in new old; do
        b=$NEW
        [ $v = old ] && b=$OLD
        if [ "${MODEL:-}" = big ]; then
            echo "rep $rep $v | big tf32 $(epoch_ms "$b" -m 784,4096,4096,10 -a relu -b 1024 -l 0.05 -x 1) ms" \
                 "| big fp32 $(epoch_ms "$b" -m 784,4096,4096,10 -a relu -b 1024 -l 0.05) ms" \
                 "| big bf16 $(epoch_ms "$b" -m 784,4096,4096,10 -a relu -b 1024 -l 0.05 -x 2) ms"
        else
            echo "rep $rep $v | wide tf32 $(epoch_ms "$b" -m 784,1024,1024,10 -a relu -b 256 -x 1) ms" \
                 "| wide fp32 $(epoch_ms "$b" -m 784,1024,1024,10 -a relu -b 256) ms | small $(epoch_ms "$b" -b 64) ms"
        fi
    done
done
