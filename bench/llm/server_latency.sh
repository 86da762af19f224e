#!/usr/bin/env bash
# Server latency under concurrency, for `make bench` and `ak report`: `ak serve MODEL` on a
# free loopback port, then `ak bench llm --url` with C streaming clients for each C given
# (random prompts, ignore_eos), one level after the other on the same server. Each level
# appends an llm.server line (time to first token and inter-token latency percentiles,
# tokens/s) to $AK_BENCH_OUT/llm.jsonl (default bench-results/), which the report draws by
# concurrency.
#   usage: bench/llm/server_latency.sh MODEL.gguf [concurrency ...]   (default: 1 4 16)
#   env: AK_BIN (default build/ak), DURATION seconds per level (20), PROMPT tokens (64),
#        GEN tokens per request (64), THREADS (2)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
model=${1:?usage: server_latency.sh MODEL.gguf [concurrency ...]}; shift
levels=("$@"); [ ${#levels[@]} -gt 0 ] || levels=(1 4 16)
ak=${AK_BIN:-$here/build/ak}
max=0; for c in "${levels[@]}"; do [ "$c" -gt "$max" ] && max=$c; done
log=$(mktemp)
"$ak" serve "$model" --port 0 -t "${THREADS:-2}" --max-seqs "$max" 2> "$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -f "$log"' EXIT

# the port the server chose, then /health until it answers 200 (503 while loading; 60 s at most)
url=""
for _ in $(seq 600); do
  url=$(grep -o 'listening at http://[0-9.]*:[0-9]*' "$log" | head -1 | sed 's/listening at //') || true
  if [ -n "$url" ] && /usr/bin/python3 -c 'import sys, urllib.request
sys.exit(0 if urllib.request.urlopen(sys.argv[1] + "/health", timeout=2).status == 200 else 1)' "$url" 2>/dev/null; then
    break
  fi
  kill -0 "$pid" 2>/dev/null || { echo "server_latency.sh: ak serve exited:" >&2; cat "$log" >&2; exit 1; }
  sleep 0.1; url=""
done
[ -n "$url" ] || { echo "server_latency.sh: ak serve did not become ready in 60 s:" >&2; cat "$log" >&2; exit 1; }

for c in "${levels[@]}"; do
  "$ak" bench llm --url "$url" --concurrency "$c" --duration "${DURATION:-20}" \
    --prompt-tokens "${PROMPT:-64}" --max-tokens "${GEN:-64}" --out "${AK_BENCH_OUT:-bench-results}"
done
