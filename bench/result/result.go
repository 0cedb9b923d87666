// Package result is what the guest benchmark driver measures and how the
// host renders it: shared by bench/guest (writes JSON) and bench (reads it
// and writes the tables of BENCHMARKS.md).
package result

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Comparison is one line of a table: grdma's commands against the
// reference's for the same information. Each side's time is the sum of its
// commands' wall times.
type Comparison struct {
	Name  string
	Grdma [][]string
	Ref   [][]string
}

// Result is one comparison at one device count.
type Result struct {
	Devices int
	Comparison
	GrdmaNS, RefNS []int64 // one wall time per rep
	Error          string  // why it was not measured
}

// Run is everything one guest measured.
type Run struct {
	Kernel  string // uname -r
	Rdma    string // rdma -V
	Reps    int    // asked for; a slow comparison may have fewer (its Runs)
	Results []Result
	// Syscalls are system call counts (strace -f -c) of single runs.
	Syscalls []Syscalls
	Notes    []string
}

// Syscalls is how many system calls one run of a command made.
type Syscalls struct {
	Devices int
	Name    string // "grdma -j dev info", "before: grdma port show + gid show"
	Calls   int
	Error   string
}

// Min and Median of a side, in nanoseconds.
func Min(ns []int64) int64 { return slices.Min(ns) }

// Median is the middle value (the mean of the two middle ones when even).
func Median(ns []int64) int64 {
	s := slices.Clone(ns)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Markdown renders a run as one table per device count.
func (r Run) Markdown() string {
	var b strings.Builder
	byCount := map[int][]Result{}
	var counts []int
	for _, res := range r.Results {
		if byCount[res.Devices] == nil {
			counts = append(counts, res.Devices)
		}
		byCount[res.Devices] = append(byCount[res.Devices], res)
	}
	for _, n := range counts {
		fmt.Fprintf(&b, "\n%d rxe device%s:\n\n", n, plural(n))
		b.WriteString("| command | runs | grdma min | reference min | **ratio min** | grdma median | reference median | **ratio median** |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, res := range byCount[n] {
			if res.Error != "" {
				fmt.Fprintf(&b, "| %s | not measured: %s |||||||\n", res.Name, strings.ReplaceAll(res.Error, "\n", " "))
				continue
			}
			gMin, rMin := Min(res.GrdmaNS), Min(res.RefNS)
			gMed, rMed := Median(res.GrdmaNS), Median(res.RefNS)
			fmt.Fprintf(&b, "| %s | %d | %s | %s | **%s** | %s | %s | **%s** |\n", res.Name, len(res.GrdmaNS),
				ms(gMin), ms(rMin), ratio(gMin, rMin), ms(gMed), ms(rMed), ratio(gMed, rMed))
		}
	}
	if len(r.Syscalls) > 0 {
		b.WriteString("\nSystem calls of one run (`strace -f -c`, total calls):\n\n| command |")
		var names []string
		byName := map[string]map[int]Syscalls{}
		for _, s := range r.Syscalls {
			if byName[s.Name] == nil {
				names = append(names, s.Name)
				byName[s.Name] = map[int]Syscalls{}
			}
			byName[s.Name][s.Devices] = s
		}
		for _, n := range counts {
			fmt.Fprintf(&b, " %d device%s |", n, plural(n))
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|", len(counts)) + "\n")
		for _, name := range names {
			fmt.Fprintf(&b, "| %s |", name)
			for _, n := range counts {
				s, ok := byName[name][n]
				switch {
				case !ok:
					b.WriteString(" |")
				case s.Error != "":
					fmt.Fprintf(&b, " failed: %s |", strings.ReplaceAll(s.Error, "\n", " "))
				default:
					fmt.Fprintf(&b, " %d |", s.Calls)
				}
			}
			b.WriteString("\n")
		}
	}
	for _, note := range r.Notes {
		fmt.Fprintf(&b, "\nNote: %s\n", note)
	}
	return b.String()
}

// ms formats nanoseconds as milliseconds.
func ms(ns int64) string {
	return fmt.Sprintf("%.1f ms", float64(ns)/float64(time.Millisecond))
}

// ratio is grdma's time over the reference's: below 1 grdma is faster.
func ratio(grdma, ref int64) string {
	if ref == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(grdma)/float64(ref))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
