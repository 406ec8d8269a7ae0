package ringsim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/ring"
	"github.com/stretchr/testify/require"
)

func runScript(t *testing.T, script string) string {
	t.Helper()
	var out strings.Builder
	require.NoError(t, Run(strings.NewReader(script), &out))
	return out.String()
}

// replicas is the REPLICAS answer worked out with the ring package directly.
func replicas(r *ring.Ring, key string, n int) string {
	return strings.Join(r.Preference(key, n), ",")
}

func TestContractTrapsWithDuplicateVNodes(t *testing.T) {
	pqr := ring.New(3, "P", "Q", "R")
	foo := pqr.Preference("foo", 5)
	require.Len(t, foo, 3, "n beyond the node count gives every node once")
	require.Len(t, slices.Compact(slices.Sorted(slices.Values(foo))), 3, "distinct")

	got := runScript(t, "VNODES 3\nADD P\nADD Q\nADD R\nREPLICAS x5 3\nREPLICAS foo 5\n")
	require.Equal(t, "P,R,Q\n"+strings.Join(foo, ",")+"\n", got)
}

func TestScripts(t *testing.T) {
	pqr100 := ring.New(100, "P", "Q", "R")
	ab := ring.New(100, "A", "B")
	for _, tc := range []struct {
		name, script, want string
	}{
		{"empty ring", "LOOKUP k\nREPLICAS k 3\nSPREAD 10 3\n", "NONE\nNONE\nNONE\n"},
		{"emptied ring", "ADD a\nREMOVE a\nLOOKUP k\nREPLICAS k 1\nSPREAD 5 1\n", "NONE\nNONE\nNONE\n"},
		{"commands are case-insensitive", "vnodes 3\nAdd P\naDD Q\nadd R\nreplicas x5 3\nLookup x5\n", "P,R,Q\nP\n"},
		{"names and keys are taken as written", "ADD p\nADD P\nREMOVE P\nLOOKUP X5\n", "p\n"},
		{"blank lines are ignored", "\n   \n\t\nADD A\n\n  LOOKUP   k  \n\n", "A\n"},
		{"CRLF line ends", "ADD A\r\nLOOKUP k\r\n\r\n", "A\n"},
		{"last line without newline", "ADD A\nLOOKUP k", "A\n"},
		{"no input", "", ""},
		{"adding a present node changes nothing", "VNODES 3\nADD P\nADD Q\nADD R\nADD P\nADD Q\nREPLICAS x5 3\n", "P,R,Q\n"},
		{"removing an absent node changes nothing", "VNODES 3\nADD P\nADD Q\nADD R\nREMOVE S\nREPLICAS x5 3\n", "P,R,Q\n"},
		{"default is 100 points", "ADD P\nADD Q\nADD R\nREPLICAS x5 3\nREPLICAS foo 2\n",
			replicas(pqr100, "x5", 3) + "\n" + replicas(pqr100, "foo", 2) + "\n"},
		{"VNODES re-places nodes already added", "ADD P\nADD Q\nVNODES 3\nADD R\nREPLICAS x5 3\n", "P,R,Q\n"},
		{"n beyond the node count", "ADD A\nADD B\nREPLICAS k 5\nREPLICAS k 2\n",
			replicas(ab, "k", 5) + "\n" + replicas(ab, "k", 2) + "\n"},
		{"spread", "VNODES 3\nADD P\nADD Q\nADD R\nSPREAD 10 2\n", "P=7 Q=5 R=8\n"},
		{"spread with n beyond the node count", "ADD b\nADD a\nSPREAD 7 3\n", "a=7 b=7\n"},
		{"errors do not stop the run", "BOGUS\nADD A\nREPLICAS k\nLOOKUP k\n",
			"ERROR unknown command \"BOGUS\" (want VNODES, ADD, SET, REMOVE, LOOKUP, REPLICAS or SPREAD)\nERROR usage: REPLICAS <key> <n>\nA\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, runScript(t, tc.script))
		})
	}
}

