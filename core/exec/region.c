/* backplane core: compiled regions (bp_region_t) -- compile, info, launch.
 *
 * A bp_region_t wraps the plugin's executable with the argument signature
 * (dtypes and sizes) and info the plugin gave at compile time; launches are
 * checked against them before the plugin sees a descriptor. Thread-safe:
 * the object is immutable once made, references are atomic.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec_internal.h"
#include "ops/op_run_internal.h"

#define BP__REGION_INFO_FIRST_SIZE (offsetof(bp_region_info_t, next) + sizeof(void*))
#define BP__SUPPORT_FIRST_SIZE (offsetof(bp_support_t, message) + sizeof(((bp_support_t*)0)->message))

static void region_free(bp_region_t* r) {
  if (r == NULL) return;
  if (r->handle != NULL) {
    const bp_plugin_t* plugin = r->device->plugin;
    if (plugin->exec.executable_release != NULL)
      BP__NOTE_CALL_VOID(plugin, "executable_release", plugin->exec.executable_release(r->handle));
  }
  free(r->args);
  free(r->aliases);
  free(r);
}

bp_status_t bp__region_wrap(const char* api, bp_device_t* device, bpp_executable_t handle,
                            uint32_t kind, uint32_t num_args, uint32_t num_inputs,
                            const bp_tensor_desc_t* args, bp_region_t** out) {
  const bp_plugin_t* plugin = device->plugin;
  bp_region_t* r = calloc(1, sizeof(*r));
  bp_status_t st = BP_OK;
  if (r == NULL || (r->args = calloc(num_args ? num_args : 1, sizeof(*r->args))) == NULL) {
    if (r == NULL && plugin->exec.executable_release)
      BP__NOTE_CALL_VOID(plugin, "executable_release", plugin->exec.executable_release(handle));
    if (r != NULL) {
      r->device = device;
      r->handle = handle;
      region_free(r);
    }
    return bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
  }
  atomic_init(&r->refcount, 1);
  r->device = device;
  r->handle = handle;
  r->kind = kind;
  r->num_args = num_args;
  r->num_inputs = num_inputs;
  memcpy(r->args, args, sizeof(*args) * num_args);
  bp_region_info_t info;
  memset(&info, 0, sizeof(info));
  info.struct_size = sizeof(info);
  if (plugin->exec.executable_get_info != NULL) {
    bp__clear_error();
    st = BP__NOTE_CALL(plugin, "executable_get_info", NULL,
                       plugin->exec.executable_get_info(handle, &info));
    if (st != BP_OK) {
      st = bp__plugin_error(plugin, st, "region info");
      goto fail;
    }
  }
  r->info = info;
  r->info.struct_size = sizeof(r->info);
  r->info.next = NULL;
  r->info.aliases = NULL;
  r->info.alias_stride = sizeof(bp_region_alias_t);
  if (info.workspace_alignment & (info.workspace_alignment - 1)) {
    st = bp__error(BP_INTERNAL, "%s: backend '%s' gave a workspace alignment %llu (not a power of two)",
                   api, plugin->name, (unsigned long long)info.workspace_alignment);
    goto fail;
  }
  if (info.num_aliases > 0) {
    if (info.aliases == NULL || info.alias_stride < BP_REGION_ALIAS_V1_SIZE ||
        info.num_aliases > num_args * num_args) {
      st = bp__error(BP_INTERNAL, "%s: backend '%s' gave %u aliases at stride %u", api,
                     plugin->name, info.num_aliases, info.alias_stride);
      goto fail;
    }
    r->aliases = calloc(info.num_aliases, sizeof(*r->aliases));
    if (r->aliases == NULL) {
      st = bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
      goto fail;
    }
    for (uint32_t k = 0; k < info.num_aliases; ++k) {
      const bp_region_alias_t* a =
          (const bp_region_alias_t*)(const void*)((const char*)info.aliases + (size_t)k * info.alias_stride);
      if (a->output < num_inputs || a->output >= num_args || a->input >= num_inputs) {
        st = bp__error(BP_INTERNAL, "%s: backend '%s' declared alias %u (output %u, input %u) "
                       "outside the arguments", api, plugin->name, k, a->output, a->input);
        goto fail;
      }
      r->aliases[k] = *a;
    }
    r->info.aliases = r->aliases;
  }
  *out = r;
  return BP_OK;
fail:
  region_free(r);
  return st;
}

bp_status_t bp_region_compile(bp_device_t* device, const bp_region_desc_t* region,
                              bp_support_t* out_refusal, bp_region_t** out) {
  const char* api = "bp_region_compile";
  BP__REQUIRE_ARG(api, device);
  BP__REQUIRE_ARG(api, region);
  BP__REQUIRE_ARG(api, out);
  *out = NULL;
  if (out_refusal != NULL && (out_refusal->struct_size < BP__SUPPORT_FIRST_SIZE ||
                              out_refusal->struct_size > 4096))
    return bp__out_struct_write(api, "bp_support_t", out_refusal, NULL, 0, BP__SUPPORT_FIRST_SIZE);
  bp__region_checked_t c;
  bp_status_t st = bp__region_check(api, region, &c);
  bp_support_t why;
  bp__support_set(&why, 1, BP_SUPPORT_OK, "%s", "");
  const bp_plugin_t* plugin = device->plugin;
  bpp_executable_t handle = NULL;
  if (st != BP_OK) goto done;
  if (!plugin->has_exec || plugin->exec.region_compile == NULL) {
    bp__support_set(&why, 0, BP_SUPPORT_DEVICE, "backend '%s' compiles no regions (no exec table)",
                    plugin->name);
  } else {
    bp_support_t answer;
    bp__support_set(&answer, 0, BP_SUPPORT_OK, "%s", "");
    bp__clear_error();
    st = BP__NOTE_CALL(plugin, "region_compile", NULL,
                       plugin->exec.region_compile(device->handle, &c.desc, &answer, &handle));
    if (st == BP_UNIMPLEMENTED) {
      answer.struct_size = sizeof(answer);
      bp__text_clean_array(answer.message, sizeof(answer.message));
      if (answer.reason == BP_SUPPORT_OK) answer.reason = BP_SUPPORT_OP;
      answer.supported = 0;
      why = answer;
      st = BP_OK;
    } else if (st != BP_OK) {
      st = bp__plugin_error(plugin, st, "region compile");
      goto done;
    } else if (handle == NULL) {
      st = bp__error(BP_INTERNAL, "%s: backend '%s' compiled a region into a NULL executable", api,
                     plugin->name);
      goto done;
    }
  }
  if (!why.supported) {
    st = bp__error(BP_UNIMPLEMENTED, "%s: device '%s' refused the region: %s", api, device->name,
                   why.message);
    bp__set_support_reason(why.reason);
    goto done;
  }
  st = bp__region_wrap(api, device, handle, region->kind, region->num_args, region->num_inputs,
                       c.values, out);
  handle = NULL; /* owned by the region (or released) */
