#!/bin/sh
# loadmod NAME...: insmod each module and its dependencies, in the order
# listed in /etc/e2e/modules/NAME, skipping those already loaded. A
# dependency that does not load (a soft dependency for hardware the guest
# lacks, such as crc32c-intel without SSE4.2) is no failure when NAME
# itself loads; its error is shown only when NAME does not.
rc=0
for m in "$@"; do
	list=/etc/e2e/modules/$m
	if [ ! -f "$list" ]; then
		echo "loadmod: $m is not in this image" >&2
		rc=1
		continue
	fi
	errs=
	while read -r ko; do
		[ -n "$ko" ] || continue
		name=$(basename "$ko" .ko | tr - _)
		grep -q "^$name " /proc/modules && continue
		err=$(insmod "$ko" 2>&1) || errs="$errs$err
loadmod: insmod $ko failed
"
	done <"$list"
	# Loaded, or built in (then its list is empty).
	if [ -s "$list" ] && [ ! -d "/sys/module/$(echo "$m" | tr - _)" ]; then
		printf '%s' "$errs" >&2
		echo "loadmod: $m did not load" >&2
		rc=1
	fi
done
exit $rc
