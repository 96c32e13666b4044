// SPDX-License-Identifier: Apache-2.0
/*
 * From the sampler's aggregate to a pprof profile: sample types chosen by what was collected,
 * frames symbolized once per distinct (mapping, address), mappings with file, offset and build
 * ID, and the labels pid, process, tid, thread plus the caller's own.
 *
 * A frame the symbolizer cannot name keeps its mapping and address (pprof tools, and strobe's own
 * renderers, then show it as [file+0xoffset]), so it can be symbolized later from its build ID.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler_state.h"

typedef struct builder {
	strobe_sampler *s;
	strobe_profile *p;
	strobe_symbolizer *sym;
	uint32_t *loc_of_frame;     /* per frame id, 0 = not yet */
	uint32_t *mapping_of_map;   /* per map id: pprof mapping id, 0 = not yet */
	strobe_sym_object **obj;    /* per map id */
	uint8_t *obj_tried;
	uint32_t kernel_mapping_cache[64]; /* by a small hash of the module name */
	strobe_sym_frame fr[32];
	bool user_raw; /* strobe_sampler_profile_opts.user_raw */
	void (*raw_object)(void *ctx, const char *build_id_hex, const char *path);
	void *raw_ctx;
	int (*jit_unnamed)(void *ctx, pid_t pid); /* strobe_sampler_profile_opts.jit_unnamed */
	void *jit_ctx;
	pid_t jit_told[16]; /* processes jit_unnamed was told of in this profile (the last 16) */
	unsigned njit_told;
} builder;

static uint32_t str(strobe_profile *p, const char *s)
{
	return s ? strobe_str_intern0(p, s) : 0;
}

static strobe_sym_object *object_of(builder *b, uint32_t map_id)
{
	if (!b->sym || b->user_raw)
		return NULL;
	if (!b->obj_tried[map_id]) {
		const proc_map *m = tracker_map(&b->s->tr, map_id);
		b->obj_tried[map_id] = 1;
		strobe_sym_object *o = NULL;
		if (strobe_sym_object_get(b->sym, tracker_str(&b->s->tr, m->path), m->pid, m->dev,
					  m->ino, m->build_id, m->build_id_len, &o) == 0)
			b->obj[map_id] = o;
	}
	return b->obj[map_id];
}

static uint32_t user_mapping(builder *b, uint32_t map_id)
{
	if (b->mapping_of_map[map_id])
		return b->mapping_of_map[map_id];
	const proc_map *m = tracker_map(&b->s->tr, map_id);
	strobe_mapping pm = {0};
	pm.start = m->start;
	pm.limit = m->end;
	pm.offset = m->pgoff;
	pm.filename = str(b->p, tracker_str(&b->s->tr, m->path));
	char hex[2 * STROBE_BUILD_ID_MAX + 1] = "";
	/* The file as this process can open it: through the mapper's root (a container's view)
	 * when the mapping is one process's. */
	char path[4096];
	if (m->pid > 0)
		snprintf(path, sizeof path, "%s/%d/root%s",
			 b->s->tr.proc_root ? b->s->tr.proc_root : "/proc", (int)m->pid,
			 tracker_str(&b->s->tr, m->path));
	else
		snprintf(path, sizeof path, "%s", tracker_str(&b->s->tr, m->path));
	if (m->build_id_len) {
		strobe_build_id_hex(m->build_id, m->build_id_len, hex);
	} else if (!m->anon && b->user_raw) {
		/* The note alone: the server needs the build ID to find the debug file. */
		uint8_t id[STROBE_BUILD_ID_MAX];
		int n = strobe_elf_build_id(path, id, sizeof id);
		if (n <= 0 && (n = strobe_elf_build_id(tracker_str(&b->s->tr, m->path), id, sizeof id)) > 0)
			snprintf(path, sizeof path, "%s", tracker_str(&b->s->tr, m->path));
		if (n > 0)
			strobe_build_id_hex(id, (size_t)n, hex);
	} else if (!m->anon) {
		strobe_sym_object *o = object_of(b, map_id);
		size_t n = 0;
		const uint8_t *id = o ? strobe_sym_object_build_id(o, &n) : NULL;
		if (id && n)
			strobe_build_id_hex(id, n, hex);
	}
	if (b->user_raw && !m->anon && hex[0] && b->raw_object)
		b->raw_object(b->raw_ctx, hex, path);
	pm.build_id = str(b->p, hex);
	strobe_sym_object *o = m->anon ? NULL : object_of(b, map_id);
	if (o) {
		pm.has_functions = strobe_sym_object_has_symbols(o);
		pm.has_filenames = pm.has_line_numbers = pm.has_inline_frames =
			strobe_sym_object_has_lines(o);
	} else if (m->anon && b->sym) {
		pm.has_functions = 1; /* perf map names what it can */
	}
	return b->mapping_of_map[map_id] = strobe_mapping_intern(b->p, &pm);
}

