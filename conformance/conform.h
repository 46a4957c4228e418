/* backplane conformance suite: internal interface of libbp_conformance.
 *
 * The suite is written once and run per backend (IREE's CTS model):
 *  - fpconv.c      exact decode/encode of every dtype to/from double
 *  - tolerance.c   tolerance classes, ulp distances, the reduction bound
 *  - guard.c       buffer images with guard bands, input checksums
 *  - reference/    fp64 (or exact integer) reference per op, plain loops
 *  - cases*.c      deterministic case generators (seeded splitmix64)
 *  - execute.c     runs one case on one device through the public API
 *  - runner.c      crash isolation: a child process per op, results over a pipe
 *  - progress.c    bp-conform's progress line (done/total, op, elapsed, time left)
 *  - report.c      JSON, Markdown, HTML and the stdout summary
 *
 * Nothing here depends on a plugin's code: only on the public application
 * API (include/backplane/backplane.h). Everything below fpconv/tolerance/
 * guard/reference/cases is pure host code and usable without libbackplane.
 *
 * Threading: none of these functions are thread-safe unless stated; the
 * runner uses processes, not threads.
 */
#ifndef BP_CONFORMANCE_CONFORM_H_
#define BP_CONFORMANCE_CONFORM_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backplane/backplane.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Statuses of one case.                                                     */
/* ------------------------------------------------------------------------ */
enum bpc_status {
  BPC_PASS = 0,
  BPC_FAIL = 1,
  BPC_NOT_SUPPORTED = 2,
  BPC_QUALITY_WARNING = 3,
  BPC_CRASH = 4,
  BPC_TIMEOUT = 5,
  BPC_RESOURCE_ERROR = 6,
  BPC_SKIPPED = 7,
  BPC_STATUS_COUNT_ = 8
};
const char* bpc_status_name(uint32_t status); /* "PASS", ...; "?" when unknown */
/* Severity for "worst status" (scorecard colour): higher is worse. */
int bpc_status_severity(uint32_t status);

/* ------------------------------------------------------------------------ */
/* dtypes and exact conversions (fpconv.c). Independent of libbackplane.     */
/* ------------------------------------------------------------------------ */
const char* bpc_dtype_name(uint32_t dtype); /* bp_dtype_name: "invalid" when invalid */
size_t bpc_dtype_size(uint32_t dtype);      /* 0 when invalid */
int bpc_dtype_is_float(uint32_t dtype);     /* f16 bf16 f32 f64 fp8 */
int bpc_dtype_is_int(uint32_t dtype);       /* i8 u8 i16 i32 i64 (not bool) */
/* Mantissa bits (without the implicit one), minimum normal exponent and
 * maximum finite value of a floating dtype. */
int bpc_float_mant_bits(uint32_t dtype);
int bpc_float_min_exp(uint32_t dtype);
double bpc_float_max(uint32_t dtype);

uint16_t bpc_f16_from_f64(double x); /* round to nearest even; overflow -> inf */
double bpc_f16_to_f64(uint16_t bits);
uint16_t bpc_bf16_from_f64(double x);
double bpc_bf16_to_f64(uint16_t bits);
uint8_t bpc_f8e4m3_from_f64(double x); /* OCP e4m3fn: overflow and inf -> NaN */
double bpc_f8e4m3_to_f64(uint8_t bits);
uint8_t bpc_f8e5m2_from_f64(double x); /* IEEE-like: overflow -> inf */
double bpc_f8e5m2_to_f64(uint8_t bits);

/* x rounded (nearest even) to a floating dtype, as a double. Identity for
 * f64. */
double bpc_round_to_dtype(double x, uint32_t dtype);
/* An int64 rounded once (nearest even) to a floating dtype. */
double bpc_round_i64_to_dtype(int64_t v, uint32_t dtype);
/* Two's complement wrap of v to an integer dtype; bool gives v != 0. */
int64_t bpc_wrap_int(int64_t v, uint32_t dtype);

/* A value in a reference computation: floating dtypes use f, integer and
 * bool dtypes use i. `mag` is an optional error scale (see tolerance). */
typedef struct bpc_num {
  double f;
  int64_t i;
  double mag;
} bpc_num_t;

/* Element `index` of a dense array of `dtype`. Integers and bool read
 * exactly (bool reads the raw byte, so a corrupt bool is visible). */
