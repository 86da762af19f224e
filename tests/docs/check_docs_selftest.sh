#!/usr/bin/env bash
# Self-test of check_docs.py: on a small tree that names a missing path and refers to the
# tracker it must fail and name both; on the same tree fixed it must pass.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/src/core"
echo '/* what this is; see docs/guide.md */' > "$tmp/src/core/a.c"
printf '# Guide\nThe code is in src/core/a.c and src/core/missing.c (issue 12).\n' > "$tmp/docs/guide.md"
echo '# kit' > "$tmp/README.md"
if out=$(python3 "$here/check_docs.py" "$tmp"); then
  echo "check_docs passed a tree naming a missing path"; exit 1
fi
grep -q 'src/core/missing.c' <<<"$out" || { echo "missing path not named: $out"; exit 1; }
grep -q "issue 12" <<<"$out" || { echo "tracker reference not named: $out"; exit 1; }
printf '# Guide\nThe code is in src/core/a.c.\n' > "$tmp/docs/guide.md"
python3 "$here/check_docs.py" "$tmp"
echo "check_docs self-test: ok"
