/* backplane CPU plugin: f32 convolution forward through oneDNN (libdnnl),
 * when the plugin is built with it (BP_DNNL, plugins/cpu/CMakeLists.txt).
 *
 * A non-transposed f32 convolution (1-, 2- or 3-d, any groups, stride,
 * padding and dilation, operands with positive strides) runs oneDNN's
 * direct convolution: the input is reordered into the blocked layout the
 * primitive chose (nChw16c on AVX-512), the weights too, and the output back
 * to the caller's layout; bias is added by the primitive. Everything else
 * (f64 / f16 / bf16, transposed, backward, a shape oneDNN refuses) returns
 * 0 from cpu_conv_dnnl_forward and takes the im2col + GEMM path.
 *
 * Primitives are cached per shape (creating one JIT-compiles its kernels,
 * milliseconds): up to CONV_DNNL_CACHE entries, the oldest replaced first.
 * One mutex guards the cache and every execution: oneDNN runs a call on
 * its own OpenMP threads (Debian's build, one per core) while the plugin's
 * pool sleeps, so two convolutions at once would only oversubscribe the
 * cores.
 *
 * The path is off unless BACKPLANE_CPU_DNNL=1 is in the environment (read
 * once per process). Measured on a loaded 2-core machine it lost to the
 * im2col + GEMM path, by up to 10x at batch 1: OpenBLAS's threads keep
 * spinning for a while after every GEMM (the baseline's, or a matmul's
 * before the convolution) and starve oneDNN's OpenMP team, whose static
 * split then waits for its slowest thread (docs/performance.md, suite conv).
 */
#include "cpu_conv_dnnl.h"

#ifdef BP_CPU_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { CONV_DNNL_CACHE = 16, CONV_DNNL_SP = 3 };

/* What a primitive depends on: every size, the geometry, the strides of
 * the caller's operands (their layouts are part of the reorders). */
typedef struct dnnl_key {
  int nsp, has_bias;
  int64_t groups;
  int64_t in[2 + CONV_DNNL_SP], w[2 + CONV_DNNL_SP], out[2 + CONV_DNNL_SP];
  int64_t in_st[2 + CONV_DNNL_SP], w_st[2 + CONV_DNNL_SP], out_st[2 + CONV_DNNL_SP];
  int64_t s[CONV_DNNL_SP], d[CONV_DNNL_SP], pl[CONV_DNNL_SP], pr[CONV_DNNL_SP];
} dnnl_key_t;

/* A cached convolution: the primitive and, per operand whose caller layout
 * differs from the primitive's, a reorder and the size of its staging. */
typedef struct dnnl_entry {
  int used;
  dnnl_key_t key;
  dnnl_primitive_t conv;
  dnnl_memory_desc_t user_md[3], prim_md[3], bias_md; /* 0 src, 1 weights, 2 dst */
  dnnl_primitive_t reorder[3];                          /* NULL: same layout */
  size_t stage_bytes[3];
} dnnl_entry_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static dnnl_engine_t g_engine;
static int g_state; /* 0 unknown, 1 on, -1 off (environment or no engine) */
static dnnl_entry_t g_cache[CONV_DNNL_CACHE];
static unsigned g_next; /* the entry replaced next */

static void entry_free(dnnl_entry_t* e) {
  if (e->conv) dnnl_primitive_destroy(e->conv);
  for (int i = 0; i < 3; i++)
    if (e->reorder[i]) dnnl_primitive_destroy(e->reorder[i]);
  memset(e, 0, sizeof *e);
}

/* The cache lives until the plugin is unloaded. */
__attribute__((destructor)) static void dnnl_cache_fini(void) {
  for (int i = 0; i < CONV_DNNL_CACHE; i++) entry_free(&g_cache[i]);
  if (g_engine) dnnl_engine_destroy(g_engine);
  g_engine = NULL;
}

/* Called with g_lock held. */
static int dnnl_on(void) {
  if (g_state == 0) {
    const char* env = getenv("BACKPLANE_CPU_DNNL");
    g_state = env && env[0] == '1' && env[1] == '\0' ? 1 : -1;
    /* primitives live in our cache only: oneDNN's own process-wide cache
     * would keep them past the plugin's unload */
    if (g_state == 1 && dnnl_set_primitive_cache_capacity(0) != dnnl_success) g_state = -1;
    if (g_state == 1 && dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success) g_state = -1;
  }
  return g_state == 1;
}

static dnnl_status_t make_reorder(const dnnl_memory_desc_t* from, const dnnl_memory_desc_t* to,
                                  dnnl_primitive_t* out) {
  dnnl_primitive_desc_t pd;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, g_engine, to, g_engine, NULL);
  if (s != dnnl_success) return s;
  s = dnnl_primitive_create(out, pd);
  dnnl_primitive_desc_destroy(pd);
  return s;
}

