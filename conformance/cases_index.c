/* Case generators of the index family: embedding, embedding_bag,
 * embedding_dense_backward, gather, index, index_put, index_select,
 * masked_scatter, nonzero.
 *
 * Index operands draw integers in a range ([0, size) or [-size, size) where
 * the op wraps negatives). Cases whose values must satisfy a data
 * constraint (sorted offsets, unique index_put positions) search the seed
 * until the reference accepts the drawn data.
 */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_index(bpc_gen_t* g);

/* Every dtype the data-movement ops take (fp8 is storage only; c64 is left
 * to the fft ops). */
static const uint32_t kData[] = {BP_DTYPE_F32, BP_DTYPE_F64, BP_DTYPE_F16, BP_DTYPE_BF16,
                                 BP_DTYPE_I8,  BP_DTYPE_U8,  BP_DTYPE_I16, BP_DTYPE_I32,
                                 BP_DTYPE_I64, BP_DTYPE_BOOL};
#define DATA_DTYPES .dtypes = kData, .num_dtypes = COUNT(kData)

/* Index operand with values in [lo, hi] (integers). */
static void set_index(bpc_operand_t* o, uint32_t dtype, bpc_shape_t s, uint32_t layout, int64_t lo,
                      int64_t hi) {
  /* A range [v, v] would read as "no range": widen by half a step. */
  bpc_operand_set(o, dtype, s, layout, BPC_V_RANDOM, (double)lo, (double)hi + 0.5);
}

/* Data operand: specials for floats (NaN, -0, inf copy exactly), random
 * otherwise. */
static void set_data(bpc_operand_t* o, uint32_t dtype, bpc_shape_t s, uint32_t layout) {
  bpc_operand_set(o, dtype, s, layout, bpc_dtype_is_float(dtype) ? BPC_V_SPECIAL | BPC_V_NONFINITE : BPC_V_RANDOM, 0, 0);
}

static void set_dim(bpc_case_t* c, int32_t dim) {
  c->has_attrs = 1;
  c->attrs.dim.struct_size = sizeof c->attrs.dim;
  c->attrs.dim.dim = dim;
}

/* Keeps the last case with the first seed (from its own) whose data the
 * reference accepts; drops it when none of `tries` does. */
static void keep_with_valid_seed(bpc_gen_t* g, bpc_case_t* c, int tries) {
  if (!c) return;
  bpc_case_t proto = *c;
  bpc_gen_drop_last(g);
  for (int t = 0; t < tries; t++) {
    bpc_case_t* n = bpc_case_list_append(g->list);
    if (!n) {
      g->status = BP_RESOURCE_EXHAUSTED;
      return;
    }
    *n = proto;
    n->seed = proto.seed + (uint64_t)t * UINT64_C(0x9E3779B97F4A7C15);
    if (bpc_gen_keep_if_valid(g, n)) return;
  }
}

/* gather and index_select: self, an index with values in [0, bound) along
 * dim, and the layouts of self, index and the output. */
typedef struct select_row {
  bpc_row_t row;
  bpc_shape_t self, index;
  int32_t dim;
  int64_t bound;
  uint32_t ls, li, lo, it;
} select_row_t;

static void select_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const select_row_t* r = row;
  set_data(&c->in[0], at->dtype, r->self, r->ls);
  set_index(&c->in[1], r->it, r->index, r->li, 0, r->bound - 1);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), r->lo, 0, 0, 0);
  set_dim(c, r->dim);
}

static void gen_gather(bpc_gen_t* g) {
  static const select_row_t rows[] = {
      {{"dim0", 1}, {2, {4, 5}}, {2, {3, 5}}, 0, 4, 0, 0, 0, BP_DTYPE_I64},
      {{"dim_last_smaller", 1}, {2, {3, 6}}, {2, {2, 4}}, -1, 6, BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_OFFSET, BP_DTYPE_I32},
      {{"3d_mid", 0}, {3, {2, 5, 3}}, {3, {2, 7, 3}}, 1, 5, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_OFFSET, BPC_LAYOUT_STRIDED, BP_DTYPE_I64},
      {{"0d", 0}, {0, {0}}, {0, {0}}, 0, 1, 0, 0, 0, BP_DTYPE_I64},
      {{"empty", 0}, {2, {3, 4}}, {2, {0, 4}}, 0, 3, 0, 0, 0, BP_DTYPE_I64},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), DATA_DTYPES, .num_inputs = 2, .num_outputs = 1, .fill = select_fill});
}

