// SPDX-License-Identifier: Apache-2.0
/*
 * Python stacks, user space's half (the program's: agent/python.bpf.h). For the on-CPU eBPF
 * program's loader (agent/oncpu.c):
 *
 *   discovery (py_see): a process is a Python process when its executable or a mapped
 *     libpython exports _PyRuntime (.dynsym: Debian's python3.11 is stripped but keeps it). Its
 *     version is Py_Version (3.11+) read from the process, else the file's name (python3.X,
 *     libpython3.X); its offsets come from python_offsets.c, checked against the process (the
 *     first thread state must point back to its interpreter), then go to the program's pycfg
 *     map with _PyRuntime's address. _PyEval_EvalFrameDefault's address range is kept for the
 *     merge. A process whose interpreter is not initialized yet is looked at again later; one
 *     of an unknown version, or whose offsets did not fit, keeps native frames, and a note
 *     says so once per interpreter binary;
 *   naming (name_of): a frame's code object is read with process_vm_readv: co_qualname (3.11+;
 *     co_name before), co_filename and the line: from the location table (3.11+) at the
 *     frame's instruction, co_firstlineno (the def line) for 3.9 and 3.10. Per (process, code
 *     object) in a cache of at most CODE_CAP entries (emptied when full; a code object freed and
 *     another allocated at its address within a process's lifetime is named after the first
 *     until then);
 *   merging (py_merge): leaf first, each native frame in _PyEval_EvalFrameDefault is
 *     replaced by the Python frames it ran: those up to and including the next entry frame
 *     (3.11's is_entry, 3.12+'s shim, every frame for 3.9 and 3.10). Python frames left over
 *     (the native walk ended before reaching their evaluation frames) go at the root's end.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "python_host.h"
#include "strobe/proc_maps.h"
#include "sampler_ext.h"

#define PROC_CAP 8192u   /* processes remembered (a power of two) */
#define CODE_CAP 16384u  /* code objects named (a power of two) */
#define STR_CAP 512      /* bytes of a name or file kept */
#define LT_CAP 8192      /* bytes of a location table read */
#define SAID_CAP 64      /* interpreter binaries a note was given for */
#define PY_RECHECK_DRAINS 6 /* with images told: a known process's executable looked at again */

/* P_GONE: a Python process found exited at a drain; the rest of that drain's samples are still
 * merged with its offsets (names from the code cache), then it is looked at anew (pid reuse). */
enum { P_EMPTY, P_NOT, P_PENDING, P_PY, P_UNKNOWN, P_GONE };

typedef struct pyproc {
	uint32_t pid, state;
	uint64_t dev, ino;   /* of /proc/pid/exe when looked at */
	uint64_t eval_lo, eval_hi;
	int tries;           /* P_PENDING: looks so far */
	uint32_t seen;       /* the drain it was last looked at in (py_see) */
	bool new_image;      /* py_new_image since: look again at the next see */
	py_offsets off;
} pyproc;

typedef struct pycode {
	uint32_t pid, used;
	uint64_t code;
	char *func, *file;
	int64_t first;
	uint8_t *lt;
	uint32_t nlt;
} pycode;

struct py_host {
	int cfg_fd;
	char root[256];
	void (*note)(void *, const char *);
	void *ctx;
	pyproc *procs;
	pycode *codes;
	uint32_t ncodes;
	uint64_t said[SAID_CAP];
	unsigned nsaid;
	uint32_t drain;
	bool images_told;     /* py_new_image is called (for every new image) */
	py_stats st;
};

void py_drain(py_host *py)
{
	py->drain++;
}

static uint32_t hash32(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (uint32_t)x;
}

py_host *py_new(int cfg_fd, const char *proc_root,
			 void (*note)(void *ctx, const char *msg), void *ctx)
{
	py_host *py = calloc(1, sizeof(*py));
	if (!py)
		return NULL;
	py->procs = calloc(PROC_CAP, sizeof(*py->procs));
	py->codes = calloc(CODE_CAP, sizeof(*py->codes));
	if (!py->procs || !py->codes) {
		py_free(py);
		return NULL;
	}
	py->cfg_fd = cfg_fd;
	snprintf(py->root, sizeof(py->root), "%s", proc_root ? proc_root : "/proc");
	py->note = note;
	py->ctx = ctx;
	elf_version(EV_CURRENT);
	return py;
}

