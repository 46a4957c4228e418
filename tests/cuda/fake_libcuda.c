/* A fake CUDA driver: libcuda's entry points over host memory, built as a
 * real shared library (fake_libcuda.so.1) that the plugin dlopen's through
 * BP_CUDA_DRIVER_PATH.
 *
 * Device pointers are host addresses (one address space, as UVA). Every
 * stream is a queue served by its own worker thread, so stream order,
 * cross-stream event waits and host-function rules are executed, not
 * assumed: a plugin that forgets a wait reads stale data, and with a delay
 * per command (set_delay_us) it does so reliably. The fake checks misuse
 * and records it (fake_cuda.h): double and unknown frees, unknown stream or
 * event handles, addresses outside every allocation, calls without a
 * current context, and any CUDA call made from inside a host function
 * (cuLaunchHostFunc's rule). FAKE_CUDA_ABORT_ON_MISUSE=1 makes misuse fatal
 * (for runs that have no test to ask, such as bp-conform).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cuda.h"

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FAKE_MAX_DEVICES 4
#define FAKE_PRIO_LEAST 0
#define FAKE_PRIO_GREATEST (-5)

/* ---- state ---------------------------------------------------------------- */
enum alloc_kind { ALLOC_DEVICE, ALLOC_HOST, ALLOC_MANAGED };
typedef struct alloc {
  struct alloc* next;
  char* base;
  size_t size;
  int kind;
  int device;
  int free_pending; /* cuMemFreeAsync enqueued */
} alloc_t;

typedef struct fctx {
  int device;
  int refs;        /* primary context retains */
  int peer_enabled[FAKE_MAX_DEVICES];
} fctx_t;

typedef struct fevent fevent_t;
typedef struct cmd {
  struct cmd* next;
  int kind;
  char* dst;
  const char* src;
  char* owned; /* a snapshot of pageable host memory, freed after the copy */
  size_t n, pitch, width, height;
  uint32_t value, esize;
  CUhostFn fn;
  void* user;
  fevent_t* ev;
  uint64_t seq;
  alloc_t* alloc;
} cmd_t;
enum { CMD_COPY, CMD_MEMSET, CMD_HOSTFN, CMD_RECORD, CMD_WAIT_EVENT, CMD_WAIT_VALUE, CMD_FREE,
       CMD_CALL /* library work (fake cuBLASLt): fn(user), then free(user) */ };

typedef struct fstream {
  struct fstream* next;
  uint32_t magic;
  int device;
  int priority;
  pthread_t thread;
  cmd_t *head, *tail;
  int busy;      /* a command is executing */
  int stop;
  pthread_cond_t cv;   /* work arrived */
  pthread_cond_t idle; /* queue drained */
  /* Stream capture (fake_graph.c): launches go into `capture` (a graph)
   * instead of the queue; anything the fake cannot capture, or a call the
   * capture mode forbids, invalidates it. */
  void* capture;
  int capture_invalid;
  int capture_mode; /* CUstreamCaptureMode */
  pthread_t capture_thread;
} fstream_t;
#define STREAM_MAGIC 0x5354524du

struct fevent {
  struct fevent* next;
  uint32_t magic;
  int device;
  unsigned flags;
  uint64_t recorded, completed;
  uint64_t time_ns;
  int refs; /* the handle + queued commands */
};
#define EVENT_MAGIC 0x4556454eu

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_event_cv = PTHREAD_COND_INITIALIZER; /* events completed */
static struct {
  int devices;
  int cc; /* compute capability, 10 * major + minor */
  uint64_t memory;
  CUresult init_error;
  int pools;
  unsigned delay_us;
  int initialized;
  uint64_t used[FAKE_MAX_DEVICES];
  fctx_t ctx[FAKE_MAX_DEVICES];
  alloc_t* allocs;
  fstream_t* streams;
  fevent_t* events;
  char fail_entry[64];
  int fail_nth;
  CUresult fail_error;
  CUresult sticky_pending, sticky;
  int misuse;
  char last_misuse[256];
  int last_priority;
  struct { const char* name; uint64_t n; } counts[96];
  int ncounts;
  char pool_handle[FAKE_MAX_DEVICES];
} g = {.devices = -1};

static __thread int t_in_callback;
static __thread fstream_t* t_capture; /* this thread's capturing stream (not RELAXED) */
static int g_global_captures;          /* captures in CU_STREAM_CAPTURE_MODE_GLOBAL */
static __thread fctx_t* t_ctx_stack[16];
static __thread int t_ctx_depth;

static void misuse(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
static void misuse(const char* fmt, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  /* g_mu may or may not be held: the record uses atomics and a racy copy
   * (only read by tests after the fact). */
  __atomic_add_fetch(&g.misuse, 1, __ATOMIC_SEQ_CST);
  snprintf(g.last_misuse, sizeof g.last_misuse, "%s", buf);
  fprintf(stderr, "fake libcuda: MISUSE: %s\n", buf);
  const char* a = getenv("FAKE_CUDA_ABORT_ON_MISUSE");
  if (a && *a == '1') abort();
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void count_call_locked(const char* name) {
  for (int i = 0; i < g.ncounts; ++i)
    if (!strcmp(g.counts[i].name, name)) {
      g.counts[i].n++;
      return;
    }
  if (g.ncounts < (int)(sizeof g.counts / sizeof g.counts[0]))
    g.counts[g.ncounts++] = (__typeof__(g.counts[0])){name, 1};
}

static int is_teardown(const char* name) {
  static const char* const k[] = {"cuMemFree_v2", "cuMemFreeHost", "cuMemFreeAsync",
                                  "cuStreamDestroy_v2", "cuEventDestroy_v2",
                                  "cuDevicePrimaryCtxRelease_v2", "cuCtxPushCurrent_v2",
                                  "cuGraphExecDestroy", "cuGraphDestroy"};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i)
    if (!strcmp(k[i], name)) return 1;
  return 0;
}

/* Calls that a capture in GLOBAL mode (any thread) or THREAD_LOCAL mode
 * (the capturing thread) forbids: they are not stream-ordered, so the
 * driver refuses them and invalidates the capture. */
static int is_capture_unsafe(const char* name) {
  static const char* const k[] = {"cuMemAlloc_v2", "cuMemFree_v2", "cuMemHostAlloc",
                                  "cuMemFreeHost", "cuMemAllocManaged", "cuModuleLoadDataEx",
                                  "cuModuleUnload", "cuEventSynchronize", "cuCtxSynchronize"};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; ++i)
    if (!strcmp(k[i], name)) return 1;
  return 0;
}
static void invalidate_captures_locked(fstream_t* only);

