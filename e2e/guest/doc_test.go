//go:build e2eguest

// Package guest holds the end-to-end scenarios that run inside the QEMU
// guest (see e2e/README.md): compiled on the host with
// `CGO_ENABLED=0 go test -c -tags e2eguest`, run as root in the guest, where
// they exec /bin/grdma and the reference tools (iproute2 rdma, ibv_devinfo,
// ibv_rc_pingpong) against real rdma_rxe devices.
//
// GRDMA=/path points the scenarios at another grdma, e.g.
// layout.FakeGrdmaWrongKey to see what a broken one looks like.
package guest
