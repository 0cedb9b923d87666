package manpage_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/grdma/grdma/internal/manpage"
	"github.com/spf13/cobra"
)

func tree() *cobra.Command {
	root := &cobra.Command{Use: "tool", Long: "Tool manages things.\n\nExit status: 0 success, 1 failure, 2 usage."}
	root.PersistentFlags().BoolP("json", "j", false, "print JSON")
	obj := &cobra.Command{
		Use:     "link [show [DEV]] | add NAME type TYPE",
		Short:   "Show links",
		Long:    "Shows links.\n\n  a table line\n\nExit status: 0 the link exists, 1 failure, 2 usage.",
		Example: "  tool link\n  tool link add x type y  # add a link",
		Run:     func(*cobra.Command, []string) {},
	}
	obj.Flags().String("netdev", "", "the `NETDEV` to use")
	root.AddCommand(obj)
	return root
}

var supplement = manpage.Supplement{
	Program: "tool", Section: "8", Manual: "System Administration", Generator: "a test", RootShort: "manage things",
	RootSynopsis:      []string{`\fIOBJECT\fR`},
	GlobalOptionsNote: "Anywhere.\n",
	ExitStatus:        map[int]string{0: "Success.", 1: "Failure.", 2: "Usage."},
	ExitNotes:         map[string]map[int]string{"link": {1: "Also when the link is gone."}},
	Examples:          map[string]string{"tool link": "List the links."},
	SeeAlso:           map[string][]string{"link": {"ip-link(8)"}},
	SeeAlsoEvery:      []string{"rdma(8)"},
	Verbs:             func(string) []string { return []string{"show", "add"} },
}

func TestPage(t *testing.T) {
	pages := supplement.Pages(tree(), "2026-01-02")
	if len(pages) != 2 || pages["tool.8"] == nil {
		t.Fatalf("pages %v, want tool.8 and tool-link.8", slices.Sorted(func(yield func(string) bool) {
			for k := range pages {
				yield(k)
			}
		}))
	}
	link := string(pages["tool-link.8"])
	for _, want := range []string{
		".TH TOOL\\-LINK 8 2026-01-02 tool \"System Administration\"\n",
		"tool\\-link \\- Show links\n",
		".SY tool\n[\\fIOPTIONS\\fR] \\fBlink\\fR [\\fBshow\\fR\\~[\\fIDEV\\fR]]\n.YS\n",
		".SY tool\n[\\fIOPTIONS\\fR] \\fBlink\\fR \\fBadd\\fR \\fINAME\\fR \\fBtype\\fR \\fITYPE\\fR\n.YS\n",
		".RS 4\n.nf\na table line\n.fi\n.RE\n",
		".SH OPTIONS\n.TP\n\\fB\\-\\-netdev\\fR \\fINETDEV\\fR\nThe NETDEV to use.\n",
		".SH GLOBAL OPTIONS\nAnywhere.\n.TP\n\\fB\\-j\\fR, \\fB\\-\\-json\\fR\nPrint JSON.\n",
		".B 0\nThe link exists.\n",
		".B 1\nFailure. Also when the link is gone.\n",
		"\\fBtool link\\fR\nList the links.\n",
		"\\fBtool link add x type y\\fR\nAdd a link.\n",
		".SH SEE ALSO\n\\fBtool\\fR(8),\n\\fBip\\-link\\fR(8),\n\\fBrdma\\fR(8)\n",
	} {
		if !strings.Contains(link, want) {
			t.Errorf("tool-link.8 lacks %q:\n%s", want, link)
		}
	}
	if manpage.Date(pages["tool.8"]) != "2026-01-02" {
		t.Errorf("date %q", manpage.Date(pages["tool.8"]))
	}
}

func TestSync(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool-gone.8"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	pages := supplement.Pages(tree(), "2026-01-02")
	stale, err := supplement.Sync(dir, pages, false)
	if err != nil || !slices.Equal(stale, []string{"tool-gone.8 (no such command)", "tool-link.8", "tool.8"}) {
		t.Fatalf("Sync(check) = %q, %v", stale, err)
	}
	if _, err := supplement.Sync(dir, pages, true); err != nil {
		t.Fatal(err)
	}
	// A later date alone is not a change: the committed pages keep theirs.
	stale, err = supplement.Sync(dir, supplement.Pages(tree(), "2027-05-06"), false)
	if err != nil || len(stale) != 0 {
		t.Fatalf("after write, Sync = %q, %v", stale, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tool-gone.8")); !os.IsNotExist(err) {
		t.Errorf("the page of a gone command was kept: %v", err)
	}
}

// A program's man pages from its cobra tree.
func ExampleSupplement_Pages() {
	root := &cobra.Command{Use: "tool", Long: "Tool manages things."}
	root.AddCommand(&cobra.Command{Use: "link [show]", Short: "Show links", Example: "  tool link", Run: func(*cobra.Command, []string) {}})
	s := manpage.Supplement{Program: "tool", Section: "8", Manual: "System Administration",
		ExitStatus: map[int]string{0: "Success."}}
	pages := s.Pages(root, "2026-01-02")
	fmt.Println(len(pages), strings.SplitN(string(pages["tool-link.8"]), "\n", 3)[1])
	// Output: 2 .TH TOOL\-LINK 8 2026-01-02 tool "System Administration"
}
