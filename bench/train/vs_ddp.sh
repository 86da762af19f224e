#!/usr/bin/env bash
# accelkit (Horovod API, bench/train/hvd_train.py) against PyTorch DDP with gloo
# (bench/train/ddp_train.py) on emulated hosts: scripts/netns-cluster, one network
# namespace per host, each host's link shaped to $RATE (1gbit). Cases:
#   ctr     CTR model (55.75 M params, batch 64 per rank), 2 hosts x 2 ranks:
#           ddp | ak (defaults) | ak-fp16 | ak-dgc (99.9 % sparsity)
#   resnet  ResNet-18 (batch 32 per rank, 224x224), 2 hosts x 1 rank: ddp | ak
#   ctr-pg  CTR model, 2 hosts x 2 ranks, the same DDP script on gloo and on backend
#           "accelkit" (accelkit.torch.distributed): ddp | ddp-ak | ddp-ak-fp16 (accelkit's
#           fp16 comm hook) ; ddp-fp16 (gloo with the same hook) and ddp-ak-bf16 on request
#   resnet-pg  ResNet-18, 2 hosts x 2 ranks: ddp | ddp-ak
#   FUSED=1 adds the same with accelkit.torch.FusedSGD (update overlapped with communication):
#   ak-fused, ak-fp16-fused, ak-dgc-fused (ctr), ak-fused (resnet). CTR_VARIANTS and
#   RESNET_VARIANTS replace the lists (e.g. CTR_VARIANTS="ddp ak-dgc ak-dgc-fused");
#   ddp-keepheap is DDP with glibc's malloc set by hand as accelkit's AK_TRAIN_KEEP_HEAP
#   sets it (a reference: how much of a lead is that setting).
# Each case first times the compute alone (ddp_train.py --local: one process, then as many
# concurrent processes as the case has ranks), then runs its variants in turn R times
# (A B C D A B C D ...). Every run holds $LOCK (/tmp/ak.lock; no run overlaps a build). Prints
# medians over the R runs (each run's figure is the median of its steps after warm-up)
# and ratios to DDP; the raw JSON lines (one per run, from rank 0) are appended to RESULTS,
# and every rank's output to RESULTS.log. The medians also go as train.step lines to
# $AK_BENCH_OUT/train.jsonl (bench/results.py; default bench-results/) for `ak report`.
#   usage: bench/train/vs_ddp.sh [R=3] [RESULTS=/tmp/ak-vs-ddp.jsonl] [cases="ctr resnet"]
#   env:   PY=/usr/bin/python3  AK_LIBRARY=build-bench/libaccelkit.so  RATE=1gbit
#          CTR_STEPS=10 RESNET_STEPS=8 WARMUP=3  FUSED=0  RANK_TIMEOUT=900  (seconds)
#          LOCK=/tmp/ak.lock (the lock each run holds)  SKIP_COMPUTE=1 (no compute-only runs)
#          TIMELINE=1 (after the rounds, one untimed run of "ak" with HOROVOD_TIMELINE whose last
#          step goes as train.timeline lines to the results folder; 0: none)
# Needs root (network namespaces). torch.set_num_threads(1) in every rank of both peers.
set -uo pipefail
cd "$(dirname "$0")/../.."
R=${1:-3}
RESULTS=${2:-/tmp/ak-vs-ddp.jsonl}
CASES=${3:-ctr resnet}
PY=${PY:-/usr/bin/python3}
RATE=${RATE:-1gbit}
CTR_STEPS=${CTR_STEPS:-10}
RESNET_STEPS=${RESNET_STEPS:-8}
WARMUP=${WARMUP:-3}
FUSED=${FUSED:-0}
RANK_TIMEOUT=${RANK_TIMEOUT:-900}
LOCK=${LOCK:-/tmp/ak.lock}
. bench/train/cluster_run.sh
echo "vs_ddp: run $RUN_ID, R=$R, rate $RATE, cases: $CASES, AK_LIBRARY=${AK_LIBRARY:-none}" | tee -a "$LOG"

