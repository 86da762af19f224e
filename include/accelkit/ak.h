/* accelkit umbrella header: version, status codes, logging, memory, threads, CPU info.
 *
 * Every public function returns ak_status (0 = AK_OK). On failure, ak_last_error()
 * returns a one-line, thread-local description of what was wrong. The library never
 * exits or aborts on bad input. Pointers passed in are borrowed for the duration of the
 * call unless a comment says otherwise. */
#ifndef ACCELKIT_AK_H
#define ACCELKIT_AK_H

#include <stddef.h>
#include <stdint.h>

/* AK_VERSION_MAJOR/MINOR/PATCH/STRING and the AK_WITH_* product switches, generated
 * from CMakeLists.txt's project(VERSION) and options */
#include "accelkit/version.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define AK_API __attribute__((visibility("default")))
#else
#define AK_API
#endif

/* ---- status ---------------------------------------------------------------------- */

/* Codes say whose fault a failure is. */
typedef enum ak_status {
    AK_OK = 0,
    AK_ERR_INVALID_ARG = 1,   /* the caller passed something wrong */
    AK_ERR_UNSUPPORTED = 2,   /* valid request this build/machine cannot do */
    AK_ERR_NO_MEMORY = 3,     /* allocation failed */
    AK_ERR_IO = 4,            /* file or socket error */
    AK_ERR_REMOTE = 5,        /* a peer failed or disconnected */
    AK_ERR_TIMEOUT = 6,       /* a deadline passed */
    AK_ERR_MISMATCH = 7,      /* ranks disagree (dtype, shape, op, ...) */
    AK_ERR_INVALID_MODEL = 8, /* a model file is malformed */
    AK_ERR_INTERNAL = 9,      /* a bug in accelkit */
    AK_STATUS_COUNT_
} ak_status;

/* Short constant name of a status ("invalid argument"); never NULL. */
AK_API const char *ak_status_str(ak_status status);
/* Detail of the last failure on this thread; "" when none. Valid until the next failing
 * accelkit call on this thread. */
AK_API const char *ak_last_error(void);
AK_API void ak_clear_error(void);

/* ---- library ---------------------------------------------------------------------- */

/* Reads the environment (AK_*), detects the CPU and fills the kernel dispatch table.
 * Idempotent and thread-safe; every other call runs it implicitly. Fails with
 * AK_ERR_INVALID_ARG on a bad AK_* value (e.g. unknown AK_ISA) and keeps failing. */
AK_API ak_status ak_init(void);
AK_API ak_status ak_version(int *major, int *minor, int *patch);

/* ---- logging ---------------------------------------------------------------------- */

typedef enum ak_log_level {
    AK_LOG_OFF = 0,
    AK_LOG_ERROR = 1,
    AK_LOG_WARN = 2,
    AK_LOG_INFO = 3,
    AK_LOG_DEBUG = 4,
    AK_LOG_TRACE = 5
} ak_log_level;

/* Subsystems form a mask (AK_LOG_SUBSYS=comm,infer). */
typedef enum ak_subsys {
    AK_SUBSYS_CORE = 1u << 0,
    AK_SUBSYS_KERNELS = 1u << 1,
    AK_SUBSYS_COMM = 1u << 2,
    AK_SUBSYS_TRAIN = 1u << 3,
    AK_SUBSYS_INFER = 1u << 4,
    AK_SUBSYS_LLM = 1u << 5,
    AK_SUBSYS_PLAN = 1u << 6,
    AK_SUBSYS_CLI = 1u << 7,
    AK_SUBSYS_ALL = 0xffu
} ak_subsys;

/* Receives each emitted line (no trailing newline). Called from any thread, possibly
 * concurrently; must not call back into the logger. */
typedef void (*ak_log_fn)(ak_log_level level, ak_subsys subsys, const char *line, void *user);

/* NULL restores the default sink (stderr). `user` is borrowed until replaced. */
AK_API ak_status ak_log_set_callback(ak_log_fn fn, void *user);
AK_API ak_status ak_log_set_level(ak_log_level level);
AK_API ak_status ak_log_set_subsystems(uint32_t mask);
/* Parses "error|warn|info|debug|trace|off" and "core,comm,..|all". */
AK_API ak_status ak_log_parse_level(const char *text, ak_log_level *out);
AK_API ak_status ak_log_parse_subsystems(const char *text, uint32_t *out);

/* ---- memory ----------------------------------------------------------------------- */

#define AK_ALIGNMENT 64

/* 64-byte aligned allocation; size 0 yields a valid unique pointer. Free with ak_free. */
AK_API ak_status ak_alloc(size_t size, void **out);
AK_API void ak_free(void *ptr);

/* Bump allocator over 64-byte aligned blocks; allocations live until reset or free. */
typedef struct ak_arena ak_arena;
/* block_size 0 = 1 MiB. */
AK_API ak_status ak_arena_create(size_t block_size, ak_arena **out);
/* Returns memory aligned to `align` (a power of two, ≥ 1, ≤ 4096). */
AK_API ak_status ak_arena_alloc(ak_arena *arena, size_t size, size_t align, void **out);
/* Bytes handed out since the last reset (including alignment padding). */
AK_API ak_status ak_arena_used(const ak_arena *arena, size_t *out);
/* Forgets all allocations, keeps the first block for reuse. */
AK_API ak_status ak_arena_reset(ak_arena *arena);
AK_API void ak_arena_free(ak_arena *arena);

/* ---- threads ---------------------------------------------------------------------- */

