/* Unit tests of the plugin kit's stream queues and events (plugins/kit),
 * linked directly: order, ring wrap-around, by-value op copies, sticky
 * errors, events across streams, elapsed time, copies and fills, draining
 * on destroy, waiters woken at (and only after) their own command. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bp_kit.h"
#include "kit_test.h"

static int g_dummy_device;
#define DEV ((bpp_device_t)&g_dummy_device)

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- the executor: records what it ran; relu fails ----------------------- */
typedef struct seen {
  uint32_t op, num_inputs, list_count;
  int64_t size0, last_size0;
  double alpha;
} seen_t;
static seen_t g_seen[16];
static atomic_int g_nseen;

static bp_status_t exec(bpp_device_t device, const bp_op_call_t* call) {
  /* No cmocka asserts here: this runs on the stream worker thread. */
  if (device != DEV) return bp_kit_error(BP_INTERNAL, "exec got another device");
  if (call->op_id == BP_OP_relu) return bp_kit_error(BP_INTERNAL, "boom in relu");
  int k = atomic_fetch_add(&g_nseen, 1);
  if (k >= 16) return BP_OK;
  g_seen[k].op = call->op_id;
  g_seen[k].num_inputs = call->num_inputs;
  g_seen[k].size0 = call->inputs[0]->sizes[0];
  g_seen[k].last_size0 = call->inputs[call->num_inputs - 1]->sizes[0];
  g_seen[k].list_count = call->list_count;
  if (call->op_id == BP_OP_add)
    g_seen[k].alpha = bp_kit_scalar_f64(&((const bp_binary_attrs_t*)call->attrs)->alpha, 1.0);
  return BP_OK;
}
static const bp_kit_queue_t k_queue = {.exec = exec};

/* ---- host functions --------------------------------------------------------- */
static atomic_int g_gate_open;
static bp_status_t gate(void* user) {
  (void)user;
  while (!atomic_load(&g_gate_open)) sleep_ms(1);
  return BP_OK;
}
static void* open_gate_later(void* ms) {
  sleep_ms(*(int*)ms);
  atomic_store(&g_gate_open, 1);
  return NULL;
}

static int g_order[1000];
static atomic_int g_norder;
static bp_status_t append(void* user) {
  g_order[atomic_fetch_add(&g_norder, 1)] = (int)(intptr_t)user;
  return BP_OK;
}

static atomic_int g_count;
static bp_status_t count(void* user) {
  (void)user;
  atomic_fetch_add(&g_count, 1);
  return BP_OK;
}
static bp_status_t nap(void* user) {
  sleep_ms((int)(intptr_t)user);
  return BP_OK;
}
static bp_status_t spin_us(void* user) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((t.tv_sec - t0.tv_sec) * 1000000L + (t.tv_nsec - t0.tv_nsec) / 1000 < (long)(intptr_t)user);
  return BP_OK;
}
static bp_status_t refuse(void* user) {
  (void)user;
  return BP_DATA_LOSS;
}

static const bp_stream_create_info_t k_info = {.struct_size = sizeof(bp_stream_create_info_t)};
static const bp_event_create_info_t k_timing = {.struct_size = sizeof(bp_event_create_info_t),
                                                .flags = BP_EVENT_TIMING};

static int setup(void** state) {
  (void)state;
  atomic_store(&g_gate_open, 0);
  atomic_store(&g_nseen, 0);
  atomic_store(&g_norder, 0);
  atomic_store(&g_count, 0);
  return 0;
}

