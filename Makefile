# grdma — build, test, end-to-end, man page and install targets.
GO       ?= go
PREFIX   ?= /usr/local
DESTDIR  ?=
BINDIR   ?= $(PREFIX)/bin
MANDIR   ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN      := bin/grdma
BINPROM  := bin/grdma-prometheus
# bin/grdma leaves out the Prometheus packages (their inits cost every
# command ~2 ms, ~13 ms in the emulated guest) and execs bin/grdma-prometheus,
# the complete build, for exporter, stat export and check --textfile.
NOPROM   := grdma_noprometheus

.PHONY: all build test test-race test-arm64 lint e2e fuzz bench check man install uninstall clean

all: build

# Static executables: no cgo, no libibverbs, no libmnl.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags $(NOPROM) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/grdma
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINPROM) ./cmd/grdma

# The binary install needs; rebuilt only when a source file changed, so
# `make build && sudo make install` does not need Go as root.
GOSRC := $(shell find . -name '*.go' -not -path './.cache/*' -not -path './e2e/*' 2>/dev/null) go.mod go.sum
$(BIN): $(GOSRC)
	CGO_ENABLED=0 $(GO) build -trimpath -tags $(NOPROM) -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/grdma
$(BINPROM): $(GOSRC)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINPROM) ./cmd/grdma

