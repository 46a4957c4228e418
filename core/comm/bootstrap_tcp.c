/* backplane core: a TCP bootstrap from environment variables (env://).
 *
 * Like torch.distributed's env:// rendezvous: every rank knows its rank,
 * the world size and rank 0's address. Setup: every rank opens a listening
 * socket on an ephemeral port of its own address; rank 0 listens on
 * BACKPLANE_MASTER_PORT, collects every rank's (address, port) and sends
 * the table back; then every pair connects (the lower rank dials the
 * higher), giving a full mesh of stream sockets. Framed messages carry a
 * tag; a frame that arrives for another tag waits in a per-peer queue.
 *
 * Collective functions (allgather, broadcast, barrier) use pairwise
 * exchanges over the mesh with a reserved tag. Every blocking step has the
 * communicator timeout (options, BACKPLANE_COMM_TIMEOUT_MS): a rank that
 * never connects or never answers fails the others with DEADLINE_EXCEEDED.
 *
 * Threading: one thread per rank uses its bootstrap (as the ABI says).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "comm/comm_internal.h"

#define TAG_COLLECTIVE (-0x7fff0001)

typedef struct frame {
  int32_t tag;
  uint64_t bytes;
  struct frame* next;
  unsigned char data[];
} frame_t;

typedef struct tcp_boot {
  bp_bootstrap_t bs; /* first: the application's pointer is this */
  int32_t rank, size;
  uint64_t timeout_ns;
  int* fds;         /* size entries; fds[rank] = -1 */
  frame_t** queued; /* per peer: frames read for another tag */
} tcp_boot_t;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits until fd is ready for `events` before the deadline: 0, or -1. */
static int wait_fd(int fd, short events, double deadline) {
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0) return -1;
    struct pollfd p = {fd, events, 0};
    int ms = left > 1000.0 ? 1000000 : (int)(left * 1000.0) + 1;
    int rc = poll(&p, 1, ms);
    if (rc > 0) return 0;
    if (rc < 0 && errno != EINTR) return -1;
  }
}

static int write_all(int fd, const void* p, uint64_t n, double deadline) {
  const unsigned char* c = p;
  while (n) {
    if (wait_fd(fd, POLLOUT, deadline) != 0) return -1;
    ssize_t w = send(fd, c, n > (1u << 30) ? (1u << 30) : (size_t)n, MSG_NOSIGNAL);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (uint64_t)w;
  }
  return 0;
}

static int read_all(int fd, void* p, uint64_t n, double deadline) {
  unsigned char* c = p;
  while (n) {
    if (wait_fd(fd, POLLIN, deadline) != 0) return -1;
    ssize_t r = recv(fd, c, n > (1u << 30) ? (1u << 30) : (size_t)n, 0);
    if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (r <= 0) return -1;
    c += r;
    n -= (uint64_t)r;
  }
  return 0;
}

static double deadline_of(const tcp_boot_t* b) { return now_s() + (double)b->timeout_ns * 1e-9; }

static bp_status_t send_frame(tcp_boot_t* b, int32_t peer, int32_t tag, const void* data,
                              uint64_t bytes) {
  const double deadline = deadline_of(b);
  struct {
    int32_t tag;
    int32_t pad;
    uint64_t bytes;
  } h = {tag, 0, bytes};
  if (write_all(b->fds[peer], &h, sizeof(h), deadline) != 0 ||
      write_all(b->fds[peer], data, bytes, deadline) != 0)
    return BP_UNAVAILABLE;
  return BP_OK;
}

/* Receives the next frame of `tag` from `peer` into data (exactly bytes). */
static bp_status_t recv_frame(tcp_boot_t* b, int32_t peer, int32_t tag, void* data,
                              uint64_t bytes) {
  for (frame_t** pp = &b->queued[peer]; *pp; pp = &(*pp)->next) {
    if ((*pp)->tag != tag) continue;
    frame_t* f = *pp;
    *pp = f->next;
    bp_status_t st = f->bytes == bytes ? BP_OK : BP_INVALID_ARGUMENT;
    if (st == BP_OK) memcpy(data, f->data, bytes);
    free(f);
    return st;
  }
  const double deadline = deadline_of(b);
  for (;;) {
    struct {
      int32_t tag;
      int32_t pad;
      uint64_t bytes;
    } h;
    if (read_all(b->fds[peer], &h, sizeof(h), deadline) != 0)
      return now_s() >= deadline ? BP_DEADLINE_EXCEEDED : BP_UNAVAILABLE;
    if (h.bytes > (1ull << 40)) return BP_DATA_LOSS;
    if (h.tag == tag) {
      if (h.bytes != bytes) return BP_INVALID_ARGUMENT;
      return read_all(b->fds[peer], data, bytes, deadline) == 0 ? BP_OK : BP_UNAVAILABLE;
    }
    frame_t* f = malloc(sizeof(frame_t) + h.bytes);
    if (!f) return BP_RESOURCE_EXHAUSTED;
    f->tag = h.tag;
    f->bytes = h.bytes;
    f->next = NULL;
    if (read_all(b->fds[peer], f->data, h.bytes, deadline) != 0) {
      free(f);
      return BP_UNAVAILABLE;
    }
    frame_t** tail = &b->queued[peer];
    while (*tail) tail = &(*tail)->next;
    *tail = f;
  }
}

