/* backplane CPU plugin: streaming stores (cpu_stream_store.h). */
#include "cpu_stream_store.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define CPU_STREAM_X86 1
#endif

static size_t g_threshold = SIZE_MAX;
static int g_avx512;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

#ifdef CPU_STREAM_X86
/* The largest data cache's size divided by the logical CPUs sharing it,
 * from a deterministic cache-parameters leaf: 4 on Intel, 0x8000001D on
 * AMD (same layout). 0 when the leaf is absent or empty, as under
 * hypervisors that hide the cache topology. */
static size_t llc_share_from_leaf(unsigned leaf) {
  unsigned a, b, c, d;
  if (__get_cpuid_max(leaf & 0x80000000u, NULL) < leaf) return 0;
  size_t best = 0, sharing = 1;
  for (unsigned i = 0; i < 16; i++) {
    __cpuid_count(leaf, i, a, b, c, d);
    unsigned type = a & 31u;
    if (type == 0) break;
    if (type == 2) continue; /* instruction cache */
    size_t size = (size_t)((b >> 22) + 1) * (((b >> 12) & 0x3ffu) + 1) * ((b & 0xfffu) + 1) * ((size_t)c + 1);
    if (size > best) {
      best = size;
      sharing = ((a >> 14) & 0xfffu) + 1;
    }
  }
  return best / sharing;
}

static size_t llc_share(void) {
  size_t share = llc_share_from_leaf(4);
  return share ? share : llc_share_from_leaf(0x8000001Du);
}
#endif

/* Where the topology is hidden, the reported last-level cache may be the
 * whole package's (hundreds of MiB on a server part) while this process
 * sees a few of its CPUs: the share is then taken as that size over the
 * online CPUs but at most this, about what one core of current server
 * parts owns (1.5-4 MiB). */
#define CPU_STREAM_UNKNOWN_SHARE_MAX ((size_t)4 << 20)

static void stream_init(void) {
  const char* env = getenv("BP_CPU_STREAM_STORES_MIN");
#ifdef CPU_STREAM_X86
  __builtin_cpu_init();
  g_avx512 = __builtin_cpu_supports("avx512f");
  size_t share = llc_share();
  if (share == 0) {
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE), cpus = sysconf(_SC_NPROCESSORS_ONLN);
    share = llc > 0 && cpus > 0 ? (size_t)llc / (size_t)cpus : 0;
    if (share > CPU_STREAM_UNKNOWN_SHARE_MAX) share = CPU_STREAM_UNKNOWN_SHARE_MAX;
  }
  g_threshold = share > 0 ? share / 4 * 3 : SIZE_MAX;
#endif
  if (env && *env) {
    char* end = NULL;
    unsigned long long v = strtoull(env, &end, 10);
    if (strcasecmp(env, "off") == 0) g_threshold = SIZE_MAX;
#ifdef CPU_STREAM_X86
    else if (end && *end == '\0') g_threshold = (size_t)v;
#else
    (void)v;
#endif
  }
}

size_t cpu_stream_threshold(void) {
  pthread_once(&g_once, stream_init);
  return g_threshold;
}

#ifdef CPU_STREAM_X86
__attribute__((target("avx512f"))) static void copy_nt_avx512(char* d, const char* s, size_t n) {
  for (; n >= 64; n -= 64, d += 64, s += 64) _mm512_stream_si512((void*)d, _mm512_loadu_si512((const void*)s));
  if (n) memcpy(d, s, n);
}
static void copy_nt_sse2(char* d, const char* s, size_t n) {
  for (; n >= 16; n -= 16, d += 16, s += 16) _mm_stream_si128((__m128i*)(void*)d, _mm_loadu_si128((const __m128i*)(const void*)s));
  if (n) memcpy(d, s, n);
}
#endif

void cpu_stream_copy(void* dst, const void* src, size_t bytes) {
#ifdef CPU_STREAM_X86
  pthread_once(&g_once, stream_init);
  char* d = dst;
  const char* s = src;
  size_t align = g_avx512 ? 64 : 16;
  size_t head = (align - ((uintptr_t)d & (align - 1))) & (align - 1);
  if (head > bytes) head = bytes;
  if (head) memcpy(d, s, head);
  if (g_avx512) copy_nt_avx512(d + head, s + head, bytes - head);
  else copy_nt_sse2(d + head, s + head, bytes - head);
#else
  memcpy(dst, src, bytes);
#endif
}

void cpu_stream_fence(void) {
#ifdef CPU_STREAM_X86
  _mm_sfence();
#endif
}
