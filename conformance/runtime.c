/* Runtime cases: the axes besides op results that every backend must get
 * right through the public application API.
 *
 *  - memory:       every memory space the device offers, small and large
 *                  buffers; a request above the capacity fails cleanly with
 *                  RESOURCE_EXHAUSTED; size 0 is INVALID_ARGUMENT; map/unmap
 *                  of HOST_VISIBLE spaces round-trips bytes
 *  - copy:         host <-> device of odd sizes at unaligned offsets with
 *                  guard bytes; device -> device within a buffer, also with
 *                  overlapping ranges (memmove semantics); a range outside a
 *                  buffer is OUT_OF_RANGE and changes no byte
 *  - stream_order: dependent ops on one stream, copies interleaved with ops
 *  - event:        cross-stream waits, event queries, elapsed time
 *  - multi_device: copies between two devices of the backend
 *  - errors:       an operand of another device, a bad output: rejected
 *                  with INVALID_ARGUMENT, the output untouched
 *
 * Op-based cases use add on f32 only, and only when the device's support
 * query says yes (else NOT_SUPPORTED). Host data are integer-valued floats
 * or seeded byte patterns, so every expected result is exact.
 *
 * Each case tracks what it creates in an rt_env_t; rt_env_free synchronizes
 * every stream first (host memory given to a stream-ordered copy must live
 * until the stream passes it), then releases everything.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conform.h"

enum rt_check {
  RT_ALLOC_SMALL,
  RT_ALLOC_LARGE,
  RT_OVER_CAPACITY,
  RT_SIZE_ZERO,
  RT_MAP,
  RT_COPY_ROUNDTRIP,
  RT_COPY_D2D,
  RT_COPY_OUT_OF_RANGE,
  RT_STREAM_CHAIN,
  RT_STREAM_INTERLEAVED,
  RT_EVENT_CROSS_STREAM,
  RT_EVENT_QUERY,
  RT_EVENT_ELAPSED,
  RT_EVENT_UNRECORDED,
  RT_MD_COPY,
  RT_MD_FOREIGN_OPERAND,
  RT_MD_WRONG_STREAM,
  RT_ERR_BAD_OUTPUT,
  RT_CHECK_COUNT_
};

/* Out-of-range copy variants (rt_args[0] of RT_COPY_OUT_OF_RANGE). */
enum {
  OOR_H2D_TAIL,
  OOR_D2H_PAST_END,
  OOR_D2D_DST_TAIL,
  OOR_OFFSET_OVERFLOW,
  OOR_SIZE_OVERFLOW,
  OOR_COUNT_
};
/* RT_MD_COPY flags (rt_args[3]). */
enum { MD_FROM_DEVICE1 = 1, MD_STREAM_ON_DST = 2 };

#define RT_GUARD 64u                              /* guard bytes after a copy target */
#define RT_LARGE_BYTES ((UINT64_C(16) << 20) + 3) /* a "large" buffer, odd on purpose */
#define RT_MAX_OBJECTS 16

static const char* const kAreaNames[BPC_RT_AREA_COUNT_] = {
    "runtime/memory", "runtime/copy",         "runtime/stream_order",
    "runtime/event",  "runtime/multi_device", "runtime/errors",
    "collectives"};

static const char* const kKindNames[BP_MEMORY_KIND_COUNT_] = {"device", "host_pinned",
                                                              "host_pageable", "managed"};

int bpc_is_runtime_op(uint32_t op_id) {
  return op_id >= BPC_RUNTIME_OP_BASE && op_id < BPC_RUNTIME_OP(BPC_RT_AREA_COUNT_);
}

const char* bpc_group_name(uint32_t op_id) {
  if (bpc_is_runtime_op(op_id)) return kAreaNames[op_id - BPC_RUNTIME_OP_BASE];
  const bpc_op_entry_t* e = bpc_op_entry(op_id);
  return e && e->name ? e->name : "?";
}

/* ------------------------------------------------------------------------ */
/* Target and generation                                                     */
/* ------------------------------------------------------------------------ */
bp_status_t bpc_runtime_target_query(bp_device_t* device, bpc_runtime_target_t* out) {
  if (!device || !out) return BP_INVALID_ARGUMENT;
  memset(out, 0, sizeof *out);
  bp_plugin_info_t info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  bp_status_t st = bp_plugin_get_info(bp_device_plugin(device), &info);
  if (st != BP_OK) return st;
  out->device_count = info.device_count;
  uint32_t n = 0;
  st = bp_device_memory_spaces(device, BP_MEMORY_KIND_COUNT_, sizeof out->spaces[0], out->spaces, &n);
  if (st != BP_OK) return st;
  out->num_spaces = n < BP_MEMORY_KIND_COUNT_ ? n : BP_MEMORY_KIND_COUNT_;
  return BP_OK;
}

typedef struct rt_gen {
  bpc_case_list_t* list;
  bp_status_t status;
} rt_gen_t;

static bpc_case_t* rt_new(rt_gen_t* g, uint32_t area, uint32_t check, const char* label,
                          const char* fmt, ...) __attribute__((format(printf, 5, 6)));

/* Appends case "runtime/<area>/<variant>". */
static bpc_case_t* rt_new(rt_gen_t* g, uint32_t area, uint32_t check, const char* label,
                          const char* fmt, ...) {
  if (g->status != BP_OK) return NULL;
  bpc_case_t* c = bpc_case_list_append(g->list);
  if (!c) {
    g->status = BP_RESOURCE_EXHAUSTED;
    return NULL;
  }
  c->op_id = BPC_RUNTIME_OP(area);
  c->rt_check = check;
  char variant[64];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(variant, sizeof variant, fmt, ap);
  va_end(ap);
  snprintf(c->id, sizeof c->id, "%s/%s", kAreaNames[area], variant);
  snprintf(c->dtype_label, sizeof c->dtype_label, "%s", label);
  c->seed = bpc_hash_string(c->id);
  return c;
}

static void rt_args(bpc_case_t* c, uint64_t a0, uint64_t a1, uint64_t a2, uint64_t a3) {
  if (!c) return;
  c->rt_args[0] = a0;
  c->rt_args[1] = a1;
  c->rt_args[2] = a2;
  c->rt_args[3] = a3;
}

/* Cases of memory space `index`, named after its kind ("device"); a second
 * space of one kind is "device1", and so on. */
