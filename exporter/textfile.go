package exporter

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/grdma/grdma/node"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// WriteTextfile writes what g gathers to path for node_exporter's textfile
// collector with client_golang's textfile writer (prometheus.WriteToTextfile,
// which writes a temporary file and renames it), so that the collector
// never reads half a file. That writer makes every file 0644 and its
// caller's and does not sync; a textfile directory is often shared, so
// WriteTextfile has it write a temporary file beside path, then gives that
// the mode and owner of the file it replaces (0644 and the caller for a
// new one; an owner only root may set is kept when running as root),
// syncs it, renames it over path and syncs the directory so that the
// rename survives a crash. On failure path is unchanged and nothing is
// left beside it.
func WriteTextfile(path string, g prometheus.Gatherer) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	// Reserve a name beside path; WriteToTextfile replaces it by rename.
	// Neither name ends in .prom, so the textfile collector skips both.
	f, err := os.CreateTemp(dir, "."+base+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	f.Close()
	err = prometheus.WriteToTextfile(tmp, g)
	if err == nil {
		err = settle(tmp, path)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

// settle gives the file at tmp the mode and owner of the file at path and
// syncs it.
func settle(tmp, path string) error {
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	mode := fs.FileMode(0o644)
	old, err := os.Stat(path)
	switch {
	case err == nil:
		mode = old.Mode().Perm()
		if st, ok := old.Sys().(*syscall.Stat_t); ok {
			if err := f.Chown(int(st.Uid), int(st.Gid)); err != nil && !errors.Is(err, fs.ErrPermission) {
				return err
			}
		}
	case !errors.Is(err, fs.ErrNotExist):
		return err
	}
	if err := f.Chmod(mode); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// WriteTextfile writes one collection of c to path (see the function
// WriteTextfile). When not even the devices could be listed, nothing is
// written and that is the error; when parts of devices or ports could not
// be read, the file is written without them (and with
// grdma_export_read_error for each) and the error is a *PartialError.
func (c *Collector) WriteTextfile(path string) error {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return err
	}
	var partial []node.ReadError
	g := prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := reg.Gather()
		if err != nil {
			return nil, err
		}
		partial = c.Errors()
		for _, e := range partial {
			if e.What == "devices" {
				return nil, e.Err
			}
		}
		return mfs, nil
	})
	if err := WriteTextfile(path, g); err != nil {
		return err
	}
	if len(partial) > 0 {
		return &PartialError{Path: path, Errors: partial}
	}
	return nil
}

// PartialError is a textfile written without what could not be read.
type PartialError struct {
	Path   string
	Errors []node.ReadError
}

func (e *PartialError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i := range e.Errors {
		msgs[i] = e.Errors[i].Error()
	}
	return fmt.Sprintf("wrote %s without what could not be read (grdma_export_read_error):\n%s", e.Path, strings.Join(msgs, "\n"))
}

// Unwrap returns the read errors.
func (e *PartialError) Unwrap() []error {
	errs := make([]error, len(e.Errors))
	for i := range e.Errors {
		errs[i] = &e.Errors[i]
	}
	return errs
}

// ReadTextfile parses a file in the text exposition format, as
// node_exporter's textfile collector does, into metric families by name:
// a check that a written file is what Prometheus will read.
func ReadTextfile(path string) (map[string]*dto.MetricFamily, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fams, nil
}
