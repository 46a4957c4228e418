/* faultshim: a plugin that wraps another plugin and fails the Nth call of a
 * chosen slot, to prove that every failure a plugin can return reaches the
 * caller cleanly (no crash, no leak, the plugin's message intact).
 *
 * Configured by its instance options, BACKPLANE_FAULTSHIM_OPTIONS:
 *   plugin=PATH     the plugin library to wrap (required; read when the
 *                   library is negotiated, because the tables mirror the
 *                   wrapped plugin's: a slot it lacks stays NULL here)
 *   slot=NAME       a slot of fault_shim_slots.h (none: nothing fails)
 *   n=N             which call of that slot fails (default 1); calls are
 *                   counted from each instance_create, over all threads
 *   status=NAME     the status returned (default INTERNAL), e.g.
 *                   RESOURCE_EXHAUSTED
 *   message=TEXT    reported through host->report (default
 *                   "injected fault: SLOT call N")
 *   fired=PATH      append "SLOT N STATUS" to PATH when the fault is
 *                   injected (tests use it to know that the call happened)
 *   inner.KEY=V     passed to the wrapped plugin's instance_create as KEY=V
 * e.g. "plugin=/x/libbp_plugin_cpu.so;slot=buffer_allocate;n=3;
 *       status=RESOURCE_EXHAUSTED;inner.devices=2".
 *
 * Every other call goes to the wrapped plugin unchanged, with its handles
 * (only the instance is the wrapped plugin's own; no handle is rewrapped).
 * One wrapped plugin per process. Threading: the counting is atomic; the
 * configuration changes only in instance_create, which the tests do not
 * run concurrently with other calls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/plugin.h"
#include "bp_plugin_common.h"
#include "fault_shim_slots.h"

enum shim_slot {
#define SHIM_ENUM(name) SLOT_##name,
  BP_FAULT_SHIM_SLOTS(SHIM_ENUM)
#undef SHIM_ENUM
  SLOT_COUNT_,
  SLOT_NONE = -1
};

static const char* const kSlotNames[SLOT_COUNT_] = {
#define SHIM_NAME(name) #name,
    BP_FAULT_SHIM_SLOTS(SHIM_NAME)
#undef SHIM_NAME
};

/* Status names accepted by status=. */
#define SHIM_STATUSES(X)                                                                    \
  X(CANCELLED) X(UNKNOWN) X(INVALID_ARGUMENT) X(DEADLINE_EXCEEDED) X(NOT_FOUND)           \
  X(ALREADY_EXISTS) X(PERMISSION_DENIED) X(RESOURCE_EXHAUSTED) X(FAILED_PRECONDITION)     \
  X(ABORTED) X(OUT_OF_RANGE) X(UNIMPLEMENTED) X(INTERNAL) X(UNAVAILABLE) X(DATA_LOSS)     \
  X(UNAUTHENTICATED) X(DEVICE_LOST)

/* ---- the wrapped plugin ---------------------------------------------------- */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const bp_host_services_t* g_host;
static void* g_lib;
static bp_negotiate_reply_t g_inner_reply;
static bpp_core_table_t g_inner_core; /* zero past the wrapped table's size */
static bpp_caps_table_t g_inner_caps;
static bpp_op_table_t g_inner_ops;

/* ---- the fault ------------------------------------------------------------- */
static struct {
  int slot;
  uint64_t n;
  bp_status_t status;
  char message[256];
  char fired[1024];
} g_cfg = {SLOT_NONE, 1, BP_INTERNAL, "", ""};
static atomic_uint_fast64_t g_calls;

#define report(...) bp_plugin_report(g_host, __VA_ARGS__)

/* Counts a call of `slot`; nonzero when it is the one to fail. */
static int shim_hit(int slot) {
  if (slot != g_cfg.slot) return 0;
  return atomic_fetch_add(&g_calls, 1) + 1 == g_cfg.n;
}

