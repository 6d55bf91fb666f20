/* The MCP server's pure parts: the tool catalogue's schemas (tools/catalog.c), tool answers
 * as CallToolResults (mcp/mcp_content.c) and sessions (mcp/mcp_session.c). */
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/mcp/mcp_content.h"
#include "../../src/daemon/mcp/mcp_session.h"
#include "../../src/daemon/tools/catalog.h"
#include "check.h"

static bool has_required(json_t *schema, const char *name)
{
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(schema, "required"), i, v)
    {
        if (!strcmp(json_string_value(v) ?: "", name))
            return true;
    }
    return false;
}

/* What the SDK client insists on: type object at the top, object subschemas, no $ref. */
static bool sdk_shaped(json_t *schema)
{
    if (!json_is_object(schema) ||
        strcmp(json_string_value(json_object_get(schema, "type")) ?: "", "object"))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(schema, "properties"), k, v)
    {
        if (!json_is_object(v))
            return false;
    }
    char *text = json_dumps(schema, 0);
    bool ok = !strstr(text, "$ref");
    free(text);
    return ok;
}

static void test_catalog(void)
{
    json_t *mcp = tools_list_mcp(), *oa = tools_list_openai();
    CHECK_EQ_INT(json_array_size(mcp), 16, "sixteen tools");
    CHECK_EQ_INT(json_array_size(oa), json_array_size(mcp), "as many OpenAI functions");
    size_t i;
    json_t *t;
    json_array_foreach(mcp, i, t)
    {
        const char *name = json_string_value(json_object_get(t, "name"));
        const struct tool_def *def = tools_find(name);
        json_t *in = json_loads(def->input_schema, 0, NULL);
        json_t *out = json_loads(def->output_schema, 0, NULL);
        CHECK(in && out, "%s: both schemas are JSON", name);
        CHECK(sdk_shaped(in) && sdk_shaped(out), "%s: schemas an SDK client accepts", name);
        CHECK(has_required(in, "sandbox_id") == def->needs_sandbox,
              "%s: sandbox_id is required exactly when it acts on a sandbox", name);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(name, json_string_value(json_object_get(json_array_get(mcp, j), "name"))),
                  "%s: unique", name);
        json_t *fn = json_object_get(json_array_get(oa, i), "function");
        CHECK(!strcmp(json_string_value(json_object_get(fn, "name")), name) &&
                  json_equal(json_object_get(fn, "parameters"), in),
              "%s: the OpenAI function has the same parameters", name);
        json_decref(in);
        json_decref(out);
    }
    CHECK(tools_find("nope") == NULL && tools_find(NULL) == NULL, "unknown names are NULL");
    json_decref(mcp);
    json_decref(oa);
}

static void test_result_blocks(void)
{
    json_t *ans =
        json_pack("{s:s,s:[{s:s,s:s},{s:s,s:s}]}", "stdout", "hi", "outputs", "mime", "image/png",
                  "data", "iVBORw0KGgo=", "mime", "text/html", "data", "<b>x</b>");
    json_t *r = mcp_tool_result(ans);
    json_t *content = json_object_get(r, "content");
    json_t *sc = json_object_get(r, "structuredContent");
    CHECK_EQ_INT(json_array_size(content), 2, "text + one image block");
    json_t *img = json_array_get(content, 1);
    CHECK(!strcmp(json_string_value(json_object_get(img, "type")), "image") &&
              !strcmp(json_string_value(json_object_get(img, "data")), "iVBORw0KGgo=") &&
              !strcmp(json_string_value(json_object_get(img, "mimeType")), "image/png"),
          "the PNG output became an image block");
    const char *d0 = json_string_value(
        json_object_get(json_array_get(json_object_get(sc, "outputs"), 0), "data"));
    CHECK(d0 && strstr(d0, "image content block 1"), "its data points at the block");
    CHECK(!strcmp(json_string_value(
                      json_object_get(json_array_get(json_object_get(sc, "outputs"), 1), "data")),
                  "<b>x</b>"),
          "non-image outputs stay as they are");
    json_t *text =
        json_loads(json_string_value(json_object_get(json_array_get(content, 0), "text")), 0, NULL);
    CHECK(json_equal(text, sc), "the text block is the structured content");
    CHECK(json_is_false(json_object_get(r, "isError")), "isError false");
    CHECK(!strcmp(
              json_string_value(
                  json_object_get(ans, "outputs")
                      ? json_object_get(json_array_get(json_object_get(ans, "outputs"), 0), "data")
                      : NULL),
              "iVBORw0KGgo="),
          "the answer itself is not changed");
    json_decref(text);
    json_decref(r);
    json_decref(ans);

    ans = json_pack("{s:s,s:I,s:s,s:b,s:s}", "path", "out/big.bin", "size", (json_int_t)1048576,
                    "sha256", "ab", "inline", 0, "url", "http://h/x?sig=1");
    r = mcp_tool_result(ans);
    json_t *l = json_array_get(json_object_get(r, "content"), 1);
    CHECK(l && !strcmp(json_string_value(json_object_get(l, "type")), "resource_link") &&
              !strcmp(json_string_value(json_object_get(l, "uri")), "http://h/x?sig=1") &&
              !strcmp(json_string_value(json_object_get(l, "name")), "big.bin") &&
              json_integer_value(json_object_get(l, "size")) == 1048576,
          "a file too large to inline is a resource_link");
    json_decref(r);
    json_decref(ans);

    ans = json_pack("{s:[{s:s,s:I}],s:{s:s}}", "files", "path", "a/b.txt", "size", (json_int_t)3,
                    "local_paths", "a/b.txt", "http://h/files/a/b.txt");
    r = mcp_tool_result(ans);
    l = json_array_get(json_object_get(r, "content"), 1);
    CHECK(l && json_integer_value(json_object_get(l, "size")) == 3 &&
              !strcmp(json_string_value(json_object_get(l, "title")), "a/b.txt"),
          "sandbox_bash's files are links with their size");
    json_decref(r);
    json_decref(ans);
}

