/* The loader's files, environment and plugin text:
 *  - a FIFO, a folder or a NUL-cut path where a plugin file belongs gives a
 *    clean, prompt refusal (never a hang: an alarm fails the test instead);
 *  - the trust policy: plugin files and folders others may write are refused
 *    unless BACKPLANE_ALLOW_INSECURE_PLUGINS=1; symlinks are judged by their
 *    target;
 *  - every malformed BACKPLANE_* / BP_* variable gets one warning that names
 *    it, the value and what is used instead;
 *  - plugin-supplied text (version, vendor, device name, report and log
 *    messages) is cleaned before it reaches a message or a log line.
 * Warnings are read back from stderr, captured into a temporary file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backplane/backplane.h"
#include "test_util.h"

/* Seconds any one test may take; a blocked open or dlopen fails it. */
#define TEST_ALARM_S 30

static const char* const env_vars[] = {
    "BACKPLANE_PLUGIN_PATH", "BACKPLANE_PLUGINS",     "BACKPLANE_DISABLE",
    "BP_CPU_DEVICES",        "BACKPLANE_CPU_OPTIONS", "BACKPLANE_ALLOW_INSECURE_PLUGINS"};

typedef struct fixture {
  char dir[64]; /* mode 0755 temp folder */
} fixture_t;

static void remove_tree(const char* path) {
  struct stat st;
  if (lstat(path, &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    DIR* d = opendir(path);
    if (d) {
      struct dirent* e;
      while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char child[PATH_MAX];
        snprintf(child, sizeof(child), "%s/%s", path, e->d_name);
        remove_tree(child);
      }
      closedir(d);
    }
    rmdir(path);
  } else {
    unlink(path);
  }
}

static int setup(void** state) {
  fixture_t* f = calloc(1, sizeof(*f));
  if (!f) return -1;
  for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); ++i) unsetenv(env_vars[i]);
  snprintf(f->dir, sizeof(f->dir), "/tmp/bp_files_XXXXXX");
  if (!mkdtemp(f->dir) || chmod(f->dir, 0755) != 0) {
    free(f);
    return -1;
  }
  alarm(TEST_ALARM_S);
  *state = f;
  return 0;
}

static int teardown(void** state) {
  fixture_t* f = *state;
  alarm(0);
  remove_tree(f->dir);
  for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); ++i) unsetenv(env_vars[i]);
  free(f);
  return 0;
}

/* ---- helpers ------------------------------------------------------------ */
static const char* fake_lib(const char* which) {
  static char path[PATH_MAX];
  const char* dir = getenv("BACKPLANE_TEST_FAKE_DIR");
  assert_non_null(dir);
  snprintf(path, sizeof(path), "%s/libbp_fake_%s.so", dir, which);
  assert_int_equal(access(path, R_OK), 0);
  return path;
}

static void join(char* out, const char* dir, const char* name) {
  const size_t d = strlen(dir), n = strlen(name);
  assert_true(d + 1 + n < PATH_MAX);
  memcpy(out, dir, d);
  out[d] = '/';
  memcpy(out + d + 1, name, n + 1);
}

static void write_text(const char* path, const char* text, mode_t mode) {
  FILE* fp = fopen(path, "w");
  assert_non_null(fp);
  fputs(text, fp);
  fclose(fp);
  assert_int_equal(chmod(path, mode), 0);
}

/* Copies the fake plugin `which` to `path` with `mode`. */
static void copy_lib(const char* which, const char* path, mode_t mode) {
  FILE* in = fopen(fake_lib(which), "rb");
  FILE* out = fopen(path, "wb");
  assert_non_null(in);
  assert_non_null(out);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), in)) > 0) assert_int_equal(fwrite(buf, 1, n, out), n);
  fclose(in);
  fclose(out);
  assert_int_equal(chmod(path, mode), 0);
}

static void make_dir(const char* path, mode_t mode) {
  assert_int_equal(mkdir(path, 0700), 0);
  assert_int_equal(chmod(path, mode), 0); /* exact mode, whatever the umask */
}

