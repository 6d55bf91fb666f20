/* Client paths inside a sandbox's workspace, resolved by the kernel beneath the
 * workspace's directory fd (openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS |
 * RESOLVE_NO_XDEV), never by string manipulation: whatever the sandbox does to the
 * tree at the same moment (symlinks to host files, renames, /proc/self/fd links),
 * nothing here opens, creates or removes anything outside the workspace.
 *
 * Also: atomic file writes (O_TMPFILE, then link + rename, so a crash leaves the
 * old file or the whole new one), a sorted walk, and SHA-256 of files. */
#ifndef SBX_WORKSPACE_H
#define SBX_WORKSPACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <openssl/evp.h>
#include <sys/types.h>

#include "../../common/err.h"

#define WS_PATH_MAX 4096
#define WS_NAME_MAX 255
#define WS_WALK_DEPTH_MAX 64
#define WS_SHA256_HEX_LEN 64

/* Is path a well-formed relative workspace path: no leading '/', no empty, "." or
 * ".." components, no control bytes, UTF-8, within WS_PATH_MAX / WS_NAME_MAX? With
 * allow_empty, "" names the workspace itself. Fills invalid_path. */
int ws_path_check(const char *path, bool allow_empty, struct sbx_err *err);
/* The same shape without the text rules (control bytes and UTF-8 are a request's
 * rules): for names a workspace already holds, which the file helper reports. */
int ws_name_check(const char *path, bool allow_empty, struct sbx_err *err);

/* An O_PATH fd of the workspace directory itself. */
int ws_open_root(const char *workspace_dir, int *out, struct sbx_err *err);

/* openat2 beneath root. flags as for openat (O_CLOEXEC and O_NONBLOCK are added:
 * a FIFO planted by the sandbox must not block the daemon). Errors: invalid_path
 * (escapes, crosses a mount, symlink loop), file_not_found. */
int ws_open(int root, const char *path, int flags, int *out, struct sbx_err *err);

/* Open path as a regular file for reading; invalid_path when it is anything else. */
int ws_open_file(int root, const char *path, int *out, uint64_t *size, struct sbx_err *err);

/* Atomic replacement of one file. The new file is linked under WS_TMP_PREFIX + random hex
 * in the same directory for a moment, then renamed over the target. */
#define WS_TMP_PREFIX ".sbx-upload-"
struct ws_writer {
    int dir; /* O_PATH fd of the parent directory */
    int fd;  /* the anonymous O_TMPFILE being written */
    char name[WS_NAME_MAX + 1];
    uint64_t written;
    uint64_t unflushed; /* written since writeback was last started */
};

/* Open the parent of path (creating missing directories beneath root) and an
 * anonymous file in it. */
int ws_writer_open(int root, const char *path, mode_t mode, struct ws_writer *w,
                   struct sbx_err *err);
/* The same for a name a workspace already holds (ws_name_check): an artifact's staged
 * copy, whose name need not be UTF-8. */
int ws_writer_open_any(int root, const char *path, mode_t mode, struct ws_writer *w,
                       struct sbx_err *err);
/* ENOSPC / EDQUOT become workspace_too_large. */
int ws_writer_write(struct ws_writer *w, const void *buf, size_t len, struct sbx_err *err);
/* Give the file its name, replacing any file (or symlink: it is replaced, never
 * followed) of that name. With sync, the data is on disk before the name. */
int ws_writer_commit(struct ws_writer *w, bool sync, struct sbx_err *err);
/* Drop an uncommitted file (nothing of it remains) and close everything. */
void ws_writer_close(struct ws_writer *w);

/* Write a whole small buffer to path, atomically. */
int ws_write_file(int root, const char *path, const void *buf, size_t len, mode_t mode,
                  struct sbx_err *err);

/* lstat of path beneath root ("" = the workspace); a symlink's target (as written) goes to
 * target when given. */
int ws_lstat(int root, const char *path, struct stat *st, char *target, size_t cap,
             struct sbx_err *err);
/* mkdir -p beneath root (a volume's mkdir route); *created says whether it was missing.
 * invalid_path when it is a file. */
int ws_mkdirs(int root, const char *path, bool *created, struct sbx_err *err);

/* Remove a file, a symlink (not what it points to) or a directory tree. */
int ws_remove(int root, const char *path, struct sbx_err *err);
/* At start: the temporary names of uploads that a kill caught between their link and
 * their rename (WS_TMP_PREFIX + 16 hex) are removed, looking at up to max entries.
 * Returns how many went. */
long long ws_sweep_uploads(int root, size_t max);

enum ws_type { WS_FILE, WS_DIR, WS_SYMLINK, WS_OTHER };
const char *ws_type_name(enum ws_type t);
/* The type a stat's mode names: the one mode switch of the host walk, the listings and
 * the agent's rows (agentws.c). */
enum ws_type ws_type_of(mode_t mode);

struct ws_entry {
    const char *path; /* relative to the workspace */
    enum ws_type type;
    uint64_t size;
    mode_t mode; /* permission bits */
    int64_t mtime; /* unix seconds */
    /* The entry's directory (a real fd, beneath root) and its name there, so callers
     * can open it with openat(dir, name, O_NOFOLLOW) without resolving again. */
    int dir;
    const char *name;
    const struct stat *st; /* all of it, for callers that compare (receipts) */
};

/* Return 0 to go on, 1 to stop early (no error), <0 with err filled to fail. */
typedef int (*ws_walk_fn)(const struct ws_entry *e, void *data, struct sbx_err *err);

/* Entries under dir ("" = the workspace), each directory's entries sorted by name,
 * depth first; symlinks are reported, never followed. At most max entries: *truncated
 * says whether more existed. dir itself must be a directory (invalid_path). */
int ws_walk(int root, const char *dir, bool recursive, size_t max, ws_walk_fn fn, void *data,
            bool *truncated, struct sbx_err *err);

/* SHA-256 of everything readable from fd (from its current offset), as lower-case
 * hex, and the byte count. With copy_to >= 0 the same bytes are written there too, so
 * a file can be stored and hashed in one read. */
int ws_sha256_fd(int fd, int copy_to, char hex[WS_SHA256_HEX_LEN + 1], uint64_t *size,
                 struct sbx_err *err);

/* SHA-256 of len bytes in memory, as lower-case hex. */
void ws_sha256_buf(const void *buf, size_t len, char hex[WS_SHA256_HEX_LEN + 1]);
/* The hex digest of a SHA-256 context fed elsewhere (bytes read back through the agent). */
int ws_sha256_final(EVP_MD_CTX *md, char hex[WS_SHA256_HEX_LEN + 1], struct sbx_err *err);

/* SHA-256 and size of the regular file name in dir (a walk's entry), never following a
 * symlink. */
int ws_hash_at(int dir, const char *name, char hex[WS_SHA256_HEX_LEN + 1], uint64_t *size,
               struct sbx_err *err);

/* One regular file under a directory with its digest (receipts and artifacts). */
struct ws_file {
    const char *path;
    uint64_t size;
    mode_t mode;
    int64_t mtime;
    char sha256[WS_SHA256_HEX_LEN + 1];
};
typedef int (*ws_file_fn)(const struct ws_file *f, void *data, struct sbx_err *err);

/* Every regular file under dir (recursive, symlinks skipped), hashed, in walk order;
 * at most max files. A dir that does not exist is an empty set. */
int ws_hash_tree(int root, const char *dir, size_t max, ws_file_fn fn, void *data,
                 bool *truncated, struct sbx_err *err);

#endif
