#!/usr/bin/env bash
# README.md's table of `ak` commands names every subcommand of src/cli/commands.def and
# every benchmark domain of src/cli/bench.def, and nothing else (besides `ak bench
# MODEL.onnx`, which a model path selects).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
want=$( { sed -n 's/^AK_CLI_COMMAND\(_AS\)\{0,1\}(\([a-z_]*\),.*/ak \2/p' "$root/src/cli/commands.def"
          sed -n 's/^AK_BENCH_DOMAIN(\([a-z_]*\),.*/ak bench \1/p' "$root/src/cli/bench.def"
          echo "ak bench MODEL.onnx"; } | sort)
# the rows "| `ak ...` | ..." of the section "## The `ak` command"
have=$(awk '/^## The `ak` command/ { on = 1; next } /^## / { on = 0 } on' "$root/README.md" |
       sed -n 's/^| `\(ak [^`]*\)` |.*/\1/p' | sort)
[ -n "$have" ] || { echo "FAIL: no command table in README.md's section 'The \`ak\` command'"; exit 1; }
missing=$(comm -23 <(echo "$want") <(echo "$have"))
unknown=$(comm -13 <(echo "$want") <(echo "$have"))
[ -z "$missing" ] || echo "FAIL: README.md's command table lacks: $(echo $missing | sed 's/ ak /, ak /g')"
[ -z "$unknown" ] || echo "FAIL: README.md's command table names what commands.def/bench.def do not: $(echo $unknown | sed 's/ ak /, ak /g')"
[ -z "$missing$unknown" ] && echo "README.md lists the $(echo "$want" | wc -l) commands and domains"
[ -z "$missing$unknown" ]
