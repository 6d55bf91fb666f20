/* A skill bundle: a zip (or tar) archive read with libarchive and unpacked beneath a fresh
 * directory. Everything in it is untrusted: absolute paths, "..", symlinks, hard links,
 * devices and anything but regular files and directories are refused, and so are too
 * many entries, too much data and a compression ratio no real bundle has (a zip bomb),
 * each bound checked while reading, before the bytes are written. */
#ifndef SBX_SKILLS_BUNDLE_H
#define SBX_SKILLS_BUNDLE_H

#include <stdint.h>

#include "../../common/err.h"

#define BUNDLE_UPLOAD_MAX (20u * 1024u * 1024u) /* the archive itself */
#define BUNDLE_ENTRIES_MAX 1000
#define BUNDLE_FILE_MAX (10u * 1024u * 1024u)
#define BUNDLE_TOTAL_MAX (50u * 1024u * 1024u)
#define BUNDLE_RATIO_MAX 100 /* unpacked bytes per archive byte */

/* Unpack the archive read from fd (from offset 0) beneath dest (an O_PATH directory fd,
 * empty). Errors: invalid_bundle (not an archive, a refused entry), bundle_too_large. */
int bundle_unpack(int fd, int dest, struct sbx_err *err);

#endif
