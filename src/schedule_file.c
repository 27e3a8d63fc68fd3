/* SPDX-License-Identifier: MIT */
/* The schedule file: writing a recording (record) and reading one back
 * (replay). See schedule_file.h; the replay checks are replay_check.c. */
#include "schedule_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "kbthreads.h"
#include "strbuf.h"

/* The record is written as the spawn runs: lines are appended to a buffer
 * by the baton holder (the driver, or the rank running a round boundary)
 * and written out with one write(2) when a round begins (kb__record_flush),
 * so a process that crashes or is killed leaves every round it started on
 * disk, and nothing is written inside a round. */
struct kb_record {
    int fd;
    struct kb_strbuf buf; /* what the next flush writes */
    int err;              /* the first write error, a negative errno */
};

static void put(struct kb_record *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct kb_record *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kb__strbuf_vaddf(&r->buf, fmt, ap);
    va_end(ap);
}

int kb__record_open(const char *path, int append_to, int spawn, int nprocs, const char *schedule,
                    struct kb_record **out)
{
    struct kb_record *r = kb__calloc(1, sizeof *r);
    if (!r)
        return KB_ENOMEM;
    r->fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (append_to ? O_APPEND : O_TRUNC), 0666);
    if (r->fd < 0) {
        int e = errno;
        free(r);
        return -e;
    }
    put(r, "kbthreads-schedule 1\n");
    if (spawn > 0)
        put(r, "spawn %d\n", spawn);
    put(r, "nprocs %d\nschedule %s\n", nprocs, schedule);
    kb__record_flush(r);
    *out = r;
    return 0;
}

void kb__record_flush(struct kb_record *r)
{
    for (size_t off = 0; off < r->buf.len && !r->err;) {
        ssize_t n = write(r->fd, r->buf.s + off, r->buf.len - off);
        if (n < 0 && errno != EINTR)
            r->err = -errno;
        else if (n > 0)
            off += (size_t)n;
    }
    r->buf.len = 0;
}

void kb__record_round(struct kb_record *r, uint64_t round, const int *order, int n)
{
    put(r, "round %llu", (unsigned long long)round);
    for (int i = 0; i < n; i++)
        put(r, " %d", order[i]);
    put(r, "\n");
}

void kb__record_drain(struct kb_record *r, uint64_t round, uint64_t engine_waits)
{
    put(r, "drain %llu %llu\n", (unsigned long long)round, (unsigned long long)engine_waits);
}

void kb__record_end(struct kb_record *r, const char *fmt, ...)
{
    put(r, "end ");
    va_list ap;
    va_start(ap, fmt);
    kb__strbuf_vaddf(&r->buf, fmt, ap);
    va_end(ap);
    put(r, "\n");
}

int kb__record_close(struct kb_record *r)
{
    if (!r->buf.failed)
        kb__record_flush(r);
    int rc = r->buf.failed ? KB_ENOMEM : r->err;
    if (close(r->fd) != 0 && rc == 0)
        rc = -errno;
    kb__strbuf_free(&r->buf);
    free(r);
    return rc;
}

/* ---- replay -------------------------------------------------------------- */

/* One recording (a section of a file: docs/scheduling.md). */
struct kb_replay {
    int nprocs;
    int partial;  /* a "partial" line: see kb__replay_partial */
    int numbered; /* a "spawn" line: one of a process's several recordings */
    uint64_t nrounds;
    uint64_t *nums; /* nums[i]: the round number orders[i] is for */
    int **orders;
    int *lens;
};

void kb__replay_free(struct kb_replay *r)
{
    if (!r)
        return;
    for (uint64_t i = 0; i < r->nrounds; i++)
        free(r->orders[i]);
    free(r->orders);
    free(r->lens);
    free(r->nums);
    free(r);
}

static int add_round(struct kb_replay *r, uint64_t num, int *order, int n)
{
    int **no = kb__realloc(r->orders, (r->nrounds + 1) * sizeof *no);
    if (!no)
        return KB_ENOMEM;
    r->orders = no;
    int *nl = kb__realloc(r->lens, (r->nrounds + 1) * sizeof *nl);
    if (!nl)
        return KB_ENOMEM;
    r->lens = nl;
    uint64_t *nn = kb__realloc(r->nums, (r->nrounds + 1) * sizeof *nn);
    if (!nn)
        return KB_ENOMEM;
    r->nums = nn;
    r->orders[r->nrounds] = order;
    r->lens[r->nrounds] = n;
    r->nums[r->nrounds] = num;
    r->nrounds++;
    return 0;
}

/* Parse "round K r r r": 0, KB_EINVAL or KB_ENOMEM. A full recording
 * numbers its rounds from 1 without gaps; a partial one in rising order. */