static void test_error_result(void)
{
    struct sbx_err err = {0};
    sbx_err_set(&err, 2, "edit_no_match", "old_string was not found");
    json_t *details = json_pack("{s:[{s:i,s:f}]}", "candidates", "line", 3, "score", 0.5);
    json_t *r = mcp_tool_error(&err, details);
    const char *text = json_string_value(
        json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    CHECK(json_is_true(json_object_get(r, "isError")), "isError true");
    CHECK(!json_object_get(r, "structuredContent"), "no structuredContent on errors");
    CHECK(text && !strncmp(text, "edit_no_match: old_string was not found", 39),
          "the code leads the text");
    CHECK(text && strstr(text, "nearest candidates: [{\"line\":3"), "the candidates follow");
    json_t *meta = json_object_get(json_object_get(r, "_meta"), "sbx/error");
    CHECK(!strcmp(json_string_value(json_object_get(meta, "code")), "edit_no_match") &&
              json_array_size(json_object_get(meta, "candidates")) == 1,
          "_meta carries the code and the details");
    json_decref(r);
    json_decref(details);
}

static void test_sessions(void)
{
    struct mcp_sessions t = {0};
    struct mcp_session *s, *s2;
    struct sbx_err err = {0};
    CHECK(mcp_session_new(&t, "key_a", "2025-11-25", 1000, &s, &err) == 0, "a session");
    CHECK_EQ_INT(strlen(s->id), MCP_SESSION_ID_LEN, "its id is 32 characters");
    CHECK(mcp_session_new(&t, "key_a", "2025-06-18", 1000, &s2, &err) == 0 && strcmp(s->id, s2->id),
          "ids differ");
    char id2[MCP_SESSION_ID_LEN + 1];
    snprintf(id2, sizeof(id2), "%s", s2->id);
    CHECK(mcp_session_find(&t, s->id, "key_a", 2000) == s, "found with its key");
    CHECK(mcp_session_find(&t, s->id, "key_b", 2000) == NULL, "not with another key");
    CHECK(mcp_session_find(&t, "nope", "key_a", 2000) == NULL, "an unknown id is not found");
    CHECK(mcp_session_find(&t, s->id, "key_a", 2000 + MCP_SESSION_IDLE_MS) == s,
          "use keeps it alive");
    CHECK(mcp_session_find(&t, id2, "key_a", 2000 + MCP_SESSION_IDLE_MS) == NULL,
          "an idle one expired");
    CHECK_EQ_INT(t.n, 1, "and was dropped");
    mcp_session_remove(&t, s);
    CHECK_EQ_INT(t.n, 0, "removed");
    for (unsigned i = 0; i < MCP_SESSIONS_MAX; i++)
        (void)mcp_session_new(&t, "key_a", "2025-11-25", 5000, &s, &err);
    CHECK(mcp_session_new(&t, "key_a", "2025-11-25", 5000, &s, &err) < 0 &&
              !strcmp(err.code, "too_many_sessions"),
          "the table is bounded");
    mcp_sessions_clear(&t);
    CHECK(t.head == NULL && t.n == 0, "cleared");
}

int main(void)
{
    test_catalog();
    test_result_blocks();
    test_error_result();
    test_sessions();
    return CHECK_DONE();
}
