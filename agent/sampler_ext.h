/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the rest of the agent does with a sampler besides strobe/sampler.h's open / poll /
 * profile: add the values its eBPF programs measured (off-CPU sums, on-CPU samples with Python
 * frames and C SDK labels, lock waits) to the sampler's aggregate, so that they are named and
 * exported with the sampler's own; list the processes with lock sums; start a new period; and
 * read the process tracker (names and identities of the processes seen). The sampler's struct
 * stays private to sampler.c (sampler_state.h). Private to agent/.
 */
#ifndef STROBE_AGENT_SAMPLER_EXT_H
#define STROBE_AGENT_SAMPLER_EXT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc.h"
#include "strobe/sampler.h"
#include "strobe/store.h" /* strobe_labelpair */

/* The process tracker the sampler keeps current (proc.h): valid as long as the sampler; its
 * process pointers only until the sampler next handles a record or an add_* call. */
tracker *sampler_tracker(strobe_sampler *s);
/* As strobe_sampler_poll, also woken by the n fds of extra (at most 4: the caller's own events,
 * a wake-up or a ring of its own), whose revents it sets. */
struct pollfd;
int sampler_poll_with(strobe_sampler *s, int timeout_ms, struct pollfd *extra, unsigned n,
			     strobe_err *err);
/* Reads the rings now and processes the records stamped before upto_ns (the rest held for
 * their turn): called by a reader of stacks summed in the kernel after it took them, with the
 * time it began taking them, and before it adds them, so that every record of a mapping a
 * stack can be in has been read, and those of the sums' time applied: a process that ran then
 * and has exited since has its mappings from its records, where /proc has nothing left (a
 * stack of a live process with a record read since its /proc/PID/maps was, and in none of its
 * known mappings, has them read again: stack_resolve.h). 0/-errno. */
int sampler_read_sideband(strobe_sampler *s, int64_t upto_ns);
/* Reads process pid's mappings from /proc now unless they are known (a process met before the
 * sampler's records began, which may be gone when its sums are read). */
void sampler_read_maps_now(strobe_sampler *s, int32_t pid);
/* Whether off-CPU values come from elsewhere (the eBPF aggregation, offcpu.c): the profiles then
 * carry the off-CPU sample types although the sampler opened no off-CPU events. Adding off-CPU
 * sums (sampler_add_offcpu) sets it too. */
void sampler_set_external_offcpu(strobe_sampler *s, bool on);
/* The on-CPU samples come from elsewhere (cpu_external) at freq now: the profiles' period
 * says so. (The sampler's own events carry side-band records only, so they stay as opened.) */
void sampler_set_external_freq(strobe_sampler *s, unsigned freq);

/* Adds off-CPU time measured elsewhere (the agent's in-kernel aggregation, offcpu.c) to the
 * aggregate: the stack is kernel addresses then user addresses, each leaf first; the thread and
 * process are named and their mappings read as for a sample. From then on profiles carry the
 * off-CPU sample types even though the sampler opened no off-CPU events. */
int sampler_add_offcpu(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
			      uint32_t nk, const uint64_t *uips, uint32_t nu, int64_t off_ns,
			      int64_t blocked_ns, int64_t switches);
/* Adds on-CPU samples counted elsewhere (the eBPF sampling program, oncpu.c): `samples` samples
 * worth cpu_ns of CPU time in all, under kernel then user addresses, each leaf first, as
 * sampler_add_offcpu. tid 0: summed per process. */
int sampler_add_oncpu(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
			     uint32_t nk, const uint64_t *uips, uint32_t nu, int64_t samples,
			     int64_t cpu_ns);
/* As sampler_add_oncpu, where upy[i] != 0 makes user frame i a Python frame (the id
 * sampler_py_name gave; uips[i] is then not used). */
int sampler_add_oncpu_py(strobe_sampler *s, int32_t pid, int32_t tid, const uint64_t *kips,
				uint32_t nk, const uint64_t *uips, const uint32_t *upy, uint32_t nu,
				int64_t samples, int64_t cpu_ns);
/* As sampler_add_oncpu_py, the samples carrying label set lset (from
 * sampler_labelset; 0: none) as sample labels of the profile. */
