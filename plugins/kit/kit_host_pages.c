/* backplane plugin kit: the pages under large host buffers. See
 * bp_kit_host_pages.h. */
#include "bp_kit_host_pages.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <sys/mman.h>
#define KIT_HOST_CAN_MAP 1
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#undef KIT_HOST_CAN_MAP
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#undef KIT_HOST_CAN_MAP
#endif
#endif

#ifdef KIT_HOST_CAN_MAP
#define KIT_HUGE_PAGE ((uint64_t)2 << 20)
#define KIT_SMALL_PAGE ((uint64_t)4 << 10)

static int g_huge_on = 1;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void read_env(void) {
  const char* e = getenv("BACKPLANE_HOST_HUGE_PAGES");
  if (e && strcmp(e, "0") == 0) g_huge_on = 0;
}

/* The mapping's length: bytes rounded up to whole small pages. */
static uint64_t map_length(uint64_t bytes) { return (bytes + KIT_SMALL_PAGE - 1) & ~(KIT_SMALL_PAGE - 1); }

/* Maps len bytes at an address aligned to `align` (>= the small page): maps
 * len + align and unmaps the head and tail around the aligned part. */
static void* map_aligned(uint64_t align, uint64_t len) {
  uint64_t total;
  if (__builtin_add_overflow(len, align, &total)) return NULL;
  unsigned char* m = mmap(NULL, (size_t)total, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return NULL;
  unsigned char* a = (unsigned char*)(((uintptr_t)m + (uintptr_t)align - 1) & ~((uintptr_t)align - 1));
  if (a > m) munmap(m, (size_t)(a - m));
  unsigned char* end = m + total;
  if (a + len < end) munmap(a + len, (size_t)(end - (a + len)));
  return a;
}
#endif

void* bp_kit_host_pages_alloc(uint64_t align, uint64_t bytes, int* out_mapped) {
  *out_mapped = 0;
#ifdef KIT_HOST_CAN_MAP
  pthread_once(&g_once, read_env);
  if (g_huge_on && bytes >= BP_KIT_HOST_HUGE_MIN) {
    void* p = map_aligned(align > KIT_HUGE_PAGE ? align : KIT_HUGE_PAGE, map_length(bytes));
    if (p) {
      /* Advice only: where the kernel has no THP, the pages stay small. */
      (void)madvise(p, (size_t)map_length(bytes), MADV_HUGEPAGE);
      *out_mapped = 1;
      return p;
    }
  }
#endif
  return aligned_alloc((size_t)align, (size_t)bytes);
}

void bp_kit_host_pages_free(void* p, uint64_t bytes, int mapped) {
  if (!p) return;
#ifdef KIT_HOST_CAN_MAP
  if (mapped) {
    munmap(p, (size_t)map_length(bytes));
    return;
  }
#else
  (void)bytes, (void)mapped;
#endif
  free(p);
}
