/* libFuzzer target for the egress proxy's host parsing (src/daemon/egress/policy.c and
 * addr.c): the authority of a CONNECT or an absolute-form request, as a sandbox sends it.
 *
 * Input: the request target. It is split as the proxy splits it (http_parser_parse_url,
 * in CONNECT mode when byte 0 is odd), and the host, not NUL-terminated, goes through
 * egress_host_normalise. Invariants: a normalised name is lower case, at most
 * EGRESS_HOST_MAX bytes and normalises to itself; an IP literal in any spelling is
 * egress_host_is_ip, formats to a spelling that parses back to the same address, and is
 * judged the same once unmapped; a CIDR block that parses is masked and /0../32.
 *
 * Build and run: scripts/fuzz.sh [seconds]. */
#include <http_parser.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/egress/addr.h"
#include "../../src/daemon/egress/policy.h"
#include "fuzz.h"

static void check_host(const char *raw, size_t len)
{
    /* A private copy of exactly len bytes, so ASan sees any read past the host. */
    char *in = malloc(len ? len : 1);
    memcpy(in, raw, len);
    char host[EGRESS_HOST_MAX + 1];
    struct sbx_err err = {0};
    if (egress_host_normalise(in, len, host, &err) < 0) {
        REQUIRE(!strcmp(err.code, "egress_invalid_domain"));
        free(in);
        return;
    }
    free(in);
    size_t n = strlen(host);
    REQUIRE(n > 0 && n <= EGRESS_HOST_MAX);
    for (size_t i = 0; i < n; i++)
        REQUIRE(!(host[i] >= 'A' && host[i] <= 'Z'));
    char again[EGRESS_HOST_MAX + 1];
    REQUIRE(egress_host_normalise(host, n, again, &err) == 0 && !strcmp(again, host));
    (void)egress_host_is_internal(host);
    struct egress_addr a;
    if (egress_addr_parse_literal(host, &a) == 0) {
        REQUIRE(egress_host_is_ip(host));
        char s[EGRESS_ADDR_STR_MAX];
        egress_addr_format(&a, s);
        struct egress_addr b;
        REQUIRE(egress_addr_parse_literal(s, &b) == 0 && egress_addr_equal(&a, &b));
        struct egress_addr u;
        egress_addr_unmap(&a, &u);
        const char *ca = egress_addr_class(&a), *cu = egress_addr_class(&u);
        REQUIRE((!ca && !cu) || (ca && cu && !strcmp(ca, cu)));
    }
    struct egress_cidr c;
    if (egress_cidr_parse(host, &c) == 0) {
        REQUIRE(c.prefix <= 32);
        uint32_t mask = c.prefix ? ~(uint32_t)0 << (32 - c.prefix) : 0;
        REQUIRE((c.net & ~mask) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 4096)
        return 0;
    const char *url = (const char *)data + 1;
    size_t len = size - 1;
    check_host(url, len);
    struct http_parser_url u;
    http_parser_url_init(&u);
    if (http_parser_parse_url(url, len, data[0] & 1, &u) == 0 && (u.field_set & (1 << UF_HOST))) {
        REQUIRE((size_t)u.field_data[UF_HOST].off + u.field_data[UF_HOST].len <= len);
        check_host(url + u.field_data[UF_HOST].off, u.field_data[UF_HOST].len);
    }
    return 0;
}
