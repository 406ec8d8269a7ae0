// Command healthprobe sends one HTTP request and exits 0 when the answer's
// status is one it was told to accept.
//
// The container images are distroless: no shell, no curl. Docker's
// HEALTHCHECK, Compose health checks and Kubernetes lifecycle hooks all need
// an executable that asks a URL and reports by exit status; this is that
// executable, a few megabytes, static like the daemons beside it.
//
// Neither Docker's exec-form HEALTHCHECK nor a Kubernetes exec hook expands
// variables (Kubernetes expands $(VAR) in a container's command and env, not
// in its lifecycle hooks), so healthprobe expands $VAR and ${VAR} in the URL
// itself from its own environment, and refuses a URL naming an unset variable
// rather than calling a wrong one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dfs-project/dfs/internal/buildinfo"
)

// Exit codes: a probe's caller only distinguishes zero from non-zero, but a
// person reading a hook's failure can tell a refused answer from a typo.
const (
	exitOK       = 0
	exitRejected = 1
	exitUsage    = 2
)

// maxBodyShown bounds the answer body echoed to stdout: Docker keeps only the
// first 4 KiB of a health check's output, and a line of context is enough.
const maxBodyShown = 1 << 10

// retryPause is the wait between attempts under -retry-for.
const retryPause = time.Second

const usageText = `usage: healthprobe [flags] URL

Sends one HTTP request to URL and exits 0 when the answer's status is in
-accept, 1 when it is not or the request fails, 2 on bad usage. $VAR and
${VAR} in URL are replaced from the environment; an unset variable is an
error. Prints one line with the outcome and the start of the answer's body.

examples:
  healthprobe 'http://127.0.0.1:${SERVER_PORT}/health/ready'
  healthprobe -method DELETE -timeout 6m '${COORDINATOR_URL}/api/nodes/${STORAGE_NODE_ID}?wait=true'

flags:
`

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// options are the parsed command line.
type options struct {
	method   string
	timeout  time.Duration
	accept   []int
	retryFor time.Duration
	pause    time.Duration // between attempts; retryPause but in tests
	url      string
}

// run is main without the process: the environment and streams are passed in
// so that tests can drive it.
func run(ctx context.Context, args []string, lookup func(string) (string, bool), stdout, stderr io.Writer) int {
	opts, err := parseArgs(args, lookup, stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// Asked for, help is the answer, not a complaint: stdout.
		usage(stdout)
		return exitOK
	case errors.Is(err, errVersion):
		fmt.Fprintln(stdout, "healthprobe", buildinfo.Version())
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "healthprobe: %v\n", err)
		return exitUsage
	}
	return attempt(ctx, opts, stdout)
}

// attempt probes until an answer is accepted or opts.retryFor has passed.
func attempt(ctx context.Context, opts options, stdout io.Writer) int {
	client := &http.Client{
		// A redirect is an answer worth reporting, not one to follow: a probe
		// that followed it would judge a different endpoint.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	deadline := time.Now().Add(opts.retryFor)
	for {
		status, body, err := probe(ctx, client, opts)
		switch {
		case err != nil:
			fmt.Fprintf(stdout, "%s %s: %v\n", opts.method, opts.url, err)
		default:
			fmt.Fprintf(stdout, "%s %s: %d %s\n", opts.method, opts.url, status, body)
			if slices.Contains(opts.accept, status) {
				return exitOK
			}
		}
		if !time.Now().Add(opts.pause).Before(deadline) {
			return exitRejected
		}
		select {
		case <-ctx.Done():
			return exitRejected
		case <-time.After(opts.pause):
		}
	}
}

// errVersion is parseArgs's answer to -version.
var errVersion = errors.New("version requested")

// usage writes the usage text and the flags to w.
func usage(w io.Writer) {
	io.WriteString(w, usageText)
	fs := flag.NewFlagSet("healthprobe", flag.ContinueOnError)
	fs.SetOutput(w)
	defineFlags(fs, &options{})
	fs.PrintDefaults()
}

// defineFlags defines the flags on fs, into opts but for the two that need
// a second look.
func defineFlags(fs *flag.FlagSet, opts *options) (accept *string, version *bool) {
	fs.StringVar(&opts.method, "method", http.MethodGet, "HTTP method")
	fs.DurationVar(&opts.timeout, "timeout", 5*time.Second, "time limit of one attempt")
	accept = fs.String("accept", "200", "comma-separated statuses that count as success")
	fs.DurationVar(&opts.retryFor, "retry-for", 0, "retry a failed attempt every second for this long (0: one attempt)")
	version = fs.Bool("version", false, "print the version and exit")
	return accept, version
}

// parseArgs reads the flags and expands the URL. A request for help is
// flag.ErrHelp and one for the version errVersion, both with nothing
// printed.
func parseArgs(args []string, lookup func(string) (string, bool), stderr io.Writer) (options, error) {
	opts := options{pause: retryPause}
	fs := flag.NewFlagSet("healthprobe", flag.ContinueOnError)
	fs.SetOutput(stderr)
	// The usage is printed below, to stdout when it was asked for.
	fs.Usage = func() {}
	accept, version := defineFlags(fs, &opts)
	if err := fs.Parse(args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			usage(stderr)
		}
		return opts, err
	}
	if *version {
		return opts, errVersion
	}
	if fs.NArg() != 1 {
		usage(stderr)
		return opts, fmt.Errorf("want exactly one URL, got %d arguments", fs.NArg())
	}
	if opts.timeout <= 0 {
		return opts, fmt.Errorf("-timeout %s: must be positive", opts.timeout)
	}
	if opts.retryFor < 0 {
		return opts, fmt.Errorf("-retry-for %s: must not be negative", opts.retryFor)
	}
	opts.method = strings.ToUpper(opts.method)
	for _, s := range strings.Split(*accept, ",") {
		code, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || code < 100 || code > 599 {
			return opts, fmt.Errorf("-accept %q: %q is not an HTTP status", *accept, s)
		}
		opts.accept = append(opts.accept, code)
	}
	raw, err := expand(fs.Arg(0), lookup)
	if err != nil {
		return opts, err
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return opts, fmt.Errorf("URL %q: want an absolute http or https URL", raw)
	}
	opts.url = raw
	return opts, nil
}

// expand replaces $VAR and ${VAR} in s, failing on the first unset or empty
// variable: a probe of "http://:/health" would only say "connection refused"
// and hide the real mistake.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	var missing []string
	out := os.Expand(s, func(name string) string {
		v, ok := lookup(name)
		if !ok || v == "" {
			missing = append(missing, name)
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("URL %q names unset variable(s) %s", s, strings.Join(missing, ", "))
	}
	return out, nil
}

// probe makes one attempt and returns the status and the start of the body,
// flattened to one line.
func probe(ctx context.Context, client *http.Client, opts options) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, opts.method, opts.url, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyShown))
	if err != nil {
		return 0, "", fmt.Errorf("reading the answer: %w", err)
	}
	return resp.StatusCode, strings.Join(strings.Fields(string(body)), " "), nil
}