bpc_num_t bpc_load(uint32_t dtype, const void* base, int64_t index);
/* Stores with the cast rules of docs/semantics.md (round to nearest even,
 * truncation toward zero, wrap). */
void bpc_store(uint32_t dtype, void* base, int64_t index, bpc_num_t v, uint32_t from_dtype);
/* Converts a value of dtype `from` to dtype `to` (PyTorch cast semantics). */
bpc_num_t bpc_convert(bpc_num_t v, uint32_t from, uint32_t to);
/* A scalar attribute as a value, with the dtype it stands for (f64, i64 or
 * bool). */
bpc_num_t bpc_scalar_value(const bp_scalar_t* s, uint32_t* out_dtype);

/* ------------------------------------------------------------------------ */
/* Deterministic PRNG (splitmix64).                                          */
/* ------------------------------------------------------------------------ */
typedef struct bpc_rng {
  uint64_t state;
} bpc_rng_t;
void bpc_rng_seed(bpc_rng_t* rng, uint64_t seed);
uint64_t bpc_rng_next(bpc_rng_t* rng);
double bpc_rng_uniform(bpc_rng_t* rng, double lo, double hi); /* [lo, hi) */
int64_t bpc_rng_int(bpc_rng_t* rng, int64_t lo, int64_t hi);  /* [lo, hi] */
uint64_t bpc_hash_string(const char* s); /* FNV-1a, for stable seeds */

/* ------------------------------------------------------------------------ */
/* Tolerances (tolerance.c; the table is documented in README.md).           */
/* ------------------------------------------------------------------------ */
enum bpc_accuracy {
  BPC_ACC_EXACT = 0,      /* integers, bool, copies, casts, comparisons, indices */
  BPC_ACC_CR = 1,         /* correctly rounded: add, sub, mul */
  BPC_ACC_DIVSQRT = 2,    /* div, sqrt, reciprocal, arange */
  BPC_ACC_TRANS = 3,      /* exp, log, sin, cos, tanh, atan2, ... */
  BPC_ACC_TRANS_HARD = 4, /* erf, pow, sigmoid, gelu, silu, elu */
  BPC_ACC_REDUCE = 5      /* sum, mean, prod, mm, bmm, addmm, softmax,
                             log_softmax: length-bound */
};
const char* bpc_accuracy_name(uint32_t accuracy);

typedef struct bpc_tolerance {
  uint32_t accuracy;       /* enum bpc_accuracy */
  double ulps;             /* ULP classes: limit in ulps of the output dtype */
  double bound_c;          /* REDUCE and mag terms: c in c * n * u * mag */
  double unit_roundoff;    /* u of the compute/accumulation dtype */
  int check_signed_zero;   /* -0 vs +0 must match */
  int flush_denormals_ok;  /* device flushes denormals: a subnormal expected
                              result may come back as zero */
} bpc_tolerance_t;

/* Tolerance for an op's accuracy class and output dtype. */
bpc_tolerance_t bpc_tolerance_get(uint32_t accuracy, uint32_t out_dtype, int signed_zero);
/* One ulp of `dtype` at the magnitude of x (x's binade, subnormal spacing
 * below the normal range). */
double bpc_ulp(double x, uint32_t dtype);
/* Distance in ulps of `dtype` between a device result `got` (already a
 * value of dtype) and an exact reference `ref`. NaN/inf rules: see
 * tolerance.c. Returns INFINITY for a mismatch that no tolerance accepts. */
double bpc_ulp_error(double got, double ref, uint32_t dtype);

/* Expected values of one output, produced by a reference. */
typedef struct bpc_expected {
  uint32_t dtype;
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t numel;
  double* f;      /* floating dtypes: exact reference value (unrounded); c64:
                     2 * numel values, (re, im) per element, and mag / nterms
                     likewise per component (compared as two f32 values) */
  int64_t* i;     /* integer and bool dtypes: exact value */
  double* mag;    /* optional error scale per element (sum of |terms|) */
  double* nterms; /* REDUCE: accumulation length per element */
} bpc_expected_t;

bp_status_t bpc_expected_init(bpc_expected_t* e, uint32_t dtype, uint32_t rank,
                              const int64_t* sizes, int with_bound);
void bpc_expected_free(bpc_expected_t* e);

typedef struct bpc_check {
  uint32_t status;      /* PASS, QUALITY_WARNING or FAIL */
  double max_ulps;      /* ULP classes; REDUCE: max ratio error/bound; -1 n/a */
  double max_abs;       /* max |got - ref| over finite pairs */
  int64_t mismatches;   /* elements outside the tolerance */
  int64_t worst_index;  /* -1 when none */
  char message[256];
} bpc_check_t;

