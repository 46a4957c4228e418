/* CUresult -> bp_status_t, messages with the CUDA error name and number,
 * and the device's lost state after a sticky context error. */
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

bp_status_t cuda_status_of(CUresult r) {
  switch (r) {
    case CUDA_SUCCESS: return BP_OK;
    case CUDA_ERROR_NOT_READY: return BP_NOT_READY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_SOURCE: return BP_INVALID_ARGUMENT;
    case CUDA_ERROR_OUT_OF_MEMORY: return BP_RESOURCE_EXHAUSTED;
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return BP_UNIMPLEMENTED;
    case CUDA_ERROR_NOT_INITIALIZED:
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    case CUDA_ERROR_DEVICE_UNAVAILABLE:
    case CUDA_ERROR_DEVICE_NOT_LICENSED: return BP_UNAVAILABLE;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_CAPTURED_EVENT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
    case CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE:
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED:
    case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED: return BP_FAILED_PRECONDITION;
    default: return cuda_error_is_sticky(r) ? BP_DEVICE_LOST : BP_INTERNAL;
  }
}

int cuda_error_is_sticky(CUresult r) {
  switch (r) {
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_EXTERNAL_DEVICE:
      return 1;
    default: return 0;
  }
}

void cuda_error_text(const cuda_symbols_t* cu, CUresult r, char* buf, size_t cap) {
  const char *name = NULL, *text = NULL;
  if (!cu || cu->cuGetErrorName(r, &name) != CUDA_SUCCESS || !name) name = "CUDA_ERROR_UNKNOWN";
  if (!cu || cu->cuGetErrorString(r, &text) != CUDA_SUCCESS || !text) text = "no description";
  snprintf(buf, cap, "%s (%d): %s", name, (int)r, text);
}

/* The driver's symbols for messages when no device is at hand: the one
 * instance of the library (set by instance_create). */
static const cuda_symbols_t* g_cu;
void cuda_error_set_symbols(const cuda_symbols_t* cu);
void cuda_error_set_symbols(const cuda_symbols_t* cu) {
  __atomic_store_n(&g_cu, cu, __ATOMIC_RELEASE);
}

static void mark_lost(bpp_device_t dev, const char* msg) {
  pthread_mutex_lock(&dev->lost_mu);
  int first = !__atomic_load_n(&dev->lost, __ATOMIC_ACQUIRE);
  if (first) {
    snprintf(dev->lost_msg, sizeof dev->lost_msg, "%s", msg);
    __atomic_store_n(&dev->lost, 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&dev->lost_mu);
  const bp_host_services_t* host = bp_kit_host();
  if (first && host && host->struct_size >= BP_HOST_SERVICES_V1_SIZE && host->async_error)
    host->async_error(host->host_ctx, dev, BP_DEVICE_LOST, msg);
}

bp_status_t cuda_fail(bpp_device_t dev, CUresult r, const char* what) {
  char text[200], msg[BP_PLUGIN_MSG_CAP];
  const cuda_symbols_t* cu = dev ? dev->cu : __atomic_load_n(&g_cu, __ATOMIC_ACQUIRE);
  cuda_error_text(cu, r, text, sizeof text);
  snprintf(msg, sizeof msg, "cuda: %s: %s", what, text);
  bp_status_t st = cuda_status_of(r);
  if (dev && cuda_error_is_sticky(r)) {
    mark_lost(dev, msg);
    st = BP_DEVICE_LOST;
  }
  return bp_kit_error(st, "%s", msg);
}

bp_status_t cuda_device_check_alive(bpp_device_t dev) {
  if (!__atomic_load_n(&dev->lost, __ATOMIC_ACQUIRE)) return BP_OK;
  return bp_kit_error(BP_DEVICE_LOST, "cuda: device %u is lost: %s", dev->index, dev->lost_msg);
}
