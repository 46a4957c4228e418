/* backplane MPI plugin: the exported entry point (kept out of the static
 * library bp_mpi_impl, whose symbols stay hidden). */
#include "bp_kit.h"
#include "mpi_internal.h"

static const bp_kit_plugin_info_t k_info = {
    .name = "mpi", .version = "1.0.0", .vendor = "backplane", .get_vtable = bp_mpi_plugin_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
