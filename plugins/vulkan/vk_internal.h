/* backplane Vulkan plugin: internal declarations shared by its sources.
 *
 * Objects and their threading:
 *  - instance: owns the loader handle (dlopen'd libvulkan.so.1), the
 *    VkInstance and one vk_device per usable physical device. Immutable
 *    after creation except the lazily created VkDevice (under `lock`).
 *  - device: VkDevice, its compute queues (each behind a mutex: vkQueueSubmit
 *    needs the queue externally synchronized), two memory pools (device-local
 *    and host-visible), the pipeline cache. Thread-safe.
 *  - stream: one queue (round-robin over the family's queues), one command
 *    pool, one timeline semaphore, one completion thread. Enqueue calls are
 *    externally synchronized (the ABI's rule); the completion thread shares
 *    only the pending/free lists and counters, under `mu`.
 *  - event: its own timeline semaphore (so it outlives the stream it was
 *    recorded on) and an optional timestamp query.
 */
#ifndef BP_VK_INTERNAL_H_
#define BP_VK_INTERNAL_H_

#define VK_NO_PROTOTYPES 1
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "backplane/plugin.h"
#include "bp_gpu_heap.h"
#include "bp_kit.h"

#define VK_HIDDEN __attribute__((visibility("hidden")))
#define VK_MSG_CAP 256

/* ------------------------------------------------------------------------ */
/* The dispatch table: every Vulkan entry point the plugin calls. It is     */
/* filled through vkGetInstanceProcAddr / vkGetDeviceProcAddr (the kit's    */
/* symbol tables, bp_kit_dynlib.h), or by tests with fakes                  */
/* (vk_instance_create_with).                                               */
/* ------------------------------------------------------------------------ */
#define VK_GLOBAL_FUNCS(X)                                                     \
  X(vkCreateInstance) X(vkEnumerateInstanceLayerProperties)                    \
  X(vkEnumerateInstanceExtensionProperties)
/* Optional global functions (Vulkan 1.1 loaders and later). */
#define VK_GLOBAL_OPT_FUNCS(X) X(vkEnumerateInstanceVersion)
#define VK_INSTANCE_FUNCS(X)                                                   \
  X(vkDestroyInstance) X(vkEnumeratePhysicalDevices)                           \
  X(vkGetPhysicalDeviceProperties) X(vkGetPhysicalDeviceProperties2)           \
  X(vkGetPhysicalDeviceFeatures2) X(vkGetPhysicalDeviceQueueFamilyProperties)  \
  X(vkGetPhysicalDeviceMemoryProperties) X(vkGetPhysicalDeviceMemoryProperties2) \
  X(vkEnumerateDeviceExtensionProperties) X(vkCreateDevice) X(vkGetDeviceProcAddr)
/* Optional instance functions (VK_EXT_debug_utils). */
#define VK_INSTANCE_OPT_FUNCS(X) X(vkCreateDebugUtilsMessengerEXT) X(vkDestroyDebugUtilsMessengerEXT)
#define VK_DEVICE_FUNCS(X)                                                      \
  X(vkDestroyDevice) X(vkGetDeviceQueue) X(vkDeviceWaitIdle) X(vkQueueSubmit)   \
  X(vkCreateBuffer) X(vkDestroyBuffer) X(vkGetBufferMemoryRequirements)         \
  X(vkAllocateMemory) X(vkFreeMemory) X(vkBindBufferMemory) X(vkMapMemory)      \
  X(vkUnmapMemory) X(vkGetBufferDeviceAddress) X(vkCreateCommandPool)           \
  X(vkDestroyCommandPool) X(vkAllocateCommandBuffers) X(vkFreeCommandBuffers)   \
  X(vkBeginCommandBuffer) X(vkEndCommandBuffer) X(vkCreateSemaphore)            \
  X(vkDestroySemaphore) X(vkWaitSemaphores) X(vkSignalSemaphore)                \
  X(vkGetSemaphoreCounterValue) X(vkCmdCopyBuffer) X(vkCmdFillBuffer)           \
  X(vkCmdPipelineBarrier) X(vkCmdDispatch) X(vkCmdBindPipeline)                 \
  X(vkCmdPushConstants) X(vkCmdWriteTimestamp) X(vkCmdResetQueryPool)           \
  X(vkCreateQueryPool) X(vkDestroyQueryPool) X(vkGetQueryPoolResults)           \
  X(vkCreateShaderModule) X(vkDestroyShaderModule) X(vkCreatePipelineLayout)    \
  X(vkDestroyPipelineLayout) X(vkCreateComputePipelines) X(vkDestroyPipeline)   \
  X(vkCreatePipelineCache) X(vkDestroyPipelineCache)
