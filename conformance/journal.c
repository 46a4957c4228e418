/* The result journal: every case result, appended as soon as it is known.
 *
 * A run that is killed (SIGKILL, a lost machine) leaves every result it had
 * in the journal; `bp-conform --resume` reads it back, runs only the cases
 * that are missing and builds the same reports as an uninterrupted run,
 * because the reports of every run are built from the journal's records.
 *
 * Format (text, one record per line, append-only):
 *   bp-conform journal 1 <selection hash, 16 hex digits>
 *   <fnv32 of the rest, 8 hex>\t<backend>\t<case id>\t<STATUS>\t<max_ulps>\t<max_abs>\t<message>
 * max_ulps and max_abs are printed with 17 significant digits (they read back
 * exactly); the message escapes backslash, tab, CR and LF. A line that is
 * incomplete (no newline: the write was cut by the kill) or whose checksum
 * does not match is ignored; --resume cuts it off before appending.
 *
 * Each record is one write(2), so a killed process loses at most the case it
 * was writing; fdatasync runs every BPC_JOURNAL_SYNC_EVERY records, at least
 * once a second while records arrive, and at bpc_journal_sync, so a lost
 * machine loses at most one batch. Not thread-safe: the parent process
 * writes it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "conform.h"

#define BPC_JOURNAL_SYNC_EVERY 64u
#define BPC_JOURNAL_MAGIC "bp-conform journal 1 "

typedef struct entry {
  char* key; /* "backend\tcase id"; NULL: free slot */
  bpc_result_t result;
} entry_t;

struct bpc_journal {
  int fd;
  char* path;
  char header[64];
  entry_t* table; /* open addressing, capacity a power of two */
  size_t capacity;
  size_t count;
  uint32_t unsynced;
  double last_sync_s;
};

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint32_t fnv32(const char* s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t k = 0; k < n; k++) {
    h ^= (uint8_t)s[k];
    h *= 16777619u;
  }
  return h;
}

/* ---- table ----------------------------------------------------------------- */
static entry_t* slot_of(entry_t* table, size_t capacity, const char* key) {
  size_t mask = capacity - 1;
  size_t k = (size_t)bpc_hash_string(key) & mask;
  while (table[k].key && strcmp(table[k].key, key) != 0) k = (k + 1) & mask;
  return &table[k];
}

static bp_status_t table_grow(bpc_journal_t* j) {
  size_t cap = j->capacity ? j->capacity * 2 : 1024;
  entry_t* t = calloc(cap, sizeof *t);
  if (!t) return BP_RESOURCE_EXHAUSTED;
  for (size_t k = 0; k < j->capacity; k++) {
    if (j->table[k].key) *slot_of(t, cap, j->table[k].key) = j->table[k];
  }
  free(j->table);
  j->table = t;
  j->capacity = cap;
  return BP_OK;
}

/* Takes ownership of `key`; a later record of the same case replaces it. */
static bp_status_t table_put(bpc_journal_t* j, char* key, const bpc_result_t* r) {
  if ((j->count + 1) * 2 > j->capacity && table_grow(j) != BP_OK) {
    free(key);
    return BP_RESOURCE_EXHAUSTED;
  }
  entry_t* e = slot_of(j->table, j->capacity, key);
  if (e->key) {
    free(key);
  } else {
    e->key = key;
    j->count++;
  }
  e->result = *r;
  return BP_OK;
}

static void table_clear(bpc_journal_t* j) {
  for (size_t k = 0; k < j->capacity; k++) free(j->table[k].key);
  free(j->table);
  j->table = NULL;
  j->capacity = j->count = 0;
}

static char* make_key(const char* backend, const char* case_id) {
  size_t a = strlen(backend), b = strlen(case_id);
  char* key = malloc(a + b + 2);
  if (!key) return NULL;
  memcpy(key, backend, a);
  key[a] = '\t';
  memcpy(key + a + 1, case_id, b + 1);
  return key;
}

/* ---- records --------------------------------------------------------------- */
/* Appends `s` escaped to buf[*len..cap); returns 0 when it does not fit. */
static int put_escaped(char* buf, size_t cap, size_t* len, const char* s) {
  for (; *s; s++) {
    const char* rep = NULL;
    switch (*s) {
      case '\\': rep = "\\\\"; break;
      case '\t': rep = "\\t"; break;
      case '\n': rep = "\\n"; break;
      case '\r': rep = "\\r"; break;
      default: break;
    }
    size_t n = rep ? 2 : 1;
    if (*len + n >= cap) return 0;
    if (rep) {
      memcpy(buf + *len, rep, 2);
    } else {
      buf[*len] = *s;
    }
    *len += n;
  }
  buf[*len] = '\0';
  return 1;
}

