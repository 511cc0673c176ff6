# sbx: the static agent for seven architectures, the host library and CLI, and their tests.
# `make` builds everything; `make check` runs the tests; `make size` prints agent sizes.
# Toolchain libraries (musl for riscv64, BearSSL, libarchive) are built once per architecture
# into $(SBX_CACHE) by toolchain/build.sh from pinned Debian source packages.

SBX_CACHE ?= build/cache
override SBX_CACHE := $(abspath $(SBX_CACHE))
export SBX_CACHE

ARCHES := x86_64 aarch64 armv7 i386 riscv64 ppc64le s390x
B := build
# `make` alone builds everything (FORCE below would otherwise be the first target, the default).
.DEFAULT_GOAL := all

# build.sh runs every time: it is a no-op while its stamp holds the digest of the pins and the
# toolchain scripts, and rewrites the stamp (so dependents rebuild) only when it rebuilt.
FORCE:

pin = $(shell . toolchain/pins && echo $$$(1))
LIBARCHIVE_VERSION := $(call pin,LIBARCHIVE_VERSION)
BEARSSL_VERSION := $(call pin,BEARSSL_VERSION)
archvar = $(shell export SBX_CACHE='$(SBX_CACHE)'; . toolchain/arch.sh && sbx_arch $(1) && echo $$$(2))

# Quiet by default; V=1 prints every command.
ifeq ($(V),1)
Q :=
else
Q := @
endif

WARN := -std=c11 -Wall -Wextra -Werror -pedantic -D_GNU_SOURCE

# ---- agents (musl, static, stripped) ----------------------------------------------------