/* Optional device functions (VK_KHR_push_descriptor, pipeline-cache data):
 * NULL when the device or a fake driver lacks them. */
#define VK_DEVICE_OPT_FUNCS(X)                                                  \
  X(vkCreateDescriptorSetLayout) X(vkDestroyDescriptorSetLayout)                \
  X(vkCmdPushDescriptorSetKHR) X(vkGetPipelineCacheData) X(vkCreateBufferView)   \
  X(vkDestroyBufferView) X(vkGetMemoryFdKHR) X(vkGetSemaphoreFdKHR) X(vkImportSemaphoreFdKHR)

typedef struct vk_dispatch {
  PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
#define VK__MEMBER(f) PFN_##f f;
  VK_GLOBAL_FUNCS(VK__MEMBER)
  VK_GLOBAL_OPT_FUNCS(VK__MEMBER)
  VK_INSTANCE_FUNCS(VK__MEMBER)
  VK_INSTANCE_OPT_FUNCS(VK__MEMBER)
  VK_DEVICE_FUNCS(VK__MEMBER)
  VK_DEVICE_OPT_FUNCS(VK__MEMBER)
#undef VK__MEMBER
} vk_dispatch_t;

/* Resolves the global functions through d->vkGetInstanceProcAddr (NULL
 * instance). Writes the first missing name into msg. */
VK_HIDDEN bp_status_t vk_dispatch_load_global(vk_dispatch_t* d, char* msg, size_t cap);
VK_HIDDEN bp_status_t vk_dispatch_load_instance(vk_dispatch_t* d, VkInstance inst, char* msg,
                                                size_t cap);
VK_HIDDEN bp_status_t vk_dispatch_load_device(vk_dispatch_t* d, VkDevice dev, char* msg,
                                              size_t cap);
/* "VK_ERROR_OUT_OF_DEVICE_MEMORY (-2)" */
VK_HIDDEN const char* vk_result_name(VkResult r);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */
/* The plugin kit's (bp_kit_plugin.h): vk_error formats the message,
 * reports it to the host (unless the calling thread is a completion
 * thread) and returns `status`; vk_log sends a log line. */
#define vk_error(...) bp_kit_error(__VA_ARGS__)
#define vk_log(...) bp_kit_log(__VA_ARGS__)
#define vk_last_error() bp_plugin_last_error()
/* Maps a VkResult to a status: OUT_OF_*_MEMORY -> RESOURCE_EXHAUSTED,
 * DEVICE_LOST -> DEVICE_LOST, others INTERNAL. */
VK_HIDDEN bp_status_t vk_status_of(VkResult r);

/* ------------------------------------------------------------------------ */
/* Suballocator: first-fit over free ranges of one block, coalescing on     */
/* free. Pure logic (no Vulkan), unit-tested directly. Not thread-safe: the */
/* pool's lock guards it.                                                   */
/* ------------------------------------------------------------------------ */
/* A block's free ranges: gpu_common's range set (bp_gpu_heap.h). */
typedef bp_gpu_ranges_t vk_ranges_t;

static inline bp_status_t vk_ranges_init(vk_ranges_t* r, uint64_t total) { return bp_gpu_ranges_init(r, total); }
static inline void vk_ranges_fini(vk_ranges_t* r) { bp_gpu_ranges_fini(r); }
/* First fit of `size` bytes at a multiple of `align` (power of two).
 * Returns 0 and the offset, or -1 when no free range fits. */
