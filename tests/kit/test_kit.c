/* Unit tests of the plugin kit's negotiation, answers, op metadata, call
 * checks and dlopen symbol tables (plugins/kit), linked directly. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bp_kit.h"
#include "bp_kit_host.h"
#include "bp_kit_host_pages.h"
#include "kit_test.h"

/* ---- host services: remember the last report --------------------------- */
static char g_last_msg[512];
static bp_status_t g_last_status;
static void host_report(void* ctx, bp_status_t st, const char* msg) {
  (void)ctx;
  g_last_status = st;
  snprintf(g_last_msg, sizeof g_last_msg, "%s", msg);
}
static const bp_host_services_t g_host = {.struct_size = sizeof(bp_host_services_t),
                                           .report = host_report};

static const bp_plugin_vtable_t k_vtable = {.struct_size = sizeof k_vtable};
static const bp_plugin_vtable_t* get_vtable(void) { return &k_vtable; }
static const bp_plugin_vtable_t* no_vtable(void) { return NULL; }
static const bp_kit_plugin_info_t k_info = {"kittest", "1.2.3", "acme", get_vtable};

static bp_status_t negotiate(const bp_kit_plugin_info_t* info, uint16_t major, uint16_t minor,
                             uint32_t reply_size, bp_negotiate_reply_t* reply) {
  bp_negotiate_request_t req = {.struct_size = sizeof req, .abi_major = major,
                                .abi_minor = minor, .host = &g_host};
  memset(reply, 0, sizeof *reply);
  reply->struct_size = reply_size;
  return bp_kit_negotiate(info, &req, reply);
}

/* ---- negotiation --------------------------------------------------------- */
static void test_negotiate_agrees_on_the_older_minor(void** state) {
  (void)state;
  bp_negotiate_reply_t r;
  assert_int_equal(negotiate(&k_info, BP_ABI_VERSION_MAJOR, 0, sizeof r, &r), BP_OK);
  assert_int_equal(r.abi_major, BP_ABI_VERSION_MAJOR);
  assert_int_equal(r.abi_minor, 0);
  assert_int_equal(bp_kit_abi_minor(), 0);
  assert_string_equal(r.name, "kittest");
  assert_string_equal(r.version, "1.2.3");
  assert_ptr_equal(r.vtable, &k_vtable);
  assert_ptr_equal(bp_kit_host(), &g_host);
  assert_string_equal(bp_kit_name(), "kittest");
  /* A newer host: the plugin's own minor. */
  assert_int_equal(negotiate(&k_info, BP_ABI_VERSION_MAJOR, 999, sizeof r, &r), BP_OK);
  assert_int_equal(r.abi_minor, BP_ABI_VERSION_MINOR);
}

static void test_negotiate_refuses_another_major(void** state) {
  (void)state;
  bp_negotiate_reply_t r;
  g_last_msg[0] = 0;
  assert_int_equal(negotiate(&k_info, BP_ABI_VERSION_MAJOR + 1, 0, sizeof r, &r),
                   BP_FAILED_PRECONDITION);
  assert_int_equal(g_last_status, BP_FAILED_PRECONDITION);
  assert_non_null(strstr(g_last_msg, "kittest: ABI major"));
  assert_null(r.vtable);
}

static void test_negotiate_rejects_short_structs_and_missing_tables(void** state) {
  (void)state;
  bp_negotiate_reply_t r;
  assert_int_equal(negotiate(&k_info, BP_ABI_VERSION_MAJOR, 0, BP_NEGOTIATE_REPLY_V1_SIZE - 8, &r),
                   BP_INVALID_ARGUMENT);
  assert_null(r.vtable);
  bp_kit_plugin_info_t broken = k_info;
  broken.get_vtable = no_vtable;
  assert_int_equal(negotiate(&broken, BP_ABI_VERSION_MAJOR, 0, sizeof r, &r), BP_INTERNAL);
  assert_non_null(strstr(g_last_msg, "no vtable"));
}

/* ---- answers ------------------------------------------------------------- */
typedef struct guarded {
  bp_support_t answer;
  unsigned char canary[64];
} guarded_t;

