/* backplane CPU plugin: negotiation, instance, devices, memory, tables.
 *
 * The portable backend: "device" memory is host memory, streams are worker
 * threads (cpu_stream.c), kernels run on one global thread pool
 * (cpu_pool.c). BP_CPU_DEVICES=N (or the instance option "devices=N")
 * exposes N logical devices over the same cores, for placement and
 * collective tests on one machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bp_kit_comm.h"
#include "cpu_internal.h"
#include "cpu_region.h"
#include "cpu_kernels.h"

#ifdef BP_CPU_HAVE_CBLAS
#include <cblas.h>
void openblas_set_num_threads(int num_threads);
#endif

#define CPU_MAX_DEVICES 64u
#define CPU_ALIGNMENT 64u

/* ------------------------------------------------------------------------ */
/* Device properties                                                         */
/* ------------------------------------------------------------------------ */
static void cpu_model(char* out, size_t cap, double* out_ghz) {
  snprintf(out, cap, "unknown CPU");
  *out_ghz = 0;
  FILE* f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  char line[512];
  int have_model = 0;
  while (fgets(line, sizeof line, f)) {
    char* colon = strchr(line, ':');
    if (!colon) continue;
    char* v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    v[strcspn(v, "\n")] = 0;
    if (!have_model && strncmp(line, "model name", 10) == 0) {
      snprintf(out, cap, "%s", v);
      have_model = 1;
    } else if (*out_ghz == 0 && strncmp(line, "cpu MHz", 7) == 0) {
      *out_ghz = atof(v) / 1000.0;
    }
    if (have_model && *out_ghz > 0) break;
  }
  fclose(f);
}

static uint32_t simd_f32_lanes(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2")) return 8;
  if (__builtin_cpu_supports("sse2")) return 4;
  return 1;
#elif defined(__aarch64__)
  return 4; /* NEON */
#else
  return 1;
#endif
}

static void fill_properties(bp_device_properties_t* p, uint32_t index) {
  char model[96];
  double ghz;
  cpu_model(model, sizeof model, &ghz);
  if (ghz <= 0) ghz = 2.5; /* unknown clock: a typical server core */
  uint32_t cores = cpu_online_cores();
  uint32_t lanes = simd_f32_lanes();
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->kind = BP_DEVICE_KIND_CPU;
  snprintf(p->name, sizeof p->name, "CPU %u (%s)", index, model);
  snprintf(p->vendor, sizeof p->vendor, "backplane");
  snprintf(p->driver_version, sizeof p->driver_version, "cpu plugin %s",
#ifdef BP_CPU_HAVE_CBLAS
           "0.1 (OpenBLAS)"
#else
           "0.1"
#endif
  );
  p->memory_bytes = cpu_memory_physical();
  p->compute_units = cores;
  p->subgroup_size = lanes;
  for (uint32_t d = 1; d < BP_DTYPE_COUNT_ && d < 32; d++)
    if (cpu_dtype_has_kernels(d)) p->dtype_mask |= BP_DTYPE_BIT(d); /* c64 too: fft */
  p->dtype_mask |= BP_DTYPE_BIT(BP_DTYPE_F8E8M0FNU); /* MX scales of the quantization ops */
  p->flags = BP_DEVICE_FLAG_DENORMALS_PRESERVED | BP_DEVICE_FLAG_CORRECTLY_ROUNDED |
             BP_DEVICE_FLAG_UNIFIED_MEMORY | BP_DEVICE_FLAG_TIMESTAMPS | BP_DEVICE_FLAG_PEER_COPY;
  /* Estimates, not measurements: cores * clock * SIMD lanes * 2 (FMA) * 2
   * FMA pipes for f32; half for f64; f16/bf16 convert to f32 first (half the
   * f32 rate); integers one op per lane per cycle at 32 bits. */
  double f32 = cores * ghz * 1e9 * lanes * 2.0 * 2.0;
  p->peak_ops_per_s[BP_DTYPE_F32] = f32;
  p->peak_ops_per_s[BP_DTYPE_F64] = f32 / 2;
  p->peak_ops_per_s[BP_DTYPE_F16] = f32 / 2;
  p->peak_ops_per_s[BP_DTYPE_BF16] = f32 / 2;
  double i32 = cores * ghz * 1e9 * lanes;
  p->peak_ops_per_s[BP_DTYPE_I32] = i32;
  p->peak_ops_per_s[BP_DTYPE_I64] = i32 / 2;
  p->peak_ops_per_s[BP_DTYPE_I16] = i32 * 2;
  p->peak_ops_per_s[BP_DTYPE_I8] = i32 * 4;
  p->peak_ops_per_s[BP_DTYPE_U8] = i32 * 4;
  p->peak_ops_per_s[BP_DTYPE_BOOL] = i32 * 4;
  /* Estimate: ~8 GB/s per core, capped at a typical socket's 150 GB/s. */
  double bw = cores * 8e9;
  p->memory_bandwidth_bytes_per_s = bw < 150e9 ? bw : 150e9;
  p->host_link_bandwidth_bytes_per_s = p->memory_bandwidth_bytes_per_s / 2; /* memcpy: read + write */
  p->launch_overhead_ns = 2000; /* enqueue + worker wake-up + pool fan-out */
}

