/* Manifest fuzzing: thousands of deterministic (seeded) mutations of valid
 * plugin manifests, each loaded through a context both ways a manifest is
 * read -- bp_context_register_plugin on a bare context and discovery through
 * BACKPLANE_PLUGIN_PATH. Every case must end with a loaded plugin or a
 * status and a non-empty message; the process keeps working afterwards (no
 * leaked descriptors, a good plugin still loads).
 *
 * The fake plugins (tests/fake_plugins) live in BACKPLANE_TEST_FAKE_DIR.
 * BP_UNDER_VALGRIND set: fewer iterations (same seeds, a prefix of the run).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backplane/backplane.h"
#include "test_util.h"

/* ---- deterministic random numbers (xorshift64*) ------------------------- */

static uint64_t g_rng;

static uint64_t rng_next(void) {
  g_rng ^= g_rng >> 12;
  g_rng ^= g_rng << 25;
  g_rng ^= g_rng >> 27;
  return g_rng * UINT64_C(2685821657736338717);
}

/* Uniform-ish in [0, n); n > 0. */
static size_t rng_below(size_t n) { return (size_t)(rng_next() % n); }

/* ---- a growable byte buffer --------------------------------------------- */

typedef struct bytes {
  char* data;
  size_t len, cap;
} bytes_t;

static void bytes_reserve(bytes_t* b, size_t extra) {
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char* p = realloc(b->data, cap);
  assert_non_null(p);
  b->data = p;
  b->cap = cap;
}

static void bytes_insert(bytes_t* b, size_t at, const char* s, size_t n) {
  bytes_reserve(b, n);
  memmove(b->data + at + n, b->data + at, b->len - at);
  memcpy(b->data + at, s, n);
  b->len += n;
}

static void bytes_append(bytes_t* b, const char* s, size_t n) { bytes_insert(b, b->len, s, n); }
static void bytes_puts(bytes_t* b, const char* s) { bytes_append(b, s, strlen(s)); }

static void bytes_repeat(bytes_t* b, const char* s, size_t times) {
  for (size_t i = 0; i < times; ++i) bytes_puts(b, s);
}

/* ---- the fixture -------------------------------------------------------- */

typedef struct fixture {
  char dir[64];          /* temp folder: manifests and a link to the good plugin */
  char good[PATH_MAX];   /* absolute path of the good fake plugin */
  char case_path[PATH_MAX];
} fixture_t;

static const char* const env_vars[] = {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_PLUGINS",
                                       "BACKPLANE_DISABLE", "BACKPLANE_GOOD_OPTIONS"};

static void clear_dir(const char* dir) {
  DIR* d = opendir(dir);
  if (!d) return;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    if (!strcmp(e->d_name, "libbp_fake_good.so")) continue;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
}

static int setup(void** state) {
  fixture_t* f = calloc(1, sizeof(*f));
  if (!f) return -1;
  for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); ++i) unsetenv(env_vars[i]);
  const char* fake = getenv("BACKPLANE_TEST_FAKE_DIR");
  snprintf(f->dir, sizeof(f->dir), "/tmp/bp_manifest_fuzz_XXXXXX");
  if (!fake || !mkdtemp(f->dir)) {
    free(f);
    return -1;
  }
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/libbp_fake_good.so", fake);
  if (!realpath(path, f->good)) {
    rmdir(f->dir);
    free(f);
    return -1;
  }
  /* Relative "library" entries resolve against the manifest's folder. */
  snprintf(path, sizeof(path), "%s/libbp_fake_good.so", f->dir);
  if (symlink(f->good, path) != 0) {
    rmdir(f->dir);
    free(f);
    return -1;
  }
  snprintf(f->case_path, sizeof(f->case_path), "%s/case.json", f->dir);
  *state = f;
  return 0;
}

