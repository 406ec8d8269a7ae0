package scrub

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/renameio/v2"
)

// StateFile is the state file's name in a node's data directory.
const StateFile = "scrub-state.json"

// state is what survives a restart: where the pass is and what it counted.
type state struct {
	PeriodStart time.Time `json:"periodStart"`
	// Cursor is the id of the last blob hashed in this pass ("" = none yet).
	Cursor string `json:"cursor"`
	// Complete is true once this period's pass has listed the last blob.
	Complete              bool      `json:"complete"`
	CopiesScrubbed        int64     `json:"copiesScrubbed"`
	BytesScrubbed         int64     `json:"bytesScrubbed"`
	CorruptionsFound      int64     `json:"corruptionsFound"`
	CorruptionsFoundTotal int64     `json:"corruptionsFoundTotal"`
	LastFullPassAt        time.Time `json:"lastFullPassAt"`
	// LastPass is the last complete pass, kept through the next period so
	// that its figures outlive the counters a new period resets.
	LastPass *Pass `json:"lastPass,omitempty"`
	// Unreported are findings the Reporter has not taken yet.
	Unreported []Finding `json:"unreported,omitempty"`
}

// Pass is one complete pass over the store: when it began and ended, the
// blobs and bytes it hashed and the corrupt copies it found.
type Pass struct {
	Start            time.Time `json:"start"`
	End              time.Time `json:"end"`
	Copies           int64     `json:"copies"`
	Bytes            int64     `json:"bytes"`
	CorruptionsFound int64     `json:"corruptionsFound"`
}

func (st *state) newPeriod(now time.Time) {
	*st = state{
		PeriodStart: now, LastFullPassAt: st.LastFullPassAt, LastPass: st.LastPass,
		CorruptionsFoundTotal: st.CorruptionsFoundTotal, Unreported: st.Unreported,
	}
}

// found counts a finding and keeps it for the Reporter, once per id.
func (st *state) found(f Finding) {
	st.CorruptionsFound++
	st.CorruptionsFoundTotal++
	st.Unreported = slices.DeleteFunc(st.Unreported, func(u Finding) bool { return u.ID == f.ID })
	st.Unreported = append(st.Unreported, f)
	if over := len(st.Unreported) - maxUnreported; over > 0 {
		st.Unreported = slices.Delete(st.Unreported, 0, over)
	}
}

// taken drops the findings with the given ids.
func (st *state) taken(ids []string) {
	st.Unreported = slices.DeleteFunc(st.Unreported, func(u Finding) bool { return slices.Contains(ids, u.ID) })
}

// loadState reads the state at path; a missing file is the zero state. The
// temp files of saves a crash interrupted are removed first (renameio names
// them "." + the file's name + a random suffix).
func loadState(path string) (state, error) {
	var st state
	leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+"*"))
	for _, l := range leftovers {
		_ = os.Remove(l)
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return state{}, err
	}
	return st, nil
}

// save replaces the file at path atomically: a temp file beside it, synced,
// then renamed over it, so a crash leaves the old state or the new one.
func (st state) save(path string) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return renameio.WriteFile(path, b, 0o640)
}
