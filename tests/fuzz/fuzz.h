/* Shared by the libFuzzer targets: an invariant that must hold for every input. */
#ifndef SBX_FUZZ_H
#define SBX_FUZZ_H

#include <stdio.h>
#include <stdlib.h>

#define REQUIRE(c)                                                                                 \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #c, __FILE__, __LINE__);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
