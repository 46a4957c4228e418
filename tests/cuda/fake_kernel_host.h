/* The GPU portability names mapped to host C, so the fake driver runs the
 * very kernel source the plugin's PTX comes from (plugins/gpu_common/
 * kernels): force-included before bp_gpu_common.h when a kernel file is
 * compiled as C into the fake. A work-item's ids live in a thread-local
 * record the fake sets before calling the kernel; local memory is a static
 * (every work-item of the group, one group at a time, shares it), and a
 * barrier is a pthread barrier across the group's threads.
 */
#ifndef BP_FAKE_KERNEL_HOST_H_
#define BP_FAKE_KERNEL_HOST_H_
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <tgmath.h>
/* The calling work-item: global, local and group ids, group size and count. */
typedef struct fk_item { int64_t gid[3], lid[3], grp[3], lsize[3], ngrp[3]; } fk_item_t;
extern __thread fk_item_t fk_item;
void fk_barrier(void);
#define BP_KERNEL __attribute__((visibility("hidden")))
#define BP_GLOBAL
#define BP_LOCAL static
#define BP_CONSTANT const
#define BP_INLINE static inline
#define BP_HAS_F64 1
#define BP_MATH_T double
typedef uint16_t half;
#define BP_GLOBAL_ID(d) ((bp_i64)fk_item.gid[d])
#define BP_LOCAL_ID(d) ((bp_u32)fk_item.lid[d])
#define BP_GROUP_ID(d) ((bp_i64)fk_item.grp[d])
#define BP_LOCAL_SIZE(d) ((bp_u32)fk_item.lsize[d])
#define BP_NUM_GROUPS(d) ((bp_i64)fk_item.ngrp[d])
#define BP_GLOBAL_SIZE(d) ((bp_i64)(fk_item.ngrp[d] * fk_item.lsize[d]))
#define BP_BARRIER() fk_barrier()
#define BP_ATOMIC_ADD_U32(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
static inline uint32_t fk_cas(volatile uint32_t* p, uint32_t c, uint32_t v) { __atomic_compare_exchange_n(p, &c, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); return c; }
#define BP_ATOMIC_CAS_U32(p, c, v) fk_cas((p), (c), (v))
static inline float fk_as_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t fk_as_u32(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline double fk_as_f64(int64_t u) { double f; memcpy(&f, &u, 8); return f; }
static inline int64_t fk_as_i64(double f) { int64_t u; memcpy(&u, &f, 8); return u; }
#define BP_AS_F32(u) fk_as_f32(u)
#define BP_AS_U32(f) fk_as_u32(f)
#define BP_AS_F64(u) fk_as_f64(u)
#define BP_AS_I64(f) fk_as_i64(f)
float fk_f16_to_f32(uint16_t h);
uint16_t fk_f32_to_f16(float f);
#define BP_LOAD_HALF(p, i) fk_f16_to_f32(((const uint16_t*)(p))[i])
#define BP_STORE_HALF_RTE(v, p, i) (((uint16_t*)(p))[i] = fk_f32_to_f16(v))
#define min(a, b) ((a) < (b) ? (a) : (b))
#define max(a, b) ((a) > (b) ? (a) : (b))
#define rsqrt(x) (1 / sqrt(x))

#endif /* BP_FAKE_KERNEL_HOST_H_ */
