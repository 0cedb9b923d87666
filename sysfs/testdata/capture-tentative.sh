#!/bin/sh
# Records an rxe device whose only GID is a tentative IPv6 link-local
# address (duplicate address detection still running), for the GID
# selector's and the probe's unit tests (busybox sh, run in the e2e guest
# by guestrun; see testdata/README.md):
#
#	go run ./e2e/cmd/guestrun -kernel 6.12 -script sysfs/testdata/capture-tentative.sh -out /tmp/tentative
#
# /proc/net/if_inet6 is read right after `rdma link add`, then the GID
# table; /out/if_inet6-after.txt is the same file once DAD has finished.
IP=/usr/sbin/ip
RDMA=/usr/bin/rdma
T=/tmp/capture
mkdir -p $T/proc/net
uname -r >/out/uname.txt

$IP link add vt0 type veth peer name vp0
$IP link set vp0 up
$IP link set vt0 up
$RDMA link add rxe9 type rxe netdev vt0
cat /proc/net/if_inet6 >$T/proc/net/if_inet6

# attr FILE: copy one attribute file; a failed read (EINVAL for an empty
# slot's type and netdev) leaves no file, as in the other trees.
attr() {
	dst=$T$1
	mkdir -p "${dst%/*}"
	cat "$1" >"$dst" 2>/dev/null || rm -f "$dst"
}
link() {
	dst=$T$1
	mkdir -p "${dst%/*}"
	ln -s "$(readlink "$1")" "$dst"
}
link /sys/class/infiniband/rxe9
d=$(realpath /sys/class/infiniband/rxe9)
for f in node_type node_guid sys_image_guid fw_ver node_desc parent; do
	attr $d/$f
done
p=$d/ports/1
for f in state phys_state rate link_layer lid sm_lid lid_mask_count sm_sl cap_mask; do
	attr $p/$f
done
# The table's first 8 slots (rxe has 1024; a tentative link-local GID is at 0).
for i in 0 1 2 3 4 5 6 7; do
	attr $p/gids/$i
	attr $p/gid_attrs/types/$i
	attr $p/gid_attrs/ndevs/$i
done
mkdir -p $T$p/gid_attrs/types $T$p/gid_attrs/ndevs
link /sys/class/net/vt0
n=$(realpath /sys/class/net/vt0)
for f in mtu ifindex operstate address; do
	attr $n/$f
done
tar -C $T -cf /out/tree.tar sys proc

# Wait (at most 10 s) until no address of vt0 has IFA_F_TENTATIVE (0x40).
i=0
while [ $i -lt 100 ]; do
	f=$(awk '$6 == "vt0" { print $5 }' /proc/net/if_inet6 | head -1)
	[ -n "$f" ] && [ $((0x$f & 0x40)) -eq 0 ] && break
	i=$((i+1))
	sleep 0.1
done
cat /proc/net/if_inet6 >/out/if_inet6-after.txt
