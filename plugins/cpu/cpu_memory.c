/* backplane CPU plugin: the memory budget.
 *
 * Every buffer of an instance (all its logical devices, all memory kinds:
 * they are the same host memory) is accounted against one budget, so the
 * plugin answers RESOURCE_EXHAUSTED before the kernel's OOM killer ends the
 * process (allocations succeed on Linux until pages are touched). The
 * budget is the instance option "memory_budget=<size>" (BACKPLANE_CPU_OPTIONS,
 * "key=value;key=value"), else physical memory less a margin:
 * max(physical / 8, 512 MiB), at most half of it. Sizes take the units
 * B, K/KiB, M/MiB, G/GiB, T/TiB (powers of 1024), KB, MB, GB, TB (powers of
 * 1000), or % of physical memory; fractions are allowed ("1.5GiB").
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cpu_internal.h"

#define CPU_MARGIN_MIN ((uint64_t)512 << 20)

uint64_t cpu_memory_physical(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

static uint64_t default_budget(uint64_t physical) {
  uint64_t margin = physical / 8 > CPU_MARGIN_MIN ? physical / 8 : CPU_MARGIN_MIN;
  if (margin > physical / 2) margin = physical - physical / 2;
  return physical ? physical - margin : UINT64_MAX; /* unknown: no budget */
}

/* Finds `key` in "key=value;key=value" (whole keys only) and copies its
 * value into `out`. Returns 1 when found. */
static int find_option(const char* options, const char* key, char* out, size_t cap) {
  size_t klen = strlen(key);
  for (const char* p = options; p && *p;) {
    while (*p == ';' || *p == ' ') p++;
    size_t len = strcspn(p, ";");
    if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
      size_t vlen = len - klen - 1;
      if (vlen >= cap) vlen = cap - 1;
      memcpy(out, p + klen + 1, vlen);
      out[vlen] = 0;
      return 1;
    }
    p += len;
  }
  return 0;
}

int cpu_memory_parse_size(const char* text, uint64_t physical, uint64_t* out_bytes) {
  static const struct { const char* unit; double scale; } units[] = {
      {"", 1},          {"b", 1},           {"k", 0x1p10},      {"kib", 0x1p10},
      {"m", 0x1p20},    {"mib", 0x1p20},    {"g", 0x1p30},      {"gib", 0x1p30},
      {"t", 0x1p40},    {"tib", 0x1p40},    {"kb", 1e3},        {"mb", 1e6},
      {"gb", 1e9},      {"tb", 1e12},
  };
  if (!text) return 0;
  while (isspace((unsigned char)*text)) text++;
  if (!isdigit((unsigned char)*text) && *text != '.') return 0; /* no sign, no "inf" */
  char* end = NULL;
  double v = strtod(text, &end);
  if (end == text || !isfinite(v) || v <= 0) return 0;
  while (isspace((unsigned char)*end)) end++;
  double scale = 0;
  if (strcmp(end, "%") == 0) {
    if (!physical || v > 100) return 0;
    scale = (double)physical / 100.0;
  } else {
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
      if (strcasecmp(end, units[i].unit) == 0) scale = units[i].scale;
  }
  double bytes = floor(v * scale);
  if (scale == 0 || bytes < 1 || bytes >= 0x1p63) return 0;
  *out_bytes = (uint64_t)bytes;
  return 1;
}

void cpu_memory_init(struct bpp_instance_s* inst, const char* options) {
  uint64_t physical = cpu_memory_physical();
  char value[64];
  inst->budget.limit = default_budget(physical);
  inst->budget.used = 0;
  inst->budget.hint = "BACKPLANE_CPU_OPTIONS=memory_budget=<size> sets it";
  if (!find_option(options, "memory_budget", value, sizeof value)) return;
  uint64_t bytes = 0;
  if (cpu_memory_parse_size(value, physical, &bytes)) {
    inst->budget.limit = bytes;
    return;
  }
  bp_kit_log(BP_LOG_WARN,
             "cpu: option memory_budget='%s' is not a size (e.g. 8GiB, 512MB, 75%%); using the "
             "default, %llu bytes",
             value, (unsigned long long)inst->budget.limit);
}
