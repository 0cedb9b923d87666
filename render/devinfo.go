package render

import (
	"strconv"
	"strings"

	"github.com/grdma/grdma/devinfo"
	"github.com/grdma/grdma/output"
)

// DevInfo prints one device as grdma dev info does: text a header line,
// then one attribute a line ("    max_qp 1048560"), the ports indented
// under it; JSON one object with ibv_devinfo's keys (see grdma-dev(8)).
func DevInfo(p *output.Printer, d *devinfo.Device) {
	p.OpenObject("")
	p.Uint(output.JSONOnly, "ifindex", "", uint64(d.Index))
	p.String(output.Any, "hca_id", "%s:", d.Name)
	p.String(output.Any, "driver", " driver %s", d.Driver)
	if d.BusDevice == nil {
		p.Null(output.JSONOnly, "parent", "")
	} else {
		p.OpenObject("parent")
		p.String(output.Any, "bus", " parent %s", d.BusDevice.Bus)
		p.String(output.Any, "name", ":%s", d.BusDevice.Name)
		p.CloseObject()
	}
	chardev(p, "uverbs", d.Uverbs)
	chardev(p, "rdma_cm", d.RDMACM)
	p.String(output.Any, "source", " source %s", string(d.Source))
	if d.Note != "" {
		p.String(output.Any, "note", "\n    note: %s", d.Note)
	}
	for _, f := range d.Fields() {
		field(p, "    ", f)
	}
	p.OpenArray(output.JSONOnly, "ports", "")
	for i := range d.Ports {
		devInfoPort(p, &d.Ports[i])
	}
	p.CloseArray(output.JSONOnly, "")
	p.CloseObject()
	p.Newline()
}

// chardev prints a character device's path, JSON null when there is none.
func chardev(p *output.Printer, key, path string) {
	if path == "" {
		p.Null(output.JSONOnly, key, "")
		return
	}
	p.String(output.Any, key, " "+key+" %s", path)
}

func devInfoPort(p *output.Printer, port *devinfo.Port) {
	p.OpenObject("")
	p.Uint(output.Any, "port", "\n    port %s", uint64(port.Port))
	if port.Netdev == "" {
		p.Null(output.JSONOnly, "netdev", "")
	} else {
		p.String(output.Any, "netdev", " netdev %s", port.Netdev)
		p.Uint(output.JSONOnly, "netdev_ifindex", "", uint64(port.NetdevIndex))
		p.String(output.Any, "netdev_operstate", " (%s)", port.NetdevOperState)
	}
	chardev(p, "umad", port.Umad)
	chardev(p, "issm", port.Issm)
	p.String(output.Any, "source", " source %s", string(port.Source))
	p.String(output.Any, "mtu_source", " mtu_source %s", string(port.MTUSource))
	for _, f := range port.Fields() {
		field(p, "        ", f)
	}
	p.OpenArray(output.JSONOnly, "gids", "")
	for _, g := range port.GIDs {
		p.OpenObject("")
		p.Uint(output.Any, "index", "\n        gid %s", uint64(g.Index))
		p.String(output.Any, "gid", " %s", g.GID.String())
		p.String(output.Any, "type", " %s", g.Type.String())
		if g.Netdev != "" {
			p.String(output.Any, "netdev", " %s", g.Netdev)
		}
		p.CloseObject()
	}
	p.CloseArray(output.JSONOnly, "")
	p.CloseObject()
}

// field prints one attribute. JSON: numbers as numbers, an enum as its
// name with "KEY_value", flags as the word with "KEY_names". Text:
// "KEY VALUE" on its own line, hex where ibv_devinfo shows hex, an enum
// as "NAME (VALUE)", flags as "0x... <A, B>".
func field(p *output.Printer, indent string, f devinfo.Field) {
	if p.JSON() {
		switch f.Kind {
		case devinfo.Number, devinfo.Hex:
			p.Uint(output.JSONOnly, f.Key, "", f.Num)
		case devinfo.String:
			p.String(output.JSONOnly, f.Key, "", f.Str)
		case devinfo.Enum:
			p.String(output.JSONOnly, f.Key, "", f.Str)
			p.Uint(output.JSONOnly, f.Key+"_value", "", f.Num)
		case devinfo.NumberEnum:
			p.Uint(output.JSONOnly, f.Key, "", f.Size)
			p.Uint(output.JSONOnly, f.Key+"_value", "", f.Num)
		case devinfo.Flags:
			p.Uint(output.JSONOnly, f.Key, "", f.Num)
			p.OpenArray(output.JSONOnly, f.Key+"_names", "")
			for _, n := range f.Names {
				p.String(output.JSONOnly, "", "", n)
			}
			p.CloseArray(output.JSONOnly, "")
		}
		return
	}
	p.Text("\n" + indent + f.Key + " ")
	switch f.Kind {
	case devinfo.Number:
		p.Text(strconv.FormatUint(f.Num, 10))
	case devinfo.Hex:
		p.Text("0x" + strconv.FormatUint(f.Num, 16))
	case devinfo.String:
		p.String(output.TextOnly, "", "%s", f.Str)
	case devinfo.Enum:
		p.String(output.TextOnly, "", "%s", f.Str)
		p.Text(" (" + strconv.FormatUint(f.Num, 10) + ")")
	case devinfo.NumberEnum:
		p.Text(strconv.FormatUint(f.Size, 10) + " (" + strconv.FormatUint(f.Num, 10) + ")")
	case devinfo.Flags:
		p.Text("0x" + strconv.FormatUint(f.Num, 16))
		if len(f.Names) > 0 {
			p.Text(" <" + strings.Join(f.Names, ", ") + ">")
		}
	}
}
