/* Op table: every op's metadata, names, ids and operand layout. */
#include "ops_fixture.h"

static void test_info_every_op(void** state) {
  (void)state;
  for (uint32_t id = 1; id < BP_OP_COUNT; ++id) {
    bp_op_info_t info = {.struct_size = sizeof(info)};
    assert_ok(bp_op_get_info(id, &info));
    assert_int_equal(info.struct_size, sizeof(info));
    assert_int_equal(info.op_id, id);
    assert_non_null(info.name);
    assert_non_null(info.category);
    assert_non_null(info.rule);
    assert_non_null(info.aten);
    assert_int_equal(bp_op_from_name(info.name), id); /* names are unique */
    assert_true(info.num_outputs >= 1 && info.num_outputs <= 4);
    assert_true(info.has_list <= 1);
    uint32_t fixed = info.num_fixed_inputs_before + info.num_fixed_inputs_after;
    uint32_t names = 0;
    while (info.input_names[names] != NULL) ++names;
    assert_int_equal(names, fixed + info.has_list);
    for (uint32_t i = 0; i < fixed; ++i) {
      int opt = strncmp(info.input_names[i], "opt_", 4) == 0;
      assert_int_equal((info.optional_mask >> i) & 1u, (uint32_t)opt);
    }
    assert_int_equal(info.optional_mask >> fixed, 0);
    uint32_t outs = 0;
    while (info.output_names[outs] != NULL) ++outs;
    assert_int_equal(outs, info.num_outputs);
  }
}

static void test_info_layouts(void** state) {
  (void)state;
  bp_op_info_t info = {.struct_size = sizeof(info)};
  assert_ok(bp_op_get_info(BP_OP_add, &info));
  assert_string_equal(info.name, "add");
  assert_string_equal(info.category, "BINARY");
  assert_string_equal(info.rule, "binary_arith");
  assert_int_equal(info.num_fixed_inputs_before, 2);
  assert_int_equal(info.optional_mask, 0x2);
  assert_int_equal(info.attrs_size, sizeof(bp_binary_attrs_t));

  assert_ok(bp_op_get_info(BP_OP_abs, &info));
  assert_int_equal(info.attrs_size, 0); /* bp_no_attrs_t */

  assert_ok(bp_op_get_info(BP_OP_cat, &info));
  assert_int_equal(info.has_list, 1);
  assert_int_equal(info.num_fixed_inputs_before, 0);
  assert_string_equal(info.input_names[0], "tensors");

  assert_ok(bp_op_get_info(BP_OP_index_put, &info));
  assert_int_equal(info.num_fixed_inputs_before, 1);
  assert_int_equal(info.has_list, 1);
  assert_int_equal(info.num_fixed_inputs_after, 1);
  assert_string_equal(info.input_names[0], "self");
  assert_string_equal(info.input_names[1], "values");
  assert_string_equal(info.input_names[2], "indices");

  assert_ok(bp_op_get_info(BP_OP_fill, &info));
  assert_int_equal(info.num_fixed_inputs_before, 0);
  assert_null(info.input_names[0]);

  assert_ok(bp_op_get_info(BP_OP_embedding_bag, &info));
  assert_int_equal(info.num_outputs, 4);
  assert_int_equal(info.optional_mask, 0x8);
  assert_string_equal(info.output_names[3], "max_indices");
}

/* Every op has one kernel family; ids outside the table have none; the
 * elementwise families are the four elementwise ones. */
static void test_op_families(void** state) {
  (void)state;
  uint32_t seen[BP_OP_FAMILY_COUNT_] = {0};
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    uint32_t f = bp_op_family(op);
    assert_true(f > BP_OP_FAMILY_INVALID && f < BP_OP_FAMILY_COUNT_);
    seen[f]++;
  }
  for (uint32_t f = 1; f < BP_OP_FAMILY_COUNT_; ++f) assert_true(seen[f] > 0); /* none empty */
  assert_int_equal(bp_op_family(BP_OP_INVALID), BP_OP_FAMILY_INVALID);
  assert_int_equal(bp_op_family(BP_OP_COUNT), BP_OP_FAMILY_INVALID);
  assert_int_equal(bp_op_family(UINT32_MAX), BP_OP_FAMILY_INVALID);
  assert_int_equal(bp_op_family(BP_OP_abs), BP_OP_FAMILY_UNARY_EW);
  assert_int_equal(bp_op_family(BP_OP_mish), BP_OP_FAMILY_UNARY_EW);
  assert_int_equal(bp_op_family(BP_OP_add), BP_OP_FAMILY_BINARY_EW);
  assert_int_equal(bp_op_family(BP_OP_ge), BP_OP_FAMILY_COMPARE);
  assert_int_equal(bp_op_family(BP_OP_where), BP_OP_FAMILY_TERNARY_EW);
  assert_int_equal(bp_op_family(BP_OP_lerp), BP_OP_FAMILY_TERNARY_EW);
  assert_int_equal(bp_op_family(BP_OP_argmin), BP_OP_FAMILY_REDUCE);
  assert_int_equal(bp_op_family(BP_OP_logsumexp), BP_OP_FAMILY_REDUCE_EXT);
  assert_int_equal(bp_op_family(BP_OP_linear), BP_OP_FAMILY_MATMUL);
  assert_int_equal(bp_op_family(BP_OP_cat), BP_OP_FAMILY_COPY);
  assert_int_equal(bp_op_family(BP_OP_arange), BP_OP_FAMILY_CREATION);
  assert_true(bp_op_is_elementwise(BP_OP_clamp_tensor));
  assert_false(bp_op_is_elementwise(BP_OP_sum));
  assert_false(bp_op_is_elementwise(0));
}

static void test_info_errors(void** state) {
  (void)state;
  bp_op_info_t info = {.struct_size = sizeof(info)};
  assert_status(bp_op_get_info(BP_OP_INVALID, &info), BP_INVALID_ARGUMENT, "unknown op id 0");
  assert_status(bp_op_get_info(BP_OP_COUNT, &info), BP_INVALID_ARGUMENT, "unknown op id");
  assert_status(bp_op_get_info(BP_OP_add, NULL), BP_INVALID_ARGUMENT, "out_info");
  assert_int_equal(bp_op_from_name("no_such_op"), BP_OP_INVALID);
  assert_int_equal(bp_op_from_name(NULL), BP_OP_INVALID);
  assert_int_equal(bp_op_from_name("scaled_dot_product_attention"),
                   BP_OP_scaled_dot_product_attention);
}

int run_info_tests(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_info_every_op),
      cmocka_unit_test(test_info_layouts),
      cmocka_unit_test(test_info_errors),
      cmocka_unit_test(test_op_families),
  };
  return cmocka_run_group_tests_name("ops_info", tests, NULL, NULL);
}
