/* backplane Vulkan plugin: the exported entry point (kept out of the static
 * library bp_vulkan_impl, whose symbols stay hidden). */
#include "vk_internal.h"

static const bp_kit_plugin_info_t k_info = {
    .name = "vulkan", .version = "0.1.0", .vendor = "backplane", .get_vtable = vk_plugin_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
