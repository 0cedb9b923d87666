package completion_test

import (
	"fmt"

	"github.com/grdma/grdma/internal/completion"
	"github.com/grdma/grdma/nldev"
)

// Complete the words after an object: verbs and keywords abbreviated as
// rdma abbreviates them, device names and DEV/PORT from the source.
func ExampleComplete() {
	src := completion.Names{Devices: func() ([]nldev.Device, error) {
		return []nldev.Device{{Name: "rxe0", NumPorts: 1}, {Name: "rxe1", NumPorts: 1}}, nil
	}}
	for _, line := range [][]string{{"link", "add", "rxe0", "type"}, {"link", "sh"}, {"stat", "qp", "set", "link"}} {
		cands, _ := completion.Complete(src, line[0], line[1:], "")
		fmt.Println(cands)
	}
	cands, known := completion.Complete(src, "res", []string{"show", "qp", "state"}, "R")
	fmt.Println(cands, known)
	// Output:
	// [rxe siw]
	// [rxe0 rxe1]
	// [rxe0/1 rxe1/1]
	// [RESET RTR RTS] true
}
