/* Core rules of the ABI that need no special plugin: the minor gate (on a
 * synthetic history, since this host is the first minor), the tracing
 * hooks around dispatch, and the refusal of tensor layouts a backend did
 * not declare. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "backplane/backplane.h"
#include "backplane/plugin.h"
#include "ops/abi_history.h"

/* ---- the minor gate ------------------------------------------------------ */
/* A made-up history: minor 1 added op 10 and dtype 6, and appended 8 bytes
 * to attribute kind 3 (released at 16 bytes in 1.0). */
static const uint32_t k_ops[2] = {10, 11};
static const uint32_t k_dtypes[2] = {6, 7};
static const bp__attr_growth_t k_growth[2] = {{3, 0, 16, ""}, {3, 1, 24, "antialias"}};
/* ... and gave bytes 4..7 of kind 5 (reserved in 1.0) the meaning "mode". */
static const bp__attr_field_t k_fields[1] = {{5, 1, 4, 4, "mode"}};
static const bp__abi_history_t k_hist = {2, k_ops, k_dtypes, 2, k_growth, 1, k_fields};

typedef struct fake_attrs {
  uint32_t struct_size;
  uint32_t mode;
  uint64_t scale;
  uint64_t antialias; /* appended in minor 1 */
} fake_attrs_t;

static bp_op_call_t make_call(uint32_t op, const bp_tensor_desc_t* const* in,
                              const bp_tensor_desc_t* const* out, const void* attrs) {
  bp_op_call_t c = {.struct_size = sizeof(c), .op_id = op, .num_inputs = 1, .num_outputs = 1,
                    .inputs = in, .outputs = out, .attrs = attrs};
  return c;
}

static void test_gate(void** state) {
  (void)state;
  bp_tensor_desc_t d = {.struct_size = sizeof(d), .dtype = 1, .rank = 1, .sizes = {4}, .strides = {1}};
  bp_tensor_desc_t o = d;
  const bp_tensor_desc_t* in[1] = {&d};
  const bp_tensor_desc_t* out[1] = {&o};
  fake_attrs_t a = {.struct_size = sizeof(a), .mode = 1, .scale = 7};
  char msg[256];
  uint32_t reason = 0;
  bp_op_call_t c = make_call(5, in, out, &a);
  /* Everything 1.0 knows: handed over, to 1.0 and 1.1 plugins alike. */
  assert_int_equal(bp__abi_gate(&k_hist, 0, 3, "five", &c, &reason, msg, sizeof(msg)), 0);
  assert_int_equal(bp__abi_gate(&k_hist, 1, 3, "five", &c, &reason, msg, sizeof(msg)), 0);
  /* An op of minor 1. */
  c.op_id = 10;
  assert_int_equal(bp__abi_gate(&k_hist, 0, 3, "ten", &c, &reason, msg, sizeof(msg)), 1);
  assert_int_equal(reason, BP_SUPPORT_OP);
  assert_non_null(strstr(msg, "op 'ten' (id 10) was added in ABI 1.1"));
  assert_non_null(strstr(msg, "negotiated ABI 1.0"));
  assert_int_equal(bp__abi_gate(&k_hist, 1, 3, "ten", &c, &reason, msg, sizeof(msg)), 0);
  /* A dtype of minor 1, on an output. */
  c.op_id = 5;
  o.dtype = 6;
  assert_int_equal(bp__abi_gate(&k_hist, 0, 3, "five", &c, &reason, msg, sizeof(msg)), 1);
  assert_int_equal(reason, BP_SUPPORT_DTYPE);
  assert_non_null(strstr(msg, "output 0 has dtype"));
  assert_non_null(strstr(msg, "(6)"));
  o.dtype = 1;
  /* An appended attribute field: zero is its default and passes; any other
   * value is refused for the 1.0 plugin and named. */
  a.antialias = 0;
  assert_int_equal(bp__abi_gate(&k_hist, 0, 3, "five", &c, &reason, msg, sizeof(msg)), 0);
  a.antialias = 1;
  assert_int_equal(bp__abi_gate(&k_hist, 0, 3, "five", &c, &reason, msg, sizeof(msg)), 1);
  assert_int_equal(reason, BP_SUPPORT_ATTRIBUTE);
  assert_non_null(strstr(msg, "attribute field 'antialias' (added in ABI 1.1)"));
  assert_int_equal(bp__abi_gate(&k_hist, 1, 3, "five", &c, &reason, msg, sizeof(msg)), 0);
  /* Other attribute kinds have not grown: nothing to check. */
  assert_int_equal(bp__abi_gate(&k_hist, 0, 4, "five", &c, &reason, msg, sizeof(msg)), 0);
  /* A caller's struct that stops before the appended field passes. */
  a.struct_size = 16;
  assert_int_equal(bp__abi_gate(&k_hist, 0, 3, "five", &c, &reason, msg, sizeof(msg)), 0);
  /* A field defined in once-reserved bytes (kind 5, "mode"): nonzero is
   * refused for the 1.0 plugin and named, zero passes, the 1.1 plugin
   * takes it, and a struct that stops before it passes. */
  a.struct_size = sizeof(a);
  assert_int_equal(bp__abi_gate(&k_hist, 0, 5, "five", &c, &reason, msg, sizeof(msg)), 1);
  assert_int_equal(reason, BP_SUPPORT_ATTRIBUTE);
  assert_non_null(strstr(msg, "attribute field 'mode' (defined in ABI 1.1"));
  assert_int_equal(bp__abi_gate(&k_hist, 1, 5, "five", &c, &reason, msg, sizeof(msg)), 0);
  a.mode = 0;
  assert_int_equal(bp__abi_gate(&k_hist, 0, 5, "five", &c, &reason, msg, sizeof(msg)), 0);
  a.mode = 1;
  a.struct_size = 4;
  assert_int_equal(bp__abi_gate(&k_hist, 0, 5, "five", &c, &reason, msg, sizeof(msg)), 0);
}

