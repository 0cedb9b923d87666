#!/bin/sh
# Records a real Soft-RoCE sysfs tree for the unit-test fixtures (busybox sh,
# run in the e2e guest by guestrun; see testdata/README.md):
#
#	go run ./e2e/cmd/guestrun -kernel all -script sysfs/testdata/capture-rxe.sh -out /tmp/rxe-capture
#
# It writes /out/sys.tar (the files grdma reads, with the kernel's symlinks;
# a file whose read fails is left out and listed in read-errors.txt with the
# error) and the output of the tools grdma is compared with.
IP=/usr/sbin/ip
RDMA=/usr/bin/rdma
T=/tmp/capture
set -x
mkdir -p $T
uname -r >/out/uname.txt

# The devices of testdata/nldev's recordings: rxe0 on veth0, rxe1 on veth1.
$IP addr add 10.9.0.1/24 dev veth0
$IP -6 addr add fd00:9::1/64 dev veth0 nodad
$IP addr add 10.9.1.1/24 dev veth1
$RDMA link add rxe0 type rxe netdev veth0
$RDMA link add rxe1 type rxe netdev veth1
sleep 2
set +x

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

for class in /sys/class/infiniband/*; do
	link $class
	d=$(realpath $class)
	for f in node_type node_guid sys_image_guid fw_ver node_desc hca_type board_id hw_rev parent; do
		[ -e $d/$f ] && attr $d/$f
	done
	link $d/device
	for p in $d/ports/*; do
		for f in state phys_state rate link_layer lid sm_lid lid_mask_count sm_sl cap_mask; do
			attr $p/$f
		done
		for f in $p/gids/* $p/gid_attrs/types/* $p/gid_attrs/ndevs/* $p/pkeys/*; do
			[ -e $f ] && attr $f
		done
		mkdir -p $T$p/gid_attrs/types $T$p/gid_attrs/ndevs $T$p/pkeys
	done
done

attr /sys/class/infiniband_verbs/abi_version
for class in /sys/class/infiniband_verbs/uverbs*; do
	link $class
	d=$(realpath $class)
	for f in ibdev abi_version dev; do
		attr $d/$f
	done
	link $d/device
done

for n in veth0 veth1 lo; do
	link /sys/class/net/$n
	d=$(realpath /sys/class/net/$n)
	for f in mtu ifindex operstate address; do
		attr $d/$f
	done
done

tar -C $T -cf /out/sys.tar sys $( [ -e $T/read-errors.txt ] && echo read-errors.txt)
ls -l /dev/infiniband/ >/out/dev-infiniband.txt 2>&1

/usr/bin/ibv_devinfo -v >/out/ibv_devinfo-v.txt 2>&1
$RDMA -j dev show >/out/rdma-dev.json 2>&1
$RDMA -j link show >/out/rdma-link.json 2>&1
for mtu in 1500 4200 9000; do
	$IP link set veth0 mtu $mtu
	sleep 1
	/usr/bin/ibv_devinfo -v >/out/ibv_devinfo-v-mtu$mtu.txt 2>&1
done
echo captured
