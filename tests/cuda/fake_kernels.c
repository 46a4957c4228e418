/* Kernel launches of the fake driver: modules are PTX text (the entry
 * points and their parameter counts are read from it), and a launch runs
 * the kernel of the same name compiled from the shared kernel source as
 * host C (fake_kernel_host.h, the table generated from kernels.def), in
 * stream order: every work-item of every group, one group at a time; a
 * kernel with barriers runs its group's work-items as coroutines
 * (ucontext) that take turns at each barrier, so local memory (a static in
 * the host build) is shared by the group as on the device. Every
 * launch is recorded (name, grid, block, shared memory, parameter values)
 * for the tests, and every pointer parameter must lie in a live
 * allocation. */
#include <pthread.h>
#include <stdio.h>
#include <ucontext.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cuda.h"
#include "fake_kernel_host.h"

int fake_cuda_range_ok(const char* name, const void* p, size_t n);
void fake_cuda_misuse(const char* what);
CUresult fake_cuda_enqueue_call(const char* name, CUstream h, void (*fn)(void*), void* user,
                                size_t size, const void* key);
CUresult fake_cuda_enter(const char* name);

/* From the generated table (fake_kernel_table.c). */
typedef struct fk_kernel {
  const char* name;
  void (*fn)(void);
  int barrier;
} fk_kernel_t;
extern const fk_kernel_t fk_kernels[];
extern const int fk_kernel_count;

#define FAKE_EXPORT __attribute__((visibility("default")))
#define FK_MAX_PARAMS 16
#define FK_MAX_ENTRIES 16
#define MOD_MAGIC 0x4d4f4455u

typedef struct fk_function {
  char name[64];
  int nparams;
  const fk_kernel_t* host;
} fk_function_t;
typedef struct fk_module {
  uint32_t magic;
  int nfn;
  fk_function_t fn[FK_MAX_ENTRIES];
} fk_module_t;

__thread fk_item_t fk_item;
/* The running group's scheduler and the work-item coroutine in control. */
static __thread ucontext_t* t_sched;
static __thread ucontext_t* t_self;
void fk_barrier(void) {
  if (t_sched) swapcontext(t_self, t_sched); /* the others reach it too */
}

static pthread_mutex_t g_launch_mu = PTHREAD_MUTEX_INITIALIZER;
static fake_cuda_launch_t g_last;
static uint64_t g_launches;

/* ---- modules ------------------------------------------------------------- */
static void parse_entries(const char* ptx, fk_module_t* m) {
  for (const char* p = strstr(ptx, ".entry "); p && m->nfn < FK_MAX_ENTRIES;
       p = strstr(p + 1, ".entry ")) {
    fk_function_t* f = &m->fn[m->nfn];
    const char* n = p + 7;
    size_t len = strcspn(n, "( \n\t");
    if (len >= sizeof f->name) continue;
    memcpy(f->name, n, len);
    f->name[len] = 0;
    const char* end = strchr(n, ')');
    for (const char* q = strstr(n, ".param"); q && end && q < end; q = strstr(q + 1, ".param"))
      f->nparams++;
    /* A generated fused kernel (bp_ew_gen_<v>, NVRTC) has the signature
     * of the interpreter bp_ew_<v> and computes what it does: the fake
     * runs the interpreter with the same arguments. */
    char host[64];
    snprintf(host, sizeof host, "%s", f->name);
    if (!strncmp(f->name, "bp_ew_gen_", 10)) snprintf(host, sizeof host, "bp_ew_%s", f->name + 10);
    for (int k = 0; k < fk_kernel_count; ++k)
      if (!strcmp(fk_kernels[k].name, host)) f->host = &fk_kernels[k];
    m->nfn++;
  }
}

/* A cubin (an ELF of the CUDA machine, 190): its SM from e_flags (bits
 * 8..15), its kernels from the .nv.info.<kernel> sections, each parameter
 * an EIATTR_KPARAM_INFO (0x17) record. 0, or -1 for a malformed image. */
