/* backplane CPU plugin: the exec table's slots (compile, info, launch,
 * release, serialize, deserialize); claim is in cpu_region_claim.c.
 *
 * An executable is reference counted: the handle holds one reference and
 * each launch in flight one more, so executable_release may come while
 * launched work is pending. Launches run on the stream's worker as a host
 * function.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_region.h"

static void exe_unref(struct bpp_executable_s* exe) {
  if (exe && atomic_fetch_sub(&exe->refs, 1) == 1) {
    cpu_region_clear(exe);
    free(exe);
  }
}

/* Builds an executable from a region; BP_UNIMPLEMENTED with *refusal
 * filled when the plugin does not take it. */
static bp_status_t compile(bpp_device_t device, const bp_region_desc_t* region,
                           bp_support_t* refusal, bpp_executable_t* out) {
  struct bpp_executable_s* exe = calloc(1, sizeof *exe);
  if (!exe) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region_compile: out of memory");
  atomic_init(&exe->refs, 1);
  exe->device = device;
  char msg[sizeof(refusal->message)];
  msg[0] = '\0';
  int reason = cpu_region_build(region, exe, msg, sizeof msg);
  bp_status_t st = BP_OK;
  if (reason < 0) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: region_compile: out of memory");
  } else if (reason > 0) {
    if (refusal) {
      refusal->supported = 0;
      refusal->reason = (uint32_t)reason;
      refusal->requires_contiguous = 0;
      bp_plugin_format(refusal->message, sizeof refusal->message, 0, "cpu: %s", msg);
    }
    st = cpu_error(BP_UNIMPLEMENTED, "cpu: region_compile: %s", msg);
  } else if (!exe->blob) {
    st = cpu_region_encode(region, &exe->blob, &exe->blob_size);
  }
  if (st != BP_OK) {
    exe_unref(exe);
    return st;
  }
  *out = exe;
  return BP_OK;
}

static bp_status_t region_compile(bpp_device_t device, const bp_region_desc_t* region,
                                  bp_support_t* refusal, bpp_executable_t* out) {
  if (!device || !region || !out)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: region_compile: NULL argument");
  if (region->struct_size < BP_REGION_DESC_V1_SIZE)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: region_compile: struct_size %u", region->struct_size);
  *out = NULL;
  return compile(device, region, refusal, out);
}

static bp_status_t get_info(bpp_executable_t exe, bp_region_info_t* out) {
  if (!exe || !out || out->struct_size < BP_REGION_INFO_V1_SIZE)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: executable_get_info: NULL or short argument");
  bp_region_info_t info = {.struct_size = sizeof info};
  info.workspace_bytes = exe->workspace;
  info.workspace_alignment = exe->workspace ? 64 : 0;
  info.num_aliases = exe->num_aliases;
  info.alias_stride = sizeof(bp_region_alias_t);
  info.aliases = exe->aliases;
  info.flops = exe->flops;
  info.bytes = exe->bytes;
  /* A roofline on this machine's figures (device properties). */
  const bp_device_properties_t* p = &exe->device->props;
  double bw = p->memory_bandwidth_bytes_per_s > 0 ? p->memory_bandwidth_bytes_per_s : 1e10;
  double fl = p->peak_ops_per_s[BP_DTYPE_F32] > 0 ? p->peak_ops_per_s[BP_DTYPE_F32] : 1e10;
  double tm = exe->bytes / bw * 1e9, tc = exe->flops / fl * 1e9;
  info.time_ns = (tm > tc ? tm : tc) + (p->launch_overhead_ns > 0 ? p->launch_overhead_ns : 0);
  info.cost_confidence = 20;
  bp_kit_copy_out(out, &info, sizeof info);
  return BP_OK;
}

typedef struct launch_job {
  struct bpp_executable_s* exe; /* one reference */
  uint32_t num_args;
  int has_ws;
  bp_tensor_desc_t ws;
  bp_tensor_desc_t* descs;
  const bp_tensor_desc_t** ptrs;
} launch_job_t;