static void test_support_answer_respects_the_callers_size(void** state) {
  (void)state;
  guarded_t g;
  memset(&g, 0xab, sizeof g);
  g.answer.struct_size = 12; /* an old caller: supported and reason only */
  assert_int_equal(bp_kit_support_answer(&g.answer, BP_SUPPORT_DTYPE, "only %s", "f32"), BP_OK);
  assert_int_equal(g.answer.struct_size, 12);
  assert_int_equal(g.answer.supported, 0);
  assert_int_equal(g.answer.reason, BP_SUPPORT_DTYPE);
  const unsigned char* after = (const unsigned char*)&g.answer + 12;
  for (size_t i = 0; i < sizeof g - 12; i++) assert_int_equal(after[i], 0xab);

  memset(&g, 0xab, sizeof g);
  g.answer.struct_size = sizeof g.answer;
  bp_kit_support_answer(&g.answer, BP_SUPPORT_DTYPE, "only %s", "f32");
  assert_string_equal(g.answer.message, "only f32");
  assert_int_equal(g.answer.requires_contiguous, 0);
  for (size_t i = 0; i < sizeof g.canary; i++) assert_int_equal(g.canary[i], 0xab);

  bp_kit_support_answer(&g.answer, BP_SUPPORT_OK, "%s", "ignored");
  assert_int_equal(g.answer.supported, 1);
  assert_string_equal(g.answer.message, "");
}

static void test_copy_out_bounds(void** state) {
  (void)state;
  bp_cost_estimate_t src = {.struct_size = sizeof src, .confidence = 7, .time_ns = 5.0};
  unsigned char buf[sizeof src + 16];
  memset(buf, 0xcd, sizeof buf);
  uint32_t small = 8;
  memcpy(buf, &small, sizeof small);
  assert_int_equal(bp_kit_copy_out(buf, &src, sizeof src), 8);
  for (size_t i = 8; i < sizeof buf; i++) assert_int_equal(buf[i], 0xcd);
  uint32_t zero = 0; /* 0: the whole struct */
  memcpy(buf, &zero, sizeof zero);
  assert_int_equal(bp_kit_copy_out(buf, &src, sizeof src), sizeof src);
  bp_cost_estimate_t got;
  memcpy(&got, buf, sizeof got);
  assert_int_equal(got.struct_size, sizeof src);
  assert_true(got.time_ns == 5.0);
  for (size_t i = sizeof src; i < sizeof buf; i++) assert_int_equal(buf[i], 0xcd);
}

/* ---- op metadata from ops.def ---------------------------------------------- */
static void test_op_info_matches_ops_def(void** state) {
  (void)state;
  const bp_kit_op_info_t* add = bp_kit_op_info(BP_OP_add);
  assert_non_null(add);
  assert_string_equal(add->name, "add");
  assert_int_equal(add->num_inputs, 2);
  assert_int_equal(add->num_outputs, 1);
  assert_int_equal(add->attrs_size, sizeof(bp_binary_attrs_t));
  assert_int_equal(add->category, BP_OP_CATEGORY_BINARY);
  assert_int_equal(add->family, BP_OP_FAMILY_BINARY_EW);
  const bp_kit_op_info_t* relu = bp_kit_op_info(BP_OP_relu);
  assert_int_equal(relu->num_inputs, 1);
  assert_int_equal(relu->attrs_size, 0);
  assert_int_equal(bp_kit_op_info(BP_OP_cat)->num_inputs, -1);
  assert_null(bp_kit_op_info(0));
  assert_null(bp_kit_op_info(BP_OP_COUNT));
  assert_string_equal(bp_kit_op_name(BP_OP_COUNT + 5), "unknown");
  /* clamp_tensor(self, opt_min, opt_max) */
  assert_false(bp_kit_op_input_optional(BP_OP_clamp_tensor, 0));
  assert_true(bp_kit_op_input_optional(BP_OP_clamp_tensor, 1));
  assert_true(bp_kit_op_input_optional(BP_OP_clamp_tensor, 2));
  assert_false(bp_kit_op_input_optional(BP_OP_relu, 0));
  assert_true(bp_kit_op_input_optional(BP_OP_add, 1)); /* the Scalar form */
}

/* ---- call checks ------------------------------------------------------------ */
static bp_kit_host_budget_t g_budget = {.limit = UINT64_MAX};

