/* backplane Vulkan plugin: negotiation, the loader and dispatch table,
 * instance and device selection, properties, memory spaces, buffers.
 *
 * libvulkan.so.1 is opened in instance_create (bp_kit_library_open); every entry point
 * is resolved through vkGetInstanceProcAddr / vkGetDeviceProcAddr into a
 * vk_dispatch_t (the fake-driver seam of the unit tests). Without the loader
 * or without a usable device, instance_create answers BP_UNAVAILABLE with
 * the reason and the host records the plugin as skipped.
 *
 * Environment / options ("key=value;..." from BACKPLANE_VULKAN_OPTIONS):
 *   BP_VULKAN_VALIDATION=1 / validation=1   Khronos validation layer and a
 *       debug messenger: every warning or error is logged (BP_LOG_ERROR) and
 *       counted; BP_VULKAN_VALIDATION_ABORT=1 makes the process exit with
 *       status 86 at the first message (for test runs).
 *   BP_VULKAN_FORCE_STAGING=1 / force_staging=1   device memory is treated
 *       as not host-visible: every transfer goes through staging buffers.
 *   budget_mb=N   caps each memory pool at N MiB.
 *   flush=N       commands per batch before a submit (default 64).
 *   BP_VULKAN_SPECIALIZE_AFTER=N / specialize_after=N   an elementwise
 *       program shape (ops, dtypes, layout) runs on the generic interpreter
 *       pipeline for its first N launches and gets its specialized pipeline
 *       compiled at launch N+1 (default 2; 0: at once). Compiles cost far more
 *       than one launch on CPU drivers (lavapipe: 1-5 s each).
 *   BP_VULKAN_PIPELINE_CACHE=FILE / pipeline_cache=FILE   the VkPipelineCache
 *       is created from FILE when it exists and written back (replaced
 *       atomically) when the device closes, so processes share compiled
 *       pipelines. Unset: a file per device, driver and plugin version in
 *       $XDG_CACHE_HOME/backplane/ or ~/.cache/backplane/. Set to nothing
 *       (or pipeline_cache=off): no file. A file whose header is not this
 *       device's is ignored with a warning and rewritten (vk_pipeline_file.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vk_internal.h"

const char* vk_result_name(VkResult r) {
  static _Thread_local char buf[64];
  const char* n;
  switch (r) {
#define VK__R(x) case x: n = #x; break;
    VK__R(VK_SUCCESS) VK__R(VK_NOT_READY) VK__R(VK_TIMEOUT) VK__R(VK_INCOMPLETE)
    VK__R(VK_ERROR_OUT_OF_HOST_MEMORY) VK__R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VK__R(VK_ERROR_INITIALIZATION_FAILED) VK__R(VK_ERROR_DEVICE_LOST)
    VK__R(VK_ERROR_MEMORY_MAP_FAILED) VK__R(VK_ERROR_LAYER_NOT_PRESENT)
    VK__R(VK_ERROR_EXTENSION_NOT_PRESENT) VK__R(VK_ERROR_FEATURE_NOT_PRESENT)
    VK__R(VK_ERROR_INCOMPATIBLE_DRIVER) VK__R(VK_ERROR_TOO_MANY_OBJECTS)
    VK__R(VK_ERROR_UNKNOWN)
#undef VK__R
    default: n = "VkResult"; break;
  }
  snprintf(buf, sizeof buf, "%s (%d)", n, (int)r);
  return buf;
}

bp_status_t vk_status_of(VkResult r) {
  switch (r) {
    case VK_SUCCESS: return BP_OK;
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS: return BP_RESOURCE_EXHAUSTED;
    case VK_ERROR_DEVICE_LOST: return BP_DEVICE_LOST;
    case VK_TIMEOUT: return BP_DEADLINE_EXCEEDED;
    default: return BP_INTERNAL;
  }
}

/* ---- dispatch table ------------------------------------------------- */
/* Symbol lists of the kit's loader (bp_kit_symbols_load), one per level. */
#define BP_KIT_SYMBOL_TABLE vk_dispatch_t
#define VK__REQ(f) BP_KIT_SYMBOL_REQUIRED(PFN_##f, f)
#define VK__OPT(f) BP_KIT_SYMBOL_OPTIONAL(PFN_##f, f)
static const bp_kit_symbol_t k_global_syms[] = {VK_GLOBAL_FUNCS(VK__REQ) VK_GLOBAL_OPT_FUNCS(VK__OPT)};
static const bp_kit_symbol_t k_instance_syms[] = {VK_INSTANCE_FUNCS(VK__REQ) VK_INSTANCE_OPT_FUNCS(VK__OPT)};
static const bp_kit_symbol_t k_device_syms[] = {VK_DEVICE_FUNCS(VK__REQ) VK_DEVICE_OPT_FUNCS(VK__OPT)};
#undef VK__REQ
#undef VK__OPT
#undef BP_KIT_SYMBOL_TABLE

typedef struct vk_resolver {
  const vk_dispatch_t* d;
  VkInstance instance; /* for vkGetInstanceProcAddr (VK_NULL_HANDLE: global) */
  VkDevice device;     /* for vkGetDeviceProcAddr when not VK_NULL_HANDLE */
} vk_resolver_t;

static void* resolve(void* ctx, const char* name) {
  const vk_resolver_t* r = ctx;
  PFN_vkVoidFunction f = r->device ? r->d->vkGetDeviceProcAddr(r->device, name)
                                   : r->d->vkGetInstanceProcAddr(r->instance, name);
  void* p;
  memcpy(&p, &f, sizeof p); /* function and object pointers share a representation (POSIX) */
  return p;
}

