/* backplane Vulkan plugin: elementwise programs.
 *
 * Every elementwise, comparison, cast and copy-like op (to_copy, copy,
 * clone, cat pieces, fill, arange) is a short program (built by
 * plugins/gpu_common's lowering, shared by every GPU plugin) run by the one
 * generic kernel (shaders/ew.comp); launch_ew_program runs programs the
 * graph compiler fuses. The launcher collapses the shared iteration space
 * (broadcast inputs get stride 0) and specializes the kernel on the program
 * when it has at most 6 instructions.
 */
#include <math.h>
#include <string.h>

#include "vk_ops_internal.h"

/* Opcodes the contiguous kernel takes: the cheap ones. Its code is the
 * program written out EW_VE (8) times, so the ops evaluated in double
 * (transcendentals, fmod, float floor division: arithmetic-bound anyway)
 * stay on the generic kernel to keep compile times down; ew.comp leaves
 * them out of the EW_VEC variant. */
static int ew_vec_opcode(uint32_t opc, uint32_t aux, uint32_t cdt) {
  switch (opc) {
    case BP_EW_LOAD_INPUT: case BP_EW_LOAD_CONST: case BP_EW_STORE: case BP_EW_CAST: case VK_EW_INDEX:
    case VK_EW_LEAKY: case VK_EW_BNOT: case VK_EW_LERP:
    case BP_OP_abs: case BP_OP_ceil: case BP_OP_floor: case BP_OP_neg: case BP_OP_relu: case BP_OP_round:
    case BP_OP_sign: case BP_OP_trunc: case BP_OP_reciprocal: case BP_OP_sqrt: case BP_OP_bitwise_not:
    case BP_OP_logical_not: case BP_OP_isinf: case BP_OP_isnan: case BP_OP_clamp: case BP_OP_clamp_tensor:
    case BP_OP_hardtanh: case BP_OP_add: case BP_OP_sub: case BP_OP_mul: case BP_OP_maximum:
    case BP_OP_minimum: case BP_OP_bitwise_and: case BP_OP_bitwise_or: case BP_OP_bitwise_xor:
    case BP_OP_logical_and: case BP_OP_logical_or: case BP_OP_logical_xor: case BP_OP_eq: case BP_OP_ne:
    case BP_OP_lt: case BP_OP_le: case BP_OP_gt: case BP_OP_ge: case BP_OP_where:
      return 1;
    case BP_OP_div: return aux != 2 || !bp_dtype_is_float(cdt); /* float floor division: generic */
    default: return 0;
  }
}

/* Register type (shader variant) for a compute dtype. */
static int ew_shader(uint32_t cdt) {
  switch (cdt) {
    case BP_DTYPE_F32: case BP_DTYPE_F16: case BP_DTYPE_BF16: return VK_SHADER_ew_f32;
    case BP_DTYPE_F64: return VK_SHADER_ew_f64;
    case BP_DTYPE_I64: return VK_SHADER_ew_i64;
    case BP_DTYPE_I8: case BP_DTYPE_U8: case BP_DTYPE_I16: case BP_DTYPE_I32: case BP_DTYPE_BOOL:
      return VK_SHADER_ew_i32;
    default: return -1;
  }
}

/* Byte extent [lo, hi) of a descriptor's elements relative to the buffer. */
static void desc_extent(const bp_tensor_desc_t* d, uint64_t* lo, uint64_t* hi) {
  int64_t mn = 0, mx = 0;
  for (uint32_t k = 0; k < d->rank; k++) {
    if (d->sizes[k] == 0) {
      *lo = *hi = d->byte_offset;
      return;
    }
    int64_t e = (d->sizes[k] - 1) * d->strides[k];
    if (e < 0) mn += e;
    else mx += e;
  }
  int64_t es = (int64_t)bp_dtype_size(d->dtype);
  int64_t l = (int64_t)d->byte_offset + mn * es, h = (int64_t)d->byte_offset + (mx + 1) * es;
  *lo = l < 0 ? 0 : (uint64_t)l;
  *hi = (uint64_t)h;
}

void vk_access_of(const bp_tensor_desc_t* d, int write, vk_access_t* a) {
  uint64_t lo, hi;
  desc_extent(d, &lo, &hi);
  a->buf = ((struct bpp_buffer_s*)d->buffer)->buf;
  a->off = lo;
  a->size = hi > lo ? hi - lo : 1;
  a->write = write;
}

/* What the core guarantees (a buffer, every element inside it: docs/ABI.md,
 * "Trust boundary") only a checked build looks at again; the alignment the
 * shaders' element addressing needs is this plugin's own rule. */
static bp_status_t check_core_guarantees(const bp_tensor_desc_t* d, const char* what) {
  char msg[VK_MSG_CAP];
  struct bpp_buffer_s* b = d->buffer;
  if (!b) return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s has no buffer", what);
  bp_status_t st = bp_plugin_check_desc(d, b->size, what, msg, sizeof msg);
  return st == BP_OK ? BP_OK : vk_error(st, "vulkan: %s", msg);
}

