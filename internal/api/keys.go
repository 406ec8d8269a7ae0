package api

import (
	"context"
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/dfs-project/dfs/internal/auth"
	"github.com/dfs-project/dfs/internal/httpx"
)

// Keys manages access keys.
type Keys interface {
	Create(ctx context.Context, name, accessKey, secret string, admin bool) (auth.Key, error)
	List(ctx context.Context) ([]auth.Key, error)
	Delete(ctx context.Context, accessKey string) error
}

type createKeyRequest struct {
	Name      string `json:"name"`
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
	Admin     bool   `json:"admin"`
}

func (s *server) createKey(w http.ResponseWriter, r *http.Request) {
	var req createKeyRequest
	if err := decodeJSON(r, &req); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	k, err := s.Keys.Create(r.Context(), req.Name, req.AccessKey, req.SecretKey, req.Admin)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, k)
}

func (s *server) listKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.Keys.List(r.Context())
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, keys)
}

func (s *server) deleteKey(w http.ResponseWriter, r *http.Request) {
	if err := s.Keys.Delete(r.Context(), chi.URLParam(r, "accessKey")); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
