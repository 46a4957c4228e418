/* The MPI plugin against a fake libmpi (fake_libmpi.c, through
 * BP_MPI_LIBRARY): loading without libmpi or with MPICH, who initialises
 * and finalizes MPI, the dtype and reduction mapping (user ops for f16,
 * bf16 and fp8), MPI error codes, the deadline and abort. No MPI needed. */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "bp_kit.h"
#include "mpi_internal.h"
#include "mpi_test_values.h"

static const bp_plugin_vtable_t* vt;
static void* fake;
static void (*fake_set)(const char*, int);
static int (*fake_get)(const char*);
static void (*fake_fail)(const char*, int);
static void (*fake_last)(bp_mpi_h*, bp_mpi_h*);

typedef struct env {
  bpp_instance_t inst;
  bpp_device_t dev;
  bpp_comm_t comm;
} env_t;

/* A one-rank bootstrap: the process is world rank 0. */
static bp_status_t one_allgather(void* ctx, const void* s, void* r, uint64_t bytes) {
  int copies = ctx ? *(int*)ctx : 1; /* ctx: pretend this many ranks (duplicates) */
  for (int i = 0; i < copies; i++) memcpy((char*)r + i * bytes, s, bytes);
  return BP_OK;
}
static bp_bootstrap_t boot(int nranks, int* copies) {
  bp_bootstrap_t b = {.struct_size = sizeof b, .rank = 0, .nranks = nranks, .ctx = copies,
                      .allgather = one_allgather};
  return b;
}

static bp_status_t open_env(env_t* e, uint64_t timeout_ns) {
  bpp_instance_create_info_t ii = {.struct_size = sizeof ii};
  bp_status_t st = vt->core->instance_create(&ii, &e->inst);
  if (st) return st;
  assert_int_equal(vt->core->device_open(e->inst, 0, &e->dev), BP_OK);
  bp_bootstrap_t b = boot(1, NULL);
  bp_comm_create_info_t ci = {.struct_size = sizeof ci, .timeout_ns = timeout_ns, .bootstrap = &b};
  return vt->comm->comm_create(e->dev, &ci, &e->comm);
}

static void close_env(env_t* e) {
  if (e->comm) vt->comm->comm_destroy(e->comm);
  vt->core->instance_destroy(e->inst);
}

static int reset(void** state) {
  setenv("BP_MPI_LIBRARY", FAKE_MPI_PATH, 1);
  fake_set("reset", 0);
  return 0;
}

/* ---- loading ---------------------------------------------------------------- */
static void test_unavailable_without_libmpi(void** state) {
  setenv("BP_MPI_LIBRARY", "/nonexistent/libmpi.so.40", 1);
  bpp_instance_t inst = NULL;
  bpp_instance_create_info_t ii = {.struct_size = sizeof ii};
  assert_int_equal(vt->core->instance_create(&ii, &inst), BP_UNAVAILABLE);
  assert_null(inst);
  const char* msg = bp_plugin_last_error();
  assert_non_null(strstr(msg, "/nonexistent/libmpi.so.40"));
  assert_non_null(strstr(msg, "No such file")); /* dlerror's text */
}

static void test_mpich_is_refused(void** state) {
  setenv("BP_MPI_LIBRARY", FAKE_MPICH_PATH, 1);
  bpp_instance_t inst = NULL;
  bpp_instance_create_info_t ii = {.struct_size = sizeof ii};
  assert_int_equal(vt->core->instance_create(&ii, &inst), BP_UNAVAILABLE);
  const char* msg = bp_plugin_last_error();
  assert_non_null(strstr(msg, "MPICH"));
  assert_non_null(strstr(msg, "Open MPI"));
}

/* ---- initialisation ownership ------------------------------------------------------ */
static void test_plugin_initialises_and_finalizes_what_it_owns(void** state) {
  env_t e = {0};
  bpp_instance_create_info_t ii = {.struct_size = sizeof ii};
  assert_int_equal(vt->core->instance_create(&ii, &e.inst), BP_OK);
  assert_int_equal(fake_get("init_calls"), 0); /* loading is not starting MPI */
  vt->core->instance_destroy(e.inst);
  assert_int_equal(open_env(&e, 0), BP_OK);
  assert_int_equal(fake_get("init_calls"), 1);
  assert_int_equal(fake_get("requested"), BP_MPI_THREAD_MULTIPLE);
  assert_true(bp_mpi.multiple);
  env_t second = {0};
  assert_int_equal(open_env(&second, 0), BP_OK); /* a second instance: no second init */
  assert_int_equal(fake_get("init_calls"), 1);
  close_env(&second);
  assert_int_equal(fake_get("finalize_calls"), 0); /* the first instance still lives */
  close_env(&e);
  assert_int_equal(fake_get("finalize_calls"), 1);
  assert_int_equal(fake_get("live_comms"), 0);
  /* Finalized: MPI cannot start again in this process. */
  assert_int_equal(open_env(&e, 0), BP_FAILED_PRECONDITION);
  close_env(&e);
}

