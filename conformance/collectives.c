/* Conformance of collectives (the runtime area "collectives"): every
 * backend, native (its plugin's comm table) or host-staged by the core.
 *
 * A case makes 2, 3 or 4 ranks in this process with bp_comm_init_all
 * (rank r on the backend's device r mod device count, each with its own
 * stream), or, in world mode (bpc_collectives_world, under mpirun), uses
 * the one rank of this process in the launcher's world. It runs one
 * collective (or a group of send/recv) on every rank it owns and checks
 * every output exactly: inputs are small integers, exact in every dtype,
 * and the expected values are computed the way docs/collectives.md
 * defines them (rank order; integers wrap; AVG of integers truncates; f16,
 * bf16 and fp8 round once). Error cases check that a mismatch fails every
 * rank with INVALID_ARGUMENT and that a missing rank fails the others with
 * DEADLINE_EXCEEDED within the communicator's timeout.
 *
 * Case fields: in[0].dtype; rt_check = the kind; rt_args = {nranks,
 * count, reduction, flags | root << 8}.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/comm.h"
#include "conform.h"

#define MAX_RANKS 4

enum coll_kind {
  K_ALL_REDUCE,
  K_BROADCAST,
  K_REDUCE,
  K_ALL_GATHER,
  K_REDUCE_SCATTER,
  K_ALL_TO_ALL,
  K_ALL_TO_ALLV,
  K_SEND_RECV,
  K_BARRIER,
  K_MISMATCH,
  K_MISSING_RANK,
  K_COUNT_
};
static const char* const kKind[K_COUNT_] = {
    "all_reduce", "broadcast",  "reduce",    "all_gather", "reduce_scatter", "all_to_all",
    "all_to_allv", "send_recv", "barrier",   "mismatch",   "missing_rank"};
static const char* const kOp[] = {"sum", "prod", "min", "max", "avg"};
enum { F_IN_PLACE = 1 };

/* World mode: this process is one rank of the launcher's world. */
static bp_comm_t* g_world;

void bpc_collectives_set_world(bp_comm_t* world) { g_world = world; }

/* ------------------------------------------------------------------------ */
/* Generation                                                                */
/* ------------------------------------------------------------------------ */
static void add(bpc_case_list_t* list, bp_status_t* st, uint32_t kind, uint32_t dtype,
                uint64_t nranks, uint64_t count, uint64_t op, uint64_t flags_root) {
  if (*st != BP_OK) return;
  bpc_case_t* c = bpc_case_list_append(list);
  if (!c) {
    *st = BP_RESOURCE_EXHAUSTED;
    return;
  }
  c->op_id = BPC_RUNTIME_OP(BPC_RT_COLLECTIVES);
  c->rt_check = kind;
  c->in[0].dtype = dtype;
  c->rt_args[0] = nranks;
  c->rt_args[1] = count;
  c->rt_args[2] = op;
  c->rt_args[3] = flags_root;
  snprintf(c->dtype_label, sizeof c->dtype_label, "%s", bpc_dtype_name(dtype));
  const int reduces = kind == K_ALL_REDUCE || kind == K_REDUCE || kind == K_REDUCE_SCATTER;
  snprintf(c->id, sizeof c->id, "collectives/%s/%s%s%s/n%llu/%llu%s%s", kKind[kind],
           bpc_dtype_name(dtype), reduces ? "/" : "", reduces ? kOp[op] : "",
           (unsigned long long)nranks, (unsigned long long)count,
           (flags_root & F_IN_PLACE) ? "/in_place" : "",
           (kind == K_BROADCAST || kind == K_REDUCE) ? ((flags_root >> 8) ? "/root_last" : "/root_0")
                                                     : "");
}

