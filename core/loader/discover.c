/* backplane core: plugin discovery.
 *
 * Search order; the first plugin found for a backend name wins, and later
 * ones are recorded as skipped ("duplicate of <path>"):
 *  1. BACKPLANE_PLUGIN_PATH (':'-separated),
 *  2. bp_context_options_t.plugin_path (same syntax),
 *  3. <folder of libbackplane>/backplane/plugins (the build tree mirrors the
 *     install tree, so this also finds plugins built beside the library),
 *  4. the install folder BP_INSTALL_PLUGIN_DIR when it differs from 3.
 * Each path entry is a folder (every *.json manifest in it, sorted by file
 * name), a manifest (.json) or a plugin library. Relative entries are refused
 * with a warning: discovery never resolves anything against the current
 * directory. The same file reached twice (the same folder listed twice, a
 * folder and one of its files) is visited once.
 *
 * Filters: the select list (BACKPLANE_PLUGINS when set and not empty, else
 * options->select) and the disable list (options->disable plus
 * BACKPLANE_DISABLE). A plugin filtered out is not loaded and NOT recorded at
 * all (traced at debug level): listing it as skipped would make a disabled
 * backend look broken, and bp_context_find_plugin then answers NOT_FOUND
 * for it, which is the truth for this context. A selected backend that was
 * skipped or not found makes bp_context_create fail with its reason.
 */
#define _GNU_SOURCE 1 /* dladdr */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "loader.h"

#ifndef BP_INSTALL_PLUGIN_DIR
#define BP_INSTALL_PLUGIN_DIR ""
#endif

typedef struct discovery {
  bp_context_t* context;
  bp__filter_t filter;
  /* Real paths of manifests and libraries already visited. */
  char** seen;
  size_t seen_count, seen_capacity;
  int out_of_memory;
} discovery_t;

/* The comma list entry at `p` (spaces and tabs around it trimmed):
 * [*out_start, *out_end), empty when the entry is; returns where the next
 * one starts (at the terminating NUL when there is none). */
static const char* next_entry(const char* p, const char** out_start, const char** out_end) {
  while (*p == ' ' || *p == ',' || *p == '\t') ++p;
  const char* start = p;
  while (*p && *p != ',') ++p;
  const char* end = p;
  while (end > start && (end[-1] == ' ' || end[-1] == '\t')) --end;
  *out_start = start;
  *out_end = end;
  return p;
}

int bp__name_in_list(const char* list, const char* name) {
  if (!list || !name) return 0;
  size_t name_len = strlen(name);
  const char *start = NULL, *end = NULL;
  for (const char* p = list; *p;) {
    p = next_entry(p, &start, &end);
    if ((size_t)(end - start) == name_len && name_len > 0 && strncmp(start, name, name_len) == 0)
      return 1;
  }
  return 0;
}

/* Returns 1 when `real` was seen before; else remembers it and returns 0. */
static int seen_before(discovery_t* d, const char* real) {
  for (size_t i = 0; i < d->seen_count; ++i)
    if (strcmp(d->seen[i], real) == 0) return 1;
  if (d->seen_count == d->seen_capacity) {
    size_t cap = d->seen_capacity ? d->seen_capacity * 2 : 16;
    char** p = realloc(d->seen, cap * sizeof(char*));
    if (!p) {
      d->out_of_memory = 1;
      return 0;
    }
    d->seen = p;
    d->seen_capacity = cap;
  }
  char* copy = strdup(real);
  if (!copy) {
    d->out_of_memory = 1;
    return 0;
  }
  d->seen[d->seen_count++] = copy;
  return 0;
}

static int filtered_out(const discovery_t* d, const char* name) {
  if (d->filter.select && !bp__name_in_list(d->filter.select, name)) {
    bp__log(BP_LOG_DEBUG, "plugin '%s' not selected (%s=%s); not loaded", name,
            d->filter.select_origin, d->filter.select);
    return 1;
  }
  if (d->filter.disable && bp__name_in_list(d->filter.disable, name)) {
    bp__log(BP_LOG_DEBUG, "plugin '%s' disabled (%s); not loaded", name, d->filter.disable);
    return 1;
  }
  return 0;
}

