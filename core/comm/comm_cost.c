/* backplane core: link tiers and the cost model of collectives
 * (bp_device_link_tier, bp_comm_link_tier, bp_comm_estimate_ns).
 *
 * The model is the one NCCL's tuning and the alpha-beta model of MPI
 * collectives use: time = steps x latency + bus bytes / bandwidth, with the
 * bus bytes of each kind as NCCL counts them, and the bandwidth and latency
 * of the communicator's slowest link. Host staging adds its two copies over
 * the device's host link.
 *
 * Compressed calls (bp_comm_estimate_compressed_ns) move the same bus
 * bytes as codes, 1 + 4 / block bytes per element, and add the codec's
 * passes at BACKPLANE_COMM_CODEC_GBPS (f32 bytes per second on one core,
 * default 4; `bp-bench --suite comm` measures it). Over a network the
 * pipeline overlaps the two (the larger counts); on shared memory and host
 * links the copies run on the cores that encode, so they add. */
#include <stdlib.h>

#include "comm/comm_internal.h"

/* Per-step latency of a tier, ns: a shared-memory barrier, a host hop, a
 * network round trip. */
static const double k_latency_ns[] = {1000.0, 2000.0, 5000.0, 20000.0};

uint32_t bp_device_link_tier(const bp_device_t* a, const bp_device_t* b) {
  if (!a || !b) return BP_LINK_NETWORK;
  if (a == b) return BP_LINK_SAME_DEVICE;
  if (a->plugin != b->plugin) return BP_LINK_HOST;
  const uint32_t both = a->props.flags & b->props.flags;
  if (both & (BP_DEVICE_FLAG_PEER_COPY | BP_DEVICE_FLAG_UNIFIED_MEMORY)) return BP_LINK_PEER;
  return BP_LINK_HOST;
}

uint32_t bp_comm_link_tier(const bp_comm_t* comm) { return comm ? comm->link : BP_LINK_NETWORK; }

static double network_bytes_per_s(void) {
  const char* v = getenv("BACKPLANE_NETWORK_GBPS");
  double g = v && *v ? atof(v) : 10.0;
  return (g > 0.0 ? g : 10.0) * 1e9;
}

static double codec_bytes_per_s(void) {
  const char* v = getenv("BACKPLANE_COMM_CODEC_GBPS");
  double g = v && *v ? atof(v) : 4.0;
  return (g > 0.0 ? g : 4.0) * 1e9;
}

/* The link part of the model: latency per step and the bus bytes over the
 * tier's bandwidth, ns. */
static double link_ns(const bp_comm_t* comm, uint32_t kind, double size) {
  const double n = comm->size > 0 ? (double)comm->size : 1.0;
  double bus = 0.0, steps = 1.0;
  switch (kind) {
    case BP_COLLECTIVE_ALL_REDUCE: bus = size * 2.0 * (n - 1.0) / n; steps = 2.0; break;
    case BP_COLLECTIVE_ALL_GATHER:
    case BP_COLLECTIVE_REDUCE_SCATTER:
    case BP_COLLECTIVE_ALL_TO_ALL: bus = size * (n - 1.0) / n; break;
    case BP_COLLECTIVE_BARRIER: bus = 0.0; break;
    default: bus = size; break; /* broadcast, reduce, send/recv */
  }
  const bp_device_properties_t* p = &comm->device->props;
  double bw;
  switch (comm->link) {
    case BP_LINK_SAME_DEVICE:
    case BP_LINK_PEER: bw = p->memory_bandwidth_bytes_per_s; break;
    case BP_LINK_HOST: bw = p->host_link_bandwidth_bytes_per_s; break;
    default: bw = network_bytes_per_s(); break;
  }
  if (!(bw > 0.0)) bw = 1e9; /* a device that reports none: 1 GB/s */
  return steps * k_latency_ns[comm->link < 4 ? comm->link : 3] + bus / bw * 1e9;
}

