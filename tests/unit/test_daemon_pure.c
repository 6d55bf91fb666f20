/* Unit tests for the daemon's pure parts: key handling, text helpers, route matching,
 * the API error table, request validation and the store. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/common/jsonfind.h"
#include "../../src/common/text.h"
#include "../../src/common/util.h"
#include "../../src/daemon/auth/auth.h"
#include "../../src/daemon/exec/exec.h"
#include "../../src/daemon/http/errors.h"
#include "../../src/daemon/http/router.h"
#include "../../src/daemon/sandbox/manager.h"
#include "../../src/daemon/store/store.h"
#include "check.h"

static void test_keys(void)
{
    char key[AUTH_KEY_LEN + 1], id[AUTH_KEY_ID_LEN + 1], hash[AUTH_HASH_HEX_LEN + 1];
    char key2[AUTH_KEY_LEN + 1], id2[AUTH_KEY_ID_LEN + 1], hash2[AUTH_HASH_HEX_LEN + 1];
    CHECK(auth_key_generate(key, id, hash, NULL) == 0, "a key is generated");
    CHECK(auth_key_generate(key2, id2, hash2, NULL) == 0, "a second key is generated");
    CHECK(!strncmp(key, "sbx_", 4) && strlen(key) == 85, "keys look like sbx_<16>_<64>: %s", key);
    CHECK(strcmp(key, key2) && strcmp(id, id2), "two keys differ");
    char parsed[AUTH_KEY_ID_LEN + 1];
    CHECK(auth_key_parse(key, parsed, NULL) == 0 && !strcmp(parsed, id),
          "the id is found inside a generated key");
    char h[AUTH_HASH_HEX_LEN + 1];
    auth_key_hash(key, h);
    CHECK(auth_hash_equal(h, hash), "the stored hash matches the key");
    CHECK(!auth_hash_equal(h, hash2), "another key's hash does not");
    CHECK(!auth_hash_equal(h, "abc"), "a short hash never matches");
    CHECK(strstr(hash, key + 4) == NULL, "the hash does not contain the key");

    struct sbx_err err = {0};
    const char *bad[] = {"",
                         "sbx_",
                         "sk_0123456789abcdef0123456789",
                         "sbx_short",
                         "sbx_0123456789abcdef0123!56789",
                         "sbx_ 0123456789abcdef0123456789"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++) {
        sbx_err_clear(&err);
        CHECK(auth_key_parse(bad[i], parsed, &err) < 0 && !strcmp(err.code, "invalid_api_key"),
              "malformed key %zu is refused with invalid_api_key", i);
    }
    char op1[AUTH_KEY_ID_LEN + 1], op2[AUTH_KEY_ID_LEN + 1];
    CHECK(auth_key_parse("sbx_operator-chosen-key-000001", op1, NULL) == 0 &&
              auth_key_parse("sbx_operator-chosen-key-000002", op2, NULL) == 0 && strcmp(op1, op2),
          "operator-chosen keys get distinct derived ids");

    CHECK(auth_user_valid("alice@example.com") && !auth_user_valid("") && !auth_user_valid("a b") &&
              !auth_user_valid("x/y"),
          "user names are checked");
    enum auth_tool_level lvl;
    enum auth_role role;
    CHECK(auth_tool_level_parse("sandbox", &lvl) == 0 && lvl == AUTH_TOOL_SANDBOX,
          "tool level sandbox parses");
    CHECK(auth_tool_level_parse("l3_sandbox", &lvl) < 0, "unknown tool levels are refused");
    CHECK(auth_role_parse("admin", &role) == 0 && role == AUTH_ROLE_ADMIN &&
              auth_role_parse("root", &role) < 0,
          "roles parse");
}

static void test_text(void)
{
    CHECK(sbx_utf8_valid("hello", 5), "ASCII is UTF-8");
    CHECK(sbx_utf8_valid("\xc8\x99\xc8\x9b", 4), "ș ț are UTF-8");
    CHECK(!sbx_utf8_valid("\xff", 1), "0xff is not UTF-8");
    CHECK(!sbx_utf8_valid("\xc0\xaf", 2), "an overlong '/' is not UTF-8");
    CHECK(!sbx_utf8_valid("\xed\xa0\x80", 3), "a surrogate is not UTF-8");
    CHECK(!sbx_utf8_valid("a\0b", 3), "NUL is refused");
    CHECK(!sbx_utf8_valid("\xe2\x82", 2), "a cut sequence is not UTF-8");
    CHECK_EQ_INT(sbx_utf8_prefix("ab\xe2\x82", 4), 2, "a cut sequence is left out of the prefix");
    CHECK_EQ_INT(sbx_utf8_prefix("ab\xe2\x82\xac", 5), 5, "a whole sequence stays");
    char cut[] = "a\xc8 is \xc8\x99\xff";
    size_t n = sbx_utf8_scrub(cut, strlen(cut));
    cut[n] = '\0';
    CHECK(strcmp(cut, "a is \xc8\x99") == 0, "a half character and a stray byte are dropped");
    CHECK_EQ_INT(sbx_utf8_prefix("ab\xff", 3), 3, "a byte that starts nothing is not held");
    char *lossy = sbx_utf8_lossy("caf\xe9-\xc8\x99\xff", 8);
    CHECK(!strcmp(lossy, "caf\xef\xbf\xbd-\xc8\x99\xef\xbf\xbd"),
          "each byte that is not UTF-8 becomes U+FFFD, the rest stays (%s)", lossy);
    free(lossy);
    char *b = sbx_base64_encode("\x00\xff\x10", 3);
    CHECK(!strcmp(b, "AP8Q"), "base64 of 00 ff 10 is AP8Q (%s)", b);
    free(b);
    b = sbx_base64_encode("ab", 2);
    CHECK(!strcmp(b, "YWI="), "base64 pads (%s)", b);
    free(b);
}

static void test_jsonfind(void)
{
    json_t *list = json_pack("[{s:s,s:i},{s:i},{s:s,s:i},i]", "name", "a", "n", 1, "name", 7,
                             "name", "b", "n", 2, 3);
    CHECK_EQ_INT(json_integer_value(json_object_get(sbx_json_find(list, "name", "b"), "n")), 2,
                 "the element whose name is b");
    CHECK(!sbx_json_find(list, "name", "c"), "none named c");
    CHECK(!sbx_json_find(list, "n", "1"), "a number is not the string 1");
    json_t *obj = json_object();
    CHECK(!sbx_json_find(obj, "name", "a") && !sbx_json_find(NULL, "name", "a"),
          "not a list: nothing found");
    json_decref(obj);
    json_decref(list);
}

static void test_routes(void)
{
    CHECK(router_match("/v1/sandboxes/{}/exec", "/v1/sandboxes/sb_1/exec", NULL), "a capture");
    CHECK(!router_match("/v1/sandboxes/{}/exec", "/v1/sandboxes//exec", NULL),
          "an empty segment does not match {}");
    CHECK(!router_match("/v1/sandboxes/{}", "/v1/sandboxes/a/b", NULL), "no extra segments");
    CHECK(!router_match("/v1/sandboxes", "/v1/sandboxes/", NULL), "no trailing slash");
    CHECK(!router_match("/v1/keys", "/v1/keysx", NULL), "no prefix match");
    CHECK(router_match("/healthz", "/healthz", NULL), "a literal");

    CHECK_EQ_INT(http_status_for_code("sandbox_busy"), 409, "sandbox_busy is 409");
    CHECK_EQ_INT(http_status_for_code("sandbox_concurrency_limit"), 429, "limits are 429");
    CHECK_EQ_INT(http_status_for_code("invalid_ttl"), 400, "invalid_ttl is 400");
    CHECK_EQ_INT(http_status_for_code("insufficient_tool_level"), 403, "tool level is 403");
    CHECK_EQ_INT(http_status_for_code("sandbox_not_found"), 404, "not found is 404");
    CHECK_EQ_INT(http_status_for_code("no_such_code"), 500, "unknown codes are 500");
}

static int parse_sandbox(const char *text, const char **code)
{
    static struct sbx_err err;
    sbx_err_clear(&err);
    json_t *j = json_loads(text, 0, NULL);
    struct sandbox_params p;
    int r = sandbox_params_parse(j, &p, &err);
    json_decref(j);
    *code = err.code;
    return r;
}

static int parse_exec_max(const char *text, long long timeout_max, const char **code)
{
    static struct sbx_err err;
    sbx_err_clear(&err);
    json_t *j = json_loads(text, 0, NULL);
    struct exec_params p;
    int r = exec_params_parse(j, timeout_max, &p, &err);
    if (r == 0)
        exec_params_clear(&p);
    json_decref(j);
    *code = err.code;
    return r;
}

static int parse_exec(const char *text, const char **code)
{
    return parse_exec_max(text, EXEC_TIMEOUT_MAX, code);
}

static void test_validation(void)
{
    const char *code;
    CHECK(parse_sandbox("{}", &code) == 0, "an empty create body is fine");
    CHECK(parse_sandbox("{\"ttl_seconds\":86400}", &code) == 0, "ttl 86400 is fine");
    const char *bad_ttl[] = {"0", "86401", "\"60\"", "1.5", "-1", "true"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad_ttl); i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"ttl_seconds\":%s}", bad_ttl[i]);
        CHECK(parse_sandbox(body, &code) < 0 && !strcmp(code, "invalid_ttl"),
              "ttl %s is invalid_ttl", bad_ttl[i]);
    }
    const char *bad_env[] = {"{\"SBX_X\":\"1\"}",
                             "{\"GOOGLE_APPLICATION\":\"1\"}",
                             "{\"1A\":\"1\"}",
                             "{\"A-B\":\"1\"}",
                             "{\"A\":1}",
                             "[]",
                             "\"x\""};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad_env); i++) {
        char body[128];
        snprintf(body, sizeof(body), "{\"env\":%s}", bad_env[i]);
        CHECK(parse_sandbox(body, &code) < 0 && !strcmp(code, "invalid_env"), "env %s is refused",
              bad_env[i]);
    }
    CHECK(parse_sandbox("{\"env\":{\"sbx_lower\":\"ok\"}}", &code) == 0,
          "only the upper-case SBX_ prefix is reserved");
    CHECK(parse_sandbox("{\"template\":\"../etc\"}", &code) < 0 &&
              !strcmp(code, "invalid_template"),
          "template names cannot be paths");
    CHECK(parse_sandbox("{\"backend\":\"v9\"}", &code) < 0 && !strcmp(code, "invalid_backend"),
          "unknown backends are refused");

    CHECK(parse_exec("{\"shell\":\"true\"}", &code) == 0, "shell alone is fine");
    CHECK(parse_exec("{\"language\":\"node\",\"code\":\"1\"}", &code) == 0, "node code is fine");
    CHECK(parse_exec("{}", &code) < 0 && !strcmp(code, "invalid_request"), "nothing to run");
    CHECK(parse_exec("{\"shell\":\"a\",\"code\":\"b\",\"language\":\"bash\"}", &code) < 0 &&
              !strcmp(code, "invalid_request"),
          "shell and code together");
    CHECK(parse_exec("{\"language\":\"ruby\",\"code\":\"1\"}", &code) < 0 &&
              !strcmp(code, "invalid_request"),
          "unknown language");
    CHECK(parse_exec("{\"shell\":1}", &code) < 0 && !strcmp(code, "invalid_request"),
          "shell must be a string");
    const char *bad_to[] = {"0", "901", "\"5\"", "2.5"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad_to); i++) {
        char body[64];
        snprintf(body, sizeof(body), "{\"shell\":\"true\",\"timeout_seconds\":%s}", bad_to[i]);
        CHECK(parse_exec(body, &code) < 0 && !strcmp(code, "invalid_timeout"),
              "timeout %s is invalid_timeout", bad_to[i]);
    }
    /* sandbox_bash's wider bound (spec 004: up to 3600 s). */
    CHECK(parse_exec_max("{\"shell\":\"true\",\"timeout_seconds\":3600}", 3600, &code) == 0,
          "3600 within a 3600 bound");
    CHECK(parse_exec_max("{\"shell\":\"true\",\"timeout_seconds\":3601}", 3600, &code) < 0 &&
              !strcmp(code, "invalid_timeout"),
          "3601 past a 3600 bound");
    CHECK(parse_exec("{\"shell\":\"true\",\"cwd\":\"\"}", &code) < 0 &&
              !strcmp(code, "invalid_cwd"),
          "an empty cwd");
    CHECK(parse_exec("{\"shell\":\"a\\u0000b\"}", &code) < 0 && !strcmp(code, "invalid_request"),
          "a NUL in the command");
}

