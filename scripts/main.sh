#!/usr/bin/env bash
# The main job: sets up, builds, lists the plugins and devices found, and runs
# the conformance scorecard over every backend found, then compiles a
# transformer block for every device found and checks it against eager.
# Reports land in build/reports/ (JSON, Markdown, HTML).
#
#   scripts/main.sh          the quick scorecard (bp-conform --quick: a few
#                            cases per dtype and axis; minutes)
#   scripts/main.sh --full   the full suite (every case; far longer, the
#                            Vulkan backend on a CPU driver above all)
set -euo pipefail
cd "$(dirname "$0")/.."
scope=(--quick)
for arg in "$@"; do
  case "$arg" in
    --full) scope=() ;;
    --quick) scope=(--quick) ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "main.sh: unknown argument: $arg (--full or --quick)" >&2; exit 2 ;;
  esac
done
scripts/setup-debian.sh

cmake --preset default
cmake --build --preset default -j "$(nproc)"

export PATH="$PWD/build/bin:$PATH"
bp-info
mkdir -p build/reports
status=0
bp-conform ${scope[@]+"${scope[@]}"} --json build/reports/conformance.json \
  --markdown build/reports/conformance.md --html build/reports/conformance.html || status=$?
echo "reports: build/reports/conformance.{json,md,html}${scope[0]:+ (quick subset; scripts/main.sh --full for every case)}"
# The compiled-graph demo: a transformer block compiled for every device
# found (placed, fused, memory planned), run, its placement report printed
# and its output checked against eager execution on cpu:0.
echo "== compiled graph: examples/graphs/transformer_block.bpg on every device found"
bp-run examples/graphs/transformer_block.bpg --sym S=128 --runs 2 --check \
  --report build/reports/graph.json || status=$?
echo "report: build/reports/graph.json (docs/graph.md explains it)"
exit "$status"