#define FK_EM_CUDA 190
static int parse_cubin(const unsigned char* img, size_t size, int* out_sm, fk_module_t* m) {
  if (size < 64 || img[4] != 2 /* ELF64 */) return -1;
  uint16_t machine, shentsize, shnum, shstrndx;
  uint32_t flags;
  uint64_t shoff;
  memcpy(&machine, img + 18, 2);
  memcpy(&flags, img + 48, 4);
  memcpy(&shoff, img + 40, 8);
  memcpy(&shentsize, img + 58, 2);
  memcpy(&shnum, img + 60, 2);
  memcpy(&shstrndx, img + 62, 2);
  if (machine != FK_EM_CUDA || shentsize < 64 || shstrndx >= shnum ||
      shoff > size || (uint64_t)shnum * shentsize > size - shoff)
    return -1;
  *out_sm = (int)((flags >> 8) & 0xff);
  uint64_t str_off, str_size;
  memcpy(&str_off, img + shoff + (uint64_t)shstrndx * shentsize + 24, 8);
  memcpy(&str_size, img + shoff + (uint64_t)shstrndx * shentsize + 32, 8);
  if (str_off > size || str_size > size - str_off) return -1;
  for (uint16_t i = 0; i < shnum && m->nfn < FK_MAX_ENTRIES; ++i) {
    const unsigned char* sh = img + shoff + (uint64_t)i * shentsize;
    uint32_t name;
    uint64_t off, sz;
    memcpy(&name, sh, 4);
    memcpy(&off, sh + 24, 8);
    memcpy(&sz, sh + 32, 8);
    if (name >= str_size || off > size || sz > size - off) return -1;
    const char* sname = (const char*)img + str_off + name;
    if (strnlen(sname, str_size - name) == str_size - name) return -1;
    if (strncmp(sname, ".nv.info.", 9) != 0) continue;
    fk_function_t* f = &m->fn[m->nfn];
    if (strlen(sname + 9) >= sizeof f->name) continue;
    snprintf(f->name, sizeof f->name, "%s", sname + 9);
    for (uint64_t k = 0; k + 4 <= sz;) { /* {format, attribute, [u16 size, value]} */
      uint8_t fmt = img[off + k], attr = img[off + k + 1];
      uint16_t vsize = 0;
      if (fmt == 4) memcpy(&vsize, img + off + k + 2, 2);
      if (fmt == 4 && attr == 0x17) f->nparams++;
      k += fmt == 4 ? 4u + vsize : 4u;
    }
    for (int q = 0; q < fk_kernel_count; ++q)
      if (!strcmp(fk_kernels[q].name, f->name)) f->host = &fk_kernels[q];
    m->nfn++;
  }
  return 0;
}

static char g_last_image[32];

int fake_cuda_cc(void);
FAKE_EXPORT CUresult cuModuleLoadDataEx(CUmodule* out, const void* image, unsigned n,
                                        CUjit_option* opts, void** vals) {
  CUresult r = fake_cuda_enter("cuModuleLoadDataEx");
  if (r != CUDA_SUCCESS) return r;
  (void)n, (void)opts, (void)vals;
  if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
  const unsigned char* img = image;
  int cubin = !memcmp(img, "\177ELF", 4);
  if (!cubin && !strstr((const char*)image, ".entry ")) return CUDA_ERROR_INVALID_IMAGE;
  fk_module_t* m = calloc(1, sizeof *m);
  if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
  m->magic = MOD_MAGIC;
  char kind[32] = "ptx";
  if (cubin) {
    /* The driver takes a cubin for its own major at the same or an older
     * minor, and reads the image's own size from its headers. */
    int sm = 0, cc = fake_cuda_cc();
    if (parse_cubin(img, 64u << 20, &sm, m) != 0) r = CUDA_ERROR_INVALID_IMAGE;
    else if (sm / 10 != cc / 10 || sm % 10 > cc % 10) r = CUDA_ERROR_NO_BINARY_FOR_GPU;
    snprintf(kind, sizeof kind, "cubin sm_%d", sm);
  } else {
    parse_entries(image, m);
  }
  if (r != CUDA_SUCCESS) {
    m->magic = 0;
    free(m);
    return r;
  }
  pthread_mutex_lock(&g_launch_mu);
  snprintf(g_last_image, sizeof g_last_image, "%s", kind);
  pthread_mutex_unlock(&g_launch_mu);
  *out = (CUmodule)m;
  return CUDA_SUCCESS;
}

