// Command nlcapture records raw RDMA netlink replies of a real kernel as
// test fixtures: it sends NLDEV requests over a plain NETLINK_RDMA socket and
// writes every reply datagram, byte for byte, to a file per request. It is
// run inside the QEMU guest (see e2e/README.md), never on the build host.
//
//	nlcapture -out DIR [-dev NAME] [-port N]
//	nlcapture -res -out DIR -dev N   (resource requests, see nlfixture.ResRecordings)
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"golang.org/x/sys/unix"
)

func main() {
	out := flag.String("out", ".", "directory for the .bin files")
	dev := flag.Uint("dev", 0, "device index for per-device requests")
	port := flag.Uint("port", 1, "port for per-port requests")
	linkName := flag.String("link-name", "", "with -link-type/-link-netdev: record a NEWLINK reply (an error case)")
	linkType := flag.String("link-type", "rxe", "NEWLINK link type")
	linkNetdev := flag.String("link-netdev", "", "NEWLINK netdev")
	monitor := flag.Int("monitor", 0, "record this many RDMA monitor event datagrams to monitor.bin, then exit")
	only := flag.String("only", "", "record just this request (the .bin name without extension)")
	chardev := flag.Bool("chardev", false, "record the GET_CHARDEV requests of -dev and -port (uverbs, umad, issm) and rdma_cm")
	res := flag.Bool("res", false, "record the resource requests of -dev (and, for -dev 0, the RES_GET dump)")
	parity := flag.Bool("parity", false, "record the requests of the rdma 7.1 commands (stat mr, dev add/delete, frmr_pools, stat qp unbind) for -dev and -port (nlfixture.ParityRecordings)")
	flag.Parse()

	reqs := []struct {
		name  string
		cmd   nldev.Command
		flags uint16
		attrs []byte
	}{
		{"get_dump", nldev.CmdGet, unix.NLM_F_DUMP, nil},
		{fmt.Sprintf("get_doit_dev%d", *dev), nldev.CmdGet, 0, u32(nldev.AttrDevIndex, uint32(*dev))},
		{fmt.Sprintf("port_dump_dev%d", *dev), nldev.CmdPortGet, unix.NLM_F_DUMP, u32(nldev.AttrDevIndex, uint32(*dev))},
		{fmt.Sprintf("port_doit_dev%d_port%d", *dev, *port), nldev.CmdPortGet, 0, append(u32(nldev.AttrDevIndex, uint32(*dev)), u32(nldev.AttrPortIndex, uint32(*port))...)},
		{"sys_get", nldev.CmdSysGet, 0, nil},
		{fmt.Sprintf("stat_get_dev%d_port%d", *dev, *port), nldev.CmdStatGet, 0, append(u32(nldev.AttrDevIndex, uint32(*dev)), u32(nldev.AttrPortIndex, uint32(*port))...)},
		{fmt.Sprintf("stat_qp_dump_dev%d_port%d", *dev, *port), nldev.CmdStatGet, unix.NLM_F_DUMP, concat(
			u32(nldev.AttrDevIndex, uint32(*dev)), u32(nldev.AttrPortIndex, uint32(*port)), u32(nldev.AttrStatRes, uint32(nldev.AttrResQP)))},
		{fmt.Sprintf("stat_status_dev%d_port%d", *dev, *port), nldev.CmdStatGetStatus, 0, append(u32(nldev.AttrDevIndex, uint32(*dev)), u32(nldev.AttrPortIndex, uint32(*port))...)},
		{fmt.Sprintf("stat_qp_mode_dev%d_port%d", *dev, *port), nldev.CmdStatGet, 0, concat(
			u32(nldev.AttrDevIndex, uint32(*dev)), u32(nldev.AttrPortIndex, uint32(*port)),
			u32(nldev.AttrStatMode, nldev.CounterModeManual), u32(nldev.AttrStatRes, uint32(nldev.AttrResQP)))},
		{"get_doit_bad_index", nldev.CmdGet, 0, u32(nldev.AttrDevIndex, 4242)},
	}
	if *linkName != "" {
		attrs := str(nldev.AttrDevName, *linkName)
		attrs = append(attrs, str(nldev.AttrLinkType, *linkType)...)
		attrs = append(attrs, str(nldev.AttrNetdevName, *linkNetdev)...)
		reqs = []struct {
			name  string
			cmd   nldev.Command
			flags uint16
			attrs []byte
		}{{"newlink_" + *linkName, nldev.CmdNewLink, unix.NLM_F_ACK, attrs}}
	}
	if *chardev {
		reqs = reqs[:0]
		for _, typ := range []string{"uverbs", "umad", "issm", "rdma_cm"} {
			name, attrs := "chardev_"+typ, str(nldev.AttrChardevType, typ)
			switch typ {
			case "uverbs":
				name += fmt.Sprintf("_dev%d", *dev)
				attrs = append(u32(nldev.AttrDevIndex, uint32(*dev)), attrs...)
			case "umad", "issm":
				name += fmt.Sprintf("_dev%d_port%d", *dev, *port)
				attrs = concat(u32(nldev.AttrDevIndex, uint32(*dev)), u32(nldev.AttrPortIndex, uint32(*port)), attrs)
			}
			reqs = append(reqs, struct {
				name  string
				cmd   nldev.Command
				flags uint16
				attrs []byte
			}{name, nldev.CmdGetChardev, 0, attrs})
		}
	}
	if *res {
		recs := nlfixture.ResRecordings(uint32(*dev))
		if *dev == 0 {
			recs = append(recs, nlfixture.ResSummaryDump)
		}
		reqs = reqs[:0]
		for _, rec := range recs {
			flags := uint16(0)
			if rec.Req.Dump {
				flags = unix.NLM_F_DUMP
			}
			reqs = append(reqs, struct {
				name  string
				cmd   nldev.Command
				flags uint16
				attrs []byte
			}{rec.Name, rec.Req.Cmd, flags, resAttrs(rec.Req)})
		}
	}
	if *parity {
		reqs = reqs[:0]
		d, p := uint32(*dev), uint32(*port)
		for _, rec := range nlfixture.ParityRecordings(d, p) {
			var attrs []byte
			switch rec.Req.Cmd {
			case nldev.CmdStatGet:
				if rec.Req.StatMR {
					// rdma's order (_res_send_msg, _res_send_idx_msg).
					if rec.Req.HasID {
						attrs = concat(u32(nldev.AttrDevIndex, d), u32(nldev.AttrResMRN, rec.Req.ID), attr(nldev.AttrDriverDetails, []byte{0}), u32(nldev.AttrStatRes, uint32(nldev.AttrResMR)))
					} else {
						attrs = concat(attr(nldev.AttrDriverDetails, []byte{0}), u32(nldev.AttrDevIndex, d), u32(nldev.AttrStatRes, uint32(nldev.AttrResMR)))
					}
				} else {
					// stat qp unbind without lqpn: the counter's QPs.
					attrs = concat(u32(nldev.AttrDevIndex, d), u32(nldev.AttrPortIndex, p), u32(nldev.AttrStatRes, uint32(nldev.AttrResQP)), u32(nldev.AttrStatCounterID, rec.Req.ID))
				}
			case nldev.CmdNewDev:
				attrs = concat(u32(nldev.AttrDevIndex, d), str(nldev.AttrDevName, nlfixture.ParitySubDevName), attr(nldev.AttrDevType, []byte{nldev.DeviceTypeSMI}))
			case nldev.CmdDelDev:
				attrs = u32(nldev.AttrDevIndex, d)
			case nldev.CmdFRMRPoolsGet:
				attrs = concat(attr(nldev.AttrDriverDetails, []byte{0}), u32(nldev.AttrDevIndex, d))
			}
			// As grdma sends them: an ACK asked for only where the
			// reply is nothing else (the reply is read up to it).
			var flags uint16
			switch {
			case rec.Req.Dump:
				flags = unix.NLM_F_DUMP
			case rec.Req.Cmd == nldev.CmdNewDev || rec.Req.Cmd == nldev.CmdDelDev:
				flags = unix.NLM_F_ACK
			}
			reqs = append(reqs, struct {
				name  string
				cmd   nldev.Command
				flags uint16
				attrs []byte
			}{rec.Name, rec.Req.Cmd, flags, attrs})
		}
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_RDMA)
	if err != nil {
		fail(err)
	}
	if *monitor > 0 {
		recordEvents(fd, *monitor, filepath.Join(*out, "monitor.bin"))
		return
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_EXT_ACK, 1)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		fail(err)
	}
	for i, r := range reqs {
		if *only != "" && r.name != *only {
			continue
		}
		seq := uint32(1000 + i)
		msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(r.attrs))
		msg = append(msg, r.attrs...)
		binary.NativeEndian.PutUint32(msg[0:], uint32(len(msg)))
		binary.NativeEndian.PutUint16(msg[4:], uint16(nldev.MessageType(r.cmd)))
		binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|r.flags)
		binary.NativeEndian.PutUint32(msg[8:], seq)
		if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			fail(err)
		}
		var all []byte
		buf := make([]byte, 1<<16)
		for done := false; !done; {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if err != nil {
				fail(err)
			}
			all = append(all, buf[:n]...)
			done = r.flags&(unix.NLM_F_DUMP|unix.NLM_F_ACK) == 0 || lastIsDone(buf[:n])
		}
		path := filepath.Join(*out, r.name+".bin")
		if err := os.WriteFile(path, all, 0o644); err != nil {
			fail(err)
		}
		fmt.Printf("%s: %d bytes\n", path, len(all))
	}
}

