#!/usr/bin/env bash
# test_layers.sh must fail, naming file and header, on a tree with an upward include, an
# llm sub-layer inversion and a circle between two folders, and pass on a clean one.
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mk() { mkdir -p "$(dirname "$tmp/$1")"; printf '%s\n' "${@:2}" > "$tmp/$1"; }

# a clean tree: cli -> llm -> core, llm/model -> llm/base
mk src/core/a.h '/* a */'
mk src/llm/base/kv.h '#include "core/a.h"'
mk src/llm/model/m.c '#include "llm/base/kv.h"' '#include <stdio.h>' '#include "accelkit/ak.h"'
mk src/cli/main.c '#include "llm/model/m.h"' '#include "core/a.h"'
mk src/llm/model/m.h '/* m */'
out=$("$here/test_layers.sh" "$tmp" 2>&1) || { echo "clean tree refused: $out"; exit 1; }

# now break it three ways
mk src/core/b.c '#include "cli/main.h"'
mk src/cli/main.h '/* main */'
mk src/llm/model/m2.c '#include "llm/engine/e.h"'
mk src/llm/engine/e.h '#include "llm/model/m.h"'
mk src/llm/hf/h.c '#include "llm/tokenizer/t.h"'
mk src/llm/tokenizer/t.h '#include "llm/hf/x.h"'
mk src/llm/hf/x.h '/* x */'
out=$("$here/test_layers.sh" "$tmp" 2>&1) && { echo "broken tree passed: $out"; exit 1; }
fail=0
for want in "src/core/b.c includes cli/main.h" "src/llm/model/m2.c includes llm/engine/e.h" \
            "circle: llm/engine and llm/model" "src/llm/tokenizer/t.h includes llm/hf/x.h"; do
    case $out in *"$want"*) ;; *) echo "missing: $want"; fail=1 ;; esac
done
[ $fail = 0 ] && echo "test_layers_selftest: ok"
exit $fail
