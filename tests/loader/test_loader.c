/* Loader tests: every way a plugin can fail to load is recorded with its
 * reason (and never crashes the host); discovery order, filters, manifests
 * and path rules; the context/plugin/device API around them.
 *
 * The fake plugins (tests/fake_plugins) live in BACKPLANE_TEST_FAKE_DIR.
 * Each test starts with the BACKPLANE_* variables unset and its own
 * mkdtemp folder for manifests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backplane/backplane.h"
#include "backplane/plugin.h"
#include "dtype_expect.h"
#include "test_util.h"

typedef struct fixture {
  char dir[64];       /* temp folder for manifests */
  char cwd[PATH_MAX]; /* restored after tests that chdir */
} fixture_t;

static const char* const env_vars[] = {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_PLUGINS",
                                       "BACKPLANE_DISABLE", "BACKPLANE_GOOD_OPTIONS"};

static int setup(void** state) {
  fixture_t* f = calloc(1, sizeof(*f));
  if (!f) return -1;
  for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); ++i) unsetenv(env_vars[i]);
  snprintf(f->dir, sizeof(f->dir), "/tmp/bp_loader_XXXXXX");
  if (!mkdtemp(f->dir) || !getcwd(f->cwd, sizeof(f->cwd))) {
    free(f);
    return -1;
  }
  *state = f;
  return 0;
}

static int teardown(void** state) {
  fixture_t* f = *state;
  if (chdir(f->cwd) != 0) return -1;
  DIR* d = opendir(f->dir);
  if (d) {
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
      if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
      char path[PATH_MAX];
      snprintf(path, sizeof(path), "%s/%s", f->dir, e->d_name);
      if (unlink(path) != 0) rmdir(path);
    }
    closedir(d);
  }
  rmdir(f->dir);
  for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); ++i) unsetenv(env_vars[i]);
  free(f);
  return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static const char* fake_dir(void) {
  const char* dir = getenv("BACKPLANE_TEST_FAKE_DIR");
  assert_non_null(dir);
  return dir;
}

static const char* fake_lib(const char* which) {
  static char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/libbp_fake_%s.so", fake_dir(), which);
  assert_int_equal(access(path, R_OK), 0);
  return path;
}

static void write_file(const char* dir, const char* file, const char* text) {
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/%s", dir, file);
  FILE* fp = fopen(path, "w");
  assert_non_null(fp);
  fputs(text, fp);
  fclose(fp);
}

/* Writes <dir>/<file> naming backend `name`, library `library`. */
static void write_manifest(const char* dir, const char* file, const char* name, const char* library,
                           const char* abi) {
  char text[PATH_MAX + 256];
  snprintf(text, sizeof(text),
           "{\"file_format_version\":\"1.0.0\",\"plugin\":{\"name\":\"%s\",\"library\":\"%s\","
           "\"abi_version\":\"%s\"}}",
           name, library, abi);
  write_file(dir, file, text);
}

static bp_status_t create_with(const char* plugin_path, const char* select, const char* disable,
                               bp_context_t** out) {
  bp_context_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.plugin_path = plugin_path;
  o.select = select;
  o.disable = disable;
  return bp_context_create(&o, out);
}

static bp_plugin_info_t info_of(const bp_plugin_t* plugin) {
  bp_plugin_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  assert_int_equal(bp_plugin_get_info(plugin, &info), BP_OK);
  return info;
}

/* The plugin record named `name` in `state` (loaded or skipped), or NULL. */
static bp_plugin_t* plugin_record(const bp_context_t* ctx, const char* name, uint32_t state) {
  for (uint32_t i = 0; i < bp_context_plugin_count(ctx); ++i) {
    bp_plugin_t* p = NULL;
    assert_int_equal(bp_context_plugin(ctx, i, &p), BP_OK);
    bp_plugin_info_t info = info_of(p);
    if (!strcmp(info.name, name) && info.state == state) return p;
  }
  return NULL;
}

#define LOADER_STR_(x) #x
#define LOADER_STR(x) LOADER_STR_(x)

static void assert_contains(const char* haystack, const char* needle) {
  if (!strstr(haystack, needle)) fail_msg("'%s' does not contain '%s'", haystack, needle);
}

/* ---- the good plugin ---------------------------------------------------- */

