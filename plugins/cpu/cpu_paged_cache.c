/* backplane CPU plugin: paged cache maintenance of ABI 1.4
 * (docs/semantics.md, "Paged KV cache"):
 *
 *   concat_and_cache_mla  kv_c[t] then k_pe[t] into cache row
 *                         slot_mapping[t] (MLA: one latent + rope row per
 *                         token); negative slots are padding; in token
 *                         order, so a repeated slot keeps the last token.
 *                         The cache is copied first unless the output is
 *                         the cache itself (in place).
 *   gather_cache          sequence b's tokens i < cu_seq_lens[b + 1] -
 *                         cu_seq_lens[b], at position p = seq_starts[b] + i,
 *                         from cache row (block_table[b, p / BS], p % BS) to
 *                         dst row cu_seq_lens[b] + i, copied in runs of
 *                         consecutive rows of one block; dst rows outside
 *                         [cu_seq_lens[0], cu_seq_lens[B]) are zero.
 *                         Sequences spread over the pool.
 *   compute_slot_mapping  token t of sequence s (query_start_loc[s] <= t <
 *                         query_start_loc[s + 1]) at position p gets
 *                         block_tables[s, p / BS] * BS + p % BS; tokens past
 *                         query_start_loc[S] (padding) get -1.
 *
 * Every value the core cannot see (slots, offsets, positions, block ids) is
 * checked before anything is written: OUT_OF_RANGE / INVALID_ARGUMENT with
 * the offending element. Operands are dense (the support answer asks the
 * core to pack others). Rows move as bytes (NaN payloads, signed zeros).
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

/* ---- concat_and_cache_mla ------------------------------------------------------------ */

static bp_status_t exec_concat_and_cache_mla(const bp_op_call_t* call) {
  const bp_tensor_desc_t *kv = call->inputs[0], *pe = call->inputs[1], *cache = call->inputs[2];
  const bp_tensor_desc_t *slots = call->inputs[3], *out = call->outputs[0];
  int64_t T = kv->sizes[0], cap = cache->sizes[0] * cache->sizes[1];
  for (int64_t t = 0; t < T; t++) {
    int64_t slot = cpu_index_at(slots, t);
    if (slot >= cap) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: concat_and_cache_mla: slot_mapping[%lld] = %lld is past the cache's "
                                        "%lld slots (%lld blocks of %lld)",
                       (long long)t, (long long)slot, (long long)cap, (long long)cache->sizes[0],
                       (long long)cache->sizes[1]);
    }
  }
  size_t es = bp_dtype_size(cache->dtype), lb = (size_t)kv->sizes[1] * es, rb = (size_t)pe->sizes[1] * es;
  unsigned char* dst = cpu_desc_ptr(out);
  if (dst != cpu_desc_ptr(cache)) cpu_memcpy(dst, cpu_desc_ptr(cache), (uint64_t)cap * (lb + rb));
  const unsigned char *a = cpu_desc_ptr(kv), *b = cpu_desc_ptr(pe);
  for (int64_t t = 0; t < T; t++) {
    int64_t slot = cpu_index_at(slots, t);
    if (slot < 0) continue;
    unsigned char* row = dst + (size_t)slot * (lb + rb);
    memcpy(row, a + (size_t)t * lb, lb);
    memcpy(row + lb, b + (size_t)t * rb, rb);
  }
  return BP_OK;
}

/* ---- gather_cache -------------------------------------------------------------------- */

typedef struct gc_job {
  const bp_op_call_t* call;
  int64_t BS, MB;
  size_t row; /* bytes per cache row */
} gc_job_t;

static int64_t gc_start(const bp_op_call_t* call, int64_t b) {
  const bp_tensor_desc_t* st = call->num_inputs > 3 && call->inputs[3]->dtype != BP_DTYPE_INVALID ? call->inputs[3] : NULL;
  return st ? cpu_index_at(st, b) : 0;
}

static void gc_run(void* ctx, int64_t begin, int64_t end) {
  gc_job_t* j = ctx;
  const bp_op_call_t* call = j->call;
  const bp_tensor_desc_t *bt = call->inputs[1], *cu = call->inputs[2];
  const unsigned char* src = cpu_desc_ptr(call->inputs[0]);
  unsigned char* dst = cpu_desc_ptr(call->outputs[0]);
  for (int64_t b = begin; b < end; b++) {
    int64_t r0 = cpu_index_at(cu, b), len = cpu_index_at(cu, b + 1) - r0, p = gc_start(call, b);
    for (int64_t i = 0; i < len;) {
      int64_t off = (p + i) % j->BS, run = j->BS - off < len - i ? j->BS - off : len - i;
      int64_t blk = cpu_index_at(bt, b * j->MB + (p + i) / j->BS);
      memcpy(dst + (size_t)(r0 + i) * j->row, src + (size_t)(blk * j->BS + off) * j->row, (size_t)run * j->row);
      i += run;
    }
  }
}

