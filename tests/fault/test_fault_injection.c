/* Fault injection: every slot of the core, op and capability tables that
 * returns a status is made to fail, at its 1st, 2nd, ... call, under a
 * workload of the runtime (loading, devices, buffers, every kind of copy,
 * streams, events across streams and plugins (a host function), an op, support and fusion
 * queries), through the faultshim plugin wrapping the CPU plugin (two
 * devices) next to the fake host plugin.
 *
 * For every (slot, n) the test asserts: no crash; when the fault was
 * injected, some call of the workload returned the injected status with the
 * plugin's message; when it was not (the slot is called fewer than n times),
 * every call succeeded and every result is right; and after the workload
 * the context holds no reference but the test's (a leaked object in an
 * error path fails here; ASan and valgrind runs catch leaked memory).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "backplane/backplane.h"
#include "fake_plugins/fault_shim_slots.h"
#include "internal.h"

/* Calls tried per slot: the 1st .. 6th (2nd under valgrind, for time). */
#define N_MAX (getenv("BP_UNDER_VALGRIND") ? 2 : 6)
#define WORDS (1 << 19) /* 2 MiB of f32: copies still run when a failed synchronize returns */

static const char* const kSlots[] = {
#define SLOT_NAME(name) #name,
    BP_FAULT_SHIM_SLOTS(SLOT_NAME)
#undef SLOT_NAME
};
enum { NUM_SLOTS = sizeof kSlots / sizeof kSlots[0] };

static const bp_status_t kStatuses[] = {BP_RESOURCE_EXHAUSTED, BP_INTERNAL, BP_DEVICE_LOST,
                                        BP_UNAVAILABLE};

typedef struct run {
  const char* message;  /* the injected message */
  bp_status_t status;   /* the injected status */
  int errors;           /* calls that failed */
  int with_message;     /* ... of which carried the injected message */
  int with_status;      /* ... of those, with the injected status */
  int logged;           /* the message was logged (a call with no status to
                           return: release draining a stream) */
  char first_error[400];
} run_t;

static void note(run_t* r, bp_status_t st, const char* what) {
  if (st == BP_OK) return;
  const char* m = bp_status_message();
  if (r->errors++ == 0) snprintf(r->first_error, sizeof r->first_error, "%s: %s: %s", what, bp_status_name(st), m);
  if (strstr(m, r->message)) {
    r->with_message++;
    r->with_status += st == r->status;
  }
}

static char g_cpu[4096], g_shim[4096], g_host[4096], g_fired[64];

static void paths(void) {
  const char* fake = getenv("BACKPLANE_TEST_FAKE_DIR");
  const char* plugins = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  assert_non_null(fake);
  assert_non_null(plugins);
  snprintf(g_cpu, sizeof g_cpu, "%s/libbp_plugin_cpu.so", plugins);
  snprintf(g_shim, sizeof g_shim, "%s/libbp_fault_shim.so", fake);
  snprintf(g_host, sizeof g_host, "%s/libbp_fake_host_a.so", fake);
  snprintf(g_fired, sizeof g_fired, "/tmp/bp_fault_fired_%d", (int)getpid());
}

/* The workload. Every call's failure is noted; later steps skip what an
 * earlier failure left missing. Returns 1 when every result was checked
 * and right (only meaningful when no call failed). */