static void write_manifest(const char* path, const char* name, const char* library, mode_t mode) {
  char text[PATH_MAX + 256];
  snprintf(text, sizeof(text),
           "{\"file_format_version\":\"1.0.0\",\"plugin\":{\"name\":\"%s\",\"library\":\"%s\","
           "\"abi_version\":\"1.0\"}}",
           name, library);
  write_text(path, text, mode);
}

/* stderr capture: begin redirects it into a temporary file, end restores it
 * and returns what was written (static buffer, NUL-terminated). */
static int saved_stderr = -1;
static FILE* capture_file;
static void capture_begin(void) {
  fflush(stderr);
  capture_file = tmpfile();
  assert_non_null(capture_file);
  saved_stderr = dup(2);
  assert_true(saved_stderr >= 0);
  assert_true(dup2(fileno(capture_file), 2) >= 0);
}
static const char* capture_end(void) {
  static char text[16384];
  fflush(stderr);
  assert_true(dup2(saved_stderr, 2) >= 0);
  close(saved_stderr);
  rewind(capture_file);
  size_t n = fread(text, 1, sizeof(text) - 1, capture_file);
  text[n] = '\0';
  fclose(capture_file);
  fprintf(stderr, "%s", text); /* keep it visible in the test log */
  return text;
}

static size_t count_of(const char* haystack, const char* needle) {
  size_t n = 0;
  for (const char* p = strstr(haystack, needle); p; p = strstr(p + 1, needle)) ++n;
  return n;
}

#define assert_contains(haystack, needle)                                           \
  do {                                                                              \
    if (!strstr((haystack), (needle)))                                              \
      print_error("\"%s\"\n  lacks \"%s\"\n", (haystack), (needle));                \
    assert_non_null(strstr((haystack), (needle)));                                  \
  } while (0)

static uint32_t device_count_of(const bp_plugin_t* plugin) {
  bp_plugin_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  assert_int_equal(bp_plugin_get_info(plugin, &info), BP_OK);
  return info.device_count;
}

/* Registers `path` into a bare context: the status, the message in *msg. */
static bp_status_t register_path(const char* path, char* msg, size_t cap) {
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  bp_status_t st = bp_context_register_plugin(ctx, path, &plugin);
  snprintf(msg, cap, "%s", bp_status_message());
  bp_context_release(ctx);
  return st;
}

/* A context searching only `plugin_path` (and the build tree's own folder,
 * whose plugins are disabled here); the status of the plugin named `name`
 * (BP_NOT_FOUND when it was not recorded) and its reason in *reason. */
static bp_status_t discover(const char* plugin_path, const char* name, char* reason, size_t cap) {
  bp_context_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.plugin_path = plugin_path;
  /* Only the test's own plugins: the in-tree backends would load their
   * drivers (PoCL, Open MPI) in every discovery, minutes under valgrind. */
  o.disable = "cpu,vulkan,template,mpi,opencl,cuda";
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(&o, &ctx), BP_OK);
  bp_plugin_t* plugin = NULL;
  /* A skipped plugin answers its reason code and "... was skipped: <reason>". */
  bp_status_t st = bp_context_find_plugin(ctx, name, &plugin);
  snprintf(reason, cap, "%s", st == BP_OK ? "" : bp_status_message());
  bp_context_release(ctx);
  return st;
}

/* ---- item: files that are not regular ------------------------------------ */
static void test_fifo_as_library(void** state) {
  fixture_t* f = *state;
  char fifo[PATH_MAX], msg[1024];
  join(fifo, f->dir, "libbp_fifo.so");
  assert_int_equal(mkfifo(fifo, 0644), 0);
  assert_int_equal(register_path(fifo, msg, sizeof(msg)), BP_INVALID_ARGUMENT);
  assert_contains(msg, "is a FIFO, not a regular file");
}

