package devinfo

import (
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/ports"
)

// Kind says how a Field's value is shown.
type Kind uint8

// Field kinds. In JSON every number is a JSON number; in text Hex is
// shown 0x%x as ibv_devinfo shows it.
const (
	// Number: Num, in decimal.
	Number Kind = iota
	// Hex: Num, in hexadecimal in text.
	Hex
	// String: Str.
	String
	// Enum: Str is the name ibv_devinfo prints and Num its numeric value,
	// which it prints in parentheses: JSON "state": "PORT_ACTIVE",
	// "state_value": 4.
	Enum
	// NumberEnum: an enum whose name is a number (MTU bytes, VLs): Size
	// is that number and Num the code: JSON "active_mtu": 1024,
	// "active_mtu_value": 3.
	NumberEnum
	// Flags: Num is the flag word and Names the names ibv_devinfo lists
	// for it: JSON "device_cap_flags": 19020918,
	// "device_cap_flags_names": ["BAD_PKEY_CNTR", ...].
	Flags
)

// Field is one attribute under ibv_devinfo's name for it.
type Field struct {
	Key   string
	Kind  Kind
	Num   uint64
	Size  uint64 // NumberEnum
	Str   string
	Names []string // Flags
}

func num(key string, v uint64) Field        { return Field{Key: key, Kind: Number, Num: v} }
func hex(key string, v uint64) Field        { return Field{Key: key, Kind: Hex, Num: v} }
func str(key, v string) Field               { return Field{Key: key, Kind: String, Str: v} }
func enum(key, name string, v uint64) Field { return Field{Key: key, Kind: Enum, Str: name, Num: v} }
func flags(key string, v uint64, n []string) Field {
	return Field{Key: key, Kind: Flags, Num: v, Names: n}
}
func numEnum(key string, size, code uint64) Field {
	return Field{Key: key, Kind: NumberEnum, Size: size, Num: code}
}

// Fields returns the device's attributes in ibv_devinfo -v's order under
// its names (see the package's JSON documentation in grdma-dev(8)). Keys
// that ibv_devinfo repeats in nested sections are prefixed: tso_, rss_,
// packet_pacing_ and tm_ (tag matching). With Source SourceSysfs only the
// attributes sysfs and netlink know are there.
func (d *Device) Fields() []Field {
	transport, tv := TransportName(d.NodeType)
	fs := []Field{enum("transport", transport, tv)}
	if d.FWVer != "" {
		fs = append(fs, str("fw_ver", d.FWVer))
	}
	fs = append(fs, str("node_guid", nldev.FormatGUID(d.NodeGUID)), str("sys_image_guid", nldev.FormatGUID(d.SysImageGUID)))
	if d.Attr == nil {
		if d.BoardID != "" {
			fs = append(fs, str("board_id", d.BoardID))
		}
		return append(fs, num("phys_port_cnt", uint64(len(d.Ports))))
	}
	a, b := d.Attr, &d.Attr.Base
	fs = append(fs, hex("vendor_id", uint64(b.VendorID)), num("vendor_part_id", uint64(b.VendorPartID)), hex("hw_ver", uint64(b.HWVer)))
	if d.BoardID != "" {
		fs = append(fs, str("board_id", d.BoardID))
	}
	fs = append(fs,
		num("phys_port_cnt", uint64(b.PhysPortCnt)),
		hex("max_mr_size", b.MaxMRSize),
		hex("page_size_cap", b.PageSizeCap),
		num("max_qp", uint64(b.MaxQP)),
		num("max_qp_wr", uint64(b.MaxQPWr)),
		flags("device_cap_flags", uint64(b.DeviceCapFlags), DeviceCapFlagNames(b.DeviceCapFlags)),
		num("max_sge", uint64(b.MaxSGE)),
		num("max_sge_rd", uint64(b.MaxSGERd)),
		num("max_cq", uint64(b.MaxCQ)),
		num("max_cqe", uint64(b.MaxCQE)),
		num("max_mr", uint64(b.MaxMR)),
		num("max_pd", uint64(b.MaxPD)),
		num("max_qp_rd_atom", uint64(b.MaxQPRdAtom)),
		num("max_ee_rd_atom", uint64(b.MaxEERdAtom)),
		num("max_res_rd_atom", uint64(b.MaxResRdAtom)),
		num("max_qp_init_rd_atom", uint64(b.MaxQPInitRdAtom)),
		num("max_ee_init_rd_atom", uint64(b.MaxEEInitRdAtom)),
		enum("atomic_cap", AtomicCapName(b.AtomicCap), uint64(b.AtomicCap)),
		num("max_ee", uint64(b.MaxEE)),
		num("max_rdd", uint64(b.MaxRDD)),
		num("max_mw", uint64(b.MaxMW)),
		num("max_raw_ipv6_qp", uint64(b.MaxRawIPv6QP)),
		num("max_raw_ethy_qp", uint64(b.MaxRawEthyQP)),
		num("max_mcast_grp", uint64(b.MaxMcastGrp)),
		num("max_mcast_qp_attach", uint64(b.MaxMcastQPAttach)),
		num("max_total_mcast_qp_attach", uint64(b.MaxTotalMcastQPAttach)),
		num("max_ah", uint64(b.MaxAH)),
		num("max_fmr", uint64(b.MaxFMR)),
		num("max_map_per_fmr", uint64(b.MaxMapPerFMR)),
		num("max_srq", uint64(b.MaxSRQ)),
		num("max_srq_wr", uint64(b.MaxSRQWr)),
		num("max_srq_sge", uint64(b.MaxSRQSGE)),
		num("max_pkeys", uint64(b.MaxPKeys)),
		num("local_ca_ack_delay", uint64(b.LocalCAAckDelay)),
		flags("general_odp_caps", a.ODPCaps.GeneralCaps, ODPGeneralNames(a.ODPCaps.GeneralCaps)),
		flags("rc_odp_caps", uint64(a.ODPCaps.PerTransportCaps.RCODPCaps), ODPTransportNames(a.ODPCaps.PerTransportCaps.RCODPCaps)),
		flags("uc_odp_caps", uint64(a.ODPCaps.PerTransportCaps.UCODPCaps), ODPTransportNames(a.ODPCaps.PerTransportCaps.UCODPCaps)),
		flags("ud_odp_caps", uint64(a.ODPCaps.PerTransportCaps.UDODPCaps), ODPTransportNames(a.ODPCaps.PerTransportCaps.UDODPCaps)),
		flags("xrc_odp_caps", uint64(a.XRCODPCaps), ODPTransportNames(a.XRCODPCaps)),
		hex("completion_timestamp_mask", a.TimestampMask),
		num("hca_core_clock", a.HCACoreClock),
		flags("raw_packet_caps", uint64(a.RawPacketCaps), RawPacketCapNames(a.RawPacketCaps)),
		flags("device_cap_flags_ex", a.DeviceCapFlagsEx, DeviceCapFlagsExNames(a.DeviceCapFlagsEx)),
		num("max_tso", uint64(d.DriverAttr.MaxTSO)),
		flags("tso_supported_qp", uint64(d.DriverAttr.TSOSupportedQPTs), QPTypeNames(d.DriverAttr.TSOSupportedQPTs)),
		num("max_rwq_indirection_tables", uint64(a.RSSCaps.MaxRWQIndirectionTables)),
		num("max_rwq_indirection_table_size", uint64(a.RSSCaps.MaxRWQIndirectionTableSize)),
		hex("rx_hash_function", uint64(d.DriverAttr.RxHashFunction)),
		hex("rx_hash_fields_mask", d.DriverAttr.RxHashFieldsMask),
		flags("rss_supported_qp", uint64(a.RSSCaps.SupportedQPTs), QPTypeNames(a.RSSCaps.SupportedQPTs)),
		num("max_wq_type_rq", uint64(a.MaxWQTypeRQ)),
		num("qp_rate_limit_min", uint64(d.DriverAttr.QPRateLimitMin)),
		num("qp_rate_limit_max", uint64(d.DriverAttr.QPRateLimitMax)),
		flags("packet_pacing_supported_qp", uint64(d.DriverAttr.PacingSupportedQPTs), QPTypeNames(d.DriverAttr.PacingSupportedQPTs)),
		num("max_rndv_hdr_size", uint64(a.TMCaps.MaxRndvHdrSize)),
		num("max_num_tags", uint64(a.TMCaps.MaxNumTags)),
		num("max_ops", uint64(a.TMCaps.MaxOps)),
		num("tm_max_sge", uint64(a.TMCaps.MaxSGE)),
		flags("tm_flags", uint64(a.TMCaps.Flags), TMFlagNames(a.TMCaps.Flags)),
		num("max_cq_count", uint64(a.CQModerationCaps.MaxCQModerationCount)),
		num("max_cq_period", uint64(a.CQModerationCaps.MaxCQModerationPeriod)),
		num("max_dm_size", a.MaxDMSize),
		num("num_comp_vectors", uint64(d.NumCompVectors)),
	)
	return fs
}

