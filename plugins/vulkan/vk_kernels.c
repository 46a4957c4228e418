/* backplane Vulkan plugin: launchers of the non-elementwise kernel
 * families: reductions, softmax and norms, matmul, gather-like indexing,
 * convolution and pooling. Each writes the kernel's metadata (layouts in
 * the shaders' headers) and dispatches through vk_stream_dispatch.
 */
#include <math.h>
#include <string.h>

#include "vk_ops_internal.h"

static int dev_dtype(struct bpp_device_s* d, uint32_t dt) {
  return dt < BP_DTYPE_SLOTS && (vk_compute_dtype_mask(d) & BP_DTYPE_BIT(dt));
}

static int all_dtypes_ok(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype == BP_DTYPE_INVALID) continue;
    if (!dev_dtype(d, t->dtype)) {
      bp_plugin_format(msg, cap, 0, "%s is not supported on this device", bp_dtype_name(t->dtype));
      return 0;
    }
  }
  return 1;
}

bp_status_t vk_dispatch_operands(bpp_stream_t s, uint32_t shader, const uint32_t* spec, uint32_t nspec,
                                 const void* meta, size_t meta_bytes, uint32_t groups,
                                 const bp_tensor_desc_t* const* reads, uint32_t nreads,
                                 const bp_tensor_desc_t* const* writes, uint32_t nwrites) {
  vk_access_t acc[16];
  uint32_t na = 0;
  if (nreads + nwrites > 16) return vk_error(BP_INTERNAL, "vulkan: dispatch of more than 16 operands");
  for (uint32_t k = 0; k < nreads + nwrites; k++) {
    const bp_tensor_desc_t* t = k < nreads ? reads[k] : writes[k - nreads];
    if (t) vk_access_of(t, k >= nreads, &acc[na++]);
  }
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, shader, spec, nspec, &pipe);
  if (st) return st;
  return vk_stream_dispatch(s, pipe, meta, meta_bytes, 0, groups, 1, 1, acc, na);
}

static void put_i64(uint32_t* w, int64_t v) { memcpy(w, &v, 8); }
static void put_f64(uint32_t* w, double v) { memcpy(w, &v, 8); }

/* ======================================================================== */
/* Reductions                                                               */
/* ======================================================================== */
static int reduce_code(uint32_t op) {
  switch (op) {
    case BP_OP_sum: return 0;
    case BP_OP_mean: return 1;
    case BP_OP_prod: return 2;
    case BP_OP_amax: return 3;
    case BP_OP_amin: return 4;
    case BP_OP_any: return 5;
    case BP_OP_argmax: return 6;
    case BP_OP_argmin: return 7;
    case BP_OP_logsumexp: return 8;
    case BP_OP_max_dim: return 9;
    case BP_OP_min_dim: return 10;
    default: return -1;
  }
}

/* Splits the input's dims into kept and reduced ones (mask bit d set =
 * reduced). */
static uint32_t reduce_mask(const bp_tensor_desc_t* in, const bp_reduce_attrs_t* a) {
  uint32_t mask = 0;
  if (!a || (a->flags & BP_REDUCE_ALL_DIMS) || a->num_dims == 0) return (1u << in->rank) - 1u;
  for (int32_t i = 0; i < a->num_dims && i < BP_MAX_RANK; i++) {
    int32_t d = a->dims[i] < 0 ? a->dims[i] + (int32_t)in->rank : a->dims[i];
    if (d >= 0 && d < (int32_t)in->rank) mask |= 1u << d;
  }
  return mask;
}

bp_status_t vk_launch_reduce(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* out = call->outputs[0];
  const bp_reduce_attrs_t* a = call->attrs;
  uint32_t mask = reduce_mask(in, a);
  int keep = a && (a->flags & BP_REDUCE_KEEPDIM);
  uint32_t meta[94];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(in));
  meta[2] = in->dtype;
  meta[3] = out->dtype;
  vk_meta64(&meta[4], vk_desc_addr(out));
  uint32_t kr = 0, rr = 0, od = 0;
  uint64_t nout = 1, nred = 1;
  for (uint32_t d = 0; d < in->rank; d++) {
    if (mask & (1u << d)) {
      if (keep) od++;
      if (in->sizes[d] == 1) continue;
      meta[52 + rr] = (uint32_t)in->sizes[d];
      put_i64(&meta[60 + 2 * rr], in->strides[d]);
      nred *= (uint64_t)in->sizes[d];
      rr++;
    } else {
      int64_t ostride = od < out->rank ? out->strides[od] : 0;
      od++;
      if (in->sizes[d] == 1) continue;
      meta[12 + kr] = (uint32_t)in->sizes[d];
      put_i64(&meta[20 + 2 * kr], in->strides[d]);
      put_i64(&meta[36 + 2 * kr], ostride);
      if (call->num_outputs > 1) {
        const bp_tensor_desc_t* ix = call->outputs[1];
        put_i64(&meta[78 + 2 * kr], od - 1 < ix->rank ? ix->strides[od - 1] : 0);
      }
      nout *= (uint64_t)in->sizes[d];
      kr++;
    }
  }
  if (nout == 0) return BP_OK;
  if (nout > UINT32_MAX || nred > UINT32_MAX)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: reduction too large for one dispatch");
  meta[6] = (uint32_t)nout;
  meta[7] = (uint32_t)nred;
  meta[8] = kr;
  meta[9] = rr;
  int code = reduce_code(call->op_id);
  uint32_t cd = call->compute_dtype;
  if (!bp_dtype_is_valid(cd)) cd = in->dtype;
  int fl = bp_dtype_is_float(cd) || call->op_id == BP_OP_mean || code == 8;
  if (code == 3 || code == 4 || code == 5 || code == 6 || code == 7 || code == 9 || code == 10)
    fl = bp_dtype_is_float(in->dtype);
  if (code >= 9) vk_meta64(&meta[76], vk_desc_addr(call->outputs[1]));
  uint32_t spec[3] = {(uint32_t)code, in->dtype, out->dtype};
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, fl ? VK_SHADER_reduce_f64 : VK_SHADER_reduce_i64, spec, 3, &pipe);
  if (st) return st;
  vk_access_t acc[3];
  vk_access_of(in, 0, &acc[0]);
  vk_access_of(out, 1, &acc[1]);
  if (code >= 9) vk_access_of(call->outputs[1], 1, &acc[2]);
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, vk_groups_for(s->dev, nout), 1, 1, acc, code >= 9 ? 3 : 2);
}

static int reduce_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  const bp_tensor_desc_t* in = call->inputs[0];
  uint32_t o = call->outputs[0]->dtype;
  if (call->op_id == BP_OP_mean && !bp_dtype_is_float(o)) {
    bp_plugin_format(msg, cap, 0, "mean: output %s is not floating", bp_dtype_name(o));
    return BP_SUPPORT_DTYPE;
  }
  if (call->op_id == BP_OP_logsumexp && !bp_dtype_is_float(o)) {
    bp_plugin_format(msg, cap, 0, "logsumexp: output %s is not floating", bp_dtype_name(o));
    return BP_SUPPORT_DTYPE;
  }
  if ((call->op_id == BP_OP_max_dim || call->op_id == BP_OP_min_dim) &&
      (call->num_outputs < 2 || call->outputs[1]->dtype != BP_DTYPE_I64 || o != in->dtype)) {
    bp_plugin_format(msg, cap, 0, "values must keep the input dtype and indices be i64");
    return BP_SUPPORT_DTYPE;
  }
  if ((call->op_id == BP_OP_argmax || call->op_id == BP_OP_argmin) && o != BP_DTYPE_I64) {
    bp_plugin_format(msg, cap, 0, "index output must be i64");
    return BP_SUPPORT_DTYPE;
  }
  (void)in;
  (void)d;
  return 0;
}

/* ======================================================================== */
/* Matmul                                                                   */
/* ======================================================================== */
static int matmul_shader(uint32_t dt) {
  switch (dt) {
    case BP_DTYPE_F32: case BP_DTYPE_F16: case BP_DTYPE_BF16: return VK_SHADER_matmul_f32;
    case BP_DTYPE_F64: return VK_SHADER_matmul_f64;
    case BP_DTYPE_I8: case BP_DTYPE_U8: case BP_DTYPE_I16: case BP_DTYPE_I32: case BP_DTYPE_I64:
      return VK_SHADER_matmul_i64;
    default: return -1;
  }
}