static int teardown(void** state) {
  fixture_t* f = *state;
  clear_dir(f->dir);
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/libbp_fake_good.so", f->dir);
  unlink(path);
  rmdir(f->dir);
  for (size_t i = 0; i < sizeof(env_vars) / sizeof(env_vars[0]); ++i) unsetenv(env_vars[i]);
  free(f);
  return 0;
}

static int open_fd_count(void) {
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d) != NULL) ++n;
  closedir(d);
  return n;
}

static void write_bytes(const char* path, const bytes_t* b) {
  FILE* fp = fopen(path, "wb");
  assert_non_null(fp);
  if (b->len > 0) assert_int_equal(fwrite(b->data, 1, b->len, fp), b->len);
  assert_int_equal(fclose(fp), 0);
}

/* ---- manifests: seeds and mutations ------------------------------------- */

/* Values that replace one field of a valid manifest (JSON text). */
static const char* const g_values[] = {
    "\"1.0.0\"", "\"1.0\"", "\"2.0.0\"", "\"1.\"", "\"\"", "\"0.9\"", "\"1.-5\"", "\"1. 0\"",
    "\"+1.0\"", "\"1.0x\"", "\"99999999999999999999.1\"", "\"1.99999999999\"",
    "\"good\"", "\"GOOD\"", "\"g-o-o-d\"", "\"cpu\"", "\"\\u0000\"", "\"go\\u0000od\"",
    "\"\\uD800\"", "\"\\uDFFF\\uD800\"", "\"\xC3\x28\"", "\"\xF0\x9F\x98\x80\"", "\"\xE2\x82\"",
    "\"libbp_fake_good.so\"", "\"../../x.so\"", "\"../libbp_fake_good.so\"", "\"/bin/sh\"",
    "\"/dev/null\"", "\"/\"", "\"/etc/passwd\"", "\".\"", "\"..\"", "\"/nonexistent/x.so\"",
    "\"libbp_fake_good.so/\"", "\"//\"", "\"a:b.so\"", "\"\\\\\"",
    "null", "true", "false", "0", "-1", "1e999999", "-1e999999", "18446744073709551616",
    "-9223372036854775809", "1.0", "[]", "{}", "[\"good\"]", "{\"name\":\"good\"}", "\"\\n\"",
};
#define N_VALUES (sizeof(g_values) / sizeof(g_values[0]))

/* Snippets inserted at random byte positions. */
static const char* const g_snippets[] = {
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\uD83D", "null", "1e308", "-0",
    "99999999999999999999999999999999", "\"plugin\":{}", "\"library\":\"/bin/sh\"",
    "\"name\":\"x\",", "\xff", "\xC0\x80", "/*", "\t\r\n ",
};
#define N_SNIPPETS (sizeof(g_snippets) / sizeof(g_snippets[0]))

/* A valid manifest; `field` (0..5) replaced by `value` when value != NULL:
 * 0 file_format_version, 1 plugin (the whole object), 2 name, 3 library,
 * 4 abi_version, 5 an extra unknown key. */
static void make_manifest(bytes_t* b, const fixture_t* f, int relative, int field,
                          const char* value) {
  b->len = 0;
  char lib[PATH_MAX + 2];
  snprintf(lib, sizeof(lib), "\"%s\"", relative ? "libbp_fake_good.so" : f->good);
  bytes_puts(b, "{\"file_format_version\": ");
  bytes_puts(b, field == 0 && value ? value : "\"1.0.0\"");
  bytes_puts(b, ", \"plugin\": ");
  if (field == 1 && value) {
    bytes_puts(b, value);
  } else {
    bytes_puts(b, "{\"name\": ");
    bytes_puts(b, field == 2 && value ? value : "\"good\"");
    bytes_puts(b, ", \"library\": ");
    bytes_puts(b, field == 3 && value ? value : lib);
    bytes_puts(b, ", \"abi_version\": ");
    bytes_puts(b, field == 4 && value ? value : "\"1.0\"");
    bytes_puts(b, "}");
  }
  if (field == 5 && value) {
    bytes_puts(b, ", \"x_extra\": ");
    bytes_puts(b, value);
  }
  bytes_puts(b, "}\n");
}

