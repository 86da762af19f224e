#!/bin/sh
# An installed accelkit used from outside: installs the build tree into a temporary
# prefix, then builds tests/install/consumer/consumer.c against it with
# `pkg-config --cflags --libs accelkit` (shared, and static through --static) and with a
# CMake project calling find_package(accelkit) (accelkit::accelkit and
# accelkit::accelkit_static), and runs each. Nothing from the source or build tree is on
# the include or library path of these builds.
#   c_consumer.sh BUILD_DIR
set -eu
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }
pc=$(find "$prefix" -name accelkit.pc)
[ -n "$pc" ] || fail "no accelkit.pc installed"
libdir=$(dirname "$(dirname "$pc")")
for f in "$prefix/bin/ak" "$prefix/include/accelkit/version.h" "$libdir/libaccelkit.a" \
         "$libdir/cmake/accelkit/accelkitConfig.cmake" \
         "$libdir/cmake/accelkit/accelkitConfigVersion.cmake"; do
    [ -e "$f" ] || fail "not installed: $f"
done
soname=$(objdump -p "$libdir/libaccelkit.so" | awk '/SONAME/ {print $2}')
major=$(sed -n 's/^#define AK_VERSION_MAJOR \([0-9]*\).*/\1/p' "$prefix/include/accelkit/version.h")
[ "$soname" = "libaccelkit.so.$major" ] || fail "soname '$soname', expected libaccelkit.so.$major"
[ -e "$libdir/$soname" ] || fail "$soname not installed"
"$prefix/bin/ak" version | grep -q "accelkit " || fail "installed ak version"

export PKG_CONFIG_PATH="$(dirname "$pc")"
step "pkg-config: $(pkg-config --cflags --libs accelkit)"
[ "$(pkg-config --modversion accelkit)" = "$("$prefix/bin/ak" version | cut -d' ' -f2)" ] ||
    fail "pkg-config --modversion disagrees with ak version"
# shellcheck disable=SC2046 # the flags are words
cc -std=c11 -Wall -Werror -o "$tmp/pc_shared" "$here/consumer/consumer.c" \
    $(pkg-config --cflags --libs accelkit) -lm
LD_LIBRARY_PATH=$libdir "$tmp/pc_shared" || fail "pkg-config shared build"
# the static archive with --static's private flags, in place of -laccelkit
# shellcheck disable=SC2046
cc -std=c11 -Wall -Werror -o "$tmp/pc_static" "$here/consumer/consumer.c" \
    $(pkg-config --cflags accelkit) "$libdir/libaccelkit.a" \
    $(pkg-config --static --libs accelkit | sed 's/-laccelkit\b//') -lm
"$tmp/pc_static" || fail "pkg-config static build"
objdump -p "$tmp/pc_static" | grep -q "NEEDED.*libaccelkit" && fail "static build needs libaccelkit.so"

step "find_package(accelkit)"
cmake -S "$here/consumer" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_BUILD_TYPE=Release >"$tmp/cmake.log" 2>&1 || { cat "$tmp/cmake.log"; fail "configure"; }
cmake --build "$tmp/cmake" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "build"; }
LD_LIBRARY_PATH=$libdir "$tmp/cmake/consumer_shared" || fail "find_package shared build"
"$tmp/cmake/consumer_static" || fail "find_package static build"
echo "PASS"
