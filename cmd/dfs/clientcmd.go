package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"

	"github.com/dfs-project/dfs/internal/buildinfo"
	"github.com/dfs-project/dfs/internal/client"
	"github.com/dfs-project/dfs/internal/errs"
)

// Exit codes of the client commands, for scripts. The offline commands use
// the first three as well.
const (
	exitOK          = 0 // done
	exitFailed      = 1 // the operation failed: an error answer, a file not found, a broken transfer
	exitUsage       = 2 // the command line is wrong
	exitUnreachable = 3 // no answer from the coordinator at all
)

// defaultURL is where the client commands look for a coordinator when
// neither -url nor DFS_URL says otherwise: where `make run` starts one.
const defaultURL = "http://localhost:8080"

// commonHelp ends every client command's help.
const commonHelp = `
The coordinator is -url, else $DFS_URL, else ` + defaultURL + `. A coordinator
with a root key needs a key: $DFS_ACCESS_KEY and $DFS_SECRET_KEY.

Exit status: 0 success; 1 the operation failed (an error answer such as a
file not found, a broken or corrupt transfer); 2 bad usage; 3 the
coordinator cannot be reached.
`

// clientCmd is what every client command shares: its flags, its streams and,
// once the flags are parsed, the client.
type clientCmd struct {
	name string
	s    stdio
	fs   *flag.FlagSet
	url  string
	json bool
	c    *client.Client
	// parts configures how dfs put sends a large file.
	parts partOptions
}

// partOptions are dfs put's flags for files sent as upload-session parts.
type partOptions struct {
	parallel int
	size     int64
	resume   bool
}

