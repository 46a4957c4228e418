/* bp-bench suite "vk_raw": a Vulkan device through backplane against raw
 * Vulkan on the same physical device, measured in the same run.
 *
 * The suite opens libvulkan.so.1 itself (dlopen; the headers give the types
 * only), creates its own instance and logical device on the physical device
 * whose name (and pipeline-cache UUID, when the plugin reports one) matches
 * the backplane device's properties, and runs hand-written compute shaders
 * (the GLSL sources in shaders/, compiled to SPIR-V at build time and
 * embedded). Each repetition times the backplane figure and its raw
 * baseline back to back; every figure is the median of ctx->reps
 * repetitions (--quick: 1M elements and 256^3):
 *
 *  1. f32 add over 16M elements: bp_op_add on ctx->stream against one
 *     dispatch of add_vec4.comp (GB/s, 12 bytes per element).
 *  2. the device's FMA ceiling: fma_peak.comp (independent FMA chains in
 *     registers, the flop count of a 1024^3 GEMM, more on a device that runs
 *     that in under 5 ms) against bp_op_mm 1024^3 on the CPU plugin
 *     (GFLOP/s). Documents what the device can do at all.
 *  3. sgemm 1024^3 through backplane against that ceiling (GFLOP/s; the
 *     ratio is the fraction of the device's arithmetic peak).
 *  4. submission overhead per tiny op: 200 one-element bp_op_add calls and
 *     one synchronize against 200 x (vkQueueSubmit of a one-invocation
 *     dispatch + vkWaitForFences), microseconds per op (lower is better).
 *
 * A raw figure that cannot be measured (no driver, no matching device, a
 * Vulkan call failing) is skipped with a printed reason naming the call; the
 * tool goes on. BP_VULKAN_VALIDATION=1 enables the Khronos validation layer
 * on the suite's own instance too (as for the plugin) and counts its
 * messages.
 *
 * Threading: single-threaded, like the rest of bp-bench.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#ifndef BP_BENCH_HAVE_VULKAN

void bpb_suite_vk_raw(bpb_ctx_t* ctx) {
  (void)ctx;
  printf("suite vk_raw: not built (bp-bench was built without the Vulkan headers or "
         "glslangValidator)\n");
}

#else /* BP_BENCH_HAVE_VULKAN */

#define VK_NO_PROTOTYPES
#include <dlfcn.h>
#include <vulkan/vulkan.h>

#include "bpb_spv_add_one.h"
#include "bpb_spv_add_vec4.h"
#include "bpb_spv_fma_peak.h"

/* fma_peak.comp's shape (its FMA_ACCS and FMA_DEPTH defines; the build
 * passes the same values to both): VR_FMA_ACCS vec4 accumulators, each
 * advanced by VR_FMA_DEPTH dependent fma() per loop iteration, so flops per
 * invocation per iteration are VR_FMA_ACCS x VR_FMA_DEPTH x 4 lanes x 2. */
#define VR_FMA_ACCS BP_BENCH_FMA_ACCS
#define VR_FMA_DEPTH BP_BENCH_FMA_DEPTH
/* Workgroup size of add_vec4.comp and fma_peak.comp (local_size_x). */
#define VR_GROUP 64
/* Descriptor sets per kernel at most (add_vec4 uses one per texel-buffer
 * chunk: 64 covers 16M floats at the spec's minimum maxTexelBufferElements
 * of 65536). */
#define VR_MAX_SETS 64
/* Bindings per kernel at most. */
#define VR_MAX_BINDINGS 3
/* The FMA ceiling's dispatch lasts at least this long (seconds), and its
 * loop runs at most this many iterations (see figure_fma). */
#define VR_FMA_MIN_S 0.005
#define VR_FMA_MAX_ITERS 16777216.0
/* A fence wait longer than this is reported as a hang (nanoseconds). */
#define VR_FENCE_TIMEOUT_NS 60000000000ull

/* ---- entry points ------------------------------------------------------ */
/* Resolved with vkGetInstanceProcAddr(NULL, ...), (instance, ...) and
 * vkGetDeviceProcAddr(device, ...) respectively. */
#define VR_GLOBAL_FNS(X) X(vkCreateInstance) X(vkEnumerateInstanceLayerProperties)
#define VR_INSTANCE_FNS(X)                                                                \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices) X(vkGetPhysicalDeviceProperties)     \
  X(vkGetPhysicalDeviceQueueFamilyProperties) X(vkGetPhysicalDeviceMemoryProperties)      \
  X(vkGetPhysicalDeviceFormatProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
#define VR_DEVICE_FNS(X)                                                                  \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkCreateBuffer)            \
  X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements) X(vkAllocateMemory) X(vkFreeMemory) \
  X(vkBindBufferMemory) X(vkMapMemory) X(vkUnmapMemory) X(vkCreateBufferView)             \
  X(vkDestroyBufferView) X(vkCreateShaderModule) X(vkDestroyShaderModule)                 \
  X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout) X(vkCreatePipelineLayout) \
  X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)             \
  X(vkCreateDescriptorPool) X(vkDestroyDescriptorPool) X(vkAllocateDescriptorSets)        \
  X(vkUpdateDescriptorSets) X(vkCreateCommandPool) X(vkDestroyCommandPool)                \
  X(vkAllocateCommandBuffers) X(vkBeginCommandBuffer) X(vkEndCommandBuffer)               \
  X(vkCmdBindPipeline) X(vkCmdBindDescriptorSets) X(vkCmdPushConstants) X(vkCmdDispatch)  \
  X(vkCmdCopyBuffer) X(vkCmdPipelineBarrier) X(vkQueueSubmit) X(vkCreateFence)            \
  X(vkDestroyFence) X(vkWaitForFences) X(vkResetFences)

/* The suite's own Vulkan instance and device. Owned by bpb_suite_vk_raw;
 * vr_close releases whatever vr_open created, also after a partial open. */
typedef struct vr {
  void* lib; /* dlopen handle of libvulkan.so.1 */
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
  PFN_vkEnumerateInstanceVersion vkEnumerateInstanceVersion; /* NULL on 1.0 loaders */
  PFN_vkCreateDebugUtilsMessengerEXT vkCreateDebugUtilsMessengerEXT;   /* validation only */
  PFN_vkDestroyDebugUtilsMessengerEXT vkDestroyDebugUtilsMessengerEXT; /* validation only */
#define VR__MEMBER(f) PFN_##f f;
  VR_GLOBAL_FNS(VR__MEMBER) VR_INSTANCE_FNS(VR__MEMBER) VR_DEVICE_FNS(VR__MEMBER)
#undef VR__MEMBER
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice phys;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceMemoryProperties mem;
  VkDevice device;
  uint32_t queue_family;
  VkQueue queue;
  VkCommandPool pool;
  VkCommandBuffer work; /* the measured dispatches, re-recorded per figure */
  VkCommandBuffer xfer; /* staging copies (devices without host-visible VRAM) */
  VkFence fence;        /* unsignaled between submissions */
  unsigned validation_messages; /* warnings and errors from the validation layer */
} vr_t;

