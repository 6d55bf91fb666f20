#include "killlog.h"

#include <string.h>

void killlog_add(struct killlog *l, pid_t pid, pid_t group, long long now_ms)
{
    if (l->n == KILLLOG_MAX) {
        memmove(l->e, l->e + 1, (KILLLOG_MAX - 1) * sizeof(l->e[0]));
        l->n--;
    }
    l->e[l->n].pid = pid;
    l->e[l->n].group = group;
    l->e[l->n++].ms = now_ms;
}

bool killlog_claim(struct killlog *l, pid_t group, pid_t pid, long long since_ms)
{
    bool found = false;
    for (unsigned i = 0; i < l->n;) {
        if ((group > 0 && l->e[i].group == group) || (pid > 0 && l->e[i].pid == pid)) {
            found |= l->e[i].ms >= since_ms;
            memmove(l->e + i, l->e + i + 1, (l->n - i - 1) * sizeof(l->e[0]));
            l->n--;
        } else {
            i++;
        }
    }
    return found;
}
