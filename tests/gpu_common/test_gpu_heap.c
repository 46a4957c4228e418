/* Tests of plugins/gpu_common's suballocator and event pool (bp_gpu_heap.h)
 * over fake callbacks: blocks are host allocations the test counts (and
 * can refuse), events are counted tokens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "bp_gpu_heap.h"
#include "bp_kit.h"

typedef struct fake {
  int live, made, fail;
  uint64_t sizes[64]; /* size of each block made, in order */
} fake_t;

static bp_status_t fake_alloc(void* ctx, uint64_t size, void** out) {
  fake_t* f = ctx;
  if (f->fail) return BP_KIT_ERROR(BP_RESOURCE_EXHAUSTED, "fake: no device memory");
  *out = malloc(1);
  if (f->made < 64) f->sizes[f->made] = size;
  f->made++;
  f->live++;
  return BP_OK;
}
static void fake_free(void* ctx, void* block) {
  fake_t* f = ctx;
  f->live--;
  free(block);
}
static const bp_gpu_heap_ops_t k_ops = {fake_alloc, fake_free};

static bp_gpu_heap_t* heap_of(fake_t* f, uint64_t block, uint64_t dedicated, uint64_t align, uint64_t budget) {
  bp_gpu_heap_config_t c = {block, dedicated, align, budget};
  bp_gpu_heap_t* h = NULL;
  assert_int_equal(bp_gpu_heap_create(&c, &k_ops, f, &h), BP_OK);
  return h;
}

static bp_gpu_heap_stats_t stats(bp_gpu_heap_t* h) {
  bp_gpu_heap_stats_t s;
  bp_gpu_heap_stats(h, &s);
  return s;
}

/* Odd sizes: every offset is a multiple of the alignment, no two
 * allocations overlap, all come from one block. */
static void test_alignment(void** state) {
  (void)state;
  fake_t f = {0};
  bp_gpu_heap_t* h = heap_of(&f, 4096, 0, 256, 0);
  bp_gpu_alloc_t a[8];
  for (int i = 0; i < 8; i++) {
    assert_int_equal(bp_gpu_heap_alloc(h, (uint64_t)(1 + 37 * i), &a[i]), BP_OK);
    assert_int_equal(a[i].offset % 256, 0);
    assert_ptr_equal(a[i].block, a[0].block);
    for (int j = 0; j < i; j++)
      assert_true(a[i].offset + a[i].size <= a[j].offset || a[j].offset + a[j].size <= a[i].offset);
  }
  assert_int_equal(f.made, 1);
  assert_int_equal(stats(h).used_bytes, 8 + 37 * 28);
  for (int i = 0; i < 8; i++) assert_int_equal(bp_gpu_heap_free(h, &a[i]), BP_OK);
  assert_int_equal(stats(h).used_bytes, 0);
  bp_gpu_heap_destroy(h);
  assert_int_equal(f.live, 0);
  bp_gpu_heap_config_t bad = {1000, 0, 48, 0}; /* alignment not a power of two */
  assert_int_equal(bp_gpu_heap_create(&bad, &k_ops, &f, &h), BP_INVALID_ARGUMENT);
}

/* Holes of 300, 100 and 200 bytes: a 90-byte request takes the 100-byte
 * hole (best fit), not the first or the largest. */
static void test_best_fit(void** state) {
  (void)state;
  fake_t f = {0};
  bp_gpu_heap_t* h = heap_of(&f, 1024, 0, 1, 0);
  const uint64_t sizes[6] = {300, 10, 100, 10, 200, 10};
  bp_gpu_alloc_t a[6], x;
  for (int i = 0; i < 6; i++) assert_int_equal(bp_gpu_heap_alloc(h, sizes[i], &a[i]), BP_OK);
  for (int i = 0; i < 6; i += 2) assert_int_equal(bp_gpu_heap_free(h, &a[i]), BP_OK);
  assert_int_equal(bp_gpu_heap_alloc(h, 90, &x), BP_OK);
  assert_int_equal(x.offset, a[2].offset);
  bp_gpu_heap_destroy(h);
  assert_int_equal(f.live, 0);
}

