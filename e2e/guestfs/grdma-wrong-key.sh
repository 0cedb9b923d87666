#!/bin/sh
# A deliberately broken grdma: rdma's output with one JSON key renamed
# (node_guid → node_gwid), to prove that the comparison catches it.
/usr/bin/rdma "$@" | sed -e 's/"node_guid":/"node_gwid":/g'