/* Builds entry e for key k; 0 when oneDNN has no implementation. */
static int entry_build(dnnl_entry_t* e, const dnnl_key_t* k) {
  memset(e, 0, sizeof *e);
  e->key = *k;
  int nd = 2 + k->nsp, g = k->groups > 1;
  dnnl_dims_t dims = {0}, st = {0}, gdims = {0}, gst = {0};
  /* user layouts: the operands as they are */
  for (int i = 0; i < nd; i++) dims[i] = k->in[i], st[i] = k->in_st[i];
  if (dnnl_memory_desc_init_by_strides(&e->user_md[0], nd, dims, dnnl_f32, st)) return 0;
  for (int i = 0; i < nd; i++) dims[i] = k->out[i], st[i] = k->out_st[i];
  if (dnnl_memory_desc_init_by_strides(&e->user_md[2], nd, dims, dnnl_f32, st)) return 0;
  if (g) { /* weights [O, C / G, k...] as [G, O / G, C / G, k...] */
    gdims[0] = k->groups, gst[0] = k->w[0] / k->groups * k->w_st[0];
    gdims[1] = k->w[0] / k->groups, gst[1] = k->w_st[0];
    for (int i = 1; i < nd; i++) gdims[i + 1] = k->w[i], gst[i + 1] = k->w_st[i];
    if (dnnl_memory_desc_init_by_strides(&e->user_md[1], nd + 1, gdims, dnnl_f32, gst)) return 0;
  } else {
    for (int i = 0; i < nd; i++) dims[i] = k->w[i], st[i] = k->w_st[i];
    if (dnnl_memory_desc_init_by_strides(&e->user_md[1], nd, dims, dnnl_f32, st)) return 0;
  }
  /* the primitive's layouts: its choice */
  dnnl_memory_desc_t any[3];
  for (int i = 0; i < 3; i++) {
    const dnnl_memory_desc_t* u = &e->user_md[i];
    if (dnnl_memory_desc_init_by_tag(&any[i], u->ndims, u->dims, dnnl_f32, dnnl_format_tag_any)) return 0;
  }
  dnnl_dims_t one = {k->out[1]};
  if (k->has_bias && dnnl_memory_desc_init_by_tag(&e->bias_md, 1, one, dnnl_f32, dnnl_x)) return 0;
  dnnl_dims_t s, d, pl, pr;
  for (int i = 0; i < k->nsp; i++) s[i] = k->s[i], d[i] = k->d[i] - 1, pl[i] = k->pl[i], pr[i] = k->pr[i];
  dnnl_convolution_desc_t cd;
  if (dnnl_dilated_convolution_forward_desc_init(&cd, dnnl_forward_inference, dnnl_convolution_direct,
                                                 &any[0], &any[1], k->has_bias ? &e->bias_md : NULL,
                                                 &any[2], s, d, pl, pr))
    return 0;
  dnnl_primitive_desc_t pd;
  if (dnnl_primitive_desc_create(&pd, &cd, NULL, g_engine, NULL)) return 0;
  dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md};
  for (int i = 0; i < 3; i++) e->prim_md[i] = *dnnl_primitive_desc_query_md(pd, q[i], 0);
  dnnl_status_t stt = dnnl_primitive_create(&e->conv, pd);
  dnnl_primitive_desc_destroy(pd);
  if (stt != dnnl_success) return 0;
  for (int i = 0; i < 3; i++) {
    if (dnnl_memory_desc_equal(&e->user_md[i], &e->prim_md[i])) continue;
    stt = i == 2 ? make_reorder(&e->prim_md[2], &e->user_md[2], &e->reorder[2])
                 : make_reorder(&e->user_md[i], &e->prim_md[i], &e->reorder[i]);
    if (stt != dnnl_success) {
      entry_free(e);
      return 0;
    }
    e->stage_bytes[i] = dnnl_memory_desc_get_size(&e->prim_md[i]);
  }
  e->used = 1;
  return 1;
}

static dnnl_entry_t* cache_get(const dnnl_key_t* k) {
  for (int i = 0; i < CONV_DNNL_CACHE; i++)
    if (g_cache[i].used && !memcmp(&g_cache[i].key, k, sizeof *k)) return &g_cache[i];
  dnnl_entry_t* e = &g_cache[g_next];
  entry_free(e);
  if (!entry_build(e, k)) return NULL;
  g_next = (g_next + 1) % CONV_DNNL_CACHE;
  return e;
}

