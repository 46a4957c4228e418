/* backplane plugin kit: vendor libraries opened at run time, and tables of
 * their symbols declared once as X-macros (in the style of IREE's
 * dynamic_symbols).
 *
 * Vendor SDKs are dlopen'd, never linked, so a plugin loads on a machine
 * without the driver and answers UNAVAILABLE with the reason. The table of
 * resolved functions is also the unit tests' seam: tests fill it with
 * fakes.
 *
 * Declaring a table: a list macro names every symbol with its function
 * pointer type, marked required (REQ) or optional (OPT):
 *
 *   #define CU_SYMBOLS(REQ, OPT)                       \
 *     REQ(PFN_cuInit, cuInit)                          \
 *     REQ(PFN_cuDeviceGetCount, cuDeviceGetCount)      \
 *     OPT(PFN_cuMemAllocAsync, cuMemAllocAsync)
 *   typedef struct cu_symbols {
 *     CU_SYMBOLS(BP_KIT_SYMBOL_FIELD, BP_KIT_SYMBOL_FIELD)
 *   } cu_symbols_t;
 *   #define BP_KIT_SYMBOL_TABLE cu_symbols_t
 *   static const bp_kit_symbol_t k_cu_symbols[] = {
 *     CU_SYMBOLS(BP_KIT_SYMBOL_REQUIRED, BP_KIT_SYMBOL_OPTIONAL)};
 *   #undef BP_KIT_SYMBOL_TABLE
 *
 * Loading it:
 *
 *   static const char* const k_names[] = {"libcuda.so.1", "libcuda.so"};
 *   void* lib;
 *   char msg[512];
 *   if (bp_kit_library_open(k_names, 2, &lib, msg, sizeof msg) ||
 *       bp_kit_symbols_load(&syms, k_cu_symbols, BP_KIT_COUNT(k_cu_symbols),
 *                           bp_kit_dlsym, lib, "libcuda.so.1", msg, sizeof msg))
 *     return bp_kit_error(BP_UNAVAILABLE, "cuda: %s", msg);
 *
 * Every function here is thread-safe (dlopen/dlsym are) and keeps no state.
 */
#ifndef BACKPLANE_KIT_DYNLIB_H_
#define BACKPLANE_KIT_DYNLIB_H_

#include <stddef.h>
#include <stdint.h>

#include "backplane/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One symbol of a table: its name and where its pointer lives. */
typedef struct bp_kit_symbol {
  const char* name;
  size_t offset;    /* of the pointer inside the table struct */
  uint32_t required; /* 1: missing fails the load; 0: left NULL */
} bp_kit_symbol_t;

#define BP_KIT_SYMBOL_FIELD(type, name) type name;
/* Entries of a bp_kit_symbol_t array; BP_KIT_SYMBOL_TABLE names the table
 * struct where the list is expanded. */
#define BP_KIT_SYMBOL_REQUIRED(type, name) {#name, offsetof(BP_KIT_SYMBOL_TABLE, name), 1},
#define BP_KIT_SYMBOL_OPTIONAL(type, name) {#name, offsetof(BP_KIT_SYMBOL_TABLE, name), 0},
#define BP_KIT_COUNT(array) ((uint32_t)(sizeof(array) / sizeof((array)[0])))

/* Finds one symbol: `ctx` is what bp_kit_symbols_load was given (a dlopen
 * handle, a VkInstance, ...). NULL when absent. */
typedef void* (*bp_kit_resolve_fn)(void* ctx, const char* name);
/* The resolver for dlopen handles: dlsym(ctx, name). */
void* bp_kit_dlsym(void* handle, const char* name);

/* dlopen's the first of `names` that loads (RTLD_NOW | RTLD_LOCAL). On
 * failure returns UNAVAILABLE with every name and its dlerror() text in
 * `msg` ("cannot load libcuda.so.1 (...); libcuda.so (...)"). Close the
 * handle with bp_kit_library_close. */
bp_status_t bp_kit_library_open(const char* const* names, uint32_t count, void** out_handle,
                                char* msg, size_t msg_cap);
void bp_kit_library_close(void* handle);

/* Resolves every symbol of `symbols` through `resolve(ctx, name)` into
 * `table`. A missing required symbol returns UNAVAILABLE with "<from>
 * lacks <name>" (and the dlerror() text when there is one) in `msg`; a
 * missing optional one is left NULL. `table` is written only on success. */
bp_status_t bp_kit_symbols_load(void* table, const bp_kit_symbol_t* symbols, uint32_t count,
                                bp_kit_resolve_fn resolve, void* ctx, const char* from, char* msg,
                                size_t msg_cap);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_KIT_DYNLIB_H_ */
