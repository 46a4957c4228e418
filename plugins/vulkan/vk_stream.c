/* backplane Vulkan plugin: streams, batches, events, copies.
 *
 * A stream records commands into the command buffer of its current batch
 * and submits the batch (vkQueueSubmit) when it holds `flush` commands, on
 * synchronize/query, on event record, before waiting on an event and after
 * a host function or a direct device-to-host read. Every batch waits on the
 * stream's timeline semaphore for the previous batch and signals the next
 * value, so batches run in order with full memory dependencies between
 * them. Inside a batch, a global compute/transfer memory barrier is
 * recorded only before a command whose ranges overlap a range written (or,
 * for writes, read) since the last barrier.
 *
 * Threading: each stream has one completion thread. It waits for each
 * submitted batch's timeline value, then runs the batch's host actions in
 * order (device-to-host copies out of staging or mapped memory, host
 * functions) and, when the batch ends in such an action, signals the next
 * timeline value from the host (vkSignalSemaphore) so that later batches
 * start only after the actions ran. Batches recorded while such host
 * actions are still to run are not submitted yet (deferred): a submission
 * that waits for a value only the host will signal would stall the queue,
 * which other streams share, and a host function may itself wait for work
 * of another stream (a collective's peers). The completion thread submits
 * them, in order, right after it signalled. It never touches the command pool:
 * command buffers are reset by vkBeginCommandBuffer on the enqueueing
 * thread when a completed batch is reused.
 *
 * Events own a timeline semaphore that the recording batch signals, so an
 * event outlives its stream. Elapsed time comes from timestamp queries
 * (vkCmdWriteTimestamp, scaled by timestampPeriod).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk_internal.h"

#define VK_ARENA_CHUNK (256u << 10)
#define VK_STAGING_INLINE (4u << 20) /* uploads up to this size share arena chunks */

enum { ACT_MEMCPY = 1, ACT_HOST_FUNC = 2 };

struct vk_action {
  int kind;
  void* dst;
  const void* src;
  uint64_t size;
  bp_host_func_t fn;
  void* user;
};

typedef struct vk_chunk {
  struct bpp_buffer_s* buf;
  uint64_t used;
} vk_chunk_t;

struct vk_batch {
  VkCommandBuffer cmd;
  uint64_t value;    /* timeline value the GPU part signals */
  int host_tail;     /* actions end the batch: the host signals value + 1 */
  uint32_t ncmds;
  vk_action_t* actions;
  uint32_t nactions, cap_actions;
  vk_chunk_t* chunks; /* upload arena chunks (kept across reuse) */
  uint32_t nchunks, cap_chunks, cur_chunk;
  struct bpp_buffer_s** staging; /* large staging buffers, freed on completion */
  uint32_t nstaging, cap_staging;
  struct vk_signal {
    VkSemaphore sem;
    uint64_t value;
    struct bpp_event_s* event; /* a reference, dropped when the batch retires */
  } * signals; /* event semaphores */
  uint32_t nsignals, cap_signals;
  /* What the submission waits for, kept so that a deferred batch can be
   * submitted later by the completion thread. */
  VkSemaphore waits[VK_MAX_WAITS + 1];
  uint64_t wvals[VK_MAX_WAITS + 1];
  uint32_t nwaits;
  struct vk_batch* next;
};

/* Reference counted: the creator holds one and every batch that signals
 * the event holds one until the completion thread retired it, so the
 * semaphore outlives every wait on it (event_destroy drops the creator's). */
/* Announces event submissions to enqueuers waiting for one (any device;
 * rare: only while a recording batch is deferred). */
static pthread_mutex_t g_submit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_submit_cv = PTHREAD_COND_INITIALIZER;

struct bpp_event_s {
  struct bpp_device_s* dev;
  atomic_uint refs;
  VkSemaphore sem;
  uint64_t counter; /* value the last record signals */
  /* The highest value whose signalling batch has been submitted: a
   * recorded batch may be deferred (see the top), and no batch may be
   * submitted waiting for a value nobody submitted yet. */
  _Atomic uint64_t submitted;
  VkQueryPool query;
  int timed;        /* the last record wrote a timestamp */
  int imported;     /* a semaphore of another instance: waited on, never recorded */
};

/* ---- small growable arrays ------------------------------------------ */
static int grow(void** p, uint32_t* cap, uint32_t need, size_t elem) {
  if (need <= *cap) return 0;
  uint32_t n = *cap ? *cap * 2 : 8;
  while (n < need) n *= 2;
  void* q = realloc(*p, n * elem);
  if (!q) return -1;
  *p = q;
  *cap = n;
  return 0;
}

/* Waits until the batch that signals the event's last recorded value has
 * been submitted (it may be deferred behind host actions of its stream):
 * before a submission waits for that value, or another instance does. */
static void wait_submitted(struct bpp_event_s* e) {
  const uint64_t want = e->counter;
  if (e->imported || atomic_load(&e->submitted) >= want) return;
  pthread_mutex_lock(&g_submit_mu);
  while (atomic_load(&e->submitted) < want) pthread_cond_wait(&g_submit_cv, &g_submit_mu);
  pthread_mutex_unlock(&g_submit_mu);
}

/* ---- completion thread ------------------------------------------------ */
static void set_error(bpp_stream_t s, bp_status_t st, const char* msg) {
  if (s->error == BP_OK) {
    s->error = st;
    snprintf(s->error_msg, sizeof s->error_msg, "%s", msg);
  }
}

static void event_unref(struct bpp_event_s* e) {
  if (atomic_fetch_sub(&e->refs, 1) != 1) return;
  struct bpp_device_s* d = e->dev;
  if (e->query) d->vk.vkDestroyQueryPool(d->dev, e->query, NULL);
  d->vk.vkDestroySemaphore(d->dev, e->sem, NULL);
  free(e);
}

static void batch_retire(bpp_stream_t s, vk_batch_t* b) {
  for (uint32_t i = 0; i < b->nsignals; i++) event_unref(b->signals[i].event);
  for (uint32_t i = 0; i < b->nstaging; i++) vk_buffer_destroy(b->staging[i]);
  b->nstaging = 0;
  b->nactions = 0;
  b->nsignals = 0;
  b->ncmds = 0;
  b->host_tail = 0;
  b->cur_chunk = 0;
  for (uint32_t i = 0; i < b->nchunks; i++) b->chunks[i].used = 0;
  b->next = s->free_list;
  s->free_list = b;
}

