# bp_gpu_kernels(<out_var> FORMAT <source|ptx|spirv|amdgcn> PREFIX <p>
#                OUTPUT_DIR <dir> [ARCH <arch>])
#
# Compiles every program of the one GPU kernel source
# (plugins/gpu_common/kernels/kernels.def) to FORMAT and embeds the results
# in <OUTPUT_DIR>/<p>kernels.h as C arrays, with a table
# `static const bp_gpu_blob_t <p>programs[]` (bp_gpu_kernels.h: program
# name, kernel name, bytes, size) in kernels.def order:
#   source  OpenCL C text (the prelude headers, the variant's defines and
#           the kernel file concatenated, NUL-terminated), built by an
#           OpenCL driver at run time
#   ptx     PTX text (NUL-terminated) for the CUDA driver's JIT
#           (clang -target nvptx64, ARCH default sm_80, libclc builtins)
#   spirv   SPIR-V binaries (clang -target spir64 + llvm-spirv)
#   amdgcn  AMDGCN code objects (clang -target amdgcn-amd-amdhsa, ARCH
#           default gfx90a, libclc builtins)
#   cubin   CUDA binaries for ARCH (sm_80, sm_90, ...): the PTX of an
#           earlier `ptx` call in the same directory (PTX_PREFIX names it)
#           through the toolkit's ptxas (BP_GPU_PTXAS)
# The compilers come from BP_GPU_CLANG, BP_GPU_LLVM_SPIRV and BP_GPU_LIBCLC_DIR
# (found below). <out_var> receives the generated header: add it to a
# target's sources or dependencies. bp_gpu_kernels_available(<var> FORMAT)
# says whether a format can be built here.
set(BP__GPU_KERNEL_DIR "${CMAKE_CURRENT_LIST_DIR}/../plugins/gpu_common/kernels")
set(BP__GPU_EMBED_SCRIPT "${CMAKE_CURRENT_LIST_DIR}/BpGpuEmbed.cmake")

find_program(BP_GPU_CLANG NAMES clang-15 clang)
find_program(BP_GPU_LLVM_SPIRV NAMES llvm-spirv-15 llvm-spirv)
find_program(BP_GPU_PTXAS NAMES ptxas HINTS ${CUDAToolkit_ROOT}/bin ENV CUDA_PATH /usr/local/cuda/bin)
find_path(BP_GPU_LIBCLC_DIR NAMES nvptx64--nvidiacl.bc PATHS /usr/lib/clc /usr/share/clc
          /usr/lib/llvm-15/lib/clc NO_DEFAULT_PATH)

function(bp_gpu_kernels_available out_var format)
  set(ok 0)
  if(format STREQUAL "source")
    set(ok 1)
  elseif(format STREQUAL "ptx" AND BP_GPU_CLANG AND BP_GPU_LIBCLC_DIR)
    set(ok 1)
  elseif(format STREQUAL "cubin" AND BP_GPU_CLANG AND BP_GPU_LIBCLC_DIR AND BP_GPU_PTXAS)
    set(ok 1)
  elseif(format STREQUAL "amdgcn" AND BP_GPU_CLANG AND BP_GPU_LIBCLC_DIR)
    set(ok 1)
  elseif(format STREQUAL "spirv" AND BP_GPU_CLANG AND BP_GPU_LLVM_SPIRV)
    set(ok 1)
  endif()
  set(${out_var} ${ok} PARENT_SCOPE)
endfunction()

