/* Little-endian integer encoding for wire formats (store protocol, TCP transport headers),
 * independent of the host's byte order and alignment. */
#ifndef AK_CORE_LE_BYTES_H
#define AK_CORE_LE_BYTES_H

#include <stdint.h>

static inline void ak__put_u32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline void ak__put_u64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static inline uint32_t ak__get_u32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
    return v;
}

static inline uint64_t ak__get_u64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif /* AK_CORE_LE_BYTES_H */
