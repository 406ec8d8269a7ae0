package main

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dfs-project/dfs/internal/localcluster"
)

// rootKeyFile is where a local cluster keeps its root key, in its data
// directory, so that a restart keeps the keys and buckets working.
const rootKeyFile = "root-key.json"

// localS3 is the S3 side of a local cluster: its endpoint and root key.
type localS3 struct {
	Endpoint  string `json:"-"`
	AccessKey string `json:"accessKey"`
	SecretKey string `json:"secretKey"`
	FromEnv   bool   `json:"-"`
	keyPath   string
}

// s3Setup picks the local cluster's S3 port (0: a free one) and root key:
// ROOT_ACCESS_KEY/ROOT_SECRET_KEY when the environment sets them, else the
// one kept in the data directory, created on the first start. It returns
// the coordinator's extra environment: the S3 listener, the key, and
// API_AUTH=open (unless the environment sets API_AUTH) so that the
// loopback REST API answers plain curl.
func s3Setup(dataDir, host string, port int) ([]string, localS3, error) {
	if port == 0 {
		free, err := localcluster.FreePorts(host, 1)
		if err != nil {
			return nil, localS3{}, err
		}
		port = free[0]
	} else if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err != nil {
		return nil, localS3{}, fmt.Errorf("the S3 port %d is taken (%v); choose another with -s3-port (make run ARGS=\"-s3-port %d\")", port, err, otherPort(port))
	} else {
		ln.Close()
	}
	s := localS3{Endpoint: "http://" + host + ":" + strconv.Itoa(port), keyPath: filepath.Join(dataDir, rootKeyFile)}
	if ak, sk := os.Getenv("ROOT_ACCESS_KEY"), os.Getenv("ROOT_SECRET_KEY"); ak != "" || sk != "" {
		s.AccessKey, s.SecretKey, s.FromEnv = ak, sk, true
	} else if err := s.loadOrCreateKey(); err != nil {
		return nil, localS3{}, err
	}
	env := []string{"S3_PORT=" + strconv.Itoa(port), "ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey}
	if _, set := os.LookupEnv("API_AUTH"); !set {
		env = append(env, "API_AUTH=open")
	}
	return env, s, nil
}

func (s *localS3) loadOrCreateKey() error {
	b, err := os.ReadFile(s.keyPath)
	if err == nil {
		if err := json.Unmarshal(b, s); err != nil || s.AccessKey == "" || s.SecretKey == "" {
			return fmt.Errorf("%s is not a root key file (delete it to make a new key): %v", s.keyPath, err)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	s.AccessKey, s.SecretKey = "DFS"+rand.Text()[:17], rand.Text()+rand.Text()
	if b, err = json.Marshal(s); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.keyPath), 0o755); err != nil {
		return err
	}
	return os.WriteFile(s.keyPath, append(b, '\n'), 0o600)
}

// print says where the S3 API is and how to reach it with the aws CLI.
func (s localS3) print(w io.Writer) {
	fmt.Fprintf(w, "  %-12s %s\n", "s3", s.Endpoint)
	where := "from ROOT_ACCESS_KEY/ROOT_SECRET_KEY"
	if !s.FromEnv {
		where = "kept in " + s.keyPath
	}
	fmt.Fprintf(w, "root key: %s  secret: %s  (%s)\n", s.AccessKey, s.SecretKey, where)
	fmt.Fprintf(w, "try: AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY=%s aws --endpoint-url %s s3 ls\n", s.AccessKey, s.SecretKey, s.Endpoint)
}
