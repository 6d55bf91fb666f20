# sbx: `make run` and `make test` are the two commands; everything else serves them.
# The build is plain make: one object dir per flavour (release in build/, sanitizers in build-asan/).

CC       ?= gcc
BUILD    ?= build
DATA_DIR ?= $(CURDIR)/data
LISTEN   ?= 127.0.0.1:8787
TEMPLATE_CACHE ?= /var/cache/sbx/templates
# What `make run` keeps warm (docs/templates.md): office restored from its warm snapshot (its
# creates answer restored: true, as spec 000's template table says), one such sandbox kept
# ready. Set either empty to turn it off, e.g. `make run SBX_WARM_POOL=`; the environment's
# values win over these.
SBX_WARM_SNAPSHOT ?= office
SBX_WARM_POOL ?= office:1

WARN     := -Wall -Wextra -Werror -Wshadow -Wno-unused-parameter -Wformat=2
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu17 $(WARN) -D_GNU_SOURCE -fno-strict-aliasing -MMD -MP
SAN      ?=
PKGS     := libmicrohttpd jansson sqlite3 libpq libcrypto libssl libcurl libmagic libclamav libarchive yaml-0.1
# Libraries without a pkg-config file.
NOPC_LIBS := -lwslay -lhttp_parser

COMMON_SRC := $(wildcard src/common/*.c)
PROTO_SRC  := $(wildcard src/proto/*.c)
DAEMON_SRC := $(wildcard src/daemon/*.c src/daemon/*/*.c)
# The namespaces backend's container code runs in the shim only (docs/runtime.md).
SHIM_ONLY  := src/runtime/shim.c src/runtime/shim_relay.c src/runtime/shim_idle.c src/runtime/namespaces.c src/runtime/shim_docker.c src/runtime/shim_provider.c
# Its seccomp filter is made into BPF by libseccomp at build time, by a generator that
# holds the rules (syscalls.c): a container start then loads a finished program.
NSF_SRC    := src/runtime/ns_filter_gen.c src/runtime/syscalls.c
RT_SRC     := $(filter-out $(SHIM_ONLY) $(NSF_SRC),$(wildcard src/runtime/*.c))
AGENT_SRC  := $(wildcard src/agent/*.c)
# sbx-bsl, the BSL analyzer behind bsl_check (docs/bsl.md): static, like the agent, and
# bind-mounted read-only into every sandbox. Its modules (all but main.c) are also linked into
# the unit tests and the fuzz targets.
BSL_SRC    := $(filter-out src/bsl/main.c,$(wildcard src/bsl/*.c))
SHIM_SRC   := $(SHIM_ONLY) src/runtime/cgroup.c src/runtime/oci.c src/runtime/docker_api.c src/runtime/docker_tar.c src/runtime/provider_api.c src/runtime/curlx.c

obj = $(patsubst %.c,$(BUILD)/obj/%.o,$(1))
aobj = $(patsubst %.c,$(BUILD)/agent-obj/%.o,$(1))

DAEMON_OBJ := $(call obj,$(DAEMON_SRC) $(RT_SRC) $(COMMON_SRC) $(PROTO_SRC) $(BSL_SRC))
SHIM_OBJ   := $(call obj,$(SHIM_SRC) $(COMMON_SRC) $(PROTO_SRC)) $(BUILD)/obj/gen/ns_seccomp.o
NSF_GEN    := $(BUILD)/gen/ns_filter_gen
# The agent runs inside the sandbox's root filesystem, so it is static and never sanitized.
AGENT_OBJ  := $(call aobj,$(AGENT_SRC) $(COMMON_SRC) $(PROTO_SRC))
# The Python kernel (kernel/sbx_kernel.py) is compiled into the agent as one NUL-terminated
# string for `python3 -c`, its node side (kernel/sbx_kernel.js) as another for `node -e`: they
# reach every sandbox without another mount or a template rebuild.
KERNEL_GEN := $(BUILD)/gen/kernel_src.c
AGENT_OBJ  += $(BUILD)/agent-obj/gen/kernel_src.o
# GET /openapi.json serves docs/openapi.yaml as JSON, converted once here (python3-yaml) and
# compiled into sbxd as one NUL-terminated string.
OPENAPI_GEN := $(BUILD)/gen/openapi_json.c
DAEMON_OBJ += $(BUILD)/obj/gen/openapi_json.o
# The web console (docs/console.md): its pages and the pinned npm packages they use
# (src/daemon/console/package-lock.json, installed by scripts/npm-deps.sh), compiled into sbxd.
CONSOLE_DIR := src/daemon/console
CONSOLE_WEB := $(wildcard $(CONSOLE_DIR)/web/*)
CONSOLE_NPM := $(CONSOLE_DIR)/node_modules/@xterm
CONSOLE_PDFJS := $(CONSOLE_DIR)/node_modules/pdfjs-dist/build
CONSOLE_GEN := $(BUILD)/gen/console_assets.c
DAEMON_OBJ += $(BUILD)/obj/gen/console_assets.o

UNIT_SRC   := $(wildcard tests/unit/test_*.c)
UNIT_BIN   := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRC))
# Everything but the daemon's main, so unit tests can link any module.
LIB_OBJ    := $(filter-out $(BUILD)/obj/src/daemon/main.o,$(DAEMON_OBJ))

# For scripts/fuzz.sh: the daemon's libraries, from this one list.
print-libs:
	@echo $(shell pkg-config --libs $(PKGS)) $(NOPC_LIBS) -lpthread
print-cflags:
	@echo $(shell pkg-config --cflags $(PKGS))
# The daemon's modules as one archive, so each fuzz target links only what it uses
# (scripts/fuzz.sh builds it with clang in build-fuzz/).
$(BUILD)/libsbxd.a: $(LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

.PHONY: all build print-libs print-cflags run test deps template unit e2e bench fuzz clean distclean format

all: build
build: $(BUILD)/sbxd $(BUILD)/sbx-agent $(BUILD)/sbx-shim $(BUILD)/sbx-mcp $(BUILD)/sbx-bsl

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(shell pkg-config --cflags $(PKGS) 2>/dev/null) -c $< -o $@

$(BUILD)/agent-obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -g $(WARN) -D_GNU_SOURCE -MMD -MP -c $< -o $@

$(KERNEL_GEN): kernel/sbx_kernel.py kernel/sbx_kernel.js
	@mkdir -p $(dir $@)
	{ echo '/* Generated from $^ by make. */'; echo 'const char sbx_kernel_src[] = {'; \
	  xxd -i < kernel/sbx_kernel.py; echo ', 0x00};'; \
	  echo 'const char sbx_kernel_js_src[] = {'; \
	  xxd -i < kernel/sbx_kernel.js; echo ', 0x00};'; } > $@.tmp && mv $@.tmp $@

$(BUILD)/agent-obj/gen/kernel_src.o: $(KERNEL_GEN)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -c $< -o $@

$(OPENAPI_GEN): docs/openapi.yaml scripts/openapi.py
	@mkdir -p $(dir $@)
	/usr/bin/python3 scripts/openapi.py --json $< > $@.json
	{ echo '/* Generated from $< by make. */'; echo 'const char sbx_openapi_json[] = {'; \
	  xxd -i < $@.json; echo ', 0x00};'; } > $@.tmp && mv $@.tmp $@ && rm $@.json

$(BUILD)/obj/gen/openapi_json.o: $(OPENAPI_GEN)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -c $< -o $@

# The folder too: a page added or removed changes its time, not any listed file's.
$(CONSOLE_GEN): $(CONSOLE_WEB) $(CONSOLE_DIR)/web $(CONSOLE_DIR)/package-lock.json scripts/console-assets.py
	@mkdir -p $(dir $@)
	@scripts/npm-deps.sh $(CONSOLE_DIR)
	/usr/bin/python3 scripts/console-assets.py $@ $(foreach f,$(CONSOLE_WEB),$(notdir $(f))=$(f)) \
	  xterm.mjs=$(CONSOLE_NPM)/xterm/lib/xterm.mjs xterm.css=$(CONSOLE_NPM)/xterm/css/xterm.css \
	  addon-fit.mjs=$(CONSOLE_NPM)/addon-fit/lib/addon-fit.mjs \
	  pdf.mjs=$(CONSOLE_PDFJS)/pdf.min.mjs pdf.worker.mjs=$(CONSOLE_PDFJS)/pdf.worker.min.mjs

$(BUILD)/obj/gen/console_assets.o: $(CONSOLE_GEN)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -I. -c $< -o $@

$(NSF_GEN): $(NSF_SRC) src/runtime/syscalls.h
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 $(WARN) -D_GNU_SOURCE -o $@ $(NSF_SRC) -lseccomp

$(BUILD)/gen/ns_seccomp.c: $(NSF_GEN)
	$(NSF_GEN) > $@.bpf
	{ echo '/* Generated by $< by make. */'; \
	  echo 'const unsigned char ns_seccomp_bpf[] __attribute__((aligned(8))) = {'; \
	  xxd -i < $@.bpf; echo '};'; \
	  echo 'const unsigned int ns_seccomp_bpf_len = sizeof(ns_seccomp_bpf);'; } > $@.tmp && \
	  mv $@.tmp $@ && rm $@.bpf

$(BUILD)/obj/gen/ns_seccomp.o: $(BUILD)/gen/ns_seccomp.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu17 -O2 -c $< -o $@

$(BUILD)/sbxd: $(DAEMON_OBJ)
	$(CC) $(SAN) -o $@ $^ $(shell pkg-config --libs $(PKGS)) $(NOPC_LIBS) -lpthread

$(BUILD)/sbx-shim: $(SHIM_OBJ)
	$(CC) $(SAN) -o $@ $^ -ljansson -lcurl -larchive -lpthread

# MCP over stdio for desktop clients, bridged to sbxd's /mcp (docs/mcp.md).
$(BUILD)/sbx-mcp: src/bridge/sbx_mcp.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(shell pkg-config --cflags libcurl jansson) -o $@ $< $(shell pkg-config --libs libcurl jansson)

$(BUILD)/sbx-agent: $(AGENT_OBJ)
	$(CC) -static -o $@ $^ -l:libjansson.a -l:libseccomp.a

# Runs inside the sandbox's root filesystem, so static and never sanitized (like the agent).
$(BUILD)/sbx-bsl: $(call aobj,$(BSL_SRC) src/bsl/main.c)
	$(CC) -static -o $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(shell pkg-config --cflags $(PKGS)) -o $@ $(filter %.c %.o,$^) $(shell pkg-config --libs $(PKGS)) $(NOPC_LIBS) -lpthread

# A command-line front to the rt_* calls, for the runtime's end-to-end tests.
$(BUILD)/tests/rt_driver: tests/e2e/rt_driver.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) $(shell pkg-config --cflags $(PKGS)) -o $@ $(filter %.c %.o,$^) $(shell pkg-config --libs $(PKGS)) $(NOPC_LIBS) -lpthread

deps:
	@scripts/deps.sh

template: deps
	@SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) scripts/build-template.sh base

