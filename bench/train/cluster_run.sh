# Sourced by the training benchmarks (vs_ddp.sh, gossip_vs_allreduce.sh): the library to
# load, the run id and log, and cluster_run — one training run on emulated hosts whose rank-0
# JSON line is kept. Expects PY, RESULTS, RANK_TIMEOUT and LOCK to be set by the caller.

if [ -z "${AK_LIBRARY:-}" ]; then
  for b in build-bench build; do
    [ -f "$b/libaccelkit.so" ] && { AK_LIBRARY=$PWD/$b/libaccelkit.so; break; }
  done
fi
export AK_LIBRARY=${AK_LIBRARY:-} PYTHONPATH=$PWD/python${PYTHONPATH:+:$PYTHONPATH}
export OMP_NUM_THREADS=1
LOG=$RESULTS.log
RUN_ID=$(date +%Y%m%dT%H%M%S)-$$
mkdir -p "$(dirname "$RESULTS")"

# cluster_run TAG HOSTS PER_HOST RATE SUMMARY CMD...
#   Runs CMD --tag TAG under $LOCK on HOSTS emulated hosts x PER_HOST ranks with links shaped
#   to RATE (HOSTS=0: one plain process, no namespaces). Every rank's output goes to $LOG;
#   rank 0's last JSON line to $RESULTS, and one line "TAG  <SUMMARY of it>" to stdout, where
#   SUMMARY is a Python expression over the parsed record r. A run with no JSON line is
#   recorded as an error and reported as FAILED.
cluster_run() {
  local tag=$1 hosts=$2 per_host=$3 rate=$4 summary=$5; shift 5
  local out rc line
  echo "== $tag" >>"$LOG"
  if [ "$hosts" = 0 ]; then
    out=$(flock "$LOCK" timeout -k 10 "$RANK_TIMEOUT" "$PY" "$@" --tag "$tag" 2>&1 | sed -u 's/^/[0] /')
  else
    out=$(flock "$LOCK" scripts/netns-cluster -H "$hosts" -G "$per_host" --rate "$rate" -- \
          timeout -k 10 "$RANK_TIMEOUT" "$PY" "$@" --tag "$tag" 2>&1)
  fi
  rc=$?
  printf '%s\n' "$out" >>"$LOG"
  line=$(printf '%s\n' "$out" | sed -n 's/^\[0\] \({.*}\)$/\1/p' | tail -n 1)
  if [ -n "$line" ]; then
    printf '%s\n' "$line" >>"$RESULTS"
    printf '%-40s %s\n' "$tag" "$(printf '%s' "$line" | "$PY" -c \
      "import json,sys; r=json.load(sys.stdin); print($summary)")"
  else
    printf '{"tag": "%s", "error": "exit %d, no result (see %s)"}\n' "$tag" "$rc" "$LOG" >>"$RESULTS"
    printf '%-40s FAILED (exit %d; see %s)\n' "$tag" "$rc" "$LOG"
  fi
}
