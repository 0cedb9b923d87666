package topo

import (
	"slices"
	"testing"

	"github.com/grdma/grdma/pci"
	"github.com/grdma/grdma/sysfs"
)

// TestCloserIdle: NCCL gives a GPU the NICs of the highest path bandwidth
// first, the closest of those second, so a fast NIC further away wins over
// a slow one next to the GPU, and GPUs can end up sharing it while closer
// NICs idle (Choice.SharedWith, Choice.Closer). QEMU's endpoints all have a
// 2.5 GT/s x1 capability, so no captured tree has two path bandwidths: the
// captured switch layout gets, in memory, a Gen4 x16 capability on the
// stand-in GPU at 05:00.0, its switch's upstream port and the NIC below
// the second host bridge (41:00.0). Both GPUs then take that NIC (NODE)
// and the NICs on GPU0's own switch (PIX) idle.
func TestCloserIdle(t *testing.T) {
	fsys, err := sysfs.NewFS("../pci/testdata/switch-6.12")
	if err != nil {
		t.Fatal(err)
	}
	a := func(s string) pci.Address {
		x, err := pci.ParseAddress(s)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	opts := Options{GPUs: []pci.Address{a("0000:05:00.0"), a("0000:0a:00.0")}, NodeGDR: new(true)}
	top, err := Read(fsys, opts)
	if err != nil {
		t.Fatal(err)
	}
	widen := func(f *pci.Function) { f.Link.MaxSpeed, f.Link.MaxWidth = pci.Gen4, 16 }
	widen(&top.GPUs[0].Function)
	for _, s := range []string{"0000:05:00.0", "0000:01:00.0", "0000:41:00.0"} {
		widen(top.Functions[a(s)])
	}
	top.Pairs, top.Choices = nil, nil
	top.relate(opts)

	fast := slices.IndexFunc(top.NICs, func(n NIC) bool { return n.Function.Address == a("0000:41:00.0") })
	var near []string // the NICs closer to GPU0 than NODE
	for ni, n := range top.NICs {
		if top.Matrix[0][2+ni] < PathNODE {
			near = append(near, n.Name)
		}
	}
	if len(near) != 4 {
		t.Fatalf("NICs closer than NODE to GPU0: %v, want the two PIX, the PXB and the PHB one", near)
	}
	for gi, c := range top.Choices {
		other := top.GPUs[1-gi].Name
		if c.NIC != top.NICs[fast].Name || c.Path != PathNODE || !slices.Equal(c.Local, []string{c.NIC}) ||
			!slices.Equal(c.SharedWith, []string{other}) || !slices.Equal(c.Closer, near) {
			t.Errorf("%s: %+v, want %s (NODE, the only fastest) shared with %s, closer %v", c.GPU, c, top.NICs[fast].Name, other, near)
		}
		if c.GDR.PathAllows {
			t.Errorf("%s: GDR %+v over NODE", c.GPU, c.GDR)
		}
	}
	p := top.Pairs[slices.IndexFunc(top.Pairs, func(p Pair) bool { return p.GPU == "GPU0" && p.NIC == top.NICs[fast].Name })]
	if p.BandwidthGBps != 24 { // Gen4 x16: 16 lanes × 120 / 80
		t.Errorf("GPU0-%s: %v GB/s, want 24", p.NIC, p.BandwidthGBps)
	}
}