static double scalar_f(const bp_scalar_t* s, double dflt) {
  if (!s || s->kind == BP_SCALAR_NONE) return dflt;
  return s->kind == BP_SCALAR_FLOAT ? s->v.f : s->kind == BP_SCALAR_BOOL ? (double)s->v.b : (double)s->v.i;
}
static int64_t scalar_i(const bp_scalar_t* s, int64_t dflt) {
  if (!s || s->kind == BP_SCALAR_NONE) return dflt;
  return s->kind == BP_SCALAR_FLOAT ? (int64_t)s->v.f : s->kind == BP_SCALAR_BOOL ? (int64_t)s->v.b : s->v.i;
}

/* ---- the f32 kernels of CPU devices (matmul.comp's MM_VEC, MM_PANEL) ------ */
/* MM_VEC: one 32 x 16 block of C per invocation (MM_RB x 4 MM_CB), 8
 * invocations per workgroup. */
#define MMV_ROWS 32u
#define MMV_COLS 16u
#define MMV_LANES 8u
/* MM_PANEL: 16 columns and MMP_ROWS rows per workgroup, k in chunks of
 * MMP_KC per dispatch (MMP_KC x 64 bytes of shared memory). It takes
 * products with M >= MMP_ROWS (at most 1/8 of the last workgroup's rows
 * idle), N >= 256 and K >= 2 MMP_KC, where it measured faster than
 * MM_VEC; on smaller ones it did not (each chunk reads and writes C), and
 * its pipelines take longer to build. */
#define MMP_KC 512u
#define MMP_ROWS 1024u
/* How a kernel reads one operand X [batch, rows, cols]: through a texel
 * view of X itself (`in_place`, when X is dense row-major with cols % 4 ==
 * 0), or of its dense copy in the workspace, zero-padded to rows_out rows
 * of cols4 * 4 columns (`view`). */
typedef struct mm_operand {
  const bp_tensor_desc_t* t;
  uint64_t rows, cols, cols4, rows_out;
  int packed;
  VkBufferView in_place, view;
} mm_operand_t;

/* Reads X in place when it is dense row-major with cols % 4 == 0 and gets
 * a texel view, unless `pack` asks for a copy anyway; otherwise marks it
 * for packing. */
static void mm_operand_init(mm_operand_t* o, const bp_tensor_desc_t* X, int batched, int64_t batch, uint64_t rows_out,
                            int may_in_place, int pack) {
  uint32_t ar = batched ? 1 : 0;
  o->t = X;
  o->rows_out = rows_out;
  o->rows = (uint64_t)X->sizes[ar];
  o->cols = (uint64_t)X->sizes[ar + 1];
  o->cols4 = (o->cols + 3) / 4;
  o->packed = 1;
  o->in_place = o->view = VK_NULL_HANDLE;
  if (!may_in_place || o->cols % 4 || X->strides[ar + 1] != 1 ||
      (o->rows > 1 && (uint64_t)X->strides[ar] != o->cols) ||
      (batched && batch > 1 && (uint64_t)X->strides[0] != o->rows * o->cols))
    return;
  if (vk_buffer_texel_view(X->buffer, X->byte_offset, (uint64_t)batch * o->rows * o->cols * 4, &o->in_place))
    o->in_place = VK_NULL_HANDLE;
  else if (!pack)
    o->packed = 0, o->view = o->in_place;
}

/* A texel view of X's storage when X is a transposed view of dense
 * row-major storage ([C, R] per batch) with R % 4 == 0 and no row padding
 * asked: matmul_pack.comp then reads 4 x 4 blocks. */
static int transposed_texel_view(const mm_operand_t* o, int batched, int64_t batch, VkBufferView* out) {
  const bp_tensor_desc_t* X = o->t;
  uint32_t ar = batched ? 1 : 0;
  if (o->rows % 4 || o->rows_out != o->rows || X->strides[ar] != 1 ||
      (o->cols > 1 && (uint64_t)X->strides[ar + 1] != o->rows) ||
      (batched && batch > 1 && (uint64_t)X->strides[0] != o->rows * o->cols))
    return 0;
  uint64_t bytes = (uint64_t)batch * o->rows * o->cols * 4;
  return bytes / 4 <= INT32_MAX && !vk_buffer_texel_view(X->buffer, X->byte_offset, bytes, out);
}

/* Copies X into its packed form at [off, off + bytes) of the workspace:
 * dense row-major, or with rows interleaved by 8 (MM_PANEL's A). With
 * record 0 it only gets its pipeline (see matmul_cpu). */
static bp_status_t matmul_pack(bpp_stream_t s, const mm_operand_t* o, int batched, int64_t batch, int interleave,
                               struct bpp_buffer_s* ws, uint64_t off, uint64_t bytes, int record) {
  const bp_tensor_desc_t* X = o->t;
  uint32_t ar = batched ? 1 : 0;
  uint32_t meta[18];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(X));
  meta[8] = (uint32_t)o->rows;
  meta[9] = (uint32_t)o->cols;
  meta[10] = (uint32_t)o->cols4;
  meta[11] = (uint32_t)o->rows_out;
  put_i64(&meta[12], batched ? X->strides[0] : 0);
  put_i64(&meta[14], X->strides[ar]);
  put_i64(&meta[16], X->strides[ar + 1]);
  vk_bindings_t bind = {.nbufs = VK_MAX_PUSH_BUFFERS, .nviews = VK_MAX_PUSH_VIEWS};
  /* matmul_pack.comp's source modes: 2 row-major texels, 1 transposed
   * 4 x 4 texel blocks, 0 element by element. */
  uint32_t spec[2] = {0, interleave ? 1u : 0u};
  if (o->in_place) {
    spec[0] = 2;
    bind.views[0] = o->in_place;
  } else if (transposed_texel_view(o, batched, batch, &bind.views[0])) {
    spec[0] = 1;
  }
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_matmul_pack, spec, 2, &pipe);
  if (st != BP_OK || !record) return st;
  vk_access_t acc[2];
  vk_access_of(X, 0, &acc[0]);
  acc[1] = (vk_access_t){ws->buf, off, bytes, 1};
  for (int k = 0; k < VK_MAX_PUSH_BUFFERS; k++) bind.bufs[k] = (VkDescriptorBufferInfo){ws->buf, off, bytes};
  for (int k = spec[0] ? 1 : 0; k < VK_MAX_PUSH_VIEWS; k++) bind.views[k] = vk_pipeline_null_view(s->dev);
  /* Rows (of 4 when transposed) are walked with a stride by up to 64
   * workgroups (matmul_pack.comp). */
  uint64_t walked = spec[0] == 1 ? o->rows_out / 4 : o->rows_out;
  uint32_t gy = walked < 64 ? (uint32_t)walked : 64;
  return vk_stream_dispatch_bufs(s, pipe, meta, sizeof meta, 0, (uint32_t)((o->cols4 + 63) / 64), gy,
                                 (uint32_t)batch, acc, 2, &bind);
}

/* What the CPU kernels' stores apply of addmm's epilogue (matmul.comp's
 * specialization constant 0): 0 nothing, 1 alpha, 2 alpha and beta times a
 * dense f32 bias row of N, read through bias_view. */
typedef struct mm_epilogue {
  uint32_t mode;
  float alpha, beta;
  const bp_tensor_desc_t* bias;
  VkBufferView bias_view;
} mm_epilogue_t;

/* One product for the CPU kernels: operands, sizes and what each dispatch
 * binds and touches. */
typedef struct mm_job {
  const bp_tensor_desc_t *A, *B, *C;
  const mm_epilogue_t* ep;
  uint64_t M, N, K, n4, k4, batch;
  mm_operand_t a, b;
  struct bpp_buffer_s* ws;
  uint64_t half; /* bytes of each half of the workspace */
} mm_job_t;

static void mm_job_bindings(bpp_stream_t s, const mm_job_t* j, vk_bindings_t* bind, vk_access_t* acc, uint32_t* n) {
  uint64_t c_bytes = j->batch * j->M * j->N * 4;
  *bind = (vk_bindings_t){.nbufs = VK_MAX_PUSH_BUFFERS, .nviews = VK_MAX_PUSH_VIEWS};
  for (int k = 0; k < VK_MAX_PUSH_BUFFERS; k++)
    bind->bufs[k] = (VkDescriptorBufferInfo){((struct bpp_buffer_s*)j->C->buffer)->buf, j->C->byte_offset, c_bytes};
  bind->views[0] = j->a.view;
  bind->views[1] = j->b.view;
  for (int k = 2; k < VK_MAX_PUSH_VIEWS; k++) bind->views[k] = vk_pipeline_null_view(s->dev);
  if (j->ep->mode == 2) bind->views[2] = j->ep->bias_view;
  *n = 0;
  vk_access_of(j->A, 0, &acc[(*n)++]);
  vk_access_of(j->B, 0, &acc[(*n)++]);
  if (j->ep->mode == 2) vk_access_of(j->ep->bias, 0, &acc[(*n)++]);
  vk_access_of(j->C, 1, &acc[(*n)++]);
  if (j->ws) acc[(*n)++] = (vk_access_t){j->ws->buf, 0, 2 * j->half, 0};
}

