/* Reports: JSON (machine), Markdown (summary), HTML (scorecard), stdout. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conform.h"

bp_status_t bpc_report_add(bpc_backend_report_t* r, const bpc_case_t* c, const bpc_result_t* res) {
  if (r->count == r->capacity) {
    size_t cap = r->capacity ? r->capacity * 2 : 256;
    bpc_case_record_t* p = realloc(r->records, cap * sizeof *p);
    if (!p) return BP_RESOURCE_EXHAUSTED;
    r->records = p;
    r->capacity = cap;
  }
  r->records[r->count].c = c;
  r->records[r->count].result = *res;
  r->count++;
  if (res->status < BPC_STATUS_COUNT_) r->totals[res->status]++;
  return BP_OK;
}

void bpc_report_free(bpc_backend_report_t* r) {
  free(r->records);
  r->records = NULL;
  r->count = r->capacity = 0;
}

void bpc_report_counts(const bpc_backend_report_t* r, uint64_t* p, uint64_t* f, uint64_t* s) {
  *p = r->totals[BPC_PASS] + r->totals[BPC_QUALITY_WARNING];
  *f = r->totals[BPC_FAIL] + r->totals[BPC_CRASH] + r->totals[BPC_TIMEOUT];
  *s = r->totals[BPC_NOT_SUPPORTED] + r->totals[BPC_SKIPPED] + r->totals[BPC_RESOURCE_ERROR];
}

/* ---- per-op aggregation ---------------------------------------------------- */
typedef struct op_row {
  uint32_t op_id;
  uint64_t n[BPC_STATUS_COUNT_];
} op_row_t;

static size_t op_rows(const bpc_backend_report_t* r, op_row_t* rows) {
  size_t n = 0;
  for (size_t k = 0; k < r->count; k++) {
    uint32_t op = r->records[k].c->op_id;
    if (n == 0 || rows[n - 1].op_id != op) {
      memset(&rows[n], 0, sizeof rows[n]);
      rows[n++].op_id = op;
    }
    uint32_t st = r->records[k].result.status;
    if (st < BPC_STATUS_COUNT_) rows[n - 1].n[st]++;
  }
  return n;
}

static const char* op_name(uint32_t op) { return bpc_group_name(op); }

/* Scorecard columns: the plain dtypes, then "mixed" for promotion labels. */
static const char* const kColumns[] = {"f32", "f64", "f16", "bf16", "i8", "u8", "i16",
                                       "i32", "i64", "bool", "float8_e4m3fn", "float8_e5m2", "mixed"};
enum { NCOLS = sizeof kColumns / sizeof kColumns[0] };

static int column_of(const char* label) {
  if (strchr(label, '+')) return NCOLS - 1;
  size_t len = strcspn(label, "-<");
  for (int k = 0; k < NCOLS - 1; k++) {
    if (strlen(kColumns[k]) == len && strncmp(kColumns[k], label, len) == 0) return k;
  }
  return NCOLS - 1;
}

/* ---- JSON ------------------------------------------------------------------ */
bp_status_t bpc_report_write_json(const char* path, const bpc_backend_report_t* reports, size_t n) {
  cJSON* root = cJSON_CreateObject();
  if (!root) return BP_RESOURCE_EXHAUSTED;
  cJSON_AddStringToObject(root, "suite", "backplane conformance");
  cJSON* arr = cJSON_AddArrayToObject(root, "backends");
  for (size_t b = 0; b < n; b++) {
    const bpc_backend_report_t* r = &reports[b];
    cJSON* jb = cJSON_CreateObject();
    cJSON_AddItemToArray(arr, jb);
    cJSON_AddStringToObject(jb, "name", r->name);
    cJSON_AddStringToObject(jb, "device", r->device);
    cJSON* tot = cJSON_AddObjectToObject(jb, "totals");
    for (uint32_t s = 0; s < BPC_STATUS_COUNT_; s++) cJSON_AddNumberToObject(tot, bpc_status_name(s), (double)r->totals[s]);
    uint64_t p, f, sk;
    bpc_report_counts(r, &p, &f, &sk);
    cJSON_AddNumberToObject(tot, "passed", (double)p);
    cJSON_AddNumberToObject(tot, "failed", (double)f);
    cJSON_AddNumberToObject(tot, "skipped", (double)sk);
    cJSON* cases = cJSON_AddArrayToObject(jb, "cases");
    for (size_t k = 0; k < r->count; k++) {
      const bpc_case_record_t* rec = &r->records[k];
      cJSON* jc = cJSON_CreateObject();
      cJSON_AddItemToArray(cases, jc);
      cJSON_AddStringToObject(jc, "id", rec->c->id);
      cJSON_AddStringToObject(jc, "op", op_name(rec->c->op_id));
      cJSON_AddStringToObject(jc, "dtype", rec->c->dtype_label);
      cJSON_AddStringToObject(jc, "status", bpc_status_name(rec->result.status));
      if (rec->result.max_ulps >= 0.0) cJSON_AddNumberToObject(jc, "max_error_ulps", rec->result.max_ulps);
      if (rec->result.max_abs >= 0.0) cJSON_AddNumberToObject(jc, "max_error_abs", rec->result.max_abs);
      cJSON_AddStringToObject(jc, "message", rec->result.message);
    }
  }
  char* text = cJSON_Print(root);
  cJSON_Delete(root);
  if (!text) return BP_RESOURCE_EXHAUSTED;
  char msg[300];
  FILE* fp = bpc_output_fopen(path, msg, sizeof msg);
  bp_status_t st = BP_OK;
  if (!fp) fprintf(stderr, "bp-conform: %s\n", msg);
  if (!fp || fputs(text, fp) < 0) st = BP_PERMISSION_DENIED;
  if (fp && fclose(fp) != 0) st = BP_PERMISSION_DENIED;
  free(text);
  return st;
}

