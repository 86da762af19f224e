#!/usr/bin/env bash
# The pipelined hierarchical collectives against the unpipelined hierarchical allreduce
# and the flat rings, on the emulated 2 hosts × 2 ranks with 1 Gbit/s links
# (scripts/netns-cluster, root only): allreduce hier vs hier_pipe, reduce_scatter and
# allgather ring vs hier_pipe, f32 sum, taking turns run by run (A B A B …), each run
# under flock /tmp/ak-cpu.lock; prints the median time per algorithm, the ratio and the
# share of the link bound. Link bound: the bytes the busiest host link must carry one
# way at the link rate: allreduce 2(h−1)/h · S, reduce_scatter and allgather
# (h−1)/h · S (S: the whole buffer as ak bench comm counts it), 1 Gbit/s = 125 MB/s.
#   usage: bench/comm/hier_pipe.sh [rounds] [bytes]     e.g. bench/comm/hier_pipe.sh 5 64M
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5}; size=${2:-64M}
build=${BUILD:-$here/build}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# each run under the CPU lock, unless the caller holds it over the whole sequence
# (AK_CPU_LOCK_HELD=1 flock /tmp/ak-cpu.lock bench/comm/hier_pipe.sh …)
lock=(flock /tmp/ak-cpu.lock); [ -n "${AK_CPU_LOCK_HELD:-}" ] && lock=()
run() { # coll algo: one run, its time_us appended to $tmp/coll.algo
  "${lock[@]}" timeout 300 "$here/scripts/netns-cluster" -H 2 -G 2 --rate 1gbit -- \
    "$build/ak" bench comm --coll "$1" --algo "$2" -b "$size" -e "$size" -n 3 -w 1 --out none --json |
    sed -n 's/.*"bytes":\([0-9]*\).*"time_us":\([0-9.]*\).*/\1 \2/p' | tail -1 >> "$tmp/$1.$2"
}
for ((r = 0; r < rounds; r++)); do
  for pair in "allreduce hier" "allreduce hier_pipe" "reduce_scatter ring" "reduce_scatter hier_pipe" \
              "allgather ring" "allgather hier_pipe"; do
    run $pair
  done
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "median ms of $rounds alternating runs, 2 hosts x 2 ranks, 1 Gbit/s, f32 sum, $size"
for pair in "allreduce hier" "reduce_scatter ring" "allgather ring"; do
  set -- $pair; coll=$1 base=$2
  bytes=$(awk '{print $1; exit}' "$tmp/$coll.hier_pipe")
  a=$(awk '{print $2}' "$tmp/$coll.$base" | median); b=$(awk '{print $2}' "$tmp/$coll.hier_pipe" | median)
  share=$([ "$coll" = allreduce ] && echo 1.0 || echo 0.5) # 2(h-1)/h or (h-1)/h, h = 2
  awk -v c="$coll" -v base="$base" -v a="$a" -v b="$b" -v s="$bytes" -v k="$share" \
      -v ra="$(awk '{printf "%.0f ", $2 / 1000}' "$tmp/$coll.$base")" \
      -v rb="$(awk '{printf "%.0f ", $2 / 1000}' "$tmp/$coll.hier_pipe")" 'BEGIN {
    bound = k * s / 125e6 * 1e3
    printf "%-15s %-5s %8.1f ms (%s) | hier_pipe %8.1f ms (%s) | %.2fx | link bound %.1f ms: %s %.1f %%, hier_pipe %.1f %%\n",
           c, base, a / 1000, ra, b / 1000, rb, a / b, bound, base, 100 * bound / (a / 1000), 100 * bound / (b / 1000)
  }'
done
