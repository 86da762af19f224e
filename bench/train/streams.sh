#!/usr/bin/env bash
# Fusion streams (AK_FUSION_STREAMS) on the training benchmarks of bench/train: the same
# bench/train/hvd_train.py run (DistributedOptimizer, the runtime's defaults otherwise)
# with 1 stream (the default: fused allreduces one after another on the background
# thread) and with N streams (N fused allreduces in flight at once, each on its own
# connections, buffers sized adaptively), on 2 emulated hosts x 2 ranks
# (scripts/netns-cluster), host links shaped to $RATE. Variants, run in turn R times per
# case (s1 s2 s4 s1 s2 s4 ...), each run holding $LOCK:
#   s1  AK_FUSION_STREAMS=1     sN  AK_FUSION_STREAMS=N (AK_FUSION_ADAPTIVE=1)
#   sNf AK_FUSION_STREAMS=N with AK_FUSION_ADAPTIVE=0 (buffers filled to the threshold)
# A run's figure is rank 0's median step time after warm-up; the table gives medians over
# the R runs and the ratio of s1's step time to each variant's (> 1: faster than 1 stream),
# with each round's ratio. Raw JSON lines (rank 0) go to RESULTS, every rank's output to
# RESULTS.log.
#   usage: bench/train/streams.sh [R=3] [RESULTS=/tmp/ak-streams.jsonl] [cases="ctr resnet"]
#   env:   PY=/usr/bin/python3  AK_LIBRARY=build/libaccelkit.so  RATE=1gbit
#          CTR_STEPS=10 RESNET_STEPS=5 WARMUP=2  VARIANTS="s1 s2 s4"
#          LOCK=/tmp/ak-cpu.lock  RANK_TIMEOUT=900
# Needs root (network namespaces).
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${1:-3}
RESULTS=${2:-/tmp/ak-streams.jsonl}
CASES=${3:-ctr resnet}
PY=${PY:-/usr/bin/python3}
RATE=${RATE:-1gbit}
CTR_STEPS=${CTR_STEPS:-10}
RESNET_STEPS=${RESNET_STEPS:-5}
WARMUP=${WARMUP:-2}
VARIANTS=${VARIANTS:-s1 s2 s4}
LOCK=${LOCK:-/tmp/ak-cpu.lock}
RANK_TIMEOUT=${RANK_TIMEOUT:-900}
. bench/train/cluster_run.sh
echo "streams: run $RUN_ID, R=$R, rate $RATE, cases: $CASES, variants: $VARIANTS," \
     "AK_LIBRARY=${AK_LIBRARY:-none}" | tee -a "$LOG"

# env_of VARIANT: the variables that select it
env_of() {
  case $1 in
    s[1-8]) echo "AK_FUSION_STREAMS=${1#s} AK_FUSION_ADAPTIVE=1" ;;
    s[2-8]f) local n=${1#s}; echo "AK_FUSION_STREAMS=${n%f} AK_FUSION_ADAPTIVE=0" ;;
    *) echo "streams: unknown variant $1" >&2; return 2 ;;
  esac
}

for v in $VARIANTS; do env_of "$v" >/dev/null || exit 2; done
for c in $CASES; do
  case $c in
    ctr) model=ctr; steps=$CTR_STEPS ;;
    resnet) model=resnet18; steps=$RESNET_STEPS ;;
    *) echo "streams: unknown case $c" >&2; exit 2 ;;
  esac
  for ((rep = 1; rep <= R; rep++)); do
    for v in $VARIANTS; do
      # shellcheck disable=SC2046 # the variant's variables are words
      (export $(env_of "$v")
       cluster_run "$RUN_ID/$c/$v/$rep" 2 2 "$RATE" \
         '"%8.1f ms/step (median)  sync=%s" % (r["step_ms_median"], r["params_in_sync"])' \
         bench/train/hvd_train.py --model "$model" --warmup "$WARMUP" --steps "$steps")
    done
  done
done

"$PY" - "$RESULTS" "$RUN_ID" <<'EOF'
import statistics, sys
sys.path.insert(0, "bench/train")
from run_lines import run_lines
recs = {}
for (case, variant, rep), r in run_lines(sys.argv[1], sys.argv[2], 3):
    recs.setdefault(case, {}).setdefault(variant, {})[int(rep)] = r
med = lambda xs: statistics.median(xs) if xs else float("nan")  # noqa: E731
print()
print(f"{'case':7} {'variant':7} {'runs':>4} {'ms/step':>9} {'vs s1':>6} {'per round':>20}")
for case, variants in recs.items():
    base = variants.get("s1", {})
    base_ms = med([r["step_ms_median"] for r in base.values()])
    for v, rs in variants.items():
        ms = med([r["step_ms_median"] for r in rs.values()])
        per = " ".join(f"{base[i]['step_ms_median'] / r['step_ms_median']:.2f}"
                       for i, r in sorted(rs.items()) if i in base)
        print(f"{case:7} {v:7} {len(rs):4d} {ms:9.1f} {base_ms / ms:6.2f} {per:>20}")
EOF
