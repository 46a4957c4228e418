/* libmpi through dlopen: loading, Open MPI detection, initialisation
 * ownership and error mapping (mpi_lib.h). */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "mpi_lib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bp_kit.h"
#include "mpi_internal.h"

bp_mpi_lib_t bp_mpi = {.lock = PTHREAD_MUTEX_INITIALIZER,
                       .call_lock = PTHREAD_MUTEX_INITIALIZER,
                       .multiple = 1};

#define BP_KIT_SYMBOL_TABLE bp_mpi_symbols_t
static const bp_kit_symbol_t k_functions[] = {
    BP_MPI_SYMBOLS(BP_KIT_SYMBOL_REQUIRED, BP_KIT_SYMBOL_OPTIONAL)};
static const bp_kit_symbol_t k_objects[] = {
    BP_MPI_OBJECTS(BP_KIT_SYMBOL_REQUIRED, BP_KIT_SYMBOL_OPTIONAL)};
#undef BP_KIT_SYMBOL_TABLE

/* Opens the first library that loads; `msg` gets every name's dlerror. */
static bp_status_t open_library(char* msg, size_t cap) {
  const char* env = getenv("BP_MPI_LIBRARY");
  const char* names[3];
  uint32_t n = 0;
  if (env && *env) names[n++] = env;
  else {
    names[n++] = "libmpi.so.40";
    names[n++] = "libmpi.so";
  }
  size_t used = 0;
  msg[0] = 0;
  for (uint32_t i = 0; i < n; i++) {
    char one[384];
    if (bp_kit_library_open(&names[i], 1, &bp_mpi.handle, one, sizeof one) == BP_OK) {
      snprintf(bp_mpi.path, sizeof bp_mpi.path, "%s", names[i]);
      return BP_OK;
    }
    if (used < cap)
      used += (size_t)snprintf(msg + used, cap - used, "%s%s", i ? "; " : "", one);
  }
  return BP_UNAVAILABLE;
}

/* Predefined objects: the process's global definition first. When the
 * executable links libmpi and refers to MPI_COMM_WORLD, the object lives
 * in the executable (a copy relocation) and libmpi's own references point
 * there; dlsym on libmpi's handle would return the unused original. */
static void* resolve_object(void* handle, const char* name) {
  void* p = dlsym(RTLD_DEFAULT, name);
  return p ? p : dlsym(handle, name);
}

/* Loads every symbol, or says why this libmpi cannot be used. */
static bp_status_t load_symbols(char* msg, size_t cap) {
  bp_mpi_symbols_t t;
  memset(&t, 0, sizeof t);
  if (bp_kit_symbols_load(&t, k_functions, BP_KIT_COUNT(k_functions), bp_kit_dlsym, bp_mpi.handle,
                          bp_mpi.path, msg, cap))
    return BP_UNAVAILABLE;
  char objects[256];
  if (bp_kit_symbols_load(&t, k_objects, BP_KIT_COUNT(k_objects), resolve_object, bp_mpi.handle,
                          bp_mpi.path, objects, sizeof objects)) {
    /* MPICH (and Intel MPI, MVAPICH) export MPIR_* internals and no ompi_*
     * objects: its handles are integer constants of its own mpi.h. */
    int mpich = dlsym(bp_mpi.handle, "MPIR_Init_thread") != NULL ||
                dlsym(bp_mpi.handle, "MPIR_Version") != NULL;
    snprintf(msg, cap, "%s is %s: this plugin targets Open MPI's ABI, whose predefined handles "
             "are the ompi_mpi_* objects (%s)", bp_mpi.path,
             mpich ? "MPICH or an MPICH derivative (its handles are integer constants)"
                   : "not Open MPI",
             objects);
    return BP_UNAVAILABLE;
  }
  memcpy(&bp_mpi.f, &t, sizeof t);
  return BP_OK;
}

bp_status_t bp_mpi_lib_acquire(void) {
  pthread_mutex_lock(&bp_mpi.lock);
  bp_status_t st = BP_OK;
  char msg[1024];
  if (!bp_mpi.handle) {
    st = open_library(msg, sizeof msg);
    if (st == BP_OK && (st = load_symbols(msg, sizeof msg)) != BP_OK) {
      bp_kit_library_close(bp_mpi.handle);
      bp_mpi.handle = NULL;
    }
  }
  if (st == BP_OK) bp_mpi.instances++;
  pthread_mutex_unlock(&bp_mpi.lock);
  if (st != BP_OK) return bp_kit_error(st, "mpi: %s", msg);
  return BP_OK;
}