static bp_status_t launch_run(void* user) {
  launch_job_t* j = user;
  bp_status_t st = cpu_region_run(j->exe, j->ptrs, j->has_ws ? &j->ws : NULL);
  exe_unref(j->exe);
  free(j->descs);
  free(j->ptrs);
  free(j);
  return st;
}

static bp_status_t launch(bpp_stream_t stream, bpp_executable_t exe, uint32_t num_args,
                          const bp_tensor_desc_t* const* args, const bp_tensor_desc_t* ws) {
  if (!stream || !exe || (num_args && !args))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: executable_launch: NULL argument");
  if (num_args != exe->num_args)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: executable_launch: %u arguments, the region takes %u",
                     num_args, exe->num_args);
  if (exe->workspace && (!ws || ws->rank != 1 || (uint64_t)ws->sizes[0] < exe->workspace))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: executable_launch: needs a workspace of %llu bytes",
                     (unsigned long long)exe->workspace);
  launch_job_t* j = calloc(1, sizeof *j);
  if (j) {
    j->descs = calloc(num_args ? num_args : 1, sizeof *j->descs);
    j->ptrs = calloc(num_args ? num_args : 1, sizeof *j->ptrs);
  }
  if (!j || !j->descs || !j->ptrs) {
    if (j) {
      free(j->descs);
      free(j->ptrs);
    }
    free(j);
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: executable_launch: out of memory");
  }
  for (uint32_t i = 0; i < num_args; i++) {
    const bp_tensor_desc_t* a = args[i];
    memcpy(&j->descs[i], a, a->struct_size < sizeof j->descs[i] ? a->struct_size : sizeof j->descs[i]);
    j->descs[i].struct_size = sizeof j->descs[i];
    j->ptrs[i] = &j->descs[i];
  }
  if (exe->workspace) {
    j->has_ws = 1;
    memcpy(&j->ws, ws, ws->struct_size < sizeof j->ws ? ws->struct_size : sizeof j->ws);
  }
  j->num_args = num_args;
  atomic_fetch_add(&exe->refs, 1);
  j->exe = exe;
  bp_status_t st = bp_kit_stream_enqueue_host_func(stream, launch_run, j);
  if (st != BP_OK) {
    exe_unref(exe);
    free(j->descs);
    free(j->ptrs);
    free(j);
  }
  return st;
}

static void release(bpp_executable_t exe) { exe_unref(exe); }

static bp_status_t serialize(bpp_executable_t exe, void* data, uint64_t capacity, uint64_t* out_size) {
  if (!exe || !out_size) return cpu_error(BP_INVALID_ARGUMENT, "cpu: executable_serialize: NULL argument");
  *out_size = exe->blob_size;
  if (!data) return BP_OK;
  if (capacity < exe->blob_size)
    return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: executable_serialize: %llu bytes needed, %llu given",
                     (unsigned long long)exe->blob_size, (unsigned long long)capacity);
  memcpy(data, exe->blob, exe->blob_size);
  return BP_OK;
}

static bp_status_t deserialize(bpp_device_t device, const void* data, uint64_t size, bpp_executable_t* out) {
  if (!device || !data || !out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: executable_deserialize: NULL argument");
  *out = NULL;
  struct bpp_executable_s* exe = calloc(1, sizeof *exe);
  if (!exe) return cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: executable_deserialize: out of memory");
  atomic_init(&exe->refs, 1);
  exe->device = device;
  bp_status_t st = cpu_region_decode(data, size, exe);
  if (st != BP_OK) {
    exe_unref(exe);
    return st;
  }
  *out = exe;
  return BP_OK;
}

const bpp_exec_table_t cpu_exec_table = {
    .struct_size = sizeof(bpp_exec_table_t),
    .region_claim = cpu_region_claim,
    .region_compile = region_compile,
    .executable_get_info = get_info,
    .executable_launch = launch,
    .executable_release = release,
    .executable_serialize = serialize,
    .executable_deserialize = deserialize,
};
