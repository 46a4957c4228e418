/* CUDA graphs in the fake driver: stream capture records the calls a
 * capturing stream is given (kernel launches and library calls, each a
 * flat job) into a graph; an instantiated graph replays copies of them in
 * order on the stream it is launched on.
 *
 * Rules enforced (as the driver does): a capture ends on the thread that
 * began it (THREAD_LOCAL, GLOBAL); a capture that saw an illegal call
 * (synchronizing or querying the capturing stream, allocating, freeing,
 * loading a module from the capturing thread, or, in GLOBAL mode, from
 * any thread) ends with CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; an update
 * keeps the graph's topology (same nodes, same kernels) or fails with
 * CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE. Beyond the driver, the fake
 * captures nothing but launches and library calls: a copy, memset, event
 * or host function on a capturing stream invalidates the capture
 * (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). Built without the graph entry
 * points when FAKE_CUDA_NO_GRAPHS is defined (a driver that lacks them).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"

#define FAKE_EXPORT __attribute__((visibility("default")))

CUresult fake_cuda_enter(const char* name);
void fake_cuda_misuse(const char* what);
CUresult fake_cuda_enqueue_call(const char* name, CUstream h, void (*fn)(void*), void* user,
                                size_t size, const void* key);
CUresult fake_stream_begin_capture(const char* name, CUstream h, void* graph, int mode);
CUresult fake_stream_end_capture(const char* name, CUstream h, void** out_graph);
int fake_stream_capturing(CUstream h);

typedef struct gnode {
  void (*fn)(void*);
  void* user;
  size_t size;
  const void* key;
} gnode_t;

typedef struct fgraph {
  struct fgraph* next;
  uint32_t magic;
  int n, cap;
  gnode_t* nodes;
} fgraph_t;
#define GRAPH_MAGIC 0x47524150u
#define EXEC_MAGIC 0x47455845u

static pthread_mutex_t g_graph_mu = PTHREAD_MUTEX_INITIALIZER;
static fgraph_t* g_graphs; /* graphs and execs alive */

static void graph_clear(fgraph_t* g) {
  for (int i = 0; i < g->n; ++i) free(g->nodes[i].user);
  free(g->nodes);
  g->nodes = NULL;
  g->n = g->cap = 0;
}

__attribute__((unused)) static fgraph_t* graph_new(uint32_t magic) {
  fgraph_t* g = calloc(1, sizeof *g);
  if (!g) return NULL;
  g->magic = magic;
  pthread_mutex_lock(&g_graph_mu);
  g->next = g_graphs;
  g_graphs = g;
  pthread_mutex_unlock(&g_graph_mu);
  return g;
}

/* Unlinks and frees `g` when it is a live object of `magic`; 0 if not. */
__attribute__((unused)) static int graph_free(void* h, uint32_t magic) {
  pthread_mutex_lock(&g_graph_mu);
  fgraph_t* found = NULL;
  for (fgraph_t** p = &g_graphs; *p; p = &(*p)->next)
    if (*p == h && (*p)->magic == magic) {
      found = *p;
      *p = found->next;
      break;
    }
  pthread_mutex_unlock(&g_graph_mu);
  if (!found) return 0;
  graph_clear(found);
  found->magic = 0;
  free(found);
  return 1;
}

__attribute__((unused)) static fgraph_t* graph_find(void* h, uint32_t magic) {
  pthread_mutex_lock(&g_graph_mu);
  fgraph_t* found = NULL;
  for (fgraph_t* g = g_graphs; g; g = g->next)
    if (g == h && g->magic == magic) found = g;
  pthread_mutex_unlock(&g_graph_mu);
  return found;
}

static int node_copy(gnode_t* dst, const gnode_t* src) {
  *dst = *src;
  dst->user = malloc(src->size ? src->size : 1);
  if (!dst->user) return -1;
  memcpy(dst->user, src->user, src->size);
  return 0;
}

static CUresult graph_push(fgraph_t* g, const gnode_t* n) {
  if (g->n == g->cap) {
    int cap = g->cap ? 2 * g->cap : 8;
    gnode_t* p = realloc(g->nodes, sizeof *p * (size_t)cap);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    g->nodes = p;
    g->cap = cap;
  }
  if (node_copy(&g->nodes[g->n], n)) return CUDA_ERROR_OUT_OF_MEMORY;
  g->n++;
  return CUDA_SUCCESS;
}

/* Called with the capturing stream's job (copied; the caller frees its own). */
CUresult fake_graph_add(void* graph, void (*fn)(void*), void* user, size_t size, const void* key) {
  gnode_t n = {fn, user, size, key};
  return graph_push(graph, &n);
}

uint64_t fake_graph_live(void) {
  uint64_t n = 0;
  pthread_mutex_lock(&g_graph_mu);
  for (fgraph_t* g = g_graphs; g; g = g->next) n++;
  pthread_mutex_unlock(&g_graph_mu);
  return n;
}

