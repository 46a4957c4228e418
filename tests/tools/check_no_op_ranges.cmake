# Fails when a C source compares an op id against an op name with >=, >, <=
# or < (range dispatch: an op appended later would fall outside the range),
# and, in the plugins and the conformance suite, on any `op >= BP_OP_...`
# (bounds checks there are written bp_op_family(op) == BP_OP_FAMILY_INVALID).
function(scan pattern)
  set(hits "")
  foreach(f ${ARGN})
    file(STRINGS ${f} lines REGEX "${pattern}")
    foreach(l ${lines})
      string(APPEND hits "${f}: ${l}\n")
    endforeach()
  endforeach()
  if(NOT hits STREQUAL "")
    message(FATAL_ERROR "op ids compared as ranges (dispatch on bp_op_family, ops.h):\n${hits}")
  endif()
endfunction()
file(GLOB_RECURSE edge ${ROOT}/plugins/*.c ${ROOT}/plugins/*.h ${ROOT}/conformance/*.c
     ${ROOT}/conformance/*.h)
file(GLOB_RECURSE core ${ROOT}/core/*.c ${ROOT}/core/*.h)
scan("(op|op_id) *(>=|<=|<|>) *BP_OP_[a-z]" ${edge} ${core})
scan("op(_id)? *>= *BP_OP_" ${edge})