static void submit_deferred(bpp_stream_t s);

static void* completion_main(void* arg) {
  bpp_stream_t s = arg;
  struct bpp_device_s* d = s->dev;
  bp_plugin_set_worker_thread(1);
  pthread_mutex_lock(&s->mu);
  for (;;) {
    while (!s->pending_head && !s->shutdown) pthread_cond_wait(&s->cv_work, &s->mu);
    if (!s->pending_head) break;
    vk_batch_t* b = s->pending_head;
    pthread_mutex_unlock(&s->mu);
    /* The stream's value and every event the batch signals: the signals of
     * one submission need not become visible together, and a synchronized
     * stream promises its events complete. */
    VkSemaphore sems[65];
    uint64_t vals[65];
    uint32_t ns = 0;
    sems[ns] = s->timeline;
    vals[ns++] = b->value;
    for (uint32_t i = 0; i < b->nsignals && ns < 65; i++) {
      sems[ns] = b->signals[i].sem;
      vals[ns++] = b->signals[i].value;
    }
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = ns,
                              .pSemaphores = sems,
                              .pValues = vals};
    VkResult r = d->vk.vkWaitSemaphores(d->dev, &wi, UINT64_MAX);
    pthread_mutex_lock(&s->mu);
    if (r != VK_SUCCESS) {
      char m[VK_MSG_CAP];
      snprintf(m, sizeof m, "vulkan: waiting for a batch failed: %s", vk_result_name(r));
      set_error(s, vk_status_of(r), m);
    }
    pthread_mutex_unlock(&s->mu);
    for (uint32_t i = 0; i < b->nactions; i++) {
      vk_action_t* a = &b->actions[i];
      if (a->kind == ACT_MEMCPY) {
        memmove(a->dst, a->src, a->size); /* dst may map src */
      } else {
        /* A failed host function poisons the stream like a failed batch. */
        bp_status_t hs = a->fn(a->user);
        if (hs != BP_OK) {
          char m[VK_MSG_CAP];
          snprintf(m, sizeof m, "vulkan: host function failed with status %d", (int)hs);
          pthread_mutex_lock(&s->mu);
          set_error(s, hs, m);
          pthread_mutex_unlock(&s->mu);
        }
      }
    }
    if (b->host_tail) {
      VkSemaphoreSignalInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                                  .semaphore = s->timeline,
                                  .value = b->value + 1};
      r = d->vk.vkSignalSemaphore(d->dev, &si);
      if (r != VK_SUCCESS) {
        pthread_mutex_lock(&s->mu);
        set_error(s, vk_status_of(r), "vulkan: vkSignalSemaphore after host actions failed");
        pthread_mutex_unlock(&s->mu);
      }
    }
    pthread_mutex_lock(&s->mu);
    s->pending_head = b->next;
    if (!s->pending_head) s->pending_tail = NULL;
    s->done_value = b->value + (b->host_tail ? 1 : 0);
    const int was_blocking = b->host_tail;
    batch_retire(s, b);
    if (was_blocking) {
      s->host_blocked = 0;
      submit_deferred(s);
    }
    pthread_cond_broadcast(&s->cv_done);
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

/* ---- batches ---------------------------------------------------------- */
static void batch_free(bpp_stream_t s, vk_batch_t* b) {
  struct bpp_device_s* d = s->dev;
  for (uint32_t i = 0; i < b->nsignals; i++) event_unref(b->signals[i].event);
  for (uint32_t i = 0; i < b->nstaging; i++) vk_buffer_destroy(b->staging[i]);
  for (uint32_t i = 0; i < b->nchunks; i++) vk_buffer_destroy(b->chunks[i].buf);
  if (b->cmd) d->vk.vkFreeCommandBuffers(d->dev, s->pool, 1, &b->cmd);
  free(b->actions);
  free(b->chunks);
  free(b->staging);
  free(b->signals);
  free(b);
}

/* The batch being recorded, begun on first use. */
static bp_status_t cur_batch(bpp_stream_t s, vk_batch_t** out) {
  struct bpp_device_s* d = s->dev;
  if (s->cur) {
    *out = s->cur;
    return BP_OK;
  }
  pthread_mutex_lock(&s->mu);
  vk_batch_t* b = s->free_list;
  if (b) s->free_list = b->next;
  pthread_mutex_unlock(&s->mu);
  if (!b) {
    b = calloc(1, sizeof *b);
    if (!b) return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = s->pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    VkResult r = d->vk.vkAllocateCommandBuffers(d->dev, &ai, &b->cmd);
    if (r != VK_SUCCESS) {
      free(b);
      return vk_error(vk_status_of(r), "vulkan: vkAllocateCommandBuffers failed: %s", vk_result_name(r));
    }
  }
  b->next = NULL;
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkResult r = d->vk.vkBeginCommandBuffer(b->cmd, &bi);
  if (r != VK_SUCCESS) {
    batch_free(s, b);
    return vk_error(vk_status_of(r), "vulkan: vkBeginCommandBuffer failed: %s", vk_result_name(r));
  }
  s->cur = b;
  s->num_tracked = 0;
  *out = b;
  return BP_OK;
}

/* Upload space in the batch's arena: host pointer and device address. */
static bp_status_t arena_alloc(bpp_stream_t s, vk_batch_t* b, uint64_t size, void** host,
                               VkDeviceAddress* addr, struct bpp_buffer_s** buf, uint64_t* off) {
  size = (size + 15) & ~15ull;
  if (size > VK_ARENA_CHUNK) {
    struct bpp_buffer_s* sb = NULL;
    bp_status_t st = vk_buffer_create(s->dev, &s->dev->pool_host, size, BP_MEMORY_HOST_PINNED, &sb);
    if (st) return st;
    if (grow((void**)&b->staging, &b->cap_staging, b->nstaging + 1, sizeof *b->staging)) {
      vk_buffer_destroy(sb);
      return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
    }
    b->staging[b->nstaging++] = sb;
    *host = sb->map;
    *addr = sb->addr;
    *buf = sb;
    *off = 0;
    return BP_OK;
  }
  while (b->cur_chunk < b->nchunks && b->chunks[b->cur_chunk].used + size > VK_ARENA_CHUNK)
    b->cur_chunk++;
  if (b->cur_chunk == b->nchunks) {
    if (grow((void**)&b->chunks, &b->cap_chunks, b->nchunks + 1, sizeof *b->chunks))
      return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
    struct bpp_buffer_s* cb = NULL;
    bp_status_t st = vk_buffer_create(s->dev, &s->dev->pool_host, VK_ARENA_CHUNK, BP_MEMORY_HOST_PINNED, &cb);
    if (st) return st;
    b->chunks[b->nchunks].buf = cb;
    b->chunks[b->nchunks].used = 0;
    b->nchunks++;
  }
  vk_chunk_t* c = &b->chunks[b->cur_chunk];
  *host = c->buf->map + c->used;
  *addr = c->buf->addr + c->used;
  *buf = c->buf;
  *off = c->used;
  c->used += size;
  return BP_OK;
}

