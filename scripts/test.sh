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

# valgrind over the core unit tests (the loader, runtime and op front end).
ctest --test-dir build -L core -T memcheck --overwrite MemoryCheckCommandOptions="--leak-check=full --error-exitcode=1 --errors-for-leak-kinds=definite" -j "$jobs" --output-on-failure
