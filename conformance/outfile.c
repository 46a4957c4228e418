/* Opening the files bp-conform was told to write (reports, the journal).
 *
 * Only regular files (or paths that do not exist yet) are accepted: a FIFO
 * would block the run at its end (or forever), a device or a directory
 * cannot hold a report. The path is opened without blocking and checked on
 * the open descriptor, so a FIFO swapped in after a check is still refused.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bp_file.h"
#include "conform.h"

bp_status_t bpc_output_path_check(const char* path, char* msg, size_t msg_size) {
  struct stat sb;
  if (!path || !*path) {
    snprintf(msg, msg_size, "empty path");
    return BP_INVALID_ARGUMENT;
  }
  if (stat(path, &sb) != 0) {
    if (errno == ENOENT) return BP_OK; /* created when written */
    snprintf(msg, msg_size, "'%s': %s", path, strerror(errno));
    return BP_PERMISSION_DENIED;
  }
  if (!S_ISREG(sb.st_mode)) {
    snprintf(msg, msg_size, "'%s' is %s; reports and journals are written only to regular files",
             path, bp_file_kind(sb.st_mode));
    return BP_INVALID_ARGUMENT;
  }
  return BP_OK;
}

int bpc_output_open(const char* path, int append, char* msg, size_t msg_size) {
  int fd = open(path, O_RDWR | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0644);
  if (fd < 0) {
    /* ENXIO: a FIFO without a reader (O_NONBLOCK refuses instead of waiting). */
    if (errno == ENXIO) {
      snprintf(msg, msg_size, "'%s' is a FIFO; reports and journals are written only to regular files", path);
    } else {
      snprintf(msg, msg_size, "cannot open '%s': %s", path, strerror(errno));
    }
    return -1;
  }
  struct stat sb;
  if (fstat(fd, &sb) != 0) {
    snprintf(msg, msg_size, "cannot stat '%s': %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  if (!S_ISREG(sb.st_mode)) {
    snprintf(msg, msg_size, "'%s' is %s; reports and journals are written only to regular files", path,
             bp_file_kind(sb.st_mode));
    close(fd);
    return -1;
  }
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0 || (!append && ftruncate(fd, 0) != 0)) {
    snprintf(msg, msg_size, "cannot prepare '%s': %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  return fd;
}

FILE* bpc_output_fopen(const char* path, char* msg, size_t msg_size) {
  int fd = bpc_output_open(path, 0, msg, msg_size);
  if (fd < 0) return NULL;
  FILE* fp = fdopen(fd, "w");
  if (!fp) {
    snprintf(msg, msg_size, "cannot open '%s': %s", path, strerror(errno));
    close(fd);
  }
  return fp;
}
