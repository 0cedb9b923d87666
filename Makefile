# grdma — build, test and end-to-end targets.
GO       ?= go
PREFIX   ?= /usr/local
DESTDIR  ?=
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT   ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
BIN      := bin/grdma

.PHONY: all build test e2e check clean

all: build

# One static executable: no cgo, no libibverbs, no libmnl.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/grdma

# Unit tests: fakes only, no RDMA kernel needed.
test:
	$(GO) vet ./...
	CGO_ENABLED=0 $(GO) test ./...

# End-to-end tests in QEMU guests booting Debian's 6.1 and 6.12 kernels.
e2e: build
	$(GO) test -tags e2e -count=1 -timeout 30m -v ./e2e/

# What CI runs: unit tests, then the end-to-end tests.
check: test e2e

clean:
	rm -rf bin
