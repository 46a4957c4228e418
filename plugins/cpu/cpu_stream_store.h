/* backplane CPU plugin: streaming (non-temporal) stores for outputs too
 * large to stay in this core's share of the last-level cache.
 *
 * An ordinary store to a line not in cache first reads the line (read for
 * ownership), so writing N bytes moves 2N over the memory bus; a
 * streaming store writes the line without reading it. glibc's memcpy
 * switches to streaming stores above 3/4 of the calling thread's share of
 * the last-level cache; the CPU plugin's tiled elementwise programs use
 * the same rule for each output (cpu_stream_threshold), so a fused chain
 * writes as a copy does. Below the threshold ordinary stores keep the
 * output in cache for its next reader. */
#ifndef BP_CPU_STREAM_STORE_H_
#define BP_CPU_STREAM_STORE_H_

#include <stddef.h>

#include "cpu_kernels.h"

/* Bytes from which an output is written with streaming stores: 3/4 of the
 * last-level cache divided by the logical CPUs that share it (CPUID leaf
 * 4 on Intel, 0x8000001D on AMD; where a hypervisor hides both, the
 * reported size over the online CPUs, at most 4 MiB), or
 * BP_CPU_STREAM_STORES_MIN (bytes; "off" never streams). SIZE_MAX where the CPU has no streaming stores. Computed once;
 * thread-safe. */
CPU_HIDDEN size_t cpu_stream_threshold(void);

/* Copies `bytes` from src (any alignment) to dst with streaming stores
 * where dst is 16-byte aligned (ordinary stores for the unaligned head and
 * the tail). The stores are weakly ordered: the thread calls
 * cpu_stream_fence before another thread may read dst. */
CPU_HIDDEN void cpu_stream_copy(void* dst, const void* src, size_t bytes);
CPU_HIDDEN void cpu_stream_fence(void);

#endif /* BP_CPU_STREAM_STORE_H_ */
