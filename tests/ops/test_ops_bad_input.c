/* Bad input to bp_op_run, swept over EVERY op id: NULL stream and operands,
 * wrong operand counts, every dtype in every input slot, shapes that do not
 * broadcast, outputs of the wrong shape or dtype, outputs overlapping
 * inputs, operands on another device, broken attribute structs, and tensor
 * views with overflowing sizes or strides.
 *
 * Every case must return a non-OK status of the expected kind with a
 * non-empty message, and leave a caller-provided output's bytes unchanged
 * (a failed call writes nothing). Runs on cpu:0 (kernels exist, so a
 * missed check would really run) with fake_host_a:0 as "another device". */
#include "ops_fixture.h"

#include <stdio.h>
#include <stdlib.h>

/* Attribute struct kinds, and each op's kind, from the op table. */
enum attrs_kind {
#define KIND(t) K_##t,
  BP_ATTRS_TYPES(KIND)
#undef KIND
};
static const int g_op_attrs[BP_OP_COUNT] = {
#define BP_OP(id, name, cat, fam, ins, outs, attrs, rule, aten) [id] = K_##attrs,
#include "backplane/ops.def"
#undef BP_OP
};
static const uint32_t g_attrs_size[] = {
#define SIZE(t) sizeof(t),
    BP_ATTRS_TYPES(SIZE)
#undef SIZE
};

static bp_device_t* g_dev;   /* where the stream runs */
static bp_device_t* g_other; /* another device */
static bp_stream_t* g_stream;

#define ALLOWED_MASK                                                                \
  ((1u << BP_INVALID_ARGUMENT) | (1u << BP_OUT_OF_RANGE) | (1u << BP_UNIMPLEMENTED) | \
   (1u << BP_UNSUPPORTED) | (1u << BP_RESOURCE_EXHAUSTED))
/* A valid call a device may still refuse. */
#define REFUSED_MASK ((1u << BP_UNIMPLEMENTED) | (1u << BP_UNSUPPORTED))

static int group_setup(void** state) {
  (void)state;
  g_dev = g_cpu != NULL ? g_cpu : g_fake;
  g_other = g_cpu != NULL ? g_fake : g_fake1;
  return bp_stream_create(g_dev, NULL, &g_stream) == BP_OK ? 0 : -1;
}

static int group_teardown(void** state) {
  (void)state;
  bp_stream_release(g_stream);
  return 0;
}

/* ---- operands ------------------------------------------------------------ */

/* Sets every byte of `buf` to `fill`. */
static void fill_buffer(bp_buffer_t* buf, uint8_t fill) {
  bp_device_t* dev = bp_buffer_device(buf);
  uint64_t n = bp_buffer_size(buf);
  void* host = malloc(n);
  assert_non_null(host);
  memset(host, fill, n);
  bp_stream_t* s = g_stream;
  bp_stream_t* own = NULL;
  if (dev != g_dev) {
    assert_ok(bp_stream_create(dev, NULL, &own));
    s = own;
  }
  assert_ok(bp_copy_host_to_buffer(s, host, buf, 0, n));
  assert_ok(bp_stream_synchronize(s));
  if (own) bp_stream_release(own);
  free(host);
}

/* A tensor on `dev` with every byte set to `fill`. */
static bp_tensor_t* filled(bp_device_t* dev, uint32_t dtype, uint32_t rank, const int64_t* sizes,
                           uint8_t fill) {
  bp_tensor_t* t = ops_tensor(dev, dtype, rank, sizes);
  fill_buffer(bp_tensor_buffer(t), fill);
  return t;
}

/* The dtype a default operand named `name` gets. */
static uint32_t default_dtype(const char* name) {
  if (strstr(name, "ind") || strstr(name, "offsets") || strstr(name, "target")) return BP_DTYPE_I64;
  if (!strcmp(name, "mask") || !strcmp(name, "condition")) return BP_DTYPE_BOOL;
  return BP_DTYPE_F32;
}

typedef struct op_case {
  bp_op_info_t info;
  uint32_t fixed;                   /* fixed inputs */
  uint32_t num_inputs;              /* fixed + 2 list entries when there is a list */
  const bp_tensor_t* in[8];
  uint64_t attrs[512];              /* storage for the attribute struct */
  const void* attrs_ptr;
  int valid;                        /* bp_op_infer accepts in/attrs */
  bp_tensor_desc_t out[4];          /* inferred outputs when valid */
} op_case_t;

static const char* input_name(const op_case_t* c, uint32_t i) {
  if (c->info.has_list && i >= c->info.num_fixed_inputs_before &&
      i < c->num_inputs - c->info.num_fixed_inputs_after)
    return c->info.input_names[c->fixed]; /* the list's name */
  uint32_t fi = i < c->info.num_fixed_inputs_before
                    ? i
                    : c->info.num_fixed_inputs_before + (i - (c->num_inputs - c->info.num_fixed_inputs_after));
  return c->info.input_names[fi];
}

