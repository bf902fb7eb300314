package devmode

import (
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

// WitnessKeyFile is the dev witness's seed (`mosaic serve -dev -witness`)
// in the directory.
const WitnessKeyFile = "witness.key"

// AddWitness adds to the dev config c (loaded from dir) a witness of the
// dev log (c2sp.org/tlog-witness), served by the same process under
// <submission prefix>witness/, and makes the log ask it for Ed25519 and
// ML-DSA-44 cosignatures. The witness's seed is created in dir the first
// time. It returns what dev.json says of the witness.
func AddWitness(dir string, c *config.Config) (*staticct.DevWitness, error) {
	if len(c.Logs) != 1 {
		return nil, errors.New("the dev config does not have exactly one log")
	}
	lc := &c.Logs[0]
	keyPath := filepath.Join(dir, WitnessKeyFile)
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		if _, err := keys.WriteSeed(keyPath); err != nil {
			return nil, err
		}
	}
	wk, err := keys.LoadCosigner(keyPath, "witness")
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
	prefix := sub.String() + "witness/"
	name := origin + "/witness"
	cs, err := checkpoint.NewCosigner(name, wk.Ed25519, wk.MLDSA44)
	if err != nil {
		return nil, err
	}
	vkeys := cs.VerifierKeys()
	c.Witness = &config.WitnessServer{
		Name:             name,
		Key:              keyPath,
		SubmissionPrefix: prefix,
		Logs: []config.WitnessedLog{{
			Origin: origin,
			Keys:   ctlog.Identity{Origin: origin, Keys: lk}.VerifierKeys(),
		}},
	}
	quorum := 1
	lc.Witnesses = &config.Witnesses{Quorum: &quorum, List: []config.Witness{{Name: "dev-witness", URL: prefix, Keys: vkeys}}}
	c.SetWitnessDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("the dev witness's config: %w", err)
	}
	return &staticct.DevWitness{URL: prefix, VKey: vkeys[len(vkeys)-1], VKeys: vkeys}, nil
}
