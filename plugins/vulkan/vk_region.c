/* backplane Vulkan plugin: compiled regions (the exec table).
 *
 * EW_PROGRAM regions run through the elementwise-program kernel
 * (vk_launch_ew_program, shaders/ew.comp): compiling checks the program
 * against the declared fusion (limits, compute dtype, opcodes) and keeps a
 * copy; a launch records it like launch_ew_program. Every other kind is
 * refused with a reason; there is no claim slot (the core answers from
 * query_support) and no saved bytes (a recompile is cheap).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_gpu_ops.h"
#include "vk_internal.h"

struct bpp_executable_s {
  bp_ew_program_t prog;
  bp_ew_instr_t* instrs;
  bp_scalar_t* consts;
  uint32_t num_args, num_inputs;
  uint32_t num_aliases;
  bp_region_alias_t* aliases;
};

static void exe_free(struct bpp_executable_s* e) {
  if (!e) return;
  free(e->instrs);
  free(e->consts);
  free(e->aliases);
  free(e);
}

static bp_status_t refuse(bp_support_t* out, uint32_t reason, const char* what) {
  if (out) {
    out->supported = 0;
    out->reason = reason;
    out->requires_contiguous = 0;
    snprintf(out->message, sizeof out->message, "vulkan: %s", what);
  }
  return vk_error(BP_UNIMPLEMENTED, "vulkan: region_compile: %s", what);
}

static bp_status_t region_compile(bpp_device_t d, const bp_region_desc_t* r, bp_support_t* why,
                                  bpp_executable_t* out) {
  if (!d || !r || !out) return vk_error(BP_INVALID_ARGUMENT, "vulkan: region_compile: NULL argument");
  *out = NULL;
  if (r->kind != BP_REGION_EW_PROGRAM || !r->program)
    return refuse(why, BP_SUPPORT_OP, "only EW_PROGRAM regions are compiled (matmul epilogues, "
                                      "patterns and graphs run as eager ops here)");
  const bp_ew_program_t* p = r->program;
  bp_fusion_caps_t caps = {.struct_size = sizeof caps};
  bp_status_t st = vk_query_fusion(d, &caps);
  if (st) return st;
  char msg[200];
  int reason = bp_gpu_ew_program_fits(&caps, p, msg, sizeof msg);
  if (reason) return refuse(why, (uint32_t)reason, msg);
  struct bpp_executable_s* e = calloc(1, sizeof *e);
  if (e) {
    e->instrs = calloc(p->num_instrs ? p->num_instrs : 1, sizeof *e->instrs);
    e->consts = calloc(p->num_constants ? p->num_constants : 1, sizeof *e->consts);
    e->aliases = calloc((size_t)r->num_args * r->num_args + 1, sizeof *e->aliases);
  }
  if (!e || !e->instrs || !e->consts || !e->aliases) {
    exe_free(e);
    return vk_error(BP_RESOURCE_EXHAUSTED, "vulkan: region_compile: out of memory");
  }
  for (uint32_t i = 0; i < p->num_instrs; i++) memcpy(&e->instrs[i], BP_EW_INSTR_AT(p, i), sizeof *e->instrs);
  if (p->num_constants) memcpy(e->consts, p->constants, sizeof *e->consts * p->num_constants);
  e->prog = *p;
  e->prog.struct_size = sizeof e->prog;
  e->prog.instrs = e->instrs;
  e->prog.instr_stride = sizeof *e->instrs;
  e->prog.constants = e->consts;
  e->prog.next = NULL;
  e->num_args = r->num_args;
  e->num_inputs = r->num_inputs;
  e->num_aliases = bp_gpu_ew_region_aliases(r, e->aliases);
  *out = e;
  return BP_OK;
}

static bp_status_t get_info(bpp_executable_t e, bp_region_info_t* out) {
  if (!e || !out || out->struct_size < BP_REGION_INFO_V1_SIZE)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: executable_get_info: NULL or short argument");
  bp_region_info_t info = {.struct_size = sizeof info};
  info.num_aliases = e->num_aliases;
  info.alias_stride = sizeof(bp_region_alias_t);
  info.aliases = e->aliases;
  bp_kit_copy_out(out, &info, sizeof info);
  return BP_OK;
}

static bp_status_t launch(bpp_stream_t s, bpp_executable_t e, uint32_t num_args,
                          const bp_tensor_desc_t* const* args, const bp_tensor_desc_t* ws) {
  (void)ws;
  if (!s || !e || !args || num_args != e->num_args)
    return vk_error(BP_INVALID_ARGUMENT, "vulkan: executable_launch: NULL argument or %u arguments", num_args);
  pthread_mutex_lock(&s->enq_mu);
  bp_status_t st = vk_launch_ew_program(s, &e->prog, e->num_inputs, args, num_args - e->num_inputs,
                                        args + e->num_inputs);
  pthread_mutex_unlock(&s->enq_mu);
  return st;
}

/* The recorded work keeps nothing of the executable (the program travels
 * in the kernel's push constants and specialization). */
static void release(bpp_executable_t e) { exe_free(e); }

const bpp_exec_table_t vk_exec_table = {
    .struct_size = sizeof(bpp_exec_table_t),
    .region_compile = region_compile,
    .executable_get_info = get_info,
    .executable_launch = launch,
    .executable_release = release,
};