static uint32_t kernel_mapping(builder *b, const char *module)
{
	if (!module)
		module = "[kernel.kallsyms]";
	uint32_t h = strobe_hash(module, strlen(module)) % 64;
	strobe_mapping pm = {0};
	pm.filename = str(b->p, module);
	uint32_t c = b->kernel_mapping_cache[h];
	if (c && strobe_mapping_get(b->p, c)->filename == pm.filename)
		return c;
	pm.has_functions = b->sym != NULL;
	return b->kernel_mapping_cache[h] = strobe_mapping_intern(b->p, &pm);
}

/* A shared library ("libc.so.6", "libfoo.so", "libbar.so.1.2") or a pseudo-file ("[vdso]"). */
static bool library_path(const char *path)
{
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	const char *so = strstr(base, ".so");
	return !*base || base[0] == '[' || (so && (so[3] == 0 || so[3] == '.'));
}

/* pprof readers take the first mapping for the program (`go tool pprof` prints it as "File:"),
 * and mappings are interned in the order frames meet them, leaf first: libc in most CPU stacks.
 * So the program's mapping is interned before any other: of the file mappings that are not
 * libraries, the one in the most samples (counted once per stack). */
static void intern_main_mapping(builder *b, const strobe_sampler_profile_opts *o)
{
	strobe_sampler *s = b->s;
	uint32_t nmaps = s->tr.maps.n;
	uint64_t *w = calloc((size_t)nmaps + 1, sizeof(*w));
	uint32_t *seen = calloc((size_t)nmaps + 1, sizeof(*seen));
	uint32_t best = 0;
	for (uint32_t id = agg_first(&s->agg, o->only_pid); w && seen && id != AGG_END;
	     id = agg_next(&s->agg, o->only_pid, id)) {
		const sampler_agg_key *k = agg_key(&s->agg, id);
		int64_t n = agg_vals(&s->agg, id)[V_SAMPLES];
		uint64_t add = n > 0 ? (uint64_t)n : 1;
		for (uint32_t f = 0; f < k->n; f++) {
			const sampler_frame_key *fk = strobe_itab_get(&s->frames, k->frame[f], NULL);
			uint32_t m = fk->map;
			if (m <= STROBE_MAP_KERNEL || m > nmaps || seen[m] == id + 1)
				continue;
			seen[m] = id + 1;
			w[m] += add;
		}
	}
	for (uint32_t m = STROBE_MAP_KERNEL + 1; w && seen && m <= nmaps; m++) {
		if (!w[m] || (best && w[m] <= w[best]))
			continue;
		const proc_map *mp = tracker_map(&s->tr, m);
		if (!mp->anon && !library_path(tracker_str(&s->tr, mp->path)))
			best = m;
	}
	free(w);
	free(seen);
	if (!best)
		return;
	user_mapping(b, best);
	/* With release_objects (strobe record: one binary's tables in memory at a time) its tables
	 * are read again when its frames are named (symbolize_by_object). Without (the agent, which
	 * keeps every binary's symbols), releasing it here made every profile reopen the program's
	 * file, re-read and re-sort its symbol table at its first frame that missed the symbol
	 * cache, and trim the heap: most of the agent's own CPU beside 200 busy processes. */
	if (b->sym && b->obj[best] && o->release_objects)
		strobe_sym_object_release(b->sym, b->obj[best]);
}

