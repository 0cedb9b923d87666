#!/bin/sh
# loadmod NAME...: insmod each module and its dependencies, in the order
# listed in /etc/e2e/modules/NAME, skipping those already loaded.
rc=0
for m in "$@"; do
	list=/etc/e2e/modules/$m
	if [ ! -f "$list" ]; then
		echo "loadmod: $m is not in this image" >&2
		rc=1
		continue
	fi
	while read -r ko; do
		[ -n "$ko" ] || continue
		name=$(basename "$ko" .ko | tr - _)
		grep -q "^$name " /proc/modules && continue
		insmod "$ko" || {
			echo "loadmod: insmod $ko failed" >&2
			rc=1
		}
	done <"$list"
done
exit $rc