static void gen_index_select(bpc_gen_t* g) {
  static const select_row_t rows[] = {
      {{"dim0_dups", 1}, {2, {5, 4}}, {1, {7}}, 0, 5, 0, 0, 0, BP_DTYPE_I64},
      {{"dim1", 1}, {2, {3, 6}}, {1, {4}}, 1, 6, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, BP_DTYPE_I32},
      {{"3d_neg_dim", 0}, {3, {2, 5, 3}}, {1, {3}}, -2, 5, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, BP_DTYPE_I64},
      {{"0d_self", 0}, {0, {0}}, {1, {1}}, 0, 1, 0, 0, 0, BP_DTYPE_I64},
      {{"0d_index", 0}, {2, {4, 3}}, {0, {0}}, 0, 4, 0, 0, 0, BP_DTYPE_I32},
      {{"empty", 0}, {2, {3, 4}}, {1, {0}}, 1, 4, 0, 0, 0, BP_DTYPE_I64},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), DATA_DTYPES, .num_inputs = 2, .num_outputs = 1, .fill = select_fill});
}

typedef struct embedding_row {
  bpc_row_t row;
  bpc_shape_t idx;
  uint32_t lw, li, lo, it;
  int64_t pad;
} embedding_row_t;

static void embedding_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const embedding_row_t* r = row;
  set_data(&c->in[0], at->dtype, S2(10, 4), r->lw);
  set_index(&c->in[1], r->it, r->idx, r->li, 0, 9);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), r->lo, 0, 0, 0);
  BPC_CASE_ATTRS(c, embedding)->padding_idx = r->pad; /* forward ignores it */
}

static void gen_embedding(bpc_gen_t* g) {
  static const embedding_row_t rows[] = {
      {{"2d", 1}, {2, {3, 5}}, 0, 0, 0, BP_DTYPE_I64, -1},
      {{"strided", 1}, {1, {6}}, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BP_DTYPE_I32, 2},
      {{"0d", 0}, {0, {0}}, BPC_LAYOUT_OFFSET, 0, BPC_LAYOUT_OFFSET, BP_DTYPE_I64, -1},
      {{"empty", 0}, {2, {0, 2}}, 0, 0, 0, BP_DTYPE_I64, -1},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), DATA_DTYPES, .num_inputs = 2, .num_outputs = 1, .fill = embedding_fill});
}

/* index / index_put list layouts over self [5, 6, 7] (rank 3). An entry
 * with rank -1 is an absent (full-slice) index. */
typedef struct adv_case {
  bpc_row_t row;
  int n;
  int rank[3];
  bpc_shape_t s[3];
  int negative; /* values in [-size, size) */
  uint32_t layout;
} adv_case_t;

static const adv_case_t kAdv[] = {
    {{"one", 1}, 1, {1}, {{1, {4}}}, 0, 0},
    {{"two_broadcast", 1}, 2, {2, 1}, {{2, {3, 1}}, {1, {4}}}, 0, BPC_LAYOUT_STRIDED},
    {{"negative", 0}, 2, {1, 1}, {{1, {4}}, {1, {4}}}, 1, BPC_LAYOUT_OFFSET},
    {{"slice_then_index", 1}, 2, {-1, 2}, {{0, {0}}, {2, {2, 2}}}, 0, 0},
    {{"separated", 0}, 3, {1, -1, 1}, {{1, {3}}, {0, {0}}, {1, {3}}}, 1, BPC_LAYOUT_TRANSPOSED},
    {{"all_dims", 0}, 3, {1, 1, 0}, {{1, {4}}, {1, {4}}, {0, {0}}}, 0, 0},
    {{"empty", 0}, 1, {1}, {{1, {0}}}, 0, 0},
};
static const int64_t kAdvSelf[3] = {5, 6, 7};

