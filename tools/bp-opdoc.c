/* bp-opdoc: writes docs/ops.md from the op table (include/backplane/ops.def)
 * and checks that every Core ATen overload maps to an entry point or a view.
 *
 *   bp-opdoc [--check spec/core_aten_ops.csv]
 *   bp-opdoc [--summary SUMMARY.json] > docs/ops.md
 *   bp-opdoc --conformance REPORT.json... --write-summary SUMMARY.json
 *
 * --check exits nonzero (listing them on stderr) when an overload of the
 * spec maps to nothing. --write-summary condenses bp-conform --json reports
 * into a small per-backend, per-op summary (cases passed / failed / skipped
 * and the dtype labels that passed); docs/conformance-summary.json is one,
 * committed, and --summary turns it into the status and dtype columns of
 * docs/ops.md. scripts/gen-docs.sh runs the whole chain.
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/backplane.h"
#include "backplane/plugin.h"

typedef struct op_row {
  int id;
  const char* name;
  const char* category;
  const char* family;
  const char* inputs;  /* "BP_IN2(self, opt_other)" */
  const char* outputs; /* "BP_OUT1(out)" */
  const char* attrs;
  const char* rule;
  const char* aten;
} op_row_t;

#define BP_OP(id, name, cat, fam, ins, outs, attrs_t, rule, aten) \
  {id, #name, #cat, #fam, #ins, #outs, #attrs_t, #rule, aten},
static const op_row_t k_ops[] = {
#include "backplane/ops.def"
};
#undef BP_OP

typedef struct view_row {
  const char* name;
  const char* aten;
  const char* function;
  const char* note;
} view_row_t;
#define BP_OP(...)
#define BP_VIEW(name, aten, function, note) {#name, aten, #function, note},
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

/* ---- conformance summaries -------------------------------------------- */
/* Reads a whole file into a parsed cJSON tree (NULL on failure). */
static cJSON* read_json(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "bp-opdoc: cannot open %s\n", path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  char* text = size >= 0 ? malloc((size_t)size + 1) : NULL;
  cJSON* root = NULL;
  if (text && fread(text, 1, (size_t)size, f) == (size_t)size) {
    text[size] = '\0';
    root = cJSON_Parse(text);
  }
  fclose(f);
  free(text);
  if (!root) fprintf(stderr, "bp-opdoc: %s is not valid JSON\n", path);
  return root;
}

static int is_pass(const char* s) { return !strcmp(s, "PASS") || !strcmp(s, "QUALITY_WARNING"); }
static int is_fail(const char* s) {
  return !strcmp(s, "FAIL") || !strcmp(s, "CRASH") || !strcmp(s, "TIMEOUT");
}

/* Adds the cases of bp-conform report `report` to `summary`:
 * {"backends": {name: {"device", "ops": {op: {"passed", "failed", "skipped",
 * "dtypes": [labels that passed]}}}}}. Runtime pseudo ops are skipped. */
static int summarize(cJSON* summary, const cJSON* report) {
  cJSON* backends = cJSON_GetObjectItemCaseSensitive(summary, "backends");
  const cJSON* b;
  int n = 0;
  cJSON_ArrayForEach(b, cJSON_GetObjectItemCaseSensitive(report, "backends")) {
    const cJSON* name = cJSON_GetObjectItemCaseSensitive(b, "name");
    const cJSON* device = cJSON_GetObjectItemCaseSensitive(b, "device");
    if (!cJSON_IsString(name)) continue;
    cJSON_DeleteItemFromObjectCaseSensitive(backends, name->valuestring);
    cJSON* be = cJSON_AddObjectToObject(backends, name->valuestring);
    cJSON_AddStringToObject(be, "device", cJSON_IsString(device) ? device->valuestring : "");
    cJSON* ops = cJSON_AddObjectToObject(be, "ops");
    const cJSON* c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(b, "cases")) {
      const cJSON* op = cJSON_GetObjectItemCaseSensitive(c, "op");
      const cJSON* st = cJSON_GetObjectItemCaseSensitive(c, "status");
      const cJSON* dt = cJSON_GetObjectItemCaseSensitive(c, "dtype");
      if (!cJSON_IsString(op) || !cJSON_IsString(st) || !strncmp(op->valuestring, "runtime", 7))
        continue;
      cJSON* o = cJSON_GetObjectItemCaseSensitive(ops, op->valuestring);
      if (!o) {
        o = cJSON_AddObjectToObject(ops, op->valuestring);
        cJSON_AddNumberToObject(o, "passed", 0);
        cJSON_AddNumberToObject(o, "failed", 0);
        cJSON_AddNumberToObject(o, "skipped", 0);
        cJSON_AddArrayToObject(o, "dtypes");
      }
      const char* key = is_pass(st->valuestring) ? "passed" : is_fail(st->valuestring) ? "failed"
                                                                                       : "skipped";
      cJSON* counter = cJSON_GetObjectItemCaseSensitive(o, key);
      cJSON_SetNumberValue(counter, counter->valuedouble + 1);
      if (is_pass(st->valuestring) && cJSON_IsString(dt)) {
        cJSON* dts = cJSON_GetObjectItemCaseSensitive(o, "dtypes");
        int seen = 0;
        const cJSON* d;
        cJSON_ArrayForEach(d, dts) seen |= !strcmp(d->valuestring, dt->valuestring);
        if (!seen) cJSON_AddItemToArray(dts, cJSON_CreateString(dt->valuestring));
      }
    }
    ++n;
  }
  return n;
}

