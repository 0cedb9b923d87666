package main

import (
	"slices"
	"strconv"
	"strings"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/ib"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/render"
)

func (a *app) statQP(args *argv) error {
	// A filter right after qp means show (rdma insists on the word).
	if !args.Empty() && slices.Contains([]string{"link", "cntn", "lqpn", "pid", "qp-type"}, args.Words[0]) {
		return a.statQPShow(args)
	}
	verb, err := args.Keyword("qp command", "show", verbs(grammar.Stat.Verb("qp").Next)...)
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
	case "mode":
		return a.statQPMode(args)
	}
	return a.statQPShow(args)
}

func (a *app) statQPMode(args *argv) error {
	c, refs, err := a.statPorts(args)
	if err != nil {
		return err
	}
	return a.listPorts(refs, func(p *output.Printer, r portRef) error {
		m, err := c.QPCounterMode(r.Device.Index, r.Port)
		if err != nil {
			return err
		}
		render.QPCounterMode(p, &m)
		return nil
	})
}

// statQPSet: set link D/P auto {type|pid|type,pid} on [optional-counters on|off] | auto off
func (a *app) statQPSet(args *argv) error {
	if err := args.LinkOrHelp(); err != nil {
		return err
	}
	if len(args.Words) < 2 {
		return usagef(args.Help, "stat qp set needs link DEV/PORT auto ...")
	}
	tail := args.Sub(args.Words[2:])
	args.Words = args.Words[:2]
	if _, err := tail.Keyword("parameter", "", "auto"); err != nil {
		return err
	}
	crit, err := tail.Value("auto criteria (type, pid, type,pid) or off")
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
				return usagef(args.Help, "unknown auto criterion %q: expected type, pid", c)
			}
		}
		if on, err := tail.OnOff("auto " + crit); err != nil {
			return err
		} else if !on {
			mask = 0
		}
		if !tail.Empty() {
			if _, err := tail.Keyword("parameter", "", "optional-counters"); err != nil {
				return err
			}
			if optional, err = tail.OnOff("optional-counters"); err != nil {
				return err
			}
		}
	}
	if err := tail.Done(); err != nil {
		return err
	}
	c, r, err := a.strictPort(args, "stat qp set")
	if err != nil {
		return err
	}
	return c.SetQPCounterAuto(r.Device.Index, r.Port, mask, optional)
}

// statQPBind: bind link D/P lqpn Q [cntn C]; unbind link D/P cntn C lqpn Q
func (a *app) statQPBind(args *argv, bind bool) error {
	verb := "unbind"
	if bind {
		verb = "bind"
	}
	if err := args.LinkOrHelp(); err != nil {
		return err
	}
	if len(args.Words) < 2 {
		return usagef(args.Help, "stat qp %s needs link DEV/PORT", verb)
	}
	tail := args.Sub(args.Words[2:])
	args.Words = args.Words[:2]
	var lqpn, cntn uint32
	for !tail.Empty() {
		kw, err := tail.Keyword("parameter", "", "lqpn", "cntn")
		if err != nil {
			return err
		}
		v, err := tail.Value(kw + " value")
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return usagef(args.Help, "%s must be a number, not %q", kw, v)
		}
		if kw == "lqpn" {
			lqpn = uint32(n)
		} else {
			cntn = uint32(n)
		}
	}
	if bind && lqpn == 0 {
		return usagef(args.Help, "stat qp bind needs lqpn QPN")
	}
	if !bind && cntn == 0 {
		return usagef(args.Help, "stat qp unbind needs cntn COUNTER (and lqpn QPN for one QP only)")
	}
	c, r, err := a.strictPort(args, "stat qp "+verb)
	if err != nil {
		return err
	}
	if !bind && lqpn == 0 {
		// Every QP of the counter, as rdma does.
		_, err := c.UnbindQPCounterAll(r.Device.Index, r.Port, cntn)
		return err
	}
	if !bind {
		return c.UnbindQPCounter(r.Device.Index, r.Port, lqpn, cntn)
	}
	_, err = c.BindQPCounter(r.Device.Index, r.Port, lqpn, cntn)
	return err
}

// statQPShow: qp show [link DEV[/PORT]] [cntn N] [lqpn N] [pid N] [qp-type T]
func (a *app) statQPShow(args *argv) error {
	var want ib.PortRef
	var f nldev.QPCounterFilter
	for !args.Empty() {
		kw, err := args.Keyword("parameter", "", grammar.Stat.Verb("qp").Next.KeywordNames()...)
		if err != nil {
			return err
		}
		v, err := args.Value(kw + " value")
		if err != nil {
			return err
		}
		switch kw {
		case "link":
			want, err = args.DevPort(v)
		case "qp-type":
			f.QPTypes = strings.Split(v, ",")
		case "optional-counters":
			// rdma's table has it, and nothing reads it: accepted, no effect.
		default:
			var r nldev.NumList
			if r, err = grammar.ParseNumList(v); err != nil {
				err = usagef(args.Help, "%s: %v", kw, err)
			}
			*map[string]*nldev.NumList{"cntn": &f.CounterIDs, "lqpn": &f.LQPNs, "pid": &f.PIDs}[kw] = r
		}
		if err != nil {
			return err
		}
	}
	c, devs, err := a.devices()
	if err != nil {
		return err
	}
	refs, err := nldev.SelectPorts(devs, want.Device, want.Port)
	if err != nil {
		return err
	}
	opts := render.ResOptions{Comm: a.procComm()}
	return a.listPorts(refs, func(p *output.Printer, r portRef) error {
		rs := render.NewResources(p, opts)
		return c.QPCounters(r.Device.Index, r.Port, func(q *nldev.QPCounter) error {
			if f.Match(q) {
				rs.QPCounter(q)
			}
			return nil
		})
	})
}
