#!/usr/bin/env bash
# Every `ak ... --json` that needs no big input gives valid JSON, also when paths and
# names in a model hold quotes and backslashes: sysinfo, info, compare (passing and
# failing), bench MODEL, plan, mfu, bench pool, bench comm (one object per line). The
# model is a tiny Identity written by make_tiny_onnx.py, so nothing is skipped.
set -u
AK=${1:?usage: test_cli_json.sh path/to/ak}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common/check.sh"
command -v python3 >/dev/null || { echo "FAIL: python3 is required to parse the JSON"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# json NAME: $out is one JSON document; json_lines NAME: one per line
json() {
  if python3 -c 'import json, sys; json.load(sys.stdin)' <<<"$out"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL $1: not valid JSON:"; echo "$out" | head -5; fi
}
json_lines() {
  if python3 -c '
import json, sys
rows = [json.loads(line) for line in sys.stdin if line.strip()]
sys.exit(0 if rows else 1)' <<<"$out"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL $1: not JSON lines:"; echo "$out" | head -5; fi
}
# field NAME PY_EXPR: the parsed document d satisfies the Python expression
field() {
  if python3 -c "import json, os, sys; d = json.load(sys.stdin); sys.exit(0 if ($2) else 1)" <<<"$out"; then
    pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL $1: not ($2):"; echo "$out" | head -5; fi
}

dir="$tmp/dir \"quoted\" \\back"
python3 "$here/make_tiny_onnx.py" "$dir" 'in"x\' 'out"y\' 'N"\' || { echo "FAIL: cannot write the model"; exit 1; }
model="$dir/model.onnx"
export MODEL="$model" DIR="$dir"

check sysinfo 0 "$AK" sysinfo --quick --json 2>/dev/null; json sysinfo
field sysinfo-peak 'd["fma_peak_gflops_per_core"] > 0 and d["cores"] >= 1'
check info 0 "$AK" info --json "$model"; json info
field info-path "d['path'] == os.environ['MODEL']"
field info-names "d['inputs'][0]['name'] == 'in\"x\\\\' and d['inputs'][0]['shape'] == ['N\"\\\\', 3]"
check compare 0 "$AK" compare "$model" --inputs "$dir/inputs" --reference "$dir/ref" --json; json compare
field compare-pass "d['pass'] is True and d['outputs'][0]['name'] == 'out\"y\\\\' and d['model'] == os.environ['MODEL']"
check compare-fail 1 "$AK" compare "$model" --inputs="$dir/inputs" --reference="$dir/bad" --tol=0.01 --json
json compare-fail; field compare-fail-rows "d['pass'] is False and d['outputs'][0]['max_abs'] == 1"
check bench-model 0 "$AK" bench "$model" --input "in\"x\\=$dir/inputs/in\"x\\.npy" -n 3 -w 0 --json; json bench-model
field bench-model-iters "d['iters'] == 3 and d['p50_ms'] >= 0"
check plan 0 "$AK" plan --model llama2-7b --cluster h100 --devices 8 --gbs 64 --top 2 --json; json plan
check mfu 0 "$AK" mfu --model llama2-7b --cluster h100 --devices 8 --tokens-per-s 20000 --json; json mfu
check pool 0 "$AK" bench pool --threads 2 --json --out none; json pool
check comm 0 env AK_COMM_TRANSPORT=tcp "$AK" bench comm -np 2 -b 8 -e 1K -f 32 -n 2 -w 0 --check --json
json_lines comm
check_summary
