#!/usr/bin/env bash
# Sets up, builds and runs every test: the default build (warnings are
# errors), the AddressSanitizer + UndefinedBehaviorSanitizer build, the
# ThreadSanitizer build, the CPU backend without OpenBLAS, and every unit test
# once more under valgrind; after the default tests, a 60-second soak.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-debian.sh

jobs=$(nproc)
cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"
# The 60-second soak (label soak): 8 threads over every device, resident
# memory and open descriptors must stay flat (tests/soak).
ctest --preset soak

cmake --preset asan
cmake --build --preset asan -j "$jobs"
ctest --preset asan -j "$jobs"

# ThreadSanitizer over every test (the streams, the pool, the loader).
cmake --preset tsan
cmake --build --preset tsan -j "$jobs"
ctest --preset tsan -j "$jobs"

# The CPU backend without OpenBLAS (its built-in blocked GEMM): only what the
# preset's tests need (CMakePresets.json, test preset no-openblas).
cmake --preset no-openblas
cmake --build --preset no-openblas -j "$jobs" --target bp-conform test_cpu_plugin test_ops
ctest --preset no-openblas -j "$jobs"

# Every unit test once more under valgrind (memcheck: no errors, no definite leaks).
ctest --preset memcheck -j "$jobs"
