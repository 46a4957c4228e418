/* bp-opdoc: writes docs/ops.md from the op table (include/backplane/ops.def)
 * and checks that every Core ATen overload maps to an entry point or a view.
 *
 *   bp-opdoc [--check spec/core_aten_ops.csv] [--conformance FILE.json]... > docs/ops.md
 *
 * --check exits nonzero (listing them on stderr) when an overload of the
 * spec maps to nothing. --conformance adds a column per backend from
 * bp-conform --json reports (worst status over that op's cases).
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"

typedef struct op_row {
  int id;
  const char* name;
  const char* category;
  const char* inputs;  /* "BP_IN2(self, opt_other)" */
  const char* outputs; /* "BP_OUT1(out)" */
  const char* attrs;
  const char* rule;
  const char* aten;
} op_row_t;

#define BP_OP(id, name, cat, ins, outs, attrs_t, rule, aten) \
  {id, #name, #cat, #ins, #outs, #attrs_t, #rule, aten},
static const op_row_t k_ops[] = {
#include "backplane/ops.def"
};
#undef BP_OP

typedef struct view_row {
  const char* name;
  const char* aten;
  const char* how;
} view_row_t;
#define BP_OP(...)
#define BP_VIEW(name, aten, how) {#name, aten, how},
static const view_row_t k_views[] = {
#include "backplane/ops.def"
};
#undef BP_VIEW
#undef BP_OP

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* "BP_IN2(self, opt_other)" -> "self, opt_other"; "BP_INV(tensors)" ->
 * "tensors[]"; "BP_IN0()" -> "". */
static void operand_list(const char* macro, char* out, size_t cap) {
  const char* open = strchr(macro, '(');
  const char* close = strrchr(macro, ')');
  int is_list = strstr(macro, "V(") != NULL || strstr(macro, "V1(") != NULL;
  out[0] = '\0';
  if (!open || !close || close <= open + 1) return;
  size_t n = (size_t)(close - open - 1);
  if (n >= cap) n = cap - 1;
  memcpy(out, open + 1, n);
  out[n] = '\0';
  if (is_list) {
    /* The list operand is the only one named in BP_INV, the second in the
     * BP_IN1V forms: mark it with []. */
    char buf[256];
    char* names[8];
    int k = 0;
    snprintf(buf, sizeof buf, "%s", out);
    for (char* tok = strtok(buf, ","); tok && k < 8; tok = strtok(NULL, ",")) {
      while (*tok == ' ') ++tok;
      names[k++] = tok;
    }
    int list_at = strstr(macro, "BP_INV(") ? 0 : 1;
    out[0] = '\0';
    for (int i = 0; i < k; ++i) {
      strncat(out, names[i], cap - strlen(out) - 1);
      if (i == list_at) strncat(out, "[]", cap - strlen(out) - 1);
      if (i + 1 < k) strncat(out, ", ", cap - strlen(out) - 1);
    }
  }
}

/* Is `overload` (e.g. "aten.add.Tensor") one of the space-separated words? */
static int word_in(const char* words, const char* overload) {
  size_t n = strlen(overload);
  for (const char* p = words; (p = strstr(p, overload)) != NULL; p += n) {
    int start_ok = p == words || p[-1] == ' ';
    int end_ok = p[n] == '\0' || p[n] == ' ';
    if (start_ok && end_ok) return 1;
  }
  return 0;
}

static const char* mapping_of(const char* overload) {
  for (size_t i = 0; i < COUNT(k_ops); ++i)
    if (word_in(k_ops[i].aten, overload)) return k_ops[i].name;
  for (size_t i = 0; i < COUNT(k_views); ++i)
    if (word_in(k_views[i].aten, overload)) return k_views[i].name;
  return NULL;
}

static int check_spec(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "bp-opdoc: cannot open %s\n", path);
    return 2;
  }
  char line[1024];
  int total = 0, missing = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "aten.", 5) != 0) continue;
    char* comma = strchr(line, ',');
    if (!comma) continue;
    *comma = '\0';
    ++total;
    if (!mapping_of(line)) {
      fprintf(stderr, "unmapped: %s\n", line);
      ++missing;
    }
  }
  fclose(f);
  fprintf(stderr, "bp-opdoc: %d of %d Core ATen overloads mapped\n", total - missing, total);
  return missing ? 1 : (total ? 0 : 1);
}

/* Conformance columns: per report file, backend name -> per-op worst status. */
typedef struct conf_col {
  char* backend;
  cJSON* root; /* owned */
  cJSON* cases;
} conf_col_t;

