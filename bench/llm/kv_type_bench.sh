#!/bin/sh
# kv_type_bench.sh [MODEL] [CONTEXT] [ROUNDS]: single-sequence decode tokens/s after a
# CONTEXT-token prompt (default 1900 of the 134 M bench model's 2048) with an f16 and a
# q8_0 KV cache — q8_0 scored both ways (the default: f32 query against keys widened in
# registers; q8_0-intquery: query quantized, integer dot products, AK_ATTN_Q8_QUERY=int) —
# alternating f16, q8_0, q8_0-intquery in each of ROUNDS rounds (default 5), each run under
# flock /tmp/ak-cpu.lock, one thread; prints every run and the medians and ratios.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
model=${1:-$root/build/llm-models/llama-134m-f16.gguf}
ctx=${2:-1900}
rounds=${3:-5}
ak=${AK_BIN:-$root/build/ak}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # label env kv-type
  tps=$(flock /tmp/ak-cpu.lock env "$2" "$ak" bench llm -m "$model" -t 1 -p 0 -n 128 \
        --context "$ctx" --reps 1 --kv-type "$3" --out none --json |
        /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["tg_tps"])')
  echo "$1 $tps" | tee -a "$out"
}
i=0
while [ "$i" -lt "$rounds" ]; do
  run f16 AK_ATTN_Q8_QUERY=int f16
  run q8_0 AK_ATTN_Q8_QUERY=f32 q8_0
  run q8_0-intquery AK_ATTN_Q8_QUERY=int q8_0
  i=$((i + 1))
done
/usr/bin/python3 - "$out" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    k, v = line.split()
    runs.setdefault(k, []).append(float(v))
med = {k: statistics.median(v) for k, v in runs.items()}
for k, v in med.items():
    print(f"median {k}: {v:.2f} t/s ({len(runs[k])} runs)")
print(f"q8_0 / f16: {med['q8_0'] / med['f16']:.3f}   "
      f"q8_0 integer query / f16: {med['q8_0-intquery'] / med['f16']:.3f}")
PY