static void test_fifo_as_library_of_manifest(void** state) {
  fixture_t* f = *state;
  char fifo[PATH_MAX], manifest[PATH_MAX], reason[1024];
  join(fifo, f->dir, "libbp_fifo.so");
  join(manifest, f->dir, "fifo.json");
  assert_int_equal(mkfifo(fifo, 0644), 0);
  write_manifest(manifest, "fifo", "libbp_fifo.so", 0644);
  assert_int_equal(discover(f->dir, "fifo", reason, sizeof(reason)), BP_INVALID_ARGUMENT);
  assert_contains(reason, "is a FIFO, not a regular file");
  assert_contains(reason, "named by manifest");
}

static void test_fifo_as_manifest(void** state) {
  fixture_t* f = *state;
  char fifo[PATH_MAX], reason[1024];
  join(fifo, f->dir, "fifo.json");
  assert_int_equal(mkfifo(fifo, 0644), 0);
  /* Named directly (a path entry) and found in a folder. */
  assert_int_equal(discover(fifo, "fifo.json", reason, sizeof(reason)), BP_INVALID_ARGUMENT);
  assert_contains(reason, "manifest");
  assert_contains(reason, "is a FIFO, not a regular file");
  assert_int_equal(discover(f->dir, "fifo.json", reason, sizeof(reason)), BP_INVALID_ARGUMENT);
  assert_contains(reason, "is a FIFO");
}

static void test_folder_as_library(void** state) {
  fixture_t* f = *state;
  char folder[PATH_MAX], manifest[PATH_MAX], msg[1024];
  join(folder, f->dir, "libbp_dir.so");
  make_dir(folder, 0755);
  assert_int_equal(register_path(folder, msg, sizeof(msg)), BP_INVALID_ARGUMENT);
  assert_contains(msg, "is a folder, not a regular file");
  join(manifest, f->dir, "dir.json");
  write_manifest(manifest, "dir", "libbp_dir.so", 0644);
  assert_int_equal(discover(manifest, "dir", msg, sizeof(msg)), BP_INVALID_ARGUMENT);
  assert_contains(msg, "is a folder");
}

static void test_nul_in_manifest_library(void** state) {
  fixture_t* f = *state;
  char manifest[PATH_MAX], library[PATH_MAX + 16], reason[1024];
  join(manifest, f->dir, "good.json");
  /* The part before \u0000 is a real plugin: cutting there would load it. */
  snprintf(library, sizeof(library), "%s\\u0000/../evil.so", fake_lib("good"));
  write_manifest(manifest, "good", library, 0644);
  /* A manifest that cannot be read is recorded under its file name. */
  assert_int_equal(discover(manifest, "good.json", reason, sizeof(reason)), BP_INVALID_ARGUMENT);
  assert_contains(reason, "NUL character");
  /* An escaped backslash followed by "u0000" is not a NUL. */
  snprintf(library, sizeof(library), "%s\\\\u0000", fake_lib("good"));
  write_manifest(manifest, "good", library, 0644);
  assert_int_equal(discover(manifest, "good", reason, sizeof(reason)), BP_NOT_FOUND);
  assert_contains(reason, "does not exist");
}

/* ---- decision: the trust policy ------------------------------------------ */
static void test_policy_world_writable_library(void** state) {
  fixture_t* f = *state;
  char lib[PATH_MAX], msg[1024];
  join(lib, f->dir, "libbp_good.so");
  copy_lib("good", lib, 0755);
  assert_int_equal(register_path(lib, msg, sizeof(msg)), BP_OK);
  /* Group write is allowed (user-private groups, umask 002). */
  assert_int_equal(chmod(lib, 0775), 0);
  assert_int_equal(register_path(lib, msg, sizeof(msg)), BP_OK);
  assert_int_equal(chmod(lib, 0757), 0);
  assert_int_equal(register_path(lib, msg, sizeof(msg)), BP_PERMISSION_DENIED);
  assert_contains(msg, "is writable by every user");
  assert_contains(msg, "BACKPLANE_ALLOW_INSECURE_PLUGINS=1");
  setenv("BACKPLANE_ALLOW_INSECURE_PLUGINS", "1", 1);
  capture_begin();
  bp_status_t st = register_path(lib, msg, sizeof(msg));
  const char* log = capture_end();
  assert_int_equal(st, BP_OK);
  assert_contains(log, "is writable by every user; loaded anyway");
}

