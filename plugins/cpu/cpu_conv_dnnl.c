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
 * Threading: oneDNN (Debian's build) runs on OpenMP, and an OpenMP team
 * splits a convolution statically between its threads, so one thread
 * starved by anything else on the machine (OpenBLAS's threads spinning
 * after a GEMM, another process) holds the whole call back: on a loaded
 * 2-core machine that lost up to 10x to the im2col + GEMM path. So no
 * OpenMP team runs here: the call is cut into slices (runs of images, or
 * of output channels in blocks of 16 when the batch is smaller than the
 * pool), each slice is its own primitive made and run with a team of one
 * (omp_set_num_threads(1) on every thread that makes or runs one), and the
 * slices run on the plugin's pool (cpu_parallel_for), which hands work to
 * whichever thread is free. Primitives use user-mode scratchpads, one per
 * running slice: the library-mode scratchpad is per process.
 *
 * Primitives are cached per slice shape (creating one JIT-compiles its
 * kernels, milliseconds): up to CONV_DNNL_CACHE entries, the oldest
 * replaced first (never one that the same call still holds). One mutex
 * guards the cache and every call: two convolutions at once would only
 * oversubscribe the pool.
 *
 * The path is on by default in a build with oneDNN; BACKPLANE_CPU_DNNL=0 in
 * the environment (read once per process) turns it off, and every f32
 * convolution then takes the im2col + GEMM path.
 */
#include "cpu_conv_dnnl.h"
#include "cpu_gemm_dnnl.h"

#ifdef BP_CPU_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Up to 64 primitives (a ResNet-50 has about 20 convolution shapes, two
 * slices each); a call splits into at most CONV_DNNL_MAX_SLICES slices. */
enum { CONV_DNNL_CACHE = 64, CONV_DNNL_SP = 3, CONV_DNNL_MAX_SLICES = 16 };

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
  size_t scratch_bytes; /* the largest scratchpad of the primitives above */
} dnnl_entry_t;

/* A slice of the convolution: a run of images, or (batch smaller than the
 * pool) a run of output channels; its primitive sees only that part. */
typedef struct dnnl_slice {
  dnnl_entry_t* e;
  int64_t in_off, w_off, out_off, bias_off; /* elements from each operand's base */
} dnnl_slice_t;

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
    g_state = cpu_dnnl_wanted() ? 1 : -1;
    /* primitives live in our cache only: oneDNN's own process-wide cache
     * would keep them past the plugin's unload */
    if (g_state == 1 && dnnl_set_primitive_cache_capacity(0) != dnnl_success) g_state = -1;
    if (g_state == 1 && dnnl_engine_create(&g_engine, dnnl_cpu, 0) != dnnl_success) g_state = -1;
  }
  return g_state == 1;
}

/* Every primitive takes its scratchpad from the caller (user mode): the
 * library's default scratchpad is one per process, and slices of a call
 * run on several threads at once. Grows *scratch to the largest need. */
static dnnl_primitive_attr_t user_scratchpad(void) {
  dnnl_primitive_attr_t attr = NULL;
  if (dnnl_primitive_attr_create(&attr) != dnnl_success) return NULL;
  if (dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user) != dnnl_success) {
    dnnl_primitive_attr_destroy(attr);
    return NULL;
  }
  return attr;
}

static dnnl_status_t make_primitive(dnnl_primitive_desc_t pd, dnnl_primitive_t* out, size_t* scratch) {
  const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  size_t need = md ? dnnl_memory_desc_get_size(md) : 0;
  if (need > *scratch) *scratch = need;
  dnnl_status_t s = dnnl_primitive_create(out, pd);
  dnnl_primitive_desc_destroy(pd);
  return s;
}

