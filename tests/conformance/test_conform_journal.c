/* bp-conform survives being killed: the result journal, --resume, the
 * parent-death signal of its case children, and report paths that are not
 * regular files.
 *
 * The first tests drive journal.c and runner.c directly; the others run the
 * bp-conform executable (BPC_CONFORM_EXE) on the CPU plugin and on the
 * template plugin built to hang in add (BPC_HANG_PLUGIN).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conform.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static char* tmp_dir(void) {
  char* d = strdup("/tmp/bp_journal_XXXXXX");
  assert_non_null(d);
  assert_non_null(mkdtemp(d));
  return d;
}

static void rm_dir(char* dir) {
  DIR* d = opendir(dir);
  if (d) {
    struct dirent* e;
    while ((e = readdir(d))) {
      if (e->d_name[0] == '.') continue;
      char p[4096];
      snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
      unlink(p);
    }
    closedir(d);
  }
  rmdir(dir);
  free(dir);
}

static char* read_all(const char* path, size_t* out_size) {
  FILE* fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char* buf = malloc((size_t)n + 1);
  assert_non_null(buf);
  size_t got = fread(buf, 1, (size_t)n, fp);
  fclose(fp);
  buf[got] = '\0';
  if (out_size) *out_size = got;
  return buf;
}

/* The two files exist and hold the same bytes. */
static void assert_same_file(const char* a, const char* b) {
  size_t sa = 0, sb = 0;
  char* ja = read_all(a, &sa);
  char* jb = read_all(b, &sb);
  assert_non_null(ja);
  assert_non_null(jb);
  assert_int_equal(sa, sb);
  assert_memory_equal(ja, jb, sa);
  free(ja);
  free(jb);
}

static size_t count_lines(const char* path) {
  char* s = read_all(path, NULL);
  size_t n = 0;
  for (char* p = s; p && *p; p++) n += *p == '\n';
  free(s);
  return n;
}

/* ---- journal.c --------------------------------------------------------------- */
static bpc_result_t result(uint32_t status, double ulps, double abs_err, const char* msg) {
  bpc_result_t r;
  memset(&r, 0, sizeof r);
  r.status = status;
  r.max_ulps = ulps;
  r.max_abs = abs_err;
  snprintf(r.message, sizeof r.message, "%s", msg);
  return r;
}

static void assert_result_equal(const bpc_result_t* a, const bpc_result_t* b) {
  assert_int_equal(a->status, b->status);
  assert_memory_equal(&a->max_ulps, &b->max_ulps, sizeof(double));
  assert_memory_equal(&a->max_abs, &b->max_abs, sizeof(double));
  assert_string_equal(a->message, b->message);
}

