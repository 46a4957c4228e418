/* References of the fused_ew family: fp64 (or exact) plain loops. */
#include "ref.h"

/* No group yet: the family's ops have no reference. */
const bpc_ref_family_t bpc_ref_family_fused_ew = {"fused_ew", NULL, 0};
