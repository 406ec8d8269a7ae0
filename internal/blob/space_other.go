//go:build !(linux || darwin)

package blob

import "errors"

func diskSpace(string) (free, total int64, err error) {
	return 0, 0, errors.ErrUnsupported
}

func accessible(string) error { return nil }