void fake_kernels_last_image(char* out, size_t cap) {
  pthread_mutex_lock(&g_launch_mu);
  snprintf(out, cap, "%s", g_last_image);
  pthread_mutex_unlock(&g_launch_mu);
}
FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction* out, CUmodule h, const char* name) {
  CUresult r = fake_cuda_enter("cuModuleGetFunction");
  if (r != CUDA_SUCCESS) return r;
  fk_module_t* m = (fk_module_t*)h;
  if (!m || m->magic != MOD_MAGIC) {
    fake_cuda_misuse("cuModuleGetFunction: unknown module");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  for (int i = 0; i < m->nfn; ++i)
    if (!strcmp(m->fn[i].name, name)) return *out = (CUfunction)&m->fn[i], CUDA_SUCCESS;
  return CUDA_ERROR_NOT_FOUND;
}
FAKE_EXPORT CUresult cuModuleUnload(CUmodule h) {
  CUresult r = fake_cuda_enter("cuModuleUnload");
  if (r != CUDA_SUCCESS) return r;
  fk_module_t* m = (fk_module_t*)h;
  if (!m || m->magic != MOD_MAGIC) {
    fake_cuda_misuse("cuModuleUnload: unknown module (unloaded twice?)");
    return CUDA_ERROR_INVALID_HANDLE;
  }
  m->magic = 0;
  free(m);
  return CUDA_SUCCESS;
}

/* ---- launches ------------------------------------------------------------- */
typedef struct fk_job {
  const fk_kernel_t* k;
  int nparams;
  uint64_t p[FK_MAX_PARAMS];
  unsigned grid[3], block[3];
} fk_job_t;

/* Every kernel takes byte pointers (operands, then the argument block);
 * the PTX says how many. */
typedef uint8_t* P;
#define FK_CALL(n, ...)                             \
  case n: ((void (*)(__VA_ARGS__))j->k->fn)
static int call_kernel(const fk_job_t* j) {
  P p[FK_MAX_PARAMS];
  for (int i = 0; i < j->nparams; ++i) p[i] = (P)(uintptr_t)j->p[i];
  switch (j->nparams) {
    FK_CALL(2, P, P)(p[0], p[1]); return 1;
    FK_CALL(3, P, P, P)(p[0], p[1], p[2]); return 1;
    FK_CALL(4, P, P, P, P)(p[0], p[1], p[2], p[3]); return 1;
    FK_CALL(5, P, P, P, P, P)(p[0], p[1], p[2], p[3], p[4]); return 1;
    FK_CALL(6, P, P, P, P, P, P)(p[0], p[1], p[2], p[3], p[4], p[5]); return 1;
    FK_CALL(7, P, P, P, P, P, P, P)(p[0], p[1], p[2], p[3], p[4], p[5], p[6]); return 1;
    FK_CALL(8, P, P, P, P, P, P, P, P)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]); return 1;
    FK_CALL(9, P, P, P, P, P, P, P, P, P)(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]);
    return 1;
    default: return 0;
  }
}

#define FK_STACK (256u << 10)

typedef struct fk_fiber {
  ucontext_t ctx;
  fk_item_t item;
  int done;
  char* stack;
} fk_fiber_t;

static __thread const fk_job_t* t_job;
static __thread fk_fiber_t* t_fiber;
static void fiber_entry(void) {
  call_kernel(t_job);
  t_fiber->done = 1; /* uc_link returns to the scheduler */
}

/* One group with barriers: every work-item a coroutine, resumed in turn
 * until all have returned. */
static void run_group_fibers(const fk_job_t* j, fk_fiber_t* f, unsigned n) {
  ucontext_t sched;
  t_sched = &sched;
  t_job = j;
  for (unsigned i = 0; i < n; ++i) {
    f[i].done = 0;
    getcontext(&f[i].ctx);
    f[i].ctx.uc_stack.ss_sp = f[i].stack;
    f[i].ctx.uc_stack.ss_size = FK_STACK;
    f[i].ctx.uc_link = &sched;
    makecontext(&f[i].ctx, fiber_entry, 0);
  }
  for (unsigned left = n; left > 0;) {
    left = 0;
    for (unsigned i = 0; i < n; ++i) {
      if (f[i].done) continue;
      fk_item = f[i].item;
      t_fiber = &f[i];
      t_self = &f[i].ctx;
      swapcontext(&sched, &f[i].ctx);
      if (!f[i].done) left++;
    }
  }
  t_sched = NULL;
}

