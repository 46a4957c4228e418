/* libbackplane_graph: parsing the text format (.bpg; grammar in
 * docs/graph.md). One statement per line; '#' starts a comment. Errors
 * carry "<line>:<column>: ".
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_internal.h"

typedef struct bpg_lex {
  const char* p;   /* current position */
  const char* end; /* end of the current line */
  const char* line_start;
  uint32_t line;
  char err[512];
} bpg_lex_t;

#define BPG_TOK 256

static int bpg_fail(bpg_lex_t* lx, const char* at, const char* fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bpg_fail(bpg_lex_t* lx, const char* at, const char* fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  snprintf(lx->err, sizeof(lx->err), "%u:%u: %s", lx->line, (unsigned)(at - lx->line_start) + 1, msg);
  return -1;
}

static void bpg_skip_ws(bpg_lex_t* lx) {
  while (lx->p < lx->end && (*lx->p == ' ' || *lx->p == '\t' || *lx->p == '\r')) lx->p++;
  if (lx->p < lx->end && *lx->p == '#') lx->p = lx->end;
}

static int bpg_at_eol(bpg_lex_t* lx) {
  bpg_skip_ws(lx);
  return lx->p >= lx->end;
}

static int bpg_ident_char(char c, int first) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
         (!first && c >= '0' && c <= '9');
}

/* A name: identifier or %<digits or identifier>. */
static int bpg_name(bpg_lex_t* lx, char* out, const char* what) {
  bpg_skip_ws(lx);
  const char* s = lx->p;
  const char* q = s;
  if (q < lx->end && *q == '%') {
    ++q;
    while (q < lx->end && bpg_ident_char(*q, 0)) ++q;
    if (q == s + 1) return bpg_fail(lx, s, "expected %s", what);
  } else {
    if (q >= lx->end || !bpg_ident_char(*q, 1)) return bpg_fail(lx, s, "expected %s", what);
    while (q < lx->end && bpg_ident_char(*q, 0)) ++q;
  }
  if ((size_t)(q - s) >= BP_MAX_NAME) return bpg_fail(lx, s, "name longer than %d bytes", BP_MAX_NAME - 1);
  memcpy(out, s, (size_t)(q - s));
  out[q - s] = '\0';
  lx->p = q;
  return 0;
}

static int bpg_expect(bpg_lex_t* lx, char c) {
  bpg_skip_ws(lx);
  if (lx->p >= lx->end || *lx->p != c) {
    return bpg_fail(lx, lx->p, "expected '%c'%s", c, lx->p >= lx->end ? " before the end of the line" : "");
  }
  lx->p++;
  return 0;
}

static int bpg_accept(bpg_lex_t* lx, char c) {
  bpg_skip_ws(lx);
  if (lx->p < lx->end && *lx->p == c) {
    lx->p++;
    return 1;
  }
  return 0;
}

/* A number or word token (no spaces, no punctuation except . - + e). */
static int bpg_word(bpg_lex_t* lx, char* out, size_t cap, const char* what) {
  bpg_skip_ws(lx);
  const char* s = lx->p;
  const char* q = s;
  while (q < lx->end && (bpg_ident_char(*q, 0) || *q == '-' || *q == '+')) ++q;
  if (q == s) return bpg_fail(lx, s, "expected %s", what);
  if ((size_t)(q - s) >= cap) return bpg_fail(lx, s, "%s too long", what);
  memcpy(out, s, (size_t)(q - s));
  out[q - s] = '\0';
  lx->p = q;
  return 0;
}

static int bpg_find_sym(const bp_graph_t* g, const char* name) {
  for (uint32_t i = 0; i < g->num_syms; ++i) {
    if (strcmp(g->syms[i], name) == 0) return (int)i;
  }
  return -1;
}

