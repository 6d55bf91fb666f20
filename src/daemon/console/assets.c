#include "assets.h"

#include <string.h>

const struct console_asset *console_asset_find(const char *path)
{
    for (size_t i = 0; i < console_assets_n; i++)
        if (!strcmp(console_assets[i].path, path))
            return &console_assets[i];
    return NULL;
}