static void test_good_plugin_loads(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  assert_int_equal(bp_context_plugin_count(ctx), 0);
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good"), &plugin), BP_OK);
  assert_non_null(plugin);
  assert_string_equal(bp_status_message(), "");

  bp_plugin_info_t info = info_of(plugin);
  assert_int_equal(info.state, BP_PLUGIN_LOADED);
  assert_string_equal(info.name, "good");
  assert_string_equal(info.version, "1.0.0-fake");
  assert_string_equal(info.vendor, "backplane tests");
  assert_string_equal(info.reason, "");
  assert_int_equal(info.reason_code, BP_OK);
  assert_int_equal(info.abi_major, BP_ABI_VERSION_MAJOR);
  assert_int_equal(info.abi_minor, 0); /* the fake plugins speak 1.0: min(host, 0) */
  assert_int_equal(info.device_count, 2);
  assert_int_equal(info.comm_tier, BP_COMM_TIER_HOST_STAGED);
  char real[PATH_MAX];
  assert_non_null(realpath(fake_lib("good"), real));
  assert_string_equal(info.path, real);

  const bp_plugin_vtable_t* vt = bp_plugin_vtable(plugin);
  assert_non_null(vt);
  assert_non_null(vt->core);
  assert_int_equal(vt->core->struct_size, sizeof(bpp_core_table_t));
  assert_non_null(vt->core->stream_enqueue_host_func);
  assert_null(vt->ops);
  assert_null(vt->caps);

  assert_int_equal(bp_context_device_count(ctx), 2);
  for (uint32_t i = 0; i < 2; ++i) {
    bp_device_t* dev = NULL;
    assert_int_equal(bp_context_device(ctx, i, &dev), BP_OK);
    char name[32], desc[64];
    snprintf(name, sizeof(name), "good:%u", i);
    snprintf(desc, sizeof(desc), "Fake good device %u", i);
    assert_string_equal(bp_device_name(dev), name);
    assert_ptr_equal(bp_device_plugin(dev), plugin);
    const bp_device_properties_t* p = bp_device_properties(dev);
    assert_non_null(p);
    assert_string_equal(p->name, desc);
    assert_int_equal(p->kind, BP_DEVICE_KIND_VIRTUAL);
    assert_int_equal(p->memory_bytes, ((uint64_t)1 << 30) * (i + 1));
    assert_int_equal(p->compute_units, 4);
    assert_true(p->dtype_mask & BP_DTYPE_BIT(BP_DTYPE_F32));
    bp_memory_space_info_t spaces[4];
    uint32_t count = 0;
    assert_int_equal(bp_device_memory_spaces(dev, 4, sizeof(spaces[0]), spaces, &count), BP_OK);
    assert_int_equal(count, 1);
    assert_int_equal(spaces[0].kind, BP_MEMORY_DEVICE);
    assert_int_equal(spaces[0].alignment_bytes, 64);
    count = 0;
    assert_int_equal(bp_device_memory_spaces(dev, 0, sizeof(bp_memory_space_info_t), NULL, &count), BP_OK);
    assert_int_equal(count, 1);
    bp_device_t* same = NULL;
    assert_int_equal(bp_plugin_device(plugin, i, &same), BP_OK);
    assert_ptr_equal(same, dev);
  }
  bp_context_release(ctx);
}

/* A comm table of the provisional draft (120 bytes, before the table was
 * final) is ignored: the plugin loads, its collectives are host-staged and
 * the core never calls the draft's slots. */
static void test_draft_comm_table_ignored(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("draft_comm"), &plugin), BP_OK);
  bp_plugin_info_t info = info_of(plugin);
  assert_int_equal(info.state, BP_PLUGIN_LOADED);
  assert_int_equal(info.comm_tier, BP_COMM_TIER_HOST_STAGED);
  assert_null(bp_plugin_vtable(plugin)->comm);
  bp_context_release(ctx);
}

/* An exec table of the provisional draft (48 bytes, ABI 1.0 and 1.1) is
 * ignored with one warning: the plugin loads, has no exec table, and a
 * region compile is refused (reason DEVICE) without calling the draft's
 * slots (they abort). */
static void test_draft_exec_table_ignored(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  /* The warning goes to stderr: captured in a temporary file. */
  fflush(stderr);
  FILE* cap = tmpfile();
  assert_non_null(cap);
  int saved = dup(2);
  assert_true(saved >= 0);
  assert_true(dup2(fileno(cap), 2) >= 0);
  bp_status_t st = bp_context_register_plugin(ctx, fake_lib("draft_exec"), &plugin);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char text[4096] = {0};
  rewind(cap);
  size_t got = fread(text, 1, sizeof text - 1, cap);
  fclose(cap);
  text[got] = '\0';
  assert_int_equal(st, BP_OK);
  assert_int_equal(info_of(plugin).state, BP_PLUGIN_LOADED);
  assert_null(bp_plugin_vtable(plugin)->exec);
  assert_non_null(strstr(text, "exec table struct_size is 48"));
  bp_device_t* dev = NULL;
  assert_int_equal(bp_plugin_device(plugin, 0, &dev), BP_OK);
  bp_tensor_desc_t v = {.struct_size = sizeof v, .dtype = BP_DTYPE_F32, .rank = 1, .sizes = {4}, .strides = {1}};
  const bp_tensor_desc_t* vals[2] = {&v, &v};
  uint32_t ids[2] = {0, 1};
  bp_region_node_t node = {.struct_size = sizeof node, .op_id = BP_OP_relu, .num_inputs = 1,
                           .num_outputs = 1, .inputs = ids, .outputs = ids + 1};
  const bp_region_node_t* nodes[1] = {&node};
  bp_region_desc_t d = {.struct_size = sizeof d, .kind = BP_REGION_GRAPH, .num_values = 2, .num_args = 2,
                        .num_inputs = 1, .num_nodes = 1, .values = vals, .nodes = nodes};
  bp_region_t* r = NULL;
  bp_support_t why = {.struct_size = sizeof why};
  assert_int_equal(bp_region_compile(dev, &d, &why, &r), BP_UNIMPLEMENTED);
  assert_int_equal(why.reason, BP_SUPPORT_DEVICE);
  assert_null(r);
  bp_context_release(ctx);
}

