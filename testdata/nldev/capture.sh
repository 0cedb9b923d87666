IP=/usr/sbin/ip
$IP link add veth2 type veth peer name veth3
$IP link set veth2 up; $IP link set veth3 up
$IP addr add 192.168.77.1/24 dev veth0
mkdir -p /out/nl /out/rdma /out/nl-empty
/bin/nlcapture -out /out/nl-empty -only get_dump
/bin/nlcapture -out /out/nl-empty -only sys_get
rdma link add rxe0 type rxe netdev veth0
rdma link add rxe1 type rxe netdev veth1
sleep 1
{ uname -r; rdma -V; } > /out/info.txt
for d in 0 1; do /bin/nlcapture -out /out/nl -dev $d -port 1; done
/bin/nlcapture -out /out/nl -link-name rxe9 -link-netdev eth9
/bin/nlcapture -out /out/nl -link-name rxe0 -link-netdev veth2
/bin/nlcapture -out /out/nl -link-name rxe5 -link-netdev veth0
/bin/nlcapture -out /out/nl -link-name rxe6 -link-type foo -link-netdev veth2
cd /out/rdma
rdma dev > dev.txt; rdma -d dev > dev-d.txt; rdma -j dev > dev.json; rdma -j -d dev > dev-d.json
rdma -j -p dev > dev-p.json; rdma -j -p -d dev > dev-pd.json
rdma link > link.txt; rdma -d link > link-d.txt; rdma -j link > link.json; rdma -j -d link > link-d.json
rdma -j -p link > link-p.json
rdma sys > sys.txt
rdma link show rxe0/1 > link-rxe0-1.txt; rdma -j dev show rxe1 > dev-rxe1.json
true
