#!/usr/bin/env bash
# Regenerates docs/ops.md from the op table (include/backplane/ops.def).
# With a conformance report (build/reports/conformance.json, from
# scripts/main.sh or bp-conform --json) the table gains a status column per
# backend; the committed docs/ops.md is generated without one so that it
# does not depend on a run.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --build --preset default --target bp-opdoc >/dev/null
build/bin/bp-opdoc > docs/ops.md
echo "wrote docs/ops.md"
if [ -f build/reports/conformance.json ]; then
  build/bin/bp-opdoc --conformance build/reports/conformance.json > build/reports/ops_status.md
  echo "wrote build/reports/ops_status.md (with conformance status per backend)"
fi
