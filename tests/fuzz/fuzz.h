/* Shared by the libFuzzer targets: an invariant that must hold for every input. */
#ifndef SBX_FUZZ_H
#define SBX_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The next of a xorshift sequence (state never 0): where targets cut their input into
 * the pieces a socket would deliver. */
static inline uint32_t fuzz_next(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

#endif