#ifndef FAKE_CUDA_NO_GRAPHS
FAKE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode mode) {
  CUresult r = fake_cuda_enter("cuStreamBeginCapture_v2");
  if (r != CUDA_SUCCESS) return r;
  fgraph_t* g = graph_new(GRAPH_MAGIC);
  if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
  r = fake_stream_begin_capture("cuStreamBeginCapture_v2", h, g, (int)mode);
  if (r != CUDA_SUCCESS) graph_free(g, GRAPH_MAGIC);
  return r;
}

FAKE_EXPORT CUresult cuStreamEndCapture(CUstream h, CUgraph* out) {
  CUresult r = fake_cuda_enter("cuStreamEndCapture");
  if (r != CUDA_SUCCESS) {
    /* An injected failure still ends the capture, as an invalidated one. */
    void* g = NULL;
    if (fake_stream_end_capture("cuStreamEndCapture", h, &g) == CUDA_SUCCESS || g)
      graph_free(g, GRAPH_MAGIC);
    if (out) *out = NULL;
    return r;
  }
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  void* g = NULL;
  r = fake_stream_end_capture("cuStreamEndCapture", h, &g);
  if (r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) {
    graph_free(g, GRAPH_MAGIC);
    g = NULL;
  }
  *out = r == CUDA_SUCCESS ? (CUgraph)g : NULL;
  return r;
}

FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* out, CUgraph h, unsigned long long flags) {
  CUresult r = fake_cuda_enter("cuGraphInstantiateWithFlags");
  if (r != CUDA_SUCCESS) return r;
  fgraph_t* g = graph_find(h, GRAPH_MAGIC);
  if (!g || !out || flags) {
    if (!g) fake_cuda_misuse("cuGraphInstantiate: unknown graph");
    return CUDA_ERROR_INVALID_VALUE;
  }
  fgraph_t* x = graph_new(EXEC_MAGIC);
  if (!x) return CUDA_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < g->n; ++i)
    if ((r = graph_push(x, &g->nodes[i])) != CUDA_SUCCESS) {
      graph_free(x, EXEC_MAGIC);
      return r;
    }
  *out = (CUgraphExec)x;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec hx, CUgraph h, CUgraphExecUpdateResultInfo* info) {
  CUresult r = fake_cuda_enter("cuGraphExecUpdate_v2");
  if (r != CUDA_SUCCESS) return r;
  fgraph_t *x = graph_find(hx, EXEC_MAGIC), *g = graph_find(h, GRAPH_MAGIC);
  if (!x || !g || !info) {
    fake_cuda_misuse("cuGraphExecUpdate: unknown graph or exec");
    return CUDA_ERROR_INVALID_VALUE;
  }
  memset(info, 0, sizeof *info);
  int same = x->n == g->n;
  for (int i = 0; same && i < g->n; ++i)
    same = x->nodes[i].fn == g->nodes[i].fn && x->nodes[i].key == g->nodes[i].key &&
           x->nodes[i].size == g->nodes[i].size;
  if (!same) {
    info->result = x->n == g->n ? CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED
                                : CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
  }
  for (int i = 0; i < g->n; ++i) memcpy(x->nodes[i].user, g->nodes[i].user, g->nodes[i].size);
  info->result = CU_GRAPH_EXEC_UPDATE_SUCCESS;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec hx, CUstream h) {
  CUresult r = fake_cuda_enter("cuGraphLaunch");
  if (r != CUDA_SUCCESS) return r;
  fgraph_t* x = graph_find(hx, EXEC_MAGIC);
  if (!x) {
    fake_cuda_misuse("cuGraphLaunch: unknown graph exec");
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (fake_stream_capturing(h)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* fake limit */
  /* The exec is immutable while it is launched (updates and destroys come
   * from the launching thread, per the driver's rules). */
  for (int i = 0; i < x->n; ++i) {
    gnode_t c;
    if (node_copy(&c, &x->nodes[i])) return CUDA_ERROR_OUT_OF_MEMORY;
    r = fake_cuda_enqueue_call("cuGraphLaunch", h, c.fn, c.user, c.size, c.key);
    if (r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hx) {
  CUresult r = fake_cuda_enter("cuGraphExecDestroy");
  if (r != CUDA_SUCCESS) return r;
  if (!graph_free(hx, EXEC_MAGIC)) {
    fake_cuda_misuse("cuGraphExecDestroy: unknown graph exec (destroyed twice?)");
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphDestroy(CUgraph h) {
  CUresult r = fake_cuda_enter("cuGraphDestroy");
  if (r != CUDA_SUCCESS) return r;
  if (!graph_free(h, GRAPH_MAGIC)) {
    fake_cuda_misuse("cuGraphDestroy: unknown graph (destroyed twice?)");
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
#endif /* FAKE_CUDA_NO_GRAPHS */
