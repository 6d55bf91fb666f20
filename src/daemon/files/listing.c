#include "listing.h"

#include <errno.h>
#include <string.h>

int files_list_entry(const struct ws_entry *e, void *data, struct sbx_err *err)
{
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", (unsigned)e->mode);
    json_array_append_new(data, json_pack("{s:s,s:s,s:I,s:s,s:I}", "path", e->path, "type",
                                          ws_type_name(e->type), "size", (json_int_t)e->size,
                                          "mode", mode, "mtime", (json_int_t)e->mtime));
    return 0;
}

int files_parse_bool(const char *v, bool *out)
{
    if (!v || !strcmp(v, "false") || !strcmp(v, "0") || !*v)
        *out = false;
    else if (!strcmp(v, "true") || !strcmp(v, "1"))
        *out = true;
    else
        return -EINVAL;
    return 0;
}
