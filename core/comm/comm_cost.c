/* backplane core: link tiers and the cost model of collectives
 * (bp_device_link_tier, bp_comm_link_tier, bp_comm_estimate_ns).
 *
 * The model is the one NCCL's tuning and the alpha-beta model of MPI
 * collectives use: time = steps x latency + bus bytes / bandwidth, with the
 * bus bytes of each kind as NCCL counts them, and the bandwidth and latency
 * of the communicator's slowest link. Host staging adds its two copies over
 * the device's host link. */
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

bp_status_t bp_comm_estimate_ns(const bp_comm_t* comm, uint32_t kind, uint64_t bytes,
                                double* out_ns) {
  static const char fn[] = "bp_comm_estimate_ns";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, comm);
  BP__REQUIRE_ARG(fn, out_ns);
  if (kind > BP_COLLECTIVE_BARRIER)
    return bp__error(BP_INVALID_ARGUMENT, "%s: unknown collective kind %u", fn, kind);
  const double n = comm->size > 0 ? (double)comm->size : 1.0;
  const double size = (double)bytes;
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
  double ns = steps * k_latency_ns[comm->link < 4 ? comm->link : 3] + bus / bw * 1e9;
  if (comm->tier == BP_COMM_TIER_HOST_STAGED && kind != BP_COLLECTIVE_BARRIER) {
    /* Down and up over the device's host link, unless it is host memory. */
    const double link = p->host_link_bandwidth_bytes_per_s > 0.0 ? p->host_link_bandwidth_bytes_per_s : 1e9;
    if (!(p->flags & BP_DEVICE_FLAG_UNIFIED_MEMORY)) ns += 2.0 * size / link * 1e9;
    ns += p->launch_overhead_ns * 3.0;
  }
  *out_ns = ns;
  return BP_OK;
}
