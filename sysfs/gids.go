package sysfs

import (
	"strconv"
)

// ZeroGID is how gids/N shows an empty (or invalid, or reserved) entry: the
// kernel prints the zero GID instead of failing, for old tools' sake.
const ZeroGID = "0000:0000:0000:0000:0000:0000:0000:0000"

// GID types as gid_attrs/types/N names them (an ABI: rdma-core expects no
// change). "IB/RoCE v1" is IB on an InfiniBand port, RoCE v1 on Ethernet.
const (
	GIDTypeIBRoCEv1 = "IB/RoCE v1"
	GIDTypeRoCEv2   = "RoCE v2"
)

// GIDAttr is one GID table slot: ports/P/gids/N with gid_attrs/types/N and
// gid_attrs/ndevs/N, as text.
type GIDAttr struct {
	Index int
	// GID is the colon form "fe80:0000:0000:0000:5054:00ff:fe12:3456";
	// ZeroGID for an empty slot.
	GID string
	// Type is GIDTypeIBRoCEv1 or GIDTypeRoCEv2; "" when the kernel has no
	// entry for the slot (EINVAL), such as a GID of another network
	// namespace.
	Type string
	// Netdev is the network device of a RoCE GID; "" for InfiniBand GIDs
	// and empty slots, for which ndevs/N fails with EINVAL.
	Netdev string
}

// GIDAttrs reads every slot of the GID table of a port, in index order.
// The attributes of an empty slot (ZeroGID) are not read: the kernel has
// none. A missing gid_attrs file counts as the kernel's EINVAL (this is how
// fixtures record it). An error for which IsGone is true means the device
// went away while being read.
func (f FS) GIDAttrs(dev string, port uint32) ([]GIDAttr, error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return nil, err
	}
	dir := portDir(dev, port)
	indexes, err := f.tableIndexes(dir + "/gids")
	if err != nil {
		return nil, err
	}
	if len(indexes) == 0 {
		// gids/ always exists, so the port or device is gone.
		if _, err := f.ReadAttr(dir + "/state"); err != nil {
			return nil, err
		}
	}
	attrs := make([]GIDAttr, len(indexes))
	r := &gidReader{fs: f, dir: dir}
	for i, index := range indexes {
		if attrs[i], err = r.read(index); err != nil {
			return nil, err
		}
	}
	return attrs, nil
}

// GIDAttr reads one slot of the GID table of a port.
func (f FS) GIDAttr(dev string, port uint32, index int) (GIDAttr, error) {
	if err := CheckName("RDMA device", dev); err != nil {
		return GIDAttr{}, err
	}
	r := &gidReader{fs: f, dir: portDir(dev, port)}
	return r.read(index)
}

// gidReader reads the slots of one port, reusing its buffers and the
// strings it has seen: a table repeats one netdev name and two type names.
type gidReader struct {
	fs         FS
	dir        string
	path       attrPath
	buf        [maxAttrSize]byte
	lastNetdev string
}

// at points the path at dir/file/index.
func (r *gidReader) at(file string, index int) *attrPath {
	r.path.reset(r.fs, r.dir)
	r.path.path = append(r.path.path, file...)
	r.path.path = strconv.AppendInt(r.path.path, int64(index), 10)
	return &r.path
}

func (r *gidReader) read(index int) (GIDAttr, error) {
	a := GIDAttr{Index: index}
	n, err := r.fs.readAttrAt(r.at("/gids/", index), r.buf[:])
	if err != nil {
		return GIDAttr{}, err
	}
	gid := trimNewline(r.buf[:n])
	if string(gid) == ZeroGID {
		a.GID = ZeroGID
		return a, nil
	}
	a.GID = string(gid)
	if a.Type, err = r.readInterned(r.at("/gid_attrs/types/", index), GIDTypeRoCEv2, GIDTypeIBRoCEv1); err != nil {
		return GIDAttr{}, err
	}
	if a.Type == "" {
		return a, nil // no entry: it has no netdev either
	}
	if a.Netdev, err = r.readInterned(r.at("/gid_attrs/ndevs/", index), r.lastNetdev); err != nil {
		return GIDAttr{}, err
	}
	r.lastNetdev = a.Netdev
	return a, nil
}

// readInterned reads an optional attribute, returning one of known instead
// of a new string when the text matches, and "" when the kernel has no entry
// (EINVAL, or a missing file in a fixture).
func (r *gidReader) readInterned(p *attrPath, known ...string) (string, error) {
	n, err := r.fs.readAttrAt(p, r.buf[:])
	if isNoEntry(err) || isNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	text := trimNewline(r.buf[:n])
	for _, k := range known {
		if string(text) == k {
			return k, nil
		}
	}
	return string(text), nil
}
