/* Custom template recipes (templates/recipe.c): what parses, every named limit, the digest's
 * stability; and the tree digest (templates/tree.c) on a small tree. */
#include "../../src/daemon/templates/recipe.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/daemon/templates/tree.h"
#include "check.h"

static int parse(const char *text, struct recipe *r, struct sbx_err *err)
{
    memset(err, 0, sizeof(*err));
    json_t *j = json_loads(text, 0, NULL);
    if (!j)
        return -999;
    int rc = recipe_parse(j, r, err);
    json_decref(j);
    return rc;
}

static void bad(const char *text, const char *code, const char *words)
{
    struct recipe r;
    struct sbx_err err;
    int rc = parse(text, &r, &err);
    CHECK(rc == -EINVAL && !strcmp(err.code, code) && strstr(err.msg, words),
          "refused %.60s: %s (%.80s)", text, err.code, err.msg);
    recipe_clear(&r);
}

static char *repeat(const char *item, int n)
{
    size_t len = strlen(item);
    char *s = malloc((len + 1) * (size_t)n + 3);
    char *p = s;
    *p++ = '[';
    for (int i = 0; i < n; i++) {
        memcpy(p, item, len);
        p += len;
        if (i + 1 < n)
            *p++ = ',';
    }
    *p++ = ']';
    *p = '\0';
    return s;
}

