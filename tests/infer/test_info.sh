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

# --plan: the backend per float32 MatMul/Gemm node (docs/inference-backends.md) on a model
# made here (python3-onnx): a MatMul large enough to be timed, a tiny Gemm that is not.
# With OpenBLAS or BLIS installed the MatMul is measured, and a second process reads the
# times from the tuning cache; with neither, "own" is the only backend.
if /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
  pd=$(mktemp -d)
  /usr/bin/python3 - "$pd/mm.onnx" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = numpy_helper.from_array(np.random.RandomState(0).rand(256, 256).astype(np.float32), "W")
g = numpy_helper.from_array(np.ones((2, 256), np.float32), "G")
nodes = [helper.make_node("MatMul", ["X", "W"], ["Y"], name="big"),
         helper.make_node("Gemm", ["Y", "G"], ["Z"], name="tiny", transB=1)]
graph = helper.make_graph(nodes, "plan", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [64, 256])],
                          [helper.make_tensor_value_info("Z", TensorProto.FLOAT, [64, 2])], [w, g])
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), sys.argv[1])
PY
  saved_xdg=${XDG_CACHE_HOME-}                       # ctest's (the build tree), restored below
  export XDG_CACHE_HOME=$pd/cache
  check plan 0 "$AK" info --plan -t 2 "$pd/mm.onnx"
  contains_text plan "2 float32 MatMul/Gemm nodes";  contains plan "tiny  *Gemm .* own  *small"
  if grep -q "big .* measured" <<<"$out"; then
    contains_text plan "*"                            # the chosen one's time is starred
    check plan-cached 0 "$AK" info --plan -t 2 "$pd/mm.onnx"
    contains plan-cached "big  *MatMul .* cache "
    # a foreign cache file: refused with a log line, the node measured again
    echo "not a cache" >"$pd/cache/accelkit/infer-backends.tsv"
    check plan-foreign 0 "$AK" info --plan -t 2 "$pd/mm.onnx"
    contains_text plan-foreign "is not one of accelkit's";  contains plan-foreign "big .* measured"
  else
    contains plan "big  *MatMul .* own  *only"       # neither OpenBLAS nor BLIS installed
  fi
  check plan-own 0 env AK_INFER_BACKENDS=own "$AK" info --plan "$pd/mm.onnx"
  contains plan-own "big  *MatMul .* own  *only"
  check plan-json 0 "$AK" info --plan --json "$pd/mm.onnx"
  contains_text plan-json '"backend":'
  check plan-bad 2 env AK_INFER_BACKENDS=own,mkl "$AK" info --plan "$pd/mm.onnx"
  contains_text plan-bad "unknown backend 'mkl'"
  check plan-opts 2 "$AK" info --optimized --plan "$pd/mm.onnx"
  contains_text plan-opts "do not combine"
  if [ -n "$saved_xdg" ]; then export XDG_CACHE_HOME=$saved_xdg; else unset XDG_CACHE_HOME; fi
  rm -rf "$pd"
else
  echo "SKIP plan: /usr/bin/python3 has no onnx module (Debian python3-onnx)"
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
