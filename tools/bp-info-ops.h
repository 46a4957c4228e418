/* bp-info --ops (bp-info-ops.c). */
#ifndef BP_TOOLS_BP_INFO_OPS_H_
#define BP_TOOLS_BP_INFO_OPS_H_

#include <cjson/cJSON.h>

#include "backplane/backplane.h"

/* {"ops": [{"id", "name", "category", "aten", "supported": {device: bool},
 * "dtypes": {device: [labels]}, "reasons": {device: text}}]} over the
 * devices of the loaded plugins (only `only`'s when not NULL). */
cJSON* bp_info_ops_json(bp_context_t* ctx, const bp_plugin_t* only);
/* The same as a table. */
void bp_info_ops_print(bp_context_t* ctx, const bp_plugin_t* only);

#endif /* BP_TOOLS_BP_INFO_OPS_H_ */
