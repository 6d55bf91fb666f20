/* Unit tests for src/daemon/workspace.c: path checks, resolution beneath the
 * workspace against symlinks and magic links, atomic writes, removal, walk, hashing. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../src/common/util.h"
#include "../../src/daemon/files/workspace.h"
#include "check.h"

static char top[] = "/tmp/sbx-ws-unit-XXXXXX";
static char ws[256], outside[256];

static int code_is(int r, const struct sbx_err *e, const char *code)
{
    return r < 0 && !strcmp(e->code, code);
}

static void put(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", ws, rel);
    FILE *f = fopen(p, "w");
    if (!f)
        abort();
    fputs(text, f);
    fclose(f);
}

static char *slurp(int fd)
{
    static char buf[4096];
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void test_path_check(void)
{
    const char *good[] = {"a", "a/b/c.txt", "out/act.pdf", ".hidden", "a..b", "ă/ș ț.txt"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(good); i++)
        CHECK(ws_path_check(good[i], false, NULL) == 0, "path '%s' is accepted", good[i]);
    const char *bad[] = {"",     "/etc/passwd", "..", "../x", "a/../../x", "a/./b",
                         "a//b", "a/",          ".",  "a\nb", "a\x7f",     "\xff\xfe"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(bad); i++) {
        struct sbx_err e = {0};
        CHECK(code_is(ws_path_check(bad[i], false, &e), &e, "invalid_path"),
              "bad path %zu is invalid_path", i);
    }
    CHECK(ws_path_check("", true, NULL) == 0, "the empty path names the workspace when allowed");
    CHECK(ws_path_check("out/caf\xe9", false, NULL) < 0 &&
              ws_name_check("out/caf\xe9", false, NULL) == 0,
          "a name that is not UTF-8: refused in a request, a workspace's own name for the helper");
    CHECK(ws_name_check("out/../x", false, NULL) < 0 && ws_name_check("/x", false, NULL) < 0,
          "the shape rules hold for a workspace's own names too");
    char longp[WS_PATH_MAX + 8];
    memset(longp, 'a', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    CHECK(ws_path_check(longp, false, NULL) < 0, "an over-long path is refused");
    char longn[WS_NAME_MAX + 2];
    memset(longn, 'b', sizeof(longn) - 1);
    longn[sizeof(longn) - 1] = '\0';
    CHECK(ws_path_check(longn, false, NULL) < 0, "an over-long name is refused");
}

static void test_resolution(int root)
{
    char p[512], target[512];
    put("inside.txt", "inside");
    snprintf(target, sizeof(target), "%s/secret", outside);
    snprintf(p, sizeof(p), "%s/abs", ws);
    CHECK(symlink(target, p) == 0, "planted an absolute symlink out");
    snprintf(p, sizeof(p), "%s/rel", ws);
    CHECK(symlink("../outside/secret", p) == 0, "planted a relative symlink out");
    snprintf(p, sizeof(p), "%s/proc", ws);
    CHECK(symlink("/proc/self/root/etc/passwd", p) == 0, "planted a /proc symlink");
    snprintf(p, sizeof(p), "%s/good", ws);
    CHECK(symlink("inside.txt", p) == 0, "planted a symlink that stays inside");
    snprintf(p, sizeof(p), "%s/dirout", ws);
    CHECK(symlink(outside, p) == 0, "planted a directory symlink out");
    snprintf(p, sizeof(p), "%s/fifo", ws);
    CHECK(mkfifo(p, 0644) == 0, "planted a FIFO");

    struct sbx_err e = {0};
    int fd = -1;
    uint64_t size = 0;
    CHECK(ws_open_file(root, "inside.txt", &fd, &size, &e) == 0 && size == 6 &&
              !strcmp(slurp(fd), "inside"),
          "a plain file opens");
    close(fd);
    CHECK(ws_open_file(root, "good", &fd, &size, &e) == 0 && !strcmp(slurp(fd), "inside"),
          "a symlink that stays inside is followed");
    close(fd);
    const char *escapes[] = {"abs", "rel", "proc", "dirout/secret"};
    for (size_t i = 0; i < SBX_ARRAY_SIZE(escapes); i++) {
        sbx_err_clear(&e);
        CHECK(code_is(ws_open_file(root, escapes[i], &fd, &size, &e), &e, "invalid_path"),
              "%s (out of the workspace) is invalid_path: %.100s", escapes[i], e.msg);
    }
    sbx_err_clear(&e);
    CHECK(code_is(ws_open_file(root, "missing", &fd, &size, &e), &e, "file_not_found"),
          "a missing file is file_not_found");
    sbx_err_clear(&e);
    CHECK(code_is(ws_open_file(root, "fifo", &fd, &size, &e), &e, "invalid_path"),
          "a FIFO is refused without blocking");
    sbx_err_clear(&e);
    CHECK(code_is(ws_open_file(root, "inside.txt/x", &fd, &size, &e), &e, "file_not_found"),
          "a file used as a directory is file_not_found");

    /* Writes through an escaping symlink replace the link itself, never the target. */
    CHECK(ws_write_file(root, "abs", "new", 3, 0644, &e) == 0, "writing over a symlink works");
    char buf[64] = {0};
    int tfd = open(target, O_RDONLY);
    CHECK(read(tfd, buf, sizeof(buf)) == 6 && !strcmp(buf, "secret"),
          "the host file behind the symlink is unchanged");
    close(tfd);
    struct stat st;
    snprintf(p, sizeof(p), "%s/abs", ws);
    CHECK(lstat(p, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 3,
          "the symlink was replaced by a regular file");
    sbx_err_clear(&e);
    CHECK(code_is(ws_write_file(root, "dirout/x", "x", 1, 0644, &e), &e, "invalid_path"),
          "writing beneath an escaping directory symlink is invalid_path");
    snprintf(p, sizeof(p), "%s/x", outside);
    CHECK(access(p, F_OK) < 0, "nothing was created outside");
}