func TestContractZoneVectors(t *testing.T) {
	for _, tc := range []struct {
		name, script, want string
	}{
		{"the contract's check by hand", "VNODES 3\nADD P zone=z1\nADD Q zone=z2\nADD R zone=z1\nREPLICAS x5 3\nLOOKUP x5\n", "P,Q,R\nP\n"},
		{"no zones: today's list", "VNODES 3\nADD P\nADD Q\nADD R\nREPLICAS x5 3\n", "P,R,Q\n"},
		{"one zone for all: today's list", "VNODES 3\nADD P zone=a\nADD Q zone=a\nADD R zone=a\nREPLICAS x5 3\n", "P,R,Q\n"},
		{"weight 1 written out: today's list", "VNODES 3\nADD P weight=1\nADD Q weight=1.0\nADD R\nREPLICAS x5 3\n", "P,R,Q\n"},
		{"SET gives a present node a zone", "VNODES 3\nADD P\nADD Q\nADD R\nSET P zone=z1\nSET R zone=z1\nREPLICAS x5 3\n", "P,Q,R\n"},
		{"SET keeps what it does not name", "VNODES 3\nADD P zone=z1 weight=1\nADD Q zone=z2\nADD R zone=z1\nSET P weight=1\nREPLICAS x5 3\n", "P,Q,R\n"},
		{"ADD of a present node changes nothing", "VNODES 3\nADD P\nADD Q\nADD R\nADD P zone=z1\nADD R zone=z1\nREPLICAS x5 3\n", "P,R,Q\n"},
		{"SET of an absent node changes nothing", "VNODES 3\nADD P\nADD Q\nSET R zone=z1\nREPLICAS x5 3\n", "P,Q\n"},
		{"options are case-insensitive, values are not", "VNODES 3\nADD P ZONE=z1\nADD Q Zone=Z1\nADD R zone=z1\nREPLICAS x5 3\n", "P,Q,R\n"},
		{"REMOVE forgets the zone", "VNODES 3\nADD P zone=z1\nADD Q zone=z2\nADD R zone=z1\nREMOVE P\nADD P\nREPLICAS x5 3\n", "P,R,Q\n"},
		{"a weight-2 node of 1 point each other", "VNODES 1\nADD A\nADD B weight=2\nSPREAD 1 1\n", spread(ring.New(1).WithMembers(ring.Member{Node: "A"}, ring.Member{Node: "B", Weight: 2}), 1, 1) + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, runScript(t, tc.script))
		})
	}
}

func TestWeightedSpreadFollowsWeights(t *testing.T) {
	got := runScript(t, "ADD A\nADD B\nADD C weight=2\nSPREAD 100000 1\n")
	var a, b, c int
	_, err := fmt.Sscanf(got, "A=%d B=%d C=%d", &a, &b, &c)
	require.NoError(t, err, got)
	require.InEpsilon(t, 0.5, float64(c)/100000, 0.15, "C holds about half the primaries: %s", got)
	require.InEpsilon(t, 0.25, float64(a)/100000, 0.15, got)
	require.InEpsilon(t, 0.25, float64(b)/100000, 0.15, got)
	r := ring.New(100).WithMembers(ring.Member{Node: "A"}, ring.Member{Node: "B"}, ring.Member{Node: "C", Weight: 2})
	require.Equal(t, spread(r, 100000, 1)+"\n", got)
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		line, want string
	}{
		{"FOO", `ERROR unknown command "FOO" (want VNODES, ADD, SET, REMOVE, LOOKUP, REPLICAS or SPREAD)`},
		{"ſpread 1 1", `ERROR unknown command "ſpread" (want VNODES, ADD, SET, REMOVE, LOOKUP, REPLICAS or SPREAD)`},
		{"VNODES", "ERROR usage: VNODES <v>"},
		{"VNODES 1 2", "ERROR usage: VNODES <v>"},
		{"ADD", "ERROR usage: ADD <node> [zone=<z>] [weight=<w>]"},
		{"ADD a b", `ERROR option "b": want zone=<z> or weight=<w>`},
		{"ADD a zone=z weight=2 x=1", "ERROR usage: ADD <node> [zone=<z>] [weight=<w>]"},
		{"ADD a rack=r1", `ERROR option "rack=r1": want zone=<z> or weight=<w>`},
		{"ADD a zone=", "ERROR zone must not be empty"},
		{"ADD a zone=x ZONE=y", "ERROR option zone given twice"},
		{"ADD a weight=0", `ERROR weight must be a decimal > 0 and at most 1000, got "0"`},
		{"ADD a weight=-1", `ERROR weight must be a decimal > 0 and at most 1000, got "-1"`},
		{"ADD a weight=NaN", `ERROR weight must be a decimal > 0 and at most 1000, got "NaN"`},
		{"ADD a weight=Inf", `ERROR weight must be a decimal > 0 and at most 1000, got "Inf"`},
		{"ADD a weight=1001", `ERROR weight must be a decimal > 0 and at most 1000, got "1001"`},
		{"ADD a weight=two", `ERROR weight must be a decimal > 0 and at most 1000, got "two"`},
		{"SET", "ERROR usage: SET <node> [zone=<z>] [weight=<w>]"},
		{"SET A weight=0", `ERROR weight must be a decimal > 0 and at most 1000, got "0"`},
		{"REMOVE", "ERROR usage: REMOVE <node>"},
		{"LOOKUP", "ERROR usage: LOOKUP <key>"},
		{"LOOKUP a b", "ERROR usage: LOOKUP <key>"},
		{"REPLICAS k", "ERROR usage: REPLICAS <key> <n>"},
		{"REPLICAS k 1 2", "ERROR usage: REPLICAS <key> <n>"},
		{"SPREAD 10", "ERROR usage: SPREAD <count> <n>"},
		{"VNODES 0", `ERROR v must be a positive integer, got "0"`},
		{"VNODES -5", `ERROR v must be a positive integer, got "-5"`},
		{"VNODES abc", `ERROR v must be a positive integer, got "abc"`},
		{"VNODES 1.5", `ERROR v must be a positive integer, got "1.5"`},
		{"VNODES 10001", `ERROR v must be at most 10000, got "10001"`},
		{"REPLICAS k 0", `ERROR n must be a positive integer, got "0"`},
		{"REPLICAS k -1", `ERROR n must be a positive integer, got "-1"`},
		{"REPLICAS k three", `ERROR n must be a positive integer, got "three"`},
		{"REPLICAS k 99999999999999999999", `ERROR n must be a positive integer, got "99999999999999999999"`},
		{"SPREAD 0 3", `ERROR count must be a positive integer, got "0"`},
		{"SPREAD x 3", `ERROR count must be a positive integer, got "x"`},
		{"SPREAD 10000001 3", `ERROR count must be at most 10000000, got "10000001"`},
		{"SPREAD 10 0", `ERROR n must be a positive integer, got "0"`},
		{"ADD a,b", `ERROR node name "a,b" must not contain ',' or '='`},
		{"ADD a=1", `ERROR node name "a=1" must not contain ',' or '='`},
	} {
		t.Run(tc.line, func(t *testing.T) {
			// Each error leaves the ring as it was: A alone, 100 points.
			got := runScript(t, "ADD A\n"+tc.line+"\nREPLICAS k 9\nSPREAD 3 1\n")
			require.Equal(t, tc.want+"\nA\nA=3\n", got)
		})
	}
}

