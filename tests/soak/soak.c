/* soak: a bounded endurance run. 8 threads do random ops, copies and event
 * traffic across every device the context finds (the cpu plugin with
 * BP_CPU_DEVICES=4, vulkan:0 on lavapipe when installed) and check every
 * result exactly; the main thread samples resident memory (/proc/self/statm)
 * and open file descriptors once a second.
 *
 *   bp-soak [--seconds N] [--threads T] [--seed S] [--only op|copy|event|churn]
 *   (default 600 s, 8 threads, every kind of step; --only narrows a growth
 *   down to one kind)
 *
 * After a warm-up (40% of the run, 5 to 60 s: pools, caches and lavapipe's
 * pipelines fill up; with vulkan, resident memory grows for about 30 s), the least-squares slopes of both series must stay within
 * the bounds below; any wrong result, unexpected error or growth beyond a
 * bound fails the run (exit status 1). The summary gives the slopes.
 *
 * Bounds: resident memory may grow by at most SOAK_RSS_BYTES_PER_S (64 KiB/s,
 * 225 MiB an hour: a leak of one 64 KiB buffer a second fails). A leak is
 * growth that goes on, so a run fails on memory only when the fitted slope is
 * over that bound and the floor of the series (its lowest sample in the last
 * quarter of the window against the lowest in the first quarter) also rose by
 * more than SOAK_RSS_SETTLE_BYTES (16 MiB) and by more than half the bound
 * times the window. Resident memory is noisy (in-flight buffers, allocator
 * trimming) and still settles for a while after the warm-up on a slow
 * machine; the floor ignores the spikes and the allowance the settling. The
 * 60-second run in the test command therefore catches only gross growth
 * (a buffer or more a step); small blocks lost per step are caught exactly by
 * LeakSanitizer at exit in the AddressSanitizer build's run (soak_leaks_20s,
 * where resident memory is reported but not judged: ASan's quarantine makes
 * it grow), and reachable memory that keeps growing by the 10-minute run.
 * Open descriptors may grow by at most
 * SOAK_FDS_PER_S (0.01/s, one every 100 s), and the last sample may hold at
 * most SOAK_FD_SLACK more descriptors than the first sample after the warm-up.
 *
 * Values are small integers in f32, so every backend computes them exactly.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backplane/backplane.h"

#define SOAK_RSS_BYTES_PER_S (64.0 * 1024.0)
#define SOAK_RSS_SETTLE_BYTES (16.0 * 1048576.0)
#define SOAK_FDS_PER_S 0.01
#define SOAK_FD_SLACK 4
#define SOAK_MAX_DEVICES 16

/* Under AddressSanitizer freed blocks sit in a quarantine, so resident memory
 * says nothing about leaks; LeakSanitizer's report at exit does. */
#if defined(__SANITIZE_ADDRESS__)
#define SOAK_JUDGES_RSS 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_JUDGES_RSS 0
#endif
#endif
#ifndef SOAK_JUDGES_RSS
#define SOAK_JUDGES_RSS 1
#endif
#define SOAK_MAX_SAMPLES 100000
#define SOAK_MAX_WORDS 16384

typedef struct soak {
  bp_context_t* ctx;
  bp_device_t* devices[SOAK_MAX_DEVICES];
  uint32_t num_devices;
  double deadline;
  int only; /* -1: every kind of step; else the one kind */
  atomic_int stop;
  atomic_long ops, copies, events, churns, unsupported;
  atomic_long errors, mismatches;
  pthread_mutex_t report_lock;
} soak_t;

