/* Unit tests of the Vulkan plugin's logic through a fake driver: the
 * dispatch table is filled by a fake vkGetInstanceProcAddr, so device
 * selection, the suballocator, the memory budget, staging and the batching
 * of command buffers run without any Vulkan implementation. The fake
 * executes buffer copies at vkQueueSubmit and completes every submission
 * at once (timeline values are set on submit).
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vk_internal.h"

/* ---- the fake driver ---------------------------------------------------- */
typedef struct fake_pd {
  const char* name;
  int compute;  /* has a compute queue */
  int bda;      /* bufferDeviceAddress */
  uint64_t heap;
} fake_pd_t;

static fake_pd_t g_pds[4];
static uint32_t g_npd;
static int g_fail_create_instance;
static int g_cpu;            /* devices are VK_PHYSICAL_DEVICE_TYPE_CPU with VK_KHR_push_descriptor */
static int g_fail_pipelines; /* vkCreateComputePipelines runs out of memory */
static uint32_t g_pipelines_created;
static uint32_t g_last_spec0; /* constant 0 of the last pipeline created (NINSTR for ew*: 0 = generic) */
static uint64_t g_submits, g_dispatches, g_barriers, g_copies, g_allocs, g_live_allocs;
/* External memory: the device lists VK_KHR_external_memory_fd; what the
 * plugin passed in the last allocation, buffer creation and fd export. */
static int g_memfd, g_semfd;
/* Semaphores: export info at creation, the fd calls' arguments. */
static int g_sem_export, g_semfd_imported;
static VkSemaphore g_getsemfd_sem, g_importsem_sem;
static int g_alloc_export, g_alloc_import_fd, g_buffer_external, g_device_memfd_enabled;
static uint64_t g_alloc_size;
static VkDeviceMemory g_getfd_memory;
static VkExternalMemoryHandleTypeFlagBits g_getfd_type;
/* The pipeline cache: the device's identity (header fields), and what the
 * plugin handed to vkCreatePipelineCache (-1: not called). */
static uint32_t g_driver_version = 0x01020003u;
static uint8_t g_cache_uuid[VK_UUID_SIZE] = {0xca, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14};
static int64_t g_cache_init_size = -1;
static unsigned char g_cache_init[256];
#define FAKE_VENDOR 0x1234u
#define FAKE_DEVICE 0x5678u
#define FAKE_PAYLOAD "FAKEPIPE"

typedef struct fake_mem { unsigned char* p; uint64_t size; } fake_mem_t;
typedef struct fake_buf { uint64_t size; fake_mem_t* mem; uint64_t off; } fake_buf_t;
typedef struct fake_sem { uint64_t value; } fake_sem_t;
typedef struct fake_cmd {
  uint32_t n;
  struct { fake_buf_t *src, *dst; VkBufferCopy r; } copies[64];
} fake_cmd_t;