/* ---- tests ------------------------------------------------------------------- */
static void test_order_survives_a_full_ring(void** state) {
  (void)state;
  bpp_stream_t s;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  assert_ptr_equal(bp_kit_stream_device(s), DEV);
  assert_int_equal(bp_kit_stream_enqueue_host_func(s, gate, NULL), BP_OK);
  /* 1000 commands behind a closed gate: the producer blocks on the full
   * ring until the gate opens. */
  pthread_t opener;
  int ms = 30;
  pthread_create(&opener, NULL, open_gate_later, &ms);
  for (int k = 0; k < 1000; k++)
    assert_int_equal(bp_kit_stream_enqueue_host_func(s, append, (void*)(intptr_t)k), BP_OK);
  assert_int_equal(bp_kit_stream_synchronize(s), BP_OK);
  pthread_join(opener, NULL);
  assert_int_equal(atomic_load(&g_norder), 1000);
  for (int k = 0; k < 1000; k++) assert_int_equal(g_order[k], k);
  assert_int_equal(bp_kit_stream_query(s), BP_OK);
  bp_kit_stream_destroy(s);
}

static void test_op_calls_are_copied_by_value(void** state) {
  (void)state;
  bpp_stream_t s;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  bp_kit_stream_enqueue_host_func(s, gate, NULL);
  bp_tensor_desc_t in[10], out;
  for (int i = 0; i < 10; i++) kit_test_desc_f32(&in[i], NULL, 5 + i);
  kit_test_desc_f32(&out, NULL, 5);
  bp_binary_attrs_t attrs = {.struct_size = sizeof attrs,
                             .alpha = {.kind = BP_SCALAR_FLOAT, .v.f = 2.5}};
  const bp_tensor_desc_t* inp[10];
  for (int i = 0; i < 10; i++) inp[i] = &in[i];
  const bp_tensor_desc_t* outp = &out;
  bp_op_call_t add = {.struct_size = sizeof add, .op_id = BP_OP_add, .num_inputs = 2,
                      .num_outputs = 1, .compute_dtype = BP_DTYPE_F32, .inputs = inp,
                      .outputs = &outp, .attrs = &attrs};
  assert_int_equal(bp_kit_stream_enqueue_op(s, &add), BP_OK);
  bp_dim_attrs_t dim = {.struct_size = sizeof dim};
  bp_op_call_t cat = {.struct_size = sizeof cat, .op_id = BP_OP_cat, .num_inputs = 10,
                      .num_outputs = 1, .compute_dtype = BP_DTYPE_F32, .list_count = 10,
                      .inputs = inp, .outputs = &outp,
                      .attrs = &dim}; /* 11 descriptors: past the inline ones */
  assert_int_equal(bp_kit_stream_enqueue_op(s, &cat), BP_OK);
  /* The caller's memory changes before the worker runs: the queue kept copies. */
  for (int i = 0; i < 10; i++) in[i].sizes[0] = 99;
  attrs.alpha.v.f = 0.0;
  atomic_store(&g_gate_open, 1);
  assert_int_equal(bp_kit_stream_synchronize(s), BP_OK);
  assert_int_equal(atomic_load(&g_nseen), 2);
  assert_int_equal(g_seen[0].op, BP_OP_add);
  assert_int_equal(g_seen[0].size0, 5);
  assert_true(g_seen[0].alpha == 2.5);
  assert_int_equal(g_seen[1].op, BP_OP_cat);
  assert_int_equal(g_seen[1].num_inputs, 10);
  assert_int_equal(g_seen[1].last_size0, 14);
  assert_int_equal(g_seen[1].list_count, 10); /* the list's place travels with the copy */
  bp_kit_stream_destroy(s);
}

static void test_errors_are_sticky_until_reported(void** state) {
  (void)state;
  bpp_stream_t s;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  bp_tensor_desc_t x;
  kit_test_desc_f32(&x, NULL, 4);
  bp_op_call_t relu = {.struct_size = sizeof relu, .op_id = BP_OP_relu, .num_inputs = 1,
                       .num_outputs = 1, .compute_dtype = BP_DTYPE_F32, .inputs = (const bp_tensor_desc_t* const[]){&x},
                       .outputs = (const bp_tensor_desc_t* const[]){&x}};
  assert_int_equal(bp_kit_stream_enqueue_op(s, &relu), BP_OK); /* fails on the worker */
  assert_int_equal(bp_kit_stream_enqueue_op(s, &relu), BP_OK); /* a second error is dropped */
  bp_kit_stream_enqueue_host_func(s, count, NULL);
  assert_int_equal(bp_kit_stream_synchronize(s), BP_INTERNAL);
  assert_non_null(strstr(bp_plugin_last_error(), "boom in relu"));
  assert_int_equal(atomic_load(&g_count), 1); /* later work still ran */
  assert_int_equal(bp_kit_stream_synchronize(s), BP_OK); /* reported once, then cleared */
  assert_int_equal(bp_kit_stream_enqueue_op(s, &relu), BP_OK);
  bp_status_t st;
  while ((st = bp_kit_stream_query(s)) == BP_NOT_READY) sleep_ms(1);
  assert_int_equal(st, BP_INTERNAL);
  assert_int_equal(bp_kit_stream_query(s), BP_OK); /* the query above took it */
  bp_kit_stream_destroy(s);
}