func TestHugeNIsClampedNotAllocated(t *testing.T) {
	require.Equal(t, "A\n", runScript(t, "ADD A\nREPLICAS k 9223372036854775807\n"))
}

func TestSpreadMatchesPreferenceLists(t *testing.T) {
	r := ring.New(7, "n1", "n2", "n3", "n4", "n5")
	hits := map[string]int{}
	for i := 0; i < 500; i++ {
		for _, n := range r.Preference(fmt.Sprintf("key-%d", i), 3) {
			hits[n]++
		}
	}
	want := fmt.Sprintf("n1=%d n2=%d n3=%d n4=%d n5=%d\n", hits["n1"], hits["n2"], hits["n3"], hits["n4"], hits["n5"])
	require.Equal(t, want, runScript(t, "VNODES 7\nADD n5\nADD n3\nADD n1\nADD n4\nADD n2\nSPREAD 500 3\n"))
}

func TestSpreadListsNodesNeverChosen(t *testing.T) {
	// One point each and one key: a single node can be its primary.
	r := ring.New(1, "a", "b", "c", "d")
	primary, _ := r.Lookup("key-0")
	var want []string
	for _, n := range r.Nodes() {
		want = append(want, fmt.Sprintf("%s=%d", n, map[bool]int{true: 1}[n == primary]))
	}
	require.Equal(t, strings.Join(want, " ")+"\n", runScript(t, "VNODES 1\nADD d\nADD c\nADD b\nADD a\nSPREAD 1 1\n"))
}

func TestVNodesChangesPlacement(t *testing.T) {
	got := runScript(t, "ADD P\nADD Q\nADD R\nSPREAD 1000 1\nVNODES 3\nSPREAD 1000 1\nVNODES 100\nSPREAD 1000 1\n")
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	require.Len(t, lines, 3)
	require.NotEqual(t, lines[0], lines[1], "3 points per node place keys differently from 100")
	require.Equal(t, lines[0], lines[2], "back to 100 points is back to the same placement")
	hits := map[string]int{}
	r3 := ring.New(3, "P", "Q", "R")
	for i := 0; i < 1000; i++ {
		primary, _ := r3.Lookup(fmt.Sprintf("key-%d", i))
		hits[primary]++
	}
	require.Equal(t, fmt.Sprintf("P=%d Q=%d R=%d", hits["P"], hits["Q"], hits["R"]), lines[1])
}

