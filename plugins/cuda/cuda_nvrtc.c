/* NVRTC through dlopen (see cuda_nvrtc.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit_dynlib.h"
#include "cuda_nvrtc.h"

#define BP_CUDA_NVRTC_SYM(name, ret, params) {#name, offsetof(cuda_nvrtc_t, name), 1},
#define BP_CUDA_NVRTC_OPT(name, ret, params) {#name, offsetof(cuda_nvrtc_t, name), 0},
static const bp_kit_symbol_t k_nvrtc_symbols[] = {NVRTC_SYMBOLS(BP_CUDA_NVRTC_SYM, BP_CUDA_NVRTC_OPT)};
#undef BP_CUDA_NVRTC_SYM
#undef BP_CUDA_NVRTC_OPT

static void nvrtc_open(bpp_instance_t inst) {
  const char* env = getenv("BP_NVRTC_PATH");
  const char* names[3] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  uint32_t count = 3;
  if (env && *env) names[0] = env, count = 1;
  char msg[256];
  cuda_nvrtc_t* nv = calloc(1, sizeof *nv);
  if (!nv) {
    snprintf(inst->nvrtc_reason, sizeof inst->nvrtc_reason, "no NVRTC (out of host memory)");
    return;
  }
  if (bp_kit_library_open(names, count, &nv->lib, msg, sizeof msg) != BP_OK ||
      bp_kit_symbols_load(nv, k_nvrtc_symbols, BP_KIT_COUNT(k_nvrtc_symbols), bp_kit_dlsym, nv->lib, names[0], msg,
                          sizeof msg) != BP_OK) {
    snprintf(inst->nvrtc_reason, sizeof inst->nvrtc_reason, "no NVRTC (%s)", msg);
    if (nv->lib) bp_kit_library_close(nv->lib);
    free(nv);
    return;
  }
  if (nv->nvrtcVersion && nv->nvrtcVersion(&nv->version_major, &nv->version_minor) != 0)
    nv->version_major = nv->version_minor = 0;
  inst->nvrtc = nv;
}

void cuda_nvrtc_init(bpp_instance_t inst) { pthread_mutex_init(&inst->nvrtc_mu, NULL); }

const cuda_nvrtc_t* cuda_nvrtc_get(bpp_instance_t inst) {
  pthread_mutex_lock(&inst->nvrtc_mu);
  if (!inst->nvrtc_tried) {
    inst->nvrtc_tried = 1;
    nvrtc_open(inst);
  }
  const cuda_nvrtc_t* nv = inst->nvrtc;
  pthread_mutex_unlock(&inst->nvrtc_mu);
  return nv;
}

void cuda_nvrtc_close(bpp_instance_t inst) {
  if (inst->nvrtc) {
    /* The library stays loaded (its handle is dropped, not closed): NVRTC's
     * static C++ runtime keeps allocations that only process exit releases,
     * so unloading it would leak them. */
    free(inst->nvrtc);
    inst->nvrtc = NULL;
  }
  pthread_mutex_destroy(&inst->nvrtc_mu);
}

bp_status_t cuda_nvrtc_ptx(const cuda_nvrtc_t* nv, const char* text, const char* name, int major, int minor,
                           char** out_ptx) {
  *out_ptx = NULL;
  nvrtcProgram_t p = NULL;
  nvrtcResult_t r = nv->nvrtcCreateProgram(&p, text, name, 0, NULL, NULL);
  if (r != 0) return bp_kit_error(BP_INTERNAL, "cuda: nvrtcCreateProgram: %s", nv->nvrtcGetErrorString(r));
  char arch[48];
  snprintf(arch, sizeof arch, "--gpu-architecture=compute_%d%d", major, minor);
#define CUDA_NVRTC_OPTION_ITEM(o) o,
  const char* opts[] = {arch, CUDA_NVRTC_OPTIONS(CUDA_NVRTC_OPTION_ITEM)};
#undef CUDA_NVRTC_OPTION_ITEM
  r = nv->nvrtcCompileProgram(p, (int)BP_KIT_COUNT(opts), opts);
  bp_status_t st = BP_OK;
  if (r != 0) {
    size_t n = 0;
    char log[400] = "";
    if (nv->nvrtcGetProgramLogSize(p, &n) == 0 && n > 0) {
      char* full = malloc(n + 1);
      if (full && nv->nvrtcGetProgramLog(p, full) == 0) snprintf(log, sizeof log, "%s", full);
      free(full);
    }
    st = bp_kit_error(BP_INTERNAL, "cuda: NVRTC compiling %s for %s: %s: %s", name, arch + 19,
                      nv->nvrtcGetErrorString(r), log);
  } else {
    size_t n = 0;
    char* ptx = NULL;
    if (nv->nvrtcGetPTXSize(p, &n) != 0 || n == 0 || !(ptx = malloc(n + 1)) || nv->nvrtcGetPTX(p, ptx) != 0) {
      free(ptx);
      st = bp_kit_error(BP_INTERNAL, "cuda: NVRTC returned no PTX for %s", name);
    } else {
      ptx[n] = 0;
      *out_ptx = ptx;
    }
  }
  nv->nvrtcDestroyProgram(&p);
  return st;
}
