#!/usr/bin/env bash
# Collectives between processes over real sockets and shared memory: `ak bench comm
# --check` sweeps (every element verified) for several world sizes, dtypes, operations,
# transports and algorithms; comm_rank's exact sweeps of every operation, of allreduce
# and of the collectives the cost model picks algorithms for, each algorithm forced; then faults: a rank killed mid-allreduce (2 and 4 ranks, rank
# 0 too) must give every surviving rank an error within AK_COMM_TIMEOUT that names the
# killed rank; ranks that disagree on the count, dtype or world size must all fail
# quickly, never hang.
set -u
AK=${1:?usage: test_procs.sh path/to/ak path/to/comm_fault_rank}
FAULT=${2:?}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# A port for a store that nothing holds now, below the kernel's ephemeral range
# (32768+), so the outgoing connections of tests running beside this one cannot take it,
# and below 20000, where `ak launch` picks its pairs: a launch in a test running beside
# this one could otherwise pick the same free port before this store binds it.
pick_port() {
  local port
  for _ in 1 2 3 4 5 6 7 8; do
    port=$((10000 + RANDOM % 10000))
    /usr/bin/python3 -c "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', $port))" 2>/dev/null && break
  done
  echo "$port"
}

sweep() { # name env... -- bench args...
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  out=$(env "${envs[@]}" timeout 120 "$AK" bench comm --check --json "$@" 2>&1); rc=$?
  if [ $rc -ne 0 ] || grep -q '"errors":[1-9]' <<<"$out" || ! grep -q '"errors":0' <<<"$out"; then
    bad "$name (exit $rc)"; echo "$out" | tail -5
  else ok; fi
}

for t in tcp shm; do
  for np in 2 3 4; do
    sweep "$t np=$np f32 sum" AK_COMM_TRANSPORT=$t -- -np $np -b 8 -e 4M -f 8
  done
  for algo in ring rd tree; do
    sweep "$t $algo" AK_COMM_TRANSPORT=$t -- -np 3 -b 4 -e 300K -f 9 --algo $algo --dtype bf16
  done
  for coll in allgather broadcast reduce reduce_scatter alltoall; do
    sweep "$t $coll" AK_COMM_TRANSPORT=$t -- -np 3 -b 8 -e 1M -f 16 --coll $coll --dtype i32
  done
  sweep "$t i8 max" AK_COMM_TRANSPORT=$t -- -np 2 -b 1 -e 64K -f 16 --dtype i8 --op max
  sweep "$t f64 prod" AK_COMM_TRANSPORT=$t -- -np 4 -b 8 -e 64K -f 16 --dtype f64 --op prod
  sweep "$t f16 avg" AK_COMM_TRANSPORT=$t -- -np 2 -b 2 -e 64K -f 32 --dtype f16 --op avg
done

# every collective the cost model picks among, each algorithm forced through --algo: the
# rows must be right and name the algorithm that ran (ring; rd: binomial tree for the
# rooted ones, recursive doubling / halving for the others)
forced_bench() { # coll algo expected-name
  out=$(AK_COMM_TRANSPORT=tcp timeout 120 "$AK" bench comm --check --json -np 4 -b 8 -e 1M -f 32 \
        --coll "$1" --algo "$2" --dtype f32 --op sum 2>&1); rc=$?
  if [ $rc -ne 0 ] || grep -q '"errors":[1-9]' <<<"$out" || ! grep -q '"errors":0' <<<"$out" ||
     grep -v "\"algo\":\"$3\"" <<<"$out" | grep -q '"bytes"'; then
    bad "bench $1 --algo $2 (exit $rc)"; echo "$out" | tail -5
  else ok; fi
}
for coll in broadcast reduce; do forced_bench $coll ring ring; forced_bench $coll rd tree; done
for coll in allgather reduce_scatter; do forced_bench $coll ring ring; forced_bench $coll rd recursive_doubling; done

launched() { # name env... -- comm_rank args...: one world under ak launch, must exit 0
  local name=$1; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  out=$(env "${envs[@]}" timeout 300 "$AK" launch -np "$np" -- "$FAULT" "$@" 2>&1); rc=$?
  [ $rc -eq 0 ] && ok || { bad "$name (exit $rc)"; echo "$out" | tail -5; }
}