static void test_call_check(void** state) {
  (void)state;
  struct bpp_device_s* dev = (struct bpp_device_s*)&g_budget; /* only its address is kept */
  bp_buffer_alloc_info_t info = {.struct_size = sizeof info, .size_bytes = 64,
                                 .memory_space = 0};
  bpp_buffer_t buf;
  assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &g_budget, &buf), BP_OK);
  bp_tensor_desc_t in[2], out;
  kit_test_desc_f32(&in[0], buf, 16);
  kit_test_desc_f32(&in[1], buf, 16);
  kit_test_desc_f32(&out, buf, 16);
  bp_binary_attrs_t attrs = {.struct_size = sizeof attrs};
  const bp_tensor_desc_t* inp[2] = {&in[0], &in[1]};
  const bp_tensor_desc_t* outp = &out;
  bp_op_call_t call = {.struct_size = sizeof call, .op_id = BP_OP_add, .num_inputs = 2,
                       .num_outputs = 1, .compute_dtype = BP_DTYPE_F32, .inputs = inp,
                       .outputs = &outp, .attrs = &attrs};
  assert_int_equal(bp_kit_call_check(&call, 8, bp_kit_host_buffer_size), BP_OK);
  in[1].dtype = BP_DTYPE_INVALID; /* the Scalar form: other absent */
  assert_int_equal(bp_kit_call_check(&call, 8, bp_kit_host_buffer_size), BP_OK);
  in[1].dtype = BP_DTYPE_F32;

  out.sizes[0] = 17; /* one element past the 64-byte buffer */
  assert_int_equal(bp_kit_call_check(&call, 8, bp_kit_host_buffer_size), BP_OUT_OF_RANGE);
  assert_non_null(strstr(bp_plugin_last_error(), "add: output 0"));
  out.sizes[0] = 16;

  call.num_inputs = 1;
  assert_int_equal(bp_kit_call_check(&call, 8, bp_kit_host_buffer_size), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_plugin_last_error(), "1 inputs given, expected 2"));
  call.num_inputs = 2;

  attrs.struct_size = 4;
  assert_int_equal(bp_kit_call_check(&call, 8, bp_kit_host_buffer_size), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_plugin_last_error(), "attribute struct_size 4"));
  attrs.struct_size = sizeof attrs;

  in[0].dtype = 200;
  assert_int_equal(bp_kit_call_check(&call, 8, bp_kit_host_buffer_size), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_plugin_last_error(), "unknown dtype 200"));
  in[0].dtype = BP_DTYPE_F32;

  call.op_id = BP_OP_COUNT;
  assert_int_equal(bp_kit_call_check(&call, 8, bp_kit_host_buffer_size), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_kit_call_check(NULL, 8, bp_kit_host_buffer_size), BP_INVALID_ARGUMENT);
  bp_kit_host_buffer_release(buf);
  assert_int_equal(g_budget.used, 0);
}

/* ---- host buffers -------------------------------------------------------- */
static void test_host_buffers(void** state) {
  (void)state;
  bp_kit_host_budget_t budget = {.limit = 1024, .hint = "raise it with budget=N"};
  struct bpp_device_s* dev = (struct bpp_device_s*)&budget;
  bp_buffer_alloc_info_t info = {.struct_size = sizeof info, .size_bytes = 100,
                                 .memory_space = 0};
  bpp_buffer_t b, c, other;
  assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &budget, &b), BP_OK);
  assert_int_equal(budget.used, 128);
  assert_int_equal((uintptr_t)b->ptr % 64, 0);
  void* p;
  assert_int_equal(bp_kit_host_buffer_map(b, 96, 4, &p), BP_OK);
  assert_ptr_equal(p, b->ptr + 96);
  assert_int_equal(bp_kit_host_buffer_map(b, 97, 4, &p), BP_OUT_OF_RANGE);
  assert_int_equal(bp_kit_host_buffer_map(b, UINT64_MAX, 2, &p), BP_OUT_OF_RANGE);
  /* The budget: 896 bytes left; 897 do not fit, 896 do. */
  info.size_bytes = 897;
  assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &budget, &other),
                   BP_RESOURCE_EXHAUSTED);
  assert_null(other);
  assert_non_null(strstr(bp_plugin_last_error(), "897 bytes requested, 896 available"));
  assert_non_null(strstr(bp_plugin_last_error(), "memory budget 1024 bytes, 128 in use; raise it"));
  info.size_bytes = 896;
  assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &budget, &c), BP_OK);
  assert_int_equal(budget.used, 1024);
  info.size_bytes = 1;
  assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &budget, &other),
                   BP_RESOURCE_EXHAUSTED);
  bp_kit_host_buffer_release(c);
  info.size_bytes = 0;
  assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &budget, &other),
                   BP_INVALID_ARGUMENT);
  info.size_bytes = 8;
  info.alignment = 3;
  assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &budget, &other),
                   BP_INVALID_ARGUMENT);
  info.alignment = 0;
  info.size_bytes = UINT64_MAX - 8;
  assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &budget, &other),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(budget.used, 128); /* failures keep nothing reserved */
  bp_kit_host_buffer_release(b);
  assert_int_equal(budget.used, 0);
}

/* Buffers from 4 MiB get their own mapping aligned to the 2 MiB huge page
 * (on Linux, outside sanitizer builds); the alignment asked for and every
 * byte stay usable, and smaller buffers come from the heap. */