/* Host staging: down and up over the device's host link, unless it is
 * host memory, and its launches. */
static double staging_ns(const bp_comm_t* comm, double size) {
  const bp_device_properties_t* p = &comm->device->props;
  const double link = p->host_link_bandwidth_bytes_per_s > 0.0 ? p->host_link_bandwidth_bytes_per_s : 1e9;
  double ns = p->launch_overhead_ns * 3.0;
  if (!(p->flags & BP_DEVICE_FLAG_UNIFIED_MEMORY)) ns += 2.0 * size / link * 1e9;
  return ns;
}

bp_status_t bp_comm_estimate_ns(const bp_comm_t* comm, uint32_t kind, uint64_t bytes,
                                double* out_ns) {
  static const char fn[] = "bp_comm_estimate_ns";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, comm);
  BP__REQUIRE_ARG(fn, out_ns);
  if (kind > BP_COLLECTIVE_BARRIER)
    return bp__error(BP_INVALID_ARGUMENT, "%s: unknown collective kind %u", fn, kind);
  double ns = link_ns(comm, kind, (double)bytes);
  if (comm->tier == BP_COMM_TIER_HOST_STAGED && kind != BP_COLLECTIVE_BARRIER)
    ns += staging_ns(comm, (double)bytes);
  *out_ns = ns;
  return BP_OK;
}

bp_status_t bp_comm_estimate_compressed_ns(const bp_comm_t* comm, uint32_t kind, uint32_t dtype,
                                           uint64_t bytes, uint32_t compression, uint32_t block,
                                           double* out_ns) {
  static const char fn[] = "bp_comm_estimate_compressed_ns";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, comm);
  BP__REQUIRE_ARG(fn, out_ns);
  if (kind != BP_COLLECTIVE_ALL_REDUCE && kind != BP_COLLECTIVE_ALL_GATHER &&
      kind != BP_COLLECTIVE_REDUCE_SCATTER)
    return bp__error(BP_INVALID_ARGUMENT, "%s: collective kind %u has no compressed form "
                     "(all_reduce, all_gather, reduce_scatter)", fn, kind);
  if (!bp_kit_comm_can_compress(dtype, compression))
    return bp__error(BP_UNIMPLEMENTED, "%s: cannot compress %s to dtype %u (i8 or f8e4m3fn "
                     "codes of f32, f16, bf16, f64)", fn, bp_dtype_name(dtype), compression);
  if (block > (1u << 24))
    return bp__error(BP_INVALID_ARGUMENT, "%s: compression block %u (1 to 2^24)", fn, block);
  const double b = block ? (double)block : 256.0, n = comm->size > 0 ? (double)comm->size : 1.0;
  const double elems = (double)bytes / (double)bp_dtype_size(dtype);
  /* The same bus bytes as codes plus one f32 scale per block. */
  const double wire = link_ns(comm, kind, elems * (1.0 + 4.0 / b));
  /* The codec's passes per rank, in f32 bytes: all_reduce encodes its
   * input, decodes and sums n records of its chunk, encodes the chunk's
   * sum and decodes the result; all_gather encodes its part and decodes
   * the whole; reduce_scatter encodes its input and decodes and sums its
   * block from n records. */
  const double s = elems * 4.0;
  const double passes = kind == BP_COLLECTIVE_ALL_REDUCE ? (3.0 + 1.0 / n) * s
                        : kind == BP_COLLECTIVE_ALL_GATHER ? (1.0 + 1.0 / n) * s
                                                           : 2.0 * s;
  const double codec = passes / codec_bytes_per_s() * 1e9;
  double ns = comm->link == BP_LINK_NETWORK ? (wire > codec ? wire : codec) : wire + codec;
  if (comm->tier == BP_COMM_TIER_HOST_STAGED) ns += staging_ns(comm, (double)bytes);
  *out_ns = ns;
  return BP_OK;
}