/* ---- Markdown -------------------------------------------------------------- */
static void print_ops_without_reference(FILE* fp, int markdown) {
  fprintf(fp, markdown ? "\nOps without a reference yet: " : "ops without a reference yet: ");
  int first = 1, count = 0;
  for (uint32_t id = 1; id < bpc_op_count(); id++) {
    const bpc_op_entry_t* e = bpc_op_entry(id);
    if (e && e->name && !e->reference) {
      fprintf(fp, "%s%s", first ? "" : ", ", e->name);
      first = 0;
      count++;
    }
  }
  fprintf(fp, "%s (%d)\n", first ? "none" : "", count);
}

static void print_table(FILE* fp, const bpc_backend_report_t* r, int markdown) {
  op_row_t* rows = calloc(r->count ? r->count : 1, sizeof *rows);
  if (!rows) return;
  size_t n = op_rows(r, rows);
  if (markdown) {
    fprintf(fp, "| op | PASS | QUALITY_WARNING | FAIL | CRASH | TIMEOUT | NOT_SUPPORTED | SKIPPED | RESOURCE_ERROR |\n");
    fprintf(fp, "|---|---|---|---|---|---|---|---|---|\n");
  } else {
    fprintf(fp, "%-20s %6s %6s %6s %6s %6s %6s %6s %6s\n", "op", "pass", "warn", "fail", "crash",
            "tmout", "unsup", "skip", "res");
  }
  for (size_t k = 0; k < n; k++) {
    const uint64_t* c = rows[k].n;
    if (markdown) {
      fprintf(fp, "| %s | %llu | %llu | %llu | %llu | %llu | %llu | %llu | %llu |\n", op_name(rows[k].op_id),
              (unsigned long long)c[BPC_PASS], (unsigned long long)c[BPC_QUALITY_WARNING],
              (unsigned long long)c[BPC_FAIL], (unsigned long long)c[BPC_CRASH],
              (unsigned long long)c[BPC_TIMEOUT], (unsigned long long)c[BPC_NOT_SUPPORTED],
              (unsigned long long)c[BPC_SKIPPED], (unsigned long long)c[BPC_RESOURCE_ERROR]);
    } else {
      fprintf(fp, "%-20s %6llu %6llu %6llu %6llu %6llu %6llu %6llu %6llu\n", op_name(rows[k].op_id),
              (unsigned long long)c[BPC_PASS], (unsigned long long)c[BPC_QUALITY_WARNING],
              (unsigned long long)c[BPC_FAIL], (unsigned long long)c[BPC_CRASH],
              (unsigned long long)c[BPC_TIMEOUT], (unsigned long long)c[BPC_NOT_SUPPORTED],
              (unsigned long long)c[BPC_SKIPPED], (unsigned long long)c[BPC_RESOURCE_ERROR]);
    }
  }
  free(rows);
}

static int is_problem(uint32_t st) {
  return st == BPC_FAIL || st == BPC_CRASH || st == BPC_TIMEOUT || st == BPC_QUALITY_WARNING;
}