static dnnl_status_t make_reorder(const dnnl_memory_desc_t* from, const dnnl_memory_desc_t* to,
                                  dnnl_primitive_t* out, size_t* scratch) {
  dnnl_primitive_desc_t pd;
  dnnl_primitive_attr_t attr = user_scratchpad();
  if (!attr) return dnnl_out_of_memory;
  dnnl_status_t s = dnnl_reorder_primitive_desc_create(&pd, from, g_engine, to, g_engine, attr);
  dnnl_primitive_attr_destroy(attr);
  return s != dnnl_success ? s : make_primitive(pd, out, scratch);
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
  dnnl_primitive_attr_t attr = user_scratchpad();
  if (!attr) return 0;
  dnnl_status_t stt = dnnl_primitive_desc_create(&pd, &cd, attr, g_engine, NULL);
  dnnl_primitive_attr_destroy(attr);
  if (stt != dnnl_success) return 0;
  dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md};
  for (int i = 0; i < 3; i++) e->prim_md[i] = *dnnl_primitive_desc_query_md(pd, q[i], 0);
  if (make_primitive(pd, &e->conv, &e->scratch_bytes) != dnnl_success) return 0;
  for (int i = 0; i < 3; i++) {
    if (dnnl_memory_desc_equal(&e->user_md[i], &e->prim_md[i])) continue;
    stt = i == 2 ? make_reorder(&e->prim_md[2], &e->user_md[2], &e->reorder[2], &e->scratch_bytes)
                 : make_reorder(&e->user_md[i], &e->prim_md[i], &e->reorder[i], &e->scratch_bytes);
    if (stt != dnnl_success) {
      entry_free(e);
      return 0;
    }
    e->stage_bytes[i] = dnnl_memory_desc_get_size(&e->prim_md[i]);
  }
  e->used = 1;
  return 1;
}

/* The entry for k, built when missing; never replaces an entry that
 * held[0..nheld) (earlier slices of the same call) still use. */
