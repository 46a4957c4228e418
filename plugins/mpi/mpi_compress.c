/* Compressed payloads across processes (the kit's block encoding: one code
 * per element, one f32 scale per `block` elements; bp_kit_comm.h),
 * pipelined.
 *
 * Segments: what this rank encodes for each destination. all_reduce: rank
 * r owns chunk r (whole blocks), segment q is chunk q of the input;
 * reduce_scatter: segment q is block q of the input; all_gather: one
 * segment, the whole input, sent to every rank.
 *
 * Pieces: every segment is cut into K pieces of `pelems` elements (whole
 * blocks; BP_MPI_PIECE_ELEMS unless the segment is shorter). A piece of a
 * segment travels as a record: its scales, then its codes padded to 4
 * bytes; all records of a call have the same capacity, so one plain
 * MPI_Ialltoall (MPI_Iallgather for all_gather) moves piece p of every
 * segment. Step s of the pipeline:
 *   1. encodes piece s of every segment and posts its exchange (A[s]);
 *   2. waits for A[s - 1] and consumes it: all_gather decodes the n
 *      records into the output; reduce_scatter decodes and sums them in
 *      rank order into the output (one pass per record, into the f32
 *      accumulator); all_reduce sums them into the accumulator, encodes
 *      the sum once and posts its MPI_Iallgather (G[s - 1]);
 *   3. all_reduce: waits for G[s - 2] and decodes the n gathered records
 *      (its own included, so all ranks agree bit for bit) into the output.
 * While a step encodes or decodes, it tests the exchanges in flight (MPI
 * progresses nonblocking collectives only inside MPI calls), so the
 * transfer of one piece overlaps the codec work of its neighbours.
 * Received codes are never encoded again: the gathered records of
 * all_reduce are decoded as they arrive, and all_gather's as well. Each
 * rank receives 2 (n - 1) / n x (count + 4 x blocks) bytes for
 * all_reduce, the ring's bus bytes at about a quarter of f32's.
 *
 * Error bound per element of block b (A_b the largest |input| of the
 * block over the ranks, int8; e4m3fn as docs/collectives.md says): SUM
 * all_reduce <= 2n A_b / 254 (the inputs' codes, then the sum's),
 * reduce_scatter <= n A_b / 254, all_gather <= A_b / 254. Pipelining
 * does not change it: pieces are whole blocks, each quantized as before.
 *
 * Buffers: one allocation per call, taken from the communicator's scratch
 * (kept between calls, so a large call does not fault in fresh pages
 * every time) and given back by bp_mpi_op_free, or parked with the
 * requests when the call is abandoned. */
#include <stdlib.h>
#include <string.h>

#include "bp_kit.h"
#include "bp_kit_comm.h"
#include "mpi_internal.h"

/* Elements per piece: 2^18 (1 MiB of f32, 256 KiB of int8 codes per
 * record) keeps several pieces in flight for the messages where
 * compression matters and one piece for small ones.
 * BACKPLANE_MPI_COMPRESS_PIECE=k sets 2^k (k in 4..24; tests use small
 * pieces); ranks must agree, which the header exchange checks. */
#define BP_MPI_PIECE_LOG2 18

uint32_t bp_mpi_piece_log2(void) {
  const char* v = getenv("BACKPLANE_MPI_COMPRESS_PIECE");
  const long k = v && *v ? strtol(v, NULL, 10) : BP_MPI_PIECE_LOG2;
  return k >= 4 && k <= 24 ? (uint32_t)k : BP_MPI_PIECE_LOG2;
}

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

/* Segment q of this rank's input. */
static void segment(const bp_mpi_op_t* op, int q, uint64_t* begin, uint64_t* len) {
  if (op->kind == BP_MPI_ALL_REDUCE) {
    chunk_range(op, q, begin, len);
  } else { /* reduce_scatter: block q; all_gather: the whole input */
    *begin = op->kind == BP_MPI_REDUCE_SCATTER ? (uint64_t)q * op->count : 0;
    *len = op->count;
  }
}

/* The layout of a call: pieces of `pelems` elements, records of `rb`
 * bytes; per piece, `nout` records sent, n received, and (all_reduce)
 * one of this rank's sum and n gathered; then the accumulator. */
typedef struct plan {
  uint64_t elems;  /* the longest segment */
  uint64_t pelems; /* elements per piece (whole blocks) */
  uint32_t pieces;
  uint64_t rb;    /* bytes per record */
  int n, nout;
  uint64_t piece_bytes; /* every record of one piece */
  uint64_t total;       /* the whole allocation */
} plan_t;