static void test_policy_world_writable_folder(void** state) {
  fixture_t* f = *state;
  char folder[PATH_MAX], lib[PATH_MAX], manifest[PATH_MAX], msg[1024];
  join(folder, f->dir, "open");
  make_dir(folder, 0777);
  join(lib, folder, "libbp_good.so");
  copy_lib("good", lib, 0755);
  join(manifest, folder, "good.json");
  write_manifest(manifest, "good", "libbp_good.so", 0644);
  /* A library in it: anyone could replace the file. */
  assert_int_equal(register_path(lib, msg, sizeof(msg)), BP_PERMISSION_DENIED);
  assert_contains(msg, "which every user may write");
  /* The folder searched for manifests: refused as a whole, with a warning. */
  capture_begin();
  bp_status_t st = discover(folder, "good", msg, sizeof(msg));
  const char* log = capture_end();
  assert_int_equal(st, BP_NOT_FOUND);
  assert_contains(log, "is writable by every user (anyone could add a manifest)");
  /* With the sticky bit (as /tmp) others cannot replace a file, but they
   * can still add manifests. */
  assert_int_equal(chmod(folder, 01777), 0);
  assert_int_equal(register_path(lib, msg, sizeof(msg)), BP_OK);
  assert_int_equal(discover(folder, "good", msg, sizeof(msg)), BP_NOT_FOUND);
  /* A manifest that others may write, in a safe folder. */
  assert_int_equal(chmod(folder, 0755), 0);
  assert_int_equal(discover(folder, "good", msg, sizeof(msg)), BP_OK);
  assert_int_equal(chmod(manifest, 0666), 0);
  assert_int_equal(discover(folder, "good.json", msg, sizeof(msg)), BP_PERMISSION_DENIED);
  assert_contains(msg, "manifest");
  assert_contains(msg, "is writable by every user");
}

static void test_policy_symlinks_judged_by_target(void** state) {
  fixture_t* f = *state;
  char safe[PATH_MAX], open_dir[PATH_MAX], lib[PATH_MAX], link_path[PATH_MAX], msg[1024];
  join(safe, f->dir, "safe");
  join(open_dir, f->dir, "open");
  make_dir(safe, 0755);
  make_dir(open_dir, 01777);
  /* A link in a sticky shared folder to a library in a safe one: fine. */
  join(lib, safe, "libbp_good.so");
  copy_lib("good", lib, 0755);
  join(link_path, open_dir, "libbp_link.so");
  assert_int_equal(symlink(lib, link_path), 0);
  assert_int_equal(register_path(link_path, msg, sizeof(msg)), BP_OK);
  /* A link in a safe folder to a library others may replace: refused. */
  char target[PATH_MAX], link2[PATH_MAX];
  assert_int_equal(chmod(open_dir, 0777), 0);
  join(target, open_dir, "libbp_target.so");
  copy_lib("good", target, 0755);
  join(link2, safe, "libbp_link2.so");
  assert_int_equal(symlink(target, link2), 0);
  assert_int_equal(register_path(link2, msg, sizeof(msg)), BP_PERMISSION_DENIED);
  assert_contains(msg, "which every user may write");
}

/* ---- item: malformed environment variables -------------------------------- */
/* Discovery with one variable set: (variable, value, whether the fake
 * plugin "good" still loads, the one warning expected). */
