#!/bin/sh
# netbeat IFACE: every 30 s, the link's counters as a line on standard
# output ("e2e-net: IFACE rx N tx N sent N", the bed's heartbeat), and one line
# when its transmit side has stalled:
#   e2e-net: IFACE transmit stalled: …
# tx_packets counts the frames the NIC completed (virtio_net counts them
# when it reclaims what QEMU has sent); the root qdisc's "Sent … pkt"
# counts those handed to the driver. Frames handed over in each of two
# beats and none completed over both is a link that stopped sending: on a
# working link QEMU takes a frame within milliseconds, and the guest
# reclaims it on its next interrupt or, at the latest, its next transmit
# (virtio_net without tx napi leaves the last frame until then). The
# kernel's own NETDEV WATCHDOG only speaks once the ring is full, minutes
# later on a guest that sends little.
# netbeat -judge IFACE reads samples ("rx tx dropped sent" a line) on
# standard input instead, and netbeat -sample IFACE prints one: for tests.

# sample IFACE prints "rx tx dropped sent" for the link now.
sample() {
	s=/sys/class/net/$1/statistics
	sent=$(/usr/sbin/tc -s qdisc show dev "$1" 2>/dev/null | {
		root=
		while read -r a b c d rest; do
			if [ "$a" = qdisc ]; then
				root=
				[ "$d" = root ] && root=1
			elif [ "$a" = Sent ] && [ -n "$root" ]; then
				echo "$d"
				break
			fi
		done
	})
	echo "$(cat $s/rx_packets) $(cat $s/tx_packets) $(cat $s/tx_dropped) ${sent:-0}"
}

# judge IFACE turns samples into beats and says a stall once.
judge() {
	d0= d1= s0= s1= said=
	while read -r rx tx drop sent; do
		echo "e2e-net: $1 rx $rx tx $tx sent $sent"
		d2=$((tx + drop))
		if [ -n "$d0" ] && [ "$d0" = "$d1" ] && [ "$d1" = "$d2" ] && [ "$s1" -gt "$s0" ] && [ "$sent" -gt "$s1" ]; then
			if [ -z "$said" ]; then
				echo "e2e-net: $1 transmit stalled: $((sent - s0)) frames handed to the driver in 60 s, none sent (tx $tx)"
				said=1
			fi
		elif [ "$d1" != "$d2" ]; then
			said=
		fi
		d0=$d1 d1=$d2 s0=$s1 s1=$sent
	done
}

case $1 in
-judge)
	judge "$2"
	exit
	;;
-sample)
	sample "$2"
	exit
	;;
esac
while sleep 30; do
	sample "$1"
done | judge "$1"
