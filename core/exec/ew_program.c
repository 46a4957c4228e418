/* backplane core: elementwise programs (bp_ew_program_run) and the operand
 * checks every compiled launch shares.
 *
 * Thread-safe; stream-ordered like bp_op_run.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "ops/op_run_internal.h"

#define BP__EW_MAX_INSTRS 4096u

/* Tensor operands an op takes in a program (its fixed inputs, in order). */
static uint32_t ew_arity(const bp__op_meta_t* op) { return op->has_list ? 0 : op->num_before; }

bp_status_t bp__ew_program_check(const char* api, const bp_ew_program_t* p, uint32_t num_inputs,
                                 uint32_t num_outputs) {
  if (p == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: program is NULL", api);
  if (p->struct_size < BP_EW_PROGRAM_V1_SIZE || p->struct_size > 4096)
    return bp__error(BP_INVALID_ARGUMENT, "%s: program struct_size %u (expected >= %u)", api,
                     p->struct_size, BP_EW_PROGRAM_V1_SIZE);
  if (p->num_inputs != num_inputs || p->num_outputs != num_outputs)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: the program takes %u inputs and %u outputs; %u and %u were given", api,
                     p->num_inputs, p->num_outputs, num_inputs, num_outputs);
  if (num_outputs == 0) return bp__error(BP_INVALID_ARGUMENT, "%s: the program has no output", api);
  if (p->num_instrs == 0 || p->num_instrs > BP__EW_MAX_INSTRS || p->num_registers == 0 ||
      p->num_registers > 256 || num_inputs > 256 || num_outputs > 256 || p->num_constants > 256)
    return bp__error(BP_INVALID_ARGUMENT,
                     "%s: program has %u instructions, %u registers, %u inputs, %u outputs, %u "
                     "constants (1..%u instructions, 1..256 registers, at most 256 of the others)",
                     api, p->num_instrs, p->num_registers, num_inputs, num_outputs,
                     p->num_constants, BP__EW_MAX_INSTRS);
  if (p->instr_stride < BP_EW_INSTR_V1_SIZE || p->instr_stride > 4096 || p->instrs == NULL)
    return bp__error(BP_INVALID_ARGUMENT, "%s: program instr_stride %u (>= %u) or instrs NULL",
                     api, p->instr_stride, BP_EW_INSTR_V1_SIZE);
  if (p->num_constants > 0 && p->constants == NULL)
    return bp__error(BP_INVALID_ARGUMENT, "%s: program has %u constants but constants is NULL",
                     api, p->num_constants);
  char dbuf[32];
  if (!bp__dtype_valid(p->compute_dtype) || bp__dtype_is_storage_only(p->compute_dtype) ||
      bp__dtype_is_complex(p->compute_dtype))
    return bp__error(BP_INVALID_ARGUMENT, "%s: program compute dtype %s is not an arithmetic dtype",
                     api, bp__dtype_str(p->compute_dtype, dbuf));
  for (uint32_t k = 0; k < p->num_constants; ++k)
    if (p->constants[k].kind != BP_SCALAR_FLOAT && p->constants[k].kind != BP_SCALAR_INT &&
        p->constants[k].kind != BP_SCALAR_BOOL)
      return bp__error(BP_INVALID_ARGUMENT, "%s: program constant %u has kind %u", api, k,
                       p->constants[k].kind);
  uint8_t written[256] = {0}, stored[256] = {0};
  for (uint32_t i = 0; i < p->num_instrs; ++i) {
    const bp_ew_instr_t* in = BP_EW_INSTR_AT(p, i);
    const char* bad = NULL;
    uint32_t reads[3] = {0}, nreads = 0;
    switch (in->opcode) {
      case BP_EW_LOAD_INPUT:
        if (in->a >= num_inputs) bad = "input index";
        break;
      case BP_EW_LOAD_CONST:
        if (in->a >= p->num_constants) bad = "constant index";
        break;
      case BP_EW_STORE:
        if (in->a >= num_outputs) bad = "output index";
        reads[nreads++] = in->b;
        break;
      case BP_EW_CAST:
        if (!bp__dtype_valid(in->aux) || bp__dtype_is_complex(in->aux)) bad = "cast dtype";
        reads[nreads++] = in->a;
        break;
      default: {
        const bp__op_meta_t* op = bp__op_meta(in->opcode);
        if (op == NULL || !bp_op_is_elementwise(in->opcode) || ew_arity(op) == 0) {
          return bp__error(BP_INVALID_ARGUMENT,
                           "%s: program instruction %u has opcode 0x%x, not LOAD_INPUT, "
                           "LOAD_CONST, STORE, CAST or an elementwise op id",
                           api, i, in->opcode);
        }
        uint32_t arity = ew_arity(op);
        const uint8_t ops[3] = {in->a, in->b, in->c};
        for (uint32_t j = 0; j < arity && j < 3; ++j) reads[nreads++] = ops[j];
        break;
      }
    }
    for (uint32_t j = 0; !bad && j < nreads; ++j) {
      if (reads[j] >= p->num_registers) bad = "register index";
      else if (!written[reads[j]]) bad = "read of a register no earlier instruction wrote";
    }
    if (!bad && in->opcode != BP_EW_STORE && in->dst >= p->num_registers) bad = "destination register";
    if (bad)
      return bp__error(BP_INVALID_ARGUMENT, "%s: program instruction %u (opcode 0x%x): bad %s",
                       api, i, in->opcode, bad);
    if (in->opcode == BP_EW_STORE) stored[in->a] = 1;
    else written[in->dst] = 1;
  }
  for (uint32_t k = 0; k < num_outputs; ++k)
    if (!stored[k])
      return bp__error(BP_INVALID_ARGUMENT, "%s: program never stores output %u", api, k);
  return BP_OK;
}

