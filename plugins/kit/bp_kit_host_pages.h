/* backplane plugin kit: the pages under large host buffers.
 *
 * A buffer of at least BP_KIT_HOST_HUGE_MIN bytes is mapped on its own,
 * aligned to 2 MiB and marked for transparent huge pages (madvise), as
 * PyTorch's CPU allocator does: a 64 MiB tensor then takes 32 page faults
 * and TLB entries instead of 16,384, which matters most under hypervisors,
 * where every fault and page-table update traps. The kernel uses huge pages
 * for the whole 2 MiB extents of the mapping (the tail stays in 4 KiB
 * pages, so no memory is wasted) when the system allows it
 * (/sys/kernel/mm/transparent_hugepage/enabled: always or madvise).
 * Smaller buffers, other systems, sanitizer builds (which must see every
 * buffer as heap memory) and BACKPLANE_HOST_HUGE_PAGES=0 use aligned_alloc.
 *
 * Thread-safe; no state beyond the environment read once.
 */
#ifndef BACKPLANE_KIT_HOST_PAGES_H_
#define BACKPLANE_KIT_HOST_PAGES_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BP_KIT_HOST_HUGE_MIN ((uint64_t)4 << 20)

/* bytes (> 0) of memory aligned to `align` (a power of two), or NULL.
 * *out_mapped tells bp_kit_host_pages_free how it was obtained. */
void* bp_kit_host_pages_alloc(uint64_t align, uint64_t bytes, int* out_mapped);

/* Frees what bp_kit_host_pages_alloc returned for the same bytes and
 * mapped flag; NULL is ignored. */
void bp_kit_host_pages_free(void* p, uint64_t bytes, int mapped);

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_KIT_HOST_PAGES_H_ */
