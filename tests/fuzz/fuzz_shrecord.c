/* libFuzzer target for a resident shell's records (src/common/shrecord.c): what the shell
 * writes on its state pipe, with whatever the user's command wrote there too, arriving in
 * pieces of any size.
 *
 * Invariants: scanning in pieces finds the same records as scanning at once; every record's
 * fields lie inside it; the normalised dump is never longer than the dump and says its own
 * length; the exports field is also read as bash's `export -p` would be by the agent.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/shdecl.h"
#include "../../src/common/shrecord.h"
#include "fuzz.h"

static int any_var(const char *name, size_t name_len, const char *value, size_t value_len,
                   void *data)
{
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 256 * 1024)
        return 0;
    size_t piece = (size_t)data[0] + 1;
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    size_t whole_scanned = 0, scanned = 0, off = 0, end;
    int whole_nuls = 0, nuls = 0;
    while (off < len) {
        size_t upto = off;
        end = 0;
        /* In pieces: the same end as at once. */
        while (!end && upto < len) {
            upto = upto + piece < len ? upto + piece : len;
            end = shrecord_scan(buf, upto, &scanned, &nuls);
        }
        size_t at_once = shrecord_scan(buf, len, &whole_scanned, &whole_nuls);
        REQUIRE(end == at_once);
        if (!end)
            break;
        REQUIRE(end > off && end <= len && buf[end - 1] == '\0');
        struct shrecord r;
        shrecord_split(buf + off, end - off, &r);
        for (int i = 0; i < SHRECORD_FIELDS; i++) {
            REQUIRE(r.f[i] >= buf + off && r.f[i] + r.len[i] < buf + end);
            REQUIRE(strlen(r.f[i]) == r.len[i]);
        }
        size_t n;
        bool odd = false;
        char *norm = shrecord_norm(r.f[2], r.len[2], r.f[4], r.len[4], &n, &odd);
        REQUIRE(n <= r.len[4] && norm[n] == '\0');
        free(norm);
        (void)shdecl_parse(r.f[2], r.len[2], any_var, NULL);
        off = end;
        scanned = whole_scanned = end;
        nuls = whole_nuls = 0;
    }
    return 0;
}
