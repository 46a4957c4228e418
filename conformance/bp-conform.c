/* bp-conform: scores every backend, op by op, against the fp64 references,
 * and on the runtime axes (memory, copies, stream order, events, several
 * devices, error hygiene: runtime.c).
 *
 *   bp-conform [--backend NAME]... [--op NAME|runtime]... [--quick] [--json FILE]
 *              [--markdown FILE] [--html FILE] [--journal FILE] [--resume]
 *              [--timeout SEC] [--list] [--verbose] [--progress|--no-progress]
 *
 * On a terminal (stderr), one progress line is rewritten in place while the
 * cases run (progress.c); --progress forces it elsewhere, --no-progress
 * turns it off.
 *
 * Every case result is appended to a journal as soon as it is known
 * (journal.c; by default the first report path plus ".journal"), and the
 * reports are built from it. A run that was killed is completed with
 * --resume: the cases already in the journal are not run again, and the
 * reports are the same as those of an uninterrupted run. Report and journal
 * paths must be regular files (a FIFO is refused at once).
 *
 * The parent discovers backends with a context used only for enumeration,
 * released before any child is forked. Each backend's cases, every op's and
 * the runtime section's in one sequence, run in forked children (runner.c)
 * that create their own context: one child runs them all unless a case
 * crashes, times out or fails (the child then ends and a fresh one resumes
 * at the next case), so what a plugin builds once per device (compiled
 * pipelines, kernels, pools) is built once per run, not once per op.
 * Exit status: 0 when
 * every backend ran cases and none failed, crashed or timed out; 1 when one
 * did; 2 for usage errors or a named backend that cannot be loaded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conform.h"

#define MAX_SELECT 64

typedef struct options {
  const char* backends[MAX_SELECT];
  uint32_t num_backends;
  uint32_t ops[BP_OP_ID_END_];
  uint32_t num_ops;
  int runtime;     /* run the runtime section (after the ops) */
  int collectives; /* and the collectives in it */
  int quick, list, verbose;
  const char *json, *markdown, *html, *journal;
  int resume;
  int progress; /* -1: when stderr is a terminal; 0: never; 1: always */
  double timeout_s;
} options_t;

/* What a child needs to run one backend's cases. Case g of the run is case
 * g - first[k] of group k, where first[k] <= g < first[k + 1]. */
typedef struct run_ctx {
  const char* backend;
  const options_t* opt;
  bpc_case_list_t* lists; /* per op index (the children inherit them through fork) */
  const bpc_case_list_t* runtime; /* this backend's runtime cases: group num_ops */
  uint32_t groups;
  const uint32_t* first; /* groups + 1 entries */
  uint32_t shown;        /* the group the progress line names (parent side) */
  bpc_journal_t* journal;         /* NULL: none */
  int* journal_failed;            /* warned once */
  bpc_progress_t* progress;
} run_ctx_t;

static void usage(FILE* fp) {
  fprintf(fp,
          "usage: bp-conform [--backend NAME]... [--op NAME|runtime|collectives]... [--quick]\n"
          "                  [--json FILE]\n"
          "                  [--markdown FILE] [--html FILE] [--journal FILE] [--resume]\n"
          "                  [--timeout SEC] [--list] [--verbose] [--progress|--no-progress]\n"
          "  Without --op: every op with a reference, then the runtime section (memory,\n"
          "  copies, stream order, events, several devices, error hygiene).\n"
          "  --op runtime selects the runtime section (without collectives); other --op names\n"
          "  select ops.\n"
          "  --op collectives: the collectives alone (2, 3 and 4 ranks in this process; under\n"
          "  mpirun, one rank per process in the launcher's world).\n"
          "  --journal FILE  where each result is appended as it comes (default: the first\n"
          "                  report path + \".journal\"); the reports are built from it.\n"
          "  --resume        continue the run recorded in the journal: cases already there\n"
          "                  are not run again; the reports are those of a whole run.\n"
          "  --progress      the progress line on stderr even when it is not a terminal\n"
          "                  (by default only on a terminal); --no-progress: never.\n");
}

