# SPDX-License-Identifier: MIT
"""Expected traces of the programs in scenarios.py.

REFERENCE_TRACES were printed by the greenlet reference: the reference spawn
module, unchanged, run by the oracle harness (fakectx.py) on the same
programs (each s_* function run with the oracle's fakectx in place of
kbfake), with Debian's python3-greenlet 2.0.2. They were recorded once,
outside this repository, and pasted here (nothing here needs the reference
or greenlet at test time; test_reference_on_greenlet.py runs the reference
again on the interpreter's greenlet, greenlet 3 in the test venv, where the
reference is beside the checkout, and finds them unchanged, normalised as
below by the same rules). The recorder normalised three things the library
cannot show, as the C tests' oracle normaliser (tests/oracle/oracle_lib.py)
does:

  wait_done R H switches=K   ->  wait_done R H   (the library does not count
                                                  a waiting rank's switches)
  the drain's phase (b) fast path (the reference calls ctx.wait(h) for a
  collective whose handle phase (a) already completed; libkbthreads checks
  that inside the library, so no Python code runs)   ->  no line
  lines between 'teardown' and 'teardown_done' (greenlet garbage collection)
                             ->  dropped

DIFFERENCES lists, per scenario, the reference lines the binding prints
differently on purpose (each pair: reference line, binding line).

JOIN_ROUNDS: the s_sliced_* programs run with join=False and
join(timeout=0) until done, printing 'join_round' after every round that did
not finish; without those lines the trace is the reference's (which ignores
join). The list names the line before each 'join_round'.

BINDING_TRACES: programs the reference has no answer for (b_* in
scenarios.py): each trace was derived from the rules in
../shared/reference/SEMANTICS.md and docs/design.md, and the comment above
it says where it departs from what the reference does.
"""