static void test_application_initialised_mpi_is_left_alone(void** state) {
  fake_set("initialized", 1);
  fake_set("provided", BP_MPI_THREAD_SERIALIZED);
  env_t e = {0};
  assert_int_equal(open_env(&e, 0), BP_OK);
  assert_int_equal(fake_get("init_calls"), 0);
  assert_false(bp_mpi.multiple); /* serialized by the plugin's lock */
  float x[3] = {1, 2, 3};
  bp_tensor_desc_t d = bp_mpi_host_desc(x, BP_DTYPE_F32, 3);
  assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_OK);
  close_env(&e);
  assert_int_equal(fake_get("finalize_calls"), 0);
}

static void test_init_failure_is_reported(void** state) {
  fake_fail("MPI_Init_thread", 16);
  env_t e = {0};
  assert_int_equal(open_env(&e, 0), BP_UNAVAILABLE);
  assert_non_null(strstr(bp_plugin_last_error(), "MPI error 16"));
  close_env(&e);
}

/* ---- dtype and reduction mapping -------------------------------------------------- */
/* On a fake world of 3 ranks holding copies of this one's data. */
static void test_dtypes_and_reductions_map(void** state) {
  fake_set("size", 3);
  env_t e = {0};
  assert_int_equal(open_env(&e, 0), BP_OK);
  char* lib = dlopen(FAKE_MPI_PATH, RTLD_NOW | RTLD_NOLOAD);
  assert_non_null(lib);
  bp_mpi_h type, op;
  /* 5 elements travel in the header record (MPI_Reduce_local), 100 go
   * through MPI_Iallreduce. */
  for (int n = 5; n <= 100; n += 95)
  for (size_t d = 0; d < TEST_DTYPE_COUNT; d++)
    for (uint32_t rop = BP_REDUCE_SUM; rop <= BP_REDUCE_AVG; rop++) {
      uint32_t dt = k_test_dtypes[d];
      unsigned char buf[800], out[800];
      for (int i = 0; i < n; i++) tv_set(dt, buf, i, tv_value(dt, 1, i));
      bp_tensor_desc_t sd = bp_mpi_host_desc(buf, dt, n), rd = bp_mpi_host_desc(out, dt, n);
      bp_status_t st = vt->comm->all_reduce(e.comm, NULL, &sd, &rd, rop, NULL);
      if (st == BP_INTERNAL) continue; /* a predefined type the fake does not reduce */
      assert_int_equal(st, BP_OK);
      fake_last(&type, &op);
      int lowp = dt == BP_DTYPE_F16 || dt == BP_DTYPE_BF16 || bp_dtype_is_fp8(dt);
      bp_mpi_h predefined[] = {dlsym(lib, "ompi_mpi_op_sum"), dlsym(lib, "ompi_mpi_op_prod"),
                               dlsym(lib, "ompi_mpi_op_min"), dlsym(lib, "ompi_mpi_op_max")};
      uint32_t base = rop == BP_REDUCE_AVG ? BP_REDUCE_SUM : rop;
      if (lowp) { /* a user op over a same-size integer type */
        assert_ptr_equal(type, dlsym(lib, bp_dtype_size(dt) == 2 ? "ompi_mpi_uint16_t"
                                                                 : "ompi_mpi_uint8_t"));
        for (int k = 0; k < 4; k++) assert_ptr_not_equal(op, predefined[k]);
      } else {
        assert_ptr_equal(op, predefined[base]);
      }
      if (dt == BP_DTYPE_F32) assert_ptr_equal(type, dlsym(lib, "ompi_mpi_float"));
      /* x op x op x, and AVG = (x + x + x) / 3 */
      for (int i = 0; i < n; i++) {
        double x = tv_value(dt, 1, i), want = x;
        if (rop == BP_REDUCE_SUM) want = 3 * x;
        if (rop == BP_REDUCE_PROD) want = x * x * x;
        if (tv_get(dt, out, i) != want)
          fail_msg("%s %u n=%d [%d]: %g, want %g", bp_dtype_name(dt), rop, n, i, tv_get(dt, out, i), want);
      }
    }
  /* What MPI cannot reduce, refused with the reason. */
  uint8_t b[4] = {0};
  bp_tensor_desc_t bd = bp_mpi_host_desc(b, BP_DTYPE_BOOL, 4);
  assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &bd, &bd, BP_REDUCE_SUM, NULL),
                   BP_UNIMPLEMENTED);
  float c[8] = {0};
  bp_tensor_desc_t cd = bp_mpi_host_desc(c, BP_DTYPE_C64, 4);
  assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &cd, &cd, BP_REDUCE_MAX, NULL),
                   BP_INVALID_ARGUMENT);
  assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &cd, &cd, 9, NULL), BP_INVALID_ARGUMENT);
  dlclose(lib);
  close_env(&e);
}

