/* backplane core: plugin manifests.
 *
 * Format (cmake/plugin_manifest.json.in):
 *   {"file_format_version": "1.0.0",
 *    "plugin": {"name": "cpu", "library": "libbp_plugin_cpu.so", "abi_version": "1.0"}}
 * "library" is absolute or relative to the manifest's folder. Unknown keys
 * are ignored so later file format minors stay readable.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "loader.h"

/* Manifests are tiny; anything bigger is not one. */
#define BP__MANIFEST_MAX_BYTES (64 * 1024)

int bp__backend_name_valid(const char* name) {
  if (!name || !*name) return 0;
  size_t n = 0;
  for (const char* p = name; *p; ++p, ++n) {
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) return 0;
  }
  return n < 64;
}

void bp__manifest_free(bp__manifest_t* manifest) {
  if (!manifest) return;
  free(manifest->name);
  free(manifest->library);
  memset(manifest, 0, sizeof(*manifest));
}

/* Reads the whole file into a NUL-terminated heap buffer. The file is
 * opened by bp__loader_open_file: only regular files that pass the trust
 * policy are read (a FIFO would otherwise block discovery forever). */
static bp_status_t read_file(const char* path, char** out_text) {
  bp_status_t status = BP_OK;
  char* text = NULL;
  FILE* f = NULL;
  int fd = -1;
  if ((status = bp__loader_open_file(path, "manifest", &fd)) != BP_OK) return status;
  f = fdopen(fd, "rb");
  if (!f) {
    status = bp__error(BP_RESOURCE_EXHAUSTED, "cannot open manifest '%s': %s", path,
                       strerror(errno));
    close(fd);
    goto cleanup;
  }
  text = malloc(BP__MANIFEST_MAX_BYTES + 1);
  if (!text) {
    status = bp__error(BP_RESOURCE_EXHAUSTED, "out of memory reading manifest '%s'", path);
    goto cleanup;
  }
  size_t n = fread(text, 1, BP__MANIFEST_MAX_BYTES + 1, f);
  if (ferror(f)) {
    status = bp__error(BP_DATA_LOSS, "cannot read manifest '%s'", path);
    goto cleanup;
  }
  if (n > BP__MANIFEST_MAX_BYTES) {
    status = bp__error(BP_INVALID_ARGUMENT, "manifest '%s' is larger than %d bytes", path,
                       BP__MANIFEST_MAX_BYTES);
    goto cleanup;
  }
  if (memchr(text, '\0', n) != NULL) {
    status = bp__error(BP_INVALID_ARGUMENT, "manifest '%s' contains a NUL byte (not JSON text)",
                       path);
    goto cleanup;
  }
  text[n] = '\0';
  *out_text = text;
  text = NULL;
cleanup:
  free(text);
  if (f) fclose(f);
  return status;
}

/* Offset of the first \u0000 escape in a JSON string of `text`, or -1.
 * cJSON would decode it to a NUL byte that silently cuts the string (a
 * library path "a.so\u0000../../evil" would load "a.so"). Escapes are
 * skipped pairwise, so "\\u0000" (a backslash, then "u0000") is not one. */
static long escaped_nul(const char* text) {
  for (const char* p = text; *p; ++p) {
    if (*p != '\\') continue;
    if (p[1] == 'u' && strncmp(p + 2, "0000", 4) == 0) return (long)(p - text);
    if (p[1]) ++p; /* the escaped character */
  }
  return -1;
}

/* Nonzero when `s` holds a byte below 0x20 or DEL. */
static int has_control(const char* s) {
  for (const unsigned char* p = (const unsigned char*)s; *p; ++p)
    if (*p < 0x20 || *p == 0x7f) return 1;
  return 0;
}

static const char* string_field(const cJSON* object, const char* key) {
  const cJSON* item = cJSON_GetObjectItemCaseSensitive(object, key);
  return cJSON_IsString(item) ? item->valuestring : NULL;
}

/* "1.0" -> 1, 0. Strict: 1-3 digits '.' 1-3 digits, nothing else (no sign,
 * no spaces, which sscanf's %u would accept). */
static int parse_abi_version(const char* text, uint32_t* out_major, uint32_t* out_minor) {
  uint32_t parts[2] = {0, 0};
  const char* p = text;
  for (int i = 0; i < 2; ++i) {
    int digits = 0;
    for (; *p >= '0' && *p <= '9'; ++p, ++digits) {
      if (digits == 3) return -1;
      parts[i] = parts[i] * 10u + (uint32_t)(*p - '0');
    }
    if (digits == 0 || *p != (i == 0 ? '.' : '\0')) return -1;
    ++p;
  }
  *out_major = parts[0];
  *out_minor = parts[1];
  return 0;
}

