package coordinator

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/dfs-project/dfs/internal/envconf"
)

func TestS3AndKeyVariablesAreChecked(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want string // "" = valid
	}{
		{"S3 without a root key", map[string]string{"S3_PORT": "9000"}, "S3_PORT=9000 needs a root key: set ROOT_ACCESS_KEY and ROOT_SECRET_KEY"},
		{"S3 with a root key", map[string]string{"S3_PORT": "9000", "ROOT_ACCESS_KEY": "admin", "ROOT_SECRET_KEY": "12345678"}, ""},
		{"a key without its secret", map[string]string{"ROOT_ACCESS_KEY": "admin"}, "ROOT_ACCESS_KEY and ROOT_SECRET_KEY: set both or neither"},
		{"a short secret", map[string]string{"ROOT_ACCESS_KEY": "admin", "ROOT_SECRET_KEY": "short"}, "ROOT_SECRET_KEY must be 8 to 128 characters"},
		{"a bad access key", map[string]string{"ROOT_ACCESS_KEY": "a b", "ROOT_SECRET_KEY": "12345678"}, "ROOT_ACCESS_KEY must be"},
		{"S3 on the REST port", map[string]string{"S3_PORT": "8080", "ROOT_ACCESS_KEY": "admin", "ROOT_SECRET_KEY": "12345678"}, "the same port as SERVER_PORT"},
		{"a port out of range", map[string]string{"S3_PORT": "70000"}, "S3_PORT"},
		{"a bad region", map[string]string{"S3_REGION": "EU West"}, "S3_REGION"},
		{"a bad domain", map[string]string{"S3_DOMAIN": "https://s3.example.com"}, "S3_DOMAIN"},
		{"a good domain", map[string]string{"S3_DOMAIN": "s3.local"}, ""},
		{"a bad API_AUTH", map[string]string{"API_AUTH": "none"}, "API_AUTH"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadConfig(envconf.FromMap(tc.env))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
