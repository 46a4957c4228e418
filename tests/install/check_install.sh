#!/bin/sh
# Installs the build into a temporary prefix, then builds the example twice
# against it -- with find_package(backplane CONFIG) and with pkg-config -- and
# runs both; the installed libbackplane must find the installed CPU plugin.
# Usage: check_install.sh <source dir> <build dir> <c compiler>
set -eu
src="$1"; build="$2"; cc="$3"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
libdir=$(ls -d "$prefix"/lib*/ | head -n1)
cmake -S "$src/examples" -B "$prefix/examples-build" -G Ninja -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/examples-build" >/dev/null
LD_LIBRARY_PATH="$libdir" "$prefix/examples-build/hello_add" cpu:0
PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --exists backplane
# shellcheck disable=SC2046
"$cc" -o "$prefix/hello_pc" "$src/examples/hello_add.c" \
  $(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs backplane)
LD_LIBRARY_PATH="$libdir" "$prefix/hello_pc" cpu:0
plugindir=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --variable=plugindir backplane)
test -f "$plugindir/cpu.json"
echo "install ok"
