# Distributed event builder: build, run, test.
#   make            build bin/sourced bin/readoutd bin/builderd
#   make run        set up, build and run deploy/topologies/local.toml
#   make test       set up, build, run unit then end-to-end tests
#   make asan       the unit and end-to-end tests under AddressSanitizer/UBSan
#   make valgrind   the unit tests under valgrind
#   make docs       rewrite the generated regions of docs/PROTOCOL.md, METRICS.md, README.md
#   make fuzz       libFuzzer targets of the decoders, FUZZ_SECONDS each (clang)
# V=1 shows full commands.

PKG_CONFIG ?= pkg-config
PYTHON ?= /usr/bin/python3
BUILD ?= build
BIN ?= bin
OPT ?= -O2

MSGPACK_PC := $(shell $(PKG_CONFIG) --exists msgpack-c 2>/dev/null && echo msgpack-c || echo msgpack)
# libhdf5 (sys/h5writer): Debian names it hdf5, some distributions only hdf5-serial.
HDF5_PC := $(shell $(PKG_CONFIG) --exists hdf5 2>/dev/null && echo hdf5 || echo hdf5-serial)
DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags libevent $(MSGPACK_PC) zlib libdeflate libsodium jansson \
	libsystemd $(HDF5_PC) 2>/dev/null)
DEP_LIBS := $(shell $(PKG_CONFIG) --libs libevent $(MSGPACK_PC) zlib libdeflate libsodium jansson \
	libsystemd $(HDF5_PC) 2>/dev/null)
CHECK_CFLAGS := $(shell $(PKG_CONFIG) --cflags check 2>/dev/null)
CHECK_LIBS := $(shell $(PKG_CONFIG) --libs check 2>/dev/null)

CFLAGS ?= $(OPT) -g
CFLAGS += -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -MMD -MP -Icommon $(DEP_CFLAGS) $(SAN)
LDFLAGS += $(SAN)
LDLIBS += $(DEP_LIBS) -lm

ifeq ($(V),1)
Q :=
else
Q := @
endif

# common/ is layered: wire/ < core/ < sys/ < io/ (docs/CODE.md); each
# layer includes only those below it (scripts/check_layers.py).
COMMON_LAYERS := wire core sys io
COMMON_SRC := $(foreach l,$(COMMON_LAYERS),$(wildcard common/$(l)/*.c))
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
DAEMONS := sourced readoutd builderd
BINS := $(DAEMONS:%=$(BIN)/%)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
# Test programs of their own (a main each, driven by tests/e2e), not linked
# into the unit tests.
TEST_PROGRAM_SRC := tests/unit/ctlhttp_serve.c tests/unit/evrecord_both.c
TEST_PROGRAMS := $(TEST_PROGRAM_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HELPER_SRC := $(filter-out $(UNIT_SRC) $(TEST_PROGRAM_SRC),$(wildcard tests/unit/*.c))
HELPER_OBJ := $(HELPER_SRC:%.c=$(BUILD)/%.o)
# Programs that are one file each over libcommon.a: the document generator
# and the examples of how a peer uses common/ (examples/README).
DOCGEN := $(BUILD)/tools/docgen
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/examples/%,$(wildcard examples/*.c))
# The documents with regions written from the code (scripts/gendocs.py).
GENERATED_DOCS := docs/PROTOCOL.md docs/METRICS.md README.md

.PHONY: all console deps run test check-layers check-counters check-sizes check-prefixes check-docs docs examples unit e2e asan valgrind clean bench bench-admission bench-record soak bench-shm fuzz fuzz-build
all: $(BINS) $(DOCGEN) $(EXAMPLES) $(TEST_PROGRAMS) console
examples: $(EXAMPLES)
.SECONDARY: $(DOCGEN:%=%.o) $(EXAMPLES:%=%.o)

$(BUILD)/tools/%: $(BUILD)/tools/%.o $(BUILD)/libcommon.a
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/examples/%: $(BUILD)/examples/%.o $(BUILD)/libcommon.a
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(TEST_PROGRAMS): $(BUILD)/tests/%: $(BUILD)/tests/unit/%.o $(BUILD)/libcommon.a
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# docs/PROTOCOL.md's field tables and README's equations come from the
# codec's and the books' own tables; check-docs fails when they differ.
docs: $(DOCGEN)
	$(Q)$(PYTHON) scripts/gendocs.py --docgen $(DOCGEN) $(GENERATED_DOCS)
check-docs: $(DOCGEN)
	$(Q)$(PYTHON) scripts/gendocs.py --docgen $(DOCGEN) --check $(GENERATED_DOCS)

deps:
	$(Q)scripts/deps.sh

# The include rules of docs/CODE.md: layers point one way, no cycles.
check-layers:
	$(Q)$(PYTHON) scripts/check_layers.py

# Every counter named once, in common/wire/counters.h: no counter or group
# name as a string literal elsewhere in the C tree.
check-counters:
	$(Q)$(PYTHON) scripts/check_counters.py

# No C file over 600 lines, no function over 80 (docs/CODE.md).
check-sizes:
	$(Q)$(PYTHON) scripts/check_sizes.py

check-prefixes:
	$(Q)$(PYTHON) scripts/check_prefixes.py

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC $<")
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -c -o $@ $<

# builderd's modules but main.c, for the unit tests of those modules. Its
# role folders (docs/CODE.md) include each other as "data/ingest.h", the
# root's headers as "options.h": builderd/ is on their include path.
BUILDERD_SRC := $(wildcard builderd/*.c builderd/*/*.c)
BUILDERD_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(filter-out builderd/main.c,$(BUILDERD_SRC)))
$(BUILD)/builderd/%.o: CFLAGS += -Ibuilderd
# The console make builds (below), builderd --console-dir's default.
$(BUILD)/builderd/serve/serve_http.o: CFLAGS += -DES_CONSOLE_DIR='"$(abspath $(BUILD)/console)"'
$(BUILD)/libbuilderd.a: $(BUILDERD_OBJ)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

