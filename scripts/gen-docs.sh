#!/usr/bin/env bash
# Regenerates the generated documentation:
#  - docs/conformance-summary.json: a full conformance run over every backend
#    found (cases passed / failed / skipped per op, dtypes that passed);
#  - docs/ops.md: the op table (include/backplane/ops.def) with that
#    summary's status and dtype columns per backend;
#  - docs/performance.md: bp-bench's figures (every suite on cpu:0, and the
#    device-vs-CPU and raw-Vulkan suites on every other device found), under the fixed text
#    of docs/performance.intro.md.
# Options: --no-conformance keeps the committed summary; --no-bench keeps
# docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
conformance=1 bench=1
for arg in "$@"; do
  case "$arg" in
    --no-conformance) conformance=0 ;;
    --no-bench) bench=0 ;;
    *) echo "usage: scripts/gen-docs.sh [--no-conformance] [--no-bench]" >&2; exit 2 ;;
  esac
done
cmake --build --preset default --target bp-opdoc bp-conform bp-bench bp-info >/dev/null
mkdir -p build/reports
if [ "$conformance" = 1 ]; then
  # Every backend found but the template example plugin.
  backends=()
  for b in $(build/bin/bp-info --devices | cut -d: -f1 | sort -u); do
    [ "$b" = template ] || backends+=(--backend "$b")
  done
  build/bin/bp-conform "${backends[@]}" --json build/reports/conformance.json >/dev/null || true
  build/bin/bp-opdoc --conformance build/reports/conformance.json \
    --write-summary docs/conformance-summary.json
  echo "wrote docs/conformance-summary.json"
fi
build/bin/bp-opdoc --summary docs/conformance-summary.json > docs/ops.md
echo "wrote docs/ops.md"
if [ "$bench" = 1 ]; then
  build/bin/bp-bench --markdown build/reports/bench-cpu.md >/dev/null
  cat docs/performance.intro.md build/reports/bench-cpu.md > docs/performance.md
  # Every other device: its figures against the CPU plugin, and for Vulkan
  # devices against raw Vulkan (the vk_raw suite says where it does not apply).
  for dev in $(build/bin/bp-info --devices | grep -v -e '^cpu:' -e '^template:' -e '^mpi:' || true); do
    build/bin/bp-bench --device "$dev" --suite vs_cpu,vk_raw --markdown "build/reports/bench-$dev.md" >/dev/null
    cat "build/reports/bench-$dev.md" >> docs/performance.md
  done
  # Collectives across 4 processes (the mpi plugin against MPI called
  # directly), where Open MPI's mpirun is installed.
  if command -v mpirun >/dev/null && build/bin/bp-info --devices | grep -q '^mpi:'; then
    mpirun --allow-run-as-root --oversubscribe -np 4 build/bin/bp-bench --suite comm_mpi \
      --markdown build/reports/bench-comm-mpi.md >/dev/null
    cat build/reports/bench-comm-mpi.md >> docs/performance.md
  fi
  echo "wrote docs/performance.md"
fi