static int count_entries(const struct ws_entry *en, void *data, struct sbx_err *er)
{
    (*(int *)data)++;
    return 0;
}

static void test_writer(int root)
{
    struct sbx_err e = {0};
    CHECK(ws_write_file(root, "a/b/c.txt", "hello", 5, 0644, &e) == 0,
          "a write creates missing directories");
    int fd = -1;
    uint64_t size;
    CHECK(ws_open_file(root, "a/b/c.txt", &fd, &size, &e) == 0 && !strcmp(slurp(fd), "hello"),
          "the file reads back");
    close(fd);

    struct ws_writer w;
    CHECK(ws_writer_open(root, "a/b/c.txt", 0644, &w, &e) == 0, "a writer opens over a file");
    CHECK(ws_writer_write(&w, "partial", 7, &e) == 0, "the writer takes bytes");
    CHECK(ws_open_file(root, "a/b/c.txt", &fd, &size, &e) == 0 && !strcmp(slurp(fd), "hello"),
          "before commit the old file is intact");
    close(fd);
    ws_writer_close(&w);
    char p[512];
    snprintf(p, sizeof(p), "%s/a/b", ws);
    int n = 0;
    bool t;
    CHECK(ws_walk(root, "a/b", false, 100, count_entries, &n, &t, &e) == 0 && n == 1,
          "an abandoned writer leaves nothing behind (%d entries)", n);

    CHECK(ws_writer_open(root, "a/b/c.txt", 0600, &w, &e) == 0 &&
              ws_writer_write(&w, "new!", 4, &e) == 0 && ws_writer_commit(&w, true, &e) == 0,
          "a writer commits with sync");
    ws_writer_close(&w);
    CHECK(ws_open_file(root, "a/b/c.txt", &fd, &size, &e) == 0 && !strcmp(slurp(fd), "new!") &&
              size == 4,
          "after commit the new content is there");
    close(fd);
    sbx_err_clear(&e);
    CHECK(code_is(ws_write_file(root, "a/b", "x", 1, 0644, &e), &e, "invalid_path"),
          "writing over a directory is invalid_path");
    sbx_err_clear(&e);
    CHECK(code_is(ws_write_file(root, "../x", "x", 1, 0644, &e), &e, "invalid_path"),
          "writing to ../x is invalid_path");
}