/* dtype[dim, ...] */
static int bpg_type(bpg_lex_t* lx, bp_graph_t* g, uint32_t* dtype, uint32_t* rank, int64_t* dims) {
  char tok[BPG_TOK];
  bpg_skip_ws(lx);
  const char* at = lx->p;
  if (bpg_name(lx, tok, "a dtype") != 0) return -1;
  *dtype = bp_dtype_from_name(tok);
  if (*dtype == BP_DTYPE_INVALID) return bpg_fail(lx, at, "'%s' is not a dtype", tok);
  if (bpg_expect(lx, '[') != 0) return -1;
  *rank = 0;
  if (bpg_accept(lx, ']')) return 0;
  for (;;) {
    bpg_skip_ws(lx);
    at = lx->p;
    if (bpg_word(lx, tok, sizeof(tok), "a dim") != 0) return -1;
    if (*rank >= BP_MAX_RANK) return bpg_fail(lx, at, "more than %d dims", BP_MAX_RANK);
    if (tok[0] >= '0' && tok[0] <= '9') {
      char* e = NULL;
      errno = 0;
      long long d = strtoll(tok, &e, 10);
      if (*e != '\0' || errno || d < 0) return bpg_fail(lx, at, "'%s' is not a dim", tok);
      dims[(*rank)++] = d;
    } else {
      int k = bpg_find_sym(g, tok);
      if (k < 0) return bpg_fail(lx, at, "'%s' is not a declared symbol (sym %s)", tok, tok);
      dims[(*rank)++] = BP_GRAPH_SYM(k);
    }
    if (bpg_accept(lx, ']')) return 0;
    if (bpg_expect(lx, ',') != 0) return -1;
  }
}

static int bpg_status_fail(bpg_lex_t* lx, const char* at) {
  return bpg_fail(lx, at, "%s", bp_status_message());
}

/* values(1, 2.5, ...) in the constant's dtype. */
static int bpg_parse_values(bpg_lex_t* lx, bp_graph_t* g, const char* name, uint32_t dtype,
                            uint32_t rank, const int64_t* dims, const char* at) {
  if (!bpg_text_values_dtype(dtype)) {
    return bpg_fail(lx, at, "values() takes f32, f64, i8, i16, i32, i64, u8 or bool; %s is %s, use bytes()", name,
                    bp_dtype_name(dtype));
  }
  bpg_value_t probe = {.dtype = dtype, .rank = rank};
  memcpy(probe.dims, dims, sizeof(int64_t) * rank);
  int64_t n = bpg_value_numel(&probe);
  uint64_t bytes = bpg_value_bytes(&probe);
  if (n < 0 || bytes == UINT64_MAX || bytes > ((uint64_t)1 << 32)) return bpg_fail(lx, at, "constant too large for values()");
  /* The buffer grows with the values read, so a large declared shape
   * costs memory only as the text supplies its values. */
  size_t es = bp_dtype_size(dtype), cap = bytes < 4096 ? (size_t)bytes : 4096;
  char* data = malloc(cap ? cap : 1);
  if (data == NULL) return bpg_fail(lx, at, "out of memory");
  int64_t i = 0;
  char tok[BPG_TOK];
  int rc = 0;
  if (!bpg_accept(lx, ')')) {
    for (;;) {
      bpg_skip_ws(lx);
      const char* vat = lx->p;
      if ((rc = bpg_word(lx, tok, sizeof(tok), "a number")) != 0) break;
      if (i >= n) {
        rc = bpg_fail(lx, vat, "more than %lld values for %s", (long long)n, name);
        break;
      }
      if (es * (size_t)(i + 1) > cap) {
        size_t grown = cap * 2 < bytes ? cap * 2 : (size_t)bytes;
        char* p = realloc(data, grown);
        if (p == NULL) {
          rc = bpg_fail(lx, vat, "out of memory");
          break;
        }
        data = p;
        cap = grown;
      }
      char* e = NULL;
      errno = 0;
      char* dst = data + es * (size_t)i;
      if (dtype == BP_DTYPE_F32 || dtype == BP_DTYPE_F64) {
        double d = strtod(tok, &e);
        if (*e != '\0') {
          rc = bpg_fail(lx, vat, "'%s' is not a number", tok);
          break;
        }
        if (dtype == BP_DTYPE_F32) {
          float f = (float)d;
          memcpy(dst, &f, 4);
        } else {
          memcpy(dst, &d, 8);
        }
      } else {
        long long x = strtoll(tok, &e, 10);
        if (*e != '\0' || errno) {
          rc = bpg_fail(lx, vat, "'%s' is not an integer", tok);
          break;
        }
        int64_t x64 = x;
        memcpy(dst, &x64, es); /* little-endian truncation */
      }
      ++i;
      if (bpg_accept(lx, ')')) break;
      if ((rc = bpg_expect(lx, ',')) != 0) break;
    }
  }
  if (rc == 0 && i != n) rc = bpg_fail(lx, at, "%s has %lld elements, values() gave %lld", name, (long long)n, (long long)i);
  uint32_t v;
  if (rc == 0 && bp_graph_add_constant(g, name, dtype, rank, dims, data, bytes, &v) != BP_OK) {
    rc = bpg_status_fail(lx, at);
  }
  free(data);
  return rc;
}

