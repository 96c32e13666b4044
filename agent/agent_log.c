// SPDX-License-Identifier: Apache-2.0
/*
 * What the agent's three threads share besides their data: the log hook, the last error /status
 * shows, and the control flags the admin port and signals set (stop, pause, resume), with the
 * wake-up that makes the sleeping loop see them at once. The sampling loop (agent.c), the admin
 * server (admin.c) and the sender (sender.c) all call these; here, in a module of their own,
 * admin.c and sender.c depend on it and not on the loop that starts them.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "agent_impl.h"

void agent_log(strobe_agent *a, int level, const char *fmt, ...)
{
	if (!a->o->log || level > a->o->log_level)
		return;
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	a->o->log(a->o->log_ctx, level, msg);
}

void agent_set_error(strobe_agent *a, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	pthread_mutex_lock(&a->mu);
	vsnprintf(a->st.last_error, sizeof(a->st.last_error), fmt, ap);
	pthread_mutex_unlock(&a->mu);
	va_end(ap);
}

void agent_wake(strobe_agent *a)
{
	uint64_t one = 1;
	int e = errno; /* (in a signal handler: the interrupted code's errno is kept) */
	/* EAGAIN: the counter is full, so the loop is being woken already */
	ssize_t r = a->wake_fd >= 0 ? write(a->wake_fd, &one, sizeof(one)) : 0;
	(void)r;
	errno = e;
}

void strobe_agent_stop(strobe_agent *a)
{
	atomic_store(&a->stop, 1);
	agent_wake(a);
}
void strobe_agent_pause(strobe_agent *a)
{
	atomic_store(&a->want_pause, 1);
	agent_wake(a);
}
void strobe_agent_resume(strobe_agent *a)
{
	atomic_store(&a->want_pause, 0);
	agent_wake(a);
}
unsigned strobe_agent_admin_port(const strobe_agent *a) { return a->admin_port; }