static bp_status_t add_action(vk_batch_t* b, const vk_action_t* a) {
  if (grow((void**)&b->actions, &b->cap_actions, b->nactions + 1, sizeof *b->actions))
    return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  b->actions[b->nactions++] = *a;
  return BP_OK;
}

static void record_barrier(bpp_stream_t s, vk_batch_t* b, VkPipelineStageFlags dst_stage,
                           VkAccessFlags dst_access) {
  struct bpp_device_s* d = s->dev;
  VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                        .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                        .dstAccessMask = dst_access};
  d->vk.vkCmdPipelineBarrier(b->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                             dst_stage, 0, 1, &mb, 0, NULL, 0, NULL);
  s->barriers++;
  s->num_tracked = 0;
}

static int overlaps(const vk_access_t* a, const vk_access_t* b) {
  return a->buf == b->buf && a->off < b->off + b->size && b->off < a->off + a->size;
}

/* Inserts a barrier when a command with these accesses depends on earlier
 * ones of the batch (read-after-write, write-after-write, write-after-read),
 * then tracks its accesses. */
static void hazard_check(bpp_stream_t s, vk_batch_t* b, const vk_access_t* acc, uint32_t nacc) {
  int need = 0;
  for (uint32_t i = 0; i < nacc && !need; i++)
    for (uint32_t k = 0; k < s->num_tracked && !need; k++)
      if ((acc[i].write || s->tracked[k].write) && overlaps(&acc[i], &s->tracked[k])) need = 1;
  if (!need && s->num_tracked + nacc > VK_MAX_TRACKED) need = 1;
  if (need)
    record_barrier(s, b, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                   VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                       VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT);
  for (uint32_t i = 0; i < nacc && s->num_tracked < VK_MAX_TRACKED; i++)
    s->tracked[s->num_tracked++] = acc[i];
}

/* Submits `b` (its waits and value set) and hands it to the completion
 * thread; s->mu held, which orders submissions between the enqueuing
 * thread and the completion thread. */
static bp_status_t submit_batch(bpp_stream_t s, vk_batch_t* b) {
  struct bpp_device_s* d = s->dev;
  VkPipelineStageFlags wstages[VK_MAX_WAITS + 1];
  for (uint32_t i = 0; i < b->nwaits; i++) wstages[i] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
  VkSemaphore sigs[1 + 64];
  uint64_t svals[1 + 64];
  uint32_t ns = 0;
  sigs[ns] = s->timeline;
  svals[ns++] = b->value;
  for (uint32_t i = 0; i < b->nsignals && ns < 65; i++) {
    sigs[ns] = b->signals[i].sem;
    svals[ns++] = b->signals[i].value;
  }
  VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                      .waitSemaphoreValueCount = b->nwaits,
                                      .pWaitSemaphoreValues = b->wvals,
                                      .signalSemaphoreValueCount = ns,
                                      .pSignalSemaphoreValues = svals};
  VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
                     .pNext = &ti,
                     .waitSemaphoreCount = b->nwaits,
                     .pWaitSemaphores = b->waits,
                     .pWaitDstStageMask = wstages,
                     .commandBufferCount = 1,
                     .pCommandBuffers = &b->cmd,
                     .signalSemaphoreCount = ns,
                     .pSignalSemaphores = sigs};
  pthread_mutex_lock(&d->queue_locks[s->queue]);
  VkResult r = d->vk.vkQueueSubmit(d->queues[s->queue], 1, &si, VK_NULL_HANDLE);
  pthread_mutex_unlock(&d->queue_locks[s->queue]);
  if (r != VK_SUCCESS) {
    batch_retire(s, b);
    return vk_error(vk_status_of(r), "vulkan: vkQueueSubmit failed: %s", vk_result_name(r));
  }
  s->submits++;
  if (b->host_tail) s->host_blocked = 1;
  if (b->nsignals) {
    for (uint32_t i = 0; i < b->nsignals; i++) {
      struct bpp_event_s* e = b->signals[i].event;
      if (atomic_load(&e->submitted) < b->signals[i].value)
        atomic_store(&e->submitted, b->signals[i].value);
    }
    pthread_mutex_lock(&g_submit_mu);
    pthread_cond_broadcast(&g_submit_cv);
    pthread_mutex_unlock(&g_submit_mu);
  }
  b->next = NULL;
  if (s->pending_tail) s->pending_tail->next = b;
  else s->pending_head = b;
  s->pending_tail = b;
  pthread_cond_signal(&s->cv_work);
  return BP_OK;
}

