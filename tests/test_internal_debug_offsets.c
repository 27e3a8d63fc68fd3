/* SPDX-License-Identifier: MIT */
/*
 * The debug descriptor (src/debug_offsets.h), which tools read instead of
 * debug info: its header describes this build, each entry is the real
 * struct's offset and size, its constants are the library's, and its
 * registry pointers and generation behave as the contract in
 * docs/debugging.md says.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "debug_offsets.h"
#include "rank.h"
#include "run.h"

static const struct kb_debug_field *entry(const char *name)
{
    for (uint32_t i = 0; i < kb_debug_offsets.nfields; i++)
        if (strncmp(kb_debug_offsets.fields[i].name, name, KB_DEBUG_NAME_MAX) == 0)
            return &kb_debug_offsets.fields[i];
    return NULL;
}

static void test_the_header_describes_this_build(void **state)
{
    (void)state;
    assert_memory_equal(kb_debug_offsets.magic, "kbdebug", 8);
    assert_int_equal(kb_debug_offsets.version, 2);
    assert_int_equal(kb_debug_offsets.header_size, offsetof(struct kb_debug_offsets, fields));
    assert_int_equal(kb_debug_offsets.header_size, 48); /* the layout docs/debugging.md gives */
    assert_int_equal(kb_debug_offsets.field_size, 32);
    assert_int_equal(kb_debug_offsets.nfields, KB_DEBUG_NFIELDS);
    assert_int_equal(kb_debug_offsets.pointer_size, sizeof(void *));
    assert_int_equal(kb_debug_offsets.reserved, 0);
}

/* Every name is NUL-terminated and unique; every field lies inside its
 * struct, whose size entry exists; fields are 4 or 8 bytes, or a queue. */
static void test_every_entry_is_unique_and_inside_its_struct(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < kb_debug_offsets.nfields; i++) {
        const struct kb_debug_field *f = &kb_debug_offsets.fields[i];
        assert_non_null(memchr(f->name, '\0', KB_DEBUG_NAME_MAX));
        assert_ptr_equal(entry(f->name), f);
        const char *dot = strchr(f->name, '.');
        if (dot == NULL || strncmp(f->name, "value.", 6) == 0)
            continue;
        char kind[KB_DEBUG_NAME_MAX] = "";
        memcpy(kind, f->name, (size_t)(dot - f->name));
        const struct kb_debug_field *whole = entry(kind);
        assert_non_null(whole);
        assert_true(f->offset + f->size <= whole->size);
        assert_true(f->size == 4 || f->size == 8 || f->size == sizeof(struct kb_queue));
    }
}

#define ASSERT_FIELD(name, type, field)                                                                      \
    do {                                                                                                     \
        const struct kb_debug_field *f = entry(name);                                                        \
        assert_non_null(f);                                                                                  \
        assert_int_equal(f->offset, offsetof(type, field));                                                  \
        assert_int_equal(f->size, sizeof(((type *)0)->field));                                               \
    } while (0)

/* The fields a reader walks the runs by, against the structs of src/. */
static void test_the_walked_fields_are_where_the_structs_have_them(void **state)
{
    (void)state;
    ASSERT_FIELD("run.reg_next", struct kb_run, registry.next);
    ASSERT_FIELD("run.ranks", struct kb_run, ranks);
    ASSERT_FIELD("run.nprocs", struct kb_run, nprocs);
    ASSERT_FIELD("run.holder", struct kb_run, holder);
    ASSERT_FIELD("run.ctx", struct kb_run, ctx);
    ASSERT_FIELD("run.errors", struct kb_run, failure.errors);
    ASSERT_FIELD("rank.state", struct kb_rank, state);
    ASSERT_FIELD("rank.susp", struct kb_rank, susp);
    ASSERT_FIELD("rank.susp_handle", struct kb_rank, susp_handle);
    ASSERT_FIELD("rank.tid", struct kb_rank, tid);
    ASSERT_FIELD("rank.w", struct kb_rank, w);
    ASSERT_FIELD("worker.tid", struct kb_worker, tid);
    ASSERT_FIELD("ctx.waits", struct kb_ctx, waits);
    ASSERT_FIELD("queue.len", struct kb_queue, len);
    ASSERT_FIELD("collective.meta", kb_collective, meta);
    ASSERT_FIELD("rank_error.message", kb_rank_error, message);
    assert_int_equal(entry("run")->size, sizeof(struct kb_run));
    assert_int_equal(entry("rank")->size, sizeof(struct kb_rank));
    assert_int_equal(entry("handle")->size, sizeof(kb_handle));
}

static void test_the_constants_are_the_librarys(void **state)
{
    (void)state;
    assert_int_equal((int32_t)entry("value.KB_DRIVER")->offset, KB_DRIVER);
    assert_int_equal(entry("value.KB_DRIVER")->size, 0);
    assert_int_equal(entry("value.KB_RS_FINISHED")->offset, KB_RS_FINISHED);
    assert_int_equal(entry("value.KB_SUSP_BARRIER")->offset, KB_SUSP_BARRIER);
    assert_int_equal(entry("value.KB_CANCEL_RETURN")->offset, KB_CANCEL_RETURN);
}

static unsigned gen_seen_by_rank;
static struct kb_run *head_seen_by_rank, *own_run;

static int look_at_the_registry(int rank, void *arg)
{
    (void)rank;
    (void)arg;
    gen_seen_by_rank = kb_debug_offsets.live_runs_gen->sequence;
    head_seen_by_rank = *kb_debug_offsets.live_runs;
    own_run = kb__self()->run;
    return 0;
}

/* The head pointer is the registry, whose newest run is the live spawn;
 * the generation is even at rest and moves by 2 when a run is added and
 * by 2 when it is removed. */
static void test_the_registry_pointers_and_generation(void **state)
{
    (void)state;
    assert_ptr_equal(kb_debug_offsets.live_runs, &kb_live_runs);
    assert_ptr_equal(kb_debug_offsets.live_runs_gen, &kb_live_runs_gen);
    kb_ctx *ctx;
    assert_int_equal(kb_ctx_create(NULL, &ctx), 0);
    unsigned before = kb_live_runs_gen.sequence;
    assert_int_equal(before % 2, 0);
    assert_int_equal(kb_spawn(ctx, look_at_the_registry, NULL, 1, NULL, NULL), 0);
    assert_int_equal(gen_seen_by_rank, before + 2);
    assert_ptr_equal(head_seen_by_rank, own_run);
    assert_int_equal(kb_live_runs_gen.sequence, before + 4);
    assert_null(kb_live_runs);
    assert_int_equal(kb_ctx_destroy(ctx), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_header_describes_this_build),
        cmocka_unit_test(test_every_entry_is_unique_and_inside_its_struct),
        cmocka_unit_test(test_the_walked_fields_are_where_the_structs_have_them),
        cmocka_unit_test(test_the_constants_are_the_librarys),
        cmocka_unit_test(test_the_registry_pointers_and_generation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