static void visit_library(discovery_t* d, const char* path) {
  char real[PATH_MAX];
  if (!realpath(path, real)) {
    bp__log(BP_LOG_DEBUG, "plugin library '%s': %s; ignored", path, strerror(errno));
    return;
  }
  if (seen_before(d, real)) {
    bp__log(BP_LOG_DEBUG, "plugin library '%s' already visited", real);
    return;
  }
  bp__load_request_t request = {real, NULL, NULL, &d->filter};
  bp_plugin_t* plugin = NULL;
  (void)bp__loader_load(d->context, &request, &plugin);
}

static void visit_manifest(discovery_t* d, const char* path) {
  char real[PATH_MAX];
  if (!realpath(path, real)) {
    bp__log(BP_LOG_DEBUG, "manifest '%s': %s; ignored", path, strerror(errno));
    return;
  }
  if (seen_before(d, real)) {
    bp__log(BP_LOG_DEBUG, "manifest '%s' already visited", real);
    return;
  }
  bp__log(BP_LOG_DEBUG, "manifest '%s'", real);
  bp__manifest_t manifest;
  bp_plugin_t* plugin = NULL;
  bp_status_t status = bp__manifest_read(real, &manifest);
  if (status != BP_OK) {
    char reason[1024];
    snprintf(reason, sizeof(reason), "%s", bp_status_message());
    const char* base = strrchr(real, '/');
    (void)bp__loader_record_skipped(d->context, base ? base + 1 : real, real, status, reason,
                                    &plugin);
    return;
  }
  if (!filtered_out(d, manifest.name)) {
    /* The library reached through this manifest counts as visited too, so
     * a path entry naming it directly does not load it a second time. */
    char lib_real[PATH_MAX];
    if (realpath(manifest.library, lib_real) && seen_before(d, lib_real)) {
      bp__log(BP_LOG_DEBUG, "library '%s' of manifest '%s' already visited", lib_real, real);
    } else {
      bp__load_request_t request = {manifest.library, real, manifest.name, NULL};
      (void)bp__loader_load(d->context, &request, &plugin);
    }
  }
  bp__manifest_free(&manifest);
}