/* Fills inputs 1..n of c from kAdv[a]; returns the result shape. */
static bpc_shape_t adv_fill(bpc_case_t* c, const adv_case_t* a, uint32_t index_dtype) {
  bpc_shape_t b = S0(), out = S0();
  int first = -1, last = -1, adjacent = 1;
  for (int k = 0; k < a->n; k++) {
    bpc_operand_t* o = &c->in[1 + k];
    if (a->rank[k] < 0) {
      memset(o, 0, sizeof *o);
      continue;
    }
    int64_t size = kAdvSelf[k];
    set_index(o, index_dtype, a->s[k], k == 0 ? a->layout : 0, a->negative ? -size : 0, size - 1);
    if (first >= 0 && k != last + 1) adjacent = 0;
    if (first < 0) first = k;
    last = k;
    const bpc_shape_t* s = &a->s[k];
    if (s->rank > b.rank) {
      uint32_t shift = s->rank - b.rank;
      memmove(b.sizes + shift, b.sizes, sizeof(int64_t) * b.rank);
      for (uint32_t d = 0; d < shift; d++) b.sizes[d] = 1;
      b.rank = s->rank;
    }
    for (uint32_t d = 0; d < s->rank; d++) {
      int64_t* t = &b.sizes[b.rank - s->rank + d];
      if (*t == 1) *t = s->sizes[d];
    }
  }
  if (adjacent) {
    for (int d = 0; d < first; d++) out.sizes[out.rank++] = kAdvSelf[d];
    for (uint32_t d = 0; d < b.rank; d++) out.sizes[out.rank++] = b.sizes[d];
    for (int d = last + 1; d < 3; d++) out.sizes[out.rank++] = kAdvSelf[d];
  } else {
    for (uint32_t d = 0; d < b.rank; d++) out.sizes[out.rank++] = b.sizes[d];
    for (int d = 0; d < 3; d++)
      if (d >= a->n || a->rank[d] < 0) out.sizes[out.rank++] = kAdvSelf[d];
  }
  return out;
}

/* index: self [5, 6, 7] and the list of kAdv's row; index dtypes and
 * layouts alternate with the dtype and the row. */
static void index_op_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const adv_case_t* a = row;
  c->num_inputs = 1 + (uint32_t)a->n;
  set_data(&c->in[0], at->dtype, S3(5, 6, 7), at->row_index % 2 ? BPC_LAYOUT_TRANSPOSED : 0);
  adv_fill(c, a, at->dtype_index % 2 ? BP_DTYPE_I32 : BP_DTYPE_I64);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), at->row_index % 3 == 1 ? BPC_LAYOUT_STRIDED : 0, 0, 0, 0);
}

static void gen_index_op(bpc_gen_t* g) {
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(kAdv), DATA_DTYPES, .num_inputs = 1, .num_outputs = 1, .fill = index_op_fill});
}

static void gen_index_put(bpc_gen_t* g) {
  for (size_t k = 0; k < COUNT(kData); k++) {
    uint32_t d = kData[k];
    for (int acc = 0; acc < 2; acc++) {
      for (size_t j = 0; j < COUNT(kAdv); j++) {
        if (g->quick && !kAdv[j].row.quick) continue;
        if (!acc && j == 1) continue; /* broadcast indices repeat positions */
        if (!bpc_dtype_is_float(d) && j != 0 && j != 3 && j != 4) continue;
        for (int vb = 0; vb < 2; vb++) { /* values: full shape, or broadcast from the last dim */
          if (vb && j != 0) continue;
          char label[BPC_DTYPE_LABEL_MAX];
          snprintf(label, sizeof label, "%s", bpc_dtype_name(d));
          char axis[48];
          snprintf(axis, sizeof axis, "%s_%s%s", kAdv[j].row.axis, acc ? "acc" : "set", vb ? "_bcast" : "");
          bpc_case_t* c = bpc_gen_new(g, label, axis, 0);
          if (!c) return;
          uint32_t n = (uint32_t)kAdv[j].n;
          c->num_inputs = 2 + n;
          set_data(&c->in[0], d, S3(5, 6, 7), j % 2 ? BPC_LAYOUT_STRIDED : 0);
          bpc_shape_t r = adv_fill(c, &kAdv[j], k % 2 ? BP_DTYPE_I32 : BP_DTYPE_I64);
          bpc_shape_t vs = vb ? S1(r.rank ? r.sizes[r.rank - 1] : 1) : r;
          bpc_operand_set(&c->in[1 + n], d, vs, j % 3 == 2 ? BPC_LAYOUT_TRANSPOSED : 0, BPC_V_RANDOM, 0, 0);
          bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), j % 2 ? BPC_LAYOUT_OFFSET : 0, 0, 0, 0);
          c->has_attrs = 1;
          c->attrs.index_put.struct_size = sizeof c->attrs.index_put;
          c->attrs.index_put.accumulate = (uint32_t)acc;
          if (!acc) keep_with_valid_seed(g, c, 4000);
        }
      }
    }
  }
}

