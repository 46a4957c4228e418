/* backplane: opening a file we were told about (a manifest, a plugin
 * library, a cache or compiled-program file named by a path or a variable).
 * The one implementation shared by the core's loader and the plugins.
 *
 * The file is opened non-blocking, so a FIFO or a device named by mistake
 * (or by an attacker) cannot block the caller, and then refused unless
 * fstat says it is a regular file. Header only; thread-safe.
 */
#ifndef BACKPLANE_PLUGIN_COMMON_FILE_H_
#define BACKPLANE_PLUGIN_COMMON_FILE_H_

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* What bp_file_open_regular returns for a path that exists but is not a
 * regular file (errno values are positive). */
#define BP_FILE_NOT_REGULAR (-1)

/* "a folder", "a FIFO", ... for messages about `mode`. */
static inline const char* bp_file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

/* Opens `path` read-only (close-on-exec, blocking mode restored after the
 * check, so reads behave normally). On success returns 0, *out_fd owned by
 * the caller, *out_st its fstat. Otherwise returns the errno of open/fstat,
 * or BP_FILE_NOT_REGULAR with *out_st filled (say which with bp_file_kind). */
static inline int bp_file_open_regular(const char* path, int* out_fd, struct stat* out_st) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return errno ? errno : EIO;
  if (fstat(fd, out_st) != 0) {
    int err = errno ? errno : EIO;
    close(fd);
    return err;
  }
  if (!S_ISREG(out_st->st_mode)) {
    close(fd);
    return BP_FILE_NOT_REGULAR;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  *out_fd = fd;
  return 0;
}

#endif /* BACKPLANE_PLUGIN_COMMON_FILE_H_ */
