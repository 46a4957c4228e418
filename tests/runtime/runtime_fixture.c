#include "runtime_fixture.h"

#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

static bp_plugin_t* load(bp_context_t* ctx, const char* name) {
  const char* dir = getenv("BACKPLANE_TEST_FAKE_DIR");
  char path[4096];
  bp_plugin_t* plugin = NULL;
  assert_non_null(dir);
  snprintf(path, sizeof(path), "%s/libbp_%s.so", dir, name);
  assert_ok(bp_context_register_plugin(ctx, path, &plugin));
  assert_non_null(plugin);
  return plugin;
}

int fixture_setup(void** state) {
  fixture_t* f = calloc(1, sizeof(*f));
  bp_context_options_t options = {.struct_size = sizeof(options), .flags = BP_CONTEXT_NO_DISCOVERY};
  assert_non_null(f);
  assert_ok(bp_context_create(&options, &f->ctx));
  f->pa = load(f->ctx, "fake_host_a");
  f->pb = load(f->ctx, "fake_host_b");
  assert_ok(bp_plugin_device(f->pa, 0, &f->a0));
  assert_ok(bp_plugin_device(f->pa, 1, &f->a1));
  assert_ok(bp_plugin_device(f->pb, 0, &f->b0));
  assert_ok(bp_plugin_device(f->pb, 1, &f->b1));
  assert_ok(bp_stream_create(f->a0, NULL, &f->sa0));
  assert_ok(bp_stream_create(f->a1, NULL, &f->sa1));
  assert_ok(bp_stream_create(f->b0, NULL, &f->sb0));
  *state = f;
  return 0;
}

static void release_all(fixture_t* f) {
  bp_stream_release(f->sa0);
  bp_stream_release(f->sa1);
  bp_stream_release(f->sb0);
}

int fixture_teardown(void** state) {
  fixture_t* f = *state;
  release_all(f);
  /* Every object holds a context reference: only the fixture's is left, so
   * a test that leaked an object fails here. */
  assert_int_equal(atomic_load(&f->ctx->refcount), 1);
  bp_context_release(f->ctx);
  free(f);
  return 0;
}

int fixture_teardown_keep(void* state) {
  fixture_t* f = state;
  release_all(f);
  bp_context_release(f->ctx);
  free(f);
  return 0;
}

uint64_t fake_used_bytes(bp_device_t* device, uint32_t memory_space) {
  const bp_plugin_vtable_t* vt = bp_plugin_vtable(bp_device_plugin(device));
  uint64_t used = 0, budget = 0;
  assert_int_equal(vt->core->device_memory_usage(device->handle, memory_space, &used, &budget),
                   BP_OK);
  return used;
}
