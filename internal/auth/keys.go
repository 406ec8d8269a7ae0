// Package auth holds the access keys and checks who a request comes from:
// the root key from the environment, the keys kept in the metadata store
// (their secrets sealed), and the REST API's authentication (HTTP Basic or
// Signature V4) with its admin-only paths. The S3 front end and the REST
// API both use it; neither knows how keys are stored.
package auth

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/dfs-project/dfs/internal/errs"
	"github.com/dfs-project/dfs/internal/meta"
	"github.com/dfs-project/dfs/internal/sigv4"
)

// Store is the part of the metadata store that keeps access keys.
type Store interface {
	CreateAccessKey(ctx context.Context, k *meta.AccessKey) error
	GetAccessKey(ctx context.Context, accessKey string) (meta.AccessKey, error)
	ListAccessKeys(ctx context.Context) ([]meta.AccessKey, error)
	DeleteAccessKey(ctx context.Context, accessKey string) error
}

// Key is an access key as the API shows it. Secret is set only in the
// answer to its creation.
type Key struct {
	Name      string    `json:"name"`
	AccessKey string    `json:"accessKey"`
	SecretKey string    `json:"secretKey,omitempty"`
	Admin     bool      `json:"admin"`
	CreatedAt time.Time `json:"createdAt"`
}

// Keys is the set of access keys: the root key and the stored ones.
type Keys struct {
	store      Store
	rootKey    string
	rootSecret string
	aead       cipher.AEAD // seals stored secrets; nil without a root key
	log        *slog.Logger
	// now is the clock of the lookup cache; tests set it.
	now func() time.Time

	// shared says other coordinators may revoke keys in the same store;
	// then the cache answers only while peers is live.
	shared bool
	peers  Peers

	mu     sync.Mutex
	cached map[string]cachedKey
	// revoked counts the keys forgotten, so that a read begun before a
	// revocation does not cache what it read.
	revoked uint64
}

// KeyCacheTTL is how long a stored key's unsealed secret is reused without
// reading its row again. A key revoked through this coordinator stops
// working at once, and through another as soon as its notice arrives (see
// Share). Unknown keys are not cached, so a new key works at once
// everywhere.
const KeyCacheTTL = 2 * time.Second

// Peers carries revocations between coordinators sharing a metadata store
// (redisx.Invalidations): Publish tells the others, Handle receives theirs
// ("" meaning everything may be stale), and Live says whether theirs reach
// this one now.
type Peers interface {
	Publish(ctx context.Context, kind, key string) error
	Handle(kind string, fn func(key string))
	Live() bool
}

// peerKind is the kind of a key's revocation on Peers.
const peerKind = "access-key"

// maxCachedKeys bounds the cache, cleared whole when it is reached.
const maxCachedKeys = 10000

type cachedKey struct {
	secret  string
	admin   bool
	expires time.Time
}

// sealPrefix marks a secret sealed with the root secret's key (version 1).
const sealPrefix = "v1:"

