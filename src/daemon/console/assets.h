/* The console's files (src/daemon/console/web/ and the pinned npm packages it uses),
 * compiled into sbxd at build time by scripts/console-assets.py (build/gen/console_assets.c):
 * nothing is read from disk or fetched when a browser asks for them. */
#ifndef SBX_CONSOLE_ASSETS_H
#define SBX_CONSOLE_ASSETS_H

#include <stddef.h>

struct console_asset {
    const char *path; /* below /console/, such as "app.js" */
    const char *content_type;
    const unsigned char *data;
    size_t len;
};

extern const struct console_asset console_assets[];
extern const size_t console_assets_n;

/* The asset served at /console/<path>, or NULL. */
const struct console_asset *console_asset_find(const char *path);

#endif
