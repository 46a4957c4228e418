/* bp-info: lists the plugins backplane finds (loaded, or skipped with the
 * reason), their agreed ABI versions, and their devices with properties.
 *
 *   bp-info                 readable text
 *   bp-info --json          one JSON object (schema below)
 *   bp-info --backend NAME  only that plugin; exits 1 with the reason when it
 *                           was skipped or not found
 *   bp-info --ops [--json]  the op table with, per device, whether the device
 *                           runs each op (see bp-info-ops.c)
 *
 * JSON: {"abi":"1.0","plugins":[{"name","path","status":"loaded"|"skipped",
 *   "reason","reason_code","abi","abi_minor","version","vendor","devices":[{"name","kind",
 *   "description","vendor","driver_version","memory_bytes","compute_units",
 *   "subgroup_size","memory_bandwidth_bytes_per_s","peak_f32_flops",
 *   "host_link_bandwidth_bytes_per_s","launch_overhead_ns","dtypes":[...],
 *   "flags":[...],"memory_spaces":[...]}]}]}
 * With --ops: {"ops":[{"id","name","category","aten","supported":{device:
 *   bool},"dtypes":{device:[...]},"reasons":{device:text}}]}
 *
 * Exit status: 0 on success, 1 when the context cannot be created or the
 * requested backend is unavailable, 2 on a usage error.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"
#include "backplane/plugin.h"
#include "bp-info-ops.h"

typedef struct options {
  int json;
  int ops;
  int devices; /* --devices: names only */
  const char* backend; /* NULL: every plugin */
} options_t;

static const char* kind_name(uint32_t kind) {
  switch (kind) {
    case BP_DEVICE_KIND_CPU: return "cpu";
    case BP_DEVICE_KIND_GPU: return "gpu";
    case BP_DEVICE_KIND_INTEGRATED_GPU: return "integrated_gpu";
    case BP_DEVICE_KIND_ACCELERATOR: return "accelerator";
    case BP_DEVICE_KIND_VIRTUAL: return "virtual";
    default: return "unknown";
  }
}

static const char* memory_kind_name(uint32_t kind) {
  switch (kind) {
    case BP_MEMORY_DEVICE: return "device";
    case BP_MEMORY_HOST_PINNED: return "host_pinned";
    case BP_MEMORY_HOST_PAGEABLE: return "host_pageable";
    case BP_MEMORY_MANAGED: return "managed";
    default: return "unknown";
  }
}

/* X(flag, name) for enum bp_device_flags. */
#define DEVICE_FLAGS(X)                                        \
  X(BP_DEVICE_FLAG_DENORMALS_PRESERVED, "denormals_preserved") \
  X(BP_DEVICE_FLAG_CORRECTLY_ROUNDED, "correctly_rounded")     \
  X(BP_DEVICE_FLAG_UNIFIED_MEMORY, "unified_memory")           \
  X(BP_DEVICE_FLAG_TIMESTAMPS, "timestamps")                   \
  X(BP_DEVICE_FLAG_PEER_COPY, "peer_copy")

static void usage(FILE* out) {
  fputs(
      "usage: bp-info [--json] [--backend NAME] [--ops | --devices]\n"
      "  Lists backplane plugins (loaded or skipped, with the reason), the agreed ABI\n"
      "  versions and every device with its properties.\n"
      "  --json          print one JSON object instead of text\n"
      "  --backend NAME  only that backend; exit 1 with the reason if it is unavailable\n"
      "  --ops           the op table: per device, whether its support query accepts\n"
      "                  the op's conformance cases\n"
      "  --devices       device names only, one per line (for scripts)\n"
      "  --help          this text\n"
      "Environment: BACKPLANE_PLUGIN_PATH, BACKPLANE_PLUGINS, BACKPLANE_DISABLE,\n"
      "  BACKPLANE_LOG=debug (traces discovery on stderr).\n",
      out);
}

