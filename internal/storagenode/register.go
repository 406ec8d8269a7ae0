package storagenode

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// registerTimeout bounds one registration attempt.
const registerTimeout = 5 * time.Second

// registrar announces the node to the coordinator at start and then every
// interval. The announcement is an idempotent upsert, so repeating it is how
// a restarted coordinator learns about a node it forgot. A coordinator that
// is down is logged once per outage, not at every tick.
type registrar struct {
	url      string
	body     []byte
	token    string
	interval time.Duration
	client   *http.Client
	log      *slog.Logger
	outcomes *prometheus.CounterVec

	// registered and failing are touched only by the loop's goroutine.
	registered bool
	failing    bool
}

func newRegistrar(cfg Config, diskID string, log *slog.Logger, outcomes *prometheus.CounterVec) *registrar {
	body, _ := json.Marshal(wire.Registration{NodeID: cfg.NodeID, Host: cfg.AdvertisedHost, Port: cfg.AdvertisedPort, DiskID: diskID,
		Zone: cfg.Zone, Weight: cfg.Weight}) // cannot fail: strings and numbers
	return &registrar{
		url:      strings.TrimRight(cfg.CoordinatorURL, "/") + wire.PathRegister,
		body:     body,
		token:    cfg.ClusterToken,
		interval: cfg.RegistrationInterval,
		client:   &http.Client{Timeout: registerTimeout},
		log:      log,
		outcomes: outcomes,
	}
}

// run registers until ctx is cancelled.
func (r *registrar) run(ctx context.Context) {
	r.log.Info("registering with the coordinator", "url", r.url, "interval", r.interval)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.attempt(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// attempt registers once and logs only changes: the first success, the
// start of an outage and its end.
func (r *registrar) attempt(ctx context.Context) {
	err := r.register(ctx)
	if ctx.Err() != nil {
		return // stopping: a failure now is ours, not the coordinator's
	}
	if err != nil {
		r.outcomes.WithLabelValues(outcomeError).Inc()
		if !r.failing {
			r.log.Warn("cannot register with the coordinator; will keep trying", "url", r.url, "err", err, "every", r.interval)
		} else {
			r.log.Debug("registration still failing", "err", err)
		}
		r.failing = true
		return
	}
	r.outcomes.WithLabelValues(outcomeOK).Inc()
	switch {
	case r.failing && r.registered:
		r.log.Info("registered with the coordinator again after an outage", "url", r.url)
	case !r.registered:
		r.log.Info("registered with the coordinator", "url", r.url)
	default:
		r.log.Debug("registration renewed")
	}
	r.registered, r.failing = true, false
}

func (r *registrar) register(ctx context.Context) error {
	return postToCoordinator(ctx, r.client, r.url, r.token, r.body)
}

// postToCoordinator POSTs a JSON body to one of the coordinator's
// node-facing endpoints with the cluster token; any answer but a 2xx is an
// error that quotes the coordinator.
func postToCoordinator(ctx context.Context, client *http.Client, url, token string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("coordinator answered %s: %s", resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}