static int status_rank(const char* s) {
  static const char* order[] = {"PASS", "QUALITY_WARNING", "SKIPPED", "NOT_SUPPORTED",
                                "RESOURCE_ERROR", "TIMEOUT", "FAIL", "CRASH"};
  for (size_t i = 0; i < COUNT(order); ++i)
    if (!strcmp(s, order[i])) return (int)i;
  return -1;
}

static const char* worst_status(const conf_col_t* col, const char* op) {
  const char* worst = NULL;
  int rank = -1;
  const cJSON* c;
  cJSON_ArrayForEach(c, col->cases) {
    const cJSON* o = cJSON_GetObjectItemCaseSensitive(c, "op");
    const cJSON* s = cJSON_GetObjectItemCaseSensitive(c, "status");
    if (!cJSON_IsString(o) || !cJSON_IsString(s) || strcmp(o->valuestring, op)) continue;
    int r = status_rank(s->valuestring);
    if (r > rank) rank = r, worst = s->valuestring;
  }
  return worst ? worst : "-";
}

static int load_conformance(const char* path, conf_col_t* cols, int max_cols) {
  FILE* f = fopen(path, "rb");
  if (!f) return 0;
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* text = malloc((size_t)size + 1);
  if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
    fclose(f);
    free(text);
    return 0;
  }
  fclose(f);
  text[size] = '\0';
  cJSON* root = cJSON_Parse(text);
  free(text);
  const cJSON* backends = cJSON_GetObjectItemCaseSensitive(root, "backends");
  int n = 0;
  const cJSON* b;
  cJSON_ArrayForEach(b, backends) {
    if (n >= max_cols) break;
    const cJSON* name = cJSON_GetObjectItemCaseSensitive(b, "name");
    cJSON* cases = cJSON_GetObjectItemCaseSensitive(b, "cases");
    if (!cJSON_IsString(name) || !cJSON_IsArray(cases)) continue;
    cols[n].backend = strdup(name->valuestring);
    cols[n].root = n == 0 ? root : NULL;
    cols[n].cases = cases;
    ++n;
  }
  if (n == 0) cJSON_Delete(root);
  return n;
}

int main(int argc, char** argv) {
  conf_col_t cols[16];
  int ncols = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--check") && i + 1 < argc) return check_spec(argv[++i]);
    if (!strcmp(argv[i], "--conformance") && i + 1 < argc) {
      ncols += load_conformance(argv[++i], cols + ncols, 16 - ncols);
      continue;
    }
    fprintf(stderr, "usage: bp-opdoc [--check CSV] [--conformance REPORT.json]...\n");
    return 2;
  }

  printf("# Operators\n\n");
  printf("Generated by `bp-opdoc` from `include/backplane/ops.def` (the single source of\n"
         "truth); do not edit by hand. Regenerate with `scripts/gen-docs.sh`.\n\n");
  printf("%zu entry points (ids are stable and append-only) and %zu Core ATen overloads\n"
         "served as views or metadata queries. Scalar overloads fold into their Tensor\n"
         "forms through `bp_binary_attrs_t.flags`; several ATen overloads share one entry\n"
         "point where only an attribute differs (listed in the ATen column).\n\n",
         COUNT(k_ops), COUNT(k_views));
  printf("| id | op | category | inputs | outputs | attributes | rule | Core ATen |");
  for (int c = 0; c < ncols; ++c) printf(" %s |", cols[c].backend);
  printf("\n|---|---|---|---|---|---|---|---|");
  for (int c = 0; c < ncols; ++c) printf("---|");
  printf("\n");
  for (size_t i = 0; i < COUNT(k_ops); ++i) {
    const op_row_t* r = &k_ops[i];
    char ins[256], outs[256];
    operand_list(r->inputs, ins, sizeof ins);
    operand_list(r->outputs, outs, sizeof outs);
    printf("| %d | `%s` | %s | %s | %s | %s | %s | %s |", r->id, r->name, r->category, ins,
           outs, strcmp(r->attrs, "bp_no_attrs_t") ? r->attrs : "-", r->rule, r->aten);
    for (int c = 0; c < ncols; ++c) printf(" %s |", worst_status(&cols[c], r->name));
    printf("\n");
  }
  printf("\n## Views and metadata (no plugin entry point)\n\n");
  printf("| Core ATen | served by |\n|---|---|\n");
  for (size_t i = 0; i < COUNT(k_views); ++i)
    printf("| %s | %s |\n", k_views[i].aten, k_views[i].how);
  for (int c = 0; c < ncols; ++c) {
    free(cols[c].backend);
    cJSON_Delete(cols[c].root);
  }
  return 0;
}