# Unit tests: fakes only, no RDMA kernel needed, and nothing installed or
# changed on the machine. The header-layout tests compare the ABI structs
# with the kernel's UAPI headers (linux-libc-dev) and skip, naming their
# package, where those are missing (.ci/run installs them and makes the
# skip a failure); staticcheck (pinned in go.mod) must be clean and
# go.mod tidy.
test:
	@out=$$(gofmt -l $$(find . -name '*.go' -not -path './.cache/*')); test -z "$$out" || { echo "gofmt would change: $$out"; exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags $(NOPROM) ./cmd/grdma
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags $(NOPROM) ./cmd/grdma
	$(GO) mod tidy -diff
	CGO_ENABLED=0 $(GO) test ./...
	CGO_ENABLED=0 $(GO) test -tags $(NOPROM) ./cmd/grdma
	@$(MAKE) --no-print-directory test-race test-arm64

# The exporter, /probe and the pingmesh under the race detector (they
# serve scrapes and probes concurrently, one server per listen address),
# and the sweep (a node's rounds, its listener and its partners run at
# once; a coordinator's pairs and their HTTP probes): needs cgo and a C
# compiler.
test-race:
	@if command -v $$($(GO) env CC) >/dev/null; then \
		echo "CGO_ENABLED=1 $(GO) test -race ./exporter/... ./prober/... ./pingmesh/... ./sweep/..."; CGO_ENABLED=1 $(GO) test -race ./exporter/... ./prober/... ./pingmesh/... ./sweep/...; \
	else \
		echo "race tests SKIPPED: no C compiler ($$($(GO) env CC)) for go test -race"; \
	fi

# The unit tests of every package with unsafe or sync/atomic code, built
# for arm64 (Grace, Graviton) and run by qemu-user, which faults on an
# unaligned atomic load as Neoverse N1 does (amd64 does not). Skipped with a
# message when neither qemu-aarch64-static (Debian qemu-user-static) nor
# qemu-aarch64 (qemu-user) is installed; .ci/run installs it and sets
# GRDMA_ARM64_TESTS=required, which makes that a failure.
ARM64_PKGS = $(shell grep -rl --include='*.go' --exclude='*_test.go' --exclude-dir=.cache -e '"unsafe"' -e '"sync/atomic"' . | xargs -n1 dirname | sort -u)
QEMU_AARCH64 = $(shell command -v qemu-aarch64-static || command -v qemu-aarch64)
test-arm64:
	@if [ -z "$(QEMU_AARCH64)" ]; then \
		echo "arm64 unit tests SKIPPED: no qemu-aarch64-static or qemu-aarch64 (apt-get install qemu-user-static)"; \
		test "$$GRDMA_ARM64_TESTS" != required; \
	else \
		echo "arm64 unit tests under $(QEMU_AARCH64), cpu neoverse-n1: $(ARM64_PKGS)"; \
		CGO_ENABLED=0 GOARCH=arm64 QEMU_CPU=neoverse-n1 $(GO) test -exec $(QEMU_AARCH64) $(ARM64_PKGS); \
	fi

# staticcheck alone (make test runs it too).
lint:
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags $(NOPROM) ./cmd/grdma

# End-to-end tests in QEMU guests booting Debian's 6.1 and 6.12 kernels.
e2e: build
	$(GO) test -tags e2e -count=1 -timeout 80m -v ./e2e/

# Every fuzz target (func Fuzz* in a _test.go) for FUZZTIME each; a crash
# fails the run and leaves its input under the package's testdata/fuzz/,
# to be kept as a regression seed.
# A count, not a duration: with a duration, Go 1.26's fuzz coordinator can
# fail a target with "context deadline exceeded" and no crasher when the
# machine is loaded (go.dev/issue/75804, fixed in Go 1.27).
FUZZTIME ?= 20000x
fuzz:
	@set -e; grep -r --include='*_test.go' -l '^func Fuzz' --exclude-dir=.cache . | sort | while read -r file; do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$file"); do \
			echo "fuzz $$(dirname $$file) $$name $(FUZZTIME)"; \
			CGO_ENABLED=0 $(GO) test "$$(dirname $$file)" -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) >/tmp/grdma-fuzz.$$$$.log 2>&1 || \
				{ cat /tmp/grdma-fuzz.$$$$.log; rm -f /tmp/grdma-fuzz.$$$$.log; exit 1; }; \
			tail -1 /tmp/grdma-fuzz.$$$$.log; rm -f /tmp/grdma-fuzz.$$$$.log; \
		done; \
	done

# grdma against iproute2 rdma and ibv_devinfo in the QEMU guest (1, 16 and
# 64 rxe devices, both kernels) and the Go benchmarks; rewrites the tables
# of BENCHMARKS.md. BENCHFLAGS: e.g. -kernels 6.12 -reps 10.
bench: build
	$(GO) run ./bench -update BENCHMARKS.md $(BENCHFLAGS)

# What CI runs: unit tests, the bounded fuzz run, then the end-to-end tests.
check: test fuzz e2e

# Regenerate man/ from the command tree (TestManPages fails when it is stale).
man:
	CGO_ENABLED=0 $(GO) test ./cmd/grdma -run '^TestManPages$$' -count=1 -update

# Install the binaries, the man pages and the bash, zsh and fish completions
# under $(DESTDIR)$(PREFIX).
install: $(BIN) $(BINPROM)
	install -d '$(DESTDIR)$(BINDIR)' '$(DESTDIR)$(MANDIR)/man8' \
		'$(DESTDIR)$(BASHCOMPDIR)' '$(DESTDIR)$(ZSHCOMPDIR)' '$(DESTDIR)$(FISHCOMPDIR)'
	install -m 0755 $(BIN) '$(DESTDIR)$(BINDIR)/grdma'
	install -m 0755 $(BINPROM) '$(DESTDIR)$(BINDIR)/grdma-prometheus'
	install -m 0644 man/*.8 '$(DESTDIR)$(MANDIR)/man8/'
	$(BIN) completion bash > '$(DESTDIR)$(BASHCOMPDIR)/grdma'
	$(BIN) completion zsh > '$(DESTDIR)$(ZSHCOMPDIR)/_grdma'
	$(BIN) completion fish > '$(DESTDIR)$(FISHCOMPDIR)/grdma.fish'

uninstall:
	rm -f '$(DESTDIR)$(BINDIR)/grdma' '$(DESTDIR)$(BINDIR)/grdma-prometheus' '$(DESTDIR)$(BASHCOMPDIR)/grdma' \
		'$(DESTDIR)$(ZSHCOMPDIR)/_grdma' '$(DESTDIR)$(FISHCOMPDIR)/grdma.fish'
	cd man && for page in *.8; do rm -f '$(DESTDIR)$(MANDIR)/man8/'"$$page"; done

clean:
	rm -rf bin
