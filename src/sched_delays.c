/* SPDX-License-Identifier: MIT */
/*
 * KB_SCHED_DELAYS: the option's checks, the environment value's syntax
 * and the process's spawn count (sched_delays.h).
 */
#include "sched_delays.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kbthreads.h"

int kb__delays_ok(const uint64_t *delays, size_t n)
{
    if (n > 0 && !delays)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (delays[i] == 0 || (i > 0 && delays[i] < delays[i - 1]))
            return 0;
    return 1;
}

/* One pass over value: checks every list, and counts (out NULL) or
 * stores (into out) the turns of list `want` (from 1). 0, or KB_EINVAL
 * with why set. */
static int scan(const char *value, int want, uint64_t *out, size_t *n, char *why, size_t cap)
{
    const char *p = value;
    int list = 1;
    uint64_t prev = 0; /* the list's last turn, 0 at its start */
    *n = 0;
    for (;;) {
        if (*p == '\0' || *p == '/') {
            if (*p == '\0')
                return 0;
            list++;
            prev = 0;
            p++;
            continue;
        }
        if (*p < '0' || *p > '9') {
            snprintf(why, cap, "'%c' at character %d is not part of a turn number", *p, (int)(p - value) + 1);
            return KB_EINVAL;
        }
        char *end;
        errno = 0;
        unsigned long long t = strtoull(p, &end, 10);
        if (errno == ERANGE) {
            snprintf(why, cap, "the turn at character %d is too large", (int)(p - value) + 1);
            return KB_EINVAL;
        }
        if (t == 0) {
            snprintf(why, cap, "turn 0 at character %d: turns are numbered from 1", (int)(p - value) + 1);
            return KB_EINVAL;
        }
        if (t < prev) {
            snprintf(why, cap, "turn %llu after turn %llu: a list must be in ascending order", t,
                     (unsigned long long)prev);
            return KB_EINVAL;
        }
        if (list == want) {
            if (out)
                out[*n] = t;
            (*n)++;
        }
        prev = t;
        p = end;
        if (*p == ',') {
            p++;
            if (*p == '\0' || *p == '/' || *p == ',') {
                snprintf(why, cap, "an empty item at character %d", (int)(p - value) + 1);
                return KB_EINVAL;
            }
        } else if (*p != '\0' && *p != '/') {
            snprintf(why, cap, "'%c' at character %d is not part of a turn number", *p, (int)(p - value) + 1);
            return KB_EINVAL;
        }
    }
}

int kb__delays_parse(const char *value, int spawn, uint64_t **turns, size_t *n, char *why, size_t cap)
{
    *turns = NULL;
    int rc = scan(value, spawn, NULL, n, why, cap);
    if (rc != 0 || *n == 0)
        return rc;
    *turns = kb__malloc(*n * sizeof **turns);
    if (!*turns)
        return KB_ENOMEM;
    return scan(value, spawn, *turns, n, why, cap);
}

/* The value the spawns were counted for, by its FNV-1a hash and length
 * (no copy to keep), and how many spawns took it. */
static struct {
    pthread_mutex_t lock;
    uint64_t hash;
    size_t len;
    int spawns;
} env_delays = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0};

static uint64_t fnv1a(const char *s, size_t *len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    size_t n = 0;
    for (; s[n]; n++)
        h = (h ^ (unsigned char)s[n]) * 0x100000001b3ull;
    *len = n;
    return h;
}

int kb__delays_env_spawn(const char *value)
{
    size_t len;
    uint64_t h = fnv1a(value, &len);
    pthread_mutex_lock(&env_delays.lock);
    if (env_delays.spawns == 0 || env_delays.hash != h || env_delays.len != len) {
        env_delays.hash = h;
        env_delays.len = len;
        env_delays.spawns = 0;
    }
    int k = ++env_delays.spawns;
    pthread_mutex_unlock(&env_delays.lock);
    return k;
}