# allreduce: every dtype × op × count {0,1,7,64,1000}, each in and out of place, for
# world sizes {1,2,3,4,5,8}, over sockets and shared memory (shm direct there); the odd
# ~1M count (1048577) too on 2, 5 and 8 ranks only (it is most of the time: ~3 s of the
# ~9 s here in a release build); then the shm transport and tcp's flat algorithms forced
# (5 ranks, small counts). Every other operation (comm_rank ops: rooted ones from every
# root, v-variants, p2p, split, async), in and out of place, over both, every size.
for t in tcp shm; do
  for np in 1 2 3 4 5 8; do
    case $np in 2 | 5 | 8) size=all ;; *) size=small ;; esac
    launched "$t sweep np=$np" AK_COMM_TRANSPORT=$t -- sweep $size
    launched "$t ops np=$np" AK_COMM_TRANSPORT=$t -- ops
  done
  np=5
  for algo in ring rd tree; do
    launched "$t $algo sweep np=5" AK_COMM_TRANSPORT=$t AK_COMM_ALGO=$algo -- sweep small
  done
  # the pipelined hierarchical allreduce on one host (its chunks one after another; the
  # overlapped run is test_netns.sh's), 600-byte chunks: 75 f64 (odd), short last ones
  launched "$t hier_pipe sweep np=5" AK_COMM_TRANSPORT=$t AK_COMM_ALGO=hier_pipe \
    AK_COMM_HIER_CHUNK=600 -- sweep small
done

# reduce, broadcast, allgather(v), reduce_scatter (comm_rank colls): every dtype × op ×
# count {0,1,7,64,1000}, in and out of place, roots varying, with the ring-based and the
# log-step algorithms forced, on every world size over both transports; the odd 1048577
# count over tcp on 2, 5 and 8 ranks (~15 s of the ~30 s here); the model's own choice
# on 4 ranks
for t in tcp shm; do
  for np in 1 2 3 4 5 8; do
    case "$t $np" in "tcp 2" | "tcp 5" | "tcp 8") size=all ;; *) size=small ;; esac
    for algo in ring rd; do
      launched "$t $algo colls np=$np" AK_COMM_TRANSPORT=$t AK_COMM_ALGO=$algo -- colls $size
    done
  done
  np=4
  launched "$t auto colls np=4" AK_COMM_TRANSPORT=$t -- colls small
  # pipelined hierarchical reduce_scatter and allgather on one host (chunks one after
  # another), 600-byte chunks
  launched "$t hier_pipe colls np=4" AK_COMM_TRANSPORT=$t AK_COMM_ALGO=hier_pipe \
    AK_COMM_HIER_CHUNK=600 -- colls small
done

# faults: NP ranks started by hand on a fresh store port (AK_COMM_TIMEOUT=5000, extra
# environment in FAULT_ENV); exits in rcs[], stderr in logs[]
run_fault() { # np transport mode args...
  local np=$1 t=$2; shift 2
  local port r pids=()
  port=$(pick_port)
  for ((r = 0; r < np; r++)); do
    env ${FAULT_ENV:-} AK_COMM_TRANSPORT=$t AK_COMM_TIMEOUT=5000 AK_RANK=$r AK_WORLD_SIZE=$np \
      AK_MASTER_ADDR=127.0.0.1 AK_MASTER_PORT=$port timeout 30 "$FAULT" "$@" \
      2>"/tmp/ak_fault_$$_$r.log" &
    pids+=($!)
  done
  rcs=() logs=()
  for ((r = 0; r < np; r++)); do
    { wait "${pids[$r]}"; } 2>/dev/null; rcs+=($?)
    logs+=("$(cat "/tmp/ak_fault_$$_$r.log")"); rm -f "/tmp/ak_fault_$$_$r.log"
  done
}

