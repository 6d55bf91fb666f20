#include "stream.h"

#include <errno.h>

#include "agent.h"

/* At most AGENT_MAX_STREAMS live streams, so a linear table is simplest and fast enough. */

int stream_register(struct agent *a, struct stream *s)
{
    if (stream_find(a, s->id))
        return -EEXIST;
    if (a->nstreams >= AGENT_MAX_STREAMS)
        return -ENOSPC;
    a->streams[a->nstreams++] = s;
    return 0;
}

void stream_unregister(struct agent *a, struct stream *s)
{
    for (unsigned i = 0; i < a->nstreams; i++) {
        if (a->streams[i] == s) {
            a->streams[i] = a->streams[--a->nstreams];
            a->streams[a->nstreams] = NULL;
            return;
        }
    }
}

struct stream *stream_find(struct agent *a, uint32_t id)
{
    for (unsigned i = 0; i < a->nstreams; i++)
        if (a->streams[i]->id == id)
            return a->streams[i];
    return NULL;
}

struct stream *stream_find_pid(struct agent *a, pid_t pid)
{
    for (unsigned i = 0; i < a->nstreams; i++)
        if (a->streams[i]->pid == pid)
            return a->streams[i];
    return NULL;
}

void stream_abort_all(struct agent *a)
{
    /* abort unregisters, which moves the last entry into the freed slot. */
    while (a->nstreams > 0)
        a->streams[a->nstreams - 1]->ops->abort(a->streams[a->nstreams - 1]);
}

void agent_resume_streams(struct agent *a)
{
    /* resume never ends a stream, so the table is stable while we walk it. */
    for (unsigned i = 0; i < a->nstreams; i++)
        if (a->streams[i]->ops->resume)
            a->streams[i]->ops->resume(a->streams[i]);
}
