IP=/usr/sbin/ip
$IP addr add 192.168.77.1/24 dev veth0
rdma link add rxe0 type rxe netdev veth0
sleep 1
mkdir -p /out/nl /out/rdma
ibv_rc_pingpong -d rxe0 -g 1 -n 1000000 > /dev/null 2>&1 &
sleep 2
rdma stat qp set link rxe0/1 auto type on > /out/rdma/qp-set-auto.txt 2>&1; echo "exit $?" >> /out/rdma/qp-set-auto.txt
qpn=$(rdma -j res show qp link rxe0/1 type RC | tr ',' '\n' | grep lqpn | head -1 | cut -d: -f2)
rdma stat qp bind link rxe0/1 lqpn $qpn > /out/rdma/qp-bind.txt 2>&1; echo "exit $? (lqpn $qpn)" >> /out/rdma/qp-bind.txt
/bin/nlcapture -out /out/nl -dev 0 -port 1 -only stat_qp_dump_dev0_port1
rdma stat qp show > /out/rdma/stat-qp-show.txt 2>&1; echo "exit $?" >> /out/rdma/stat-qp-show.txt
rdma -j stat qp show > /out/rdma/stat-qp-show.json 2>&1
/bin/grdma stat qp show > /out/grdma-stat-qp-show.txt 2>&1; echo "exit $?" >> /out/grdma-stat-qp-show.txt
/bin/grdma stat qp set link rxe0/1 auto type on > /out/grdma-qp-set.txt 2>&1; echo "exit $?" >> /out/grdma-qp-set.txt
/bin/grdma stat qp bind link rxe0/1 lqpn $qpn > /out/grdma-qp-bind.txt 2>&1; echo "exit $?" >> /out/grdma-qp-bind.txt
kill %1
true