static int input_optional(const op_case_t* c, uint32_t i) {
  if (c->info.has_list && i >= c->info.num_fixed_inputs_before &&
      i < c->num_inputs - c->info.num_fixed_inputs_after)
    /* index and index_put: a NULL index entry is a full slice. */
    return c->info.op_id == BP_OP_index || c->info.op_id == BP_OP_index_put;
  uint32_t fi = i < c->info.num_fixed_inputs_before
                    ? i
                    : c->info.num_fixed_inputs_before + (i - (c->num_inputs - c->info.num_fixed_inputs_after));
  return (c->info.optional_mask >> fi) & 1u;
}

/* Attribute overrides an op needs to have any valid call at all. */
static void set_attrs(op_case_t* c, uint32_t op, int64_t last_dim) {
  memset(c->attrs, 0, sizeof(c->attrs));
  c->attrs_ptr = NULL; /* defaults */
  void* a = c->attrs;
#define SET(type, ...)                                   \
  do {                                                   \
    type v_ = {.struct_size = sizeof(type), __VA_ARGS__}; \
    memcpy(a, &v_, sizeof(v_));                          \
    c->attrs_ptr = a;                                    \
  } while (0)
  switch (op) {
    case BP_OP_topk: SET(bp_topk_attrs_t, .dim = -1, .k = 1, .largest = 1, .sorted = 1); break;
    case BP_OP_avg_pool:
    case BP_OP_max_pool_with_indices:
    case BP_OP_avg_pool2d_backward:
    case BP_OP_max_pool2d_with_indices_backward:
      SET(bp_pool_attrs_t, .spatial_dims = 2, .kernel = {1, 1}, .stride = {1, 1}, .has_stride = 1,
          .dilation = {1, 1, 1}, .count_include_pad = 1);
      break;
    case BP_OP_adaptive_avg_pool:
      SET(bp_adaptive_pool_attrs_t, .spatial_dims = 2, .output_size = {1, 1});
      break;
    case BP_OP_convolution:
    case BP_OP_convolution_backward:
      SET(bp_conv_attrs_t, .spatial_dims = 2, .stride = {1, 1, 1}, .dilation = {1, 1, 1},
          .groups = 1, .output_mask = 7);
      break;
    case BP_OP_layer_norm:
    case BP_OP_layer_norm_backward:
      SET(bp_layer_norm_attrs_t, .normalized_rank = 1, .normalized_shape = {last_dim}, .eps = 1e-5,
          .output_mask = 7);
      break;
    case BP_OP_to_copy: SET(bp_cast_attrs_t, .dtype = BP_DTYPE_F64); break;
    case BP_OP_upsample_bilinear2d:
    case BP_OP_upsample_nearest2d:
      SET(bp_upsample_attrs_t, .output_size = {2, 2}, .has_output_size = 1);
      break;
    case BP_OP_fill: SET(bp_fill_attrs_t, .value = {.kind = BP_SCALAR_FLOAT, .v.f = 1}); break;
    case BP_OP_arange:
      SET(bp_arange_attrs_t, .start = {.kind = BP_SCALAR_INT, .v.i = 0},
          .end = {.kind = BP_SCALAR_INT, .v.i = 4}, .step = {.kind = BP_SCALAR_INT, .v.i = 1});
      break;
    default: break;
  }
#undef SET
}

/* Candidate operand shapes for the search of a valid call. */
static const int64_t g_shapes[][4] = {{3, 3, 0, 0}, {2, 3, 3, 0}, {2, 2, 4, 4}, {4, 0, 0, 0}};
static const uint32_t g_ranks[] = {2, 3, 4, 1};

/* Builds operands for `op`: shape candidate `s`, optional inputs absent. */
static void build(op_case_t* c, uint32_t op, int s, bp_device_t* dev) {
  c->fixed = c->info.num_fixed_inputs_before + c->info.num_fixed_inputs_after;
  c->num_inputs = c->fixed + (c->info.has_list ? 2 : 0);
  for (uint32_t i = 0; i < c->num_inputs; ++i) {
    if (input_optional(c, i)) {
      c->in[i] = NULL;
      continue;
    }
    c->in[i] = filled(dev, default_dtype(input_name(c, i)), g_ranks[s], g_shapes[s], 0);
  }
  set_attrs(c, op, g_shapes[s][g_ranks[s] - 1]);
}

/* Finds operands bp_op_infer accepts; c->valid says whether it found any.
 * Creation ops get an f32 [2, 3] output hint. */
