/* Unit tests for the E2B surface's pure parts (docs/e2b.md): E2B paths to workspace paths,
 * sbx error codes to Connect codes, the base64 the SDK sends as stdin. */
#include <string.h>

#include "../../src/common/err.h"
#include "../../src/common/text.h"
#include "../../src/daemon/e2b/e2b.h"
#include "../../src/daemon/e2b/e2b_connect.h"
#include "check.h"

static void path_ok(const char *in, const char *want)
{
    char out[4097];
    struct sbx_err err = {0};
    int r = e2b_path_to_ws(in, out, sizeof(out), &err);
    CHECK(r == 0 && !strcmp(out, want), "%.40s -> '%.40s' (got '%.40s')", in, want,
          r ? err.code : out);
}

static void path_refused(const char *in)
{
    char out[4097];
    struct sbx_err err = {0};
    int r = e2b_path_to_ws(in, out, sizeof(out), &err);
    CHECK(r < 0 && !strcmp(err.code, "invalid_path"), "%.60s is refused (%.60s)", in, err.code);
}

static void code_is(const char *sbx_code, const char *want)
{
    struct sbx_err e = {0};
    snprintf(e.code, sizeof(e.code), "%s", sbx_code);
    CHECK(!strcmp(rpc_code(&e), want), "%s -> %s (got %s)", sbx_code, want, rpc_code(&e));
}

static void b64(const char *in, const char *want, size_t want_len)
{
    unsigned char out[64];
    size_t n = 0;
    int r = sbx_base64_decode(in, strlen(in), out, &n);
    CHECK(r == 0 && n == want_len && !memcmp(out, want, n), "base64 %s", in);
}

int main(void)
{
    path_ok("/home/user", "");
    path_ok("/home/user/", "");
    path_ok("/home/user/a.txt", "a.txt");
    path_ok("/home/user//d/./e/", "d/e");
    path_ok("/workspace/x", "x");
    path_ok("~/x/y", "x/y");
    path_ok("rel/file", "rel/file");
    path_ok(".", "");
    path_refused("/home/user/../etc/passwd");
    path_refused("/home/username/x");
    path_refused("/etc/passwd");
    path_refused("/tmp/x");
    path_refused("a/../../b");
    path_refused("/home/user/a\x01");

    code_is("file_not_found", "not_found");
    code_is("sandbox_not_found", "not_found");
    code_is("process_not_found", "not_found");
    code_is("process_not_running", "not_found");
    code_is("invalid_path", "invalid_argument");
    code_is("invalid_request", "invalid_argument");
    code_is("dir_exists", "already_exists");
    code_is("too_many_processes", "resource_exhausted");
    code_is("sandbox_concurrency_limit", "resource_exhausted");
    code_is("process_stdin_closed", "failed_precondition");
    code_is("unimplemented", "unimplemented");
    code_is("internal", "internal");

    b64("ZGF0YQo=", "data\n", 5);
    b64("ZGF0YQo", "data\n", 5);
    b64("", "", 0);
    b64("_-8=", "\xff\xef", 2);
    b64("AAECAw==", "\x00\x01\x02\x03", 4);
    unsigned char out[8];
    size_t n;
    CHECK(sbx_base64_decode("a*bc", 4, out, &n) < 0, "a non-base64 character is refused");
    CHECK(sbx_base64_decode("abcde", 5, out, &n) < 0, "a length of 4k+1 is refused");
    return CHECK_DONE();
}
