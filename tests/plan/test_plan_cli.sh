#!/usr/bin/env bash
# `ak plan` and `ak mfu` from the command line: searches, forced plans, the explanation
# against a baseline, JSON keys, and impossible inputs (clear message, non-zero exit).
set -u
AK=${1:?usage: test_plan_cli.sh path/to/ak}
. "$(dirname "$0")/../common/check.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

check list 0 "$AK" plan --list; contains list "megatron-1t"; contains list "mixed-a100-h100"; contains list "llama3-405b"
check search 0 "$AK" plan --model megatron-1t --cluster a100-80gb --devices 3072 --gbs 3072 --top 3
contains search "searched [0-9]* plans"; contains search "best plan:"; contains search "memory per device"
# the published Megatron plan as baseline: the search explains what it changed and why it is faster
check explain 0 "$AK" plan --model megatron-1t --cluster a100-80gb --devices 3072 --gbs 3072 --attention standard \
  --baseline tp=8,pp=64,dp=6,recompute=full,zero=0,sp=off
contains explain "faster than the baseline"; contains explain "plan differences:"; contains explain "time changes: "
check forced-json 0 "$AK" plan --model megatron-530b --cluster a100-80gb --devices 2520 --gbs 2520 \
  --tp 8 --pp 35 --dp 9 --vp 1 --mbs 1 --sp off --recompute full --zero 0 --offload none --attention standard --json
for key in time_per_iter_s tflops_per_device mfu hfu memory_bytes_per_device breakdown plans_evaluated; do
  contains "forced-json $key" "\"$key\":"
done
contains forced-json '"tp":8,"pp":35,"dp":9'
check hybrid 0 "$AK" plan --model llama2-7b --cluster a100-40gb --devices 1 --gbs 64 --recompute hybrid --top 1
contains hybrid "hybrid:[0-9]"
check mixed 0 "$AK" plan --model llama2-70b --cluster mixed-a100-h100 --gbs 1024 --top 2
contains mixed "layers on A100-SXM4-80GB"; contains mixed "layers on H100-SXM5-80GB"
# a description from a file
printf '{"name":"tiny","layers":4,"hidden":256,"heads":4,"vocab":1000,"seq_len":128}\n' > "$tmp/tiny.json"
check file-model 0 "$AK" plan --model "$tmp/tiny.json" --cluster h100 --devices 8 --gbs 64 --top 1; contains file-model "model tiny"
check mfu 0 "$AK" mfu --model megatron-1t --cluster a100-80gb --devices 3072 --tokens-per-s 500000 --recompute full
contains mfu "MFU [0-9.]* %"
check mfu-json 0 "$AK" mfu --model llama3-8b --cluster h100 --devices 8 --step-time 10 --gbs 64 --json
contains mfu-json '"mfu":0\.'

# impossible inputs: a clear message and a non-zero exit
printf '{"name":"bad","layers":0,"hidden":256,"heads":4,"vocab":1000,"seq_len":128}\n' > "$tmp/zero.json"
check zero-layers 2 "$AK" plan --model "$tmp/zero.json" --cluster h100 --gbs 8; contains zero-layers "layers must be"
printf '{"name":"bad","layers":2,"hidden":250,"heads":4,"vocab":1000,"seq_len":128}\n' > "$tmp/heads.json"
check heads 2 "$AK" plan --model "$tmp/heads.json" --cluster h100 --gbs 8; contains heads "must divide hidden"
check mfu-heads 2 "$AK" mfu --model "$tmp/heads.json" --cluster h100 --devices 8 --tokens-per-s 10
check neg-gbs 2 "$AK" plan --model llama2-7b --cluster h100 --gbs -5; contains neg-gbs "bad value '-5'"
check neg-tokens 2 "$AK" mfu --model llama2-7b --cluster h100 --devices 8 --tokens-per-s -3
check unknown-model 2 "$AK" plan --model gpt-9 --cluster h100 --gbs 8; contains unknown-model "unknown model preset 'gpt-9'"
check unknown-cluster 2 "$AK" mfu --model llama2-7b --cluster tpu --devices 8 --tokens-per-s 10; contains unknown-cluster "unknown cluster preset 'tpu'"
check missing-file 2 "$AK" plan --model "$tmp/nope.json" --cluster h100 --gbs 8; contains missing-file "cannot open"
check no-gbs 2 "$AK" plan --model llama2-7b --cluster h100
check bad-recompute 2 "$AK" plan --model llama2-7b --cluster h100 --gbs 8 --recompute sometimes
check bad-tp 1 "$AK" plan --model llama2-7b --cluster h100 --devices 8 --gbs 8 --tp 3; contains bad-tp "no plan satisfies"
check too-big 1 "$AK" plan --model llama3-405b --cluster a100-40gb --devices 8 --gbs 8; contains too-big "no plan fits in memory"
check unknown-opt 2 "$AK" plan --model llama2-7b --cluster h100 --gbs 8 --frob 1

check_summary