bp_status_t vk_check_desc(const bp_tensor_desc_t* d, const char* what) {
  BP_PLUGIN_DEBUG_CHECK(check_core_guarantees(d, what));
  uint32_t es = bp_dtype_size(d->dtype);
  if (es && d->byte_offset % es)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: byte offset %llu is not a multiple of the %s size",
                    what, (unsigned long long)d->byte_offset, bp_dtype_name(d->dtype));
  return BP_OK;
}

uint64_t vk_desc_addr(const bp_tensor_desc_t* d) {
  return ((struct bpp_buffer_s*)d->buffer)->addr + d->byte_offset;
}

/* Launches the program over the shape of its first output. */
bp_status_t vk_ew_launch(bpp_stream_t s, const vk_ew_t* p) {
  if (p->overflow) return vk_error(BP_INTERNAL, "vulkan: elementwise program exceeds the kernel's limits");
  int shader = ew_shader(p->cdt);
  if (shader < 0)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: no elementwise kernel for compute dtype %s", bp_dtype_name(p->cdt));
  /* The iteration space (broadcast strides, collapsed dims): gpu_common's. */
  bp_gpu_ew_space_t sp;
  bp_status_t sst = bp_gpu_ew_space(p, &sp);
  if (sst) return sst;
  int64_t numel = sp.numel;
  if (numel == 0) return BP_OK;
  if (numel > INT32_MAX)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: %lld elements exceed one elementwise dispatch", (long long)numel);
  uint32_t nops = sp.nops;
  const bp_tensor_desc_t* const* all = sp.operands;
  vk_access_t acc[VK_EW_MAX_OPERANDS];
  for (uint32_t k = 0; k < nops; k++) {
    bp_status_t st = vk_check_desc(all[k], k < p->nin ? "input" : "output");
    if (st) return st;
    vk_access_of(all[k], k >= p->nin, &acc[k]);
  }
  int nd = sp.rank, contig = sp.contiguous;
  const int64_t* sizes = sp.sizes;
  int64_t (*strides)[BP_MAX_RANK] = sp.strides;
  uint32_t meta[VK_EW_META_WORDS];
  memset(meta, 0, sizeof meta);
  meta[0] = p->ninstr;
  meta[1] = p->nin;
  meta[2] = p->nout;
  meta[3] = p->nconst;
  meta[4] = (uint32_t)nd;
  meta[5] = (uint32_t)numel;
  for (int d = 0; d < nd; d++) meta[8 + d] = (uint32_t)sizes[d];
  for (uint32_t k = 0; k < nops; k++) {
    uint32_t* w = &meta[16 + 20 * k];
    uint64_t a = vk_desc_addr(all[k]);
    w[0] = (uint32_t)a;
    w[1] = (uint32_t)(a >> 32);
    w[2] = all[k]->dtype;
    for (int d = 0; d < nd; d++) memcpy(&w[4 + 2 * d], &strides[k][d], 8);
  }
  for (uint32_t i = 0; i < p->ninstr; i++) {
    uint32_t* w = &meta[176 + 4 * i];
    w[0] = p->ins[i].opcode;
    w[1] = p->ins[i].dst | ((uint32_t)p->ins[i].a << 8) | ((uint32_t)p->ins[i].b << 16) | ((uint32_t)p->ins[i].c << 24);
    w[2] = p->ins[i].aux;
  }
  for (uint32_t j = 0; j < p->nconst; j++) memcpy(&meta[304 + 2 * j], &p->consts[j], 8);
  uint32_t spec[36];
  memset(spec, 0, sizeof spec);
  spec[0] = p->ninstr <= 6 ? p->ninstr : 0;
  spec[1] = (uint32_t)contig;
  spec[2] = p->cdt;
  spec[3] = contig ? 1u : 0u;
  for (uint32_t k = 0; k < nops; k++) spec[4 + k] = all[k]->dtype;
  if (spec[0])
    for (uint32_t i = 0; i < p->ninstr; i++) {
      spec[12 + 4 * i] = meta[176 + 4 * i];
      spec[13 + 4 * i] = meta[177 + 4 * i];
      spec[14 + 4 * i] = meta[178 + 4 * i];
    }
  /* The contiguous kernel: every operand dense (checked above), a program
   * short enough to specialize, only cheap opcodes, and every operand's
   * offset aligned for the descriptors and 16-byte accesses. */
  int vec = contig && spec[0] != 0 && vk_pipeline_has_push_descriptors(s->dev);
  for (uint32_t i = 0; i < p->ninstr && vec; i++) vec = ew_vec_opcode(p->ins[i].opcode, p->ins[i].aux, p->cdt);
  vk_bindings_t bind = {.nbufs = VK_MAX_PUSH_BUFFERS, .nviews = VK_MAX_PUSH_VIEWS};
  uint64_t align = s->dev->feat.min_ssbo_align > 16 ? s->dev->feat.min_ssbo_align : 16;
  for (uint32_t k = 0; k < nops && vec; k++) {
    uint64_t range = (uint64_t)numel * bp_dtype_size(all[k]->dtype);
    vec = all[k]->byte_offset % align == 0 && range <= s->dev->feat.max_ssbo_range;
    bind.bufs[k] = (VkDescriptorBufferInfo){((struct bpp_buffer_s*)all[k]->buffer)->buf, all[k]->byte_offset, range};
  }
  /* Inputs of 2 bytes and more are read through texel views of their whole
   * 8-element chunks; without a view for one of them the variant reads
   * every input from its storage buffer. */
  uint32_t texel = 1;
  for (uint32_t k = 0; k < VK_MAX_PUSH_VIEWS && vec; k++) {
    bind.views[k] = vk_pipeline_null_view(s->dev);
    uint64_t chunk_bytes = (uint64_t)(numel / 8) * 8 * (k < p->nin ? bp_dtype_size(all[k]->dtype) : 0);
    if (k < p->nin && bp_dtype_size(all[k]->dtype) >= 2 && chunk_bytes &&
        vk_buffer_texel_view((struct bpp_buffer_s*)all[k]->buffer, all[k]->byte_offset, chunk_bytes, &bind.views[k]))
      texel = 0;
  }
  VkPipeline vpipe = VK_NULL_HANDLE;
  int cold = 0; /* a specialized key not hot yet: the generic pipeline */
  if (vec) {
    /* Unused bindings alias operand 0: every declared binding is valid. */
    for (uint32_t k = nops; k < VK_MAX_PUSH_BUFFERS; k++) bind.bufs[k] = bind.bufs[0];
    uint32_t vspec[39];
    memcpy(vspec, spec, sizeof spec);
    vspec[1] = vspec[3] = 0; /* layout constants unused by the variant */
    vspec[36] = p->nin;
    vspec[37] = p->nout;
    vspec[38] = texel;
    bp_status_t vst = vk_pipeline_get_hot(s->dev, (uint32_t)shader + (VK_SHADER_ewv_f32 - VK_SHADER_ew_f32),
                                          vspec, 39, &vpipe);
    if (vst) return vst;
    cold = vpipe == VK_NULL_HANDLE;
    vec = !cold;
  }
  if (vec) {
    /* One 8-element chunk per invocation, 64 per group, groups in rows of
     * at most 65535 (numel < 2^31 keeps gy below 65535 too). */
    uint64_t chunks = (uint64_t)numel / 8, vgroups = (chunks + 63) / 64;
    if (vgroups == 0) vgroups = 1;
    uint64_t gx = vgroups < 65535 ? vgroups : 65535, gy = (vgroups + gx - 1) / gx;
    return vk_stream_dispatch_bufs(s, vpipe, meta, (304 + 2 * p->nconst) * 4, (uint32_t)numel, (uint32_t)gx,
                                   (uint32_t)gy, 1, acc, nops, &bind);
  }
  /* Specialized (constants for the program, dtypes and layout) once hot;
   * until then the generic pipeline reads them all from the metadata. */
  VkPipeline pipe = VK_NULL_HANDLE;
  bp_status_t st = cold ? BP_OK : vk_pipeline_get_hot(s->dev, (uint32_t)shader, spec, 36, &pipe);
  if (st) return st;
  if (!pipe) {
    uint32_t generic[36] = {[2] = p->cdt};
    st = vk_pipeline_get(s->dev, (uint32_t)shader, generic, 36, &pipe);
    if (st) return st;
  }
  uint64_t groups = ((uint64_t)numel + 255) / 256;
  uint32_t maxg = s->dev->feat.max_wg_count[0] ? s->dev->feat.max_wg_count[0] : 65535;
  if (groups > maxg) groups = maxg;
  if (groups > 65535) groups = 65535;
  uint32_t words = 304 + 2 * p->nconst;
  return vk_stream_dispatch(s, pipe, meta, words * 4, (uint32_t)numel, (uint32_t)groups, 1, 1, acc, nops);
}

/* Copies src (broadcast, cast) into dst. */
bp_status_t vk_ew_copy(bpp_stream_t s, const bp_tensor_desc_t* dst, const bp_tensor_desc_t* src) {
  vk_ew_t p;
  uint32_t cdt = src->dtype;
  /* Registers hold the source exactly: f16/bf16 in f32, narrow ints in i32. */
  vk_ew_init(&p, cdt);
  uint32_t i = vk_ew_input(&p, src);
  uint32_t o = vk_ew_output(&p, dst);
  vk_ew_store(&p, o, vk_ew_load_input(&p, i));
  return vk_ew_launch(s, &p);
}
