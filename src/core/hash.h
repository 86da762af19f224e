/* FNV-1a, the one non-cryptographic hash of the library: hash tables keyed by names
 * (token texts, tensor and IR value names, store keys), digests that ranks compare
 * (group ids, tags, connection handshakes) and unique-ish names of shared-memory
 * segments. Fast on short keys and simple; not for anything an attacker picks to
 * collide where that would matter. Values are not stored anywhere: they may change
 * between versions. */
#ifndef AK_CORE_HASH_H
#define AK_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define AK_FNV1A64_BASIS 0xcbf29ce484222325ull /* the offset basis: the hash of nothing */
#define AK_FNV1A64_PRIME 0x100000001b3ull

/* h extended over len bytes of data: start from AK_FNV1A64_BASIS (or any seed), and
 * chain calls to hash several pieces as one. */
static inline uint64_t ak__fnv1a64(uint64_t h, const void *data, size_t len) {
    const unsigned char *p = (const unsigned char *)data;
    for (size_t i = 0; i < len; i++) h = (h ^ p[i]) * AK_FNV1A64_PRIME;
    return h;
}

/* The hash of a NUL-terminated string. */
static inline uint64_t ak__fnv1a64_str(const char *s) {
    uint64_t h = AK_FNV1A64_BASIS;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * AK_FNV1A64_PRIME;
    return h;
}

#endif /* AK_CORE_HASH_H */