/* ---- errors ------------------------------------------------------------ */
static const char* vr_result_name(VkResult r) {
  switch (r) {
#define VR__R(x) \
  case x: return #x;
    VR__R(VK_SUCCESS) VR__R(VK_NOT_READY) VR__R(VK_TIMEOUT) VR__R(VK_INCOMPLETE)
    VR__R(VK_ERROR_OUT_OF_HOST_MEMORY) VR__R(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    VR__R(VK_ERROR_INITIALIZATION_FAILED) VR__R(VK_ERROR_DEVICE_LOST)
    VR__R(VK_ERROR_MEMORY_MAP_FAILED) VR__R(VK_ERROR_LAYER_NOT_PRESENT)
    VR__R(VK_ERROR_EXTENSION_NOT_PRESENT) VR__R(VK_ERROR_FEATURE_NOT_PRESENT)
    VR__R(VK_ERROR_INCOMPATIBLE_DRIVER) VR__R(VK_ERROR_TOO_MANY_OBJECTS)
    VR__R(VK_ERROR_FORMAT_NOT_SUPPORTED) VR__R(VK_ERROR_FRAGMENTED_POOL)
    VR__R(VK_ERROR_OUT_OF_POOL_MEMORY) VR__R(VK_ERROR_INVALID_SHADER_NV)
#undef VR__R
    default: return "VkResult";
  }
}

/* Prints which call failed (`call` is its source text: the entry point's
 * name is printed) and maps its VkResult to a status. */
static bp_status_t vr_fail(const char* call, VkResult r) {
  const char* name = strstr(call, "->");
  name = name ? name + 2 : call;
  printf("suite vk_raw: %.*s failed: %s (%d)\n", (int)strcspn(name, "("), name, vr_result_name(r),
         (int)r);
  switch (r) {
    case VK_ERROR_OUT_OF_HOST_MEMORY:
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
    case VK_ERROR_OUT_OF_POOL_MEMORY:
    case VK_ERROR_TOO_MANY_OBJECTS: return BP_RESOURCE_EXHAUSTED;
    case VK_ERROR_DEVICE_LOST: return BP_DEVICE_LOST;
    case VK_TIMEOUT: return BP_DEADLINE_EXCEEDED;
    case VK_ERROR_INITIALIZATION_FAILED:
    case VK_ERROR_INCOMPATIBLE_DRIVER:
    case VK_ERROR_LAYER_NOT_PRESENT:
    case VK_ERROR_EXTENSION_NOT_PRESENT:
    case VK_ERROR_FEATURE_NOT_PRESENT: return BP_UNAVAILABLE;
    default: return BP_INTERNAL;
  }
}

/* Runs a Vulkan call; on anything but VK_SUCCESS prints the call and jumps
 * to the enclosing function's cleanup label with `st` set. */
#define VR_TRY(call)              \
  do {                            \
    VkResult vr__r = (call);      \
    if (vr__r != VK_SUCCESS) {    \
      st = vr_fail(#call, vr__r); \
      goto cleanup;               \
    }                             \
  } while (0)

/* Prints why the raw side cannot go on (not a Vulkan call) and jumps to
 * cleanup with `code`. */
#define VR_REFUSE(code, ...)              \
  do {                                    \
    printf("suite vk_raw: " __VA_ARGS__); \
    printf("\n");                         \
    st = (code);                          \
    goto cleanup;                         \
  } while (0)

/* ---- instance and device ----------------------------------------------- */
static VKAPI_ATTR VkBool32 VKAPI_CALL vr_debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                  VkDebugUtilsMessageTypeFlagsEXT types,
                                                  const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                  void* user) {
  (void)severity, (void)types;
  vr_t* vr = user;
  vr->validation_messages++;
  printf("suite vk_raw: validation: %s\n",
         data && data->pMessage ? data->pMessage : "(no message)");
  return VK_FALSE;
}

/* Nonzero when BP_VULKAN_VALIDATION asks for the validation layer. */
static int vr_validation_requested(void) {
  const char* e = getenv("BP_VULKAN_VALIDATION");
  return e && *e && strcmp(e, "0") != 0;
}

/* Nonzero when the physical device is the one backplane measures: same name
 * (a name of 64 characters or more may have been cut short in the
 * properties: the part kept must match) and, when the plugin reported one,
 * same pipeline-cache UUID (the Vulkan plugin's bp_device_properties_t.uuid),
 * so that two identical boards are told apart. */
static int vr_same_device(const VkPhysicalDeviceProperties* p, const bp_device_properties_t* want) {
  static const uint8_t zero[16];
  size_t n = strnlen(want->name, sizeof want->name);
  if (n == 0 || strncmp(p->deviceName, want->name, n) != 0) return 0;
  if (p->deviceName[n] != '\0' && n < 64) return 0;
  return memcmp(want->uuid, zero, 16) == 0 || memcmp(want->uuid, p->pipelineCacheUUID, 16) == 0;
}

/* Entry points are checked for NULL: a partial open may have failed while
 * resolving them (fence and pool exist only once every one resolved). */
static void vr_close(vr_t* vr) {
  if (vr->device && vr->vkDestroyDevice) {
    if (vr->vkDeviceWaitIdle) vr->vkDeviceWaitIdle(vr->device);
    if (vr->fence) vr->vkDestroyFence(vr->device, vr->fence, NULL);
    if (vr->pool) vr->vkDestroyCommandPool(vr->device, vr->pool, NULL); /* frees work, xfer */
    vr->vkDestroyDevice(vr->device, NULL);
  }
  if (vr->messenger) vr->vkDestroyDebugUtilsMessengerEXT(vr->instance, vr->messenger, NULL);
  if (vr->instance && vr->vkDestroyInstance) vr->vkDestroyInstance(vr->instance, NULL);
  if (vr->lib) dlclose(vr->lib);
  memset(vr, 0, sizeof *vr);
}

/* Opens libvulkan.so.1, creates an instance and a device with one compute
 * queue on the physical device matching `want`, a command pool with two
 * command buffers and a fence. On failure prints why, releases what was
 * created and returns the status. */
static bp_status_t vr_open(vr_t* vr, const bp_device_properties_t* want) {
  bp_status_t st = BP_OK;
  VkPhysicalDevice* pds = NULL;
  VkQueueFamilyProperties* qf = NULL;
  memset(vr, 0, sizeof *vr);
  vr->lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!vr->lib) VR_REFUSE(BP_UNAVAILABLE, "cannot open libvulkan.so.1: %s", dlerror());
  vr->vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(vr->lib, "vkGetInstanceProcAddr");
  if (!vr->vkGetInstanceProcAddr)
    VR_REFUSE(BP_UNAVAILABLE, "libvulkan.so.1 lacks vkGetInstanceProcAddr");
#define VR__LOAD_GLOBAL(f)                                                  \
  if (!(vr->f = (PFN_##f)vr->vkGetInstanceProcAddr(VK_NULL_HANDLE, #f))) \
    VR_REFUSE(BP_UNAVAILABLE, "the Vulkan loader lacks %s", #f);
  VR_GLOBAL_FNS(VR__LOAD_GLOBAL)
#undef VR__LOAD_GLOBAL
  vr->vkEnumerateInstanceVersion = (PFN_vkEnumerateInstanceVersion)vr->vkGetInstanceProcAddr(
      VK_NULL_HANDLE, "vkEnumerateInstanceVersion");
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (vr->vkEnumerateInstanceVersion) VR_TRY(vr->vkEnumerateInstanceVersion(&loader_version));
  if (loader_version < VK_API_VERSION_1_2)
    VR_REFUSE(BP_UNAVAILABLE, "the Vulkan loader speaks %u.%u; the shaders need 1.2",
              VK_API_VERSION_MAJOR(loader_version), VK_API_VERSION_MINOR(loader_version));

  /* Optional validation layer, with a messenger that counts its messages. */
  const char* layers[1] = {"VK_LAYER_KHRONOS_validation"};
  const char* exts[1] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  uint32_t nlayers = 0;
  if (vr_validation_requested()) {
    uint32_t n = 0;
    VR_TRY(vr->vkEnumerateInstanceLayerProperties(&n, NULL));
    VkLayerProperties* lp = calloc(n ? n : 1, sizeof *lp);
    if (!lp) VR_REFUSE(BP_RESOURCE_EXHAUSTED, "out of host memory");
    VkResult r = vr->vkEnumerateInstanceLayerProperties(&n, lp);
    for (uint32_t i = 0; r == VK_SUCCESS && i < n; i++)
      if (strcmp(lp[i].layerName, layers[0]) == 0) nlayers = 1;
    free(lp);
    if (r != VK_SUCCESS && r != VK_INCOMPLETE) VR_TRY(r);
    if (!nlayers)
      VR_REFUSE(BP_UNAVAILABLE, "BP_VULKAN_VALIDATION is set but %s is not installed", layers[0]);
  }
  VkDebugUtilsMessengerCreateInfoEXT dbg = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
      .pfnUserCallback = vr_debug_cb,
      .pUserData = vr};
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "bp-bench vk_raw",
                           .apiVersion = VK_API_VERSION_1_2};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pNext = nlayers ? &dbg : NULL,
                              .pApplicationInfo = &app,
                              .enabledLayerCount = nlayers,
                              .ppEnabledLayerNames = layers,
                              .enabledExtensionCount = nlayers,
                              .ppEnabledExtensionNames = exts};
  VR_TRY(vr->vkCreateInstance(&ici, NULL, &vr->instance));
#define VR__LOAD_INSTANCE(f)                                               \
  if (!(vr->f = (PFN_##f)vr->vkGetInstanceProcAddr(vr->instance, #f))) \
    VR_REFUSE(BP_UNAVAILABLE, "the Vulkan instance lacks %s", #f);
  VR_INSTANCE_FNS(VR__LOAD_INSTANCE)
#undef VR__LOAD_INSTANCE
  if (nlayers) {
    vr->vkCreateDebugUtilsMessengerEXT =
        (PFN_vkCreateDebugUtilsMessengerEXT)vr->vkGetInstanceProcAddr(
            vr->instance, "vkCreateDebugUtilsMessengerEXT");
    vr->vkDestroyDebugUtilsMessengerEXT =
        (PFN_vkDestroyDebugUtilsMessengerEXT)vr->vkGetInstanceProcAddr(
            vr->instance, "vkDestroyDebugUtilsMessengerEXT");
    if (vr->vkCreateDebugUtilsMessengerEXT && vr->vkDestroyDebugUtilsMessengerEXT)
      VR_TRY(vr->vkCreateDebugUtilsMessengerEXT(vr->instance, &dbg, NULL, &vr->messenger));
  }

  /* The physical device backplane measures. */
  uint32_t npd = 0;
  VR_TRY(vr->vkEnumeratePhysicalDevices(vr->instance, &npd, NULL));
  pds = calloc(npd ? npd : 1, sizeof *pds);
  if (!pds) VR_REFUSE(BP_RESOURCE_EXHAUSTED, "out of host memory");
  VkResult r = vr->vkEnumeratePhysicalDevices(vr->instance, &npd, pds);
  if (r != VK_SUCCESS && r != VK_INCOMPLETE) VR_TRY(r);
  for (uint32_t i = 0; i < npd && !vr->phys; i++) {
    VkPhysicalDeviceProperties p;
    vr->vkGetPhysicalDeviceProperties(pds[i], &p);
    if (vr_same_device(&p, want)) vr->phys = pds[i], vr->props = p;
  }
  if (!vr->phys)
    VR_REFUSE(BP_UNAVAILABLE, "no Vulkan physical device is named '%s' (%u enumerated)", want->name,
              npd);
  if (vr->props.apiVersion < VK_API_VERSION_1_2)
    VR_REFUSE(BP_UNAVAILABLE, "'%s' supports Vulkan %u.%u; the shaders need 1.2", want->name,
              VK_API_VERSION_MAJOR(vr->props.apiVersion),
              VK_API_VERSION_MINOR(vr->props.apiVersion));
  vr->vkGetPhysicalDeviceMemoryProperties(vr->phys, &vr->mem);

  /* A compute queue: the first family with VK_QUEUE_COMPUTE_BIT. */
  uint32_t nqf = 0;
  vr->vkGetPhysicalDeviceQueueFamilyProperties(vr->phys, &nqf, NULL);
  qf = calloc(nqf ? nqf : 1, sizeof *qf);
  if (!qf) VR_REFUSE(BP_RESOURCE_EXHAUSTED, "out of host memory");
  vr->vkGetPhysicalDeviceQueueFamilyProperties(vr->phys, &nqf, qf);
  vr->queue_family = UINT32_MAX;
  for (uint32_t i = 0; i < nqf && vr->queue_family == UINT32_MAX; i++)
    if ((qf[i].queueFlags & VK_QUEUE_COMPUTE_BIT) && qf[i].queueCount > 0) vr->queue_family = i;
  if (vr->queue_family == UINT32_MAX)
    VR_REFUSE(BP_UNAVAILABLE, "'%s' has no compute queue", want->name);

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = vr->queue_family,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  VR_TRY(vr->vkCreateDevice(vr->phys, &dci, NULL, &vr->device));
#define VR__LOAD_DEVICE(f)                                           \
  if (!(vr->f = (PFN_##f)vr->vkGetDeviceProcAddr(vr->device, #f))) \
    VR_REFUSE(BP_UNAVAILABLE, "the Vulkan device lacks %s", #f);
  VR_DEVICE_FNS(VR__LOAD_DEVICE)
#undef VR__LOAD_DEVICE
  vr->vkGetDeviceQueue(vr->device, vr->queue_family, 0, &vr->queue);

  VkCommandPoolCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                 .queueFamilyIndex = vr->queue_family};
  VR_TRY(vr->vkCreateCommandPool(vr->device, &pci, NULL, &vr->pool));
  VkCommandBuffer cmds[2];
  VkCommandBufferAllocateInfo cai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .commandPool = vr->pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 2};
  VR_TRY(vr->vkAllocateCommandBuffers(vr->device, &cai, cmds));
  vr->work = cmds[0];
  vr->xfer = cmds[1];
  VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  VR_TRY(vr->vkCreateFence(vr->device, &fci, NULL, &vr->fence));

cleanup:
  free(qf);
  free(pds);
  if (st != BP_OK) vr_close(vr);
  return st;
}

/* Submits one command buffer and blocks until it completes (fence wait,
 * then fence reset): equivalent to vkQueueSubmit + vkWaitForFences. */
static bp_status_t vr_submit_wait(vr_t* vr, VkCommandBuffer cmd) {
  bp_status_t st = BP_OK;
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1,
                     .pCommandBuffers = &cmd};
  VR_TRY(vr->vkQueueSubmit(vr->queue, 1, &si, vr->fence));
  VR_TRY(vr->vkWaitForFences(vr->device, 1, &vr->fence, VK_TRUE, VR_FENCE_TIMEOUT_NS));
  VR_TRY(vr->vkResetFences(vr->device, 1, &vr->fence));
cleanup:
  return st;
}

/* Times one vr_submit_wait of vr->work, in seconds. */
static bp_status_t vr_time_work(vr_t* vr, double* out_s) {
  double t0 = bpb_now();
  bp_status_t st = vr_submit_wait(vr, vr->work);
  *out_s = bpb_now() - t0;
  return st;
}

/* A pipeline barrier ending every recorded command buffer: the compute
 * shader writes are made available to later dispatches (the next
 * submission writes the same buffer), to transfers (staging readback) and
 * to host reads after the fence wait. */
static void vr_cmd_barrier_after_compute(vr_t* vr, VkCommandBuffer cmd) {
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                        .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                         VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT};
  vr->vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                           VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
                               VK_PIPELINE_STAGE_HOST_BIT,
                           0, 1, &mb, 0, NULL, 0, NULL);
}

/* ---- buffers ----------------------------------------------------------- */
/* A buffer with its own memory allocation. host_visible: mapped directly
 * for filling and reading back; otherwise through a staging buffer. */
typedef struct vr_buffer {
  VkBuffer buffer;
  VkDeviceMemory memory;
  VkDeviceSize size;
  int host_visible;
} vr_buffer_t;

static void vr_buffer_destroy(vr_t* vr, vr_buffer_t* b) {
  if (b->buffer) vr->vkDestroyBuffer(vr->device, b->buffer, NULL);
  if (b->memory) vr->vkFreeMemory(vr->device, b->memory, NULL);
  memset(b, 0, sizeof *b);
}

/* Creates a buffer of `size` bytes. staging: host-visible coherent memory
 * (a transfer source or destination). Otherwise device-local memory,
 * preferring a type that is also host-visible and coherent (CPU drivers,
 * integrated GPUs, resizable BAR) so that filling needs no copy; the
 * transfer usages are always added for the staging path. */
static bp_status_t vr_buffer_create(vr_t* vr, VkDeviceSize size, VkBufferUsageFlags usage,
                                    int staging, vr_buffer_t* out) {
  bp_status_t st = BP_OK;
  const VkMemoryPropertyFlags hv =
      VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  const VkMemoryPropertyFlags dl = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  const VkMemoryPropertyFlags staging_prefs[1] = {hv};
  const VkMemoryPropertyFlags device_prefs[2] = {dl | hv, dl};
  const VkMemoryPropertyFlags* prefs = staging ? staging_prefs : device_prefs;
  uint32_t nprefs = staging ? 1 : 2;
  memset(out, 0, sizeof *out);
  out->size = size;
  VkBufferCreateInfo bci = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                            .size = size,
                            .usage = usage | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                     VK_BUFFER_USAGE_TRANSFER_DST_BIT,
                            .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VR_TRY(vr->vkCreateBuffer(vr->device, &bci, NULL, &out->buffer));
  VkMemoryRequirements req;
  vr->vkGetBufferMemoryRequirements(vr->device, out->buffer, &req);
  VkResult last = VK_ERROR_OUT_OF_DEVICE_MEMORY;
  for (uint32_t p = 0; p < nprefs && !out->memory; p++) {
    for (uint32_t t = 0; t < vr->mem.memoryTypeCount && !out->memory; t++) {
      VkMemoryPropertyFlags f = vr->mem.memoryTypes[t].propertyFlags;
      if (!(req.memoryTypeBits & (1u << t)) || (f & prefs[p]) != prefs[p]) continue;
      VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                                  .allocationSize = req.size,
                                  .memoryTypeIndex = t};
      last = vr->vkAllocateMemory(vr->device, &mai, NULL, &out->memory);
      if (last != VK_SUCCESS) out->memory = VK_NULL_HANDLE; /* try the next type */
      else out->host_visible = (f & hv) == hv;
    }
  }
  if (!out->memory) VR_TRY(last);
  VR_TRY(vr->vkBindBufferMemory(vr->device, out->buffer, out->memory, 0));
cleanup:
  if (st != BP_OK) vr_buffer_destroy(vr, out);
  return st;
}

/* Copies `bytes` between host memory and the start of b: host -> buffer
 * when to_device, buffer -> host otherwise. Blocking. Mapped directly
 * when b is host-visible (coherent: no flush; reads follow a fence wait on
 * work that ended with vr_cmd_barrier_after_compute), else through a
 * staging buffer and one transfer submission. */
static bp_status_t vr_buffer_copy(vr_t* vr, vr_buffer_t* b, void* host, size_t bytes,
                                  int to_device) {
  bp_status_t st = BP_OK;
  vr_buffer_t stage = {0};
  vr_buffer_t* mapped = b;
  void* p = NULL;
  if (!b->host_visible) {
    if ((st = vr_buffer_create(vr, bytes, 0, 1, &stage)) != BP_OK) goto cleanup;
    mapped = &stage;
  }
  if (to_device || mapped == b) {
    VR_TRY(vr->vkMapMemory(vr->device, mapped->memory, 0, bytes, 0, &p));
    if (to_device) memcpy(p, host, bytes);
    else memcpy(host, p, bytes);
    vr->vkUnmapMemory(vr->device, mapped->memory);
  }
  if (mapped == b) goto cleanup;

  /* Staging: one copy, then a barrier that makes it visible to the compute
   * work after it (upload) or to host reads (readback). A readback follows
   * compute work whose closing barrier already covers transfer reads. */
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VR_TRY(vr->vkBeginCommandBuffer(vr->xfer, &bi));
  VkBufferCopy region = {.size = bytes};
  VkMemoryBarrier after = {
      .sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
      .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
      .dstAccessMask = to_device ? VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT
                                 : VK_ACCESS_HOST_READ_BIT};
  vr->vkCmdCopyBuffer(vr->xfer, to_device ? stage.buffer : b->buffer,
                      to_device ? b->buffer : stage.buffer, 1, &region);
  vr->vkCmdPipelineBarrier(
      vr->xfer, VK_PIPELINE_STAGE_TRANSFER_BIT,
      to_device ? VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT : VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after,
      0, NULL, 0, NULL);
  VR_TRY(vr->vkEndCommandBuffer(vr->xfer));
  if ((st = vr_submit_wait(vr, vr->xfer)) != BP_OK) goto cleanup;
  if (!to_device) {
    VR_TRY(vr->vkMapMemory(vr->device, stage.memory, 0, bytes, 0, &p));
    memcpy(host, p, bytes);
    vr->vkUnmapMemory(vr->device, stage.memory);
  }
cleanup:
  vr_buffer_destroy(vr, &stage);
  return st;
}

/* ---- kernels ----------------------------------------------------------- */
/* One compute pipeline with its descriptor set layout (bindings 0..n-1 of
 * the given types), push-constant range and `set_count` descriptor sets. */
typedef struct vr_kernel {
  VkShaderModule module;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  VkDescriptorPool pool;
  VkDescriptorSet sets[VR_MAX_SETS];
  uint32_t set_count;
} vr_kernel_t;

static void vr_kernel_destroy(vr_t* vr, vr_kernel_t* k) {
  if (k->pool) vr->vkDestroyDescriptorPool(vr->device, k->pool, NULL); /* frees the sets */
  if (k->pipeline) vr->vkDestroyPipeline(vr->device, k->pipeline, NULL);
  if (k->layout) vr->vkDestroyPipelineLayout(vr->device, k->layout, NULL);
  if (k->set_layout) vr->vkDestroyDescriptorSetLayout(vr->device, k->set_layout, NULL);
  if (k->module) vr->vkDestroyShaderModule(vr->device, k->module, NULL);
  memset(k, 0, sizeof *k);
}

static bp_status_t vr_kernel_create(vr_t* vr, const uint32_t* code, size_t code_bytes,
                                    const VkDescriptorType* types, uint32_t binding_count,
                                    uint32_t push_bytes, uint32_t set_count, vr_kernel_t* k) {
  bp_status_t st = BP_OK;
  memset(k, 0, sizeof *k);
  if (binding_count > VR_MAX_BINDINGS || set_count < 1 || set_count > VR_MAX_SETS)
    VR_REFUSE(BP_INVALID_ARGUMENT, "kernel with %u bindings and %u sets is out of range",
              binding_count, set_count);
  VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = code_bytes, .pCode = code};
  VR_TRY(vr->vkCreateShaderModule(vr->device, &smi, NULL, &k->module));

  VkDescriptorSetLayoutBinding b[VR_MAX_BINDINGS];
  VkDescriptorPoolSize sizes[VR_MAX_BINDINGS];
  uint32_t nsizes = 0;
  for (uint32_t i = 0; i < binding_count; i++) {
    b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
                                          .descriptorType = types[i],
                                          .descriptorCount = 1,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    uint32_t s = 0;
    while (s < nsizes && sizes[s].type != types[i]) s++;
    if (s == nsizes) sizes[nsizes++] = (VkDescriptorPoolSize){types[i], 0};
    sizes[s].descriptorCount += set_count;
  }
  VkDescriptorSetLayoutCreateInfo dli = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = binding_count,
      .pBindings = b};
  VR_TRY(vr->vkCreateDescriptorSetLayout(vr->device, &dli, NULL, &k->set_layout));
  VkPushConstantRange pcr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = push_bytes};
  VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .setLayoutCount = 1,
                                    .pSetLayouts = &k->set_layout,
                                    .pushConstantRangeCount = push_bytes ? 1 : 0,
                                    .pPushConstantRanges = push_bytes ? &pcr : NULL};
  VR_TRY(vr->vkCreatePipelineLayout(vr->device, &pli, NULL, &k->layout));
  VkComputePipelineCreateInfo cpi = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = k->module,
                .pName = "main"},
      .layout = k->layout};
  VR_TRY(vr->vkCreateComputePipelines(vr->device, VK_NULL_HANDLE, 1, &cpi, NULL, &k->pipeline));

  VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                    .maxSets = set_count,
                                    .poolSizeCount = nsizes,
                                    .pPoolSizes = sizes};
  VR_TRY(vr->vkCreateDescriptorPool(vr->device, &dpi, NULL, &k->pool));
  VkDescriptorSetLayout layouts[VR_MAX_SETS];
  for (uint32_t i = 0; i < set_count; i++) layouts[i] = k->set_layout;
  VkDescriptorSetAllocateInfo dai = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                     .descriptorPool = k->pool,
                                     .descriptorSetCount = set_count,
                                     .pSetLayouts = layouts};
  VR_TRY(vr->vkAllocateDescriptorSets(vr->device, &dai, k->sets));
  k->set_count = set_count;
