// SPDX-License-Identifier: Apache-2.0
/*
 * The sampler's events and rings (see sampler_events.h): the attributes of each kind of event,
 * opening them per target and CPU, hooking each to its CPU's ring, enabling, disabling, polling.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "sampler_events.h"
#include "stack_cap.h"

static int add_fd(sampler_events *ev, int fd)
{
	if (ev->nfds == ev->cfds) {
		unsigned nc = ev->cfds ? ev->cfds * 2 : 64;
		int *n = realloc(ev->fds, nc * sizeof(*n));
		if (!n)
			return -ENOMEM;
		ev->fds = n;
		ev->cfds = nc;
	}
	ev->fds[ev->nfds++] = fd;
	return 0;
}

static int add_id(sampler_events *ev, int fd, int kind)
{
	uint64_t id;
	if (ioctl(fd, PERF_EVENT_IOC_ID, &id) < 0)
		return -errno;
	/* Inherited child events report the id of the event they were inherited from. */
	return event_kinds_add(&ev->kinds, id, kind);
}

static unsigned ring_pages(const strobe_sampler_opts *o)
{
	/* A stack copy makes every sample some KiB: rings larger by default (2 MiB per CPU for
	 * on-CPU, 4 MiB with off-CPU). */
	unsigned p = o->ring_pages ? o->ring_pages
				   : (o->events & STROBE_EV_OFFCPU) ? (sampler_copies_stack(o) ? 1024 : 256)
								    : (sampler_copies_stack(o) ? 512 : 64);
	unsigned r = 1;
	while (r < p && r < (1u << 16))
		r <<= 1;
	return r;
}

/* The events' attributes. `sideband`: this event also reports mmaps, comms, forks, exits and,
 * for off-CPU, context switches. */
void sampler_events_attr(const sampler_events *ev, struct perf_event_attr *a, int kind,
			 bool sideband, bool per_task, int tp_id)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->disabled = 1;
	a->sample_id_all = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->inherit = per_task;
	a->enable_on_exec = ev->o->enable_on_exec;
	a->sample_type = ev->sample_type[kind];
	a->exclude_callchain_kernel = !ev->o->kernel || ev->kernel_excluded;
	a->sample_max_stack = (uint16_t)(ev->o->max_stack ? ev->o->max_stack : STROBE_STACK_DEPTH);
	if (sampler_copies_stack(ev->o) && kind != EVK_WAKEUP) {
		a->sample_regs_user = STROBE_SAMPLER_REGS_MASK;
		a->sample_stack_user = kind == EVK_CLOCK ? ev->stack_clock : ev->o->stack_size;
		/* dwarf: the user part of the chain comes from the unwinder alone */
		a->exclude_callchain_user = ev->o->call_graph == STROBE_CG_DWARF;
	}
	a->watermark = 1;
	/* A wake-up when a quarter of the ring is written; on-CPU samples with a stack copy, half:
	 * the kernel wakes the reader per ring, every watermark bytes written to it whatever the
	 * reader has read meanwhile, so at 99 Hz with 16 KiB copies each CPU woke the recorder
	 * three times a second, and on a virtual machine each wake-up (two context switches and
	 * a poll) cost about 60 us, a sixth of the recorder's CPU. Half of a 2 MiB ring still
	 * leaves 0.6 s at 99 Hz before anything is lost, and reading it is quick now that samples
	 * are unwound as they are read. Off-CPU records come at every context switch: a quarter. */
	unsigned frac = sampler_copies_stack(ev->o) && !(ev->o->events & STROBE_EV_OFFCPU) ? 2 : 4;
	a->wakeup_watermark = (uint32_t)(ring_pages(ev->o) * (size_t)sysconf(_SC_PAGESIZE) / frac);
	switch (kind) {
	case EVK_CLOCK:
		if (ev->o->cycles) {
			a->type = PERF_TYPE_HARDWARE;
			a->config = PERF_COUNT_HW_CPU_CYCLES;
			a->freq = 1;
			a->sample_freq = ev->o->freq;
		} else {
			a->type = PERF_TYPE_SOFTWARE;
			a->config = PERF_COUNT_SW_CPU_CLOCK;
			a->sample_period = ev->clock_period_ns;
		}
		a->exclude_kernel = ev->kernel_excluded;
		break;
	default:
		a->type = PERF_TYPE_TRACEPOINT;
		a->config = (uint64_t)tp_id;
		a->sample_period = 1;
		if (!per_task && ev->o->enable_on_exec) {
			/* A cpu-wide event never sees the exec: on now (wake-ups of threads we
			 * do not trace are ignored anyway). */
			a->enable_on_exec = 0;
			a->disabled = 0;
		}
		break;
	}
	if (sideband) {
		a->mmap = a->mmap2 = a->comm = a->comm_exec = a->task = 1;
		a->build_id = 1;
		/* Per task, the switch-in record is the only switch-in there is. System-wide,
		 * sched_switch's next_pid says who comes in, but that sample is taken in the
		 * context of the task going out, and when that is a CPU's idle task the kernel
		 * may not deliver it at all (seen on a VM: none of CPU 1's idle-task samples ever
		 * arrived, so a thread that slept and woke there was never seen coming back, and
		 * its off-CPU time was lost until it next ran after a busy task). The switch-in
		 * record is written in the context of the task coming in: ask for it too. */
		a->context_switch = (ev->o->events & STROBE_EV_OFFCPU) != 0;
	}
}

