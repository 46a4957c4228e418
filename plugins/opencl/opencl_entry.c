/* backplane OpenCL plugin: the one exported symbol. */
#include "ocl_internal.h"

static const bp_kit_plugin_info_t k_info = {
    .name = "opencl", .version = BP_OPENCL_PLUGIN_VERSION, .vendor = "backplane", .get_vtable = ocl_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