int sampler_add_oncpu_lset(strobe_sampler *s, int32_t pid, int32_t tid,
				  const uint64_t *kips, uint32_t nk, const uint64_t *uips,
				  const uint32_t *upy, uint32_t nu, uint32_t lset, int64_t samples,
				  int64_t cpu_ns);
/* One on-CPU sample the eBPF program could not walk by unwind tables (its process's were not
 * in yet), sent with its registers and a copy of its user stack (oncpu.c's copies). */
typedef struct sampler_copy {
	int32_t pid, tid;       /* tid 0: summed per process */
	int32_t walk_tid;       /* the sampled thread (the unwinder's) */
	const uint64_t *kips;   /* the kernel's stack, leaf first */
	const uint64_t *uips;   /* the program's own user walk, leaf first: the unwinder's walk
				   goes on by it where its own stops short */
	uint32_t nk, nu;
	const uint64_t *regs;   /* STROBE_UNWIND_NREGS user registers, perf_regs order */
	const uint8_t *stack;   /* the user stack from regs' sp up: stack_len bytes of stack_size
				   asked for */
	uint32_t stack_len, stack_size;
	uint32_t lset;          /* sampler_labelset's id, 0: none */
	bool pre_exec;          /* taken before an exec since the process's fork (see
				   sampler_add_oncpu_image): added as walked, not unwound */
	int64_t cpu_ns;
} sampler_copy;
/* Unwinds such copies from now on (sampler_add_oncpu_copy), as the perf path's samples with
 * unwind tables and the frame pointers' walk after them: the sampler of cpu_external walks
 * nothing itself and has no unwinder of its own until asked. 0/-ENOMEM. */
int sampler_unwind_copies(strobe_sampler *s);
/* Adds one sample copied with its stack (see sampler_copy); without an unwinder, as the
 * program walked it. */
int sampler_add_oncpu_copy(strobe_sampler *s, const sampler_copy *c);
/* As sampler_add_oncpu_lset; pre_exec: counted while the process ran the image it was forked
 * with, between its fork and its exec (the program's key says so), named by that image. */
int sampler_add_oncpu_image(strobe_sampler *s, int32_t pid, int32_t tid,
				  const uint64_t *kips, uint32_t nk, const uint64_t *uips,
				  const uint32_t *upy, uint32_t nu, uint32_t lset, bool pre_exec,
				  int64_t samples, int64_t cpu_ns);
/* The id of n label pairs (the C SDK's, read in the kernel) for sampler_add_oncpu_lset,
 * valid until the next sampler_reset_agg; 0 when n is 0 or out of memory (the samples
 * then go unlabelled, never lost). Keys the profile sets itself (pid, tid, process, thread,
 * lock_addr) are left out. */
uint32_t sampler_labelset(strobe_sampler *s, const strobe_labelpair *l, unsigned n);
/* The id (> 0) of a Python frame's name, file and line, kept as long as the sampler (at most
 * 1 << 20 of them; beyond, one id for "[python: too many distinct frames]"). */
uint32_t sampler_py_name(strobe_sampler *s, const char *function, const char *file,
				int64_t line);
/* Adds lock waits measured elsewhere (the agent's futex-wait program, locks.c): waits and their
 * total delay at lock address `lock`, under the waiter's user stack (leaf first). They appear
 * in lock profiles only (strobe_sampler_profile_opts.locks). */
int sampler_add_lock(strobe_sampler *s, int32_t pid, int32_t tid, uint64_t lock,
			    const uint64_t *uips, uint32_t nu, int64_t waits, int64_t delay_ns);
/* The processes with lock sums in the aggregate (at most cap), in the order of their first entry
 * of any kind (as strobe_sampler_pids). */
unsigned sampler_lock_pids(const strobe_sampler *s, pid_t *out, unsigned cap);
/* Starts a new aggregation period (frame and mapping tables are kept). */
void sampler_reset_agg(strobe_sampler *s);
/* After a reset_agg: forgets the processes and threads that exited (tracker_forget), so
 * that a long-running sampler's tables follow the host's live processes. Returns how many
 * processes were forgotten (0 when out of memory: they are tried again next time). */
unsigned sampler_forget_exited(strobe_sampler *s);

#endif
