/* bp-info --ops: the op table and, per device, whether the device runs each
 * op.
 *
 * "Supported" is measured, not declared by the op id alone: the device's
 * support query (bp_device_query_support) is asked about the op's quick
 * conformance cases, with the shapes, dtypes and attributes the suite
 * uses, and the op counts as supported on the device when it accepts at
 * least one of them. The dtype labels it accepted are listed too. An op
 * without conformance cases yet is asked nothing and reported unsupported
 * with that reason.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp-info-ops.h"
#include "conform.h"

/* Descriptors of case `c`: inputs from the case, outputs from the
 * reference (which decides them). Buffers stay NULL: support queries take
 * shapes only. Returns 0 when the reference rejects the case. */
static int case_call(const bpc_case_t* c, bpc_ref_result_t* ref, bp_tensor_desc_t* ins,
                     bp_tensor_desc_t* outs, const bp_tensor_desc_t** ptrs, bp_op_call_t* call) {
  void* data[BPC_MAX_INPUTS] = {0};
  bpc_host_tensor_t host[BPC_MAX_INPUTS];
  int ok = 1;
  memset(host, 0, sizeof host);
  for (uint32_t k = 0; k < c->num_inputs && ok; k++) {
    ok = bpc_case_materialize(c, k, &data[k]) == BP_OK;
    host[k].dtype = c->in[k].dtype;
    host[k].rank = c->in[k].rank;
    host[k].numel = 1;
    for (uint32_t d = 0; d < c->in[k].rank; d++) {
      host[k].sizes[d] = c->in[k].sizes[d];
      host[k].numel *= c->in[k].sizes[d];
    }
    host[k].data = data[k];
  }
  if (ok) ok = bpc_reference_run(c, host, ref) == BP_OK;
  for (uint32_t k = 0; k < BPC_MAX_INPUTS; k++) free(data[k]);
  if (!ok) return 0;
  for (uint32_t k = 0; k < c->num_inputs; k++) {
    memset(&ins[k], 0, sizeof ins[k]);
    ins[k].struct_size = sizeof ins[k];
    ins[k].dtype = c->in[k].dtype;
    ins[k].rank = c->in[k].rank;
    int64_t stride = 1;
    for (uint32_t d = c->in[k].rank; d-- > 0;) {
      ins[k].sizes[d] = c->in[k].sizes[d];
      ins[k].strides[d] = stride;
      stride *= c->in[k].sizes[d];
    }
  }
  for (uint32_t k = 0; k < ref->num_outputs; k++) {
    memset(&outs[k], 0, sizeof outs[k]);
    outs[k].struct_size = sizeof outs[k];
    outs[k].dtype = ref->out[k].dtype;
    outs[k].rank = ref->out[k].rank;
    int64_t stride = 1;
    for (uint32_t d = ref->out[k].rank; d-- > 0;) {
      outs[k].sizes[d] = ref->out[k].sizes[d];
      outs[k].strides[d] = stride;
      stride *= ref->out[k].sizes[d];
    }
  }
  memset(call, 0, sizeof *call);
  call->struct_size = sizeof *call;
  call->op_id = c->op_id;
  call->num_inputs = c->num_inputs;
  call->num_outputs = ref->num_outputs;
  call->compute_dtype = ref->compute_dtype;
  for (uint32_t k = 0; k < c->num_inputs; k++) ptrs[k] = &ins[k];
  for (uint32_t k = 0; k < ref->num_outputs; k++) ptrs[c->num_inputs + k] = &outs[k];
  call->inputs = ptrs;
  call->outputs = ptrs + c->num_inputs;
  call->attrs = c->has_attrs ? (const void*)&c->attrs : NULL;
  return 1;
}

/* The op's verdict on one device: supported, the dtype labels accepted (a
 * JSON array) and, when unsupported, the first reason given. */
