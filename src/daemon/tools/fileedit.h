/* edit_file on a workspace (docs/tools.md): the search-and-replace shape
 * {path, old_string, new_string, replace_all?, create?} and the text-editor shape
 * {command: view | create | str_replace | insert, path, ...}. The edit itself is pure
 * (fileedit_apply: the file's bytes in, the new bytes and the answer out), so a workspace on
 * this host (fileedit_run: read and written beneath the workspace fd, files/workspace.h)
 * and one inside a remote sandbox (toolws.c: through the agent) give the same answers.
 * Every change answers its unified diff and the new SHA-256. */
#ifndef SBX_FILEEDIT_H
#define SBX_FILEEDIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../common/err.h"

/* The largest file edit_file reads or writes (it is held in memory and searched). */
#define FILEEDIT_FILE_MAX (4u * 1024u * 1024u)
/* The most a view answers. */
#define FILEEDIT_VIEW_MAX (256u * 1024u)
/* The most entries a view of a folder lists. */
#define FILEEDIT_VIEW_ENTRIES_MAX 1000

/* One edit: its arguments (checked by fileedit_parse), then what fileedit_apply decided. */
struct fileedit {
    json_t *args;     /* borrowed */
    const char *path; /* relative to the workspace; borrowed from args */
    const char *cmd;  /* NULL: the search-and-replace shape */
    /* Its command's arguments (borrowed from args). */
    const char *old_s, *new_s, *file_text;
    bool all, create;
    long long insert_line;
    /* After fileedit_apply: */
    bool write; /* text is to be written to path (atomically); then answer is the answer */
    char *text; /* the new content (owned) */
    size_t len;
    mode_t mode; /* the file's own, kept (0644 for a new file) */
    json_t *answer;
};

/* The file as its reader found it. A reader that cannot say the mode leaves 0644 (and keeps
 * the file's own when it writes). */
struct fileedit_file {
    bool exists;
    uint64_t size; /* the whole file's */
    char *buf;     /* its bytes when size <= FILEEDIT_FILE_MAX, NUL-terminated; borrowed */
    size_t len;
    mode_t mode;
};

/* Check the arguments (path, command and its strings' types) before anything is read. */
int fileedit_parse(json_t *args, struct fileedit *e, struct sbx_err *err);
bool fileedit_is_view(const struct fileedit *e);
/* Apply e to the file f (a view of a folder is answered by its reader with
 * fileedit_dir_answer). *details: the candidates of a refusal (edit_no_match,
 * edit_not_unique). */
int fileedit_apply(struct fileedit *e, const struct fileedit_file *f, json_t **details,
                   struct sbx_err *err);
/* A view's answer for a folder; entries [{path, type, size}], each made by
 * fileedit_dir_entry (a ws_walk_fn; data: the list). Takes entries. */
struct ws_entry;
int fileedit_dir_entry(const struct ws_entry *e, void *data, struct sbx_err *err);
json_t *fileedit_dir_answer(const char *path, json_t *entries, bool truncated);
void fileedit_clear(struct fileedit *e);

/* Run one edit on the workspace whose O_PATH fd is root. *out: the answer; on a refusal
 * (edit_no_match, edit_not_unique) *details is {candidates: [{line, score, text}]}. */
int fileedit_run(int root, json_t *args, json_t **out, json_t **details, struct sbx_err *err);

/* "/workspace/a/b" and "a/b" both name a/b; "" or "/workspace" the workspace itself. */
const char *fileedit_rel_path(const char *path);

#endif
