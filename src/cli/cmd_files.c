/* Files: cp in both directions (files and directories, streamed), files ls, artifacts. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/util.h"
#include "cli.h"
#include "fmt.h"

/* Deeper local trees than this are refused rather than walked. */
#define CP_MAX_DEPTH 64

bool cli_safe_relpath(const char *rel)
{
    if (!*rel || rel[0] == '/')
        return false;
    const char *p = rel;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t n = slash ? (size_t)(slash - p) : strlen(p);
        if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

static const char *base_name(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    const char *b = path + n;
    while (b > path && b[-1] != '/')
        b--;
    return b;
}

/* "dir" + "/" + "name", without a doubled slash; an empty dir gives the name. */
static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir);
    while (n && dir[n - 1] == '/')
        n--;
    if (!n)
        return sbx_xstrdup(name);
    return sbx_xasprintf("%.*s/%s", (int)n, dir, name);
}

/* "/v1/<collection>/<id>" + suffix, the id escaped. */
static char *remote_path(const struct cli_remote *r, const char *suffix)
{
    _cleanup_free_ char *e = sbx_escape(r->id);
    return sbx_xasprintf("/v1/%s/%s%s", r->collection, e, suffix);
}

static char *files_path(const struct cli_remote *id, const char *rel)
{
    _cleanup_free_ char *e = sbx_escape_path(rel);
    _cleanup_free_ char *suffix = sbx_xasprintf("/files/%s", e);
    return remote_path(id, suffix);
}

/* The listing of a remote directory, or NULL when path is not one (or on an error: then
 * *rc says which; CLI_OK means "not a directory"). */
static json_t *remote_list(struct cli *cli, const struct cli_remote *id, const char *path, bool recursive,
                           int *rc)
{
    *rc = CLI_OK;
    _cleanup_free_ char *q = sbx_escape(path);
    _cleanup_free_ char *suffix =
        sbx_xasprintf("/files?path=%s&recursive=%s", q, recursive ? "true" : "false");
    _cleanup_free_ char *url = remote_path(id, suffix);
    struct sbx_client *c = cli_api(cli);
    if (!c) {
        *rc = CLI_FAIL;
        return NULL;
    }
    json_t *ans = NULL;
    struct sbx_err err = {0};
    if (sbx_call(c, "GET", url, NULL, &ans, &err) < 0) {
        if (err.errnum == SBX_E_API &&
            (!strcmp(err.code, "invalid_path") || !strcmp(err.code, "file_not_found")))
            return NULL;
        *rc = cli_fail(cli, &err);
        return NULL;
    }
    return ans;
}