/* Unescapes [s, end) into out (capacity cap, always NUL-terminated). */
static void get_escaped(const char* s, const char* end, char* out, size_t cap) {
  size_t n = 0;
  for (; s < end && n + 1 < cap; s++) {
    char c = *s;
    if (c == '\\' && s + 1 < end) {
      s++;
      c = *s == 't' ? '\t' : *s == 'n' ? '\n' : *s == 'r' ? '\r' : *s;
    }
    out[n++] = c;
  }
  out[n] = '\0';
}

static uint32_t status_from_name(const char* s, size_t n) {
  for (uint32_t k = 0; k < BPC_STATUS_COUNT_; k++) {
    const char* name = bpc_status_name(k);
    if (strlen(name) == n && strncmp(name, s, n) == 0) return k;
  }
  return BPC_STATUS_COUNT_;
}

/* Parses one complete line (without its newline). Returns 0 when the line
 * is not a valid record (torn or corrupt). */
static int parse_record(bpc_journal_t* j, const char* line, size_t len) {
  if (len < 10 || line[8] != '\t') return 0;
  char hex[9];
  memcpy(hex, line, 8);
  hex[8] = '\0';
  char* hend = NULL;
  unsigned long sum = strtoul(hex, &hend, 16);
  if (!hend || *hend || (uint32_t)sum != fnv32(line + 9, len - 9)) return 0;
  const char* f[6];
  const char* p = line + 9;
  const char* end = line + len;
  for (int k = 0; k < 6; k++) {
    f[k] = p;
    if (k < 5) {
      p = memchr(p, '\t', (size_t)(end - p));
      if (!p) return 0;
      p++;
    }
  }
  bpc_result_t r;
  memset(&r, 0, sizeof r);
  r.status = status_from_name(f[2], (size_t)(f[3] - 1 - f[2]));
  if (r.status >= BPC_STATUS_COUNT_) return 0;
  char num[64];
  size_t nl = (size_t)(f[4] - 1 - f[3]);
  if (nl >= sizeof num) return 0;
  memcpy(num, f[3], nl);
  num[nl] = '\0';
  r.max_ulps = strtod(num, NULL);
  nl = (size_t)(f[5] - 1 - f[4]);
  if (nl >= sizeof num) return 0;
  memcpy(num, f[4], nl);
  num[nl] = '\0';
  r.max_abs = strtod(num, NULL);
  get_escaped(f[5], end, r.message, sizeof r.message);
  char backend[128], id[BPC_CASE_ID_MAX * 2];
  get_escaped(f[0], f[1] - 1, backend, sizeof backend);
  get_escaped(f[1], f[2] - 1, id, sizeof id);
  char* key = make_key(backend, id);
  return key && table_put(j, key, &r) == BP_OK;
}

/* Reads the whole file: checks the header, loads every valid record and
 * returns in *out_valid_end the offset just past the last valid line. */
