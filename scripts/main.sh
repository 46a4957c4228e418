#!/usr/bin/env bash
# The main job: sets up, builds, lists the plugins and devices found, and runs
# the conformance scorecard over every backend found. Reports land in
# build/reports/ (JSON, Markdown, HTML).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-debian.sh

cmake --preset default
cmake --build --preset default -j "$(nproc)"

export PATH="$PWD/build/bin:$PATH"
bp-info
mkdir -p build/reports
status=0
bp-conform --json build/reports/conformance.json --markdown build/reports/conformance.md \
  --html build/reports/conformance.html || status=$?
echo "reports: build/reports/conformance.{json,md,html}"
exit "$status"
