/* Ops through the shared GPU kernels (see cuda_kernels.h).
 *
 * A launch binds each operand's whole buffer (its device address) and one
 * more pointer, to the launch's argument block (bp_gpu_args.h), which the
 * kernels read from global memory: each stream has one device slot for it,
 * written by cuMemcpyHtoDAsync right before the kernel. Stream order makes
 * one slot enough (the next copy into it runs after the kernel that read
 * it), and the driver stages a pageable source before the call returns.
 * Modules are per device, loaded once under a lock; the functions they hold
 * are immutable afterwards.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_kernels.h"

#if BP_CUDA_KERNELS
#include "bp_gpu_ops.h"
#include "cuda_ptx_kernels.h" /* generated: cuda_ptx_programs[] */

typedef struct cuda_modules {
  pthread_mutex_t mu;
  CUmodule mod[BP_GPU_PROGRAM_COUNT];
  CUfunction fn[BP_GPU_PROGRAM_COUNT];
} cuda_modules_t;

static const bp_gpu_device_caps_t k_caps = {
    .dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F32) | BP_DTYPE_BIT(BP_DTYPE_F16) |
                  BP_DTYPE_BIT(BP_DTYPE_BF16) | BP_DTYPE_BIT(BP_DTYPE_F64) |
                  BP_DTYPE_BIT(BP_DTYPE_I8) | BP_DTYPE_BIT(BP_DTYPE_U8) |
                  BP_DTYPE_BIT(BP_DTYPE_I16) | BP_DTYPE_BIT(BP_DTYPE_I32) |
                  BP_DTYPE_BIT(BP_DTYPE_I64) | BP_DTYPE_BIT(BP_DTYPE_BOOL),
    .max_group_size = 1024,        /* threads per block */
    .max_groups = (1u << 31) - 1}; /* gridDim.x */

static int have_module_api(const cuda_symbols_t* cu) {
  return cu->cuModuleLoadDataEx && cu->cuModuleGetFunction && cu->cuModuleUnload &&
         cu->cuLaunchKernel;
}

bp_status_t cuda_kernels_device_open(bpp_device_t d) {
  /* BP_CUDA_NO_KERNELS=1: cuBLASLt alone (tests of its own answers). */
  int off = 0;
  bp_plugin_parse_flag(bp_kit_host(), "BP_CUDA_NO_KERNELS", getenv("BP_CUDA_NO_KERNELS"), 0, &off);
  if (off || !have_module_api(d->cu)) return BP_OK;
  cuda_modules_t* m = calloc(1, sizeof *m);
  if (!m) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  pthread_mutex_init(&m->mu, NULL);
  d->kernels = m;
  return BP_OK;
}

void cuda_kernels_device_close(bpp_device_t d) {
  cuda_modules_t* m = d->kernels;
  if (!m) return;
  for (int i = 0; i < BP_GPU_PROGRAM_COUNT; ++i)
    if (m->mod[i]) d->cu->cuModuleUnload(m->mod[i]);
  pthread_mutex_destroy(&m->mu);
  free(m);
  d->kernels = NULL;
}

void cuda_kernels_stream_release(bpp_stream_t s) {
  if (s->args_dev) s->dev->cu->cuMemFree_v2(s->args_dev);
  s->args_dev = 0;
}

/* The program's function, JIT-loading its PTX on first use (context
 * pushed). */
