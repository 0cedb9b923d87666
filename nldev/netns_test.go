package nldev_test

import (
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/grdma/grdma/nldev"
)

func TestOpenNetNS(t *testing.T) {
	// By PID and by path: this process's own namespace.
	for _, ns := range []string{strconv.Itoa(os.Getpid()), "/proc/self/ns/net"} {
		f, err := nldev.OpenNetNS(ns)
		if err != nil {
			t.Errorf("OpenNetNS(%q): %v", ns, err)
			continue
		}
		f.Close()
	}
	for ns, want := range map[string]string{
		"grdma-no-such-ns": "network namespace grdma-no-such-ns not found (/run/netns/grdma-no-such-ns: no such file or directory)",
		"999999999":        "network namespace 999999999 not found (/proc/999999999/ns/net: no such file or directory)",
		"/nonexistent/ns":  "network namespace /nonexistent/ns not found (/nonexistent/ns: no such file or directory)",
	} {
		_, err := nldev.OpenNetNS(ns)
		if err == nil || err.Error() != want || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("OpenNetNS(%q) = %v, want %q (fs.ErrNotExist)", ns, err, want)
		}
	}
	if _, err := nldev.OpenNetNS(""); err == nil || !strings.Contains(err.Error(), "no network namespace named") {
		t.Errorf("OpenNetNS(\"\") = %v", err)
	}
}
