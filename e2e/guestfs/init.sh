#!/bin/sh
# /init of the e2e guest (busybox sh): mount the basics, load the modules,
# mount the host's 9p share, make veth0/veth1, bring up the guest's link if
# configured, run /etc/e2e/run (or the share's e2e/run), power off.
# Results go to the share: e2e/run.log (the script's output), e2e/rc.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root
mark() { echo "e2e-mark: $1 $(cut -d' ' -f1 /proc/uptime)"; }
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
mkdir -p /dev/pts /dev/shm
mark init
# No usermode helper: modules load only when asked (loadmod), so a test
# can rely on a module being absent.
echo /bin/false > /proc/sys/kernel/modprobe
loadmod $(cat /etc/e2e/boot-modules) || echo "e2e: loading modules failed"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none host /mnt/host ||
	echo "e2e: mounting the 9p share failed"
mkdir -p /mnt/host/out /mnt/host/e2e
mount -o bind /mnt/host/out /out
# iproute2's ip by full path: busybox sh prefers its own applet.
/usr/sbin/ip link set lo up
/usr/sbin/ip link add veth0 type veth peer name veth1
/usr/sbin/ip link set veth0 up
/usr/sbin/ip link set veth1 up
# On a link (see layout.LinkConfig; a fleet guest's comes on the share,
# as its script does): the NIC up with its address, the host's name, and
# rdma_ucm for the RDMA CM tools.
link=/etc/e2e/link
[ -f /mnt/host/e2e/link ] && link=/mnt/host/e2e/link
if [ -f $link ]; then
	read -r netdev addr name <$link
	loadmod $(cat /etc/e2e/link-modules) || echo "e2e: loading $(cat /etc/e2e/link-modules) failed"
	/usr/sbin/ip link set "$netdev" up || echo "e2e: $netdev missing"
	/usr/sbin/ip addr add "$addr" dev "$netdev"
	[ -n "$name" ] && hostname "$name"
	# The link's counters on the console every 30 s: of a guest the others
	# cannot reach, its console tells whether it runs and what it sends;
	# and a line when its transmit side stalls (netbeat.sh).
	/sbin/netbeat "$netdev" </dev/null >/dev/console 2>&1 &
fi
run=/etc/e2e/run
[ -f /mnt/host/e2e/run ] && run=/mnt/host/e2e/run
mark run
cd /tmp
if [ -e /etc/e2e/verbose ]; then
	set -o pipefail
	sh $run </dev/null 2>&1 | tee /mnt/host/e2e/run.log
else
	sh $run </dev/null >/mnt/host/e2e/run.log 2>&1
fi
echo $? >/mnt/host/e2e/rc
mark done
sync
poweroff -f