static int parse_args(int argc, char** argv, options_t* opt) {
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      exit(0);
    } else if (!strcmp(argv[i], "--json")) {
      opt->json = 1;
    } else if (!strcmp(argv[i], "--ops")) {
      opt->ops = 1;
    } else if (!strcmp(argv[i], "--devices")) {
      opt->devices = 1;
    } else if (!strcmp(argv[i], "--backend")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "bp-info: --backend needs a backend name\n");
        return -1;
      }
      opt->backend = argv[++i];
    } else if (!strncmp(argv[i], "--backend=", 10)) {
      opt->backend = argv[i] + 10;
    } else {
      fprintf(stderr, "bp-info: unknown argument '%s'\n", argv[i]);
      return -1;
    }
  }
  if (opt->backend && !*opt->backend) {
    fprintf(stderr, "bp-info: --backend needs a backend name\n");
    return -1;
  }
  return 0;
}

static void format_abi(char* buf, size_t size, const bp_plugin_info_t* info) {
  if (info->abi_major == 0 && info->abi_minor == 0)
    buf[0] = '\0';
  else
    snprintf(buf, size, "%u.%u", info->abi_major, info->abi_minor);
}

/* ---- JSON --------------------------------------------------------------- */

static cJSON* device_json(const bp_device_t* device) {
  const bp_device_properties_t* p = bp_device_properties(device);
  cJSON* d = cJSON_CreateObject();
  cJSON_AddStringToObject(d, "name", bp_device_name(device));
  cJSON_AddStringToObject(d, "kind", kind_name(p->kind));
  cJSON_AddStringToObject(d, "description", p->name);
  cJSON_AddStringToObject(d, "vendor", p->vendor);
  cJSON_AddStringToObject(d, "driver_version", p->driver_version);
  cJSON_AddNumberToObject(d, "memory_bytes", (double)p->memory_bytes);
  cJSON_AddNumberToObject(d, "compute_units", p->compute_units);
  cJSON_AddNumberToObject(d, "subgroup_size", p->subgroup_size);
  cJSON_AddNumberToObject(d, "memory_bandwidth_bytes_per_s", p->memory_bandwidth_bytes_per_s);
  cJSON_AddNumberToObject(d, "peak_f32_flops", p->peak_ops_per_s[BP_DTYPE_F32]);
  cJSON_AddNumberToObject(d, "host_link_bandwidth_bytes_per_s", p->host_link_bandwidth_bytes_per_s);
  cJSON_AddNumberToObject(d, "launch_overhead_ns", p->launch_overhead_ns);
  cJSON* dtypes = cJSON_AddArrayToObject(d, "dtypes");
  for (uint32_t t = 1; t < BP_DTYPE_COUNT_; ++t)
    if (p->dtype_mask & BP_DTYPE_BIT(t))
      cJSON_AddItemToArray(dtypes, cJSON_CreateString(bp_dtype_name(t)));
  cJSON* flags = cJSON_AddArrayToObject(d, "flags");
#define FLAG_JSON(flag, name) \
  if (p->flags & (flag)) cJSON_AddItemToArray(flags, cJSON_CreateString(name));
  DEVICE_FLAGS(FLAG_JSON)
#undef FLAG_JSON
  bp_memory_space_info_t spaces[16];
  uint32_t count = 0;
  cJSON* sp = cJSON_AddArrayToObject(d, "memory_spaces");
  if (bp_device_memory_spaces(device, 16, sizeof(spaces[0]), spaces, &count) == BP_OK) {
    for (uint32_t i = 0; i < count && i < 16; ++i) {
      cJSON* s = cJSON_CreateObject();
      cJSON_AddStringToObject(s, "kind", memory_kind_name(spaces[i].kind));
      cJSON_AddNumberToObject(s, "capacity_bytes", (double)spaces[i].capacity_bytes);
      cJSON_AddNumberToObject(s, "alignment_bytes", (double)spaces[i].alignment_bytes);
      cJSON_AddBoolToObject(s, "host_visible",
                            (spaces[i].flags & BP_MEMORY_FLAG_HOST_VISIBLE) != 0);
      cJSON_AddItemToArray(sp, s);
    }
  }
  return d;
}