static int bpg_parse_bytes(bpg_lex_t* lx, bp_graph_t* g, const char* name, uint32_t dtype,
                           uint32_t rank, const int64_t* dims, const char* at) {
  bpg_skip_ws(lx);
  const char* s = lx->p;
  while (lx->p < lx->end && *lx->p != ')') lx->p++;
  size_t hex = (size_t)(lx->p - s);
  if (bpg_expect(lx, ')') != 0) return -1;
  if (hex % 2 != 0) return bpg_fail(lx, s, "odd number of hex digits");
  uint8_t* data = malloc(hex / 2 + 1);
  if (data == NULL) return bpg_fail(lx, at, "out of memory");
  for (size_t i = 0; i < hex / 2; ++i) {
    unsigned x;
    char two[3] = {s[2 * i], s[2 * i + 1], 0};
    if (sscanf(two, "%2x", &x) != 1) {
      free(data);
      return bpg_fail(lx, s + 2 * i, "not a hex digit");
    }
    data[i] = (uint8_t)x;
  }
  uint32_t v;
  int rc = 0;
  if (bp_graph_add_constant(g, name, dtype, rank, dims, data, hex / 2, &v) != BP_OK) {
    rc = bpg_status_fail(lx, at);
  }
  free(data);
  return rc;
}

/* const NAME : TYPE = uniform(seed=S, lo=L, hi=H) | values(...) | bytes(hex) */
static int bpg_stmt_const(bpg_lex_t* lx, bp_graph_t* g) {
  char name[BP_MAX_NAME], kind[BPG_TOK];
  uint32_t dtype, rank;
  int64_t dims[BP_MAX_RANK];
  bpg_skip_ws(lx);
  const char* at = lx->p;
  if (bpg_name(lx, name, "a constant name") != 0 || bpg_expect(lx, ':') != 0 ||
      bpg_type(lx, g, &dtype, &rank, dims) != 0 || bpg_expect(lx, '=') != 0) {
    return -1;
  }
  bpg_skip_ws(lx);
  const char* kat = lx->p;
  if (bpg_name(lx, kind, "uniform, values or bytes") != 0 || bpg_expect(lx, '(') != 0) return -1;
  if (strcmp(kind, "values") == 0) return bpg_parse_values(lx, g, name, dtype, rank, dims, at);
  if (strcmp(kind, "bytes") == 0) return bpg_parse_bytes(lx, g, name, dtype, rank, dims, at);
  if (strcmp(kind, "uniform") != 0) return bpg_fail(lx, kat, "'%s': expected uniform, values or bytes", kind);
  unsigned long long seed = 0;
  double lo = 0, hi = 0;
  int have = 0;
  while (!bpg_accept(lx, ')')) {
    char key[BPG_TOK], val[BPG_TOK];
    bpg_skip_ws(lx);
    const char* kat2 = lx->p;
    if (have && bpg_expect(lx, ',') != 0) return -1;
    if (bpg_name(lx, key, "seed, lo or hi") != 0 || bpg_expect(lx, '=') != 0 ||
        bpg_word(lx, val, sizeof(val), "a number") != 0) {
      return -1;
    }
    char* e = NULL;
    if (strcmp(key, "seed") == 0) seed = strtoull(val, &e, 10);
    else if (strcmp(key, "lo") == 0) lo = strtod(val, &e);
    else if (strcmp(key, "hi") == 0) hi = strtod(val, &e);
    else return bpg_fail(lx, kat2, "uniform has no parameter '%s'", key);
    if (*e != '\0') return bpg_fail(lx, kat2, "'%s' is not a number", val);
    have = 1;
  }
  uint32_t v;
  if (bp_graph_add_constant_uniform(g, name, dtype, rank, dims, seed, lo, hi, &v) != BP_OK) {
    return bpg_status_fail(lx, at);
  }
  return 0;
}

