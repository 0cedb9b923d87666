#!/bin/sh
# Records the PCI side of sysfs (and the bits of /proc topology reads) in an
# e2e guest booted with a PCIe topology, for the unit-test fixtures of
# packages pci and topo (busybox sh; see testdata/README.md):
#
#	go run ./e2e/cmd/guestrun -kernel all -topology switch -script pci/testdata/capture.sh -out /tmp/pci-switch
#
# It loads the NIC drivers (e1000e, virtio_net), puts an rxe device on every
# netdev that sits on a PCI function (rxeN on the Nth in name order; with
# NO_RXE=1 none), and writes $OUT/tree.tar: for every PCI function the
# files the readers use, with the kernel's symlinks (a file whose read
# fails is left out and listed in read-errors.txt), config space as root
# reads it, class/net and class/infiniband with what sysfs.Device and
# sysfs.Netdev read, IOMMU groups, NUMA nodes, DMI names, proc/cpuinfo and
# proc/cmdline; and $OUT/tree-unprivileged.tar, the same with config
# space as uid 65534 reads it.
#
# On a real GPU host (no guestrun; nothing is loaded or created there):
#
#	sudo NO_RXE=1 OUT=/tmp/pci-capture sh pci/testdata/capture.sh
#
# which also copies the NVIDIA driver's /proc/driver/nvidia files.
IP=/usr/sbin/ip
RDMA=/usr/bin/rdma
OUT=${OUT:-/out}
T=$(mktemp -d)
mkdir -p $T $OUT
uname -r >$OUT/uname.txt
if command -v loadmod >/dev/null; then # the e2e guest
	loadmod e1000e virtio_net
	sleep 2
fi

# grdma.wait_aer=BDF on the kernel command line: wait (up to 2 minutes)
# until the function's AER counters show an error, which the host injects
# through QEMU's monitor (pcie_aer_inject_error; testdata/README.md).
for p in $(cat /proc/cmdline); do
	case $p in grdma.wait_aer=*) WAIT_AER=${p#grdma.wait_aer=} ;; esac
done
if [ -n "$WAIT_AER" ]; then
	n=0
	until grep -q 'TOTAL_ERR_COR [1-9]' /sys/bus/pci/devices/$WAIT_AER/aer_dev_correctable 2>/dev/null || [ $n -ge 120 ]; do
		sleep 1
		n=$((n + 1))
	done
	echo "$WAIT_AER after ${n}s:" >$OUT/aer.txt
	cat /sys/bus/pci/devices/$WAIT_AER/aer_dev_correctable >>$OUT/aer.txt
	dmesg | grep -i aer >>$OUT/aer.txt
fi

i=0
for n in $(ls /sys/class/net); do
	case $(readlink /sys/class/net/$n) in
	*/devices/pci*) ;;
	*) continue ;;
	esac
	if [ -z "$NO_RXE" ]; then
		$IP link set $n up
		$RDMA link add rxe$i type rxe netdev $n && i=$((i + 1))
	fi
done
sleep 2

# attr FILE: copy one attribute file; record a failed read instead.
attr() {
	dst=$T$1
	mkdir -p "${dst%/*}"
	if ! cat "$1" >"$dst" 2>"$T/err"; then
		rm -f "$dst"
		echo "${1#/} $(cat $T/err)" >>$T/read-errors.txt
	fi
}
# link LINK: recreate one symlink.
link() {
	[ -L "$1" ] || return 0
	dst=$T$1
	mkdir -p "${dst%/*}"
	ln -s "$(readlink "$1")" "$dst"
}

for f in /sys/bus/pci/devices/*; do
	link $f
	d=$(realpath $f)
	mkdir -p $T$d
	for a in class vendor device subsystem_vendor subsystem_device revision numa_node local_cpulist \
		current_link_speed current_link_width max_link_speed max_link_width \
		secondary_bus_number subordinate_bus_number config \
		aer_dev_correctable aer_dev_fatal aer_dev_nonfatal \
		aer_rootport_total_err_cor aer_rootport_total_err_fatal aer_rootport_total_err_nonfatal; do
		[ -e $d/$a ] && attr $d/$a
	done
	link $d/driver
	link $d/iommu_group
	link $d/subsystem
	for n in $d/net/*; do
		[ -e "$n" ] && mkdir -p "$T$n"
	done
done

for class in /sys/class/net/*; do
	link $class
	d=$(realpath $class)
	for a in mtu ifindex operstate address; do
		attr $d/$a
	done
	link $d/device
	# the bus device behind it (virtio-net: virtioN below the PCI function)
	if [ -e $d/device ]; then
		b=$(realpath $d/device)
		link $b/subsystem
		link $b/driver
	fi
done

for class in /sys/class/infiniband/*; do
	[ -e "$class" ] || continue
	link $class
	d=$(realpath $class)
	for a in node_type node_guid sys_image_guid fw_ver node_desc hca_type board_id parent; do
		[ -e $d/$a ] && attr $d/$a
	done
	link $d/device
	for p in $d/ports/*; do
		for a in state phys_state rate link_layer lid sm_lid lid_mask_count sm_sl cap_mask; do
			attr $p/$a
		done
	done
done

for g in /sys/kernel/iommu_groups/*; do
	[ -e "$g" ] || continue
	attr $g/type
	for l in $g/devices/*; do link $l; done
done
for u in /sys/class/iommu/*; do link $u; done
mkdir -p $T/sys/class/iommu $T/sys/kernel/iommu_groups
for n in /sys/devices/system/node/node*; do
	attr $n/cpulist
done
for a in sys_vendor product_name; do
	[ -e /sys/class/dmi/id/$a ] && attr /sys/devices/virtual/dmi/id/$a
done
link /sys/class/dmi/id
mkdir -p $T/proc
cat /proc/cpuinfo >$T/proc/cpuinfo
cat /proc/cmdline >$T/proc/cmdline
for f in /proc/driver/nvidia/version /proc/driver/nvidia/params /proc/driver/nvidia/gpus/*/information; do
	[ -e "$f" ] && attr $f
done

tar -C $T -cf $OUT/tree.tar sys proc $( [ -e $T/read-errors.txt ] && echo read-errors.txt)

# The same tree with config space as an unprivileged reader gets it (the
# 64-byte header): tree-unprivileged.tar.
grep -q '^nobody:' /etc/passwd 2>/dev/null || echo 'nobody:x:65534:65534:nobody:/:/bin/sh' >>/etc/passwd
U=$(mktemp -d)
cp -a $T/. $U/
for f in /sys/bus/pci/devices/*; do
	d=$(realpath $f)
	[ -e $d/config ] && su nobody -s /bin/sh -c "cat $d/config" >$U$d/config
done
tar -C $U -cf $OUT/tree-unprivileged.tar sys proc
$RDMA -j dev show >$OUT/rdma-dev.json 2>&1
$RDMA -j link show >$OUT/rdma-link.json 2>&1
dmesg >$OUT/dmesg.txt
echo captured