void bp_mpi_lib_release(void) {
  pthread_mutex_lock(&bp_mpi.lock);
  if (bp_mpi.instances > 0 && --bp_mpi.instances == 0 && bp_mpi.handle) {
    int finalized = 1;
    if (bp_mpi.ready) (void)bp_mpi.f.MPI_Finalized(&finalized);
    if (bp_mpi.ready && !finalized) {
      for (uint32_t d = 0; d < BP_DTYPE_SLOTS; d++)
        for (uint32_t o = 0; o < 4; o++)
          if (bp_mpi.user_ops[d][o]) (void)bp_mpi.f.MPI_Op_free(&bp_mpi.user_ops[d][o]);
      if (bp_mpi.owned) {
        (void)bp_mpi.f.MPI_Finalize();
        bp_mpi_parked_release(); /* nothing of MPI runs any more */
      }
    }
    memset(bp_mpi.user_ops, 0, sizeof bp_mpi.user_ops);
    if (!bp_mpi.ready) { /* never initialised: nothing of MPI runs, unload */
      bp_kit_library_close(bp_mpi.handle);
      bp_mpi.handle = NULL;
    }
    bp_mpi.ready = bp_mpi.owned = 0;
  }
  pthread_mutex_unlock(&bp_mpi.lock);
}

bp_status_t bp_mpi_lib_ready(void) {
  pthread_mutex_lock(&bp_mpi.lock);
  bp_status_t st = BP_OK;
  if (!bp_mpi.ready) {
    int inited = 0, finalized = 0, level = 0, rc;
    rc = bp_mpi.f.MPI_Finalized(&finalized);
    if (rc == BP_MPI_SUCCESS && finalized) {
      st = bp_kit_error(BP_FAILED_PRECONDITION,
                        "mpi: MPI was finalized in this process and cannot be initialised again");
      goto done;
    }
    if (rc == BP_MPI_SUCCESS) rc = bp_mpi.f.MPI_Initialized(&inited);
    if (rc == BP_MPI_SUCCESS && inited) {
      rc = bp_mpi.f.MPI_Query_thread(&level);
    } else if (rc == BP_MPI_SUCCESS) {
      rc = bp_mpi.f.MPI_Init_thread(NULL, NULL, BP_MPI_THREAD_MULTIPLE, &level);
      if (rc == BP_MPI_SUCCESS) bp_mpi.owned = 1;
    }
    if (rc != BP_MPI_SUCCESS) {
      st = bp_kit_error(BP_UNAVAILABLE, "mpi: initialising MPI (%s) failed with MPI error %d",
                        bp_mpi.path, rc);
      goto done;
    }
    bp_mpi.thread_level = level;
    bp_mpi.multiple = level >= BP_MPI_THREAD_MULTIPLE;
    if (!bp_mpi.multiple)
      bp_kit_log(BP_LOG_INFO,
                 "mpi: MPI gives thread level %d (not MPI_THREAD_MULTIPLE): every MPI call of "
                 "this plugin is serialized by a lock%s",
                 level,
                 level < BP_MPI_THREAD_SERIALIZED
                     ? "; streams call MPI from their worker threads, which a lower level than "
                       "MPI_THREAD_SERIALIZED does not allow: use stream == NULL"
                     : "");
    bp_mpi.ready = 1;
  }
done:
  pthread_mutex_unlock(&bp_mpi.lock);
  return st;
}

bp_status_t bp_mpi_check(int rc, const char* what) {
  if (rc == BP_MPI_SUCCESS) return BP_OK;
  char text[BP_MPI_MAX_ERROR_STRING] = "";
  int len = 0;
  if (bp_mpi.f.MPI_Error_string(rc, text, &len) != BP_MPI_SUCCESS)
    snprintf(text, sizeof text, "error %d", rc);
  text[sizeof text - 1] = 0;
  bp_status_t st = BP_INTERNAL;
  if (rc == BP_MPI_ERR_TRUNCATE) st = BP_INVALID_ARGUMENT;
  else if (rc == BP_MPI_ERR_NO_MEM) st = BP_RESOURCE_EXHAUSTED;
  return bp_kit_error(st, "mpi: %s: %s (MPI error %d)", what, text, rc);
}