static void find_valid(op_case_t* c, uint32_t op) {
  memset(c, 0, sizeof(*c));
  c->info.struct_size = sizeof(c->info);
  assert_ok(bp_op_get_info(op, &c->info));
  for (int s = 0; s < (int)(sizeof(g_ranks) / sizeof(g_ranks[0])); ++s) {
    build(c, op, s, g_dev);
    memset(c->out, 0, sizeof(c->out));
    c->out[0].struct_size = sizeof(c->out[0]);
    c->out[0].dtype = BP_DTYPE_F32;
    c->out[0].rank = 2;
    c->out[0].sizes[0] = 2;
    c->out[0].sizes[1] = 3;
    if (ops_infer(op, c->in, c->num_inputs, c->attrs_ptr, c->out, c->info.num_outputs) ==
        BP_OK) {
      c->valid = 1;
      return;
    }
  }
  build(c, op, 0, g_dev);
}

/* ---- the check ----------------------------------------------------------- */

typedef struct snapshot {
  uint8_t* bytes[5];
  uint64_t size[5];
} snapshot_t;

static void read_buffer(bp_buffer_t* buf, uint8_t** out, uint64_t* size) {
  *size = bp_buffer_size(buf);
  *out = malloc(*size);
  assert_non_null(*out);
  bp_device_t* dev = bp_buffer_device(buf);
  bp_stream_t* s = g_stream;
  bp_stream_t* own = NULL;
  if (dev != g_dev) {
    assert_ok(bp_stream_create(dev, NULL, &own));
    s = own;
  }
  assert_ok(bp_copy_buffer_to_host(s, buf, 0, *out, *size));
  assert_ok(bp_stream_synchronize(s));
  if (own) bp_stream_release(own);
}

static uint32_t g_cases; /* checked cases */

/* Runs the call, which must fail with a code in `allowed` (a bit mask of
 * codes; 0 = the default set) and a message, leaving every given output's
 * bytes and every NULL output slot as they were. `allow_ok`: the call may
 * also succeed (then what it allocated is released). */
static bp_status_t check_run(const char* what, uint32_t op, bp_stream_t* stream,
                             const bp_tensor_t* const* in, uint32_t num_in, const void* attrs,
                             bp_tensor_t** out, uint32_t num_out, uint32_t allowed, int allow_ok) {
  snapshot_t snap;
  memset(&snap, 0, sizeof(snap));
  bp_tensor_t* before[5] = {NULL};
  uint32_t n_snap = out != NULL ? (num_out < 5 ? num_out : 5) : 0;
  for (uint32_t k = 0; k < n_snap; ++k) {
    before[k] = out[k];
    if (out[k]) read_buffer(bp_tensor_buffer(out[k]), &snap.bytes[k], &snap.size[k]);
  }
  bp_status_t st = bp_op_run(stream, op, in, num_in, attrs, out, num_out);
  ++g_cases;
  bp_op_info_t info = {.struct_size = sizeof(info)};
  const char* op_name = bp_op_get_info(op, &info) == BP_OK ? info.name : "?";
  if (st == BP_OK) {
    if (!allow_ok) fail_msg("op %u '%s', %s: succeeded, expected an error", op, op_name, what);
    assert_ok(bp_stream_synchronize(stream));
    for (uint32_t k = 0; k < n_snap; ++k) {
      if (before[k] == NULL && out[k] != NULL) bp_tensor_release(out[k]);
      out[k] = before[k];
      free(snap.bytes[k]);
    }
    return st;
  }
  uint32_t mask = allowed ? allowed : ALLOWED_MASK;
  if ((uint32_t)st >= 32 || !(mask & (1u << st)))
    fail_msg("op %u '%s', %s: got %s \"%s\"", op, op_name, what, bp_status_name(st),
             bp_status_message());
  if (bp_status_message()[0] == '\0')
    fail_msg("op %u '%s', %s: %s with an empty message", op, op_name, what, bp_status_name(st));
  for (uint32_t k = 0; k < n_snap; ++k) {
    if (out[k] != before[k])
      fail_msg("op %u '%s', %s: output slot %u changed on failure", op, op_name, what, k);
    if (before[k]) {
      uint8_t* after;
      uint64_t size;
      read_buffer(bp_tensor_buffer(before[k]), &after, &size);
      if (size != snap.size[k] || memcmp(after, snap.bytes[k], size) != 0)
        fail_msg("op %u '%s', %s: output %u was written by a failed call", op, op_name, what, k);
      free(after);
      free(snap.bytes[k]);
    }
  }
  return st;
}

#define INVALID (1u << BP_INVALID_ARGUMENT)

/* Given outputs of the inferred dtype and shape, bytes 0x5A. */
static void make_outputs(const op_case_t* c, bp_device_t* dev, bp_tensor_t** out) {
  for (uint32_t k = 0; k < c->info.num_outputs; ++k)
    out[k] = filled(dev, c->out[k].dtype, c->out[k].rank, c->out[k].sizes, 0x5A);
}

/* find_valid, then for a valid call its outputs in given[0..3] (NULL
 * otherwise). Everything is released by ops_release_all. */
