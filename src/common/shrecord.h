/* What a session's resident shell writes about itself after each command (src/agent/spare.c,
 * docs/sessions.md "The resident shell"): five NUL-terminated fields, the kind ("b", "d<status>"
 * or "x"), $PWD, the exported variables as `${V@A}` writes them (src/common/shdecl.h), the
 * EXIT trap, and a dump of the rest of the shell's state whose first part, up to a \1, is the
 * names of all its variables separated by spaces. The shell runs as the user, who may write
 * anything on the same pipe: nothing here trusts the text. */
#ifndef SBX_COMMON_SHRECORD_H
#define SBX_COMMON_SHRECORD_H

#include <stdbool.h>
#include <stddef.h>

#define SHRECORD_FIELDS 5

struct shrecord {
    const char *f[SHRECORD_FIELDS]; /* each NUL-terminated, inside the record */
    size_t len[SHRECORD_FIELDS];
};

/* Count the NULs of buf[*scanned..len) into *nuls (both kept between calls, so a record
 * that comes in many reads is looked at once): the length of the first whole record, or 0
 * while it is not whole. The caller starts the next record with both at 0. */
size_t shrecord_scan(const char *buf, size_t len, size_t *scanned, int *nuls);

/* The fields of a whole record (as shrecord_scan measured it). */
void shrecord_split(const char *rec, size_t len, struct shrecord *out);

/* The dump as two moments of one shell are compared: the variable names less the exported
 * ones (which the session saves on their own), then the rest as it is. A new malloc'd
 * string of *out_len bytes (plus a NUL). *odd is set when an export is not what a fresh
 * bash of the session would have from its environment (an attribute besides -x, such as
 * readonly, integer or array, or no value). */
char *shrecord_norm(const char *exports, size_t exports_len, const char *dump, size_t dump_len,
                    size_t *out_len, bool *odd);

#endif