# The generated ids header (op and dtype ids from the single sources of
# truth), written once per build tree.
function(bp__gpu_ids_header out_dir)
  set(src "${PROJECT_SOURCE_DIR}/include/backplane")
  file(STRINGS ${src}/ops.def opdef REGEX "^BP_OP\\(")
  file(STRINGS ${src}/dtypes.def dtdef REGEX "^BP_DTYPE_X\\(")
  set(text "/* generated from ops.def and dtypes.def: op and dtype ids for the GPU kernels */\n")
  string(APPEND text "#ifndef BP_GPU_IDS_H_\n#define BP_GPU_IDS_H_\n")
  foreach(line IN LISTS opdef)
    if(line MATCHES "^BP_OP\\(([0-9]+), ([a-z0-9_]+),")
      string(APPEND text "#define OP_${CMAKE_MATCH_2} ${CMAKE_MATCH_1}u\n")
    endif()
  endforeach()
  foreach(line IN LISTS dtdef)
    if(line MATCHES "^BP_DTYPE_X\\(([A-Z0-9]+), ([0-9]+),")
      string(APPEND text "#define DT_${CMAKE_MATCH_1} ${CMAKE_MATCH_2}u\n")
    endif()
  endforeach()
  string(APPEND text "#endif\n")
  set(path "${out_dir}/bp_gpu_ids.h")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL text)
    file(WRITE "${path}" "${text}")
  endif()
endfunction()