static int parse_args(int argc, char** argv, options_t* o) {
  memset(o, 0, sizeof *o);
  o->timeout_s = 20.0;
  o->progress = -1;
  int ops_given = 0;
  for (int k = 1; k < argc; k++) {
    const char* a = argv[k];
    const char* val = k + 1 < argc ? argv[k + 1] : NULL;
    if (strcmp(a, "--quick") == 0) { o->quick = 1; continue; }
    if (strcmp(a, "--list") == 0) { o->list = 1; continue; }
    if (strcmp(a, "--verbose") == 0) { o->verbose = 1; continue; }
    if (strcmp(a, "--resume") == 0) { o->resume = 1; continue; }
    if (strcmp(a, "--progress") == 0) { o->progress = 1; continue; }
    if (strcmp(a, "--no-progress") == 0) { o->progress = 0; continue; }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { usage(stdout); exit(0); }
    if (!val) {
      fprintf(stderr, "bp-conform: unknown option or missing value: %s\n", a);
      return 0;
    }
    k++;
    if (strcmp(a, "--backend") == 0) {
      if (o->num_backends == MAX_SELECT) { fprintf(stderr, "bp-conform: too many --backend\n"); return 0; }
      o->backends[o->num_backends++] = val;
    } else if (strcmp(a, "--op") == 0) {
      ops_given = 1;
      if (strcmp(val, "runtime") == 0) {
        o->runtime = 1;
        continue;
      }
      if (strcmp(val, "collectives") == 0) {
        o->collectives = 1;
        continue;
      }
      uint32_t id = bpc_op_find(val);
      if (id == BP_OP_INVALID) { fprintf(stderr, "bp-conform: unknown op '%s'\n", val); return 0; }
      if (!bpc_op_entry(id)->reference) {
        fprintf(stderr, "bp-conform: op '%s' has no reference yet\n", val);
        return 0;
      }
      if (o->num_ops < BP_OP_ID_END_) o->ops[o->num_ops++] = id;
    } else if (strcmp(a, "--json") == 0) {
      o->json = val;
    } else if (strcmp(a, "--markdown") == 0) {
      o->markdown = val;
    } else if (strcmp(a, "--html") == 0) {
      o->html = val;
    } else if (strcmp(a, "--journal") == 0) {
      o->journal = val;
    } else if (strcmp(a, "--timeout") == 0) {
      char* end = NULL;
      o->timeout_s = strtod(val, &end);
      if (!end || *end || !(o->timeout_s > 0.0)) { fprintf(stderr, "bp-conform: bad --timeout '%s'\n", val); return 0; }
    } else {
      fprintf(stderr, "bp-conform: unknown option: %s\n", a);
      return 0;
    }
  }
  if (!ops_given) {
    o->runtime = 1;
    o->collectives = 1;
    for (uint32_t id = 1; id < bpc_op_count(); id++) {
      const bpc_op_entry_t* e = bpc_op_entry(id);
      if (e && e->reference) o->ops[o->num_ops++] = id;
    }
  }
  return 1;
}

static const bpc_case_list_t* group_list(const run_ctx_t* rc, uint32_t k) {
  return k < rc->opt->num_ops ? &rc->lists[k] : rc->runtime;
}

/* The group of case g of the run. */
static uint32_t group_of(const run_ctx_t* rc, uint32_t g) {
  uint32_t lo = 0, hi = rc->groups; /* first[lo] <= g < first[hi] */
  while (hi - lo > 1) {
    uint32_t mid = lo + (hi - lo) / 2;
    if (rc->first[mid] <= g) lo = mid;
    else hi = mid;
  }
  return lo;
}

/* Child side: fresh context with only this backend, its first device, one
 * stream; runs the backend's cases from `start` on. A case that fails after
 * other cases ran in this process is not reported: the child ends and the
 * case runs again first in a fresh child. A failure there stands; a pass is
 * scored QUALITY_WARNING naming the first failure (the plugin's state from
 * earlier cases broke it). Nothing a failure leaves behind touches the cases
 * after it. */
