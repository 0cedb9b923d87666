package cmdline

import (
	"errors"
	"fmt"
)

// UsageError is a command line that cannot run as written: a caller shows
// Msg (and, when Help is set, the help to look at) and exits 2.
type UsageError struct {
	Msg  string
	Help string // the help to point at, e.g. "grdma link help"; may be empty
}

func (e *UsageError) Error() string { return e.Msg }

// Usagef returns a *UsageError pointing at help.
func Usagef(help, format string, args ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, args...), Help: help}
}

// WithHelp sets the help of a *UsageError in err that names none (a
// library parser does not know the command it serves) and returns err.
func WithHelp(err error, help string) error {
	if ue := (*UsageError)(nil); errors.As(err, &ue) && ue.Help == "" {
		ue.Help = help
	}
	return err
}