/* ------------------------------------------------------------------------ */
/* The bootstrap functions                                                   */
/* ------------------------------------------------------------------------ */
static bp_status_t tcp_send(void* ctx, int32_t peer, const void* data, uint64_t bytes,
                            int32_t tag) {
  tcp_boot_t* b = ctx;
  if (peer < 0 || peer >= b->size || peer == b->rank || tag == TAG_COLLECTIVE ||
      (!data && bytes))
    return BP_INVALID_ARGUMENT;
  return send_frame(b, peer, tag, data, bytes);
}
static bp_status_t tcp_recv(void* ctx, int32_t peer, void* data, uint64_t bytes, int32_t tag) {
  tcp_boot_t* b = ctx;
  if (peer < 0 || peer >= b->size || peer == b->rank || tag == TAG_COLLECTIVE ||
      (!data && bytes))
    return BP_INVALID_ARGUMENT;
  return recv_frame(b, peer, tag, data, bytes);
}

/* Every rank sends its block to every other and receives theirs; lower
 * ranks send first to higher ones, so no pair waits on the other. */
static bp_status_t tcp_allgather(void* ctx, const void* send, void* recv, uint64_t bytes) {
  tcp_boot_t* b = ctx;
  unsigned char* out = recv;
  if ((!send || !recv) && bytes) return BP_INVALID_ARGUMENT;
  memmove(out + (uint64_t)b->rank * bytes, send, bytes);
  for (int32_t p = 0; p < b->size; ++p) {
    if (p == b->rank) continue;
    bp_status_t st;
    if (b->rank < p) {
      if ((st = send_frame(b, p, TAG_COLLECTIVE, send, bytes)) != BP_OK) return st;
      if ((st = recv_frame(b, p, TAG_COLLECTIVE, out + (uint64_t)p * bytes, bytes)) != BP_OK)
        return st;
    } else {
      if ((st = recv_frame(b, p, TAG_COLLECTIVE, out + (uint64_t)p * bytes, bytes)) != BP_OK)
        return st;
      if ((st = send_frame(b, p, TAG_COLLECTIVE, send, bytes)) != BP_OK) return st;
    }
  }
  return BP_OK;
}

static bp_status_t tcp_broadcast(void* ctx, void* data, uint64_t bytes, int32_t root) {
  tcp_boot_t* b = ctx;
  if (root < 0 || root >= b->size || (!data && bytes)) return BP_INVALID_ARGUMENT;
  if (b->rank != root) return recv_frame(b, root, TAG_COLLECTIVE, data, bytes);
  for (int32_t p = 0; p < b->size; ++p) {
    if (p == root) continue;
    bp_status_t st = send_frame(b, p, TAG_COLLECTIVE, data, bytes);
    if (st != BP_OK) return st;
  }
  return BP_OK;
}

static bp_status_t tcp_barrier(void* ctx) {
  tcp_boot_t* b = ctx;
  unsigned char one = 1;
  unsigned char* all = malloc((size_t)b->size);
  if (!all) return BP_RESOURCE_EXHAUSTED;
  bp_status_t st = tcp_allgather(ctx, &one, all, 1);
  free(all);
  return st;
}

/* ------------------------------------------------------------------------ */
/* Setup                                                                     */
/* ------------------------------------------------------------------------ */
static int env_int(const char* const* names, long* out) {
  for (; *names; ++names) {
    const char* v = getenv(*names);
    if (!v || !*v) continue;
    char* end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || !end || *end || x < 0 || x > (1 << 20)) return -1;
    *out = x;
    return 1;
  }
  return 0;
}