static int count;
static void count_key(const struct store_key *k, void *data)
{
    count++;
}

static void test_store(void)
{
    char dir[] = "/tmp/sbx-store-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "a temp dir");
    char *path = sbx_xasprintf("%s/db", dir);
    struct store *s = NULL;
    struct sbx_err err = {0};
    CHECK(store_open(path, &s, &err) == 0, "the store opens: %.100s", err.msg);
    struct store_key k = {
        .role = AUTH_ROLE_MEMBER, .tool_level = AUTH_TOOL_SANDBOX, .created_at = 1};
    char key[AUTH_KEY_LEN + 1];
    auth_key_generate(key, k.id, k.hash, NULL);
    snprintf(k.user, sizeof(k.user), "alice");
    CHECK(store_key_insert(s, &k, &err) == 0, "a key is stored");
    struct store_key got;
    CHECK(store_key_get(s, k.id, &got, &err) == 0 && !strcmp(got.user, "alice") &&
              got.tool_level == AUTH_TOOL_SANDBOX && !strcmp(got.hash, k.hash),
          "and read back");
    count = 0;
    store_key_each(s, count_key, NULL, &err);
    CHECK_EQ_INT(count, 1, "one key listed");
    CHECK(store_key_delete(s, k.id, &err) == 0, "a key is deleted");
    sbx_err_clear(&err);
    CHECK(store_key_get(s, k.id, &got, &err) == -ENOENT && !strcmp(err.code, "key_not_found"),
          "a deleted key is gone");
    CHECK(store_key_delete(s, k.id, &err) == -ENOENT, "deleting twice is key_not_found");

    struct store_sandbox sb = {.ttl_seconds = 10,
                               .created_at = 5,
                               .expires_at = 15,
                               .memory_mb = 1,
                               .pids = 2,
                               .cpu_millicores = 3};
    snprintf(sb.id, sizeof(sb.id), "sb_1");
    snprintf(sb.user, sizeof(sb.user), "alice");
    snprintf(sb.key_id, sizeof(sb.key_id), "%s", k.id);
    snprintf(sb.status, sizeof(sb.status), SANDBOX_RUNNING);
    sb.env_json = "{\"A\":\"b\"}";
    CHECK(store_sandbox_insert(s, &sb, &err) == 0, "a sandbox is stored");
    long long per_user = -1, per_key = -1;
    store_sandbox_count_live(s, "alice", k.id, &per_user, &per_key, &err);
    CHECK(per_user == 1 && per_key == 1, "it counts against its user and key");
    store_sandbox_count_live(s, "bob", k.id, &per_user, &per_key, &err);
    CHECK(per_user == 0 && per_key == 0, "not against another user");
    CHECK(store_sandbox_set_status(s, "sb_1", SANDBOX_DESTROYED, "deleted", 20, &err) == 0,
          "a sandbox is ended");
    store_sandbox_count_live(s, "alice", k.id, &per_user, &per_key, &err);
    CHECK(per_user == 0, "an ended sandbox no longer counts");
    struct store_sandbox back;
    CHECK(store_sandbox_get(s, "sb_1", &back, &err) == 0 && !strcmp(back.status, "destroyed") &&
              back.ended_at == 20 && !strcmp(back.end_reason, "deleted") &&
              !strcmp(back.env_json, "{\"A\":\"b\"}"),
          "the ended record keeps its facts");
    store_sandbox_clear(&back);
    store_free(s);
    s = NULL;
    CHECK(store_open(path, &s, &err) == 0 && store_sandbox_get(s, "sb_1", &back, &err) == 0,
          "a reopened store has the sandbox");
    store_sandbox_clear(&back);
    store_free(s);
    sbx_rm_rf(dir);
    free(path);
}

int main(void)
{
    test_keys();
    test_text();
    test_jsonfind();
    test_routes();
    test_validation();
    test_store();
    return CHECK_DONE();
}