/* The metadata both CPU kernels read: 8 M, 9 N', 10 K', 14 N, 16 alpha,
 * 17 beta; MM_PANEL's own words are set by its launcher. */
static void mm_job_meta(const mm_job_t* j, uint32_t meta[18]) {
  memset(meta, 0, 18 * sizeof *meta);
  meta[8] = (uint32_t)j->M;
  meta[9] = (uint32_t)(4 * j->n4);
  meta[10] = (uint32_t)(4 * j->k4);
  meta[14] = (uint32_t)j->N;
  memcpy(&meta[16], &j->ep->alpha, 4);
  memcpy(&meta[17], &j->ep->beta, 4);
}

static bp_status_t matmul_vec_dispatch(bpp_stream_t s, const mm_job_t* j, int record) {
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_matmulv_f32, &j->ep->mode, 1, &pipe);
  if (st != BP_OK || !record) return st;
  uint32_t meta[18], n;
  mm_job_meta(j, meta);
  vk_bindings_t bind;
  vk_access_t acc[5];
  mm_job_bindings(s, j, &bind, acc, &n);
  uint64_t blocks = ((j->M + MMV_ROWS - 1) / MMV_ROWS) * ((4 * j->n4 + MMV_COLS - 1) / MMV_COLS);
  return vk_stream_dispatch_bufs(s, pipe, meta, sizeof meta, 0, (uint32_t)((blocks + MMV_LANES - 1) / MMV_LANES),
                                 (uint32_t)j->batch, 1, acc, n, &bind);
}

/* MM_PANEL: one dispatch per chunk of MMP_KC values of k (the last one
 * shorter, its own pipeline), each adding to the C the previous stored. */
static bp_status_t matmul_panel_dispatch(bpp_stream_t s, const mm_job_t* j, int record) {
  uint32_t kp = (uint32_t)(4 * j->k4);
  for (uint32_t k0 = 0, kc; k0 < kp; k0 += kc) {
    kc = kp - k0 < MMP_KC ? kp - k0 : MMP_KC;
    int last = k0 + kc == kp;
    const uint32_t spec[3] = {last ? j->ep->mode : 0u, kc, MMP_ROWS};
    VkPipeline pipe;
    bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_matmulp_f32, spec, 3, &pipe);
    if (st != BP_OK) return st;
    if (!record) continue;
    uint32_t meta[18], n;
    mm_job_meta(j, meta);
    meta[11] = k0;
    meta[12] = (k0 == 0 ? 1u : 0u) | (last ? 2u : 0u);
    meta[13] = (uint32_t)(j->a.rows_out / 8);
    vk_bindings_t bind;
    vk_access_t acc[5];
    mm_job_bindings(s, j, &bind, acc, &n);
    if ((st = vk_stream_dispatch_bufs(s, pipe, meta, sizeof meta, 0, (uint32_t)((j->M + MMP_ROWS - 1) / MMP_ROWS),
                                      (uint32_t)((j->n4 + 3) / 4), (uint32_t)j->batch, acc, n, &bind)) != BP_OK)
      return st;
  }
  return BP_OK;
}

/* Whether MM_PANEL takes this product on this device. */
static int matmul_panel_fits(const vk_features_t* f, uint64_t M, uint64_t N, uint64_t K) {
  uint64_t idle = (M + MMP_ROWS - 1) / MMP_ROWS * MMP_ROWS - M;
  uint32_t max_gy = f->max_wg_count[1] ? f->max_wg_count[1] : 65535; /* workgroups y: 16 columns each */
  return M >= MMP_ROWS && idle * 8 <= M && N >= 256 && (N + 15) / 16 <= max_gy && K >= 2 * MMP_KC &&
         f->max_shared >= MMP_KC * 64 &&
         f->max_wg_invocations >= MMP_ROWS && f->max_wg_size[0] >= MMP_ROWS;
}

/* C = A @ B by a kernel for CPU devices (their blocks suit SIMD lanes of
 * one thread, not GPU threads) with push descriptors: f32 A and B of any
 * strides, dense row-major C at an aligned offset, addmm's alpha and bias
 * row as `ep` says. The panel kernel takes large products
 * (matmul_panel_fits), the register-blocked one the rest. Operands a
 * kernel cannot read in place are packed into the stream's workspace
 * first. BP_UNIMPLEMENTED, having recorded nothing, when neither applies
 * (the caller takes the tiled kernel). */
static bp_status_t matmul_cpu(bpp_stream_t s, const bp_tensor_desc_t* A, const bp_tensor_desc_t* B,
                              const bp_tensor_desc_t* C, const mm_epilogue_t* ep, int64_t M_, int64_t K_, int64_t N_,
                              int64_t batch, int batched) {
  const vk_features_t* f = &s->dev->feat;
  if (!f->cpu || !vk_pipeline_has_push_descriptors(s->dev)) return BP_UNIMPLEMENTED;
  if (A->dtype != BP_DTYPE_F32 || B->dtype != BP_DTYPE_F32 || C->dtype != BP_DTYPE_F32) return BP_UNIMPLEMENTED;
  uint32_t ar = batched ? 1 : 0;
  if (C->strides[ar + 1] != 1 || (M_ > 1 && C->strides[ar] != N_) || (batched && batch > 1 && C->strides[0] != M_ * N_))
    return BP_UNIMPLEMENTED;
  mm_job_t j = {A, B, C, ep, (uint64_t)M_, (uint64_t)N_, (uint64_t)K_, ((uint64_t)N_ + 3) / 4, ((uint64_t)K_ + 3) / 4,
                (uint64_t)batch, {0}, {0}, NULL, 0};
  int panel = matmul_panel_fits(f, j.M, j.N, j.K);
  uint64_t align = f->min_ssbo_align > 16 ? f->min_ssbo_align : 16;
  uint64_t c_elems = j.batch * j.M * j.N;
  uint64_t m_out = panel ? (j.M + 7) / 8 * 8 : j.M; /* the panel kernel's A: rows interleaved by 8 */
  uint64_t a_texels = j.batch * m_out * j.k4, b_texels = j.batch * 4 * j.k4 * j.n4;
  uint64_t blocks = ((j.M + MMV_ROWS - 1) / MMV_ROWS) * ((4 * j.n4 + MMV_COLS - 1) / MMV_COLS);
  if (C->byte_offset % align || c_elems > INT32_MAX || c_elems * 4 > f->max_ssbo_range || j.k4 == 0 ||
      a_texels > INT32_MAX || b_texels > INT32_MAX || blocks > 65535ull * MMV_LANES || batch > 65535 ||
      j.k4 > 65535ull * 64 || j.n4 > 65535ull * 64) /* the packs' rows of 64 texels per workgroup */
    return BP_UNIMPLEMENTED;
  /* In place needs K % 4 == 0 for both: padded k must be zeros in A and B. */
  mm_operand_init(&j.a, A, batched, batch, m_out, K_ % 4 == 0, panel);
  mm_operand_init(&j.b, B, batched, batch, 4 * j.k4, K_ % 4 == 0, 0);
  /* Packed operands each take a fixed half of the workspace, so that it
   * keeps the same two views. */
  if (j.a.packed) j.half = a_texels * 16;
  if (j.b.packed && b_texels * 16 > j.half) j.half = b_texels * 16;
  if (j.half) {
    if (j.half > f->max_ssbo_range || j.half / 16 > f->max_texels || vk_stream_workspace(s, 2 * j.half, &j.ws) != BP_OK)
      return BP_UNIMPLEMENTED;
    j.half = j.ws->size / 2;
    if ((j.a.packed && vk_buffer_texel_view(j.ws, 0, j.half, &j.a.view)) ||
        (j.b.packed && vk_buffer_texel_view(j.ws, j.half, j.half, &j.b.view)))
      return BP_UNIMPLEMENTED;
  }
  /* Two passes: the first only gets every pipeline the product takes, so
   * that a failure to build one (the driver out of memory) returns before
   * anything is recorded; the second records. */
  bp_status_t st = BP_OK;
  for (int record = 0; record < 2 && st == BP_OK; record++) {
    if (j.a.packed && (st = matmul_pack(s, &j.a, batched, batch, panel, j.ws, 0, a_texels * 16, record)) != BP_OK)
      break;
    if (j.b.packed && (st = matmul_pack(s, &j.b, batched, batch, 0, j.ws, j.half, b_texels * 16, record)) != BP_OK)
      break;
    st = panel ? matmul_panel_dispatch(s, &j, record) : matmul_vec_dispatch(s, &j, record);
  }
  return st;
}