/* A host function that fails poisons the stream once; later work runs. */
static void test_failed_host_func_poisons(void** state) {
  (void)state;
  bpp_stream_t s;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  assert_int_equal(bp_kit_stream_enqueue_host_func(s, refuse, NULL), BP_OK);
  assert_int_equal(bp_kit_stream_enqueue_host_func(s, count, NULL), BP_OK);
  assert_int_equal(bp_kit_stream_synchronize(s), BP_DATA_LOSS);
  assert_non_null(strstr(bp_plugin_last_error(), "host function failed"));
  assert_int_equal(atomic_load(&g_count), 1);
  assert_int_equal(bp_kit_stream_synchronize(s), BP_OK);
  bp_kit_stream_destroy(s);
}

/* Create-info: what a host queue can honour it takes, the rest it refuses. */
static void test_create_info(void** state) {
  (void)state;
  bpp_stream_t s = NULL;
  bp_stream_create_info_t si = {.struct_size = sizeof si, .queue = BP_QUEUE_COPY, .priority = 5};
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &si, &s), BP_OK);
  bp_kit_stream_destroy(s);
  si.queue = 3;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &si, &s), BP_INVALID_ARGUMENT);
  si.queue = BP_QUEUE_COMPUTE;
  si.flags = 1;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &si, &s), BP_INVALID_ARGUMENT);
  assert_null(s);
  bpp_event_t e = NULL;
  bp_event_create_info_t ei = {.struct_size = sizeof ei, .flags = BP_EVENT_EXPORTABLE};
  assert_int_equal(bp_kit_event_create(DEV, &ei, &e), BP_UNIMPLEMENTED);
  assert_non_null(strstr(bp_plugin_last_error(), "exportable"));
  ei.flags = 1u << 7;
  assert_int_equal(bp_kit_event_create(DEV, &ei, &e), BP_INVALID_ARGUMENT);
  assert_null(e);
}

static void test_events_order_two_streams(void** state) {
  (void)state;
  bpp_stream_t a, b;
  bpp_event_t ev;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &a), BP_OK);
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &b), BP_OK);
  assert_int_equal(bp_kit_event_create(DEV, &k_timing, &ev), BP_OK);
  assert_int_equal(bp_kit_event_query(ev), BP_OK); /* never recorded: complete */
  bp_kit_stream_enqueue_host_func(a, gate, NULL);
  bp_kit_stream_enqueue_host_func(a, append, (void*)(intptr_t)1);
  assert_int_equal(bp_kit_event_record(ev, a), BP_OK);
  assert_int_equal(bp_kit_stream_wait_event(b, ev), BP_OK);
  bp_kit_stream_enqueue_host_func(b, append, (void*)(intptr_t)2);
  sleep_ms(20);
  assert_int_equal(bp_kit_event_query(ev), BP_NOT_READY);
  assert_int_equal(atomic_load(&g_norder), 0); /* b waits behind a's gate */
  atomic_store(&g_gate_open, 1);
  assert_int_equal(bp_kit_stream_synchronize(b), BP_OK);
  assert_int_equal(atomic_load(&g_norder), 2);
  assert_int_equal(g_order[0], 1);
  assert_int_equal(g_order[1], 2);
  assert_int_equal(bp_kit_event_synchronize(ev), BP_OK);
  bp_kit_event_destroy(ev);
  bp_kit_stream_destroy(a);
  bp_kit_stream_destroy(b);
}