static int workload(run_t* r) {
  bp_context_options_t o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.flags = BP_CONTEXT_NO_DISCOVERY;
  bp_context_t* ctx = NULL;
  bp_plugin_t *p = NULL, *ph = NULL;
  bp_device_t *d0 = NULL, *d1 = NULL, *h0 = NULL;
  bp_stream_t *s0 = NULL, *s1 = NULL, *sh = NULL;
  bp_event_t *e0 = NULL, *e1 = NULL, *eh = NULL;
  bp_buffer_t *a = NULL, *b = NULL, *c = NULL, *x = NULL;
  bp_tensor_t *ta = NULL, *tsum = NULL;
  static float src[WORDS], back[WORDS], sum[WORDS];
  int right = 0;
  bp_status_t st;
  const bp_event_create_info_t timing = {.struct_size = sizeof timing, .flags = BP_EVENT_TIMING};
  for (int k = 0; k < WORDS; k++) src[k] = (float)(k % 97) - 40.0f;
  memset(back, 0, sizeof back);
  memset(sum, 0, sizeof sum);

#define STEP(expr) ((st = (expr)) == BP_OK ? 1 : (note(r, st, #expr), 0))
  if (!STEP(bp_context_create(&o, &ctx))) return 0;
  if (!STEP(bp_context_register_plugin(ctx, g_shim, &p))) goto done;
  if (!STEP(bp_context_register_plugin(ctx, g_host, &ph))) goto done;
  if (!STEP(bp_plugin_device(p, 0, &d0)) || !STEP(bp_plugin_device(p, 1, &d1)) ||
      !STEP(bp_plugin_device(ph, 0, &h0))) {
    goto done;
  }
  uint32_t nspaces = 0;
  bp_memory_space_info_t spaces[BP_MEMORY_KIND_COUNT_];
  for (uint32_t k = 0; k < BP_MEMORY_KIND_COUNT_; k++) spaces[k].struct_size = sizeof spaces[k];
  STEP(bp_device_memory_spaces(d0, BP_MEMORY_KIND_COUNT_, sizeof spaces[0], spaces, &nspaces));
  uint32_t pinned = 0;
  STEP(bp_device_find_memory_space(d0, BP_MEMORY_HOST_PINNED, &pinned));
  int ok = STEP(bp_stream_create(d0, NULL, &s0));
  ok &= STEP(bp_stream_create(d1, NULL, &s1));
  ok &= STEP(bp_stream_create(h0, NULL, &sh));
  ok &= STEP(bp_event_create(d0, &timing, &e0));
  ok &= STEP(bp_event_create(d0, &timing, &e1));
  ok &= STEP(bp_event_create(h0, NULL, &eh));
  ok &= STEP(bp_buffer_allocate(d0, 0, sizeof src, &a));
  ok &= STEP(bp_buffer_allocate(d0, pinned, sizeof src, &b));
  ok &= STEP(bp_buffer_allocate(d1, 0, sizeof src, &c));
  ok &= STEP(bp_buffer_allocate(h0, 0, sizeof src, &x));
  if (!ok) goto done;
  /* host -> a; a -> b (same device); a -> c (peer, stream on d1 after an
   * event wait); c -> x (across plugins); x -> host. */
  ok &= STEP(bp_event_record(e0, s0)); /* start of the timed span */
  ok &= STEP(bp_copy_host_to_buffer(s0, src, a, 0, sizeof src));
  ok &= STEP(bp_copy_buffer(s0, a, 0, b, 0, sizeof src));
  /* After a failed record, wait or synchronize, the order it was to give
   * does not hold (s1's copy could read a while s0 still writes it; the
   * step after the synchronize reads c on another stream while s1's copy
   * may still write it): an application stops there, and so does the
   * workload. */
  if (!STEP(bp_event_record(e1, s0)) || !STEP(bp_stream_wait_event(s1, e1))) goto done;
  ok &= STEP(bp_copy_buffer(s1, a, 0, c, 0, sizeof src));
  if (!STEP(bp_stream_synchronize(s1))) goto done;
  ok &= STEP(bp_copy_buffer(sh, c, 0, x, 0, sizeof src));
  ok &= STEP(bp_copy_buffer_to_host(sh, x, 0, back, sizeof back));
  /* A wait across plugins: d0's stream waits for the fake host's event (a
   * host function enqueued on the wrapped plugin's stream). */
  ok &= STEP(bp_event_record(eh, sh));
  ok &= STEP(bp_stream_wait_event(s0, eh));
  st = bp_event_query(e1);
  if (st != BP_NOT_READY) ok &= STEP(st);
  ok &= STEP(bp_event_synchronize(e1));
  uint64_t ns = 0;
  ok &= STEP(bp_event_elapsed_ns(e0, e1, &ns));
  /* An op on d0: sum = a + a, with its support query and the fusion caps. */
  int64_t n = WORDS;
  ok &= STEP(bp_tensor_from_buffer(a, BP_DTYPE_F32, 1, &n, NULL, 0, &ta));
  if (ta) {
    const bp_tensor_t* in[2] = {ta, ta};
    ok &= STEP(bp_op_run(s0, BP_OP_add, in, 2, NULL, &tsum, 1));
  }
  bp_fusion_caps_t fusion;
  memset(&fusion, 0, sizeof fusion);
  fusion.struct_size = sizeof fusion;
  ok &= STEP(bp_device_query_fusion(d0, &fusion));
  if (tsum) ok &= STEP(bp_tensor_read(s0, tsum, sum, sizeof sum));
  void* mapped = NULL;
  if (STEP(bp_buffer_map(b, 0, sizeof src, &mapped))) {
    if (ok) ok = memcmp(mapped, src, sizeof src) == 0; /* b holds data only if all went well */
    ok &= STEP(bp_buffer_unmap(b));
  } else {
    ok = 0;
  }
  st = bp_stream_query(s0);
  if (st != BP_NOT_READY) ok &= STEP(st);
  ok &= STEP(bp_stream_synchronize(s0));
  ok &= STEP(bp_stream_synchronize(sh));
  if (ok) {
    right = memcmp(back, src, sizeof src) == 0;
    for (int k = 0; k < WORDS && right; k++) right = sum[k] == 2.0f * src[k];
  }
#undef STEP
done:
  bp_tensor_release(tsum);
  bp_tensor_release(ta);
  bp_buffer_release(a);
  bp_buffer_release(b);
  bp_buffer_release(c);
  bp_buffer_release(x);
  bp_event_release(e0);
  bp_event_release(e1);
  bp_event_release(eh);
  bp_stream_release(s0);
  bp_stream_release(s1);
  bp_stream_release(sh);
  if (ctx) {
    /* Every object holds a context reference: only ours may be left. */
    int refs = (int)atomic_load(&ctx->refcount);
    if (refs != 1) fail_msg("%d context references left after the workload (%s)", refs, r->message);
    bp_context_release(ctx);
  }
  return right;
}

