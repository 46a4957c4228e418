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

/* Creates `path`, a folder other than the default, and its missing
 * parents (mode 0700); 0 on success, else an errno. */
static int make_dirs(const char* path) {
  char dir[600];
  if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir) return ENAMETOOLONG;
  for (char* p = dir + 1; *p; ++p) {
    if (*p != '/') continue;
    *p = 0;
    int err = make_dir(dir);
    *p = '/';
    if (err) return err;
  }
  return make_dir(dir);
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

int bp_kit_cache_dir_env(const char* env_name, char* out, size_t cap, char* why, size_t why_cap) {
  const char* env = getenv(env_name);
  out[0] = 0;
  if (!env) return bp_kit_cache_dir(out, cap, why, why_cap);
  if (!env[0] || strcmp(env, "0") == 0) {
    snprintf(why, why_cap, "%s=%s turns the cache off", env_name, env);
    return 0;
  }
  if (env[0] != '/') {
    snprintf(why, why_cap, "%s=%s is not an absolute path", env_name, env);
    return -1;
  }
  int err = make_dirs(env);
  if (err) {
    snprintf(why, why_cap, "cannot use %s=%s (%s)", env_name, env, err == ENOTDIR ? "not a folder" : strerror(err));
    return -1;
  }
  if ((size_t)snprintf(out, cap, "%s", env) >= cap) {
    out[0] = 0;
    snprintf(why, why_cap, "%s is too long", env_name);
    return -1;
  }
  return 1;
}

#define ENTRY_MAGIC "BPCENTRY"
#define ENTRY_SEED 0x6270636163686531ull /* "bpcache1" */

/* The header of an entry file, in the writer's byte order (a file of the
 * other order fails the checks as corrupt). */
typedef struct entry_header {
  char magic[8];
  uint32_t key_size;
  uint32_t reserved; /* 0 */
  uint64_t payload_size;
  uint64_t checksum; /* of the key and payload (the bytes after the header), seeded with ENTRY_SEED */
} entry_header_t;
_Static_assert(sizeof(entry_header_t) == 32, "entry header layout");

void bp_kit_cache_text_id(const void* text, size_t size, char* out, size_t cap) {
  snprintf(out, cap, "%016llx-%016llx-%zu", (unsigned long long)bp_kit_checksum64(text, size, 0),
           (unsigned long long)bp_kit_checksum64(text, size, 0x9e3779b97f4a7c15ull), size);
}

int bp_kit_cache_entry_path(const char* dir, const char* prefix, const char* key, char* out, size_t cap) {
  uint64_t h = bp_kit_checksum64(key, strlen(key), ENTRY_SEED);
  if ((size_t)snprintf(out, cap, "%s/%s-%016llx.bin", dir, prefix, (unsigned long long)h) >= cap) {
    out[0] = 0;
    return 0;
  }
  return 1;
}

void* bp_kit_cache_entry_read(const char* path, const char* key, size_t max_bytes, size_t* out_size,
                              int* out_state, char* why, size_t why_cap) {
  *out_size = 0;
  size_t n = 0;
  unsigned char* data = bp_kit_cache_read(path, max_bytes, &n, out_state, why, why_cap);
  if (!data) return NULL;
  entry_header_t h;
  const size_t key_size = strlen(key);
  *out_state = BP_KIT_CACHE_BAD;
  if (n < sizeof h) {
    snprintf(why, why_cap, "truncated: %zu bytes, shorter than the %zu-byte header", n, sizeof h);
  } else if (memcpy(&h, data, sizeof h), memcmp(h.magic, ENTRY_MAGIC, sizeof h.magic) != 0) {
    snprintf(why, why_cap, "not a cache entry");
  } else if (h.key_size > n - sizeof h || h.payload_size != n - sizeof h - h.key_size) {
    snprintf(why, why_cap, "truncated or padded: %zu bytes after the header, the header says %llu + %u",
             n - sizeof h, (unsigned long long)h.payload_size, h.key_size);
  } else if (h.checksum != bp_kit_checksum64(data + sizeof h, n - sizeof h, ENTRY_SEED)) {
    snprintf(why, why_cap, "checksum mismatch (corrupt)");
  } else if (h.key_size != key_size || memcmp(data + sizeof h, key, key_size) != 0) {
    *out_state = BP_KIT_CACHE_FOREIGN;
    snprintf(why, why_cap, "written for another key (%.*s)", (int)(h.key_size < 120 ? h.key_size : 120),
             (const char*)data + sizeof h);
  } else {
    size_t size = (size_t)h.payload_size;
    memmove(data, data + sizeof h + key_size, size);
    *out_size = size;
    *out_state = BP_KIT_CACHE_OK;
    why[0] = 0;
    return data;
  }
  free(data);
  return NULL;
}

int bp_kit_cache_entry_write(const char* path, const char* key, const void* payload, size_t size) {
  const size_t key_size = strlen(key);
  if (key_size > UINT32_MAX || size > SIZE_MAX - sizeof(entry_header_t) - key_size) return EOVERFLOW;
  entry_header_t h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, ENTRY_MAGIC, sizeof h.magic);
  h.key_size = (uint32_t)key_size;
  h.payload_size = size;
  unsigned char* file = malloc(sizeof h + key_size + size);
  if (!file) return ENOMEM;
  memcpy(file + sizeof h, key, key_size);
  if (size) memcpy(file + sizeof h + key_size, payload, size);
  h.checksum = bp_kit_checksum64(file + sizeof h, key_size + size, ENTRY_SEED);
  memcpy(file, &h, sizeof h);
  int err = bp_kit_cache_write(path, file, sizeof h + key_size + size);
  free(file);
  return err;
}

uint64_t bp_kit_checksum64(const void* data, size_t size, uint64_t seed) {
  return (uint64_t)XXH3_64bits_withSeed(data, size, seed);
}
