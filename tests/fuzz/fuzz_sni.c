/* libFuzzer target for the TLS ClientHello reader (src/daemon/egress/sni.c), the one
 * parser of its own the egress proxy has.
 *
 * Input: any bytes, as a client would send them down a CONNECT tunnel. The reader must
 * never read out of bounds (ASan), must answer "need more" only while the first record
 * is incomplete, and any name it returns must be NUL-free, non-empty and at most
 * SNI_NAME_MAX bytes. Every prefix of an input that parses must ask for more or fail,
 * never give a different name.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/egress/sni.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char name[SNI_NAME_MAX + 1];
    /* A private copy of exactly size bytes, so ASan sees any read past the end. */
    uint8_t *buf = malloc(size ? size : 1);
    memcpy(buf, data, size);
    int r = sni_parse(buf, size, name);
    REQUIRE(r == 0 || r == 1 || r == -EPROTO || r == -ENOENT);
    REQUIRE(!(r == 1 && size >= SNI_RECORD_MAX)); /* a whole record is always decided */
    if (r == 0) {
        size_t n = strlen(name);
        REQUIRE(n > 0 && n <= SNI_NAME_MAX);
        char again[SNI_NAME_MAX + 1];
        for (size_t cut = size / 2; cut < size; cut += 1 + cut / 8) {
            int rp = sni_parse(buf, cut, again);
            REQUIRE(rp != 0 || !strcmp(again, name));
        }
    }
    free(buf);
    return 0;
}
