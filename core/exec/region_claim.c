/* backplane core: the graph-level claim (bp_device_claim_region).
 *
 * The plugin's region_claim answers when it has one; otherwise the core
 * answers for it from the per-op support query: every supported node is
 * its own group. Thread-safe and pure, like the support query.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"

#define BP__SUPPORT_FIRST_SIZE (offsetof(bp_support_t, message) + sizeof(((bp_support_t*)0)->message))

/* The core's answer: query_support per node. */
static bp_status_t claim_by_support(const bp_device_t* device, const bp__region_checked_t* c,
                                    uint32_t* groups, bp_support_t* reasons) {
  const bp_region_desc_t* r = &c->desc;
  for (uint32_t n = 0; n < r->num_nodes; ++n) {
    const bp_region_node_t* node = r->nodes[n];
    bp_tensor_desc_t absent;
    memset(&absent, 0, sizeof(absent));
    absent.struct_size = sizeof(absent);
    const bp_tensor_desc_t* ptrs_small[16];
    uint32_t nops = node->num_inputs + node->num_outputs;
    const bp_tensor_desc_t** ptrs = nops <= 16 ? ptrs_small : calloc(nops, sizeof(*ptrs));
    if (ptrs == NULL) return bp__error(BP_RESOURCE_EXHAUSTED, "bp_device_claim_region: out of memory");
    for (uint32_t i = 0; i < node->num_inputs; ++i)
      ptrs[i] = node->inputs[i] == BP_REGION_VALUE_NONE ? &absent : r->values[node->inputs[i]];
    for (uint32_t k = 0; k < node->num_outputs; ++k)
      ptrs[node->num_inputs + k] = r->values[node->outputs[k]];
    bp_op_call_t call;
    memset(&call, 0, sizeof(call));
    call.struct_size = sizeof(call);
    call.op_id = node->op_id;
    call.num_inputs = node->num_inputs;
    call.num_outputs = node->num_outputs;
    call.compute_dtype = node->compute_dtype;
    call.list_begin = node->list_begin;
    call.list_count = node->list_count;
    call.inputs = ptrs;
    call.outputs = ptrs + node->num_inputs;
    call.attrs = node->attrs;
    bp_status_t st = bp__query_support_checked(device, &call, &reasons[n]);
    if (ptrs != ptrs_small) free(ptrs);
    if (st != BP_OK) return st;
    groups[n] = reasons[n].supported ? n + 1 : 0;
  }
  return BP_OK;
}

bp_status_t bp_device_claim_region(const bp_device_t* device, const bp_region_desc_t* graph,
                                   uint32_t* out_groups, bp_support_t* const* out_reasons) {
  const char* api = "bp_device_claim_region";
  BP__REQUIRE_ARG(api, device);
  BP__REQUIRE_ARG(api, graph);
  BP__REQUIRE_ARG(api, out_groups);
  if (graph->struct_size >= BP_REGION_DESC_V1_SIZE && graph->kind != BP_REGION_GRAPH)
    return bp__error(BP_INVALID_ARGUMENT, "%s: a claim is offered a GRAPH region (kind %u given)",
                     api, graph->kind);
  bp__region_checked_t c;
  bp_status_t st = bp__region_check(api, graph, &c);
  bp_support_t* reasons = NULL;
  bp_support_t** reason_ptrs = NULL;
  if (st != BP_OK) goto done;
  uint32_t nn = c.desc.num_nodes;
  if (out_reasons != NULL) {
    for (uint32_t n = 0; n < nn; ++n)
      if (out_reasons[n] == NULL || out_reasons[n]->struct_size < BP__SUPPORT_FIRST_SIZE ||
          out_reasons[n]->struct_size > 4096) {
        st = bp__error(BP_INVALID_ARGUMENT, "%s: out_reasons[%u] is NULL or has struct_size %u (expected >= %zu)",
                       api, n, out_reasons[n] ? out_reasons[n]->struct_size : 0,
                       (size_t)BP__SUPPORT_FIRST_SIZE);
        goto done;
      }
  }
  reasons = calloc(nn, sizeof(*reasons));
  reason_ptrs = calloc(nn, sizeof(*reason_ptrs));
  if (reasons == NULL || reason_ptrs == NULL) {
    st = bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
    goto done;
  }
  for (uint32_t n = 0; n < nn; ++n) {
    bp__support_set(&reasons[n], 0, BP_SUPPORT_OK, "%s", "");
    reason_ptrs[n] = &reasons[n];
    out_groups[n] = 0;
  }
  const bp_plugin_t* plugin = device->plugin;
  if (plugin->has_exec && plugin->exec.region_claim != NULL) {
    bp__clear_error();
    st = BP__NOTE_CALL(plugin, "region_claim", NULL,
                       plugin->exec.region_claim(device->handle, &c.desc, out_groups, reason_ptrs));
    if (st != BP_OK) {
      st = bp__plugin_error(plugin, st, "region claim");
      goto done;
    }
  } else {
    st = claim_by_support(device, &c, out_groups, reasons);
    if (st != BP_OK) goto done;
  }
  for (uint32_t n = 0; n < nn; ++n) {
    bp_support_t* a = &reasons[n];
    a->struct_size = sizeof(*a);
    if (out_groups[n] != 0) {
      bp__support_set(a, 1, BP_SUPPORT_OK, "%s", "");
    } else {
      bp__text_clean_array(a->message, sizeof(a->message));
      a->supported = 0;
      if (a->reason == BP_SUPPORT_OK) a->reason = BP_SUPPORT_OP;
      if (a->message[0] == '\0')
        snprintf(a->message, sizeof(a->message), "backend '%s' did not take node %u",
                 plugin->name, n);
    }
    if (out_reasons != NULL) {
      st = bp__out_struct_write(api, "bp_support_t", out_reasons[n], a, sizeof(*a),
                                BP__SUPPORT_FIRST_SIZE);
      if (st != BP_OK) goto done;
    }
  }
done:
  free(reasons);
  free(reason_ptrs);
  bp__region_checked_free(&c);
  return st;
}