done:
  if (out_refusal != NULL) {
    bp_status_t keep = st;
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", bp_status_message());
    bp__out_struct_write(api, "bp_support_t", out_refusal, &why, sizeof(why), BP__SUPPORT_FIRST_SIZE);
    if (keep != BP_OK) bp__error(keep, "%s", msg);
  }
  if (st == BP_UNIMPLEMENTED && !why.supported) bp__set_support_reason(why.reason);
  bp__region_checked_free(&c);
  return st;
}

void bp_region_retain(bp_region_t* region) {
  if (region != NULL) atomic_fetch_add(&region->refcount, 1);
}

void bp_region_release(bp_region_t* region) {
  if (region != NULL && atomic_fetch_sub(&region->refcount, 1) == 1) region_free(region);
}

bp_device_t* bp_region_device(const bp_region_t* region) { return region ? region->device : NULL; }
uint32_t bp_region_num_args(const bp_region_t* region) { return region ? region->num_args : 0; }
uint32_t bp_region_num_inputs(const bp_region_t* region) { return region ? region->num_inputs : 0; }

bp_status_t bp_region_get_info(const bp_region_t* region, bp_region_info_t* out) {
  BP__REQUIRE_ARG("bp_region_get_info", region);
  BP__REQUIRE_ARG("bp_region_get_info", out);
  return bp__out_struct_write("bp_region_get_info", "bp_region_info_t", out, &region->info,
                              sizeof(region->info), BP__REGION_INFO_FIRST_SIZE);
}

static int region_may_alias(const void* ctx, uint32_t output, uint32_t input) {
  const bp_region_t* r = ctx;
  for (uint32_t k = 0; k < r->info.num_aliases; ++k)
    if (r->aliases[k].output == output && r->aliases[k].input == input) return 1;
  return 0;
}

