#!/usr/bin/env bash
# SGEMM: accelkit against the stand-alone peer harness (bench/peers/blas_sgemm.c built
# with OpenBLAS and with BLIS), run alternately A B A B in one session; prints the median
# GFLOP/s of each and the ratios. `ak bench kernels` also measures both peers in-process;
# this script cross-checks that figure with the peers' own harness. The medians also go as
# kernels.sgemm lines (params harness "standalone") to $AK_BENCH_OUT/kernels.jsonl
# (bench/results.py; default bench-results/) for `ak report`.
#   usage: bench/kernels/vs_peers.sh [build-dir] [rounds] [MxNxK ...]
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$here/build}; rounds=${2:-5}; shift $(( $# > 2 ? 2 : $# ))
shapes=("$@"); [ ${#shapes[@]} -gt 0 ] || shapes=(1024x1024x1024 128x768x768 128x3072x768 196x256x2304 49x512x4608)
threads=${AK_NUM_THREADS:-1}
peer_src=$here/bench/peers/blas_sgemm.c

# a peer is used when its harness compiles and links (the library is installed)
peers=()
gcc -O2 "$peer_src" -o "$build/peer_sgemm_openblas" -I/usr/include/x86_64-linux-gnu/openblas-pthread \
    -lopenblas 2>/dev/null && peers+=(openblas)
gcc -O2 "$peer_src" -o "$build/peer_sgemm_blis" -I/usr/include/blis -lblis 2>/dev/null && peers+=(blis)

# record GFLOPS [PEER VERSION]: one kernels.sgemm line of this shape's median
record() {
  printf '{"params":{"m":%s,"n":%s,"k":%s,"threads":%s,"harness":"standalone"},"figures":{"gflops":%s}}\n' \
    "$M" "$N" "$K" "$threads" "$1" |
    /usr/bin/python3 "$here/bench/results.py" --ak "$build/ak" --stem kernels --benchmark kernels.sgemm \
      ${2:+--peer "$2" --peer-version "$3"} 2>/dev/null
}
peer_name() { case $1 in openblas) echo OpenBLAS ;; blis) echo BLIS ;; esac; }
peer_version() { # the Debian package's version
  dpkg-query -W -f '${Version}' "$(case $1 in openblas) echo libopenblas0-pthread ;; blis) echo libblis4 ;; esac)" 2>/dev/null || echo unknown
}

median() { sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

printf "SGEMM %s thread(s), %s alternating rounds, median GFLOP/s\n" "$threads" "$rounds"
printf "%-16s %9s" "M×N×K" "accelkit"; for p in "${peers[@]}"; do printf " %9s %8s" "$p" "ratio"; done; echo
for shape in "${shapes[@]}"; do
  IFS=x read -r M N K <<<"$shape"
  declare -A runs=()
  for ((r = 0; r < rounds; r++)); do
    g=$(AK_NUM_THREADS=$threads "$build/ak" bench kernels --gemm "$shape" --no-peers --out none --json |
        grep -o '"gflops":[0-9.]*' | cut -d: -f2)
    runs[ak]+="$g "
    for p in "${peers[@]}"; do
      g=$(OPENBLAS_NUM_THREADS=$threads BLIS_NUM_THREADS=$threads "$build/peer_sgemm_$p" "$M" "$N" "$K" |
          grep -o '[0-9.]* GFLOP/s' | cut -d' ' -f1)
      runs[$p]+="$g "
    done
  done
  ak=$(tr ' ' '\n' <<<"${runs[ak]}" | grep . | median)
  printf "%-16s %9.1f" "$shape" "$ak"
  record "$ak"
  for p in "${peers[@]}"; do
    pv=$(tr ' ' '\n' <<<"${runs[$p]}" | grep . | median)
    record "$pv" "$(peer_name "$p")" "$(peer_version "$p")"
    printf " %9.1f %8.3f" "$pv" "$(awk -v a="$ak" -v b="$pv" 'BEGIN{print a/b}')"
  done
  echo
  unset runs
done