static void test_env_discovery_variables(void** state) {
  fixture_t* f = *state;
  static const struct {
    const char* variable;
    const char* value;
    int good_loads;
    const char* warning;
  } cases[] = {
      /* Ignored with a word, so every plugin loads as without the variable. */
      {"BACKPLANE_PLUGINS", ",,,", 1, "BACKPLANE_PLUGINS=',,,' names no backend; ignored"},
      {"BACKPLANE_DISABLE", " , ", 1, "BACKPLANE_DISABLE=' , ' names no backend; ignored"},
      /* A name that can never match. (Selecting it would fail the context,
       * which then says why on its own.) */
      {"BACKPLANE_DISABLE", "nothing, Bad-Name", 1,
       "BACKPLANE_DISABLE entry 'Bad-Name' is not a backend name"},
      {"BACKPLANE_PLUGIN_PATH", ":::", 0, "BACKPLANE_PLUGIN_PATH=':::' names no path; ignored"},
      {"BACKPLANE_PLUGIN_PATH", "/nonexistent/bp_plugins", 0,
       "BACKPLANE_PLUGIN_PATH entry '/nonexistent/bp_plugins': No such file"},
  };
  char manifest[PATH_MAX], reason[256];
  join(manifest, f->dir, "good.json");
  write_manifest(manifest, "good", fake_lib("good"), 0644);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    setenv(cases[i].variable, cases[i].value, 1);
    capture_begin();
    /* The plugin is found through options.plugin_path, except in the cases
     * about BACKPLANE_PLUGIN_PATH (which is searched before it). */
    bp_status_t st = discover(cases[i].good_loads ? manifest : NULL, "good", reason,
                              sizeof(reason));
    const char* log = capture_end();
    unsetenv(cases[i].variable);
    assert_int_equal(st, cases[i].good_loads ? BP_OK : BP_NOT_FOUND);
    assert_int_equal(count_of(log, cases[i].warning), 1);
  }
}

static void test_env_allow_insecure_malformed(void** state) {
  fixture_t* f = *state;
  char lib[PATH_MAX], msg[1024];
  join(lib, f->dir, "libbp_good.so");
  copy_lib("good", lib, 0757);
  setenv("BACKPLANE_ALLOW_INSECURE_PLUGINS", "yes", 1);
  capture_begin();
  bp_status_t st = register_path(lib, msg, sizeof(msg));
  const char* log = capture_end();
  assert_int_equal(st, BP_PERMISSION_DENIED);
  assert_int_equal(count_of(log, "BACKPLANE_ALLOW_INSECURE_PLUGINS='yes' is not 0 or 1; using 0"),
                   1);
}

/* The cpu plugin's device count: (BP_CPU_DEVICES, BACKPLANE_CPU_OPTIONS,
 * devices used, the one warning expected or NULL for none). */
static void test_env_cpu_devices(void** state) {
  (void)state;
  static const struct {
    const char* value;
    const char* options;
    uint32_t devices;
    const char* warning;
  } cases[] = {
      {"-1", NULL, 1, "BP_CPU_DEVICES='-1' is not a whole number from 1 to 64; using 1"},
      {"0", NULL, 1, "BP_CPU_DEVICES='0' is not a whole number from 1 to 64; using 1"},
      {"abc", NULL, 1, "BP_CPU_DEVICES='abc' is not a whole number from 1 to 64; using 1"},
      {"3junk", NULL, 1, "BP_CPU_DEVICES='3junk' is not a whole number from 1 to 64; using 1"},
      {"999999", NULL, 64, "BP_CPU_DEVICES='999999' is more than the maximum 64; using 64"},
      {"99999999999999999999999", NULL, 64, "is more than the maximum 64; using 64"},
      {"3", NULL, 3, NULL},
      /* The option wins over the variable; a bad one keeps the variable's. */
      {"2", "devices=5", 5, NULL},
      {"2", "devices=x7", 2, "devices='x7' is not a whole number from 1 to 64; using 2"},
  };
  const char* dir = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  assert_non_null(dir);
  char lib[PATH_MAX];
  snprintf(lib, sizeof(lib), "%s/libbp_plugin_cpu.so", dir);
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    setenv("BP_CPU_DEVICES", cases[i].value, 1);
    if (cases[i].options)
      setenv("BACKPLANE_CPU_OPTIONS", cases[i].options, 1);
    else
      unsetenv("BACKPLANE_CPU_OPTIONS");
    bp_context_t* ctx = bp_test_context_bare();
    bp_plugin_t* plugin = NULL;
    capture_begin();
    bp_status_t st = bp_context_register_plugin(ctx, lib, &plugin);
    const char* log = capture_end();
    assert_int_equal(st, BP_OK);
    assert_int_equal(device_count_of(plugin), cases[i].devices);
    if (cases[i].warning) {
      assert_int_equal(count_of(log, cases[i].warning), 1);
    } else {
      assert_null(strstr(log, "is not a whole number"));
      assert_null(strstr(log, "is more than the maximum"));
    }
    bp_context_release(ctx);
  }
}