static void test_find_device(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good"), NULL), BP_OK);
  bp_device_t *d0 = NULL, *d1 = NULL, *found = NULL;
  assert_int_equal(bp_context_device(ctx, 0, &d0), BP_OK);
  assert_int_equal(bp_context_device(ctx, 1, &d1), BP_OK);
  assert_int_equal(bp_context_find_device(ctx, "good:1", &found), BP_OK);
  assert_ptr_equal(found, d1);
  assert_int_equal(bp_context_find_device(ctx, "good", &found), BP_OK);
  assert_ptr_equal(found, d0);
  found = NULL;
  assert_int_equal(bp_context_find_device(ctx, "good:2", &found), BP_NOT_FOUND);
  assert_contains(bp_status_message(), "2 device");
  assert_null(found);
  assert_int_equal(bp_context_find_device(ctx, "good:x", &found), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_find_device(ctx, "good:", &found), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_find_device(ctx, ":0", &found), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_find_device(ctx, "nosuch:0", &found), BP_NOT_FOUND);
  assert_contains(bp_status_message(), "nosuch");
  assert_null(found);
  bp_context_release(ctx);
}

static void test_retain_release(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good"), NULL), BP_OK);
  bp_context_retain(ctx);
  bp_context_release(ctx);
  /* Still alive: one reference left. */
  assert_int_equal(bp_context_device_count(ctx), 2);
  bp_context_release(ctx);
}

static void test_instance_options_from_env(void** state) {
  (void)state;
  setenv("BACKPLANE_GOOD_OPTIONS", "devices=3", 1);
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good"), &plugin), BP_OK);
  assert_int_equal(info_of(plugin).device_count, 3);
  assert_int_equal(bp_context_device_count(ctx), 3);
  bp_context_release(ctx);

  setenv("BACKPLANE_GOOD_OPTIONS", "devices=99", 1);
  ctx = bp_test_context_bare();
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good"), &plugin), BP_INVALID_ARGUMENT);
  bp_plugin_info_t info = info_of(plugin);
  assert_int_equal(info.state, BP_PLUGIN_SKIPPED);
  assert_contains(info.reason, "devices=99");
  assert_int_equal(bp_context_device_count(ctx), 0);
  bp_context_release(ctx);
}

/* ---- every bad plugin: skipped with its reason -------------------------- */

static void expect_skipped(const char* which, bp_status_t code, const char* cause) {
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  bp_status_t status = bp_context_register_plugin(ctx, fake_lib(which), &plugin);
  assert_int_equal(status, code);
  assert_contains(bp_status_message(), cause);
  assert_non_null(plugin);
  bp_plugin_info_t info = info_of(plugin);
  assert_int_equal(info.state, BP_PLUGIN_SKIPPED);
  assert_int_equal(info.reason_code, code);
  assert_contains(info.reason, cause);
  assert_int_equal(info.device_count, 0);
  assert_null(bp_plugin_vtable(plugin));
  bp_device_t* dev = NULL;
  assert_int_equal(bp_plugin_device(plugin, 0, &dev), code);
  assert_int_equal(bp_context_device_count(ctx), 0);
  assert_int_equal(bp_context_plugin_count(ctx), 1);
  /* Asking for it by name explains its absence. */
  bp_plugin_t* found = NULL;
  assert_int_equal(bp_context_find_plugin(ctx, info.name, &found), code);
  assert_contains(bp_status_message(), cause);
  assert_null(found);
  /* The host carries on: a good plugin still loads into the same context. */
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good"), NULL), BP_OK);
  assert_int_equal(bp_context_device_count(ctx), 2);
  bp_context_release(ctx);
}

/* X(case, expected code, text the reason must contain) */
#define BAD_PLUGINS(X)                                                         \
  X(no_entry, BP_FAILED_PRECONDITION, "does not export bp_plugin_negotiate")   \
  X(wrong_major, BP_FAILED_PRECONDITION, "ABI major 2")                        \
  X(answers_newer_minor, BP_FAILED_PRECONDITION, "newer than the 1." LOADER_STR(BP_ABI_VERSION_MINOR) " offered") \
  X(small_table, BP_FAILED_PRECONDITION, "core table struct_size")             \
  X(missing_slot, BP_UNIMPLEMENTED, "core table lacks device_open")            \
  X(init_fail, BP_UNAVAILABLE, "libbp_fake_vendor.so.1")                       \
  X(bad_reply, BP_FAILED_PRECONDITION, "NULL vtable")                          \
  X(empty_name, BP_FAILED_PRECONDITION, "invalid backend name")                \
  X(refuse, BP_FAILED_PRECONDITION, "the moon is in the wrong phase")          \
  X(device_fail, BP_DEVICE_LOST, "fell off the bus")

#define BAD_PLUGIN_TEST(which, code, cause)        \
  static void test_skipped_##which(void** state) { \
    (void)state;                                   \
    expect_skipped(#which, code, cause);           \
  }
BAD_PLUGINS(BAD_PLUGIN_TEST)
#undef BAD_PLUGIN_TEST

static void test_skipped_names(void** state) {
  (void)state;
  /* Failing before the name is known: the record is named by the file. */
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  bp_context_register_plugin(ctx, fake_lib("no_entry"), &plugin);
  assert_string_equal(info_of(plugin).name, "libbp_fake_no_entry.so");
  assert_int_equal(info_of(plugin).abi_major, 0);
  /* Failing after negotiation: the backend's name and agreed version. */
  bp_context_register_plugin(ctx, fake_lib("init_fail"), &plugin);
  bp_plugin_info_t info = info_of(plugin);
  assert_string_equal(info.name, "init_fail");
  assert_int_equal(info.abi_major, 1);
  assert_int_equal(info.abi_minor, 0);
  assert_contains(info.reason, "instance_create");
  bp_context_release(ctx);
}

