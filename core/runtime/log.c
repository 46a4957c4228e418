/* backplane core: logging to stderr.
 *
 * The level comes from BACKPLANE_LOG (error|warn|info|debug, read once on
 * first use) or bp_log_set_level(); the default is warn. Each line is
 * written with one fputs so lines from concurrent threads do not interleave.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static atomic_int log_level = BP_LOG_WARN;
static pthread_once_t log_once = PTHREAD_ONCE_INIT;

static const char* const level_names[] = {"error", "warn", "info", "debug"};

static void log_init_from_env(void) {
  const char* env = getenv("BACKPLANE_LOG");
  if (!env || !*env) return;
  for (int32_t i = BP_LOG_ERROR; i <= BP_LOG_DEBUG; ++i) {
    if (strcasecmp(env, level_names[i]) == 0) {
      atomic_store(&log_level, i);
      return;
    }
  }
  if (strcasecmp(env, "warning") == 0) {
    atomic_store(&log_level, BP_LOG_WARN);
    return;
  }
  char shown[96];
  fprintf(stderr,
          "backplane[warn] BACKPLANE_LOG='%s' is not one of error|warn|info|debug; using warn\n",
          bp__text_clean(env, shown, sizeof(shown)));
}

BP_API void bp_log_set_level(int32_t level) {
  pthread_once(&log_once, log_init_from_env);
  if (level < BP_LOG_ERROR) level = BP_LOG_ERROR;
  if (level > BP_LOG_DEBUG) level = BP_LOG_DEBUG;
  atomic_store(&log_level, level);
}

int bp__log_enabled(int32_t level) {
  pthread_once(&log_once, log_init_from_env);
  return level <= atomic_load(&log_level);
}

void bp__log(int32_t level, const char* fmt, ...) {
  if (!bp__log_enabled(level)) return;
  if (level < BP_LOG_ERROR) level = BP_LOG_ERROR;
  if (level > BP_LOG_DEBUG) level = BP_LOG_DEBUG;
  char line[2048];
  int head = snprintf(line, sizeof(line), "backplane[%s] ", level_names[level]);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(line + head, sizeof(line) - (size_t)head - 1, fmt, ap);
  va_end(ap);
  size_t len = (n < 0) ? (size_t)head : strlen(line);
  line[len] = '\n';
  line[len + 1] = '\0';
  fputs(line, stderr);
}
