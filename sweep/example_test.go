package sweep_test

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/grdma/grdma/sweep"
	"github.com/grdma/grdma/sweep/sweeptest"
)

// Judge the records of an 8-node sweep in which node06's pairs run at a
// twentieth of the others' 98 Gb/s.
func ExampleBuild() {
	recs := sweeptest.Flat(sweeptest.Records(sweeptest.Params(8), sweeptest.SlowNode(5, 98, 2)))
	rep, err := sweep.Build(recs, sweep.DefaultCriteria)
	if err != nil {
		fmt.Println(err)
		return
	}
	bw := rep.Thresholds[0]
	fmt.Printf("bw limit %.1f Gb/s (93%% of the best %.1f), relaxed %v\n", bw.Limit, bw.Best, bw.Relaxed)
	for _, v := range rep.Verdicts {
		fmt.Println(v.Kind, v.Nodes)
	}
	fmt.Println("retest", len(rep.Confirm.Pairs()), "pairs")
	// Output:
	// bw limit 91.1 Gb/s (93% of the best 98.0), relaxed false
	// node [node06]
	// retest 7 pairs
}

// The retest a launched sweep's JSON report asks for (grdma -j sweep
// report's output), which every node then runs with Runner.Retest: node06
// again with each of its partners, one pair a round.
func ExampleReadConfirm() {
	recs := sweeptest.Flat(sweeptest.Records(sweeptest.Params(8), sweeptest.SlowNode(5, 98, 2)))
	rep, _ := sweep.Build(recs, sweep.DefaultCriteria)
	js, _ := json.Marshal(rep)
	params, retest, err := sweep.ReadConfirm(bytes.NewReader(js))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(params.Hosts), "hosts,", retest.Kind, len(retest.Rounds), "rounds, first", retest.Rounds[0])
	// Output: 8 hosts, confirm 7 rounds, first [{0 5}]
}

// A quick sweep of 6 nodes: the ring in two rounds.
func ExampleQuick() {
	for i, r := range sweep.Quick(6).Rounds {
		fmt.Println("round", i+1, r)
	}
	// Output:
	// round 1 [{0 1} {2 3} {4 5}]
	// round 2 [{2 1} {4 3} {0 5}]
}

// Slurm's node list, as srun gives it in SLURM_JOB_NODELIST.
func ExampleHosts() {
	hosts, err := sweep.Hosts([]string{"gpu-[01-03],login1:18600"})
	fmt.Println(hosts, err)
	// Output: [gpu-01 gpu-02 gpu-03 login1:18600] <nil>
}
