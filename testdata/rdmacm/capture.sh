# Records what the guest kernel answers the RDMA CM scenarios of package
# rdmacm (TestLive) into /out/recording.json, which TestReplay replays:
#
#   CGO_ENABLED=0 go test -c -o /tmp/rdmacm.test ./rdmacm
#   go run ./e2e/cmd/guestrun -kernel all -script testdata/rdmacm/capture.sh \
#       -file /tmp/rdmacm.test:/usr/local/bin/rdmacm.test -out testdata/rdmacm
set -e
loadmod rdma_ucm
/usr/sbin/ip addr add 192.168.77.1/24 dev veth0
/usr/sbin/ip addr add 192.168.78.1/24 dev veth1
/usr/bin/rdma link add rxe0 type rxe netdev veth0
uname -r >/out/uname.txt
RDMACM_LIVE_ADDR=192.168.77.1 RDMACM_LIVE_NO_RDMA=192.168.78.1 RDMACM_RECORD=/out/recording.json \
	/usr/local/bin/rdmacm.test -test.run '^TestLive$' -test.v