/* One random mutation of `b` in place. */
static void mutate(bytes_t* b) {
  size_t pos = b->len ? rng_below(b->len + 1) : 0;
  switch (rng_below(10)) {
    case 0: /* flip one bit */
      if (b->len) b->data[rng_below(b->len)] ^= (char)(1u << rng_below(8));
      break;
    case 1: /* set one byte (NUL included) */
      if (b->len) b->data[rng_below(b->len)] = (char)rng_below(256);
      break;
    case 2: /* truncate */
      b->len = pos;
      break;
    case 3: { /* insert a snippet */
      const char* s = g_snippets[rng_below(N_SNIPPETS)];
      bytes_insert(b, pos, s, strlen(s));
      break;
    }
    case 4: { /* insert a field value */
      const char* v = g_values[rng_below(N_VALUES)];
      bytes_insert(b, pos, v, strlen(v));
      break;
    }
    case 5: { /* deep nesting */
      bytes_t n = {0};
      size_t depth = 1 + rng_below(4000);
      int brace = (int)rng_below(2);
      for (size_t i = 0; i < depth; ++i) bytes_puts(&n, brace ? "{\"a\":" : "[");
      if (rng_below(2))
        for (size_t i = 0; i < depth; ++i) bytes_puts(&n, brace ? "}" : "]");
      bytes_insert(b, pos, n.data, n.len);
      free(n.data);
      break;
    }
    case 6: { /* a very long string (sometimes past the manifest size limit) */
      bytes_t n = {0};
      bytes_puts(&n, "\"");
      size_t len = rng_below(2) ? 1000 + rng_below(5000) : 60000 + rng_below(10000);
      bytes_repeat(&n, rng_below(2) ? "a" : "../", len / (rng_below(2) + 1));
      bytes_puts(&n, "\"");
      bytes_insert(b, pos, n.data, n.len);
      free(n.data);
      break;
    }
    case 7: { /* a NUL byte */
      char nul = '\0';
      bytes_insert(b, pos, &nul, 1);
      break;
    }
    case 8: /* delete a range */
      if (b->len > pos) {
        size_t n = 1 + rng_below(b->len - pos);
        memmove(b->data + pos, b->data + pos + n, b->len - pos - n);
        b->len -= n;
      }
      break;
    default: { /* duplicate a range */
      if (b->len > pos) {
        size_t n = 1 + rng_below(b->len - pos < 64 ? b->len - pos : 64);
        char tmp[64];
        memcpy(tmp, b->data + pos, n);
        bytes_insert(b, rng_below(b->len + 1), tmp, n);
      }
      break;
    }
  }
}

/* Case `i`: a seed (possibly with one field replaced) plus 0..4 mutations. */
static void make_case(bytes_t* b, const fixture_t* f, uint32_t i) {
  g_rng = UINT64_C(0x9E3779B97F4A7C15) ^ ((uint64_t)i * UINT64_C(0x100000001B3)) ^ 1;
  (void)rng_next();
  int field = (int)rng_below(8) - 1; /* -1 or 6: no replacement */
  const char* value = field >= 0 && field <= 5 ? g_values[rng_below(N_VALUES)] : NULL;
  make_manifest(b, f, (int)rng_below(2), field, value);
  size_t mutations = value && rng_below(2) ? 0 : rng_below(5);
  for (size_t m = 0; m < mutations; ++m) mutate(b);
}

/* ---- checks ------------------------------------------------------------- */

/* Messages quote manifest text escaped: no control characters. */
static void check_message(const char* what, const char* message) {
  for (const unsigned char* p = (const unsigned char*)message; *p; ++p)
    if (*p < 0x20 || *p == 0x7f) fail_msg("%s has control character 0x%02x", what, *p);
  assert_true(strlen(message) < 1024);
}

