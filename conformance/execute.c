/* Runs one case on one device through the public API and scores it.
 *
 * Every operand gets its own buffer with guard bands (guard.c). Inputs are
 * uploaded as whole buffer images, outputs are pre-created (out= form) and
 * pre-filled with the guard pattern, so an element the op forgot to write
 * also shows. After the op every buffer is read back whole: a changed input
 * byte or guard byte is a FAIL naming the byte offset.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"

typedef struct operand_state {
  bpc_layout_t layout;
  uint8_t* image;    /* what was uploaded */
  uint8_t* readback; /* what came back */
  bp_buffer_t* buffer;
  bp_tensor_t* tensor;
} operand_state_t;

typedef struct exec_state {
  bpc_host_tensor_t host[BPC_MAX_INPUTS];
  void* data[BPC_MAX_INPUTS];
  operand_state_t in[BPC_MAX_INPUTS];
  operand_state_t out[BPC_MAX_OUTPUTS];
  bpc_ref_result_t ref;
  int have_ref;
  void* got;
} exec_state_t;

void bpc_result_set(bpc_result_t* r, uint32_t status, const char* fmt, ...) {
  r->status = status;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}

static void operand_free(operand_state_t* o) {
  if (o->tensor) bp_tensor_release(o->tensor);
  if (o->buffer) bp_buffer_release(o->buffer);
  free(o->image);
  free(o->readback);
  memset(o, 0, sizeof *o);
}

/* Allocates the buffer, uploads the image, creates the tensor. Returns a
 * bpc status (PASS = ok). */
static uint32_t operand_create(bp_device_t* dev, bp_stream_t* stream, operand_state_t* o,
                               uint32_t dtype, uint32_t rank, const int64_t* sizes, uint32_t layout,
                               const void* dense, const char* what, bpc_result_t* r) {
  if (bpc_layout_make(dtype, rank, sizes, layout, &o->layout) != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "suite: bad layout for %s", what);
    return BPC_FAIL;
  }
  o->image = malloc(o->layout.buffer_size);
  o->readback = malloc(o->layout.buffer_size);
  if (!o->image || !o->readback) {
    bpc_result_set(r, BPC_RESOURCE_ERROR, "host memory for %s", what);
    return BPC_RESOURCE_ERROR;
  }
  bpc_image_fill_guard(o->image, o->layout.buffer_size);
  if (dense) bpc_image_scatter(&o->layout, o->image, dense);
  bp_status_t st = bp_buffer_allocate(dev, BP_MEMORY_DEVICE, o->layout.buffer_size, &o->buffer);
  if (st != BP_OK) {
    bpc_result_set(r, st == BP_RESOURCE_EXHAUSTED ? BPC_RESOURCE_ERROR : BPC_FAIL,
               "bp_buffer_allocate(%llu) for %s: %s: %s", (unsigned long long)o->layout.buffer_size,
               what, bp_status_name(st), bp_status_message());
    return r->status;
  }
  st = bp_copy_host_to_buffer(stream, o->image, o->buffer, 0, o->layout.buffer_size);
  if (st == BP_OK) st = bp_stream_synchronize(stream);
  if (st != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "upload of %s: %s: %s", what, bp_status_name(st), bp_status_message());
    return BPC_FAIL;
  }
  st = bp_tensor_from_buffer(o->buffer, dtype, rank, sizes, o->layout.strides, o->layout.byte_offset,
                             &o->tensor);
  if (st != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "bp_tensor_from_buffer for %s (%s): %s: %s", what,
               bpc_layout_name(layout), bp_status_name(st), bp_status_message());
    return BPC_FAIL;
  }
  return BPC_PASS;
}

static bp_status_t operand_readback(bp_stream_t* stream, operand_state_t* o) {
  bp_status_t st = bp_copy_buffer_to_host(stream, o->buffer, 0, o->readback, o->layout.buffer_size);
  if (st == BP_OK) st = bp_stream_synchronize(stream);
  return st;
}