cleanup:
  if (st != BP_OK) vr_kernel_destroy(vr, k);
  return st;
}

/* Points binding `binding` of set `set` at a storage buffer range or at a
 * uniform texel buffer view. */
static void vr_set_buffer(vr_t* vr, VkDescriptorSet set, uint32_t binding, VkBuffer buffer,
                          VkDeviceSize offset, VkDeviceSize range) {
  VkDescriptorBufferInfo bi = {buffer, offset, range};
  VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                            .dstSet = set,
                            .dstBinding = binding,
                            .descriptorCount = 1,
                            .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                            .pBufferInfo = &bi};
  vr->vkUpdateDescriptorSets(vr->device, 1, &w, 0, NULL);
}

static void vr_set_view(vr_t* vr, VkDescriptorSet set, uint32_t binding, VkBufferView view) {
  VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                            .dstSet = set,
                            .dstBinding = binding,
                            .descriptorCount = 1,
                            .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                            .pTexelBufferView = &view};
  vr->vkUpdateDescriptorSets(vr->device, 1, &w, 0, NULL);
}

/* Workgroup counts for `groups` workgroups of a 1D problem: x alone when it
 * fits maxComputeWorkGroupCount[0], else folded into the fewest rows y of
 * equal width x (the shaders linearise y * numX + x), so that at most y - 1
 * workgroups are idle (65536 groups on a 65535 limit: 2 x 32768, not
 * 2 x 65535); nonzero when even that does not fit. */
