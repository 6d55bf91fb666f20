#include "jsonfind.h"

#include <string.h>

json_t *sbx_json_find(const json_t *list, const char *key, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *v = json_string_value(json_object_get(e, key));
        if (v && !strcmp(v, value))
            return e;
    }
    return NULL;
}
