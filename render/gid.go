package render

import (
	"strconv"
	"time"

	"github.com/grdma/grdma/gid"
	"github.com/grdma/grdma/output"
)

// GIDRow is a GID table entry with its device, as grdma gid lists it.
type GIDRow struct {
	Device string
	gid.Entry
}

// GIDs prints entries as grdma gid does: text, the table of mlnx-tools'
// show_gids byte for byte; JSON, a list of objects.
func GIDs(p *output.Printer, rows []GIDRow) {
	if !p.JSON() {
		showGIDs(p, rows)
		return
	}
	p.StartList()
	for _, r := range rows {
		gidJSON(p, r)
	}
	p.EndList()
}

// showGIDs prints the table of show_gids.
func showGIDs(p *output.Printer, rows []GIDRow) {
	p.Text("DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n")
	p.Text("---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n")
	for _, r := range rows {
		ipv4 := "\t"
		if v4, ok := r.IPv4(); ok {
			ipv4 = v4 + "  "
		}
		p.Text(r.Device + "\t" + strconv.FormatUint(uint64(r.Port), 10) + "\t" + strconv.Itoa(r.Index) + "\t" +
			r.GID.SysfsString() + "\t" + ipv4 + "\t" + r.Type.Version() + "\t" + r.Netdev + "\n")
	}
	p.Text("n_gids_found=" + strconv.Itoa(len(rows)) + "\n")
}

// gidJSON prints one entry as a JSON object.
func gidJSON(p *output.Printer, r GIDRow) {
	p.OpenObject("")
	p.String(output.JSONOnly, "ifname", "", r.Device)
	p.Uint(output.JSONOnly, "port", "", uint64(r.Port))
	p.Uint(output.JSONOnly, "index", "", uint64(r.Index))
	p.String(output.JSONOnly, "gid", "", r.GID.String())
	if v4, ok := r.IPv4(); ok {
		p.String(output.JSONOnly, "ipv4", "", v4)
	}
	p.String(output.JSONOnly, "type", "", r.Type.String())
	if r.Netdev != "" {
		p.String(output.JSONOnly, "netdev", "", r.Netdev)
	}
	p.CloseObject()
	p.Newline()
}

// GIDChange prints a change as grdma gid watch does: "DEV/PORT INDEX GID
// (was INDEX GID)" ("none" for no matching GID), or one JSON line:
// ifname, port, index and gid (absent without a match), old_index and
// old_gid, time.
func GIDChange(p *output.Printer, c gid.Change, at time.Time) {
	p.StartPlain()
	p.OpenObject("")
	p.String(output.JSONOnly, "time", "", at.UTC().Format(time.RFC3339Nano))
	p.String(output.Any, "ifname", "%s/", c.Device)
	p.Uint(output.Any, "port", "%s ", uint64(c.Port))
	entry := func(prefix string, e *gid.Entry) {
		if e == nil {
			p.Text("none")
			return
		}
		p.Uint(output.Any, prefix+"index", "%s ", uint64(e.Index))
		p.String(output.Any, prefix+"gid", "%s", e.GID.String())
	}
	entry("", c.New)
	p.Text(" (was ")
	entry("old_", c.Old)
	p.Text(")")
	p.CloseObject()
	p.EndPlain()
	if !p.JSON() {
		p.Newline()
	}
}
