# bp_add_plugin(<backend> SOURCES ... [LIBRARIES ...])
#
# Builds plugins/<backend> as MODULE library libbp_plugin_<backend>.so into
# the plugin folder (build tree and install tree alike), writes its manifest
# <backend>.json beside it, and adds a test that the library exports exactly
# one dynamic symbol (bp_plugin_negotiate).
function(bp_add_plugin backend)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;INCLUDES" ${ARGN})
  set(target bp_plugin_${backend})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/plugins/common ${ARG_INCLUDES})
  target_link_libraries(${target} PRIVATE ${ARG_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${BP_PLUGIN_OUTPUT_DIR}"
    C_VISIBILITY_PRESET hidden)
  # Only the entry point is exported, whatever the sources mark default.
  target_link_options(${target} PRIVATE "-Wl,--exclude-libs,ALL" "-Wl,--no-undefined")
  set(BP_MANIFEST_BACKEND ${backend})
  set(BP_MANIFEST_LIBRARY "libbp_plugin_${backend}.so")
  configure_file(${PROJECT_SOURCE_DIR}/cmake/plugin_manifest.json.in
    "${BP_PLUGIN_OUTPUT_DIR}/${backend}.json" @ONLY)
  install(TARGETS ${target} LIBRARY DESTINATION ${BP_PLUGIN_SUBDIR})
  install(FILES "${BP_PLUGIN_OUTPUT_DIR}/${backend}.json" DESTINATION ${BP_PLUGIN_SUBDIR})
  if(BP_BUILD_TESTS)
    add_test(NAME plugin_exports_${backend}
      COMMAND ${PROJECT_SOURCE_DIR}/tests/check_plugin_exports.sh $<TARGET_FILE:${target}>)
    set_tests_properties(plugin_exports_${backend} PROPERTIES LABELS "backend=${backend}")
  endif()
endfunction()
