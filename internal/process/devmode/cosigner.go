package devmode

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/mosaic-ct/mosaic/internal/base/keys"
	"github.com/mosaic-ct/mosaic/internal/format/checkpoint"
	"github.com/mosaic-ct/mosaic/internal/process/config"
)

// devCosigner is what a cosigner the dev process runs beside the dev log
// (its witness, its mirror) is made of: served under <submission
// prefix><role>/, named <origin>/<role>, its seed in <dir>/<role>.key
// (created the first time, kept across restarts).
type devCosigner struct {
	log     *config.Log // the dev log's config
	logKeys *keys.Keys
	origin  string // the dev log's
	prefix  string // the cosigner's URL prefix
	name    string // the cosigner's name
	keyPath string
	vkeys   []string // Ed25519 cosignature/v1, then ML-DSA-44
}

func newDevCosigner(dir string, c *config.Config, role string) (*devCosigner, error) {
	if len(c.Logs) != 1 {
		return nil, errors.New("the dev config does not have exactly one log")
	}
	lc := &c.Logs[0]
	keyPath := filepath.Join(dir, role+".key")
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		if _, err := keys.WriteSeed(keyPath); err != nil {
			return nil, err
		}
	}
	ck, err := keys.LoadCosigner(keyPath, role)
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
	name := origin + "/" + role
	cs, err := checkpoint.NewCosigner(name, ck.Ed25519, ck.MLDSA44)
	if err != nil {
		return nil, err
	}
	return &devCosigner{log: lc, logKeys: lk, origin: origin, prefix: sub.String() + role + "/",
		name: name, keyPath: keyPath, vkeys: cs.VerifierKeys()}, nil
}