static void check_record(const bp_plugin_t* plugin) {
  bp_plugin_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  assert_int_equal(bp_plugin_get_info(plugin, &info), BP_OK);
  assert_non_null(info.name);
  assert_non_null(info.path);
  assert_non_null(info.reason);
  if (info.state == BP_PLUGIN_LOADED) {
    assert_int_equal(info.reason_code, BP_OK);
    assert_string_equal(info.name, "good");
  } else {
    assert_int_equal(info.state, BP_PLUGIN_SKIPPED);
    assert_int_not_equal(info.reason_code, BP_OK);
    if (info.reason[0] == '\0') fail_msg("skipped plugin '%s' has no reason", info.name);
    check_message("reason", info.reason);
  }
}

/* Registers the manifest at `path` on a bare context. */
static void load_registered(const char* path, uint32_t i, uint32_t* loaded) {
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  bp_status_t st = bp_context_register_plugin(ctx, path, &plugin);
  if (st == BP_OK) {
    if (!plugin) fail_msg("case %u: OK without a plugin", i);
    check_record(plugin);
    ++*loaded;
  } else {
    if (bp_status_message()[0] == '\0')
      fail_msg("case %u: %s with an empty message", i, bp_status_name(st));
    check_message("message", bp_status_message());
    if (plugin) check_record(plugin);
  }
  bp_context_release(ctx);
}

/* Discovery over the temp folder: creation succeeds (no plugin is
 * selected), and every record is loaded or skipped with a reason. */
static void load_discovered(const fixture_t* f, uint32_t i) {
  setenv("BACKPLANE_PLUGIN_PATH", f->dir, 1);
  /* The plugins beside the library are someone else's; keep them out. */
  setenv("BACKPLANE_DISABLE", "cpu,cuda,mpi,opencl,template,vulkan", 1);
  bp_context_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  bp_context_t* ctx = NULL;
  bp_status_t st = bp_context_create(&o, &ctx);
  if (st != BP_OK) fail_msg("case %u: discovery failed: %s", i, bp_status_message());
  for (uint32_t k = 0; k < bp_context_plugin_count(ctx); ++k) {
    bp_plugin_t* plugin = NULL;
    assert_int_equal(bp_context_plugin(ctx, k, &plugin), BP_OK);
    check_record(plugin);
  }
  bp_context_release(ctx);
  unsetenv("BACKPLANE_PLUGIN_PATH");
  unsetenv("BACKPLANE_DISABLE");
}

static uint32_t iterations(uint32_t full) {
  return getenv("BP_UNDER_VALGRIND") ? full / 10 : full;
}

/* ---- tests -------------------------------------------------------------- */

/* The unmutated seeds load: the harness itself is sound. */
static void test_seeds_load(void** state) {
  fixture_t* f = *state;
  bytes_t b = {0};
  for (int relative = 0; relative < 2; ++relative) {
    make_manifest(&b, f, relative, -1, NULL);
    write_bytes(f->case_path, &b);
    uint32_t loaded = 0;
    load_registered(f->case_path, 0, &loaded);
    assert_int_equal(loaded, 1);
  }
  free(b.data);
}

/* Every single-field replacement, unmutated: each one's outcome is a status
 * and message (or, for the harmless ones, a loaded plugin). */
static void test_field_replacements(void** state) {
  fixture_t* f = *state;
  bytes_t b = {0};
  uint32_t loaded = 0, n = 0;
  for (int field = 0; field <= 5; ++field) {
    for (size_t v = 0; v < N_VALUES; ++v) {
      make_manifest(&b, f, (int)(v & 1), field, g_values[v]);
      write_bytes(f->case_path, &b);
      load_registered(f->case_path, n++, &loaded);
    }
  }
  /* The extra key is ignored whatever it holds, and "1.0" style formats of
   * the right major are accepted: some load, most do not. */
  assert_true(loaded >= N_VALUES);
  assert_true(loaded < n);
  free(b.data);
}

