#!/usr/bin/env bash
# Installs what backplane needs to build and test on Debian 12; with
# --bench also what the benchmarks compare against (PyTorch's CPU build,
# tools/bench/torch_conv.py), which the tests never need.
# Runs apt-get as root (directly, or through sudo when available).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libcjson-dev libcmocka-dev libopenblas-dev libdlpack-dev libxxhash-dev
  # oneDNN: the CPU plugin's f32 convolution (optional at build time, like OpenBLAS)
  libdnnl-dev
  valgrind binutils
  # Vulkan backend: the loader and headers, Mesa's lavapipe CPU driver, the
  # GLSL compiler for the kernels, and the Khronos validation layer (tests).
  libvulkan-dev libvulkan1 mesa-vulkan-drivers glslang-tools spirv-tools
  vulkan-validationlayers vulkan-tools
  # OpenCL backend: the ICD loader and PoCL's CPU driver (the plugin dlopens
  # libOpenCL.so.1; CI runs it for real), the Khronos headers (types only);
  # the one GPU kernel source is compiled to PTX (and SPIR-V, AMDGCN) with
  # clang-15, llvm-spirv-15 and libclc-15.
  ocl-icd-libopencl1 pocl-opencl-icd opencl-headers clang-15 llvm-spirv-15 libclc-15
  # MPI backend: Open MPI (the plugin dlopens libmpi; the tests and the
  # comm benchmark link it and run under mpirun).
  libopenmpi-dev openmpi-bin
)
if [ "${1:-}" = "--bench" ]; then
  packages+=(python3-torch)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "setup: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
