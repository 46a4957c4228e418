/* Test plugins for placement: the template plugin (add and relu on f32,
 * real results in host memory) compiled in, answering as COST_NAME and
 * declaring COST_PEAK FLOP/s and COST_BANDWIDTH bytes/s, so two copies
 * with different figures give the cost model two devices to choose from.
 * With COST_ESTIMATE_NS it also answers estimate_cost with that time for
 * every call (the compiler must prefer it to its roofline). With
 * COST_CLAIM_ALL it has an exec table whose region_claim puts every node
 * it is offered in one group, convex or not, and no region_compile (every
 * region refused): the compiler's own convexity check is what stands
 * between such a claim and a broken run order.
 * Test-only.
 */
#define bp_plugin_negotiate bp__template_negotiate
#include "../../plugins/template/template_plugin.c"
#undef bp_plugin_negotiate

static bp_plugin_vtable_t g_cost_vtable;
static bpp_core_table_t g_cost_core;
static bpp_caps_table_t g_cost_caps;

#ifdef COST_ESTIMATE_NS
static bp_status_t cost_estimate(bpp_device_t device, const bp_op_call_t* call, bp_cost_estimate_t* out) {
  (void)device;
  (void)call;
  out->confidence = 50;
  out->time_ns = COST_ESTIMATE_NS;
  out->flops = 0;
  out->bytes = 0;
  return BP_OK;
}
#endif

#ifdef COST_CLAIM_ALL
static bpp_exec_table_t g_cost_exec;
static bp_status_t claim_all(bpp_device_t device, const bp_region_desc_t* graph, uint32_t* out_groups,
                             bp_support_t* const* out_reasons) {
  (void)device;
  (void)out_reasons;
  for (uint32_t n = 0; n < graph->num_nodes; ++n) out_groups[n] = 1;
  return BP_OK;
}
#endif

static bp_status_t cost_properties(bpp_device_t device, bp_device_properties_t* props) {
  bp_status_t st = device_get_properties(device, props);
  if (st != BP_OK) return st;
  props->peak_ops_per_s[BP_DTYPE_F32] = COST_PEAK;
  props->memory_bandwidth_bytes_per_s = COST_BANDWIDTH;
  snprintf(props->name, sizeof props->name, "%s (template with declared figures)", COST_NAME);
  return BP_OK;
}

BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* req,
                                                 bp_negotiate_reply_t* reply);
bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* req, bp_negotiate_reply_t* reply) {
  bp_status_t st = bp__template_negotiate(req, reply);
  if (st != BP_OK) return st;
  g_cost_vtable = *reply->vtable;
  g_cost_core = *g_cost_vtable.core;
  g_cost_core.device_get_properties = cost_properties;
  g_cost_vtable.core = &g_cost_core;
  g_cost_caps = *g_cost_vtable.caps;
#ifdef COST_ESTIMATE_NS
  g_cost_caps.estimate_cost = cost_estimate;
#endif
  g_cost_vtable.caps = &g_cost_caps;
#ifdef COST_CLAIM_ALL
  memset(&g_cost_exec, 0, sizeof g_cost_exec);
  g_cost_exec.struct_size = sizeof g_cost_exec;
  g_cost_exec.region_claim = claim_all;
  g_cost_vtable.exec = &g_cost_exec;
#endif
  reply->vtable = &g_cost_vtable;
  reply->name = COST_NAME;
  return BP_OK;
}
