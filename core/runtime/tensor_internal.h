/* Helpers shared by the tensor files of core/runtime (tensor.c,
 * tensor_view.c, tensor_io.c). Not installed. */
#ifndef BACKPLANE_CORE_RUNTIME_TENSOR_INTERNAL_H_
#define BACKPLANE_CORE_RUNTIME_TENSOR_INTERNAL_H_

#include "internal.h"

/* Validates dtype, rank, sizes >= 0, strides >= 0 (when given) and that the
 * byte size fits in int64. Sets the message (prefixed with `fn`). */
BP__HIDDEN bp_status_t bp__tensor_check_shape(const char* fn, uint32_t dtype, uint32_t rank,
                                              const int64_t* sizes, const int64_t* strides);
/* OUT_OF_RANGE unless every element lies inside the buffer. */
BP__HIDDEN bp_status_t bp__tensor_check_span(const char* fn, const bp_buffer_t* buffer,
                                             uint32_t dtype, uint32_t rank, const int64_t* sizes,
                                             const int64_t* strides, uint64_t byte_offset);
/* Row-major strides for `sizes`; nonzero on overflow. */
BP__HIDDEN int bp__dense_strides(uint32_t rank, const int64_t* sizes, int64_t* out_strides);
/* New tensor over `buffer` (retained); no validation. */
BP__HIDDEN bp_status_t bp__tensor_wrap(bp_buffer_t* buffer, uint32_t dtype, uint32_t rank,
                                       const int64_t* sizes, const int64_t* strides,
                                       uint64_t byte_offset, bp_tensor_t** out_tensor);

#endif /* BACKPLANE_CORE_RUNTIME_TENSOR_INTERNAL_H_ */