run() {
  cluster_run "$1" "$2" "$3" "$4" \
    '"%9.2f samples/s %9.1f ms/step  sync=%s" % (r["samples_per_s"], r["step_ms_median"], r["params_in_sync"])' \
    "${@:5}"
}

for c in $CASES; do
  case $c in
    ctr) H=2 G=2 STEPS=$CTR_STEPS M=ctr VARIANTS=${CTR_VARIANTS:-ddp ak ak-fp16 ak-dgc}
         [ "$FUSED" = 1 ] && VARIANTS="$VARIANTS ak-fused ak-fp16-fused ak-dgc-fused" ;;
    resnet) H=2 G=1 STEPS=$RESNET_STEPS M=resnet18 VARIANTS=${RESNET_VARIANTS:-ddp ak}
         [ "$FUSED" = 1 ] && VARIANTS="$VARIANTS ak-fused" ;;
    ctr-pg) H=2 G=2 STEPS=$CTR_STEPS M=ctr VARIANTS=${CTR_PG_VARIANTS:-ddp ddp-ak ddp-ak-fp16} ;;
    resnet-pg) H=2 G=2 STEPS=$RESNET_STEPS M=resnet18 VARIANTS=${RESNET_PG_VARIANTS:-ddp ddp-ak} ;;
    *) echo "vs_ddp: unknown case $c" >&2; exit 2 ;;
  esac
  common=(--model "$M" --warmup "$WARMUP" --steps "$STEPS")
  if [ "${SKIP_COMPUTE:-0}" != 1 ]; then
  run "$RUN_ID/$c/compute-1proc/0" 0 1 none bench/train/ddp_train.py --local "${common[@]}"
  run "$RUN_ID/$c/compute-$((H * G))procs/0" "$H" "$G" none bench/train/ddp_train.py --local "${common[@]}"
  fi
  for ((rep = 1; rep <= R; rep++)); do
    for v in $VARIANTS; do
      case $v in
        ddp) args=(bench/train/ddp_train.py) ;;
        ddp-ak) args=(bench/train/ddp_train.py --backend accelkit) ;;
        ddp-ak-fp16) args=(bench/train/ddp_train.py --backend accelkit --hook fp16) ;;
        ddp-ak-bf16) args=(bench/train/ddp_train.py --backend accelkit --hook bf16) ;;
        ddp-fp16) args=(bench/train/ddp_train.py --hook fp16) ;;
        ddp-keepheap) args=(bench/train/ddp_train.py --keep-heap) ;;
        ak) args=(bench/train/hvd_train.py --compression none) ;;
        ak-fp16) args=(bench/train/hvd_train.py --compression fp16) ;;
        ak-dgc) args=(bench/train/hvd_train.py --compression dgc --sparsity 0.999) ;;
        ak-fused) args=(bench/train/hvd_train.py --compression none --fused) ;;
        ak-fp16-fused) args=(bench/train/hvd_train.py --compression fp16 --fused) ;;
        ak-dgc-fused) args=(bench/train/hvd_train.py --compression dgc --sparsity 0.999 --fused) ;;
        *) echo "vs_ddp: unknown variant $v" >&2; exit 2 ;;
      esac
      run "$RUN_ID/$c/$v/$rep" "$H" "$G" "$RATE" "${args[@]}" "${common[@]}"
    done
  done
  # one more, untimed run of accelkit's default variant with HOROVOD_TIMELINE: its last
  # step's gradient reduction as train.timeline lines (bench/train/timeline_excerpt.py)
  if [ "${TIMELINE:-1}" = 1 ] && [[ " $VARIANTS " == *" ak "* ]]; then
    tl=$(cd "$(dirname "$RESULTS")" && pwd)/timeline-$RUN_ID-$c.json
    HOROVOD_TIMELINE=$tl run "$RUN_ID/$c/timeline/0" "$H" "$G" "$RATE" bench/train/hvd_train.py \
      --compression none --model "$M" --warmup 1 --steps 2
    [ -s "$tl" ] && "$PY" bench/train/timeline_excerpt.py "$tl" --case "$c" --variant ak \
      --ak "${AK_BIN:-$(dirname "${AK_LIBRARY:-build/x}")/ak}"
  fi