typedef struct worker {
  soak_t* soak;
  uint64_t rng;
  bp_stream_t* streams[SOAK_MAX_DEVICES];
  float host[SOAK_MAX_WORDS], back[SOAK_MAX_WORDS];
} worker_t;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t next_rand(uint64_t* s) { /* splitmix64 */
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint32_t pick(worker_t* w, uint32_t n) { return (uint32_t)(next_rand(&w->rng) % n); }

/* Notes an unexpected error; returns 1 when `st` is not OK. */
static int failed(worker_t* w, bp_status_t st, const char* what) {
  if (st == BP_OK) return 0;
  atomic_fetch_add(&w->soak->errors, 1);
  pthread_mutex_lock(&w->soak->report_lock);
  fprintf(stderr, "soak: %s: %s: %s\n", what, bp_status_name(st), bp_status_message());
  pthread_mutex_unlock(&w->soak->report_lock);
  return 1;
}

static void mismatch(worker_t* w, const char* what, int64_t k, float got, float want) {
  atomic_fetch_add(&w->soak->mismatches, 1);
  pthread_mutex_lock(&w->soak->report_lock);
  fprintf(stderr, "soak: %s: element %lld is %g, expected %g\n", what, (long long)k, got, want);
  pthread_mutex_unlock(&w->soak->report_lock);
}

/* n in 64 distinct sizes from 1 to SOAK_MAX_WORDS (odd ones included): per
 * shape state a backend keeps (vulkan's dispatch setups) fills up during the
 * warm-up, so what grows after it is a leak, not a cache. */
static int64_t fill_host(worker_t* w) {
  int64_t n = 1 + (int64_t)((pick(w, 64) * 257u) % SOAK_MAX_WORDS);
  int base = (int)pick(w, 1000);
  for (int64_t k = 0; k < n; k++) w->host[k] = (float)((base + k * 7) % 2001 - 1000);
  return n;
}

/* A buffer of n f32 on `dev` holding the host values. */
static bp_buffer_t* upload(worker_t* w, uint32_t dev, int64_t n) {
  bp_buffer_t* b = NULL;
  if (failed(w, bp_buffer_allocate(w->soak->devices[dev], 0, (uint64_t)n * 4, &b), "bp_buffer_allocate")) return NULL;
  if (failed(w, bp_copy_host_to_buffer(w->streams[dev], w->host, b, 0, (uint64_t)n * 4), "upload")) {
    bp_buffer_release(b);
    return NULL;
  }
  return b;
}

/* Reads n f32 of `b` on its device's stream and compares with scale * host. */
static void check(worker_t* w, uint32_t dev, bp_buffer_t* b, int64_t n, float scale, const char* what) {
  if (failed(w, bp_copy_buffer_to_host(w->streams[dev], b, 0, w->back, (uint64_t)n * 4), "download") ||
      failed(w, bp_stream_synchronize(w->streams[dev]), "synchronize")) {
    return;
  }
  for (int64_t k = 0; k < n; k++) {
    if (w->back[k] != scale * w->host[k]) {
      mismatch(w, what, k, w->back[k], scale * w->host[k]);
      return;
    }
  }
}

/* out = x + x on one device. */
static void do_op(worker_t* w) {
  uint32_t dev = pick(w, w->soak->num_devices);
  int64_t n = fill_host(w);
  bp_buffer_t* b = upload(w, dev, n);
  bp_tensor_t *x = NULL, *y = NULL;
  if (!b) return;
  if (!failed(w, bp_tensor_from_buffer(b, BP_DTYPE_F32, 1, &n, NULL, 0, &x), "bp_tensor_from_buffer")) {
    const bp_tensor_t* in[2] = {x, x};
    bp_status_t st = bp_op_run(w->streams[dev], BP_OP_add, in, 2, NULL, &y, 1);
    /* UNIMPLEMENTED: the device has no kernel for add at all (mpi:0 runs
     * collectives only); UNSUPPORTED: not this case. */
    if (st == BP_UNSUPPORTED || st == BP_UNIMPLEMENTED) {
      atomic_fetch_add(&w->soak->unsupported, 1);
    } else if (!failed(w, st, "bp_op_run(add)")) {
      check(w, dev, bp_tensor_buffer(y), n, 2.0f, "add");
      atomic_fetch_add(&w->soak->ops, 1);
    }
  }
  bp_tensor_release(y);
  bp_tensor_release(x);
  bp_buffer_release(b);
}

/* A copy between two random devices (same device, peer or across plugins),
 * on the stream of either side; with `event`, the upload is fenced by an
 * event recorded on the source stream and waited on by the copying one. */
static void do_copy(worker_t* w, int event) {
  uint32_t a = pick(w, w->soak->num_devices), b = pick(w, w->soak->num_devices);
  int64_t n = fill_host(w);
  bp_buffer_t* src = upload(w, a, n);
  bp_buffer_t* dst = NULL;
  bp_event_t* ev = NULL;
  if (!src) return;
  if (failed(w, bp_buffer_allocate(w->soak->devices[b], 0, (uint64_t)n * 4, &dst), "bp_buffer_allocate")) goto done;
  uint32_t on = pick(w, 2) ? a : b;
  if (event && on != a) {
    if (failed(w, bp_event_create(w->soak->devices[a], NULL, &ev), "bp_event_create") ||
        failed(w, bp_event_record(ev, w->streams[a]), "bp_event_record") ||
        failed(w, bp_stream_wait_event(w->streams[on], ev), "bp_stream_wait_event")) {
      goto done;
    }
  } else if (on != a && failed(w, bp_stream_synchronize(w->streams[a]), "synchronize")) {
    goto done;
  }
  if (failed(w, bp_copy_buffer(w->streams[on], src, 0, dst, 0, (uint64_t)n * 4), "bp_copy_buffer")) goto done;
  if (on != b && failed(w, bp_stream_synchronize(w->streams[on]), "synchronize")) goto done;
  check(w, b, dst, n, 1.0f, event ? "copy after an event wait" : "copy");
  atomic_fetch_add(ev ? &w->soak->events : &w->soak->copies, 1);
done:
  bp_event_release(ev);
  bp_buffer_release(dst);
  bp_buffer_release(src);
}

/* Streams and events come and go: a fresh stream replaces one of ours. */
static void do_churn(worker_t* w) {
  uint32_t dev = pick(w, w->soak->num_devices);
  bp_stream_t* s = NULL;
  bp_event_t* e = NULL;
  if (failed(w, bp_stream_create(w->soak->devices[dev], NULL, &s), "bp_stream_create")) return;
  if (!failed(w, bp_event_create(w->soak->devices[dev], NULL, &e), "bp_event_create") &&
      !failed(w, bp_event_record(e, s), "bp_event_record")) {
    failed(w, bp_event_synchronize(e), "bp_event_synchronize");
  }
  bp_event_release(e);
  bp_stream_release(w->streams[dev]);
  w->streams[dev] = s;
  atomic_fetch_add(&w->soak->churns, 1);
}

static void* worker_main(void* arg) {
  worker_t* w = arg;
  soak_t* s = w->soak;
  for (uint32_t d = 0; d < s->num_devices; d++) {
    if (failed(w, bp_stream_create(s->devices[d], NULL, &w->streams[d]), "bp_stream_create")) goto done;
  }
  while (!atomic_load(&s->stop) && now_s() < s->deadline) {
    uint32_t r = pick(w, 16);
    if (s->only >= 0) r = (uint32_t[]){0, 6, 11, 15}[s->only];
    if (r < 6) {
      do_op(w);
    } else if (r < 11) {
      do_copy(w, 0);
    } else if (r < 15) {
      do_copy(w, 1);
    } else {
      do_churn(w);
    }
  }
done:
  for (uint32_t d = 0; d < s->num_devices; d++) bp_stream_release(w->streams[d]);
  return NULL;
}

/* ---- sampling -------------------------------------------------------------- */
static double rss_bytes(void) {
  FILE* fp = fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (!fp) return 0.0;
  if (fscanf(fp, "%lu %lu", &size, &resident) != 2) resident = 0;
  fclose(fp);
  return (double)resident * (double)sysconf(_SC_PAGESIZE);
}

static double open_fds(void) {
  DIR* d = opendir("/proc/self/fd");
  int n = 0;
  if (!d) return 0.0;
  for (struct dirent* e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return (double)(n - 1); /* the directory itself */
}

/* Least-squares slope of y over t. */
static double slope(const double* t, const double* y, int n) {
  if (n < 2) return 0.0;
  double mt = 0, my = 0;
  for (int k = 0; k < n; k++) mt += t[k], my += y[k];
  mt /= n;
  my /= n;
  double num = 0, den = 0;
  for (int k = 0; k < n; k++) num += (t[k] - mt) * (y[k] - my), den += (t[k] - mt) * (t[k] - mt);
  return den > 0 ? num / den : 0.0;
}

/* Lowest of n samples (0 when there are none). */
static double floor_of(const double* y, int n) {
  double m = n > 0 ? y[0] : 0.0;
  for (int k = 1; k < n; k++) m = y[k] < m ? y[k] : m;
  return m;
}

int main(int argc, char** argv) {
  double seconds = 600.0;
  int threads = 8;
  uint64_t seed = 1;
  static const char* const kinds[] = {"op", "copy", "event", "churn"};
  static soak_t s;
  s.only = -1;
  for (int k = 1; k < argc; k++) {
    if (strcmp(argv[k], "--seconds") == 0 && k + 1 < argc) {
      seconds = atof(argv[++k]);
    } else if (strcmp(argv[k], "--threads") == 0 && k + 1 < argc) {
      threads = atoi(argv[++k]);
    } else if (strcmp(argv[k], "--seed") == 0 && k + 1 < argc) {
      seed = strtoull(argv[++k], NULL, 10);
    } else if (strcmp(argv[k], "--only") == 0 && k + 1 < argc) {
      k++;
      for (int j = 0; j < 4; j++) {
        if (strcmp(argv[k], kinds[j]) == 0) s.only = j;
      }
      if (s.only < 0) {
        fprintf(stderr, "bp-soak: --only takes op, copy, event or churn\n");
        return 2;
      }
    } else {
      fprintf(stderr, "usage: bp-soak [--seconds N] [--threads T] [--seed S] [--only op|copy|event|churn]\n");
      return 2;
    }
  }
  if (!(seconds >= 10.0) || threads < 1 || threads > 64) {
    fprintf(stderr, "soak: --seconds must be >= 10 and --threads in 1..64\n");
    return 2;
  }
  setenv("BP_CPU_DEVICES", "4", 0);
  pthread_mutex_init(&s.report_lock, NULL);
  bp_status_t st = bp_context_create(NULL, &s.ctx);
  if (st != BP_OK) {
    fprintf(stderr, "soak: bp_context_create: %s: %s\n", bp_status_name(st), bp_status_message());
    return 1;
  }
  uint32_t count = bp_context_device_count(s.ctx);
  for (uint32_t d = 0; d < count && s.num_devices < SOAK_MAX_DEVICES; d++) {
    if (bp_context_device(s.ctx, d, &s.devices[s.num_devices]) == BP_OK) s.num_devices++;
  }
  if (s.num_devices == 0) {
    fprintf(stderr, "soak: no device\n");
    bp_context_release(s.ctx);
    return 1;
  }
  printf("soak: %.0f s, %d threads, seed %llu, %u devices:", seconds, threads, (unsigned long long)seed,
         s.num_devices);
  for (uint32_t d = 0; d < s.num_devices; d++) printf(" %s", bp_device_name(s.devices[d]));
  printf("\n");
  fflush(stdout);

  double start = now_s();
  s.deadline = start + seconds;
  worker_t* workers = calloc((size_t)threads, sizeof *workers);
  pthread_t* tids = calloc((size_t)threads, sizeof *tids);
  static double ts[SOAK_MAX_SAMPLES], rss[SOAK_MAX_SAMPLES], fds[SOAK_MAX_SAMPLES];
  int ns = 0;
  if (!workers || !tids) return 1;
  for (int k = 0; k < threads; k++) {
    workers[k].soak = &s;
    workers[k].rng = seed * 1000003u + (uint64_t)k;
    pthread_create(&tids[k], NULL, worker_main, &workers[k]);
  }
  double warmup = seconds * 0.4 < 5.0 ? 5.0 : seconds * 0.4 > 60.0 ? 60.0 : seconds * 0.4;
  while (now_s() < s.deadline) {
    sleep(1);
    double t = now_s() - start;
    if (t >= warmup && ns < SOAK_MAX_SAMPLES) {
      ts[ns] = t;
      rss[ns] = rss_bytes();
      fds[ns] = open_fds();
      ns++;
    }
  }
  atomic_store(&s.stop, 1);
  for (int k = 0; k < threads; k++) pthread_join(tids[k], NULL);
  bp_context_release(s.ctx);
  free(workers);
  free(tids);

  double rs = slope(ts, rss, ns), fs = slope(ts, fds, ns);
  int fd_growth = ns ? (int)(fds[ns - 1] - fds[0]) : 0;
  long errors = atomic_load(&s.errors), wrong = atomic_load(&s.mismatches);
  printf("soak: %ld ops, %ld copies, %ld copies behind an event wait, %ld stream/event churns,"
         " %ld ops unsupported\n",
         atomic_load(&s.ops), atomic_load(&s.copies), atomic_load(&s.events), atomic_load(&s.churns),
         atomic_load(&s.unsupported));
  printf("soak: %d samples after %.0f s of warm-up: resident %.1f -> %.1f MiB, slope %.1f KiB/s (bound %.0f);"
         " open fds %.0f -> %.0f, slope %.4f/s (bound %.2f)\n",
         ns, warmup, ns ? rss[0] / 1048576.0 : 0.0, ns ? rss[ns - 1] / 1048576.0 : 0.0, rs / 1024.0,
         SOAK_RSS_BYTES_PER_S / 1024.0, ns ? fds[0] : 0.0, ns ? fds[ns - 1] : 0.0, fs, SOAK_FDS_PER_S);
  printf("soak: %ld errors, %ld wrong results\n", errors, wrong);
  /* A leak shows as a slope over the bound and as a floor that rose over the
   * window (the header comment says why both). */
  double window_s = ns >= 2 ? ts[ns - 1] - ts[0] : 0.0;
  double floor_growth = floor_of(rss + ns - (ns + 3) / 4, (ns + 3) / 4) - floor_of(rss, (ns + 3) / 4);
  double allowance = 0.5 * SOAK_RSS_BYTES_PER_S * window_s;
  if (allowance < SOAK_RSS_SETTLE_BYTES) allowance = SOAK_RSS_SETTLE_BYTES;
  int rss_ok = SOAK_JUDGES_RSS ? rs <= SOAK_RSS_BYTES_PER_S || floor_growth <= allowance : 1;
  printf("soak: resident floor %+.1f MiB over the window (allowed %.1f when the slope is over its bound)%s\n",
         floor_growth / 1048576.0, allowance / 1048576.0,
         SOAK_JUDGES_RSS ? "" : "; not judged under AddressSanitizer, LeakSanitizer checks at exit");
  int ok = errors == 0 && wrong == 0 && ns >= 2 && rss_ok && fs <= SOAK_FDS_PER_S &&
           fd_growth <= SOAK_FD_SLACK && atomic_load(&s.ops) + atomic_load(&s.copies) > 0;
  printf("soak: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