static void test_newer_minor_works_at_agreed_version(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("newer_minor"), &plugin), BP_OK);
  bp_plugin_info_t info = info_of(plugin);
  assert_int_equal(info.state, BP_PLUGIN_LOADED);
  assert_int_equal(info.abi_major, BP_ABI_VERSION_MAJOR);
  assert_int_equal(info.abi_minor, BP_ABI_VERSION_MINOR);
  assert_int_equal(info.device_count, 2);
  /* Its bigger tables are read only up to this header's size. */
  const bp_plugin_vtable_t* vt = bp_plugin_vtable(plugin);
  assert_non_null(vt);
  assert_int_equal(vt->struct_size, sizeof(bp_plugin_vtable_t));
  assert_int_equal(vt->core->struct_size, sizeof(bpp_core_table_t));
  assert_non_null(vt->core->event_elapsed_ns);
  bp_device_t* dev = NULL;
  assert_int_equal(bp_context_find_device(ctx, "newer_minor:1", &dev), BP_OK);
  assert_string_equal(bp_device_properties(dev)->name, "Fake newer_minor device 1");
  bp_context_release(ctx);
}

static void test_older_table_missing_slots_read_null(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("older_table"), &plugin), BP_OK);
  const bp_plugin_vtable_t* vt = bp_plugin_vtable(plugin);
  assert_non_null(vt);
  assert_non_null(vt->core->device_open);
  assert_null(vt->core->buffer_allocate);
  assert_null(vt->core->stream_enqueue_host_func);
  assert_null(vt->core->device_memory_spaces);
  bp_device_t* dev = NULL;
  assert_int_equal(bp_context_device(ctx, 0, &dev), BP_OK);
  uint32_t count = 99;
  assert_int_equal(bp_device_memory_spaces(dev, 0, sizeof(bp_memory_space_info_t), NULL, &count), BP_OK);
  assert_int_equal(count, 0);
  bp_context_release(ctx);
}

static void test_register_errors(void** state) {
  fixture_t* f = *state;
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  char missing[PATH_MAX];
  snprintf(missing, sizeof(missing), "%s/libbp_nothing_here.so", f->dir);
  assert_int_equal(bp_context_register_plugin(ctx, missing, &plugin), BP_NOT_FOUND);
  assert_contains(bp_status_message(), "libbp_nothing_here.so");
  assert_int_equal(info_of(plugin).state, BP_PLUGIN_SKIPPED);
  /* A file that is not a shared library. */
  write_file(f->dir, "libbp_garbage.so", "not an ELF file");
  char garbage[PATH_MAX];
  snprintf(garbage, sizeof(garbage), "%s/libbp_garbage.so", f->dir);
  assert_int_equal(bp_context_register_plugin(ctx, garbage, &plugin), BP_FAILED_PRECONDITION);
  assert_contains(info_of(plugin).reason, "dlopen");
  /* The same backend twice: the second is a duplicate of the first. */
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good"), NULL), BP_OK);
  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good_copy"), &plugin),
                   BP_ALREADY_EXISTS);
  assert_contains(info_of(plugin).reason, "duplicate of");
  assert_contains(info_of(plugin).reason, "libbp_fake_good.so");
  assert_int_equal(bp_context_device_count(ctx), 2);
  bp_context_release(ctx);
}

static void test_register_relative_path_and_manifest(void** state) {
  fixture_t* f = *state;
  bp_context_t* ctx = bp_test_context_bare();
  /* Explicit registration accepts a path relative to the current folder. */
  assert_int_equal(chdir(fake_dir()), 0);
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, "./libbp_fake_good.so", &plugin), BP_OK);
  assert_int_equal(info_of(plugin).state, BP_PLUGIN_LOADED);
  assert_int_equal(info_of(plugin).path[0], '/');
  /* And a manifest. */
  write_manifest(f->dir, "older.json", "older_table", fake_lib("older_table"), "1.0");
  char manifest[PATH_MAX];
  snprintf(manifest, sizeof(manifest), "%s/older.json", f->dir);
  assert_int_equal(bp_context_register_plugin(ctx, manifest, &plugin), BP_OK);
  assert_string_equal(info_of(plugin).name, "older_table");
  assert_int_equal(bp_context_device_count(ctx), 4);
  bp_context_release(ctx);
}

/* ---- manifests and discovery --------------------------------------------- */