/* Fragmentation and coalescing: freeing every other allocation leaves one
 * free range per hole (plus the tail); freeing the rest merges everything
 * back into one range of the whole block. */
static void test_coalescing(void** state) {
  (void)state;
  fake_t f = {0};
  bp_gpu_heap_t* h = heap_of(&f, 1024, 0, 64, 0);
  bp_gpu_alloc_t a[10];
  for (int i = 0; i < 10; i++) assert_int_equal(bp_gpu_heap_alloc(h, 64, &a[i]), BP_OK);
  assert_int_equal(stats(h).free_ranges, 1); /* the tail */
  for (int i = 0; i < 10; i += 2) assert_int_equal(bp_gpu_heap_free(h, &a[i]), BP_OK);
  assert_int_equal(stats(h).free_ranges, 6);
  assert_int_equal(stats(h).largest_free, 1024 - 640);
  bp_gpu_alloc_t big;
  assert_int_equal(bp_gpu_heap_alloc(h, 512, &big), BP_OK); /* no hole holds it: a new block */
  assert_int_equal(f.made, 2);
  assert_int_equal(bp_gpu_heap_free(h, &big), BP_OK);
  for (int i = 1; i < 10; i += 2) assert_int_equal(bp_gpu_heap_free(h, &a[i]), BP_OK);
  bp_gpu_heap_stats_t s = stats(h);
  assert_int_equal(s.free_ranges, 1);
  assert_int_equal(s.largest_free, 1024);
  assert_int_equal(s.blocks, 1); /* one empty block kept, the other given back */
  assert_int_equal(f.live, 1);
  bp_gpu_heap_destroy(h);
  assert_int_equal(f.live, 0);
}

/* The budget: full blocks until the budget, then a block just big enough,
 * then RESOURCE_EXHAUSTED naming the sizes; a failing block allocation
 * passes its status through. */
static void test_exhaustion(void** state) {
  (void)state;
  fake_t f = {0};
  bp_gpu_heap_t* h = heap_of(&f, 1000, 0, 8, 2400);
  bp_gpu_alloc_t a, b, c, d;
  assert_int_equal(bp_gpu_heap_alloc(h, 1000, &a), BP_OK);
  assert_int_equal(bp_gpu_heap_alloc(h, 1000, &b), BP_OK);
  assert_int_equal(bp_gpu_heap_alloc(h, 300, &c), BP_OK); /* 400 left: a 304-byte block */
  assert_int_equal(f.sizes[2], 304);
  assert_int_equal(bp_gpu_heap_alloc(h, 200, &d), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(bp_plugin_last_error(), "200 bytes requested"));
  assert_non_null(strstr(bp_plugin_last_error(), "2400-byte budget"));
  assert_null(d.block);
  assert_int_equal(bp_gpu_heap_free(h, &c), BP_OK);
  f.fail = 1;
  assert_int_equal(bp_gpu_heap_alloc(h, 10, &d), BP_OK); /* the kept empty block serves it */
  assert_int_equal(bp_gpu_heap_free(h, &d), BP_OK);
  assert_int_equal(bp_gpu_heap_free(h, &a), BP_OK);
  assert_int_equal(bp_gpu_heap_free(h, &b), BP_OK);
  bp_gpu_heap_destroy(h);
  h = heap_of(&f, 1000, 0, 8, 0);
  assert_int_equal(bp_gpu_heap_alloc(h, 10, &d), BP_RESOURCE_EXHAUSTED);
  assert_non_null(strstr(bp_plugin_last_error(), "fake: no device memory"));
  bp_gpu_heap_destroy(h);
  assert_int_equal(f.live, 0);
}

/* A double free, a range of another heap and a wrong dedicated range are
 * INVALID_ARGUMENT and change nothing. */
