// Package ring places keys on nodes with consistent hashing.
//
// The placement rules are part of dfs's external contract and must never
// change: a string's position is the first 8 bytes of its MD5 digest read
// big-endian with the sign bit cleared; virtual node i of node N sits at the
// position of "N#i"; points are ordered by (position, node); a key belongs to
// the first point at or after its position, wrapping past the end; and its
// preference list is the distinct nodes met walking clockwise from there, at
// most once around.
//
// A *Ring is an immutable snapshot. Every change (With, Without, WithVNodes)
// builds a new one and leaves the old untouched, so readers holding a snapshot
// never wait on, or see half of, a writer's change. Atomic publishes the
// current snapshot to concurrent readers.
//
// A node may also have a zone and a weight (Member). A node of weight w has
// max(1, floor(V×w+0.5)) points, and a preference list takes, on a first
// walk, only nodes of zones not taken yet, then on a second walk from the same
// point the nodes it skipped, so copies land in distinct zones wherever the
// ring has them. A node without a zone is a zone of its own, so a ring of
// zoneless weight-1 nodes places exactly as the rules above.
//
// The package knows nothing but strings and hashes and uses only the standard
// library.
package ring

import (
	"cmp"
	"crypto/md5"
	"encoding/binary"
	"math/big"
	"slices"
	"strconv"
)

// DefaultVNodes is the number of points per node when none is given.
const DefaultVNodes = 100

// keyspace is the size of the ring, 2^63, as an unsigned number so that arcs
// up to and including the whole ring can be represented.
const keyspace = uint64(1) << 63

// Position is the ring position of s: the first 8 bytes of MD5(s) big-endian,
// sign bit cleared, so the result lies in [0, 2^63).
func Position(s string) int64 {
	// Hashing from a stack buffer avoids the heap allocation of []byte(s) for
	// the short strings (UUIDs, "node#i") the ring hashes on every lookup.
	var buf [64]byte
	sum := md5.Sum(append(buf[:0], s...))
	return int64(binary.BigEndian.Uint64(sum[:8]) &^ (1 << 63))
}

// Point is one virtual node: its position and the physical node it stands for.
type Point struct {
	Pos  int64
	Node string
}

// Member is a node with its failure domain and relative size.
type Member struct {
	Node string
	// Zone is the node's failure domain (a rack, a room, an availability
	// zone), compared exactly; "" means none, a zone of its own.
	Zone string
	// Weight scales the node's points; 0 means 1. It must not be negative.
	Weight float64
}

func (m Member) weight() float64 {
	if m.Weight <= 0 {
		return 1
	}
	return m.Weight
}

// plain reports whether m has neither a zone nor a weight other than 1.
func (m Member) plain() bool { return m.Zone == "" && m.weight() == 1 }

// Ring is an immutable snapshot of a consistent-hash ring. The zero value is
// not usable; build one with New or NewWithHash.
type Ring struct {
	hash   func(string) int64
	vnodes int
	nodes  []string // distinct physical nodes, sorted
	// pos and owner are the points in ring order, kept as parallel slices so
	// the binary search of a lookup runs over a dense []int64.
	pos   []int64
	owner []string
	// attrs holds the members that have a zone or a weight other than 1;
	// nil when there are none. zoned is true when some member has a zone,
	// and only then does a walk look at zones.
	attrs map[string]Member
	zoned bool
	// domains is ZoneCount, kept for the walk of a ring with zones, which
	// stops its first pass once every zone is taken.
	domains int
}

// PointsFor returns the number of points of a node of weight w on a ring of
// vnodes points per node: max(1, floor(vnodes×w + 0.5)), worked out on the
// shortest decimal that reads back as w, so that a weight such as 0.285
// gives the points its decimal says rather than its binary neighbour's.
func PointsFor(vnodes int, w float64) int {
	if w <= 0 || w == 1 {
		return vnodes
	}
	x, ok := new(big.Rat).SetString(strconv.FormatFloat(w, 'f', -1, 64))
	if !ok {
		return vnodes
	}
	x.Mul(x, new(big.Rat).SetInt64(int64(vnodes)))
	x.Add(x, big.NewRat(1, 2))
	p := new(big.Int).Quo(x.Num(), x.Denom()) // both positive: Quo floors
	if !p.IsInt64() || p.Int64() > 1<<31 {
		return 1 << 31
	}
	return max(1, int(p.Int64()))
}

// New returns a ring with vnodes points per node (vnodes <= 0 means
// DefaultVNodes) holding the given nodes. Duplicate names count once.
func New(vnodes int, nodes ...string) *Ring {
	return NewWithHash(vnodes, nil, nodes...)
}

