/* The matching behind edit_file (docs/tools.md): find old_string in a text and replace it,
 * trying stricter matches first so an agent's slightly stale copy of a file still lands
 * where it meant, and refusing (with the nearest candidates and their line numbers) rather
 * than guessing when the target is ambiguous or too far off. Pure: no I/O. */
#ifndef SBX_EDITMATCH_H
#define SBX_EDITMATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "../../common/err.h"

/* Below this similarity a window is not the text the agent meant. */
#define EDIT_SIMILARITY_MIN 0.80
/* Two windows closer than this in score are indistinguishable: refuse. */
#define EDIT_SIMILARITY_MARGIN 0.02
/* Levenshtein cells one similarity search may compute (bounds CPU on the loop). */
#define EDIT_FUZZY_BUDGET (40u * 1000u * 1000u)
/* Lines longer than this are compared for equality only in the similarity search. */
#define EDIT_FUZZY_LINE_MAX 2000u
#define EDIT_CANDIDATES_MAX 3
#define EDIT_SNIPPET_MAX 120
#define EDIT_DIFF_CONTEXT 3

enum edit_strategy {
    EDIT_EXACT,
    EDIT_TRAILING_WS, /* lines equal once trailing blanks are dropped */
    EDIT_INDENT,      /* lines equal once leading and trailing blanks are dropped */
    EDIT_SIMILAR,     /* the most similar window of lines, above EDIT_SIMILARITY_MIN */
};

struct edit_candidate {
    size_t line; /* 1-based */
    double score;
    char snippet[EDIT_SNIPPET_MAX + 1]; /* its first line, trimmed */
};

struct edit_match {
    char *text; /* the new content (malloc'd, NUL-terminated) */
    size_t len;
    enum edit_strategy strategy;
    double score; /* 1 unless EDIT_SIMILAR */
    size_t replacements;
    size_t first_line; /* 1-based line of the first replacement */
    /* On refusal (edit_no_match, edit_not_unique): where the nearest candidates are. */
    struct edit_candidate cand[EDIT_CANDIDATES_MAX];
    size_t ncand;
};

/* Replace old_s (non-empty) by new_s in text[0..len). Without replace_all exactly one
 * match may exist. Refusals: edit_not_unique (several matches, out->cand lists them),
 * edit_no_match (none good enough, out->cand the nearest). out is filled either way and
 * must be cleared. */
int edit_replace(const char *text, size_t len, const char *old_s, const char *new_s,
                 bool replace_all, struct edit_match *out, struct sbx_err *err);
void edit_match_clear(struct edit_match *m);
const char *edit_strategy_name(enum edit_strategy s);

/* A unified diff (one hunk, EDIT_DIFF_CONTEXT lines of context) from a to b, "" when they
 * are equal; malloc'd. */
char *edit_unified_diff(const char *path, const char *a, size_t alen, const char *b, size_t blen);

/* Levenshtein similarity of two strings in 0..1 (1: equal); *cells is charged the work. */
double edit_similarity(const char *a, size_t alen, const char *b, size_t blen, size_t *cells);

#endif
