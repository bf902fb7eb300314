package devmode

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mosaic-ct/mosaic/internal/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/config"
	"github.com/mosaic-ct/mosaic/internal/ctlog"
	"github.com/mosaic-ct/mosaic/internal/keys"
	"github.com/mosaic-ct/mosaic/staticct"
)

// Files of the dev mirror (`mosaic serve -dev -mirror`) in the directory.
const (
	MirrorKeyFile = "mirror.key"
	mirrorDir     = "mirror"
)

// AddMirror adds to the dev config c (loaded from dir) a mirror of the dev
// log, served by the same process under <submission prefix>mirror/, and
// makes the log push to it. The mirror's seed is created in dir the first
// time. It returns what dev.json says of the mirror.
func AddMirror(dir string, c *config.Config) (*staticct.DevMirror, error) {
	if len(c.Logs) != 1 {
		return nil, errors.New("the dev config does not have exactly one log")
	}
	lc := &c.Logs[0]
	keyPath := filepath.Join(dir, MirrorKeyFile)
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		if _, err := keys.WriteSeed(keyPath); err != nil {
			return nil, err
		}
	}
	mk, err := keys.LoadCosigner(keyPath, "mirror")
	if err != nil {
		return nil, err
	}
	lk, err := keys.Load(lc.Key)
	if err != nil {
		return nil, err
	}
	sub, err := config.ParsePrefix(lc.SubmissionPrefix)
	if err != nil {
		return nil, err
	}
	origin := config.Origin(sub)
	prefix := sub.String() + "mirror/"
	name := origin + "/mirror"
	cs, err := checkpoint.NewCosigner(name, mk.Ed25519, mk.MLDSA44)
	if err != nil {
		return nil, err
	}
	vkeys := cs.VerifierKeys()
	c.Mirror = &config.MirrorServer{
		Name:    name,
		Key:     keyPath,
		Prefix:  prefix,
		Storage: config.Storage{Dir: filepath.Join(dir, mirrorDir)},
		Logs: []config.MirroredLog{{
			Origin:    origin,
			Keys:      ctlog.Identity{Origin: origin, Keys: lk}.VerifierKeys(),
			PublicKey: base64.StdEncoding.EncodeToString(lk.PublicKeyDER()),
			Issuers:   cmp.Or(lc.MonitoringPrefix, lc.SubmissionPrefix),
		}},
	}
	lc.Mirrors = []config.Mirror{{Name: "dev-mirror", URL: prefix, Keys: vkeys}}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("the dev mirror's config: %w", err)
	}
	h := sha256.Sum256([]byte(origin))
	return &staticct.DevMirror{MonitoringPrefix: prefix, LogPrefix: prefix + hex.EncodeToString(h[:]) + "/",
		VKey: vkeys[len(vkeys)-1], VKeys: vkeys}, nil
}