void bp__ew_program_copy(const bp_ew_program_t* p, bp_ew_instr_t* instrs, bp_ew_program_t* out) {
  memcpy(out, p, BP_EW_PROGRAM_V1_SIZE);
  out->struct_size = sizeof(*out);
  for (uint32_t i = 0; i < p->num_instrs; ++i) memcpy(&instrs[i], BP_EW_INSTR_AT(p, i), sizeof(*instrs));
  out->instrs = instrs;
  out->instr_stride = sizeof(*instrs);
  out->next = NULL;
}

bp_status_t bp__exec_check_operands(const char* api, const bp_stream_t* stream,
                                    const bp_tensor_t* const* args, uint32_t num_inputs,
                                    uint32_t num_args, bp__may_alias_fn may_alias,
                                    const void* ctx) {
  for (uint32_t i = 0; i < num_args; ++i) {
    const bp_tensor_t* t = args[i];
    const char* kind = i < num_inputs ? "input" : "output";
    uint32_t idx = i < num_inputs ? i : i - num_inputs;
    if (t == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: %s %u is NULL", api, kind, idx);
    if (t->buffer == NULL)
      return bp__error(BP_INVALID_ARGUMENT, "%s: %s %u has no buffer", api, kind, idx);
    if (t->buffer->device != stream->device)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: %s %u is on device '%s' but the stream is on device '%s'", api, kind,
                       idx, t->buffer->device->name, stream->device->name);
    uint64_t lo, hi;
    if (bp__tensor_span(t->dtype, t->rank, t->sizes, t->strides, t->byte_offset, &lo, &hi) ||
        hi > t->buffer->size)
      return bp__error(BP_OUT_OF_RANGE, "%s: %s %u reaches outside its buffer of %llu bytes", api,
                       kind, idx, (unsigned long long)t->buffer->size);
  }
  for (uint32_t o = num_inputs; o < num_args; ++o) {
    bp_tensor_desc_t od;
    bp__desc_from_tensor(args[o], &od);
    if (bp__self_overlapping(&od))
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: output %u has internally overlapping elements (an expanded view)", api,
                       o - num_inputs);
    for (uint32_t j = num_inputs; j < o; ++j)
      if (bp__spans_intersect(args[j], args[o]))
        return bp__error(BP_INVALID_ARGUMENT, "%s: outputs %u and %u overlap", api,
                         j - num_inputs, o - num_inputs);
    for (uint32_t i = 0; i < num_inputs; ++i) {
      if (!bp__spans_intersect(args[i], args[o])) continue;
      bp_tensor_desc_t id;
      bp__desc_from_tensor(args[i], &id);
      int same = bp__same_layout(&id, &od);
      if (same && may_alias != NULL && may_alias(ctx, o, i)) continue;
      return bp__error(BP_INVALID_ARGUMENT, "%s: output %u %s input %u", api, o - num_inputs,
                       same ? "aliases (not a declared donation)" : "partially overlaps", i);
    }
  }
  return BP_OK;
}

