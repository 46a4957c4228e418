/* backplane core: the steps of bp_op_run (op_run.c), each in its own file:
 *  - prepare (op_prepare.c, shared with bp_op_infer): op lookup, operand
 *    counts, attributes, input descriptors;
 *  - validate (op_validate.c): placement, bounds, shape/dtype inference,
 *    given outputs (shape, overlap, aliasing), a kernel slot;
 *  - plan (op_plan.c): the plugin's support answer, output allocation and
 *    dense temporaries (packing) where the plugin needs them;
 *  - launch (op_launch.c): the kernel, copies out of the temporaries, the
 *    synchronous debug mode; then finish releases what the call held.
 * Every step reads and fills one bp__run_t on bp_op_run's stack; none
 * allocates on the hot path (outputs given, no packing).
 */
#ifndef BP_CORE_OPS_OP_RUN_INTERNAL_H_
#define BP_CORE_OPS_OP_RUN_INTERNAL_H_

#include "ops/ops_internal.h"

/* Inputs whose descriptors live on the stack; longer tensor lists use the heap. */
#define BP__STACK_INPUTS 16

typedef struct bp__prep {
  const bp__op_meta_t* op;
  uint32_t num_inputs;
  bp__attrs_storage_t attrs;
  bp__infer_t x;
  bp_tensor_desc_t* in; /* stack_in or heap */
  /* in_ptr[i] == &in[i]: the pointer array plugins receive. Shares in's
   * heap block when in is on the heap. */
  const bp_tensor_desc_t** in_ptr;
  bp_tensor_desc_t stack_in[BP__STACK_INPUTS];
  const bp_tensor_desc_t* stack_in_ptr[BP__STACK_INPUTS];
} bp__prep_t;

/* Shared by bp_op_infer and bp_op_run: op lookup, operand counts, NULL
 * operands, attributes, input descriptors (buffers NULL). p->in is valid
 * (possibly NULL) on return, whatever the status: release with
 * bp__prep_free. */
BP__HIDDEN bp_status_t bp__prepare(bp__prep_t* p, const char* api, uint32_t op_id,
                                   const bp_tensor_t* const* inputs, uint32_t num_inputs,
                                   const void* attrs, uint32_t num_outputs);
BP__HIDDEN void bp__prep_free(bp__prep_t* p);
BP__HIDDEN void bp__desc_from_tensor(const bp_tensor_t* t, bp_tensor_desc_t* d);
BP__HIDDEN bp_status_t bp__check_tensor(const bp__op_meta_t* op, const bp_tensor_t* t,
                                        const char* kind, const char* name);
BP__HIDDEN void bp__set_buffer(bp_tensor_desc_t* d, const bp_tensor_t* t);
/* Aliasing checks (op_validate.c), shared with compiled regions: same
 * offset, element size, shape and strides; two distinct elements sharing
 * memory (an expanded view); byte spans of two tensors intersecting. */
BP__HIDDEN int bp__same_layout(const bp_tensor_desc_t* a, const bp_tensor_desc_t* b);
BP__HIDDEN int bp__self_overlapping(const bp_tensor_desc_t* d);
BP__HIDDEN int bp__spans_intersect(const bp_tensor_t* a, const bp_tensor_t* b);

/* One bp_op_run call. */
typedef struct bp__run {
  /* The arguments. */
  bp_stream_t* stream;
  uint32_t op_id;
  const bp_tensor_t* const* inputs;
  uint32_t num_inputs;
  const void* attrs;
  bp_tensor_t** outputs;
  uint32_t num_outputs;
  /* validate */
  bp__prep_t p;
  bp_device_t* device;
  bp_plugin_t* plugin;
  bp_tensor_t* outs[BP__MAX_OUTPUTS];       /* given or allocated */
  bp_tensor_desc_t given[BP__MAX_OUTPUTS];  /* the given outputs' descriptors */
  /* plan */
  bp_op_call_t call;
  bp_tensor_desc_t out_desc[BP__MAX_OUTPUTS];  /* what the kernel writes */
  const bp_tensor_desc_t* out_ptr[BP__MAX_OUTPUTS]; /* out_ptr[k] == &out_desc[k] */
  bp_tensor_t* allocated[BP__MAX_OUTPUTS];     /* released on failure */
  /* Dense temporaries: packed inputs, and outputs computed densely then
   * copied into the caller's strided outputs. */
  bp_tensor_t* temp_in_small[BP__STACK_INPUTS];
  bp_tensor_t** temp_in;
  bp_tensor_t* temp_out[BP__MAX_OUTPUTS];
  /* launch */
  int launched; /* work was enqueued: buffers must outlive it */
} bp__run_t;

/* Rewrites a call that runs as another op (op_canonical.c says which and
 * why); leaves every other call alone. `inputs` keeps pointing at the
 * caller's array (a rewritten call uses a prefix of it). */
BP__HIDDEN void bp__op_canonicalize(uint32_t* op_id, const bp_tensor_t* const** inputs,
                                    uint32_t* num_inputs, const void** attrs);

/* Sets the arguments and the fields finish reads; nothing else. */
BP__HIDDEN void bp__run_init(bp__run_t* r, bp_stream_t* stream, uint32_t op_id,
                             const bp_tensor_t* const* inputs, uint32_t num_inputs,
                             const void* attrs, bp_tensor_t** outputs, uint32_t num_outputs);
BP__HIDDEN bp_status_t bp__run_validate(bp__run_t* r);
BP__HIDDEN bp_status_t bp__run_plan(bp__run_t* r);
BP__HIDDEN bp_status_t bp__run_launch(bp__run_t* r);
/* Notes buffer uses of enqueued work, releases temporaries and, after a
 * failure, the outputs allocated for the call. */
BP__HIDDEN void bp__run_finish(bp__run_t* r);

/* Enqueues the plugin's copy kernel: dst (same shape) <- src. */
BP__HIDDEN bp_status_t bp__launch_copy(bp_plugin_t* plugin, bp_stream_t* stream,
                                       const bp__op_meta_t* op, const bp_tensor_desc_t* dst,
                                       const bp_tensor_desc_t* src);

#endif /* BP_CORE_OPS_OP_RUN_INTERNAL_H_ */
