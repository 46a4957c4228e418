# Two builds of one synchronous host-memory plugin (fake_host_a, fake_host_b)
# for the runtime tests: two plugins of two devices each, no op slots.
foreach(fake_name fake_host_a fake_host_b)
  add_library(bp_${fake_name} MODULE ${CMAKE_CURRENT_LIST_DIR}/fake_host.c)
  target_include_directories(bp_${fake_name} PRIVATE ${PROJECT_SOURCE_DIR}/include)
  target_compile_definitions(bp_${fake_name} PRIVATE FAKE_HOST_NAME="${fake_name}")
  set_target_properties(bp_${fake_name} PROPERTIES
    PREFIX "lib"
    OUTPUT_NAME "bp_${fake_name}"
    LIBRARY_OUTPUT_DIRECTORY "${CMAKE_BINARY_DIR}/tests/fake_plugins"
    C_VISIBILITY_PRESET hidden)
  target_link_options(bp_${fake_name} PRIVATE "-Wl,--exclude-libs,ALL" "-Wl,--no-undefined")
  add_test(NAME plugin_exports_${fake_name}
    COMMAND ${PROJECT_SOURCE_DIR}/tests/check_plugin_exports.sh $<TARGET_FILE:bp_${fake_name}>)
  set_tests_properties(plugin_exports_${fake_name} PROPERTIES LABELS "core")
endforeach()
