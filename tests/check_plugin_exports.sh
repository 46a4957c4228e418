#!/bin/sh
# Asserts that a plugin library exports exactly one dynamic symbol, the
# negotiation entry point. Usage: check_plugin_exports.sh libbp_plugin_x.so
set -eu
lib="$1"
syms=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVWi]$/ {print $3}' | sort)
count=$(printf '%s\n' "$syms" | grep -c . || true)
if [ "$count" -ne 1 ] || [ "$syms" != "bp_plugin_negotiate" ]; then
  echo "FAIL: $lib exports $count symbols:" >&2
  printf '%s\n' "$syms" >&2
  exit 1
fi
echo "ok: $lib exports only bp_plugin_negotiate"
