/* References of the reduce_ext family: fp64 (or exact) plain loops. */
#include "ref.h"

/* No group yet: the family's ops have no reference. */
const bpc_ref_family_t bpc_ref_family_reduce_ext = {"reduce_ext", NULL, 0};
