# Fails when docs/ops.md differs from what bp-opdoc generates now from the
# op table and the committed conformance summary. Regenerate with
# scripts/gen-docs.sh.
execute_process(COMMAND ${OPDOC} --summary ${SUMMARY} OUTPUT_VARIABLE generated RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bp-opdoc failed (${rc})")
endif()
file(READ ${DOC} committed)
string(FIND "${committed}" "${generated}" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "docs/ops.md is stale: run scripts/gen-docs.sh")
endif()
