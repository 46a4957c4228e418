/* The CUDA plugin's one exported symbol, its root table and the ops it
 * runs: mm, bmm, addmm and linear through cuBLASLt (cuda_blas.c). Every
 * other op is answered "not supported" with the reason. */
#include <stdio.h>

#include "cuda_blas.h"

static bp_status_t query_support(bpp_device_t device, const bp_op_call_t* call,
                                 bp_support_t* out) {
  if (!device || !call || !out)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: query_support: NULL");
  char why[256];
  uint32_t reason = cuda_gemm_support(device, call, why, sizeof why);
  return bp_kit_support_answer(out, reason, "%s", why);
}

static bp_status_t query_fusion(bpp_device_t device, bp_fusion_caps_t* out) {
  (void)device;
  if (!out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: query_fusion: NULL");
  bp_fusion_caps_t none = {.struct_size = sizeof none}; /* epilogues come with linear */
  bp_kit_copy_out(out, &none, sizeof none);
  return BP_OK;
}

static bp_status_t launch_gemm(bpp_stream_t s, const bp_op_call_t* call) {
  return cuda_gemm_launch(s, call);
}

static const bpp_op_launch_fn k_launch[BP_OP_COUNT] = {
    [BP_OP_mm] = launch_gemm, [BP_OP_bmm] = launch_gemm, [BP_OP_addmm] = launch_gemm,
    [BP_OP_linear] = launch_gemm};
static const bpp_op_table_t k_ops = {
    .struct_size = sizeof k_ops, .launch_count = BP_OP_COUNT, .launch = k_launch};
static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof k_caps, .query_support = query_support, .query_fusion = query_fusion};
static const bp_plugin_vtable_t k_vtable = {
    .struct_size = sizeof k_vtable, .core = &cuda_core_table, .ops = &k_ops, .caps = &k_caps};

static const bp_plugin_vtable_t* get_vtable(void) { return &k_vtable; }
static const bp_kit_plugin_info_t k_info = {
    .name = "cuda", .version = "0.1.0", .vendor = "backplane", .get_vtable = get_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
