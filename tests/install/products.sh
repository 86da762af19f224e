#!/bin/sh
# A build that leaves products out (AK_WITH_ONNX / AK_WITH_LLM / AK_WITH_SERVER = OFF)
# says so: each left-out product's `ak` subcommands fail with exit code 2 naming the
# option (not "unknown command"), accelkit/version.h has its AK_WITH_* at 0, and its
# public header is not installed.
#   products.sh BUILD_DIR WITH_ONNX WITH_LLM WITH_SERVER   (each 0 or 1)
set -eu
build=$(cd "$1" && pwd)
with_onnx=$2 with_llm=$3 with_server=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }

# missing OPTION ak ARGS...: exit code 2 and "this build has no ... (OPTION=OFF)"
missing() {
    option=$1; shift
    set +e
    "$build/ak" "$@" >"$tmp/out" 2>&1
    rc=$?
    set -e
    [ $rc -eq 2 ] || { cat "$tmp/out"; fail "ak $*: exit $rc, expected 2"; }
    grep -q "this build has no .*($option=OFF)" "$tmp/out" ||
        { cat "$tmp/out"; fail "ak $*: does not name $option"; }
    echo "ok: ak $*: $(cat "$tmp/out")"
}

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
version_h=$tmp/prefix/include/accelkit/version.h
# header PRODUCT WITH HEADER: AK_WITH_PRODUCT in version.h, HEADER installed when built
header() {
    grep -q "^#define AK_WITH_$1 $2 " "$version_h" || fail "version.h: AK_WITH_$1 is not $2"
    if [ "$2" = 1 ] && [ ! -e "$tmp/prefix/include/accelkit/$3" ]; then fail "$3 not installed"; fi
    if [ "$2" = 0 ] && [ -e "$tmp/prefix/include/accelkit/$3" ]; then fail "$3 installed"; fi
    echo "ok: AK_WITH_$1 $2, $3 $([ "$2" = 1 ] && echo installed || echo left out)"
}
header ONNX "$with_onnx" infer.h
header LLM "$with_llm" llm.h
grep -q "^#define AK_WITH_SERVER $with_server " "$version_h" || fail "version.h: AK_WITH_SERVER"

if [ "$with_onnx" = 0 ]; then
    missing AK_WITH_ONNX info model.onnx
    missing AK_WITH_ONNX run model.onnx
    missing AK_WITH_ONNX compare model.onnx --inputs a --reference b
    missing AK_WITH_ONNX bench model.onnx
fi
if [ "$with_llm" = 0 ]; then
    for cmd in generate tokenize logits convert; do missing AK_WITH_LLM "$cmd" -m x; done
    missing AK_WITH_LLM bench llm -m x
fi
if [ "$with_server" = 0 ]; then
    missing AK_WITH_SERVER serve model.gguf
fi
"$build/ak" sysinfo --quick >/dev/null || fail "ak sysinfo"
echo "PASS"