bp_status_t vk_dispatch_load_global(vk_dispatch_t* d, char* msg, size_t cap) {
  vk_resolver_t r = {d, VK_NULL_HANDLE, VK_NULL_HANDLE};
  return bp_kit_symbols_load(d, k_global_syms, BP_KIT_COUNT(k_global_syms), resolve, &r,
                             "the Vulkan loader", msg, cap);
}

bp_status_t vk_dispatch_load_instance(vk_dispatch_t* d, VkInstance inst, char* msg, size_t cap) {
  vk_resolver_t r = {d, inst, VK_NULL_HANDLE};
  return bp_kit_symbols_load(d, k_instance_syms, BP_KIT_COUNT(k_instance_syms), resolve, &r,
                             "the Vulkan instance", msg, cap);
}

bp_status_t vk_dispatch_load_device(vk_dispatch_t* d, VkDevice dev, char* msg, size_t cap) {
  vk_resolver_t r = {d, VK_NULL_HANDLE, dev};
  return bp_kit_symbols_load(d, k_device_syms, BP_KIT_COUNT(k_device_syms), resolve, &r,
                             "the Vulkan device", msg, cap);
}

/* ---- validation messages -------------------------------------------- */
static atomic_ullong g_validation_messages;
uint64_t vk_validation_messages(void) { return atomic_load(&g_validation_messages); }

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                               VkDebugUtilsMessageTypeFlagsEXT types,
                                               const VkDebugUtilsMessengerCallbackDataEXT* data,
                                               void* user) {
  (void)types;
  (void)user;
  if (!(sev & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
               VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)))
    return VK_FALSE;
  atomic_fetch_add(&g_validation_messages, 1);
  const char* text = data && data->pMessage ? data->pMessage : "(no text)";
  fprintf(stderr, "vulkan validation %s: %s\n",
          sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning", text);
  vk_log(BP_LOG_ERROR, "vulkan validation: %s", text);
  int abort_run = 0;
  (void)bp_plugin_parse_flag(bp_kit_host(), "BP_VULKAN_VALIDATION_ABORT",
                             getenv("BP_VULKAN_VALIDATION_ABORT"), 0, &abort_run);
  if (abort_run) _exit(86);
  return VK_FALSE;
}

/* ---- options ----------------------------------------------------------- */
/* The value text of `key=` in the options string, or NULL. */
static const char* opt_value(const char* options, const char* key) {
  if (!options) return NULL;
  char pat[48];
  snprintf(pat, sizeof pat, "%s=", key);
  const char* o = strstr(options, pat);
  return o ? o + strlen(pat) : NULL;
}

/* 0/1 from the environment variable `env` when set, else the option `key`;
 * a malformed value warns (through the host log) and counts as 0. */
static int opt_flag(const char* options, const char* key, const char* env) {
  int v = 0;
  const char* e = getenv(env);
  if (e && *e) {
    (void)bp_plugin_parse_flag(bp_kit_host(), env, e, 0, &v);
    return v;
  }
  (void)bp_plugin_parse_flag(bp_kit_host(), key, opt_value(options, key), 0, &v);
  return v;
}

/* A whole number >= 0 from the environment variable `env` when set (env
 * may be NULL), else the option `key`; a malformed value warns and gives
 * `dflt`. */
static long opt_num(const char* options, const char* key, const char* env, long dflt, long max) {
  uint64_t v = (uint64_t)dflt;
  const char* e = env ? getenv(env) : NULL;
  if (e && *e)
    (void)bp_plugin_parse_uint(bp_kit_host(), env, e, 0, (uint64_t)max, (uint64_t)dflt, &v);
  else
    (void)bp_plugin_parse_uint(bp_kit_host(), key, opt_value(options, key), 0, (uint64_t)max,
                               (uint64_t)dflt, &v);
  return (long)v;
}

/* Copies the value of `key=` (up to ';') or the environment variable into
 * out (empty when neither is set or the value does not fit). */
static void opt_str(const char* options, const char* key, const char* env, char* out, size_t cap) {
  out[0] = 0;
  const char* e = getenv(env);
  const char* from = env;
  size_t n = 0;
  if (e && *e) {
    n = strlen(e);
  } else if ((e = opt_value(options, key)) != NULL) {
    from = key;
    n = strcspn(e, ";");
  }
  if (!e || n == 0) return;
  if (n >= cap) {
    vk_log(BP_LOG_WARN, "%s is %zu bytes long, more than the %zu this plugin keeps; not used", from,
           n, cap - 1);
    return;
  }
  memcpy(out, e, n);
  out[n] = 0;
}

/* ---- device selection ----------------------------------------------------- */
static int has_ext(const VkExtensionProperties* e, uint32_t n, const char* name) {
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(e[i].extensionName, name) == 0) return 1;
  return 0;
}

/* Reads features and limits; returns the reason text when the device cannot
 * run the plugin's shaders, NULL when it can. */