// New returns the keys over store. Without a root key (rootKey empty) no
// key can be created: stored secrets are sealed with a key derived from the
// root secret.
func New(store Store, rootKey, rootSecret string, log *slog.Logger) (*Keys, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	k := &Keys{store: store, rootKey: rootKey, rootSecret: rootSecret, log: log, now: time.Now}
	if rootKey != "" {
		sum := sha256.Sum256([]byte("dfs access-key sealing v1\x00" + rootSecret))
		block, err := aes.NewCipher(sum[:])
		if err != nil {
			return nil, err
		}
		if k.aead, err = cipher.NewGCM(block); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// Share says that other coordinators use the same metadata store. Each
// revocation is then published on peers, and the cache answers only while
// peers is live: with peers nil (no Redis), or while their notices cannot
// arrive, every lookup reads the key's row. Call it before serving.
func (k *Keys) Share(peers Peers) {
	k.shared, k.peers = true, peers
	if peers != nil {
		peers.Handle(peerKind, func(accessKey string) {
			if accessKey == "" {
				k.forgetAll()
				return
			}
			k.forget(accessKey)
		})
	}
}

// Enabled reports whether a root key is set, and so whether requests are
// checked at all.
func (k *Keys) Enabled() bool { return k.rootKey != "" }

var (
	accessKeyPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{3,128}$`)
	namePattern      = regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,128}$`)
)

// CheckRoot validates the root key pair from the environment.
func CheckRoot(accessKey, secret string) error {
	if !accessKeyPattern.MatchString(accessKey) {
		return errs.E(errs.Invalid, "ROOT_ACCESS_KEY must be 3 to 128 letters, digits, '.', '_' or '-'")
	}
	if len(secret) < 8 || len(secret) > 128 {
		return errs.E(errs.Invalid, "ROOT_SECRET_KEY must be 8 to 128 characters")
	}
	return nil
}

func (k *Keys) seal(secret string) (string, error) {
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return sealPrefix + base64.StdEncoding.EncodeToString(k.aead.Seal(nonce, nonce, []byte(secret), nil)), nil
}

func (k *Keys) unseal(stored string) (string, bool) {
	raw, ok := strings.CutPrefix(stored, sealPrefix)
	if !ok || k.aead == nil {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) < k.aead.NonceSize() {
		return "", false
	}
	plain, err := k.aead.Open(nil, b[:k.aead.NonceSize()], b[k.aead.NonceSize():], nil)
	return string(plain), err == nil
}

// Create stores a new key; accessKey and secret are generated when empty.
func (k *Keys) Create(ctx context.Context, name, accessKey, secret string, admin bool) (Key, error) {
	if !k.Enabled() {
		return Key{}, errs.E(errs.Invalid, "access keys need a root key: set ROOT_ACCESS_KEY and ROOT_SECRET_KEY")
	}
	if !namePattern.MatchString(name) {
		return Key{}, errs.E(errs.Invalid, "name must be 1 to 128 printable characters")
	}
	if accessKey == "" {
		accessKey = "DFS" + rand.Text()[:17] // base32: 85 random bits
	}
	if secret == "" {
		secret = rand.Text() + rand.Text() // 260 random bits
	}
	if err := CheckRoot(accessKey, secret); err != nil {
		return Key{}, errs.E(errs.Invalid, "%s", strings.NewReplacer("ROOT_ACCESS_KEY", "accessKey", "ROOT_SECRET_KEY", "secretKey").Replace(err.Error()))
	}
	if accessKey == k.rootKey {
		return Key{}, errs.E(errs.Conflict, "access key %s already exists", accessKey)
	}
	sealed, err := k.seal(secret)
	if err != nil {
		return Key{}, err
	}
	rec := meta.AccessKey{AccessKey: accessKey, Name: name, Secret: sealed, Admin: admin}
	if err := k.store.CreateAccessKey(ctx, &rec); err != nil {
		return Key{}, err
	}
	k.log.Info("access key created", "access_key", accessKey, "name", name, "admin", admin)
	return Key{Name: name, AccessKey: accessKey, SecretKey: secret, Admin: admin, CreatedAt: rec.CreatedAt}, nil
}

// List returns every stored key, without secrets.
func (k *Keys) List(ctx context.Context) ([]Key, error) {
	recs, err := k.store.ListAccessKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Key, len(recs))
	for i, r := range recs {
		out[i] = Key{Name: r.Name, AccessKey: r.AccessKey, Admin: r.Admin, CreatedAt: r.CreatedAt}
	}
	return out, nil
}

// Delete revokes a stored key. The root key cannot be revoked here.
func (k *Keys) Delete(ctx context.Context, accessKey string) error {
	if accessKey == k.rootKey && k.rootKey != "" {
		return errs.E(errs.Invalid, "the root key comes from ROOT_ACCESS_KEY and cannot be revoked through the API")
	}
	err := k.store.DeleteAccessKey(ctx, accessKey)
	k.forget(accessKey) // even on an error: the row may be gone
	if k.peers != nil {
		if perr := k.peers.Publish(ctx, peerKind, accessKey); perr != nil {
			k.log.Warn("the other coordinators were not told of a revoked access key; one whose notices still arrive keeps it for up to the key cache's TTL",
				"access_key", accessKey, "ttl", KeyCacheTTL, "err", perr)
		}
	}
	if err != nil {
		return err
	}
	k.log.Info("access key revoked", "access_key", accessKey)
	return nil
}