static int parse_round(struct kb_replay *r, char *rest)
{
    char *end;
    errno = 0;
    unsigned long long k = strtoull(rest, &end, 10);
    uint64_t last = r->nrounds ? r->nums[r->nrounds - 1] : 0;
    if (errno || end == rest || r->nprocs <= 0 || (r->partial ? k <= last : k != last + 1))
        return KB_EINVAL;
    int *order = kb__malloc((size_t)r->nprocs * sizeof *order);
    char *seen = kb__calloc((size_t)r->nprocs, 1);
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
    int rc = add_round(r, (uint64_t)k, order, n);
    if (rc != 0)
        free(order);
    return rc;
}

static int is_header(const char *buf)
{
    return strcmp(buf, "kbthreads-schedule 1\n") == 0 || strcmp(buf, "kbthreads-schedule 1") == 0;
}

/* One line of a recording's body into r: 0, KB_EINVAL or KB_ENOMEM. */
static int parse_line(struct kb_replay *r, char *buf)
{
    if (strncmp(buf, "nprocs ", 7) == 0) {
        char *end;
        long n = strtol(buf + 7, &end, 10);
        if (n < 0 || n > 1 << 24 || r->nprocs >= 0 || (*end != '\n' && *end != '\0'))
            return KB_EINVAL;
        r->nprocs = (int)n;
        return 0;
    }
    if (strcmp(buf, "partial\n") == 0 || strcmp(buf, "partial") == 0) {
        r->partial = 1;
        return 0;
    }
    if (strncmp(buf, "spawn ", 6) == 0)
        r->numbered = 1;
    if (strncmp(buf, "round ", 6) == 0)
        return parse_round(r, buf + 6);
    return 0; /* spawn, schedule, drain, end and unknown lines: informational */
}

struct sections {
    struct kb_replay **v;
    int n;
};

static void sections_free(struct sections *s)
{
    for (int i = 0; i < s->n; i++)
        kb__replay_free(s->v[i]);
    free(s->v);
}

static int new_section(struct sections *s)
{
    struct kb_replay **nv = kb__realloc(s->v, (size_t)(s->n + 1) * sizeof *nv);
    if (!nv)
        return KB_ENOMEM;
    s->v = nv;
    if (!(s->v[s->n] = kb__calloc(1, sizeof **s->v)))
        return KB_ENOMEM;
    s->v[s->n++]->nprocs = -1;
    return 0;
}

/* Every recording of the file, each begun by its header line. */
static int read_sections(FILE *f, struct sections *s, int *line)
{
    char buf[65536];
    int rc = 0;
    while (rc == 0 && fgets(buf, sizeof buf, f)) {
        (*line)++;
        if (!strchr(buf, '\n') && !feof(f))
            return KB_EINVAL; /* a line longer than we read */
        if (buf[0] == '#' || buf[0] == '\n')
            continue;
        if (is_header(buf)) {
            if (s->n > 0 && s->v[s->n - 1]->nprocs < 0)
                return KB_EINVAL; /* the previous one had no nprocs */
            rc = new_section(s);
        } else if (s->n == 0) {
            rc = KB_EINVAL;
        } else {
            rc = parse_line(s->v[s->n - 1], buf);
        }
    }
    if (rc == 0 && ferror(f))
        return -EIO;
    if (rc == 0 && (s->n == 0 || s->v[s->n - 1]->nprocs < 0)) {
        (*line)++;
        return KB_EINVAL;
    }
    return rc;
}

int kb__replay_open(const char *path, int nprocs, int spawn, struct kb_replay **out, int *line)
{
    *line = 0;
    *out = NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return -errno;
    struct sections s = {0};
    int rc = read_sections(f, &s, line);
    fclose(f);
    if (rc != 0) {
        sections_free(&s);
        return rc;
    }
    /* One recording without a "spawn" line serves every spawn; otherwise
     * spawn k gets the k-th. */
    int k = (s.n == 1 && !s.v[0]->numbered) || spawn < 1 ? 0 : spawn - 1;
    if (k >= s.n) {
        /* Past the last: round-robin after a partial schedule, else a
         * program that spawns more often than the recorded one did. */
        rc = s.v[s.n - 1]->partial ? 0 : KB_EDIVERGED;
        *line = s.n;
    } else {
        *out = s.v[k];
        s.v[k] = NULL;
        rc = (*out)->nprocs == nprocs ? 0 : KB_EDIVERGED;
    }
    sections_free(&s);
    return rc;
}

int kb__replay_partial(const struct kb_replay *r)
{
    return r->partial;
}

int kb__replay_nprocs(const struct kb_replay *r)
{
    return r->nprocs;
}

int kb__replay_round(const struct kb_replay *r, uint64_t round, const int **order, int *n)
{
    uint64_t lo = 0, hi = r->nrounds; /* the first entry numbered >= round */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (r->nums[mid] < round)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == r->nrounds || r->nums[lo] != round)
        return 0;
    *order = r->orders[lo];
    *n = r->lens[lo];
    return 1;
}

uint64_t kb__replay_rounds(const struct kb_replay *r)
{
    return r->nrounds;
}