/* addmm's epilogue on a C the register-blocked kernel wrote, for biases
 * other than a dense f32 row: C = alpha C + beta bias, in f32, as one
 * elementwise program over C (the bias read with its strides, broadcast to
 * C's [M, N]; ignored when beta is 0, like the tiled kernel). A separate
 * pass: address-based bias loads folded into the kernel's unrolled stores
 * made its pipeline take about 20 s to compile on lavapipe. */
static bp_status_t matmul_epilogue(bpp_stream_t s, const bp_tensor_desc_t* C, const bp_tensor_desc_t* bias,
                                   int64_t bias_rs, int64_t bias_cs, double alpha, double beta) {
  vk_ew_t p;
  vk_ew_init(&p, BP_DTYPE_F32);
  uint32_t in_c = vk_ew_input(&p, C);
  uint8_t r = vk_ew_load_input(&p, in_c);
  if (alpha != 1.0) r = vk_ew_op(&p, BP_OP_mul, r, vk_ew_load_const(&p, vk_ew_const_f(&p, alpha)), 0, 0);
  bp_tensor_desc_t b; /* C's shape over the bias's storage; the program keeps a pointer */
  if (bias && beta != 0.0) {
    b = *C;
    b.dtype = bias->dtype;
    b.buffer = bias->buffer;
    b.byte_offset = bias->byte_offset;
    b.strides[0] = bias_rs;
    b.strides[1] = bias_cs;
    uint8_t t = vk_ew_load_input(&p, vk_ew_input(&p, &b));
    if (beta != 1.0) t = vk_ew_op(&p, BP_OP_mul, t, vk_ew_load_const(&p, vk_ew_const_f(&p, beta)), 0, 0);
    r = vk_ew_op(&p, BP_OP_add, r, t, 0, 0);
  }
  vk_ew_store(&p, vk_ew_output(&p, C), r);
  return vk_ew_launch(s, &p);
}

bp_status_t vk_launch_matmul(bpp_stream_t s, const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* A = call->inputs[op == BP_OP_addmm ? 1 : 0];
  const bp_tensor_desc_t* B = call->inputs[op == BP_OP_addmm ? 2 : 1];
  const bp_tensor_desc_t* C = call->outputs[0];
  const bp_tensor_desc_t* bias = op == BP_OP_addmm ? call->inputs[0] : NULL;
  int batched = op == BP_OP_bmm;
  uint32_t ar = batched ? 1 : 0;
  if (A->rank != 2 + ar || B->rank != 2 + ar || C->rank != 2 + ar)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: matmul: ranks %u, %u -> %u", A->rank, B->rank, C->rank);
  int64_t M_ = A->sizes[ar], K_ = A->sizes[ar + 1], N_ = B->sizes[ar + 1];
  int64_t batch = batched ? A->sizes[0] : 1;
  if (B->sizes[ar] != K_ || C->sizes[ar] != M_ || C->sizes[ar + 1] != N_)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: matmul: shapes do not agree");
  if (M_ == 0 || N_ == 0 || batch == 0) return BP_OK;
  if (M_ > UINT32_MAX || N_ > UINT32_MAX || K_ > UINT32_MAX || batch > 65535)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: matmul: sizes exceed one dispatch");
  uint32_t meta[42];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(A));
  vk_meta64(&meta[2], vk_desc_addr(B));
  vk_meta64(&meta[4], vk_desc_addr(C));
  meta[8] = (uint32_t)M_;
  meta[9] = (uint32_t)N_;
  meta[10] = (uint32_t)K_;
  meta[11] = (uint32_t)batch;
  put_i64(&meta[12], batched ? A->strides[0] : 0);
  put_i64(&meta[14], A->strides[ar]);
  put_i64(&meta[16], A->strides[ar + 1]);
  put_i64(&meta[18], batched ? B->strides[0] : 0);
  put_i64(&meta[20], B->strides[ar]);
  put_i64(&meta[22], B->strides[ar + 1]);
  put_i64(&meta[24], batched ? C->strides[0] : 0);
  put_i64(&meta[26], C->strides[ar]);
  put_i64(&meta[28], C->strides[ar + 1]);
  double alpha = 1, beta = 1;
  int64_t ialpha = 1, ibeta = 1;
  int has_bias = bias && bias->dtype != BP_DTYPE_INVALID;
  if (op == BP_OP_addmm) {
    const bp_addmm_attrs_t* at = call->attrs;
    alpha = scalar_f(at ? &at->alpha : NULL, 1);
    beta = scalar_f(at ? &at->beta : NULL, 1);
    ialpha = scalar_i(at ? &at->alpha : NULL, 1);
    ibeta = scalar_i(at ? &at->beta : NULL, 1);
  }
  int64_t bias_rs = 0, bias_cs = 0; /* bias broadcasts to [M, N] */
  if (has_bias) {
    vk_meta64(&meta[6], vk_desc_addr(bias));
    if (bias->rank == 2) {
      bias_rs = bias->sizes[0] == 1 ? 0 : bias->strides[0];
      bias_cs = bias->sizes[1] == 1 ? 0 : bias->strides[1];
    } else if (bias->rank == 1) {
      bias_cs = bias->sizes[0] == 1 ? 0 : bias->strides[0];
    }
    put_i64(&meta[30], bias_rs);
    put_i64(&meta[32], bias_cs);
  }
  put_f64(&meta[34], alpha);
  put_f64(&meta[36], beta);
  put_i64(&meta[38], ialpha);
  put_i64(&meta[40], ibeta);
  int sh = matmul_shader(C->dtype);
  if (sh < 0) return vk_error(BP_UNIMPLEMENTED, "vulkan: matmul of %s", bp_dtype_name(C->dtype));
  uint32_t spec[5] = {A->dtype, B->dtype, C->dtype, has_bias ? bias->dtype : 0u,
                      (has_bias || alpha != 1.0 || ialpha != 1) ? 1u : 0u};
  vk_access_t acc[4];
  uint32_t n = 0;
  vk_access_of(A, 0, &acc[n++]);
  vk_access_of(B, 0, &acc[n++]);
  if (has_bias) vk_access_of(bias, 0, &acc[n++]);
  vk_access_of(C, 1, &acc[n++]);
  VkPipeline pipe;
  bp_status_t st;
  /* addmm (2-d): alpha and a dense f32 bias row in the kernel's stores;
   * other biases by a second, elementwise pass. */
  if (spec[4] == 0 || op == BP_OP_addmm) {
    mm_epilogue_t ep = {spec[4] != 0, (float)alpha, (float)beta, NULL, VK_NULL_HANDLE};
    int bias_pass = has_bias && beta != 0.0;
    if (bias_pass && bias->dtype == BP_DTYPE_F32 && bias_rs == 0 && bias_cs == 1 && N_ % 4 == 0 &&
        !vk_buffer_texel_view(bias->buffer, bias->byte_offset, (uint64_t)N_ * 4, &ep.bias_view)) {
      ep.mode = 2;
      ep.bias = bias;
      bias_pass = 0;
    }
    if (bias_pass) ep.mode = 0;
    if ((st = matmul_cpu(s, A, B, C, &ep, M_, K_, N_, batch, batched)) != BP_UNIMPLEMENTED) {
      if (st != BP_OK || !bias_pass) return st;
      return matmul_epilogue(s, C, bias, bias_rs, bias_cs, alpha, beta);
    }
  }
  if ((st = vk_pipeline_get(s->dev, (uint32_t)sh, spec, 5, &pipe)) != BP_OK) return st;
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, (uint32_t)((N_ + 63) / 64), (uint32_t)((M_ + 63) / 64),
                            (uint32_t)batch, acc, n);
}

