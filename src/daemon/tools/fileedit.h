/* edit_file on a workspace (docs/tools.md): the search-and-replace shape
 * {path, old_string, new_string, replace_all?, create?} and the text-editor shape
 * {command: view | create | str_replace | insert, path, ...}. Files are read and written
 * beneath the workspace fd (files/workspace.h), written atomically, and every change
 * answers its unified diff and the new SHA-256. */
#ifndef SBX_FILEEDIT_H
#define SBX_FILEEDIT_H

#include <jansson.h>

#include "../../common/err.h"

/* The largest file edit_file reads or writes (it is held in memory and searched). */
#define FILEEDIT_FILE_MAX (4u * 1024u * 1024u)
/* The most a view answers. */
#define FILEEDIT_VIEW_MAX (256u * 1024u)

/* Run one edit on the workspace whose O_PATH fd is root. *out: the answer; on a refusal
 * (edit_no_match, edit_not_unique) *details is {candidates: [{line, score, text}]}. */
int fileedit_run(int root, json_t *args, json_t **out, json_t **details, struct sbx_err *err);

/* "/workspace/a/b" and "a/b" both name a/b; "" or "/workspace" the workspace itself. */
const char *fileedit_rel_path(const char *path);

#endif