static bp_status_t load(bpc_journal_t* j, int* out_header_ok, off_t* out_valid_end) {
  *out_header_ok = 0;
  *out_valid_end = 0;
  struct stat sb;
  if (fstat(j->fd, &sb) != 0) return BP_PERMISSION_DENIED;
  size_t size = (size_t)sb.st_size;
  char* data = malloc(size + 1);
  if (!data) return BP_RESOURCE_EXHAUSTED;
  size_t got = 0;
  while (got < size) {
    ssize_t n = pread(j->fd, data + got, size - got, (off_t)got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += (size_t)n;
  }
  data[got] = '\0';
  table_clear(j);
  size_t pos = 0;
  const char* nl = memchr(data, '\n', got);
  if (nl && (size_t)(nl - data) == strlen(j->header) && memcmp(data, j->header, strlen(j->header)) == 0) {
    *out_header_ok = 1;
    pos = (size_t)(nl - data) + 1;
    *out_valid_end = (off_t)pos;
    while (pos < got) {
      const char* e = memchr(data + pos, '\n', got - pos);
      if (!e) break; /* a torn last line */
      size_t len = (size_t)(e - (data + pos));
      if (parse_record(j, data + pos, len)) *out_valid_end = (off_t)(pos + len + 1);
      pos += len + 1;
    }
  }
  free(data);
  return BP_OK;
}

/* ---- public ---------------------------------------------------------------- */
bp_status_t bpc_journal_open(const char* path, const char* selection, int resume,
                             bpc_journal_t** out, char* msg, size_t msg_size) {
  *out = NULL;
  bpc_journal_t* j = calloc(1, sizeof *j);
  if (!j || !(j->path = strdup(path))) {
    free(j);
    snprintf(msg, msg_size, "out of memory");
    return BP_RESOURCE_EXHAUSTED;
  }
  snprintf(j->header, sizeof j->header, BPC_JOURNAL_MAGIC "%016" PRIx64, bpc_hash_string(selection));
  j->fd = bpc_output_open(path, 1, msg, msg_size);
  if (j->fd < 0) {
    bpc_journal_close(j);
    return BP_INVALID_ARGUMENT;
  }
  bp_status_t st = BP_OK;
  if (resume) {
    int header_ok = 0;
    off_t valid_end = 0;
    st = load(j, &header_ok, &valid_end);
    struct stat sb;
    if (st == BP_OK && !header_ok && fstat(j->fd, &sb) == 0 && sb.st_size > 0) {
      snprintf(msg, msg_size,
               "'%s' is not a journal of this selection of backends, ops and --quick; "
               "run without --resume to start afresh", path);
      st = BP_FAILED_PRECONDITION;
    } else if (st == BP_OK && header_ok && ftruncate(j->fd, valid_end) != 0) {
      snprintf(msg, msg_size, "cannot cut the torn tail of '%s': %s", path, strerror(errno));
      st = BP_PERMISSION_DENIED;
    } else if (st == BP_OK && !header_ok) {
      resume = 0; /* empty or new file: start it */
    }
  }
  if (st == BP_OK && !resume) {
    char line[80];
    int n = snprintf(line, sizeof line, "%s\n", j->header);
    if (ftruncate(j->fd, 0) != 0 || write(j->fd, line, (size_t)n) != n) {
      snprintf(msg, msg_size, "cannot write '%s': %s", path, strerror(errno));
      st = BP_PERMISSION_DENIED;
    }
  }
  if (st != BP_OK) {
    if (st == BP_RESOURCE_EXHAUSTED) snprintf(msg, msg_size, "out of memory reading '%s'", path);
    bpc_journal_close(j);
    return st;
  }
  j->last_sync_s = now_s();
  *out = j;
  return BP_OK;
}

int bpc_journal_find(const bpc_journal_t* j, const char* backend, const char* case_id,
                     bpc_result_t* out) {
  if (!j || !j->capacity) return 0;
  char* key = make_key(backend, case_id);
  if (!key) return 0;
  const entry_t* e = slot_of(j->table, j->capacity, key);
  free(key);
  if (!e->key) return 0;
  *out = e->result;
  return 1;
}

bp_status_t bpc_journal_append(bpc_journal_t* j, const char* backend, const char* case_id,
                               const bpc_result_t* r) {
  char line[2048];
  size_t len = 9;
  if (!put_escaped(line, sizeof line, &len, backend) || len + 1 >= sizeof line) return BP_OUT_OF_RANGE;
  line[len++] = '\t';
  if (!put_escaped(line, sizeof line, &len, case_id)) return BP_OUT_OF_RANGE;
  int n = snprintf(line + len, sizeof line - len, "\t%s\t%.17g\t%.17g\t", bpc_status_name(r->status),
                   r->max_ulps, r->max_abs);
  if (n < 0 || len + (size_t)n >= sizeof line) return BP_OUT_OF_RANGE;
  len += (size_t)n;
  if (!put_escaped(line, sizeof line, &len, r->message) || len + 1 >= sizeof line) return BP_OUT_OF_RANGE;
  char hex[10];
  snprintf(hex, sizeof hex, "%08x", fnv32(line + 9, len - 9));
  memcpy(line, hex, 8);
  line[8] = '\t';
  /* What the table keeps is what the line says: read it back. */
  if (!parse_record(j, line, len)) return BP_INTERNAL;
  line[len++] = '\n';
  size_t done = 0;
  while (done < len) {
    ssize_t w = write(j->fd, line + done, len - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return BP_PERMISSION_DENIED;
    done += (size_t)w;
  }
  if (++j->unsynced >= BPC_JOURNAL_SYNC_EVERY || now_s() - j->last_sync_s >= 1.0) {
    return bpc_journal_sync(j);
  }
  return BP_OK;
}

bp_status_t bpc_journal_sync(bpc_journal_t* j) {
  if (!j || j->fd < 0) return BP_OK;
  j->unsynced = 0;
  j->last_sync_s = now_s();
  return fdatasync(j->fd) == 0 ? BP_OK : BP_PERMISSION_DENIED;
}

size_t bpc_journal_count(const bpc_journal_t* j) { return j ? j->count : 0; }

bp_status_t bpc_journal_reload(bpc_journal_t* j) {
  int header_ok = 0;
  off_t end = 0;
  bp_status_t st = load(j, &header_ok, &end);
  if (st == BP_OK && !header_ok) st = BP_DATA_LOSS;
  return st;
}

void bpc_journal_close(bpc_journal_t* j) {
  if (!j) return;
  if (j->fd >= 0) {
    fdatasync(j->fd);
    close(j->fd);
  }
  table_clear(j);
  free(j->path);
  free(j);
}