static void test_double_free(void** state) {
  (void)state;
  fake_t f = {0};
  bp_gpu_heap_t* h = heap_of(&f, 1024, 512, 16, 0);
  bp_gpu_alloc_t a, b, big;
  assert_int_equal(bp_gpu_heap_alloc(h, 100, &a), BP_OK);
  assert_int_equal(bp_gpu_heap_alloc(h, 100, &b), BP_OK);
  assert_int_equal(bp_gpu_heap_alloc(h, 600, &big), BP_OK); /* dedicated */
  assert_int_equal(f.made, 2);
  assert_int_equal(f.sizes[1], 608);
  assert_int_equal(bp_gpu_heap_free(h, &a), BP_OK);
  bp_gpu_heap_stats_t before = stats(h);
  assert_int_equal(bp_gpu_heap_free(h, &a), BP_INVALID_ARGUMENT);
  assert_non_null(strstr(bp_plugin_last_error(), "double free"));
  bp_gpu_alloc_t foreign = {&f, 0, 100};
  assert_int_equal(bp_gpu_heap_free(h, &foreign), BP_INVALID_ARGUMENT);
  bp_gpu_alloc_t part = big;
  part.size = 100;
  assert_int_equal(bp_gpu_heap_free(h, &part), BP_INVALID_ARGUMENT);
  bp_gpu_heap_stats_t after = stats(h);
  assert_memory_equal(&before, &after, sizeof before);
  assert_int_equal(bp_gpu_heap_free(h, &big), BP_OK);
  assert_int_equal(f.live, 1);
  assert_int_equal(bp_gpu_heap_free(h, &big), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_gpu_heap_free(h, &b), BP_OK);
  /* b again: inside the free range its neighbours merged into */
  assert_int_equal(bp_gpu_heap_free(h, &b), BP_INVALID_ARGUMENT);
  assert_int_equal(stats(h).free_ranges, 1);
  bp_gpu_heap_destroy(h);
  assert_int_equal(f.live, 0);
}

typedef struct fake_events {
  int live, made;
} fake_events_t;
static bp_status_t ev_create(void* ctx, void** out) {
  fake_events_t* f = ctx;
  *out = malloc(1);
  f->live++;
  f->made++;
  return BP_OK;
}
static void ev_destroy(void* ctx, void* e) {
  fake_events_t* f = ctx;
  f->live--;
  free(e);
}

/* Events are recycled: a put then get returns the same event without a
 * new one; past max_cached a put destroys; a double put is refused;
 * destroying the pool destroys what it holds. */
static void test_event_pool(void** state) {
  (void)state;
  fake_events_t f = {0};
  const bp_gpu_event_ops_t ops = {ev_create, ev_destroy};
  bp_gpu_event_pool_t* p = NULL;
  assert_int_equal(bp_gpu_event_pool_create(&ops, &f, 2, &p), BP_OK);
  void *a, *b, *c, *x;
  assert_int_equal(bp_gpu_event_get(p, &a), BP_OK);
  assert_int_equal(bp_gpu_event_put(p, a), BP_OK);
  assert_int_equal(bp_gpu_event_get(p, &x), BP_OK);
  assert_ptr_equal(x, a);
  assert_int_equal(f.made, 1);
  assert_int_equal(bp_gpu_event_get(p, &b), BP_OK);
  assert_int_equal(bp_gpu_event_get(p, &c), BP_OK);
  assert_int_equal(bp_gpu_event_put(p, a), BP_OK);
  assert_int_equal(bp_gpu_event_put(p, a), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_gpu_event_put(p, b), BP_OK);
  assert_int_equal(bp_gpu_event_put(p, c), BP_OK); /* over the limit: destroyed */
  uint64_t made;
  uint32_t cached;
  bp_gpu_event_pool_counts(p, &made, &cached);
  assert_int_equal(made, 3);
  assert_int_equal(cached, 2);
  assert_int_equal(f.live, 2);
  bp_gpu_event_pool_destroy(p);
  assert_int_equal(f.live, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_alignment),  cmocka_unit_test(test_best_fit),    cmocka_unit_test(test_coalescing),
      cmocka_unit_test(test_exhaustion), cmocka_unit_test(test_double_free), cmocka_unit_test(test_event_pool),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
