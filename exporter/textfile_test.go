package exporter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestMain(m *testing.M) {
	// The symlink swap test runs this binary again as nobody, to attack.
	if dir, target := os.Getenv("GRDMA_TEST_ATTACK_DIR"), os.Getenv("GRDMA_TEST_ATTACK_TARGET"); dir != "" {
		attackTextfileDir(dir, target)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestWriteTextfileOwnerAndMode: a new file is 0644 and the caller's; the
// file replaced gives its mode and owner when root or the caller owns it,
// never when another account does (which would hand it root's later
// writes), and a symlink at the path is replaced, its target untouched.
func TestWriteTextfileOwnerAndMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rdma.prom")
	if err := WriteTextfile(path, gaugeGatherer(1)); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, uint32(os.Geteuid()), 0o644, "test_value 1")
	os.Chmod(path, 0o640)
	root := os.Geteuid() == 0
	if root {
		os.Chown(path, 0, 65534)
	}
	if err := WriteTextfile(path, gaugeGatherer(2)); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, uint32(os.Geteuid()), 0o640, "test_value 2")
	if st := stat(t, path); root && st.Gid != 65534 {
		t.Errorf("group %d after replacing a root:65534 file", st.Gid)
	}

	target := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(target, []byte("secret\n"), 0o600)
	before := stat(t, target)
	os.Remove(path)
	os.Symlink(target, path)
	if err := WriteTextfile(path, gaugeGatherer(3)); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, uint32(os.Geteuid()), 0o644, "test_value 3")
	if after := stat(t, target); after != before {
		t.Errorf("the symlink's target changed: %+v, was %+v", after, before)
	}

	if !root {
		t.Skip("not root: a file of another account cannot be made")
	}
	os.Remove(path)
	os.WriteFile(path, nil, 0o666)
	os.Chown(path, 65534, 65534)
	if err := WriteTextfile(path, gaugeGatherer(4)); err != nil {
		t.Fatal(err)
	}
	checkFile(t, path, 0, 0o644, "test_value 4")
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("leftovers: %v", entries)
	}
}

func stat(t *testing.T, path string) unix.Stat_t {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func checkFile(t *testing.T, path string, uid, mode uint32, content string) {
	t.Helper()
	st := stat(t, path)
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Mode&0o7777 != mode || st.Uid != uid {
		t.Errorf("%s: mode %o owner %d, want a regular file %04o owned by %d", path, st.Mode, st.Uid, mode, uid)
	}
	if b, _ := os.ReadFile(path); !strings.Contains(string(b), "\n"+content+"\n") {
		t.Errorf("%s: content %q, want %q", path, b, content)
	}
}

// TestWriteTextfileUnsafeDir: a directory group or others may write
// without the sticky bit is refused, naming the mode and the fix, and
// nothing is written; with the sticky bit, or writable by its owner only,
// it is used.
func TestWriteTextfileUnsafeDir(t *testing.T) {
	for mode, want := range map[os.FileMode]string{
		0o777: "writable by group and others (mode 0777)", 0o775: "writable by its group (mode 0775)", 0o757: "writable by others (mode 0757)",
		os.ModeSticky | 0o777: "", os.ModeSticky | 0o770: "", 0o755: "", 0o700: "",
	} {
		dir := filepath.Join(t.TempDir(), "textfile")
		os.Mkdir(dir, 0o700)
		os.Chmod(dir, mode)
		path := filepath.Join(dir, "rdma.prom")
		err := WriteTextfile(path, gaugeGatherer(1))
		cerr := CheckTextfileDir(path)
		var ue *UnsafeDirError
		switch {
		case want == "" && (err != nil || cerr != nil):
			t.Errorf("%04o: %v, %v", mode, err, cerr)
		case want != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chmod go-w "+dir) || !strings.Contains(err.Error(), "chmod +t "+dir)):
			t.Errorf("%04o: %v, want an UnsafeDirError saying %q and how to fix it", mode, err, want)
		case want != "" && (cerr == nil || cerr.Error() != err.Error()):
			t.Errorf("%04o: CheckTextfileDir %v, WriteTextfile %v", mode, cerr, err)
		case want != "":
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("%04o: refused, but wrote %v", mode, entries)
			}
		}
	}
}