static void test_journal_roundtrip_torn_corrupt(void** state) {
  (void)state;
  char* dir = tmp_dir();
  char path[4200], msg[400];
  snprintf(path, sizeof path, "%s/j", dir);
  bpc_result_t rs[4] = {
      result(BPC_PASS, -1.0, 0.0, ""),
      result(BPC_FAIL, 0.1, 1e-300, "tab\there, newline\nthere, back\\slash\\t, CR\r end"),
      result(BPC_TIMEOUT, INFINITY, 3.0000000000000004, "timed out"),
      result(BPC_CRASH, 7.5, -1.0, "crashed: killed by signal 11 (Segmentation fault)"),
  };
  const char* ids[4] = {"add/f32/contig/0", "add/f32/odd\tid/1", "relu/f16/x/2", "relu/f16/x/3"};
  bpc_journal_t* j = NULL;
  assert_int_equal(bpc_journal_open(path, "sel A", 0, &j, msg, sizeof msg), BP_OK);
  for (int k = 0; k < 4; k++) assert_int_equal(bpc_journal_append(j, "cpu", ids[k], &rs[k]), BP_OK);
  /* The same case again: the later record wins. */
  bpc_result_t again = result(BPC_PASS, 1.0, 2.0, "second");
  assert_int_equal(bpc_journal_append(j, "vk", ids[0], &again), BP_OK);
  assert_int_equal(bpc_journal_append(j, "vk", ids[0], &again), BP_OK);
  assert_int_equal(bpc_journal_count(j), 5);
  bpc_journal_close(j);
  size_t whole = 0;
  free(read_all(path, &whole));

  /* A torn last line (the kill cut the write) and a line with a wrong
   * checksum are ignored; --resume cuts the file back to the last good line. */
  FILE* fp = fopen(path, "ab");
  assert_non_null(fp);
  fputs("00000000\tcpu\trelu/f16/x/9\tPASS\t-1\t0\tcorrupt\n", fp);
  fputs("1234abcd\tcpu\trelu/f16/x/10\tPA", fp);
  fclose(fp);
  assert_int_equal(bpc_journal_open(path, "sel A", 1, &j, msg, sizeof msg), BP_OK);
  assert_int_equal(bpc_journal_count(j), 5);
  struct stat sb;
  assert_int_equal(stat(path, &sb), 0);
  assert_int_equal((size_t)sb.st_size, whole);
  bpc_result_t got;
  for (int k = 0; k < 4; k++) {
    assert_int_equal(bpc_journal_find(j, "cpu", ids[k], &got), 1);
    assert_result_equal(&got, &rs[k]);
  }
  assert_int_equal(bpc_journal_find(j, "vk", ids[0], &got), 1);
  assert_result_equal(&got, &again);
  assert_int_equal(bpc_journal_find(j, "cpu", "relu/f16/x/9", &got), 0);
  assert_int_equal(bpc_journal_find(j, "cpu", "relu/f16/x/10", &got), 0);
  assert_int_equal(bpc_journal_find(j, "vk", ids[1], &got), 0);
  /* Appending after the cut gives a whole journal again. */
  assert_int_equal(bpc_journal_append(j, "cpu", "relu/f16/x/10", &rs[0]), BP_OK);
  assert_int_equal(bpc_journal_reload(j), BP_OK);
  assert_int_equal(bpc_journal_count(j), 6);
  bpc_journal_close(j);

  /* A journal of another selection is refused on --resume, kept intact. */
  assert_int_equal(bpc_journal_open(path, "sel B", 1, &j, msg, sizeof msg), BP_FAILED_PRECONDITION);
  assert_null(j);
  assert_non_null(strstr(msg, "not a journal of this selection"));
  assert_int_equal(count_lines(path), 8);
  /* Without --resume the journal starts afresh. */
  assert_int_equal(bpc_journal_open(path, "sel B", 0, &j, msg, sizeof msg), BP_OK);
  assert_int_equal(bpc_journal_count(j), 0);
  bpc_journal_close(j);
  assert_int_equal(count_lines(path), 1);
  rm_dir(dir);
}

static void test_output_paths_refused(void** state) {
  (void)state;
  char* dir = tmp_dir();
  char fifo[4200], msg[400];
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  assert_int_equal(bpc_output_path_check(fifo, msg, sizeof msg), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "is a FIFO"));
  /* Opening does not block on the FIFO (no reader) and refuses it. */
  assert_int_equal(bpc_output_open(fifo, 0, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "FIFO"));
  assert_int_equal(bpc_output_path_check(dir, msg, sizeof msg), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(msg, "is a folder"));
  assert_int_equal(bpc_output_path_check("/dev/null", msg, sizeof msg), BP_INVALID_ARGUMENT);
  char fresh[4200];
  snprintf(fresh, sizeof fresh, "%s/new.json", dir);
  assert_int_equal(bpc_output_path_check(fresh, msg, sizeof msg), BP_OK);
  bpc_journal_t* j = NULL;
  assert_int_equal(bpc_journal_open(fifo, "s", 0, &j, msg, sizeof msg), BP_INVALID_ARGUMENT);
  assert_null(j);
  rm_dir(dir);
}

/* ---- runner.c: cases already done are not run -------------------------------- */
static uint32_t g_seen[8];
static uint32_t g_seen_count;

static int group_of_eight(void* user, uint32_t group, uint32_t start, bpc_child_t* child, char* msg,
                          size_t size) {
  (void)user, (void)group, (void)msg, (void)size;
  for (uint32_t k = start; k < 8; k++) {
    if (!bpc_child_wants(child, k)) continue;
    bpc_child_begin(child, k);
    if (k == 5) raise(SIGSEGV);
    bpc_result_t r = result(BPC_PASS, -1.0, -1.0, "ran");
    bpc_child_result(child, k, &r);
  }
  return 0;
}