static int run_group(void* user, uint32_t group, uint32_t start, bpc_child_t* child, char* msg,
                     size_t msg_size) {
  run_ctx_t* rc = user;
  (void)group;
  bp_context_options_t co;
  memset(&co, 0, sizeof co);
  co.struct_size = sizeof co;
  co.select = rc->backend;
  bp_context_t* ctx = NULL;
  bp_device_t* dev = NULL;
  bp_stream_t* stream = NULL;
  int ret = 1;
  bp_status_t st = bp_context_create(&co, &ctx);
  if (st != BP_OK) {
    snprintf(msg, msg_size, "bp_context_create: %s: %s", bp_status_name(st), bp_status_message());
    goto cleanup;
  }
  st = bp_context_find_device(ctx, rc->backend, &dev);
  if (st != BP_OK) {
    snprintf(msg, msg_size, "no device for backend %s: %s", rc->backend, bp_status_message());
    goto cleanup;
  }
  st = bp_stream_create(dev, NULL, &stream);
  if (st != BP_OK) {
    snprintf(msg, msg_size, "bp_stream_create: %s: %s", bp_status_name(st), bp_status_message());
    goto cleanup;
  }
  for (uint32_t g = start, k = group_of(rc, start); g < rc->first[rc->groups]; g++) {
    while (g >= rc->first[k + 1]) k++;
    if (!bpc_child_wants(child, g)) continue; /* in the journal already */
    bpc_result_t r;
    bpc_child_begin(child, g);
    bpc_execute_case(dev, stream, &group_list(rc, k)->items[g - rc->first[k]], &r);
    if (r.status == BPC_FAIL && bpc_child_retry_fresh(child, g, &r)) break;
    bpc_child_result(child, g, &r);
    if (r.status == BPC_FAIL) break;
  }
  ret = 0;
cleanup:
  if (stream) bp_stream_release(stream);
  if (ctx) bp_context_release(ctx);
  return ret;
}

/* Backends to score: the named ones (each must load), or every loaded
 * plugin with a device. Returns 0 on a fatal problem. */
static int discover(const options_t* o, char names[][64], char devices[][128],
                    bpc_runtime_target_t* targets, uint32_t* out_n) {
  bp_context_t* ctx = NULL;
  bp_status_t st = bp_context_create(NULL, &ctx);
  if (st != BP_OK) {
    fprintf(stderr, "bp-conform: bp_context_create: %s: %s\n", bp_status_name(st), bp_status_message());
    return 0;
  }
  int ok = 1;
  uint32_t n = 0;
  uint32_t count = o->num_backends ? o->num_backends : bp_context_plugin_count(ctx);
  for (uint32_t k = 0; k < count && n < MAX_SELECT; k++) {
    bp_plugin_t* p = NULL;
    if (o->num_backends) {
      st = bp_context_find_plugin(ctx, o->backends[k], &p);
      if (st != BP_OK) {
        fprintf(stderr, "bp-conform: backend '%s' is not available: %s: %s\n", o->backends[k],
                bp_status_name(st), bp_status_message());
        ok = 0;
        break;
      }
    } else if (bp_context_plugin(ctx, k, &p) != BP_OK) {
      continue;
    }
    bp_plugin_info_t info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    if (bp_plugin_get_info(p, &info) != BP_OK) continue;
    if (info.state != BP_PLUGIN_LOADED || info.device_count == 0) {
      if (o->num_backends) {
        fprintf(stderr, "bp-conform: backend '%s' is not usable: %s\n", info.name,
                info.state != BP_PLUGIN_LOADED ? info.reason : "no devices");
        ok = 0;
        break;
      }
      continue;
    }
    bp_device_t* dev = NULL;
    snprintf(names[n], 64, "%s", info.name);
    memset(&targets[n], 0, sizeof targets[n]);
    targets[n].device_count = info.device_count;
    if (bp_plugin_device(p, 0, &dev) == BP_OK) {
      if (bpc_runtime_target_query(dev, &targets[n]) != BP_OK) {
        /* No memory spaces: the memory cases are left out, the rest run. */
        memset(&targets[n], 0, sizeof targets[n]);
        targets[n].device_count = info.device_count;
      }
      const bp_device_properties_t* props = bp_device_properties(dev);
      snprintf(devices[n], 128, "%.40s%s%.80s", bp_device_name(dev), props ? ": " : "", props ? props->name : "");
    } else {
      snprintf(devices[n], 128, "%.120s", info.name);
    }
    n++;
  }
  bp_context_release(ctx); /* never used across fork */
  *out_n = n;
  return ok;
}