/* Submits the current batch (if any). */
bp_status_t vk_stream_flush(bpp_stream_t s) {
  struct bpp_device_s* d = s->dev;
  vk_batch_t* b = s->cur;
  if (!b) return BP_OK;
  s->cur = NULL;
  /* Make device writes visible to the host actions and the next batch. */
  record_barrier(s, b, VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
                 VK_ACCESS_HOST_READ_BIT | VK_ACCESS_MEMORY_READ_BIT | VK_ACCESS_MEMORY_WRITE_BIT);
  VkResult r = d->vk.vkEndCommandBuffer(b->cmd);
  if (r != VK_SUCCESS) {
    pthread_mutex_lock(&s->mu);
    batch_retire(s, b);
    pthread_mutex_unlock(&s->mu);
    return vk_error(vk_status_of(r), "vulkan: vkEndCommandBuffer failed: %s", vk_result_name(r));
  }
  uint32_t nw = 0;
  if (s->last_value) {
    b->waits[nw] = s->timeline;
    b->wvals[nw++] = s->last_value;
  }
  for (uint32_t i = 0; i < s->num_waits; i++) {
    b->waits[nw] = s->wait_sems[i];
    b->wvals[nw++] = s->wait_values[i];
  }
  b->nwaits = nw;
  s->num_waits = 0;
  const uint64_t before = s->last_value;
  b->value = s->last_value + 1;
  s->last_value = b->value + (b->host_tail ? 1 : 0);
  pthread_mutex_lock(&s->mu);
  bp_status_t st = BP_OK;
  if (s->host_blocked || s->deferred_head) {
    /* Host actions of an earlier batch are still to run: keep it. */
    b->next = NULL;
    if (s->deferred_tail) s->deferred_tail->next = b;
    else s->deferred_head = b;
    s->deferred_tail = b;
  } else {
    st = submit_batch(s, b);
    if (st != BP_OK) s->last_value = before; /* nothing will signal it */
  }
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* Submits the deferred batches in order (s->mu held), up to and including
 * the first one that ends in host actions. Errors become the stream's. */
static void submit_deferred(bpp_stream_t s) {
  while (s->deferred_head && !s->host_blocked) {
    vk_batch_t* b = s->deferred_head;
    s->deferred_head = b->next;
    if (!s->deferred_head) s->deferred_tail = NULL;
    const uint64_t reached = b->value + (b->host_tail ? 1 : 0);
    bp_status_t st = submit_batch(s, b);
    if (st != BP_OK) {
      /* Later batches wait for this one's value: the host gives it, so
       * the stream still drains (with the error). */
      set_error(s, st, vk_last_error());
      VkSemaphoreSignalInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
                                  .semaphore = s->timeline,
                                  .value = reached};
      s->dev->vk.vkSignalSemaphore(s->dev->dev, &si);
      s->done_value = reached;
    }
  }
}

/* After recording one command: submit when the batch is full. */
static bp_status_t after_command(bpp_stream_t s, vk_batch_t* b) {
  if (++b->ncmds >= s->dev->inst->opt.flush_threshold) return vk_stream_flush(s);
  return BP_OK;
}

/* ---- streams ------------------------------------------------------------ */
bp_status_t vk_stream_create(bpp_device_t d, const bp_stream_create_info_t* info, bpp_stream_t* out) {
  if (!d || !info || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_create: NULL argument");
  *out = NULL;
  if (info->struct_size < BP_STREAM_CREATE_INFO_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_create: info struct_size %u too small", info->struct_size);
  /* A copy stream runs on a compute queue (which copies too); queue
   * priorities are fixed when the VkDevice is made, so priority is a hint
   * this plugin cannot act on. */
  if (info->queue > BP_QUEUE_COPY)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_create: unknown queue kind %u", info->queue);
  if (info->flags != 0)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_create: unknown flags 0x%x", info->flags);
  bp_status_t st = BP_OK;
  bpp_stream_t s = calloc(1, sizeof *s);
  if (!s) return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  s->dev = d;
  s->queue = atomic_fetch_add(&d->next_queue, 1) % d->queue_count;
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->enq_mu, NULL);
  pthread_cond_init(&s->cv_work, NULL);
  pthread_cond_init(&s->cv_done, NULL);
  VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                .queueFamilyIndex = d->queue_family};
  VkResult r = d->vk.vkCreateCommandPool(d->dev, &pi, NULL, &s->pool);
  if (r != VK_SUCCESS) {
    s->pool = VK_NULL_HANDLE;
    st = vk_error(vk_status_of(r), "vulkan: vkCreateCommandPool failed: %s", vk_result_name(r));
    goto cleanup;
  }
  VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                  .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
                                  .initialValue = 0};
  VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
  r = d->vk.vkCreateSemaphore(d->dev, &sci, NULL, &s->timeline);
  if (r != VK_SUCCESS) {
    s->timeline = VK_NULL_HANDLE;
    st = vk_error(vk_status_of(r), "vulkan: vkCreateSemaphore failed: %s", vk_result_name(r));
    goto cleanup;
  }
  if (pthread_create(&s->thread, NULL, completion_main, s) != 0) {
    st = vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: cannot start the stream's completion thread");
    goto cleanup;
  }
  s->thread_started = 1;
  *out = s;
  s = NULL;
cleanup:
  if (s) vk_stream_destroy(s);
  return st;
}

void vk_stream_destroy(bpp_stream_t s) {
  if (!s) return;
  struct bpp_device_s* d = s->dev;
  if (s->thread_started) {
    vk_stream_synchronize(s);
    pthread_mutex_lock(&s->mu);
    s->shutdown = 1;
    pthread_cond_signal(&s->cv_work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
  }
  if (s->cur) { /* only after a failed flush */
    d->vk.vkEndCommandBuffer(s->cur->cmd);
    batch_free(s, s->cur);
  }
  while (s->free_list) {
    vk_batch_t* b = s->free_list;
    s->free_list = b->next;
    batch_free(s, b);
  }
  vk_buffer_destroy(s->workspace);
  if (s->timeline) d->vk.vkDestroySemaphore(d->dev, s->timeline, NULL);
  if (s->pool) d->vk.vkDestroyCommandPool(d->dev, s->pool, NULL);
  pthread_cond_destroy(&s->cv_work);
  pthread_cond_destroy(&s->cv_done);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->enq_mu);
  free(s);
}

/* Workspace sizes are whole MiB, so that fixed fractions of it (the matmul
 * panels take halves) keep every alignment a view or descriptor asks for. */
#define VK_WORKSPACE_GRAIN (1ull << 20)

bp_status_t vk_stream_workspace(bpp_stream_t s, uint64_t bytes, struct bpp_buffer_s** out) {
  if (s->workspace && s->workspace->size >= bytes) {
    *out = s->workspace;
    return BP_OK;
  }
  if (bytes > UINT64_MAX - VK_WORKSPACE_GRAIN)
    return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: a workspace of %llu bytes", (unsigned long long)bytes);
  uint64_t size = (bytes + VK_WORKSPACE_GRAIN - 1) / VK_WORKSPACE_GRAIN * VK_WORKSPACE_GRAIN;
  vk_batch_t* b = NULL;
  bp_status_t st;
  /* The batch that will release the old buffer, with room for it, first:
   * nothing can fail once the new buffer exists. */
  if (s->workspace) {
    if ((st = cur_batch(s, &b)) != BP_OK) return st;
    if (grow((void**)&b->staging, &b->cap_staging, b->nstaging + 1, sizeof *b->staging))
      return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  }
  struct bpp_buffer_s* nb = NULL;
  if ((st = vk_buffer_create(s->dev, &s->dev->pool_device, size, BP_MEMORY_DEVICE, &nb)) != BP_OK) return st;
  if (b) b->staging[b->nstaging++] = s->workspace;
  s->workspace = nb;
  *out = nb;
  return BP_OK;
}