static void record_result(void* user, uint32_t group, uint32_t index, const bpc_result_t* r) {
  (void)user, (void)group, (void)r;
  g_seen[g_seen_count++ % 8] = index;
}

static void test_runner_skips_done_cases(void** state) {
  (void)state;
  uint8_t done[8] = {1, 0, 0, 1, 0, 1, 0, 1}; /* 5 would crash: done, so it does not */
  bpc_result_t res[8];
  for (int k = 0; k < 8; k++) res[k] = result(BPC_SKIPPED, -1.0, -1.0, "from the journal");
  bpc_runner_ops_t ops = {NULL, group_of_eight, record_result, done, NULL};
  g_seen_count = 0;
  assert_int_equal(bpc_run_isolated(&ops, 0, 8, 5.0, res), BP_OK);
  assert_int_equal(g_seen_count, 4);
  const uint32_t want[4] = {1, 2, 4, 6};
  for (int k = 0; k < 4; k++) assert_int_equal(g_seen[k], want[k]);
  for (int k = 0; k < 8; k++) {
    assert_string_equal(res[k].message, done[k] ? "from the journal" : "ran");
  }
  /* Every case done: nothing runs, nothing is reported. */
  memset(done, 1, sizeof done);
  g_seen_count = 0;
  assert_int_equal(bpc_run_isolated(&ops, 0, 8, 5.0, res), BP_OK);
  assert_int_equal(g_seen_count, 0);
  /* The crash is still scored when case 5 is not done, and on_result sees it. */
  memset(done, 0, sizeof done);
  g_seen_count = 0;
  assert_int_equal(bpc_run_isolated(&ops, 0, 8, 5.0, res), BP_OK);
  assert_int_equal(g_seen_count, 8);
  assert_int_equal(res[5].status, BPC_CRASH);
  assert_int_equal(res[6].status, BPC_PASS);
}

/* ---- runner.c: a failure is confirmed in a fresh child ----------------------- */
/* Case 3 fails whenever an earlier case ran in the same process (state left
 * behind); case 6 fails always. The child asks for a fresh rerun of a
 * failure unless it is its first case, and ends after a failure it reports. */
static int group_with_stale_state(void* user, uint32_t group, uint32_t start, bpc_child_t* child,
                                  char* msg, size_t size) {
  (void)user, (void)group, (void)msg, (void)size;
  int ran_before = 0;
  for (uint32_t k = start; k < 8; k++) {
    if (!bpc_child_wants(child, k)) continue;
    bpc_child_begin(child, k);
    int fails = k == 6 || (k == 3 && ran_before);
    bpc_result_t r = result(fails ? BPC_FAIL : BPC_PASS, -1.0, -1.0, ran_before ? "after others" : "first");
    ran_before = 1;
    if (fails && bpc_child_retry_fresh(child, k, &r)) return 0;
    bpc_child_result(child, k, &r);
    if (fails) return 0;
  }
  return 0;
}

static void test_runner_confirms_failures_in_a_fresh_child(void** state) {
  (void)state;
  bpc_result_t res[8];
  bpc_runner_ops_t ops = {NULL, group_with_stale_state, record_result, NULL, NULL};
  g_seen_count = 0;
  assert_int_equal(bpc_run_isolated(&ops, 0, 8, 5.0, res), BP_OK);
  assert_int_equal(g_seen_count, 8); /* every case reported once */
  /* Passed fresh: a warning that keeps the first failure's message. */
  assert_int_equal(res[3].status, BPC_QUALITY_WARNING);
  assert_non_null(strstr(res[3].message, "passed in a fresh process"));
  assert_non_null(strstr(res[3].message, "after others"));
  assert_int_equal(res[6].status, BPC_FAIL);
  assert_string_equal(res[6].message, "first"); /* failed fresh too: a real failure */
  assert_int_equal(res[7].status, BPC_PASS);
  assert_string_equal(res[7].message, "first"); /* nothing after a failure shares its process */
  assert_int_equal(res[4].status, BPC_PASS);
  assert_string_equal(res[4].message, "after others");
}

