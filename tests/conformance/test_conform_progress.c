/* bp-conform's progress line (conformance/progress.c): the text and the
 * estimate of the time left, and the drawing side (rewritten in place,
 * rate-limited, erased, silent when disabled). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"

static bpc_progress_state_t state(uint64_t done, uint64_t total, uint64_t resumed, double elapsed) {
  bpc_progress_state_t s;
  memset(&s, 0, sizeof s);
  s.done = done;
  s.total = total;
  s.resumed = resumed;
  s.elapsed_s = elapsed;
  s.backend = "vulkan";
  s.op = "softmax";
  return s;
}

static void test_format_line(void** unused) {
  (void)unused;
  char buf[256];
  bpc_progress_state_t s = state(50, 200, 0, 30.0);
  assert_int_equal(bpc_progress_format(&s, 200, buf, sizeof buf), BP_OK);
  assert_string_equal(buf, "[50/200 25%] vulkan: softmax  elapsed 30s  left ~1m30s");
  s = state(1, 3, 0, 3725.0); /* an hour and more */
  assert_int_equal(bpc_progress_format(&s, 200, buf, sizeof buf), BP_OK);
  assert_string_equal(buf, "[1/3 33%] vulkan: softmax  elapsed 1h02m  left ~2h04m");
  s.backend = NULL;
  s.op = NULL;
  assert_int_equal(bpc_progress_format(&s, 200, buf, sizeof buf), BP_OK);
  assert_string_equal(buf, "[1/3 33%] -: -  elapsed 1h02m  left ~2h04m");
}

static void test_eta(void** unused) {
  (void)unused;
  bpc_progress_state_t s = state(0, 100, 0, 5.0);
  assert_true(bpc_progress_eta(&s) < 0.0); /* nothing timed yet */
  char buf[256];
  assert_int_equal(bpc_progress_format(&s, 200, buf, sizeof buf), BP_OK);
  assert_string_equal(buf, "[0/100 0%] vulkan: softmax  elapsed 5s  left ~?");
  /* Cases from a journal are done but not timed: 50 ran in 10 s, 50 left. */
  s = state(150, 200, 100, 10.0);
  assert_float_equal(bpc_progress_eta(&s), 10.0, 1e-9);
  s = state(100, 200, 100, 10.0); /* only journal results so far */
  assert_true(bpc_progress_eta(&s) < 0.0);
  s = state(200, 200, 0, 42.0);
  assert_float_equal(bpc_progress_eta(&s), 0.0, 0.0);
  assert_int_equal(bpc_progress_format(&s, 200, buf, sizeof buf), BP_OK);
  assert_string_equal(buf, "[200/200 100%] vulkan: softmax  elapsed 42s  left ~0s");
  s = state(0, 0, 0, 0.0); /* an empty run */
  assert_float_equal(bpc_progress_eta(&s), 0.0, 0.0);
  assert_int_equal(bpc_progress_format(&s, 200, buf, sizeof buf), BP_OK);
  assert_string_equal(buf, "[0/0 100%] vulkan: softmax  elapsed 0s  left ~0s");
}

static void test_format_fits_width_and_refuses_bad_input(void** unused) {
  (void)unused;
  char buf[256];
  bpc_progress_state_t s = state(50, 200, 0, 30.0);
  assert_int_equal(bpc_progress_format(&s, 12, buf, sizeof buf), BP_OK);
  assert_string_equal(buf, "[50/200 25%]");
  char small[8];
  assert_int_equal(bpc_progress_format(&s, 200, small, sizeof small), BP_OK);
  assert_string_equal(small, "[50/200"); /* cut by the buffer, terminated */
  assert_int_equal(bpc_progress_format(NULL, 80, buf, sizeof buf), BP_INVALID_ARGUMENT);
  assert_int_equal(bpc_progress_format(&s, 80, NULL, sizeof buf), BP_INVALID_ARGUMENT);
  assert_int_equal(bpc_progress_format(&s, 80, buf, 0), BP_INVALID_ARGUMENT);
  assert_int_equal(bpc_progress_format(&s, 0, buf, sizeof buf), BP_INVALID_ARGUMENT);
  s.done = 201;
  assert_int_equal(bpc_progress_format(&s, 80, buf, sizeof buf), BP_INVALID_ARGUMENT);
  assert_float_equal(bpc_progress_eta(NULL), 0.0, 0.0);
}

static size_t count_char(const char* s, size_t n, char c) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) k += s[i] == c;
  return k;
}

/* A progress line drawn into memory (text and size follow each fflush). */
typedef struct captured {
  char* text;
  size_t size;
  FILE* fp;
  bpc_progress_t p;
} captured_t;

static void capture_start(captured_t* c, int enabled, uint64_t total) {
  memset(c, 0, sizeof *c);
  c->fp = open_memstream(&c->text, &c->size);
  assert_non_null(c->fp);
  bpc_progress_start(&c->p, c->fp, enabled, total);
}

static void capture_end(captured_t* c) {
  fclose(c->fp);
  free(c->text);
}

static void test_draw_rewrites_in_place_rate_limited_and_clears(void** unused) {
  (void)unused;
  captured_t c;
  capture_start(&c, 1, 1000);
  bpc_progress_t* p = &c.p;
  bpc_progress_set(p, "cpu", "add"); /* first update: drawn at once */
  for (int k = 0; k < 100; k++) bpc_progress_add(p, 1, 0); /* within 0.1 s: not redrawn */
  fflush(c.fp);
  assert_int_equal(count_char(c.text, c.size, '\r'), 1);
  assert_int_equal(count_char(c.text, c.size, '\n'), 0);
  assert_non_null(strstr(c.text, "[0/1000 0%] cpu: add  elapsed 0s  left ~?"));
  bpc_progress_clear(p); /* '\r', blanks over the line, '\r' */
  fflush(c.fp);
  assert_int_equal(count_char(c.text, c.size, '\r'), 3);
  assert_int_equal(c.text[c.size - 1], '\r');
  assert_int_equal(p->shown, 0);
  bpc_progress_tick(p); /* after a clear the next update draws at once, with the count */
  fflush(c.fp);
  assert_non_null(strstr(c.text, "[100/1000 10%] cpu: add"));
  assert_int_equal(count_char(c.text, c.size, '\n'), 0);
  bpc_progress_clear(p);
  capture_end(&c);
}

static void test_disabled_writes_nothing(void** unused) {
  (void)unused;
  captured_t c;
  capture_start(&c, 0, 10);
  bpc_progress_t* p = &c.p;
  bpc_progress_set(p, "cpu", "add");
  bpc_progress_add(p, 3, 2);
  bpc_progress_tick(p);
  bpc_progress_clear(p);
  fflush(c.fp);
  assert_int_equal(c.size, 0);
  assert_int_equal(p->st.done, 5); /* still counted */
  assert_int_equal(p->st.resumed, 2);
  capture_end(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_format_line),
      cmocka_unit_test(test_eta),
      cmocka_unit_test(test_format_fits_width_and_refuses_bad_input),
      cmocka_unit_test(test_draw_rewrites_in_place_rate_limited_and_clears),
      cmocka_unit_test(test_disabled_writes_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
