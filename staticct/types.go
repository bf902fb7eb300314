package staticct

import (
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/format/sct"
	"github.com/mosaic-ct/mosaic/internal/format/tile"
)

// Checkpoint is the body of a checkpoint (c2sp.org/tlog-checkpoint): its
// Origin line, the tree Size and the root Hash.
type Checkpoint = checkpoint.Checkpoint

// SignedCheckpoint is a checkpoint whose log signature has been verified:
// the embedded Checkpoint, the RFC 6962 Timestamp (milliseconds since the
// epoch) of its RFC6962NoteSignature, the whole signed Note, and the
// TreeHeadSignature (an RFC 6962 DigitallySigned struct), which with
// Timestamp, Size and Hash makes an RFC 6962 signed tree head.
type SignedCheckpoint = checkpoint.Verified

// Tile identifies a hash tile (Level 0–5), a data tile (Data) or a names
// tile (Names), by its index N in its level and its width W (TileWidth for
// a full tile, fewer for a partial one). Its Path method gives its path
// under the monitoring prefix.
type Tile = tile.Tile

// NamesEntry is one line of a names tile (Sunlight's extension): an
// entry's timestamp and its certificate's subject and DNS and IP names.
// Names tiles are not authenticated by the tree.
type NamesEntry = tile.NamesEntry

// Entry is one log entry as a data tile holds it: the RFC 6962
// TimestampedEntry (Timestamp, IsPrecert, Certificate, which is the
// TBSCertificate for a precertificate, IssuerKeyHash, LeafIndex) plus the
// PreCertificate and the ChainFingerprints of its issuers (see
// Client.Issuer). Its MerkleTreeLeaf and LeafHash methods give the RFC 6962
// leaf and its hash.
type Entry = tile.Entry

// SCTResponse is the RFC 6962 add-chain response: a signed certificate
// timestamp.
type SCTResponse = sct.Response

// TileWidth is the number of hashes or entries in a full tile; TileHeight
// the tree levels a tile spans.
const (
	TileWidth  = tile.Width
	TileHeight = tile.Height
)

// ParseTilePath parses a tile path ("tile/0/x001/234.p/5", "tile/data/067",
// "tile/names/067").
func ParseTilePath(p string) (Tile, error) { return tile.ParsePath(p) }

// ParseNamesTile parses an uncompressed names tile: one JSON object per
// line, each a NamesEntry.
func ParseNamesTile(b []byte) ([]NamesEntry, error) { return tile.ParseNamesTile(b) }

// PartialTiles returns the partial tiles (lowest level first) of a tree of
// the given size: the tiles a monitor fetches to follow the tree's edge.
func PartialTiles(treeSize int64) []Tile { return tile.PartialTiles(treeSize) }
