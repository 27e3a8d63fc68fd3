/* Recorded schedules: writing (record) and reading (replay). See schedule.h. */
#include "schedule.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "kbthreads.h"

/* The record is kept in memory while the spawn runs (the driver appends at
 * round boundaries) and written by kb_record_close, so recording never
 * changes timing inside a round. */
struct kb_record {
    FILE *f;
    char *buf;
    size_t len, cap;
    int oom;
};

static void append(struct kb_record *r, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void append(struct kb_record *r, const char *fmt, va_list ap)
{
    if (r->oom)
        return;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return;
    if (r->len + (size_t)n + 1 > r->cap) {
        size_t ncap = r->cap ? r->cap : 4096;
        while (ncap < r->len + (size_t)n + 1)
            ncap *= 2;
        char *nb = kb_realloc(r->buf, ncap);
        if (!nb) {
            r->oom = 1;
            return;
        }
        r->buf = nb;
        r->cap = ncap;
    }
    vsnprintf(r->buf + r->len, (size_t)n + 1, fmt, ap);
    r->len += (size_t)n;
}

static void put(struct kb_record *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct kb_record *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    append(r, fmt, ap);
    va_end(ap);
}

int kb_record_open(const char *path, int nprocs, int schedule, uint64_t seed, struct kb_record **out)
{
    struct kb_record *r = kb_calloc(1, sizeof *r);
    if (!r)
        return KB_ENOMEM;
    r->f = fopen(path, "w");
    if (!r->f) {
        int e = errno;
        free(r);
        return -e;
    }
    put(r, "kbthreads-schedule 1\nnprocs %d\n", nprocs);
    if (schedule == KB_SCHED_SEEDED)
        put(r, "schedule seeded %llu\n", (unsigned long long)seed);
    else
        put(r, "schedule round-robin\n");
    *out = r;
    return 0;
}

void kb_record_round(struct kb_record *r, uint64_t round, const int *order, int n)
{
    put(r, "round %llu", (unsigned long long)round);
    for (int i = 0; i < n; i++)
        put(r, " %d", order[i]);
    put(r, "\n");
}

void kb_record_drain(struct kb_record *r, uint64_t round, uint64_t engine_waits)
{
    put(r, "drain %llu %llu\n", (unsigned long long)round, (unsigned long long)engine_waits);
}

void kb_record_end(struct kb_record *r, const char *fmt, ...)
{
    put(r, "end ");
    va_list ap;
    va_start(ap, fmt);
    append(r, fmt, ap);
    va_end(ap);
    put(r, "\n");
}

int kb_record_close(struct kb_record *r)
{
    int rc = 0;
    if (r->oom)
        rc = KB_ENOMEM;
    else if (r->len && fwrite(r->buf, 1, r->len, r->f) != r->len)
        rc = -errno;
    if (fclose(r->f) != 0 && rc == 0)
        rc = -errno;
    free(r->buf);
    free(r);
    return rc;
}

/* ---- replay -------------------------------------------------------------- */

struct kb_replay {
    int nprocs;
    uint64_t nrounds;
    int **orders; /* orders[k]: round k+1 */
    int *lens;
};

void kb_replay_free(struct kb_replay *r)
{
    if (!r)
        return;
    for (uint64_t i = 0; i < r->nrounds; i++)
        free(r->orders[i]);
    free(r->orders);
    free(r->lens);
    free(r);
}

static int add_round(struct kb_replay *r, int *order, int n)
{
    int **no = kb_realloc(r->orders, (r->nrounds + 1) * sizeof *no);
    if (!no)
        return KB_ENOMEM;
    r->orders = no;
    int *nl = kb_realloc(r->lens, (r->nrounds + 1) * sizeof *nl);
    if (!nl)
        return KB_ENOMEM;
    r->lens = nl;
    r->orders[r->nrounds] = order;
    r->lens[r->nrounds] = n;
    r->nrounds++;
    return 0;
}

/* Parse "round K r r r": 0, KB_EINVAL or KB_ENOMEM. */
static int parse_round(struct kb_replay *r, char *rest)
{
    char *end;
    errno = 0;
    unsigned long long k = strtoull(rest, &end, 10);
    if (errno || end == rest || k != r->nrounds + 1 || r->nprocs <= 0)
        return KB_EINVAL;
    int *order = kb_malloc((size_t)r->nprocs * sizeof *order);
    char *seen = kb_calloc((size_t)r->nprocs, 1);
    if (!order || !seen) {
        free(order);
        free(seen);
        return KB_ENOMEM;
    }
    int n = 0;
    for (char *p = end;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0' || *p == '\n')
            break;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= r->nprocs || seen[v] || n == r->nprocs) {
            free(order);
            free(seen);
            return KB_EINVAL;
        }
        seen[v] = 1;
        order[n++] = (int)v;
        p = end;
    }
    free(seen);
    if (n == 0) {
        free(order);
        return KB_EINVAL;
    }
    int rc = add_round(r, order, n);
    if (rc != 0)
        free(order);
    return rc;
}