static inline int vk_ranges_alloc(vk_ranges_t* r, uint64_t size, uint64_t align, uint64_t* out_off) {
  return bp_gpu_ranges_alloc(r, size, align, out_off);
}
/* Returns [off, off+size) to the free list (merging neighbours). -1 when
 * the range was not allocated (overlaps a free range), -2 when allocating
 * the list entry failed. */
static inline int vk_ranges_free(vk_ranges_t* r, uint64_t off, uint64_t size) {
  return bp_gpu_ranges_free(r, off, size);
}
/* Largest free range (fragmentation reports). */
static inline uint64_t vk_ranges_largest(const vk_ranges_t* r) { return bp_gpu_ranges_largest(r); }

/* ------------------------------------------------------------------------ */
/* Memory pools                                                              */
/* ------------------------------------------------------------------------ */
#define VK_BLOCK_SIZE (64ull << 20)   /* suballocated blocks */
#define VK_DEDICATED_MIN (16ull << 20) /* buffers from this size get their own memory */

struct bpp_device_s;

typedef struct vk_block {
  VkDeviceMemory mem;
  uint64_t size;
  unsigned char* map; /* persistently mapped when host visible */
  vk_ranges_t ranges; /* unused for dedicated blocks */
  int dedicated;
  uint32_t live; /* allocations in the block */
  struct vk_block* next;
} vk_block_t;

typedef struct vk_pool {
  pthread_mutex_t lock;
  struct bpp_device_s* dev;
  uint32_t type_index;
  uint32_t heap_index;
  uint32_t host_visible, host_coherent, device_local;
  /* Every allocation dedicated and exportable as an opaque fd
   * (VkExportMemoryAllocateInfo), so an fd carries exactly one buffer. */
  int exportable;
  uint64_t block_size;
  vk_block_t* blocks;
  uint64_t reserved_bytes; /* VkDeviceMemory allocated from the heap */
  uint64_t used_bytes;     /* handed out to buffers */
} vk_pool_t;

typedef struct vk_alloc {
  vk_block_t* block;
  uint64_t offset, size;
} vk_alloc_t;

/* Allocates `size` bytes with `align` from the pool: from a block with room,
 * a new block, or dedicated memory for large sizes. Respects the budget:
 * RESOURCE_EXHAUSTED with the requested and available bytes. */
VK_HIDDEN bp_status_t vk_pool_alloc(vk_pool_t* p, uint64_t size, uint64_t align, vk_alloc_t* out);
/* A dedicated allocation of `size` bytes imported from an opaque fd
 * (VkImportMemoryFdInfoKHR); the driver owns the fd on success only. */
VK_HIDDEN bp_status_t vk_pool_import(vk_pool_t* p, uint64_t size, int fd, vk_alloc_t* out);
VK_HIDDEN void vk_pool_free(vk_pool_t* p, const vk_alloc_t* a);
VK_HIDDEN void vk_pool_fini(vk_pool_t* p);
/* Bytes the pool may still take from its heap (budget minus use). Both
 * read the pool's counters: call with p->lock held. */
VK_HIDDEN uint64_t vk_pool_available(vk_pool_t* p);
VK_HIDDEN uint64_t vk_pool_budget(vk_pool_t* p);

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */
typedef struct vk_options {
  int force_staging;  /* treat device memory as not host-visible */
  int validation;     /* enable VK_LAYER_KHRONOS_validation + messenger */
  uint64_t budget_limit; /* bytes; 0 = the heap's budget */
  uint32_t flush_threshold; /* commands per batch before a submit */
  char pipeline_cache[512]; /* file the VkPipelineCache is loaded from and saved to; "" = the default */
  int pipeline_cache_off;   /* BP_VULKAN_PIPELINE_CACHE= (empty) or pipeline_cache=off */
  /* Launches of one specialization key served by the generic pipeline
   * before the specialized one is compiled (vk_pipeline_get_hot). */
  uint32_t specialize_after;
} vk_options_t;