static int compare_names(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

static void visit_folder(discovery_t* d, const char* dir_path) {
  if (bp__loader_check_folder(dir_path) != BP_OK) {
    bp__log(BP_LOG_WARN, "%s", bp_status_message());
    return;
  }
  DIR* dir = opendir(dir_path);
  char** names = NULL;
  size_t count = 0, capacity = 0;
  if (!dir) {
    bp__log(BP_LOG_DEBUG, "folder '%s': %s", dir_path, strerror(errno));
    return;
  }
  bp__log(BP_LOG_DEBUG, "searching folder '%s'", dir_path);
  struct dirent* entry;
  while ((entry = readdir(dir)) != NULL) {
    size_t len = strlen(entry->d_name);
    if (len <= 5 || entry->d_name[0] == '.' || strcmp(entry->d_name + len - 5, ".json") != 0)
      continue;
    if (count == capacity) {
      size_t cap = capacity ? capacity * 2 : 16;
      char** p = realloc(names, cap * sizeof(char*));
      if (!p) {
        d->out_of_memory = 1;
        break;
      }
      names = p;
      capacity = cap;
    }
    names[count] = strdup(entry->d_name);
    if (!names[count]) {
      d->out_of_memory = 1;
      break;
    }
    ++count;
  }
  closedir(dir);
  if (count > 1) qsort(names, count, sizeof(char*), compare_names);
  if (count == 0) bp__log(BP_LOG_DEBUG, "folder '%s' has no manifests", dir_path);
  for (size_t i = 0; i < count; ++i) {
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", dir_path, names[i]);
    if (n > 0 && (size_t)n < sizeof(path)) visit_manifest(d, path);
    free(names[i]);
  }
  free(names);
}

static void visit_entry(discovery_t* d, const char* entry, const char* origin) {
  if (entry[0] != '/') {
    bp__log(BP_LOG_WARN,
            "%s entry '%s' is a relative path; ignored (plugins are never searched relative to "
            "the current directory; use an absolute path)",
            origin, entry);
    return;
  }
  struct stat st;
  if (stat(entry, &st) != 0) {
    /* A path the user wrote that leads nowhere is worth a word. */
    bp__log(BP_LOG_WARN, "%s entry '%s': %s; ignored", origin, entry, strerror(errno));
    return;
  }
  size_t len = strlen(entry);
  if (S_ISDIR(st.st_mode))
    visit_folder(d, entry);
  else if (len > 5 && strcmp(entry + len - 5, ".json") == 0)
    visit_manifest(d, entry);
  else
    visit_library(d, entry);
}

static void visit_path_list(discovery_t* d, const char* list, const char* origin) {
  if (!list || !*list) {
    bp__log(BP_LOG_DEBUG, "%s not set", origin);
    return;
  }
  bp__log(BP_LOG_DEBUG, "searching %s='%s'", origin, list);
  char* copy = strdup(list);
  if (!copy) {
    d->out_of_memory = 1;
    return;
  }
  char* save = NULL;
  size_t entries = 0;
  for (char* entry = strtok_r(copy, ":", &save); entry; entry = strtok_r(NULL, ":", &save)) {
    if (*entry) {
      ++entries;
      visit_entry(d, entry, origin);
    }
  }
  if (entries == 0)
    bp__log(BP_LOG_WARN, "%s='%s' names no path; ignored (the default folders are searched)",
            origin, list);
  free(copy);
}

/* "<folder of libbackplane>/backplane/plugins", or "" when unknown. */
static void own_plugin_folder(char* out, size_t size) {
  Dl_info info;
  char real[PATH_MAX];
  out[0] = '\0';
  if (!dladdr((void*)&bp__loader_discover, &info) || !info.dli_fname) return;
  if (!realpath(info.dli_fname, real)) return;
  char* slash = strrchr(real, '/');
  if (!slash) return;
  *slash = '\0';
  int n = snprintf(out, size, "%s/backplane/plugins", real);
  if (n < 0 || (size_t)n >= size) out[0] = '\0';
}

/* The comma list in variable `name`, or NULL when it is unset, empty or
 * names no backend at all (",,,": then one warning says so and what is done
 * instead, `otherwise`). Entries that are not valid backend names get one
 * warning each: they can never match a plugin. */
static const char* env_name_list(const char* name, const char* otherwise) {
  const char* value = getenv(name);
  char shown[96];
  if (!value || !*value) return NULL;
  size_t names = 0;
  const char *start = NULL, *end = NULL;
  for (const char* p = value; *p;) {
    p = next_entry(p, &start, &end);
    if (end == start) continue;
    ++names;
    char entry[BP_MAX_NAME];
    int fits = (size_t)(end - start) < sizeof(entry);
    snprintf(entry, sizeof(entry), "%.*s", (int)(end - start), start);
    if (!fits || !bp__backend_name_valid(entry))
      bp__log(BP_LOG_WARN,
              "%s entry '%s' is not a backend name (1-63 characters of [a-z0-9_]); it matches no "
              "plugin",
              name, bp__text_clean(entry, shown, sizeof(shown)));
  }
  if (names == 0) {
    bp__log(BP_LOG_WARN, "%s='%s' names no backend; ignored (%s)", name,
            bp__text_clean(value, shown, sizeof(shown)), otherwise);
    return NULL;
  }
  return value;
}

/* "a" + "," + "b", either may be NULL or empty; NULL when both are. */
static char* join_lists(const char* a, const char* b) {
  int has_a = a && *a, has_b = b && *b;
  if (!has_a && !has_b) return NULL;
  size_t len = (has_a ? strlen(a) : 0) + (has_b ? strlen(b) : 0) + 2;
  char* s = malloc(len);
  if (s) snprintf(s, len, "%s%s%s", has_a ? a : "", has_a && has_b ? "," : "", has_b ? b : "");
  return s;
}

/* A selected backend must have loaded. */
static bp_status_t check_selected(discovery_t* d) {
  const char *start = NULL, *end = NULL;
  for (const char* p = d->filter.select; p && *p;) {
    p = next_entry(p, &start, &end);
    if (end == start) continue;
    char name[BP_MAX_NAME];
    snprintf(name, sizeof(name), "%.*s", (int)(end - start), start);
    const bp_plugin_t* plugin = bp__context_plugin_by_name(d->context, name);
    if (!plugin) {
      int disabled = d->filter.disable && bp__name_in_list(d->filter.disable, name);
      return bp__error(BP_NOT_FOUND,
                       "backend '%s' was selected (%s) but no plugin named '%s' was found%s "
                       "(BACKPLANE_LOG=debug shows the search)",
                       name, d->filter.select_origin, name,
                       disabled ? "; it is also in the disable list" : "");
    }
    if (plugin->state != BP_PLUGIN_LOADED)
      return bp__error(plugin->reason_code, "backend '%s' was selected (%s) but was skipped: %s",
                       name, d->filter.select_origin, plugin->reason ? plugin->reason : "");
  }
  return BP_OK;
}

bp_status_t bp__loader_discover(bp_context_t* context, const bp_context_options_t* options) {
  bp_status_t status = BP_OK;
  discovery_t d;
  memset(&d, 0, sizeof(d));
  d.context = context;

  const char* env_select = env_name_list("BACKPLANE_PLUGINS", "every plugin found is loaded");
  if (env_select) {
    d.filter.select = strdup(env_select);
    d.filter.select_origin = "BACKPLANE_PLUGINS";
  } else if (options && options->select && *options->select) {
    d.filter.select = strdup(options->select);
    d.filter.select_origin = "options.select";
  }
  d.filter.disable = join_lists(options ? options->disable : NULL,
                                env_name_list("BACKPLANE_DISABLE", "no plugin is disabled"));
  if (d.filter.select)
    bp__log(BP_LOG_DEBUG, "select: %s (%s)", d.filter.select, d.filter.select_origin);
  if (d.filter.disable) bp__log(BP_LOG_DEBUG, "disable: %s", d.filter.disable);

  visit_path_list(&d, getenv("BACKPLANE_PLUGIN_PATH"), "BACKPLANE_PLUGIN_PATH");
  visit_path_list(&d, options ? options->plugin_path : NULL, "options.plugin_path");

  char own[PATH_MAX];
  own_plugin_folder(own, sizeof(own));
  if (own[0]) {
    bp__log(BP_LOG_DEBUG, "searching the plugin folder beside libbackplane: '%s'", own);
    visit_folder(&d, own);
  }
  char install_real[PATH_MAX];
  if (BP_INSTALL_PLUGIN_DIR[0] == '/' && realpath(BP_INSTALL_PLUGIN_DIR, install_real)) {
    if (own[0] && strcmp(install_real, own) == 0) {
      bp__log(BP_LOG_DEBUG, "install plugin folder '%s' is the one beside libbackplane", own);
    } else {
      bp__log(BP_LOG_DEBUG, "searching the install plugin folder '%s'", install_real);
      visit_folder(&d, install_real);
    }
  } else {
    bp__log(BP_LOG_DEBUG, "install plugin folder '%s' does not exist", BP_INSTALL_PLUGIN_DIR);
  }

  if (d.out_of_memory) {
    status = bp__error(BP_RESOURCE_EXHAUSTED, "out of memory during plugin discovery");
    goto cleanup;
  }
  status = check_selected(&d);

cleanup:
  for (size_t i = 0; i < d.seen_count; ++i) free(d.seen[i]);
  free(d.seen);
  free(d.filter.select);
  free(d.filter.disable);
  return status;
}