static void gen_memory(rt_gen_t* g, const bp_memory_space_info_t* spaces, uint32_t index) {
  const bp_memory_space_info_t* s = &spaces[index];
  if (s->kind >= BP_MEMORY_KIND_COUNT_) return;
  uint32_t same = 0;
  for (uint32_t i = 0; i < index; i++) same += spaces[i].kind == s->kind;
  char kind_buf[32];
  if (same) snprintf(kind_buf, sizeof kind_buf, "%s%u", kKindNames[s->kind], same);
  else snprintf(kind_buf, sizeof kind_buf, "%s", kKindNames[s->kind]);
  const char* kind = kind_buf;
  uint64_t cap = s->capacity_bytes;
  uint64_t large = RT_LARGE_BYTES;
  if (cap && cap / 4 < large) large = cap / 4 > 4097 * 2 ? cap / 4 : 4097 * 2;
  uint32_t checks[] = {RT_ALLOC_SMALL, RT_ALLOC_LARGE, RT_OVER_CAPACITY, RT_OVER_CAPACITY,
                       RT_SIZE_ZERO};
  const char* names[] = {"alloc_small", "alloc_large", "over_capacity", "far_over_capacity",
                         "size_zero"};
  /* 0 = the space reports no capacity: the refusal cases are SKIPPED. */
  int known = cap > 0 && cap < UINT64_MAX / 4;
  uint64_t arg[] = {0, large, known ? cap + 1 : 0,
                    known ? (cap * 2 > (UINT64_C(1) << 62) ? cap * 2 : UINT64_C(1) << 62) : 0, 0};
  for (size_t k = 0; k < sizeof checks / sizeof checks[0]; k++) {
    bpc_case_t* c = rt_new(g, BPC_RT_MEMORY, checks[k], kind, "%s/%s", kind, names[k]);
    rt_args(c, arg[k], cap, 0, 0);
    if (c) {
      c->rt_memory_kind = s->kind;
      c->rt_memory_space = index;
    }
  }
  if (s->flags & BP_MEMORY_FLAG_HOST_VISIBLE) {
    bpc_case_t* c = rt_new(g, BPC_RT_MEMORY, RT_MAP, kind, "%s/map_roundtrip", kind);
    if (c) {
      c->rt_memory_kind = s->kind;
      c->rt_memory_space = index;
    }
  }
}

bp_status_t bpc_runtime_cases_generate(const bpc_runtime_target_t* t, bpc_case_list_t* list) {
  if (!t || !list) return BP_INVALID_ARGUMENT;
  rt_gen_t g = {list, BP_OK};
  for (uint32_t k = 0; k < t->num_spaces && k < BP_MEMORY_KIND_COUNT_; k++)
    gen_memory(&g, t->spaces, k);

  /* Copies: {size, offset} round trips; {size, src, dst, two buffers}. */
  static const uint64_t kRound[][2] = {{1, 0},    {1, 7},    {3, 1},     {4, 0},
                                       {4097, 0}, {4097, 3}, {65541, 13}};
  for (size_t k = 0; k < sizeof kRound / sizeof kRound[0]; k++) {
    rt_args(rt_new(&g, BPC_RT_COPY, RT_COPY_ROUNDTRIP, "bytes", "roundtrip/%llu_at_%llu",
                   (unsigned long long)kRound[k][0], (unsigned long long)kRound[k][1]),
            kRound[k][0], kRound[k][1], 0, 0);
  }
  /* Copies within one buffer whose ranges overlap have memmove semantics
   * (docs/ABI.md section 8): forward and backward, by one byte and by a
   * page, small and past the sizes where a backend splits a copy. */
  static const uint64_t kD2d[][4] = {{1, 0, 100, 0},
                                     {3, 5, 1001, 0},
                                     {4097, 1, 4099, 0},
                                     {4097, 4101, 3, 0},
                                     {1000, 0, 1000, 0},
                                     {4097, 3, 7, 1},
                                     {4097, 0, 1, 0},
                                     {4097, 1, 0, 0},
                                     {4097, 0, 4096, 0},
                                     {(3u << 20) + 5, 0, 4099, 0},
                                     {(3u << 20) + 5, 4099, 0, 0}};
  for (size_t k = 0; k < sizeof kD2d / sizeof kD2d[0]; k++) {
    const uint64_t size = kD2d[k][0], so = kD2d[k][1], dof = kD2d[k][2];
    const int overlap = !kD2d[k][3] && so < dof + size && dof < so + size;
    rt_args(rt_new(&g, BPC_RT_COPY, RT_COPY_D2D, "bytes", "d2d_%s/%llu_from_%llu_to_%llu",
                   kD2d[k][3] ? "two_buffers" : overlap ? "overlapping" : "same_buffer",
                   (unsigned long long)size, (unsigned long long)so, (unsigned long long)dof),
            size, so, dof, kD2d[k][3]);
  }
  static const char* const kOor[OOR_COUNT_] = {"h2d_tail", "d2h_past_end", "d2d_dst_tail",
                                               "offset_overflow", "size_overflow"};
  for (uint32_t k = 0; k < OOR_COUNT_; k++) {
    rt_args(rt_new(&g, BPC_RT_COPY, RT_COPY_OUT_OF_RANGE, "bytes", "out_of_range/%s", kOor[k]), k,
            0, 0, 0);
  }

  /* Stream order and events: {elements, iterations}. */
  rt_args(rt_new(&g, BPC_RT_STREAM_ORDER, RT_STREAM_CHAIN, "f32", "chain_100"), 1031, 100, 0, 0);
  rt_args(rt_new(&g, BPC_RT_STREAM_ORDER, RT_STREAM_CHAIN, "f32", "small_chain_1000"), 3, 1000, 0,
          0);
  rt_args(rt_new(&g, BPC_RT_STREAM_ORDER, RT_STREAM_INTERLEAVED, "f32", "copies_between_ops"), 4097,
          8, 0, 0);
  rt_args(rt_new(&g, BPC_RT_EVENT, RT_EVENT_CROSS_STREAM, "f32", "cross_stream_wait"), 4096, 100, 0,
          0);
  rt_args(rt_new(&g, BPC_RT_EVENT, RT_EVENT_QUERY, "f32", "query"), 4096, 50, 0, 0);
  rt_args(rt_new(&g, BPC_RT_EVENT, RT_EVENT_ELAPSED, "f32", "elapsed_time"), 4096, 20, 0, 0);
  rt_new(&g, BPC_RT_EVENT, RT_EVENT_UNRECORDED, "bytes", "wait_unrecorded");

  if (t->device_count >= 2) {
    /* {size, src offset, dst offset, flags}. */
    static const uint64_t kMd[][4] = {{4097, 3, 5, MD_FROM_DEVICE1 | MD_STREAM_ON_DST},
                                      {1, 0, 7, MD_FROM_DEVICE1},
                                      {4097, 1, 0, 0},
                                      {3, 2, 9, MD_STREAM_ON_DST}};
    for (size_t k = 0; k < sizeof kMd / sizeof kMd[0]; k++) {
      int from1 = (kMd[k][3] & MD_FROM_DEVICE1) != 0;
      rt_args(rt_new(&g, BPC_RT_MULTI_DEVICE, RT_MD_COPY, "bytes", "copy_%s/%llu_stream_on_%s",
                     from1 ? "1_to_0" : "0_to_1", (unsigned long long)kMd[k][0],
                     kMd[k][3] & MD_STREAM_ON_DST ? "dst" : "src"),
              kMd[k][0], kMd[k][1], kMd[k][2], kMd[k][3]);
    }
    rt_args(rt_new(&g, BPC_RT_ERRORS, RT_MD_FOREIGN_OPERAND, "f32", "foreign_input"), 0, 0, 0, 0);
    rt_args(rt_new(&g, BPC_RT_ERRORS, RT_MD_FOREIGN_OPERAND, "f32", "foreign_output"), 1, 0, 0, 0);
    rt_new(&g, BPC_RT_ERRORS, RT_MD_WRONG_STREAM, "bytes", "copy_on_foreign_stream");
  }
  rt_args(rt_new(&g, BPC_RT_ERRORS, RT_ERR_BAD_OUTPUT, "f32", "wrong_output_shape"), 0, 0, 0, 0);
  rt_args(rt_new(&g, BPC_RT_ERRORS, RT_ERR_BAD_OUTPUT, "f32", "output_overlaps_input"), 1, 0, 0, 0);
  return g.status;
}