/* Parent side: each final result goes to the journal at once. */
static void on_result(void* user, uint32_t group, uint32_t index, const bpc_result_t* result) {
  run_ctx_t* rc = user;
  (void)group;
  if (index >= rc->first[rc->groups]) return;
  uint32_t k = group_of(rc, index);
  const bpc_case_list_t* list = group_list(rc, k);
  if (k != rc->shown) {
    rc->shown = k;
    bpc_progress_set(rc->progress, rc->backend, k < rc->opt->num_ops ? bpc_group_name(rc->opt->ops[k]) : "runtime");
  }
  bpc_progress_add(rc->progress, 1, 0);
  if (!rc->journal) return;
  bp_status_t st = bpc_journal_append(rc->journal, rc->backend, list->items[index - rc->first[k]].id, result);
  if (st != BP_OK && !*rc->journal_failed) {
    bpc_progress_clear(rc->progress);
    fprintf(stderr, "bp-conform: cannot append to the journal (%s): a killed run cannot be resumed\n",
            bp_status_name(st));
    *rc->journal_failed = 1;
  }
}

static void on_tick(void* user) {
  run_ctx_t* rc = user;
  bpc_progress_tick(rc->progress);
}

/* Refuses report and journal paths that are not regular files before any
 * case runs (a FIFO would block at the end of the run). */
static int check_output_paths(const options_t* o) {
  const char* paths[] = {o->json, o->markdown, o->html, o->journal};
  const char* names[] = {"--json", "--markdown", "--html", "--journal"};
  for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
    char msg[300];
    if (paths[k] && bpc_output_path_check(paths[k], msg, sizeof msg) != BP_OK) {
      fprintf(stderr, "bp-conform: %s %s\n", names[k], msg);
      return 0;
    }
  }
  return 1;
}

/* What decides the cases of a run: a resumed run must have the same. */
static void selection_text(const options_t* o, char* buf, size_t size) {
  size_t n = (size_t)snprintf(buf, size, "quick=%d runtime=%d backends=", o->quick, o->runtime);
  for (uint32_t k = 0; k < o->num_backends && n < size; k++) {
    n += (size_t)snprintf(buf + n, size - n, "%s,", o->backends[k]);
  }
  if (n < size) n += (size_t)snprintf(buf + n, size - n, " ops=");
  for (uint32_t k = 0; k < o->num_ops && n < size; k++) {
    n += (size_t)snprintf(buf + n, size - n, "%u,", o->ops[k]);
  }
}