static plan_t plan_of(const bp_mpi_op_t* op) {
  plan_t p;
  p.n = op->comm->size;
  p.nout = op->kind == BP_MPI_ALL_GATHER ? 1 : p.n;
  uint64_t b, len;
  segment(op, 0, &b, &len); /* segment 0 is the longest */
  p.elems = len;
  const uint64_t piece = (uint64_t)1 << (op->piece_log2 ? op->piece_log2 : BP_MPI_PIECE_LOG2);
  const uint64_t want = piece < op->block ? op->block : piece / op->block * op->block;
  p.pelems = len < want ? len : want;
  p.pieces = p.pelems ? (uint32_t)((len + p.pelems - 1) / p.pelems) : 1;
  p.rb = record_bytes(p.pelems, op->block);
  const uint64_t per = (uint64_t)p.nout + (uint64_t)p.n +
                       (op->kind == BP_MPI_ALL_REDUCE ? 1 + (uint64_t)p.n : 0);
  p.piece_bytes = per * p.rb;
  p.total = p.piece_bytes * p.pieces + 4 * (p.pelems ? p.pelems : 1);
  return p;
}

/* The records of piece k in op->tmp. */
static unsigned char* out_rec(const bp_mpi_op_t* op, const plan_t* p, uint32_t k, int q) {
  return (unsigned char*)op->tmp + k * p->piece_bytes + (uint64_t)q * p->rb;
}
static unsigned char* in_rec(const bp_mpi_op_t* op, const plan_t* p, uint32_t k, int q) {
  return out_rec(op, p, k, p->nout + q);
}
static unsigned char* mine_rec(const bp_mpi_op_t* op, const plan_t* p, uint32_t k) {
  return out_rec(op, p, k, p->nout + p->n);
}
static unsigned char* gathered_rec(const bp_mpi_op_t* op, const plan_t* p, uint32_t k, int q) {
  return out_rec(op, p, k, p->nout + p->n + 1 + q);
}
static float* accumulator(const bp_mpi_op_t* op, const plan_t* p) {
  return (float*)(void*)((unsigned char*)op->tmp + p->pieces * p->piece_bytes);
}

static const float* rec_scales(const unsigned char* rec) { return (const float*)(const void*)rec; }
static const int8_t* rec_codes(const plan_t* p, const unsigned char* rec, uint32_t block) {
  return (const int8_t*)(rec + scales_of(p->pelems, block));
}

/* Piece k of a range [begin, begin + len): its first element and length. */
static uint64_t piece_len(const plan_t* p, uint32_t k, uint64_t len, uint64_t* first) {
  const uint64_t at = (uint64_t)k * p->pelems;
  *first = at;
  return at >= len ? 0 : (len - at < p->pelems ? len - at : p->pelems);
}

/* Encodes `len` elements at src[first..] into a record; the padding after
 * the codes is zeroed (it travels). */
static void encode_record(const bp_mpi_op_t* op, const plan_t* p, uint32_t dtype, const void* src,
                          uint64_t first, uint64_t len, unsigned char* rec) {
  int8_t* codes = (int8_t*)(rec + scales_of(p->pelems, op->block));
  bp_kit_comm_encode(dtype, op->comp, op->block, src, first, len, codes, (float*)(void*)rec);
  memset(codes + len, 0, (size_t)(((p->pelems + 3) & ~(uint64_t)3) - len));
  memset(rec + scales_of(len, op->block), 0,
         (size_t)(scales_of(p->pelems, op->block) - scales_of(len, op->block)));
}

static bp_status_t bytes_type(bp_mpi_h* type) {
  bp_mpi_h mop = NULL;
  uint32_t mult = 1;
  return bp_mpi_types(BP_DTYPE_U8, -1, type, &mop, &mult);
}

/* ---- the communicator's scratch ------------------------------------------ */
static bp_status_t scratch_take(bp_mpi_op_t* op, uint64_t bytes) {
  struct bpp_comm_s* c = op->comm;
  pthread_mutex_lock(&c->lock);
  void* buf = c->scratch;
  size_t cap = c->scratch_cap;
  c->scratch = NULL;
  c->scratch_cap = 0;
  pthread_mutex_unlock(&c->lock);
  if (buf && cap < bytes) {
    free(buf);
    buf = NULL;
  }
  if (!buf) {
    cap = (size_t)bytes;
    buf = malloc(cap ? cap : 1);
    if (!buf) return bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  }
  op->tmp = buf;
  op->tmp_cap = cap;
  return BP_OK;
}

