package sweep

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// RankEnv lists the environment variables a launcher sets to a task's
// rank, in the order Rank consults them: Slurm's srun, a Kubernetes
// Indexed Job, Open MPI's mpirun, PMIx launchers.
var RankEnv = []string{"SLURM_PROCID", "JOB_COMPLETION_INDEX", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"}

// NodeListEnv is where Slurm puts the job's nodes (a host list
// expression, see ExpandHostlist).
const NodeListEnv = "SLURM_JOB_NODELIST"

// Self is what this host is called: its host names (as os.Hostname
// gives, the short name is tried too) and the addresses of its
// interfaces.
type Self struct {
	Names []string
	Addrs []net.IP
}

// matches reports whether host, whose addresses are addrs, is this host.
func (s Self) matches(h Host, addrs []net.IP) bool {
	name := strings.ToLower(strings.TrimSuffix(h.Name, "."))
	for _, n := range s.Names {
		n = strings.ToLower(strings.TrimSuffix(n, "."))
		short, _, _ := strings.Cut(n, ".")
		if name == n || name == short {
			return true
		}
	}
	if ip := net.ParseIP(h.Name); ip != nil {
		addrs = append(addrs, ip)
	}
	for _, a := range addrs {
		for _, mine := range s.Addrs {
			if a.Equal(mine) && !a.IsLoopback() {
				return true
			}
		}
	}
	return false
}

// Rank returns this node's rank in hosts and where it came from: explicit
// when it is not negative (the rank keyword), else the first variable of
// RankEnv that env has, else the position of the one entry that is this
// host (self; addrs[i] are the addresses hosts[i] resolves to, nil when
// not resolved). A rank outside the list, a variable that is not a
// number, a host that matches no entry or several, and a launcher's rank
// that names another entry than the one this host matches are errors
// that say what to fix.
func Rank(hosts []Host, explicit int, env func(string) string, self Self, addrs [][]net.IP) (rank int, source string, err error) {
	outside := func(src string, r int) error {
		return fmt.Errorf("%s is %d, outside the host list (%d hosts: ranks 0 to %d)", src, r, len(hosts), len(hosts)-1)
	}
	mine := func() []int {
		var idx []int
		for i, h := range hosts {
			var a []net.IP
			if i < len(addrs) {
				a = addrs[i]
			}
			if self.matches(h, a) {
				idx = append(idx, i)
			}
		}
		return idx
	}
	if explicit >= 0 {
		if explicit >= len(hosts) {
			return 0, "", outside("rank", explicit)
		}
		return explicit, "rank", nil
	}
	for _, name := range RankEnv {
		v := env(name)
		if v == "" {
			continue
		}
		r, err := strconv.Atoi(v)
		if err != nil || r < 0 {
			return 0, "", fmt.Errorf("%s=%q is not a rank (a number from 0)", name, v)
		}
		if r >= len(hosts) {
			return 0, "", fmt.Errorf("%s: one task per host in the list (Slurm: --ntasks-per-node=1; Kubernetes: completions = hosts)", outside(name, r))
		}
		// A launcher's rank must name this host when the list says which
		// one this host is: srun and the host list may disagree on order.
		if m := mine(); len(m) == 1 && m[0] != r {
			return 0, "", fmt.Errorf("%s is %d (%s in the host list) but this host is %s, rank %d: give the hosts in the launcher's order, or rank N",
				name, r, hosts[r], hosts[m[0]], m[0])
		}
		return r, name, nil
	}
	switch m := mine(); len(m) {
	case 1:
		return m[0], "host list", nil
	case 0:
		return 0, "", fmt.Errorf("this host (%s) is not in the host list and no launcher set a rank (%s): give rank N",
			strings.Join(self.Names, ", "), strings.Join(RankEnv, ", "))
	default:
		var names []string
		for _, i := range m {
			names = append(names, fmt.Sprintf("%s (rank %d)", hosts[i], i))
		}
		return 0, "", fmt.Errorf("this host is %s in the host list: give rank N", strings.Join(names, " and "))
	}
}