AGENT_SRC := $(wildcard agent/*.c) $(wildcard shared/*.c) $(wildcard archive/*.c)
AGENT_CFLAGS := $(WARN) -Os -ffunction-sections -fdata-sections -Ishared -Iarchive \
	-DSBX_LIBARCHIVE_DEBIAN='"$(LIBARCHIVE_VERSION)"' -DSBX_BEARSSL_DEBIAN='"$(BEARSSL_VERSION)"'
AGENTS := $(foreach a,$(ARCHES),$(B)/agent/$(a)/sbx-agent)

define agent_rules
AGENT_CC_$(1) := $(call archvar,$(1),MUSLCC)
AGENT_OBJ_$(1) := $(patsubst %.c,$(B)/agent/$(1)/obj/%.o,$(AGENT_SRC))

$(SBX_CACHE)/$(1)/.stamp: FORCE
	@toolchain/build.sh $(1)

$(B)/agent/$(1)/obj/%.o: %.c $(SBX_CACHE)/$(1)/.stamp
	@mkdir -p $$(@D)
	@echo "  CC $(1) $$<"
	$(Q)$$(AGENT_CC_$(1)) $(AGENT_CFLAGS) -I$(SBX_CACHE)/$(1)/include -MMD -MP -c -o $$@ $$<

$(B)/agent/$(1)/sbx-agent: $$(AGENT_OBJ_$(1))
	@echo "  LD $$@"
	$(Q)$$(AGENT_CC_$(1)) -static -s -Wl,--gc-sections -o $$@ $$^ -L$(SBX_CACHE)/$(1)/lib -larchive -lbearssl

-include $$(AGENT_OBJ_$(1):.o=.d)
endef
$(foreach a,$(ARCHES),$(eval $(call agent_rules,$(a))))

# The negative controls: x86_64 agents weakened on purpose, which the escape tests must catch
# (proof that they can fail). build/agent-weak: a supervisor without subreaper, /proc walk or
# nonce scan (tests/unit/test_supervise.c). build/agent-weak-put: a safe walk that follows
# symlinks (shared/walk.h; the hostile archives of tests/transfer.sh).
define weak_rules
WEAK_OBJ_$(1) := $$(patsubst %.c,$(B)/$(1)/x86_64/obj/%.o,$(AGENT_SRC))

$(B)/$(1)/x86_64/obj/%.o: %.c $(SBX_CACHE)/x86_64/.stamp
	@mkdir -p $$(@D)
	@echo "  CC $(1) $$<"
	$(Q)$$(AGENT_CC_x86_64) $(AGENT_CFLAGS) $(2) -I$(SBX_CACHE)/x86_64/include -MMD -MP -c \
		-o $$@ $$<

$(B)/$(1)/x86_64/sbx-agent: $$(WEAK_OBJ_$(1))
	@echo "  LD $$@"
	$(Q)$$(AGENT_CC_x86_64) -static -s -Wl,--gc-sections -o $$@ $$^ -L$(SBX_CACHE)/x86_64/lib \
		-larchive -lbearssl

-include $$(WEAK_OBJ_$(1):.o=.d)
endef
$(eval $(call weak_rules,agent-weak,-DSBX_WEAK_SUPERVISOR))
$(eval $(call weak_rules,agent-weak-put,-DSBX_WEAK_PLACEMENT))
WEAK := $(B)/agent-weak/x86_64/sbx-agent $(B)/agent-weak-put/x86_64/sbx-agent

# Adversarial harness programs (tests/harness/): native, static so any sandbox can run them.
HARNESS := $(patsubst tests/harness/%.c,$(B)/harness/%,$(wildcard tests/harness/*.c))

$(B)/harness/%: tests/harness/%.c tests/harness/ready.h
	@mkdir -p $(@D)
	@echo "  CC harness $<"
	$(Q)$(HOST_CC) -O2 -Wall -Wextra -Werror -std=c11 -D_GNU_SOURCE -static -o $@ $<

# ---- host: libsbx.a, libsbx.so, sbx (glibc, system compiler) ---------------------------

HOST_CC ?= cc
ifeq ($(SAN),1)
H := $(B)/san/host
SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
else
H := $(B)/host
SANFLAGS :=
endif
HOST_CFLAGS := $(WARN) -O2 -g -fPIC $(SANFLAGS) -Ishared -Iarchive -Ihost -Irunner \
	-I$(SBX_CACHE)/host/include
HOST_LDFLAGS := $(SANFLAGS)
# The folder graph is one-way: cli -> runner -> libsbx (host/) -> shared, archive. The CLI sees
# only the installed headers (PUBLIC_H, copied to $(H)/include/sbx): what any program of a
# user's would see. docs/architecture.md draws it.
CLI_SRC := $(wildcard host/cli/*.c)
LIB_SRC := $(wildcard host/*.c) $(wildcard shared/*.c) $(wildcard runner/*.c) $(wildcard archive/*.c)
PUBLIC_H := host/sbx.h host/json.h runner/sbx_runner.h shared/err.h shared/utf8.h shared/hex.h \
	shared/arch.h
PUBLIC_INC := $(H)/include/sbx
PUBLIC_COPIES := $(addprefix $(PUBLIC_INC)/,$(notdir $(PUBLIC_H)))
define public_copy
$(PUBLIC_INC)/$(notdir $(1)): $(1)
	@mkdir -p $$(@D)
	$(Q)cp $$< $$@
endef
$(foreach h,$(PUBLIC_H),$(eval $(call public_copy,$(h))))
LIB_OBJ := $(patsubst %.c,$(H)/obj/%.o,$(LIB_SRC))
BEARSSL_HOST := $(SBX_CACHE)/host/lib/libbearssl.a
# The host libarchive (tar formats only) needs nothing beyond libc.
LIBARCHIVE_HOST := $(SBX_CACHE)/host/lib/libarchive.a

$(SBX_CACHE)/host/.stamp: FORCE
	@toolchain/build.sh host

$(H)/obj/%.o: %.c $(SBX_CACHE)/host/.stamp
	@mkdir -p $(@D)
	@echo "  CC host $<"
	$(Q)$(HOST_CC) $(HOST_CFLAGS) -MMD -MP -c -o $@ $<

# libsbx.a carries BearSSL's and libarchive's objects too, so a user links one archive.
$(H)/libsbx.a: $(LIB_OBJ) $(SBX_CACHE)/host/.stamp
	@rm -f $@
	@echo "  AR $@"
	$(Q)printf 'create $@\n$(foreach o,$(LIB_OBJ),addmod $(o)\n)addlib $(BEARSSL_HOST)\naddlib $(LIBARCHIVE_HOST)\nsave\nend\n' | ar -M

$(H)/libsbx.so: $(LIB_OBJ) $(SBX_CACHE)/host/.stamp
	@echo "  LD $@"
	$(Q)$(HOST_CC) -shared -Wl,-soname,libsbx.so.0 -Wl,--exclude-libs,ALL $(HOST_LDFLAGS) -o $@ $(LIB_OBJ) $(BEARSSL_HOST) \
		$(LIBARCHIVE_HOST)

CLI_OBJ := $(patsubst %.c,$(H)/obj/%.o,$(CLI_SRC))

$(H)/obj/host/cli/%.o: host/cli/%.c $(PUBLIC_COPIES)
	@mkdir -p $(@D)
	@echo "  CC cli $<"
	$(Q)$(HOST_CC) $(WARN) -O2 -g $(SANFLAGS) -I$(PUBLIC_INC) -Ihost/cli -MMD -MP -c -o $@ $<

$(H)/sbx: $(CLI_OBJ) $(H)/libsbx.a
	@echo "  LD $@"
	$(Q)$(HOST_CC) $(HOST_LDFLAGS) -o $@ $^

-include $(LIB_OBJ:.o=.d) $(CLI_OBJ:.o=.d)

HOST := $(H)/sbx $(H)/libsbx.a $(H)/libsbx.so

# ---- tests -------------------------------------------------------------------------------

# tests/README.md: unit tests (tests/unit/, the code alone) and integration tests
# (tests/integration/, real agents, runners or processes), each file one program, picked up by
# name; both build into $(H)/tests/, so a name may be in one folder only.
UNIT_TESTS := $(patsubst tests/unit/%.c,$(H)/tests/%,$(wildcard tests/unit/test_*.c))
INTEGRATION_TESTS := $(patsubst tests/integration/%.c,$(H)/tests/%,$(wildcard tests/integration/test_*.c))
TESTS := $(UNIT_TESTS) $(INTEGRATION_TESTS)
ifneq ($(filter $(UNIT_TESTS),$(INTEGRATION_TESTS)),)
$(error a test in both tests/unit and tests/integration: $(notdir $(filter $(UNIT_TESTS),$(INTEGRATION_TESTS))))
endif

# Tests of agent-side code compile that code for the host too.
$(H)/tests/test_probe: TEST_EXTRA := agent/probe.c
$(H)/tests/test_probe: agent/probe.c
$(H)/tests/test_keeper: TEST_EXTRA := agent/keeper.c agent/resident.c
$(H)/tests/test_keeper: agent/keeper.c agent/keeper.h agent/resident.c
$(H)/tests/test_stdin: TEST_EXTRA := agent/stdin.c
$(H)/tests/test_stdin: agent/stdin.c agent/stdin.h
JOB_SRC := agent/job.c agent/stdin.c agent/xfer.c agent/ptyctl.c agent/exec.c agent/probe.c \
	agent/ptyhold.c agent/killtree.c agent/launch.c agent/runas.c agent/pathexec.c
$(H)/tests/test_job: TEST_EXTRA := $(JOB_SRC)
$(H)/tests/test_job: $(JOB_SRC)

define test_recipe
@mkdir -p $(@D)
@echo "  CC test $<"
$(Q)$(HOST_CC) $(HOST_CFLAGS) -Iagent -Itests/lib -MMD -MP -o $@ $< $(TEST_EXTRA) $(H)/libsbx.a \
	$(HOST_LDFLAGS) -lcmocka
endef
$(UNIT_TESTS): $(H)/tests/%: tests/unit/%.c $(H)/libsbx.a
	$(test_recipe)
$(filter-out $(H)/tests/test_runner_api,$(INTEGRATION_TESTS)): $(H)/tests/%: \
		tests/integration/%.c $(H)/libsbx.a
	$(test_recipe)
# The runner API's test sees only the installed headers, as a user's program would.
$(H)/tests/test_runner_api: tests/integration/test_runner_api.c $(H)/libsbx.a $(PUBLIC_COPIES)
	@mkdir -p $(@D)
	@echo "  CC test $<"
	$(Q)$(HOST_CC) $(WARN) -O2 -g $(SANFLAGS) -I$(PUBLIC_INC) -o $@ $< $(H)/libsbx.a \
		$(HOST_LDFLAGS) -lcmocka
# A test moved to the other folder leaves its old source in its program's .d: make passes over
# that name, and the program is rebuilt from where the source is now.
tests/unit/test_%.c: ;
tests/integration/test_%.c: ;

# ---- fuzz targets (clang, libFuzzer) -------------------------------------------------------
# `make fuzz` builds them; `make check` replays each seed corpus once (fuzz/corpus/NAME/);
# `build/fuzz/fuzz_NAME fuzz/corpus/NAME -max_total_time=60` fuzzes for real.

FUZZ_SRC := $(wildcard fuzz/fuzz_*.c)
FUZZERS := $(patsubst fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRC))
FUZZ_LIB_SRC := $(wildcard shared/*.c) host/json.c
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
	-Ishared -Iarchive -Ihost -Irunner -Iagent -I$(SBX_CACHE)/host/include
# fuzz_unpack drives the archive engine: it also links archive/unpack.c and the host
# libarchive (built without sanitizer instrumentation by toolchain/build.sh).
$(B)/fuzz/fuzz_unpack: FUZZ_EXTRA := archive/unpack.c archive/wbehind.c $(LIBARCHIVE_HOST)
$(B)/fuzz/fuzz_unpack: archive/unpack.c archive/unpack.h
$(B)/fuzz/fuzz_pack_hdr: FUZZ_EXTRA := archive/pack_hdr.c $(LIBARCHIVE_HOST)
$(B)/fuzz/fuzz_pack_hdr: archive/pack_hdr.c archive/pack_hdr.h
# fuzz_host drives the whole library (session, operations, transfers) over a socketpair.
FUZZ_HOST_SRC := $(filter-out shared/% host/json.c,$(LIB_SRC))
$(B)/fuzz/fuzz_host: FUZZ_EXTRA := $(FUZZ_HOST_SRC) $(LIBARCHIVE_HOST) -lpthread
$(B)/fuzz/fuzz_host: $(FUZZ_HOST_SRC)
$(B)/fuzz/fuzz_keeper: FUZZ_EXTRA := agent/keeper.c agent/resident.c
$(B)/fuzz/fuzz_keeper: agent/keeper.c agent/keeper.h
$(B)/fuzz/fuzz_engine: FUZZ_EXTRA := host/engine.c
$(B)/fuzz/fuzz_engine: host/engine.c host/engine.h
$(B)/fuzz/fuzz_boot: FUZZ_EXTRA := runner/boot_dialog.c
$(B)/fuzz/fuzz_boot: runner/boot_dialog.c runner/boot.h
$(B)/fuzz/fuzz_inspect: FUZZ_EXTRA := runner/inspect.c -lm
$(B)/fuzz/fuzz_inspect: runner/inspect.c runner/inspect.h
$(B)/fuzz/fuzz_pty: FUZZ_EXTRA := host/ptymsg.c
$(B)/fuzz/fuzz_pty: host/ptymsg.c host/ptymsg.h

$(B)/fuzz/%: fuzz/%.c $(FUZZ_LIB_SRC) $(SBX_CACHE)/host/.stamp
	@mkdir -p $(@D)
	@echo "  FUZZ $@"
	$(Q)clang $(FUZZ_CFLAGS) -o $@ $< $(FUZZ_LIB_SRC) $(FUZZ_EXTRA) $(BEARSSL_HOST)

-include $(TESTS:=.d)

# ---- targets -----------------------------------------------------------------------------

.PHONY: all agents host check size clean distclean format fuzz bench-session bench-python install-python bench-supervise \
	bench-sha256 bench-transfer bench-runners bench-scale bench-pty bench-forward FORCE
all: agents host
agents: $(AGENTS)
host: $(HOST)

fuzz: $(FUZZERS)

$(B)/bench/%: tests/bench/%.c $(B)/host/libsbx.a
	@mkdir -p $(@D)
	@echo "  CC bench $<"
	$(Q)$(HOST_CC) $(WARN) -O2 -g -Ishared -Ihost -Irunner -Itests/lib -I$(SBX_CACHE)/host/include \
		-o $@ $< $(B)/host/libsbx.a

bench-session: $(AGENTS) $(B)/bench/bench_session
	SBX_AGENT_DIR=$(abspath $(B)/agent) $(B)/bench/bench_session

bench-transfer: $(AGENTS) $(B)/host/sbx $(HARNESS)
	tests/bench/transfer.sh $(B)/host/sbx $(B)/harness/cutter

bench-runners: $(AGENTS) $(B)/host/sbx $(B)/bench/bench_probe images
	tests/bench/runners.sh $(B)/host/sbx

bench-sha256: $(B)/bench/sha256_speed
	$(B)/bench/sha256_speed

bench-python: $(AGENTS) $(B)/host/sbx $(B)/host/libsbx.so $(B)/bench/bench_probe images
	tests/bench/python.sh $(abspath $(B)/host) $(abspath $(B)/bench)

# The package where the first python3 on PATH finds it, pointing at this build (its
# libsbx.so, agents and images stay here): python/sbx/_installed.py names them.
install-python: $(HOST) $(AGENTS)
	@d=$$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') && \
	rm -rf "$$d/sbx" && cp -r python/sbx "$$d/sbx" && rm -rf "$$d/sbx/__pycache__" && \
	printf 'LIB = %s\nAGENT_DIR = %s\n' "'$(abspath $(H)/libsbx.so)'" \
		"'$(abspath $(B)/agent)'" >"$$d/sbx/_installed.py" && \
	echo "  installed $$d/sbx (libsbx: $(abspath $(H)/libsbx.so))"

bench-pty: $(AGENTS) $(B)/host/sbx $(B)/bench/bench_pty images
	SBX_AGENT_DIR=$(abspath $(B)/agent) tests/bench/pty.sh $(B)/host/sbx $(B)/bench/bench_pty

bench-forward: $(AGENTS) $(B)/host/sbx images
	SBX_AGENT_DIR=$(abspath $(B)/agent) tests/bench/forward.sh $(B)/host/sbx

bench-scale: $(AGENTS) $(B)/host/sbx $(B)/bench/bench_scale images
	SBX_AGENT_DIR=$(abspath $(B)/agent) SBX=$(abspath $(B)/host/sbx) $(B)/bench/bench_scale

bench-supervise: $(AGENTS) $(B)/host/sbx $(B)/bench/bench_supervise $(HARNESS)
	SBX_AGENT_DIR=$(abspath $(B)/agent) SBX_HARNESS_DIR=$(abspath $(B)/harness) \
		$(B)/bench/bench_supervise

# The runner tests use the images (built once, then cached).
check: $(AGENTS) $(HOST) $(TESTS) $(FUZZERS) $(WEAK) $(HARNESS) images
	tests/run.sh $(H) $(B)/fuzz

size: $(AGENTS)
	@tests/size.sh $(ARCHES)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# Root filesystem folders for sandboxes, from Debian packages (docs/images.md). Cached: a
# second run rebuilds nothing. `make images IMAGES=busybox-aarch64` builds one.
.PHONY: images images-clean
images:
	images/build.sh $(B)/images $(IMAGES)

images-clean:
	rm -rf --one-file-system $(B)/images

clean:
	rm -rf $(B)/agent $(B)/agent-weak $(B)/agent-weak-put $(B)/host $(B)/san $(B)/fuzz $(B)/bench $(B)/harness

distclean:
	rm -rf $(B)