static void test_register_mutated(void** state) {
  fixture_t* f = *state;
  bytes_t b = {0};
  int fds = open_fd_count();
  uint32_t loaded = 0, n = iterations(10000);
  for (uint32_t i = 0; i < n; ++i) {
    make_case(&b, f, i);
    write_bytes(f->case_path, &b);
    load_registered(f->case_path, i, &loaded);
  }
  print_message("%u of %u mutated manifests loaded\n", loaded, n);
  /* The mutations are not all fatal (the harness does reach the loader). */
  assert_true(loaded > 0);
  assert_true(loaded < n);
  assert_int_equal(open_fd_count(), fds);
  free(b.data);
}

/* Discovery: three mutated manifests in the folder at a time (duplicates,
 * one bad among good ones). */
static void test_discover_mutated(void** state) {
  fixture_t* f = *state;
  bytes_t b = {0};
  int fds = open_fd_count();
  uint32_t n = iterations(1000);
  for (uint32_t i = 0; i < n; ++i) {
    clear_dir(f->dir);
    for (uint32_t j = 0; j < 3; ++j) {
      char path[PATH_MAX];
      snprintf(path, sizeof(path), "%s/m%u.json", f->dir, j);
      make_case(&b, f, 100000 + 3 * i + j);
      write_bytes(path, &b);
    }
    load_discovered(f, i);
  }
  clear_dir(f->dir);
  assert_int_equal(open_fd_count(), fds);
  free(b.data);
}

/* Exact outcomes of a few sharp cases: strict abi_version, nothing after
 * the JSON value, no NUL bytes, escaped text in messages. */
static void test_exact_outcomes(void** state) {
  fixture_t* f = *state;
  static const struct {
    int field;
    const char* value;
    bp_status_t code;
    const char* needle;
  } cases[] = {
      {4, "\"1.-5\"", BP_INVALID_ARGUMENT, "abi_version '1.-5'"},
      {4, "\"1. 0\"", BP_INVALID_ARGUMENT, "abi_version '1. 0'"},
      {4, "\"1.+0\"", BP_INVALID_ARGUMENT, "abi_version '1.+0'"},
      {4, "\"1.0000\"", BP_INVALID_ARGUMENT, "abi_version '1.0000'"},
      {4, "\"2.0\"", BP_FAILED_PRECONDITION, "is for ABI 2.0"},
      {4, "\"1.7\"", BP_OK, ""},
      {2, "\"a\\nb\"", BP_INVALID_ARGUMENT, "backend name 'a\\x0ab'"},
      {3, "\"x\\ny.so\"", BP_INVALID_ARGUMENT, "'x\\x0ay.so' is not a usable path"},
      {3, "\"/bin/sh\"", BP_FAILED_PRECONDITION, "dlopen failed"},
      {3, "\"../../x.so\"", BP_NOT_FOUND, "does not exist"},
      {5, "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]", BP_OK, ""},
  };
  bytes_t b = {0};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    make_manifest(&b, f, 0, cases[i].field, cases[i].value);
    write_bytes(f->case_path, &b);
    bp_context_t* ctx = bp_test_context_bare();
    bp_status_t st = bp_context_register_plugin(ctx, f->case_path, NULL);
    if (st != cases[i].code || !strstr(bp_status_message(), cases[i].needle))
      fail_msg("case %zu: got %s '%s', expected %s with '%s'", i, bp_status_name(st),
               bp_status_message(), bp_status_name(cases[i].code), cases[i].needle);
    bp_context_release(ctx);
  }
  /* Trailing garbage, and a NUL byte that would hide it from a C string
   * parser, make the file not JSON. */
  static const char* const tails[] = {"}}", "xyz", "{}"};
  for (int nul = 0; nul < 2; ++nul) {
    for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); ++i) {
      make_manifest(&b, f, 0, -1, NULL);
      if (nul) bytes_append(&b, "", 1);
      bytes_puts(&b, tails[i]);
      write_bytes(f->case_path, &b);
      bp_context_t* ctx = bp_test_context_bare();
      bp_status_t st = bp_context_register_plugin(ctx, f->case_path, NULL);
      assert_int_equal(st, BP_INVALID_ARGUMENT);
      if (!strstr(bp_status_message(), nul ? "NUL byte" : "not valid JSON"))
        fail_msg("tail '%s': '%s'", tails[i], bp_status_message());
      bp_context_release(ctx);
    }
  }
  free(b.data);
}

