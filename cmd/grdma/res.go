package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/grdma/grdma/grammar"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/proc"
	"github.com/grdma/grdma/render"
	"github.com/spf13/cobra"
)

func (a *app) resCommand() *cobra.Command {
	return &cobra.Command{
		Use: `res [show|list] [DEV]
  res show qp|cm_id [link DEV[/PORT|/-] | dev DEV] [FILTER VALUE]...
  res show cq|mr|pd|ctx|srq [dev DEV] [FILTER VALUE]...
  res show frmr_pools [dev DEV] [FILTER VALUE]...
  res set frmr_pools dev DEV aging SECONDS | pinned KEY N`,
		Aliases: []string{"resource"},
		Short:   "Show RDMA resources: object counts, QPs, CM IDs, CQs, MRs, PDs, contexts, SRQs",
		Long: `Show how many objects each RDMA device tracks, or list the objects of one
kind, as rdma resource does (same text and JSON). Objects are read with one
dump per device and printed as they arrive, so memory stays flat however
many there are.

Filters (FILTER VALUE pairs; a key may be abbreviated, and means the
first of its object's filters, in this order, that starts with it, as in
rdma):
` + resFiltersHelp() + `
Numeric values are numbers (decimal or 0x hex, 64-bit) and inclusive ranges,
comma separated: "lqpn 1-3,7". Other values are comma lists of names,
case-insensitive: "state rts,init". An object lacking a numeric field,
comm or an address never matches; one lacking another string field is
compared by the field's zero value, as rdma does (a UD QP's
path-mig-state is MIGRATED to a filter). dev-type and transport-type are
accepted as rdma accepts them; the kernel reports neither, so they match
every CM ID. A malformed filter is an error (exit 2). comm is the process
name of user objects, the module name of kernel objects. One plain object
number (lqpn with a port, cm-idn with a port, cqn, mrn, pdn, ctxn, srqn) is
looked up directly instead of dumping everything.

frmr_pools lists the pools of fast-registration MRs (Linux 7.0; filters
ats access_flags vendor_key num_dma_blocks queue in_use max_in_use pinned,
numeric; -d adds the key's fields); "res set frmr_pools dev DEV aging
SECONDS" sets how long unused ones live, "... pinned KEY N" how many of
pool KEY (vendor_key:num_dma_blocks:access_flags:ats, hexadecimal, as
listed) stay allocated. Kernels before 7.0 refuse both:
grdma says "not supported by this kernel".

link DEV/- lists the QPs and CM IDs not bound to a port yet; dev DEV and
link DEV are accepted for every object (rdma has link for QPs and CM IDs,
dev for the others, and reads cm_id's "dev" as dev-type). comm is not an
rdma filter.
-dd adds driver-internal objects and the driver's attributes (drv_*).
-r prints the driver's raw description of QPs, CQs, MRs and SRQs (needs
CAP_NET_ADMIN and driver support; ignored for other objects; filters other
than the object number do not apply). JSON is rdma's ("data": byte values);
text differs from rdma on purpose: "data" followed by the bytes in hex,
separated by spaces (rdma runs decimal bytes together).`,
		Example: `  grdma res
  grdma -j res show rxe0
  grdma res show qp
  grdma res show qp link mlx5_0/1 state RTS type RC,UD
  grdma -j res show cq dev rxe0 cqn 1
  grdma res show mr pid 4242
  grdma -dd res show qp lqpn 1-100`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.res(cmd, cmdArgv(cmd, args, "grdma res help"))
		},
	}
}

func (a *app) res(cmd *cobra.Command, args *argv) error {
	verb, err := args.Keyword("command", "show", verbs(grammar.Res)...)
	if err != nil {
		return err
	}
	if verb == "set" {
		return a.resSet(args)
	}
	if args.Empty() {
		return a.resSummary("")
	}
	word := args.Next()
	if args.Empty() && a.isDevice(word) {
		// rdma res show DEV: a device name is looked for first (res.c
		// res_show), so a device named like an object abbreviation wins.
		return a.resSummary(word)
	}
	if v := grammar.Res.Verb("show").Next.Verb(word); v != nil && v.Name == "frmr_pools" {
		return a.resFRMRPools(args)
	}
	t, ok := grammar.ParseResType(word)
	if !ok {
		if !args.Empty() {
			return usagef(args.Help, "unknown object %q: expected %s", word, strings.Join(grammar.ResTypeNames(), ", "))
		}
		// rdma res show DEV: a device name where an object would be.
		return a.resSummary(word)
	}
	sel, err := grammar.ParseResSelect(t, args.Words)
	if err != nil {
		return usagef(args.Help, "%s", err)
	}
	sel.Raw = a.opts.raw
	sel.DriverDetails = a.opts.details >= 2
	return a.resShow(sel)
}

// isDevice reports whether an RDMA device is named name (false when the
// devices cannot be listed: the command then says why).
func (a *app) isDevice(name string) bool {
	_, devs, err := a.devices()
	if err != nil {
		return false
	}
	_, err = nldev.FindDevice(devs, name)
	return err == nil
}

// resFiltersHelp lists the filters of each object, from the res grammar
// (grammar.ResFilters), as lines "  OBJECT  KEY KEY ...".
func resFiltersHelp() string {
	var b strings.Builder
	for _, t := range nldev.ResTypes {
		fmt.Fprintf(&b, "  %-6s", t)
		for _, f := range grammar.ResFilters(t) {
			b.WriteString(" " + f.Name)
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// resSummary prints the object counts of every device, or of one.
func (a *app) resSummary(dev string) error {
	c, err := a.nl()
	if err != nil {
		return err
	}
	sums, err := c.ResSummaries()
	if err != nil {
		return err
	}
	if dev != "" {
		i := slices.IndexFunc(sums, func(s nldev.ResSummary) bool { return s.Device == dev })
		if i < 0 {
			var names, objects []string
			for _, s := range sums {
				names = append(names, s.Device)
			}
			objects = grammar.ResTypeNames()
			return usagef("grdma res help", "%q is neither an object (%s) nor an RDMA device (%s)",
				dev, strings.Join(objects, ", "), strings.Join(names, ", "))
		}
		sums = sums[i : i+1]
	}
	// The dump counts no driver-internal objects; -dd asks device by device.
	if a.opts.details >= 2 {
		for i := range sums {
			if sums[i], err = c.ResSummary(sums[i].DevIndex, true); err != nil {
				return err
			}
		}
	}
	return a.printList(func(p *output.Printer) error {
		for i := range sums {
			render.ResSummary(p, &sums[i])
		}
		return nil
	})
}

// resShow lists the objects of one kind.
func (a *app) resShow(sel nldev.ResSelect) error {
	c, err := a.nl()
	if err != nil {
		return err
	}
	comm := a.procComm()
	return a.printList(func(p *output.Printer) error {
		rs := render.NewResources(p, render.ResOptions{Comm: comm, DriverDetails: sel.DriverDetails, SRQQPs: sel.QPList()})
		return c.ResList(sel, comm, func(o nldev.ResObject) error {
			rs.Object(o)
			return nil
		}, func(e *nldev.RawEntry) error {
			rs.Raw(sel.Type, e)
			return nil
		})
	})
}

// procComm returns a cached /proc/PID/comm reader below --sysfs-root.
func (a *app) procComm() nldev.CommFunc {
	fsys, err := a.rootFS()
	if err != nil {
		return func(uint32) (string, bool) { return "", false }
	}
	return proc.CommNames(fsys)
}