static int probe(bp_device_t* dev, const bpc_case_list_t* cases, cJSON* dtypes, char* reason,
                 size_t cap) {
  int any = 0;
  snprintf(reason, cap, "%s", cases->count ? "no case accepted" : "no conformance cases yet");
  for (size_t i = 0; i < cases->count; i++) {
    const bpc_case_t* c = &cases->items[i];
    int seen = 0;
    const cJSON* it;
    cJSON_ArrayForEach(it, dtypes) seen |= strcmp(it->valuestring, c->dtype_label) == 0;
    if (seen) continue;
    bpc_ref_result_t ref;
    bp_tensor_desc_t ins[BPC_MAX_INPUTS], outs[BPC_MAX_OUTPUTS];
    const bp_tensor_desc_t* ptrs[BPC_MAX_INPUTS + BPC_MAX_OUTPUTS];
    bp_op_call_t call;
    if (!case_call(c, &ref, ins, outs, ptrs, &call)) continue;
    bp_support_t sup;
    memset(&sup, 0, sizeof sup);
    sup.struct_size = sizeof sup;
    if (bp_device_query_support(dev, &call, &sup) == BP_OK) {
      if (sup.supported) {
        any = 1;
        cJSON_AddItemToArray(dtypes, cJSON_CreateString(c->dtype_label));
      } else if (!any && sup.message[0]) {
        snprintf(reason, cap, "%s", sup.message);
      }
    }
    bpc_ref_result_free(&ref);
  }
  return any;
}

/* Devices of the loaded plugins (only `only`'s when given). */
static uint32_t list_devices(bp_context_t* ctx, const bp_plugin_t* only, bp_device_t** out,
                             uint32_t cap) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < bp_context_device_count(ctx) && n < cap; i++) {
    bp_device_t* d = NULL;
    if (bp_context_device(ctx, i, &d) != BP_OK) continue;
    if (only && bp_device_plugin(d) != only) continue;
    out[n++] = d;
  }
  return n;
}

cJSON* bp_info_ops_json(bp_context_t* ctx, const bp_plugin_t* only) {
  bp_device_t* devs[64];
  uint32_t ndev = list_devices(ctx, only, devs, 64);
  cJSON* root = cJSON_CreateObject();
  cJSON* ops = cJSON_AddArrayToObject(root, "ops");
  for (uint32_t id = 1; id < BP_OP_COUNT; id++) {
    bp_op_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (bp_op_get_info(id, &info) != BP_OK) continue;
    cJSON* o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", id);
    cJSON_AddStringToObject(o, "name", info.name);
    cJSON_AddStringToObject(o, "category", info.category);
    cJSON_AddStringToObject(o, "aten", info.aten);
    cJSON* sup = cJSON_AddObjectToObject(o, "supported");
    cJSON* dts = cJSON_AddObjectToObject(o, "dtypes");
    cJSON* why = cJSON_AddObjectToObject(o, "reasons");
    bpc_case_list_t cases = {0};
    (void)bpc_cases_generate(id, 1, &cases);
    for (uint32_t k = 0; k < ndev; k++) {
      char reason[256];
      cJSON* labels = cJSON_CreateArray();
      int ok = probe(devs[k], &cases, labels, reason, sizeof reason);
      cJSON_AddBoolToObject(sup, bp_device_name(devs[k]), ok);
      cJSON_AddItemToObject(dts, bp_device_name(devs[k]), labels);
      if (!ok) cJSON_AddStringToObject(why, bp_device_name(devs[k]), reason);
    }
    bpc_case_list_free(&cases);
    cJSON_AddItemToArray(ops, o);
  }
  return root;
}

void bp_info_ops_print(bp_context_t* ctx, const bp_plugin_t* only) {
  cJSON* root = bp_info_ops_json(ctx, only);
  const cJSON* op;
  int first = 1;
  cJSON_ArrayForEach(op, cJSON_GetObjectItemCaseSensitive(root, "ops")) {
    const cJSON* sup = cJSON_GetObjectItemCaseSensitive(op, "supported");
    if (first) {
      printf("%4s %-32s %-10s", "id", "op", "category");
      const cJSON* d;
      cJSON_ArrayForEach(d, sup) printf(" %-10s", d->string);
      printf("\n");
      first = 0;
    }
    printf("%4d %-32s %-10s", cJSON_GetObjectItemCaseSensitive(op, "id")->valueint,
           cJSON_GetObjectItemCaseSensitive(op, "name")->valuestring,
           cJSON_GetObjectItemCaseSensitive(op, "category")->valuestring);
    const cJSON* d;
    cJSON_ArrayForEach(d, sup) printf(" %-10s", cJSON_IsTrue(d) ? "yes" : "-");
    printf("\n");
  }
  cJSON_Delete(root);
}
