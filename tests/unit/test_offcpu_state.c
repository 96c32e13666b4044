// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the off-CPU thread state machine (agent/offcpu_state.c), driven by sequences of
 * switch-outs, wake-ups and switch-ins whose answer is known: an interval split at its wake-up
 * into blocked and run-queue time, a preemption all run-queue, a sleep with no wake-up seen all
 * blocked, a short one counted but not added, a lost switch-in, a switch-in reported twice, and
 * open intervals counted up to a horizon and continued from it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../agent/offcpu_state.h"

typedef struct fixture {
	tracker tr;
	sampler_agg agg;
	strobe_sampler_stats st;
	offcpu_state m;
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	assert_int_equal(tracker_init(&f->tr), 0);
	f->tr.proc_root = NULL;
	agg_init(&f->agg);
	f->m = (offcpu_state){.tr = &f->tr, .agg = &f->agg, .st = &f->st, .min_block_ns = 100};
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	agg_free(&f->agg);
	tracker_free(&f->tr);
	free(f);
	return 0;
}

/* Thread tid of process 7 leaves the CPU at t with the one-frame stack {frame}. */
static void out(fixture *f, int32_t tid, uint32_t frame, int64_t t, uint64_t prev_state)
{
	proc_thread *th = tracker_thread(&f->tr, tid, 7, true);
	assert_non_null(th);
	offcpu_switch_out(&f->m, th, &frame, 1, t, offcpu_prev_state_blocked(prev_state));
}

/* The values summed under (tid, frame), or all zero when there is no such entry. */
static void vals(const fixture *f, int32_t tid, uint32_t frame, int64_t v[NV])
{
	memset(v, 0, NV * sizeof(*v));
	for (uint32_t id = agg_first(&f->agg, 0); id != AGG_END; id = agg_next(&f->agg, 0, id)) {
		const sampler_agg_key *k = agg_key(&f->agg, id);
		if (k->tid != tid || k->n != 1 || k->frame[0] != frame)
			continue;
		for (int i = 0; i < NV; i++)
			v[i] += agg_vals(&f->agg, id)[i];
	}
}

static void expect(const fixture *f, int32_t tid, uint32_t frame, int64_t off, int64_t blocked,
		   int64_t switches)
{
	int64_t v[NV];
	vals(f, tid, frame, v);
	assert_int_equal(v[V_OFF_NS], off);
	assert_int_equal(v[V_BLOCKED_NS], blocked);
	assert_int_equal(v[V_RUNQ_NS], off - blocked);
	assert_int_equal(v[V_SWITCHES], switches);
}

static void test_prev_state(void **state)
{
	assert_false(offcpu_prev_state_blocked(0));     /* runnable: a yield */
	assert_true(offcpu_prev_state_blocked(1));      /* S */
	assert_true(offcpu_prev_state_blocked(2));      /* D */
	assert_false(offcpu_prev_state_blocked(0x100)); /* preempted (TASK_REPORT_MAX) */
}

/* Asleep at 1000, woken at 1200, back at 1600: 200 blocked, 400 waiting for a CPU. A second
 * wake-up does not move the first; a preempted thread's wake-up is not one. */
static void test_blocked_then_runqueue(void **state)
{
	fixture *f = *state;
	out(f, 8, 1, 1000, 1 /* S */);
	offcpu_wakeup(&f->m, 8, 1200);
	offcpu_wakeup(&f->m, 8, 1450);
	offcpu_switch_in(&f->m, 8, 1600);
	expect(f, 8, 1, 600, 200, 1);

	out(f, 9, 2, 2000, 0x100 /* preempted */);
	offcpu_wakeup(&f->m, 9, 2100);
	offcpu_switch_in(&f->m, 9, 2500);
	expect(f, 9, 2, 500, 0, 1);

	/* asleep, and its wake-up never seen (no sched_wakeup): all blocked */
	out(f, 10, 3, 3000, 2 /* D */);
	offcpu_switch_in(&f->m, 10, 3400);
	expect(f, 10, 3, 400, 400, 1);
	assert_int_equal(f->st.switches, 3);
	assert_int_equal(f->st.short_blocks, 0);
}

/* Shorter than min_block_ns: counted as short, nothing added. */
static void test_short_block(void **state)
{
	fixture *f = *state;
	out(f, 8, 1, 1000, 1);
	offcpu_switch_in(&f->m, 8, 1099);
	expect(f, 8, 1, 0, 0, 0);
	assert_int_equal(f->st.short_blocks, 1);
	assert_int_equal(f->st.switches, 0);
	out(f, 8, 1, 2000, 1);
	offcpu_switch_in(&f->m, 8, 2100); /* exactly min_block_ns: counted */
	expect(f, 8, 1, 100, 100, 1);
}

/* A switch-in lost: the next switch-out drops the open interval (the gap is not off-CPU time we
 * know of) and counts it unmatched; the new one is counted under its own stack. */
static void test_lost_switch_in(void **state)
{
	fixture *f = *state;
	out(f, 8, 1, 1000, 1);
	out(f, 8, 2, 5000, 1);
	offcpu_switch_in(&f->m, 8, 5200);
	expect(f, 8, 1, 0, 0, 0);
	expect(f, 8, 2, 200, 200, 1);
	assert_int_equal(f->st.unmatched, 1);
}

/* System-wide, sched_switch's next_pid and the switch-in record both report one return: the
 * second is neither counted again nor an orphan. A thread never seen leaving is ignored. */
static void test_switch_in_twice(void **state)
{
	fixture *f = *state;
	out(f, 8, 1, 1000, 1);
	offcpu_switch_in(&f->m, 8, 1500);
	offcpu_switch_in(&f->m, 8, 1501);
	offcpu_switch_in(&f->m, 42, 1502); /* no such thread */
	expect(f, 8, 1, 500, 500, 1);
	assert_int_equal(f->st.switches, 1);
	assert_int_equal(f->st.orphan_in, 0);
}

/* An interval open at export time is counted up to the horizon (no switch yet) and continues
 * from there: woken before the horizon, its rest is run-queue time. One open less than
 * min_block_ns stays open, whole. */
static void test_flush_open(void **state)
{
	fixture *f = *state;
	out(f, 8, 1, 1000, 1);
	offcpu_wakeup(&f->m, 8, 1200);
	out(f, 9, 2, 1450, 1);
	offcpu_flush_open(&f->m, 1500);
	expect(f, 8, 1, 500, 200, 0);
	expect(f, 9, 2, 0, 0, 0); /* 50 so far: stays open */
	offcpu_switch_in(&f->m, 8, 2000);
	expect(f, 8, 1, 1000, 200, 1); /* + 500 run-queue, one switch */
	offcpu_switch_in(&f->m, 9, 1700);
	expect(f, 9, 2, 250, 250, 1); /* whole, from 1450 */
	assert_int_equal(f->st.switches, 2);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_prev_state),
		cmocka_unit_test_setup_teardown(test_blocked_then_runqueue, setup, teardown),
		cmocka_unit_test_setup_teardown(test_short_block, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost_switch_in, setup, teardown),
		cmocka_unit_test_setup_teardown(test_switch_in_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_open, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
