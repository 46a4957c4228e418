/* Plugins that crash or hang: the crash report names the plugin, slot and
 * op (each crash runs in a forked child whose stderr is checked), and the
 * bounded waits (stream, event, instance_create) return
 * BP_DEADLINE_EXCEEDED with the work left intact.
 *
 * The faulty plugins are tests/fake_plugins built with FAKE_CRASH,
 * FAKE_ABORT or FAKE_HANG (BACKPLANE_TEST_FAKE_DIR); the bounded waits that
 * complete run on the cpu plugin.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backplane/backplane.h"

static const char* fake_path(const char* which) {
  static char path[1024];
  const char* dir = getenv("BACKPLANE_TEST_FAKE_DIR");
  snprintf(path, sizeof path, "%s/libbp_fake_%s.so", dir ? dir : ".", which);
  return path;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bp_context_t* empty_context(uint32_t instance_create_timeout_ms) {
  bp_context_options_t o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.flags = BP_CONTEXT_NO_DISCOVERY;
  o.instance_create_timeout_ms = instance_create_timeout_ms;
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(&o, &ctx), BP_OK);
  return ctx;
}

/* ---- crash reports (forked children) ------------------------------------ */
enum crash_action { AT_LOAD, AT_SYNC, AT_LAUNCH };

typedef struct crash_case {
  const char* plugin;      /* fake plugin case */
  enum crash_action action;
  int install;             /* 1: bp_crash_report_install; 2: BACKPLANE_CRASH_REPORT=1; 0: none */
  int sig;                 /* expected signal */
  const char* expect;      /* expected on stderr; NULL: no report at all */
} crash_case_t;

/* In the child: load the plugin and drive it into its faulty slot. */
static void child_run(const crash_case_t* c) {
  struct rlimit no_core = {0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  /* As an application without handlers of its own: cmocka's (inherited)
   * would turn the crash into a test failure and carry on in the child. */
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; ++i) signal(sigs[i], SIG_DFL);
  if (c->install == 1 && bp_crash_report_install() != BP_OK) _exit(90);
  if (c->install == 2) setenv("BACKPLANE_CRASH_REPORT", "1", 1);
  bp_context_t* ctx = empty_context(0);
  bp_plugin_t* plugin = NULL;
  if (bp_context_register_plugin(ctx, fake_path(c->plugin), &plugin) != BP_OK) _exit(91);
  bp_device_t* dev = NULL;
  bp_stream_t* s = NULL;
  if (bp_plugin_device(plugin, 0, &dev) != BP_OK || bp_stream_create(dev, 0, &s) != BP_OK) _exit(92);
  if (c->action == AT_SYNC) (void)bp_stream_synchronize(s);
  if (c->action == AT_LAUNCH) {
    int64_t n = 4;
    bp_tensor_t *a = NULL, *b = NULL, *out = NULL;
    if (bp_tensor_create(dev, BP_DTYPE_F32, 1, &n, &a) != BP_OK ||
        bp_tensor_create(dev, BP_DTYPE_F32, 1, &n, &b) != BP_OK)
      _exit(93);
    (void)bp_op_add(s, a, b, NULL, &out);
  }
  _exit(0); /* survived: the parent fails the case */
}

static void run_crash_case(const crash_case_t* c) {
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    child_run(c);
  }
  close(fds[1]);
  char out[8192];
  size_t len = 0;
  ssize_t n;
  while ((n = read(fds[0], out + len, sizeof out - 1 - len)) > 0) len += (size_t)n;
  out[len] = '\0';
  close(fds[0]);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  print_message("%s: child status 0x%x, stderr:\n%s", c->plugin, status, out);
  /* It died: by the signal itself (the default action runs after the
   * report) or, under a sanitizer whose handler was installed first, by
   * that handler's exit. */
  assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  assert_false(WIFEXITED(status) && WEXITSTATUS(status) >= 90 && WEXITSTATUS(status) <= 93);
  if (WIFSIGNALED(status)) assert_int_equal(WTERMSIG(status), c->sig);
  if (c->expect)
    assert_non_null(strstr(out, c->expect));
  else
    assert_null(strstr(out, "backplane: SIG"));
}

