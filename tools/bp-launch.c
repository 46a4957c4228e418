/* bp-launch: starts N ranks of a program on this machine, as
 * torch.distributed's launcher does for env:// rendezvous.
 *
 *   bp-launch -n 4 [--port P] [--timeout SEC] -- PROGRAM [ARGS...]
 *
 * Each rank is a child process with BACKPLANE_RANK, BACKPLANE_WORLD_SIZE,
 * BACKPLANE_MASTER_ADDR (127.0.0.1) and BACKPLANE_MASTER_PORT set (the
 * TCP bootstrap, bp_bootstrap_create_env, reads them). Output is the
 * ranks' own. When a rank fails (nonzero exit or a signal) the others get
 * SIGTERM after a grace of 10 s, and SIGKILL at the timeout (default
 * 600 s): a broken world never hangs the launcher. The exit code is 0
 * when every rank exited 0, else the first failing rank's code (128 +
 * signal for a signal).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 256
#define GRACE_S 10.0

static void usage(FILE* f) {
  fprintf(f, "usage: bp-launch -n RANKS [--port PORT] [--timeout SEC] -- PROGRAM [ARGS...]\n"
             "  Starts RANKS processes of PROGRAM with BACKPLANE_RANK, BACKPLANE_WORLD_SIZE,\n"
             "  BACKPLANE_MASTER_ADDR and BACKPLANE_MASTER_PORT set (default port: one derived\n"
             "  from this process id). Exits 0 when every rank did.\n");
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int parse_int(const char* s, long lo, long hi, long* out) {
  char* end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || !end || *end || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static void signal_all(const pid_t* pids, const int* alive, int n, int sig) {
  for (int r = 0; r < n; ++r)
    if (alive[r]) kill(pids[r], sig);
}

int main(int argc, char** argv) {
  long n = 0, port = 20000 + (long)(getpid() % 20000) * 2 + 1, timeout = 600;
  int i = 1;
  for (; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "--")) {
      ++i;
      break;
    }
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    }
    const int has = i + 1 < argc;
    if ((!strcmp(a, "-n") || !strcmp(a, "--ranks")) && has && parse_int(argv[i + 1], 1, MAX_RANKS, &n)) {
      ++i;
    } else if (!strcmp(a, "--port") && has && parse_int(argv[i + 1], 1, 65535, &port)) {
      ++i;
    } else if (!strcmp(a, "--timeout") && has && parse_int(argv[i + 1], 1, 86400, &timeout)) {
      ++i;
    } else {
      fprintf(stderr, "bp-launch: bad argument '%s'\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (n < 1 || i >= argc) {
    usage(stderr);
    return 2;
  }
  char v[32];
  snprintf(v, sizeof v, "%ld", n);
  setenv("BACKPLANE_WORLD_SIZE", v, 1);
  snprintf(v, sizeof v, "%ld", port);
  setenv("BACKPLANE_MASTER_PORT", v, 1);
  if (!getenv("BACKPLANE_MASTER_ADDR")) setenv("BACKPLANE_MASTER_ADDR", "127.0.0.1", 1);
  pid_t pids[MAX_RANKS];
  int alive[MAX_RANKS] = {0}, left = 0, code = 0;
  for (long r = 0; r < n; ++r) {
    snprintf(v, sizeof v, "%ld", r);
    setenv("BACKPLANE_RANK", v, 1);
    pids[r] = fork();
    if (pids[r] < 0) {
      perror("bp-launch: fork");
      signal_all(pids, alive, (int)r, SIGKILL);
      code = 2;
      break;
    }
    if (pids[r] == 0) {
      execvp(argv[i], argv + i);
      fprintf(stderr, "bp-launch: cannot run %s: %s\n", argv[i], strerror(errno));
      _exit(127);
    }
    alive[r] = 1;
    ++left;
  }
  const double start = now_s();
  double failed_at = 0.0;
  int termed = 0;
  while (left > 0) {
    int status = 0;
    pid_t p = waitpid(-1, &status, WNOHANG);
    if (p < 0 && errno != EINTR) break;
    if (p > 0) {
      for (long r = 0; r < n; ++r) {
        if (!alive[r] || pids[r] != p) continue;
        alive[r] = 0;
        --left;
        const int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (rc != 0 && code == 0) {
          fprintf(stderr, "bp-launch: rank %ld exited with %d\n", r, rc);
          code = rc;
          failed_at = now_s();
        }
      }
      continue;
    }
    const double t = now_s();
    if (code && !termed && t - failed_at > GRACE_S) {
      signal_all(pids, alive, (int)n, SIGTERM);
      termed = 1;
    }
    if (t - start > (double)timeout) {
      fprintf(stderr, "bp-launch: ranks still running after %ld s; killed\n", timeout);
      signal_all(pids, alive, (int)n, SIGKILL);
      if (code == 0) code = 124;
      timeout = 86400; /* reap what is left */
    }
    usleep(20 * 1000);
  }
  return code;
}
