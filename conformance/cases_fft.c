/* Case generators of the fft family (fft_r2c, fft_c2r): lengths that are
 * powers of two, mixed radix (2, 3, 4, 5), small primes (generic
 * butterflies) and primes above the CPU kernel's largest radix (Bluestein);
 * every normalization; onesided and not; several dims in any order; strided,
 * transposed and offset inputs and outputs; empty batches. Values are finite
 * (a non-finite input spreads over whole lines in a pattern the semantics
 * leave open). */
#include <stdio.h>
#include <string.h>

#include "cases_internal.h"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

void bpc_gen_fft(bpc_gen_t* g);

typedef struct fft_spec {
  const char* axis;
  bpc_shape_t s; /* r2c: the input; c2r: the output (the input is derived) */
  uint32_t nd;
  int32_t dims[3];
  uint32_t norm, onesided, lin, lout;
  int64_t extra; /* c2r: frequencies beyond N / 2 + 1 in the input (ignored) */
  int quick;
} fft_spec_t;

void bpc_gen_fft(bpc_gen_t* g) {
  int r2c = g->op == BP_OP_fft_r2c;
  const fft_spec_t v[] = {
      {"n1", S1(1), 1, {0}, 0, 1, 0, 0, 0, 1},
      {"n2", S1(2), 1, {0}, 0, 1, 0, 0, 0, 0},
      {"n5", S1(5), 1, {0}, 2, 1, 0, 0, 0, 0},
      {"n8", S1(8), 1, {0}, 1, 1, 0, 0, 0, 1},
      {"n12", S1(12), 1, {-1}, 0, 0, 0, 0, 0, 0},
      {"n17_prime", S1(17), 1, {0}, 2, 1, 0, 0, 0, 1},
      {"n37_bluestein", S1(37), 1, {0}, 0, 1, 0, 0, 0, 1},
      {"n60_mixed", S2(2, 60), 1, {1}, 1, 1, 0, 0, 0, 0},
      {"n64", S2(3, 64), 1, {-1}, 2, 0, 0, 0, 0, 0},
      {"n74_bluestein", S2(2, 74), 1, {1}, 1, 1, 0, 0, 0, 0},
      {"n97_bluestein", S1(97), 1, {0}, 2, 0, 0, 0, 0, 0},
      {"batch_dim0", S2(9, 4), 1, {0}, 0, 1, 0, 0, 0, 0},
      {"2d", S2(6, 10), 2, {0, 1}, 2, 1, 0, 0, 0, 1},
      {"2d_last_first", S2(6, 10), 2, {1, 0}, 1, 1, 0, 0, 0, 0},
      {"3d_two_dims", S3(3, 8, 6), 2, {1, 2}, 0, 1, 0, 0, 0, 0},
      {"3d_all", S3(4, 3, 5), 3, {0, 1, 2}, 2, 1, 0, 0, 0, 0},
      {"strided", S2(5, 12), 1, {1}, 2, 1, BPC_LAYOUT_STRIDED, BPC_LAYOUT_TRANSPOSED, 0, 1},
      {"transposed", S2(6, 7), 2, {0, 1}, 0, 1, BPC_LAYOUT_TRANSPOSED, BPC_LAYOUT_STRIDED, 0, 0},
      {"offset", S3(2, 3, 9), 1, {-1}, 1, 1, BPC_LAYOUT_OFFSET, BPC_LAYOUT_OFFSET, 0, 0},
      {"empty_batch", S2(0, 8), 1, {1}, 0, 1, 0, 0, 0, 0},
      {"extra_freqs", S2(3, 10), 1, {1}, 2, 1, 0, 0, 3, 0},
  };
  for (size_t i = 0; i < COUNT(v); i++) {
    const fft_spec_t* s = &v[i];
    if (g->quick && !s->quick) continue;
    if (r2c && s->extra) continue;
    bpc_case_t* c = bpc_gen_new(g, r2c ? "f32" : "c64", s->axis, 0);
    if (!c) return;
    c->num_inputs = 1;
    bp_fft_attrs_t* a = &c->attrs.fft;
    c->has_attrs = 1;
    a->struct_size = sizeof *a;
    a->num_dims = s->nd;
    for (uint32_t k = 0; k < s->nd; k++) a->dims[k] = s->dims[k];
    a->normalization = s->norm;
    a->onesided = s->onesided;
    bpc_shape_t in = s->s;
    if (!r2c) { /* the last listed dim holds N / 2 + 1 (+ extra) frequencies */
      uint32_t last = (uint32_t)(s->dims[s->nd - 1] < 0 ? s->dims[s->nd - 1] + (int32_t)in.rank
                                                          : s->dims[s->nd - 1]);
      a->last_dim_size = in.sizes[last];
      in.sizes[last] = in.sizes[last] / 2 + 1 + s->extra;
      a->onesided = 1;
    }
    bpc_operand_set(&c->in[0], r2c ? BP_DTYPE_F32 : BP_DTYPE_C64, in, s->lin, BPC_V_RANDOM, -1.0, 1.0);
    bpc_operand_set(&c->out[0], BP_DTYPE_INVALID, S0(), s->lout, 0, 0, 0);
  }
}
