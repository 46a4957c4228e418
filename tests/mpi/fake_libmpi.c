/* A fake libmpi for the MPI plugin's unit tests: a real shared library
 * with the Open MPI entry points and predefined objects the plugin uses
 * (plugins/mpi/mpi_lib.h), loaded through BP_MPI_LIBRARY.
 *
 * One process plays every rank: the world has fake_mpi_set("size", N)
 * ranks whose data are copies of this one (an all_reduce of x gives x op x
 * op ... N times, through the same predefined or user-defined op the real
 * library would use). Requests complete at the first MPI_Testall unless
 * "hang" is set. Any entry point can be made to fail with an MPI error
 * code (fake_mpi_fail). Built with -DFAKE_MPICH it has no ompi_* objects
 * and an MPIR_Init_thread, like MPICH.
 *
 * Not thread-safe beyond what the tests need (counters are plain ints;
 * the abort test's second thread calls no MPI).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
typedef void* h_t;
typedef struct status {
  int source, tag, error, cancelled;
  size_t ucount;
} status_t;
typedef void (*user_fn)(void*, void*, int*, h_t*);

/* ---- predefined objects (their addresses are the handles) --------------- */
#ifndef FAKE_MPICH
#define OBJECTS(X)                                                                             \
  X(ompi_mpi_comm_world) X(ompi_mpi_comm_null) X(ompi_mpi_errors_return) X(ompi_mpi_op_sum)    \
  X(ompi_mpi_op_prod) X(ompi_mpi_op_min) X(ompi_mpi_op_max) X(ompi_mpi_byte) X(ompi_mpi_float) \
  X(ompi_mpi_double) X(ompi_mpi_int8_t) X(ompi_mpi_uint8_t) X(ompi_mpi_int16_t)                \
  X(ompi_mpi_uint16_t) X(ompi_mpi_int32_t) X(ompi_mpi_uint32_t) X(ompi_mpi_int64_t)            \
  X(ompi_mpi_uint64_t) X(ompi_mpi_c_float_complex) X(ompi_mpi_c_double_complex)                \
  X(ompi_request_null)
#define DEFINE_OBJECT(name) EXPORT char name[64];
OBJECTS(DEFINE_OBJECT)
#define WORLD ((h_t)ompi_mpi_comm_world)
#define COMM_NULL ((h_t)ompi_mpi_comm_null)
#define REQ_NULL ((h_t)ompi_request_null)
#else
EXPORT int MPIR_Init_thread(void) { return 0; }
static char world_obj[64], null_obj[64], req_null_obj[64];
#define WORLD ((h_t)world_obj)
#define COMM_NULL ((h_t)null_obj)
#define REQ_NULL ((h_t)req_null_obj)
#endif

/* ---- state and controls ------------------------------------------------- */
#define MAX_FN 48
static struct {
  int size, initialized, finalized, provided, hang;
  int init_calls, finalize_calls, requested;
  char fail_fn[MAX_FN][48];
  int fail_code[MAX_FN], nfail;
  h_t last_type, last_op;
  int live_comms, live_ops;
} S = {.size = 1, .provided = 3};

/* Requests not completed yet (a deadline or an abort left them): freed by
 * "reset". */
#define MAX_LIVE 256
static int g_nrecvs; /* pending header receives (point to point, below) */
static void* g_live[MAX_LIVE];

/* key: "size", "initialized", "provided" (thread level), "hang";
 * "reset" clears everything. */
EXPORT void fake_mpi_set(const char* key, int value) {
  if (!strcmp(key, "reset")) {
    for (int i = 0; i < MAX_LIVE; i++) {
      free(g_live[i]);
      g_live[i] = NULL;
    }
    memset(&S, 0, sizeof S);
    g_nrecvs = 0;
    S.size = 1;
    S.provided = 3;
  } else if (!strcmp(key, "size")) S.size = value;
  else if (!strcmp(key, "initialized")) S.initialized = value;
  else if (!strcmp(key, "provided")) S.provided = value;
  else if (!strcmp(key, "hang")) S.hang = value;
}

/* "init_calls", "finalize_calls", "requested" (the thread level asked
 * for), "live_comms", "live_ops". */
EXPORT int fake_mpi_get(const char* key) {
  if (!strcmp(key, "init_calls")) return S.init_calls;
  if (!strcmp(key, "finalize_calls")) return S.finalize_calls;
  if (!strcmp(key, "requested")) return S.requested;
  if (!strcmp(key, "live_comms")) return S.live_comms;
  if (!strcmp(key, "live_ops")) return S.live_ops;
  return -1;
}