static void find_valid_with_outputs(op_case_t* c, uint32_t op, bp_tensor_t* given[4]) {
  memset(given, 0, 4 * sizeof(given[0]));
  find_valid(c, op);
  if (c->valid) make_outputs(c, g_dev, given);
}

/* ---- families without a valid call ---------------------------------------- */

static void test_null_stream_and_op_ids(void** state) {
  (void)state;
  bp_tensor_t* out[4] = {NULL};
  const bp_tensor_t* in[8] = {NULL};
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    op_case_t c;
    bp_tensor_t* given[4];
    find_valid_with_outputs(&c, op, given);
    check_run("NULL stream", op, NULL, c.in, c.num_inputs, c.attrs_ptr, given, c.info.num_outputs,
              INVALID, 0);
    check_run("NULL stream, NULL everything", op, NULL, NULL, 0, NULL, NULL, 0, INVALID, 0);
    ops_release_all(NULL);
  }
  static const uint32_t bad_ids[] = {BP_OP_INVALID, BP_OP_COUNT, BP_OP_COUNT + 1, 0x7fffffffu,
                                     0xffffffffu};
  for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); ++i)
    check_run("unknown op id", bad_ids[i], g_stream, in, 1, NULL, out, 1, INVALID, 0);
}

static void test_operand_counts(void** state) {
  (void)state;
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    op_case_t c;
    find_valid(&c, op);
    bp_tensor_t* out[6] = {NULL};
    const bp_tensor_t* in[10] = {NULL};
    for (uint32_t i = 0; i < c.num_inputs; ++i) in[i] = c.in[i];
    in[c.num_inputs] = c.in[0];
    if (!c.info.has_list)
      check_run("one input too many", op, g_stream, in, c.num_inputs + 1, c.attrs_ptr, out,
                c.info.num_outputs, INVALID, 0);
    if (c.fixed > 0) {
      check_run("one input too few", op, g_stream, in, c.fixed - 1, c.attrs_ptr, out,
                c.info.num_outputs, INVALID, 0);
      check_run("inputs NULL", op, g_stream, NULL, c.num_inputs, c.attrs_ptr, out,
                c.info.num_outputs, INVALID, 0);
    }
    check_run("no outputs", op, g_stream, in, c.num_inputs, c.attrs_ptr, out, 0, INVALID, 0);
    check_run("one output too many", op, g_stream, in, c.num_inputs, c.attrs_ptr, out,
              c.info.num_outputs + 1, INVALID, 0);
    check_run("five outputs", op, g_stream, in, c.num_inputs, c.attrs_ptr, out, 5,
              c.info.num_outputs == 5 ? 0 : INVALID, 0);
    check_run("outputs NULL", op, g_stream, in, c.num_inputs, c.attrs_ptr, NULL,
              c.info.num_outputs, INVALID, 0);
    ops_release_all(NULL);
  }
}

static void test_null_required_inputs(void** state) {
  (void)state;
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    op_case_t c;
    bp_tensor_t* given[4];
    find_valid_with_outputs(&c, op, given);
    for (uint32_t i = 0; i < c.num_inputs; ++i) {
      if (input_optional(&c, i)) continue;
      /* `self` of a binary op may be NULL with BP_BINARY_SELF_IS_SCALAR;
       * without it (the default) it is required. */
      const bp_tensor_t* in[8];
      memcpy(in, c.in, sizeof(in));
      in[i] = NULL;
      char what[96];
      snprintf(what, sizeof(what), "input '%s' NULL", input_name(&c, i));
      check_run(what, op, g_stream, in, c.num_inputs, c.attrs_ptr, given, c.info.num_outputs,
                INVALID, 0);
    }
    ops_release_all(NULL);
  }
}

static void test_attrs_struct_size(void** state) {
  (void)state;
  static const uint32_t sizes[] = {0, 1, 2, 3, 4097, 0x7fffffffu, 0xffffffffu};
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    op_case_t c;
    bp_tensor_t* given[4];
    find_valid_with_outputs(&c, op, given);
    uint64_t attrs[512];
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
      memcpy(attrs, c.attrs, sizeof(attrs));
      if (!c.attrs_ptr) memset(attrs, 0, sizeof(attrs));
      memcpy(attrs, &sizes[s], sizeof(uint32_t));
      char what[64];
      snprintf(what, sizeof(what), "attrs struct_size %u", sizes[s]);
      check_run(what, op, g_stream, c.in, c.num_inputs, attrs, given, c.info.num_outputs,
                INVALID, 0);
    }
    ops_release_all(NULL);
  }
}

/* Out-of-range enum and count fields, by attribute struct. */
typedef struct bad_field {
  int kind;
  size_t offset;
  uint32_t value;
  const char* name;
} bad_field_t;