# a rank killed mid-allreduce (SIGKILL after 3 iterations): every survivor fails with
# AK_ERR_REMOTE or AK_ERR_TIMEOUT (exit 15/16) within AK_COMM_TIMEOUT of its call (the
# time comm_rank prints, 500 ms of slack) and names the killed rank, even when it only
# saw a neighbour close (more than 2 ranks) or the store go (rank 0 killed)
kill_case() { # name np victim transport
  local name=$1 np=$2 victim=$3 t=$4 r ms
  run_fault "$np" "$t" kill "$victim" 3
  for ((r = 0; r < np; r++)); do
    if [ "$r" -eq "$victim" ]; then
      [ "${rcs[$r]}" -eq 137 ] && ok || bad "$name: rank $r was not killed (exit ${rcs[$r]})"
      continue
    fi
    ms=$(sed -n 's/.* after \([0-9]*\) ms: .*/\1/p' <<<"${logs[$r]}" | head -1)
    if { [ "${rcs[$r]}" -eq 15 ] || [ "${rcs[$r]}" -eq 16 ]; } && [ -n "$ms" ] && [ "$ms" -le 5500 ] &&
       grep -Eq "rank $victim (was lost|stopped responding)" <<<"${logs[$r]}"; then ok
    else bad "$name: rank $r exit ${rcs[$r]}, ${ms:-?} ms, must name rank $victim"; echo "${logs[$r]}"; fi
  done
}

for t in tcp shm; do
  kill_case "$t 2 ranks, rank 1 killed" 2 1 $t
  kill_case "$t 4 ranks, rank 2 killed" 4 2 $t
  kill_case "$t 4 ranks, rank 0 (the store) killed" 4 0 $t
done
# the shm transport itself (shm runs allreduces through shm_direct unless forced)
FAULT_ENV="AK_COMM_ALGO=ring" kill_case "shm ring 4 ranks, rank 1 killed" 4 1 shm

# ranks that disagree on the count or dtype: every rank fails (remote, timeout, mismatch)
for t in tcp shm; do
  for mode in count dtype; do
    run_fault 2 $t $mode
    if [ "${rcs[0]}" -ge 15 ] && [ "${rcs[0]}" -le 17 ] && [ "${rcs[1]}" -ge 15 ] && [ "${rcs[1]}" -le 17 ]; then ok
    else bad "$t $mode mismatch: exits ${rcs[*]}"; printf '%s\n' "${logs[@]}"; fi
  done
done

# unreachable store: a clear timeout, not a hang
out=$(AK_RANK=1 AK_WORLD_SIZE=2 AK_MASTER_ADDR=127.0.0.1 AK_MASTER_PORT=9 AK_COMM_TIMEOUT=500 \
      timeout 20 "$FAULT" count 2>&1); rc=$?
[ $rc -eq 16 ] && grep -q "store" <<<"$out" && ok || { bad "unreachable store: exit $rc"; echo "$out"; }

# the store's port is taken: rank 0 says so (AK_ERR_IO names the address), no hang
busy=$(pick_port)
/usr/bin/python3 -c "import socket,time; s=socket.socket(); s.bind(('127.0.0.1',$busy)); s.listen(); time.sleep(15)" &
holder=$!; sleep 0.5
out=$(AK_RANK=0 AK_WORLD_SIZE=2 AK_MASTER_ADDR=127.0.0.1 AK_MASTER_PORT=$busy AK_COMM_TIMEOUT=2000 \
      timeout 20 "$FAULT" count 2>&1); rc=$?
kill $holder 2>/dev/null; wait $holder 2>/dev/null
[ $rc -eq 14 ] && grep -q "$busy" <<<"$out" && ok || { bad "store port in use: exit $rc"; echo "$out"; }

# ranks that disagree on the world size: both fail at once (not at the 20 s timeout) with
# AK_ERR_MISMATCH (exit 17), saying which sizes met where
port=$(pick_port)
start=$(date +%s%N)
for r in 0 1; do
  AK_RANK=$r AK_WORLD_SIZE=$((2 + r)) AK_MASTER_ADDR=127.0.0.1 AK_MASTER_PORT=$port AK_COMM_TIMEOUT=20000 \
    timeout 30 "$FAULT" count 2>"/tmp/ak_ws_$$_$r.log" & pids[$r]=$!
done
{ wait ${pids[0]}; } 2>/dev/null; r0=$?; { wait ${pids[1]}; } 2>/dev/null; r1=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
if [ $r0 -eq 17 ] && [ $r1 -eq 17 ] && [ $ms -lt 10000 ] &&
   grep -q "world size 3 here but 2 at rank 0" /tmp/ak_ws_$$_1.log &&
   grep -q "rank 1 has world size 3, rank 0 (here) 2" /tmp/ak_ws_$$_0.log; then ok
else bad "world size mismatch: exits $r0 $r1 after $ms ms"; cat /tmp/ak_ws_$$_*.log; fi
rm -f /tmp/ak_ws_$$_*.log

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
