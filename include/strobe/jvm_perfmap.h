// SPDX-License-Identifier: Apache-2.0
/*
 * Names for a running JVM's compiled Java code, without restarting it or loading an agent jar:
 * HotSpot writes /tmp/perf-PID.map (the perf map the symbolizer already reads) when asked with
 * the diagnostic command Compiler.perfmap (JDK 17 and later), and it can be asked through its
 * dynamic-attach socket, as `jcmd PID Compiler.perfmap` does.
 *
 * strobe_jvm_write_perfmap() does that once and blocks (at most timeout_ms); `strobe record`
 * calls it when a profile is built. strobe_jvm_maps is the agent's form: a thread of its own
 * that asks each JVM whose frames went unnamed, again when later code goes unnamed (the JIT
 * compiles, recompiles and moves code all the time), never more often than every refresh
 * period per process, and removes the maps it caused once their process is gone. It also
 * says, once, which Node.js processes run without --perf-basic-prof (V8's perf map cannot be
 * turned on from outside).
 */
#ifndef STROBE_JVM_PERFMAP_H
#define STROBE_JVM_PERFMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* proc_root, here and below: where /proc is (NULL: /proc), as the agent's other readers take it;
 * a process's status, mappings and files (its /tmp, through PROC_ROOT/PID/root) are read there. */

/* Whether pid runs a HotSpot JVM (libjvm.so is mapped). */
bool strobe_jvm_is_hotspot(const char *proc_root, pid_t pid);

/*
 * Asks the JVM pid to write its perf map now. 0 when it did; -ENOTSUP when pid is not a
 * HotSpot JVM, attaching is off (-XX:+DisableAttachMechanism), SIGQUIT is not the JVM's
 * (-Xrs: the signal would kill it, so it is never sent) or the JVM has no Compiler.perfmap
 * (before JDK 17); -ETIMEDOUT, -ESRCH, -EACCES or another -errno otherwise. why (may be NULL)
 * receives a sentence saying which.
 */
int strobe_jvm_write_perfmap(const char *proc_root, pid_t pid, int timeout_ms, char *why,
			     size_t whylen);

typedef struct strobe_jvm_maps strobe_jvm_maps;

/* say(ctx, pid, failed, msg) reports each JVM's first outcome, and each Node.js process
 * without a perf map, once. */
typedef void (*strobe_jvm_say_fn)(void *ctx, pid_t pid, bool failed, const char *msg);

/* refresh_ms: the least time between two requests to one JVM (0: 5000); proc_root is copied.
 * NULL on ENOMEM. */
strobe_jvm_maps *strobe_jvm_maps_new(const char *proc_root, unsigned refresh_ms,
				     strobe_jvm_say_fn say, void *ctx);

/* Frames of pid in anonymous executable memory went unnamed. Never blocks; returns 0. */
int strobe_jvm_maps_unnamed(strobe_jvm_maps *m, pid_t pid);

/* Requests made and succeeded so far (for /status). */
void strobe_jvm_maps_counts(strobe_jvm_maps *m, unsigned long *asked, unsigned long *written);

/* Stops the thread, removes the maps this wrote whose process is gone, frees. */
void strobe_jvm_maps_free(strobe_jvm_maps *m);

#endif