#define BAD(t, field, v) {K_##t, offsetof(t, field), (uint32_t)(v), #t "." #field}
static const bad_field_t g_bad_fields[] = {
    BAD(bp_gelu_attrs_t, approximate, 2),
    BAD(bp_gelu_attrs_t, approximate, 0xffffffffu),
    BAD(bp_binary_attrs_t, flags, 4),
    BAD(bp_binary_attrs_t, flags, 3),
    BAD(bp_binary_attrs_t, rounding_mode, 3),
    BAD(bp_binary_attrs_t, scalar.kind, 4),
    BAD(bp_binary_attrs_t, alpha.kind, 0x80000000u),
    BAD(bp_reduce_attrs_t, flags, 4),
    BAD(bp_reduce_attrs_t, num_dims, -1),
    BAD(bp_reduce_attrs_t, num_dims, BP_MAX_RANK + 1),
    BAD(bp_reduce_attrs_t, dtype, BP_DTYPE_COUNT_),
    BAD(bp_reduce_attrs_t, dtype, 0xffffffffu),
    BAD(bp_dim_attrs_t, dtype, 99),
    BAD(bp_dims_attrs_t, num_dims, BP_MAX_RANK + 1),
    BAD(bp_dims_attrs_t, num_dims, 0xffffffffu),
    BAD(bp_linear_attrs_t, activation, BP_ACTIVATION_TANH + 1),
    BAD(bp_conv_attrs_t, spatial_dims, 4),
    BAD(bp_pool_attrs_t, spatial_dims, 0xffffffffu),
    BAD(bp_adaptive_pool_attrs_t, spatial_dims, 7),
    BAD(bp_grid_sampler_attrs_t, interpolation, 3),
    BAD(bp_grid_sampler_attrs_t, padding_mode, 3),
    BAD(bp_layer_norm_attrs_t, normalized_rank, BP_MAX_RANK + 1),
    BAD(bp_rms_norm_attrs_t, normalized_rank, 0xffffffffu),
    BAD(bp_embedding_attrs_t, mode, 3),
    BAD(bp_scatter_attrs_t, reduce, 6),
    BAD(bp_scatter_attrs_t, value.kind, 9),
    BAD(bp_cast_attrs_t, dtype, 0),
    BAD(bp_cast_attrs_t, dtype, BP_DTYPE_COUNT_),
    BAD(bp_pad_attrs_t, mode, 4),
    BAD(bp_pad_attrs_t, num_pads, 3),
    BAD(bp_pad_attrs_t, num_pads, 2 * BP_MAX_RANK + 2),
    BAD(bp_fill_attrs_t, value.kind, 4),
    BAD(bp_arange_attrs_t, step.kind, 5),
    BAD(bp_fft_attrs_t, normalization, 3),
    BAD(bp_fft_attrs_t, num_dims, BP_MAX_RANK + 1),
    BAD(bp_cross_entropy_attrs_t, reduction, 3),
    BAD(bp_clamp_attrs_t, min.kind, 4),
};
#undef BAD

static void test_attrs_bad_fields(void** state) {
  (void)state;
  uint32_t hits = 0;
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    op_case_t c;
    bp_tensor_t* given[4];
    find_valid_with_outputs(&c, op, given);
    for (size_t f = 0; f < sizeof(g_bad_fields) / sizeof(g_bad_fields[0]); ++f) {
      const bad_field_t* b = &g_bad_fields[f];
      if (b->kind != g_op_attrs[op]) continue;
      uint64_t attrs[512];
      memcpy(attrs, c.attrs, sizeof(attrs));
      if (!c.attrs_ptr) {
        /* Defaults for every field: zeroes are not always the defaults, so
         * start from a struct that is valid apart from the bad field. */
        memset(attrs, 0, sizeof(attrs));
        uint32_t size = g_attrs_size[b->kind];
        memcpy(attrs, &size, sizeof(size));
      }
      memcpy((char*)attrs + b->offset, &b->value, sizeof(uint32_t));
      char what[96];
      snprintf(what, sizeof(what), "%s = %u", b->name, b->value);
      check_run(what, op, g_stream, c.in, c.num_inputs, attrs, given, c.info.num_outputs, INVALID,
                0);
      ++hits;
    }
    ops_release_all(NULL);
  }
  assert_true(hits >= sizeof(g_bad_fields) / sizeof(g_bad_fields[0]));
}

static void test_operands_on_another_device(void** state) {
  (void)state;
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    op_case_t c;
    bp_tensor_t* given[4];
    find_valid_with_outputs(&c, op, given);
    for (uint32_t i = 0; i < c.num_inputs; ++i) {
      if (c.in[i] == NULL) continue;
      const bp_tensor_t* in[8];
      memcpy(in, c.in, sizeof(in));
      in[i] = filled(g_other, bp_tensor_dtype(c.in[i]), bp_tensor_rank(c.in[i]),
                     bp_tensor_sizes(c.in[i]), 0);
      char what[96];
      snprintf(what, sizeof(what), "input '%s' on another device", input_name(&c, i));
      check_run(what, op, g_stream, in, c.num_inputs, c.attrs_ptr, given, c.info.num_outputs,
                INVALID, 0);
    }
    if (c.valid) {
      for (uint32_t k = 0; k < c.info.num_outputs; ++k) {
        bp_tensor_t* out[4];
        memcpy(out, given, sizeof(out));
        out[k] = filled(g_other, c.out[k].dtype, c.out[k].rank, c.out[k].sizes, 0x33);
        check_run("output on another device", op, g_stream, c.in, c.num_inputs, c.attrs_ptr, out,
                  c.info.num_outputs, INVALID, 0);
      }
    }
    ops_release_all(NULL);
  }
}

