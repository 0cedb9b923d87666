// Package render prints grdma's results on an output.Printer: what
// iproute2's rdma prints for the commands rdma has (dev, link, res,
// statistic, system, monitor; text and JSON, byte for byte), and grdma's
// own formats for the commands rdma lacks (port, dev info, gid, probe,
// check, sweep). The grdma command only parses, calls the library and calls
// these, so a Go program that calls them prints exactly what grdma
// prints.
//
// Most functions print one record (a device, port, object or counter
// set); a listing wraps them in Printer.StartList and EndList, as grdma
// does, so that JSON output is one array. Those that print a whole
// command's output (ProbeResult, System, GIDs, CheckSummary) or one line
// of a stream (Rates, Event, GIDChange: JSON lines) begin and end it
// themselves. Nothing here reads the kernel: the values come from
// nldev, ports, devinfo, gid, verbsprobe, health and sweep.
package render