static bp_status_t shim_inject(int slot) {
  if (g_cfg.fired[0]) {
    FILE* fp = fopen(g_cfg.fired, "a");
    if (fp) {
      fprintf(fp, "%s %llu %d\n", kSlotNames[slot], (unsigned long long)g_cfg.n, (int)g_cfg.status);
      fclose(fp);
    }
  }
  if (g_cfg.message[0]) return report(g_cfg.status, "%s", g_cfg.message);
  return report(g_cfg.status, "injected fault: %s call %llu", kSlotNames[slot],
                (unsigned long long)g_cfg.n);
}

/* ---- options --------------------------------------------------------------- */
static int status_from_name(const char* s, bp_status_t* out) {
#define SHIM_STATUS_MATCH(code)       \
  if (strcmp(s, #code) == 0) {        \
    *out = BP_##code;                 \
    return 1;                         \
  }
  SHIM_STATUSES(SHIM_STATUS_MATCH)
#undef SHIM_STATUS_MATCH
  return 0;
}

/* Parses `options` into g_cfg and the wrapped plugin's options (`inner`,
 * capacity `cap`). */
static bp_status_t parse_options(const char* options, char* inner, size_t cap) {
  g_cfg.slot = SLOT_NONE;
  g_cfg.n = 1;
  g_cfg.status = BP_INTERNAL;
  g_cfg.message[0] = g_cfg.fired[0] = '\0';
  inner[0] = '\0';
  char buf[4096];
  if (!options) return BP_OK;
  if (strlen(options) >= sizeof buf) return report(BP_INVALID_ARGUMENT, "faultshim: options too long");
  strcpy(buf, options);
  size_t used = 0;
  for (char* save = NULL, *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    char* eq = strchr(tok, '=');
    if (!eq) return report(BP_INVALID_ARGUMENT, "faultshim: option '%s' is not KEY=VALUE", tok);
    *eq = '\0';
    const char* key = tok;
    const char* val = eq + 1;
    if (strcmp(key, "plugin") == 0) continue; /* read at negotiation */
    if (strncmp(key, "inner.", 6) == 0) {
      int w = snprintf(inner + used, cap - used, "%s%s=%s", used ? ";" : "", key + 6, val);
      if (w < 0 || (size_t)w >= cap - used) return report(BP_INVALID_ARGUMENT, "faultshim: inner options too long");
      used += (size_t)w;
    } else if (strcmp(key, "slot") == 0) {
      for (int k = 0; k < SLOT_COUNT_; k++) {
        if (strcmp(val, kSlotNames[k]) == 0) g_cfg.slot = k;
      }
      if (g_cfg.slot == SLOT_NONE) {
        return report(BP_INVALID_ARGUMENT,
                      "faultshim: unknown slot '%s' (the void slots cannot fail; see fault_shim_slots.h)", val);
      }
    } else if (strcmp(key, "n") == 0) {
      char* end = NULL;
      g_cfg.n = strtoull(val, &end, 10);
      if (!end || *end || g_cfg.n == 0) return report(BP_INVALID_ARGUMENT, "faultshim: bad n '%s'", val);
    } else if (strcmp(key, "status") == 0) {
      if (!status_from_name(val, &g_cfg.status)) return report(BP_INVALID_ARGUMENT, "faultshim: unknown status '%s'", val);
    } else if (strcmp(key, "message") == 0) {
      snprintf(g_cfg.message, sizeof g_cfg.message, "%s", val);
    } else if (strcmp(key, "fired") == 0) {
      snprintf(g_cfg.fired, sizeof g_cfg.fired, "%s", val);
    } else {
      return report(BP_INVALID_ARGUMENT, "faultshim: unknown option '%s'", key);
    }
  }
  return BP_OK;
}

/* ---- wrappers -------------------------------------------------------------- */
/* A status slot of table `t`: fails when chosen, else forwards. */
#define SHIM_WRAP(t, name, params, args)                     \
  static bp_status_t w_##name params {                       \
    if (shim_hit(SLOT_##name)) return shim_inject(SLOT_##name); \
    return g_inner_##t.name args;                            \
  }
/* A void slot: forwards. */
#define SHIM_WRAP_VOID(name, type)                          \
  static void w_##name(type h) { g_inner_core.name(h); }

static bp_status_t w_instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  char inner[4096];
  pthread_mutex_lock(&g_lock);
  bp_status_t st = parse_options(info && info->struct_size >= sizeof *info ? info->options : NULL, inner, sizeof inner);
  atomic_store(&g_calls, 0);
  pthread_mutex_unlock(&g_lock);
  if (st != BP_OK) return st;
  if (shim_hit(SLOT_instance_create)) return shim_inject(SLOT_instance_create);
  bpp_instance_create_info_t copy;
  memset(&copy, 0, sizeof copy);
  if (info) memcpy(&copy, info, info->struct_size < sizeof copy ? info->struct_size : sizeof copy);
  copy.struct_size = sizeof copy;
  copy.options = inner[0] ? inner : NULL;
  return g_inner_core.instance_create(&copy, out);
}
SHIM_WRAP_VOID(instance_destroy, bpp_instance_t)
SHIM_WRAP(core, device_count, (bpp_instance_t i, uint32_t* c), (i, c))
SHIM_WRAP(core, device_open, (bpp_instance_t i, uint32_t k, bpp_device_t* d), (i, k, d))
SHIM_WRAP_VOID(device_close, bpp_device_t)
SHIM_WRAP(core, device_get_properties, (bpp_device_t d, bp_device_properties_t* p), (d, p))
SHIM_WRAP(core, device_memory_spaces,
          (bpp_device_t d, uint32_t cap, uint32_t es, bp_memory_space_info_t* s, uint32_t* c),
          (d, cap, es, s, c))
SHIM_WRAP(core, device_memory_usage, (bpp_device_t d, uint32_t k, uint64_t* u, uint64_t* b),
          (d, k, u, b))
SHIM_WRAP(core, buffer_allocate, (bpp_device_t d, const bp_buffer_alloc_info_t* i, bpp_buffer_t* b),
          (d, i, b))
SHIM_WRAP_VOID(buffer_release, bpp_buffer_t)
SHIM_WRAP(core, buffer_map, (bpp_buffer_t b, uint64_t o, uint64_t s, void** p), (b, o, s, p))
SHIM_WRAP(core, buffer_unmap, (bpp_buffer_t b), (b))
SHIM_WRAP(core, copy_host_to_device,
          (bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t o, uint64_t n),
          (s, src, dst, o, n))
SHIM_WRAP(core, copy_device_to_host,
          (bpp_stream_t s, bpp_buffer_t src, uint64_t o, void* dst, uint64_t n), (s, src, o, dst, n))
SHIM_WRAP(core, copy_device_to_device,
          (bpp_stream_t s, bpp_buffer_t a, uint64_t ao, bpp_buffer_t b, uint64_t bo, uint64_t n),
          (s, a, ao, b, bo, n))
SHIM_WRAP(core, copy_peer,
          (bpp_stream_t s, bpp_buffer_t a, uint64_t ao, bpp_buffer_t b, uint64_t bo, uint64_t n),
          (s, a, ao, b, bo, n))
SHIM_WRAP(core, buffer_fill,
          (bpp_stream_t s, bpp_buffer_t b, uint64_t o, uint64_t n, const void* p, uint32_t ps),
          (s, b, o, n, p, ps))
SHIM_WRAP(core, stream_create, (bpp_device_t d, const bp_stream_create_info_t* i, bpp_stream_t* s),
          (d, i, s))
SHIM_WRAP_VOID(stream_destroy, bpp_stream_t)
SHIM_WRAP(core, stream_synchronize, (bpp_stream_t s), (s))
SHIM_WRAP(core, stream_query, (bpp_stream_t s), (s))
SHIM_WRAP(core, stream_enqueue_host_func, (bpp_stream_t s, bp_host_func_t fn, void* u), (s, fn, u))
SHIM_WRAP(core, event_create, (bpp_device_t d, const bp_event_create_info_t* i, bpp_event_t* e),
          (d, i, e))
SHIM_WRAP_VOID(event_destroy, bpp_event_t)
SHIM_WRAP(core, event_record, (bpp_event_t e, bpp_stream_t s), (e, s))
SHIM_WRAP(core, stream_wait_event, (bpp_stream_t s, bpp_event_t e), (s, e))
SHIM_WRAP(core, event_query, (bpp_event_t e), (e))
SHIM_WRAP(core, event_synchronize, (bpp_event_t e), (e))
SHIM_WRAP(core, event_elapsed_ns, (bpp_event_t a, bpp_event_t b, uint64_t* ns), (a, b, ns))
SHIM_WRAP(core, buffer_import, (bpp_device_t d, const bp_external_buffer_desc_t* x, bpp_buffer_t* b),
          (d, x, b))
SHIM_WRAP(core, buffer_export, (bpp_buffer_t b, bp_external_buffer_desc_t* x), (b, x))
SHIM_WRAP(core, event_import, (bpp_device_t d, const bp_external_event_desc_t* x, bpp_event_t* e),
          (d, x, e))
SHIM_WRAP(core, event_export, (bpp_event_t e, bp_external_event_desc_t* x), (e, x))
SHIM_WRAP(caps, query_support, (bpp_device_t d, const bp_op_call_t* c, bp_support_t* o), (d, c, o))
SHIM_WRAP(caps, estimate_cost, (bpp_device_t d, const bp_op_call_t* c, bp_cost_estimate_t* o), (d, c, o))
SHIM_WRAP(caps, query_fusion, (bpp_device_t d, bp_fusion_caps_t* o), (d, o))
SHIM_WRAP(caps, launch_ew_program,
          (bpp_stream_t s, const bp_ew_program_t* p, uint32_t ni, const bp_tensor_desc_t* const* in,
           uint32_t no, const bp_tensor_desc_t* const* out),
          (s, p, ni, in, no, out))

static bp_status_t w_launch(bpp_stream_t stream, const bp_op_call_t* call) {
  if (shim_hit(SLOT_launch)) return shim_inject(SLOT_launch);
  return g_inner_ops.launch[call->op_id](stream, call);
}

/* ---- tables: the wrapped plugin's shape ------------------------------------ */
static bpp_core_table_t g_core;
static bpp_caps_table_t g_caps;
static bpp_op_launch_fn g_launch[BP_OP_COUNT];
static bpp_op_table_t g_ops;
static bp_plugin_vtable_t g_vtable;

/* Copies a table of the wrapped plugin, zero past its struct_size. */
static void copy_table(void* dst, size_t dst_size, const void* src) {
  memset(dst, 0, dst_size);
  if (!src) return;
  uint32_t n = *(const uint32_t*)src;
  memcpy(dst, src, n < dst_size ? n : dst_size);
}

static void build_tables(const bp_plugin_vtable_t* inner) {
  copy_table(&g_inner_core, sizeof g_inner_core, inner->core);
  copy_table(&g_inner_caps, sizeof g_inner_caps, inner->caps);
  copy_table(&g_inner_ops, sizeof g_inner_ops, inner->ops);
  memset(&g_core, 0, sizeof g_core);
  g_core.struct_size = sizeof g_core;
#define SHIM_SET(name) g_core.name = g_inner_core.name ? w_##name : NULL;
  BP_FAULT_SHIM_CORE_SLOTS(SHIM_SET)
  SHIM_SET(instance_destroy)
  SHIM_SET(device_close)
  SHIM_SET(buffer_release)
  SHIM_SET(stream_destroy)
  SHIM_SET(event_destroy)
#undef SHIM_SET
  memset(&g_caps, 0, sizeof g_caps);
  g_caps.struct_size = sizeof g_caps;
#define SHIM_SET_CAPS(name) g_caps.name = g_inner_caps.name ? w_##name : NULL;
  BP_FAULT_SHIM_CAPS_SLOTS(SHIM_SET_CAPS)
#undef SHIM_SET_CAPS
  uint32_t count = g_inner_ops.launch ? g_inner_ops.launch_count : 0;
  if (count > BP_OP_COUNT) count = BP_OP_COUNT;
  for (uint32_t k = 0; k < BP_OP_COUNT; k++) g_launch[k] = k < count && g_inner_ops.launch[k] ? w_launch : NULL;
  g_ops.struct_size = sizeof g_ops;
  g_ops.launch_count = count;
  g_ops.launch = g_launch;
  memset(&g_vtable, 0, sizeof g_vtable);
  g_vtable.struct_size = sizeof g_vtable;
  g_vtable.core = &g_core;
  g_vtable.ops = inner->ops ? &g_ops : NULL;
  g_vtable.caps = inner->caps ? &g_caps : NULL;
}

/* The path after "plugin=" in the options variable, into buf. */
static int wrapped_path(char* buf, size_t cap) {
  const char* opts = getenv("BACKPLANE_FAULTSHIM_OPTIONS");
  const char* p = opts;
  while (p && *p) {
    if (strncmp(p, "plugin=", 7) == 0) {
      size_t n = strcspn(p + 7, ";");
      if (n == 0 || n >= cap) return 0;
      memcpy(buf, p + 7, n);
      buf[n] = '\0';
      return 1;
    }
    p = strchr(p, ';');
    if (p) p++;
  }
  return 0;
}

static bp_status_t load_wrapped(const bp_negotiate_request_t* request) {
  if (g_lib) return BP_OK;
  char path[4096];
  if (!wrapped_path(path, sizeof path)) {
    return report(BP_FAILED_PRECONDITION, "faultshim: BACKPLANE_FAULTSHIM_OPTIONS names no plugin=PATH to wrap");
  }
  void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!lib) return report(BP_FAILED_PRECONDITION, "faultshim: cannot load '%s': %s", path, dlerror());
  bp_plugin_negotiate_fn fn = (bp_plugin_negotiate_fn)dlsym(lib, BP_PLUGIN_ENTRY_NAME);
  memset(&g_inner_reply, 0, sizeof g_inner_reply);
  g_inner_reply.struct_size = sizeof g_inner_reply;
  bp_status_t st = fn ? fn(request, &g_inner_reply) : BP_FAILED_PRECONDITION;
  if (st != BP_OK || !g_inner_reply.vtable || !g_inner_reply.vtable->core) {
    dlclose(lib);
    return report(st != BP_OK ? st : BP_FAILED_PRECONDITION, "faultshim: '%s' did not negotiate", path);
  }
  build_tables(g_inner_reply.vtable);
  g_lib = lib;
  return BP_OK;
}

__attribute__((destructor)) static void shim_unload(void) {
  if (g_lib) dlclose(g_lib);
  g_lib = NULL;
}

BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* request,
                                                 bp_negotiate_reply_t* reply) {
  if (!request || !reply || request->struct_size < BP_NEGOTIATE_REQUEST_V1_SIZE ||
      reply->struct_size < BP_NEGOTIATE_REPLY_V1_SIZE) {
    return BP_INVALID_ARGUMENT;
  }
  pthread_mutex_lock(&g_lock);
  g_host = request->host;
  bp_status_t st = load_wrapped(request);
  pthread_mutex_unlock(&g_lock);
  if (st != BP_OK) return st;
  reply->abi_major = g_inner_reply.abi_major;
  reply->abi_minor = g_inner_reply.abi_minor;
  reply->name = "faultshim";
  reply->version = "1.0.0";
  reply->vendor = "backplane tests";
  reply->vtable = &g_vtable;
  return BP_OK;
}