bp_status_t bpc_collective_cases_generate(int quick, int world_size, bpc_case_list_t* list) {
  bp_status_t st = BP_OK;
  static const uint32_t kDtypes[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                     BP_DTYPE_F8E4M3FN, BP_DTYPE_I8, BP_DTYPE_U8, BP_DTYPE_I32,
                                     BP_DTYPE_I64, BP_DTYPE_U64};
  const size_t nd = sizeof kDtypes / sizeof kDtypes[0];
  /* World mode: the rank count is the world's; otherwise 2, 3 and 4. */
  const uint64_t lo = world_size ? (uint64_t)world_size : 2, hi = world_size ? lo : 4;
  for (uint64_t n = lo; n <= hi; ++n) {
    /* Every dtype with every reduction. */
    for (size_t d = 0; d < nd; ++d)
      for (uint64_t op = 0; op <= BP_REDUCE_AVG; ++op)
        if (!quick || n == 3 || op == BP_REDUCE_SUM)
          add(list, &st, K_ALL_REDUCE, kDtypes[d], n, 1003, op, 0);
    /* Sizes, in place and out of place. */
    static const uint64_t kCounts[] = {0, 1, 7, 4099, 1u << 18};
    for (size_t s = 0; s < sizeof kCounts / sizeof kCounts[0]; ++s)
      for (uint64_t f = 0; f < 2; ++f)
        if (!quick || kCounts[s] != (1u << 18))
          add(list, &st, K_ALL_REDUCE, BP_DTYPE_F32, n, kCounts[s], BP_REDUCE_SUM, f);
    for (uint64_t root = 0; root < 2; ++root) {
      add(list, &st, K_BROADCAST, BP_DTYPE_I32, n, 1001, 0, root << 8);
      add(list, &st, K_BROADCAST, BP_DTYPE_BF16, n, 3, 0, (root << 8) | F_IN_PLACE);
      add(list, &st, K_REDUCE, BP_DTYPE_F32, n, 1001, BP_REDUCE_SUM, root << 8);
      add(list, &st, K_REDUCE, BP_DTYPE_I64, n, 5, BP_REDUCE_MAX, (root << 8) | F_IN_PLACE);
    }
    static const uint64_t kBlock[] = {0, 1, 257};
    for (size_t s = 0; s < 3; ++s) {
      add(list, &st, K_ALL_GATHER, BP_DTYPE_I32, n, kBlock[s], 0, 0);
      add(list, &st, K_ALL_GATHER, BP_DTYPE_F16, n, kBlock[s], 0, F_IN_PLACE);
      add(list, &st, K_REDUCE_SCATTER, BP_DTYPE_F32, n, kBlock[s], BP_REDUCE_SUM, 0);
      add(list, &st, K_REDUCE_SCATTER, BP_DTYPE_I8, n, kBlock[s], BP_REDUCE_MIN, F_IN_PLACE);
      add(list, &st, K_ALL_TO_ALL, BP_DTYPE_U8, n, kBlock[s], 0, 0);
    }
    add(list, &st, K_ALL_TO_ALLV, BP_DTYPE_F64, n, 0, 0, 0);
    add(list, &st, K_SEND_RECV, BP_DTYPE_F32, n, 513, 0, 0);
    add(list, &st, K_BARRIER, BP_DTYPE_U8, n, 0, 0, 0);
    add(list, &st, K_MISMATCH, BP_DTYPE_F32, n, 8, BP_REDUCE_SUM, 0);
    if (!world_size) add(list, &st, K_MISSING_RANK, BP_DTYPE_F32, n, 4, BP_REDUCE_SUM, 0);
  }
  return st;
}

/* ------------------------------------------------------------------------ */
/* Values and references                                                     */
/* ------------------------------------------------------------------------ */
static double value(uint32_t dtype, int r, int64_t i) {
  int64_t v = (i * 7 + r * 3) % 9;
  return bp_dtype_category(dtype) == BP_DTYPE_CATEGORY_UNSIGNED ? (double)v : (double)(v - 4);
}

static void store(uint32_t dtype, void* p, int64_t i, double v) {
  switch (dtype) {
    case BP_DTYPE_F32: ((float*)p)[i] = (float)v; break;
    case BP_DTYPE_F64: ((double*)p)[i] = v; break;
    case BP_DTYPE_F16: ((uint16_t*)p)[i] = bpc_f16_from_f64(v); break;
    case BP_DTYPE_BF16: ((uint16_t*)p)[i] = bpc_bf16_from_f64(v); break;
    case BP_DTYPE_F8E4M3FN: ((uint8_t*)p)[i] = bpc_f8e4m3_from_f64(v); break;
    case BP_DTYPE_I8: ((int8_t*)p)[i] = (int8_t)(int64_t)v; break;
    case BP_DTYPE_U8: ((uint8_t*)p)[i] = (uint8_t)(uint64_t)(int64_t)v; break;
    case BP_DTYPE_I32: ((int32_t*)p)[i] = (int32_t)(int64_t)v; break;
    case BP_DTYPE_I64: ((int64_t*)p)[i] = (int64_t)v; break;
    default: ((uint64_t*)p)[i] = (uint64_t)(int64_t)v; break;
  }
}
static double load(uint32_t dtype, const void* p, int64_t i) {
  switch (dtype) {
    case BP_DTYPE_F32: return ((const float*)p)[i];
    case BP_DTYPE_F64: return ((const double*)p)[i];
    case BP_DTYPE_F16: return bpc_f16_to_f64(((const uint16_t*)p)[i]);
    case BP_DTYPE_BF16: return bpc_bf16_to_f64(((const uint16_t*)p)[i]);
    case BP_DTYPE_F8E4M3FN: return bpc_f8e4m3_to_f64(((const uint8_t*)p)[i]);
    case BP_DTYPE_I8: return ((const int8_t*)p)[i];
    case BP_DTYPE_U8: return ((const uint8_t*)p)[i];
    case BP_DTYPE_I32: return ((const int32_t*)p)[i];
    case BP_DTYPE_I64: return (double)((const int64_t*)p)[i];
    default: return (double)((const uint64_t*)p)[i];
  }
}