/* The status cell of one op on one backend: "42/42 pass", "3 FAIL / 40",
 * "not supported", or "-" when the suite has no case for it. */
static void status_cell(const cJSON* be, const char* op, char* out, size_t cap) {
  const cJSON* o = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(be, "ops"), op);
  if (!o) {
    snprintf(out, cap, "-");
    return;
  }
  int p = cJSON_GetObjectItemCaseSensitive(o, "passed")->valueint;
  int f = cJSON_GetObjectItemCaseSensitive(o, "failed")->valueint;
  int sk = cJSON_GetObjectItemCaseSensitive(o, "skipped")->valueint;
  int total = p + f + sk;
  if (f) snprintf(out, cap, "**%d FAIL** / %d", f, total);
  else if (p == 0) snprintf(out, cap, "not supported");
  else if (sk) snprintf(out, cap, "%d/%d pass (%d unsupported)", p, total, sk);
  else snprintf(out, cap, "%d/%d pass", p, total);
}

static void dtypes_cell(const cJSON* be, const char* op, char* out, size_t cap) {
  const cJSON* o = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(be, "ops"), op);
  size_t n = 0;
  out[0] = '\0';
  const cJSON* d;
  if (o) {
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(o, "dtypes")) {
      if (strchr(d->valuestring, '+') || strstr(d->valuestring, "->")) continue; /* mixed */
      int w = snprintf(out + n, cap - n, "%s%s", n ? " " : "", d->valuestring);
      if (w < 0 || (size_t)w >= cap - n) break;
      n += (size_t)w;
    }
  }
  if (!n) snprintf(out, cap, "-");
}