/* Compares device results (dense, expected->dtype) with the reference. */
void bpc_check_values(const bpc_tolerance_t* tol, const bpc_expected_t* expected,
                      const void* got_dense, bpc_check_t* out);

/* ------------------------------------------------------------------------ */
/* Layouts and guard bands (guard.c).                                        */
/* ------------------------------------------------------------------------ */
enum bpc_layout_kind {
  BPC_LAYOUT_CONTIG = 0,
  BPC_LAYOUT_OFFSET = 1,     /* dense, starting at an odd element offset */
  BPC_LAYOUT_TRANSPOSED = 2, /* dims stored in reverse order (column-major) */
  BPC_LAYOUT_STRIDED = 3,    /* every dim stepped by 2 (slice with step 2): gaps */
  BPC_LAYOUT_KIND_COUNT_ = 4
};
const char* bpc_layout_name(uint32_t layout);

#define BPC_GUARD_BYTES 64u

/* Where a tensor's elements live inside a buffer with guard bands. */
typedef struct bpc_layout {
  uint32_t dtype;
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t strides[BP_MAX_RANK]; /* elements */
  int64_t numel;
  uint64_t byte_offset; /* of element 0 */
  uint64_t buffer_size; /* guards included */
} bpc_layout_t;

bp_status_t bpc_layout_make(uint32_t dtype, uint32_t rank, const int64_t* sizes, uint32_t kind,
                            bpc_layout_t* out);
/* The guard byte expected at a buffer offset (a position-dependent pattern,
 * so shifted copies are caught). */
uint8_t bpc_guard_byte(uint64_t offset);
/* Fills the whole image with the guard pattern. */
void bpc_image_fill_guard(uint8_t* image, uint64_t size);
/* Dense row-major elements <-> their places in an image. */
void bpc_image_scatter(const bpc_layout_t* layout, uint8_t* image, const void* dense);
void bpc_image_gather(const bpc_layout_t* layout, const uint8_t* image, void* dense);
/* 0 when every byte outside the elements still holds the guard pattern;
 * else 1 and the first corrupted byte offset. */
int bpc_guard_check(const bpc_layout_t* layout, const uint8_t* image, uint64_t* out_offset);
/* FNV-1a 64 over bytes. */
uint64_t bpc_checksum(const void* data, uint64_t size);

/* ------------------------------------------------------------------------ */
/* Cases (cases*.c).                                                         */
/* ------------------------------------------------------------------------ */
#define BPC_MAX_INPUTS 6
#define BPC_MAX_OUTPUTS 4
#define BPC_CASE_ID_MAX 96
/* A dtype label: two dtype names and an operator ("float8_e4m3fn->bf16"). */
#define BPC_DTYPE_LABEL_MAX 48

/* How an operand's values are drawn: a kind in the low two bits, flags
 * above. */
enum bpc_values {
  BPC_V_RANDOM = 0,    /* uniform in [lo, hi]; lo == hi: default range
                          (floats [-10, 10], integers the full dtype range) */
  BPC_V_SPECIAL = 1,   /* special values (zeros, inf, NaN, subnormals, limits),
                          then random; with lo < hi only finite specials in range */
  BPC_V_DISTINCT = 2,  /* integers drawn from [lo, hi] without repeats (a slot
                          mapping); hi - lo + 1 >= the element count */
  BPC_V_OFFSETS = 3,   /* integers, nondecreasing, the first lo and the last hi
                          (offsets of ragged groups: cu_seqlens, expert
                          offsets); one element: lo */
  BPC_V_NONFINITE = 4, /* flag with SPECIAL and a range: keep inf and NaN */
  BPC_V_NONZERO = 8,   /* flag: never zero (integer divisors) */
  BPC_V_INTEGRAL = 16, /* flag: floating values are integers in [lo, hi], exact
                          in every dtype (0-d operands of mixed precision,
                          whose precision on load PyTorch leaves to opmath) */
  BPC_V_SPARSE = 32    /* flag: a random element is zero with probability
                          15/16 (so that `any` sees all-zero rows) */
};

typedef struct bpc_operand {
  uint32_t dtype; /* BP_DTYPE_INVALID: absent optional operand */
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  uint32_t layout; /* enum bpc_layout_kind */
  uint32_t values; /* enum bpc_values (| BPC_V_NONFINITE) */
  double lo, hi;
} bpc_operand_t;

