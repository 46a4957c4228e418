/* Helpers shared by the plugin kit's unit tests. */
#ifndef BP_KIT_TEST_H_
#define BP_KIT_TEST_H_

#include <string.h>

#include "backplane/plugin.h"

/* A dense 1-d f32 descriptor of n elements at the start of `b` (may be NULL). */
static inline void kit_test_desc_f32(bp_tensor_desc_t* d, bpp_buffer_t b, int64_t n) {
  memset(d, 0, sizeof *d);
  d->struct_size = sizeof *d;
  d->dtype = BP_DTYPE_F32;
  d->rank = 1;
  d->sizes[0] = n;
  d->strides[0] = 1;
  d->buffer = b;
}

#endif /* BP_KIT_TEST_H_ */
