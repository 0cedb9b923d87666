package promfile_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strings"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/promfile"
	"github.com/grdma/grdma/sysfs"
)

// Collect reads every port's state, rate and hardware counters; WriteText
// writes them for node_exporter's textfile collector (write to a temporary
// file and rename it over the .prom file, so the collector never reads
// half a file). Netlink answers here from recordings of a Debian 6.12
// kernel after RC traffic over rxe0, sysfs from a capture of the same
// guest; an exporter would pass nldev.Dial(nil) and sysfs.NewFS("/").
func ExampleCollect() {
	nl := nldev.NewClient(nlfixture.NewKernel("../testdata/nldev/6.12/stat/nl").Standard().Conn())
	defer nl.Close()
	fsys, err := sysfs.NewFS("../sysfs/testdata/rxe-6.12")
	if err != nil {
		fmt.Println(err)
		return
	}
	snap, err := promfile.Collect(nl, fsys)
	if err != nil {
		fmt.Println(err)
		return
	}
	var b bytes.Buffer
	if err := snap.WriteText(&b); err != nil {
		fmt.Println(err)
		return
	}
	// Print the lines of port rxe0/1, some counters only.
	sc := bufio.NewScanner(&b)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, `device="rxe0"`) && (!strings.Contains(line, "counter=") || strings.Contains(line, "_pkts")) {
			fmt.Println(line)
		}
	}
	// Output:
	// grdma_port_state{device="rxe0",port="1"} 4
	// grdma_port_active{device="rxe0",port="1"} 1
	// grdma_port_physical_state{device="rxe0",port="1"} 5
	// grdma_port_rate_bytes_per_second{device="rxe0",port="1"} 1.25e+09
	// grdma_port_hw_counter_total{device="rxe0",port="1",counter="sent_pkts"} 502
	// grdma_port_hw_counter_total{device="rxe0",port="1",counter="rcvd_pkts"} 502
}

// A Snapshot can also be filled by the caller, from any source.
func ExampleSnapshot_WriteText() {
	snap := &promfile.Snapshot{Ports: []promfile.Port{{
		Device: "mlx5_0", Port: 1, State: nldev.PortActive, PhysState: nldev.PhysLinkUp,
		RateBytesPerSecond: 100e9 / 8,
		Counters:           []nldev.Counter{{Name: "out_of_buffer", Value: 0}},
	}}}
	snap.WriteText(os.Stdout)
	// Output:
	// # HELP grdma_port_state Logical port state (1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER).
	// # TYPE grdma_port_state gauge
	// grdma_port_state{device="mlx5_0",port="1"} 4
	// # HELP grdma_port_active 1 when the port is ACTIVE.
	// # TYPE grdma_port_active gauge
	// grdma_port_active{device="mlx5_0",port="1"} 1
	// # HELP grdma_port_physical_state Physical port state (2 POLLING, 3 DISABLED, 5 LINK_UP, ...).
	// # TYPE grdma_port_physical_state gauge
	// grdma_port_physical_state{device="mlx5_0",port="1"} 5
	// # HELP grdma_port_rate_bytes_per_second Signalling rate of the port (sysfs ports/P/rate).
	// # TYPE grdma_port_rate_bytes_per_second gauge
	// grdma_port_rate_bytes_per_second{device="mlx5_0",port="1"} 1.25e+10
	// # HELP grdma_port_hw_counter_total Hardware counter of an RDMA port, named as its driver names it (rdma statistic show).
	// # TYPE grdma_port_hw_counter_total counter
	// grdma_port_hw_counter_total{device="mlx5_0",port="1",counter="out_of_buffer"} 0
	// # HELP grdma_export_read_errors Parts of devices and ports this export could not read (what: ports, counters, rate).
	// # TYPE grdma_export_read_errors gauge
	// grdma_export_read_errors 0
	// # HELP grdma_export_read_error 1 for each part of a device or port this export could not read.
	// # TYPE grdma_export_read_error gauge
}

// WriteChecks exports health check outcomes (grdma check --textfile).
func ExampleWriteChecks() {
	promfile.WriteChecks(os.Stdout, []promfile.CheckResult{
		{Check: "ports", Subject: "mlx5_0/1", Status: "PASS"},
		{Check: "gdr", Subject: "peer_mem", Status: "WARN"},
	}, 1700000000)
	// Output:
	// # HELP grdma_check_status Outcome of a grdma health check: 0 PASS, 1 WARN, 2 FAIL.
	// # TYPE grdma_check_status gauge
	// grdma_check_status{check="ports",subject="mlx5_0/1"} 0
	// grdma_check_status{check="gdr",subject="peer_mem"} 1
	// # HELP grdma_check_last_run_timestamp_seconds When the checks ran.
	// # TYPE grdma_check_last_run_timestamp_seconds gauge
	// grdma_check_last_run_timestamp_seconds 1700000000.000
}
