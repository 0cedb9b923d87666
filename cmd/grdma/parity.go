package main

import (
	"strconv"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/render"
)

// Commands of rdma 7.1 beyond the first versions: stat mr, dev add and
// delete (sub-devices), res show/set frmr_pools, stat qp unbind of every
// QP of a counter. Decisions live in nldev; this parses and renders.

// statMR: stat mr|show mr [dev DEV] [mrn N]
func (a *app) statMR(args *argv) error {
	var dev string
	var f nldev.MRCounterFilter
	for !args.Empty() {
		kw, err := args.Keyword("filter", "", grammar.Stat.Verb("mr").Next.KeywordNames()...)
		if err != nil {
			return err
		}
		v, err := args.Value(kw + " value")
		if err != nil {
			return err
		}
		if kw == "dev" {
			dev = v
			continue
		}
		if f.MRNs, err = grammar.ParseNumList(v); err != nil {
			return usagef(args.Help, "bad mrn filter: %v (use numbers and ranges, e.g. 1-3,7)", err)
		}
	}
	c, err := a.nl()
	if err != nil {
		return err
	}
	return a.printList(func(p *output.Printer) error {
		return c.MRCounterLists(dev, f, func(m *nldev.MRCounters) error {
			render.MRCounters(p, m)
			return nil
		})
	})
}

// devAdd: dev add NAME type TYPE parent PARENT
func (a *app) devAdd(args *argv) error {
	name, err := args.Value("name of the new device")
	if err != nil {
		return err
	}
	if _, err := args.Keyword("parameter", "", "type"); err != nil {
		return err
	}
	typName, err := args.Value("device type (smi)")
	if err != nil {
		return err
	}
	typ, err := nldev.ParseDeviceType(typName)
	if err != nil {
		return usagef(args.Help, "%s", err)
	}
	if _, err := args.Keyword("parameter", "", "parent"); err != nil {
		return err
	}
	parent, err := args.Value("parent device")
	if err != nil {
		return err
	}
	return a.runDone(args, func(c *nldev.Client) error { return c.AddSubDevice(name, typ, parent) })
}

// devDelete: dev delete NAME
func (a *app) devDelete(args *argv) error {
	name, err := args.Value("device name")
	if err != nil {
		return err
	}
	return a.runDone(args, func(c *nldev.Client) error { return c.DeleteSubDevice(name) })
}

// runDone checks that no words are left, then runs do with the netlink
// client: the end of every command that changes one thing.
func (a *app) runDone(args *argv, do func(c *nldev.Client) error) error {
	if err := args.Done(); err != nil {
		return err
	}
	c, err := a.nl()
	if err != nil {
		return err
	}
	return do(c)
}

// resFRMRPools: res show frmr_pools [dev DEV] [FILTER VALUE]...
func (a *app) resFRMRPools(args *argv) error {
	sel, err := grammar.ParseFRMRPoolSelect(args.Words)
	if err != nil {
		return usagef(args.Help, "%s", err)
	}
	c, err := a.nl()
	if err != nil {
		return err
	}
	return a.printList(func(p *output.Printer) error {
		return c.FRMRPoolList(sel, a.opts.details >= 2, func(fp *nldev.FRMRPool) error {
			render.FRMRPool(p, fp, a.opts.details > 0)
			return nil
		})
	})
}

// resSet: res set frmr_pools dev DEV aging SECONDS | pinned KEY N
func (a *app) resSet(args *argv) error {
	if _, err := args.Keyword("object", "", "frmr_pools"); err != nil {
		return err
	}
	if _, err := args.Keyword("parameter", "", "dev"); err != nil {
		return err
	}
	dev, err := args.Value("device name")
	if err != nil {
		return err
	}
	kw, err := args.Keyword("parameter", "", grammar.Res.Verb("set").Next.Verb("frmr_pools").Next.KeywordNames()[1:]...)
	if err != nil {
		return err
	}
	var set func(c *nldev.Client, dev uint32) error
	if kw == "aging" {
		v, err := args.Value("aging period in seconds")
		if err != nil {
			return err
		}
		secs, err := strconv.ParseUint(v, 10, 32)
		if err != nil || secs == 0 {
			return usagef(args.Help, "aging period must be a number of seconds from 1, not %q", v)
		}
		set = func(c *nldev.Client, dev uint32) error { return c.SetFRMRPoolsAging(dev, uint32(secs)) }
	} else {
		v, err := args.Value("pool key (vendor_key:num_dma_blocks:access_flags:ats)")
		if err != nil {
			return err
		}
		key, err := grammar.ParseFRMRPoolKey(v)
		if err != nil {
			return usagef(args.Help, "%s", err)
		}
		v, err = args.Value("number of pinned FRMRs")
		if err != nil {
			return err
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return usagef(args.Help, "pinned must be a number, not %q", v)
		}
		set = func(c *nldev.Client, dev uint32) error { return c.SetFRMRPoolPinned(dev, key, uint32(n)) }
	}
	return a.runDone(args, func(c *nldev.Client) error {
		d, err := c.DeviceByName(dev)
		if err != nil {
			return err
		}
		return set(c, d.Index)
	})
}
