package main

import (
	"context"
	"fmt"

	"github.com/grdma/grdma/grammar"
)

// probeCMInterop runs an interoperability mode of a probe over the RDMA
// CM (rping, ucmatose, fabtests). Branch cminterop replaces this file
// with the modes (see /work/board/cm-modes.md).
func (a *app) probeCMInterop(_ context.Context, req grammar.ProbeRequest) error {
	return fmt.Errorf("probe ... cm %s: this grdma has no %s mode", req.CM.Mode, req.CM.Mode)
}
