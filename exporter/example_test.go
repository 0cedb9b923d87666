package exporter_test

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"

	"github.com/grdma/grdma/exporter"
	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// A Collector reads every device and port at each scrape. Netlink answers
// here from recordings of a Debian 6.12 kernel after RC traffic over rxe0,
// sysfs from a capture of the same guest; an exporter passes
// nldev.Dial(nil) and sysfs.NewFS("/"), registers the collector
// (NewRegistry) and serves it (Handler, Serve), as `grdma exporter` does.
func Example() {
	k := nlfixture.NewKernel("../testdata/nldev/6.12/stat/nl").Standard()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	col := exporter.New(exporter.Options{
		Sysfs: fsys,
		Dial:  func() (*nldev.Client, error) { return nldev.NewClient(k.Conn()), nil },
	})
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)
	mfs, err := reg.Gather()
	if err != nil {
		fmt.Println(err)
		return
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		expfmt.MetricFamilyToText(&b, mf)
	}
	// Print the series of port rxe0/1, some counters only.
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `device="rxe0"`) && strings.Contains(line, `port="1"`) &&
			(!strings.Contains(line, "counter=") || strings.Contains(line, "_pkts")) {
			fmt.Println(line)
		}
	}
	// Output:
	// grdma_port_active{device="rxe0",port="1"} 1
	// grdma_port_active_mtu_bytes{device="rxe0",port="1"} 1024
	// grdma_port_hw_counter_total{counter="rcvd_pkts",device="rxe0",port="1"} 502
	// grdma_port_hw_counter_total{counter="sent_pkts",device="rxe0",port="1"} 502
	// grdma_port_info{device="rxe0",link_layer="Ethernet",netdev="veth0",port="1"} 1
	// grdma_port_physical_state{device="rxe0",port="1"} 5
	// grdma_port_rate_bytes_per_second{device="rxe0",port="1"} 1.25e+09
	// grdma_port_roce_v2_ipv4_gid_index{device="rxe0",port="1"} 1
	// grdma_port_roce_v2_ipv4_gid_info{device="rxe0",gid="::ffff:10.9.0.1",gid_index="1",netdev="veth0",port="1"} 1
	// grdma_port_state{device="rxe0",port="1"} 4
	// grdma_port_width_lanes{device="rxe0",port="1"} 1
}
