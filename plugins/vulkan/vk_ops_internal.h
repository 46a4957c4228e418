/* backplane Vulkan plugin: helpers shared by the op launchers. */
#ifndef BP_VK_OPS_INTERNAL_H_
#define BP_VK_OPS_INTERNAL_H_

#include "vk_internal.h"

#define VK_EW_MAX_INSTR 32
#define VK_EW_MAX_CONST 16
#define VK_EW_MAX_OPERANDS 8
#define VK_EW_MAX_INPUTS 6
#define VK_EW_MAX_REGS 16
#define VK_EW_META_WORDS (304 + 2 * VK_EW_MAX_CONST)

/* Internal opcodes of ew.comp beyond op ids (see the shader). */
enum {
  VK_EW_INDEX = 0x2000,
  VK_EW_ELU = 0x2001,
  VK_EW_SOFTPLUS = 0x2002,
  VK_EW_LEAKY = 0x2003,
  VK_EW_BNOT = 0x2004,
  VK_EW_LERP = 0x2005
};

/* An elementwise program under construction (not thread-safe; on stack). */
typedef struct vk_ew {
  uint32_t cdt; /* compute dtype */
  uint32_t ninstr, nin, nout, nconst, nregs;
  int overflow;
  bp_ew_instr_t ins[VK_EW_MAX_INSTR];
  union {
    double f;
    int64_t i;
  } consts[VK_EW_MAX_CONST];
  const bp_tensor_desc_t* in[VK_EW_MAX_OPERANDS];
  const bp_tensor_desc_t* out[VK_EW_MAX_OPERANDS];
} vk_ew_t;

VK_HIDDEN void vk_ew_init(vk_ew_t* p, uint32_t cdt);
VK_HIDDEN int vk_ew_float_ct(uint32_t cdt);
/* Operands by pointer: `d` must stay valid until vk_ew_launch. */
VK_HIDDEN uint32_t vk_ew_input(vk_ew_t* p, const bp_tensor_desc_t* d);
VK_HIDDEN uint32_t vk_ew_output(vk_ew_t* p, const bp_tensor_desc_t* d);
VK_HIDDEN uint8_t vk_ew_reg(vk_ew_t* p);
VK_HIDDEN void vk_ew_emit(vk_ew_t* p, uint32_t opc, uint8_t dst, uint8_t a, uint8_t b, uint8_t c, uint32_t aux);
VK_HIDDEN uint8_t vk_ew_const_f(vk_ew_t* p, double f);
VK_HIDDEN uint8_t vk_ew_const_i(vk_ew_t* p, int64_t i);
VK_HIDDEN uint8_t vk_ew_const_scalar(vk_ew_t* p, const bp_scalar_t* s, double dflt);
VK_HIDDEN uint8_t vk_ew_load_const(vk_ew_t* p, uint8_t konst);
VK_HIDDEN uint8_t vk_ew_load_input(vk_ew_t* p, uint32_t input);
VK_HIDDEN uint8_t vk_ew_op(vk_ew_t* p, uint32_t opc, uint8_t a, uint8_t b, uint8_t c, uint32_t aux);
VK_HIDDEN void vk_ew_store(vk_ew_t* p, uint32_t output, uint8_t reg);
VK_HIDDEN bp_status_t vk_ew_launch(bpp_stream_t s, vk_ew_t* p);
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
VK_HIDDEN bp_status_t vk_launch_matmul(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN bp_status_t vk_launch_index(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN bp_status_t vk_launch_conv_pool(bpp_stream_t s, const bp_op_call_t* call);
/* quantize, dequantize: integer and fp4 codes (vk_kernels.c) */
VK_HIDDEN bp_status_t vk_launch_quant(bpp_stream_t s, const bp_op_call_t* call);
/* sample (vk_sample.c). */
VK_HIDDEN bp_status_t vk_launch_sample(bpp_stream_t s, const bp_op_call_t* call);
VK_HIDDEN int vk_sample_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
VK_HIDDEN int vk_kernels_supported(struct bpp_device_s* dev, const bp_op_call_t* call, char* msg, size_t cap);
VK_HIDDEN int vk_kernels_implemented(uint32_t op);

/* Writes a 64-bit value into two metadata words. */
static inline void vk_meta64(uint32_t* w, uint64_t v) {
  w[0] = (uint32_t)v;
  w[1] = (uint32_t)(v >> 32);
}

#endif /* BP_VK_OPS_INTERNAL_H_ */
