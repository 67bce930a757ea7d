#!/usr/bin/env bash
# dev/multi_gpu_checks.sh -- train_mlp_fast as one rank per GPU under every launcher, on a machine
# with two GPUs or more: what test_multi_gpu does not run (it runs -g N and torchrun only).
#
#   bash dev/multi_gpu_checks.sh [DATA]        (default: the first of data/fashion-mnist, data/mnist)
#
# Each check prints "ok" or "FAIL" and a line of evidence; the script ends with "N passed, N failed".
#   1. torchrun --no-python --nproc-per-node 2, mpirun -np 2 (as root: --allow-run-as-root), and
#      srun's variables set by hand: each trains, rank 0 writes the log, the final loss is the -g 2 run's
#   2. NCCL's socket transport forced (NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket), the path
#      between machines: NCCL_DEBUG=INFO says "via NET/Socket", and the run ends as the -g 2 run does
#   3. a rank killed with kill -9 mid-run: every rank ends within 60 s, the spawner names the lost rank
#      and exits non-zero, and the last checkpoint reads back whole
# torchrun or mpirun missing: that check is skipped (counted as skipped).
set -u
cd "$(dirname "$0")/.."
DATA=${1:-}
if [ -z "$DATA" ]; then for d in data/fashion-mnist data/mnist .data/fashion-mnist; do [ -d "$d" ] && DATA=$d && break; done; fi
export NCCL_NVLS_ENABLE=0
T=$(mktemp -d /tmp/mlp_mgpu_XXXXXX)
P=0; F=0; S=0
ok() { echo "  ok   $*"; P=$((P + 1)); }
bad() { echo "  FAIL $*"; F=$((F + 1)); }
skip() { echo "  skip $*"; S=$((S + 1)); }
MODEL="-d $DATA -m 784,256,10 -a relu -b 512 -n 1 -t 20 -v 10 -s 7"
final_loss() { awk -F, '$1 == "train" { l = $5 } END { print l }' "$1"; }

echo "== the reference: -g 2"
./train_mlp_fast $MODEL -g 2 -o "$T/g2.csv" > "$T/g2.txt" 2>&1 && ok "-g 2 runs: final loss $(final_loss "$T/g2.csv")" \
  || bad "-g 2: exit $?: $(tail -n 1 "$T/g2.txt")"
want=$(final_loss "$T/g2.csv")

echo "== launchers"
if command -v torchrun >/dev/null; then
  torchrun --no-python --nproc-per-node 2 --master-port 29611 ./train_mlp_fast $MODEL -o "$T/tr.csv" > "$T/tr.txt" 2>&1
  rc=$?; got=$(final_loss "$T/tr.csv" 2>/dev/null)
  [ $rc = 0 ] && [ "$got" = "$want" ] && ok "torchrun: exit 0, final loss $got (the -g 2 run's)" \
    || bad "torchrun: exit $rc, final loss '$got' against '$want': $(tail -n 2 "$T/tr.txt" | tr '\n' ' ')"
else skip "torchrun is not installed"; fi
if command -v mpirun >/dev/null; then
  MASTER_ADDR=127.0.0.1 MASTER_PORT=29621 mpirun --allow-run-as-root -np 2 -x MASTER_ADDR -x MASTER_PORT -x NCCL_NVLS_ENABLE \
    ./train_mlp_fast $MODEL -o "$T/mpi.csv" > "$T/mpi.txt" 2>&1
  rc=$?; got=$(final_loss "$T/mpi.csv" 2>/dev/null)
  [ $rc = 0 ] && [ "$got" = "$want" ] && ok "mpirun: exit 0, final loss $got" \
    || bad "mpirun: exit $rc, final loss '$got': $(tail -n 2 "$T/mpi.txt" | tr '\n' ' ')"
else skip "mpirun is not installed"; fi
pids=()
for r in 0 1; do
  SLURM_PROCID=$r SLURM_NTASKS=2 SLURM_LOCALID=$r MASTER_ADDR=127.0.0.1 MASTER_PORT=29631 \
    ./train_mlp_fast $MODEL -o "$T/srun.csv" > "$T/srun$r.txt" 2>&1 &
  pids+=($!)
done
wait "${pids[0]}"; rc0=$?; wait "${pids[1]}"; rc1=$?
got=$(final_loss "$T/srun.csv" 2>/dev/null)
[ $rc0 = 0 ] && [ $rc1 = 0 ] && [ "$got" = "$want" ] && ok "srun's variables: both ranks exit 0, final loss $got" \
  || bad "srun's variables: exits $rc0 $rc1, final loss '$got': $(tail -n 1 "$T/srun0.txt")"

echo "== NCCL over sockets (the path between machines)"
NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_NET=Socket NCCL_DEBUG=INFO ./train_mlp_fast $MODEL -g 2 -o "$T/sock.csv" \
  > "$T/sock.txt" 2>&1
rc=$?; got=$(final_loss "$T/sock.csv" 2>/dev/null)
grep -q "via NET/Socket" "$T/sock.txt" && ok "NCCL_DEBUG=INFO: $(grep -m 1 -o 'via NET/Socket.*' "$T/sock.txt")" \
  || bad "no 'via NET/Socket' in NCCL's lines"
[ $rc = 0 ] && [ "$got" = "$want" ] && ok "over sockets: exit 0, final loss $got" || bad "over sockets: exit $rc, '$got'"
grep -qi "nvls" "$T/sock.txt" && echo "       (NCCL on NVLS: $(grep -i -m 1 nvls "$T/sock.txt"))"

echo "== a rank killed with kill -9"
./train_mlp_fast -d "$DATA" -m 784,256,10 -b 512 -n 1000 -v 10 -g 2 -c "$T/k.ckpt" -o "$T/k.csv" > "$T/k.txt" 2>&1 &
spawner=$!
for i in $(seq 60); do sleep 0.5; [ -s "$T/k.ckpt" ] && break; done
victim=$(pgrep -P $spawner | tail -n 1)
start=$(date +%s)
[ -n "$victim" ] && kill -9 "$victim"
wait $spawner; rc=$?
took=$(( $(date +%s) - start ))
[ -n "$victim" ] && [ $rc != 0 ] && grep -q "rank 1" "$T/k.txt" && [ "$took" -lt 60 ] \
  && ok "rank 1 killed: the job ended in ${took} s, exit $rc, \"$(grep -m 1 'rank 1' "$T/k.txt")\"" \
  || bad "kill -9: victim '$victim', exit $rc after ${took} s: $(tail -n 2 "$T/k.txt" | tr '\n' ' ')"
./train_mlp_fast -d "$DATA" -e "$T/k.ckpt" > "$T/ke.txt" 2>&1 && ok "the last checkpoint reads back: $(grep -m 1 -i accuracy "$T/ke.txt")" \
  || bad "the last checkpoint: $(tail -n 1 "$T/ke.txt")"
pgrep -f "$T/k.ckpt" >/dev/null && bad "a rank is still running" || ok "no rank left running"

rm -rf "$T"
echo "$P passed, $F failed, $S skipped"
[ $F = 0 ]
