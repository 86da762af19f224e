/* Argument checks shared by the public kernel entry points (vec_api.c, reduce_api.c):
 * each fails with AK_ERR_INVALID_ARG and a message naming the function and argument. */
#ifndef AK_KERNELS_API_CHECK_H
#define AK_KERNELS_API_CHECK_H

#include <stddef.h>

#include "accelkit/kernels.h"

/* A known dtype; n elements of it fit in the address space; *es = its size. */
ak_status ak__check_count(const char *fn, ak_dtype dtype, size_t n, size_t *es);
/* n elements of es bytes at p: not NULL unless empty, aligned to es (kernels access the
 * buffer through typed pointers). */
ak_status ak__check_buf(const char *fn, const char *name, const void *p, size_t n, size_t es);
/* dst must not overlap src, except being exactly src when exact_ok (the kernels read a
 * block of each input before writing it, which is only safe at the same address). */
ak_status ak__check_overlap(const char *fn, const char *dname, const void *dst, size_t dbytes,
                            const char *sname, const void *src, size_t sbytes, int exact_ok);

/* dst, a, b: n elements of es bytes each, dst exactly equal to or disjoint from each
 * input (the checks of every dst = a op b kernel). */
ak_status ak__check_binary(const char *fn, const void *dst, const void *a, const void *b,
                           size_t n, size_t es);

#endif /* AK_KERNELS_API_CHECK_H */
