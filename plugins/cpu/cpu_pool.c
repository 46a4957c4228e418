/* backplane CPU plugin: the global kernel thread pool.
 *
 * One pool per process, sized to the online cores: (cores - 1) threads plus
 * the calling stream worker. A thread that finished a job polls for the
 * next one for a few tens of microseconds, then blocks on a condition
 * variable; the caller likewise polls for the job's end before it blocks.
 * Ops issued back to back (a decode step's small matmuls) so find the pool
 * awake and pay no futex wake-up and sleep per op, which under a hypervisor
 * cost more than a small op itself; a thread left idle sleeps soon, and
 * leaves the cores to BLAS threads while a GEMM runs.
 * One parallel_for runs at a time; a second caller (another stream) runs its
 * range inline instead of waiting, which also makes nested calls safe.
 */
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "cpu_internal.h"

typedef struct cpu_pool {
  pthread_mutex_t mu;
  pthread_cond_t work_cv; /* new job or stop */
  pthread_cond_t done_cv; /* a chunk or a helper finished */
  pthread_mutex_t job_mu; /* held by the caller for a whole job */
  pthread_t* threads;
  uint32_t nthreads;
  _Atomic int stop;
  _Atomic uint64_t generation; /* written under mu; polled without it */
  /* Current job (written under mu before generation++). */
  cpu_range_fn fn;
  void* ctx;
  int64_t n, chunk, nchunks;
  _Atomic int64_t next;
  _Atomic int64_t done;
  _Atomic int active; /* helpers inside the current job; written under mu, polled without it */
} cpu_pool_t;

/* Polls (pause instructions, tens of cycles each) before blocking. */
#define CPU_POOL_SPINS 2000

static inline void pool_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static cpu_pool_t* g_pool;
static uint32_t g_pool_refs;

uint32_t cpu_online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (uint32_t)n : 1u;
}

static void run_chunks(cpu_pool_t* p, cpu_range_fn fn, void* ctx, int64_t n, int64_t chunk,
                       int64_t nchunks) {
  for (;;) {
    int64_t c = atomic_fetch_add(&p->next, 1);
    if (c >= nchunks) break;
    int64_t b = c * chunk, e = b + chunk < n ? b + chunk : n;
    fn(ctx, b, e);
    if (atomic_fetch_add(&p->done, 1) + 1 == nchunks) {
      pthread_mutex_lock(&p->mu);
      pthread_cond_broadcast(&p->done_cv);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

static void* pool_main(void* arg) {
  cpu_pool_t* p = arg;
  bp_plugin_set_worker_thread(1);
  pthread_mutex_lock(&p->mu);
  uint64_t seen = p->generation;
  for (;;) {
    pthread_mutex_unlock(&p->mu);
    for (int s = 0; s < CPU_POOL_SPINS && atomic_load(&p->generation) == seen && !atomic_load(&p->stop); s++)
      pool_relax();
    pthread_mutex_lock(&p->mu);
    while (p->generation == seen && !p->stop) pthread_cond_wait(&p->work_cv, &p->mu);
    if (p->stop) break;
    seen = p->generation;
    cpu_range_fn fn = p->fn;
    void* ctx = p->ctx;
    int64_t n = p->n, chunk = p->chunk, nchunks = p->nchunks;
    p->active++;
    pthread_mutex_unlock(&p->mu);
    run_chunks(p, fn, ctx, n, chunk, nchunks);
    pthread_mutex_lock(&p->mu);
    if (--p->active == 0) pthread_cond_broadcast(&p->done_cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

static void pool_destroy(cpu_pool_t* p) {
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  for (uint32_t i = 0; i < p->nthreads; i++) pthread_join(p->threads[i], NULL);
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->job_mu);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  free(p->threads);
  free(p);
}

bp_status_t cpu_pool_acquire(void) {
  bp_status_t st = BP_OK;
  pthread_mutex_lock(&g_pool_lock);
  if (g_pool_refs++ > 0) goto cleanup;
  cpu_pool_t* p = calloc(1, sizeof *p);
  uint32_t want = cpu_online_cores() - 1;
  if (!p || (want && !(p->threads = calloc(want, sizeof(pthread_t))))) {
    free(p);
    g_pool_refs--;
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: cannot allocate the thread pool");
    goto cleanup;
  }
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->job_mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  for (uint32_t i = 0; i < want; i++) {
    if (pthread_create(&p->threads[i], NULL, pool_main, p) != 0) break; /* fewer threads is fine */
    p->nthreads++;
  }
  g_pool = p;
cleanup:
  pthread_mutex_unlock(&g_pool_lock);
  return st;
}

void cpu_pool_release(void) {
  pthread_mutex_lock(&g_pool_lock);
  if (g_pool_refs > 0 && --g_pool_refs == 0 && g_pool) {
    pool_destroy(g_pool);
    g_pool = NULL;
  }
  pthread_mutex_unlock(&g_pool_lock);
}

uint32_t cpu_pool_threads(void) {
  cpu_pool_t* p = g_pool;
  return p ? p->nthreads + 1 : 1;
}

void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void* ctx) {
  if (n <= 0) return;
  cpu_pool_t* p = g_pool;
  if (grain < 1) grain = 1;
  int64_t parts = p ? (int64_t)p->nthreads + 1 : 1;
  int64_t max_chunks = (n + grain - 1) / grain;
  int64_t nchunks = parts * 4 < max_chunks ? parts * 4 : max_chunks;
  if (nchunks <= 1 || parts <= 1 || pthread_mutex_trylock(&p->job_mu) != 0) {
    fn(ctx, 0, n);
    return;
  }
  /* Equal chunks of whole grains keep bandwidth-bound loops balanced. */
  int64_t chunk = (n + nchunks - 1) / nchunks;
  nchunks = (n + chunk - 1) / chunk;
  pthread_mutex_lock(&p->mu);
  /* A helper still inside the previous job would take chunks of this one
   * with the old function: wait until every helper left it. */
  while (p->active > 0) pthread_cond_wait(&p->done_cv, &p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->n = n;
  p->chunk = chunk;
  p->nchunks = nchunks;
  atomic_store(&p->next, 0);
  atomic_store(&p->done, 0);
  p->generation++;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  run_chunks(p, fn, ctx, n, chunk, nchunks);
  for (int s = 0; s < CPU_POOL_SPINS && (atomic_load(&p->done) < nchunks || atomic_load(&p->active) > 0); s++)
    pool_relax();
  pthread_mutex_lock(&p->mu);
  while (atomic_load(&p->done) < nchunks || p->active > 0) pthread_cond_wait(&p->done_cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->job_mu);
}
