/* SPDX-License-Identifier: MIT */
#include "bench_common.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *prog = "bench";

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void bench_emit(const char *bench, const char *impl, int pin, long n, int rep, double value, const char *unit,
                uint64_t ops)
{
    printf("KBR,%s,%s,%d,%ld,%d,%.3f,%s,%llu\n", bench, impl, pin, n, rep, value, unit,
           (unsigned long long)ops);
    fflush(stdout);
}

void bench_info(const char *key, const char *value)
{
    printf("KBI,%s,%s\n", key, value);
    fflush(stdout);
}

void bench_die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static long parse_long(const char *name, const char *v)
{
    if (!v)
        bench_die("%s needs a value", name);
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < 0)
        bench_die("%s: not a non-negative integer: %s", name, v);
    return x;
}

void bench_parse(int argc, char **argv, struct bench_opts *o)
{
    const char *slash = strrchr(argv[0], '/');
    prog = slash ? slash + 1 : argv[0];
    *o = (struct bench_opts){.n = 1, .m = 1000, .reps = 5, .k = 1, .join_ms = -1, .work_ns = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--pin") == 0) {
            o->pin = 1;
        } else if (strcmp(a, "--spread") == 0) {
            o->spread = 1;
        } else if (strcmp(a, "--n") == 0) {
            o->n = parse_long(a, v);
            i++;
        } else if (strcmp(a, "--m") == 0) {
            o->m = parse_long(a, v);
            i++;
        } else if (strcmp(a, "--reps") == 0) {
            o->reps = (int)parse_long(a, v);
            i++;
        } else if (strcmp(a, "--stack") == 0) {
            o->stack = parse_long(a, v);
            i++;
        } else if (strcmp(a, "--k") == 0) {
            o->k = parse_long(a, v);
            i++;
        } else if (strcmp(a, "--join") == 0) {
            o->join_ms = parse_long(a, v);
            i++;
        } else if (strcmp(a, "--work") == 0) {
            o->work_ns = parse_long(a, v);
            i++;
        } else if (a[0] != '-' && !o->mode) {
            o->mode = a;
        } else {
            bench_die("unknown argument %s", a);
        }
    }
    if (o->n < 1 || o->m < 1 || o->k < 1)
        bench_die("--n, --m and --k must be at least 1");
    if (o->work_ns > 1000000000L)
        bench_die("--work: at most 1000000000 ns (one second) per operation");
    if (o->pin && o->spread)
        bench_die("--pin and --spread exclude each other (one CPU for every thread, or a CPU per rank)");
}

int bench_pin_here(void)
{
    int cpu = sched_getcpu();
    if (cpu < 0)
        bench_die("sched_getcpu: %s", strerror(errno));
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    if (rc != 0)
        bench_die("pthread_setaffinity_np: %s", strerror(rc));
    return cpu;
}

long bench_status_kib(const char *field)
{
    return bench_proc_kib("/proc/self/status", field);
}

long bench_proc_kib(const char *path, const char *field)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    size_t len = strlen(field);
    long kib = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = strtol(line + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}