static dnnl_entry_t* cache_get(const dnnl_key_t* k, const dnnl_slice_t* held, int nheld) {
  for (int i = 0; i < CONV_DNNL_CACHE; i++)
    if (g_cache[i].used && !memcmp(&g_cache[i].key, k, sizeof *k)) return &g_cache[i];
  for (int tries = 0; tries < CONV_DNNL_CACHE; tries++) {
    dnnl_entry_t* e = &g_cache[g_next];
    g_next = (g_next + 1) % CONV_DNNL_CACHE;
    int busy = 0;
    for (int h = 0; h < nheld; h++) busy |= held[h].e == e;
    if (busy) continue;
    entry_free(e);
    return entry_build(e, k) ? e : NULL;
  }
  return NULL;
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

/* ---- one call, split over the plugin's pool --------------------------- */

typedef struct dnnl_run {
  dnnl_slice_t slice[CONV_DNNL_MAX_SLICES];
  unsigned char *in, *w, *out, *bias; /* the caller's operands */
  void* shared_w;            /* weights reordered once for every slice, or NULL */
  _Atomic int failed;
} dnnl_run_t;

/* A scratchpad of `bytes` (none when 0): the buffer and its memory object,
 * both the caller's to free. 0 when out of memory. */
static int scratch_make(size_t bytes, void** buf, dnnl_memory_t* mem) {
  *buf = NULL, *mem = NULL;
  if (!bytes) return 1;
  dnnl_memory_desc_t md;
  dnnl_dims_t n = {(dnnl_dim_t)bytes};
  *buf = aligned_alloc(64, (bytes + 63) / 64 * 64);
  return *buf && dnnl_memory_desc_init_by_tag(&md, 1, n, dnnl_u8, dnnl_x) == dnnl_success &&
         dnnl_memory_create(mem, &md, g_engine, *buf) == dnnl_success;
}

/* Runs slices [begin, end) on this thread: reorders in, convolution,
 * reorder out, each with one thread (see the file comment). */
static void run_slices(void* ctx, int64_t begin, int64_t end) {
  dnnl_run_t* r = ctx;
  omp_set_num_threads(1);
  for (int64_t i = begin; i < end && !r->failed; i++) {
    const dnnl_slice_t* sl = &r->slice[i];
    const dnnl_entry_t* e = sl->e;
    void* stage[3] = {NULL, NULL, NULL};
    dnnl_memory_t user[3] = {NULL, NULL, NULL}, prim[3] = {NULL, NULL, NULL}, bias = NULL, pad = NULL;
    dnnl_stream_t stream = NULL;
    void* scratch = NULL;
    void* ptr[3] = {r->in + sl->in_off * 4, r->w + sl->w_off * 4, r->out + sl->out_off * 4};
    int ok = dnnl_stream_create(&stream, g_engine, dnnl_stream_default_flags) == dnnl_success;
    for (int t = 0; ok && t < 3; t++) {
      ok = dnnl_memory_create(&user[t], &e->user_md[t], g_engine, ptr[t]) == dnnl_success;
      if (ok && e->reorder[t]) {
        int shared = t == 1 && r->shared_w;
        if (!shared) stage[t] = aligned_alloc(64, (e->stage_bytes[t] + 63) / 64 * 64);
        ok = (shared || stage[t]) &&
             dnnl_memory_create(&prim[t], &e->prim_md[t], g_engine, shared ? r->shared_w : stage[t]) ==
                 dnnl_success;
      }
    }
    if (ok && e->key.has_bias)
      ok = dnnl_memory_create(&bias, &e->bias_md, g_engine, r->bias + sl->bias_off * 4) == dnnl_success;
    if (ok) ok = scratch_make(e->scratch_bytes, &scratch, &pad);
    for (int t = 0; ok && t < 2; t++) {
      if (!e->reorder[t] || (t == 1 && r->shared_w)) continue;
      dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, user[t]}, {DNNL_ARG_TO, prim[t]}, {DNNL_ARG_SCRATCHPAD, pad}};
      ok = dnnl_primitive_execute(e->reorder[t], stream, pad ? 3 : 2, ra) == dnnl_success;
    }
    if (ok) {
      dnnl_exec_arg_t ca[5] = {{DNNL_ARG_SRC, e->reorder[0] ? prim[0] : user[0]},
                               {DNNL_ARG_WEIGHTS, e->reorder[1] ? prim[1] : user[1]},
                               {DNNL_ARG_DST, e->reorder[2] ? prim[2] : user[2]},
                               {DNNL_ARG_SCRATCHPAD, pad},
                               {DNNL_ARG_BIAS, bias}};
      ok = dnnl_primitive_execute(e->conv, stream, 4 + e->key.has_bias, ca) == dnnl_success;
    }
    if (ok && e->reorder[2]) {
      dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, prim[2]}, {DNNL_ARG_TO, user[2]}, {DNNL_ARG_SCRATCHPAD, pad}};
      ok = dnnl_primitive_execute(e->reorder[2], stream, pad ? 3 : 2, ra) == dnnl_success;
    }
    if (ok) ok = dnnl_stream_wait(stream) == dnnl_success;
    for (int t = 0; t < 3; t++) {
      if (user[t]) dnnl_memory_destroy(user[t]);
      if (prim[t]) dnnl_memory_destroy(prim[t]);
      free(stage[t]);
    }
    if (bias) dnnl_memory_destroy(bias);
    if (pad) dnnl_memory_destroy(pad);
    free(scratch);
    if (stream) dnnl_stream_destroy(stream);
    if (!ok) r->failed = 1;
  }
}

/* The key of slice [lo, hi) of the batch (by_channel 0) or of the output
 * channels (1), and the element offsets of its operands. */
static void slice_key(const dnnl_key_t* k, int by_channel, int64_t lo, int64_t hi, dnnl_key_t* sk,
                      dnnl_slice_t* sl) {
  *sk = *k;
  memset(sl, 0, sizeof *sl);
  if (by_channel) {
    sk->w[0] = sk->out[1] = hi - lo;
    sl->w_off = lo * k->w_st[0];
    sl->out_off = lo * k->out_st[1];
    sl->bias_off = lo;
  } else {
    sk->in[0] = sk->out[0] = hi - lo;
    sl->in_off = lo * k->in_st[0];
    sl->out_off = lo * k->out_st[0];
  }
}

/* How the call splits: slices of the batch when it has an image per
 * thread, else of the output channels (in blocks of 16, the primitive's
 * vector; not with groups, whose channels interleave per group); one slice
 * when neither divides. Returns the number of slices. */
