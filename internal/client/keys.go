package client

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// AccessKey is an access key as the coordinator lists it; SecretKey is set
// only in the answer to its creation.
type AccessKey struct {
	Name      string    `json:"name"`
	AccessKey string    `json:"accessKey"`
	SecretKey string    `json:"secretKey,omitempty"`
	Admin     bool      `json:"admin"`
	CreatedAt time.Time `json:"createdAt"`
}

// NewKey is a key to create; empty AccessKey and SecretKey are generated.
type NewKey struct {
	Name      string `json:"name"`
	AccessKey string `json:"accessKey,omitempty"`
	SecretKey string `json:"secretKey,omitempty"`
	Admin     bool   `json:"admin,omitempty"`
}

// CreateKey creates an access key (POST /api/admin/keys).
func (c *Client) CreateKey(ctx context.Context, k NewKey) (AccessKey, error) {
	var out AccessKey
	_, err := c.doJSON(ctx, http.MethodPost, "/api/admin/keys", nil, k, &out)
	return out, err
}

// Keys lists the access keys, without their secrets.
func (c *Client) Keys(ctx context.Context) ([]AccessKey, error) {
	var out []AccessKey
	_, err := c.doJSON(ctx, http.MethodGet, "/api/admin/keys", nil, nil, &out)
	return out, err
}

// DeleteKey revokes an access key.
func (c *Client) DeleteKey(ctx context.Context, accessKey string) error {
	_, err := c.doJSON(ctx, http.MethodDelete, "/api/admin/keys/"+url.PathEscape(accessKey), nil, nil, nil)
	return err
}
