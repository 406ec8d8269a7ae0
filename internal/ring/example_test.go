package ring_test

import (
	"fmt"

	"github.com/dfs-project/dfs/internal/ring"
)

func ExampleRing_Preference() {
	r := ring.New(3, "P", "Q", "R")
	fmt.Println(r.Preference("x5", 3))
	fmt.Println(r.Preference("x5", 5)) // only three nodes exist
	grown := r.With("S")
	fmt.Println(r.Len(), grown.Len()) // r itself is unchanged
	// Output:
	// [P R Q]
	// [P R Q]
	// 9 12
}
