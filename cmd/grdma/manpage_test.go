//go:build !grdma_noprometheus

package main

import (
	"bytes"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/internal/manpage"
)

// manDir holds the committed pages.
var manDir = filepath.Join("..", "..", "man")

// TestManPages fails when man/ is not what the command tree generates
// (the generation date aside): after changing a command, run make man
// (go test ./cmd/grdma -run '^TestManPages$' -update), which rewrites the
// pages that changed, dated today, and removes pages of gone commands.
func TestManPages(t *testing.T) {
	root := newApp(nil, nil, nil).newRoot()
	pages := manPages(root, time.Now().Format("2006-01-02"))
	stale, err := manSupplement.Sync(manDir, pages, *update)
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) > 0 && !*update {
		t.Errorf("man pages are stale, run make man: %s", strings.Join(stale, ", "))
	}
}

// TestManPageContent checks what a reader relies on in every page.
func TestManPageContent(t *testing.T) {
	root := newApp(nil, nil, nil).newRoot()
	pages := manPages(root, "2025-01-01")
	for _, want := range []string{"grdma.8", "grdma-link.8", "grdma-dev.8", "grdma-sys.8", "grdma-stat.8", "grdma-port.8", "grdma-gid.8", "grdma-monitor.8", "grdma-completion.8"} {
		if pages[want] == nil {
			t.Errorf("no page %s", want)
		}
	}
	for name, b := range pages {
		page := string(b)
		for _, section := range []string{".SH NAME\n", ".SH SYNOPSIS\n", ".SH DESCRIPTION\n", ".SH EXIT STATUS\n.TP\n.B 0\n", ".B 1\n", ".B 2\n", ".SH SEE ALSO\n", `\fBrdma\fR(8)`} {
			if !strings.Contains(page, section) {
				t.Errorf("%s lacks %q", name, section)
			}
		}
		if name != "grdma.8" && !strings.Contains(page, ".SH EXAMPLES\n") {
			t.Errorf("%s has no examples", name)
		}
		for i, line := range strings.Split(page, "\n") {
			// A text line must not start with a control character by
			// accident, nor hold an unescaped backslash sequence we did not mean.
			if strings.HasPrefix(line, "'") {
				t.Errorf("%s:%d starts with a quote: %q", name, i+1, line)
			}
			if strings.HasPrefix(line, ".") && !regexp.MustCompile(`^\.(\\"|TH|SH|SY|YS|TP|PP|RS|RE|nf|fi|nh|ad|B|I)( |$)`).MatchString(line) {
				t.Errorf("%s:%d: unexpected request %q", name, i+1, line)
			}
		}
	}
	link := string(pages["grdma-link.8"])
	for _, want := range []string{
		"grdma\\-link \\- Show RDMA links",
		`\fBlink\fR \fBadd\fR \fINAME\fR \fBtype\fR \fITYPE\fR \fBnetdev\fR \fINETDEV\fR`, // one synopsis line per verb
		`\fBgrdma link add rxe0 type rxe netdev eth0\fR` + "\nCreate the Soft\\-RoCE device rxe0",
		`\fBrdma\-link\fR(8)`,
	} {
		if !strings.Contains(link, want) {
			t.Errorf("grdma-link.8 lacks %q", want)
		}
	}
}

// TestManPagesDates: regeneration keeps the committed dates of unchanged
// pages, so make man does not touch them.
func TestManPagesDates(t *testing.T) {
	root := newApp(nil, nil, nil).newRoot()
	a := manPages(root, "2025-01-01")
	b := manPages(root, "2030-12-31")
	for name := range a {
		if manpage.Date(a[name]) != "2025-01-01" || !bytes.Equal(manpage.Undated(a[name]), manpage.Undated(b[name])) {
			t.Errorf("%s: date not isolated in .TH", name)
		}
	}
}
