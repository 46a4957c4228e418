/* Opening libcuda and resolving the entry points of cuda_symbols.h. */
#include <stdio.h>
#include <stdlib.h>

#include "cuda_internal.h"

#define BP_KIT_SYMBOL_TABLE cuda_symbols_t
#define CUDA_SYM_REQ(name) {#name, offsetof(cuda_symbols_t, name), 1},
#define CUDA_SYM_OPT(name) {#name, offsetof(cuda_symbols_t, name), 0},
static const bp_kit_symbol_t k_cuda_symbols[] = {
    CUDA_SYMBOLS(CUDA_SYM_REQ, CUDA_SYM_OPT)
    {"cuEventElapsedTime", offsetof(cuda_symbols_t, cuEventElapsedTime_v1), 0}};
#undef BP_KIT_SYMBOL_TABLE

bp_status_t cuda_symbols_load(cuda_symbols_t* syms, void** out_lib, char* msg, size_t msg_cap) {
  const char* path = getenv("BP_CUDA_DRIVER_PATH");
  const char* names[1] = {path && *path ? path : "libcuda.so.1"};
  char why[384];
  void* lib = NULL;
  if (bp_kit_library_open(names, 1, &lib, why, sizeof why) != BP_OK) {
    snprintf(msg, msg_cap, "no CUDA driver (%s)", why);
    return BP_UNAVAILABLE;
  }
  bp_status_t st = bp_kit_symbols_load(syms, k_cuda_symbols, BP_KIT_COUNT(k_cuda_symbols),
                                       bp_kit_dlsym, lib, names[0], msg, msg_cap);
  if (st == BP_OK && !syms->cuEventElapsedTime_v2 && !syms->cuEventElapsedTime_v1) {
    snprintf(msg, msg_cap, "%s lacks cuEventElapsedTime", names[0]);
    st = BP_UNAVAILABLE;
  }
  if (st != BP_OK) {
    bp_kit_library_close(lib);
    return st;
  }
  *out_lib = lib;
  return BP_OK;
}