/* Every dtype in every input slot: where bp_op_infer refuses the operands,
 * bp_op_run refuses them the same way; where it accepts, the run may work
 * or report a missing kernel. Failures never touch the outputs. */
static void test_every_dtype_in_every_slot(void** state) {
  (void)state;
  uint32_t refused = 0;
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    op_case_t c;
    find_valid(&c, op);
    if (!c.valid) continue;
    for (uint32_t i = 0; i < c.num_inputs; ++i) {
      if (c.in[i] == NULL) continue;
      for (uint32_t dt = 1; dt < BP_DTYPE_COUNT_; ++dt) {
        const bp_tensor_t* in[8];
        memcpy(in, c.in, sizeof(in));
        in[i] = filled(g_dev, dt, bp_tensor_rank(c.in[i]), bp_tensor_sizes(c.in[i]), 0);
        bp_tensor_desc_t want[4];
        memcpy(want, c.out, sizeof(want));
        bp_status_t inferred = ops_infer(op, in, c.num_inputs, c.attrs_ptr, want,
                                           c.info.num_outputs);
        /* Given outputs: the inferred ones when inference works, else the
         * baseline's (they must stay untouched either way). */
        bp_tensor_t* out[4] = {NULL};
        const bp_tensor_desc_t* d = inferred == BP_OK ? want : c.out;
        for (uint32_t k = 0; k < c.info.num_outputs; ++k)
          out[k] = filled(g_dev, d[k].dtype, d[k].rank, d[k].sizes, 0x5A);
        char what[96];
        snprintf(what, sizeof(what), "input '%s' as %s", input_name(&c, i), bp_dtype_name(dt));
        uint32_t allowed = inferred == BP_OK ? REFUSED_MASK : (1u << inferred);
        bp_status_t st = check_run(what, op, g_stream, in, c.num_inputs, c.attrs_ptr, out,
                                   c.info.num_outputs, allowed, inferred == BP_OK);
        if (st != BP_OK) ++refused;
        ops_release_all(NULL);
        find_valid(&c, op);
      }
    }
    ops_release_all(NULL);
  }
  assert_true(refused > 0);
}

/* Outputs of the wrong shape or dtype; outputs partially overlapping an
 * input; shapes that do not broadcast. */