# The operator's console (docs/RUNCONTROL.md): the page's own code in
# console/src, its libraries from npm at the versions console/package-lock.json
# fixes (npm ci when console/node_modules is absent or older than the lock),
# bundled by esbuild into $(BUILD)/console, which the hub serves.
CONSOLE_OUT := $(BUILD)/console
CONSOLE_SRC := $(wildcard console/src/*)
console: $(CONSOLE_OUT)/index.html
console/node_modules/.package-lock.json: console/package.json console/package-lock.json
	@$(if $(Q),echo "  NPM console")
	$(Q)cd console && npm ci --no-audit --no-fund --loglevel=error
	$(Q)touch $@
$(CONSOLE_OUT)/index.html: $(CONSOLE_SRC) console/node_modules/.package-lock.json
	@mkdir -p $(CONSOLE_OUT)
	@$(if $(Q),echo "  ESBUILD $(CONSOLE_OUT)")
	$(Q)console/node_modules/.bin/esbuild console/src/main.js --bundle --minify --format=iife \
		--target=es2020 --log-level=warning --outfile=$(CONSOLE_OUT)/console.js
	$(Q)cp console/src/index.html $@

$(BUILD)/libcommon.a: $(COMMON_OBJ)
	@rm -f $@
	$(Q)$(AR) rcs $@ $^

$(BIN)/%: $(BUILD)/%/main.o $(BUILD)/libcommon.a
	@mkdir -p $(BIN)
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libcommon.a $(LDLIBS)

# A daemon's own modules (everything in its folder but main.c). The unit
# tests of those modules, tests/unit/test_<name>.c for each <name> listed in
# DAEMON_TESTS_<daemon>, link them too.
DAEMON_TESTS_readoutd := intake intake_rails forward outq
DAEMON_TESTS_sourced := pace faults
define daemon_modules
DAEMON_OBJ_$(1) := $(patsubst %.c,$(BUILD)/%.o,$(filter-out $(1)/main.c,$(wildcard $(1)/*.c $(1)/*/*.c)))
$(BIN)/$(1): $$(DAEMON_OBJ_$(1))
$$(DAEMON_TESTS_$(1):%=$(BUILD)/tests/test_%): $$(DAEMON_OBJ_$(1))
endef
$(foreach d,$(DAEMONS),$(eval $(call daemon_modules,$(d))))