// NewWithHash is New with a custom position function, for tests that need
// positions they can work out by hand. A nil hash means Position.
func NewWithHash(vnodes int, hash func(string) int64, nodes ...string) *Ring {
	if vnodes <= 0 {
		vnodes = DefaultVNodes
	}
	if hash == nil {
		hash = Position
	}
	empty := &Ring{hash: hash, vnodes: vnodes}
	return empty.With(nodes...)
}

// VNodes reports the number of points per node.
func (r *Ring) VNodes() int { return r.vnodes }

// Len reports the total number of points on the ring.
func (r *Ring) Len() int { return len(r.pos) }

// Nodes returns the physical nodes, sorted by name. The slice is a copy.
func (r *Ring) Nodes() []string { return slices.Clone(r.nodes) }

// Member returns node's zone and weight (weight 1 when it has none of its
// own); ok is false when node is not on the ring.
func (r *Ring) Member(node string) (m Member, ok bool) {
	if !r.Has(node) {
		return Member{}, false
	}
	if a, found := r.attrs[node]; found {
		a.Weight = a.weight()
		return a, true
	}
	return Member{Node: node, Weight: 1}, true
}

// Members returns every node with its zone and weight, sorted by node.
func (r *Ring) Members() []Member {
	out := make([]Member, len(r.nodes))
	for i, n := range r.nodes {
		out[i], _ = r.Member(n)
	}
	return out
}

// Zone returns node's zone, "" when it has none or is not on the ring.
func (r *Ring) Zone(node string) string { return r.attrs[node].Zone }

// Zoned reports whether any node on the ring has a zone.
func (r *Ring) Zoned() bool { return r.zoned }

// Zones returns the distinct zones of the ring's nodes, sorted, with ""
// present when some node has no zone.
func (r *Ring) Zones() []string {
	zs := make([]string, 0, 4)
	for _, n := range r.nodes {
		if z := r.Zone(n); !slices.Contains(zs, z) {
			zs = append(zs, z)
		}
	}
	slices.Sort(zs)
	return zs
}

// ZoneCount returns the number of failure domains on the ring: each distinct
// zone once, and each zoneless node as one of its own.
func (r *Ring) ZoneCount() int { return r.domains }

func (r *Ring) countZones() int {
	seen := map[string]bool{}
	for _, n := range r.nodes {
		seen[r.zoneKey(n)] = true
	}
	return len(seen)
}

// PointsOf returns the number of points node has, 0 when it is not on the
// ring.
func (r *Ring) PointsOf(node string) int {
	if !r.Has(node) {
		return 0
	}
	return PointsFor(r.vnodes, r.attrs[node].weight())
}

// zoneKey is the failure domain a walk compares: the zone, or for a zoneless
// node a key no zone string can equal (zones are non-empty and a NUL byte
// leads the key).
func (r *Ring) zoneKey(node string) string {
	if z := r.attrs[node].Zone; z != "" {
		return z
	}
	return "\x00" + node
}

// Domain is node's failure domain: its zone, or for a zoneless node a key
// of its own that no zone and no other node's key equals. Two nodes share a
// domain exactly when the preference walk treats them as one zone.
func (r *Ring) Domain(node string) string { return r.zoneKey(node) }

// Has reports whether node is on the ring.
func (r *Ring) Has(node string) bool {
	_, ok := slices.BinarySearch(r.nodes, node)
	return ok
}

// Points returns every point in ring order. The slice is a copy.
func (r *Ring) Points() []Point {
	pts := make([]Point, len(r.pos))
	for i := range r.pos {
		pts[i] = Point{Pos: r.pos[i], Node: r.owner[i]}
	}
	return pts
}

// With returns a ring that also holds nodes, each without a zone and of
// weight 1. Nodes already present are ignored; if nothing is new, r itself is
// returned.
func (r *Ring) With(nodes ...string) *Ring {
	added := distinctSorted(nodes)
	added = slices.DeleteFunc(added, r.Has)
	if len(added) == 0 {
		return r
	}
	ms := make([]Member, len(added))
	for i, n := range added {
		ms[i] = Member{Node: n}
	}
	return r.add(ms)
}

// WithMembers returns a ring holding every member with the zone and weight
// given: absent ones are added, present ones whose zone or weight differs
// are changed (a weight change adds or removes that node's points only).
// If nothing changes, r itself is returned. A later member of the same name
// wins over an earlier one.
func (r *Ring) WithMembers(ms ...Member) *Ring {
	byName := make(map[string]Member, len(ms))
	for _, m := range ms {
		m.Weight = m.weight()
		byName[m.Node] = m
	}
	var changed []string
	var fresh []Member
	for _, m := range byName {
		cur, present := r.Member(m.Node)
		if present && cur == m {
			continue
		}
		if present {
			changed = append(changed, m.Node)
		}
		fresh = append(fresh, m)
	}
	if len(fresh) == 0 {
		return r
	}
	slices.SortFunc(fresh, func(a, b Member) int { return cmp.Compare(a.Node, b.Node) })
	return r.Without(changed...).add(fresh)
}

