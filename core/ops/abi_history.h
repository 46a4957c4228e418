/* backplane core: what each minor version of ABI 1 defines, and the gate
 * that keeps newer ops, dtypes and attribute fields away from plugins that
 * negotiated an older minor.
 *
 * The tables live in abi_history.c, the one place to extend when a minor
 * appends an op, a dtype or an attribute field. Pure functions, thread-safe.
 */
#ifndef BACKPLANE_CORE_ABI_HISTORY_H_
#define BACKPLANE_CORE_ABI_HISTORY_H_

#include <stddef.h>
#include <stdint.h>

#include "backplane/types.h"

/* An attribute struct's size as released in `minor` (one entry per minor
 * in which the struct grew, the first-released size included). Structs
 * without entries are unchanged since 1.0. */
typedef struct bp__attr_growth {
  uint32_t attrs_kind; /* enum bp__attrs_kind */
  uint32_t minor;
  uint32_t size;
  const char* fields; /* names of the fields `minor` appended ("" for the first release) */
} bp__attr_growth_t;

/* A field that `minor` gave a meaning inside bytes an attribute struct
 * already had as reserved (which callers must zero): bytes [offset, offset
 * + size). Zero keeps the old meaning. */
typedef struct bp__attr_field {
  uint32_t attrs_kind; /* enum bp__attrs_kind */
  uint32_t minor;
  uint32_t offset, size;
  const char* name;
} bp__attr_field_t;

typedef struct bp__abi_history {
  uint32_t num_minors;         /* minors 0 .. num_minors - 1; the last is the host's */
  const uint32_t* op_count;    /* op ids below op_count[m] exist at minor m */
  const uint32_t* dtype_count; /* dtype values below dtype_count[m] exist at minor m */
  uint32_t num_attr_growth;
  const bp__attr_growth_t* attr_growth;
  uint32_t num_attr_fields;
  const bp__attr_field_t* attr_fields;
} bp__abi_history_t;

/* This library's history (host minor = BP_ABI_VERSION_MINOR). */
__attribute__((visibility("hidden"))) const bp__abi_history_t* bp__abi_history(void);

/* 0 when `call` may be handed to a plugin that negotiated `plugin_minor`.
 * Otherwise 1, with *out_reason (enum bp_support_reason) and `msg` naming
 * the op, dtype or attribute field and both minors. A call is refused when
 * its op id or an operand's dtype is newer than plugin_minor, or when its
 * attribute struct has a nonzero byte past the size it had at
 * plugin_minor (appended fields default to zero, so zero is "not used"),
 * or a nonzero field that a later minor defined in once-reserved bytes. */
__attribute__((visibility("hidden"))) int bp__abi_gate(const bp__abi_history_t* h,
                                                       uint32_t plugin_minor,
                                                       uint32_t attrs_kind,
                                                       const char* op_name,
                                                       const bp_op_call_t* call,
                                                       uint32_t* out_reason, char* msg,
                                                       size_t cap);

#endif /* BACKPLANE_CORE_ABI_HISTORY_H_ */
