/* bp-run: compile a graph (.bpg) and run it.
 *
 *   bp-run FILE.bpg [--device SPEC]... [--policy prefer=SPEC|forbid-fallback]
 *          [--pin NODE=SPEC]... [--sym NAME=N]... [--memory-limit BYTES]
 *          [--report FILE.json] [--save FILE | --load FILE] [--runs N] [--check]
 *          [--seed N] [--quiet]
 *
 * --save writes the compiled executable; --load loads one instead of
 * compiling, and when the file is rejected (corrupt, stale, foreign) says
 * why and compiles.
 * Inputs are random (uniform in [-1, 1) for floats, 0..3 for integers,
 * from --seed). --check runs the same graph eagerly on cpu:0 and compares
 * every output within the conformance suite's elementwise tolerances
 * (f32: 1e-4 relative + 1e-5 absolute; f16/bf16: 1e-2; integers exact);
 * exit status 1 on a mismatch. The text report goes to stdout, the JSON
 * one to --report.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backplane/graph.h"

enum { MAX_DEV = 16, MAX_PINS = 64, MAX_SYMS = 16 };

static int usage(void) {
  fprintf(stderr,
          "usage: bp-run FILE.bpg [--device SPEC]... [--policy prefer=SPEC|forbid-fallback]\n"
          "              [--pin NODE=SPEC]... [--sym NAME=N]... [--memory-limit BYTES]\n"
          "              [--report FILE.json] [--save FILE | --load FILE] [--runs N] [--check]\n"
          "              [--seed N] [--quiet]\n");
  return 2;
}

static int fail(const char* what, bp_status_t st) {
  fprintf(stderr, "bp-run: %s: %s: %s\n", what, bp_status_name(st), bp_status_message());
  return 1;
}

static uint64_t g_rng;
static double rnd(void) {
  g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(g_rng >> 11) / 9007199254740992.0;
}

/* A random tensor of value v's dtype and shape (symbols bound) on dev. */
static bp_status_t make_input(bp_stream_t* stream, const bp_graph_t* g, uint32_t v, const int64_t* syms,
                             bp_tensor_t** out) {
  bp_graph_value_info_t info = {.struct_size = sizeof(info)};
  bp_status_t st = bp_graph_value_info(g, v, &info);
  if (st != BP_OK) return st;
  int64_t dims[BP_MAX_RANK];
  int64_t n = 1;
  for (uint32_t i = 0; i < info.rank; ++i) {
    dims[i] = BP_GRAPH_IS_SYM(info.dims[i]) ? syms[BP_GRAPH_SYM_INDEX(info.dims[i])] : info.dims[i];
    n *= dims[i];
  }
  size_t es = bp_dtype_size(info.dtype);
  uint8_t* data = malloc((size_t)n * es + 1);
  if (data == NULL) return BP_RESOURCE_EXHAUSTED;
  for (int64_t i = 0; i < n; ++i) {
    double x = rnd() * 2 - 1;
    switch (info.dtype) {
      case BP_DTYPE_F32: ((float*)data)[i] = (float)x; break;
      case BP_DTYPE_F64: ((double*)data)[i] = x; break;
      case BP_DTYPE_BOOL: data[i] = x > 0; break;
      case BP_DTYPE_I64: ((int64_t*)data)[i] = (int64_t)(rnd() * 4); break;
      case BP_DTYPE_I32: ((int32_t*)data)[i] = (int32_t)(rnd() * 4); break;
      default: memset(data + (size_t)i * es, 0, es); break;
    }
  }
  st = bp_tensor_create(bp_stream_device(stream), info.dtype, info.rank, dims, out);
  if (st == BP_OK) st = bp_tensor_write(stream, *out, data, (uint64_t)n * es);
  free(data);
  return st;
}