/* pprof lines (leaf first) from symbolizer frames. */
static uint32_t location_of(builder *b, const sampler_frame_key *k, uint32_t mapping, int n)
{
	strobe_line lines[32];
	if (n > 32)
		n = 32;
	for (int i = 0; i < n; i++) {
		strobe_function f = {0};
		f.name = str(b->p, b->fr[i].function);
		f.system_name = b->fr[i].system_name && b->fr[i].system_name != b->fr[i].function
					? str(b->p, b->fr[i].system_name)
					: f.name;
		f.filename = str(b->p, b->fr[i].file);
		f.start_line = b->fr[i].start_line;
		lines[i] = (strobe_line){.function = strobe_function_intern(b->p, &f),
					 .discriminator = b->fr[i].discriminator,
					 .line = b->fr[i].line,
					 .column = b->fr[i].column};
	}
	return strobe_location_intern(b->p, mapping, k->addr, lines, (uint32_t)n, false);
}

/* Tells the owner of opts.jit_unnamed of a process with unnamed JIT frames, once per profile. */
static int jit_unnamed(builder *b, pid_t pid)
{
	if (!b->jit_unnamed)
		return 0;
	for (unsigned i = 0; i < b->njit_told && i < 16; i++)
		if (b->jit_told[i] == pid)
			return 0;
	b->jit_told[b->njit_told++ % 16] = pid;
	int rc = b->jit_unnamed(b->jit_ctx, pid);
	if (rc > 0)
		strobe_sym_forget_pid(b->sym, pid); /* a new map: read it again now */
	return rc;
}

static uint32_t frame_location(builder *b, uint32_t frame_id)
{
	if (b->loc_of_frame[frame_id])
		return b->loc_of_frame[frame_id];
	const sampler_frame_key *k = strobe_itab_get(&b->s->frames, frame_id, NULL);
	uint64_t look = k->call ? k->addr - 1 : k->addr;
	uint32_t mapping = 0;
	int n = 0;
	if (k->map == STROBE_MAP_PY) {
		/* "function\0file\0" then the line (sampler_py_name) */
		size_t len = 0;
		const char *key = strobe_itab_get(&b->s->pynames, (uint32_t)k->addr, &len);
		if (key && len > 10) {
			const char *file = key + strlen(key) + 1;
			int64_t line;
			memcpy(&line, key + len - 8, 8);
			b->fr[0] = (strobe_sym_frame){.function = key, .file = *file ? file : NULL,
						      .line = line};
			n = 1;
		}
		mapping = kernel_mapping(b, "[python]");
	} else if (k->map == STROBE_MAP_KERNEL) {
		const char *module = NULL;
		if (b->sym)
			n = strobe_sym_kernel(b->sym, look, &b->fr[0], &module) > 0;
		mapping = kernel_mapping(b, module);
	} else if (k->map != STROBE_MAP_NONE) {
		const proc_map *m = tracker_map(&b->s->tr, k->map);
		mapping = user_mapping(b, k->map);
		if (m->anon) {
			if (b->sym)
				n = strobe_sym_perfmap(b->sym, m->pid, look, &b->fr[0]) > 0;
			if (b->sym && !n && jit_unnamed(b, m->pid) > 0)
				n = strobe_sym_perfmap(b->sym, m->pid, look, &b->fr[0]) > 0;
		} else {
			strobe_sym_object *o = object_of(b, k->map);
			if (o) {
				n = strobe_sym_lookup(b->sym, o, look - m->start + m->pgoff, b->fr, 32);
				if (n < 0)
					n = 0;
			}
		}
	}
	return b->loc_of_frame[frame_id] = location_of(b, k, mapping, n);
}