/* Opens one event on (pid, cpu), hooking it to that CPU's ring (mapping the ring on first use). */
static int open_one(sampler_events *ev, int kind, bool sideband, bool per_task, int tp_id,
		    pid_t pid, int cpu, unsigned ring, strobe_err *err)
{
	struct perf_event_attr a;
	sampler_events_attr(ev, &a, kind, sideband, per_task, tp_id);
	int fd = perf_open(&a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd == -EINVAL && sideband) { /* kernels before 5.12 have no build IDs in mmap2 */
		a.build_id = 0;
		fd = perf_open(&a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	}
	if (fd < 0) {
		static const char *const what[] = {"", "the cpu-clock event", "sched:sched_switch",
						   "sched:sched_wakeup"};
		if (kind == EVK_CLOCK && ev->o->cycles && (fd == -ENOENT || fd == -EOPNOTSUPP))
			return strobe_errf(err, fd,
					   "this machine has no hardware cycle counter (a virtual "
					   "machine without a virtual PMU?): use -e cpu, the cpu-clock "
					   "timer");
		return perf_open_err(err, fd,
					    kind == EVK_CLOCK && ev->o->cycles ? "the cycles event"
									     : what[kind],
					    pid);
	}
	int rc = add_fd(ev, fd);
	if (rc < 0) {
		close(fd);
		return rc;
	}
	if ((rc = add_id(ev, fd, kind)) < 0)
		return strobe_errf(err, rc, "PERF_EVENT_IOC_ID: %s", strerror(-rc));
	perf_ring *r = &ev->rings[ring];
	if (r->fd < 0) {
		rc = perf_ring_map(r, fd, ring_pages(ev->o));
		if (rc < 0)
			return strobe_errf(err, rc,
					   "cannot map the ring buffer of CPU %d (%u pages): %s%s", cpu,
					   ring_pages(ev->o), strerror(-rc),
					   rc == -EPERM ? " (raise kernel.perf_event_mlock_kb)" : "");
		ev->pfd[ring].fd = fd;
		ev->pfd[ring].events = POLLIN;
	} else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->fd) < 0) {
		return strobe_errf(err, -errno, "PERF_EVENT_IOC_SET_OUTPUT: %s", strerror(errno));
	}
	return 0;
}

/* The events of one target (a thread, or -1 for the whole CPU) on one CPU. */
static int open_set(sampler_events *ev, pid_t pid, int cpu, unsigned ring, int tp_switch,
		    strobe_err *err)
{
	bool per_task = pid != -1;
	bool sb = true;
	int rc;
	if (ev->o->events & STROBE_EV_CPU) {
		rc = open_one(ev, EVK_CLOCK, sb, per_task, 0, pid, cpu, ring, err);
		if (rc < 0)
			return rc;
		sb = false;
	}
	if (ev->o->events & STROBE_EV_OFFCPU) {
		rc = open_one(ev, EVK_SWITCH, sb, per_task, tp_switch, pid, cpu, ring, err);
		if (rc < 0)
			return rc;
	}
	return 0;
}

typedef struct open_ctx {
	sampler_events *ev;
	int ncpu, tp_switch;
	const int *cpus;
	strobe_err *err;
} open_ctx;

/* perf_each_thread's step: one thread's events on every CPU. */
static int open_thread(void *ctx, pid_t tid)
{
	open_ctx *c = ctx;
	int rc = 0;
	for (int i = 0; i < c->ncpu && rc == 0; i++)
		rc = open_set(c->ev, tid, c->cpus[i], (unsigned)i, c->tp_switch, c->err);
	return rc;
}

/* Opens events for every thread of pid (only pid itself for a forked child waiting to exec). */
static int open_process(sampler_events *ev, pid_t pid, int ncpu, const int *cpus, int tp_switch,
			strobe_err *err)
{
	open_ctx c = {.ev = ev, .ncpu = ncpu, .tp_switch = tp_switch, .cpus = cpus, .err = err};
	int rc = perf_each_thread(ev->o->proc_root, pid, ev->o->enable_on_exec, open_thread, &c);
	if (rc < 0 && (rc == -ESRCH || !err->msg[0]))
		return strobe_errf(err, rc, rc == -ESRCH ? "no process %d" : "the threads of process %d: %s",
				   (int)pid, strerror(-rc));
	return rc < 0 ? rc : 0;
}

void sampler_events_init(sampler_events *ev, const strobe_sampler_opts *o)
{
	ev->o = o;
	event_kinds_init(&ev->kinds);
	const uint64_t common = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
				PERF_SAMPLE_CPU;
	ev->sample_type[EVK_CLOCK] = common | PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD |
				     PERF_SAMPLE_CALLCHAIN;
	ev->sample_type[EVK_SWITCH] = common | PERF_SAMPLE_IP | PERF_SAMPLE_PERIOD |
				      PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_RAW;
	ev->sample_type[EVK_WAKEUP] = common | PERF_SAMPLE_RAW;
	if (sampler_copies_stack(o)) {
		ev->sample_type[EVK_CLOCK] |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		ev->sample_type[EVK_SWITCH] |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
	}
}

