/* Compressed payloads across processes (the kit's block encoding: one code
 * per element, one f32 scale per `block` elements; bp_kit_comm.h).
 *
 * Records: a range of elements travels as its scales, then its codes
 * padded to 4 bytes; every record of one call has the same capacity (the
 * largest range), so plain MPI_Ialltoall / MPI_Iallgather move them.
 *   all_reduce: rank r owns chunk r (whole blocks). Every rank encodes its
 *     input into n records (one per chunk) and MPI_Ialltoall's them (step
 *     3); step 5 decodes and sums the n records of chunk r tile by tile in
 *     rank order (bp_kit_comm_decode_sum), encodes the sum again, and
 *     MPI_Iallgather's the chunk records, which every rank (r included)
 *     decodes: all ranks agree bit for bit. Each rank receives
 *     2 (n - 1) / n x (count + 4 x blocks) bytes, the ring's bus bytes at
 *     about a quarter of f32's.
 *   reduce_scatter: n records (one per destination block), MPI_Ialltoall,
 *     then decode and sum block r.
 *   all_gather: one record per rank, MPI_Iallgather, every record decoded.
 * Error bound per element of block b (A_b the largest |input| of the
 * block over the ranks, int8; e4m3fn as docs/collectives.md says): SUM
 * all_reduce <= 2n A_b / 254 (the inputs' codes, then the sum's),
 * reduce_scatter <= n A_b / 254, all_gather <= A_b / 254.
 */
#include <stdlib.h>
#include <string.h>

#include "bp_kit.h"
#include "bp_kit_comm.h"
#include "mpi_internal.h"

/* Capacity of a record of `elems` elements: scales, then codes. */
static uint64_t scales_of(uint64_t elems, uint32_t block) {
  return 4 * bp_kit_comm_scale_count(elems, block);
}
static uint64_t record_bytes(uint64_t elems, uint32_t block) {
  return scales_of(elems, block) + ((elems + 3) & ~(uint64_t)3);
}

/* all_reduce chunk q: whole blocks, the first chunks one block longer. */
static void chunk_range(const bp_mpi_op_t* op, int q, uint64_t* begin, uint64_t* len) {
  const uint64_t nb = bp_kit_comm_scale_count(op->count, op->block), n = (uint64_t)op->comm->size;
  const uint64_t base = nb / n, extra = nb % n, uq = (uint64_t)q;
  const uint64_t b0 = uq * base + (uq < extra ? uq : extra), nbq = base + (uq < extra ? 1 : 0);
  *begin = b0 * op->block < op->count ? b0 * op->block : op->count;
  const uint64_t end = (b0 + nbq) * op->block < op->count ? (b0 + nbq) * op->block : op->count;
  *len = end - *begin;
}

/* Elements per record and the range of record q of this rank's input. */
static uint64_t record_elems(const bp_mpi_op_t* op) {
  if (op->kind != BP_MPI_ALL_REDUCE) return op->count;
  uint64_t b, len;
  chunk_range(op, 0, &b, &len); /* chunk 0 is the longest */
  return len;
}
static void input_range(const bp_mpi_op_t* op, int q, uint64_t* begin, uint64_t* len) {
  if (op->kind == BP_MPI_ALL_REDUCE) {
    chunk_range(op, q, begin, len);
  } else { /* reduce_scatter: block q; all_gather: the whole input */
    *begin = op->kind == BP_MPI_REDUCE_SCATTER ? (uint64_t)q * op->count : 0;
    *len = op->count;
  }
}

/* The records of a call in op->tmp: n to send (all_gather: 1), n
 * received, one of this rank's result (all_reduce), n gathered. */
typedef struct records {
  uint64_t rb, elems;
  unsigned char *out, *in, *mine, *gathered;
} records_t;

static records_t records_of(const bp_mpi_op_t* op) {
  const uint64_t n = (uint64_t)op->comm->size;
  records_t r;
  r.elems = record_elems(op);
  r.rb = record_bytes(r.elems, op->block);
  const uint64_t nout = op->kind == BP_MPI_ALL_GATHER ? 1 : n;
  r.out = op->tmp;
  r.in = r.out + nout * r.rb;
  r.mine = r.in + n * r.rb;
  r.gathered = r.mine + r.rb;
  return r;
}

static uint64_t tmp_bytes(const bp_mpi_op_t* op, uint64_t rb) {
  const uint64_t n = (uint64_t)op->comm->size;
  return op->kind == BP_MPI_ALL_REDUCE ? (3 * n + 1) * rb : 2 * n * rb;
}

static const float* rec_scales(const unsigned char* rec) { return (const float*)(const void*)rec; }
static const int8_t* rec_codes(const unsigned char* rec, uint64_t elems, uint32_t block) {
  return (const int8_t*)(rec + scales_of(elems, block));
}

static void encode_into(const bp_mpi_op_t* op, uint32_t dtype, const void* src, uint64_t first,
                        uint64_t len, unsigned char* rec, uint64_t elems) {
  bp_kit_comm_encode(dtype, op->comp, op->block, src, first, len,
                     (int8_t*)(rec + scales_of(elems, op->block)), (float*)(void*)rec);
}

static bp_status_t bytes_type(bp_mpi_h* type) {
  bp_mpi_h mop = NULL;
  uint32_t mult = 1;
  return bp_mpi_types(BP_DTYPE_U8, -1, type, &mop, &mult);
}