static bp_status_t take_error(bpp_stream_t s) {
  bp_status_t st = s->error;
  if (st != BP_OK) {
    s->error = BP_OK;
    char m[VK_MSG_CAP];
    snprintf(m, sizeof m, "%s", s->error_msg);
    vk_error(st, "%s", m);
  }
  return st;
}

bp_status_t vk_stream_synchronize(bpp_stream_t s) {
  if (!s) return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_synchronize: NULL stream");
  bp_status_t st = vk_stream_flush(s);
  pthread_mutex_lock(&s->mu);
  while (s->done_value < s->last_value) pthread_cond_wait(&s->cv_done, &s->mu);
  if (st == BP_OK) st = take_error(s);
  pthread_mutex_unlock(&s->mu);
  return st;
}

bp_status_t vk_stream_query(bpp_stream_t s) {
  if (!s) return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_query: NULL stream");
  bp_status_t st = vk_stream_flush(s);
  if (st != BP_OK) return st;
  pthread_mutex_lock(&s->mu);
  st = s->done_value < s->last_value ? BP_NOT_READY : take_error(s);
  pthread_mutex_unlock(&s->mu);
  return st;
}

/* Ends the batch with a host action (runs on the completion thread after
 * the batch's commands; later batches wait for it). */
static bp_status_t enqueue_host_action(bpp_stream_t s, const vk_action_t* a) {
  vk_batch_t* b;
  bp_status_t st = cur_batch(s, &b);
  if (st) return st;
  if ((st = add_action(b, a)) != BP_OK) return st;
  b->host_tail = 1;
  return vk_stream_flush(s);
}

bp_status_t vk_stream_host_func(bpp_stream_t s, bp_host_func_t fn, void* user) {
  if (!s || !fn) return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_enqueue_host_func: NULL argument");
  vk_action_t a = {.kind = ACT_HOST_FUNC, .fn = fn, .user = user};
  return enqueue_host_action(s, &a);
}

/* ---- copies -------------------------------------------------------------- */
bp_status_t vk_check_range(const char* what, bpp_buffer_t b, uint64_t off, uint64_t size) {
  if (!b) return vk_error(BP_INVALID_ARGUMENT, "vulkan: %s: NULL buffer", what);
  if (off > b->size || size > b->size - off)
    return vk_error(BP_OUT_OF_RANGE, "vulkan: %s: range [%llu, +%llu) exceeds the buffer's %llu bytes", what,
                    (unsigned long long)off, (unsigned long long)size, (unsigned long long)b->size);
  return BP_OK;
}

static void record_copy(bpp_stream_t s, vk_batch_t* b, VkBuffer src, uint64_t so, VkBuffer dst,
                        uint64_t dof, uint64_t size) {
  vk_access_t acc[2] = {{src, so, size, 0}, {dst, dof, size, 1}};
  hazard_check(s, b, acc, 2);
  VkBufferCopy r = {.srcOffset = so, .dstOffset = dof, .size = size};
  s->dev->vk.vkCmdCopyBuffer(b->cmd, src, dst, 1, &r);
}

bp_status_t vk_copy_h2d(bpp_stream_t s, const void* src, bpp_buffer_t dst, uint64_t dst_off, uint64_t size) {
  if (!s || (!src && size)) return vk_error(BP_INVALID_ARGUMENT, "vulkan: copy_host_to_device: NULL argument");
  bp_status_t st = vk_check_range("copy_host_to_device", dst, dst_off, size);
  if (st || size == 0) return st;
  vk_batch_t* b;
  if ((st = cur_batch(s, &b)) != BP_OK) return st;
  /* The source is copied into staging now (the ABI keeps it unchanged until
   * the stream passes the copy, so now is as good as later). */
  void* host;
  VkDeviceAddress addr;
  struct bpp_buffer_s* sb;
  uint64_t soff;
  if ((st = arena_alloc(s, b, size, &host, &addr, &sb, &soff)) != BP_OK) return st;
  memcpy(host, src, size);
  record_copy(s, b, sb->buf, soff, dst->buf, dst_off, size);
  return after_command(s, b);
}

bp_status_t vk_copy_d2h(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, void* dst, uint64_t size) {
  if (!s || (!dst && size)) return vk_error(BP_INVALID_ARGUMENT, "vulkan: copy_device_to_host: NULL argument");
  bp_status_t st = vk_check_range("copy_device_to_host", src, src_off, size);
  if (st || size == 0) return st;
  vk_batch_t* b;
  if ((st = cur_batch(s, &b)) != BP_OK) return st;
  vk_action_t a = {.kind = ACT_MEMCPY, .dst = dst, .size = size};
  if (src->map && src->pool->host_visible) {
    a.src = src->map + src_off; /* read in place once the batch completed */
  } else {
    void* host;
    VkDeviceAddress addr;
    struct bpp_buffer_s* sb;
    uint64_t soff;
    if ((st = arena_alloc(s, b, size, &host, &addr, &sb, &soff)) != BP_OK) return st;
    record_copy(s, b, src->buf, src_off, sb->buf, soff, size);
    a.src = host;
  }
  return enqueue_host_action(s, &a);
}

bp_status_t vk_copy_d2d(bpp_stream_t s, bpp_buffer_t src, uint64_t src_off, bpp_buffer_t dst, uint64_t dst_off,
                        uint64_t size) {
  if (!s) return vk_error(BP_INVALID_ARGUMENT, "vulkan: copy_device_to_device: NULL stream");
  bp_status_t st = vk_check_range("copy_device_to_device (source)", src, src_off, size);
  if (st == BP_OK) st = vk_check_range("copy_device_to_device (destination)", dst, dst_off, size);
  if (st || size == 0) return st;
  if (src->dev != s->dev || dst->dev != s->dev)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: copy_device_to_device: buffers of another device");
  vk_batch_t* b;
  if ((st = cur_batch(s, &b)) != BP_OK) return st;
  if (src == dst && src_off < dst_off + size && dst_off < src_off + size) {
    /* Overlapping ranges: vkCmdCopyBuffer forbids them; go through staging. */
    void* host;
    VkDeviceAddress addr;
    struct bpp_buffer_s* sb;
    uint64_t soff;
    if ((st = arena_alloc(s, b, size, &host, &addr, &sb, &soff)) != BP_OK) return st;
    record_copy(s, b, src->buf, src_off, sb->buf, soff, size);
    record_copy(s, b, sb->buf, soff, dst->buf, dst_off, size);
  } else {
    record_copy(s, b, src->buf, src_off, dst->buf, dst_off, size);
  }
  return after_command(s, b);
}