struct collect {
    char buf[2048];
};

static int collect_entry(const struct ws_entry *en, void *data, struct sbx_err *er)
{
    struct collect *c = data;
    size_t n = strlen(c->buf);
    snprintf(c->buf + n, sizeof(c->buf) - n, "%s:%s ", en->path, ws_type_name(en->type));
    return 0;
}

static int collect_file(const struct ws_file *f, void *data, struct sbx_err *er)
{
    struct collect *c = data;
    size_t n = strlen(c->buf);
    snprintf(c->buf + n, sizeof(c->buf) - n, "%s=%.8s/%llu ", f->path, f->sha256,
             (unsigned long long)f->size);
    return 0;
}

static void test_walk_and_hash(int root)
{
    struct sbx_err e = {0};
    CHECK(ws_write_file(root, "out/z.txt", "abc", 3, 0644, &e) == 0 &&
              ws_write_file(root, "out/a/b.txt", "", 0, 0644, &e) == 0,
          "made out/");
    char p[512];
    snprintf(p, sizeof(p), "%s/out/link", ws);
    CHECK(symlink(outside, p) == 0, "a symlink in out/ points outside");
    struct collect c = {{0}};
    bool trunc = true;
    CHECK(ws_walk(root, "out", true, 100, collect_entry, &c, &trunc, &e) == 0 && !trunc,
          "walk out/");
    CHECK(!strcmp(c.buf, "out/a:directory out/a/b.txt:file out/link:symlink out/z.txt:file "),
          "walk is sorted, depth first, symlinks not followed: %.150s", c.buf);
    memset(&c, 0, sizeof(c));
    CHECK(ws_walk(root, "out", true, 2, collect_entry, &c, &trunc, &e) == 0 && trunc &&
              !strcmp(c.buf, "out/a:directory out/a/b.txt:file "),
          "walk stops at max and says truncated: %.150s", c.buf);
    memset(&c, 0, sizeof(c));
    CHECK(ws_walk(root, "out", false, 100, collect_entry, &c, &trunc, &e) == 0 &&
              !strcmp(c.buf, "out/a:directory out/link:symlink out/z.txt:file "),
          "a non-recursive walk: %.150s", c.buf);
    sbx_err_clear(&e);
    CHECK(code_is(ws_walk(root, "out/z.txt", false, 100, collect_entry, &c, &trunc, &e), &e,
                  "invalid_path"),
          "walking a file is invalid_path");

    memset(&c, 0, sizeof(c));
    CHECK(ws_hash_tree(root, "out", 100, collect_file, &c, &trunc, &e) == 0 && !trunc, "hash out/");
    CHECK(!strcmp(c.buf, "out/a/b.txt=e3b0c442/0 out/z.txt=ba7816bf/3 "),
          "hash_tree gives SHA-256 of regular files only: %.150s", c.buf);
    memset(&c, 0, sizeof(c));
    CHECK(ws_hash_tree(root, "nothere", 100, collect_file, &c, &trunc, &e) == 0 && !c.buf[0],
          "a missing directory hashes to nothing");

    CHECK(ws_remove(root, "out/link", &e) == 0, "remove a symlink");
    CHECK(access(outside, F_OK) == 0, "its target stays");
    CHECK(ws_remove(root, "out", &e) == 0, "remove a tree");
    sbx_err_clear(&e);
    CHECK(code_is(ws_remove(root, "out", &e), &e, "file_not_found"),
          "removing it again is file_not_found");
}