static VKAPI_ATTR VkResult VKAPI_CALL f_CreateInstance(const VkInstanceCreateInfo* ci, const VkAllocationCallbacks* a,
                                                       VkInstance* out) {
  (void)ci; (void)a;
  if (g_fail_create_instance) return VK_ERROR_INCOMPATIBLE_DRIVER;
  *out = (VkInstance)(uintptr_t)0x1000;
  return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_EnumerateInstanceVersion(uint32_t* v) { *v = VK_API_VERSION_1_3; return VK_SUCCESS; }
static VKAPI_ATTR VkResult VKAPI_CALL f_EnumerateInstanceLayerProperties(uint32_t* n, VkLayerProperties* p) {
  (void)p; *n = 0; return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_EnumerateInstanceExtensionProperties(const char* l, uint32_t* n, VkExtensionProperties* p) {
  (void)l; (void)p; *n = 0; return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyInstance(VkInstance i, const VkAllocationCallbacks* a) { (void)i; (void)a; }
static VKAPI_ATTR VkResult VKAPI_CALL f_EnumeratePhysicalDevices(VkInstance i, uint32_t* n, VkPhysicalDevice* out) {
  (void)i;
  if (out)
    for (uint32_t k = 0; k < *n && k < g_npd; k++) out[k] = (VkPhysicalDevice)&g_pds[k];
  *n = g_npd;
  return VK_SUCCESS;
}
static fake_pd_t* pd_of(VkPhysicalDevice p) { return (fake_pd_t*)p; }
static VKAPI_ATTR void VKAPI_CALL f_GetPhysicalDeviceProperties(VkPhysicalDevice p, VkPhysicalDeviceProperties* o) {
  memset(o, 0, sizeof *o);
  o->apiVersion = VK_API_VERSION_1_3;
  o->deviceType = g_cpu ? VK_PHYSICAL_DEVICE_TYPE_CPU : VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU;
  snprintf(o->deviceName, sizeof o->deviceName, "%s", pd_of(p)->name);
  o->vendorID = FAKE_VENDOR;
  o->deviceID = FAKE_DEVICE;
  o->driverVersion = g_driver_version;
  memcpy(o->pipelineCacheUUID, g_cache_uuid, VK_UUID_SIZE);
  VkPhysicalDeviceLimits* l = &o->limits;
  l->timestampPeriod = 1;
  for (int i = 0; i < 3; i++) {
    l->maxComputeWorkGroupCount[i] = 65535;
    l->maxComputeWorkGroupSize[i] = i < 2 ? 1024 : 64;
  }
  l->maxComputeWorkGroupInvocations = 1024;
  l->maxComputeSharedMemorySize = 32768;
  l->minStorageBufferOffsetAlignment = l->minTexelBufferOffsetAlignment = 16;
  l->maxStorageBufferRange = l->maxTexelBufferElements = 1u << 27;
}
static VKAPI_ATTR void VKAPI_CALL f_GetPhysicalDeviceProperties2(VkPhysicalDevice p, VkPhysicalDeviceProperties2* o) {
  f_GetPhysicalDeviceProperties(p, &o->properties);
  for (VkBaseOutStructure* n = o->pNext; n; n = n->pNext)
    if (n->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES)
      ((VkPhysicalDeviceSubgroupProperties*)n)->subgroupSize = 32;
}
static VKAPI_ATTR void VKAPI_CALL f_GetPhysicalDeviceFeatures2(VkPhysicalDevice p, VkPhysicalDeviceFeatures2* f) {
  f->features.shaderFloat64 = f->features.shaderInt64 = f->features.shaderInt16 = VK_TRUE;
  for (VkBaseOutStructure* n = f->pNext; n; n = n->pNext) {
    if (n->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES)
      ((VkPhysicalDeviceVulkan11Features*)n)->storageBuffer16BitAccess = VK_TRUE;
    if (n->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES) {
      VkPhysicalDeviceVulkan12Features* f12 = (VkPhysicalDeviceVulkan12Features*)n;
      f12->storageBuffer8BitAccess = f12->shaderInt8 = f12->timelineSemaphore = VK_TRUE;
      f12->bufferDeviceAddress = pd_of(p)->bda ? VK_TRUE : VK_FALSE;
    }
  }
}
static VKAPI_ATTR void VKAPI_CALL f_GetPhysicalDeviceQueueFamilyProperties(VkPhysicalDevice p, uint32_t* n,
                                                                           VkQueueFamilyProperties* q) {
  if (q && *n >= 1) {
    memset(q, 0, sizeof *q);
    q->queueFlags = pd_of(p)->compute ? VK_QUEUE_COMPUTE_BIT | VK_QUEUE_TRANSFER_BIT : VK_QUEUE_GRAPHICS_BIT;
    q->queueCount = 1;
    q->timestampValidBits = 64;
  }
  *n = 1;
}
static VKAPI_ATTR void VKAPI_CALL f_GetPhysicalDeviceMemoryProperties(VkPhysicalDevice p, VkPhysicalDeviceMemoryProperties* m) {
  memset(m, 0, sizeof *m);
  m->memoryTypeCount = 2;
  m->memoryTypes[0].propertyFlags = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT; /* not host visible: staging */
  m->memoryTypes[0].heapIndex = 0;
  m->memoryTypes[1].propertyFlags = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
  m->memoryTypes[1].heapIndex = 1;
  m->memoryHeapCount = 2;
  m->memoryHeaps[0].size = pd_of(p)->heap;
  m->memoryHeaps[0].flags = VK_MEMORY_HEAP_DEVICE_LOCAL_BIT;
  m->memoryHeaps[1].size = 1ull << 30;
}
static VKAPI_ATTR void VKAPI_CALL f_GetPhysicalDeviceMemoryProperties2(VkPhysicalDevice p, VkPhysicalDeviceMemoryProperties2* m) {
  f_GetPhysicalDeviceMemoryProperties(p, &m->memoryProperties);
}
static VKAPI_ATTR VkResult VKAPI_CALL f_EnumerateDeviceExtensionProperties(VkPhysicalDevice p, const char* l, uint32_t* n,
                                                                           VkExtensionProperties* e) {
  (void)p; (void)l;
  const char* names[3];
  uint32_t count = 0;
  if (g_cpu) names[count++] = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
  if (g_memfd) names[count++] = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
  if (g_semfd) names[count++] = VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME;
  for (uint32_t i = 0; e && i < count && i < *n; i++) {
    memset(&e[i], 0, sizeof e[i]);
    snprintf(e[i].extensionName, sizeof e[i].extensionName, "%s", names[i]);
  }
  *n = count;
  return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateDevice(VkPhysicalDevice p, const VkDeviceCreateInfo* ci,
                                                     const VkAllocationCallbacks* a, VkDevice* out) {
  (void)p; (void)a;
  g_device_memfd_enabled = 0;
  for (uint32_t i = 0; i < ci->enabledExtensionCount; i++)
    if (strcmp(ci->ppEnabledExtensionNames[i], VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME) == 0)
      g_device_memfd_enabled = 1;
  *out = (VkDevice)(uintptr_t)0x2000;
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyDevice(VkDevice d, const VkAllocationCallbacks* a) { (void)d; (void)a; }
static VKAPI_ATTR void VKAPI_CALL f_GetDeviceQueue(VkDevice d, uint32_t f, uint32_t i, VkQueue* q) {
  (void)d; (void)f; (void)i; *q = (VkQueue)(uintptr_t)0x3000;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_DeviceWaitIdle(VkDevice d) { (void)d; return VK_SUCCESS; }
/* A submission runs (copies, then signals) once its waits are satisfied:
 * at vkQueueSubmit, or later when vkSignalSemaphore releases it. */
typedef struct fake_submit {
  fake_cmd_t* cmd;
  uint32_t nw, ns;
  fake_sem_t* wsem[20];
  uint64_t wval[20];
  fake_sem_t* ssem[70];
  uint64_t sval[70];
} fake_submit_t;
static fake_submit_t g_pending[64];
static uint32_t g_npending;
static pthread_mutex_t g_fake_lock = PTHREAD_MUTEX_INITIALIZER;

static int submit_ready(const fake_submit_t* f) {
  for (uint32_t i = 0; i < f->nw; i++)
    if (f->wsem[i]->value < f->wval[i]) return 0;
  return 1;
}
static void submit_run(const fake_submit_t* f) {
  fake_cmd_t* cmd = f->cmd;
  for (uint32_t k = 0; k < cmd->n; k++)
    memcpy(cmd->copies[k].dst->mem->p + cmd->copies[k].dst->off + cmd->copies[k].r.dstOffset,
           cmd->copies[k].src->mem->p + cmd->copies[k].src->off + cmd->copies[k].r.srcOffset, cmd->copies[k].r.size);
  for (uint32_t i = 0; i < f->ns; i++)
    if (f->ssem[i]->value < f->sval[i]) f->ssem[i]->value = f->sval[i];
}
/* Runs every pending submission that became ready (lock held). */
static void run_pending(void) {
  for (int progress = 1; progress;) {
    progress = 0;
    for (uint32_t i = 0; i < g_npending; i++)
      if (submit_ready(&g_pending[i])) {
        submit_run(&g_pending[i]);
        g_pending[i] = g_pending[--g_npending];
        progress = 1;
        break;
      }
  }
}

static VKAPI_ATTR VkResult VKAPI_CALL f_QueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo* si, VkFence f) {
  (void)q; (void)f;
  pthread_mutex_lock(&g_fake_lock);
  for (uint32_t i = 0; i < n; i++) {
    const VkTimelineSemaphoreSubmitInfo* t = si[i].pNext;
    fake_submit_t* fs = &g_pending[g_npending++];
    fs->cmd = (fake_cmd_t*)si[i].pCommandBuffers[0];
    fs->nw = si[i].waitSemaphoreCount;
    for (uint32_t w = 0; w < fs->nw; w++) {
      fs->wsem[w] = (fake_sem_t*)si[i].pWaitSemaphores[w];
      fs->wval[w] = t->pWaitSemaphoreValues[w];
    }
    fs->ns = si[i].signalSemaphoreCount;
    for (uint32_t w = 0; w < fs->ns; w++) {
      fs->ssem[w] = (fake_sem_t*)si[i].pSignalSemaphores[w];
      fs->sval[w] = t->pSignalSemaphoreValues[w];
    }
  }
  run_pending();
  g_submits++;
  pthread_mutex_unlock(&g_fake_lock);
  return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateBuffer(VkDevice d, const VkBufferCreateInfo* ci, const VkAllocationCallbacks* a,
                                                     VkBuffer* out) {
  (void)d; (void)a;
  fake_buf_t* b = calloc(1, sizeof *b);
  b->size = ci->size;
  g_buffer_external = 0;
  for (const VkBaseInStructure* x = ci->pNext; x; x = x->pNext)
    if (x->sType == VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO &&
        ((const VkExternalMemoryBufferCreateInfo*)x)->handleTypes == VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT)
      g_buffer_external = 1;
  *out = (VkBuffer)b;
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyBuffer(VkDevice d, VkBuffer b, const VkAllocationCallbacks* a) {
  (void)d; (void)a; free((void*)b);
}
static VKAPI_ATTR void VKAPI_CALL f_GetBufferMemoryRequirements(VkDevice d, VkBuffer b, VkMemoryRequirements* r) {
  (void)d;
  r->size = (((fake_buf_t*)b)->size + 255) & ~255ull;
  r->alignment = 256;
  r->memoryTypeBits = 3;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_AllocateMemory(VkDevice d, const VkMemoryAllocateInfo* ai, const VkAllocationCallbacks* a,
                                                       VkDeviceMemory* out) {
  (void)d; (void)a;
  g_alloc_export = 0;
  g_alloc_import_fd = -1;
  g_alloc_size = ai->allocationSize;
  for (const VkBaseInStructure* x = ai->pNext; x; x = x->pNext) {
    if (x->sType == VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO &&
        ((const VkExportMemoryAllocateInfo*)x)->handleTypes == VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT)
      g_alloc_export = 1;
    if (x->sType == VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR &&
        ((const VkImportMemoryFdInfoKHR*)x)->handleType == VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT)
      g_alloc_import_fd = ((const VkImportMemoryFdInfoKHR*)x)->fd;
  }
  fake_mem_t* m = calloc(1, sizeof *m);
  m->p = calloc(1, ai->allocationSize);
  m->size = ai->allocationSize;
  if (!m->p) { free(m); return VK_ERROR_OUT_OF_DEVICE_MEMORY; }
  g_allocs++;
  g_live_allocs++;
  *out = (VkDeviceMemory)m;
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_FreeMemory(VkDevice d, VkDeviceMemory mem, const VkAllocationCallbacks* a) {
  (void)d; (void)a;
  fake_mem_t* m = (fake_mem_t*)mem;
  g_live_allocs--;
  free(m->p);
  free(m);
}
static VKAPI_ATTR VkResult VKAPI_CALL f_BindBufferMemory(VkDevice d, VkBuffer b, VkDeviceMemory m, VkDeviceSize off) {
  (void)d;
  ((fake_buf_t*)b)->mem = (fake_mem_t*)m;
  ((fake_buf_t*)b)->off = off;
  return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_MapMemory(VkDevice d, VkDeviceMemory m, VkDeviceSize off, VkDeviceSize size,
                                                  VkMemoryMapFlags fl, void** out) {
  (void)d; (void)size; (void)fl;
  *out = ((fake_mem_t*)m)->p + off;
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_UnmapMemory(VkDevice d, VkDeviceMemory m) { (void)d; (void)m; }
static VKAPI_ATTR VkDeviceAddress VKAPI_CALL f_GetBufferDeviceAddress(VkDevice d, const VkBufferDeviceAddressInfo* i) {
  (void)d; return (VkDeviceAddress)(uintptr_t)i->buffer;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateCommandPool(VkDevice d, const VkCommandPoolCreateInfo* ci,
                                                          const VkAllocationCallbacks* a, VkCommandPool* out) {
  (void)d; (void)ci; (void)a; *out = (VkCommandPool)(uintptr_t)0x4000; return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyCommandPool(VkDevice d, VkCommandPool p, const VkAllocationCallbacks* a) {
  (void)d; (void)p; (void)a;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_AllocateCommandBuffers(VkDevice d, const VkCommandBufferAllocateInfo* ai, VkCommandBuffer* out) {
  (void)d;
  for (uint32_t i = 0; i < ai->commandBufferCount; i++) out[i] = (VkCommandBuffer)calloc(1, sizeof(fake_cmd_t));
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_FreeCommandBuffers(VkDevice d, VkCommandPool p, uint32_t n, const VkCommandBuffer* c) {
  (void)d; (void)p;
  for (uint32_t i = 0; i < n; i++) free((void*)c[i]);
}
static VKAPI_ATTR VkResult VKAPI_CALL f_BeginCommandBuffer(VkCommandBuffer c, const VkCommandBufferBeginInfo* bi) {
  (void)bi; ((fake_cmd_t*)c)->n = 0; return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_EndCommandBuffer(VkCommandBuffer c) { (void)c; return VK_SUCCESS; }
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateSemaphore(VkDevice d, const VkSemaphoreCreateInfo* ci, const VkAllocationCallbacks* a,
                                                        VkSemaphore* out) {
  (void)d; (void)a;
  g_sem_export = 0;
  for (const VkBaseInStructure* x = ci->pNext; x; x = x->pNext)
    if (x->sType == VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO &&
        ((const VkExportSemaphoreCreateInfo*)x)->handleTypes == VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT)
      g_sem_export = 1;
  *out = (VkSemaphore)calloc(1, sizeof(fake_sem_t));
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroySemaphore(VkDevice d, VkSemaphore s, const VkAllocationCallbacks* a) {
  (void)d; (void)a; free((void*)s);
}
static VKAPI_ATTR VkResult VKAPI_CALL f_WaitSemaphores(VkDevice d, const VkSemaphoreWaitInfo* wi, uint64_t t) {
  (void)d; (void)t;
  VkResult r = VK_SUCCESS;
  pthread_mutex_lock(&g_fake_lock);
  for (uint32_t i = 0; i < wi->semaphoreCount; i++)
    if (((fake_sem_t*)wi->pSemaphores[i])->value < wi->pValues[i]) r = VK_TIMEOUT; /* would block forever */
  pthread_mutex_unlock(&g_fake_lock);
  return r;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_SignalSemaphore(VkDevice d, const VkSemaphoreSignalInfo* si) {
  (void)d;
  pthread_mutex_lock(&g_fake_lock);
  fake_sem_t* sem = (fake_sem_t*)si->semaphore;
  if (sem->value < si->value) sem->value = si->value;
  run_pending();
  pthread_mutex_unlock(&g_fake_lock);
  return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_GetSemaphoreCounterValue(VkDevice d, VkSemaphore s, uint64_t* v) {
  (void)d;
  pthread_mutex_lock(&g_fake_lock);
  *v = ((fake_sem_t*)s)->value;
  pthread_mutex_unlock(&g_fake_lock);
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_CmdCopyBuffer(VkCommandBuffer c, VkBuffer s, VkBuffer d, uint32_t n, const VkBufferCopy* r) {
  fake_cmd_t* cmd = (fake_cmd_t*)c;
  for (uint32_t i = 0; i < n && cmd->n < 64; i++) {
    cmd->copies[cmd->n].src = (fake_buf_t*)s;
    cmd->copies[cmd->n].dst = (fake_buf_t*)d;
    cmd->copies[cmd->n++].r = r[i];
  }
  g_copies++;
}
static VKAPI_ATTR void VKAPI_CALL f_CmdFillBuffer(VkCommandBuffer c, VkBuffer b, VkDeviceSize o, VkDeviceSize s, uint32_t v) {
  (void)c; (void)b; (void)o; (void)s; (void)v;
}
static VKAPI_ATTR void VKAPI_CALL f_CmdPipelineBarrier(VkCommandBuffer c, VkPipelineStageFlags a, VkPipelineStageFlags b,
                                                       VkDependencyFlags f, uint32_t n1, const VkMemoryBarrier* m, uint32_t n2,
                                                       const VkBufferMemoryBarrier* bm, uint32_t n3, const VkImageMemoryBarrier* im) {
  (void)c; (void)a; (void)b; (void)f; (void)n1; (void)m; (void)n2; (void)bm; (void)n3; (void)im;
  g_barriers++;
}
static VKAPI_ATTR void VKAPI_CALL f_CmdDispatch(VkCommandBuffer c, uint32_t x, uint32_t y, uint32_t z) {
  (void)c; (void)x; (void)y; (void)z; g_dispatches++;
}
static VKAPI_ATTR void VKAPI_CALL f_CmdBindPipeline(VkCommandBuffer c, VkPipelineBindPoint b, VkPipeline p) { (void)c; (void)b; (void)p; }
static VKAPI_ATTR void VKAPI_CALL f_CmdPushConstants(VkCommandBuffer c, VkPipelineLayout l, VkShaderStageFlags s, uint32_t o,
                                                     uint32_t n, const void* v) {
  (void)c; (void)l; (void)s; (void)o; (void)n; (void)v;
}
static VKAPI_ATTR void VKAPI_CALL f_CmdWriteTimestamp(VkCommandBuffer c, VkPipelineStageFlagBits s, VkQueryPool q, uint32_t i) {
  (void)c; (void)s; (void)q; (void)i;
}
static VKAPI_ATTR void VKAPI_CALL f_CmdResetQueryPool(VkCommandBuffer c, VkQueryPool q, uint32_t a, uint32_t n) {
  (void)c; (void)q; (void)a; (void)n;
}
static uintptr_t g_handle = 0x10000;
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateQueryPool(VkDevice d, const VkQueryPoolCreateInfo* ci, const VkAllocationCallbacks* a,
                                                        VkQueryPool* out) {
  (void)d; (void)ci; (void)a; *out = (VkQueryPool)(g_handle++); return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyQueryPool(VkDevice d, VkQueryPool q, const VkAllocationCallbacks* a) { (void)d; (void)q; (void)a; }
static VKAPI_ATTR VkResult VKAPI_CALL f_GetQueryPoolResults(VkDevice d, VkQueryPool q, uint32_t f, uint32_t n, size_t sz, void* data,
                                                            VkDeviceSize st, VkQueryResultFlags fl) {
  (void)d; (void)q; (void)f; (void)n; (void)st; (void)fl; memset(data, 0, sz); return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateShaderModule(VkDevice d, const VkShaderModuleCreateInfo* ci, const VkAllocationCallbacks* a,
                                                           VkShaderModule* out) {
  (void)d; (void)ci; (void)a; *out = (VkShaderModule)(g_handle++); return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyShaderModule(VkDevice d, VkShaderModule m, const VkAllocationCallbacks* a) { (void)d; (void)m; (void)a; }
static VKAPI_ATTR VkResult VKAPI_CALL f_CreatePipelineLayout(VkDevice d, const VkPipelineLayoutCreateInfo* ci,
                                                             const VkAllocationCallbacks* a, VkPipelineLayout* out) {
  (void)d; (void)ci; (void)a; *out = (VkPipelineLayout)(g_handle++); return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyPipelineLayout(VkDevice d, VkPipelineLayout l, const VkAllocationCallbacks* a) { (void)d; (void)l; (void)a; }
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateComputePipelines(VkDevice d, VkPipelineCache c, uint32_t n,
                                                               const VkComputePipelineCreateInfo* ci, const VkAllocationCallbacks* a,
                                                               VkPipeline* out) {
  (void)d; (void)c; (void)a;
  for (uint32_t i = 0; i < n && !g_fail_pipelines; i++) {
    const VkSpecializationInfo* si = ci[i].stage.pSpecializationInfo;
    g_last_spec0 = si && si->dataSize >= 4 ? *(const uint32_t*)si->pData : 0;
    g_pipelines_created++;
  }
  for (uint32_t i = 0; i < n; i++) out[i] = g_fail_pipelines ? VK_NULL_HANDLE : (VkPipeline)(g_handle++);
  return g_fail_pipelines ? VK_ERROR_OUT_OF_DEVICE_MEMORY : VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyPipeline(VkDevice d, VkPipeline p, const VkAllocationCallbacks* a) { (void)d; (void)p; (void)a; }
static VKAPI_ATTR VkResult VKAPI_CALL f_CreatePipelineCache(VkDevice d, const VkPipelineCacheCreateInfo* ci,
                                                            const VkAllocationCallbacks* a, VkPipelineCache* out) {
  (void)d; (void)a;
  g_cache_init_size = (int64_t)ci->initialDataSize;
  memset(g_cache_init, 0, sizeof g_cache_init);
  if (ci->initialDataSize)
    memcpy(g_cache_init, ci->pInitialData, ci->initialDataSize < sizeof g_cache_init ? ci->initialDataSize : sizeof g_cache_init);
  *out = (VkPipelineCache)(g_handle++);
  return VK_SUCCESS;
}
/* A valid VkPipelineCacheHeaderVersionOne of this device, then FAKE_PAYLOAD. */
static size_t fake_cache_data(unsigned char* out) {
  const uint32_t head[4] = {32, VK_PIPELINE_CACHE_HEADER_VERSION_ONE, FAKE_VENDOR, FAKE_DEVICE};
  for (int i = 0; i < 16; i++) out[i] = (unsigned char)(head[i / 4] >> (8 * (i % 4)));
  memcpy(out + 16, g_cache_uuid, VK_UUID_SIZE);
  memcpy(out + 32, FAKE_PAYLOAD, sizeof FAKE_PAYLOAD - 1);
  return 32 + sizeof FAKE_PAYLOAD - 1;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_GetPipelineCacheData(VkDevice d, VkPipelineCache c, size_t* n, void* data) {
  (void)d; (void)c;
  unsigned char buf[64];
  size_t len = fake_cache_data(buf);
  if (!data) {
    *n = len;
    return VK_SUCCESS;
  }
  if (*n < len) return VK_INCOMPLETE;
  memcpy(data, buf, len);
  *n = len;
  return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyPipelineCache(VkDevice d, VkPipelineCache c, const VkAllocationCallbacks* a) { (void)d; (void)c; (void)a; }
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateDescriptorSetLayout(VkDevice d, const VkDescriptorSetLayoutCreateInfo* ci,
                                                                  const VkAllocationCallbacks* a, VkDescriptorSetLayout* out) {
  (void)d; (void)ci; (void)a; *out = (VkDescriptorSetLayout)(g_handle++); return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyDescriptorSetLayout(VkDevice d, VkDescriptorSetLayout l, const VkAllocationCallbacks* a) {
  (void)d; (void)l; (void)a;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_CreateBufferView(VkDevice d, const VkBufferViewCreateInfo* ci, const VkAllocationCallbacks* a,
                                                         VkBufferView* out) {
  (void)d; (void)ci; (void)a; *out = (VkBufferView)(g_handle++); return VK_SUCCESS;
}
static VKAPI_ATTR void VKAPI_CALL f_DestroyBufferView(VkDevice d, VkBufferView v, const VkAllocationCallbacks* a) { (void)d; (void)v; (void)a; }
static VKAPI_ATTR void VKAPI_CALL f_CmdPushDescriptorSetKHR(VkCommandBuffer c, VkPipelineBindPoint b, VkPipelineLayout l, uint32_t set,
                                                            uint32_t n, const VkWriteDescriptorSet* w) {
  (void)c; (void)b; (void)l; (void)set; (void)n; (void)w;
}

static VKAPI_ATTR VkResult VKAPI_CALL f_GetMemoryFdKHR(VkDevice d, const VkMemoryGetFdInfoKHR* gi, int* fd) {
  (void)d;
  if (gi->sType != VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR) return VK_ERROR_UNKNOWN;
  g_getfd_memory = gi->memory;
  g_getfd_type = gi->handleType;
  *fd = 77;
  return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL f_GetSemaphoreFdKHR(VkDevice d, const VkSemaphoreGetFdInfoKHR* gi, int* fd) {
  (void)d;
  if (gi->handleType != VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT) return VK_ERROR_UNKNOWN;
  g_getsemfd_sem = gi->semaphore;
  *fd = 88;
  return VK_SUCCESS;
}
static VKAPI_ATTR VkResult VKAPI_CALL f_ImportSemaphoreFdKHR(VkDevice d, const VkImportSemaphoreFdInfoKHR* ii) {
  (void)d;
  if (ii->handleType != VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT) return VK_ERROR_UNKNOWN;
  g_importsem_sem = ii->semaphore;
  g_semfd_imported = ii->fd;
  return VK_SUCCESS;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL f_GetDeviceProcAddr(VkDevice d, const char* name);
static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL f_GetInstanceProcAddr(VkInstance i, const char* name) {
  (void)i;
#define F(n) if (strcmp(name, "vk" #n) == 0) return (PFN_vkVoidFunction)f_##n;
  F(CreateInstance) F(EnumerateInstanceVersion) F(EnumerateInstanceLayerProperties)
  F(EnumerateInstanceExtensionProperties) F(DestroyInstance) F(EnumeratePhysicalDevices)
  F(GetPhysicalDeviceProperties) F(GetPhysicalDeviceProperties2) F(GetPhysicalDeviceFeatures2)
  F(GetPhysicalDeviceQueueFamilyProperties) F(GetPhysicalDeviceMemoryProperties)
  F(GetPhysicalDeviceMemoryProperties2) F(EnumerateDeviceExtensionProperties) F(CreateDevice)
  F(GetDeviceProcAddr)
#undef F
  return NULL;
}
static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL f_GetDeviceProcAddr(VkDevice d, const char* name) {
  (void)d;
#define F(n) if (strcmp(name, "vk" #n) == 0) return (PFN_vkVoidFunction)f_##n;
  F(DestroyDevice) F(GetDeviceQueue) F(DeviceWaitIdle) F(QueueSubmit) F(CreateBuffer) F(DestroyBuffer)
  F(GetBufferMemoryRequirements) F(AllocateMemory) F(FreeMemory) F(BindBufferMemory) F(MapMemory)
  F(UnmapMemory) F(GetBufferDeviceAddress) F(CreateCommandPool) F(DestroyCommandPool)
  F(AllocateCommandBuffers) F(FreeCommandBuffers) F(BeginCommandBuffer) F(EndCommandBuffer)
  F(CreateSemaphore) F(DestroySemaphore) F(WaitSemaphores) F(SignalSemaphore)
  F(GetSemaphoreCounterValue) F(CmdCopyBuffer) F(CmdFillBuffer) F(CmdPipelineBarrier) F(CmdDispatch)
  F(CmdBindPipeline) F(CmdPushConstants) F(CmdWriteTimestamp) F(CmdResetQueryPool) F(CreateQueryPool)
  F(DestroyQueryPool) F(GetQueryPoolResults) F(CreateShaderModule) F(DestroyShaderModule)
  F(CreatePipelineLayout) F(DestroyPipelineLayout) F(CreateComputePipelines) F(DestroyPipeline)
  F(CreatePipelineCache) F(DestroyPipelineCache) F(CreateDescriptorSetLayout) F(DestroyDescriptorSetLayout)
  F(CreateBufferView) F(DestroyBufferView) F(CmdPushDescriptorSetKHR) F(GetPipelineCacheData)
  if (g_memfd) F(GetMemoryFdKHR)
  if (g_semfd) F(GetSemaphoreFdKHR)
  if (g_semfd) F(ImportSemaphoreFdKHR)
#undef F
  return NULL;
}

static void fake_reset(void) {
  g_npd = 0;
  g_fail_create_instance = g_cpu = g_fail_pipelines = g_memfd = g_semfd = 0;
  g_submits = g_dispatches = g_barriers = g_copies = g_allocs = 0;
  g_cache_init_size = -1;
}
static void add_pd(const char* name, int compute, int bda, uint64_t heap) {
  g_pds[g_npd++] = (fake_pd_t){name, compute, bda, heap};
}

/* ---- suballocator ------------------------------------------------------- */
static void test_ranges_alignment_and_coalescing(void** state) {
  (void)state;
  vk_ranges_t r;
  assert_int_equal(vk_ranges_init(&r, 1024), BP_OK);
  uint64_t a, b, c;
  assert_int_equal(vk_ranges_alloc(&r, 100, 1, &a), 0);
  assert_int_equal(a, 0);
  assert_int_equal(vk_ranges_alloc(&r, 10, 256, &b), 0);
  assert_int_equal(b, 256); /* aligned up; [100, 256) stays free */
  assert_int_equal(vk_ranges_alloc(&r, 50, 4, &c), 0);
  assert_int_equal(c, 100); /* first fit goes back to the gap */
  assert_int_equal(r.free_bytes, 1024 - 160);
  assert_int_equal(vk_ranges_free(&r, b, 10), 0);
  assert_int_equal(vk_ranges_free(&r, b, 10), -1); /* double free is refused */
  assert_int_equal(vk_ranges_free(&r, a, 100), 0);
  assert_int_equal(vk_ranges_free(&r, c, 50), 0);
  assert_int_equal(r.count, 1); /* everything merged back */
  assert_int_equal(vk_ranges_largest(&r), 1024);
  assert_int_equal(vk_ranges_alloc(&r, 2048, 1, &a), -1);
  assert_int_equal(vk_ranges_alloc(&r, 8, 3, &a), -1); /* alignment not a power of two */
  vk_ranges_fini(&r);
}

static void test_ranges_fragmentation(void** state) {
  (void)state;
  vk_ranges_t r;
  assert_int_equal(vk_ranges_init(&r, 64 * 100), BP_OK);
  uint64_t off[100];
  for (int i = 0; i < 100; i++) assert_int_equal(vk_ranges_alloc(&r, 64, 64, &off[i]), 0);
  for (int i = 0; i < 100; i += 2) assert_int_equal(vk_ranges_free(&r, off[i], 64), 0);
  assert_int_equal(r.free_bytes, 64 * 50);
  assert_int_equal(vk_ranges_largest(&r), 64); /* fragmented: no 128-byte hole */
  uint64_t x;
  assert_int_equal(vk_ranges_alloc(&r, 128, 64, &x), -1);
  assert_int_equal(vk_ranges_free(&r, off[1], 64), 0); /* joins holes 0..2 */
  assert_int_equal(vk_ranges_largest(&r), 192);
  assert_int_equal(vk_ranges_alloc(&r, 128, 64, &x), 0);
  assert_int_equal(x, 0);
  vk_ranges_fini(&r);
}

/* ---- device selection ----------------------------------------------------- */
static void test_device_selection(void** state) {
  (void)state;
  fake_reset();
  add_pd("graphics only", 0, 1, 1ull << 30);
  add_pd("no device address", 1, 0, 1ull << 30);
  add_pd("good gpu", 1, 1, 1ull << 30);
  struct bpp_instance_s* inst = NULL;
  assert_int_equal(vk_instance_create_with(f_GetInstanceProcAddr, NULL, &inst), BP_OK);
  assert_int_equal(inst->device_count, 1);
  assert_string_equal(inst->devices[0].props.name, "good gpu");
  assert_int_equal(inst->devices[0].props.kind, BP_DEVICE_KIND_GPU);
  assert_int_equal(inst->devices[0].props.subgroup_size, 32);
  assert_true(inst->devices[0].props.dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F64));
  assert_true(inst->devices[0].props.flags & BP_DEVICE_FLAG_TIMESTAMPS);
  vk_instance_destroy(inst);
}

static void test_no_usable_device_is_unavailable(void** state) {
  (void)state;
  fake_reset();
  add_pd("graphics only", 0, 1, 1ull << 30);
  add_pd("no device address", 1, 0, 1ull << 30);
  struct bpp_instance_s* inst = NULL;
  assert_int_equal(vk_instance_create_with(f_GetInstanceProcAddr, NULL, &inst), BP_UNAVAILABLE);
  assert_null(inst);
  assert_non_null(strstr(vk_last_error(), "graphics only: no queue family with VK_QUEUE_COMPUTE_BIT"));
  assert_non_null(strstr(vk_last_error(), "no device address: bufferDeviceAddress is required"));
  g_fail_create_instance = 1;
  add_pd("good gpu", 1, 1, 1ull << 30);
  assert_int_equal(vk_instance_create_with(f_GetInstanceProcAddr, NULL, &inst), BP_UNAVAILABLE);
  assert_non_null(strstr(vk_last_error(), "VK_ERROR_INCOMPATIBLE_DRIVER"));
}

/* ---- memory pools and budget --------------------------------------------- */
static struct bpp_device_s* open_fake_kind(const char* options, int cpu, struct bpp_instance_s** out_inst) {
  fake_reset();
  g_cpu = cpu;
  add_pd("fake", 1, 1, 1ull << 30);
  struct bpp_instance_s* inst = NULL;
  assert_int_equal(vk_instance_create_with(f_GetInstanceProcAddr, options, &inst), BP_OK);
  struct bpp_device_s* d = NULL;
  assert_int_equal(vk_device_open(inst, 0, &d), BP_OK);
  *out_inst = inst;
  return d;
}
static struct bpp_device_s* open_fake(const char* options, struct bpp_instance_s** out_inst) {
  return open_fake_kind(options, 0, out_inst);
}

static void test_pool_suballocates_and_respects_budget(void** state) {
  (void)state;
  struct bpp_instance_s* inst;
  struct bpp_device_s* d = open_fake("budget_mb=100", &inst);
  assert_int_equal(vk_pool_budget(&d->pool_device), 100ull << 20);
  struct bpp_buffer_s* b[8];
  for (int i = 0; i < 8; i++) assert_int_equal(vk_buffer_create(d, &d->pool_device, 1000, BP_MEMORY_DEVICE, &b[i]), BP_OK);
  assert_int_equal(g_allocs, 1); /* one 64 MiB block holds all eight */
  for (int i = 1; i < 8; i++) assert_ptr_equal(b[i]->alloc.block, b[0]->alloc.block);
  for (int i = 1; i < 8; i++) assert_int_equal(b[i]->alloc.offset % 256, 0);
  assert_true(d->pool_device.used_bytes >= 8000);
  /* A dedicated 30 MiB allocation fits beside the block; 40 more do not. */
  struct bpp_buffer_s *big = NULL, *huge = NULL;
  assert_int_equal(vk_buffer_create(d, &d->pool_device, 30ull << 20, BP_MEMORY_DEVICE, &big), BP_OK);
  assert_int_equal(g_allocs, 2);
  assert_int_equal(vk_buffer_create(d, &d->pool_device, 40ull << 20, BP_MEMORY_DEVICE, &huge), BP_RESOURCE_EXHAUSTED);
  assert_null(huge);
  assert_non_null(strstr(vk_last_error(), "cannot allocate 41943040 bytes"));
  assert_non_null(strstr(vk_last_error(), "available"));
  vk_buffer_destroy(big);
  for (int i = 0; i < 8; i++) vk_buffer_destroy(b[i]);
  assert_int_equal(g_live_allocs, 0); /* empty blocks go back */
  vk_instance_destroy(inst);
}

/* ---- external memory ---------------------------------------------------------- */
static bp_external_buffer_desc_t fd_desc(int64_t fd, uint64_t size) {
  return (bp_external_buffer_desc_t){.struct_size = sizeof(bp_external_buffer_desc_t),
                                     .kind = BP_EXTERNAL_OPAQUE_FD,
                                     .size_bytes = size,
                                     .fd = fd,
                                     .memory_space = VK_SPACE_EXPORT};
}

/* Without VK_KHR_external_memory_fd: two spaces, and both directions are
 * UNIMPLEMENTED naming the extension. */
static void test_external_memory_without_extension(void** state) {
  (void)state;
  struct bpp_instance_s* inst;
  struct bpp_device_s* d = open_fake(NULL, &inst);
  assert_int_equal(g_device_memfd_enabled, 0);
  const bpp_core_table_t* core = vk_plugin_vtable()->core;
  uint32_t count = 0;
  assert_int_equal(core->device_memory_spaces(d, 0, 0, NULL, &count), BP_OK);
  assert_int_equal(count, 2);
  struct bpp_buffer_s* b = NULL;
  assert_int_equal(vk_buffer_create(d, &d->pool_device, 1000, BP_MEMORY_DEVICE, &b), BP_OK);
  bp_external_buffer_desc_t e = {.struct_size = sizeof e, .kind = BP_EXTERNAL_OPAQUE_FD, .fd = -1};
  assert_int_equal(core->buffer_export(b, &e), BP_UNIMPLEMENTED);
  assert_non_null(strstr(vk_last_error(), "VK_KHR_external_memory_fd"));
  bp_external_buffer_desc_t i = fd_desc(5, 1000);
  bpp_buffer_t out = NULL;
  assert_int_equal(core->buffer_import(d, &i, &out), BP_UNIMPLEMENTED);
  assert_non_null(strstr(vk_last_error(), "VK_KHR_external_memory_fd"));
  assert_null(out);
  vk_buffer_destroy(b);
  vk_instance_destroy(inst);
}

/* With it: the extension is enabled, space 2 is EXPORTABLE with one
 * exportable allocation per buffer, export asks for an OPAQUE_FD of that
 * memory, import hands the fd to vkAllocateMemory at the exporter's size. */
static void test_external_memory_fd(void** state) {
  (void)state;
  fake_reset();
  g_memfd = 1;
  add_pd("fake", 1, 1, 1ull << 30);
  struct bpp_instance_s* inst = NULL;
  assert_int_equal(vk_instance_create_with(f_GetInstanceProcAddr, NULL, &inst), BP_OK);
  struct bpp_device_s* d = NULL;
  assert_int_equal(vk_device_open(inst, 0, &d), BP_OK);
  assert_int_equal(g_device_memfd_enabled, 1);
  const bpp_core_table_t* core = vk_plugin_vtable()->core;
  bp_memory_space_info_t spaces[3];
  uint32_t count = 0;
  assert_int_equal(core->device_memory_spaces(d, 3, sizeof spaces[0], spaces, &count), BP_OK);
  assert_int_equal(count, 3);
  assert_int_equal(spaces[2].kind, BP_MEMORY_DEVICE);
  assert_true(spaces[2].flags & BP_MEMORY_FLAG_EXPORTABLE);
  assert_false(spaces[0].flags & BP_MEMORY_FLAG_EXPORTABLE);

  bp_buffer_alloc_info_t ai = {.struct_size = sizeof ai, .memory_space = VK_SPACE_EXPORT, .size_bytes = 1000};
  bpp_buffer_t x = NULL, y = NULL;
  uint64_t before = g_allocs;
  assert_int_equal(core->buffer_allocate(d, &ai, &x), BP_OK);
  assert_int_equal(g_alloc_export, 1);
  assert_int_equal(g_buffer_external, 1);
  assert_int_equal(core->buffer_allocate(d, &ai, &y), BP_OK);
  assert_int_equal(g_allocs, before + 2); /* dedicated: never shares a block */
  bp_external_buffer_desc_t e = {.struct_size = sizeof e, .kind = BP_EXTERNAL_OPAQUE_FD, .fd = -1};
  assert_int_equal(core->buffer_export(x, &e), BP_OK);
  assert_int_equal(e.fd, 77);
  assert_int_equal(e.size_bytes, 1000);
  assert_int_equal(e.offset_bytes, 0);
  assert_ptr_equal(g_getfd_memory, x->alloc.block->mem);
  assert_int_equal(g_getfd_type, VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT);
  /* A suballocated buffer and other kinds are refused. */
  struct bpp_buffer_s* sub = NULL;
  assert_int_equal(vk_buffer_create(d, &d->pool_device, 1000, BP_MEMORY_DEVICE, &sub), BP_OK);
  assert_int_equal(g_alloc_export, 0);
  assert_int_equal(core->buffer_export(sub, &e), BP_FAILED_PRECONDITION);
  assert_non_null(strstr(vk_last_error(), "exportable memory space 2"));
  e.kind = BP_EXTERNAL_DLPACK;
  assert_int_equal(core->buffer_export(x, &e), BP_UNIMPLEMENTED);

  bp_external_buffer_desc_t i = fd_desc(42, 1000);
  bpp_buffer_t imp = NULL;
  assert_int_equal(core->buffer_import(d, &i, &imp), BP_OK);
  assert_int_equal(g_alloc_import_fd, 42);
  assert_int_equal(g_alloc_export, 0);
  assert_int_equal(g_alloc_size, 1024); /* the exporter's allocation size */
  assert_int_equal(g_buffer_external, 1);
  assert_int_equal(imp->size, 1000);
  bpp_buffer_t bad = NULL;
  i = fd_desc(-1, 1000);
  assert_int_equal(core->buffer_import(d, &i, &bad), BP_INVALID_ARGUMENT);
  i = fd_desc(42, 1000);
  i.offset_bytes = 256;
  assert_int_equal(core->buffer_import(d, &i, &bad), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(vk_last_error(), "offset 0"));
  i = fd_desc(42, 1000);
  i.memory_space = 0;
  assert_int_equal(core->buffer_import(d, &i, &bad), BP_INVALID_ARGUMENT);
  i = fd_desc(42, 1000);
  i.kind = BP_EXTERNAL_HOST_POINTER;
  assert_int_equal(core->buffer_import(d, &i, &bad), BP_UNIMPLEMENTED);
  assert_null(bad);
  core->buffer_release(imp);
  core->buffer_release(x);
  core->buffer_release(y);
  vk_buffer_destroy(sub);
  assert_int_equal(g_live_allocs, 0);
  vk_instance_destroy(inst);
}

/* Events as timeline semaphore fds: UNIMPLEMENTED naming the extension
 * without it; with it, exportable events get VkExportSemaphoreCreateInfo,
 * export and import pass the event's semaphore and the fd, an imported
 * event carries the exporter's value and cannot be recorded. */
static void test_external_semaphores(void** state) {
  (void)state;
  struct bpp_instance_s* inst;
  struct bpp_device_s* d = open_fake(NULL, &inst);
  const bpp_core_table_t* core = vk_plugin_vtable()->core;
  bp_event_create_info_t ci = {.struct_size = sizeof ci, .flags = BP_EVENT_EXPORTABLE};
  bpp_event_t ev = NULL;
  assert_int_equal(core->event_create(d, &ci, &ev), BP_UNIMPLEMENTED);
  assert_non_null(strstr(vk_last_error(), "VK_KHR_external_semaphore_fd"));
  bp_external_event_desc_t i = {.struct_size = sizeof i, .kind = BP_EXTERNAL_OPAQUE_FD, .fd = 9, .value = 3};
  assert_int_equal(core->event_import(d, &i, &ev), BP_UNIMPLEMENTED);
  assert_null(ev);
  vk_instance_destroy(inst);

  fake_reset();
  g_semfd = 1;
  add_pd("fake", 1, 1, 1ull << 30);
  assert_int_equal(vk_instance_create_with(f_GetInstanceProcAddr, NULL, &inst), BP_OK);
  assert_int_equal(vk_device_open(inst, 0, &d), BP_OK);
  assert_int_equal(core->event_create(d, &ci, &ev), BP_OK);
  assert_int_equal(g_sem_export, 1);
  bpp_stream_t s = NULL;
  bp_stream_create_info_t si = {.struct_size = sizeof si};
  assert_int_equal(core->stream_create(d, &si, &s), BP_OK);
  assert_int_equal(core->event_record(ev, s), BP_OK);
  bp_external_event_desc_t e = {.struct_size = sizeof e, .kind = BP_EXTERNAL_OPAQUE_FD, .fd = -1};
  assert_int_equal(core->event_export(ev, &e), BP_OK);
  assert_int_equal(e.fd, 88);
  assert_int_equal(e.value, 1); /* the first record signals 1 */
  assert_non_null(g_getsemfd_sem);
  e.kind = BP_EXTERNAL_SYNC_FD;
  assert_int_equal(core->event_export(ev, &e), BP_UNIMPLEMENTED);

  bpp_event_t imp = NULL;
  assert_int_equal(core->event_import(d, &i, &imp), BP_OK);
  assert_int_equal(g_semfd_imported, 9);
  assert_int_equal(g_sem_export, 0);
  assert_non_null(g_importsem_sem);
  assert_int_equal(core->event_record(imp, s), BP_FAILED_PRECONDITION);
  assert_int_equal(core->stream_wait_event(s, imp), BP_OK);
  i.fd = -1;
  bpp_event_t bad = NULL;
  assert_int_equal(core->event_import(d, &i, &bad), BP_INVALID_ARGUMENT);
  assert_null(bad);
  assert_int_equal(core->stream_synchronize(s), BP_OK);
  core->stream_destroy(s);
  core->event_destroy(imp);
  core->event_destroy(ev);
  vk_instance_destroy(inst);
}

/* ---- streams: staging and batching --------------------------------------- */
static int g_host_calls;
static bp_status_t host_fn(void* user) {
  g_host_calls += *(int*)user;
  return BP_OK;
}
static const bp_stream_create_info_t k_stream_info = {.struct_size = sizeof(bp_stream_create_info_t)};
static const bp_event_create_info_t k_event_info = {.struct_size = sizeof(bp_event_create_info_t)};

static void test_staging_roundtrip_and_batching(void** state) {
  (void)state;
  struct bpp_instance_s* inst;
  struct bpp_device_s* d = open_fake("flush=4", &inst);
  assert_int_equal(d->pool_device.host_visible, 0); /* type 0 is device-only: staging */
  bpp_stream_t s = NULL;
  assert_int_equal(vk_stream_create(d, &k_stream_info, &s), BP_OK);
  struct bpp_buffer_s* b = NULL;
  assert_int_equal(vk_buffer_create(d, &d->pool_device, 4096, BP_MEMORY_DEVICE, &b), BP_OK);
  unsigned char src[4096], dst[4096];
  for (int i = 0; i < 4096; i++) src[i] = (unsigned char)(i * 7);
  memset(dst, 0, sizeof dst);
  g_submits = 0;
  /* Three uploads stay in one batch (threshold 4). */
  assert_int_equal(vk_copy_h2d(s, src, b, 0, 1024), BP_OK);
  assert_int_equal(vk_copy_h2d(s, src + 1024, b, 1024, 1024), BP_OK);
  assert_int_equal(vk_copy_h2d(s, src + 2048, b, 2048, 2048), BP_OK);
  assert_int_equal(g_submits, 0);
  /* The read-back goes through staging and ends the batch. */
  assert_int_equal(vk_copy_d2h(s, b, 0, dst, 4096), BP_OK);
  assert_int_equal(g_submits, 1);
  assert_int_equal(vk_stream_synchronize(s), BP_OK);
  assert_memory_equal(src, dst, 4096);
  /* Overlapping copies within a batch get a barrier; disjoint ones do not. */
  uint64_t bar0 = s->barriers;
  assert_int_equal(vk_copy_d2d(s, b, 0, b, 2048, 512), BP_OK);
  assert_int_equal(vk_copy_d2d(s, b, 1024, b, 3072, 512), BP_OK);
  assert_int_equal(s->barriers, bar0);
  assert_int_equal(vk_copy_d2d(s, b, 2048, b, 0, 256), BP_OK); /* reads what the first wrote */
  assert_int_equal(s->barriers, bar0 + 1);
  /* The fourth command reaches the threshold: submitted without a sync. */
  uint64_t sub0 = g_submits;
  assert_int_equal(vk_copy_d2d(s, b, 3000, b, 3500, 16), BP_OK);
  assert_int_equal(g_submits, sub0 + 1);
  /* Host functions run after the work before them, in order. */
  int one = 1, ten = 10;
  g_host_calls = 0;
  assert_int_equal(vk_stream_host_func(s, host_fn, &one), BP_OK);
  assert_int_equal(vk_stream_host_func(s, host_fn, &ten), BP_OK);
  assert_int_equal(vk_stream_synchronize(s), BP_OK);
  assert_int_equal(g_host_calls, 11);
  /* Event record submits; a wait on another stream adds a semaphore wait. */
  bpp_event_t e = NULL;
  bpp_stream_t s2 = NULL;
  assert_int_equal(vk_event_create(d, &k_event_info, &e), BP_OK);
  assert_int_equal(vk_stream_create(d, &k_stream_info, &s2), BP_OK);
  sub0 = g_submits;
  assert_int_equal(vk_event_record(e, s), BP_OK);
  assert_int_equal(g_submits, sub0 + 1);
  assert_int_equal(vk_event_query(e), BP_OK);
  assert_int_equal(vk_stream_wait_event(s2, e), BP_OK);
  assert_int_equal(s2->num_waits, 1);
  assert_int_equal(vk_stream_synchronize(s2), BP_OK);
  /* Out-of-range copies are refused before anything is recorded. */
  assert_int_equal(vk_copy_h2d(s, src, b, 4000, 200), BP_OUT_OF_RANGE);
  vk_event_destroy(e);
  vk_stream_destroy(s2);
  vk_stream_destroy(s);
  vk_buffer_destroy(b);
  vk_instance_destroy(inst);
}

/* ---- kernels: the CPU devices' matmul --------------------------------------- */
/* A dense row-major f32 [r, c] in a buffer of its own. */
static bp_tensor_desc_t f32_matrix(struct bpp_device_s* d, int64_t r, int64_t c, struct bpp_buffer_s** b) {
  assert_int_equal(vk_buffer_create(d, &d->pool_device, (uint64_t)(r * c * 4), BP_MEMORY_DEVICE, b), BP_OK);
  bp_tensor_desc_t t = {.struct_size = sizeof t, .dtype = BP_DTYPE_F32, .rank = 2, .buffer = *b};
  t.sizes[0] = r;
  t.sizes[1] = c;
  t.strides[0] = c;
  t.strides[1] = 1;
  return t;
}

/* With K % 4 != 0 both operands are packed before the register-blocked
 * kernel runs; a kernel pipeline that fails to build must leave nothing
 * recorded, packs included. */
static void test_matmul_pipeline_failure_records_nothing(void** state) {
  (void)state;
  struct bpp_instance_s* inst;
  struct bpp_device_s* d = open_fake_kind(NULL, 1, &inst);
  assert_true(d->feat.cpu);
  assert_true(vk_pipeline_has_push_descriptors(d));
  bpp_stream_t s = NULL;
  assert_int_equal(vk_stream_create(d, &k_stream_info, &s), BP_OK);
  struct bpp_buffer_s *ba, *bb, *bc;
  bp_tensor_desc_t in[3], out = f32_matrix(d, 8, 8, &bc);
  in[0] = (bp_tensor_desc_t){.struct_size = sizeof in[0], .dtype = BP_DTYPE_INVALID}; /* addmm's absent bias */
  in[1] = f32_matrix(d, 8, 6, &ba);
  in[2] = f32_matrix(d, 6, 8, &bb);
  const bp_tensor_desc_t* in_ptr[3] = {&in[0], &in[1], &in[2]};
  const bp_tensor_desc_t* out_ptr = &out;
  bp_op_call_t mm = {.struct_size = sizeof mm, .op_id = BP_OP_mm, .num_inputs = 2, .num_outputs = 1,
                     .inputs = &in_ptr[1], .outputs = &out_ptr};
  g_dispatches = 0;
  assert_int_equal(vk_launch_op(s, &mm), BP_OK);
  assert_int_equal(g_dispatches, 3); /* pack A, pack B, multiply */
  /* addmm with alpha 2 takes another kernel pipeline; the packs' are built. */
  bp_addmm_attrs_t at = {.struct_size = sizeof at, .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 2.0}};
  bp_op_call_t addmm = {.struct_size = sizeof addmm, .op_id = BP_OP_addmm, .num_inputs = 3, .num_outputs = 1,
                        .inputs = in_ptr, .outputs = &out_ptr, .attrs = &at};
  g_fail_pipelines = 1;
  assert_int_equal(vk_launch_op(s, &addmm), BP_RESOURCE_EXHAUSTED);
  assert_int_equal(g_dispatches, 3);
  g_fail_pipelines = 0;
  assert_int_equal(vk_launch_op(s, &addmm), BP_OK);
  assert_int_equal(g_dispatches, 6);
  assert_int_equal(vk_stream_synchronize(s), BP_OK);
  vk_stream_destroy(s);
  vk_buffer_destroy(ba);
  vk_buffer_destroy(bb);
  vk_buffer_destroy(bc);
  vk_instance_destroy(inst);
}

/* ---- tiered specialization of elementwise programs -------------------------- */
/* `add` of two dense f32 [4, 8] tensors, launched `times` times. */
static void launch_adds(bpp_stream_t s, struct bpp_device_s* d, int times) {
  struct bpp_buffer_s *ba, *bb, *bc;
  bp_tensor_desc_t a = f32_matrix(d, 4, 8, &ba), b = f32_matrix(d, 4, 8, &bb), c = f32_matrix(d, 4, 8, &bc);
  const bp_tensor_desc_t* in[2] = {&a, &b};
  const bp_tensor_desc_t* out = &c;
  bp_binary_attrs_t at = {.struct_size = sizeof at, .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 1.0}};
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = BP_OP_add, .num_inputs = 2, .num_outputs = 1,
                       .compute_dtype = BP_DTYPE_F32, .inputs = in, .outputs = &out, .attrs = &at};
  for (int k = 0; k < times; k++) assert_int_equal(vk_launch_op(s, &call), BP_OK);
  assert_int_equal(vk_stream_synchronize(s), BP_OK);
  vk_buffer_destroy(ba);
  vk_buffer_destroy(bb);
  vk_buffer_destroy(bc);
}

/* The first launches of a program shape take the generic pipeline; the
 * launch after specialize_after compiles the specialized one, which every
 * later launch reuses; specialize_after=0 specializes at once. */
static void test_elementwise_specialization_is_tiered(void** state) {
  (void)state;
  struct bpp_instance_s* inst;
  struct bpp_device_s* d = open_fake_kind("specialize_after=2", 1, &inst);
  bpp_stream_t s = NULL;
  assert_int_equal(vk_stream_create(d, &k_stream_info, &s), BP_OK);
  g_pipelines_created = 0;
  g_dispatches = 0;
  launch_adds(s, d, 2);
  assert_int_equal(g_dispatches, 2);
  assert_int_equal(g_pipelines_created, 1);
  assert_int_equal(g_last_spec0, 0); /* generic: the program comes from the metadata */
  launch_adds(s, d, 1);                /* the third launch of the shape */
  assert_int_equal(g_pipelines_created, 2);
  assert_int_equal(g_last_spec0, 4); /* load, load, add, store: compiled in */
  launch_adds(s, d, 3);
  assert_int_equal(g_pipelines_created, 2);
  assert_int_equal(g_dispatches, 6);
  vk_stream_destroy(s);
  vk_instance_destroy(inst);

  d = open_fake_kind("specialize_after=0", 1, &inst);
  assert_int_equal(vk_stream_create(d, &k_stream_info, &s), BP_OK);
  g_pipelines_created = 0;
  launch_adds(s, d, 2);
  assert_int_equal(g_pipelines_created, 1);
  assert_int_equal(g_last_spec0, 4);
  vk_stream_destroy(s);
  vk_instance_destroy(inst);
}

/* ---- the pipeline-cache file --------------------------------------------- */
static int g_warnings;
static char g_last_warning[1024];
static void capture_log(void* ctx, int32_t level, const char* message) {
  (void)ctx;
  if (level != BP_LOG_WARN) return;
  g_warnings++;
  snprintf(g_last_warning, sizeof g_last_warning, "%s", message);
}
static const bp_host_services_t k_log_host = {.struct_size = sizeof k_log_host, .log = capture_log};

/* The plugin's log lines reach capture_log from here on (counters reset). */
static void capture_logs(void) {
  static const bp_kit_plugin_info_t info = {.name = "vulkan", .version = VK_PLUGIN_VERSION,
                                            .vendor = "backplane", .get_vtable = vk_plugin_vtable};
  bp_negotiate_request_t req = {.struct_size = sizeof req, .abi_major = BP_ABI_VERSION_MAJOR,
                                .abi_minor = BP_ABI_VERSION_MINOR, .host = &k_log_host};
  bp_negotiate_reply_t reply;
  memset(&reply, 0, sizeof reply);
  reply.struct_size = sizeof reply;
  assert_int_equal(bp_kit_negotiate(&info, &req, &reply), BP_OK);
  g_warnings = 0;
  g_last_warning[0] = 0;
}

static void write_bytes(const char* path, const void* data, size_t n) {
  FILE* f = fopen(path, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, n, f), n);
  assert_int_equal(fclose(f), 0);
}

/* The file's size, its first bytes into out[cap]; -1 when absent. */
static long read_bytes(const char* path, unsigned char* out, size_t cap) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  long n = (long)fread(out, 1, cap, f);
  fclose(f);
  return n;
}

static vk_cache_ids_t fake_ids(void) {
  vk_cache_ids_t ids = {.vendor_id = FAKE_VENDOR, .device_id = FAKE_DEVICE, .driver_version = g_driver_version};
  memcpy(ids.uuid, g_cache_uuid, VK_UUID_SIZE);
  return ids;
}

/* Bad cache contents: a good file with one thing broken. */
typedef struct bad_cache {
  const char* name;
  size_t size;       /* bytes kept of the good file (0: all) */
  size_t at;         /* byte changed, when `to` is nonzero */
  unsigned char to;
  const char* why;   /* in the reason given */
} bad_cache_t;
static const bad_cache_t k_bad[] = {
    {"empty", 1, 0, 0, "truncated"}, /* size 1 -> kept 0 below */
    {"truncated header", 31, 0, 0, "truncated"},
    {"header length 16", 0, 0, 16, "bytes long"},
    {"header length 64", 0, 0, 64, "bytes long"},
    {"header version 2", 0, 4, 2, "version"},
    {"another vendor", 0, 8, 0x99, "vendor"},
    {"another device", 0, 12, 0x99, "device"},
    {"another UUID", 0, 31, 0x77, "pipelineCacheUUID"},
    {"garbage", 0, 0, 0, "bytes long"},
};

/* k_bad[i] as bytes; returns the size. */
static size_t bad_bytes(size_t i, unsigned char* buf) {
  size_t n = fake_cache_data(buf);
  const bad_cache_t* b = &k_bad[i];
  if (strcmp(b->name, "garbage") == 0) {
    uint32_t x = 12345;
    for (size_t k = 0; k < n; k++) buf[k] = (unsigned char)((x = x * 1103515245u + 12345u) >> 24);
    buf[0] = 0xEE; /* no chance of a valid length */
  }
  if (strcmp(b->name, "empty") == 0) return 0;
  if (b->size) n = b->size;
  if (b->to) buf[b->at] = b->to;
  return n;
}

static void test_pipeline_cache_header_check(void** state) {
  (void)state;
  vk_cache_ids_t ids = fake_ids();
  unsigned char buf[64];
  char why[200];
  size_t n = fake_cache_data(buf);
  assert_int_equal(vk_pipeline_file_check(buf, n, &ids, why, sizeof why), 1);
  assert_int_equal(vk_pipeline_file_check(buf, 32, &ids, why, sizeof why), 1); /* header alone */
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
    size_t m = bad_bytes(i, buf);
    why[0] = 0;
    assert_int_equal(vk_pipeline_file_check(buf, m, &ids, why, sizeof why), 0);
    if (!strstr(why, k_bad[i].why)) fail_msg("%s: reason '%s' does not say '%s'", k_bad[i].name, why, k_bad[i].why);
  }
  assert_int_equal(vk_pipeline_file_check(NULL, 100, &ids, why, sizeof why), 0);
}

/* A temporary folder for one test (removed by remove_tree). */
static void make_temp_dir(char* dir, size_t cap) {
  snprintf(dir, cap, "/tmp/bp-vkcache-XXXXXX");
  assert_non_null(mkdtemp(dir));
}
static void remove_tree(const char* dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* Corrupt or foreign files are never handed to the driver: one warning,
 * an empty cache, and the file rewritten when the device closes; a good
 * file is handed over as it is. */
static void test_pipeline_cache_file_validated(void** state) {
  (void)state;
  char dir[64], path[128], options[200];
  make_temp_dir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/cache.bin", dir);
  snprintf(options, sizeof options, "pipeline_cache=%s", path);
  unsetenv("BP_VULKAN_PIPELINE_CACHE");
  unsigned char buf[64], back[128];
  vk_cache_ids_t ids = fake_ids();
  char why[200];
  for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
    write_bytes(path, buf, bad_bytes(i, buf));
    capture_logs();
    struct bpp_instance_s* inst;
    struct bpp_device_s* d = open_fake(options, &inst);
    assert_string_equal(vk_pipeline_cache_path(d), path);
    if (g_cache_init_size != 0) fail_msg("%s: %lld bytes handed to the driver", k_bad[i].name, (long long)g_cache_init_size);
    assert_int_equal(g_warnings, 1);
    assert_non_null(strstr(g_last_warning, "ignored"));
    assert_non_null(strstr(g_last_warning, path));
    assert_non_null(strstr(g_last_warning, k_bad[i].why));
    vk_instance_destroy(inst);
    assert_int_equal(g_warnings, 1);
    long n = read_bytes(path, back, sizeof back); /* rewritten with the driver's data */
    assert_int_equal(n, 40);
    assert_int_equal(vk_pipeline_file_check(back, (size_t)n, &ids, why, sizeof why), 1);
  }
  /* The good file (as just rewritten) goes to vkCreatePipelineCache whole. */
  capture_logs();
  struct bpp_instance_s* inst;
  (void)open_fake(options, &inst);
  assert_int_equal(g_cache_init_size, 40);
  assert_memory_equal(g_cache_init, back, 40);
  assert_memory_equal(g_cache_init + 32, FAKE_PAYLOAD, 8);
  assert_int_equal(g_warnings, 0);
  vk_instance_destroy(inst);
  setenv("BP_VULKAN_PIPELINE_CACHE", "", 1);
  remove_tree(dir);
}

static void expect_mode_0700(const char* path) {
  struct stat st;
  assert_int_equal(stat(path, &st), 0);
  assert_true(S_ISDIR(st.st_mode));
  assert_int_equal(st.st_mode & 0777, 0700);
}

/* Without a setting the cache file is in $XDG_CACHE_HOME/backplane/ (else
 * ~/.cache/backplane/), created 0700, named by vendor, device, driver
 * version, UUID and plugin version: a second process starts warm, a driver
 * update starts from another file. Empty variable or "off": no file. */
static void test_pipeline_cache_default_location(void** state) {
  (void)state;
  char dir[64], xdg[128], expect[400], path[400];
  make_temp_dir(dir, sizeof dir);
  snprintf(xdg, sizeof xdg, "%s/xdg", dir); /* not there yet */
  unsetenv("BP_VULKAN_PIPELINE_CACHE");
  setenv("XDG_CACHE_HOME", xdg, 1);
  snprintf(expect, sizeof expect,
           "%s/backplane/vulkan-1234-5678-01020003-cafe0102030405060708090a0b0c0d0e-" VK_PLUGIN_VERSION ".bin", xdg);
  capture_logs();
  struct bpp_instance_s* inst;
  struct bpp_device_s* d = open_fake(NULL, &inst);
  assert_string_equal(vk_pipeline_cache_path(d), expect);
  assert_int_equal(g_cache_init_size, 0); /* cold */
  snprintf(path, sizeof path, "%s/backplane", xdg);
  expect_mode_0700(path);
  VkPipeline pipe;
  assert_int_equal(vk_pipeline_get(d, VK_SHADER_fill, NULL, 0, &pipe), BP_OK); /* something compiled */
  vk_instance_destroy(inst);
  unsigned char back[128];
  assert_int_equal(read_bytes(expect, back, sizeof back), 40);
  (void)open_fake(NULL, &inst); /* warm */
  assert_int_equal(g_cache_init_size, 40);
  vk_instance_destroy(inst);
  /* A driver update: another file, the old one never read. */
  g_driver_version = 0x01020004u;
  d = open_fake(NULL, &inst);
  assert_non_null(strstr(vk_pipeline_cache_path(d), "-01020004-"));
  assert_int_equal(g_cache_init_size, 0);
  vk_instance_destroy(inst);
  g_driver_version = 0x01020003u;
  assert_int_equal(g_warnings, 0);
  /* No XDG_CACHE_HOME: ~/.cache/backplane, .cache created too. */
  char home[128];
  snprintf(home, sizeof home, "%s/home", dir);
  assert_int_equal(mkdir(home, 0755), 0);
  const char* old_home = getenv("HOME");
  char saved_home[512];
  snprintf(saved_home, sizeof saved_home, "%s", old_home ? old_home : "");
  unsetenv("XDG_CACHE_HOME");
  setenv("HOME", home, 1);
  d = open_fake(NULL, &inst);
  snprintf(path, sizeof path, "%s/.cache/backplane/vulkan-", home);
  assert_memory_equal(vk_pipeline_cache_path(d), path, strlen(path));
  vk_instance_destroy(inst);
  snprintf(path, sizeof path, "%s/.cache", home);
  expect_mode_0700(path);
  /* Off: nothing read, written or created. */
  char off[128];
  snprintf(off, sizeof off, "%s/off", dir);
  setenv("XDG_CACHE_HOME", off, 1);
  setenv("BP_VULKAN_PIPELINE_CACHE", "", 1);
  d = open_fake(NULL, &inst);
  assert_string_equal(vk_pipeline_cache_path(d), "");
  assert_int_equal(g_cache_init_size, 0);
  assert_int_equal(vk_pipeline_get(d, VK_SHADER_fill, NULL, 0, &pipe), BP_OK);
  vk_instance_destroy(inst);
  unsetenv("BP_VULKAN_PIPELINE_CACHE");
  d = open_fake("pipeline_cache=off", &inst);
  assert_string_equal(vk_pipeline_cache_path(d), "");
  assert_int_equal(vk_pipeline_get(d, VK_SHADER_fill, NULL, 0, &pipe), BP_OK);
  vk_instance_destroy(inst);
  struct stat st;
  assert_int_not_equal(stat(off, &st), 0);
  assert_int_equal(g_warnings, 0);
  if (saved_home[0]) setenv("HOME", saved_home, 1);
  else unsetenv("HOME");
  setenv("BP_VULKAN_PIPELINE_CACHE", "", 1);
  remove_tree(dir);
}

int main(void) {
  /* The fake table has no layers: a validation request from the
   * environment (set for the real-driver tests) would fail every open. */
  unsetenv("BP_VULKAN_VALIDATION");
  /* No cache file unless a test asks for one: run outside ctest, this binary
   * must not write to the user's home either. */
  setenv("BP_VULKAN_PIPELINE_CACHE", "", 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ranges_alignment_and_coalescing),
      cmocka_unit_test(test_ranges_fragmentation),
      cmocka_unit_test(test_device_selection),
      cmocka_unit_test(test_no_usable_device_is_unavailable),
      cmocka_unit_test(test_pool_suballocates_and_respects_budget),
      cmocka_unit_test(test_external_memory_without_extension),
      cmocka_unit_test(test_external_memory_fd),
      cmocka_unit_test(test_external_semaphores),
      cmocka_unit_test(test_staging_roundtrip_and_batching),
      cmocka_unit_test(test_matmul_pipeline_failure_records_nothing),
      cmocka_unit_test(test_elementwise_specialization_is_tiered),
      cmocka_unit_test(test_pipeline_cache_header_check),
      cmocka_unit_test(test_pipeline_cache_file_validated),
      cmocka_unit_test(test_pipeline_cache_default_location),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