// newClientCmd prepares a command's flag set with the common flags; help is
// the command's own usage text, printed before the flags.
func newClientCmd(name, help string, s stdio) *clientCmd {
	cc := &clientCmd{name: name, s: s, fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	url := os.Getenv("DFS_URL")
	if url == "" {
		url = defaultURL
	}
	cc.fs.StringVar(&cc.url, "url", url, "the coordinator's URL")
	cc.fs.BoolVar(&cc.json, "json", false, "print the result as JSON (the API's answer) instead of a summary, and a failure as {error, message, status}")
	cc.fs.Usage = func() {
		out := cc.fs.Output()
		io.WriteString(out, help)
		io.WriteString(out, "\nflags:\n")
		cc.fs.PrintDefaults()
		io.WriteString(out, commonHelp)
	}
	return cc
}

// parse parses flags given before, between and after the arguments (so that
// `dfs get ID -o out` works like `dfs get -o out ID`; everything after "--"
// is an argument) and checks the argument count against [min, max] (max < 0:
// no limit). When done is true the command must exit with code.
func (cc *clientCmd) parse(args []string, minArgs, maxArgs int) (pos []string, code int, done bool) {
	for {
		if code, done := parseOnce(cc.fs, args, cc.s); done {
			return nil, code, true
		}
		rest := cc.fs.Args()
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	switch {
	case len(pos) < minArgs:
		return nil, cc.usageError("missing argument"), true
	case maxArgs >= 0 && len(pos) > maxArgs:
		return nil, cc.usageError("unexpected argument %q", pos[maxArgs]), true
	}
	c, err := client.New(cc.url, client.Options{UserAgent: userAgent(),
		AccessKey: os.Getenv("DFS_ACCESS_KEY"), SecretKey: os.Getenv("DFS_SECRET_KEY")})
	if err != nil {
		fmt.Fprintf(cc.s.err, "dfs %s: %v (set -url or DFS_URL)\n", cc.name, err)
		return nil, exitUsage, true
	}
	cc.c = c
	return pos, exitOK, false
}

// userAgent names the CLI and its build in every request, so that the
// coordinator's access log tells its calls from other clients'.
func userAgent() string { return "dfs-cli/" + buildinfo.Version() }

// usageError reports a wrong command line.
func (cc *clientCmd) usageError(format string, args ...any) int {
	return badUsage(cc.s, cc.name, format, args...)
}

// fail reports err with advice on what to do and returns the exit code.
// Under -json it also prints the error as an object on stdout, so that a
// script reading stdout gets a JSON value whether the command worked or not.
func (cc *clientCmd) fail(err error) int { return cc.failFile("", err) }

// failFile is fail for an error about one of several files a command
// handles; file names it in the JSON object.
func (cc *clientCmd) failFile(file string, err error) int {
	fmt.Fprintf(cc.s.err, "dfs %s: %v\n", cc.name, err)
	if hint := cc.hint(err); hint != "" {
		fmt.Fprintf(cc.s.err, "  %s\n", hint)
	}
	if cc.json {
		e := describe(err)
		e.File = file
		cc.printJSON(e)
	}
	return exitCode(err)
}

// Codes of the JSON error object for failures that are not the
// coordinator's error answer, which carries a code of its own. Failures on
// this side that the API has a code for use it: CHECKSUM_MISMATCH for
// downloaded bytes that do not match, CONFLICT for a local file in the way,
// INVALID_REQUEST for a local file or input that cannot be sent.
const (
	codeUnreachable    = "UNREACHABLE"       // no answer from the coordinator
	codeInterrupted    = "INTERRUPTED"       // Ctrl-C, SIGTERM or a cancelled context
	codeBadAnswer      = "UNEXPECTED_ANSWER" // an error answer not in the API's shape: not a coordinator?
	codeTransferFailed = "TRANSFER_FAILED"   // the transfer broke off after the answer began
	codeFailed         = "FAILED"            // anything else
)

// errorJSON is a failed command's JSON object; README documents it.
type errorJSON struct {
	Error     string `json:"error"`
	Message   string `json:"message"`
	Status    int    `json:"status,omitempty"`    // the HTTP status of the coordinator's answer; absent without one
	RequestID string `json:"requestId,omitempty"` // the answer's X-Request-Id, for the coordinator's log
	File      string `json:"file,omitempty"`      // the FILE of dfs put that failed
}

// describe classifies err for the JSON error object. An error answer keeps
// the coordinator's code, status and message.
func describe(err error) errorJSON {
	var ae *client.APIError
	if errors.As(err, &ae) {
		e := errorJSON{Error: ae.Code, Message: ae.Message, Status: ae.Status, RequestID: ae.RequestID}
		if e.Error == "" {
			e.Error = codeBadAnswer
		}
		if e.Message == "" {
			e.Message = http.StatusText(ae.Status)
		}
		return e
	}
	e := errorJSON{Message: err.Error()}
	var ce *client.ConnError
	switch {
	case errors.As(err, &ce):
		e.Error = codeUnreachable
	case errors.Is(err, context.Canceled):
		e.Error = codeInterrupted
	default:
		switch errs.KindOf(err) {
		case errs.Corrupt:
			e.Error = errs.CodeChecksumMismatch
		case errs.Unavailable:
			e.Error = codeTransferFailed
		case errs.Conflict:
			e.Error = errs.CodeConflict
		case errs.Invalid:
			e.Error = errs.CodeInvalidRequest
		default:
			e.Error = codeFailed
		}
	}
	return e
}

func exitCode(err error) int {
	var ce *client.ConnError
	if errors.As(err, &ce) {
		return exitUnreachable
	}
	return exitFailed
}

// hint says what a user can do about err, or nothing when its message says it
// all.
func (cc *clientCmd) hint(err error) string {
	var ce *client.ConnError
	if errors.As(err, &ce) {
		return "is it running? start one with `make run` (or `dfs cluster up`), or point -url or DFS_URL at it"
	}
	if errors.Is(err, context.Canceled) {
		return ""
	}
	var ae *client.APIError
	if !errors.As(err, &ae) {
		if errs.KindOf(err) == errs.Corrupt {
			return "nothing was saved; try again: the coordinator quarantines a bad copy and serves another"
		}
		return ""
	}
	switch ae.Code {
	case errs.CodeFileNotFound:
		return "`dfs ls` lists the stored files"
	case errs.CodeNodeNotFound:
		return "`dfs nodes` lists the known storage nodes"
	case errs.CodeNoHealthyNodes:
		return "no storage node is on the ring yet: start storage nodes; `dfs nodes` shows their state (a new node joins after two good health checks)"
	case errs.CodeStorageUnavailable:
		return "`dfs nodes` and `dfs health` show which storage nodes are down"
	case errs.CodeMetadataUnavailable:
		return "the coordinator cannot reach its metadata store (DATABASE_URL); `dfs health` shows its state"
	case errs.CodeUnsafeDrain:
		return "`dfs nodes drain -dry-run ID` shows the plan; `dfs nodes drain -force ID` drains anyway"
	case errs.CodeFileTooLarge:
		return "the coordinator's MAX_FILE_SIZE bounds uploads; raise it there to store larger files"
	case errs.CodeInternal:
		if ae.RequestID == "" {
			return "the coordinator's log has the detail"
		}
		return "the coordinator's log has the detail: look for request id " + ae.RequestID
	case errs.CodeNotFound, errs.CodeMethodNotAllowed, "":
		return "is " + cc.c.BaseURL() + " a dfs coordinator? set -url or DFS_URL"
	}
	return ""
}

// printJSON writes v as indented JSON on stdout.
func (cc *clientCmd) printJSON(v any) { writeJSON(cc.s.out, v) }

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// humanBytes formats a size with binary units: 512 B, 1.5 KiB, 1.0 GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// orNone joins a list for display, saying so when it is empty.
func orNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}