func TestLineLength(t *testing.T) {
	key := strings.Repeat("k", MaxLineBytes-len("LOOKUP "))
	fits := "LOOKUP " + key
	tooLong := fits + "k"
	want := ring.New(100, "A")
	primary, _ := want.Lookup(key)
	got := runScript(t, "ADD A\n"+fits+"\n"+tooLong+"\n"+strings.Repeat(" ", 3*MaxLineBytes)+"\nLOOKUP k\n"+tooLong)
	require.Equal(t, primary+"\nERROR line longer than 65536 bytes\nERROR line longer than 65536 bytes\nA\nERROR line longer than 65536 bytes\n", got)

	// A caller's own larger bufio.Reader is reused by bufio.NewReaderSize;
	// the limit must hold all the same.
	var out strings.Builder
	big := bufio.NewReaderSize(strings.NewReader("ADD A\n"+tooLong+"\n"), 4*MaxLineBytes)
	require.NoError(t, Run(big, &out))
	require.Equal(t, "ERROR line longer than 65536 bytes\n", out.String())
}

func TestPointLimit(t *testing.T) {
	lim := limits{vnodes: 10, points: 20, spread: 10, line: 100}
	var out strings.Builder
	script := "VNODES 10\nADD a\nADD b\nADD c\nVNODES 11\nREMOVE b\nADD c\nVNODES 5\nADD d\nADD e\nSPREAD 10 1\nADD f\nSPREAD 11 1\n"
	require.NoError(t, run(strings.NewReader(script), &out, lim))
	require.Equal(t, strings.Join([]string{
		"ERROR 30 ring points exceed the limit of 20",
		"ERROR v must be at most 10, got \"11\"",
		// b went, so c fits; 5 points make room for d and e.
		strings.TrimSpace(runScript(t, "VNODES 5\nADD a\nADD c\nADD d\nADD e\nSPREAD 10 1\n")),
		"ERROR 25 ring points exceed the limit of 20",
		"ERROR count must be at most 10, got \"11\"",
	}, "\n")+"\n", out.String())

	// Weights count their points: a weight-2 node needs two nodes' room.
	out.Reset()
	require.NoError(t, run(strings.NewReader("VNODES 10\nADD a weight=2\nADD b\nADD b weight=0.5\nSET a weight=1\nADD b weight=0.5\nSET b weight=1.5\nSPREAD 4 1\n"), &out, lim))
	require.Equal(t, "ERROR 30 ring points exceed the limit of 20\nERROR 25 ring points exceed the limit of 20\nERROR 25 ring points exceed the limit of 20\n"+
		strings.TrimSpace(runScript(t, "VNODES 10\nADD a\nADD b weight=0.5\nSPREAD 4 1\n"))+"\n", out.String())

	// The real bound: 100 nodes of 10000 points fit, a 101st does not.
	var script2 strings.Builder
	script2.WriteString("VNODES 10000\n")
	for i := 0; i <= 100; i++ {
		fmt.Fprintf(&script2, "ADD n%d\n", i)
	}
	require.Equal(t, "ERROR 1010000 ring points exceed the limit of 1000000\n", runScript(t, script2.String()))
}

type failingReader struct{ data *strings.Reader }

func (r failingReader) Read(p []byte) (int, error) {
	if r.data.Len() == 0 {
		return 0, errors.New("disk on fire")
	}
	return r.data.Read(p)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("pipe closed") }

func TestIOErrorsEndTheRun(t *testing.T) {
	var out strings.Builder
	err := Run(failingReader{strings.NewReader("ADD A\nLOOKUP k\n")}, &out)
	require.ErrorContains(t, err, "disk on fire")
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
	require.Equal(t, "A\n", out.String(), "answers before the failure are delivered")

	err = Run(strings.NewReader("ADD A\nLOOKUP k\n"), failingWriter{})
	require.ErrorContains(t, err, "pipe closed")
	require.Equal(t, errs.Unavailable, errs.KindOf(err))
}

func TestAnswersFlushBeforeTheNextLineArrives(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Run(inR, outW)
		outW.Close()
	}()
	answers := bufio.NewReader(outR)
	readAnswer := func() string {
		got := make(chan string, 1)
		go func() {
			line, _ := answers.ReadString('\n')
			got <- line
		}()
		select {
		case line := <-got:
			return line
		case <-time.After(10 * time.Second): // a deadlock guard, not a speed check
			t.Fatal("no answer while the input stays open: output is not flushed")
			return ""
		}
	}
	_, err := io.WriteString(inW, "ADD A\nLOOKUP k\n")
	require.NoError(t, err)
	require.Equal(t, "A\n", readAnswer())
	_, err = io.WriteString(inW, "REPLICAS k 0\n")
	require.NoError(t, err)
	require.Equal(t, "ERROR n must be a positive integer, got \"0\"\n", readAnswer())
	require.NoError(t, inW.Close())
	require.NoError(t, <-done)
}
