#!/usr/bin/env bash
# Runs the libFuzzer targets of a fuzz build (make fuzz, make fuzz-short).
#
#   tests/fuzz/run.sh BUILD [--seconds S] [--runs N] [--jobs J] [TARGET...]
#
# Each target (all of BUILD/tests/fuzz/fuzz_* by default) runs until N executions
# (-runs) or S seconds (-max_total_time), whichever comes first, J targets at a time,
# from its seed corpus (tests/fuzz/corpus/<target>) plus the working corpus it grows in
# BUILD/corpus/TARGET. A single input running over 25 s counts as a hang. Prints one line
# per target: executions, exec/s, and the verdict; on a finding, the libFuzzer report and
# the path of the saved input (BUILD/findings/TARGET/...), to be added to
# tests/fuzz/regress/<target>/ with the fix. Exit 1 when any target found something.
set -uo pipefail
cd "$(dirname "$0")/../.."

build=${1:?usage: tests/fuzz/run.sh BUILD [--seconds S] [--runs N] [--jobs J] [TARGET...]}
shift
seconds=20 runs=-1 jobs=2
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if [ ${#targets[@]} -eq 0 ]; then
  for f in "$build"/tests/fuzz/fuzz_*; do [ -x "$f" ] && targets+=("$(basename "$f")"); done
fi
if [ ${#targets[@]} -eq 0 ]; then
  echo "run.sh: no fuzz targets in $build/tests/fuzz (build with -DAK_FUZZ=ON)" >&2
  exit 1
fi

# One target; its report goes to BUILD/fuzz-logs/TARGET.log, a summary line to stdout.
run_one() {
  local name=$1 build=$2 seconds=$3 runs=$4
  local bin=$build/tests/fuzz/$name log=$build/fuzz-logs/$name.log
  local findings=$build/findings/$name
  mkdir -p "$build/corpus/$name" "$findings" "$build/fuzz-logs"
  local seeds=tests/fuzz/corpus/$name
  [ -d "$seeds" ] || seeds=
  "$bin" -runs="$runs" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
         -print_final_stats=1 -artifact_prefix="$findings/" \
         "$build/corpus/$name" $seeds > "$log" 2>&1
  local rc=$?
  local n rate
  n=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  if [ $rc -eq 0 ]; then
    printf '%-20s %12s runs %8s exec/s  no finding\n' "$name" "${n:-?}" "${rate:-?}"
    return 0
  fi
  local input
  input=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
  {
    printf '%-20s FINDING after %s runs (exit %d); log %s\n' "$name" "${n:-?}" "$rc" "$log"
    grep -E 'ERROR|SUMMARY|==[0-9]+==|#[0-9]+ 0x|runtime error|deadly signal|timeout' "$log" | head -40
    echo "$name: crashing input saved as ${input:-(none written; see the log)}"
    echo "$name: reproduce with $bin ${input:-}; add the input to tests/fuzz/regress/$name/ with the fix"
  } >&2
  return 1
}
export -f run_one
# An UBSan report is a finding: the fuzz build compiles with -fno-sanitize-recover=all,
# so the report ends the run and libFuzzer saves the input; halt_on_error=1 does the same
# for a build configured before that flag, and the report carries its stack
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

printf '%s\n' "${targets[@]}" |
  xargs -P "$jobs" -I{} bash -c 'run_one "$@"' _ {} "$build" "$seconds" "$runs"
status=$?
[ $status -eq 0 ] && echo "fuzz: ${#targets[@]} targets, no finding" || echo "fuzz: FINDINGS (above)" >&2
exit $((status != 0))
