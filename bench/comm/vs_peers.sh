#!/usr/bin/env bash
# Allreduce (f32 sum, np ranks on this machine): accelkit against Open MPI 4.1 (btl tcp or
# vader) and Gloo (PyTorch 1.13), run alternately A B C A B C, busbw medians per size and
# the ratios; plus one iperf3 loopback stream as the TCP ceiling. The medians of every size
# also go as results lines to $AK_BENCH_OUT/comm.jsonl (default bench-results/), which
# `ak report` plots.
#   usage: bench/comm/vs_peers.sh [tcp|shm] [rounds] [np]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
mode=${1:-tcp}; rounds=${2:-3}; np=${3:-2}
build=${BUILD:-$here/build}
peers=$here/bench/peers # the peers' harnesses (Open MPI, Gloo)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

have_mpi=0
if command -v mpicc >/dev/null && mpicc -O2 "$peers/mpi_allreduce.c" -o "$tmp/mpi_allreduce" 2>/dev/null; then have_mpi=1; fi
have_gloo=0
if [ "$mode" = tcp ] && /usr/bin/python3 -c "import torch.distributed" 2>/dev/null; then have_gloo=1; fi
btl=$([ "$mode" = shm ] && echo vader,self || echo tcp,self)
transport=$mode

run_ak() { # the medians are recorded below, not each run's lines (--out none)
  AK_COMM_TRANSPORT=$transport "$build/ak" bench comm -np "$np" -b 8 -e 64M -f 2 --json --out none |
    sed -n 's/.*"bytes":\([0-9]*\).*"time_us":\([0-9.]*\).*"busbw":\([0-9.]*\).*/\1 \2 \3/p'
}
run_mpi() {
  mpirun --allow-run-as-root --oversubscribe -np "$np" --mca btl "$btl" "$tmp/mpi_allreduce" 8 67108864 |
    awk 'NR > 1 {print $1, $2, $4}'
}
run_gloo() {
  PEER_PORT=$((30000 + RANDOM % 20000)) /usr/bin/python3 "$peers/gloo_allreduce.py" "$np" 67108864 |
    awk 'NR > 1 {print $1, $2, $4}'
}

for ((r = 0; r < rounds; r++)); do
  run_ak >> "$tmp/ak"
  [ $have_mpi = 1 ] && run_mpi >> "$tmp/mpi"
  [ $have_gloo = 1 ] && run_gloo >> "$tmp/gloo"
done

median_at() { # file bytes column(2 = time_us, 3 = busbw)
  [ -f "$1" ] || { echo 0; return; }
  awk -v b="$2" -v c="$3" '$1 == b {print $c}' "$1" | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print 0; else print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else printf "-"}'; }

table() { # title column sizes...
  local title=$1 col=$2; shift 2
  echo "$title"
  printf "%10s %10s %10s %8s %10s %8s\n" bytes accelkit "OpenMPI" "ak/MPI" Gloo "ak/Gloo"
  for b in "$@"; do
    a=$(median_at "$tmp/ak" "$b" "$col"); m=$(median_at "$tmp/mpi" "$b" "$col"); g=$(median_at "$tmp/gloo" "$b" "$col")
    printf "%10s %10s %10s %8s %10s %8s\n" "$b" "$a" "$m" "$(ratio "$a" "$m")" "$g" "$(ratio "$a" "$g")"
  done
}

# results lines: per engine, the medians of every size it ran (bench/results.py)
record() { # file peer-name peer-version
  [ -s "$1" ] || return 0
  local sizes b
  sizes=$(awk '{print $1}' "$1" | sort -gu)
  for b in $sizes; do
    printf '{"params":{"bytes":%s,"ranks":%s,"dtype":"f32","op":"sum","transport":"%s"},"figures":{"time_us":%s,"busbw":%s}}\n' \
      "$b" "$np" "$mode" "$(median_at "$1" "$b" 2)" "$(median_at "$1" "$b" 3)"
  done | /usr/bin/python3 "$here/bench/results.py" --ak "$build/ak" --stem comm \
           --benchmark comm.allreduce ${2:+--peer "$2" --peer-version "$3"}
}
record "$tmp/ak"
[ $have_mpi = 1 ] && record "$tmp/mpi" "Open MPI" "$(mpirun --version 2>/dev/null | head -1 | awk '{print $NF}')"
[ $have_gloo = 1 ] && record "$tmp/gloo" Gloo "torch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)')"

echo "allreduce f32 sum, $np ranks, $mode, median of $rounds alternating runs"
table "latency, time_us (lower is better)" 2 8 4096 65536
table "bandwidth, busbw GB/s (higher is better)" 3 1048576 16777216 67108864
if [ "$mode" = tcp ] && command -v iperf3 >/dev/null; then
  iperf3 -s -1 -p 5299 >/dev/null 2>&1 & sleep 0.5
  bw=$(iperf3 -c 127.0.0.1 -p 5299 -t 3 -J 2>/dev/null | /usr/bin/python3 -c \
       'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/8e9, 3))')
  a=$(median_at "$tmp/ak" 67108864 3)
  echo "iperf3 loopback, one stream: $bw GB/s; accelkit 64 MB busbw = $(ratio "$a" "$bw") of it"
  # the TCP ceiling, drawn as a bound on the busbw plot
  printf '{"params":{"transport":"tcp","streams":1},"figures":{"gbps":%s}}\n' "$bw" |
    /usr/bin/python3 "$here/bench/results.py" --ak "$build/ak" --stem comm --benchmark comm.bound \
      --peer iperf3 --peer-version "$(iperf3 --version | head -1 | awk '{print $2}')"
fi
