//go:build e2eguest

package guest

import "strings"

// joinResumed puts back on one line, where it began, each system call
// strace -f split because another thread's line came between
// ("7650  fsync(3 <unfinished ...>" … "7650  <... fsync resumed>) = 0"),
// as it does on a loaded machine: a trace can then be matched call by
// call.
func joinResumed(trace string) string {
	lines := strings.Split(trace, "\n")
	out := make([]string, 0, len(lines))
	open := map[string]int{} // pid → its unfinished call's line in out
	for _, l := range lines {
		pid, body, ok := strings.Cut(strings.TrimLeft(l, " "), " ")
		if !ok {
			out = append(out, l)
			continue
		}
		body = strings.TrimLeft(body, " ")
		if call, ok := strings.CutSuffix(body, " <unfinished ...>"); ok {
			open[pid] = len(out)
			out = append(out, pid+"  "+call)
			continue
		}
		if i, ok := open[pid]; ok && strings.HasPrefix(body, "<... ") {
			if _, rest, ok := strings.Cut(body, " resumed>"); ok {
				out[i] += rest
				delete(open, pid)
				continue
			}
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
