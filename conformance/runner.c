/* Crash isolation: cases run in forked children that stream one record per
 * case to the parent over a pipe.
 *
 * A child that dies (signal, or exit in the middle of a case) has its case in
 * progress scored CRASH; a case that runs past the timeout gets the child
 * killed (SIGKILL) and is scored TIMEOUT. Either way a fresh child resumes at
 * the next case, so the run always continues. Children must create their own
 * backplane context: plugin worker threads do not survive fork.
 *
 * Records are fixed-size and smaller than PIPE_BUF, so each write is atomic.
 *
 * A child never outlives the runner: it asks for SIGKILL when its parent
 * dies (PR_SET_PDEATHSIG) and checks after asking that the parent is still
 * the one that forked it, so a runner killed with SIGKILL (or any signal)
 * leaves no child behind, not even one hanging inside a plugin.
 */
#include <errno.h>
#include <poll.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conform.h"

enum { REC_BEGIN = 1, REC_RESULT = 2, REC_FATAL = 3, REC_RETRY = 4 };

typedef struct record {
  uint32_t kind;
  uint32_t index;
  bpc_result_t result;
} record_t;
_Static_assert(sizeof(record_t) <= 512, "records must stay far below PIPE_BUF");

struct bpc_child {
  int fd;
  const uint8_t* done; /* cases not to run (NULL: none) */
  uint32_t start;      /* the first case this child was asked to run */
};

int bpc_child_wants(const bpc_child_t* child, uint32_t index) {
  return !child->done || !child->done[index];
}

static void child_write(bpc_child_t* child, const record_t* rec) {
  const uint8_t* p = (const uint8_t*)rec;
  size_t left = sizeof *rec;
  while (left > 0) {
    ssize_t n = write(child->fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) _exit(4); /* parent gone: nothing left to report to */
    p += n;
    left -= (size_t)n;
  }
}

void bpc_child_begin(bpc_child_t* child, uint32_t index) {
  record_t rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = REC_BEGIN;
  rec.index = index;
  child_write(child, &rec);
}

int bpc_child_retry_fresh(bpc_child_t* child, uint32_t index, const bpc_result_t* result) {
  if (index == child->start) return 0; /* fresh already: its result stands */
  record_t rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = REC_RETRY;
  rec.index = index;
  rec.result = *result;
  child_write(child, &rec);
  return 1;
}