run: deps
	$(MAKE) build
	@SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) scripts/build-template.sh base
	@SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) scripts/build-template.sh office
	SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) SBX_WARM_SNAPSHOT=$(SBX_WARM_SNAPSHOT) \
	  SBX_WARM_POOL=$(SBX_WARM_POOL) $(BUILD)/sbxd --listen $(LISTEN) --data-dir $(DATA_DIR)

# The test build: ASan + UBSan for everything that runs on the host.
# The whole suite runs on PostgreSQL (one node, a server the run starts; test_nodes and
# test_store_pg start their own), then the suites that check what SQLite itself keeps
# (keys and sandboxes, the audit chain, kill -9, idempotency, restarts, the ledger, sealed
# secrets) once more on SQLite, the embedded default (docs/scale-out.md).
SQLITE_SUITES := test_core. test_receipts_audit. test_durability. test_idempotency. \
	test_restart. test_billing. test_configs.
# Four runs at once (tests/run.py --beside, one run per group): most suites wait on
# sandboxes, timers and sockets (one run alone used half a core of two, two runs 45 % of the
# machine). The second and third groups run beside the rest; the last holds the suites the
# SQLite pass repeats, on PostgreSQL first, then that pass. Stop 50's three runs took 1116 s
# (the first, with test_providers and test_docker new in it), 950 s and 900 s, 23.7 minutes
# in all; the third group (the slow backend suites, each with daemons or engines of its own)
# evens them out. Stop 51 moved test_sdk to the backend group and test_skill_installs to
# the first (their runs had been 993, 839 and 977 s).
BESIDE_SUITES := test_backends. test_billing_surfaces. test_kernel. test_paths. \
	test_http_strict. test_chat. test_processes. test_v1. test_terminal. test_artifacts. \
	test_skills. test_first_contact. test_users. test_preview. test_pty. \
	test_metrics. test_url_inputs. test_openapi. test_skill_installs. test_template_build. \
	test_oom. test_console.