static void test_wrong_outputs_and_shapes(void** state) {
  (void)state;
  uint32_t valid_ops = 0;
  for (uint32_t op = 1; op < BP_OP_COUNT; ++op) {
    op_case_t c;
    find_valid(&c, op);
    if (!c.valid) continue;
    ++valid_ops;
    /* Creation ops (no inputs) take shape and dtype from the given output. */
    for (uint32_t k = 0; c.num_inputs > 0 && k < c.info.num_outputs; ++k) {
      bp_tensor_t* out[4];
      make_outputs(&c, g_dev, out);
      int64_t odd[3] = {7, 1, 5};
      out[k] = filled(g_dev, c.out[k].dtype, 3, odd, 0x11);
      check_run("output of the wrong shape", op, g_stream, c.in, c.num_inputs, c.attrs_ptr, out,
                c.info.num_outputs, INVALID, 0);
      make_outputs(&c, g_dev, out);
      uint32_t other = c.out[k].dtype == BP_DTYPE_I16 ? BP_DTYPE_U8 : BP_DTYPE_I16;
      out[k] = filled(g_dev, other, c.out[k].rank, c.out[k].sizes, 0x22);
      check_run("output of the wrong dtype", op, g_stream, c.in, c.num_inputs, c.attrs_ptr, out,
                c.info.num_outputs, INVALID, 0);
      /* An output one element into input 0's buffer: a partial overlap. */
      if (c.num_inputs > 0 && c.in[0] != NULL) {
        bp_tensor_t* in0 = (bp_tensor_t*)c.in[0];
        int64_t numel = 1;
        for (uint32_t d = 0; d < c.out[k].rank; ++d) numel *= c.out[k].sizes[d];
        uint64_t esz = bp_dtype_size(c.out[k].dtype);
        uint64_t need = esz * ((uint64_t)numel + 1);
        bp_buffer_t* buf = NULL;
        assert_ok(bp_buffer_allocate(g_dev, BP_MEMORY_DEVICE,
                                     need + (uint64_t)bp_tensor_numel(in0) * 8 + 64, &buf));
        fill_buffer(buf, 0);
        bp_tensor_t* shared_in = NULL;
        assert_ok(bp_tensor_from_buffer(buf, bp_tensor_dtype(in0), bp_tensor_rank(in0),
                                        bp_tensor_sizes(in0), NULL, 0, &shared_in));
        ops_track(shared_in);
        bp_tensor_t* over = NULL;
        assert_ok(bp_tensor_from_buffer(buf, c.out[k].dtype, c.out[k].rank, c.out[k].sizes, NULL,
                                        esz, &over));
        ops_track(over);
        bp_buffer_release(buf);
        if (numel > 0 && bp_tensor_numel(in0) * (int64_t)bp_dtype_size(bp_tensor_dtype(in0)) >
                             (int64_t)esz) {
          const bp_tensor_t* in[8];
          memcpy(in, c.in, sizeof(in));
          in[0] = shared_in;
          make_outputs(&c, g_dev, out);
          out[k] = over;
          check_run("output partially overlapping input 0", op, g_stream, in, c.num_inputs,
                    c.attrs_ptr, out, c.info.num_outputs, INVALID, 0);
        }
      }
    }
    /* Broadcasting failure: binary and ternary elementwise ops. */
    if ((!strcmp(c.info.category, "BINARY") || !strcmp(c.info.category, "LOGICAL")) &&
        c.num_inputs >= 2 && c.in[1] != NULL) {
      const bp_tensor_t* in[8];
      memcpy(in, c.in, sizeof(in));
      int64_t a[2] = {5, 7}, b[2] = {5, 6};
      in[0] = filled(g_dev, bp_tensor_dtype(c.in[0]), 2, a, 0);
      in[1] = filled(g_dev, bp_tensor_dtype(c.in[1]), 2, b, 0);
      bp_tensor_t* out[4] = {NULL};
      check_run("operands that do not broadcast", op, g_stream, in, c.num_inputs, c.attrs_ptr,
                out, c.info.num_outputs, INVALID, 0);
    }
    /* Rank mismatch: every input one rank higher than the baseline, with a
     * size the others lack. May be valid (elementwise); never a crash. */
    for (uint32_t i = 0; i < c.num_inputs; ++i) {
      if (c.in[i] == NULL) continue;
      const bp_tensor_t* in[8];
      memcpy(in, c.in, sizeof(in));
      int64_t sizes[BP_MAX_RANK];
      uint32_t r = bp_tensor_rank(c.in[i]);
      sizes[0] = 5;
      memcpy(sizes + 1, bp_tensor_sizes(c.in[i]), sizeof(int64_t) * r);
      in[i] = filled(g_dev, bp_tensor_dtype(c.in[i]), r + 1, sizes, 0);
      bp_tensor_desc_t want[4];
      memcpy(want, c.out, sizeof(want));
      bp_status_t inferred = ops_infer(op, in, c.num_inputs, c.attrs_ptr, want,
                                         c.info.num_outputs);
      bp_tensor_t* out[4];
      make_outputs(&c, g_dev, out); /* the baseline's shape: wrong if inference changed it */
      int same = inferred == BP_OK;
      for (uint32_t k = 0; same && k < c.info.num_outputs; ++k)
        same = want[k].rank == c.out[k].rank && want[k].dtype == c.out[k].dtype &&
               !memcmp(want[k].sizes, c.out[k].sizes, sizeof(int64_t) * want[k].rank);
      check_run("rank mismatch", op, g_stream, in, c.num_inputs, c.attrs_ptr, out,
                c.info.num_outputs, same ? REFUSED_MASK : INVALID, same);
    }
    ops_release_all(NULL);
  }
  print_message("%u of %u ops have a valid baseline call\n", valid_ops, BP_OP_COUNT - 1);
  assert_true(valid_ops > (BP_OP_COUNT - 1) / 2);
}

/* Views that would reach outside their buffer or overflow cannot be made;
 * views that fit but start at the buffer's end are refused by bp_op_run. */