bp_status_t vk_buffer_fill(bpp_stream_t s, bpp_buffer_t buf, uint64_t off, uint64_t size, const void* pattern,
                           uint32_t psize) {
  if (!s || !pattern) return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_fill: NULL argument");
  if (psize != 1 && psize != 2 && psize != 4 && psize != 8)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_fill: pattern size %u is not 1, 2, 4 or 8", psize);
  bp_status_t st = vk_check_range("buffer_fill", buf, off, size);
  if (st || size == 0) return st;
  if (size % psize)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_fill: size %llu is not a multiple of the pattern size %u",
                    (unsigned long long)size, psize);
  vk_batch_t* b;
  if ((st = cur_batch(s, &b)) != BP_OK) return st;
  uint8_t p8[8];
  memcpy(p8, pattern, psize);
  uint32_t word;
  int uniform4 = psize <= 4 || memcmp(p8, p8 + 4, 4) == 0;
  for (uint32_t i = 0; i < 4; i++) ((uint8_t*)&word)[i] = p8[i % psize];
  if (uniform4 && off % 4 == 0 && size % 4 == 0) {
    vk_access_t acc = {buf->buf, off, size, 1};
    hazard_check(s, b, &acc, 1);
    s->dev->vk.vkCmdFillBuffer(b->cmd, buf->buf, off, size, word); /* equivalent to cuMemsetD32Async */
  } else {
    /* Unaligned or 8-byte patterns: the fill shader, byte by byte. */
    VkPipeline pipe;
    if ((st = vk_pipeline_get(s->dev, VK_SHADER_fill, NULL, 0, &pipe)) != BP_OK) return st;
    uint32_t meta[8];
    uint64_t a = buf->addr + off;
    meta[0] = (uint32_t)a;
    meta[1] = (uint32_t)(a >> 32);
    meta[2] = (uint32_t)size;
    meta[3] = psize;
    memcpy(&meta[4], p8, 8);
    meta[6] = meta[7] = 0;
    if (size > UINT32_MAX) return vk_error(BP_INVALID_ARGUMENT, "vulkan: buffer_fill: %llu bytes is too many for the fill shader",
                                           (unsigned long long)size);
    uint64_t groups = (size + 255) / 256;
    if (groups > 65535) groups = 65535;
    vk_access_t acc = {buf->buf, off, size, 1};
    return vk_stream_dispatch(s, pipe, meta, sizeof meta, (uint32_t)size, (uint32_t)groups, 1, 1, &acc, 1);
  }
  return after_command(s, b);
}

/* ---- dispatch ---------------------------------------------------------- */
bp_status_t vk_stream_dispatch(bpp_stream_t s, VkPipeline pipe, const void* meta, uint32_t meta_bytes,
                               uint32_t push_n, uint32_t gx, uint32_t gy, uint32_t gz, const vk_access_t* acc,
                               uint32_t nacc) {
  return vk_stream_dispatch_bufs(s, pipe, meta, meta_bytes, push_n, gx, gy, gz, acc, nacc, NULL);
}

bp_status_t vk_stream_dispatch_bufs(bpp_stream_t s, VkPipeline pipe, const void* meta, uint32_t meta_bytes,
                                    uint32_t push_n, uint32_t gx, uint32_t gy, uint32_t gz,
                                    const vk_access_t* acc, uint32_t nacc, const vk_bindings_t* bind) {
  uint32_t nbufs = bind ? bind->nbufs : 0, nviews = bind ? bind->nviews : 0;
  if (nbufs > VK_MAX_PUSH_BUFFERS || nviews > VK_MAX_PUSH_VIEWS ||
      ((nbufs || nviews) && !vk_pipeline_has_push_descriptors(s->dev)))
    return vk_error(BP_INTERNAL, "vulkan: %u buffers and %u texel views requested without push descriptors", nbufs,
                    nviews);
  struct bpp_device_s* d = s->dev;
  vk_batch_t* b;
  bp_status_t st = cur_batch(s, &b);
  if (st) return st;
  void* host = NULL;
  VkDeviceAddress addr = 0;
  struct bpp_buffer_s* mb;
  uint64_t moff;
  if (meta_bytes) {
    if ((st = arena_alloc(s, b, meta_bytes, &host, &addr, &mb, &moff)) != BP_OK) return st;
    memcpy(host, meta, meta_bytes);
  }
  hazard_check(s, b, acc, nacc);
  struct {
    uint64_t meta;
    uint32_t n, pad;
  } pc = {addr, push_n, 0};
  d->vk.vkCmdBindPipeline(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipe);
  d->vk.vkCmdPushConstants(b->cmd, vk_pipeline_layout(d), VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof pc, &pc);
  if (nbufs || nviews) {
    VkWriteDescriptorSet w[VK_MAX_PUSH_BUFFERS + VK_MAX_PUSH_VIEWS];
    for (uint32_t i = 0; i < nbufs; i++)
      w[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                    .dstBinding = i,
                                    .descriptorCount = 1,
                                    .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                    .pBufferInfo = &bind->bufs[i]};
    for (uint32_t i = 0; i < nviews; i++)
      w[nbufs + i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                            .dstBinding = VK_MAX_PUSH_BUFFERS + i,
                                            .descriptorCount = 1,
                                            .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER,
                                            .pTexelBufferView = &bind->views[i]};
    d->vk.vkCmdPushDescriptorSetKHR(b->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, vk_pipeline_layout(d), 0, nbufs + nviews,
                                    w);
  }
  if (gx && gy && gz) d->vk.vkCmdDispatch(b->cmd, gx, gy, gz);
  return after_command(s, b);
}

