// Package output renders command results the way iproute2 prints them:
// text with "key value " fields, or JSON through a writer that reproduces
// iproute2's json_writer byte for byte. A Printer mirrors lib/json_print.c
// (print_string, print_uint, print_on_off, open_json_object, ...) so a
// renderer written against it prints what rdma prints, in both modes.
package output

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Mode chooses which output a field goes to (iproute2's PRINT_ANY,
// PRINT_JSON and PRINT_FP).
type Mode uint8

// Output modes.
const (
	Any Mode = iota
	JSONOnly
	TextOnly
)

// Options selects the output format.
type Options struct {
	JSON    bool // -j
	Pretty  bool // -p: indented JSON
	Oneline bool // -o: continuation lines joined with a backslash
}

// Printer writes one command's output. Call Flush when done.
type Printer struct {
	w  *bufio.Writer
	j  *jsonWriter // nil when printing text
	o  Options
	sl string
}

// New returns a Printer writing to w.
func New(w io.Writer, o Options) *Printer {
	p := &Printer{w: bufio.NewWriter(w), o: o, sl: "\n"}
	if o.Oneline {
		p.sl = `\`
	}
	return p
}

// JSON reports whether the printer emits JSON.
func (p *Printer) JSON() bool { return p.o.JSON }

// SL is the line continuation (iproute2's _SL_): a newline, or a
// backslash with -o.
func (p *Printer) SL() string { return p.sl }

func (p *Printer) toJSON(m Mode) bool { return p.j != nil && m != TextOnly }
func (p *Printer) toText(m Mode) bool { return p.j == nil && m != JSONOnly }

// StartList opens the top-level JSON array (iproute2's new_json_obj).
func (p *Printer) StartList() { p.start(true) }

// EndList closes it and ends the line (delete_json_obj).
func (p *Printer) EndList() { p.end(true) }

// StartPlain starts JSON output whose top level is a single object.
func (p *Printer) StartPlain() { p.start(false) }

// EndPlain ends output begun with StartPlain.
func (p *Printer) EndPlain() { p.end(false) }

func (p *Printer) start(array bool) {
	if !p.o.JSON {
		return
	}
	p.j = &jsonWriter{w: p.w, pretty: p.o.Pretty}
	if array {
		p.j.startArray()
	}
}

func (p *Printer) end(array bool) {
	if p.j == nil {
		return
	}
	if array {
		p.j.endArray()
	}
	p.w.WriteByte('\n')
	p.j = nil
}

// OpenObject starts a JSON object, named key unless key is empty.
func (p *Printer) OpenObject(key string) {
	if p.j == nil {
		return
	}
	if key != "" {
		p.j.name(key)
	}
	p.j.startObject()
}

// CloseObject ends the current JSON object.
func (p *Printer) CloseObject() {
	if p.j != nil {
		p.j.endObject()
	}
}

// OpenArray starts a JSON array named key, or writes text in text mode.
func (p *Printer) OpenArray(m Mode, key, text string) {
	switch {
	case p.toJSON(m):
		if key != "" {
			p.j.name(key)
		}
		p.j.startArray()
	case p.toText(m):
		p.w.WriteString(text)
	}
}

// CloseArray ends a JSON array, or writes text in text mode.
func (p *Printer) CloseArray(m Mode, text string) {
	switch {
	case p.toJSON(m):
		p.j.endArray()
	case p.toText(m):
		p.w.WriteString(text)
	}
}

// String prints a string field: JSON "key":"value", text format with %s
// and the value passed through Escape (it may come from another user, as
// /proc/PID/comm does).
// An empty key inside a JSON array prints a bare element.
func (p *Printer) String(m Mode, key, format, value string) {
	switch {
	case p.toJSON(m):
		if key != "" {
			p.j.name(key)
		}
		p.j.str(value)
	case p.toText(m):
		p.text(format, Escape(value))
	}
}

// Untrusted prints a string field that came from outside this host (a
// peer's interface name, driver, failure message): like String, but
// passed through Escape in JSON too. JSON escapes C0 controls but carries
// DEL, C1 controls (U+009B is a CSI) and bidi overrides as they are, and
// invalid UTF-8 makes it unreadable; `jq -r` would print them raw. Both
// modes carry the same escaped text.
func (p *Printer) Untrusted(m Mode, key, format, value string) {
	p.String(m, key, format, Escape(value))
}

// Escape makes a string safe to print on a terminal: each byte of what is
// not printable (C0 controls such as ESC, CR and newline, DEL, C1
// controls such as U+009B, invalid UTF-8, Unicode format and separator
// characters such as bidi overrides) becomes \xNN. Printable text, UTF-8
// included, is unchanged, so ordinary names print as iproute2 rdma prints
// them (rdma prints every byte raw). Its result is printable, so
// Escape(Escape(s)) == Escape(s): a value escaped where it was received
// may be escaped again where it is printed. It is the one escape for
// untrusted text: /proc names, and whatever a peer sends.
func Escape(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || !unicode.IsPrint(r) {
			for _, c := range []byte(s[i : i+size]) {
				fmt.Fprintf(&b, "\\x%02x", c)
			}
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// Uint prints an unsigned number field.
func (p *Printer) Uint(m Mode, key, format string, v uint64) {
	switch {
	case p.toJSON(m):
		if key != "" {
			p.j.name(key)
		}
		p.j.uint(v)
	case p.toText(m):
		p.text(format, strconv.FormatUint(v, 10))
	}
}

// Int prints a signed number field.
func (p *Printer) Int(m Mode, key, format string, v int64) {
	switch {
	case p.toJSON(m):
		if key != "" {
			p.j.name(key)
		}
		p.j.int(v)
	case p.toText(m):
		p.text(format, strconv.FormatInt(v, 10))
	}
}

// Float prints a number with a fraction: JSON in the shortest exact form,
// text with the given decimals.
func (p *Printer) Float(m Mode, key, format string, v float64, decimals int) {
	switch {
	case p.toJSON(m):
		if key != "" {
			p.j.name(key)
		}
		p.j.raw(strconv.FormatFloat(v, 'f', -1, 64))
	case p.toText(m):
		p.text(format, strconv.FormatFloat(v, 'f', decimals, 64))
	}
}

// Null prints JSON null for key (a value that does not exist, such as a
// software device's parent), or format alone in text mode.
func (p *Printer) Null(m Mode, key, format string) {
	switch {
	case p.toJSON(m):
		if key != "" {
			p.j.name(key)
		}
		p.j.raw("null")
	case p.toText(m):
		p.w.WriteString(format)
	}
}

// OnOff prints a boolean: JSON true/false, text "on"/"off".
func (p *Printer) OnOff(m Mode, key, format string, on bool) {
	switch {
	case p.toJSON(m):
		if key != "" {
			p.j.name(key)
		}
		p.j.bool(on)
	case p.toText(m):
		if on {
			p.text(format, "on")
		} else {
			p.text(format, "off")
		}
	}
}

// Text writes literal text in text mode only.
func (p *Printer) Text(s string) {
	if p.j == nil {
		p.w.WriteString(s)
	}
}

// text formats one value; formats use %s for the value, whatever its type.
func (p *Printer) text(format, value string) {
	if format == "" {
		return
	}
	fmt.Fprintf(p.w, format, value)
}

// Newline ends a record. Like rdma's newline() it writes "\n" in JSON mode
// too, so rdma -j output has one record per line and grdma's matches it.
func (p *Printer) Newline() { p.w.WriteByte('\n') }

// NL writes a line continuation in text mode only (iproute2's print_nl).
func (p *Printer) NL() {
	if p.j == nil {
		p.w.WriteString(p.sl)
	}
}

// Flush writes buffered output.
func (p *Printer) Flush() error { return p.w.Flush() }