static void test_large_host_buffers(void** state) {
  (void)state;
  bp_kit_host_budget_t budget = {.limit = UINT64_MAX};
  struct bpp_device_s* dev = (struct bpp_device_s*)&budget;
  const uint64_t sizes[] = {(4u << 20) + 100, (9u << 20) + 4096, 100};
  const uint64_t aligns[] = {64, 8u << 20, 64};
  for (int i = 0; i < 3; i++) {
    bp_buffer_alloc_info_t info = {.struct_size = sizeof info, .size_bytes = sizes[i],
                                   .alignment = aligns[i]};
    bpp_buffer_t b;
    assert_int_equal(bp_kit_host_buffer_allocate(dev, &info, 64, &budget, &b), BP_OK);
    assert_int_equal((uintptr_t)b->ptr % aligns[i], 0);
    if (b->mapped) assert_int_equal((uintptr_t)b->ptr % (2u << 20), 0);
    if (sizes[i] < BP_KIT_HOST_HUGE_MIN) assert_int_equal(b->mapped, 0);
    memset(b->ptr, 0x5A, sizes[i]);
    assert_int_equal(b->ptr[sizes[i] - 1], 0x5A);
    bp_kit_host_buffer_release(b);
  }
  assert_int_equal(budget.used, 0);
}

/* ---- dlopen symbol tables ---------------------------------------------------- */
typedef double (*cos_fn)(double);
typedef double (*sin_fn)(double);
typedef void (*absent_fn)(void);
#define M_SYMBOLS(REQ, OPT) REQ(cos_fn, cos) REQ(sin_fn, sin) OPT(absent_fn, bp_no_such_symbol)
typedef struct m_symbols {
  M_SYMBOLS(BP_KIT_SYMBOL_FIELD, BP_KIT_SYMBOL_FIELD)
} m_symbols_t;
#define BP_KIT_SYMBOL_TABLE m_symbols_t
static const bp_kit_symbol_t k_m_symbols[] = {
    M_SYMBOLS(BP_KIT_SYMBOL_REQUIRED, BP_KIT_SYMBOL_OPTIONAL)};
static const bp_kit_symbol_t k_m_required_absent[] = {
    M_SYMBOLS(BP_KIT_SYMBOL_REQUIRED, BP_KIT_SYMBOL_REQUIRED)};
#undef BP_KIT_SYMBOL_TABLE

static void test_library_open_tries_every_name(void** state) {
  (void)state;
  static const char* const names[] = {"libbp_no_such_library.so.9", "libm.so.6"};
  void* lib = NULL;
  char msg[512];
  assert_int_equal(bp_kit_library_open(names, 2, &lib, msg, sizeof msg), BP_OK);
  assert_non_null(lib);
  bp_kit_library_close(lib);
  static const char* const missing[] = {"libbp_no_such_a.so", "libbp_no_such_b.so"};
  assert_int_equal(bp_kit_library_open(missing, 2, &lib, msg, sizeof msg), BP_UNAVAILABLE);
  assert_null(lib);
  assert_non_null(strstr(msg, "libbp_no_such_a.so ("));
  assert_non_null(strstr(msg, "; libbp_no_such_b.so ("));
}

static void test_symbols_load(void** state) {
  (void)state;
  static const char* const names[] = {"libm.so.6"};
  void* lib;
  char msg[512];
  assert_int_equal(bp_kit_library_open(names, 1, &lib, msg, sizeof msg), BP_OK);
  m_symbols_t t;
  memset(&t, 0x5a, sizeof t);
  assert_int_equal(bp_kit_symbols_load(&t, k_m_symbols, BP_KIT_COUNT(k_m_symbols), bp_kit_dlsym,
                                       lib, "libm.so.6", msg, sizeof msg),
                   BP_OK);
  assert_true(t.cos(0.0) == 1.0);
  assert_true(t.sin(0.0) == 0.0);
  assert_null(t.bp_no_such_symbol); /* optional: left NULL */

  m_symbols_t u;
  memset(&u, 0x5a, sizeof u);
  assert_int_equal(bp_kit_symbols_load(&u, k_m_required_absent, BP_KIT_COUNT(k_m_required_absent),
                                       bp_kit_dlsym, lib, "libm.so.6", msg, sizeof msg),
                   BP_UNAVAILABLE);
  assert_non_null(strstr(msg, "libm.so.6 lacks bp_no_such_symbol ("));
  const unsigned char* raw = (const unsigned char*)&u; /* untouched on failure */
  for (size_t i = 0; i < sizeof u; i++) assert_int_equal(raw[i], 0x5a);
  bp_kit_library_close(lib);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_negotiate_agrees_on_the_older_minor),
      cmocka_unit_test(test_negotiate_refuses_another_major),
      cmocka_unit_test(test_negotiate_rejects_short_structs_and_missing_tables),
      cmocka_unit_test(test_support_answer_respects_the_callers_size),
      cmocka_unit_test(test_copy_out_bounds),
      cmocka_unit_test(test_op_info_matches_ops_def),
      cmocka_unit_test(test_call_check),
      cmocka_unit_test(test_host_buffers),
      cmocka_unit_test(test_large_host_buffers),
      cmocka_unit_test(test_library_open_tries_every_name),
      cmocka_unit_test(test_symbols_load),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