static void test_crash_reports(void** state) {
  (void)state;
  static const crash_case_t cases[] = {
      {"crash_negotiate", AT_LOAD, 1, SIGSEGV,
       "backplane: SIGSEGV: crashed inside plugin libbp_fake_crash_negotiate.so in slot negotiate\n"},
      {"crash_create", AT_LOAD, 2, SIGSEGV,
       "backplane: SIGSEGV: crashed inside plugin crash_create in slot instance_create\n"},
      {"crash_sync", AT_SYNC, 1, SIGSEGV,
       "backplane: SIGSEGV: crashed inside plugin crash_sync in slot stream_synchronize\n"},
      {"crash_launch", AT_LAUNCH, 1, SIGSEGV,
       "backplane: SIGSEGV: crashed inside plugin crash_launch in slot launch (op add)\n"},
      {"crash_worker", AT_SYNC, 2, SIGSEGV,
       "backplane: SIGSEGV: crashed inside plugin crash_worker on a thread of its own"},
      {"abort_sync", AT_SYNC, 1, SIGABRT,
       "backplane: SIGABRT: crashed inside plugin abort_sync in slot stream_synchronize\n"},
      /* Not installed: the application did not opt in, nothing is printed. */
      {"crash_sync", AT_SYNC, 0, SIGSEGV, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) run_crash_case(&cases[i]);
}

/* ---- instance_create bounded ---------------------------------------------- */
static void expect_skipped_after_deadline(bp_context_t* ctx, uint32_t ms) {
  bp_plugin_t* plugin = NULL;
  uint64_t t0 = now_ns();
  assert_int_equal(bp_context_register_plugin(ctx, fake_path("hang_create"), &plugin),
                   BP_DEADLINE_EXCEEDED);
  uint64_t waited = now_ns() - t0;
  assert_true(waited >= (uint64_t)ms * 1000000u);
  assert_true(waited < (uint64_t)ms * 1000000u + 20000000000u);
  assert_non_null(strstr(bp_status_message(), "did not return within"));
  bp_plugin_info_t info;
  memset(&info, 0, sizeof info);
  info.struct_size = sizeof info;
  assert_non_null(plugin);
  assert_int_equal(bp_plugin_get_info(plugin, &info), BP_OK);
  assert_int_equal(info.state, BP_PLUGIN_SKIPPED);
  assert_int_equal(info.reason_code, BP_DEADLINE_EXCEEDED);
  assert_non_null(strstr(info.reason, "abandoned"));
}

static void test_instance_create_timeout(void** state) {
  (void)state;
  /* The context option. */
  bp_context_t* ctx = empty_context(100);
  expect_skipped_after_deadline(ctx, 100);
  /* Plugins that return in time load as before, their failures intact. */
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, fake_path("good"), &plugin), BP_OK);
  assert_int_equal(bp_context_register_plugin(ctx, fake_path("init_fail"), &plugin), BP_UNAVAILABLE);
  assert_non_null(strstr(bp_status_message(), "libbp_fake_vendor.so.1"));
  bp_context_release(ctx);
  /* The environment variable, when the option is 0. */
  setenv("BACKPLANE_INSTANCE_CREATE_TIMEOUT_MS", "50", 1);
  ctx = empty_context(0);
  expect_skipped_after_deadline(ctx, 50);
  bp_context_release(ctx);
  unsetenv("BACKPLANE_INSTANCE_CREATE_TIMEOUT_MS");
}