/* Reading a file whole (artifacts, the read and edit tools) and hashing what was read. */
static void test_read_upto(void)
{
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "a pipe");
    CHECK(write(p[1], "ab", 2) == 2 && write(p[1], "c", 1) == 1, "two writes into it");
    close(p[1]);
    char buf[8];
    size_t len = 99;
    CHECK(sbx_read_upto(p[0], buf, 2, &len) == 0 && len == 2 && !memcmp(buf, "ab", 2),
          "stops at cap: %zu", len);
    CHECK(sbx_read_upto(p[0], buf, sizeof(buf), &len) == 0 && len == 1 && buf[0] == 'c',
          "fewer than cap only at end of file: %zu", len);
    CHECK(sbx_read_upto(p[0], buf, sizeof(buf), &len) == 0 && len == 0, "0 at end of file");
    close(p[0]);
    len = 99;
    CHECK(sbx_read_upto(p[0], buf, sizeof(buf), &len) == -EBADF && len == 99,
          "an error leaves len alone");
    char hex[WS_SHA256_HEX_LEN + 1];
    ws_sha256_buf("abc", 3, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
          "SHA-256 of bytes in memory: %s", hex);
}

/* What a kill between an upload's link and rename leaves is swept; nothing else is. */
static void test_sweep(int root)
{
    struct sbx_err e = {0};
    CHECK(ws_write_file(root, "sw/deep/x.txt", "x", 1, 0644, &e) == 0, "a tree to sweep");
    put("sw/.sbx-upload-0123456789abcdef", "half");
    put("sw/deep/.sbx-upload-fedcba9876543210", "half");
    put("sw/.sbx-upload-mine", "a user's");
    put("sw/.sbx-upload-0123456789abcdeF", "not our shape");
    put("sw/.sbx-upload-0123456789abcdef0", "not our shape");
    char p[512];
    snprintf(p, sizeof(p), "%s/sw/.sbx-upload-aaaaaaaaaaaaaaaa", ws);
    CHECK(mkdir(p, 0755) == 0, "a directory of that name");
    CHECK_EQ_INT(ws_sweep_uploads(root, 1000), 2, "the two temporaries go");
    struct stat st;
    int fd = -1;
    uint64_t size;
    CHECK(ws_open_file(root, "sw/.sbx-upload-mine", &fd, &size, &e) == 0, "a user's file stays");
    close(fd);
    CHECK(fstatat(root, "sw/.sbx-upload-0123456789abcdeF", &st, 0) == 0 &&
              fstatat(root, "sw/.sbx-upload-0123456789abcdef0", &st, 0) == 0 &&
              fstatat(root, "sw/.sbx-upload-aaaaaaaaaaaaaaaa", &st, 0) == 0 &&
              fstatat(root, "sw/deep/x.txt", &st, 0) == 0,
          "names of another shape, directories and other files stay");
    CHECK(fstatat(root, "sw/.sbx-upload-0123456789abcdef", &st, 0) < 0, "the temporary is gone");
    CHECK_EQ_INT(ws_sweep_uploads(root, 1000), 0, "a second sweep finds nothing");
}

int main(void)
{
    if (!mkdtemp(top))
        return 1;
    snprintf(ws, sizeof(ws), "%s/ws", top);
    snprintf(outside, sizeof(outside), "%s/outside", top);
    mkdir(ws, 0755);
    mkdir(outside, 0755);
    char secret[512];
    snprintf(secret, sizeof(secret), "%s/secret", outside);
    FILE *f = fopen(secret, "w");
    fputs("secret", f);
    fclose(f);

    test_path_check();
    test_read_upto();
    int root = -1;
    struct sbx_err e = {0};
    CHECK(ws_open_root(ws, &root, &e) == 0, "open the workspace");
    test_resolution(root);
    test_writer(root);
    test_walk_and_hash(root);
    test_sweep(root);
    close(root);
    sbx_rm_rf(top);
    return CHECK_DONE();
}
