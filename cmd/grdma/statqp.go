package main

import (
	"strconv"
	"strings"

	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
)

func (a *app) statQP(args *argv) error {
	verb, err := args.keyword("qp command", "mode", "mode", "set", "bind", "unbind", "help")
	if err != nil {
		return err
	}
	switch verb {
	case "set":
		return a.statQPSet(args)
	case "bind":
		return a.statQPBind(args, true)
	case "unbind":
		return a.statQPBind(args, false)
	case "help":
		return usagef("", "see grdma stat --help")
	}
	return a.statQPMode(args)
}

func (a *app) statQPMode(args *argv) error {
	c, refs, err := a.statPorts(args)
	if err != nil {
		return err
	}
	return a.listPorts(refs, func(p *output.Printer, r portRef) error {
		m, err := c.QPCounterMode(r.dev.Index, r.port)
		if err != nil {
			return err
		}
		p.OpenObject("")
		p.Uint(output.JSONOnly, "ifindex", "", uint64(r.dev.Index))
		p.String(output.JSONOnly, "ifname", "", m.DevName)
		p.Uint(output.JSONOnly, "port", "", uint64(m.Port))
		p.Text("link " + m.DevName + "/" + strconv.FormatUint(uint64(m.Port), 10) + " ")
		p.String(output.Any, "mode", "mode %s ", qpModeString(&m))
		p.CloseObject()
		p.Newline()
		return nil
	})
}

// qpModeString is rdma's free-text mode: "qp auto type,pid on
// optional-counters off" in auto mode, "qp auto off" otherwise (rdma does
// not tell manual mode from none; neither can a script that parses this).
func qpModeString(m *nldev.QPCounterMode) string {
	if m.Mode != nldev.CounterModeAuto {
		return "qp auto off"
	}
	var crit []string
	if m.AutoMask&nldev.CounterMaskQPType != 0 {
		crit = append(crit, "type")
	}
	if m.AutoMask&nldev.CounterMaskPID != 0 {
		crit = append(crit, "pid")
	}
	if len(crit) == 0 {
		return "qp auto off"
	}
	opt := "off"
	if m.OptionalCounters {
		opt = "on"
	}
	return "qp auto " + strings.Join(crit, ",") + " on optional-counters " + opt
}

// statQPSet: set link D/P auto {type|pid|type,pid} on [optional-counters on|off] | auto off
func (a *app) statQPSet(args *argv) error {
	if len(args.words) < 2 {
		return usagef(args.help, "stat qp set needs link DEV/PORT auto ...")
	}
	tail := newArgv(args.words[2:], args.help)
	args.words = args.words[:2]
	if _, err := tail.keyword("parameter", "", "auto"); err != nil {
		return err
	}
	crit, err := tail.value("auto criteria (type, pid, type,pid) or off")
	if err != nil {
		return err
	}
	var mask uint32
	optional := false
	if crit != "off" {
		for _, c := range strings.Split(crit, ",") {
			switch c {
			case "type":
				mask |= nldev.CounterMaskQPType
			case "pid":
				mask |= nldev.CounterMaskPID
			default:
				return usagef(args.help, "unknown auto criterion %q: expected type, pid", c)
			}
		}
		if on, err := tail.onOff("auto " + crit); err != nil {
			return err
		} else if !on {
			mask = 0
		}
		if !tail.empty() {
			if _, err := tail.keyword("parameter", "", "optional-counters"); err != nil {
				return err
			}
			if optional, err = tail.onOff("optional-counters"); err != nil {
				return err
			}
		}
	}
	if err := tail.done(); err != nil {
		return err
	}
	c, r, err := a.strictPort(args, "stat qp set")
	if err != nil {
		return err
	}
	return c.SetQPCounterAuto(r.dev.Index, r.port, mask, optional)
}

// statQPBind: bind link D/P lqpn Q [cntn C]; unbind link D/P cntn C lqpn Q
func (a *app) statQPBind(args *argv, bind bool) error {
	verb := "unbind"
	if bind {
		verb = "bind"
	}
	if len(args.words) < 2 {
		return usagef(args.help, "stat qp %s needs link DEV/PORT", verb)
	}
	tail := newArgv(args.words[2:], args.help)
	args.words = args.words[:2]
	var lqpn, cntn uint32
	for !tail.empty() {
		kw, err := tail.keyword("parameter", "", "lqpn", "cntn")
		if err != nil {
			return err
		}
		v, err := tail.value(kw + " value")
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return usagef(args.help, "%s must be a number, not %q", kw, v)
		}
		if kw == "lqpn" {
			lqpn = uint32(n)
		} else {
			cntn = uint32(n)
		}
	}
	if lqpn == 0 || (!bind && cntn == 0) {
		if bind {
			return usagef(args.help, "stat qp bind needs lqpn QPN")
		}
		return usagef(args.help, "stat qp unbind needs cntn COUNTER and lqpn QPN")
	}
	c, r, err := a.strictPort(args, "stat qp "+verb)
	if err != nil {
		return err
	}
	if !bind {
		return c.UnbindQPCounter(r.dev.Index, r.port, lqpn, cntn)
	}
	_, err = c.BindQPCounter(r.dev.Index, r.port, lqpn, cntn)
	return err
}
