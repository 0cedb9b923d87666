# Records the replies of the rdma 7.1 requests grdma added for parity
# (nlfixture.ParityRecordings), and what Debian's rdma does with the same
# command lines, in the QEMU guest (see README.md). State: rxe0 on veth0
# (192.168.77.1) with an ibv_rc_pingpong pair frozen (SIGSTOP) after
# exchanging traffic, so MRs, QPs 17 and 18 exist.
IP=/usr/sbin/ip
$IP addr add 192.168.77.1/24 dev veth0
rdma link add rxe0 type rxe netdev veth0
for i in 1 2 3 4 5 6 7 8 9 10; do
	grep -q ffff:c0a8:4d01 /sys/class/infiniband/rxe0/ports/1/gids/1 && break
	sleep 1
done
ibv_rc_pingpong -d rxe0 -g 1 -n 100000000 >/tmp/srv.log 2>&1 &
SRV=$!
sleep 1
ibv_rc_pingpong -d rxe0 -g 1 -n 100000000 127.0.0.1 >/tmp/cli.log 2>&1 &
CLI=$!
sleep 2
kill -STOP $SRV $CLI
sleep 1

mkdir -p /out/nl /out/rdma
# The names rdma reads from /proc/PID/comm, for grdma's --sysfs-root.
for p in $SRV $CLI; do
	mkdir -p /out/root/proc/$p
	cat /proc/$p/comm > /out/root/proc/$p/comm
done
/bin/nlcapture -out /out/nl -dev 0 -port 1 >/dev/null
/bin/nlcapture -res -out /out/nl -dev 0 >/dev/null
/bin/nlcapture -parity -out /out/nl -dev 0 -port 1
{ uname -r; rdma -V; } > /out/info.txt

# Every rdma command line with its exit status and output files, as in
# ../res/capture.sh.
n=0
rec() {
	n=$((n + 1))
	f=$(printf '%02d' $n)
	rdma "$@" > /out/rdma/$f.txt 2> /out/rdma/$f.err
	echo "$f $? $*" >> /out/rdma/commands.txt
}
rec stat mr
rec -j stat mr
rec stat show mr
rec stat mr mrn 0
rec stat mr mrn 4242
rec res show frmr_pools
rec dev add smi0 type smi parent rxe0
rec stat qp unbind link rxe0/1 cntn 1
rec stat qp unbind link rxe0/1 cntn 1 lqpn 17
# Abbreviations (first match in rdma's tables) and help words.
rec s
rec st
rec r
rec res show c
rec res s c link rxe0/1
rec dev s rxe0
rec l s rxe0/1
rec st m
rec st mo
rec res show qp s 0
rec res show qp t rc
rec res show cm_id d 1
rec help
rec dev help
rec link help
rec res help
rec sys help
rec sys set help
rec stat help
rec stat show help
rec stat qp help
rec stat qp show help
rec stat qp mode help
rec stat qp set help
rec stat qp bind help
rec stat qp unbind help
rec stat mode help
rec stat mode supported help
rec stat set help
rec stat unset help
rec monitor help
# Last: on rxe the kernel refuses to delete a device that is no sub-device.
rec dev delete rxe0

kill -9 $SRV $CLI
true
