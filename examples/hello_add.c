/* hello_add: the smallest backplane application. Adds two tensors on the
 * first device (or the one named on the command line) and prints the sum. */
#include <stdio.h>

#include <backplane/backplane.h>

#define TRY(expr)                                                              \
  do {                                                                         \
    bp_status_t st_ = (expr);                                                  \
    if (st_ != BP_OK) {                                                        \
      fprintf(stderr, "%s: %s: %s\n", #expr, bp_status_name(st_), bp_status_message()); \
      goto cleanup;                                                            \
    }                                                                          \
  } while (0)

int main(int argc, char** argv) {
  int rc = 1;
  bp_context_t* ctx = NULL;
  bp_stream_t* stream = NULL;
  bp_tensor_t *a = NULL, *b = NULL, *c = NULL;
  bp_device_t* dev = NULL;
  const float ha[4] = {1, 2, 3, 4}, hb[4] = {10, 20, 30, 40};
  float hc[4] = {0};
  const int64_t shape[2] = {2, 2};

  TRY(bp_context_create(NULL, &ctx));
  if (argc > 1)
    TRY(bp_context_find_device(ctx, argv[1], &dev));
  else
    TRY(bp_context_device(ctx, 0, &dev));
  TRY(bp_stream_create(dev, NULL, &stream));
  TRY(bp_tensor_create(dev, BP_DTYPE_F32, 2, shape, &a));
  TRY(bp_tensor_create(dev, BP_DTYPE_F32, 2, shape, &b));
  TRY(bp_tensor_write(stream, a, ha, sizeof ha));
  TRY(bp_tensor_write(stream, b, hb, sizeof hb));
  TRY(bp_op_add(stream, a, b, NULL, &c));
  TRY(bp_tensor_read(stream, c, hc, sizeof hc));
  printf("%s: [%g %g %g %g]\n", bp_device_name(dev), hc[0], hc[1], hc[2], hc[3]);
  rc = hc[0] == 11 && hc[3] == 44 ? 0 : 1;
cleanup:
  bp_tensor_release(a);
  bp_tensor_release(b);
  bp_tensor_release(c);
  bp_stream_release(stream);
  bp_context_release(ctx);
  return rc;
}
