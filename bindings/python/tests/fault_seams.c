/* SPDX-License-Identifier: MIT */
/*
 * The fault-injection variant of the binding's compiled part (tests only,
 * fault_accel.cmake): kbthreads/_accel*.c linked with the library built
 * with KB_FAULT_INJECTION, plus this file, whose functions
 * test_fault_injection.py calls through ctypes:
 *
 *   kbpyfault_arm(kind, nth)  the library's seam (src/fault.h): the nth
 *                             call of that kind from now fails; 0 disarms
 *   kbpyfault_calls(kind)     calls of that kind since the last arm
 *   kbpyfault_site()          where the extension made the allocation that
 *                             failed last (kind 100): an offset in this
 *                             module, for addr2line
 *
 * and the same for the allocations this extension makes through Python's
 * allocators (kind KBPYFAULT_PYTHON = 100): kbpyfault_install() wraps
 * Python's three allocator domains once; an allocation is counted when,
 * walking its C stack from the allocator outwards, a frame of this module
 * (the extension's code, or the library's calling back into it) comes
 * before any of:
 *   - _PyEval_EvalFrameDefault: Python code runs (a rank's body, the
 *     engine's wait, the package's own Python): its allocations are the
 *     program's, not the extension's;
 *   - PyGILState_Ensure: CPython aborts the process (Py_FatalError) when it
 *     cannot allocate a new thread's state; nothing the extension could
 *     handle.
 * So the counted allocations are the extension's own PyMem_* calls and
 * those of the C API functions it calls (objects, dicts, tuples,
 * exceptions, the frame of a Python function it calls).
 */
#define _GNU_SOURCE
#include <Python.h>

#include <dlfcn.h>
#include <execinfo.h>
#include <link.h>
#include <string.h>

#define KB_FAULT_INJECTION 1
#include "fault.h"

#define KBPYFAULT_PYTHON 100
#define EXPORT           __attribute__((visibility("default")))
#define MAX_FRAMES       48

EXPORT void kbpyfault_arm(int kind, long nth);
EXPORT long kbpyfault_calls(int kind);
EXPORT int kbpyfault_install(void);
EXPORT long kbpyfault_site(void);

static PyMemAllocatorEx orig[3];
static void *self_base; /* where this module is loaded */
static long py_calls;   /* counted allocations since the last arm */
static long py_at;      /* which one fails; 0: none */
static int py_armed;
static long py_site; /* where the failed allocation was made: an offset in this module */
static const void *eval_start, *gil_start; /* the two stops, and their sizes */
static size_t eval_size, gil_size;

static int in_function(const void *pc, const void *start, size_t size)
{
    return start && (const char *)pc >= (const char *)start && (const char *)pc < (const char *)start + size;
}

/* 1 if this allocation is the extension's (see above); ra: the
 * allocator hook's return address, where the walk starts (the hook may be
 * reached by a tail call, so its caller's frame is not always there). */
static int counted(const void *ra, const void **site)
{
    void *pcs[MAX_FRAMES];
    int n = backtrace(pcs, MAX_FRAMES);
    int i = 0;
    while (i < n && pcs[i] != ra)
        i++;
    for (; i < n; i++) {
        const void *pc = (const char *)pcs[i] - 1; /* inside the call instruction */
        Dl_info info;
        if (in_function(pc, eval_start, eval_size) || in_function(pc, gil_start, gil_size))
            return 0;
        if (dladdr(pc, &info) && info.dli_fbase == self_base) {
            *site = pc;
            return 1;
        }
    }
    return 0;
}

static int fail_now(const void *ra)
{
    const void *site = NULL;
    if (!__atomic_load_n(&py_armed, __ATOMIC_ACQUIRE) || !counted(ra, &site))
        return 0;
    long k = __atomic_add_fetch(&py_calls, 1, __ATOMIC_ACQ_REL);
    if (k != __atomic_load_n(&py_at, __ATOMIC_ACQUIRE))
        return 0;
    __atomic_store_n(&py_site, (long)((const char *)site - (const char *)self_base), __ATOMIC_RELEASE);
    return 1;
}

static void *hook_malloc(void *ctx, size_t size)
{
    PyMemAllocatorEx *a = ctx;
    return fail_now(__builtin_return_address(0)) ? NULL : a->malloc(a->ctx, size);
}

static void *hook_calloc(void *ctx, size_t nelem, size_t elsize)
{
    PyMemAllocatorEx *a = ctx;
    return fail_now(__builtin_return_address(0)) ? NULL : a->calloc(a->ctx, nelem, elsize);
}

static void *hook_realloc(void *ctx, void *ptr, size_t size)
{
    PyMemAllocatorEx *a = ctx;
    return fail_now(__builtin_return_address(0)) ? NULL : a->realloc(a->ctx, ptr, size);
}

static void hook_free(void *ctx, void *ptr)
{
    PyMemAllocatorEx *a = ctx;
    a->free(a->ctx, ptr);
}

/* start and size of an exported function of the interpreter, by name */
static void function_of(const char *name, const void **start, size_t *size)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (p && dladdr1(p, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size) {
        *start = p;
        *size = sym->st_size;
    }
}

int kbpyfault_install(void)
{
    if (self_base)
        return 0;
    Dl_info info;
    if (!dladdr((void *)kbpyfault_install, &info))
        return -1;
    self_base = info.dli_fbase;
    function_of("_PyEval_EvalFrameDefault", &eval_start, &eval_size);
    function_of("PyGILState_Ensure", &gil_start, &gil_size);
    if (!eval_start || !gil_start)
        return -2;
    void *warm[4];
    backtrace(warm, 4); /* loads the unwinder now, not inside an allocator */
    static const PyMemAllocatorDomain domains[3] = {PYMEM_DOMAIN_RAW, PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};
    for (int d = 0; d < 3; d++) {
        PyMem_GetAllocator(domains[d], &orig[d]);
        PyMemAllocatorEx hook = {&orig[d], hook_malloc, hook_calloc, hook_realloc, hook_free};
        PyMem_SetAllocator(domains[d], &hook);
    }
    return 0;
}

void kbpyfault_arm(int kind, long nth)
{
    if (kind == KBPYFAULT_PYTHON) {
        __atomic_store_n(&py_armed, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&py_calls, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&py_at, nth, __ATOMIC_RELEASE);
        __atomic_store_n(&py_armed, nth != 0, __ATOMIC_RELEASE);
        return;
    }
    kb__fault_arm((enum kb_fault_kind)kind, nth);
}

long kbpyfault_site(void)
{
    return __atomic_load_n(&py_site, __ATOMIC_ACQUIRE);
}

long kbpyfault_calls(int kind)
{
    if (kind == KBPYFAULT_PYTHON)
        return __atomic_load_n(&py_calls, __ATOMIC_ACQUIRE);
    return kb__fault_calls((enum kb_fault_kind)kind);
}
