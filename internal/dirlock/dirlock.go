// Package dirlock keeps two processes off one data directory: a daemon takes
// an advisory lock on a file in its directory before it reads or cleans
// anything there, and holds it for its life.
//
// The lock is flock(2) on an open file, so the kernel releases it when the
// process dies however it dies (kill -9 included), and a stale lock file
// left behind is harmless: it is the open file that is locked, not the name.
package dirlock

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dfs-project/dfs/internal/errs"
)

// Name is the lock file's name inside the directory it guards.
const Name = ".lock"

// ErrHeld matches (errors.Is) Acquire's error when another holder has the
// lock.
var ErrHeld = errors.New("directory is locked")

// heldError is that error, with a message of its own.
type heldError struct{ msg string }

func (e *heldError) Error() string        { return e.msg }
func (e *heldError) Is(target error) bool { return target == ErrHeld }

// Lock is a held lock; Close releases it.
type Lock struct {
	f *os.File
}

// Acquire creates dir if it is missing and locks it without waiting. owner
// names the kind of process taking it ("coordinator", "storage node"; ""
// means "process"), for the message a second one gets: another process
// holding the lock is taken to be of the same kind, the only kind that
// locks that directory.
func Acquire(dir, owner string) (*Lock, error) {
	if owner == "" {
		owner = "process"
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, errs.Wrap(errs.Other, err, "create data directory %s", dir)
	}
	path := filepath.Join(dir, Name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, errs.Wrap(errs.Other, err, "open lock file %s", path)
	}
	if err := lock(f); err != nil {
		f.Close()
		if errors.Is(err, errWouldBlock) {
			return nil, errs.Wrap(errs.Conflict, &heldError{fmt.Sprintf(
				"data directory %s is in use: another %s%s holds its lock %s; stop it or give this one another directory",
				dir, owner, holder(path), path)}, "")
		}
		return nil, errs.Wrap(errs.Other, err, "lock %s", path)
	}
	// The holder's pid is for the operator reading the message above; the
	// lock itself is the flock, so a failure to record it is no failure.
	if f.Truncate(0) == nil {
		fmt.Fprintf(f, "%d\n", os.Getpid())
	}
	return &Lock{f: f}, nil
}

// holder reads the pid the holder recorded, as " (pid N)", or "" if it
// cannot be read.
func holder(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pid %d)", pid)
}

// Close releases the lock. The file stays: removing it would let a process
// that opened it a moment ago lock a name no longer in the directory while a
// third creates and locks a new one.
func (l *Lock) Close() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