/* Every entry point starts here: the host-function rule, initialization,
 * injected failures, the sticky error and the capture rules. */
static CUresult enter(const char* name, int needs_init) {
  if (t_in_callback) {
    misuse("%s called from inside a host function (cuLaunchHostFunc forbids CUDA calls there)",
           name);
    return CUDA_ERROR_NOT_PERMITTED;
  }
  pthread_mutex_lock(&g_mu);
  if ((t_capture || g_global_captures) && is_capture_unsafe(name)) {
    invalidate_captures_locked(g_global_captures ? NULL : t_capture);
    count_call_locked(name);
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  count_call_locked(name);
  CUresult r = CUDA_SUCCESS;
  if (needs_init && !g.initialized) r = CUDA_ERROR_NOT_INITIALIZED;
  if (r == CUDA_SUCCESS && g.fail_nth > 0 && !strcmp(g.fail_entry, name) && --g.fail_nth == 0)
    r = g.fail_error;
  /* After a sticky error only teardown works (as in the driver: the
   * context's resources go away with it). */
  if (r == CUDA_SUCCESS && g.sticky && !is_teardown(name)) r = g.sticky;
  pthread_mutex_unlock(&g_mu);
  return r;
}
#define ENTER(name, needs_init)          \
  do {                                   \
    CUresult e_ = enter(name, needs_init); \
    if (e_ != CUDA_SUCCESS) return e_;   \
  } while (0)

static fctx_t* current_ctx(const char* name) {
  if (t_ctx_depth == 0) {
    misuse("%s without a current context", name);
    return NULL;
  }
  return t_ctx_stack[t_ctx_depth - 1];
}
#define NEED_CTX(name, var)                       \
  fctx_t* var = current_ctx(name);                \
  if (!var) return CUDA_ERROR_INVALID_CONTEXT

/* The live allocation holding [p, p + n), or NULL. Caller holds g_mu. */
static alloc_t* find_alloc_locked(const void* p, size_t n) {
  for (alloc_t* a = g.allocs; a; a = a->next)
    if ((const char*)p >= a->base && (const char*)p <= a->base + a->size &&
        n <= a->size - (size_t)((const char*)p - a->base))
      return a->free_pending ? NULL : a;
  return NULL;
}
static int range_ok(const char* name, CUdeviceptr p, size_t n) {
  pthread_mutex_lock(&g_mu);
  alloc_t* a = find_alloc_locked((const void*)(uintptr_t)p, n);
  pthread_mutex_unlock(&g_mu);
  if (!a) misuse("%s: [%#llx, +%zu) is outside every live allocation", name,
                 (unsigned long long)p, n);
  return a != NULL;
}

static fstream_t* find_stream_locked(CUstream h) {
  for (fstream_t* s = g.streams; s; s = s->next)
    if ((CUstream)s == h && s->magic == STREAM_MAGIC) return s;
  return NULL;
}
static fstream_t* stream_of(const char* name, CUstream h) {
  pthread_mutex_lock(&g_mu);
  fstream_t* s = find_stream_locked(h);
  pthread_mutex_unlock(&g_mu);
  if (!s) misuse("%s: unknown stream %p (the fake wants the plugin's own streams)", name,
                 (void*)h);
  return s;
}
static fevent_t* event_of_locked(CUevent h) {
  for (fevent_t* e = g.events; e; e = e->next)
    if ((CUevent)e == h && e->magic == EVENT_MAGIC) return e;
  return NULL;
}

/* ---- streams: workers ------------------------------------------------------ */
static void event_unref_locked(fevent_t* e) {
  if (--e->refs > 0) return;
  for (fevent_t** p = &g.events; *p; p = &(*p)->next)
    if (*p == e) {
      *p = e->next;
      break;
    }
  e->magic = 0;
  free(e);
}

static void alloc_free_locked(alloc_t* a) {
  for (alloc_t** p = &g.allocs; *p; p = &(*p)->next)
    if (*p == a) {
      *p = a->next;
      break;
    }
  if (a->kind != ALLOC_HOST) g.used[a->device] -= a->size;
  free(a->base);
  free(a);
}

static int wait_value_done(uint32_t v, uint32_t want, unsigned flags) {
  switch (flags & 0xf) {
    case CU_STREAM_WAIT_VALUE_GEQ: return (int32_t)(v - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ: return v == want;
    case CU_STREAM_WAIT_VALUE_AND: return (v & want) != 0;
    case CU_STREAM_WAIT_VALUE_NOR: return ~(v | want) != 0;
    default: return 1;
  }
}

static void run_cmd(fstream_t* s, cmd_t* c) {
  (void)s;
  switch (c->kind) {
    case CMD_COPY: memmove(c->dst, c->src, c->n); break;
    case CMD_MEMSET:
      for (size_t row = 0; row < c->height; ++row)
        for (size_t i = 0; i < c->width; ++i)
          memcpy(c->dst + row * c->pitch + i * c->esize, &c->value, c->esize);
      break;
    case CMD_CALL:
      c->fn(c->user);
      free(c->user);
      break;
    case CMD_HOSTFN:
      t_in_callback = 1;
      c->fn(c->user);
      t_in_callback = 0;
      break;
    case CMD_WAIT_VALUE:
      while (!wait_value_done(__atomic_load_n((uint32_t*)c->dst, __ATOMIC_ACQUIRE), c->value,
                              (unsigned)c->n)) {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
      }
      break;
    default: break; /* events and frees: under the lock below */
  }
}

static void* stream_worker(void* arg) {
  fstream_t* s = arg;
  pthread_mutex_lock(&g_mu);
  for (;;) {
    while (!s->head && !s->stop) pthread_cond_wait(&s->cv, &g_mu);
    if (!s->head) break;
    cmd_t* c = s->head;
    s->busy = 1;
    unsigned delay = g.delay_us;
    int failed = g.sticky != CUDA_SUCCESS;
    if (!failed && g.sticky_pending) { /* this command faults */
      g.sticky = g.sticky_pending;
      g.sticky_pending = CUDA_SUCCESS;
      failed = 1;
    }
    if (c->kind == CMD_WAIT_EVENT) {
      while (c->ev->completed < c->seq && !g.sticky) pthread_cond_wait(&g_event_cv, &g_mu);
    }
    pthread_mutex_unlock(&g_mu);
    if (delay) {
      struct timespec ts = {0, (long)delay * 1000};
      nanosleep(&ts, NULL);
    }
    /* After a fault the stream skips its work, as a dead context does
     * (events still complete so nobody waits forever). */
    if (!failed || c->kind == CMD_WAIT_VALUE) run_cmd(s, c);
    else if (c->kind == CMD_CALL) free(c->user);
    pthread_mutex_lock(&g_mu);
    if (c->kind == CMD_RECORD) {
      if (c->seq > c->ev->completed) {
        c->ev->completed = c->seq;
        c->ev->time_ns = now_ns();
      }
      pthread_cond_broadcast(&g_event_cv);
    }
    if (c->ev) event_unref_locked(c->ev);
    if (c->kind == CMD_FREE) alloc_free_locked(c->alloc);
    free(c->owned);
    s->head = c->next;
    if (!s->head) s->tail = NULL;
    s->busy = 0;
    free(c);
    if (!s->head) pthread_cond_broadcast(&s->idle);
  }
  pthread_mutex_unlock(&g_mu);
  return NULL;
}

static CUresult push_cmd(fstream_t* s, cmd_t c) {
  pthread_mutex_lock(&g_mu);
  if (s->capture) { /* the fake captures kernel launches and library calls only */
    s->capture_invalid = 1;
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  pthread_mutex_unlock(&g_mu);
  cmd_t* p = malloc(sizeof *p);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  *p = c;
  p->next = NULL;
  pthread_mutex_lock(&g_mu);
  if (p->ev) p->ev->refs++;
  if (s->tail) s->tail->next = p;
  else s->head = p;
  s->tail = p;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

/* The stream a call targets: the plugin never uses the legacy default
 * stream (0), so 0 counts as misuse too. */
#define STREAM(name, h, var)               \
  fstream_t* var = stream_of(name, h);     \
  if (!var) return CUDA_ERROR_INVALID_HANDLE

/* For the fake cuBLASLt (fake_cublaslt.c, same library). */
int fake_cuda_initialized(void) {
  pthread_mutex_lock(&g_mu);
  int i = g.initialized;
  pthread_mutex_unlock(&g_mu);
  return i;
}
int fake_cuda_range_ok(const char* name, const void* p, size_t n) {
  return range_ok(name, (CUdeviceptr)(uintptr_t)p, n);
}
void fake_cuda_count(const char* name) {
  pthread_mutex_lock(&g_mu);
  count_call_locked(name);
  pthread_mutex_unlock(&g_mu);
}
/* fake_graph.c */
CUresult fake_graph_add(void* graph, void (*fn)(void*), void* user, size_t size, const void* key);

/* Runs fn(user) in stream order, or adds it to the stream's capture;
 * takes `user` (malloc'd, `size` flat bytes) in all cases. `key` names
 * what a graph update must keep (the kernel's function). */
CUresult fake_cuda_enqueue_call(const char* name, CUstream h, void (*fn)(void*), void* user,
                                size_t size, const void* key) {
  fstream_t* s = stream_of(name, h);
  if (!s) {
    free(user);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  pthread_mutex_lock(&g_mu);
  void* graph = s->capture;
  int invalid = s->capture_invalid;
  pthread_mutex_unlock(&g_mu);
  if (graph) { /* only this stream's capturer adds to it */
    CUresult r = invalid ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                         : fake_graph_add(graph, fn, user, size, key);
    free(user);
    return r;
  }
  CUresult r = push_cmd(s, (cmd_t){.kind = CMD_CALL, .fn = fn, .user = user});
  if (r != CUDA_SUCCESS) free(user);
  return r;
}
void fake_cuda_misuse(const char* what) { misuse("%s", what); }
CUresult fake_cuda_enter(const char* name) { return enter(name, 1); }

/* ---- errors ----------------------------------------------------------------- */
static const struct { CUresult r; const char *name, *text; } k_errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
     "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update"},
    {CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
     "peer access is already enabled"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};
FAKE_EXPORT CUresult cuGetErrorName(CUresult r, const char** out) {
  for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; ++i)
    if (k_errors[i].r == r) return *out = k_errors[i].name, CUDA_SUCCESS;
  *out = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuGetErrorString(CUresult r, const char** out) {
  for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; ++i)
    if (k_errors[i].r == r) return *out = k_errors[i].text, CUDA_SUCCESS;
  *out = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

/* ---- init and devices ------------------------------------------------------- */
static void config_defaults_locked(void) {
  const char* env = getenv("FAKE_CUDA_DEVICES");
  g.devices = env ? atoi(env) : 1;
  if (g.devices > FAKE_MAX_DEVICES) g.devices = FAKE_MAX_DEVICES;
  const char* mb = getenv("FAKE_CUDA_MEMORY_MB");
  g.memory = (uint64_t)(mb && atoi(mb) > 0 ? atoi(mb) : 64) << 20;
  g.pools = 1;
  g.init_error = CUDA_SUCCESS;
  const char* cc = getenv("FAKE_CUDA_CC"); /* e.g. 86: compute capability 8.6 */
  g.cc = cc && atoi(cc) >= 10 ? atoi(cc) : 90;
}

int fake_cuda_cc(void) {
  pthread_mutex_lock(&g_mu);
  int cc = g.cc;
  pthread_mutex_unlock(&g_mu);
  return cc;
}

FAKE_EXPORT CUresult cuInit(unsigned flags) {
  ENTER("cuInit", 0);
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  if (g.devices < 0) config_defaults_locked();
  CUresult r = g.init_error;
  if (r == CUDA_SUCCESS && g.devices == 0) r = CUDA_ERROR_NO_DEVICE;
  g.initialized = r == CUDA_SUCCESS;
  pthread_mutex_unlock(&g_mu);
  return r;
}
FAKE_EXPORT CUresult cuDriverGetVersion(int* v) {
  ENTER("cuDriverGetVersion", 0);
  const char* env = getenv("FAKE_CUDA_DRIVER_VERSION"); /* e.g. 12080: another driver */
  *v = env && *env ? atoi(env) : 13000;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetCount(int* n) {
  ENTER("cuDeviceGetCount", 1);
  *n = g.devices;
  return CUDA_SUCCESS;
}
static int valid_device(CUdevice d) { return d >= 0 && d < g.devices; }
FAKE_EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  ENTER("cuDeviceGet", 1);
  if (!valid_device(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
  ENTER("cuDeviceGetName", 1);
  if (!valid_device(d) || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "Fake CUDA device %d", d);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  ENTER("cuDeviceGetAttribute", 1);
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = g.cc / 10; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = g.cc % 10; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 132; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *v = 32; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *v = 1980000; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: *v = 2619000; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: *v = 6144; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *v = 1; break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: *v = g.pools; break;
    default: *v = 0; break;
  }
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
  ENTER("cuDeviceTotalMem_v2", 1);
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = g.memory;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice d) {
  ENTER("cuDeviceGetUuid_v2", 1);
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  memset(uuid->bytes, 0xf0 + d, sizeof uuid->bytes);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceCanAccessPeer(int* can, CUdevice a, CUdevice b) {
  ENTER("cuDeviceCanAccessPeer", 1);
  if (!valid_device(a) || !valid_device(b)) return CUDA_ERROR_INVALID_DEVICE;
  *can = a != b;
  return CUDA_SUCCESS;
}

/* ---- contexts ---------------------------------------------------------------- */
FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  ENTER("cuDevicePrimaryCtxRetain", 1);
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&g_mu);
  g.ctx[d].device = d;
  g.ctx[d].refs++;
  pthread_mutex_unlock(&g_mu);
  *ctx = (CUcontext)&g.ctx[d];
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  ENTER("cuDevicePrimaryCtxRelease_v2", 1);
  if (!valid_device(d)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&g_mu);
  int bad = g.ctx[d].refs <= 0;
  if (!bad) g.ctx[d].refs--;
  pthread_mutex_unlock(&g_mu);
  if (bad) {
    misuse("cuDevicePrimaryCtxRelease: device %d's primary context was not retained", d);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return CUDA_SUCCESS;
}
static fctx_t* ctx_of(CUcontext c) {
  for (int i = 0; i < FAKE_MAX_DEVICES; ++i)
    if ((CUcontext)&g.ctx[i] == c && g.ctx[i].refs > 0) return &g.ctx[i];
  return NULL;
}
FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext c) {
  ENTER("cuCtxPushCurrent_v2", 1);
  pthread_mutex_lock(&g_mu);
  fctx_t* f = ctx_of(c);
  pthread_mutex_unlock(&g_mu);
  if (!f) {
    misuse("cuCtxPushCurrent: %p is not a retained context", (void*)c);
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  if (t_ctx_depth == 16) {
    misuse("cuCtxPushCurrent: 16 contexts pushed and never popped");
    return CUDA_ERROR_INVALID_VALUE;
  }
  t_ctx_stack[t_ctx_depth++] = f;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* out) {
  /* No ENTER: popping must work after a sticky error, as in the driver. */
  if (t_in_callback) misuse("cuCtxPopCurrent called from inside a host function");
  if (t_ctx_depth == 0) {
    misuse("cuCtxPopCurrent with no context pushed");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  fctx_t* f = t_ctx_stack[--t_ctx_depth];
  if (out) *out = (CUcontext)f;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
  ENTER("cuCtxGetStreamPriorityRange", 1);
  NEED_CTX("cuCtxGetStreamPriorityRange", c);
  (void)c;
  *least = FAKE_PRIO_LEAST;
  *greatest = FAKE_PRIO_GREATEST;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned flags) {
  ENTER("cuCtxEnablePeerAccess", 1);
  NEED_CTX("cuCtxEnablePeerAccess", c);
  pthread_mutex_lock(&g_mu);
  fctx_t* p = ctx_of(peer);
  CUresult r = !p || p == c || flags ? CUDA_ERROR_INVALID_VALUE
               : c->peer_enabled[p->device] ? CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED
                                            : CUDA_SUCCESS;
  if (r == CUDA_SUCCESS) c->peer_enabled[p->device] = 1;
  pthread_mutex_unlock(&g_mu);
  return r;
}

/* ---- memory ------------------------------------------------------------------ */
static CUresult alloc_new(int kind, int device, size_t size, size_t align, void** out) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  /* Pinned memory: at most 1 GiB in all (the fake's "host"). */
  uint64_t host_used = 0;
  for (alloc_t* x = g.allocs; x; x = x->next)
    if (x->kind == ALLOC_HOST) host_used += x->size;
  if ((kind != ALLOC_HOST && size > g.memory - g.used[device]) ||
      (kind == ALLOC_HOST && size > (UINT64_C(1) << 30) - host_used)) {
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  alloc_t* a = calloc(1, sizeof *a);
  size_t rounded = (size + align - 1) / align * align;
  char* p = a ? aligned_alloc(align, rounded) : NULL;
  if (!p) {
    free(a);
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  memset(p, 0xa5, rounded); /* device memory starts as garbage */
  *a = (alloc_t){.next = g.allocs, .base = p, .size = size, .kind = kind, .device = device};
  g.allocs = a;
  if (kind != ALLOC_HOST) g.used[device] += size;
  pthread_mutex_unlock(&g_mu);
  *out = p;
  return CUDA_SUCCESS;
}

/* cuMemFree and cuMemFreeHost synchronize the device first, as the driver
 * does: queued work on the memory completes before it goes. */
static CUresult alloc_release(const char* name, void* p, int kind_host) {
  pthread_mutex_lock(&g_mu);
  for (fstream_t* s = g.streams; s; s = s->next)
    while (s->head && !s->stop) pthread_cond_wait(&s->idle, &g_mu);
  alloc_t* a = NULL;
  for (alloc_t* x = g.allocs; x; x = x->next)
    if (x->base == p) a = x;
  int bad = !a || a->free_pending || (a->kind == ALLOC_HOST) != kind_host;
  if (!bad) alloc_free_locked(a);
  pthread_mutex_unlock(&g_mu);
  if (bad) {
    misuse("%s(%p): not a live %s allocation (double free?)", name, p,
           kind_host ? "pinned host" : "device");
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free_b, size_t* total) {
  ENTER("cuMemGetInfo_v2", 1);
  NEED_CTX("cuMemGetInfo_v2", c);
  pthread_mutex_lock(&g_mu);
  *free_b = g.memory - g.used[c->device];
  *total = g.memory;
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* out, size_t size) {
  ENTER("cuMemAlloc_v2", 1);
  NEED_CTX("cuMemAlloc_v2", c);
  void* p = NULL;
  CUresult r = alloc_new(ALLOC_DEVICE, c->device, size, 256, &p);
  if (r == CUDA_SUCCESS) *out = (CUdeviceptr)(uintptr_t)p;
  return r;
}
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  ENTER("cuMemFree_v2", 1);
  NEED_CTX("cuMemFree_v2", c);
  (void)c;
  return alloc_release("cuMemFree", (void*)(uintptr_t)p, 0);
}
FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* out, size_t size, unsigned flags) {
  ENTER("cuMemAllocManaged", 1);
  NEED_CTX("cuMemAllocManaged", c);
  if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
  void* p = NULL;
  CUresult r = alloc_new(ALLOC_MANAGED, c->device, size, 256, &p);
  if (r == CUDA_SUCCESS) *out = (CUdeviceptr)(uintptr_t)p;
  return r;
}
FAKE_EXPORT CUresult cuMemHostAlloc(void** out, size_t size, unsigned flags) {
  ENTER("cuMemHostAlloc", 1);
  NEED_CTX("cuMemHostAlloc", c);
  if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                          CU_MEMHOSTALLOC_WRITECOMBINED))
    return CUDA_ERROR_INVALID_VALUE;
  return alloc_new(ALLOC_HOST, c->device, size, 4096, out);
}
FAKE_EXPORT CUresult cuMemFreeHost(void* p) {
  ENTER("cuMemFreeHost", 1);
  return alloc_release("cuMemFreeHost", p, 1);
}
FAKE_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* out, void* p, unsigned flags) {
  ENTER("cuMemHostGetDevicePointer_v2", 1);
  pthread_mutex_lock(&g_mu);
  alloc_t* a = find_alloc_locked(p, 1);
  int ok = a && a->kind == ALLOC_HOST && !flags;
  pthread_mutex_unlock(&g_mu);
  if (!ok) {
    misuse("cuMemHostGetDevicePointer(%p): not pinned host memory", p);
    return CUDA_ERROR_INVALID_VALUE;
  }
  *out = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice d) {
  ENTER("cuDeviceGetDefaultMemPool", 1);
  if (!valid_device(d) || !g.pools) return CUDA_ERROR_NOT_SUPPORTED;
  *pool = (CUmemoryPool)&g.pool_handle[d];
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute a, void* v) {
  ENTER("cuMemPoolSetAttribute", 1);
  (void)v;
  if ((char*)pool < g.pool_handle || (char*)pool >= g.pool_handle + FAKE_MAX_DEVICES)
    return CUDA_ERROR_INVALID_VALUE;
  return a == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
FAKE_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* out, size_t size, CUmemoryPool pool,
                                             CUstream h) {
  ENTER("cuMemAllocFromPoolAsync", 1);
  NEED_CTX("cuMemAllocFromPoolAsync", c);
  STREAM("cuMemAllocFromPoolAsync", h, s);
  (void)s;
  if ((char*)pool != &g.pool_handle[c->device]) {
    misuse("cuMemAllocFromPoolAsync: pool of another device");
    return CUDA_ERROR_INVALID_VALUE;
  }
  void* p = NULL;
  CUresult r = alloc_new(ALLOC_DEVICE, c->device, size, 256, &p);
  if (r == CUDA_SUCCESS) *out = (CUdeviceptr)(uintptr_t)p;
  return r;
}
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream h) {
  ENTER("cuMemFreeAsync", 1);
  STREAM("cuMemFreeAsync", h, s);
  pthread_mutex_lock(&g_mu);
  alloc_t* a = NULL;
  for (alloc_t* x = g.allocs; x; x = x->next)
    if (x->base == (char*)(uintptr_t)p) a = x;
  int bad = !a || a->free_pending || a->kind != ALLOC_DEVICE;
  if (!bad) a->free_pending = 1;
  pthread_mutex_unlock(&g_mu);
  if (bad) {
    misuse("cuMemFreeAsync(%#llx): not a live device allocation (double free?)",
           (unsigned long long)p);
    return CUDA_ERROR_INVALID_VALUE;
  }
  return push_cmd(s, (cmd_t){.kind = CMD_FREE, .alloc = a});
}

/* ---- copies and fills -------------------------------------------------------- */
static CUresult copy_cmd(const char* name, CUstream h, void* dst, const void* src, size_t n,
                         int check_dst, int check_src) {
  ENTER(name, 1);
  NEED_CTX(name, c);
  (void)c;
  STREAM(name, h, s);
  if ((check_dst && !range_ok(name, (CUdeviceptr)(uintptr_t)dst, n)) ||
      (check_src && !range_ok(name, (CUdeviceptr)(uintptr_t)src, n)))
    return CUDA_ERROR_INVALID_VALUE;
  if (n == 0) return CUDA_SUCCESS;
  char *d = dst, *sp = (char*)src;
  if (check_dst && check_src && d < sp + n && sp < d + n) {
    misuse("%s: overlapping ranges (undefined in CUDA)", name);
    return CUDA_ERROR_INVALID_VALUE;
  }
  /* From pageable memory the driver stages the source before returning,
   * so the caller may reuse it at once: snapshot it. */
  char* owned = NULL;
  if (check_dst && !check_src) {
    pthread_mutex_lock(&g_mu);
    alloc_t* a = find_alloc_locked(src, n);
    pthread_mutex_unlock(&g_mu);
    if (!a || a->kind != ALLOC_HOST) {
      owned = malloc(n);
      if (!owned) return CUDA_ERROR_OUT_OF_MEMORY;
      memcpy(owned, src, n);
      src = owned;
    }
  }
  CUresult r = push_cmd(s, (cmd_t){.kind = CMD_COPY, .dst = dst, .src = src, .n = n, .owned = owned});
  if (r != CUDA_SUCCESS) free(owned);
  return r;
}
FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream h) {
  return copy_cmd("cuMemcpyHtoDAsync_v2", h, (void*)(uintptr_t)dst, src, n, 1, 0);
}
FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream h) {
  return copy_cmd("cuMemcpyDtoHAsync_v2", h, dst, (const void*)(uintptr_t)src, n, 0, 1);
}
FAKE_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) {
  return copy_cmd("cuMemcpyDtoDAsync_v2", h, (void*)(uintptr_t)dst,
                  (const void*)(uintptr_t)src, n, 1, 1);
}
FAKE_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src,
                                       CUcontext sctx, size_t n, CUstream h) {
  pthread_mutex_lock(&g_mu);
  int ok = ctx_of(dctx) && ctx_of(sctx);
  pthread_mutex_unlock(&g_mu);
  if (!ok) {
    misuse("cuMemcpyPeerAsync: unknown context");
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  return copy_cmd("cuMemcpyPeerAsync", h, (void*)(uintptr_t)dst, (const void*)(uintptr_t)src,
                  n, 1, 1);
}
static CUresult memset_cmd(const char* name, CUstream h, CUdeviceptr dst, size_t pitch,
                           uint32_t value, uint32_t esize, size_t width, size_t height) {
  ENTER(name, 1);
  NEED_CTX(name, c);
  (void)c;
  STREAM(name, h, s);
  if (dst % esize || (height > 1 && pitch < width * esize)) {
    misuse("%s: misaligned address or pitch", name);
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!width || !height) return CUDA_SUCCESS;
  if (!range_ok(name, dst, pitch * (height - 1) + width * esize)) return CUDA_ERROR_INVALID_VALUE;
  return push_cmd(s, (cmd_t){.kind = CMD_MEMSET, .dst = (char*)(uintptr_t)dst, .pitch = pitch,
                             .value = value, .esize = esize, .width = width, .height = height});
}
FAKE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream h) {
  return memset_cmd("cuMemsetD8Async", h, dst, n, v, 1, n, 1);
}
FAKE_EXPORT CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream h) {
  return memset_cmd("cuMemsetD16Async", h, dst, 2 * n, v, 2, n, 1);
}
FAKE_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, CUstream h) {
  return memset_cmd("cuMemsetD32Async", h, dst, 4 * n, v, 4, n, 1);
}
FAKE_EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr dst, size_t pitch, unsigned char v, size_t w,
                                       size_t hgt, CUstream h) {
  return memset_cmd("cuMemsetD2D8Async", h, dst, pitch, v, 1, w, hgt);
}