static int matmul_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  (void)d;
  uint32_t o = call->outputs[0]->dtype;
  for (uint32_t i = 0; i < call->num_inputs; i++)
    if (call->inputs[i]->dtype != BP_DTYPE_INVALID && call->inputs[i]->dtype != o) {
      bp_plugin_format(msg, cap, 0, "operands must share one dtype");
      return BP_SUPPORT_DTYPE;
    }
  if (matmul_shader(o) < 0) {
    bp_plugin_format(msg, cap, 0, "%s matmul is not supported", bp_dtype_name(o));
    return BP_SUPPORT_DTYPE;
  }
  int batched = call->op_id == BP_OP_bmm;
  if (batched && call->inputs[0]->rank == 3 && call->inputs[0]->sizes[0] > 65535) {
    bp_plugin_format(msg, cap, 0, "batch over 65535");
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

/* ======================================================================== */
/* Softmax, log_softmax, layer_norm, rms_norm                               */
/* ======================================================================== */
bp_status_t vk_launch_norm(bpp_stream_t s, const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* out = call->outputs[0];
  uint32_t meta[222];
  memset(meta, 0, sizeof meta);
  uint32_t rowmask = 0, code = 0, flags = 0;
  double eps = 0;
  const bp_tensor_desc_t *w = NULL, *b = NULL, *mean = NULL, *rstd = NULL;
  uint32_t nrank = 0;
  /* add_ forms: input 1 is the residual, output 1 residual_out, the
   * parameters follow them (pi: index of the weight) */
  int add = op == BP_OP_add_layer_norm || op == BP_OP_add_rms_norm;
  const bp_tensor_desc_t* res = add ? call->inputs[1] : NULL;
  const bp_tensor_desc_t* res_out = add ? call->outputs[1] : NULL;
  uint32_t pi = add ? 2 : 1;
  if (op == BP_OP_softmax || op == BP_OP_log_softmax) {
    const bp_softmax_attrs_t* a = call->attrs;
    int32_t d = a->dim < 0 ? a->dim + (int32_t)in->rank : a->dim;
    if (in->rank == 0) d = 0;
    else if (d < 0 || d >= (int32_t)in->rank)
      return vk_error(BP_INVALID_ARGUMENT, "vulkan: softmax: dim %d out of range", a->dim);
    if (in->rank) rowmask = 1u << d;
    code = op == BP_OP_softmax ? 0 : 1;
  } else {
    if (op == BP_OP_layer_norm || op == BP_OP_add_layer_norm) {
      const bp_layer_norm_attrs_t* a = call->attrs;
      nrank = a->normalized_rank;
      eps = a->eps;
      code = 2;
      if (call->num_inputs > pi + 1 && call->inputs[pi + 1]->dtype != BP_DTYPE_INVALID) b = call->inputs[pi + 1];
      if (!add && call->num_outputs > 1 && call->outputs[1]->dtype != BP_DTYPE_INVALID) mean = call->outputs[1];
      if (!add && call->num_outputs > 2 && call->outputs[2]->dtype != BP_DTYPE_INVALID) rstd = call->outputs[2];
    } else {
      const bp_rms_norm_attrs_t* a = call->attrs;
      nrank = a->normalized_rank ? a->normalized_rank : 1;
      eps = a->eps > 0 ? a->eps : vk_dtype_eps(in->dtype);
      code = 3;
    }
    if (call->num_inputs > pi && call->inputs[pi]->dtype != BP_DTYPE_INVALID) w = call->inputs[pi];
    if (nrank > in->rank) return vk_error(BP_INVALID_ARGUMENT, "vulkan: normalized rank %u > input rank %u", nrank, in->rank);
    for (uint32_t d = in->rank - nrank; d < in->rank; d++) rowmask |= 1u << d;
  }
  if (w) flags |= 1;
  if (b) flags |= 2;
  if (mean) flags |= 4;
  if (rstd) flags |= 8;
  if (add) {
    flags |= 16;
    vk_meta64(&meta[154], vk_desc_addr(res));
    vk_meta64(&meta[156], vk_desc_addr(res_out));
  }
  const bp_tensor_desc_t* stat = mean ? mean : rstd;
  vk_meta64(&meta[0], vk_desc_addr(in));
  meta[2] = in->dtype;
  meta[3] = out->dtype;
  vk_meta64(&meta[4], vk_desc_addr(out));
  meta[10] = code;
  meta[11] = flags;
  put_f64(&meta[12], eps);
  if (w) { vk_meta64(&meta[14], vk_desc_addr(w)); meta[16] = w->dtype; }
  if (b) { vk_meta64(&meta[18], vk_desc_addr(b)); meta[17] = b->dtype; }
  if (mean) vk_meta64(&meta[20], vk_desc_addr(mean));
  if (rstd) vk_meta64(&meta[22], vk_desc_addr(rstd));
  if (stat) meta[24] = stat->dtype;
  uint32_t kr = 0, rr = 0;
  uint64_t rows = 1, n = 1;
  uint32_t row0 = in->rank - nrank; /* first normalized dim (norms) */
  for (uint32_t d = 0; d < in->rank; d++) {
    if (in->sizes[d] == 0) return BP_OK;
    if (rowmask & (1u << d)) {
      uint32_t j = d - (code >= 2 ? row0 : d); /* position in weight/bias */
      meta[82 + rr] = (uint32_t)in->sizes[d];
      put_i64(&meta[90 + 2 * rr], in->strides[d]);
      put_i64(&meta[106 + 2 * rr], out->strides[d]);
      if (w && j < w->rank) put_i64(&meta[122 + 2 * rr], w->sizes[j] == 1 ? 0 : w->strides[j]);
      if (b && j < b->rank) put_i64(&meta[138 + 2 * rr], b->sizes[j] == 1 ? 0 : b->strides[j]);
      if (add) {
        put_i64(&meta[190 + 2 * rr], res->strides[d]);
        put_i64(&meta[206 + 2 * rr], res_out->strides[d]);
      }
      n *= (uint64_t)in->sizes[d];
      rr++;
    } else {
      meta[26 + kr] = (uint32_t)in->sizes[d];
      put_i64(&meta[34 + 2 * kr], in->strides[d]);
      put_i64(&meta[50 + 2 * kr], out->strides[d]);
      if (stat && d < stat->rank) put_i64(&meta[66 + 2 * kr], stat->sizes[d] == 1 ? 0 : stat->strides[d]);
      if (add) {
        put_i64(&meta[158 + 2 * kr], res->strides[d]);
        put_i64(&meta[174 + 2 * kr], res_out->strides[d]);
      }
      rows *= (uint64_t)in->sizes[d];
      kr++;
    }
  }
  if (rows > UINT32_MAX || n > UINT32_MAX) return vk_error(BP_UNIMPLEMENTED, "vulkan: normalization too large");
  meta[6] = (uint32_t)rows;
  meta[7] = (uint32_t)n;
  meta[8] = kr;
  meta[9] = rr;
  uint32_t spec[3] = {code, in->dtype, out->dtype};
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_norm_f64, spec, 3, &pipe);
  if (st) return st;
  vk_access_t acc[8];
  uint32_t na = 0;
  vk_access_of(in, 0, &acc[na++]);
  if (w) vk_access_of(w, 0, &acc[na++]);
  if (b) vk_access_of(b, 0, &acc[na++]);
  if (add) {
    vk_access_of(res, 0, &acc[na++]);
    vk_access_of(res_out, 1, &acc[na++]);
  }
  vk_access_of(out, 1, &acc[na++]);
  if (mean) vk_access_of(mean, 1, &acc[na++]);
  if (rstd) vk_access_of(rstd, 1, &acc[na++]);
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, vk_groups_for(s->dev, rows), 1, 1, acc, na);
}

static int norm_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  (void)d;
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (t->dtype != BP_DTYPE_INVALID && !bp_dtype_is_float(t->dtype)) {
      bp_plugin_format(msg, cap, 0, "%s: floating dtypes only", bp_dtype_name(t->dtype));
      return BP_SUPPORT_DTYPE;
    }
  }
  return 0;
}

/* ======================================================================== */
/* swiglu, geglu: an elementwise program over two views of the input        */
/* ======================================================================== */
/* out = act(gate) * up with gate = self[..., :H] and up = self[..., H:]
 * (same buffer, the second view H elements further along the last dim);
 * the activation runs in the program's compute dtype (f32, f64 for f64),
 * as the elementwise ops do. */
bp_status_t vk_launch_glu(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  if (in->rank == 0 || out->rank != in->rank || in->sizes[in->rank - 1] != 2 * out->sizes[out->rank - 1])
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: the input's last dim is not twice the output's",
                    bp_kit_op_name(call->op_id));
  uint32_t last = in->rank - 1;
  int64_t h = out->sizes[last];
  bp_tensor_desc_t gate = *in, up = *in;
  gate.sizes[last] = h;
  up.sizes[last] = h;
  up.byte_offset += (uint64_t)(h * in->strides[last]) * bp_dtype_size(in->dtype);
  uint32_t act = BP_OP_silu, aux = 0;
  if (call->op_id == BP_OP_geglu) {
    act = BP_OP_gelu;
    aux = call->attrs ? ((const bp_gelu_attrs_t*)call->attrs)->approximate : 0;
  }
  vk_ew_t p;
  vk_ew_init(&p, BP_DTYPE_F64);
  uint8_t g = vk_ew_load_input(&p, vk_ew_input(&p, &gate));
  uint8_t u = vk_ew_load_input(&p, vk_ew_input(&p, &up));
  uint8_t y = vk_ew_op(&p, BP_OP_mul, vk_ew_op(&p, act, g, 0, 0, aux), u, 0, 0);
  vk_ew_store(&p, vk_ew_output(&p, out), y);
  return vk_ew_launch(s, &p);
}

