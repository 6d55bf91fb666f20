/* audit_command_details (src/daemon/audit/audit.c): what an audit entry says ran. */
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/text.h"
#include "../../src/daemon/audit/audit.h"
#include "check.h"

static void sha_hex(const char *buf, size_t len, char out[65])
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_Digest(buf, len, d, &n, EVP_sha256(), NULL);
    sbx_hex(d, n, out);
}

int main(void)
{
    char want[65];
    json_t *d = audit_command_details(NULL, "echo hi", 7);
    sha_hex("echo hi", 7, want);
    CHECK(!strcmp(json_string_value(json_object_get(d, "command_sha256")), want),
          "the SHA-256 of the command");
    CHECK(!strcmp(json_string_value(json_object_get(d, "command")), "echo hi"), "the command");
    CHECK(!json_object_get(d, "command_truncated"), "a short command is whole");
    json_decref(d);

    /* Two-byte characters across the bound: the cut falls on a character. */
    size_t len = 2 * 3000 + 1;
    char *big = malloc(len + 1);
    big[0] = 'x';
    for (size_t i = 1; i < len; i += 2)
        memcpy(big + i, "\xc4\x83", 2); /* ă */
    big[len] = '\0';
    d = audit_command_details(json_pack("{s:s}", "via", "t"), big, len);
    const char *c = json_string_value(json_object_get(d, "command"));
    sha_hex(big, len, want);
    CHECK(c && strlen(c) <= AUDIT_COMMAND_MAX && strlen(c) >= AUDIT_COMMAND_MAX - 1,
          "bounded to AUDIT_COMMAND_MAX bytes");
    CHECK(c && sbx_utf8_valid(c, strlen(c)) && !memcmp(c, big, strlen(c)),
          "a prefix that ends on a character");
    CHECK(json_is_true(json_object_get(d, "command_truncated")), "said to be cut");
    CHECK(!strcmp(json_string_value(json_object_get(d, "command_sha256")), want),
          "the hash is of the whole command");
    CHECK(!strcmp(json_string_value(json_object_get(d, "via")), "t"), "the details kept");
    json_decref(d);
    free(big);

    /* Input typed into a PTY may hold a NUL or bytes that are not UTF-8: dropped from the
     * text, kept in the hash. */
    d = audit_command_details(NULL, "a\0b\xff" "c", 5);
    sha_hex("a\0b\xff" "c", 5, want);
    CHECK(!strcmp(json_string_value(json_object_get(d, "command")), "abc"), "NUL and \\xff dropped");
    CHECK(!strcmp(json_string_value(json_object_get(d, "command_sha256")), want), "hash of all");
    json_decref(d);
    d = audit_command_details(NULL, NULL, 0);
    CHECK(!strcmp(json_string_value(json_object_get(d, "command")), ""), "no command: empty");
    json_decref(d);
    return CHECK_DONE();
}
