/* libFuzzer target for workspace paths (ws_path_check in src/daemon/files/workspace.c),
 * the check every client path of the files, tools and e2b routes passes before the kernel
 * resolves it beneath the workspace.
 *
 * Input: byte 0 chooses allow_empty, the rest is the path (cut at a NUL as a C string
 * is). An accepted path must be what the header promises, checked here independently: at
 * most WS_PATH_MAX bytes, relative, no empty, "." or ".." component, no component over
 * WS_NAME_MAX, no control byte, valid UTF-8. A refused one says invalid_path.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/text.h"
#include "../../src/daemon/files/workspace.h"
#include "fuzz.h"

static bool well_formed(const char *p, bool allow_empty)
{
    size_t n = strlen(p);
    if (n == 0)
        return allow_empty;
    if (n > WS_PATH_MAX || p[0] == '/' || p[n - 1] == '/' || !sbx_utf8_valid(p, n))
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
            return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && p[i] != '/')
            continue;
        size_t len = i - start;
        if (len == 0 || len > WS_NAME_MAX || (len == 1 && p[start] == '.') ||
            (len == 2 && p[start] == '.' && p[start + 1] == '.'))
            return false;
        start = i + 1;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool allow_empty = data[0] & 1;
    char *path = strndup((const char *)data + 1, size - 1);
    struct sbx_err err = {0};
    int r = ws_path_check(path, allow_empty, &err);
    REQUIRE((r == 0) == well_formed(path, allow_empty));
    REQUIRE(r == 0 || !strcmp(err.code, "invalid_path"));
    free(path);
    return 0;
}
