# bp_add_plugin(<backend> SOURCES ... [LIBRARIES ...] [INCLUDES ...])
#
# Builds a backplane plugin: the MODULE library libbp_plugin_<backend>.so,
# linked with the plugin kit (backplane::plugin_kit) and built with hidden
# visibility, into BP_PLUGIN_OUTPUT_DIR (default <build>/plugins); writes its
# manifest <backend>.json beside it; checks after every link that the
# library exports exactly one dynamic symbol, bp_plugin_negotiate; installs
# both into BP_PLUGIN_SUBDIR (default <libdir>/backplane/plugins under the
# install prefix).
#
# The same function serves the backplane tree and vendors building out of
# tree: find_package(backplane CONFIG) includes this file.
set(BP__PLUGIN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(bp_add_plugin backend)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES;INCLUDES" ${ARGN})
  if(NOT backend MATCHES "^[a-z0-9_]+$")
    message(FATAL_ERROR "bp_add_plugin: backend name '${backend}' must match [a-z0-9_]+")
  endif()
  set(out_dir "${BP_PLUGIN_OUTPUT_DIR}")
  if(NOT out_dir)
    set(out_dir "${CMAKE_BINARY_DIR}/plugins")
  endif()
  set(sub_dir "${BP_PLUGIN_SUBDIR}")
  if(NOT sub_dir)
    if(NOT CMAKE_INSTALL_LIBDIR)
      include(GNUInstallDirs)
    endif()
    set(sub_dir "${CMAKE_INSTALL_LIBDIR}/backplane/plugins")
  endif()
  set(target bp_plugin_${backend})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_include_directories(${target} PRIVATE ${ARG_INCLUDES})
  target_link_libraries(${target} PRIVATE backplane::plugin_kit ${ARG_LIBRARIES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib"
    LIBRARY_OUTPUT_DIRECTORY "${out_dir}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  # Only the entry point is exported, whatever the sources mark default.
  target_link_options(${target} PRIVATE "-Wl,--exclude-libs,ALL" "-Wl,--no-undefined")
  if(CMAKE_NM)
    add_custom_command(TARGET ${target} POST_BUILD
      COMMAND ${CMAKE_COMMAND} -DNM=${CMAKE_NM} -DLIB=$<TARGET_FILE:${target}>
              -P "${BP__PLUGIN_CMAKE_DIR}/BackplaneCheckExports.cmake"
      VERBATIM)
  endif()
  set(BP_MANIFEST_BACKEND ${backend})
  set(BP_MANIFEST_LIBRARY "libbp_plugin_${backend}.so")
  configure_file("${BP__PLUGIN_CMAKE_DIR}/plugin_manifest.json.in" "${out_dir}/${backend}.json" @ONLY)
  install(TARGETS ${target} LIBRARY DESTINATION ${sub_dir})
  install(FILES "${out_dir}/${backend}.json" DESTINATION ${sub_dir})
  if(BP_BUILD_TESTS AND PROJECT_NAME STREQUAL "backplane")
    add_test(NAME plugin_exports_${backend}
      COMMAND ${PROJECT_SOURCE_DIR}/tests/check_plugin_exports.sh $<TARGET_FILE:${target}>)
    set_tests_properties(plugin_exports_${backend} PROPERTIES LABELS "backend=${backend}")
  endif()
endfunction()