static int upload_file(struct cli *cli, const char *local, const struct cli_remote *id,
                       const char *rel)
{
    bool stdin_src = !strcmp(local, "-");
    _cleanup_close_ int fd =
        stdin_src ? dup(STDIN_FILENO) : open(local, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return cli_error("%s: %s", local, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0)
        return cli_error("%s: %s", local, strerror(errno));
    long long size = S_ISREG(st.st_mode) ? st.st_size : -1;
    struct cli_progress pr;
    cli_progress_init(&pr, base_name(rel));
    _cleanup_free_ char *path = files_path(id, rel);
    struct sbx_err err = {0};
    json_t *ans = NULL;
    int r = sbx_upload_fd(cli_api(cli), path, fd, size, cli_progress_tick, &pr, &ans, &err);
    cli_progress_end(&pr);
    if (r < 0)
        return !strcmp(err.code, "cancelled") ? cli_error("interrupted") : cli_fail(cli, &err);
    if (cli->json)
        cli_print_json(ans);
    else
        printf("%s -> %s:%s\n", local, id->id, rel);
    json_decref(ans);
    return CLI_OK;
}

static int upload_tree(struct cli *cli, const char *local, const struct cli_remote *id,
                       const char *rel,
                       int depth)
{
    if (depth > CP_MAX_DEPTH)
        return cli_error("%s: deeper than %d levels", local, CP_MAX_DEPTH);
    DIR *d = opendir(local);
    if (!d)
        return cli_error("%s: %s", local, strerror(errno));
    int rc = CLI_OK;
    struct dirent *de;
    while (rc == CLI_OK && (de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        _cleanup_free_ char *lp = join(local, de->d_name);
        _cleanup_free_ char *rp = join(rel, de->d_name);
        struct stat st;
        if (lstat(lp, &st) < 0) {
            rc = cli_error("%s: %s", lp, strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            rc = upload_tree(cli, lp, id, rp, depth + 1);
        } else if (S_ISREG(st.st_mode)) {
            rc = upload_file(cli, lp, id, rp);
        } else {
            fprintf(stderr, "sbx: skipping %s (not a regular file or directory)\n", lp);
        }
    }
    closedir(d);
    return rc;
}

static int download_file(struct cli *cli, const struct cli_remote *id, const char *rel,
                         const char *local)
{
    _cleanup_free_ char *path = files_path(id, rel);
    bool to_stdout = !strcmp(local, "-");
    _cleanup_free_ char *tmp = to_stdout ? NULL : sbx_xasprintf("%s.sbx-partial", local);
    _cleanup_close_ int fd =
        to_stdout ? dup(STDOUT_FILENO)
                  : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return cli_error("%s: %s", to_stdout ? "stdout" : tmp, strerror(errno));
    struct cli_progress pr;
    cli_progress_init(&pr, base_name(rel));
    struct sbx_err err = {0};
    int r = sbx_download_fd(cli_api(cli), path, fd, cli_progress_tick, &pr, NULL, &err);
    cli_progress_end(&pr);
    if (r < 0) {
        if (tmp)
            unlink(tmp);
        return !strcmp(err.code, "cancelled") ? cli_error("interrupted") : cli_fail(cli, &err);
    }
    if (tmp && rename(tmp, local) < 0) {
        int e = errno;
        unlink(tmp);
        return cli_error("%s: %s", local, strerror(e));
    }
    if (!to_stdout && !cli->json)
        printf("%s:%s -> %s\n", id->id, rel, local);
    return CLI_OK;
}

static int download_tree(struct cli *cli, const struct cli_remote *id, const char *rel,
                         json_t *list,
                         const char *local)
{
    if (mkdir(local, 0755) < 0 && errno != EEXIST)
        return cli_error("%s: %s", local, strerror(errno));
    if (json_is_true(json_object_get(list, "truncated")))
        fprintf(stderr, "sbx: the listing of %s is cut short; not every file is copied\n", rel);
    size_t prefix = strlen(rel);
    while (prefix && rel[prefix - 1] == '/')
        prefix--;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(list, "data"), i, e)
    {
        const char *p = json_string_value(json_object_get(e, "path"));
        const char *type = json_string_value(json_object_get(e, "type"));
        if (!p || !type)
            continue;
        /* Entry paths are relative to /workspace: keep what is below rel. */
        const char *sub = p;
        if (prefix) {
            if (strncmp(p, rel, prefix) || p[prefix] != '/')
                continue;
            sub = p + prefix + 1;
        }
        if (!cli_safe_relpath(sub)) {
            fprintf(stderr, "sbx: skipping %s (not a plain relative path)\n", p);
            continue;
        }
        _cleanup_free_ char *lp = join(local, sub);
        int rc = CLI_OK;
        if (!strcmp(type, "directory")) {
            if (mkdir(lp, 0755) < 0 && errno != EEXIST)
                rc = cli_error("%s: %s", lp, strerror(errno));
        } else if (!strcmp(type, "file")) {
            _cleanup_free_ char *dir = sbx_xstrdup(lp);
            rc = sbx_mkdir_p(dirname(dir), 0755) < 0 ? cli_error("%s: %s", lp, strerror(errno))
                                                     : download_file(cli, id, p, lp);
        } else {
            fprintf(stderr, "sbx: skipping %s (%s)\n", p, type);
        }
        if (rc != CLI_OK)
            return rc;
    }
    return CLI_OK;
}

static bool is_local_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int cli_copy(struct cli *cli, int argc, char **argv, const char *collection)
{
    static const struct option longopts[] = {{0}};
    if (cli_getopt(cli, argc, argv, "", longopts) != -1)
        return CLI_USAGE;
    if (!cli_nargs(cli, argc - optind, 2, 2))
        return CLI_USAGE;
    const char *src = argv[optind], *dst = argv[optind + 1];
    _cleanup_free_ char *sid = NULL, *spath = NULL, *did = NULL, *dpath = NULL;
    bool sremote = parse_remote(src, &sid, &spath);
    bool dremote = parse_remote(dst, &did, &dpath);
    if (sremote == dremote)
        return cli_usage(cli, "one of SRC and DST must be ID:PATH, the other a local path");
    if (!cli_api(cli))
        return CLI_FAIL;
    const struct cli_remote sr = {collection, sid}, dr = {collection, did};
    int rc;
    cli_catch_sigint(true);
    if (dremote) {
        /* Into an existing remote directory (or a path ending in /): keep the name. */
        json_t *l = remote_list(cli, &dr, *dpath ? dpath : ".", false, &rc);
        bool into = !*dpath || dpath[strlen(dpath) - 1] == '/' || l;
        json_decref(l);
        if (rc != CLI_OK)
            goto out;
        if (into && !strcmp(src, "-")) {
            rc = cli_usage(cli, "stdin needs a destination file name");
            goto out;
        }
        _cleanup_free_ char *target = into ? join(dpath, base_name(src)) : sbx_xstrdup(dpath);
        if (is_local_dir(src))
            rc = upload_tree(cli, src, &dr, target, 0);
        else
            rc = upload_file(cli, src, &dr, target);
    } else {
        if (!*spath) {
            rc = cli_usage(cli, "name a path in the sandbox (ID:PATH)");
            goto out;
        }
        json_t *l = remote_list(cli, &sr, spath, true, &rc);
        if (rc == CLI_OK && l && !strcmp(dst, "-"))
            rc = cli_usage(cli, "%s is a directory: it cannot go to stdout", spath);
        if (rc == CLI_OK) {
            bool into = is_local_dir(dst);
            _cleanup_free_ char *target = into ? join(dst, base_name(spath)) : sbx_xstrdup(dst);
            rc = l ? download_tree(cli, &sr, spath, l, target)
                   : download_file(cli, &sr, spath, target);
        }
        json_decref(l);
    }
out:
    cli_catch_sigint(false);
    return rc;
}

static int cmd_cp(struct cli *cli, int argc, char **argv)
{
    return cli_copy(cli, argc, argv, "sandboxes");
}

static int cmd_files(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"recursive", no_argument, NULL, 'r'}, {0}};
    bool recursive = false;
    int o;
    if (argc < 2 || strcmp(argv[1], "ls"))
        return cli_usage(cli, "expected `files ls`");
    argc--, argv++;
    while ((o = cli_getopt(cli, argc, argv, "r", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        recursive = true;
    }
    if (!cli_nargs(cli, argc - optind, 1, 2))
        return CLI_USAGE;
    _cleanup_free_ char *q = sbx_escape(argc - optind == 2 ? argv[optind + 1] : ".");
    _cleanup_free_ char *suffix =
        sbx_xasprintf("/files?path=%s&recursive=%s", q, recursive ? "true" : "false");
    if (argc - optind == 1) {
        free(suffix);
        suffix = sbx_xasprintf("/files?recursive=%s", recursive ? "true" : "false");
    }
    _cleanup_free_ char *path = cli_sb_path(argv[optind], suffix);
    json_t *ans = NULL;
    int rc = cli_call(cli, "GET", path, NULL, &ans);
    if (rc == CLI_OK && !cli->json) {
        static const char *const head[] = {"TYPE", "MODE", "SIZE", "MODIFIED", "PATH"};
        struct fmt_table t;
        fmt_table_init(&t, SBX_ARRAY_SIZE(head), head);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(ans, "data"), i, e)
        {
            char size[32], when[32];
            fmt_bytes(json_integer_value(json_object_get(e, "size")), size, sizeof(size));
            const char *type = json_string_value(json_object_get(e, "type"));
            const char *row[] = {type, json_string_value(json_object_get(e, "mode")),
                                 type && !strcmp(type, "file") ? size : "-",
                                 cli_when(e, "mtime", when, sizeof(when)),
                                 json_string_value(json_object_get(e, "path"))};
            fmt_table_add(&t, row);
        }
        fmt_table_print(&t, stdout);
        fmt_table_release(&t);
        if (json_is_true(json_object_get(ans, "truncated")))
            fprintf(stderr, "sbx: the listing is cut short\n");
    }
    json_decref(ans);
    return rc;
}

/* The signed link's path and query on our own server: the host the daemon put in the
 * link may not be the one this client reaches it by. */
static const char *link_path(const char *url)
{
    const char *p = strstr(url, "/v1/");
    return p ? p : url;
}

int cli_download_artifacts(struct cli *cli, const char *id, const char *dir, bool print_json)
{
    _cleanup_free_ char *path = cli_sb_path(id, "/artifacts");
    struct sbx_client *c = cli_api(cli);
    if (!c)
        return CLI_FAIL;
    json_t *ans = NULL;
    struct sbx_err err = {0};
    if (sbx_call(c, "GET", path, NULL, &ans, &err) < 0)
        return cli_fail(cli, &err);
    int rc = sbx_mkdir_p(dir, 0755) < 0 ? cli_error("%s: %s", dir, strerror(errno)) : CLI_OK;
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(ans, "data"), i, a)
    {
        if (rc != CLI_OK)
            break;
        const char *p = json_string_value(json_object_get(a, "path"));
        const char *url = json_string_value(json_object_get(a, "url"));
        const char *want = json_string_value(json_object_get(a, "sha256"));
        if (!p || !url || !want)
            continue;
        const char *rel = strncmp(p, "out/", 4) ? p : p + 4;
        if (!cli_safe_relpath(rel)) {
            fprintf(stderr, "sbx: skipping artifact %s (not a plain relative path)\n", p);
            continue;
        }
        _cleanup_free_ char *target = join(dir, rel);
        _cleanup_free_ char *parent = sbx_xstrdup(target);
        _cleanup_free_ char *tmp = sbx_xasprintf("%s.sbx-partial", target);
        if (sbx_mkdir_p(dirname(parent), 0755) < 0) {
            rc = cli_error("%s: %s", target, strerror(errno));
            break;
        }
        _cleanup_close_ int fd =
            open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0) {
            rc = cli_error("%s: %s", tmp, strerror(errno));
            break;
        }
        struct cli_progress pr;
        cli_progress_init(&pr, rel);
        char got[65];
        int r = sbx_download_fd(c, link_path(url), fd, cli_progress_tick, &pr, got, &err);
        cli_progress_end(&pr);
        if (r < 0) {
            unlink(tmp);
            rc = cli_fail(cli, &err);
        } else if (strcmp(got, want)) {
            unlink(tmp);
            rc = cli_error("%s: SHA-256 mismatch: got %s, the server listed %s", p, got, want);
        } else if (rename(tmp, target) < 0) {
            rc = cli_error("%s: %s", target, strerror(errno));
            unlink(tmp);
        } else if (!cli->json) {
            printf("%s  sha256 %s ok\n", target, got);
        }
    }
    if (cli->json && print_json && rc == CLI_OK)
        cli_print_json(ans);
    json_decref(ans);
    return rc;
}

