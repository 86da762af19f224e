#!/usr/bin/env bash
# Fault-injection campaign: runs of a 4-rank job (tests/fault/fault_job.c) on 2 emulated
# hosts (network namespaces on a bridge, as scripts/netns-cluster makes them, 2 ranks
# each) where a random rank is SIGKILLed or SIGSTOPped at a random moment, or a host's
# link is cut (`ip link set down` inside its namespace):
#   comm     ak_comm allreduces and checkpoints   faults: kill, stop, link   at init, coll, ckpt
#   train    the Horovod-style runtime (every     faults: kill, stop, link   at init, coll
#            step negotiated)
#   elastic  `ak launch --min-np 2` on both hosts faults: kill; kill2 (a second worker
#            killed while the survivors re-join)  at coll, ckpt, rejoin
# A run passes when
#   fixed jobs: every survivor (a cut link: every rank) exits with AK_ERR_REMOTE or
#     AK_ERR_TIMEOUT naming the lost rank (or the store) within AK_COMM_TIMEOUT + SLACK_MS
#     of the fault (2 x AK_COMM_TIMEOUT + SLACK_MS when the store is unreachable too: a
#     cut link, rank 0 stopped; docs/collectives.md), and no rank reports a wrong result
#     (exit 3: corrupted);
#   elastic jobs: the launcher exits 0 and every surviving worker ends with the parameters
#     of an undisturbed run (fault_job reference);
#   nothing runs past the fault + AK_COMM_TIMEOUT + 20 s (else: a hang; everything killed).
# One line per run, then a summary; exit 0 only when every run passed.
#
#   campaign.sh [--short] [-n RUNS] [--seed S] [--from I] path/to/ak path/to/fault_job
# Run I of seed S is the same run whatever -n and --from are: replay a failure with
# `--seed S --from I -n 1`. --short: the fixed list of 9 runs that `make test` runs (each
# kind, fault and phase at least once). Needs root and iproute2 (a missing one fails).
set -u
runs=100 seed=$(( $(date +%s) % 100000 )) from=0 short=0
while [ $# -gt 0 ]; do
  case $1 in
    --short) short=1; shift ;;
    -n) runs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --from) from=$2; shift 2 ;;
    *) break ;;
  esac
done
AK=${1:?usage: campaign.sh [--short] [-n RUNS] [--seed S] [--from I] ak fault_job}
JOB=${2:?usage: campaign.sh [--short] [-n RUNS] [--seed S] [--from I] ak fault_job}
AK=$(readlink -f "$AK") JOB=$(readlink -f "$JOB")
if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null || ! ip netns list >/dev/null 2>&1; then
  echo "FAIL: the fault campaign needs root and iproute2 (apt-get install iproute2)"; exit 1
fi

TIMEOUT_MS=${FAULT_TIMEOUT_MS:-3000} # AK_COMM_TIMEOUT of the fixed jobs
SLACK_MS=${FAULT_SLACK_MS:-2000}     # scheduling on a loaded 2-core machine
HANG_MS=$((TIMEOUT_MS + 20000))
# the fixed jobs' ranks meet at a store on a namespace address, which needs the job secret
# (ak launch makes its own for the elastic jobs)
AK_JOB_SECRET=${AK_JOB_SECRET:-$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')}
export AK_JOB_SECRET
STEPS=3000 ELASTIC_STEPS=400

id=$(( $$ % 200 + 20 ))
tag="akf$id" net="10.233.$id"
work=$(mktemp -d /tmp/ak-fault-XXXXXX)
pids=() launcher=

cleanup() {
  for p in "${pids[@]}" $launcher; do kill -KILL "$p" 2>/dev/null; done
  for h in 0 1; do
    ip netns pids "${tag}h$h" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
    ip netns del "${tag}h$h" 2>/dev/null
    ip link del "${tag}v$h" 2>/dev/null
  done
  ip link del "${tag}br" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

setup_net() {
  ip link add "${tag}br" type bridge && ip link set "${tag}br" up || return 1
  for h in 0 1; do
    local ns="${tag}h$h"
    ip netns add "$ns" && ip link add "${tag}v$h" type veth peer name "${tag}i$h" || return 1
    ip link set "${tag}i$h" netns "$ns"
    ip link set "${tag}v$h" master "${tag}br" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$net.$((h + 1))/24" dev "${tag}i$h"
    ip -n "$ns" link set "${tag}i$h" up || return 1
  done
  # the elastic launcher reaches a host through "ssh": here, its namespace
  mkdir -p "$work/bin"
  cat >"$work/bin/ssh" <<EOF
#!/bin/sh
while [ "\${1#-}" != "\$1" ]; do shift 2; done
case "\$1" in
  $net.1) ns=${tag}h0 ;;
  $net.2) ns=${tag}h1 ;;
  *) echo "no host \$1" >&2; exit 255 ;;
