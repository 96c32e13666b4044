// SPDX-License-Identifier: Apache-2.0
/*
 * Unit tests of the sampler's events and rings (agent/sampler_events.c):
 *
 *   - the sample types of each kind of event, with and without a stack copy to unwind;
 *   - the attributes of each kind (cpu-clock or cycles, the sched_switch and sched_wakeup
 *     tracepoints): side-band records on the first event only, context switches with off-CPU,
 *     stack copies per kind, the call chains kept, enable-on-exec (and a cpu-wide tracepoint
 *     enabled at once, as it never sees the exec), the wake-up mark from the ring's size;
 *   - opening the events on this very process (root or CAP_PERFMON; SKIP otherwise): one event
 *     per thread and CPU hooked to that CPU's ring, and the map from each event's id to its kind
 *     that the decoder looks every record up in: every event found with the kind it was opened
 *     as (the sched_switch and sched_wakeup ones too where tracefs is there), enable, disable,
 *     poll;
 *   - the threads listed under the configured proc root (strobe_sampler_opts.proc_root), not
 *     /proc: a fake root that lists only the main thread gets the main thread's events only.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#define UNIT_TMPDIR_NAME "events"
#include "unit_tmpdir.h"

#include "../../agent/sampler_events.h"
#include "../../agent/stack_cap.h"

static const uint64_t COMMON = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
			       PERF_SAMPLE_CPU;
static const uint64_t STACK = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;

static void test_sample_types(void **state)
{
	strobe_sampler_opts o = {.events = STROBE_EV_CPU, .call_graph = STROBE_CG_FP};
	sampler_events ev = {0};
	sampler_events_init(&ev, &o);
	const uint64_t chain = COMMON | PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
	assert_int_equal(ev.sample_type[EVK_CLOCK], chain);
	assert_int_equal(ev.sample_type[EVK_SWITCH], chain | PERF_SAMPLE_RAW);
	assert_int_equal(ev.sample_type[EVK_WAKEUP], COMMON | PERF_SAMPLE_RAW);
	sampler_events_close(&ev);
	for (unsigned cg = STROBE_CG_DWARF; cg <= STROBE_CG_AUTO; cg++) {
		o.call_graph = cg;
		sampler_events_init(&ev, &o);
		assert_int_equal(ev.sample_type[EVK_CLOCK], chain | STACK);
		assert_int_equal(ev.sample_type[EVK_SWITCH], chain | PERF_SAMPLE_RAW | STACK);
		assert_int_equal(ev.sample_type[EVK_WAKEUP], COMMON | PERF_SAMPLE_RAW);
		sampler_events_close(&ev);
	}
}

static uint32_t watermark(unsigned pages, unsigned frac)
{
	return (uint32_t)((size_t)pages * (size_t)sysconf(_SC_PAGESIZE) / frac);
}

static void test_attrs(void **state)
{
	strobe_sampler_opts o = {.events = STROBE_EV_CPU, .freq = 99, .kernel = true,
				 .call_graph = STROBE_CG_FP};
	sampler_events ev = {0};
	sampler_events_init(&ev, &o);
	ev.clock_period_ns = 10101010;
	struct perf_event_attr a;

	/* cpu-clock, first event of a thread: the side-band records, no switches */
	sampler_events_attr(&ev, &a, EVK_CLOCK, true, true, 0);
	assert_int_equal(a.size, sizeof(a));
	assert_int_equal(a.type, PERF_TYPE_SOFTWARE);
	assert_int_equal(a.config, PERF_COUNT_SW_CPU_CLOCK);
	assert_int_equal(a.sample_period, 10101010);
	assert_int_equal(a.sample_type, ev.sample_type[EVK_CLOCK]);
	assert_true(a.disabled && a.inherit && a.sample_id_all && a.use_clockid);
	assert_int_equal(a.clockid, CLOCK_MONOTONIC);
	assert_false(a.enable_on_exec);
	assert_true(a.mmap && a.mmap2 && a.comm && a.comm_exec && a.task && a.build_id);
	assert_false(a.context_switch);
	assert_false(a.exclude_callchain_kernel);
	assert_false(a.exclude_kernel);
	assert_int_equal(a.sample_max_stack, STROBE_STACK_DEPTH);
	assert_int_equal(a.sample_regs_user, 0);
	assert_int_equal(a.sample_stack_user, 0);
	assert_true(a.watermark);
	assert_int_equal(a.wakeup_watermark, watermark(64, 4));
	/* not the first: no side-band records; cpu-wide: not inherited */
	sampler_events_attr(&ev, &a, EVK_CLOCK, false, false, 0);
	assert_false(a.mmap2 || a.comm || a.task || a.inherit);

	/* no kernel frames; the kernel excluded altogether where there is no privilege */
	o.kernel = false;
	sampler_events_attr(&ev, &a, EVK_CLOCK, true, true, 0);
	assert_true(a.exclude_callchain_kernel);
	o.kernel = true;
	ev.kernel_excluded = true;
	sampler_events_attr(&ev, &a, EVK_CLOCK, true, true, 0);
	assert_true(a.exclude_callchain_kernel && a.exclude_kernel);
	ev.kernel_excluded = false;

	/* the cycle counter, in frequency mode; a frame limit asked for; a ring size rounded up */
	o.cycles = true;
	o.max_stack = 20;
	o.ring_pages = 100;
	sampler_events_attr(&ev, &a, EVK_CLOCK, true, true, 0);
	assert_int_equal(a.type, PERF_TYPE_HARDWARE);
	assert_int_equal(a.config, PERF_COUNT_HW_CPU_CYCLES);
	assert_true(a.freq);
	assert_int_equal(a.sample_freq, 99);
	assert_int_equal(a.sample_max_stack, 20);
	assert_int_equal(a.wakeup_watermark, watermark(128, 4));
	sampler_events_close(&ev);

	/* wall time with unwinding: stack copies, context switches, the tracepoints */
	o = (strobe_sampler_opts){.events = STROBE_EV_CPU | STROBE_EV_OFFCPU, .kernel = true,
				  .call_graph = STROBE_CG_DWARF, .stack_size = 8192,
				  .enable_on_exec = true};
	sampler_events_init(&ev, &o);
	ev.stack_clock = 16384;
	sampler_events_attr(&ev, &a, EVK_CLOCK, true, true, 0);
	assert_true(a.context_switch);
	assert_true(a.enable_on_exec && a.disabled);
	assert_int_equal(a.sample_regs_user, STROBE_SAMPLER_REGS_MASK);
	assert_int_equal(a.sample_stack_user, 16384);
	assert_true(a.exclude_callchain_user); /* dwarf: the user part from the unwinder alone */
	assert_int_equal(a.wakeup_watermark, watermark(1024, 4));
	sampler_events_attr(&ev, &a, EVK_SWITCH, false, true, 317);
	assert_int_equal(a.type, PERF_TYPE_TRACEPOINT);
	assert_int_equal(a.config, 317);
	assert_int_equal(a.sample_period, 1);
	assert_int_equal(a.sample_type, ev.sample_type[EVK_SWITCH]);
	assert_int_equal(a.sample_stack_user, 8192);
	assert_true(a.enable_on_exec && a.disabled); /* per task: it sees the exec */
	sampler_events_attr(&ev, &a, EVK_WAKEUP, false, false, 318);
	assert_int_equal(a.config, 318);
	assert_int_equal(a.sample_regs_user, 0);
	assert_int_equal(a.sample_stack_user, 0);
	assert_false(a.enable_on_exec || a.disabled); /* cpu-wide: never sees the exec, on now */
	sampler_events_close(&ev);

	/* auto, on-CPU only: the kernel's user chain kept; half the ring before a wake-up */
	o = (strobe_sampler_opts){.events = STROBE_EV_CPU, .call_graph = STROBE_CG_AUTO};
	sampler_events_init(&ev, &o);
	sampler_events_attr(&ev, &a, EVK_CLOCK, true, true, 0);
	assert_false(a.exclude_callchain_user);
	assert_int_equal(a.wakeup_watermark, watermark(512, 2));
	sampler_events_close(&ev);
}

