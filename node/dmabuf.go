package node

import (
	"github.com/grdma/grdma/gpudirect"
	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

// DMABufProbe is the gpudirect.DMABufProbe of a node: NCCL's dma-buf test
// (register a dma-buf MR with fd -1) on every device that has a uverbs
// device, whose errnos gpudirect reads. nl is asked for the devices when
// the probe runs, and the client it returns stays the caller's: the probe
// does not close it. A device without a uverbs device cannot tell and is
// left out.
func DMABufProbe(sys sysfs.FS, nl func() (*nldev.Client, error)) gpudirect.DMABufProbe {
	return func() ([]gpudirect.DMABufProbeResult, error) {
		c, err := nl()
		if err != nil {
			return nil, err
		}
		devs, err := c.Devices()
		if err != nil {
			return nil, err
		}
		var out []gpudirect.DMABufProbeResult
		for _, d := range devs {
			ch, err := c.Chardev(d.Index, "uverbs")
			if err != nil {
				continue
			}
			ctx, err := uverbs.Open(sys.Root(), d.Name, locator.FromNetlink(ch))
			if err != nil {
				continue
			}
			out = append(out, gpudirect.DMABufProbeResult{Device: d.Name, Err: ctx.ProbeDMABufImport(ch.DriverID)})
			ctx.Close()
		}
		return out, nil
	}
}