esac
shift
cd /
exec ip netns exec "\$ns" setsid -w sh -c "\$*"
EOF
  chmod +x "$work/bin/ssh"
}
setup_net || { echo "FAIL: cannot create network namespaces"; exit 1; }

now_ms() { date +%s%3N; }

# waits until FILE exists or every pid in the rest ended; 0 when it exists
wait_file() {
  local file=$1; shift
  local deadline=$(( $(now_ms) + 60000 ))
  while [ ! -e "$file" ]; do
    local alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 1 ] && [ "$(now_ms)" -lt $deadline ] || return 1
    sleep 0.005
  done
}

# waits for the pids until DEADLINE (ms); 1 when something still ran (then killed)
wait_all() {
  local deadline=$1; shift
  while :; do
    local alive=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ $alive -eq 0 ] && return 0
    if [ "$(now_ms)" -ge "$deadline" ]; then
      for p in "$@"; do kill -KILL "$p" 2>/dev/null; done
      return 1
    fi
    sleep 0.02
  done
}

strike() { # fault victim-pid host
  case $1 in
    kill | kill2) kill -KILL "$2" ;;
    stop) kill -STOP "$2" ;;
    link) ip -n "${tag}h$3" link set "${tag}i$3" down ;;
  esac
}

ok=0 failed=0 hangs=0 corrupted=0
verdict() { # run description result detail
  case $3 in
    ok) ok=$((ok + 1)) ;;
    hang) hangs=$((hangs + 1)); failed=$((failed + 1)) ;;
    corrupted) corrupted=$((corrupted + 1)); failed=$((failed + 1)) ;;
    *) failed=$((failed + 1)) ;;
  esac
  printf 'run %3d  %-34s %-9s %s\n' "$1" "$2" "$3" "$4"
}