/* ---- stream and event waits bounded ------------------------------------- */
static void test_wait_timeouts_hang(void** state) {
  (void)state;
  bp_context_t* ctx = empty_context(0);
  bp_plugin_t* plugin = NULL;
  bp_device_t* dev = NULL;
  bp_stream_t* s = NULL;
  bp_event_t* e = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, fake_path("hang_stream"), &plugin), BP_OK);
  assert_int_equal(bp_plugin_device(plugin, 0, &dev), BP_OK);
  assert_int_equal(bp_stream_create(dev, 0, &s), BP_OK);
  assert_int_equal(bp_event_create(dev, 0, &e), BP_OK);
  assert_int_equal(bp_event_wait_timeout(e, 1000), BP_OK); /* never recorded: complete */
  for (int round = 0; round < 2; ++round) { /* still pending the second time */
    uint64_t t0 = now_ns();
    assert_int_equal(bp_stream_synchronize_timeout(s, 50000000u), BP_DEADLINE_EXCEEDED);
    uint64_t waited = now_ns() - t0;
    assert_true(waited >= 50000000u && waited < 5000000000u);
    assert_non_null(strstr(bp_status_message(), "bp_stream_synchronize_timeout"));
  }
  assert_int_equal(bp_event_record(e, s), BP_OK);
  assert_int_equal(bp_event_wait_timeout(e, 20000000u), BP_DEADLINE_EXCEEDED);
  assert_int_equal(bp_event_wait_timeout(e, 0), BP_DEADLINE_EXCEEDED);
  assert_int_equal(bp_event_query(e), BP_NOT_READY);
  assert_int_equal(bp_stream_synchronize_timeout(NULL, 1), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_event_wait_timeout(NULL, 1), BP_INVALID_ARGUMENT);
  bp_event_release(e);
  bp_stream_release(s);
  bp_context_release(ctx);
}

/* On the cpu plugin: a deadline that passes leaves the work running and
 * its results intact; a later wait completes. */
static void test_wait_timeouts_complete(void** state) {
  (void)state;
  bp_context_options_t o;
  memset(&o, 0, sizeof o);
  o.struct_size = sizeof o;
  o.select = "cpu";
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(&o, &ctx), BP_OK);
  bp_device_t* dev = NULL;
  bp_stream_t* s = NULL;
  bp_event_t* e = NULL;
  bp_tensor_t* t = NULL;
  assert_int_equal(bp_context_find_device(ctx, "cpu:0", &dev), BP_OK);
  assert_int_equal(bp_stream_create(dev, 0, &s), BP_OK);
  assert_int_equal(bp_event_create(dev, 0, &e), BP_OK);
  int64_t n = (int64_t)16 << 20; /* 64 MiB of f32, filled 8 times: far more than 1 us */
  assert_int_equal(bp_tensor_create(dev, BP_DTYPE_F32, 1, &n, &t), BP_OK);
  bp_fill_attrs_t fill = {.struct_size = sizeof fill};
  fill.value.kind = BP_SCALAR_FLOAT;
  for (int i = 1; i <= 8; ++i) {
    fill.value.v.f = i;
    assert_int_equal(bp_op_fill(s, &fill, &t), BP_OK);
  }
  assert_int_equal(bp_event_record(e, s), BP_OK);
  assert_int_equal(bp_event_wait_timeout(e, 1000), BP_DEADLINE_EXCEEDED);
  assert_int_equal(bp_stream_synchronize_timeout(s, 1000), BP_DEADLINE_EXCEEDED);
  assert_int_equal(bp_event_wait_timeout(e, 60000000000u), BP_OK);
  assert_int_equal(bp_stream_synchronize_timeout(s, 60000000000u), BP_OK);
  float last = 0;
  assert_int_equal(bp_copy_buffer_to_host(s, bp_tensor_buffer(t), (uint64_t)(n - 1) * 4, &last, 4), BP_OK);
  assert_int_equal(bp_stream_synchronize(s), BP_OK);
  assert_true(last == 8.0f);
  bp_tensor_release(t);
  bp_event_release(e);
  bp_stream_release(s);
  bp_context_release(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_crash_reports),
      cmocka_unit_test(test_instance_create_timeout),
      cmocka_unit_test(test_wait_timeouts_hang),
      cmocka_unit_test(test_wait_timeouts_complete),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
