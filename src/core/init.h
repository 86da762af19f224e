/* Internal start-up hooks between core/ parts (called by ak_init only). */
#ifndef AK_CORE_INIT_H
#define AK_CORE_INIT_H

#include <string.h>

#include "accelkit/ak.h"

/* Detects CPU features once (cpuid/xgetbv, caches, cores). */
ak_status ak__cpu_detect(void);
/* Fails when the CPU cannot run `isa`. */
ak_status ak__cpu_set_active_isa(ak_isa isa);
/* May the CPU run `isa`? (for kernel tables; detects on first use) */
int ak__cpu_supports(ak_isa isa);
/* AK_CPU_FAMILY's values ("auto": the detected family), and the family in use: set once
 * ak_init validated it (a family needs its ISA), read by the kernels' table choice. */
ak_status ak__cpu_family_parse(const char *text, ak_cpu_family *out);
ak_status ak__cpu_set_family(ak_cpu_family family);
ak_cpu_family ak__cpu_family(void);
/* 1 when the active ISA (after AK_ISA) includes AVX2, for code that picks its AVX2 copy
 * per call; decided on the first call, after ak_init has set the ISA. */
int ak__cpu_active_avx2(void);
ak_isa ak__cpu_active_isa(void);
/* Size in bytes of the level-1 data, level-2 or level-3 cache; 0 when unknown. Never
 * fails (kernels call it without touching ak_last_error). */
size_t ak__cpu_cache_bytes(int level);
/* Starts the process trace and writes it at exit. */
ak_status ak__trace_start_at_exit(const char *path);
/* How many times ak_init has succeeded: layers that cache what they derived from the
 * parameters (the kernels' active table) redo it when this changes. */
unsigned ak__init_generation(void);
/* Re-runs ak_init from scratch after the environment changed (tests only). */
ak_status ak__init_reset(void);

#endif /* AK_CORE_INIT_H */