int kb_replay_open(const char *path, int nprocs, struct kb_replay **out, int *line)
{
    *line = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    struct kb_replay *r = kb_calloc(1, sizeof *r);
    if (!r) {
        fclose(f);
        return KB_ENOMEM;
    }
    r->nprocs = -1;
    char buf[65536];
    int rc = 0, version = 0;
    while (rc == 0 && fgets(buf, sizeof buf, f)) {
        (*line)++;
        if (!strchr(buf, '\n') && !feof(f)) {
            rc = KB_EINVAL; /* a line longer than we read */
            break;
        }
        if (buf[0] == '#' || buf[0] == '\n')
            continue;
        if (!version) {
            if (strcmp(buf, "kbthreads-schedule 1\n") != 0 && strcmp(buf, "kbthreads-schedule 1") != 0)
                rc = KB_EINVAL;
            version = 1;
        } else if (strncmp(buf, "nprocs ", 7) == 0) {
            char *end;
            long n = strtol(buf + 7, &end, 10);
            if (n < 0 || n > 1 << 24 || r->nprocs >= 0 || (*end != '\n' && *end != '\0'))
                rc = KB_EINVAL;
            else
                r->nprocs = (int)n;
        } else if (strncmp(buf, "round ", 6) == 0) {
            rc = parse_round(r, buf + 6);
        }
        /* schedule, drain, end and unknown lines: informational */
    }
    if (rc == 0 && ferror(f))
        rc = -EIO;
    if (rc == 0 && (!version || r->nprocs < 0)) {
        rc = KB_EINVAL;
        (*line)++;
    }
    fclose(f);
    if (rc == 0 && r->nprocs != nprocs)
        rc = KB_EDIVERGED;
    if (rc != 0 && rc != KB_EDIVERGED) {
        kb_replay_free(r);
        return rc;
    }
    *out = r;
    return rc;
}

int kb_replay_nprocs(const struct kb_replay *r)
{
    return r->nprocs;
}

int kb_replay_round(const struct kb_replay *r, uint64_t round, const int **order, int *n)
{
    if (round == 0 || round > r->nrounds)
        return 0;
    *order = r->orders[round - 1];
    *n = r->lens[round - 1];
    return 1;
}

uint64_t kb_replay_rounds(const struct kb_replay *r)
{
    return r->nrounds;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int *kb_replay_sorted(const int *a, int n)
{
    int *s = kb_malloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    if (!s)
        return NULL;
    memcpy(s, a, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_int);
    return s;
}

int kb_replay_same_ranks(const int *a, int na, const int *b, int nb)
{
    if (na != nb)
        return 0;
    int *sa = kb_replay_sorted(a, na), *sb = kb_replay_sorted(b, nb);
    int same = sa && sb && memcmp(sa, sb, (size_t)na * sizeof *sa) == 0;
    free(sa);
    free(sb);
    return same;
}
