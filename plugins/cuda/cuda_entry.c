/* The CUDA plugin's one exported symbol and its root table. */
#include "cuda_internal.h"

static bp_status_t query_support(bpp_device_t device, const bp_op_call_t* call,
                                 bp_support_t* out) {
  (void)device;
  if (!call || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: query_support: NULL");
  return bp_kit_support_answer(out, BP_SUPPORT_OP, "cuda: %s is not implemented yet",
                               bp_kit_op_name(call->op_id));
}

static bp_status_t query_fusion(bpp_device_t device, bp_fusion_caps_t* out) {
  (void)device;
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: query_fusion: NULL");
  bp_fusion_caps_t none = {.struct_size = sizeof none};
  bp_kit_copy_out(out, &none, sizeof none);
  return BP_OK;
}

static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof k_caps, .query_support = query_support, .query_fusion = query_fusion};
static const bp_plugin_vtable_t k_vtable = {
    .struct_size = sizeof k_vtable, .core = &cuda_core_table, .caps = &k_caps};

static const bp_plugin_vtable_t* get_vtable(void) { return &k_vtable; }
static const bp_kit_plugin_info_t k_info = {
    .name = "cuda", .version = "0.1.0", .vendor = "backplane", .get_vtable = get_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