/* Runs the workload with stderr captured; notes whether the injected
 * message was logged. */
static int workload_logged(run_t* r) {
  char log[64];
  snprintf(log, sizeof log, "/tmp/bp_fault_log_%d", (int)getpid());
  fflush(stderr);
  int saved = dup(2);
  int fd = open(log, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  int right = workload(r);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[16384];
  ssize_t n = pread(fd, text, sizeof text - 1, 0);
  close(fd);
  unlink(log);
  text[n > 0 ? n : 0] = '\0';
  r->logged = strstr(text, r->message) != NULL;
  return right;
}

static int fired(void) {
  FILE* fp = fopen(g_fired, "r");
  if (!fp) return 0;
  int c = fgetc(fp);
  fclose(fp);
  return c != EOF;
}

static void test_no_fault_baseline(void** state) {
  (void)state;
  paths();
  char opts[8192];
  snprintf(opts, sizeof opts, "plugin=%s;inner.devices=2", g_cpu);
  setenv("BACKPLANE_FAULTSHIM_OPTIONS", opts, 1);
  run_t r = {.message = "no fault", .status = BP_OK};
  int right = workload(&r);
  if (r.errors) fail_msg("the workload fails without a fault: %s", r.first_error);
  assert_true(right);
}

static void test_every_slot_fails_cleanly(void** state) {
  (void)state;
  paths();
  int cases = 0, injected = 0, only_logged = 0, slots_reached = 0;
  char unreached[1024] = "";
  for (int s = 0; s < NUM_SLOTS; s++) {
    int reached = 0;
    for (int n = 1; n <= N_MAX; n++) {
      char msg[128], opts[8192];
      bp_status_t status = kStatuses[(s + n) % 4];
      snprintf(msg, sizeof msg, "injected into %s call %d (vendor code 700)", kSlots[s], n);
      snprintf(opts, sizeof opts, "plugin=%s;inner.devices=2;slot=%s;n=%d;status=%s;message=%s;fired=%s",
               g_cpu, kSlots[s], n, bp_status_name(status), msg, g_fired);
      setenv("BACKPLANE_FAULTSHIM_OPTIONS", opts, 1);
      unlink(g_fired);
      if (getenv("BP_FAULT_VERBOSE")) fprintf(stdout, "slot %s n=%d\n", kSlots[s], n), fflush(stdout);
      run_t r = {.message = msg, .status = status};
      int right = workload_logged(&r);
      cases++;
      if (getenv("BP_FAULT_VERBOSE")) printf("  -> %s\n", r.errors ? r.first_error : "no error");
      if (!fired()) {
        /* Called fewer than n times: the workload must be untouched. */
        if (r.errors) fail_msg("%s n=%d not injected, yet: %s", kSlots[s], n, r.first_error);
        assert_true(right);
        break;
      }
      injected++;
      reached = 1;
      if (r.with_message == 0 && r.logged) {
        only_logged++;
        continue;
      }
      if (r.with_message == 0) {
        fail_msg("%s n=%d: the injected %s did not reach the caller (first error: %s)", kSlots[s], n,
                 bp_status_name(status), r.errors ? r.first_error : "none");
      }
      if (r.with_status == 0) {
        fail_msg("%s n=%d: the message came with another status than %s: %s", kSlots[s], n,
                 bp_status_name(status), r.first_error);
      }
    }
    slots_reached += reached;
    if (!reached) {
      strncat(unreached, " ", sizeof unreached - strlen(unreached) - 1);
      strncat(unreached, kSlots[s], sizeof unreached - strlen(unreached) - 1);
    }
  }
  unlink(g_fired);
  unsetenv("BACKPLANE_FAULTSHIM_OPTIONS");
  printf("fault injection: %d slots, %d reached by the workload, %d runs, %d faults injected"
         " (%d reported to the caller, %d in a call without a status, logged with the plugin's"
         " message); not reached:%s\n",
         NUM_SLOTS, slots_reached, cases, injected, injected - only_logged, only_logged, unreached);
  /* The workload reaches most slots (the rest are not called by the core). */
  assert_true(slots_reached >= 20);
}

/* ---- the conformance runtime section, once per slot ------------------------- */
extern char** environ;

static char* slurp(const char* path) {
  FILE* fp = fopen(path, "rb");
  if (!fp) return NULL;
  fseek(fp, 0, SEEK_END);
  long n = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char* buf = calloc((size_t)n + 1, 1);
  if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) buf[0] = '\0';
  fclose(fp);
  return buf;
}