static void codes_clear(py_host *py)
{
	for (uint32_t i = 0; i < CODE_CAP; i++) {
		free(py->codes[i].func);
		free(py->codes[i].file);
		free(py->codes[i].lt);
	}
	memset(py->codes, 0, CODE_CAP * sizeof(*py->codes));
	py->ncodes = 0;
}

void py_free(py_host *py)
{
	if (!py)
		return;
	if (py->codes)
		codes_clear(py);
	free(py->codes);
	free(py->procs);
	free(py);
}

static pyproc *proc_slot(py_host *py, uint32_t pid, bool create)
{
	uint32_t h = hash32(pid) & (PROC_CAP - 1);
	for (uint32_t i = 0; i < PROC_CAP; i++) {
		pyproc *p = &py->procs[(h + i) & (PROC_CAP - 1)];
		if (p->pid == pid && p->state != P_EMPTY)
			return p;
		if (p->state == P_EMPTY) {
			if (!create)
				return NULL;
			*p = (pyproc){.pid = pid, .state = P_NOT};
			return p;
		}
	}
	/* full: start again (the processes are looked at anew, which is cheap) */
	if (!create)
		return NULL;
	memset(py->procs, 0, PROC_CAP * sizeof(*py->procs));
	pyproc *p = &py->procs[h];
	*p = (pyproc){.pid = pid, .state = P_NOT};
	return p;
}

static int rd(uint32_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec l = {buf, len}, r = {(void *)(uintptr_t)addr, len};
	ssize_t n = process_vm_readv((pid_t)pid, &l, 1, &r, 1, 0);
	return n == (ssize_t)len ? 0 : -EFAULT;
}

