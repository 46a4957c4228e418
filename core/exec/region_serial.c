/* backplane core: saving and loading compiled regions.
 *
 * The core wraps the plugin's bytes in its own header, so a file from
 * another plugin, plugin version, device or ABI major is refused before
 * the plugin sees it, and any flipped byte is caught by the checksum:
 *
 *   0   magic "BPREGN01"            8 bytes
 *   8   format version (2)          u32
 *   12  ABI major, minor            u32, u32
 *   20  region kind                 u32
 *   24  arguments, inputs           u32, u32
 *   32  plugin name                 32 bytes, NUL-padded
 *   64  plugin version              32 bytes, NUL-padded
 *   96  device uuid                 16 bytes
 *   112 device name                 64 bytes, NUL-padded
 *   176 plugin payload bytes        u64
 *   184 checksum                    u64, XXH3-64 over every other byte
 *                                   (format 1 had FNV-1a: 3 cycles a byte)
 *   192 arguments: dtype u32, rank u32, sizes i64[8]   (72 bytes each)
 *   ... the plugin's bytes (executable_serialize)
 *
 * Integers are in the machine's byte order (a file is for the machine
 * type that wrote it; another byte order fails the magic or checksum).
 * Thread-safe.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define XXH_INLINE_ALL /* xxHash header only: nothing to link */
#include <xxhash.h>

#include "exec/exec_internal.h"

#define HDR_SIZE 192u
#define ARG_SIZE 72u
#define FORMAT_VERSION 2u
static const char k_magic[8] = {'B', 'P', 'R', 'E', 'G', 'N', '0', '1'};

/* XXH3-64 of the header up to the checksum, seeding the one of the rest. */
static uint64_t checksum(const unsigned char* data, uint64_t size) {
  uint64_t h = (uint64_t)XXH3_64bits(data, 184);
  return (uint64_t)XXH3_64bits_withSeed(data + HDR_SIZE, (size_t)(size - HDR_SIZE), h);
}

