/* Workspace quota images made ahead: a create takes one that is already cloned, attached
 * to a loop device, mounted and emptied (wsimage_mount's ~5-10 ms, most of it waiting on
 * the kernel) and only bind-mounts it in place. Worker threads refill the pool off the
 * event loop. The quota is the same: each image is the template's clone, of its size.
 * Ready images live under <data_dir>/wspool/, mounted on <n>/ with their file <n>.img;
 * what a previous daemon left there is unmounted and removed at start. */
#ifndef SBX_WSPOOL_H
#define SBX_WSPOOL_H

#include "../../common/err.h"
#include "../../common/jobs.h"

#define WSPOOL_SIZE 2

struct wspool;

/* Fills run on j, which must outlive the pool's fills (jobs_free before wspool_free). */
int wspool_new(struct jobs *j, const char *data_dir, const char *template_path, struct wspool **out,
               struct sbx_err *err);
/* Mount a ready image on mountpoint (nosuid,nodev, empty) and move its file to image.
 * -ENOENT, err untouched, when none is ready: the caller runs wsimage_mount itself. */
int wspool_take(struct wspool *p, const char *image, const char *mountpoint, struct sbx_err *err);
/* Unmounts and removes the images not taken (after jobs_free: fills that ran are ready). */
void wspool_free(struct wspool *p);

#endif
