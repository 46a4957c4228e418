/* backplane core: reading environment variables. A variable that is set but
 * malformed is never mapped silently: it gets one warning naming it, the
 * value and what is used instead. Values are read at the moment they are
 * needed (getenv is not synchronized against setenv: like every C library
 * user, applications must not change the environment while backplane runs
 * calls on other threads). */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int bp__env_flag(const char* name, int dflt, const char* meaning_of_default) {
  const char* value = getenv(name);
  if (!value || !*value) return dflt;
  if (strcmp(value, "0") == 0) return 0;
  if (strcmp(value, "1") == 0) return 1;
  char shown[96];
  bp__log(BP_LOG_WARN, "%s='%s' is not 0 or 1; using %d (%s)", name,
          bp__text_clean(value, shown, sizeof(shown)), dflt, meaning_of_default);
  return dflt;
}