typedef struct masked_scatter_row {
  bpc_row_t row;
  bpc_shape_t self, mask, source;
  uint32_t ls, lm, lsrc, lo;
} masked_scatter_row_t;

static void masked_scatter_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const masked_scatter_row_t* r = row;
  set_data(&c->in[0], at->dtype, r->self, r->ls);
  bpc_operand_set(&c->in[1], BP_DTYPE_BOOL, r->mask, r->lm, BPC_V_RANDOM, 0, 0);
  set_data(&c->in[2], at->dtype, r->source, r->lsrc);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), r->lo, 0, 0, 0);
}

static void gen_masked_scatter(bpc_gen_t* g) {
  static const masked_scatter_row_t rows[] = {
      {{"same_shape", 1}, {2, {4, 5}}, {2, {4, 5}}, {1, {20}}, 0, 0, 0, 0},
      {{"mask_broadcast", 1}, {2, {4, 5}}, {1, {5}}, {2, {5, 6}}, BPC_LAYOUT_TRANSPOSED, 0, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED},
      {{"self_broadcast", 0}, {1, {5}}, {3, {2, 3, 5}}, {1, {40}}, BPC_LAYOUT_OFFSET, BPC_LAYOUT_TRANSPOSED, 0, BPC_LAYOUT_OFFSET},
      {{"0d", 0}, {0, {0}}, {0, {0}}, {1, {1}}, 0, 0, 0, 0},
      {{"empty", 0}, {2, {0, 3}}, {2, {0, 3}}, {1, {0}}, 0, 0, 0, 0},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), DATA_DTYPES, .num_inputs = 3, .num_outputs = 1,
                                  .fill = masked_scatter_fill});
}

typedef struct nonzero_row {
  bpc_row_t row;
  bpc_shape_t s;
  uint32_t l, lo, values;
} nonzero_row_t;

static void nonzero_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const nonzero_row_t* r = row;
  bpc_operand_set(&c->in[0], at->dtype, r->s, r->l, r->values, 0, 0);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), r->lo, 0, 0, 0);
}

static void gen_nonzero(bpc_gen_t* g) {
  static const nonzero_row_t rows[] = {
      {{"sparse", 1}, {2, {6, 7}}, 0, 0, BPC_V_RANDOM | BPC_V_SPARSE},
      {{"special", 1}, {1, {40}}, BPC_LAYOUT_OFFSET, BPC_LAYOUT_STRIDED, BPC_V_SPECIAL | BPC_V_NONFINITE},
      {{"3d_transposed", 0}, {3, {3, 4, 5}}, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_TRANSPOSED, BPC_V_RANDOM | BPC_V_SPARSE},
      {{"0d", 0}, {0, {0}}, 0, 0, BPC_V_RANDOM},
      {{"empty", 0}, {2, {0, 3}}, 0, 0, BPC_V_RANDOM},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), DATA_DTYPES, .num_inputs = 1, .num_outputs = 2, .fill = nonzero_fill});
}

