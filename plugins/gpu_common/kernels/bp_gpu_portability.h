/* backplane GPU kernels: the portability header of the one kernel source.
 *
 * Kernels are written once in OpenCL C 1.2 against the names below and
 * compiled for every GPU API (docs/gpu_kernels.md):
 *   - OpenCL drivers: the embedded source text, built at run time;
 *   - SPIR-V (Level Zero, OpenCL with IL): clang -target spir64 + llvm-spirv;
 *   - PTX (CUDA): clang -target nvptx64, OpenCL builtins from libclc;
 *   - AMDGCN (HIP): clang -target amdgcn-amd-amdhsa, builtins from libclc.
 * Every build-time target compiles OpenCL C, so the names map to OpenCL C
 * here; NVRTC (run-time generated kernels on CUDA) compiles CUDA C++ and
 * has its own branch below. Kernels
 * use only these names for indices, address spaces, barriers and atomics,
 * never the raw builtins, so that a new target is one branch of this file.
 *
 * The header is also included by host C (plugins/gpu_common): there only
 * the fixed-width types are defined, so argument structs are laid out the
 * same on both sides.
 */
#ifndef BP_GPU_PORTABILITY_H_
#define BP_GPU_PORTABILITY_H_

#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)
#define BP_GPU_DEVICE 1

/* Fixed-width types (OpenCL C: long is 64 bits on every device). */
typedef char bp_i8;
typedef uchar bp_u8;
typedef short bp_i16;
typedef ushort bp_u16;
typedef int bp_i32;
typedef uint bp_u32;
typedef long bp_i64;
typedef ulong bp_u64;

#ifdef cl_khr_fp64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define BP_HAS_F64 1
#endif

/* Entry points and address spaces. */
#define BP_KERNEL __kernel
#define BP_GLOBAL __global
#define BP_LOCAL __local
#define BP_CONSTANT __constant
#define BP_INLINE static inline

/* Indices (dimension 0 only is used by the kernels, plus 1 for tiles). */
#define BP_GLOBAL_ID(d) ((bp_i64)get_global_id(d))
#define BP_LOCAL_ID(d) ((bp_u32)get_local_id(d))
#define BP_GROUP_ID(d) ((bp_i64)get_group_id(d))
#define BP_LOCAL_SIZE(d) ((bp_u32)get_local_size(d))
#define BP_NUM_GROUPS(d) ((bp_i64)get_num_groups(d))
#define BP_GLOBAL_SIZE(d) ((bp_i64)get_global_size(d))

/* Barriers: a work-group barrier that also orders local memory. */
#define BP_BARRIER() barrier(CLK_LOCAL_MEM_FENCE)

/* Atomics on 32-bit global words (OpenCL 1.2 names; CUDA's atomicAdd and
 * friends in the nvptx branch come from the same libclc builtins). */
#define BP_ATOMIC_ADD_U32(p, v) atomic_add((p), (v))
#define BP_ATOMIC_CAS_U32(p, c, v) atomic_cmpxchg((p), (c), (v))

/* Reinterpretation of bits. */
#define BP_AS_F32(u) as_float(u)
#define BP_AS_U32(f) as_uint(f)
#define BP_AS_F64(u) as_double(u)
#define BP_AS_I64(f) as_long(f)

/* Half-precision storage without cl_khr_fp16 (load and store convert). */
#define BP_LOAD_HALF(p, i) vload_half((i), (p))
#define BP_STORE_HALF_RTE(v, p, i) vstore_half_rte((v), (i), (p))

/* Math: the OpenCL C builtins (correctly rounded or within the OpenCL
 * spec's ULP table on every target; libclc supplies them on nvptx and
 * amdgcn). BP_MATH_T is the type transcendental functions of f32
 * registers are evaluated in: double where the device has it, rounded
 * once on store. */
#ifdef BP_HAS_F64
#define BP_MATH_T double
#else
#define BP_MATH_T float
#endif

#elif defined(__CUDACC_RTC__) || defined(__CUDACC__)
/* CUDA C++ (NVRTC at run time: the generated fused elementwise kernels,
 * gpu_ew_gen.c; the embedded kernels are OpenCL C compiled to PTX by
 * clang). No headers: NVRTC declares the CUDA math functions itself. */
#define BP_GPU_DEVICE 1
#define BP_GPU_CUDA 1
typedef signed char bp_i8;
typedef unsigned char bp_u8;
typedef short bp_i16;
typedef unsigned short bp_u16;
typedef int bp_i32;
typedef unsigned int bp_u32;
typedef long long bp_i64;
typedef unsigned long long bp_u64;
typedef unsigned short half; /* storage only: BP_LOAD_HALF / BP_STORE_HALF_RTE convert */
#define BP_HAS_F64 1

#define BP_KERNEL extern "C" __global__
#define BP_GLOBAL
#define BP_LOCAL __shared__
#define BP_CONSTANT const
#define BP_INLINE static __device__ __forceinline__

#define BP_GLOBAL_ID(d) ((bp_i64)bp__cuda_dim(blockIdx, d) * bp__cuda_dim(blockDim, d) + bp__cuda_dim(threadIdx, d))
#define BP_LOCAL_ID(d) ((bp_u32)bp__cuda_dim(threadIdx, d))
#define BP_GROUP_ID(d) ((bp_i64)bp__cuda_dim(blockIdx, d))
#define BP_LOCAL_SIZE(d) ((bp_u32)bp__cuda_dim(blockDim, d))
#define BP_NUM_GROUPS(d) ((bp_i64)bp__cuda_dim(gridDim, d))
#define BP_GLOBAL_SIZE(d) ((bp_i64)bp__cuda_dim(gridDim, d) * bp__cuda_dim(blockDim, d))
#define bp__cuda_dim(v, d) ((d) == 0 ? (v).x : (d) == 1 ? (v).y : (v).z)

#define BP_BARRIER() __syncthreads()
#define BP_ATOMIC_ADD_U32(p, v) atomicAdd((p), (v))
#define BP_ATOMIC_CAS_U32(p, c, v) atomicCAS((p), (c), (v))

#define BP_AS_F32(u) __uint_as_float((bp_u32)(u))
#define BP_AS_U32(f) __float_as_uint(f)
#define BP_AS_F64(u) __longlong_as_double((bp_i64)(u))
#define BP_AS_I64(f) __double_as_longlong(f)

BP_INLINE float bp__cuda_f16_to_f32(bp_u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
BP_INLINE bp_u16 bp__cuda_f32_to_f16(float f) {
  bp_u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
#define BP_LOAD_HALF(p, i) bp__cuda_f16_to_f32(((const bp_u16*)(p))[i])
#define BP_STORE_HALF_RTE(v, p, i) (((bp_u16*)(p))[i] = bp__cuda_f32_to_f16(v))

#define BP_MATH_T double
#define INFINITY __int_as_float(0x7f800000)
#define NAN __int_as_float(0x7fc00000)

#else /* host C */
#include <stdint.h>
typedef int8_t bp_i8;
typedef uint8_t bp_u8;
typedef int16_t bp_i16;
typedef uint16_t bp_u16;
typedef int32_t bp_i32;
typedef uint32_t bp_u32;
typedef int64_t bp_i64;
typedef uint64_t bp_u64;
#endif

#endif /* BP_GPU_PORTABILITY_H_ */