static int listen_on(const struct in_addr* addr, uint16_t port, uint16_t* out_port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = *addr};
  socklen_t len = sizeof(sa);
  if (bind(fd, (struct sockaddr*)&sa, sizeof(sa)) != 0 || listen(fd, 128) != 0 ||
      getsockname(fd, (struct sockaddr*)&sa, &len) != 0) {
    close(fd);
    return -1;
  }
  *out_port = ntohs(sa.sin_port);
  return fd;
}

static int accept_one(int lfd, double deadline) {
  if (wait_fd(lfd, POLLIN, deadline) != 0) return -1;
  return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* Dials addr:port until it answers or the deadline passes. */
static int dial(const struct in_addr* addr, uint16_t port, double deadline) {
  for (;;) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = *addr};
    if (connect(fd, (struct sockaddr*)&sa, sizeof(sa)) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      return fd;
    }
    close(fd);
    if (now_s() >= deadline) return -1;
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
}

typedef struct endpoint {
  uint32_t addr; /* network order */
  uint16_t port;
  uint16_t pad;
  int32_t rank;
} endpoint_t;

static void boot_free(tcp_boot_t* b) {
  if (!b) return;
  for (int32_t p = 0; b->fds && p < b->size; ++p) {
    if (b->fds[p] >= 0) close(b->fds[p]);
    while (b->queued && b->queued[p]) {
      frame_t* f = b->queued[p];
      b->queued[p] = f->next;
      free(f);
    }
  }
  free(b->fds);
  free(b->queued);
  free(b);
}