static void gen_embedding_bag(bpc_gen_t* g) {
  static const char* kModes[] = {"sum", "mean", "max"};
  for (size_t k = 0; k < BPC_NUM_FLOAT_DTYPES; k++) {
    uint32_t d = bpc_float_dtypes[k];
    for (uint32_t mode = 0; mode < 3; mode++) {
      struct { const char* axis; int64_t n, noff; int last; int64_t pad; int psw; uint32_t lw, lo; uint32_t it, ot; int quick; } v[] = {
          {"bags", 12, 4, 0, -1, 0, 0, 0, BP_DTYPE_I64, BP_DTYPE_I64, 1},
          {"last_offset", 9, 4, 1, -1, 0, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BP_DTYPE_I32, BP_DTYPE_I32, 1},
          {"padding_idx", 10, 3, 0, 2, 0, BPC_LAYOUT_OFFSET, 0, BP_DTYPE_I64, BP_DTYPE_I32, 0},
          {"per_sample_weights", 8, 3, 0, -1, 1, 0, BPC_LAYOUT_OFFSET, BP_DTYPE_I64, BP_DTYPE_I64, 0},
          {"one_bag", 6, 1, 0, -1, 0, 0, 0, BP_DTYPE_I32, BP_DTYPE_I64, 0},
          {"empty_indices", 0, 3, 0, -1, 0, 0, 0, BP_DTYPE_I64, BP_DTYPE_I64, 0},
      };
      for (size_t j = 0; j < COUNT(v); j++) {
        if (g->quick && !v[j].quick) continue;
        if (v[j].psw && mode != BP_BAG_SUM) continue;
        char axis[48];
        snprintf(axis, sizeof axis, "%s_%s", kModes[mode], v[j].axis);
        bpc_case_t* c = bpc_gen_new(g, bpc_dtype_name(d), axis, 0);
        if (!c) return;
        c->num_inputs = 4;
        c->num_outputs = 4;
        bpc_operand_set(&c->in[0], d, S2(7, 5), v[j].lw, BPC_V_RANDOM, 0, 0);
        set_index(&c->in[1], v[j].it, S1(v[j].n), 0, 0, 6);
        set_index(&c->in[2], v[j].ot, S1(v[j].noff), 0, 0, v[j].n);
        if (v[j].psw) bpc_operand_set(&c->in[3], d, S1(v[j].n), BPC_LAYOUT_STRIDED, BPC_V_RANDOM, -2, 2);
        for (int o = 0; o < 4; o++) bpc_operand_set(&c->out[o], BP_DTYPE_INVALID, S0(), o == 0 ? v[j].lo : 0, 0, 0, 0);
        c->has_attrs = 1;
        bp_embedding_attrs_t* a = &c->attrs.embedding;
        a->struct_size = sizeof *a;
        a->mode = mode;
        a->padding_idx = v[j].pad;
        a->include_last_offset = (uint32_t)v[j].last;
        keep_with_valid_seed(g, c, 20000);
      }
    }
  }
}

typedef struct dense_backward_row {
  bpc_row_t row;
  bpc_shape_t idx; /* the grad is idx's shape and 5 */
  int64_t nw, pad;
  int freq;
  uint32_t lg, li, lo, it;
} dense_backward_row_t;

static void dense_backward_fill(bpc_case_t* c, const void* row, const bpc_table_at_t* at) {
  const dense_backward_row_t* r = row;
  bpc_shape_t gs = r->idx;
  gs.sizes[gs.rank++] = 5;
  bpc_operand_set(&c->in[0], at->dtype, gs, r->lg, BPC_V_RANDOM, 0, 0);
  set_index(&c->in[1], r->it, r->idx, r->li, 0, r->nw - 1);
  bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), r->lo, 0, 0, 0);
  bp_embedding_attrs_t* a = BPC_CASE_ATTRS(c, embedding);
  a->padding_idx = r->pad;
  a->num_weights = r->nw;
  a->scale_grad_by_freq = (uint32_t)r->freq;
}

static void gen_embedding_dense_backward(bpc_gen_t* g) {
  static const dense_backward_row_t rows[] = {
      {{"plain", 1}, {2, {3, 4}}, 6, -1, 0, 0, 0, 0, BP_DTYPE_I64},
      {{"padding_freq", 1}, {1, {15}}, 5, 1, 1, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, BPC_LAYOUT_STRIDED, BP_DTYPE_I32},
      {{"freq", 0}, {3, {2, 3, 2}}, 4, -1, 1, BPC_LAYOUT_OFFSET, 0, BPC_LAYOUT_TRANSPOSED, BP_DTYPE_I64},
      {{"0d", 0}, {0, {0}}, 3, -1, 0, 0, 0, 0, BP_DTYPE_I64},
      {{"empty", 0}, {1, {0}}, 4, -1, 1, 0, 0, 0, BP_DTYPE_I64},
  };
  bpc_gen_table(g, &(bpc_table_t){BPC_ROWS(rows), BPC_FLOAT_DTYPES, .num_inputs = 2, .num_outputs = 1,
                                  .fill = dense_backward_fill});
}

void bpc_gen_index(bpc_gen_t* g) {
  switch (g->op) {
    case BP_OP_embedding: gen_embedding(g); break;
    case BP_OP_embedding_bag: gen_embedding_bag(g); break;
    case BP_OP_embedding_dense_backward: gen_embedding_dense_backward(g); break;
    case BP_OP_gather: gen_gather(g); break;
    case BP_OP_index: gen_index_op(g); break;
    case BP_OP_index_put: gen_index_put(g); break;
    case BP_OP_index_select: gen_index_select(g); break;
    case BP_OP_masked_scatter: gen_masked_scatter(g); break;
    case BP_OP_nonzero: gen_nonzero(g); break;
    default: break;
  }
}
