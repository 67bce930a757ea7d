#!/usr/bin/env bash
# train_mlp_cpu's epoch time alone and with one core kept busy by another program, for several
# OpenMP wait settings (issue 19: a shared machine must stay usable). Prints one line per setting
# and repetition: the epoch time alone and loaded, in seconds.
#   bash dev/cpu_under_load.sh [REPS (default 2)] [STEPS (default 600)]
# (train_mlp_cpu sets GOMP_SPINCOUNT=1000 itself when neither it nor OMP_WAIT_POLICY is set;
# the "default" row here is libgomp's own default, forced with a large GOMP_SPINCOUNT.)
set -uo pipefail
REPS=${1:-2}
STEPS=${2:-600}
[ -x ./train_mlp_cpu ] || { echo "error: ./train_mlp_cpu is not built ---> try: make train_cpu" >&2; exit 2; }
run() { env "$@" ./train_mlp_cpu -n 1 -t "$STEPS" -v 100000 -o /tmp/cpu_under_load.csv | grep -o 'done | [0-9.]* s' | awk '{print $3}'; }
echo "# $(nproc) cores, $STEPS steps of the default model per run"
for rep in $(seq 1 "$REPS"); do
  for cfg in "GOMP_SPINCOUNT=300000" "GOMP_SPINCOUNT=1000" "OMP_WAIT_POLICY=passive" "OMP_NUM_THREADS=1"; do
    alone=$(run "$cfg")
    (timeout 10 sh -c 'while :; do :; done' &)
    sleep 0.3
    loaded=$(run "$cfg")
    sleep 10
    echo "rep $rep | $cfg | alone $alone s | one core busy $loaded s | ratio $(awk -v a="$alone" -v b="$loaded" 'BEGIN {printf "%.2f", b / a}')"
  done
done
