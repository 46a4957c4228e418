/* A minimal host built against one header set (the frozen 1.0 copy or the
 * 1.1-shaped one), without libbackplane: it loads the plugin named on the
 * command line, negotiates, and runs add and cat through the plugin's
 * tables with descriptors, calls and create-info of its own (maybe larger)
 * size. Exit status 0 when every result is right; the first failure is
 * printed. This is a host of another minor talking to today's plugins. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/plugin.h"

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "abi_host (1.%d): %s:%d: %s failed (%s)\n",          \
              BP_ABI_VERSION_MINOR, __FILE__, __LINE__, #cond, g_last);    \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

static char g_last[512];
static void report(void* ctx, bp_status_t st, const char* msg) {
  (void)ctx;
  snprintf(g_last, sizeof g_last, "%d: %s", (int)st, msg ? msg : "");
}
static void log_line(void* ctx, int32_t level, const char* msg) {
  (void)ctx, (void)level, (void)msg;
}
static int32_t log_enabled(void* ctx, int32_t level) {
  (void)ctx, (void)level;
  return 0;
}

static const bpp_core_table_t* C;
static bpp_device_t g_dev;
static bpp_stream_t g_s;

static bp_tensor_desc_t vec(bpp_buffer_t b, int64_t n) {
  bp_tensor_desc_t d;
  memset(&d, 0, sizeof d);
  d.struct_size = sizeof d; /* this host's size, maybe past the plugin's */
  d.dtype = BP_DTYPE_F32;
  d.rank = 1;
  d.sizes[0] = n;
  d.strides[0] = 1;
  d.buffer = b;
  return d;
}
static bpp_buffer_t buffer_with(const float* v, int64_t n) {
  bp_buffer_alloc_info_t ai;
  memset(&ai, 0, sizeof ai);
  ai.struct_size = sizeof ai;
  ai.memory_space = 0;
  ai.size_bytes = (uint64_t)n * sizeof(float);
  bpp_buffer_t b = NULL;
  CHECK(C->buffer_allocate(g_dev, &ai, &b) == BP_OK);
  if (v) CHECK(C->copy_host_to_device(g_s, v, b, 0, ai.size_bytes) == BP_OK);
  return b;
}