void bp_mpi_scratch_give(struct bpp_comm_s* comm, void* buf, size_t cap) {
  pthread_mutex_lock(&comm->lock);
  if (!comm->scratch || comm->scratch_cap < cap) {
    free(comm->scratch);
    comm->scratch = buf;
    comm->scratch_cap = cap;
    buf = NULL;
  }
  pthread_mutex_unlock(&comm->lock);
  free(buf);
}

/* ---- the pipeline --------------------------------------------------------- */
typedef struct pipe {
  bp_mpi_op_t* op;
  plan_t p;
  bp_mpi_h type;
  bp_mpi_h* reqs; /* op->hreq: A[k] at 2k, G[k] at 2k + 1 */
  uint32_t posted_a, posted_g; /* exchanges posted so far */
  const int8_t** codes; /* n received records of a piece */
  const float** scales;
} pipe_t;

/* Lets MPI progress the exchanges in flight (a test of the newest). */
static void poke(pipe_t* pp) {
  int flag = 0, rc;
  if (pp->posted_a > 0) BP_MPI(rc, MPI_Testall, 1, &pp->reqs[2 * (pp->posted_a - 1)], &flag, NULL);
  if (pp->posted_g > 0) BP_MPI(rc, MPI_Testall, 1, &pp->reqs[2 * (pp->posted_g - 1) + 1], &flag, NULL);
  (void)rc;
}

static bp_status_t wait_one(pipe_t* pp, bp_mpi_h* req) {
  bp_mpi_op_t* op = pp->op;
  /* The call's start for both the deadline and the spin-then-yield
   * policy: an oversubscribed machine gets its cores back soon. */
  return bp_mpi_wait(op->comm, req, 1, NULL, op->start_ns, bp_mpi_kind_name(op->kind), op->seq);
}

/* Step 1 for piece k: encode it for every destination, post A[k]. */
static bp_status_t send_piece(pipe_t* pp, uint32_t k) {
  bp_mpi_op_t* op = pp->op;
  for (int q = 0; q < pp->p.nout; ++q) {
    uint64_t b, len, first;
    segment(op, q, &b, &len);
    const uint64_t m = piece_len(&pp->p, k, len, &first);
    encode_record(op, &pp->p, op->dtype, op->send, b + first, m, out_rec(op, &pp->p, k, q));
    poke(pp);
  }
  int rc;
  const int rb = (int)pp->p.rb;
  if (op->kind == BP_MPI_ALL_GATHER)
    BP_MPI(rc, MPI_Iallgather, out_rec(op, &pp->p, k, 0), rb, pp->type, in_rec(op, &pp->p, k, 0),
           rb, pp->type, op->comm->comm, &pp->reqs[2 * k]);
  else
    BP_MPI(rc, MPI_Ialltoall, out_rec(op, &pp->p, k, 0), rb, pp->type, in_rec(op, &pp->p, k, 0),
           rb, pp->type, op->comm->comm, &pp->reqs[2 * k]);
  if (rc != BP_MPI_SUCCESS)
    return bp_mpi_check(rc, op->kind == BP_MPI_ALL_GATHER ? "compressed: MPI_Iallgather"
                                                          : "compressed: MPI_Ialltoall");
  pp->posted_a = k + 1;
  return BP_OK;
}

/* Decodes record `rec` (piece k of a segment of `len` elements) into the
 * output at element `at`. */
static void decode_piece(pipe_t* pp, uint32_t k, const unsigned char* rec, uint64_t len,
                         uint64_t at) {
  bp_mpi_op_t* op = pp->op;
  uint64_t first;
  const uint64_t m = piece_len(&pp->p, k, len, &first);
  bp_kit_comm_decode(op->dtype, op->comp, op->block, rec_codes(&pp->p, rec, op->block),
                     rec_scales(rec), 0, m, op->recv, at + first);
}

