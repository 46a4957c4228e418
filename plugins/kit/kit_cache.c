/* backplane plugin kit: cache folder and cache files (bp_kit_cache.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL /* xxHash header only: nothing to link */
#include <xxhash.h>

#include "bp_file.h"
#include "bp_kit_cache.h"

/* Creates `dir` (mode 0700) unless it is a folder already; 0 on success,
 * else an errno (ENOTDIR: something else is there). */
static int make_dir(const char* dir) {
  if (mkdir(dir, 0700) == 0) return 0;
  int err = errno;
  struct stat st;
  if (err == EEXIST) return stat(dir, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
  return err;
}

int bp_kit_cache_dir(char* out, size_t cap, char* why, size_t why_cap) {
  const char* xdg = getenv("XDG_CACHE_HOME");
  const char* home = getenv("HOME");
  char dir[600];
  out[0] = 0;
  if (xdg && xdg[0] == '/') {
    snprintf(dir, sizeof dir, "%.560s", xdg);
  } else if (home && home[0] == '/') {
    snprintf(dir, sizeof dir, "%.560s/.cache", home);
  } else {
    snprintf(why, why_cap, "neither XDG_CACHE_HOME nor HOME is set");
    return 0;
  }
  int err = make_dir(dir);
  size_t n = strlen(dir);
  if (!err) {
    snprintf(dir + n, sizeof dir - n, "/backplane");
    err = make_dir(dir);
  }
  if (err) {
    snprintf(why, why_cap, "cannot use %s (%s)", dir, err == ENOTDIR ? "not a folder" : strerror(err));
    return -1;
  }
  if ((size_t)snprintf(out, cap, "%s", dir) >= cap) {
    out[0] = 0;
    snprintf(why, why_cap, "the cache path is too long");
    return -1;
  }
  return 1;
}

void* bp_kit_cache_read(const char* path, size_t max_bytes, size_t* out_size, int* out_state, char* why,
                        size_t why_cap) {
  *out_size = 0;
  *out_state = BP_KIT_CACHE_BAD;
  why[0] = 0;
  int fd = -1;
  struct stat st;
  int err = bp_file_open_regular(path, &fd, &st);
  if (err == BP_FILE_NOT_REGULAR) {
    snprintf(why, why_cap, "%s, not a regular file", bp_file_kind(st.st_mode));
    *out_state = BP_KIT_CACHE_NOT_FILE;
    return NULL;
  }
  if (err) {
    *out_state = BP_KIT_CACHE_ABSENT;
    return NULL;
  }
  if ((uint64_t)st.st_size > max_bytes) {
    snprintf(why, why_cap, "%lld bytes, over the %zu-byte limit", (long long)st.st_size, max_bytes);
    close(fd);
    return NULL;
  }
  size_t n = (size_t)st.st_size;
  unsigned char* data = malloc(n ? n : 1);
  size_t got = 0;
  while (data && got < n) {
    ssize_t r = read(fd, data + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (!data || got != n) {
    free(data);
    snprintf(why, why_cap, "unreadable");
    return NULL;
  }
  *out_size = n;
  *out_state = BP_KIT_CACHE_OK;
  return data;
}

int bp_kit_cache_write(const char* path, const void* data, size_t size) {
  char tmp[1200];
  /* Unique per process and call site: writers may race on one path. */
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.%ld.%p.tmp", path, (long)getpid(), (void*)&tmp) >= sizeof tmp)
    return ENAMETOOLONG;
  FILE* f = fopen(tmp, "wb");
  if (!f) return errno ? errno : EIO;
  int ok = fwrite(data, 1, size, f) == size;
  if (fclose(f) != 0) ok = 0;
  if (ok && rename(tmp, path) != 0) ok = 0;
  if (!ok) {
    int err = errno ? errno : EIO;
    remove(tmp);
    return err;
  }
  return 0;
}

uint64_t bp_kit_checksum64(const void* data, size_t size, uint64_t seed) {
  return (uint64_t)XXH3_64bits_withSeed(data, size, seed);
}
