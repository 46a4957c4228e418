/* bp-bench: PyTorch as a same-run baseline. tools/bench/torch_conv.py runs
 * as a child in --serve mode (it imports torch and warms up once); each
 * bpb_torch_run asks it for one timed call over a pipe, so that its
 * repetitions interleave with backplane's. The interpreter is
 * $BP_BENCH_PYTHON, else /usr/bin/python3 (Debian's python3-torch lives
 * there), else python3 on PATH; the script is $BP_BENCH_TORCH_SCRIPT, else
 * the source tree's. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#ifndef BPB_TORCH_SCRIPT
#define BPB_TORCH_SCRIPT "tools/bench/torch_conv.py"
#endif

static const char* torch_python(void) {
  const char* env = getenv("BP_BENCH_PYTHON");
  if (env && *env) return env;
  return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

int bpb_torch_open(bpb_torch_t* t, const int64_t shape[7], int threads, char* why, size_t cap) {
  memset(t, 0, sizeof *t);
  const char* script = getenv("BP_BENCH_TORCH_SCRIPT");
  if (!script || !*script) script = BPB_TORCH_SCRIPT;
  int to[2], from[2];
  if (pipe(to) != 0) return snprintf(why, cap, "pipe failed"), 0;
  if (pipe(from) != 0) {
    close(to[0]), close(to[1]);
    return snprintf(why, cap, "pipe failed"), 0;
  }
  char num[8][24];
  for (int i = 0; i < 7; i++) snprintf(num[i], sizeof num[i], "%lld", (long long)shape[i]);
  snprintf(num[7], sizeof num[7], "%d", threads);
  const char* py = torch_python();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(to[0], 0), dup2(from[1], 1);
    close(to[0]), close(to[1]), close(from[0]), close(from[1]);
    execlp(py, py, script, num[0], num[1], num[2], num[3], num[4], num[5], num[6], "--threads",
           num[7], "--serve", (char*)NULL);
    _exit(127);
  }
  close(to[0]), close(from[1]);
  if (pid < 0) {
    close(to[1]), close(from[0]);
    return snprintf(why, cap, "fork failed"), 0;
  }
  t->pid = pid;
  t->to = fdopen(to[1], "w");
  t->from = fdopen(from[0], "r");
  char line[128];
  if (!t->to || !t->from || !fgets(line, sizeof line, t->from) || strncmp(line, "ready", 5) != 0) {
    snprintf(why, cap, "%s %s did not start (python3-torch missing? scripts/setup-debian.sh --bench)",
             py, script);
    bpb_torch_close(t);
    return 0;
  }
  return 1;
}

double bpb_torch_run(bpb_torch_t* t) {
  char line[128];
  double s = -1.0;
  if (fputs("run\n", t->to) < 0 || fflush(t->to) != 0) return -1.0;
  if (!fgets(line, sizeof line, t->from) || sscanf(line, "seconds %lf", &s) != 1) return -1.0;
  return s;
}

void bpb_torch_close(bpb_torch_t* t) {
  if (t->to) fclose(t->to);
  if (t->from) fclose(t->from);
  if (t->pid > 0) {
    int status;
    if (waitpid(t->pid, &status, WNOHANG) == 0) {
      kill(t->pid, SIGTERM);
      waitpid(t->pid, &status, 0);
    }
  }
  memset(t, 0, sizeof *t);
}