/* ------------------------------------------------------------------------ */
/* Execution helpers                                                         */
/* ------------------------------------------------------------------------ */
typedef struct rt_env {
  bp_device_t* dev;
  bp_stream_t* stream;
  bp_buffer_t* buffers[RT_MAX_OBJECTS];
  bp_tensor_t* tensors[RT_MAX_OBJECTS];
  bp_stream_t* streams[RT_MAX_OBJECTS];
  bp_event_t* events[RT_MAX_OBJECTS];
  void* host[2 * RT_MAX_OBJECTS];
  uint32_t nbuf, nten, nstr, nev, nhost;
} rt_env_t;

static void rt_env_free(rt_env_t* e) {
  /* Drain first: pending copies may still read or write host memory. */
  if (e->stream) (void)bp_stream_synchronize(e->stream);
  for (uint32_t k = 0; k < e->nstr; k++) (void)bp_stream_synchronize(e->streams[k]);
  for (uint32_t k = 0; k < e->nten; k++) bp_tensor_release(e->tensors[k]);
  for (uint32_t k = 0; k < e->nbuf; k++) bp_buffer_release(e->buffers[k]);
  for (uint32_t k = 0; k < e->nev; k++) bp_event_release(e->events[k]);
  for (uint32_t k = 0; k < e->nstr; k++) bp_stream_release(e->streams[k]);
  for (uint32_t k = 0; k < e->nhost; k++) free(e->host[k]);
}

/* A call that must succeed; returns 1 (and scores FAIL) when it did not. */
static int rt_failed(bpc_result_t* r, bp_status_t st, const char* what) {
  if (st == BP_OK) return 0;
  bpc_result_set(r, st == BP_RESOURCE_EXHAUSTED ? BPC_RESOURCE_ERROR : BPC_FAIL, "%s: %s: %.150s", what,
      bp_status_name(st), bp_status_message());
  return 1;
}

/* A call that must fail with `want` and a message; returns 1 when it did not. */
static int rt_not_refused(bpc_result_t* r, bp_status_t st, bp_status_t want, const char* what) {
  const char* msg = bp_status_message();
  if (st == want && msg && msg[0]) return 0;
  if (st == want) {
    bpc_result_set(r, BPC_FAIL, "%s: %s without a message", what, bp_status_name(st));
  } else {
    bpc_result_set(r, BPC_FAIL, "%s: expected %s, got %s%s%.150s", what, bp_status_name(want),
        bp_status_name(st), st != BP_OK ? ": " : "", st != BP_OK ? msg : "");
  }
  return 1;
}

static void* rt_host(rt_env_t* e, uint64_t size, bpc_result_t* r) {
  void* p = e->nhost < 2 * RT_MAX_OBJECTS ? malloc(size ? (size_t)size : 1) : NULL;
  if (!p) {
    bpc_result_set(r, BPC_RESOURCE_ERROR, "host memory (%llu bytes)", (unsigned long long)size);
    return NULL;
  }
  e->host[e->nhost++] = p;
  return p;
}

/* Whether one more object fits in a tracking array holding `used`; scores
 * FAIL ("suite: too many <what>") when it does not. */
static int rt_room(uint32_t used, const char* what, bpc_result_t* r) {
  if (used < RT_MAX_OBJECTS) return 1;
  bpc_result_set(r, BPC_FAIL, "suite: too many %s", what);
  return 0;
}

static bp_stream_t* rt_stream(rt_env_t* e, bp_device_t* dev, bpc_result_t* r) {
  bp_stream_t* s = NULL;
  if (!rt_room(e->nstr, "streams", r) ||
      rt_failed(r, bp_stream_create(dev, NULL, &s), "bp_stream_create"))
    return NULL;
  e->streams[e->nstr++] = s;
  return s;
}

static bp_event_t* rt_event(rt_env_t* e, bp_device_t* dev, uint32_t flags, bpc_result_t* r) {
  bp_event_t* ev = NULL;
  bp_event_create_info_t info = {.struct_size = sizeof info, .flags = flags};
  if (!rt_room(e->nev, "events", r) ||
      rt_failed(r, bp_event_create(dev, &info, &ev), "bp_event_create"))
    return NULL;
  e->events[e->nev++] = ev;
  return ev;
}

/* A buffer in memory space `space` (0: the default device-local one). */
static bp_buffer_t* rt_buffer(rt_env_t* e, bp_device_t* dev, uint32_t space, uint64_t size,
                              bpc_result_t* r) {
  bp_buffer_t* b = NULL;
  if (!rt_room(e->nbuf, "buffers", r)) return NULL;
  char what[96];
  snprintf(what, sizeof what, "bp_buffer_allocate(space %u, %llu)", space, (unsigned long long)size);
  if (rt_failed(r, bp_buffer_allocate(dev, space, size, &b), what)) return NULL;
  e->buffers[e->nbuf++] = b;
  return b;
}

/* A dense f32 vector of n elements. */
static bp_tensor_t* rt_tensor(rt_env_t* e, bp_device_t* dev, int64_t n, bpc_result_t* r) {
  bp_tensor_t* t = NULL;
  if (!rt_room(e->nten, "tensors", r) ||
      rt_failed(r, bp_tensor_create(dev, BP_DTYPE_F32, 1, &n, &t), "bp_tensor_create(f32)"))
    return NULL;
  e->tensors[e->nten++] = t;
  return t;
}

/* Seeded bytes; `salt` tells apart several patterns of one case. */
static void rt_fill(const bpc_case_t* c, uint64_t salt, uint8_t* p, uint64_t size) {
  bpc_rng_t rng;
  bpc_rng_seed(&rng, c->seed ^ (salt * UINT64_C(0x9E3779B97F4A7C15)));
  for (uint64_t k = 0; k < size; k++) p[k] = (uint8_t)(bpc_rng_next(&rng) >> 56);
}

/* Integer-valued floats in [-500, 500]: every sum the cases form is exact. */
static float* rt_values(rt_env_t* e, const bpc_case_t* c, uint64_t salt, int64_t n,
                        bpc_result_t* r) {
  float* v = rt_host(e, (uint64_t)n * sizeof(float), r);
  if (!v) return NULL;
  bpc_rng_t rng;
  bpc_rng_seed(&rng, c->seed ^ (salt * UINT64_C(0xD1B54A32D192ED03)));
  for (int64_t k = 0; k < n; k++) v[k] = (float)bpc_rng_int(&rng, -500, 500);
  return v;
}

/* Compares bytes; [lo, hi) is where data (not guard bytes) belong. */
static int rt_bytes_differ(bpc_result_t* r, const uint8_t* got, const uint8_t* want, uint64_t size,
                           uint64_t lo, uint64_t hi, const char* what) {
  uint64_t k = 0;
  while (k < size && got[k] == want[k]) k++;
  if (k == size) return 0;
  const char* place = lo == hi  ? ""
                      : k < lo  ? " (before the copied range)"
                      : k >= hi ? " (after the copied range)"
                                : " (inside the copied range)";
  bpc_result_set(r, BPC_FAIL, "%s: byte %llu%s is 0x%02x, expected 0x%02x", what, (unsigned long long)k, place,
      got[k], want[k]);
  return 1;
}

static int rt_floats_differ(bpc_result_t* r, const float* got, const float* want, int64_t n,
                            const char* what) {
  for (int64_t k = 0; k < n; k++) {
    if (got[k] != want[k]) {
      int64_t bad = 0;
      for (int64_t j = k; j < n; j++) bad += got[j] != want[j];
      bpc_result_set(r, BPC_FAIL, "%s: element %lld is %.9g, expected %.9g (%lld of %lld elements wrong)",
          what, (long long)k, (double)got[k], (double)want[k], (long long)bad, (long long)n);
      return 1;
    }
  }
  return 0;
}