/* This library's history: weight_only_mm's activation (ABI 1.4, in the
 * bytes of bp_quantize_attrs_t that were reserved0) reaches no plugin of
 * minor 3 or older, which would ignore it; NONE does. */
static void test_gate_quantize_activation(void** state) {
  (void)state;
  const bp__abi_history_t* h = bp__abi_history();
  uint32_t kind = UINT32_MAX;
  for (uint32_t i = 0; i < h->num_attr_fields; i++)
    if (strcmp(h->attr_fields[i].name, "activation") == 0) kind = h->attr_fields[i].attrs_kind;
  assert_int_not_equal(kind, UINT32_MAX);
  bp_tensor_desc_t d = {.struct_size = sizeof(d), .dtype = BP_DTYPE_F32, .rank = 1, .sizes = {4}, .strides = {1}};
  const bp_tensor_desc_t* in[1] = {&d};
  const bp_tensor_desc_t* out[1] = {&d};
  bp_quantize_attrs_t a = {.struct_size = sizeof(a), .qdtype = BP_DTYPE_I4, .axis = -1,
                           .activation = BP_ACTIVATION_SILU};
  bp_op_call_t c = make_call(BP_OP_weight_only_mm, in, out, &a);
  char msg[256];
  uint32_t reason = 0;
  assert_int_equal(bp__abi_gate(h, 3, kind, "weight_only_mm", &c, &reason, msg, sizeof(msg)), 1);
  assert_int_equal(reason, BP_SUPPORT_ATTRIBUTE);
  assert_non_null(strstr(msg, "'activation' (defined in ABI 1.4"));
  assert_int_equal(bp__abi_gate(h, 4, kind, "weight_only_mm", &c, &reason, msg, sizeof(msg)), 0);
  a.activation = BP_ACTIVATION_NONE;
  assert_int_equal(bp__abi_gate(h, 3, kind, "weight_only_mm", &c, &reason, msg, sizeof(msg)), 0);
}

/* This library's own history matches its headers. */
static void test_history_is_current(void** state) {
  (void)state;
  const bp__abi_history_t* h = bp__abi_history();
  assert_int_equal(h->num_minors, BP_ABI_VERSION_MINOR + 1);
  assert_int_equal(h->op_count[h->num_minors - 1], BP_OP_COUNT);
  assert_int_equal(h->dtype_count[h->num_minors - 1], BP_DTYPE_COUNT_);
}

/* ---- tracing hooks ------------------------------------------------------- */
typedef struct trace_log {
  int begins, ends;
  uint32_t op;
  bp_device_t* device;
  bp_stream_t* stream;
  bp_status_t status;
} trace_log_t;

static void on_begin(void* user, uint32_t op, bp_device_t* device, bp_stream_t* stream) {
  trace_log_t* t = user;
  t->begins++;
  t->op = op;
  t->device = device;
  t->stream = stream;
}

static void on_end(void* user, uint32_t op, bp_device_t* device, bp_stream_t* stream,
                   bp_status_t status) {
  trace_log_t* t = user;
  t->ends++;
  assert_int_equal(op, t->op);
  assert_ptr_equal(device, t->device);
  assert_ptr_equal(stream, t->stream);
  t->status = status;
}

static bp_context_t* cpu_context(const bp_context_options_t* options, bp_device_t** out_dev) {
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(options, &ctx), BP_OK);
  const char* dir = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  assert_non_null(dir);
  char path[4096];
  snprintf(path, sizeof(path), "%s/libbp_plugin_cpu.so", dir);
  assert_int_equal(bp_context_register_plugin(ctx, path, NULL), BP_OK);
  assert_int_equal(bp_context_find_device(ctx, "cpu:0", out_dev), BP_OK);
  return ctx;
}