/* ------------------------------------------------------------------------ */
/* Instance and devices                                                      */
/* ------------------------------------------------------------------------ */
/* Device count from BP_CPU_DEVICES, then the devices= option (which wins);
 * 1..CPU_MAX_DEVICES, a malformed value warns and keeps the previous one. */
static uint32_t device_count_setting(const bpp_instance_create_info_t* info) {
  uint64_t n = 1;
  (void)bp_plugin_parse_uint(bp_kit_host(), "BP_CPU_DEVICES", getenv("BP_CPU_DEVICES"), 1,
                             CPU_MAX_DEVICES, 1, &n);
  if (info && info->struct_size >= sizeof *info && info->options) {
    const char* o = strstr(info->options, "devices=");
    if (o) (void)bp_plugin_parse_uint(bp_kit_host(), "BACKPLANE_CPU_OPTIONS devices", o + 8, 1,
                                      CPU_MAX_DEVICES, n, &n);
  }
  return (uint32_t)n;
}

static bp_status_t instance_create(const bpp_instance_create_info_t* info, bpp_instance_t* out) {
  bp_status_t st = BP_OK;
  struct bpp_instance_s* inst = NULL;
  if (!out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: instance_create: NULL out_instance");
  *out = NULL;
  uint32_t n = device_count_setting(info);
  inst = calloc(1, sizeof *inst);
  if (!inst || !(inst->devices = calloc(n, sizeof *inst->devices))) {
    st = cpu_error(BP_RESOURCE_EXHAUSTED, "cpu: instance_create: out of memory");
    goto cleanup;
  }
  inst->device_count = n;
  cpu_memory_init(inst, info && info->struct_size >= sizeof *info ? info->options : NULL);
  for (uint32_t i = 0; i < n; i++) {
    inst->devices[i].index = i;
    inst->devices[i].instance = inst;
    fill_properties(&inst->devices[i].props, i);
  }
  if ((st = cpu_pool_acquire())) goto cleanup;
#ifdef BP_CPU_HAVE_CBLAS
  cpu_blas_core_init();
  /* GEMM runs on OpenBLAS's own threads while our pool sleeps. */
  openblas_set_num_threads((int)cpu_online_cores());
#endif
  *out = inst;
  inst = NULL;
cleanup:
  if (inst) free(inst->devices);
  free(inst);
  return st;
}

static void instance_destroy(bpp_instance_t inst) {
  if (!inst) return;
  cpu_pool_release();
  free(inst->devices);
  free(inst);
}

static bp_status_t device_count(bpp_instance_t inst, uint32_t* out) {
  if (!inst || !out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: device_count: NULL argument");
  *out = inst->device_count;
  return BP_OK;
}

static bp_status_t device_open(bpp_instance_t inst, uint32_t index, bpp_device_t* out) {
  if (!inst || !out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: device_open: NULL argument");
  if (index >= inst->device_count)
    return cpu_error(BP_NOT_FOUND, "cpu: device_open: index %u, only %u devices", index,
                     inst->device_count);
  *out = &inst->devices[index];
  return BP_OK;
}

static void device_close(bpp_device_t dev) { (void)dev; /* owned by the instance */ }

static bp_status_t device_get_properties(bpp_device_t dev, bp_device_properties_t* props) {
  if (!dev || !props) return cpu_error(BP_INVALID_ARGUMENT, "cpu: device_get_properties: NULL argument");
  if (props->struct_size < sizeof(uint32_t))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: device_get_properties: struct_size %u too small",
                     props->struct_size);
  bp_kit_copy_out(props, &dev->props, sizeof dev->props);
  return BP_OK;
}

static const uint32_t k_space_kinds[CPU_MEMORY_SPACES] = {BP_MEMORY_DEVICE, BP_MEMORY_HOST_PINNED,
                                          BP_MEMORY_HOST_PAGEABLE};

/* Every space is the same host memory under one budget; 0 = unknown. */
static uint64_t space_capacity(bpp_device_t dev) {
  uint64_t budget = dev->instance->budget.limit;
  return budget == UINT64_MAX ? 0 : budget;
}

static bp_status_t device_memory_spaces(bpp_device_t dev, uint32_t capacity, uint32_t element_size,
                                        bp_memory_space_info_t* out, uint32_t* out_count) {
  if (!dev || !out_count || (capacity && !out))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: device_memory_spaces: NULL argument");
  if (capacity && element_size < BP_MEMORY_SPACE_INFO_V1_SIZE)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: device_memory_spaces: element_size %u too small",
                     element_size);
  *out_count = CPU_MEMORY_SPACES;
  for (uint32_t i = 0; i < CPU_MEMORY_SPACES && i < capacity; i++) {
    bp_memory_space_info_t info = {
        .struct_size = sizeof info,
        .kind = k_space_kinds[i],
        .flags = BP_MEMORY_FLAG_HOST_VISIBLE | BP_MEMORY_FLAG_HOST_COHERENT |
                 BP_MEMORY_FLAG_DEVICE_LOCAL,
        .capacity_bytes = space_capacity(dev),
        .alignment_bytes = CPU_ALIGNMENT,
    };
    bp_kit_put_entry(out, element_size, i, &info, sizeof info);
  }
  return BP_OK;
}

static bp_status_t device_memory_usage(bpp_device_t dev, uint32_t space, uint64_t* out_used,
                                       uint64_t* out_budget) {
  if (!dev || !out_used || !out_budget)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: device_memory_usage: NULL argument");
  if (space >= CPU_MEMORY_SPACES)
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: device_memory_usage: no memory space %u (the device has 3)",
                     space);
  /* Use and budget are the instance's: all spaces and devices share them. */
  *out_used = __atomic_load_n(&dev->instance->budget.used, __ATOMIC_RELAXED);
  *out_budget = space_capacity(dev);
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Buffers                                                                   */
/* ------------------------------------------------------------------------ */
static bp_status_t buffer_allocate(bpp_device_t dev, const bp_buffer_alloc_info_t* info,
                                   bpp_buffer_t* out) {
  if (!dev || !info || !out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_allocate: NULL argument");
  *out = NULL;
  if (info->struct_size < offsetof(bp_buffer_alloc_info_t, next))
    return cpu_error(BP_INVALID_ARGUMENT, "cpu: buffer_allocate: info struct_size %u too small", info->struct_size);
  if (info->memory_space >= CPU_MEMORY_SPACES)
    return cpu_error(BP_INVALID_ARGUMENT,
                     "cpu: buffer_allocate: no memory space %u (0 device, 1 pinned, 2 pageable)",
                     info->memory_space);
  return bp_kit_host_buffer_allocate(dev, info, CPU_ALIGNMENT, &dev->instance->budget, out);
}

/* ------------------------------------------------------------------------ */
/* Capabilities                                                              */
/* ------------------------------------------------------------------------ */
/* Fused ops a PATTERN region runs as one kernel (cpu_region_is_pattern). */
#define CPU_PATTERN_DTYPES \
  (BP_DTYPE_BIT(BP_DTYPE_F32) | BP_DTYPE_BIT(BP_DTYPE_F64) | BP_DTYPE_BIT(BP_DTYPE_F16) | BP_DTYPE_BIT(BP_DTYPE_BF16))
#define CPU_PATTERN(op) {sizeof(bp_fused_pattern_t), op, CPU_PATTERN_DTYPES}
static const bp_fused_pattern_t k_patterns[] = {
    CPU_PATTERN(BP_OP_softmax), CPU_PATTERN(BP_OP_log_softmax), CPU_PATTERN(BP_OP_layer_norm),
    CPU_PATTERN(BP_OP_rms_norm), CPU_PATTERN(BP_OP_scaled_dot_product_attention),
    CPU_PATTERN(BP_OP_add_rms_norm), CPU_PATTERN(BP_OP_add_layer_norm), CPU_PATTERN(BP_OP_swiglu),
    CPU_PATTERN(BP_OP_geglu), CPU_PATTERN(BP_OP_linear)};
#define CPU_NUM_PATTERNS ((uint32_t)(sizeof k_patterns / sizeof k_patterns[0]))

static bp_status_t query_fusion(bpp_device_t dev, bp_fusion_caps_t* out) {
  if (!dev || !out) return cpu_error(BP_INVALID_ARGUMENT, "cpu: query_fusion: NULL argument");
  bp_fusion_caps_t caps = {.struct_size = sizeof caps};
  caps.ew_max_inputs = CPU_EWP_MAX_INPUTS;
  caps.ew_max_outputs = CPU_EWP_MAX_OUTPUTS;
  caps.ew_max_instrs = CPU_EWP_MAX_INSTRS;
  caps.ew_max_registers = CPU_EWP_MAX_REGISTERS;
  caps.ew_dtype_mask = cpu_ewp_dtype_mask();
  caps.ew_opcode_mask = cpu_ewp_opcode_mask(&caps.ew_opcode_words);
  /* Epilogues: any elementwise program after mm / addmm / linear (row
   * blocks) and after convolution (whole output). */
  caps.matmul_epilogues = BP_EPILOGUE_BIAS | BP_EPILOGUE_RELU | BP_EPILOGUE_GELU | BP_EPILOGUE_SILU |
                          BP_EPILOGUE_RESIDUAL_ADD | BP_EPILOGUE_EW_PROGRAM;
  caps.conv_epilogues = caps.matmul_epilogues;
  /* Any elementwise program before sum / mean / amax / amin over trailing
   * dims, f32 / f64 (cpu_region_reduce.c). */
  caps.reduction_prologues = BP_EPILOGUE_EW_PROGRAM;
  caps.num_patterns = CPU_NUM_PATTERNS;
  caps.patterns = k_patterns;
  caps.pattern_stride = sizeof(bp_fused_pattern_t);
  bp_kit_copy_out(out, &caps, sizeof caps);
  return BP_OK;
}

/* ------------------------------------------------------------------------ */
/* Tables and negotiation                                                    */
/* ------------------------------------------------------------------------ */
static const bpp_core_table_t k_core = {
    .struct_size = sizeof(bpp_core_table_t),
    .instance_create = instance_create,
    .instance_destroy = instance_destroy,
    .device_count = device_count,
    .device_open = device_open,
    .device_close = device_close,
    .device_get_properties = device_get_properties,
    .device_memory_spaces = device_memory_spaces,
    .device_memory_usage = device_memory_usage,
    .buffer_allocate = buffer_allocate,
    BP_KIT_HOST_MEMORY_SLOTS,
    .copy_peer = bp_kit_host_copy_d2d, /* every device is host memory */
    .stream_create = cpu_stream_create,
    BP_KIT_STREAM_SLOTS,
    .buffer_import = cpu_buffer_import,
    .buffer_export = cpu_buffer_export,
};

static bpp_op_launch_fn k_launch[BP_OP_COUNT];
static pthread_once_t k_launch_once = PTHREAD_ONCE_INIT;
static void init_launch(void) {
  for (uint32_t op = 1; op < BP_OP_COUNT; op++)
    if (cpu_op_implemented(op)) k_launch[op] = cpu_launch_op;
}

static const bpp_op_table_t k_ops = {
    .struct_size = sizeof(bpp_op_table_t),
    .launch_count = BP_OP_COUNT,
    .launch = k_launch,
};

static const bpp_caps_table_t k_caps = {
    .struct_size = sizeof(bpp_caps_table_t),
    .query_support = cpu_query_support,
    .estimate_cost = cpu_estimate_cost,
    .query_fusion = query_fusion,
    .launch_ew_program = cpu_launch_ew_program,
};

static const bp_plugin_vtable_t k_vtable = {
    .struct_size = sizeof(bp_plugin_vtable_t),
    .core = &k_core,
    .ops = &k_ops,
    .caps = &k_caps,
    .exec = &cpu_exec_table,
    .comm = &bp_kit_host_comm_table,
};

static const bp_plugin_vtable_t* get_vtable(void) {
  pthread_once(&k_launch_once, init_launch);
  return &k_vtable;
}

static const bp_kit_plugin_info_t k_info = {
    .name = "cpu", .version = CPU_PLUGIN_VERSION, .vendor = "backplane", .get_vtable = get_vtable};

BP_KIT_PLUGIN_ENTRY(&k_info)