/* ---- events -------------------------------------------------------------- */
/* UNIMPLEMENTED naming the missing extension, or BP_OK. */
static bp_status_t need_semaphore_fd(const struct bpp_device_s* d, const char* what) {
  if (d->feat.semaphore_fd_ext && d->vk.vkGetSemaphoreFdKHR && d->vk.vkImportSemaphoreFdKHR)
    return BP_OK;
  return vk_error(BP_UNIMPLEMENTED,
                  "vulkan: %s: device %s lacks VK_KHR_external_semaphore_fd (no shareable "
                  "semaphores)",
                  what, d->props.name);
}

/* A timeline semaphore at 0, exportable as an opaque fd when asked. */
static bp_status_t timeline_create(struct bpp_device_s* d, int exportable, VkSemaphore* out) {
  VkExportSemaphoreCreateInfo ex = {.sType = VK_STRUCTURE_TYPE_EXPORT_SEMAPHORE_CREATE_INFO,
                                    .handleTypes = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
  VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                  .pNext = exportable ? &ex : NULL,
                                  .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
  VkSemaphoreCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
  VkResult r = d->vk.vkCreateSemaphore(d->dev, &sci, NULL, out);
  if (r != VK_SUCCESS)
    return vk_error(vk_status_of(r), "vulkan: vkCreateSemaphore failed: %s", vk_result_name(r));
  return BP_OK;
}

/* Export: a new fd of the event's timeline semaphore (the receiver owns
 * it); `value` is what the last record signals, so a receiver that waits
 * for it waits for the work recorded so far. Later records signal higher
 * values that the receiver does not learn. */
bp_status_t vk_event_export(bpp_event_t e, bp_external_event_desc_t* out) {
  if (!e || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_export: NULL argument");
  if (out->struct_size < BP_EXTERNAL_EVENT_DESC_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_export: out struct_size %u too small",
                    out->struct_size);
  if (out->kind != BP_EXTERNAL_OPAQUE_FD)
    return vk_error(BP_UNIMPLEMENTED,
                    "vulkan: event_export: kind %u: timeline semaphores export as OPAQUE_FD only "
                    "(a sync fd is a binary payload)",
                    out->kind);
  struct bpp_device_s* d = e->dev;
  bp_status_t st = need_semaphore_fd(d, "event_export");
  if (st != BP_OK) return st;
  VkSemaphoreGetFdInfoKHR gi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_GET_FD_INFO_KHR,
                                .semaphore = e->sem,
                                .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT};
  int fd = -1;
  VkResult r = d->vk.vkGetSemaphoreFdKHR(d->dev, &gi, &fd);
  if (r != VK_SUCCESS)
    return vk_error(vk_status_of(r), "vulkan: event_export: vkGetSemaphoreFdKHR failed: %s",
                    vk_result_name(r));
  wait_submitted(e); /* the importer's queue must not wait for an unsubmitted value */
  out->fd = fd;
  out->value = e->counter;
  return BP_OK;
}

/* Import: the other side's timeline semaphore; waits (stream_wait_event,
 * event_synchronize, event_query) are for desc->value, on the device, with
 * no host thread. Takes the fd on success. */
bp_status_t vk_event_import(bpp_device_t d, const bp_external_event_desc_t* desc, bpp_event_t* out) {
  if (out) *out = NULL;
  if (!d || !desc || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_import: NULL argument");
  if (desc->struct_size < BP_EXTERNAL_EVENT_DESC_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_import: desc struct_size %u too small",
                    desc->struct_size);
  if (desc->kind != BP_EXTERNAL_OPAQUE_FD)
    return vk_error(BP_UNIMPLEMENTED,
                    "vulkan: event_import: kind %u: timeline semaphores import as OPAQUE_FD only",
                    desc->kind);
  bp_status_t st = need_semaphore_fd(d, "event_import");
  if (st != BP_OK) return st;
  if (desc->fd < 0 || desc->fd > INT32_MAX)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_import: fd %lld is not a file descriptor",
                    (long long)desc->fd);
  struct bpp_event_s* e = calloc(1, sizeof *e);
  if (!e) return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  e->dev = d;
  atomic_init(&e->refs, 1);
  e->imported = 1;
  e->counter = desc->value;
  if ((st = timeline_create(d, 0, &e->sem)) != BP_OK) {
    free(e);
    return st;
  }
  VkImportSemaphoreFdInfoKHR ii = {.sType = VK_STRUCTURE_TYPE_IMPORT_SEMAPHORE_FD_INFO_KHR,
                                   .semaphore = e->sem,
                                   .handleType = VK_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD_BIT,
                                   .fd = (int)desc->fd};
  VkResult r = d->vk.vkImportSemaphoreFdKHR(d->dev, &ii);
  if (r != VK_SUCCESS) {
    d->vk.vkDestroySemaphore(d->dev, e->sem, NULL);
    free(e);
    return vk_error(r == VK_ERROR_INVALID_EXTERNAL_HANDLE ? BP_INVALID_ARGUMENT : vk_status_of(r),
                    "vulkan: event_import: vkImportSemaphoreFdKHR failed: %s", vk_result_name(r));
  }
  *out = e;
  return BP_OK;
}

bp_status_t vk_event_create(bpp_device_t d, const bp_event_create_info_t* info, bpp_event_t* out) {
  if (!d || !info || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_create: NULL argument");
  *out = NULL;
  if (info->struct_size < BP_EVENT_CREATE_INFO_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_create: info struct_size %u too small", info->struct_size);
  const uint32_t flags = info->flags;
  if (flags & ~(uint32_t)(BP_EVENT_TIMING | BP_EVENT_EXPORTABLE))
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_create: unknown flags 0x%x", flags);
  bp_status_t st = BP_OK;
  if ((flags & BP_EVENT_EXPORTABLE) && (st = need_semaphore_fd(d, "event_create")) != BP_OK)
    return st;
  struct bpp_event_s* e = calloc(1, sizeof *e);
  if (!e) return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  e->dev = d;
  atomic_init(&e->refs, 1);
  if ((st = timeline_create(d, (flags & BP_EVENT_EXPORTABLE) != 0, &e->sem)) != BP_OK) {
    free(e);
    return st;
  }
  VkResult r = VK_SUCCESS;
  if ((flags & BP_EVENT_TIMING) && d->feat.timestamp_bits) {
    VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                .queryType = VK_QUERY_TYPE_TIMESTAMP,
                                .queryCount = 1};
    r = d->vk.vkCreateQueryPool(d->dev, &qi, NULL, &e->query);
    if (r != VK_SUCCESS) {
      d->vk.vkDestroySemaphore(d->dev, e->sem, NULL);
      free(e);
      return vk_error(vk_status_of(r), "vulkan: vkCreateQueryPool failed: %s", vk_result_name(r));
    }
  }
  *out = e;
  return BP_OK;
}

void vk_event_destroy(bpp_event_t e) {
  if (!e) return;
  struct bpp_device_s* d = e->dev;
  /* The core destroys events after every use retired; wait for the last
   * signal anyway so the semaphore is not in use. */
  if (e->counter && !e->imported) { /* an imported one is signaled elsewhere */
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                              .semaphoreCount = 1, .pSemaphores = &e->sem, .pValues = &e->counter};
    d->vk.vkWaitSemaphores(d->dev, &wi, UINT64_MAX);
  }
  event_unref(e);
}

bp_status_t vk_event_record(bpp_event_t e, bpp_stream_t s) {
  if (!e || !s) return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_record: NULL argument");
  if (e->dev != s->dev) return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_record: event and stream of different devices");
  if (e->imported)
    return vk_error(BP_FAILED_PRECONDITION,
                    "vulkan: event_record: an imported event is signaled by its exporter only");
  vk_batch_t* b;
  bp_status_t st = cur_batch(s, &b);
  if (st) return st;
  if (b->nsignals >= 64) { /* one submit signals at most 64 events */
    if ((st = vk_stream_flush(s)) != BP_OK || (st = cur_batch(s, &b)) != BP_OK) return st;
  }
  if (grow((void**)&b->signals, &b->cap_signals, b->nsignals + 1, sizeof *b->signals))
    return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: out of host memory");
  if (e->query) {
    s->dev->vk.vkCmdResetQueryPool(b->cmd, e->query, 0, 1);
    s->dev->vk.vkCmdWriteTimestamp(b->cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, e->query, 0);
    e->timed = 1;
  }
  atomic_fetch_add(&e->refs, 1);
  b->signals[b->nsignals].event = e;
  b->signals[b->nsignals].sem = e->sem;
  b->signals[b->nsignals++].value = ++e->counter;
  return vk_stream_flush(s);
}

bp_status_t vk_stream_wait_event(bpp_stream_t s, bpp_event_t e) {
  if (!e || !s) return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_wait_event: NULL argument");
  if (e->dev != s->dev) return vk_error(BP_INVALID_ARGUMENT, "vulkan: stream_wait_event: event of another device");
  if (!e->counter) return BP_OK; /* never recorded: nothing to wait for */
  bp_status_t st = vk_stream_flush(s);
  if (st) return st;
  /* The recording batch may still be deferred behind host actions of its
   * stream; a submission waiting for it now would stall the shared queue,
   * so wait here until its completion thread submitted it. */
  wait_submitted(e);
  if (s->num_waits == VK_MAX_WAITS) {
    vk_batch_t* b;
    if ((st = cur_batch(s, &b)) != BP_OK || (st = vk_stream_flush(s)) != BP_OK) return st;
  }
  for (uint32_t i = 0; i < s->num_waits; i++)
    if (s->wait_sems[i] == e->sem) {
      if (s->wait_values[i] < e->counter) s->wait_values[i] = e->counter;
      return BP_OK;
    }
  s->wait_sems[s->num_waits] = e->sem;
  s->wait_values[s->num_waits++] = e->counter;
  return BP_OK;
}

bp_status_t vk_event_query(bpp_event_t e) {
  if (!e) return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_query: NULL event");
  if (!e->counter) return BP_OK;
  uint64_t v = 0;
  VkResult r = e->dev->vk.vkGetSemaphoreCounterValue(e->dev->dev, e->sem, &v);
  if (r != VK_SUCCESS) return vk_error(vk_status_of(r), "vulkan: vkGetSemaphoreCounterValue failed: %s", vk_result_name(r));
  return v >= e->counter ? BP_OK : BP_NOT_READY;
}

bp_status_t vk_event_synchronize(bpp_event_t e) {
  if (!e) return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_synchronize: NULL event");
  if (!e->counter) return BP_OK;
  uint64_t v = e->counter;
  VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
                            .semaphoreCount = 1, .pSemaphores = &e->sem, .pValues = &v};
  VkResult r = e->dev->vk.vkWaitSemaphores(e->dev->dev, &wi, UINT64_MAX);
  if (r != VK_SUCCESS) return vk_error(vk_status_of(r), "vulkan: vkWaitSemaphores failed: %s", vk_result_name(r));
  return BP_OK;
}

