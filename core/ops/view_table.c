/* backplane core: the view table (ops.def's BP_VIEW section) at run time.
 *
 * Each entry names the Core ATen overloads a core function serves and that
 * function, so a client (or a test) can check that every function the
 * table names exists. Static data; thread-safe. */
#include <string.h>

#include "ops/ops_internal.h"

typedef struct bp__view_row {
  const char* name;
  const char* aten;
  const char* function;
  const char* note;
} bp__view_row_t;

static const bp__view_row_t bp__views[] = {
#define BP_OP(...)
#define BP_VIEW(name, aten, function, note) {#name, aten, #function, note},
#include "backplane/ops.def"
#undef BP_VIEW
#undef BP_OP
};

#define BP__VIEW_COUNT ((uint32_t)(sizeof(bp__views) / sizeof(bp__views[0])))

uint32_t bp_view_count(void) { return BP__VIEW_COUNT; }

bp_status_t bp_view_get_info(uint32_t index, bp_view_info_t* out_info) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_view_get_info", out_info);
  if (index >= BP__VIEW_COUNT) {
    return bp__error(BP_OUT_OF_RANGE, "bp_view_get_info: index %u out of range (%u views)", index,
                     BP__VIEW_COUNT);
  }
  const bp__view_row_t* row = &bp__views[index];
  bp_view_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.index = index;
  info.name = row->name;
  info.aten = row->aten;
  info.function = row->function;
  info.note = row->note;
  return bp__out_struct_write("bp_view_get_info", "bp_view_info_t", out_info, &info, sizeof(info),
                              BP_VIEW_INFO_V1_SIZE);
}
