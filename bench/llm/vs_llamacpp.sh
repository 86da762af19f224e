#!/bin/bash
# vs_llamacpp.sh [MODEL_DIR]: llama.cpp (the peer) on the LLM benchmark models —
# prompt processing of 128 tokens (pp128), single-stream decode (tg) and batched decode of
# SEQS sequences together (bd: one token of each per step, tokens/s over all of them), with
# 1 and 2 threads, for the GGUF files of bench/llm/make-bench-models (f32, f16, bf16, q8_0,
# q4_0, q4_k_m, q6_k; any type make-bench-models writes can be named in TYPES). The last
# columns are accelkit ÷ llama.cpp.
#
# llama.cpp is not packaged in Debian 12; its prebuilt CPU libraries come from the npm
# registry in node-llama-cpp's per-platform package (@node-llama-cpp/linux-x64), which
# scripts/setup installs into the checkout's node_modules/ (ignored by git; another folder
# holding node_modules/@node-llama-cpp: $LLAMAPEER). llamacpp_bench.py calls libllama
# directly, as llama-bench does (node-llama-cpp's JavaScript API distorts 2-thread decode).
# accelkit's figures come from `ak bench llm --json` on the same file, right after
# llama.cpp's, row by row. Every measurement holds /tmp/ak.lock so that no build runs
# meanwhile. GB/s = llama.cpp's decode × weight bytes per token (decode is bandwidth-bound).
# Results lines (`ak report`): accelkit's from `ak bench llm` itself, llama.cpp's through
# bench/results.py, both into $AK_BENCH_OUT/llm.jsonl (default bench-results/).
#
# Environment: REPS (default 3, medians), N_GEN (decode tokens, default 64; per sequence for
# bd), SEQS (default 16; 0 leaves bd out), THREADS (default "1 2"),
# TYPES (default "f32 f16 bf16 q8_0 q4_0 q4_k_m q6_k"), AK_BIN (default build/ak),
# PROMPT (prompt tokens of pp, default 128; 0 leaves pp out, e.g. for the bd cells alone:
# PROMPT=0 TYPES=q4_0 ...), AK_LOCK (the lock file each measurement holds, default
# /tmp/ak.lock).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
models=${1:-$root/build/llm-models}
export LLAMAPEER=${LLAMAPEER:-$root}
REPS=${REPS:-3}
N_GEN=${N_GEN:-64}
THREADS=${THREADS:-1 2}
SEQS=${SEQS:-16}
TYPES=${TYPES:-f32 f16 bf16 q8_0 q4_0 q4_k_m q6_k}
AK_BIN=${AK_BIN:-$root/build/ak}
PROMPT=${PROMPT:-128}
AK_LOCK=${AK_LOCK:-/tmp/ak.lock}

install_peer() {
  [ -f "$LLAMAPEER/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libllama.v0.5.0.so" ] && return
  "$root/scripts/setup" >&2
}

# Bytes of weights one decode step reads: the matrices but the token embedding (of which
# one row is read), as `ak bench llm` counts them; norms are negligible.
weight_bytes() {
  /usr/bin/python3 - "$1" "$root/python/accelkit/llm_files.py" <<'EOF'
import importlib.util, sys
spec = importlib.util.spec_from_file_location("llm_files", sys.argv[2])
lf = importlib.util.module_from_spec(spec); spec.loader.exec_module(lf)
with lf.GGUFFile(sys.argv[1]) as g:
    print(sum(t.nbytes for n, t in g.tensors.items() if len(t.shape) == 2 and n != "token_embd.weight"))
EOF
}

# a figure of a JSON line on stdin: "-" when absent or 0 (not measured)
fields='import json, sys; r = json.loads(sys.stdin.read().strip().splitlines()[-1]); print(" ".join("%.1f" % r[k] if r.get(k) else "-" for k in sys.argv[1:]))'

peer() {  # peer MODEL THREADS -> "pp tg bd"
  flock "$AK_LOCK" /usr/bin/python3 "$here/llamacpp_bench.py" "$1" "$2" "$PROMPT" "$N_GEN" "$REPS" "$SEQS" |
    /usr/bin/python3 -c "$fields" pp_tps tg_tps bd_tps
}