// Fields returns the port's attributes in ibv_devinfo -v's order under its
// names. With Source SourceSysfs only those sysfs shows are there, and
// the MTUs when they could be derived.
func (p *Port) Fields() []Field {
	a := &p.Attr
	fs := []Field{enum("state", PortStateName(a.State), uint64(a.State))}
	if p.MTUSource != ports.MTUUnknown {
		fs = append(fs, numEnum("max_mtu", uint64(a.MaxMTU.Bytes()), uint64(a.MaxMTU)),
			numEnum("active_mtu", uint64(a.ActiveMTU.Bytes()), uint64(a.ActiveMTU)))
	}
	fs = append(fs, num("sm_lid", uint64(a.SMLID)), num("port_lid", uint64(a.LID)), hex("port_lmc", uint64(a.LMC)),
		str("link_layer", a.LinkLayer.String()))
	if p.Source == SourceVerbs {
		fs = append(fs, hex("max_msg_sz", uint64(a.MaxMsgSz)))
	}
	fs = append(fs, hex("port_cap_flags", uint64(a.PortCapFlags)))
	if p.Source == SourceVerbs {
		fs = append(fs, hex("port_cap_flags2", uint64(a.PortCapFlags2)),
			numEnum("max_vl_num", VLs(a.MaxVLNum), uint64(a.MaxVLNum)),
			hex("bad_pkey_cntr", uint64(a.BadPKeyCntr)),
			hex("qkey_viol_cntr", uint64(a.QKeyViolCntr)))
	}
	fs = append(fs, num("sm_sl", uint64(a.SMSL)))
	if p.Source == SourceVerbs {
		fs = append(fs, num("pkey_tbl_len", uint64(a.PKeyTblLen)), num("gid_tbl_len", uint64(a.GIDTblLen)),
			num("subnet_timeout", uint64(a.SubnetTimeout)), num("init_type_reply", uint64(a.InitTypeReply)))
	}
	if a.ActiveWidth != 0 {
		fs = append(fs, enum("active_width", a.ActiveWidth.String(), uint64(a.ActiveWidth)),
			enum("active_speed", SpeedName(a.ActiveSpeed), uint64(a.ActiveSpeed)))
	}
	return append(fs, enum("phys_state", PhysStateName(a.PhysState), uint64(a.PhysState)))
}
