#!/usr/bin/env bash
# Gossip averaging (accelkit.torch.GossipOptimizer) against allreduce-SGD (accelkit's
# DistributedOptimizer) on the CTR model of bench/train (55.75 M parameters, batch 64 per
# rank), 2 emulated hosts x 2 ranks (scripts/netns-cluster), host links shaped to $RATE.
# Both run bench/train/hvd_train.py: the same model, data, loop and SGD (lr 0.01, momentum
# 0.9); gossip runs end with one global average, after which eval_loss (the mean loss over
# each rank's batches, averaged over the ranks; allreduce-SGD's likewise) is taken.
# Variants, run in turn R times (A B C A B C ...), each run holding $LOCK:
#   allreduce   DistributedOptimizer (the runtime's defaults)
#   exp-ov1     exponential graph, overlap 1 (the exchange of step t hides behind step t+1)
#   exp-ov2     exponential graph, overlap 2
#   exp-ov2-g10 exponential graph, overlap 2, a global average after every 10th step
#   rand-ov2    random matching, overlap 2
# A run's figure is its mean step time after warm-up (steps/s = 1000 / mean ms; the mean,
# not the median, so that the periodic global average's step counts); the table gives
# medians over the R runs, the ratio of steps/s to allreduce-SGD (and per round) and the
# final eval_loss against allreduce-SGD's. Raw JSON lines (rank 0) go to RESULTS, every
# rank's output to RESULTS.log; medians as train.step lines (case ctr-gossip, step_ms the
# mean) to $AK_BENCH_OUT/train.jsonl (bench/results.py).
#   usage: bench/train/gossip_vs_allreduce.sh [R=3] [RESULTS=/tmp/ak-gossip.jsonl]
#   env:   PY=/usr/bin/python3  AK_LIBRARY=build/libaccelkit.so  RATE=1gbit  STEPS=20
#          WARMUP=3  VARIANTS="allreduce exp-ov1 exp-ov2 exp-ov2-g10 rand-ov2"
#          LOCK=/tmp/ak-cpu.lock  RANK_TIMEOUT=900
# Needs root (network namespaces).
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${1:-3}
RESULTS=${2:-/tmp/ak-gossip.jsonl}
PY=${PY:-/usr/bin/python3}
RATE=${RATE:-1gbit}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
VARIANTS=${VARIANTS:-allreduce exp-ov1 exp-ov2 exp-ov2-g10 rand-ov2}
LOCK=${LOCK:-/tmp/ak-cpu.lock}
RANK_TIMEOUT=${RANK_TIMEOUT:-900}
. bench/train/cluster_run.sh
echo "gossip_vs_allreduce: run $RUN_ID, R=$R, rate $RATE, steps $STEPS (+$WARMUP warm-up)," \
     "variants: $VARIANTS, AK_LIBRARY=${AK_LIBRARY:-none}" | tee -a "$LOG"

args_of() {
  case $1 in
    allreduce) echo "--compression none" ;;
    exp-ov1) echo "--gossip exponential --gossip-overlap 1" ;;
    exp-ov2) echo "--gossip exponential --gossip-overlap 2" ;;
    exp-ov2-g10) echo "--gossip exponential --gossip-overlap 2 --gossip-global 10" ;;
    rand-ov2) echo "--gossip random --gossip-overlap 2" ;;
    *) echo "gossip_vs_allreduce: unknown variant $1" >&2; exit 2 ;;
  esac
}

for v in $VARIANTS; do args_of "$v" >/dev/null || exit 2; done
for ((rep = 1; rep <= R; rep++)); do
  for v in $VARIANTS; do
    # shellcheck disable=SC2046 # the variant's arguments are words
    cluster_run "$RUN_ID/$v/$rep" 2 2 "$RATE" \
      '"%8.1f ms/step (mean; median %.1f)  eval_loss %.5f  sync=%s" % (r["step_ms_mean"], r["step_ms_median"], r["eval_loss"], r["params_in_sync"])' \
      bench/train/hvd_train.py --model ctr --warmup "$WARMUP" --steps "$STEPS" $(args_of "$v")
  done
done

"$PY" - "$RESULTS" "$RUN_ID" <<'EOF'
import os, statistics, sys
sys.path.insert(0, "bench/train")
from run_lines import run_lines
recs = {}
for (variant, rep), r in run_lines(sys.argv[1], sys.argv[2], 2):
    recs.setdefault(variant, {})[int(rep)] = r
base = recs.get("allreduce", {})
med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
base_ms = med([r["step_ms_mean"] for r in base.values()])
base_loss = med([r["eval_loss"] for r in base.values()])
print()
print(f"{'variant':12} {'runs':>4} {'ms/step':>8} {'steps/s':>8} {'vs allreduce':>12} "
      f"{'per round':>18} {'eval_loss':>9} {'loss vs':>8}")
rows = {}
for v, rs in recs.items():
    ms = med([r["step_ms_mean"] for r in rs.values()])
    loss = med([r["eval_loss"] for r in rs.values()])
    ratio = base_ms / ms if base else float("nan")
    per = " ".join(f"{base[i]['step_ms_mean'] / r['step_ms_mean']:.2f}"
                   for i, r in sorted(rs.items()) if i in base)
    dloss = 100 * (loss / base_loss - 1) if base else float("nan")
    rows[v] = (ms, loss, ratio, dloss)
    print(f"{v:12} {len(rs):4d} {ms:8.1f} {1000 / ms:8.3f} {ratio:12.2f} {per:>18} "
          f"{loss:9.5f} {dloss:+7.2f}%")
print("target: gossip >= 1.5x the steps/s of allreduce-SGD with eval_loss within 5 %")

sys.path.insert(0, "bench")
from results import Writer
ak = os.environ.get("AK_BIN") or os.path.join(os.path.dirname(os.environ.get("AK_LIBRARY") or "build/x"), "ak")
if os.path.exists(ak):
    w = Writer(os.environ.get("AK_BENCH_OUT", "bench-results"), "train", ak)
    for v, (ms, loss, ratio, dloss) in rows.items():
        w.add("train.step", {"case": "ctr-gossip", "variant": v, "ranks": 4,
                             "rate": os.environ.get("RATE", "1gbit")},
              {"step_ms": ms, "samples_per_s": 64 * 4 * 1000 / ms, "eval_loss": loss,
               "ratio_vs_allreduce": ratio, "loss_vs_allreduce_pct": dloss})
EOF
