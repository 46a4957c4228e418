/* backplane core: opening the files the loader is told about (manifests,
 * plugin libraries) and the trust policy for plugin files and folders.
 *
 * Every such file goes through bp__loader_open_file: opened non-blocking and
 * refused unless it is a regular file (a FIFO named as a plugin would
 * otherwise block dlopen or read forever), then checked against the policy:
 *
 *   a plugin library or manifest that is writable by other users (o+w), or
 *   that lies in a folder others may write to (o+w without the sticky bit),
 *   is refused with PERMISSION_DENIED; a plugin folder searched for
 *   manifests is refused when others may write to it (sticky or not: anyone
 *   could add a manifest). Symlinks are followed; the checks apply to the
 *   target and the target's folder. BACKPLANE_ALLOW_INSECURE_PLUGINS=1
 *   turns the refusals into warnings.
 *
 * Group write is allowed: it is an administrator's deliberate delegation,
 * and user-private groups (umask 002) make every build tree group-writable.
 * The check and the later dlopen are two steps (as in the Vulkan loader);
 * the policy guards against misconfigured permissions, not against a
 * process that already runs as the file's owner.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bp_file.h"
#include "loader.h"

/* Nonzero when BACKPLANE_ALLOW_INSECURE_PLUGINS=1 (a malformed value warns
 * and keeps the policy). */
static int insecure_allowed(void) {
  return bp__env_flag("BACKPLANE_ALLOW_INSECURE_PLUGINS", 0,
                      "refusing plugin files and folders that others may write");
}

/* The policy's answer for a problem described by `problem` (e.g. "library
 * '/x' is writable by every user"): PERMISSION_DENIED with the message, or
 * BP_OK after a warning when insecure plugins are allowed. */
static bp_status_t refuse(const char* problem) {
  if (insecure_allowed()) {
    bp__log(BP_LOG_WARN, "%s; loaded anyway (BACKPLANE_ALLOW_INSECURE_PLUGINS=1)", problem);
    return BP_OK;
  }
  return bp__error(BP_PERMISSION_DENIED,
                   "%s; refused (fix the permissions, or set "
                   "BACKPLANE_ALLOW_INSECURE_PLUGINS=1 to load it anyway)",
                   problem);
}

bp_status_t bp__loader_check_folder(const char* path) {
  struct stat st;
  char problem[PATH_MAX + 128];
  if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode) || !(st.st_mode & S_IWOTH)) return BP_OK;
  snprintf(problem, sizeof(problem),
           "plugin folder '%s' is writable by every user (anyone could add a manifest)", path);
  return refuse(problem);
}

/* The trust policy for an open plugin file: `st` is its fstat. */
static bp_status_t check_trusted(const char* what, const char* path, const struct stat* st) {
  char problem[2 * PATH_MAX + 128];
  if (st->st_mode & S_IWOTH) {
    snprintf(problem, sizeof(problem), "%s '%s' is writable by every user", what, path);
    bp_status_t status = refuse(problem);
    if (status != BP_OK) return status;
  }
  char folder[PATH_MAX];
  struct stat fst;
  if (!realpath(path, folder)) return BP_OK; /* it was just opened; nothing to add */
  char* slash = strrchr(folder, '/');
  if (!slash) return BP_OK;
  slash[slash == folder ? 1 : 0] = '\0'; /* keep "/" itself */
  if (stat(folder, &fst) != 0 || !(fst.st_mode & S_IWOTH) || (fst.st_mode & S_ISVTX))
    return BP_OK; /* with the sticky bit others cannot replace the file */
  snprintf(problem, sizeof(problem),
           "%s '%s' lies in folder '%s', which every user may write (anyone could replace the "
           "file)",
           what, path, folder);
  return refuse(problem);
}

bp_status_t bp__loader_open_file(const char* path, const char* what, int* out_fd) {
  struct stat st;
  int fd = -1;
  int err = bp_file_open_regular(path, &fd, &st);
  if (err == BP_FILE_NOT_REGULAR)
    return bp__error(BP_INVALID_ARGUMENT, "%s '%s' is %s, not a regular file", what, path,
                     bp_file_kind(st.st_mode));
  if (err == ENOENT || err == ENOTDIR)
    return bp__error(BP_NOT_FOUND, "%s '%s' does not exist", what, path);
  if (err == EACCES || err == EPERM)
    return bp__error(BP_PERMISSION_DENIED, "cannot open %s '%s': %s", what, path, strerror(err));
  if (err != 0)
    return bp__error(BP_INVALID_ARGUMENT, "cannot open %s '%s': %s", what, path, strerror(err));
  bp_status_t status = check_trusted(what, path, &st);
  if (status != BP_OK) {
    close(fd);
    return status;
  }
  *out_fd = fd;
  return BP_OK;
}
