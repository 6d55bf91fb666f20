/* Egress rules without a daemon: host names, every spelling of an address, the address
 * classes, CIDR blocks, sandbox and operator policies, the SNI reader, and the real
 * resolver path (getaddrinfo on a worker thread, then the address check). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "../../src/common/loop.h"
#include "../../src/daemon/egress/addr.h"
#include "../../src/daemon/egress/policy.h"
#include "../../src/daemon/egress/resolve.h"
#include "../../src/daemon/egress/sni.h"
#include "check.h"

static const char *class_of(const char *literal)
{
    struct egress_addr a;
    if (egress_addr_parse_literal(literal, &a) < 0)
        return "not-a-literal";
    const char *c = egress_addr_class(&a);
    return c ? c : "public";
}

static void test_addresses(void)
{
    static const struct {
        const char *in, *cls;
    } cases[] = {
        {"127.0.0.1", "loopback"},      {"127.1", "loopback"},
        {"2130706433", "loopback"},     {"0x7f000001", "loopback"},
        {"0177.0.0.1", "loopback"},     {"0x7f.1", "loopback"},
        {"::1", "loopback"},            {"[::1]", "loopback"},
        {"::ffff:127.0.0.1", "loopback"}, {"[::ffff:7f00:1]", "loopback"},
        {"64:ff9b::127.0.0.1", "loopback"}, {"2002:7f00:1::", "loopback"},
        {"169.254.169.254", "metadata"}, {"::ffff:169.254.169.254", "metadata"},
        {"fd00:ec2::254", "metadata"},  {"169.254.1.1", "link_local"},
        {"fe80::1", "link_local"},      {"10.0.0.1", "private"},
        {"172.16.0.1", "private"},      {"172.31.255.255", "private"},
        {"192.168.1.1", "private"},     {"fc00::1", "private"},
        {"100.64.0.1", "cgnat"},        {"100.127.255.255", "cgnat"},
        {"224.0.0.1", "multicast"},     {"ff02::1", "multicast"},
        {"0.0.0.0", "unspecified"},     {"0", "unspecified"},
        {"::", "unspecified"},          {"255.255.255.255", "reserved"},
        {"240.0.0.1", "reserved"},      {"192.0.2.1", "documentation"},
        {"2001:db8::1", "documentation"}, {"198.18.0.1", "benchmark"},
        {"::127.0.0.1", "reserved"},    {"2001::1", "reserved"},
        {"8.8.8.8", "public"},          {"172.32.0.1", "public"},
        {"100.128.0.1", "public"},      {"2606:4700::1111", "public"},
        {"example.com", "not-a-literal"}, {"127.0.0.1.", "not-a-literal"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        CHECK(!strcmp(class_of(cases[i].in), cases[i].cls), "%s is %s (got %s)", cases[i].in,
              cases[i].cls, class_of(cases[i].in));

    struct egress_cidr c;
    struct egress_addr a;
    CHECK(egress_cidr_parse("10.0.0.0/8", &c) == 0, "cidr 10/8 parses");
    egress_addr_parse_literal("10.200.1.1", &a);
    CHECK(egress_cidr_match(&c, &a), "10.200.1.1 in 10/8");
    egress_addr_parse_literal("::ffff:10.1.1.1", &a);
    CHECK(egress_cidr_match(&c, &a), "mapped 10.1.1.1 in 10/8");
    egress_addr_parse_literal("11.0.0.1", &a);
    CHECK(!egress_cidr_match(&c, &a), "11.0.0.1 not in 10/8");
    CHECK(egress_cidr_parse("1.2.3.4", &c) == 0 && c.prefix == 32, "bare address is a /32");
    CHECK(egress_cidr_parse("0.0.0.0/0", &c) == 0, "/0 parses");
    egress_addr_parse_literal("9.9.9.9", &a);
    CHECK(egress_cidr_match(&c, &a), "/0 matches everything v4");
    const char *bad[] = {"10.0.0.0/33", "10.0.0.0/", "127.1", "1.2.3.4/8x", "x", "", "::1/128"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(egress_cidr_parse(bad[i], &c) < 0, "cidr %s refused", bad[i]);
}

static void test_hosts(void)
{
    char out[EGRESS_HOST_MAX + 1];
    struct sbx_err err = {0};
    CHECK(egress_host_normalise("PyPI.Org.", 9, out, &err) == 0 && !strcmp(out, "pypi.org"),
          "case and trailing dot normalised");
    CHECK(egress_host_normalise("a..b", 4, out, &err) < 0 &&
              !strcmp(err.code, "egress_invalid_domain"),
          "empty label refused");
    CHECK(egress_host_normalise("a.b..", 5, out, &err) < 0 &&
              !strcmp(err.code, "egress_invalid_domain"),
          "two trailing dots refused (found by fuzz_egress_host)");
    CHECK(egress_host_normalise("a/b", 1, out, &err) == 0 && !strcmp(out, "a"),
          "only len bytes are read");
    CHECK(egress_host_normalise("a_b", 2, out, &err) < 0 && !strncmp(err.msg, "a_ is not", 9),
          "the refusal quotes only the host's len bytes (found by fuzz_egress_host)");
    CHECK(egress_host_normalise("-a.b", 4, out, &err) < 0, "leading hyphen refused");
    CHECK(egress_host_normalise("a-.b", 4, out, &err) < 0, "trailing hyphen refused");
    CHECK(egress_host_normalise("a_b.c", 5, out, &err) < 0, "underscore refused");
    CHECK(egress_host_normalise("é.com", strlen("é.com"), out, &err) < 0, "non-ASCII refused");
    char longlabel[80];
    memset(longlabel, 'a', 64);
    strcpy(longlabel + 64, ".com");
    CHECK(egress_host_normalise(longlabel, strlen(longlabel), out, &err) < 0,
          "64-character label refused");
    const char *ips[] = {"1.2.3.4", "127.1", "2130706433", "0x7f000001", "::1", "a.b.0x10",
                         "foo.123"};
    for (size_t i = 0; i < sizeof(ips) / sizeof(ips[0]); i++)
        CHECK(egress_host_is_ip(ips[i]), "%s reads as an address", ips[i]);
    CHECK(!egress_host_is_ip("123.example.com"), "a numeric first label is a name");
    const char *internal[] = {"localhost", "a.localhost", "printer.local", "db.internal",
                              "x.localdomain", "router.lan", "h.home.arpa", "1.0.0.10.in-addr.arpa",
                              "intranet"};
    for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
        CHECK(egress_host_is_internal(internal[i]), "%s is internal", internal[i]);
    CHECK(!egress_host_is_internal("notlocal.com"), "notlocal.com is not internal");
    CHECK(!egress_host_is_internal("pypi.org"), "pypi.org is not internal");
}

static json_t *J(const char *s)
{
    return json_loads(s, 0, NULL);
}

static const char *parse_code(const char *json)
{
    static char code[SBX_ERR_CODE_MAX];
    struct egress_policy p;
    struct sbx_err err = {0};
    json_t *j = J(json);
    int r = egress_policy_parse(j, &p, &err);
    json_decref(j);
    snprintf(code, sizeof(code), "%s", r == 0 ? "ok" : err.code);
    return code;
}

static void test_policies(void)
{
    struct egress_policy p;
    struct sbx_err err = {0};
    CHECK(egress_policy_parse(NULL, &p, &err) == 0 && p.mode == EGRESS_MODE_NONE,
          "absent: none");
    json_t *j = J("{\"mode\":\"allowlist\",\"domains\":[\"A.example.COM.\",\"a.example.com\","
                  "\"b.example.org\"]}");
    CHECK(egress_policy_parse(j, &p, &err) == 0 && p.n == 2, "normalised and deduplicated");
    json_decref(j);
    CHECK(egress_policy_allows(&p, "a.example.com"), "listed host allowed");
    CHECK(!egress_policy_allows(&p, "c.example.com"), "unlisted host refused");
    CHECK(!egress_policy_allows(&p, "x.a.example.com"), "subdomain of a listed host refused");
    json_t *out = egress_policy_to_json(&p);
    char *s = json_dumps(out, JSON_COMPACT);
    CHECK(!strcmp(s, "{\"mode\":\"allowlist\",\"domains\":[\"a.example.com\",\"b.example.org\"]}"),
          "to_json: %s", s);
    free(s);
    json_decref(out);
    j = J("{\"mode\":\"preset\",\"preset\":\"pypi\"}");
    CHECK(egress_policy_parse(j, &p, &err) == 0 && egress_policy_allows(&p, "pypi.org") &&
              egress_policy_allows(&p, "files.pythonhosted.org") &&
              !egress_policy_allows(&p, "registry.npmjs.org"),
          "pypi preset hosts");
    json_decref(j);
    j = J("{\"mode\":\"preset\",\"preset\":\"npm\"}");
    CHECK(egress_policy_parse(j, &p, &err) == 0 && egress_policy_allows(&p, "registry.npmjs.org"),
          "npm preset hosts");
    json_decref(j);
    char twenty[2048] = "{\"mode\":\"allowlist\",\"domains\":[";
    for (int i = 0; i < 20; i++)
        snprintf(twenty + strlen(twenty), sizeof(twenty) - strlen(twenty), "%s\"h%d.example.com\"",
                 i ? "," : "", i);
    strcat(twenty, "]}");
    CHECK(!strcmp(parse_code(twenty), "ok"), "20 domains accepted");
    char *p21 = strstr(twenty, "]}");
    strcpy(p21, ",\"h20.example.com\"]}");
    CHECK(!strcmp(parse_code(twenty), "egress_too_many_domains"), "21 domains refused");
    static const struct {
        const char *json, *code;
    } bad[] = {
        {"{\"mode\":\"allowlist\",\"domains\":[\"10.0.0.1\"]}", "egress_ip_not_allowed"},
        {"{\"mode\":\"allowlist\",\"domains\":[\"0x7f000001\"]}", "egress_ip_not_allowed"},
        {"{\"mode\":\"allowlist\",\"domains\":[\"[::1]\"]}", "egress_ip_not_allowed"},
        {"{\"mode\":\"allowlist\",\"domains\":[\"fe80::1\"]}", "egress_ip_not_allowed"},
        {"{\"mode\":\"allowlist\",\"domains\":[\"localhost.\"]}", "egress_internal_domain"},
        {"{\"mode\":\"allowlist\",\"domains\":[\"x.INTERNAL\"]}", "egress_internal_domain"},
        {"{\"mode\":\"allowlist\",\"domains\":[\"*.example.com\"]}", "egress_invalid_domain"},
        {"{\"mode\":\"allowlist\",\"domains\":[\"\"]}", "egress_invalid_domain"},
        {"{\"mode\":\"allowlist\",\"domains\":[\"a b.com\"]}", "egress_invalid_domain"},
        {"{\"mode\":\"allowlist\",\"domains\":[1]}", "invalid_egress"},
        {"{\"mode\":\"preset\",\"preset\":\"apt\"}", "egress_unknown_preset"},
        {"{\"mode\":\"none\",\"preset\":\"pypi\"}", "invalid_egress"},
        {"{\"mode\":1}", "invalid_egress"},
        {"{\"domains\":[]}", "invalid_egress"},
        {"[]", "invalid_egress"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK(!strcmp(parse_code(bad[i].json), bad[i].code), "%s -> %s (got %s)", bad[i].json,
              bad[i].code, parse_code(bad[i].json));
}

static void test_operator(void)
{
    struct egress_operator *op = NULL;
    struct sbx_err err = {0};
    json_t *j = J("{\"deny_egress_by_default\":true,\"allow_out\":[\"pypi.org\",\"*.example.com\","
                  "\"203.0.113.0/24\",\"8.8.8.8\"],\"deny_out\":[\"203.0.113.7\",\"9.0.0.0/8\"],"
                  "\"cube_rules\":[]}");
    CHECK(egress_operator_parse(j, &op, &err) == 0, "operator policy parses");
    json_decref(j);
    CHECK(egress_operator_host_allowed(op, "pypi.org"), "exact domain");
    CHECK(egress_operator_host_allowed(op, "a.example.com"), "one-label wildcard");
    CHECK(!egress_operator_host_allowed(op, "a.b.example.com"), "wildcard is one label only");
    CHECK(!egress_operator_host_allowed(op, "example.com"), "wildcard needs a label");
    CHECK(!egress_operator_host_allowed(op, "other.org"), "default deny");
    CHECK(egress_operator_may_allow_by_address(op), "allow_out has address blocks");
    struct egress_addr a;
    egress_addr_parse_literal("203.0.113.9", &a);
    CHECK(egress_operator_addr_check(op, false, &a) == NULL, "allowed by CIDR");
    egress_addr_parse_literal("203.0.113.7", &a);
    CHECK(egress_operator_addr_check(op, true, &a) != NULL, "deny_out wins over allow");
    egress_addr_parse_literal("9.1.2.3", &a);
    CHECK(egress_operator_addr_check(op, true, &a) != NULL, "deny_out CIDR");
    egress_addr_parse_literal("1.1.1.1", &a);
    CHECK(!strcmp(egress_operator_addr_check(op, false, &a), "operator_default_deny"),
          "neither name nor address allowed");
    CHECK(egress_operator_addr_check(op, true, &a) == NULL, "name allowed");
    egress_operator_free(op);
    CHECK(egress_operator_host_allowed(NULL, "anything.com"), "no operator policy: allowed");
    const char *bad[] = {"{\"deny_egress_by_default\":1}", "{\"allow_out\":\"x\"}",
                         "{\"allow_out\":[\"_bad\"]}", "{\"deny_out\":[\"example.com\"]}",
                         "{\"allow_out\":[\"127.0.0.1/40\"]}", "[]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = J(bad[i]);
        op = NULL;
        CHECK(egress_operator_parse(j, &op, &err) < 0 && !strcmp(err.code, "invalid_config"),
              "operator policy %s refused", bad[i]);
        egress_operator_free(op);
        json_decref(j);
    }
}

/* A minimal TLS 1.2 ClientHello with the given SNI (or none). */
static size_t hello(uint8_t *b, const char *sni)
{
    uint8_t body[512];
    size_t n = 0;
    body[n++] = 3, body[n++] = 3;
    memset(body + n, 0x11, 32), n += 32;
    body[n++] = 0;                           /* session id */
    body[n++] = 0, body[n++] = 2, body[n++] = 0x13, body[n++] = 0x01; /* one suite */
    body[n++] = 1, body[n++] = 0;            /* compression: null */
    size_t ext_len_at = n;
    n += 2;
    if (sni) {
        size_t l = strlen(sni);
        body[n++] = 0, body[n++] = 0;        /* server_name */
        body[n++] = 0, body[n++] = (uint8_t)(l + 5);
        body[n++] = 0, body[n++] = (uint8_t)(l + 3);
        body[n++] = 0;
        body[n++] = 0, body[n++] = (uint8_t)l;
        memcpy(body + n, sni, l), n += l;
    }
    body[n++] = 0, body[n++] = 0x0b, body[n++] = 0, body[n++] = 2, body[n++] = 1, body[n++] = 0;
    size_t el = n - ext_len_at - 2;
    body[ext_len_at] = (uint8_t)(el >> 8), body[ext_len_at + 1] = (uint8_t)el;
    size_t m = 0;
    b[m++] = 0x16, b[m++] = 3, b[m++] = 1, b[m++] = (uint8_t)((n + 4) >> 8),
    b[m++] = (uint8_t)(n + 4);
    b[m++] = 1, b[m++] = 0, b[m++] = (uint8_t)(n >> 8), b[m++] = (uint8_t)n;
    memcpy(b + m, body, n);
    return m + n;
}