static int cmd_artifacts(struct cli *cli, int argc, char **argv)
{
    static const struct option longopts[] = {{"download", required_argument, NULL, 'd'}, {0}};
    const char *dir = NULL;
    int o;
    while ((o = cli_getopt(cli, argc, argv, "d:", longopts)) != -1) {
        if (o == '?')
            return CLI_USAGE;
        dir = optarg;
    }
    if (!cli_nargs(cli, argc - optind, 1, 1))
        return CLI_USAGE;
    if (dir)
        return cli_download_artifacts(cli, argv[optind], dir, true);
    _cleanup_free_ char *path = cli_sb_path(argv[optind], "/artifacts");
    json_t *ans = NULL;
    int rc = cli_call(cli, "GET", path, NULL, &ans);
    if (rc == CLI_OK && !cli->json) {
        static const char *const head[] = {"PATH", "SIZE", "MIME", "SCAN", "SHA256"};
        struct fmt_table t;
        fmt_table_init(&t, SBX_ARRAY_SIZE(head), head);
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(ans, "data"), i, a)
        {
            char size[32], sha[20];
            fmt_bytes(json_integer_value(json_object_get(a, "size")), size, sizeof(size));
            snprintf(sha, sizeof(sha), "%.12s", json_string_value(json_object_get(a, "sha256")));
            const char *row[] = {json_string_value(json_object_get(a, "path")), size,
                                 json_string_value(json_object_get(a, "mime")),
                                 json_string_value(json_object_get(a, "scan")), sha};
            fmt_table_add(&t, row);
        }
        fmt_table_print(&t, stdout);
        fmt_table_release(&t);
    }
    json_decref(ans);
    return rc;
}

static const struct cli_cmd cmds[] = {
    {"cp", "SRC DST", "copy files or directories between here and a sandbox",
     "One side is ID:PATH (PATH relative to /workspace), the other a local path; `-` is\n"
     "stdin or stdout. Into an existing directory the name is kept. Transfers are\n"
     "streamed; a progress bar shows on a terminal for files over 4 MiB.\n",
     cmd_cp},
    {"files", "ls ID [PATH] [-r]", "list files in a sandbox's workspace",
     "  -r, --recursive  the whole tree below PATH\n", cmd_files},
    {"artifacts", "ID [--download DIR]", "list the files under /workspace/out",
     "  -d, --download DIR  save them into DIR, checking each one's SHA-256\n", cmd_artifacts},
};

const struct cli_group cli_files_cmds = CLI_GROUP("Files", cmds);