static void test_bad_manifests_recorded(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "a_good.json", "good", fake_lib("good"), "1.0");
  write_file(f->dir, "corrupt.json", "{ \"file_format_version\": \"1.0.0\", \"plugin\": {");
  write_file(
      f->dir, "no_library.json",
      "{\"file_format_version\":\"1.0.0\",\"plugin\":{\"name\":\"x\",\"abi_version\":\"1.0\"}}");
  write_manifest(f->dir, "wrong_abi.json", "future", fake_lib("good"), "2.0");
  write_manifest(f->dir, "bad_name.json", "Bad-Name", fake_lib("good"), "1.0");
  write_manifest(f->dir, "no_file.json", "ghost", "libbp_fake_ghost.so", "1.0");
  write_manifest(f->dir, "mismatch.json", "other", fake_lib("older_table"), "1.0");
  write_file(f->dir, "ignored.txt", "not a manifest");

  bp_context_t* ctx = NULL;
  assert_int_equal(create_with(f->dir, NULL, NULL, &ctx), BP_OK);
  bp_plugin_t* good = plugin_record(ctx, "good", BP_PLUGIN_LOADED);
  assert_non_null(good);

  struct {
    const char* name;
    bp_status_t code;
    const char* cause;
  } cases[] = {
      {"corrupt.json", BP_INVALID_ARGUMENT, "not valid JSON"},
      {"no_library.json", BP_INVALID_ARGUMENT, "plugin.library"},
      {"wrong_abi.json", BP_FAILED_PRECONDITION, "ABI 2.0"},
      {"bad_name.json", BP_INVALID_ARGUMENT, "Bad-Name"},
      {"ghost", BP_NOT_FOUND, "libbp_fake_ghost.so"},
      {"other", BP_FAILED_PRECONDITION, "answers 'older_table'"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    bp_plugin_t* p = plugin_record(ctx, cases[i].name, BP_PLUGIN_SKIPPED);
    if (!p) fail_msg("no skipped record named '%s'", cases[i].name);
    bp_plugin_info_t info = info_of(p);
    assert_int_equal(info.reason_code, cases[i].code);
    assert_contains(info.reason, cases[i].cause);
  }
  assert_null(plugin_record(ctx, "ignored.txt", BP_PLUGIN_SKIPPED));
  /* A relative library is resolved against the manifest's folder. */
  char expected[PATH_MAX];
  snprintf(expected, sizeof(expected), "%s/libbp_fake_ghost.so", f->dir);
  assert_string_equal(info_of(plugin_record(ctx, "ghost", BP_PLUGIN_SKIPPED)).path, expected);
  bp_context_release(ctx);
}

static void test_select_skipped_plugin_fails_create(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "init_fail.json", "init_fail", fake_lib("init_fail"), "1.0");
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  bp_context_t* ctx = NULL;
  /* Not asked for by name: recorded, not fatal. */
  assert_int_equal(create_with(f->dir, NULL, NULL, &ctx), BP_OK);
  assert_non_null(plugin_record(ctx, "init_fail", BP_PLUGIN_SKIPPED));
  bp_plugin_t* p = NULL;
  assert_int_equal(bp_context_find_plugin(ctx, "init_fail", &p), BP_UNAVAILABLE);
  assert_int_equal(bp_context_find_plugin(ctx, "nosuch", &p), BP_NOT_FOUND);
  assert_null(p);
  bp_context_release(ctx);
  /* Asked for by name: creation fails with the plugin's reason. */
  ctx = NULL;
  assert_int_equal(create_with(f->dir, "good,init_fail", NULL, &ctx), BP_UNAVAILABLE);
  assert_null(ctx);
  assert_contains(bp_status_message(), "init_fail");
  assert_contains(bp_status_message(), "libbp_fake_vendor.so.1");
  /* Through the environment too. */
  setenv("BACKPLANE_PLUGINS", "init_fail", 1);
  assert_int_equal(create_with(f->dir, NULL, NULL, &ctx), BP_UNAVAILABLE);
  assert_null(ctx);
}

static void test_select_missing_plugin_fails_create(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  bp_context_t* ctx = NULL;
  assert_int_equal(create_with(f->dir, "nosuch", NULL, &ctx), BP_NOT_FOUND);
  assert_null(ctx);
  assert_contains(bp_status_message(), "nosuch");
  /* BACKPLANE_PLUGINS overrides options.select. */
  setenv("BACKPLANE_PLUGINS", "good", 1);
  assert_int_equal(create_with(f->dir, "nosuch", NULL, &ctx), BP_OK);
  assert_non_null(plugin_record(ctx, "good", BP_PLUGIN_LOADED));
  bp_context_release(ctx);
}

static void test_select_and_disable_filters(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  write_manifest(f->dir, "init_fail.json", "init_fail", fake_lib("init_fail"), "1.0");
  write_manifest(f->dir, "older.json", "older_table", fake_lib("older_table"), "1.0");
  bp_context_t* ctx = NULL;
  bp_plugin_t* p = NULL;

  assert_int_equal(create_with(f->dir, "good, older_table", NULL, &ctx), BP_OK);
  assert_non_null(plugin_record(ctx, "good", BP_PLUGIN_LOADED));
  assert_non_null(plugin_record(ctx, "older_table", BP_PLUGIN_LOADED));
  /* Filtered-out plugins are not loaded and not listed. */
  assert_int_equal(bp_context_find_plugin(ctx, "init_fail", &p), BP_NOT_FOUND);
  bp_context_release(ctx);

  setenv("BACKPLANE_DISABLE", "older_table", 1);
  assert_int_equal(create_with(f->dir, NULL, "good", &ctx), BP_OK);
  assert_int_equal(bp_context_find_plugin(ctx, "good", &p), BP_NOT_FOUND);
  assert_int_equal(bp_context_find_plugin(ctx, "older_table", &p), BP_NOT_FOUND);
  assert_int_equal(bp_context_find_plugin(ctx, "init_fail", &p), BP_UNAVAILABLE);
  bp_context_release(ctx);

  /* Selecting a disabled backend cannot succeed. */
  assert_int_equal(create_with(f->dir, "good", "good", &ctx), BP_NOT_FOUND);
  assert_contains(bp_status_message(), "disable");
}

