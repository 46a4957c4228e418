# bp_embed_glsl(OUT_VAR PREFIX <p> SOURCE_DIR <dir> OUTPUT_DIR <dir>
#               [INCLUDE_DIRS <dir>...] [DEPENDS <file>...] SHADERS <entry>...)
#
# Compiles GLSL compute shaders to SPIR-V at build time with
# glslangValidator (Vulkan 1.2 target) and embeds each as a C array
# `const uint32_t <p><name>[]` in <OUTPUT_DIR>/<p><name>.h. Each entry is
# "name|source|defines", defines joined by "+" (one source, variants by
# define). OUT_VAR receives the generated headers (add them to a target's
# dependencies). Needs BP_GLSLANG (find_program) set by the caller.
function(bp_embed_glsl out_var)
  cmake_parse_arguments(A "" "PREFIX;SOURCE_DIR;OUTPUT_DIR" "INCLUDE_DIRS;DEPENDS;SHADERS" ${ARGN})
  file(MAKE_DIRECTORY ${A_OUTPUT_DIR})
  set(incs "")
  foreach(dir IN LISTS A_INCLUDE_DIRS)
    list(APPEND incs "-I${dir}")
  endforeach()
  set(headers "")
  foreach(entry IN LISTS A_SHADERS)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 name)
    list(GET parts 1 src)
    list(GET parts 2 def)
    string(REPLACE "+" ";-D" defs "-D${def}")
    set(out ${A_OUTPUT_DIR}/${A_PREFIX}${name}.h)
    add_custom_command(OUTPUT ${out}
      COMMAND ${BP_GLSLANG} -V --target-env vulkan1.2 ${defs} ${incs}
              --vn ${A_PREFIX}${name} -o ${out} ${A_SOURCE_DIR}/${src}
      DEPENDS ${A_SOURCE_DIR}/${src} ${A_DEPENDS}
      COMMENT "glslangValidator ${src} (${def}) -> ${A_PREFIX}${name}.h" VERBATIM)
    list(APPEND headers ${out})
  endforeach()
  set(${out_var} ${headers} PARENT_SCOPE)
endfunction()