$(BUILD)/tests/vectors.h: tests/data/vectors.json tests/gen_vectors.py
	@mkdir -p $(dir $@)
	$(Q)$(PYTHON) tests/gen_vectors.py $< $@

# The event file's vectors (docs/event-file-format.md), made by
# tests/make_evfile_vectors.py, for test_evfile.
$(BUILD)/tests/evfile_vectors.h: tests/data/evfile-vectors.json tests/gen_vectors.py
	@mkdir -p $(dir $@)
	$(Q)$(PYTHON) tests/gen_vectors.py $< $@

$(BUILD)/tests/unit/%.o: tests/unit/%.c $(BUILD)/tests/vectors.h $(BUILD)/tests/evfile_vectors.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC $<")
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -I$(BUILD)/tests -Itests/unit -I. -Ibuilderd -c -o $@ $<

# A test links only the archive members it uses: a builderd module's test
# gets that module (and what it needs) from libbuilderd.a.
$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(HELPER_OBJ) $(BUILD)/libbuilderd.a \
		$(BUILD)/libcommon.a
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libbuilderd.a $(BUILD)/libcommon.a $(CHECK_LIBS) $(LDLIBS)

unit: $(UNIT_BIN)
	$(Q)fail=0; for t in $(UNIT_BIN); do CK_DEFAULT_TIMEOUT=120 $(TEST_WRAP) $$t || fail=1; done; exit $$fail

e2e: $(BINS) $(DOCGEN) $(EXAMPLES) $(TEST_PROGRAMS) console
	$(Q)ES_BIN=$(abspath $(BIN)) ES_CONSOLE=$(abspath $(CONSOLE_OUT)) ES_DOCGEN=$(abspath $(DOCGEN)) ES_EXAMPLES=$(abspath $(BUILD)/examples) \
		ES_TEST_PROGRAMS=$(abspath $(BUILD)/tests) \
		$(PYTHON) tests/e2e/run.py $(E2E_ARGS)

# iperf3: the rail capacity tests (analysis/railcap.py) run, not skip.
test:
	$(Q)DEPS_EXTRA="iperf3 $(DEPS_EXTRA)" scripts/deps.sh test
	$(Q)$(PYTHON) scripts/check_layers.py
	$(Q)$(PYTHON) scripts/check_counters.py
	$(Q)$(PYTHON) scripts/check_sizes.py
	$(Q)$(PYTHON) scripts/check_prefixes.py
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory check-docs
	$(Q)$(MAKE) --no-print-directory unit
	$(Q)$(MAKE) --no-print-directory e2e

# Only what running needs: the tests' packages (chromium, prometheus, sshd, …) come with make test.
run:
	$(Q)scripts/deps.sh run
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) deploy/daqrun deploy/topologies/local.toml --out runs/local

asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan BIN=build-asan/bin OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" all unit e2e

# The ring's SIGBUS guard resumes the faulting load after mapping zero
# pages; valgrind keeps every register exact at memory accesses only when
# asked, or the resumed load may see a stale one.
VALGRIND_FLAGS = -q --error-exitcode=1 --leak-check=full --vex-iropt-register-updates=allregs-at-mem-access
valgrind:
	$(Q)DEPS_EXTRA=valgrind scripts/deps.sh
	$(Q)$(MAKE) --no-print-directory BUILD=build-vg BIN=build-vg/bin all $(UNIT_BIN:$(BUILD)/%=build-vg/%)
	$(Q)for t in $(UNIT_BIN:$(BUILD)/%=build-vg/%); do CK_FORK=no valgrind $(VALGRIND_FLAGS) $$t || exit 1; done

# The benchmark matrix with same-run baselines (results/bench-<date>/);
# QUICK=1 runs a reduced matrix in a few minutes.
bench: deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/tests/bench_shm
	$(Q)$(PYTHON) analysis/bench.py $(if $(QUICK),--quick) --build $(BUILD) $(BENCH_ARGS)
	$(Q)$(PYTHON) analysis/bench_builders.py $(if $(QUICK),--quick) --bin $(BIN)