/* Reads t (any device) into a host double array. */
static double* read_doubles(const bp_tensor_t* t, int64_t* out_n) {
  bp_stream_t* s = NULL;
  if (bp_stream_create(bp_tensor_device(t), NULL, &s) != BP_OK) return NULL;
  int64_t n = bp_tensor_numel(t);
  size_t es = bp_dtype_size(bp_tensor_dtype(t));
  uint8_t* raw = malloc((size_t)n * es + 1);
  double* d = malloc(sizeof(double) * (size_t)(n + 1));
  if (raw == NULL || d == NULL || bp_tensor_read(s, t, raw, (uint64_t)n * es) != BP_OK) {
    free(raw);
    free(d);
    bp_stream_release(s);
    return NULL;
  }
  for (int64_t i = 0; i < n; ++i) {
    switch (bp_tensor_dtype(t)) {
      case BP_DTYPE_F32: d[i] = ((float*)raw)[i]; break;
      case BP_DTYPE_F64: d[i] = ((double*)raw)[i]; break;
      case BP_DTYPE_I64: d[i] = (double)((int64_t*)raw)[i]; break;
      case BP_DTYPE_I32: d[i] = ((int32_t*)raw)[i]; break;
      case BP_DTYPE_BOOL: case BP_DTYPE_U8: d[i] = raw[i]; break;
      default: d[i] = NAN; break;
    }
  }
  free(raw);
  bp_stream_release(s);
  *out_n = n;
  return d;
}

static int compare(const char* name, const bp_tensor_t* got, const bp_tensor_t* want) {
  int64_t n1 = 0, n2 = 0;
  double* a = read_doubles(got, &n1);
  double* b = read_doubles(want, &n2);
  int bad = 0;
  if (a == NULL || b == NULL || n1 != n2 || bp_tensor_dtype(got) != bp_tensor_dtype(want)) {
    fprintf(stderr, "bp-run: check: output %s: cannot compare (dtype or size differs)\n", name);
    bad = 1;
  } else {
    uint32_t dt = bp_tensor_dtype(got);
    double rtol = dt == BP_DTYPE_F32 ? 1e-4 : dt == BP_DTYPE_F64 ? 1e-10 : 0;
    double atol = dt == BP_DTYPE_F32 ? 1e-5 : dt == BP_DTYPE_F64 ? 1e-12 : 0;
    double worst = 0;
    for (int64_t i = 0; i < n1; ++i) {
      double err = fabs(a[i] - b[i]);
      int ok = err <= atol + rtol * fabs(b[i]) || (isnan(a[i]) && isnan(b[i]));
      if (!ok && bad < 5) fprintf(stderr, "bp-run: check: output %s[%lld] = %.9g, eager %.9g\n", name, (long long)i, a[i], b[i]);
      bad += !ok;
      if (err > worst) worst = err;
    }
    printf("check: output %s: %lld elements, max abs error %.3g: %s\n", name, (long long)n1, worst, bad ? "FAIL" : "ok");
  }
  free(a);
  free(b);
  return bad != 0;
}