typedef union bpc_attrs {
  bp_binary_attrs_t binary;
  bp_reduce_attrs_t reduce;
  bp_cast_attrs_t cast;
  bp_clamp_attrs_t clamp;
  bp_elu_attrs_t elu;
  bp_gelu_attrs_t gelu;
  bp_hardtanh_attrs_t hardtanh;
  bp_leaky_relu_attrs_t leaky_relu;
  bp_softmax_attrs_t softmax;
  bp_addmm_attrs_t addmm;
  bp_dim_attrs_t dim;
  bp_fill_attrs_t fill;
  bp_arange_attrs_t arange;
  bp_softplus_attrs_t softplus;
  bp_dims_attrs_t dims;
  bp_sort_attrs_t sort;
  bp_topk_attrs_t topk;
  bp_cdist_attrs_t cdist;
  bp_linear_attrs_t linear;
  bp_conv_attrs_t conv;
  bp_pool_attrs_t pool;
  bp_adaptive_pool_attrs_t adaptive_pool;
  bp_col2im_attrs_t col2im;
  bp_grid_sampler_attrs_t grid_sampler;
  bp_upsample_attrs_t upsample;
  bp_batch_norm_attrs_t batch_norm;
  bp_group_norm_attrs_t group_norm;
  bp_layer_norm_attrs_t layer_norm;
  bp_rms_norm_attrs_t rms_norm;
  bp_embedding_attrs_t embedding;
  bp_index_put_attrs_t index_put;
  bp_scatter_attrs_t scatter;
  bp_slice_attrs_t slice;
  bp_pad_attrs_t pad;
  bp_random_attrs_t random;
  bp_fft_attrs_t fft;
  bp_sdpa_attrs_t sdpa;
  bp_rotary_attrs_t rotary;
  bp_cross_entropy_attrs_t cross_entropy;
  bp_quantize_attrs_t quantize;
  bp_scaled_mm_attrs_t scaled_mm;
  bp_sample_attrs_t sample;
  bp_penalty_attrs_t penalty;
  bp_paged_attention_attrs_t paged;
  bp_qkv_rotary_attrs_t qkv;
  bp_moe_topk_attrs_t moe_topk;
  bp_fused_quant_attrs_t fused_quant;
  bp_softcap_attrs_t softcap;
  bp_logits_mask_attrs_t logits_mask;
  bp_moe_permute_attrs_t moe_permute;
  bp_rejection_attrs_t rejection;
  bp_moe_align_attrs_t moe_align;
  bp_grouped_topk_attrs_t grouped_topk;
  bp_group_quant_attrs_t group_quant;
  bp_gather_cache_attrs_t gather_cache;
  bp_slot_mapping_attrs_t slot_mapping;
  bp_logprobs_attrs_t logprobs;
  bp_swiglu_oai_attrs_t swiglu_oai;
} bpc_attrs_t;

typedef struct bpc_case {
  char id[BPC_CASE_ID_MAX]; /* "add/f16/broadcast_0d/3": stable across runs */
  char dtype_label[BPC_DTYPE_LABEL_MAX]; /* scorecard column: "f16", "i32+f16", "f32->i8" */
  uint32_t op_id;
  uint32_t num_inputs; /* as passed to bp_op_run (absent optionals count) */
  uint32_t num_outputs;
  bpc_operand_t in[BPC_MAX_INPUTS];
  /* Output layouts. dtype/sizes are set only for creation ops (fill,
   * arange), whose output the caller defines; otherwise the reference
   * decides them. */
  bpc_operand_t out[BPC_MAX_OUTPUTS];
  int has_attrs;
  bpc_attrs_t attrs;
  uint64_t seed;
  /* Runtime cases only (runtime.c): the check, its memory kind and its
   * sizes/offsets (meaning per check). */
  uint32_t rt_check;
  uint32_t rt_memory_kind;
  uint32_t rt_memory_space; /* index of the space the case allocates in */
  uint64_t rt_args[4];
} bpc_case_t;

typedef struct bpc_case_list {
  bpc_case_t* items;
  size_t count;
  size_t capacity;
} bpc_case_list_t;

