#!/usr/bin/env bash
# `ak info` end to end on Debian's libonnx-testdata models: text and JSON output, FLOPs
# where shapes are static, subgraphs, refusals (opset out of range, garbage, missing
# file) with exit code 2, and valid JSON for a few hundred models. Skips (77) without
# the test data.
set -u
AK=${1:?usage: test_info.sh path/to/ak}
DATA=/usr/share/libonnx-testdata/data
if [ ! -d "$DATA" ]; then
  echo "SKIP: $DATA is absent (Debian package libonnx-testdata; scripts/setup installs it)"
  exit 77
fi
. "$(dirname "$0")/../common/check.sh"

check usage 2 "$AK" info;                       contains_text usage "usage: ak info"
check badopt 2 "$AK" info --frob x.onnx;        contains_text badopt "unknown option"
check help 0 "$AK" info --help;                 contains_text help "ak info model.onnx"
check matmul 0 "$AK" info "$DATA/node/test_matmul_3d/model.onnx"
contains_text matmul "float32 [2, 3, 4]";            contains_text matmul "MatMul"
contains_text matmul "144 FLOP (Conv/ConvTranspose/Gemm/MatMul, 1 nodes)"
check matmul-json 0 "$AK" info --json "$DATA/node/test_matmul_3d/model.onnx"
contains_text matmul-json '"flops":144';             contains_text matmul-json '"shape":[2,3,4]'
check if 0 "$AK" info "$DATA/node/test_if/model.onnx"
contains_text if "+2 nodes in subgraphs";            contains_text if "bool []"
check conv 0 "$AK" info "$DATA/node/test_basic_conv_with_padding/model.onnx"
contains_text conv "Conv"
check opset6 0 "$AK" info "$DATA/pytorch-converted/test_Conv2d/model.onnx"
contains_text opset6 "ai.onnx 6"
check missing 2 "$AK" info /nonexistent.onnx;   contains_text missing "cannot open"
tmp=$(mktemp)
head -c 300 /dev/urandom >"$tmp"
check garbage 2 "$AK" info "$tmp";              contains_text garbage "invalid model"
rm -f "$tmp"

# JSON stays valid for every model of these folders (names, symbolic dims, odd types)
if command -v python3 >/dev/null; then
  lines=$(mktemp)
  for f in "$DATA"/simple/*/model.onnx "$DATA"/pytorch-operator/*/model.onnx \
           "$DATA"/node/test_[a-f]*/model.onnx; do
    "$AK" info --json "$f" >>"$lines" 2>/dev/null
  done
  check json 0 python3 -c '
import json, sys
n = 0
for line in open(sys.argv[1]):
    json.loads(line); n += 1
print("valid JSON from", n, "models")
sys.exit(0 if n > 100 else 1)' "$lines"
  echo "$out"
  rm -f "$lines"
fi

# string tensors in `ak run` (printed quoted) and `ak compare` (equal or not, no distance)
S=$DATA/node/test_strnormalizer_export_monday_casesensintive_upper
L=$DATA/node/test_strnormalizer_export_monday_casesensintive_lower
check run-strings 0 "$AK" run "$S/model.onnx" --inputs "$S/test_data_set_0"
contains run-strings 'string \[3\] "TUESDAY" "WEDNESDAY" "THURSDAY"'
check compare-strings 0 "$AK" compare "$S/model.onnx" --inputs "$S/test_data_set_0" \
  --reference "$S/test_data_set_0"
check compare-strings-differ 1 "$AK" compare "$S/model.onnx" --inputs "$S/test_data_set_0" \
  --reference "$L/test_data_set_0"
contains compare-strings-differ "FAIL"
check_summary
