/* backplane core: device objects (borrowed handles owned by their plugin). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "loader/loader.h"

bp_status_t bp__device_create(bp_plugin_t* plugin, uint32_t index, bp_device_t** out_device) {
  bp_status_t status = BP_OK;
  bp_device_t* device = calloc(1, sizeof(*device));
  if (!device) return bp__error(BP_RESOURCE_EXHAUSTED, "out of memory creating a device");
  device->plugin = plugin;
  device->index = index;
  snprintf(device->name, sizeof(device->name), "%s:%u", plugin->name, index);

  bp__clear_error();
  status = BP__CORE_CALL(plugin, device_open, plugin->instance, index, &device->handle);
  if (status != BP_OK) {
    device->handle = NULL;
    bp__plugin_error(plugin, status, "device_open");
    goto cleanup;
  }
  if (!device->handle) {
    status = bp__error(BP_FAILED_PRECONDITION, "%s: device_open(%u) returned OK and a NULL device",
                       plugin->name, index);
    goto cleanup;
  }

  device->props.struct_size = sizeof(device->props);
  status = BP__CORE_CALL(plugin, device_get_properties, device->handle, &device->props);
  if (status != BP_OK) {
    bp__plugin_error(plugin, status, "device_get_properties");
    goto cleanup;
  }
  /* The plugin writes within struct_size; make sure it left it intact and
   * the strings terminated and clean (printable ASCII) whatever it wrote. */
  device->props.struct_size = sizeof(device->props);
  bp__text_clean_array(device->props.name, sizeof(device->props.name));
  bp__text_clean_array(device->props.vendor, sizeof(device->props.vendor));
  bp__text_clean_array(device->props.driver_version, sizeof(device->props.driver_version));
  device->props.layout_mask |= BP_LAYOUT_BIT(BP_LAYOUT_STRIDED);

  if (plugin->core.device_memory_spaces) {
    const uint32_t capacity = (uint32_t)(sizeof(device->spaces) / sizeof(device->spaces[0]));
    uint32_t total = 0;
    for (uint32_t i = 0; i < capacity; ++i)
      device->spaces[i].struct_size = sizeof(device->spaces[i]);
    status = BP__CORE_CALL(plugin, device_memory_spaces, device->handle, capacity,
                                               (uint32_t)sizeof(device->spaces[0]), device->spaces,
                                               &total);
    if (status != BP_OK) {
      bp__plugin_error(plugin, status, "device_memory_spaces");
      goto cleanup;
    }
    device->num_spaces = total < capacity ? total : capacity;
    for (uint32_t i = 0; i < device->num_spaces; ++i) {
      device->spaces[i].struct_size = sizeof(device->spaces[i]);
      if (device->spaces[i].kind >= BP_MEMORY_KIND_COUNT_) {
        status = bp__error(BP_FAILED_PRECONDITION, "%s: memory space %u has unknown kind %u",
                           device->name, i, device->spaces[i].kind);
        goto cleanup;
      }
    }
  }
  bp__log(BP_LOG_DEBUG, "device %s: '%s' (%s), kind %u, %llu bytes, %u memory space(s)",
          device->name, device->props.name, device->props.vendor, device->props.kind,
          (unsigned long long)device->props.memory_bytes, device->num_spaces);
  *out_device = device;
  device = NULL;

cleanup:
  if (device) bp__device_destroy(device);
  return status;
}

void bp__device_destroy(bp_device_t* device) {
  if (!device) return;
  if (device->handle && device->plugin->core.device_close)
    BP__CORE_CALL_VOID(device->plugin, device_close, device->handle);
  free(device);
}

BP_API bp_plugin_t* bp_device_plugin(const bp_device_t* device) {
  return device ? device->plugin : NULL;
}

BP_API const char* bp_device_name(const bp_device_t* device) { return device ? device->name : ""; }

BP_API const bp_device_properties_t* bp_device_properties(const bp_device_t* device) {
  return device ? &device->props : NULL;
}

BP_API bp_status_t bp_device_memory_spaces(const bp_device_t* device, uint32_t capacity,
                                           uint32_t element_size,
                                           bp_memory_space_info_t* out_spaces,
                                           uint32_t* out_count) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_device_memory_spaces", device);
  BP__REQUIRE_ARG("bp_device_memory_spaces", out_count);
  if (capacity > 0 && !out_spaces)
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_device_memory_spaces: out_spaces is NULL but capacity is %u", capacity);
  if (capacity > 0 && element_size < BP_MEMORY_SPACE_INFO_V1_SIZE)
    return bp__error(BP_INVALID_ARGUMENT,
                     "bp_device_memory_spaces: element_size = %u (expected >= %u, the caller's "
                     "sizeof(bp_memory_space_info_t))",
                     element_size, BP_MEMORY_SPACE_INFO_V1_SIZE);
  uint32_t n = capacity < device->num_spaces ? capacity : device->num_spaces;
  size_t copy = element_size < sizeof(device->spaces[0]) ? element_size : sizeof(device->spaces[0]);
  for (uint32_t i = 0; i < n; ++i) {
    bp_memory_space_info_t* dst =
        (bp_memory_space_info_t*)(void*)((char*)out_spaces + (size_t)i * element_size);
    memcpy(dst, &device->spaces[i], copy);
    dst->struct_size = (uint32_t)copy;
  }
  *out_count = device->num_spaces;
  return BP_OK;
}

BP_API bp_status_t bp_device_find_memory_space(const bp_device_t* device, uint32_t kind,
                                               uint32_t* out_space) {
  bp__clear_error();
  BP__REQUIRE_ARG("bp_device_find_memory_space", device);
  BP__REQUIRE_ARG("bp_device_find_memory_space", out_space);
  for (uint32_t i = 0; i < device->num_spaces; ++i) {
    if (device->spaces[i].kind == kind) {
      *out_space = i;
      return BP_OK;
    }
  }
  return bp__error(BP_NOT_FOUND, "device %s has no memory space of kind %u", device->name, kind);
}