/* What a pipeline-cache file must have been written for: the fields of its
 * VkPipelineCacheHeaderVersionOne, and the driver version the file name is
 * keyed by. */
typedef struct vk_cache_ids {
  uint32_t vendor_id, device_id, driver_version;
  uint8_t uuid[VK_UUID_SIZE]; /* pipelineCacheUUID */
} vk_cache_ids_t;

typedef struct vk_features {
  uint32_t api_version;
  int f16, i8, i16, f64, i64, storage8, storage16, bda, timeline;
  int memory_budget_ext;
  uint32_t subgroup_size;
  uint32_t timestamp_bits;
  float timestamp_period;
  uint32_t max_wg_size[3], max_wg_invocations, max_wg_count[3], max_shared;
  int push_descriptor_ext;  /* VK_KHR_push_descriptor */
  int memory_fd_ext;        /* VK_KHR_external_memory_fd: the EXPORTABLE memory space */
  int semaphore_fd_ext;     /* VK_KHR_external_semaphore_fd: exportable events */
  uint64_t min_ssbo_align;  /* minStorageBufferOffsetAlignment, bytes */
  uint64_t max_ssbo_range;  /* maxStorageBufferRange, bytes */
  uint64_t min_texel_align; /* minTexelBufferOffsetAlignment, bytes */
  uint64_t max_texels;      /* maxTexelBufferElements */
  int cpu;                  /* VK_PHYSICAL_DEVICE_TYPE_CPU: a workgroup runs as SIMD lanes of one thread */
} vk_features_t;

struct bpp_instance_s;
typedef struct vk_pipeline_cache vk_pipeline_cache_t;

struct bpp_device_s {
  struct bpp_instance_s* inst;
  uint32_t index;
  VkPhysicalDevice phys;
  vk_features_t feat;
  uint32_t queue_family;
  uint32_t queue_count;
  bp_device_properties_t props;
  VkPhysicalDeviceMemoryProperties mem_props;
  uint32_t device_type_index, host_type_index; /* memory types */
  vk_cache_ids_t cache_ids;
  /* Created on first open, under inst->lock. */
  int opened;
  vk_dispatch_t vk; /* device-level functions resolved */
  VkDevice dev;
  VkQueue* queues;
  pthread_mutex_t* queue_locks;
  atomic_uint next_queue;
  vk_pool_t pool_device, pool_host;
  vk_pool_t pool_export; /* memory space 2 when feat.memory_fd_ext */
  vk_pipeline_cache_t* pipes;
};

struct bpp_instance_s {
  void* lib;
  vk_dispatch_t vk;
  vk_options_t opt;
  VkInstance instance;
  VkDebugUtilsMessengerEXT messenger;
  pthread_mutex_t lock;
  uint32_t device_count;
  struct bpp_device_s* devices;
};

struct bpp_buffer_s {
  struct bpp_device_s* dev;
  vk_pool_t* pool;
  VkBuffer buf;
  VkDeviceAddress addr;
  uint64_t size;
  uint32_t kind;
  vk_alloc_t alloc;
  unsigned char* map; /* host pointer when the memory is host visible */
  /* Texel views of byte ranges of buf (vk_buffer_texel_view), created on
   * first use and destroyed with the buffer; `views_lock` guards the list
   * (streams of several threads may ask at once). */
  pthread_mutex_t views_lock;
  struct vk_texel_view* views;
  uint32_t num_views;
};

/* Most texel views one buffer keeps; past it, kernels use storage buffers. */
#define VK_MAX_VIEWS_PER_BUFFER 64

/* Creates a VkBuffer of `size` bytes in `pool` with transfer and device
 * address usage, bound and mapped when host visible. */
VK_HIDDEN bp_status_t vk_buffer_create(struct bpp_device_s* dev, vk_pool_t* pool, uint64_t size,
                                       uint32_t kind, struct bpp_buffer_s** out);
/* The same over memory imported from an opaque fd (pool_export). */
VK_HIDDEN bp_status_t vk_buffer_import_fd(struct bpp_device_s* dev, uint64_t size, int fd,
                                          struct bpp_buffer_s** out);