static void say(py_host *py, uint64_t key, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void say(py_host *py, uint64_t key, const char *fmt, ...)
{
	for (unsigned i = 0; i < py->nsaid; i++)
		if (py->said[i] == key)
			return;
	if (py->nsaid < SAID_CAP)
		py->said[py->nsaid++] = key;
	else
		return; /* (so many kinds of interpreter: said enough) */
	if (!py->note)
		return;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	py->note(py->ctx, msg);
}

/* What an interpreter binary exports: _PyRuntime, Py_Version, _PyEval_EvalFrameDefault
 * (st_value; the last with its size), and the first load segment's address. */
typedef struct pysyms {
	uint64_t runtime, version, eval, eval_size, vaddr0;
} pysyms;

static int elf_syms(const char *path, pysyms *ps)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	int rc = -ENOENT;
	*ps = (pysyms){0};
	size_t nph = 0;
	if (e && elf_getphdrnum(e, &nph) == 0) {
		for (size_t i = 0; i < nph; i++) {
			GElf_Phdr ph;
			if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
				ps->vaddr0 = ph.p_vaddr - ph.p_offset;
				break;
			}
		}
	}
	Elf_Scn *scn = NULL;
	while (e && (scn = elf_nextscn(e, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		size_t n = sh.sh_size / sh.sh_entsize;
		for (size_t i = 0; d && i < n && i < 1000000; i++) {
			GElf_Sym sym;
			if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			const char *name = elf_strptr(e, sh.sh_link, sym.st_name);
			if (!name || (name[0] != '_' && name[0] != 'P'))
				continue;
			if (!strcmp(name, "_PyRuntime"))
				ps->runtime = sym.st_value;
			else if (!strcmp(name, "Py_Version"))
				ps->version = sym.st_value;
			else if (!strcmp(name, "_PyEval_EvalFrameDefault")) {
				ps->eval = sym.st_value;
				ps->eval_size = sym.st_size;
			}
		}
	}
	if (ps->runtime)
		rc = 0;
	if (e)
		elf_end(e);
	close(fd);
	return rc;
}

/* 3.X from a file name (python3.11, libpython3.11.so.1.0), 0 when none. */
static unsigned minor_of_name(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	const char *p = strstr(b, "python3.");
	if (!p)
		return 0;
	return (unsigned)strtoul(p + 8, NULL, 10);
}

/* Whether the offsets fit the process: its main interpreter's first thread state points back
 * to it (PyThreadState.interp is the third pointer in every version known). 1: yes, 0: no
 * interpreter or thread yet, -1: they do not fit. */
static int check(uint32_t pid, uint64_t runtime, const struct py_cfg *c)
{
	uint64_t interp = 0, ts = 0, back = 0;
	if (rd(pid, runtime + c->rt_interp_head, &interp, 8) < 0)
		return -1;
	if (!interp)
		return 0;
	if (rd(pid, interp + c->is_threads_head, &ts, 8) < 0)
		return -1;
	if (!ts)
		return 0;
	if (rd(pid, ts + 16, &back, 8) < 0)
		return -1;
	return back == interp ? 1 : -1;
}

/* The search of one process's mappings for its interpreter: the first python* or libpython*
 * file mapped from offset 0 whose symbols name the runtime. */
typedef struct py_find {
	const char *root;
	uint32_t pid;
	char path[512], last[512]; /* the file tried last: as we open it, as the process maps it */
	bool found;
	pysyms ps;
	uint64_t lo, bias;
} py_find;

static int find_interp(void *ctx, const strobe_maps_entry *e)
{
	py_find *pf = ctx;
	if (pf->found || e->path[0] != '/' || e->offset != 0 || strlen(e->path) >= sizeof(pf->last))
		return 0;
	const char *b = strrchr(e->path, '/') + 1;
	if ((strncmp(b, "python", 6) && strncmp(b, "libpython", 9)) || !strcmp(e->path, pf->last))
		return 0;
	snprintf(pf->last, sizeof(pf->last), "%s", e->path);
	snprintf(pf->path, sizeof(pf->path), "%s/%" PRIu32 "/root%s", pf->root, pf->pid, e->path);
	if (elf_syms(pf->path, &pf->ps) == 0) {
		pf->found = true;
		pf->lo = e->start;
		pf->bias = e->start - (pf->ps.vaddr0 & ~0xfffull);
	}
	return 0;
}

static void look(py_host *py, pyproc *p)
{
	py_find pf = {.root = py->root, .pid = p->pid};
	if (strobe_proc_maps_read(py->root, (int)p->pid, find_interp, &pf) < 0 || !pf.found) {
		p->state = P_NOT;
		return;
	}
	const char *path = pf.path, *last = pf.last;
	const pysyms ps = pf.ps;
	uint64_t lo = pf.lo, bias = pf.bias;
	struct stat sb;
	uint64_t key = stat(path, &sb) == 0 ? (uint64_t)sb.st_dev << 40 ^ sb.st_ino : hash32(lo);
	uint32_t ver = 0;
	unsigned minor = 0;
	if (ps.version && rd(p->pid, bias + ps.version, &ver, 4) == 0 && (ver >> 24) == 3)
		minor = (ver >> 16) & 0xff;
	else
		minor = minor_of_name(last);
	uint64_t runtime = bias + ps.runtime;
	py_offsets o;
	int rc = -ENOENT;
	if (minor >= 13) {
		uint8_t d[1024];
		size_t n = py_debug_offsets_len();
		rc = n <= sizeof(d) && rd(p->pid, runtime, d, n) == 0
			     ? py_offsets_debug(d, n, minor, &o)
			     : -EFAULT;
	} else if (minor) {
		rc = py_offsets_for(minor, &o);
	}
	if (rc < 0) {
		p->state = P_UNKNOWN;
		py->st.unknown++;
		say(py, key, "Python: %s (process %" PRIu32 ") is Python 3.%u%s, whose layout strobe "
		    "does not know (%s): its processes keep native frames only", last, p->pid,
		    minor, minor ? "" : " (version unreadable)",
		    rc == -ENOTSUP ? "_Py_DebugOffsets of another layout, or a free-threaded build"
				   : "versions known: 3.9 to 3.12 by table, 3.13 by _Py_DebugOffsets");
		return;
	}
	int ok = check(p->pid, runtime, &o.cfg);
	/* ok 0: starting up, no interpreter or thread yet (a process found at its exec). Its
	 * frames are read from now on all the same (the program finds no thread state until there
	 * is one) and the offsets checked at the next look: P_PENDING. */
	if (ok < 0) {
		p->state = P_UNKNOWN;
		py->st.unknown++;
		say(py, key, "Python: %s (process %" PRIu32 ") is Python 3.%u but its thread list is not "
		    "where the offsets (%s) say: its processes keep native frames only", last,
		    p->pid, minor, o.source);
		return;
	}
	if (!ps.eval)
		say(py, key, "Python: %s exports no _PyEval_EvalFrameDefault: Python frames are put "
		    "at the root of its stacks, not in place of the interpreter's", last);
	o.cfg.runtime = runtime;
	p->off = o;
	p->eval_lo = ps.eval ? bias + ps.eval : 0;
	p->eval_hi = ps.eval ? bias + ps.eval + (ps.eval_size ? ps.eval_size : 1) : 0;
	if (bpf_map_update_elem(py->cfg_fd, &p->pid, &o.cfg, BPF_ANY) < 0) {
		p->state = P_PENDING; /* the map is full: again later */
		return;
	}
	if (ok == 0) {
		p->state = P_PENDING;
		return;
	}
	p->state = P_PY;
	py->st.processes++;
}

/* A P_PENDING process's offsets checked (it had no thread state when looked at first). */
static void recheck(py_host *py, pyproc *p)
{
	int ok = check(p->pid, p->off.cfg.runtime, &p->off.cfg);
	if (ok > 0) {
		p->state = P_PY;
		py->st.processes++;
	} else if (ok < 0 || ++p->tries > 30) {
		bpf_map_delete_elem(py->cfg_fd, &p->pid);
		p->state = P_UNKNOWN;
		py->st.unknown++;
		say(py, p->ino ^ (uint64_t)p->dev << 40, "Python: process %" PRIu32 " (Python 3.%u): "
		    "its thread list is not where the offsets (%s) say%s: native frames only",
		    p->pid, p->off.minor, p->off.source, ok < 0 ? "" : " (no thread state after 30 looks)");
	}
}

void py_see(py_host *py, uint32_t pid, bool exec)
{
	char path[300];
	struct stat sb;
	pyproc *q = proc_slot(py, pid, false);
	if (!exec && q && q->seen == py->drain && py->drain)
		return; /* once a drain: a process has many sums */
	/* told of new images: one known to be what it is (Python or not) needs no look at its
	 * executable until it has another, but for a look now and then (a missed notice) */
	if (!exec && q && py->images_told && !q->new_image &&
	    (q->state == P_NOT || q->state == P_PY || q->state == P_UNKNOWN) &&
	    py->drain - q->seen < PY_RECHECK_DRAINS)
		return;
	snprintf(path, sizeof(path), "%s/%" PRIu32 "/exe", py->root, pid);
	if (stat(path, &sb) < 0) {
		pyproc *p = proc_slot(py, pid, false);
		if (p && (p->state == P_PY || p->state == P_PENDING)) {
			/* exited: its entry goes (pid reuse); its samples of this drain, read
			 * while it ran, keep their Python frames */
			bpf_map_delete_elem(py->cfg_fd, &pid);
			p->state = P_GONE, p->dev = p->ino = 0;
		} else if (p && p->state != P_GONE) {
			p->state = P_NOT, p->dev = p->ino = 0;
		}
		return;
	}
	pyproc *p = proc_slot(py, pid, true);
	p->seen = py->drain;
	p->new_image = false;
	if (p->dev == sb.st_dev && p->ino == sb.st_ino) {
		struct py_cfg c;
		/* a Python that exec'd (the program forgot its entry) is looked at anew: also one
		 * looked at in the middle of its exec, before the program's exec hook ran */
		bool listed = bpf_map_lookup_elem(py->cfg_fd, &pid, &c) == 0;
		if (p->state == P_PENDING && listed) {
			recheck(py, p);
			return;
		}
		if ((p->state != P_PY && p->state != P_PENDING) || listed)
			return;
	}
	p->dev = sb.st_dev;
	p->ino = sb.st_ino;
	look(py, p);
}

/* A Python str as UTF-8 into out (at most cap - 1 bytes); false when unreadable. */
static bool read_str(uint32_t pid, uint64_t addr, const py_offsets *o, char *out,
		     size_t cap)
{
	uint8_t h[80];
	if (!addr || o->ascii_size > sizeof(h) || rd(pid, addr, h, o->ascii_size) < 0)
		return false;
	int64_t len;
	uint32_t state;
	memcpy(&len, h + 16, 8);
	memcpy(&state, h + 32, 4);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || len < 0 || (kind != 1 && kind != 2 && kind != 4))
		return false;
	size_t n = (size_t)len < cap / 4 ? (size_t)len : cap / 4;
	uint8_t raw[STR_CAP * 4];
	if (n * kind > sizeof(raw) ||
	    rd(pid, addr + (ascii ? o->ascii_size : o->compact_size), raw, n * kind) < 0)
		return false;
	size_t w = 0;
	for (size_t i = 0; i < n && w + 5 < cap; i++) {
		uint32_t c = kind == 1 ? raw[i] : kind == 2 ? ((uint16_t *)raw)[i] : ((uint32_t *)raw)[i];
		if (c < 0x80) {
			out[w++] = (char)c;
		} else if (c < 0x800) {
			out[w++] = (char)(0xc0 | c >> 6);
			out[w++] = (char)(0x80 | (c & 0x3f));
		} else if (c < 0x10000) {
			out[w++] = (char)(0xe0 | c >> 12);
			out[w++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[w++] = (char)(0x80 | (c & 0x3f));
		} else {
			out[w++] = (char)(0xf0 | c >> 18);
			out[w++] = (char)(0x80 | ((c >> 12) & 0x3f));
			out[w++] = (char)(0x80 | ((c >> 6) & 0x3f));
			out[w++] = (char)(0x80 | (c & 0x3f));
		}
	}
	out[w] = 0;
	return true;
}

static uint64_t varint(const uint8_t *p, size_t n, size_t *i)
{
	uint64_t v = 0;
	unsigned sh = 0;
	while (*i < n && sh < 60) {
		uint8_t b = p[(*i)++];
		v |= (uint64_t)(b & 63) << sh;
		sh += 6;
		if (!(b & 64))
			break;
	}
	return v;
}

int64_t py_line(const uint8_t *lt, size_t n, int64_t first, int64_t idx)
{
	/* CPython's Objects/locations.md: entries of a header byte (bit 7 set; code in bits 3-6;
	 * the code units it covers, less one, in bits 0-2) and code-dependent data */
	int64_t line = first, addr = 0;
	size_t i = 0;
	if (idx < 0)
		return first;
	while (i < n) {
		uint8_t h = lt[i++];
		if (!(h & 0x80))
			return first; /* not an entry's start: not a table of this kind */
		unsigned code = (h >> 3) & 15;
		int64_t len = (h & 7) + 1, delta = 0;
		bool has = true;
		if (code == 15) {
			has = false;
		} else if (code == 14) {
			uint64_t v = varint(lt, n, &i);
			delta = v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
			varint(lt, n, &i);
			varint(lt, n, &i);
			varint(lt, n, &i);
		} else if (code == 13) {
			uint64_t v = varint(lt, n, &i);
			delta = v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
		} else if (code >= 10) {
			delta = code - 10;
			i += 2;
		} else {
			i += 1;
		}
		/* a line that leaves int32 is no real table's (memory read from another process) */
		if (has && (__builtin_add_overflow(line, delta, &line) || line < 0 || line > INT32_MAX))
			return first;
		if (idx < addr + len)
			return has ? line : first;
		addr += len;
	}
	return first;
}

static pycode *code_of(py_host *py, const pyproc *p, uint64_t code)
{
	uint32_t h = hash32(code ^ (uint64_t)p->pid << 48) & (CODE_CAP - 1);
	for (uint32_t i = 0; i < 64; i++) {
		pycode *c = &py->codes[(h + i) & (CODE_CAP - 1)];
		if (c->used && c->pid == p->pid && c->code == code)
			return c;
		if (!c->used)
			break;
	}
	if (py->ncodes >= CODE_CAP / 2)
		codes_clear(py);
	const py_offsets *o = &p->off;
	uint8_t hdr[256];
	uint32_t need = o->co_linetable != STROBE_PY_NONE ? o->co_linetable + 8u : o->co_name + 8u;
	if (need > sizeof(hdr) || rd(p->pid, code, hdr, need) < 0)
		return NULL;
	uint64_t fn_a, name_a, q_a = 0, lt_a = 0;
	int32_t first;
	memcpy(&fn_a, hdr + o->co_filename, 8);
	memcpy(&name_a, hdr + o->co_name, 8);
	memcpy(&first, hdr + o->co_firstlineno, 4);
	if (o->co_qualname != STROBE_PY_NONE)
		memcpy(&q_a, hdr + o->co_qualname, 8);
	if (o->co_linetable != STROBE_PY_NONE)
		memcpy(&lt_a, hdr + o->co_linetable, 8);
	char fn[STR_CAP], name[STR_CAP];
	if (!read_str(p->pid, fn_a, o, fn, sizeof(fn)) ||
	    !(read_str(p->pid, q_a, o, name, sizeof(name)) ||
	      read_str(p->pid, name_a, o, name, sizeof(name))))
		return NULL;
	uint8_t *lt = NULL;
	int64_t nlt = 0;
	if (lt_a && rd(p->pid, lt_a + o->var_size, &nlt, 8) == 0 && nlt > 0) {
		if (nlt > LT_CAP)
			nlt = LT_CAP;
		lt = malloc((size_t)nlt);
		if (lt && rd(p->pid, lt_a + o->bytes_sval, lt, (size_t)nlt) < 0) {
			free(lt);
			lt = NULL;
		}
	}
	pycode *c = NULL;
	for (uint32_t i = 0; i < CODE_CAP; i++) {
		pycode *x = &py->codes[(h + i) & (CODE_CAP - 1)];
		if (!x->used) {
			c = x;
			break;
		}
	}
	if (!c) {
		free(lt);
		return NULL;
	}
	*c = (pycode){.pid = p->pid, .used = 1, .code = code, .func = strdup(name),
		      .file = strdup(fn), .first = first, .lt = lt, .nlt = lt ? (uint32_t)nlt : 0};
	py->ncodes++;
	py->st.cached = py->ncodes;
	return c;
}

/* The name id of one Python frame. */
static uint32_t name_of(py_host *py, strobe_sampler *s, const pyproc *p,
			const struct py_frame *f)
{
	uint64_t code = f->code & ~1ull;
	pycode *c = code_of(py, p, code);
	if (!c || !c->func || !c->file) {
		py->st.unnamed++;
		return sampler_py_name(s, "[python: code object unreadable]", "", 0);
	}
	py->st.named++;
	int64_t line = c->first;
	if (c->lt && p->off.co_code_adaptive != STROBE_PY_NONE) {
		int64_t idx = ((int64_t)f->instr - (int64_t)(code + p->off.co_code_adaptive)) / 2;
		line = py_line(c->lt, c->nlt, c->first, idx);
	}
	return sampler_py_name(s, c->func, c->file, line);
}

uint32_t py_merge(py_host *py, strobe_sampler *s, uint32_t pid, const uint64_t *uips,
			 uint32_t nu, const struct py_stack *st, uint64_t *ips,
			 uint32_t *names, uint32_t cap)
{
	pyproc *p = proc_slot(py, pid, false);
	if (!p) { /* a child forked since (it has its parent's entry in pycfg): looked at now */
		py_see(py, pid, false);
		p = proc_slot(py, pid, false);
	}
	uint32_t n = 0, j = 0, np = st->n < STROBE_PY_MAX_DEPTH ? st->n : STROBE_PY_MAX_DEPTH;
	if (!p || (p->state != P_PY && p->state != P_PENDING && p->state != P_GONE))
		np = 0; /* (a process forgotten meanwhile: native frames) */
	for (uint32_t i = 0; i < nu && n < cap; i++) {
		if (j < np && uips[i] >= p->eval_lo && uips[i] < p->eval_hi) {
			bool entry;
			do {
				entry = st->f[j].code & 1;
				ips[n] = 0;
				names[n++] = name_of(py, s, p, &st->f[j]);
				j++;
			} while (!entry && j < np && n < cap);
			continue;
		}
		ips[n] = uips[i];
		names[n++] = 0;
	}
	for (; j < np && n < cap; j++) {
		ips[n] = 0;
		names[n++] = name_of(py, s, p, &st->f[j]);
	}
	if (st->truncated && n < cap) {
		ips[n] = 0;
		names[n++] = sampler_py_name(s, "[python: deeper frames not read]", "", 0);
	}
	py->st.merged++;
	return n;
}

void py_get_stats(const py_host *py, py_stats *st)
{
	*st = py->st;
}

void py_new_image(py_host *py, uint32_t pid)
{
	py->images_told = true;
	pyproc *p = proc_slot(py, pid, false);
	if (p)
		p->new_image = true;
}