static int bpg_lookup(bpg_lex_t* lx, bp_graph_t* g, const char* name, const char* at, uint32_t* v) {
  if (strcmp(name, "_") == 0) {
    *v = BP_GRAPH_NO_VALUE;
    return 0;
  }
  if (bp_graph_find_value(g, name, v) != BP_OK) return bpg_fail(lx, at, "unknown value '%s'", name);
  return 0;
}

/* OUT, ... = OP(IN, ...) {k=v, ...} @NAME */
static int bpg_stmt_node(bpg_lex_t* lx, bp_graph_t* g, const char* first) {
  char outs[4][BP_MAX_NAME];
  uint32_t nout = 0;
  char tok[BPG_TOK];
  size_t flen = strnlen(first, BP_MAX_NAME - 1);
  memcpy(outs[nout], first, flen);
  outs[nout++][flen] = '\0';
  while (bpg_accept(lx, ',')) {
    bpg_skip_ws(lx);
    if (nout >= 4) return bpg_fail(lx, lx->p, "at most 4 outputs");
    if (bpg_name(lx, outs[nout++], "an output name") != 0) return -1;
  }
  if (bpg_expect(lx, '=') != 0) return -1;
  bpg_skip_ws(lx);
  const char* opat = lx->p;
  if (bpg_name(lx, tok, "an op name") != 0) return -1;
  uint32_t op = bpg_view_from_name(tok);
  if (op == BP_OP_INVALID) op = bp_op_from_name(tok);
  if (op == BP_OP_INVALID) return bpg_fail(lx, opat, "unknown op '%s'", tok);
  if (bpg_expect(lx, '(') != 0) return -1;
  uint32_t* ins = NULL;
  uint32_t nin = 0, cap = 0;
  int rc = 0;
  if (!bpg_accept(lx, ')')) {
    for (;;) {
      bpg_skip_ws(lx);
      const char* at = lx->p;
      char nm[BP_MAX_NAME];
      if ((rc = bpg_name(lx, nm, "an input value or _")) != 0) break;
      if (nin == cap) {
        cap = cap ? cap * 2 : 8;
        uint32_t* p = realloc(ins, cap * sizeof(uint32_t));
        if (p == NULL) {
          rc = bpg_fail(lx, at, "out of memory");
          break;
        }
        ins = p;
      }
      if ((rc = bpg_lookup(lx, g, nm, at, &ins[nin])) != 0) break;
      nin++;
      if (bpg_accept(lx, ')')) break;
      if ((rc = bpg_expect(lx, ',')) != 0) break;
    }
  }
  void* attrs = NULL;
  uint32_t asize = bpg_op_attrs_size(op);
  if (rc == 0 && bpg_accept(lx, '{')) {
    attrs = calloc(1, asize ? asize : sizeof(uint32_t));
    if (attrs == NULL) rc = bpg_fail(lx, lx->p, "out of memory");
    if (attrs != NULL) *(uint32_t*)attrs = asize;
    while (rc == 0 && !bpg_accept(lx, '}')) {
      bpg_skip_ws(lx);
      const char* kat = lx->p;
      char key[BPG_TOK], val[BPG_TOK];
      if ((rc = bpg_name(lx, key, "an attribute name")) != 0) break;
      if ((rc = bpg_expect(lx, '=')) != 0) break;
      bpg_skip_ws(lx);
      const char* vat = lx->p;
      if (lx->p < lx->end && *lx->p == '[') {
        const char* q = lx->p;
        while (q < lx->end && *q != ']') ++q;
        if (q >= lx->end) {
          rc = bpg_fail(lx, vat, "unterminated list");
          break;
        }
        size_t n = (size_t)(q - lx->p) + 1;
        if (n >= sizeof(val)) {
          rc = bpg_fail(lx, vat, "list too long");
          break;
        }
        memcpy(val, lx->p, n);
        val[n] = '\0';
        lx->p = q + 1;
      } else if ((rc = bpg_word(lx, val, sizeof(val), "an attribute value")) != 0) {
        break;
      }
      char err[256];
      if (asize == 0) {
        rc = bpg_fail(lx, kat, "op '%s' takes no attributes", tok);
        break;
      }
      int arc = bpg_attrs_set(op, attrs, key, val, err, sizeof(err));
      if (arc != 0) {
        rc = bpg_fail(lx, arc == -2 ? kat : vat, "%s", err);
        break;
      }
      if (bpg_accept(lx, '}')) break;
      if ((rc = bpg_expect(lx, ',')) != 0) break;
    }
  }
  char nname[BP_MAX_NAME];
  int named = 0;
  if (rc == 0 && bpg_accept(lx, '@')) {
    rc = bpg_name(lx, nname, "a node name");
    named = 1;
  }
  if (rc == 0 && !bpg_at_eol(lx)) rc = bpg_fail(lx, lx->p, "unexpected text after the node");
  uint32_t vals[4];
  if (rc == 0) {
    /* Output names must be new. */
    for (uint32_t k = 0; k < nout && rc == 0; ++k) {
      uint32_t dup;
      if (strcmp(outs[k], "_") == 0) rc = bpg_fail(lx, opat, "'_' cannot name an output");
      else if (bp_graph_find_value(g, outs[k], &dup) == BP_OK) rc = bpg_fail(lx, opat, "value '%s' is already defined", outs[k]);
    }
  }
  if (rc == 0 && bpg_is_view(op) && attrs == NULL) {
    attrs = calloc(1, sizeof(bp_graph_view_params_t));
    if (attrs == NULL) rc = bpg_fail(lx, opat, "out of memory");
    else *(uint32_t*)attrs = sizeof(bp_graph_view_params_t);
  }
  if (rc == 0 && bpg_add_node(g, op, ins, nin, attrs, named ? nname : NULL, vals, nout, "bp_graph_add_node") != BP_OK) {
    rc = bpg_status_fail(lx, opat);
  }
  if (rc == 0) {
    g->nodes[g->num_nodes - 1].line = lx->line;
    for (uint32_t k = 0; k < nout && rc == 0; ++k) {
      char auto_name[32];
      snprintf(auto_name, sizeof(auto_name), "%%%u", vals[k]);
      if (strcmp(outs[k], auto_name) == 0) continue; /* the printer's name for an unnamed value */
      if (bp_graph_set_value_name(g, vals[k], outs[k]) != BP_OK) rc = bpg_status_fail(lx, opat);
    }
  }
  free(ins);
  free(attrs);
  return rc;
}

