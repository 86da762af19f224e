#!/usr/bin/env bash
# Arrows point down: every `#include "..."` of a file under src/ names a header of its own
# layer or of a lower one, and no two folders include each other.
#
# Layers, lowest first (a folder includes only its own layer and those below):
#   0 core
#   1 kernels, comm
#   2 train, infer, llm, plan
#   3 cli
# Inside llm, sub-layers (same rule among llm's folders):
#   0 llm (strmap, atomic_file)   1 llm/gguf   2 llm/tokenizer   3 llm/base (hyper-parameters,
#   KV cache), llm/grammar (GBNF, JSON schema)   4 llm/hf   5 llm/model   6 llm/convert, llm/engine   7 llm/chat, llm/hooks
#   8 llm/server
#
# Include circles are checked between modules: src/X for the files directly in src/X, and
# src/X/Y for everything under src/X/Y (so infer/ops, whose family tables include their
# subfolders' headers and whose subfolders include the family's shared header, is one
# module), except kernels, one module: kernels/ref and kernels/x86 fill the table
# kernels/dispatch.h declares. Module A including a header of module B while B includes
# one of A fails.
#
# Usage: test_layers.sh [REPO_ROOT]  (default: the repository holding this script).
# Prints each offending include (file, header, why) and exits 1 when there is one.
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
src=$root/src
if [ ! -d "$src" ]; then
    echo "test_layers: no src/ folder under $root" >&2
    exit 2
fi

# Known upward includes, each line "FILE HEADER" (paths relative to src/), with the reason
# in a comment. Empty: every arrow points down.
allowed=()

layer_of() { # folder (relative to src/) -> top-level layer number, or empty when unknown
    case ${1%%/*} in
    core) echo 0 ;;
    kernels | comm) echo 1 ;;
    train | infer | llm | plan) echo 2 ;;
    cli) echo 3 ;;
    *) echo "" ;;
    esac
}

llm_layer_of() { # folder under llm/ -> llm sub-layer number, or empty when unknown
    local sub=${1#llm}
    sub=${sub#/}
    sub=${sub%%/*}
    case $sub in
    "") echo 0 ;;
    gguf) echo 1 ;;
    tokenizer) echo 2 ;;
    base | grammar) echo 3 ;;
    hf) echo 4 ;;
    model) echo 5 ;;
    convert | engine) echo 6 ;;
    chat | hooks) echo 7 ;;
    server) echo 8 ;;
    *) echo "" ;;
    esac
}

module_of() { # folder -> module: its first two components (kernels: one module)
    local a=${1%%/*} rest=${1#*/}
    [ "$a" = kernels ] && { echo kernels; return; }
    if [ "$rest" = "$1" ]; then echo "$a"; else echo "$a/${rest%%/*}"; fi
}

fail=0
declare -A edge=()   # "moduleA moduleB" -> "file header" of one include making the edge
unknown=()

while IFS= read -r -d '' path; do
    file=${path#"$src"/}
    dir=$(dirname "$file")
    while IFS= read -r header; do
        # resolve like the build: src/ is on the include path, then the file's own folder
        if [ -f "$src/$header" ]; then
            target=$header
        elif [ -f "$src/$dir/$header" ]; then
            target=$dir/$header
        else
            continue # public include/accelkit/*, generated files, system headers
        fi
        tdir=$(dirname "$target")
        [ "$tdir" = "$dir" ] && continue
        from=$(layer_of "$dir") to=$(layer_of "$tdir")
        if [ -z "$from" ] || [ -z "$to" ]; then
            unknown+=("src/$file includes $target: folder without a layer")
            continue
        fi
        why=""
        if [ "$to" -gt "$from" ]; then
            why="${dir%%/*} (layer $from) must not include ${tdir%%/*} (layer $to)"
        elif [ "${dir%%/*}" = llm ] && [ "${tdir%%/*}" = llm ]; then
            lf=$(llm_layer_of "$dir") lt=$(llm_layer_of "$tdir")
            if [ -z "$lf" ] || [ -z "$lt" ]; then
                unknown+=("src/$file includes $target: llm folder without a sub-layer")
                continue
            fi
            [ "$lt" -gt "$lf" ] &&
                why="$(module_of "$dir") (llm layer $lf) must not include $(module_of "$tdir") (llm layer $lt)"
        fi
        if [ -n "$why" ]; then
            exempt=0
            for a in "${allowed[@]}"; do [ "$a" = "$file $target" ] && exempt=1; done
            if [ $exempt = 1 ]; then continue; fi
            echo "layer: src/$file includes $target: $why"
            fail=1
        fi
        ma=$(module_of "$dir") mb=$(module_of "$tdir")
        [ "$ma" != "$mb" ] && [ -z "${edge["$ma $mb"]+x}" ] && edge["$ma $mb"]="src/$file includes $target"
    done < <(sed -nE 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/p' "$path")
done < <(find "$src" -type f \( -name '*.c' -o -name '*.h' -o -name '*.inc' -o -name '*.def' \) -print0 | sort -z)

for e in "${!edge[@]}"; do
    a=${e% *} b=${e#* }
    if [[ "$a" < "$b" ]] && [ -n "${edge["$b $a"]+x}" ]; then
        echo "circle: $a and $b include each other: ${edge["$a $b"]}; ${edge["$b $a"]}"
        fail=1
    fi
done

for u in "${unknown[@]+"${unknown[@]}"}"; do
    echo "unknown: $u (add its folder to the layers in ${0##*/})"
    fail=1
done

if [ $fail = 0 ]; then echo "test_layers: every include points down, no folder circles"; fi
exit $fail
