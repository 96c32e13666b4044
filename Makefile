# SPDX-License-Identifier: Apache-2.0
# strobe's build. `make` builds build/strobe; `make check` runs every test; `make demo` runs the
# main job; `make bench` runs the benchmarks against the peers; `make fuzz` fuzzes for longer.
# Sources are found by wildcard: a new lib/*.c, cli/cmd_*.c, tests/unit/test_*.c or
# tests/fuzz/fuzz_*.c is built without touching this file.

CC       ?= cc
CLANG    ?= clang
BPFTOOL  ?= $(shell command -v bpftool || echo /usr/sbin/bpftool)
B        := build
# libiberty (static): binutils' demangler, for symbolize/demangle.c.
# libcurl is not linked: net/curl_lazy.c loads it when an HTTP client first needs it (its headers
# are still needed to build).
PKGS     := libprotobuf-c zlib jansson libdw libelf libmicrohttpd gnutls sqlite3 libzstd libbpf libdeflate
WARN     := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter
CPPFLAGS := -D_GNU_SOURCE -Iinclude -I$(B)/gen
CFLAGS   ?= -O2 -g
CFLAGS   += -std=c17 $(WARN) -fno-strict-aliasing
LDLIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lprotobuf-c -lz -ljansson -ldw -lelf -lmicrohttpd -lgnutls -lsqlite3 -lzstd -lbpf -ldeflate) -liberty -ldl -lpthread -lm

SAN      := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
TESTCFLAGS := -std=c17 $(WARN) -O1 -g $(SAN)