int main(void)
{
    struct recipe r;
    struct sbx_err err;
    CHECK(parse("{\"name\":\"hello\",\"apt_packages\":[\"jq\",\"libc6=2.36-9+deb12u4\"],"
                "\"npm_packages\":[\"lodash@4.17.21\",\"@scope/pkg\",\"x@^1.2\"],"
                "\"files\":[{\"path\":\"/etc/a\",\"content\":\"x\",\"mode\":493}],"
                "\"run\":[\"echo hi\"],\"start_command\":\"sleep 1\",\"ready_check\":\"true\"}",
                &r, &err) == 0,
          "a full recipe parses (%.80s)", err.msg);
    CHECK(!strcmp(r.from, "base"), "from defaults to base");
    CHECK(json_array_size(r.apt) == 2 && json_array_size(r.npm) == 3, "packages kept");
    CHECK(json_integer_value(json_object_get(json_array_get(r.files, 0), "mode")) == 0755,
          "mode kept");
    char d1[65], d2[65], d3[65], d4[65];
    recipe_digest(&r, "abc", NULL, "https://registry.npmjs.org/", d1);
    recipe_clear(&r);
    /* The same recipe written another way (key order, explicit from): the same digest. */
    CHECK(
        parse("{\"ready_check\":\"true\",\"start_command\":\"sleep 1\",\"run\":[\"echo hi\"],"
              "\"files\":[{\"mode\":493,\"content\":\"x\",\"path\":\"/etc/a\"}],\"from\":\"base\","
              "\"npm_packages\":[\"lodash@4.17.21\",\"@scope/pkg\",\"x@^1.2\"],"
              "\"apt_packages\":[\"jq\",\"libc6=2.36-9+deb12u4\"],\"name\":\"other\"}",
              &r, &err) == 0,
        "reordered parses");
    recipe_digest(&r, "abc", NULL, "https://registry.npmjs.org/", d2);
    recipe_digest(&r, "abd", NULL, "https://registry.npmjs.org/", d3);
    recipe_digest(&r, "abc", "deb http://mirror/ bookworm main", "https://registry.npmjs.org/", d4);
    recipe_clear(&r);
    CHECK(!strcmp(d1, d2), "same recipe (any order, any name): same digest");
    CHECK(strcmp(d1, d3) && strcmp(d1, d4), "another parent or apt source: another digest");
    CHECK(strlen(d1) == 64, "64 hex");

    bad("{}", "invalid_recipe", "name is required");
    bad("{\"name\":\"Bad\"}", "invalid_template", "template names");
    bad("{\"name\":\"-x\"}", "invalid_template", "template names");
    bad("{\"name\":\"a\",\"from\":\"a\"}", "invalid_recipe", "itself");
    bad("{\"name\":\"a\",\"from\":\"../x\"}", "invalid_recipe", "from must be");
    bad("{\"name\":\"a\",\"x\":1}", "invalid_recipe", "unknown field x");
    bad("{\"name\":\"a\",\"public\":\"yes\"}", "invalid_recipe", "public");
    static const char *const bad_apt[] = {"-o", "a", "A-b", "a b", "a;b", "a=", "a=x1", "a/b"};
    for (size_t i = 0; i < sizeof(bad_apt) / sizeof(bad_apt[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "{\"name\":\"a\",\"apt_packages\":[\"%s\"]}", bad_apt[i]);
        bad(text, "invalid_recipe", "apt_packages[0]");
    }
    static const char *const bad_npm[] = {"", "../x", "@/x", "@s/", "A", "x@", "x y", "-g"};
    for (size_t i = 0; i < sizeof(bad_npm) / sizeof(bad_npm[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "{\"name\":\"a\",\"npm_packages\":[\"%s\"]}", bad_npm[i]);
        bad(text, "invalid_recipe", "npm_packages[0]");
    }
    static const char *const bad_paths[] = {"/tmp/x", "/proc",     "/workspace/a", "/opt/sbx/a",
                                            "x",      "/a/../b",   "/a/./b",       "/a//b",
                                            "/a/",    "/dev/null", "/home/user/x"};
    for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
        char text[160];
        snprintf(text, sizeof(text),
                 "{\"name\":\"a\",\"files\":[{\"path\":\"%s\",\"content\":\"\"}]}", bad_paths[i]);
        bad(text, "invalid_recipe", "files[0].path");
    }
    bad("{\"name\":\"a\",\"files\":[{\"path\":\"/a\",\"content\":\"\"},"
        "{\"path\":\"/a\",\"content\":\"\"}]}",
        "invalid_recipe", "twice");
    bad("{\"name\":\"a\",\"files\":[{\"path\":\"/a\",\"content\":1}]}", "invalid_recipe",
        "files[0] must be");
    bad("{\"name\":\"a\",\"files\":[{\"path\":\"/a\",\"content\":\"\",\"mode\":4096}]}",
        "invalid_recipe", "mode");

    /* Every limit, at the limit and one past it. */
    struct {
        const char *field, *item, *limit;
        int max;
    } lims[] = {{"apt_packages", "\"jq\"", "RECIPE_APT_MAX", RECIPE_APT_MAX},
                {"npm_packages", "\"x\"", "RECIPE_NPM_MAX", RECIPE_NPM_MAX},
                {"run", "\"true\"", "RECIPE_RUN_MAX", RECIPE_RUN_MAX}};
    for (size_t i = 0; i < sizeof(lims) / sizeof(lims[0]); i++) {
        char *ok = repeat(lims[i].item, lims[i].max), *over = repeat(lims[i].item, lims[i].max + 1);
        char *t1 = NULL, *t2 = NULL;
        if (asprintf(&t1, "{\"name\":\"a\",\"%s\":%s}", lims[i].field, ok) < 0 ||
            asprintf(&t2, "{\"name\":\"a\",\"%s\":%s}", lims[i].field, over) < 0)
            return 1;
        CHECK(parse(t1, &r, &err) == 0, "%s: %d entries parse", lims[i].field, lims[i].max);
        recipe_clear(&r);
        bad(t2, "invalid_recipe", lims[i].limit);
        free(ok);
        free(over);
        free(t1);
        free(t2);
    }
    {
        char *files = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&files, &len);
        fputs("{\"name\":\"a\",\"files\":[", f);
        for (int i = 0; i <= RECIPE_FILES_MAX; i++)
            fprintf(f, "%s{\"path\":\"/f%d\",\"content\":\"\"}", i ? "," : "", i);
        fputs("]}", f);
        fclose(f);
        bad(files, "invalid_recipe", "RECIPE_FILES_MAX");
        free(files);
        char *big = malloc(RECIPE_FILES_BYTES + 128);
        int n = snprintf(big, 128, "{\"name\":\"a\",\"files\":[{\"path\":\"/a\",\"content\":\"");
        memset(big + n, 'x', RECIPE_FILES_BYTES + 1);
        strcpy(big + n + RECIPE_FILES_BYTES + 1, "\"}]}");
        bad(big, "invalid_recipe", "RECIPE_FILES_BYTES");
        n = snprintf(big, 128, "{\"name\":\"a\",\"start_command\":\"");
        memset(big + n, 'x', RECIPE_COMMAND_MAX + 1);
        strcpy(big + n + RECIPE_COMMAND_MAX + 1, "\"}");
        bad(big, "invalid_recipe", "RECIPE_COMMAND_MAX");
        free(big);
    }

    /* The tree digest: stable, and it sees a mode change and a symlink's target. */
    char dir[] = "/tmp/sbx-tree-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "temp dir");
    char p[400], why[TREE_ERR_MAX];
    snprintf(p, sizeof(p), "%s/sub", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/sub/f", dir);
    FILE *f = fopen(p, "w");
    fputs("hello\n", f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/l", dir);
    CHECK(symlink("/etc/passwd", p) == 0, "symlink");
    char t1[65], t2[65], t3[65];
    long long bytes, entries;
    CHECK(tree_digest(dir, t1, &bytes, &entries, why) == 0, "digest");
    CHECK(bytes == 6 && entries == 3, "6 bytes in 3 entries (%lld, %lld)", bytes, entries);
    CHECK(tree_digest(dir, t2, &bytes, &entries, why) == 0 && !strcmp(t1, t2), "stable");
    snprintf(p, sizeof(p), "%s/sub/f", dir);
    chmod(p, 0600);
    CHECK(tree_digest(dir, t3, &bytes, &entries, why) == 0 && strcmp(t1, t3), "mode counts");
    /* An overlay build and its merge: the merged tree is exactly what the build saw, lower
     * is untouched, and what the build left alone is lower's own inode. */
    char ov[300], mnt[320], dst[300];
    snprintf(ov, sizeof(ov), "%s.ov", dir);
    snprintf(mnt, sizeof(mnt), "%s/mnt", ov);
    snprintf(dst, sizeof(dst), "%s.tree", dir);
    mkdir(ov, 0755);
    snprintf(p, sizeof(p), "%s/sub/g", dir);
    f = fopen(p, "w");
    fputs("kept\n", f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/gone", dir);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/gone/x", dir);
    fclose(fopen(p, "w"));
    char lower_before[65], seen[65], merged[65];
    CHECK(tree_digest(dir, lower_before, &bytes, &entries, why) == 0, "lower's digest");
    CHECK(tree_overlay_mount(dir, ov, why) == 0, "overlay mounted");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "cd %s && echo changed > sub/f && rm l && ln -s /new l && rm -rf gone && "
             "mkdir gone && echo fresh > gone/y && mkdir -p new/deep && echo n > new/deep/z && "
             "chmod 0700 sub && rm sub/g",
             mnt);
    CHECK(system(cmd) == 0, "the build changes things");
    CHECK(tree_digest(mnt, seen, &bytes, &entries, why) == 0, "what the build sees");
    CHECK(tree_overlay_unmount(ov, 1000, why) == 0, "unmounted");
    CHECK(tree_merge(dir, ov, dst, why) == 0, "merged");
    CHECK(tree_digest(dst, merged, &bytes, &entries, why) == 0 && !strcmp(merged, seen),
          "the merged tree is what the build saw");
    CHECK(tree_digest(dir, t2, &bytes, &entries, why) == 0 && !strcmp(t2, lower_before),
          "lower is untouched");
    struct stat a, b;
    snprintf(p, sizeof(p), "%s/sub/f", dst);
    char q[300];
    snprintf(q, sizeof(q), "%s/sub/f", dir);
    CHECK(stat(p, &a) == 0 && stat(q, &b) == 0 && a.st_ino != b.st_ino, "a changed file is new");
    snprintf(p, sizeof(p), "%s/gone/x", dst);
    CHECK(access(p, F_OK) < 0, "a removed directory's old content is gone");
    CHECK(tree_remove(ov, why) == 0 && tree_remove(dst, why) == 0, "scratch removed");
    CHECK(tree_remove(dir, why) == 0, "remove the tree");
    return CHECK_DONE();
}