/* ---- runner.c: the first timeout of a run is confirmed with more time --------- */
/* Case 2 is slow once (a first attempt, marked by a file, sleeps past the
 * budget; the rerun takes 0.3 s: inside the longer budget only). Cases 5
 * and 6 hang. */
static char g_slow_mark[64];

static int group_slow_then_hangs(void* user, uint32_t group, uint32_t start, bpc_child_t* child,
                                 char* msg, size_t size) {
  (void)user, (void)group, (void)msg, (void)size;
  for (uint32_t k = start; k < 8; k++) {
    if (!bpc_child_wants(child, k)) continue;
    bpc_child_begin(child, k);
    if (k == 2) {
      int again = access(g_slow_mark, F_OK) == 0;
      if (!again) {
        FILE* f = fopen(g_slow_mark, "w");
        if (f) fclose(f);
      }
      nanosleep(&(struct timespec){again ? 0 : 5, again ? 300000000L : 0}, NULL);
    }
    if (k == 5 || k == 6) nanosleep(&(struct timespec){30, 0}, NULL);
    bpc_result_t r = result(BPC_PASS, -1.0, -1.0, "ran");
    bpc_child_result(child, k, &r);
  }
  return 0;
}

static void test_runner_confirms_first_timeout(void** state) {
  (void)state;
  snprintf(g_slow_mark, sizeof g_slow_mark, "/tmp/bp_runner_slow_%d", (int)getpid());
  unlink(g_slow_mark);
  bpc_result_t res[8];
  bpc_runner_ops_t ops = {NULL, group_slow_then_hangs, record_result, NULL, NULL};
  g_seen_count = 0;
  assert_int_equal(bpc_run_isolated(&ops, 0, 8, 0.5, res), BP_OK);
  unlink(g_slow_mark);
  assert_int_equal(g_seen_count, 8);
  assert_int_equal(res[2].status, BPC_PASS); /* slow once: passed with the longer budget */
  assert_int_equal(res[5].status, BPC_TIMEOUT);
  assert_non_null(strstr(res[5].message, "nor after 2 s in a fresh process"));
  assert_int_equal(res[6].status, BPC_TIMEOUT); /* right after a timeout: scored at once */
  assert_null(strstr(res[6].message, "fresh process"));
  assert_int_equal(res[7].status, BPC_PASS);
}

/* ---- the bp-conform executable ------------------------------------------------- */
/* Starts bp-conform with `args` (NULL-terminated), stdout and stderr into
 * `log` (or /dev/null); extra environment `env` (NAME=VALUE) when not NULL. */
static pid_t spawn_conform(const char* const* args, const char* log, const char* env) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    int fd = open(log ? log : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    setenv("BACKPLANE_LOG", "error", 1);
    if (env) putenv((char*)env);
    const char* argv[32];
    int n = 0;
    argv[n++] = BPC_CONFORM_EXE;
    for (; args[n - 1] && n < 31; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    execv(BPC_CONFORM_EXE, (char* const*)argv);
    _exit(127);
  }
  return pid;
}

/* Waits up to timeout_s; returns the exit status, or -1 after killing it. */
static int wait_conform(pid_t pid, double timeout_s) {
  double end = now_s() + timeout_s;
  int ws = 0;
  for (;;) {
    pid_t r = waitpid(pid, &ws, WNOHANG);
    if (r == pid) return WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    if (now_s() > end) {
      kill(pid, SIGKILL);
      waitpid(pid, &ws, 0);
      return -1;
    }
    sleep_ms(20);
  }
}

static int run_conform(const char* const* args, const char* log, const char* env, double timeout_s) {
  return wait_conform(spawn_conform(args, log, env), timeout_s);
}

/* Children of `parent` now (from /proc), up to `cap`. */
static int children_of(pid_t parent, pid_t* out, int cap) {
  DIR* d = opendir("/proc");
  int n = 0;
  if (!d) return 0;
  struct dirent* e;
  while ((e = readdir(d))) {
    char* end = NULL;
    long pid = strtol(e->d_name, &end, 10);
    if (!end || *end || pid <= 0) continue;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE* fp = fopen(path, "r");
    if (!fp) continue;
    size_t got = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[got] = '\0';
    const char* rp = strrchr(buf, ')'); /* after "pid (comm)" */
    char st = 0;
    long ppid = 0;
    if (rp && sscanf(rp + 1, " %c %ld", &st, &ppid) == 2 && ppid == parent && st != 'Z' && n < cap) {
      out[n++] = (pid_t)pid;
    }
  }
  closedir(d);
  return n;
}