bp_status_t bpc_report_write_markdown(const char* path, const bpc_backend_report_t* reports,
                                      size_t n) {
  char msg[300];
  FILE* fp = bpc_output_fopen(path, msg, sizeof msg);
  if (!fp) {
    fprintf(stderr, "bp-conform: %s\n", msg);
    return BP_PERMISSION_DENIED;
  }
  fprintf(fp, "# backplane conformance report\n");
  for (size_t b = 0; b < n; b++) {
    const bpc_backend_report_t* r = &reports[b];
    uint64_t p, f, s;
    bpc_report_counts(r, &p, &f, &s);
    fprintf(fp, "\n## %s (%s)\n\n**%llu passed, %llu failed, %llu skipped**\n\n", r->name, r->device,
            (unsigned long long)p, (unsigned long long)f, (unsigned long long)s);
    print_table(fp, r, 1);
    fprintf(fp, "\n### Failures and warnings\n\n");
    int any = 0;
    for (size_t k = 0; k < r->count; k++) {
      const bpc_case_record_t* rec = &r->records[k];
      if (!is_problem(rec->result.status)) continue;
      fprintf(fp, "- `%s` **%s**: %s\n", rec->c->id, bpc_status_name(rec->result.status), rec->result.message);
      any = 1;
    }
    if (!any) fprintf(fp, "None.\n");
  }
  print_ops_without_reference(fp, 1);
  return fclose(fp) == 0 ? BP_OK : BP_PERMISSION_DENIED;
}

/* ---- HTML scorecard ---------------------------------------------------------- */
static void html_escape(FILE* fp, const char* s) {
  for (; *s; s++) {
    switch (*s) {
      case '<': fputs("&lt;", fp); break;
      case '>': fputs("&gt;", fp); break;
      case '&': fputs("&amp;", fp); break;
      case '"': fputs("&quot;", fp); break;
      default: fputc(*s, fp);
    }
  }
}

static const char* status_colour(uint32_t st) {
  switch (st) {
    case BPC_PASS: return "#4caf50";
    case BPC_QUALITY_WARNING: return "#cddc39";
    case BPC_NOT_SUPPORTED: return "#b0bec5";
    case BPC_SKIPPED: return "#e0e0e0";
    case BPC_RESOURCE_ERROR: return "#90caf9";
    case BPC_TIMEOUT: return "#ff9800";
    case BPC_FAIL: return "#f44336";
    case BPC_CRASH: return "#7b1fa2";
    default: return "#ffffff";
  }
}