static void run_job(void* arg) {
  fk_job_t* j = arg;
  fk_item_t it;
  memset(&it, 0, sizeof it);
  for (int d = 0; d < 3; ++d) it.lsize[d] = j->block[d], it.ngrp[d] = j->grid[d];
  unsigned per_group = j->block[0] * j->block[1] * j->block[2];
  fk_fiber_t* f = j->k->barrier ? calloc(per_group, sizeof *f) : NULL;
  char* stacks = j->k->barrier ? malloc((size_t)per_group * FK_STACK) : NULL;
  if (j->k->barrier && (!f || !stacks)) {
    fake_cuda_misuse("fake kernels: out of host memory for a work-group");
    free(f);
    free(stacks);
    return;
  }
  for (unsigned i = 0; f && i < per_group; ++i) f[i].stack = stacks + (size_t)i * FK_STACK;
  for (unsigned gz = 0; gz < j->grid[2]; ++gz)
    for (unsigned gy = 0; gy < j->grid[1]; ++gy)
      for (unsigned gx = 0; gx < j->grid[0]; ++gx) {
        it.grp[0] = gx, it.grp[1] = gy, it.grp[2] = gz;
        unsigned n = 0;
        for (unsigned lz = 0; lz < j->block[2]; ++lz)
          for (unsigned ly = 0; ly < j->block[1]; ++ly)
            for (unsigned lx = 0; lx < j->block[0]; ++lx, ++n) {
              unsigned l[3] = {lx, ly, lz};
              for (int d = 0; d < 3; ++d) it.lid[d] = l[d], it.gid[d] = it.grp[d] * it.lsize[d] + l[d];
              if (f) {
                f[n].item = it;
              } else {
                fk_item = it;
                call_kernel(j);
              }
            }
        if (f) run_group_fibers(j, f, per_group);
      }
  free(f);
  free(stacks);
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                    CUstream stream, void** params, void** extra) {
  CUresult r = fake_cuda_enter("cuLaunchKernel");
  if (r != CUDA_SUCCESS) return r;
  const fk_function_t* fn = (const fk_function_t*)f;
  if (!fn || !params || extra || !gx || !gy || !gz || !bx || !by || !bz ||
      (uint64_t)bx * by * bz > 1024 || fn->nparams > FK_MAX_PARAMS) {
    fake_cuda_misuse("cuLaunchKernel: bad function, launch shape or parameters");
    return CUDA_ERROR_INVALID_VALUE;
  }
  fk_job_t* j = calloc(1, sizeof *j);
  if (!j) return CUDA_ERROR_OUT_OF_MEMORY;
  j->k = fn->host;
  j->nparams = fn->nparams;
  unsigned g[3] = {gx, gy, gz}, b[3] = {bx, by, bz};
  memcpy(j->grid, g, sizeof g);
  memcpy(j->block, b, sizeof b);
  pthread_mutex_lock(&g_launch_mu);
  memset(&g_last, 0, sizeof g_last);
  snprintf(g_last.name, sizeof g_last.name, "%s", fn->name);
  memcpy(g_last.grid, g, sizeof g);
  memcpy(g_last.block, b, sizeof b);
  g_last.shared_bytes = shmem;
  g_last.nparams = fn->nparams;
  for (int i = 0; i < fn->nparams; ++i) memcpy(&j->p[i], params[i], 8); /* all .u64 here */
  memcpy(g_last.params, j->p, sizeof j->p);
  g_launches++;
  pthread_mutex_unlock(&g_launch_mu);
  for (int i = 0; i < fn->nparams; ++i)
    if (!fake_cuda_range_ok("cuLaunchKernel pointer parameter", (const void*)(uintptr_t)j->p[i], 1)) {
      free(j);
      return CUDA_ERROR_INVALID_VALUE;
    }
  if (!j->k || j->nparams < 2 || j->nparams > 9) {
    /* recorded, but the fake has no host build of this kernel */
    fprintf(stderr, "fake libcuda: %s (%d parameters) has no host build; launch refused\n",
            fn->name, fn->nparams);
    free(j);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return fake_cuda_enqueue_call("cuLaunchKernel", stream, run_job, j, sizeof *j, fn);
}

void fake_kernels_reset(void) {
  pthread_mutex_lock(&g_launch_mu);
  g_last_image[0] = 0;
  memset(&g_last, 0, sizeof g_last);
  g_launches = 0;
  pthread_mutex_unlock(&g_launch_mu);
}

void fake_kernels_last_launch(fake_cuda_launch_t* out, uint64_t* count) {
  pthread_mutex_lock(&g_launch_mu);
  *out = g_last;
  *count = g_launches;
  pthread_mutex_unlock(&g_launch_mu);
}
