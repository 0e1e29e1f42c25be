# Distributed event builder: build, run, test.
#   make            build bin/sourced bin/readoutd bin/builderd
#   make run        set up, build and run deploy/topologies/local.toml
#   make test       set up, build, run unit then end-to-end tests
#   make asan       the unit and end-to-end tests under AddressSanitizer/UBSan
#   make valgrind   the unit tests under valgrind
# V=1 shows full commands.

PKG_CONFIG ?= pkg-config
PYTHON ?= /usr/bin/python3
BUILD ?= build
BIN ?= bin
OPT ?= -O2

MSGPACK_PC := $(shell $(PKG_CONFIG) --exists msgpack-c 2>/dev/null && echo msgpack-c || echo msgpack)
DEP_CFLAGS := $(shell $(PKG_CONFIG) --cflags libevent $(MSGPACK_PC) zlib libdeflate 2>/dev/null)
DEP_LIBS := $(shell $(PKG_CONFIG) --libs libevent $(MSGPACK_PC) zlib libdeflate 2>/dev/null)
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

COMMON_SRC := $(wildcard common/*.c)
COMMON_OBJ := $(COMMON_SRC:%.c=$(BUILD)/%.o)
DAEMONS := sourced readoutd builderd
BINS := $(DAEMONS:%=$(BIN)/%)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)
HELPER_SRC := $(filter-out $(UNIT_SRC),$(wildcard tests/unit/*.c))
HELPER_OBJ := $(HELPER_SRC:%.c=$(BUILD)/%.o)

.PHONY: all deps run test unit e2e asan valgrind clean bench bench-admission
all: $(BINS)

deps:
	$(Q)scripts/deps.sh

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC $<")
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -c -o $@ $<

$(BUILD)/libcommon.a: $(COMMON_OBJ)
	$(Q)$(AR) rcs $@ $^

$(BIN)/%: $(BUILD)/%/main.o $(BUILD)/libcommon.a
	@mkdir -p $(BIN)
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(BUILD)/libcommon.a $(LDLIBS)

# A daemon's own modules (everything in its folder but main.c).
define daemon_modules
$(BIN)/$(1): $(patsubst %.c,$(BUILD)/%.o,$(filter-out $(1)/main.c,$(wildcard $(1)/*.c)))
endef
$(foreach d,$(DAEMONS),$(eval $(call daemon_modules,$(d))))

$(BUILD)/tests/vectors.h: tests/data/vectors.json tests/gen_vectors.py
	@mkdir -p $(dir $@)
	$(Q)$(PYTHON) tests/gen_vectors.py $< $@

$(BUILD)/tests/unit/%.o: tests/unit/%.c $(BUILD)/tests/vectors.h
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC $<")
	$(Q)$(CC) $(CFLAGS) $(CHECK_CFLAGS) -I$(BUILD)/tests -Itests/unit -c -o $@ $<

$(BUILD)/tests/test_%: $(BUILD)/tests/unit/test_%.o $(HELPER_OBJ) $(BUILD)/libcommon.a
	@$(if $(Q),echo "  LD $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(CHECK_LIBS) $(LDLIBS)

unit: $(UNIT_BIN)
	$(Q)fail=0; for t in $(UNIT_BIN); do CK_DEFAULT_TIMEOUT=120 $(TEST_WRAP) $$t || fail=1; done; exit $$fail

e2e: $(BINS)
	$(Q)ES_BIN=$(abspath $(BIN)) $(PYTHON) tests/e2e/run.py $(E2E_ARGS)

test: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(MAKE) --no-print-directory unit
	$(Q)$(MAKE) --no-print-directory e2e

run: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) deploy/daqrun deploy/topologies/local.toml --out runs/local

asan:
	$(Q)$(MAKE) --no-print-directory BUILD=build-asan BIN=build-asan/bin OPT=-O1 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" all unit e2e

valgrind:
	$(Q)$(MAKE) --no-print-directory BUILD=build-vg BIN=build-vg/bin all $(UNIT_BIN:$(BUILD)/%=build-vg/%)
	$(Q)for t in $(UNIT_BIN:$(BUILD)/%=build-vg/%); do CK_FORK=no valgrind -q --error-exitcode=1 --leak-check=full $$t || exit 1; done

# Completeness with and without credit-based admission (results/).
bench-admission: deps
	$(Q)$(MAKE) --no-print-directory all
	$(Q)$(PYTHON) analysis/bench_admission.py $(BENCH_ARGS)

clean:
	rm -rf build build-asan build-vg bin

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