static int add_label(strobe_profile *p, strobe_label *l, unsigned *n, const char *key,
		     const char *val)
{
	l[*n] = (strobe_label){.key = str(p, key), .str = str(p, val && *val ? val : "?")};
	(*n)++;
	return 0;
}

typedef struct obj_frame {
	strobe_sym_object *obj;
	uint32_t frame;
} obj_frame;

static int by_object(const void *a, const void *b)
{
	const obj_frame *x = a, *y = b;
	if (x->obj != y->obj)
		return (uintptr_t)x->obj < (uintptr_t)y->obj ? -1 : 1;
	return x->frame < y->frame ? -1 : x->frame > y->frame;
}

/* Names every user frame the profile will use, one object at a time, releasing each object's
 * tables once its frames are named: the debug information of a busy host's binaries together
 * is tens of megabytes, one at a time a few. */
static int symbolize_by_object(builder *b, const strobe_sampler_profile_opts *o)
{
	strobe_sampler *s = b->s;
	uint8_t *need = calloc(s->frames.n + 1, 1);
	obj_frame *v = NULL;
	size_t n = 0, cap = 0;
	if (!need)
		return -ENOMEM;
	for (uint32_t id = agg_first(&s->agg, o->only_pid); id != AGG_END;
	     id = agg_next(&s->agg, o->only_pid, id)) {
		const sampler_agg_key *k = agg_key(&s->agg, id);
		for (uint32_t i = 0; i < k->n; i++)
			need[k->frame[i]] = 1;
	}
	int rc = 0;
	for (uint32_t f = 1; f < s->frames.n && rc == 0; f++) {
		if (!need[f])
			continue;
		const sampler_frame_key *fk = strobe_itab_get(&s->frames, f, NULL);
		if (fk->map == STROBE_MAP_NONE || fk->map == STROBE_MAP_KERNEL ||
		    fk->map == STROBE_MAP_PY || tracker_map(&s->tr, fk->map)->anon)
			continue;
		strobe_sym_object *obj = object_of(b, fk->map);
		if (!obj)
			continue;
		/* Closed again until its turn: fifty binaries held open at once, each with its
		 * file mapped and libdwfl's state, are 4 MB before any is named. */
		strobe_sym_object_release(b->sym, obj);
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			obj_frame *nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			v = nv;
		}
		v[n++] = (obj_frame){obj, f};
	}
	if (n)
		qsort(v, n, sizeof(*v), by_object);
	for (size_t i = 0; i < n && rc == 0; i++) {
		if (frame_location(b, v[i].frame) == UINT32_MAX)
			rc = -ENOMEM;
		if (i + 1 == n || v[i + 1].obj != v[i].obj) {
			/* the mapping's flags were read when its first frame was named */
			strobe_sym_object_release(b->sym, v[i].obj);
		}
	}
	free(v);
	free(need);
	return rc;
}