// TestWriteTextfileSymlinkSwap plays the account that owns the textfile
// directory (node_exporter's): a child running as nobody keeps its own
// 0666 file at the path and swaps every other name in the directory for a
// symlink to a root-only file outside it, while root writes the textfile
// again and again. Written by name, as before, the root-only file became
// nobody's and 0666 within a few writes; through one descriptor nothing
// outside the directory changes, not even its ctime.
func TestWriteTextfileSymlinkSwap(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: the attack needs a child running as another account (nobody) in a directory it owns")
	}
	base, err := os.MkdirTemp("", "grdma-textfile-swap-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	dir, outside := filepath.Join(base, "textfile"), filepath.Join(base, "outside")
	os.Mkdir(dir, 0o755)
	os.Chown(dir, 65534, 65534)
	os.Mkdir(outside, 0o755)
	target := filepath.Join(outside, "secret")
	os.WriteFile(target, []byte("root only\n"), 0o600)
	before := stat(t, target)

	// The test binary, where nobody can run it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(outside, "attacker")
	if err := copyFile(self, exe); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "GRDMA_TEST_ATTACK_DIR="+dir, "GRDMA_TEST_ATTACK_TARGET="+target)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, _ := cmd.StdinPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close() // the child stops at EOF
		if err := cmd.Wait(); err != nil {
			t.Errorf("attacker: %v\n%s", err, stderr.String())
		}
	}()
	// Wait until the child has made its file at the path.
	path := filepath.Join(dir, "rdma.prom")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if st, err := os.Lstat(path); err == nil && st.Sys().(*syscall.Stat_t).Uid == 65534 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the attacker made no file at %s\n%s", path, stderr.String())
		}
	}
	failed := 0
	const writes = 200
	for i := range writes {
		if err := WriteTextfile(path, gaugeGatherer(float64(i))); err != nil {
			failed++
		}
		if st := stat(t, target); st != before {
			t.Fatalf("write %d: the file outside the directory changed: mode %o owner %d:%d ctime %v, was mode %o owner %d:%d ctime %v",
				i+1, st.Mode, st.Uid, st.Gid, time.Unix(st.Ctim.Unix()), before.Mode, before.Uid, before.Gid, time.Unix(before.Ctim.Unix()))
		}
	}
	if b, _ := os.ReadFile(target); string(b) != "root only\n" {
		t.Errorf("content of the file outside: %q", b)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 2 {
		t.Errorf("the directory outside holds %v", entries)
	}
	t.Logf("%d writes under attack, %d refused (the path was another account's file or symlink afterwards)", writes, failed)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// attackTextfileDir is the child of TestWriteTextfileSymlinkSwap, running
// as nobody until its stdin closes: it keeps its own 0666 file at
// rdma.prom (the old writer copied that owner and mode) and replaces every
// other name in dir with a symlink to target.
func attackTextfileDir(dir, target string) {
	stop := make(chan struct{})
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stop)
	}()
	path := filepath.Join(dir, "rdma.prom")
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil || st.Uid != 65534 {
			mine := filepath.Join(dir, fmt.Sprintf("mine%d", n))
			if err := os.WriteFile(mine, nil, 0o666); err == nil {
				os.Chmod(mine, 0o666)
				os.Rename(mine, path)
			}
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			name := e.Name()
			if name == "rdma.prom" || strings.HasPrefix(name, "mine") || strings.HasPrefix(name, "link") {
				continue
			}
			link := filepath.Join(dir, fmt.Sprintf("link%d", n))
			if os.Symlink(target, link) == nil {
				if os.Rename(link, filepath.Join(dir, name)) != nil {
					os.Remove(link)
				}
			}
		}
	}
}