# A fixed world of 4 ranks (ranks 0-1 on host 0, 2-3 on host 1; rank 0 serves the store).
run_fixed() { # run kind fault phase victim step delay_ms
  local run=$1 kind=$2 fault=$3 phase=$4 victim=$5 step=$6 delay=$7 dir="$work/run$1"
  local port=$((20000 + RANDOM % 20000)) r
  mkdir -p "$dir"
  pids=()
  for r in 0 1 2 3; do
    local h=$((r / 2))
    ip netns exec "${tag}h$h" env AK_RANK=$r AK_WORLD_SIZE=4 AK_LOCAL_RANK=$((r % 2)) \
      AK_LOCAL_SIZE=2 AK_MASTER_ADDR="$net.1" AK_MASTER_PORT=$port \
      AK_COMM_BIND_ADDR="$net.$((h + 1))" AK_COMM_TIMEOUT=$TIMEOUT_MS \
      FAULT_RANK=$victim FAULT_STEP=$step FAULT_PHASE=$phase \
      "$JOB" "$kind" "$dir" $STEPS >"$dir/out.$r" 2>&1 &
    pids+=($!)
    disown $! # bash still reaps it, without a "Killed" line per victim
  done
  local desc="$kind $fault@$phase rank $victim step $step +${delay}ms"
  if ! wait_file "$dir/at" "${pids[@]}"; then
    wait_all $(( $(now_ms) + HANG_MS )) "${pids[@]}"
    verdict "$run" "$desc" failed "the job ended before the fault point: $(cat "$dir"/result.* 2>/dev/null | head -2 | tr '\n' ' ')"
    return
  fi
  sleep "$(printf '0.%03d' "$delay")"
  local vpid
  vpid=$(cat "$dir/pid.$victim")
  local t_fault
  t_fault=$(now_ms)
  strike "$fault" "$vpid" $((victim / 2))
  local survivors=() hung=0
  for r in 0 1 2 3; do
    [ "$fault" = link ] || [ "$r" -ne "$victim" ] && survivors+=("${pids[$r]}")
  done
  wait_all $((t_fault + HANG_MS)) "${survivors[@]}" || hung=1
  [ "$fault" = stop ] && kill -KILL "$vpid" 2>/dev/null
  wait_all $(( $(now_ms) + 5000 )) "${pids[@]}"
  [ "$fault" = link ] && ip -n "${tag}h$((victim / 2))" link set "${tag}i$((victim / 2))" up
  if [ $hung -eq 1 ]; then verdict "$run" "$desc" hang "a survivor ran past the fault + $HANG_MS ms"; return; fi
  # the store unreachable too (a cut link, or rank 0, which serves it, stopped): the
  # timeout, then the failure's diagnosis through the store waits one more at most
  local worst=0 problems="" code end msg limit=$((TIMEOUT_MS + SLACK_MS))
  [ "$fault" = link ] || { [ "$fault" = stop ] && [ "$victim" -eq 0 ]; } &&
    limit=$((2 * TIMEOUT_MS + SLACK_MS))
  for r in 0 1 2 3; do
    [ "$fault" != link ] && [ "$r" -eq "$victim" ] && continue
    if [ ! -s "$dir/result.$r" ]; then problems+="rank $r left no result; "; continue; fi
    read -r code end msg <"$dir/result.$r"
    [ "$code" -eq 3 ] && { verdict "$run" "$desc" corrupted "rank $r: $msg"; return; }
    local ms=$((end - t_fault))
    [ $ms -gt $worst ] && worst=$ms
    # the cause: the lost rank or the store. A cut link: any rank across it; during
    # set-up: the rank this one waited for (which may itself wait behind the lost one)
    local cause="rank $victim"
    [ "$fault" = link ] || [ "$phase" = init ] && cause="rank [0-3]"
    if [ "$code" -ne 15 ] && [ "$code" -ne 16 ]; then problems+="rank $r exit $code ($msg); "
    elif [ $ms -gt "$limit" ]; then problems+="rank $r after $ms ms ($msg); "
    elif ! grep -Eq "$cause|store" <<<"$msg"; then problems+="rank $r does not name the cause: $msg; "
    fi
  done
  if [ -z "$problems" ]; then verdict "$run" "$desc" ok "survivors failed within $worst ms"
  else verdict "$run" "$desc" failed "$problems"; fi
}