bp_status_t bp_mpi_post_compressed(bp_mpi_op_t* op) {
  struct bpp_comm_s* c = op->comm;
  const int n = c->size;
  const uint64_t elems = record_elems(op), rb = record_bytes(elems, op->block);
  op->tmp = calloc(1, (size_t)tmp_bytes(op, rb) + 1); /* zeroed: the padding travels too */
  if (!op->tmp) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  const records_t r = records_of(op);
  const int nout = op->kind == BP_MPI_ALL_GATHER ? 1 : n;
  for (int q = 0; q < nout; ++q) {
    uint64_t b, len;
    input_range(op, q, &b, &len);
    encode_into(op, op->dtype, op->send, b, len, r.out + (uint64_t)q * rb, elems);
  }
  bp_mpi_h type = NULL;
  bp_status_t st = bytes_type(&type);
  if (st != BP_OK) return st;
  int rc;
  if (op->kind == BP_MPI_ALL_GATHER)
    BP_MPI(rc, MPI_Iallgather, r.out, (int)rb, type, r.in, (int)rb, type, c->comm, &op->req[0]);
  else
    BP_MPI(rc, MPI_Ialltoall, r.out, (int)rb, type, r.in, (int)rb, type, c->comm, &op->req[0]);
  op->nreq = rc == BP_MPI_SUCCESS;
  return bp_mpi_check(rc, op->kind == BP_MPI_ALL_GATHER ? "compressed: MPI_Iallgather"
                                                        : "compressed: MPI_Ialltoall");
}

/* The sum of the n received records (rank order) into acc; AVG divides. */
static bp_status_t sum_records(const bp_mpi_op_t* op, const records_t* r, uint64_t len,
                               float* acc) {
  const int n = op->comm->size;
  const int8_t** codes = malloc(sizeof(*codes) * (size_t)n);
  const float** scales = malloc(sizeof(*scales) * (size_t)n);
  if (!codes || !scales) {
    free(codes);
    free(scales);
    return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  }
  for (int q = 0; q < n; ++q) {
    codes[q] = rec_codes(r->in + (uint64_t)q * r->rb, r->elems, op->block);
    scales[q] = rec_scales(r->in + (uint64_t)q * r->rb);
  }
  bp_kit_comm_decode_sum(op->comp, op->block, codes, scales, (uint32_t)n, 0, len, acc);
  free(codes);
  free(scales);
  if (op->rop == BP_REDUCE_AVG)
    for (uint64_t i = 0; i < len; ++i) acc[i] /= (float)n;
  return BP_OK;
}

static void decode_record(const bp_mpi_op_t* op, const records_t* r, const unsigned char* rec,
                          uint64_t len, uint64_t dst_first) {
  bp_kit_comm_decode(op->dtype, op->comp, op->block, rec_codes(rec, r->elems, op->block),
                     rec_scales(rec), 0, len, op->recv, dst_first);
}

bp_status_t bp_mpi_finish_compressed(bp_mpi_op_t* op) {
  struct bpp_comm_s* c = op->comm;
  const int n = c->size, me = c->rank;
  const records_t r = records_of(op);
  if (op->kind == BP_MPI_ALL_GATHER) {
    for (int q = 0; q < n; ++q)
      decode_record(op, &r, r.in + (uint64_t)q * r.rb, op->count, (uint64_t)q * op->count);
    return BP_OK;
  }
  uint64_t b = 0, len = op->count;
  if (op->kind == BP_MPI_ALL_REDUCE) chunk_range(op, me, &b, &len);
  float* acc = malloc(sizeof(float) * (size_t)(len ? len : 1));
  if (!acc) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  bp_status_t st = sum_records(op, &r, len, acc);
  if (st != BP_OK || op->kind == BP_MPI_REDUCE_SCATTER) {
    if (st == BP_OK) bp_kit_comm_store_floats(op->dtype, acc, len, op->recv, 0);
    free(acc);
    return st;
  }
  /* all_reduce: chunk r travels encoded again; every rank decodes every
   * chunk record, its own included. */
  encode_into(op, BP_DTYPE_F32, acc, 0, len, r.mine, r.elems);
  free(acc);
  bp_mpi_h type = NULL;
  st = bytes_type(&type);
  if (st != BP_OK) return st;
  int rc;
  BP_MPI(rc, MPI_Iallgather, r.mine, (int)r.rb, type, r.gathered, (int)r.rb, type, c->comm,
         &op->req[0]);
  if (rc != BP_MPI_SUCCESS) return bp_mpi_check(rc, "compressed all_reduce: MPI_Iallgather");
  op->nreq = 1;
  st = bp_mpi_wait(c, op->req, 1, NULL, op->start_ns, bp_mpi_kind_name(op->kind), op->seq);
  if (st != BP_OK) {
    op->abandoned = 1; /* its request may be pending: op->tmp is parked */
    return st;
  }
  op->nreq = 0;
  for (int q = 0; q < n; ++q) {
    uint64_t qb, ql;
    chunk_range(op, q, &qb, &ql);
    decode_record(op, &r, r.gathered + (uint64_t)q * r.rb, ql, qb);
  }
  return BP_OK;
}

uint64_t bp_mpi_compressed_record_bytes(const bp_mpi_op_t* op) {
  return record_bytes(record_elems(op), op->block);
}
