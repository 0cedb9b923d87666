// Command verbscapture records what the uverbs commands of `grdma dev info`
// return for every RDMA device, in the e2e guest, for devinfo's unit-test
// fixtures (devinfo/testdata/capture.sh):
//
//	verbscapture -out DIR
//
// writes DIR/DEV/query_device_ex.bin (struct ib_uverbs_ex_query_device_resp),
// query_port_N.bin (struct ib_uverbs_query_port_resp_ex), gid_table.bin
// (struct ib_uverbs_gid_entry[]) and num_comp_vectors.txt. The Go structs
// mirror the C layouts field for field, reserved fields included, so their
// encoding is the bytes the kernel wrote.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strconv"

	"github.com/grdma/grdma/locator"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/sysfs"
	"github.com/grdma/grdma/uverbs"
)

func main() {
	out := flag.String("out", ".", "directory for the recordings")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("verbscapture: ")
	fsys, err := sysfs.NewFS("/")
	if err != nil {
		log.Fatal(err)
	}
	nl, err := nldev.Dial(nil)
	if err != nil {
		log.Fatal(err)
	}
	defer nl.Close()
	devs, err := nl.Devices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		ch, err := nl.Chardev(d.Index, "uverbs")
		if err != nil {
			log.Fatal(err)
		}
		c, err := uverbs.Open(fsys.Root(), d.Name, locator.FromNetlink(ch))
		if err != nil {
			log.Fatal(err)
		}
		dir := filepath.Join(*out, d.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			log.Fatal(err)
		}
		attr, _, err := c.QueryDeviceEx()
		if err != nil {
			log.Fatal(err)
		}
		write(dir, "query_device_ex.bin", attr)
		room := 0
		for p := uint8(1); p <= attr.Base.PhysPortCnt; p++ {
			pa, err := c.QueryPortEx(ch.DriverID, p)
			if err != nil {
				log.Fatal(err)
			}
			write(dir, fmt.Sprintf("query_port_%d.bin", p), pa)
			room += int(pa.GIDTblLen)
		}
		gids, err := c.QueryGIDTable(ch.DriverID, room)
		if err != nil {
			log.Fatal(err)
		}
		write(dir, "gid_table.bin", gids)
		if err := os.WriteFile(filepath.Join(dir, "num_comp_vectors.txt"), []byte(strconv.Itoa(c.NumCompVectors)+"\n"), 0o644); err != nil {
			log.Fatal(err)
		}
		c.Close()
		fmt.Printf("%s: recorded\n", dir)
	}
}

func write(dir, name string, v any) {
	var b bytes.Buffer
	if err := binary.Write(&b, binary.NativeEndian, v); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b.Bytes(), 0o644); err != nil {
		log.Fatal(err)
	}
}
