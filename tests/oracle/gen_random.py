# SPDX-License-Identifier: MIT
"""Generate tests/test_reference_random.c: seeded pseudo-random scenarios run on
the reference oracle, emitted as C plans plus the normalised expected traces.

    /usr/bin/python3 tests/oracle/gen_random.py            # check the C file is current
    /usr/bin/python3 tests/oracle/gen_random.py --write    # (re)write it

Each scenario mixes yields, worker waits on a small handle pool, direct
enqueues, collective submissions, completions, one all_reduce per rank (wait
or poll mode), sometimes one raising rank, and engine knobs (a wait that
queues more work, sometimes a wait that fails). Where the reference cannot
name a drain failure, the generator applies the documented C edit (the
error_drain line and the message naming code and handle).
"""
import os
import random
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import oracle_lib  # noqa: E402
from oracle_lib import E, H, complete, enq, plan_body, submit, traced  # noqa: E402
from fakectx import do_spawn  # noqa: E402

SEED = 20240611
COUNT = 24
OUT = os.path.join(os.path.dirname(HERE), "test_reference_random.c")
POOL = [f"h:{i}" for i in range(6)]


def make(rng, idx):
    nprocs = rng.randint(1, 6)
    plans = {}
    raiser = rng.randrange(nprocs) if rng.random() < 0.4 else None
    sip = [0]
    for r in range(nprocs):
        n = rng.randint(0, 7)
        acts = []
        for _ in range(n):
            x = rng.random()
            if x < 0.40:
                acts.append(("y",))
            elif x < 0.65:
                acts.append(("w", rng.choice(POOL)))
            elif x < 0.75:
                acts.append(("enq", rng.choice(POOL)))
            elif x < 0.85:
                acts.append(("sub", "c:" + rng.choice(POOL)[2:], sip[0], f"m{sip[0]}"))
                sip[0] += 1
            else:
                acts.append(("done", rng.choice(POOL)))
        acts.insert(rng.randint(0, len(acts)), ("ar", "poll" if rng.random() < 0.3 else "wait"))
        if r == raiser:
            acts.insert(rng.randint(0, len(acts)), ("raise", 10 + r, f"rank {r} fails in scenario {idx}"))
        plans[r] = acts
    knobs = []
    a, b = rng.sample(POOL, 2)
    knobs.append(("enq", a, b))
    if rng.random() < 0.5:
        knobs.append(("sub", rng.choice([h for h in POOL if h != a]), "c:k" + str(idx)))
    if rng.random() < 0.25:
        knobs.append(("fail", rng.choice(POOL + ["c:0", "c:1"]), 40 + idx))
    return nprocs, plans, knobs


def py_action(ctx, act, world):
    k = act[0]
    if k == "y":
        return "y"
    if k == "w":
        return H(act[1])
    if k == "enq":
        return enq(ctx, act[1])
    if k == "sub":
        return submit(ctx, act[1], act[2], act[3])
    if k == "done":
        return complete(ctx, act[1])
    if k == "ar":
        mode = act[1]
        return lambda r: ctx.distributed.all_reduce("ar", world, r + 1, mode)
    if k == "raise":
        return E(act[1])(act[2])
    raise ValueError(act)


def run(nprocs, plans, knobs):
    def scen(ctx):
        be = ctx.distributed._backend
        for kn in knobs:
            if kn[0] == "enq":
                ctx.engine.on_wait[H(kn[1])] = (lambda n: lambda: ctx._pending_worker_waits.append(H(n)))(kn[2])
            elif kn[0] == "sub":
                ctx.engine.on_wait[H(kn[1])] = (
                    lambda n: lambda: be._pending_collective_handles.append((H(n), 99, "mk")))(kn[2])
            elif kn[0] == "fail":
                ctx.engine.fail_on[H(kn[1])] = E(kn[2])("engine fails")
        p = {r: [py_action(ctx, a, nprocs) for a in plans[r]] for r in range(nprocs)}
        do_spawn(ctx, traced(plan_body(ctx, p)), (), nprocs)

    lines = oracle_lib.normalise(oracle_lib.run_one(scen))
    return c_edit(lines)


def c_edit(lines):
    """The reference says 'spawn failed on ranks []' for a drain failure;
    libkbthreads names it (see test_semantics_report.c). Returns the lines,
    or (lines, failed handle, origin text) for a drain failure."""
    if "error ranks=[] first=None code=None" not in lines:
        return lines
    i = lines.index("error ranks=[] first=None code=None")
    # the failed wait is the last engine_wait before the report
    last, origin = None, None
    for j, ln in enumerate(lines[:i]):
        if ln.startswith("engine_wait "):
            last = ln.split(" ")[1]
            origin = ("pending collective" if j > 0 and lines[j - 1].startswith("main_wait ")
                      else "pending worker wait")
    return lines, last, origin


def c_str(s):
    return s.replace("\\", "\\\\").replace('"', '\\"')


def c_act(act):
    k = act[0]
    if k == "y":
        return "FE_Y"
    if k == "w":
        return f'FE_W("{act[1]}")'
    if k == "enq":
        return f'FE_ENQ("{act[1]}")'
    if k == "sub":
        return f'FE_SUBMIT("{act[1]}", {act[2]}, "{act[3]}")'
    if k == "done":
        return f'FE_DONE("{act[1]}")'
    if k == "ar":
        return 'FE_AR_POLL("ar", W)' if act[1] == "poll" else 'FE_AR("ar", W)'
    if k == "raise":
        return f'FE_RAISE({act[1]}, "{c_str(act[2])}")'
    raise ValueError(act)


