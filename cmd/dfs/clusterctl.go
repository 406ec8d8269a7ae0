package main

// `dfs cluster up` runs in the foreground and owns its processes; the other
// `dfs cluster` commands, typed in another terminal, ask it to act through a
// Unix socket in the cluster's data directory. The protocol is private to
// this binary: a few JSON calls over HTTP.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/localcluster"
)

// controlSocketName is the socket's file name inside the data directory.
const controlSocketName = "cluster.sock"

// maxSocketPath keeps the socket path within every Unix system's sun_path
// (104 bytes on macOS and the BSDs, 108 on Linux).
const maxSocketPath = 100

// controlTimeout bounds one control call. A restart waits for the process to
// be ready and, for a node, admitted to the ring, each within the cluster's
// ready timeout.
const controlTimeout = 2*localcluster.DefaultReadyTimeout + 10*time.Second

// controlSocket returns where the cluster whose data is in dataDir listens:
// <data>/cluster.sock, or, when that path is too long for a socket, a file in
// the temporary directory named after a hash of the data directory's path.
func controlSocket(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	path := filepath.Join(abs, controlSocketName)
	if len(path) <= maxSocketPath {
		return path, nil
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(os.TempDir(), "dfs-cluster-"+hex.EncodeToString(sum[:8])+".sock"), nil
}

// processView is one process as the control API reports it.
type processView struct {
	Name    string `json:"name"`
	URL     string `json:"url"`
	PID     int    `json:"pid"`
	Running bool   `json:"running"`
	Log     string `json:"log"`
}

// controlServer serves the control API of a running cluster.
type controlServer struct {
	c    *localcluster.Cluster
	srv  *http.Server
	path string
}

// serveControl listens on the cluster's control socket. A socket left by a
// cluster that is no longer running is replaced; one that answers means
// another `dfs cluster up` runs on the same data directory, which is an error.
func serveControl(c *localcluster.Cluster, dataDir string) (*controlServer, error) {
	path, err := controlSocket(dataDir)
	if err != nil {
		return nil, err
	}
	if err := checkNoCluster(dataDir); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, errs.Wrap(errs.Other, err, "remove the stale control socket %s", path)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, errs.Wrap(errs.Other, err, "listen on the control socket %s", path)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, errs.Wrap(errs.Other, err, "restrict the control socket %s", path)
	}
	s := &controlServer{c: c, path: path}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/processes", s.list)
	mux.HandleFunc("POST /v1/processes/{name}/{action}", s.act)
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// checkNoCluster fails when a `dfs cluster up` already answers on dataDir's
// control socket.
func checkNoCluster(dataDir string) error {
	path, err := controlSocket(dataDir)
	if err != nil {
		return err
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil
	}
	conn.Close()
	return errs.E(errs.Conflict, "a local cluster already runs on %s (`dfs cluster status` shows it; Ctrl-C in its terminal stops it)", dataDir)
}

// Close stops serving and removes the socket.
func (s *controlServer) Close() error {
	err := s.srv.Close()
	if rmErr := os.Remove(s.path); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	return err
}

func (s *controlServer) names() []string {
	names := s.c.Coordinators()
	if len(names) > 1 {
		names = append(names, localcluster.HAProxyName)
	}
	return append(names, s.c.Nodes()...)
}

func (s *controlServer) view(name string) processView {
	pid := s.c.PID(name)
	return processView{Name: name, URL: s.c.NodeURL(name), PID: pid, Running: pid != 0, Log: s.c.LogPath(name)}
}

func (s *controlServer) list(w http.ResponseWriter, _ *http.Request) {
	var views []processView
	for _, name := range s.names() {
		views = append(views, s.view(name))
	}
	writeControlJSON(w, http.StatusOK, views)
}

// act stops, kills, starts or restarts one process. A start or restart
// answers once the process is ready and, for a storage node while the
// coordinator runs, once the coordinator has it back on the ring.
func (s *controlServer) act(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	if s.c.NodeURL(name) == "" {
		writeControlError(w, errs.E(errs.NotFound, "the cluster has no process named %q (it has %v)", name, s.names()))
		return
	}
	var err error
	switch action {
	case "stop":
		err = s.c.StopNode(name)
	case "kill":
		err = s.c.KillNode(name)
	case "start":
		err = s.start(r.Context(), name)
	case "restart":
		if s.c.PID(name) != 0 {
			err = s.c.StopNode(name)
		}
		if err == nil {
			err = s.start(r.Context(), name)
		}
	default:
		err = errs.E(errs.Invalid, "unknown action %q: stop, kill, start or restart", action)
	}
	if err != nil {
		writeControlError(w, err)
		return
	}
	writeControlJSON(w, http.StatusOK, s.view(name))
}

// start starts a process and waits for it within ctx, the request's: the
// process itself lives as long as the cluster.
func (s *controlServer) start(ctx context.Context, name string) error {
	if name == localcluster.CoordinatorName {
		return s.c.StartCoordinator(ctx)
	}
	if err := s.c.StartNode(ctx, name); err != nil {
		return err
	}
	if !slices.Contains(s.c.Nodes(), name) {
		return nil // another coordinator, or the HAProxy in front of them
	}
	if s.c.PID(localcluster.CoordinatorName) == 0 {
		return nil // nobody to admit it; it joins once the coordinator runs
	}
	return s.c.WaitAdmitted(ctx, name)
}

func writeControlJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeControlError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	switch errs.KindOf(err) {
	case errs.NotFound:
		status = http.StatusNotFound
	case errs.Conflict:
		status = http.StatusConflict
	case errs.Invalid:
		status = http.StatusBadRequest
	}
	writeControlJSON(w, status, map[string]string{"error": err.Error()})
}

// controlClient calls a running cluster's control API.
type controlClient struct {
	http *http.Client
	path string
}

func dialControl(dataDir string) (*controlClient, error) {
	path, err := controlSocket(dataDir)
	if err != nil {
		return nil, err
	}
	return &controlClient{path: path, http: &http.Client{
		Timeout: controlTimeout,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}, nil
}

// errNoCluster is returned when no `dfs cluster up` answers on the socket.
var errNoCluster = errors.New("no local cluster is running")

func (cc *controlClient) do(ctx context.Context, method, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://cluster"+path, nil)
	if err != nil {
		return err
	}
	resp, err := cc.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("%w (no `dfs cluster up` answers on %s)", errNoCluster, cc.path)
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.NewDecoder(resp.Body).Decode(&e) != nil || e.Error == "" {
			return fmt.Errorf("the cluster answered %s", resp.Status)
		}
		return errors.New(e.Error)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (cc *controlClient) processes(ctx context.Context) ([]processView, error) {
	var v []processView
	return v, cc.do(ctx, http.MethodGet, "/v1/processes", &v)
}

func (cc *controlClient) act(ctx context.Context, name, action string) (processView, error) {
	var v processView
	return v, cc.do(ctx, http.MethodPost, "/v1/processes/"+name+"/"+action, &v)
}