/* Element i of the reduction over ranks 0..n-1, as the dtype stores it. */
static double reduced(uint32_t dtype, uint32_t op, int n, int64_t i) {
  double acc = value(dtype, 0, i);
  for (int r = 1; r < n; ++r) {
    const double v = value(dtype, r, i);
    acc = op == BP_REDUCE_PROD ? acc * v
        : op == BP_REDUCE_MIN  ? (v < acc ? v : acc)
        : op == BP_REDUCE_MAX  ? (v > acc ? v : acc)
                               : acc + v;
  }
  if (op == BP_REDUCE_AVG)
    acc = bpc_dtype_is_float(dtype) || dtype == BP_DTYPE_F8E4M3FN ? acc / n
                                                                   : (double)((int64_t)acc / n);
  unsigned char cell[8];
  store(dtype, cell, 0, acc);
  return load(dtype, cell, 0);
}

/* ------------------------------------------------------------------------ */
/* Ranks                                                                     */
/* ------------------------------------------------------------------------ */
typedef struct ranks {
  int n;     /* ranks in the communicator */
  int first; /* the first rank this process owns */
  int own;   /* ranks owned here */
  bp_comm_t* comms[MAX_RANKS];
  bp_stream_t* streams[MAX_RANKS];
  bp_device_t* devices[MAX_RANKS];
  int owns_comms;
} ranks_t;

static bp_status_t ranks_open(ranks_t* R, bp_device_t* device, bp_stream_t* stream, int n,
                              uint64_t timeout_ns, char* why, size_t cap) {
  memset(R, 0, sizeof *R);
  if (g_world) {
    R->n = bp_comm_size(g_world);
    R->first = bp_comm_rank(g_world);
    R->own = 1;
    R->comms[0] = g_world;
    R->streams[0] = stream;
    bp_stream_retain(stream);
    R->devices[0] = device;
    return BP_OK;
  }
  R->n = n;
  R->own = n;
  R->owns_comms = 1;
  bp_plugin_t* plugin = bp_device_plugin(device);
  bp_plugin_info_t info = {.struct_size = sizeof info};
  bp_status_t st = bp_plugin_get_info(plugin, &info);
  for (int r = 0; st == BP_OK && r < n; ++r) {
    st = bp_plugin_device(plugin, (uint32_t)r % (info.device_count ? info.device_count : 1),
                          &R->devices[r]);
    if (st == BP_OK) st = bp_stream_create(R->devices[r], NULL, &R->streams[r]);
  }
  bp_comm_options_t o = {.struct_size = sizeof o, .timeout_ns = timeout_ns};
  if (st == BP_OK) st = bp_comm_init_all(R->devices, (uint32_t)n, &o, R->comms);
  if (st != BP_OK) snprintf(why, cap, "%s", bp_status_message());
  return st;
}

static void ranks_close(ranks_t* R) {
  for (int k = 0; k < R->own; ++k) {
    if (R->streams[k]) bp_stream_synchronize(R->streams[k]);
    if (R->owns_comms) bp_comm_destroy(R->comms[k]);
    if (R->streams[k]) bp_stream_release(R->streams[k]);
  }
}

typedef struct tensors {
  bp_tensor_t* send[MAX_RANKS];
  bp_tensor_t* recv[MAX_RANKS];
} tensors_t;

static bp_tensor_t* make(ranks_t* R, int k, uint32_t dtype, int64_t count, bp_status_t* st) {
  bp_tensor_t* t = NULL;
  if (*st == BP_OK) *st = bp_tensor_create(R->devices[k], dtype, 1, &count, &t);
  return t;
}