int main(int argc, char** argv) {
  options_t opt;
  (void)bp_crash_report_install(); /* a crash names the plugin it came from */
  if (!parse_args(argc, argv, &opt)) {
    usage(stderr);
    return 2;
  }
  int exit_code = 0;
  bpc_case_list_t* lists = calloc(opt.num_ops ? opt.num_ops : 1, sizeof *lists);
  bpc_backend_report_t* reports = NULL;
  uint32_t nb = 0;
  static char names[MAX_SELECT][64];
  static char devices[MAX_SELECT][128];
  static bpc_runtime_target_t targets[MAX_SELECT];
  static bpc_case_list_t rt_lists[MAX_SELECT]; /* per backend: depend on its devices */
  bpc_result_t** all_results = NULL; /* [backend * groups + group][case] */
  uint32_t groups = 0;
  uint32_t* group_first = NULL; /* per group: its first case in a backend's sequence */
  bpc_journal_t* journal = NULL;
  char* journal_path = NULL; /* derived from a report path */
  int journal_failed = 0;
  bpc_progress_t progress;
  bpc_progress_start(&progress, stderr, 0, 0);
  if (!lists) return 2;
  if (opt.collectives && !opt.runtime && opt.num_ops == 0 && !opt.list &&
      bpc_world_size_from_env() > 1) {
    free(lists);
    return bpc_run_world(opt.num_backends ? opt.backends[0] : "cpu", opt.quick, opt.verbose);
  }
  for (uint32_t k = 0; k < opt.num_ops; k++) {
    if (bpc_cases_generate(opt.ops[k], opt.quick, &lists[k]) != BP_OK) {
      fprintf(stderr, "bp-conform: out of memory generating cases\n");
      exit_code = 2;
      goto cleanup;
    }
  }
  if (opt.list) {
    size_t total = 0;
    for (uint32_t k = 0; k < opt.num_ops; k++) {
      const bpc_op_entry_t* e = bpc_op_entry(opt.ops[k]);
      printf("%-14s %-10s %5zu cases\n", e->name, bpc_accuracy_name(e->accuracy), lists[k].count);
      if (opt.verbose) {
        for (size_t j = 0; j < lists[k].count; j++) printf("  %s\n", lists[k].items[j].id);
      }
      total += lists[k].count;
    }
    if (opt.runtime) {
      /* The runtime cases depend on the backend; list them for one with two
       * devices and every memory kind. */
      bpc_runtime_target_t t;
      memset(&t, 0, sizeof t);
      t.device_count = 2;
      t.num_spaces = BP_MEMORY_KIND_COUNT_;
      for (uint32_t k = 0; k < BP_MEMORY_KIND_COUNT_; k++) {
        t.spaces[k].kind = k;
        t.spaces[k].flags = BP_MEMORY_FLAG_HOST_VISIBLE;
        t.spaces[k].capacity_bytes = UINT64_C(1) << 30;
      }
      bpc_case_list_t rl;
      memset(&rl, 0, sizeof rl);
      if (bpc_runtime_cases_generate(&t, &rl) != BP_OK) {
        bpc_case_list_free(&rl);
        exit_code = 2;
        goto cleanup;
      }
      for (size_t j = 0; j < rl.count; j++) {
        int first = j == 0 || rl.items[j].op_id != rl.items[j - 1].op_id;
        size_t n = 0;
        while (j + n < rl.count && rl.items[j + n].op_id == rl.items[j].op_id) n++;
        if (first) printf("%-20s %-10s %5zu cases\n", bpc_group_name(rl.items[j].op_id), "runtime", n);
        if (opt.verbose) printf("  %s\n", rl.items[j].id);
      }
      printf("(runtime cases depend on each backend's memory spaces and device count;\n"
             " listed for two devices and every memory kind)\n");
      total += rl.count;
      bpc_case_list_free(&rl);
    }
    printf("%zu cases\n", total);
    bpc_backend_report_t none;
    memset(&none, 0, sizeof none);
    bpc_report_print_summary(&none, 0, 0);
    goto cleanup;
  }
  if (!check_output_paths(&opt)) {
    exit_code = 2;
    goto cleanup;
  }
  if (!opt.journal && (opt.json || opt.markdown || opt.html)) {
    const char* first = opt.json ? opt.json : opt.markdown ? opt.markdown : opt.html;
    size_t len = strlen(first) + sizeof ".journal";
    journal_path = malloc(len);
    if (!journal_path) { exit_code = 2; goto cleanup; }
    snprintf(journal_path, len, "%s.journal", first);
    opt.journal = journal_path;
    if (!check_output_paths(&opt)) {
      exit_code = 2;
      goto cleanup;
    }
  }
  if (opt.resume && !opt.journal) {
    fprintf(stderr, "bp-conform: --resume needs a journal: --journal FILE or a report path\n");
    exit_code = 2;
    goto cleanup;
  }
  if (opt.journal) {
    char selection[4096], msg[400];
    selection_text(&opt, selection, sizeof selection);
    if (bpc_journal_open(opt.journal, selection, opt.resume, &journal, msg, sizeof msg) != BP_OK) {
      fprintf(stderr, "bp-conform: journal: %s\n", msg);
      exit_code = 2;
      goto cleanup;
    }
    if (opt.resume) {
      fprintf(stderr, "bp-conform: resuming from '%s': %zu case results recorded\n", opt.journal,
              bpc_journal_count(journal));
    }
  }
  if (!discover(&opt, names, devices, targets, &nb)) {
    exit_code = 2;
    goto cleanup;
  }
  if (nb == 0) {
    fprintf(stderr, "bp-conform: no backend with a device was loaded\n");
    exit_code = 1;
    goto cleanup;
  }
  /* the ops, then the runtime section (with or without its classic areas) */
  groups = opt.num_ops + (opt.runtime || opt.collectives ? 1u : 0u);
  reports = calloc(nb, sizeof *reports);
  all_results = calloc((size_t)nb * groups + 1, sizeof *all_results);
  if (!reports || !all_results) { exit_code = 2; goto cleanup; }
  uint64_t total = 0; /* every case of the run, for the progress line */
  for (uint32_t b = 0; b < nb; b++) {
    if ((opt.runtime && bpc_runtime_cases_generate(&targets[b], &rt_lists[b]) != BP_OK) ||
        (opt.collectives && bpc_collective_cases_generate(opt.quick, 0, &rt_lists[b]) != BP_OK)) {
      fprintf(stderr, "bp-conform: out of memory generating cases\n");
      exit_code = 2;
      goto cleanup;
    }
    for (uint32_t k = 0; k < groups; k++) total += k < opt.num_ops ? lists[k].count : rt_lists[b].count;
  }
  bpc_progress_start(&progress, stderr, opt.progress < 0 ? isatty(fileno(stderr)) : opt.progress, total);
  /* Run every case not yet in the journal: per backend, one sequence over
   * every group (see run_group). */
  group_first = calloc((size_t)groups + 1, sizeof *group_first);
  if (!group_first) { exit_code = 2; goto cleanup; }
  uint32_t* first = group_first;
  for (uint32_t b = 0; b < nb; b++) {
    run_ctx_t rc = {names[b], &opt, lists, &rt_lists[b], groups, first, UINT32_MAX, journal, &journal_failed, &progress};
    uint64_t count = 0;
    for (uint32_t k = 0; k < groups; k++) {
      first[k] = (uint32_t)count;
      count += group_list(&rc, k)->count;
    }
    if (count >= UINT32_MAX) {
      fprintf(stderr, "bp-conform: too many cases for one backend\n");
      exit_code = 2;
      goto cleanup;
    }
    first[groups] = (uint32_t)count;
    bpc_result_t* flat = calloc(count ? count : 1, sizeof *flat);
    uint8_t* done = calloc(count ? count : 1, 1);
    int ok = flat && done;
    for (uint32_t k = 0; k < groups && ok; k++) {
      size_t n = group_list(&rc, k)->count;
      ok = (all_results[(size_t)b * groups + k] = calloc(n ? n : 1, sizeof *flat)) != NULL;
    }
    if (!ok) { free(flat); free(done); exit_code = 2; goto cleanup; }
    size_t already = 0;
    for (uint32_t g = 0; g < count; g++) {
      uint32_t k = group_of(&rc, g);
      done[g] = (uint8_t)bpc_journal_find(journal, names[b], group_list(&rc, k)->items[g - first[k]].id, &flat[g]);
      already += done[g];
    }
    bpc_progress_set(&progress, names[b], groups ? (opt.num_ops ? bpc_group_name(opt.ops[0]) : "runtime") : "-");
    rc.shown = 0;
    bpc_progress_add(&progress, 0, already);
    bpc_runner_ops_t ops = {&rc, run_group, on_result, done, on_tick};
    bp_status_t st = bpc_run_isolated(&ops, b, (uint32_t)count, opt.timeout_s, flat);
    if (st != BP_OK) {
      bpc_progress_clear(&progress);
      fprintf(stderr, "bp-conform: cannot fork/pipe: the remaining cases are not run\n");
    }
    if (journal) bpc_journal_sync(journal);
    for (uint32_t k = 0; k < groups; k++) {
      const bpc_case_list_t* l = group_list(&rc, k);
      memcpy(all_results[(size_t)b * groups + k], &flat[first[k]], l->count * sizeof *flat);
      if (opt.verbose) {
        bpc_progress_clear(&progress);
        uint64_t bad = 0, resumed = 0;
        for (size_t j = 0; j < l->count; j++) {
          uint32_t s = flat[first[k] + j].status;
          bad += s == BPC_FAIL || s == BPC_CRASH || s == BPC_TIMEOUT;
          resumed += done[first[k] + j];
        }
        fprintf(stderr, "%s: %-20s %5zu cases (%llu from the journal), %llu failed\n", names[b],
                k < opt.num_ops ? bpc_group_name(opt.ops[k]) : "runtime", l->count,
                (unsigned long long)resumed, (unsigned long long)bad);
      }
    }
    free(flat);
    free(done);
  }
  bpc_progress_clear(&progress);
  /* The reports, from the journal as read back from disk (so a resumed run
   * and an uninterrupted one report the same), else from memory. */
  if (journal && bpc_journal_reload(journal) != BP_OK) {
    fprintf(stderr, "bp-conform: cannot read the journal back; reporting from memory\n");
  }
  for (uint32_t b = 0; b < nb; b++) {
    bpc_backend_report_t* rep = &reports[b];
    snprintf(rep->name, sizeof rep->name, "%s", names[b]);
    snprintf(rep->device, sizeof rep->device, "%s", devices[b]);
    for (uint32_t k = 0; k < groups; k++) {
      bpc_case_list_t* l = k < opt.num_ops ? &lists[k] : &rt_lists[b];
      const bpc_result_t* results = all_results[(size_t)b * groups + k];
      for (size_t j = 0; j < l->count; j++) {
        bpc_result_t r = results[j];
        bpc_journal_find(journal, names[b], l->items[j].id, &r);
        if (bpc_report_add(rep, &l->items[j], &r) != BP_OK) { exit_code = 2; goto cleanup; }
      }
    }
  }
  bpc_report_print_summary(reports, nb, opt.verbose);
  if (opt.collectives && !opt.runtime && opt.num_ops == 0) {
    /* The closing line of a collectives-only run, over every backend. */
    uint64_t p = 0, f = 0, sk = 0;
    for (uint32_t b = 0; b < nb; b++) {
      uint64_t bp_, bf, bs;
      bpc_report_counts(&reports[b], &bp_, &bf, &bs);
      p += bp_, f += bf, sk += bs;
    }
    printf("collectives: %llu passed, %llu failed, %llu skipped\n", (unsigned long long)p,
           (unsigned long long)f, (unsigned long long)sk);
  }
  for (uint32_t b = 0; b < nb; b++) {
    uint64_t p, f, s;
    bpc_report_counts(&reports[b], &p, &f, &s);
    if (f > 0 || p + f == 0) exit_code = 1;
    if (p + f == 0) fprintf(stderr, "bp-conform: backend %s ran zero cases\n", reports[b].name);
  }
  if (opt.json && bpc_report_write_json(opt.json, reports, nb) != BP_OK) {
    fprintf(stderr, "bp-conform: cannot write %s\n", opt.json);
    exit_code = exit_code ? exit_code : 2;
  }
  if (opt.markdown && bpc_report_write_markdown(opt.markdown, reports, nb) != BP_OK) {
    fprintf(stderr, "bp-conform: cannot write %s\n", opt.markdown);
    exit_code = exit_code ? exit_code : 2;
  }
  if (opt.html && bpc_report_write_html(opt.html, reports, nb) != BP_OK) {
    fprintf(stderr, "bp-conform: cannot write %s\n", opt.html);
    exit_code = exit_code ? exit_code : 2;
  }
cleanup:
  bpc_progress_clear(&progress);
  if (all_results) {
    for (size_t k = 0; k < (size_t)nb * groups; k++) free(all_results[k]);
    free(all_results);
  }
  free(group_first);
  bpc_journal_close(journal);
  free(journal_path);
  if (reports) {
    for (uint32_t b = 0; b < nb; b++) bpc_report_free(&reports[b]);
    free(reports);
  }
  for (uint32_t k = 0; k < opt.num_ops; k++) bpc_case_list_free(&lists[k]);
  for (uint32_t b = 0; b < MAX_SELECT; b++) bpc_case_list_free(&rt_lists[b]);
  free(lists);
  return exit_code;
}