/* ---- streams ---------------------------------------------------------------- */
FAKE_EXPORT CUresult cuStreamCreateWithPriority(CUstream* out, unsigned flags, int priority) {
  ENTER("cuStreamCreateWithPriority", 1);
  NEED_CTX("cuStreamCreateWithPriority", c);
  if (flags & ~(unsigned)CU_STREAM_NON_BLOCKING) return CUDA_ERROR_INVALID_VALUE;
  fstream_t* s = calloc(1, sizeof *s);
  if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
  s->magic = STREAM_MAGIC;
  s->device = c->device;
  /* The driver clamps; the fake records what was asked. */
  s->priority = priority;
  pthread_cond_init(&s->cv, NULL);
  pthread_cond_init(&s->idle, NULL);
  if (pthread_create(&s->thread, NULL, stream_worker, s) != 0) {
    free(s);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  pthread_mutex_lock(&g_mu);
  g.last_priority = priority;
  s->next = g.streams;
  g.streams = s;
  pthread_mutex_unlock(&g_mu);
  *out = (CUstream)s;
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream h) {
  ENTER("cuStreamDestroy_v2", 1);
  pthread_mutex_lock(&g_mu);
  fstream_t* s = find_stream_locked(h);
  if (s) {
    for (fstream_t** p = &g.streams; *p; p = &(*p)->next)
      if (*p == s) {
        *p = s->next;
        break;
      }
    s->stop = 1; /* the worker drains the queue first, as the driver does */
    pthread_cond_signal(&s->cv);
  }
  pthread_mutex_unlock(&g_mu);
  if (!s) {
    misuse("cuStreamDestroy(%p): unknown stream (destroyed twice?)", (void*)h);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  pthread_join(s->thread, NULL);
  s->magic = 0;
  pthread_cond_destroy(&s->cv);
  pthread_cond_destroy(&s->idle);
  free(s);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuStreamSynchronize(CUstream h) {
  ENTER("cuStreamSynchronize", 1);
  STREAM("cuStreamSynchronize", h, s);
  pthread_mutex_lock(&g_mu);
  if (s->capture) { /* waiting on a capturing stream is illegal */
    s->capture_invalid = 1;
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  while (s->head) pthread_cond_wait(&s->idle, &g_mu);
  CUresult r = g.sticky;
  pthread_mutex_unlock(&g_mu);
  return r;
}
FAKE_EXPORT CUresult cuStreamQuery(CUstream h) {
  ENTER("cuStreamQuery", 1);
  STREAM("cuStreamQuery", h, s);
  pthread_mutex_lock(&g_mu);
  if (s->capture) {
    s->capture_invalid = 1;
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  CUresult r = g.sticky ? g.sticky : s->head ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
  pthread_mutex_unlock(&g_mu);
  return r;
}
FAKE_EXPORT CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void* user) {
  ENTER("cuLaunchHostFunc", 1);
  STREAM("cuLaunchHostFunc", h, s);
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  return push_cmd(s, (cmd_t){.kind = CMD_HOSTFN, .fn = fn, .user = user});
}
FAKE_EXPORT CUresult cuStreamWaitValue32_v2(CUstream h, CUdeviceptr addr, cuuint32_t value,
                                            unsigned flags) {
  ENTER("cuStreamWaitValue32_v2", 1);
  STREAM("cuStreamWaitValue32_v2", h, s);
  pthread_mutex_lock(&g_mu);
  alloc_t* a = find_alloc_locked((void*)(uintptr_t)addr, 4);
  int ok = a && a->kind == ALLOC_HOST && addr % 4 == 0;
  pthread_mutex_unlock(&g_mu);
  if (!ok) {
    misuse("cuStreamWaitValue32: %#llx is not aligned mapped pinned memory",
           (unsigned long long)addr);
    return CUDA_ERROR_INVALID_VALUE;
  }
  return push_cmd(s, (cmd_t){.kind = CMD_WAIT_VALUE, .dst = (char*)(uintptr_t)addr,
                             .value = value, .n = flags});
}

/* ---- events ------------------------------------------------------------------ */
FAKE_EXPORT CUresult cuEventCreate(CUevent* out, unsigned flags) {
  ENTER("cuEventCreate", 1);
  NEED_CTX("cuEventCreate", c);
  if (flags & ~(unsigned)(CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC))
    return CUDA_ERROR_INVALID_VALUE;
  fevent_t* e = calloc(1, sizeof *e);
  if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
  *e = (fevent_t){.magic = EVENT_MAGIC, .device = c->device, .flags = flags, .refs = 1};
  pthread_mutex_lock(&g_mu);
  e->next = g.events;
  g.events = e;
  pthread_mutex_unlock(&g_mu);
  *out = (CUevent)e;
  return CUDA_SUCCESS;
}
#define EVENT(name, h, var)                                          \
  pthread_mutex_lock(&g_mu);                                         \
  fevent_t* var = event_of_locked(h);                                \
  if (!var) {                                                        \
    pthread_mutex_unlock(&g_mu);                                     \
    misuse("%s(%p): unknown event (destroyed?)", name, (void*)(h));  \
    return CUDA_ERROR_INVALID_HANDLE;                                \
  }
FAKE_EXPORT CUresult cuEventDestroy_v2(CUevent h) {
  ENTER("cuEventDestroy_v2", 1);
  EVENT("cuEventDestroy", h, e);
  e->magic = 0x44454144u; /* unknown to later calls; freed when unreferenced */
  event_unref_locked(e);
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventRecord(CUevent h, CUstream sh) {
  ENTER("cuEventRecord", 1);
  STREAM("cuEventRecord", sh, s);
  EVENT("cuEventRecord", h, e);
  if (e->device != s->device) {
    pthread_mutex_unlock(&g_mu);
    misuse("cuEventRecord: event of device %d on a stream of device %d", e->device, s->device);
    return CUDA_ERROR_INVALID_HANDLE;
  }
  uint64_t seq = ++e->recorded;
  pthread_mutex_unlock(&g_mu);
  return push_cmd(s, (cmd_t){.kind = CMD_RECORD, .ev = e, .seq = seq});
}
FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream sh, CUevent h, unsigned flags) {
  ENTER("cuStreamWaitEvent", 1);
  STREAM("cuStreamWaitEvent", sh, s);
  EVENT("cuStreamWaitEvent", h, e);
  uint64_t seq = e->recorded; /* the most recent record, as the driver does */
  pthread_mutex_unlock(&g_mu);
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  if (seq == 0) return CUDA_SUCCESS;
  return push_cmd(s, (cmd_t){.kind = CMD_WAIT_EVENT, .ev = e, .seq = seq});
}
FAKE_EXPORT CUresult cuEventQuery(CUevent h) {
  ENTER("cuEventQuery", 1);
  EVENT("cuEventQuery", h, e);
  CUresult r = e->completed >= e->recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  pthread_mutex_unlock(&g_mu);
  return r;
}
FAKE_EXPORT CUresult cuEventSynchronize(CUevent h) {
  ENTER("cuEventSynchronize", 1);
  EVENT("cuEventSynchronize", h, e);
  uint64_t seq = e->recorded;
  e->refs++;
  while (e->completed < seq && !g.sticky) pthread_cond_wait(&g_event_cv, &g_mu);
  CUresult r = g.sticky;
  event_unref_locked(e);
  pthread_mutex_unlock(&g_mu);
  return r;
}
FAKE_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
  ENTER("cuEventElapsedTime_v2", 1);
  pthread_mutex_lock(&g_mu);
  fevent_t *ea = event_of_locked(a), *eb = event_of_locked(b);
  CUresult r = CUDA_SUCCESS;
  if (!ea || !eb) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (!ea->recorded || !eb->recorded) {
    r = CUDA_ERROR_INVALID_HANDLE;
  } else if (ea->completed < ea->recorded || eb->completed < eb->recorded) {
    r = CUDA_ERROR_NOT_READY;
  } else {
    *ms = (float)(((double)eb->time_ns - (double)ea->time_ns) / 1e6);
  }
  pthread_mutex_unlock(&g_mu);
  if (r == CUDA_ERROR_INVALID_HANDLE && (!ea || !eb)) misuse("cuEventElapsedTime: unknown event");
  return r;
}

/* ---- stream capture (the graphs themselves: fake_graph.c) ------------------------ */
static void invalidate_captures_locked(fstream_t* only) {
  for (fstream_t* s = g.streams; s; s = s->next)
    if (s->capture && (!only || s == only)) s->capture_invalid = 1;
}

CUresult fake_stream_begin_capture(const char* name, CUstream h, void* graph, int mode) {
  STREAM(name, h, s);
  if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
      mode != CU_STREAM_CAPTURE_MODE_RELAXED)
    return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  CUresult r = CUDA_SUCCESS;
  if (s->capture) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else {
    s->capture = graph;
    s->capture_invalid = 0;
    s->capture_mode = mode;
    s->capture_thread = pthread_self();
    if (mode == CU_STREAM_CAPTURE_MODE_GLOBAL) g_global_captures++;
  }
  pthread_mutex_unlock(&g_mu);
  if (r == CUDA_SUCCESS && mode != CU_STREAM_CAPTURE_MODE_RELAXED) t_capture = s;
  return r;
}

/* Ends the capture: *out_graph is the graph (NULL and INVALIDATED when
 * something invalidated it; the caller frees it then). */
CUresult fake_stream_end_capture(const char* name, CUstream h, void** out_graph) {
  STREAM(name, h, s);
  pthread_mutex_lock(&g_mu);
  CUresult r = CUDA_SUCCESS;
  *out_graph = s->capture;
  if (!s->capture) {
    r = CUDA_ERROR_ILLEGAL_STATE;
  } else if (s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
             !pthread_equal(s->capture_thread, pthread_self())) {
    r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    *out_graph = NULL;
  } else {
    if (s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL) g_global_captures--;
    if (s->capture_invalid) r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    s->capture = NULL;
    s->capture_invalid = 0;
    if (t_capture == s) t_capture = NULL;
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

int fake_stream_capturing(CUstream h) {
  pthread_mutex_lock(&g_mu);
  fstream_t* s = find_stream_locked(h);
  int c = s && s->capture;
  pthread_mutex_unlock(&g_mu);
  return c;
}

/* ---- control ------------------------------------------------------------------- */
void fake_kernels_reset(void);
static void c_reset(void) {
  fake_kernels_reset();
  pthread_mutex_lock(&g_mu);
  config_defaults_locked();
  g.fail_nth = 0;
  g.sticky = g.sticky_pending = CUDA_SUCCESS;
  g.delay_us = 0;
  g.ncounts = 0;
  g.last_priority = 0;
  pthread_mutex_unlock(&g_mu);
  __atomic_store_n(&g.misuse, 0, __ATOMIC_SEQ_CST);
  g.last_misuse[0] = 0;
}
static void c_set_devices(int n) {
  pthread_mutex_lock(&g_mu);
  g.devices = n < 0 ? 0 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
  pthread_mutex_unlock(&g_mu);
}
static void c_set_memory(uint64_t b) { pthread_mutex_lock(&g_mu); g.memory = b; pthread_mutex_unlock(&g_mu); }
static void c_set_init_error(CUresult r) { pthread_mutex_lock(&g_mu); g.init_error = r; pthread_mutex_unlock(&g_mu); }
static void c_set_compute_capability(int cc) { pthread_mutex_lock(&g_mu); g.cc = cc; pthread_mutex_unlock(&g_mu); }
static void c_set_pools(int on) { pthread_mutex_lock(&g_mu); g.pools = on; pthread_mutex_unlock(&g_mu); }
static void c_fail_call(const char* entry, int nth, CUresult r) {
  pthread_mutex_lock(&g_mu);
  snprintf(g.fail_entry, sizeof g.fail_entry, "%s", entry);
  g.fail_nth = nth;
  g.fail_error = r;
  pthread_mutex_unlock(&g_mu);
}
static void c_make_sticky(CUresult r) { pthread_mutex_lock(&g_mu); g.sticky_pending = r; pthread_mutex_unlock(&g_mu); }
static void c_set_delay_us(unsigned us) { pthread_mutex_lock(&g_mu); g.delay_us = us; pthread_mutex_unlock(&g_mu); }
static int c_misuse_count(void) { return __atomic_load_n(&g.misuse, __ATOMIC_SEQ_CST); }
static const char* c_last_misuse(void) { return g.last_misuse; }
static uint64_t c_call_count(const char* entry) {
  uint64_t n = 0;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < g.ncounts; ++i)
    if (!strcmp(g.counts[i].name, entry)) n = g.counts[i].n;
  pthread_mutex_unlock(&g_mu);
  return n;
}
static int c_last_stream_priority(void) { return g.last_priority; }
static uint64_t c_live_allocations(void) {
  uint64_t n = 0;
  pthread_mutex_lock(&g_mu);
  for (alloc_t* a = g.allocs; a; a = a->next) n++;
  pthread_mutex_unlock(&g_mu);
  return n;
}
static uint64_t c_live_streams(void) {
  uint64_t n = 0;
  pthread_mutex_lock(&g_mu);
  for (fstream_t* s = g.streams; s; s = s->next) n++;
  pthread_mutex_unlock(&g_mu);
  return n;
}

static uint64_t c_live_events(void) {
  uint64_t n = 0;
  pthread_mutex_lock(&g_mu);
  for (fevent_t* e = g.events; e; e = e->next) n += e->magic == EVENT_MAGIC;
  pthread_mutex_unlock(&g_mu);
  return n;
}

void fake_kernels_last_launch(fake_cuda_launch_t* out, uint64_t* count);
uint64_t fake_graph_live(void);
void fake_kernels_last_image(char* out, size_t cap);
static const fake_cuda_control_t k_control = {
    c_reset, c_set_devices, c_set_memory, c_set_init_error, c_set_pools, c_fail_call,
    c_make_sticky, c_set_delay_us, c_misuse_count, c_last_misuse, c_call_count,
    c_last_stream_priority, c_live_allocations, c_live_streams, fake_kernels_last_launch,
    fake_graph_live, c_set_compute_capability, fake_kernels_last_image, c_live_events};

FAKE_EXPORT const fake_cuda_control_t* fake_cuda_control(void) { return &k_control; }