static int bpg_statement(bpg_lex_t* lx, bp_graph_t* g, int* seen_graph) {
  char kw[BPG_TOK];
  bpg_skip_ws(lx);
  const char* at = lx->p;
  if (bpg_name(lx, kw, "a statement") != 0) return -1;
  if (strcmp(kw, "graph") == 0) {
    char name[BP_MAX_NAME];
    if (*seen_graph || g->num_values > 0 || g->num_syms > 0) return bpg_fail(lx, at, "'graph' must be the first statement");
    if (bpg_name(lx, name, "a graph name") != 0) return -1;
    g->name = malloc(strlen(name) + 1);
    if (g->name == NULL) return bpg_fail(lx, at, "out of memory");
    strcpy(g->name, name);
    *seen_graph = 1;
  } else if (strcmp(kw, "sym") == 0) {
    do {
      char name[BP_MAX_NAME];
      int64_t d;
      bpg_skip_ws(lx);
      const char* sat = lx->p;
      if (bpg_name(lx, name, "a symbol name") != 0) return -1;
      if (bp_graph_add_symbol(g, name, &d) != BP_OK) return bpg_status_fail(lx, sat);
    } while (bpg_accept(lx, ','));
  } else if (strcmp(kw, "input") == 0) {
    char name[BP_MAX_NAME];
    uint32_t dtype, rank, v;
    int64_t dims[BP_MAX_RANK];
    bpg_skip_ws(lx);
    const char* nat = lx->p;
    if (bpg_name(lx, name, "an input name") != 0 || bpg_expect(lx, ':') != 0 ||
        bpg_type(lx, g, &dtype, &rank, dims) != 0) {
      return -1;
    }
    if (bp_graph_add_input(g, name, dtype, rank, dims, &v) != BP_OK) return bpg_status_fail(lx, nat);
  } else if (strcmp(kw, "const") == 0) {
    if (bpg_stmt_const(lx, g) != 0) return -1;
  } else if (strcmp(kw, "output") == 0) {
    do {
      char name[BP_MAX_NAME];
      uint32_t v;
      bpg_skip_ws(lx);
      const char* oat = lx->p;
      if (bpg_name(lx, name, "an output value") != 0) return -1;
      if (bpg_lookup(lx, g, name, oat, &v) != 0) return -1;
      if (v == BP_GRAPH_NO_VALUE) return bpg_fail(lx, oat, "'_' cannot be an output");
      if (bp_graph_add_output(g, v) != BP_OK) return bpg_status_fail(lx, oat);
    } while (bpg_accept(lx, ','));
  } else {
    return bpg_stmt_node(lx, g, kw);
  }
  if (!bpg_at_eol(lx)) return bpg_fail(lx, lx->p, "unexpected text after the statement");
  return 0;
}

