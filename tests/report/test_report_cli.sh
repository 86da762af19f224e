#!/usr/bin/env bash
# `ak report` on the command line: the fixtures give a page; malformed results lines are
# refused naming FILE:LINE and what is wrong; the two writers (`ak bench --out`, the C one,
# and bench/results.py, the shell/Python one) write lines that `ak report` accepts.
#   usage: test_report_cli.sh path/to/ak
set -u
AK=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/../common/check.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cd "$here/fixtures" || exit 1

check fixtures 0 "$AK" report run-a run-b -o "$tmp/r.html"
contains_text fixtures "report: $tmp/r.html (227 results lines from 2 folder(s))"
check page-data 0 grep -c '"_src":"run-a/kernels.jsonl:1"' "$tmp/r.html"
check page-script 0 grep -q 'function linePlot' "$tmp/r.html"
# nothing in the page may fetch: no src= or href= to another document
check page-offline 1 grep -Eq '(src|href)="(https?:)?//' "$tmp/r.html"

# one malformed line: refused by name (file and line), nothing written
good=$(head -1 run-a/kernels.jsonl)
bad() { # NAME WHAT-THE-ERROR-SAYS LINE-TEXT
  mkdir -p "$tmp/$1"
  { echo "$good"; echo; echo "$3"; } > "$tmp/$1/x.jsonl"
  check "bad-$1" 2 "$AK" report "$tmp/$1" -o "$tmp/$1.html"
  contains_text "bad-$1" "ak report: $tmp/$1/x.jsonl:3: not a results line: $2"
  check "bad-$1-no-page" 1 test -e "$tmp/$1.html"
}
bad notjson "not valid JSON" '{"schema": "accelkit.bench/1",'
bad schema 'unknown "schema"' "${good/accelkit.bench\/1/accelkit.bench\/9}"
bad nofigures 'no "figures" object' "${good/\"figures\"/\"figurez\"}"
bad peer '"peer" is neither null' "${good/\"peer\":null/\"peer\":\"OpenBLAS\"}"
bad machine '"machine" lacks' "${good/\"cores\":2/\"cores\":\"two\"}"
bad array '"figures" holds an array' "${good/\"gflops\":105.8/\"gflops\":[105.8]}"
bad array2 'not a JSON object' '[1, 2]'
mkdir -p "$tmp/none"
check empty-folder 2 "$AK" report "$tmp/none" -o "$tmp/n.html"
contains_text empty-folder "$tmp/none: no results files (*.jsonl) in it"
check missing-folder 2 "$AK" report "$tmp/nope" -o "$tmp/n.html"
contains_text missing-folder "$tmp/nope: No such file or directory"

# the writers' lines round-trip through ak report
check bench-out 0 "$AK" bench kernels --quick --no-peers --gemm 64x64x64 --out "$tmp/res"
check bench-out-lines 0 grep -c '"benchmark":"kernels.sgemm".*"peer":null.*"params":{"m":64,"n":64,"k":64,"threads":1}' "$tmp/res/kernels.jsonl"
check bench-out-none 0 "$AK" bench kernels --quick --no-peers --only vec --out none
echo '{"params":{"bytes":8,"ranks":2,"transport":"tcp"},"figures":{"time_us":8.3,"busbw":0.001}}' > "$tmp/row"
check py-writer 0 /usr/bin/python3 "$root/bench/results.py" --ak "$AK" --out "$tmp/res" --stem comm \
  --benchmark comm.allreduce --peer "Open MPI" --peer-version 4.1.4 < "$tmp/row"
check py-writer-line 0 grep -q '"peer":{"name":"Open MPI","version":"4.1.4"}' "$tmp/res/comm.jsonl"
check plan-out 0 "$AK" plan --model megatron-1t --cluster a100-80gb --devices 3072 --gbs 3072 --top 2 --out "$tmp/res"
check plan-out-lines 0 grep -c '"benchmark":"plan.best".*"rank":2,"plan":"tp=8 pp=16 dp=24 .*"breakdown":{"gemm_s":' "$tmp/res/plan.jsonl"
check pool-out 0 "$AK" bench pool --out "$tmp/res"
check pool-out-line 0 grep -q '"benchmark":"core.pool".*"figures":{"wake_spinning_p50_us":' "$tmp/res/kernels.jsonl"
check linear-out 0 "$AK" bench linear --quick --tokens 1 --shape 64x256 --out "$tmp/res"
check linear-out-lines 0 grep -c '"benchmark":"kernels.linear".*"params":{"type":"q8_0","n":64,"k":256,"tokens":1,"threads":1},"figures":{"us":.*"pct_read_bw":' "$tmp/res/kernels.jsonl"
check profile-out 0 env AK_PROFILE=1 "$AK" bench "$root/tests/fuzz/corpus/fuzz_onnx_load/conv.onnx" -n 3 -w 1 --out "$tmp/res"
check profile-out-lines 0 grep -q '"benchmark":"infer.profile".*"params":{"model":"conv","threads":.*"op":"[A-Za-z]*"},"figures":{"ms":' "$tmp/res/infer.jsonl"
check validation-out 0 env AK_BENCH_OUT="$tmp/res" /usr/bin/python3 "$root/bench/plan/validate_published.py" "$(dirname "$AK")"
check validation-out-lines 0 grep -q '"benchmark":"plan.validation".*"model":"megatron-1t".*"ratio_to_published":1.03' "$tmp/res/plan.jsonl"
check roundtrip 0 "$AK" report "$tmp/res" -o "$tmp/res.html"
lines=$(cat "$tmp"/res/*.jsonl | wc -l)
contains_text roundtrip "($lines results lines from 1 folder(s))"
check_summary