/* Writes value(rank, first + i) for i < count into t. */
static bp_status_t fill(ranks_t* R, int k, bp_tensor_t* t, int64_t count, int64_t first) {
  const uint32_t dtype = bp_tensor_dtype(t);
  const size_t es = bpc_dtype_size(dtype);
  unsigned char* host = malloc((size_t)count * es + 1);
  if (!host) return BP_RESOURCE_EXHAUSTED;
  for (int64_t i = 0; i < count; ++i) store(dtype, host, i, value(dtype, R->first + k, first + i));
  bp_status_t st = bp_tensor_write(R->streams[k], t, host, (uint64_t)count * es);
  free(host);
  return st;
}

/* Reads t and compares element i with want(i); FAIL with the first
 * difference. */
typedef double (*want_fn)(const bpc_case_t* c, int rank, int n, int64_t i);
static int check(ranks_t* R, int k, bp_tensor_t* t, const bpc_case_t* c, want_fn want,
                 bpc_result_t* out) {
  const uint32_t dtype = bp_tensor_dtype(t);
  const int64_t numel = bp_tensor_numel(t);
  const size_t es = bpc_dtype_size(dtype);
  unsigned char* host = malloc((size_t)numel * es + 1);
  if (!host) {
    bpc_result_set(out, BPC_RESOURCE_ERROR, "out of host memory");
    return 0;
  }
  bp_status_t st = bp_tensor_read(R->streams[k], t, host, (uint64_t)numel * es);
  int ok = st == BP_OK;
  if (!ok)
    bpc_result_set(out, BPC_FAIL, "rank %d: reading the output: %s", R->first + k,
                   bp_status_message());
  for (int64_t i = 0; ok && i < numel; ++i) {
    const double w = want(c, R->first + k, R->n, i), g = load(dtype, host, i);
    if (w != g) {
      bpc_result_set(out, BPC_FAIL, "rank %d element %lld: got %g, expected %g", R->first + k,
                     (long long)i, g, w);
      ok = 0;
    }
  }
  free(host);
  return ok;
}

static double want_all_reduce(const bpc_case_t* c, int r, int n, int64_t i) {
  (void)r;
  return reduced(c->in[0].dtype, (uint32_t)c->rt_args[2], n, i);
}
static double want_broadcast(const bpc_case_t* c, int r, int n, int64_t i) {
  (void)r;
  return value(c->in[0].dtype, (c->rt_args[3] >> 8) ? n - 1 : 0, i);
}
static double want_all_gather(const bpc_case_t* c, int r, int n, int64_t i) {
  (void)r, (void)n;
  const int64_t count = (int64_t)c->rt_args[1];
  return value(c->in[0].dtype, (int)(i / count), i % count);
}
static double want_reduce_scatter(const bpc_case_t* c, int r, int n, int64_t i) {
  return reduced(c->in[0].dtype, (uint32_t)c->rt_args[2], n, (int64_t)r * (int64_t)c->rt_args[1] + i);
}
static double want_all_to_all(const bpc_case_t* c, int r, int n, int64_t i) {
  (void)n;
  const int64_t count = (int64_t)c->rt_args[1];
  return value(c->in[0].dtype, (int)(i / count), (int64_t)r * count + i % count);
}
static double want_ring(const bpc_case_t* c, int r, int n, int64_t i) {
  return value(c->in[0].dtype, (r + n - 1) % n, i);
}
/* all_to_allv: rank p sends q + 1 elements to rank q, from offset q. */
static double want_all_to_allv(const bpc_case_t* c, int r, int n, int64_t i) {
  int64_t off = 0;
  for (int p = 0; p < n; ++p) {
    if (i < off + r + 1) return value(c->in[0].dtype, p, r + (i - off));
    off += r + 1;
  }
  return -1000;
}

/* ------------------------------------------------------------------------ */
/* Execution                                                                 */
/* ------------------------------------------------------------------------ */
static bp_status_t sync_owned(ranks_t* R, bp_status_t* per_rank) {
  bp_status_t first = BP_OK;
  for (int k = 0; k < R->own; ++k) {
    per_rank[k] = bp_stream_synchronize(R->streams[k]);
    if (per_rank[k] != BP_OK && first == BP_OK) first = per_rank[k];
  }
  return first;
}