/* ---- opening on this process ------------------------------------------------------------- */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static bool stop;

static void *idle_thread(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	while (!stop)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
	return NULL;
}

static pthread_t start_thread(void)
{
	pthread_t th;
	stop = false;
	assert_int_equal(pthread_create(&th, NULL, idle_thread, NULL), 0);
	return th;
}

static void stop_thread(pthread_t th)
{
	pthread_mutex_lock(&mu);
	stop = true;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
	pthread_join(th, NULL);
}

static unsigned count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	assert_non_null(d);
	unsigned n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* Opens ev for o; false (after closing it) where this machine does not let us. */
static bool open_or_skip(sampler_events *ev, const strobe_sampler_opts *o)
{
	sampler_events_init(ev, o);
	ev->clock_period_ns = 1000000000;
	strobe_err err = {{0}};
	int rc = sampler_events_open(ev, &err);
	if (rc == -EACCES || rc == -EPERM || rc == -ENOENT || rc == -ENOSYS || rc == -EOPNOTSUPP) {
		print_message("SKIP (cannot open perf events here: %s)\n", err.msg);
		sampler_events_close(ev);
		return false;
	}
	assert_int_equal(rc, 0);
	return true;
}

/* The kind each event's id maps to, in the order they were opened. */
static int kind_of_fd(const sampler_events *ev, unsigned i)
{
	uint64_t id;
	assert_int_equal(ioctl(ev->fds[i], PERF_EVENT_IOC_ID, &id), 0);
	return event_kinds_get(&ev->kinds, id);
}