REFERENCE_TRACES = {
    's02_nprocs4_yields3': """\
spawn_begin nprocs=4
bind 0
bind 1
bind 2
bind 3
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
start 3
step 3 0
step 0 1
step 1 1
step 2 1
step 3 1
step 0 2
step 1 2
step 2 2
step 3 2
end 0
finally 0
end 1
finally 1
end 2
finally 2
end 3
finally 3
spawn_return None
post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    's04_worker_waits_fifo': """\
spawn_begin nprocs=4
bind 0
bind 1
bind 2
bind 3
start 0
step 0 0
wait_enqueue 0 h:40
start 1
step 1 0
wait_enqueue 1 h:30
start 2
step 2 0
wait_enqueue 2 h:20
start 3
step 3 0
wait_enqueue 3 h:10
engine_wait h:40
engine_wait h:30
engine_wait h:20
engine_wait h:10
wait_done 0 h:40
step 0 1
wait_done 1 h:30
step 1 1
wait_enqueue 1 h:7
wait_done 2 h:20
step 2 1
wait_enqueue 2 h:shared
wait_done 3 h:10
step 3 1
wait_enqueue 3 h:shared
engine_wait h:7
engine_wait h:shared
step 0 2
wait_fast 0 h:10
end 0
finally 0
wait_done 1 h:7
end 1
finally 1
wait_done 2 h:shared
end 2
finally 2
wait_done 3 h:shared
step 3 2
end 3
finally 3
spawn_return None
post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[h:10,h:20,h:30,h:40,h:7,h:shared]
spawn_end
teardown
teardown_done leaked=[]
""",
    's06_allreduce4': """\
spawn_begin nprocs=4
bind 0
bind 1
bind 2
bind 3
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
start 3
step 3 0
step 0 1
coll_arrive 0 ar0 n=1/4
step 1 1
coll_arrive 1 ar0 n=2/4
step 2 1
coll_arrive 2 ar0 n=3/4
step 3 1
coll_arrive 3 ar0 n=4/4
coll_issue 3 coll:ar0 sip=0
wait_enqueue 3 coll:ar0
engine_wait coll:ar0
wait_fast 0 coll:ar0
coll_done 0 ar0 result=10
step 0 2
wait_fast 1 coll:ar0
coll_done 1 ar0 result=10
step 1 2
wait_fast 2 coll:ar0
coll_done 2 ar0 result=10
step 2 2
wait_done 3 coll:ar0
coll_done 3 ar0 result=10
step 3 2
step 0 3
step 1 3
step 2 3
step 3 3
end 0
finally 0
end 1
finally 1
end 2
finally 2
end 3
finally 3
spawn_return None
post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[coll:ar0]
spawn_end
teardown
teardown_done leaked=[]
""",
    's09_rank2_raises_step2': """\
spawn_begin nprocs=4
bind 0
bind 1
bind 2
bind 3
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
start 3
step 3 0
step 0 1
coll_arrive 0 g01 n=1/2
step 1 1
coll_arrive 1 g01 n=2/2
coll_issue 1 coll:g01 sip=0
wait_enqueue 1 coll:g01
step 2 1
unwind 2 ValueError
finally 2
unwind 0 SystemExit
finally 0
unwind 1 SystemExit
finally 1
unwind 3 SystemExit
finally 3
barrier_reset pending_worker=[coll:g01] pending_coll=[coll:g01]
spawn_raised SpawnException
error ranks=[2] first=2 type=ValueError
error_entry 2 ValueError ValueError('rank 2 boom at step 1')
error_msg spawn failed on ranks [2]: rank 2 raised ValueError('rank 2 boom at step 1')
error_cause ValueError same_as_first=1
post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    's10_rank0_raises_before_yield': """\
spawn_begin nprocs=4
bind 0
bind 1
bind 2
bind 3
start 0
step 0 0
unwind 0 ValueError
finally 0
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[0] first=0 type=ValueError
error_entry 0 ValueError ValueError('rank 0 boom before first yield')
error_msg spawn failed on ranks [0]: rank 0 raised ValueError('rank 0 boom before first yield')
error_cause ValueError same_as_first=1
post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    's24_drain_after_last_round': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
step 0 0
end 0
finally 0
start 1
end 1
finally 1
engine_wait late:0
spawn_return None
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[late:0]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_allreduce_poll': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
step 0 0
coll_arrive 0 p n=1/3
start 1
step 1 0
coll_arrive 1 p n=2/3
start 2
step 2 0
coll_arrive 2 p n=3/3
coll_issue 2 coll:p sip=0
main_wait coll:p meta=all_reduce:p
engine_wait coll:p
coll_done 0 p result=6
step 0 1
coll_done 1 p result=6
step 1 1
coll_done 2 p result=6
step 2 1
end 0
finally 0
end 1
finally 1
end 2
finally 2
spawn_return None
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[coll:p]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_phase_a_before_b': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
step 0 0
coll_arrive 0 solo n=1/1
coll_issue 0 coll:solo sip=0
start 1
step 1 0
wait_enqueue 1 h:1
engine_wait h:1
main_wait coll:solo meta=all_reduce:solo
engine_wait coll:solo
coll_done 0 solo result=1
end 0
finally 0
wait_done 1 h:1
step 1 1
wait_enqueue 1 h:2
engine_wait h:2
wait_done 1 h:2
end 1
finally 1
spawn_return None
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[coll:solo,h:1,h:2]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_drain_loops_until_empty': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
step 0 0
wait_enqueue 0 h:root
start 1
step 1 0
engine_wait h:root
engine_wait sub:w
main_wait sub:c meta=made-by-engine
engine_wait sub:c
wait_done 0 h:root
step 0 1
step 1 1
wait_fast 1 sub:c
end 1
finally 1
end 0
finally 0
spawn_return None
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[h:root,sub:c,sub:w]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_driver_side_wait': """\
main_wait d:1 meta=m1
engine_wait d:1
wait_fast main d:1
post ranks=[] pending_worker=[] pending_coll=[] completed=[d:1]
spawn_begin nprocs=1
bind 0
start 0
step 0 0
wait_fast 0 d:1
step 0 1
wait_enqueue 0 d:2
engine_wait d:2
wait_done 0 d:2
end 0
finally 0
spawn_return None
post ranks=[dead] pending_worker=[] pending_coll=[] completed=[d:1,d:2]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_two_root_causes': """\
spawn_begin nprocs=4
bind 0
bind 1
bind 2
bind 3
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
start 3
step 3 0
step 0 1
step 1 1
step 2 1
unwind 3 ValueError
finally 3
absorbed 0
end 0
finally 0
unwind 1 RuntimeError
finally 1
unwind 2 SystemExit
finally 2
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[1,3] first=3 type=ValueError
error_entry 3 ValueError ValueError('rank 3 boom')
error_entry 1 RuntimeError RuntimeError('rank 1 cleanup failed')
error_msg spawn failed on ranks [1, 3]: rank 3 raised ValueError('rank 3 boom')
error_cause ValueError same_as_first=1
post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_failure_keeps_exception_objects': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
start 1
start 2
unwind 1 Boom
finally 1
unwind 0 SystemExit
finally 0
unwind 2 SystemExit
finally 2
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[1] first=1 type=Boom
error_entry 1 Boom Boom('b', {'rank': 1})
error_msg spawn failed on ranks [1]: rank 1 raised Boom('b', {'rank': 1})
error_cause Boom same_as_first=1
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_cleanup_wait_fast': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
wait_enqueue 0 h:done
start 1
engine_wait h:done
wait_done 0 h:done
unwind 1 KeyError
finally 1
cleanup 0 before
wait_fast 0 h:done
cleanup 0 after
unwind 0 SystemExit
finally 0
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[1] first=1 type=KeyError
error_entry 1 KeyError KeyError('k')
error_msg spawn failed on ranks [1]: rank 1 raised KeyError('k')
error_cause KeyError same_as_first=1
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[h:done]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_bind_raises': """\
spawn_begin nprocs=3
bind 0
bind 1
spawn_raised ValueError raw
post ranks=[unstarted] pending_worker=[h:queued] pending_coll=[] completed=[]
spawn_end
spawn_begin nprocs=1
bind 0
start 0
end 0
finally 0
engine_wait h:queued
spawn_return None
post ranks=[dead] pending_worker=[] pending_coll=[] completed=[h:queued]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_failure_in_round1_cancels_started_only': """\
spawn_begin nprocs=4
bind 0
bind 1
bind 2
bind 3
start 0
step 0 0
start 1
step 1 0
unwind 1 ValueError
finally 1
unwind 0 SystemExit
finally 0
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[1] first=1 type=ValueError
error_entry 1 ValueError ValueError('early')
error_msg spawn failed on ranks [1]: rank 1 raised ValueError('early')
error_cause ValueError same_as_first=1
post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_drain_failure_worker_wait': """\
spawn_begin nprocs=4
bind 0
bind 1
bind 2
bind 3
start 0
step 0 0
wait_enqueue 0 h:1
start 1
step 1 0
wait_enqueue 1 h:bad
start 2
step 2 0
wait_enqueue 2 h:3
start 3
step 3 0
engine_wait h:1
engine_wait h:bad
unwind 0 SystemExit
finally 0
unwind 1 SystemExit
finally 1
unwind 2 SystemExit
finally 2
unwind 3 SystemExit
finally 3
barrier_reset pending_worker=[h:3] pending_coll=[]
spawn_raised SpawnException
error ranks=[] first=None type=None
error_msg spawn failed on ranks []
error_cause KeyError same_as_first=0
post ranks=[dead,dead,dead,dead] pending_worker=[] pending_coll=[] completed=[h:1]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_drain_failure_collective': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
step 0 0
coll_arrive 0 x n=1/2
start 1
step 1 0
coll_arrive 1 x n=2/2
coll_issue 1 coll:x sip=0
main_wait coll:x meta=all_reduce:x
engine_wait coll:x
unwind 0 SystemExit
finally 0
unwind 1 SystemExit
finally 1
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[] first=None type=None
error_msg spawn failed on ranks []
error_cause RuntimeError same_as_first=0
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_nprocs0_keeps_queue': """\
spawn_begin nprocs=0
spawn_return None
post ranks=[] pending_worker=[h:pre] pending_coll=[] completed=[]
spawn_end
spawn_begin nprocs=1
bind 0
start 0
end 0
finally 0
engine_wait h:pre
spawn_return None
post ranks=[dead] pending_worker=[] pending_coll=[] completed=[h:pre]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_respawn': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
step 0 0
start 1
step 1 0
wait_enqueue 1 h:done
engine_wait h:done
end 0
finally 0
wait_done 1 h:done
end 1
finally 1
spawn_return None
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[h:done]
spawn_end
spawn_begin nprocs=2
bind 0
bind 1
start 0
step 0 0
start 1
step 1 0
step 0 1
wait_enqueue 0 h:lost
step 1 1
unwind 1 ValueError
finally 1
unwind 0 SystemExit
finally 0
barrier_reset pending_worker=[h:lost] pending_coll=[]
spawn_raised SpawnException
error ranks=[1] first=1 type=ValueError
error_entry 1 ValueError ValueError('2nd spawn fails')
error_msg spawn failed on ranks [1]: rank 1 raised ValueError('2nd spawn fails')
error_cause ValueError same_as_first=1
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[h:done]
spawn_end
spawn_begin nprocs=1
bind 0
start 0
step 0 0
wait_fast 0 h:done
step 0 1
wait_enqueue 0 h:lost
engine_wait h:lost
wait_done 0 h:lost
end 0
finally 0
spawn_return None
post ranks=[dead] pending_worker=[] pending_coll=[] completed=[h:done,h:lost]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_sliced_yields': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
step 0 1
step 1 1
step 2 1
end 0
finally 0
end 1
finally 1
end 2
finally 2
spawn_return None
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_sliced_waits': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
step 0 0
wait_enqueue 0 h:1
start 1
step 1 0
wait_enqueue 1 h:2
engine_wait h:1
engine_wait h:2
wait_done 0 h:1
step 0 1
wait_fast 0 h:2
end 0
finally 0
wait_done 1 h:2
step 1 1
step 1 2
end 1
finally 1
spawn_return None
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[h:1,h:2]
spawn_end
teardown
teardown_done leaked=[]
""",
    's_sliced_failure': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
step 0 1
step 1 1
wait_enqueue 1 h:1
step 2 1
engine_wait h:1
step 0 2
wait_done 1 h:1
step 1 2
unwind 1 ValueError
finally 1
unwind 0 SystemExit
finally 0
unwind 2 SystemExit
finally 2
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[1] first=1 type=ValueError
error_entry 1 ValueError ValueError('late')
error_msg spawn failed on ranks [1]: rank 1 raised ValueError('late')
error_cause ValueError same_as_first=1
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[h:1]
spawn_end
teardown
teardown_done leaked=[]
""",
    # Recorded as the others (with python3-greenlet 2.0.2): GreenletExit
    # raised by a rank is a normal finish.
    's_rank_raises_greenletexit': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
step 0 1
step 1 1
wait_enqueue 1 h:1
step 2 1
engine_wait h:1
step 0 2
wait_done 1 h:1
step 1 2
unwind 1 GreenletExit
finally 1
end 2
finally 2
end 0
finally 0
spawn_return None
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[h:1]
spawn_end
teardown
teardown_done leaked=[]
""",
}


DIFFERENCES = {
    # The reference says only "spawn failed on ranks []" for a drain failure;
    # libkbthreads (and so the binding) names the handle, the phase and the
    # engine's exception (SEMANTICS.md rule 7). errors stays {} and
    # __cause__ is the engine's exception, as in the reference.
    "s_drain_failure_worker_wait": [
        (
            "error_msg spawn failed on ranks []",
            "error_msg spawn failed on ranks []: drain failed: engine wait for handle"
            " ('h', 'bad') (pending worker wait) raised KeyError('engine boom')",
        ),
    ],
    "s_drain_failure_collective": [
        (
            "error_msg spawn failed on ranks []",
            "error_msg spawn failed on ranks []: drain failed: engine wait for handle"
            " ('coll', 'x') (pending collective) raised RuntimeError('collective boom')",
        ),
    ],
    # A bind failure: the reference leaves the never-run greenlets unstarted
    # (for the garbage collector); the library has already ended their
    # threads, so the binding reports them dead. The queue is kept as in the
    # reference.
    "s_bind_raises": [
        (
            "post ranks=[unstarted] pending_worker=[h:queued] pending_coll=[] completed=[]",
            "post ranks=[dead] pending_worker=[h:queued] pending_coll=[] completed=[]",
        ),
    ],
}

JOIN_ROUNDS = {
    # rounds 1 and 2 (every rank's step 0, then step 1); round 3 ends all
    "s_sliced_yields": ["step 2 0", "step 2 1"],
    # round 1 queues h:1, h:2 (drained); round 2: rank 0 ends, rank 1 yields;
    # round 3: rank 1 yields; round 4: rank 1 ends
    "s_sliced_waits": ["engine_wait h:2", "step 1 1", "step 1 2"],
    # round 1; round 2 (its drain waits h:1); round 3 fails: join raises
    "s_sliced_failure": ["step 2 0", "engine_wait h:1"],
}

BINDING_TRACES = {
    # Reference: the cleanup's ctx.wait switches away and spawn returns with rank 0
    # left suspended (its cleanup never ends; the garbage collector kills it later).
    # Binding: a cancelled rank cannot suspend; the wait raises SystemExit again.
    'b_cleanup_wait_blocks': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
start 1
unwind 1 KeyError
finally 1
cleanup 0 before
wait_enqueue 0 h:never
unwind 0 SystemExit
finally 0
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[1] first=1 type=KeyError
error_entry 1 KeyError KeyError('k')
error_msg spawn failed on ranks [1]: rank 1 raised KeyError('k')
error_cause KeyError same_as_first=1
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    # Reference: the second yield switches away and rank 0 stays suspended after
    # spawn. Binding: every later suspension raises SystemExit at once; rank 0
    # swallows that too, returns normally and is no error.
    'b_swallow_and_yield_again': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
start 1
unwind 1 ValueError
finally 1
swallowed 0 1
swallowed 0 2
end 0
finally 0
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SpawnException
error ranks=[1] first=1 type=ValueError
error_entry 1 ValueError ValueError('v')
error_msg spawn failed on ranks [1]: rank 1 raised ValueError('v')
error_cause ValueError same_as_first=1
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    # Reference: SystemExit escapes spawn at once, siblings left suspended, no reset,
    # queues not cleared. Binding: the same SystemExit escapes spawn, after
    # the failure path (siblings cancelled in rank order, reset, queues cleared).
    'b_rank_sysexit': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
step 0 0
start 1
step 1 0
wait_enqueue 1 h:1
start 2
step 2 0
engine_wait h:1
step 0 1
wait_done 1 h:1
step 1 1
unwind 1 SystemExit
finally 1
unwind 0 SystemExit
finally 0
unwind 2 SystemExit
finally 2
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised SystemExit raw
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[h:1]
spawn_end
teardown
teardown_done leaked=[]
""",
    # As b_rank_sysexit, with KeyboardInterrupt.
    'b_rank_keyboardinterrupt': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
step 0 1
step 1 1
unwind 1 KeyboardInterrupt
finally 1
unwind 0 SystemExit
finally 0
unwind 2 SystemExit
finally 2
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised KeyboardInterrupt raw
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    # Reference: KeyboardInterrupt escapes the drain and spawn at once. Binding: the
    # drain fails, the failure path runs, then spawn re-raises it.
    'b_engine_keyboardinterrupt': """\
spawn_begin nprocs=2
bind 0
bind 1
start 0
step 0 0
wait_enqueue 0 h:1
start 1
step 1 0
engine_wait h:1
unwind 0 SystemExit
finally 0
unwind 1 SystemExit
finally 1
barrier_reset pending_worker=[] pending_coll=[]
spawn_raised KeyboardInterrupt raw
post ranks=[dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
    # join=False (the reference ignores join): one round, then close() cancels
    # ranks 0 and 1 in rank order (rank 2 had finished), resets, clears both
    # queues; join() then raises; the completed set stays for the next spawn.
    'b_close_live_spawn': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
step 0 0
start 1
step 1 0
wait_enqueue 1 h:1
start 2
end 2
finally 2
engine_wait h:1
join False
post ranks=[suspended,suspended,dead] pending_worker=[h:queued] pending_coll=[] completed=[h:1]
unwind 0 SystemExit
finally 0
unwind 1 SystemExit
finally 1
barrier_reset pending_worker=[h:queued] pending_coll=[]
closed
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[h:1]
join_raised RuntimeError kbthreads: this spawn was closed before it finished
spawn_begin nprocs=1
bind 0
start 0
step 0 0
wait_fast 0 h:1
end 0
finally 0
spawn_return None
post ranks=[dead] pending_worker=[] pending_coll=[] completed=[h:1]
spawn_end
teardown
teardown_done leaked=[]
""",
    # kbthreads.barrier() (no reference counterpart; docs/design.md 'Barrier'):
    # round 1: ranks 0, 1 arrive, rank 2 finishes, which opens the barrier;
    # round 2: both pass, rank 0 arrives again, rank 1 yields; round 3:
    # rank 1 arrives (opens); round 4: both pass in rank order.
    'b_barrier': """\
spawn_begin nprocs=3
bind 0
bind 1
bind 2
start 0
step 0 0
start 1
step 1 0
start 2
step 2 0
end 2
finally 2
passed 0 1
passed 1 1
passed 0 2
end 0
finally 0
passed 1 2
end 1
finally 1
spawn_return None
post ranks=[dead,dead,dead] pending_worker=[] pending_coll=[] completed=[]
spawn_end
teardown
teardown_done leaked=[]
""",
}