bp_status_t bp__manifest_read(const char* path, bp__manifest_t* out_manifest) {
  bp_status_t status = BP_OK;
  char* text = NULL;
  cJSON* root = NULL;
  bp__manifest_t m = {0};
  memset(out_manifest, 0, sizeof(*out_manifest));

  status = read_file(path, &text);
  if (status != BP_OK) goto cleanup;
  const long nul_at = escaped_nul(text);
  if (nul_at >= 0) {
    status = bp__error(BP_INVALID_ARGUMENT,
                       "manifest '%s' has a NUL character (\\u0000) in a string at byte %ld; "
                       "refused (it would silently cut the string, e.g. the library path)",
                       path, nul_at);
    goto cleanup;
  }
  /* Strict: nothing but whitespace may follow the JSON value. The error
   * position comes back through `end` (cJSON_GetErrorPtr is a global shared
   * by all threads). */
  const char* end = NULL;
  root = cJSON_ParseWithOpts(text, &end, 1);
  if (!root) {
    long offset = end ? (long)(end - text) : -1;
    status = bp__error(BP_INVALID_ARGUMENT, "manifest '%s' is not valid JSON (error near byte %ld)",
                       path, offset);
    goto cleanup;
  }
  const cJSON* plugin = cJSON_GetObjectItemCaseSensitive(root, "plugin");
  const char* format = string_field(root, "file_format_version");
  char shown[72];
  if (!format || strncmp(format, "1.", 2) != 0) {
    status = bp__error(BP_INVALID_ARGUMENT,
                       "manifest '%s': \"file_format_version\" is %s, expected \"1.x.y\"", path,
                       format ? bp__text_clean(format, shown, sizeof(shown)) : "missing");
    goto cleanup;
  }
  if (!cJSON_IsObject(plugin)) {
    status = bp__error(BP_INVALID_ARGUMENT, "manifest '%s' lacks the \"plugin\" object", path);
    goto cleanup;
  }
  const char* name = string_field(plugin, "name");
  const char* library = string_field(plugin, "library");
  const char* abi = string_field(plugin, "abi_version");
  const char* missing = !name ? "name" : !library ? "library" : !abi ? "abi_version" : NULL;
  if (missing) {
    status = bp__error(BP_INVALID_ARGUMENT, "manifest '%s' lacks the string \"plugin.%s\"", path,
                       missing);
    goto cleanup;
  }
  if (!bp__backend_name_valid(name)) {
    status = bp__error(BP_INVALID_ARGUMENT,
                       "manifest '%s': backend name '%s' is invalid (1-63 characters of [a-z0-9_])",
                       path, bp__text_clean(name, shown, sizeof(shown)));
    goto cleanup;
  }
  if (!*library) {
    status = bp__error(BP_INVALID_ARGUMENT, "manifest '%s': \"plugin.library\" is empty", path);
    goto cleanup;
  }
  if (has_control(library) || strlen(library) >= PATH_MAX) {
    status = bp__error(BP_INVALID_ARGUMENT,
                       "manifest '%s': \"plugin.library\" '%s' is not a usable path (control "
                       "characters, or longer than %d bytes)",
                       path, bp__text_clean(library, shown, sizeof(shown)), PATH_MAX - 1);
    goto cleanup;
  }
  if (parse_abi_version(abi, &m.abi_major, &m.abi_minor) != 0) {
    status = bp__error(BP_INVALID_ARGUMENT,
                       "manifest '%s': abi_version '%s' is not \"<major>.<minor>\"", path,
                       bp__text_clean(abi, shown, sizeof(shown)));
    goto cleanup;
  }
  if (m.abi_major != BP_ABI_VERSION_MAJOR) {
    status =
        bp__error(BP_FAILED_PRECONDITION,
                  "manifest '%s': plugin '%s' is for ABI %u.%u, this library speaks %d.%d", path,
                  name, m.abi_major, m.abi_minor, BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);
    goto cleanup;
  }
  m.name = strdup(name);
  if (library[0] == '/') {
    m.library = strdup(library);
  } else {
    const char* slash = strrchr(path, '/');
    size_t dir_len = slash ? (size_t)(slash - path) : 0;
    size_t len = dir_len + 1 + strlen(library) + 1;
    m.library = malloc(len);
    if (m.library) {
      if (slash)
        snprintf(m.library, len, "%.*s/%s", (int)dir_len, path, library);
      else
        snprintf(m.library, len, "%s", library);
    }
  }
  if (!m.name || !m.library) {
    status = bp__error(BP_RESOURCE_EXHAUSTED, "out of memory reading manifest '%s'", path);
    goto cleanup;
  }
  *out_manifest = m;
  memset(&m, 0, sizeof(m));

cleanup:
  bp__manifest_free(&m);
  cJSON_Delete(root);
  free(text);
  return status;
}
