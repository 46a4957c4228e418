/* backplane Vulkan plugin: helpers shared by the op launchers. */
#ifndef BP_VK_OPS_INTERNAL_H_
#define BP_VK_OPS_INTERNAL_H_

#include "bp_gpu_ops.h"
#include "vk_internal.h"

/* Elementwise programs are built with plugins/gpu_common's builder (the
 * lowering of elementwise and copy-like ops is shared by every GPU plugin);
 * this plugin runs them with its own kernel (shaders/ew.comp), whose
 * limits and internal opcodes are gpu_common's. */
#define VK_EW_MAX_INSTR BP_GPU_EW_MAX_INSTR
#define VK_EW_MAX_CONST BP_GPU_EW_MAX_CONST
#define VK_EW_MAX_OPERANDS BP_GPU_EW_MAX_OPERANDS
#define VK_EW_MAX_REGS BP_GPU_EW_MAX_REGS
#define VK_EW_META_WORDS (304 + 2 * VK_EW_MAX_CONST)
#define VK_EW_INDEX BP_GPU_EW_INDEX
#define VK_EW_ELU BP_GPU_EW_ELU
#define VK_EW_SOFTPLUS BP_GPU_EW_SOFTPLUS
#define VK_EW_LEAKY BP_GPU_EW_LEAKY
#define VK_EW_BNOT BP_GPU_EW_BNOT
#define VK_EW_LERP BP_GPU_EW_LERP

typedef bp_gpu_ew_t vk_ew_t;
#define vk_ew_init bp_gpu_ew_init
#define vk_ew_input bp_gpu_ew_input
#define vk_ew_output bp_gpu_ew_output
#define vk_ew_emit bp_gpu_ew_emit
#define vk_ew_const_f bp_gpu_ew_const_f
#define vk_ew_const_i bp_gpu_ew_const_i
#define vk_ew_const_scalar bp_gpu_ew_const_scalar
#define vk_ew_load_const bp_gpu_ew_load_const
#define vk_ew_load_input bp_gpu_ew_load_input
#define vk_ew_op bp_gpu_ew_op
#define vk_ew_store bp_gpu_ew_store

VK_HIDDEN bp_status_t vk_ew_launch(bpp_stream_t s, const vk_ew_t* p);
VK_HIDDEN bp_status_t vk_ew_copy(bpp_stream_t s, const bp_tensor_desc_t* dst, const bp_tensor_desc_t* src);

/* Descriptor checks and addresses. */
VK_HIDDEN bp_status_t vk_check_desc(const bp_tensor_desc_t* d, const char* what);
VK_HIDDEN uint64_t vk_desc_addr(const bp_tensor_desc_t* d);
VK_HIDDEN void vk_access_of(const bp_tensor_desc_t* d, int write, vk_access_t* a);

/* Kernel families other than elementwise (vk_kernels.c): each returns
 * BP_OK after enqueueing. Support checks return 0 or a bp_support_reason
 * with the reason in msg. */
