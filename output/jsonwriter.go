package output

import (
	"bufio"
	"fmt"
	"strconv"
)

// jsonWriter reproduces iproute2's lib/json_writer.c byte for byte, pretty
// mode included, so that grdma -j output can replace rdma -j output in
// scripts that compare or split it textually.
type jsonWriter struct {
	w      *bufio.Writer
	depth  int
	pretty bool
	sep    byte // 0 or ','
}

func (j *jsonWriter) indent() {
	for range j.depth {
		j.w.WriteString("    ")
	}
}

// eol ends the current line and indents, in pretty mode only.
func (j *jsonWriter) eol() {
	if !j.pretty {
		return
	}
	j.w.WriteByte('\n')
	j.indent()
}

// eor writes the separator owed by the previous element.
func (j *jsonWriter) eor() {
	if j.sep != 0 {
		j.w.WriteByte(j.sep)
	}
	j.sep = ','
}

func (j *jsonWriter) begin(c byte) {
	j.eor()
	j.w.WriteByte(c)
	j.depth++
	j.sep = 0
}

func (j *jsonWriter) end(c byte) {
	j.depth--
	if j.sep != 0 {
		j.eol()
	}
	j.w.WriteByte(c)
	j.sep = ','
}

func (j *jsonWriter) name(name string) {
	j.eor()
	j.eol()
	j.sep = 0
	j.puts(name)
	j.w.WriteByte(':')
	if j.pretty {
		j.w.WriteByte(' ')
	}
}

func (j *jsonWriter) startObject() { j.begin('{') }
func (j *jsonWriter) endObject()   { j.end('}') }

func (j *jsonWriter) startArray() {
	j.begin('[')
	if j.pretty {
		j.w.WriteByte(' ')
	}
}

func (j *jsonWriter) endArray() {
	if j.pretty && j.sep != 0 {
		j.w.WriteByte(' ')
	}
	j.sep = 0
	j.end(']')
}

func (j *jsonWriter) str(s string) {
	j.eor()
	j.puts(s)
}

func (j *jsonWriter) uint(v uint64) {
	j.eor()
	j.w.WriteString(strconv.FormatUint(v, 10))
}

func (j *jsonWriter) int(v int64) {
	j.eor()
	j.w.WriteString(strconv.FormatInt(v, 10))
}

// raw writes an already formatted JSON number.
func (j *jsonWriter) raw(v string) {
	j.eor()
	j.w.WriteString(v)
}

func (j *jsonWriter) bool(v bool) {
	j.eor()
	j.w.WriteString(strconv.FormatBool(v))
}

// puts writes a JSON string with the escapes json_writer uses (RFC 8259).
func (j *jsonWriter) puts(s string) {
	j.w.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\t':
			j.w.WriteString(`\t`)
		case '\n':
			j.w.WriteString(`\n`)
		case '\r':
			j.w.WriteString(`\r`)
		case '\f':
			j.w.WriteString(`\f`)
		case '\b':
			j.w.WriteString(`\b`)
		case '\\':
			j.w.WriteString(`\\`)
		case '"':
			j.w.WriteString(`\"`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(j.w, `\u%04x`, c)
			} else {
				j.w.WriteByte(c)
			}
		}
	}
	j.w.WriteByte('"')
}