static cJSON* plugin_json(const bp_plugin_t* plugin) {
  bp_plugin_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (bp_plugin_get_info(plugin, &info) != BP_OK) return NULL;
  char abi[32];
  format_abi(abi, sizeof(abi), &info);
  cJSON* o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", info.name);
  cJSON_AddStringToObject(o, "path", info.path);
  cJSON_AddStringToObject(o, "status", info.state == BP_PLUGIN_LOADED ? "loaded" : "skipped");
  cJSON_AddStringToObject(o, "reason", info.reason);
  cJSON_AddStringToObject(o, "reason_code", bp_status_name(info.reason_code));
  cJSON_AddStringToObject(o, "abi", abi); /* the negotiated major.minor */
  if (info.abi_major != 0) cJSON_AddNumberToObject(o, "abi_minor", info.abi_minor);
  cJSON_AddStringToObject(o, "version", info.version);
  cJSON_AddStringToObject(o, "vendor", info.vendor);
  cJSON* devices = cJSON_AddArrayToObject(o, "devices");
  for (uint32_t i = 0; i < info.device_count; ++i) {
    bp_device_t* device = NULL;
    if (bp_plugin_device(plugin, i, &device) == BP_OK)
      cJSON_AddItemToArray(devices, device_json(device));
  }
  return o;
}

/* ---- text --------------------------------------------------------------- */

static void print_bytes(const char* label, uint64_t bytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = (double)bytes;
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  printf("    %-22s %.1f %s (%llu bytes)\n", label, v, units[u], (unsigned long long)bytes);
}

static void print_device(const bp_device_t* device) {
  const bp_device_properties_t* p = bp_device_properties(device);
  printf("  device %s: %s [%s]\n", bp_device_name(device), p->name[0] ? p->name : "(unnamed)",
         kind_name(p->kind));
  if (p->vendor[0]) printf("    %-22s %s\n", "vendor:", p->vendor);
  if (p->driver_version[0]) printf("    %-22s %s\n", "driver:", p->driver_version);
  print_bytes("memory:", p->memory_bytes);
  printf("    %-22s %u\n", "compute units:", p->compute_units);
  printf("    %-22s %u\n", "subgroup size:", p->subgroup_size);
  if (p->memory_bandwidth_bytes_per_s > 0)
    printf("    %-22s %.1f GB/s\n", "memory bandwidth:", p->memory_bandwidth_bytes_per_s / 1e9);
  if (p->host_link_bandwidth_bytes_per_s > 0)
    printf("    %-22s %.1f GB/s\n",
           "host link bandwidth:", p->host_link_bandwidth_bytes_per_s / 1e9);
  if (p->peak_ops_per_s[BP_DTYPE_F32] > 0)
    printf("    %-22s %.1f GFLOP/s\n", "peak f32:", p->peak_ops_per_s[BP_DTYPE_F32] / 1e9);
  if (p->launch_overhead_ns > 0)
    printf("    %-22s %.0f ns\n", "launch overhead:", p->launch_overhead_ns);
  printf("    %-22s", "dtypes:");
  for (uint32_t t = 1; t < BP_DTYPE_COUNT_; ++t)
    if (p->dtype_mask & BP_DTYPE_BIT(t)) printf(" %s", bp_dtype_name(t));
  printf("\n    %-22s", "flags:");
#define FLAG_TEXT(flag, name) \
  if (p->flags & (flag)) printf(" %s", name);
  DEVICE_FLAGS(FLAG_TEXT)
#undef FLAG_TEXT
  printf("\n");
  bp_memory_space_info_t spaces[16];
  uint32_t count = 0;
  if (bp_device_memory_spaces(device, 16, sizeof(spaces[0]), spaces, &count) == BP_OK) {
    for (uint32_t i = 0; i < count && i < 16; ++i) {
      char label[64];
      snprintf(label, sizeof(label), "memory space %s:", memory_kind_name(spaces[i].kind));
      print_bytes(label, spaces[i].capacity_bytes);
    }
  }
}

