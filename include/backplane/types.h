/* backplane: value types shared by the plugin ABI and the application API.
 *
 * This header is part of the stable ABI. It depends only on <stdint.h> and
 * <stddef.h>. Every enum that crosses the plugin boundary is carried in a
 * fixed-width integer field; the enum types below only name the values.
 * Values are append-only: never renumbered, never reused.
 */
#ifndef BACKPLANE_TYPES_H_
#define BACKPLANE_TYPES_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Status codes (absl/IREE style). 0 is success. Carried as int32_t.        */
/* ------------------------------------------------------------------------ */
typedef int32_t bp_status_t;

enum bp_status_code {
  BP_OK = 0,
  BP_CANCELLED = 1,
  BP_UNKNOWN = 2,
  BP_INVALID_ARGUMENT = 3,
  BP_DEADLINE_EXCEEDED = 4,
  BP_NOT_FOUND = 5,
  BP_ALREADY_EXISTS = 6,
  BP_PERMISSION_DENIED = 7,
  BP_RESOURCE_EXHAUSTED = 8,
  BP_FAILED_PRECONDITION = 9,
  BP_ABORTED = 10,
  BP_OUT_OF_RANGE = 11,
  BP_UNIMPLEMENTED = 12,
  BP_INTERNAL = 13,
  BP_UNAVAILABLE = 14,
  BP_DATA_LOSS = 15,
  BP_UNAUTHENTICATED = 16,
  BP_DEVICE_LOST = 17,
  /* Not an error: returned by query calls whose work is still pending. */
  BP_NOT_READY = 18,
  /* The device's support query says no for this op at these dtypes, shapes,
   * layouts or attributes (the backend has a kernel for the op, but not for
   * this case). Distinct from UNIMPLEMENTED (no kernel for the op at all); the
   * application reads why with bp_status_support_reason(). */
  BP_UNSUPPORTED = 19,
  BP_STATUS_CODE_COUNT_ = 20
};

/* ------------------------------------------------------------------------ */
/* Element types. Carried as uint32_t. The list is dtypes.def.            */
/* ------------------------------------------------------------------------ */
enum bp_dtype {
  BP_DTYPE_INVALID = 0,
#define BP_DTYPE_X(SUFFIX, value, name, bytes, bits, category) BP_DTYPE_##SUFFIX = value,
#include "backplane/dtypes.def"
  BP_DTYPE_COUNT_ = 27 /* one past the last id in dtypes.def */
};

/* What kind of value a dtype holds (the category column of dtypes.def).
 * Sub-byte and small float formats are storage dtypes: the core accepts
 * them in tensors, copies and views; ops take them only where a plugin
 * declares support (docs/semantics.md, "Element types"). */
enum bp_dtype_category {
  BP_DTYPE_CATEGORY_INVALID = 0,
  BP_DTYPE_CATEGORY_FLOAT = 1,             /* f16 bf16 f32 f64 */
  BP_DTYPE_CATEGORY_INT = 2,               /* signed two's complement, whole bytes */
  BP_DTYPE_CATEGORY_UNSIGNED = 3,          /* unsigned, whole bytes */
  BP_DTYPE_CATEGORY_BOOL = 4,              /* one byte, 0 or 1 */
  BP_DTYPE_CATEGORY_COMPLEX = 5,           /* real and imaginary floats */
  BP_DTYPE_CATEGORY_FP8 = 6,               /* 8-bit floats */
  BP_DTYPE_CATEGORY_SUB_BYTE_INT = 7,      /* signed integers narrower than a byte */
  BP_DTYPE_CATEGORY_SUB_BYTE_UNSIGNED = 8, /* unsigned integers narrower than a byte */
  BP_DTYPE_CATEGORY_SUB_BYTE_FLOAT = 9,    /* fp6, fp4 */
  BP_DTYPE_CATEGORY_SCALE = 10             /* power-of-two block scales (e8m0) */
};

/* Arrays indexed by dtype in ABI structs have this many slots, so that new
 * dtypes fit without changing the struct layout. */
#define BP_DTYPE_SLOTS 32

/* Bit for dtype d in a uint32_t dtype mask. */
#define BP_DTYPE_BIT(d) (UINT32_C(1) << (uint32_t)(d))

/* ------------------------------------------------------------------------ */
/* Scalars (attributes such as alpha, fill values, clamp bounds).           */
/* ------------------------------------------------------------------------ */
enum bp_scalar_kind {
  BP_SCALAR_NONE = 0, /* absent (an optional scalar that was not given) */
  BP_SCALAR_FLOAT = 1,
  BP_SCALAR_INT = 2,
  BP_SCALAR_BOOL = 3
};

typedef struct bp_scalar {
  uint32_t kind; /* enum bp_scalar_kind */
  uint32_t reserved0;
  union {
    double f;
    int64_t i;
    uint64_t b; /* 0 or 1 */
  } v;
} bp_scalar_t;

/* ------------------------------------------------------------------------ */
/* Limits.                                                                  */
/* ------------------------------------------------------------------------ */
#define BP_MAX_RANK 8
#define BP_MAX_NAME 128

/* ------------------------------------------------------------------------ */
/* Device kinds, memory spaces. Carried as uint32_t.                        */
/* ------------------------------------------------------------------------ */
enum bp_device_kind {
  BP_DEVICE_KIND_UNKNOWN = 0,
  BP_DEVICE_KIND_CPU = 1,
  BP_DEVICE_KIND_GPU = 2,
  BP_DEVICE_KIND_INTEGRATED_GPU = 3,
  BP_DEVICE_KIND_ACCELERATOR = 4,
  BP_DEVICE_KIND_VIRTUAL = 5 /* software emulation (e.g. lavapipe, PoCL) */
};

enum bp_memory_kind {
  BP_MEMORY_DEVICE = 0,        /* device-local; may or may not be host visible */
  BP_MEMORY_HOST_PINNED = 1,   /* page-locked host memory the device can DMA */
  BP_MEMORY_HOST_PAGEABLE = 2, /* ordinary host memory */
  BP_MEMORY_MANAGED = 3,       /* migrates on demand between host and device */
  BP_MEMORY_KIND_COUNT_ = 4
};

enum bp_memory_flags {
  BP_MEMORY_FLAG_HOST_VISIBLE = 1u << 0,  /* buffer_map works */
  BP_MEMORY_FLAG_HOST_COHERENT = 1u << 1, /* no flush needed after host writes */
  BP_MEMORY_FLAG_DEVICE_LOCAL = 1u << 2
};

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_TYPES_H_ */