# Several builders alone (docs/BUILDERS.md): scaling with a filter cost, the
# cost of routing, one slow builder under the manager and static routing.
bench-builders: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) analysis/bench_builders.py $(if $(QUICK),--quick) --bin $(BIN)

# Runs on processes that live across them against processes per run.
bench-runs: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)ES_BIN=$(abspath $(BIN)) $(PYTHON) analysis/bench_runs.py

# Recording's cost against the same runs not recording, the disk's dd
# bandwidth, the writers alone on tmpfs, and 20 runs killed mid-file
# (docs/RECORDING.md, "Measured").
bench-record: deps
	$(Q)$(MAKE) --no-print-directory all $(BUILD)/tests/bench_evwriter
	$(Q)$(PYTHON) analysis/bench_record.py $(if $(QUICK),--quick) $(BENCH_ARGS)

# A 20-point daqctl scan against 20 daqrun launches (docs/RUNCONTROL.md).
bench-scan: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)ES_BIN=$(abspath $(BIN)) $(PYTHON) analysis/bench_scan.py

# Runs with the operator's console open and polling (headless chromium)
# against runs without, interleaved on one daqrun --serve session: the rate
# and the hub's CPU per fragment (results/bench-console-<date>/;
# docs/PERFORMANCE.md). QUICK=1: 2 rounds of short runs.
bench-console: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)ES_BIN=$(abspath $(BIN)) $(PYTHON) analysis/bench_console.py $(if $(QUICK),--quick) $(BENCH_ARGS)

# The CMS 2003 bare event builder on the netns cluster, beside the note's
# figures (root; results/cms2003-<date>/). cms2003-quick: 2x2, 2 sizes.
.PHONY: cms2003 cms2003-quick
cms2003: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)/usr/bin/python3 analysis/cms2003.py --bin $(BIN) $(CMS2003_ARGS)

cms2003-quick: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)/usr/bin/python3 analysis/cms2003.py --quick --bin $(BIN) $(CMS2003_ARGS)

# Many short runs with every kind of fault, killed and stopped daemons,
# overload; every run must balance its books. SOAK_RUNS (default 200).
SOAK_RUNS ?= 200
soak: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) analysis/soak.py --runs $(SOAK_RUNS) $(SOAK_ARGS)

# Completeness with and without credit-based admission (results/).
bench-admission: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) analysis/bench_admission.py $(BENCH_ARGS)

# Reader -> builder hop over shared memory and over loopback TCP, same
# fragments (results/bench-shm-<date>/). BENCH_SHM_ARGS: e.g. --mb 100 --repeat 5.
$(BUILD)/tests/bench_shm: $(BUILD)/tests/bench/bench_shm.o $(BUILD)/libcommon.a
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/tests/bench_evwriter: $(BUILD)/tests/bench/bench_evwriter.o $(BUILD)/libcommon.a
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

bench-shm: $(BUILD)/tests/bench_shm
	$(Q)$(BUILD)/tests/bench_shm --out results/bench-shm-$$(date +%Y-%m-%d) $(BENCH_SHM_ARGS)

# libFuzzer targets of the decoders that take bytes from peers (docs/FUZZING.md),
# built with clang; the same harness bodies run in the unit test
# test_fuzz_regressions over tests/fuzz/regressions/. `make fuzz` builds them,
# writes the seed corpus and runs each for FUZZ_SECONDS (default 60); it fails
# on any crash and leaves the input in $(FUZZ_DIR)/crashes/<target>/.
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR ?= $(BUILD)/fuzz
FUZZ_TARGETS := frame ctl ring evfile
FUZZ_CFLAGS := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer -g -O1 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Icommon $(DEP_CFLAGS)
FUZZ_SRC_frame := tests/fuzz/harness_frame.c common/wire/frame.c common/wire/crc.c
FUZZ_SRC_ctl := tests/fuzz/harness_ctl.c $(wildcard common/wire/control*.c) common/wire/msgpack_scan.c \
	common/wire/text.c