bp_status_t vk_event_elapsed_ns(bpp_event_t a, bpp_event_t b, uint64_t* out_ns) {
  if (!a || !b || !out_ns) return vk_error(BP_INVALID_ARGUMENT, "vulkan: event_elapsed_ns: NULL argument");
  if (!a->query || !b->query || !a->timed || !b->timed)
    return vk_error(BP_FAILED_PRECONDITION, "vulkan: event_elapsed_ns: both events must be created with timing and recorded");
  bp_status_t st;
  if ((st = vk_event_query(a)) != BP_OK || (st = vk_event_query(b)) != BP_OK)
    return st == BP_NOT_READY ? vk_error(BP_NOT_READY, "vulkan: event_elapsed_ns: an event has not completed") : st;
  struct bpp_device_s* d = a->dev;
  uint64_t ta = 0, tb = 0;
  VkResult r = d->vk.vkGetQueryPoolResults(d->dev, a->query, 0, 1, sizeof ta, &ta, sizeof ta, VK_QUERY_RESULT_64_BIT);
  if (r == VK_SUCCESS)
    r = d->vk.vkGetQueryPoolResults(d->dev, b->query, 0, 1, sizeof tb, &tb, sizeof tb, VK_QUERY_RESULT_64_BIT);
  if (r != VK_SUCCESS) return vk_error(vk_status_of(r), "vulkan: vkGetQueryPoolResults failed: %s", vk_result_name(r));
  uint32_t bits = d->feat.timestamp_bits;
  uint64_t mask = bits >= 64 ? UINT64_MAX : ((1ull << bits) - 1);
  uint64_t ticks = (tb - ta) & mask;
  *out_ns = (uint64_t)((double)ticks * d->feat.timestamp_period);
  return BP_OK;
}
