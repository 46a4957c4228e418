/* backplane core: plugin objects (borrowed handles owned by the context). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "loader/loader.h"

void bp__plugin_destroy(bp_plugin_t* plugin) {
  if (!plugin) return;
  /* Devices first (reverse order), then the instance, then the library:
   * every plugin call must happen before dlclose unmaps its code. */
  for (uint32_t i = plugin->device_count; i > 0; --i) bp__device_destroy(plugin->devices[i - 1]);
  free(plugin->devices);
  if (plugin->instance && plugin->core.instance_destroy)
    BP__CORE_CALL_VOID(plugin, instance_destroy, plugin->instance);
  bp__crash_forget_library(plugin);
  /* An abandoned instance_create still runs the library's code. */
  if (plugin->library && !plugin->abandoned) dlclose(plugin->library);
  free(plugin->name);
  free(plugin->path);
  free(plugin->version);
  free(plugin->vendor);
  free(plugin->reason);
  free(plugin);
}

BP_API bp_status_t bp_plugin_get_info(const bp_plugin_t* plugin, bp_plugin_info_t* out_info) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_plugin_get_info", plugin);
  BP__REQUIRE_ARG("bp_plugin_get_info", out_info);
  bp_plugin_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  info.state = plugin->state;
  info.name = plugin->name ? plugin->name : "";
  info.path = plugin->path ? plugin->path : "";
  info.version = plugin->version ? plugin->version : "";
  info.vendor = plugin->vendor ? plugin->vendor : "";
  info.reason_code = plugin->reason_code;
  info.reason = plugin->reason ? plugin->reason : "";
  info.abi_major = plugin->abi_major;
  info.abi_minor = plugin->abi_minor;
  info.device_count = plugin->device_count;
  info.comm_tier = plugin->has_comm ? plugin->comm.tier : (uint32_t)BP_COMM_TIER_HOST_STAGED;
  return bp__out_struct_write("bp_plugin_get_info", "bp_plugin_info_t", out_info, &info,
                              sizeof(info), BP_PLUGIN_INFO_V1_SIZE);
}

BP_API const bp_plugin_vtable_t* bp_plugin_vtable(const bp_plugin_t* plugin) {
  if (!plugin || plugin->state != BP_PLUGIN_LOADED) return NULL;
  return &plugin->vtable;
}

BP_API bp_status_t bp_plugin_device(const bp_plugin_t* plugin, uint32_t index,
                                    bp_device_t** out_device) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_plugin_device", plugin);
  BP__REQUIRE_ARG("bp_plugin_device", out_device);
  if (plugin->state != BP_PLUGIN_LOADED)
    return bp__error(plugin->reason_code, "plugin '%s' was skipped: %s", plugin->name,
                     plugin->reason ? plugin->reason : "");
  if (index >= plugin->device_count)
    return bp__error(BP_OUT_OF_RANGE, "bp_plugin_device: index %u out of range (%s has %u)", index,
                     plugin->name, plugin->device_count);
  *out_device = plugin->devices[index];
  return BP_OK;
}
