/* backplane Vulkan plugin: the exported entry point (kept out of the static
 * library bp_vulkan_impl, whose symbols stay hidden). */
#include "vk_internal.h"

static const bp_kit_plugin_info_t k_info = {
    .name = "vulkan", .version = VK_PLUGIN_VERSION, .vendor = "backplane", .get_vtable = vk_plugin_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