def generate():
    rng = random.Random(SEED)
    out = []
    out.append(f"""/* SPDX-License-Identifier: MIT */
/*
 * GENERATED by tests/oracle/gen_random.py (seed {SEED}); do not edit: change the
 * generator and run /usr/bin/python3 tests/oracle/gen_random.py --write.
 *
 * {COUNT} seeded pseudo-random scenarios (yields, worker waits on a small
 * handle pool, enqueues, collective submissions, completions, one all_reduce
 * per rank in wait or poll mode, sometimes a raising rank, engine waits that
 * queue more work or fail) run on the reference oracle; each C test runs the
 * same plans in UNWIND and in RETURN cancel mode and must produce the
 * oracle's trace after the normalisation of tests/support/fake_engine.h. A
 * drain failure carries the documented C edit (the report names it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fake_engine.h"

enum knob_kind {{ KN_END = 0, KN_ENQ, KN_SUB, KN_FAIL }};

struct knob {{
    enum knob_kind kind;
    const char *handle;
    const char *other;
    int code;
}};

struct scenario {{
    int nprocs;
    const fe_act *const *plans;
    const struct knob *knobs;
    const char *expect;
}};

static int cb_enqueue(fe *f, kb_handle h, void *arg)
{{
    (void)h;
    return kb_enqueue_wait(f->ctx, fe_h(arg));
}}

static int cb_submit(fe *f, kb_handle h, void *arg)
{{
    (void)h;
    return kb_collective_submit(f->ctx, fe_h(arg), 99, "mk");
}}

static void run(const struct scenario *s, const kb_spawn_opts *opts)
{{
    fe *f = fe_new();
    for (const struct knob *k = s->knobs; k->kind != KN_END; k++) {{
        if (k->kind == KN_ENQ)
            fe_on_wait(f, k->handle, cb_enqueue, (void *)(uintptr_t)k->other);
        else if (k->kind == KN_SUB)
            fe_on_wait(f, k->handle, cb_submit, (void *)(uintptr_t)k->other);
        else
            fe_fail_on(f, k->handle, k->code);
    }}
    int rc = fe_spawn_plans(f, s->plans, s->nprocs, opts);
    tr_assert(s->expect);
    assert_true(rc == 0 || rc == KB_ESPAWN);
    fe_free(f);
}}
""")
    tests = []
    for idx in range(COUNT):
        nprocs, plans, knobs = make(rng, idx)
        res = run(nprocs, plans, knobs)
        lines = res
        if isinstance(res, tuple):
            lines, handle, origin = res
            code = [kn[2] for kn in knobs if kn[0] == "fail"][0]
            fixed = []
            for ln in lines:
                if ln == "error_msg spawn failed on ranks []":
                    fixed.append(f"error_drain code={code} handle={handle}")
                    ln += f": drain failed: engine wait for handle {handle} ({origin}) returned {code}"
                fixed.append(ln)
            lines = fixed
        name = f"s{idx:02d}"
        out.append(f"/* scenario {idx}: nprocs={nprocs} */")
        out.append(f"#define W {nprocs}")
        for r in range(nprocs):
            acts = ", ".join([c_act(a) for a in plans[r]] + ["FE_END"])
            out.append(f"static const fe_act {name}_p{r}[] = {{{acts}}};")
        out.append("#undef W")
        out.append(f"static const fe_act *const {name}_plans[] = {{"
                   + ", ".join(f"{name}_p{r}" for r in range(nprocs)) + "};")
        ks = []
        for kn in knobs:
            if kn[0] == "enq":
                ks.append(f'{{KN_ENQ, "{kn[1]}", "{kn[2]}", 0}}')
            elif kn[0] == "sub":
                ks.append(f'{{KN_SUB, "{kn[1]}", "{kn[2]}", 0}}')
            else:
                ks.append(f'{{KN_FAIL, "{kn[1]}", NULL, {kn[2]}}}')
        ks.append("{KN_END, NULL, NULL, 0}")
        out.append(f"static const struct knob {name}_knobs[] = {{" + ", ".join(ks) + "};")
        out.append(f"static const struct scenario {name} = {{")
        out.append(f"    {nprocs}, {name}_plans, {name}_knobs,")
        for k, ln in enumerate(lines):
            out.append(f'    "{c_str(ln)}\\n"' + ("};" if k == len(lines) - 1 else ""))
        fails = "fails" if any(ln.startswith("spawn_raised") for ln in lines) else "succeeds"
        tname = f"test_random_scenario_{idx:02d}_{fails}"
        out.append(f"""
static void {tname}(void **state)
{{
    (void)state;
    run(&{name}, fe_unwind());
    run(&{name}, fe_return());
}}
""")
        tests.append(tname)
    out.append("int main(void)\n{\n    const struct CMUnitTest tests[] = {")
    for t in tests:
        out.append(f"        cmocka_unit_test({t}),")
    out.append("    };\n    return cmocka_run_group_tests(tests, NULL, NULL);\n}")
    return "\n".join(out) + "\n"


def formatted(text):
    """The text as the repository keeps it: through clang-format."""
    import subprocess
    return subprocess.run(["clang-format", "--assume-filename=" + OUT], input=text, text=True,
                          capture_output=True, check=True).stdout


def main():
    text = formatted(generate())
    if "--write" in sys.argv:
        open(OUT, "w").write(text)
        print(f"wrote {OUT}")
        return
    cur = open(OUT).read() if os.path.exists(OUT) else ""
    if cur != text:
        print(f"{OUT} is out of date")
        sys.exit(1)
    print("up to date")


if __name__ == "__main__":
    main()
