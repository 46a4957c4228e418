#!/usr/bin/env bash
# The H200 device check (issue 15): on a machine with one NVIDIA H200 and a
# CUDA driver, writes into $OUT (at most 8 files, as the device runner takes):
#   device-check.log   every step's output and time, and the steps that failed
#   bp-info.txt        bp-info
#   bp-info.json       bp-info --json
#   conform-cuda.json  bp-conform --backend cuda (full)
#   conform-cuda.md    the same as Markdown
#   bench-cuda.md      bp-bench --device cuda:0 --suite vs_raw (figures against
#                      raw CUDA and cuBLASLt measured in the same run; also a
#                      compiled 8-op region replayed as one CUDA graph vs the
#                      8 ops eagerly, and single-rank collectives through NCCL,
#                      each checked, with all_reduce vs a device copy: their
#                      check lines are in device-check.log)
#   conform-vulkan.md  bp-conform --backend vulkan --quick, and
#   bench-vulkan.md    bp-bench --device vulkan:0 --suite vs_cpu,vk_raw, when an
#                      NVIDIA Vulkan ICD manifest is found
# The whole check stays under 10 minutes on 16 cores; a step that fails or
# runs out of its time is logged and the script goes on, so every result
# that can be written is written; it exits 1 when any step failed.
#
#   scripts/device-check.sh --prepare   on a build machine with the CUDA
#       toolkit (same x86-64 OS): builds build-device/ (Release, no tests)
#       and copies the shared libraries it needs that are not in the base
#       system into build-device/lib, so the device machine, which starts
#       bare, can run it without installing anything (carry build-device).
#   OUT=<dir> scripts/device-check.sh   on the device machine: uses
#       build-device/ when it holds the tools, else configures and builds it
#       there (needs cmake, ninja, a C compiler, cjson and the toolkit's
#       headers), then runs the steps above.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build-device
tools=(bp-info bp-conform bp-bench bp_plugin_cpu bp_plugin_cuda)

configure_and_build() {
  local vk=()
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBP_BUILD_TESTS=OFF \
    -DBP_WERROR=OFF -DCUDAToolkit_ROOT="${CUDA_PATH:-/usr/local/cuda}"
  if grep -q '^bp_plugin_vulkan:' <(ninja -C "$build" -t targets all 2>/dev/null); then
    vk=(bp_plugin_vulkan)
  fi
  cmake --build "$build" -j "$(nproc)" --target "${tools[@]}" "${vk[@]}"
}

if [ "${1:-}" = "--prepare" ]; then
  configure_and_build
  mkdir -p "$build/lib"
  # Every library the tools and plugins load that lives outside the base
  # system (cjson, OpenBLAS, gfortran...); libcuda and cuBLASLt are the
  # device machine's own and are never copied.
  for f in "$build"/bin/* "$build"/lib/backplane/plugins/*.so "$build"/core/libbackplane.so*; do
    [ -f "$f" ] || continue
    ldd "$f" 2>/dev/null | awk '/=> \// {print $3}' | while read -r lib; do
      case "$lib" in
        /lib/x86_64-linux-gnu/libc.so*|/lib/x86_64-linux-gnu/libm.so*|/lib/x86_64-linux-gnu/libpthread*|\
        /lib/x86_64-linux-gnu/libdl*|/lib64/*|*/libcuda.so*|*/libcublas*|"$PWD"/*) ;;
        *) cp -Lu "$lib" "$build/lib/" ;;
      esac
    done
  done
  # Only what runs travels: object files and static libraries stay here
  # (the device machine takes at most 64 MiB with the working tree).
  find "$build" \( -name '*.o' -o -name '*.a' \) -delete
  du -sh --apparent-size "$build" | sed 's/^/build-device (carry it to the device machine): /'
  exit 0
fi

: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
log="$OUT/device-check.log"
: > "$log"
failed=()
start=$SECONDS
# step NAME SECONDS CMD...: runs CMD with a time limit, logs it, goes on.
step() {
  local name=$1 limit=$2 t0=$SECONDS rc=0
  shift 2
  printf '== %s (limit %s s)\n' "$name" "$limit" | tee -a "$log"
  timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1 || rc=$?
  printf '   %s: rc %s, %s s\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$log"
  if [ "$rc" -ne 0 ]; then failed+=("$name (rc $rc)"); fi
  return 0
}

{ echo "host: $(uname -a)"; nproc; nvidia-smi 2>&1 | head -15 || true; } >> "$log" 2>&1
if [ ! -x "$build/bin/bp-conform" ]; then
  step build 300 configure_and_build
fi
export PATH="$PWD/$build/bin:$PATH"
if [ -d "$build/lib" ]; then
  export LD_LIBRARY_PATH="$PWD/$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
export BACKPLANE_PLUGIN_PATH="$PWD/$build/lib/backplane/plugins"
export BACKPLANE_DISABLE=mpi,template # not built for the check
# NCCL is the machine's own (218 MB: never carried); without it the CUDA
# plugin's collectives are host-staged and the log says so.
for f in "${CUDA_PATH:-/usr/local/cuda}"/lib/libnccl.so.2 "${CUDA_PATH:-/usr/local/cuda}"/lib64/libnccl.so.2 \
         /usr/lib/x86_64-linux-gnu/libnccl.so.2; do
  if [ -e "$f" ]; then export BP_NCCL_PATH="$f"; break; fi
done
echo "NCCL: ${BP_NCCL_PATH:-none found (collectives host-staged)}" >> "$log"
journal_dir=$(mktemp -d)               # bp-conform's journals stay out of $OUT

step bp-info 60 sh -c 'bp-info > "$1/bp-info.txt" 2>&1' sh "$OUT"
step bp-info-json 60 sh -c 'bp-info --json > "$1/bp-info.json"' sh "$OUT"
step conform-cuda 180 bp-conform --backend cuda --json "$OUT/conform-cuda.json" \
  --markdown "$OUT/conform-cuda.md" --journal "$journal_dir/cuda" --no-progress
step bench-cuda 150 bp-bench --device cuda:0 --suite vs_raw --reps 5 --markdown "$OUT/bench-cuda.md"

icd=""
for d in /usr/share/vulkan/icd.d /etc/vulkan/icd.d /usr/local/nvidia/share/vulkan/icd.d; do
  for f in "$d"/nvidia*.json; do [ -f "$f" ] && icd=$f && break 2; done
done
if [ -n "$icd" ] && [ -e "$build/lib/backplane/plugins/libbp_plugin_vulkan.so" ]; then
  export VK_DRIVER_FILES="$icd"
  echo "NVIDIA Vulkan ICD: $icd" >> "$log"
  step conform-vulkan 150 bp-conform --backend vulkan --quick --markdown "$OUT/conform-vulkan.md" \
    --journal "$journal_dir/vulkan" --no-progress
  step bench-vulkan 90 bp-bench --device vulkan:0 --suite vs_cpu,vk_raw --reps 5 \
    --markdown "$OUT/bench-vulkan.md"
else
  echo "no NVIDIA Vulkan ICD manifest (or no Vulkan plugin built): Vulkan steps skipped" | tee -a "$log"
fi

echo "total: $((SECONDS - start)) s" | tee -a "$log"
if [ "${#failed[@]}" -gt 0 ]; then
  printf 'failed steps: %s\n' "${failed[*]}" | tee -a "$log"
  exit 1
fi
echo "all steps passed" | tee -a "$log"
