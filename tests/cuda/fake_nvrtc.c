/* A fake NVRTC (fake_libnvrtc.so.1, found by the plugin through
 * BP_NVRTC_PATH): records every program's source and options and returns
 * PTX whose one entry point is the generated kernel the source defines
 * (bp_ew_gen_<v>, with the interpreter's 9 parameters), which the fake
 * driver runs as the interpreter (fake_kernels.c). FAKE_NVRTC_FAIL=1
 * makes compiles fail with a log. The control entry fake_nvrtc_record
 * gives the tests the count and the last source and options. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

typedef struct fake_prog {
  char* src;
  char* ptx;
  char log[128];
} fake_prog_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_compiles, g_live;
static char g_last_opts[512];
static char* g_last_src;

FAKE_EXPORT const char* nvrtcGetErrorString(int r) { return r == 0 ? "NVRTC_SUCCESS" : "NVRTC_ERROR_COMPILATION"; }

FAKE_EXPORT int nvrtcVersion(int* major, int* minor) {
  *major = 13;
  *minor = 0;
  return 0;
}

FAKE_EXPORT int nvrtcCreateProgram(fake_prog_t** out, const char* src, const char* name, int nh,
                                   const char* const* h, const char* const* hn) {
  (void)name, (void)nh, (void)h, (void)hn;
  if (!out || !src) return 3; /* NVRTC_ERROR_INVALID_INPUT */
  fake_prog_t* p = calloc(1, sizeof *p);
  if (!p || !(p->src = strdup(src))) {
    free(p);
    return 1; /* NVRTC_ERROR_OUT_OF_MEMORY */
  }
  pthread_mutex_lock(&g_mu);
  g_live++;
  pthread_mutex_unlock(&g_mu);
  *out = p;
  return 0;
}

FAKE_EXPORT int nvrtcCompileProgram(fake_prog_t* p, int n, const char* const* opts) {
  pthread_mutex_lock(&g_mu);
  g_compiles++;
  g_last_opts[0] = 0;
  for (int i = 0; i < n; i++) {
    strncat(g_last_opts, opts[i], sizeof g_last_opts - strlen(g_last_opts) - 2);
    strcat(g_last_opts, " ");
  }
  free(g_last_src);
  g_last_src = strdup(p->src);
  pthread_mutex_unlock(&g_mu);
  const char* fail = getenv("FAKE_NVRTC_FAIL");
  if (fail && !strcmp(fail, "1")) {
    snprintf(p->log, sizeof p->log, "fake: compilation refused");
    return 6; /* NVRTC_ERROR_COMPILATION */
  }
  const char* k = strstr(p->src, "BP_KERNEL void bp_ew_gen_");
  if (!k) {
    snprintf(p->log, sizeof p->log, "fake: no generated kernel in the source");
    return 6;
  }
  char name[32] = "";
  sscanf(k + 15, "%31[a-z0-9_]", name);
  char ptx[1024];
  int len = snprintf(ptx, sizeof ptx, "// fake NVRTC output\n.version 8.0\n.visible .entry %s(\n", name);
  for (int i = 0; i < 9; i++)
    len += snprintf(ptx + len, sizeof ptx - (size_t)len, "  .param .u64 %s_param_%d%s\n", name, i, i < 8 ? "," : "");
  snprintf(ptx + len, sizeof ptx - (size_t)len, ")\n{\n  ret;\n}\n");
  p->ptx = strdup(ptx);
  return p->ptx ? 0 : 1;
}

FAKE_EXPORT int nvrtcGetPTXSize(fake_prog_t* p, size_t* n) {
  if (!p->ptx) return 3;
  *n = strlen(p->ptx) + 1;
  return 0;
}
FAKE_EXPORT int nvrtcGetPTX(fake_prog_t* p, char* out) {
  if (!p->ptx) return 3;
  memcpy(out, p->ptx, strlen(p->ptx) + 1);
  return 0;
}
FAKE_EXPORT int nvrtcGetProgramLogSize(fake_prog_t* p, size_t* n) {
  *n = strlen(p->log) + 1;
  return 0;
}
FAKE_EXPORT int nvrtcGetProgramLog(fake_prog_t* p, char* out) {
  memcpy(out, p->log, strlen(p->log) + 1);
  return 0;
}
FAKE_EXPORT int nvrtcDestroyProgram(fake_prog_t** p) {
  if (!p || !*p) return 3;
  free((*p)->src);
  free((*p)->ptx);
  free(*p);
  *p = NULL;
  pthread_mutex_lock(&g_mu);
  g_live--;
  pthread_mutex_unlock(&g_mu);
  return 0;
}

/* Compiles so far, programs alive, the last options and the end of the
 * last source (its last src_cap - 1 bytes: the generated kernel). */
FAKE_EXPORT void fake_nvrtc_record(int* compiles, int* live, char* opts, size_t opts_cap, char* src,
                                   size_t src_cap) {
  pthread_mutex_lock(&g_mu);
  *compiles = g_compiles;
  *live = g_live;
  snprintf(opts, opts_cap, "%s", g_last_opts);
  const char* t = g_last_src ? g_last_src : "";
  size_t n = strlen(t);
  if (n >= src_cap) t += n - (src_cap - 1);
  snprintf(src, src_cap, "%s", t);
  pthread_mutex_unlock(&g_mu);
}

__attribute__((destructor)) static void fake_nvrtc_fini(void) { free(g_last_src); }