/* ======================================================================== */
/* swiglu_oai, logits_softcap: elementwise programs                          */
/* ======================================================================== */
/* swiglu_oai: gate = self[..., 0::2] and up = self[..., 1::2] (two strided
 * views of one buffer); g = clamp(gate, -inf, limit), u = clamp(up, -limit,
 * limit) (NaN propagates, as the CPU's), out = (u + 1) * (g * sigmoid(alpha
 * * g)), computed in f64 for every dtype: an f32 alpha * g alone costs ~10
 * ulps of exp at |g| ~ 7 (the CPU computes the sigmoid in f64 too). */
bp_status_t vk_launch_swiglu_oai(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  const bp_swiglu_oai_attrs_t* a = call->attrs;
  if (!a || in->rank == 0 || out->rank != in->rank || in->sizes[in->rank - 1] != 2 * out->sizes[out->rank - 1])
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: swiglu_oai: needs attrs and an input last dim twice the output's");
  uint32_t last = in->rank - 1;
  bp_tensor_desc_t gate = *in, up = *in;
  gate.sizes[last] = up.sizes[last] = out->sizes[last];
  gate.strides[last] = up.strides[last] = 2 * in->strides[last];
  up.byte_offset += (uint64_t)in->strides[last] * bp_dtype_size(in->dtype);
  double alpha = a->alpha != 0.0 ? a->alpha : 1.702, limit = a->limit != 0.0 ? a->limit : 7.0;
  vk_ew_t p;
  vk_ew_init(&p, BP_DTYPE_F64);
  uint8_t g = vk_ew_load_input(&p, vk_ew_input(&p, &gate));
  uint8_t u = vk_ew_load_input(&p, vk_ew_input(&p, &up));
  uint8_t lim = vk_ew_load_const(&p, vk_ew_const_f(&p, limit));
  uint8_t nlim = vk_ew_load_const(&p, vk_ew_const_f(&p, -limit));
  uint8_t ninf = vk_ew_load_const(&p, vk_ew_const_f(&p, -INFINITY));
  uint8_t one = vk_ew_load_const(&p, vk_ew_const_f(&p, 1.0));
  g = vk_ew_op(&p, BP_OP_clamp, g, ninf, lim, 0);
  u = vk_ew_op(&p, BP_OP_clamp, u, nlim, lim, 0);
  uint8_t sg = vk_ew_op(&p, BP_OP_sigmoid, vk_ew_op(&p, BP_OP_mul, g, vk_ew_load_const(&p, vk_ew_const_f(&p, alpha)), 0, 0),
                        0, 0, 0);
  uint8_t y = vk_ew_op(&p, BP_OP_mul, vk_ew_op(&p, BP_OP_add, u, one, 0, 0), vk_ew_op(&p, BP_OP_mul, g, sg, 0, 0), 0, 0);
  vk_ew_store(&p, vk_ew_output(&p, out), y);
  return vk_ew_launch(s, &p);
}

/* logits_softcap: tanh(x / cap) * cap in f32 (f64 for f64). */
bp_status_t vk_launch_softcap(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_tensor_desc_t *in = call->inputs[0], *out = call->outputs[0];
  const bp_softcap_attrs_t* a = call->attrs;
  if (!a || !(a->cap > 0.0)) return vk_error(BP_INVALID_ARGUMENT, "vulkan: logits_softcap: needs attrs.cap > 0");
  uint32_t cd = in->dtype == BP_DTYPE_F64 ? BP_DTYPE_F64 : BP_DTYPE_F32;
  vk_ew_t p;
  vk_ew_init(&p, cd);
  uint8_t x = vk_ew_load_input(&p, vk_ew_input(&p, in));
  uint8_t cap = vk_ew_load_const(&p, vk_ew_const_f(&p, a->cap));
  uint8_t t = vk_ew_op(&p, BP_OP_div, x, cap, 0, 0);
  uint8_t y = vk_ew_op(&p, BP_OP_mul, vk_ew_op(&p, BP_OP_tanh, t, 0, 0, 0), cap, 0, 0);
  /* |x / cap| below 2^-12 (2^-27 for f64): x itself, as the CPU's (tanh(y)
   * = y (1 - y^2 / 3 ...), and a subnormal x / cap would lose bits) */
  uint8_t thr = vk_ew_load_const(&p, vk_ew_const_f(&p, a->cap * (cd == BP_DTYPE_F64 ? 0x1p-27 : 0x1p-12)));
  uint8_t tiny = vk_ew_op(&p, BP_OP_lt, vk_ew_op(&p, BP_OP_abs, x, 0, 0, 0), thr, 0, 0);
  y = vk_ew_op(&p, BP_OP_where, tiny, x, y, 0);
  vk_ew_store(&p, vk_ew_output(&p, out), y);
  return vk_ew_launch(s, &p);
}

/* The norms' rule (floating operands); geglu's erf form not in f64, like
 * gelu's (the double-precision erf is not accurate to f64's tolerance). */
static int glu_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  int reason = norm_supported(d, call, msg, cap);
  if (reason) return reason;
  const bp_gelu_attrs_t* a = call->attrs;
  if (call->op_id == BP_OP_geglu && call->inputs[0]->dtype == BP_DTYPE_F64 &&
      !(a && a->approximate == BP_GELU_TANH)) {
    bp_plugin_format(msg, cap, 0, "f64 has no accurate GLSL implementation of erf (gelu's erf form)");
    return BP_SUPPORT_DTYPE;
  }
  return 0;
}

/* ======================================================================== */
/* gather, index_select, embedding                                         */
/* ======================================================================== */
bp_status_t vk_launch_index(bpp_stream_t s, const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* src = call->inputs[0];
  const bp_tensor_desc_t* idx = call->inputs[1];
  const bp_tensor_desc_t* out = call->outputs[0];
  uint32_t meta[70];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(src));
  vk_meta64(&meta[4], vk_desc_addr(out));
  vk_meta64(&meta[6], vk_desc_addr(idx));
  uint32_t rank = out->rank;
  int64_t numel = 1;
  for (uint32_t d = 0; d < rank; d++) {
    numel *= out->sizes[d];
    meta[14 + d] = (uint32_t)out->sizes[d];
    put_i64(&meta[22 + 2 * d], out->strides[d]);
  }
  if (numel == 0) return BP_OK;
  if (numel > INT32_MAX) return vk_error(BP_UNIMPLEMENTED, "vulkan: indexing too large");
  int64_t dimsize, gstride;
  if (op == BP_OP_embedding) {
    if (src->rank != 2 || rank != idx->rank + 1)
      return vk_error(BP_INVALID_ARGUMENT, "vulkan: embedding: weight rank %u, indices rank %u, output rank %u", src->rank,
                      idx->rank, rank);
    dimsize = src->sizes[0];
    gstride = src->strides[0];
    for (uint32_t d = 0; d < idx->rank; d++) put_i64(&meta[54 + 2 * d], idx->strides[d]);
    put_i64(&meta[38 + 2 * (rank - 1)], src->strides[1]);
  } else {
    const bp_dim_attrs_t* a = call->attrs;
    int32_t dim = a->dim < 0 ? a->dim + (int32_t)src->rank : a->dim;
    if (src->rank == 0) dim = 0;
    if (dim < 0 || (src->rank && dim >= (int32_t)src->rank) || out->rank != src->rank)
      return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: dim %d out of range", op == BP_OP_gather ? "gather" : "index_select", a->dim);
    dimsize = src->rank ? src->sizes[dim] : 1;
    gstride = src->rank ? src->strides[dim] : 0;
    for (uint32_t d = 0; d < rank; d++)
      if ((int32_t)d != dim) put_i64(&meta[38 + 2 * d], src->strides[d]);
    if (op == BP_OP_gather) {
      if (idx->rank != rank) return vk_error(BP_INVALID_ARGUMENT, "vulkan: gather: index rank %u != %u", idx->rank, rank);
      for (uint32_t d = 0; d < rank; d++) put_i64(&meta[54 + 2 * d], idx->strides[d]);
    } else if (rank) {
      put_i64(&meta[54 + 2 * dim], idx->rank ? idx->strides[0] : 0);
    }
  }
  meta[9] = rank;
  meta[10] = (uint32_t)numel;
  meta[11] = (uint32_t)(dimsize > UINT32_MAX ? UINT32_MAX : dimsize);
  put_i64(&meta[12], gstride);
  uint32_t spec[2] = {bp_dtype_size(out->dtype), idx->dtype};
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_index, spec, 2, &pipe);
  if (st) return st;
  vk_access_t acc[3];
  vk_access_of(src, 0, &acc[0]);
  vk_access_of(idx, 0, &acc[1]);
  vk_access_of(out, 1, &acc[2]);
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, vk_groups_for(s->dev, ((uint64_t)numel + 255) / 256), 1, 1, acc, 3);
}

