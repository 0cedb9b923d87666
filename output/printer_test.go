package output

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// render prints two records the way rdma dev does, in the given mode.
func render(o Options) string {
	var buf bytes.Buffer
	p := New(&buf, o)
	p.StartList()
	for _, name := range []string{"rxe0", "rxe1"} {
		p.OpenObject("")
		p.Uint(Any, "ifindex", "%s: ", 0)
		p.String(Any, "ifname", "%s: ", name)
		p.OnOff(Any, "adaptive-moderation", "adaptive-moderation %s ", true)
		p.Text(p.SL() + "    caps: <")
		p.OpenArray(JSONOnly, "caps", "")
		p.String(Any, "", "%s, ", "A")
		p.String(Any, "", "%s", "B")
		p.CloseArray(Any, ">")
		p.CloseObject()
		p.Newline()
	}
	p.EndList()
	p.Flush()
	return buf.String()
}

// The expected strings follow iproute2's json_writer.c: rdma's newline()
// writes "\n" after each record even in JSON mode, pretty arrays open with
// "[ " and close with " ]".
func TestPrinterMatchesIproute2(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"text", Options{}, "0: rxe0: adaptive-moderation on \n    caps: <A, B>\n" +
			"0: rxe1: adaptive-moderation on \n    caps: <A, B>\n"},
		{"oneline", Options{Oneline: true}, "0: rxe0: adaptive-moderation on \\    caps: <A, B>\n" +
			"0: rxe1: adaptive-moderation on \\    caps: <A, B>\n"},
		{"json", Options{JSON: true},
			`[{"ifindex":0,"ifname":"rxe0","adaptive-moderation":true,"caps":["A","B"]}` + "\n" +
				`,{"ifindex":0,"ifname":"rxe1","adaptive-moderation":true,"caps":["A","B"]}` + "\n]\n"},
		{"pretty", Options{JSON: true, Pretty: true}, "[ {\n" +
			"        \"ifindex\": 0,\n" +
			"        \"ifname\": \"rxe0\",\n" +
			"        \"adaptive-moderation\": true,\n" +
			"        \"caps\": [ \"A\",\"B\" ]\n" +
			"    }\n" +
			",{\n" +
			"        \"ifindex\": 0,\n" +
			"        \"ifname\": \"rxe1\",\n" +
			"        \"adaptive-moderation\": true,\n" +
			"        \"caps\": [ \"A\",\"B\" ]\n" +
			"    }\n" +
			" ]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := render(tt.o); got != tt.want {
				t.Errorf("got\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestJSONStringEscapes(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, Options{JSON: true})
	p.StartPlain()
	p.OpenObject("")
	p.String(Any, "s", "", "a\"b\\c\td\x01\x7f")
	p.CloseObject()
	p.EndPlain()
	p.Flush()
	want := `{"s":"a\"b\\c\td\u0001\u007f"}` + "\n"
	if buf.String() != want {
		t.Fatalf("got %q, want %q", buf.String(), want)
	}
}

func TestEmptyListIsAnEmptyArray(t *testing.T) {
	var buf bytes.Buffer
	p := New(&buf, Options{JSON: true})
	p.StartList()
	p.EndList()
	p.Flush()
	if buf.String() != "[]\n" {
		t.Fatalf("got %q, want %q", buf.String(), "[]\n")
	}
}

// TestEscape: text output escapes what a terminal would act on; ordinary
// names, UTF-8 included, are unchanged.
func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"ibv_rc_pingpong":   "ibv_rc_pingpong",
		"[ib_core]":         "[ib_core]",
		"kworker/0:1 x":     "kworker/0:1 x",
		"café":              "café",
		"\x1b]0;owned\x07":  `\x1b]0;owned\x07`,
		"a\nb\tc\x7f":       `a\x0ab\x09c\x7f`,
		"\xc2\x9b31m":       `\xc2\x9b31m`, // C1 CSI
		"bad\xffutf8":       `bad\xffutf8`,
		"evil\u202etxt.exe": `evil\xe2\x80\xaetxt.exe`, // bidi override
		"":                  "",
	} {
		if got := Escape(in); got != want {
			t.Errorf("Escape(%q) = %q, want %q", in, got, want)
		}
	}
	var b bytes.Buffer
	p := New(&b, Options{})
	p.String(Any, "comm", "comm %s ", "\x1b[2Jx")
	p.Flush()
	if b.String() != `comm \x1b[2Jx ` {
		t.Errorf("text %q", b.String())
	}
	b.Reset()
	p = New(&b, Options{JSON: true})
	p.StartPlain()
	p.OpenObject("")
	p.String(Any, "comm", "comm %s ", "\x1b[2Jx")
	p.CloseObject()
	p.EndPlain()
	p.Flush()
	if !strings.Contains(b.String(), `"comm":"\u001b[2Jx"`) {
		t.Errorf("JSON %q", b.String())
	}
}

// TestUntrusted plays a peer that sends terminal controls: ESC and OSC
// sequences (OSC 52 sets the clipboard, OSC 0 the title), a C1 CSI
// (U+009B, and the bare byte 0x9b), DEL, CR and invalid UTF-8 come out as
// \xNN in text and JSON alike; the JSON is valid and decodes to the text
// printed.
func TestUntrusted(t *testing.T) {
	const evil = "eth0\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;title\x1b\\\r\x1b[2K\xc2\x9b1A\x9b\x7fok\xff"
	const want = `eth0\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;title\x1b\\x0d\x1b[2K\xc2\x9b1A\x9b\x7fok\xff`
	var b bytes.Buffer
	p := New(&b, Options{})
	p.Untrusted(Any, "ifname", "peer %s\n", evil)
	p.Flush()
	if b.String() != "peer "+want+"\n" {
		t.Errorf("text %q, want %q", b.String(), "peer "+want+"\n")
	}
	for _, c := range b.String()[:b.Len()-1] {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == utf8.RuneError {
			t.Errorf("text carries %U", c)
		}
	}
	b.Reset()
	p = New(&b, Options{JSON: true})
	p.StartPlain()
	p.OpenObject("")
	p.Untrusted(Any, "ifname", "", evil)
	p.CloseObject()
	p.EndPlain()
	p.Flush()
	var got struct{ Ifname string }
	if err := json.Unmarshal(b.Bytes(), &got); err != nil || got.Ifname != want {
		t.Errorf("JSON %q: %v, decodes to %q, want %q", b.String(), err, got.Ifname, want)
	}
	if Escape(want) != want {
		t.Errorf("Escape is not idempotent: %q", Escape(want))
	}
}