/* Manifest files that are not regular files, or not there at all. */
static void test_odd_files(void** state) {
  fixture_t* f = *state;
  uint32_t loaded = 0;
  char path[PATH_MAX];
  /* A folder named like a manifest. */
  snprintf(path, sizeof(path), "%s/dir.json", f->dir);
  assert_int_equal(mkdir(path, 0700), 0);
  load_registered(path, 0, &loaded);
  load_discovered(f, 0);
  rmdir(path);
  /* A FIFO named like a manifest: refused, never opened for a blocking read. */
  snprintf(path, sizeof(path), "%s/fifo.json", f->dir);
  assert_int_equal(mkfifo(path, 0600), 0);
  bp_context_t* ctx = bp_test_context_bare();
  assert_int_equal(bp_context_register_plugin(ctx, path, NULL), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_status_message(), "not a regular file"));
  bp_context_release(ctx);
  load_discovered(f, 1);
  unlink(path);
  /* A missing manifest; an empty one; a dangling link. */
  snprintf(path, sizeof(path), "%s/missing.json", f->dir);
  load_registered(path, 1, &loaded);
  bytes_t empty = {0};
  write_bytes(f->case_path, &empty);
  load_registered(f->case_path, 2, &loaded);
  snprintf(path, sizeof(path), "%s/dangling.json", f->dir);
  assert_int_equal(symlink("/nonexistent/target.json", path), 0);
  load_registered(path, 3, &loaded);
  load_discovered(f, 3);
  unlink(path);
  assert_int_equal(loaded, 0);
}

/* After all that, a context still loads the good plugin normally. */
static void test_still_works(void** state) {
  (void)state;
  char path[PATH_MAX];
  snprintf(path, sizeof(path), "%s/libbp_fake_good.so", getenv("BACKPLANE_TEST_FAKE_DIR"));
  bp_context_t* ctx = bp_test_context_bare();
  bp_plugin_t* plugin = NULL;
  assert_int_equal(bp_context_register_plugin(ctx, path, &plugin), BP_OK);
  assert_non_null(plugin);
  assert_int_equal(bp_context_device_count(ctx), 2);
  bp_device_t* dev = NULL;
  assert_int_equal(bp_context_find_device(ctx, "good:1", &dev), BP_OK);
  bp_buffer_t* buf = NULL;
  assert_int_equal(bp_buffer_allocate(dev, 0, 64, &buf), BP_OK);
  assert_int_equal(bp_buffer_size(buf), 64);
  bp_buffer_release(buf);
  bp_context_release(ctx);
}

int main(void) {
  /* Thousands of skipped plugins would each log a warning. */
  bp_log_set_level(BP_LOG_ERROR);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_seeds_load, setup, teardown),
      cmocka_unit_test_setup_teardown(test_field_replacements, setup, teardown),
      cmocka_unit_test_setup_teardown(test_register_mutated, setup, teardown),
      cmocka_unit_test_setup_teardown(test_discover_mutated, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exact_outcomes, setup, teardown),
      cmocka_unit_test_setup_teardown(test_odd_files, setup, teardown),
      cmocka_unit_test(test_still_works),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