static void test_trace_hooks(void** state) {
  (void)state;
  trace_log_t log = {0};
  bp_context_options_t options = {.struct_size = sizeof(options),
                                  .flags = BP_CONTEXT_NO_DISCOVERY,
                                  .trace_begin = on_begin,
                                  .trace_end = on_end,
                                  .trace_user_data = &log};
  bp_device_t* dev = NULL;
  bp_context_t* ctx = cpu_context(&options, &dev);
  bp_stream_t* s = NULL;
  assert_int_equal(bp_stream_create(dev, NULL, &s), BP_OK);
  int64_t n = 3;
  bp_tensor_t *a = NULL, *out = NULL, *wrong = NULL;
  assert_int_equal(bp_tensor_create(dev, BP_DTYPE_F32, 1, &n, &a), BP_OK);
  assert_int_equal(bp_op_neg(s, a, NULL, &out), BP_OK);
  assert_int_equal(log.begins, 1);
  assert_int_equal(log.ends, 1);
  assert_int_equal(log.op, BP_OP_neg);
  assert_ptr_equal(log.device, dev);
  assert_ptr_equal(log.stream, s);
  assert_int_equal(log.status, BP_OK);
  /* Refused before dispatch: no plugin call, no hooks. */
  int64_t m = 5;
  assert_int_equal(bp_tensor_create(dev, BP_DTYPE_F32, 1, &m, &wrong), BP_OK);
  assert_int_equal(bp_op_neg(s, a, NULL, &wrong), BP_INVALID_ARGUMENT);
  assert_int_equal(log.begins, 1);
  assert_int_equal(bp_stream_synchronize(s), BP_OK);
  bp_tensor_release(a);
  bp_tensor_release(out);
  bp_tensor_release(wrong);
  bp_stream_release(s);
  bp_context_release(ctx);
}

/* ---- tensor layouts ------------------------------------------------------ */
static void test_undeclared_layout_refused(void** state) {
  (void)state;
  bp_context_options_t options = {.struct_size = sizeof(options), .flags = BP_CONTEXT_NO_DISCOVERY};
  bp_device_t* dev = NULL;
  bp_context_t* ctx = cpu_context(&options, &dev);
  assert_int_equal(bp_device_properties(dev)->layout_mask, BP_LAYOUT_BIT(BP_LAYOUT_STRIDED));
  bp_tensor_desc_t scales = {.struct_size = sizeof(scales), .dtype = BP_DTYPE_F8E8M0FNU, .rank = 2,
                             .sizes = {4, 2}, .strides = {2, 1}};
  bp_quant_desc_t q = {.struct_size = sizeof(q), .axis = 1, .block_size = 32, .scales = &scales};
  bp_tensor_desc_t w = {.struct_size = sizeof(w), .dtype = BP_DTYPE_F8E4M3FN, .rank = 2,
                        .sizes = {4, 64}, .strides = {64, 1},
                        .layout = BP_LAYOUT_BLOCK_SCALED, .quant = &q};
  bp_tensor_desc_t o = {.struct_size = sizeof(o), .dtype = BP_DTYPE_F32, .rank = 2,
                        .sizes = {4, 64}, .strides = {64, 1}};
  const bp_tensor_desc_t* in[1] = {&w};
  const bp_tensor_desc_t* out[1] = {&o};
  bp_cast_attrs_t ca = {.struct_size = sizeof(ca), .dtype = BP_DTYPE_F32};
  bp_op_call_t call = {.struct_size = sizeof(call), .op_id = BP_OP_to_copy, .num_inputs = 1,
                       .num_outputs = 1, .inputs = in, .outputs = out, .attrs = &ca};
  bp_support_t s = {.struct_size = sizeof(s), .supported = 1};
  assert_int_equal(bp_device_query_support(dev, &call, &s), BP_OK);
  assert_int_equal(s.supported, 0);
  assert_int_equal(s.reason, BP_SUPPORT_LAYOUT);
  assert_non_null(strstr(s.message, "does not declare the block_scaled layout (input 0)"));
  /* Malformed quantization: an error, not an answer. */
  q.block_size = 0;
  assert_int_equal(bp_device_query_support(dev, &call, &s), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "block_size 0"));
  q.block_size = 32;
  w.quant = NULL;
  assert_int_equal(bp_device_query_support(dev, &call, &s), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "no quantization descriptor"));
  w.layout = BP_LAYOUT_STRIDED;
  w.bit_offset = 9;
  assert_int_equal(bp_device_query_support(dev, &call, &s), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "bit_offset 9"));
  /* Plain strided: the plugin's own answer. */
  w.bit_offset = 0;
  assert_int_equal(bp_device_query_support(dev, &call, &s), BP_OK);
  assert_int_equal(s.supported, 1);
  bp_context_release(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gate),
      cmocka_unit_test(test_gate_quantize_activation),
      cmocka_unit_test(test_history_is_current),
      cmocka_unit_test(test_trace_hooks),
      cmocka_unit_test(test_undeclared_layout_refused),
  };
  return cmocka_run_group_tests_name("abi_core", tests, NULL, NULL);
}