/* Describes where a guard byte sits relative to the elements. */
static const char* guard_place(const bpc_layout_t* l, uint64_t off) {
  if (off < l->byte_offset) return "before the tensor";
  if (off >= l->buffer_size - BPC_GUARD_BYTES) return "after the tensor";
  return "in a gap between strided elements";
}

static int dtype_available(const bp_device_properties_t* p, uint32_t dtype) {
  if (!p || p->dtype_mask == 0) return 1; /* not reported: assume storage */
  return (p->dtype_mask & BP_DTYPE_BIT(dtype)) != 0;
}

static void fill_descs(const bpc_case_t* c, exec_state_t* s, bp_tensor_desc_t* ins,
                       bp_tensor_desc_t* outs) {
  for (uint32_t k = 0; k < c->num_inputs; k++) {
    memset(&ins[k], 0, sizeof ins[k]);
    ins[k].struct_size = sizeof ins[k];
    if (s->in[k].tensor) bp_tensor_get_desc(s->in[k].tensor, &ins[k]);
  }
  for (uint32_t k = 0; k < s->ref.num_outputs; k++) {
    memset(&outs[k], 0, sizeof outs[k]);
    outs[k].struct_size = sizeof outs[k];
    bp_tensor_get_desc(s->out[k].tensor, &outs[k]);
  }
}

/* Scores all outputs at once with the op's own checker (see bpc_check_fn). */
static void check_with_op_checker(const bpc_case_t* c, const bpc_op_entry_t* op, exec_state_t* s,
                                  int ftz, bpc_result_t* r) {
  void* dense[BPC_MAX_OUTPUTS] = {0};
  const void* got[BPC_MAX_OUTPUTS] = {0};
  for (uint32_t k = 0; k < s->ref.num_outputs; k++) {
    const bpc_expected_t* e = &s->ref.out[k];
    dense[k] = malloc((size_t)(e->numel > 0 ? e->numel : 1) * bpc_dtype_size(e->dtype));
    if (!dense[k]) {
      bpc_result_set(r, BPC_RESOURCE_ERROR, "host memory for results");
      goto cleanup;
    }
    bpc_image_gather(&s->out[k].layout, s->out[k].readback, dense[k]);
    got[k] = dense[k];
  }
  bpc_tolerance_t tol = bpc_tolerance_get(op->accuracy, s->ref.out[0].dtype,
                                          (op->flags & BPC_OPF_SIGNED_ZERO) != 0);
  tol.flush_denormals_ok = ftz;
  bpc_check_t chk;
  memset(&chk, 0, sizeof chk);
  chk.status = BPC_FAIL;
  chk.max_ulps = -1.0;
  chk.max_abs = -1.0;
  chk.worst_index = -1;
  op->check(c, s->host, &s->ref, got, &tol, &chk);
  r->status = chk.status;
  r->max_ulps = chk.max_ulps;
  r->max_abs = chk.max_abs;
  snprintf(r->message, sizeof r->message, "%.250s", chk.message);
cleanup:
  for (uint32_t k = 0; k < BPC_MAX_OUTPUTS; k++) free(dense[k]);
}

