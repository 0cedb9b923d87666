package render_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/grdma/grdma/internal/nlfixture"
	"github.com/grdma/grdma/nldev"
	"github.com/grdma/grdma/output"
	"github.com/grdma/grdma/proc"
	"github.com/grdma/grdma/render"
	"github.com/grdma/grdma/verbsprobe"
)

// Print the QPs of rxe0/1 as `rdma res show qp link rxe0/1` does, then
// the object counts as `rdma res show` does, from the replies a 6.12
// kernel sent and the process names its /proc held; both come out byte
// for byte as rdma printed them on that kernel (testdata/nldev/res).
func Example() {
	const rec = "../testdata/nldev/res/6.12/"
	c := nldev.NewClient(nlfixture.NewKernel(rec + "nl").Standard().Res().Conn())
	defer c.Close()
	comm := proc.CommNames(os.DirFS(rec + "root"))

	sel := nldev.ResSelect{Type: nldev.ResQP, Device: "rxe0", Port: 1}
	var qps bytes.Buffer
	p := output.New(&qps, output.Options{})
	rs := render.NewResources(p, render.ResOptions{Comm: comm})
	p.StartList()
	err := c.ResList(sel, comm, func(o nldev.ResObject) error {
		rs.Object(o)
		return nil
	}, nil)
	p.EndList()
	p.Flush()
	if err != nil {
		fmt.Println(err)
		return
	}

	sums, err := c.ResSummaries()
	if err != nil {
		fmt.Println(err)
		return
	}
	var counts bytes.Buffer
	p = output.New(&counts, output.Options{})
	p.StartList()
	for i := range sums {
		render.ResSummary(p, &sums[i])
	}
	p.EndList()
	p.Flush()

	for _, out := range []struct {
		text *bytes.Buffer
		rdma string
	}{{&qps, "40.txt"}, {&counts, "01.txt"}} {
		rdma, _ := os.ReadFile(rec + "rdma/" + out.rdma)
		fmt.Println("same as rdma:", bytes.Equal(out.text.Bytes(), rdma))
		// Every field ends with a space, as in rdma; not shown here.
		fmt.Print(strings.ReplaceAll(out.text.String(), " \n", "\n"))
	}
	// Output:
	// same as rdma: true
	// link rxe0/1 lqpn 17 rqpn 18 type RC state RTS rq-psn 16008230 sq-psn 2796225 path-mig-state MIGRATED pdn 1 pid 262 comm ibv_rc_pingpong
	// link rxe0/1 lqpn 18 rqpn 17 type RC state RTS rq-psn 2796225 sq-psn 16008230 path-mig-state MIGRATED pdn 2 pid 264 comm ibv_rc_pingpong
	// link rxe0/1 lqpn 19 rqpn 20 type RC state RTS rq-psn 14038098 sq-psn 15879894 path-mig-state MIGRATED pdn 5 pid 268 comm rping
	// link rxe0/1 lqpn 20 rqpn 19 type RC state RTS rq-psn 15879894 sq-psn 14038098 path-mig-state MIGRATED pdn 6 pid 265 comm rping
	// link rxe0/1 lqpn 1 type GSI state RTS sq-psn 3 comm [ib_core]
	// same as rdma: true
	// 0: rxe0: pd 7 cq 5 qp 5 cm_id 4 mr 9 ctx 4 srq 0
	// 1: rxe1: pd 4 cq 4 qp 19 cm_id 1 mr 3 ctx 3 srq 1
}

// Print a probe's result as grdma probe does, here a result built by
// hand, shortened to four steps.
// With output.Options{JSON: true} it prints grdma -j probe's object.
func ExampleProbeResult() {
	r := &verbsprobe.Result{Device: "rxe0", Port: 1, Driver: "rxe", VerbsDevice: "uverbs0", GIDIndex: -1, QPN: 17}
	r.Steps = []verbsprobe.Step{
		{Name: verbsprobe.StepOpen, OK: true, Duration: 180 * time.Microsecond},
		{Name: verbsprobe.StepCreateQP, OK: true, Duration: 1250 * time.Microsecond, Detail: "qpn 17"},
		{Name: verbsprobe.StepQueryQP, OK: true, Duration: 40 * time.Microsecond, Detail: "RTS"},
		{Name: verbsprobe.StepClose, OK: true, Duration: 90 * time.Microsecond},
	}
	var series verbsprobe.Series
	series.Add(r)
	p := output.New(os.Stdout, output.Options{})
	render.ProbeResult(p, r, &series, 1)
	p.Flush()
	// Output:
	// probe rxe0/1 (driver rxe, uverbs0, qpn 17)
	//   [ok  ] open                180µs
	//   [ok  ] create_qp          1.25ms  qpn 17
	//   [ok  ] query_qp             40µs  RTS
	//   [ok  ] close                90µs
	// PASS: RC queue pair in RTS (1.56ms)
}
