/* The CUDA plugin's one exported symbol, its root table and the ops it
 * runs: mm, bmm, addmm and linear through cuBLASLt (cuda_blas.c) where it
 * takes the call, everything else the shared GPU kernels lower
 * (cuda_kernels.c). Support answers come from the same code as launches. */
#include <pthread.h>
#include <stdio.h>

#include "cuda_blas.h"
#include "cuda_kernels.h"
#include "cuda_region.h"
#if BP_CUDA_NCCL
#include "cuda_nccl.h"
#endif

static int is_gemm(uint32_t op) {
  return op == BP_OP_mm || op == BP_OP_bmm || op == BP_OP_addmm || op == BP_OP_linear;
}

static bp_status_t query_support(bpp_device_t device, const bp_op_call_t* call,
                                 bp_support_t* out) {
  if (!device || !call || !out)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: query_support: NULL");
  char why[256], kwhy[256];
  uint32_t reason = cuda_gemm_support(device, call, why, sizeof why);
  if (reason != BP_SUPPORT_OK && cuda_kernels_support(device, call, kwhy, sizeof kwhy) == BP_SUPPORT_OK)
    reason = BP_SUPPORT_OK; /* the kernels take what cuBLASLt does not */
  else if (reason != BP_SUPPORT_OK && !is_gemm(call->op_id))
    return bp_kit_support_answer(out, cuda_kernels_support(device, call, why, sizeof why), "%s", why);
  return bp_kit_support_answer(out, reason, "%s", why);
}

/* Elementwise programs through the shared kernel (none without kernels);
 * matmul epilogues come with linear (cuBLASLt), not as fusion. */
static bp_status_t query_fusion(bpp_device_t device, bp_fusion_caps_t* out) {
  if (!device || !out) return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: query_fusion: NULL");
  return cuda_kernels_fusion(device, out);
}

static bp_status_t launch_ew_program(bpp_stream_t s, const bp_ew_program_t* program,
                                     uint32_t num_inputs, const bp_tensor_desc_t* const* inputs,
                                     uint32_t num_outputs, const bp_tensor_desc_t* const* outputs) {
  if (!s || !program || (num_inputs && !inputs) || !outputs)
    return bp_kit_error(BP_INVALID_ARGUMENT, "cuda: launch_ew_program: NULL argument");
  return cuda_kernels_launch_ew(s, program, num_inputs, inputs, num_outputs, outputs);
}

static bp_status_t launch(bpp_stream_t s, const bp_op_call_t* call) {
  char why[256];
  if (is_gemm(call->op_id) && cuda_gemm_support(s->dev, call, why, sizeof why) == BP_SUPPORT_OK)
    return cuda_gemm_launch(s, call);
  return cuda_kernels_launch(s, call);
}

/* Filled once, at the first negotiation: every op with a lowering. */
static bpp_op_launch_fn k_launch[BP_OP_COUNT];
static pthread_once_t k_launch_once = PTHREAD_ONCE_INIT;
static void fill_launch(void) {
  for (uint32_t op = 0; op < BP_OP_COUNT; ++op)
    if (is_gemm(op) || cuda_kernels_implemented(op)) k_launch[op] = launch;
}
static const bpp_op_table_t k_ops = {
    .struct_size = sizeof k_ops, .launch_count = BP_OP_COUNT, .launch = k_launch};
static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof k_caps, .query_support = query_support, .query_fusion = query_fusion,
    .launch_ew_program = launch_ew_program};
/* Without NCCL the vtable has no comm table: the core stages collectives
 * through host memory. */
static const bp_plugin_vtable_t k_vtable_staged = {
    .struct_size = sizeof k_vtable_staged, .core = &cuda_core_table, .ops = &k_ops,
    .caps = &k_caps, .exec = &cuda_exec_table};
#if BP_CUDA_NCCL
static const bp_plugin_vtable_t k_vtable = {
    .struct_size = sizeof k_vtable, .core = &cuda_core_table, .ops = &k_ops, .caps = &k_caps,
    .exec = &cuda_exec_table, .comm = &cuda_comm_table};
#endif

static const bp_plugin_vtable_t* get_vtable(void) {
  pthread_once(&k_launch_once, fill_launch);
#if BP_CUDA_NCCL
  const char* why = NULL;
  if (cuda_nccl(&why)) return &k_vtable;
  bp_kit_log(BP_LOG_INFO, "cuda: collectives are host-staged: %s", why);
#else
  bp_kit_log(BP_LOG_INFO, "cuda: collectives are host-staged: built without nccl.h");
#endif
  return &k_vtable_staged;
}
static const bp_kit_plugin_info_t k_info = {
    .name = "cuda", .version = CUDA_PLUGIN_VERSION, .vendor = "backplane", .get_vtable = get_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
