/* libFuzzer target for the session state's parser (src/common/shdecl.c): what bash's
 * `export -p` printed, with whatever the user's command also wrote on that pipe.
 *
 * Invariants: a parse ends (0, -EINVAL or the callback's error); each variable it gives is
 * a shell name and a value without NUL, both of the stated length, neither longer than
 * the input; a callback that refuses stops the parse with its own error.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../../src/common/shdecl.h"
#include "fuzz.h"

struct seen {
    size_t input_len;
    unsigned n, stop_at;
};

static int check_var(const char *name, size_t name_len, const char *value, size_t value_len,
                     void *data)
{
    struct seen *s = data;
    REQUIRE(name_len > 0 && strlen(name) == name_len && name_len <= s->input_len);
    REQUIRE(strlen(value) == value_len && value_len <= s->input_len);
    REQUIRE(!(name[0] >= '0' && name[0] <= '9'));
    for (size_t i = 0; i < name_len; i++)
        REQUIRE((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= 'A' && name[i] <= 'Z') ||
                (name[i] >= '0' && name[i] <= '9') || name[i] == '_');
    return ++s->n == s->stop_at ? -E2BIG : 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 256 * 1024)
        return 0;
    struct seen s = {.input_len = size - 1, .stop_at = data[0]};
    int r = shdecl_parse((const char *)data + 1, size - 1, check_var, &s);
    REQUIRE(r == 0 || r == -EINVAL || r == -E2BIG);
    REQUIRE(r != -E2BIG || (s.stop_at && s.n == s.stop_at));
    return 0;
}
