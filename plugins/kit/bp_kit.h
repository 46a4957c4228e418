/* backplane plugin kit: everything a plugin would otherwise copy.
 *
 * Installed with backplane (find_package(backplane CONFIG) gives the
 * static library backplane::plugin_kit and bp_add_plugin()); see
 * docs/PLUGIN_GUIDE.md. Not part of the ABI: the kit is linked into each
 * plugin, so a plugin built against one kit keeps working with newer hosts.
 *
 *  bp_plugin_common.h  dtypes, small-float conversions, the error slot,
 *                      descriptor checks, strided iteration
 *  bp_kit_plugin.h     negotiation (BP_KIT_PLUGIN_ENTRY), errors and
 *                      logging through the host, support answers, bounded
 *                      copy-out into caller-sized structs
 *  bp_kit_ops.h        per-op metadata generated from ops.def, call checks
 *  bp_kit_stream.h     in-order stream queues with a completion thread,
 *                      host functions, events
 *  bp_kit_dynlib.h     dlopen by a list of names, symbol tables as X-macros
 */
#ifndef BACKPLANE_KIT_H_
#define BACKPLANE_KIT_H_

#include "bp_kit_dynlib.h"
#include "bp_kit_ops.h"
#include "bp_kit_plugin.h"
#include "bp_kit_stream.h"
#include "bp_plugin_common.h"

#endif /* BACKPLANE_KIT_H_ */
