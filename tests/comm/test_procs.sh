#!/usr/bin/env bash
# Collectives between processes over real sockets and shared memory: `ak bench comm
# --check` sweeps (every element verified) for several world sizes, dtypes, operations,
# transports and algorithms; then faults: a rank killed mid-allreduce and ranks that
# disagree on the count must give every surviving rank an error quickly, never a hang.
set -u
AK=${1:?usage: test_procs.sh path/to/ak path/to/comm_fault_rank}
FAULT=${2:?}
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL $*"; }

# A port for a store that nothing holds now, below the kernel's ephemeral range
# (32768+), so the outgoing connections of tests running beside this one cannot take it.
pick_port() {
  local port
  for _ in 1 2 3 4 5 6 7 8; do
    port=$((20000 + RANDOM % 12000))
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
  for coll in allgather broadcast reduce_scatter alltoall; do
    sweep "$t $coll" AK_COMM_TRANSPORT=$t -- -np 3 -b 8 -e 1M -f 16 --coll $coll --dtype i32
  done
  sweep "$t i8 max" AK_COMM_TRANSPORT=$t -- -np 2 -b 1 -e 64K -f 16 --dtype i8 --op max
  sweep "$t f64 prod" AK_COMM_TRANSPORT=$t -- -np 4 -b 8 -e 64K -f 16 --dtype f64 --op prod
  sweep "$t f16 avg" AK_COMM_TRANSPORT=$t -- -np 2 -b 2 -e 64K -f 32 --dtype f16 --op avg
done

# every dtype × op × count {0,1,7,64,1000,1048577}, in and out of place, as processes
for t in tcp shm; do
  for np in 1 2 3 5 8; do
    [ $t = tcp ] && [ $np = 8 ] && continue
    out=$(AK_COMM_TRANSPORT=$t timeout 300 "$AK" launch -np $np -- "$FAULT" sweep 2>&1); rc=$?
    [ $rc -eq 0 ] && ok || { bad "$t sweep np=$np (exit $rc)"; echo "$out" | tail -5; }
  done
done

# fault: rank 1 dies mid-allreduce; rank 0 must fail (remote/timeout) within 5 s
run_fault() { # transport mode args...
  local t=$1; shift
  local port pids=()
  port=$(pick_port)
  for r in 0 1; do
    AK_COMM_TRANSPORT=$t AK_COMM_TIMEOUT=5000 AK_RANK=$r AK_WORLD_SIZE=2 AK_MASTER_ADDR=127.0.0.1 \
      AK_MASTER_PORT=$port timeout 30 "$FAULT" "$@" 2>"/tmp/ak_fault_$$_$r.log" &
    pids+=($!)
  done
  { wait "${pids[0]}"; } 2>/dev/null; rc0=$?
  { wait "${pids[1]}"; } 2>/dev/null; rc1=$?
  log0=$(cat "/tmp/ak_fault_$$_0.log"); log1=$(cat "/tmp/ak_fault_$$_1.log")
  rm -f "/tmp/ak_fault_$$_0.log" "/tmp/ak_fault_$$_1.log"
}

for t in tcp shm; do
  start=$(date +%s%N)
  run_fault $t kill 1 3
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  # 10+5 = remote, 10+6 = timeout; rank 1 was killed (137)
  if { [ $rc0 -eq 15 ] || [ $rc0 -eq 16 ]; } && [ $rc1 -eq 137 ] && [ $ms -lt 15000 ]; then ok
  else bad "$t killed rank: rank0 exit $rc0, rank1 exit $rc1, ${ms} ms"; echo "$log0"; fi
  grep -q "rank 1" <<<"$log0" && ok || { bad "$t killed rank: message does not name rank 1"; echo "$log0"; }

  for mode in count dtype; do
    run_fault $t $mode
    if [ $rc0 -ge 15 ] && [ $rc0 -le 17 ] && [ $rc1 -ge 15 ] && [ $rc1 -le 17 ]; then ok
    else bad "$t $mode mismatch: exits $rc0 $rc1"; echo "$log0"; echo "$log1"; fi
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