VK_HIDDEN void vk_buffer_destroy(struct bpp_buffer_s* b);
/* The external-memory slots (vk_external.c). */
VK_HIDDEN bp_status_t vk_buffer_import(bpp_device_t d, const bp_external_buffer_desc_t* desc,
                                       bpp_buffer_t* out);
VK_HIDDEN bp_status_t vk_buffer_export(bpp_buffer_t b, bp_external_buffer_desc_t* out);
/* Events as timeline semaphore fds (vk_stream.c). */
VK_HIDDEN bp_status_t vk_event_import(bpp_device_t d, const bp_external_event_desc_t* desc,
                                      bpp_event_t* out);
VK_HIDDEN bp_status_t vk_event_export(bpp_event_t e, bp_external_event_desc_t* out);
/* Memory space index of the exportable space. */
#define VK_SPACE_EXPORT 2u
/* An R32G32B32A32_UINT uniform texel view of [off, off + bytes) of b (bytes
 * a multiple of 16), owned by b: kernels read 16-byte texels through it,
 * which CPU implementations turn into vector loads where storage-buffer
 * reads become per-lane loops. 0 and the view, or -1 when the device cannot
 * (no texel views, alignment, maxTexelBufferElements, the per-buffer cap, a
 * driver error): the caller then reads through a storage buffer. */
VK_HIDDEN int vk_buffer_texel_view(struct bpp_buffer_s* b, uint64_t off, uint64_t bytes, VkBufferView* out);

/* Instance creation with an explicit vkGetInstanceProcAddr (tests pass a
 * fake driver). Parses `options` ("key=value;..."). */
VK_HIDDEN bp_status_t vk_instance_create_with(PFN_vkGetInstanceProcAddr gipa, const char* options,
                                              struct bpp_instance_s** out);
VK_HIDDEN void vk_instance_destroy(struct bpp_instance_s* inst);
VK_HIDDEN bp_status_t vk_device_open(struct bpp_instance_s* inst, uint32_t index,
                                     struct bpp_device_s** out);
/* The plugin's root table (negotiation). */
VK_HIDDEN const bp_plugin_vtable_t* vk_plugin_vtable(void);
/* Total validation-layer warnings and errors seen by every instance. */
VK_HIDDEN uint64_t vk_validation_messages(void);

/* ------------------------------------------------------------------------ */
/* Streams, events, batches (vk_stream.c)                                    */
/* ------------------------------------------------------------------------ */
/* One memory range a command reads or writes (hazard tracking). */
typedef struct vk_access {
  VkBuffer buf;
  uint64_t off, size;
  int write;
} vk_access_t;

typedef struct vk_action vk_action_t;
typedef struct vk_batch vk_batch_t;

#define VK_MAX_TRACKED 32
#define VK_MAX_WAITS 16

struct bpp_stream_s {
  struct bpp_device_s* dev;
  /* Held by every table entry that records into or flushes the stream
   * (vk_plugin.c): the ABI lets stream_synchronize and stream_query run on
   * any thread while the owning thread enqueues, and both flush the batch
   * being recorded. */
  pthread_mutex_t enq_mu;
  uint32_t queue;
  VkCommandPool pool;
  VkSemaphore timeline;
  uint64_t last_value; /* the value the last submitted work signals */
  vk_batch_t* cur;     /* recording, or NULL */
  /* Hazards since the last barrier in cur. */
  vk_access_t tracked[VK_MAX_TRACKED];
  uint32_t num_tracked;
  VkSemaphore wait_sems[VK_MAX_WAITS];
  uint64_t wait_values[VK_MAX_WAITS];
  uint32_t num_waits;
  /* Statistics (tests): submissions, barriers. */
  uint64_t submits, barriers;
  /* Shared with the completion thread. */
  pthread_mutex_t mu;
  pthread_cond_t cv_work, cv_done;
  vk_batch_t *pending_head, *pending_tail, *free_list;
  /* Recorded while host actions of a submitted batch are still to run:
   * submitted by the completion thread once they ran (vk_stream.c). */
  vk_batch_t *deferred_head, *deferred_tail;
  int host_blocked; /* a submitted batch ends in host actions not yet run */
  uint64_t done_value;
  int shutdown;
  bp_status_t error;
  char error_msg[VK_MSG_CAP];
  pthread_t thread;
  int thread_started;
  /* Device-local scratch the stream's commands reuse (matmul panels), or
   * NULL; owned by the stream (vk_stream_workspace). */
  struct bpp_buffer_s* workspace;
};