/* Step 2 for piece k. */
static bp_status_t consume_piece(pipe_t* pp, uint32_t k) {
  bp_mpi_op_t* op = pp->op;
  const plan_t* p = &pp->p;
  bp_status_t st = wait_one(pp, &pp->reqs[2 * k]);
  if (st != BP_OK) return st;
  if (op->kind == BP_MPI_ALL_GATHER) {
    for (int q = 0; q < p->n; ++q) {
      decode_piece(pp, k, in_rec(op, p, k, q), op->count, (uint64_t)q * op->count);
      poke(pp);
    }
    return BP_OK;
  }
  uint64_t b = 0, len = op->count, first;
  if (op->kind == BP_MPI_ALL_REDUCE) chunk_range(op, op->comm->rank, &b, &len);
  const uint64_t m = piece_len(p, k, len, &first);
  float* acc = accumulator(op, p);
  for (int q = 0; q < p->n; ++q) {
    pp->codes[q] = rec_codes(p, in_rec(op, p, k, q), op->block);
    pp->scales[q] = rec_scales(in_rec(op, p, k, q));
  }
  bp_kit_comm_decode_sum(op->comp, op->block, pp->codes, pp->scales, (uint32_t)p->n, 0, m, acc);
  poke(pp);
  if (op->rop == BP_REDUCE_AVG)
    for (uint64_t i = 0; i < m; ++i) acc[i] /= (float)p->n;
  if (op->kind == BP_MPI_REDUCE_SCATTER) {
    bp_kit_comm_store_floats(op->dtype, acc, m, op->recv, first);
    return BP_OK;
  }
  /* all_reduce: this rank's piece travels encoded once more. */
  encode_record(op, p, BP_DTYPE_F32, acc, 0, m, mine_rec(op, p, k));
  int rc;
  BP_MPI(rc, MPI_Iallgather, mine_rec(op, p, k), (int)p->rb, pp->type, gathered_rec(op, p, k, 0),
         (int)p->rb, pp->type, op->comm->comm, &pp->reqs[2 * k + 1]);
  if (rc != BP_MPI_SUCCESS) return bp_mpi_check(rc, "compressed all_reduce: MPI_Iallgather");
  pp->posted_g = k + 1;
  return BP_OK;
}

/* Step 3 for piece k (all_reduce). */
static bp_status_t finish_piece(pipe_t* pp, uint32_t k) {
  bp_mpi_op_t* op = pp->op;
  bp_status_t st = wait_one(pp, &pp->reqs[2 * k + 1]);
  if (st != BP_OK) return st;
  for (int q = 0; q < pp->p.n; ++q) {
    uint64_t qb, ql;
    chunk_range(op, q, &qb, &ql);
    decode_piece(pp, k, gathered_rec(op, &pp->p, k, q), ql, qb);
    poke(pp);
  }
  return BP_OK;
}

bp_status_t bp_mpi_post_compressed(bp_mpi_op_t* op) {
  /* Everything moves in bp_mpi_finish_compressed (the pipeline waits
   * between its steps); here the buffers only. */
  op->nreq = 0;
  return scratch_take(op, plan_of(op).total);
}

bp_status_t bp_mpi_finish_compressed(bp_mpi_op_t* op) {
  pipe_t pp = {.op = op, .p = plan_of(op)};
  const uint32_t K = pp.p.pieces;
  /* op->hreq holds the requests: A[k] at 2k, G[k] at 2k + 1. */
  op->hreq = calloc(2 * (size_t)K, sizeof *op->hreq);
  pp.codes = malloc(sizeof *pp.codes * (size_t)pp.p.n);
  pp.scales = malloc(sizeof *pp.scales * (size_t)pp.p.n);
  bp_status_t st = BP_OK;
  if (!op->hreq || !pp.codes || !pp.scales)
    st = bp_kit_error(BP_RESOURCE_EXHAUSTED, "mpi: out of host memory");
  else
    st = bytes_type(&pp.type);
  pp.reqs = op->hreq;
  const int ar = op->kind == BP_MPI_ALL_REDUCE;
  for (uint32_t s = 0; st == BP_OK && s < K + (ar ? 2u : 1u); ++s) {
    if (s < K) st = send_piece(&pp, s);
    if (st == BP_OK && s >= 1 && s - 1 < K) st = consume_piece(&pp, s - 1);
    if (st == BP_OK && ar && s >= 2) st = finish_piece(&pp, s - 2);
  }
  free(pp.codes);
  free(pp.scales);
  /* On an error what was posted may be pending: its requests (completed
   * ones are null handles now) and op->tmp are parked by bp_mpi_op_free.
   * The posted requests go to the front of op->hreq. */
  uint32_t m = 0;
  for (uint32_t k = 0; st != BP_OK && pp.reqs && k < K; ++k) {
    if (k < pp.posted_a) pp.reqs[m++] = pp.reqs[2 * k];
    if (k < pp.posted_g) pp.reqs[m++] = pp.reqs[2 * k + 1];
  }
  op->nreq = (int)m;
  op->abandoned = m > 0;
  return st;
}

uint64_t bp_mpi_compressed_record_bytes(const bp_mpi_op_t* op) {
  const plan_t p = plan_of(op);
  return p.rb;
}
