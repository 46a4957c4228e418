#!/usr/bin/env bash
# Sets up, builds and runs every test: the default build (warnings are
# errors) and the AddressSanitizer + UndefinedBehaviorSanitizer build, then
# the core tests once more under valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-debian.sh

jobs=$(nproc)
cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"

cmake --preset asan
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

# Every unit test once more under valgrind (memcheck: no errors, no definite leaks).
ctest --preset memcheck -j "$jobs"