/* Appends the cases of one op (none when the op has no reference). */
bp_status_t bpc_cases_generate(uint32_t op_id, int quick, bpc_case_list_t* list);
void bpc_case_list_free(bpc_case_list_t* list);
/* Appends a zeroed case to `list` (growing it); NULL when out of memory, the
 * list unchanged. The pointer is valid until the next append. */
bpc_case_t* bpc_case_list_append(bpc_case_list_t* list);

/* Dense host values of input k, drawn deterministically from the case seed.
 * *out_data is malloc'd (NULL for an absent or empty operand). */
bp_status_t bpc_case_materialize(const bpc_case_t* c, uint32_t k, void** out_data);

/* ------------------------------------------------------------------------ */
/* Runtime cases (runtime.c): memory spaces, copies, stream order, events,   */
/* several devices, error hygiene. Each area is a pseudo op with an id past  */
/* every real op, so the runner and the reports treat it like an op.        */
/* ------------------------------------------------------------------------ */
enum bpc_runtime_area {
  BPC_RT_MEMORY = 0,
  BPC_RT_COPY = 1,
  BPC_RT_STREAM_ORDER = 2,
  BPC_RT_EVENT = 3,
  BPC_RT_MULTI_DEVICE = 4,
  BPC_RT_ERRORS = 5,
  BPC_RT_COLLECTIVES = 6,
  BPC_RT_AREA_COUNT_ = 7
};
#define BPC_RUNTIME_OP_BASE 0x10000u
#define BPC_RUNTIME_OP(area) (BPC_RUNTIME_OP_BASE + (uint32_t)(area))
int bpc_is_runtime_op(uint32_t op_id);
/* A case group's name: the op's name, "runtime/<area>" for the runtime
 * areas, "?" otherwise. */
const char* bpc_group_name(uint32_t op_id);

/* What the runtime cases depend on, learnt from the backend's first device
 * before cases are generated (the parent process does this). */
typedef struct bpc_runtime_target {
  uint32_t device_count; /* devices of the backend; >= 2 adds the multi-device cases */
  uint32_t num_spaces;
  bp_memory_space_info_t spaces[BP_MEMORY_KIND_COUNT_];
} bpc_runtime_target_t;

/* Fills *out from `device` and its plugin. */
bp_status_t bpc_runtime_target_query(bp_device_t* device, bpc_runtime_target_t* out);
/* Appends the runtime cases for a backend like `target`. */
bp_status_t bpc_runtime_cases_generate(const bpc_runtime_target_t* target, bpc_case_list_t* list);



/* ------------------------------------------------------------------------ */
/* References (reference/).                                                  */
/* ------------------------------------------------------------------------ */
typedef struct bpc_host_tensor {
  uint32_t dtype; /* INVALID: absent */
  uint32_t rank;
  int64_t sizes[BP_MAX_RANK];
  int64_t numel;
  const void* data; /* dense row-major */
} bpc_host_tensor_t;

/* What a reference reports besides values. */
typedef struct bpc_ref_result {
  uint32_t num_outputs;
  bpc_expected_t out[BPC_MAX_OUTPUTS];
  uint32_t compute_dtype; /* for bp_op_call_t.compute_dtype */
  char message[160];      /* why the reference rejected the case */
} bpc_ref_result_t;

/* A reference: returns BP_OK and fills `res`, or an error (the case is not
 * valid under docs/semantics.md) with res->message. */
typedef bp_status_t (*bpc_ref_fn)(const bpc_case_t* c, const bpc_host_tensor_t* in,
                                  bpc_ref_result_t* res);

enum bpc_op_flags {
  BPC_OPF_SIGNED_ZERO = 1u << 0 /* -0 vs +0 is defined and checked */
};

/* A case generator of one op family (cases_*.c; struct bpc_gen is in
 * cases_internal.h). */
struct bpc_gen;
typedef void (*bpc_gen_fn)(struct bpc_gen* g);

/* An op-specific checker that replaces the per-output value comparison
 * (random ops: statistics; ops whose valid results are not unique: topk
 * with ties, nonzero's rows past the count). `got[k]` holds output k dense,
 * in ref->out[k].dtype; `tol` is the op's class for output 0. It fills *out
 * (status PASS, QUALITY_WARNING or FAIL, and a message). */
typedef void (*bpc_check_fn)(const bpc_case_t* c, const bpc_host_tensor_t* in,
                             const bpc_ref_result_t* ref, const void* const* got,
                             const bpc_tolerance_t* tol, bpc_check_t* out);