static int key_make(const bp_op_call_t* call, dnnl_key_t* k) {
  const bp_conv_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *in = call->inputs[0], *w = call->inputs[1], *out = call->outputs[0];
  const bp_tensor_desc_t* b = call->num_inputs > 2 ? call->inputs[2] : NULL;
  if (a->transposed || in->dtype != BP_DTYPE_F32 || w->dtype != BP_DTYPE_F32 ||
      out->dtype != BP_DTYPE_F32 || in->rank != w->rank || in->rank < 3 || in->rank > 5)
    return 0;
  memset(k, 0, sizeof *k);
  k->nsp = (int)in->rank - 2;
  k->groups = a->groups;
  if (b && b->dtype != BP_DTYPE_INVALID) {
    if (b->dtype != BP_DTYPE_F32 || b->rank != 1 || (b->sizes[0] > 1 && b->strides[0] != 1)) return 0;
    k->has_bias = 1;
  }
  for (uint32_t i = 0; i < in->rank; i++) {
    const bp_tensor_desc_t* ds[3] = {in, w, out};
    int64_t* sz[3] = {k->in, k->w, k->out};
    int64_t* st[3] = {k->in_st, k->w_st, k->out_st};
    for (int t = 0; t < 3; t++) {
      if (ds[t]->sizes[i] <= 0 || ds[t]->sizes[i] > INT32_MAX) return 0;
      if (ds[t]->strides[i] <= 0 && ds[t]->sizes[i] > 1) return 0;
      sz[t][i] = ds[t]->sizes[i];
      st[t][i] = ds[t]->strides[i] > 0 ? ds[t]->strides[i] : 1;
    }
  }
  for (int i = 0; i < k->nsp; i++) {
    k->s[i] = a->stride[i];
    k->d[i] = a->dilation[i];
    k->pl[i] = a->padding[i];
    /* right padding that gives exactly the output size (PyTorch's floor
     * drops the last partial window: then it is smaller than pl) */
    k->pr[i] = (k->out[2 + i] - 1) * k->s[i] + (k->w[2 + i] - 1) * k->d[i] + 1 - k->in[2 + i] - k->pl[i];
    if (k->pr[i] < 0) return 0;
  }
  return 1;
}

int cpu_conv_dnnl_forward(const bp_op_call_t* call, bp_status_t* out_status) {
  dnnl_key_t k;
  if (!key_make(call, &k)) return 0;
  pthread_mutex_lock(&g_lock);
  dnnl_entry_t* e = dnnl_on() ? cache_get(&k) : NULL;
  if (!e) {
    pthread_mutex_unlock(&g_lock);
    return 0;
  }
  void* stage[3] = {NULL, NULL, NULL};
  dnnl_memory_t user[3] = {NULL, NULL, NULL}, prim[3] = {NULL, NULL, NULL}, bias = NULL;
  dnnl_stream_t stream = NULL;
  void* ptr[3] = {cpu_desc_ptr(call->inputs[0]), cpu_desc_ptr(call->inputs[1]),
                  cpu_desc_ptr(call->outputs[0])};
  int ok = dnnl_stream_create(&stream, g_engine, dnnl_stream_default_flags) == dnnl_success;
  for (int i = 0; ok && i < 3; i++) {
    ok = dnnl_memory_create(&user[i], &e->user_md[i], g_engine, ptr[i]) == dnnl_success;
    if (ok && e->reorder[i]) {
      stage[i] = aligned_alloc(64, (e->stage_bytes[i] + 63) / 64 * 64);
      ok = stage[i] && dnnl_memory_create(&prim[i], &e->prim_md[i], g_engine, stage[i]) == dnnl_success;
    }
  }
  if (ok && k.has_bias)
    ok = dnnl_memory_create(&bias, &e->bias_md, g_engine, cpu_desc_ptr(call->inputs[2])) == dnnl_success;
  for (int i = 0; ok && i < 2; i++) {
    if (!e->reorder[i]) continue;
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, user[i]}, {DNNL_ARG_TO, prim[i]}};
    ok = dnnl_primitive_execute(e->reorder[i], stream, 2, ra) == dnnl_success;
  }
  if (ok) {
    dnnl_exec_arg_t ca[4] = {{DNNL_ARG_SRC, e->reorder[0] ? prim[0] : user[0]},
                             {DNNL_ARG_WEIGHTS, e->reorder[1] ? prim[1] : user[1]},
                             {DNNL_ARG_DST, e->reorder[2] ? prim[2] : user[2]},
                             {DNNL_ARG_BIAS, bias}};
    ok = dnnl_primitive_execute(e->conv, stream, k.has_bias ? 4 : 3, ca) == dnnl_success;
  }
  if (ok && e->reorder[2]) {
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, prim[2]}, {DNNL_ARG_TO, user[2]}};
    ok = dnnl_primitive_execute(e->reorder[2], stream, 2, ra) == dnnl_success;
  }
  if (ok) ok = dnnl_stream_wait(stream) == dnnl_success;
  for (int i = 0; i < 3; i++) {
    if (user[i]) dnnl_memory_destroy(user[i]);
    if (prim[i]) dnnl_memory_destroy(prim[i]);
    free(stage[i]);
  }
  if (bias) dnnl_memory_destroy(bias);
  if (stream) dnnl_stream_destroy(stream);
  size_t staged = e->stage_bytes[0] + e->stage_bytes[1] + e->stage_bytes[2];
  pthread_mutex_unlock(&g_lock);
  *out_status = ok ? BP_OK
                   : cpu_error(BP_INTERNAL, "cpu: convolution: oneDNN failed to run a cached primitive "
                                            "(or no memory for its %zu staging bytes)", staged);
  return 1;
}

int cpu_conv_dnnl_built(void) { return 1; }

#else /* built without oneDNN */

int cpu_conv_dnnl_forward(const bp_op_call_t* call, bp_status_t* out_status) {
  (void)call, (void)out_status;
  return 0;
}

int cpu_conv_dnnl_built(void) { return 0; }

#endif
