/* bash's `export -p`: one builtin that lists every exported variable, quoted so that bash
 * could read it back. A session command's EXIT trap writes it (src/agent/session.c) rather
 * than walking every variable in shell code, which cost about 1.5 ms a command.
 *
 * Lines are `declare -FLAGS NAME`, `declare -FLAGS NAME="V"` or `declare -FLAGS NAME=$'V'`
 * (`export NAME...` once the command turned on POSIX mode), or `declare -FLAGS NAME='V'`
 * with each ' as '\'' (what `${NAME@A}` writes, for a resident shell); arrays are
 * `NAME=(...)`. The
 * text may also hold whatever the command itself wrote to the same pipe: anything that is
 * not of that shape is refused whole. */
#ifndef SBX_COMMON_SHDECL_H
#define SBX_COMMON_SHDECL_H

#include <stddef.h>

/* One exported variable that has a value and is not an array: name and decoded value,
 * each NUL-terminated and valid only during the call. A negative return stops the parse
 * and is returned by it. */
typedef int (*shdecl_fn)(const char *name, size_t name_len, const char *value, size_t value_len,
                         void *data);

/* 0 when every line of text[0..len) is a declaration (fn called for each variable as
 * above), -EINVAL at the first line that is not (fn may have been called for the lines
 * before it), or what fn returned. A decoded value may not hold a NUL. */
int shdecl_parse(const char *text, size_t len, shdecl_fn fn, void *data);

#endif