// add returns a ring that also holds ms, none of which is on r.
func (r *Ring) add(ms []Member) *Ring {
	attrs, copied := r.attrs, false
	fresh := make([]Point, 0, len(ms)*r.vnodes)
	for _, m := range ms {
		if !m.plain() {
			if !copied {
				attrs, copied = cloneMap(r.attrs), true
			}
			m.Weight = m.weight()
			attrs[m.Node] = m
		}
		for i, pts := 0, PointsFor(r.vnodes, m.weight()); i < pts; i++ {
			fresh = append(fresh, Point{Pos: r.hash(m.Node + "#" + strconv.Itoa(i)), Node: m.Node})
		}
	}
	slices.SortFunc(fresh, comparePoints)

	// Merging the sorted new points into the old ones costs O(points) and
	// hashes only the newcomers' virtual nodes.
	total := len(r.pos) + len(fresh)
	next := &Ring{
		hash:   r.hash,
		vnodes: r.vnodes,
		nodes:  slices.Clone(r.nodes),
		pos:    make([]int64, 0, total),
		owner:  make([]string, 0, total),
		attrs:  attrs,
	}
	for _, m := range ms {
		next.nodes = append(next.nodes, m.Node)
	}
	slices.Sort(next.nodes)
	next.zoned = anyZone(attrs)
	next.domains = next.countZones()
	i, j := 0, 0
	for i < len(r.pos) || j < len(fresh) {
		if j == len(fresh) || (i < len(r.pos) && comparePoints(Point{r.pos[i], r.owner[i]}, fresh[j]) <= 0) {
			next.pos = append(next.pos, r.pos[i])
			next.owner = append(next.owner, r.owner[i])
			i++
			continue
		}
		next.pos = append(next.pos, fresh[j].Pos)
		next.owner = append(next.owner, fresh[j].Node)
		j++
	}
	return next
}

// Without returns a ring that no longer holds nodes. Absent nodes are
// ignored; if none is present, r itself is returned.
func (r *Ring) Without(nodes ...string) *Ring {
	gone := distinctSorted(nodes)
	gone = slices.DeleteFunc(gone, func(n string) bool { return !r.Has(n) })
	if len(gone) == 0 {
		return r
	}
	keep := len(r.pos)
	attrs, copied := r.attrs, false
	for _, n := range gone {
		keep -= r.PointsOf(n)
		if _, ok := attrs[n]; ok {
			if !copied {
				attrs, copied = cloneMap(r.attrs), true
			}
			delete(attrs, n)
		}
	}
	if len(attrs) == 0 {
		attrs = nil
	}
	next := &Ring{
		hash:   r.hash,
		vnodes: r.vnodes,
		nodes:  make([]string, 0, len(r.nodes)-len(gone)),
		pos:    make([]int64, 0, keep),
		owner:  make([]string, 0, keep),
		attrs:  attrs,
		zoned:  anyZone(attrs),
	}
	for _, n := range r.nodes {
		if _, found := slices.BinarySearch(gone, n); !found {
			next.nodes = append(next.nodes, n)
		}
	}
	for i, n := range r.owner {
		if _, found := slices.BinarySearch(gone, n); !found {
			next.pos = append(next.pos, r.pos[i])
			next.owner = append(next.owner, n)
		}
	}
	next.domains = next.countZones()
	return next
}

// WithVNodes returns a ring with v points per node (v <= 0 means
// DefaultVNodes), every node re-placed. If v is unchanged, r is returned.
func (r *Ring) WithVNodes(v int) *Ring {
	if v <= 0 {
		v = DefaultVNodes
	}
	if v == r.vnodes {
		return r
	}
	return (&Ring{hash: r.hash, vnodes: v}).WithMembers(r.Members()...)
}

// Lookup returns the primary of key: the node of the first point at or after
// the key's position, wrapping. ok is false on an empty ring.
func (r *Ring) Lookup(key string) (node string, ok bool) {
	if len(r.pos) == 0 {
		return "", false
	}
	return r.owner[r.search(r.hash(key))], true
}

// Preference returns the preference list of key: walking clockwise from the
// key's point, at most once around, the first n distinct nodes in the order
// met. With fewer than n nodes it returns all of them; on an empty ring or for
// n <= 0 it returns nil. The order is the walk order and must not be sorted:
// it is what keeps lists stable when membership changes.
//
// On a ring with zones the first walk takes only nodes of zones not taken
// yet, and when that gives fewer than n a second walk from the same point
// appends, in walk order, the distinct nodes the first one skipped.
func (r *Ring) Preference(key string, n int) []string {
	return r.PreferenceAt(r.hash(key), n)
}

