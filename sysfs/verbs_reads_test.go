package sysfs

import (
	"strings"
	"testing"
)

// TestVerbsDeviceForReadsLittle: finding the uverbs device of one RDMA
// device reads the ibdev of the candidates before it and the attributes of
// the match, nothing more (it read every attribute of every uverbs device,
// which made `grdma port` quadratic in the number of devices).
func TestVerbsDeviceForReadsLittle(t *testing.T) {
	f := mustFS(t, "testdata/hca")
	var reads []string
	f.readHook = func(name string) error { reads = append(reads, name); return nil }
	d, err := f.VerbsDeviceFor("mlx5_1")
	if err != nil || d.Name != "uverbs1" {
		t.Fatalf("VerbsDeviceFor(mlx5_1) = %+v, %v", d, err)
	}
	want := []string{"uverbs0/ibdev", "uverbs1/ibdev", "uverbs1/ibdev", "uverbs1/abi_version", "uverbs1/dev"}
	if len(reads) != len(want) {
		t.Fatalf("read %q, want %q", reads, want)
	}
	for i, r := range reads {
		if !strings.HasSuffix(r, "class/infiniband_verbs/"+want[i]) {
			t.Errorf("read %d is %s, want .../%s", i, r, want[i])
		}
	}
}