# An elastic job: the launcher on host 0, 2 workers per host, --min-np 2.
run_elastic() { # run fault phase victim step delay_ms victim2
  local run=$1 fault=$2 phase=$3 victim=$4 step=$5 delay=$6 victim2=$7 dir="$work/run$1"
  mkdir -p "$dir"
  PATH="$work/bin:$PATH" ip netns exec "${tag}h0" env AK_COMM_TIMEOUT=$TIMEOUT_MS \
    FAULT_RANK=$victim FAULT_STEP=$step FAULT_PHASE=$phase FAULT2_RANK=$victim2 \
    "$AK" launch -np 4 --min-np 2 --elastic-timeout 30 -H "$net.1:2,$net.2:2" -- \
    "$JOB" elastic "$dir" $ELASTIC_STEPS >"$dir/launch.out" 2>&1 &
  launcher=$!
  local desc="elastic $fault@$phase worker $victim step $step +${delay}ms"
  [ "$fault" = kill2 ] && desc+=", then $victim2"
  if ! wait_file "$dir/at" "$launcher"; then
    wait_all $(( $(now_ms) + HANG_MS )) "$launcher"
    verdict "$run" "$desc" failed "the job ended before the fault point"; launcher=; return
  fi
  sleep "$(printf '0.%03d' "$delay")"
  local t_fault
  t_fault=$(now_ms)
  strike kill "$(cat "$dir/pid.$victim")"
  if [ "$fault" = kill2 ] && wait_file "$dir/at2" "$launcher"; then
    sleep "$(printf '0.%03d' $((delay / 2)))"
    strike kill "$(cat "$dir/pid.$victim2")"
  fi
  local hung=0 rc
  wait_all $((t_fault + HANG_MS)) "$launcher" || hung=1
  wait "$launcher" 2>/dev/null; rc=$?
  launcher=
  if [ $hung -eq 1 ]; then verdict "$run" "$desc" hang "the job ran past the fault + $HANG_MS ms"; return; fi
  local problems="" finished=0 w code end msg
  for w in 0 1 2 3; do
    [ "$w" -eq "$victim" ] && continue
    [ "$fault" = kill2 ] && [ "$w" -eq "$victim2" ] && [ -e "$dir/at2" ] && continue
    if [ ! -s "$dir/result.$w" ]; then problems+="worker $w left no result; "; continue; fi
    read -r code end msg <"$dir/result.$w"
    [ "$code" -eq 3 ] && { verdict "$run" "$desc" corrupted "worker $w: $msg"; return; }
    if [ "$code" -ne 0 ]; then problems+="worker $w exit $code ($msg); "
    elif [ "${msg% resets*}" != "$reference" ]; then problems+="worker $w ended with $msg, not $reference; "
    else finished=$((finished + 1)); fi
  done
  [ $rc -ne 0 ] && problems+="launcher exit $rc: $(tail -3 "$dir/launch.out" | tr '\n' ' '); "
  if [ -z "$problems" ] && [ $finished -ge 2 ]; then
    verdict "$run" "$desc" ok "$finished workers recovered to the undisturbed parameters in $(( $(now_ms) - t_fault )) ms"
  else verdict "$run" "$desc" failed "${problems:-too few workers finished}"; fi
}

reference=$("$JOB" reference $ELASTIC_STEPS)

pick() { local a=("$@"); echo "${a[$((RANDOM % ${#a[@]}))]}"; }

# run I of the seed: everything drawn from RANDOM seeded with seed and I
one_run() { # run
  RANDOM=$((seed * 1000 + $1))
  local kind fault phase victim step delay v2
  kind=$(pick comm comm train elastic)
  victim=$((RANDOM % 4)) delay=$((RANDOM % 40))
  if [ "$kind" = elastic ]; then
    fault=$(pick kill kill kill2) phase=$(pick coll ckpt)
    step=$((5 + RANDOM % 150))
    [ "$phase" = ckpt ] && step=$((step / 3 * 3 + 2))
    v2=$(( (victim + 1 + RANDOM % 3) % 4 ))
    run_elastic "$1" "$fault" "$phase" "$victim" "$step" "$delay" "$v2"
    return
  fi
  fault=$(pick kill stop link)
  if [ "$kind" = comm ]; then phase=$(pick init coll ckpt); else phase=$(pick init coll); fi
  step=$((RANDOM % 200))
  [ "$phase" = init ] && step=0
  [ "$phase" = ckpt ] && step=$((step / 4 * 4 + 3))
  run_fixed "$1" "$kind" "$fault" "$phase" "$victim" "$step" "$delay"
}

echo "fault campaign: seed $seed (replay run I: $0 --seed $seed --from I -n 1 $AK $JOB)"
echo "AK_COMM_TIMEOUT=$TIMEOUT_MS ms; a survivor must fail within $((TIMEOUT_MS + SLACK_MS)) ms of the fault" \
  "($((2 * TIMEOUT_MS + SLACK_MS)) ms when the store is cut off too)"
if [ $short -eq 1 ]; then
  run_fixed 0 comm kill coll 2 17 5
  run_fixed 1 comm stop ckpt 1 11 3
  run_fixed 2 comm link coll 3 9 0
  run_fixed 3 comm kill init 0 0 2
  run_fixed 4 train kill coll 1 21 4
  run_fixed 5 train stop init 3 0 10
  run_fixed 6 train link coll 0 13 7
  run_elastic 7 kill ckpt 2 8 3 0
  run_elastic 8 kill2 coll 0 12 6 3
  total=9
else
  for ((i = from; i < from + runs; i++)); do one_run $i; done
  total=$runs
fi
echo "summary: $ok/$total ok (error or recovery within the timeout), $hangs hangs, $corrupted corrupted, $failed failed (seed $seed)"
[ $failed -eq 0 ]