static void test_plugin_path_entries(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  char manifest[PATH_MAX];
  snprintf(manifest, sizeof(manifest), "%s/good.json", f->dir);
  const char* entries[] = {f->dir, manifest, fake_lib("good")};
  for (size_t i = 0; i < 3; ++i) {
    char value[PATH_MAX * 2];
    /* Empty and missing entries around it are harmless. */
    snprintf(value, sizeof(value), "::/nonexistent/bp_folder:%s:", entries[i]);
    setenv("BACKPLANE_PLUGIN_PATH", value, 1);
    bp_context_t* ctx = NULL;
    assert_int_equal(create_with(NULL, "good", NULL, &ctx), BP_OK);
    bp_plugin_t* p = plugin_record(ctx, "good", BP_PLUGIN_LOADED);
    assert_non_null(p);
    assert_int_equal(info_of(p).device_count, 2);
    bp_device_t* dev = NULL;
    assert_int_equal(bp_context_find_device(ctx, "good:1", &dev), BP_OK);
    bp_context_release(ctx);
  }
}

static void test_directly_named_library_is_filtered(void** state) {
  (void)state;
  /* A .so entry tells its name only after negotiation; filters still apply. */
  setenv("BACKPLANE_PLUGIN_PATH", fake_lib("good"), 1);
  setenv("BACKPLANE_DISABLE", "good", 1);
  bp_context_t* ctx = NULL;
  assert_int_equal(create_with(NULL, NULL, NULL, &ctx), BP_OK);
  bp_plugin_t* p = NULL;
  assert_int_equal(bp_context_find_plugin(ctx, "good", &p), BP_NOT_FOUND);
  bp_context_release(ctx);
}

static void test_same_file_twice_loaded_once(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  char value[PATH_MAX * 3];
  snprintf(value, sizeof(value), "%s:%s:%s/good.json:%s", f->dir, f->dir, f->dir, fake_lib("good"));
  setenv("BACKPLANE_PLUGIN_PATH", value, 1);
  bp_context_t* ctx = NULL;
  assert_int_equal(create_with(NULL, NULL, NULL, &ctx), BP_OK);
  assert_non_null(plugin_record(ctx, "good", BP_PLUGIN_LOADED));
  assert_null(plugin_record(ctx, "good", BP_PLUGIN_SKIPPED));
  bp_context_release(ctx);
}

static void test_first_found_wins_duplicates_recorded(void** state) {
  fixture_t* f = *state;
  /* Sorted by file name: a_good.json before b_copy.json. */
  write_manifest(f->dir, "b_copy.json", "good", fake_lib("good_copy"), "1.0");
  write_manifest(f->dir, "a_good.json", "good", fake_lib("good"), "1.0");
  bp_context_t* ctx = NULL;
  assert_int_equal(create_with(f->dir, NULL, NULL, &ctx), BP_OK);
  bp_plugin_t* loaded = plugin_record(ctx, "good", BP_PLUGIN_LOADED);
  assert_non_null(loaded);
  assert_string_equal(info_of(loaded).version, "1.0.0-fake");
  bp_plugin_t* dup = plugin_record(ctx, "good", BP_PLUGIN_SKIPPED);
  assert_non_null(dup);
  bp_plugin_info_t info = info_of(dup);
  assert_int_equal(info.reason_code, BP_ALREADY_EXISTS);
  assert_contains(info.reason, "duplicate of ");
  assert_contains(info.reason, info_of(loaded).path);
  /* find_plugin answers with the loaded one. */
  bp_plugin_t* p = NULL;
  assert_int_equal(bp_context_find_plugin(ctx, "good", &p), BP_OK);
  assert_ptr_equal(p, loaded);
  bp_context_release(ctx);
}

static void test_env_path_searched_before_options_path(void** state) {
  fixture_t* f = *state;
  char env_dir[128];
  snprintf(env_dir, sizeof(env_dir), "%s/env", f->dir);
  assert_int_equal(mkdir(env_dir, 0700), 0);
  write_manifest(env_dir, "good.json", "good", fake_lib("good_copy"), "1.0");
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  setenv("BACKPLANE_PLUGIN_PATH", env_dir, 1);
  bp_context_t* ctx = NULL;
  assert_int_equal(create_with(f->dir, "good", NULL, &ctx), BP_OK);
  bp_plugin_t* p = NULL;
  assert_int_equal(bp_context_find_plugin(ctx, "good", &p), BP_OK);
  assert_string_equal(info_of(p).version, "2.0.0-copy");
  bp_context_release(ctx);
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/good.json", env_dir);
  unlink(path);
  rmdir(env_dir);
}

static void test_relative_path_entries_refused(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  /* From /tmp, "bp_loader_XXXXXX" names the fixture folder relatively. */
  assert_int_equal(chdir("/tmp"), 0);
  const char* rel = f->dir + strlen("/tmp/");
  char value[PATH_MAX];
  snprintf(value, sizeof(value), "%s:./%s/good.json", rel, rel);
  setenv("BACKPLANE_PLUGIN_PATH", value, 1);
  bp_context_t* ctx = NULL;
  assert_int_equal(create_with(value, NULL, NULL, &ctx), BP_OK);
  bp_plugin_t* p = NULL;
  assert_int_equal(bp_context_find_plugin(ctx, "good", &p), BP_NOT_FOUND);
  bp_context_release(ctx);
  assert_int_equal(create_with(NULL, "good", NULL, &ctx), BP_NOT_FOUND);
}