static int vr_fold_groups(const vr_t* vr, uint64_t groups, uint32_t* gx, uint32_t* gy) {
  uint64_t mx = vr->props.limits.maxComputeWorkGroupCount[0];
  uint64_t my = vr->props.limits.maxComputeWorkGroupCount[1];
  if (groups == 0) groups = 1;
  if (mx == 0) return -1;
  uint64_t y = (groups + mx - 1) / mx;
  uint64_t x = (groups + y - 1) / y;
  if (y > my) return -1;
  *gx = (uint32_t)x;
  *gy = (uint32_t)y;
  return 0;
}

/* Begins vr->work (reset by the pool flag) and binds the pipeline. */
static bp_status_t vr_record_begin(vr_t* vr, const vr_kernel_t* k) {
  bp_status_t st = BP_OK;
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  VR_TRY(vr->vkBeginCommandBuffer(vr->work, &bi));
  vr->vkCmdBindPipeline(vr->work, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
cleanup:
  return st;
}

/* One dispatch of set `set` with `push_bytes` of push constants. */
static void vr_record_dispatch(vr_t* vr, const vr_kernel_t* k, uint32_t set, const void* push,
                               uint32_t push_bytes, uint32_t gx, uint32_t gy) {
  vr->vkCmdBindDescriptorSets(vr->work, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 1,
                              &k->sets[set], 0, NULL);
  if (push_bytes)
    vr->vkCmdPushConstants(vr->work, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
  vr->vkCmdDispatch(vr->work, gx, gy, 1);
}

static bp_status_t vr_record_end(vr_t* vr) {
  bp_status_t st = BP_OK;
  vr_cmd_barrier_after_compute(vr, vr->work);
  VR_TRY(vr->vkEndCommandBuffer(vr->work));
cleanup:
  return st;
}

/* ---- backplane side ---------------------------------------------------- */
/* The backplane half of a figure: operands on one device and what one
 * timed run enqueues (kind 0: one add, 1: one mm, 2: `tiny_ops` adds). */
typedef struct bp_side {
  bpb_ctx_t* ctx;
  bp_tensor_t *a, *b, *out;
  int kind;
  int tiny_ops;
} bp_side_t;

static void bp_side_init(bp_side_t* s, bpb_ctx_t* ctx, int kind, uint32_t rank,
                         const int64_t* sizes, int tiny_ops) {
  memset(s, 0, sizeof *s);
  s->ctx = ctx;
  s->kind = kind;
  s->tiny_ops = tiny_ops;
  s->a = bpb_tensor_random(ctx, rank, sizes, 1);
  s->b = bpb_tensor_random(ctx, rank, sizes, 2);
}

/* Enqueues one run and waits for it; seconds. The first call allocates
 * the output (warm-up). */
static double bp_side_time(bp_side_t* s) {
  double t0 = bpb_now();
  int n = s->kind == 2 ? s->tiny_ops : 1;
  for (int i = 0; i < n; i++) {
    if (s->kind == 1) BPB_CHECK(bp_op_mm(s->ctx->stream, s->a, s->b, NULL, &s->out));
    else BPB_CHECK(bp_op_add(s->ctx->stream, s->a, s->b, NULL, &s->out));
  }
  BPB_CHECK(bp_stream_synchronize(s->ctx->stream));
  return bpb_now() - t0;
}

static void bp_side_release(bp_side_t* s) {
  bp_tensor_release(s->a);
  bp_tensor_release(s->b);
  bp_tensor_release(s->out);
  memset(s, 0, sizeof *s);
}

/* ---- figure 1: f32 add, 16M elements ----------------------------------- */
static void figure_add(bpb_ctx_t* ctx, vr_t* vr, const char* dev) {
  bp_status_t st = BP_OK;
  const VkFormat fmt = VK_FORMAT_R32G32B32A32_SFLOAT;
  const size_t n = ctx->quick ? (size_t)1 << 20 : (size_t)16 << 20; /* floats */
  const size_t n4 = n / 4;                                           /* vec4 texels */
  const VkDeviceSize bytes = (VkDeviceSize)n * sizeof(float);
  vr_buffer_t a = {0}, b = {0}, c = {0};
  vr_kernel_t k = {0};
  VkBufferView views[2][VR_MAX_SETS] = {{0}}; /* VK_NULL_HANDLE: not created */
  float *ha = NULL, *hb = NULL, *hc = NULL;
  bp_side_t bp = {0};

  /* Texel-buffer limits: each view covers at most maxTexelBufferElements
   * texels and starts at a multiple of minTexelBufferOffsetAlignment; a
   * chunk is a whole number of workgroups. c is bound whole as one storage
   * buffer, indexed from the chunk's base. */
  VkFormatProperties fp;
  vr->vkGetPhysicalDeviceFormatProperties(vr->phys, fmt, &fp);
  if (!(fp.bufferFeatures & VK_FORMAT_FEATURE_UNIFORM_TEXEL_BUFFER_BIT))
    VR_REFUSE(BP_UNAVAILABLE, "R32G32B32A32_SFLOAT has no uniform texel buffer support");
  const VkPhysicalDeviceLimits* lim = &vr->props.limits;
  uint64_t align_texels = lim->minTexelBufferOffsetAlignment / 16;
  uint64_t step = VR_GROUP;
  while (align_texels > 1 && step % align_texels) step *= 2; /* both powers of two */
  uint64_t chunk = n4;
  if (lim->maxTexelBufferElements < n4)
    chunk = lim->maxTexelBufferElements - lim->maxTexelBufferElements % step;
  uint64_t nchunks = chunk ? (n4 + chunk - 1) / chunk : UINT64_MAX;
  if (nchunks > VR_MAX_SETS)
    VR_REFUSE(BP_UNAVAILABLE, "maxTexelBufferElements %u needs %llu views",
              lim->maxTexelBufferElements, (unsigned long long)nchunks);
  if (lim->maxStorageBufferRange < bytes)
    VR_REFUSE(BP_UNAVAILABLE, "maxStorageBufferRange %u < %llu bytes",
              lim->maxStorageBufferRange, (unsigned long long)bytes);

  const VkBufferUsageFlags texel = VK_BUFFER_USAGE_UNIFORM_TEXEL_BUFFER_BIT;
  const VkBufferUsageFlags storage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;
  if ((st = vr_buffer_create(vr, bytes, texel, 0, &a)) != BP_OK ||
      (st = vr_buffer_create(vr, bytes, texel, 0, &b)) != BP_OK ||
      (st = vr_buffer_create(vr, bytes, storage, 0, &c)) != BP_OK)
    goto cleanup;
  const VkDescriptorType types[3] = {VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                                     VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                                     VK_DESCRIPTOR_TYPE_STORAGE_BUFFER};
  if ((st = vr_kernel_create(vr, bpb_spv_add_vec4, sizeof bpb_spv_add_vec4, types, 3, 8,
                             (uint32_t)nchunks, &k)) != BP_OK)
    goto cleanup;
  for (uint32_t i = 0; i < nchunks; i++) {
    uint64_t first = i * chunk, count = n4 - first < chunk ? n4 - first : chunk;
    for (int j = 0; j < 2; j++) {
      VkBufferViewCreateInfo vi = {.sType = VK_STRUCTURE_TYPE_BUFFER_VIEW_CREATE_INFO,
                                   .buffer = j ? b.buffer : a.buffer,
                                   .format = fmt,
                                   .offset = first * 16,
                                   .range = count * 16};
      VR_TRY(vr->vkCreateBufferView(vr->device, &vi, NULL, &views[j][i]));
    }
    vr_set_view(vr, k.sets[i], 0, views[0][i]);
    vr_set_view(vr, k.sets[i], 1, views[1][i]);
    vr_set_buffer(vr, k.sets[i], 2, c.buffer, 0, bytes);
  }

  /* The same operands as the backplane side (bpb_tensor_random seeds 1, 2). */
  ha = bpb_alloc(bytes);
  hb = bpb_alloc(bytes);
  hc = bpb_alloc(bytes);
  bpb_fill_random(ha, n, 1);
  bpb_fill_random(hb, n, 2);
  if ((st = vr_buffer_copy(vr, &a, ha, bytes, 1)) != BP_OK ||
      (st = vr_buffer_copy(vr, &b, hb, bytes, 1)) != BP_OK)
    goto cleanup;

  if ((st = vr_record_begin(vr, &k)) != BP_OK) goto cleanup;
  for (uint32_t i = 0; i < nchunks; i++) {
    uint64_t first = i * chunk, count = n4 - first < chunk ? n4 - first : chunk;
    uint32_t push[2] = {(uint32_t)count, (uint32_t)first}, gx, gy;
    uint64_t groups = (count + VR_GROUP - 1) / VR_GROUP;
    if (vr_fold_groups(vr, groups, &gx, &gy))
      VR_REFUSE(BP_UNAVAILABLE, "%llu workgroups exceed maxComputeWorkGroupCount",
                (unsigned long long)groups);
    vr_record_dispatch(vr, &k, i, push, sizeof push, gx, gy);
  }
  if ((st = vr_record_end(vr)) != BP_OK) goto cleanup;

  /* Warm-up of both sides; the raw result is checked (float addition is
   * exact to compare: one rounding on every device). */
  if ((st = vr_submit_wait(vr, vr->work)) != BP_OK ||
      (st = vr_buffer_copy(vr, &c, hc, bytes, 0)) != BP_OK)
    goto cleanup;
  for (size_t i = 0; i < n; i++)
    if (hc[i] != ha[i] + hb[i])
      VR_REFUSE(BP_INTERNAL, "the raw shader computed c[%zu] = %g, expected %g", i,
                (double)hc[i], (double)(ha[i] + hb[i]));
  int64_t sz[1] = {(int64_t)n};
  bp_side_init(&bp, ctx, 0, 1, sz, 0);
  bp_side_time(&bp);

  double t_bp[BPB_MAX_REPS], t_raw[BPB_MAX_REPS];
  for (int r = 0; r < ctx->reps; r++) {
    t_bp[r] = bp_side_time(&bp);
    if ((st = vr_time_work(vr, &t_raw[r])) != BP_OK) goto cleanup;
  }
  double moved = 12.0 * (double)n; /* a and b read, c written */
  char name[160];
  snprintf(name, sizeof name, "f32 add %zuM: %s through backplane vs a raw Vulkan add shader",
           n >> 20, dev);
  bpb_add_figure(&(bpb_figure_t){name, "GB/s", moved / bpb_median(t_bp, ctx->reps) / 1e9,
                                 moved / bpb_median(t_raw, ctx->reps) / 1e9,
                                 "raw Vulkan, one dispatch, same run", 0, 0});
cleanup:
  if (st != BP_OK) printf("suite vk_raw: figure 'f32 add' skipped (%s)\n", bp_status_name(st));
  if (bp.a) bp_side_release(&bp);
  for (uint32_t i = 0; i < VR_MAX_SETS; i++)
    for (int j = 0; j < 2; j++)
      if (views[j][i]) vr->vkDestroyBufferView(vr->device, views[j][i], NULL);
  vr_kernel_destroy(vr, &k);
  vr_buffer_destroy(vr, &a);
  vr_buffer_destroy(vr, &b);
  vr_buffer_destroy(vr, &c);
  free(ha);
  free(hb);
  free(hc);
}

/* ---- figures 2 and 3: FMA ceiling, sgemm against it -------------------- */
/* fma_peak.comp's push constants. */
typedef struct fma_push {
  uint32_t iters;
  float m, a;
} fma_push_t;

/* What fma_peak.comp stores for invocation 0, computed on the host in
 * double (the shader rounds each fma to float: the results agree to about
 * iters * 2^-24 relative). */
static double fma_expected_first(const fma_push_t* p) {
  const double seed[4] = {0.0, 0.25, 0.5, 0.75};
  double sum = 0.0;
  for (int i = 0; i < VR_FMA_ACCS; i++)
    for (int l = 0; l < 4; l++) {
      double acc = seed[l] + i * 0.125;
      for (uint32_t k = 0; k < p->iters * VR_FMA_DEPTH; k++) acc = acc * p->m + p->a;
      sum += acc;
    }
  return sum;
}

static void figure_fma(bpb_ctx_t* ctx, vr_t* vr, const char* dev) {
  bp_status_t st = BP_OK;
  const int64_t m = ctx->quick ? 256 : 1024;
  const double gemm_flops = 2.0 * (double)m * (double)m * (double)m;
  /* 1024 workgroups of 64 invocations, each running `iters` loop
   * iterations: as close to the GEMM's flop count as whole iterations allow
   * (exactly 2 * 1024^3 with the default shape); the figure counts the
   * flops actually run. */
  const uint32_t groups = 1024;
  const uint64_t invocations = (uint64_t)groups * VR_GROUP;
  const double per_iter = (double)invocations * VR_FMA_ACCS * VR_FMA_DEPTH * 4 * 2;
  fma_push_t push = {(uint32_t)fmax(1.0, round(gemm_flops / per_iter)), 0.999f, 0.001f};
  vr_buffer_t o = {0};
  vr_kernel_t k = {0};
  float first[4];
  bp_side_t dev_mm = {0}, cpu_mm = {0};
  bpb_ctx_t cpu = *ctx;
  cpu.stream = NULL;

  if (bp_context_find_device(ctx->context, "cpu:0", &cpu.device) != BP_OK)
    VR_REFUSE(BP_UNAVAILABLE, "no cpu:0 device for the CPU plugin baseline (%s)",
              bp_status_message());
  BPB_CHECK(bp_stream_create(cpu.device, NULL, &cpu.stream));
  cpu.is_cpu = 1;

  st = vr_buffer_create(vr, invocations * 16, VK_BUFFER_USAGE_STORAGE_BUFFER_BIT, 0, &o);
  if (st != BP_OK) goto cleanup;
  const VkDescriptorType types[1] = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER};
  if ((st = vr_kernel_create(vr, bpb_spv_fma_peak, sizeof bpb_spv_fma_peak, types, 1, sizeof push,
                             1, &k)) != BP_OK)
    goto cleanup;
  vr_set_buffer(vr, k.sets[0], 0, o.buffer, 0, invocations * 16);
  uint32_t gx, gy;
  if (vr_fold_groups(vr, groups, &gx, &gy) || (uint64_t)gx * gy != groups)
    VR_REFUSE(BP_UNAVAILABLE, "%u workgroups do not fit maxComputeWorkGroupCount",
              groups);
  if ((st = vr_record_begin(vr, &k)) != BP_OK) goto cleanup;
  vr_record_dispatch(vr, &k, 0, &push, sizeof push, gx, gy);
  if ((st = vr_record_end(vr)) != BP_OK) goto cleanup;

  /* Warm-up, then one timed run: a device that runs the GEMM's flop count
   * in less than VR_FMA_MIN_S (a GPU: tens of microseconds) gets
   * proportionally more iterations, so that the submission latency does not
   * mask its arithmetic rate. */
  double t_once = 0;
  if ((st = vr_submit_wait(vr, vr->work)) != BP_OK ||
      (st = vr_time_work(vr, &t_once)) != BP_OK)
    goto cleanup;
  if (t_once < VR_FMA_MIN_S) {
    double iters = push.iters * ceil(VR_FMA_MIN_S / fmax(t_once, 1e-7));
    push.iters = (uint32_t)fmin(iters, VR_FMA_MAX_ITERS);
    if ((st = vr_record_begin(vr, &k)) != BP_OK) goto cleanup;
    vr_record_dispatch(vr, &k, 0, &push, sizeof push, gx, gy);
    if ((st = vr_record_end(vr)) != BP_OK) goto cleanup;
  }
  const double flops = per_iter * push.iters;

  /* The first invocation's sum proves that the loop ran in full. */
  if ((st = vr_submit_wait(vr, vr->work)) != BP_OK ||
      (st = vr_buffer_copy(vr, &o, first, sizeof first, 0)) != BP_OK)
    goto cleanup;
  double got = (double)first[0] + first[1] + first[2] + first[3];
  double want = fma_expected_first(&push);
  if (!(fabs(got - want) <= 1e-3 * fabs(want)))
    VR_REFUSE(BP_INTERNAL, "the shader stored %.9g for invocation 0, expected %.9g",
              got, want);

  int64_t msz[2] = {m, m};
  bp_side_init(&dev_mm, ctx, 1, 2, msz, 0);
  bp_side_init(&cpu_mm, &cpu, 1, 2, msz, 0);
  bp_side_time(&dev_mm);
  bp_side_time(&cpu_mm);
  double t_raw[BPB_MAX_REPS], t_dev[BPB_MAX_REPS], t_cpu[BPB_MAX_REPS];
  for (int r = 0; r < ctx->reps; r++) {
    if ((st = vr_time_work(vr, &t_raw[r])) != BP_OK) goto cleanup;
    t_dev[r] = bp_side_time(&dev_mm);
    t_cpu[r] = bp_side_time(&cpu_mm);
  }
  double peak = flops / bpb_median(t_raw, ctx->reps) / 1e9;
  char name[192];
  snprintf(name, sizeof name,
           "device FMA ceiling: %s raw FMA-only shader (no memory traffic) vs the CPU plugin's "
           "sgemm %lld^3",
           dev, (long long)m);
  bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", peak,
                                 gemm_flops / bpb_median(t_cpu, ctx->reps) / 1e9,
                                 "cpu plugin sgemm, same run", 0, 0});
  snprintf(name, sizeof name, "sgemm %lld^3: %s through backplane vs the device's FMA ceiling",
           (long long)m, dev);
  bpb_add_figure(&(bpb_figure_t){name, "GFLOP/s", gemm_flops / bpb_median(t_dev, ctx->reps) / 1e9,
                                 peak, "raw Vulkan FMA-only shader, same run", 0, 0});
