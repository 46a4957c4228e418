/* bp-bench: performance figures as ratios against baselines measured in the
 * same run.
 *
 * Every figure is the median of several repetitions; each ratio divides the
 * backplane figure by a baseline measured by this process minutes apart at
 * most, so machine noise mostly cancels. See docs/performance.md. The
 * suites live in bench_<suite>.c, one per op family.
 *
 *   bp-bench [--device SPEC] [--suite LIST] [--quick] [--reps N] [--json FILE]
 *            [--markdown FILE]
 */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

/* The figure list (bench_harness.c). */
int bpb__figure_count(void);
const bpb_figure_t* bpb__figure(int i);
void bpb__figures_free(void);

int bpb_quiet;
const char* bpb_title;

#define BPB__NAME(s) #s " "
static const char k_suite_names[] = BPB_SUITES(BPB__NAME);
#undef BPB__NAME

/* The figures as a Markdown section: device, repetitions, then one table
 * row per figure (value, baseline, ratio, target, met). */
static int write_markdown(const char* path, const bpb_ctx_t* ctx, const char* suites) {
  FILE* f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "bp-bench: cannot write %s: %s\n", path, strerror(errno));
    return 1;
  }
  const bp_device_properties_t* p = bp_device_properties(ctx->device);
  if (bpb_title) fprintf(f, "\n## %s\n\n", bpb_title);
  else fprintf(f, "\n## %s (%s)\n\n", bp_device_name(ctx->device), p->name);
  fprintf(f, "`bp-bench --device %s%s%s%s`: medians of %d repetitions%s.\n\n",
          bp_device_name(ctx->device), suites ? " --suite " : "", suites ? suites : "",
          ctx->quick ? " --quick" : "", ctx->reps, ctx->quick ? " (quick sizes)" : "");
  fprintf(f, "| figure | backplane | baseline | ratio | target | met |\n");
  fprintf(f, "|---|---|---|---|---|---|\n");
  for (int i = 0; i < bpb__figure_count(); ++i) {
    const bpb_figure_t* g = bpb__figure(i);
    double ratio = g->value / g->baseline;
    char target[40] = "-", met[8] = "-";
    if (g->target > 0 && g->lower_is_better) {
      snprintf(target, sizeof target, "<= %.0f %s", g->target, g->unit);
      snprintf(met, sizeof met, "%s", g->value <= g->target ? "yes" : "**no**");
    } else if (g->target > 0) {
      snprintf(target, sizeof target, ">= %.2f", g->target);
      snprintf(met, sizeof met, "%s", ratio >= g->target ? "yes" : "**no**");
    }
    fprintf(f, "| %s | %.2f %s | %.2f (%s) | %.3f | %s | %s |\n", g->name, g->value, g->unit,
            g->baseline, g->baseline_name, ratio, target, met);
  }
  return fclose(f) == 0 ? 0 : 1;
}

/* Nonzero when `name` is in the comma-separated list (NULL: every suite). */
static int suite_selected(const char* list, const char* name) {
  if (!list) return 1;
  size_t n = strlen(name);
  for (const char* p = list; *p;) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, name, n) == 0) return 1;
    if (!end) break;
    p = end + 1;
  }
  return 0;
}

/* Every name in the list is a suite. */
static int suites_valid(const char* list) {
  for (const char* p = list; *p;) {
    const char* end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    int known = 0;
#define BPB__KNOWN(s) known |= len == strlen(#s) && strncmp(p, #s, len) == 0;
    BPB_SUITES(BPB__KNOWN)
#undef BPB__KNOWN
    if (!known) {
      fprintf(stderr, "bp-bench: unknown suite '%.*s'\n", (int)len, p);
      return 0;
    }
    if (!end) break;
    p = end + 1;
  }
  return 1;
}

static void usage(FILE* f) {
  fprintf(f,
          "usage: bp-bench [--device SPEC] [--suite LIST] [--quick] [--reps N] [--json FILE]\n"
          "                [--markdown FILE]\n"
          "  --device SPEC  device to measure (default cpu:0)\n"
          "  --suite LIST   comma-separated suites to run (default: all):\n"
          "                 %s\n"
          "  --quick        smaller sizes and fewer repetitions (smoke test)\n"
          "  --reps N       repetitions per figure (median reported; default 9)\n"
          "  --json FILE    also write the figures as JSON\n"
          "  --markdown FILE  also write the figures as a Markdown section\n",
          k_suite_names);
}

/* When `spec` names a backend whose plugin was skipped (no driver, no
 * device), prints "<backend>: unavailable, <reason>" and returns 1. */
