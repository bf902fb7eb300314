package devmode

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"path/filepath"

	"github.com/mosaic-ct/mosaic/internal/log/ctlog"
	"github.com/mosaic-ct/mosaic/internal/process/config"
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
	m, err := newDevCosigner(dir, c, "mirror")
	if err != nil {
		return nil, err
	}
	lc, origin, prefix, vkeys := m.log, m.origin, m.prefix, m.vkeys
	c.Mirror = &config.MirrorServer{
		Name:    m.name,
		Key:     m.keyPath,
		Prefix:  prefix,
		Storage: config.Storage{Dir: filepath.Join(dir, mirrorDir)},
		Logs: []config.MirroredLog{{
			Origin:    origin,
			Keys:      ctlog.Identity{Origin: origin, Keys: m.logKeys}.VerifierKeys(),
			PublicKey: base64.StdEncoding.EncodeToString(m.logKeys.PublicKeyDER()),
			Issuers:   cmp.Or(lc.MonitoringPrefix, lc.SubmissionPrefix),
		}},
	}
	lc.Mirrors = []config.Mirror{{Name: "dev-mirror", URL: prefix, Keys: vkeys}}
	c.SetAddedDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("the dev mirror's config: %w", err)
	}
	h := sha256.Sum256([]byte(origin))
	return &staticct.DevMirror{MonitoringPrefix: prefix, LogPrefix: prefix + hex.EncodeToString(h[:]) + "/",
		VKey: vkeys[len(vkeys)-1], VKeys: vkeys}, nil
}
