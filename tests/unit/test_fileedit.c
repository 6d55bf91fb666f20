/* The pure halves the host and remote workspaces share (docs/tools.md): edit_file's
 * fileedit_apply (bytes in, new bytes and the answer out; src/daemon/tools/fileedit.c) and
 * sandbox_bash's listing comparison ws_listing_diff (src/daemon/tools/wschanges.c). */
#include <stdlib.h>
#include <string.h>

#include "../../src/daemon/tools/fileedit.h"
#include "../../src/daemon/tools/wschanges.h"
#include "check.h"

/* Apply args (JSON text) to a file holding text (NULL: missing); the error code or "ok". */
static const char *apply(const char *args, const char *text, mode_t mode, struct fileedit *e,
                         json_t **details)
{
    static struct sbx_err err;
    json_t *a = json_loads(args, 0, NULL);
    struct fileedit_file f = {.exists = text != NULL,
                              .size = text ? strlen(text) : 0,
                              .buf = (char *)text,
                              .len = text ? strlen(text) : 0,
                              .mode = mode};
    memset(&err, 0, sizeof(err));
    *details = NULL;
    int r = fileedit_parse(a, e, &err);
    if (r == 0)
        r = fileedit_apply(e, &f, details, &err);
    /* What the checks read (text, mode, answer) is e's own; its borrowed path goes with a. */
    e->args = NULL;
    e->path = NULL;
    json_decref(a);
    return r < 0 ? err.code : "ok";
}

static void test_edits(void)
{
    struct fileedit e;
    json_t *d;
    CHECK(!strcmp(apply("{\"path\":\"/workspace/c.py\",\"old_string\":\"b = 2\","
                        "\"new_string\":\"b = 3\"}",
                        "a = 1\nb = 2\n", 0750, &e, &d),
                  "ok"),
          "replace: ok");
    CHECK(e.write && e.len == 12 && !memcmp(e.text, "a = 1\nb = 3\n", 12) && e.mode == 0750,
          "replace: the new bytes, the file's own mode kept");
    CHECK(strstr(json_string_value(json_object_get(e.answer, "diff")), "-b = 2\n+b = 3\n") &&
              json_is_false(json_object_get(e.answer, "created")),
          "replace: the diff, not created");
    fileedit_clear(&e);

    CHECK(!strcmp(apply("{\"path\":\"n.py\",\"old_string\":\"\",\"new_string\":\"x\\n\","
                        "\"create\":true}",
                        NULL, 0, &e, &d),
                  "ok") &&
              e.write && e.mode == 0644 && json_is_true(json_object_get(e.answer, "created")),
          "a missing file created, 0644");
    fileedit_clear(&e);

    CHECK(!strcmp(apply("{\"path\":\"n.py\",\"old_string\":\"a\",\"new_string\":\"b\"}", NULL, 0,
                        &e, &d),
                  "file_not_found"),
          "a missing file without create: file_not_found");
    fileedit_clear(&e);

    CHECK(!strcmp(apply("{\"path\":\"d.txt\",\"old_string\":\"x\",\"new_string\":\"z\"}",
                        "x\ny\nx\n", 0644, &e, &d),
                  "edit_not_unique") &&
              json_array_size(json_object_get(d, "candidates")) == 2 && !e.write,
          "two matches: refused with both candidates, nothing written");
    json_decref(d);
    fileedit_clear(&e);

    CHECK(!strcmp(apply("{\"path\":\"c.py\",\"command\":\"insert\",\"insert_line\":1,"
                        "\"new_str\":\"c = 9\"}",
                        "a = 1\nb = 2", 0644, &e, &d),
                  "ok") &&
              e.len == 17 && !memcmp(e.text, "a = 1\nc = 9\nb = 2", 17),
          "insert after line 1");
    fileedit_clear(&e);

    CHECK(!strcmp(apply("{\"path\":\"c.py\",\"command\":\"view\",\"view_range\":[2,2]}",
                        "a = 1\nb = 2\n", 0644, &e, &d),
                  "ok") &&
              !e.write &&
              !strcmp(json_string_value(json_object_get(e.answer, "content")), "     2\tb = 2\n"),
          "view: a line range, nothing written");
    fileedit_clear(&e);

    CHECK(!strcmp(apply("{\"path\":\"b.bin\",\"command\":\"create\",\"file_text\":\"t\"}",
                        "\xff\xfe", 0600, &e, &d),
                  "ok") &&
              e.write && e.mode == 0600,
          "create over a binary file replaces it whole");
    fileedit_clear(&e);

    CHECK(!strcmp(apply("{\"path\":\"../x\",\"old_string\":\"a\",\"new_string\":\"b\"}", "a", 0644,
                        &e, &d),
                  "invalid_path"),
          "a path out of the workspace: invalid_path before anything is read");
    fileedit_clear(&e);
}

static void test_listing_diff(void)
{
    struct ws_listing *before = ws_listing_new(), *now = ws_listing_new();
    ws_listing_add(before, "b", 1, 10, 10, 2);
    ws_listing_add(before, "a", 1, 10, 10, 1);
    ws_listing_add(before, "c", 1, 10, 10, 3);
    ws_listing_add(now, "c", 1, 10, 11, 3); /* chmod'ed or rewritten with its old mtime */
    ws_listing_add(now, "a", 1, 10, 10, 1); /* untouched */
    ws_listing_add(now, "d", 5, 20, 20, 4); /* new */
    ws_listing_add(now, "b", 2, 12, 12, 2); /* changed */
    bool cut = true;
    json_t *files = ws_listing_diff(before, now, &cut);
    char *s = json_dumps(files, JSON_COMPACT);
    CHECK(!strcmp(s, "[{\"path\":\"b\",\"size\":2},{\"path\":\"c\",\"size\":1},"
                     "{\"path\":\"d\",\"size\":5}]") &&
              !cut,
          "changed, touched and new files in path order: %s", s);
    free(s);
    json_decref(files);
    ws_listing_set_truncated(now);
    files = ws_listing_diff(before, now, &cut);
    CHECK(cut, "a cut walk is said");
    json_decref(files);
    ws_listing_free(before);
    ws_listing_free(now);
}

int main(void)
{
    test_edits();
    test_listing_diff();
    return CHECK_DONE();
}