typedef struct bpc_op_entry {
  uint32_t op_id;
  const char* name;
  const char* category;
  const char* rule;
  bpc_ref_fn reference; /* NULL: no reference yet */
  uint32_t accuracy;    /* enum bpc_accuracy */
  uint32_t flags;       /* enum bpc_op_flags */
  bpc_gen_fn generate;  /* NULL: the built-in families of cases.c */
  bpc_check_fn check;   /* NULL: bpc_check_values per output */
} bpc_op_entry_t;

/* The ops of one family that share a reference function, an accuracy
 * class, flags, a case generator and a checker. Each family file of
 * reference/ exports a bpc_ref_family_t listing its groups; registry.c
 * collects them. */
typedef struct bpc_ref_group {
  bpc_ref_fn reference;
  uint32_t accuracy; /* enum bpc_accuracy */
  uint32_t flags;    /* enum bpc_op_flags */
  const uint32_t* ops;
  uint32_t count;
  bpc_gen_fn generate; /* NULL: the built-in families of cases.c */
  bpc_check_fn check;  /* NULL: value comparison */
} bpc_ref_group_t;

typedef struct bpc_ref_family {
  const char* name;
  const bpc_ref_group_t* groups;
  uint32_t count;
} bpc_ref_family_t;

/* {op ids...} as the `ops, count` pair of a bpc_ref_group_t. */
#define BPC_OPS(...)                 \
  (const uint32_t[]){__VA_ARGS__}, \
      (uint32_t)(sizeof((const uint32_t[]){__VA_ARGS__}) / sizeof(uint32_t))