/* Cases of a bp-conform JSON report by status; 0 when it does not parse. */
static int report_counts(const char* text, size_t* cases, size_t* fail, size_t* crash_or_timeout) {
  cJSON* root = text ? cJSON_Parse(text) : NULL;
  if (!root) return 0;
  const cJSON* backend = NULL;
  cJSON_ArrayForEach(backend, cJSON_GetObjectItem(root, "backends")) {
    const cJSON* c = NULL;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(backend, "cases")) {
      const char* st = cJSON_GetStringValue(cJSON_GetObjectItem(c, "status"));
      (*cases)++;
      *fail += st && strcmp(st, "FAIL") == 0;
      *crash_or_timeout += st && (strcmp(st, "CRASH") == 0 || strcmp(st, "TIMEOUT") == 0);
    }
  }
  cJSON_Delete(root);
  return 1;
}

static size_t count_of(const char* text, const char* needle) {
  size_t n = 0;
  for (const char* p = text; p && (p = strstr(p, needle)); p += strlen(needle)) n++;
  return n;
}

/* bp-conform --backend faultshim --op runtime with the fault of the
 * environment; returns the wait status (after a kill past 120 s). */
static int run_conform_runtime(const char* json, const char* log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  char* const argv[] = {(char*)BP_CONFORM_EXE, "--backend", "faultshim", "--op", "runtime",
                        "--timeout", "20", "--json", (char*)json, NULL};
  pid_t pid = 0;
  assert_int_equal(posix_spawn(&pid, BP_CONFORM_EXE, &fa, NULL, argv, environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  int ws = 0;
  for (int waited = 0; waitpid(pid, &ws, WNOHANG) == 0; waited++) {
    if (waited > 12000) { /* 120 s */
      kill(pid, SIGKILL);
      waitpid(pid, &ws, 0);
      break;
    }
    nanosleep(&(struct timespec){0, 10000000L}, NULL);
  }
  return ws;
}

/* Every slot fails at its 1st and 2nd call (counted from each instance_create:
 * the parent's discovery, then each case child's context) while bp-conform
 * scores the runtime section: the run ends (no signal), no case is scored
 * CRASH or TIMEOUT, and an injected fault shows in the report or on stderr
 * with the plugin's message. */
static void test_conformance_runtime_every_slot(void** state) {
  (void)state;
  paths();
  char json[64], log[64];
  snprintf(json, sizeof json, "/tmp/bp_fault_conform_%d.json", (int)getpid());
  snprintf(log, sizeof log, "/tmp/bp_fault_conform_%d.log", (int)getpid());
  setenv("BACKPLANE_PLUGIN_PATH", g_shim, 1);
  setenv("BACKPLANE_LOG", "error", 1);
  int runs = 0, injected = 0;
  size_t cases = 0, failed_cases = 0;
  for (int s = 0; s < NUM_SLOTS; s++) {
    for (int n = 1; n <= 2; n++) {
      char msg[128], opts[8192];
      snprintf(msg, sizeof msg, "conformance fault in %s call %d", kSlots[s], n);
      snprintf(opts, sizeof opts, "plugin=%s;inner.devices=2;slot=%s;n=%d;status=INTERNAL;message=%s;fired=%s",
               g_cpu, kSlots[s], n, msg, g_fired);
      setenv("BACKPLANE_FAULTSHIM_OPTIONS", opts, 1);
      unlink(g_fired);
      unlink(json);
      int ws = run_conform_runtime(json, log);
      runs++;
      char* report = slurp(json);
      char* out = slurp(log);
      if (!WIFEXITED(ws) || WEXITSTATUS(ws) > 2) {
        fail_msg("%s n=%d: bp-conform ended with wait status 0x%x:\n%s", kSlots[s], n, ws, out ? out : "");
      }
      size_t bad = 0;
      if (report && !report_counts(report, &cases, &failed_cases, &bad)) {
        fail_msg("%s n=%d: the JSON report does not parse", kSlots[s], n);
      }
      if (bad) fail_msg("%s n=%d: %zu cases scored CRASH or TIMEOUT:\n%s", kSlots[s], n, bad, out ? out : "");
      if (fired()) {
        injected++;
        if (!count_of(report, msg) && !count_of(out, msg)) {
          fail_msg("%s n=%d: the injected fault's message is in neither the report nor the output:\n%s",
                   kSlots[s], n, out ? out : "");
        }
      } else if (WEXITSTATUS(ws) != 0) {
        fail_msg("%s n=%d: not injected, yet bp-conform exited %d:\n%s", kSlots[s], n, WEXITSTATUS(ws),
                 out ? out : "");
      }
      free(report);
      free(out);
    }
  }
  unlink(json);
  unlink(log);
  unlink(g_fired);
  unsetenv("BACKPLANE_FAULTSHIM_OPTIONS");
  unsetenv("BACKPLANE_PLUGIN_PATH");
  printf("conformance runtime section under fault injection: %d runs (%d slots x 2 calls), %d with the"
         " fault injected, %zu cases scored, %zu FAIL, 0 CRASH, 0 TIMEOUT\n",
         runs, NUM_SLOTS, injected, cases, failed_cases);
  assert_true(injected >= 20);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_no_fault_baseline),
      cmocka_unit_test(test_every_slot_fails_cleanly),
      cmocka_unit_test(test_conformance_runtime_every_slot),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