static void test_event_elapsed_and_errors(void** state) {
  (void)state;
  bpp_stream_t s;
  bpp_event_t e0, e1, never;
  uint64_t ns = 0;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  bp_kit_event_create(DEV, &k_timing, &e0);
  bp_kit_event_create(DEV, &k_timing, &e1);
  bp_kit_event_create(DEV, &k_timing, &never);
  bp_kit_event_record(e0, s);
  bp_kit_stream_enqueue_host_func(s, nap, (void*)(intptr_t)20);
  bp_kit_event_record(e1, s);
  assert_int_equal(bp_kit_event_synchronize(e1), BP_OK);
  assert_int_equal(bp_kit_event_elapsed_ns(e0, e1, &ns), BP_OK);
  assert_true(ns >= 20000000u);
  assert_int_equal(bp_kit_event_elapsed_ns(e0, never, &ns), BP_FAILED_PRECONDITION);
  /* An event recorded after a failed op carries the error. */
  bp_tensor_desc_t x;
  kit_test_desc_f32(&x, NULL, 1);
  bp_op_call_t relu = {.struct_size = sizeof relu, .op_id = BP_OP_relu, .num_inputs = 1,
                       .num_outputs = 1,
                       .inputs = (const bp_tensor_desc_t* const[]){&x},
                       .outputs = (const bp_tensor_desc_t* const[]){&x}};
  bp_kit_stream_enqueue_op(s, &relu);
  bp_kit_event_record(e1, s);
  assert_int_equal(bp_kit_event_synchronize(e1), BP_INTERNAL);
  assert_non_null(strstr(bp_plugin_last_error(), "boom in relu"));
  assert_int_equal(bp_kit_stream_synchronize(s), BP_INTERNAL);
  bp_kit_event_destroy(e0);
  bp_kit_event_destroy(e1);
  bp_kit_event_destroy(never);
  bp_kit_stream_destroy(s);
}

static void test_copies_and_fills(void** state) {
  (void)state;
  bpp_stream_t s;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  uint32_t a[16], b[16];
  memset(b, 0, sizeof b);
  uint32_t pattern = 0xdeadbeefu;
  assert_int_equal(bp_kit_stream_enqueue_fill(s, a, sizeof a, &pattern, 4), BP_OK);
  assert_int_equal(bp_kit_stream_enqueue_copy(s, b + 1, a, 8 * sizeof(uint32_t)), BP_OK);
  assert_int_equal(bp_kit_stream_synchronize(s), BP_OK);
  for (int i = 0; i < 16; i++) assert_int_equal(a[i], 0xdeadbeefu);
  assert_int_equal(b[0], 0);
  for (int i = 1; i <= 8; i++) assert_int_equal(b[i], 0xdeadbeefu);
  assert_int_equal(b[9], 0);
  assert_int_equal(bp_kit_stream_enqueue_fill(s, a, sizeof a, &pattern, 3), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_kit_stream_enqueue_fill(s, a, 6, &pattern, 4), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_kit_stream_enqueue_copy(s, NULL, a, 4), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_kit_stream_enqueue_host_func(s, NULL, NULL), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_kit_stream_enqueue_host_func(NULL, count, NULL), BP_INVALID_ARGUMENT);
  bp_kit_stream_destroy(s);
  assert_int_equal(bp_kit_stream_create(&k_queue, NULL, &k_info, &s), BP_INVALID_ARGUMENT);
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, NULL, &s), BP_INVALID_ARGUMENT);
  assert_null(s);
}

static void test_destroy_drains_the_queue(void** state) {
  (void)state;
  bpp_stream_t s;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  for (int k = 0; k < 300; k++) bp_kit_stream_enqueue_host_func(s, count, NULL);
  bp_kit_stream_destroy(s);
  assert_int_equal(atomic_load(&g_count), 300);
}