static void test_sni(void)
{
    uint8_t b[1024];
    char name[SNI_NAME_MAX + 1];
    size_t n = hello(b, "pypi.org");
    CHECK(sni_parse(b, n, name) == 0 && !strcmp(name, "pypi.org"), "SNI read");
    size_t cut = 0;
    while (cut < n && sni_parse(b, cut, name) == 1)
        cut++;
    CHECK_EQ_INT(cut, n, "every prefix asks for more (got: the first that did not)");
    n = hello(b, NULL);
    CHECK(sni_parse(b, n, name) == -ENOENT, "no SNI: -ENOENT");
    CHECK(sni_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name) == -EPROTO,
          "plain HTTP is not TLS");
    n = hello(b, "pypi.org");
    b[9 + 34] = 200; /* a session id longer than the message */
    CHECK(sni_parse(b, n, name) == -EPROTO, "lengths past the end refused");
    n = hello(b, "pypi.org");
    b[5] = 2; /* not a client_hello */
    CHECK(sni_parse(b, n, name) == -EPROTO, "server_hello refused");
}

static int resolved_status = 1;
static const char *resolved_why;
static struct egress_resolver *R;

static void on_resolved(void *data, int status, const struct egress_addr *addrs, size_t n)
{
    resolved_status = status;
    resolved_why = n ? egress_resolver_addr_check(R, &addrs[0], 443) : NULL;
    loop_stop(data);
}