// Identity is who a request comes from.
type Identity struct {
	AccessKey string
	Admin     bool
}

// SetClock replaces the clock of the lookup cache, for tests.
func (k *Keys) SetClock(now func() time.Time) { k.now = now }

func (k *Keys) forget(accessKey string) {
	k.mu.Lock()
	delete(k.cached, accessKey)
	k.revoked++
	k.mu.Unlock()
}

func (k *Keys) forgetAll() {
	k.mu.Lock()
	k.cached = nil
	k.revoked++
	k.mu.Unlock()
}

// trusted reports whether the cache may answer: always for a store this
// process alone writes, and for a shared one while revocations from the
// other coordinators arrive.
func (k *Keys) trusted() bool {
	return !k.shared || (k.peers != nil && k.peers.Live())
}

// lookup finds a key's secret and whether it is an admin, from the cache
// while its entry is fresh.
func (k *Keys) lookup(ctx context.Context, accessKey string) (string, bool, error) {
	if k.rootKey != "" && accessKey == k.rootKey {
		return k.rootSecret, true, nil
	}
	if !k.trusted() {
		return k.read(ctx, accessKey)
	}
	now := k.now()
	k.mu.Lock()
	c, ok := k.cached[accessKey]
	revoked := k.revoked
	k.mu.Unlock()
	if ok && now.Before(c.expires) {
		return c.secret, c.admin, nil
	}
	secret, admin, err := k.read(ctx, accessKey)
	if err != nil {
		return "", false, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// A revocation, or a lost subscription, while the row was read: what
	// was read may be older than it.
	if k.revoked != revoked || !k.trusted() {
		return secret, admin, nil
	}
	if k.cached == nil || len(k.cached) >= maxCachedKeys {
		k.cached = make(map[string]cachedKey)
	}
	k.cached[accessKey] = cachedKey{secret: secret, admin: admin, expires: now.Add(KeyCacheTTL)}
	return secret, admin, nil
}

// read reads a stored key's row and unseals its secret.
func (k *Keys) read(ctx context.Context, accessKey string) (string, bool, error) {
	rec, err := k.store.GetAccessKey(ctx, accessKey)
	if errs.Is(err, errs.NotFound) {
		return "", false, sigv4.ErrUnknownKey
	}
	if err != nil {
		return "", false, err
	}
	secret, ok := k.unseal(rec.Secret)
	if !ok {
		k.log.Error("a stored access key's secret cannot be unsealed; was ROOT_SECRET_KEY changed?", "access_key", accessKey)
		return "", false, sigv4.ErrUnknownKey
	}
	return secret, rec.Admin, nil
}

// Secret is a sigv4.Secrets over the keys.
func (k *Keys) Secret(ctx context.Context, accessKey string) (string, error) {
	s, _, err := k.lookup(ctx, accessKey)
	return s, err
}

// IsAdmin reports whether accessKey is an admin key.
func (k *Keys) IsAdmin(ctx context.Context, accessKey string) bool {
	_, admin, err := k.lookup(ctx, accessKey)
	return err == nil && admin
}

// Basic checks an HTTP Basic access key and secret.
func (k *Keys) Basic(ctx context.Context, accessKey, secret string) (Identity, error) {
	want, admin, err := k.lookup(ctx, accessKey)
	if err == sigv4.ErrUnknownKey || (err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(secret)) != 1) {
		return Identity{}, errs.E(errs.Unauthorized, "the access key or secret is wrong")
	}
	if err != nil {
		return Identity{}, err
	}
	return Identity{AccessKey: accessKey, Admin: admin}, nil
}