/* ---- MPI errors ------------------------------------------------------------------ */
static void test_mpi_errors_map_to_statuses(void** state) {
  env_t e = {0};
  assert_int_equal(open_env(&e, 0), BP_OK);
  float x[32] = {1, 2}; /* past the 64 bytes that travel in the header */
  bp_tensor_desc_t d = bp_mpi_host_desc(x, BP_DTYPE_F32, 32);
  static const struct {
    int code;
    bp_status_t want;
  } k[] = {{15, BP_INVALID_ARGUMENT}, {17, BP_RESOURCE_EXHAUSTED}, {16, BP_INTERNAL}};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    fake_fail("MPI_Iallreduce", k[i].code);
    assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), k[i].want);
    char want[32];
    snprintf(want, sizeof want, "fake error %d", k[i].code);
    assert_non_null(strstr(bp_plugin_last_error(), want));
  }
  /* An error found when the request completes (MPI_ERR_IN_STATUS). */
  fake_fail("MPI_Testall", 15);
  assert_int_equal(vt->comm->barrier(e.comm, NULL), BP_INVALID_ARGUMENT);
  /* A failed header exchange fails the call before data moves. */
  fake_fail("MPI_Iallgather", 16);
  assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_INTERNAL);
  assert_non_null(strstr(bp_plugin_last_error(), "header"));
  /* None of these broke the communicator. */
  assert_int_equal(vt->comm->comm_get_async_error(e.comm), BP_OK);
  assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_OK);
  close_env(&e);
}

/* ---- deadline and abort ----------------------------------------------------------- */
static void test_deadline_breaks_the_communicator(void** state) {
  env_t e = {0};
  assert_int_equal(open_env(&e, 50u * 1000000u), BP_OK);
  float x = 1;
  bp_tensor_desc_t d = bp_mpi_host_desc(&x, BP_DTYPE_F32, 1);
  assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL), BP_OK);
  fake_set("hang", 1);
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  assert_int_equal(vt->comm->all_reduce(e.comm, NULL, &d, &d, BP_REDUCE_SUM, NULL),
                   BP_DEADLINE_EXCEEDED);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  assert_true(s >= 0.05 && s < 5.0);
  const char* msg = bp_plugin_last_error();
  assert_non_null(strstr(msg, "all_reduce"));
  assert_non_null(strstr(msg, "call 2"));
  fake_set("hang", 0);
  assert_int_equal(vt->comm->comm_get_async_error(e.comm), BP_DEADLINE_EXCEEDED);
  /* Broken for good, without waiting again. */
  assert_int_equal(vt->comm->barrier(e.comm, NULL), BP_DEADLINE_EXCEEDED);
  close_env(&e);
}

static void* abort_soon(void* comm) {
  struct timespec ts = {0, 30 * 1000000};
  nanosleep(&ts, NULL);
  vt->comm->comm_abort(comm);
  return NULL;
}

static void test_abort_wakes_the_waiting_call(void** state) {
  env_t e = {0};
  assert_int_equal(open_env(&e, 0), BP_OK); /* default deadline: 300 s */
  fake_set("hang", 1);
  pthread_t t;
  pthread_create(&t, NULL, abort_soon, e.comm);
  assert_int_equal(vt->comm->barrier(e.comm, NULL), BP_ABORTED);
  pthread_join(t, NULL);
  fake_set("hang", 0);
  assert_int_equal(vt->comm->comm_get_async_error(e.comm), BP_ABORTED);
  close_env(&e);
}