VK_HIDDEN bp_status_t vk_stream_create(bpp_device_t device, const bp_stream_create_info_t* info,
                                       bpp_stream_t* out);
VK_HIDDEN void vk_stream_destroy(bpp_stream_t stream);
/* The stream's workspace, grown to at least `bytes` (device-local, the
 * usual buffer usages). Commands of the stream may write and read it; they
 * run in order and hazard tracking orders reuse by later commands. Growing
 * replaces the buffer: the old one is released when the batch being
 * recorded completes (after every command that used it). Owned by the
 * stream; RESOURCE_EXHAUSTED when the memory is not there. */
VK_HIDDEN bp_status_t vk_stream_workspace(bpp_stream_t stream, uint64_t bytes, struct bpp_buffer_s** out);
VK_HIDDEN bp_status_t vk_stream_synchronize(bpp_stream_t stream);
VK_HIDDEN bp_status_t vk_stream_query(bpp_stream_t stream);
VK_HIDDEN bp_status_t vk_stream_host_func(bpp_stream_t s, bp_host_func_t fn, void* user);
VK_HIDDEN bp_status_t vk_stream_flush(bpp_stream_t s);
VK_HIDDEN bp_status_t vk_event_create(bpp_device_t device, const bp_event_create_info_t* info,
                                      bpp_event_t* out);
VK_HIDDEN void vk_event_destroy(bpp_event_t event);
VK_HIDDEN bp_status_t vk_event_record(bpp_event_t event, bpp_stream_t stream);
VK_HIDDEN bp_status_t vk_stream_wait_event(bpp_stream_t stream, bpp_event_t event);
VK_HIDDEN bp_status_t vk_event_query(bpp_event_t event);
VK_HIDDEN bp_status_t vk_event_synchronize(bpp_event_t event);
VK_HIDDEN bp_status_t vk_event_elapsed_ns(bpp_event_t a, bpp_event_t b, uint64_t* out_ns);
VK_HIDDEN bp_status_t vk_copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst,
                                  uint64_t dst_off, uint64_t size);
VK_HIDDEN bp_status_t vk_copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, void* dst,
                                  uint64_t size);
VK_HIDDEN bp_status_t vk_copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off,
                                  bpp_buffer_t dst, uint64_t dst_off, uint64_t size);
VK_HIDDEN bp_status_t vk_buffer_fill(bpp_stream_t s, bpp_buffer_t buf, uint64_t off,
                                     uint64_t size, const void* pattern, uint32_t psize);
VK_HIDDEN bp_status_t vk_check_range(const char* what, bpp_buffer_t b, uint64_t off,
                                     uint64_t size);

/* Records a compute dispatch on the stream: copies `meta` (meta_bytes) into
 * the batch's upload arena, inserts a barrier when `acc` conflicts with
 * earlier commands of the batch, binds the pipeline and dispatches. */
VK_HIDDEN bp_status_t vk_stream_dispatch(bpp_stream_t s, VkPipeline pipe, const void* meta,
                                         uint32_t meta_bytes, uint32_t push_n, uint32_t gx,
                                         uint32_t gy, uint32_t gz, const vk_access_t* acc,
                                         uint32_t nacc);

/* Storage buffers a dispatch may push (set 0, bindings 0..7) and uniform
 * texel buffers (R32G32B32A32_UINT views, bindings 8..15). */
#define VK_MAX_PUSH_BUFFERS 8
#define VK_MAX_PUSH_VIEWS 8

