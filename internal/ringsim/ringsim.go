// Package ringsim runs the `dfs ring` line protocol: commands on one stream
// build a ring with dfs's placement rules (package ring) and ask where keys
// land, one answer line per query, so operators and scripts can see a
// placement before a cluster makes it.
//
// A bad line answers "ERROR <reason>" and the run goes on; only failing to
// read the commands or write the answers ends it early.
package ringsim

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/ring"
)

// Limits keep a hostile or mistaken script from exhausting memory or running
// for hours; each is reported in the ERROR answer that enforces it.
const (
	// MaxVNodes bounds VNODES.
	MaxVNodes = 10000
	// MaxPoints bounds nodes × points per node (about 24 MB of ring).
	MaxPoints = 1_000_000
	// MaxSpreadKeys bounds the count of SPREAD (a few seconds of hashing).
	MaxSpreadKeys = 10_000_000
	// MaxLineBytes bounds one command line, newline excluded.
	MaxLineBytes = 64 << 10
)

type limits struct {
	vnodes, points, spread, line int
}

var defaultLimits = limits{vnodes: MaxVNodes, points: MaxPoints, spread: MaxSpreadKeys, line: MaxLineBytes}

// Run reads commands from in, one per line, and writes one line to out for
// each query and each bad line. It returns nil at the end of in, or an error
// if reading in or writing out fails.
func Run(in io.Reader, out io.Writer) error {
	return run(in, out, defaultLimits)
}

func run(in io.Reader, out io.Writer, lim limits) error {
	s := newSim(lim)
	br := bufio.NewReaderSize(in, lim.line+1)
	bw := bufio.NewWriter(out)
	for {
		line, tooLong, readErr := readLine(br, lim.line)
		var answer string
		if tooLong {
			answer = fmt.Sprintf("ERROR line longer than %d bytes", lim.line)
		} else if len(line) > 0 {
			answer = s.exec(line)
		}
		if answer != "" {
			bw.WriteString(answer)
			bw.WriteByte('\n')
		}
		// Flushing only when no more input is waiting answers an interactive
		// user at once without a write per line for a piped script.
		if readErr != nil || br.Buffered() == 0 {
			if err := bw.Flush(); err != nil {
				return errs.Wrap(errs.Unavailable, err, "write answers")
			}
		}
		if errors.Is(readErr, io.EOF) {
			return nil
		}
		if readErr != nil {
			return errs.Wrap(errs.Unavailable, readErr, "read commands")
		}
	}
}

// readLine returns the next line without its newline. A line longer than max
// is consumed whole and reported as tooLong instead of being returned.
func readLine(br *bufio.Reader, max int) (line string, tooLong bool, err error) {
	b, err := br.ReadSlice('\n')
	tooLong = len(bytesTrimNewline(b)) > max
	for errors.Is(err, bufio.ErrBufferFull) {
		tooLong = true
		_, err = br.ReadSlice('\n')
	}
	if tooLong {
		return "", true, err
	}
	return string(bytesTrimNewline(b)), false, err
}

func bytesTrimNewline(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		return b[:n-1]
	}
	return b
}

// sim is the state of one run: the wanted members (with their zones and
// weights) and points per node, and the ring built from them. Membership
// changes are batched and applied when a query needs the ring, so a script
// adding thousands of nodes rebuilds once rather than once per line.
type sim struct {
	lim     limits
	vnodes  int
	members map[string]ring.Member
	points  int // the members' points at vnodes
	r       *ring.Ring
	stale   bool
}

func newSim(lim limits) *sim {
	return &sim{lim: lim, vnodes: ring.DefaultVNodes, members: map[string]ring.Member{}, r: ring.New(ring.DefaultVNodes)}
}

// exec runs one line and returns its answer, "" for none.
func (s *sim) exec(line string) string {
	f := strings.Fields(line)
	if len(f) == 0 {
		return ""
	}
	cmd, args := asciiUpper(f[0]), f[1:]
	syntax, ok := commands[cmd]
	if !ok {
		return fmt.Sprintf("ERROR unknown command %q (want VNODES, ADD, SET, REMOVE, LOOKUP, REPLICAS or SPREAD)", f[0])
	}
	if len(args) < syntax.args || len(args) > syntax.args+syntax.options {
		return "ERROR usage: " + syntax.usage
	}
	switch cmd {
	case "VNODES":
		v, err := intArg("v", args[0], s.lim.vnodes)
		if err != "" {
			return err
		}
		total := 0
		for _, m := range s.members {
			total += ring.PointsFor(v, m.Weight)
		}
		if err := s.checkPoints(total); err != "" {
			return err
		}
		s.vnodes, s.points, s.stale = v, total, true
	case "ADD", "SET":
		old, present := s.members[args[0]]
		// The answers separate names with ',' (REPLICAS) and '=' (SPREAD).
		if !present && strings.ContainsAny(args[0], ",=") {
			return fmt.Sprintf("ERROR node name %q must not contain ',' or '='", args[0])
		}
		m := ring.Member{Node: args[0], Weight: 1}
		if present {
			m = old
		}
		if err := parseOptions(&m, args[1:]); err != "" {
			return err
		}
		if present == (cmd == "ADD") {
			return "" // adding a present node, or setting an absent one, changes nothing
		}
		total := s.points + ring.PointsFor(s.vnodes, m.Weight)
		if present {
			total -= ring.PointsFor(s.vnodes, old.Weight)
		}
		if err := s.checkPoints(total); err != "" {
			return err
		}
		s.members[m.Node], s.points, s.stale = m, total, true
	case "REMOVE":
		if m, ok := s.members[args[0]]; ok {
			delete(s.members, args[0])
			s.points -= ring.PointsFor(s.vnodes, m.Weight)
			s.stale = true
		}
	case "LOOKUP":
		if node, ok := s.ring().Lookup(args[0]); ok {
			return node
		}
		return "NONE"
	case "REPLICAS":
		n, err := intArg("n", args[1], 0)
		if err != "" {
			return err
		}
		if list := s.ring().Preference(args[0], n); list != nil {
			return strings.Join(list, ",")
		}
		return "NONE"
	case "SPREAD":
		count, err := intArg("count", args[0], s.lim.spread)
		if err != "" {
			return err
		}
		n, err := intArg("n", args[1], 0)
		if err != "" {
			return err
		}
		return spread(s.ring(), count, n)
	}
	return ""
}