static int index_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  (void)d;
  uint32_t it = call->inputs[1]->dtype;
  if (it != BP_DTYPE_I32 && it != BP_DTYPE_I64) {
    bp_plugin_format(msg, cap, 0, "indices must be i32 or i64, got %s", bp_dtype_name(it));
    return BP_SUPPORT_DTYPE;
  }
  if (call->inputs[0]->dtype != call->outputs[0]->dtype) {
    bp_plugin_format(msg, cap, 0, "source and output dtypes differ");
    return BP_SUPPORT_DTYPE;
  }
  return 0;
}

static int conv_pool_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap);

/* ======================================================================== */
/* quantize, dequantize (quant.comp)                                        */
/* ======================================================================== */
/* Row-major dense (size-1 dims ignored). */
static int quant_float_ok(uint32_t dt) {
  return dt == BP_DTYPE_F32 || dt == BP_DTYPE_F16 || dt == BP_DTYPE_BF16;
}

static int quant_supported(const bp_op_call_t* call, char* msg, size_t cap) {
  const bp_quantize_attrs_t* a = call->attrs;
  uint32_t q = a ? a->qdtype : BP_DTYPE_INVALID;
  if (q != BP_DTYPE_I8 && q != BP_DTYPE_U8 && q != BP_DTYPE_I4 && q != BP_DTYPE_U4 &&
      q != BP_DTYPE_F4E2M1FN) {
    bp_plugin_format(msg, cap, 0, "codes of %s: integer and float4_e2m1fn codes only (no fp8 storage)",
                     bp_dtype_name(q));
    return BP_SUPPORT_DTYPE;
  }
  int deq = call->op_id == BP_OP_dequantize;
  uint32_t fdt = deq ? call->outputs[0]->dtype : call->inputs[0]->dtype;
  if (!quant_float_ok(fdt) || !quant_float_ok(call->inputs[1]->dtype)) {
    bp_plugin_format(msg, cap, 0, "data %s, scale %s: f32, f16 or bf16 only", bp_dtype_name(fdt),
                     bp_dtype_name(call->inputs[1]->dtype));
    return BP_SUPPORT_DTYPE;
  }
  if (bp_desc_numel(deq ? call->outputs[0] : call->inputs[0]) > INT32_MAX) {
    bp_plugin_format(msg, cap, 0, "more than 2^31 elements");
    return BP_SUPPORT_SIZE;
  }
  return 0;
}

bp_status_t vk_launch_quant(bpp_stream_t s, const bp_op_call_t* call) {
  const bp_quantize_attrs_t* a = call->attrs;
  int deq = call->op_id == BP_OP_dequantize;
  const bp_tensor_desc_t *x = call->inputs[0], *sc = call->inputs[1], *out = call->outputs[0];
  const bp_tensor_desc_t* zp = call->num_inputs > 2 && call->inputs[2]->dtype != BP_DTYPE_INVALID ? call->inputs[2] : NULL;
  const bp_tensor_desc_t* logical = deq ? out : x;
  const bp_tensor_desc_t* ops[4] = {x, sc, zp, out};
  for (int k = 0; k < 4; k++)
    if (ops[k] && !vk_desc_dense(ops[k]))
      return vk_error(BP_UNIMPLEMENTED, "vulkan: quantization ops take dense operands (ask with query_support)");
  int64_t numel = bp_desc_numel(logical);
  if (numel == 0) return BP_OK;
  uint32_t rank = logical->rank;
  uint32_t meta[24];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(x));
  vk_meta64(&meta[2], vk_desc_addr(sc));
  if (zp) vk_meta64(&meta[4], vk_desc_addr(zp));
  vk_meta64(&meta[6], vk_desc_addr(out));
  meta[8] = (uint32_t)numel;
  meta[9] = rank ? (uint32_t)logical->sizes[rank - 1] : 1u;
  int64_t sn = bp_desc_numel(sc);
  meta[10] = a->block_size > 0 ? 2u : sn == 1 ? 0u : 1u;
  if (meta[10] != 0 && rank > 0) {
    uint32_t axis = a->axis < 0 ? (uint32_t)(a->axis + (int32_t)rank) : (uint32_t)a->axis;
    meta[11] = axis == rank - 1;
    meta[12] = (uint32_t)logical->sizes[axis];
    uint32_t inner = 1;
    for (uint32_t d = axis + 1; d + 1 < rank; d++) inner *= (uint32_t)logical->sizes[d];
    meta[13] = inner;
    meta[14] = a->block_size > 0 ? (uint32_t)a->block_size : 1u;
    meta[15] = (meta[12] + meta[14] - 1) / meta[14];
  }
  meta[16] = a->qdtype;
  meta[18] = deq ? out->dtype : x->dtype;
  meta[19] = sc->dtype;
  meta[20] = zp ? zp->dtype : 0u;
  meta[21] = deq ? 1u : 0u;
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, VK_SHADER_quant, NULL, 0, &pipe);
  if (st) return st;
  vk_access_t acc[4];
  uint32_t na = 0;
  vk_access_of(x, 0, &acc[na++]);
  vk_access_of(sc, 0, &acc[na++]);
  if (zp) vk_access_of(zp, 0, &acc[na++]);
  vk_access_of(out, 1, &acc[na++]);
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, vk_groups_for(s->dev, ((uint64_t)numel + 255) / 256), 1, 1,
                            acc, na);
}

/* ======================================================================== */
/* Family table                                                             */
/* ======================================================================== */
int vk_kernels_implemented(uint32_t op) {
  if (vk_norm_quant_op(op)) return 1;
  switch (op) {
    case BP_OP_sum: case BP_OP_mean: case BP_OP_prod: case BP_OP_amax: case BP_OP_amin:
    case BP_OP_any: case BP_OP_argmax: case BP_OP_argmin:
    case BP_OP_logsumexp: case BP_OP_max_dim: case BP_OP_min_dim:
    case BP_OP_mm: case BP_OP_bmm: case BP_OP_addmm:
    case BP_OP_softmax: case BP_OP_log_softmax: case BP_OP_layer_norm: case BP_OP_rms_norm:
    case BP_OP_add_layer_norm: case BP_OP_add_rms_norm: case BP_OP_swiglu: case BP_OP_geglu:
    case BP_OP_gather: case BP_OP_index_select: case BP_OP_embedding:
    case BP_OP_convolution: case BP_OP_avg_pool: case BP_OP_max_pool_with_indices:
    case BP_OP_quantize: case BP_OP_dequantize: case BP_OP_sample: case BP_OP_repetition_penalty:
    case BP_OP_swiglu_oai: case BP_OP_logits_softcap: case BP_OP_top_k_top_p_mask:
    case BP_OP_rotary_embedding_pos: case BP_OP_gather_logprobs:
    case BP_OP_concat_and_cache_mla: case BP_OP_gather_cache: case BP_OP_compute_slot_mapping:
    case BP_OP_moe_align_block_size: case BP_OP_grouped_topk:
      return 1;
    default:
      return 0;
  }
}