/* What a dispatch pushes as set 0: bufs[0..nbufs) at bindings 0.., views
 * [0..nviews) at bindings VK_MAX_PUSH_BUFFERS... A shader's declared
 * bindings must all be pushed (alias unused ones). */
typedef struct vk_bindings {
  VkDescriptorBufferInfo bufs[VK_MAX_PUSH_BUFFERS];
  VkBufferView views[VK_MAX_PUSH_VIEWS];
  uint32_t nbufs, nviews;
} vk_bindings_t;

/* vk_stream_dispatch with set 0 pushed through VK_KHR_push_descriptor
 * (bind NULL or empty: nothing pushed; then equivalent to
 * vk_stream_dispatch). */
VK_HIDDEN bp_status_t vk_stream_dispatch_bufs(bpp_stream_t s, VkPipeline pipe, const void* meta,
                                              uint32_t meta_bytes, uint32_t push_n, uint32_t gx,
                                              uint32_t gy, uint32_t gz, const vk_access_t* acc,
                                              uint32_t nacc, const vk_bindings_t* bind);

/* The fp8 formats the device stores as bytes (codes of the fused and
 * group quantizations, vk_norm_quant.c); every other kernel and the
 * elementwise lowering see the dtypes of vk_compute_dtype_mask, without them. */
#define VK_FP8_DTYPES (BP_DTYPE_BIT(BP_DTYPE_F8E4M3FN) | BP_DTYPE_BIT(BP_DTYPE_F8E5M2))
static inline uint64_t vk_compute_dtype_mask(const struct bpp_device_s* d) {
  return d->props.dtype_mask & ~(uint64_t)VK_FP8_DTYPES;
}

/* ------------------------------------------------------------------------ */
/* Pipelines (vk_pipeline.c)                                                 */
/* ------------------------------------------------------------------------ */
/* Shader ids: one per compiled SPIR-V module (source x variant). */
#define VK_SHADERS(X)                                                          \
  X(ew_f32) X(ew_f64) X(ew_i32) X(ew_i64)                                      \
  X(ewv_f32) X(ewv_f64) X(ewv_i32) X(ewv_i64)                                  \
  X(reduce_f64) X(reduce_i64)                                    \
  X(norm_f64) X(norm_quant)                                        \
  X(matmul_f32) X(matmulv_f32) X(matmulp_f32) X(matmul_pack) X(matmul_f64) X(matmul_i64)     \
  X(index) X(conv_f32) X(conv_f64) X(fill) X(quant) X(sample) X(penalty) X(rope) X(logprobs) X(paged) X(moe_align) X(grouped_topk)
enum vk_shader_id {
#define VK__SID(n) VK_SHADER_##n,
  VK_SHADERS(VK__SID)
#undef VK__SID
  VK_SHADER_COUNT_
};

#define VK_MAX_SPEC 40
/* The pipeline of `shader` with specialization constants 0..nspec-1 set to
 * spec[]; created on first use and cached (thread-safe). */
VK_HIDDEN bp_status_t vk_pipeline_get(struct bpp_device_s* dev, uint32_t shader,
                                      const uint32_t* spec, uint32_t nspec, VkPipeline* out);
/* Tiered specialization: the specialized pipeline of (shader, spec) when it
 * was compiled already or has now been asked for more than the device's
 * `specialize_after` times (it is compiled then); else *out is
 * VK_NULL_HANDLE and the caller launches its generic pipeline. Kernels whose
 * generic form is much cheaper to compile than the many specialized ones
 * (the elementwise programs) use it, so that a shape and dtype run once
 * (a conformance case) does not pay for a compile only a hot loop repays. */
VK_HIDDEN bp_status_t vk_pipeline_get_hot(struct bpp_device_s* dev, uint32_t shader,
                                          const uint32_t* spec, uint32_t nspec, VkPipeline* out);