// commands gives each command's number of arguments and how many
// zone=/weight= options may follow them.
var commands = map[string]struct {
	args, options int
	usage         string
}{
	"VNODES":   {1, 0, "VNODES <v>"},
	"ADD":      {1, 2, "ADD <node> [zone=<z>] [weight=<w>]"},
	"SET":      {1, 2, "SET <node> [zone=<z>] [weight=<w>]"},
	"REMOVE":   {1, 0, "REMOVE <node>"},
	"LOOKUP":   {1, 0, "LOOKUP <key>"},
	"REPLICAS": {2, 0, "REPLICAS <key> <n>"},
	"SPREAD":   {2, 0, "SPREAD <count> <n>"},
}

// MaxWeight bounds a weight, so that one node's points stay countable.
const MaxWeight = 1000

// parseOptions applies zone=<z> and weight=<w> to m, or returns an ERROR
// answer. The option names are case-insensitive like the commands; each may
// appear once.
func parseOptions(m *ring.Member, opts []string) string {
	seen := map[string]bool{}
	for _, o := range opts {
		name, value, ok := strings.Cut(o, "=")
		name = asciiUpper(name)
		if !ok || (name != "ZONE" && name != "WEIGHT") {
			return fmt.Sprintf("ERROR option %q: want zone=<z> or weight=<w>", o)
		}
		if seen[name] {
			return fmt.Sprintf("ERROR option %s given twice", strings.ToLower(name))
		}
		seen[name] = true
		switch name {
		case "ZONE":
			if value == "" {
				return "ERROR zone must not be empty"
			}
			m.Zone = value
		case "WEIGHT":
			w, err := strconv.ParseFloat(value, 64)
			if err != nil || !(w > 0) || w > MaxWeight {
				return fmt.Sprintf("ERROR weight must be a decimal > 0 and at most %d, got %q", MaxWeight, value)
			}
			m.Weight = w
		}
	}
	return ""
}

// checkPoints returns an ERROR answer if a ring of total points would exceed
// the size limit.
func (s *sim) checkPoints(total int) string {
	if total > s.lim.points {
		return fmt.Sprintf("ERROR %d ring points exceed the limit of %d", total, s.lim.points)
	}
	return ""
}

// ring returns the ring for the current membership and points per node.
func (s *sim) ring() *ring.Ring {
	if !s.stale {
		return s.r
	}
	if s.r.VNodes() != s.vnodes {
		s.r = ring.New(s.vnodes)
	}
	var gone []string
	for _, n := range s.r.Nodes() {
		if _, ok := s.members[n]; !ok {
			gone = append(gone, n)
		}
	}
	s.r, s.stale = s.r.Without(gone...).WithMembers(slices.Collect(maps.Values(s.members))...), false
	return s.r
}

// spread counts how often each node appears in the preference lists of
// length n of the keys key-0 … key-<count-1>. Every node is listed, sorted
// by name (Nodes is sorted), those never chosen with 0, so a lopsided ring
// shows.
func spread(r *ring.Ring, count, n int) string {
	nodes := r.Nodes()
	if len(nodes) == 0 {
		return "NONE"
	}
	index := make(map[string]int, len(nodes))
	for i, node := range nodes {
		index[node] = i
	}
	hits := make([]int, len(nodes))
	list := make([]string, 0, min(n, len(nodes)))
	key := []byte("key-")
	for i := 0; i < count; i++ {
		key = strconv.AppendInt(key[:4], int64(i), 10)
		list = r.AppendPreference(list[:0], string(key), n)
		for _, node := range list {
			hits[index[node]]++
		}
	}
	var b strings.Builder
	for i, node := range nodes {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", node, hits[i])
	}
	return b.String()
}

// intArg parses a positive integer no larger than max (0: no bound beyond
// int) and returns either it or an ERROR answer.
func intArg(name, s string, max int) (int, string) {
	v, err := strconv.Atoi(s)
	switch {
	case err != nil || v < 1:
		return 0, fmt.Sprintf("ERROR %s must be a positive integer, got %q", name, s)
	case max > 0 && v > max:
		return 0, fmt.Sprintf("ERROR %s must be at most %d, got %q", name, max, s)
	}
	return v, ""
}

// asciiUpper upper-cases ASCII letters only: command words are ASCII, and
// Unicode case mapping would accept lookalikes (strings.ToUpper maps "ſ",
// the long s, to "S").
func asciiUpper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	return string(b)
}
