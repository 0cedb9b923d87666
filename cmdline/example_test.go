package cmdline_test

import (
	"fmt"

	"github.com/grdma/grdma/cmdline"
)

// Walk "link add" words as rdma does: keywords may be abbreviated, each
// is followed by its value, and a wrong word is a usage error.
func ExampleArgs() {
	args := cmdline.NewArgs([]string{"ty", "rxe", "net", "eth0"}, "grdma link help")
	for !args.Empty() {
		kw, err := args.Keyword("parameter", "", "type", "netdev")
		if err != nil {
			fmt.Println(err)
			return
		}
		v, _ := args.Value(kw + " value")
		fmt.Println(kw, v)
	}
	_, err := cmdline.NewArgs([]string{"frob"}, "grdma link help").Keyword("parameter", "", "type", "netdev")
	fmt.Println(err)
	// Output:
	// type rxe
	// netdev eth0
	// unknown parameter "frob": expected type, netdev
}

// A line of a -batch file: quotes group words, # starts a comment.
func ExampleSplitBatchLine() {
	words, err := cmdline.SplitBatchLine(`dev set rxe0 name "rxe a"  # rename`)
	fmt.Printf("%q %v\n", words, err)
	// Output: ["dev" "set" "rxe0" "name" "rxe a"] <nil>
}

// Objects are abbreviated as rdma abbreviates them, after the options.
func ExampleResolveObject() {
	fmt.Println(cmdline.ResolveObject([]string{"-j", "-n", "blue", "st", "show"}))
	fmt.Println(cmdline.ResolveObject([]string{"s", "show"}))
	// Output:
	// [-j -n blue statistic show]
	// [system show]
}