void bp__exec_note_use(bp_stream_t* stream, const bp_tensor_t* const* args, uint32_t num_args) {
  for (uint32_t i = 0; i < num_args; ++i) bp__buffer_note_use(args[i]->buffer, stream);
}

/* ---- bp_ew_program_run ---------------------------------------------------- */

/* An output may be written over an input of its own shape, element by
 * element (elementwise kernels read element i before writing element i). */
typedef struct {
  const bp_tensor_t* const* args;
} ew_alias_ctx_t;
static int ew_may_alias(const void* ctx, uint32_t output, uint32_t input) {
  const bp_tensor_t* const* a = ((const ew_alias_ctx_t*)ctx)->args;
  return bp__shape_equal(a[output]->rank, a[output]->sizes, a[input]->rank, a[input]->sizes);
}

/* UNIMPLEMENTED with the reason when the device's declared fusion does not
 * cover the program. */
static bp_status_t ew_declared(const char* api, const bp_device_t* device,
                               const bp_ew_program_t* p) {
  bp_fusion_caps_t caps;
  memset(&caps, 0, sizeof(caps));
  caps.struct_size = sizeof(caps);
  bp_status_t st = bp_device_query_fusion(device, &caps);
  if (st != BP_OK) return st;
  const char* why = NULL;
  char detail[96] = "";
  if (caps.ew_max_instrs == 0) why = "runs no elementwise programs";
  else if (p->num_instrs > caps.ew_max_instrs || p->num_registers > caps.ew_max_registers ||
           p->num_inputs > caps.ew_max_inputs || p->num_outputs > caps.ew_max_outputs)
    why = "declares smaller program limits";
  else if (!(caps.ew_dtype_mask & BP_DTYPE_BIT(p->compute_dtype))) {
    why = "does not compute programs in";
    snprintf(detail, sizeof(detail), " %s", bp_dtype_name(p->compute_dtype));
  }
  for (uint32_t i = 0; why == NULL && i < p->num_instrs; ++i) {
    uint32_t opc = BP_EW_INSTR_AT(p, i)->opcode;
    if (opc >= BP_EW_LOAD_INPUT && opc <= BP_EW_CAST) continue;
    uint32_t w = opc / 64;
    if (w >= caps.ew_opcode_words || caps.ew_opcode_mask == NULL ||
        !(caps.ew_opcode_mask[w] & (UINT64_C(1) << (opc % 64)))) {
      why = "does not declare the op";
      snprintf(detail, sizeof(detail), " '%s' (instruction %u)", bp__op_meta(opc)->name, i);
    }
  }
  if (why == NULL && device->plugin->caps.launch_ew_program == NULL)
    why = "has no launch_ew_program";
  if (why == NULL) return BP_OK;
  st = bp__error(BP_UNIMPLEMENTED, "%s: device '%s' %s%s", api, device->name, why, detail);
  bp__set_support_reason(BP_SUPPORT_DEVICE);
  return st;
}