int main(int argc, char** argv) {
  cJSON* summary = NULL;
  const char* write_path = NULL;
  int reports = 0;
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--check") && i + 1 < argc) return check_spec(argv[++i]);
    if (!strcmp(argv[i], "--summary") && i + 1 < argc) {
      cJSON_Delete(summary);
      if (!(summary = read_json(argv[++i]))) return 1;
      continue;
    }
    if (!strcmp(argv[i], "--conformance") && i + 1 < argc) {
      cJSON* report = read_json(argv[++i]);
      if (!report) return 1;
      if (!summary) {
        summary = cJSON_CreateObject();
        cJSON_AddObjectToObject(summary, "backends");
      }
      reports += summarize(summary, report);
      cJSON_Delete(report);
      continue;
    }
    if (!strcmp(argv[i], "--write-summary") && i + 1 < argc) {
      write_path = argv[++i];
      continue;
    }
    fprintf(stderr,
            "usage: bp-opdoc [--check CSV] | [--summary SUMMARY.json] |\n"
            "       --conformance REPORT.json... --write-summary SUMMARY.json\n");
    return 2;
  }
  if (write_path) {
    if (!summary || reports == 0) {
      fprintf(stderr, "bp-opdoc: --write-summary needs --conformance reports with backends\n");
      return 1;
    }
    char* text = cJSON_Print(summary);
    FILE* f = fopen(write_path, "w");
    int ok = text && f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
    if (f) ok &= fclose(f) == 0;
    free(text);
    cJSON_Delete(summary);
    if (!ok) fprintf(stderr, "bp-opdoc: cannot write %s\n", write_path);
    return ok ? 0 : 1;
  }
  const cJSON* backends = summary ? cJSON_GetObjectItemCaseSensitive(summary, "backends") : NULL;

  printf("# Operators\n\n");
  printf("Generated by `bp-opdoc` from `include/backplane/ops.def` (the single source of\n"
         "truth) and `docs/conformance-summary.json` (the last conformance run per backend);\n"
         "do not edit by hand. Regenerate with `scripts/gen-docs.sh`.\n\n");
  printf("%zu entry points (ids are stable and append-only) and %zu Core ATen overloads\n"
         "served as views or metadata queries. Scalar overloads fold into their Tensor\n"
         "forms through `bp_binary_attrs_t.flags`; several ATen overloads share one entry\n"
         "point where only an attribute differs (listed in the ATen column).\n\n",
         COUNT(k_ops), COUNT(k_views));
  const cJSON* be;
  if (backends && cJSON_GetArraySize(backends) > 0) {
    printf("Per backend: conformance cases passed of those run (a case the backend\n"
           "declares unsupported counts as unsupported, never as passed), and the dtypes\n"
           "of its passing cases.");
    cJSON_ArrayForEach(be, backends) {
      const cJSON* dev = cJSON_GetObjectItemCaseSensitive(be, "device");
      printf(" `%s`: %s.", be->string, cJSON_IsString(dev) ? dev->valuestring : "");
    }
    printf("\n\n");
  }
  printf("| id | op | category | family | inputs | outputs | attributes | rule | Core ATen |");
  cJSON_ArrayForEach(be, backends) printf(" %s | %s dtypes |", be->string, be->string);
  printf("\n|---|---|---|---|---|---|---|---|---|");
  cJSON_ArrayForEach(be, backends) printf("---|---|");
  printf("\n");
  for (size_t i = 0; i < COUNT(k_ops); ++i) {
    const op_row_t* r = &k_ops[i];
    char ins[256], outs[256], cell[128], dts[256];
    operand_list(r->inputs, ins, sizeof ins);
    operand_list(r->outputs, outs, sizeof outs);
    printf("| %d | `%s` | %s | %s | %s | %s | %s | %s | %s |", r->id, r->name, r->category,
           r->family, ins, outs, strcmp(r->attrs, "bp_no_attrs_t") ? r->attrs : "-", r->rule, r->aten);
    cJSON_ArrayForEach(be, backends) {
      status_cell(be, r->name, cell, sizeof cell);
      dtypes_cell(be, r->name, dts, sizeof dts);
      printf(" %s | %s |", cell, dts);
    }
    printf("\n");
  }
  printf("\n## Views and metadata (no plugin entry point)\n\n");
  printf("| Core ATen | served by |\n|---|---|\n");
  for (size_t i = 0; i < COUNT(k_views); ++i)
    printf("| %s | `%s`: %s |\n", k_views[i].aten, k_views[i].function, k_views[i].note);
  printf("\n## Example: the serving ops together (examples/decode_tiny.c)\n\n"
         "A tiny randomly initialised transformer (2 layers, d_model 128, 4 query heads sharing 2 "
         "kv heads, vocabulary 512, int4 weights in groups of 32) decodes 8 tokens through "
         "`embedding`, `rms_norm` / `add_rms_norm`, `qkv_rotary`, `kv_cache_append` into a paged "
         "cache, `paged_attention_prefill` (the prompt) and `paged_attention` (each token), "
         "`weight_only_mm` (int4), `swiglu` and `sample` (temperature 0.8, top-p 0.9, a fixed "
         "Philox seed). The same model (the same dequantized weights) runs densely in double on "
         "the host as the reference. Tolerance: every logit within 1e-4 of the reference (the "
         "observed error is about 2e-6); a sampled token must equal the reference's unless the "
         "reference decision is within a tie: the row's uniform, or the top-p mass, within "
         "exp(2e-4 / 0.8) - 1 of a boundary (how far a 1e-4 logit error moves a normalized "
         "cumulative weight), and the token is reachable there. Run as the ctest "
         "`example_decode_tiny`; it prints per-token timings.\n");
  cJSON_Delete(summary);
  return 0;
}
