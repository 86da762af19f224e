#!/usr/bin/env bash
# Two emulated hosts × two ranks (network namespaces, scripts/netns-cluster): every
# collective and every allreduce algorithm (the pipelined hierarchical one too) with
# --check, so ranks talk over shared memory inside a host and TCP across, at the same
# time; then comm_rank (the program of
# test_procs.sh) checks every operation exactly, in and out of place, the allreduce
# sweep of every dtype × op × count, and the same for reduce, broadcast, allgather(v)
# and reduce_scatter with each algorithm forced and with the model's choice. Needs root
# and iproute2; exits 77 (skipped) without them.
set -u
AK=${1:?usage: test_netns.sh path/to/ak path/to/comm_rank}
RANK_BIN=${2:?usage: test_netns.sh path/to/ak path/to/comm_rank}
here=$(cd "$(dirname "$0")/../.." && pwd)
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
  echo "skipped: needs root and ip netns"; exit 77
fi
pass=0 fail=0
cluster() { AK_COMM_TIMEOUT=20000 timeout 120 "$here/scripts/netns-cluster" -H 2 -G 2 --rate "$@" 2>&1; }

check() { # name rate bench-args...
  local name=$1 rate=$2; shift 2
  out=$(cluster "$rate" -- "$AK" bench comm --check --json "$@"); rc=$?
  if [ $rc -eq 0 ] && grep -q '"errors":0' <<<"$out" && ! grep -q '"errors":[1-9]' <<<"$out"; then
    pass=$((pass + 1))
  else
    fail=$((fail + 1)); echo "FAIL $name (exit $rc)"; echo "$out" | tail -6
  fi
}

for algo in ring rd tree hier; do
  check "allreduce $algo" none -b 4 -e 2M -f 32 --algo "$algo" --dtype bf16
done
# the pipelined hierarchical allreduce up to 4 MiB: the model's chunk cuts that in several
check "allreduce hier_pipe" none -b 4 -e 4M -f 32 --algo hier_pipe --dtype bf16
check "allreduce auto i64 max" none -b 8 -e 1M -f 16 --dtype i64 --op max
for coll in allgather broadcast reduce reduce_scatter alltoall; do
  check "$coll" none -b 8 -e 512K -f 16 --coll "$coll" --dtype f32
done
for coll in allgather reduce_scatter; do
  check "$coll hier_pipe" none -b 8 -e 4M -f 16 --coll "$coll" --algo hier_pipe --dtype i32
done
check "allreduce over 1 Gbit links" 1gbit -b 1M -e 4M -f 4 -n 3 -w 1

exact() { # name env... -- comm_rank args...: every rank must exit 0
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  out=$(env "${envs[@]}" AK_COMM_TIMEOUT=20000 timeout 300 "$here/scripts/netns-cluster" -H 2 -G 2 \
        --rate none -- "$RANK_BIN" "$@" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then pass=$((pass + 1))
  else fail=$((fail + 1)); echo "FAIL $name (exit $rc)"; echo "$out" | tail -6; fi
}
exact "every operation" -- ops
exact "allreduce sweep (auto)" -- sweep
exact "allreduce sweep (hierarchical)" AK_COMM_ALGO=hier -- sweep small
# pipelined hierarchical: 600-byte chunks on the small counts (1000 f64 are 14 chunks of
# 75, the last one short; 7 elements fit one chunk), 64 KiB ones on the full sweep's
# 1048577 (16 to 128 chunks), so the shm phases and the TCP exchange overlap
exact "allreduce sweep (pipelined hierarchical, 600 B chunks)" AK_COMM_ALGO=hier_pipe \
  AK_COMM_HIER_CHUNK=600 -- sweep small
exact "allreduce sweep (pipelined hierarchical, 64 KiB chunks)" AK_COMM_ALGO=hier_pipe \
  AK_COMM_HIER_CHUNK=65536 -- sweep
for algo in ring rd auto; do
  exact "reduce, broadcast, allgather(v), reduce_scatter ($algo)" AK_COMM_ALGO=$algo -- colls small
done
# the pipelined hierarchical reduce-scatter and allgather (forced: every count, one chunk
# or many), 600-byte chunks on the small counts, the model's chunk on 1048577
exact "reduce_scatter, allgather (pipelined hierarchical, 600 B chunks)" AK_COMM_ALGO=hier_pipe \
  AK_COMM_HIER_CHUNK=600 -- colls small
exact "reduce_scatter, allgather (pipelined hierarchical, model's chunk)" AK_COMM_ALGO=hier_pipe \
  -- colls
leftover=$(ip netns list | grep -c '^akc') || true
[ "$leftover" -eq 0 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL namespaces left behind"; }
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
