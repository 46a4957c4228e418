/* The MPI plugin's view of libmpi: Open MPI's ABI, opened with dlopen.
 *
 * The plugin is built without mpi.h. Every MPI handle is a pointer in Open
 * MPI (MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request, MPI_Group,
 * MPI_Errhandler), and its predefined handles are the addresses of global
 * objects of libmpi (MPI_COMM_WORLD is &ompi_mpi_comm_world, MPI_FLOAT is
 * &ompi_mpi_float, MPI_SUM is &ompi_mpi_op_sum): they are resolved with
 * dlsym like the functions, so the plugin runs against whichever Open MPI
 * (4.x, 5.x: libmpi.so.40) is installed. MPICH and its derivatives (Intel
 * MPI, MVAPICH) define those handles as integer constants and export no
 * ompi_* objects: on such a libmpi the load fails with UNAVAILABLE saying
 * so.
 *
 * The constants below are Open MPI's values (mpi.h of 4.1 and 5.0).
 *
 * Library search: BP_MPI_LIBRARY (a path; the tests point it at a fake),
 * else libmpi.so.40, else libmpi.so.
 *
 * Threading: bp_mpi_lib_* functions are thread-safe (one mutex).
 * MPI calls go through BP_MPI(...), which takes `call_lock` when MPI gives
 * less than MPI_THREAD_MULTIPLE (MPI was initialised by the application
 * with a lower level): calls are then serialized.
 */
#ifndef BACKPLANE_MPI_LIB_H_
#define BACKPLANE_MPI_LIB_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "backplane/plugin.h"
#include "bp_kit_dynlib.h"

typedef void* bp_mpi_h; /* any Open MPI handle */

#define BP_MPI_SUCCESS 0
#define BP_MPI_UNDEFINED (-32766)
#define BP_MPI_THREAD_SERIALIZED 2
#define BP_MPI_THREAD_MULTIPLE 3
#define BP_MPI_ERR_TRUNCATE 15
#define BP_MPI_ERR_NO_MEM 17
#define BP_MPI_MAX_ERROR_STRING 256
#define BP_MPI_IN_PLACE ((void*)1)

/* Open MPI's MPI_Status (ompi/include/mpi.h.in): _ucount is the bytes
 * received. */
typedef struct bp_mpi_status {
  int source, tag, error, cancelled;
  size_t ucount;
} bp_mpi_status_t;

typedef void (*bp_mpi_user_fn)(void* in, void* inout, int* len, bp_mpi_h* type);

typedef int (*pfn_MPI_Initialized)(int*);
typedef int (*pfn_MPI_Init_thread)(int*, char***, int, int*);
typedef int (*pfn_MPI_Query_thread)(int*);
typedef int (*pfn_MPI_Finalize)(void);
typedef int (*pfn_MPI_Comm_rank)(bp_mpi_h, int*);
typedef int (*pfn_MPI_Comm_group)(bp_mpi_h, bp_mpi_h*);
typedef int (*pfn_MPI_Group_incl)(bp_mpi_h, int, const int*, bp_mpi_h*);
typedef int (*pfn_MPI_Group_free)(bp_mpi_h*);
typedef int (*pfn_MPI_Comm_create_group)(bp_mpi_h, bp_mpi_h, int, bp_mpi_h*);
typedef int (*pfn_MPI_Comm_split)(bp_mpi_h, int, int, bp_mpi_h*);
typedef int (*pfn_MPI_Comm_free)(bp_mpi_h*);
typedef int (*pfn_MPI_Comm_set_errhandler)(bp_mpi_h, bp_mpi_h);
typedef int (*pfn_MPI_Iallgather)(const void*, int, bp_mpi_h, void*, int, bp_mpi_h, bp_mpi_h,
                                  bp_mpi_h*);
typedef int (*pfn_MPI_Iallreduce)(const void*, void*, int, bp_mpi_h, bp_mpi_h, bp_mpi_h, bp_mpi_h*);
typedef int (*pfn_MPI_Ireduce)(const void*, void*, int, bp_mpi_h, bp_mpi_h, int, bp_mpi_h,
                               bp_mpi_h*);