/* ---- arguments ---------------------------------------------------------------- */
static void test_bad_bootstraps_and_arguments(void** state) {
  env_t e = {0};
  assert_int_equal(open_env(&e, 0), BP_OK);
  bpp_comm_t c = NULL;
  bp_comm_create_info_t ci = {.struct_size = sizeof ci};
  /* No bootstrap: the launcher's world (here a world of one). */
  assert_int_equal(vt->comm->comm_create(e.dev, &ci, &c), BP_OK);
  int32_t wr = -1, ws = 0;
  assert_int_equal(vt->comm->comm_info(c, &wr, &ws), BP_OK);
  assert_int_equal(wr, 0);
  assert_int_equal(ws, 1);
  vt->comm->comm_destroy(c);
  c = NULL;
  int two = 2;
  bp_bootstrap_t b = boot(2, &two); /* both ranks claim world rank 0 */
  ci.bootstrap = &b;
  fake_set("size", 2);
  assert_int_equal(vt->comm->comm_create(e.dev, &ci, &c), BP_UNIMPLEMENTED);
  assert_non_null(strstr(bp_plugin_last_error(), "same MPI process"));
  fake_set("size", 1);
  /* send/recv to self in a group; a peer outside the communicator */
  double out[4] = {1, 2, 3, 4}, in[4] = {0};
  bp_tensor_desc_t od = bp_mpi_host_desc(out, BP_DTYPE_F64, 4), id = bp_mpi_host_desc(in, BP_DTYPE_F64, 4);
  bp_collective_options_t self = {.struct_size = sizeof self, .peer = 0};
  assert_int_equal(vt->comm->group_begin(), BP_OK);
  assert_int_equal(vt->comm->send(e.comm, NULL, &od, &self), BP_OK);
  assert_int_equal(vt->comm->recv(e.comm, NULL, &id, &self), BP_OK);
  assert_int_equal(vt->comm->group_end(), BP_OK);
  assert_true(in[3] == 4.0);
  bp_collective_options_t far = {.struct_size = sizeof far, .peer = 5};
  assert_int_equal(vt->comm->send(e.comm, NULL, &od, &far), BP_INVALID_ARGUMENT);
  assert_int_equal(vt->comm->send(e.comm, NULL, &od, NULL), BP_INVALID_ARGUMENT);
  /* split: NO_COLOR gives NULL; a color gives a communicator */
  bpp_comm_t sub = (bpp_comm_t)&two;
  assert_int_equal(vt->comm->comm_split(e.comm, BP_COMM_SPLIT_NO_COLOR, 0, NULL, &sub), BP_OK);
  assert_null(sub);
  assert_int_equal(vt->comm->comm_split(e.comm, 3, 0, NULL, &sub), BP_OK);
  assert_non_null(sub);
  vt->comm->comm_destroy(sub);
  assert_int_equal(vt->comm->comm_split(e.comm, -7, 0, NULL, &sub), BP_INVALID_ARGUMENT);
  /* registration tokens are checked */
  void* tok = NULL;
  assert_int_equal(vt->comm->comm_register(e.comm, NULL, &tok), BP_INVALID_ARGUMENT);
  int junk = 0;
  assert_int_equal(vt->comm->comm_deregister(e.comm, &junk), BP_INVALID_ARGUMENT);
  close_env(&e);
}

int main(void) {
  vt = bp_mpi_plugin_vtable();
  fake = dlopen(FAKE_MPI_PATH, RTLD_NOW | RTLD_LOCAL);
  if (!fake) {
    fprintf(stderr, "%s\n", dlerror());
    return 1;
  }
  fake_set = (void (*)(const char*, int))dlsym(fake, "fake_mpi_set");
  fake_get = (int (*)(const char*))dlsym(fake, "fake_mpi_get");
  fake_fail = (void (*)(const char*, int))dlsym(fake, "fake_mpi_fail");
  fake_last = (void (*)(bp_mpi_h*, bp_mpi_h*))dlsym(fake, "fake_mpi_last");
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_unavailable_without_libmpi, reset),
      cmocka_unit_test_setup(test_mpich_is_refused, reset),
      cmocka_unit_test_setup(test_plugin_initialises_and_finalizes_what_it_owns, reset),
      cmocka_unit_test_setup(test_application_initialised_mpi_is_left_alone, reset),
      cmocka_unit_test_setup(test_init_failure_is_reported, reset),
      cmocka_unit_test_setup(test_dtypes_and_reductions_map, reset),
      cmocka_unit_test_setup(test_mpi_errors_map_to_statuses, reset),
      cmocka_unit_test_setup(test_deadline_breaks_the_communicator, reset),
      cmocka_unit_test_setup(test_abort_wakes_the_waiting_call, reset),
      cmocka_unit_test_setup(test_bad_bootstraps_and_arguments, reset),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  fake_set("reset", 0); /* requests a deadline or an abort left pending */
  bp_mpi_parked_release(); /* and the plugin's buffers for them (no MPI runs now) */
  dlclose(fake);
  return failed;
}
