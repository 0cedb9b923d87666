package nldev

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const uapiHeader = "/usr/include/rdma/rdma_netlink.h"

// parseEnum returns the enumerators of a C enum with their values,
// following implicit increments and aliases of earlier enumerators.
func parseEnum(t *testing.T, src, name string) map[string]int {
	t.Helper()
	start := strings.Index(src, "enum "+name+" {")
	if start < 0 {
		t.Fatalf("enum %s not found in %s", name, uapiHeader)
	}
	body := src[start+len("enum "+name+" {"):]
	body = body[:strings.Index(body, "};")]
	body = regexp.MustCompile(`(?s)/\*.*?\*/`).ReplaceAllString(body, "")
	body = regexp.MustCompile(`//[^\n]*`).ReplaceAllString(body, "")
	vals := map[string]int{}
	next := 0
	for _, item := range strings.Split(body, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		id, expr, hasValue := strings.Cut(item, "=")
		id, expr = strings.TrimSpace(id), strings.TrimSpace(expr)
		if hasValue {
			if v, err := strconv.Atoi(expr); err == nil {
				next = v
			} else if v, ok := vals[expr]; ok {
				next = v
			} else {
				t.Fatalf("cannot evaluate %s = %s", id, expr)
			}
		}
		vals[id] = next
		next++
	}
	return vals
}

// TestConstantsMatchHeader checks every command and attribute the installed
// UAPI header defines against ours. Older headers define fewer; none may
// disagree.
func TestConstantsMatchHeader(t *testing.T) {
	b, err := os.ReadFile(uapiHeader)
	if err != nil {
		noHeader(t, err)
	}
	src := string(b)

	cmds := parseEnum(t, src, "rdma_nldev_command")
	checked := 0
	for id, v := range cmds {
		short, ok := strings.CutPrefix(id, "RDMA_NLDEV_CMD_")
		if !ok || short == "UNSPEC" || short == "NUM_OPS" {
			continue
		}
		if got := Command(v).String(); got != short {
			t.Errorf("%s = %d in the header; our Command(%d) is %s", id, v, v, got)
		}
		checked++
	}
	if n := cmds["RDMA_NLDEV_NUM_OPS"]; n > numCommands {
		t.Errorf("header has %d commands, we know %d", n, numCommands)
	}

	attrs := parseEnum(t, src, "rdma_nldev_attr")
	for id, v := range attrs {
		if id == "RDMA_NLDEV_ATTR_MAX" || id == "RDMA_NLDEV_ATTR_UNSPEC" || id == "RDMA_NLDEV_ATTR_PAD" {
			continue
		}
		short := strings.TrimPrefix(strings.TrimPrefix(id, "RDMA_NLDEV_ATTR_"), "RDMA_NLDEV_")
		if got := Attr(v).String(); got != short {
			t.Errorf("%s = %d in the header; our Attr(%d) is %s", id, v, v, got)
		}
		checked++
	}
	if n := attrs["RDMA_NLDEV_ATTR_MAX"]; n > numAttrs {
		t.Errorf("header has RDMA_NLDEV_ATTR_MAX %d, we know %d", n, numAttrs)
	}
	if checked < 100 {
		t.Fatalf("only %d enumerators checked; the header parse went wrong", checked)
	}
	t.Logf("checked %d commands and attributes against %s", checked, uapiHeader)
}

func TestMessageType(t *testing.T) {
	// RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, RDMA_NLDEV_CMD_GET) = 5<<10 | 1
	if got := MessageType(CmdGet); got != 0x1401 {
		t.Fatalf("MessageType(GET) = %#x, want 0x1401", got)
	}
	if got := MessageType(CmdNewLink); got != 5123 {
		t.Fatalf("MessageType(NEWLINK) = %d, want 5123", got)
	}
}

// noHeader skips a test that needs a kernel UAPI header the machine lacks
// (make test installs nothing), or fails it where CI requires the headers
// (GRDMA_UAPI_HEADERS=required, set by .ci/run after installing them).
func noHeader(t *testing.T, err error) {
	t.Helper()
	if errors.Is(err, fs.ErrNotExist) && os.Getenv("GRDMA_UAPI_HEADERS") != "required" {
		t.Skipf("nldev: kernel UAPI header missing (%v): the ABI constants are not checked; install linux-libc-dev to check them", err)
	}
	t.Fatalf("nldev: no kernel UAPI header to check against: %v (install linux-libc-dev)", err)
}
