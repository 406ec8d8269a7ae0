// Package errs gives dfs errors a kind, so that the layer that answers a caller
// (the HTTP edge, the CLI) can choose a status without parsing messages.
//
// An error is built with E(kind, message) or Wrap(kind, cause, message); KindOf
// walks the chain and reports the first kind it finds. The mapping from kind to
// HTTP status lives in one place, the api package.
package errs

import (
	"errors"
	"fmt"
)

// Kind classifies an error by what the caller can do about it.
type Kind int

// The kinds. Add new ones at the end; never renumber.
const (
	Other         Kind = iota // an unexpected failure: a bug or an unclassified cause
	Invalid                   // the request is malformed or out of bounds
	NotFound                  // the thing asked for does not exist (or is not visible)
	Conflict                  // the request contradicts the current state
	Unavailable               // a dependency is down; retrying later may succeed
	TooLarge                  // the payload exceeds a configured limit
	Unauthorized              // missing or wrong credentials
	NoSpace                   // the storage device is full
	Corrupt                   // stored bytes do not match their checksum
	Unsatisfiable             // a Range header that no byte of the blob satisfies
)

var kindNames = [...]string{"other", "invalid", "not found", "conflict", "unavailable", "too large", "unauthorized", "no space", "corrupt", "unsatisfiable"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Error is an error with a kind, an optional stable code for API answers and an
// optional wrapped cause.
type Error struct {
	Kind Kind
	// Code overrides the default API error code of the kind (for example
	// NO_HEALTHY_NODES instead of STORAGE_UNAVAILABLE). Empty means the default.
	Code string
	Msg  string
	Err  error
}

func (e *Error) Error() string {
	switch {
	case e.Msg == "" && e.Err == nil:
		return e.Kind.String()
	case e.Err == nil:
		return e.Msg
	case e.Msg == "":
		return e.Err.Error()
	default:
		return e.Msg + ": " + e.Err.Error()
	}
}

func (e *Error) Unwrap() error { return e.Err }

// E returns a new error of kind k with a formatted message.
func E(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...)}
}

// Wrap returns an error of kind k that wraps cause. A nil cause gives nil.
func Wrap(k Kind, cause error, format string, args ...any) error {
	if cause == nil {
		return nil
	}
	return &Error{Kind: k, Msg: fmt.Sprintf(format, args...), Err: cause}
}

// WithCode returns an error of kind k whose API code is code.
func WithCode(k Kind, code string, format string, args ...any) error {
	return &Error{Kind: k, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// KindOf reports the kind of the first *Error in err's chain, or Other.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return Other
}

// CodeOf reports the explicit code of the first *Error in err's chain that has one.
func CodeOf(err error) string {
	for err != nil {
		var e *Error
		if !errors.As(err, &e) {
			return ""
		}
		if e.Code != "" {
			return e.Code
		}
		err = e.Err
	}
	return ""
}

// Is reports whether err has kind k.
func Is(err error, k Kind) bool { return err != nil && KindOf(err) == k }
