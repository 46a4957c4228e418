/* backplane OpenCL plugin: op launches and capabilities.
 *
 * Ops are lowered by plugins/gpu_common (bp_gpu_op_run) to launches of the
 * one kernel source; this file only binds the buffers, uploads the
 * argument block into a small read-only buffer (freed by the driver once
 * the kernel finishes) and enqueues the NDRange on the stream's queue.
 * Support answers come from the same lowering (bp_gpu_op_supported).
 * Fused elementwise programs run as generated kernels (ocl_ewgen.c).
 */
#include <string.h>

#include "ocl_internal.h"

/* Enqueues launch `l` with kernel `k` (its program's or a generated one
 * with the same signature). */
static bp_status_t launch_kernel(struct bpp_stream_s* s, ocl_kernel_t* k, const bp_gpu_launch_t* l) {
  struct bpp_device_s* d = s->dev;
  const ocl_symbols_t* cl = d->cl;
  cl_int err = CL_SUCCESS;
  cl_mem args = cl->clCreateBuffer(d->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, l->args_size,
                                   (void*)&l->args, &err);
  if (!args) return ocl_fail("clCreateBuffer (kernel arguments)", err);
  const bp_tensor_desc_t* first = NULL;
  for (uint32_t i = 0; i < l->num_operands && !first; i++)
    if (l->operands[i] && l->operands[i]->buffer) first = l->operands[i];
  cl_mem fallback = first ? ((struct bpp_buffer_s*)first->buffer)->mem : args;
  pthread_mutex_lock(&k->mu);
  for (uint32_t i = 0; i < l->num_operands && err == CL_SUCCESS; i++) {
    const bp_tensor_desc_t* t = l->operands[i];
    cl_mem m = t && t->buffer ? ((struct bpp_buffer_s*)t->buffer)->mem : fallback;
    err = cl->clSetKernelArg(k->kernel, i, sizeof m, &m);
  }
  if (err == CL_SUCCESS) err = cl->clSetKernelArg(k->kernel, l->num_operands, sizeof args, &args);
  if (err == CL_SUCCESS) {
    size_t global[3] = {(size_t)l->global[0], (size_t)l->global[1], (size_t)l->global[2]};
    size_t local[3] = {l->local[0], l->local[1], l->local[2]};
    cl_event ev = NULL;
    err = cl->clEnqueueNDRangeKernel(s->q, k->kernel, 3, NULL, global, local, 0, NULL, &ev);
    ocl_stream_track(s, ev);
  }
  pthread_mutex_unlock(&k->mu);
  cl->clReleaseMemObject(args);
  return err == CL_SUCCESS ? BP_OK : ocl_fail("clEnqueueNDRangeKernel", err);
}

static bp_status_t launch_one(void* ctx, const bp_gpu_launch_t* l) {
  struct bpp_stream_s* s = ctx;
  ocl_kernel_t* k;
  bp_status_t st = ocl_kernel_get(s->dev, l->program, &k);
  return st ? st : launch_kernel(s, k, l);
}

static int is_ew_program(uint32_t program) {
  return program == BP_GPU_PROGRAM_ew_f32 || program == BP_GPU_PROGRAM_ew_f64 || program == BP_GPU_PROGRAM_ew_i64;
}

/* Fused programs: the generated kernel of the program where it builds,
 * else the interpreter (ocl_ewgen.c logs why once). */
static bp_status_t launch_fused(void* ctx, const bp_gpu_launch_t* l) {
  struct bpp_stream_s* s = ctx;
  ocl_kernel_t* k;
  if (is_ew_program(l->program) && ocl_ewgen_enabled() && ocl_ewgen_kernel(s->dev, &l->args.ew, &k) == BP_OK)
    return launch_kernel(s, k, l);
  return launch_one(ctx, l);
}

/* Operands must live on the stream's device, at offsets aligned to their
 * element size (the kernels index typed pointers). */
