// A plugin written in C++: the ABI headers (plugin.h, and backplane.h for
// an application beside it) compile with -Wall -Wextra -pedantic -Werror
// under C++11, with their layout pins checked by static_assert. It loads,
// negotiates and reports one device with the ABI's properties.
#include <cstring>

#include "backplane/backplane.h"
#include "backplane/plugin.h"

static_assert(BP_ABI_PINNED == 1, "the layout pins hold under C++ on 64-bit hosts");

namespace {

struct Instance {
  int unused;
};
Instance g_instance;

bp_status_t instance_create(const bpp_instance_create_info_t*, bpp_instance_t* out) {
  *out = reinterpret_cast<bpp_instance_t>(&g_instance);
  return BP_OK;
}
void instance_destroy(bpp_instance_t) {}
bp_status_t device_count(bpp_instance_t, uint32_t* out) {
  *out = 1;
  return BP_OK;
}
bp_status_t device_open(bpp_instance_t inst, uint32_t index, bpp_device_t* out) {
  if (index != 0) return BP_OUT_OF_RANGE;
  *out = reinterpret_cast<bpp_device_t>(inst);
  return BP_OK;
}
void device_close(bpp_device_t) {}
bp_status_t device_get_properties(bpp_device_t, bp_device_properties_t* props) {
  bp_device_properties_t p;
  std::memset(&p, 0, sizeof p);
  p.struct_size = sizeof p;
  p.kind = BP_DEVICE_KIND_VIRTUAL;
  std::strcpy(p.name, "C++ device");
  p.dtype_mask = BP_DTYPE_BIT(BP_DTYPE_F64);
  uint32_t n = props->struct_size < sizeof p ? props->struct_size : static_cast<uint32_t>(sizeof p);
  std::memcpy(props, &p, n);
  props->struct_size = n;
  return BP_OK;
}

bpp_core_table_t g_core;
bp_plugin_vtable_t g_vtable;

}  // namespace

extern "C" BP_PLUGIN_EXPORT bp_status_t bp_plugin_negotiate(const bp_negotiate_request_t* req,
                                                            bp_negotiate_reply_t* reply) {
  if (!req || !reply || req->abi_major != BP_ABI_VERSION_MAJOR) return BP_FAILED_PRECONDITION;
  std::memset(&g_core, 0, sizeof g_core);
  g_core.struct_size = sizeof g_core;
  g_core.instance_create = instance_create;
  g_core.instance_destroy = instance_destroy;
  g_core.device_count = device_count;
  g_core.device_open = device_open;
  g_core.device_close = device_close;
  g_core.device_get_properties = device_get_properties;
  std::memset(&g_vtable, 0, sizeof g_vtable);
  g_vtable.struct_size = sizeof g_vtable;
  g_vtable.core = &g_core;
  bp_negotiate_reply_t r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  r.abi_major = BP_ABI_VERSION_MAJOR;
  uint16_t mine = BP_ABI_VERSION_MINOR;
  r.abi_minor = req->abi_minor < mine ? req->abi_minor : mine;
  r.name = "cxx";
  r.version = "1";
  r.vendor = "backplane tests";
  r.vtable = &g_vtable;
  uint32_t n = reply->struct_size < sizeof r ? reply->struct_size : static_cast<uint32_t>(sizeof r);
  std::memcpy(reply, &r, n);
  reply->struct_size = n;
  return BP_OK;
}
