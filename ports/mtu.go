package ports

import "github.com/grdma/grdma/ib"

// MTUSource says where a port's MTU comes from.
type MTUSource string

// MTU sources.
const (
	// MTUFromVerbs: the uverbs QUERY_PORT command, as ibv_devinfo.
	MTUFromVerbs MTUSource = "verbs"
	// MTUDerived: computed for a RoCE port from its netdev's MTU the way
	// the kernel computes it, because the uverbs device could not be used.
	MTUDerived MTUSource = "derived"
	// MTUUnknown: neither, e.g. an InfiniBand port without uverbs access:
	// its MTU is negotiated with the neighbour and only verbs know it.
	MTUUnknown MTUSource = "unknown"
)

// Header bytes the kernel reserves when it derives a RoCE port's MTU from
// its netdev's.
const (
	// iboeOverhead is what iboe_get_mtu (include/rdma/ib_addr.h)
	// subtracts: GRH 40 + UDP 8 + BTH 12 + XRC ETH 4 + AtomicETH 28 +
	// ICRC 4.
	iboeOverhead = 96
	// rxeOverhead is RXE_MAX_HDR_LENGTH, which rxe's
	// eth_mtu_int_to_enum subtracts.
	rxeOverhead = 80
)

// DeriveRoCEActiveMTU returns the active MTU a RoCE port of driver has
// with a netdev MTU of netdevMTU bytes: the largest InfiniBand MTU that
// fits in the netdev MTU less the RoCE headers. rxe (rxe_set_mtu) reserves
// 80 bytes and never goes below 256; the hardware drivers use the core's
// iboe_get_mtu, which reserves 96 and yields no MTU below 352 bytes.
func DeriveRoCEActiveMTU(driver string, netdevMTU int) ib.MTU {
	if driver == "rxe" {
		return max(ib.LargestMTU(netdevMTU-rxeOverhead), ib.MTU256)
	}
	return ib.LargestMTU(netdevMTU - iboeOverhead)
}

// RoCEMaxMTU is the max_mtu RoCE drivers report (rxe and mlx5 both
// IB_MTU_4096): the largest MTU RoCE defines, and the most
// DeriveRoCEActiveMTU returns.
const RoCEMaxMTU = ib.MTU4096
