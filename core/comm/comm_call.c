/* backplane core: the collective calls of comm.h.
 *
 * Each public call checks what one rank can check alone (arguments,
 * devices, dense tensors, sizes against the rank count), then goes to the
 * plugin's comm table (NATIVE) or the host-staged path. Agreement across
 * ranks is the engine's job (it fails every rank together).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"

static const char* const k_names[] = {"?",          "bp_comm_all_reduce", "bp_comm_broadcast",
                                      "bp_comm_reduce", "bp_comm_all_gather",
                                      "bp_comm_reduce_scatter", "bp_comm_all_to_all",
                                      "bp_comm_all_to_allv", "bp_comm_send", "bp_comm_recv",
                                      "bp_comm_barrier"};

/* The plugin descriptor (bp_tensor_get_desc cannot fail on a checked
 * tensor and a full-size struct). */
static void desc_of(const bp_tensor_t* t, bp_tensor_desc_t* d) {
  d->struct_size = sizeof(*d);
  (void)bp_tensor_get_desc(t, d);
}

static uint64_t numel(const bp_tensor_t* t) { return (uint64_t)bp_tensor_numel(t); }

static bp_status_t check_tensor(const char* fn, const char* what, const bp_comm_t* comm,
                                const bp_tensor_t* t) {
  if (!t) return bp__error(BP_INVALID_ARGUMENT, "%s: argument '%s' is NULL", fn, what);
  if (t->buffer->device != comm->device)
    return bp__error(BP_INVALID_ARGUMENT, "%s: %s lives on %s, the communicator's rank on %s",
                     fn, what, t->buffer->device->name, comm->device->name);
  if (!bp_tensor_is_contiguous(t))
    return bp__error(BP_INVALID_ARGUMENT, "%s: %s is not dense (contiguous)", fn, what);
  if (bp_dtype_size(t->dtype) == 0 || bp_dtype_bits(t->dtype) < 8)
    return bp__error(BP_INVALID_ARGUMENT, "%s: %s has dtype %s, not a whole-byte dtype", fn,
                     what, bp_dtype_name(t->dtype));
  return BP_OK;
}

/* Checks and completes `call` (kit.count) for this rank. */
static bp_status_t check_call(const char* fn, bp_comm_t* comm, bp_stream_t* stream,
                              bp__comm_call_t* call) {
  BP__REQUIRE_ARG(fn, comm);
  BP__REQUIRE_ARG(fn, stream);
  if (stream->device != comm->device)
    return bp__error(BP_INVALID_ARGUMENT, "%s: the stream is of %s, the communicator's rank of %s",
                     fn, stream->device->name, comm->device->name);
  if (comm->size <= 0)
    return bp__error(BP_FAILED_PRECONDITION, "%s: the communicator has no known size", fn);
  const uint32_t kind = call->kit.kind;
  const uint64_t n = (uint64_t)comm->size;
  const int root_side = kind == BP_KIT_COLL_BROADCAST || kind == BP_KIT_COLL_REDUCE;
  if (root_side && (call->kit.root < 0 || call->kit.root >= comm->size))
    return bp__error(BP_INVALID_ARGUMENT, "%s: root %d is out of range for %d ranks", fn,
                     call->kit.root, comm->size);
  if ((kind == BP_KIT_COLL_SEND || kind == BP_KIT_COLL_RECV) &&
      (call->kit.root < 0 || call->kit.root >= comm->size || call->kit.root == comm->rank))
    return bp__error(BP_INVALID_ARGUMENT, "%s: peer %d is not another rank of %d", fn,
                     call->kit.root, comm->size);
  if (kind == BP_KIT_COLL_BARRIER) return BP_OK;
  /* Which tensors this rank must pass. */
  const int is_root = root_side && call->kit.root == comm->rank;
  const int need_send = kind != BP_KIT_COLL_RECV && (kind != BP_KIT_COLL_BROADCAST || is_root);
  const int need_recv = kind != BP_KIT_COLL_SEND && (kind != BP_KIT_COLL_REDUCE || is_root);
  if (!need_send) call->send = NULL;
  if (!need_recv) call->recv = NULL;
  bp_status_t st;
  if (need_send && (st = check_tensor(fn, kind == BP_KIT_COLL_SEND ? "data" : "send", comm,
                                      call->send)) != BP_OK)
    return st;
  if (need_recv && (st = check_tensor(fn, kind == BP_KIT_COLL_RECV ? "data" : "recv", comm,
                                      call->recv)) != BP_OK)
    return st;
  if (call->send && call->recv && call->send->dtype != call->recv->dtype)
    return bp__error(BP_INVALID_ARGUMENT, "%s: send is %s, recv is %s", fn,
                     bp_dtype_name(call->send->dtype), bp_dtype_name(call->recv->dtype));
  const bp_tensor_t* any = call->send ? call->send : call->recv;
  call->kit.dtype = any->dtype;
  const uint64_t s = call->send ? numel(call->send) : 0, r = call->recv ? numel(call->recv) : 0;
  switch (kind) {
    case BP_KIT_COLL_ALL_REDUCE:
    case BP_KIT_COLL_BROADCAST:
    case BP_KIT_COLL_REDUCE:
      if (call->send && call->recv && s != r)
        return bp__error(BP_INVALID_ARGUMENT, "%s: send has %llu elements, recv %llu", fn,
                         (unsigned long long)s, (unsigned long long)r);
      call->kit.count = call->send ? s : r;
      break;
    case BP_KIT_COLL_ALL_GATHER:
      if (r / n != s || r % n)
        return bp__error(BP_INVALID_ARGUMENT, "%s: recv has %llu elements, not %llu ranks x %llu",
                         fn, (unsigned long long)r, (unsigned long long)n, (unsigned long long)s);
      call->kit.count = s;
      break;
    case BP_KIT_COLL_REDUCE_SCATTER:
      if (s / n != r || s % n)
        return bp__error(BP_INVALID_ARGUMENT, "%s: send has %llu elements, not %llu ranks x %llu",
                         fn, (unsigned long long)s, (unsigned long long)n, (unsigned long long)r);
      call->kit.count = r;
      break;
    case BP_KIT_COLL_ALL_TO_ALL:
      if (s != r || s % n)
        return bp__error(BP_INVALID_ARGUMENT, "%s: send and recv need the same element count, a "
                         "multiple of %llu ranks (%llu, %llu)", fn, (unsigned long long)n,
                         (unsigned long long)s, (unsigned long long)r);
      call->kit.count = s / n;
      break;
    case BP_KIT_COLL_ALL_TO_ALLV: {
      const bp_kit_coll_t* k = &call->kit;
      if (!k->send_counts || !k->send_displs || !k->recv_counts || !k->recv_displs)
        return bp__error(BP_INVALID_ARGUMENT, "%s: NULL counts or displacements", fn);
      for (uint64_t q = 0; q < n; ++q)
        if (k->send_displs[q] > s || k->send_counts[q] > s - k->send_displs[q] ||
            k->recv_displs[q] > r || k->recv_counts[q] > r - k->recv_displs[q])
          return bp__error(BP_OUT_OF_RANGE, "%s: the block of rank %llu lies outside send (%llu "
                           "elements) or recv (%llu)", fn, (unsigned long long)q,
                           (unsigned long long)s, (unsigned long long)r);
      call->kit.count = 0;
      break;
    }
    default: /* send, recv */
      call->kit.count = call->send ? s : r;
      break;
  }
  if (call->options && call->options->struct_size < BP_COLLECTIVE_OPTIONS_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT, "%s: options.struct_size %u is too small", fn,
                     call->options->struct_size);
  return BP_OK;
}