bp_status_t bp_region_launch(bp_stream_t* stream, bp_region_t* region,
                             const bp_tensor_t* const* args, uint32_t num_args,
                             bp_buffer_t* workspace) {
  const char* api = "bp_region_launch";
  BP__REQUIRE_ARG(api, stream);
  BP__REQUIRE_ARG(api, region);
  if (num_args != region->num_args)
    return bp__error(BP_INVALID_ARGUMENT, "%s: the region takes %u arguments, %u were given", api,
                     region->num_args, num_args);
  if (num_args > 0 && args == NULL) return bp__error(BP_INVALID_ARGUMENT, "%s: args is NULL", api);
  if (stream->device != region->device)
    return bp__error(BP_INVALID_ARGUMENT, "%s: the region was compiled for device '%s', the stream is on '%s'",
                     api, region->device->name, stream->device->name);
  bp_status_t st = bp__exec_check_operands(api, stream, args, region->num_inputs, num_args,
                                           region_may_alias, region);
  if (st != BP_OK) return st;
  for (uint32_t i = 0; i < num_args; ++i) {
    const bp_tensor_desc_t* want = &region->args[i];
    const bp_tensor_t* t = args[i];
    if (t->dtype != want->dtype || !bp__shape_equal(t->rank, t->sizes, want->rank, want->sizes)) {
      char s0[192], s1[192];
      return bp__error(BP_INVALID_ARGUMENT, "%s: argument %u is %s %s; the region was compiled for %s %s",
                       api, i, bp_dtype_name(t->dtype), bp__shape_str(t->rank, t->sizes, s0, sizeof(s0)),
                       bp_dtype_name(want->dtype), bp__shape_str(want->rank, want->sizes, s1, sizeof(s1)));
    }
  }
  bp_tensor_desc_t ws;
  const bp_tensor_desc_t* wsp = NULL;
  if (region->info.workspace_bytes > 0) {
    if (workspace == NULL)
      return bp__error(BP_INVALID_ARGUMENT, "%s: the region needs a workspace of %llu bytes", api,
                       (unsigned long long)region->info.workspace_bytes);
    if (workspace->device != region->device || workspace->size < region->info.workspace_bytes)
      return bp__error(BP_INVALID_ARGUMENT,
                       "%s: the workspace (%llu bytes on '%s') is not %llu bytes on '%s'", api,
                       (unsigned long long)workspace->size, workspace->device->name,
                       (unsigned long long)region->info.workspace_bytes, region->device->name);
    memset(&ws, 0, sizeof(ws));
    ws.struct_size = sizeof(ws);
    ws.dtype = BP_DTYPE_U8;
    ws.rank = 1;
    ws.sizes[0] = (int64_t)workspace->size;
    ws.strides[0] = 1;
    ws.buffer = workspace->handle;
    wsp = &ws;
  }
  bp_tensor_desc_t small[8];
  const bp_tensor_desc_t* small_ptrs[8];
  bp_tensor_desc_t* descs = num_args <= 8 ? small : calloc(num_args, sizeof(*descs));
  const bp_tensor_desc_t** ptrs = num_args <= 8 ? small_ptrs : calloc(num_args, sizeof(*ptrs));
  if (descs == NULL || ptrs == NULL) {
    st = bp__error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", api);
    goto done;
  }
  for (uint32_t i = 0; i < num_args; ++i) {
    bp__desc_from_tensor(args[i], &descs[i]);
    bp__set_buffer(&descs[i], args[i]);
    ptrs[i] = &descs[i];
  }
  const bp_plugin_t* plugin = region->device->plugin;
  if (plugin->exec.executable_launch == NULL) {
    st = bp__error(BP_UNIMPLEMENTED, "%s: backend '%s' has no executable_launch", api, plugin->name);
    goto done;
  }
  bp__clear_error();
  st = BP__NOTE_CALL(plugin, "executable_launch", NULL,
                     plugin->exec.executable_launch(stream->handle, region->handle, num_args, ptrs, wsp));
  if (st != BP_OK) {
    st = bp__plugin_error(plugin, st, "region launch");
    goto done;
  }
  bp__exec_note_use(stream, args, num_args);
  if (workspace != NULL) bp__buffer_note_use(workspace, stream);
done:
  if (descs != small) free(descs);
  if (ptrs != small_ptrs) free(ptrs);
  return st;
}