int main(int argc, char** argv) {
  CHECK(argc == 2);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) snprintf(g_last, sizeof g_last, "%s", dlerror());
  CHECK(lib != NULL);
  bp_plugin_negotiate_fn negotiate;
  *(void**)&negotiate = dlsym(lib, BP_PLUGIN_ENTRY_NAME);
  CHECK(negotiate != NULL);
  bp_host_services_t host;
  memset(&host, 0, sizeof host);
  host.struct_size = sizeof host;
  host.report = report;
  host.log = log_line;
  host.log_enabled = log_enabled;
  bp_negotiate_request_t req;
  memset(&req, 0, sizeof req);
  req.struct_size = sizeof req;
  req.abi_major = BP_ABI_VERSION_MAJOR;
  req.abi_minor = BP_ABI_VERSION_MINOR;
  req.host = &host;
  bp_negotiate_reply_t reply;
  memset(&reply, 0, sizeof reply);
  reply.struct_size = sizeof reply;
  CHECK(negotiate(&req, &reply) == BP_OK);
  CHECK(reply.abi_major == 1 && reply.abi_minor <= BP_ABI_VERSION_MINOR);
  CHECK(reply.vtable && reply.vtable->struct_size >= BP_PLUGIN_VTABLE_V1_SIZE);
  /* Tables: read only what the plugin's struct_size covers. */
  static bpp_core_table_t core;
  memcpy(&core, reply.vtable->core,
         reply.vtable->core->struct_size < sizeof core ? reply.vtable->core->struct_size : sizeof core);
  C = &core;
  const bpp_op_table_t* ops = reply.vtable->ops;
  CHECK(ops && ops->launch_count > BP_OP_cat && ops->launch[BP_OP_add] && ops->launch[BP_OP_cat]);

  bpp_instance_create_info_t ii;
  memset(&ii, 0, sizeof ii);
  ii.struct_size = sizeof ii;
  bpp_instance_t inst = NULL;
  CHECK(C->instance_create(&ii, &inst) == BP_OK);
  CHECK(C->device_open(inst, 0, &g_dev) == BP_OK);
  bp_device_properties_t props;
  memset(&props, 0, sizeof props);
  props.struct_size = sizeof props;
  CHECK(C->device_get_properties(g_dev, &props) == BP_OK);
  CHECK(props.struct_size >= BP_DEVICE_PROPERTIES_V1_SIZE && props.struct_size <= sizeof props);
  CHECK(props.dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F32));

  /* Memory spaces at this host's element size: entry 1 where it belongs. */
  bp_memory_space_info_t spaces[4];
  memset(spaces, 0xEE, sizeof spaces);
  uint32_t count = 0;
  CHECK(C->device_memory_spaces(g_dev, 4, sizeof spaces[0], spaces, &count) == BP_OK);
  CHECK(count >= 2);
  CHECK(spaces[0].kind == BP_MEMORY_DEVICE && spaces[0].struct_size <= sizeof spaces[0]);
  CHECK(spaces[1].kind == BP_MEMORY_HOST_PINNED);
  CHECK(spaces[1].alignment_bytes > 0 && spaces[1].alignment_bytes < (1u << 20));

  bp_stream_create_info_t si;
  memset(&si, 0, sizeof si);
  si.struct_size = sizeof si;
  CHECK(C->stream_create(g_dev, &si, &g_s) == BP_OK);

  /* add: out = a + 2 * b, descriptors as pointers of this host's size. */
  const float av[5] = {1, 2, 3, 4, 5}, bv[5] = {10, 20, 30, 40, 50};
  bpp_buffer_t ab = buffer_with(av, 5), bb = buffer_with(bv, 5), ob = buffer_with(NULL, 5);
  bp_tensor_desc_t a = vec(ab, 5), b = vec(bb, 5), o = vec(ob, 5);
  const bp_tensor_desc_t* in[2] = {&a, &b};
  const bp_tensor_desc_t* out[1] = {&o};
  bp_binary_attrs_t at;
  memset(&at, 0, sizeof at);
  at.struct_size = sizeof at;
  at.alpha.kind = BP_SCALAR_FLOAT;
  at.alpha.v.f = 2.0;
  bp_op_call_t call;
  memset(&call, 0, sizeof call);
  call.struct_size = sizeof call;
  call.op_id = BP_OP_add;
  call.num_inputs = 2;
  call.num_outputs = 1;
  call.compute_dtype = BP_DTYPE_F32;
  call.inputs = in;
  call.outputs = out;
  call.attrs = &at;
  CHECK(ops->launch[BP_OP_add](g_s, &call) == BP_OK);
  float got[9];
  CHECK(C->copy_device_to_host(g_s, ob, 0, got, 5 * sizeof(float)) == BP_OK);
  CHECK(C->stream_synchronize(g_s) == BP_OK);
  for (int i = 0; i < 5; ++i) CHECK(got[i] == av[i] + 2 * bv[i]);

  /* cat of three tensors: the list through list_begin / list_count. */
  bpp_buffer_t cb = buffer_with(NULL, 9);
  bp_tensor_desc_t t0 = vec(ab, 2), t1 = vec(bb, 3), t2 = vec(ab, 4), c = vec(cb, 9);
  const bp_tensor_desc_t* list[3] = {&t0, &t1, &t2};
  const bp_tensor_desc_t* cout[1] = {&c};
  bp_dim_attrs_t dim;
  memset(&dim, 0, sizeof dim);
  dim.struct_size = sizeof dim;
  call.op_id = BP_OP_cat;
  call.num_inputs = 3;
  call.list_begin = 0;
  call.list_count = 3;
  call.inputs = list;
  call.outputs = cout;
  call.attrs = &dim;
  CHECK(ops->launch[BP_OP_cat](g_s, &call) == BP_OK);
  CHECK(C->copy_device_to_host(g_s, cb, 0, got, 9 * sizeof(float)) == BP_OK);
  CHECK(C->stream_synchronize(g_s) == BP_OK);
  const float want[9] = {1, 2, 10, 20, 30, 1, 2, 3, 4};
  for (int i = 0; i < 9; ++i) CHECK(got[i] == want[i]);

  C->buffer_release(ab);
  C->buffer_release(bb);
  C->buffer_release(ob);
  C->buffer_release(cb);
  C->stream_destroy(g_s);
  C->device_close(g_dev);
  C->instance_destroy(inst);
  printf("abi_host 1.%d with %s (ABI 1.%u): PASS\n", BP_ABI_VERSION_MINOR, reply.name,
         reply.abi_minor);
  return 0;
}