static void test_open_self(void **state)
{
	pthread_t th = start_thread();
	unsigned nthreads = count_threads();
	assert_true(nthreads >= 2);
	pid_t self = getpid();
	strobe_sampler_opts o = {.events = STROBE_EV_CPU, .freq = 1, .pids = &self, .npids = 1,
				 .call_graph = STROBE_CG_FP};
	sampler_events ev = {0};
	if (!open_or_skip(&ev, &o)) {
		stop_thread(th);
		skip();
	}
	unsigned ncpu = ev.nrings;
	assert_true(ncpu >= 1);
	assert_int_equal(ev.nfds, nthreads * ncpu); /* one per thread and CPU */
	assert_int_equal(event_kinds_count(&ev.kinds), ev.nfds);
	for (unsigned i = 0; i < ev.nfds; i++)
		assert_int_equal(kind_of_fd(&ev, i), EVK_CLOCK);
	for (unsigned i = 0; i < ncpu; i++)
		assert_true(ev.rings[i].fd >= 0 && ev.pfd[i].fd == ev.rings[i].fd);
	assert_int_equal(sampler_events_ioctl(&ev, PERF_EVENT_IOC_ENABLE), 0);
	assert_int_equal(sampler_events_ioctl(&ev, PERF_EVENT_IOC_DISABLE), 0);
	assert_int_equal(sampler_events_poll(&ev, 1, NULL, 0), 0);
	sampler_events_close(&ev);

	/* Off-CPU too: per thread and CPU the cpu-clock event then sched_switch, then one
	 * sched_wakeup per CPU. */
	o.events |= STROBE_EV_OFFCPU;
	ev = (sampler_events){0};
	if (!open_or_skip(&ev, &o)) { /* (no tracefs: said, and the rest was checked) */
		stop_thread(th);
		return;
	}
	unsigned per_task = 2 * nthreads * ncpu;
	assert_int_equal(ev.nfds, per_task + (ev.no_wakeups ? 0 : ncpu));
	assert_int_equal(event_kinds_count(&ev.kinds), ev.nfds);
	for (unsigned i = 0; i < ev.nfds; i++)
		assert_int_equal(kind_of_fd(&ev, i),
				 i >= per_task ? EVK_WAKEUP : i % 2 ? EVK_SWITCH : EVK_CLOCK);
	assert_true(ev.f_prev_state >= 0 && ev.f_prev_state_size > 0 && ev.f_next_pid > 0);
	sampler_events_close(&ev);
	stop_thread(th);
}

/* The threads are listed under the configured proc root. */
static void test_proc_root_threads(void **state)
{
	pthread_t th = start_thread();
	assert_true(count_threads() >= 2);
	pid_t self = getpid();
	char path[400];
	snprintf(path, sizeof(path), "%s/%d", dir, (int)self);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/task", dir, (int)self);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/task/%d", dir, (int)self, (int)self);
	assert_int_equal(mkdir(path, 0755), 0);
	strobe_sampler_opts o = {.events = STROBE_EV_CPU, .freq = 1, .pids = &self, .npids = 1,
				 .call_graph = STROBE_CG_FP, .proc_root = dir};
	sampler_events ev = {0};
	if (!open_or_skip(&ev, &o)) {
		stop_thread(th);
		skip();
	}
	assert_int_equal(ev.nfds, ev.nrings); /* the main thread's alone */
	sampler_events_close(&ev);
	/* a process the root does not list is none */
	pid_t other = getppid();
	o.pids = &other;
	ev = (sampler_events){0};
	sampler_events_init(&ev, &o);
	strobe_err err = {{0}};
	assert_int_equal(sampler_events_open(&ev, &err), -ESRCH);
	assert_non_null(strstr(err.msg, "no process"));
	sampler_events_close(&ev);
	stop_thread(th);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sample_types),
		cmocka_unit_test(test_attrs),
		cmocka_unit_test(test_open_self),
		cmocka_unit_test_setup_teardown(test_proc_root_threads, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
