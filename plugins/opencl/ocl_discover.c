/* backplane OpenCL plugin: device discovery and the lazy runtime.
 *
 * OpenCL implementations start threads as soon as a platform is queried
 * (PoCL does in clGetPlatformIDs), and threads do not survive fork: a
 * process that only enumerated devices and then forks (the conformance
 * runner's crash isolation, any server that forks workers) would hang in
 * its children. So instance_create enumerates in a short-lived child
 * process that sends each device's properties back over a pipe, and this
 * process starts OpenCL only when a device is first used (a buffer, a
 * stream: ocl_runtime_ready). BP_OPENCL_DISCOVERY=inprocess enumerates in
 * this process instead (and so does a failed child, with a log line).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ocl_internal.h"

#define OCL_DISCOVERY_TIMEOUT_MS 60000

/* What discovery learns about one device (sent through the pipe as is:
 * the child is a fork of this process, so the layout is the same). */
typedef struct ocl_record {
  bp_device_properties_t props;
  bp_gpu_device_caps_t caps;
  uint64_t budget, max_alloc;
  uint32_t platform_index, device_index;
  int32_t host_unified;
  char cache_key[384];
} ocl_record_t;

static void info_str(const struct bpp_device_s* d, cl_device_info what, char* out, size_t cap) {
  out[0] = 0;
  if (d->cl->clGetDeviceInfo(d->id, what, cap, out, NULL) != CL_SUCCESS) out[0] = 0;
  out[cap - 1] = 0;
}
static uint64_t info_u64(const struct bpp_device_s* d, cl_device_info what) {
  cl_ulong v = 0;
  return d->cl->clGetDeviceInfo(d->id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}
static uint32_t info_u32(const struct bpp_device_s* d, cl_device_info what) {
  cl_uint v = 0;
  return d->cl->clGetDeviceInfo(d->id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}
static size_t info_size(const struct bpp_device_s* d, cl_device_info what) {
  size_t v = 0;
  return d->cl->clGetDeviceInfo(d->id, what, sizeof v, &v, NULL) == CL_SUCCESS ? v : 0;
}

/* Properties from the device. Throughput figures are estimates (OpenCL
 * reports clocks and units, not peak rates): units x clock x a SIMD width
 * of 8 f32 lanes x 2 (FMA); bandwidth 10 GB/s per compute unit for CPU
 * devices, 200 GB/s otherwise. */
static void fill_properties(struct bpp_device_s* d) {
  bp_device_properties_t* p = &d->props;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  cl_device_type type = 0;
  d->cl->clGetDeviceInfo(d->id, CL_DEVICE_TYPE, sizeof type, &type, NULL);
  char vendor[64], version[64], driver[64], ext[4096];
  info_str(d, CL_DEVICE_NAME, p->name, sizeof p->name);
  info_str(d, CL_DEVICE_VENDOR, vendor, sizeof vendor);
  info_str(d, CL_DEVICE_VERSION, version, sizeof version);
  info_str(d, CL_DRIVER_VERSION, driver, sizeof driver);
  info_str(d, CL_DEVICE_EXTENSIONS, ext, sizeof ext);
  snprintf(p->vendor, sizeof p->vendor, "%s", vendor);
  snprintf(p->driver_version, sizeof p->driver_version, "%s", driver);
  char platform_name[128] = "";
  d->cl->clGetPlatformInfo(d->platform, CL_PLATFORM_NAME, sizeof platform_name, platform_name, NULL);
  platform_name[sizeof platform_name - 1] = 0;
  int software = strstr(platform_name, "Portable Computing Language") != NULL;
  p->kind = software                            ? BP_DEVICE_KIND_VIRTUAL
            : (type & CL_DEVICE_TYPE_CPU)       ? BP_DEVICE_KIND_CPU
            : (type & CL_DEVICE_TYPE_GPU)       ? BP_DEVICE_KIND_GPU
            : (type & CL_DEVICE_TYPE_ACCELERATOR) ? BP_DEVICE_KIND_ACCELERATOR
                                                : BP_DEVICE_KIND_UNKNOWN;
  /* A stable fingerprint: a hash of name, vendor and driver (OpenCL 1.2
   * has no device UUID). */
  uint64_t h1 = 1469598103934665603ull, h2 = 1099511628211ull;
  const char* parts[3] = {p->name, vendor, driver};
  for (int k = 0; k < 3; k++)
    for (const char* c = parts[k]; *c; c++) {
      h1 = (h1 ^ (unsigned char)*c) * 1099511628211ull;
      h2 = (h2 + (unsigned char)*c) * 6364136223846793005ull;
    }
  memcpy(p->uuid, &h1, 8);
  memcpy(p->uuid + 8, &h2, 8);
  d->host_unified = info_u32(d, CL_DEVICE_HOST_UNIFIED_MEMORY) != 0;
  d->max_alloc = info_u64(d, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  uint64_t mem = info_u64(d, CL_DEVICE_GLOBAL_MEM_SIZE);
  d->budget = d->inst->budget_override && d->inst->budget_override < mem ? d->inst->budget_override : mem;
  p->memory_bytes = d->budget;
  p->compute_units = info_u32(d, CL_DEVICE_MAX_COMPUTE_UNITS);
  p->subgroup_size = 1; /* OpenCL 1.2 has no subgroup query */
  int fp64 = strstr(ext, "cl_khr_fp64") != NULL;
  p->dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32) | BP_DTYPE_BIT(BP_DTYPE_F16) | BP_DTYPE_BIT(BP_DTYPE_BF16) |
                  BP_DTYPE_BIT(BP_DTYPE_I8) | BP_DTYPE_BIT(BP_DTYPE_U8) | BP_DTYPE_BIT(BP_DTYPE_I16) |
                  BP_DTYPE_BIT(BP_DTYPE_I32) | BP_DTYPE_BIT(BP_DTYPE_I64) | BP_DTYPE_BIT(BP_DTYPE_BOOL) |
                  (fp64 ? BP_DTYPE_BIT(BP_DTYPE_F64) : 0);
  cl_device_fp_config fpc = 0;
  d->cl->clGetDeviceInfo(d->id, CL_DEVICE_SINGLE_FP_CONFIG, sizeof fpc, &fpc, NULL);
  p->flags = BP_DEVICE_FLAG_TIMESTAMPS | (d->host_unified ? BP_DEVICE_FLAG_UNIFIED_MEMORY : 0) |
             ((fpc & CL_FP_DENORM) ? BP_DEVICE_FLAG_DENORMALS_PRESERVED : 0) |
             ((fpc & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT) ? BP_DEVICE_FLAG_CORRECTLY_ROUNDED : 0);
  double clock_hz = (double)info_u32(d, CL_DEVICE_MAX_CLOCK_FREQUENCY) * 1e6;
  if (clock_hz <= 0) clock_hz = 1e9;
  double f32 = (double)p->compute_units * clock_hz * 8.0 * 2.0;
  p->peak_ops_per_s[BP_DTYPE_F32] = f32;
  p->peak_ops_per_s[BP_DTYPE_F16] = f32;
  p->peak_ops_per_s[BP_DTYPE_BF16] = f32;
  if (fp64) p->peak_ops_per_s[BP_DTYPE_F64] = f32 / 2;
  p->peak_ops_per_s[BP_DTYPE_I32] = f32 / 2;
  p->memory_bandwidth_bytes_per_s = (type & CL_DEVICE_TYPE_CPU) || software ? 10e9 * p->compute_units : 200e9;
  p->host_link_bandwidth_bytes_per_s = d->host_unified ? p->memory_bandwidth_bytes_per_s : 16e9;
  p->launch_overhead_ns = software ? 20000 : 10000;
  d->caps.dtype_mask = p->dtype_mask;
  d->caps.max_group_size = (uint32_t)info_size(d, CL_DEVICE_MAX_WORK_GROUP_SIZE);
  d->caps.max_groups = 1u << 16;
  snprintf(d->cache_key, sizeof d->cache_key, "%.120s|%.60s|%.60s|%.60s|" BP_OPENCL_PLUGIN_VERSION, p->name, vendor,
           version, driver);
}


/* Enumerates every device of every platform into `recs` (at most
 * OCL_MAX_DEVICES); returns the count, or -1 with the reason in msg. */
static int enumerate(struct bpp_instance_s* inst, ocl_record_t* recs, char* msg, size_t cap) {
  const ocl_symbols_t* cl = &inst->cl;
  cl_platform_id plats[8];
  cl_uint nplat = 0;
  cl_int err = cl->clGetPlatformIDs(8, plats, &nplat);
  if (err != CL_SUCCESS || nplat == 0) {
    snprintf(msg, cap, "no OpenCL platform (clGetPlatformIDs: %s (%d), %u platforms)", ocl_error_name(err), (int)err,
             (unsigned)nplat);
    return -1;
  }
  if (nplat > 8) nplat = 8;
  int n = 0;
  for (cl_uint p = 0; p < nplat && n < OCL_MAX_DEVICES; p++) {
    cl_device_id ids[OCL_MAX_DEVICES];
    cl_uint nd = 0;
    if (cl->clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, OCL_MAX_DEVICES, ids, &nd) != CL_SUCCESS) continue;
    for (cl_uint k = 0; k < nd && n < OCL_MAX_DEVICES; k++) {
      struct bpp_device_s tmp;
      memset(&tmp, 0, sizeof tmp);
      tmp.inst = inst;
      tmp.cl = cl;
      tmp.platform = plats[p];
      tmp.id = ids[k];
      fill_properties(&tmp);
      ocl_record_t* r = &recs[n++];
      memset(r, 0, sizeof *r);
      r->props = tmp.props;
      r->caps = tmp.caps;
      r->budget = tmp.budget;
      r->max_alloc = tmp.max_alloc;
      r->host_unified = tmp.host_unified;
      r->platform_index = p;
      r->device_index = k;
      memcpy(r->cache_key, tmp.cache_key, sizeof r->cache_key);
    }
  }
  if (n == 0) snprintf(msg, cap, "no OpenCL device on %u platform(s)", (unsigned)nplat);
  return n ? n : -1;
}

static int read_all(int fd, void* buf, size_t size, int timeout_ms) {
  char* p = buf;
  size_t got = 0;
  while (got < size) {
    struct pollfd pfd = {fd, POLLIN, 0};
    int pr = poll(&pfd, 1, timeout_ms);
    if (pr < 0 && errno == EINTR) continue;
    if (pr <= 0) return -1;
    ssize_t r = read(fd, p + got, size - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

static void write_all(int fd, const void* buf, size_t size) {
  const char* p = buf;
  while (size) {
    ssize_t w = write(fd, p, size);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    size -= (size_t)w;
  }
}

/* Runs enumerate() in a child; returns the count, -1 with msg on failure
 * there, -2 when no child could run (the caller enumerates here). */
static int enumerate_in_child(struct bpp_instance_s* inst, ocl_record_t* recs, char* msg, size_t cap) {
  int fds[2];
  if (pipe(fds) != 0) return -2;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -2;
  }
  if (pid == 0) {
    close(fds[0]);
    char cmsg[256] = "";
    int32_t n = enumerate(inst, recs, cmsg, sizeof cmsg);
    write_all(fds[1], &n, sizeof n);
    if (n < 0) write_all(fds[1], cmsg, sizeof cmsg);
    else write_all(fds[1], recs, (size_t)n * sizeof *recs);
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  int32_t n = -2;
  int bad = read_all(fds[0], &n, sizeof n, OCL_DISCOVERY_TIMEOUT_MS);
  if (!bad && n >= 0 && n <= OCL_MAX_DEVICES) bad = read_all(fds[0], recs, (size_t)n * sizeof *recs, OCL_DISCOVERY_TIMEOUT_MS);
  else if (!bad && n == -1) {
    char cmsg[256];
    if (read_all(fds[0], cmsg, sizeof cmsg, OCL_DISCOVERY_TIMEOUT_MS) == 0) {
      cmsg[sizeof cmsg - 1] = 0;
      snprintf(msg, cap, "%s", cmsg);
    } else {
      snprintf(msg, cap, "OpenCL device discovery failed");
    }
  } else {
    bad = 1;
  }
  close(fds[0]);
  if (bad) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (bad) return -2;
  return n;
}

bp_status_t ocl_discover(struct bpp_instance_s* inst, char* msg, size_t cap) {
  ocl_record_t* recs = calloc(OCL_MAX_DEVICES, sizeof *recs);
  if (!recs) {
    snprintf(msg, cap, "out of host memory");
    return BP_RESOURCE_EXHAUSTED;
  }
  const char* mode = getenv("BP_OPENCL_DISCOVERY");
  int n = -2;
  if (!mode || strcmp(mode, "inprocess") != 0) {
    n = enumerate_in_child(inst, recs, msg, cap);
    if (n == -2) bp_kit_log(BP_LOG_INFO, "opencl: discovery in a child process failed; enumerating in this process");
  }
  if (n == -2) {
    n = enumerate(inst, recs, msg, cap);
    inst->runtime_started = 1; /* this process has started OpenCL */
  }
  if (n <= 0) {
    free(recs);
    return BP_UNAVAILABLE;
  }
  for (int k = 0; k < n; k++) {
    struct bpp_device_s* d = calloc(1, sizeof *d);
    if (!d) break;
    d->inst = inst;
    d->cl = &inst->cl;
    d->props = recs[k].props;
    d->caps = recs[k].caps;
    d->budget = recs[k].budget;
    d->max_alloc = recs[k].max_alloc;
    d->host_unified = recs[k].host_unified;
    d->platform_index = recs[k].platform_index;
    d->device_index = recs[k].device_index;
    memcpy(d->cache_key, recs[k].cache_key, sizeof d->cache_key);
    pthread_mutex_init(&d->aux_mu, NULL);
    pthread_mutex_init(&d->ewgen_mu, NULL);
    for (uint32_t j = 0; j < BP_GPU_PROGRAM_COUNT; j++) pthread_mutex_init(&d->kernels[j].mu, NULL);
    inst->devices[inst->ndevices++] = d;
  }
  free(recs);
  if (inst->ndevices == 0) {
    snprintf(msg, cap, "out of host memory");
    return BP_RESOURCE_EXHAUSTED;
  }
  return BP_OK;
}

/* Starts OpenCL in this process: finds each discovered device again by its
 * platform and device index, one context per platform, the map queues. */
static bp_status_t start_runtime(struct bpp_instance_s* inst) {
  const ocl_symbols_t* cl = &inst->cl;
  cl_platform_id plats[8];
  cl_uint nplat = 0;
  cl_int err = cl->clGetPlatformIDs(8, plats, &nplat);
  if (err != CL_SUCCESS) return ocl_fail("clGetPlatformIDs", err);
  for (uint32_t k = 0; k < inst->ndevices; k++) {
    struct bpp_device_s* d = inst->devices[k];
    if (d->platform_index >= nplat)
      return BP_KIT_ERROR(BP_DEVICE_LOST, "OpenCL platform %u is gone", d->platform_index);
    d->platform = plats[d->platform_index];
    cl_device_id ids[OCL_MAX_DEVICES];
    cl_uint nd = 0;
    err = cl->clGetDeviceIDs(d->platform, CL_DEVICE_TYPE_ALL, OCL_MAX_DEVICES, ids, &nd);
    if (err != CL_SUCCESS || d->device_index >= nd)
      return BP_KIT_ERROR(BP_DEVICE_LOST, "OpenCL device %u of platform %u is gone", d->device_index, d->platform_index);
    d->id = ids[d->device_index];
    /* One context per platform, holding all of its devices. */
    for (uint32_t j = 0; j < k && !d->ctx; j++)
      if (inst->devices[j]->platform == d->platform) d->ctx = inst->devices[j]->ctx;
    if (!d->ctx) {
      cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)d->platform, 0};
      d->ctx = cl->clCreateContext(props, nd, ids, NULL, NULL, &err);
      if (!d->ctx) return ocl_fail("clCreateContext", err);
      inst->contexts[inst->ncontexts++] = d->ctx;
    }
    d->aux_queue = cl->clCreateCommandQueue(d->ctx, d->id, 0, &err);
    if (!d->aux_queue) return ocl_fail("clCreateCommandQueue", err);
    bp_status_t st = ocl_heaps_create(d);
    if (st) return st;
  }
  return BP_OK;
}

bp_status_t ocl_runtime_ready(struct bpp_device_s* d) {
  struct bpp_instance_s* inst = d->inst;
  pthread_mutex_lock(&inst->mu);
  if (!inst->runtime_ready) {
    bp_status_t st = start_runtime(inst);
    inst->runtime_ready = st == BP_OK ? 1 : -1;
    inst->runtime_err = st;
    if (st) snprintf(inst->runtime_msg, sizeof inst->runtime_msg, "%s", bp_plugin_last_error());
  }
  int ready = inst->runtime_ready;
  pthread_mutex_unlock(&inst->mu);
  if (ready < 0) return bp_kit_error(inst->runtime_err, "%s", inst->runtime_msg);
  return BP_OK;
}
