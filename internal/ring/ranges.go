package ring

// Range is the half-open ring interval (From, To] of key positions. When
// From >= To it wraps past the end: (From, 2^63) ∪ [0, To]; in particular
// From == To is the whole ring.
type Range struct {
	From, To int64
}

// Contains reports whether the key position pos lies in the range.
func (g Range) Contains(pos int64) bool {
	if g.From < g.To {
		return pos > g.From && pos <= g.To
	}
	return pos > g.From || pos <= g.To
}

// RangesIncluding returns the key positions whose preference list of length n
// on r contains node, as the fewest ranges, in ring order. It is nil when
// node is not on the ring or n <= 0.
//
// A coordinator uses it when a node joins: only keys in these ranges gain the
// newcomer, so only their files need a copy moved. The preference list
// depends only on the point a key belongs to, so for each of node's points j
// the keys that reach node at j are those of the points walked back from j
// until either another point of node is met (keys further back reach node
// there) or n other distinct nodes have been seen (keys further back fill
// their list before reaching j).
func (r *Ring) RangesIncluding(node string, n int) []Range {
	if n <= 0 || !r.Has(node) {
		return nil
	}
	if n >= len(r.nodes) {
		// Every list holds every node.
		return []Range{{From: r.pos[0], To: r.pos[0]}}
	}
	if r.zoned {
		return r.rangesByWalk(node, n)
	}
	var out []Range
	var seen []string
	for j, owner := range r.owner {
		if owner != node {
			continue
		}
		seen = seen[:0]
		k := j
		for {
			if k == 0 {
				k = len(r.pos)
			}
			k--
			if k == j || r.owner[k] == node {
				break
			}
			if !contains(seen, r.owner[k]) {
				seen = append(seen, r.owner[k])
				if len(seen) == n {
					break
				}
			}
		}
		// Points k+1 … j (cyclically) reach node at j: their keys are
		// (pos[k], pos[j]]. Equal ends mean nothing when the points do not
		// wrap (they all share one position) and the whole ring when they do.
		g := Range{From: r.pos[k], To: r.pos[j]}
		if g.From == g.To {
			if k < j {
				continue
			}
			return []Range{g}
		}
		out = appendRange(out, g)
	}
	return joinWrap(out)
}

// rangesByWalk is RangesIncluding for a ring with zones, where a skipped node
// can still be reached by the second walk from far back: it walks from every
// point that owns keys and keeps the arcs whose list holds node.
func (r *Ring) rangesByWalk(node string, n int) []Range {
	var out []Range
	list := make([]string, 0, n)
	for j := range r.pos {
		if j > 0 && r.pos[j] == r.pos[j-1] {
			continue // a tied point after the first owns no keys
		}
		list = r.appendZoned(list[:0], j, n)
		if !contains(list, node) {
			continue
		}
		prev := len(r.pos) - 1
		if j > 0 {
			prev = j - 1
		}
		g := Range{From: r.pos[prev], To: r.pos[j]}
		out = appendRange(out, g)
	}
	return joinWrap(out)
}

// appendRange appends g to ranges in ring order, extending the last one
// when g starts where it ends.
func appendRange(out []Range, g Range) []Range {
	if last := len(out) - 1; last >= 0 && out[last].To == g.From {
		out[last].To = g.To
		return out
	}
	return append(out, g)
}

// joinWrap merges the last range into the first when it wraps onto it.
func joinWrap(out []Range) []Range {
	if len(out) > 1 && out[len(out)-1].To == out[0].From {
		out[0].From = out[len(out)-1].From
		out = out[:len(out)-1]
	}
	return out
}
