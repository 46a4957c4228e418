/* backplane OpenCL plugin: the OpenCL entry points it uses, as one X-macro
 * table (bp_kit_dynlib.h). The ICD loader (libOpenCL.so.1) is dlopen'd;
 * the Khronos headers give types only. The table is also the unit tests'
 * seam. */
#ifndef BP_OCL_SYMBOLS_H_
#define BP_OCL_SYMBOLS_H_

#define CL_TARGET_OPENCL_VERSION 120
#define CL_USE_DEPRECATED_OPENCL_1_2_APIS
#include <CL/cl.h>

#include "bp_kit_dynlib.h"

#define OCL_FN(name) typeof(&name)

/* REQ: the plugin needs it; OPT: used when present. */
#define OPENCL_SYMBOLS(REQ, OPT)                                  \
  REQ(OCL_FN(clGetPlatformIDs), clGetPlatformIDs)                 \
  REQ(OCL_FN(clGetPlatformInfo), clGetPlatformInfo)               \
  REQ(OCL_FN(clGetDeviceIDs), clGetDeviceIDs)                     \
  REQ(OCL_FN(clGetDeviceInfo), clGetDeviceInfo)                   \
  REQ(OCL_FN(clCreateContext), clCreateContext)                   \
  REQ(OCL_FN(clReleaseContext), clReleaseContext)                 \
  REQ(OCL_FN(clCreateCommandQueue), clCreateCommandQueue)         \
  REQ(OCL_FN(clReleaseCommandQueue), clReleaseCommandQueue)       \
  REQ(OCL_FN(clCreateBuffer), clCreateBuffer)                     \
  REQ(OCL_FN(clCreateSubBuffer), clCreateSubBuffer)               \
  REQ(OCL_FN(clReleaseMemObject), clReleaseMemObject)             \
  REQ(OCL_FN(clEnqueueWriteBuffer), clEnqueueWriteBuffer)         \
  REQ(OCL_FN(clEnqueueReadBuffer), clEnqueueReadBuffer)           \
  REQ(OCL_FN(clEnqueueCopyBuffer), clEnqueueCopyBuffer)           \
  REQ(OCL_FN(clEnqueueFillBuffer), clEnqueueFillBuffer)           \
  REQ(OCL_FN(clEnqueueMapBuffer), clEnqueueMapBuffer)             \
  REQ(OCL_FN(clEnqueueUnmapMemObject), clEnqueueUnmapMemObject)   \
  REQ(OCL_FN(clCreateProgramWithSource), clCreateProgramWithSource) \
  REQ(OCL_FN(clCreateProgramWithBinary), clCreateProgramWithBinary) \
  REQ(OCL_FN(clBuildProgram), clBuildProgram)                     \
  REQ(OCL_FN(clGetProgramInfo), clGetProgramInfo)                 \
  REQ(OCL_FN(clGetProgramBuildInfo), clGetProgramBuildInfo)       \
  REQ(OCL_FN(clReleaseProgram), clReleaseProgram)                 \
  REQ(OCL_FN(clCreateKernel), clCreateKernel)                     \
  REQ(OCL_FN(clReleaseKernel), clReleaseKernel)                   \
  REQ(OCL_FN(clSetKernelArg), clSetKernelArg)                     \
  REQ(OCL_FN(clEnqueueNDRangeKernel), clEnqueueNDRangeKernel)     \
  REQ(OCL_FN(clEnqueueMarkerWithWaitList), clEnqueueMarkerWithWaitList) \
  REQ(OCL_FN(clEnqueueBarrierWithWaitList), clEnqueueBarrierWithWaitList) \
  REQ(OCL_FN(clFlush), clFlush)                                   \
  REQ(OCL_FN(clFinish), clFinish)                                 \
  REQ(OCL_FN(clWaitForEvents), clWaitForEvents)                   \
  REQ(OCL_FN(clGetEventInfo), clGetEventInfo)                     \
  REQ(OCL_FN(clGetEventProfilingInfo), clGetEventProfilingInfo)   \
  REQ(OCL_FN(clCreateUserEvent), clCreateUserEvent)               \
  REQ(OCL_FN(clSetUserEventStatus), clSetUserEventStatus)         \
  REQ(OCL_FN(clRetainEvent), clRetainEvent)                       \
  REQ(OCL_FN(clReleaseEvent), clReleaseEvent)

typedef struct ocl_symbols {
  OPENCL_SYMBOLS(BP_KIT_SYMBOL_FIELD, BP_KIT_SYMBOL_FIELD)
} ocl_symbols_t;

#endif /* BP_OCL_SYMBOLS_H_ */