// PreferenceAt is Preference for a key already hashed to pos.
func (r *Ring) PreferenceAt(pos int64, n int) []string {
	if len(r.pos) == 0 || n <= 0 {
		return nil
	}
	return r.appendAt(make([]string, 0, min(n, len(r.nodes))), pos, n)
}

// AppendPreference appends key's preference list of length n to dst and
// returns the extended slice. Callers that reuse dst look up without
// allocating.
func (r *Ring) AppendPreference(dst []string, key string, n int) []string {
	if len(r.pos) == 0 || n <= 0 {
		return dst
	}
	return r.appendAt(dst, r.hash(key), n)
}

func (r *Ring) appendAt(dst []string, pos int64, n int) []string {
	if r.zoned {
		return r.appendZoned(dst, r.search(pos), n)
	}
	n = min(n, len(r.nodes))
	start := len(dst)
	i := r.search(pos)
	// The walk is bounded by one lap: with fewer than n distinct nodes an
	// unbounded walk would never end.
	for steps := 0; steps < len(r.pos) && len(dst)-start < n; steps++ {
		if node := r.owner[i]; !contains(dst[start:], node) {
			dst = append(dst, node)
		}
		if i++; i == len(r.pos) {
			i = 0
		}
	}
	return dst
}

// appendZoned is the two-pass walk from point i of a ring with zones.
func (r *Ring) appendZoned(dst []string, i0, n int) []string {
	n = min(n, len(r.nodes))
	start := len(dst)
	var zonesBuf [8]string
	zones := zonesBuf[:0]
	domains := r.domains
	// Pass 1 ends early once every zone is taken: no further node can join.
	for i, steps := i0, 0; steps < len(r.pos) && len(dst)-start < n && len(zones) < domains; steps++ {
		if node := r.owner[i]; !contains(dst[start:], node) {
			if z := r.zoneKey(node); !contains(zones, z) {
				dst = append(dst, node)
				zones = append(zones, z)
			}
		}
		if i++; i == len(r.pos) {
			i = 0
		}
	}
	for i, steps := i0, 0; steps < len(r.pos) && len(dst)-start < n; steps++ {
		if node := r.owner[i]; !contains(dst[start:], node) {
			dst = append(dst, node)
		}
		if i++; i == len(r.pos) {
			i = 0
		}
	}
	return dst
}

// search returns the index of the first point at or after pos, wrapping to 0
// past the last point. The ring must not be empty.
func (r *Ring) search(pos int64) int {
	lo, hi := 0, len(r.pos)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.pos[mid] < pos {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo == len(r.pos) {
		return 0
	}
	return lo
}

// Shares returns each node's share of the keyspace in percent: the sum, over
// its points, of the arc from the previous point (exclusive) to the point
// itself (inclusive), wrapping, relative to 2^63. Empty ring: an empty map.
func (r *Ring) Shares() map[string]float64 {
	arcs := make(map[string]uint64, len(r.nodes))
	for i := range r.pos {
		arcs[r.owner[i]] += r.arc(i)
	}
	shares := make(map[string]float64, len(arcs))
	for n, a := range arcs {
		shares[n] = float64(a) / float64(keyspace) * 100
	}
	return shares
}

// arc returns the number of positions whose key belongs to point i. Unsigned
// arithmetic modulo 2^64 makes the wrapping arc of point 0 come out right,
// including a lone point owning all 2^63 positions.
func (r *Ring) arc(i int) uint64 {
	if i > 0 {
		return uint64(r.pos[i]) - uint64(r.pos[i-1])
	}
	return uint64(r.pos[0]) - uint64(r.pos[len(r.pos)-1]) + keyspace
}

func comparePoints(a, b Point) int {
	if c := cmp.Compare(a.Pos, b.Pos); c != 0 {
		return c
	}
	return cmp.Compare(a.Node, b.Node)
}

func anyZone(attrs map[string]Member) bool {
	for _, m := range attrs {
		if m.Zone != "" {
			return true
		}
	}
	return false
}

func cloneMap(m map[string]Member) map[string]Member {
	out := make(map[string]Member, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// distinctSorted returns a sorted copy of names without duplicates, so bulk
// membership changes cost O(k log k) rather than a scan per name.
func distinctSorted(names []string) []string {
	out := slices.Clone(names)
	slices.Sort(out)
	return slices.Compact(out)
}

// contains is slices.Contains for the short lists the ring scans (a
// preference list, the nodes already seen on a walk); a linear scan of a few
// strings beats hashing them.
func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
