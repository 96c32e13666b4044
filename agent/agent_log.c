// SPDX-License-Identifier: Apache-2.0
/*
 * What the agent's three threads share besides their data: the log hook, the last error /status
 * shows, and the control flags the admin port and signals set (stop, pause, resume). The
 * sampling loop (agent.c), the admin server (admin.c) and the sender (sender.c) all call these;
 * here, in a module of their own, admin.c and sender.c depend on it and not on the loop that
 * starts them.
 */
#include <stdarg.h>
#include <stdio.h>

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

void strobe_agent_stop(strobe_agent *a) { atomic_store(&a->stop, 1); }
void strobe_agent_pause(strobe_agent *a) { atomic_store(&a->want_pause, 1); }
void strobe_agent_resume(strobe_agent *a) { atomic_store(&a->want_pause, 0); }
unsigned strobe_agent_admin_port(const strobe_agent *a) { return a->admin_port; }
