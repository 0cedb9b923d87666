# Records resource replies and rdma's output of the same moment in the QEMU
# guest (see README.md). Run with rping, librdmacm, ibv_srq_pingpong and
# ibv_ud_pingpong copied in (-file). State while recording:
#   rxe0: an ibv_rc_pingpong pair and an rping pair (RDMA CM, 192.168.77.1
#         port 7174) that exchanged traffic and are frozen (SIGSTOP) with
#         their QPs in RTS; an rping server listening on 0.0.0.0 port 7175
#         (its per-device CM IDs are bound to no port).
#   rxe1: servers waiting for clients: ibv_rc_pingpong (RC QP in INIT),
#         ibv_srq_pingpong (an SRQ with 16 QPs), ibv_ud_pingpong (UD QP).
IP=/usr/sbin/ip
loadmod rdma_ucm
$IP addr add 192.168.77.1/24 dev veth0
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1
for i in 1 2 3 4 5 6 7 8 9 10; do
	grep -q ffff:c0a8:4d01 /sys/class/infiniband/rxe0/ports/1/gids/1 && break
	sleep 1
done
ibv_rc_pingpong -d rxe0 -g 1 -n 100000000 >/tmp/srv.log 2>&1 &
SRV=$!
sleep 1
ibv_rc_pingpong -d rxe0 -g 1 -n 100000000 127.0.0.1 >/tmp/cli.log 2>&1 &
CLI=$!
rping -s -a 192.168.77.1 -p 7174 -C 100000000 -S 64 >/tmp/rsrv.log 2>&1 &
RSRV=$!
sleep 1
rping -c -a 192.168.77.1 -p 7174 -C 100000000 -S 64 >/tmp/rcli.log 2>&1 &
RCLI=$!
rping -s -a 0.0.0.0 -p 7175 >/tmp/rwild.log 2>&1 &
RWILD=$!
ibv_rc_pingpong -d rxe1 -g 0 -p 18600 >/tmp/wait.log 2>&1 &
WAIT=$!
sleep 1
ibv_srq_pingpong -d rxe1 -g 0 -p 18601 >/tmp/srq.log 2>&1 &
SRQ=$!
sleep 1
ibv_ud_pingpong -d rxe1 -g 0 -p 18602 >/tmp/ud.log 2>&1 &
UD=$!
sleep 2
kill -STOP $SRV $CLI $RSRV $RCLI
sleep 1

mkdir -p /out/nl /out/rdma
# The names rdma reads from /proc/PID/comm (PIDs of threads, too).
for o in qp cm_id cq mr pd ctx srq; do rdma -j res show $o; done |
	grep -o '"pid":[0-9]*' | cut -d: -f2 | sort -u | while read p; do
	mkdir -p /out/root/proc/$p
	cat /proc/$p/comm > /out/root/proc/$p/comm
done
for d in 0 1; do
	/bin/nlcapture -out /out/nl -dev $d -port 1 >/dev/null
	/bin/nlcapture -res -out /out/nl -dev $d >/dev/null
done
{ uname -r; rdma -V; } > /out/info.txt

# Every rdma command line is recorded with its exit status and output
# file in commands.txt, so the tests run grdma with the same arguments.
n=0
rec() {
	n=$((n + 1))
	f=$(printf '%02d' $n)
	rdma "$@" > /out/rdma/$f.txt 2> /out/rdma/$f.err
	echo "$f $? $*" >> /out/rdma/commands.txt
}
for obj in "" qp cm_id cq mr pd ctx srq; do
	rec res show $obj
	rec -j res show $obj
	rec -dd res show $obj
	rec -j -dd res show $obj
done
rec res
rec res show rxe1
rec -j res show rxe0
rec -j -p res show qp
rec -j -p res show cq
rec -j -p res show srq
rec -j -p res show cm_id
rec res show qp link rxe0/1
rec res show qp link rxe0/-
rec res show qp link rxe1
rec -j res show qp link rxe1/1
rec res show qp lqpn 17
rec res show qp lqpn 1-17
rec res show qp link rxe0/1 lqpn 1
rec res show qp link rxe0/1 lqpn 17
rec res show qp link rxe1/1 lqpn 4242
rec res show qp type GSI
rec res show qp type ud,gsi
rec res show qp state rts,init
rec res show qp rqpn 0
rec res show qp pid $SRV
rec res show qp pdn 1
rec -j res show qp sq-psn 0
rec res show qp path-mig-state MIGRATED
rec res show cm_id link rxe0/1
rec res show cm_id link rxe0/-
rec res show cm_id link rxe1
rec res show cm_id state LISTEN
rec res show cm_id ps TCP
rec res show cm_id src-port 7174
rec res show cm_id dst-addr 192.168.77.1
rec res show cm_id src-addr 0.0.0.0
rec res show cm_id qp-type RC
rec res show cm_id lqpn 1-100
rec res show cm_id link rxe0/1 cm-idn 0
rec res show cm_id pid $RWILD
rec res show cq dev rxe1
rec res show cq cqn 0
rec res show cq cqn 1
rec res show cq users 2 ctxn 1
rec res show cq poll-ctx WORKQUEUE
rec res show cq pid $CLI
rec res show mr mrlen 4096
rec res show mr mrn 0
rec res show mr dev rxe0 pdn 2
rec res show pd users 1
rec res show pd pdn 0
rec res show pd ctxn 0
rec res show ctx ctxn 0
rec res show ctx dev rxe0 pid $SRV
rec res show srq srqn 0
rec res show srq lqpn 20-25,30
rec -j res show srq lqpn 19,21,4242
rec res show srq lqpn 4242
rec res show srq type BASIC
rec res show srq pdn 1
rec -r res show qp
rec -j -r res show cq
rec -r res show mr
rec res show qp link rxe0/2
rec res show cq dev nosuch

kill -9 $SRV $CLI $RSRV $RCLI $RWILD $WAIT $SRQ $UD
true