bp_status_t bp_ew_program_run(bp_stream_t* stream, const bp_ew_program_t* program,
                              const bp_tensor_t* const* inputs, uint32_t num_inputs,
                              bp_tensor_t* const* outputs, uint32_t num_outputs) {
  const char* api = "bp_ew_program_run";
  BP__REQUIRE_ARG(api, stream);
  BP__REQUIRE_ARG(api, program);
  if ((num_inputs > 0 && inputs == NULL) || outputs == NULL)
    return bp__error(BP_INVALID_ARGUMENT, "%s: inputs or outputs is NULL", api);
  bp_status_t st = bp__ew_program_check(api, program, num_inputs, num_outputs);
  if (st != BP_OK) return st;
  uint32_t n = num_inputs + num_outputs;
  const bp_tensor_t* small[16];
  const bp_tensor_t** args = n <= 16 ? small : malloc(sizeof(*args) * n);
  bp_tensor_desc_t* descs = calloc(n, sizeof(*descs));
  const bp_tensor_desc_t** ptrs = calloc(n, sizeof(*ptrs));
  if (args == NULL || descs == NULL || ptrs == NULL) {
    st = bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
    goto done;
  }
  for (uint32_t i = 0; i < num_inputs; ++i) args[i] = inputs[i];
  for (uint32_t k = 0; k < num_outputs; ++k) args[num_inputs + k] = outputs[k];
  ew_alias_ctx_t actx = {args};
  st = bp__exec_check_operands(api, stream, args, num_inputs, n, ew_may_alias, &actx);
  if (st != BP_OK) goto done;
  const bp_tensor_t* o0 = args[num_inputs];
  for (uint32_t i = 0; i < n && st == BP_OK; ++i) {
    const bp_tensor_t* t = args[i];
    int ok;
    if (i >= num_inputs) {
      ok = bp__shape_equal(t->rank, t->sizes, o0->rank, o0->sizes);
    } else {
      ok = t->rank <= o0->rank;
      for (uint32_t d = 0; ok && d < t->rank; ++d) {
        int64_t s = t->sizes[t->rank - 1 - d];
        ok = s == 1 || s == o0->sizes[o0->rank - 1 - d];
      }
    }
    if (!ok) {
      char s0[192], s1[192];
      st = bp__error(BP_INVALID_ARGUMENT, "%s: %s %u has shape %s; the outputs have %s", api,
                     i < num_inputs ? "input" : "output", i < num_inputs ? i : i - num_inputs,
                     bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)),
                     bp__shape_str(o0->rank, o0->sizes, s1, sizeof(s1)));
    } else if (bp__dtype_is_storage_only(t->dtype) || bp__dtype_is_complex(t->dtype)) {
      st = bp__error(BP_INVALID_ARGUMENT, "%s: operand %u has dtype %s (no arithmetic)", api, i,
                     bp_dtype_name(t->dtype));
    }
    bp__desc_from_tensor(t, &descs[i]);
    bp__set_buffer(&descs[i], t);
    ptrs[i] = &descs[i];
  }
  if (st != BP_OK) goto done;
  bp_device_t* device = stream->device;
  st = ew_declared(api, device, program);
  if (st != BP_OK) goto done;
  bp_ew_instr_t* instrs = calloc(program->num_instrs, sizeof(*instrs));
  if (instrs == NULL) {
    st = bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
    goto done;
  }
  bp_ew_program_t copy;
  bp__ew_program_copy(program, instrs, &copy);
  const bp_plugin_t* plugin = device->plugin;
  bp__clear_error();
  st = BP__NOTE_CALL(plugin, "launch_ew_program", NULL,
                     plugin->caps.launch_ew_program(stream->handle, &copy, num_inputs, ptrs,
                                                    num_outputs, ptrs + num_inputs));
  free(instrs);
  if (st != BP_OK) {
    st = bp__plugin_error(plugin, st, "elementwise program");
    goto done;
  }
  bp__exec_note_use(stream, args, n);
done:
  if (args != small) free(args);
  free(descs);
  free(ptrs);
  return st;
}
