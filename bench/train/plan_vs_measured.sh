#!/bin/sh
# Plan -> run -> check on this host: describes it for the planner (ak sysinfo
# --cluster-json with the link alpha/beta of ak bench comm), calibrates the CPU efficiency
# terms (accelkit.torch.parallel.calibrate), plans MODEL for RANKS ranks, runs the best
# plan and the best plan of other structures (tp/pp/dp, ZeRO, recompute) with ak train,
# and prints measured vs predicted step time per plan, whether the planner's best was
# the fastest measured, and the compute efficiency fitted to the measurements
# (plan_table.py). Every measurement under flock /tmp/ak-cpu.lock.
#
#   bench/train/plan_vs_measured.sh [BUILD] [MODEL.json] [RANKS] [GBS] [STEPS] [all|best]
#   (defaults: build bench/train/gpt-58m.json 4 8 3 all; best: only the planner's best
#   plan, as make demo runs it)
set -eu
BUILD=${1:-build}
MODEL=${2:-bench/train/gpt-58m.json}
RANKS=${3:-4}
GBS=${4:-8}
STEPS=${5:-3}
WHICH=${6:-all}
AK=$BUILD/ak
LOCK=${AK_LOCK-flock /tmp/ak-cpu.lock}  # AK_LOCK= when the caller holds the lock already
export PYTHONPATH="$(pwd)/python${PYTHONPATH:+:$PYTHONPATH}"
export AK_LIBRARY="${AK_LIBRARY:-$(pwd)/$BUILD/libaccelkit.so}"
export AK_PYTHON="${AK_PYTHON:-/usr/bin/python3}"
OUT=$(mktemp -d /tmp/plan_vs_measured.XXXXXX)
trap 'rm -rf "$OUT"' EXIT

echo "== this host as a cluster of $RANKS ranks (ak sysinfo --cluster-json; ak bench comm --calibrate)"
(cd "$OUT" && $LOCK "$OLDPWD/$AK" bench comm --np "$RANKS" --calibrate "$OUT/comm.txt" >/dev/null)
$LOCK "$AK" sysinfo --cluster-json --ranks "$RANKS" --comm-tuning "$OUT/comm.txt" > "$OUT/cluster.json"
$LOCK "$AK" launch -np "$RANKS" "$AK_PYTHON" -m accelkit.torch.parallel.calibrate \
    --cluster "$OUT/cluster.json" --model "$MODEL" --out "$OUT/calibrated.json" | sed 's/^\[0\] //'

PLAN="$AK plan --model $MODEL --cluster $OUT/calibrated.json --gbs $GBS --attention standard --offload none --json --top 1"
# the planner's own choice first, then the best plan of other structures and modes
$PLAN > "$OUT/plan0.json"
i=1
[ "$WHICH" = best ] || for forced in "--tp 1 --pp 1 --dp $RANKS --zero 0" "--tp 2 --pp 1 --dp $((RANKS / 2))" \
              "--tp 1 --pp 2 --dp $((RANKS / 2))" "--tp 2 --pp 2 --dp $((RANKS / 4))" \
              "--tp 1 --pp 1 --dp $RANKS --zero 3 --recompute full" "--tp $RANKS --pp 1 --dp 1 --sp on"; do
    $PLAN $forced > "$OUT/plan$i.json" 2>/dev/null || { echo "(no plan: $forced)"; continue; }
    i=$((i + 1))
done

echo "== each plan, $STEPS timed steps after one warm-up (ak train)"
n=0
while [ -f "$OUT/plan$n.json" ]; do
    $LOCK "$AK" train --plan "$OUT/plan$n.json" --model "$MODEL" --steps "$STEPS" --warmup 1 \
        --python "$AK_PYTHON" >"$OUT/train$n.log" 2>&1 || { cat "$OUT/train$n.log"; exit 1; }
    sed -n 's/^\[0\] //p' "$OUT/train$n.log"
    n=$((n + 1))
done

echo
echo "== measured vs predicted ($MODEL, $RANKS ranks, global batch $GBS; plan 0 = the planner's best)"
python3 "$(dirname "$0")/plan_table.py" "$OUT" "$AK" "$MODEL" "$GBS"