static int rt_upload(bpc_result_t* r, bp_stream_t* s, bp_buffer_t* b, uint64_t off, const void* src,
                     uint64_t size) {
  if (rt_failed(r, bp_copy_host_to_buffer(s, src, b, off, size), "bp_copy_host_to_buffer"))
    return 1;
  return rt_failed(r, bp_stream_synchronize(s), "bp_stream_synchronize after an upload");
}

static int rt_download(bpc_result_t* r, bp_stream_t* s, bp_buffer_t* b, uint64_t off, void* dst,
                       uint64_t size) {
  if (rt_failed(r, bp_copy_buffer_to_host(s, b, off, dst, size), "bp_copy_buffer_to_host"))
    return 1;
  return rt_failed(r, bp_stream_synchronize(s), "bp_stream_synchronize after a download");
}

static const bp_binary_attrs_t* rt_add_attrs(void) {
  static const bp_binary_attrs_t attrs = {.struct_size = sizeof(bp_binary_attrs_t)};
  return &attrs;
}

/* 0 when the device supports add(a, b) -> out; else scores NOT_SUPPORTED
 * (or FAIL when the query itself fails) and returns 1. */
static int rt_add_unsupported(bp_device_t* dev, const bp_tensor_t* a, const bp_tensor_t* b,
                              const bp_tensor_t* out, bpc_result_t* r) {
  bp_tensor_desc_t in[2], o;
  memset(in, 0, sizeof in);
  memset(&o, 0, sizeof o);
  in[0].struct_size = in[1].struct_size = o.struct_size = sizeof o;
  bp_tensor_get_desc(a, &in[0]);
  bp_tensor_get_desc(b, &in[1]);
  bp_tensor_get_desc(out, &o);
  const bp_tensor_desc_t* in_ptr[2] = {&in[0], &in[1]};
  const bp_tensor_desc_t* out_ptr = &o;
  bp_op_call_t call;
  memset(&call, 0, sizeof call);
  call.struct_size = sizeof call;
  call.op_id = BP_OP_add;
  call.num_inputs = 2;
  call.num_outputs = 1;
  call.compute_dtype = BP_DTYPE_F32;
  call.inputs = in_ptr;
  call.outputs = &out_ptr;
  call.attrs = rt_add_attrs();
  bp_support_t sup;
  memset(&sup, 0, sizeof sup);
  sup.struct_size = sizeof sup;
  if (rt_failed(r, bp_device_query_support(dev, &call, &sup), "bp_device_query_support(add f32)"))
    return 1;
  if (sup.supported) return 0;
  bpc_result_set(r, BPC_NOT_SUPPORTED, "add on f32 is not supported: %.200s", sup.message);
  return 1;
}

static bp_status_t rt_add(bp_stream_t* s, const bp_tensor_t* a, const bp_tensor_t* b,
                          bp_tensor_t* out) {
  const bp_tensor_t* ins[2] = {a, b};
  return bp_op_run(s, BP_OP_add, ins, 2, rt_add_attrs(), &out, 1);
}

/* x (n elements) and ones on `dev`, x uploaded from v; checks add support. */
static int rt_x_and_ones(rt_env_t* e, bp_device_t* dev, bp_stream_t* s, const bpc_case_t* c,
                         int64_t n, bp_tensor_t** x, bp_tensor_t** ones, float** v,
                         bpc_result_t* r) {
  if (!(*x = rt_tensor(e, dev, n, r)) || !(*ones = rt_tensor(e, dev, n, r))) return 1;
  if (rt_add_unsupported(dev, *x, *ones, *x, r)) return 1;
  float* one = rt_host(e, (uint64_t)n * sizeof(float), r);
  if (!one || !(*v = rt_values(e, c, 1, n, r))) return 1;
  for (int64_t k = 0; k < n; k++) one[k] = 1.0f;
  uint64_t bytes = (uint64_t)n * sizeof(float);
  if (rt_failed(r, bp_tensor_write(s, *ones, one, bytes), "bp_tensor_write(ones)")) return 1;
  return rt_failed(r, bp_tensor_write(s, *x, *v, bytes), "bp_tensor_write(x)");
}

/* Enqueues `iters` in-place adds x += ones on `s`. */
static int rt_chain(bpc_result_t* r, bp_stream_t* s, bp_tensor_t* x, const bp_tensor_t* ones,
                    uint64_t iters) {
  for (uint64_t k = 0; k < iters; k++) {
    if (rt_failed(r, rt_add(s, x, ones, x), "bp_op_run(add, in place)")) return 1;
  }
  return 0;
}

/* Reads x (n floats) and compares with v + delta. */
static int rt_expect_x(rt_env_t* e, bpc_result_t* r, bp_stream_t* s, const bp_tensor_t* x,
                       const float* v, int64_t n, float delta, const char* what) {
  float* got = rt_host(e, (uint64_t)n * sizeof(float), r);
  float* want = rt_host(e, (uint64_t)n * sizeof(float), r);
  if (!got || !want) return 1;
  if (rt_failed(r, bp_tensor_read(s, x, got, (uint64_t)n * sizeof(float)), "bp_tensor_read"))
    return 1;
  for (int64_t k = 0; k < n; k++) want[k] = v[k] + delta;
  return rt_floats_differ(r, got, want, n, what);
}

static bp_device_t* rt_second_device(bp_device_t* dev, bpc_result_t* r) {
  bp_device_t* d1 = NULL;
  bp_status_t st = bp_plugin_device(bp_device_plugin(dev), 1, &d1);
  if (st != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "the backend reported two devices, but device 1 is not there: %s: %.150s",
        bp_status_name(st), bp_status_message());
    return NULL;
  }
  return d1;
}

static double rt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Checks                                                                    */
/* ------------------------------------------------------------------------ */
typedef void (*rt_fn)(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r);

/* Allocates `size` bytes of the case's kind, writes patterns at the start
 * and the end and reads them back. */
