#include "jobs.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util.h"

struct job {
    job_run_fn run;
    job_done_fn done;
    void *data;
    bool ran;
    struct job *next;
};

struct jobs {
    struct loop *loop;
    int efd;
    struct loop_watch *watch;
    pthread_t threads[JOBS_THREADS];
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool stop;
    struct job *queue, *queue_tail; /* waiting to run */
    struct job *finished;           /* ran, waiting for done on the loop */
};

static void *worker(void *arg)
{
    struct jobs *j = arg;
    pthread_mutex_lock(&j->mu);
    for (;;) {
        while (!j->queue && !j->stop)
            pthread_cond_wait(&j->cond, &j->mu);
        if (j->stop)
            break;
        struct job *job = j->queue;
        j->queue = job->next;
        if (!j->queue)
            j->queue_tail = NULL;
        pthread_mutex_unlock(&j->mu);
        job->run(job->data);
        job->ran = true;
        pthread_mutex_lock(&j->mu);
        job->next = j->finished;
        j->finished = job;
        uint64_t one = 1;
        (void)!write(j->efd, &one, sizeof(one));
    }
    pthread_mutex_unlock(&j->mu);
    return NULL;
}

/* Finished jobs, oldest first. */
static struct job *take_finished(struct jobs *j)
{
    pthread_mutex_lock(&j->mu);
    struct job *list = j->finished, *rev = NULL;
    j->finished = NULL;
    pthread_mutex_unlock(&j->mu);
    while (list) {
        struct job *n = list->next;
        list->next = rev;
        rev = list;
        list = n;
    }
    return rev;
}

static void deliver(struct job *list)
{
    while (list) {
        struct job *n = list->next;
        list->done(list->data, list->ran);
        free(list);
        list = n;
    }
}

static void on_event(struct loop *l, int fd, uint32_t events, void *data)
{
    uint64_t v;
    (void)!read(fd, &v, sizeof(v));
    deliver(take_finished(data));
}

int jobs_new(struct loop *l, struct jobs **out, struct sbx_err *err)
{
    struct jobs *j = sbx_xcalloc(1, sizeof(*j));
    j->loop = l;
    j->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (j->efd < 0) {
        free(j);
        return sbx_err_sys(err, errno, "eventfd");
    }
    int r = loop_watch_add(l, j->efd, EPOLLIN, on_event, j, &j->watch);
    if (r < 0) {
        close(j->efd);
        free(j);
        return sbx_err_sys(err, -r, "watching the job pool");
    }
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cond, NULL);
    for (int i = 0; i < JOBS_THREADS; i++) {
        r = pthread_create(&j->threads[i], NULL, worker, j);
        if (r != 0)
            abort(); /* at start-up: nothing sensible to fall back to */
    }
    *out = j;
    return 0;
}

void jobs_submit(struct jobs *j, job_run_fn run, job_done_fn done, void *data)
{
    if (!j) {
        run(data);
        done(data, true);
        return;
    }
    struct job *job = sbx_xcalloc(1, sizeof(*job));
    job->run = run;
    job->done = done;
    job->data = data;
    pthread_mutex_lock(&j->mu);
    if (j->queue_tail)
        j->queue_tail->next = job;
    else
        j->queue = job;
    j->queue_tail = job;
    pthread_cond_signal(&j->cond);
    pthread_mutex_unlock(&j->mu);
}

void jobs_free(struct jobs *j)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->mu);
    j->stop = true;
    pthread_cond_broadcast(&j->cond);
    pthread_mutex_unlock(&j->mu);
    for (int i = 0; i < JOBS_THREADS; i++)
        pthread_join(j->threads[i], NULL);
    deliver(take_finished(j));
    deliver(j->queue);
    loop_watch_del(j->loop, j->watch);
    close(j->efd);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cond);
    free(j);
}
