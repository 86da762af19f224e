#!/bin/sh
# server_load.sh [BUILD]: the server load test of `make bench` — bench/llm/server_load.py
# against `ak serve` on a small random model (dim 64, 2 layers), two 2-minute runs:
#   1. 1000 concurrent connections: completions and chat, streaming and not, 20 % of the
#      streams abandoned mid-way, 15 % malformed requests;
#   2. the same with 300 slow-header sockets trickling a byte a second, and /health p99
#      required below 100 ms.
# Criteria (each printed when it fails): zero failed well-formed requests, every stream
# ending with [DONE] or a clean error event, malformed requests refused with 4xx or a
# close, /health answering every poll, resident memory within 5 % over the last minute.
# Both runs happen; the exit status is 1 if either failed.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
model=$build/llm-models/server-load-tiny.gguf
mkdir -p "$build/llm-models"
[ -s "$model" ] || /usr/bin/python3 "$root/scripts/llm-make-model" --dim 64 --layers 2 \
  --heads 4 --kv-heads 2 --ffn 128 --ctx 256 --seed 5 --type f32 --out "$model" >/dev/null || exit 2
run() {
  /usr/bin/python3 "$root/bench/llm/server_load.py" --ak "$build/ak" --model "$model" \
    --connections 1000 --duration 120 --max-tokens 8 --serve-arg=--chat-format=chatml \
    --server-log "$build/server_load.log" "$@"
}
rc=0
echo "== server load: 1000 connections, 120 s"
run || rc=1
echo "== server load: 1000 connections and 300 slow-header sockets, 120 s"
run --slow-headers 300 --health-p99-ms 100 || rc=1
exit $rc
