# Fails unless the shared library LIB exports exactly one defined dynamic
# symbol, bp_plugin_negotiate. Run by bp_add_plugin after every link:
#   cmake -DNM=<nm> -DLIB=<library> -P BackplaneCheckExports.cmake
execute_process(COMMAND "${NM}" -D --defined-only "${LIB}"
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${NM} -D ${LIB} failed: ${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(exported)
foreach(line IN LISTS lines)
  # "<address> <type> <name>"; code and data symbols count, not absolute ones.
  if(line MATCHES "^[0-9a-fA-F]+ [TDBRVWi] ([^ ]+)$")
    list(APPEND exported "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(NOT exported STREQUAL "bp_plugin_negotiate")
  list(LENGTH exported n)
  string(REPLACE ";" " " names "${exported}")
  message(FATAL_ERROR "${LIB} exports ${n} symbols (${names}); a plugin exports only "
                      "bp_plugin_negotiate: build it with hidden visibility")
endif()
