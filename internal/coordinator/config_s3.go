package coordinator

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/dfs-project/dfs/internal/auth"
)

var (
	regionPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)
	domainPattern = regexp.MustCompile(`^([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// checkS3 validates the S3 listener and the access-key variables.
func (c Config) checkS3() []error {
	var problems []error
	switch {
	case (c.RootAccessKey == "") != (c.RootSecretKey == ""):
		problems = append(problems, errors.New("ROOT_ACCESS_KEY and ROOT_SECRET_KEY: set both or neither"))
	case c.RootAccessKey != "":
		if err := auth.CheckRoot(c.RootAccessKey, c.RootSecretKey); err != nil {
			problems = append(problems, err)
		}
	case c.S3Port != 0:
		problems = append(problems, fmt.Errorf("S3_PORT=%d needs a root key: set ROOT_ACCESS_KEY and ROOT_SECRET_KEY (S3 requests are always signed)", c.S3Port))
	}
	if c.S3Port != 0 && c.S3Port == c.Port {
		problems = append(problems, fmt.Errorf("S3_PORT=%d: the same port as SERVER_PORT", c.S3Port))
	}
	if !regionPattern.MatchString(c.S3Region) {
		problems = append(problems, fmt.Errorf("S3_REGION=%q: must be lower-case letters, digits and '-', as us-east-1", c.S3Region))
	}
	if c.S3Domain != "" && !domainPattern.MatchString(c.S3Domain) {
		problems = append(problems, fmt.Errorf("S3_DOMAIN=%q: must be a lower-case DNS name such as s3.example.com", c.S3Domain))
	}
	return problems
}