VK_HIDDEN bp_status_t vk_pipelines_init(struct bpp_device_s* dev);
VK_HIDDEN void vk_pipelines_fini(struct bpp_device_s* dev);
VK_HIDDEN VkPipelineLayout vk_pipeline_layout(struct bpp_device_s* dev);
VK_HIDDEN uint32_t vk_pipeline_count(struct bpp_device_s* dev);
/* Nonzero when the device pushes storage-buffer and texel-buffer
 * descriptors (the fast elementwise and matmul paths); else every op uses
 * buffer addresses. */
VK_HIDDEN int vk_pipeline_has_push_descriptors(struct bpp_device_s* dev);
/* A valid 16-byte texel view for texel bindings a dispatch does not read
 * (every declared binding must hold a descriptor). Owned by the device. */
VK_HIDDEN VkBufferView vk_pipeline_null_view(struct bpp_device_s* dev);

/* The file the pipeline cache of the device is read from and written to
 * ("" when there is none); owned by the device. */
VK_HIDDEN const char* vk_pipeline_cache_path(struct bpp_device_s* dev);

/* ------------------------------------------------------------------------ */
/* The pipeline-cache file (vk_pipeline_file.c)                              */
/* ------------------------------------------------------------------------ */
/* The plugin's version: part of the default cache file's name. */
#define VK_PLUGIN_VERSION "0.1.0"
#define VK_CACHE_HEADER_BYTES 32u /* VkPipelineCacheHeaderVersionOne */

/* The cache file for a device with `ids`, into out[cap]: the file named by
 * the options, else $XDG_CACHE_HOME/backplane/ or ~/.cache/backplane/
 * (created 0700 when missing) + a name keyed by vendor, device, driver
 * version, pipelineCacheUUID and VK_PLUGIN_VERSION. Returns 0 (out = "")
 * when the cache is off or no folder can be had (warned once per call). */
VK_HIDDEN int vk_pipeline_file_path(const vk_options_t* opt, const vk_cache_ids_t* ids, char* out,
                                    size_t cap);
/* 1 when data[size] starts with a VkPipelineCacheHeaderVersionOne for
 * `ids` (length 32, version ONE, vendor, device, UUID); else 0 and why[cap]
 * says what is wrong. */
VK_HIDDEN int vk_pipeline_file_check(const void* data, size_t size, const vk_cache_ids_t* ids,
                                     char* why, size_t cap);
/* The file's contents (malloc'd) when it holds a valid header for `ids`;
 * NULL when absent, unreadable or invalid. An invalid or unreadable file
 * sets *out_rejected and is warned about once (it is to be rewritten). */
VK_HIDDEN void* vk_pipeline_file_read(const char* path, const vk_cache_ids_t* ids, size_t* out_size,
                                      int* out_rejected);
/* Writes the cache's data to `path` (temporary file renamed over it: other
 * processes never read a partial file). Best effort: a failure is logged. */
VK_HIDDEN void vk_pipeline_file_write(struct bpp_device_s* dev, VkPipelineCache cache, const char* path);

/* ------------------------------------------------------------------------ */
/* Ops (vk_ops.c, vk_ew.c)                                                   */
/* ------------------------------------------------------------------------ */
VK_HIDDEN bp_status_t vk_launch_op(bpp_stream_t stream, const bp_op_call_t* call);
VK_HIDDEN int vk_op_implemented(uint32_t op);
VK_HIDDEN bp_status_t vk_query_support(bpp_device_t device, const bp_op_call_t* call,
                                       bp_support_t* out);
VK_HIDDEN bp_status_t vk_query_fusion(bpp_device_t device, bp_fusion_caps_t* out);
/* Compiled regions: EW_PROGRAM through the elementwise kernel (vk_region.c). */
VK_HIDDEN extern const bpp_exec_table_t vk_exec_table;
VK_HIDDEN bp_status_t vk_launch_ew_program(bpp_stream_t stream, const bp_ew_program_t* program,
                                           uint32_t num_inputs, const bp_tensor_desc_t* const* inputs,
                                           uint32_t num_outputs, const bp_tensor_desc_t* const* outputs);

#endif /* BP_VK_INTERNAL_H_ */
