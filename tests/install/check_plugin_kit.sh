#!/bin/sh
# The installed plugin kit works out of tree: installs backplane into a
# temporary prefix, builds plugins/template as a project of its own against
# it (find_package(backplane CONFIG), bp_add_plugin, backplane::plugin_kit;
# a Debug build, so the kit's call checks run), loads the built plugin with
# the installed bp-info and scores it with the installed bp-conform, which
# must report 0 failed.
# Usage: check_plugin_kit.sh <source dir> <build dir> <c compiler>
set -eu
src="$1"; build="$2"; cc="$3"
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/backplane/kit/bp_kit.h"
ls "$prefix"/lib*/libbackplane_plugin_kit.a >/dev/null
# The installed copy of the template must not stand in for the one built here.
rm -f "$prefix"/lib*/backplane/plugins/libbp_plugin_template.so "$prefix"/lib*/backplane/plugins/template.json

out="$prefix/template-build"
cmake -S "$src/plugins/template" -B "$out" -G Ninja -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$out" >/dev/null
lib="$out/plugins/libbp_plugin_template.so"
test -f "$out/plugins/template.json"
nm -D --defined-only "$lib" | grep -q " T bp_plugin_negotiate$"

export BACKPLANE_PLUGIN_PATH="$lib" BACKPLANE_LOG=error
info=$("$prefix/bin/bp-info" --json --backend template)
printf '%s\n' "$info" | grep -q "\"path\":[[:space:]]*\"$lib\""
printf '%s\n' "$info" | grep -q "\"status\":[[:space:]]*\"loaded\""
report=$("$prefix/bin/bp-conform" --backend template) || {
  printf '%s\n' "$report" | tail -n 20
  exit 1
}
line=$(printf '%s\n' "$report" | grep -E "^template: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$")
echo "$line"
printf '%s\n' "$line" | grep -Eq "^template: [1-9][0-9]* passed, 0 failed"

# A plugin that exports more than its entry point fails its own build.
bad="$prefix/bad-plugin"
mkdir -p "$bad"
cat > "$bad/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(bad_plugin C)
find_package(backplane CONFIG REQUIRED)
bp_add_plugin(bad SOURCES bad.c)
CM
cat > "$bad/bad.c" <<'C'
#include "bp_kit.h"
__attribute__((visibility("default"))) int bad_extra_export = 1;
static const bp_plugin_vtable_t* none(void) { return 0; }
static const bp_kit_plugin_info_t k_info = {"bad", "0", "x", none};
BP_KIT_PLUGIN_ENTRY(&k_info)
C
cmake -S "$bad" -B "$bad/build" -G Ninja -DCMAKE_C_COMPILER="$cc" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
if cmake --build "$bad/build" >"$bad/log" 2>&1; then
  echo "FAIL: a plugin exporting bad_extra_export built" >&2
  exit 1
fi
grep -q "bad_extra_export" "$bad/log"
echo "plugin kit install ok"
