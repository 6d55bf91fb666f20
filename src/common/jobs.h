/* A small pool of worker threads for work that would stall the event loop (hashing,
 * MIME detection and virus scans of artifacts). run executes on a worker; done runs
 * afterwards on the loop, woken through an eventfd. Job code must not touch loop-owned
 * state: it gets its own copies of what it needs. */
#ifndef SBX_JOBS_H
#define SBX_JOBS_H

#include <stdbool.h>

#include "err.h"
#include "loop.h"

#define JOBS_THREADS 2

struct jobs;

typedef void (*job_run_fn)(void *data);
/* ran is false when the pool was freed before the job could run. */
typedef void (*job_done_fn)(void *data, bool ran);

int jobs_new(struct loop *l, struct jobs **out, struct sbx_err *err);
/* j NULL: run and done here, before it returns (a caller without a pool). */
void jobs_submit(struct jobs *j, job_run_fn run, job_done_fn done, void *data);
/* Finishes the jobs that are running, then calls done for every job (ran or not). */
void jobs_free(struct jobs *j);

#endif
