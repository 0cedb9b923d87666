// Package render prints grdma's results on an output.Printer: what
// iproute2's rdma prints for the commands rdma has (dev, link, res,
// statistic, system, monitor; text and JSON, byte for byte), and grdma's
// own formats for the commands rdma lacks (port, dev info, gid, probe).
// The grdma command only parses, calls the library and calls these, so a
// Go program that calls them prints exactly what grdma prints.
//
// Functions print one record (one device, port, object or result);
// listings wrap them in Printer.StartList and EndList, as grdma does, so
// that JSON output is one array.
package render
