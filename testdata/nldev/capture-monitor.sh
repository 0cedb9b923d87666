IP=/usr/sbin/ip
mkdir -p /out/nl /out/rdma
{ uname -r; rdma -V; } > /out/info.txt
rdma sys > /out/rdma/sys.txt
/bin/nlcapture -out /out/nl -monitor 5 > /tmp/cap.log 2>&1 &
rdma monitor > /out/rdma/monitor.txt 2>&1 &
/bin/grdma monitor > /out/grdma-monitor.txt 2>&1 &
/bin/grdma -j monitor --count 5 > /out/grdma-monitor.json 2>&1 &
sleep 1
rdma link add rxe0 type rxe netdev veth0
sleep 0.5
rdma dev set rxe0 name rxe_a
sleep 0.5
$IP link set veth0 name veth9
sleep 0.5
rdma link delete rxe_a
sleep 1
echo "grdma monitor exit (6.1 expects 2):"; /bin/grdma monitor; echo "exit $?"
kill %1 %2 %3 2>/dev/null
cat /tmp/cap.log
true