done

# Table: per case and variant, medians over the runs of this invocation; ratio to DDP.
"$PY" - "$RESULTS" "$RUN_ID" <<'EOF'
import statistics, sys
sys.path.insert(0, "bench/train")
from run_lines import run_lines
recs = {}
for (case, variant, rep), r in run_lines(sys.argv[1], sys.argv[2], 3):
    if variant != "timeline":  # the untimed HOROVOD_TIMELINE run
        recs.setdefault((case, variant), []).append((int(rep), r))
targets = {("ctr", "ak"): 1.3, ("ctr", "ak-fp16"): 2.0, ("ctr", "ak-dgc"): 5.0,
           ("ctr", "ak-fused"): 1.3, ("ctr", "ak-fp16-fused"): 2.0, ("ctr", "ak-dgc-fused"): 5.0,
           ("resnet", "ak"): 1.1, ("resnet", "ak-fused"): 1.1,
           ("ctr-pg", "ddp-ak"): 1.5, ("ctr-pg", "ddp-ak-fp16"): 2.0,
           ("resnet-pg", "ddp-ak"): 1.1}
print()
print(f"{'case':7} {'variant':15} {'runs':>4} {'samples/s':>10} {'ms/step':>9} "
      f"{'vs DDP':>7} {'per-run ratios':>22} {'target':>7}")
for case in dict.fromkeys(k[0] for k in recs):
    ddp = dict(recs.get((case, "ddp"), []))
    ddp_med = statistics.median(r["samples_per_s"] for r in ddp.values()) if ddp else None
    for (c, v), rs in recs.items():
        if c != case:
            continue
        sps = statistics.median(r["samples_per_s"] for _, r in rs)
        ms = statistics.median(r["step_ms_median"] for _, r in rs)
        ratio = f"{sps / ddp_med:7.2f}" if ddp_med and not v.startswith("compute") else ""
        per = [r["samples_per_s"] / ddp[i]["samples_per_s"] for i, r in rs if i in ddp]
        per_s = " ".join(f"{x:.2f}" for x in per) if per and v != "ddp" and ratio else ""
        t = targets.get((c, v))
        tgt = f">={t:.1f}" if t else ""
        print(f"{c:7} {v:15} {len(rs):4d} {sps:10.2f} {ms:9.1f} {ratio:>7} {per_s:>22} {tgt:>7}")
print("samples/s: all ranks together (batch x world / median step); compute-*: no communication"
      " (samples/s of one process)")

# the medians as results lines: DDP as the peer, every accelkit variant as accelkit's
import os
sys.path.insert(0, "bench")
from results import Writer
ak = os.environ.get("AK_BIN") or os.path.join(os.path.dirname(os.environ.get("AK_LIBRARY") or "build/x"), "ak")
if os.path.exists(ak):
    w = Writer(os.environ.get("AK_BENCH_OUT", "bench-results"), "train", ak)
    import torch
    for (c, v), rs in recs.items():
        if v.startswith("compute"):
            continue
        figures = {"step_ms": statistics.median(r["step_ms_median"] for _, r in rs),
                   "samples_per_s": statistics.median(r["samples_per_s"] for _, r in rs)}
        # the step's phases (forward, backward, optimizer step) and accelkit's own cost
        phases = [r["phases_ms"] for _, r in rs if r.get("phases_ms")]
        if phases:
            figures["breakdown"] = {k: statistics.median(p[k] for p in phases) for k in phases[0]}
        for k in ("runtime_overhead_pct", "steady_overhead_pct"):
            if all(k in r for _, r in rs):
                figures[k] = statistics.median(r[k] for _, r in rs)
        ddp_peer = v == "ddp"
        w.add("train.step", {"case": c, "variant": v}, figures,
              peer="PyTorch DDP" if ddp_peer else None,
              peer_version=f"torch {torch.__version__} gloo" if ddp_peer else None)
EOF
