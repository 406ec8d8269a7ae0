package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/buildinfo"
)

// server answers /ok with 200, /down with 503, /conflict with 409,
// /redirect with 302 to /ok, and echoes the method on /method.
func server(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(`{"status": "UP"}`)) })
	mux.HandleFunc("/down", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte("{\n  \"status\": \"DOWN\"\n}"))
	})
	mux.HandleFunc("/conflict", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusConflict) })
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("DELETE /method", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("deleted")) })
	mux.HandleFunc("GET /method", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("got")) })
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestRun(t *testing.T) {
	srv := server(t)
	// A port nothing listens on: bind one, note it, close it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closed := "http://" + l.Addr().String() + "/ok"
	require.NoError(t, l.Close())

	env := map[string]string{"BASE": srv.URL, "NODE": "node-2", "EMPTY": ""}
	tests := []struct {
		name    string
		args    []string
		code    int
		stdout  string
		stderr  string
		noStdio bool
	}{
		{name: "200 is accepted by default", args: []string{srv.URL + "/ok"}, code: exitOK, stdout: `200 {"status": "UP"}`},
		{name: "503 is rejected, body on one line", args: []string{srv.URL + "/down"}, code: exitRejected, stdout: `503 { "status": "DOWN" }`},
		{name: "-accept widens success", args: []string{"-accept", "200, 409", srv.URL + "/conflict"}, code: exitOK, stdout: "409"},
		{name: "409 is rejected by default", args: []string{srv.URL + "/conflict"}, code: exitRejected, stdout: "409"},
		{name: "redirects are not followed", args: []string{srv.URL + "/redirect"}, code: exitRejected, stdout: "302"},
		{name: "-method is sent", args: []string{"-method", "delete", srv.URL + "/method"}, code: exitOK, stdout: "DELETE " + srv.URL + "/method: 200 deleted"},
		{name: "GET by default", args: []string{srv.URL + "/method"}, code: exitOK, stdout: "200 got"},
		{name: "variables are expanded", args: []string{"-method", "DELETE", "${BASE}/method?node=$NODE"}, code: exitOK, stdout: srv.URL + "/method?node=node-2: 200"},
		{name: "connection refused", args: []string{closed}, code: exitRejected, stdout: "connection refused"},
		{name: "timeout", args: []string{"-timeout", "50ms", srv.URL + "/slow"}, code: exitRejected, stdout: "deadline exceeded"},
		{name: "unset variable", args: []string{"${NOPE}/ok"}, code: exitUsage, stderr: "unset variable(s) NOPE", noStdio: true},
		{name: "empty variable", args: []string{"$BASE$EMPTY/ok"}, code: exitUsage, stderr: "unset variable(s) EMPTY", noStdio: true},
		{name: "relative URL", args: []string{"/health/ready"}, code: exitUsage, stderr: "want an absolute http or https URL", noStdio: true},
		{name: "no URL", args: nil, code: exitUsage, stderr: "got 0 arguments", noStdio: true},
		{name: "two URLs", args: []string{srv.URL, srv.URL}, code: exitUsage, stderr: "got 2 arguments", noStdio: true},
		{name: "bad -accept", args: []string{"-accept", "200,ok", srv.URL}, code: exitUsage, stderr: `"ok" is not an HTTP status`, noStdio: true},
		{name: "bad -timeout", args: []string{"-timeout", "0s", srv.URL}, code: exitUsage, stderr: "-timeout 0s: must be positive", noStdio: true},
		{name: "unknown flag", args: []string{"-port", "9"}, code: exitUsage, stderr: "flag provided but not defined: -port\nusage: healthprobe", noStdio: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
			code := run(context.Background(), tt.args, lookup, &stdout, &stderr)
			require.Equal(t, tt.code, code, "stdout: %s\nstderr: %s", stdout.String(), stderr.String())
			if tt.noStdio {
				require.Empty(t, stdout.String())
			} else {
				require.Contains(t, stdout.String(), tt.stdout)
				require.Equal(t, 1, strings.Count(stdout.String(), "\n"), "one line per attempt")
			}
			if tt.stderr == "" {
				require.Empty(t, stderr.String())
			} else {
				require.Contains(t, stderr.String(), tt.stderr)
			}
		})
	}
}

// TestHelpAndVersion: asked for, help and the version are printed on stdout,
// and nothing is probed.
func TestHelpAndVersion(t *testing.T) {
	noEnv := func(string) (string, bool) { return "", false }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-h"}, "usage: healthprobe"},
		{[]string{"-help"}, "usage: healthprobe"},
		{[]string{"--help"}, "usage: healthprobe"},
		{[]string{"-h", "http://127.0.0.1:1/never"}, "usage: healthprobe"},
		{[]string{"-version"}, "healthprobe " + buildinfo.Version() + "\n"},
		{[]string{"--version"}, "healthprobe " + buildinfo.Version() + "\n"},
	} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, exitOK, run(context.Background(), tc.args, noEnv, &stdout, &stderr), "%q", tc.args)
		require.Empty(t, stderr.String(), "%q", tc.args)
		if strings.HasSuffix(tc.want, "\n") {
			require.Equal(t, tc.want, stdout.String(), "%q", tc.args)
		} else {
			require.Contains(t, stdout.String(), tc.want, "%q", tc.args)
			require.Contains(t, stdout.String(), "-retry-for", "%q: the flags are listed", tc.args)
			require.NotContains(t, stdout.String(), "/never", "%q: nothing was probed", tc.args)
		}
	}
}

// TestRetryFor shows -retry-for keeps asking until an answer is accepted,
// and gives up once the time is spent.
func TestRetryFor(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	noEnv := func(string) (string, bool) { return "", false }

	opts, err := parseArgs([]string{"-retry-for", "1m", srv.URL}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	opts.pause = time.Millisecond
	var out bytes.Buffer
	require.Equal(t, exitOK, attempt(context.Background(), opts, &out), out.String())
	require.EqualValues(t, 3, calls.Load())
	require.Equal(t, 3, strings.Count(out.String(), "\n"), out.String())

	// Without -retry-for one refusal is final.
	calls.Store(0)
	opts, err = parseArgs([]string{srv.URL}, noEnv, &bytes.Buffer{})
	require.NoError(t, err)
	require.Equal(t, exitRejected, attempt(context.Background(), opts, &bytes.Buffer{}))
	require.EqualValues(t, 1, calls.Load())
}