static void put_u32(unsigned char* p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(unsigned char* p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const unsigned char* p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const unsigned char* p) { uint64_t v; memcpy(&v, p, 8); return v; }
static void put_str(unsigned char* p, const char* s, size_t cap) {
  memset(p, 0, cap);
  size_t n = s ? strlen(s) : 0;
  memcpy(p, s, n < cap - 1 ? n : cap - 1);
}

/* The fields that identify where bytes may be loaded (name, version,
 * device), as the header stores them. */
static void identity(const bp_device_t* device, unsigned char* out /* 96..176 of a header */) {
  put_str(out, device->plugin->name, 32);
  put_str(out + 32, device->plugin->version, 32);
  memcpy(out + 64, device->props.uuid, 16);
  put_str(out + 80, device->props.name, 64);
}

bp_status_t bp_region_serialize(const bp_region_t* region, void* data, uint64_t capacity,
                                uint64_t* out_size) {
  const char* api = "bp_region_serialize";
  BP__REQUIRE_ARG(api, region);
  BP__REQUIRE_ARG(api, out_size);
  const bp_plugin_t* plugin = region->device->plugin;
  if (plugin->exec.executable_serialize == NULL)
    return bp__error(BP_UNIMPLEMENTED, "%s: backend '%s' cannot save compiled regions", api,
                     plugin->name);
  uint64_t payload = 0;
  bp__clear_error();
  bp_status_t st = BP__NOTE_CALL(plugin, "executable_serialize", NULL,
                                 plugin->exec.executable_serialize(region->handle, NULL, 0, &payload));
  if (st != BP_OK) return bp__plugin_error(plugin, st, "region serialize");
  uint64_t total = HDR_SIZE + (uint64_t)region->num_args * ARG_SIZE;
  if (bp__add_overflow_u64(total, payload, &total))
    return bp__error(BP_INTERNAL, "%s: backend '%s' asked for %llu bytes", api, plugin->name,
                     (unsigned long long)payload);
  *out_size = total;
  if (data == NULL) return BP_OK;
  if (capacity < total)
    return bp__error(BP_RESOURCE_EXHAUSTED, "%s: %llu bytes needed, capacity is %llu", api,
                     (unsigned long long)total, (unsigned long long)capacity);
  unsigned char* p = data;
  memset(p, 0, HDR_SIZE);
  memcpy(p, k_magic, 8);
  put_u32(p + 8, FORMAT_VERSION);
  put_u32(p + 12, BP_ABI_VERSION_MAJOR);
  put_u32(p + 16, BP_ABI_VERSION_MINOR);
  put_u32(p + 20, region->kind);
  put_u32(p + 24, region->num_args);
  put_u32(p + 28, region->num_inputs);
  identity(region->device, p + 32);
  put_u64(p + 176, payload);
  unsigned char* a = p + HDR_SIZE;
  for (uint32_t i = 0; i < region->num_args; ++i, a += ARG_SIZE) {
    memset(a, 0, ARG_SIZE);
    put_u32(a, region->args[i].dtype);
    put_u32(a + 4, region->args[i].rank);
    for (uint32_t d = 0; d < region->args[i].rank; ++d) put_u64(a + 8 + 8 * d, (uint64_t)region->args[i].sizes[d]);
  }
  uint64_t written = payload;
  bp__clear_error();
  st = BP__NOTE_CALL(plugin, "executable_serialize", NULL,
                     plugin->exec.executable_serialize(region->handle, a, payload, &written));
  if (st != BP_OK) return bp__plugin_error(plugin, st, "region serialize");
  if (written != payload)
    return bp__error(BP_INTERNAL, "%s: backend '%s' wrote %llu bytes after asking for %llu", api,
                     plugin->name, (unsigned long long)written, (unsigned long long)payload);
  put_u64(p + 184, checksum(p, total));
  return BP_OK;
}

bp_status_t bp_region_deserialize(bp_device_t* device, const void* data, uint64_t size,
                                  bp_region_t** out) {
  const char* api = "bp_region_deserialize";
  BP__REQUIRE_ARG(api, device);
  BP__REQUIRE_ARG(api, data);
  BP__REQUIRE_ARG(api, out);
  *out = NULL;
  const unsigned char* p = data;
  if (size < HDR_SIZE)
    return bp__error(BP_DATA_LOSS, "%s: %llu bytes, shorter than the %u-byte header (truncated)",
                     api, (unsigned long long)size, HDR_SIZE);
  if (memcmp(p, k_magic, 8) != 0)
    return bp__error(BP_DATA_LOSS, "%s: not a saved backplane region (bad magic)", api);
  if (get_u32(p + 8) != FORMAT_VERSION)
    return bp__error(BP_FAILED_PRECONDITION, "%s: format version %u, this library reads %u", api,
                     get_u32(p + 8), FORMAT_VERSION);
  uint32_t num_args = get_u32(p + 24), num_inputs = get_u32(p + 28);
  uint64_t payload = get_u64(p + 176);
  uint64_t want = HDR_SIZE + (uint64_t)num_args * ARG_SIZE;
  if (num_args > (1u << 20) || bp__add_overflow_u64(want, payload, &want) || want != size)
    return bp__error(BP_DATA_LOSS, "%s: %llu bytes, the header describes %llu (truncated or corrupt)",
                     api, (unsigned long long)size, (unsigned long long)want);
  if (get_u64(p + 184) != checksum(p, size))
    return bp__error(BP_DATA_LOSS, "%s: checksum mismatch (corrupt bytes)", api);
  if (get_u32(p + 12) != BP_ABI_VERSION_MAJOR)
    return bp__error(BP_FAILED_PRECONDITION, "%s: saved under ABI %u.%u, this library speaks %u.%u",
                     api, get_u32(p + 12), get_u32(p + 16), BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
  unsigned char mine[144];
  identity(device, mine);
  static const struct { uint32_t at, len; const char* what; } fields[] = {
      {0, 32, "backend"}, {32, 32, "backend version"}, {64, 16, "device uuid"}, {80, 64, "device"}};
  for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); ++f) {
    if (memcmp(p + 32 + fields[f].at, mine + fields[f].at, fields[f].len) == 0) continue;
    char saved[72] = "", here[72] = "", clean[160];
    if (fields[f].len != 16) {
      memcpy(saved, p + 32 + fields[f].at, fields[f].len);
      memcpy(here, mine + fields[f].at, fields[f].len);
    }
    saved[sizeof(saved) - 1] = '\0';
    return bp__error(BP_FAILED_PRECONDITION, "%s: saved for %s '%s', loading on '%s' ('%s')", api,
                     fields[f].what, bp__text_clean(saved, clean, sizeof(clean)), here, device->name);
  }
  uint32_t kind = get_u32(p + 20);
  if (kind == 0 || kind >= BP_REGION_KIND_COUNT_ || num_inputs > num_args)
    return bp__error(BP_DATA_LOSS, "%s: header has kind %u, %u arguments, %u inputs", api, kind,
                     num_args, num_inputs);
  bp_tensor_desc_t* args = calloc(num_args ? num_args : 1, sizeof(*args));
  if (args == NULL) return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  bp_status_t st = BP_OK;
  const unsigned char* a = p + HDR_SIZE;
  for (uint32_t i = 0; i < num_args && st == BP_OK; ++i, a += ARG_SIZE) {
    uint32_t dtype = get_u32(a), rank = get_u32(a + 4);
    int64_t sizes[BP_MAX_RANK] = {0};
    int ok = bp__dtype_valid(dtype) && rank <= BP_MAX_RANK;
    for (uint32_t d = 0; ok && d < rank; ++d) {
      sizes[d] = (int64_t)get_u64(a + 8 + 8 * d);
      ok = sizes[d] >= 0;
    }
    if (ok) st = bp__desc_dense(&args[i], dtype, rank, sizes, api, "argument");
    if (!ok || st != BP_OK)
      st = bp__error(BP_DATA_LOSS, "%s: argument %u is malformed (dtype %u, rank %u)", api, i,
                     dtype, rank);
  }
  const bp_plugin_t* plugin = device->plugin;
  bpp_executable_t handle = NULL;
  if (st == BP_OK && (!plugin->has_exec || plugin->exec.executable_deserialize == NULL))
    st = bp__error(BP_UNIMPLEMENTED, "%s: backend '%s' cannot load compiled regions", api, plugin->name);
  if (st == BP_OK) {
    bp__clear_error();
    st = BP__NOTE_CALL(plugin, "executable_deserialize", NULL,
                       plugin->exec.executable_deserialize(device->handle, a, payload, &handle));
    if (st != BP_OK) st = bp__plugin_error(plugin, st, "region deserialize");
    else if (handle == NULL)
      st = bp__error(BP_INTERNAL, "%s: backend '%s' returned a NULL executable", api, plugin->name);
  }
  if (st == BP_OK) st = bp__region_wrap(api, device, handle, kind, num_args, num_inputs, args, out);
  free(args);
  return st;
}