/* A persistent pool: workers spin briefly after work (AK_POOL_SPIN_US) and then sleep
 * on a futex, so an idle pool costs no CPU. The calling thread takes part in the work. */
typedef struct ak_threadpool ak_threadpool;

/* Processes [begin, end) of the index space; thread_index is in [0, nthreads). */
typedef void (*ak_parallel_fn)(void *ctx, size_t begin, size_t end, int thread_index);

/* nthreads counts the caller; 0 = AK_NUM_THREADS or the number of online cores. */
AK_API ak_status ak_threadpool_create(int nthreads, ak_threadpool **out);
AK_API void ak_threadpool_free(ak_threadpool *pool);
AK_API ak_status ak_threadpool_size(const ak_threadpool *pool, int *out);
/* Splits [0, n) into chunks of at least `grain` items (0 = automatic); thread t starts on
 * the t-th contiguous share of them and takes over what is left of the others' when done.
 * Returns when all chunks are done. Not reentrant on the same pool: a
 * nested call from inside fn runs serially on the calling thread. */
AK_API ak_status ak_threadpool_parallel_for(ak_threadpool *pool, size_t n, size_t grain,
                                            ak_parallel_fn fn, void *ctx);
/* The process-wide pool (AK_NUM_THREADS threads), created on first use. */
AK_API ak_status ak_threadpool_global(ak_threadpool **out);

/* ---- time and tracing ------------------------------------------------------------- */

/* Monotonic clock in nanoseconds (CLOCK_MONOTONIC). */
AK_API uint64_t ak_now_ns(void);

/* One Chrome-trace (Perfetto JSON) writer per process, shared by every subsystem.
 * Started by AK_TRACE=file or ak_trace_start ("%p" in the path becomes the process id);
 * thread-safe; events are buffered and streamed to the file at least once a second while
 * events arrive (a killed process keeps them; its file lacks only the closing "\n]}\n"),
 * and the document is closed by ak_trace_stop (also at exit). Event names/categories are
 * copied. Collectives record one event per call. */
AK_API ak_status ak_trace_start(const char *path);
AK_API ak_status ak_trace_stop(void);
AK_API int ak_trace_enabled(void);
/* A complete event ("ph":"X") from start_ns lasting dur_ns on the calling thread. */
AK_API ak_status ak_trace_complete(const char *category, const char *name, uint64_t start_ns,
                                   uint64_t dur_ns);
/* An instant event ("ph":"i") now on the calling thread. */
AK_API ak_status ak_trace_instant(const char *category, const char *name);
/* A counter sample ("ph":"C"). */
AK_API ak_status ak_trace_counter(const char *category, const char *name, double value);

/* ---- CPU and system --------------------------------------------------------------- */

typedef enum ak_isa {
    AK_ISA_GENERIC = 0, /* portable C only */
    AK_ISA_AVX2 = 1,    /* AVX2 + FMA + F16C */
    AK_ISA_AVX512 = 2,  /* AVX2 set + AVX-512 F/BW/VL/DQ */
    AK_ISA_COUNT_
} ak_isa;

/* Micro-architecture families whose kernel tiles differ. What sets them apart is how
 * 512-bit vectors run: Zen 4 splits each 512-bit operation over two 256-bit halves (no
 * more work per cycle than 256-bit code), Zen 5 and Intel's AVX-512 cores run them at
 * full width (twice the integer dot-product rate of 256-bit code). */
typedef enum ak_cpu_family {
    AK_CPU_FAMILY_OTHER = 0,        /* none of the below: the ISA's default tiles */
    AK_CPU_FAMILY_AVX2 = 1,         /* x86 without AVX-512 */
    AK_CPU_FAMILY_ZEN4 = 2,         /* AMD family 19h with AVX-512: 512-bit split in two */
    AK_CPU_FAMILY_ZEN5 = 3,         /* AMD family 1Ah and later: 512-bit at full width */
    AK_CPU_FAMILY_INTEL_AVX512 = 4, /* Intel with AVX-512: 512-bit at full width */
    AK_CPU_FAMILY_COUNT_
} ak_cpu_family;

typedef struct ak_cpu_info {
    char vendor[16];
    char brand[64];
    int logical_cores;
    int has_sse42, has_avx, has_avx2, has_fma, has_f16c;
    int has_avx512f, has_avx512bw, has_avx512vl, has_avx512dq, has_avx512_bf16,
        has_avx512_fp16, has_avx512_vnni;
    size_t l1d_bytes, l2_bytes, l3_bytes; /* 0 when unknown */
    ak_isa best_isa;                      /* best this CPU supports */
    ak_isa active_isa;                    /* what the kernels use (after AK_ISA) */
    ak_cpu_family family;                 /* micro-architecture family (after AK_CPU_FAMILY) */
    ak_cpu_family detected_family;        /* what cpuid says */
} ak_cpu_info;

AK_API ak_status ak_cpu_get_info(ak_cpu_info *out);
AK_API const char *ak_isa_name(ak_isa isa);
/* Parses "generic|avx2|avx512|auto" (auto = best supported). */
AK_API ak_status ak_isa_parse(const char *text, ak_isa *out);
/* "other", "avx2", "zen4", "zen5", "intel-avx512" ("unknown" past the enum). */
AK_API const char *ak_cpu_family_name(ak_cpu_family family);
/* Whether the family runs 512-bit vector operations at full width (the kernels then take
 * their 512-bit tiles, table "avx512w"). */
AK_API int ak_cpu_family_wide512(ak_cpu_family family);

#ifdef __cplusplus
}
#endif
#endif /* ACCELKIT_AK_H */