static bp_status_t issue_native(const char* fn, bp_comm_t* comm, bp_stream_t* stream,
                                const bp__comm_call_t* call) {
  bp_plugin_t* plugin = comm->device->plugin;
  const bpp_comm_table_t* t = &plugin->comm;
  bp_status_t st = bp__comm_group_join_plugin(plugin);
  if (st != BP_OK) return st;
  bp_tensor_desc_t sd, rd;
  const bp_tensor_desc_t* s = NULL;
  const bp_tensor_desc_t* r = NULL;
  if (call->send) desc_of(call->send, &sd), s = &sd, bp__buffer_note_use(call->send->buffer, stream);
  if (call->recv) desc_of(call->recv, &rd), r = &rd, bp__buffer_note_use(call->recv->buffer, stream);
  bp_collective_options_t o = {.struct_size = sizeof(o), .root = call->kit.root,
                               .peer = call->kit.root};
  if (call->options) {
    o.compression = call->options->compression;
    o.compression_block = call->options->compression_block;
  }
  const bp_kit_coll_t* k = &call->kit;
  const char* slot = fn + strlen("bp_comm_");
#define NATIVE(slot_, ...) \
  (t->slot_ ? BP__NOTE_CALL(plugin, #slot_, NULL, t->slot_(__VA_ARGS__)) : BP_UNIMPLEMENTED)
  switch (k->kind) {
    case BP_KIT_COLL_ALL_REDUCE: st = NATIVE(all_reduce, comm->native, stream->handle, s, r, k->op, &o); break;
    case BP_KIT_COLL_BROADCAST: st = NATIVE(broadcast, comm->native, stream->handle, s, r, &o); break;
    case BP_KIT_COLL_REDUCE: st = NATIVE(reduce, comm->native, stream->handle, s, r, k->op, &o); break;
    case BP_KIT_COLL_ALL_GATHER: st = NATIVE(all_gather, comm->native, stream->handle, s, r, &o); break;
    case BP_KIT_COLL_REDUCE_SCATTER:
      st = NATIVE(reduce_scatter, comm->native, stream->handle, s, r, k->op, &o);
      break;
    case BP_KIT_COLL_ALL_TO_ALL: st = NATIVE(all_to_all, comm->native, stream->handle, s, r, &o); break;
    case BP_KIT_COLL_ALL_TO_ALLV:
      st = NATIVE(all_to_allv, comm->native, stream->handle, s, k->send_counts, k->send_displs, r,
                  k->recv_counts, k->recv_displs, &o);
      break;
    case BP_KIT_COLL_SEND: st = NATIVE(send, comm->native, stream->handle, s, &o); break;
    case BP_KIT_COLL_RECV: st = NATIVE(recv, comm->native, stream->handle, r, &o); break;
    default: st = NATIVE(barrier, comm->native, stream->handle); break;
  }
#undef NATIVE
  if (st == BP_OK) return st;
  return bp__plugin_error(plugin, st, slot);
}

static bp_status_t issue(uint32_t kind, bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                         bp_tensor_t* recv, uint32_t op, int32_t root_or_peer,
                         const bp_collective_options_t* options, const uint64_t* const* v) {
  const char* fn = k_names[kind];
  bp__clear_error();
  bp__comm_call_t call = {.kit = {.kind = kind, .op = op, .root = root_or_peer},
                          .send = send, .recv = recv, .options = options};
  if (v) {
    call.kit.send_counts = v[0];
    call.kit.send_displs = v[1];
    call.kit.recv_counts = v[2];
    call.kit.recv_displs = v[3];
  }
  if ((kind == BP_KIT_COLL_ALL_REDUCE || kind == BP_KIT_COLL_REDUCE ||
       kind == BP_KIT_COLL_REDUCE_SCATTER) && op > BP_REDUCE_AVG)
    return bp__error(BP_INVALID_ARGUMENT, "%s: unknown reduction %u", fn, op);
  bp_status_t st = check_call(fn, comm, stream, &call);
  if (st != BP_OK) return st;
  if (comm->native) return issue_native(fn, comm, stream, &call);
  if (options && options->compression != BP_DTYPE_INVALID) {
    call.kit.compression = options->compression;
    call.kit.block = options->compression_block ? options->compression_block : 256;
    if (comm->engine) {
      bp_kit_comm_error_t e;
      bp_status_t checked = bp_kit_coll_check(comm->engine, &call.kit, &e);
      if (checked != BP_OK) return bp__error(checked, "%s: %s", fn, e.text);
    }
  }
  if (bp__comm_group_open()) return bp__comm_group_add_staged(comm, stream, &call);
  return bp__comm_staged_enqueue(comm, stream, &call, 1);
}

static int32_t root_of(const bp_collective_options_t* o) { return o ? o->root : 0; }

bp_status_t bp_comm_all_reduce(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                               bp_tensor_t* recv, uint32_t op,
                               const bp_collective_options_t* options) {
  return issue(BP_KIT_COLL_ALL_REDUCE, comm, stream, send, recv, op, 0, options, NULL);
}
bp_status_t bp_comm_broadcast(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                              bp_tensor_t* recv, const bp_collective_options_t* options) {
  return issue(BP_KIT_COLL_BROADCAST, comm, stream, send, recv, 0, root_of(options), options,
               NULL);
}
bp_status_t bp_comm_reduce(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                           bp_tensor_t* recv, uint32_t op,
                           const bp_collective_options_t* options) {
  return issue(BP_KIT_COLL_REDUCE, comm, stream, send, recv, op, root_of(options), options, NULL);
}
bp_status_t bp_comm_all_gather(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                               bp_tensor_t* recv, const bp_collective_options_t* options) {
  return issue(BP_KIT_COLL_ALL_GATHER, comm, stream, send, recv, 0, 0, options, NULL);
}
bp_status_t bp_comm_reduce_scatter(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                                   bp_tensor_t* recv, uint32_t op,
                                   const bp_collective_options_t* options) {
  return issue(BP_KIT_COLL_REDUCE_SCATTER, comm, stream, send, recv, op, 0, options, NULL);
}
bp_status_t bp_comm_all_to_all(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                               bp_tensor_t* recv, const bp_collective_options_t* options) {
  return issue(BP_KIT_COLL_ALL_TO_ALL, comm, stream, send, recv, 0, 0, options, NULL);
}
bp_status_t bp_comm_all_to_allv(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* send,
                                const uint64_t* send_counts, const uint64_t* send_displs,
                                bp_tensor_t* recv, const uint64_t* recv_counts,
                                const uint64_t* recv_displs,
                                const bp_collective_options_t* options) {
  const uint64_t* const v[4] = {send_counts, send_displs, recv_counts, recv_displs};
  return issue(BP_KIT_COLL_ALL_TO_ALLV, comm, stream, send, recv, 0, 0, options, v);
}
bp_status_t bp_comm_send(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* data, int32_t peer) {
  return issue(BP_KIT_COLL_SEND, comm, stream, data, NULL, 0, peer, NULL, NULL);
}
bp_status_t bp_comm_recv(bp_comm_t* comm, bp_stream_t* stream, bp_tensor_t* data, int32_t peer) {
  return issue(BP_KIT_COLL_RECV, comm, stream, NULL, data, 0, peer, NULL, NULL);
}
bp_status_t bp_comm_barrier(bp_comm_t* comm, bp_stream_t* stream) {
  return issue(BP_KIT_COLL_BARRIER, comm, stream, NULL, NULL, 0, 0, NULL, NULL);
}