static void test_current_directory_never_searched(void** state) {
  fixture_t* f = *state;
  /* A manifest and a library copy in the current folder. */
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  write_manifest(f->dir, "cpu.json", "cpu", fake_lib("good"), "1.0");
  assert_int_equal(chdir(f->dir), 0);
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(NULL, &ctx), BP_OK);
  bp_plugin_t* p = NULL;
  assert_int_equal(bp_context_find_plugin(ctx, "good", &p), BP_NOT_FOUND);
  for (uint32_t i = 0; i < bp_context_plugin_count(ctx); ++i) {
    assert_int_equal(bp_context_plugin(ctx, i, &p), BP_OK);
    char real_dir[PATH_MAX];
    assert_non_null(realpath(f->dir, real_dir));
    assert_null(strstr(info_of(p).path, real_dir));
  }
  bp_context_release(ctx);
}

static void test_no_discovery_skips_paths(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  setenv("BACKPLANE_PLUGIN_PATH", f->dir, 1);
  bp_context_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.flags = BP_CONTEXT_NO_DISCOVERY;
  o.plugin_path = f->dir;
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(&o, &ctx), BP_OK);
  assert_int_equal(bp_context_plugin_count(ctx), 0);
  assert_int_equal(bp_context_device_count(ctx), 0);
  bp_context_release(ctx);
}

static void test_plugins_beside_library_found(void** state) {
  (void)state;
  /* The build tree mirrors the install tree: plugins built into
   * <libdir>/backplane/plugins are found with no path set at all. */
  const char* dir = getenv("BACKPLANE_TEST_PLUGIN_DIR");
  char manifest[PATH_MAX];
  snprintf(manifest, sizeof(manifest), "%s/cpu.json", dir ? dir : "");
  if (!dir || access(manifest, R_OK) != 0) skip();
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(NULL, &ctx), BP_OK);
  assert_true(plugin_record(ctx, "cpu", BP_PLUGIN_LOADED) ||
              plugin_record(ctx, "cpu", BP_PLUGIN_SKIPPED));
  bp_context_release(ctx);
}

static void test_debug_log_traces_decisions(void** state) {
  fixture_t* f = *state;
  write_manifest(f->dir, "good.json", "good", fake_lib("good"), "1.0");
  write_file(f->dir, "corrupt.json", "{");
  char log_path[PATH_MAX];
  snprintf(log_path, sizeof(log_path), "%s/log.txt", f->dir);
  fflush(stderr);
  int saved = dup(2);
  FILE* log = fopen(log_path, "w");
  assert_non_null(log);
  dup2(fileno(log), 2);
  bp_log_set_level(BP_LOG_DEBUG);
  setenv("BACKPLANE_PLUGIN_PATH", "relative/entry", 1);
  bp_context_t* ctx = NULL;
  bp_status_t status = create_with(f->dir, NULL, NULL, &ctx);
  bp_log_set_level(BP_LOG_WARN);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fclose(log);
  assert_int_equal(status, BP_OK);
  bp_context_release(ctx);

  FILE* in = fopen(log_path, "r");
  assert_non_null(in);
  static char text[1 << 16];
  size_t n = fread(text, 1, sizeof(text) - 1, in);
  text[n] = '\0';
  fclose(in);
  assert_contains(text, "backplane[debug] searching folder");
  assert_contains(text, "backplane[debug] manifest");
  assert_contains(text, "dlopen");
  assert_contains(text, "negotiated ABI 1.0");
  assert_contains(text, "device good:1");
  assert_contains(
      text, "backplane[warn] BACKPLANE_PLUGIN_PATH entry 'relative/entry' is a relative path");
  assert_contains(text, "corrupt.json");
}

/* ---- arguments, status, dtypes ------------------------------------------ */

static void test_null_arguments(void** state) {
  (void)state;
  bp_context_t* ctx = NULL;
  assert_int_equal(bp_context_create(NULL, NULL), BP_INVALID_ARGUMENT);
  assert_contains(bp_status_message(), "out_context");
  bp_context_options_t o;
  memset(&o, 0, sizeof(o));
  assert_int_equal(bp_context_create(&o, &ctx), BP_INVALID_ARGUMENT);
  assert_contains(bp_status_message(), "struct_size");
  o.struct_size = sizeof(o);
  o.flags = 0x80;
  assert_int_equal(bp_context_create(&o, &ctx), BP_INVALID_ARGUMENT);
  assert_null(ctx);

  ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  bp_device_t* dev = NULL;
  assert_int_equal(bp_context_register_plugin(NULL, fake_lib("good"), NULL), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_register_plugin(ctx, NULL, NULL), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_register_plugin(ctx, "", NULL), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_find_plugin(NULL, "good", &plugin), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_find_plugin(ctx, NULL, &plugin), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_find_plugin(ctx, "good", NULL), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_find_device(ctx, NULL, &dev), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_find_device(NULL, "good", &dev), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_plugin(ctx, 0, &plugin), BP_OUT_OF_RANGE);
  assert_int_equal(bp_context_plugin(ctx, 0, NULL), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_device(ctx, 0, &dev), BP_OUT_OF_RANGE);
  assert_int_equal(bp_context_device(NULL, 0, &dev), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_context_plugin_count(NULL), 0);
  assert_int_equal(bp_context_device_count(NULL), 0);

  assert_int_equal(bp_context_register_plugin(ctx, fake_lib("good"), &plugin), BP_OK);
  bp_plugin_info_t info;
  memset(&info, 0, sizeof(info));
  assert_int_equal(bp_plugin_get_info(plugin, &info), BP_INVALID_ARGUMENT);
  assert_contains(bp_status_message(), "struct_size");
  info.struct_size = sizeof(info);
  assert_int_equal(bp_plugin_get_info(NULL, &info), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_plugin_get_info(plugin, NULL), BP_INVALID_ARGUMENT);
  assert_null(bp_plugin_vtable(NULL));
  assert_int_equal(bp_plugin_device(plugin, 2, &dev), BP_OUT_OF_RANGE);
  assert_int_equal(bp_plugin_device(NULL, 0, &dev), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_plugin_device(plugin, 0, &dev), BP_OK);
  uint32_t count = 0;
  assert_int_equal(bp_device_memory_spaces(NULL, 0, sizeof(bp_memory_space_info_t), NULL, &count), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_device_memory_spaces(dev, 2, sizeof(bp_memory_space_info_t), NULL, &count), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_device_memory_spaces(dev, 0, sizeof(bp_memory_space_info_t), NULL, NULL), BP_INVALID_ARGUMENT);
  assert_null(bp_device_plugin(NULL));
  assert_null(bp_device_properties(NULL));
  assert_string_equal(bp_device_name(NULL), "");
  bp_context_retain(NULL);
  bp_context_release(NULL);
  bp_context_release(ctx);
}