static void print_plugin(const bp_plugin_t* plugin) {
  bp_plugin_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (bp_plugin_get_info(plugin, &info) != BP_OK) return;
  if (info.state == BP_PLUGIN_LOADED) {
    printf("plugin %s: loaded, ABI %u.%u, version %s%s%s, %u device(s)\n", info.name,
           info.abi_major, info.abi_minor, info.version[0] ? info.version : "?",
           info.vendor[0] ? ", vendor " : "", info.vendor, info.device_count);
  } else {
    printf("plugin %s: skipped [%s]: %s\n", info.name, bp_status_name(info.reason_code),
           info.reason);
  }
  printf("  path: %s\n", info.path);
  for (uint32_t i = 0; i < info.device_count; ++i) {
    bp_device_t* device = NULL;
    if (bp_plugin_device(plugin, i, &device) == BP_OK) print_device(device);
  }
}

int main(int argc, char** argv) {
  options_t opt = {0, 0, 0, NULL};
  int rc = 0;
  bp_context_t* context = NULL;
  cJSON* root = NULL;
  (void)bp_crash_report_install(); /* a crash names the plugin it came from */
  if (parse_args(argc, argv, &opt) != 0) {
    usage(stderr);
    return 2;
  }

  bp_context_options_t copt;
  memset(&copt, 0, sizeof(copt));
  copt.struct_size = sizeof(copt);
  copt.select = opt.backend; /* a skipped selected backend fails creation with its reason */
  bp_status_t status = bp_context_create(&copt, &context);
  if (status != BP_OK) {
    fprintf(stderr, "bp-info: %s: %s\n", bp_status_name(status), bp_status_message());
    rc = 1;
    goto cleanup;
  }

  uint32_t abi_major = 0, abi_minor = 0;
  bp_abi_version(&abi_major, &abi_minor);
  uint32_t count = bp_context_plugin_count(context);
  bp_plugin_t* only = NULL;
  if (opt.backend) {
    /* BACKPLANE_PLUGINS may override the select list; ask by name again. */
    status = bp_context_find_plugin(context, opt.backend, &only);
    if (status != BP_OK) {
      fprintf(stderr, "bp-info: %s: %s\n", bp_status_name(status), bp_status_message());
      rc = 1;
      goto cleanup;
    }
  }

  if (opt.devices) {
    for (uint32_t i = 0; i < bp_context_device_count(context); ++i) {
      bp_device_t* d = NULL;
      if (bp_context_device(context, i, &d) != BP_OK) continue;
      if (only && bp_device_plugin(d) != only) continue;
      printf("%s\n", bp_device_name(d));
    }
  } else if (opt.ops && opt.json) {
    root = bp_info_ops_json(context, only);
    char* text = cJSON_Print(root);
    if (!text) {
      fprintf(stderr, "bp-info: out of memory\n");
      rc = 1;
      goto cleanup;
    }
    puts(text);
    cJSON_free(text);
  } else if (opt.ops) {
    bp_info_ops_print(context, only);
  } else if (opt.json) {
    char abi[32];
    snprintf(abi, sizeof(abi), "%u.%u", abi_major, abi_minor);
    root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "abi", abi);
    cJSON* plugins = cJSON_AddArrayToObject(root, "plugins");
    for (uint32_t i = 0; i < count; ++i) {
      bp_plugin_t* plugin = NULL;
      if (bp_context_plugin(context, i, &plugin) != BP_OK) continue;
      if (only && plugin != only) continue;
      cJSON* p = plugin_json(plugin);
      if (p) cJSON_AddItemToArray(plugins, p);
    }
    char* text = cJSON_Print(root);
    if (!text) {
      fprintf(stderr, "bp-info: out of memory\n");
      rc = 1;
      goto cleanup;
    }
    puts(text);
    cJSON_free(text);
  } else {
    if (!only)
      printf("backplane ABI %u.%u: %u plugin(s), %u device(s)\n", abi_major, abi_minor, count,
             bp_context_device_count(context));
    for (uint32_t i = 0; i < count; ++i) {
      bp_plugin_t* plugin = NULL;
      if (bp_context_plugin(context, i, &plugin) != BP_OK) continue;
      if (only && plugin != only) continue;
      print_plugin(plugin);
    }
    if (count == 0)
      printf("no plugins found (set BACKPLANE_LOG=debug to see where backplane looked)\n");
  }

cleanup:
  cJSON_Delete(root);
  bp_context_release(context);
  return rc;
}