static void test_overflowing_views(void** state) {
  (void)state;
  bp_buffer_t* buf = NULL;
  assert_ok(bp_buffer_allocate(g_dev, 0, 64, &buf));
  static const struct {
    uint32_t rank;
    int64_t sizes[3], strides[3];
    uint64_t offset;
    uint32_t dtype;
  } views[] = {
      {2, {INT64_MAX, 2}, {1, 1}, 0, BP_DTYPE_F32},
      {2, {INT64_MAX / 2, 3}, {0, 0}, 0, BP_DTYPE_F32},
      {1, {2}, {INT64_MAX}, 0, BP_DTYPE_F32},
      {3, {1 << 22, 1 << 22, 1 << 22}, {1, 1, 1}, 0, BP_DTYPE_F64},
      {1, {4}, {1}, UINT64_MAX - 3, BP_DTYPE_F32},
      {1, {4}, {1}, 64, BP_DTYPE_F32},
      {1, {17}, {1}, 0, BP_DTYPE_F32},
      {1, {-1}, {1}, 0, BP_DTYPE_F32},
      {1, {4}, {-1}, 0, BP_DTYPE_F32},
      {1, {2}, {1}, 2, BP_DTYPE_F32},
      {1, {2}, {1}, 0, BP_DTYPE_INVALID},
      {1, {2}, {1}, 0, BP_DTYPE_COUNT_},
      {1, {2}, {1}, 0, 0xffffffffu},
  };
  for (size_t v = 0; v < sizeof(views) / sizeof(views[0]); ++v) {
    bp_tensor_t* t = NULL;
    bp_status_t st = bp_tensor_from_buffer(buf, views[v].dtype, views[v].rank, views[v].sizes,
                                           views[v].strides, views[v].offset, &t);
    if (st == BP_OK) fail_msg("view %zu was accepted", v);
    assert_true(st == BP_INVALID_ARGUMENT || st == BP_OUT_OF_RANGE);
    assert_true(bp_status_message()[0] != '\0');
    assert_null(t);
  }
  int64_t rank_big[BP_MAX_RANK + 1];
  for (int i = 0; i <= BP_MAX_RANK; ++i) rank_big[i] = 1;
  bp_tensor_t* t = NULL;
  assert_status(bp_tensor_from_buffer(buf, BP_DTYPE_F32, BP_MAX_RANK + 1, rank_big, NULL, 0, &t),
                BP_INVALID_ARGUMENT, "rank");
  assert_status(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 2, NULL, NULL, 0, &t),
                BP_INVALID_ARGUMENT, "bp_tensor_from_buffer: argument 'sizes' is NULL");
  bp_tensor_t* base = NULL;
  int64_t sixteen = 16;
  assert_ok(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 1, &sixteen, NULL, 0, &base));
  ops_track(base);
  static const struct {
    uint32_t rank;
    int64_t sizes[2], strides[2];
    int64_t offset;
  } strided[] = {
      {1, {17}, {1}, 0},          {1, {2}, {INT64_MAX}, 0}, {2, {INT64_MAX, 2}, {0, 1}, 15},
      {1, {1}, {1}, 16},          {1, {1}, {1}, INT64_MAX}, {1, {4}, {1}, -2},
      {2, {4, 4}, {4, 1}, 1},     {1, {-3}, {1}, 0},        {1, {3}, {-1}, 2},
  };
  for (size_t v = 0; v < sizeof(strided) / sizeof(strided[0]); ++v) {
    bp_tensor_t* view = NULL;
    bp_status_t st = bp_tensor_as_strided(base, strided[v].rank, strided[v].sizes,
                                          strided[v].strides, &strided[v].offset, &view);
    if (st == BP_OK) fail_msg("as_strided %zu was accepted", v);
    assert_true(st == BP_INVALID_ARGUMENT || st == BP_OUT_OF_RANGE);
    assert_true(bp_status_message()[0] != '\0');
    assert_null(view);
  }
  /* An empty view at the end of the buffer is fine to make; adding it to an
   * f32 [0] tensor works or fails cleanly, never reads past the buffer. */
  int64_t zero = 0;
  bp_tensor_t* empty = NULL;
  assert_ok(bp_tensor_from_buffer(buf, BP_DTYPE_F32, 1, &zero, NULL, 64, &empty));
  ops_track(empty);
  const bp_tensor_t* in[2] = {empty, empty};
  bp_tensor_t* out[1] = {NULL};
  check_run("empty view at the buffer end", BP_OP_add, g_stream, in, 2, NULL, out, 1,
            INVALID | (1u << BP_OUT_OF_RANGE), 1);
  bp_buffer_release(buf);
  ops_release_all(NULL);
}

int main(void) {
  if (ops_fixture_setup() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_null_stream_and_op_ids, ops_release_all),
      cmocka_unit_test_teardown(test_operand_counts, ops_release_all),
      cmocka_unit_test_teardown(test_null_required_inputs, ops_release_all),
      cmocka_unit_test_teardown(test_attrs_struct_size, ops_release_all),
      cmocka_unit_test_teardown(test_attrs_bad_fields, ops_release_all),
      cmocka_unit_test_teardown(test_operands_on_another_device, ops_release_all),
      cmocka_unit_test_teardown(test_every_dtype_in_every_slot, ops_release_all),
      cmocka_unit_test_teardown(test_wrong_outputs_and_shapes, ops_release_all),
      cmocka_unit_test_teardown(test_overflowing_views, ops_release_all),
  };
  int failed = cmocka_run_group_tests(tests, group_setup, group_teardown);
  print_message("%u bad-input cases checked\n", g_cases);
  bp_context_release(g_ctx);
  return failed;
}
