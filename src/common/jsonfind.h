/* Lookups in the JSON lists the daemon keeps (rules by name, artifacts by path, skills by
 * name): one place for the loop six files wrote for themselves. */
#ifndef SBX_COMMON_JSONFIND_H
#define SBX_COMMON_JSONFIND_H

#include <jansson.h>

/* The first object of the array list whose member key is the string value; NULL when none
 * is (also when list is not an array, or an element not an object). Borrowed. */
json_t *sbx_json_find(const json_t *list, const char *key, const char *value);

#endif