int vk_kernels_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  /* before the storage check: their fp8 codes are written as bytes */
  if (vk_norm_quant_op(call->op_id)) return vk_norm_quant_supported(d, call, msg, cap);
  if (!all_dtypes_ok(d, call, msg, cap)) return BP_SUPPORT_DTYPE;
  switch (call->op_id) {
    case BP_OP_sum: case BP_OP_mean: case BP_OP_prod: case BP_OP_amax: case BP_OP_amin:
    case BP_OP_any: case BP_OP_argmax: case BP_OP_argmin:
    case BP_OP_logsumexp: case BP_OP_max_dim: case BP_OP_min_dim:
      return reduce_supported(d, call, msg, cap);
    case BP_OP_mm: case BP_OP_bmm: case BP_OP_addmm:
      return matmul_supported(d, call, msg, cap);
    case BP_OP_softmax: case BP_OP_log_softmax: case BP_OP_layer_norm: case BP_OP_rms_norm:
    case BP_OP_add_layer_norm: case BP_OP_add_rms_norm: case BP_OP_swiglu_oai: case BP_OP_logits_softcap:
      return norm_supported(d, call, msg, cap);
    case BP_OP_swiglu: case BP_OP_geglu:
      return glu_supported(d, call, msg, cap);
    case BP_OP_gather: case BP_OP_index_select: case BP_OP_embedding:
      return index_supported(d, call, msg, cap);
    case BP_OP_convolution: case BP_OP_avg_pool: case BP_OP_max_pool_with_indices:
      return conv_pool_supported(d, call, msg, cap);
    case BP_OP_quantize: case BP_OP_dequantize:
      return quant_supported(call, msg, cap);
    case BP_OP_sample: case BP_OP_repetition_penalty: case BP_OP_top_k_top_p_mask:
      return vk_sample_supported(d, call, msg, cap);
    case BP_OP_rotary_embedding_pos:
      return vk_rope_supported(d, call, msg, cap);
    case BP_OP_gather_logprobs:
      return vk_logprobs_supported(d, call, msg, cap);
    case BP_OP_concat_and_cache_mla: case BP_OP_gather_cache: case BP_OP_compute_slot_mapping:
      return vk_paged_supported(d, call, msg, cap);
    case BP_OP_moe_align_block_size:
      return vk_moe_align_supported(d, call, msg, cap);
    case BP_OP_grouped_topk:
      return vk_grouped_topk_supported(d, call, msg, cap);
    default:
      bp_plugin_format(msg, cap, 0, "no Vulkan kernel");
      return BP_SUPPORT_OP;
  }
}

/* ======================================================================== */
/* convolution (2-d), avg_pool (2-d), max_pool_with_indices (2-d)           */
/* ======================================================================== */
static void put4(uint32_t* w, const bp_tensor_desc_t* t) {
  for (uint32_t d = 0; d < 4; d++) put_i64(&w[2 * d], t->strides[d]);
}

bp_status_t vk_launch_conv_pool(bpp_stream_t s, const bp_op_call_t* call) {
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* in = call->inputs[0];
  const bp_tensor_desc_t* out = call->outputs[0];
  if (in->rank != 4 || out->rank != 4)
    return vk_error(BP_UNIMPLEMENTED, "vulkan: op %u: only 2-d NCHW operands", op);
  uint32_t meta[64];
  memset(meta, 0, sizeof meta);
  vk_meta64(&meta[0], vk_desc_addr(in));
  vk_meta64(&meta[6], vk_desc_addr(out));
  meta[10] = (uint32_t)in->sizes[0];
  meta[11] = (uint32_t)in->sizes[1];
  meta[12] = (uint32_t)in->sizes[2];
  meta[13] = (uint32_t)in->sizes[3];
  meta[14] = (uint32_t)out->sizes[1];
  meta[15] = (uint32_t)out->sizes[2];
  meta[16] = (uint32_t)out->sizes[3];
  put4(&meta[30], in);
  put4(&meta[46], out);
  uint32_t kind, wdt = in->dtype;
  vk_access_t acc[5];
  uint32_t na = 0;
  vk_access_of(in, 0, &acc[na++]);
  if (op == BP_OP_convolution) {
    const bp_conv_attrs_t* a = call->attrs;
    const bp_tensor_desc_t* w = call->inputs[1];
    const bp_tensor_desc_t* b = call->num_inputs > 2 && call->inputs[2]->dtype != BP_DTYPE_INVALID ? call->inputs[2] : NULL;
    if (w->rank != 4) return vk_error(BP_INVALID_ARGUMENT, "vulkan: convolution: weight rank %u", w->rank);
    kind = 0;
    wdt = w->dtype;
    vk_meta64(&meta[2], vk_desc_addr(w));
    meta[17] = (uint32_t)w->sizes[2];
    meta[18] = (uint32_t)w->sizes[3];
    meta[19] = (uint32_t)a->stride[0];
    meta[20] = (uint32_t)a->stride[1];
    meta[21] = (uint32_t)a->padding[0];
    meta[22] = (uint32_t)a->padding[1];
    meta[23] = (uint32_t)a->dilation[0];
    meta[24] = (uint32_t)a->dilation[1];
    meta[25] = (uint32_t)(a->groups > 0 ? a->groups : 1);
    put4(&meta[38], w);
    vk_access_of(w, 0, &acc[na++]);
    if (b) {
      vk_meta64(&meta[4], vk_desc_addr(b));
      put_i64(&meta[62], b->strides[0]);
      meta[26] |= 2;
      vk_access_of(b, 0, &acc[na++]);
    }
  } else {
    const bp_pool_attrs_t* a = call->attrs;
    kind = op == BP_OP_avg_pool ? 1 : 2;
    meta[14] = (uint32_t)out->sizes[1];
    meta[17] = (uint32_t)a->kernel[0];
    meta[18] = (uint32_t)a->kernel[1];
    meta[19] = (uint32_t)a->stride[0]; /* resolved by the core (has_stride) */
    meta[20] = (uint32_t)a->stride[1];
    meta[21] = (uint32_t)a->padding[0];
    meta[22] = (uint32_t)a->padding[1];
    meta[23] = (uint32_t)(a->dilation[0] ? a->dilation[0] : 1);
    meta[24] = (uint32_t)(a->dilation[1] ? a->dilation[1] : 1);
    meta[25] = 1;
    meta[26] = a->count_include_pad ? 1u : 0u;
    meta[27] = a->has_divisor_override ? (uint32_t)a->divisor_override : 0u; /* 0: the window */
    if (kind == 2) {
      const bp_tensor_desc_t* ix = call->outputs[1];
      vk_meta64(&meta[8], vk_desc_addr(ix));
      put4(&meta[54], ix);
      vk_access_of(ix, 1, &acc[na++]);
    }
  }
  vk_access_of(out, 1, &acc[na++]);
  int64_t total = out->sizes[0] * out->sizes[1] * out->sizes[2] * out->sizes[3];
  if (total == 0) return BP_OK;
  if (total > INT32_MAX) return vk_error(BP_UNIMPLEMENTED, "vulkan: op %u: output too large", op);
  meta[28] = (uint32_t)total;
  uint32_t spec[4] = {kind, in->dtype, wdt, out->dtype};
  VkPipeline pipe;
  bp_status_t st = vk_pipeline_get(s->dev, out->dtype == BP_DTYPE_F64 ? VK_SHADER_conv_f64 : VK_SHADER_conv_f32, spec, 4, &pipe);
  if (st) return st;
  return vk_stream_dispatch(s, pipe, meta, sizeof meta, 0, vk_groups_for(s->dev, ((uint64_t)total + 255) / 256), 1, 1, acc, na);
}

static int conv_pool_supported(struct bpp_device_s* d, const bp_op_call_t* call, char* msg, size_t cap) {
  (void)d;
  uint32_t op = call->op_id;
  const bp_tensor_desc_t* in = call->inputs[0];
  for (uint32_t k = 0; k < call->num_inputs + 1; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[0];
    if (t->dtype != BP_DTYPE_INVALID && !bp_dtype_is_float(t->dtype)) {
      bp_plugin_format(msg, cap, 0, "%s: floating dtypes only", bp_dtype_name(t->dtype));
      return BP_SUPPORT_DTYPE;
    }
  }
  if (op == BP_OP_max_pool_with_indices && call->num_outputs > 1 && call->outputs[1]->dtype != BP_DTYPE_I64) {
    bp_plugin_format(msg, cap, 0, "indices must be i64");
    return BP_SUPPORT_DTYPE;
  }
  if (in->rank != 4) {
    bp_plugin_format(msg, cap, 0, "only 2-d (NCHW, rank 4) operands; rank %u given", in->rank);
    return BP_SUPPORT_RANK;
  }
  if (op == BP_OP_convolution) {
    const bp_conv_attrs_t* a = call->attrs;
    if (!a || a->spatial_dims != 2 || a->transposed) {
      bp_plugin_format(msg, cap, 0, "only non-transposed 2-d convolution");
      return BP_SUPPORT_ATTRIBUTE;
    }
    if (call->inputs[1]->dtype != in->dtype) {
      bp_plugin_format(msg, cap, 0, "input and weight dtypes differ");
      return BP_SUPPORT_DTYPE;
    }
  } else {
    const bp_pool_attrs_t* a = call->attrs;
    if (!a || a->spatial_dims != 2) {
      bp_plugin_format(msg, cap, 0, "only 2-d pooling");
      return BP_SUPPORT_ATTRIBUTE;
    }
  }
  return 0;
}