// recordEvents subscribes to RDMA_NL_GROUP_NOTIFY and writes n datagrams.
func recordEvents(fd, n int, path string) {
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (4 - 1)}); err != nil {
		fail(err)
	}
	fmt.Println("listening")
	var all []byte
	buf := make([]byte, 1<<16)
	for range n {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			fail(err)
		}
		all = append(all, buf[:k]...)
		if err := os.WriteFile(path, all, 0o644); err != nil {
			fail(err)
		}
	}
}

// lastIsDone reports whether a datagram ends a dump (NLMSG_DONE or error).
func lastIsDone(b []byte) bool {
	for len(b) >= unix.NLMSG_HDRLEN {
		l := int(binary.NativeEndian.Uint32(b))
		t := binary.NativeEndian.Uint16(b[4:])
		if t == unix.NLMSG_DONE || t == unix.NLMSG_ERROR {
			return true
		}
		if l < unix.NLMSG_HDRLEN || l > len(b) {
			return true
		}
		b = b[(l+3)&^3:]
	}
	return false
}

func attr(t nldev.Attr, v []byte) []byte {
	b := make([]byte, 4, 4+len(v)+3)
	binary.NativeEndian.PutUint16(b, uint16(4+len(v)))
	binary.NativeEndian.PutUint16(b[2:], uint16(t))
	b = append(b, v...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func u32(t nldev.Attr, v uint32) []byte {
	return attr(t, binary.NativeEndian.AppendUint32(nil, v))
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// resAttrs encodes a resource request as grdma sends it: DRIVER_DETAILS,
// DEV_INDEX, PORT_INDEX, the object number (the RES_GET dump has none).
func resAttrs(r nlfixture.Request) []byte {
	if r.Dev < 0 {
		return nil
	}
	dd := uint8(0)
	if r.DriverDetails {
		dd = 1
	}
	b := concat(attr(nldev.AttrDriverDetails, []byte{dd}), u32(nldev.AttrDevIndex, uint32(r.Dev)))
	if r.Port >= 0 {
		b = append(b, u32(nldev.AttrPortIndex, uint32(r.Port))...)
	}
	if r.HasID {
		b = append(b, u32(nldev.ResTypeOf(r.Cmd).IDAttr(), r.ID)...)
	}
	return b
}

func str(t nldev.Attr, s string) []byte { return attr(t, append([]byte(s), 0)) }

func fail(err error) {
	fmt.Fprintln(os.Stderr, "nlcapture:", err)
	os.Exit(1)
}
