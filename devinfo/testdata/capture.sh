#!/bin/sh
# Records what `grdma dev info` reads, for devinfo's unit tests (busybox sh,
# run in the e2e guest by guestrun; see README.md here):
#
#	CGO_ENABLED=0 go build -o /tmp/nlcapture ./internal/cmd/nlcapture
#	CGO_ENABLED=0 go build -o /tmp/verbscapture ./internal/cmd/verbscapture
#	go run ./e2e/cmd/guestrun -kernel all -script devinfo/testdata/capture.sh -out /tmp/devinfo \
#	    -file /tmp/nlcapture:/bin/nlcapture -file /tmp/verbscapture:/bin/verbscapture
#
# State: rxe0 on veth0 (MTU 9000, an IPv4 and an IPv6 address), rxe1 on
# veth2 (down), ib_umad and rdma_ucm loaded.
IP=/usr/sbin/ip
RDMA=/usr/bin/rdma
set -x
loadmod ib_umad rdma_ucm
$IP link add veth2 type veth peer name veth3
$IP link set veth3 up
$IP link set veth0 mtu 9000
$IP addr add 10.9.0.1/24 dev veth0
$IP -6 addr add fd00:9::1/64 dev veth0 nodad
$RDMA link add rxe0 type rxe netdev veth0
$RDMA link add rxe1 type rxe netdev veth2
sleep 2
{ uname -r; $RDMA -V; } >/out/info.txt
mkdir -p /out/nl /out/verbs /out/tools
for d in 0 1; do
	/bin/nlcapture -out /out/nl -dev $d -port 1
	/bin/nlcapture -out /out/nl -dev $d -port 1 -chardev
done
/bin/verbscapture -out /out/verbs
/usr/bin/ibv_devinfo -v >/out/tools/ibv_devinfo-v.txt 2>&1
for n in veth0 veth2; do
	echo "$n $(cat /sys/class/net/$n/ifindex) $(cat /sys/class/net/$n/operstate)"
done >/out/tools/netdevs.txt
ls -l /dev/infiniband/ >/out/tools/dev-infiniband.txt 2>&1
$RDMA -j link show >/out/tools/rdma-link.json 2>&1
echo captured