int main(int argc, char** argv) {
  const char* file = NULL;
  const char* dev_specs[MAX_DEV];
  uint32_t ndev = 0, npins = 0, nsyms = 0;
  const char* pin_specs[MAX_PINS];
  const char* sym_specs[MAX_SYMS];
  const char* prefer = NULL;
  const char* report = NULL;
  const char* save = NULL;
  const char* load = NULL;
  int forbid = 0, check = 0, quiet = 0, runs = 1;
  unsigned long long limit = 0;
  g_rng = 1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--device") == 0 && next && ndev < MAX_DEV) dev_specs[ndev++] = argv[++i];
    else if (strcmp(a, "--pin") == 0 && next && npins < MAX_PINS) pin_specs[npins++] = argv[++i];
    else if (strcmp(a, "--sym") == 0 && next && nsyms < MAX_SYMS) sym_specs[nsyms++] = argv[++i];
    else if (strcmp(a, "--policy") == 0 && next) {
      ++i;
      if (strncmp(argv[i], "prefer=", 7) == 0) prefer = argv[i] + 7;
      else if (strcmp(argv[i], "forbid-fallback") == 0) forbid = 1;
      else return usage();
    } else if (strcmp(a, "--report") == 0 && next) report = argv[++i];
    else if (strcmp(a, "--save") == 0 && next) save = argv[++i];
    else if (strcmp(a, "--load") == 0 && next) load = argv[++i];
    else if (strcmp(a, "--runs") == 0 && next) runs = atoi(argv[++i]);
    else if (strcmp(a, "--seed") == 0 && next) g_rng = strtoull(argv[++i], NULL, 10);
    else if (strcmp(a, "--memory-limit") == 0 && next) limit = strtoull(argv[++i], NULL, 10);
    else if (strcmp(a, "--check") == 0) check = 1;
    else if (strcmp(a, "--quiet") == 0) quiet = 1;
    else if (a[0] != '-' && file == NULL) file = a;
    else return usage();
  }
  if (file == NULL || runs < 1 || (save && load)) return usage();
  bp_crash_report_install();
  bp_graph_t* g = NULL;
  bp_status_t st = bp_graph_load_file(file, &g);
  if (st != BP_OK) {
    fprintf(stderr, "bp-run: %s\n", bp_status_message());
    return 1;
  }
  bp_context_t* ctx = NULL;
  if ((st = bp_context_create(NULL, &ctx)) != BP_OK) return fail("context", st);
  int rc = 0;
  bp_device_t* devs[MAX_DEV];
  bp_graph_pin_t pins[MAX_PINS];
  int64_t syms[MAX_SYMS];
  char pin_names[MAX_PINS][BP_MAX_NAME];
  for (uint32_t i = 0; i < ndev; ++i) {
    if ((st = bp_context_find_device(ctx, dev_specs[i], &devs[i])) != BP_OK) return fail(dev_specs[i], st);
  }
  for (uint32_t i = 0; i < npins; ++i) {
    const char* eq = strchr(pin_specs[i], '=');
    if (eq == NULL || (size_t)(eq - pin_specs[i]) >= BP_MAX_NAME) return usage();
    memcpy(pin_names[i], pin_specs[i], (size_t)(eq - pin_specs[i]));
    pin_names[i][eq - pin_specs[i]] = '\0';
    pins[i].node_name = pin_names[i];
    if ((st = bp_context_find_device(ctx, eq + 1, &pins[i].device)) != BP_OK) return fail(eq + 1, st);
  }
  /* Symbols: given by name with --sym; unspecified ones are 1. */
  uint32_t gsyms = bp_graph_symbol_count(g);
  if (gsyms > MAX_SYMS) return usage();
  for (uint32_t k = 0; k < gsyms; ++k) {
    const char* name = "";
    bp_graph_symbol_name(g, k, &name);
    syms[k] = 1;
    for (uint32_t j = 0; j < nsyms; ++j) {
      size_t n = strlen(name);
      if (strncmp(sym_specs[j], name, n) == 0 && sym_specs[j][n] == '=') syms[k] = atoll(sym_specs[j] + n + 1);
    }
  }
  bp_graph_compile_options_t o;
  memset(&o, 0, sizeof(o));
  o.struct_size = sizeof(o);
  o.devices = ndev ? devs : NULL;
  o.num_devices = ndev;
  o.pins = pins;
  o.num_pins = npins;
  o.memory_limit_bytes = limit;
  o.symbol_values = gsyms ? syms : NULL;
  o.num_symbol_values = gsyms;
  if (prefer != NULL && (st = bp_context_find_device(ctx, prefer, &o.prefer_device)) != BP_OK) return fail(prefer, st);
  if (forbid) o.flags |= BP_GRAPH_FORBID_FALLBACK;
  bp_graph_exec_t* x = NULL;
  if (load != NULL) {
    st = bp_graph_exec_load(ctx, load, &x);
    if (st == BP_OK) {
      printf("loaded %s (not compiled)\n", load);
    } else {
      fprintf(stderr, "bp-run: %s rejected (%s): %s; compiling\n", load, bp_status_name(st), bp_status_message());
      x = NULL;
    }
  }
  if (x == NULL && (st = bp_graph_compile(ctx, g, &o, &x)) != BP_OK) {
    rc = fail("compile", st);
    goto out;
  }
  if (save != NULL && (st = bp_graph_exec_save(x, save)) != BP_OK) {
    rc = fail("save", st);
    goto out;
  }
  uint32_t nin = bp_graph_input_count(g), nout = bp_graph_output_count(g);
  bp_tensor_t** in = calloc(nin + 1, sizeof(bp_tensor_t*));
  bp_tensor_t** out = calloc(nout + 1, sizeof(bp_tensor_t*));
  bp_device_t* cpu = NULL;
  bp_stream_t* cs = NULL;
  if (bp_context_find_device(ctx, "cpu:0", &cpu) != BP_OK || bp_stream_create(cpu, NULL, &cs) != BP_OK) {
    rc = fail("cpu:0 (inputs are made there)", BP_NOT_FOUND);
    goto out_run;
  }
  for (uint32_t i = 0; i < nin; ++i) {
    uint32_t v;
    bp_graph_input(g, i, &v);
    if ((st = make_input(cs, g, v, syms, &in[i])) != BP_OK) {
      rc = fail("input", st);
      goto out_run;
    }
  }
  for (int r = 0; r < runs; ++r) {
    if (report != NULL && r == runs - 1) bp_graph_exec_set_profiling(x, 1);
    for (uint32_t k = 0; k < nout; ++k) {
      bp_tensor_release(out[k]);
      out[k] = NULL;
    }
    if ((st = bp_graph_exec_run(x, (const bp_tensor_t* const*)in, nin, out, nout)) != BP_OK) {
      rc = fail("run", st);
      goto out_run;
    }
  }
  if (!quiet) {
    char* text = NULL;
    if (bp_graph_exec_report(x, BP_GRAPH_REPORT_TEXT, &text) == BP_OK) fputs(text, stdout);
    bp_graph_text_free(text);
  }
  if (report != NULL) {
    char* json = NULL;
    FILE* f = fopen(report, "w");
    if (f == NULL || bp_graph_exec_report(x, BP_GRAPH_REPORT_JSON, &json) != BP_OK) {
      fprintf(stderr, "bp-run: cannot write %s\n", report);
      rc = 1;
    } else {
      fputs(json, f);
    }
    if (f) fclose(f);
    bp_graph_text_free(json);
  }
  if (check && rc == 0) {
    bp_tensor_t** ref = calloc(nout + 1, sizeof(bp_tensor_t*));
    if ((st = bp_graph_run_eager(cs, g, (const bp_tensor_t* const*)in, nin, ref, nout)) != BP_OK) {
      rc = fail("eager reference", st);
    } else {
      for (uint32_t k = 0; k < nout; ++k) {
        uint32_t v;
        bp_graph_output(g, k, &v);
        bp_graph_value_info_t vi = {.struct_size = sizeof(vi)};
        bp_graph_value_info(g, v, &vi);
        rc |= compare(vi.name, out[k], ref[k]);
      }
      printf("check against eager on cpu:0: %s\n", rc ? "FAIL" : "ok");
    }
    for (uint32_t k = 0; k < nout; ++k) bp_tensor_release(ref[k]);
    free(ref);
  }
out_run:
  for (uint32_t i = 0; i < nin; ++i) bp_tensor_release(in[i]);
  for (uint32_t k = 0; k < nout; ++k) bp_tensor_release(out[k]);
  free(in);
  free(out);
  bp_stream_release(cs);
out:
  bp_graph_exec_release(x);
  bp_graph_release(g);
  bp_context_release(ctx);
  return rc;
}