static bp_status_t function_of(bpp_device_t d, uint32_t program, CUfunction* out) {
  cuda_modules_t* m = d->kernels;
  if (program >= BP_GPU_PROGRAM_COUNT)
    return bp_kit_error(BP_INTERNAL, "cuda: no kernel program %u", program);
  pthread_mutex_lock(&m->mu);
  CUresult r = CUDA_SUCCESS;
  const bp_gpu_blob_t* blob = &cuda_ptx_programs[program];
  if (!m->fn[program]) {
    char log[1024] = "";
    CUjit_option opts[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* vals[2] = {log, (void*)(uintptr_t)sizeof log};
    r = d->cu->cuModuleLoadDataEx(&m->mod[program], blob->data, 2, opts, vals);
    if (r == CUDA_SUCCESS) r = d->cu->cuModuleGetFunction(&m->fn[program], m->mod[program], blob->kernel);
    if (r != CUDA_SUCCESS && log[0])
      bp_kit_log(BP_LOG_ERROR, "cuda: JIT of %s: %s", blob->name, log);
  }
  *out = m->fn[program];
  pthread_mutex_unlock(&m->mu);
  if (r != CUDA_SUCCESS) {
    char what[96];
    snprintf(what, sizeof what, "loading kernel %s", blob->kernel);
    return cuda_fail(d, r, what);
  }
  return BP_OK;
}

/* bp_gpu_launch_fn: one kernel on the stream (context pushed). */
static bp_status_t launch_one(void* ctx, const bp_gpu_launch_t* l) {
  bpp_stream_t s = ctx;
  bpp_device_t d = s->dev;
  CUfunction fn = NULL;
  bp_status_t st = function_of(d, l->program, &fn);
  if (st != BP_OK) return st;
  if (!s->args_dev) {
    CUresult r = d->cu->cuMemAlloc_v2(&s->args_dev, sizeof l->args);
    if (r != CUDA_SUCCESS) {
      s->args_dev = 0;
      return cuda_fail(d, r, "kernel argument slot");
    }
  }
  if (l->num_operands > BP_GPU_LAUNCH_MAX_OPERANDS || l->args_size > sizeof l->args)
    return bp_kit_error(BP_INTERNAL, "cuda: a launch of %u operands, %u argument bytes",
                        l->num_operands, l->args_size);
  CUdeviceptr ptr[BP_GPU_LAUNCH_MAX_OPERANDS + 1];
  void* params[BP_GPU_LAUNCH_MAX_OPERANDS + 1];
  CUdeviceptr fallback = s->args_dev;
  for (uint32_t i = 0; i < l->num_operands; ++i)
    if (l->operands[i] && l->operands[i]->buffer) {
      fallback = l->operands[i]->buffer->ptr;
      break;
    }
  for (uint32_t i = 0; i < l->num_operands; ++i) {
    const bp_tensor_desc_t* t = l->operands[i];
    ptr[i] = t && t->buffer ? t->buffer->ptr : fallback; /* offsets are in the block */
    params[i] = &ptr[i];
  }
  ptr[l->num_operands] = s->args_dev;
  params[l->num_operands] = &ptr[l->num_operands];
  CUresult r = d->cu->cuMemcpyHtoDAsync_v2(s->args_dev, &l->args, l->args_size, s->s);
  if (r != CUDA_SUCCESS) return cuda_fail(d, r, "kernel arguments");
  unsigned grid[3], block[3];
  for (int k = 0; k < 3; ++k) {
    block[k] = l->local[k] ? l->local[k] : 1;
    grid[k] = (unsigned)((l->global[k] + block[k] - 1) / block[k]);
    if (grid[k] == 0) grid[k] = 1;
  }
  r = d->cu->cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, s->s,
                            params, NULL);
  return r == CUDA_SUCCESS ? BP_OK : cuda_fail(d, r, "cuLaunchKernel");
}

int cuda_kernels_implemented(uint32_t op) { return bp_gpu_op_implemented(op); }

uint32_t cuda_kernels_support(bpp_device_t d, const bp_op_call_t* call, char* why, size_t cap) {
  if (!d->kernels) {
    snprintf(why, cap, "cuda: no kernels (the driver lacks cuModuleLoadDataEx / cuLaunchKernel, "
                       "or BP_CUDA_NO_KERNELS=1)");
    return BP_SUPPORT_DEVICE;
  }
  if (!bp_gpu_op_implemented(call->op_id)) {
    snprintf(why, cap, "cuda: %s: no CUDA kernel for it yet", bp_kit_op_name(call->op_id));
    return BP_SUPPORT_OP;
  }
  int reason = bp_gpu_op_supported(&k_caps, call, why, cap);
  return reason ? (uint32_t)reason : BP_SUPPORT_OK;
}

bp_status_t cuda_kernels_launch(bpp_stream_t s, const bp_op_call_t* call) {
  bpp_device_t d = s->dev;
  char why[256];
  if (cuda_kernels_support(d, call, why, sizeof why) != BP_SUPPORT_OK)
    return bp_kit_error(BP_UNIMPLEMENTED, "%s", why);
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK || (st = cuda_ctx_push(d)) != BP_OK) return st;
  st = bp_gpu_op_run(&k_caps, call, launch_one, s);
  cuda_ctx_pop(d);
  return st;
}

#else /* no PTX at build time */

bp_status_t cuda_kernels_device_open(bpp_device_t d) { (void)d; return BP_OK; }
void cuda_kernels_device_close(bpp_device_t d) { (void)d; }
void cuda_kernels_stream_release(bpp_stream_t s) { (void)s; }
int cuda_kernels_implemented(uint32_t op) { (void)op; return 0; }
uint32_t cuda_kernels_support(bpp_device_t d, const bp_op_call_t* call, char* why, size_t cap) {
  (void)d;
  snprintf(why, cap, "cuda: %s: the plugin was built without its GPU kernels (needs clang-15 "
                     "and libclc at build time)", bp_kit_op_name(call->op_id));
  return BP_SUPPORT_OP;
}
bp_status_t cuda_kernels_launch(bpp_stream_t s, const bp_op_call_t* call) {
  char why[256];
  cuda_kernels_support(s->dev, call, why, sizeof why);
  return bp_kit_error(BP_UNIMPLEMENTED, "%s", why);
}

#endif
