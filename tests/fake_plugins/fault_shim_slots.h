/* The slots into which the fault-injecting plugin (fault_shim_plugin.c) can
 * inject a failure: every slot of the core, op and capability tables that
 * returns a status, in table order. `launch` stands for the op table's
 * launch entries (any op id). The void slots (instance_destroy,
 * device_close, buffer_release, stream_destroy, event_destroy) are wrapped
 * too but cannot fail.
 *
 * Shared by the plugin and the tests that drive it (one list, no copies).
 */
#ifndef BP_TESTS_FAULT_SHIM_SLOTS_H_
#define BP_TESTS_FAULT_SHIM_SLOTS_H_

#define BP_FAULT_SHIM_CORE_SLOTS(X)                                                        \
  X(instance_create) X(device_count) X(device_open) X(device_get_properties)               \
  X(device_memory_spaces) X(device_memory_usage) X(buffer_allocate) X(buffer_map)         \
  X(buffer_unmap) X(copy_host_to_device) X(copy_device_to_host) X(copy_device_to_device)  \
  X(copy_peer) X(buffer_fill) X(stream_create) X(stream_synchronize) X(stream_query)      \
  X(stream_enqueue_host_func) X(event_create) X(event_record) X(stream_wait_event)        \
  X(event_query) X(event_synchronize) X(event_elapsed_ns) X(buffer_import) X(buffer_export)     \
  X(event_import) X(event_export)

#define BP_FAULT_SHIM_CAPS_SLOTS(X) \
  X(query_support) X(estimate_cost) X(query_fusion) X(launch_ew_program)

#define BP_FAULT_SHIM_SLOTS(X) BP_FAULT_SHIM_CORE_SLOTS(X) X(launch) BP_FAULT_SHIM_CAPS_SLOTS(X)

#endif /* BP_TESTS_FAULT_SHIM_SLOTS_H_ */