VK_HIDDEN bp_status_t vk_launch_reduce(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN bp_status_t vk_launch_norm(bpp_stream_t s, const bp_op_call_t* call); /* and the add_ forms */
VK_HIDDEN bp_status_t vk_launch_glu(bpp_stream_t s, const bp_op_call_t* call);   /* swiglu, geglu */
VK_HIDDEN bp_status_t vk_launch_swiglu_oai(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN bp_status_t vk_launch_softcap(bpp_stream_t s, const bp_op_call_t* call); /* logits_softcap */
VK_HIDDEN bp_status_t vk_launch_matmul(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN bp_status_t vk_launch_index(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN bp_status_t vk_launch_conv_pool(bpp_stream_t s, const bp_op_call_t* call);
/* quantize, dequantize: integer and fp4 codes (vk_kernels.c) */
VK_HIDDEN bp_status_t vk_launch_quant(bpp_stream_t s, const bp_op_call_t* call);
/* sample (vk_sample.c). */
VK_HIDDEN bp_status_t vk_launch_sample(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN int vk_sample_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
/* gather_logprobs (vk_sample.c, shaders/logprobs.comp): dense operands. */
VK_HIDDEN bp_status_t vk_launch_logprobs(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN int vk_logprobs_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
/* 1 when t is dense row-major (empty tensors count: nothing is read). */
static inline int vk_desc_dense(const bp_tensor_desc_t* t) {
  if (bp_desc_numel(t) == 0) return 1;
  int64_t want = 1;
  for (uint32_t d = t->rank; d-- > 0;) {
    if (t->sizes[d] != 1 && t->strides[d] != want) return 0;
    want *= t->sizes[d];
  }
  return 1;
}

/* Workgroups for n independent items: n, at most the device's limit (and
 * 65535); the kernels loop over the rest. */
static inline uint32_t vk_groups_for(struct bpp_device_s* d, uint64_t n) {
  uint32_t maxg = d->feat.max_wg_count[0] ? d->feat.max_wg_count[0] : 65535;
  if (maxg > 65535) maxg = 65535;
  return n > maxg ? maxg : (uint32_t)n;
}

/* A float dtype's machine epsilon (the norms' default eps). */
static inline double vk_dtype_eps(uint32_t dt) {
  switch (dt) {
    case BP_DTYPE_F64: return 0x1p-52;
    case BP_DTYPE_F16: return 0x1p-10;
    case BP_DTYPE_BF16: return 0x1p-7;
    default: return 0x1p-23;
  }
}

/* Gets the pipeline of (shader, spec[0..nspec)) and dispatches `groups`
 * workgroups with the metadata, the operands' ranges tracked: reads[] are
 * read, writes[] written (NULL entries skipped; 16 in all at most). */
VK_HIDDEN bp_status_t vk_dispatch_operands(bpp_stream_t s, uint32_t shader, const uint32_t* spec, uint32_t nspec,
                                           const void* meta, size_t meta_bytes, uint32_t groups,
                                           const bp_tensor_desc_t* const* reads, uint32_t nreads,
                                           const bp_tensor_desc_t* const* writes, uint32_t nwrites);

/* The fused and group quantizations (vk_norm_quant.c,
 * shaders/norm_quant.comp): dense operands. */
VK_HIDDEN int vk_norm_quant_op(uint32_t op);
VK_HIDDEN int vk_norm_quant_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
VK_HIDDEN bp_status_t vk_launch_norm_quant(bpp_stream_t s, const bp_op_call_t* call);

/* rotary_embedding_pos (vk_rope.c, shaders/rope.comp): dense operands. */
VK_HIDDEN int vk_rope_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
VK_HIDDEN bp_status_t vk_launch_rope(bpp_stream_t s, const bp_op_call_t* call);

/* concat_and_cache_mla, gather_cache, compute_slot_mapping (vk_paged.c,
 * shaders/paged.comp): dense operands. */
VK_HIDDEN int vk_paged_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
VK_HIDDEN bp_status_t vk_launch_paged(bpp_stream_t s, const bp_op_call_t* call);

/* moe_align_block_size (vk_moe.c, shaders/moe_align.comp): dense operands. */
VK_HIDDEN int vk_moe_align_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
VK_HIDDEN bp_status_t vk_launch_moe_align(bpp_stream_t s, const bp_op_call_t* call);
/* grouped_topk (vk_moe.c, shaders/grouped_topk.comp): dense operands. */
VK_HIDDEN int vk_grouped_topk_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
VK_HIDDEN bp_status_t vk_launch_grouped_topk(bpp_stream_t s, const bp_op_call_t* call);

/* repetition_penalty (vk_sample.c, shaders/penalty.comp): dense operands. */
VK_HIDDEN bp_status_t vk_launch_penalty(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN int vk_kernels_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
VK_HIDDEN int vk_kernels_implemented(uint32_t op);

/* Writes a 64-bit value into two metadata words. */
static inline void vk_meta64(uint32_t* w, uint64_t v) {
  w[0] = (uint32_t)v;
  w[1] = (uint32_t)(v >> 32);
}

#endif /* BP_VK_OPS_INTERNAL_H_ */