static int skipped_backend(bp_context_t* ctx, const char* spec) {
  char name[64];
  size_t len = strcspn(spec, ":");
  if (len >= sizeof name) return 0;
  memcpy(name, spec, len);
  name[len] = 0;
  for (uint32_t i = 0; i < bp_context_plugin_count(ctx); ++i) {
    bp_plugin_t* plugin = NULL;
    bp_plugin_info_t info = {.struct_size = sizeof info};
    if (bp_context_plugin(ctx, i, &plugin) != BP_OK ||
        bp_plugin_get_info(plugin, &info) != BP_OK || strcmp(info.name, name) != 0 ||
        info.state != BP_PLUGIN_SKIPPED)
      continue;
    printf("%s: unavailable, %s\n", name, info.reason);
    return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  const char* spec = "cpu:0";
  const char* json_path = NULL;
  const char* suites = NULL;
  const char* md_path = NULL;
  int quick = 0, reps = 9;
  (void)bp_crash_report_install(); /* a crash names the plugin it came from */
  for (int i = 1; i < argc; ++i) {
    if (!strcmp(argv[i], "--device") && i + 1 < argc) spec = argv[++i];
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else if (!strcmp(argv[i], "--suite") && i + 1 < argc) suites = argv[++i];
    else if (!strcmp(argv[i], "--markdown") && i + 1 < argc) md_path = argv[++i];
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--quick")) quick = 1;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else {
      usage(stderr);
      return 2;
    }
  }
  if (reps < 1) reps = 1;
  if (reps > BPB_MAX_REPS) reps = BPB_MAX_REPS;
  if (suites && !suites_valid(suites)) {
    usage(stderr);
    return 2;
  }
  if (quick && reps > 3) reps = 3;

  bp_context_t* ctx = NULL;
  BPB_CHECK(bp_context_create(NULL, &ctx));
  bp_device_t* dev = NULL;
  bp_status_t found = bp_context_find_device(ctx, spec, &dev);
  if (found != BP_OK && skipped_backend(ctx, spec)) { /* printed why; nothing to measure */
    bp_context_release(ctx);
    return 0;
  }
  BPB_CHECK(found);
  bp_stream_t* stream = NULL;
  BPB_CHECK(bp_stream_create(dev, NULL, &stream));
  int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
  bpb_ctx_t bctx = {ctx, dev, stream, quick, reps, cores > 0 ? cores : 1,
                    strncmp(bp_device_name(dev), "cpu:", 4) == 0};

  printf("bp-bench on %s (%s); medians of %d repetitions\n", bp_device_name(dev),
         bp_device_properties(dev)->name, reps);
#define BPB__RUN(s)                          \
  if (suite_selected(suites, #s)) {          \
    printf("-- suite %s\n", #s);             \
    fflush(stdout);                          \
    bpb_suite_##s(&bctx);                    \
  }
  BPB_SUITES(BPB__RUN)
#undef BPB__RUN
  if (bpb_quiet) { /* another process reports (comm_mpi under mpirun) */
    bpb__figures_free();
    bp_stream_release(stream);
    bp_context_release(ctx);
    return 0;
  }

  printf("\n%-62s %12s %12s %9s %10s\n", "figure", "backplane", "baseline", "ratio", "target");
  cJSON* root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "device", bp_device_name(dev));
  cJSON_AddNumberToObject(root, "repetitions", reps);
  cJSON_AddBoolToObject(root, "quick", quick);
  cJSON* arr = cJSON_AddArrayToObject(root, "figures");
  for (int i = 0; i < bpb__figure_count(); ++i) {
    const bpb_figure_t* f = bpb__figure(i);
    /* Ratios are always backplane / baseline; for times (lower is better)
     * the target applies to the value itself, not the ratio. */
    double ratio = f->value / f->baseline;
    char target[32] = "-";
    if (f->target > 0 && f->lower_is_better)
      snprintf(target, sizeof target, "<= %.0f %s", f->target, f->unit);
    else if (f->target > 0)
      snprintf(target, sizeof target, ">= %.2f", f->target);
    printf("%-62s %12.2f %12.2f %9.3f %10s  (%s; baseline: %s)\n", f->name, f->value,
           f->baseline, ratio, target, f->unit, f->baseline_name);
    cJSON* o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", f->name);
    cJSON_AddStringToObject(o, "unit", f->unit);
    cJSON_AddNumberToObject(o, "value", f->value);
    cJSON_AddStringToObject(o, "baseline_name", f->baseline_name);
    cJSON_AddNumberToObject(o, "baseline", f->baseline);
    cJSON_AddNumberToObject(o, "ratio", ratio);
    if (f->target > 0) {
      cJSON_AddNumberToObject(o, "target", f->target);
      cJSON_AddStringToObject(o, "target_applies_to", f->lower_is_better ? "value" : "ratio");
      cJSON_AddBoolToObject(o, "target_met", f->lower_is_better ? f->value <= f->target
                                                                 : ratio >= f->target);
    }
    cJSON_AddItemToArray(arr, o);
  }
  if (json_path) {
    char* text = cJSON_Print(root);
    FILE* f = fopen(json_path, "w");
    if (!f || fputs(text, f) < 0) {
      fprintf(stderr, "bp-bench: cannot write %s: %s\n", json_path, strerror(errno));
      return 1;
    }
    fclose(f);
    free(text);
  }
  cJSON_Delete(root);
  if (md_path && write_markdown(md_path, &bctx, suites) != 0) return 1;
  bpb__figures_free();
  bp_stream_release(stream);
  bp_context_release(ctx);
  return 0;
}
