/* The progress line of bp-conform: cases done / total, the backend and op
 * running, the time elapsed and an estimate of the time left, rewritten in
 * place with '\r' and erased at the end.
 *
 * The estimate assumes the cases left take, on average, as long as the cases
 * run so far in this process (cases read back from a journal are counted as
 * done but not as timed). Only the parent process draws; not thread-safe
 * (bp-conform's parent is single-threaded).
 */
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "conform.h"

#define BPC_PROGRESS_MIN_INTERVAL_S 0.1 /* at most ~10 redraws per second */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bpc_progress_eta(const bpc_progress_state_t* s) {
  if (!s || s->total <= s->done) return 0.0;
  uint64_t timed = s->done > s->resumed ? s->done - s->resumed : 0;
  if (timed == 0 || !(s->elapsed_s > 0.0)) return -1.0;
  return s->elapsed_s / (double)timed * (double)(s->total - s->done);
}

/* "42s", "3m05s", "2h07m"; "?" for a negative (unknown) duration. */
static void format_duration(double seconds, char* out, size_t size) {
  if (seconds < 0.0) {
    snprintf(out, size, "?");
    return;
  }
  unsigned long long t = (unsigned long long)(seconds + 0.5);
  if (t < 60) snprintf(out, size, "%llus", t);
  else if (t < 3600) snprintf(out, size, "%llum%02llus", t / 60, t % 60);
  else snprintf(out, size, "%lluh%02llum", t / 3600, t / 60 % 60);
}

bp_status_t bpc_progress_format(const bpc_progress_state_t* s, size_t width, char* out, size_t size) {
  if (!s || !out || size == 0 || width == 0 || s->done > s->total) return BP_INVALID_ARGUMENT;
  char elapsed[32], left[32];
  format_duration(s->elapsed_s, elapsed, sizeof elapsed);
  format_duration(bpc_progress_eta(s), left, sizeof left);
  unsigned pct = s->total ? (unsigned)(s->done * 100 / s->total) : 100u;
  int n = snprintf(out, size, "[%llu/%llu %u%%] %s: %s  elapsed %s  left ~%s",
                   (unsigned long long)s->done, (unsigned long long)s->total, pct,
                   s->backend ? s->backend : "-", s->op ? s->op : "-", elapsed, left);
  if (n < 0) return BP_INTERNAL;
  /* One terminal line: never wrap (a wrapped line is not rewritten by '\r'). */
  if (width < size && strlen(out) > width) out[width] = 0;
  return BP_OK;
}

void bpc_progress_start(bpc_progress_t* p, FILE* fp, int enabled, uint64_t total) {
  memset(p, 0, sizeof *p);
  p->fp = fp;
  p->enabled = enabled && fp;
  p->st.total = total;
  p->start = now_s();
  p->last = -1.0;
  p->width = 80;
#if defined(TIOCGWINSZ)
  struct winsize ws;
  if (p->enabled && ioctl(fileno(fp), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) p->width = ws.ws_col;
#endif
}

static void draw(bpc_progress_t* p, int force) {
  if (!p->enabled) return;
  double t = now_s();
  if (!force && p->last >= 0.0 && t - p->last < BPC_PROGRESS_MIN_INTERVAL_S) return;
  p->last = t;
  p->st.elapsed_s = t - p->start;
  char line[512];
  /* width - 1: the cursor after a full-width line would wrap on some terminals. */
  if (bpc_progress_format(&p->st, p->width - 1, line, sizeof line) != BP_OK) return;
  size_t len = strlen(line);
  fprintf(p->fp, "\r%s", line);
  for (size_t k = len; k < p->shown; k++) fputc(' ', p->fp); /* what the last line had more */
  p->shown = len;
  fflush(p->fp);
}

void bpc_progress_set(bpc_progress_t* p, const char* backend, const char* op) {
  p->st.backend = backend;
  p->st.op = op;
  draw(p, 0);
}

void bpc_progress_add(bpc_progress_t* p, uint64_t ran, uint64_t resumed) {
  p->st.done += ran + resumed;
  p->st.resumed += resumed;
  if (p->st.done > p->st.total) p->st.done = p->st.total;
  draw(p, 0);
}

void bpc_progress_tick(bpc_progress_t* p) { draw(p, 0); }

void bpc_progress_clear(bpc_progress_t* p) {
  if (!p->enabled || p->shown == 0) return;
  fputc('\r', p->fp);
  for (size_t k = 0; k < p->shown; k++) fputc(' ', p->fp);
  fputc('\r', p->fp);
  fflush(p->fp);
  p->shown = 0;
  p->last = -1.0; /* the next update redraws at once */
}