static void run_case(ranks_t* R, const bpc_case_t* c, bpc_result_t* out) {
  const uint32_t kind = c->rt_check, dtype = c->in[0].dtype, op = (uint32_t)c->rt_args[2];
  const int64_t count = (int64_t)c->rt_args[1];
  const int in_place = (c->rt_args[3] & F_IN_PLACE) != 0;
  const int n = R->n;
  const int root = (c->rt_args[3] >> 8) ? n - 1 : 0;
  tensors_t T;
  memset(&T, 0, sizeof T);
  bp_status_t st = BP_OK, per[MAX_RANKS];
  bp_collective_options_t o = {.struct_size = sizeof o, .root = root};
  uint64_t sc[MAX_RANKS][MAX_RANKS], sd[MAX_RANKS][MAX_RANKS], rc[MAX_RANKS][MAX_RANKS],
      rd[MAX_RANKS][MAX_RANKS];
  /* Inputs and outputs per owned rank. */
  for (int k = 0; st == BP_OK && k < R->own; ++k) {
    const int r = R->first + k;
    int64_t in_n = count, out_n = count;
    switch (kind) {
      case K_ALL_GATHER: out_n = count * n; break;
      case K_REDUCE_SCATTER: in_n = count * n; break;
      case K_ALL_TO_ALL: in_n = out_n = count * n; break;
      case K_ALL_TO_ALLV:
        in_n = 2 * n;
        out_n = (int64_t)n * (r + 1);
        break;
      default: break;
    }
    if (kind == K_MISMATCH && r == n - 1) in_n = out_n = count + 1;
    T.send[k] = make(R, k, dtype, in_n, &st);
    if (st == BP_OK) st = fill(R, k, T.send[k], in_n, 0);
    if (in_place && (kind == K_ALL_GATHER || kind == K_REDUCE_SCATTER)) {
      /* The in-place buffer is the larger one; this rank's block is the
       * other operand (NCCL's convention). */
      bp_tensor_t* whole = kind == K_ALL_GATHER ? make(R, k, dtype, out_n, &st) : T.send[k];
      bp_tensor_t* block = NULL;
      const int64_t b = (int64_t)r * count;
      if (st == BP_OK) st = bp_tensor_slice(whole, 0, b, b + count, 1, &block);
      if (kind == K_ALL_GATHER) {
        if (st == BP_OK) st = fill(R, k, block, count, 0);
        bp_tensor_release(T.send[k]);
        T.send[k] = block;
        T.recv[k] = whole;
      } else {
        T.recv[k] = block;
      }
    } else if (in_place) {
      T.recv[k] = T.send[k];
      bp_tensor_retain(T.recv[k]);
    } else if (kind != K_BARRIER) {
      T.recv[k] = make(R, k, dtype, out_n, &st);
    }
    if (kind == K_ALL_TO_ALLV) {
      int64_t off = 0;
      for (int q = 0; q < n; ++q) {
        sc[k][q] = (uint64_t)q + 1;
        sd[k][q] = (uint64_t)q;
        rc[k][q] = (uint64_t)r + 1;
        rd[k][q] = (uint64_t)off;
        off += r + 1;
      }
    }
  }
  if (st != BP_OK) {
    bpc_result_set(out, BPC_RESOURCE_ERROR, "setting up: %s", bp_status_message());
    goto done;
  }
  if (kind == K_SEND_RECV) st = bp_comm_group_begin();
  for (int k = 0; st == BP_OK && k < R->own; ++k) {
    if (kind == K_MISSING_RANK && R->first + k == n - 1) continue; /* never arrives */
    bp_comm_t* cm = R->comms[k];
    bp_stream_t* s = R->streams[k];
    const int r = R->first + k;
    switch (kind) {
      case K_ALL_REDUCE: case K_MISMATCH: case K_MISSING_RANK:
        st = bp_comm_all_reduce(cm, s, T.send[k], T.recv[k], op, NULL);
        break;
      case K_BROADCAST: st = bp_comm_broadcast(cm, s, T.send[k], T.recv[k], &o); break;
      case K_REDUCE: st = bp_comm_reduce(cm, s, T.send[k], T.recv[k], op, &o); break;
      case K_ALL_GATHER: st = bp_comm_all_gather(cm, s, T.send[k], T.recv[k], NULL); break;
      case K_REDUCE_SCATTER:
        st = bp_comm_reduce_scatter(cm, s, T.send[k], T.recv[k], op, NULL);
        break;
      case K_ALL_TO_ALL: st = bp_comm_all_to_all(cm, s, T.send[k], T.recv[k], NULL); break;
      case K_ALL_TO_ALLV:
        st = bp_comm_all_to_allv(cm, s, T.send[k], sc[k], sd[k], T.recv[k], rc[k], rd[k], NULL);
        break;
      case K_SEND_RECV:
        st = bp_comm_send(cm, s, T.send[k], (r + 1) % n);
        if (st == BP_OK) st = bp_comm_recv(cm, s, T.recv[k], (r + n - 1) % n);
        break;
      default: st = bp_comm_barrier(cm, s); break;
    }
  }
  if (kind == K_SEND_RECV) {
    bp_status_t end = bp_comm_group_end();
    if (st == BP_OK) st = end;
  }
  if (st != BP_OK) {
    const int unsupported = st == BP_UNIMPLEMENTED || st == BP_UNSUPPORTED;
    bpc_result_set(out, unsupported ? BPC_NOT_SUPPORTED : BPC_FAIL, "issuing: %s: %s",
                   bp_status_name(st), bp_status_message());
    sync_owned(R, per);
    goto done;
  }
  st = sync_owned(R, per);
  if (kind == K_MISMATCH || kind == K_MISSING_RANK) {
    const bp_status_t want = kind == K_MISMATCH ? BP_INVALID_ARGUMENT : BP_DEADLINE_EXCEEDED;
    for (int k = 0; k < R->own; ++k) {
      if (kind == K_MISSING_RANK && R->first + k == n - 1) continue;
      if (per[k] != want) {
        bpc_result_set(out, BPC_FAIL, "rank %d: %s, expected %s", R->first + k,
                       bp_status_name(per[k]), bp_status_name(want));
        goto done;
      }
    }
    bpc_result_set(out, BPC_PASS, "every rank: %s", bp_status_name(want));
    goto done;
  }
  if (st != BP_OK) {
    const int unsupported = st == BP_UNIMPLEMENTED || st == BP_UNSUPPORTED;
    bpc_result_set(out, unsupported ? BPC_NOT_SUPPORTED : BPC_FAIL, "%s: %s",
                   bp_status_name(st), bp_status_message());
    goto done;
  }
  for (int k = 0; k < R->own; ++k) {
    const int r = R->first + k;
    want_fn w = NULL;
    switch (kind) {
      case K_ALL_REDUCE: w = want_all_reduce; break;
      case K_BROADCAST: w = want_broadcast; break;
      case K_REDUCE: w = r == root ? want_all_reduce : NULL; break;
      case K_ALL_GATHER: w = want_all_gather; break;
      case K_REDUCE_SCATTER: w = want_reduce_scatter; break;
      case K_ALL_TO_ALL: w = want_all_to_all; break;
      case K_ALL_TO_ALLV: w = want_all_to_allv; break;
      case K_SEND_RECV: w = want_ring; break;
      default: break;
    }
    if (w && !check(R, k, T.recv[k], c, w, out)) goto done;
  }
  bpc_result_set(out, BPC_PASS, "%d ranks", n);
done:
  for (int k = 0; k < R->own; ++k) {
    if (T.send[k]) bp_tensor_release(T.send[k]);
    if (T.recv[k]) bp_tensor_release(T.recv[k]);
  }
}

void bpc_collective_execute(bp_device_t* device, bp_stream_t* stream, const bpc_case_t* c,
                            bpc_result_t* out) {
  if (c->rt_check >= K_COUNT_ || c->rt_args[0] < 2 || c->rt_args[0] > MAX_RANKS) {
    bpc_result_set(out, BPC_FAIL, "suite: malformed collectives case");
    return;
  }
  if (g_world && c->rt_check == K_MISSING_RANK) {
    bpc_result_set(out, BPC_SKIPPED, "not run across processes (it would break the world)");
    return;
  }
  /* The missing-rank case waits for its timeout; the others never should. */
  const uint64_t timeout = c->rt_check == K_MISSING_RANK ? 300ull * 1000000ull : 60ull * 1000000000ull;
  ranks_t R;
  char why[512] = "";
  bp_status_t st = ranks_open(&R, device, stream, (int)c->rt_args[0], timeout, why, sizeof why);
  if (st != BP_OK) {
    bpc_result_set(out, st == BP_UNIMPLEMENTED ? BPC_NOT_SUPPORTED : BPC_FAIL,
                   "making %llu ranks: %s", (unsigned long long)c->rt_args[0], why);
  } else {
    run_case(&R, c, out);
  }
  ranks_close(&R);
}
