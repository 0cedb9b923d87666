#!/usr/bin/env python3
"""Injects correctable AER errors into a QEMU guest through its QMP socket
(QEMU's pcie_aer_inject_error), for the switch-aer capture of
testdata/README.md:

    aer-inject.py SOCKET DEVICE_ID [SECONDS]

It waits for the socket, then injects a Receiver Error (correctable status
bit 0) into the device every 3 s until SECONDS (default 150) have passed or
QEMU exits: the first ones may come before the guest's AER driver is up."""
import json, socket, sys, time

path, dev = sys.argv[1], sys.argv[2]
end = time.time() + float(sys.argv[3] if len(sys.argv) > 3 else 150)
while time.time() < end:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        break
    except OSError:
        time.sleep(0.2)
else:
    sys.exit("no QMP socket " + path)
f = s.makefile("rw")
f.readline()  # greeting


def cmd(c, **args):
    f.write(json.dumps({"execute": c, "arguments": args} if args else {"execute": c}) + "\n")
    f.flush()
    while True:
        r = json.loads(f.readline())
        if "return" in r or "error" in r:
            return r


cmd("qmp_capabilities")
while time.time() < end:
    try:
        r = cmd("human-monitor-command", **{"command-line": "pcie_aer_inject_error -c %s 0x1" % dev})
    except (OSError, ValueError):
        break  # QEMU exited
    print(time.strftime("%T"), r, flush=True)
    time.sleep(3)
