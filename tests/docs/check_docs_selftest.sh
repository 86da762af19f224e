#!/usr/bin/env bash
# Self-test of check_docs.py: on a small tree that names a missing path, refers to the
# tracker and reads ../shared it must fail and name all three; on the same tree fixed it must pass.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/docs" "$tmp/src/core"
echo '/* what this is; see docs/guide.md */' > "$tmp/src/core/a.c"
printf '# Guide\nThe code is in src/core/a.c and src/core/missing.c (issue 12).\n' > "$tmp/docs/guide.md"
echo '# kit' > "$tmp/README.md"
mkdir -p "$tmp/scripts"; echo 'cat ../shared/data.txt' > "$tmp/scripts/x.sh"
if out=$(python3 "$here/check_docs.py" "$tmp"); then
  echo "check_docs passed a tree naming a missing path"; exit 1
fi
grep -q 'src/core/missing.c' <<<"$out" || { echo "missing path not named: $out"; exit 1; }
grep -q "issue 12" <<<"$out" || { echo "tracker reference not named: $out"; exit 1; }
grep -q "scripts/x.sh:1: names a path outside" <<<"$out" || { echo "outside path not named: $out"; exit 1; }
rm "$tmp/scripts/x.sh"
printf '# Guide\nThe code is in src/core/a.c.\n' > "$tmp/docs/guide.md"
python3 "$here/check_docs.py" "$tmp"
echo "check_docs self-test: ok"
