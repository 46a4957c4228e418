/* backplane plugin kit: dlopen'd libraries and symbol tables. See
 * bp_kit_dynlib.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "bp_kit_dynlib.h"

void* bp_kit_dlsym(void* handle, const char* name) { return dlsym(handle, name); }

bp_status_t bp_kit_library_open(const char* const* names, uint32_t count, void** out_handle,
                                char* msg, size_t cap) {
  if (!names || !count || !out_handle) {
    if (cap) snprintf(msg, cap, "no library names given");
    return BP_INVALID_ARGUMENT;
  }
  *out_handle = NULL;
  size_t used = 0;
  if (cap) used = (size_t)snprintf(msg, cap, "cannot load ");
  for (uint32_t i = 0; i < count; i++) {
    dlerror(); /* clear */
    void* h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h) {
      *out_handle = h;
      if (cap) msg[0] = '\0';
      return BP_OK;
    }
    const char* e = dlerror();
    if (used < cap)
      used += (size_t)snprintf(msg + used, cap - used, "%s%s (%s)", i ? "; " : "", names[i],
                               e ? e : "unknown error");
  }
  return BP_UNAVAILABLE;
}

void bp_kit_library_close(void* handle) {
  if (handle) dlclose(handle);
}

bp_status_t bp_kit_symbols_load(void* table, const bp_kit_symbol_t* symbols, uint32_t count,
                                bp_kit_resolve_fn resolve, void* ctx, const char* from, char* msg,
                                size_t cap) {
  if (!table || (count && !symbols) || !resolve || count > 4096) {
    if (cap) snprintf(msg, cap, "symbol table, list or resolver is NULL, or %u symbols", count);
    return BP_INVALID_ARGUMENT;
  }
  /* Resolve everything first: a failed load leaves the table untouched. */
  void* found[count ? count : 1];
  for (uint32_t i = 0; i < count; i++) {
    dlerror(); /* clear, so the text below belongs to this lookup */
    found[i] = resolve(ctx, symbols[i].name);
    if (!found[i] && symbols[i].required) {
      const char* e = resolve == bp_kit_dlsym ? dlerror() : NULL;
      if (cap)
        snprintf(msg, cap, "%s lacks %s%s%s%s", from ? from : "the library", symbols[i].name,
                 e ? " (" : "", e ? e : "", e ? ")" : "");
      return BP_UNAVAILABLE;
    }
  }
  /* Object and function pointers share size and representation on every
   * platform dlsym works on (POSIX requires it). */
  for (uint32_t i = 0; i < count; i++)
    memcpy((char*)table + symbols[i].offset, &found[i], sizeof found[i]);
  return BP_OK;
}
