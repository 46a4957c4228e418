/* backplane Vulkan plugin: the exported entry point (kept out of the static
 * library bp_vulkan_impl, whose symbols stay hidden). */
#include <string.h>

#include "vk_internal.h"

BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* req,
                                                 bp_negotiate_reply_t* reply) {
  if (!req || !reply || req->struct_size < BP_NEGOTIATE_REQUEST_V1_SIZE ||
      reply->struct_size < BP_NEGOTIATE_REPLY_V1_SIZE)
    return BP_INVALID_ARGUMENT;
  if (req->host && req->host->struct_size >= BP_HOST_SERVICES_V1_SIZE) vk_host = req->host;
  if (req->abi_major != BP_ABI_VERSION_MAJOR)
    return bp_plugin_report(vk_host, BP_FAILED_PRECONDITION,
                            "vulkan: ABI major %u not supported (plugin speaks %u.%u)", req->abi_major,
                            BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  uint32_t ours = BP_ABI_VERSION_MINOR, theirs = req->abi_minor;
  bp_negotiate_reply_t r = {
      .struct_size = BP_NEGOTIATE_REPLY_V1_SIZE,
      .abi_major = BP_ABI_VERSION_MAJOR,
      .abi_minor = (uint16_t)(theirs < ours ? theirs : ours),
      .name = "vulkan",
      .version = "0.1.0",
      .vendor = "backplane",
      .vtable = vk_plugin_vtable(),
  };
  memcpy(reply, &r, BP_NEGOTIATE_REPLY_V1_SIZE);
  return BP_OK;
}