cleanup:
  if (st != BP_OK)
    printf("suite vk_raw: figures 'device FMA ceiling' and 'sgemm vs the ceiling' skipped (%s)\n",
           bp_status_name(st));
  if (dev_mm.a) bp_side_release(&dev_mm);
  if (cpu_mm.a) bp_side_release(&cpu_mm);
  if (cpu.stream) bp_stream_release(cpu.stream);
  vr_kernel_destroy(vr, &k);
  vr_buffer_destroy(vr, &o);
}

/* ---- figure 4: submission overhead per tiny op ------------------------- */
static void figure_tiny(bpb_ctx_t* ctx, vr_t* vr, const char* dev) {
  bp_status_t st = BP_OK;
  const int ops = 200;
  vr_buffer_t buf[3] = {{0}};
  vr_kernel_t k = {0};
  bp_side_t bp = {0};
  float ab[2][4] = {{1.5f, 0, 0, 0}, {2.25f, 0, 0, 0}}, c[4] = {0};
  const VkBufferUsageFlags storage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT;

  for (int i = 0; i < 3; i++)
    if ((st = vr_buffer_create(vr, sizeof c, storage, 0, &buf[i])) != BP_OK) goto cleanup;
  const VkDescriptorType types[3] = {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                     VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                     VK_DESCRIPTOR_TYPE_STORAGE_BUFFER};
  st = vr_kernel_create(vr, bpb_spv_add_one, sizeof bpb_spv_add_one, types, 3, 0, 1, &k);
  if (st != BP_OK) goto cleanup;
  for (uint32_t i = 0; i < 3; i++) vr_set_buffer(vr, k.sets[0], i, buf[i].buffer, 0, sizeof c);
  if ((st = vr_buffer_copy(vr, &buf[0], ab[0], sizeof ab[0], 1)) != BP_OK ||
      (st = vr_buffer_copy(vr, &buf[1], ab[1], sizeof ab[1], 1)) != BP_OK)
    goto cleanup;
  if ((st = vr_record_begin(vr, &k)) != BP_OK) goto cleanup;
  vr_record_dispatch(vr, &k, 0, NULL, 0, 1, 1);
  if ((st = vr_record_end(vr)) != BP_OK) goto cleanup;
  if ((st = vr_submit_wait(vr, vr->work)) != BP_OK ||
      (st = vr_buffer_copy(vr, &buf[2], c, sizeof c, 0)) != BP_OK)
    goto cleanup;
  if (c[0] != ab[0][0] + ab[1][0])
    VR_REFUSE(BP_INTERNAL, "the raw shader computed %g, expected %g", (double)c[0],
              (double)(ab[0][0] + ab[1][0]));

  int64_t one[1] = {1};
  bp_side_init(&bp, ctx, 2, 1, one, ops);
  bp_side_time(&bp);
  double t_bp[BPB_MAX_REPS], t_raw[BPB_MAX_REPS];
  for (int r = 0; r < ctx->reps; r++) {
    t_bp[r] = bp_side_time(&bp);
    double t0 = bpb_now();
    for (int i = 0; i < ops; i++)
      if ((st = vr_submit_wait(vr, vr->work)) != BP_OK) goto cleanup;
    t_raw[r] = bpb_now() - t0;
  }
  char name[192];
  snprintf(
      name, sizeof name,
      "submission overhead per tiny op (%d one-element adds): %s through backplane vs raw Vulkan",
      ops, dev);
  bpb_add_figure(&(bpb_figure_t){name, "us", bpb_median(t_bp, ctx->reps) / ops * 1e6,
                                 bpb_median(t_raw, ctx->reps) / ops * 1e6,
                                 "raw Vulkan, submit + fence wait per dispatch, same run", 0, 1});
cleanup:
  if (st != BP_OK)
    printf("suite vk_raw: figure 'submission overhead' skipped (%s)\n", bp_status_name(st));
  if (bp.a) bp_side_release(&bp);
  vr_kernel_destroy(vr, &k);
  for (int i = 0; i < 3; i++) vr_buffer_destroy(vr, &buf[i]);
}

void bpb_suite_vk_raw(bpb_ctx_t* ctx) {
  const char* dev = bp_device_name(ctx->device);
  bp_plugin_info_t info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  if (bp_plugin_get_info(bp_device_plugin(ctx->device), &info) != BP_OK || !info.name ||
      strcmp(info.name, "vulkan") != 0) {
    printf("suite vk_raw: does not apply to %s (plugin '%s'; run it with --device vulkan:N)\n", dev,
           info.name ? info.name : "?");
    return;
  }
  vr_t vr;
  if (vr_open(&vr, bp_device_properties(ctx->device)) != BP_OK) {
    printf("suite vk_raw: skipped (no raw Vulkan device for %s)\n", dev);
    return;
  }
  figure_add(ctx, &vr, dev);
  figure_fma(ctx, &vr, dev);
  figure_tiny(ctx, &vr, dev);
  if (vr.validation_messages)
    printf("suite vk_raw: the validation layer reported %u messages\n", vr.validation_messages);
  vr_close(&vr);
}

#endif /* BP_BENCH_HAVE_VULKAN */