static const char* probe_device(struct bpp_instance_s* inst, VkPhysicalDevice pd, vk_features_t* f,
                                VkPhysicalDeviceProperties* out_props, uint32_t* out_qfam,
                                uint32_t* out_qcount) {
  vk_dispatch_t* vk = &inst->vk;
  memset(f, 0, sizeof *f);
  VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
  vk->vkGetPhysicalDeviceProperties2(pd, &p2);
  *out_props = p2.properties;
  const VkPhysicalDeviceLimits* lim = &p2.properties.limits;
  f->api_version = p2.properties.apiVersion;
  f->subgroup_size = sg.subgroupSize ? sg.subgroupSize : 1;
  f->timestamp_period = lim->timestampPeriod;
  for (int i = 0; i < 3; i++) {
    f->max_wg_size[i] = lim->maxComputeWorkGroupSize[i];
    f->max_wg_count[i] = lim->maxComputeWorkGroupCount[i];
  }
  f->max_wg_invocations = lim->maxComputeWorkGroupInvocations;
  f->max_shared = lim->maxComputeSharedMemorySize;
  f->min_ssbo_align = lim->minStorageBufferOffsetAlignment;
  f->max_ssbo_range = lim->maxStorageBufferRange;
  f->min_texel_align = lim->minTexelBufferOffsetAlignment;
  f->max_texels = lim->maxTexelBufferElements;
  f->cpu = p2.properties.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
  if (VK_API_VERSION_MAJOR(f->api_version) < 1 ||
      (VK_API_VERSION_MAJOR(f->api_version) == 1 && VK_API_VERSION_MINOR(f->api_version) < 2))
    return "Vulkan 1.2 is required";
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
  vk->vkGetPhysicalDeviceFeatures2(pd, &f2);
  f->f64 = f2.features.shaderFloat64;
  f->i64 = f2.features.shaderInt64;
  f->i16 = f2.features.shaderInt16;
  f->storage16 = f11.storageBuffer16BitAccess;
  f->storage8 = f12.storageBuffer8BitAccess;
  f->i8 = f12.shaderInt8;
  f->f16 = f12.shaderFloat16;
  f->bda = f12.bufferDeviceAddress;
  f->timeline = f12.timelineSemaphore;
  uint32_t nq = 0;
  vk->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
  VkQueueFamilyProperties qf[16];
  if (nq > 16) nq = 16;
  vk->vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qf);
  int found = 0;
  /* Prefer a compute-only family (async compute on GPUs), else any. */
  for (int pass = 0; pass < 2 && !found; pass++)
    for (uint32_t i = 0; i < nq; i++) {
      if (!(qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) || !qf[i].queueCount) continue;
      if (pass == 0 && (qf[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) continue;
      *out_qfam = i;
      *out_qcount = qf[i].queueCount > 4 ? 4 : qf[i].queueCount;
      f->timestamp_bits = qf[i].timestampValidBits;
      found = 1;
      break;
    }
  if (!found) return "no queue family with VK_QUEUE_COMPUTE_BIT";
  if (!f->bda) return "bufferDeviceAddress is required";
  if (!f->timeline) return "timelineSemaphore is required";
  if (!f->i64) return "shaderInt64 is required";
  if (!f->f64) return "shaderFloat64 is required (the shaders declare f64 types)";
  if (!f->i8 || !f->i16 || !f->storage8 || !f->storage16)
    return "8- and 16-bit storage and arithmetic (storageBuffer8/16BitAccess, shaderInt8/16) are required";
  uint32_t ne = 0;
  vk->vkEnumerateDeviceExtensionProperties(pd, NULL, &ne, NULL);
  VkExtensionProperties* ext = ne ? calloc(ne, sizeof *ext) : NULL;
  if (ext) {
    vk->vkEnumerateDeviceExtensionProperties(pd, NULL, &ne, ext);
    f->memory_budget_ext = has_ext(ext, ne, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    f->push_descriptor_ext = has_ext(ext, ne, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
    f->memory_fd_ext = has_ext(ext, ne, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
    f->semaphore_fd_ext = has_ext(ext, ne, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
    free(ext);
  }
  return NULL;
}

static int find_type(const VkPhysicalDeviceMemoryProperties* mp, VkMemoryPropertyFlags want,
                     VkMemoryPropertyFlags avoid) {
  for (uint32_t i = 0; i < mp->memoryTypeCount; i++) {
    VkMemoryPropertyFlags f = mp->memoryTypes[i].propertyFlags;
    if ((f & want) == want && !(f & avoid)) return (int)i;
  }
  return -1;
}

static void fill_properties(struct bpp_device_s* d, const VkPhysicalDeviceProperties* p) {
  bp_device_properties_t* o = &d->props;
  memset(o, 0, sizeof *o);
  o->struct_size = sizeof *o;
  switch (p->deviceType) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: o->kind = BP_DEVICE_KIND_GPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: o->kind = BP_DEVICE_KIND_INTEGRATED_GPU; break;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: o->kind = BP_DEVICE_KIND_VIRTUAL; break;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: o->kind = BP_DEVICE_KIND_VIRTUAL; break;
    default: o->kind = BP_DEVICE_KIND_UNKNOWN; break;
  }
  snprintf(o->name, sizeof o->name, "%.120s", p->deviceName);
  snprintf(o->vendor, sizeof o->vendor, "vendor 0x%04x", p->vendorID);
  snprintf(o->driver_version, sizeof o->driver_version, "Vulkan %u.%u.%u, driver 0x%x",
           VK_API_VERSION_MAJOR(p->apiVersion), VK_API_VERSION_MINOR(p->apiVersion),
           VK_API_VERSION_PATCH(p->apiVersion), p->driverVersion);
  memcpy(o->uuid, p->pipelineCacheUUID, 16);
  d->cache_ids.vendor_id = p->vendorID;
  d->cache_ids.device_id = p->deviceID;
  d->cache_ids.driver_version = p->driverVersion;
  memcpy(d->cache_ids.uuid, p->pipelineCacheUUID, VK_UUID_SIZE);
  uint64_t local = 0;
  for (uint32_t h = 0; h < d->mem_props.memoryHeapCount; h++)
    if (d->mem_props.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      local += d->mem_props.memoryHeaps[h].size;
  o->memory_bytes = local;
  o->subgroup_size = d->feat.subgroup_size;
  o->compute_units = 0; /* Vulkan does not report it */
  o->dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32) | BP_DTYPE_BIT(BP_DTYPE_I32);
  if (d->feat.storage8) o->dtype_mask |= BP_DTYPE_BIT(BP_DTYPE_I8) | BP_DTYPE_BIT(BP_DTYPE_U8) | BP_DTYPE_BIT(BP_DTYPE_BOOL);
  /* fp8 bytes: the codes the fused and group quantizations write; no other
   * kernel reads or writes them (VK_FP8_DTYPES, vk_compute_dtype_mask) */
  if (d->feat.storage8) o->dtype_mask |= VK_FP8_DTYPES;
  if (d->feat.storage16) o->dtype_mask |= BP_DTYPE_BIT(BP_DTYPE_F16) | BP_DTYPE_BIT(BP_DTYPE_BF16) | BP_DTYPE_BIT(BP_DTYPE_I16);
  if (d->feat.f64) o->dtype_mask |= BP_DTYPE_BIT(BP_DTYPE_F64);
  if (d->feat.i64) o->dtype_mask |= BP_DTYPE_BIT(BP_DTYPE_I64);
  o->flags = 0;
  if (d->feat.timestamp_bits) o->flags |= BP_DEVICE_FLAG_TIMESTAMPS;
  if (p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU || p->deviceType == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU)
    o->flags |= BP_DEVICE_FLAG_UNIFIED_MEMORY;
  /* Estimates: Vulkan reports no clock or core count. A CPU implementation
   * (lavapipe) runs at roughly host speed; GPUs get a conservative figure. */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (cores < 1) cores = 1;
  double f32 = p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? (double)cores * 2.5e9 * 8 * 2
               : p->deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? 10e12 : 1e12;
  o->peak_ops_per_s[BP_DTYPE_F32] = f32;
  o->peak_ops_per_s[BP_DTYPE_F16] = f32;
  o->peak_ops_per_s[BP_DTYPE_BF16] = f32;
  o->peak_ops_per_s[BP_DTYPE_F64] = f32 / (p->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? 2 : 16);
  o->peak_ops_per_s[BP_DTYPE_I32] = f32 / 2;
  o->peak_ops_per_s[BP_DTYPE_I64] = f32 / 4;
  o->memory_bandwidth_bytes_per_s = p->deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? 300e9 : 20e9;
  o->host_link_bandwidth_bytes_per_s = p->deviceType == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? 12e9 : 10e9;
  o->launch_overhead_ns = 20000; /* batch submit + completion wake-up */
}

static void pool_setup(vk_pool_t* p, struct bpp_device_s* d, uint32_t type) {
  memset(p, 0, sizeof *p);
  pthread_mutex_init(&p->lock, NULL);
  p->dev = d;
  p->type_index = type;
  p->heap_index = d->mem_props.memoryTypes[type].heapIndex;
  VkMemoryPropertyFlags f = d->mem_props.memoryTypes[type].propertyFlags;
  p->host_visible = (f & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) != 0;
  p->host_coherent = (f & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) != 0;
  p->device_local = (f & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) != 0;
  p->block_size = VK_BLOCK_SIZE;
}

bp_status_t vk_instance_create_with(PFN_vkGetInstanceProcAddr gipa, const char* options,
                                    struct bpp_instance_s** out) {
  bp_status_t st = BP_OK;
  char msg[VK_MSG_CAP];
  VkPhysicalDevice* pds = NULL;
  struct bpp_instance_s* inst = calloc(1, sizeof *inst);
  *out = NULL;
  if (!inst) return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  pthread_mutex_init(&inst->lock, NULL);
  inst->vk.vkGetInstanceProcAddr = gipa;
  inst->opt.validation = opt_flag(options, "validation", "BP_VULKAN_VALIDATION");
  inst->opt.force_staging = opt_flag(options, "force_staging", "BP_VULKAN_FORCE_STAGING");
  inst->opt.budget_limit = (uint64_t)opt_num(options, "budget_mb", NULL, 0, 1L << 40) << 20;
  inst->opt.flush_threshold = (uint32_t)opt_num(options, "flush", NULL, 64, 1L << 20);
  inst->opt.specialize_after =
      (uint32_t)opt_num(options, "specialize_after", "BP_VULKAN_SPECIALIZE_AFTER", 2, 1L << 20);
  opt_str(options, "pipeline_cache", "BP_VULKAN_PIPELINE_CACHE", inst->opt.pipeline_cache,
          sizeof inst->opt.pipeline_cache);
  {
    /* Off: the variable set to nothing, or the value "off"; unset: the default file. */
    const char* env = getenv("BP_VULKAN_PIPELINE_CACHE");
    const char* opt = opt_value(options, "pipeline_cache");
    inst->opt.pipeline_cache_off = (env && !*env) || (!env && opt && strcspn(opt, ";") == 0) ||
                                   strcmp(inst->opt.pipeline_cache, "off") == 0;
    if (inst->opt.pipeline_cache_off) inst->opt.pipeline_cache[0] = 0;
  }
  if (!inst->opt.flush_threshold) inst->opt.flush_threshold = 1;
  if ((st = vk_dispatch_load_global(&inst->vk, msg, sizeof msg)) != BP_OK) {
    st = vk_error(st, "vulkan: %s", msg);
    goto cleanup;
  }
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (inst->vk.vkEnumerateInstanceVersion) inst->vk.vkEnumerateInstanceVersion(&loader_version);
  if (loader_version < VK_API_VERSION_1_2) {
    st = vk_error(BP_UNAVAILABLE, "vulkan: the loader speaks Vulkan %u.%u; 1.2 is required",
                  VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));
    goto cleanup;
  }
  const char* layers[1] = {"VK_LAYER_KHRONOS_validation"};
  const char* exts[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  uint32_t nlayers = 0, nexts = 0;
  if (inst->opt.validation) {
    uint32_t n = 0;
    inst->vk.vkEnumerateInstanceLayerProperties(&n, NULL);
    VkLayerProperties* lp = n ? calloc(n, sizeof *lp) : NULL;
    int found = 0;
    if (lp) {
      inst->vk.vkEnumerateInstanceLayerProperties(&n, lp);
      for (uint32_t i = 0; i < n; i++) found |= strcmp(lp[i].layerName, layers[0]) == 0;
      free(lp);
    }
    if (!found) {
      st = vk_error(BP_UNAVAILABLE, "vulkan: validation requested but %s is not installed", layers[0]);
      goto cleanup;
    }
    nlayers = 1;
    nexts = 1;
  }
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "backplane",
                           .pEngineName = "backplane",
                           .apiVersion = VK_API_VERSION_1_2};
  VkDebugUtilsMessengerCreateInfoEXT dbg = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = debug_cb};
  VkInstanceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                             .pNext = nlayers ? &dbg : NULL,
                             .pApplicationInfo = &app,
                             .enabledLayerCount = nlayers,
                             .ppEnabledLayerNames = layers,
                             .enabledExtensionCount = nexts,
                             .ppEnabledExtensionNames = exts};
  VkResult r = inst->vk.vkCreateInstance(&ci, NULL, &inst->instance);
  if (r != VK_SUCCESS) {
    inst->instance = VK_NULL_HANDLE;
    st = vk_error(BP_UNAVAILABLE, "vulkan: vkCreateInstance failed: %s", vk_result_name(r));
    goto cleanup;
  }
  if ((st = vk_dispatch_load_instance(&inst->vk, inst->instance, msg, sizeof msg)) != BP_OK) {
    st = vk_error(st, "vulkan: %s", msg);
    goto cleanup;
  }
  if (nlayers && inst->vk.vkCreateDebugUtilsMessengerEXT)
    inst->vk.vkCreateDebugUtilsMessengerEXT(inst->instance, &dbg, NULL, &inst->messenger);
  uint32_t npd = 0;
  r = inst->vk.vkEnumeratePhysicalDevices(inst->instance, &npd, NULL);
  if (r != VK_SUCCESS || npd == 0) {
    st = vk_error(BP_UNAVAILABLE, "vulkan: no physical device (vkEnumeratePhysicalDevices: %s, %u devices)",
                  vk_result_name(r), npd);
    goto cleanup;
  }
  pds = calloc(npd, sizeof *pds);
  inst->devices = calloc(npd, sizeof *inst->devices);
  if (!pds || !inst->devices) {
    st = vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
    goto cleanup;
  }
  inst->vk.vkEnumeratePhysicalDevices(inst->instance, &npd, pds);
  char reasons[VK_MSG_CAP] = "";
  for (uint32_t i = 0; i < npd; i++) {
    struct bpp_device_s* d = &inst->devices[inst->device_count];
    VkPhysicalDeviceProperties props;
    const char* why = probe_device(inst, pds[i], &d->feat, &props, &d->queue_family, &d->queue_count);
    if (why) {
      vk_log(BP_LOG_INFO, "vulkan: device %u (%s) skipped: %s", i, props.deviceName, why);
      size_t l = strlen(reasons);
      if (l + 2 < sizeof reasons) /* names are cut to 64 bytes: several devices fit */
        snprintf(reasons + l, sizeof reasons - l, "%s%.64s: %.120s", l ? "; " : "", props.deviceName,
                 why);
      continue;
    }
    d->inst = inst;
    d->index = inst->device_count;
    d->phys = pds[i];
    inst->vk.vkGetPhysicalDeviceMemoryProperties(pds[i], &d->mem_props);
    int dt = find_type(&d->mem_props, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
    int ht = find_type(&d->mem_props, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                          VK_MEMORY_PROPERTY_HOST_CACHED_BIT, 0);
    if (ht < 0) ht = find_type(&d->mem_props, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT, 0);
    if (dt < 0) dt = ht;
    if (dt < 0 || ht < 0) {
      vk_log(BP_LOG_INFO, "vulkan: device %u (%s) skipped: no host-visible coherent memory type", i,
             props.deviceName);
      continue;
    }
    d->device_type_index = (uint32_t)dt;
    d->host_type_index = (uint32_t)ht;
    fill_properties(d, &props);
    inst->device_count++;
  }
  if (inst->device_count == 0) {
    st = vk_error(BP_UNAVAILABLE, "vulkan: no usable Vulkan device (%u found: %s)", npd, reasons);
    goto cleanup;
  }
  *out = inst;
  inst = NULL;
cleanup:
  free(pds);
  if (inst) vk_instance_destroy(inst);
  return st;
}

static void device_teardown(struct bpp_device_s* d) {
  if (!d->opened) return;
  d->vk.vkDeviceWaitIdle(d->dev);
  vk_pipelines_fini(d);
  vk_pool_fini(&d->pool_device);
  vk_pool_fini(&d->pool_host);
  vk_pool_fini(&d->pool_export);
  for (uint32_t q = 0; q < d->queue_count; q++) pthread_mutex_destroy(&d->queue_locks[q]);
  free(d->queues);
  free(d->queue_locks);
  d->vk.vkDestroyDevice(d->dev, NULL);
  d->opened = 0;
}

void vk_instance_destroy(struct bpp_instance_s* inst) {
  if (!inst) return;
  for (uint32_t i = 0; i < inst->device_count; i++) device_teardown(&inst->devices[i]);
  free(inst->devices);
  if (inst->messenger && inst->vk.vkDestroyDebugUtilsMessengerEXT)
    inst->vk.vkDestroyDebugUtilsMessengerEXT(inst->instance, inst->messenger, NULL);
  if (inst->instance && inst->vk.vkDestroyInstance) inst->vk.vkDestroyInstance(inst->instance, NULL);
  pthread_mutex_destroy(&inst->lock);
  bp_kit_library_close(inst->lib);
  free(inst);
}

/* Creates the VkDevice with the features the shaders need (lock held). */
static bp_status_t device_create(struct bpp_device_s* d) {
  struct bpp_instance_s* inst = d->inst;
  char msg[VK_MSG_CAP];
  float prio[4] = {1, 1, 1, 1};
  VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                .queueFamilyIndex = d->queue_family,
                                .queueCount = d->queue_count,
                                .pQueuePriorities = prio};
  VkPhysicalDeviceVulkan12Features f12 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
                                          .storageBuffer8BitAccess = VK_TRUE,
                                          .shaderInt8 = VK_TRUE,
                                          .shaderFloat16 = d->feat.f16 ? VK_TRUE : VK_FALSE,
                                          .bufferDeviceAddress = VK_TRUE,
                                          .timelineSemaphore = VK_TRUE};
  VkPhysicalDeviceVulkan11Features f11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                          .pNext = &f12,
                                          .storageBuffer16BitAccess = VK_TRUE};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &f11};
  f2.features.shaderFloat64 = VK_TRUE;
  f2.features.shaderInt64 = VK_TRUE;
  f2.features.shaderInt16 = VK_TRUE;
  const char* exts[4];
  uint32_t nexts = 0;
  if (d->feat.memory_budget_ext) exts[nexts++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;
  if (d->feat.push_descriptor_ext) exts[nexts++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
  if (d->feat.memory_fd_ext) exts[nexts++] = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
  if (d->feat.semaphore_fd_ext) exts[nexts++] = VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME;
  VkDeviceCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                           .pNext = &f2,
                           .queueCreateInfoCount = 1,
                           .pQueueCreateInfos = &qi,
                           .enabledExtensionCount = nexts,
                           .ppEnabledExtensionNames = exts};
  VkResult r = inst->vk.vkCreateDevice(d->phys, &ci, NULL, &d->dev);
  if (r != VK_SUCCESS)
    return vk_error(vk_status_of(r) == BP_INTERNAL ? BP_UNAVAILABLE : vk_status_of(r),
                    "vulkan: vkCreateDevice(%s) failed: %s", d->props.name, vk_result_name(r));
  d->vk = inst->vk;
  bp_status_t st = vk_dispatch_load_device(&d->vk, d->dev, msg, sizeof msg);
  if (st == BP_OK) {
    d->queues = calloc(d->queue_count, sizeof *d->queues);
    d->queue_locks = calloc(d->queue_count, sizeof *d->queue_locks);
    if (!d->queues || !d->queue_locks) {
      st = BP_RESOURCE_EXHAUSTED;
      snprintf(msg, sizeof msg, "out of host memory");
    }
  }
  if (st != BP_OK) {
    free(d->queues);
    free(d->queue_locks);
    PFN_vkDestroyDevice destroy = (PFN_vkDestroyDevice)inst->vk.vkGetDeviceProcAddr(d->dev, "vkDestroyDevice");
    if (destroy) destroy(d->dev, NULL);
    return vk_error(st, "vulkan: %s", msg);
  }
  for (uint32_t q = 0; q < d->queue_count; q++) {
    d->vk.vkGetDeviceQueue(d->dev, d->queue_family, q, &d->queues[q]);
    pthread_mutex_init(&d->queue_locks[q], NULL);
  }
  pool_setup(&d->pool_device, d, d->device_type_index);
  pool_setup(&d->pool_host, d, d->host_type_index);
  pool_setup(&d->pool_export, d, d->device_type_index);
  d->pool_export.exportable = 1;
  if (inst->opt.force_staging) d->pool_device.host_visible = d->pool_export.host_visible = 0;
  if ((st = vk_pipelines_init(d)) != BP_OK) {
    vk_pool_fini(&d->pool_device);
    vk_pool_fini(&d->pool_host);
    vk_pool_fini(&d->pool_export);
    for (uint32_t q = 0; q < d->queue_count; q++) pthread_mutex_destroy(&d->queue_locks[q]);
    free(d->queues);
    free(d->queue_locks);
    d->vk.vkDestroyDevice(d->dev, NULL);
    return st;
  }
  d->opened = 1;
  return BP_OK;
}