bp_status_t bp_bootstrap_create_env(const bp_comm_options_t* options,
                                    bp_bootstrap_t** out_bootstrap) {
  static const char fn[] = "bp_bootstrap_create_env";
  bp__clear_error();
  BP__REQUIRE_ARG(fn, out_bootstrap);
  *out_bootstrap = NULL;
  static const char* const rank_vars[] = {"BACKPLANE_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                                          NULL};
  static const char* const size_vars[] = {"BACKPLANE_WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                          "PMI_SIZE", NULL};
  static const char* const port_vars[] = {"BACKPLANE_MASTER_PORT", NULL};
  long rank = -1, size = -1, port = 29500;
  if (env_int(rank_vars, &rank) <= 0 || env_int(size_vars, &size) <= 0)
    return bp__error(BP_FAILED_PRECONDITION, "%s: set BACKPLANE_RANK and BACKPLANE_WORLD_SIZE "
                     "(or run under mpirun)", fn);
  if (size < 1 || rank >= size)
    return bp__error(BP_INVALID_ARGUMENT, "%s: rank %ld of %ld is out of range", fn, rank, size);
  if (env_int(port_vars, &port) < 0 || port < 1 || port > 65535)
    return bp__error(BP_INVALID_ARGUMENT, "%s: BACKPLANE_MASTER_PORT is not a port", fn);
  const char* host = getenv("BACKPLANE_MASTER_ADDR");
  if (!host || !*host) host = "127.0.0.1";
  struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai = NULL;
  if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai)
    return bp__error(BP_INVALID_ARGUMENT, "%s: cannot resolve BACKPLANE_MASTER_ADDR '%s'", fn,
                     host);
  struct in_addr master = ((struct sockaddr_in*)ai->ai_addr)->sin_addr;
  freeaddrinfo(ai);

  tcp_boot_t* b = calloc(1, sizeof(*b));
  if (!b) return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", fn);
  b->rank = (int32_t)rank;
  b->size = (int32_t)size;
  b->timeout_ns = bp_kit_comm_timeout(options && options->struct_size >= BP_COMM_OPTIONS_V1_SIZE
                                          ? options->timeout_ns
                                          : 0);
  b->fds = malloc(sizeof(int) * (size_t)size);
  b->queued = calloc((size_t)size, sizeof(frame_t*));
  endpoint_t* table = calloc((size_t)size, sizeof(endpoint_t));
  if (!b->fds || !b->queued || !table) {
    free(table);
    boot_free(b);
    return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", fn);
  }
  for (long p = 0; p < size; ++p) b->fds[p] = -1;
  const double deadline = deadline_of(b);
  bp_status_t st = BP_OK;
  char why[160] = "";
  /* Rank 0 listens on the master port; the others on an ephemeral port. */
  struct in_addr any = {htonl(INADDR_ANY)};
  uint16_t my_port = 0;
  int lfd = listen_on(rank == 0 ? &master : &any, rank == 0 ? (uint16_t)port : 0, &my_port);
  if (lfd < 0) {
    st = BP_UNAVAILABLE;
    snprintf(why, sizeof(why), "cannot listen on port %u: %s", rank == 0 ? (unsigned)port : 0u,
             strerror(errno));
  }
  if (st == BP_OK && rank == 0) {
    table[0] = (endpoint_t){master.s_addr, my_port, 0, 0};
    for (long k = 1; st == BP_OK && k < size; ++k) {
      int fd = accept_one(lfd, deadline);
      endpoint_t e;
      if (fd < 0 || read_all(fd, &e, sizeof(e), deadline) != 0 || e.rank <= 0 || e.rank >= size ||
          b->fds[e.rank] >= 0) {
        if (fd >= 0) close(fd);
        st = BP_DEADLINE_EXCEEDED;
        snprintf(why, sizeof(why), "only %ld of %ld ranks reached the master within the timeout",
                 k, size);
        break;
      }
      b->fds[e.rank] = fd;
      table[e.rank] = e;
    }
    for (long p = 1; st == BP_OK && p < size; ++p)
      if (write_all(b->fds[p], table, sizeof(endpoint_t) * (size_t)size, deadline) != 0) {
        st = BP_UNAVAILABLE;
        snprintf(why, sizeof(why), "rank %ld hung up during setup", p);
      }
  } else if (st == BP_OK) {
    int fd = dial(&master, (uint16_t)port, deadline);
    /* The address the master sees us at is the one we dialed from. */
    struct sockaddr_in me;
    socklen_t len = sizeof(me);
    endpoint_t e = {0, my_port, 0, (int32_t)rank};
    if (fd >= 0 && getsockname(fd, (struct sockaddr*)&me, &len) == 0) e.addr = me.sin_addr.s_addr;
    if (fd < 0 || write_all(fd, &e, sizeof(e), deadline) != 0 ||
        read_all(fd, table, sizeof(endpoint_t) * (size_t)size, deadline) != 0) {
      if (fd >= 0) close(fd);
      st = BP_DEADLINE_EXCEEDED;
      snprintf(why, sizeof(why), "no answer from the master %s:%ld within the timeout", host,
               port);
    } else {
      b->fds[0] = fd;
    }
  }
  /* The mesh among ranks 1..n-1: dial the lower ranks, accept the higher. */
  for (long p = 1; st == BP_OK && p < rank; ++p) {
    struct in_addr a = {table[p].addr};
    int fd = dial(&a, table[p].port, deadline);
    int32_t me = (int32_t)rank;
    if (fd < 0 || write_all(fd, &me, sizeof(me), deadline) != 0) {
      if (fd >= 0) close(fd);
      st = BP_DEADLINE_EXCEEDED;
      snprintf(why, sizeof(why), "cannot reach rank %ld", p);
    } else {
      b->fds[p] = fd;
    }
  }
  for (long k = rank + 1; st == BP_OK && rank > 0 && k < size; ++k) {
    int fd = accept_one(lfd, deadline);
    int32_t who = -1;
    if (fd < 0 || read_all(fd, &who, sizeof(who), deadline) != 0 || who <= rank ||
        who >= size || b->fds[who] >= 0) {
      if (fd >= 0) close(fd);
      st = BP_DEADLINE_EXCEEDED;
      snprintf(why, sizeof(why), "a higher rank did not connect within the timeout");
    } else {
      b->fds[who] = fd;
    }
  }
  if (lfd >= 0) close(lfd);
  free(table);
  if (st != BP_OK) {
    boot_free(b);
    return bp__error(st, "%s: rank %ld of %ld: %s", fn, rank, size, why);
  }
  for (long p = 0; p < size; ++p) {
    int one = 1;
    if (b->fds[p] >= 0) setsockopt(b->fds[p], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  b->bs = (bp_bootstrap_t){.struct_size = sizeof(bp_bootstrap_t), .rank = (int32_t)rank,
                           .nranks = (int32_t)size, .ctx = b, .allgather = tcp_allgather,
                           .broadcast = tcp_broadcast, .barrier = tcp_barrier, .send = tcp_send,
                           .recv = tcp_recv};
  *out_bootstrap = &b->bs;
  return BP_OK;
}

void bp_bootstrap_destroy(bp_bootstrap_t* bootstrap) {
  if (bootstrap) boot_free((tcp_boot_t*)bootstrap);
}