function(bp_gpu_kernels out_var)
  cmake_parse_arguments(A "" "FORMAT;PREFIX;OUTPUT_DIR;ARCH;PTX_PREFIX" "" ${ARGN})
  bp_gpu_kernels_available(ok ${A_FORMAT})
  if(NOT ok)
    message(FATAL_ERROR "bp_gpu_kernels: format '${A_FORMAT}' cannot be built here "
                        "(clang-15, llvm-spirv-15 or libclc-15 missing)")
  endif()
  set(kdir "${BP__GPU_KERNEL_DIR}")
  set(gen "${A_OUTPUT_DIR}")
  file(MAKE_DIRECTORY "${gen}")
  bp__gpu_ids_header("${gen}")
  # bp_philox.h: the random stream every plugin shares (plugins/kit).
  set(prelude ${kdir}/bp_gpu_portability.h ${gen}/bp_gpu_ids.h ${kdir}/bp_gpu_args.h
              ${kdir}/bp_gpu_common.h ${PROJECT_SOURCE_DIR}/plugins/kit/bp_philox.h)
  # The program list and the ids are read at configure time: editing them
  # reconfigures.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${kdir}/kernels.def
    ${PROJECT_SOURCE_DIR}/include/backplane/ops.def ${PROJECT_SOURCE_DIR}/include/backplane/dtypes.def)
  file(STRINGS ${kdir}/kernels.def progs REGEX "^BP_GPU_PROGRAM\\(")
  set(blobs "")
  set(names "")
  foreach(line IN LISTS progs)
    if(NOT line MATCHES "^BP_GPU_PROGRAM\\(([a-z0-9_]+), ([a-z0-9_.]+), \"([A-Z0-9_ ]*)\"\\)")
      message(FATAL_ERROR "kernels.def: cannot parse: ${line}")
    endif()
    set(name ${CMAKE_MATCH_1})
    set(src ${kdir}/${CMAKE_MATCH_2})
    string(REPLACE " " ";" defs "${CMAKE_MATCH_3}")
    set(dflags "")
    foreach(d IN LISTS defs)
      if(d)
        list(APPEND dflags "-D${d}")
      endif()
    endforeach()
    set(base "${gen}/${A_PREFIX}${name}")
    if(A_FORMAT STREQUAL "cubin")
      set(ptx "${gen}/${A_PTX_PREFIX}${name}.ptx")
      add_custom_command(OUTPUT ${base}.cubin
        COMMAND ${BP_GPU_PTXAS} -arch=${A_ARCH} -O3 -o ${base}.cubin ${ptx}
        DEPENDS ${ptx} COMMENT "ptxas ${name} -> cubin (${A_ARCH})" VERBATIM)
      list(APPEND blobs ${base}.cubin)
    elseif(A_FORMAT STREQUAL "source")
      # Text: defines, prelude and source concatenated (no includes left:
      # a driver's run-time compiler has no include path).
      add_custom_command(OUTPUT ${base}.cl
        COMMAND ${CMAKE_COMMAND} -DMODE=concat "-DDEFINES=${CMAKE_MATCH_3}"
                "-DINPUTS=${prelude};${src}" -DOUTPUT=${base}.cl -P ${BP__GPU_EMBED_SCRIPT}
        DEPENDS ${prelude} ${src} ${kdir}/kernels.def ${BP__GPU_EMBED_SCRIPT}
        COMMENT "GPU kernel source ${name}" VERBATIM)
      list(APPEND blobs ${base}.cl)
    else()
      set(incs "")
      foreach(h IN LISTS prelude)
        list(APPEND incs -include ${h})
      endforeach()
      set(common -x cl -cl-std=CL1.2 -O2 -Werror -Wno-linker-warnings -Xclang -finclude-default-header
                 -I${kdir} -I${gen} -I${PROJECT_SOURCE_DIR}/plugins/kit ${incs} ${dflags})
      if(A_FORMAT STREQUAL "ptx")
        set(arch ${A_ARCH})
        if(NOT arch)
          set(arch sm_80)
        endif()
        add_custom_command(OUTPUT ${base}.ptx
          COMMAND ${BP_GPU_CLANG} ${common} -target nvptx64-nvidia-cuda -march=${arch} -S
                  -Xclang -mlink-builtin-bitcode -Xclang ${BP_GPU_LIBCLC_DIR}/nvptx64--nvidiacl.bc
                  -o ${base}.ptx ${src}
          DEPENDS ${prelude} ${src} COMMENT "clang ${name} -> PTX (${arch})" VERBATIM)
        list(APPEND blobs ${base}.ptx)
      elseif(A_FORMAT STREQUAL "amdgcn")
        set(arch ${A_ARCH})
        if(NOT arch)
          set(arch gfx90a)
        endif()
        add_custom_command(OUTPUT ${base}.hsaco
          COMMAND ${BP_GPU_CLANG} ${common} -target amdgcn-amd-amdhsa -mcpu=${arch} -nogpulib
                  -Xclang -mlink-builtin-bitcode -Xclang ${BP_GPU_LIBCLC_DIR}/amdgcn--amdhsa.bc
                  -o ${base}.hsaco ${src}
          DEPENDS ${prelude} ${src} COMMENT "clang ${name} -> AMDGCN (${arch})" VERBATIM)
        list(APPEND blobs ${base}.hsaco)
      else()
        add_custom_command(OUTPUT ${base}.spv
          # -O0: the SPIR-V translator refuses the odd-width integers LLVM's
          # optimizer makes (switch tables); drivers optimize SPIR-V anyway.
          COMMAND ${BP_GPU_CLANG} ${common} -O0 -target spir64 -c -emit-llvm -o ${base}.bc ${src}
          COMMAND ${BP_GPU_LLVM_SPIRV} ${base}.bc -o ${base}.spv
          DEPENDS ${prelude} ${src} COMMENT "clang ${name} -> SPIR-V" VERBATIM)
        list(APPEND blobs ${base}.spv)
      endif()
    endif()
    list(APPEND names ${name})
  endforeach()
  set(text_formats source ptx)
  if(A_FORMAT IN_LIST text_formats)
    set(nul 1)
  else()
    set(nul 0)
  endif()
  set(header "${gen}/${A_PREFIX}kernels.h")
  add_custom_command(OUTPUT ${header}
    COMMAND ${CMAKE_COMMAND} -DMODE=embed "-DINPUTS=${blobs}" "-DNAMES=${names}"
            -DPREFIX=${A_PREFIX} -DNUL=${nul} -DOUTPUT=${header} -P ${BP__GPU_EMBED_SCRIPT}
    DEPENDS ${blobs} ${BP__GPU_EMBED_SCRIPT}
    COMMENT "embedding ${A_FORMAT} GPU kernels in ${A_PREFIX}kernels.h" VERBATIM)
  set(${out_var} ${header} PARENT_SCOPE)
endfunction()
