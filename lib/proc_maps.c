// SPDX-License-Identifier: Apache-2.0
/*
 * /proc/PID/maps (include/strobe/proc_maps.h). The kernel writes each line as
 * "%08lx-%08lx %c%c%c%c %08llx %02x:%02x %lu" and, for a file or a named region, pads to a column
 * and adds the path; the path may hold spaces and ends with " (deleted)" when the file is gone.
 * A line holds at most PATH_MAX bytes of path, which the line buffer leaves room for.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "strobe/proc_maps.h"

#define LINE_MAX_BYTES (4096 + 256) /* PATH_MAX of path and the fields before it */

int strobe_maps_parse_line(char *line, strobe_maps_entry *e)
{
	int n = 0;
	char perms[8];
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %x:%x %" SCNu64 " %n", &e->start,
		   &e->end, perms, &e->offset, &e->dev_major, &e->dev_minor, &e->inode, &n) < 7 ||
	    strlen(perms) != 4)
		return -EINVAL;
	memcpy(e->perms, perms, 5);
	char *path = line + n;
	path[strcspn(path, "\n")] = 0;
	e->path = path;
	return 0;
}

FILE *strobe_proc_maps_open(const char *proc_root, int pid)
{
	char path[4096];
	if (!proc_root)
		proc_root = "/proc";
	if (pid >= 0)
		snprintf(path, sizeof(path), "%s/%d/maps", proc_root, pid);
	else
		snprintf(path, sizeof(path), "%s/self/maps", proc_root);
	return fopen(path, "re");
}

int strobe_proc_maps_walk(FILE *f, int (*fn)(void *ctx, const strobe_maps_entry *e), void *ctx)
{
	char line[LINE_MAX_BYTES];
	int rc = 0;
	while (rc >= 0 && fgets(line, sizeof(line), f)) {
		size_t len = strlen(line);
		if (len && line[len - 1] != '\n' && !feof(f)) {
			/* longer than any line the kernel writes: skip the rest, and the line */
			int c;
			while ((c = fgetc(f)) != EOF && c != '\n')
				;
			continue;
		}
		strobe_maps_entry e;
		if (strobe_maps_parse_line(line, &e) == 0)
			rc = fn(ctx, &e);
	}
	fclose(f);
	return rc < 0 ? rc : 0;
}

int strobe_proc_maps_read(const char *proc_root, int pid,
			  int (*fn)(void *ctx, const strobe_maps_entry *e), void *ctx)
{
	FILE *f = strobe_proc_maps_open(proc_root, pid);
	return f ? strobe_proc_maps_walk(f, fn, ctx) : -errno;
}