typedef int (*pfn_MPI_Ibcast)(void*, int, bp_mpi_h, int, bp_mpi_h, bp_mpi_h*);
typedef int (*pfn_MPI_Ireduce_scatter_block)(const void*, void*, int, bp_mpi_h, bp_mpi_h, bp_mpi_h,
                                             bp_mpi_h*);
typedef int (*pfn_MPI_Ialltoall)(const void*, int, bp_mpi_h, void*, int, bp_mpi_h, bp_mpi_h,
                                 bp_mpi_h*);
typedef int (*pfn_MPI_Ialltoallv)(const void*, const int*, const int*, bp_mpi_h, void*, const int*,
                                  const int*, bp_mpi_h, bp_mpi_h, bp_mpi_h*);
typedef int (*pfn_MPI_Isend)(const void*, int, bp_mpi_h, int, int, bp_mpi_h, bp_mpi_h*);
typedef int (*pfn_MPI_Irecv)(void*, int, bp_mpi_h, int, int, bp_mpi_h, bp_mpi_h*);
typedef int (*pfn_MPI_Reduce_local)(const void*, void*, int, bp_mpi_h, bp_mpi_h);
typedef int (*pfn_MPI_Testall)(int, bp_mpi_h*, int*, bp_mpi_status_t*);
typedef int (*pfn_MPI_Op_create)(bp_mpi_user_fn, int, bp_mpi_h*);
typedef int (*pfn_MPI_Op_free)(bp_mpi_h*);
typedef int (*pfn_MPI_Error_string)(int, char*, int*);
typedef int (*pfn_MPI_Get_library_version)(char*, int*);

/* Functions, then predefined objects (their addresses are the handles). */
#define BP_MPI_SYMBOLS(REQ, OPT)                                  \
  REQ(pfn_MPI_Initialized, MPI_Initialized)                       \
  REQ(pfn_MPI_Initialized, MPI_Finalized)                         \
  REQ(pfn_MPI_Init_thread, MPI_Init_thread)                       \
  REQ(pfn_MPI_Query_thread, MPI_Query_thread)                     \
  REQ(pfn_MPI_Finalize, MPI_Finalize)                             \
  REQ(pfn_MPI_Comm_rank, MPI_Comm_rank)                           \
  REQ(pfn_MPI_Comm_rank, MPI_Comm_size)                           \
  REQ(pfn_MPI_Comm_group, MPI_Comm_group)                         \
  REQ(pfn_MPI_Group_incl, MPI_Group_incl)                         \
  REQ(pfn_MPI_Group_free, MPI_Group_free)                         \
  REQ(pfn_MPI_Comm_create_group, MPI_Comm_create_group)           \
  REQ(pfn_MPI_Comm_split, MPI_Comm_split)                         \
  REQ(pfn_MPI_Comm_free, MPI_Comm_free)                           \
  REQ(pfn_MPI_Comm_set_errhandler, MPI_Comm_set_errhandler)       \
  REQ(pfn_MPI_Iallgather, MPI_Iallgather)                         \
  REQ(pfn_MPI_Iallreduce, MPI_Iallreduce)                         \
  REQ(pfn_MPI_Ireduce, MPI_Ireduce)                               \
  REQ(pfn_MPI_Ibcast, MPI_Ibcast)                                 \
  REQ(pfn_MPI_Ireduce_scatter_block, MPI_Ireduce_scatter_block)   \
  REQ(pfn_MPI_Ialltoall, MPI_Ialltoall)                           \
  REQ(pfn_MPI_Ialltoallv, MPI_Ialltoallv)                         \
  REQ(pfn_MPI_Isend, MPI_Isend)                                   \
  REQ(pfn_MPI_Irecv, MPI_Irecv)                                   \
  REQ(pfn_MPI_Testall, MPI_Testall)                               \
  REQ(pfn_MPI_Reduce_local, MPI_Reduce_local)                     \
  REQ(pfn_MPI_Op_create, MPI_Op_create)                           \
  REQ(pfn_MPI_Op_free, MPI_Op_free)                               \
  REQ(pfn_MPI_Error_string, MPI_Error_string)                     \
  OPT(pfn_MPI_Get_library_version, MPI_Get_library_version)

