/* backplane plugin kit: the per-user cache folder and cache files of
 * compiled programs (pipelines, kernel binaries).
 *
 * The folder is $XDG_CACHE_HOME/backplane, else $HOME/.cache/backplane
 * (absolute paths only), created with mode 0700. Files are read only when
 * they are regular files under a size limit, and written atomically (a
 * temporary file renamed over the old one), so a reader never sees half a
 * file and two processes never interleave. What a file holds and how it is
 * validated is the caller's. Thread-safe (no state).
 */
#ifndef BACKPLANE_KIT_CACHE_H_
#define BACKPLANE_KIT_CACHE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Writes the cache folder's path into `out` (creating it) and returns 1;
 * 0 when none is configured (neither XDG_CACHE_HOME nor HOME: nothing to
 * warn about), -1 when it cannot be used; the reason in `why` for both. */
int bp_kit_cache_dir(char* out, size_t cap, char* why, size_t why_cap);

enum bp_kit_cache_state {
  BP_KIT_CACHE_OK = 0,       /* read */
  BP_KIT_CACHE_ABSENT = 1,   /* no such file: the usual first run */
  BP_KIT_CACHE_NOT_FILE = 2, /* not a regular file: ignore it, never write over it */
  BP_KIT_CACHE_BAD = 3,      /* unreadable, over the limit or corrupt: ignore it, rewrite it */
  BP_KIT_CACHE_FOREIGN = 4   /* a valid entry of another key: ignore it, rewrite it */
};
/* Reads `path` whole: the bytes (malloc'd, the caller frees) and their
 * count, or NULL with *out_state saying why (and the reason in `why` for
 * NOT_FILE and BAD). */
void* bp_kit_cache_read(const char* path, size_t max_bytes, size_t* out_size, int* out_state, char* why,
                        size_t why_cap);

/* Writes `size` bytes to `path` atomically; 0 on success, else an errno. */
int bp_kit_cache_write(const char* path, const void* data, size_t size);

/* ---- entries: one compiled program per file ---------------------------
 * A file holds a 32-byte header (magic "BPCENTRY", the key's length, the
 * payload's size, a checksum of key and payload), the key, then the
 * payload. The key is text naming everything the payload depends on
 * (driver and its version, plugin version, target, compiler options, a
 * hash of the source), so a driver or plugin update, another machine's
 * file or a name collision never hands back a stale payload. */

/* The source's part of a key: two independently seeded 64-bit checksums
 * of `text` and its length ("<16 hex>-<16 hex>-<size>", under 64 bytes). */
void bp_kit_cache_text_id(const void* text, size_t size, char* out, size_t cap);

/* The folder for entries, configured by the environment variable
 * `env_name` (BP_<API>_PROGRAM_CACHE): unset, bp_kit_cache_dir's; set to
 * an absolute path, that folder (created with mode 0700); set to nothing
 * or "0", off. Returns 1 with the path in `out`, 0 when off or none is
 * configured, -1 when it cannot be used; the reason in `why` for 0 and -1. */
int bp_kit_cache_dir_env(const char* env_name, char* out, size_t cap, char* why, size_t why_cap);

/* `dir`/`prefix`-<16 hex digits: the key's checksum>.bin into `out`;
 * 0 when it does not fit (out left empty), else 1. */
int bp_kit_cache_entry_path(const char* dir, const char* prefix, const char* key, char* out, size_t cap);

/* Reads the entry at `path` for `key`: the payload (malloc'd, the caller
 * frees) and its size, or NULL with *out_state ABSENT, NOT_FILE, BAD
 * (truncated, another format, a checksum mismatch) or FOREIGN (the key
 * differs), the reason in `why` for all but ABSENT. */
void* bp_kit_cache_entry_read(const char* path, const char* key, size_t max_bytes, size_t* out_size,
                              int* out_state, char* why, size_t why_cap);

/* Writes the entry (header, key, payload) atomically as
 * bp_kit_cache_write does; 0 on success, else an errno. */
int bp_kit_cache_entry_write(const char* path, const char* key, const void* payload, size_t size);

/* A 64-bit checksum of `size` bytes (XXH3-64 with `seed`; tens of GB/s),
 * for the validation of cached or saved bytes: catches corruption, not
 * tampering. Pure. */
uint64_t bp_kit_checksum64(const void* data, size_t size, uint64_t seed);

#ifdef __cplusplus
}
#endif
#endif /* BACKPLANE_KIT_CACHE_H_ */