bp_status_t vk_device_open(struct bpp_instance_s* inst, uint32_t index, struct bpp_device_s** out) {
  if (!inst || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: device_open: NULL argument");
  if (index >= inst->device_count)
    return vk_error(BP_NOT_FOUND, "vulkan: device_open: index %u, only %u devices", index,
                    inst->device_count);
  struct bpp_device_s* d = &inst->devices[index];
  bp_status_t st = BP_OK;
  pthread_mutex_lock(&inst->lock);
  if (!d->opened) st = device_create(d);
  pthread_mutex_unlock(&inst->lock);
  if (st == BP_OK) *out = d;
  return st;
}

/* ---- core table --------------------------------------------------------- */
static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  if (!out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: instance_create: NULL out_instance");
  *out = NULL;
  const char* options = info && info->struct_size >= sizeof *info ? info->options : NULL;
  static const char* const names[] = {"libvulkan.so.1", "libvulkan.so"};
  static const bp_kit_symbol_t loader_syms[] = {
      {"vkGetInstanceProcAddr", offsetof(vk_dispatch_t, vkGetInstanceProcAddr), 1}};
  void* lib = NULL;
  vk_dispatch_t loader;
  char msg[512];
  bp_status_t st = bp_kit_library_open(names, BP_KIT_COUNT(names), &lib, msg, sizeof msg);
  if (st == BP_OK)
    st = bp_kit_symbols_load(&loader, loader_syms, 1, bp_kit_dlsym, lib, "libvulkan.so.1", msg,
                             sizeof msg);
  if (st != BP_OK) {
    bp_kit_library_close(lib);
    return vk_error(st, "vulkan: %s", msg);
  }
  struct bpp_instance_s* inst = NULL;
  st = vk_instance_create_with(loader.vkGetInstanceProcAddr, options, &inst);
  if (st != BP_OK) {
    bp_kit_library_close(lib);
    return st;
  }
  inst->lib = lib;
  *out = inst;
  return BP_OK;
}

static bp_status_t device_count(bpp_instance_t inst, uint32_t* out) {
  if (!inst || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: device_count: NULL argument");
  *out = inst->device_count;
  return BP_OK;
}

static void device_close(bpp_device_t d) { (void)d; /* owned by the instance */ }

static bp_status_t device_get_properties(bpp_device_t d, bp_device_properties_t* props) {
  if (!d || !props) return vk_error(BP_INVALID_ARGUMENT, "vulkan: device_get_properties: NULL argument");
  if (props->struct_size < sizeof(uint32_t))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: device_get_properties: struct_size %u too small",
                    props->struct_size);
  bp_kit_copy_out(props, &d->props, sizeof d->props);
  return BP_OK;
}

/* Memory spaces by index: 0 device-local, 1 host-pinned, 2 device-local
 * and exportable (only with VK_KHR_external_memory_fd). */
static const uint32_t k_space_kinds[3] = {BP_MEMORY_DEVICE, BP_MEMORY_HOST_PINNED, BP_MEMORY_DEVICE};
static uint32_t space_count(bpp_device_t d) { return d->feat.memory_fd_ext ? 3u : 2u; }
static vk_pool_t* pool_of(bpp_device_t d, uint32_t space) {
  return space == 0 ? &d->pool_device : space == 1 ? &d->pool_host : &d->pool_export;
}

/* The budget under the pool's lock (it reads the pool's reserved bytes). */
static uint64_t budget_locked(vk_pool_t* p) {
  pthread_mutex_lock(&p->lock);
  uint64_t b = vk_pool_budget(p);
  pthread_mutex_unlock(&p->lock);
  return b;
}

static uint32_t space_flags(const vk_pool_t* p) {
  uint32_t f = 0;
  if (p->host_visible) f |= BP_MEMORY_FLAG_HOST_VISIBLE;
  if (p->host_visible && p->host_coherent) f |= BP_MEMORY_FLAG_HOST_COHERENT;
  if (p->device_local) f |= BP_MEMORY_FLAG_DEVICE_LOCAL;
  if (p->exportable) f |= BP_MEMORY_FLAG_EXPORTABLE;
  return f;
}


static bp_status_t device_memory_spaces(bpp_device_t d, uint32_t capacity, uint32_t element_size,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  if (!d || !out_count || (capacity && !out))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: device_memory_spaces: NULL argument");
  if (capacity && element_size < BP_MEMORY_SPACE_INFO_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: device_memory_spaces: element_size %u too small", element_size);
  *out_count = space_count(d);
  for (uint32_t i = 0; i < *out_count && i < capacity; i++) {
    vk_pool_t* p = pool_of(d, i);
    bp_memory_space_info_t info = {
        .struct_size = sizeof info,
        .kind = k_space_kinds[i],
        .flags = space_flags(p),
        .capacity_bytes = budget_locked(p),
        .alignment_bytes = 256,
    };
    bp_kit_put_entry(out, element_size, i, &info, sizeof info);
  }
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t d, uint32_t space, uint64_t* used, uint64_t* budget) {
  if (!d || !used || !budget) return vk_error(BP_INVALID_ARGUMENT, "vulkan: device_memory_usage: NULL argument");
  if (space >= space_count(d))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: device_memory_usage: no memory space %u (0 device, 1 host_pinned%s)",
                    space, space_count(d) > 2 ? ", 2 exportable" : "");
  vk_pool_t* p = pool_of(d, space);
  pthread_mutex_lock(&p->lock);
  *used = p->used_bytes;
  *budget = vk_pool_budget(p);
  pthread_mutex_unlock(&p->lock);
  return BP_OK;
}

static bp_status_t buffer_allocate(bpp_device_t d, const bp_buffer_alloc_info_t* info, bpp_buffer_t* out) {
  if (!d || !info || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_allocate: NULL argument");
  *out = NULL;
  if (info->struct_size < offsetof(bp_buffer_alloc_info_t, next))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_allocate: info struct_size %u too small", info->struct_size);
  if (info->memory_space >= space_count(d))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_allocate: no memory space %u (0 device, 1 host_pinned%s)",
                    info->memory_space, space_count(d) > 2 ? ", 2 exportable" : "");
  const uint32_t kind = k_space_kinds[info->memory_space];
  if (info->size_bytes == 0) return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_allocate: size 0");
  if (info->alignment & (info->alignment - 1))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_allocate: alignment %llu is not a power of two",
                    (unsigned long long)info->alignment);
  if (info->alignment > 256)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_allocate: alignment %llu > 256 is not offered",
                    (unsigned long long)info->alignment);
  vk_pool_t* p = pool_of(d, info->memory_space);
  uint64_t budget = budget_locked(p);
  if (info->size_bytes > budget || info->size_bytes > (1ull << 62))
    return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: buffer_allocate: %llu bytes requested, the budget is %llu",
                    (unsigned long long)info->size_bytes, (unsigned long long)budget);
  return vk_buffer_create(d, p, info->size_bytes, kind, out);
}

