#!/usr/bin/env bash
# ONNX inference: accelkit against ONNX Runtime 1.30 (bench/peers/ort_bench.js, the same
# .onnx file) and PyTorch 1.13 eager (bench/peers/torch_infer.py; bench/infer/bert.py for
# BERT), batch 1, run alternately A B C A B C in one session; prints the median p50 latency
# of each and the ratios. Models are exported once by bench/infer/export.py with a seeded
# input and PyTorch's output, and `ak compare` checks accelkit against that output first.
# The medians also go as infer.latency lines to $AK_BENCH_OUT/infer.jsonl (bench/results.py;
# default bench-results/), which `ak report` plots.
#   usage: bench/infer/vs_peers.sh [--int8] [build-dir] [rounds] [threads] [model ...]
#   models: resnet50 mobilenet_v2 bert (BERT-base encoder, sequence 128) resnet18 ...
# --int8: the INT8 comparison instead (bench/infer/int8_vs_peers.py): the same quantized
# file (static QDQ ResNet-50, dynamic BERT-base) in accelkit and ONNX Runtime beside
# accelkit's float32, a column per thread count (threads may be a list: 1,2; default
# 1,2), and the INT8 file's accuracy against float32.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
int8=0
if [ "${1:-}" = --int8 ]; then int8=1; shift; fi
build=${1:-$here/build}; rounds=${2:-3}; threads_arg=${3:-}; shift $(( $# > 3 ? 3 : $# ))
threads=${threads_arg:-2}
models=("$@"); [ ${#models[@]} -gt 0 ] || models=(resnet50 mobilenet_v2 bert)
py=/usr/bin/python3
peers=$here/bench/peers
ortdir=${ORT_PEER_DIR:-$here/.cache/peers/ortpeer} # inside the checkout, ignored by git
if [ ! -d "$ortdir/node_modules/onnxruntime-node" ]; then
  echo "installing onnxruntime-node@1.30.0 into $ortdir (npm registry)"
  mkdir -p "$ortdir" && (cd "$ortdir" && npm init -y >/dev/null && npm install --ignore-scripts onnxruntime-node@1.30.0 >/dev/null)
fi
if [ $int8 = 1 ]; then
  [ $# -gt 0 ] || models=(resnet50 bert)
  exec $py "$here/bench/infer/int8_vs_peers.py" --build "$build" --rounds "$rounds" \
    --threads "${threads_arg:-1,2}" "${models[@]}"
fi
out=$build/models; mkdir -p "$out"
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
p50() { grep -o '"p50_ms": *[0-9.]*' | grep -o '[0-9.]*$'; }

printf "batch 1, %s thread(s), %s alternating rounds of 50 runs after 5 warm-ups; median p50 ms\n" "$threads" "$rounds"
printf "%-14s %10s %10s %10s %9s %9s  %s\n" model accelkit ort pytorch "ak/ort" "ak/torch" "precision vs pytorch"
for m in "${models[@]}"; do
  [ -f "$out/$m.onnx" ] || $py "$here/bench/infer/export.py" "$m" "$out" >/dev/null
  prec=$("$build/ak" compare "$out/$m.onnx" --inputs "$out/$m/inputs" --reference "$out/$m/reference" \
         -t "$threads" --json | grep -o '"max_rel": *[0-9.e+-]*' | head -1 | grep -o '[0-9.e+-]*$') ||
    { echo "vs_peers.sh: ak compare gave no max_rel for $m" >&2; exit 1; }
  a=""; o=""; t=""
  for ((r = 0; r < rounds; r++)); do
    a+="$("$build/ak" bench "$out/$m.onnx" -t "$threads" -n 50 -w 5 --out none --json | p50) "
    o+="$(NODE_PATH=$ortdir/node_modules node "$peers/ort_bench.js" "$out/$m.onnx" "$threads" 50 | tr -d ' ' | sed 's/:/: /g' | p50) "
    if [ "$m" = bert ]; then t+="$($py "$here/bench/infer/bert.py" "$threads" | p50) "
    else t+="$($py "$peers/torch_infer.py" "$m" "$threads" | p50) "; fi
  done
  A=$(tr ' ' '\n' <<<"$a" | grep . | median); O=$(tr ' ' '\n' <<<"$o" | grep . | median)
  T=$(tr ' ' '\n' <<<"$t" | grep . | median)
  printf "%-14s %10.2f %10.2f %10.2f %9.3f %9.3f  max-norm rel %s\n" "$m" "$A" "$O" "$T" \
    "$(awk -v a="$A" -v b="$O" 'BEGIN {print a / b}')" "$(awk -v a="$A" -v b="$T" 'BEGIN {print a / b}')" "$prec"
  record() { # median-p50 peer version
    printf '{"params":{"model":"%s","threads":%s,"batch":1},"figures":{"p50_ms":%s}}\n' "$m" "$threads" "$1" |
      $py "$here/bench/results.py" --ak "$build/ak" --stem infer --benchmark infer.latency ${2:+--peer "$2" --peer-version "$3"}
  }
  record "$A"
  record "$O" "ONNX Runtime" 1.30.0
  record "$T" PyTorch "$($py -c 'import torch; print(torch.__version__)')"
done