static bp_status_t check_operands(bpp_stream_t s, uint32_t n, const bp_tensor_desc_t* const* ts, const char* what) {
  for (uint32_t k = 0; k < n; k++) {
    const bp_tensor_desc_t* t = ts[k];
    if (!t || t->dtype == BP_DTYPE_INVALID) continue;
    if (!t->buffer) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s %u has no buffer", what, k);
    if (((struct bpp_buffer_s*)t->buffer)->dev->ctx != s->dev->ctx)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s %u lives on another OpenCL platform", what, k);
    uint32_t es = bp_dtype_size(t->dtype);
    if (es && t->byte_offset % es)
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "%s %u: byte offset %llu is not a multiple of the %s size", what, k,
                          (unsigned long long)t->byte_offset, bp_dtype_name(t->dtype));
  }
  return BP_OK;
}

bp_status_t ocl_launch_op(bpp_stream_t s, const bp_op_call_t* call) {
  if (!s || !call) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch: NULL argument");
  if (call->struct_size < BP_OP_CALL_V1_SIZE || !call->outputs || call->num_outputs < 1 ||
      (call->num_inputs && !call->inputs) || call->list_begin > call->num_inputs ||
      call->list_count > call->num_inputs - call->list_begin)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch: malformed op call");
  bp_status_t st = check_operands(s, call->num_inputs, call->inputs, "input");
  if (!st) st = check_operands(s, call->num_outputs, call->outputs, "output");
  if (st) return st;
  return bp_gpu_op_run(&s->dev->caps, call, launch_one, s);
}

bp_status_t ocl_query_support(bpp_device_t d, const bp_op_call_t* call, bp_support_t* out) {
  if (!d || !call || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "query_support: NULL argument");
  if (call->struct_size < BP_OP_CALL_V1_SIZE)
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "query_support: op call struct_size %u < %u", call->struct_size,
                        BP_OP_CALL_V1_SIZE);
  uint32_t op = call->op_id;
  if (bp_op_family(op) == BP_OP_FAMILY_INVALID) return bp_kit_support_answer(out, BP_SUPPORT_OP, "op id %u is unknown", op);
  if (!bp_gpu_op_implemented(op))
    return bp_kit_support_answer(out, BP_SUPPORT_OP, "%s has no OpenCL kernel", bp_kit_op_name(op));
  if (call->num_outputs < 1 || !call->outputs || (call->num_inputs && !call->inputs))
    return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "query_support: %s: missing operands", bp_kit_op_name(op));
  for (uint32_t k = 0; k < call->num_inputs + call->num_outputs; k++) {
    const bp_tensor_desc_t* t = k < call->num_inputs ? call->inputs[k] : call->outputs[k - call->num_inputs];
    if (!t) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "query_support: %s: operand %u is NULL", bp_kit_op_name(op), k);
    if (t->dtype != BP_DTYPE_INVALID && !bp_dtype_is_valid(t->dtype))
      return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "query_support: %s: unknown dtype %u", bp_kit_op_name(op), t->dtype);
  }
  char msg[200];
  msg[0] = 0;
  int reason = bp_gpu_op_supported(&d->caps, call, msg, sizeof msg);
  if (reason) return bp_kit_support_answer(out, (uint32_t)reason, "%s", msg);
  return bp_kit_support_answer(out, BP_SUPPORT_OK, "%s", "");
}

bp_status_t ocl_query_fusion(bpp_device_t d, bp_fusion_caps_t* out) {
  if (!d || !out) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "query_fusion: NULL argument");
  return bp_gpu_fusion_caps(&d->caps, out);
}

bp_status_t ocl_launch_ew_program(bpp_stream_t s, const bp_ew_program_t* prog, uint32_t num_inputs,
                                  const bp_tensor_desc_t* const* inputs, uint32_t num_outputs,
                                  const bp_tensor_desc_t* const* outputs) {
  if (!s) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch_ew_program: NULL stream");
  if ((num_inputs && !inputs) || !outputs) return BP_KIT_ERROR(BP_INVALID_ARGUMENT, "launch_ew_program: NULL operands");
  bp_status_t st = check_operands(s, num_inputs, inputs, "input");
  if (!st) st = check_operands(s, num_outputs, outputs, "output");
  if (st) return st;
  return bp_gpu_ew_program_run(&s->dev->caps, prog, num_inputs, inputs, num_outputs, outputs, launch_fused, s);
}