/* Runs first: the level is read from BACKPLANE_LOG once per process, at the
 * first use of the log. */
static void test_env_log_level(void** state) {
  (void)state;
  setenv("BACKPLANE_LOG", "verbose", 1);
  capture_begin();
  bp_log_set_level(BP_LOG_WARN);
  const char* log = capture_end();
  unsetenv("BACKPLANE_LOG");
  assert_int_equal(
      count_of(log, "BACKPLANE_LOG='verbose' is not one of error|warn|info|debug; using warn"), 1);
}

/* ---- item: plugin text is cleaned at the boundary ------------------------- */
/* Nonzero when `s` holds a byte outside printable ASCII. */
static int has_unclean(const char* s) {
  for (const unsigned char* p = (const unsigned char*)s; *p; ++p)
    if (*p < 0x20 || *p >= 0x7f) return 1;
  return 0;
}

static void test_hostile_plugin_text(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  bp_log_set_level(BP_LOG_WARN);
  capture_begin();
  bp_status_t st = bp_context_register_plugin(ctx, fake_lib("hostile"), &plugin);
  const char* log = capture_end();
  assert_int_equal(st, BP_OK);
  /* The log line the plugin sent at instance_create. */
  assert_contains(log, "v1\\x1b]0;pwned\\x07\\x1b[2J\\x0d\\x0abackplane[error] forged line\\xff");
  assert_int_equal(count_of(log, "\nbackplane[error] forged"), 0);
  assert_int_equal(count_of(log, "\x1b"), 0);
  assert_int_equal(count_of(log, "\r"), 0);
  /* Version, vendor and the device's properties. */
  bp_plugin_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  assert_int_equal(bp_plugin_get_info(plugin, &info), BP_OK);
  assert_false(has_unclean(info.version));
  assert_false(has_unclean(info.vendor));
  assert_contains(info.version, "\\x1b]0;pwned");
  bp_device_t* device = NULL;
  assert_int_equal(bp_plugin_device(plugin, 0, &device), BP_OK);
  const bp_device_properties_t* props = bp_device_properties(device);
  assert_false(has_unclean(props->name));
  assert_false(has_unclean(props->vendor));
  assert_false(has_unclean(props->driver_version));
  assert_contains(props->name, "\\x0d\\x0a");
  /* A report() message that reaches the application. */
  bp_buffer_t* buffer = NULL;
  assert_int_equal(bp_buffer_allocate(device, 0 /* space 0 */, 4242, &buffer),
                   BP_RESOURCE_EXHAUSTED);
  assert_false(has_unclean(bp_status_message()));
  assert_contains(bp_status_message(), "hostile: ");
  assert_contains(bp_status_message(), "\\x1b[2J");
  bp_context_release(ctx);
}

#define FILE_TEST(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
  const struct CMUnitTest tests[] = {
      FILE_TEST(test_env_log_level),
      FILE_TEST(test_fifo_as_library),
      FILE_TEST(test_fifo_as_library_of_manifest),
      FILE_TEST(test_fifo_as_manifest),
      FILE_TEST(test_folder_as_library),
      FILE_TEST(test_nul_in_manifest_library),
      FILE_TEST(test_policy_world_writable_library),
      FILE_TEST(test_policy_world_writable_folder),
      FILE_TEST(test_policy_symlinks_judged_by_target),
      FILE_TEST(test_env_discovery_variables),
      FILE_TEST(test_env_allow_insecure_malformed),
      FILE_TEST(test_env_cpu_devices),
      FILE_TEST(test_hostile_plugin_text),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