FUZZ_SRC_ring := tests/fuzz/harness_ring.c $(wildcard common/io/shmring*.c) common/io/shmguard.c \
	common/sys/proclive.c
FUZZ_SRC_evfile := tests/fuzz/harness_evfile.c common/wire/evfile.c common/wire/frame.c \
	common/wire/crc.c
FUZZ_ARGS_frame := -max_len=20000
FUZZ_ARGS_evfile := -max_len=20000
FUZZ_ARGS_ctl = -dict=$(FUZZ_DIR)/corpus/ctl.dict
FUZZ_ARGS_ring := -max_len=12288
FUZZ_HARNESS_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(wildcard tests/fuzz/harness*.c))

$(BUILD)/tests/test_fuzz_regressions: $(BUILD)/tests/unit/test_fuzz_regressions.o \
		$(FUZZ_HARNESS_OBJ) $(HELPER_OBJ) $(BUILD)/libcommon.a
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

define fuzz_target
$(FUZZ_DIR)/fuzz_$(1): tests/fuzz/fuzz_$(1).c tests/fuzz/harness.c tests/fuzz/harness.h \
		$(FUZZ_SRC_$(1)) $(wildcard common/*/*.h)
	@mkdir -p $$(dir $$@)
	@$$(if $$(Q),echo "  FUZZ $$@")
	$$(Q)$$(FUZZ_CC) $$(FUZZ_CFLAGS) -o $$@ $$(filter %.c,$$^) $$(DEP_LIBS) -lm
endef
$(foreach t,$(FUZZ_TARGETS),$(eval $(call fuzz_target,$(t))))

fuzz-build:
	$(Q)DEPS_EXTRA="clang libclang-rt-14-dev" scripts/deps.sh
	$(Q)$(MAKE) --no-print-directory $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

fuzz: fuzz-build
	$(Q)$(PYTHON) tests/fuzz/make_corpus.py --out $(FUZZ_DIR)/corpus
	$(Q)fail=0; for t in $(FUZZ_TARGETS); do \
		mkdir -p $(FUZZ_DIR)/crashes/$$t $(FUZZ_DIR)/logs; \
		log=$(FUZZ_DIR)/logs/$$t.log; \
		echo "fuzz $$t: $(FUZZ_SECONDS) s, log $$log"; \
		args=; case $$t in frame) args="$(FUZZ_ARGS_frame)";; ctl) args="$(FUZZ_ARGS_ctl)";; \
			ring) args="$(FUZZ_ARGS_ring)";; evfile) args="$(FUZZ_ARGS_evfile)";; esac; \
		if $(FUZZ_DIR)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_DIR)/crashes/$$t/ $$args $(FUZZ_ARGS) \
			$(FUZZ_DIR)/corpus/$$t tests/fuzz/regressions/$$t >$$log 2>&1; then \
			grep -E '^#[0-9]+[[:space:]]+DONE' $$log | tail -1; \
			grep -E 'stat::(number_of_executed_units|average_exec_per_sec)' $$log; \
		else \
			fail=1; tail -n 40 $$log; \
			echo "fuzz $$t: FAILED; inputs in $(FUZZ_DIR)/crashes/$$t/:"; \
			ls -l $(FUZZ_DIR)/crashes/$$t/; \
		fi; \
	done; exit $$fail

clean:
	rm -rf build build-asan build-vg bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# ---- Permanent installs and the single- vs multi-host comparison ----------
# make install [PREFIX=/usr/local] [DESTDIR=/tmp/stage]: the daemons, the
# systemd unit templates (ExecStart pointing at BINDIR) each with its
# drop-in daq-network.conf (the DAQ network it may reach), the sysusers entry
# of the eventbuilder user, example environment files, chrony
# configurations and the documents (docs/DEPLOY.md).
PREFIX ?= /usr/local
DESTDIR ?=
INSTALL ?= install
INSTALL_BINDIR ?= $(PREFIX)/bin
INSTALL_UNITDIR ?= $(PREFIX)/lib/systemd/system
INSTALL_SYSUSERSDIR ?= $(PREFIX)/lib/sysusers.d
INSTALL_DATADIR ?= $(PREFIX)/share/eventbuilder
INSTALL_DOCDIR ?= $(PREFIX)/share/doc/eventbuilder
INSTALL_MANDIR ?= $(PREFIX)/share/man/man1
UNIT_TEMPLATES := $(wildcard deploy/systemd/*@.service)

.PHONY: install compare man launcher-docs bench-builders bench-runs bench-scan bench-console
# man/*.1 are written from each daemon's --help, so the two agree;
# test_cli.CliTest.test_man_pages_match_help fails when they do not.
man: all
	$(Q)for d in $(DAEMONS); do $(PYTHON) scripts/mkman.py $(BIN)/$$d man/$$d.1 || exit 1; done
# The launcher's tables in docs/TOPOLOGY.md are written from its declarations
# (deploy/daqlib); tests/e2e/test_launcher.py fails when they differ.
launcher-docs:
	$(Q)PYTHONPATH=deploy $(PYTHON) -m daqlib.doctables --write
install: all
	$(Q)$(INSTALL) -d $(DESTDIR)$(INSTALL_BINDIR) $(DESTDIR)$(INSTALL_UNITDIR) \
		$(DESTDIR)$(INSTALL_SYSUSERSDIR) $(DESTDIR)$(INSTALL_DATADIR)/env \
		$(DESTDIR)$(INSTALL_DATADIR)/chrony $(DESTDIR)$(INSTALL_DOCDIR)
	$(Q)$(INSTALL) -m 755 $(BINS) $(DESTDIR)$(INSTALL_BINDIR)/
	$(Q)for u in $(UNIT_TEMPLATES); do \
		sed -e 's|@BINDIR@|$(INSTALL_BINDIR)|g' -e 's|@DOCDIR@|$(INSTALL_DOCDIR)|g' \
		    -e 's|@DATADIR@|$(INSTALL_DATADIR)|g' $$u > $(DESTDIR)$(INSTALL_UNITDIR)/$$(basename $$u) \
		&& chmod 644 $(DESTDIR)$(INSTALL_UNITDIR)/$$(basename $$u) \
		&& $(INSTALL) -d $(DESTDIR)$(INSTALL_UNITDIR)/$$(basename $$u).d \
		&& $(INSTALL) -m 644 deploy/systemd/daq-network.conf \
			$(DESTDIR)$(INSTALL_UNITDIR)/$$(basename $$u).d/daq-network.conf || exit 1; \
	done
	$(Q)$(INSTALL) -m 644 deploy/systemd/eventbuilder.sysusers \
		$(DESTDIR)$(INSTALL_SYSUSERSDIR)/eventbuilder.conf
	$(Q)$(INSTALL) -m 644 deploy/systemd/env/*.env.example $(DESTDIR)$(INSTALL_DATADIR)/env/
	$(Q)$(INSTALL) -m 644 deploy/chrony/*.conf $(DESTDIR)$(INSTALL_DATADIR)/chrony/
	$(Q)$(INSTALL) -m 644 README.md docs/*.md $(DESTDIR)$(INSTALL_DOCDIR)/
	$(Q)$(INSTALL) -d $(DESTDIR)$(INSTALL_MANDIR)
	$(Q)$(INSTALL) -m 644 man/*.1 $(DESTDIR)$(INSTALL_MANDIR)/
	@echo "installed into $(DESTDIR)$(PREFIX): $(notdir $(BINS)) in $(INSTALL_BINDIR)," \
		"units in $(INSTALL_UNITDIR), docs in $(INSTALL_DOCDIR) (see DEPLOY.md)"

# make compare (root): one-host.toml and three-hosts.toml, same parameters,
# both as a virtual cluster of network namespaces, without and with gigabit
# shaping (tbf 1gbit per link); then analysis/compare.py. Runs go to
# runs/compare-<date>/, the tables, plot and each run's metrics.json and
# params.json to results/compare-<date>/. COMPARE_SETS adds --set options,
# e.g. COMPARE_SETS="--set events=20000". Every case runs COMPARE_REPEAT
# times (default 5), interleaved, and the table shows median [min - max]:
# on a shared machine one run's latency varies by a factor of two or more.
# Percentiles are exact, from each run's events.jsonl (analysis/exact_latency.py
# writes latency_exact.json beside metrics.json), so the verdict need not
# allow for histogram buckets.
# Five interleaved repeats are the fewest from which compare.py's verdict
# can pair the runs (sign test at 90 %).
# COMPARE_SCHEDULING says how the daemons are scheduled, one case per word:
# `rt` (default) runs every daemon at SCHED_FIFO priority COMPARE_RTPRIO, so
# other jobs on the machine no longer preempt them (the topology's rtprio);
# `pinned` does that and also gives the builder the last CPU and every
# other daemon the first (cpus); `free` leaves both to the kernel.
# docs/DEPLOY.md has what each measured.
COMPARE_DATE := $(shell date +%Y-%m-%d)
COMPARE_OUT ?= results/compare-$(COMPARE_DATE)
COMPARE_RUNS ?= runs/compare-$(COMPARE_DATE)
COMPARE_TOPOLOGIES ?= one-host three-hosts
COMPARE_SHAPING ?= none 1gbit
COMPARE_SCHEDULING ?= rt
COMPARE_RTPRIO ?= 20
COMPARE_REPEAT ?= 5
COMPARE_SETS ?=
compare: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)mkdir -p $(COMPARE_OUT)/runs $(COMPARE_RUNS); runs=; \
	first=$$($(PYTHON) -c 'import os; print(min(os.sched_getaffinity(0)))'); \
	last=$$($(PYTHON) -c 'import os; print(max(os.sched_getaffinity(0)))'); \
	rt="--set builder.rtprio=$(COMPARE_RTPRIO) --set sources.rtprio=$(COMPARE_RTPRIO)"; \
	rt="$$rt --set reader.0.rtprio=$(COMPARE_RTPRIO) --set reader.1.rtprio=$(COMPARE_RTPRIO)"; \
	pin="--set builder.cpus=\"$$last\" --set sources.cpus=\"$$first\""; \
	pin="$$pin --set reader.0.cpus=\"$$first\" --set reader.1.cpus=\"$$first\""; \
	for rep in $$(seq $(COMPARE_REPEAT)); do \
	for sched in $(COMPARE_SCHEDULING); do \
	case $$sched in free) how=;; rt) how=$$rt;; pinned) how="$$rt $$pin";; \
		*) echo "compare: COMPARE_SCHEDULING: '$$sched' is not free, rt or pinned"; exit 2;; esac; \
	for shaping in $(COMPARE_SHAPING); do for topo in $(COMPARE_TOPOLOGIES); do \
		name=$$topo-$$shaping-$$sched; [ $(COMPARE_REPEAT) -gt 1 ] && name=$$name-$$rep; \
		run=$(COMPARE_RUNS)/$$name; \
		echo "compare: $$name: deploy/daqrun deploy/topologies/$$topo.toml --backend netns" \
			"--set netns.shaping=$$shaping $$how $(COMPARE_SETS) (log: $$run.log)"; \
		if ! $(PYTHON) deploy/daqrun deploy/topologies/$$topo.toml --backend netns \
			--set netns.shaping=$$shaping $$how $(COMPARE_SETS) --out $$run > $$run.log 2>&1; then \
			tail -n 40 $$run.log; echo "compare: $$name FAILED (log: $$run.log)"; exit 1; \
		fi; \
		grep -E '^(latency|clocks|equations|status):' $$run.log | sed 's/^/  /'; \
		mkdir -p $(COMPARE_OUT)/runs/$$name; \
		$(PYTHON) analysis/exact_latency.py $$run | sed 's/^/  exact: /'; \
		cp $$run/metrics.json $$run/params.json $$run/latency_exact.json $$run.log \
			$(COMPARE_OUT)/runs/$$name/; \
		runs="$$runs $(COMPARE_OUT)/runs/$$name"; \
	done; done; done; done; \
	$(PYTHON) analysis/compare.py $$runs --group --out $(COMPARE_OUT) \
		--title "One host against three hosts (network namespaces), without and with gigabit shaping"