/* A waiter registers its command before it re-reads the tail: thousands of
 * one-command synchronizes, each racing the worker that completes it, must
 * all return (a lost wake-up hangs here; the alarm turns that into a
 * failure). */
static void test_synchronize_never_misses_its_command(void** state) {
  (void)state;
  bpp_stream_t s;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  alarm(120);
  for (int k = 0; k < 20000; k++) {
    /* commands of 0 to 40 us: the waiter's polling (tens of us) ends
     * before, around and after the command's completion */
    assert_int_equal(bp_kit_stream_enqueue_host_func(s, spin_us, (void*)(intptr_t)(k * 7 % 41)), BP_OK);
    assert_int_equal(bp_kit_stream_enqueue_host_func(s, count, NULL), BP_OK);
    assert_int_equal(bp_kit_stream_synchronize(s), BP_OK);
    assert_int_equal(atomic_load(&g_count), k + 1);
  }
  alarm(0);
  bp_kit_stream_destroy(s);
}

typedef struct sync_arg {
  bpp_stream_t s;
  int seen;         /* commands completed when its synchronize returned */
  atomic_int done;  /* its synchronize returned */
} sync_arg_t;
static void* sync_later(void* p) {
  sync_arg_t* a = p;
  if (bp_kit_stream_synchronize(a->s) == BP_OK) a->seen = atomic_load(&g_count);
  atomic_store(&a->done, 1);
  return NULL;
}
/* Holds the stream until the first waiter has returned. */
static bp_status_t await_first(void* p) {
  while (!atomic_load(&((sync_arg_t*)p)->done)) sleep_ms(1);
  return BP_OK;
}

/* Two threads wait for different commands of one stream: each returns once
 * its own command completed, the earlier one while the stream still holds
 * the later commands back (until it returned: a waiter woken only at the
 * end would hang here). */
static void test_two_waiters_each_woken_at_their_command(void** state) {
  (void)state;
  bpp_stream_t s;
  assert_int_equal(bp_kit_stream_create(&k_queue, DEV, &k_info, &s), BP_OK);
  alarm(120);
  assert_int_equal(bp_kit_stream_enqueue_host_func(s, gate, NULL), BP_OK);
  for (int k = 0; k < 50; k++) assert_int_equal(bp_kit_stream_enqueue_host_func(s, count, NULL), BP_OK);
  sync_arg_t first = {s, -1, 0};
  pthread_t t;
  pthread_create(&t, NULL, sync_later, &first);
  sleep_ms(20); /* the first waiter is asleep on command 51 */
  assert_int_equal(bp_kit_stream_enqueue_host_func(s, await_first, &first), BP_OK);
  for (int k = 0; k < 50; k++) assert_int_equal(bp_kit_stream_enqueue_host_func(s, count, NULL), BP_OK);
  pthread_t opener;
  int ms = 20;
  pthread_create(&opener, NULL, open_gate_later, &ms);
  assert_int_equal(bp_kit_stream_synchronize(s), BP_OK);
  assert_int_equal(atomic_load(&g_count), 100);
  pthread_join(t, NULL);
  pthread_join(opener, NULL);
  alarm(0);
  assert_int_equal(first.seen, 50);
  bp_kit_stream_destroy(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_order_survives_a_full_ring, setup),
      cmocka_unit_test_setup(test_op_calls_are_copied_by_value, setup),
      cmocka_unit_test_setup(test_errors_are_sticky_until_reported, setup),
      cmocka_unit_test_setup(test_failed_host_func_poisons, setup),
      cmocka_unit_test_setup(test_create_info, setup),
      cmocka_unit_test_setup(test_events_order_two_streams, setup),
      cmocka_unit_test_setup(test_event_elapsed_and_errors, setup),
      cmocka_unit_test_setup(test_copies_and_fills, setup),
      cmocka_unit_test_setup(test_destroy_drains_the_queue, setup),
      cmocka_unit_test_setup(test_synchronize_never_misses_its_command, setup),
      cmocka_unit_test_setup(test_two_waiters_each_woken_at_their_command, setup),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
