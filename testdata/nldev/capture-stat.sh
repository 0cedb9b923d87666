IP=/usr/sbin/ip
$IP addr add 192.168.77.1/24 dev veth0
$IP addr add 192.168.77.2/24 dev veth1
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1
sleep 1
ibv_rc_pingpong -d rxe0 -g 1 -n 50 > /tmp/srv.log 2>&1 &
sleep 1
ibv_rc_pingpong -d rxe0 -g 1 -n 50 127.0.0.1 > /tmp/cli.log 2>&1
wait
mkdir -p /out/nl /out/rdma
{ uname -r; rdma -V; } > /out/info.txt
for d in 0 1; do /bin/nlcapture -out /out/nl -dev $d -port 1; done

cd /out/rdma
rdma stat show > stat.txt; rdma -j stat show > stat.json; rdma -p stat show > stat-p.txt
rdma stat show link rxe0/1 > stat-rxe0-1.txt
rdma stat mode > stat-mode.txt; rdma stat mode supported > stat-mode-supported.txt; rdma -j stat mode supported > stat-mode-supported.json
rdma stat qp mode > stat-qp-mode.txt; rdma -j stat qp mode > stat-qp-mode.json
cat /tmp/cli.log > pingpong.txt
true
