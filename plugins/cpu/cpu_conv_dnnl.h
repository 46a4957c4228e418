/* backplane CPU plugin: the oneDNN path of convolution (cpu_conv_dnnl.c). */
#ifndef BP_CPU_CONV_DNNL_H_
#define BP_CPU_CONV_DNNL_H_

#include "cpu_kernels.h"

/* Runs a convolution forward through oneDNN when the build has it, the
 * environment turns it on (BACKPLANE_CPU_DNNL=1) and the call fits
 * (f32, not transposed, positive strides): returns 1 and the status in
 * *out_status. Returns 0, having touched nothing, when the caller must take
 * its own path. Thread-safe (one call at a time runs oneDNN). */
CPU_HIDDEN int cpu_conv_dnnl_forward(const bp_op_call_t* call, bp_status_t* out_status);

/* 1 when the plugin was built with oneDNN. */
CPU_HIDDEN int cpu_conv_dnnl_built(void);

#endif /* BP_CPU_CONV_DNNL_H_ */