static void test_fifo_report_refused(void** state) {
  (void)state;
  char* dir = tmp_dir();
  char fifo[4200], log[4200];
  snprintf(fifo, sizeof fifo, "%s/report.json", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  assert_int_equal(mkfifo(fifo, 0600), 0);
  const char* args[] = {"--backend", "cpu", "--op", "relu", "--quick", "--json", fifo, NULL};
  /* Refused at once, before any case runs (before: blocked at the end). */
  assert_int_equal(run_conform(args, log, NULL, 20.0), 2);
  char* out = read_all(log, NULL);
  assert_non_null(out);
  if (!strstr(out, "is a FIFO")) fail_msg("no FIFO message: %s", out);
  free(out);
  /* A FIFO named as the journal, too. */
  const char* args2[] = {"--backend", "cpu", "--op", "relu", "--quick", "--journal", fifo, NULL};
  assert_int_equal(run_conform(args2, log, NULL, 20.0), 2);
  rm_dir(dir);
}

/* An interrupted run, completed with --resume, reports exactly what an
 * uninterrupted one does. The interruption is made exact by cutting the
 * journal of a whole run in half and tearing the next line. */
static void test_resume_same_report(void** state) {
  (void)state;
  char* dir = tmp_dir();
  char a[4200], aj[4200], b[4200], bj[4200], bm[4200], am[4200], log[4200];
  snprintf(a, sizeof a, "%s/a.json", dir);
  snprintf(am, sizeof am, "%s/a.md", dir);
  snprintf(aj, sizeof aj, "%s/a.json.journal", dir);
  snprintf(b, sizeof b, "%s/b.json", dir);
  snprintf(bm, sizeof bm, "%s/b.md", dir);
  snprintf(bj, sizeof bj, "%s/b.journal", dir);
  snprintf(log, sizeof log, "%s/log", dir);
  const char* whole[] = {"--backend", "cpu", "--op", "relu", "--op", "add", "--op", "runtime",
                         "--quick", "--json", a, "--markdown", am, NULL};
  assert_int_equal(run_conform(whole, NULL, NULL, 250.0), 0);
  size_t size = 0;
  char* journal = read_all(aj, &size);
  assert_non_null(journal);
  size_t lines = count_lines(aj);
  assert_true(lines > 20);
  /* Keep the header and half the records, then half of the next line. */
  size_t keep = 0, seen = 0;
  while (keep < size && seen < lines / 2) seen += journal[keep++] == '\n';
  const char* nl = strchr(journal + keep, '\n');
  assert_non_null(nl);
  size_t torn = keep + (size_t)(nl - (journal + keep)) / 2;
  FILE* fp = fopen(bj, "wb");
  assert_non_null(fp);
  assert_int_equal(fwrite(journal, 1, torn, fp), torn);
  fclose(fp);
  free(journal);
  const char* resume[] = {"--backend", "cpu", "--op", "relu", "--op", "add", "--op", "runtime",
                          "--quick", "--json", b, "--markdown", bm, "--journal", bj, "--resume",
                          "--verbose", NULL};
  assert_int_equal(run_conform(resume, log, NULL, 250.0), 0);
  char* out = read_all(log, NULL);
  char want[128];
  snprintf(want, sizeof want, "%zu case results recorded", lines / 2 - 1);
  if (!strstr(out, want)) fail_msg("expected \"%s\" in:\n%s", want, out);
  free(out);
  assert_same_file(a, b);
  assert_same_file(am, bm);
  /* The journal is whole again: one line per case plus the header. */
  assert_int_equal(count_lines(bj), lines);
  /* Resuming a finished run runs nothing and reports the same. */
  assert_int_equal(run_conform(resume, log, NULL, 60.0), 0);
  assert_same_file(a, b);
  /* A journal of another selection is refused. */
  const char* other[] = {"--backend", "cpu", "--op", "relu", "--quick", "--journal", bj, "--resume", NULL};
  assert_int_equal(run_conform(other, log, NULL, 60.0), 2);
  rm_dir(dir);
}

/* kill -9 of a running bp-conform whose case child hangs inside a plugin:
 * the journal holds every finished case, no child is left running, and
 * --resume completes the run with the report of an uninterrupted one. */
static void test_kill9_leaves_journal_and_no_orphans(void** state) {
  (void)state;
  char* dir = tmp_dir();
  char j[4200], env[4300], a[4200], b[4200];
  snprintf(j, sizeof j, "%s/run.journal", dir);
  snprintf(a, sizeof a, "%s/a.json", dir);
  snprintf(b, sizeof b, "%s/b.json", dir);
  snprintf(env, sizeof env, "BACKPLANE_PLUGIN_PATH=%s", BPC_HANG_PLUGIN);
  /* Orphans are re-parented to this process, so they can be seen and reaped. */
  assert_int_equal(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const char* args[] = {"--backend", "faulty_hang", "--op", "relu", "--op", "add",
                        "--timeout", "600", "--journal", j, NULL};
  pid_t conform = spawn_conform(args, NULL, env);
  /* Wait until results stop coming: the child hangs in the first f32 add. */
  size_t last = 0;
  double still_since = now_s(), end = now_s() + 120.0;
  while (now_s() < end) {
    size_t n = count_lines(j);
    if (n != last) {
      last = n;
      still_since = now_s();
    } else if (n > 5 && now_s() - still_since > 1.5) {
      break;
    }
    sleep_ms(50);
  }
  assert_true(last > 5);
  pid_t kids[16];
  int nk = children_of(conform, kids, 16);
  assert_int_equal(nk, 1); /* the case child, hanging in the plugin */
  pid_t hung = kids[0];
  assert_int_equal(kill(conform, SIGKILL), 0);
  int ws = 0;
  assert_int_equal(waitpid(conform, &ws, 0), conform);
  /* The hung child dies with its parent (it was re-parented to us). */
  int gone = 0;
  for (double t_end = now_s() + 10.0; now_s() < t_end && !gone;) {
    while (waitpid(-1, &ws, WNOHANG) > 0) {
    }
    gone = children_of(getpid(), kids, 16) == 0 && kill(hung, 0) != 0;
    if (!gone) sleep_ms(50);
  }
  if (!gone) {
    kill(hung, SIGKILL);
    while (waitpid(-1, &ws, WNOHANG) > 0) {
    }
    fail_msg("the case child %d outlived bp-conform killed with SIGKILL", (int)hung);
  }
  /* The journal: a header and one line per finished case, each whole. */
  size_t size = 0;
  char* text = read_all(j, &size);
  assert_non_null(text);
  assert_true(strncmp(text, "bp-conform journal 1 ", 21) == 0);
  assert_true(size > 0 && text[size - 1] == '\n');
  free(text);
  /* Resume with a short timeout; an uninterrupted run with the same. */
  const char* resume[] = {"--backend", "faulty_hang", "--op", "relu", "--op", "add", "--timeout", "0.3",
                          "--journal", j, "--resume", "--json", b, NULL};
  assert_int_equal(run_conform(resume, NULL, env, 120.0), 1); /* add timed out: failures */
  const char* whole[] = {"--backend", "faulty_hang", "--op", "relu", "--op", "add",
                         "--timeout", "0.3", "--json", a, NULL};
  assert_int_equal(run_conform(whole, NULL, env, 120.0), 1);
  char* ja = read_all(a, NULL);
  assert_non_null(ja);
  assert_non_null(strstr(ja, "TIMEOUT"));
  free(ja);
  assert_same_file(a, b);
  rm_dir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_journal_roundtrip_torn_corrupt),
      cmocka_unit_test(test_output_paths_refused),
      cmocka_unit_test(test_runner_skips_done_cases),
      cmocka_unit_test(test_runner_confirms_failures_in_a_fresh_child),
      cmocka_unit_test(test_runner_confirms_first_timeout),
      cmocka_unit_test(test_fifo_report_refused),
      cmocka_unit_test(test_resume_same_report),
      cmocka_unit_test(test_kill9_leaves_journal_and_no_orphans),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