static bp_status_t exec_gather_cache(const bp_op_call_t* call) {
  const bp_gather_cache_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *src = call->inputs[0], *bt = call->inputs[1], *cu = call->inputs[2];
  gc_job_t j = {call, src->sizes[1], bt->sizes[1], 0};
  int64_t NB = src->sizes[0], B = bt->sizes[0], N = a->num_tokens;
  j.row = (size_t)(bp_desc_numel(src) / (NB * j.BS > 0 ? NB * j.BS : 1)) * bp_dtype_size(src->dtype);
  for (int64_t b = 0; b <= B; b++) {
    int64_t v = cpu_index_at(cu, b), prev = b ? cpu_index_at(cu, b - 1) : 0;
    if (v < prev || v > N) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: gather_cache: cu_seq_lens[%lld] = %lld; the offsets must be "
                                            "nondecreasing from >= 0 to <= num_tokens = %lld",
                       (long long)b, (long long)v, (long long)N);
    }
  }
  for (int64_t b = 0; b < B; b++) {
    int64_t len = cpu_index_at(cu, b + 1) - cpu_index_at(cu, b), p = gc_start(call, b);
    if (len == 0) continue;
    if (p < 0 || (p + len - 1) / j.BS >= j.MB) {
      return cpu_error(BP_OUT_OF_RANGE, "cpu: gather_cache: sequence %lld reads positions %lld..%lld; the block "
                                        "table holds %lld blocks of %lld",
                       (long long)b, (long long)p, (long long)(p + len - 1), (long long)j.MB, (long long)j.BS);
    }
    for (int64_t k = p / j.BS; k <= (p + len - 1) / j.BS; k++) {
      int64_t blk = cpu_index_at(bt, b * j.MB + k);
      if (blk < 0 || blk >= NB) {
        return cpu_error(BP_OUT_OF_RANGE, "cpu: gather_cache: block_table[%lld, %lld] = %lld is outside the "
                                          "cache's %lld blocks",
                         (long long)b, (long long)k, (long long)blk, (long long)NB);
      }
    }
  }
  unsigned char* dst = cpu_desc_ptr(call->outputs[0]);
  int64_t first = cpu_index_at(cu, 0), last = cpu_index_at(cu, B);
  if (N == 0 || j.row == 0) return BP_OK;
  memset(dst, 0, (size_t)first * j.row);
  memset(dst + (size_t)last * j.row, 0, (size_t)(N - last) * j.row);
  int64_t grain = (int64_t)(65536 / j.row) / (last > first && B ? (last - first + B - 1) / B : 1);
  cpu_parallel_for(B, grain < 1 ? 1 : grain, gc_run, &j);
  return BP_OK;
}

/* ---- compute_slot_mapping ------------------------------------------------------------ */

static bp_status_t exec_slot_mapping(const bp_op_call_t* call) {
  const bp_slot_mapping_attrs_t* a = call->attrs;
  const bp_tensor_desc_t *bt = call->inputs[0], *qsl = call->inputs[1], *pos = call->inputs[2];
  int64_t S = bt->sizes[0], MB = bt->sizes[1], T = pos->sizes[0], BS = a->block_size;
  int64_t* out = (int64_t*)(void*)cpu_desc_ptr(call->outputs[0]);
  for (int64_t s = 0; s <= S; s++) {
    int64_t v = cpu_index_at(qsl, s), prev = s ? cpu_index_at(qsl, s - 1) : 0;
    if (v < prev || v > T) {
      return cpu_error(BP_INVALID_ARGUMENT, "cpu: compute_slot_mapping: query_start_loc[%lld] = %lld; the "
                                            "offsets must be nondecreasing from >= 0 to <= %lld tokens",
                       (long long)s, (long long)v, (long long)T);
    }
  }
  /* checked in a first pass, written in a second: nothing is written on error */
  for (int pass = 0; pass < 2; pass++) {
    for (int64_t s = 0; s < S; s++) {
      for (int64_t t = cpu_index_at(qsl, s); t < cpu_index_at(qsl, s + 1); t++) {
        int64_t p = cpu_index_at(pos, t);
        int64_t blk = p >= 0 && p / BS < MB ? cpu_index_at(bt, s * MB + p / BS) : -1;
        if (pass == 1) {
          out[t] = blk * BS + p % BS;
        } else if (blk < 0) {
          return cpu_error(BP_OUT_OF_RANGE, "cpu: compute_slot_mapping: token %lld of sequence %lld at position "
                                            "%lld: %s",
                           (long long)t, (long long)s, (long long)p,
                           p < 0 || p / BS >= MB ? "past the sequence's block table" : "a negative block id");
        }
      }
    }
  }
  for (int64_t t = 0; t < cpu_index_at(qsl, 0); t++) out[t] = -1;
  for (int64_t t = cpu_index_at(qsl, S); t < T; t++) out[t] = -1;
  return BP_OK;
}

/* ---- family -------------------------------------------------------------------- */

static bp_status_t exec_paged_cache(const bp_op_call_t* call) {
  bp_status_t st = cpu_call_require_dense(call);
  if (st != BP_OK) return st;
  switch (call->op_id) {
    case BP_OP_concat_and_cache_mla: return exec_concat_and_cache_mla(call);
    case BP_OP_gather_cache: return exec_gather_cache(call);
    default: return exec_slot_mapping(call);
  }
}

static int supported_paged_cache(const bp_op_call_t* call, char* msg, size_t cap) {
  (void)call, (void)msg, (void)cap;
  return BP_SUPPORT_OK;
}

const cpu_family_t cpu_family_paged_cache = {
    "paged_cache",
    CPU_FAMILY_OPS(BP_OP_concat_and_cache_mla, BP_OP_gather_cache, BP_OP_compute_slot_mapping),
    exec_paged_cache, supported_paged_cache, 0,
};