bp_status_t bpc_report_write_html(const char* path, const bpc_backend_report_t* reports, size_t n) {
  char msg[300];
  FILE* fp = bpc_output_fopen(path, msg, sizeof msg);
  if (!fp) {
    fprintf(stderr, "bp-conform: %s\n", msg);
    return BP_PERMISSION_DENIED;
  }
  fprintf(fp, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>backplane conformance</title>\n"
              "<style>body{font-family:sans-serif}table{border-collapse:collapse}"
              "td,th{border:1px solid #999;padding:2px 6px;font-size:12px;text-align:center}"
              "td.op{text-align:left}</style></head><body>\n<h1>backplane conformance</h1>\n<p>");
  for (uint32_t s = 0; s < BPC_STATUS_COUNT_; s++) {
    fprintf(fp, "<span style=\"background:%s;padding:2px 6px\">%s</span> ", status_colour(s), bpc_status_name(s));
  }
  fprintf(fp, "(each cell: worst status of the op's cases for that dtype; hover for counts)</p>\n");
  for (size_t b = 0; b < n; b++) {
    const bpc_backend_report_t* r = &reports[b];
    uint64_t p, f, s;
    bpc_report_counts(r, &p, &f, &s);
    fprintf(fp, "<h2>");
    html_escape(fp, r->name);
    fprintf(fp, " (");
    html_escape(fp, r->device);
    fprintf(fp, "): %llu passed, %llu failed, %llu skipped</h2>\n<table><tr><th>op</th>",
            (unsigned long long)p, (unsigned long long)f, (unsigned long long)s);
    for (int k = 0; k < NCOLS; k++) fprintf(fp, "<th>%s</th>", kColumns[k]);
    fprintf(fp, "</tr>\n");
    size_t k = 0;
    while (k < r->count) {
      uint32_t op = r->records[k].c->op_id;
      uint64_t cnt[NCOLS][BPC_STATUS_COUNT_];
      int worst[NCOLS];
      memset(cnt, 0, sizeof cnt);
      for (int j = 0; j < NCOLS; j++) worst[j] = -1;
      for (; k < r->count && r->records[k].c->op_id == op; k++) {
        int col = column_of(r->records[k].c->dtype_label);
        uint32_t st = r->records[k].result.status;
        if (st >= BPC_STATUS_COUNT_) continue;
        cnt[col][st]++;
        if (worst[col] < 0 || bpc_status_severity(st) > bpc_status_severity((uint32_t)worst[col])) worst[col] = (int)st;
      }
      fprintf(fp, "<tr><td class=\"op\">%s</td>", op_name(op));
      if (bpc_is_runtime_op(op)) {
        /* Runtime areas have no dtype grid: one cell for the whole row. */
        uint64_t all[BPC_STATUS_COUNT_] = {0};
        int w = -1;
        for (int j = 0; j < NCOLS; j++) {
          for (uint32_t st = 0; st < BPC_STATUS_COUNT_; st++) {
            all[st] += cnt[j][st];
            if (cnt[j][st] && (w < 0 || bpc_status_severity(st) > bpc_status_severity((uint32_t)w))) w = (int)st;
          }
        }
        uint64_t total = 0;
        for (uint32_t st = 0; st < BPC_STATUS_COUNT_; st++) total += all[st];
        fprintf(fp, "<td colspan=\"%d\" style=\"background:%s\" title=\"", NCOLS,
                status_colour(w < 0 ? BPC_PASS : (uint32_t)w));
        for (uint32_t st = 0; st < BPC_STATUS_COUNT_; st++) {
          if (all[st]) fprintf(fp, "%s: %llu&#10;", bpc_status_name(st), (unsigned long long)all[st]);
        }
        fprintf(fp, "\">%llu/%llu</td></tr>\n", (unsigned long long)(all[BPC_PASS] + all[BPC_QUALITY_WARNING]),
                (unsigned long long)total);
        continue;
      }
      for (int j = 0; j < NCOLS; j++) {
        if (worst[j] < 0) {
          fprintf(fp, "<td></td>");
          continue;
        }
        fprintf(fp, "<td style=\"background:%s\" title=\"", status_colour((uint32_t)worst[j]));
        for (uint32_t st = 0; st < BPC_STATUS_COUNT_; st++) {
          if (cnt[j][st]) fprintf(fp, "%s: %llu&#10;", bpc_status_name(st), (unsigned long long)cnt[j][st]);
        }
        fprintf(fp, "\">%llu/%llu</td>", (unsigned long long)(cnt[j][BPC_PASS] + cnt[j][BPC_QUALITY_WARNING]),
                (unsigned long long)(cnt[j][BPC_PASS] + cnt[j][BPC_QUALITY_WARNING] + cnt[j][BPC_FAIL] +
                                     cnt[j][BPC_CRASH] + cnt[j][BPC_TIMEOUT] + cnt[j][BPC_NOT_SUPPORTED] +
                                     cnt[j][BPC_SKIPPED] + cnt[j][BPC_RESOURCE_ERROR]));
      }
      fprintf(fp, "</tr>\n");
    }
    fprintf(fp, "</table>\n<h3>Failures and warnings</h3>\n<ul>\n");
    for (size_t j = 0; j < r->count; j++) {
      const bpc_case_record_t* rec = &r->records[j];
      if (!is_problem(rec->result.status)) continue;
      fprintf(fp, "<li><code>");
      html_escape(fp, rec->c->id);
      fprintf(fp, "</code> <b>%s</b>: ", bpc_status_name(rec->result.status));
      html_escape(fp, rec->result.message);
      fprintf(fp, "</li>\n");
    }
    fprintf(fp, "</ul>\n");
  }
  fprintf(fp, "</body></html>\n");
  return fclose(fp) == 0 ? BP_OK : BP_PERMISSION_DENIED;
}

/* ---- stdout ------------------------------------------------------------------ */
void bpc_report_print_summary(const bpc_backend_report_t* reports, size_t n, int verbose) {
  for (size_t b = 0; b < n; b++) {
    const bpc_backend_report_t* r = &reports[b];
    printf("\n== %s (%s) ==\n", r->name, r->device);
    print_table(stdout, r, 0);
    size_t shown = 0;
    for (size_t k = 0; k < r->count; k++) {
      const bpc_case_record_t* rec = &r->records[k];
      if (!is_problem(rec->result.status) && !(verbose && rec->result.status != BPC_PASS)) continue;
      if (!verbose && shown >= 50) continue;
      printf("  %-15s %s: %s\n", bpc_status_name(rec->result.status), rec->c->id, rec->result.message);
      shown++;
    }
    uint64_t problems = r->totals[BPC_FAIL] + r->totals[BPC_CRASH] + r->totals[BPC_TIMEOUT] +
                        r->totals[BPC_QUALITY_WARNING];
    if (!verbose && problems > shown) printf("  ... %llu more (see --json/--markdown)\n", (unsigned long long)(problems - shown));
  }
  print_ops_without_reference(stdout, 0);
  for (size_t b = 0; b < n; b++) {
    uint64_t p, f, s;
    bpc_report_counts(&reports[b], &p, &f, &s);
    printf("%s: %llu passed, %llu failed, %llu skipped\n", reports[b].name, (unsigned long long)p,
           (unsigned long long)f, (unsigned long long)s);
  }
}
