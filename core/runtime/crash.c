/* Crash report: which plugin a fatal signal came from.
 *
 * The core sets a per-thread note around every call into a plugin
 * (BP__NOTE_CALL in internal.h); the handler installed by
 * bp_crash_report_install reads it and writes one line to stderr. A crash on
 * a thread the plugin started itself (a stream worker running a kernel) has
 * no note: the handler then looks the faulting code address up in the code
 * ranges of the plugin libraries loaded (recorded at load). The handler is
 * async-signal-safe: it reads memory, builds the line in a stack buffer and
 * calls write(2), sigaction(2) and raise(3) only. Afterwards the signal
 * takes the action that was installed before ours (SIG_DFL unless the
 * application or a sanitizer had a handler).
 */
#define _GNU_SOURCE /* dl_iterate_phdr, REG_RIP */
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#include "internal.h"

__thread bp__call_note_t bp__call_note __attribute__((tls_model("initial-exec")));

/* ---- code ranges of plugin libraries ------------------------------------ */
#define BP__MAX_LIBRARIES 64

typedef struct library_range {
  _Atomic uintptr_t lo, hi;          /* [lo, hi) of the executable segments; 0 = free */
  _Atomic(const char*) name;        /* the plugin's name (lives as long as the plugin) */
  _Atomic(const bp_plugin_t*) owner;
} library_range_t;

static library_range_t g_libraries[BP__MAX_LIBRARIES];

typedef struct find_range {
  void* symbol; /* an address inside the library */
  uintptr_t lo, hi;
} find_range_t;

static int find_range_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  find_range_t* f = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  int contains = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr, b = a + ph->p_memsz;
    if ((uintptr_t)f->symbol >= a && (uintptr_t)f->symbol < b) contains = 1;
    if (!(ph->p_flags & PF_X)) continue;
    if (a < lo) lo = a;
    if (b > hi) hi = b;
  }
  if (!contains || hi == 0) return 0;
  f->lo = lo;
  f->hi = hi;
  return 1;
}

void bp__crash_note_library(const bp_plugin_t* plugin, void* library) {
  find_range_t f = {dlsym(library, BP_PLUGIN_ENTRY_NAME), 0, 0};
  if (!f.symbol || !dl_iterate_phdr(find_range_cb, &f)) return;
  for (int i = 0; i < BP__MAX_LIBRARIES; ++i) {
    const bp_plugin_t* none = NULL;
    if (!atomic_compare_exchange_strong(&g_libraries[i].owner, &none, plugin)) continue;
    atomic_store(&g_libraries[i].name, plugin->name);
    atomic_store(&g_libraries[i].lo, f.lo);
    atomic_store(&g_libraries[i].hi, f.hi);
    return;
  }
}

void bp__crash_forget_library(const bp_plugin_t* plugin) {
  for (int i = 0; i < BP__MAX_LIBRARIES; ++i) {
    if (atomic_load(&g_libraries[i].owner) != plugin) continue;
    atomic_store(&g_libraries[i].hi, 0);
    atomic_store(&g_libraries[i].lo, 0);
    atomic_store(&g_libraries[i].owner, NULL);
  }
}

static const char* plugin_of_address(uintptr_t pc) {
  for (int i = 0; i < BP__MAX_LIBRARIES; ++i) {
    uintptr_t lo = atomic_load(&g_libraries[i].lo), hi = atomic_load(&g_libraries[i].hi);
    if (pc >= lo && pc < hi) return atomic_load(&g_libraries[i].name);
  }
  return NULL;
}

static uintptr_t fault_pc(void* ucontext) {
  const ucontext_t* uc = ucontext;
  if (!uc) return 0;
#if defined(__x86_64__)
  return (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
  return (uintptr_t)uc->uc_mcontext.pc;
#else
  return 0;
#endif
}

/* ---- the handler ------------------------------------------------------- */
static const int k_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
#define BP__NUM_SIGNALS ((int)(sizeof(k_signals) / sizeof(k_signals[0])))
static struct sigaction g_previous[BP__NUM_SIGNALS];
static atomic_int g_installed;

static const char* signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGFPE: return "SIGFPE";
    case SIGABRT: return "SIGABRT";
    default: return "signal";
  }
}

/* Appends `s` (NULL: "?") to buf[*len], never past cap - 1; strings from
 * plugins are cut at the first control byte. */
static void append(char* buf, size_t cap, size_t* len, const char* s) {
  if (!s) s = "?";
  for (; *s && *len + 1 < cap; ++s) {
    if ((unsigned char)*s < 0x20 || *s == 0x7f) break;
    buf[(*len)++] = *s;
  }
}

static void crash_handler(int sig, siginfo_t* info, void* ucontext) {
  (void)info;
  int saved_errno = errno;
  bp__call_note_t note = bp__call_note;
  char line[512];
  size_t len = 0;
  append(line, sizeof line, &len, "backplane: ");
  append(line, sizeof line, &len, signal_name(sig));
  if (note.plugin) {
    append(line, sizeof line, &len, ": crashed inside plugin ");
    append(line, sizeof line, &len, note.plugin);
    append(line, sizeof line, &len, " in slot ");
    append(line, sizeof line, &len, note.slot);
    if (note.op) {
      append(line, sizeof line, &len, " (op ");
      append(line, sizeof line, &len, note.op);
      append(line, sizeof line, &len, ")");
    }
  } else {
    const char* owner = plugin_of_address(fault_pc(ucontext));
    if (owner) {
      append(line, sizeof line, &len, ": crashed inside plugin ");
      append(line, sizeof line, &len, owner);
      append(line, sizeof line, &len, " on a thread of its own (no slot in progress)");
    } else {
      append(line, sizeof line, &len, ": not inside a plugin call");
    }
  }
  line[len++] = '\n';
  ssize_t ignored = write(STDERR_FILENO, line, len);
  (void)ignored;

  /* The action installed before ours; an ignored fatal signal would loop. */
  for (int i = 0; i < BP__NUM_SIGNALS; ++i) {
    if (k_signals[i] != sig) continue;
    struct sigaction previous = g_previous[i];
    if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler == SIG_IGN)
      previous.sa_handler = SIG_DFL;
    sigaction(sig, &previous, NULL);
  }
  errno = saved_errno;
  /* Pending until the handler returns (the signal is blocked inside it);
   * a faulting instruction also faults again on return. */
  raise(sig);
}

BP_API bp_status_t bp_crash_report_install(void) {
  bp__clear_error();
  int expected = 0;
  if (!atomic_compare_exchange_strong(&g_installed, &expected, 1)) return BP_OK;
  for (int i = 0; i < BP__NUM_SIGNALS; ++i) {
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = crash_handler;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    if (sigaction(k_signals[i], &action, &g_previous[i]) != 0) {
      for (int k = 0; k < i; ++k) sigaction(k_signals[k], &g_previous[k], NULL);
      atomic_store(&g_installed, 0);
      return bp__error(BP_INTERNAL, "bp_crash_report_install: sigaction(%s) failed",
                       signal_name(k_signals[i]));
    }
  }
  return BP_OK;
}

void bp__crash_report_from_env(void) {
  const char* v = getenv("BACKPLANE_CRASH_REPORT");
  if (!v || !*v || strcmp(v, "0") == 0) return;
  if (strcmp(v, "1") == 0)
    (void)bp_crash_report_install();
  else
    bp__log(BP_LOG_WARN, "BACKPLANE_CRASH_REPORT='%s' is not 0 or 1; the crash report stays off", v);
}
