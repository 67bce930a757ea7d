// A version-1 checkpoint made from a version-2 one, for the tests that check that version 1 still
// loads: version 1 has the same fields up to the class names, a header of CK_HEADER_BYTES_V1 bytes
// (no -H and its seed), then the same buffers and the CRC-32 (run/checkpoint.h).
#pragma once

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../run/checkpoint.h"

// v2 (n2 bytes, a whole version-2 file) -> a malloc'ed version-1 file of *n1 bytes, its CRC-32
// recomputed; NULL when v2 is too short to be one
static inline uint8_t *checkpoint_as_version1(const uint8_t *v2, size_t n2, size_t *n1) {
    if (n2 < CK_HEADER_BYTES + 4) return NULL;
    *n1 = n2 - (CK_HEADER_BYTES - CK_HEADER_BYTES_V1);
    uint8_t *v1 = (uint8_t *)malloc(*n1);
    if (!v1) return NULL;
    memcpy(v1, v2, CK_HEADER_BYTES_V1);
    memcpy(v1 + CK_HEADER_BYTES_V1, v2 + CK_HEADER_BYTES, n2 - CK_HEADER_BYTES);
    ck_put_u32(v1 + CK_OFF_VERSION, 1);
    ck_put_u32(v1 + CK_OFF_HEADER_BYTES, CK_HEADER_BYTES_V1);
    ck_put_u64(v1 + CK_OFF_FILE_BYTES, *n1);
    ck_put_u32(v1 + *n1 - 4, ck_crc32((uint32_t)crc32(0L, Z_NULL, 0), v1, *n1 - 4));
    return v1;
}