bp_status_t bp_graph_parse(const char* text, size_t size, bp_graph_t** out_graph) {
  if ((text == NULL && size > 0) || out_graph == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_parse: text or out_graph is NULL");
  }
  bp_graph_t* g = NULL;
  bp_status_t st = bp_graph_create(NULL, &g);
  if (st != BP_OK) return st;
  bpg_lex_t lx;
  memset(&lx, 0, sizeof(lx));
  const char* p = text;
  const char* end = text + size;
  int seen_graph = 0;
  while (p < end) {
    const char* nl = memchr(p, '\n', (size_t)(end - p));
    const char* le = nl ? nl : end;
    lx.line++;
    lx.line_start = p;
    lx.p = p;
    lx.end = le;
    if (memchr(p, '\0', (size_t)(le - p)) != NULL) {
      bpg_fail(&lx, memchr(p, '\0', (size_t)(le - p)), "NUL byte in the text");
      goto fail;
    }
    if (!bpg_at_eol(&lx) && bpg_statement(&lx, g, &seen_graph) != 0) goto fail;
    p = nl ? nl + 1 : end;
  }
  st = bp_graph_infer(g);
  if (st != BP_OK) {
    bp_graph_release(g);
    return st; /* the message names the node and its line */
  }
  *out_graph = g;
  return BP_OK;
fail:
  bp_graph_release(g);
  return bpg_error(BP_INVALID_ARGUMENT, "%s", lx.err);
}

bp_status_t bp_graph_load_file(const char* path, bp_graph_t** out_graph) {
  if (path == NULL || out_graph == NULL) {
    return bpg_error(BP_INVALID_ARGUMENT, "bp_graph_load_file: path or out_graph is NULL");
  }
  FILE* f = fopen(path, "rb");
  if (f == NULL) return bpg_error(BP_NOT_FOUND, "%s: cannot open: %s", path, strerror(errno));
  char* buf = NULL;
  size_t len = 0, cap = 0;
  for (;;) {
    if (len == cap) {
      cap = cap ? cap * 2 : 65536;
      if (cap > ((size_t)1 << 30)) {
        free(buf);
        fclose(f);
        return bpg_error(BP_OUT_OF_RANGE, "%s: larger than 1 GiB", path);
      }
      char* nb = realloc(buf, cap);
      if (nb == NULL) {
        free(buf);
        fclose(f);
        return bpg_error(BP_RESOURCE_EXHAUSTED, "%s: out of memory", path);
      }
      buf = nb;
    }
    size_t n = fread(buf + len, 1, cap - len, f);
    len += n;
    if (n == 0) break;
  }
  int err = ferror(f);
  fclose(f);
  if (err) {
    free(buf);
    return bpg_error(BP_DATA_LOSS, "%s: read error", path);
  }
  bp_status_t st = bp_graph_parse(buf, len, out_graph);
  free(buf);
  if (st != BP_OK) return bpg_error(st, "%s:%s", path, bp_status_message());
  return BP_OK;
}