int sampler_events_open(sampler_events *ev, strobe_err *err)
{
	const strobe_sampler_opts *o = ev->o;
	int rc = 0;
	int tp_switch = 0, tp_wakeup = 0, size;
	if (o->events & STROBE_EV_OFFCPU) {
		tp_switch = perf_tracepoint_id("sched", "sched_switch", err);
		if (tp_switch < 0)
			rc = tp_switch;
		if (rc == 0)
			rc = perf_tracepoint_field("sched", "sched_switch", "prev_state",
						     &ev->f_prev_state, &ev->f_prev_state_size, err);
		if (rc == 0)
			rc = perf_tracepoint_field("sched", "sched_switch", "next_pid",
						     &ev->f_next_pid, &size, err);
		if (rc == 0) {
			tp_wakeup = perf_tracepoint_id("sched", "sched_wakeup", err);
			if (tp_wakeup < 0 ||
			    perf_tracepoint_field("sched", "sched_wakeup", "pid", &ev->f_wake_pid,
						    &size, err) < 0)
				ev->no_wakeups = true;
			if (err)
				err->msg[0] = 0;
		}
	}

	int ncpu = perf_cpu_count(), nonline = 0;
	int *cpus = malloc((size_t)ncpu * sizeof(*cpus));
	ev->rings = calloc((size_t)ncpu, sizeof(*ev->rings));
	ev->pfd = calloc((size_t)ncpu + SAMPLER_EXTRA_FDS, sizeof(*ev->pfd));
	if (rc == 0 && (!cpus || !ev->rings || !ev->pfd))
		rc = -ENOMEM;
	for (int c = 0; rc == 0 && c < ncpu; c++)
		if (perf_cpu_online(c))
			cpus[nonline++] = c;
	ev->nrings = (unsigned)nonline;
	for (unsigned i = 0; ev->rings && i < (unsigned)ncpu; i++)
		ev->rings[i].fd = -1;

	if (rc == 0 && o->all) {
		for (int c = 0; rc == 0 && c < nonline; c++)
			rc = open_set(ev, -1, cpus[c], (unsigned)c, tp_switch, err);
	} else if (rc == 0) {
		/* Kernel frames of other users' processes need privilege; fall back to user-only
		 * the way perf does, and say so in the stats. */
		for (unsigned i = 0; rc == 0 && i < o->npids; i++) {
			rc = open_process(ev, o->pids[i], nonline, cpus, tp_switch, err);
			if ((rc == -EACCES || rc == -EPERM) && o->kernel && !ev->kernel_excluded &&
			    ev->nfds == 0 && !(o->events & STROBE_EV_OFFCPU)) {
				ev->kernel_excluded = true;
				rc = open_process(ev, o->pids[i], nonline, cpus, tp_switch, err);
			}
		}
	}
	if (rc == 0 && (o->events & STROBE_EV_OFFCPU) && !ev->no_wakeups) {
		strobe_err werr;
		for (int c = 0; c < nonline; c++) {
			if (open_one(ev, EVK_WAKEUP, false, false, tp_wakeup, -1, cpus[c],
				     (unsigned)c, &werr) < 0) {
				ev->no_wakeups = true; /* blocked time then includes run-queue time */
				break;
			}
		}
	}
	free(cpus);
	return rc;
}

void sampler_events_close(sampler_events *ev)
{
	for (unsigned i = 0; ev->rings && i < ev->nrings; i++)
		if (ev->rings[i].meta)
			perf_ring_unmap(&ev->rings[i]);
	for (unsigned i = 0; i < ev->nfds; i++)
		close(ev->fds[i]);
	free(ev->fds);
	event_kinds_free(&ev->kinds);
	free(ev->rings);
	free(ev->pfd);
}

int sampler_events_ioctl(sampler_events *ev, unsigned long req)
{
	int rc = 0;
	for (unsigned i = 0; i < ev->nfds; i++)
		if (ioctl(ev->fds[i], req, 0) < 0 && errno != ESRCH)
			rc = -errno;
	return rc;
}

int sampler_events_poll(sampler_events *ev, int timeout_ms, struct pollfd *extra, unsigned nextra)
{
	if (nextra > SAMPLER_EXTRA_FDS || !ev->pfd)
		nextra = ev->pfd ? SAMPLER_EXTRA_FDS : 0;
	for (unsigned i = 0; i < nextra; i++) {
		extra[i].revents = 0;
		ev->pfd[ev->nrings + i] = extra[i];
	}
	if (timeout_ms > 0 && poll(ev->pfd, ev->nrings + nextra, timeout_ms) < 0 && errno != EINTR)
		return -errno;
	for (unsigned i = 0; i < nextra; i++)
		extra[i].revents = ev->pfd[ev->nrings + i].revents;
	return 0;
}