static int plan_slices(const dnnl_key_t* k, int threads, int* by_channel, int64_t lo[], int64_t hi[]) {
  int64_t n = k->in[0], oc = k->out[1];
  int parts = threads < CONV_DNNL_MAX_SLICES ? threads : CONV_DNNL_MAX_SLICES;
  *by_channel = 0;
  if (n < parts) {
    int64_t blocks = oc / 16;
    if (k->groups == 1 && oc % 16 == 0 && blocks >= parts) *by_channel = 1;
    else parts = (int)(n < parts ? n : parts);
  }
  if (parts < 1) parts = 1;
  int64_t units = *by_channel ? oc / 16 : n, scale = *by_channel ? 16 : 1;
  for (int i = 0; i < parts; i++) {
    lo[i] = units * i / parts * scale;
    hi[i] = units * (i + 1) / parts * scale;
  }
  return parts;
}

int cpu_conv_dnnl_forward(const bp_op_call_t* call, bp_status_t* out_status) {
  dnnl_key_t k;
  if (!key_make(call, &k)) return 0;
  pthread_mutex_lock(&g_lock);
  if (!dnnl_on()) {
    pthread_mutex_unlock(&g_lock);
    return 0;
  }
  /* primitives made on this thread plan for one thread (the ICV is per thread) */
  omp_set_num_threads(1);
  int by_channel;
  int64_t lo[CONV_DNNL_MAX_SLICES], hi[CONV_DNNL_MAX_SLICES];
  int parts = plan_slices(&k, (int)cpu_pool_threads(), &by_channel, lo, hi);
  dnnl_run_t run = {.in = cpu_desc_ptr(call->inputs[0]), .w = cpu_desc_ptr(call->inputs[1]),
                    .out = cpu_desc_ptr(call->outputs[0]),
                    .bias = k.has_bias ? cpu_desc_ptr(call->inputs[2]) : NULL};
  for (int i = 0; i < parts; i++) {
    dnnl_key_t sk;
    slice_key(&k, by_channel, lo[i], hi[i], &sk, &run.slice[i]);
    run.slice[i].e = cache_get(&sk, run.slice, i);
    if (!run.slice[i].e) { /* oneDNN has no implementation: the im2col path */
      pthread_mutex_unlock(&g_lock);
      return 0;
    }
  }
  /* batch slices share the weights: reorder them once when every slice's
   * primitive wants the same layout */
  const dnnl_entry_t* e0 = run.slice[0].e;
  int share = !by_channel && parts > 1 && e0->reorder[1];
  for (int i = 1; share && i < parts; i++)
    share = dnnl_memory_desc_equal(&run.slice[i].e->prim_md[1], &e0->prim_md[1]);
  if (share) {
    run.shared_w = aligned_alloc(64, (e0->stage_bytes[1] + 63) / 64 * 64);
    dnnl_memory_t from = NULL, to = NULL, pad = NULL;
    dnnl_stream_t stream = NULL;
    void* scratch = NULL;
    int ok = run.shared_w && dnnl_stream_create(&stream, g_engine, dnnl_stream_default_flags) == dnnl_success &&
             dnnl_memory_create(&from, &e0->user_md[1], g_engine, run.w) == dnnl_success &&
             dnnl_memory_create(&to, &e0->prim_md[1], g_engine, run.shared_w) == dnnl_success &&
             scratch_make(e0->scratch_bytes, &scratch, &pad);
    dnnl_exec_arg_t ra[3] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, pad}};
    ok = ok && dnnl_primitive_execute(e0->reorder[1], stream, pad ? 3 : 2, ra) == dnnl_success &&
         dnnl_stream_wait(stream) == dnnl_success;
    if (from) dnnl_memory_destroy(from);
    if (to) dnnl_memory_destroy(to);
    if (pad) dnnl_memory_destroy(pad);
    free(scratch);
    if (stream) dnnl_stream_destroy(stream);
    if (!ok) run.failed = 1;
  }
  if (!run.failed) cpu_parallel_for(parts, 1, run_slices, &run);
  free(run.shared_w);
  pthread_mutex_unlock(&g_lock);
  *out_status = !run.failed ? BP_OK
                            : cpu_error(BP_INTERNAL, "cpu: convolution: oneDNN failed to run a cached "
                                                     "primitive (or no memory for its staging)");
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
