#!/usr/bin/env bash
# Each collective with each of its algorithms forced (ak bench comm --algo, i.e.
# AK_COMM_ALGO) and with the cost model's choice (auto), taking turns run by run so every
# algorithm meets the same machine state; prints the median time_us per size, auto's
# pick, and auto's median over the best forced one. f32 sum, root 0; every run creates
# its communicator (so auto's calibration is redone each time). TCP unless TRANSPORT.
#   usage: bench/comm/coll_algos.sh [rounds] [np] [collectives...]
#   e.g.   BUILD=build bench/comm/coll_algos.sh 5 4 broadcast allgather reduce reduce_scatter
# One host: the hierarchical algorithms (hier, hier_pipe) need several; on emulated hosts
# bench/comm/hier_pipe.sh compares them.
# The medians also go as comm.<collective> lines (params.algo: the forced algorithm or auto)
# to $AK_BENCH_OUT/comm.jsonl (bench/results.py; default bench-results/), which `ak report`
# draws one series per algorithm (the runs themselves write no lines: --out none).
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${1:-5}; np=${2:-4}; shift 2 || true
colls=${*:-broadcast allgather reduce reduce_scatter}
build=${BUILD:-$here/build}
sizes=${SIZES:-8 4096 65536 1048576 16777216}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

algos() { # the forced algorithms of a collective (AK_COMM_ALGO names)
  case $1 in allreduce) echo ring rd tree ;; broadcast | reduce) echo ring tree ;; *) echo ring rd ;; esac
}
iters() { if [ "$1" -ge 16777216 ]; then echo 5; elif [ "$1" -ge 1048576 ]; then echo 20; else echo 500; fi; }

for ((r = 0; r < rounds; r++)); do
  for coll in $colls; do
    for b in $sizes; do
      for algo in $(algos "$coll") auto; do
        AK_COMM_TRANSPORT=${TRANSPORT:-tcp} "$build/ak" bench comm -np "$np" --coll "$coll" --algo "$algo" \
          -b "$b" -e "$b" -n "$(iters "$b")" -w 5 --out none --json |
          sed -n "s/.*\"time_us\":\([0-9.]*\).*\"algo\":\"\([a-z_]*\)\".*/$coll $b $algo \1 \2/p" >> "$tmp/runs"
      done
    done
  done
done

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
times() { awk -v c="$1" -v b="$2" -v a="$3" '$1 == c && $2 == b && $3 == a {print $4}' "$tmp/runs"; }
echo "median time_us of $rounds alternating runs, $np ranks, ${TRANSPORT:-tcp}, f32 sum"
for coll in $colls; do
  echo "$coll"
  printf "%10s" bytes; for a in $(algos "$coll"); do printf " %10s" "$a"; done
  printf " %10s  %-24s %s\n" auto "auto's pick" "auto/best"
  for b in $sizes; do
    printf "%10s" "$b"; best=""
    for a in $(algos "$coll"); do
      t=$(times "$coll" "$b" "$a" | median); printf " %10s" "$t"
      best=$(awk -v x="$t" -v m="$best" 'BEGIN {print (m == "" || x < m) ? x : m}')
    done
    t=$(times "$coll" "$b" auto | median)
    pick=$(awk -v c="$coll" -v b="$b" '$1 == c && $2 == b && $3 == "auto" {print $5}' "$tmp/runs" | sort | uniq -c |
           awk '{printf "%s%s×%s", (NR > 1 ? "," : ""), $1, $2}')
    printf " %10s  %-24s %s\n" "$t" "$pick" "$(awk -v a="$t" -v m="$best" 'BEGIN {printf "%.2f", a / m}')"
  done
done

# results lines: every collective × size × algorithm's median (auto included)
for coll in $colls; do
  for b in $sizes; do
    for a in $(algos "$coll") auto; do
      printf '{"benchmark":"comm.%s","params":{"bytes":%s,"ranks":%s,"dtype":"f32","op":"sum","transport":"%s","algo":"%s","rounds":%s},"figures":{"time_us":%s}}\n' \
        "$coll" "$b" "$np" "${TRANSPORT:-tcp}" "$a" "$rounds" "$(times "$coll" "$b" "$a" | median)"
    done
  done
done | /usr/bin/python3 "$here/bench/results.py" --ak "$build/ak" --stem comm
