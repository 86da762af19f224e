#!/usr/bin/env bash
# A running job and strangers at its store: a 3-rank job under `ak launch` (comm_rank soak:
# allreduces, every element checked, until the test is done) while foreign clients (foreign_client.py, an
# independent implementation of the handshake) come to its store without the job secret,
# with a wrong one, with no handshake, and with the right one but an oversize frame. Each
# must be refused, rank 0 must log each refusal with the stranger's address and the
# reason, and the job must finish with every result right. Then the secret file: refused
# when others can read it, used when it is 0600. The secret must appear in no output.
set -u
AK=${1:?usage: test_auth_job.sh path/to/ak path/to/comm_rank}
RANK_BIN=${2:?}
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/../common/check.sh"
PY=/usr/bin/python3
CHECK_TIMEOUT=30
dir=$(mktemp -d)
job=
trap '[ -n "$job" ] && kill "$job" 2>/dev/null; rm -rf "$dir"' EXIT

export AK_JOB_SECRET=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')
timeout 60 "$AK" launch -np 3 -- "$RANK_BIN" soak "$dir/stop" >"$dir/job.out" 2>&1 &
job=$!
port=
for _ in $(seq 150); do
  port=$(sed -n 's/.*store port \([0-9][0-9]*\).*/\1/p' "$dir/job.out" | head -1)
  [ -n "$port" ] && break
  sleep 0.1
done
if [ -z "$port" ]; then echo "FAIL the job never printed its store port:"; cat "$dir/job.out"; exit 1; fi

check "stranger without a secret" 0 $PY "$HERE/foreign_client.py" 127.0.0.1 "$port" none
contains_text "stranger without a secret is refused (mode mismatch)" "refused 2"
check "stranger with a wrong secret" 0 $PY "$HERE/foreign_client.py" 127.0.0.1 "$port" wrong
contains_text "stranger with a wrong secret is refused (bad proof)" "refused 3"
check "request without a handshake" 0 $PY "$HERE/foreign_client.py" 127.0.0.1 "$port" junk
contains_text "request without a handshake is dropped" "closed"
check "oversize frame" 0 $PY "$HERE/foreign_client.py" 127.0.0.1 "$port" oversize
contains_text "oversize frame is dropped" "closed"

touch "$dir/stop"
wait "$job"; rc=$?
job=
out=$(cat "$dir/job.out")
if [ "$rc" -eq 0 ]; then pass=$((pass + 1)); else
  fail=$((fail + 1)); echo "FAIL the job was affected: exit $rc"; echo "$out" | tail -20; fi
contains "refusal logged: no secret" "store server: refused 127\.0\.0\.1:[0-9]*: one side has a job secret"
contains "refusal logged: wrong secret" "store server: refused 127\.0\.0\.1:[0-9]*: wrong job secret"
contains "refusal logged: no handshake" "store server: refused 127\.0\.0\.1:[0-9]*: not an accelkit handshake"
contains "refusal logged: oversize" "store server: refused 127\.0\.0\.1:[0-9]*: value length 4294967280 over the cap of 1048576 bytes"
if grep -qF "$AK_JOB_SECRET" <<<"$out"; then fail=$((fail + 1)); echo "FAIL the secret is in the job's output"
else pass=$((pass + 1)); fi

# the secret from a file: refused while group or others can read it
unset AK_JOB_SECRET
secret_file="$dir/secret"
od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$secret_file"
chmod 644 "$secret_file"
check "secret file readable by others" 2 env AK_JOB_SECRET_FILE="$secret_file" "$AK" launch -np 2 -- "$RANK_BIN" soak "$dir/stop"
contains "the file's mode is named" "AK_JOB_SECRET_FILE=.*mode 0644"
chmod 600 "$secret_file"
check "secret file 0600" 0 env AK_JOB_SECRET_FILE="$secret_file" "$AK" launch -np 2 -- "$RANK_BIN" soak "$dir/stop"
check_summary