static void rt_alloc_and_touch(rt_env_t* e, const bpc_case_t* c, uint64_t size, bpc_result_t* r) {
  bp_buffer_t* b = rt_buffer(e, e->dev, c->rt_memory_space, size, r);
  if (!b) return;
  if (bp_buffer_size(b) != size || bp_buffer_device(b) != e->dev) {
    bpc_result_set(r, BPC_FAIL, "buffer of %llu bytes reports size %llu and device %s",
        (unsigned long long)size, (unsigned long long)bp_buffer_size(b),
        bp_buffer_device(b) ? bp_device_name(bp_buffer_device(b)) : "NULL");
    return;
  }
  uint64_t n = size < 4097 ? size : 4097;
  uint64_t offs[2] = {0, size - n};
  for (int k = 0; k < 2; k++) {
    uint8_t* src = rt_host(e, n, r);
    uint8_t* back = rt_host(e, n, r);
    if (!src || !back) return;
    rt_fill(c, (uint64_t)k + 10, src, n);
    memset(back, 0, n);
    if (rt_upload(r, e->stream, b, offs[k], src, n) ||
        rt_download(r, e->stream, b, offs[k], back, n))
      return;
    char what[96];
    snprintf(what, sizeof what, "%llu-byte buffer, %llu bytes at offset %llu",
             (unsigned long long)size, (unsigned long long)n, (unsigned long long)offs[k]);
    if (rt_bytes_differ(r, back, src, n, 0, n, what)) return;
  }
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_alloc_small(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  static const uint64_t kSizes[] = {1, 3, 64, 4097};
  for (size_t k = 0; k < sizeof kSizes / sizeof kSizes[0]; k++) {
    rt_alloc_and_touch(e, c, kSizes[k], r);
    if (r->status != BPC_PASS) return;
  }
}

static void check_alloc_large(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  rt_alloc_and_touch(e, c, c->rt_args[0], r);
}

static void check_over_capacity(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  uint64_t want = c->rt_args[0], cap = c->rt_args[1];
  if (want == 0) {
    bpc_result_set(r, BPC_SKIPPED, "the %s space reports no capacity", kKindNames[c->rt_memory_kind]);
    return;
  }
  static char sentinel;
  bp_buffer_t* b = (bp_buffer_t*)(void*)&sentinel; /* must stay untouched */
  bp_status_t st = bp_buffer_allocate(e->dev, c->rt_memory_space, want, &b);
  if (st == BP_OK) {
    bp_buffer_release(b);
    bpc_result_set(r, BPC_FAIL, "allocating %llu bytes succeeded although the %s space's capacity is %llu",
        (unsigned long long)want, kKindNames[c->rt_memory_kind], (unsigned long long)cap);
    return;
  }
  char what[128];
  snprintf(what, sizeof what, "bp_buffer_allocate(%llu bytes, capacity %llu)",
           (unsigned long long)want, (unsigned long long)cap);
  if (rt_not_refused(r, st, BP_RESOURCE_EXHAUSTED, what)) return;
  if (b != (bp_buffer_t*)(void*)&sentinel) {
    bpc_result_set(r, BPC_FAIL, "%s failed but wrote its out_buffer", what);
    return;
  }
  /* Clean: the device still allocates afterwards. */
  rt_alloc_and_touch(e, c, 4096, r);
}

/* A zero-size buffer is valid (what an empty tensor lives in): it
 * allocates, reports size 0, takes an empty copy and refuses a one-byte one. */
static void check_size_zero(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  bp_buffer_t* b = NULL;
  uint8_t byte = 0x5a;
  if (rt_failed(r, bp_buffer_allocate(e->dev, c->rt_memory_space, 0, &b),
                "bp_buffer_allocate(0 bytes)"))
    return;
  if (bp_buffer_size(b) != 0) {
    bpc_result_set(r, BPC_FAIL, "a zero-size buffer reports %llu bytes",
                   (unsigned long long)bp_buffer_size(b));
  } else if (!rt_failed(r, bp_copy_host_to_buffer(e->stream, &byte, b, 0, 0),
                        "an empty copy into a zero-size buffer") &&
             !rt_not_refused(r, bp_copy_host_to_buffer(e->stream, &byte, b, 0, 1),
                             BP_OUT_OF_RANGE, "a one-byte copy into a zero-size buffer") &&
             !rt_failed(r, bp_stream_synchronize(e->stream), "bp_stream_synchronize")) {
    bpc_result_set(r, BPC_PASS, "%s", "");
  }
  bp_buffer_release(b);
}

static void check_map(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  const uint64_t size = 4097;
  bp_buffer_t* b = rt_buffer(e, e->dev, c->rt_memory_space, size, r);
  uint8_t* a = rt_host(e, size, r);
  uint8_t* bb = rt_host(e, size, r);
  uint8_t* back = rt_host(e, size, r);
  if (!b || !a || !bb || !back) return;
  rt_fill(c, 1, a, size);
  rt_fill(c, 2, bb, size);
  /* Host writes through a mapping are seen by a device-side read. */
  void* p = NULL;
  if (rt_failed(r, bp_buffer_map(b, 0, size, &p), "bp_buffer_map(whole buffer)")) return;
  memcpy(p, a, size);
  if (rt_failed(r, bp_buffer_unmap(b), "bp_buffer_unmap")) return;
  if (rt_download(r, e->stream, b, 0, back, size)) return;
  if (rt_bytes_differ(r, back, a, size, 0, size, "bytes written through a mapping, read by a copy"))
    return;
  /* Device-side writes are seen through a mapping at an offset. */
  if (rt_upload(r, e->stream, b, 0, bb, size)) return;
  if (rt_failed(r, bp_buffer_map(b, 3, 1000, &p), "bp_buffer_map(offset 3, 1000 bytes)")) return;
  memcpy(back, p, 1000);
  if (rt_failed(r, bp_buffer_unmap(b), "bp_buffer_unmap")) return;
  if (rt_bytes_differ(r, back, bb + 3, 1000, 0, 1000,
                      "bytes uploaded by a copy, read through a mapping at offset 3"))
    return;
  /* A range past the end is refused. */
  p = NULL;
  bp_status_t st = bp_buffer_map(b, size - 1, 2, &p);
  if (st == BP_OK) (void)bp_buffer_unmap(b);
  if (rt_not_refused(r, st, BP_OUT_OF_RANGE, "bp_buffer_map(a range past the end)")) return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_copy_roundtrip(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  uint64_t size = c->rt_args[0], off = c->rt_args[1], total = off + size + RT_GUARD;
  bp_buffer_t* b = rt_buffer(e, e->dev, 0, total, r);
  uint8_t* want = rt_host(e, total, r);
  uint8_t* got = rt_host(e, total, r);
  uint8_t* data = rt_host(e, size, r);
  uint8_t* host = rt_host(e, size + 2 * RT_GUARD, r);
  if (!b || !want || !got || !data || !host) return;
  bpc_image_fill_guard(want, total);
  rt_fill(c, 1, data, size);
  if (rt_upload(r, e->stream, b, 0, want, total)) return;
  /* host -> device at the offset; whole buffer back. */
  memcpy(want + off, data, size);
  if (rt_upload(r, e->stream, b, off, data, size) || rt_download(r, e->stream, b, 0, got, total))
    return;
  if (rt_bytes_differ(r, got, want, total, off, off + size, "buffer after host->device")) return;
  /* device -> host from the offset into a host area with guards. */
  bpc_image_fill_guard(host, size + 2 * RT_GUARD);
  uint8_t* host_want = rt_host(e, size + 2 * RT_GUARD, r);
  if (!host_want) return;
  memcpy(host_want, host, size + 2 * RT_GUARD);
  memcpy(host_want + RT_GUARD, data, size);
  if (rt_download(r, e->stream, b, off, host + RT_GUARD, size)) return;
  if (rt_bytes_differ(r, host, host_want, size + 2 * RT_GUARD, RT_GUARD, RT_GUARD + size,
                      "host memory after device->host"))
    return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_copy_d2d(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  uint64_t size = c->rt_args[0], so = c->rt_args[1], dof = c->rt_args[2];
  int two = c->rt_args[3] != 0;
  uint64_t total = (so > dof ? so : dof) + size + RT_GUARD;
  bp_buffer_t* src = rt_buffer(e, e->dev, 0, total, r);
  bp_buffer_t* dst = two ? rt_buffer(e, e->dev, 0, total, r) : src;
  uint8_t* img_src = rt_host(e, total, r);
  uint8_t* want = rt_host(e, total, r);
  uint8_t* got = rt_host(e, total, r);
  if (!src || !dst || !img_src || !want || !got) return;
  rt_fill(c, 1, img_src, total);
  if (two)
    bpc_image_fill_guard(want, total);
  else
    memcpy(want, img_src, total);
  if (rt_upload(r, e->stream, src, 0, img_src, total)) return;
  if (two && rt_upload(r, e->stream, dst, 0, want, total)) return;
  memcpy(want + dof, img_src + so, size);
  if (rt_failed(r, bp_copy_buffer(e->stream, src, so, dst, dof, size), "bp_copy_buffer")) return;
  if (rt_download(r, e->stream, dst, 0, got, total)) return;
  if (rt_bytes_differ(r, got, want, total, dof, dof + size, "destination after device->device"))
    return;
  if (two) {
    if (rt_download(r, e->stream, src, 0, got, total)) return;
    if (rt_bytes_differ(r, got, img_src, total, 0, 0,
                        "source after device->device (must not change)"))
      return;
  }
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_copy_out_of_range(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  const uint64_t size = 4096;
  bp_buffer_t* b = rt_buffer(e, e->dev, 0, size, r);
  bp_buffer_t* b2 = rt_buffer(e, e->dev, 0, size, r);
  uint8_t* img = rt_host(e, size, r);
  uint8_t* got = rt_host(e, size, r);
  uint8_t* host = rt_host(e, size, r);
  uint8_t* host_img = rt_host(e, size, r);
  if (!b || !b2 || !img || !got || !host || !host_img) return;
  rt_fill(c, 1, img, size);
  rt_fill(c, 2, host_img, size);
  memcpy(host, host_img, size);
  if (rt_upload(r, e->stream, b, 0, img, size) || rt_upload(r, e->stream, b2, 0, img, size)) return;
  bp_status_t st = BP_OK;
  const char* what = "";
  switch (c->rt_args[0]) {
    case OOR_H2D_TAIL:
      st = bp_copy_host_to_buffer(e->stream, host, b, size - 96, 97);
      what = "host->device of 97 bytes at offset size-96";
      break;
    case OOR_D2H_PAST_END:
      st = bp_copy_buffer_to_host(e->stream, b, size, host, 1);
      what = "device->host of 1 byte at offset size";
      break;
    case OOR_D2D_DST_TAIL:
      st = bp_copy_buffer(e->stream, b2, 0, b, size - 1, 2);
      what = "device->device of 2 bytes to offset size-1";
      break;
    case OOR_OFFSET_OVERFLOW:
      st = bp_copy_host_to_buffer(e->stream, host, b, UINT64_MAX, 2);
      what = "host->device at offset 2^64-1 (offset + size wraps)";
      break;
    default:
      st = bp_copy_buffer(e->stream, b2, 1, b, 0, UINT64_MAX);
      what = "device->device of 2^64-1 bytes (offset + size wraps)";
      break;
  }
  if (rt_not_refused(r, st, BP_OUT_OF_RANGE, what)) return;
  if (rt_failed(r, bp_stream_synchronize(e->stream), "bp_stream_synchronize after a refused copy"))
    return;
  if (rt_download(r, e->stream, b, 0, got, size)) return;
  if (rt_bytes_differ(r, got, img, size, 0, 0, "buffer after a refused copy (must not change)"))
    return;
  if (rt_bytes_differ(r, host, host_img, size, 0, 0,
                      "host memory after a refused copy (must not change)"))
    return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_stream_chain(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  int64_t n = (int64_t)c->rt_args[0];
  uint64_t iters = c->rt_args[1];
  bp_tensor_t *x, *ones;
  float* v;
  if (rt_x_and_ones(e, e->dev, e->stream, c, n, &x, &ones, &v, r)) return;
  if (rt_chain(r, e->stream, x, ones, iters)) return;
  if (rt_failed(r, bp_stream_synchronize(e->stream), "bp_stream_synchronize after the chain"))
    return;
  char what[64];
  snprintf(what, sizeof what, "x after %llu in-place adds of 1", (unsigned long long)iters);
  if (rt_expect_x(e, r, e->stream, x, v, n, (float)iters, what)) return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

/* Per round, without synchronizing: upload new values, two adds, download. */
static void check_stream_interleaved(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  int64_t n = (int64_t)c->rt_args[0];
  uint32_t rounds = (uint32_t)c->rt_args[1];
  bp_tensor_t *x, *ones;
  float* v;
  if (rounds > 8) rounds = 8;
  if (rt_x_and_ones(e, e->dev, e->stream, c, n, &x, &ones, &v, r)) return;
  uint64_t bytes = (uint64_t)n * sizeof(float);
  float *in[8], *out[8];
  for (uint32_t k = 0; k < rounds; k++) {
    if (!(in[k] = rt_values(e, c, 100 + k, n, r)) || !(out[k] = rt_host(e, bytes, r))) return;
  }
  bp_buffer_t* xb = bp_tensor_buffer(x);
  uint64_t xo = bp_tensor_byte_offset(x);
  for (uint32_t k = 0; k < rounds; k++) {
    if (rt_failed(r, bp_copy_host_to_buffer(e->stream, in[k], xb, xo, bytes),
                  "bp_copy_host_to_buffer") ||
        rt_chain(r, e->stream, x, ones, 2) ||
        rt_failed(r, bp_copy_buffer_to_host(e->stream, xb, xo, out[k], bytes),
                  "bp_copy_buffer_to_host")) {
      return;
    }
  }
  if (rt_failed(r, bp_stream_synchronize(e->stream), "bp_stream_synchronize")) return;
  for (uint32_t k = 0; k < rounds; k++) {
    for (int64_t j = 0; j < n; j++) in[k][j] += 2.0f;
    char what[64];
    snprintf(what, sizeof what, "round %u's download", k);
    if (rt_floats_differ(r, out[k], in[k], n, what)) return;
  }
  bpc_result_set(r, BPC_PASS, "%s", "");
}

/* Chain on stream A, event, stream B waits, then reads A's result. */
static void check_event_cross_stream(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  int64_t n = (int64_t)c->rt_args[0];
  uint64_t iters = c->rt_args[1];
  bp_tensor_t *x, *ones, *y;
  float* v;
  if (rt_x_and_ones(e, e->dev, e->stream, c, n, &x, &ones, &v, r)) return;
  bp_stream_t* sb = rt_stream(e, e->dev, r);
  bp_event_t* ev = sb ? rt_event(e, e->dev, 0, r) : NULL;
  if (!ev || !(y = rt_tensor(e, e->dev, n, r))) return;
  if (rt_chain(r, e->stream, x, ones, iters)) return;
  if (rt_failed(r, bp_event_record(ev, e->stream), "bp_event_record")) return;
  if (rt_failed(r, bp_stream_wait_event(sb, ev), "bp_stream_wait_event")) return;
  if (rt_failed(r, rt_add(sb, x, ones, y), "bp_op_run(add) on the waiting stream")) return;
  float* got = rt_host(e, (uint64_t)n * sizeof(float), r);
  if (!got) return;
  if (rt_failed(r,
                bp_copy_buffer_to_host(sb, bp_tensor_buffer(y), bp_tensor_byte_offset(y), got,
                                       (uint64_t)n * sizeof(float)),
                "bp_copy_buffer_to_host on the waiting stream") ||
      rt_failed(r, bp_stream_synchronize(sb), "bp_stream_synchronize(waiting stream)")) {
    return;
  }
  for (int64_t k = 0; k < n; k++) v[k] += (float)(iters + 1);
  if (rt_floats_differ(r, got, v, n, "the waiting stream's result (it ran before the event?)"))
    return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_event_query(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  int64_t n = (int64_t)c->rt_args[0];
  bp_tensor_t *x, *ones;
  float* v;
  if (rt_x_and_ones(e, e->dev, e->stream, c, n, &x, &ones, &v, r)) return;
  bp_event_t* fresh = rt_event(e, e->dev, 0, r);
  bp_event_t* ev = fresh ? rt_event(e, e->dev, 0, r) : NULL;
  if (!ev) return;
  bp_status_t st = bp_event_query(fresh);
  if (st != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "bp_event_query of a never-recorded event: %s (expected OK): %.150s",
        bp_status_name(st), bp_status_message());
    return;
  }
  if (rt_chain(r, e->stream, x, ones, c->rt_args[1])) return;
  if (rt_failed(r, bp_event_record(ev, e->stream), "bp_event_record")) return;
  st = bp_event_query(ev);
  if (st != BP_OK && st != BP_NOT_READY) {
    bpc_result_set(r, BPC_FAIL,
        "bp_event_query while the chain may run: %s (expected OK or NOT_READY): %.150s",
        bp_status_name(st), bp_status_message());
    return;
  }
  if (rt_failed(r, bp_stream_synchronize(e->stream), "bp_stream_synchronize")) return;
  st = bp_event_query(ev);
  if (st != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "bp_event_query after bp_stream_synchronize: %s (expected OK): %.150s",
        bp_status_name(st), bp_status_message());
    return;
  }
  if (rt_failed(r, bp_event_synchronize(ev), "bp_event_synchronize of a completed event")) return;
  if (rt_expect_x(e, r, e->stream, x, v, n, (float)c->rt_args[1], "x after the chain")) return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_event_elapsed(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  const bp_device_properties_t* props = bp_device_properties(e->dev);
  if (!props || !(props->flags & BP_DEVICE_FLAG_TIMESTAMPS)) {
    bpc_result_set(r, BPC_SKIPPED, "the device does not set BP_DEVICE_FLAG_TIMESTAMPS");
    return;
  }
  int64_t n = (int64_t)c->rt_args[0];
  bp_tensor_t *x, *ones;
  float* v;
  if (rt_x_and_ones(e, e->dev, e->stream, c, n, &x, &ones, &v, r)) return;
  bp_event_t* a = rt_event(e, e->dev, BP_EVENT_TIMING, r);
  bp_event_t* b = a ? rt_event(e, e->dev, BP_EVENT_TIMING, r) : NULL;
  if (!b) return;
  double t0 = rt_now_ns();
  if (rt_failed(r, bp_event_record(a, e->stream), "bp_event_record(start)")) return;
  if (rt_chain(r, e->stream, x, ones, c->rt_args[1])) return;
  if (rt_failed(r, bp_event_record(b, e->stream), "bp_event_record(end)")) return;
  if (rt_failed(r, bp_event_synchronize(b), "bp_event_synchronize(end)")) return;
  double t1 = rt_now_ns();
  uint64_t ns = 0;
  if (rt_failed(r, bp_event_elapsed_ns(a, b, &ns), "bp_event_elapsed_ns")) return;
  /* Both events completed between t0 and t1 on the host's clock. */
  double limit = (t1 - t0) * 1.1 + 1e6;
  if ((double)ns > limit) {
    bpc_result_set(r, BPC_FAIL, "bp_event_elapsed_ns gives %llu ns, but both events completed within %.0f ns",
        (unsigned long long)ns, t1 - t0);
    return;
  }
  if (rt_expect_x(e, r, e->stream, x, v, n, (float)c->rt_args[1], "x after the timed chain"))
    return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_event_unrecorded(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  bp_event_t* ev = rt_event(e, e->dev, 0, r);
  bp_buffer_t* b = ev ? rt_buffer(e, e->dev, 0, 257, r) : NULL;
  uint8_t* src = rt_host(e, 257, r);
  uint8_t* back = rt_host(e, 257, r);
  if (!b || !src || !back) return;
  if (rt_failed(r, bp_stream_wait_event(e->stream, ev),
                "bp_stream_wait_event(never-recorded event)"))
    return;
  rt_fill(c, 1, src, 257);
  if (rt_upload(r, e->stream, b, 0, src, 257) || rt_download(r, e->stream, b, 0, back, 257)) return;
  if (rt_bytes_differ(r, back, src, 257, 0, 257,
                      "round trip after waiting on a never-recorded event"))
    return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_md_copy(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  uint64_t size = c->rt_args[0], so = c->rt_args[1], dof = c->rt_args[2], flags = c->rt_args[3];
  bp_device_t* d1 = rt_second_device(e->dev, r);
  bp_stream_t* s1 = d1 ? rt_stream(e, d1, r) : NULL;
  if (!s1) return;
  bp_device_t* sdev = flags & MD_FROM_DEVICE1 ? d1 : e->dev;
  bp_device_t* ddev = flags & MD_FROM_DEVICE1 ? e->dev : d1;
  bp_stream_t* ss = sdev == e->dev ? e->stream : s1;
  bp_stream_t* ds = ddev == e->dev ? e->stream : s1;
  uint64_t stotal = so + size + RT_GUARD, dtotal = dof + size + RT_GUARD;
  bp_buffer_t* src = rt_buffer(e, sdev, 0, stotal, r);
  bp_buffer_t* dst = src ? rt_buffer(e, ddev, 0, dtotal, r) : NULL;
  uint8_t* simg = rt_host(e, stotal, r);
  uint8_t* want = rt_host(e, dtotal, r);
  uint8_t* got = rt_host(e, dtotal, r);
  if (!dst || !simg || !want || !got) return;
  rt_fill(c, 1, simg, stotal);
  bpc_image_fill_guard(want, dtotal);
  if (rt_upload(r, ss, src, 0, simg, stotal) || rt_upload(r, ds, dst, 0, want, dtotal)) return;
  memcpy(want + dof, simg + so, size);
  bp_stream_t* s = flags & MD_STREAM_ON_DST ? ds : ss;
  if (rt_failed(r, bp_copy_buffer(s, src, so, dst, dof, size), "bp_copy_buffer across devices"))
    return;
  if (rt_failed(r, bp_stream_synchronize(ss), "bp_stream_synchronize(source device)") ||
      rt_failed(r, bp_stream_synchronize(ds), "bp_stream_synchronize(destination device)")) {
    return;
  }
  if (rt_download(r, ds, dst, 0, got, dtotal)) return;
  char what[96];
  snprintf(what, sizeof what, "destination on %s after a copy from %s", bp_device_name(ddev),
           bp_device_name(sdev));
  if (rt_bytes_differ(r, got, want, dtotal, dof, dof + size, what)) return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

/* An operand on device 1 in an op run on device 0's stream. */
static void check_md_foreign_operand(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  const int64_t n = 257;
  int foreign_out = c->rt_args[0] != 0;
  bp_device_t* d1 = rt_second_device(e->dev, r);
  bp_stream_t* s1 = d1 ? rt_stream(e, d1, r) : NULL;
  bp_tensor_t *x, *ones;
  float* v;
  if (!s1 || rt_x_and_ones(e, e->dev, e->stream, c, n, &x, &ones, &v, r)) return;
  bp_tensor_t* other = rt_tensor(e, d1, n, r);
  bp_tensor_t* out = other ? rt_tensor(e, e->dev, n, r) : NULL;
  float* fill = rt_values(e, c, 2, n, r);
  if (!out || !fill) return;
  if (rt_failed(r, bp_tensor_write(s1, other, fill, (uint64_t)n * sizeof(float)),
                "bp_tensor_write on device 1"))
    return;
  if (rt_failed(r, bp_tensor_write(e->stream, out, fill, (uint64_t)n * sizeof(float)),
                "bp_tensor_write"))
    return;
  bp_tensor_t* target = foreign_out ? other : out;
  bp_status_t st = rt_add(e->stream, x, foreign_out ? ones : other, target);
  if (rt_not_refused(r, st, BP_INVALID_ARGUMENT,
                     foreign_out ? "add with its output on another device"
                                 : "add with an input on another device")) {
    return;
  }
  if (rt_failed(r, bp_stream_synchronize(e->stream), "bp_stream_synchronize after the refused op"))
    return;
  if (rt_expect_x(e, r, foreign_out ? s1 : e->stream, target, fill, n, 0.0f,
                  "the output after the refused op (must not change)")) {
    return;
  }
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static void check_md_wrong_stream(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  const uint64_t size = 257;
  bp_device_t* d1 = rt_second_device(e->dev, r);
  bp_stream_t* s1 = d1 ? rt_stream(e, d1, r) : NULL;
  bp_buffer_t* b = s1 ? rt_buffer(e, d1, 0, size, r) : NULL;
  uint8_t* img = rt_host(e, size, r);
  uint8_t* host = rt_host(e, size, r);
  uint8_t* got = rt_host(e, size, r);
  if (!b || !img || !host || !got) return;
  rt_fill(c, 1, img, size);
  rt_fill(c, 2, host, size);
  memcpy(got, host, size);
  if (rt_upload(r, s1, b, 0, img, size)) return;
  if (rt_not_refused(r, bp_copy_host_to_buffer(e->stream, host, b, 0, size), BP_INVALID_ARGUMENT,
                     "host->device into device 1's buffer on device 0's stream") ||
      rt_not_refused(r, bp_copy_buffer_to_host(e->stream, b, 0, host, size), BP_INVALID_ARGUMENT,
                     "device->host from device 1's buffer on device 0's stream")) {
    return;
  }
  if (rt_bytes_differ(r, host, got, size, 0, 0,
                      "host memory after a refused copy (must not change)"))
    return;
  if (rt_download(r, s1, b, 0, got, size)) return;
  if (rt_bytes_differ(r, got, img, size, 0, 0,
                      "device 1's buffer after a refused copy (must not change)"))
    return;
  bpc_result_set(r, BPC_PASS, "%s", "");
}

/* A bad output: one element too many, or a view overlapping an input. */
static void check_bad_output(rt_env_t* e, const bpc_case_t* c, bpc_result_t* r) {
  const int64_t n = 257;
  int overlap = c->rt_args[0] != 0;
  bp_tensor_t *x, *ones;
  float* v;
  if (rt_x_and_ones(e, e->dev, e->stream, c, n, &x, &ones, &v, r)) return;
  bp_tensor_t* out = NULL;
  float* fill = NULL;
  if (overlap) {
    /* x[1:] and x[:-1] are both n-1 long: out = x[1:], inputs x[:-1], ones[:-1]. */
    bp_tensor_t *head = NULL, *tail = NULL, *ones_head = NULL;
    bp_status_t st = bp_tensor_slice(x, 0, 0, n - 1, 1, &head);
    if (st == BP_OK) st = bp_tensor_slice(x, 0, 1, n, 1, &tail);
    if (st == BP_OK) st = bp_tensor_slice(ones, 0, 0, n - 1, 1, &ones_head);
    bp_tensor_t* made[3] = {head, tail, ones_head};
    for (int k = 0; k < 3; k++) {
      if (!made[k]) continue;
      if (e->nten < RT_MAX_OBJECTS)
        e->tensors[e->nten++] = made[k];
      else
        bp_tensor_release(made[k]); /* cannot happen: a few tensors per case */
    }
    if (rt_failed(r, st, "bp_tensor_slice")) return;
    st = rt_add(e->stream, head, ones_head, tail);
    if (rt_not_refused(r, st, BP_INVALID_ARGUMENT, "add whose output partially overlaps its input"))
      return;
    if (rt_failed(r, bp_stream_synchronize(e->stream),
                  "bp_stream_synchronize after the refused op"))
      return;
    if (rt_expect_x(e, r, e->stream, x, v, n, 0.0f, "the input/output buffer after the refused op"))
      return;
  } else {
    if (!(out = rt_tensor(e, e->dev, n + 1, r)) || !(fill = rt_values(e, c, 2, n + 1, r))) return;
    if (rt_failed(r, bp_tensor_write(e->stream, out, fill, (uint64_t)(n + 1) * sizeof(float)),
                  "bp_tensor_write"))
      return;
    bp_status_t st = rt_add(e->stream, x, ones, out);
    if (rt_not_refused(r, st, BP_INVALID_ARGUMENT, "add into an output of the wrong shape")) return;
    if (rt_failed(r, bp_stream_synchronize(e->stream),
                  "bp_stream_synchronize after the refused op"))
      return;
    if (rt_expect_x(e, r, e->stream, out, fill, n + 1, 0.0f,
                    "the output after the refused op (must not change)"))
      return;
  }
  bpc_result_set(r, BPC_PASS, "%s", "");
}

static const rt_fn kChecks[RT_CHECK_COUNT_] = {
    [RT_ALLOC_SMALL] = check_alloc_small,
    [RT_ALLOC_LARGE] = check_alloc_large,
    [RT_OVER_CAPACITY] = check_over_capacity,
    [RT_SIZE_ZERO] = check_size_zero,
    [RT_MAP] = check_map,
    [RT_COPY_ROUNDTRIP] = check_copy_roundtrip,
    [RT_COPY_D2D] = check_copy_d2d,
    [RT_COPY_OUT_OF_RANGE] = check_copy_out_of_range,
    [RT_STREAM_CHAIN] = check_stream_chain,
    [RT_STREAM_INTERLEAVED] = check_stream_interleaved,
    [RT_EVENT_CROSS_STREAM] = check_event_cross_stream,
    [RT_EVENT_QUERY] = check_event_query,
    [RT_EVENT_ELAPSED] = check_event_elapsed,
    [RT_EVENT_UNRECORDED] = check_event_unrecorded,
    [RT_MD_COPY] = check_md_copy,
    [RT_MD_FOREIGN_OPERAND] = check_md_foreign_operand,
    [RT_MD_WRONG_STREAM] = check_md_wrong_stream,
    [RT_ERR_BAD_OUTPUT] = check_bad_output,
};

void bpc_runtime_execute(bp_device_t* device, bp_stream_t* stream, const bpc_case_t* c,
                         bpc_result_t* out) {
  memset(out, 0, sizeof *out);
  out->max_ulps = -1.0;
  out->max_abs = -1.0;
  if (c && c->op_id == BPC_RUNTIME_OP(BPC_RT_COLLECTIVES) && device && stream) {
    bpc_result_set(out, BPC_FAIL, "suite: the case gave no verdict");
    bpc_collective_execute(device, stream, c, out);
    return;
  }
  if (!device || !stream || !c || c->rt_check >= RT_CHECK_COUNT_ || !kChecks[c->rt_check]) {
    bpc_result_set(out, BPC_FAIL, "suite: malformed runtime case");
    return;
  }
  rt_env_t env;
  memset(&env, 0, sizeof env);
  env.dev = device;
  env.stream = stream;
  bpc_result_set(out, BPC_FAIL, "suite: the check gave no verdict");
  kChecks[c->rt_check](&env, c, out);
  rt_env_free(&env);
}