# The layers, bottom up (docs/design.md): each is an archive of its own, and may call only into
# the layers below it. The CLI links them top down, so a call the wrong way is an undefined
# reference; $(B)/layers.ok links each layer whole against those below it alone, so it also
# catches a wrong-way call in code no command uses yet.
LAYERS   := lib net symbolize store agent server
lib_BELOW       :=
net_BELOW       := lib
symbolize_BELOW := lib
store_BELOW     := net lib
agent_BELOW     := symbolize net lib
server_BELOW    := store symbolize net lib
layer_src = $(filter-out %.bpf.c,$(wildcard $(1)/*.c $(1)/*/*.c))
LIB_SRC  := $(foreach l,$(LAYERS),$(call layer_src,$(l)))
HDRS     := $(wildcard include/strobe/*.h symbolize/*.h agent/*.h store/*.h store/*/*.h server/*.h net/*.h cli/*.h)
CLI_SRC  := $(wildcard cli/*.c)
# Every proto/*.proto becomes C through protoc-c (pprof, and the peers' wire formats written here).
PROTO_SRC := $(wildcard proto/*.proto)
GEN_SRC  := $(patsubst proto/%.proto,$(B)/gen/%.pb-c.c,$(PROTO_SRC))
GEN_HDR  := $(GEN_SRC:.c=.h)
gen_obj   = $(patsubst $(B)/gen/%.c,$(B)/$(1)/gen/%.o,$(GEN_SRC))
# Named here, in an explicit rule, so that make does not take them for intermediate files of the
# pattern rules (and delete them after a build: a header then missing for the next compile).
.PHONY: gen
gen: $(GEN_SRC) $(GEN_HDR)

LIB_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(LIB_SRC)) $(call gen_obj,obj)
CLI_OBJ  := $(patsubst %.c,$(B)/obj/%.o,$(CLI_SRC))
SLIB_OBJ := $(patsubst %.c,$(B)/san/%.o,$(LIB_SRC)) $(call gen_obj,san)

UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(patsubst tests/unit/%.c,$(B)/test/%,$(UNIT_SRC))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))
# Workloads with known answers for the recorder's truth tests: frame pointers kept, debug info on.
WL_SRC   := $(wildcard tests/workloads/*.c)
WL_BIN   := $(patsubst tests/workloads/%.c,$(B)/workloads/%,$(WL_SRC))
# ... and the same built as release builds are, -O2 without any frame pointers (X-nofp), for the
# unwinder's tests: only the unwind tables can walk them.
WL_NOFP  := $(B)/workloads/lock_contend-nofp $(B)/workloads/cpu_split-nofp $(B)/workloads/qsort_cmp-nofp $(B)/workloads/deep_recurse-nofp $(B)/workloads/stack_hole-nofp \
	    $(B)/workloads/cpu_split-dbgframe

# libstrobe-heap.so (preload/): heap and lock sampling inside a profiled process, by LD_PRELOAD.
# It lives in other people's processes: libc and libgcc's unwinder only, never libstrobe.a;
# everything hidden but the libc names it interposes; no lazy binding (a first call to an
# unresolved symbol must not reach the loader from inside malloc).
PRELOAD_SRC := $(wildcard preload/*.c)
PRELOAD_LIB := $(B)/libstrobe-heap.so
$(PRELOAD_LIB): $(PRELOAD_SRC) $(wildcard preload/*.h) include/strobe/heap_channel.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -std=gnu17 $(WARN) -O2 -g -fPIC -shared -fvisibility=hidden \
		-ftls-model=initial-exec -fno-omit-frame-pointer -Wl,-z,now -Wl,-z,nodelete \
		-o $@ $(PRELOAD_SRC) -ldl -lgcc_s
# The unwind-step cache against libgcc: the call chains built at -O0 with frame pointers and at -O2
# without, by the C compiler Debian's own binaries come from (gcc: remember_state/restore_state
# around mid-function epilogues), with no sanitizer in them.
$(B)/test/uwc_%.o: tests/unit/unwind_chain.c tests/unit/unwind_chain.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 $(WARN) -g -DUWC_V=$* $(if $(filter o0,$*),-O0 -fno-omit-frame-pointer,-O2 -fomit-frame-pointer) -c -o $@ $<
# the live table test runs the library's own header
$(B)/test/test_heap_channel: preload/live_table.h
$(B)/test/test_unwind_cache: tests/unit/test_unwind_cache.c preload/unwind_cache.c preload/unwind_cache.h $(B)/test/uwc_o0.o $(B)/test/uwc_o2.o
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) -std=gnu17 $(WARN) -O1 -g $(SAN) -o $@ $< preload/unwind_cache.c $(B)/test/uwc_o0.o $(B)/test/uwc_o2.o -lcmocka -ldl -lgcc_s

# libstrobe-sdk (sdk/): per-thread labels (endpoint, span_id) that a C program sets and the
# kernel reads at each sample (docs/sdk.md). libc only, as it lives in other people's programs.
SDK_LIBS := $(B)/libstrobe-sdk.a $(B)/libstrobe-sdk.so
$(B)/sdk/strobe_labels.o: sdk/strobe_labels.c sdk/strobe_labels.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 $(WARN) -O2 -g -fPIC -c -o $@ $<
$(B)/libstrobe-sdk.a: $(B)/sdk/strobe_labels.o
	@rm -f $@
	ar rcs $@ $^
$(B)/libstrobe-sdk.so: $(B)/sdk/strobe_labels.o
	$(CC) -shared -Wl,-z,now -o $@ $^
$(B)/test/test_sdk_labels: tests/unit/test_sdk_labels.c sdk/strobe_labels.c sdk/strobe_labels.h
	@mkdir -p $(dir $@)
	$(CLANG) -Isdk -std=gnu17 $(WARN) -O1 -g $(SAN) -pthread -o $@ $< sdk/strobe_labels.c -lcmocka
$(B)/workloads/span_server: tests/workloads/span_server.c $(B)/libstrobe-sdk.a $(wildcard tests/workloads/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O1 -g -fno-omit-frame-pointer -Isdk -pthread -o $@ $< $(B)/libstrobe-sdk.a -lm

.PHONY: all deps check-deps demo check unit golden e2e fuzz-smoke fuzz bench clean san-strobe workloads fixtures check-load fuzz-nightly soak
all: $(B)/strobe $(B)/strobe-agent $(PRELOAD_LIB) $(SDK_LIBS)

deps:
	@bash scripts/deps.sh build
check-deps:
	@bash scripts/deps.sh check

$(B)/gen/%.pb-c.c $(B)/gen/%.pb-c.h: proto/%.proto
	@mkdir -p $(B)/gen
	protoc-c --proto_path=proto --c_out=$(B)/gen $<

$(B)/obj/%.o: %.c $(GEN_HDR) $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c -o $@ $<
$(B)/obj/gen/%.o: $(B)/gen/%.c $(GEN_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -O2 -g -std=c17 -c -o $@ $<

# The web UI's files, embedded into server/ui.c as a generated table.
UI_SRC   := $(sort $(wildcard ui/*.html ui/*.js ui/*.css))
$(B)/gen/ui_assets.inc: $(UI_SRC) scripts/embed_ui.sh
	@mkdir -p $(B)/gen
	bash scripts/embed_ui.sh $(UI_SRC) > $@.tmp && mv $@.tmp $@
$(B)/obj/server/ui.o $(B)/san/server/ui.o $(B)/fuzzobj/server/ui.o: $(B)/gen/ui_assets.inc

# The agent's eBPF program (agent/offcpu.bpf.c), compiled for the BPF target and embedded in
# the agent through a bpftool skeleton.
$(B)/gen/offcpu.skel.h: agent/offcpu.bpf.c agent/offcpu.h agent/ustack.bpf.h
	@mkdir -p $(B)/gen
	$(CLANG) -target bpf -g -O2 -I/usr/include/$(shell $(CC) -print-multiarch) -Iagent -c -o $(B)/gen/offcpu.bpf.o $<
	$(BPFTOOL) gen skeleton $(B)/gen/offcpu.bpf.o name offcpu_bpf > $@.tmp && mv $@.tmp $@
$(B)/obj/agent/offcpu.o $(B)/san/agent/offcpu.o $(B)/fuzzobj/agent/offcpu.o: $(B)/gen/offcpu.skel.h
# ... and its futex-wait program (agent/locks.bpf.c), which walks user stacks the same way.
$(B)/gen/locks.skel.h: agent/locks.bpf.c agent/locks.h agent/offcpu.h agent/ustack.bpf.h
	@mkdir -p $(B)/gen
	$(CLANG) -target bpf -g -O2 -I/usr/include/$(shell $(CC) -print-multiarch) -Iagent -c -o $(B)/gen/locks.bpf.o $<
	$(BPFTOOL) gen skeleton $(B)/gen/locks.bpf.o name locks_bpf > $@.tmp && mv $@.tmp $@
$(B)/obj/agent/locks.o $(B)/san/agent/locks.o $(B)/fuzzobj/agent/locks.o: $(B)/gen/locks.skel.h
# ... and its on-CPU sampling program (agent/oncpu.bpf.c), on the cpu-clock event.
$(B)/gen/oncpu.skel.h: agent/oncpu.bpf.c agent/oncpu.h agent/offcpu.h agent/ustack.bpf.h agent/python.bpf.h agent/python.h agent/tls_labels.bpf.h agent/tls_labels.h
	@mkdir -p $(B)/gen
	$(CLANG) -target bpf -g -O2 -I/usr/include/$(shell $(CC) -print-multiarch) -Iagent -c -o $(B)/gen/oncpu.bpf.o $<
	$(BPFTOOL) gen skeleton $(B)/gen/oncpu.bpf.o name oncpu_bpf > $@.tmp && mv $@.tmp $@
$(B)/obj/agent/oncpu.o $(B)/san/agent/oncpu.o $(B)/fuzzobj/agent/oncpu.o: $(B)/gen/oncpu.skel.h

# ... and the C SDK's label reader (agent/tls_labels.bpf.c, the proof program around
# agent/tls_labels.bpf.h) for its probe, tests/tools/tls_labels_probe.c.
$(B)/gen/tls_labels.skel.h: agent/tls_labels.bpf.c agent/tls_labels.bpf.h agent/tls_labels.h
	@mkdir -p $(B)/gen
	$(CLANG) -target bpf -g -O2 -I/usr/include/$(shell $(CC) -print-multiarch) -Iagent -c -o $(B)/gen/tls_labels.bpf.o $<
	$(BPFTOOL) gen skeleton $(B)/gen/tls_labels.bpf.o name tls_labels_bpf > $@.tmp && mv $@.tmp $@
$(B)/tools/tls_labels_probe: tests/tools/tls_labels_probe.c $(B)/gen/tls_labels.skel.h $(B)/libstrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iagent $(CFLAGS) -o $@ $< $(B)/libstrobe.a $(LDLIBS)

# Every layer in one archive, for the benchmark tools.
$(B)/libstrobe.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# One archive per layer (lib's holds the generated pprof code too).
define LAYER_ARCHIVE
$(B)/layer/$(1).a: $(patsubst %.c,$(B)/obj/%.o,$(call layer_src,$(1))) $(if $(filter lib,$(1)),$(call gen_obj,obj))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	ar rcs $$@ $$^
endef
$(foreach l,$(LAYERS),$(eval $(call LAYER_ARCHIVE,$(l))))
LAYER_LIBS := $(foreach l,server agent store symbolize net lib,$(B)/layer/$(l).a)

# Each layer linked whole against the layers below it and the system's libraries only.
$(B)/layers.ok: $(LAYER_LIBS)
	@mkdir -p $(B)/layer
	@printf 'int main(void) { return 0; }\n' > $(B)/layer/main.c
	@$(foreach l,$(LAYERS),\
		$(CC) -o $(B)/layer/check-$(l) $(B)/layer/main.c -Wl,--whole-archive $(B)/layer/$(l).a \
			-Wl,--no-whole-archive $(foreach d,$($(l)_BELOW),$(B)/layer/$(d).a) $(LDLIBS) \
			2> $(B)/layer/check-$(l).err || { echo "layer $(l) calls into a layer it may not use \
			(it may use: $(or $($(l)_BELOW),nothing of ours)):"; \
			grep -o "undefined reference to .*" $(B)/layer/check-$(l).err | sort -u | head -20; \
			exit 1; };)
	@touch $@

$(B)/strobe: $(CLI_OBJ) $(LAYER_LIBS) $(B)/layers.ok
	$(CC) $(CFLAGS) -o $@ $(CLI_OBJ) $(LAYER_LIBS) $(LDLIBS)

# strobe-agent (cli/lean/strobe_agent.c): `strobe agent` alone, linked with the agent's layers and
# their libraries only (no store, server, SQLite), which `strobe agent` execs when it is next to it
# (cli/agent_exec.c): the always-on agent then maps none of the server's pages (docs/agent.md).
AGENT_PKGS   := libprotobuf-c zlib jansson libdw libelf libmicrohttpd libzstd libbpf libdeflate
AGENT_LDLIBS := $(shell pkg-config --libs $(AGENT_PKGS) 2>/dev/null || echo -lprotobuf-c -lz -ljansson -ldw -lelf -lmicrohttpd -lzstd -lbpf -ldeflate) -liberty -ldl -lpthread -lm
AGENT_OBJ    := $(B)/obj/cli/lean/strobe_agent.o $(B)/obj/cli/cmd_agent.o $(B)/obj/cli/common.o
$(B)/strobe-agent: $(AGENT_OBJ) $(foreach l,agent symbolize net lib,$(B)/layer/$(l).a) $(B)/layers.ok
	$(CC) $(CFLAGS) -o $@ $(AGENT_OBJ) $(foreach l,agent symbolize net lib,$(B)/layer/$(l).a) $(AGENT_LDLIBS)
$(B)/obj/cli/agent_exec.o: CPPFLAGS += -DSTROBE_AGENT_EXE='"strobe-agent"'

# ---- sanitized builds for tests ---------------------------------------------------------------
$(B)/san/%.o: %.c $(GEN_HDR) $(HDRS)
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) $(TESTCFLAGS) -c -o $@ $<
$(B)/san/gen/%.o: $(B)/gen/%.c $(GEN_HDR)
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) -std=c17 -O1 -g $(SAN) -c -o $@ $<
$(B)/libstrobe-san.a: $(SLIB_OBJ)
	@rm -f $@
	ar rcs $@ $^
# The CLI built with ASan+UBSan: golden and end-to-end tests run this one.
$(B)/strobe-san: $(patsubst %.c,$(B)/san/%.o,$(CLI_SRC)) $(B)/libstrobe-san.a
	$(CLANG) $(TESTCFLAGS) -o $@ $^ $(LDLIBS)
san-strobe: $(B)/strobe-san

$(B)/test/%: tests/unit/%.c $(wildcard tests/unit/*.h) $(B)/libstrobe-san.a $(GEN_HDR)
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) $(TESTCFLAGS) -o $@ $< $(B)/libstrobe-san.a -lcmocka $(LDLIBS)

# agent/bpf_load.c's test loads the agent's own on-CPU object
$(B)/test/test_bpf_load: $(B)/gen/oncpu.skel.h

# agent/python_offsets.c's table checked against the installed CPython headers (python3-dev)
$(B)/test/test_python_offsets: TESTCFLAGS += $(shell pkg-config --cflags-only-I python3 2>/dev/null)

# A unit test with a .proto of its own (tests/unit/proto/<name>.proto, for the generic codecs).
$(B)/gen/test/%.pb-c.c $(B)/gen/test/%.pb-c.h: tests/unit/proto/%.proto
	@mkdir -p $(B)/gen/test
	protoc-c --proto_path=tests/unit/proto --c_out=$(B)/gen/test $<
$(B)/test/test_pbjson: tests/unit/test_pbjson.c $(B)/gen/test/pbjson_test.pb-c.c $(B)/libstrobe-san.a
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) -I$(B)/gen/test $(TESTCFLAGS) -o $@ $< $(B)/gen/test/pbjson_test.pb-c.c $(B)/libstrobe-san.a -lcmocka $(LDLIBS)

$(B)/fuzz/%: tests/fuzz/%.c $(patsubst %.c,$(B)/fuzzobj/%.o,$(LIB_SRC)) $(call gen_obj,fuzzobj) | $(GEN_HDR)
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) -std=c17 $(WARN) -O1 -g -fsanitize=fuzzer,address,undefined -o $@ $^ $(LDLIBS)
$(B)/fuzzobj/%.o: %.c $(GEN_HDR) $(HDRS)
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) -std=c17 $(WARN) -O1 -g -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<
$(B)/fuzzobj/gen/%.o: $(B)/gen/%.c $(GEN_HDR)
	@mkdir -p $(dir $@)
	$(CLANG) $(CPPFLAGS) -std=c17 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -c -o $@ $<

$(B)/workloads/%: tests/workloads/%.c $(wildcard tests/workloads/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O1 -g -fno-omit-frame-pointer -fno-optimize-sibling-calls -pthread -o $@ $< -lm
$(B)/workloads/%-nofp: tests/workloads/%.c $(wildcard tests/workloads/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -g -fomit-frame-pointer -pthread -o $@ $< -lm
# ... and with its CFI only in .debug_frame (as -g without unwind tables emits it): the unwinder's
# .debug_frame fallback is the only way through its functions.
$(B)/workloads/%-dbgframe: tests/workloads/%.c $(wildcard tests/workloads/*.h)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -g -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables -pthread -o $@ $< -lm
# C++ workloads: libstrobe-heap.so's safety tests (new/delete reach malloc through libstdc++),
# the naming tests (demangled frames: cxx_names).
WL_CXX   := $(patsubst tests/workloads/cxx/%.cc,$(B)/workloads/%,$(wildcard tests/workloads/cxx/*.cc))
$(B)/workloads/%: tests/workloads/cxx/%.cc
	@mkdir -p $(dir $@)
	$(CXX) -std=gnu++17 -Wall -Wextra -Werror -O1 -g -fno-omit-frame-pointer -pthread -o $@ $<
workloads: $(WL_BIN) $(WL_NOFP) $(WL_CXX) $(PRELOAD_LIB) $(B)/tools/push_storm $(B)/tools/webhook_sink $(B)/tools/tls_labels_probe
# The webhook receiver of tests/e2e/server_notify.sh.
$(B)/tools/webhook_sink: tests/tools/webhook_sink.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 $(WARN) -O2 -g -o $@ $< -lmicrohttpd
# The server's fault tests' load generator (tests/e2e/server_overload.sh, server_slow_clients.sh).
$(B)/tools/push_storm: tests/tools/push_storm.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 $(WARN) -O2 -g -o $@ $<

# The project's own Go profiles (cpu, heap, allocs, mutex, block, goroutine) for the tests,
# written by Go's runtime/pprof from tests/fixtures/goservice.go: a bare clone makes its own.
FIXTURES := $(B)/fixtures/pprof/go_cpu.pb.gz
$(FIXTURES): tests/fixtures/goservice.go
	@rm -rf $(B)/fixtures/pprof $(B)/fixtures/pprof.tmp && mkdir -p $(B)/fixtures
	cd $(B)/fixtures && go run $(abspath $<) pprof.tmp > /dev/null && mv pprof.tmp pprof
fixtures: $(FIXTURES)

# ---- the two commands of the README -----------------------------------------------------------
demo: deps
	@$(MAKE) --no-print-directory all $(B)/workloads/demo_shop
	@bash scripts/demo.sh

CHECK_BIN := all $(B)/strobe-san $(UNIT_BIN) $(FUZZ_BIN) $(WL_BIN) $(WL_NOFP) $(WL_CXX) $(B)/tools/push_storm $(B)/tools/webhook_sink $(B)/tools/tls_labels_probe $(FIXTURES)
check: check-deps
	@$(MAKE) --no-print-directory -j2 $(CHECK_BIN)
	@bash tests/run.sh

# The whole suite beside CPU hogs that double the machine's load (tests/run.sh --load).
check-load: check-deps
	@$(MAKE) --no-print-directory -j2 $(CHECK_BIN)
	@bash tests/run.sh --load

unit: $(UNIT_BIN) $(FIXTURES)
	@bash tests/run.sh unit
golden: $(B)/strobe-san $(FIXTURES)
	@bash tests/run.sh golden
e2e: $(B)/strobe $(B)/strobe-san $(PRELOAD_LIB) $(WL_BIN) $(WL_NOFP) $(WL_CXX) $(B)/tools/push_storm $(B)/tools/webhook_sink $(B)/tools/tls_labels_probe $(FIXTURES)
	@bash tests/run.sh e2e
fuzz-smoke: $(FUZZ_BIN)
	@bash tests/run.sh fuzz
# Each target for its budget in tests/fuzz/budgets (FUZZ_SECONDS=N: N each); nightly: 10 min each.
fuzz: $(FUZZ_BIN)
	@FUZZ_BUDGETS=1 bash tests/run.sh fuzz
fuzz-nightly: $(FUZZ_BIN)
	@FUZZ_SECONDS=$${FUZZ_SECONDS:-600} bash tests/run.sh fuzz
# The long runs of the agent's resilience tests, one command: a 10-minute server outage with a
# small spool (OUTAGE_SECONDS), and the process-churn run for CHURN_SECONDS (default 300).
soak: $(B)/strobe $(B)/strobe-san $(WL_BIN)
	@OUTAGE_SECONDS=$${OUTAGE_SECONDS:-600} CHURN_SECONDS=$${CHURN_SECONDS:-300} bash tests/run.sh soak

bench:
	@bash scripts/deps.sh bench
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory $(B)/bench/gen_pprof $(B)/bench/cpu_work $(B)/bench/pingpong $(B)/bench/futex_pingpong $(B)/workloads/demo_shop $(B)/bench/server_load $(B)/bench/fleet_load $(B)/bench/heap_micro $(B)/bench/span_query $(B)/bench/significance $(B)/bench/sampler_export $(B)/bench/sampler_feed $(B)/bench/proc_lookup $(B)/bench/null_interposer.so $(PRELOAD_LIB)
	@bash bench/run.sh

clean:
	rm -rf $(B)

$(B)/bench/gen_pprof: bench/gen_pprof.c $(B)/libstrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/libstrobe.a $(LDLIBS)
# The sampler's benchmarks (bench/sampler.sh): the export of 500 processes' profiles, the
# per-record path and the agent's lookup of each process's identity.
$(B)/bench/sampler_export $(B)/bench/sampler_feed $(B)/bench/proc_lookup: $(B)/bench/%: bench/%.c bench/bench_util.h $(B)/libstrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iagent $(CFLAGS) -o $@ $< $(B)/libstrobe.a $(LDLIBS)
# The significance benchmark (bench/significance.sh): simulated counts through lib/significance.c.
$(B)/bench/significance: bench/significance.c tests/unit/sig_synth.h $(B)/libstrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/libstrobe.a $(LDLIBS)
# The server's load generator (bench/server.sh).
$(B)/bench/server_load: bench/server_load.c $(B)/libstrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -pthread -o $@ $< $(B)/libstrobe.a $(LDLIBS)
# Span queries through the span index against the scan (bench/spans.sh).
$(B)/bench/span_query: bench/span_query.c $(B)/libstrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/libstrobe.a $(LDLIBS)
# The fleet benchmark's bulk loader (bench/fleet.sh).
$(B)/bench/fleet_load: bench/fleet_load.c $(B)/libstrobe.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(B)/libstrobe.a $(LDLIBS)
# The recorder's overhead benchmarks (bench/record.sh), the futex program's (bench/locks.sh) and
# libstrobe-heap.so's (bench/heap.sh): plain programs, no strobe code.
$(B)/bench/cpu_work $(B)/bench/pingpong $(B)/bench/futex_pingpong $(B)/bench/heap_micro: $(B)/bench/%: bench/%.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 $(WARN) -O2 -g -pthread -o $@ $<
# bench/heap.sh's floor: a preload library that only forwards the malloc family to glibc.
$(B)/bench/null_interposer.so: bench/null_interposer.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 $(WARN) -O2 -g -fPIC -shared -o $@ $<