static void test_status_and_dtypes(void** state) {
  (void)state;
  assert_string_equal(bp_status_name(BP_OK), "OK");
  assert_string_equal(bp_status_name(BP_UNAVAILABLE), "UNAVAILABLE");
  assert_string_equal(bp_status_name(BP_NOT_READY), "NOT_READY");
  assert_string_equal(bp_status_name(999), "UNKNOWN_STATUS");
  assert_string_equal(bp_status_name(-1), "UNKNOWN_STATUS");
  uint32_t major = 0, minor = 99;
  bp_abi_version(&major, &minor);
  assert_int_equal(major, BP_ABI_VERSION_MAJOR);
  assert_int_equal(minor, BP_ABI_VERSION_MINOR);
  bp_abi_version(NULL, NULL);

  /* Every dtype, and the one answer for values that are none (backplane.h). */
  assert_int_equal(BP_TEST_NUM_DTYPES, BP_DTYPE_COUNT_ - 1);
  BP_TEST_CHECK_DTYPE_FACTS();
  for (size_t i = 0; i < BP_TEST_NUM_DTYPES; ++i)
    assert_int_equal(bp_dtype_from_name(bp_test_dtypes[i].name), bp_test_dtypes[i].dtype);
  assert_int_equal(bp_dtype_from_name("invalid"), BP_DTYPE_INVALID);
  assert_int_equal(bp_dtype_from_name("f8e4m3"), BP_DTYPE_INVALID); /* the old, ambiguous name */
  assert_int_equal(bp_dtype_from_name("float"), BP_DTYPE_INVALID);
  assert_int_equal(bp_dtype_from_name(NULL), BP_DTYPE_INVALID);
}

static void* thread_error(void* arg) {
  (void)arg;
  bp_context_t* ctx = NULL;
  bp_status_t status = bp_context_create(NULL, NULL);
  static char copy[256];
  snprintf(copy, sizeof(copy), "%d %s", status, bp_status_message());
  (void)ctx;
  return copy;
}

static void test_messages_are_per_thread(void** state) {
  (void)state;
  bp_context_t* ctx = bp_test_context_bare();
  bp_device_t* dev = NULL;
  assert_int_equal(bp_context_device(ctx, 7, &dev), BP_OUT_OF_RANGE);
  char mine[256];
  snprintf(mine, sizeof(mine), "%s", bp_status_message());
  assert_contains(mine, "index 7");
  pthread_t t;
  void* result = NULL;
  assert_int_equal(pthread_create(&t, NULL, thread_error, NULL), 0);
  assert_int_equal(pthread_join(t, &result), 0);
  assert_contains((const char*)result, "out_context");
  /* The other thread's error did not touch this thread's message. */
  assert_string_equal(bp_status_message(), mine);
  bp_context_release(ctx);
}

int main(void) {
#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)
#define BAD_PLUGIN_ENTRY(which, code, cause) T(test_skipped_##which),
  const struct CMUnitTest tests[] = {
      T(test_good_plugin_loads),
      T(test_draft_comm_table_ignored),
      T(test_draft_exec_table_ignored),
      T(test_find_device),
      T(test_retain_release),
      T(test_instance_options_from_env),
      BAD_PLUGINS(BAD_PLUGIN_ENTRY) T(test_skipped_names),
      T(test_newer_minor_works_at_agreed_version),
      T(test_older_table_missing_slots_read_null),
      T(test_register_errors),
      T(test_register_relative_path_and_manifest),
      T(test_bad_manifests_recorded),
      T(test_select_skipped_plugin_fails_create),
      T(test_select_missing_plugin_fails_create),
      T(test_select_and_disable_filters),
      T(test_plugin_path_entries),
      T(test_directly_named_library_is_filtered),
      T(test_same_file_twice_loaded_once),
      T(test_first_found_wins_duplicates_recorded),
      T(test_env_path_searched_before_options_path),
      T(test_relative_path_entries_refused),
      T(test_current_directory_never_searched),
      T(test_no_discovery_skips_paths),
      T(test_plugins_beside_library_found),
      T(test_debug_log_traces_decisions),
      T(test_null_arguments),
      T(test_status_and_dtypes),
      T(test_messages_are_per_thread),
  };
#undef BAD_PLUGIN_ENTRY
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
