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

#include "cuda_ewgen.h"
#include "cuda_kernels.h"

#if BP_CUDA_KERNELS
#include "bp_gpu_ops.h"
#include "cuda_ptx_kernels.h" /* generated: cuda_ptx_programs[] */
#if BP_CUDA_CUBINS
#include "cuda_sm80_kernels.h" /* generated: cuda_sm80_programs[] (ptxas, sm_80) */
#include "cuda_sm90_kernels.h" /* generated: cuda_sm90_programs[] (ptxas, sm_90) */
#endif

_Static_assert(sizeof(((bp_gpu_launch_t*)0)->args) <= CUDA_ARGS_MAX, "argument block record");

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
  return cuda_ewgen_device_open(d);
}

void cuda_kernels_device_close(bpp_device_t d) {
  cuda_modules_t* m = d->kernels;
  if (!m) return;
  cuda_ewgen_device_close(d);
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

/* The embedded cubin that runs on the device, or NULL: SASS runs on its
 * own major compute capability, at the same or a newer minor. */
static const bp_gpu_blob_t* cubin_for(bpp_device_t d, uint32_t program) {
#if BP_CUDA_CUBINS
  if (d->cc_major == 8) return &cuda_sm80_programs[program];
  if (d->cc_major == 9) return &cuda_sm90_programs[program];
#endif
  (void)d, (void)program;
  return NULL;
}

/* Errors that say an image does not fit the device (then the PTX is
 * JIT-compiled instead). */
static int image_refused(CUresult r) {
  return r == CUDA_ERROR_NO_BINARY_FOR_GPU || r == CUDA_ERROR_INVALID_IMAGE ||
         r == CUDA_ERROR_INVALID_SOURCE || r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
}

/* The program's function, loading its module on first use: the cubin for
 * the device's compute capability, else (none, or refused) the PTX through
 * the driver's JIT (context pushed). */
static bp_status_t function_of(bpp_device_t d, uint32_t program, CUfunction* out) {
  cuda_modules_t* m = d->kernels;
  if (program >= BP_GPU_PROGRAM_COUNT)
    return bp_kit_error(BP_INTERNAL, "cuda: no kernel program %u", program);
  pthread_mutex_lock(&m->mu);
  CUresult r = CUDA_SUCCESS;
  const bp_gpu_blob_t* blob = &cuda_ptx_programs[program];
  const bp_gpu_blob_t* cubin = m->fn[program] ? NULL : cubin_for(d, program);
  if (cubin) {
    r = d->cu->cuModuleLoadDataEx(&m->mod[program], cubin->data, 0, NULL, NULL);
    if (r == CUDA_SUCCESS) r = d->cu->cuModuleGetFunction(&m->fn[program], m->mod[program], cubin->kernel);
    if (r != CUDA_SUCCESS && m->mod[program]) d->cu->cuModuleUnload(m->mod[program]);
    if (r != CUDA_SUCCESS) m->mod[program] = NULL, m->fn[program] = NULL;
    if (image_refused(r)) {
      char text[160];
      cuda_error_text(d->cu, r, text, sizeof text);
      bp_kit_log(BP_LOG_INFO, "cuda: the sm_%d0 cubin of %s was refused (%s); JIT of its PTX",
                 d->cc_major, blob->name, text);
      r = CUDA_SUCCESS;
    } else if (r != CUDA_SUCCESS) {
      blob = cubin;
    }
  }
  if (r == CUDA_SUCCESS && !m->fn[program]) {
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

/* A launch as a self-contained record: the operands' device addresses
 * (0: an unbound slot) instead of their descriptors. */
static bp_status_t record_of(const bp_gpu_launch_t* l, cuda_launch_rec_t* out) {
  if (l->num_operands > BP_GPU_LAUNCH_MAX_OPERANDS || l->args_size > sizeof out->args)
    return bp_kit_error(BP_INTERNAL, "cuda: a launch of %u operands, %u argument bytes",
                        l->num_operands, l->args_size);
  memset(out, 0, sizeof *out);
  out->program = l->program;
  out->num_operands = l->num_operands;
  for (uint32_t i = 0; i < l->num_operands; ++i) {
    const bp_tensor_desc_t* t = l->operands[i];
    out->ptr[i] = t && t->buffer ? t->buffer->ptr : 0; /* offsets are in the block */
  }
  for (int k = 0; k < 3; ++k) {
    out->block[k] = l->local[k] ? l->local[k] : 1;
    out->grid[k] = (unsigned)((l->global[k] + out->block[k] - 1) / out->block[k]);
    if (out->grid[k] == 0) out->grid[k] = 1;
  }
  out->args_size = l->args_size;
  memcpy(out->args, &l->args, l->args_size);
  return BP_OK;
}

/* cuLaunchKernel of `fn` with the record's operands and block. */
static bp_status_t enqueue_fn(bpp_stream_t s, CUfunction fn, const cuda_launch_rec_t* rec, CUdeviceptr args) {
  bpp_device_t d = s->dev;
  CUdeviceptr ptr[BP_GPU_LAUNCH_MAX_OPERANDS + 1];
  void* params[BP_GPU_LAUNCH_MAX_OPERANDS + 1];
  CUdeviceptr fallback = args; /* an unbound slot takes the first bound buffer */
  for (uint32_t i = 0; i < rec->num_operands; ++i)
    if (rec->ptr[i]) {
      fallback = rec->ptr[i];
      break;
    }
  for (uint32_t i = 0; i < rec->num_operands; ++i) {
    ptr[i] = rec->ptr[i] ? rec->ptr[i] : fallback;
    params[i] = &ptr[i];
  }
  ptr[rec->num_operands] = args;
  params[rec->num_operands] = &ptr[rec->num_operands];
  CUresult r = d->cu->cuLaunchKernel(fn, rec->grid[0], rec->grid[1], rec->grid[2], rec->block[0],
                                     rec->block[1], rec->block[2], 0, s->s, params, NULL);
  return r == CUDA_SUCCESS ? BP_OK : cuda_fail(d, r, "cuLaunchKernel");
}

/* The generated kernel of a fused program's launch (`args`: its packed
 * bp_gpu_ew_args_t) where generation is on and NVRTC builds it; else
 * nonzero with the reason in `why` (context pushed). */
static int is_ew_interpreter(uint32_t program) {
  return program == BP_GPU_PROGRAM_ew_f32 || program == BP_GPU_PROGRAM_ew_f64 ||
         program == BP_GPU_PROGRAM_ew_i64;
}

static bp_status_t generated_fn(bpp_device_t d, uint32_t program, const void* args, CUfunction* out,
                                char* why, size_t cap) {
  bp_status_t st = BP_UNIMPLEMENTED;
  if (!is_ew_interpreter(program)) {
    snprintf(why, cap, "program %u is not an elementwise interpreter", program);
  } else if (!cuda_ewgen_enabled()) {
    snprintf(why, cap, "BP_CUDA_EW_GENERATE=0");
  } else {
    bp_gpu_ew_args_t a; /* aligned copy: a record's block is bytes */
    memcpy(&a, args, sizeof a);
    st = cuda_ewgen_function(d, &a, out);
    if (st != BP_OK) snprintf(why, cap, "%s", bp_plugin_last_error());
  }
  return st;
}

bp_status_t cuda_kernels_load(bpp_device_t d, cuda_plan_t* plan, char* why, size_t cap) {
  why[0] = 0;
  free(plan->fns);
  plan->fns = calloc(plan->n + 1u, sizeof *plan->fns);
  if (!plan->fns) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
  for (uint32_t i = 0; i < plan->n; ++i) {
    const cuda_launch_rec_t* rec = &plan->recs[i];
    if (rec->generated && generated_fn(d, rec->program, rec->args, &plan->fns[i], why, cap) == BP_OK)
      continue;
    bp_status_t st = function_of(d, rec->program, &plan->fns[i]);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

bp_status_t cuda_kernels_enqueue(bpp_stream_t s, const cuda_plan_t* plan, uint32_t i, CUdeviceptr args) {
  if (!plan->fns || i >= plan->n || !plan->fns[i])
    return bp_kit_error(BP_INTERNAL, "cuda: launch %u of a plan that was not loaded", i);
  return enqueue_fn(s, plan->fns[i], &plan->recs[i], args);
}

/* The block into the stream's slot, then `fn` (NULL: the program's
 * kernel) (context pushed). */
static bp_status_t launch_with(bpp_stream_t s, const bp_gpu_launch_t* l, CUfunction fn) {
  bpp_device_t d = s->dev;
  cuda_launch_rec_t rec;
  bp_status_t st = record_of(l, &rec);
  if (st != BP_OK) return st;
  if (!fn && (st = function_of(d, l->program, &fn)) != BP_OK) return st;
  if (!s->args_dev) {
    CUresult r = d->cu->cuMemAlloc_v2(&s->args_dev, sizeof rec.args);
    if (r != CUDA_SUCCESS) {
      s->args_dev = 0;
      return cuda_fail(d, r, "kernel argument slot");
    }
  }
  CUresult r = d->cu->cuMemcpyHtoDAsync_v2(s->args_dev, rec.args, rec.args_size, s->s);
  if (r != CUDA_SUCCESS) return cuda_fail(d, r, "kernel arguments");
  return enqueue_fn(s, fn, &rec, s->args_dev);
}

/* bp_gpu_launch_fn, eager. */
static bp_status_t launch_one(void* ctx, const bp_gpu_launch_t* l) { return launch_with(ctx, l, NULL); }

/* bp_gpu_launch_fn, eager fused programs: the program's generated kernel
 * where NVRTC builds it, else the interpreter. */
static bp_status_t launch_fused(void* ctx, const bp_gpu_launch_t* l) {
  bpp_stream_t s = ctx;
  CUfunction fn = NULL;
  char why[256];
  if (generated_fn(s->dev, l->program, &l->args, &fn, why, sizeof why) == BP_OK) return launch_with(s, l, fn);
  return launch_with(s, l, NULL);
}

/* bp_gpu_launch_fn, planning: appends the record, launches nothing. */
static bp_status_t record_one(void* ctx, const bp_gpu_launch_t* l) {
  cuda_plan_t* p = ctx;
  if (p->n == p->cap) {
    uint32_t cap = p->cap ? 2 * p->cap : 8;
    cuda_launch_rec_t* r = realloc(p->recs, sizeof *r * cap);
    if (!r) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "cuda: out of host memory");
    p->recs = r;
    p->cap = cap;
  }
  bp_status_t st = record_of(l, &p->recs[p->n]);
  if (st == BP_OK) p->n++;
  return st;
}

/* bp_gpu_launch_fn, planning a fused program: its interpreter launches
 * are marked generated. */
static bp_status_t record_fused(void* ctx, const bp_gpu_launch_t* l) {
  cuda_plan_t* p = ctx;
  bp_status_t st = record_one(p, l);
  if (st == BP_OK)
    p->recs[p->n - 1].generated = (uint32_t)(is_ew_interpreter(l->program) && cuda_ewgen_enabled());
  return st;
}

bp_status_t cuda_kernels_plan_op(const bp_op_call_t* call, cuda_plan_t* plan) {
  return bp_gpu_op_run(&k_caps, call, record_one, plan);
}

bp_status_t cuda_kernels_plan_ew(const bp_ew_program_t* prog, uint32_t nin,
                                 const bp_tensor_desc_t* const* in, uint32_t nout,
                                 const bp_tensor_desc_t* const* out, cuda_plan_t* plan) {
  return bp_gpu_ew_program_run(&k_caps, prog, nin, in, nout, out, record_fused, plan);
}

bp_status_t cuda_kernels_launch_ew(bpp_stream_t s, const bp_ew_program_t* prog, uint32_t nin,
                                   const bp_tensor_desc_t* const* in, uint32_t nout,
                                   const bp_tensor_desc_t* const* out) {
  bpp_device_t d = s->dev;
  if (!d->kernels)
    return bp_kit_error(BP_UNIMPLEMENTED, "cuda: launch_ew_program: no kernels (the driver lacks "
                                          "cuModuleLoadDataEx / cuLaunchKernel, or BP_CUDA_NO_KERNELS=1)");
  bp_status_t st = cuda_device_check_alive(d);
  if (st != BP_OK || (st = cuda_ctx_push(d)) != BP_OK) return st;
  st = bp_gpu_ew_program_run(&k_caps, prog, nin, in, nout, out, launch_fused, s);
  cuda_ctx_pop(d);
  return st;
}

bp_status_t cuda_kernels_fusion(bpp_device_t d, bp_fusion_caps_t* out) {
  if (!d->kernels) {
    bp_fusion_caps_t none = {.struct_size = sizeof none};
    bp_kit_copy_out(out, &none, sizeof none);
    return BP_OK;
  }
  return bp_gpu_fusion_caps(&k_caps, out);
}

uint32_t cuda_kernels_ew_fits(bpp_device_t d, const bp_ew_program_t* prog, char* why, size_t cap) {
  bp_fusion_caps_t caps = {.struct_size = sizeof caps};
  if (cuda_kernels_fusion(d, &caps) != BP_OK || !caps.ew_max_instrs) {
    snprintf(why, cap, "no elementwise kernel (built without the GPU kernels, or the driver "
                       "lacks the module entry points)");
    return BP_SUPPORT_DEVICE;
  }
  return (uint32_t)bp_gpu_ew_program_fits(&caps, prog, why, cap);
}

uint32_t cuda_kernels_ew_aliases(const bp_region_desc_t* region, bp_region_alias_t* out) {
  return bp_gpu_ew_region_aliases(region, out);
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
static bp_status_t no_kernels(void) {
  return bp_kit_error(BP_UNIMPLEMENTED, "cuda: the plugin was built without its GPU kernels "
                                        "(needs clang-15 and libclc at build time)");
}
bp_status_t cuda_kernels_load(bpp_device_t d, cuda_plan_t* plan, char* why, size_t cap) {
  (void)d, (void)plan, (void)cap;
  why[0] = 0;
  return no_kernels();
}
bp_status_t cuda_kernels_enqueue(bpp_stream_t s, const cuda_plan_t* plan, uint32_t i, CUdeviceptr args) {
  (void)s, (void)plan, (void)i, (void)args;
  return no_kernels();
}
bp_status_t cuda_kernels_plan_op(const bp_op_call_t* call, cuda_plan_t* plan) {
  (void)call, (void)plan;
  return no_kernels();
}
bp_status_t cuda_kernels_plan_ew(const bp_ew_program_t* prog, uint32_t nin,
                                 const bp_tensor_desc_t* const* in, uint32_t nout,
                                 const bp_tensor_desc_t* const* out, cuda_plan_t* plan) {
  (void)prog, (void)nin, (void)in, (void)nout, (void)out, (void)plan;
  return no_kernels();
}
bp_status_t cuda_kernels_launch_ew(bpp_stream_t s, const bp_ew_program_t* prog, uint32_t nin,
                                   const bp_tensor_desc_t* const* in, uint32_t nout,
                                   const bp_tensor_desc_t* const* out) {
  (void)s, (void)prog, (void)nin, (void)in, (void)nout, (void)out;
  return no_kernels();
}
bp_status_t cuda_kernels_fusion(bpp_device_t d, bp_fusion_caps_t* out) {
  (void)d;
  bp_fusion_caps_t none = {.struct_size = sizeof none};
  bp_kit_copy_out(out, &none, sizeof none);
  return BP_OK;
}
uint32_t cuda_kernels_ew_fits(bpp_device_t d, const bp_ew_program_t* prog, char* why, size_t cap) {
  (void)d, (void)prog;
  snprintf(why, cap, "no elementwise kernel (built without the GPU kernels)");
  return BP_SUPPORT_DEVICE;
}
uint32_t cuda_kernels_ew_aliases(const bp_region_desc_t* region, bp_region_alias_t* out) {
  (void)region, (void)out;
  return 0;
}

#endif

void cuda_plan_clear(cuda_plan_t* plan) {
  free(plan->recs);
  free(plan->fns);
  memset(plan, 0, sizeof *plan);
}
