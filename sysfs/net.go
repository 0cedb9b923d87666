package sysfs

// Netdev is a network device as /sys/class/net/NAME shows it.
type Netdev struct {
	Name      string
	Index     int    // ifindex
	MTU       int    // mtu, bytes
	OperState string // operstate: "up", "down", "lowerlayerdown", ...
	Address   string // address: "52:54:00:12:34:56" (20 bytes for IPoIB)
}

// Netdev reads class/net/name.
func (f FS) Netdev(name string) (Netdev, error) {
	if err := CheckName("netdev", name); err != nil {
		return Netdev{}, err
	}
	dir := "class/net/" + name
	n := Netdev{Name: name}
	var err error
	if n.MTU, err = f.NetdevMTU(name); err != nil {
		return Netdev{}, err
	}
	index, err := f.readUint(dir+"/ifindex", 31)
	if err != nil {
		return Netdev{}, err
	}
	n.Index = int(index)
	if n.OperState, err = f.ReadAttr(dir + "/operstate"); err != nil {
		return Netdev{}, err
	}
	if n.Address, err = f.ReadAttr(dir + "/address"); err != nil {
		return Netdev{}, err
	}
	return n, nil
}

// NetdevMTU reads class/net/name/mtu.
func (f FS) NetdevMTU(name string) (int, error) {
	if err := CheckName("netdev", name); err != nil {
		return 0, err
	}
	mtu, err := f.readUint("class/net/"+name+"/mtu", 31)
	return int(mtu), err
}
