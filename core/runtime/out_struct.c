/* backplane core: writing a versioned out-struct the application sized.
 *
 * The application API follows the plugin ABI's growth rule (docs/ABI.md
 * section 2): the caller sets `struct_size` to its own sizeof; the library
 * accepts any size from the struct's first released size up and writes only
 * within it, so a program built against an older (smaller) or newer
 * (larger) header works with this library unchanged.
 */
#include <string.h>

#include "internal.h"

/* The largest struct_size taken as genuine (every out-struct is far
 * smaller). */
#define BP__OUT_STRUCT_MAX 4096u

bp_status_t bp__out_struct_write(const char* fn, const char* type, void* dst, const void* src,
                                 size_t src_size, size_t first_size) {
  uint32_t caller_size;
  memcpy(&caller_size, dst, sizeof(caller_size));
  /* Anything larger is not a struct size (an uninitialized struct_size):
   * zeroing up to it would write far past the caller's struct. */
  if (caller_size > BP__OUT_STRUCT_MAX) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: struct_size of the %s is %u, which is not a struct size (at most %u; "
                     "set it to sizeof(%s))",
                     fn, type, caller_size, BP__OUT_STRUCT_MAX, type);
  }
  if (caller_size < first_size) {
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: struct_size of the %s is %u, expected at least %zu (set it to "
                     "sizeof(%s))",
                     fn, type, caller_size, first_size, type);
  }
  size_t n = caller_size < src_size ? caller_size : src_size;
  /* Everything after the caller's struct_size: ours, then zeros for fields
   * this library does not know (their documented default is 0). */
  unsigned char* d = dst;
  memcpy(d + sizeof(uint32_t), (const unsigned char*)src + sizeof(uint32_t),
         n - sizeof(uint32_t));
  if (caller_size > n) memset(d + n, 0, caller_size - n);
  return BP_OK;
}
