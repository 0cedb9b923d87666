# Records configfs's RDMA CM defaults of an rxe device for the unit tests
# of package cmconfig (busybox sh, run in the e2e guest):
#
#   go run ./e2e/cmd/guestrun -kernel all -script testdata/cmconfig/capture.sh -out testdata/cmconfig
#
# It writes /out/sys/... (the configfs files of rxe0 once its directory is
# made, the port's link layer, and rdma_cm's misc device for package
# locator) and /out/tools/*.txt (what the kernel
# shows and answers around them).
IP=/usr/sbin/ip
RDMA=/usr/bin/rdma
C=/sys/kernel/config
set -x
mkdir -p /out/tools
uname -r >/out/tools/uname.txt
loadmod rdma_ucm
$IP addr add 10.9.0.1/24 dev veth0
$RDMA link add rxe0 type rxe netdev veth0
mount -t configfs none $C
set +x
ls -a $C/rdma_cm >/out/tools/rdma_cm-before.txt
mkdir $C/rdma_cm/rxe0
ls -R $C/rdma_cm >/out/tools/rdma_cm-made.txt
for f in $C/rdma_cm/rxe0/ports/1/default_roce_mode $C/rdma_cm/rxe0/ports/1/default_roce_tos \
	/sys/class/infiniband/rxe0/ports/1/link_layer /sys/class/misc/rdma_cm/dev /sys/class/misc/rdma_cm/abi_version; do
	mkdir -p /out${f%/*}
	cat $f >/out$f
done
# What the kernel answers the settings rxe cannot take and can.
{
	echo "IB/RoCE v1" >$C/rdma_cm/rxe0/ports/1/default_roce_mode && echo "v1: ok" || echo "v1: exit $?"
	echo 256 >$C/rdma_cm/rxe0/ports/1/default_roce_tos && echo "tos 256: ok" || echo "tos 256: exit $?"
	echo 0x68 >$C/rdma_cm/rxe0/ports/1/default_roce_tos && echo "tos 0x68: $(cat $C/rdma_cm/rxe0/ports/1/default_roce_tos)"
	echo 0 >$C/rdma_cm/rxe0/ports/1/default_roce_tos
	mkdir $C/rdma_cm/nosuchdev && echo "mkdir nosuchdev: ok" || echo "mkdir nosuchdev: exit $?"
} >/out/tools/writes.txt 2>&1
rmdir $C/rdma_cm/rxe0
ls -a $C/rdma_cm >/out/tools/rdma_cm-after.txt
umount $C
