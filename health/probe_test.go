package health

import (
	"strings"
	"testing"
	"time"

	"github.com/grdma/grdma/verbsprobe"
	"golang.org/x/sys/unix"
)

func TestCheckProbe(t *testing.T) {
	ok := &verbsprobe.Result{Device: "rxe0", Port: 1, Driver: "rxe", GIDIndex: 1, Traffic: true,
		Steps: []verbsprobe.Step{{Name: "open", OK: true, Duration: time.Millisecond}}}
	unsupported := &verbsprobe.Result{Device: "efa_0", Port: 1, Driver: "efa", GIDIndex: -1,
		Steps: []verbsprobe.Step{{Name: "open", OK: true}}, Unsupported: "driver efa not supported by the probe"}
	failed := &verbsprobe.Result{Device: "rxe1", Port: 1, Driver: "rxe", GIDIndex: -1,
		Steps: []verbsprobe.Step{{Name: "open", OK: true}, {Name: "reg_mr", Err: &verbsprobe.StepError{Step: "reg_mr", Err: unix.ENOMEM, Cause: "RLIMIT_MEMLOCK too small"}}}}
	res := CheckProbe([]*verbsprobe.Result{ok, unsupported, failed})
	want := []struct {
		status  Status
		subject string
		msg     string
	}{
		{Pass, "rxe0/1", "SEND/WRITE/READ verified"},
		{Warn, "efa_0/1", "driver efa not supported by the probe"},
		{Fail, "rxe1/1", "reg_mr"},
	}
	if len(res) != 3 {
		t.Fatalf("%d results", len(res))
	}
	for i, w := range want {
		if res[i].Status != w.status || res[i].Subject != w.subject || !strings.Contains(res[i].Message, w.msg) {
			t.Errorf("result %d = %+v, want %v", i, res[i], w)
		}
	}
}
