/* At start: what an upload caught by a kill -9 left behind is removed (docs/files.md). */
#ifndef SBX_FILES_SWEEP_H
#define SBX_FILES_SWEEP_H

struct manager;

void files_sweep_uploads(struct manager *m);

#endif