static void buffer_release(bpp_buffer_t b) { vk_buffer_destroy(b); }

static bp_status_t buffer_map(bpp_buffer_t b, uint64_t off, uint64_t size, void** out) {
  if (!b || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_map: NULL argument");
  bp_status_t st = vk_check_range("buffer_map", b, off, size);
  if (st != BP_OK) return st;
  if (!b->map || !b->pool->host_visible)
    return vk_error(BP_FAILED_PRECONDITION, "vulkan: buffer_map: the buffer's memory is not host visible");
  *out = b->map + off;
  return BP_OK;
}

static bp_status_t buffer_unmap(bpp_buffer_t b) {
  if (!b) return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_unmap: NULL buffer");
  return BP_OK; /* persistently mapped, coherent */
}

/* ---- stream entries, serialized per stream ------------------------------ */
/* VK_SERIALIZED(name, fn, stream, (params), (args)): `name` calls fn(args)
 * holding the stream's enq_mu (see struct bpp_stream_s); a NULL stream goes
 * straight to fn, which reports it. */
#define VK_SERIALIZED(name, fn, stream, params, args) \
  static bp_status_t name params {                   \
    bpp_stream_t s_ = (stream);                      \
    if (!s_) return fn args;                         \
    pthread_mutex_lock(&s_->enq_mu);                 \
    bp_status_t st_ = fn args;                       \
    pthread_mutex_unlock(&s_->enq_mu);               \
    return st_;                                      \
  }
VK_SERIALIZED(ser_copy_h2d, vk_copy_h2d, s,
              (bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t off, uint64_t n),
              (s, src, dst, off, n))
VK_SERIALIZED(ser_copy_d2h, vk_copy_d2h, s,
              (bpp_stream_t s, bpp_buffer_t src, uint64_t off, void* dst, uint64_t n),
              (s, src, off, dst, n))
VK_SERIALIZED(ser_copy_d2d, vk_copy_d2d, s,
              (bpp_stream_t s, bpp_buffer_t src, uint64_t so, bpp_buffer_t dst, uint64_t dof,
               uint64_t n),
              (s, src, so, dst, dof, n))
VK_SERIALIZED(ser_buffer_fill, vk_buffer_fill, s,
              (bpp_stream_t s, bpp_buffer_t b, uint64_t off, uint64_t n, const void* pattern,
               uint32_t psize),
              (s, b, off, n, pattern, psize))
VK_SERIALIZED(ser_stream_synchronize, vk_stream_synchronize, s, (bpp_stream_t s), (s))
VK_SERIALIZED(ser_stream_query, vk_stream_query, s, (bpp_stream_t s), (s))
VK_SERIALIZED(ser_host_func, vk_stream_host_func, s,
              (bpp_stream_t s, bp_host_func_t fn, void* user), (s, fn, user))
VK_SERIALIZED(ser_event_record, vk_event_record, s, (bpp_event_t e, bpp_stream_t s), (e, s))
VK_SERIALIZED(ser_wait_event, vk_stream_wait_event, s, (bpp_stream_t s, bpp_event_t e), (s, e))
VK_SERIALIZED(ser_launch_op, vk_launch_op, s, (bpp_stream_t s, const bp_op_call_t* call), (s, call))
VK_SERIALIZED(ser_launch_ew_program, vk_launch_ew_program, s,
              (bpp_stream_t s, const bp_ew_program_t* program, uint32_t nin,
               const bp_tensor_desc_t* const* in, uint32_t nout, const bp_tensor_desc_t* const* out),
              (s, program, nin, in, nout, out))
#undef VK_SERIALIZED

/* ---- tables and negotiation -------------------------------------------- */
static void instance_destroy(bpp_instance_t inst) { vk_instance_destroy(inst); }

static const bpp_core_table_t k_core = {
    .struct_size = sizeof(bpp_core_table_t),
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .device_count = device_count,
    .device_open = vk_device_open,
    .device_close = device_close,
    .device_get_properties = device_get_properties,
    .device_memory_spaces = device_memory_spaces,
    .device_memory_usage = device_memory_usage,
    .buffer_allocate = buffer_allocate,
    .buffer_release = buffer_release,
    .buffer_map = buffer_map,
    .buffer_unmap = buffer_unmap,
    .copy_host_to_device = ser_copy_h2d,
    .copy_device_to_host = ser_copy_d2h,
    .copy_device_to_device = ser_copy_d2d,
    .copy_peer = NULL,
    .buffer_fill = ser_buffer_fill,
    .stream_create = vk_stream_create,
    .stream_destroy = vk_stream_destroy,
    .stream_synchronize = ser_stream_synchronize,
    .stream_query = ser_stream_query,
    .stream_enqueue_host_func = ser_host_func,
    .event_create = vk_event_create,
    .event_destroy = vk_event_destroy,
    .event_record = ser_event_record,
    .stream_wait_event = ser_wait_event,
    .event_query = vk_event_query,
    .event_synchronize = vk_event_synchronize,
    .event_elapsed_ns = vk_event_elapsed_ns,
    .buffer_import = vk_buffer_import,
    .buffer_export = vk_buffer_export,
    .event_import = vk_event_import,
    .event_export = vk_event_export,
};

static bpp_op_launch_fn k_launch[BP_OP_COUNT];
static pthread_once_t k_launch_once = PTHREAD_ONCE_INIT;
static void init_launch(void) {
  for (uint32_t op = 1; op < BP_OP_COUNT; op++)
    if (vk_op_implemented(op)) k_launch[op] = ser_launch_op;
}

static const bpp_op_table_t k_ops = {
    .struct_size = sizeof(bpp_op_table_t), .launch_count = BP_OP_COUNT, .launch = k_launch};

static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof(bpp_caps_table_t),
    .query_support = vk_query_support,
    .estimate_cost = NULL,
    .query_fusion = vk_query_fusion,
    .launch_ew_program = ser_launch_ew_program,
};

static const bp_plugin_vtable_t k_vtable = {
    .struct_size = sizeof(bp_plugin_vtable_t), .core = &k_core, .ops = &k_ops, .caps = &k_caps,
    .exec = &vk_exec_table};

const bp_plugin_vtable_t* vk_plugin_vtable(void) {
  pthread_once(&k_launch_once, init_launch);
  return &k_vtable;
}
