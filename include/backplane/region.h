/* backplane: compiled regions, elementwise programs and cost estimates for
 * applications (the graph compiler's way into the plugins' exec tables).
 *
 * A region (bp_region_desc_t, types.h) is a small piece of a graph that one
 * device compiles and runs as a unit: an elementwise program, a matmul with
 * its epilogue, a named fused pattern, or any convex subgraph. The device's
 * plugin claims the nodes it takes (bp_device_claim_region), compiles a
 * region or refuses it with a reason (bp_region_compile), says what a
 * compiled region needs (bp_region_get_info: workspace, donation, cost) and
 * runs it on a stream (bp_region_launch). Compiled regions are saved and
 * loaded as plugin-checked bytes (bp_region_serialize / _deserialize).
 * docs/ABI.md section 12 states the rules; docs/ARCHITECTURE.md shows where
 * this sits.
 *
 * Reduction prologues: a device whose bp_fusion_caps_t.reduction_prologues
 * has BP_EPILOGUE_EW_PROGRAM compiles GRAPH regions of elementwise nodes
 * followed by one sum, mean, amax or amin of their result (a temporary
 * only the reduction reads) without storing that result, or refuses them
 * with a reason (docs/ABI.md section 11, docs/graph.md).
 *
 * Threading: every call is thread-safe; a stream is externally
 * synchronized, as everywhere. A bp_region_t is immutable once compiled:
 * several threads may launch it at once on their own streams.
 */
#ifndef BACKPLANE_REGION_H_
#define BACKPLANE_REGION_H_

#include "backplane/backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A compiled region of one device: ref-counted, immutable. */
typedef struct bp_region bp_region_t;

/* The plugin's estimate for one op call at concrete shapes (buffers in
 * `call` are ignored). BP_UNIMPLEMENTED when the plugin gives none (the
 * caller then uses a roofline from bp_device_properties). `out->struct_size`
 * is set by the caller (>= BP_COST_ESTIMATE_V1_SIZE). */
BP_API bp_status_t bp_device_estimate_cost(const bp_device_t* device, const bp_op_call_t* call,
                                           bp_cost_estimate_t* out);

/* Runs an elementwise program (types.h) on `stream`'s device: outputs (all
 * of one shape) from inputs broadcast to it, in the program's compute dtype.
 * Validated: instruction operands in range, opcodes the device declared
 * (bp_device_query_fusion), limits, dtypes, broadcasting, devices, bounds
 * and overlaps (an output may be an input exactly, never partly).
 * BP_UNIMPLEMENTED when the device runs no programs. Stream-ordered. */
BP_API bp_status_t bp_ew_program_run(bp_stream_t* stream, const bp_ew_program_t* program,
                                     const bp_tensor_t* const* inputs, uint32_t num_inputs,
                                     bp_tensor_t* const* outputs, uint32_t num_outputs);

/* The graph-level claim (ONNX Runtime's GetCapability): `graph` (kind
 * BP_REGION_GRAPH) is offered to the device; for each of its num_nodes
 * nodes, out_groups[n] is the group the device takes node n in (1, 2, ...:
 * nodes of one group may be compiled as one region) or 0 when it does not
 * take it; then out_reasons[n] (when out_reasons is not NULL; an array of
 * num_nodes pointers, each to a bp_support_t whose struct_size the caller
 * set) says why. Entries of taken nodes are written supported = 1. A
 * plugin without region_claim gets the core's answer: each node its
 * plugin's query_support accepts is its own group. */
BP_API bp_status_t bp_device_claim_region(const bp_device_t* device, const bp_region_desc_t* graph,
                                          uint32_t* out_groups, bp_support_t* const* out_reasons);

/* Compiles `region` for `device`. A device that does not take it answers
 * BP_UNIMPLEMENTED with the reason in *out_refusal (struct_size set by the
 * caller; may be NULL) and in the message; a plugin without an exec table
 * refuses every region (reason BP_SUPPORT_DEVICE). Malformed regions (value
 * ids out of range, wrong operand counts, an argument no node reads or
 * writes, bad descriptors) are BP_INVALID_ARGUMENT. *out holds one
 * reference. */
BP_API bp_status_t bp_region_compile(bp_device_t* device, const bp_region_desc_t* region,
                                     bp_support_t* out_refusal, bp_region_t** out);
BP_API void bp_region_retain(bp_region_t* region);
/* Frees the region once the last reference is gone; launched work that is
 * still pending keeps what it needs. */
BP_API void bp_region_release(bp_region_t* region);
BP_API bp_device_t* bp_region_device(const bp_region_t* region);
/* Arguments (inputs then outputs) and how many are inputs. */
BP_API uint32_t bp_region_num_args(const bp_region_t* region);
BP_API uint32_t bp_region_num_inputs(const bp_region_t* region);
/* Workspace bytes, donation pairs (aliases owned by the region) and the
 * plugin's cost estimate. `out->struct_size` is set by the caller. */
BP_API bp_status_t bp_region_get_info(const bp_region_t* region, bp_region_info_t* out);
/* Enqueues one run on `stream` (a stream of the region's device). args:
 * the region's arguments in order, tensors of that device whose dtypes and
 * sizes equal the compiled ones (any in-bounds strides); an output that
 * shares memory with an input must be that input exactly, and only where
 * the region declared the pair (bp_region_info_t.aliases); outputs never
 * overlap each other. workspace: a buffer of the region's device of at
 * least workspace_bytes (NULL when the region needs none), not used by
 * another launch until this one completes. Stream-ordered. */
BP_API bp_status_t bp_region_launch(bp_stream_t* stream, bp_region_t* region,
                                    const bp_tensor_t* const* args, uint32_t num_args,
                                    bp_buffer_t* workspace);
/* Two-call pattern: data NULL (capacity 0) sets *out_size to the bytes
 * needed; else writes at most capacity bytes (RESOURCE_EXHAUSTED when too
 * few). The bytes carry a core header (magic, format version, ABI version,
 * plugin name and version, device fingerprint, checksum) around the
 * plugin's own checked bytes. BP_UNIMPLEMENTED when the plugin cannot. */
BP_API bp_status_t bp_region_serialize(const bp_region_t* region, void* data, uint64_t capacity,
                                       uint64_t* out_size);
/* Loads bytes of bp_region_serialize for `device`. Corrupt or truncated
 * bytes are BP_DATA_LOSS; bytes of another plugin, plugin version, device
 * or ABI are BP_FAILED_PRECONDITION; the message says which check failed.
 * Never trusts the bytes. */
BP_API bp_status_t bp_region_deserialize(bp_device_t* device, const void* data, uint64_t size,
                                         bp_region_t** out);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_REGION_H_ */