/* The next call of entry point `fn` (e.g. "MPI_Iallreduce") returns `code`. */
EXPORT void fake_mpi_fail(const char* fn, int code) {
  if (S.nfail == MAX_FN) return;
  snprintf(S.fail_fn[S.nfail], sizeof S.fail_fn[0], "%s", fn);
  S.fail_code[S.nfail++] = code;
}

/* The datatype and op of the last reduction posted. */
EXPORT void fake_mpi_last(h_t* type, h_t* op) {
  *type = S.last_type;
  *op = S.last_op;
}

static int failing(const char* fn) {
  for (int i = 0; i < S.nfail; i++)
    if (!strcmp(S.fail_fn[i], fn)) {
      int code = S.fail_code[i];
      S.fail_code[i] = S.fail_code[--S.nfail];
      memcpy(S.fail_fn[i], S.fail_fn[S.nfail], sizeof S.fail_fn[0]);
      return code;
    }
  return 0;
}
#define FAILPOINT(fn)              \
  do {                             \
    int code_ = failing(#fn);      \
    if (code_) return code_;       \
  } while (0)

/* ---- communicators ----------------------------------------------------- */
typedef struct comm {
  int size;
} comm_t;
static int comm_size(h_t c) { return c == WORLD ? S.size : ((comm_t*)c)->size; }
static h_t comm_new(void) {
  comm_t* c = malloc(sizeof *c);
  c->size = S.size;
  S.live_comms++;
  return c;
}

EXPORT int MPI_Initialized(int* f) { *f = S.initialized; return 0; }
EXPORT int MPI_Finalized(int* f) { *f = S.finalized; return 0; }
EXPORT int MPI_Init_thread(int* argc, char*** argv, int req, int* provided) {
  FAILPOINT(MPI_Init_thread);
  S.init_calls++;
  S.requested = req;
  S.initialized = 1;
  *provided = S.provided;
  return 0;
}
EXPORT int MPI_Query_thread(int* provided) { *provided = S.provided; return 0; }
EXPORT int MPI_Finalize(void) {
  S.finalize_calls++;
  S.finalized = 1;
  return 0;
}
EXPORT int MPI_Comm_rank(h_t c, int* r) { *r = 0; return 0; }
EXPORT int MPI_Comm_size(h_t c, int* s) { *s = comm_size(c); return 0; }
EXPORT int MPI_Comm_group(h_t c, h_t* g) { *g = malloc(1); return 0; }
EXPORT int MPI_Group_incl(h_t g, int n, const int* r, h_t* out) { *out = malloc(1); return 0; }
EXPORT int MPI_Group_free(h_t* g) { free(*g); *g = NULL; return 0; }
EXPORT int MPI_Comm_create_group(h_t c, h_t g, int tag, h_t* out) {
  FAILPOINT(MPI_Comm_create_group);
  *out = comm_new();
  return 0;
}
EXPORT int MPI_Comm_split(h_t c, int color, int key, h_t* out) {
  *out = color == -32766 ? COMM_NULL : comm_new();
  return 0;
}
EXPORT int MPI_Comm_free(h_t* c) {
  if (*c != WORLD && *c != COMM_NULL) {
    free(*c);
    S.live_comms--;
  }
  *c = COMM_NULL;
  return 0;
}
EXPORT int MPI_Comm_set_errhandler(h_t c, h_t e) { return 0; }

/* ---- data ---------------------------------------------------------------- */
static size_t type_size(h_t t) {
#ifndef FAKE_MPICH
  if (t == ompi_mpi_double || t == ompi_mpi_int64_t || t == ompi_mpi_uint64_t ||
      t == ompi_mpi_c_float_complex)
    return 8;
  if (t == ompi_mpi_c_double_complex) return 16;
  if (t == ompi_mpi_float || t == ompi_mpi_int32_t || t == ompi_mpi_uint32_t) return 4;
  if (t == ompi_mpi_int16_t || t == ompi_mpi_uint16_t) return 2;
#endif
  return 1;
}

/* inout = in (op) inout for the predefined ops the tests use; user ops
 * call their function. */
static int apply(h_t op, h_t t, const void* in, void* inout, int n) {
#ifndef FAKE_MPICH
#define APPLY(C, T)                                                                       \
  if (t == (h_t)C) {                                                                      \
    const T* a = in;                                                                      \
    T* b = inout;                                                                         \
    for (int i = 0; i < n; i++) {                                                         \
      if (op == (h_t)ompi_mpi_op_sum) b[i] = (T)(a[i] + b[i]);                            \
      else if (op == (h_t)ompi_mpi_op_prod) b[i] = (T)(a[i] * b[i]);                      \
      else if (op == (h_t)ompi_mpi_op_min) b[i] = a[i] < b[i] ? a[i] : b[i];              \
      else if (op == (h_t)ompi_mpi_op_max) b[i] = a[i] > b[i] ? a[i] : b[i];              \
      else return 1;                                                                      \
    }                                                                                     \
    return 0;                                                                             \
  }
  int predefined = op == (h_t)ompi_mpi_op_sum || op == (h_t)ompi_mpi_op_prod ||
                   op == (h_t)ompi_mpi_op_min || op == (h_t)ompi_mpi_op_max;
  if (predefined) {
    APPLY(ompi_mpi_float, float)
    APPLY(ompi_mpi_double, double)
    APPLY(ompi_mpi_int8_t, int8_t)
    APPLY(ompi_mpi_uint8_t, uint8_t)
    APPLY(ompi_mpi_int32_t, int32_t)
    APPLY(ompi_mpi_int64_t, int64_t)
    return 1; /* a type the fake does not reduce */
  }
#endif
  ((user_fn) * (void**)op)((void*)in, inout, &n, &t);
  return 0;
}

/* Every request is a heap token, completed by MPI_Testall. */
static int post_n(h_t* req, size_t ucount) {
  size_t* r = malloc(sizeof *r);
  *r = ucount; /* what a receive got */
  *req = r;
  for (int i = 0; i < MAX_LIVE; i++)
    if (!g_live[i]) {
      g_live[i] = r;
      break;
    }
  S.live_ops++;
  return 0;
}
static int post(h_t* req) { return post_n(req, 0); }

static const int k_in_place = 1;
#define IN_PLACE(p) ((const void*)(p) == (const void*)(uintptr_t)k_in_place)

EXPORT int MPI_Iallgather(const void* s, int sc, h_t st, void* r, int rc, h_t rt, h_t c, h_t* req) {
  FAILPOINT(MPI_Iallgather);
  size_t b = (size_t)rc * type_size(rt);
  const void* src = IN_PLACE(s) ? r : s; /* this rank is rank 0 */
  for (int p = 0; p < comm_size(c); p++) memmove((char*)r + p * b, src, b);
  return post(req);
}
static int reduce_into(const void* s, void* r, int n, h_t t, h_t op, int size) {
  S.last_type = t;
  S.last_op = op;
  size_t b = (size_t)n * type_size(t);
  unsigned char* x = malloc(b ? b : 1);
  memcpy(x, IN_PLACE(s) ? r : s, b);
  memcpy(r, x, b);
  int rc = 0;
  for (int k = 1; k < size && !rc; k++) rc = apply(op, t, x, r, n);
  free(x);
  return rc ? 16 : 0; /* MPI_ERR_OTHER */
}
EXPORT int MPI_Reduce_local(const void* in, void* inout, int n, h_t t, h_t op) {
  FAILPOINT(MPI_Reduce_local);
  S.last_type = t;
  S.last_op = op;
  return apply(op, t, in, inout, n) ? 16 : 0;
}
EXPORT int MPI_Iallreduce(const void* s, void* r, int n, h_t t, h_t op, h_t c, h_t* req) {
  FAILPOINT(MPI_Iallreduce);
  int rc = reduce_into(s, r, n, t, op, comm_size(c));
  return rc ? rc : post(req);
}
EXPORT int MPI_Ireduce(const void* s, void* r, int n, h_t t, h_t op, int root, h_t c, h_t* req) {
  FAILPOINT(MPI_Ireduce);
  int rc = root == 0 ? reduce_into(s, r, n, t, op, comm_size(c)) : 0;
  return rc ? rc : post(req);
}
EXPORT int MPI_Ibcast(void* b, int n, h_t t, int root, h_t c, h_t* req) {
  FAILPOINT(MPI_Ibcast);
  return post(req);
}
EXPORT int MPI_Ireduce_scatter_block(const void* s, void* r, int n, h_t t, h_t op, h_t c, h_t* req) {
  FAILPOINT(MPI_Ireduce_scatter_block);
  int rc = reduce_into(s, r, n, t, op, comm_size(c)); /* block 0 */
  return rc ? rc : post(req);
}
EXPORT int MPI_Ialltoall(const void* s, int sc, h_t st, void* r, int rc, h_t rt, h_t c, h_t* req) {
  FAILPOINT(MPI_Ialltoall);
  size_t b = (size_t)rc * type_size(rt);
  const void* src = IN_PLACE(s) ? r : s;
  for (int p = 0; p < comm_size(c); p++) memmove((char*)r + p * b, src, b); /* everyone's block 0 */
  return post(req);
}
EXPORT int MPI_Ialltoallv(const void* s, const int* sc, const int* sd, h_t st, void* r,
                          const int* rc, const int* rd, h_t rt, h_t c, h_t* req) {
  FAILPOINT(MPI_Ialltoallv);
  size_t e = type_size(rt);
  for (int p = 0; p < comm_size(c); p++)
    memmove((char*)r + (size_t)rd[p] * e, (const char*)s + (size_t)sd[0] * e, (size_t)rc[p] * e);
  return post(req);
}
EXPORT int MPI_Ibarrier(h_t c, h_t* req) {
  FAILPOINT(MPI_Ibarrier);
  return post(req);
}
/* Point to point. Tag 0 (the plugin's send/recv): to and from this
 * process only, matched in order. Other tags (the plugin's header
 * records): the simulated rank `dest` sends back what it is sent, so a
 * pending receive from `dest` gets a copy. */
static struct {
  const void* data;
  size_t bytes;
} g_sent[16];
static int g_nsent;
static struct {
  void* buf;
  int src, tag;
  size_t bytes;
} g_recvs[64];
EXPORT int MPI_Isend(const void* b, int n, h_t t, int dest, int tag, h_t c, h_t* req) {
  FAILPOINT(MPI_Isend);
  size_t bytes = (size_t)n * type_size(t);
  if (tag != 0) {
    for (int i = 0; i < g_nrecvs; i++)
      if (g_recvs[i].src == dest && g_recvs[i].tag == tag) {
        memcpy(g_recvs[i].buf, b, bytes < g_recvs[i].bytes ? bytes : g_recvs[i].bytes);
        g_recvs[i] = g_recvs[--g_nrecvs];
        break;
      }
    return post(req);
  }
  if (g_nsent < 16) g_sent[g_nsent++] = (typeof(g_sent[0])){b, bytes};
  return post(req);
}
EXPORT int MPI_Irecv(void* b, int n, h_t t, int src, int tag, h_t c, h_t* req) {
  FAILPOINT(MPI_Irecv);
  size_t want = (size_t)n * type_size(t), got = 0;
  if (tag != 0) {
    if (g_nrecvs < 64) g_recvs[g_nrecvs++] = (typeof(g_recvs[0])){b, src, tag, want};
    return post_n(req, want);
  }
  if (g_nsent > 0) {
    if (g_sent[0].bytes > want) return 15; /* MPI_ERR_TRUNCATE */
    memcpy(b, g_sent[0].data, got = g_sent[0].bytes);
    memmove(g_sent, g_sent + 1, (size_t)--g_nsent * sizeof g_sent[0]);
  }
  return post_n(req, got);
}
EXPORT int MPI_Testall(int n, h_t* reqs, int* flag, status_t* st) {
  int code = failing("MPI_Testall");
  if (code) {
    for (int i = 0; st && i < n; i++) st[i].error = code;
    return 18; /* MPI_ERR_IN_STATUS */
  }
  *flag = !S.hang;
  if (!*flag) return 0;
  for (int i = 0; i < n; i++) {
    if (reqs[i] != REQ_NULL) {
      if (st) st[i].ucount = *(size_t*)reqs[i];
      for (int k = 0; k < MAX_LIVE; k++)
        if (g_live[k] == reqs[i]) g_live[k] = NULL;
      free(reqs[i]);
      S.live_ops--;
    }
    reqs[i] = REQ_NULL;
  }
  return 0;
}
EXPORT int MPI_Op_create(user_fn fn, int commute, h_t* op) {
  FAILPOINT(MPI_Op_create);
  void** o = malloc(sizeof *o); /* the op's first word is its function */
  *o = (void*)fn;
  *op = o;
  return 0;
}
EXPORT int MPI_Op_free(h_t* op) {
  free(*op);
  *op = NULL;
  return 0;
}
EXPORT int MPI_Error_string(int code, char* text, int* len) {
  *len = snprintf(text, 256, "fake error %d", code);
  return 0;
}
EXPORT int MPI_Get_library_version(char* v, int* len) {
  *len = snprintf(v, 256, "Fake MPI 0.0, for tests");
  return 0;
}
