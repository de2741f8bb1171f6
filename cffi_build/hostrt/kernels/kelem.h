/* Moving one element by its size, inlined (no call per element): for the
 * index kernels (gather.c, space.c, ...) that move elements of any dtype. */
#ifndef AIOGE_HRT_KELEM_H
#define AIOGE_HRT_KELEM_H

#include <stdint.h>
#include <string.h>

static inline void k_cp_el(char *dst, const char *src, size_t esz) {
    switch (esz) {
    case 1: *dst = *src; break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    case 8: memcpy(dst, src, 8); break;
    default: memcpy(dst, src, esz);
    }
}

#endif
