/* backplane plugin kit: compressed rounds of the shared-memory engine
 * (kit_comm_shm.c; bp_collective_options_t.compression across processes).
 *
 * A compressed call moves codes and scales through the slots instead of
 * the elements, in the engine's rounds. A slot holds `parts` parts of the
 * same layout: `seg` codes (one per element), then one f32 scale per
 * block; all_gather has one part (this rank's input), reduce_scatter one
 * per destination rank, all_reduce two (the input, and the reduced chunk
 * this rank owns, encoded again). A round covers elements [off, off + seg)
 * of each segment (all_reduce, all_gather: the tensor; reduce_scatter: each
 * destination's count), and `seg` is a multiple of the block whenever a
 * block fits a part, so blocks are those of the whole call: the results are
 * bitwise those of the in-process engine. A block larger than a part is
 * quantized in pieces of a round each (each piece's scale from its own
 * largest |x|, which is at most the block's: the documented bounds hold).
 * The steps are the in-process engine's (kit_comm.c): encode each input
 * once; decode and sum in rank order in f32; all_reduce encodes its chunk's
 * sum again and every rank, the owner included, decodes those codes.
 */
#include <string.h>

#include "kit_comm_shm.h"

static uint64_t align64(uint64_t x) { return (x + 63u) & ~(uint64_t)63u; }

static uint32_t parts_of(const bp_kit_coll_t* c, int32_t n) {
  switch (c->kind) {
    case BP_KIT_COLL_ALL_REDUCE: return 2;
    case BP_KIT_COLL_REDUCE_SCATTER: return (uint32_t)n;
    default: return 1;
  }
}

bp_kit_qplan_t bp_kit_qplan(const bp_kit_coll_t* c, int32_t n, uint64_t slot_bytes) {
  bp_kit_qplan_t p;
  const uint64_t block = c->block, room = slot_bytes / parts_of(c, n);
  /* k whole blocks take k * block codes and 4 k scale bytes, each area
   * rounded up to 64 bytes (at most 126 more). */
  const uint64_t k = room > 126 ? (room - 126) / (block + 4) : 0;
  p.seg = k ? k * block : room - 132; /* else a piece of a block: one scale */
  p.scales_at = align64(p.seg);
  p.part_bytes = align64(p.scales_at + 4 * bp_kit_comm_scale_count(p.seg, c->block));
  return p;
}

static int8_t* codes_at(unsigned char* slot, const bp_kit_qplan_t* p, uint64_t part) {
  return (int8_t*)(slot + part * p->part_bytes);
}
static float* scales_at(unsigned char* slot, const bp_kit_qplan_t* p, uint64_t part) {
  return (float*)(slot + part * p->part_bytes + p->scales_at);
}

static uint64_t round_len(uint64_t count, uint64_t off, uint64_t seg) {
  return count > off ? (count - off < seg ? count - off : seg) : 0;
}

void bp_kit_qround_publish(const bp_kit_qround_t* q, const void* input, uint64_t off) {
  const bp_kit_coll_t* c = q->call;
  const uint64_t len = round_len(c->count, off, q->plan.seg);
  unsigned char* mine = q->slot(q->user, q->rank);
  const uint64_t parts = c->kind == BP_KIT_COLL_REDUCE_SCATTER ? (uint64_t)q->n : 1;
  for (uint64_t d = 0; d < parts; ++d)
    bp_kit_comm_encode(c->dtype, c->compression, c->block, input, d * c->count + off, len,
                       codes_at(mine, &q->plan, d), scales_at(mine, &q->plan, d));
}

/* acc = the sum over ranks, in rank order, of part `part` elements
 * [b, b + len) of the round; divided by n for AVG. */
static void sum_part(const bp_kit_qround_t* q, uint64_t part, uint64_t b, uint64_t len) {
  const bp_kit_coll_t* c = q->call;
  for (int32_t r = 0; r < q->n; ++r) {
    unsigned char* slot = q->slot(q->user, r);
    q->peer_codes[r] = codes_at(slot, &q->plan, part);
    q->peer_scales[r] = scales_at(slot, &q->plan, part);
  }
  bp_kit_comm_decode_sum(c->compression, c->block, q->peer_codes, q->peer_scales,
                         (uint32_t)q->n, b, len, q->acc);
  if (c->op == BP_REDUCE_AVG)
    for (uint64_t i = 0; i < len; ++i) q->acc[i] /= (float)q->n;
}

int bp_kit_qround_consume(const bp_kit_qround_t* q, uint64_t off) {
  const bp_kit_coll_t* c = q->call;
  const uint64_t len = round_len(c->count, off, q->plan.seg);
  switch (c->kind) {
    case BP_KIT_COLL_ALL_GATHER:
      for (int32_t r = 0; r < q->n; ++r) {
        unsigned char* slot = q->slot(q->user, r);
        bp_kit_comm_decode(c->dtype, c->compression, c->block, codes_at(slot, &q->plan, 0),
                           scales_at(slot, &q->plan, 0), 0, len, c->recv,
                           (uint64_t)r * c->count + off);
      }
      return 0;
    case BP_KIT_COLL_REDUCE_SCATTER:
      sum_part(q, (uint64_t)q->rank, 0, len);
      bp_kit_comm_store_floats(c->dtype, q->acc, len, c->recv, off);
      return 0;
    case BP_KIT_COLL_ALL_REDUCE: {
      uint64_t b, e;
      bp_kit_comm_block_chunk(len, c->block, q->n, q->rank, &b, &e);
      sum_part(q, 0, b, e - b);
      unsigned char* mine = q->slot(q->user, q->rank);
      bp_kit_comm_encode(BP_DTYPE_F32, c->compression, c->block, q->acc, 0, e - b,
                         codes_at(mine, &q->plan, 1) + b,
                         scales_at(mine, &q->plan, 1) + b / c->block);
      return 1;
    }
    default: return 0;
  }
}

void bp_kit_qround_gather(const bp_kit_qround_t* q, uint64_t off) {
  const bp_kit_coll_t* c = q->call;
  const uint64_t len = round_len(c->count, off, q->plan.seg);
  for (int32_t r = 0; r < q->n; ++r) {
    uint64_t b, e;
    bp_kit_comm_block_chunk(len, c->block, q->n, r, &b, &e);
    unsigned char* slot = q->slot(q->user, r);
    bp_kit_comm_decode(c->dtype, c->compression, c->block, codes_at(slot, &q->plan, 1),
                       scales_at(slot, &q->plan, 1), b, e - b, c->recv, off + b);
  }
}