#define BPC_FAMILY(name_, groups_) \
  {#name_, groups_, (uint32_t)(sizeof(groups_) / sizeof((groups_)[0]))}

/* Registry generated from ops.def. NULL for ids out of range. */
const bpc_op_entry_t* bpc_op_entry(uint32_t op_id);
uint32_t bpc_op_count(void); /* BP_OP_COUNT */
uint32_t bpc_op_find(const char* name); /* BP_OP_INVALID if unknown */

bp_status_t bpc_reference_run(const bpc_case_t* c, const bpc_host_tensor_t* in,
                              bpc_ref_result_t* res);
void bpc_ref_result_free(bpc_ref_result_t* res);

/* Type promotion (docs/semantics.md). */
uint32_t bpc_promote_types(uint32_t a, uint32_t b);

/* ------------------------------------------------------------------------ */
/* One case on one device (execute.c).                                       */
/* ------------------------------------------------------------------------ */
typedef struct bpc_result {
  uint32_t status;  /* enum bpc_status */
  double max_ulps;  /* -1 when not applicable */
  double max_abs;   /* -1 when not applicable */
  char message[256];
} bpc_result_t;

/* Sets r->status and formats r->message (truncated to fit). */
void bpc_result_set(bpc_result_t* r, uint32_t status, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Runs case `c` on `device` through `stream` and scores it (runtime cases
 * go to bpc_runtime_execute). Never fails: every problem becomes a status
 * in *out. */
void bpc_execute_case(bp_device_t* device, bp_stream_t* stream, const bpc_case_t* c,
                      bpc_result_t* out);

/* Collectives (collectives.c), a runtime area of their own: cases for 2, 3
 * and 4 ranks in one process, or, with world_size > 0, for the launcher's
 * world (one rank per process, mpirun). */
bp_status_t bpc_collective_cases_generate(int quick, int world_size, bpc_case_list_t* list);
void bpc_collective_execute(bp_device_t* device, bp_stream_t* stream, const bpc_case_t* c,
                            bpc_result_t* out);
/* World mode (world.c): under a launcher (mpirun: OMPI_COMM_WORLD_SIZE,
 * PMI_SIZE, or BACKPLANE_WORLD_SIZE) the collectives run in this process,
 * one rank per process, without the per-op child processes (MPI does not
 * survive fork). Returns the exit code; prints "collectives: N passed, F
 * failed, S skipped". */
int bpc_world_size_from_env(void);
int bpc_run_world(const char* backend, int quick, int verbose);
/* World mode: the communicator of this process's rank (not owned), or NULL. */
struct bp_comm;
void bpc_collectives_set_world(struct bp_comm* world);
/* Runs one runtime case (called by bpc_execute_case). `device` is the
 * backend's first device, `stream` a stream of it; the multi-device cases
 * use the plugin's second device. Never fails: problems become statuses. */
void bpc_runtime_execute(bp_device_t* device, bp_stream_t* stream, const bpc_case_t* c,
                         bpc_result_t* out);

/* ------------------------------------------------------------------------ */
/* Crash-isolating runner (runner.c).                                        */
/* ------------------------------------------------------------------------ */
/* A child reports through this while it runs cases. */
typedef struct bpc_child bpc_child_t;
void bpc_child_begin(bpc_child_t* child, uint32_t index);
void bpc_child_result(bpc_child_t* child, uint32_t index, const bpc_result_t* result);
/* 0 when case `index` already has a result (runner_ops.done) and must be
 * skipped: no begin, no result. */
int bpc_child_wants(const bpc_child_t* child, uint32_t index);
/* Asks for case `index` (begun, not reported) to be run again as the first
 * case of a fresh child; returns 1 when the child must now end without
 * reporting it (return 0 from run_group), 0 when this child is fresh for it
 * already (report the result as it is). For results that may come from what
 * earlier cases left behind in the process. `result` is the one this child
 * got: if the fresh child passes, the case is scored QUALITY_WARNING with
 * its message, so a failure that depends on earlier cases is never lost. */
int bpc_child_retry_fresh(bpc_child_t* child, uint32_t index, const bpc_result_t* result);

/* What the runner runs. Each "group" (an op) has `count` cases; run_group
 * is called in a forked child for cases [start, count) and must call
 * bpc_child_begin before and bpc_child_result after each case it wants
 * (bpc_child_wants). It returns nonzero when it cannot run at all (message
 * in *out_message, copied to every remaining case as FAIL). */
typedef struct bpc_runner_ops {
  void* user;
  int (*run_group)(void* user, uint32_t group, uint32_t start, bpc_child_t* child,
                   char* out_message, size_t message_size);
  /* Optional, called in the parent with each case's final result as soon as
   * it is known (PASS..., CRASH or TIMEOUT), in the order they arrive. */
  void (*on_result)(void* user, uint32_t group, uint32_t index, const bpc_result_t* result);
  /* Optional, `count` entries: nonzero marks a case already done (a resumed
   * run); its results[] entry is left as the caller set it. */
  const uint8_t* done;
  /* Optional, called in the parent about every 0.25 s while a child runs
   * (the progress line's clock). */
  void (*on_tick)(void* user);
} bpc_runner_ops_t;

/* Runs cases [0, count) of `group` in isolated children: a crash (signal or
 * exit) scores the case in progress CRASH, a case running past timeout_s is
 * killed and scored TIMEOUT; a fresh child resumes at the next case. A
 * child is killed when the calling process dies. `results` has `count`
 * entries. Returns BP_OK unless fork/pipe fail. */
bp_status_t bpc_run_isolated(const bpc_runner_ops_t* ops, uint32_t group, uint32_t count,
                             double timeout_s, bpc_result_t* results);

/* ------------------------------------------------------------------------ */
/* Progress line (progress.c).                                               */
/* ------------------------------------------------------------------------ */
typedef struct bpc_progress_state {
  uint64_t done;    /* cases with a result, those read from a journal included */
  uint64_t total;   /* cases of the whole run */
  uint64_t resumed; /* of `done`, read from a journal (not timed) */
  double elapsed_s; /* since the run started */
  const char* backend; /* borrowed; NULL: "-" */
  const char* op;      /* borrowed; NULL: "-" */
} bpc_progress_state_t;

/* Seconds left, estimated from the cases run so far (done - resumed) in
 * elapsed_s; 0 when every case is done, < 0 when unknown (none timed yet). */
double bpc_progress_eta(const bpc_progress_state_t* s);

/* The line, without '\r' or newline, cut to `width` characters:
 * "[done/total pct%] backend: op  elapsed 1m05s  left ~3m10s" ("left ~?"
 * while unknown). BP_INVALID_ARGUMENT for NULLs, width or size 0, or
 * done > total. */
bp_status_t bpc_progress_format(const bpc_progress_state_t* s, size_t width, char* out, size_t size);

/* The drawing side: one line on `fp`, redrawn at most ~10 times a second. */
typedef struct bpc_progress {
  FILE* fp;
  int enabled;     /* 0: every call does nothing */
  bpc_progress_state_t st;
  double start, last; /* monotonic seconds; last < 0: never drawn */
  size_t shown;       /* characters of the line on screen (0: none) */
  size_t width;       /* terminal columns */
} bpc_progress_t;
void bpc_progress_start(bpc_progress_t* p, FILE* fp, int enabled, uint64_t total);
/* The backend and op now running (borrowed until the next call). */
void bpc_progress_set(bpc_progress_t* p, const char* backend, const char* op);
/* `ran` cases got a result now, `resumed` were found in the journal. */
void bpc_progress_add(bpc_progress_t* p, uint64_t ran, uint64_t resumed);
/* Redraws when due (elapsed time moves on while a case runs). */
void bpc_progress_tick(bpc_progress_t* p);
/* Erases the line: before other output on the same terminal, and at the end. */
void bpc_progress_clear(bpc_progress_t* p);

/* ------------------------------------------------------------------------ */
/* Reports (report.c).                                                       */
/* ------------------------------------------------------------------------ */
typedef struct bpc_case_record {
  const bpc_case_t* c;
  bpc_result_t result;
} bpc_case_record_t;

typedef struct bpc_backend_report {
  char name[64];
  char device[128];
  bpc_case_record_t* records;
  size_t count;
  size_t capacity;
  uint64_t totals[BPC_STATUS_COUNT_];
} bpc_backend_report_t;

bp_status_t bpc_report_add(bpc_backend_report_t* r, const bpc_case_t* c, const bpc_result_t* res);
void bpc_report_free(bpc_backend_report_t* r);
/* N = PASS + QUALITY_WARNING; F = FAIL + CRASH + TIMEOUT;
 * S = NOT_SUPPORTED + SKIPPED + RESOURCE_ERROR. */
void bpc_report_counts(const bpc_backend_report_t* r, uint64_t* out_passed, uint64_t* out_failed,
                       uint64_t* out_skipped);
bp_status_t bpc_report_write_json(const char* path, const bpc_backend_report_t* reports, size_t n);
bp_status_t bpc_report_write_markdown(const char* path, const bpc_backend_report_t* reports,
                                      size_t n);
bp_status_t bpc_report_write_html(const char* path, const bpc_backend_report_t* reports, size_t n);
/* Per-op summary table and the closing `NAME: N passed, F failed, S skipped`
 * line per backend. */
void bpc_report_print_summary(const bpc_backend_report_t* reports, size_t n, int verbose);

/* ------------------------------------------------------------------------ */
/* Output files (outfile.c) and the result journal (journal.c).              */
/* ------------------------------------------------------------------------ */
/* BP_OK when `path` is a regular file or does not exist; else an error and
 * a message naming what it is (a FIFO would block the run). */
bp_status_t bpc_output_path_check(const char* path, char* msg, size_t msg_size);
/* Opens `path` for writing (created 0644; truncated unless `append`),
 * refusing anything but a regular file without blocking on a FIFO.
 * Returns the descriptor, or -1 with a message. */
int bpc_output_open(const char* path, int append, char* msg, size_t msg_size);
FILE* bpc_output_fopen(const char* path, char* msg, size_t msg_size);

/* Append-only journal of case results (format in journal.c). */
typedef struct bpc_journal bpc_journal_t;
/* Opens the journal of a run of `selection` (text naming the backends, ops
 * and flags that decide the cases). resume = 0 starts it afresh; resume = 1
 * loads its records (a torn or corrupt line is ignored and cut off) and
 * refuses a journal of another selection with BP_FAILED_PRECONDITION. */
bp_status_t bpc_journal_open(const char* path, const char* selection, int resume,
                             bpc_journal_t** out_journal, char* msg, size_t msg_size);
/* 1 and *out when the journal holds a result for the case, else 0. */
int bpc_journal_find(const bpc_journal_t* journal, const char* backend, const char* case_id,
                     bpc_result_t* out);
/* Writes one record at once (one write(2)); syncs to disk in batches. The
 * record is then found by bpc_journal_find exactly as it reads back. */
bp_status_t bpc_journal_append(bpc_journal_t* journal, const char* backend, const char* case_id,
                               const bpc_result_t* result);
bp_status_t bpc_journal_sync(bpc_journal_t* journal);
/* Reads the file again (the reports are built from what it holds). */
bp_status_t bpc_journal_reload(bpc_journal_t* journal);
size_t bpc_journal_count(const bpc_journal_t* journal); /* distinct cases */
void bpc_journal_close(bpc_journal_t* journal);

#ifdef __cplusplus
}
#endif
#endif /* BP_CONFORMANCE_CONFORM_H_ */