BESIDE_MORE_SUITES := test_providers. test_docker. test_e2b. test_cli. test_sdk.
BESIDE_TOO_SUITES := $(SQLITE_SUITES) test_egress. test_sessions. \
	test_files. test_runtime.
# And these last, alone: fork bombs keep both cores busy for seconds at a time, and the nodes
# suite times heartbeats.
ALONE_SUITES := test_forkbomb. test_nodes.

test: deps
	@scripts/npm-deps.sh
	$(MAKE) BUILD=build-asan SAN="-fsanitize=address,undefined -fno-omit-frame-pointer" build unit-bins
	@SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) scripts/build-template.sh base
	@SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) scripts/build-template.sh office
	@SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) scripts/build-template.sh desktop
	SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) python3 tests/run.py --build build-asan --pg \
	  $(SQLITE_SUITES:%=--sqlite-again %) --beside "$(BESIDE_SUITES)" \
	  --beside "$(BESIDE_MORE_SUITES)" --beside "$(BESIDE_TOO_SUITES)" \
	  $(ALONE_SUITES:%=--alone %)

unit-bins: $(UNIT_BIN) $(BUILD)/tests/rt_driver

bench: deps
	$(MAKE) build
	@SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) scripts/build-template.sh base
	@SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) scripts/build-template.sh office
	SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) python3 bench/run.py --build build
	SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) python3 bench/bench_templates.py --build build
	SBX_TEMPLATE_CACHE=$(TEMPLATE_CACHE) python3 bench/bench_workload.py --build build