static void test_real_resolver(void)
{
    struct loop *l;
    struct sbx_err err = {0};
    CHECK(loop_new(&l) == 0, "loop");
    CHECK(egress_resolver_new(l, NULL, NULL, &R, &err) == 0, "resolver");
    /* getaddrinfo answers localhost from /etc/hosts: no traffic leaves the machine. */
    egress_resolve(R, "localhost", on_resolved, l);
    loop_run(l);
    CHECK(resolved_status == 0, "localhost resolves through getaddrinfo (%d)", resolved_status);
    CHECK(resolved_why && !strcmp(resolved_why, "loopback"), "and is refused as loopback (%s)",
          resolved_why ? resolved_why : "allowed!");
    struct egress_addr a;
    egress_addr_parse_literal("8.8.8.8", &a);
    CHECK(egress_resolver_addr_check(R, &a, 443) == NULL, "a public address may be dialled");
    egress_resolver_free(R);
    CHECK(egress_resolver_new(l, NULL, "127.0.0.2:8443,[::1]:443", &R, &err) == 0,
          "test upstreams parse");
    egress_addr_parse_literal("127.0.0.2", &a);
    CHECK(egress_resolver_addr_check(R, &a, 8443) == NULL, "exact test upstream exempt");
    CHECK(egress_resolver_addr_check(R, &a, 443) != NULL, "same address, other port refused");
    egress_addr_parse_literal("127.0.0.3", &a);
    CHECK(egress_resolver_addr_check(R, &a, 8443) != NULL, "other loopback address refused");
    egress_resolver_free(R);
    CHECK(egress_resolver_new(l, NULL, "127.0.0.2", &R, &err) < 0, "upstream without port refused");
    loop_free(l);
}

int main(void)
{
    test_addresses();
    test_hosts();
    test_policies();
    test_operator();
    test_sni();
    test_real_resolver();
    return CHECK_DONE();
}