void bpc_child_result(bpc_child_t* child, uint32_t index, const bpc_result_t* result) {
  record_t rec;
  memset(&rec, 0, sizeof rec);
  rec.kind = REC_RESULT;
  rec.index = index;
  rec.result = *result;
  child_write(child, &rec);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void score(bpc_result_t* r, uint32_t status, const char* msg) {
  memset(r, 0, sizeof *r);
  r->status = status;
  r->max_ulps = -1.0;
  r->max_abs = -1.0;
  snprintf(r->message, sizeof r->message, "%s", msg);
}

/* Reads one record; returns 1 on success, 0 on EOF, -1 on error. */
static int read_record(int fd, record_t* rec) {
  uint8_t* p = (uint8_t*)rec;
  size_t got = 0;
  while (got < sizeof *rec) {
    ssize_t n = read(fd, p + got, sizeof *rec - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -1;
    if (n == 0) return got == 0 ? 0 : -1;
    got += (size_t)n;
  }
  return 1;
}

static void describe_exit(int wstatus, char* buf, size_t size) {
  if (WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    snprintf(buf, size, "crashed: killed by signal %d (%s)", sig, strsignal(sig));
  } else if (WIFEXITED(wstatus)) {
    snprintf(buf, size, "crashed: the process exited with status %d in the middle of the case",
             WEXITSTATUS(wstatus));
  } else {
    snprintf(buf, size, "crashed: the process ended (wait status %d)", wstatus);
  }
}

static int is_todo(const bpc_runner_ops_t* ops, uint32_t index) {
  return !ops->done || !ops->done[index];
}

/* The first case at or after `from` still to run; `count` when none. */
static uint32_t next_todo(const bpc_runner_ops_t* ops, uint32_t from, uint32_t count) {
  while (from < count && !is_todo(ops, from)) from++;
  return from;
}

/* A case's final result: kept, and handed to on_result (the journal). */
static void finish(const bpc_runner_ops_t* ops, uint32_t group, bpc_result_t* results,
                   uint32_t index, const bpc_result_t* result) {
  results[index] = *result;
  if (ops->on_result) ops->on_result(ops->user, group, index, result);
}

/* A case a child asked to rerun in a fresh child, with the result it had
 * there (kept: a pass in the fresh child is then a QUALITY_WARNING that
 * names it, so the failure is not lost). index < 0: none. */
typedef struct retry {
  int64_t index;
  bpc_result_t first;
  /* Timeouts: the first of a run of them is confirmed in a fresh child with
   * BPC_TIMEOUT_CONFIRM times the budget before it is scored, so one-time
   * work a fresh process repeats (a driver compiling a kernel on a loaded
   * machine) is not scored as a hang, nor does it make every case after
   * it time out too. Later timeouts in a row (a backend that hangs) are
   * scored at once. */
  int64_t confirming;  /* the case under confirmation; -1: none */
  int last_timed_out;  /* the last case scored was a TIMEOUT */
} retry_t;

#define BPC_TIMEOUT_CONFIRM 4.0

/* The result of case `index` as a fresh child reported it, given the
 * retry it may answer. */
static bpc_result_t after_retry(retry_t* retry, uint32_t index, const bpc_result_t* fresh) {
  bpc_result_t r = *fresh;
  if (retry->index != (int64_t)index) return r;
  retry->index = -1;
  if (fresh->status == BPC_PASS || fresh->status == BPC_QUALITY_WARNING) {
    bpc_result_set(&r, BPC_QUALITY_WARNING,
                   "passed in a fresh process; failed after other cases in the same process: %.180s",
                   retry->first.message);
  }
  return r;
}

/* Runs one child from `start`; returns the index to resume at. */
static uint32_t run_child(const bpc_runner_ops_t* ops, uint32_t group, uint32_t start, uint32_t count,
                          double timeout_s, bpc_result_t* results, retry_t* retry, bp_status_t* out_status) {
  int fds[2];
  if (pipe(fds) != 0) {
    *out_status = BP_UNAVAILABLE;
    return count;
  }
  fflush(NULL); /* no buffered output is duplicated into the child */
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    *out_status = BP_UNAVAILABLE;
    return count;
  }
  if (pid == 0) {
    close(fds[0]);
#if defined(__linux__)
    /* Die with the runner. The parent may have died between fork and
     * prctl: then getppid no longer names it and the child leaves at once. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(5);
#else
    (void)parent;
#endif
    /* A crash must end the child, whatever handlers the parent installed
     * (a test framework's, for example). */
    static const int kFatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGPIPE};
    for (size_t k = 0; k < sizeof kFatal / sizeof kFatal[0]; k++) signal(kFatal[k], SIG_DFL);
    bpc_child_t child = {fds[1], ops->done, start};
    char msg[256] = "";
    int rc = ops->run_group(ops->user, group, start, &child, msg, sizeof msg);
    if (rc != 0) {
      record_t rec;
      memset(&rec, 0, sizeof rec);
      rec.kind = REC_FATAL;
      rec.index = start;
      score(&rec.result, BPC_FAIL, msg[0] ? msg : "the child could not run its cases");
      child_write(&child, &rec);
    }
    close(fds[1]);
    _exit(rc != 0 ? 3 : 0);
  }
  close(fds[1]);
  int fd = fds[0];
  int64_t current = -1; /* case in progress */
  uint32_t next = start;
  /* the budget of a case: longer for one under confirmation */
#define CASE_BUDGET(index) (retry->confirming == (int64_t)(index) ? timeout_s * BPC_TIMEOUT_CONFIRM : timeout_s)
  double deadline = now_s() + CASE_BUDGET(start);
  int killed = 0;
  for (;;) {
    double left = deadline - now_s();
    if (left <= 0.0) {
      kill(pid, SIGKILL);
      killed = 1;
      break;
    }
    struct pollfd pfd = {fd, POLLIN, 0};
    if (ops->on_tick && left > 0.25) left = 0.25; /* wake up for the tick */
    int pr = poll(&pfd, 1, (int)(left * 1000.0) + 1);
    if (ops->on_tick) ops->on_tick(ops->user);
    if (pr < 0 && errno == EINTR) continue;
    if (pr == 0) continue; /* re-check the deadline */
    record_t rec;
    int rr = read_record(fd, &rec);
    if (rr <= 0) break; /* EOF (child ended) or a torn record */
    if (rec.index >= count || !is_todo(ops, rec.index)) continue;
    if (rec.kind == REC_BEGIN) {
      current = rec.index;
      deadline = now_s() + CASE_BUDGET(rec.index);
    } else if (rec.kind == REC_RESULT) {
      bpc_result_t r = after_retry(retry, rec.index, &rec.result);
      finish(ops, group, results, rec.index, &r);
      if (retry->confirming == (int64_t)rec.index) retry->confirming = -1;
      retry->last_timed_out = 0;
      next = next_todo(ops, rec.index + 1, count);
      current = -1;
      deadline = now_s() + CASE_BUDGET(next);
    } else if (rec.kind == REC_RETRY && rec.index > start) {
      /* The child ends; a fresh one starts at this case, unscored so far. */
      next = rec.index;
      current = -1;
      retry->index = rec.index;
      retry->first = rec.result;
    } else if (rec.kind == REC_FATAL) {
      for (uint32_t k = next; k < count; k = next_todo(ops, k + 1, count)) finish(ops, group, results, k, &rec.result);
      next = count;
      current = -1;
    }
  }
  close(fd);
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  bpc_result_t scored;
  memset(&scored, 0, sizeof scored);
  char msg[200];
  uint32_t charged = count; /* the case the end of this child is charged to */
  if (killed) {
    charged = current >= 0 ? (uint32_t)current : next;
    if (!retry->last_timed_out && retry->confirming != (int64_t)charged) {
      retry->confirming = charged; /* not scored yet: a fresh child tries it with more time */
      return charged;
    }
    if (retry->confirming == (int64_t)charged) {
      snprintf(msg, sizeof msg,
               "timed out: no result after %.3g s, nor after %.3g s in a fresh process; killed", timeout_s,
               timeout_s * BPC_TIMEOUT_CONFIRM);
      retry->confirming = -1;
    } else {
      snprintf(msg, sizeof msg, "timed out: no result after %.3g s; the process was killed", timeout_s);
    }
    score(&scored, BPC_TIMEOUT, msg);
    retry->last_timed_out = 1;
  } else if (current >= 0) {
    charged = (uint32_t)current;
    describe_exit(wstatus, msg, sizeof msg);
    score(&scored, BPC_CRASH, msg);
  } else if (next < count && next == start) {
    /* The child ended without starting a case: charge the next case so the
     * run always makes progress. */
    charged = next;
    describe_exit(wstatus, msg, sizeof msg);
    score(&scored, BPC_CRASH, msg);
  }
  if (charged < count) {
    finish(ops, group, results, charged, &scored);
    if (!killed) retry->last_timed_out = 0;
    next = next_todo(ops, charged + 1, count);
  }
  return next;
#undef CASE_BUDGET
}

bp_status_t bpc_run_isolated(const bpc_runner_ops_t* ops, uint32_t group, uint32_t count,
                             double timeout_s, bpc_result_t* results) {
  if (!ops || !ops->run_group || (count > 0 && !results) || !(timeout_s > 0.0)) {
    return BP_INVALID_ARGUMENT;
  }
  for (uint32_t k = 0; k < count; k++) {
    if (is_todo(ops, k)) score(&results[k], BPC_FAIL, "not run");
  }
  uint32_t next = next_todo(ops, 0, count);
  bp_status_t st = BP_OK;
  retry_t retry = {-1, {0}, -1, 0};
  while (next < count && st == BP_OK) next = run_child(ops, group, next, count, timeout_s, results, &retry, &st);
  return st;
}