strobe_profile *strobe_sampler_profile(strobe_sampler *s, const strobe_sampler_profile_opts *o,
				       strobe_err *err)
{
	sampler_flush_open(s);
	strobe_profile *p = strobe_profile_new();
	builder b = {.s = s, .p = p, .sym = o->sym, .user_raw = o->user_raw,
		     .raw_object = o->raw_object, .raw_ctx = o->raw_ctx,
		     .jit_unnamed = o->jit_unnamed, .jit_ctx = o->jit_ctx};
	if (!p)
		return NULL;
	b.loc_of_frame = calloc(s->frames.n + 1, sizeof(uint32_t));
	b.mapping_of_map = calloc(s->tr.maps.n + 1, sizeof(uint32_t));
	b.obj = calloc(s->tr.maps.n + 1, sizeof(*b.obj));
	b.obj_tried = calloc(s->tr.maps.n + 1, 1);
	int rc = (b.loc_of_frame && b.mapping_of_map && b.obj && b.obj_tried) ? 0 : -ENOMEM;

	/* Sample types, from the value slots collected. */
	static const struct {
		int slot;
		const char *type, *unit;
	} all[] = {
		{V_SAMPLES, "samples", "count"},      {V_CPU_NS, "cpu", "nanoseconds"},
		{V_OFF_NS, "off_cpu", "nanoseconds"}, {V_BLOCKED_NS, "blocked", "nanoseconds"},
		{V_RUNQ_NS, "runqueue", "nanoseconds"}, {V_SWITCHES, "switches", "count"},
		{-1, "wall", "nanoseconds"},
	};
	bool cpu = (s->o.events & STROBE_EV_CPU) && !s->no_cpu_types, off = (s->o.events & STROBE_EV_OFFCPU) || s->ext_offcpu;
	bool locks = o->locks || s->lock_only;
	int slot[8], nt = 0;
	if (locks) {
		/* Go's mutex profile's types, so pprof and Pyroscope read it as one */
		cpu = off = false;
		rc = strobe_profile_add_type(p, "contentions", "count");
		if (rc == 0)
			rc = strobe_profile_add_type(p, "delay", "nanoseconds");
		slot[nt++] = V_WAITS;
		slot[nt++] = V_DELAY_NS;
	}
	for (size_t i = 0; i < sizeof(all) / sizeof(*all) && rc == 0 && !locks; i++) {
		bool want = all[i].slot == V_SAMPLES || all[i].slot == V_CPU_NS ? cpu
			    : all[i].slot < 0				       ? cpu && off
									       : off;
		if (!want)
			continue;
		if (all[i].slot == V_CPU_NS && s->o.cycles)
			rc = strobe_profile_add_type(p, "cycles", "count");
		else
			rc = strobe_profile_add_type(p, all[i].type, all[i].unit);
		slot[nt++] = all[i].slot;
	}
	if (rc == 0 && locks) {
		p->default_type = 1; /* delay */
		p->period_type.type = str(p, "contentions");
		p->period_type.unit = str(p, "count");
		p->period = 1;
	} else if (rc == 0) {
		p->default_type = cpu && off ? nt - 1 : cpu ? 1 : 0; /* wall, cpu or off_cpu */
		p->period_type.type = str(p, !cpu ? "off_cpu" : s->o.cycles ? "cycles" : "cpu");
		p->period_type.unit = str(p, cpu && s->o.cycles ? "count" : "nanoseconds");
		p->period = cpu && !s->o.cycles ? s->period_ns : 1;
	}
	if (rc == 0) {
		p->time_nanos = s->start_real_ns;
		p->duration_nanos = s->start_ns >= 0 && s->ord.horizon_ns > s->start_ns
					    ? s->ord.horizon_ns - s->start_ns
					    : 0;
	}

	if (rc == 0)
		intern_main_mapping(&b, o);
	if (rc == 0 && b.sym && o->release_objects)
		rc = symbolize_by_object(&b, o);
	strobe_label *labels = calloc(5 + 8 /* an SDK label set */ + o->nlabels, sizeof(*labels));
	if (!labels)
		rc = -ENOMEM;
	for (uint32_t id = agg_first(&s->agg, o->only_pid); rc == 0 && id != AGG_END;
	     id = agg_next(&s->agg, o->only_pid, id)) {
		const sampler_agg_key *k = agg_key(&s->agg, id);
		const int64_t *v = agg_vals(&s->agg, id);
		int64_t vals[8];
		bool any = false;
		for (int t = 0; t < nt; t++) {
			if (slot[t] >= 0)
				vals[t] = v[slot[t]];
			else if (__builtin_add_overflow(v[V_CPU_NS], v[V_OFF_NS], &vals[t]))
				vals[t] = INT64_MAX;
			any |= vals[t] != 0;
		}
		if (!any)
			continue;
		/* The stack, root first: frame[n-1] is the outermost caller. */
		uint32_t stack = 0;
		const proc *pr = tracker_proc(&s->tr, k->pid, false);
		if (o->process_frames) {
			const char *name = pr && pr->comm[0] ? pr->comm : "?";
			uint32_t loc = strobe_location_for_name(p, name, strlen(name));
			stack = loc == UINT32_MAX ? UINT32_MAX : strobe_stack_push(p, 0, loc);
			if (stack == UINT32_MAX) {
				rc = -ENOMEM;
				break;
			}
		}
		for (uint32_t f = k->n; f-- > 0;) {
			uint32_t loc = frame_location(&b, k->frame[f]);
			if (loc == UINT32_MAX || (stack = strobe_stack_push(p, stack, loc)) == UINT32_MAX) {
				rc = -ENOMEM;
				break;
			}
		}
		if (rc < 0)
			break;
		if (!k->n) {
			/* no frame at all (the kernel's stack map was full, or no stack could be read):
			 * kept under one frame, as perf's [unknown], so that totals stay whole; a
			 * sample without locations is dropped by pprof readers and renderers */
			uint32_t loc = strobe_location_for_name(p, "[unknown]", 9);
			if (loc == UINT32_MAX || (stack = strobe_stack_push(p, stack, loc)) == UINT32_MAX) {
				rc = -ENOMEM;
				break;
			}
		}
		unsigned nl = 0;
		char num[16];
		snprintf(num, sizeof(num), "%d", (int)k->pid);
		add_label(p, labels, &nl, "pid", num);
		add_label(p, labels, &nl, "process", pr ? pr->comm : NULL);
		if (o->per_thread) {
			const proc_thread *th = tracker_thread(&s->tr, k->tid, 0, false);
			snprintf(num, sizeof(num), "%d", (int)k->tid);
			add_label(p, labels, &nl, "tid", num);
			add_label(p, labels, &nl, "thread", th ? th->comm : NULL);
		}
		if (locks && k->lock) { /* tells one mutex from another */
			char addr[24];
			snprintf(addr, sizeof(addr), "0x%" PRIx64, k->lock);
			add_label(p, labels, &nl, "lock_addr", addr);
		}
		if (k->lset) { /* the C SDK's labels of these samples (sampler_labelset) */
			size_t len = 0;
			const char *q = strobe_itab_get(&s->lsets, k->lset, &len), *e = q + len;
			for (unsigned j = 0; j < 8 && q < e; j++) {
				const char *val = q + strlen(q) + 1;
				labels[nl++] = (strobe_label){.key = str(p, q), .str = str(p, val)};
				q = val + strlen(val) + 1;
			}
		}
		for (unsigned i = 0; i < o->nlabels; i++) {
			const char *eq = strchr(o->labels[i], '=');
			if (!eq)
				continue;
			labels[nl++] = (strobe_label){
				.key = strobe_str_intern(p, o->labels[i], (size_t)(eq - o->labels[i])),
				.str = str(p, eq + 1)};
		}
		uint32_t ls = strobe_labelset_intern(p, labels, nl);
		if (ls == UINT32_MAX)
			rc = -ENOMEM;
		else
			rc = strobe_sample_add(p, stack, ls, vals);
	}
	free(labels);
	free(b.loc_of_frame);
	free(b.mapping_of_map);
	free(b.obj);
	free(b.obj_tried);
	if (rc < 0) {
		strobe_errf(err, rc, "building the profile: %s", strerror(-rc));
		strobe_profile_free(p);
		errno = -rc;
		return NULL;
	}
	if (o->reset)
		sampler_reset_agg(s);
	return p;
}
