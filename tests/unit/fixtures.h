/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where the unit tests find their input files, and how a case that lacks one says so.
 *
 * Two kinds of input, kept apart on purpose:
 *   - The project's own Go profiles: written by Go's runtime/pprof from tests/fixtures/goservice.go
 *     into build/fixtures/pprof (or $GOPROF) by `make check`. A bare clone has them once built.
 *     Tests read what is in them and compare, never a number someone wrote down.
 *   - The external conformance vectors in ../shared/testdata (or $TESTDATA): files other
 *     projects wrote, whose contents a test may pin exactly. They are an extra layer: absent,
 *     the case says SKIP and why (tests/run.sh counts it, and fails the run under CI=true).
 *
 * A case that cannot run calls SKIP_CASE("why"): it prints "SKIP <case>: why", which
 * tests/run.sh counts as a skip (prefixed with the binary's name), and ends the case with
 * cmocka's skip(), never a silent pass.
 */
#ifndef STROBE_UNIT_FIXTURES_H
#define STROBE_UNIT_FIXTURES_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* The path of the project's Go profile NAME (go_cpu.pb.gz, ...), in a static buffer. */
static inline const char *go_fixture(const char *name)
{
	static char path[4096];
	const char *d = getenv("GOPROF");
	snprintf(path, sizeof(path), "%s/%s", d && *d ? d : "build/fixtures/pprof", name);
	return path;
}

/* The path of an external vector REL (pprof/go_cpu.pb.gz, ...), or NULL when it is absent. */
static inline const char *external_fixture(const char *rel)
{
	static char path[4096];
	const char *d = getenv("TESTDATA"); /* tests/run.sh sets it, empty when they are absent */
	if (d && !*d)
		return NULL;
	snprintf(path, sizeof(path), "%s/%s", d ? d : "../shared/testdata", rel);
	return access(path, R_OK) == 0 ? path : NULL;
}

#define SKIP_CASE(why)                                        \
	do {                                                  \
		printf("SKIP %s: %s\n", __func__, (why));     \
		fflush(stdout);                               \
		skip();                                       \
	} while (0)

#define GO_FIXTURE_MISSING "no Go fixtures in build/fixtures/pprof or $GOPROF (make fixtures; needs go)"
#define EXTERNAL_MISSING "external vectors absent: ../shared/testdata or $TESTDATA"

#endif
