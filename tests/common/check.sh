# Shell test helpers, sourced by the command-line tests: `check NAME RC CMD...` runs a
# command and compares its exit code (output kept in $out); `contains NAME REGEX` and
# `contains_text NAME TEXT` grep $out. All count into $pass / $fail; finish with
# `check_summary`. Each command runs under a deadline (CHECK_TIMEOUT seconds, default 150)
# so one that hangs fails under its own name (exit 124) instead of the whole test timing
# out unnamed; a step slower than 20 s says so, to find what slows a loaded machine. The
# output goes through a file, not a pipe: a process the command leaves behind (a rank in
# its own process group, which the deadline's signal does not reach) cannot hold the
# test up by keeping a pipe open. Each step's name is printed first, so a test that times
# out shows the one it was in.
pass=0 fail=0
check_file=$(mktemp)  # kept open and removed at once: nothing to clean up, whatever traps the test sets
exec {check_fd}>"$check_file"; rm -f "$check_file"
check_out=/proc/$$/fd/$check_fd
check() {
  local name=$1 want=$2; shift 2
  local t0=$SECONDS
  echo "step $name"
  timeout -k 5 "${CHECK_TIMEOUT:-150}" "$@" >"$check_out" 2>&1; local rc=$?
  out=$(cat "$check_out")
  [ $((SECONDS - t0)) -gt 20 ] && echo "SLOW $name: $((SECONDS - t0)) s"
  if [ "$rc" -eq "$want" ]; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL $name: exit $rc, wanted $want"; echo "$out" | head -20; fi
}
contains() {
  if grep -q -- "$2" <<<"$out"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL $1: output lacks '$2'"; echo "$out" | head -20; fi
}
contains_text() {
  if grep -qF -- "$2" <<<"$out"; then pass=$((pass + 1)); else
    fail=$((fail + 1)); echo "FAIL $1: output lacks '$2'"; echo "$out" | head -20; fi
}
check_summary() {
  echo "$pass passed, $fail failed"
  [ "$fail" -eq 0 ]
}