fuzz:
	@scripts/fuzz.sh

format:
	clang-format -i $(shell git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-fuzz

# The sbx command-line client on its client library, libsbx (docs/cli.md). libsbx takes the
# pure common helpers with it, so the static library links on its own.
PREFIX     ?= /usr/local
LIBSBX_SRC := $(wildcard src/lib/*.c) src/common/err.c src/common/util.c src/common/text.c
CLI_SRC    := $(wildcard src/cli/*.c)
LIBSBX_OBJ := $(call obj,$(LIBSBX_SRC))
CLI_OBJ    := $(call obj,$(CLI_SRC))
CLI_LIBS    = $(shell pkg-config --libs libcurl jansson libcrypto) -lwslay -lhttp_parser

build: $(BUILD)/sbx $(BUILD)/libsbx.a

$(BUILD)/libsbx.a: $(LIBSBX_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/sbx: $(CLI_OBJ) $(BUILD)/libsbx.a
	$(CC) $(SAN) -o $@ $(CLI_OBJ) $(BUILD)/libsbx.a $(CLI_LIBS)

$(BUILD)/tests/test_cli: tests/unit/test_cli.c $(filter-out %/main.o,$(CLI_OBJ)) $(BUILD)/libsbx.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $(filter %.c %.o %.a,$^) $(CLI_LIBS)

.PHONY: install
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib \
	  $(DESTDIR)$(PREFIX)/include/sbx/lib $(DESTDIR)$(PREFIX)/include/sbx/common \
	  $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 0755 $(BUILD)/sbx $(DESTDIR)$(PREFIX)/bin/sbx
	install -m 0644 $(BUILD)/libsbx.a $(DESTDIR)$(PREFIX)/lib/libsbx.a
	install -m 0644 src/lib/sbx.h $(DESTDIR)$(PREFIX)/include/sbx/lib/sbx.h
	install -m 0644 src/common/err.h $(DESTDIR)$(PREFIX)/include/sbx/common/err.h
	install -m 0644 docs/sbx.1 $(DESTDIR)$(PREFIX)/share/man/man1/sbx.1
	install -m 0644 share/completion/sbx.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/sbx

-include $(shell find build build-asan build-fuzz -name '*.d' 2>/dev/null)