#define BP_MPI_OBJECTS(REQ, OPT)                            \
  REQ(bp_mpi_h, ompi_mpi_comm_world)                        \
  REQ(bp_mpi_h, ompi_mpi_comm_null)                         \
  REQ(bp_mpi_h, ompi_mpi_errors_return)                     \
  REQ(bp_mpi_h, ompi_mpi_op_sum)                            \
  REQ(bp_mpi_h, ompi_mpi_op_prod)                           \
  REQ(bp_mpi_h, ompi_mpi_op_min)                            \
  REQ(bp_mpi_h, ompi_mpi_op_max)                            \
  REQ(bp_mpi_h, ompi_mpi_byte)                              \
  REQ(bp_mpi_h, ompi_mpi_float)                             \
  REQ(bp_mpi_h, ompi_mpi_double)                            \
  REQ(bp_mpi_h, ompi_mpi_int8_t)                            \
  REQ(bp_mpi_h, ompi_mpi_uint8_t)                           \
  REQ(bp_mpi_h, ompi_mpi_int16_t)                           \
  REQ(bp_mpi_h, ompi_mpi_uint16_t)                          \
  REQ(bp_mpi_h, ompi_mpi_int32_t)                           \
  REQ(bp_mpi_h, ompi_mpi_uint32_t)                          \
  REQ(bp_mpi_h, ompi_mpi_int64_t)                           \
  REQ(bp_mpi_h, ompi_mpi_uint64_t)                          \
  REQ(bp_mpi_h, ompi_mpi_c_float_complex)                   \
  REQ(bp_mpi_h, ompi_mpi_c_double_complex)

typedef struct bp_mpi_symbols {
  BP_MPI_SYMBOLS(BP_KIT_SYMBOL_FIELD, BP_KIT_SYMBOL_FIELD)
  BP_MPI_OBJECTS(BP_KIT_SYMBOL_FIELD, BP_KIT_SYMBOL_FIELD)
} bp_mpi_symbols_t;

/* The process-wide state: libmpi is one per process. */
typedef struct bp_mpi_lib {
  bp_mpi_symbols_t f;
  void* handle;
  char path[256];        /* the library that loaded */
  pthread_mutex_t lock;  /* guards everything below */
  pthread_mutex_t call_lock; /* serializes MPI calls when !multiple */
  int instances;         /* live plugin instances */
  int ready;             /* MPI initialised (by us or the application) */
  int owned;             /* we called MPI_Init_thread: we finalize */
  int multiple;          /* thread level MPI_THREAD_MULTIPLE */
  int thread_level;
  bp_mpi_h user_ops[BP_DTYPE_SLOTS][4]; /* MPI_Op_create'd, by dtype and op */
} bp_mpi_lib_t;

extern bp_mpi_lib_t bp_mpi;

/* Opens libmpi for a new instance (the first one loads it). UNAVAILABLE
 * with the library names and dlerror text, or with the reason a library is
 * not Open MPI. */
bp_status_t bp_mpi_lib_acquire(void);
/* Drops an instance; the last one frees the user ops and, when this plugin
 * initialised MPI, calls MPI_Finalize. libmpi stays loaded once MPI was
 * initialised (Open MPI keeps threads and handlers). */
void bp_mpi_lib_release(void);
/* Initialises MPI if nobody has (MPI_Init_thread with MPI_THREAD_MULTIPLE),
 * or adopts the application's initialisation. FAILED_PRECONDITION when MPI
 * was already finalized. */
bp_status_t bp_mpi_lib_ready(void);

/* BP_OK, or the status an MPI error code maps to, with the message
 * "mpi: <what>: <MPI_Error_string>". */
bp_status_t bp_mpi_check(int rc, const char* what);

static inline void bp_mpi_enter(void) {
  if (!bp_mpi.multiple) pthread_mutex_lock(&bp_mpi.call_lock);
}
static inline void bp_mpi_leave(void) {
  if (!bp_mpi.multiple) pthread_mutex_unlock(&bp_mpi.call_lock);
}
/* One MPI call, serialized when MPI is not thread-multiple: BP_MPI(rc, Fn, args). */
#define BP_MPI(rc, fn, ...)              \
  do {                                   \
    bp_mpi_enter();                      \
    (rc) = bp_mpi.f.fn(__VA_ARGS__);     \
    bp_mpi_leave();                      \
  } while (0)

#endif /* BACKPLANE_MPI_LIB_H_ */
