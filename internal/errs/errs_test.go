package errs

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// allKinds are the kinds of the table, read from it so a new kind is covered
// the day its row is added.
func allKinds() []Kind {
	out := make([]Kind, len(kinds))
	for i := range kinds {
		out[i] = Kind(i)
	}
	return out
}

func TestKindTableIsOneToOne(t *testing.T) {
	statuses := map[int]Kind{}
	codes := map[string]Kind{}
	for _, k := range allKinds() {
		require.NotEmpty(t, kinds[k].name, "kind %d has no row", int(k))
		require.NotContains(t, statuses, k.Status(), "%v and %v share a status", k, statuses[k.Status()])
		require.NotContains(t, codes, k.Code(), "%v and %v share a code", k, codes[k.Code()])
		statuses[k.Status()], codes[k.Code()] = k, k
	}
}

func TestKindOfStatusReadsTheTableBack(t *testing.T) {
	for _, k := range allKinds() {
		require.Equal(t, k, KindOfStatus(k.Status()), "%v answers %d", k, k.Status())
	}
	for _, status := range []int{0, http.StatusOK, http.StatusFound, http.StatusMethodNotAllowed, http.StatusBadGateway, http.StatusGatewayTimeout} {
		require.Equal(t, Other, KindOfStatus(status), "status %d", status)
	}
}

func TestKindOutsideTheTableIsAnsweredAsOther(t *testing.T) {
	k := Kind(len(kinds))
	require.Equal(t, fmt.Sprintf("kind(%d)", len(kinds)), k.String())
	require.Equal(t, http.StatusInternalServerError, k.Status())
	require.Equal(t, CodeInternal, k.Code())
}

func TestConstructors(t *testing.T) {
	cause := errors.New("disk gone")

	err := E(NotFound, "file %s", "f1")
	require.Equal(t, &Error{Kind: NotFound, Msg: "file f1"}, err)

	require.NoError(t, Wrap(Unavailable, nil, "read"))
	err = Wrap(Unavailable, cause, "read %d", 3)
	require.Equal(t, &Error{Kind: Unavailable, Msg: "read 3", Err: cause}, err)
	require.Equal(t, "read 3: disk gone", err.Error())
	require.ErrorIs(t, err, cause)

	// A coded error exists with or without a cause.
	err = WithCode(NotFound, CodeFileNotFound, nil, "file %s not found", "f1")
	require.Equal(t, &Error{Kind: NotFound, Code: CodeFileNotFound, Msg: "file f1 not found"}, err)
	err = WithCode(NotFound, CodeBlobNotFound, cause, "")
	require.Equal(t, &Error{Kind: NotFound, Code: CodeBlobNotFound, Err: cause}, err)
	require.Equal(t, "disk gone", err.Error())
}

func TestKindAndCodeWalkTheChain(t *testing.T) {
	inner := WithCode(Unavailable, CodeNoHealthyNodes, nil, "none")
	err := Wrap(Unavailable, inner, "upload")
	require.Equal(t, Unavailable, KindOf(err))
	require.Equal(t, CodeNoHealthyNodes, CodeOf(err))
	require.True(t, Is(err, Unavailable))

	require.Equal(t, Other, KindOf(errors.New("plain")))
	require.Equal(t, "", CodeOf(E(Invalid, "x")))
	require.False(t, Is(nil, Other))
}