# >>> accelkit columns ----------------------------------------------------------------------
# `ak bench llm --json` on the same model and thread count, under the same lock, right
# after llama.cpp's run (A B A B per row); "- -" when ak cannot run it.
accelkit() {  # accelkit MODEL THREADS -> "pp tg bd"
  flock "$AK_LOCK" "$AK_BIN" bench llm -m "$1" -t "$2" -p "$PROMPT" -n "$N_GEN" --seqs "$SEQS" \
    --reps "$REPS" --out none --json 2>/dev/null | /usr/bin/python3 -c "$fields" pp_tps tg_tps seqs_tps 2>/dev/null ||
    echo "- - -"
}
# <<< accelkit columns ----------------------------------------------------------------------

# llama.cpp's figures of one row as llm.prefill / llm.decode / llm.batched lines
record_peer() { # type threads pp tg bd ("-": not measured)
  local p="\"model\":\"llama-134m\",\"type\":\"$1\",\"threads\":$2"
  {
    [ "$3" = - ] || printf '{"benchmark":"llm.prefill","params":{%s,"tokens":%s},"figures":{"tokens_per_s":%s}}\n' "$p" "$PROMPT" "$3"
    [ "$4" = - ] || printf '{"benchmark":"llm.decode","params":{%s,"tokens":%s},"figures":{"tokens_per_s":%s}}\n' "$p" "$N_GEN" "$4"
    [ "$5" = - ] || printf '{"benchmark":"llm.batched","params":{%s,"tokens":%s,"seqs":%s},"figures":{"tokens_per_s":%s}}\n' "$p" "$N_GEN" "$SEQS" "$5"
  } | /usr/bin/python3 "$root/bench/results.py" --ak "$AK_BIN" --stem llm --peer llama.cpp \
        --peer-version "node-llama-cpp $(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' "$LLAMAPEER/node_modules/@node-llama-cpp/linux-x64/package.json" | head -1)"
}

ratio() { /usr/bin/python3 -c "import sys; a, b = sys.argv[1:]; print('-' if '-' in (a, b) else f'{float(a) / float(b):.2f}')" "$1" "$2"; }

main() {
  install_peer
  local type missing=""
  for type in $TYPES; do [ -f "$models/llama-134m-$type.gguf" ] || missing="$missing $type"; done
  [ -z "$missing" ] || BENCH_TYPES="$missing" AK_BIN="$AK_BIN" "$here/make-bench-models" "$models" >&2
  echo "llama.cpp (libllama of node-llama-cpp 3.22.1); model: 134 M Llama (dim 768, 12 layers, FFN 2048, vocab 32000)"
  echo "pp = prompt $PROMPT tokens in one batch, tg = decode $N_GEN tokens one at a time, bd = $SEQS sequences decoded together ($N_GEN steps of one token each); medians of $REPS; $(nproc) cores"
  # the lock keeps builds out, not other benchmarks: a busy machine shows in the load
  echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  row='%-6s %3s | %9s %9s %9s %7s | %9s %9s %9s | %6s %6s %6s\n'
  # shellcheck disable=SC2059  # the format is the variable
  printf "$row" type thr "llama pp" "llama tg" "llama bd" "GB/s" "ak pp" "ak tg" "ak bd" "pp x" "tg x" "bd x"
  for type in $TYPES; do
    model="$models/llama-134m-$type.gguf"
    bytes=$(weight_bytes "$model")
    for t in $THREADS; do
      read -r lpp ltg lbd < <(peer "$model" "$t")
      read -r app atg abd < <(accelkit "$model" "$t")
      record_peer "$type" "$t" "$lpp" "$ltg" "$lbd"
      gbs=$(/usr/bin/python3 -c "print(f'{$ltg * $bytes / 1e9:.1f}')")
      # shellcheck disable=SC2059
      printf "$row" "$type" "$t" "$lpp" "$ltg" "$lbd" "$gbs" "$app" "$atg" "$abd" \
        "$(ratio "$app" "$lpp")" "$(ratio "$atg" "$ltg")" "$(ratio "$abd" "$lbd")"
    done
  done
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

main "$@"