static void run_case(bp_device_t* dev, bp_stream_t* stream, const bpc_case_t* c, exec_state_t* s,
                     bpc_result_t* r) {
  const bpc_op_entry_t* op = bpc_op_entry(c->op_id);
  const bp_device_properties_t* props = bp_device_properties(dev);
  /* 1. Inputs and the reference. */
  for (uint32_t k = 0; k < c->num_inputs; k++) {
    bp_status_t st = bpc_case_materialize(c, k, &s->data[k]);
    if (st != BP_OK) {
      bpc_result_set(r, BPC_RESOURCE_ERROR, "materialising input %u: %s", k, bp_status_name(st));
      return;
    }
    s->host[k].dtype = c->in[k].dtype;
    s->host[k].rank = c->in[k].rank;
    memcpy(s->host[k].sizes, c->in[k].sizes, sizeof s->host[k].sizes);
    s->host[k].numel = 1;
    for (uint32_t d = 0; d < c->in[k].rank; d++) s->host[k].numel *= c->in[k].sizes[d];
    s->host[k].data = s->data[k];
  }
  if (bpc_reference_run(c, s->host, &s->ref) != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "suite: the reference rejects this case: %s", s->ref.message);
    return;
  }
  s->have_ref = 1;
  /* 2. dtype storage. */
  for (uint32_t k = 0; k < c->num_inputs; k++) {
    if (c->in[k].dtype != BP_DTYPE_INVALID && !dtype_available(props, c->in[k].dtype)) {
      bpc_result_set(r, BPC_SKIPPED, "device has no %s storage", bpc_dtype_name(c->in[k].dtype));
      return;
    }
  }
  for (uint32_t k = 0; k < s->ref.num_outputs; k++) {
    if (!dtype_available(props, s->ref.out[k].dtype)) {
      bpc_result_set(r, BPC_SKIPPED, "device has no %s storage", bpc_dtype_name(s->ref.out[k].dtype));
      return;
    }
  }
  /* 3. Device operands with guard bands. */
  char what[32];
  for (uint32_t k = 0; k < c->num_inputs; k++) {
    if (c->in[k].dtype == BP_DTYPE_INVALID) continue;
    snprintf(what, sizeof what, "input %u", k);
    if (operand_create(dev, stream, &s->in[k], c->in[k].dtype, c->in[k].rank, c->in[k].sizes,
                       c->in[k].layout, s->data[k], what, r) != BPC_PASS) {
      return;
    }
  }
  for (uint32_t k = 0; k < s->ref.num_outputs; k++) {
    snprintf(what, sizeof what, "output %u", k);
    const bpc_expected_t* e = &s->ref.out[k];
    if (operand_create(dev, stream, &s->out[k], e->dtype, e->rank, e->sizes, c->out[k].layout, NULL,
                       what, r) != BPC_PASS) {
      return;
    }
  }
  const bp_tensor_t* ins[BPC_MAX_INPUTS] = {0};
  bp_tensor_t* outs[BPC_MAX_OUTPUTS] = {0};
  for (uint32_t k = 0; k < c->num_inputs; k++) ins[k] = s->in[k].tensor;
  for (uint32_t k = 0; k < s->ref.num_outputs; k++) outs[k] = s->out[k].tensor;
  const void* attrs = c->has_attrs ? (const void*)&c->attrs : NULL;
  /* 4. Shape/dtype inference must agree with the reference. */
  bp_tensor_desc_t inferred[BPC_MAX_OUTPUTS];
  memset(inferred, 0, sizeof inferred);
  bp_tensor_desc_t* inferred_ptrs[BPC_MAX_OUTPUTS];
  for (uint32_t k = 0; k < BPC_MAX_OUTPUTS; k++) {
    inferred[k].struct_size = sizeof inferred[k];
    inferred_ptrs[k] = &inferred[k];
  }
  int creation = c->num_inputs == 0; /* fill/arange: the caller defines the output */
  if (!creation) {
    bp_status_t st = bp_op_infer(c->op_id, ins, c->num_inputs, attrs, inferred_ptrs, s->ref.num_outputs);
    if (st != BP_OK) {
      bpc_result_set(r, BPC_FAIL, "bp_op_infer rejects a valid case: %s: %s", bp_status_name(st),
                 bp_status_message());
      return;
    }
    for (uint32_t k = 0; k < s->ref.num_outputs; k++) {
      const bpc_expected_t* e = &s->ref.out[k];
      int same = inferred[k].dtype == e->dtype && inferred[k].rank == e->rank &&
                 memcmp(inferred[k].sizes, e->sizes, e->rank * sizeof(int64_t)) == 0;
      if (!same) {
        char a[96] = "", b[96] = "";
        size_t na = 0, nb = 0;
        for (uint32_t d = 0; d < inferred[k].rank && d < BP_MAX_RANK && na < 80; d++) {
          na += (size_t)snprintf(a + na, sizeof a - na, "%s%lld", d ? "," : "", (long long)inferred[k].sizes[d]);
        }
        for (uint32_t d = 0; d < e->rank && nb < 80; d++) {
          nb += (size_t)snprintf(b + nb, sizeof b - nb, "%s%lld", d ? "," : "", (long long)e->sizes[d]);
        }
        bpc_result_set(r, BPC_FAIL, "bp_op_infer gives %s[%s] for output %u, the semantics give %s[%s]",
                   bpc_dtype_name(inferred[k].dtype), a, k, bpc_dtype_name(e->dtype), b);
        return;
      }
    }
  }
  /* 5. Support query. */
  bp_tensor_desc_t din[BPC_MAX_INPUTS], dout[BPC_MAX_OUTPUTS];
  const bp_tensor_desc_t* din_ptr[BPC_MAX_INPUTS];
  const bp_tensor_desc_t* dout_ptr[BPC_MAX_OUTPUTS];
  fill_descs(c, s, din, dout);
  for (uint32_t i = 0; i < BPC_MAX_INPUTS; i++) din_ptr[i] = &din[i];
  for (uint32_t k = 0; k < BPC_MAX_OUTPUTS; k++) dout_ptr[k] = &dout[k];
  bp_op_call_t call;
  memset(&call, 0, sizeof call);
  call.struct_size = sizeof call;
  call.op_id = c->op_id;
  call.num_inputs = c->num_inputs;
  call.num_outputs = s->ref.num_outputs;
  call.compute_dtype = s->ref.compute_dtype;
  call.inputs = din_ptr; /* list_begin/list_count: the core fills them from ops.def */
  call.outputs = dout_ptr;
  call.attrs = attrs;
  bp_support_t sup;
  memset(&sup, 0, sizeof sup);
  sup.struct_size = sizeof sup;
  bp_status_t st = bp_device_query_support(dev, &call, &sup);
  if (st != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "bp_device_query_support: %s: %s", bp_status_name(st), bp_status_message());
    return;
  }
  /* 6. Run. */
  st = bp_op_run(stream, c->op_id, ins, c->num_inputs, attrs, outs, s->ref.num_outputs);
  char run_msg[200];
  snprintf(run_msg, sizeof run_msg, "%s", st != BP_OK ? bp_status_message() : "");
  if (st == BP_OK) {
    st = bp_stream_synchronize(stream);
    if (st != BP_OK) snprintf(run_msg, sizeof run_msg, "%s", bp_status_message());
  }
  if (st == BP_UNIMPLEMENTED || st == BP_UNSUPPORTED) {
    if (sup.supported) {
      bpc_result_set(r, BPC_FAIL, "support query says supported, the call says %s: %s",
                     bp_status_name(st), run_msg);
    } else {
      bpc_result_set(r, BPC_NOT_SUPPORTED, "%s", sup.message[0] ? sup.message : run_msg);
    }
    return;
  }
  if (st == BP_RESOURCE_EXHAUSTED) {
    bpc_result_set(r, BPC_RESOURCE_ERROR, "bp_op_run: RESOURCE_EXHAUSTED: %s", run_msg);
    return;
  }
  if (st != BP_OK) {
    bpc_result_set(r, BPC_FAIL, "bp_op_run%s: %s: %s",
               sup.supported ? "" : " (not supported, but not a clean UNSUPPORTED or UNIMPLEMENTED)",
               bp_status_name(st), run_msg);
    return;
  }
  if (!sup.supported) {
    bpc_result_set(r, BPC_NOT_SUPPORTED, "note: the support query said no (%s) but the call ran",
               sup.message);
    return;
  }
  /* 7. Inputs unchanged, guards intact. */
  for (uint32_t k = 0; k < c->num_inputs; k++) {
    operand_state_t* o = &s->in[k];
    if (!o->tensor) continue;
    st = operand_readback(stream, o);
    if (st != BP_OK) {
      bpc_result_set(r, BPC_FAIL, "reading input %u back: %s: %s", k, bp_status_name(st), bp_status_message());
      return;
    }
    if (bpc_checksum(o->image, o->layout.buffer_size) != bpc_checksum(o->readback, o->layout.buffer_size)) {
      uint64_t off = 0;
      while (off < o->layout.buffer_size && o->image[off] == o->readback[off]) off++;
      bpc_result_set(r, BPC_FAIL, "input %u (%s) was modified: first changed byte at offset %llu", k,
                 op->name, (unsigned long long)off);
      return;
    }
  }
  for (uint32_t k = 0; k < s->ref.num_outputs; k++) {
    operand_state_t* o = &s->out[k];
    st = operand_readback(stream, o);
    if (st != BP_OK) {
      bpc_result_set(r, BPC_FAIL, "reading output %u back: %s: %s", k, bp_status_name(st), bp_status_message());
      return;
    }
    uint64_t off = 0;
    if (bpc_guard_check(&o->layout, o->readback, &off)) {
      bpc_result_set(r, BPC_FAIL, "out-of-bounds write: output %u guard byte at offset %llu (%s, %s layout)",
                 k, (unsigned long long)off, guard_place(&o->layout, off), bpc_layout_name(c->out[k].layout));
      return;
    }
  }
  /* 8. Values. */
  int ftz = props && !(props->flags & BP_DEVICE_FLAG_DENORMALS_PRESERVED);
  r->status = BPC_PASS;
  r->message[0] = '\0';
  if (op->check) {
    check_with_op_checker(c, op, s, ftz, r);
    return;
  }
  for (uint32_t k = 0; k < s->ref.num_outputs; k++) {
    const bpc_expected_t* e = &s->ref.out[k];
    size_t bytes = (size_t)(e->numel > 0 ? e->numel : 1) * bpc_dtype_size(e->dtype);
    free(s->got);
    s->got = malloc(bytes);
    if (!s->got) {
      bpc_result_set(r, BPC_RESOURCE_ERROR, "host memory for results");
      return;
    }
    bpc_image_gather(&s->out[k].layout, s->out[k].readback, s->got);
    bpc_tolerance_t tol = bpc_tolerance_get(op->accuracy, e->dtype, (op->flags & BPC_OPF_SIGNED_ZERO) != 0);
    tol.flush_denormals_ok = ftz;
    bpc_check_t chk;
    bpc_check_values(&tol, e, s->got, &chk);
    if (chk.max_ulps > r->max_ulps) r->max_ulps = chk.max_ulps;
    if (chk.max_abs > r->max_abs) r->max_abs = chk.max_abs;
    if (bpc_status_severity(chk.status) > bpc_status_severity(r->status)) {
      r->status = chk.status;
      snprintf(r->message, sizeof r->message, "output %u: %.230s", k, chk.message);
    }
  }
}

void bpc_execute_case(bp_device_t* device, bp_stream_t* stream, const bpc_case_t* c,
                      bpc_result_t* out) {
  if (bpc_is_runtime_op(c->op_id)) {
    bpc_runtime_execute(device, stream, c, out);
    return;
  }
  memset(out, 0, sizeof *out);
  out->status = BPC_FAIL;
  out->max_ulps = -1.0;
  out->max_abs = -1.0;
  exec_state_t* s = calloc(1, sizeof *s);
  if (!s) {
    bpc_result_set(out, BPC_RESOURCE_ERROR, "host memory");
    return;
  }
  run_case(device, stream, c, s, out);
  for (uint32_t k = 0; k < BPC_MAX_INPUTS; k++) {
    operand_free(&s->in[k]);
    free(s->data[k]);
  }
  for (uint32_t k = 0; k < BPC_MAX_OUTPUTS; k++) operand_free(&s->out[k]);
  if (s->have_ref) bpc_ref_result_free(&s->ref);
  free(s->got);
  free(s);
}
