package nodetest

import (
	"github.com/dfs-project/dfs/internal/blob"
	"github.com/dfs-project/dfs/internal/storagenode/wire"
)

// WireInfo is info as a node describes it on the wire: what the
// coordinator's node client returns. Tests that stand a blob.Memory in for a
// node behind the coordinator's interfaces convert its answers with it.
func WireInfo(info blob.Info) wire.BlobInfo {
	return wire.BlobInfo{ID: info.ID, Size: info.Size, Checksum: info.Checksum}
}

// WireCheck is c as a node reports it on the wire (see WireInfo).
func WireCheck(c blob.Check) wire.ChecksumReport {
	return wire.ChecksumReport{ID: c.ID, Size: c.Size, StoredChecksum: c.Stored, ActualChecksum: c.Actual, Intact: c.Intact()}
}
